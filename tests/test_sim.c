/* test_sim.c - Check suite of bqos-sim's modules: event heap, model generator, policy runs. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/rng.h"
#include "workloads/sim/sim_engine.h"
#include "workloads/scenario.h"
#include "workloads/sim/sim_model.h"
#include "workloads/sim/sim_prop.h"
#include "workloads/sim/sim_run.h"
#include "tests/testlib.h"

START_TEST(test_sim_heap_orders_by_time_then_id)
{
    sim_heap_t *h = sim_heap_new(1);
    ck_assert_ptr_nonnull(h);
    ck_assert_int_eq(sim_heap_push(h, 2.0, 5), 0);
    ck_assert_int_eq(sim_heap_push(h, 1.0, 9), 0);
    ck_assert_int_eq(sim_heap_push(h, 1.0, 3), 0);
    sim_event_t e;
    ck_assert_int_eq(sim_heap_pop(h, &e), 0);
    ck_assert_uint_eq(e.id, 3);
    ck_assert_int_eq(sim_heap_pop(h, &e), 0);
    ck_assert_uint_eq(e.id, 9);
    ck_assert_int_eq(sim_heap_pop(h, &e), 0);
    ck_assert_uint_eq(e.id, 5);
    ck_assert_int_eq(sim_heap_pop(h, &e), -ENOENT);
    ck_assert_int_eq(sim_heap_retime_top(h, 1.0), -ENOENT);
    ck_assert_ptr_null(sim_heap_top(h));
    sim_heap_destroy(&h);
    ck_assert_ptr_null(h);
    sim_heap_destroy(&h);
}
END_TEST

/* Random pushes and retimes against a sorted reference: the heap must pop
 * in non-decreasing time whatever the history. */
START_TEST(test_sim_heap_random_retime_pops_sorted)
{
    sim_heap_t *h = sim_heap_new(4);
    rng_t r;
    rng_seed(&r, 7, 0);
    for (uint32_t i = 0; i < 5000; i++)
        ck_assert_int_eq(sim_heap_push(h, rng_uniform(&r), i), 0);
    for (int i = 0; i < 20000; i++) {
        const sim_event_t *t = sim_heap_top(h);
        ck_assert_int_eq(sim_heap_retime_top(h, t->t + rng_uniform(&r)), 0);
    }
    ck_assert_uint_eq(sim_heap_size(h), 5000);
    double last = -1;
    sim_event_t e;
    while (sim_heap_pop(h, &e) == 0) {
        ck_assert(e.t >= last);
        last = e.t;
    }
    sim_heap_clear(h);
    ck_assert_uint_eq(sim_heap_size(h), 0);
    sim_heap_destroy(&h);
}
END_TEST

/* sim_config_default() cut down: `servers` servers of 2,000 IOs/s,
 * `buckets` buckets, each active on `active` servers, periods of 1 s
 * and the given seed. */
static sim_config_t sized(int servers, int buckets, int active, uint64_t seed)
{
    sim_config_t c = sim_config_default();
    c.servers = servers;
    c.buckets = buckets;
    c.capacity = 2000;
    c.period = 1;
    c.active = active;
    c.seed = seed;
    return c;
}

/* The usual model of these tests: 4 servers, 40 buckets. */
static sim_config_t small(void)
{
    return sized(4, 40, 2, 3);
}

/* small() with no demand changes and `reserved` of the capacity reserved. */
static sim_config_t steady(double reserved)
{
    sim_config_t c = small();
    c.reserved = reserved;
    c.changes = 0;
    return c;
}

/* The model of c, which must generate; the test destroys it. */
static sim_model_t *generate(const sim_config_t *c)
{
    char err[128] = "";
    sim_model_t *m = NULL;
    int rc = sim_model_generate(c, &m, err, sizeof(err));
    ck_assert_msg(rc == 0, "sim_model_generate: %d %s", rc, err);
    return m;
}

/* m run under policy p with opts o (NULL: the defaults), which must
 * succeed; the test destroys the result. */
static sim_result_t *run(const sim_model_t *m, sim_policy_t p, const sim_run_opts_t *o)
{
    sim_result_t *r = NULL;
    ck_assert_int_eq(sim_run(m, p, o, &r), 0);
    return r;
}

START_TEST(test_sim_config_rejects_bad_settings)
{
    char err[128];
    sim_config_t c = small();
    ck_assert_int_eq(sim_config_check(&c, err, sizeof(err)), 0);
    c.active = 5;
    ck_assert_int_eq(sim_config_check(&c, err, sizeof(err)), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "active"));
    c = small();
    c.warmup = c.periods;
    ck_assert_int_eq(sim_config_check(&c, err, sizeof(err)), -EINVAL);
    c = small();
    c.delay = c.period; /* longer than an interval */
    ck_assert_int_eq(sim_config_check(&c, err, sizeof(err)), -EINVAL);
    sim_model_t *m = NULL;
    ck_assert_int_eq(sim_model_generate(&c, &m, err, sizeof(err)), -EINVAL);
    ck_assert_ptr_null(m);
}
END_TEST

