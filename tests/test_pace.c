/* test_pace.c - Check suite for storage-node/core/pace and the scheduler's paced tokens and urgency order: window bounds of a limited backlogged bucket over simulated time (periods, intervals, burst depths), no starvation, urgency shares, weights, R ahead of its pace within the limit, the bound while catching up, remove/drain/route with pacing, liveness of sched_next_ready(). */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/rng.h"
#include "storage-node/core/pace.h"
#include "storage-node/core/sched.h"
#include "tests/sched_fixtures.h"
#include "tests/testlib.h"

#define U SCHED_UNLIMITED

/* ---- pace.c alone ---- */

START_TEST(test_pace_rate_depth_and_horizon)
{
    pace_t p;
    pace_init(&p);
    ck_assert(!pace_on(&p));
    /* 100 tokens over 1 s from t = 10, depth 20 ms: 1 + 2 units. */
    pace_grant(&p, 100, 11.0, 10.0, 0.02);
    ck_assert(pace_on(&p));
    ck_assert(fabs(p.rate - 100) < 1e-9);
    ck_assert(fabs(p.depth - 3) < 1e-9);
    ck_assert(pace_ready(&p)); /* a first grant starts with one unit */
    pace_take(&p);
    ck_assert(!pace_ready(&p));
    ck_assert(fabs(pace_wake(&p) - 10.01) < 1e-12);
    pace_refill(&p, 10.005);
    ck_assert(!pace_ready(&p));
    pace_refill(&p, 10.01);
    ck_assert(pace_ready(&p));
    pace_refill(&p, 10.5); /* idle: capped at the depth */
    ck_assert(fabs(p.credit - 3) < 1e-9);
    pace_refill(&p, 10.4); /* time going back: nothing */
    ck_assert(fabs(p.credit - 3) < 1e-9);
    /* A new grant keeps the credit (capped at its depth): no extra burst. */
    pace_take(&p);
    pace_take(&p);
    pace_take(&p);
    pace_grant(&p, 50, 11.0, 10.5, 0.02);
    ck_assert(fabs(p.rate - 100) < 1e-9);
    ck_assert(fabs(p.credit) < 1e-9);
    pace_grant(&p, 1, 11.0, 10.5, 0); /* depth 0: one unit */
    ck_assert(fabs(p.depth - 1) < 1e-12);
    /* Nothing accrues after the horizon; a wake beyond it is never. */
    pace_grant(&p, 1, 11.0, 10.5, 0);
    ck_assert(fabs(pace_wake(&p) - 11.0) < 1e-9);
    pace_grant(&p, 1, 10.9, 10.5, 0); /* rate 2.5/s: one unit takes 0.4 s */
    ck_assert(pace_wake(&p) <= 10.9);
    pace_refill(&p, 20);
    ck_assert(pace_ready(&p));
    pace_take(&p);
    ck_assert(isinf(pace_wake(&p)));
    pace_grant(&p, 5, 10.0, 20.0, 0); /* a horizon in the past: no rate */
    ck_assert(p.rate == 0);
    ck_assert(isinf(pace_wake(&p)));
    pace_grant(&p, 5, INFINITY, 20.0, 0);
    ck_assert(!pace_on(&p));
    pace_grant(&p, 5, NAN, 20.0, 0);
    ck_assert(!pace_on(&p));
}
END_TEST

/* What is due is usable, whatever the rounding: at a large clock value the
 * wake time announced makes the unit ready (the scheduler's loop over due
 * buckets relies on it). */
START_TEST(test_pace_wake_is_exact_at_large_times)
{
    pace_t p;
    pace_init(&p);
    double t = 1.7e6;
    pace_grant(&p, 1000000, t + 1.0, t, 0.001);
    for (int i = 0; i < 100000; i++) {
        if (!pace_ready(&p)) {
            double w = pace_wake(&p);
            ck_assert(w > t || w == p.stamp);
            t = w;
            pace_refill(&p, t);
            ck_assert_msg(pace_ready(&p), "not ready at its wake (step %d)", i);
        }
        pace_take(&p);
    }
}
END_TEST

/* Past its horizon a class's stamp stays at `until`, and takes of the burst
 * credit left there end a hair under one unit (depth's fraction): its wake
 * rounds to `until` itself.  A refill at any later time must then make the
 * unit usable (the scheduler's wake_due() pops the class while its wake is
 * due: "not yet" with the same wake spun a node at 100% CPU, it_tenants).
 * First the state that node held, then the same reached from its grant. */
