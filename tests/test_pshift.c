/* test_pshift.c - Check suite for pshift/: the paper's worked examples, random instances against igraph max-flow, errors. */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/rng.h"
#include "pshift/tools/gen.h"
#include "pshift/pshift.h"
#include "pshift/tools/maxflow.h"
#include "tests/pshift_fixtures.h"
#include "tests/testlib.h"

/* Builds a problem from dense arrays: caps[ns], targets[nb], dem[nb][ns]. */
static pshift_problem_t *build(int ns, int nb, const int64_t *caps, const int64_t *targets,
                               const int64_t *dem)
{
    pshift_problem_t *p = pshift_problem_new();
    ck_assert_ptr_nonnull(p);
    for (int s = 0; s < ns; s++) ck_assert_int_eq(pshift_add_server(p, NULL, caps[s]), s);
    for (int b = 0; b < nb; b++) {
        ck_assert_int_eq(pshift_add_bucket(p, NULL, targets[b]), b);
        for (int s = 0; s < ns; s++)
            ck_assert_int_eq(pshift_set_demand(p, b, s, dem[b * ns + s]), 0);
    }
    return p;
}

/* Finds bucket b's entry on server s: returns 1 and sets *d and *a (each
 * may be NULL) to its demand and allocation, or returns 0 when b has no
 * entry there (*d and *a then say nothing). */
static int entry_on(const pshift_problem_t *p, int b, int s, int64_t *d, int64_t *a)
{
    for (size_t k = 0; k < pshift_bucket_nentries(p, b); k++) {
        int sv;
        pshift_bucket_entry(p, b, k, &sv, d, a);
        if (sv == s)
            return 1;
    }
    return 0;
}

static int64_t demand_of(const pshift_problem_t *p, int b, int s)
{
    int64_t d;
    return entry_on(p, b, s, &d, NULL) ? d : 0;
}

/* Checks prudence, conservation, the loads and that Phi is what the
 * allocation gives; returns that Phi. */
static int64_t check_solution(const pshift_problem_t *p)
{
    int ns = pshift_nservers(p), nb = pshift_nbuckets(p);
    int64_t *load = calloc((size_t)ns + 1, sizeof *load);
    ck_assert_ptr_nonnull(load);
    for (int b = 0; b < nb; b++) {
        int64_t sum = 0, dsum = 0;
        int prev = -1;
        for (size_t k = 0; k < pshift_bucket_nentries(p, b); k++) {
            int s;
            int64_t d, a;
            pshift_bucket_entry(p, b, k, &s, &d, &a);
            ck_assert_int_gt(s, prev); /* increasing server order */
            prev = s;
            ck_assert_int_ge(a, 0);
            ck_assert_int_le(a, d); /* prudence */
            ck_assert_int_eq(pshift_alloc(p, b, s), a);
            sum += a;
            dsum += d;
            load[s] += a;
        }
        int64_t t = pshift_bucket_target(p, b);
        ck_assert_int_eq(sum, t < dsum ? t : dsum); /* conservation */
    }
    int64_t phi = 0;
    for (int s = 0; s < ns; s++) {
        ck_assert_int_eq(pshift_server_load(p, s), load[s]);
        int64_t c = pshift_server_capacity(p, s);
        phi += load[s] < c ? load[s] : c;
    }
    ck_assert_int_eq(pshift_stats(p)->phi, phi);
    free(load);
    return phi;
}

/* Solves p with the default options, which must succeed. */
static void solve(pshift_problem_t *p)
{
    pshift_opts_t o = PSHIFT_OPTS_DEFAULT;
    ck_assert_int_eq(pshift_solve(p, &o), 0);
}

/* What a worked example of the paper states of its solution: phi before
 * and after, the longest shifting path, no weak excess left. */
static void expect_solved(const pshift_problem_t *p, int64_t phi0, int64_t phi, int longest)
{
    const pshift_stats_t *st = pshift_stats(p);
    ck_assert_int_eq(st->phi_initial, phi0);
    ck_assert_int_eq(st->phi, phi);
    ck_assert_int_eq(st->longest_path, longest);
    ck_assert_int_eq(st->weak_excess_final, 0);
}

