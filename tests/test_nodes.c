/* test_nodes.c - Check suite for controller/daemon/nodes: the controller's node socket driven over an inproc ROUTER/DEALER pair: hellos and welcomes, reports, the round's tokens or heartbeats (push_msg), refusals (unknown node, unknown table, duplicate name), goodbyes and fenced sends. */
#include <check.h>
#include <string.h>
#include <zmq.h>

#include "common/mono.h"
#include "common/proto.h"
#include "controller/ctrl.h"
#include "controller/daemon/clock.h"
#include "controller/daemon/nodes.h"
#include "controller/daemon/timing.h"
#include "tests/testlib.h"

#define EP "inproc://test-nodes"

/* Two buckets: gold reserves 100 IOs/s, red is limited to 50. */
static const char buckets[] = "{\"buckets\":["
                              "{\"name\":\"gold\",\"reservation\":100},"
                              "{\"name\":\"red\",\"reservation\":0,\"limit\":50,\"weight\":3}]}";

/* The controller's side (ctrl_t, clock, node endpoint on a bound ROUTER)
 * and what its hooks saw. */
typedef struct {
    void *zctx, *router;
    ctrl_t *c;
    pclock_t clk;
    timing_t tm;
    nodes_t ns;
    int ticks;             /* hooks.tick calls */
    int fence;             /* hooks.may_send says no */
    proto_enc_t enc;       /* the nodes' encoder */
} fx_t;

static fx_t fx;
static int hello_renew; /* node_hello() offers changed grants */

static void on_tick(void *arg, double now)
{
    (void)now;
    ((fx_t *)arg)->ticks++;
}

static void on_adopt(void *arg, const pclock_reading_t *r, double now)
{
    (void)arg;
    (void)r;
    (void)now;
}

static int may_send(void *arg, double now)
{
    (void)now;
    return !((fx_t *)arg)->fence;
}

static void setup(void)
{
    memset(&fx, 0, sizeof fx);
    ctrl_config_t cfg = ctrl_config_default();
    cfg.period_s = 1;
    cfg.intervals = 2;
    ck_assert_ptr_nonnull(fx.c = ctrl_new(&cfg));
    bucketfile_t *bf = NULL;
    ck_assert_int_eq(bucketfile_parse(buckets, strlen(buckets), NULL, &bf, NULL), 0);
    ck_assert_int_eq(ctrl_set_buckets(fx.c, bf), 0);
    bucketfile_destroy(&bf);
    ck_assert_ptr_nonnull(fx.zctx = zmq_ctx_new());
    ck_assert_ptr_nonnull(fx.router = zmq_socket(fx.zctx, ZMQ_ROUTER));
    int linger = 0, one = 1;
    zmq_setsockopt(fx.router, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(fx.router, ZMQ_ROUTER_MANDATORY, &one, sizeof one);
    zmq_setsockopt(fx.router, ZMQ_ROUTER_HANDOVER, &one, sizeof one);
    ck_assert_int_eq(zmq_bind(fx.router, EP), 0);
    pclock_init(&fx.clk, 1, 2, 0.25, mono_now());
    nodes_init(&fx.ns, fx.router, fx.c, &fx.clk, &fx.tm.cur,
               &(nodes_hooks_t){.adopt = on_adopt, .tick = on_tick, .may_send = may_send,
                                .arg = &fx});
    proto_enc_init(&fx.enc);
}

static void teardown(void)
{
    nodes_clear(&fx.ns);
    proto_enc_clear(&fx.enc);
    zmq_close(fx.router);
    zmq_ctx_term(fx.zctx);
    ctrl_destroy(&fx.c);
}

/* A node process `name` (instance `instance`, 0: none) connected to the
 * endpoint. */
static void *node_open(const char *name, uint64_t instance)
{
    void *s = zmq_socket(fx.zctx, ZMQ_DEALER);
    ck_assert_ptr_nonnull(s);
    unsigned char id[PROTO_ID_MAX];
    size_t n = proto_node_id(name, instance, id);
    int linger = 0, to = 2000;
    zmq_setsockopt(s, ZMQ_ROUTING_ID, id, n);
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(s, ZMQ_RCVTIMEO, &to, sizeof to);
    ck_assert_int_eq(zmq_connect(s, EP), 0);
    return s;
}

/* Sends m from node socket s and lets the endpoint handle it. */
static void node_send(void *s, const proto_msg_t *m)
{
    ck_assert_int_eq(proto_send(s, NULL, 0, m, &fx.enc, 0), 0);
    zmq_pollitem_t it = {fx.router, 0, ZMQ_POLLIN, 0};
    ck_assert_int_eq(zmq_poll(&it, 1, 2000), 1);
    nodes_drain(&fx.ns);
}

/* Receives the endpoint's next message to node socket s into *d (0), or
 * -EAGAIN if none comes within `ms` milliseconds. */
static int node_recv(void *s, proto_msg_t *d, int ms)
{
    zmq_pollitem_t it = {s, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&it, 1, ms) != 1)
        return -EAGAIN;
    proto_stats_t st = {0};
    return proto_recv(s, NULL, 0, NULL, d, &st, NULL, NULL, NULL, 0);
}

