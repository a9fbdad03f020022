/* test_rootx.c - Check suite for controller/daemon/rootx: the root takes shards' needs (raw DEALERs standing for shard leaders), divides every node within its capacity and answers each shard; a shard takes slices (a raw ROUTER standing for the root) for their lease; garbage, old epochs and out-of-range values are dropped whole. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>
#include <jansson.h>

#include "controller/daemon/rootx.h"
#include "tests/testlib.h"

static void *g_ctx;

static rootx_t *new_x(int shards, int shard, const char *listen, const char *connect)
{
    rootx_config_t c = {.shards = shards, .shard = shard, .listen = listen, .connect = connect,
                        .zctx = g_ctx, .period_s = 1, .intervals = 5};
    int err = 0;
    rootx_t *x = rootx_new(&c, &err);
    ck_assert_msg(x != NULL, "rootx_new: %d", err);
    return x;
}

static void *sock(int type, const char *ep, int bind)
{
    void *s = zmq_socket(g_ctx, type);
    int zero = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    ck_assert_int_eq(bind ? zmq_bind(s, ep) : zmq_connect(s, ep), 0);
    return s;
}

/* Drains x until `until` holds or 2 s pass. */
static int drain_until(rootx_t *x, int (*until)(const rootx_stats_t *, uint64_t), uint64_t arg)
{
    for (int i = 0; i < 400; i++) {
        rootx_drain(x, 1.0);
        rootx_stats_t st;
        rootx_stats(x, &st);
        if (until(&st, arg))
            return 1;
        zmq_poll(NULL, 0, 5);
    }
    return 0;
}
static int needs_at_least(const rootx_stats_t *st, uint64_t n) { return st->needs_taken >= n; }
static int dropped_at_least(const rootx_stats_t *st, uint64_t n) { return st->dropped >= n; }
static int slices_at_least(const rootx_stats_t *st, uint64_t n) { return st->slices_taken >= n; }

static void send_str(void *s, const char *text)
{
    ck_assert_int_ge(zmq_send(s, text, strlen(text), 0), 0);
}

/* The slices message a raw DEALER got: its json (caller decrefs) or NULL. */
static json_t *recv_json(void *s)
{
    char buf[65536];
    zmq_pollitem_t pi = {s, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&pi, 1, 2000) <= 0)
        return NULL;
    int n = zmq_recv(s, buf, sizeof buf - 1, 0);
    if (n < 0)
        return NULL;
    buf[n] = 0;
    return json_loads(buf, 0, NULL);
}

/* Two shards need more than a node has: their slices together stay within
 * its capacity, each gets its reservation's must first; garbage, an old
 * epoch and a bad shard number are dropped whole. */