START_TEST(test_pshift_table1)
{
    /* Paper Table I / Examples 1 and 2. */
    const int64_t caps[] = {100, 100}, targets[] = {100, 100};
    const int64_t dem[] = {150, 50, /* red */ 50, 50 /* blue */};
    pshift_problem_t *p = build(2, 2, caps, targets, dem);
    int64_t tms[4];
    ck_assert_int_eq(pshift_initial_map(p, tms), 0);
    /* Initial (75, 25) / (50, 50): only red moves, 25 each way. */
    ck_assert_int_eq(tms[0 * 2 + 1], 25);
    ck_assert_int_eq(tms[1 * 2 + 0], 25);
    solve(p);
    expect_solved(p, 175, 200, 1);
    ck_assert_int_eq(pshift_stats(p)->weak_excess_initial, 25);
    ck_assert_int_eq(pshift_alloc(p, 0, 0), 50);
    ck_assert_int_eq(pshift_alloc(p, 0, 1), 50);
    ck_assert_int_eq(pshift_alloc(p, 1, 0), 50);
    ck_assert_int_eq(pshift_alloc(p, 1, 1), 50);
    ck_assert_int_eq(check_solution(p), 200);
    pshift_problem_destroy(&p);
    ck_assert_ptr_null(p);
}
END_TEST

static const int64_t t2_caps[] = {100, 100, 100}, t2_targets[] = {100, 100, 100};
static const int64_t t2_dem[] = {150, 50, 0, /* red */ 0, 150, 50, /* blue */
                                 50, 0, 50 /* green */};

START_TEST(test_pshift_table2)
{
    /* Paper Table II / Example 3: only the brokered path 1 -> 2 -> 3 helps. */
    pshift_problem_t *p = build(3, 3, t2_caps, t2_targets, t2_dem);
    solve(p);
    expect_solved(p, 275, 300, 2);
    const pshift_stats_t *st = pshift_stats(p);
    ck_assert_int_eq(st->shifts, 1);
    ck_assert_double_eq(st->weak_excess_removed, 1.0);
    for (int s = 0; s < 3; s++) ck_assert_int_eq(pshift_server_load(p, s), 100);
    ck_assert_int_eq(check_solution(p), 300);
    ck_assert_int_eq(maxflow_optimum(p), 300);
    pshift_problem_destroy(&p);
}
END_TEST

/* max_path bounds the shift paths (controller shards): Table II needs a
 * two-edge path, so direct transfers alone leave its excess; a bound of 2
 * finds it as the unbounded solve does. */
START_TEST(test_pshift_max_path)
{
    pshift_problem_t *p = build(3, 3, t2_caps, t2_targets, t2_dem);
    pshift_opts_t o = PSHIFT_OPTS_DEFAULT;
    o.max_path = 1;
    ck_assert_int_eq(pshift_solve(p, &o), 0);
    ck_assert_int_gt(pshift_stats(p)->weak_excess_final, 0);
    ck_assert_int_eq(pshift_stats(p)->levels, 1);
    ck_assert_int_eq(check_solution(p), 275); /* phi: 25 beyond capacity */
    o.max_path = 2;
    ck_assert_int_eq(pshift_solve(p, &o), 0);
    ck_assert_int_eq(pshift_stats(p)->weak_excess_final, 0);
    ck_assert_int_le(pshift_stats(p)->levels, 2);
    pshift_problem_destroy(&p);
}
END_TEST

START_TEST(test_pshift_table3_map)
{
    /* Paper Table III: the token movement sums of Table II's start. */
    pshift_problem_t *p = build(3, 3, t2_caps, t2_targets, t2_dem);
    int64_t tms[9];
    const int64_t want[9] = {0, 25, 0, 25, 0, 25, 0, 25, 0};
    ck_assert_int_eq(pshift_initial_map(p, tms), 0);
    for (int j = 0; j < 3; j++)
        for (int k = 0; k < 3; k++)
            if (j != k) ck_assert_int_eq(tms[j * 3 + k], want[j * 3 + k]);
    pshift_problem_destroy(&p);
}
END_TEST

/* A random small instance: zero capacities, zero demands, R > D, single
 * servers and one-server buckets all come up often. */