/* Reservations add up to r x capacity; every phase has N_A distinct
 * servers and demand = DEMAND x reservation; change counts stay in range;
 * the segments carry exactly the phases' IOs. */
START_TEST(test_sim_model_generates_experiment_shape)
{
    sim_config_t c = small();
    c.changes = 3;
    c.changes_upto = 0;
    sim_model_t *m = generate(&c);
    double sum = 0;
    for (int b = 0; b < c.buckets; b++) {
        const sim_bucket_t *bk = &m->buckets[b];
        sum += bk->reservation;
        ck_assert(bk->reservation >= 1 && bk->reservation == floor(bk->reservation));
        if (b)
            ck_assert(bk->reservation <= m->buckets[b - 1].reservation);
        ck_assert_uint_eq(bk->nphases, 1 + (size_t)c.changes * c.periods);
        ck_assert(bk->phases[0].t == 0);
        for (size_t i = 0; i < bk->nphases; i++) {
            const sim_phase_t *ph = &bk->phases[i];
            if (i)
                ck_assert(ph->t > bk->phases[i - 1].t && ph->t < m->horizon);
            ck_assert_int_eq(ph->n, c.active);
            double d = 0;
            for (int k = 0; k < ph->n; k++) {
                ck_assert(ph->servers[k] >= 0 && ph->servers[k] < c.servers);
                for (int j = 0; j < k; j++)
                    ck_assert_int_ne(ph->servers[j], ph->servers[k]);
                d += ph->rates[k];
            }
            ck_assert(fabs(d - c.demand * bk->reservation) < 1e-6 * d);
        }
    }
    double want = c.reserved * c.servers * c.capacity;
    ck_assert(fabs(sum - want) <= c.buckets);
    /* Segments vs the demand integral over the whole run. */
    double seg_ios = 0, dem_ios = 0;
    for (int s = 0; s < c.servers; s++)
        for (size_t g = 0; g < m->nsegs[s]; g++) {
            const sim_segment_t *sg = &m->segs[s][g];
            ck_assert(sg->end > sg->start);
            if (g)
                ck_assert(sg->start >= m->segs[s][g - 1].start);
            seg_ios += sg->rate * (sg->end - sg->start);
        }
    double *acc = calloc((size_t)c.servers, sizeof(double));
    for (int b = 0; b < c.buckets; b++)
        sim_model_demand(m, b, 0, m->horizon, acc);
    for (int s = 0; s < c.servers; s++)
        dem_ios += acc[s];
    free(acc);
    ck_assert(fabs(seg_ios - dem_ios) < 1e-6 * dem_ios);
    ck_assert(fabs(dem_ios - c.demand * sum * m->horizon) < 1e-6 * dem_ios);
    sim_model_destroy(&m);
    ck_assert_ptr_null(m);
}
END_TEST

/* Field by field: struct padding is not part of a model. */
static int segs_differ(const sim_model_t *a, const sim_model_t *b)
{
    for (int s = 0; s < a->cfg.servers; s++) {
        if (a->nsegs[s] != b->nsegs[s])
            return 1;
        for (size_t g = 0; g < a->nsegs[s]; g++) {
            const sim_segment_t *x = &a->segs[s][g], *y = &b->segs[s][g];
            if (x->bucket != y->bucket || x->key != y->key || x->start != y->start ||
                x->end != y->end || x->rate != y->rate || x->outstanding != y->outstanding)
                return 1;
        }
    }
    return 0;
}

START_TEST(test_sim_model_same_seed_same_model)
{
    sim_config_t c = small();
    sim_model_t *a = generate(&c), *b = generate(&c);
    ck_assert(!segs_differ(a, b));
    sim_model_destroy(&b);
    c.seed++;
    b = generate(&c);
    ck_assert(segs_differ(a, b));
    sim_model_destroy(&a);
    sim_model_destroy(&b);
}
END_TEST

START_TEST(test_sim_policy_names_round_trip)
{
    for (int p = 0; p < SIM_NPOLICIES; p++)
        ck_assert_int_eq(sim_policy_parse(sim_policy_name(p)), p);
    ck_assert_int_eq(sim_policy_parse("fifo"), -EINVAL);
    ck_assert_str_eq(sim_policy_name(SIM_NPOLICIES), "?");
}
END_TEST

