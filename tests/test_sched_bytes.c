/* test_sched_bytes.c - Check suite for the scheduler's paced unit accounts (storage-node/core/sched_bytes): a byte-limited backlogged bucket over simulated time stays within its window bounds, a request larger than the depth is served without starving, IO and byte credit are both needed, and stats say why a bucket waits. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "storage-node/core/sched.h"
#include "tests/sched_fixtures.h"
#include "tests/testlib.h"

#define U SCHED_UNLIMITED
#define NB 3
#define PER_BUCKET 8

/* One simulated node: NB backlogged buckets, each with an IO limit and a
 * unit (byte) rate, R and L, granted at each interval start as the agent
 * does: the period's share less what was served in it so far. */
typedef struct {
    sched_t *s;
    double period;
    int k;                           /* intervals per period */
    double io_lim[NB];               /* IOs/s; < 0: no IO limit */
    double ur[NB], ul[NB];           /* units/s: R, and L above it; ul < 0:
                                        no unit limit; ur = ul = 0: no
                                        unit account */
    uint32_t cost[NB];               /* units per request (0: alternate
                                        1 and 3 x `big`) */
    uint32_t big;
    sched_item_t items[NB][PER_BUCKET];
    double *t[NB];                   /* dispatch times */
    uint32_t *c[NB];                 /* and costs */
    size_t n[NB], cap[NB];
    uint64_t seq[NB];
} node_t;

static uint32_t next_cost(node_t *n, int b)
{
    if (n->cost[b])
        return n->cost[b];
    return n->seq[b]++ % 2 ? 3 * n->big : 1;
}

static void node_init(node_t *n, double period, int k, double burst)
{
    memset(n, 0, sizeof *n);
    n->s = sched_fixture_new(NB, 1, burst);
    n->period = period;
    n->k = k;
    for (int b = 0; b < NB; b++)
        n->io_lim[b] = -1;
}

static void node_fill(node_t *n)
{
    for (int b = 0; b < NB; b++)
        for (int i = 0; i < PER_BUCKET; i++) {
            n->items[b][i].cost = next_cost(n, b);
            ck_assert_int_eq(sched_enqueue(n->s, b, &n->items[b][i]), 0);
        }
}

static void node_free(node_t *n)
{
    for (int b = 0; b < NB; b++) {
        free(n->t[b]);
        free(n->c[b]);
    }
    sched_destroy(&n->s);
}

static void record(node_t *n, int b, double t, uint32_t cost)
{
    if (n->n[b] == n->cap[b]) {
        n->cap[b] = n->cap[b] ? 2 * n->cap[b] : 1024;
        n->t[b] = realloc(n->t[b], n->cap[b] * sizeof(double));
        n->c[b] = realloc(n->c[b], n->cap[b] * sizeof(uint32_t));
        ck_assert(n->t[b] && n->c[b]);
    }
    n->t[b][n->n[b]] = t;
    n->c[b][n->n[b]++] = cost;
}

static void grant(node_t *n, double p0, int iv, double t)
{
    if (iv == 0)
        sched_period_start(n->s);
    for (int b = 0; b < NB; b++) {
        sched_bucket_stats_t st;
        ck_assert_int_eq(sched_bucket_stats(n->s, b, &st), 0);
        uint64_t ios = st.served_r + st.served_l + st.served_o;
        int64_t lp = llround(n->io_lim[b] * n->period);
        int64_t l = n->io_lim[b] < 0 ? U : lp > (int64_t)ios ? lp - (int64_t)ios : 0;
        ck_assert_int_eq(sched_set_tokens(n->s, b, 0, l, p0 + n->period, t), 0);
        if (n->ur[b] == 0 && n->ul[b] == 0)
            continue;
        int64_t rp = llround(n->ur[b] * n->period), up = llround(n->ul[b] * n->period);
        int64_t served = (int64_t)st.served_u;
        int64_t from_r = served < rp ? served : rp;
        int64_t ul = n->ul[b] < 0 ? U : up - (served - from_r);
        ck_assert_int_eq(sched_set_units(n->s, b, 1, rp - from_r, ul, p0 + n->period, t), 0);
    }
}

/* Runs `periods` periods from t = 0, a request served coming straight
 * back (of its bucket's next cost). */
static void node_run(node_t *n, int periods)
{
    double iv_len = n->period / n->k, t = 0, end = periods * n->period;
    long iv = 0;
    while (t < end) {
        if (t >= iv * iv_len - 1e-12) {
            grant(n, (double)(iv / n->k) * n->period, (int)(iv % n->k), t);
            iv++;
        }
        sched_item_t *it;
        while ((it = sched_dispatch(n->s, t, NULL)) != NULL) {
            int b = it->bucket;
            record(n, b, t, it->cost);
            it->cost = next_cost(n, b);
            ck_assert_int_eq(sched_enqueue(n->s, b, it), 0);
        }
        double w = sched_next_ready(n->s), next = iv * iv_len;
        ck_assert_msg(w > t, "next ready %.9f not after now %.9f", w, t);
        t = w < next ? w : next;
    }
}

