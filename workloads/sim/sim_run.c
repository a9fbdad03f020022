/* sim_run.c - one policy over a bqos-sim model: per-server event loops around the node's real core (scheduler and agent), control rounds in between. */
#include "workloads/sim/sim_run.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <omp.h>

#include "common/bucketfile.h"
#include "common/mono.h"
#include "common/rng.h"
#include "controller/ctrl.h"
#include "storage-node/core/agent.h"
#include "storage-node/core/headroom.h"
#include "storage-node/core/sched.h"
#include "workloads/sim/sim_engine.h"
#include "workloads/sim/sim_run_int.h"
#include "workloads/sim/sim_shards.h"

/* Seed streams: generator key k, server s (service times). */
#define STREAM_GEN(k) ((UINT64_C(2) << 40) + (uint64_t)(k))
#define STREAM_SVC(s) ((UINT64_C(3) << 40) + (uint64_t)(s))


static const char *const policy_names[SIM_NPOLICIES] = {"rr", "static", "pshift", "pshift-paced",
                                                        "clairvoyant"};

/* Policies run by the controller's own loop (ctrl_t). */
static int is_ctrl(sim_policy_t p)
{
    return p == SIM_POLICY_PSHIFT || p == SIM_POLICY_PSHIFT_PACED;
}

const char *sim_policy_name(sim_policy_t p)
{
    return (unsigned)p < SIM_NPOLICIES ? policy_names[p] : "?";
}

int sim_policy_parse(const char *name)
{
    for (int i = 0; i < SIM_NPOLICIES; i++)
        if (!strcmp(name, policy_names[i]))
            return i;
    return -EINVAL;
}

static req_t *req_get(server_t *sv)
{
    if (!sv->free) {
        chunk_t *c = malloc(sizeof(*c));
        if (!c)
            return NULL;
        c->next = sv->chunks;
        sv->chunks = c;
        for (int i = 0; i < POOL_CHUNK; i++) {
            c->reqs[i].it.next = (sched_item_t *)sv->free;
            sv->free = &c->reqs[i];
        }
    }
    req_t *r = sv->free;
    sv->free = (req_t *)r->it.next;
    return r;
}

static inline void req_put(server_t *sv, req_t *r)
{
    r->it.next = (sched_item_t *)sv->free;
    sv->free = r;
}

/* Requests of bucket b outstanding at server sv. */
static inline uint32_t outstanding(const server_t *sv, int b)
{
    return sv->b_arr[b] - sv->b_done[b] - sv->b_drop[b];
}

/* Queues a new request of generator g at time t.  Returns 0 or -ENOMEM. */
static inline int issue(server_t *sv, uint32_t g, double t)
{
    req_t *r = req_get(sv);
    if (!r) {
        sv->err = -ENOMEM;
        return -ENOMEM;
    }
    r->seg = g;
    int b = sv->segs[g].bucket;
    sched_enqueue(sv->sch, b, &r->it);
    sv->arrivals++;
    if (outstanding(sv, b) == 0 && !sv->b_held[b])
        sv->b_idle[b] += t - sv->b_since[b];
    sv->b_held[b] = 0;
    sv->b_arr[b]++;
    return 0;
}

static inline double gap(server_t *sv, uint32_t g)
{
    double rate = sv->segs[g].rate;
    if (sv->poisson)
        return -log1p(-rng_uniform(&sv->grng[g])) / rate;
    return 1.0 / rate;
}

/* Service time of an IO that starts at time t. */
static inline double svc_time(server_t *sv, double t)
{
    const sim_model_t *m = sv->m;
    double d;
    if (m->service_cv < 0) {
        d = sv->lo + sv->span * rng_uniform(&sv->svc);
    } else {
        /* Lognormal of mean 1/C and the given CV (Box-Muller). */
        double s2 = log1p(m->service_cv * m->service_cv);
        double u1 = rng_uniform(&sv->svc), u2 = rng_uniform(&sv->svc);
        double z = sqrt(-2 * log1p(-u1)) * cos(2 * M_PI * u2);
        d = exp(sqrt(s2) * z - s2 / 2) / m->capacity[sv->index];
    }
    return m->speed ? d / sim_model_speed(m, sv->index, t) : d;
}

/* With a backend model: points busy, busy_until, cur_seg and cur_slot at
 * the slot that completes first. */
static inline void next_done(server_t *sv)
{
    sv->busy = sv->nbusy > 0;
    sv->busy_until = INFINITY;
    for (int i = 0; i < sv->nbusy; i++)
        if (sv->slot_t[i] < sv->busy_until) {
            sv->busy_until = sv->slot_t[i];
            sv->cur_slot = i;
        }
    if (sv->busy)
        sv->cur_seg = sv->slot_g[sv->cur_slot];
}

/* Nonzero when the node may send one more IO to the backend. */
static inline int has_room(const server_t *sv)
{
    if (!sv->bq)
        return !sv->busy;
    return (int)sv->bq_n + sv->nbusy < window_limit(sv->win) && sv->bq_n < sv->bq_cap;
}

/* Starts the next IO at time t if the server is idle and one may run;
 * with a backend model, fills the backend's window from the scheduler and
 * its free slots from its FIFO. */
static inline void kick(server_t *sv, double t)
{
    if (!sv->bq) {
        if (sv->busy)
            return;
        sched_item_t *it = sched_dispatch(sv->sch, t, NULL);
        if (!it)
            return;
        req_t *r = (req_t *)it;
        sv->cur_seg = r->seg;
        req_put(sv, r);
        double d = sv->lo + sv->span * rng_uniform(&sv->svc);
        if (sv->m->speed)
            d /= sim_model_speed(sv->m, sv->index, t);
        sv->busy = 1;
        sv->busy_until = t + d;
        sched_note_completion(sv->sch, 0, d); /* busy time, for the controller */
        return;
    }
    while (has_room(sv)) {
        sched_class_t cls;
        sched_item_t *it = headroom_dispatch(sv->sch, sv->win, t, &cls);
        if (!it)
            break;
        req_t *r = (req_t *)it;
        sv->bq[(sv->bq_head + sv->bq_n++) % sv->bq_cap] = r->seg;
        req_put(sv, r);
        window_take(sv->win, t);
        if (cls == SCHED_CLASS_R)
            window_note_reserved(sv->win);
    }
    int started = 0;
    while (sv->bq_n && sv->nbusy < sv->m->parallel) {
        double d = svc_time(sv, t) * sv->m->parallel;
        sv->slot_g[sv->nbusy] = sv->bq[sv->bq_head];
        sv->slot_t[sv->nbusy++] = t + d;
        sv->bq_head = (sv->bq_head + 1) % sv->bq_cap;
        sv->bq_n--;
        /* busy time, for the controller: the backend's share of it */
        sched_note_completion(sv->sch, 0, d / sv->m->parallel);
        started = 1;
    }
    if (started)
        next_done(sv);
}