static void random_fill(pshift_problem_t *p, rng_x256_t *r)
{
    int ns = 1 + (int)rng_x256_below(r, 6);
    int nb = (int)rng_x256_below(r, 9);
    for (int s = 0; s < ns; s++) {
        int64_t c = rng_x256_below(r, 5) == 0 ? 0 : (int64_t)rng_x256_below(r, 40);
        ck_assert_int_eq(pshift_add_server(p, NULL, c), s);
    }
    for (int b = 0; b < nb; b++) {
        int64_t t = (int64_t)rng_x256_below(r, 60);
        ck_assert_int_eq(pshift_add_bucket(p, NULL, t), b);
        int mode = (int)rng_x256_below(r, 4);
        for (int s = 0; s < ns; s++) {
            int64_t d = 0;
            if (mode == 0) /* one-server bucket */
                d = s == 0 ? (int64_t)rng_x256_below(r, 30) : 0;
            else if (rng_x256_below(r, 3) != 0)
                d = (int64_t)rng_x256_below(r, 25);
            ck_assert_int_eq(pshift_set_demand(p, b, s, d), 0);
        }
    }
}

static pshift_problem_t *random_problem(rng_x256_t *r)
{
    pshift_problem_t *p = pshift_problem_new();
    ck_assert_ptr_nonnull(p);
    random_fill(p, r);
    return p;
}

/* A random problem solved with the default options, as handed to a check. */
typedef struct {
    pshift_problem_t *p;
    int iter;      /* the instance's number */
    rng_x256_t *r; /* the generator p came from, for more random input */
    void *ctx;     /* the test's own */
} solved_t;

typedef void solved_check_fn(const solved_t *in);

/* Draws n random problems from a generator seeded with seed, solves each with
 * the default options, checks it with check and destroys it. */
static void each_random_solved(uint64_t seed, int n, solved_check_fn *check, void *ctx)
{
    rng_x256_t r;
    rng_x256_seed(&r, seed);
    for (int iter = 0; iter < n; iter++) {
        solved_t in = {.p = random_problem(&r), .iter = iter, .r = &r, .ctx = ctx};
        solve(in.p);
        check(&in);
        pshift_problem_destroy(&in.p);
    }
}

/* A new problem with p's servers and buckets (capacities and targets) and no
 * demands; the test destroys it. */
static pshift_problem_t *copy_shape(const pshift_problem_t *p)
{
    pshift_problem_t *q = pshift_problem_new();
    ck_assert_ptr_nonnull(q);
    for (int s = 0; s < pshift_nservers(p); s++)
        ck_assert_int_eq(pshift_add_server(q, NULL, pshift_server_capacity(p, s)), s);
    for (int b = 0; b < pshift_nbuckets(p); b++)
        ck_assert_int_eq(pshift_add_bucket(q, NULL, pshift_bucket_target(p, b)), b);
    return q;
}

static void snapshot(const pshift_problem_t *p, int64_t *out)
{
    size_t n = 0;
    for (int b = 0; b < pshift_nbuckets(p); b++)
        for (int s = 0; s < pshift_nservers(p); s++) out[n++] = pshift_alloc(p, b, s);
}

/* Checks that q holds the same allocation as p (same buckets and servers);
 * iter names the instance in the failure. */
static void expect_same_allocs(const pshift_problem_t *p, const pshift_problem_t *q, int iter)
{
    int64_t a1[64], a2[64];
    size_t cells = (size_t)pshift_nbuckets(p) * (size_t)pshift_nservers(p);
    snapshot(p, a1);
    snapshot(q, a2);
    ck_assert_msg(memcmp(a1, a2, cells * sizeof *a1) == 0, "instance %d differs", iter);
}

START_TEST(test_pshift_initial_allocation)
{
    /* With capacity to spare nothing shifts, so the result is the paper's
     * proportional start: Table I (75, 25) / (50, 50) and Table II. */
    const int64_t big1[] = {1000, 1000}, t1[] = {100, 100};
    const int64_t d1[] = {150, 50, 50, 50};
    pshift_problem_t *p = build(2, 2, big1, t1, d1);
    solve(p);
    ck_assert_int_eq(pshift_stats(p)->shifts, 0);
    const int64_t want1[] = {75, 25, 50, 50};
    for (int b = 0; b < 2; b++)
        for (int s = 0; s < 2; s++) ck_assert_int_eq(pshift_alloc(p, b, s), want1[b * 2 + s]);
    pshift_problem_destroy(&p);

    const int64_t big2[] = {1000, 1000, 1000};
    p = build(3, 3, big2, t2_targets, t2_dem);
    solve(p);
    const int64_t want2[] = {75, 25, 0, 0, 75, 25, 50, 0, 50};
    for (int b = 0; b < 3; b++)
        for (int s = 0; s < 3; s++) ck_assert_int_eq(pshift_alloc(p, b, s), want2[b * 3 + s]);
    pshift_problem_destroy(&p);

    /* Largest remainder: 10 tokens over four equal demands of 3 are
     * 2.5 each, so two servers get 3 and two get 2; over demands (1, 1, 1)
     * with R > D every server gets its whole demand. */
    const int64_t c4[] = {100, 100, 100, 100}, t4[] = {10, 10};
    const int64_t d4[] = {3, 3, 3, 3, 1, 1, 1, 0};
    p = build(4, 2, c4, t4, d4);
    solve(p);
    int threes = 0;
    for (int s = 0; s < 4; s++) {
        int64_t a = pshift_alloc(p, 0, s);
        ck_assert(a == 2 || a == 3);
        threes += a == 3;
        ck_assert_int_eq(pshift_alloc(p, 1, s), d4[4 + s]);
    }
    ck_assert_int_eq(threes, 2);
    pshift_problem_destroy(&p);
}
END_TEST

