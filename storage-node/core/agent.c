/* agent.c - the node's side of the control protocol over a scheduler: tables, reports, tokens net of served, period tracking, fallback; no sockets, no clocks. */
#include "storage-node/core/agent.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/growarr.h"
#include "common/log.h"
#include "storage-node/core/agent_int.h"


void agent_config_defaults(agent_config_t *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->manage_policy = 1;
    cfg->normal = SCHED_POLICY_TOKENS;
    cfg->mode = AGENT_FALLBACK_STATIC;
    cfg->fallback = SCHED_POLICY_RR;
    cfg->silence_intervals = 3.0;
    cfg->grace_s = 0.1;
    cfg->sparse = 1;
    cfg->sparse_demand = 0.10;
    cfg->sparse_served = 0.02;
    cfg->full_every = 25;
    cfg->renew = 1;
    cfg->parts = 1;
}


/* ---- acting on the node ---- */

static int op_bucket(agent_t *a, const char *name)
{
    return a->ops.bucket ? a->ops.bucket(a->ops.arg, name) : sched_add_bucket(a->s, name, 1);
}

/* Makes the per-bucket arrays cover n buckets (new entries zero). */
static int arrays_fit(agent_t *a, size_t n)
{
    if (n <= a->arr_cap)
        return 0;
    if (n > INT_MAX / AGENT_BASES ||
        growarr((void **)&a->prev, &a->cap_prev, (int)n, sizeof *a->prev) < 0 ||
        growarr((void **)&a->carry, &a->cap_carry, (int)n, sizeof *a->carry) < 0 ||
        growarr((void **)&a->served_rep, &a->cap_served, (int)n, sizeof *a->served_rep) < 0 ||
        growarr((void **)&a->served_at, &a->cap_at, (int)n * AGENT_BASES,
                sizeof *a->served_at) < 0 ||
        growarr((void **)&a->local_w, &a->cap_w, (int)n, sizeof *a->local_w) < 0 ||
        growarr((void **)&a->base, &a->cap_base, (int)n, sizeof *a->base) < 0)
        return -ENOMEM; /* the ones grown keep their size: the next call grows the rest */
    a->arr_cap = n;
    return 0;
}

static void period_roll(agent_t *a, uint64_t next, int node_period);

/* Starts a new QoS period on the node (`next`: its number), keeping the
 * arrivals of the interval that just ended for the next report. */
static void period_start(agent_t *a, uint64_t next)
{
    period_roll(a, next, 1);
}

/* period_start(), or with node_period 0 the agent's own part only: a
 * session back from idling (agent_watch_from()) catches its clock up in
 * the middle of a period the node started at its boundary, through the
 * sessions that did not idle; the node's period is not started again
 * (that restarted every bucket's counters mid-period: both buckets of
 * it_reshard_down lost up to half a window at the grow-back), no grant is
 * kept of periods the session did not follow, none is renewed. */
static void period_roll(agent_t *a, uint64_t next, int node_period)
{
    /* The period that ends was the controller's (the node followed it to
     * its end, and the controller spoke in it: tokens for its rest, or a
     * heartbeat saying "keep them"): its grant is the one to keep if the
     * controller goes.  A period it never reached keeps the older grant
     * (the tokens held then were a period's leftovers, not a grant). */
    int covered = node_period && !a->st.fallback && a->heard && a->heard_period == a->period;
    if (covered && grant_snapshot(&a->grant, a->s) == 0)
        a->grant_period = a->period; /* the fallback's lease counts from it */
    else if (covered && a->peer)
        log_warn("cannot remember this period's grant (out of memory): keeping the last one");
    agent__bytes_period(a, covered, node_period);
    agent__shares_period(a, covered);
    int n = sched_nbuckets(a->s);
    if (arrays_fit(a, (size_t)n) == 0) {
        for (int b = 0; b < n; b++) {
            sched_bucket_stats_t bs;
            if (!node_period)
                a->carry[b] = 0; /* the node's counters restarted at its boundary */
            else if (sched_bucket_stats(a->s, b, &bs) == 0 && bs.arrivals >= a->prev[b])
                a->carry[b] += bs.arrivals - a->prev[b];
            a->prev[b] = 0;
            a->served_rep[b] = 0; /* the served counters restart */
        }
    }
    memset(a->rep_basis, 0, sizeof a->rep_basis); /* ... and the reports' counts with them */
    if (!node_period)
        return;
    if (a->ops.period_start)
        a->ops.period_start(a->ops.arg);
    else
        sched_period_start(a->s);
    if (a->st.fallback && a->cfg.mode == AGENT_FALLBACK_STATIC && a->grant.snapshots) {
        agent__static_tokens(a, next); /* renewed each period, within the lease */
        agent__shares_static(a);
        a->st.static_periods++;
    }
}

/* The controller refuses our name (duplicate_name): hold every request,
 * queued now or later, in bucket 0 with no tokens under the tokens policy.
 * Nothing is served until a welcome (release_hold()). */
static void hold(agent_t *a)
{
    a->st.welcomed = 0;
    if (a->st.refused)
        return;
    a->st.refused = 1;
    a->policy_before_hold = sched_policy(a->s);
    int n = sched_nbuckets(a->s);
    if (n <= 0)
        return;
    for (int b = 0; b < n; b++)
        sched_set_route(a->s, b, 0);
    sched_set_new_route(a->s, 0);
    agent__op_set_tokens(a, 0, 0, 0);
    agent__op_set_policy(a, SCHED_POLICY_TOKENS); /* even when the caller manages the
                                              policy: round robin would serve it */
}

/* A welcome after a refusal: routes come from the controller's table (or
 * are undone), bucket 0 is the controller's to fill, or unlimited again if
 * the controller lacks it; the policy is the fallback's until tokens come. */
static void release_hold(agent_t *a, int in_table)
{
    if (!a->st.refused)
        return;
    a->st.refused = 0;
    if (!in_table) {
        int n = sched_nbuckets(a->s);
        for (int b = 0; b < n; b++)
            if (sched_route(a->s, b) == 0)
                sched_set_route(a->s, b, a->default_route >= 0 ? a->default_route : b);
        sched_set_new_route(a->s, a->default_route);
    }
    agent__op_set_tokens(a, 0, 0, in_table ? 0 : SCHED_UNLIMITED);
    agent__op_set_policy(a, !a->cfg.manage_policy ? a->policy_before_hold
                     : a->st.fallback && a->cfg.mode == AGENT_FALLBACK_RR ? a->cfg.fallback
                                                                          : a->cfg.normal);
    if (a->peer)
        log_info("controller %s accepted this node's name again", a->peer);
}