START_TEST(test_pace_due_wake_past_until_is_kept)
{
    double g = 35287.652526662998, u = 35288.649526663001;
    pace_t p = {.rate = 49999.999999848202, .depth = 1000.9999999969641,
                .credit = 0.99999999696410669, .stamp = u, .until = u};
    ck_assert(!pace_ready(&p));
    ck_assert(pace_wake(&p) <= u); /* announced as due within the grant */
    pace_refill(&p, u + 0.36);
    ck_assert_msg(pace_ready(&p), "a wake at %.9f is due at %.9f, the credit is not (%.12f)",
                  pace_wake(&p), u + 0.36, p.credit);

    pace_init(&p);
    pace_grant(&p, 49850, u, g, 0.02); /* 100,000/s over two nodes, 0.997 s left */
    double now = u + 0.1;
    for (int i = 0; i < 2000; i++) {
        pace_refill(&p, now);
        if (!pace_ready(&p)) {
            double w = pace_wake(&p);
            ck_assert_msg(w > now, "take %d: wake %.9f due at %.9f, yet not ready after a refill",
                          i, w, now);
            break;
        }
        pace_take(&p);
    }
}
END_TEST

/* ---- the scheduler in simulated time ---- */

#define NB 4
#define PER_BUCKET 8

/* One node in simulated time: buckets kept backlogged (every served
 * request is queued again at once), a server that takes whatever the
 * scheduler allows except while it stalls, grants at every interval
 * start.  Records every dispatch time per bucket. */
typedef struct {
    sched_t *s;
    int nb;
    double period;
    int k;                   /* intervals per period */
    double r_rate[NB], l_rate[NB]; /* per second: R, and the limit above R */
    double stall_every, stall_len; /* the server stops for stall_len every
                                      stall_every seconds (0: never) */
    double late;             /* the dispatcher wakes this long after
                                sched_next_ready() */
    int fresh_counts;        /* 1: each interval grant is the period's share
                                left (as the controller computes it); 0:
                                the counts the scheduler still holds */
    sched_item_t items[NB][PER_BUCKET];
    double *times[NB];
    size_t nt[NB], cap[NB];
    uint64_t served_class[NB][3];
} node_t;

static void node_init(node_t *n, int nb, double period, int k, double burst, int pacing,
                      sched_order_t order)
{
    memset(n, 0, sizeof *n);
    n->s = sched_fixture_new(nb, pacing, burst);
    ck_assert_int_eq(sched_set_r_order(n->s, order), 0);
    n->nb = nb;
    n->period = period;
    n->k = k;
    for (int b = 0; b < nb; b++)
        for (int i = 0; i < PER_BUCKET; i++)
            ck_assert_int_eq(sched_enqueue(n->s, b, &n->items[b][i]), 0);
}

static void node_free(node_t *n)
{
    for (int b = 0; b < n->nb; b++)
        free(n->times[b]);
    sched_destroy(&n->s);
}

/* The node's defaults for one bucket (1 s periods of 5 intervals, burst
 * 20 ms, paced, R by urgency) with R and L rates r and l per second. */
static void one_bucket(node_t *n, double r, double l)
{
    node_init(n, 1, 1, 5, 0.02, 1, SCHED_ORDER_URGENCY);
    n->r_rate[0] = r, n->l_rate[0] = l;
}

static void record(node_t *n, int b, double t)
{
    if (n->nt[b] == n->cap[b]) {
        n->cap[b] = n->cap[b] ? 2 * n->cap[b] : 1024;
        n->times[b] = realloc(n->times[b], n->cap[b] * sizeof(double));
        ck_assert_ptr_nonnull(n->times[b]);
    }
    n->times[b][n->nt[b]++] = t;
}

/* The grant at the start of interval iv of the period that starts at p0. */
static void grant(node_t *n, double p0, int iv, double t)
{
    double end = p0 + n->period;
    for (int b = 0; b < n->nb; b++) {
        int64_t r, l;
        sched_bucket_stats_t st;
        ck_assert_int_eq(sched_bucket_stats(n->s, b, &st), 0);
        if (iv == 0 || n->fresh_counts) {
            /* The period's share less what was served in it so far. */
            int64_t rp = llround(n->r_rate[b] * n->period);
            int64_t lp = llround(n->l_rate[b] * n->period);
            int64_t sr = iv == 0 ? 0 : (int64_t)st.served_r;
            int64_t sl = iv == 0 ? 0 : (int64_t)(st.served_l + st.served_o);
            r = rp > sr ? rp - sr : 0;
            l = n->l_rate[b] < 0 ? U : lp > sl ? lp - sl : 0;
        } else {
            r = st.r_tokens;
            l = st.l_tokens;
        }
        if (iv == 0)
            sched_period_start(n->s);
        ck_assert_int_eq(sched_set_tokens(n->s, b, r, l, end, t), 0);
    }
}

static int stalled(const node_t *n, double t, double *until)
{
    if (!(n->stall_every > 0))
        return 0;
    double end = floor(t / n->stall_every) * n->stall_every + n->stall_len;
    if (!(end > t))
        return 0;
    *until = end;
    return 1;
}