/* The solution is valid and optimal (max-flow's Phi), the same with 2
 * threads, and never better approximated. */
static void check_optimal(const solved_t *in)
{
    pshift_problem_t *p = in->p;
    int64_t a1[64], a2[64];
    size_t cells = (size_t)pshift_nbuckets(p) * (size_t)pshift_nservers(p);
    int64_t phi = check_solution(p);
    int64_t opt = maxflow_optimum(p);
    ck_assert_msg(phi == opt, "instance %d: phi %lld, max-flow %lld", in->iter, (long long)phi,
                  (long long)opt);
    const pshift_stats_t *st = pshift_stats(p);
    ck_assert_int_le(st->phi_initial, st->phi);
    ck_assert_int_le(st->weak_excess_final, st->weak_excess_initial);
    snapshot(p, a1);

    pshift_opts_t o = PSHIFT_OPTS_DEFAULT;
    o.threads = 2;
    ck_assert_int_eq(pshift_solve(p, &o), 0);
    snapshot(p, a2);
    ck_assert_msg(memcmp(a1, a2, cells * sizeof *a1) == 0,
                  "instance %d: allocation differs for 1 and 2 threads", in->iter);
    ck_assert_int_eq(pshift_stats(p)->phi, phi);

    o.threads = 1;
    o.approx_top = 1 + rng_x256_below(in->r, 3);
    ck_assert_int_eq(pshift_solve(p, &o), 0);
    int64_t aphi = check_solution(p);
    ck_assert_int_le(aphi, phi); /* exact is never worse */
}

START_TEST(test_pshift_random_optimal)
{
    each_random_solved(42, 3000, check_optimal, NULL);
}
END_TEST

/* A problem emptied with pshift_problem_clear() and rebuilt (smaller or
 * larger than before, its arrays kept) solves exactly as a fresh one, and
 * pshift_bucket_allocs() reads the same allocation as pshift_bucket_entry(). */
START_TEST(test_pshift_clear_reuse)
{
    rng_x256_t r;
    rng_x256_seed(&r, 7);
    pshift_problem_t *q = pshift_problem_new();
    ck_assert_ptr_nonnull(q);
    for (int iter = 0; iter < 500; iter++) {
        rng_x256_t r2 = r;
        pshift_problem_t *p = random_problem(&r);
        pshift_problem_clear(q);
        ck_assert_int_eq(pshift_nservers(q), 0);
        ck_assert_ptr_null(pshift_bucket_allocs(q, 0));
        random_fill(q, &r2);
        solve(p);
        solve(q);
        ck_assert_int_eq(pshift_nbuckets(q), pshift_nbuckets(p));
        expect_same_allocs(p, q, iter);
        ck_assert_int_eq(pshift_stats(q)->phi, pshift_stats(p)->phi);
        ck_assert_int_eq(pshift_stats(q)->shifts, pshift_stats(p)->shifts);
        for (int b = 0; b < pshift_nbuckets(q); b++) {
            const int64_t *al = pshift_bucket_allocs(q, b);
            ck_assert_ptr_nonnull(al);
            for (size_t k = 0; k < pshift_bucket_nentries(q, b); k++) {
                int64_t a;
                pshift_bucket_entry(q, b, k, NULL, NULL, &a);
                ck_assert_int_eq(al[k], a);
            }
        }
        ck_assert_ptr_null(pshift_bucket_allocs(q, pshift_nbuckets(q)));
        pshift_problem_destroy(&p);
    }
    pshift_problem_destroy(&q);
}
END_TEST