/* ---- timing ---- */

/* The next interval boundary strictly after `now`. */
static double next_boundary(const agent_t *a, double now)
{
    double start = a->period_end - a->period_s;
    double k = floor((now - start) / a->interval_s + 1e-9) + 1;
    double t = start + k * a->interval_s;
    if (t > a->period_end || k >= a->intervals)
        t = a->period_end;
    if (t <= now)
        t = now + a->interval_s;
    return t;
}

/* The interval holding `now` of the period that ends at period_end. */
static uint32_t cur_interval_at(const agent_t *a, double period_end, double now)
{
    double el = a->period_s - (period_end - now);
    double k = floor(el / a->interval_s + 1e-6);
    if (k < 0)
        k = 0;
    if (k > a->intervals - 1)
        k = a->intervals - 1;
    return (uint32_t)k;
}

/* The interval holding `now` of the agent's period. */
static uint32_t cur_interval(const agent_t *a, double now)
{
    return cur_interval_at(a, a->period_end, now);
}

/* The timing a message carries, measured from `now`. */
static agent_timing_t msg_timing(const proto_msg_t *m, double now)
{
    return (agent_timing_t){.period = m->period, .interval = m->interval,
                            .intervals = m->intervals, .period_s = m->period_ms / 1000.0,
                            .end = now + m->remaining_ms / 1000.0};
}

/* Applies the timing of a controller message.  Returns 1 if the message is
 * for an older period than ours (stale), else 0.  `adopt` forces the
 * controller's numbering (a new session after welcome). */
static int take_timing(agent_t *a, const agent_timing_t *tm, double now, int adopt)
{
    if (!(tm->period_s > 0) || tm->intervals < 1 || tm->interval >= tm->intervals)
        return 1; /* the decoder never lets this through; a direct caller might */
    if (a->has_timing && !adopt && tm->period < a->period)
        return 1;
    if (a->has_timing && tm->period != a->period)
        period_start(a, tm->period);
    a->period = tm->period;
    a->intervals = tm->intervals;
    a->period_s = tm->period_s;
    a->interval_s = a->period_s / tm->intervals;
    a->period_end = tm->end;
    a->has_timing = 1;
    a->next_report = next_boundary(a, now);
    a->st.period = a->period;
    a->st.interval = tm->interval;
    a->st.period_s = a->period_s;
    a->st.silent_s = 0;
    a->ctl_pos = tm->period * tm->intervals + tm->interval;
    a->ctl_pos_known = 1;
    return 0;
}

static void fill_timing(const agent_t *a, proto_msg_t *m, double now)
{
    /* A clock not ticked since its period ended (a shard session that
     * idled while its shard was out of the map: agent_tick() is not
     * called) is rolled forward as agent_tick() would roll it: a hello
     * that gave the ended period would have the controller take a period
     * ending now (a standby adopts the nodes' clock), off the phase every
     * shard keeps. */
    uint64_t period = a->period;
    double end = a->period_end;
    if (now >= end && a->period_s > 0) {
        double n = floor((now - end) / a->period_s) + 1;
        period += (uint64_t)n;
        end += n * a->period_s;
    }
    double rem = (end - now) * 1000.0;
    uint32_t pms = (uint32_t)lround(a->period_s * 1000.0);
    m->period = period;
    m->interval = cur_interval_at(a, end, now);
    m->intervals = a->intervals;
    m->period_ms = pms ? pms : 1;
    m->remaining_ms = rem <= 0 ? 0 : rem >= m->period_ms ? m->period_ms : (uint32_t)rem;
}

/* ---- outgoing ---- */

/* Refreshes our table from the scheduler; fills namev.  Returns 0/-ENOMEM. */
static int refresh_table(agent_t *a)
{
    int n = sched_nbuckets(a->s);
    if (n < 0)
        n = 0;
    if (n != a->my_n) {
        /* Buckets are only ever added: under names in parts the table
         * grows by its end and keeps its generation (the controller takes
         * the new names as parts); else it is a new table. */
        if (!a->ctl_parts || n < a->my_n) {
            a->my_table++;
            if (a->my_table == 0)
                a->my_table = 1;
            a->my_acked = a->my_next = 0;
        }
        a->my_n = n;
    }
    if ((size_t)n > a->namev_cap) {
        const char **p = realloc(a->namev, (size_t)n * sizeof *p);
        if (!p)
            return -ENOMEM;
        a->namev = p;
        a->namev_cap = (size_t)n;
    }
    for (int b = 0; b < n; b++)
        a->namev[b] = sched_bucket_name(a->s, b);
    return arrays_fit(a, (size_t)n);
}

static uint64_t clampc(uint64_t v)
{
    return v > PROTO_MAX_COUNT ? PROTO_MAX_COUNT : v;
}

static int64_t clampt(int64_t v)
{
    if (v == PROTO_UNLIMITED)
        return v;
    if (v < 0)
        return 0;
    return (uint64_t)v > PROTO_MAX_COUNT ? (int64_t)PROTO_MAX_COUNT : v;
}

int agent_hello(agent_t *a, double now, proto_msg_t *m)
{
    int rc = refresh_table(a);
    if (rc)
        return rc;
    proto_msg_init(m); /* borrows namev; owns nothing */
    m->type = PROTO_HELLO;
    strcpy(m->node, a->name);
    m->capacity = clampc(a->cfg.capacity);
    m->instance = a->cfg.instance <= PROTO_MAX_COUNT ? a->cfg.instance : 0;
    m->follows = a->st.epoch; /* a new leader leads above it */
    m->leases = 1;            /* our static fallback keeps to the lease */
    m->sparse = a->cfg.sparse != 0;
    m->renew = a->cfg.renew != 0;
    m->table = a->my_table;
    m->has_names = 1;
    m->nnames = (size_t)a->my_n;
    m->names = a->namev;
    m->parts = a->cfg.parts != 0;
    a->hello_part = 0;
    if (m->parts) {
        size_t k = proto_part_len(a->namev, (size_t)a->my_n, 0);
        if (k < (size_t)a->my_n) { /* the first part; the rest in names messages */
            m->nnames = k;
            m->names_of = (size_t)a->my_n;
            a->hello_part = 1;
        }
    }
    if (a->has_timing) {
        m->has_timing = 1;
        fill_timing(a, m, now);
    }
    return 0;
}

