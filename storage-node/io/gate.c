/* gate.c - the node's scheduler and its one door: buckets, queues, window, dispatch, busy time, tokens, policy, period, stats, graceful stop (see gate.h). */
#include "storage-node/io/gate.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/mono.h"
#include "common/names.h"
#include "storage-node/core/headroom.h"

#define SHUTDOWN_GRACE_SEC 10

struct gate {
    gate_config_t cfg;
    gate_hooks_t hooks;
    void *front;
    struct event_base *base;
    sched_t *s;            /* the node's scheduler: the gate's own */
    conns_t *cn;           /* the front's connections: the gate's own */
    window_t *win;         /* IOs at the backend: how many, how many allowed */
    double busy_mark;      /* last time busy time was accounted */
    double busy_pending;   /* busy seconds not yet reported */
    struct iolat *lat;     /* gate_set_iolat(), NULL: none */
    int stopping;
    struct event *stop_timer;
    /* gate_request_dispatch(): one dispatch per pass of the event loop. */
    struct event *kick;
    int kick_armed;
    size_t queued;         /* items in the scheduler's queues: every way in and
                              out is the gate's (enqueue, remove, take, drain) */
    double take_now;       /* mono_now() of the dispatch hook running (on_kick, on_pace):
                              gate_take() reads the clock once per dispatch; NAN: none */
    /* Paced tokens: one timer for the time the scheduler says credit
     * returns (sched_next_ready()), armed when a dispatch finds nothing. */
    struct event *pace;
    double pace_at;        /* when it fires; INFINITY: not armed */
    gate_status_fn status; /* gate_set_status() */
    void *status_arg;
    int auth;              /* gate_set_auth() */
    uint64_t auth_ok, auth_failures[GATE_AUTH_NREASONS];
    gate_table_t table;    /* gate_set_table() */
    unsigned char *listed; /* gate_set_listed(): nlisted of them */
    int nlisted;
    rules_t *rules;        /* gate_set_rules(); NULL: none */
    uint64_t rules_version;
    uint32_t rules_gen;    /* gate_rules_gen(): counts changes of rules, table, listing */
    int nrules;            /* rules_count(rules) */
    uint64_t *rule_matches; /* per rule */
    int template_buckets;
    struct gate_tmpl {     /* template-made buckets and their rule's R, L */
        int b;
        int64_t r, l;      /* IOs per second; l RULES_NO_LIMIT: none */
    } *tmpl;               /* template_buckets of them (GATE_TEMPLATE_BUCKETS_MAX room) */
    double period_s;       /* gate_template_period()'s last; 0: unknown */
    int tmpl_cluster;      /* gate_template_cluster(): the controller holds them */
    uint64_t rules_refused[GATE_RULE_NREASONS];
    /* Refusals by identity (gate_refused_identities()): the first
     * GATE_IDENTITIES_MAX identities refused, then "other". */
    struct gate_ident {
        char id[GATE_IDENTITY_LEN];
        uint64_t n;
    } idents[GATE_IDENTITIES_MAX];
    int nidents;
    uint64_t ident_other;
    who_t *who;            /* the identities active per bucket (gate_who()) */
};

void gate_set_status(gate_t *g, gate_status_fn fn, void *arg)
{
    g->status = fn;
    g->status_arg = arg;
}

void gate_set_iolat(gate_t *g, struct iolat *l)
{
    g->lat = l;
}

struct iolat *gate_iolat(const gate_t *g)
{
    return g->lat;
}

void gate_stats(const gate_t *g, gate_stats_t *out)
{
    out->policy = sched_policy(g->s);
    out->buckets = sched_nbuckets(g->s);
    sched_node_stats(g->s, &out->node);
    /* requests waiting at the node (the scheduler's to order), beside the
     * window's at the backend; one pass over the buckets per call */
    out->queued = 0;
    for (int b = 0; b < out->buckets; b++) {
        sched_bucket_stats_t bs;
        if (sched_bucket_stats(g->s, b, &bs) == 0)
            out->queued += bs.queued;
    }
    out->inflight = window_inflight(g->win);
    window_stats(g->win, &out->window);
    conns_stats(g->cn, &out->conns);
    out->status = g->status;
    out->status_arg = g->status_arg;
    out->auth = g->auth;
    out->auth_ok = g->auth_ok;
    memcpy(out->auth_failures, g->auth_failures, sizeof out->auth_failures);
    out->table = (int)g->table;
    out->rules = g->nrules;
    out->rules_version = g->rules_version;
    out->template_buckets = g->template_buckets;
    memcpy(out->rules_refused, g->rules_refused, sizeof out->rules_refused);
    out->rule_matches = g->rule_matches;
}