/* A closed-loop client gets a reply at t and sends its next request after
 * the round trip.  Returns 0 or -ENOMEM. */
static int rt_push(server_t *sv, uint32_t g, double t)
{
    if (sv->rt_n == sv->rt_cap) {
        size_t nc = sv->rt_cap ? 2 * sv->rt_cap : 64;
        double *nt = malloc(nc * sizeof(double));
        uint32_t *ng = malloc(nc * sizeof(uint32_t));
        if (!nt || !ng) {
            free(nt);
            free(ng);
            return sv->err = -ENOMEM;
        }
        for (size_t i = 0; i < sv->rt_n; i++) {
            nt[i] = sv->rt_t[(sv->rt_head + i) % sv->rt_cap];
            ng[i] = sv->rt_g[(sv->rt_head + i) % sv->rt_cap];
        }
        free(sv->rt_t);
        free(sv->rt_g);
        sv->rt_t = nt;
        sv->rt_g = ng;
        sv->rt_cap = nc;
        sv->rt_head = 0;
    }
    size_t i = (sv->rt_head + sv->rt_n++) % sv->rt_cap;
    sv->rt_t[i] = t;
    sv->rt_g[i] = g;
    return 0;
}

/* Takes the server's counters as they are at the end of every window that
 * ends before t (incl: at or before t). */
static inline void snap_to(server_t *sv, double t, int incl)
{
    while (sv->wnext_t < t || (incl && sv->wnext_t == t)) {
        size_t n3 = sv->n3;
        memcpy(sv->snap + (sv->wnext % sv->nsnap) * n3, sv->b_arr, n3 * sizeof(uint32_t));
        double *is = sv->isnap + (sv->wnext % sv->nsnap) * (n3 / 3);
        for (size_t b = 0; b < n3 / 3; b++)
            is[b] = sv->b_idle[b] + (outstanding(sv, (int)b) || sv->b_held[b]
                                         ? 0 : sv->wnext_t - sv->b_since[b]);
        sv->wnext++;
        sv->wnext_t = sim_run__window_end(sv->period, sv->wn, sv->wnext);
    }
}

/* Runs server sv's events up to and including time `until` (an event at a
 * window's end counts in that window): arrivals, completions and, while the
 * scheduler paces tokens, the moments an idle server's waiting bucket gets
 * credit back. */
static void advance(server_t *sv, double until)
{
    for (;;) {
        const sim_event_t *e = sim_heap_top(sv->heap);
        double ta = e ? e->t : INFINITY;
        double tr = sv->rt_n ? sv->rt_t[sv->rt_head] : INFINITY;
        double tw = sv->paced && has_room(sv) ? sched_next_ready(sv->sch) : INFINITY;
        if (tr < ta && tr <= until && !(sv->busy && sv->busy_until <= tr) &&
            !(tw <= tr && tw > sv->woke)) {
            /* A client's next request after its round trip. */
            uint32_t g = sv->rt_g[sv->rt_head];
            sv->rt_head = (sv->rt_head + 1) % sv->rt_cap;
            sv->rt_n--;
            snap_to(sv, tr, 0);
            sv->clock = tr;
            if (tr < sv->segs[g].end && issue(sv, g, tr) < 0)
                return;
            kick(sv, tr);
            continue;
        }
        if (sv->paced && has_room(sv)) {
            if (tw <= ta && tw <= until && tw > sv->woke &&
                !(sv->busy && sv->busy_until < tw)) {
                /* (a completion due first runs first: the window's clock
                 * never goes back) */
                sv->woke = tw; /* once per wake time: progress even if nothing runs */
                /* A wake that fell due while the server was busy is now. */
                kick(sv, tw > sv->clock ? tw : sv->clock);
                continue;
            }
        }
        if (sv->busy && sv->busy_until <= ta) {
            if (sv->busy_until > until)
                break;
            double t = sv->busy_until;
            snap_to(sv, t, 0);
            sv->clock = t;
            sv->busy = 0;
            sv->completions++;
            sched_note_completion(sv->sch, 1, 0);
            uint32_t g = sv->cur_seg;
            if (sv->bq) {
                sv->slot_t[sv->cur_slot] = sv->slot_t[sv->nbusy - 1];
                sv->slot_g[sv->cur_slot] = sv->slot_g[--sv->nbusy];
                next_done(sv);
                window_done(sv->win, t);
            }
            const sim_segment_t *sg = &sv->segs[g];
            sv->b_done[sg->bucket]++;
            sched_note_done(sv->sch, sg->bucket);
            if (outstanding(sv, sg->bucket) == 0)
                sv->b_since[sg->bucket] = t;
            if (sg->outstanding && sv->m->rtt > 0) {
                if (t + sv->m->rtt < sg->end && rt_push(sv, g, t + sv->m->rtt) < 0)
                    return;
            } else if (sg->outstanding && t < sg->end && issue(sv, g, t) < 0) {
                return;
            }
            kick(sv, t);
            continue;
        }
        if (ta > until)
            break;
        snap_to(sv, ta, 0);
        sv->clock = ta;
        uint32_t g = e->id;
        const sim_segment_t *sg = &sv->segs[g];
        if (sg->outstanding) {
            /* A closed-loop generator starts: its clients send their
             * first requests; completions send the rest. */
            sim_heap_pop(sv->heap, NULL);
            for (int i = 0; i < sg->outstanding; i++)
                if (issue(sv, g, ta) < 0)
                    return;
        } else {
            if (issue(sv, g, ta) < 0)
                return;
            double next = ta + gap(sv, g);
            if (next < sg->end)
                sim_heap_retime_top(sv->heap, next);
            else
                sim_heap_pop(sv->heap, NULL);
        }
        kick(sv, ta);
    }
    snap_to(sv, until, 1);
}