/* Runs `periods` periods from t = 0 (grants exactly at interval starts). */
static void node_run(node_t *n, int periods)
{
    double iv_len = n->period / n->k, t = 0, end = periods * n->period;
    long iv = 0; /* intervals granted so far */
    while (t < end) {
        if (t >= iv * iv_len - 1e-12) {
            grant(n, (double)(iv / n->k) * n->period, (int)(iv % n->k), t);
            iv++;
        }
        double resume, next = iv * iv_len;
        if (stalled(n, t, &resume)) {
            next = resume < next ? resume : next;
        } else {
            sched_class_t c;
            sched_item_t *it;
            while ((it = sched_dispatch(n->s, t, &c)) != NULL) {
                record(n, it->bucket, t);
                n->served_class[it->bucket][c]++;
                ck_assert_int_eq(sched_enqueue(n->s, it->bucket, it), 0);
            }
            double w = sched_next_ready(n->s);
            ck_assert_msg(w > t, "next ready %.9f not after now %.9f", w, t);
            w += n->late;
            next = w < next ? w : next;
        }
        t = next;
    }
}

/* Most dispatches of bucket b in any window [x, x + w). */
static size_t max_in_window(const node_t *n, int b, double w)
{
    size_t best = 0, j = 0;
    for (size_t i = 0; i < n->nt[b]; i++) {
        if (j < i)
            j = i;
        while (j < n->nt[b] && n->times[b][j] < n->times[b][i] + w - 1e-9)
            j++;
        if (j - i > best)
            best = j - i;
    }
    return best;
}

static double max_gap(const node_t *n, int b)
{
    double g = 0;
    for (size_t i = 1; i < n->nt[b]; i++)
        if (n->times[b][i] - n->times[b][i - 1] > g)
            g = n->times[b][i] - n->times[b][i - 1];
    return g;
}

/* A limited, backlogged bucket runs at its limit, not in bursts: at most
 * 1.25 x L pro rata in every 200 ms window and 1.05 x L in every 1 s
 * window, at least 99% of L over the run, never without service for more
 * than an interval, for periods from 0.5 to 10 s, 1 to 10 intervals and
 * depths up to 50 ms. */
START_TEST(test_sched_pacing_window_bounds)
{
    const double periods[] = {0.5, 1, 5, 10};
    const int ks[] = {1, 5, 10};
    const double bursts[] = {0, 0.01, 0.02, 0.05};
    for (size_t pi = 0; pi < 4; pi++)
        for (size_t ki = 0; ki < 3; ki++)
            for (size_t bi = 0; bi < 4; bi++) {
                node_t n;
                node_init(&n, 3, periods[pi], ks[ki], bursts[bi], 1, SCHED_ORDER_URGENCY);
                n.r_rate[0] = 30, n.l_rate[0] = 70;   /* limit 100/s */
                n.r_rate[1] = 400, n.l_rate[1] = 600; /* limit 1,000/s */
                n.r_rate[2] = 0, n.l_rate[2] = 200;   /* limit 200/s, no R */
                n.fresh_counts = (ki + bi) % 2;
                int np = periods[pi] < 2 ? 4 : 2;
                node_run(&n, np);
                for (int b = 0; b < 3; b++) {
                    double lim = n.r_rate[b] + n.l_rate[b];
                    size_t w200 = max_in_window(&n, b, 0.2), w1 = max_in_window(&n, b, 1.0);
                    double total = (double)n.nt[b], want = lim * periods[pi] * np;
                    ck_assert_msg(w200 <= 1.25 * lim * 0.2 + 1e-9 && w1 <= 1.05 * lim + 1e-9,
                                  "P %.1f K %d burst %.2f bucket %d (L %.0f): %zu in 200 ms, "
                                  "%zu in 1 s",
                                  periods[pi], ks[ki], bursts[bi], b, lim, w200, w1);
                    ck_assert_msg(total >= 0.99 * want && total <= want + 1e-9,
                                  "P %.1f K %d burst %.2f bucket %d: %.0f served of %.0f "
                                  "(R %llu L %llu O %llu)",
                                  periods[pi], ks[ki], bursts[bi], b, total, want,
                                  (unsigned long long)n.served_class[b][0],
                                  (unsigned long long)n.served_class[b][1],
                                  (unsigned long long)n.served_class[b][2]);
                    ck_assert_msg(max_gap(&n, b) <= periods[pi] / ks[ki] + 1e-9,
                                  "P %.1f K %d bucket %d: gap %.3f s", periods[pi], ks[ki], b,
                                  max_gap(&n, b));
                }
                node_free(&n);
            }
}
END_TEST

/* Without pacing (the paper) the same bucket spends its period's tokens at
 * once: this is what the test above guards against. */
START_TEST(test_sched_unpaced_bursts)
{
    node_t n;
    node_init(&n, 1, 5, 5, 0.02, 0, SCHED_ORDER_RR);
    n.l_rate[0] = 100;
    node_run(&n, 2);
    ck_assert_uint_eq(max_in_window(&n, 0, 0.2), 500);
    node_free(&n);
}
END_TEST

