/* nodes.c - bqos-controller's node endpoint: receives the nodes' messages on the ROUTER socket and sends them welcomes, tokens, heartbeats and errors. */
#include "controller/daemon/nodes.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include <time.h>

#include "common/log.h"
#include "common/mono.h"
#include "controller/push.h"

/* Nonzero if a warning of `kind` may be logged now; *quiet receives how
 * many were suppressed since the last one logged. */
static int warn_ok(nodes_t *ns, int kind, uint64_t *quiet)
{
    nodes_warn_t *w = &ns->warn[kind];
    double now = mono_now();
    w->tokens += now - w->last; /* the first call fills the bucket */
    if (w->tokens > 10)
        w->tokens = 10;
    w->last = now;
    if (w->tokens < 1) {
        w->quiet++;
        return 0;
    }
    w->tokens -= 1;
    *quiet = w->quiet;
    w->quiet = 0;
    return 1;
}

void nodes_init(nodes_t *ns, void *sock, ctrl_t *ctrl, pclock_t *clk, split_t *cur,
                const nodes_hooks_t *hooks)
{
    *ns = (nodes_t){.sock = sock, .ctrl = ctrl, .clk = clk, .cur = cur, .hooks = *hooks};
    proto_msg_init(&ns->in);
    proto_enc_init(&ns->enc);
}

void nodes_clear(nodes_t *ns)
{
    proto_msg_clear(&ns->in);
    proto_enc_clear(&ns->enc);
    for (int i = 0; i < ns->npeers; i++) {
        push_grants_clear(&ns->peers[i].grants);
        free(ns->peers[i].who);
    }
    free(ns->peers);
    ns->peers = NULL;
    ns->npeers = 0;
    free(ns->unknown);
    ns->unknown = NULL;
    ns->nunknown = ns->capunknown = 0;
    rules_destroy(&ns->rules);
    free(ns->rules_text);
    ns->rules_text = NULL;
}

#define UNKNOWN_MAX 4096 /* processes kept for nodes_hail_unknown() */

/* Notes the sender of the message in hand (ns->id), an unregistered process
 * named `name` that wrote while sends are fenced (once per routing id; at
 * most UNKNOWN_MAX, then it waits for its next report). */
static void note_unknown(nodes_t *ns, const char *name)
{
    for (int i = 0; i < ns->nunknown; i++)
        if (ns->unknown[i].idlen == ns->idlen && memcmp(ns->unknown[i].id, ns->id, ns->idlen) == 0)
            return;
    if (ns->nunknown == UNKNOWN_MAX)
        return;
    if (ns->nunknown == ns->capunknown) { /* doubling: a flood of unknown
                                             processes costs O(n) copying */
        int cap = ns->capunknown ? 2 * ns->capunknown : 16;
        nodes_unknown_t *v = realloc(ns->unknown, (size_t)cap * sizeof *v);
        if (!v)
            return;
        ns->unknown = v;
        ns->capunknown = cap;
    }
    nodes_unknown_t *u = &ns->unknown[ns->nunknown++];
    memcpy(u->id, ns->id, ns->idlen);
    u->idlen = ns->idlen;
    snprintf(u->name, sizeof u->name, "%s", name);
}

/* Node `node`'s slot, grown as nodes register; NULL if out of memory or
 * node < 0. */
static nodes_peer_t *peer_at(nodes_t *ns, int node)
{
    if (node < 0)
        return NULL;
    if (node >= ns->npeers) {
        int n = node + 16;
        nodes_peer_t *v = realloc(ns->peers, (size_t)n * sizeof *v);
        if (!v)
            return NULL;
        memset(v + ns->npeers, 0, (size_t)(n - ns->npeers) * sizeof *v);
        ns->peers = v;
        ns->npeers = n;
    }
    return &ns->peers[node];
}

/* Registered node `node` gave its clock in m (issue 18, defect 3: one
 * node, or a liar among many, must not move the controller's clock).  The
 * reading is remembered; if it is not ours and a strict majority of the
 * registered nodes with a clock agree on it, the loop may adopt it.  The
 * count runs only when a node's clock differs from ours (after a restart,
 * or for a standby), not on every report. */
static void note_clock(nodes_t *ns, const proto_msg_t *m, int node, double now)
{
    nodes_peer_t *p = peer_at(ns, node);
    if (!p)
        return;
    p->clock = pclock_reading(ns->clk, m->period, m->interval, m->remaining_ms, now);
    pclock_reading_t ours = {ns->clk->period, ns->clk->period_start + ns->clk->period_s};
    if (!p->clock.period || pclock_same(ns->clk, &p->clock, &ours))
        return;
    int votes = 0, voters = 0;
    for (int i = 0; i < ns->npeers; i++) {
        if (!ns->peers[i].clock.period || !ctrl_node_up(ns->ctrl, i))
            continue;
        voters++;
        votes += pclock_same(ns->clk, &ns->peers[i].clock, &p->clock);
    }
    if (2 * votes > voters)
        ns->hooks.adopt(ns->hooks.arg, &p->clock, now);
}