/* p's demands recorded into a copy of its shape with pshift_set_demands(),
 * server by server (the controller's order), zero demands included, solve
 * to p's allocation. */
static void check_batch_demands(const solved_t *in)
{
    const pshift_problem_t *p = in->p;
    int ns = pshift_nservers(p), nb = pshift_nbuckets(p);
    pshift_problem_t *q = copy_shape(p);
    for (int s = 0; s < ns; s++) {
        int32_t bi[16];
        int64_t d[16];
        size_t n = 0;
        for (int b = 0; b < nb; b++) {
            bi[n] = b;
            d[n++] = demand_of(p, b, s);
        }
        ck_assert_int_eq(pshift_set_demands(q, s, bi, d, n), 0);
    }
    solve(q);
    expect_same_allocs(p, q, in->iter);
    pshift_problem_destroy(&q);
}

/* pshift_set_demands() records what pshift_set_demand() per pair would:
 * same solution on random problems; a bad index or demand records none. */
START_TEST(test_pshift_set_demands_batch)
{
    each_random_solved(11, 300, check_batch_demands, NULL);
    pshift_problem_t *q = pshift_problem_new();
    ck_assert_int_eq(pshift_add_server(q, NULL, 10), 0);
    ck_assert_int_eq(pshift_add_bucket(q, NULL, 10), 0);
    const int32_t good[] = {0, 0}, bad[] = {0, 1};
    const int64_t d[] = {5, 5}, neg[] = {5, -1};
    ck_assert_int_eq(pshift_set_demands(q, 1, good, d, 1), -EINVAL);
    ck_assert_int_eq(pshift_set_demands(q, 0, bad, d, 2), -EINVAL);
    ck_assert_int_eq(pshift_set_demands(q, 0, good, neg, 2), -EINVAL);
    solve(q);
    ck_assert_int_eq(pshift_bucket_nentries(q, 0), 0); /* none recorded */
    ck_assert_int_eq(pshift_set_demands(q, 0, good, d, 1), 0);
    solve(q);
    ck_assert_int_eq(pshift_alloc(q, 0, 0), 5);
    pshift_problem_destroy(&q);
}
END_TEST

/* pshift_tms() of a solved problem is the sum over buckets of what one
 * prudent transfer can move from server j to k, whether the solve shifted
 * (server lists built) or not. */
/* pshift_tms() for every pair of p's servers is the sum the definition
 * gives; ctx counts the instances that did not shift ([0]) and did ([1]). */
static void check_tms(const solved_t *in)
{
    const pshift_problem_t *p = in->p;
    int *seen = in->ctx;
    int ns = pshift_nservers(p), nb = pshift_nbuckets(p);
    seen[pshift_stats(p)->shifts > 0]++;
    for (int j = 0; j < ns; j++)
        for (int k = 0; k < ns; k++) {
            int64_t want = 0;
            for (int b = 0; b < nb && j != k; b++) {
                int64_t aj, dk, ak;
                if (entry_on(p, b, j, NULL, &aj) && entry_on(p, b, k, &dk, &ak) && aj > 0 &&
                    dk - ak > 0)
                    want += aj < dk - ak ? aj : dk - ak;
            }
            ck_assert_int_eq(pshift_tms(p, j, k), want);
        }
}

START_TEST(test_pshift_tms_matches_definition)
{
    int seen[2] = {0, 0};
    each_random_solved(13, 400, check_tms, seen);
    ck_assert_int_gt(seen[0], 0); /* unshifted */
    ck_assert_int_gt(seen[1], 0); /* shifted */
}
END_TEST

static int cmp_rem_ref(const void *x, const void *y)
{
    const unsigned __int128 *a = x, *b = y; /* remainder << 8 | (255 - index) */
    return *a < *b ? 1 : *a > *b ? -1 : 0;
}

/* The proportional start (capacity to spare, nothing shifts) gives each
 * entry floor(A d / D) and the leftover to the largest remainders, ties to
 * the lower server, for small and very large demands alike (the remainder
 * ranking has a path per magnitude of D). */