/* A server that stops now and then: credit saved up meanwhile is at most
 * the depth, so after a stall the bucket does depth + rate x window at
 * most (one interval per period: no new grant raises the rate); up to a
 * depth of 30 ms that keeps a 400/s bucket within 1.25 x L per 200 ms. */
START_TEST(test_sched_pacing_depth_after_stalls)
{
    const double bursts[] = {0, 0.02, 0.03, 0.05};
    for (size_t bi = 0; bi < 4; bi++) {
        node_t n;
        node_init(&n, 1, 2, 1, bursts[bi], 1, SCHED_ORDER_URGENCY);
        n.r_rate[0] = 100, n.l_rate[0] = 300;
        n.stall_every = 0.45, n.stall_len = 0.1;
        node_run(&n, 3);
        /* depth per class: 1 + burst x rate */
        double dr = 1 + bursts[bi] * 100, dl = 1 + bursts[bi] * 300;
        size_t w = max_in_window(&n, 0, 0.2);
        ck_assert_msg((double)w <= floor(dr) + floor(dl) + 400 * 0.2 + 1e-9,
                      "burst %.2f: %zu in 200 ms", bursts[bi], w);
        if (bursts[bi] <= 0.03)
            ck_assert_msg(w <= 1.25 * 400 * 0.2, "burst %.2f: %zu in 200 ms", bursts[bi], w);
        node_free(&n);
    }
}
END_TEST

/* 5 s of one bucket (R 20 + L 80 per second) with burst depth `burst`, its
 * dispatcher always 15 ms late; the caller frees n. */
static void late_run(node_t *n, double burst)
{
    node_init(n, 1, 1, 5, burst, 1, SCHED_ORDER_URGENCY);
    n->r_rate[0] = 20, n->l_rate[0] = 80;
    n->late = 0.015;
    node_run(n, 5);
}

/* A dispatcher that always comes late (a timer on a busy host) loses
 * nothing while it is late by less than the depth: the bucket still gets
 * its whole limit, no faster. */
START_TEST(test_sched_pacing_late_timer_loses_nothing)
{
    node_t n;
    late_run(&n, 0.02);
    ck_assert_msg(n.nt[0] >= 495 && n.nt[0] <= 500, "%zu served of 500", n.nt[0]);
    ck_assert_uint_le(max_in_window(&n, 0, 0.2), 25);
    ck_assert_uint_le(max_in_window(&n, 0, 1.0), 105);
    node_free(&n);
    /* Without depth (0: strict), the lateness is lost. */
    late_run(&n, 0);
    ck_assert_msg(n.nt[0] < 450, "%zu served of 500", n.nt[0]);
    node_free(&n);
}
END_TEST

/* By urgency, a bucket with 1,000 R-tokens is served about 10 times as
 * often as one with 100 while both are backlogged on a node that cannot
 * serve both; round robin serves them alike.  Paced or not. */
START_TEST(test_sched_urgency_in_proportion_to_r_tokens)
{
    for (int pacing = 0; pacing < 2; pacing++)
        for (int order = 0; order < 2; order++) {
            sched_t *s = sched_new(SCHED_POLICY_TOKENS, 0);
            ck_assert_int_eq(sched_set_pacing(s, pacing, 0.02), 0);
            ck_assert_int_eq(sched_set_r_order(s, (sched_order_t)order), 0);
            static sched_item_t it[2][4];
            for (int b = 0; b < 2; b++) {
                ck_assert_int_eq(sched_add_bucket(s, b ? "small" : "big", 1), b);
                for (int i = 0; i < 4; i++)
                    ck_assert_int_eq(sched_enqueue(s, b, &it[b][i]), 0);
            }
            /* Over a 1 s interval; the node does 880 IOs/s, below 1,100. */
            ck_assert_int_eq(sched_set_tokens(s, 0, 1000, 0, 1.0, 0), 0);
            ck_assert_int_eq(sched_set_tokens(s, 1, 100, 0, 1.0, 0), 0);
            uint64_t n[2] = {0, 0}, first[2] = {0, 0};
            for (int k = 0; k < 880; k++) {
                double t = k / 880.0;
                sched_class_t c;
                sched_item_t *x = sched_dispatch(s, t, &c);
                ck_assert_ptr_nonnull(x);
                ck_assert_int_eq(c, SCHED_CLASS_R);
                n[x->bucket]++;
                if (k < 176) /* the first 200 ms */
                    first[x->bucket]++;
                ck_assert_int_eq(sched_enqueue(s, x->bucket, x), 0);
            }
            double ratio = (double)n[0] / (double)n[1];
            double r200 = (double)first[0] / (double)first[1];
            if (order == SCHED_ORDER_URGENCY)
                ck_assert_msg(ratio > 9.5 && ratio < 10.5 && r200 > 9 && r200 < 11,
                              "pacing %d: %llu : %llu, first 200 ms %llu : %llu", pacing,
                              (unsigned long long)n[0], (unsigned long long)n[1],
                              (unsigned long long)first[0], (unsigned long long)first[1]);
            else if (!pacing) /* paced, the small one gets its 100/s */
                ck_assert_msg(r200 > 0.9 && r200 < 1.1, "rr, pacing %d: %llu : %llu", pacing,
                              (unsigned long long)first[0], (unsigned long long)first[1]);
            sched_destroy(&s);
        }
}
END_TEST