/* Keeps node `node`'s who text (bounded by the decoder: PROTO_WHO_MAX). */
static void on_who(nodes_t *ns, const proto_msg_t *m, int node, double now)
{
    nodes_peer_t *p = peer_at(ns, node);
    char *t = p ? malloc(m->who_len + 1) : NULL;
    if (!t)
        return;
    memcpy(t, m->who_text, m->who_len);
    t[m->who_len] = '\0';
    free(p->who);
    p->who = t;
    p->who_len = m->who_len;
    p->who_at = now;
}

const char *nodes_who(const nodes_t *ns, int node, double *at)
{
    const nodes_peer_t *p = node >= 0 && node < ns->npeers ? &ns->peers[node] : NULL;
    if (!p || !p->who)
        return NULL;
    if (at)
        *at = p->who_at;
    return p->who;
}

double nodes_last_msg(const nodes_t *ns, int node)
{
    return node >= 0 && node < ns->npeers ? ns->peers[node].last_msg : 0;
}

int nodes_fallback(const nodes_t *ns, int node, uint64_t *fallbacks)
{
    const nodes_peer_t *p = node >= 0 && node < ns->npeers ? &ns->peers[node] : NULL;
    *fallbacks = p ? p->fallbacks : 0;
    return p && p->fallback;
}

/* ---- sending ------------------------------------------------------------- */

/* Encodes (timed as encode) and sends (timed as send) `m` to node `name`
 * at routing id `id` (`idlen` bytes: the name, or the name and its
 * process's instance tag, proto_node_id()). */
static int send_id(nodes_t *ns, const void *id, size_t idlen, const char *name, proto_msg_t *m)
{
    double t0 = mono_now();
    if (ns->hooks.may_send && !ns->hooks.may_send(ns->hooks.arg, t0)) {
        ns->fenced++; /* fail closed: a standby or deposed leader is silent */
        return -EPERM;
    }
    m->epoch = ns->epoch;
    m->lease = (uint32_t)ctrl_config(ns->ctrl)->fallback_lease; /* with timing only */
    if (ns->sg) { /* the cluster's shards, as last read (with timing only) */
        m->shards_k = (uint32_t)ns->sg->k;
        m->shards_gen = ns->sg->gen;
        m->shards_next = (uint32_t)ns->sg->next_k;
        m->shards_from = (uint64_t)ns->sg->from_ms;
    }
    snprintf(m->node, sizeof m->node, "%s", name);
    int rc = proto_encode(m, &ns->enc);
    double t1 = mono_now();
    ns->cur->encode += t1 - t0;
    uint64_t q;
    if (rc < 0) {
        if (warn_ok(ns, NODES_WARN_ENCODE, &q))
            log_error("cannot encode %s for %s: %s (%llu such errors not logged)",
                      proto_type_str(m->type), name, strerror(-rc), (unsigned long long)q);
        return rc;
    }
    if (zmq_send(ns->sock, id, idlen, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0) {
        rc = -zmq_errno();
    } else {
        for (size_t i = 0; i < ns->enc.nframes; i++) {
            int more = i + 1 < ns->enc.nframes ? ZMQ_SNDMORE : 0;
            if (zmq_send(ns->sock, ns->enc.data[i], ns->enc.len[i], more | ZMQ_DONTWAIT) < 0) {
                rc = -zmq_errno();
                break;
            }
        }
    }
    ns->cur->send += mono_now() - t1;
    if (rc < 0) {
        ns->send_failed++;
        log_debug("send %s to %s failed: %s", proto_type_str(m->type), name, zmq_strerror(-rc));
    }
    return rc;
}

/* Sends `m` to node `name` running as process `instance` (0: not said),
 * at the routing id of that process. */
static int send_to(nodes_t *ns, const char *name, uint64_t instance, proto_msg_t *m)
{
    unsigned char id[PROTO_ID_MAX];
    size_t n = proto_node_id(name, instance, id);
    return send_id(ns, id, n, name, m);
}

/* Sends `m` to registered node `node`, at the routing id of the process
 * it registered. */
static int send_node(nodes_t *ns, int node, proto_msg_t *m)
{
    ctrl_node_info_t ni;
    if (ctrl_node_info(ns->ctrl, node, &ni) < 0)
        return -EINVAL;
    return send_to(ns, ni.name, ni.instance, m);
}

/* Answers the sender of the message in hand (ns->id) with an error. */
static int send_error(nodes_t *ns, const char *node, const char *code, const char *text)
{
    proto_msg_t m;
    proto_msg_init(&m);
    m.type = PROTO_ERROR;
    snprintf(m.code, sizeof m.code, "%s", code);
    snprintf(m.text, sizeof m.text, "%s", text ? text : "");
    return send_id(ns, ns->id, ns->idlen, node, &m);
}

/* ---- names in parts -------------------------------------------------------- */

/* This thread's CPU seconds (the loop's own cost of parts, apart from
 * what a busy host adds to the wall clock). */
static double thread_cpu(void)
{
    struct timespec ts;
    return clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0 ? ts.tv_sec + ts.tv_nsec / 1e9 : 0;
}

#define PART_SHADOW_MAX 2048 /* bytes of a part's shadow list (the header's
                                4 KiB hold it and the rest) */