/* Conservation: nothing is served that did not arrive, a server never does
 * more than its capacity allows, and with demand 1.5 the servers are busy:
 * completions are close to capacity x time. */
START_TEST(test_sim_run_conserves_requests)
{
    sim_config_t c = small();
    sim_model_t *m = generate(&c);
    for (int p = 0; p < SIM_NPOLICIES; p++) {
        sim_result_t *r = run(m, p, NULL);
        ck_assert_uint_eq(r->events, r->arrivals + r->completions);
        ck_assert(r->completions + r->dropped <= r->arrivals + c.servers);
        double capio = c.servers * c.capacity * m->horizon;
        ck_assert(r->completions <= capio * (1 + c.svc_spread));
        ck_assert(r->completions >= 0.97 * capio);
        ck_assert(r->samples == (size_t)c.buckets);
        uint64_t iv = 0, tot = 0;
        for (int b = 0; b < c.buckets; b++) {
            tot += r->served[b];
            for (int k = 0; k < c.intervals; k++)
                iv += r->served_iv[(size_t)k * c.buckets + b];
        }
        ck_assert_uint_eq(iv, tot);
        sim_result_destroy(&r);
        ck_assert_ptr_null(r);
    }
    sim_result_t *r = NULL;
    ck_assert_int_eq(sim_run(m, SIM_NPOLICIES, NULL, &r), -EINVAL);
    sim_model_destroy(&m);
}
END_TEST

/* A run depends on the seed only, not on the number of threads. */
START_TEST(test_sim_run_deterministic_across_threads)
{
    sim_config_t c = small();
    sim_model_t *m = generate(&c);
    sim_run_opts_t o1 = {.threads = 1}, o2 = {.threads = 2};
    sim_result_t *a = run(m, SIM_POLICY_PSHIFT, &o1), *b = run(m, SIM_POLICY_PSHIFT, &o2);
    ck_assert_uint_eq(a->events, b->events);
    ck_assert_int_eq(memcmp(a->served_iv, b->served_iv,
                            (size_t)c.intervals * c.buckets * sizeof(uint32_t)), 0);
    sim_result_destroy(&a);
    sim_result_destroy(&b);
    sim_model_destroy(&m);
}
END_TEST

/* What a test checks of the result r of running m, the model of c, under
 * policy p. */
typedef void result_check_fn(const sim_config_t *c, const sim_model_t *m, sim_policy_t p,
                             const sim_result_t *r);

/* Runs the model of c under each of the n policies pol[] with opts o (NULL:
 * the defaults) and checks each result with check. */
static void run_each(const sim_config_t *c, const sim_policy_t *pol, size_t n,
                     const sim_run_opts_t *o, result_check_fn *check)
{
    sim_model_t *m = generate(c);
    for (size_t i = 0; i < n; i++) {
        sim_result_t *r = run(m, pol[i], o);
        check(c, m, pol[i], r);
        sim_result_destroy(&r);
    }
    sim_model_destroy(&m);
}

/* Every reservation met, except under rr; pshift solves once an interval. */
static void meets_unless_rr(const sim_config_t *c, const sim_model_t *m, sim_policy_t p,
                            const sim_result_t *r)
{
    (void)m;
    ck_assert_msg(p != SIM_POLICY_RR ? r->meet99 == 1.0 : r->meet99 < 1.0, "%s: meet99 %g",
                  sim_policy_name(p), r->meet99);
    if (p == SIM_POLICY_PSHIFT)
        ck_assert_uint_eq(r->rounds, (uint64_t)c->periods * c->intervals);
}

/* 70% of the capacity reserved, skewed reservations, no demand changes:
 * static tokens and pshift meet every reservation; rr, which ignores
 * reservations, does not. */
START_TEST(test_sim_run_policies_meet_easy_reservations)
{
    sim_config_t c = steady(0.7);
    c.res_zipf = 1.2;
    static const sim_policy_t pol[] = {SIM_POLICY_STATIC, SIM_POLICY_PSHIFT, SIM_POLICY_RR};
    run_each(&c, pol, sizeof pol / sizeof pol[0], NULL, meets_unless_rr);
}
END_TEST

/* The window counts match the layout (T = 1 s: 1 long and 5 short windows
 * per bucket and measured period), and policy p holds the limits as
 * test_sim_run_limits_hold_per_window says. */
