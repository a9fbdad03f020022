/* testlib.h - what every Check suite's main() shares: run the suite, turn its failures into the exit status. */
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

#endif
