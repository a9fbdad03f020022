/* test_version.c - Check suite for common/version.h: one "MAJOR.MINOR.PATCH" literal. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "common/version.h"
#include "tests/testlib.h"

START_TEST(test_version_is_three_numbers)
{
    static const char v[] = BQOS_VERSION; /* a literal: this only compiles if it is one */
    int dots = 0, digits = 0;
    for (const char *p = v; *p; p++) {
        if (*p == '.') {
            ck_assert_int_gt(digits, 0); /* no empty part */
            dots++;
            digits = 0;
        } else {
            ck_assert_msg(*p >= '0' && *p <= '9', "not a digit in %s", v);
            digits++;
        }
    }
    ck_assert_int_eq(dots, 2);
    ck_assert_int_gt(digits, 0);
    ck_assert_str_eq("bqos-" BQOS_VERSION, "bqos-0.2.0");
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {test_version_is_three_numbers};
    return testlib_run_tests("version", tests, sizeof tests / sizeof tests[0]);
}