START_TEST(test_pshift_initial_largest_remainders)
{
    rng_x256_t r;
    rng_x256_seed(&r, 17);
    const int shifts[] = {0, 20, 26, 27, 28, 31, 32, 33, 45};
    for (int iter = 0; iter < 2000; iter++) {
        int ns = 1 + (int)rng_x256_below(&r, 18);
        int64_t scale = INT64_C(1) << shifts[iter % 9];
        pshift_problem_t *p = pshift_problem_new();
        ck_assert_ptr_nonnull(p);
        for (int s = 0; s < ns; s++)
            ck_assert_int_eq(pshift_add_server(p, NULL, INT64_C(1) << 55), s);
        int64_t d[18], D = 0;
        for (int s = 0; s < ns; s++) {
            d[s] = rng_x256_below(&r, 3) ? scale + (int64_t)rng_x256_below(&r, 1000) : 0;
            D += d[s];
        }
        int64_t A = D ? (int64_t)rng_x256_below(&r, 1u << 30) % D : 0;
        ck_assert_int_eq(pshift_add_bucket(p, NULL, A), 0);
        for (int s = 0; s < ns; s++)
            ck_assert_int_eq(pshift_set_demand(p, 0, s, d[s]), 0);
        solve(p);
        int64_t want[18], given = 0;
        unsigned __int128 rem[18];
        int nr = 0;
        for (int s = 0; s < ns; s++) {
            unsigned __int128 q = D ? (unsigned __int128)A * (uint64_t)d[s] : 0;
            want[s] = D ? (int64_t)(q / (uint64_t)D) : 0;
            given += want[s];
            if (D && d[s] && q % (uint64_t)D)
                rem[nr++] = (q % (uint64_t)D) << 8 | (unsigned)(255 - s);
        }
        qsort(rem, (size_t)nr, sizeof *rem, cmp_rem_ref);
        for (int k = 0; k < A - given; k++)
            want[255 - (int)(rem[k] & 255)]++;
        for (int s = 0; s < ns; s++)
            ck_assert_int_eq(pshift_alloc(p, 0, s), want[s]);
        pshift_problem_destroy(&p);
    }
}
END_TEST

/* The residual problem of p with random targets has p's spare capacities and
 * unallocated demands, and solves to its max-flow optimum. */
static void check_residual(const solved_t *in)
{
    const pshift_problem_t *p = in->p;
    int ns = pshift_nservers(p), nb = pshift_nbuckets(p);
    int64_t targets[16];
    for (int b = 0; b < nb; b++)
        targets[b] = rng_x256_below(in->r, 4) == 0 ? INT64_MAX : (int64_t)rng_x256_below(in->r, 30);
    pshift_problem_t *q = pshift_residual_new(p, targets);
    ck_assert_ptr_nonnull(q);
    ck_assert_int_eq(pshift_nservers(q), ns);
    ck_assert_int_eq(pshift_nbuckets(q), nb);
    solve(q);
    for (int s = 0; s < ns; s++) {
        int64_t spare = pshift_server_capacity(p, s) - pshift_server_load(p, s);
        ck_assert_int_eq(pshift_server_capacity(q, s), spare > 0 ? spare : 0);
    }
    for (int b = 0; b < nb; b++) {
        ck_assert_int_eq(pshift_bucket_target(q, b), targets[b]);
        for (int s = 0; s < ns; s++)
            ck_assert_int_eq(demand_of(q, b, s), demand_of(p, b, s) - pshift_alloc(p, b, s));
    }
    int64_t phi = check_solution(q);
    ck_assert_int_eq(phi, maxflow_optimum(q));
    pshift_problem_destroy(&q);
}

START_TEST(test_pshift_residual)
{
    each_random_solved(7, 1000, check_residual, NULL);
}
END_TEST

START_TEST(test_pshift_generated_matches_maxflow)
{
    /* A paper-shaped instance at the stress point r = 1.0, m = 1.1. */
    gen_params_t g = pshift_fixture_params(32, 2000);
    g.demand_ratio = 1.1;
    g.names = 0;
    pshift_problem_t *p = NULL;
    pshift_fixture_solved(&g, &p, NULL);
    pshift_opts_t o = PSHIFT_OPTS_DEFAULT;
    int64_t phi = check_solution(p);
    ck_assert_int_eq(phi, maxflow_optimum(p));
    size_t cells = (size_t)g.buckets * (size_t)g.servers;
    int64_t *a1 = malloc(cells * sizeof *a1), *a2 = malloc(cells * sizeof *a2);
    ck_assert_ptr_nonnull(a1);
    ck_assert_ptr_nonnull(a2);
    snapshot(p, a1);
    o.threads = 2;
    ck_assert_int_eq(pshift_solve(p, &o), 0);
    snapshot(p, a2);
    ck_assert(memcmp(a1, a2, cells * sizeof *a1) == 0);
    o.approx_top = 100;
    ck_assert_int_eq(pshift_solve(p, &o), 0);
    ck_assert_int_le(check_solution(p), phi);
    free(a1);
    free(a2);
    pshift_problem_destroy(&p);
}
END_TEST