/* sched_drain() callback at a period change: open-loop requests are
 * dropped, closed-loop ones are kept aside to be queued again (their
 * clients would resend them). */
static void drop_cb(sched_item_t *it, void *arg)
{
    server_t *sv = arg;
    req_t *r = (req_t *)it;
    if (sv->segs[r->seg].outstanding) {
        r->it.next = (sched_item_t *)sv->requeue;
        sv->requeue = r;
        return;
    }
    int b = sv->segs[r->seg].bucket;
    sv->dropped++;
    sv->b_drop[b]++;
    if (sv->segs[r->seg].end > sv->hook_t)
        sv->b_held[b] = 1; /* until its next arrival here */
    if (outstanding(sv, b) == 0)
        sv->b_since[b] = sv->hook_t;
    req_put(sv, r);
}

/* The agent's period_start hook: a new period on this server drops the
 * open-loop backlog, keeps the closed-loop requests and zeroes the
 * scheduler's counters, as a node does. */
static void server_period_start(void *arg)
{
    server_t *sv = arg;
    sched_drain(sv->sch, drop_cb, sv);
    sched_period_start(sv->sch);
    /* Requeued in reverse drain order; that order is deterministic. */
    while (sv->requeue) {
        req_t *r = sv->requeue;
        sv->requeue = (req_t *)r->it.next;
        sched_enqueue(sv->sch, sv->segs[r->seg].bucket, &r->it);
    }
}

/* The agent's base_latency hook: the backend model's unloaded latency (the
 * window's base), or one IO's mean service time without a backend model. */
static double server_base_latency(void *arg)
{
    const server_t *sv = arg;
    if (sv->win) {
        window_stats_t ws;
        window_stats(sv->win, &ws);
        return ws.base;
    }
    return sv->m->capacity[sv->index] > 0 ? 1 / sv->m->capacity[sv->index] : 0;
}

/* The agent's applied hook: new tokens may let the server start an IO. */
static void server_applied(void *arg)
{
    server_t *sv = arg;
    if (sv->now > sv->clock)
        sv->clock = sv->now;
    kick(sv, sv->now);
}

static void server_free(server_t *sv)
{
    agent_destroy(&sv->agent);
    sched_destroy(&sv->sch);
    sim_heap_destroy(&sv->heap);
    window_destroy(&sv->win);
    free(sv->bq);
    free(sv->slot_t);
    free(sv->slot_g);
    free(sv->rt_t);
    free(sv->rt_g);
    free(sv->grng);
    while (sv->chunks) {
        chunk_t *c = sv->chunks;
        sv->chunks = c->next;
        free(c);
    }
}

/* Weight of bucket b in weighted mode: its reservation over the smallest
 * reservation, rounded, at least 1. */
static uint32_t bucket_weight(const sim_model_t *m, int b, double rmin)
{
    double w = rmin > 0 ? m->buckets[b].reservation / rmin : 1;
    if (!(w >= 1))
        return 1;
    return w > 1e6 ? 1000000 : (uint32_t)llround(w);
}

/* Sets up server s: its scheduler with every bucket (weights[b]), its
 * agent, its generators and service times.  Returns 0 or -ENOMEM. */
static int server_init(server_t *sv, const sim_model_t *m, int s, sim_policy_t p,
                       const uint32_t *weights, double burst_s)
{
    const sim_config_t *c = &m->cfg;
    sv->index = s;
    snprintf(sv->name, sizeof(sv->name), "s%d", s);
    sv->segs = m->segs[s];
    sv->poisson = c->poisson;
    sv->sch = sched_new(p == SIM_POLICY_RR ? SCHED_POLICY_RR : SCHED_POLICY_TOKENS, weights != NULL);
    sv->woke = -INFINITY;
    if (sv->sch && p == SIM_POLICY_PSHIFT_PACED) {
        /* The new scheduler, as bqos-node runs it by default. */
        if (sched_set_pacing(sv->sch, 1, burst_s) < 0 ||
            sched_set_r_order(sv->sch, SCHED_ORDER_URGENCY) < 0)
            return -EINVAL;
        sv->paced = 1;
    }
    sv->heap = sim_heap_new(m->nsegs[s]);
    sv->grng = malloc((m->nsegs[s] ? m->nsegs[s] : 1) * sizeof(rng_t));
    if (!sv->sch || !sv->heap || !sv->grng)
        return -ENOMEM;
    char name[32];
    for (int b = 0; b < c->buckets; b++) {
        snprintf(name, sizeof(name), "b%d", b);
        if (sched_add_bucket(sv->sch, name, weights ? weights[b] : 1) != b)
            return -ENOMEM;
    }
    /* The simulator picks the policy, so the agent never switches it. */
    agent_config_t ac;
    agent_config_defaults(&ac);
    ac.name = sv->name;
    ac.capacity = (uint64_t)llround(m->capacity[s]);
    ac.manage_policy = 0;
    agent_ops_t ops = {.period_start = server_period_start, .applied = server_applied,
                       .base_latency = server_base_latency, .arg = sv};
    int err = -ENOMEM;
    if (!(sv->agent = agent_new(&ac, sv->sch, &ops, 0, &err)))
        return err;
    for (size_t g = 0; g < m->nsegs[s]; g++) {
        const sim_segment_t *sg = &sv->segs[g];
        rng_seed(&sv->grng[g], c->seed, STREAM_GEN(sg->key));
        /* Even arrivals start at a random phase; Poisson ones at an
         * exponential gap after the segment starts. */
        double first = sg->outstanding ? sg->start
                       : c->poisson ? sg->start - log1p(-rng_uniform(&sv->grng[g])) / sg->rate
                                    : sg->start + rng_uniform(&sv->grng[g]) / sg->rate;
        if (first < sg->end && sim_heap_push(sv->heap, first, (uint32_t)g) < 0)
            return -ENOMEM;
    }
    rng_seed(&sv->svc, c->seed, STREAM_SVC(s));
    double mean = 1.0 / m->capacity[s];
    sv->lo = mean * (1 - c->svc_spread);
    sv->span = 2 * mean * c->svc_spread;
    sv->m = m;
    if (m->window) {
        /* The node's backend window: fixed (--outstanding K) or adaptive
         * with bqos-node's defaults (--outstanding auto). */
        window_config_t wc;
        window_config_defaults(&wc);
        if (m->window > 0) {
            wc.adaptive = 0; /* as the node's fixed --outstanding K: no headroom */
            wc.start = wc.floor = wc.ceiling = m->window;
            wc.headroom = 0;
        } else if (m->headroom >= 0) {
            wc.headroom = m->headroom;
        }
        int err = -ENOMEM;
        if (!(sv->win = window_new(&wc, 0, &err)))
            return err;
        sv->bq_cap = (size_t)wc.ceiling;
        sv->bq = malloc(sv->bq_cap * sizeof(uint32_t));
        sv->slot_t = malloc((size_t)m->parallel * sizeof(double));
        sv->slot_g = malloc((size_t)m->parallel * sizeof(uint32_t));
        if (!sv->bq || !sv->slot_t || !sv->slot_g)
            return -ENOMEM;
    }
    return 0;
}