/* Most units bucket b was served in any window [x, x + w). */
static uint64_t max_units(const node_t *n, int b, double w)
{
    uint64_t best = 0, sum = 0;
    size_t j = 0;
    for (size_t i = 0; i < n->n[b]; i++) {
        if (j < i) {
            j = i;
            sum = 0;
        }
        while (j < n->n[b] && n->t[b][j] < n->t[b][i] + w - 1e-9)
            sum += n->c[b][j++];
        if (sum > best)
            best = sum;
        sum -= n->c[b][i];
    }
    return best;
}

static uint64_t total_units(const node_t *n, int b)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < n->n[b]; i++)
        sum += n->c[b][i];
    return sum;
}

/* A byte-limited backlogged bucket runs at its byte limit, not in bursts:
 * at most 1.05 x the limit in every 1 s window and 1.25 x pro rata in
 * every 200 ms window, for requests small against the depth, a limit
 * alone or with a byte reservation, over periods of 1 and 5 s, 1 and 5
 * intervals and depths of 10 to 50 ms; and it gets its limit over the run. */
START_TEST(test_sched_bytes_window_bounds)
{
    const double periods[] = {1, 5};
    const int ks[] = {1, 5};
    const double bursts[] = {0.01, 0.02, 0.05};
    for (size_t pi = 0; pi < 2; pi++)
        for (size_t ki = 0; ki < 2; ki++)
            for (size_t bi = 0; bi < 3; bi++) {
                node_t n;
                node_init(&n, periods[pi], ks[ki], bursts[bi]);
                n.ul[0] = 1024, n.cost[0] = 4;              /* 4 MiB/s of 16 KiB */
                n.ur[1] = 3000, n.ul[1] = 7000, n.cost[1] = 2; /* R and L */
                n.ul[2] = 2560, n.cost[2] = 1, n.io_lim[2] = 1e6; /* a loose IO limit */
                node_fill(&n);
                int np = periods[pi] < 2 ? 4 : 2;
                node_run(&n, np);
                for (int b = 0; b < NB; b++) {
                    double lim = n.ur[b] + n.ul[b];
                    uint64_t w200 = max_units(&n, b, 0.2), w1 = max_units(&n, b, 1.0);
                    double got = (double)total_units(&n, b), want = lim * periods[pi] * np;
                    ck_assert_msg(w200 <= 1.25 * lim * 0.2 && w1 <= 1.05 * lim,
                                  "P %.0f K %d burst %.2f bucket %d (%.0f units/s): %llu in "
                                  "200 ms, %llu in 1 s",
                                  periods[pi], ks[ki], bursts[bi], b, lim,
                                  (unsigned long long)w200, (unsigned long long)w1);
                    ck_assert_msg(got >= 0.99 * want && got <= want + n.cost[b],
                                  "P %.0f K %d burst %.2f bucket %d: %.0f of %.0f units",
                                  periods[pi], ks[ki], bursts[bi], b, got, want);
                }
                node_free(&n);
            }
}
END_TEST

/* Requests larger than the depth (and than a whole period's grant) are
 * served, never starved, and the service exceeds the limit by at most one
 * request over any period-long window; small requests of the same bucket
 * between them do not starve them either. */
START_TEST(test_sched_bytes_large_requests_not_starved)
{
    const uint32_t bigs[] = {50, 300};
    for (size_t i = 0; i < 2; i++) {
        node_t n;
        node_init(&n, 1, 5, 0.02);
        n.big = bigs[i];
        n.ul[0] = 100;        /* depth 1 + 0.02 x 100 = 3 units */
        n.cost[0] = bigs[i];
        n.ul[1] = 100;        /* 1 unit, then 3 x big, ... */
        n.cost[1] = 0;
        n.ul[2] = 1000, n.cost[2] = 1;
        node_fill(&n);
        node_run(&n, 12);
        for (int b = 0; b < 2; b++) {
            uint64_t big = b == 0 ? bigs[i] : 3 * bigs[i]; /* its largest request */
            ck_assert_msg(n.n[b] >= 3, "big %u bucket %d: served %zu requests", bigs[i], b, n.n[b]);
            ck_assert_msg(max_units(&n, b, 1.0) <= 100 + big,
                          "big %u bucket %d: %llu units in 1 s", bigs[i], b,
                          (unsigned long long)max_units(&n, b, 1.0));
            /* Over the run: its limit, within one request either way. */
            uint64_t got = total_units(&n, b);
            ck_assert_msg(got + big >= 1200 && got <= 1200 + big, "big %u bucket %d: %llu units",
                          bigs[i], b, (unsigned long long)got);
        }
        /* The small bucket beside them is paced as usual. */
        ck_assert_uint_le(max_units(&n, 2, 1.0), 1.05 * 1000);
        node_free(&n);
    }
}
END_TEST

