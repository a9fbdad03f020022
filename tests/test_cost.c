/* test_cost.c - Check suite for cost-aware tokens: storage-node/core/cost (what a request costs) and the scheduler's unit accounts (bytes and IO tokens, large requests, both limits at once). */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "storage-node/core/cost.h"
#include "storage-node/core/sched.h"
#include "tests/testlib.h"

#define U SCHED_UNLIMITED

static sched_item_t items[256];
static int nitems;

/* Enqueues n requests of `cost` units on bucket b. */
static void enq(sched_t *s, int b, int n, uint32_t cost)
{
    for (int i = 0; i < n; i++) {
        ck_assert_int_lt(nitems, 256);
        sched_item_t *it = &items[nitems++];
        memset(it, 0, sizeof *it);
        it->cost = cost;
        ck_assert_int_eq(sched_enqueue(s, b, it), 0);
    }
}

/* Dispatches until nothing may go; returns how many went per bucket. */
static void run(sched_t *s, int *per, int n)
{
    memset(per, 0, (size_t)n * sizeof *per);
    sched_item_t *it;
    while ((it = sched_dispatch(s, 0, NULL)) != NULL)
        per[it->bucket]++;
}

static sched_t *make(int n)
{
    sched_t *s = sched_new(SCHED_POLICY_TOKENS, 0);
    ck_assert_ptr_nonnull(s);
    char name[8];
    for (int i = 0; i < n; i++) {
        snprintf(name, sizeof name, "b%d", i);
        ck_assert_int_eq(sched_add_bucket(s, name, 1), i);
    }
    nitems = 0;
    return s;
}

/* Gives bucket b IO tokens (r, l) and unit tokens (ur, ul), unpaced. */
static void grant(sched_t *s, int b, int64_t r, int64_t l, int64_t ur, int64_t ul)
{
    ck_assert_int_eq(sched_set_tokens(s, b, r, l, INFINITY, 0), 0);
    ck_assert_int_eq(sched_set_units(s, b, 1, ur, ul, INFINITY, 0), 0);
}

START_TEST(test_cost_of_sizes_and_kinds)
{
    cost_config_t c = COST_CONFIG_DEFAULT;
    ck_assert_int_eq(cost_check(&c), 0);
    ck_assert_uint_eq(cost_of(&c, COST_READ, 0), 0);
    ck_assert_uint_eq(cost_of(&c, COST_READ, 1), 1);
    ck_assert_uint_eq(cost_of(&c, COST_READ, 4096), 1);
    ck_assert_uint_eq(cost_of(&c, COST_READ, 4097), 2);
    ck_assert_uint_eq(cost_of(&c, COST_WRITE, 32u << 20), 8192);
    ck_assert_uint_eq(cost_of(&c, COST_FLUSH, 0), 1);
    ck_assert_uint_eq(cost_of(&c, COST_TRIM, 1u << 30), 1); /* whatever its length */
    ck_assert_uint_eq(cost_of(&c, COST_NONE, 4096), 0);
    c.write_weight = 2.5;
    c.read_weight = 0.5;
    c.flush = 8;
    c.trim = 0;
    c.unit = 512;
    ck_assert_int_eq(cost_check(&c), 0);
    ck_assert_uint_eq(cost_of(&c, COST_WRITE, 4096), 20);
    ck_assert_uint_eq(cost_of(&c, COST_READ, 4096), 4);
    ck_assert_uint_eq(cost_of(&c, COST_READ, 513), 1); /* ceil(0.5 x 513 / 512) */
    ck_assert_uint_eq(cost_of(&c, COST_FLUSH, 4096), 8);
    ck_assert_uint_eq(cost_of(&c, COST_TRIM, 4096), 0);
    c.unit = 1;
    c.write_weight = COST_WEIGHT_MAX;
    ck_assert_uint_eq(cost_of(&c, COST_WRITE, UINT64_C(1) << 40), UINT32_MAX); /* saturates */
    cost_config_t bad = COST_CONFIG_DEFAULT;
    bad.unit = 0;
    ck_assert_int_eq(cost_check(&bad), -EINVAL);
    bad = COST_CONFIG_DEFAULT;
    bad.read_weight = -1;
    ck_assert_int_eq(cost_check(&bad), -EINVAL);
    bad = COST_CONFIG_DEFAULT;
    bad.flush = COST_FIXED_MAX + 1;
    ck_assert_int_eq(cost_check(&bad), -EINVAL);
}
END_TEST

/* Without a unit account a request is one token whatever its cost (the
 * paper); the node counts the units it dispatches only while some bucket
 * has an account (nothing is read on the paper's path). */
