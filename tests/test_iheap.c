/* test_iheap.c - Check suite for common/iheap: set, re-key, remove and top against a plain array, ties by id, bounds. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "common/iheap.h"
#include "common/rng.h"
#include "tests/testlib.h"

#define N 300

/* The reference: the least key (lower id first) by a linear scan. */
static int ref_top(const int *in, const double *key, double *k)
{
    int best = -1;
    for (int i = 0; i < N; i++)
        if (in[i] && (best < 0 || key[i] < key[best]))
            best = i;
    if (best >= 0)
        *k = key[best];
    return best;
}

START_TEST(test_iheap_random_vs_reference)
{
    iheap_t *h = iheap_new(N);
    ck_assert_ptr_nonnull(h);
    int in[N] = {0};
    double key[N];
    size_t n = 0;
    rng_t g;
    rng_seed(&g, 7, 0);
    for (int step = 0; step < 200000; step++) {
        int id = (int)rng_below(&g, N);
        uint64_t op = rng_below(&g, 10);
        if (op < 5) {
            /* few distinct keys: ties are common */
            double k = (double)rng_below(&g, 50);
            ck_assert_int_eq(iheap_set(h, id, k), 0);
            n += !in[id];
            in[id] = 1;
            key[id] = k;
        } else if (op < 8) {
            iheap_remove(h, id);
            n -= in[id];
            in[id] = 0;
        } else if (op == 8) {
            double k1 = 0;
            int t = iheap_top(h, &k1);
            if (t >= 0) {
                iheap_remove(h, t);
                in[t] = 0;
                n--;
            }
        }
        ck_assert_int_eq(iheap_contains(h, id), in[id]);
        ck_assert_uint_eq(iheap_size(h), n);
        double kr = 0, kh = 0;
        int tr = ref_top(in, key, &kr), th = iheap_top(h, &kh);
        ck_assert_int_eq(th, tr);
        if (tr >= 0)
            ck_assert(kh == kr);
    }
    iheap_clear(h);
    ck_assert_int_eq(iheap_top(h, NULL), -1);
    ck_assert_uint_eq(iheap_size(h), 0);
    for (int i = 0; i < N; i++)
        ck_assert(!iheap_contains(h, i));
    iheap_destroy(&h);
    ck_assert_ptr_null(h);
    iheap_destroy(&h); /* accepts NULL */
}
END_TEST

START_TEST(test_iheap_bounds_and_reserve)
{
    iheap_t *h = iheap_new(2);
    ck_assert_ptr_nonnull(h);
    ck_assert_int_eq(iheap_set(h, -1, 1.0), -EINVAL);
    ck_assert_int_eq(iheap_set(h, 2, 1.0), -EINVAL);
    ck_assert_int_eq(iheap_set(h, 0, NAN), -EINVAL);
    ck_assert_int_eq(iheap_size(h), 0);
    ck_assert(!iheap_contains(h, 5));
    iheap_remove(h, 9); /* absent: nothing */
    ck_assert_int_eq(iheap_set(h, 1, INFINITY), 0);
    ck_assert_int_eq(iheap_set(h, 0, INFINITY), 0);
    ck_assert_int_eq(iheap_top(h, NULL), 0); /* equal keys: lower id */
    ck_assert_int_eq(iheap_reserve(h, 1000), 0);
    ck_assert_int_eq(iheap_set(h, 999, -5.0), 0);
    double k;
    ck_assert_int_eq(iheap_top(h, &k), 999);
    ck_assert(k == -5.0);
    ck_assert_int_eq(iheap_set(h, 999, 1e300), 0); /* re-key down the heap */
    ck_assert_int_eq(iheap_top(h, NULL), 999);
    ck_assert_int_eq(iheap_set(h, 999, INFINITY), 0);
    ck_assert_int_eq(iheap_top(h, NULL), 0);
    ck_assert_int_eq(iheap_size(h), 3);
    ck_assert_int_eq(iheap_reserve(h, ((size_t)1 << 30) + 1), -ENOMEM);
    ck_assert_int_eq(iheap_size(h), 3);
    iheap_destroy(&h);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {test_iheap_random_vs_reference, test_iheap_bounds_and_reserve};
    return testlib_run_timed("iheap", 60, tests, sizeof tests / sizeof tests[0]);
}
