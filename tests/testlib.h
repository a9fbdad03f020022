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

/* Runs tests[0..n-1] as suite `name`'s one test case, "core" (the usual
 * suite of a module without fixtures), each test allowed `timeout` seconds
 * (0: Check's default).  Returns as testlib_run(). */
static inline int testlib_run_case(const char *name, double timeout, const TTest *const *tests,
                                   size_t n)
{
    Suite *s = suite_create(name);
    TCase *tc = tcase_create("core");
    if (timeout > 0)
        tcase_set_timeout(tc, timeout);
    for (size_t i = 0; i < n; i++)
        tcase_add_test(tc, tests[i]);
    suite_add_tcase(s, tc);
    return testlib_run(s);
}

/* testlib_run_case() with Check's default timeout. */
static inline int testlib_run_tests(const char *name, const TTest *const *tests, size_t n)
{
    return testlib_run_case(name, 0, tests, n);
}

#endif
