/* test_rng.c - Check suite for common/rng: the three generators' sequences
 * (outputs of bqos-pshift gen, bqos-ctrl-prof and the workloads depend on
 * them bit for bit), Zipf weights and splits, random subsets. */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "common/rng.h"
#include "tests/testlib.h"

/* Values recorded from the generators before they moved here. */
START_TEST(test_rng_splitmix_sequence)
{
    rng_t r;
    rng_seed_raw(&r, 0);
    ck_assert_uint_eq(rng_next(&r), 0xe220a8397b1dcdafULL); /* splitmix64's reference value */
    rng_seed(&r, 1, 2);
    ck_assert_uint_eq(rng_next(&r), 0x76fba2b5da5733caULL);
    ck_assert_uint_eq(rng_next(&r), 0x90fd6e529eaa19b6ULL);
    rng_t a, b;
    rng_seed(&a, 5, 0);
    rng_seed(&b, 5, 1);
    ck_assert_uint_ne(rng_next(&a), rng_next(&b)); /* streams differ */
    for (int i = 0; i < 1000; i++) {
        double u = rng_uniform(&r);
        ck_assert(u >= 0 && u < 1);
        ck_assert_uint_lt(rng_below(&r, 5), 5);
    }
    ck_assert_uint_eq(rng_below(&r, 0), 0);
}
END_TEST

START_TEST(test_rng_x256_sequence)
{
    rng_x256_t r;
    rng_x256_seed(&r, 42);
    ck_assert_uint_eq(rng_x256_next(&r), 0x15780b2e0c2ec716ULL);
    ck_assert_uint_eq(rng_x256_next(&r), 0x6104d9866d113a7eULL);
    ck_assert_uint_eq(rng_x256_next(&r), 0xae17533239e499a1ULL);
    ck_assert_uint_eq(rng_x256_below(&r, 1000), 193);
    ck_assert_uint_eq(rng_x256_below(&r, 7), 4);
    for (int i = 0; i < 1000; i++)
        ck_assert_uint_lt(rng_x256_below(&r, 3), 3);
}
END_TEST

/* The C library's rand_r() may differ elsewhere; on glibc the two agree. */
START_TEST(test_rng_lcg_is_glibc_rand_r)
{
    static const unsigned seeds[] = {0, 1, 7919, 123456789u, 0xffffffffu};
    for (size_t k = 0; k < sizeof seeds / sizeof seeds[0]; k++) {
        rng_lcg_t r;
        rng_lcg_seed(&r, seeds[k]);
#ifdef __GLIBC__
        unsigned s = seeds[k];
        for (int i = 0; i < 10000; i++)
            ck_assert_int_eq(rng_lcg_next(&r), rand_r(&s));
        ck_assert_uint_eq(r.state, s);
#else
        for (int i = 0; i < 10000; i++) {
            int v = rng_lcg_next(&r);
            ck_assert(v >= 0 && v <= RNG_LCG_MAX);
        }
#endif
    }
    rng_lcg_t r;
    rng_lcg_seed(&r, 1);
    ck_assert_int_eq(rng_lcg_next(&r), 476707713); /* glibc rand_r(1), recorded */
}
END_TEST

START_TEST(test_rng_zipf_split_weights_pick)
{
    int64_t parts[7];
    ck_assert_int_eq(rng_zipf_split(parts, 7, 1000, 0.5), 0);
    int64_t sum = 0;
    for (int i = 0; i < 7; i++) {
        sum += parts[i];
        if (i)
            ck_assert_int_le(parts[i], parts[i - 1]);
    }
    ck_assert_int_eq(sum, 1000);
    ck_assert_int_eq(rng_zipf_split(parts, 0, 10, 1), -EINVAL);
    ck_assert_int_eq(rng_zipf_split(parts, 3, -1, 1), -EINVAL);
    double w[3];
    ck_assert_int_eq(rng_zipf_weights(w, 3, 0), 0);
    ck_assert_double_eq_tol(w[2], 1.0 / 3, 1e-12);
    rng_t r;
    rng_seed(&r, 1, 2);
    int pick[8];
    for (int round = 0; round < 100; round++) {
        ck_assert_int_eq(rng_pick(&r, pick, 6, 8), 0);
        for (int i = 0; i < 6; i++) {
            ck_assert(pick[i] >= 0 && pick[i] < 8);
            if (i)
                ck_assert_int_lt(pick[i - 1], pick[i]);
        }
    }
    ck_assert_int_eq(rng_pick(&r, pick, 9, 8), -EINVAL);
    for (int i = 0; i < 1000; i++) {
        double u = rng_uniform(&r);
        ck_assert(u >= 0 && u < 1);
        ck_assert_uint_lt(rng_below(&r, 5), 5);
    }
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {test_rng_splitmix_sequence, test_rng_x256_sequence,
                                  test_rng_lcg_is_glibc_rand_r, test_rng_zipf_split_weights_pick};
    return testlib_run_tests("rng", tests, sizeof tests / sizeof tests[0]);
}