/* ---- rules ---------------------------------------------------------------- */

const char *const gate_rule_reason_names[GATE_RULE_NREASONS] = {
    "denied", "no_match", "bad_name", "template_bound", "unknown_bucket"};

void gate_set_rules(gate_t *g, rules_t *r, uint64_t version)
{
    uint64_t *m = r && rules_count(r) ? calloc(rules_count(r), sizeof *m) : NULL;
    if (r && rules_count(r) && !m) {
        /* no memory for the counts: keep the rules, count nothing per rule */
        log_warn("rules: no memory for the per-rule counts");
    }
    rules_destroy(&g->rules);
    free(g->rule_matches);
    g->rules = r;
    g->rules_gen++;
    g->rule_matches = m;
    g->nrules = (int)rules_count(r);
    g->rules_version = version;
}

const rules_t *gate_rules(const gate_t *g)
{
    return g->rules;
}

uint64_t gate_rules_version(const gate_t *g)
{
    return g->rules_version;
}

int gate_has_rules(const gate_t *g)
{
    return g->nrules > 0;
}

/* Subject s's identity as the refusal counts name it: "user:NAME",
 * "cert:NAME", "psk:ID" (the first it has), else "addr:ADDRESS", else
 * "unknown"; truncated to fit. */
static void identity_of(const rules_subject_t *s, char *buf, size_t n)
{
    char a[INET6_ADDRSTRLEN] = "";
    if (s->user)
        snprintf(buf, n, "user:%s", s->user);
    else if (s->cert_name)
        snprintf(buf, n, "cert:%s", s->cert_name);
    else if (s->psk_id)
        snprintf(buf, n, "psk:%s", s->psk_id);
    else if ((s->family == 4 || s->family == 6) &&
             inet_ntop(s->family == 4 ? AF_INET : AF_INET6, s->addr, a, sizeof a))
        snprintf(buf, n, "addr:%s", a);
    else
        snprintf(buf, n, "unknown");
}

/* Counts a refusal of subject s by identity: a linear pass over at most
 * GATE_IDENTITIES_MAX entries, only on the refusal path. */
static void count_identity(gate_t *g, const rules_subject_t *s)
{
    char id[GATE_IDENTITY_LEN];
    identity_of(s, id, sizeof id);
    for (int i = 0; i < g->nidents; i++)
        if (strcmp(g->idents[i].id, id) == 0) {
            g->idents[i].n++;
            return;
        }
    if (g->nidents < GATE_IDENTITIES_MAX) {
        memcpy(g->idents[g->nidents].id, id, sizeof id);
        g->idents[g->nidents++].n = 1;
    } else
        g->ident_other++;
}

static int refuse(gate_t *g, const rules_subject_t *s, gate_rule_reason_t why,
                  gate_rule_reason_t *out)
{
    g->rules_refused[why]++;
    count_identity(g, s);
    *out = why;
    return -1;
}

void gate_refused_identities(const gate_t *g, void (*fn)(void *arg, const char *id, uint64_t n),
                             void *arg)
{
    for (int i = 0; i < g->nidents; i++)
        fn(arg, g->idents[i].id, g->idents[i].n);
    if (g->nidents >= GATE_IDENTITIES_MAX)
        fn(arg, "other", g->ident_other);
}

/* Template bucket t's tokens for a period from `now`: its rule's per node,
 * or, with the controller holding template buckets (gate_template_cluster()),
 * none for one its table does not list yet (no R; L 0 if limited) and the
 * controller's own for one it lists (left alone). */
static void template_tokens(gate_t *g, const struct gate_tmpl *t, double now)
{
    double p = g->period_s;
    if (g->tmpl_cluster) {
        if (!gate_listed(g, t->b))
            sched_set_tokens(g->s, t->b, 0, t->l == RULES_NO_LIMIT ? SCHED_UNLIMITED : 0,
                             p > 0 ? now + p : INFINITY, now);
        return;
    }
    int64_t r = (int64_t)((double)t->r * p + 0.5);
    int64_t l = t->l == RULES_NO_LIMIT ? SCHED_UNLIMITED : (int64_t)((double)t->l * p + 0.5);
    sched_set_tokens(g->s, t->b, r, l, now + p, now);
}