START_TEST(test_cost_off_is_one_token_per_io)
{
    sched_t *s = make(2);
    ck_assert_int_eq(sched_set_tokens(s, 0, 0, 3, INFINITY, 0), 0);
    enq(s, 0, 5, 1000);
    int per[2];
    run(s, per, 2);
    ck_assert_int_eq(per[0], 3);
    sched_node_stats_t ns;
    sched_node_stats(s, &ns);
    ck_assert_uint_eq(ns.units, 0);
    sched_bucket_stats_t st;
    ck_assert_int_eq(sched_bucket_stats(s, 0, &st), 0);
    ck_assert_int_eq(st.units_on, 0);
    grant(s, 1, 0, U, 0, U); /* another bucket has one: every unit counts */
    ck_assert_int_eq(sched_set_tokens(s, 0, 0, 2, INFINITY, 0), 0);
    run(s, per, 2);
    ck_assert_int_eq(per[0], 2);
    sched_node_stats(s, &ns);
    ck_assert_uint_eq(ns.units, 2000);
    sched_destroy(&s);
}
END_TEST

/* Both limits hold: whichever dimension runs out first binds. */
START_TEST(test_cost_both_limits_at_once)
{
    sched_t *s = make(2);
    /* b0: 10 IOs but 5 units -> units bind; b1: 3 IOs, 100 units -> IOs bind. */
    grant(s, 0, 0, 10, 0, 5);
    grant(s, 1, 0, 3, 0, 100);
    enq(s, 0, 20, 1);
    enq(s, 1, 20, 1);
    int per[2];
    run(s, per, 2);
    ck_assert_int_eq(per[0], 5);
    ck_assert_int_eq(per[1], 3);
    sched_bucket_stats_t st;
    ck_assert_int_eq(sched_bucket_stats(s, 0, &st), 0);
    ck_assert_int_eq(st.l_tokens, 5);
    ck_assert_int_eq(st.lu_tokens, 0);
    ck_assert_uint_eq(st.served_u, 5);
    ck_assert_uint_eq(st.arrivals_u, 20);
    ck_assert_uint_eq(st.served_l, 5);
    ck_assert_int_eq(sched_bucket_stats(s, 1, &st), 0);
    ck_assert_int_eq(st.l_tokens, 0);
    ck_assert_int_eq(st.lu_tokens, 97);
    /* Off again: back to IO tokens alone. */
    ck_assert_int_eq(sched_set_units(s, 0, 0, 0, 0, INFINITY, 0), 0);
    run(s, per, 2);
    ck_assert_int_eq(per[0], 5);
    sched_destroy(&s);
}
END_TEST

/* A request larger than what is left starts while one unit is left (no
 * starvation), drives the count negative, and the debt is paid before the
 * bucket goes again, across a period too: the service exceeds the tokens
 * by less than one request. */
START_TEST(test_cost_large_request_debt)
{
    sched_t *s = make(1);
    grant(s, 0, 0, U, 0, 1);
    enq(s, 0, 3, 1000);
    int per[1];
    run(s, per, 1);
    ck_assert_int_eq(per[0], 1); /* started on one unit */
    sched_bucket_stats_t st;
    ck_assert_int_eq(sched_bucket_stats(s, 0, &st), 0);
    ck_assert_int_eq(st.lu_tokens, -999);
    /* A new period: the debt comes off its grants. */
    sched_period_start(s);
    ck_assert_int_eq(sched_set_units(s, 0, 1, 0, 1500, INFINITY, 0), 0);
    ck_assert_int_eq(sched_bucket_stats(s, 0, &st), 0);
    ck_assert_int_eq(st.lu_tokens, 501);
    run(s, per, 1);
    ck_assert_int_eq(per[0], 1);
    ck_assert_int_eq(sched_bucket_stats(s, 0, &st), 0);
    ck_assert_int_eq(st.lu_tokens, -499);
    /* Every grant of the period pays the carried debt (the controller's
     * counts are net of this period's service only): 1000 - 999. */
    ck_assert_int_eq(sched_set_units(s, 0, 1, 0, 1000, INFINITY, 0), 0);
    ck_assert_int_eq(sched_bucket_stats(s, 0, &st), 0);
    ck_assert_int_eq(st.lu_tokens, 1);
    run(s, per, 1);
    ck_assert_int_eq(per[0], 1);
    enq(s, 0, 1, 1000);
    ck_assert_int_eq(sched_set_units(s, 0, 1, 0, 500, INFINITY, 0), 0);
    run(s, per, 1);
    ck_assert_int_eq(per[0], 0); /* 500 - 999 < 1 */
    /* A debt larger than R is paid by R first, then owed by L; the new
     * carry replaces the old one (the count paid it). */
    sched_period_start(s);
    ck_assert_int_eq(sched_set_units(s, 0, 1, 200, 200, INFINITY, 0), 0);
    ck_assert_int_eq(sched_bucket_stats(s, 0, &st), 0);
    ck_assert_int_eq(st.ru_tokens, 0);
    ck_assert_int_eq(st.lu_tokens, -99); /* 200 + 200 - 499 */
    sched_destroy(&s);
}
END_TEST