/* The shadow list `all` (the whole table's, ascending) cut to the indexes
 * [from, from + *k), made relative to `from`, into buf[PART_SHADOW_MAX];
 * *k shrinks to end before an index that does not fit (at least 1 stays:
 * an index takes at most 8 bytes). */
static void part_shadow(const char *all, size_t from, size_t *k, char *buf)
{
    size_t n = 0;
    buf[0] = '\0';
    for (const char *p = all ? all : ""; *p;) {
        char *end;
        unsigned long long v = strtoull(p, &end, 10);
        if (end == p || v >= from + *k)
            break;
        if (v >= from) {
            char t[24];
            int l = snprintf(t, sizeof t, "%s%llu", n ? "," : "", v - from);
            if (n + (size_t)l + 1 > PART_SHADOW_MAX) {
                *k = v - from;
                break;
            }
            memcpy(buf + n, t, (size_t)l + 1);
            n += (size_t)l;
        }
        p = *end == ',' ? end + 1 : end;
    }
}

/* Makes m (a names or welcome message) carry the part of our table from
 * `from` on, its shadow list in shbuf[PART_SHADOW_MAX].  Returns how many
 * names it carries; the whole table (no names_of) when it all fits and
 * `from` is 0. */
static size_t fill_part(nodes_t *ns, proto_msg_t *m, size_t from, char *shbuf)
{
    const char *const *names;
    size_t n;
    m->table = ctrl_table(ns->ctrl, &names, &n);
    size_t k = proto_part_len(names, n, from);
    part_shadow(ctrl_table_shadow(ns->ctrl), from, &k, shbuf);
    m->has_names = 1;
    m->names = (const char **)names + from;
    m->nnames = k;
    m->has_weights = 1;
    m->weights = ctrl_table_weights(ns->ctrl) + from;
    m->shadow = shbuf;
    m->names_at = from;
    m->names_of = from == 0 && k == n ? 0 : n;
    return k;
}

/* Sends registered node `node` (peer p) the next parts of our table, at
 * most `budget`; returns how many went.  Restarts at 0 for a new table
 * generation, and from what the node acknowledged when that has not moved
 * for NODES_PART_STALL rounds (a part lost to a full queue). */
static int send_parts(nodes_t *ns, int node, nodes_peer_t *p, int budget)
{
    size_t n;
    uint32_t gen = ctrl_table(ns->ctrl, NULL, &n);
    if (p->tx_gen != gen) {
        p->tx_gen = gen;
        p->tx_next = p->tx_acked = 0;
        p->tx_idle = 0;
    }
    if (p->tx_next > p->tx_acked && ++p->tx_idle >= NODES_PART_STALL) {
        p->tx_next = p->tx_acked; /* go back */
        p->tx_idle = 0;
    }
    int sent = 0;
    while (sent < budget && p->tx_next < n && p->tx_next - p->tx_acked < NODES_PART_WINDOW) {
        proto_msg_t m;
        proto_msg_init(&m);
        m.type = PROTO_NAMES;
        char sh[PART_SHADOW_MAX];
        size_t k = fill_part(ns, &m, p->tx_next, sh);
        if (m.names_of == 0)
            m.names_of = n; /* a names message is always a part */
        if (k == 0 || send_node(ns, node, &m) < 0)
            break;
        p->tx_next += k;
        sent++;
        ns->parts_sent++;
    }
    return sent;
}

/* A registered parts node's report or heartbeat said how much of our table
 * it holds: a partial table (peer_names) moves the parts on and is not the
 * table held for ctrl (m->peer_table cleared); a whole one is.  Returns
 * nonzero if the acknowledgement moved (more parts may go now). */