void gate_template_cluster(gate_t *g, int on)
{
    g->tmpl_cluster = on;
}

void gate_template_period(gate_t *g, double period_s)
{
    g->period_s = period_s > 0 && period_s < 1e6 ? period_s : 0;
    if (!g->period_s)
        return;
    double now = mono_now();
    for (int i = 0; i < g->template_buckets; i++)
        template_tokens(g, &g->tmpl[i], now);
}

uint32_t gate_rules_gen(const gate_t *g)
{
    return g->rules_gen;
}

void gate_refusal(gate_t *g, const rules_subject_t *s, gate_rule_reason_t why)
{
    gate_rule_reason_t out;
    if ((unsigned)why < GATE_RULE_NREASONS)
        refuse(g, s, why, &out);
}

/* Sets *out, returns -1; counts the refusal unless `quiet`. */
static int refuse_if(gate_t *g, const rules_subject_t *s, gate_rule_reason_t why,
                     gate_rule_reason_t *out, int quiet)
{
    if (!quiet)
        return refuse(g, s, why, out);
    *out = why;
    return -1;
}

static int classify(gate_t *g, const rules_subject_t *s, gate_rule_reason_t *why, int quiet)
{
    rules_result_t res;
    rules_action_t a = rules_match(g->rules, s, &res);
    if (res.rule >= 0 && g->rule_matches)
        g->rule_matches[res.rule]++;
    switch (a) {
    case RULES_DENY:
        return refuse_if(g, s, GATE_RULE_DENIED, why, quiet);
    case RULES_NONE:
        return refuse_if(g, s, GATE_RULE_NO_MATCH, why, quiet);
    case RULES_BAD_NAME:
        return refuse_if(g, s, GATE_RULE_BAD_NAME, why, quiet);
    default:
        break;
    }
    size_t n = strlen(res.bucket);
    int b = gate_bucket(g, res.bucket, n, 0);
    if (a == RULES_BUCKET) {
        /* a named bucket: one the table lists; without a table (or with an
         * open one) made on first use, as a prefix would be */
        if (g->table == GATE_TABLE_CLOSED)
            return b >= 0 && gate_listed(g, b) ? b : refuse_if(g, s, GATE_RULE_UNKNOWN_BUCKET, why, quiet);
        if (b < 0 && (b = gate_bucket(g, res.bucket, n, 1)) < 0)
            return refuse_if(g, s, GATE_RULE_UNKNOWN_BUCKET, why, quiet);
        return b;
    }
    if (b >= 0)
        return b;
    if (!g->tmpl && !(g->tmpl = calloc(GATE_TEMPLATE_BUCKETS_MAX, sizeof *g->tmpl)))
        return refuse_if(g, s, GATE_RULE_TEMPLATE_BOUND, why, quiet);
    if (g->template_buckets >= GATE_TEMPLATE_BUCKETS_MAX ||
        (b = gate_bucket(g, res.bucket, n, 1)) < 0)
        return refuse_if(g, s, GATE_RULE_TEMPLATE_BOUND, why, quiet);
    g->tmpl[g->template_buckets++] = (struct gate_tmpl){b, res.reservation, res.limit};
    if (g->period_s > 0 || g->tmpl_cluster)
        template_tokens(g, &g->tmpl[g->template_buckets - 1], mono_now());
    log_debug("bucket '%s' made by rule %d", res.bucket, res.rule);
    return b;
}

int gate_classify(gate_t *g, const rules_subject_t *s, gate_rule_reason_t *why)
{
    return classify(g, s, why, 0);
}

int gate_resolve(gate_t *g, const rules_subject_t *s, gate_rule_reason_t *why)
{
    return classify(g, s, why, 1);
}

const char *const gate_auth_reason_names[GATE_AUTH_NREASONS] = {
    "unauthenticated", "unknown_user", "bad_password", "bad_format"};

void gate_set_auth(gate_t *g, int on)
{
    if (g)
        g->auth = on;
}

void gate_auth_ok(gate_t *g)
{
    if (g)
        g->auth_ok++;
}

