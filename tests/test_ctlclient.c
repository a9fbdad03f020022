/* test_ctlclient.c - Check suite for storage-node/daemon/ctlclient against a fake
 * controller (a ROUTER on a free loopback port): hello, welcome, reports,
 * tokens, silence fallback and resume, errors and bad messages, two
 * controllers and their epochs. */
#include <check.h>
#include <event2/event.h>
#include <errno.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "common/proto.h"
#include "common/shardgen.h"
#include "common/shardmap.h"
#include "storage-node/daemon/ctlclient.h"
#include "storage-node/core/sched.h"
#include "tests/testlib.h"

typedef struct {
    void *ctx, *router;
    char endpoint[128];
    proto_enc_t enc;
    proto_msg_t m;
    proto_stats_t st;
    unsigned char id[PROTO_ID_MAX]; /* the node's routing id (name + instance tag) */
    size_t idl;
} fake_t;

static void fake_start(fake_t *f)
{
    memset(f, 0, sizeof *f);
    f->ctx = zmq_ctx_new();
    f->router = zmq_socket(f->ctx, ZMQ_ROUTER);
    int one = 1, zero = 0;
    zmq_setsockopt(f->router, ZMQ_ROUTER_HANDOVER, &one, sizeof one);
    zmq_setsockopt(f->router, ZMQ_LINGER, &zero, sizeof zero);
    ck_assert_int_eq(zmq_bind(f->router, "tcp://127.0.0.1:*"), 0);
    size_t len = sizeof f->endpoint;
    zmq_getsockopt(f->router, ZMQ_LAST_ENDPOINT, f->endpoint, &len);
    proto_enc_init(&f->enc);
    proto_msg_init(&f->m);
}

static void fake_stop(fake_t *f)
{
    zmq_close(f->router);
    zmq_ctx_term(f->ctx);
    proto_enc_clear(&f->enc);
    proto_msg_clear(&f->m);
}

/* Ticks the client until the fake controller receives a message of `type`
 * (others are skipped) or `secs` pass.  Returns 1 if received (in f->m). */
static int wait_for(fake_t *f, ctlclient_t *c, proto_type_t type, double secs)
{
    double end = ctlclient_now() + secs;
    while (ctlclient_now() < end) {
        ctlclient_tick(c, ctlclient_now());
        zmq_pollitem_t pi = {f->router, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&pi, 1, 5) > 0) {
            int rc = proto_recv(f->router, f->id, sizeof f->id, &f->idl, &f->m, &f->st, NULL,
                                NULL, NULL, ZMQ_DONTWAIT);
            if (rc == 0 && f->m.type == type)
                return 1;
        }
    }
    return 0;
}

/* Waits for a report of period `period`; returns 1 if one came. */
static int wait_report(fake_t *f, ctlclient_t *c, uint64_t period, double secs)
{
    double end = ctlclient_now() + secs;
    while (ctlclient_now() < end)
        if (wait_for(f, c, PROTO_REPORT, end - ctlclient_now()) && f->m.period == period)
            return 1;
    return 0;
}

/* Ticks the client for `secs`. */
static void run_for(ctlclient_t *c, double secs)
{
    double end = ctlclient_now() + secs;
    while (ctlclient_now() < end) {
        ctlclient_tick(c, ctlclient_now());
        zmq_pollitem_t pi = {NULL, ctlclient_fd(c), ZMQ_POLLIN, 0};
        zmq_poll(&pi, 1, 5);
    }
}

/* Ticks the client until pred(stats) holds or `secs` pass (generous
 * timeouts: the test machine may be loaded).  Returns 1 if it held. */
typedef int (*pred_fn)(const ctlclient_stats_t *st, uint64_t arg);
static int run_until(ctlclient_t *c, pred_fn pred, uint64_t arg, double secs)
{
    double end = ctlclient_now() + secs;
    ctlclient_stats_t st;
    for (;;) {
        ctlclient_tick(c, ctlclient_now());
        ctlclient_stats(c, &st);
        if (pred(&st, arg))
            return 1;
        if (ctlclient_now() >= end)
            return 0;
        zmq_pollitem_t pi = {NULL, ctlclient_fd(c), ZMQ_POLLIN, 0};
        zmq_poll(&pi, 1, 5);
    }
}
static int is_welcomed(const ctlclient_stats_t *st, uint64_t a)
{
    (void)a;
    return st->agent.welcomed;
}
static int applied_at_least(const ctlclient_stats_t *st, uint64_t n)
{
    return st->agent.tokens_applied >= n;
}
static int stale_at_least(const ctlclient_stats_t *st, uint64_t n)
{
    return st->agent.tokens_stale >= n;
}
static int in_fallback(const ctlclient_stats_t *st, uint64_t want)
{
    return (uint64_t)st->agent.fallback == want;
}

static int stale_epoch_at_least(const ctlclient_stats_t *st, uint64_t n)
{
    return st->agent.stale_epoch >= n;
}

static int rejected_at_least(const ctlclient_stats_t *st, uint64_t n)
{
    return st->agent.proto.rejected_total >= n;
}

static void fake_send(fake_t *f, proto_msg_t *m)
{
    strcpy(m->node, "n1");
    ck_assert_int_eq(proto_send(f->router, f->id, f->idl, m, &f->enc, 0), 0);
}

/* The fake controller's period: short for the silence test; long for the
 * session test so that a loaded machine cannot push it over a boundary. */
static uint32_t g_period_ms = 300, g_intervals = 3;
static double g_heartbeat_s = 1.0;
/* The older cases check round robin in fallback: they ask for it. */
static agent_fallback_t g_mode = AGENT_FALLBACK_RR;

static void timing(proto_msg_t *m, uint64_t period, uint32_t remaining)
{
    uint32_t ims = g_period_ms / g_intervals;
    m->period = period;
    m->intervals = g_intervals;
    m->period_ms = g_period_ms;
    m->remaining_ms = remaining;
    m->interval = (g_period_ms - remaining) / ims;
    if (m->interval >= g_intervals)
        m->interval = g_intervals - 1;
}

static const char *ctl_names[] = {"red", "green"};

/* Sends tokens for red (r, l) and green (unlimited), with names if asked. */
/* Makes w (initialised) a welcome to period `period` with `remaining` ms
 * left, the controller's table 1 of ctl_names, holding the node's table
 * `peer`. */
static void welcome_msg(proto_msg_t *w, uint64_t period, uint32_t remaining, uint32_t peer)
{
    w->type = PROTO_WELCOME;
    timing(w, period, remaining);
    w->table = 1;
    w->peer_table = peer;
    w->has_names = 1;
    w->nnames = 2;
    w->names = ctl_names;
}

/* Sets the fake controller's period (period_ms in `intervals`) and sends a
 * welcome (welcome_msg) to period `period` with `remaining` ms left. */
static void send_welcome(fake_t *f, uint32_t period_ms, uint32_t intervals, uint64_t period,
                         uint32_t remaining, uint32_t peer)
{
    g_period_ms = period_ms;
    g_intervals = intervals;
    proto_msg_t w;
    proto_msg_init(&w);
    welcome_msg(&w, period, remaining, peer);
    fake_send(f, &w);
    proto_msg_clear(&w);
}

/* Makes m a tokens message of the controller's table `table` for period
 * `period` with `remaining` ms left, no records yet. */
