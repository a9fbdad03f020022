/* testlib.h - what every Check suite's main() shares: build the usual one-case suite, run it, turn its failures into the exit status. */
#ifndef BQOS_TESTLIB_H
#define BQOS_TESTLIB_H

#include <check.h>
#include <stdlib.h>

/* Runs every case of suite s (the runner takes s over and frees it) with
 * CK_NORMAL output.  Returns EXIT_SUCCESS when all passed, EXIT_FAILURE
 * otherwise: main() returns it. */
static inline int testlib_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/* The usual suite of a module: one test case. */
typedef struct {
    const char *name;        /* the suite's */
    const char *tcase;       /* the test case's; NULL: "core" */
    double timeout;          /* seconds per test; 0: Check's default */
    void (*setup)(void);     /* fixture; NULL: none */
    void (*teardown)(void);
    int unchecked;           /* 1: the fixture runs once around the case, not per test */
} testlib_case_t;

/* Runs tests[0..n-1] as c's suite.  Returns as testlib_run(). */
static inline int testlib_run_case(const testlib_case_t *c, const TTest *const *tests, size_t n)
{
    Suite *s = suite_create(c->name);
    TCase *tc = tcase_create(c->tcase ? c->tcase : "core");
    if ((c->setup || c->teardown) && c->unchecked)
        tcase_add_unchecked_fixture(tc, c->setup, c->teardown);
    else if (c->setup || c->teardown)
        tcase_add_checked_fixture(tc, c->setup, c->teardown);
    if (c->timeout > 0)
        tcase_set_timeout(tc, c->timeout);
    for (size_t i = 0; i < n; i++)
        tcase_add_test(tc, tests[i]);
    suite_add_tcase(s, tc);
    return testlib_run(s);
}

/* testlib_run_case() without fixture or timeout. */
static inline int testlib_run_tests(const char *name, const TTest *const *tests, size_t n)
{
    const testlib_case_t c = {.name = name};
    return testlib_run_case(&c, tests, n);
}

#endif
