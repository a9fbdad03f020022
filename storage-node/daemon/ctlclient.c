/* ctlclient.c - bqos-node's controller client: the node's agent (storage-node/core/agent.h) moved over one ZeroMQ DEALER per controller, timed on a libevent loop. */
#include "storage-node/daemon/ctlclient.h"

#include <errno.h>
#include <event2/event.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "common/bucketfile.h"
#include "common/curvekey.h"
#include "common/hostport.h"
#include "common/log.h"
#include "common/mono.h"
#include "common/shardgen.h"
#include "common/shardmap.h"
#include "storage-node/core/agent.h"

/* One controller: its endpoint and DEALER (index = the agent's source). */
typedef struct {
    char *endpoint;      /* points into ctlclient.endpoint (the list) */
    void *sock;
    struct event *ev_read; /* ctlclient_attach() */
    int hello_owed;      /* our last hello did not reach its socket (not
                            connected yet): sent again until it does,
                            so that a standby knows the node before it
                            takes over (its ledger has the node's reports) */
} ctlpeer_t;

/* Owned by the node's loop thread; no locks. */
struct ctlclient {
    ctlclient_config_t cfg;
    char *endpoint;      /* the list as given (log label) */
    char *split;         /* the list cut at its commas (peer endpoints) */
    char name[PROTO_NAME_MAX + 1];
    agent_t *agent;      /* the protocol's logic; this file moves its messages */
    void *zctx;
    ctlpeer_t peer[CTLCLIENT_MAX_ENDPOINTS];
    int npeers;
    proto_enc_t enc;
    proto_msg_t in, out;
    ctlclient_stats_t st; /* send counters; the rest comes from the agent */
    uint64_t seq;
    double next_hello;
    double last_send;    /* when we last sent anything */
    double next_warn;    /* "no controller" warning before any welcome */
    double next_reopen;  /* in fallback: when the sockets are made anew */
    int leader;          /* the agent's leader at the last message (-1) */
    int curve;           /* cfg.curve_key given: own and server loaded */
    curvekey_t own, server;
    /* shards (cfg.shards > 0): the node's table as this shard sees it */
    sched_t *sched;      /* the names of the agent's table, by index */
    int *fbefore;        /* [nb + 1]: the shard's buckets among [0, b) (b is
                            the shard's iff fbefore[b + 1] > fbefore[b]; names
                            never change: filled as buckets appear) */
    int *fwhole;         /* [nf]: the scheduler index of shard bucket f */
    const char **fnames; /* [nf]: the shard's names, for the names frame */
    int nb, nf, capb;
    proto_share_rec_t fflight[PROTO_SHARES_MAX]; /* a report's inflight, re-indexed */
    double next_refuse_warn;
    int idle;            /* the session idles: its shard is out of the map
                            the node follows (slot_out()), as last ticked */

    struct event *ev_timer; /* ctlclient_attach() */
};

static int peer_reopen(ctlclient_t *c, int i);

double ctlclient_now(void)
{
    return mono_now();
}

void ctlclient_config_defaults(ctlclient_config_t *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    agent_config_defaults(&cfg->agent);
    cfg->hello_s = 1.0;
    cfg->heartbeat_s = 1.0;
}

/* ---- sending ---- */

/* Sends the encoded frames on one DEALER without blocking.  Returns 0 or
 * -errno (-EAGAIN: not connected, ZMQ_IMMEDIATE, or the queue is full). */
static int send_frames(void *sock, const proto_enc_t *e)
{
    for (size_t i = 0; i < e->nframes; i++) {
        int more = i + 1 < e->nframes ? ZMQ_SNDMORE : 0;
        /* Once the first part is queued the rest is accepted atomically. */
        if (zmq_send(sock, e->data[i], e->len[i], more | ZMQ_DONTWAIT) < 0)
            return -zmq_errno();
    }
    return 0;
}

/* Sends m to every controller (the leader and the standbys: all of them
 * know the node, so any can take over).  Encoded once.  Returns 0 if at
 * least one took it, else the last error (-EAGAIN: none connected). */