static void tokens_msg(proto_msg_t *m, uint64_t period, uint32_t remaining, uint32_t table)
{
    proto_msg_init(m);
    m->type = PROTO_TOKENS;
    timing(m, period, remaining);
    m->table = table;
    m->count = 0;
}

static void send_tokens(fake_t *f, uint64_t period, int64_t r, int64_t l, int names, uint32_t peer)
{
    proto_msg_t m;
    tokens_msg(&m, period, g_period_ms - 50, 1);
    m.peer_table = peer;
    m.has_names = names;
    m.nnames = names ? 2 : 0;
    m.names = names ? ctl_names : NULL;
    m.count = 2;
    ck_assert_int_eq(proto_msg_reserve(&m, 2, 0), 0);
    m.tokens[0] = (proto_tokens_rec_t){.bucket = 0, .r_tokens = r, .l_tokens = l};
    m.tokens[1] = (proto_tokens_rec_t){.bucket = 1, .r_tokens = 7, .l_tokens = PROTO_UNLIMITED};
    fake_send(f, &m);
    proto_msg_clear(&m);
}

static ctlclient_t *client_h(fake_t *f, sched_t *s, double hello_s)
{
    ctlclient_config_t cc;
    ctlclient_config_defaults(&cc);
    cc.endpoint = f->endpoint;
    cc.agent.name = "n1";
    cc.agent.capacity = 1234;
    cc.hello_s = hello_s;
    cc.heartbeat_s = g_heartbeat_s;
    cc.agent.mode = g_mode;
    cc.agent.silence_intervals = 1.5;
    int err = 0;
    ctlclient_t *c = ctlclient_new(&cc, s, NULL, &err);
    ck_assert_msg(c != NULL, "ctlclient_new: %d", err);
    return c;
}

static ctlclient_t *client(fake_t *f, sched_t *s)
{
    return client_h(f, s, 0.1);
}

/* A fake controller, a tokens scheduler and a client: one test's session. */
typedef struct {
    fake_t f;
    sched_t *s;
    ctlclient_t *c;
} session_t;

/* Starts x: the fake controller, a tokens scheduler with the bucket
 * `bucket` (weight 1) unless NULL, and a client that has said hello. */
static void session_start(session_t *x, const char *bucket)
{
    fake_start(&x->f);
    x->s = sched_new(SCHED_POLICY_TOKENS, 0);
    if (bucket)
        ck_assert_int_eq(sched_add_bucket(x->s, bucket, 1), 0);
    x->c = client(&x->f, x->s);
    ck_assert(wait_for(&x->f, x->c, PROTO_HELLO, 10.0));
}

/* Undoes session_start() (or the same three made by hand). */
static void session_stop(session_t *x)
{
    ctlclient_destroy(&x->c);
    sched_destroy(&x->s);
    fake_stop(&x->f);
}

START_TEST(test_ctlclient_session)
{
    fake_t f;
    fake_start(&f);
    sched_t *s = sched_new(SCHED_POLICY_TOKENS, 0);
    ck_assert_int_eq(sched_add_bucket(s, "red", 1), 0);
    ck_assert_int_eq(sched_add_bucket(s, "blue", 1), 1);
    ctlclient_t *c = client(&f, s);
    ck_assert_int_ge(ctlclient_fd(c), 0);
    ck_assert_int_eq(sched_policy(s), SCHED_POLICY_RR); /* fallback until told */

    /* hello with our table */
    ck_assert(wait_for(&f, c, PROTO_HELLO, 10.0));
    ck_assert_uint_eq(f.m.capacity, 1234);
    ck_assert_uint_eq(f.m.nnames, 2);
    ck_assert_str_eq(f.m.names[0], "red");
    ck_assert_str_eq(f.m.names[1], "blue");
    uint32_t node_table = f.m.table;

    /* welcome with the controller's table: green is created on the node */
    /* 100 ms intervals; no period ends by itself */
    send_welcome(&f, 60000, 600, 5, 59990, node_table);
    ck_assert(run_until(c, is_welcomed, 0, 10.0));
    ctlclient_stats_t st;
    ck_assert_int_eq(sched_find_bucket(s, "green", 5), 2);

    /* traffic, then a report at the next interval start, with names since
     * our table grew (green) */
    static sched_item_t items[5];
    for (int i = 0; i < 5; i++)
        sched_enqueue(s, 0, &items[i]);
    ck_assert(wait_for(&f, c, PROTO_REPORT, 10.0));
    ctlclient_stats(c, &st);
    ck_assert_msg(f.m.period == 5,
                  "report period %llu interval %u, node period %llu; reports sent %llu, "
                  "dropped %llu, hellos %llu",
                  (unsigned long long)f.m.period, f.m.interval, (unsigned long long)st.agent.period,
                  (unsigned long long)st.sent_report, (unsigned long long)st.send_dropped,
                  (unsigned long long)st.sent_hello);
    ck_assert(f.m.has_names);
    ck_assert_uint_eq(f.m.nnames, 3);
    ck_assert_uint_eq(f.m.peer_table, 1);
    ck_assert_uint_eq(f.m.count, 1); /* only red is active */
    ck_assert_uint_eq(f.m.report[0].bucket, 0);
    ck_assert_uint_eq(f.m.report[0].queued, 5);
    ck_assert_uint_eq(f.m.report[0].arrivals_interval, 5);
    ck_assert_uint_eq(f.m.report[0].arrivals_period, 5);

    /* tokens by the controller's table (cached: no names) */
    send_tokens(&f, 5, 10, 20, 0, 0);
    ck_assert(run_until(c, applied_at_least, 2, 10.0));
    sched_bucket_stats_t bs;
    sched_bucket_stats(s, 0, &bs);
    ck_assert_int_eq(bs.r_tokens, 10);
    ck_assert_int_eq(bs.l_tokens, 20);
    sched_bucket_stats(s, 2, &bs);
    ck_assert_int_eq(bs.r_tokens, 7);
    ck_assert_int_eq(bs.l_tokens, SCHED_UNLIMITED);
    ck_assert_int_eq(sched_policy(s), SCHED_POLICY_TOKENS);
    ctlclient_stats(c, &st);
    ck_assert(!st.agent.fallback);
    ck_assert_uint_eq(st.agent.tokens_applied, 2);

    /* stale tokens (older period) are ignored */
    send_tokens(&f, 4, 99, 99, 0, 0);
    ck_assert(run_until(c, stale_at_least, 1, 10.0));
    sched_bucket_stats(s, 0, &bs);
    ck_assert_int_eq(bs.r_tokens, 10);
    ctlclient_stats(c, &st);
    ck_assert_uint_eq(st.agent.tokens_stale, 1);

    /* a newer period resets the counters; names go on until acknowledged */
    uint32_t node_table2 = f.m.table;
    send_tokens(&f, 6, 11, 21, 0, 0);
    ck_assert(wait_report(&f, c, 6, 10.0));
    ck_assert(f.m.has_names);
    ck_assert_uint_eq(f.m.count, 1);
    ck_assert_uint_eq(f.m.report[0].queued, 5);
    ck_assert_uint_eq(f.m.report[0].arrivals_period, 0);
    /* acknowledged: the next reports carry no names */
    send_tokens(&f, 7, 11, 21, 0, node_table2);
    ck_assert(wait_report(&f, c, 7, 10.0));
    ck_assert(!f.m.has_names);
    ck_assert_uint_eq(f.m.table, node_table2);
    ctlclient_destroy(&c);
    ck_assert_ptr_null(c);
    sched_destroy(&s);
    fake_stop(&f);
}
END_TEST