/* A hello from node `name` (`instance`) with a table of gold and red
 * (generation 7) and capacity 1000, into *m (proto_msg_init()ed). */
static void hello_msg(proto_msg_t *m, const char *name, uint64_t instance)
{
    static const char *const tnames[] = {"gold", "red"};
    proto_msg_init(m);
    m->type = PROTO_HELLO;
    snprintf(m->node, sizeof m->node, "%s", name);
    m->instance = instance;
    m->capacity = 1000;
    m->table = 7;
    m->has_names = 1;
    m->nnames = 2;
    m->names = (const char **)tnames;
}

/* Node `name` says hello with a table of gold and red (generation 7) and
 * gets its welcome into *w.  Returns its socket. */
static void *node_hello(const char *name, uint64_t instance, proto_msg_t *w)
{
    void *s = node_open(name, instance);
    proto_msg_t m;
    hello_msg(&m, name, instance);
    m.renew = hello_renew;
    node_send(s, &m);
    ck_assert_int_eq(node_recv(s, w, 2000), 0);
    return s;
}

/* Node n1 says hello (node_hello(), instance 0); the answer is in *w,
 * which this initialises.  The test ends with n1_close(). */
static void *n1_hello(proto_msg_t *w)
{
    proto_msg_init(w);
    return node_hello("n1", 0, w);
}

/* Clears w and closes n1's socket s. */
static void n1_close(void *s, proto_msg_t *w)
{
    proto_msg_clear(w);
    zmq_close(s);
}

/* A report of node `name` for the current round: gold and red (table
 * indices 0, 1) each with 20 queued; peer_table: the controller table
 * the node holds (0: none). */
static void node_report(void *s, const char *name, uint32_t table, uint32_t peer_table)
{
    proto_msg_t m;
    proto_msg_init(&m);
    m.type = PROTO_REPORT;
    snprintf(m.node, sizeof m.node, "%s", name);
    m.period = ctrl_period(fx.c);
    m.interval = ctrl_interval(fx.c);
    m.table = table;
    m.peer_table = peer_table;
    m.completions = 100;
    m.busy_seconds = 0.1;
    ck_assert_int_eq(proto_msg_reserve(&m, 2, 0), 0);
    m.count = 2;
    for (uint32_t b = 0; b < 2; b++)
        m.report[b] = (proto_report_rec_t){.bucket = b, .queued = 20, .arrivals_interval = 40,
                                           .arrivals_period = 40, .served_r = 20,
                                           .l_left = PROTO_UNLIMITED};
    node_send(s, &m);
    proto_msg_clear(&m);
}

static void expect_error(void *s, const char *code)
{
    proto_msg_t d;
    proto_msg_init(&d);
    ck_assert_int_eq(node_recv(s, &d, 2000), 0);
    ck_assert_int_eq(d.type, PROTO_ERROR);
    ck_assert_str_eq(d.code, code);
    proto_msg_clear(&d);
}

/* m, a message to n1 (which holds table 7, not the controller's), brings
 * the controller's table: its generation, names and weights, and the
 * round timing. */