void gate_auth_failed(gate_t *g, gate_auth_reason_t why)
{
    if (g && (unsigned)why < GATE_AUTH_NREASONS)
        g->auth_failures[why]++;
}

void gate_set_table(gate_t *g, gate_table_t t)
{
    if (g->table != t)
        g->rules_gen++;
    g->table = t;
}

gate_table_t gate_table(const gate_t *g)
{
    return g->table;
}

int gate_set_listed(gate_t *g, const unsigned char *listed, int n)
{
    unsigned char *p = NULL;
    if (n > 0 && !(p = malloc((size_t)n)))
        return -ENOMEM;
    if (n > 0)
        memcpy(p, listed, (size_t)n);
    free(g->listed);
    g->listed = p;
    g->nlisted = n > 0 ? n : 0;
    g->rules_gen++;
    return 0;
}

int gate_listed(const gate_t *g, int b)
{
    return b >= 0 && b < g->nlisted && g->listed[b];
}

const char *gate_bucket_name(const gate_t *g, int b)
{
    return b >= 0 && b < sched_nbuckets(g->s) ? sched_bucket_name(g->s, b) : NULL;
}

const char *gate_bucket_stats(const gate_t *g, int b, sched_bucket_stats_t *out)
{
    return sched_bucket_stats(g->s, b, out) == 0 ? sched_bucket_name(g->s, b) : NULL;
}

static void on_kick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    gate_t *g = arg;
    g->kick_armed = 0;
    if (!g->stopping) {
        g->take_now = mono_now();
        g->hooks.dispatch(g->front);
        g->take_now = NAN;
    }
}

static void on_pace(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    gate_t *g = arg;
    g->pace_at = INFINITY;
    if (!g->stopping) {
        g->take_now = mono_now();
        g->hooks.dispatch(g->front);
        g->take_now = NAN;
    }
}

static const char *who_name(void *arg, int b)
{
    return gate_bucket_name(arg, b);
}

gate_t *gate_new(struct event_base *base, const gate_config_t *cfg, const gate_hooks_t *hooks,
                 void *front, int *err)
{
    int rc = 0;
    gate_t *g = NULL;
    if (!base || !cfg || !hooks || !hooks->dispatch || !hooks->drain || !hooks->stop ||
        !hooks->idle || !hooks->accept || cfg->outstanding < 1 || cfg->max_conns < 1 ||
        cfg->max_buckets < 0) {
        rc = -EINVAL;
        goto out;
    }
    g = calloc(1, sizeof *g);
    if (!g) {
        rc = -ENOMEM;
        goto out;
    }
    g->cfg = *cfg;
    if (!g->cfg.tag)
        g->cfg.tag = "";
    g->hooks = *hooks;
    g->front = front;
    g->base = base;
    g->take_now = NAN;
    g->kick = evtimer_new(base, on_kick, g);
    g->pace = evtimer_new(base, on_pace, g);
    g->pace_at = INFINITY;
    g->s = sched_new(cfg->policy, cfg->weighted);
    if (!g->kick || !g->pace || !g->s) {
        rc = -ENOMEM;
        goto out;
    }
    conns_config_t cc = {.tag = g->cfg.tag, .max_conns = cfg->max_conns};
    conns_hooks_t ch = {.accept = hooks->accept, .refuse = hooks->refuse, .evict = hooks->evict};
    if (!(g->cn = conns_new(base, &cc, &ch, front, &rc)))
        goto out;
    if (!(g->who = who_new(base, who_name, g, &rc)))
        goto out;
    g->busy_mark = mono_now();
    window_config_t wc;
    window_config_defaults(&wc);
    wc.adaptive = 0;
    wc.start = wc.ceiling = cfg->outstanding;
    wc.floor = 1;
    wc.headroom = 0; /* a fixed window is the operator's: as set (gate_set_window()) */
    if (!(g->win = window_new(&wc, g->busy_mark, &rc)))
        goto out;
out:
    if (rc < 0) {
        gate_destroy(&g);
        if (err)
            *err = rc;
        return NULL;
    }
    return g;
}

who_t *gate_who(gate_t *g)
{
    return g->who;
}

conns_t *gate_conns(gate_t *g)
{
    return g->cn;
}

sched_t *gate_sched(gate_t *g)
{
    return g->s;
}

/* ---- the queues ----------------------------------------------------------- */