void sim_result_destroy(sim_result_t **rp)
{
    if (!rp || !*rp)
        return;
    free((*rp)->reserved);
    free((*rp)->reserved_p);
    free((*rp)->served);
    free((*rp)->served_iv);
    free((*rp)->delivered);
    free(*rp);
    *rp = NULL;
}


/* Closes the open window (every server has passed its end): sums the
 * servers' completions in it (their snapshots' increase over the previous
 * window's) and takes each bucket's idle time in it at the server where
 * that was smallest (workloads/report.h, "Demanding"), and feeds them to
 * R->win if the window's period is measured. */
static void window_close(run_t *R)
{
    int measured = (int)(R->wcur / R->wn) >= R->m->cfg.warmup;
    size_t n3 = 3 * (size_t)R->B, nsnap = R->sv[0].nsnap, B = (size_t)R->B;
    double len = R->m->cfg.period / (double)R->wn;
    memset(R->sum, 0, n3 * sizeof(uint64_t));
    for (size_t b = 0; b < B; b++)
        R->wmin[b] = len;
    for (int s = 0; s < R->S; s++) {
        const uint32_t *base = R->snaps + (size_t)s * nsnap * n3;
        const uint32_t *cur = base + (R->wcur % nsnap) * n3;
        const uint32_t *prev = base + ((R->wcur + nsnap - 1) % nsnap) * n3;
        for (size_t i = 0; i < n3; i++)
            R->sum[i] += (uint32_t)(cur[i] - (R->wcur ? prev[i] : 0));
        const double *ib = R->isnaps + (size_t)s * nsnap * B;
        const double *ic = ib + (R->wcur % nsnap) * B;
        const double *ip = ib + ((R->wcur + nsnap - 1) % nsnap) * B;
        for (size_t b = 0; b < B; b++) {
            double x = ic[b] - (R->wcur ? ip[b] : 0);
            if (x < R->wmin[b])
                R->wmin[b] = x;
        }
    }
    for (size_t b = 0; measured && b < B; b++)
        report_win_feed(R->win, b, R->sum[B + b], R->wmin[b]);
    R->wcur++;
}

/* Collects per-bucket service at a round boundary, and stores the
 * interval's service if the period is measured. */
static void gather(run_t *R, int period, int interval_done)
{
    int S = R->S, B = R->B;
    #pragma omp parallel for schedule(static)
    for (int b = 0; b < B; b++) {
        uint64_t sum = 0;
        for (int s = 0; s < S; s++) {
            sched_bucket_stats_t st;
            sched_bucket_stats(R->sv[s].sch, b, &st);
            sum += st.served_r + st.served_l + st.served_o;
        }
        R->cum[b] = sum;
    }
    int mp = period - R->m->cfg.warmup;
    if (mp >= 0) {
        sim_result_t *r = R->r;
        uint32_t *iv = r->served_iv + ((size_t)mp * R->K + interval_done) * B;
        for (int b = 0; b < B; b++)
            iv[b] = (uint32_t)(R->cum[b] - R->cum_prev[b]);
        if (interval_done == R->K - 1)
            for (int b = 0; b < B; b++)
                r->served[(size_t)mp * B + b] = R->cum[b];
    }
    memcpy(R->cum_prev, R->cum, (size_t)B * sizeof(uint64_t));
    if (interval_done == R->K - 1)
        for (int s = 0; s < S; s++) {
            server_t *sv = &R->sv[s];
            if (mp >= 0)
                R->r->delivered[(size_t)mp * S + s] = sv->completions - sv->comp_mark;
            sv->comp_mark = sv->completions;
        }
}

/* The controller's timing of interval k of period p, in simulated time:
 * the nodes share the simulator's clock, so the period end is exact. */
static agent_timing_t timing(const run_t *R, int p, int k)
{
    const sim_config_t *c = &R->m->cfg;
    return (agent_timing_t){.period = (uint64_t)p, .interval = (uint32_t)k,
                            .intervals = (uint32_t)R->K, .period_s = c->period,
                            .end = (p + 1) * c->period};
}

/* Every node hellos; the controller (ctrl_t for pshift, else the
 * simulator with its own table of the same buckets) welcomes it with its
 * table and weights at time 0. */
