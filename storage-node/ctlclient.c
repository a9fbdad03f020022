/* ctlclient.c - bqos-node's controller client: hello, per-interval reports,
 * token application and controller-silence fallback over a ZeroMQ DEALER. */
#include "storage-node/ctlclient.h"

#include <errno.h>
#include <event2/event.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "common/log.h"
#include "common/mono.h"

/* Owned by the node's loop thread; no locks. */
struct ctlclient {
    ctlclient_config_t cfg;
    char *endpoint;
    char name[PROTO_NAME_MAX + 1];
    sched_t *s;
    ctlclient_ops_t ops;
    void *zctx, *sock;
    proto_enc_t enc;
    proto_msg_t in, out;
    ctlclient_stats_t st;
    uint64_t seq;

    /* our table: the scheduler's buckets, indices 0..my_n-1 */
    uint32_t my_table;   /* generation, bumped when the bucket count changes */
    int my_n;
    uint32_t peer_ack;   /* our generation the controller says it holds */
    const char **namev;  /* names for the names frame (point into sched) */
    size_t namev_cap;
    uint64_t *prev;      /* per bucket: arrivals_period at the last report */
    uint64_t *carry;     /* per bucket: arrivals of the past interval that
                            a period start moved out of the counters */
    uint64_t *served_rep;/* per bucket: IOs served this period when the last
                            report was taken (see apply_tokens()) */
    uint32_t *local_w;   /* per bucket: its weight before the controller's
                            weight replaced it (0: the controller's weight
                            does not apply; see take_weights()) */
    size_t arr_cap;

    /* the controller's table: its index -> our scheduler index (or -1) */
    uint32_t ctl_table;
    int *ctl_map;
    size_t ctl_n, ctl_cap;

    /* timing, in our monotonic clock */
    int has_timing;
    uint64_t period;
    uint32_t intervals;
    double period_s, interval_s;
    double period_end;
    double next_report;
    uint64_t last_rep_period; /* (period, interval) of the last report, */
    int64_t last_rep_interval;/* to avoid reporting one interval twice */
    double last_ctl;          /* when the controller last spoke */
    double next_hello;
    double last_send;         /* when we last sent anything */

    struct event *ev_read, *ev_timer; /* ctlclient_attach() */
};

double ctlclient_now(void)
{
    return mono_now();
}

void ctlclient_config_defaults(ctlclient_config_t *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->manage_policy = 1;
    cfg->normal = SCHED_POLICY_TOKENS;
    cfg->fallback = SCHED_POLICY_RR;
    cfg->hello_s = 1.0;
    cfg->heartbeat_s = 1.0;
    cfg->silence_intervals = 1.5;
}

/* ---- acting on the node ---- */

static int op_bucket(ctlclient_t *c, const char *name)
{
    return c->ops.bucket ? c->ops.bucket(c->ops.arg, name) : sched_add_bucket(c->s, name, 1);
}

static int op_set_tokens(ctlclient_t *c, int b, int64_t r, int64_t l)
{
    const char *name = sched_bucket_name(c->s, b);
    if (c->ops.set_tokens)
        return c->ops.set_tokens(c->ops.arg, b, name, r, l);
    return sched_set_tokens(c->s, b, r, l);
}

static void op_set_policy(ctlclient_t *c, sched_policy_t p)
{
    if (c->ops.set_policy)
        c->ops.set_policy(c->ops.arg, p);
    else
        sched_set_policy(c->s, p);
}

static void enter_fallback(ctlclient_t *c, const char *why)
{
    if (c->st.fallback)
        return;
    c->st.fallback = 1;
    c->st.fallbacks++;
    if (c->cfg.manage_policy)
        op_set_policy(c, c->cfg.fallback);
    log_warn("controller %s silent (%s): falling back to policy %s", c->endpoint, why,
             c->cfg.fallback == SCHED_POLICY_RR ? "rr" : "tokens");
}

static void resume(ctlclient_t *c)
{
    if (!c->st.fallback)
        return;
    c->st.fallback = 0;
    c->st.resumes++;
    if (c->cfg.manage_policy)
        op_set_policy(c, c->cfg.normal);
    log_info("controller %s is back: resuming policy %s", c->endpoint,
             c->cfg.normal == SCHED_POLICY_RR ? "rr" : "tokens");
}