START_TEST(test_ctlclient_silence_fallback_resume)
{
    session_t x;
    session_start(&x, "red");
    double p1_end = ctlclient_now() + 0.28; /* the fake controller's clock */
    send_welcome(&x.f, 300, 3, 1, 280, x.f.m.table);
    send_tokens(&x.f, 1, 5, 5, 0, 0);
    ck_assert(run_until(x.c, applied_at_least, 2, 10.0));
    ck_assert(run_until(x.c, in_fallback, 0, 10.0));
    ck_assert_int_eq(sched_policy(x.s), SCHED_POLICY_TOKENS);
    ctlclient_stats_t st;

    /* a controller that only sends heartbeats (pushes skipped) for several
     * periods is alive: no fallback */
    double end = ctlclient_now() + 0.8, last = ctlclient_now(), gap = 0;
    while (ctlclient_now() < end) {
        if (ctlclient_now() - last > gap)
            gap = ctlclient_now() - last;
        last = ctlclient_now();
        proto_msg_t hb;
        proto_msg_init(&hb);
        hb.type = PROTO_HEARTBEAT;
        hb.has_timing = 1;
        double now = ctlclient_now(), k = now > p1_end ? ceil((now - p1_end) / 0.3) : 0;
        timing(&hb, 1 + (uint64_t)k, (uint32_t)((p1_end + k * 0.3 - now) * 1000));
        fake_send(&x.f, &hb);
        run_for(x.c, 0.04);
    }
    ctlclient_stats(x.c, &st);
    /* A loaded machine can stall this process (the fake controller) for
     * longer than the silence threshold (150 ms); then a fallback is right. */
    if (gap < 0.1)
        ck_assert_uint_eq(st.agent.fallbacks, 0);
    else
        fprintf(stderr, "test_ctlclient: stalled %.3f s; liveness check skipped\n", gap);
    uint64_t fb0 = st.agent.fallbacks;
    ck_assert_uint_ge(st.agent.period, 2);

    /* silence: after the period ends the node falls back */
    ck_assert(run_until(x.c, in_fallback, 1, 10.0));
    ctlclient_stats(x.c, &st);
    ck_assert_uint_ge(st.agent.fallbacks, fb0 > 0 ? fb0 : 1);
    uint64_t resumes = st.agent.resumes; /* the first tokens ended the start-up fallback */
    ck_assert_uint_ge(resumes, 1);
    ck_assert_int_eq(sched_policy(x.s), SCHED_POLICY_RR);
    /* tokens keep their last values in fallback */
    sched_bucket_stats_t bs;
    sched_bucket_stats(x.s, 0, &bs);
    ck_assert_int_eq(bs.r_tokens, 5);

    /* the controller comes back; + 1: the node may pass a boundary meanwhile */
    send_tokens(&x.f, st.agent.period + 1, 8, 9, 0, 0);
    ck_assert(run_until(x.c, in_fallback, 0, 10.0));
    ctlclient_stats(x.c, &st);
    ck_assert_uint_eq(st.agent.resumes, resumes + 1);
    ck_assert_int_eq(sched_policy(x.s), SCHED_POLICY_TOKENS);
    sched_bucket_stats(x.s, 0, &bs);
    ck_assert_int_eq(bs.r_tokens, 8);

    /* a restarted controller does not know us: it says so, we say hello */
    proto_msg_t e;
    proto_msg_init(&e);
    e.type = PROTO_ERROR;
    strcpy(e.code, "unknown_node");
    fake_send(&x.f, &e);
    ck_assert(wait_for(&x.f, x.c, PROTO_HELLO, 10.0));
    ck_assert(x.f.m.has_timing); /* our period, for the new controller */
    ck_assert_uint_ge(x.f.m.period, 2);
    session_stop(&x);
}
END_TEST

/* A controller that goes quiet mid-period leaves its tokens valid until the
 * period ends; only then does the node fall back. */
START_TEST(test_ctlclient_tokens_last_until_period_end)
{
    session_t x;
    session_start(&x, NULL);
    double t0 = ctlclient_now();
    /* 30 intervals of 100 ms; 1.4 s of it left */
    send_welcome(&x.f, 3000, 30, 7, 1400, x.f.m.table);
    proto_msg_t t;
    tokens_msg(&t, 7, 1400, 1);
    fake_send(&x.f, &t);
    ck_assert(run_until(x.c, in_fallback, 0, 10.0));
    /* silent for 0.8 s = 8 intervals, but still in period 7 */
    run_for(x.c, 0.8);
    ctlclient_stats_t st;
    ctlclient_stats(x.c, &st);
    if (ctlclient_now() - t0 < 1.3) /* unless the machine stalled us past the end */
        ck_assert_msg(!st.agent.fallback, "fell back mid-period");
    /* the period ends (1.4 s after t0): now the tokens are stale */
    ck_assert(run_until(x.c, in_fallback, 1, 10.0));
    ck_assert_double_ge(ctlclient_now() - t0, 1.35);
    ctlclient_stats(x.c, &st);
    ck_assert_uint_ge(st.agent.period, 8);
    session_stop(&x);
}
END_TEST

START_TEST(test_ctlclient_bad_messages)
{
    session_t x;
    session_start(&x, NULL);
    /* garbage frames, a wrong version, tokens for an unknown table */
    zmq_send(x.f.router, x.f.id, x.f.idl, ZMQ_SNDMORE);
    zmq_send(x.f.router, "\xff\x00junk", 6, 0);
    zmq_send(x.f.router, x.f.id, x.f.idl, ZMQ_SNDMORE);
    const char *v1 = "{\"v\":1,\"type\":\"heartbeat\",\"node\":\"n1\"}";
    zmq_send(x.f.router, v1, strlen(v1), 0);
    send_tokens(&x.f, 1, 5, 5, 0, 0); /* table 1 never sent */
    proto_msg_t hb; /* for another node */
    proto_msg_init(&hb);
    hb.type = PROTO_HEARTBEAT;
    strcpy(hb.node, "n9");
    ck_assert_int_eq(proto_send(x.f.router, x.f.id, x.f.idl, &hb, &x.f.enc, 0), 0);
    ck_assert(run_until(x.c, rejected_at_least, 4, 10.0));
    run_for(x.c, 0.05);
    ctlclient_stats_t st;
    ctlclient_stats(x.c, &st);
    ck_assert_uint_eq(st.agent.proto.rejected[PROTO_E_JSON], 1);
    ck_assert_uint_eq(st.agent.proto.rejected[PROTO_E_VERSION], 1);
    ck_assert_uint_eq(st.agent.proto.rejected[PROTO_E_TABLE], 1);
    ck_assert_uint_eq(st.agent.proto.rejected[PROTO_E_UNKNOWN_NODE], 1);
    ck_assert_uint_eq(st.agent.tokens_applied, 0);
    ck_assert(st.agent.fallback);

    /* bad configurations */
    ctlclient_config_t cc;
    ctlclient_config_defaults(&cc);
    int err = 0;
    cc.endpoint = x.f.endpoint;
    cc.agent.name = "has space";
    ck_assert_ptr_null(ctlclient_new(&cc, x.s, NULL, &err));
    ck_assert_int_eq(err, -EINVAL);
    cc.agent.name = "ok";
    cc.endpoint = "nonsense://x";
    ck_assert_ptr_null(ctlclient_new(&cc, x.s, NULL, &err));
    ck_assert_int_lt(err, 0);
    ctlclient_destroy(&x.c);
    ctlclient_destroy(&x.c); /* NULL is fine */
    session_stop(&x);
}
END_TEST