static int nodes_join(run_t *R)
{
    const char *const *names = (const char *const *)R->names;
    const uint32_t *weights = R->weights;
    uint32_t gen = SIM_TABLE;
    if (R->ctl) {
        size_t n;
        gen = ctrl_table(R->ctl, &names, &n);
        weights = ctrl_table_weights(R->ctl);
        if (n != (size_t)R->B)
            return -EPROTO;
    }
    agent_timing_t tm = timing(R, 0, 0);
    for (int s = 0; s < R->S; s++) {
        server_t *sv = &R->sv[s];
        proto_msg_t m;
        int rc = agent_hello(sv->agent, 0, &m);
        if (rc < 0)
            return rc;
        sv->table = m.table;
        if (R->shards && (rc = sim_shards_hello(R->shards, s, &m)) < 0)
            return rc;
        if (R->ctl) {
            rc = ctrl_node_hello(R->ctl, sv->name, m.instance, m.capacity, m.table, m.names,
                                 m.nnames);
            if (rc < 0)
                return rc;
            if (rc != s)
                return -EPROTO;
        }
        proto_msg_init(&m);
        m.type = PROTO_WELCOME;
        strcpy(m.node, sv->name);
        m.peer_table = sv->table;
        m.table = gen;
        m.has_names = 1;
        m.nnames = (size_t)R->B;
        m.names = (const char **)names;
        m.has_weights = weights != NULL;
        m.weights = weights;
        agent_handle(sv->agent, &m, &tm, 0);
    }
    return 0;
}

/* Every node's interval start at time t: its agent starts the new period
 * if one began (server_period_start()). */
static void node_ticks(run_t *R, double t)
{
    #pragma omp parallel for schedule(static)
    for (int s = 0; s < R->S; s++) {
        server_t *sv = &R->sv[s];
        sv->hook_t = t;
        agent_tick(sv->agent, t);
        sv->push_type = PROTO_HEARTBEAT; /* unless the controller has tokens */
        sv->push_n = 0;
        sv->push_names = 0;
        sv->push_nshares = -1;
    }
}

/* Node s takes its report of the interval that starts at t into R->rep and,
 * for pshift, the controller gets it.  The simulator reports at every
 * boundary, also the first one right after the welcome (where a node's own
 * clock would wait for the next boundary), as the controller needs a round
 * of reports for each of its rounds.  Returns 0 or -errno. */
static int node_report(run_t *R, int s, double t)
{
    const proto_msg_t *m = &R->rep;
    int rc = agent_report(R->sv[s].agent, t, &R->rep);
    if (rc == 0 && R->shards)
        return sim_shards_report(R->shards, s, m);
    if (rc < 0 || !R->ctl)
        return rc;
    if (m->has_names && (rc = ctrl_node_table(R->ctl, s, m->table, m->names, m->nnames)) < 0)
        return rc;
    if ((rc = ctrl_node_report(R->ctl, s, m->period, m->interval, m->table, m->peer_table,
                               m->completions, m->busy_seconds, m->report, m->count)) < 0)
        return rc;
    return ctrl_node_inflight(R->ctl, s, m->table, m->base_us, m->inflight,
                              m->has_inflight ? m->ninflight : 0);
}

/* The controller's push of interval k of period p arrives at every node at
 * time t: tokens (applied by the agent, net of what the node served since
 * its report) or a heartbeat. */
static void push_all(run_t *R, int p, int k, double t)
{
    const char *const *names = (const char *const *)R->names;
    const uint32_t *weights = R->weights;
    size_t nnames = (size_t)R->B;
    uint32_t gen = R->ctl ? ctrl_table(R->ctl, &names, &nnames) : SIM_TABLE;
    if (R->ctl)
        weights = ctrl_table_weights(R->ctl);
    agent_timing_t tm = timing(R, p, k);
    #pragma omp parallel for schedule(static)
    for (int s = 0; s < R->S; s++) {
        server_t *sv = &R->sv[s];
        proto_msg_t m;
        proto_msg_init(&m);
        strcpy(m.node, sv->name);
        m.type = sv->push_type;
        m.has_timing = 1;
        m.period = tm.period;
        m.interval = tm.interval;
        m.intervals = tm.intervals;
        m.peer_table = sv->table;
        if (m.type == PROTO_TOKENS) {
            m.table = gen;
            m.count = sv->push_n;
            m.tokens = (proto_tokens_rec_t *)sv->push_recs; /* borrowed */
            if (sv->push_nshares >= 0) {
                m.has_shares = 1;
                m.nshares = (size_t)sv->push_nshares;
                m.shares = sv->push_shares;
            }
            if (sv->push_names) {
                m.has_names = 1;
                m.nnames = nnames;
                m.names = (const char **)names;
                m.has_weights = weights != NULL;
                m.weights = weights;
            }
        }
        sv->now = sv->hook_t = t;
        agent_handle(sv->agent, &m, &tm, t);
    }
}

/* The bucket file of the rates in force (R->cur_res, cur_lim) into *out
 * (caller owns it).  Returns 0, -ENOMEM or a bucketfile_set() error. */
static int ctl_buckets(run_t *R, bucketfile_t **out)
{
    int rc = -ENOMEM;
    bucketfile_t *bf = bucketfile_new();
    if (!bf)
        goto out;
    for (int b = 0; b < R->B; b++) {
        double lim = R->cur_lim[b];
        bucketfile_bucket_t bb = {.reservation = llround(R->cur_res[b]),
                                  .limit = lim < 0 ? BUCKETFILE_NO_LIMIT : llround(ceil(lim)),
                                  .weight = R->m->buckets[b].weight ? R->m->buckets[b].weight
                                            : R->weights ? R->weights[b] : 1};
        bb.name = R->names[b];
        if ((rc = bucketfile_set(bf, &bb, NULL)) < 0)
            goto out;
        rc = -ENOMEM;
    }
    /* Nested buckets: the parents once every bucket is in (the table's
     * order stays the simulator's). */
    for (int b = 0; b < R->B; b++) {
        int p = R->m->buckets[b].parent;
        if (p < 0)
            continue;
        bucketfile_bucket_t bb = *bucketfile_get(bf, (size_t)b);
        bucketfile_bucket_set_parent(&bb, R->names[p]);
        if ((rc = bucketfile_set(bf, &bb, NULL)) < 0)
            goto out;
    }
    *out = bf;
    bf = NULL;
    rc = 0;
out:
    bucketfile_destroy(&bf);
    return rc;
}

/* The controller for the pshift policy: the real control-loop state, with
 * the simulator's buckets and weights. */