/* Weights multiply urgency: weight 2 with 100 R-tokens is served like 200
 * R-tokens; R still before L; a bucket that gets many more R-tokens
 * catches up at once (its pass is rescaled, not kept). */
START_TEST(test_sched_urgency_weights_and_new_tokens)
{
    sched_t *s = sched_new(SCHED_POLICY_TOKENS, 1);
    ck_assert_int_eq(sched_set_r_order(s, SCHED_ORDER_URGENCY), 0);
    static sched_item_t it[3][4];
    const char *names[] = {"a", "b", "c"};
    for (int b = 0; b < 3; b++) {
        ck_assert_int_eq(sched_add_bucket(s, names[b], b == 0 ? 2 : 1), b);
        for (int i = 0; i < 4; i++)
            ck_assert_int_eq(sched_enqueue(s, b, &it[b][i]), 0);
    }
    ck_assert_int_eq(sched_set_tokens(s, 0, 1000000, 0, INFINITY, 0), 0);
    ck_assert_int_eq(sched_set_tokens(s, 1, 1000000, 0, INFINITY, 0), 0);
    ck_assert_int_eq(sched_set_tokens(s, 2, 0, U, INFINITY, 0), 0);
    uint64_t n[3] = {0};
    for (int k = 0; k < 3000; k++) {
        sched_class_t c;
        sched_item_t *x = sched_dispatch(s, 0, &c);
        ck_assert_ptr_nonnull(x);
        ck_assert_int_ne(x->bucket, 2); /* never L while R waits */
        n[x->bucket]++;
        ck_assert_int_eq(sched_enqueue(s, x->bucket, x), 0);
    }
    ck_assert_msg(n[0] > 1950 && n[0] < 2050, "weight 2: %llu of 3000", (unsigned long long)n[0]);
    /* b now gets 100 times a's tokens: it takes nearly all R service. */
    sched_bucket_stats_t st;
    ck_assert_int_eq(sched_bucket_stats(s, 0, &st), 0);
    ck_assert_int_eq(sched_set_tokens(s, 1, st.r_tokens * 200, 0, INFINITY, 0), 0);
    n[0] = n[1] = 0;
    for (int k = 0; k < 1000; k++) {
        sched_item_t *x = sched_dispatch(s, 0, NULL);
        n[x->bucket]++;
        ck_assert_int_eq(sched_enqueue(s, x->bucket, x), 0);
    }
    ck_assert_msg(n[1] > 980, "b after its new tokens: %llu of 1000", (unsigned long long)n[1]);
    /* Back to round robin: alternation. */
    ck_assert_int_eq(sched_set_r_order(s, SCHED_ORDER_RR), 0);
    ck_assert_int_eq(sched_set_weight(s, 0, 1), 0);
    int last = -1, alternations = 0;
    for (int k = 0; k < 10; k++) {
        sched_item_t *x = sched_dispatch(s, 0, NULL);
        alternations += x->bucket != last;
        last = x->bucket;
        ck_assert_int_eq(sched_enqueue(s, x->bucket, x), 0);
    }
    ck_assert_int_eq(alternations, 10);
    ck_assert_int_eq(sched_set_r_order(s, (sched_order_t)7), -EINVAL);
    ck_assert_int_eq(sched_set_pacing(s, 1, -1), -EINVAL);
    ck_assert_int_eq(sched_set_pacing(s, 1, SCHED_BURST_MAX * 2), -EINVAL);
    ck_assert_int_eq(sched_set_pacing(s, 1, NAN), -EINVAL);
    ck_assert_int_eq(sched_set_tokens(s, 0, 1, 1, NAN, 0), -EINVAL);
    ck_assert_int_eq(sched_set_tokens(s, 0, 1, 1, 5.0, NAN), -EINVAL);
    int on;
    double burst;
    sched_order_t order;
    sched_get_pacing(s, &on, &burst, &order);
    ck_assert(on == 0 && burst == 0 && order == SCHED_ORDER_RR);
    sched_destroy(&s);
}
END_TEST

/* By urgency, a bucket that spent its last R-token (a stride of 1 / weight)
 * and then gets new ones is served in proportion to them at once: its
 * pass is rescaled as from one token, not kept a whole stride ahead (issue
 * 25: at a busy node such a bucket waited for the virtual time to catch up,
 * up to a period; the old rule served it 0 times here). */
