/* test_shares.c - Check suite for controller/shares: the weighted max-min division of spare capacity over the bucket-server graph (footprints 1/2/4/8, weights, caps by L, a saturated server, wants), against ideals worked out by hand. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "controller/shares.h"
#include "tests/testlib.h"

#define NB 8
#define NP 64

/* A problem: ns servers, nb buckets, pairs added by bucket_on(). */
typedef struct {
    int64_t spare[16];
    int ns;
    uint32_t w[NB];
    int64_t cap[NB];
    size_t nb;
    shares_pair_t p[NP];
    size_t np;
    int64_t x[NB];   /* totals after solve() */
    int64_t load[16];
} pb_t;

static void pb_init(pb_t *f, int ns, int64_t spare, size_t nb)
{
    memset(f, 0, sizeof *f);
    f->ns = ns;
    f->nb = nb;
    for (int s = 0; s < ns; s++)
        f->spare[s] = spare;
    for (size_t b = 0; b < nb; b++) {
        f->w[b] = 1;
        f->cap[b] = SHARES_NOCAP;
    }
}

/* Bucket b on servers [from, to) wanting `want` on each. */
static void bucket_on(pb_t *f, int b, int from, int to, int64_t want)
{
    for (int s = from; s < to; s++)
        f->p[f->np++] = (shares_pair_t){.b = b, .s = s, .want = want};
}

static void solve(pb_t *f)
{
    shares_t *sh = shares_new();
    ck_assert_ptr_nonnull(sh);
    int it = 0;
    ck_assert_int_eq(shares_solve(sh, f->spare, f->ns, f->w, f->cap, f->nb, f->p, f->np, NULL, &it),
                     0);
    ck_assert_int_gt(it, 0);
    memset(f->x, 0, sizeof f->x);
    memset(f->load, 0, sizeof f->load);
    for (size_t k = 0; k < f->np; k++) {
        ck_assert_int_ge(f->p[k].share, 0);
        ck_assert_int_le(f->p[k].share, f->p[k].want > 0 ? f->p[k].want : 0);
        f->x[f->p[k].b] += f->p[k].share;
        f->load[f->p[k].s] += f->p[k].share;
    }
    for (int s = 0; s < f->ns; s++)
        ck_assert_int_le(f->load[s], f->spare[s] > 0 ? f->spare[s] : 0);
    for (size_t b = 0; b < f->nb; b++)
        if (f->cap[b] != SHARES_NOCAP)
            ck_assert_int_le(f->x[b], f->cap[b]);
    shares_destroy(&sh);
    ck_assert_ptr_null(sh);
}

/* Bucket b's total within 1% (and a token per server) of `ideal`. */
static void near(const pb_t *f, int b, int64_t ideal)
{
    int64_t tol = ideal / 100 + f->ns;
    ck_assert_msg(llabs(f->x[b] - ideal) <= tol, "bucket %d: %lld, ideal %lld", b,
                  (long long)f->x[b], (long long)ideal);
}

/* Footprints 1, 2, 4, 8 on 8 servers of 1,000 spare: buckets 0 (weight
 * 2), 1, 2, 3 on servers [0, 1), [0, 2), [0, 4), [0, 8), all hungry. */
static void footprints(pb_t *f)
{
    pb_init(f, 8, 1000, 4);
    f->w[0] = 2;
    bucket_on(f, 0, 0, 1, 1000000);
    bucket_on(f, 1, 0, 2, 1000000);
    bucket_on(f, 2, 0, 4, 1000000);
    bucket_on(f, 3, 0, 8, 1000000);
}

/* Two servers of 90 spare: A (bucket 0, weight 2) on server 0, B on both,
 * C on server 1, each wanting 1,000 a server. */
static void three(pb_t *f)
{
    pb_init(f, 2, 90, 3);
    f->w[0] = 2;
    bucket_on(f, 0, 0, 1, 1000);
    bucket_on(f, 1, 0, 2, 1000);
    bucket_on(f, 2, 1, 2, 1000);
}

