/* test_cmetrics.c - Check suite for controller/daemon/metrics: each bucket's period outcome (reservation met or missed, held at limit) from a real ctrl_t's reports and tokens (idle: no demand; a reservation unused), its history, the status reason, and the rendered text. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/ctrl.h"
#include "controller/daemon/metrics.h"
#include "tests/testlib.h"

/* One node of 100 IOPS; T = 1 s in 2 intervals.  rich wants less than its
 * reservation, poor wants more than the node has, capped is limited and
 * backlogged; quiet never has traffic. */
static const char buckets[] = "{\"buckets\":["
                              "{\"name\":\"rich\",\"reservation\":20},"
                              "{\"name\":\"poor\",\"reservation\":500},"
                              "{\"name\":\"capped\",\"reservation\":0,\"limit\":10},"
                              "{\"name\":\"quiet\",\"reservation\":5}]}";

typedef struct {
    ctrl_t *c;
    nodes_t ns;
    timing_t tm;
    pclock_t clk;
    cmetrics_t m;
} fx_t;

static void fx_init(fx_t *f)
{
    memset(f, 0, sizeof *f);
    ctrl_config_t cfg = ctrl_config_default();
    cfg.period_s = 1;
    cfg.intervals = 2;
    ck_assert_ptr_nonnull(f->c = ctrl_new(&cfg));
    bucketfile_t *bf = NULL;
    ck_assert_int_eq(bucketfile_parse(buckets, strlen(buckets), NULL, &bf, NULL), 0);
    ck_assert_int_eq(ctrl_set_buckets(f->c, bf), 0);
    bucketfile_destroy(&bf);
    const char *const *names;
    size_t nb;
    ctrl_table(f->c, &names, &nb);
    ck_assert_int_eq(ctrl_node_hello(f->c, "n0", 0, 100, 1, names, nb), 0);
    f->clk.period_s = 1;
    f->clk.intervals = 2;
    ck_assert_int_eq(cmetrics_init(&f->m, f->c, &f->ns, &f->tm, &f->clk, NULL), 0);
}

/* Period p's last round (interval 1 of 2): rich served 5 and idle, poor
 * and capped backlogged (1,000 queued). */
static uint64_t rich_served = 5; /* 0: rich idle (no demand) */

static void fx_round(fx_t *f, uint64_t p)
{
    const uint64_t served[3] = {rich_served, 50, 5}, queued[3] = {0, 1000, 1000};
    proto_report_rec_t recs[3];
    for (uint32_t b = 0; b < 3; b++)
        recs[b] = (proto_report_rec_t){.bucket = b, .queued = queued[b],
                                       .arrivals_interval = served[b] + queued[b],
                                       .arrivals_period = served[b] + queued[b],
                                       .served_r = served[b], .l_left = PROTO_UNLIMITED};
    const char *const *names;
    uint32_t gen = ctrl_table(f->c, &names, NULL);
    ck_assert_int_eq(ctrl_round_begin(f->c, p, 1, 0), 0);
    ck_assert_int_eq(ctrl_node_report(f->c, 0, p, 1, 1, gen, 60, 0.5, recs, 3), 0);
    ctrl_result_t res;
    ck_assert_int_eq(ctrl_compute(f->c, &res), 0);
    f->tm.nsplits++;
}

static const cmetrics_outcome_t *outcome(const fx_t *f, const char *name)
{
    return cmetrics_outcome(&f->m, name);
}

/* Runs periods from..to, each one round then its end. */
static void fx_periods(fx_t *f, uint64_t from, uint64_t to)
{
    for (uint64_t p = from; p <= to; p++) {
        fx_round(f, p);
        cmetrics_period_end(&f->m, 0);
    }
}

/* Renders the metrics into a new promtext (caller destroys it) and checks
 * it did not fail; *text is its text. */
static promtext_t *fx_render(fx_t *f, const char **text)
{
    promtext_t *p = promtext_new();
    cmetrics_render(&f->m, p);
    ck_assert_int_eq(promtext_error(p), 0);
    *text = promtext_data(p, NULL);
    return p;
}