static int note_ack(nodes_peer_t *p, proto_msg_t *m)
{
    if (!p || !p->parts || !m->has_peer_names)
        return 0;
    int moved = 0;
    if (m->peer_table && m->peer_table == p->tx_gen && m->peer_names > p->tx_acked) {
        p->tx_acked = (size_t)m->peer_names;
        p->tx_idle = 0;
        if (p->tx_next < p->tx_acked)
            p->tx_next = p->tx_acked;
        moved = 1;
    }
    m->peer_table = 0;
    return moved;
}

/* A part of a registered node's table (a names message). */
static void on_names(nodes_t *ns, const proto_msg_t *m, int node)
{
    nodes_peer_t *p = peer_at(ns, node);
    double t0 = mono_now(), c0 = thread_cpu();
    int rc = ctrl_node_table_part(ns->ctrl, node, m->table, (size_t)m->names_at, m->names,
                                  m->nnames);
    if (rc == 0 && m->names_at == 0 && m->names_of > m->nnames) /* a new table of its */
        ctrl_node_table_reserve(ns->ctrl, node, (size_t)m->names_of);
    double took = mono_now() - t0, cpu = thread_cpu() - c0;
    uint64_t q;
    if (rc == 0) {
        ns->parts_taken++;
        if (p) {
            p->rx_parts++;
            if (took > p->rx_max)
                p->rx_max = took;
            if (cpu > p->rx_cpu)
                p->rx_cpu = cpu;
        }
        if (m->names_at + m->nnames == m->names_of)
            log_info("node %s: its table is whole (%llu names, in parts; %llu parts, %.1f s "
                     "after its hello, the longest took %.2f ms of the loop, %.2f ms of CPU)",
                     m->node, (unsigned long long)m->names_of,
                     (unsigned long long)(p ? p->rx_parts : 0),
                     p ? mono_now() - p->t_hello : 0, p ? p->rx_max * 1000 : 0,
                     p ? p->rx_cpu * 1000 : 0);
    } else if (rc == -ESTALE) {
        ns->parts_stale++; /* out of order: our acknowledgement says where */
    } else if (rc == -E2BIG) {
        if (p && !p->rx_capped) {
            const ctrl_config_t *cc = ctrl_config(ns->ctrl);
            size_t nb;
            ctrl_table(ns->ctrl, NULL, &nb);
            char text[sizeof m->text];
            snprintf(text, sizeof text, "%zu names held: at most the %zu buckets plus %d "
                     "(--max-names); the rest get no tokens", ctrl_node_table_size(ns->ctrl, node),
                     nb, cc->max_names);
            if (warn_ok(ns, NODES_WARN_TABLE, &q))
                log_warn("node %s: %s (%llu such not logged)", m->node, text,
                         (unsigned long long)q);
            send_error(ns, m->node, "too_many_names", text);
            p->rx_capped = 1;
        }
    } else {
        proto_stats_note(&ns->pst, PROTO_E_NAMES);
        if (warn_ok(ns, NODES_WARN_TABLE, &q))
            log_warn("node %s: a part of its table refused: %s (%llu such not logged)", m->node,
                     rc == -EINVAL ? "a name it declared already" : strerror(-rc),
                     (unsigned long long)q);
    }
}

void nodes_hail_unknown(nodes_t *ns)
{
    for (int i = 0; i < ns->nunknown; i++) {
        const nodes_unknown_t *u = &ns->unknown[i];
        if (ctrl_node_find(ns->ctrl, u->name) >= 0)
            continue;
        proto_msg_t m;
        proto_msg_init(&m);
        m.type = PROTO_ERROR;
        snprintf(m.code, sizeof m.code, "unknown_node");
        snprintf(m.text, sizeof m.text, "say hello first");
        send_id(ns, u->id, u->idlen, u->name, &m);
    }
    ns->nunknown = 0;
}

/* Sends node `node` the rule list last taken (nodes_push_rules()). */
static void send_rules(nodes_t *ns, int node)
{
    proto_msg_t r;
    proto_msg_init(&r);
    r.type = PROTO_RULES;
    r.rules_version = ns->rules_version;
    r.rules_text = ns->rules_text;
    r.rules_len = strlen(ns->rules_text);
    if (send_node(ns, node, &r) == 0)
        ns->rules_sent++;
}