static void limits_by_policy(const sim_config_t *c, const sim_model_t *m, sim_policy_t p,
                             const sim_result_t *r)
{
    ck_assert(m->buckets[0].limit >= 1.5 * m->buckets[0].reservation);
    const report_win_fig_t *wl = &r->win[REPORT_WIN_LONG], *ws = &r->win[REPORT_WIN_SHORT];
    uint64_t nb = (uint64_t)c->buckets * (uint64_t)(c->periods - c->warmup);
    ck_assert_uint_eq(wl->windows, nb);
    ck_assert_uint_eq(ws->windows, 5 * nb);
    ck_assert_uint_eq(wl->l_windows, nb);
    /* Demanding (report.h): a bucket with a request queued or in service
     * at one server all through the window (an open-loop backlog dropped
     * at a period start counts until the bucket's next arrival).  The
     * paced scheduler holds every bucket at L = 1.5 x R under a demand of
     * 3 x R: queued (seed 3: 40 of 40 long windows, 198 of 200 short).
     * Unpaced tokens serve a bucket as it arrives until they run out, and
     * rr lets buckets through with no queue: about half the long windows
     * count, and more of the short ones. */
    ck_assert_uint_le(wl->r_windows, nb);
    if (p == SIM_POLICY_PSHIFT_PACED)
        ck_assert_msg(wl->r_windows == nb && 100 * ws->r_windows >= 98 * 5 * nb,
                      "paced: %llu, %llu", (unsigned long long)wl->r_windows,
                      (unsigned long long)ws->r_windows);
    else if (p != SIM_POLICY_RR)
        ck_assert_msg(3 * wl->r_windows >= nb && ws->r_windows >= 3 * nb,
                      "%s: %llu of %llu long, %llu short", sim_policy_name(p),
                      (unsigned long long)wl->r_windows, (unsigned long long)nb,
                      (unsigned long long)ws->r_windows);
    if (p == SIM_POLICY_RR) {
        ck_assert_msg(wl->l_worst > 1.5, "rr: %g", wl->l_worst);
    } else if (p == SIM_POLICY_PSHIFT_PACED) {
        ck_assert_msg(wl->l_worst <= 1.05 && ws->l_worst <= 1.25, "paced: %g %g", wl->l_worst,
                      ws->l_worst);
        ck_assert_msg(ws->r_share >= 0.99, "paced: %g", ws->r_share);
    } else {
        ck_assert_msg(ws->l_worst > 1.5, "%s: %g", sim_policy_name(p), ws->l_worst);
        ck_assert_msg(wl->l_worst <= 1.02, "%s: %g", sim_policy_name(p), wl->l_worst);
        ck_assert_msg(wl->r_share >= 0.9, "%s: %g", sim_policy_name(p), wl->r_share);
    }
}

/* Limits at 1.5 x reservation, demand 3 x reservation, half the capacity
 * reserved: every token policy keeps each bucket within its limit over
 * every 1 s window (= the period here); rr, with no tokens, lets buckets run
 * far over theirs.  Only the paced scheduler also holds the limit over
 * 200 ms windows (issue 14: 1.25 x L pro rata) and serves R in each of them;
 * the others spend a period's tokens in bursts. */
START_TEST(test_sim_run_limits_hold_per_window)
{
    sim_config_t c = steady(0.5);
    c.demand = 3;
    c.limit = 1.5;
    static const sim_policy_t pol[] = {SIM_POLICY_RR, SIM_POLICY_STATIC, SIM_POLICY_PSHIFT,
                                       SIM_POLICY_PSHIFT_PACED, SIM_POLICY_CLAIRVOYANT};
    const sim_run_opts_t o = {.burst_s = SIM_BURST_DEFAULT};
    run_each(&c, pol, sizeof pol / sizeof pol[0], &o, limits_by_policy);
}
END_TEST

/* Issue 25: the simulator's R window figure had the old rule (requests
 * queued at a window's start plus arrivals in it >= R x len), under which
 * a starved closed-loop bucket never counted.  One server, two closed-loop
 * buckets with 4 requests in flight each, the first reserving about 80% of
 * the capacity: rr halves the server, so the first gets about 62% of its R
 * while always queued; every window counts and the first bucket's miss.
 * (Old rule: 2 of 4 long windows counted, r_share 1.) */
START_TEST(test_sim_run_starved_closed_loop_counts)
{
    sim_config_t c = sized(1, 2, 1, 1);
    c.periods = 3;
    c.reserved = 0.9;
    c.res_zipf = 3;
    c.changes = 0;
    c.outstanding = 4;
    sim_model_t *m = generate(&c);
    sim_result_t *r = run(m, SIM_POLICY_RR, NULL);
    const report_win_fig_t *wl = &r->win[REPORT_WIN_LONG], *ws = &r->win[REPORT_WIN_SHORT];
    ck_assert_msg(r->worst < 0.7, "worst %g", r->worst);
    ck_assert_uint_eq(wl->r_windows, 4);
    ck_assert_uint_eq(ws->r_windows, 20);
    ck_assert_double_eq_tol(wl->r_share, 0.5, 1e-12);
    ck_assert_double_eq_tol(ws->r_share, 0.5, 1e-12);
    ck_assert_msg(wl->r_worst < 0.7, "r_worst %g", wl->r_worst);
    sim_result_destroy(&r);
    sim_model_destroy(&m);
}
END_TEST

