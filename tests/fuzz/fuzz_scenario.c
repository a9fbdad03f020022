/* fuzz_scenario.c - libFuzzer harness for the scenario file parser (workloads/scenario): any text is parsed or refused, never crashes or leaks. */
#include <stdint.h>
#include <stdlib.h>

#include "workloads/scenario.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    scenario_t *s = NULL;
    jsonloc_err_t err;
    if (scenario_parse((const char *)data, size, "fuzz", NULL, &s, &err) == 0)
        scenario_destroy(&s);
    return 0;
}