static void check_table_for_n1(const proto_msg_t *m)
{
    ck_assert_uint_eq(m->table, ctrl_table(fx.c, NULL, NULL));
    ck_assert_uint_eq(m->peer_table, 7);
    ck_assert_int_eq(m->has_names, 1);
    ck_assert_uint_eq(m->nnames, 2);
    ck_assert_str_eq(m->names[0], "gold");
    ck_assert_str_eq(m->names[1], "red");
    ck_assert_int_eq(m->has_weights, 1);
    ck_assert_uint_eq(m->weights[1], 3);
    ck_assert_int_eq(m->has_timing, 1);
}

START_TEST(test_nodes_hello_welcome)
{
    proto_msg_t w;
    void *s = n1_hello(&w);
    ck_assert_int_eq(w.type, PROTO_WELCOME);
    check_table_for_n1(&w);
    ck_assert_uint_eq(w.intervals, 2);
    int node = ctrl_node_find(fx.c, "n1");
    ck_assert_int_ge(node, 0);
    ck_assert_int_eq(ctrl_node_up(fx.c, node), 1);
    ck_assert_uint_eq(ctrl_node_table_gen(fx.c, node), 7);
    ck_assert_int_eq(fx.ticks, 0); /* a hello does not move the rounds */
    ck_assert_double_gt(nodes_last_msg(&fx.ns, node), 0);
    n1_close(s, &w);
}
END_TEST

/* The round's tokens reach the node as one message: its records as the
 * controller computed them, the table's names and weights while the node
 * has not acknowledged it, and the node's own table generation. */
START_TEST(test_nodes_push_tokens)
{
    proto_msg_t d;
    void *s = n1_hello(&d);
    int node = ctrl_node_find(fx.c, "n1");
    ck_assert_int_eq(ctrl_round_begin(fx.c, 1, 0, 0), 0);
    node_report(s, "n1", 7, 0);
    ck_assert_int_eq(fx.ticks, 1);
    ck_assert_int_eq(ctrl_node_reported(fx.c, node), 1);
    ctrl_result_t res;
    ck_assert_int_eq(ctrl_compute(fx.c, &res), 0);
    ck_assert_int_eq(res.skipped, 0);
    const proto_tokens_rec_t *recs;
    size_t n = ctrl_node_tokens(fx.c, node, &recs);
    ck_assert_uint_gt(n, 0);
    nodes_push(&fx.ns, &res, mono_now());
    ck_assert_int_eq(node_recv(s, &d, 2000), 0);
    ck_assert_int_eq(d.type, PROTO_TOKENS);
    ck_assert_uint_eq(d.count, n);
    for (size_t i = 0; i < n; i++) {
        ck_assert_uint_eq(d.tokens[i].bucket, recs[i].bucket);
        ck_assert_uint_eq(d.tokens[i].flags, recs[i].flags);
        ck_assert_int_eq(d.tokens[i].r_tokens, recs[i].r_tokens);
        ck_assert_int_eq(d.tokens[i].l_tokens, recs[i].l_tokens);
    }
    check_table_for_n1(&d);
    ck_assert_uint_eq(d.nbytes, 0);
    ck_assert_uint_eq(fx.ns.push_tokens, 1);
    ck_assert_uint_eq(fx.ns.records_sent, n);
    ck_assert_uint_eq(fx.ns.push_heartbeats, 0);

    /* The node acknowledges the table: the next tokens carry no names. */
    ck_assert_int_eq(ctrl_round_begin(fx.c, 1, 1, 0), 0);
    node_report(s, "n1", 7, ctrl_table(fx.c, NULL, NULL));
    ck_assert_int_eq(ctrl_node_needs_names(fx.c, node), 0);
    ck_assert_int_eq(ctrl_compute(fx.c, &res), 0);
    nodes_push(&fx.ns, &res, mono_now());
    ck_assert_int_eq(node_recv(s, &d, 2000), 0);
    if (d.type == PROTO_TOKENS)
        ck_assert_int_eq(d.has_names, 0);
    n1_close(s, &d);
}
END_TEST

/* A skipped round (or one with nothing to say) is a heartbeat. */
START_TEST(test_nodes_push_heartbeat)
{
    proto_msg_t d;
    void *s = n1_hello(&d);
    const ctrl_result_t skipped = {.skipped = 1};
    nodes_push(&fx.ns, &skipped, mono_now());
    ck_assert_int_eq(node_recv(s, &d, 2000), 0);
    ck_assert_int_eq(d.type, PROTO_HEARTBEAT);
    ck_assert_uint_eq(d.peer_table, 7);
    ck_assert_uint_eq(fx.ns.push_heartbeats, 1);
    ck_assert_uint_eq(fx.ns.push_tokens, 0);
    n1_close(s, &d);
}
END_TEST

