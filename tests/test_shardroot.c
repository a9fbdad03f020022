/* test_shardroot.c - Check suite for controller/shardroot (the root step of controller shards): the parts worked out by hand, no node ever promised more than it has on random cases, and reservations that fit one controller still fit the shards' slices. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/rng.h"
#include "controller/shardmap.h"
#include "controller/shardroot.h"
#include "pshift/pshift.h"
#include "tests/testlib.h"

#ifndef ROUNDS
#define ROUNDS 10 /* root steps with feedback before the comparison */
#endif

static int64_t est_of(const shardroot_t *r, int s, int n)
{
    int64_t e;
    shardroot_slice(r, s, n, &e, NULL, NULL);
    return e;
}

/* Two nodes of 100 (conservative 80), two shards: reservations first,
 * then demand, then the rest in proportion to demand. */
START_TEST(test_shardroot_by_hand)
{
    shardroot_t *r = shardroot_new();
    ck_assert_ptr_nonnull(r);
    ck_assert_int_eq(shardroot_reset(r, 2, 2), 0);
    ck_assert_int_eq(shardroot_set_node(r, 0, 100, 80), 0);
    ck_assert_int_eq(shardroot_set_node(r, 1, 100, 80), 0);
    /* Shard 0: 60 of R that can only go to node 0 (demand 70 there).
     * Shard 1: 60 of R that can go anywhere (demand 40 on each). */
    ck_assert_int_eq(shardroot_set_target(r, 0, 60), 0);
    ck_assert_int_eq(shardroot_set_need(r, 0, 0, 60, 60, 70), 0);
    ck_assert_int_eq(shardroot_set_target(r, 1, 60), 0);
    ck_assert_int_eq(shardroot_set_need(r, 1, 0, 20, 40, 40), 0);
    ck_assert_int_eq(shardroot_set_need(r, 1, 1, 20, 40, 40), 0);
    ck_assert_int_eq(shardroot_solve(r, NULL), 0);
    int64_t e, c, rp;
    /* pShift moves shard 1's R off node 0: 20 there at most. */
    shardroot_slice(r, 0, 0, &e, &c, &rp);
    ck_assert_int_eq(rp, 60);
    shardroot_slice(r, 1, 0, NULL, NULL, &rp);
    ck_assert_int_le(rp, 20);
    shardroot_slice(r, 1, 1, NULL, NULL, &rp);
    ck_assert_int_ge(rp, 40);
    /* Node 0: 20 left for shard 0's 10 more and shard 1's 20 more of
     * demand: in proportion, 6 (+1 of the remainder) and 13. */
    ck_assert_int_eq(est_of(r, 0, 0) + est_of(r, 1, 0), 100);
    ck_assert_int_eq(est_of(r, 0, 0), 67);
    ck_assert_int_eq(est_of(r, 1, 0), 33);
    /* Node 1: only shard 1 wants anything: it gets all of it. */
    ck_assert_int_eq(est_of(r, 1, 1), 100);
    ck_assert_int_eq(est_of(r, 0, 1), 0);
    shardroot_slice(r, 1, 1, NULL, &c, NULL);
    ck_assert_int_eq(c, 80);
    const shardroot_stats_t *st = shardroot_stats(r);
    ck_assert_int_eq(st->r_target, 120);
    ck_assert_int_eq(st->r_placed, 120);
    ck_assert_int_eq(st->r_cut, 0);
    /* A node nobody needs is split evenly; a down node gives nothing. */
    ck_assert_int_eq(shardroot_reset(r, 3, 2), 0);
    ck_assert_int_eq(shardroot_set_node(r, 0, 10, 10), 0);
    ck_assert_int_eq(shardroot_solve(r, NULL), 0);
    ck_assert_int_eq(est_of(r, 0, 0), 4);
    ck_assert_int_eq(est_of(r, 1, 0), 3);
    ck_assert_int_eq(est_of(r, 2, 0), 3);
    for (int s = 0; s < 3; s++)
        ck_assert_int_eq(est_of(r, s, 1), 0);
    shardroot_destroy(&r);
    shardroot_destroy(&r);
    ck_assert_ptr_null(r);
}
END_TEST

/* More reservation on a node than it has, nowhere else to go: cut in
 * proportion, never beyond the node. */