int gate_enqueue(gate_t *g, int b, sched_item_t *item)
{
    int rc = sched_enqueue(g->s, b, item);
    g->queued += rc == 0;
    return rc;
}

int gate_remove(gate_t *g, sched_item_t *item)
{
    int rc = sched_remove(g->s, item);
    g->queued -= rc == 0;
    return rc;
}

size_t gate_queued(const gate_t *g)
{
    return g->queued;
}

int gate_charge(gate_t *g, const sched_item_t *item, uint64_t units)
{
    return sched_charge(g->s, item, units);
}

/* ---- the window ----------------------------------------------------------- */

/* Adds the busy time up to `t` (now) since the last mark (if anything was
 * outstanding); returns t. */
static double busy_account(gate_t *g, double t)
{
    if (window_inflight(g->win) > 0)
        g->busy_pending += t - g->busy_mark;
    g->busy_mark = t;
    return t;
}

/* Nothing may be dispatched at `now`: if a paced bucket waits for credit,
 * the pacing timer fires when it returns (moved earlier if needed; one
 * timer for the whole scheduler). */
static void pace_arm(gate_t *g, double now)
{
    double t = sched_next_ready(g->s);
    if (!(t < g->pace_at) || g->stopping)
        return;
    g->pace_at = t;
    long long us = t > now ? (long long)ceil((t - now) * 1e6) : 0; /* never early */
    struct timeval tv = {(time_t)(us / 1000000), (suseconds_t)(us % 1000000)};
    evtimer_add(g->pace, &tv);
}

sched_item_t *gate_take(gate_t *g)
{
    if (window_inflight(g->win) >= window_limit(g->win))
        return NULL;
    double now = isnan(g->take_now) ? mono_now() : g->take_now;
    sched_class_t cls;
    sched_item_t *it = headroom_dispatch(g->s, g->win, now, &cls);
    if (!it) {
        pace_arm(g, now);
        return NULL;
    }
    g->queued--;
    window_take(g->win, busy_account(g, now));
    if (cls == SCHED_CLASS_R)
        window_note_reserved(g->win);
    return it;
}

void gate_done(gate_t *g)
{
    gate_done_at(g, INFINITY);
}

void gate_done_at(gate_t *g, double at)
{
    double now = busy_account(g, mono_now());
    window_done(g->win, at < now ? at : now);
    sched_note_completion(g->s, 1, g->busy_pending);
    g->busy_pending = 0;
}

/* Not a backend round trip: leaves the window's figures alone. */
void gate_done_inline(gate_t *g)
{
    window_untake(g->win, g->busy_mark);
    sched_note_completion(g->s, 1, 0);
}

void gate_untake(gate_t *g)
{
    window_untake(g->win, g->busy_mark);
}

void gate_item_done(gate_t *g, const sched_item_t *item)
{
    sched_note_done(g->s, item->origin);
}

double gate_base_latency(const gate_t *g)
{
    window_stats_t ws;
    window_stats(g->win, &ws);
    return ws.base;
}

int gate_inflight(const gate_t *g)
{
    return window_inflight(g->win);
}

int gate_set_window(gate_t *g, const window_config_t *cfg)
{
    int rc = 0;
    double now = mono_now();
    window_config_t wc = *cfg;
    wc.start = window_limit(g->win);
    window_t *w = window_new(&wc, now, &rc);
    if (!w)
        return rc;
    for (int i = window_inflight(g->win); i > 0; i--)
        window_take(w, now);
    window_destroy(&g->win);
    g->win = w;
    return 0;
}

/* Asks for a dispatch at the end of this pass of the event loop rather
 * than now: every request read in one pass (one epoll_wait) then goes to
 * the backend together, as one batch.  After completions (next_pass), the
 * dispatch waits for the next pass instead, after the requests that
 * arrived meanwhile were read: with inline backend calls, dispatching again
 * in the same pass would serve everything already queued before reading
 * anything new, so a bucket with R-tokens whose clients answer quickly
 * would lose its priority over queued L-token work.  The order of dispatch
 * is still the scheduler's alone.  A next-pass dispatch with nothing
 * queued is not asked for: it would find nothing, and whatever arrives
 * asks for its own (the zero timer cost a pass of the loop, an epoll_wait
 * and a clock read, after every batch's completions). */
