/* scenario_fixtures.h - what the suites over workloads/scenario (test_scenario, test_report) share: a scenario parsed from text that must be valid. */
#ifndef BQOS_SCENARIO_FIXTURES_H
#define BQOS_SCENARIO_FIXTURES_H

#include <check.h>
#include <string.h>

#include "workloads/scenario.h"

/* The scenario in text (source name "t.json").  Fails the test with the
 * parser's position and message when text is not valid; the caller
 * destroys the scenario. */
static inline scenario_t *parse_ok(const char *text)
{
    scenario_t *s = NULL;
    jsonloc_err_t err;
    int rc = scenario_parse(text, strlen(text), "t.json", NULL, &s, &err);
    ck_assert_msg(rc == 0, "unexpected error %s:%d:%d: %s", err.source, err.line, err.col,
                  err.text);
    return s;
}

#endif