/* Makes the per-bucket arrays cover n buckets (new entries zero). */
static int arrays_fit(ctlclient_t *c, size_t n)
{
    if (n <= c->arr_cap)
        return 0;
    size_t want = c->arr_cap ? c->arr_cap : 64;
    while (want < n)
        want *= 2;
    uint64_t *p = realloc(c->prev, want * sizeof *p);
    if (!p)
        return -ENOMEM;
    c->prev = p;
    uint64_t *q = realloc(c->carry, want * sizeof *q);
    if (!q)
        return -ENOMEM;
    c->carry = q;
    uint64_t *s = realloc(c->served_rep, want * sizeof *s);
    if (!s)
        return -ENOMEM;
    c->served_rep = s;
    uint32_t *w = realloc(c->local_w, want * sizeof *w);
    if (!w)
        return -ENOMEM;
    c->local_w = w;
    memset(c->local_w + c->arr_cap, 0, (want - c->arr_cap) * sizeof *w);
    memset(c->prev + c->arr_cap, 0, (want - c->arr_cap) * sizeof *p);
    memset(c->carry + c->arr_cap, 0, (want - c->arr_cap) * sizeof *q);
    memset(c->served_rep + c->arr_cap, 0, (want - c->arr_cap) * sizeof *s);
    c->arr_cap = want;
    return 0;
}

/* Starts a new QoS period on the node, keeping the arrivals of the
 * interval that just ended for the next report. */
static void period_start(ctlclient_t *c)
{
    int n = sched_nbuckets(c->s);
    if (arrays_fit(c, (size_t)n) == 0) {
        for (int b = 0; b < n; b++) {
            sched_bucket_stats_t bs;
            if (sched_bucket_stats(c->s, b, &bs) == 0 && bs.arrivals >= c->prev[b])
                c->carry[b] += bs.arrivals - c->prev[b];
            c->prev[b] = 0;
            c->served_rep[b] = 0; /* the served counters restart */
        }
    }
    if (c->ops.period_start)
        c->ops.period_start(c->ops.arg);
    else
        sched_period_start(c->s);
}

/* ---- timing ---- */

/* The next interval boundary strictly after `now`. */
static double next_boundary(const ctlclient_t *c, double now)
{
    double start = c->period_end - c->period_s;
    double k = floor((now - start) / c->interval_s + 1e-9) + 1;
    double t = start + k * c->interval_s;
    if (t > c->period_end || k >= c->intervals)
        t = c->period_end;
    if (t <= now)
        t = now + c->interval_s;
    return t;
}

static uint32_t cur_interval(const ctlclient_t *c, double now)
{
    double el = c->period_s - (c->period_end - now);
    double k = floor(el / c->interval_s + 1e-6);
    if (k < 0)
        k = 0;
    if (k > c->intervals - 1)
        k = c->intervals - 1;
    return (uint32_t)k;
}

/* Applies the timing of a controller message.  Returns 1 if the message is
 * for an older period than ours (stale), else 0.  `adopt` forces the
 * controller's numbering (a new session after welcome). */
static int take_timing(ctlclient_t *c, const proto_msg_t *m, double now, int adopt)
{
    if (c->has_timing && !adopt && m->period < c->period)
        return 1;
    if (c->has_timing && m->period != c->period)
        period_start(c);
    c->period = m->period;
    c->intervals = m->intervals;
    c->period_s = m->period_ms / 1000.0;
    c->interval_s = c->period_s / m->intervals;
    c->period_end = now + m->remaining_ms / 1000.0;
    c->has_timing = 1;
    c->next_report = next_boundary(c, now);
    c->st.period = c->period;
    c->st.interval = m->interval;
    return 0;
}

/* ---- sending ---- */

static int send_msg(ctlclient_t *c, proto_msg_t *m)
{
    strcpy(m->node, c->name);
    m->seq = ++c->seq;
    int rc = proto_send(c->sock, NULL, 0, m, &c->enc, ZMQ_DONTWAIT);
    if (rc == 0)
        c->last_send = ctlclient_now();
    if (rc == -EAGAIN)
        c->st.send_dropped++;
    else if (rc < 0)
        log_warn("controller %s: send %s failed: %s", c->endpoint, proto_type_str(m->type),
                 strerror(-rc));
    return rc;
}