/* Names are copied into blocks that never move: every name reads back
 * intact after thousands more were added (one longer than a block), and a
 * problem cleared and rebuilt with the same names reuses the same memory. */
START_TEST(test_pshift_names_kept)
{
    enum { N = 3000 };
    static char longname[10000], names[N][16];
    memset(longname, 'x', sizeof longname - 1);
    pshift_problem_t *p = pshift_problem_new();
    const char *first = NULL, *last = NULL;
    for (int round = 0; round < 2; round++) {
        /* Every 7th bucket unnamed, one name longer than a block. */
        for (int i = 0; i < N; i++) {
            snprintf(names[i], sizeof names[i], "bucket-%d", i);
            const char *n = i % 7 == 3 ? NULL : i == 1500 ? longname : names[i];
            ck_assert_int_eq(pshift_add_bucket(p, n, 1), i);
        }
        ck_assert_int_eq(pshift_add_server(p, "s1", 10), 0);
        for (int i = 0; i < N; i++) {
            if (i % 7 == 3)
                ck_assert_ptr_null(pshift_bucket_name(p, i));
            else
                ck_assert_str_eq(pshift_bucket_name(p, i), i == 1500 ? longname : names[i]);
        }
        ck_assert_str_eq(pshift_server_name(p, 0), "s1");
        if (round == 0) {
            first = pshift_bucket_name(p, 0);
            last = pshift_bucket_name(p, N - 1);
            pshift_problem_clear(p);
        } else {
            ck_assert_ptr_eq(pshift_bucket_name(p, 0), first);
            ck_assert_ptr_eq(pshift_bucket_name(p, N - 1), last);
        }
    }
    pshift_problem_destroy(&p);
}
END_TEST

START_TEST(test_pshift_errors)
{
    pshift_problem_t *p = pshift_problem_new();
    ck_assert_int_eq(pshift_add_server(p, "s", -1), -EINVAL);
    ck_assert_int_eq(pshift_add_server(p, "s", 10), 0);
    ck_assert_int_eq(pshift_add_bucket(p, "b", -5), -EINVAL);
    ck_assert_int_eq(pshift_add_bucket(p, "b", 5), 0);
    ck_assert_int_eq(pshift_set_demand(p, 0, 0, -1), -EINVAL);
    ck_assert_int_eq(pshift_set_demand(p, 1, 0, 1), -EINVAL);
    ck_assert_int_eq(pshift_set_demand(p, 0, 1, 1), -EINVAL);
    ck_assert_int_eq(pshift_set_demand(p, 0, 0, 3), 0);
    ck_assert_int_eq(pshift_set_demand(p, 0, 0, 4), 0);
    pshift_opts_t o = PSHIFT_OPTS_DEFAULT;
    ck_assert_int_eq(pshift_solve(p, &o), -EEXIST);
    ck_assert_str_eq(pshift_server_name(p, 0), "s");
    ck_assert_str_eq(pshift_bucket_name(p, 0), "b");
    pshift_problem_destroy(&p);

    p = pshift_problem_new();
    ck_assert_int_eq(pshift_add_server(p, NULL, INT64_MAX), 0);
    ck_assert_int_eq(pshift_add_server(p, NULL, INT64_MAX), 1);
    /* Capacities are only ever compared with loads, so their sum need not
     * fit: either refused or solved with no wrap-around. */
    int rc = pshift_solve(p, &o);
    ck_assert(rc == 0 || rc == -EOVERFLOW);
    if (rc == 0) ck_assert_int_eq(pshift_stats(p)->phi, 0);
    pshift_problem_destroy(&p);

    p = pshift_problem_new();
    /* The total demand D_i of a bucket overflows. */
    ck_assert_int_eq(pshift_add_server(p, NULL, 1), 0);
    ck_assert_int_eq(pshift_add_server(p, NULL, 1), 1);
    ck_assert_int_eq(pshift_add_bucket(p, NULL, 1), 0);
    ck_assert_int_eq(pshift_set_demand(p, 0, 0, INT64_MAX), 0);
    ck_assert_int_eq(pshift_set_demand(p, 0, 1, INT64_MAX), 0);
    ck_assert_int_eq(pshift_solve(p, &o), -EOVERFLOW);
    pshift_problem_destroy(&p);
    pshift_problem_destroy(&p); /* NULL is fine */
    pshift_problem_destroy(NULL);
}
END_TEST