void agent_heartbeat(const agent_t *a, proto_msg_t *m)
{
    proto_msg_init(m);
    m->type = PROTO_HEARTBEAT;
    strcpy(m->node, a->name);
    m->peer_table = a->ctl_table;
    m->has_peer_names = a->ctl_partial;
    m->peer_names = a->ctl_have;
}

/* The in-flight figure of bucket b (issue 25): the most of its requests
 * in flight here since the last report (sched_flight_take()), said in the
 * report's "inflight" list when it moved from the last one said by more
 * than AGENT_FLIGHT_ABS and AGENT_FLIGHT_REL of the larger (every nonzero
 * one once per session), at most PROTO_SHARES_MAX a report (the rest wait
 * for the next).  0 is never said: an idle bucket keeps its figure. */
#define AGENT_FLIGHT_ABS 1
#define AGENT_FLIGHT_REL 0.25
static void flight_note(agent_t *a, int b, size_t *nf)
{
    uint64_t k = sched_flight_take(a->s, b);
    uint32_t said = a->base[b].inflight;
    if (k == 0 || *nf >= PROTO_SHARES_MAX)
        return;
    uint64_t d = k > said ? k - said : said - k, hi = k > said ? k : said;
    if (said && (d <= AGENT_FLIGHT_ABS || (double)d <= AGENT_FLIGHT_REL * (double)hi))
        return;
    k = k > PROTO_MAX_COUNT ? PROTO_MAX_COUNT : k;
    a->flight[(*nf)++] = (proto_share_rec_t){.bucket = (uint32_t)b, .tokens = (int64_t)k};
    a->base[b].inflight = k > UINT32_MAX ? UINT32_MAX : (uint32_t)k;
}

int agent_report(agent_t *a, double now, proto_msg_t *m)
{
    if (!a->has_timing)
        return -EAGAIN;
    int rc = refresh_table(a);
    if (rc)
        return rc;
    m->type = PROTO_REPORT;
    if ((rc = proto_msg_reserve(m, a->my_n ? (size_t)a->my_n : 1, 0)))
        return rc;
    strcpy(m->node, a->name);
    fill_timing(a, m, now);
    m->intervals = 0;
    m->period_ms = 0;
    m->has_timing = 0;
    m->table = a->my_table;
    m->peer_table = a->ctl_table;
    sched_node_stats_t ns;
    sched_node_stats(a->s, &ns);
    m->completions = clampc(ns.completions);
    m->dispatched = clampc(ns.dispatched);
    m->busy_seconds = ns.busy_seconds >= 0 && ns.busy_seconds < 1e12 ? ns.busy_seconds : 0;
    /* The controller logs and counts our fallbacks (never welcomed is not one). */
    m->fallback = a->st.fallback && a->st.fallbacks > 0;
    m->fallbacks = clampc(a->st.fallbacks);
    /* The epoch we obey, for every controller to hear: one whose etcd lost
     * its data (epochs from 1 again) learns from it where to lead. */
    m->follows = a->st.epoch;
    m->has_names = !a->ctl_parts && a->peer_ack != a->my_table;
    m->nnames = m->has_names ? (size_t)a->my_n : 0;
    m->names = m->has_names ? a->namev : NULL;
    m->has_weights = 0;
    m->has_peer_names = a->ctl_partial;
    m->peer_names = a->ctl_have;
    /* Names in parts: records only for the buckets whose names the
     * controller holds (the others wait for their part). */
    size_t lim = !a->ctl_parts ? (size_t)a->my_n : a->peer_ack == a->my_table ? a->my_acked : 0;
    if (a->ctl_parts && a->my_next > a->my_acked && ++a->my_idle >= AGENT_PART_STALL) {
        a->my_next = a->my_acked; /* a part went missing: again from there */
        a->my_idle = 0;
    }
    /* Sparse: only what moved from what the controller holds; full when
     * it asked, every full_every reports, and while it lacks our names. */
    int sparse = a->ctl_sparse && !a->want_full && !m->has_names &&
                 a->since_full + 1 < (a->cfg.full_every ? a->cfg.full_every : 1);
    m->sparse = sparse;
    m->regrant = a->regrant; /* a gap in gseq: every grant again, please */
    a->regrant = 0;
    size_t k = 0, nf = 0;
    const uint32_t slot = a->rep_slot;
    for (int b = 0; b < a->my_n; b++) {
        sched_bucket_stats_t bs;
        flight_note(a, b, &nf);
        if (sched_bucket_stats(a->s, b, &bs)) {
            a->served_at[(size_t)b * AGENT_BASES + slot] = a->served_rep[b];
            continue;
        }
        uint64_t ai = a->carry[b] + (bs.arrivals >= a->prev[b] ? bs.arrivals - a->prev[b] : 0);
        a->prev[b] = bs.arrivals;
        a->carry[b] = 0;
        sched_stats_as_limited(&bs);
        a->served_rep[b] = bs.served_r + bs.served_l + bs.served_o;
        a->served_at[(size_t)b * AGENT_BASES + slot] = a->served_rep[b];
        proto_report_rec_t rec = {
            .bucket = (uint32_t)b,
            .queued = clampc(bs.queued),
            .arrivals_interval = clampc(ai),
            .arrivals_period = clampc(bs.arrivals),
            .served_r = clampc(bs.served_r),
            .served_l = clampc(bs.served_l),
            .served_o = clampc(bs.served_o),
            .r_left = clampt(bs.r_tokens),
            .l_left = clampt(bs.l_tokens),
        };
        agent_base_t *bb = &a->base[b];
        proto_pred_t now_v = {
            .queued = rec.queued,
            .arrivals = rec.arrivals_interval,
            .served = clampc(rec.served_r + rec.served_l + rec.served_o),
            /* Throttled means requests wait with no token to spend (the
             * controller's estimate reads it only with a queue): an idle
             * bucket held at R 0 and L 0 (hold_until_tokens(), a bucket a
             * part made, a revoked provisional split) is not, else the
             * hold and its release would each send a record of zeros,
             * which the controller takes for a report of the bucket and
             * then withholds its provisional split everywhere. */
            .throttled = rec.queued > 0 && rec.r_left <= 0 && rec.l_left <= 0,
        };
        int idle = !bs.queued && !ai && !bs.arrivals && !bs.served_r && !bs.served_l &&
                   !bs.served_o;
        if ((size_t)b >= lim) {
            /* Its name has not reached the controller: no pair there yet,
             * which starts from nothing, as this base does. */
            *bb = (agent_base_t){.period = m->period, .interval = m->interval};
            continue;
        }
        if (sparse) {
            proto_pred_t pred = {
                .queued = bb->queued,
                .arrivals = bb->arrivals,
                .served = proto_predict_served(bb->served, bb->period, bb->interval, m->period,
                                               m->interval),
                .throttled = bb->throttled,
            };
            if (proto_pred_near(&pred, &now_v, a->cfg.sparse_demand, a->cfg.sparse_served, 2)) {
                a->st.records_left_out += !idle || pred.served || pred.queued || pred.arrivals;
                /* The controller's tokens will be net of what it believes
                 * served, the prediction: net ours of the same (exact
                 * either way; net_of_served() never adds). */
                a->served_rep[b] = pred.served;
                a->served_at[(size_t)b * AGENT_BASES + slot] = pred.served;
                continue;
            }
        } else if (idle) {
            /* Idle buckets are omitted: the controller reads them as zeros. */
            *bb = (agent_base_t){.period = m->period, .interval = m->interval,
                                 .inflight = bb->inflight};
            continue;
        }
        *bb = (agent_base_t){.queued = now_v.queued, .arrivals = now_v.arrivals,
                             .served = now_v.served, .period = m->period,
                             .interval = m->interval, .throttled = (uint8_t)now_v.throttled,
                             .inflight = bb->inflight};
        m->report[k++] = rec;
    }
    if (sparse) {
        a->since_full++;
        a->st.reports_sparse++;
    } else {
        a->since_full = 0;
        a->want_full = 0;
        a->st.reports_full++;
    }
    m->count = k;
    m->has_inflight = nf > 0;
    m->ninflight = nf;
    m->inflight = a->flight;
    a->st.inflight_said += nf;
    double base = a->ops.base_latency ? a->ops.base_latency(a->ops.arg) : 0;
    m->base_us = base > 0 && base * 1e6 < PROTO_BASE_US_MAX ? (uint64_t)ceil(base * 1e6) : 0;
    a->rep_basis[slot] = proto_basis(m->period, m->interval, a->intervals);
    a->rep_slot = (slot + 1) % AGENT_BASES;
    if ((rc = agent__bytes_report(a, m)))
        return rc;
    a->last_rep_period = a->period;
    a->last_rep_interval = m->interval;
    return 0;
}