START_TEST(test_sched_urgency_last_token_then_new_grant)
{
    sched_t *s = sched_new(SCHED_POLICY_TOKENS, 0);
    ck_assert_int_eq(sched_set_r_order(s, SCHED_ORDER_URGENCY), 0);
    static sched_item_t it[2][4];
    for (int b = 0; b < 2; b++) {
        ck_assert_int_eq(sched_add_bucket(s, b ? "small" : "big", 1), b);
        for (int i = 0; i < 4; i++)
            ck_assert_int_eq(sched_enqueue(s, b, &it[b][i]), 0);
    }
    ck_assert_int_eq(sched_set_tokens(s, 0, 10000, 0, INFINITY, 0), 0);
    ck_assert_int_eq(sched_set_tokens(s, 1, 1, 0, INFINITY, 0), 0);
    int small = 0;
    for (int k = 0; k < 100; k++) { /* small takes its one token */
        sched_item_t *x = sched_dispatch(s, 0, NULL);
        ck_assert_ptr_nonnull(x);
        small += x->bucket == 1;
        ck_assert_int_eq(sched_enqueue(s, x->bucket, x), 0);
    }
    ck_assert_int_eq(small, 1);
    sched_bucket_stats_t st;
    ck_assert_int_eq(sched_bucket_stats(s, 1, &st), 0);
    ck_assert_int_eq(st.r_tokens, 0);
    /* the next grant: 1,000 against big's ~9,900, about 1 in 11 */
    ck_assert_int_eq(sched_set_tokens(s, 1, 1000, 0, INFINITY, 0), 0);
    small = 0;
    for (int k = 0; k < 110; k++) {
        sched_class_t c;
        sched_item_t *x = sched_dispatch(s, 0, &c);
        ck_assert_ptr_nonnull(x);
        ck_assert_int_eq(c, SCHED_CLASS_R);
        small += x->bucket == 1;
        ck_assert_int_eq(sched_enqueue(s, x->bucket, x), 0);
    }
    ck_assert_msg(small >= 7 && small <= 13, "small served %d of 110 after its new grant", small);
    sched_destroy(&s);
}
END_TEST

/* A bucket waiting for credit leaves the ready sets and comes back on time;
 * remove, drain and route keep the heaps right: a drained or emptied
 * bucket is no longer waited for, a routed one pays its target's paced
 * tokens. */
START_TEST(test_sched_pacing_remove_drain_route)
{
    sched_t *s = sched_new(SCHED_POLICY_TOKENS, 0);
    ck_assert_int_eq(sched_set_pacing(s, 1, 0), 0);
    ck_assert_int_eq(sched_set_r_order(s, SCHED_ORDER_URGENCY), 0);
    ck_assert_int_eq(sched_add_bucket(s, "a", 1), 0);
    ck_assert_int_eq(sched_add_bucket(s, "b", 1), 1);
    static sched_item_t it[8];
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(sched_enqueue(s, 0, &it[i]), 0);
    /* 10 L-tokens over 1 s: one every 100 ms. */
    ck_assert_int_eq(sched_set_tokens(s, 0, 0, 10, 1.0, 0), 0);
    ck_assert_ptr_eq(sched_dispatch(s, 0, NULL), &it[0]);
    ck_assert_ptr_null(sched_dispatch(s, 0.05, NULL));
    ck_assert(fabs(sched_next_ready(s) - 0.1) < 1e-9);
    ck_assert_ptr_eq(sched_dispatch(s, 0.1, NULL), &it[1]);
    /* Removing the rest: nothing is waited for any more. */
    ck_assert_int_eq(sched_remove(s, &it[2]), 0);
    ck_assert_int_eq(sched_remove(s, &it[3]), 0);
    ck_assert(isinf(sched_next_ready(s)));
    /* Queued again, then drained. */
    ck_assert_int_eq(sched_enqueue(s, 0, &it[2]), 0);
    ck_assert_int_eq(sched_enqueue(s, 0, &it[3]), 0);
    ck_assert_ptr_null(sched_dispatch(s, 0.15, NULL));
    ck_assert(fabs(sched_next_ready(s) - 0.2) < 1e-9);
    ck_assert_uint_eq(sched_drain(s, NULL, NULL), 2);
    ck_assert(isinf(sched_next_ready(s)));
    /* b routed to a: its requests wait in a's queue at a's pace. */
    ck_assert_int_eq(sched_set_tokens(s, 1, 0, 0, 1.0, 0.15), 0);
    ck_assert_int_eq(sched_enqueue(s, 1, &it[4]), 0);
    ck_assert_int_eq(sched_enqueue(s, 1, &it[5]), 0);
    ck_assert_ptr_null(sched_dispatch(s, 0.15, NULL)); /* b: no tokens */
    ck_assert_int_eq(sched_set_route(s, 1, 0), 0);
    ck_assert(fabs(sched_next_ready(s) - 0.2) < 1e-9);
    ck_assert_ptr_null(sched_dispatch(s, 0.19, NULL));
    sched_class_t c;
    ck_assert_ptr_eq(sched_dispatch(s, 0.2, &c), &it[4]);
    ck_assert_int_eq(c, SCHED_CLASS_L);
    ck_assert_ptr_null(sched_dispatch(s, 0.25, NULL));
    /* The rr policy ignores pacing (and has nothing to wait for). */
    sched_set_policy(s, SCHED_POLICY_RR);
    ck_assert(isinf(sched_next_ready(s)));
    ck_assert_ptr_eq(sched_dispatch(s, 0.25, NULL), &it[5]);
    sched_set_policy(s, SCHED_POLICY_TOKENS);
    /* Pacing off: every token at once; on again: the credit is back. */
    ck_assert_int_eq(sched_enqueue(s, 0, &it[6]), 0);
    ck_assert_int_eq(sched_enqueue(s, 0, &it[7]), 0);
    ck_assert_int_eq(sched_set_pacing(s, 0, 0), 0);
    ck_assert_ptr_eq(sched_dispatch(s, 0.25, NULL), &it[6]);
    ck_assert_int_eq(sched_set_pacing(s, 1, 0), 0);
    ck_assert_ptr_null(sched_dispatch(s, 0.25, NULL));
    ck_assert(sched_next_ready(s) < INFINITY);
    sched_destroy(&s);
}
END_TEST