/* Frees what fx_init() made. */
static void fx_clear(fx_t *f)
{
    cmetrics_clear(&f->m);
    nodes_clear(&f->ns);
    ctrl_destroy(&f->c);
}

START_TEST(test_cmetrics_outcomes)
{
    fx_t f;
    fx_init(&f);
    /* The period the controller started in is not judged: it saw no start. */
    fx_periods(&f, 1, 1);
    ck_assert_uint_eq(f.m.periods_judged, 0);
    fx_periods(&f, 2, 2);
    ck_assert_uint_eq(f.m.periods_judged, 1);
    const cmetrics_outcome_t *rich = outcome(&f, "rich"), *poor = outcome(&f, "poor"),
                             *capped = outcome(&f, "capped");
    ck_assert_ptr_nonnull(rich);
    ck_assert_ptr_nonnull(poor);
    ck_assert_ptr_nonnull(capped);
    ck_assert_uint_eq(rich->met, 1);     /* asked for less than its reservation */
    ck_assert_uint_eq(rich->missed, 0);
    ck_assert_uint_eq(poor->missed, 1);  /* 50 of 500 half way: the node does 100/s */
    ck_assert_uint_eq(poor->met, 0);
    ck_assert_uint_eq(capped->held, 1);  /* wants 1,000, may have 10 */
    ck_assert_uint_eq(capped->met + capped->missed, 0); /* no reservation */
    ck_assert_uint_eq(rich->held + poor->held, 0);      /* no limit */
    /* The same outcomes in each bucket's history, for period 2. */
    ck_assert_uint_eq(history_count(poor->hist), 1);
    const history_rec_t *h = history_get(poor->hist, 0);
    ck_assert_uint_eq(h->period, 2);
    ck_assert_uint_eq(h->flags, HISTORY_RES_MISSED);
    ck_assert_uint_eq(h->served, 50);
    ck_assert_uint_eq(h->queued, 1000);
    ck_assert_uint_eq(history_get(rich->hist, 0)->flags, HISTORY_RES_MET);
    ck_assert_uint_eq(history_get(capped->hist, 0)->flags, HISTORY_HELD);
    /* A bucket that never had traffic is counted but holds no ring (a
     * million idle buckets cost no 1.5 KB each: issue 26 case 5). */
    const cmetrics_outcome_t *quiet = outcome(&f, "quiet");
    ck_assert_ptr_nonnull(quiet);
    ck_assert_uint_eq(quiet->idle, 1); /* a reservation and no demand: idle (issue 28) */
    ck_assert_uint_eq(quiet->met, 0);
    ck_assert_ptr_null(quiet->hist);
    ck_assert_uint_eq(history_count(quiet->hist), 0);
    ck_assert_ptr_null(history_get(quiet->hist, 0));
    ck_assert_ptr_eq(cmetrics_outcome(&f.m, "poor"), poor);
    ck_assert_ptr_null(cmetrics_outcome(&f.m, "nosuch"));
    /* The status's reasons, from the same judge half way through. */
    f.clk.interval = 1;
    const char *want[] = {"rich", NULL, "poor", "below_reservation", "capped", "held_at_limit"};
    for (int b = 0; b < ctrl_nbuckets(f.c); b++) {
        ctrl_bucket_info_t bi;
        ck_assert_int_eq(ctrl_bucket_info(f.c, b, &bi), 0);
        for (int k = 0; k < 6; k += 2)
            if (strcmp(bi.name, want[k]) == 0 && want[k + 1])
                ck_assert_str_eq(cmetrics_reason(&bi, &f.clk), want[k + 1]);
            else if (strcmp(bi.name, want[k]) == 0) /* idle: met or no demand */
                ck_assert(strcmp(cmetrics_reason(&bi, &f.clk), "reservation_met") == 0 ||
                          strcmp(cmetrics_reason(&bi, &f.clk), "no_demand") == 0);
    }
    /* No round closed since: nothing judged. */
    cmetrics_period_end(&f.m, 0);
    ck_assert_uint_eq(f.m.periods_judged, 1);

    const char *t;
    promtext_t *p = fx_render(&f, &t);
    ck_assert_ptr_nonnull(
        strstr(t, "bqos_bucket_periods_total{bucket=\"poor\",outcome=\"reservation_missed\"} 1\n"));
    ck_assert_ptr_nonnull(strstr(t, "bqos_node_up{node=\"n0\"} 1\n"));
    ck_assert_ptr_nonnull(strstr(t, "bqos_bucket_limit_ios_per_second{bucket=\"capped\"} 10\n"));
    ck_assert_ptr_null(strstr(t, "bqos_bucket_limit_ios_per_second{bucket=\"rich\"}"));
    promtext_destroy(&p);
    fx_clear(&f);
}
END_TEST