static int ctl_setup(run_t *R)
{
    const sim_model_t *m = R->m;
    bucketfile_t *bf = NULL;
    int rc = ctl_buckets(R, &bf);
    if (rc < 0)
        goto out;
    rc = -ENOMEM;
    ctrl_config_t cc = ctrl_config_default();
    cc.period_s = m->cfg.period;
    cc.intervals = m->cfg.intervals;
    cc.threads = R->o->threads > 0 ? R->o->threads : 0;
    cc.down_after = 1 << 30;
    cc.default_capacity = m->cfg.capacity;
    cc.limit_depth = R->o->limit_depth;
    cc.shares = R->o->shares;
    if (R->o->shards > 0) { /* the shards in the one controller's place */
        if (!(R->shards = sim_shards_new(&cc, R->o->shards, bf)))
            goto out;
        rc = 0;
        goto out;
    }
    if (!(R->ctl = ctrl_new(&cc)) || (rc = ctrl_set_buckets(R->ctl, bf)) < 0)
        goto out;
    rc = 0;
out:
    bucketfile_destroy(&bf);
    return rc;
}

/* pshift with --shards: the root step, then every shard's round on the
 * nodes' reports; queues each node's merged tokens. */
static int shards_round(run_t *R, int p, int k, double t)
{
    int rc = sim_shards_begin(R->shards, (uint64_t)p, (uint32_t)k, 0);
    for (int s = 0; rc == 0 && s < R->S; s++)
        rc = node_report(R, s, t);
    int skipped = 0;
    if (rc == 0)
        rc = sim_shards_compute(R->shards, R->m->cfg.delay, &skipped);
    if (rc < 0)
        return rc;
    R->r->rounds++;
    R->r->skipped += skipped;
    for (int s = 0; s < R->S; s++) {
        server_t *sv = &R->sv[s];
        sv->push_n = sim_shards_tokens(R->shards, s, &sv->push_recs);
        if (sv->push_n > 0)
            sv->push_type = PROTO_TOKENS;
    }
    return 0;
}

/* --trace: for every traced bucket and every node holding it (active
 * there, tokens or a queue), what the controller decided this round and
 * what the node did, as one CSV line (header in sim.c).  R booked: the
 * R-tokens the controller placed on the node for the rest of the period,
 * summed over every bucket (O(buckets) per node: a debugging aid). */
static void trace_round(run_t *R, int p, int k)
{
    for (size_t i = 0; i < R->o->ntrace; i++) {
        int b = R->o->trace_b[i];
        if (b < 0 || b >= R->B)
            continue;
        for (int s = 0; s < R->S; s++) {
            ctrl_pair_info_t pi;
            ctrl_node_info_t ni;
            sched_bucket_stats_t st;
            if (ctrl_pair_info(R->ctl, s, b, &pi) < 0 || ctrl_node_info(R->ctl, s, &ni) < 0 ||
                sched_bucket_stats(R->sv[s].sch, b, &st) < 0)
                continue;
            if (!pi.demand && pi.r_tokens <= 0 && !pi.queued && !st.served_r && !st.served_l &&
                !st.served_o && !st.queued)
                continue;
            int64_t booked = 0;
            for (int b2 = 0; b2 < R->B; b2++) {
                ctrl_pair_info_t p2;
                if (ctrl_pair_info(R->ctl, s, b2, &p2) == 0 && p2.r_tokens > 0)
                    booked += p2.r_tokens;
            }
            window_stats_t ws = {0};
            if (R->sv[s].win)
                window_stats(R->sv[s].win, &ws);
            fprintf(R->o->trace,
                    "%d,%d,%d,%d,%.0f,%.0f,%lld,%llu,%llu,%llu,%llu,%llu,%lld,%lld,%lld,%d,%d,%.3f,"
                    "%.3f,%.0f\n",
                    p, k, b, s, ni.capacity, ni.conservative, (long long)booked,
                    (unsigned long long)st.served_r, (unsigned long long)st.served_l,
                    (unsigned long long)st.served_o, (unsigned long long)st.queued,
                    (unsigned long long)st.arrivals, (long long)pi.demand, (long long)pi.r_tokens,
                    (long long)pi.l_tokens, ws.window, ws.inflight, ws.latency * 1e3,
                    ws.base * 1e3, ws.throughput);
        }
    }
}

/* pshift: one controller round at interval k of period p (time t), fed
 * the nodes' reports; queues each node's push. */
static int ctl_round(run_t *R, int p, int k, double t)
{
    int S = R->S;
    if (R->shards)
        return shards_round(R, p, k, t);
    int rc = ctrl_round_begin(R->ctl, (uint64_t)p, (uint32_t)k, 0);
    if (rc < 0)
        return rc;
    for (int s = 0; s < S; s++)
        if ((rc = node_report(R, s, t)) < 0)
            return rc;
    ctrl_round_late(R->ctl, R->m->cfg.delay); /* tokens apply after --delay */
    ctrl_result_t res;
    if ((rc = ctrl_compute(R->ctl, &res)) < 0)
        return rc;
    R->r->rounds++;
    R->r->skipped += res.skipped;
    if (R->o->trace)
        trace_round(R, p, k);
    /* As bqos-controller pushes: a heartbeat when the round was skipped or
     * there is nothing to say. */
    for (int s = 0; s < S; s++) {
        server_t *sv = &R->sv[s];
        sv->push_n = ctrl_node_tokens(R->ctl, s, &sv->push_recs);
        sv->push_names = ctrl_node_needs_names(R->ctl, s);
        sv->push_nshares = res.skipped ? -1 : ctrl_node_shares(R->ctl, s, &sv->push_shares);
        if (!res.skipped && (sv->push_n > 0 || sv->push_names || sv->push_nshares >= 0))
            sv->push_type = PROTO_TOKENS;
    }
    return 0;
}

/* At the start of period p: the runtime sets that take effect (the
 * controller gets the new bucket file, as from `bqos-ctl set`; static
 * splits again; the window figures follow), and the reservations of a
 * measured period.  Returns 0 or -errno. */