/* A unit R-token makes a bucket R-eligible even without IO R-tokens (a
 * reservation in bytes/s only); units come from R first, then L. */
START_TEST(test_cost_unit_reservation_goes_first)
{
    sched_t *s = make(2);
    grant(s, 0, 0, U, 2, U);
    ck_assert_int_eq(sched_set_tokens(s, 1, 0, U, INFINITY, 0), 0);
    enq(s, 1, 3, 1);
    enq(s, 0, 3, 1);
    int order[6];
    for (int i = 0; i < 6; i++) {
        sched_item_t *it = sched_dispatch(s, 0, NULL);
        ck_assert_ptr_nonnull(it);
        order[i] = it->bucket;
    }
    ck_assert_int_eq(order[0], 0);
    ck_assert_int_eq(order[1], 0);
    /* then round robin between the two */
    ck_assert_int_ne(order[2], order[3]);
    sched_bucket_stats_t st;
    ck_assert_int_eq(sched_bucket_stats(s, 0, &st), 0);
    ck_assert_int_eq(st.ru_tokens, 0);
    ck_assert_uint_eq(st.served_u, 3);
    /* R-tokens in both dimensions: R class, both consumed. */
    grant(s, 0, 1, 0, 4, 0);
    enq(s, 0, 2, 3);
    sched_class_t c;
    ck_assert_ptr_nonnull(sched_dispatch(s, 0, &c));
    ck_assert_int_eq(c, SCHED_CLASS_R);
    ck_assert_int_eq(sched_bucket_stats(s, 0, &st), 0);
    ck_assert_int_eq(st.r_tokens, 0);
    ck_assert_int_eq(st.ru_tokens, 1);
    ck_assert_ptr_null(sched_dispatch(s, 0, &c)); /* no IO token left */
    sched_destroy(&s);
}
END_TEST

/* A get is charged what it returned, once known: the debt holds the
 * bucket back; routed requests are counted on their origin too. */
START_TEST(test_cost_charge_after_reply)
{
    sched_t *s = make(2);
    grant(s, 0, 0, U, 0, 10);
    ck_assert_int_eq(sched_set_route(s, 1, 0), 0);
    enq(s, 1, 2, 0); /* two gets of unknown size, routed to b0 */
    sched_item_t *it = sched_dispatch(s, 0, NULL);
    ck_assert_ptr_nonnull(it);
    ck_assert_int_eq(sched_charge(s, it, 25), 0);
    ck_assert_ptr_null(sched_dispatch(s, 0, NULL)); /* 10 - 25 < 1 */
    sched_bucket_stats_t st;
    ck_assert_int_eq(sched_bucket_stats(s, 0, &st), 0);
    ck_assert_int_eq(st.lu_tokens, -15);
    ck_assert_uint_eq(st.served_u, 25);
    ck_assert_int_eq(sched_bucket_stats(s, 1, &st), 0);
    ck_assert_uint_eq(st.served_u, 25);
    ck_assert_uint_eq(st.arrivals_u, 25);
    sched_node_stats_t ns;
    sched_node_stats(s, &ns);
    ck_assert_uint_eq(ns.units, 25);
    sched_item_t bad = {.bucket = 5, .origin = -1};
    ck_assert_int_eq(sched_charge(s, &bad, 1), -EINVAL);
    ck_assert_int_eq(sched_set_units(s, 0, 1, -1, 0, INFINITY, 0), -EINVAL);
    sched_destroy(&s);
}
END_TEST

/* The scheduler's counts over many random requests: service never exceeds
 * the unit grant by a request or more, and every bucket with a grant is
 * served (no starvation of large requests among small ones). */
START_TEST(test_cost_overshoot_bounded)
{
    sched_t *s = make(3);
    for (int b = 0; b < 3; b++) {
        grant(s, b, 0, U, 0, 100);
    }
    static const uint32_t size[3] = {1, 7, 64};
    uint64_t served[3] = {0};
    for (int round = 0; round < 20; round++) {
        for (int b = 0; b < 3; b++)
            enq(s, b, 1, size[b]);
        sched_item_t *it;
        while ((it = sched_dispatch(s, 0, NULL)) != NULL)
            served[it->bucket] += it->cost;
    }
    for (int b = 0; b < 3; b++) {
        ck_assert_uint_gt(served[b], 0);
        ck_assert_uint_lt(served[b], 100 + size[b]);
    }
    sched_destroy(&s);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {
        test_cost_of_sizes_and_kinds,       test_cost_off_is_one_token_per_io,
        test_cost_both_limits_at_once,      test_cost_large_request_debt,
        test_cost_unit_reservation_goes_first, test_cost_charge_after_reply,
        test_cost_overshoot_bounded,
    };
    return testlib_run_tests("cost", tests, sizeof tests / sizeof tests[0]);
}