/* A standby (a leader_t that does not lead) judges every period into the
 * history, so that it holds them after a takeover, but counts nothing; a
 * period is judged once even if the loop ends it twice (a clock adopted
 * again). */
START_TEST(test_cmetrics_standby_judges_once)
{
    fx_t f;
    fx_init(&f);
    leader_t standby = {0};
    f.m.ld = &standby;
    fx_periods(&f, 1, 3);
    fx_periods(&f, 3, 3); /* period 3 ends again */
    ck_assert_uint_eq(f.m.periods_judged, 2);
    const cmetrics_outcome_t *poor = outcome(&f, "poor"), *capped = outcome(&f, "capped");
    ck_assert_ptr_nonnull(poor);
    ck_assert_uint_eq(history_count(poor->hist), 2);
    ck_assert_uint_eq(history_get(poor->hist, 0)->period, 3);
    ck_assert_uint_eq(history_get(poor->hist, 1)->period, 2);
    ck_assert_uint_eq(history_get(poor->hist, 0)->flags, HISTORY_RES_MISSED);
    ck_assert_uint_eq(history_get(capped->hist, 0)->flags, HISTORY_HELD);
    ck_assert_uint_eq(poor->met + poor->missed + poor->held, 0); /* not leading: no count */
    ck_assert_uint_eq(capped->held, 0);
    fx_clear(&f);
}
END_TEST

/* Issue 28: a reserved bucket with no demand in a period is judged idle,
 * not met; after unused_periods idle periods in a row its reservation is
 * unused (status reason, gauge), and demand again ends the run. */
START_TEST(test_cmetrics_idle_and_unused_reservation)
{
    fx_t f;
    fx_init(&f);
    f.m.unused_periods = 3;
    rich_served = 0;
    fx_periods(&f, 1, 4); /* periods 2..4 judged */
    const cmetrics_outcome_t *rich = outcome(&f, "rich"), *capped = outcome(&f, "capped");
    ck_assert_ptr_nonnull(rich);
    ck_assert_uint_eq(rich->idle, 3);
    ck_assert_uint_eq(rich->met, 0);     /* idle is not met */
    ck_assert_uint_eq(rich->idle_run, 3);
    /* Never any traffic: counted idle, but no history ring yet (issue 26
     * case 5: a million idle buckets hold no ring each). */
    ck_assert_ptr_null(rich->hist);
    ck_assert(cmetrics_unused(&f.m, rich));
    ck_assert_uint_eq(capped->idle, 0);  /* no reservation: never idle */
    ck_assert(!cmetrics_unused(&f.m, capped));
    const char *t;
    promtext_t *p = fx_render(&f, &t);
    ck_assert_ptr_nonnull(
        strstr(t, "bqos_bucket_periods_total{bucket=\"rich\",outcome=\"idle\"} 3\n"));
    ck_assert_ptr_nonnull(strstr(t, "bqos_bucket_reservation_idle_periods{bucket=\"rich\"} 3\n"));
    ck_assert_ptr_nonnull(strstr(t, "bqos_bucket_reservation_unused{bucket=\"rich\"} 1\n"));
    ck_assert_ptr_nonnull(strstr(t, "bqos_bucket_reservation_unused{bucket=\"poor\"} 0\n"));
    promtext_destroy(&p);
    /* Demand again: met, and the run ends. */
    rich_served = 5;
    fx_periods(&f, 5, 5);
    rich = outcome(&f, "rich"); /* its record made at its first traffic (issue 26) */
    ck_assert_uint_eq(rich->met, 1);
    ck_assert_uint_eq(rich->idle, 3); /* its quiet periods carried into the record */
    ck_assert_uint_eq(rich->idle_run, 0);
    ck_assert_uint_eq(history_count(rich->hist), 1); /* the ring from its first traffic */
    ck_assert_uint_eq(history_get(rich->hist, 0)->flags, HISTORY_RES_MET);
    /* Idle again: now the ring records it. */
    rich_served = 0;
    fx_round(&f, 6);
    cmetrics_period_end(&f.m, 0);
    rich = outcome(&f, "rich"); /* its quiet periods added (metrics.h) */
    ck_assert_uint_eq(history_get(rich->hist, 0)->flags, HISTORY_IDLE);
    ck_assert_uint_eq(rich->idle_run, 1);
    ck_assert(!cmetrics_unused(&f.m, rich));
    fx_clear(&f);
}
END_TEST