/* Refreshes our table from the scheduler; fills namev.  Returns 0/-ENOMEM. */
static int refresh_table(ctlclient_t *c)
{
    int n = sched_nbuckets(c->s);
    if (n < 0)
        n = 0;
    if (n != c->my_n) {
        c->my_n = n;
        c->my_table++;
        if (c->my_table == 0)
            c->my_table = 1;
    }
    if ((size_t)n > c->namev_cap) {
        const char **p = realloc(c->namev, (size_t)n * sizeof *p);
        if (!p)
            return -ENOMEM;
        c->namev = p;
        c->namev_cap = (size_t)n;
    }
    for (int b = 0; b < n; b++)
        c->namev[b] = sched_bucket_name(c->s, b);
    return arrays_fit(c, (size_t)n);
}

static void fill_timing(ctlclient_t *c, proto_msg_t *m, double now)
{
    double rem = (c->period_end - now) * 1000.0;
    uint32_t pms = (uint32_t)lround(c->period_s * 1000.0);
    m->period = c->period;
    m->interval = cur_interval(c, now);
    m->intervals = c->intervals;
    m->period_ms = pms ? pms : 1;
    m->remaining_ms = rem <= 0 ? 0 : rem >= m->period_ms ? m->period_ms : (uint32_t)rem;
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

static int send_hello(ctlclient_t *c, double now)
{
    int rc = refresh_table(c);
    if (rc)
        return rc;
    proto_msg_t m; /* borrows namev; owns nothing */
    proto_msg_init(&m);
    m.type = PROTO_HELLO;
    m.capacity = clampc(c->cfg.capacity);
    m.table = c->my_table;
    m.has_names = 1;
    m.nnames = (size_t)c->my_n;
    m.names = c->namev;
    if (c->has_timing) {
        m.has_timing = 1;
        fill_timing(c, &m, now);
    }
    rc = send_msg(c, &m);
    if (rc == 0)
        c->st.sent_hello++;
    return rc;
}

int ctlclient_report_now(ctlclient_t *c, double now)
{
    if (!c->has_timing)
        return -EAGAIN;
    int rc = refresh_table(c);
    if (rc)
        return rc;
    proto_msg_t *m = &c->out;
    m->type = PROTO_REPORT;
    if ((rc = proto_msg_reserve(m, c->my_n ? (size_t)c->my_n : 1, 0)))
        return rc;
    fill_timing(c, m, now);
    m->intervals = 0;
    m->period_ms = 0;
    m->has_timing = 0;
    m->table = c->my_table;
    m->peer_table = c->ctl_table;
    sched_node_stats_t ns;
    sched_node_stats(c->s, &ns);
    m->completions = clampc(ns.completions);
    m->dispatched = clampc(ns.dispatched);
    m->busy_seconds = ns.busy_seconds >= 0 && ns.busy_seconds < 1e12 ? ns.busy_seconds : 0;
    m->has_names = c->peer_ack != c->my_table;
    m->nnames = m->has_names ? (size_t)c->my_n : 0;
    m->names = m->has_names ? c->namev : NULL;
    size_t k = 0;
    for (int b = 0; b < c->my_n; b++) {
        sched_bucket_stats_t bs;
        if (sched_bucket_stats(c->s, b, &bs))
            continue;
        uint64_t ai = c->carry[b] + (bs.arrivals >= c->prev[b] ? bs.arrivals - c->prev[b] : 0);
        c->prev[b] = bs.arrivals;
        c->carry[b] = 0;
        c->served_rep[b] = bs.served_r + bs.served_l + bs.served_o;
        /* Idle buckets are omitted: the controller reads them as zeros. */
        if (!bs.queued && !ai && !bs.arrivals && !bs.served_r && !bs.served_l && !bs.served_o)
            continue;
        proto_report_rec_t *r = &m->report[k++];
        memset(r, 0, sizeof *r);
        r->bucket = (uint32_t)b;
        r->queued = clampc(bs.queued);
        r->arrivals_interval = clampc(ai);
        r->arrivals_period = clampc(bs.arrivals);
        r->served_r = clampc(bs.served_r);
        r->served_l = clampc(bs.served_l);
        r->served_o = clampc(bs.served_o);
        r->r_left = clampt(bs.r_tokens);
        r->l_left = clampt(bs.l_tokens);
    }
    m->count = k;
    rc = send_msg(c, m);
    m->names = NULL;
    m->has_names = 0;
    if (rc == 0)
        c->st.sent_report++;
    c->last_rep_period = c->period;
    c->last_rep_interval = m->interval;
    return rc;
}

/* ---- receiving ---- */

/* Sets scheduler bucket b to the controller's weight w, remembering the
 * weight it had (the node's own --config weight, or 1) the first time. */
static void take_weight(ctlclient_t *c, int b, uint32_t w)
{
    sched_bucket_stats_t bs;
    if ((size_t)b >= c->arr_cap || sched_bucket_stats(c->s, b, &bs))
        return;
    if (!c->local_w[b])
        c->local_w[b] = bs.weight;
    if (bs.weight != w && sched_set_weight(c->s, b, w) == 0)
        c->st.weights_applied++;
}

/* A bucket the controller no longer has gets its own weight back. */
static void drop_weight(ctlclient_t *c, int b)
{
    if ((size_t)b >= c->arr_cap || !c->local_w[b])
        return;
    if (sched_set_weight(c->s, b, c->local_w[b]) == 0)
        c->st.weights_applied++;
    c->local_w[b] = 0;
}

/* Rebuilds the controller-index -> scheduler-index map from m's names,
 * and applies the controller's bucket weights if m carries them. */
static int take_ctl_table(ctlclient_t *c, const proto_msg_t *m)
{
    size_t n = m->nnames;
    int nb = sched_nbuckets(c->s);
    char *seen = calloc((size_t)(nb > 0 ? nb : 1) + n, 1);
    if (!seen)
        return -ENOMEM;
    if (n > c->ctl_cap) {
        int *p = realloc(c->ctl_map, n * sizeof *p);
        if (!p) {
            free(seen);
            return -ENOMEM;
        }
        c->ctl_map = p;
        c->ctl_cap = n;
    }
    /* Buckets that were the controller's before. */
    char *was = calloc((size_t)(nb > 0 ? nb : 1), 1);
    if (!was) {
        free(seen);
        return -ENOMEM;
    }
    for (size_t i = 0; i < c->ctl_n; i++)
        if (c->ctl_map[i] >= 0 && c->ctl_map[i] < nb)
            was[c->ctl_map[i]] = 1;
    for (size_t i = 0; i < n; i++) {
        int b = op_bucket(c, m->names[i]);
        if (b < 0)
            log_warn("controller bucket '%s' not usable here: %s", m->names[i], strerror(-b));
        c->ctl_map[i] = b;
        if (b >= 0 && b < nb)
            seen[b] = 1;
    }
    int nnow = sched_nbuckets(c->s);
    if (m->has_weights && arrays_fit(c, (size_t)(nnow > 0 ? nnow : 0)) == 0)
        for (size_t i = 0; i < n; i++)
            if (c->ctl_map[i] >= 0)
                take_weight(c, c->ctl_map[i], m->weights[i]);
    /* A bucket the controller dropped keeps serving, without reservation
     * and without limit (it may still be in this node's own config), with
     * its own weight. */
    for (int b = 0; b < nb; b++)
        if (was[b] && !seen[b]) {
            op_set_tokens(c, b, 0, SCHED_UNLIMITED);
            drop_weight(c, b);
        }
    free(was);
    free(seen);
    c->ctl_n = n;
    c->ctl_table = m->table;
    return 0;
}

/* The controller's counts are for the rest of the period as of our last
 * report; the IOs this node served since then (on the old tokens) already
 * used part of them.  Charging them here keeps a limit hard across the
 * round trip: they come off the R-tokens first, then off the L-tokens. */
static void net_of_served(ctlclient_t *c, int b, int64_t *r, int64_t *l)
{
    sched_bucket_stats_t bs;
    if ((size_t)b >= c->arr_cap || sched_bucket_stats(c->s, b, &bs))
        return;
    uint64_t now = bs.served_r + bs.served_l + bs.served_o;
    uint64_t since = now > c->served_rep[b] ? now - c->served_rep[b] : 0;
    uint64_t from_r = since < (uint64_t)*r ? since : (uint64_t)*r;
    *r -= (int64_t)from_r;
    since -= from_r;
    if (*l != SCHED_UNLIMITED)
        *l = since < (uint64_t)*l ? *l - (int64_t)since : 0;
}

static void apply_tokens(ctlclient_t *c, const proto_msg_t *m)
{
    for (size_t i = 0; i < m->count; i++)
        if (m->tokens[i].bucket >= c->ctl_n) {
            proto_stats_note(&c->st.proto, PROTO_E_TABLE);
            log_warn("controller tokens refer to bucket %u beyond its table (%zu)",
                     m->tokens[i].bucket, c->ctl_n);
            return;
        }
    for (size_t i = 0; i < m->count; i++) {
        int b = c->ctl_map[m->tokens[i].bucket];
        if (b < 0)
            continue;
        int64_t r = m->tokens[i].r_tokens, l = m->tokens[i].l_tokens;
        net_of_served(c, b, &r, &l);
        if (op_set_tokens(c, b, r, l) == 0)
            c->st.tokens_applied++;
    }
    if (c->ops.applied)
        c->ops.applied(c->ops.arg);
}

static void handle(ctlclient_t *c, proto_msg_t *m, double now)
{
    if (strcmp(m->node, c->name) != 0) {
        proto_stats_note(&c->st.proto, PROTO_E_UNKNOWN_NODE);
        log_debug("controller message for node '%s' ignored", m->node);
        return;
    }
    switch (m->type) {
    case PROTO_WELCOME:
        c->st.recv_welcome++;
        c->last_ctl = now;
        if (!c->st.welcomed)
            log_info("controller %s: welcomed (period %llu)", c->endpoint,
                     (unsigned long long)m->period);
        c->st.welcomed = 1;
        c->peer_ack = m->peer_table;
        take_timing(c, m, now, 1);
        /* A welcome starts a session: a controller table not sent with it
         * may be another controller's, so forget ours. */
        if (m->has_names) {
            if (take_ctl_table(c, m))
                c->ctl_table = 0;
        } else {
            c->ctl_table = 0;
            c->ctl_n = 0;
        }
        break;
    case PROTO_TOKENS:
        c->st.recv_tokens++;
        c->last_ctl = now;
        c->peer_ack = m->peer_table;
        if (take_timing(c, m, now, 0)) {
            c->st.tokens_stale++;
            break;
        }
        if (m->has_names) {
            if (take_ctl_table(c, m)) {
                c->ctl_table = 0;
                break;
            }
        } else if (m->table != c->ctl_table) {
            proto_stats_note(&c->st.proto, PROTO_E_TABLE);
            break;
        }
        apply_tokens(c, m);
        resume(c);
        break;
    case PROTO_HEARTBEAT:
        c->st.recv_heartbeat++;
        c->last_ctl = now;
        if (m->peer_table)
            c->peer_ack = m->peer_table;
        if (m->has_timing && c->st.welcomed) {
            if (take_timing(c, m, now, 0) == 0 && c->ctl_table)
                resume(c);
        }
        break;
    case PROTO_ERROR:
        c->st.recv_error++;
        c->last_ctl = now;
        log_info("controller %s says %s%s%s", c->endpoint, m->code, m->text[0] ? ": " : "",
                 m->text);
        if (strcmp(m->code, "unknown_node") == 0) {
            c->st.welcomed = 0;
            c->next_hello = now + c->cfg.hello_s;
            send_hello(c, now);
        } else if (strcmp(m->code, "unknown_table") == 0) {
            c->peer_ack = 0; /* names go with the next report */
        }
        break;
    default:
        log_debug("controller sent a %s message; ignored", proto_type_str(m->type));
        break;
    }
}

int ctlclient_on_readable(ctlclient_t *c, double now)
{
    for (;;) {
        proto_reason_t why;
        int rc = proto_recv(c->sock, NULL, 0, NULL, &c->in, &c->st.proto, &why, NULL, NULL,
                            ZMQ_DONTWAIT);
        if (rc == -EAGAIN)
            return 0;
        if (rc == -EPROTO) {
            log_warn("controller %s: bad message (%s) dropped", c->endpoint, proto_reason_str(why));
            continue;
        }
        if (rc == -EINTR)
            continue;
        if (rc < 0)
            return rc;
        handle(c, &c->in, now);
    }
}

double ctlclient_tick(ctlclient_t *c, double now)
{
    ctlclient_on_readable(c, now);
    if (!c->st.welcomed && now >= c->next_hello) {
        /* Not connected yet (ZMQ_IMMEDIATE refuses to queue): retry soon,
         * so a node that starts with its controller is welcomed at once. */
        int rc = send_hello(c, now);
        c->next_hello = now + (rc == -EAGAIN && c->cfg.hello_s > 0.05 ? 0.05 : c->cfg.hello_s);
    }
    if (c->has_timing && now >= c->next_report) {
        if (now >= c->period_end) {
            double n = floor((now - c->period_end) / c->period_s) + 1;
            c->period += (uint64_t)n;
            c->period_end += n * c->period_s;
            period_start(c);
            c->st.period = c->period;
        }
        /* Silent for a while and not heard at all in this period: the
         * tokens we hold are for a period that has ended.  (A controller
         * that goes quiet mid-period leaves its tokens valid until the
         * period ends.) */
        if (!c->st.fallback && now - c->last_ctl > c->cfg.silence_intervals * c->interval_s &&
            c->last_ctl < c->period_end - c->period_s)
            enter_fallback(c, "no tokens or heartbeat in this period");
        uint32_t k = cur_interval(c, now);
        c->st.interval = k;
        if (!(c->last_rep_period == c->period && c->last_rep_interval == (int64_t)k))
            ctlclient_report_now(c, now);
        c->next_report = next_boundary(c, now);
    }
    if (c->st.welcomed && now - c->last_send >= c->cfg.heartbeat_s) {
        proto_msg_t hb; /* reports double as heartbeats; this covers long intervals */
        proto_msg_init(&hb);
        hb.type = PROTO_HEARTBEAT;
        hb.peer_table = c->ctl_table;
        if (send_msg(c, &hb) == 0)
            c->st.sent_heartbeat++;
        else
            c->last_send = now; /* retry after another heartbeat_s */
    }
    ctlclient_on_readable(c, now);
    double next = now + c->cfg.hello_s;
    if (c->st.welcomed && c->last_send + c->cfg.heartbeat_s < next)
        next = c->last_send + c->cfg.heartbeat_s;
    if (!c->st.welcomed && c->next_hello < next)
        next = c->next_hello;
    if (c->has_timing && c->next_report < next)
        next = c->next_report;
    double d = next - now;
    return d < 0.001 ? 0.001 : d;
}

/* ---- libevent glue ---- */

static void arm_timer(ctlclient_t *c, double secs)
{
    struct timeval tv = {.tv_sec = (time_t)secs, .tv_usec = (suseconds_t)((secs - floor(secs)) * 1e6)};
    evtimer_add(c->ev_timer, &tv);
}

static void on_ev_read(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    ctlclient_t *c = arg;
    /* A message may change the schedule (a welcome brings the period's
     * timing), so recompute the next deadline rather than keep the old. */
    arm_timer(c, ctlclient_tick(c, ctlclient_now()));
}

static void on_ev_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    ctlclient_t *c = arg;
    arm_timer(c, ctlclient_tick(c, ctlclient_now()));
}