START_TEST(test_ctlclient_libevent)
{
    fake_t f;
    fake_start(&f);
    sched_t *s = sched_new(SCHED_POLICY_TOKENS, 0);
    sched_add_bucket(s, "red", 1);
    struct event_base *base = event_base_new();
    ck_assert_ptr_nonnull(base);
    /* hello retries every 20 s once connected and 2 intervals of 30 s: the
     * timer stays quiet after the welcome, so only the read event can
     * deliver the tokens within the test */
    ctlclient_t *c = client_h(&f, s, 20.0);
    ck_assert_int_eq(ctlclient_attach(c, base), 0);
    ck_assert_int_eq(ctlclient_attach(c, base), -EINVAL);
    /* Only the event loop drives the client from here on. */
    int got_hello = 0, sent = 0;
    ctlclient_stats_t st = {0};
    double end = ctlclient_now() + 10.0;
    while (ctlclient_now() < end) {
        event_base_loop(base, EVLOOP_NONBLOCK);
        zmq_pollitem_t pi = {f.router, 0, ZMQ_POLLIN, 0};
        zmq_poll(&pi, 1, 2);
        while (proto_recv(f.router, f.id, sizeof f.id, &f.idl, &f.m, &f.st, NULL, NULL, NULL,
                          ZMQ_DONTWAIT) == 0)
            if (f.m.type == PROTO_HELLO)
                got_hello = 1;
        if (got_hello && !sent) {
            send_welcome(&f, 60000, 2, 3, 59000, 1);
            send_tokens(&f, 3, 40, 50, 0, 1);
            sent = 1;
        }
        ctlclient_stats(c, &st);
        if (st.agent.tokens_applied >= 2)
            break;
    }
    ck_assert(got_hello);
    ck_assert_uint_ge(st.agent.tokens_applied, 2);
    ck_assert_uint_eq(st.sent_hello, 1);
    sched_bucket_stats_t bs;
    sched_bucket_stats(s, 0, &bs);
    ck_assert_int_eq(bs.r_tokens, 40);
    ck_assert_int_eq(sched_policy(s), SCHED_POLICY_TOKENS);
    ctlclient_destroy(&c);
    event_base_free(base);
    sched_destroy(&s);
    fake_stop(&f);
}
END_TEST

START_TEST(test_ctlclient_heartbeat)
{
    fake_t f;
    fake_start(&f);
    sched_t *s = sched_new(SCHED_POLICY_TOKENS, 0);
    g_heartbeat_s = 0.1;
    ctlclient_t *c = client(&f, s);
    ck_assert(wait_for(&f, c, PROTO_HELLO, 10.0));
    /* 30 s intervals: no report for a long time */
    send_welcome(&f, 60000, 2, 3, 59000, f.m.table);
    ck_assert(wait_for(&f, c, PROTO_HEARTBEAT, 10.0));
    ck_assert_uint_eq(f.m.peer_table, 1); /* it holds our table */
    ctlclient_stats_t st;
    ctlclient_stats(c, &st);
    ck_assert_uint_ge(st.sent_heartbeat, 1);
    ck_assert_uint_eq(st.sent_report, 0);
    ctlclient_destroy(&c);
    /* and a goodbye on the way out */
    zmq_pollitem_t pi = {f.router, 0, ZMQ_POLLIN, 0};
    int got_bye = 0;
    double end = ctlclient_now() + 10.0;
    while (!got_bye && ctlclient_now() < end && zmq_poll(&pi, 1, 100) >= 0) {
        while (proto_recv(f.router, f.id, sizeof f.id, &f.idl, &f.m, &f.st, NULL, NULL, NULL,
                          ZMQ_DONTWAIT) == 0)
            got_bye |= f.m.type == PROTO_GOODBYE;
    }
    ck_assert(got_bye);
    g_heartbeat_s = 1.0;
    sched_destroy(&s);
    fake_stop(&f);
}
END_TEST

/* The controller's counts hold as of the node's report: IOs served on the
 * old tokens since then come off them, R first, then L (hard limits). */
START_TEST(test_ctlclient_tokens_net_of_served)
{
    session_t x;
    session_start(&x, "red");
    /* two 30 s intervals: one report in this test; the next interval
     * starts in 0.5 s */
    send_welcome(&x.f, 60000, 2, 5, 30500, x.f.m.table);
    ck_assert(run_until(x.c, is_welcomed, 0, 10.0));
    static sched_item_t items[8];
    for (int i = 0; i < 8; i++)
        sched_enqueue(x.s, 0, &items[i]);
    ck_assert(wait_for(&x.f, x.c, PROTO_REPORT, 10.0)); /* nothing served yet */
    send_tokens(&x.f, 5, 10, 20, 0, 0);
    ck_assert(run_until(x.c, applied_at_least, 2, 10.0));
    sched_bucket_stats_t bs;
    sched_bucket_stats(x.s, 0, &bs);
    ck_assert_int_eq(bs.r_tokens, 10);
    ck_assert_int_eq(bs.l_tokens, 20);

    /* three IOs on those tokens before the controller's next counts */
    for (int i = 0; i < 3; i++)
        ck_assert_ptr_nonnull(sched_dispatch(x.s, 0, NULL));
    send_tokens(&x.f, 5, 10, 20, 0, 0);
    ck_assert(run_until(x.c, applied_at_least, 4, 10.0));
    sched_bucket_stats(x.s, 0, &bs);
    ck_assert_int_eq(bs.r_tokens, 7);
    ck_assert_int_eq(bs.l_tokens, 20);
    send_tokens(&x.f, 5, 2, 20, 0, 0);
    ck_assert(run_until(x.c, applied_at_least, 6, 10.0));
    sched_bucket_stats(x.s, 0, &bs);
    ck_assert_int_eq(bs.r_tokens, 0);
    ck_assert_int_eq(bs.l_tokens, 19);
    send_tokens(&x.f, 5, 1, 1, 0, 0);
    ck_assert(run_until(x.c, applied_at_least, 8, 10.0));
    sched_bucket_stats(x.s, 0, &bs);
    ck_assert_int_eq(bs.r_tokens, 0);
    ck_assert_int_eq(bs.l_tokens, 0);
    session_stop(&x);
}
END_TEST

static int weights_at_least(const ctlclient_stats_t *st, uint64_t n)
{
    return st->agent.weights_applied >= n;
}

static uint32_t weight_of(const sched_t *s, const char *name)
{
    int b = sched_find_bucket(s, name, strlen(name));
    ck_assert_int_ge(b, 0);
    sched_bucket_stats_t bs;
    ck_assert_int_eq(sched_bucket_stats(s, b, &bs), 0);
    return bs.weight;
}

/* The controller's bucket weights (sent with its table) reach the
 * scheduler and win over the node's own; a bucket the controller drops
 * gets the node's weight back; buckets only the node has keep theirs. */