int nodes_push_rules(nodes_t *ns)
{
    const rules_t *cur = ctrl_rules(ns->ctrl);
    if (ns->rules_text && (cur ? ns->rules && rules_equal(cur, ns->rules) : !ns->rules))
        return 0;
    int had = ns->rules_text != NULL; /* the nodes were told a list */
    rules_t *copy = cur ? rules_dup(cur) : NULL;
    char *text = cur ? rules_dumps(cur) : strdup("");
    if ((cur && !copy) || !text || strlen(text) > PROTO_RULES_MAX) {
        if (text && strlen(text) > PROTO_RULES_MAX)
            log_error("the rule list is %zu bytes: more than a rules message holds (%u); not "
                      "pushed", strlen(text), PROTO_RULES_MAX);
        rules_destroy(&copy);
        free(text);
        return -ENOMEM;
    }
    rules_destroy(&ns->rules);
    free(ns->rules_text);
    ns->rules = copy;
    ns->rules_text = text;
    ns->rules_version++;
    if (ns->rules_version > 1 || cur)
        log_info("rules: pushing version %llu (%zu rules) to the nodes",
                 (unsigned long long)ns->rules_version, rules_count(cur));
    for (int i = 0; i < ctrl_nnodes(ns->ctrl) && (cur || had); i++) {
        ctrl_node_info_t ni;
        if (ctrl_node_info(ns->ctrl, i, &ni) == 0 && ni.up)
            send_rules(ns, i);
    }
    return 0;
}

void nodes_push(nodes_t *ns, const ctrl_result_t *res, double now)
{
    if (ns->hooks.may_send && !ns->hooks.may_send(ns->hooks.arg, now)) {
        ns->fenced++;
        return;
    }
    nodes_push_rules(ns);
    int nn = ctrl_nnodes(ns->ctrl), parts = NODES_PARTS_ROUND;
    for (int k = 0; k < nn && parts > 0; k++) { /* parts first, in turn */
        int i = (ns->part_rr + k) % nn;
        nodes_peer_t *p = peer_at(ns, i);
        if (!p || !p->parts || !ctrl_node_up(ns->ctrl, i))
            continue;
        if (ctrl_node_needs_names(ns->ctrl, i)) {
            double t0 = mono_now(), c0 = thread_cpu();
            int sent = send_parts(ns, i, p, parts < NODES_PARTS_NODE ? parts : NODES_PARTS_NODE);
            double took = mono_now() - t0, cpu = thread_cpu() - c0;
            parts -= sent;
            p->tx_parts += (uint64_t)sent;
            if (took > p->tx_max)
                p->tx_max = took;
            if (cpu > p->tx_cpu)
                p->tx_cpu = cpu;
        } else if (p->tx_told != p->tx_gen && p->tx_gen && p->tx_parts) {
            size_t n;
            ctrl_table(ns->ctrl, NULL, &n);
            ctrl_node_info_t ni;
            ctrl_node_info(ns->ctrl, i, &ni);
            log_info("node %s holds our table (%zu names; %llu parts after the welcome, %.1f s "
                     "after its hello, the longest round of parts took %.2f ms of the loop, "
                     "%.2f ms of CPU)",
                     ni.name, n, (unsigned long long)p->tx_parts, mono_now() - p->t_hello,
                     p->tx_max * 1000, p->tx_cpu * 1000);
            p->tx_told = p->tx_gen;
        }
    }
    ns->part_rr = nn ? (ns->part_rr + 1) % nn : 0;
    for (int i = 0; i < nn; i++) {
        proto_msg_t m;
        proto_msg_init(&m);
        push_to_t to;
        nodes_peer_t *p = peer_at(ns, i);
        if (push_msg(ns->ctrl, i, res->skipped, p ? &p->grants : NULL, &m, &to) < 0)
            continue; /* down */
        if (p && p->parts) { /* our table goes in parts; we say how much of its we hold */
            m.has_names = m.has_weights = 0;
            m.shadow = NULL;
            m.has_peer_names = 1;
            m.peer_names = ctrl_node_table_size(ns->ctrl, i);
        }
        pclock_fill_timing(ns->clk, &m, now);
        if (p && p->want_full && p->sparse) {
            m.full = 1; /* until a full report comes */
            ns->full_asked++;
        }
        if (m.type == PROTO_HEARTBEAT) {
            ns->push_heartbeats++;
        } else {
            ns->push_tokens++;
            ns->records_sent += m.count;
        }
        send_to(ns, to.name, to.instance, &m);
    }
}

/* ---- receiving ----------------------------------------------------------- */

/* A node said which epoch it obeys (hello, report).  Taken from any
 * sender that passed authentication, registered or not: a fresh leader of
 * an emptied etcd must hear nodes it does not know yet, which ignore its
 * unknown_node answers while its epoch is below theirs. */
static void note_follows(nodes_t *ns, const proto_msg_t *m)
{
    if (m->follows > ns->follows)
        ns->follows = m->follows;
}

/* Nonzero if the message in hand comes from the process registered as
 * `node` (a node that gave no instance matches any routing id of its
 * name). */
static int from_registered(const nodes_t *ns, const proto_msg_t *m, int node)
{
    ctrl_node_info_t ni;
    if (ctrl_node_info(ns->ctrl, node, &ni) < 0)
        return 0;
    if (!ni.instance)
        return 1;
    uint32_t tag = 0;
    return proto_node_id_split(ns->id, ns->idlen, m->node, &tag) == 1 &&
           tag == proto_instance_tag(ni.instance);
}

