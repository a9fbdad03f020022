/* test_growarr.c - Check suite for common/growarr: grows by doubling from 64 to cover an index, zeroes what it adds, keeps what was there. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>

#include "common/growarr.h"
#include "tests/testlib.h"

START_TEST(test_growarr_grows_zeroed)
{
    uint64_t *a = NULL;
    int cap = 0;
    void *p = a;
    ck_assert_int_eq(growarr(&p, &cap, 0, sizeof *a), 0);
    ck_assert_int_eq(cap, 0);
    ck_assert_int_eq(growarr(&p, &cap, 1, sizeof *a), 0);
    a = p;
    ck_assert_int_eq(cap, 64);
    for (int i = 0; i < cap; i++)
        ck_assert_uint_eq(a[i], 0);
    a[63] = 7;
    ck_assert_int_eq(growarr(&p, &cap, 64, sizeof *a), 0); /* already covered */
    ck_assert_int_eq(cap, 64);
    ck_assert_int_eq(growarr(&p, &cap, 200, sizeof *a), 0);
    a = p;
    ck_assert_int_eq(cap, 256);
    ck_assert_uint_eq(a[63], 7);
    for (int i = 64; i < cap; i++)
        ck_assert_uint_eq(a[i], 0);
    free(a);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {test_growarr_grows_zeroed};
    return testlib_run_tests("growarr", tests, sizeof tests / sizeof tests[0]);
}