/* A model from scenario text, which must parse and build (run settings:
 * the defaults, no warm-up); the test destroys it. */
static sim_model_t *from_text(const char *text)
{
    scenario_t *sc = NULL;
    jsonloc_err_t je;
    ck_assert_msg(scenario_parse(text, strlen(text), "t", NULL, &sc, &je) == 0, "%s", je.text);
    sim_config_t run = sim_config_default();
    run.warmup = 0;
    char err[128] = "";
    sim_model_t *m = NULL;
    ck_assert_msg(sim_model_from_scenario(sc, &run, &m, err, sizeof(err)) == 0, "%s", err);
    scenario_destroy(&sc);
    return m;
}

/* Issue 25's mechanism: one server of 10,000 IOs/s, bucket a reserving
 * 40% of it with 8 requests in flight behind a 0.2 ms round trip (enough:
 * unloaded, 8 / (0.2 ms + 16 / 10,000 IOs/s) = 4,444 IOs/s), bucket b
 * unlimited with 24.  With the old model (one IO at a time from the
 * scheduler) a meets R; with 32 IOs in the backend's FIFO (in service 16
 * at a time) a's requests wait behind b's, a's round trip is about 3.4 ms
 * and it gets about 8 / 3.4 ms = 2,400 IOs/s whatever its tokens. */
#define ISSUE25_ONE_SERVER(backend) \
    "{\"duration\": 3, \"capacity\": 10000, \"seed\": 2, " backend \
    "\"workload\": {\"rtt_ms\": 0.2}, \"servers\": [{\"name\": \"s\", \"address\": \"h:1\"}], " \
    "\"buckets\": [{\"name\": \"a\", \"reservation\": 4000, \"outstanding\": 8}, " \
    "{\"name\": \"b\", \"reservation\": 1000, \"outstanding\": 24}]}"

START_TEST(test_sim_backend_fifo_starves_a_reserved_bucket)
{
    sim_model_t *old = from_text(ISSUE25_ONE_SERVER(""));
    sim_model_t *fifo = from_text(ISSUE25_ONE_SERVER(
        "\"backend\": {\"window\": 32, \"parallel\": 16, \"service_cv\": 0.3}, "));
    ck_assert_int_eq(old->window, 0);
    ck_assert_int_eq(fifo->window, 32);
    ck_assert_int_eq(fifo->parallel, 16);
    ck_assert_double_eq_tol(fifo->rtt, 0.0002, 1e-12);
    sim_result_t *ro = run(old, SIM_POLICY_PSHIFT_PACED, NULL);
    sim_result_t *rf = run(fifo, SIM_POLICY_PSHIFT_PACED, NULL);
    for (int p = 1; p < 3; p++) {
        double a_old = ro->served[p * 2] / 4000.0, a_fifo = rf->served[p * 2] / 4000.0;
        ck_assert_msg(a_old >= 0.99, "period %d: old model a got %g x R", p, a_old);
        ck_assert_msg(a_fifo < 0.7, "period %d: FIFO model a got %g x R", p, a_fifo);
        /* the server stays busy: b takes what a cannot */
        ck_assert_uint_ge(rf->delivered[p], 9500);
    }
    sim_result_destroy(&ro);
    sim_result_destroy(&rf);
    sim_model_destroy(&old);
    sim_model_destroy(&fifo);
}
END_TEST

/* Reserved headroom (issue 25), inside its guarantee: a backend of 2 IOs
 * at a time (0.2 ms each) behind the adaptive window, which keeps about 8
 * more queued there; a reserves 40% with 4 in flight (>= 2 x 4,000/s x
 * 0.4 ms = 3.2), b is unlimited with 24.  Headroom off: a waits behind
 * b's queue at the backend and gets under 0.85 of R (0.78); on (the
 * default): at least 0.95 (1.01 and 0.96), and the server delivers as much. */
#define ONE_SERVER_HEADROOM(h) \
    "{\"duration\": 3, \"capacity\": 10000, \"seed\": 2, \"backend\": {\"window\": \"auto\", " \
    "\"parallel\": 2, \"service_cv\": 0.3" h "}, \"workload\": {\"rtt_ms\": 0.2}, " \
    "\"servers\": [{\"name\": \"s\", \"address\": \"h:1\"}], " \
    "\"buckets\": [{\"name\": \"a\", \"reservation\": 4000, \"outstanding\": 4}, " \
    "{\"name\": \"b\", \"reservation\": 1000, \"outstanding\": 24}]}"