static int known_node(const char *node, void *arg)
{
    return ctrl_node_find(((nodes_t *)arg)->ctrl, node) >= 0;
}

/* A hello under a name that is up as another process: refused, so that
 * the first node keeps its tokens and its connection (its routing id
 * differs: proto_node_id()).  Logged at most once per 10 s. */
static void refuse_duplicate(nodes_t *ns, const proto_msg_t *m, uint64_t instance, double now)
{
    ns->dup_suppressed++;
    if (now >= ns->dup_log_next) {
        int idx = ctrl_node_find(ns->ctrl, m->node);
        ctrl_node_info_t ni = {0};
        ctrl_node_info(ns->ctrl, idx, &ni);
        log_warn("node name '%s' is up as process %016llx: refused a hello from another "
                 "process (%016llx) under the same name (%llu refused since the last such "
                 "line); give each node a unique --name",
                 m->node, (unsigned long long)ni.instance, (unsigned long long)instance,
                 (unsigned long long)ns->dup_suppressed);
        ns->dup_suppressed = 0;
        ns->dup_log_next = now + 10;
    }
    char text[sizeof m->text];
    snprintf(text, sizeof text, "another running node is registered as '%.60s'; "
             "choose a unique --name", m->node);
    send_error(ns, m->node, "duplicate_name", text);
}

static void on_hello(nodes_t *ns, proto_msg_t *m, double now)
{
    /* The process's instance counts only if its routing id says the same
     * (else the node could not be addressed as that process). */
    uint32_t tag = 0;
    int tagged = proto_node_id_split(ns->id, ns->idlen, m->node, &tag);
    uint64_t instance = tagged == 1 && tag == proto_instance_tag(m->instance) ? m->instance : 0;
    int parts = m->parts || m->names_of; /* a first part means it does */
    size_t first = m->nnames, nb;
    ctrl_table(ns->ctrl, NULL, &nb);
    size_t most = nb + (size_t)ctrl_config(ns->ctrl)->max_names;
    if (parts && first > most)
        first = most; /* a parts node's table is never refused for its size:
                         we hold what we may and say so with our peer_names
                         (its next parts are answered too_many_names) */
    int node = ctrl_node_hello(ns->ctrl, m->node, instance, m->capacity, m->table, m->names,
                               first);
    if (node == -EEXIST) {
        refuse_duplicate(ns, m, instance, now);
        return;
    }
    if (node < 0) {
        const ctrl_config_t *cc = ctrl_config(ns->ctrl);
        char text[sizeof m->text];
        const char *code = "bad_message";
        if (node == -E2BIG) {
            code = "too_many_names";
            snprintf(text, sizeof text, "%zu bucket names: at most the %zu buckets plus %d "
                     "(--max-names)", m->nnames, nb, cc->max_names);
        } else if (node == -EUSERS) {
            code = "too_many_nodes";
            snprintf(text, sizeof text, "%d nodes registered: at most %d (--max-nodes)",
                     ctrl_nnodes(ns->ctrl), cc->max_nodes);
        } else {
            snprintf(text, sizeof text, "registration failed: %s", strerror(-node));
        }
        uint64_t q;
        if (warn_ok(ns, NODES_WARN_HELLO, &q))
            log_warn("hello from %s refused: %s (%llu such refusals not logged)", m->node, text,
                     (unsigned long long)q);
        send_error(ns, m->node, code, text);
        return;
    }
    if (m->names_of > first) /* its parts append without copying */
        ctrl_node_table_reserve(ns->ctrl, node, (size_t)m->names_of);
    ctrl_node_set_leases(ns->ctrl, node, m->leases);
    ctrl_node_set_sparse(ns->ctrl, node, m->sparse);
    nodes_peer_t *p = peer_at(ns, node);
    if (p) {
        p->last_msg = now;
        p->seq = m->seq;
        p->want_full = 0; /* its first report after the welcome is full */
        p->sparse = m->sparse;
        push_grants_session(&p->grants, m->renew); /* a new session */
        free(p->who); /* its who set starts again (a slot may be another node's now) */
        p->who = NULL;
        p->who_len = 0;
        p->parts = parts;
        p->t_hello = now;
        p->tx_told = 0;
        p->rx_parts = p->tx_parts = 0;
        p->rx_max = p->tx_max = p->rx_cpu = p->tx_cpu = 0;
        p->tx_gen = 0; /* our table goes from 0 */
        p->tx_next = p->tx_acked = 0;
        p->tx_idle = 0;
        p->rx_capped = 0;
    }
    /* Only now, registered, may its clock count (a refused process's says
     * nothing), before the welcome is timed. */
    note_clock(ns, m, node, now);
    log_info("node %s registered (%zu buckets%s, capacity %llu IOs/s)", m->node,
             (size_t)(m->names_of ? m->names_of : m->nnames), m->names_of ? ", names in parts" : "",
             (unsigned long long)m->capacity);
    const char *const *names;
    size_t n;
    proto_msg_t w;
    proto_msg_init(&w);
    w.type = PROTO_WELCOME;
    pclock_fill_timing(ns->clk, &w, mono_now());
    w.peer_table = m->table;
    char sh[PART_SHADOW_MAX];
    if (p && parts) { /* the first part (or the whole table if it fits one) */
        w.parts = 1;
        w.has_peer_names = 1;
        w.peer_names = ctrl_node_table_size(ns->ctrl, node);
        size_t k = fill_part(ns, &w, 0, sh);
        p->tx_gen = w.table;
        p->tx_next = k;
    } else {
        w.table = ctrl_table(ns->ctrl, &names, &n);
        w.has_names = 1;
        w.nnames = n;
        w.names = (const char **)names;
        w.has_weights = 1;
        w.weights = ctrl_table_weights(ns->ctrl);
        w.shadow = ctrl_table_shadow(ns->ctrl);
    }
    w.sparse = 1; /* we take sparse reports */
    w.renew = p && m->renew; /* changed grants only, if it can */
    /* the rules in force follow the welcome, which says so (issue 27): a
     * welcome without "rules" tells the node the controller has none */
    int rules = nodes_push_rules(ns) == 0 && ns->rules;
    w.rules_version = rules ? ns->rules_version : 0;
    send_node(ns, node, &w);
    if (rules)
        send_rules(ns, node);
}