START_TEST(test_ctlclient_weights)
{
    session_t x;
    fake_start(&x.f);
    g_period_ms = 60000;
    g_intervals = 2;
    x.s = sched_new(SCHED_POLICY_TOKENS, 1);
    ck_assert_int_eq(sched_add_bucket(x.s, "red", 4), 0); /* as from --config */
    ck_assert_int_eq(sched_add_bucket(x.s, "blue", 2), 1);
    x.c = client(&x.f, x.s);
    ck_assert(wait_for(&x.f, x.c, PROTO_HELLO, 10.0));
    proto_msg_t w;
    proto_msg_init(&w);
    welcome_msg(&w, 5, 59000, x.f.m.table); /* red, green */
    static const uint32_t w1[] = {10, 3};
    w.has_weights = 1;
    w.weights = w1;
    fake_send(&x.f, &w);
    ck_assert(run_until(x.c, weights_at_least, 2, 10.0));
    ck_assert_uint_eq(weight_of(x.s, "red"), 10);
    ck_assert_uint_eq(weight_of(x.s, "green"), 3);
    ck_assert_uint_eq(weight_of(x.s, "blue"), 2);

    /* A new table without red, green's weight changed. */
    proto_msg_t m;
    tokens_msg(&m, 5, 58000, 2);
    static const char *t2[] = {"green"};
    static const uint32_t w2[] = {5};
    m.has_names = 1;
    m.nnames = 1;
    m.names = t2;
    m.has_weights = 1;
    m.weights = w2;
    fake_send(&x.f, &m);
    ck_assert(run_until(x.c, weights_at_least, 4, 10.0));
    ck_assert_uint_eq(weight_of(x.s, "green"), 5);
    ck_assert_uint_eq(weight_of(x.s, "red"), 4); /* its own again */
    ck_assert_uint_eq(weight_of(x.s, "blue"), 2);

    /* A table without weights leaves them alone. */
    m.table = 3;
    m.has_weights = 0;
    m.weights = NULL;
    fake_send(&x.f, &m);
    run_for(x.c, 0.3);
    ck_assert_uint_eq(weight_of(x.s, "green"), 5);
    ctlclient_stats_t st;
    ctlclient_stats(x.c, &st);
    ck_assert_uint_eq(st.agent.weights_applied, 4);
    ck_assert_uint_eq(st.agent.proto.rejected_total, 0);
    proto_msg_clear(&w);
    proto_msg_clear(&m);
    session_stop(&x);
}
END_TEST

/* Two controllers: the node says hello and reports to both, obeys the one
 * with the highest epoch, ignores the other's lower or equal epoch, and
 * follows a new leader with a higher epoch. */
START_TEST(test_ctlclient_two_controllers_epochs)
{
    fake_t a, b;
    fake_start(&a);
    fake_start(&b);
    sched_t *s = sched_new(SCHED_POLICY_TOKENS, 0);
    sched_add_bucket(s, "red", 1);
    char list[300];
    snprintf(list, sizeof list, "%s,%s", a.endpoint, b.endpoint);
    ctlclient_config_t cc;
    ctlclient_config_defaults(&cc);
    cc.endpoint = list;
    cc.agent.name = "n1";
    cc.hello_s = 0.1;
    int err = 0;
    ctlclient_t *c = ctlclient_new(&cc, s, NULL, &err);
    ck_assert_msg(c != NULL, "ctlclient_new: %d", err);
    ck_assert_int_eq(ctlclient_nendpoints(c), 2);
    ck_assert_int_ge(ctlclient_fd_at(c, 1), 0);
    ck_assert_int_lt(ctlclient_fd_at(c, 2), 0);
    ck_assert(wait_for(&a, c, PROTO_HELLO, 10.0));
    ck_assert(wait_for(&b, c, PROTO_HELLO, 10.0));
    uint32_t node_table = b.m.table;
    g_period_ms = 3000;
    g_intervals = 3;
    /* a leads at epoch 4 */
    proto_msg_t w;
    proto_msg_init(&w);
    welcome_msg(&w, 1, 2900, node_table);
    w.epoch = 4;
    fake_send(&a, &w);
    ck_assert(run_until(c, is_welcomed, 0, 10.0));
    proto_msg_t m;
    tokens_msg(&m, 1, 2800, 1);
    m.peer_table = node_table;
    m.epoch = 4;
    m.count = 1;
    ck_assert_int_eq(proto_msg_reserve(&m, 1, 0), 0);
    m.tokens[0] = (proto_tokens_rec_t){.bucket = 0, .r_tokens = 11, .l_tokens = 12};
    fake_send(&a, &m);
    ck_assert(run_until(c, applied_at_least, 1, 10.0));
    ctlclient_stats_t st;
    ctlclient_stats(c, &st);
    ck_assert_uint_eq(st.agent.epoch, 4);
    ck_assert_int_eq(st.agent.leader, 0);
    ck_assert_str_eq(st.leader_endpoint, a.endpoint);
    ck_assert(st.agent.welcomed);
    ck_assert_int_eq(st.endpoints, 2);
    /* both hear the reports */
    ck_assert(wait_for(&a, c, PROTO_REPORT, 10.0));
    ck_assert(wait_for(&b, c, PROTO_REPORT, 10.0));
    /* b at a lower epoch, then at a's epoch: ignored */
    m.epoch = 3;
    m.tokens[0].r_tokens = 99;
    m.has_names = 1;
    m.nnames = 2;
    m.names = ctl_names;
    fake_send(&b, &m);
    m.epoch = 4;
    fake_send(&b, &m);
    ck_assert(run_until(c, stale_epoch_at_least, 2, 10.0));
    sched_bucket_stats_t bs;
    sched_bucket_stats(s, 0, &bs);
    ck_assert_int_le(bs.r_tokens, 11);
    /* b takes over at epoch 5 */
    m.epoch = 5;
    fake_send(&b, &m);
    ck_assert(run_until(c, applied_at_least, 2, 10.0));
    ctlclient_stats(c, &st);
    ck_assert_uint_eq(st.agent.epoch, 5);
    ck_assert_int_eq(st.agent.leader, 1);
    sched_bucket_stats(s, 0, &bs);
    ck_assert_int_ge(bs.r_tokens, 90); /* 99 less what it served since */
    /* a, deposed, pushes again: ignored */
    m.epoch = 4;
    m.tokens[0].r_tokens = 1;
    fake_send(&a, &m);
    ck_assert(run_until(c, stale_epoch_at_least, 3, 10.0));
    sched_bucket_stats(s, 0, &bs);
    ck_assert_int_ge(bs.r_tokens, 90);
    proto_msg_clear(&m);
    ctlclient_destroy(&c);
    sched_destroy(&s);
    fake_stop(&a);
    fake_stop(&b);
    g_period_ms = 300;
}
END_TEST

START_TEST(test_ctlclient_bad_endpoint_lists)
{
    sched_t *s = sched_new(SCHED_POLICY_TOKENS, 0);
    ctlclient_config_t cc;
    ctlclient_config_defaults(&cc);
    cc.agent.name = "n1";
    const char *bad[] = {"", ",", "tcp://127.0.0.1:1,", ",tcp://127.0.0.1:1",
                         "tcp://127.0.0.1:1,,tcp://127.0.0.1:2",
                         ("tcp://a:1,tcp://a:2,tcp://a:3,tcp://a:4,tcp://a:5,tcp://a:6,tcp://a:7,"
                          "tcp://a:8,tcp://a:9")}; /* one string: too many endpoints */
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int err = 0;
        cc.endpoint = bad[i];
        ck_assert_ptr_null(ctlclient_new(&cc, s, NULL, &err));
        ck_assert_int_eq(err, -EINVAL);
    }
    sched_destroy(&s);
}
END_TEST