static int send_msg(ctlclient_t *c, proto_msg_t *m)
{
    strcpy(m->node, c->name);
    m->seq = ++c->seq;
    int rc = proto_encode(m, &c->enc), any = 0;
    if (rc < 0) {
        log_warn("controller %s: cannot encode %s: %s", c->endpoint, proto_type_str(m->type),
                 strerror(-rc));
        return rc;
    }
    for (int i = 0; i < c->npeers; i++) {
        int r = c->peer[i].sock ? send_frames(c->peer[i].sock, &c->enc) : -ENOTCONN;
        if (m->type == PROTO_HELLO)
            c->peer[i].hello_owed = r != 0;
        if (r == 0) {
            any = 1;
            continue;
        }
        rc = r;
        if (r == -EAGAIN)
            c->st.send_dropped++;
        else
            log_warn("controller %s: send %s failed: %s", c->peer[i].endpoint,
                     proto_type_str(m->type), strerror(-r));
    }
    if (any) {
        c->last_send = ctlclient_now();
        return 0;
    }
    return rc;
}

/* ---- shards: the node's table cut to this client's shard ---- */

/* Nonzero if bucket `name` is this session's: of its shard under the
 * configuration the node follows (either map while K changes). */
static int shard_has(const ctlclient_t *c, const char *name)
{
    if (!c->cfg.sg)
        return shardmap_of(name, c->cfg.shards) == c->cfg.shard;
    return shardgen_either(c->cfg.sg, name, c->cfg.shard);
}

/* Nonzero if this session's shard is out of the configuration the node
 * follows now (shardgen_out(): a shard removed, from its change's period
 * on; a slot beyond every K the cluster names): the session idles.  It
 * says hello once a second (a later change may name its shard again: the
 * new leader welcomes it then) and nothing else; its agent is not ticked,
 * so it neither reports, nor falls back, nor warns of a silence that is
 * the configuration's, and it sets no bucket (it has none, and the node's
 * tokens filter takes none from it). */
static int slot_out(const ctlclient_t *c)
{
    if (!c->cfg.shards || !c->cfg.sg)
        return 0;
    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    return shardgen_out(c->cfg.sg, c->cfg.shard,
                        (int64_t)rt.tv_sec * 1000 + rt.tv_nsec / 1000000);
}

/* Brings the shard's table up to the agent's first n buckets (the table
 * grows by its end; a smaller one is a new table, mapped anew):
 * c->fbefore, c->fwhole, c->fnames.  Each bucket's shard is hashed once.
 * O(new buckets).  Returns 0 or -ENOMEM (the mapping as it was). */
static int shard_sync(ctlclient_t *c, int n)
{
    if (n < c->nb)
        c->nb = c->nf = 0;
    if (n + 1 > c->capb) {
        int cap = n + 1 > 2 * c->capb ? n + 1 : 2 * c->capb;
        int *fb = realloc(c->fbefore, (size_t)cap * sizeof *fb);
        if (fb)
            c->fbefore = fb;
        int *fw = fb ? realloc(c->fwhole, (size_t)cap * sizeof *fw) : NULL;
        if (fw)
            c->fwhole = fw;
        const char **fn = fw ? realloc(c->fnames, (size_t)cap * sizeof *fn) : NULL;
        if (!fn)
            return -ENOMEM;
        c->fnames = fn;
        c->capb = cap;
    }
    for (int b = c->nb; b < n; b++) {
        const char *name = sched_bucket_name(c->sched, b);
        c->fbefore[b] = c->nf;
        if (name && shard_has(c, name)) {
            c->fwhole[c->nf] = b;
            c->fnames[c->nf++] = name;
        }
    }
    c->nb = n;
    c->fbefore[n] = c->nf;
    return 0;
}

/* The agent's names frame of m (a hello or report: the first nnames names
 * of its table of names_of, or its whole table if names_of is 0) as this
 * shard's: the shard's names among those, its table of c->nf names
 * (names_of 0 if the frame holds it all).  Returns 0 or -ENOMEM. */
static int shard_names(ctlclient_t *c, proto_msg_t *m)
{
    size_t n = m->names_of ? (size_t)m->names_of : m->nnames;
    int rc = shard_sync(c, (int)n);
    if (rc)
        return rc;
    int k = c->fbefore[m->nnames];
    m->names = c->fnames;
    m->nnames = (size_t)k;
    m->names_of = k < c->nf ? (uint64_t)c->nf : 0;
    return 0;
}

/* A names message of the agent's (a part [names_at, names_at + nnames) of
 * its table of names_of) as this shard's part: p, borrowing c->fnames.
 * Returns 1 if p holds names (send it), 0 if none of the part is this
 * shard's (nothing to send: the controller's count moves past it), or
 * -ENOMEM. */