/* The node's report says whether it is in fallback (it heard no tokens or
 * heartbeat from the leader for its --silence) and how often it was:
 * logged at warn on each change, so that this log shows what the nodes
 * did, and counted. */
static void note_fallback(nodes_t *ns, const proto_msg_t *m, int node)
{
    nodes_peer_t *p = peer_at(ns, node);
    if (!p)
        return;
    if (m->fallbacks < p->fallbacks) /* another process under the name */
        p->fallback = 0;
    uint64_t q;
    if (m->fallback && !p->fallback) {
        ns->node_fallbacks++;
        if (warn_ok(ns, NODES_WARN_FALLBACK, &q))
            log_warn("node %s reports it is in fallback (its fallback %llu): it heard no tokens or "
                 "heartbeat for its --silence and enforces its --fallback policy",
                 m->node, (unsigned long long)m->fallbacks);
    } else if (!m->fallback && p->fallback) {
        ns->node_resumes++;
        if (warn_ok(ns, NODES_WARN_FALLBACK, &q))
            log_warn("node %s reports it left fallback: it follows the controller's tokens again",
                 m->node);
    }
    p->fallback = m->fallback;
    p->fallbacks = m->fallbacks;
}

static void on_report(nodes_t *ns, proto_msg_t *m, int node, double now)
{
    note_fallback(ns, m, node);
    if (m->has_names) {
        int rc = ctrl_node_table(ns->ctrl, node, m->table, m->names, m->nnames);
        if (rc < 0) {
            uint64_t q;
            if (warn_ok(ns, NODES_WARN_TABLE, &q))
                log_error("node %s: cannot take its table: %s (%llu such errors not logged)",
                          m->node, strerror(-rc), (unsigned long long)q);
            if (rc == -E2BIG)
                send_error(ns, m->node, "too_many_names", "more bucket names than --max-names");
            return;
        }
    }
    nodes_peer_t *p = peer_at(ns, node);
    int rc;
    if (p && m->regrant && p->grants.on)
        push_grants_regrant(&p->grants); /* it renewed nothing: send every grant */
    if (m->sparse) {
        ns->reports_sparse++;
        rc = ctrl_node_report_sparse(ns->ctrl, node, m->period, m->interval, m->table,
                                     m->peer_table, m->completions, m->busy_seconds, m->report,
                                     m->count);
    } else {
        ns->reports_full++;
        if (p)
            p->want_full = 0;
        rc = ctrl_node_report(ns->ctrl, node, m->period, m->interval, m->table, m->peer_table,
                              m->completions, m->busy_seconds, m->report, m->count);
    }
    if (rc == 0 && (m->has_inflight || m->base_us)) /* issue 25 */
        rc = ctrl_node_inflight(ns->ctrl, node, m->table, m->base_us, m->inflight,
                                m->has_inflight ? m->ninflight : 0);
    if (rc == 0 && (m->nbytes || m->served_bytes))
        rc = ctrl_node_report_bytes(ns->ctrl, node, m->period, m->served_bytes, m->busy_seconds,
                                    m->rbytes, m->nbytes);
    if (rc == -ESTALE) {
        proto_stats_note(&ns->pst, PROTO_E_TABLE);
        send_error(ns, m->node, "unknown_table", "send your bucket names");
    } else if (rc < 0) {
        proto_stats_note(&ns->pst, PROTO_E_RANGE);
        send_error(ns, m->node, "bad_message", "record outside your table");
    }
    pclock_report(ns->clk, now);
}

