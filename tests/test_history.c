/* test_history.c - Check suite for controller/daemon/history: the ring of a bucket's period outcomes (order, wrap, bound). */
#include <check.h>

#include "controller/daemon/history.h"
#include "tests/testlib.h"

START_TEST(test_history_empty)
{
    history_t *h = history_new();
    ck_assert_ptr_nonnull(h);
    ck_assert_uint_eq(history_count(h), 0);
    ck_assert_ptr_null(history_get(h, 0));
    history_destroy(&h);
    ck_assert_ptr_null(h);
    history_destroy(&h); /* NULL accepted */
    history_destroy(NULL);
}
END_TEST

START_TEST(test_history_newest_first)
{
    history_t *h = history_new();
    for (uint64_t p = 1; p <= 3; p++)
        history_push(h, &(history_rec_t){.period = p, .served = 10 * p, .flags = HISTORY_RES_MET});
    ck_assert_uint_eq(history_count(h), 3);
    for (size_t i = 0; i < 3; i++) {
        const history_rec_t *r = history_get(h, i);
        ck_assert_ptr_nonnull(r);
        ck_assert_uint_eq(r->period, 3 - i);
        ck_assert_uint_eq(r->served, 10 * (3 - i));
    }
    ck_assert_ptr_null(history_get(h, 3));
    history_destroy(&h);
}
END_TEST

START_TEST(test_history_wraps_and_stays_bounded)
{
    history_t *h = history_new();
    const uint64_t n = 3 * HISTORY_PERIODS + 5;
    for (uint64_t p = 1; p <= n; p++) {
        history_push(h, &(history_rec_t){.period = p, .flags = p % 2 ? HISTORY_HELD : HISTORY_RES_MISSED});
        ck_assert_uint_eq(history_count(h), p < HISTORY_PERIODS ? p : HISTORY_PERIODS);
        ck_assert_uint_eq(history_get(h, 0)->period, p);
    }
    /* The last HISTORY_PERIODS, newest first; nothing older survives. */
    for (size_t i = 0; i < HISTORY_PERIODS; i++) {
        const history_rec_t *r = history_get(h, i);
        ck_assert_uint_eq(r->period, n - i);
        ck_assert_uint_eq(r->flags, (n - i) % 2 ? HISTORY_HELD : HISTORY_RES_MISSED);
    }
    ck_assert_ptr_null(history_get(h, HISTORY_PERIODS));
    ck_assert_ptr_null(history_get(h, (size_t)-1));
    history_destroy(&h);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {test_history_empty, test_history_newest_first,
                                  test_history_wraps_and_stays_bounded};
    return testlib_run_tests("history", tests, sizeof tests / sizeof tests[0]);
}