/* The node of the shard-session tests: buckets red, blue, green, amber
 * (0-3) under the tokens policy. */
static sched_t *four_buckets(void)
{
    sched_t *s = sched_new(SCHED_POLICY_TOKENS, 0);
    const char *mine[] = {"red", "blue", "green", "amber"};
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(sched_add_bucket(s, mine[i], 1), i);
    return s;
}

/* *cc: the session of node n1's slot 1 of 2 shard slots to the fake
 * controller f, failing static, a hello every 0.1 s. */
static void slot1_config(ctlclient_config_t *cc, const fake_t *f)
{
    ctlclient_config_defaults(cc);
    cc->endpoint = f->endpoint;
    cc->agent.name = "n1";
    cc->hello_s = 0.1;
    cc->agent.mode = AGENT_FALLBACK_STATIC;
    cc->shards = 2; /* slots */
    cc->shard = 1;
}

/* A session with shard 1 of 2 (red and green are shard 0's buckets,
 * blue and amber shard 1's; tests/test_shardmap.c pins the rule): the hello
 * and the reports name only the shard's buckets, by the shard's indexes; a
 * controller table naming another shard's bucket is refused whole (not
 * welcomed, counted); the shard's own table is taken and its tokens land
 * on its bucket only. */
START_TEST(test_ctlclient_shard_session)
{
    fake_t f;
    fake_start(&f);
    sched_t *s = four_buckets();
    ctlclient_config_t cc;
    slot1_config(&cc, &f);
    int err = 0;
    ctlclient_t *c = ctlclient_new(&cc, s, NULL, &err);
    ck_assert_msg(c != NULL, "ctlclient_new: %d", err);
    int said = 0; /* (hellos of the old mapping may still be on the way) */
    for (int i = 0; i < 20 && !said; i++)
        said = wait_for(&f, c, PROTO_HELLO, 10.0) && f.m.nnames == 2;
    ck_assert(said);
    ck_assert_str_eq(f.m.names[0], "blue");
    ck_assert_str_eq(f.m.names[1], "amber");
    uint32_t node_table = f.m.table;

    /* shard 0's table: refused, nothing taken */
    g_period_ms = 60000;
    g_intervals = 600;
    const char *other[] = {"blue", "green"};
    proto_msg_t w;
    proto_msg_init(&w);
    welcome_msg(&w, 5, 59990, node_table);
    w.names = other;
    fake_send(&f, &w);
    run_for(c, 0.3);
    ctlclient_stats_t st;
    ctlclient_stats(c, &st);
    ck_assert(!st.agent.welcomed);
    ck_assert_uint_eq(st.shard_refused, 1);
    ck_assert_int_eq(sched_find_bucket(s, "green", 5), 2); /* not created anew: it exists */

    /* the shard's own table */
    const char *ours[] = {"blue"};
    w.names = ours;
    w.nnames = 1;
    fake_send(&f, &w);
    proto_msg_clear(&w);
    ck_assert(run_until(c, is_welcomed, 0, 10.0));

    /* traffic on red (shard 0) and amber (shard 1): amber alone is
     * reported, as the shard's bucket 1 */
    static sched_item_t items[6];
    for (int i = 0; i < 3; i++) {
        sched_enqueue(s, 0, &items[i]);
        sched_enqueue(s, 3, &items[3 + i]);
    }
    ck_assert(wait_for(&f, c, PROTO_REPORT, 10.0));
    ck_assert_uint_eq(f.m.count, 1);
    ck_assert_uint_eq(f.m.report[0].bucket, 1);
    ck_assert_uint_eq(f.m.report[0].queued, 3);

    /* tokens for the controller's bucket 0 (blue) land on blue */
    proto_msg_t m;
    tokens_msg(&m, 5, g_period_ms - 50, 1);
    m.count = 1;
    ck_assert_int_eq(proto_msg_reserve(&m, 1, 0), 0);
    m.tokens[0] = (proto_tokens_rec_t){.bucket = 0, .r_tokens = 4, .l_tokens = 9};
    fake_send(&f, &m);
    proto_msg_clear(&m);
    ck_assert(run_until(c, applied_at_least, 1, 10.0));
    sched_bucket_stats_t bs;
    sched_bucket_stats(s, 1, &bs);
    ck_assert_int_eq(bs.r_tokens, 4);
    ck_assert_int_eq(bs.l_tokens, 9);
    ctlclient_destroy(&c);
    sched_destroy(&s);
    fake_stop(&f);
}
END_TEST

/* K changing at run time: the caller's configuration and client, as
 * noderun.c keeps them (a newer configuration taken, the session
 * remapped). */
static struct {
    shardgen_t g;
    ctlclient_t *c;
    int calls;
} g_sh;

static void on_shards(void *arg, const proto_msg_t *m, double now)
{
    (void)arg;
    shardgen_t g = {.k = (int)m->shards_k, .gen = m->shards_gen, .next_k = (int)m->shards_next,
                    .next_gen = m->shards_next ? m->shards_gen + 1 : 0,
                    .from_ms = (int64_t)m->shards_from};
    g_sh.calls++;
    if (shardgen_valid(&g) && shardgen_newer(&g, &g_sh.g)) {
        g_sh.g = g;
        ck_assert_int_eq(ctlclient_remap(g_sh.c, now), 0);
    }
}

/* 1 -> 2 shards seen from the session of slot 1 (blue and amber are shard
 * 1's under K = 2, every bucket shard 0's under K = 1): idle under K = 1
 * (its hello names nothing; a table naming blue is refused), and once a
 * controller's message says the change it names blue and amber in a
 * hello at once (the shard a bucket moves to hears it before the change's
 * period) and takes a table naming blue, in the same message. */
START_TEST(test_ctlclient_shard_change)
{
    fake_t f;
    fake_start(&f);
    sched_t *s = four_buckets();
    memset(&g_sh, 0, sizeof g_sh);
    g_sh.g = shardgen_steady(1);
    ctlclient_config_t cc;
    slot1_config(&cc, &f);
    cc.sg = &g_sh.g;
    cc.on_shards = on_shards;
    int err = 0;
    ctlclient_t *c = g_sh.c = ctlclient_new(&cc, s, NULL, &err);
    ck_assert_msg(c != NULL, "ctlclient_new: %d", err);
    ck_assert(wait_for(&f, c, PROTO_HELLO, 10.0));
    ck_assert_uint_eq(f.m.nnames, 0); /* not in the map of K = 1 */
    g_period_ms = 60000;
    g_intervals = 600;
    const char *ours[] = {"blue"};
    proto_msg_t w;
    proto_msg_init(&w);
    welcome_msg(&w, 5, 59990, f.m.table);
    w.names = ours;
    w.nnames = 1;
    w.shards_k = 1; /* no change yet: blue is shard 0's */
    w.shards_gen = 1;
    fake_send(&f, &w);
    run_for(c, 0.3);
    ctlclient_stats_t st;
    ctlclient_stats(c, &st);
    ck_assert(!st.agent.welcomed);
    ck_assert_uint_eq(st.shard_refused, 1);
    ck_assert_int_eq(g_sh.calls, 1);
    /* the change under way: the same table taken, blue and amber said */
    w.shards_next = 2;
    w.shards_from = UINT64_C(4102444800000);
    fake_send(&f, &w);
    proto_msg_clear(&w);
    int said = 0; /* (hellos of the old mapping may still be on the way) */
    for (int i = 0; i < 20 && !said; i++)
        said = wait_for(&f, c, PROTO_HELLO, 10.0) && f.m.nnames == 2;
    ck_assert(said);
    ck_assert_str_eq(f.m.names[0], "blue");
    ck_assert_str_eq(f.m.names[1], "amber");
    ck_assert(run_until(c, is_welcomed, 0, 10.0));
    ctlclient_stats(c, &st);
    ck_assert_uint_eq(st.shard_refused, 1);
    ck_assert_int_eq(g_sh.g.next_k, 2);
    /* an older configuration changes nothing (the caller keeps the newer) */
    ck_assert_int_eq(ctlclient_remap(c, ctlclient_now()), 0);
    ctlclient_destroy(&c);
    sched_destroy(&s);
    fake_stop(&f);
}
END_TEST