int ctlclient_attach(ctlclient_t *c, struct event_base *base)
{
    if (!c || !base || c->ev_read)
        return -EINVAL;
    int fd = ctlclient_fd(c);
    if (fd < 0)
        return -EINVAL;
    c->ev_read = event_new(base, fd, EV_READ | EV_PERSIST, on_ev_read, c);
    c->ev_timer = evtimer_new(base, on_ev_timer, c);
    if (!c->ev_read || !c->ev_timer || event_add(c->ev_read, NULL) != 0) {
        if (c->ev_read)
            event_free(c->ev_read);
        if (c->ev_timer)
            event_free(c->ev_timer);
        c->ev_read = c->ev_timer = NULL;
        return -ENOMEM;
    }
    arm_timer(c, 0);
    return 0;
}

/* ---- life cycle ---- */

ctlclient_t *ctlclient_new(const ctlclient_config_t *cfg, sched_t *sched, const ctlclient_ops_t *ops,
                           int *err)
{
    int rc = -EINVAL;
    ctlclient_t *c = NULL;
    if (!cfg || !sched || !cfg->endpoint || !cfg->name ||
        proto_name_check(cfg->name, strlen(cfg->name)) || !(cfg->hello_s > 0) ||
        !(cfg->heartbeat_s > 0) ||
        !(cfg->silence_intervals > 0))
        goto out;
    rc = -ENOMEM;
    if (!(c = calloc(1, sizeof *c)) || !(c->endpoint = strdup(cfg->endpoint)))
        goto out;
    c->cfg = *cfg;
    c->cfg.endpoint = c->endpoint;
    strcpy(c->name, cfg->name);
    c->cfg.name = c->name;
    c->s = sched;
    if (ops)
        c->ops = *ops;
    proto_enc_init(&c->enc);
    proto_msg_init(&c->in);
    proto_msg_init(&c->out);
    c->last_rep_interval = -1;
    c->my_table = 1;
    if (!(c->zctx = zmq_ctx_new()) || !(c->sock = zmq_socket(c->zctx, ZMQ_DEALER))) {
        rc = -zmq_errno();
        goto out;
    }
    int one = 1, zero = 0, hwm = 64, ivl = 100, ivlmax = 1000;
    zmq_setsockopt(c->sock, ZMQ_ROUTING_ID, c->name, strlen(c->name));
    zmq_setsockopt(c->sock, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(c->sock, ZMQ_IMMEDIATE, &one, sizeof one);
    zmq_setsockopt(c->sock, ZMQ_SNDHWM, &hwm, sizeof hwm);
    zmq_setsockopt(c->sock, ZMQ_RECONNECT_IVL, &ivl, sizeof ivl);
    zmq_setsockopt(c->sock, ZMQ_RECONNECT_IVL_MAX, &ivlmax, sizeof ivlmax);
    if (zmq_connect(c->sock, c->endpoint) != 0) {
        rc = -zmq_errno();
        log_error("controller endpoint '%s': %s", c->endpoint, zmq_strerror(-rc));
        goto out;
    }
    c->st.fallback = 1; /* until the controller speaks */
    if (c->cfg.manage_policy)
        op_set_policy(c, c->cfg.fallback);
    double now = ctlclient_now();
    c->last_ctl = now;
    c->next_hello = now; /* first tick sends it */
    if (refresh_table(c))
        goto out;
    log_info("controller client: node %s -> %s", c->name, c->endpoint);
    return c;
out:
    if (err)
        *err = rc;
    ctlclient_destroy(&c);
    return NULL;
}

void ctlclient_destroy(ctlclient_t **cp)
{
    if (!cp || !*cp)
        return;
    ctlclient_t *c = *cp;
    if (c->ev_read)
        event_free(c->ev_read);
    if (c->ev_timer)
        event_free(c->ev_timer);
    if (c->sock) {
        if (c->st.welcomed) {
            int linger = 100;
            zmq_setsockopt(c->sock, ZMQ_LINGER, &linger, sizeof linger);
            proto_msg_t m;
            proto_msg_init(&m);
            m.type = PROTO_GOODBYE;
            if (send_msg(c, &m) == 0)
                c->st.sent_goodbye++;
        }
        zmq_close(c->sock);
    }
    if (c->zctx)
        zmq_ctx_term(c->zctx);
    proto_enc_clear(&c->enc);
    proto_msg_clear(&c->in);
    proto_msg_clear(&c->out);
    free(c->namev);
    free(c->prev);
    free(c->carry);
    free(c->served_rep);
    free(c->local_w);
    free(c->ctl_map);
    free(c->endpoint);
    free(c);
    *cp = NULL;
}

int ctlclient_fd(const ctlclient_t *c)
{
    int fd = -1;
    size_t len = sizeof fd;
    if (!c || zmq_getsockopt(c->sock, ZMQ_FD, &fd, &len) != 0)
        return -1;
    return fd;
}

void ctlclient_stats(const ctlclient_t *c, ctlclient_stats_t *out)
{
    *out = c->st;
}