/* A request needs credit of both dimensions: the tighter one sets the
 * pace (an IO limit of 50/s with bytes to spare, a byte limit of 200
 * units/s with IOs to spare), and stats say which one a waiting bucket
 * waits for. */
START_TEST(test_sched_bytes_io_and_byte_credit_both_needed)
{
    node_t n;
    node_init(&n, 1, 5, 0.02);
    n.io_lim[0] = 50, n.ul[0] = 100000, n.cost[0] = 4; /* IOs bind: 50/s */
    n.io_lim[1] = 100000, n.ul[1] = 200, n.cost[1] = 4; /* bytes bind: 50/s */
    n.io_lim[2] = 40, n.ul[2] = 200, n.cost[2] = 4;     /* IOs bind: 40/s */
    node_fill(&n);
    node_run(&n, 3);
    const double want[NB] = {150, 150, 120};
    for (int b = 0; b < NB; b++)
        ck_assert_msg(fabs((double)n.n[b] - want[b]) <= 2, "bucket %d: %zu IOs, want %.0f", b,
                      n.n[b], want[b]);
    /* A new period: each spends the credit it holds, then waits for the
     * credit of its binding dimension. */
    grant(&n, 3, 0, 3);
    sched_item_t *it;
    while ((it = sched_dispatch(n.s, 3, NULL)) != NULL)
        ;
    sched_bucket_stats_t st;
    ck_assert_int_eq(sched_bucket_stats(n.s, 0, &st), 0);
    ck_assert_int_eq(st.held, SCHED_HELD_IO_CREDIT);
    ck_assert_int_eq(sched_bucket_stats(n.s, 1, &st), 0);
    ck_assert_int_eq(st.held, SCHED_HELD_BYTE_CREDIT);
    ck_assert(st.lu_wake > 3 && st.lu_wake < 3.1); /* 4 units at 200/s: 20 ms at most */
    node_free(&n);
}
END_TEST

/* Out of unit tokens (not credit): held for byte tokens; a new grant lets
 * it go; turning the account off returns to one token per IO. */
START_TEST(test_sched_bytes_held_for_tokens)
{
    sched_t *s = sched_new(SCHED_POLICY_TOKENS, 0);
    ck_assert_int_eq(sched_set_pacing(s, 1, 0.02), 0);
    ck_assert_int_eq(sched_add_bucket(s, "a", 1), 0);
    sched_item_t it[2] = {{.cost = 10}, {.cost = 10}};
    ck_assert_int_eq(sched_enqueue(s, 0, &it[0]), 0);
    ck_assert_int_eq(sched_enqueue(s, 0, &it[1]), 0);
    ck_assert_int_eq(sched_set_tokens(s, 0, 0, U, 10, 0), 0);
    ck_assert_int_eq(sched_set_units(s, 0, 1, 0, 5, 10, 0), 0);
    ck_assert_ptr_eq(sched_dispatch(s, 0, NULL), &it[0]); /* 1 unit of credit: goes, debt */
    ck_assert_ptr_null(sched_dispatch(s, 100, NULL));
    sched_bucket_stats_t st;
    ck_assert_int_eq(sched_bucket_stats(s, 0, &st), 0);
    ck_assert_int_eq(st.lu_tokens, -5);
    ck_assert_int_eq(st.held, SCHED_HELD_BYTE_TOKENS);
    /* The new grant forgives the credit's debt (its count paid it): from
     * zero, one unit at 20 / 100 units/s comes 5 s later. */
    ck_assert_int_eq(sched_set_units(s, 0, 1, 0, 20, 200, 100), 0);
    ck_assert_ptr_null(sched_dispatch(s, 100, NULL));
    ck_assert_int_eq(sched_bucket_stats(s, 0, &st), 0);
    ck_assert_int_eq(st.held, SCHED_HELD_BYTE_CREDIT);
    ck_assert_double_eq_tol(st.lu_wake, 105, 1e-9);
    ck_assert_double_eq_tol(sched_next_ready(s), 105, 1e-9);
    ck_assert_ptr_eq(sched_dispatch(s, 105, NULL), &it[1]);
    ck_assert_int_eq(sched_set_units(s, 0, 0, 0, 0, INFINITY, 0), 0);
    ck_assert_int_eq(sched_bucket_stats(s, 0, &st), 0);
    ck_assert_int_eq(st.held, 0);
    ck_assert(isnan(st.lu_wake));
    ck_assert_int_eq(sched_set_units(s, 0, 1, 0, 5, NAN, 0), -EINVAL);
    ck_assert_int_eq(sched_set_units(s, 0, 1, 0, 5, 10, INFINITY), -EINVAL);
    sched_destroy(&s);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {
        test_sched_bytes_window_bounds,
        test_sched_bytes_large_requests_not_starved,
        test_sched_bytes_io_and_byte_credit_both_needed,
        test_sched_bytes_held_for_tokens,
    };
    return testlib_run_tests("sched_bytes", tests, sizeof tests / sizeof tests[0]);
}