START_TEST(test_nodes_unknown_node)
{
    void *s = node_open("n2", 0);
    node_report(s, "n2", 7, 0);
    expect_error(s, "unknown_node");
    ck_assert_int_eq(ctrl_node_find(fx.c, "n2"), -ENOENT);
    ck_assert_int_eq(fx.ticks, 0);
    zmq_close(s);
}
END_TEST

START_TEST(test_nodes_unknown_table)
{
    proto_msg_t d;
    void *s = n1_hello(&d);
    ck_assert_int_eq(ctrl_round_begin(fx.c, 1, 0, 0), 0);
    node_report(s, "n1", 8, 0); /* a table the controller does not hold */
    expect_error(s, "unknown_table");
    ck_assert_uint_eq(fx.ns.pst.rejected[PROTO_E_TABLE], 1);
    n1_close(s, &d);
}
END_TEST

/* A second process under a registered name is refused and cannot speak
 * for the first. */
START_TEST(test_nodes_duplicate_name)
{
    proto_msg_t d;
    proto_msg_init(&d);
    void *a = node_hello("n1", 1001, &d);
    ck_assert_int_eq(d.type, PROTO_WELCOME);
    void *b = node_hello("n1", 2002, &d);
    ck_assert_int_eq(d.type, PROTO_ERROR);
    ck_assert_str_eq(d.code, "duplicate_name");
    ck_assert_uint_eq(ctrl_stats(fx.c)->duplicate_names, 1);
    int node = ctrl_node_find(fx.c, "n1");
    ctrl_node_info_t ni;
    ck_assert_int_eq(ctrl_node_info(fx.c, node, &ni), 0);
    ck_assert_uint_eq(ni.instance, 1001);
    /* b's report is not n1's */
    ck_assert_int_eq(ctrl_round_begin(fx.c, 1, 0, 0), 0);
    node_report(b, "n1", 7, 0);
    expect_error(b, "unknown_node");
    ck_assert_int_eq(ctrl_node_reported(fx.c, node), 0);
    proto_msg_clear(&d);
    zmq_close(a);
    zmq_close(b);
}
END_TEST

START_TEST(test_nodes_goodbye)
{
    proto_msg_t d;
    void *s = n1_hello(&d);
    int node = ctrl_node_find(fx.c, "n1");
    proto_msg_t m;
    proto_msg_init(&m);
    m.type = PROTO_GOODBYE;
    snprintf(m.node, sizeof m.node, "n1");
    node_send(s, &m);
    ck_assert_int_eq(ctrl_node_up(fx.c, node), 0);
    ck_assert_int_eq(fx.ticks, 1);
    /* nothing is pushed to a node that is down */
    const ctrl_result_t skipped = {.skipped = 1};
    nodes_push(&fx.ns, &skipped, mono_now());
    ck_assert_int_eq(node_recv(s, &d, 100), -EAGAIN);
    ck_assert_uint_eq(fx.ns.push_heartbeats, 0);
    n1_close(s, &d);
}
END_TEST

/* A fenced controller (a standby) sends nothing, remembers who wrote to
 * it unregistered, and hails them once it may send. */
START_TEST(test_nodes_fenced)
{
    proto_msg_t d;
    void *s = n1_hello(&d);
    fx.fence = 1;
    const ctrl_result_t skipped = {.skipped = 1};
    nodes_push(&fx.ns, &skipped, mono_now());
    ck_assert_uint_eq(fx.ns.fenced, 1);
    ck_assert_int_eq(node_recv(s, &d, 100), -EAGAIN);
    void *u = node_open("n2", 0);
    node_report(u, "n2", 7, 0);
    ck_assert_int_eq(node_recv(u, &d, 100), -EAGAIN);
    ck_assert_int_eq(fx.ns.nunknown, 1);
    fx.fence = 0;
    nodes_hail_unknown(&fx.ns);
    ck_assert_int_eq(fx.ns.nunknown, 0);
    expect_error(u, "unknown_node");
    proto_msg_clear(&d);
    zmq_close(s);
    zmq_close(u);
}
END_TEST