/* The wall clock in Unix milliseconds (the shards key's instants). */
static int64_t wall_ms(void)
{
    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    return (int64_t)rt.tv_sec * 1000 + rt.tv_nsec / 1000000;
}

/* K 2 -> 1 -> 2 seen from the session of slot 1, welcomed and following:
 * it idles while its shard is out (its agent not ticked), and when a
 * change names the shard again it follows on without falling back at
 * once: its leader's silence counts from its return, not from before the
 * idling (it_reshard_down's grow-back: every node warned "silent for 5 s:
 * falling back to static" the moment its slot came back). */
START_TEST(test_ctlclient_shard_idle_resume)
{
    fake_t f;
    fake_start(&f);
    sched_t *s = four_buckets();
    memset(&g_sh, 0, sizeof g_sh);
    g_sh.g = shardgen_steady(2);
    ctlclient_config_t cc;
    slot1_config(&cc, &f);
    cc.agent.silence_intervals = 1.0;
    cc.sg = &g_sh.g;
    int err = 0;
    ctlclient_t *c = g_sh.c = ctlclient_new(&cc, s, NULL, &err);
    ck_assert_msg(c != NULL, "ctlclient_new: %d", err);
    int said = 0;
    for (int i = 0; i < 20 && !said; i++)
        said = wait_for(&f, c, PROTO_HELLO, 10.0) && f.m.nnames == 2;
    ck_assert(said);
    /* periods of 2 s in 4 intervals; 300 ms left of period 5 */
    g_period_ms = 2000;
    g_intervals = 4;
    const char *ours[] = {"blue", "amber"};
    proto_msg_t w;
    proto_msg_init(&w);
    welcome_msg(&w, 5, 300, f.m.table);
    w.names = ours;
    w.nnames = 2;
    fake_send(&f, &w);
    proto_msg_clear(&w);
    ck_assert(run_until(c, is_welcomed, 0, 10.0));
    proto_msg_t m;
    tokens_msg(&m, 5, 290, 1);
    m.count = 1;
    ck_assert_int_eq(proto_msg_reserve(&m, 1, 0), 0);
    m.tokens[0] = (proto_tokens_rec_t){.bucket = 0, .r_tokens = 4, .l_tokens = 9};
    fake_send(&f, &m);
    proto_msg_clear(&m);
    ck_assert(run_until(c, applied_at_least, 1, 10.0));
    ck_assert(run_until(c, in_fallback, 0, 10.0));
    ctlclient_stats_t st;
    ctlclient_stats(c, &st);
    uint64_t fb = st.agent.fallbacks;

    /* K 2 -> 1, its period passed: the slot idles past a period boundary */
    g_sh.g = (shardgen_t){.k = 2, .gen = 1, .next_k = 1, .next_gen = 2, .from_ms = wall_ms() - 1000};
    ck_assert_int_eq(ctlclient_remap(c, ctlclient_now()), 0);
    run_for(c, 1.2);
    ctlclient_stats(c, &st);
    ck_assert_str_eq(st.state, "idle");
    ck_assert_uint_eq(st.agent.fallbacks, fb);

    /* K 1 -> 2 under way: back in, following, no fallback at its return */
    g_sh.g = (shardgen_t){.k = 1, .gen = 2, .next_k = 2, .next_gen = 3, .from_ms = wall_ms() + 60000};
    ck_assert_int_eq(ctlclient_remap(c, ctlclient_now()), 0);
    run_for(c, 0.2);
    ctlclient_stats(c, &st);
    ck_assert_str_eq(st.state, "following");
    ck_assert_uint_eq(st.agent.fallbacks, fb);
    ck_assert_uint_eq(st.agent.fallback, 0);
    ctlclient_destroy(&c);
    sched_destroy(&s);
    fake_stop(&f);
}
END_TEST

/* Names in parts with shards (issue 30): a node table of 10,000 buckets
 * (more than two parts) cut to shard 1 of 2.  The hello's first part, the
 * names messages after it and the controller's counts are all of the
 * shard's table: parts are contiguous in the shard's indexes, of the
 * shard's size, only the shard's names, each once; once the controller
 * holds them all, a report names the shard's last bucket by its shard
 * index. */
#define SHP_N 10000
START_TEST(test_ctlclient_shard_names_in_parts)
{
    fake_t f;
    fake_start(&f);
    sched_t *s = sched_new(SCHED_POLICY_TOKENS, 0);
    static char bname[SHP_N][16];
    static const char *want[SHP_N]; /* the shard's table, in the node's order */
    size_t nf = 0;
    int last = -1; /* the scheduler index of the shard's last bucket */
    for (int i = 0; i < SHP_N; i++) {
        snprintf(bname[i], sizeof bname[i], "k%05d", i);
        ck_assert_int_eq(sched_add_bucket(s, bname[i], 1), i);
        if (shardmap_of(bname[i], 2) == 1) {
            want[nf++] = bname[i];
            last = i;
        }
    }
    ck_assert(nf > 0 && nf < SHP_N);
    ctlclient_config_t cc;
    ctlclient_config_defaults(&cc);
    cc.endpoint = f.endpoint;
    cc.agent.name = "n1";
    cc.hello_s = 0.1;
    cc.agent.mode = AGENT_FALLBACK_STATIC;
    cc.shards = 2;
    cc.shard = 1;
    int err = 0;
    ctlclient_t *c = ctlclient_new(&cc, s, NULL, &err);
    ck_assert_msg(c != NULL, "ctlclient_new: %d", err);
    ck_assert(wait_for(&f, c, PROTO_HELLO, 10.0));
    ck_assert(f.m.parts);
    ck_assert_uint_eq(f.m.names_of, nf); /* the shard's table, not the node's */
    size_t got = f.m.nnames;
    ck_assert(got > 0 && got < nf);
    for (size_t j = 0; j < got; j++)
        ck_assert_str_eq(f.m.names[j], want[j]);
    uint32_t node_table = f.m.table;

    /* welcomed, holding the first part */
    g_period_ms = 60000;
    g_intervals = 600;
    proto_msg_t w;
    proto_msg_init(&w);
    welcome_msg(&w, 5, 59990, node_table);
    const char *ours[] = {want[0]};
    w.names = ours;
    w.nnames = 1;
    w.parts = 1;
    w.has_peer_names = 1;
    w.peer_names = got;
    fake_send(&f, &w);
    proto_msg_clear(&w);
    ck_assert(run_until(c, is_welcomed, 0, 10.0));

    /* the rest in names messages, each the next of the shard's table */
    double end = ctlclient_now() + 10.0;
    while (got < nf && ctlclient_now() < end) {
        if (!wait_for(&f, c, PROTO_NAMES, end - ctlclient_now()))
            break;
        ck_assert_uint_eq(f.m.table, node_table);
        ck_assert_uint_eq(f.m.names_of, nf);
        ck_assert_uint_eq(f.m.names_at, got); /* nothing twice, nothing skipped */
        ck_assert(f.m.nnames <= nf - got);
        for (size_t j = 0; j < f.m.nnames; j++)
            ck_assert_str_eq(f.m.names[j], want[got + j]);
        got += f.m.nnames;
    }
    ck_assert_uint_eq(got, nf);

    /* the controller holds the shard's whole table: traffic on its last
     * bucket is reported as the shard's bucket nf - 1 */
    proto_msg_t m;
    tokens_msg(&m, 5, g_period_ms - 50, 1);
    m.peer_table = node_table;
    m.has_peer_names = 1;
    m.peer_names = nf;
    fake_send(&f, &m);
    proto_msg_clear(&m);
    static sched_item_t items[3];
    for (int i = 0; i < 3; i++)
        sched_enqueue(s, last, &items[i]);
    int seen = 0;
    end = ctlclient_now() + 10.0;
    while (!seen && ctlclient_now() < end && wait_for(&f, c, PROTO_REPORT, end - ctlclient_now()))
        for (size_t i = 0; i < f.m.count; i++) {
            ck_assert(f.m.report[i].bucket < nf);
            if (f.m.report[i].bucket == nf - 1 && f.m.report[i].queued == 3)
                seen = 1;
        }
    ck_assert(seen);
    ctlclient_destroy(&c);
    sched_destroy(&s);
    fake_stop(&f);
}
END_TEST