START_TEST(test_sim_headroom_lets_a_reserved_bucket_reach_r)
{
    sim_model_t *off = from_text(ONE_SERVER_HEADROOM(", \"headroom\": 0"));
    sim_model_t *on = from_text(ONE_SERVER_HEADROOM(""));
    ck_assert_int_eq(off->headroom, 0);
    ck_assert_int_eq(on->headroom, -1);
    sim_result_t *r0 = run(off, SIM_POLICY_PSHIFT_PACED, NULL);
    sim_result_t *r1 = run(on, SIM_POLICY_PSHIFT_PACED, NULL);
    for (int p = 1; p < 3; p++) {
        double a0 = r0->served[p * 2] / 4000.0, a1 = r1->served[p * 2] / 4000.0;
        ck_assert_msg(a0 < 0.85, "period %d: headroom off, a got %g x R", p, a0);
        ck_assert_msg(a1 >= 0.95, "period %d: headroom on, a got %g x R", p, a1);
        ck_assert_uint_ge(r1->delivered[p] + 100, r0->delivered[p]);
    }
    sim_result_destroy(&r0);
    sim_result_destroy(&r1);
    sim_model_destroy(&off);
    sim_model_destroy(&on);
}
END_TEST

/* "speed": a server at 0.5 from period 1 to 2 delivers half as much in
 * it, with the adaptive window too; delivered[] counts per server. */
START_TEST(test_sim_speed_steps_and_auto_window)
{
    sim_model_t *m = from_text(
        "{\"duration\": 4, \"capacity\": 10000, \"backend\": {\"window\": \"auto\"}, "
        "\"servers\": [{\"name\": \"s\", \"address\": \"h:1\", \"speed\": "
        "[{\"from_period\": 1, \"factor\": 0.5}, {\"from_period\": 3, \"factor\": 1}]}, "
        "{\"name\": \"t\", \"address\": \"h:2\"}], "
        "\"buckets\": [{\"name\": \"a\", \"outstanding\": 16}]}");
    ck_assert_int_eq(m->window, SIM_WINDOW_AUTO);
    ck_assert_double_eq(sim_model_speed(m, 0, 0.5), 1);
    ck_assert_double_eq(sim_model_speed(m, 0, 1.5), 0.5);
    ck_assert_double_eq(sim_model_speed(m, 0, 2.5), 0.5);
    ck_assert_double_eq(sim_model_speed(m, 0, 3.5), 1);
    ck_assert_double_eq(sim_model_speed(m, 1, 1.5), 1);
    sim_result_t *r = run(m, SIM_POLICY_RR, NULL);
    ck_assert_int_eq(r->servers, 2);
    for (int p = 0; p < 4; p++) {
        double want = p == 1 || p == 2 ? 5000 : 10000;
        ck_assert_msg(fabs((double)r->delivered[p * 2] - want) < 0.03 * want,
                      "period %d: s delivered %llu", p, (unsigned long long)r->delivered[p * 2]);
        ck_assert_msg(fabs((double)r->delivered[p * 2 + 1] - 10000) < 300, "period %d: t", p);
    }
    sim_result_destroy(&r);
    sim_model_destroy(&m);
}
END_TEST

/* --trace: a line per control round and node for a traced bucket with
 * what the controller placed and the node did (20 columns; its reservation
 * placed in the first round), none for a bucket not traced or a policy
 * without a controller. */
START_TEST(test_sim_run_trace_pairs)
{
    sim_model_t *m = from_text(
        "{\"duration\": 2, \"capacity\": 10000, \"servers\": [{\"name\": \"s\", "
        "\"address\": \"h:1\"}, {\"name\": \"t\", \"address\": \"h:2\"}], "
        "\"buckets\": [{\"name\": \"a\", \"reservation\": 2000, \"servers\": [\"s\"], "
        "\"outstanding\": 8}, {\"name\": \"b\", \"reservation\": 1000, \"outstanding\": 8}]}");
    const int which[] = {0};
    for (int pol = 0; pol < 2; pol++) {
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        ck_assert_ptr_nonnull(f);
        sim_run_opts_t o = {.trace = f, .trace_b = which, .ntrace = 1};
        sim_result_t *r = run(m, pol ? SIM_POLICY_RR : SIM_POLICY_PSHIFT_PACED, &o);
        ck_assert_int_eq(fclose(f), 0);
        int lines = 0, first_r = -1;
        for (char *sp, *ln = strtok_r(buf, "\n", &sp); ln; ln = strtok_r(NULL, "\n", &sp)) {
            int commas = 0;
            for (char *q = ln; *q; q++)
                commas += *q == ',';
            ck_assert_int_eq(commas, 19);
            int p, k, b, n;
            long long rt;
            ck_assert_int_eq(sscanf(ln, "%d,%d,%d,%d,%*f,%*f,%*d,%*u,%*u,%*u,%*u,%*u,%*d,%lld", &p,
                                    &k, &b, &n, &rt), 5);
            ck_assert_int_eq(b, 0);
            ck_assert_int_eq(n, 0); /* a is on s only */
            if (lines++ == 0)
                first_r = (int)rt;
        }
        if (pol) {
            ck_assert_int_eq(lines, 0);
        } else {
            ck_assert_int_eq(lines, 10); /* 2 periods x 5 rounds */
            ck_assert_int_eq(first_r, 2000);
        }
        free(buf);
        sim_result_destroy(&r);
    }
    sim_model_destroy(&m);
}
END_TEST