/* A report of n1 (table 7, holding the controller's table) with `seq`,
 * sparse or full, one record (gold). */
static void report_seq(void *s, uint64_t seq, int sparse)
{
    proto_msg_t m;
    proto_msg_init(&m);
    m.type = PROTO_REPORT;
    strcpy(m.node, "n1");
    m.seq = seq;
    m.sparse = sparse;
    m.period = ctrl_period(fx.c);
    m.interval = ctrl_interval(fx.c);
    m.table = 7;
    m.peer_table = ctrl_table(fx.c, NULL, NULL);
    ck_assert_int_eq(proto_msg_reserve(&m, 1, 0), 0);
    m.count = 1;
    m.report[0] = (proto_report_rec_t){.bucket = 0, .queued = 5, .arrivals_interval = 10,
                                       .served_r = 10, .l_left = PROTO_UNLIMITED};
    node_send(s, &m);
    proto_msg_clear(&m);
}

/* Sparse reports (issue 30): a hello that offers them is welcomed with
 * "sparse"; a gap in the node's seq (a message lost) makes the next
 * message to it ask for a full report, until a full one comes. */
START_TEST(test_nodes_sparse_full_after_gap)
{
    void *s = node_open("n1", 0);
    proto_msg_t m, d;
    hello_msg(&m, "n1", 0);
    proto_msg_init(&d);
    m.seq = 1;
    m.sparse = 1;
    node_send(s, &m);
    ck_assert_int_eq(node_recv(s, &d, 2000), 0);
    ck_assert_int_eq(d.type, PROTO_WELCOME);
    ck_assert_int_eq(d.sparse, 1);
    const ctrl_result_t skipped = {.skipped = 1};
    ck_assert_int_eq(ctrl_round_begin(fx.c, 1, 0, 0), 0);
    report_seq(s, 2, 0); /* full */
    report_seq(s, 3, 1); /* sparse, in order */
    nodes_push(&fx.ns, &skipped, mono_now());
    ck_assert_int_eq(node_recv(s, &d, 2000), 0);
    ck_assert_int_eq(d.full, 0);
    report_seq(s, 5, 1); /* 4 went missing */
    nodes_push(&fx.ns, &skipped, mono_now());
    ck_assert_int_eq(node_recv(s, &d, 2000), 0);
    ck_assert_int_eq(d.type, PROTO_HEARTBEAT);
    ck_assert_int_eq(d.full, 1);
    report_seq(s, 6, 1); /* still sparse: still asked */
    nodes_push(&fx.ns, &skipped, mono_now());
    ck_assert_int_eq(node_recv(s, &d, 2000), 0);
    ck_assert_int_eq(d.full, 1);
    report_seq(s, 7, 0); /* the full report */
    nodes_push(&fx.ns, &skipped, mono_now());
    ck_assert_int_eq(node_recv(s, &d, 2000), 0);
    ck_assert_int_eq(d.full, 0);
    ck_assert_uint_eq(fx.ns.full_asked, 2);
    ck_assert_uint_eq(fx.ns.reports_sparse, 3);
    ck_assert_uint_eq(fx.ns.reports_full, 2);
    proto_msg_clear(&d);
    zmq_close(s);
}
END_TEST

/* A computed round (period `period`, interval 0: forced) after n1's
 * report; its message into *d.  Returns the round's record count. */
static size_t grants_round(void *s, proto_msg_t *d, uint64_t period, int regrant)
{
    int node = ctrl_node_find(fx.c, "n1");
    ck_assert_int_eq(ctrl_round_begin(fx.c, period, 0, 0), 0);
    proto_msg_t m;
    proto_msg_init(&m);
    m.type = PROTO_REPORT;
    strcpy(m.node, "n1");
    m.period = period;
    m.table = 7;
    m.peer_table = ctrl_table(fx.c, NULL, NULL);
    m.completions = 100;
    m.busy_seconds = 0.1;
    m.regrant = regrant;
    ck_assert_int_eq(proto_msg_reserve(&m, 2, 0), 0);
    m.count = 2;
    for (uint32_t b = 0; b < 2; b++)
        m.report[b] = (proto_report_rec_t){.bucket = b, .queued = 20, .arrivals_interval = 40,
                                           .arrivals_period = 40, .l_left = PROTO_UNLIMITED};
    node_send(s, &m);
    proto_msg_clear(&m);
    ctrl_result_t res;
    ck_assert_int_eq(ctrl_compute(fx.c, &res), 0);
    ck_assert_int_eq(res.skipped, 0);
    const proto_tokens_rec_t *recs;
    size_t n = ctrl_node_tokens(fx.c, node, &recs);
    nodes_push(&fx.ns, &res, mono_now());
    ck_assert_int_eq(node_recv(s, d, 2000), 0);
    return n;
}