static int period_rates(run_t *R, int p)
{
    const sim_model_t *m = R->m;
    int changed = 0, rc = 0;
    for (int b = 0; b < R->B; b++) {
        double lim, res = sim_bucket_rates(&m->buckets[b], p, &lim);
        if (res != R->cur_res[b] || lim != R->cur_lim[b]) {
            R->cur_res[b] = res;
            R->cur_lim[b] = lim;
            R->res_tokens[b] = llround(res * m->cfg.period);
            report_win_set_rates(R->win, (size_t)b, res, lim);
            changed = 1;
        }
    }
    if (changed && (R->ctl || R->shards)) {
        bucketfile_t *bf = NULL;
        if ((rc = ctl_buckets(R, &bf)) == 0)
            rc = R->shards ? sim_shards_set_buckets(R->shards, bf) : ctrl_set_buckets(R->ctl, bf);
        bucketfile_destroy(&bf);
    }
    if (changed && R->policy == SIM_POLICY_STATIC)
        sim_run__static_tokens(R);
    int mp = p - m->cfg.warmup;
    for (int b = 0; mp >= 0 && b < R->B; b++)
        R->r->reserved_p[(size_t)mp * R->B + b] = R->cur_res[b] * m->cfg.period;
    return rc;
}

static void summarize(sim_result_t *r)
{
    size_t n = 0, m95 = 0, m99 = 0;
    double err = 0, worst = INFINITY;
    for (int p = 0; p < r->periods; p++)
        for (int b = 0; b < r->buckets; b++) {
            double want = r->reserved_p[(size_t)p * r->buckets + b];
            if (!(want >= 1))
                continue;
            double x = r->served[(size_t)p * r->buckets + b] / want;
            n++;
            m95 += x >= 0.95;
            m99 += x >= 0.99;
            err += x < 1 ? 1 - x : 0;
            if (x < worst)
                worst = x;
        }
    r->samples = n;
    r->meet95 = n ? (double)m95 / n : 1;
    r->meet99 = n ? (double)m99 / n : 1;
    r->mean_err = n ? err / n : 0;
    r->worst = n ? worst : 1;
}

/* Runs every server up to time t (in parallel).  Returns 0 or -ENOMEM. */
static int advance_all(run_t *R, double t)
{
    int bad = 0;
    #pragma omp parallel for schedule(dynamic, 1) reduction(| : bad)
    for (int s = 0; s < R->S; s++) {
        advance(&R->sv[s], t);
        bad |= R->sv[s].err;
    }
    return bad ? -ENOMEM : 0;
}

/* Runs every server up to time t, then closes the windows that ended by
 * then.  Returns 0 or -ENOMEM. */
static int advance_to(run_t *R, double t)
{
    int rc = advance_all(R, t);
    while (rc == 0 && sim_run__window_end(R->m->cfg.period, R->wn, R->wcur) <= t)
        window_close(R);
    return rc;
}