START_TEST(test_rootx_root_divides_within_capacity)
{
    rootx_t *root = new_x(2, 0, "inproc://root1", NULL);
    void *s0 = sock(ZMQ_DEALER, "inproc://root1", 0), *s1 = sock(ZMQ_DEALER, "inproc://root1", 0);
    /* node n1: capacity 1000 (cons 900); shard 0 must place 600, shard 1 300 */
    send_str(s0, "{\"t\":\"needs\",\"shard\":0,\"k\":2,\"epoch\":5,\"target\":600,"
                 "\"nodes\":[[\"n1\",1000,900,600,600,800,600]]}");
    send_str(s1, "{\"t\":\"needs\",\"shard\":1,\"k\":2,\"epoch\":7,\"target\":300,"
                 "\"nodes\":[[\"n1\",1100,950,300,300,700,300]]}");
    void *sb = sock(ZMQ_DEALER, "inproc://root1", 0); /* shard 1's standby asks for its slices */
    send_str(sb, "{\"t\":\"needs\",\"shard\":1,\"k\":2,\"epoch\":0,\"standby\":true,"
                 "\"target\":0,\"nodes\":[]}");
    ck_assert(drain_until(root, needs_at_least, 2));
    for (int i = 0; i < 20; i++) /* the standby's note, after the needs */
        rootx_drain(root, 1.0), zmq_poll(NULL, 0, 5);
    ck_assert_int_eq(rootx_step(root, 9, 1.0), 0);
    rootx_view_t v; /* the status's and /metrics' view: both shards live, then lapsed */
    rootx_view(root, 1.0, &v);
    ck_assert(v.root && v.shards == 2 && v.fresh[0] == 1 && v.fresh[1] == 1);
    rootx_view(root, 100.0, &v);
    ck_assert(v.fresh[0] == 0 && v.fresh[1] == 0 && v.age_s[1] == 99.0);
    json_t *a = recv_json(s0), *b = recv_json(s1), *c = recv_json(sb);
    ck_assert_ptr_nonnull(c); /* the same slices as its leader's */
    ck_assert_int_eq(json_integer_value(json_object_get(c, "shard")), 1);
    json_decref(c);
    zmq_close(sb);
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    ck_assert_int_eq(json_integer_value(json_object_get(a, "epoch")), 9);
    ck_assert_int_eq(json_integer_value(json_object_get(b, "shard")), 1);
    json_t *ra = json_array_get(json_object_get(a, "nodes"), 0);
    json_t *rb = json_array_get(json_object_get(b, "nodes"), 0);
    ck_assert_str_eq(json_string_value(json_array_get(ra, 0)), "n1");
    json_int_t ea = json_integer_value(json_array_get(ra, 1)), ca = json_integer_value(json_array_get(ra, 2));
    json_int_t eb = json_integer_value(json_array_get(rb, 1)), cb = json_integer_value(json_array_get(rb, 2));
    ck_assert_int_le(ea + eb, 1000); /* the smallest of the shards' estimates */
    ck_assert_int_le(ca + cb, 900);
    ck_assert_int_ge(ca, 600); /* each its reservation's must */
    ck_assert_int_ge(cb, 300);
    json_decref(a);
    json_decref(b);

    rootx_stats_t st;
    rootx_stats(root, &st);
    uint64_t d0 = st.dropped;
    send_str(s0, "not json");
    send_str(s0, "{\"t\":\"needs\",\"shard\":0,\"k\":2,\"epoch\":4,\"target\":1,\"nodes\":[]}");
    send_str(s0, "{\"t\":\"needs\",\"shard\":2,\"k\":2,\"epoch\":9,\"target\":1,\"nodes\":[]}");
    send_str(s0, "{\"t\":\"needs\",\"shard\":0,\"k\":2,\"epoch\":9,\"target\":1,"
                 "\"nodes\":[[\"n1\",1,1,1,1,-1,1]]}");
    send_str(s0, "{\"t\":\"needs\",\"shard\":0,\"k\":3,\"epoch\":9,\"target\":1,\"nodes\":[]}");
    ck_assert(drain_until(root, dropped_at_least, d0 + 5));
    rootx_stats(root, &st);
    ck_assert_uint_eq(st.needs_taken, 2);
    zmq_close(s0);
    zmq_close(s1);
    rootx_destroy(&root);
    ck_assert_ptr_null(root);
}
END_TEST

/* K changing at run time: a root of 2 shards set to 3 takes the new
 * shard's needs (k 3) and divides the node among the three within its
 * capacity; needs that still say k 2 are dropped. */
START_TEST(test_rootx_set_k)
{
    rootx_t *root = new_x(2, 0, "inproc://rootk", NULL);
    void *s[3];
    for (int i = 0; i < 3; i++)
        s[i] = sock(ZMQ_DEALER, "inproc://rootk", 0);
    send_str(s[0], "{\"t\":\"needs\",\"shard\":0,\"k\":2,\"epoch\":5,\"target\":300,"
                   "\"nodes\":[[\"n1\",1000,900,300,300,800,300]]}");
    ck_assert(drain_until(root, needs_at_least, 1));
    ck_assert_int_eq(rootx_set_k(root, 0), -EINVAL);
    ck_assert_int_eq(rootx_set_k(root, 3), 0);
    rootx_stats_t st;
    rootx_stats(root, &st);
    uint64_t d0 = st.dropped;
    send_str(s[1], "{\"t\":\"needs\",\"shard\":1,\"k\":2,\"epoch\":5,\"target\":1,"
                   "\"nodes\":[]}"); /* the old K: dropped */
    ck_assert(drain_until(root, dropped_at_least, d0 + 1));
    for (int i = 0; i < 3; i++) {
        char m[200];
        snprintf(m, sizeof m, "{\"t\":\"needs\",\"shard\":%d,\"k\":3,\"epoch\":6,"
                 "\"target\":300,\"nodes\":[[\"n1\",1000,900,300,300,800,300]]}", i);
        send_str(s[i], m);
    }
    ck_assert(drain_until(root, needs_at_least, 4));
    ck_assert_int_eq(rootx_step(root, 9, 1.0), 0);
    rootx_view_t v;
    rootx_view(root, 1.0, &v);
    ck_assert_int_eq(v.shards, 3);
    json_int_t se = 0, sc = 0;
    for (int i = 0; i < 3; i++) {
        json_t *a = recv_json(s[i]);
        ck_assert_ptr_nonnull(a);
        ck_assert_int_eq(json_integer_value(json_object_get(a, "shard")), i);
        json_t *r = json_array_get(json_object_get(a, "nodes"), 0);
        se += json_integer_value(json_array_get(r, 1));
        sc += json_integer_value(json_array_get(r, 2));
        ck_assert_int_ge(json_integer_value(json_array_get(r, 2)), 300);
        json_decref(a);
        zmq_close(s[i]);
    }
    ck_assert_int_le(se, 1000);
    ck_assert_int_le(sc, 900);
    rootx_destroy(&root);
}
END_TEST