/* ---- incoming ---- */

/* Sets the scheduler's shadow flags from the controller's table in m:
 * the buckets its list names are in shadow, every other bucket of the
 * table is not (a controller that does not send the list has none). */
static void take_shadow(agent_t *a, const proto_msg_t *m, size_t at)
{
    const char *p = m->shadow ? m->shadow : "";
    size_t next = *p ? strtoul(p, NULL, 10) : SIZE_MAX;
    for (size_t i = 0; i < m->nnames; i++) {
        int on = i == next;
        if (on) {
            p = strchr(p, ',');
            next = p ? strtoul(++p, NULL, 10) : SIZE_MAX;
        }
        if (a->ctl_map[at + i] >= 0)
            sched_set_shadow(a->s, a->ctl_map[at + i], on);
    }
}

/* Sets scheduler bucket b to the controller's weight w, remembering the
 * weight it had (the node's own --config weight, or 1) the first time. */
static void take_weight(agent_t *a, int b, uint32_t w)
{
    sched_bucket_stats_t bs;
    if ((size_t)b >= a->arr_cap || sched_bucket_stats(a->s, b, &bs))
        return;
    if (!a->local_w[b])
        a->local_w[b] = bs.weight;
    if (bs.weight != w && sched_set_weight(a->s, b, w) == 0)
        a->st.weights_applied++;
}

/* A bucket the controller no longer has gets its own weight back. */
static void drop_weight(agent_t *a, int b)
{
    if ((size_t)b >= a->arr_cap || !a->local_w[b])
        return;
    if (sched_set_weight(a->s, b, a->local_w[b]) == 0)
        a->st.weights_applied++;
    a->local_w[b] = 0;
}

/* With a `default` bucket in the controller's table (m's names, already
 * mapped in ctl_map), every scheduler bucket the table lacks - a key prefix
 * nobody configured, a bucket the controller removed, one only this node's
 * --config names - is routed to it: its requests wait in `default`'s queue
 * and pay its tokens, so together they stay within its limit.  Buckets
 * created later start routed there too (sched_set_new_route()).  Without
 * `default` in the table every bucket is its own queue again (the
 * behaviour before there was a default bucket).  Returns the number of
 * buckets whose route changed (their waiting requests moved).  O(buckets),
 * once per controller table. */
static int route_default(agent_t *a)
{
    int d = a->ctl_default, nnow = sched_nbuckets(a->s), changed = 0;
    const uint8_t *in = a->ctl_seen; /* [seen_cap >= nnow]: table_fit() */
    for (int b = 0; b < nnow; b++) {
        int to = d >= 0 && !in[b] ? d : b;
        if (sched_route(a->s, b) != to) {
            sched_set_route(a->s, b, to);
            changed++;
        }
    }
    sched_set_new_route(a->s, d);
    if (a->ops.table)
        a->ops.table(a->ops.arg, d >= 0, (const unsigned char *)in, nnow);
    if (a->peer && a->default_route != d)
        log_info(d >= 0 ? "controller %s has a `default` bucket: keys of buckets it does not "
                          "configure are held to its limit"
                        : "controller %s has no `default` bucket: keys of buckets it does not "
                          "configure are not limited",
                 a->peer);
    a->default_route = d;
    return changed;
}

/* The first welcome of a node failing static, before any tokens or grant:
 * until the controller's first tokens (its next round) every bucket of its
 * table waits at R 0 and L 0, since the node does not know yet which of
 * them are limited (serving them with the tokens it starts with lifted
 * their limits for up to an interval; it_stalled_node's first period saw
 * 2-5 x the limit).  Returns nonzero if it set tokens. */
static int hold_until_tokens(agent_t *a)
{
    if (a->cfg.mode != AGENT_FALLBACK_STATIC || a->st.recv_tokens || a->grant.snapshots ||
        a->st.refused)
        return 0;
    int any = 0;
    for (size_t i = 0; i < a->ctl_n; i++)
        if (a->ctl_map[i] >= 0) {
            agent__op_set_tokens(a, a->ctl_map[i], 0, 0);
            any = 1;
        }
    return any;
}

/* Makes ctl_seen and ctl_was cover every scheduler bucket (new entries
 * zero).  Returns 0 or -ENOMEM. */