/* The property test's checker: on issue 25's one-server model it judges
 * bucket a (its R fits and 8 in flight allow 4,444 IOs/s unloaded) and
 * finds it short; b's limit-free periods are not limit periods. */
START_TEST(test_sim_prop_check_judges_the_starved_bucket)
{
    sim_model_t *m = from_text(ISSUE25_ONE_SERVER(
        "\"backend\": {\"window\": 32, \"parallel\": 16, \"service_cv\": 0.3}, "));
    sim_result_t *r = run(m, SIM_POLICY_PSHIFT_PACED, NULL);
    sim_prop_verdict_t v;
    ck_assert_int_eq(sim_prop_check(m, r, &v), 0);
    ck_assert_uint_eq(v.periods, 3);
    ck_assert_uint_eq(v.fit, 3);
    /* a's 8 in flight allow 1.11 x R unloaded: below the guarantee
     * (2 x R), counted apart and not judged (the old checker judged it:
     * 6 judged, a short in all 3) */
    ck_assert_uint_eq(v.judged, 3);
    ck_assert_uint_eq(v.met99, 3); /* b */
    ck_assert_uint_eq(v.short_judged, 3);
    ck_assert_uint_eq(v.short_met99, 0);
    ck_assert_uint_eq(v.l_periods, 0);
    sim_result_destroy(&r);
    sim_model_destroy(&m);
    /* 20 in flight (2.8 x R unloaded) behind a fixed window of 128 that b's
     * 64 fill: a's round trip is about 8.6 ms, it is judged and short. */
    m = from_text("{\"duration\": 3, \"capacity\": 10000, \"seed\": 2, "
                  "\"backend\": {\"window\": 128, \"parallel\": 16, \"service_cv\": 0.3}, "
                  "\"workload\": {\"rtt_ms\": 0.2}, \"servers\": [{\"name\": \"s\", "
                  "\"address\": \"h:1\"}], \"buckets\": [{\"name\": \"a\", \"reservation\": "
                  "4000, \"outstanding\": 20}, {\"name\": \"b\", \"reservation\": 1000, "
                  "\"outstanding\": 64}]}");
    r = run(m, SIM_POLICY_PSHIFT_PACED, NULL);
    ck_assert_int_eq(sim_prop_check(m, r, &v), 0);
    ck_assert_uint_eq(v.judged, 6);
    ck_assert_uint_eq(v.short_judged, 0);
    ck_assert_int_eq(v.worst_bucket, 0);
    ck_assert_msg(v.worst < 0.7, "a got %g x R", v.worst);
    sim_result_destroy(&r);
    sim_model_destroy(&m);
    /* A seed's scenario parses and is the same every time. */
    char *a = sim_prop_scenario(7), *b = sim_prop_scenario(7);
    ck_assert_ptr_nonnull(a);
    ck_assert_str_eq(a, b);
    free(a);
    free(b);
}
END_TEST

/* The checker's fit test counts a bucket that moves in mid-period at each
 * of its server sets for the time it was there: c (R 6,000) leaves s0 for
 * s1 at 1.5 s, where a holds 8,000 of s1's 10,000 IOs/s.  Period 1 needs
 * 3,000 of c's at s1 besides a's 8,000: it does not fit.  The old checker
 * let c's whole period go to s0 (it had delivered 5,000 there and 1,000
 * more fit at s1) and judged the period: fit 2 of 3. */