void gate_request_dispatch(gate_t *g, int next_pass)
{
    static const struct timeval now = {0, 0};
    if (g->kick_armed || g->stopping || (next_pass && g->queued == 0))
        return;
    g->kick_armed = 1;
    if (next_pass)
        evtimer_add(g->kick, &now);
    else
        event_active(g->kick, EV_TIMEOUT, 0);
}

/* ---- buckets and tokens --------------------------------------------------- */

int gate_bucket(gate_t *g, const char *name, size_t len, int make)
{
    int b = sched_find_bucket(g->s, name, len);
    if (b >= 0)
        return b;
    if (!make)
        return -ENOENT;
    if (len > NAMES_MAX)
        return -EINVAL;
    if (g->cfg.max_buckets > 0 && sched_nbuckets(g->s) >= g->cfg.max_buckets)
        return -ENOMEM;
    char copy[NAMES_MAX + 1];
    memcpy(copy, name, len);
    copy[len] = '\0';
    return sched_add_bucket(g->s, copy, 1);
}

int gate_set_weight(gate_t *g, int b, uint32_t weight)
{
    return sched_set_weight(g->s, b, weight);
}

int gate_set_tokens(gate_t *g, const char *name, int64_t r, int64_t l)
{
    int b = gate_bucket(g, name, strlen(name), 1);
    if (b < 0)
        return b;
    int rc = sched_set_tokens(g->s, b, r, l, INFINITY, 0); /* a test hook: unpaced */
    if (rc == 0)
        gate_kick(g);
    return rc;
}

void gate_set_policy(gate_t *g, sched_policy_t policy)
{
    sched_set_policy(g->s, policy);
    gate_kick(g);
}

int gate_set_pacing(gate_t *g, int on, double burst_s, sched_order_t r_order)
{
    int rc = sched_set_pacing(g->s, on, burst_s);
    return rc < 0 ? rc : sched_set_r_order(g->s, r_order);
}

void gate_period_start(gate_t *g)
{
    sched_period_start(g->s);
}

void gate_kick(gate_t *g)
{
    if (g->stopping)
        return;
    if (g->cfg.defer)
        gate_request_dispatch(g, 0);
    else
        g->hooks.dispatch(g->front);
}

/* ---- stopping ------------------------------------------------------------- */

void gate_check_stopped(gate_t *g)
{
    if (gate_inflight(g) > 0 || !g->hooks.idle(g->front))
        return;
    log_info("%severy request answered; stopping", g->cfg.tag);
    event_base_loopexit(g->base, NULL);
}

static void on_stop_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    gate_t *g = arg;
    log_warn("%sshutdown grace period over; %d IOs in flight, closing", g->cfg.tag,
             gate_inflight(g));
    event_base_loopexit(g->base, NULL);
}

void gate_shutdown(gate_t *g)
{
    if (g->stopping)
        return;
    g->stopping = 1;
    conns_stop(g->cn, 0);
    size_t n = sched_drain(g->s, g->hooks.drain, g->front);
    g->queued = 0;
    log_info("%sshutting down: %zu queued requests failed, %d in flight", g->cfg.tag, n,
             gate_inflight(g));
    g->hooks.stop(g->front);
    struct timeval tv = {SHUTDOWN_GRACE_SEC, 0};
    g->stop_timer = evtimer_new(g->base, on_stop_timer, g);
    if (g->stop_timer)
        evtimer_add(g->stop_timer, &tv);
    gate_check_stopped(g);
}

int gate_stopping(const gate_t *g)
{
    return g->stopping;
}

void gate_close(gate_t *g)
{
    if (!g)
        return;
    g->stopping = 1;
    conns_stop(g->cn, 1);
}

void gate_destroy(gate_t **gp)
{
    if (!gp || !*gp)
        return;
    gate_t *g = *gp;
    rules_destroy(&g->rules);
    free(g->rule_matches);
    free(g->tmpl);
    if (g->s)
        sched_drain(g->s, g->hooks.drain, g->front);
    sched_destroy(&g->s);
    conns_destroy(&g->cn);
    who_destroy(&g->who);
    if (g->stop_timer)
        event_free(g->stop_timer);
    if (g->kick)
        event_free(g->kick);
    if (g->pace)
        event_free(g->pace);
    window_destroy(&g->win);
    free(g->listed);
    free(g);
    *gp = NULL;
}