void nodes_drain(nodes_t *ns)
{
    double parts_s = 0; /* the loop's time on parts of nodes' tables */
    for (int budget = 0; budget < 100000 && parts_s < NODES_PARTS_PASS_S; budget++) {
        proto_reason_t why;
        double t0 = mono_now();
        ns->idlen = 0;
        proto_peer_t peer;
        int rc = proto_recv_peer(ns->sock, ns->id, sizeof ns->id, &ns->idlen, &ns->in, &ns->pst,
                                 &why, known_node, ns, ZMQ_DONTWAIT, &peer);
        double now = mono_now();
        if (rc == -EAGAIN || rc == -EINTR)
            return;
        ns->cur->decode += now - t0;
        if (rc == -EPROTO) {
            char id[PROTO_ID_MAX + 1];
            memcpy(id, ns->id, ns->idlen);
            id[ns->idlen] = '\0'; /* the name part, up to an instance tag */
            uint64_t q;
            if (warn_ok(ns, NODES_WARN_BAD, &q))
                log_warn("bad message from '%s' dropped: %s (%llu such not logged)", id,
                         proto_reason_str(why), (unsigned long long)q);
            continue;
        }
        if (rc < 0) {
            log_error("receive: %s", zmq_strerror(-rc));
            return;
        }
        proto_msg_t *m = &ns->in;
        if (auth_node(ns->auth, &peer, m->node) < 0)
            continue; /* counted and logged; no answer: it learns nothing */
        note_follows(ns, m);
        if (rc == PROTO_RECV_UNKNOWN) {
            if (m->type != PROTO_GOODBYE &&
                send_error(ns, m->node, "unknown_node", "say hello first") == -EPERM)
                note_unknown(ns, m->node);
            continue;
        }
        if (m->type == PROTO_HELLO) {
            on_hello(ns, m, now);
            continue;
        }
        int node = ctrl_node_find(ns->ctrl, m->node);
        if (!from_registered(ns, m, node)) {
            /* Another process under a registered name (one that was
             * refused, or an old one that was replaced): not this node.
             * The decoder counted it ok; it is an unknown_node. */
            if (ns->pst.ok)
                ns->pst.ok--;
            proto_stats_note(&ns->pst, PROTO_E_UNKNOWN_NODE);
            if (m->type != PROTO_GOODBYE)
                send_error(ns, m->node, "unknown_node", "say hello first");
            continue;
        }
        nodes_peer_t *p = peer_at(ns, node);
        if (p) {
            p->last_msg = now;
            /* A gap or a step back in its seq: something of it went
             * missing or came late (sparse reports: ask for a full one). */
            if (m->seq && p->seq && m->seq != p->seq + 1)
                p->want_full = 1;
            if (m->seq)
                p->seq = m->seq;
        }
        double t1 = mono_now();
        /* parts acknowledged: the next ones go now, not at the next round
         * (a round at a million buckets may come late on a busy host) */
        if ((m->type == PROTO_REPORT || m->type == PROTO_HEARTBEAT) && note_ack(p, m) &&
            ctrl_node_needs_names(ns->ctrl, node)) {
            double c0 = thread_cpu();
            p->tx_parts += (uint64_t)send_parts(ns, node, p, NODES_PARTS_ACK);
            parts_s += thread_cpu() - c0;
        }
        switch (m->type) {
        case PROTO_REPORT:
            note_clock(ns, m, node, now);
            on_report(ns, m, node, now);
            break;
        case PROTO_HEARTBEAT:
            ctrl_node_seen(ns->ctrl, node, m->peer_table);
            break;
        case PROTO_NAMES:
            ctrl_node_seen(ns->ctrl, node, 0);
            on_names(ns, m, node);
            parts_s += mono_now() - t1;
            break;
        case PROTO_GOODBYE:
            ctrl_node_goodbye(ns->ctrl, node);
            break;
        case PROTO_WHO:
            on_who(ns, m, node, now);
            break;
        default:
            proto_stats_note(&ns->pst, PROTO_E_TYPE);
            log_debug("node %s sent a %s message; ignored", m->node, proto_type_str(m->type));
            break;
        }
        ns->cur->decode += mono_now() - t1;
        ns->hooks.tick(ns->hooks.arg, mono_now());
    }
}
