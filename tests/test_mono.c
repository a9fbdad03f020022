/* test_mono.c - Check suite for common/mono: the monotonic clock in seconds. */
#include <check.h>
#include <stdlib.h>
#include <time.h>

#include "common/mono.h"
#include "tests/testlib.h"

START_TEST(test_mono_advances_in_seconds)
{
    double a = mono_now();
    ck_assert(a > 0);
    struct timespec d = {0, 20 * 1000 * 1000};
    nanosleep(&d, NULL);
    double b = mono_now();
    ck_assert_double_ge(b - a, 0.019);
    ck_assert_double_lt(b - a, 5.0); /* seconds, not milli- or nanoseconds */
    for (int i = 0; i < 1000; i++) {
        double c = mono_now();
        ck_assert_double_ge(c, b);
        b = c;
    }
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {test_mono_advances_in_seconds};
    return testlib_run_tests("mono", tests, sizeof tests / sizeof tests[0]);
}