/* Footprints 1, 2, 4, 8 on 8 servers of 1,000 spare, weights 2, 1, 1, 1,
 * all hungry: A saturates server 0, B takes server 1, C servers 2-3, D
 * servers 4-7 (max-min: nobody's share can grow without taking from a
 * smaller one).  Per-node round robin would give 250, 583, 1333, 5833. */
START_TEST(test_shares_footprints)
{
    pb_t f;
    footprints(&f);
    solve(&f);
    near(&f, 0, 1000);
    near(&f, 1, 1000);
    near(&f, 2, 2000);
    near(&f, 3, 4000);
}
END_TEST

/* Weights where the graph lets them show: A (one server, weight 2) gets
 * twice B (two servers, weight 1) and C (one server): 2t + t + t = 180. */
START_TEST(test_shares_weights)
{
    pb_t f;
    three(&f);
    solve(&f);
    near(&f, 0, 90);
    near(&f, 1, 45);
    near(&f, 2, 45);
    /* Eight buckets over eight servers of 100, each on all of them,
     * weights 1..8: shares 800 x w / 36. */
    pb_init(&f, 8, 100, 8);
    for (int b = 0; b < 8; b++) {
        f.w[b] = (uint32_t)(b + 1);
        bucket_on(&f, b, 0, 8, 1000);
    }
    solve(&f);
    for (int b = 0; b < 8; b++)
        near(&f, b, 800 * (b + 1) / 36);
}
END_TEST

/* A cap by L: A capped at 30 leaves server 0's rest to B, which then
 * evens out with C on server 1 (75 each). */
START_TEST(test_shares_caps)
{
    pb_t f;
    three(&f);
    f.cap[0] = 30;
    solve(&f);
    near(&f, 0, 30);
    near(&f, 1, 75);
    near(&f, 2, 75);
    /* A pair's want bounds it too: C wants only 10 on server 1. */
    pb_init(&f, 2, 90, 3);
    bucket_on(&f, 0, 0, 1, 1000);
    bucket_on(&f, 1, 0, 2, 1000);
    bucket_on(&f, 2, 1, 2, 10);
    solve(&f);
    near(&f, 2, 10);
    near(&f, 0, 85);
    near(&f, 1, 85);
}
END_TEST

/* A saturated server (no spare): its only bucket gets nothing, the others
 * divide what is left as if it were not there. */
START_TEST(test_shares_saturated)
{
    pb_t f;
    footprints(&f);
    f.spare[0] = 0;
    f.spare[1] = -5; /* overcommitted: as none */
    solve(&f);
    near(&f, 0, 0);
    near(&f, 1, 0);
    near(&f, 2, 2000);
    near(&f, 3, 4000);
}
END_TEST

/* Garbage pairs (bucket or server out of range, negative want) get
 * nothing and cost nobody anything; an empty problem is fine. */
START_TEST(test_shares_garbage)
{
    pb_t f;
    pb_init(&f, 2, 100, 2);
    bucket_on(&f, 0, 0, 2, 1000);
    f.p[f.np++] = (shares_pair_t){.b = 7, .s = 0, .want = 1000};
    f.p[f.np++] = (shares_pair_t){.b = 1, .s = 9, .want = 1000};
    f.p[f.np++] = (shares_pair_t){.b = 1, .s = 0, .want = -3};
    f.nb = 2;
    solve(&f);
    near(&f, 0, 200);
    ck_assert_int_eq(f.x[1], 0);
    shares_t *sh = shares_new();
    ck_assert_int_eq(shares_solve(sh, f.spare, 0, f.w, f.cap, 0, f.p, 0, NULL, NULL), 0);
    shares_destroy(&sh);
    shares_destroy(&sh);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {test_shares_footprints, test_shares_weights, test_shares_caps,
                                  test_shares_saturated, test_shares_garbage};
    return testlib_run_tests("shares", tests, sizeof tests / sizeof tests[0]);
}