START_TEST(test_pshift_degenerate)
{
    /* No buckets; all capacities zero; a bucket with no demand at all. */
    pshift_problem_t *p = pshift_problem_new();
    ck_assert_int_eq(pshift_add_server(p, NULL, 0), 0);
    solve(p);
    ck_assert_int_eq(pshift_stats(p)->phi, 0);
    ck_assert_int_eq(pshift_add_bucket(p, NULL, 10), 0);
    ck_assert_int_eq(pshift_add_bucket(p, NULL, 10), 1);
    ck_assert_int_eq(pshift_set_demand(p, 1, 0, 7), 0);
    solve(p);
    ck_assert_int_eq(check_solution(p), 0);
    ck_assert_int_eq(pshift_alloc(p, 1, 0), 7);
    ck_assert_int_eq(pshift_bucket_nentries(p, 0), 0);
    ck_assert_int_eq(pshift_stats(p)->tokens, 7);
    pshift_problem_destroy(&p);
}
END_TEST

START_TEST(test_pshift_gen_deterministic)
{
    gen_params_t g = pshift_fixture_params(16, 300);
    g.limit_ratio = 1.5;
    pshift_problem_t *p = NULL, *q = NULL;
    int64_t *lp = NULL, *lq = NULL;
    pshift_fixture_solved(&g, &p, &lp);
    pshift_fixture_solved(&g, &q, &lq);
    int64_t rsum = 0;
    for (int b = 0; b < g.buckets; b++) {
        int64_t r = pshift_bucket_target(p, b), d = 0;
        ck_assert_int_eq(r, pshift_bucket_target(q, b));
        ck_assert_int_eq(lp[b], lq[b]);
        ck_assert_int_ge(lp[b], r);
        if (b > 0) ck_assert_int_le(r, pshift_bucket_target(p, b - 1)); /* Zipf order */
        ck_assert_uint_le(pshift_bucket_nentries(p, b), 8);
        for (int s = 0; s < g.servers; s++) {
            ck_assert_int_eq(demand_of(p, b, s), demand_of(q, b, s));
            d += demand_of(p, b, s);
        }
        ck_assert_int_eq(d, (int64_t)(1.5 * (double)r + 0.5));
        rsum += r;
    }
    ck_assert_int_eq(rsum, 16 * 100000); /* r = 1.0: the whole capacity */
    ck_assert_str_eq(pshift_bucket_name(p, 0), "b1");
    ck_assert_str_eq(pshift_server_name(p, 15), "s16");
    pshift_problem_destroy(&q);
    free(lq);
    g.seed = 2;
    pshift_fixture_solved(&g, &q, NULL);
    int differ = 0;
    for (int b = 0; b < g.buckets && !differ; b++)
        for (int s = 0; s < g.servers; s++)
            if (demand_of(p, b, s) != demand_of(q, b, s)) differ = 1;
    ck_assert(differ);
    g.active = 17;
    char msg[128];
    ck_assert_int_eq(gen_check(&g, msg, sizeof msg), -EINVAL);
    ck_assert_ptr_nonnull(strstr(msg, "active"));
    pshift_problem_destroy(&p);
    pshift_problem_destroy(&q);
    free(lp);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {test_pshift_table1, test_pshift_table2, test_pshift_table3_map,
                                  test_pshift_initial_allocation, test_pshift_random_optimal,
                                  test_pshift_clear_reuse, test_pshift_set_demands_batch,
                                  test_pshift_tms_matches_definition,
                                  test_pshift_initial_largest_remainders, test_pshift_residual,
                                  test_pshift_generated_matches_maxflow, test_pshift_names_kept,
                                  test_pshift_errors,
                                  test_pshift_degenerate, test_pshift_gen_deterministic,
                                  test_pshift_max_path};
    return testlib_run_timed("pshift", 120, tests, sizeof tests / sizeof tests[0]);
}