static int table_fit(agent_t *a)
{
    int nb = sched_nbuckets(a->s);
    nb = nb > 0 ? nb : 1;
    if (growarr((void **)&a->ctl_seen, &a->seen_cap, nb, 1) < 0 ||
        growarr((void **)&a->ctl_was, &a->was_cap, nb, 1) < 0)
        return -ENOMEM;
    return 0;
}

/* Starts taking the controller's table `gen` of n names: every index
 * unmapped until its name comes (no tokens apply: fail closed), the
 * buckets of the table before remembered (dropped at the end if the new
 * one lacks them).  A node failing static that never had tokens holds
 * every bucket at R 0 and L 0 while a table comes in parts: any of them
 * may be limited.  Returns 0 or -ENOMEM (nothing changed). */
static int table_begin(agent_t *a, uint32_t gen, size_t n, int parts)
{
    if (table_fit(a) < 0)
        return -ENOMEM;
    if (n > a->ctl_cap) {
        int *p = realloc(a->ctl_map, n * sizeof *p);
        if (!p)
            return -ENOMEM;
        a->ctl_map = p;
        a->ctl_cap = n;
    }
    int nb = sched_nbuckets(a->s);
    memset(a->ctl_seen, 0, (size_t)a->seen_cap);
    memset(a->ctl_was, 0, (size_t)a->was_cap);
    for (size_t i = 0; i < a->ctl_n && a->ctl_table; i++)
        if (a->ctl_map[i] >= 0 && a->ctl_map[i] < nb)
            a->ctl_was[a->ctl_map[i]] = 1;
    for (size_t i = 0; i < n; i++)
        a->ctl_map[i] = -1;
    int held = 0;
    if (parts && a->cfg.mode == AGENT_FALLBACK_STATIC && !a->st.recv_tokens &&
        !a->grant.snapshots && !a->st.refused)
        for (int b = 0; b < nb; b++) {
            agent__op_set_tokens(a, b, 0, 0);
            a->ctl_was[b] = 1;
            held = 1;
        }
    if (held)
        agent__op_applied(a);
    a->ctl_n = n;
    a->ctl_have = 0;
    a->ctl_default = -1;
    a->ctl_table = gen;
    a->ctl_partial = 1;
    agent__grants_reset(a, 0); /* indexes of another table */
    return 0;
}

/* Maps the names of m (names [at, at + nnames) of the table being taken)
 * and applies their weights and shadow flags.  `hold_new` (a table in
 * parts): a bucket made here for a name is held at R 0 and L 0 until the
 * controller's tokens reach it (a whole table's tokens come with it or
 * right after, as before). */
static void table_part(agent_t *a, const proto_msg_t *m, size_t at, int hold_new)
{
    int before = sched_nbuckets(a->s), held = 0;
    for (size_t i = 0; i < m->nnames; i++) {
        int b = op_bucket(a, m->names[i]);
        if (b < 0 && a->peer)
            log_warn("controller bucket '%s' not usable here: %s", m->names[i], strerror(-b));
        if (b >= before && hold_new) {
            /* made here for the controller's name: it may be limited, and
             * no tokens of the controller's have reached it (a new
             * scheduler bucket has no limit): held at R 0 and L 0 until
             * they do (fail closed) */
            agent__op_set_tokens(a, b, 0, 0);
            held = 1;
        }
        if (b >= a->seen_cap && table_fit(a) < 0)
            b = -ENOMEM; /* cannot remember it is the controller's: unmapped */
        a->ctl_map[at + i] = b;
        if (b >= 0) {
            a->ctl_seen[b] = 1;
            if (a->ctl_default < 0 && strcmp(m->names[i], "default") == 0)
                a->ctl_default = b;
        }
    }
    int nnow = sched_nbuckets(a->s);
    if (m->has_weights && arrays_fit(a, (size_t)(nnow > 0 ? nnow : 0)) == 0)
        for (size_t i = 0; i < m->nnames; i++)
            if (a->ctl_map[at + i] >= 0)
                take_weight(a, a->ctl_map[at + i], m->weights[i]);
    take_shadow(a, m, at);
    a->ctl_have = at + m->nnames;
    a->st.parts_taken++;
    if (held)
        agent__op_applied(a);
}

/* The whole table is mapped: a bucket the controller dropped (or that was
 * held while the table came) keeps serving, without reservation and
 * without limit (it may still be in this node's own config), with its own
 * weight; routes follow `default`.  Returns how many buckets changed.
 * O(buckets), once per table. */
static int table_end(agent_t *a)
{
    int nb = sched_nbuckets(a->s), dropped = 0;
    if (nb > a->seen_cap && table_fit(a) < 0)
        nb = a->seen_cap < a->was_cap ? a->seen_cap : a->was_cap;
    for (int b = 0; b < nb && b < a->was_cap; b++)
        if (a->ctl_was[b] && !a->ctl_seen[b]) {
            agent__op_set_tokens(a, b, 0, SCHED_UNLIMITED);
            sched_set_units(a->s, b, 0, 0, 0, INFINITY, 0);
            sched_set_shadow(a->s, b, 0);
            drop_weight(a, b);
            dropped++;
        }
    a->ctl_partial = 0;
    return dropped + route_default(a);
}

/* Rebuilds the controller-index -> scheduler-index map from m's names
 * (a whole table), and applies the controller's bucket weights if m
 * carries them.  Returns the number of buckets the controller dropped (now
 * R = 0, no limit), or -ENOMEM (nothing changed). */
static int take_ctl_table(agent_t *a, const proto_msg_t *m)
{
    int rc = table_begin(a, m->table, m->nnames, 0);
    if (rc < 0)
        return rc;
    table_part(a, m, 0, 0);
    return table_end(a);
}

/* A part of the controller's table (a welcome's first part, `fresh`, or
 * a names message): taken if it starts a table (at 0) or extends the one
 * being taken exactly; anything else is ignored (our peer_names tells the
 * controller where we are).  Returns 1 if the table is now whole, 0 if
 * not (or ignored), -ENOMEM (the table is dropped: no tokens apply). */