/* A shard holds the root's slices for their lease (2 periods), then none;
 * an older root epoch, cons above est and another shard's are dropped. */
START_TEST(test_rootx_shard_holds_slices_for_their_lease)
{
    void *r = sock(ZMQ_ROUTER, "inproc://root2", 1);
    rootx_t *x = new_x(2, 1, NULL, "inproc://root2");
    ctrl_config_t cc = ctrl_config_default();
    ctrl_t *c = ctrl_new(&cc);
    ck_assert_int_eq(rootx_send_needs(x, c, 1, 3), 0); /* no nodes: an empty list */
    unsigned char id[256];
    zmq_pollitem_t pi = {r, 0, ZMQ_POLLIN, 0};
    ck_assert_int_gt(zmq_poll(&pi, 1, 2000), 0);
    int idl = zmq_recv(r, id, sizeof id, 0);
    ck_assert_int_gt(idl, 0);
    char buf[4096];
    int n = zmq_recv(r, buf, sizeof buf - 1, 0);
    ck_assert_int_gt(n, 0);
    buf[n] = 0;
    ck_assert_ptr_nonnull(strstr(buf, "\"shard\":1"));
    ck_assert_ptr_nonnull(strstr(buf, "\"epoch\":3"));
    const char *msgs[] = {
        "{\"t\":\"slices\",\"epoch\":4,\"shard\":1,\"nodes\":[[\"n1\",500,400]]}",
        "{\"t\":\"slices\",\"epoch\":3,\"shard\":1,\"nodes\":[[\"n1\",900,900]]}", /* older */
        "{\"t\":\"slices\",\"epoch\":4,\"shard\":0,\"nodes\":[[\"n1\",900,900]]}", /* not ours */
        "{\"t\":\"slices\",\"epoch\":4,\"shard\":1,\"nodes\":[[\"n1\",100,200]]}", /* cons > est */
    };
    for (size_t i = 0; i < sizeof msgs / sizeof msgs[0]; i++) {
        zmq_send(r, id, (size_t)idl, ZMQ_SNDMORE);
        send_str(r, msgs[i]);
    }
    ck_assert(drain_until(x, slices_at_least, 1));
    ck_assert(drain_until(x, dropped_at_least, 3));
    double est = 0, cons = 0;
    ck_assert_int_eq(rootx_slice(x, "n1", 2.5, &est, &cons), 1); /* taken at 1.0 */
    ck_assert(est == 500 && cons == 400);
    ck_assert_int_eq(rootx_slice(x, "n1", 3.5, &est, &cons), -1); /* lease over: the last one */
    ck_assert(est == 500 && cons == 400);
    ck_assert_int_eq(rootx_slice(x, "n2", 1.5, &est, &cons), 0);
    rootx_view_t v; /* live within the lease, lapsed after; not a root */
    rootx_view(x, 2.5, &v);
    ck_assert(!v.root && v.live == 1 && v.lapsed == 0 && v.fresh[0] == -1);
    rootx_view(x, 3.5, &v);
    ck_assert(v.live == 0 && v.lapsed == 1);
    ctrl_destroy(&c);
    rootx_destroy(&x);
    zmq_close(r);
}
END_TEST

START_TEST(test_rootx_bad_config)
{
    rootx_config_t c = {.shards = 2, .shard = 2, .connect = "inproc://x", .zctx = g_ctx,
                        .period_s = 1, .intervals = 5};
    int err = 0;
    ck_assert_ptr_null(rootx_new(&c, &err));
    ck_assert_int_eq(err, -EINVAL);
    c.shard = 0;
    c.connect = "inproc://a,,inproc://b";
    ck_assert_ptr_null(rootx_new(&c, &err));
    c.connect = NULL; /* neither listen nor connect */
    ck_assert_ptr_null(rootx_new(&c, &err));
}
END_TEST

int main(void)
{
    g_ctx = zmq_ctx_new();
    const TTest *const tests[] = {test_rootx_root_divides_within_capacity, test_rootx_set_k,
                                  test_rootx_shard_holds_slices_for_their_lease,
                                  test_rootx_bad_config};
    int rc = testlib_run_tests("rootx", tests, sizeof tests / sizeof tests[0]);
    zmq_ctx_term(g_ctx);
    return rc;
}
