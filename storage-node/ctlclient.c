/* ctlclient.c - bqos-node's controller client: the node's agent (storage-node/core/agent.h) moved over a ZeroMQ DEALER, timed on a libevent loop. */
#include "storage-node/ctlclient.h"

#include <errno.h>
#include <event2/event.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "common/log.h"
#include "common/mono.h"
#include "storage-node/core/agent.h"

/* Owned by the node's loop thread; no locks. */
struct ctlclient {
    ctlclient_config_t cfg;
    char *endpoint;
    char name[PROTO_NAME_MAX + 1];
    sched_t *s;
    ctlclient_ops_t ops;
    agent_t *agent;      /* the protocol's logic; this file moves its messages */
    void *zctx, *sock;
    proto_enc_t enc;
    proto_msg_t in, out;
    ctlclient_stats_t st; /* send counters; the rest comes from the agent */
    uint64_t seq;
    double next_hello;
    double last_send;    /* when we last sent anything */

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

/* ---- the caller's hooks, as the agent calls them ---- */

static int hook_bucket(void *arg, const char *name)
{
    ctlclient_t *c = arg;
    return c->ops.bucket(c->ops.arg, name);
}

static int hook_set_tokens(void *arg, int b, int64_t r, int64_t l)
{
    ctlclient_t *c = arg;
    return c->ops.set_tokens(c->ops.arg, b, sched_bucket_name(c->s, b), r, l);
}

static void hook_set_policy(void *arg, sched_policy_t p)
{
    ctlclient_t *c = arg;
    c->ops.set_policy(c->ops.arg, p);
}

static void hook_period_start(void *arg)
{
    ctlclient_t *c = arg;
    c->ops.period_start(c->ops.arg);
}

static void hook_applied(void *arg)
{
    ctlclient_t *c = arg;
    c->ops.applied(c->ops.arg);
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

static int send_hello(ctlclient_t *c, double now)
{
    proto_msg_t m; /* borrows the agent's names; owns nothing */
    int rc = agent_hello(c->agent, now, &m);
    if (rc)
        return rc;
    rc = send_msg(c, &m);
    if (rc == 0)
        c->st.sent_hello++;
    return rc;
}

int ctlclient_report_now(ctlclient_t *c, double now)
{
    proto_msg_t *m = &c->out;
    int rc = agent_report(c->agent, now, m);
    if (rc)
        return rc;
    rc = send_msg(c, m);
    m->names = NULL;
    m->has_names = 0;
    if (rc == 0)
        c->st.sent_report++;
    return rc;
}

/* ---- receiving ---- */

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
        if (agent_handle(c->agent, &c->in, NULL, now) & AGENT_SEND_HELLO) {
            c->next_hello = now + c->cfg.hello_s;
            send_hello(c, now);
        }
    }
}

double ctlclient_tick(ctlclient_t *c, double now)
{
    ctlclient_on_readable(c, now);
    if (!agent_welcomed(c->agent) && now >= c->next_hello) {
        /* Not connected yet (ZMQ_IMMEDIATE refuses to queue): retry soon,
         * so a node that starts with its controller is welcomed at once. */
        int rc = send_hello(c, now);
        c->next_hello = now + (rc == -EAGAIN && c->cfg.hello_s > 0.05 ? 0.05 : c->cfg.hello_s);
    }
    if (agent_tick(c->agent, now))
        ctlclient_report_now(c, now);
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
    if (!welcomed && c->next_hello < next)
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
    if (!(c->zctx = zmq_ctx_new()) || !(c->sock = zmq_socket(c->zctx, ZMQ_DEALER))) {
        rc = -zmq_errno();
        goto out;
    }
    int one = 1, zero = 0, hwm = 64, ivl = 100, ivlmax = 1000;
    if (!c->cfg.instance || c->cfg.instance > PROTO_MAX_COUNT)
        c->cfg.instance = random_instance();
    unsigned char id[PROTO_ID_MAX]; /* name + instance tag: a second process
                                       under our name is another peer */
    zmq_setsockopt(c->sock, ZMQ_ROUTING_ID, id, proto_node_id(c->name, c->cfg.instance, id));
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
    agent_config_t ac;
    agent_config_defaults(&ac);
    ac.name = c->name;
    ac.peer = c->endpoint;
    ac.capacity = cfg->capacity;
    ac.instance = c->cfg.instance;
    ac.manage_policy = cfg->manage_policy;
    ac.normal = cfg->normal;
    ac.fallback = cfg->fallback;
    ac.silence_intervals = cfg->silence_intervals;
    agent_ops_t ao = {
        .bucket = c->ops.bucket ? hook_bucket : NULL,
        .set_tokens = c->ops.set_tokens ? hook_set_tokens : NULL,
        .set_policy = c->ops.set_policy ? hook_set_policy : NULL,
        .period_start = c->ops.period_start ? hook_period_start : NULL,
        .applied = c->ops.applied ? hook_applied : NULL,
        .arg = c};
    double now = ctlclient_now();
    if (!(c->agent = agent_new(&ac, sched, &ao, now, &rc)))
        goto out;
    c->next_hello = now; /* first tick sends it */
    log_info("controller client: node %s (process %016llx) -> %s", c->name,
             (unsigned long long)c->cfg.instance, c->endpoint);
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
        if (c->agent && agent_welcomed(c->agent)) {
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
    agent_destroy(&c->agent);
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
    agent_stats_t as;
    agent_stats(c->agent, &as);
    *out = c->st;
    out->recv_welcome = as.recv_welcome;
    out->recv_tokens = as.recv_tokens;
    out->recv_heartbeat = as.recv_heartbeat;
    out->recv_error = as.recv_error;
    out->tokens_applied = as.tokens_applied;
    out->weights_applied = as.weights_applied;
    out->tokens_stale = as.tokens_stale;
    out->fallbacks = as.fallbacks;
    out->resumes = as.resumes;
    out->fallback = as.fallback;
    out->welcomed = as.welcomed;
    out->period = as.period;
    out->interval = as.interval;
    /* Decoder verdicts here, the agent's own drops (wrong node, unknown
     * table) there: one set of reasons. */
    for (int r = 0; r < PROTO_E__COUNT; r++)
        out->proto.rejected[r] += as.proto.rejected[r];
    out->proto.rejected_total += as.proto.rejected_total;
    out->proto.ok += as.proto.ok;
}