static int shard_part(ctlclient_t *c, const proto_msg_t *m, proto_msg_t *p)
{
    int rc = shard_sync(c, (int)m->names_of);
    if (rc)
        return rc;
    int from = c->fbefore[m->names_at], to = c->fbefore[m->names_at + m->nnames];
    if (to <= from)
        return 0;
    *p = *m;
    p->names = c->fnames + from;
    p->nnames = (size_t)(to - from);
    p->names_at = (uint64_t)from;
    p->names_of = (uint64_t)c->nf;
    return 1;
}

/* A controller's count of our table (peer_names: the first so many names
 * of the shard's table) as the agent's: it holds every bucket before the
 * shard's first one it lacks (all we mapped if it lacks none). */
static void shard_ack(const ctlclient_t *c, proto_msg_t *m)
{
    if (!m->has_peer_names)
        return;
    m->peer_names = m->peer_names < (uint64_t)c->nf ? (uint64_t)c->fwhole[m->peer_names]
                                                     : (uint64_t)c->nb;
}

/* The shard's index of scheduler bucket b, or -1 (another shard's, or not
 * mapped yet: left out). */
static int shard_index(const ctlclient_t *c, uint32_t b)
{
    return b < (uint32_t)c->nb && c->fbefore[b + 1] > c->fbefore[b] ? c->fbefore[b] : -1;
}

/* A report of the agent's (records of every bucket, by scheduler index)
 * cut to this shard's buckets, by the shard's indexes: its names frame (if
 * any), records, byte records and in-flight figures.  The node-wide
 * counters stay: every shard estimates the node's whole capacity.
 * Returns 0 or -ENOMEM. */
static int shard_report(ctlclient_t *c, proto_msg_t *m)
{
    if (m->has_names) {
        m->names_of = 0; /* a report's names are the agent's whole table */
        int rc = shard_names(c, m);
        if (rc)
            return rc;
    }
    size_t k = 0;
    for (size_t i = 0; i < m->count; i++) {
        int f = shard_index(c, m->report[i].bucket);
        if (f >= 0) {
            m->report[k] = m->report[i];
            m->report[k++].bucket = (uint32_t)f;
        }
    }
    m->count = k;
    k = 0;
    for (size_t i = 0; i < m->nbytes; i++) {
        int f = shard_index(c, m->rbytes[i].bucket);
        if (f >= 0) {
            m->rbytes[k] = m->rbytes[i];
            m->rbytes[k++].bucket = (uint32_t)f;
        }
    }
    m->nbytes = k;
    if (!k)
        m->served_bytes = 0;
    k = 0;
    for (size_t i = 0; i < m->ninflight && k < PROTO_SHARES_MAX; i++) {
        int f = shard_index(c, m->inflight[i].bucket);
        if (f >= 0) {
            c->fflight[k] = m->inflight[i];
            c->fflight[k++].bucket = (uint32_t)f;
        }
    }
    m->ninflight = k;
    m->has_inflight = k > 0;
    m->inflight = c->fflight;
    return 0;
}

/* Nonzero if controller table m (its names frame) may be this shard's:
 * every name of the shard, none `default`.  Else counted and warned (at
 * most once a minute). */
static int shard_table_ok(ctlclient_t *c, const proto_msg_t *m, int i, double now)
{
    for (size_t j = 0; j < m->nnames; j++) {
        int s = shard_has(c, m->names[j]);
        if (s && strcmp(m->names[j], "default") != 0)
            continue;
        c->st.shard_refused++;
        if (now >= c->next_refuse_warn) {
            c->next_refuse_warn = now + 60;
            log_warn("controller %s (shard %d of %d): its table names bucket %s, %s: refused "
                     "(is its --shards/--shard this node's?)", c->peer[i].endpoint,
                     c->cfg.shard, c->cfg.shards, m->names[j],
                     s ? "which would take the buckets of every other shard "
                         "(not supported with shards)"
                       : "of another shard");
        }
        return 0;
    }
    return 1;
}

static int send_hello(ctlclient_t *c, double now)
{
    proto_msg_t m; /* borrows the agent's names; owns nothing */
    int rc = agent_hello(c->agent, now, &m);
    if (rc)
        return rc;
    if (c->cfg.shards && (rc = shard_names(c, &m)))
        return rc;
    rc = send_msg(c, &m);
    if (rc == 0)
        c->st.sent_hello++;
    return rc;
}