START_TEST(test_shardroot_overbooked_cut)
{
    shardroot_t *r = shardroot_new();
    ck_assert_int_eq(shardroot_reset(r, 2, 1), 0);
    ck_assert_int_eq(shardroot_set_node(r, 0, 100, 90), 0);
    ck_assert_int_eq(shardroot_set_target(r, 0, 90), 0);
    ck_assert_int_eq(shardroot_set_need(r, 0, 0, 90, 90, 90), 0);
    ck_assert_int_eq(shardroot_set_target(r, 1, 30), 0);
    ck_assert_int_eq(shardroot_set_need(r, 1, 0, 30, 30, 200), 0);
    ck_assert_int_eq(shardroot_solve(r, NULL), 0);
    int64_t c0, c1, e0, e1;
    shardroot_slice(r, 0, 0, &e0, &c0, NULL);
    shardroot_slice(r, 1, 0, &e1, &c1, NULL);
    ck_assert_int_le(c0 + c1, 90);
    ck_assert_int_ge(c0, 67);
    ck_assert_int_ge(c1, 22);
    ck_assert_int_le(e0 + e1, 100);
    ck_assert_int_eq(shardroot_stats(r)->r_cut, 30);
    shardroot_destroy(&r);
}
END_TEST

/* Random inputs: the invariants of shardroot.h on 400 cases. */
START_TEST(test_shardroot_random_invariants)
{
    shardroot_t *r = shardroot_new();
    rng_t g;
    rng_seed(&g, 7, 1);
    for (int t = 0; t < 400; t++) {
        int ns = 1 + (int)rng_below(&g, 12), nn = (int)rng_below(&g, 40);
        ck_assert_int_eq(shardroot_reset(r, ns, nn), 0);
        int64_t cap[40], cons[40];
        for (int n = 0; n < nn; n++) {
            cap[n] = rng_below(&g, 6) == 0 ? 0 : (int64_t)rng_below(&g, 100000);
            cons[n] = (int64_t)(cap[n] * rng_uniform(&g) * 1.2);
            ck_assert_int_eq(shardroot_set_node(r, n, cap[n], cons[n]), 0);
            if (cons[n] > cap[n])
                cons[n] = cap[n];
        }
        for (int s = 0; s < ns; s++) {
            ck_assert_int_eq(shardroot_set_target(r, s, (int64_t)rng_below(&g, 300000)), 0);
            for (int n = 0; n < nn; n++)
                if (rng_below(&g, 3)) {
                    int64_t d = (int64_t)rng_below(&g, 50000);
                    int64_t room = (int64_t)rng_below(&g, 60000);
                    ck_assert_int_eq(shardroot_set_need(r, s, n, room / (1 + (int64_t)rng_below(&g, 4)),
                                                        room, d),
                                     0);
                }
        }
        ck_assert_int_eq(shardroot_solve(r, NULL), 0);
        for (int n = 0; n < nn; n++) {
            int64_t se = 0, sc = 0;
            for (int s = 0; s < ns; s++) {
                int64_t e, c, rp;
                shardroot_slice(r, s, n, &e, &c, &rp);
                ck_assert_int_ge(rp, 0);
                ck_assert_int_le(rp, c);
                ck_assert_int_le(c, e);
                se += e;
                sc += c;
            }
            ck_assert_msg(se <= cap[n], "case %d node %d: %lld > %lld", t, n, (long long)se,
                          (long long)cap[n]);
            ck_assert_int_le(sc, cons[n]);
            /* Nothing is left idle while someone is up. */
            ck_assert_int_eq(se, cap[n]);
        }
    }
    shardroot_destroy(&r);
}
END_TEST

/* A random cluster: nb buckets with a reservation and demand on a few of
 * nn nodes (conservative capacities cons).  One controller's R pass (a
 * pShift over every bucket) against K shards': the root step on the
 * shards' needs, then each shard's pShift over its buckets within its
 * conservative slices.  Returns the reservation beyond the capacities
 * (weak excess) of the unsharded solve in *one and of the shards in
 * *sharded after `rounds` rounds. */
