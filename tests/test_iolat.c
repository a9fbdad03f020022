/* test_iolat.c - Check suite for storage-node/io/iolat: a node's per-bucket IO accounting for its metrics (latency, wait, bytes by the class the scheduler paid with, routed buckets, refusals). */
#include <check.h>
#include <math.h>

#include "common/mono.h"
#include "storage-node/core/sched.h"
#include "storage-node/io/iolat.h"
#include "tests/testlib.h"

/* Dispatches one item of bucket b (enqueued now) and completes it with
 * `bytes`; returns the class it was paid with. */
static int serve(sched_t *s, iolat_t *l, int b, sched_item_t *it, uint64_t bytes)
{
    *it = (sched_item_t){0};
    ck_assert_int_eq(sched_enqueue(s, b, it), 0);
    sched_item_t *got = sched_dispatch(s, 0, NULL);
    ck_assert_ptr_eq(got, it);
    double t = mono_now();
    iolat_done(l, it, &(iolat_ts_t){.arrival = t - 0.002, .dispatch = t - 0.001}, bytes);
    return it->cls;
}

START_TEST(test_iolat_bytes_by_class)
{
    sched_t *s = sched_new(SCHED_POLICY_TOKENS, 0);
    iolat_t *l = iolat_new();
    int red = sched_add_bucket(s, "red", 1), blue = sched_add_bucket(s, "blue", 1);
    ck_assert_int_eq(sched_set_tokens(s, red, 1, 1, INFINITY, 0), 0);
    ck_assert_int_eq(sched_set_tokens(s, blue, 0, SCHED_UNLIMITED, INFINITY, 0), 0);
    sched_item_t it;
    ck_assert_int_eq(serve(s, l, red, &it, 100), SCHED_CLASS_R);
    ck_assert_int_eq(serve(s, l, red, &it, 20), SCHED_CLASS_L);
    ck_assert_int_eq(serve(s, l, blue, &it, 3), SCHED_CLASS_O);
    const iolat_bucket_t *r = iolat_bucket(l, red), *b = iolat_bucket(l, blue);
    ck_assert_ptr_nonnull(r);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq(r->bytes[SCHED_CLASS_R], 100);
    ck_assert_uint_eq(r->bytes[SCHED_CLASS_L], 20);
    ck_assert_uint_eq(r->bytes[SCHED_CLASS_O], 0);
    ck_assert_uint_eq(b->bytes[SCHED_CLASS_O], 3);
    ck_assert_uint_eq(b->bytes[SCHED_CLASS_R] + b->bytes[SCHED_CLASS_L], 0);
    /* the timing of the same IOs: two in red's histogram, 1 ms waited each */
    uint64_t n = 0;
    for (int i = 0; i <= IOLAT_NBOUNDS; i++)
        n += r->counts[i];
    ck_assert_uint_eq(n, 2);
    ck_assert_double_eq_tol(r->wait, 0.002, 1e-9);
    ck_assert_double_ge(r->sum, 0.004);
    iolat_destroy(&l);
    sched_destroy(&s);
}
END_TEST

START_TEST(test_iolat_routed_counts_both)
{
    sched_t *s = sched_new(SCHED_POLICY_TOKENS, 0);
    iolat_t *l = iolat_new();
    int def = sched_add_bucket(s, "default", 1), x = sched_add_bucket(s, "x", 1);
    ck_assert_int_eq(sched_set_route(s, x, def), 0);
    ck_assert_int_eq(sched_set_tokens(s, def, 1, 0, INFINITY, 0), 0);
    sched_item_t it;
    ck_assert_int_eq(serve(s, l, x, &it, 4096), SCHED_CLASS_R);
    /* as the scheduler's served counters: the sender and the route */
    ck_assert_uint_eq(iolat_bucket(l, x)->bytes[SCHED_CLASS_R], 4096);
    ck_assert_uint_eq(iolat_bucket(l, def)->bytes[SCHED_CLASS_R], 4096);
    uint64_t n = 0;
    for (int i = 0; i <= IOLAT_NBOUNDS; i++)
        n += iolat_bucket(l, def)->counts[i];
    ck_assert_uint_eq(n, 0); /* latency is the sender's only */
    iolat_destroy(&l);
    sched_destroy(&s);
}
END_TEST

START_TEST(test_iolat_refused)
{
    iolat_t *l = iolat_new();
    ck_assert_ptr_null(iolat_bucket(l, 2));
    iolat_refused(l, 2);
    iolat_refused(l, 2);
    iolat_refused(l, -1);
    ck_assert_uint_eq(iolat_bucket(l, 2)->refused, 2);
    ck_assert_uint_eq(iolat_bucket(l, 0)->refused, 0);
    ck_assert_uint_eq(iolat_refused_unknown(l), 1);
    /* metrics off: nothing counted, nothing read */
    iolat_refused(NULL, 1);
    ck_assert_uint_eq(iolat_refused_unknown(NULL), 0);
    ck_assert(iolat_now(NULL) == 0);
    iolat_destroy(&l);
    ck_assert_ptr_null(l);
    iolat_destroy(&l);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {test_iolat_bytes_by_class, test_iolat_routed_counts_both,
                                  test_iolat_refused};
    return testlib_run_tests("iolat", tests, sizeof tests / sizeof tests[0]);
}