static int take_ctl_part(agent_t *a, const proto_msg_t *m, int fresh)
{
    size_t at = (size_t)m->names_at, of = (size_t)m->names_of;
    int cont = !fresh && a->ctl_partial && m->table == a->ctl_table && of == a->ctl_n;
    if (cont ? at != a->ctl_have : at != 0)
        return 0;
    if (!cont && table_begin(a, m->table, of, 1) < 0) {
        a->ctl_table = 0;
        a->ctl_n = 0;
        a->ctl_partial = 0;
        return -ENOMEM;
    }
    table_part(a, m, at, 1);
    if (a->ctl_have < a->ctl_n)
        return 0;
    table_end(a);
    if (a->peer)
        log_info("controller %s: its table is whole (%zu buckets, in parts)", a->peer, a->ctl_n);
    return 1;
}

int agent_names_part(agent_t *a, proto_msg_t *m)
{
    proto_msg_init(m);
    if (!a->ctl_parts || a->my_capped || !a->st.welcomed || a->my_next >= (size_t)a->my_n ||
        a->my_next - a->my_acked >= AGENT_PART_WINDOW)
        return 0;
    size_t k = proto_part_len(a->namev, (size_t)a->my_n, a->my_next);
    if (!k)
        return 0;
    m->type = PROTO_NAMES;
    strcpy(m->node, a->name);
    m->table = a->my_table;
    m->has_names = 1;
    m->names = a->namev + a->my_next;
    m->nnames = k;
    m->names_at = a->my_next;
    m->names_of = (size_t)a->my_n;
    a->my_next += k;
    a->st.parts_sent++;
    return 1;
}

void agent_names_unsent(agent_t *a, const proto_msg_t *m)
{
    if (m->type == PROTO_NAMES && m->table == a->my_table && m->names_at < a->my_next)
        a->my_next = (size_t)m->names_at;
}

/* The controller said how much of our table it holds (peer_table and
 * peer_names of a welcome, tokens or heartbeat).  `fresh`: a welcome,
 * which starts the count. */
static void take_ack(agent_t *a, const proto_msg_t *m, int fresh)
{
    size_t k = m->peer_table == a->my_table
                   ? (m->has_peer_names ? (size_t)m->peer_names : (size_t)a->my_n)
                   : 0;
    if (k > (size_t)a->my_n)
        k = (size_t)a->my_n;
    if (fresh) {
        a->my_acked = a->my_next = k;
        a->my_idle = 0;
        a->my_capped = 0;
    } else if (k > a->my_acked) {
        a->my_acked = k;
        a->my_idle = 0;
        if (a->my_next < k)
            a->my_next = k;
    }
}

/* The slot of rep_basis that holds `basis` (the newest if twice), or -1:
 * not one of our last AGENT_BASES reports of this period. */
static int basis_slot(const agent_t *a, uint64_t basis)
{
    for (uint32_t i = 1; basis && i <= AGENT_BASES; i++) {
        uint32_t s = (a->rep_slot + AGENT_BASES - i) % AGENT_BASES;
        if (a->rep_basis[s] == basis)
            return (int)s;
    }
    return -1;
}

/* The controller's counts are for the rest of the period as of one of our
 * reports (`slot`, basis_slot(); -2: not said, an older controller: our
 * latest); the IOs this node served since then (on the old tokens) already
 * used part of them.  Netting against that report, not our latest (which a
 * round that closed early did not see), grants nothing twice; a report we
 * no longer hold (-1): everything served this period (fail closed).
 * Charging them here keeps a limit hard across the round trip: they come
 * off the R-tokens first, then off the L-tokens. */
static void net_of_served(const agent_t *a, int b, int slot, int64_t *r, int64_t *l)
{
    sched_bucket_stats_t bs;
    if ((size_t)b >= a->arr_cap || sched_bucket_stats(a->s, b, &bs))
        return;
    sched_stats_as_limited(&bs);
    uint64_t now = bs.served_r + bs.served_l + bs.served_o;
    uint64_t at = slot == -2  ? a->served_rep[b]
                  : slot >= 0 ? a->served_at[(size_t)b * AGENT_BASES + (uint32_t)slot]
                              : 0;
    uint64_t since = now > at ? now - at : 0;
    uint64_t from_r = since < (uint64_t)*r ? since : (uint64_t)*r;
    *r -= (int64_t)from_r;
    since -= from_r;
    if (*l != SCHED_UNLIMITED)
        *l = since < (uint64_t)*l ? *l - (int64_t)since : 0;
}

/* Applies one record (controller index c; l PROTO_UNLIMITED: no limit),
 * net of what was served since the report `slot` names (net_of_served()). */
static void apply_one(agent_t *a, uint32_t c, int slot, int64_t r, int64_t l)
{
    int b = a->ctl_map[c];
    if (b < 0)
        return;
    if (l == PROTO_UNLIMITED)
        l = SCHED_UNLIMITED;
    net_of_served(a, b, slot, &r, &l);
    if (agent__op_set_tokens(a, b, r, l) == 0)
        a->st.tokens_applied++;
}

/* Applies a tokens message's records: controller index -> scheduler index
 * through the table map, then straight to the scheduler by index.  Under
 * changed grants (a->ctl_renew), a renewing message first applies again
 * the bases it leaves out (agent__grants_take()): as if re-sent now. */
static void apply_tokens(agent_t *a, const proto_msg_t *m)
{
    for (size_t i = 0; i < m->count; i++)
        if (m->tokens[i].bucket >= a->ctl_n) {
            proto_stats_note(&a->st.proto, PROTO_E_TABLE);
            if (a->peer)
                log_warn("controller tokens refer to bucket %u beyond its table (%zu)",
                         m->tokens[i].bucket, a->ctl_n);
            return;
        }
    /* A base renewed here stands for its record re-sent now: it is netted
     * against this message's basis, as the records are. */
    int slot = m->basis ? basis_slot(a, m->basis) : -2;
    if (slot == -1)
        a->st.basis_old++;
    if (a->ctl_renew) {
        const uint32_t *rn;
        long k = agent__grants_take(a, m, &rn);
        for (long i = 0; i < k; i++)
            apply_one(a, rn[i], slot, a->gb[rn[i]].r, a->gb[rn[i]].l);
    }
    for (size_t i = 0; i < m->count; i++) {
        const proto_tokens_rec_t *t = &m->tokens[i];
        apply_one(a, t->bucket, slot, t->r_tokens,
                  (t->flags & PROTO_TOK_UNLIMITED) ? PROTO_UNLIMITED : t->l_tokens);
    }
    agent__bytes_apply(a, m);
    agent__shares_apply(a, m);
    agent__op_applied(a);
}

static int handle_msg(agent_t *a, const proto_msg_t *m, const agent_timing_t *tm, double now,
                      int adopt);