/* The round-time histograms render cumulative buckets up to +Inf, with
 * _count their total and _sum the observations' sum; the refusal,
 * implausible and reload counters render every label value (zeros too). */
START_TEST(test_cmetrics_round_histogram_and_counters)
{
    fx_t f;
    fx_init(&f);
    /* As rounds.c observes: 2 rounds of 0.5 ms, 1 of 3 ms, 1 of 2 s. */
    f.tm.round.counts[0] = 2;
    f.tm.round.counts[2] = 1;
    f.tm.round.counts[TIMING_NBOUNDS] = 1;
    f.tm.round.sum = 0.0005 * 2 + 0.003 + 2;
    auth_t au = {0};
    au.refused[AUTH_UNKNOWN_KEY] = 3;
    f.m.auth = &au;
    f.m.reloads.ok = 2;
    f.m.reloads.error = 1;
    promtext_t *p = promtext_new();
    cmetrics_render(&f.m, p);
    ck_assert_int_eq(promtext_error(p), 0);
    const char *t = promtext_data(p, NULL);
    const char *want[] = {
        "# TYPE bqos_controller_round_duration_seconds histogram\n",
        "bqos_controller_round_duration_seconds_bucket{le=\"0.001\"} 2\n",
        "bqos_controller_round_duration_seconds_bucket{le=\"0.0025\"} 2\n",
        "bqos_controller_round_duration_seconds_bucket{le=\"0.005\"} 3\n",
        "bqos_controller_round_duration_seconds_bucket{le=\"1\"} 3\n",
        "bqos_controller_round_duration_seconds_bucket{le=\"+Inf\"} 4\n",
        "bqos_controller_round_duration_seconds_sum 2.004\n",
        "bqos_controller_round_duration_seconds_count 4\n",
        "bqos_controller_round_compute_seconds_bucket{le=\"+Inf\"} 0\n",
        "bqos_controller_round_compute_seconds_count 0\n",
        "bqos_controller_auth_refusals_total{reason=\"unknown_key\"} 3\n",
        "bqos_controller_auth_refusals_total{reason=\"handshake\"} 0\n",
        "bqos_controller_implausible_reports_total{reason=\"served_beyond_grant\"} 0\n",
        "bqos_controller_implausible_reports_total{reason=\"capacity\"} 0\n",
        "bqos_controller_reloads_total{result=\"ok\"} 2\n",
        "bqos_controller_reloads_total{result=\"error\"} 1\n",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        ck_assert_msg(strstr(t, want[i]), "missing: %s", want[i]);
    /* Cumulative: every bucket at least the one before it. */
    const char *q = t;
    long prev = -1;
    while ((q = strstr(q, "bqos_controller_round_duration_seconds_bucket{"))) {
        long v = strtol(strchr(q, '}') + 1, NULL, 10);
        ck_assert_int_ge(v, prev);
        prev = v;
        q++;
    }
    ck_assert_int_eq(prev, 4);
    /* Without CURVE (no auth_t): zeros, the series still there. */
    f.m.auth = NULL;
    promtext_reset(p);
    cmetrics_render(&f.m, p);
    ck_assert_ptr_nonnull(strstr(promtext_data(p, NULL),
                                 "bqos_controller_auth_refusals_total{reason=\"unknown_key\"} 0\n"));
    promtext_destroy(&p);
    cmetrics_clear(&f.m);
    nodes_clear(&f.ns);
    ctrl_destroy(&f.c);
}
END_TEST

/* ---- quiet periods added lazily (issue 26) ------------------------------- */

/* A deterministic draw in 0..n-1. */
static uint32_t draw(uint64_t *st, uint32_t n)
{
    *st = *st * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(*st >> 33) % n;
}

/* a and b hold the same outcomes, counters and histories. */
static void same_outcomes(const cmetrics_t *a, const cmetrics_t *b)
{
    ck_assert_int_eq(a->nout, b->nout);
    ck_assert_uint_eq(a->periods_judged, b->periods_judged);
    for (int i = 0; i < a->nout; i++) {
        const cmetrics_outcome_t *x = cmetrics_outcome_at(a, i), *y = cmetrics_outcome_at(b, i);
        ck_assert_str_eq(x->name, y->name);
        ck_assert_uint_eq(x->met, y->met);
        ck_assert_uint_eq(x->missed, y->missed);
        ck_assert_uint_eq(x->held, y->held);
        ck_assert_uint_eq(x->idle, y->idle);
        ck_assert_uint_eq(x->idle_run, y->idle_run);
        ck_assert_uint_eq(history_count(x->hist), history_count(y->hist));
        for (size_t k = 0; k < history_count(x->hist); k++) {
            const history_rec_t *hx = history_get(x->hist, k), *hy = history_get(y->hist, k);
            ck_assert_uint_eq(hx->period, hy->period);
            ck_assert_uint_eq(hx->served, hy->served);
            ck_assert_uint_eq(hx->queued, hy->queued);
            ck_assert_uint_eq(hx->flags, hy->flags);
        }
    }
}

#define LZ_NAMES 40
#define LZ_NODES 3

/* Random traffic on 3 nodes (one sparse, one silent for a while) over 40
 * names (30 configured at first; buckets added, changed and removed as it
 * runs, reports ahead of the period): the metrics that add quiet periods
 * lazily hold, after every period, exactly what visiting every bucket
 * every period gives (m.full, the code before). */
START_TEST(test_cmetrics_lazy_quiet_periods_exact)
{
    ctrl_config_t cfg = ctrl_config_default();
    cfg.period_s = 1;
    cfg.intervals = 2;
    ctrl_t *c = ctrl_new(&cfg);
    ck_assert_ptr_nonnull(c);
    char names[LZ_NAMES][8];
    const char *nm[LZ_NAMES];
    for (int j = 0; j < LZ_NAMES; j++) {
        snprintf(names[j], sizeof names[j], "b%02d", j);
        nm[j] = names[j];
    }
    uint64_t st = 42;
    for (int j = 0; j < 30; j++) {
        bucketfile_bucket_t x = {.name = nm[j], .reservation = draw(&st, 3) ? draw(&st, 30) : 0,
                                 .limit = BUCKETFILE_NO_LIMIT, .weight = 1};
        if (draw(&st, 3) == 0)
            x.limit = x.reservation + 5 + draw(&st, 20);
        ck_assert_int_eq(ctrl_set_bucket(c, &x), 0);
    }
    nodes_t ns = {0};
    timing_t tm = {0};
    pclock_t clk = {.period_s = 1, .intervals = 2};
    cmetrics_t lazy, ref;
    ck_assert_int_eq(cmetrics_init(&lazy, c, &ns, &tm, &clk, NULL), 0);
    ck_assert_int_eq(cmetrics_init(&ref, c, &ns, &tm, &clk, NULL), 0);
    ref.full = 1;
    for (int n = 0; n < LZ_NODES; n++) {
        char node[8];
        snprintf(node, sizeof node, "n%d", n);
        ck_assert_int_eq(ctrl_node_hello(c, node, 0, 100, 1, nm, LZ_NAMES), n);
    }
    ck_assert_int_eq(ctrl_node_set_sparse(c, 2, 1), 0);
    uint64_t served[LZ_NODES][LZ_NAMES] = {{0}};
    uint8_t busy[LZ_NODES][LZ_NAMES] = {{0}};
    proto_report_rec_t recs[LZ_NAMES];
    int fewer = 0; /* periods the lazy one visited fewer buckets */
    for (uint64_t p = 1; p <= 80; p++) {
        memset(served, 0, sizeof served);
        for (int n = 0; n < LZ_NODES; n++)
            for (int j = 0; j < LZ_NAMES; j++)
                busy[n][j] = draw(&st, 8) == 0; /* about 1 in 8 pairs busy a period */
        for (uint32_t iv = 0; iv < 2; iv++) {
            ck_assert_int_eq(ctrl_round_begin(c, p, iv, 0), 0);
            for (int n = 0; n < LZ_NODES; n++) {
                if (n == 1 && p >= 20 && p < 26)
                    continue; /* silent: marked down, its pairs held */
                size_t k = 0;
                for (int j = 0; j < LZ_NAMES; j++) {
                    if (!busy[n][j])
                        continue;
                    served[n][j] += draw(&st, 30);
                    uint64_t q = draw(&st, 2) ? draw(&st, 60) : 0;
                    recs[k++] = (proto_report_rec_t){
                        .bucket = (uint32_t)j, .queued = q, .arrivals_interval = q + 3,
                        .arrivals_period = served[n][j] + q, .served_r = served[n][j],
                        .r_left = 1, .l_left = PROTO_UNLIMITED};
                }
                uint32_t gen = ctrl_table(c, NULL, NULL);
                if (n == 2 && draw(&st, 2))
                    ck_assert_int_ge(ctrl_node_report_sparse(c, n, p, iv, 1, gen, 10 * p, 0.1 * p,
                                                             recs, k), 0);
                else
                    ck_assert_int_ge(ctrl_node_report(c, n, p, iv, 1, gen, 10 * p, 0.1 * p, recs, k),
                                     0);
            }
            ctrl_result_t res;
            ck_assert_int_eq(ctrl_compute(c, &res), 0);
            tm.nsplits++;
        }
        if (p % 3 == 0) {
            /* A report ahead of the next period, served but idle, then a
             * computation in this one (a late round) that may drop the
             * pair from the active list. */
            int j = (int)draw(&st, LZ_NAMES);
            recs[0] = (proto_report_rec_t){.bucket = (uint32_t)j, .served_r = 7,
                                           .l_left = PROTO_UNLIMITED};
            ck_assert_int_ge(ctrl_node_report(c, 0, p + 1, 0, 1, ctrl_table(c, NULL, NULL), 10 * p,
                                              0.1 * p, recs, 1),
                             0);
            ctrl_result_t res;
            ck_assert_int_eq(ctrl_compute(c, &res), 0);
        }
        if (p % 4 == 1) { /* a change of the table: add, change or remove */
            int j = (int)draw(&st, LZ_NAMES);
            if (ctrl_bucket_find(c, nm[j]) >= 0 && draw(&st, 2)) {
                ck_assert_int_eq(ctrl_remove_bucket(c, nm[j]), 0);
            } else {
                bucketfile_bucket_t x = {.name = nm[j], .reservation = draw(&st, 20),
                                         .limit = BUCKETFILE_NO_LIMIT, .weight = 1};
                ck_assert_int_eq(ctrl_set_bucket(c, &x), 0);
            }
        }
        if (p % 13 == 0) { /* a whole new table (a reload): new rates, same names */
            const char *const *tn;
            size_t tnb;
            ctrl_table(c, &tn, &tnb);
            bucketfile_t *bf = bucketfile_new();
            ck_assert_ptr_nonnull(bf);
            for (size_t b = tnb; b-- > 0;) { /* reversed: every index moves */
                bucketfile_bucket_t x = {.name = tn[b], .reservation = draw(&st, 25),
                                         .limit = BUCKETFILE_NO_LIMIT, .weight = 1};
                ck_assert_int_eq(bucketfile_set(bf, &x, NULL), 0);
            }
            ck_assert_int_eq(ctrl_set_buckets(c, bf), 0);
            bucketfile_destroy(&bf);
        }
        cmetrics_period_end(&lazy, 0);
        cmetrics_period_end(&ref, 0);
        same_outcomes(&lazy, &ref);
        ck_assert_uint_le(lazy.visited, ref.visited);
        fewer += lazy.visited < ref.visited;
    }
    /* The reference visits every bucket; the lazy one fewer, but in the
     * first period and after a whole new table. */
    ck_assert_uint_eq(ref.visited, (uint64_t)ctrl_nbuckets(c));
    ck_assert_int_ge(fewer, 60);
    cmetrics_clear(&lazy);
    cmetrics_clear(&ref);
    ctrl_destroy(&c);
}
END_TEST

/* 100,000 buckets, one node with traffic in 3 of them: after the first
 * period (the whole table read once), a period's end visits the 3 (was:
 * all 100,000, a name lookup each), and what the idle ones show (idle
 * counts, the rendering) still counts every period. */
START_TEST(test_cmetrics_quiet_buckets_cost_nothing)
{
    enum { NB = 100000 };
    ctrl_config_t cfg = ctrl_config_default();
    cfg.period_s = 1;
    cfg.intervals = 2;
    ctrl_t *c = ctrl_new(&cfg);
    ck_assert_ptr_nonnull(c);
    bucketfile_t *bf = bucketfile_new();
    ck_assert_ptr_nonnull(bf);
    for (int j = 0; j < NB; j++) {
        char name[16];
        snprintf(name, sizeof name, "t%06d", j);
        bucketfile_bucket_t x = {.name = name, .reservation = 1, .limit = BUCKETFILE_NO_LIMIT,
                                 .weight = 1};
        ck_assert_int_eq(bucketfile_set(bf, &x, NULL), 0);
    }
    ck_assert_int_eq(ctrl_set_buckets(c, bf), 0);
    bucketfile_destroy(&bf);
    const char *const three[] = {"t000000", "t050000", "t099999"};
    ck_assert_int_eq(ctrl_node_hello(c, "n0", 0, 1000, 1, three, 3), 0);
    nodes_t ns = {0};
    timing_t tm = {0};
    pclock_t clk = {.period_s = 1, .intervals = 2};
    cmetrics_t m;
    ck_assert_int_eq(cmetrics_init(&m, c, &ns, &tm, &clk, NULL), 0);
    for (uint64_t p = 1; p <= 6; p++) {
        ck_assert_int_eq(ctrl_round_begin(c, p, 1, 0), 0);
        proto_report_rec_t recs[3];
        for (uint32_t j = 0; j < 3; j++)
            recs[j] = (proto_report_rec_t){.bucket = j, .queued = 1, .arrivals_interval = 5,
                                           .arrivals_period = 5, .served_r = 4,
                                           .l_left = PROTO_UNLIMITED};
        ck_assert_int_eq(ctrl_node_report(c, 0, p, 1, 1, ctrl_table(c, NULL, NULL), 10, 0.1,
                                          recs, 3), 0);
        ctrl_result_t res;
        ck_assert_int_eq(ctrl_compute(c, &res), 0);
        tm.nsplits++;
        cmetrics_period_end(&m, 0);
        if (p == 2)
            ck_assert_uint_eq(m.visited, NB); /* the first judged: the table read */
        if (p > 2)
            ck_assert_uint_eq(m.visited, 3);
    }
    const cmetrics_outcome_t *o = cmetrics_outcome(&m, "t012345");
    ck_assert_ptr_nonnull(o);
    ck_assert_uint_eq(o->idle, 5);
    ck_assert_uint_eq(o->idle_run, 5);
    ck_assert_uint_eq(cmetrics_outcome(&m, "t050000")->met, 5);
    /* Records only for the buckets with traffic (issue 26): 3, not 100,000. */
    ck_assert_int_eq(m.nout, 3);
    cmetrics_clear(&m);
    ctrl_destroy(&c);
}
END_TEST

/* A record only for a bucket that had traffic (issue 26): quiet (a
 * reservation, never any traffic) has none and reads its idle periods,
 * in the status and the rendering; a removed bucket's record is freed
 * and its rows go. */
START_TEST(test_cmetrics_records_only_with_traffic)
{
    fx_t f;
    fx_init(&f);
    rich_served = 5;
    fx_periods(&f, 1, 3); /* periods 2..3 judged */
    ck_assert_int_eq(f.m.nout, 3); /* rich, poor, capped; not quiet */
    const cmetrics_outcome_t *q = outcome(&f, "quiet");
    ck_assert_ptr_nonnull(q);
    ck_assert_uint_eq(q->idle, 2);
    ck_assert_uint_eq(q->idle_run, 2);
    ck_assert_uint_eq(q->met + q->missed + q->held, 0);
    const char *t;
    promtext_t *p = fx_render(&f, &t);
    ck_assert_ptr_nonnull(
        strstr(t, "bqos_bucket_periods_total{bucket=\"quiet\",outcome=\"idle\"} 2\n"));
    ck_assert_ptr_nonnull(
        strstr(t, "bqos_bucket_periods_total{bucket=\"quiet\",outcome=\"reservation_met\"} 0\n"));
    ck_assert_ptr_nonnull(strstr(t, "bqos_bucket_reservation_idle_periods{bucket=\"quiet\"} 2\n"));
    ck_assert_ptr_nonnull(strstr(t, "bqos_bucket_periods_total{bucket=\"poor\""));
    promtext_destroy(&p);
    ck_assert_int_eq(ctrl_remove_bucket(f.c, "poor"), 0);
    ck_assert_int_eq(ctrl_round_begin(f.c, 4, 1, 0), 0);
    f.tm.nsplits++;
    cmetrics_period_end(&f.m, 0);
    ck_assert_int_eq(f.m.nout, 2); /* poor's record freed */
    ck_assert_ptr_null(outcome(&f, "poor"));
    ck_assert_uint_eq(outcome(&f, "quiet")->idle_run, 3);
    ck_assert_uint_eq(outcome(&f, "rich")->met, 2);
    p = fx_render(&f, &t);
    ck_assert_ptr_null(strstr(t, "bucket=\"poor\""));
    ck_assert_ptr_nonnull(strstr(t, "bqos_bucket_reservation_idle_periods{bucket=\"quiet\"} 3\n"));
    promtext_destroy(&p);
    /* A row change gives quiet a record, its idle periods carried in (the
     * pending code keeps that it had a reservation). */
    bucketfile_bucket_t x = {.name = "quiet", .reservation = 7, .limit = BUCKETFILE_NO_LIMIT,
                             .weight = 1};
    ck_assert_int_eq(ctrl_set_bucket(f.c, &x), 0);
    ck_assert_int_eq(ctrl_round_begin(f.c, 5, 1, 0), 0);
    f.tm.nsplits++;
    cmetrics_period_end(&f.m, 0);
    ck_assert_int_eq(f.m.nout, 3);
    q = outcome(&f, "quiet");
    ck_assert_ptr_eq(q, cmetrics_outcome_at(&f.m, 2));
    ck_assert_uint_eq(q->idle_run, 4);
    ck_assert_uint_eq(q->idle, 4);
    fx_clear(&f);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {test_cmetrics_outcomes, test_cmetrics_standby_judges_once,
                                  test_cmetrics_idle_and_unused_reservation,
                                  test_cmetrics_round_histogram_and_counters,
                                  test_cmetrics_lazy_quiet_periods_exact,
                                  test_cmetrics_quiet_buckets_cost_nothing,
                                  test_cmetrics_records_only_with_traffic};
    return testlib_run_tests("cmetrics", tests, sizeof tests / sizeof tests[0]);
}