/* Nonzero if a controller has not taken our last hello. */
static int hello_owed(const ctlclient_t *c)
{
    for (int i = 0; i < c->npeers; i++)
        if (c->peer[i].hello_owed)
            return 1;
    return 0;
}

/* The hello again to the controllers that did not take the last one (a
 * standby whose socket was not connected yet), not to the others (the
 * leader would welcome us again). */
static void send_hello_owed(ctlclient_t *c, double now)
{
    proto_msg_t m;
    if (agent_hello(c->agent, now, &m) || (c->cfg.shards && shard_names(c, &m)))
        return;
    strcpy(m.node, c->name);
    m.seq = ++c->seq;
    if (proto_encode(&m, &c->enc) < 0)
        return;
    for (int i = 0; i < c->npeers; i++)
        if (c->peer[i].hello_owed && c->peer[i].sock && send_frames(c->peer[i].sock, &c->enc) == 0) {
            c->peer[i].hello_owed = 0;
            c->st.sent_hello++;
        }
}

int ctlclient_remap(ctlclient_t *c, double now)
{
    if (!c->cfg.shards)
        return 0;
    int same = 1; /* the session's buckets as they were: nothing to say */
    for (int b = 0; same && b < c->nb; b++) {
        const char *name = sched_bucket_name(c->sched, b);
        same = (c->fbefore[b + 1] > c->fbefore[b]) == (name && shard_has(c, name));
    }
    if (same)
        return 0;
    int nb = c->nb, nf = c->nf;
    c->nb = c->nf = 0; /* every bucket mapped anew by shard_has() */
    int rc = shard_sync(c, nb);
    if (rc < 0) {
        c->nb = nb;
        c->nf = nf;
        return rc;
    }
    /* at once, welcomed or not: a welcome in flight (or being handled: the
     * configuration came with it) is of the old table, and reports from
     * now on are indexed by the new one */
    c->next_hello = now + c->cfg.hello_s;
    return send_hello(c, now);
}

int ctlclient_send_who(ctlclient_t *c, const char *text, size_t len)
{
    if (!agent_welcomed(c->agent))
        return -ENOTCONN;
    proto_msg_t m;
    proto_msg_init(&m);
    m.type = PROTO_WHO;
    m.who_text = text;
    m.who_len = len;
    return send_msg(c, &m);
}

int ctlclient_report_now(ctlclient_t *c, double now)
{
    proto_msg_t *m = &c->out;
    int rc = agent_report(c->agent, now, m);
    if (rc == 0 && c->cfg.shards)
        rc = shard_report(c, m);
    if (rc) {
        m->names = NULL;
        m->has_names = 0;
        return rc;
    }
    rc = send_msg(c, m);
    m->names = NULL;
    m->has_names = 0;
    if (rc == 0)
        c->st.sent_report++;
    /* names in parts: the next parts of our table, a bounded number */
    proto_msg_t part; /* borrows the agent's names */
    proto_msg_t fpart; /* the shard's names of it (c->shards) */
    for (int i = 0; rc == 0 && i < AGENT_PARTS_REPORT && agent_names_part(c->agent, &part); i++) {
        proto_msg_t *out = &part;
        if (c->cfg.shards) {
            int r = shard_part(c, &part, &fpart);
            if (r <= 0) {
                if (r < 0) {
                    agent_names_unsent(c->agent, &part);
                    break;
                }
                continue; /* none of this shard's */
            }
            out = &fpart;
        }
        if (send_msg(c, out) < 0) {
            agent_names_unsent(c->agent, &part); /* again after the next report */
            break;
        }
    }
    return rc;
}

/* Notes the session going idle or coming back (slot_out()); back, its
 * agent's clock is caught up and its leader's silence counted from now
 * (agent_watch_from()), before any message is handled: a new leader's
 * first message (it campaigned on the same change) must not meet the
 * clock the session idled in.  Returns nonzero if the session idles. */
static int idle_update(ctlclient_t *c, double now)
{
    int out = slot_out(c);
    if (out != c->idle) {
        log_info("controller %s: shard %d %s the cluster's map (K %d, generation %llu): %s",
                 c->endpoint, c->cfg.shard, out ? "is out of" : "is back in",
                 c->cfg.sg->next_k ? c->cfg.sg->next_k : c->cfg.sg->k,
                 (unsigned long long)(c->cfg.sg->next_k ? c->cfg.sg->next_gen : c->cfg.sg->gen),
                 out ? "the session idles" : "following its leader");
        if (!out) /* back: its leader's silence counts from here, not from the idling */
            agent_watch_from(c->agent, now);
        c->idle = out;
        c->st.idles += out;
        c->next_warn = 0; /* back: warnings anew, after a second */
    }
    return out;
}