START_TEST(test_sim_prop_check_splits_a_moving_bucket_by_time)
{
    sim_model_t *m = from_text(
        "{\"duration\": 3, \"capacity\": 10000, \"seed\": 5, \"servers\": ["
        "{\"name\": \"s0\", \"address\": \"h:1\"}, {\"name\": \"s1\", \"address\": \"h:2\"}], "
        "\"buckets\": [{\"name\": \"a\", \"reservation\": 8000, \"servers\": [\"s1\"], "
        "\"outstanding\": 32}, {\"name\": \"c\", \"reservation\": 6000, \"servers\": [\"s0\"], "
        "\"outstanding\": 32, \"changes\": [{\"at\": 1.5, \"servers\": [\"s1\"]}]}]}");
    sim_result_t *r = run(m, SIM_POLICY_PSHIFT_PACED, NULL);
    sim_prop_verdict_t v;
    ck_assert_int_eq(sim_prop_check(m, r, &v), 0);
    ck_assert_uint_eq(v.periods, 3);
    ck_assert_msg(r->delivered[1 * 2 + 0] >= 4000, "s0 delivered %llu in period 1",
                  (unsigned long long)r->delivered[2]);
    ck_assert_uint_eq(v.fit, 1); /* period 0 only */
    sim_result_destroy(&r);
    sim_model_destroy(&m);
}
END_TEST

/* A runtime `set` (scenario "set"): from period 2 bucket a reserves 6,000
 * instead of 3,000 IOs/s and b gets a limit.  The controller gets the new
 * bucket file, as from bqos-ctl set; the results and the checker use the
 * reservation in force in each period. */
START_TEST(test_sim_runtime_set_follows)
{
    sim_model_t *m = from_text(
        "{\"duration\": 4, \"capacity\": 10000, \"seed\": 3, \"servers\": "
        "[{\"name\": \"s\", \"address\": \"h:1\"}], \"buckets\": ["
        "{\"name\": \"a\", \"reservation\": 3000, \"outstanding\": 4, \"set\": "
        "[{\"period\": 2, \"reservation\": 6000}]}, "
        "{\"name\": \"b\", \"reservation\": 1000, \"outstanding\": 16, \"set\": "
        "[{\"period\": 2, \"reservation\": 1000, \"limit\": 2000}]}]}");
    double lim;
    ck_assert_double_eq(sim_bucket_rates(&m->buckets[0], 1, &lim), 3000);
    ck_assert(lim < 0);
    ck_assert_double_eq(sim_bucket_rates(&m->buckets[0], 2, NULL), 6000);
    ck_assert_double_eq(sim_bucket_rates(&m->buckets[1], 3, &lim), 1000);
    ck_assert_double_eq(lim, 2000);
    sim_result_t *r = run(m, SIM_POLICY_PSHIFT_PACED, NULL);
    ck_assert_double_eq(r->reserved_p[1 * 2], 3000);
    ck_assert_double_eq(r->reserved_p[3 * 2], 6000);
    for (int p = 2; p < 4; p++) {
        ck_assert_msg(r->served[p * 2] >= 0.99 * 6000, "period %d: a got %llu", p,
                      (unsigned long long)r->served[p * 2]);
        ck_assert_msg(r->served[p * 2 + 1] <= 1.01 * 2000, "period %d: b got %llu", p,
                      (unsigned long long)r->served[p * 2 + 1]);
    }
    ck_assert_msg(r->served[1 * 2 + 1] > 3000, "b before its limit: %llu",
                  (unsigned long long)r->served[3]);
    sim_prop_verdict_t v;
    ck_assert_int_eq(sim_prop_check(m, r, &v), 0);
    ck_assert_uint_eq(v.l_periods, 2);
    ck_assert_uint_eq(v.l_over, 0);
    sim_result_destroy(&r);
    sim_model_destroy(&m);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {test_sim_heap_orders_by_time_then_id,
                                  test_sim_heap_random_retime_pops_sorted,
                                  test_sim_config_rejects_bad_settings,
                                  test_sim_model_generates_experiment_shape,
                                  test_sim_model_same_seed_same_model,
                                  test_sim_policy_names_round_trip, test_sim_run_conserves_requests,
                                  test_sim_run_deterministic_across_threads,
                                  test_sim_run_policies_meet_easy_reservations,
                                  test_sim_run_limits_hold_per_window,
                                  test_sim_run_starved_closed_loop_counts,
                                  test_sim_backend_fifo_starves_a_reserved_bucket,
                                  test_sim_headroom_lets_a_reserved_bucket_reach_r,
                                  test_sim_speed_steps_and_auto_window,
                                  test_sim_prop_check_judges_the_starved_bucket,
                                  test_sim_prop_check_splits_a_moving_bucket_by_time,
                                  test_sim_runtime_set_follows, test_sim_run_trace_pairs};
    return testlib_run_timed("sim", 60, tests, sizeof tests / sizeof tests[0]);
}