/* A tokens message too late to apply under changed grants: its records
 * are not applied (stale), but they are the bases the controller now
 * believes we hold and what it renews stands as meant, so the gseq chain
 * takes it (bookkeeping only), instead of a gap that would renew nothing
 * until every grant came again.  A message for a table we do not hold
 * is left to be a gap. */
static void keep_chain(agent_t *a, const proto_msg_t *m)
{
    if (!a->ctl_renew || !m->gseq || m->has_names || m->table != a->ctl_table || !a->ctl_table)
        return;
    for (size_t i = 0; i < m->count; i++)
        if (m->tokens[i].bucket >= a->ctl_n)
            return;
    const uint32_t *rn;
    (void)agent__grants_take(a, m, &rn);
}

int agent_handle(agent_t *a, const proto_msg_t *m, const agent_timing_t *tm, double now)
{
    return agent_handle_from(a, m, tm, now, 0);
}

int agent_handle_from(agent_t *a, const proto_msg_t *m, const agent_timing_t *tm, double now,
                      int src)
{
    a->now = now;
    if (strcmp(m->node, a->name) != 0) {
        proto_stats_note(&a->st.proto, PROTO_E_UNKNOWN_NODE);
        if (a->peer)
            log_debug("controller message for node '%s' ignored", m->node);
        return 0;
    }
    int adopt;
    if (src < 0 || !agent__epoch_ok(a, m, src, now, &adopt))
        return 0;
    if (adopt) {
        /* A new leader: its table generations and period numbering are its
         * own.  Until it sends its names, its tokens cannot be mapped. */
        a->ctl_table = 0;
        a->ctl_n = 0;
        a->ctl_partial = 0;
        a->ctl_pos_known = 0;
        agent__grants_reset(a, 1);
    }
    /* A part of a table comes from the controller we follow, at its epoch
     * (a deposed one's names must not remap our buckets). */
    if (m->type == PROTO_NAMES && (src != a->st.leader || m->epoch != a->st.epoch)) {
        a->st.stale_epoch++;
        return 0;
    }
    if (m->type == PROTO_WELCOME || m->type == PROTO_TOKENS || m->type == PROTO_HEARTBEAT)
        a->st.lease = m->lease; /* the leader's; 0: an older controller, no bound */
    int rc = handle_msg(a, m, tm, now, adopt);
    /* A new leader that did not send its names: a hello makes it welcome
     * the node with them (a controller resends names only when told its
     * table is not held, and peer_table 0 tells it nothing). */
    if (adopt && !m->has_names && m->type != PROTO_ERROR) {
        a->asked_names = now;
        rc |= AGENT_SEND_HELLO;
    }
    if (a->has_timing) {
        a->heard = 1;
        a->heard_period = a->period;
    }
    return rc;
}

/* agent_handle_from() past the fencing: `tm` as there (may be NULL). */
static int handle_msg(agent_t *a, const proto_msg_t *m, const agent_timing_t *tm, double now,
                      int adopt)
{
    agent_timing_t mt = tm ? *tm : msg_timing(m, now);
    switch (m->type) {
    case PROTO_WELCOME:
        a->st.recv_welcome++;
        a->last_ctl = now;
        if (!a->st.welcomed && a->peer)
            log_info("controller %s: welcomed (period %llu)", a->peer,
                     (unsigned long long)mt.period);
        a->st.welcomed = 1;
        a->peer_ack = m->peer_table;
        a->ctl_parts = a->cfg.parts && m->parts;
        take_ack(a, m, 1);
        if (a->hello_part && !a->ctl_parts)
            a->peer_ack = 0; /* an older controller took our first part for
                                the whole table: the next report sends it */
        /* A new session: it holds nothing of our buckets yet. */
        a->ctl_sparse = a->cfg.sparse && m->sparse;
        a->want_full = 1;
        for (int b = 0; b < a->my_n && b < a->cap_base; b++)
            a->base[b].inflight = 0; /* says every figure again */
        a->ctl_renew = a->cfg.renew && m->renew;
        agent__grants_reset(a, 1); /* a new session numbers from 1 */
        take_timing(a, &mt, now, 1);
        /* a welcome without "rules": the controller has none (issue 27) */
        if (!m->rules_version && a->ops.rules && a->ops.rules(a->ops.arg, 0, "", 0) < 0)
            a->st.rules_rejected++;
        /* A welcome starts a session: a controller table not sent with it
         * may be another controller's, so forget ours. */
        if (m->has_names) {
            int rc = m->names_of ? take_ctl_part(a, m, 1) : take_ctl_table(a, m);
            if (rc < 0)
                a->ctl_table = 0;
            else if (hold_until_tokens(a) || rc > 0)
                agent__op_applied(a);
        } else {
            a->ctl_table = 0;
            a->ctl_n = 0;
            a->ctl_partial = 0;
        }
        if (a->st.refused) {
            int in = 0;
            for (size_t i = 0; i < a->ctl_n && a->ctl_table; i++)
                in |= a->ctl_map[i] == 0;
            release_hold(a, in);
            agent__op_applied(a);
        }
        break;
    case PROTO_TOKENS:
        a->st.recv_tokens++;
        a->last_ctl = now;
        a->peer_ack = m->peer_table;
        take_ack(a, m, 0);
        if (m->full && a->ctl_sparse && !a->want_full) {
            a->want_full = 1;
            a->st.full_asked++;
        }
        if (take_timing(a, &mt, now, adopt)) {
            a->st.tokens_stale++;
            keep_chain(a, m); /* late, not lost: its bases still count */
            break;
        }
        if (m->has_names) {
            if (take_ctl_table(a, m) < 0) {
                a->ctl_table = 0;
                break;
            }
        } else if (m->table != a->ctl_table) {
            proto_stats_note(&a->st.proto, PROTO_E_TABLE);
            /* No table at all (a new leader's tokens came first): a hello
             * makes it welcome us with its names; once an interval. */
            if (!a->ctl_table && now - a->asked_names > a->interval_s) {
                a->asked_names = now;
                return AGENT_SEND_HELLO;
            }
            break;
        }
        apply_tokens(a, m);
        agent__resume(a, now);
        break;
    case PROTO_HEARTBEAT:
        a->st.recv_heartbeat++;
        a->last_ctl = now;
        if (m->peer_table) {
            a->peer_ack = m->peer_table;
            take_ack(a, m, 0);
        }
        if (m->full && a->ctl_sparse && !a->want_full) {
            a->want_full = 1;
            a->st.full_asked++;
        }
        if ((m->has_timing || tm) && a->st.welcomed) {
            if (take_timing(a, &mt, now, adopt) == 0 && a->ctl_table)
                agent__resume(a, now);
        }
        break;
    case PROTO_ERROR:
        a->st.recv_error++;
        a->last_ctl = now;
        if (a->peer)
            log_info("controller %s says %s%s%s", a->peer, m->code, m->text[0] ? ": " : "",
                     m->text);
        if (strcmp(m->code, "unknown_node") == 0) {
            a->st.welcomed = 0;
            return AGENT_SEND_HELLO;
        }
        if (strcmp(m->code, "unknown_table") == 0) {
            a->peer_ack = 0; /* names go with the next report */
            a->my_acked = a->my_next = 0; /* or in parts from the first */
        }
        if (strcmp(m->code, "too_many_names") == 0)
            a->my_capped = 1; /* it holds no more of ours: the rest wait */
        if (strcmp(m->code, "duplicate_name") == 0) {
            if (a->peer && a->st.duplicate_name % 60 == 0)
                log_error("controller %s refuses node name '%s': another running node is "
                          "registered under it.  Give this node a unique --name.  Until the "
                          "controller accepts it, this node holds every request (serves "
                          "nothing) and keeps saying hello",
                          a->peer, a->name);
            a->st.duplicate_name++;
            hold(a);
            return AGENT_REFUSED;
        }
        break;
    case PROTO_NAMES:
        /* a part of the controller's table (names in parts) */
        if (!a->st.welcomed || !a->ctl_parts)
            break;
        int whole = take_ctl_part(a, m, 0);
        if (whole < 0)
            agent__grants_reset(a, 0);
        if (whole > 0)
            agent__op_applied(a);
        break;
    case PROTO_RULES:
        /* the leader's rule list (epoch fencing above): the node's from now */
        a->st.recv_rules++;
        a->last_ctl = now;
        if (a->ops.rules && a->ops.rules(a->ops.arg, m->rules_version, m->rules_text,
                                         m->rules_len) < 0)
            a->st.rules_rejected++;
        break;
    default:
        if (a->peer)
            log_debug("controller sent a %s message; ignored", proto_type_str(m->type));
        break;
    }
    return 0;
}