/* ---- receiving ---- */

/* Drains controller i's socket into the agent. */
static int drain(ctlclient_t *c, int i, double now)
{
    if (!c->peer[i].sock)
        return 0; /* a failed peer_reopen(): the next one tries again */
    for (;;) {
        proto_reason_t why;
        int rc = proto_recv(c->peer[i].sock, NULL, 0, NULL, &c->in, &c->st.agent.proto, &why, NULL,
                            NULL, ZMQ_DONTWAIT);
        if (rc == -EAGAIN)
            return 0;
        if (rc == -EPROTO) {
            log_warn("controller %s: bad message (%s) dropped", c->peer[i].endpoint,
                     proto_reason_str(why));
            continue;
        }
        if (rc == -EINTR)
            continue;
        if (rc < 0)
            return rc;
        if (c->cfg.shards && c->in.shards_k && c->cfg.on_shards)
            c->cfg.on_shards(c->cfg.shards_arg, &c->in, now); /* before the table check */
        if (c->cfg.shards && c->in.shards_k)
            idle_update(c, now); /* the configuration it brings may end our idling */
        if (c->cfg.shards && c->in.has_names && !shard_table_ok(c, &c->in, i, now))
            continue; /* nothing of it applied: this shard's buckets stay as they are */
        if (c->cfg.shards)
            shard_ack(c, &c->in); /* its count of the shard's table as the agent's */
        int was = c->leader;
        if (agent_handle_from(c->agent, &c->in, NULL, now, i) & AGENT_SEND_HELLO) {
            c->next_hello = now + c->cfg.hello_s;
            send_hello(c, now);
        }
        agent_stats_t as;
        agent_stats(c->agent, &as);
        c->leader = as.leader;
        if (as.leader != was && as.leader >= 0 && c->npeers > 1)
            log_info("controller %s is the leader now (source %d, epoch %llu)",
                     c->peer[as.leader].endpoint, as.leader, (unsigned long long)as.epoch);
    }
}

int ctlclient_on_readable(ctlclient_t *c, double now)
{
    int rc = 0;
    idle_update(c, now);
    for (int i = 0; i < c->npeers; i++) {
        int r = drain(c, i, now);
        if (r < 0)
            rc = r;
    }
    return rc;
}