/* Changed grants only (issue 30): offered in the hello, said in the
 * welcome; every tokens message numbered; a forced round whose grants did
 * not change sends no record (the node renews its bases); a regrant
 * sends every grant again; a node that did not offer gets today's. */
START_TEST(test_nodes_changed_grants)
{
    proto_msg_t d;
    hello_renew = 1;
    void *s = n1_hello(&d);
    hello_renew = 0;
    ck_assert_int_eq(d.type, PROTO_WELCOME);
    ck_assert_int_eq(d.renew, 1);
    int node = ctrl_node_find(fx.c, "n1");
    size_t n1 = grants_round(s, &d, 1, 0);
    ck_assert_uint_gt(n1, 0);
    ck_assert_int_eq(d.type, PROTO_TOKENS);
    ck_assert_uint_eq(d.gseq, 1);
    ck_assert_int_eq(d.renew, 1);
    ck_assert_uint_eq(d.count, n1); /* no bases yet: every grant */
    ck_assert_uint_eq(d.based, n1);
    proto_tokens_rec_t first[8];
    ck_assert_uint_le(n1, 8);
    memcpy(first, d.tokens, n1 * sizeof *first);

    /* the next period, the same demand: the same grants, none sent */
    size_t n2 = grants_round(s, &d, 2, 0);
    ck_assert_uint_eq(n2, n1);
    ck_assert_int_eq(d.type, PROTO_TOKENS);
    ck_assert_uint_eq(d.gseq, 2);
    ck_assert_int_eq(d.renew, 1);
    const proto_tokens_rec_t *recs;
    ck_assert_uint_eq(ctrl_node_tokens(fx.c, node, &recs), n2);
    for (size_t i = 0; i < n2; i++) /* what the node renews is what we meant */
        ck_assert_int_eq(recs[i].r_tokens, first[i].r_tokens);
    ck_assert_uint_eq(d.count, 0);
    ck_assert_uint_eq(fx.ns.peers[node].grants.omitted, n2);

    /* the node saw a gap: every grant again */
    size_t n3 = grants_round(s, &d, 3, 1);
    ck_assert_uint_eq(d.gseq, 3);
    ck_assert_uint_eq(d.count, n3);
    ck_assert_uint_eq(fx.ns.peers[node].grants.regrants, 1);
    n1_close(s, &d);

    /* an older node: no renew in the welcome, no gseq on its tokens */
    s = n1_hello(&d);
    ck_assert_int_eq(d.renew, 0);
    size_t n4 = grants_round(s, &d, 4, 0);
    ck_assert_int_eq(d.type, PROTO_TOKENS);
    ck_assert_uint_eq(d.gseq, 0);
    ck_assert_int_eq(d.renew, 0);
    ck_assert_uint_eq(d.count, n4);
    n1_close(s, &d);
}
END_TEST

/* Names in parts: a node that offers parts is welcomed with the first part
 * of a 5,000-bucket table and gets the rest as a names message before the
 * round's tokens (which say how much of its table we hold); its own table
 * grows by parts, a part out of order changes nothing, and the parts stop
 * once it acknowledges the whole table. */