/* R-tokens ahead of their pace are spent before any L or opportunistic
 * service, within the limit: a node of 1,000 IOs/s with four backlogged
 * buckets for 1 s (b0 no tokens, no limit; b1 10 R-tokens, no limit; b2 10
 * R- and 10 L-tokens; b3 10 R-tokens and limit R).  b1 spends its R-tokens
 * at once (its reservation is never left unspent while the node does
 * opportunistic work: the paper's scheduler did that too); b2 goes ahead
 * of its R pace on L credit, so R and L together stay on the limit's
 * pace; b3 has no L credit and stays on its R pace. */
START_TEST(test_sched_pacing_r_ahead_within_limit)
{
    node_t n;
    node_init(&n, 4, 1, 1, 0.02, 1, SCHED_ORDER_URGENCY);
    ck_assert_int_eq(sched_set_tokens(n.s, 0, 0, U, 1.0, 0), 0);
    ck_assert_int_eq(sched_set_tokens(n.s, 1, 10, U, 1.0, 0), 0);
    ck_assert_int_eq(sched_set_tokens(n.s, 2, 10, 10, 1.0, 0), 0);
    ck_assert_int_eq(sched_set_tokens(n.s, 3, 10, 0, 1.0, 0), 0);
    uint64_t cls[4][3] = {{0}};
    int first_o = -1, last_r1 = -1;
    for (int i = 0; i <= 1000; i++) {
        double t = i * 0.001;
        sched_class_t c;
        sched_item_t *it = sched_dispatch(n.s, t, &c);
        ck_assert_ptr_nonnull(it); /* b0 always may go */
        int b = it->bucket;
        cls[b][c]++;
        record(&n, b, t);
        if (c == SCHED_CLASS_O && first_o < 0)
            first_o = i;
        if (b == 1 && c == SCHED_CLASS_R)
            last_r1 = i;
        for (int q = 2; q < 4; q++) /* limited: on the pace of R + L */
            ck_assert_msg((double)n.nt[q] <= 2 + (q == 2 ? 20 : 10) * (t + 0.02) + 1e-9,
                          "b%d: %zu IOs by %.3f s", q, n.nt[q], t);
        ck_assert_int_eq(sched_enqueue(n.s, b, it), 0);
    }
    ck_assert_uint_eq(cls[1][SCHED_CLASS_R], 10);
    ck_assert_msg(last_r1 >= 0 && last_r1 < first_o, "b1's R-tokens end at %d, O starts at %d",
                  last_r1, first_o);
    ck_assert_uint_eq(cls[2][SCHED_CLASS_R] + cls[2][SCHED_CLASS_L], 20);
    ck_assert_uint_eq(cls[3][SCHED_CLASS_R], 10);
    ck_assert_uint_eq(cls[3][SCHED_CLASS_L] + cls[3][SCHED_CLASS_O], 0);
    ck_assert_uint_gt(cls[0][SCHED_CLASS_O], 400);
    node_free(&n);
}
END_TEST

/* Catching up (docs/performance.md, "What bound holds when demand moves"):
 * a limited bucket (R 100 + L 300 = 400/s, 1 s periods, 5 intervals,
 * each grant the period's share left less what was served) on a server
 * that stops for the first 0.4 s of every period.  From the grant at 0.4 s
 * it runs at what is left over the time left, 400 / 0.6 s: above L pro
 * rata (the 1.25 x per 200 ms does not hold), within 2 + (L x T -
 * served) x (w + burst) / (U - t_g), and never beyond L x T a period. */