double ctlclient_tick(ctlclient_t *c, double now)
{
    ctlclient_on_readable(c, now);
    int out = idle_update(c, now);
    if (!agent_welcomed(c->agent) && now >= c->next_hello) {
        /* Not connected yet (ZMQ_IMMEDIATE refuses to queue): retry soon,
         * so a node that starts with its controller is welcomed at once. */
        int rc = send_hello(c, now);
        c->next_hello = now + (rc == -EAGAIN && c->cfg.hello_s > 0.05 && !out ? 0.05
                                                                            : c->cfg.hello_s);
    }
    if (out) { /* the next look: the next hello, or a second */
        double d = agent_welcomed(c->agent) ? c->cfg.hello_s : c->next_hello - now;
        return d < 0.001 ? 0.001 : d > c->cfg.hello_s ? c->cfg.hello_s : d;
    }
    if (agent_welcomed(c->agent) && hello_owed(c) && now >= c->next_hello) {
        send_hello_owed(c, now);
        c->next_hello = now + 0.1;
    }
    agent_stats_t as;
    agent_stats(c->agent, &as);
    if (!as.welcomed && as.fallback && !as.period_s && now >= c->next_warn) {
        /* Before any timing the agent cannot count periods: a warning a
         * second (the agent takes over once it knows the period). */
        if (c->next_warn > 0) {
            c->st.agent.warn_unreachable++;
            log_warn("no controller reachable at %s: %s%s", c->endpoint,
                     c->cfg.agent.mode == AGENT_FALLBACK_RR ? "round robin, no limits"
                                                            : "no grant to enforce yet",
                     c->curve ? " (with CURVE: is this node's key in the controller's "
                                "--authorized-keys under its --name, and --controller-key "
                                "the controller's?)"
                              : "");
        }
        c->next_warn = now + 1.0;
    }
    if (agent_tick(c->agent, now))
        ctlclient_report_now(c, now);
    agent_stats(c->agent, &as);
    if (as.fallback && as.period_s > 0 && now >= c->next_reopen) {
        /* Not heard (issue 18, defect 4): our connection may be half-open,
         * or another process may have taken our routing id at the
         * controller (ZMQ_ROUTER_HANDOVER) and left us unread.  A new
         * connection under our id takes it back; every few seconds while
         * the silence lasts. */
        if (c->next_reopen > 0) {
            log_warn("controller not heard for %.1f s: connecting anew", as.silent_s);
            for (int i = 0; i < c->npeers; i++)
                peer_reopen(c, i);
            c->st.reconnects++;
        }
        c->next_reopen = now + CTLCLIENT_REOPEN_S;
    } else if (!as.fallback) {
        c->next_reopen = 0;
    }
    if (agent_welcomed(c->agent) && now - c->last_send >= c->cfg.heartbeat_s) {
        proto_msg_t hb; /* reports double as heartbeats; this covers long intervals */
        agent_heartbeat(c->agent, &hb);
        if (send_msg(c, &hb) == 0)
            c->st.sent_heartbeat++;
        else
            c->last_send = now; /* retry after another heartbeat_s */
    }
    ctlclient_on_readable(c, now);
    double next = now + c->cfg.hello_s;
    int welcomed = agent_welcomed(c->agent);
    if (welcomed && c->last_send + c->cfg.heartbeat_s < next)
        next = c->last_send + c->cfg.heartbeat_s;
    if ((!welcomed || hello_owed(c)) && c->next_hello < next)
        next = c->next_hello;
    if (agent_next_tick(c->agent) < next)
        next = agent_next_tick(c->agent);
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

static void detach(ctlclient_t *c)
{
    for (int i = 0; i < c->npeers; i++)
        if (c->peer[i].ev_read) {
            event_free(c->peer[i].ev_read);
            c->peer[i].ev_read = NULL;
        }
    if (c->ev_timer)
        event_free(c->ev_timer);
    c->ev_timer = NULL;
}

int ctlclient_attach(ctlclient_t *c, struct event_base *base)
{
    if (!c || !base || c->ev_timer)
        return -EINVAL;
    if (!(c->ev_timer = evtimer_new(base, on_ev_timer, c)))
        return -ENOMEM;
    for (int i = 0; i < c->npeers; i++) {
        int fd = ctlclient_fd_at(c, i);
        if (fd < 0) {
            detach(c);
            return -EINVAL;
        }
        c->peer[i].ev_read = event_new(base, fd, EV_READ | EV_PERSIST, on_ev_read, c);
        if (!c->peer[i].ev_read || event_add(c->peer[i].ev_read, NULL) != 0) {
            detach(c);
            return -ENOMEM;
        }
    }
    arm_timer(c, 0);
    return 0;
}

/* ---- life cycle ---- */

/* A random process id in 1..2^53 (what JSON readers keep exact). */
static uint64_t random_instance(void)
{
    uint64_t v = 0;
    if (getrandom(&v, sizeof v, GRND_NONBLOCK) != (ssize_t)sizeof v)
        v = (uint64_t)time(NULL) * 6364136223846793005ULL ^ (uint64_t)getpid() << 20 ^
            (uint64_t)(mono_now() * 1e9);
    v &= PROTO_MAX_COUNT - 1;
    return v ? v : 1;
}

/* Cuts c->split at its commas into c->peer[].endpoint.  Returns 0 or
 * -EINVAL (an empty endpoint, more than CTLCLIENT_MAX_ENDPOINTS). */
static int split_endpoints(ctlclient_t *c)
{
    char *p = c->split;
    for (;;) {
        char *comma = strchr(p, ',');
        if (comma)
            *comma = '\0';
        if (!*p || c->npeers == CTLCLIENT_MAX_ENDPOINTS)
            return -EINVAL;
        c->peer[c->npeers++].endpoint = p;
        if (!comma)
            return 0;
        p = comma + 1;
    }
}

/* Opens controller i's DEALER and connects it.  Returns 0 or -errno. */
static int peer_open(ctlclient_t *c, int i)
{
    void *sock = zmq_socket(c->zctx, ZMQ_DEALER);
    if (!sock)
        return -zmq_errno();
    c->peer[i].sock = sock;
    int one = 1, zero = 0, hwm = 64, ivl = 100, ivlmax = 1000;
    int v6 = hostport_zmq_ipv6(c->peer[i].endpoint);
    zmq_setsockopt(sock, ZMQ_IPV6, &v6, sizeof v6);
    unsigned char id[PROTO_ID_MAX]; /* name + instance tag: a second process
                                       under our name is another peer */
    zmq_setsockopt(sock, ZMQ_ROUTING_ID, id, proto_node_id(c->name, c->cfg.agent.instance, id));
    zmq_setsockopt(sock, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(sock, ZMQ_IMMEDIATE, &one, sizeof one);
    zmq_setsockopt(sock, ZMQ_SNDHWM, &hwm, sizeof hwm);
    zmq_setsockopt(sock, ZMQ_RECONNECT_IVL, &ivl, sizeof ivl);
    zmq_setsockopt(sock, ZMQ_RECONNECT_IVL_MAX, &ivlmax, sizeof ivlmax);
    if (c->curve && curvekey_set_client(sock, &c->own, &c->server) < 0)
        return -zmq_errno();
    if (zmq_connect(sock, c->peer[i].endpoint) != 0) {
        int rc = -zmq_errno();
        log_error("controller endpoint '%s': %s", c->peer[i].endpoint, zmq_strerror(-rc));
        return rc;
    }
    return 0;
}

/* Closes peer i's socket and opens it anew (same routing id), moving its
 * read event to the new descriptor.  Returns 0 or -errno (then the peer
 * has no socket until the next try). */
static int peer_reopen(ctlclient_t *c, int i)
{
    struct event_base *base = c->peer[i].ev_read ? event_get_base(c->peer[i].ev_read) : NULL;
    if (c->peer[i].ev_read) {
        event_free(c->peer[i].ev_read);
        c->peer[i].ev_read = NULL;
    }
    if (c->peer[i].sock)
        zmq_close(c->peer[i].sock);
    c->peer[i].sock = NULL;
    int rc = peer_open(c, i);
    if (rc < 0 || !base)
        return rc;
    int fd = ctlclient_fd_at(c, i);
    c->peer[i].ev_read = fd >= 0 ? event_new(base, fd, EV_READ | EV_PERSIST, on_ev_read, c) : NULL;
    if (!c->peer[i].ev_read || event_add(c->peer[i].ev_read, NULL) != 0)
        return -ENOMEM;
    return 0;
}

int ctlclient_reload_keys(ctlclient_t *c, jsonloc_err_t *err)
{
    curvekey_t own, server;
    int on = 0;
    if (!c->curve)
        return 0;
    int rc = curvekey_load_client(c->cfg.curve_key, c->cfg.controller_key, &own, &server, &on,
                                  err);
    if (rc == 0 && (strcmp(own.secret_z85, c->own.secret_z85) != 0 ||
                    strcmp(server.public_z85, c->server.public_z85) != 0)) {
        c->own = own;
        c->server = server;
        for (int i = 0; i < c->npeers; i++)
            if (peer_reopen(c, i) < 0)
                log_warn("controller %s: cannot connect anew; retrying while silent",
                         c->peer[i].endpoint);
        c->st.reconnects++;
        rc = 1;
    }
    explicit_bzero(&own, sizeof own);
    return rc;
}

ctlclient_t *ctlclient_new(const ctlclient_config_t *cfg, sched_t *sched, const agent_ops_t *ops,
                           int *err)
{
    int rc = -EINVAL;
    ctlclient_t *c = NULL;
    if (!cfg || !sched || !cfg->endpoint || !cfg->agent.name ||
        proto_name_check(cfg->agent.name, strlen(cfg->agent.name)) || !(cfg->hello_s > 0) ||
        !(cfg->heartbeat_s > 0) || !(cfg->agent.silence_intervals > 0) ||
        !(cfg->agent.grace_s >= 0) || cfg->shards < 0 || cfg->shards > SHARDMAP_MAX ||
        (cfg->shards && (cfg->shard < 0 || cfg->shard >= cfg->shards)))
        goto out;
    rc = -ENOMEM;
    if (!(c = calloc(1, sizeof *c)) || !(c->endpoint = strdup(cfg->endpoint)) ||
        !(c->split = strdup(cfg->endpoint)))
        goto out;
    c->cfg = *cfg;
    c->sched = sched;
    c->cfg.endpoint = c->endpoint;
    strcpy(c->name, cfg->agent.name);
    c->cfg.agent.name = c->name;
    c->cfg.agent.peer = c->endpoint;
    proto_enc_init(&c->enc);
    proto_msg_init(&c->in);
    proto_msg_init(&c->out);
    if ((rc = split_endpoints(c)) < 0) {
        log_error("controller endpoints '%s': 1..%d endpoints, comma-separated, none empty",
                  c->endpoint, CTLCLIENT_MAX_ENDPOINTS);
        goto out;
    }
    if (!(c->zctx = zmq_ctx_new())) {
        rc = -zmq_errno();
        goto out;
    }
    if (!c->cfg.agent.instance || c->cfg.agent.instance > PROTO_MAX_COUNT)
        c->cfg.agent.instance = random_instance();
    jsonloc_err_t kerr;
    if ((rc = curvekey_load_client(cfg->curve_key, cfg->controller_key, &c->own, &c->server,
                                   &c->curve, &kerr)) < 0) {
        char buf[700];
        log_error("%s", bucketfile_strerror(&kerr, buf, sizeof buf));
        goto out;
    }
    for (int i = 0; i < c->npeers; i++)
        if ((rc = peer_open(c, i)) < 0)
            goto out;
    double now = ctlclient_now();
    rc = -EINVAL;
    if (!(c->agent = agent_new(&c->cfg.agent, sched, ops, now, &rc)))
        goto out;
    c->next_hello = now; /* first tick sends it */
    c->leader = -1;
    char sh[48] = "";
    if (cfg->shards)
        snprintf(sh, sizeof sh, "shard %d of %d, ", cfg->shard, cfg->shards);
    log_info("controller client: node %s (process %016llx) -> %s (%s%d controller%s; fallback %s, "
             "silence %.3g intervals)", c->name, (unsigned long long)c->cfg.agent.instance, c->endpoint,
             sh, c->npeers, c->npeers > 1 ? "s" : "", agent_mode_str(cfg->agent.mode),
             cfg->agent.silence_intervals);
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
    detach(c);
    if (c->npeers && c->peer[0].sock && c->agent && agent_welcomed(c->agent)) {
        int linger = 100;
        for (int i = 0; i < c->npeers; i++)
            if (c->peer[i].sock)
                zmq_setsockopt(c->peer[i].sock, ZMQ_LINGER, &linger, sizeof linger);
        proto_msg_t m;
        proto_msg_init(&m);
        m.type = PROTO_GOODBYE;
        if (send_msg(c, &m) == 0)
            c->st.sent_goodbye++;
    }
    for (int i = 0; i < c->npeers; i++)
        if (c->peer[i].sock)
            zmq_close(c->peer[i].sock);
    if (c->zctx)
        zmq_ctx_term(c->zctx);
    proto_enc_clear(&c->enc);
    proto_msg_clear(&c->in);
    proto_msg_clear(&c->out);
    agent_destroy(&c->agent);
    free(c->endpoint);
    free(c->split);
    free(c->fbefore);
    free(c->fwhole);
    free(c->fnames);
    explicit_bzero(&c->own, sizeof c->own);
    free(c);
    *cp = NULL;
}

int ctlclient_fd_at(const ctlclient_t *c, int i)
{
    int fd = -1;
    size_t len = sizeof fd;
    if (!c || i < 0 || i >= c->npeers || !c->peer[i].sock ||
        zmq_getsockopt(c->peer[i].sock, ZMQ_FD, &fd, &len) != 0)
        return -1;
    return fd;
}

int ctlclient_nendpoints(const ctlclient_t *c)
{
    return c ? c->npeers : 0;
}

int ctlclient_fd(const ctlclient_t *c)
{
    return ctlclient_fd_at(c, 0);
}

void ctlclient_stats(const ctlclient_t *c, ctlclient_stats_t *out)
{
    *out = c->st;
    agent_stats(c->agent, &out->agent);
    out->agent.warn_unreachable += c->st.agent.warn_unreachable;
    /* Decoder verdicts here, the agent's own drops (wrong node, unknown
     * table) there: one set of reasons. */
    for (int r = 0; r < PROTO_E__COUNT; r++)
        out->agent.proto.rejected[r] += c->st.agent.proto.rejected[r];
    out->agent.proto.rejected_total += c->st.agent.proto.rejected_total;
    out->agent.proto.ok += c->st.agent.proto.ok;
    int l = out->agent.leader;
    out->leader_endpoint = l >= 0 && l < c->npeers ? c->peer[l].endpoint : NULL;
    out->state = slot_out(c) ? "idle" : agent_state_str(c->agent);
    out->endpoints = c->npeers;
}