START_TEST(test_nodes_names_in_parts)
{
    enum { NB = 5000 };
    char *text = malloc(NB * 48 + 64), *p = text;
    ck_assert_ptr_nonnull(text);
    p += sprintf(p, "{\"buckets\":[");
    for (int i = 0; i < NB; i++)
        p += sprintf(p, "%s{\"name\":\"bucket-%05d\",\"reservation\":1}", i ? "," : "", i);
    sprintf(p, "]}");
    bucketfile_t *bf = NULL;
    ck_assert_int_eq(bucketfile_parse(text, strlen(text), NULL, &bf, NULL), 0);
    ck_assert_int_eq(ctrl_set_buckets(fx.c, bf), 0);
    bucketfile_destroy(&bf);
    free(text);
    void *s = node_open("n1", 0);
    proto_msg_t m, d;
    hello_msg(&m, "n1", 0);
    m.parts = 1;
    node_send(s, &m);
    proto_msg_init(&d);
    ck_assert_int_eq(node_recv(s, &d, 2000), 0);
    ck_assert_int_eq(d.type, PROTO_WELCOME);
    ck_assert_int_eq(d.parts, 1);
    ck_assert_uint_eq(d.names_of, NB);
    ck_assert_uint_eq(d.nnames, PROTO_PART_NAMES);
    ck_assert_int_eq(d.has_peer_names, 1);
    ck_assert_uint_eq(d.peer_names, 2);
    uint32_t gen = d.table;
    const ctrl_result_t skipped = {.skipped = 1};
    nodes_push(&fx.ns, &skipped, mono_now());
    ck_assert_int_eq(node_recv(s, &d, 2000), 0);
    ck_assert_int_eq(d.type, PROTO_NAMES);
    ck_assert_uint_eq(d.table, gen);
    ck_assert_uint_eq(d.names_at, PROTO_PART_NAMES);
    ck_assert_uint_eq(d.nnames, NB - PROTO_PART_NAMES);
    ck_assert_str_eq(d.names[0], "bucket-04096");
    ck_assert_int_eq(d.has_weights, 1);
    ck_assert_int_eq(node_recv(s, &d, 2000), 0); /* then the round's message */
    ck_assert(d.type == PROTO_TOKENS || d.type == PROTO_HEARTBEAT);
    ck_assert_int_eq(d.has_names, 0);
    ck_assert_int_eq(d.has_peer_names, 1);
    ck_assert_uint_eq(d.peer_names, 2);
    /* its table grows: a part in order is taken, one out of order not */
    int node = ctrl_node_find(fx.c, "n1");
    static const char *const more[] = {"bucket-00001"}, *const gap[] = {"bucket-00009"};
    proto_msg_init(&m);
    m.type = PROTO_NAMES;
    snprintf(m.node, sizeof m.node, "n1");
    m.table = 7;
    m.has_names = 1;
    m.names = (const char **)gap;
    m.nnames = 1;
    m.names_at = 3;
    m.names_of = 4;
    node_send(s, &m);
    ck_assert_uint_eq(ctrl_node_table_size(fx.c, node), 2);
    ck_assert_uint_eq(fx.ns.parts_stale, 1);
    m.names = (const char **)more;
    m.names_at = 2;
    node_send(s, &m);
    ck_assert_uint_eq(ctrl_node_table_size(fx.c, node), 3);
    ck_assert_uint_eq(fx.ns.parts_taken, 1);
    /* it holds our whole table: no more parts, and the round says 3 */
    proto_msg_init(&m);
    m.type = PROTO_HEARTBEAT;
    snprintf(m.node, sizeof m.node, "n1");
    m.peer_table = gen;
    node_send(s, &m);
    uint64_t sent = fx.ns.parts_sent;
    nodes_push(&fx.ns, &skipped, mono_now());
    ck_assert_uint_eq(fx.ns.parts_sent, sent);
    ck_assert_int_eq(node_recv(s, &d, 2000), 0);
    ck_assert_int_eq(d.type, PROTO_HEARTBEAT);
    ck_assert_uint_eq(d.peer_names, 3);
    n1_close(s, &d);
}
END_TEST


int main(void)
{
    const TTest *const tests[] = {
        test_nodes_sparse_full_after_gap, test_nodes_changed_grants,
        test_nodes_hello_welcome, test_nodes_push_tokens, test_nodes_push_heartbeat,
        test_nodes_unknown_node,  test_nodes_unknown_table, test_nodes_duplicate_name,
        test_nodes_goodbye,       test_nodes_fenced,        test_nodes_names_in_parts,
    };
    const testlib_case_t c = {.name = "nodes", .timeout = 30, .setup = setup,
                              .teardown = teardown};
    return testlib_run_case(&c, tests, sizeof tests / sizeof *tests);
}