int sim_run(const sim_model_t *m, sim_policy_t policy, const sim_run_opts_t *opts,
            sim_result_t **out)
{
    if ((unsigned)policy >= SIM_NPOLICIES)
        return -EINVAL;
    sim_run_opts_t defo = {0};
    const sim_config_t *c = &m->cfg;
    run_t R = {.m = m, .policy = policy, .o = opts ? opts : &defo, .S = c->servers,
               .B = c->buckets, .K = c->intervals};
    size_t SB = (size_t)R.S * R.B;
    int mperiods = c->periods - c->warmup;
    int rc = -ENOMEM;
    double t0 = mono_now();
    if (R.o->threads > 0)
        omp_set_num_threads(R.o->threads);
    sim_result_t *r = calloc(1, sizeof(*r));
    R.r = r;
    R.sv = calloc((size_t)R.S, sizeof(server_t));
    R.cum = calloc((size_t)R.B, sizeof(uint64_t));
    R.cum_prev = calloc((size_t)R.B, sizeof(uint64_t));
    R.dem = calloc(SB, sizeof(int64_t));
    R.tok = calloc(SB, sizeof(proto_tokens_rec_t));
    R.res_tokens = calloc((size_t)R.B, sizeof(int64_t));
    R.names = calloc((size_t)R.B, sizeof(char *));
    R.lal = calloc(SB, sizeof(int64_t));
    /* Windows are closed at every round and delay: at most one interval's
     * windows, plus the one before, are in the servers' rings. */
    size_t per_long;
    report_win_layout(c->period, &R.wn, &per_long);
    size_t nsnap = (size_t)ceil((double)R.wn / R.K) + 3;
    R.cnt = calloc(3 * SB, sizeof(uint32_t));
    R.snaps = calloc(3 * SB * nsnap, sizeof(uint32_t));
    R.sum = calloc(3 * (size_t)R.B, sizeof(uint64_t));
    R.idle = calloc(2 * SB, sizeof(double));
    R.isnaps = calloc(SB * nsnap, sizeof(double));
    R.wmin = calloc((size_t)R.B, sizeof(double));
    R.held = calloc(SB, 1);
    if (!r || !R.sv || !R.cum || !R.cum_prev || !R.dem || !R.tok || !R.res_tokens || !R.names ||
        !R.lal || !R.cnt || !R.snaps || !R.sum || !R.idle || !R.isnaps || !R.wmin || !R.held)
        goto out;
    for (int b = 0; b < R.B; b++) {
        char name[32];
        snprintf(name, sizeof(name), "b%d", b);
        if (!(R.names[b] = strdup(name)))
            goto out;
    }
    r->policy = policy;
    r->buckets = R.B;
    r->intervals = R.K;
    r->periods = mperiods;
    r->reserved = calloc((size_t)R.B, sizeof(double));
    r->reserved_p = calloc((size_t)mperiods * R.B, sizeof(double));
    R.cur_res = calloc(2 * (size_t)R.B, sizeof(double));
    R.cur_lim = R.cur_res ? R.cur_res + R.B : NULL;
    r->served = calloc((size_t)mperiods * R.B, sizeof(uint64_t));
    r->served_iv = calloc((size_t)mperiods * R.K * R.B, sizeof(uint32_t));
    r->servers = R.S;
    r->delivered = calloc((size_t)mperiods * R.S, sizeof(uint64_t));
    if (!r->reserved || !r->served || !r->served_iv || !r->delivered || !r->reserved_p ||
        !R.cur_res)
        goto out;
    double *wres = malloc(2 * (size_t)R.B * sizeof(double)), *wlim = wres + R.B;
    if (!wres)
        goto out;
    for (int b = 0; b < R.B; b++) {
        r->reserved[b] = m->buckets[b].reservation * c->period;
        R.res_tokens[b] = llround(r->reserved[b]);
        R.any_limit |= m->buckets[b].limit >= 0;
        for (size_t i = 0; i < m->buckets[b].nsets; i++)
            R.any_limit |= m->buckets[b].sets[i].limit >= 0;
        wres[b] = R.cur_res[b] = m->buckets[b].reservation;
        wlim[b] = R.cur_lim[b] = m->buckets[b].limit;
    }
    R.win = report_win_new((size_t)R.B, c->period, wres, wlim);
    free(wres);
    if (!R.win)
        goto out;
    if (R.o->weighted) {
        double rmin = INFINITY;
        for (int b = 0; b < R.B; b++)
            if (m->buckets[b].reservation > 0 && m->buckets[b].reservation < rmin)
                rmin = m->buckets[b].reservation;
        if (!(R.weights = malloc((size_t)R.B * sizeof(uint32_t))))
            goto out;
        for (int b = 0; b < R.B; b++)
            R.weights[b] = bucket_weight(m, b, rmin);
    }
    int bad = 0;
    #pragma omp parallel for schedule(dynamic, 1) reduction(| : bad)
    for (int s = 0; s < R.S; s++) {
        server_t *sv = &R.sv[s];
        sv->b_arr = R.cnt + (size_t)s * 3 * R.B;
        sv->b_done = sv->b_arr + R.B;
        sv->b_drop = sv->b_done + R.B;
        sv->snap = R.snaps + (size_t)s * nsnap * 3 * R.B;
        sv->b_idle = R.idle + (size_t)s * 2 * R.B;
        sv->b_since = sv->b_idle + R.B;
        sv->isnap = R.isnaps + (size_t)s * nsnap * R.B;
        sv->b_held = R.held + (size_t)s * R.B;
        sv->nsnap = nsnap;
        sv->wn = R.wn;
        sv->n3 = 3 * (size_t)R.B;
        sv->period = c->period;
        sv->wnext_t = sim_run__window_end(c->period, R.wn, 0);
        bad |= server_init(&R.sv[s], m, s, policy, R.weights, R.o->burst_s) < 0;
    }
    if (bad)
        goto out;
    if (is_ctrl(policy) && (rc = ctl_setup(&R)) < 0)
        goto out;
    if ((rc = nodes_join(&R)) < 0)
        goto out;
    if (policy == SIM_POLICY_STATIC)
        sim_run__static_tokens(&R);
    double ivl = c->period / R.K;
    for (int p = 0; p < c->periods; p++) {
        for (int k = 0; k < R.K; k++) {
            double t = p * c->period + k * ivl;
            double t_end = (p + 1) * c->period;
            if ((rc = advance_to(&R, t)) < 0)
                goto out;
            if (p || k)
                gather(&R, k ? p : p - 1, k ? k - 1 : R.K - 1);
            if (k == 0) {
                memset(R.cum, 0, (size_t)R.B * sizeof(uint64_t));
                memset(R.cum_prev, 0, (size_t)R.B * sizeof(uint64_t));
                if ((rc = period_rates(&R, p)) < 0)
                    goto out;
            }
            node_ticks(&R, t);
            if (!is_ctrl(policy))
                for (int s = 0; s < R.S; s++)
                    if ((rc = node_report(&R, s, t)) < 0)
                        goto out;
            if (is_ctrl(policy) || policy == SIM_POLICY_CLAIRVOYANT) {
                double c0 = mono_now();
                rc = is_ctrl(policy) ? ctl_round(&R, p, k, t)
                                     : sim_run__clairvoyant_round(&R, t, t_end);
                if (rc < 0)
                    goto out;
                r->ctrl_s += mono_now() - c0;
                if ((rc = advance_to(&R, t + c->delay)) < 0)
                    goto out;
                push_all(&R, p, k, t + c->delay);
            } else {
                if (policy == SIM_POLICY_STATIC && k == 0)
                    sim_run__push_tok(&R); /* the same tokens every period, at once */
                push_all(&R, p, k, t);
            }
            if (R.o->progress) {
                uint64_t ev = 0;
                for (int s = 0; s < R.S; s++)
                    ev += R.sv[s].arrivals + R.sv[s].completions;
                R.o->progress(R.o->arg, policy, p, k, ev, mono_now() - t0);
            }
        }
    }
    if ((rc = advance_to(&R, m->horizon)) < 0)
        goto out;
    gather(&R, c->periods - 1, R.K - 1);
    for (int s = 0; s < R.S; s++) {
        server_t *sv = &R.sv[s];
        r->arrivals += sv->arrivals;
        r->completions += sv->completions;
        r->dropped += sv->dropped + sched_drain(sv->sch, NULL, NULL);
    }
    r->events = r->arrivals + r->completions;
    r->wall_s = mono_now() - t0;
    summarize(r);
    r->win[REPORT_WIN_LONG] = report_win_figures(R.win, -1, REPORT_WIN_LONG);
    r->win[REPORT_WIN_SHORT] = report_win_figures(R.win, -1, REPORT_WIN_SHORT);
    *out = r;
    r = NULL;
    rc = 0;
out:
    if (R.sv)
        for (int s = 0; s < R.S; s++)
            server_free(&R.sv[s]);
    ctrl_destroy(&R.ctl);
    sim_shards_destroy(&R.shards);
    proto_msg_clear(&R.rep);
    free(R.sv);
    free(R.cum);
    free(R.cum_prev);
    free(R.dem);
    free(R.tok);
    free(R.res_tokens);
    free(R.cur_res);
    free(R.weights);
    free(R.lal);
    free(R.cnt);
    free(R.snaps);
    free(R.sum);
    free(R.idle);
    free(R.isnaps);
    free(R.wmin);
    free(R.held);
    report_win_destroy(&R.win);
    if (R.names)
        for (int b = 0; b < R.B; b++)
            free(R.names[b]);
    free(R.names);
    sim_result_destroy(&r);
    return rc;
}