/* ---- the clock's side ---- */

int agent_tick(agent_t *a, double now)
{
    a->now = now;
    /* The tolerance absorbs rounding between the caller's boundaries and
     * ours (the simulator computes them independently). */
    if (!a->has_timing || now + 1e-6 * a->interval_s < a->next_report)
        return 0;
    if (now >= a->period_end) {
        double n = floor((now - a->period_end) / a->period_s) + 1;
        period_start(a, a->period + (uint64_t)n); /* sees the period that ends (its grant) */
        a->period += (uint64_t)n;
        a->period_end += n * a->period_s;
        a->st.period = a->period;
    }
    uint32_t k = cur_interval(a, now);
    a->st.interval = k;
    agent__watch(a, now, k);
    /* A refused node (duplicate_name) only says hello: its reports would
     * each earn an unknown_node and one more hello. */
    int due = !a->st.refused &&
              !(a->last_rep_period == a->period && a->last_rep_interval == (int64_t)k);
    a->next_report = next_boundary(a, now);
    return due;
}

void agent_watch_from(agent_t *a, double now)
{
    if (a->has_timing && now >= a->period_end && a->period_s > 0) {
        double n = floor((now - a->period_end) / a->period_s) + 1;
        period_roll(a, a->period + (uint64_t)n, 0);
        a->period += (uint64_t)n;
        a->period_end += n * a->period_s;
        a->st.period = a->period;
        a->st.interval = cur_interval(a, now);
        a->next_report = next_boundary(a, now);
    }
    a->last_ctl = now;
    a->st.silent_s = 0;
}

double agent_next_tick(const agent_t *a)
{
    return a->has_timing ? a->next_report : INFINITY;
}

int agent_welcomed(const agent_t *a)
{
    return a->st.welcomed;
}

void agent_stats(const agent_t *a, agent_stats_t *out)
{
    *out = a->st;
    out->ctl_partial = a->ctl_partial;
    out->ctl_names = a->ctl_have;
}

/* ---- life cycle ---- */

agent_t *agent_new(const agent_config_t *cfg, sched_t *sched, const agent_ops_t *ops,
                   double now, int *err)
{
    int rc = -EINVAL;
    agent_t *a = NULL;
    if (!cfg || !sched || !cfg->name || proto_name_check(cfg->name, strlen(cfg->name)) ||
        !(cfg->silence_intervals > 0) || !(cfg->grace_s >= 0) ||
        (cfg->mode != AGENT_FALLBACK_STATIC && cfg->mode != AGENT_FALLBACK_RR))
        goto out;
    rc = -ENOMEM;
    if (!(a = calloc(1, sizeof *a)) || (cfg->peer && !(a->peer = strdup(cfg->peer))))
        goto out;
    a->cfg = *cfg;
    a->unit = cfg->unit ? cfg->unit : 4096;
    strcpy(a->name, cfg->name);
    a->cfg.name = a->name;
    a->cfg.peer = a->peer;
    a->s = sched;
    if (ops)
        a->ops = *ops;
    a->last_rep_interval = -1;
    a->default_route = -1;
    a->ctl_default = -1;
    a->my_table = 1;
    a->want_full = 1;
    a->st.fallback = 1; /* until the controller speaks */
    a->st.mode = a->cfg.mode;
    a->st.leader = -1;
    grant_init(&a->grant);
    if (a->cfg.manage_policy)
        agent__op_set_policy(a, a->cfg.mode == AGENT_FALLBACK_RR ? a->cfg.fallback : a->cfg.normal);
    a->last_ctl = now;
    a->now = now;
    if (refresh_table(a))
        goto out;
    return a;
out:
    if (err)
        *err = rc;
    agent_destroy(&a);
    return NULL;
}

void agent_destroy(agent_t **ap)
{
    if (!ap || !*ap)
        return;
    agent_t *a = *ap;
    free(a->namev);
    free(a->prev);
    free(a->carry);
    free(a->served_rep);
    free(a->served_at);
    free(a->local_w);
    free(a->base);
    free(a->gb);
    free(a->gl);
    free(a->gl2);
    free(a->ub);
    free(a->ctl_map);
    free(a->ctl_seen);
    free(a->ctl_was);
    grant_clear(&a->grant);
    free(a->peer);
    free(a);
    *ap = NULL;
}