START_TEST(test_sched_pacing_catch_up_bound)
{
    node_t n;
    one_bucket(&n, 100, 300);
    n.fresh_counts = 1;
    n.stall_every = 1, n.stall_len = 0.4;
    node_run(&n, 3);
    size_t w = max_in_window(&n, 0, 0.2);
    double bound = 2 + 400.0 * (0.2 + 0.02) / 0.6;
    ck_assert_msg((double)w <= bound + 1e-9, "%zu in 200 ms, bound %.1f", w, bound);
    ck_assert_msg((double)w > 1.25 * 400 * 0.2, "%zu in 200 ms: no catching up?", w);
    for (int p = 0; p < 3; p++) {
        size_t in = 0;
        for (size_t i = 0; i < n.nt[0]; i++)
            in += n.times[0][i] >= p && n.times[0][i] < p + 1;
        ck_assert_msg(in <= 400 && in >= 396, "period %d: %zu IOs", p, in);
    }
    node_free(&n);
}
END_TEST

/* Random operations with pacing and urgency on: whenever nothing may be
 * dispatched, sched_next_ready() is later than now, and at that time a
 * request is dispatched (no lost and no idle wake-ups while nothing else
 * changes); no bucket is ever served beyond its tokens. */
START_TEST(test_sched_pacing_random_liveness)
{
    enum { NBK = 40, NIT = 400 };
    sched_t *s = sched_new(SCHED_POLICY_TOKENS, 1);
    ck_assert_int_eq(sched_set_pacing(s, 1, 0.01), 0);
    ck_assert_int_eq(sched_set_r_order(s, SCHED_ORDER_URGENCY), 0);
    static sched_item_t it[NIT];
    int queued[NIT] = {0};
    int64_t left_r[NBK], left_l[NBK];
    rng_t g;
    rng_seed(&g, 14, 0);
    for (int b = 0; b < NBK; b++) {
        char name[8];
        snprintf(name, sizeof name, "r%d", b);
        ck_assert_int_eq(sched_add_bucket(s, name, (uint32_t)rng_below(&g, 3) + 1), b);
        left_r[b] = 0;
        left_l[b] = U;
    }
    double t = 100.0, end = 101.0;
    uint64_t wakes = 0, served = 0;
    for (int step = 0; step < 200000; step++) {
        uint64_t op = rng_below(&g, 100);
        int b = (int)rng_below(&g, NBK), i = (int)rng_below(&g, NIT);
        if (op < 30) {
            if (!queued[i] && sched_enqueue(s, b, &it[i]) == 0)
                queued[i] = 1;
        } else if (op < 33) {
            if (queued[i] && sched_remove(s, &it[i]) == 0)
                queued[i] = 0;
        } else if (op < 37) {
            if (t >= end)
                end += 1.0;
            int64_t r = (int64_t)rng_below(&g, 50), l = rng_below(&g, 4) ? (int64_t)rng_below(&g, 80) : U;
            ck_assert_int_eq(sched_set_tokens(s, b, r, l, end, t), 0);
            left_r[b] = r;
            left_l[b] = l;
        } else if (op < 38) {
            ck_assert_int_eq(sched_set_weight(s, b, (uint32_t)rng_below(&g, 4) + 1), 0);
        } else {
            sched_class_t c;
            sched_item_t *x = sched_dispatch(s, t, &c);
            if (!x) {
                double w = sched_next_ready(s);
                ck_assert(w > t);
                if (w < INFINITY && w < end) {
                    t = w;
                    x = sched_dispatch(s, t, &c);
                    ck_assert_msg(x != NULL, "nothing at the announced time %.9f", t);
                    wakes++;
                } else {
                    t += 0.001 * (double)rng_below(&g, 10);
                }
            }
            if (x) {
                int q = x->bucket;
                queued[x - it] = 0;
                served++;
                if (c == SCHED_CLASS_R)
                    ck_assert_int_gt(left_r[q]--, 0);
                else if (c == SCHED_CLASS_L)
                    ck_assert_int_gt(left_l[q]--, 0);
                else
                    ck_assert(left_l[q] == U);
            }
        }
    }
    ck_assert_uint_gt(wakes, 1000);
    ck_assert_uint_gt(served, 10000);
    sched_destroy(&s);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {
        test_pace_rate_depth_and_horizon, test_pace_wake_is_exact_at_large_times,
        test_pace_due_wake_past_until_is_kept,
        test_sched_pacing_window_bounds, test_sched_unpaced_bursts,
        test_sched_pacing_depth_after_stalls, test_sched_pacing_late_timer_loses_nothing,
        test_sched_urgency_in_proportion_to_r_tokens,
        test_sched_urgency_weights_and_new_tokens, test_sched_pacing_remove_drain_route,
        test_sched_pacing_random_liveness, test_sched_pacing_r_ahead_within_limit,
        test_sched_pacing_catch_up_bound, test_sched_urgency_last_token_then_new_grant,
    };
    return testlib_run_timed("pace", 120, tests, sizeof tests / sizeof tests[0]);
}