/* A remap over more than one names part (issue 30): a node of 10,000
 * buckets with names of 30 bytes (about 300 KiB of names; shard 1's part
 * about 150 KiB, far over the 64 KiB a message's names take) in slot 1 of
 * a cluster of K = 1 (the slot out of the map: its hello names nothing).
 * A welcome says K changes to 2: the session maps its table anew (shard 1
 * of 2 under either map) and says hello with the first part of the new
 * table (names_of its whole size); welcomed on it, it sends the rest in
 * names messages, each the next, none twice, until the controller holds
 * the shard's whole table. */
#define SHR_N 10000
START_TEST(test_ctlclient_shard_remap_in_parts)
{
    fake_t f;
    fake_start(&f);
    sched_t *s = sched_new(SCHED_POLICY_TOKENS, 0);
    static char bname[SHR_N][32];
    static const char *want[SHR_N];
    size_t nf = 0, bytes = 0;
    for (int i = 0; i < SHR_N; i++) {
        snprintf(bname[i], sizeof bname[i], "a-rather-long-bucket-name-%05d", i);
        ck_assert_int_eq(sched_add_bucket(s, bname[i], 1), i);
        if (shardmap_of(bname[i], 2) == 1) {
            want[nf++] = bname[i];
            bytes += strlen(bname[i]);
        }
    }
    ck_assert_uint_gt(bytes, 2 * 65536);
    memset(&g_sh, 0, sizeof g_sh);
    g_sh.g = shardgen_steady(1);
    ctlclient_config_t cc;
    ctlclient_config_defaults(&cc);
    cc.endpoint = f.endpoint;
    cc.agent.name = "n1";
    cc.hello_s = 0.1;
    cc.agent.mode = AGENT_FALLBACK_STATIC;
    cc.shards = 2;
    cc.shard = 1;
    cc.sg = &g_sh.g;
    cc.on_shards = on_shards;
    int err = 0;
    ctlclient_t *c = g_sh.c = ctlclient_new(&cc, s, NULL, &err);
    ck_assert_msg(c != NULL, "ctlclient_new: %d", err);
    ck_assert(wait_for(&f, c, PROTO_HELLO, 10.0));
    ck_assert_uint_eq(f.m.nnames, 0); /* out of the map of K = 1 */
    g_period_ms = 60000;
    g_intervals = 600;
    proto_msg_t w;
    proto_msg_init(&w);
    welcome_msg(&w, 5, 59990, f.m.table);
    const char *ours[] = {want[0]};
    w.names = ours;
    w.nnames = 1;
    w.shards_k = 1;
    w.shards_gen = 1;
    w.shards_next = 2;
    w.shards_from = UINT64_C(4102444800000);
    fake_send(&f, &w);
    proto_msg_clear(&w);
    int said = 0; /* (hellos of the old mapping may still be on the way) */
    for (int i = 0; i < 20 && !said; i++)
        said = wait_for(&f, c, PROTO_HELLO, 10.0) && f.m.names_of == nf;
    ck_assert(said);
    ck_assert(f.m.parts);
    size_t got = f.m.nnames;
    ck_assert(got > 0 && got < nf);
    for (size_t j = 0; j < got; j++)
        ck_assert_str_eq(f.m.names[j], want[j]);
    uint32_t node_table = f.m.table;
    proto_msg_init(&w);
    welcome_msg(&w, 5, 59980, node_table);
    w.names = ours;
    w.nnames = 1;
    w.parts = 1;
    w.has_peer_names = 1;
    w.peer_names = got;
    w.shards_k = 1;
    w.shards_gen = 1;
    w.shards_next = 2;
    w.shards_from = UINT64_C(4102444800000);
    fake_send(&f, &w);
    proto_msg_clear(&w);
    ck_assert(run_until(c, is_welcomed, 0, 10.0));
    double end = ctlclient_now() + 10.0;
    while (got < nf && ctlclient_now() < end) {
        if (!wait_for(&f, c, PROTO_NAMES, end - ctlclient_now()))
            break;
        if (f.m.table != node_table)
            continue;
        ck_assert_uint_eq(f.m.names_of, nf);
        ck_assert_uint_eq(f.m.names_at, got); /* nothing twice, nothing skipped */
        ck_assert(f.m.nnames <= nf - got);
        for (size_t j = 0; j < f.m.nnames; j++)
            ck_assert_str_eq(f.m.names[j], want[got + j]);
        got += f.m.nnames;
    }
    ck_assert_uint_eq(got, nf);
    ctlclient_stats_t st;
    ctlclient_stats(c, &st);
    ck_assert(st.agent.welcomed);
    ck_assert_uint_eq(st.shard_refused, 0);
    ctlclient_destroy(&c);
    sched_destroy(&s);
    fake_stop(&f);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {
        test_ctlclient_session, test_ctlclient_silence_fallback_resume,
        test_ctlclient_tokens_last_until_period_end, test_ctlclient_bad_messages,
        test_ctlclient_libevent, test_ctlclient_heartbeat, test_ctlclient_tokens_net_of_served,
        test_ctlclient_weights, test_ctlclient_two_controllers_epochs,
        test_ctlclient_bad_endpoint_lists, test_ctlclient_shard_session, test_ctlclient_shard_change, test_ctlclient_shard_idle_resume,
        test_ctlclient_shard_names_in_parts, test_ctlclient_shard_remap_in_parts
    };
    return testlib_run_timed("ctlclient", 60, tests, sizeof tests / sizeof tests[0]);
}
