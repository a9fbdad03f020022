/* test_bitset.c - Check suite for common/bitset: set/clear/find-next against a plain array. */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "common/bitset.h"
#include "tests/testlib.h"

/* Deterministic xorshift so failures reproduce. */
static uint64_t rng = 88172645463325252ULL;
static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static long ref_next(const unsigned char *ref, size_t n, size_t from)
{
    for (size_t i = from; i < n; i++)
        if (ref[i])
            return (long)i;
    return -1;
}

static long ref_next_wrap(const unsigned char *ref, size_t n, size_t from)
{
    long r = from < n ? ref_next(ref, n, from) : -1;
    if (r < 0 && from > 0)
        r = ref_next(ref, n, 0);
    return r;
}

START_TEST(test_bitset_empty)
{
    bitset_t *b = bitset_new(0);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq(bitset_size(b), 0);
    bitset_set(b, 0); /* out of range: ignored */
    ck_assert(!bitset_any(b));
    ck_assert_int_eq(bitset_next(b, 0), -1);
    ck_assert_int_eq(bitset_next_wrap(b, 5), -1);
    bitset_destroy(&b);
    ck_assert_ptr_null(b);
    bitset_destroy(&b);
    bitset_destroy(NULL);
}
END_TEST

START_TEST(test_bitset_boundaries)
{
    bitset_t *b = bitset_new(4097);
    ck_assert_ptr_nonnull(b);
    size_t idx[] = {0, 63, 64, 127, 128, 4032, 4095, 4096};
    for (size_t i = 0; i < sizeof(idx) / sizeof(idx[0]); i++) {
        bitset_set(b, idx[i]);
        ck_assert(bitset_test(b, idx[i]));
        ck_assert_int_eq(bitset_next(b, 0), (long)idx[i]);
        ck_assert_int_eq(bitset_next(b, idx[i]), (long)idx[i]);
        ck_assert_int_eq(bitset_next(b, idx[i] + 1), -1);
        ck_assert_int_eq(bitset_next_wrap(b, idx[i] + 1), (long)idx[i]);
        bitset_clear(b, idx[i]);
        ck_assert(!bitset_any(b));
    }
    bitset_set(b, 4097); /* out of range: ignored */
    ck_assert(!bitset_any(b));
    ck_assert(!bitset_test(b, 4097));
    bitset_set(b, 10);
    bitset_set(b, 3000);
    ck_assert_int_eq(bitset_next_wrap(b, 11), 3000);
    ck_assert_int_eq(bitset_next_wrap(b, 3001), 10);
    ck_assert_int_eq(bitset_next_wrap(b, 10), 10);
    ck_assert_int_eq(bitset_next_wrap(b, 99999), 10);
    bitset_destroy(&b);
}
END_TEST

/* Random set/clear/find against a byte array, at sizes spanning 1..4 levels. */
START_TEST(test_bitset_random_vs_reference)
{
    size_t sizes[] = {1, 63, 64, 65, 4096, 4097, 300000};
    for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
        size_t n = sizes[si];
        bitset_t *b = bitset_new(n);
        unsigned char *ref = calloc(n, 1);
        ck_assert_ptr_nonnull(b);
        ck_assert_ptr_nonnull(ref);
        for (int op = 0; op < 20000; op++) {
            size_t i = (size_t)(rnd() % n);
            /* Sparse sets make the climb over empty words matter. */
            if (rnd() % 3 == 0) {
                bitset_set(b, i);
                ref[i] = 1;
            } else {
                bitset_clear(b, i);
                ref[i] = 0;
            }
            size_t from = (size_t)(rnd() % (n + 2));
            ck_assert_int_eq(bitset_next(b, from), from < n ? ref_next(ref, n, from) : -1);
            ck_assert_int_eq(bitset_next_wrap(b, from), ref_next_wrap(ref, n, from));
            ck_assert_int_eq(bitset_test(b, i), ref[i]);
        }
        free(ref);
        bitset_destroy(&b);
    }
}
END_TEST

START_TEST(test_bitset_resize_keeps_bits)
{
    bitset_t *b = bitset_new(100);
    bitset_set(b, 5);
    bitset_set(b, 99);
    ck_assert_int_eq(bitset_resize(b, 100000), 0);
    ck_assert_uint_eq(bitset_size(b), 100000);
    ck_assert(bitset_test(b, 5));
    ck_assert(bitset_test(b, 99));
    ck_assert_int_eq(bitset_next(b, 6), 99);
    bitset_set(b, 99999);
    ck_assert_int_eq(bitset_next(b, 100), 99999);
    /* Shrinking drops bits beyond the new size, also from the summaries. */
    ck_assert_int_eq(bitset_resize(b, 70), 0);
    ck_assert_int_eq(bitset_next(b, 6), -1);
    ck_assert_int_eq(bitset_next_wrap(b, 6), 5);
    ck_assert_int_eq(bitset_resize(b, 0), 0);
    ck_assert(!bitset_any(b));
    ck_assert_int_eq(bitset_resize(b, ((size_t)1 << 31) + 1), -EINVAL);
    ck_assert_ptr_null(bitset_new(((size_t)1 << 31) + 1));
    bitset_destroy(&b);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {test_bitset_empty, test_bitset_boundaries,
                                  test_bitset_random_vs_reference, test_bitset_resize_keeps_bits};
    /* sanitizer builds on a loaded 2-core machine */
    return testlib_run_timed("bitset", 60, tests, sizeof tests / sizeof tests[0]);
}