static void compare(rng_t *g, int nb, int nn, int k, double load, int rounds, int64_t *one,
                    int64_t *sharded)
{
    int64_t *cons = calloc((size_t)nn, sizeof *cons);
    int64_t *res = calloc((size_t)nb, sizeof *res);
    int64_t *dem = calloc((size_t)nb * nn, sizeof *dem);
    int *sh = calloc((size_t)nb, sizeof *sh);
    ck_assert(cons && res && dem && sh);
    int64_t total = 0;
    for (int n = 0; n < nn; n++)
        total += cons[n] = 1000 + (int64_t)rng_below(g, 9000);
    for (int b = 0; b < nb; b++) {
        char name[16];
        snprintf(name, sizeof name, "b%d", b);
        sh[b] = shardmap_of(name, k);
        int spread = 1 + (int)rng_below(g, 4);
        int64_t want = 0;
        for (int i = 0; i < spread; i++) {
            int n = (int)rng_below(g, (uint64_t)nn);
            int64_t d = 1 + (int64_t)rng_below(g, (uint64_t)(2.0 * load * total / nb) + 1);
            dem[(size_t)b * nn + n] += d;
            want += d;
        }
        res[b] = (int64_t)(want * rng_uniform(g));
    }
    /* One controller. */
    pshift_problem_t *p = pshift_problem_new();
    for (int n = 0; n < nn; n++)
        pshift_add_server(p, NULL, cons[n]);
    for (int b = 0; b < nb; b++) {
        pshift_add_bucket(p, NULL, res[b]);
        for (int n = 0; n < nn; n++)
            pshift_set_demand(p, b, n, dem[(size_t)b * nn + n]);
    }
    ck_assert_int_eq(pshift_solve(p, NULL), 0);
    *one = pshift_stats(p)->weak_excess_final;
    /* The shards' needs. */
    shardroot_t *r = shardroot_new();
    int64_t *tgt = calloc((size_t)k, sizeof *tgt), *room = calloc((size_t)k * nn, sizeof *room),
            *sd = calloc((size_t)k * nn, sizeof *sd), *must = calloc((size_t)k * nn, sizeof *must),
            *placed = calloc((size_t)k * nn, sizeof *placed);
    for (int b = 0; b < nb; b++) {
        int64_t sum = 0;
        for (int n = 0; n < nn; n++)
            sum += dem[(size_t)b * nn + n];
        for (int n = 0; n < nn; n++) {
            int64_t d = dem[(size_t)b * nn + n], rest = res[b] - (sum - d);
            room[(size_t)sh[b] * nn + n] += d < res[b] ? d : res[b];
            must[(size_t)sh[b] * nn + n] += rest > 0 ? (rest < d ? rest : d) : 0;
            sd[(size_t)sh[b] * nn + n] += d;
        }
        tgt[sh[b]] += sum < res[b] ? sum : res[b];
    }
    /* Rounds of the root step, then each shard's own R pass within its
     * slices, the R it placed fed back to the next round. */
    for (int round = 0; round < rounds; round++) {
        ck_assert_int_eq(shardroot_reset(r, k, nn), 0);
        for (int n = 0; n < nn; n++)
            shardroot_set_node(r, n, cons[n] + cons[n] / 4, cons[n]);
        for (int s = 0; s < k; s++) {
            shardroot_set_target(r, s, tgt[s]);
            for (int n = 0; n < nn; n++) {
                size_t i = (size_t)s * nn + n;
                shardroot_set_need(r, s, n, must[i], room[i], sd[i]);
                shardroot_set_placed(r, s, n, placed[i]);
            }
        }
        ck_assert_int_eq(shardroot_solve(r, NULL), 0);
        *sharded = 0;
        for (int s = 0; s < k; s++) {
            pshift_problem_t *q = pshift_problem_new();
            for (int n = 0; n < nn; n++) {
                int64_t c;
                shardroot_slice(r, s, n, NULL, &c, NULL);
                pshift_add_server(q, NULL, c);
            }
            int qb = 0;
            for (int b = 0; b < nb; b++) {
                if (sh[b] != s)
                    continue;
                pshift_add_bucket(q, NULL, res[b]);
                for (int n = 0; n < nn; n++)
                    pshift_set_demand(q, qb, n, dem[(size_t)b * nn + n]);
                qb++;
            }
            ck_assert_int_eq(pshift_solve(q, NULL), 0);
            *sharded += pshift_stats(q)->weak_excess_final;
            for (int n = 0; n < nn; n++)
                placed[(size_t)s * nn + n] = pshift_server_load(q, n);
            pshift_problem_destroy(&q);
        }
    }
    free(placed);
    shardroot_destroy(&r);
    pshift_problem_destroy(&p);
    free(tgt);
    free(room);
    free(sd);
    free(must);
    free(cons);
    free(res);
    free(dem);
    free(sh);
}

/* Reservations that fit one controller still fit the shards: over 200
 * random clusters (20-420 buckets on 2-32 nodes, 2-8 shards, reserved
 * load 30-80%), wherever the unsharded R pass places every reservation
 * within the conservative capacities, so do the shards within their
 * slices once root and shards have exchanged placements for ROUNDS rounds
 * (the controller's rounds: 5 a period).  The root sees a shard's sums per
 * node, not its buckets, so the first round alone is not exact: with
 * ROUNDS 1, 32 of 46 fitting cases are (worst 834 tokens beyond), 2: 38
 * (183), 6: 43 (7), 10: all (-DROUNDS=1 makes this test fail). */
START_TEST(test_shardroot_reservations_fit_as_unsharded)
{
    rng_t g;
    rng_seed(&g, 11, 2);
    int fits = 0, exact = 0;
    int64_t worst = 0;
    for (int t = 0; t < 200; t++) {
        int nb = 20 + (int)rng_below(&g, 400), nn = 2 + (int)rng_below(&g, 30);
        int k = 2 + (int)rng_below(&g, 7);
        double load = 0.3 + 0.5 * rng_uniform(&g);
        int64_t one, sharded;
        compare(&g, nb, nn, k, load, ROUNDS, &one, &sharded);
        if (one > 0)
            continue;
        fits++;
        exact += sharded == 0;
        if (sharded > worst)
            worst = sharded;
    }
    fprintf(stderr, "shardroot: %d of %d fitting cases exact, worst excess %lld\n", exact, fits,
            (long long)worst);
    ck_assert_int_gt(fits, 40);
    ck_assert_int_eq(exact, fits);
}
END_TEST

/* A shard that placed more last round than it has left to place (it ran
 * ahead of its pace) is given back at most its target by the placement
 * tier; the rest of the node goes to the shard behind, whose R then fits
 * without a cut.  Before the tier was held to the target, both claims
 * (80 and 20 + 70) were cut in proportion: 48 and 52 of 90 (r_cut 70). */
START_TEST(test_shardroot_placed_within_target)
{
    shardroot_t *r = shardroot_new();
    ck_assert_int_eq(shardroot_reset(r, 2, 1), 0);
    ck_assert_int_eq(shardroot_set_node(r, 0, 100, 100), 0);
    ck_assert_int_eq(shardroot_set_target(r, 0, 10), 0);
    ck_assert_int_eq(shardroot_set_need(r, 0, 0, 0, 100, 150), 0);
    ck_assert_int_eq(shardroot_set_placed(r, 0, 0, 80), 0);
    ck_assert_int_eq(shardroot_set_target(r, 1, 90), 0);
    ck_assert_int_eq(shardroot_set_need(r, 1, 0, 0, 100, 150), 0);
    ck_assert_int_eq(shardroot_set_placed(r, 1, 0, 20), 0);
    ck_assert_int_eq(shardroot_solve(r, NULL), 0);
    int64_t r0, r1, c0, c1;
    shardroot_slice(r, 0, 0, NULL, &c0, &r0);
    shardroot_slice(r, 1, 0, NULL, &c1, &r1);
    ck_assert_int_eq(r0, 10);
    ck_assert_int_eq(r1, 90);
    ck_assert_int_le(c0 + c1, 100);
    ck_assert_int_eq(shardroot_stats(r)->r_cut, 0);
    shardroot_destroy(&r);
}
END_TEST

/* Bad arguments are refused and change nothing; slices before a solve
 * are 0. */
START_TEST(test_shardroot_bad_arguments)
{
    shardroot_t *r = shardroot_new();
    ck_assert_int_eq(shardroot_reset(r, 0, 4), -EINVAL);
    ck_assert_int_eq(shardroot_reset(r, SHARDMAP_MAX + 1, 4), -EINVAL);
    ck_assert_int_eq(shardroot_reset(r, 2, 4097), -EINVAL);
    ck_assert_int_eq(shardroot_reset(r, 2, 3), 0);
    ck_assert_int_eq(shardroot_set_node(r, 3, 1, 1), -EINVAL);
    ck_assert_int_eq(shardroot_set_node(r, 0, -1, 1), -EINVAL);
    ck_assert_int_eq(shardroot_set_target(r, 2, 1), -EINVAL);
    ck_assert_int_eq(shardroot_set_target(r, 0, -5), -EINVAL);
    ck_assert_int_eq(shardroot_set_need(r, 0, 3, 0, 1, 1), -EINVAL);
    ck_assert_int_eq(shardroot_set_need(r, 0, 0, 0, -1, 1), -EINVAL);
    ck_assert_int_eq(shardroot_set_need(r, 0, 0, -1, 1, 1), -EINVAL);
    ck_assert_int_eq(shardroot_set_node(r, 0, 50, 40), 0);
    ck_assert_int_eq(est_of(r, 0, 0), 0);
    ck_assert_int_eq(shardroot_solve(r, NULL), 0);
    ck_assert_int_eq(est_of(r, 0, 0) + est_of(r, 1, 0), 50);
    ck_assert_int_eq(est_of(r, 5, 0), 0);
    shardroot_destroy(&r);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {test_shardroot_by_hand, test_shardroot_overbooked_cut,
                                  test_shardroot_random_invariants,
                                  test_shardroot_reservations_fit_as_unsharded,
                                  test_shardroot_bad_arguments,
                                  test_shardroot_placed_within_target};
    return testlib_run_timed("shardroot", 60, tests, sizeof tests / sizeof tests[0]);
}
