/* test_ctlshards.c - Check suite for controller/ctl/ctlshards: bqos-ctl's routing of a bucket's command to the shard that owns it now, by the newest shards configuration any shard gives (real ZeroMQ sockets on loopback). */
#include <check.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <zmq.h>

#include "common/mono.h"
#include "common/proto.h"
#include "common/shardgen.h"
#include "common/shardmap.h"
#include "controller/ctl/ctlshards.h"
#include "tests/testlib.h"

#define STR_(x) #x
#define PROTO_STR(x) STR_(x)

/* bqos-ctl's opener without CURVE: a REQ socket with the same options. */
static void *open_plain(void *ctx, const char *endpoint, int timeout_ms, const curvekey_t *keys,
                        int *code)
{
    (void)keys;
    (void)code;
    void *s = zmq_socket(ctx, ZMQ_REQ);
    int zero = 0, one = 1;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(s, ZMQ_IMMEDIATE, &one, sizeof one);
    zmq_setsockopt(s, ZMQ_SNDTIMEO, &timeout_ms, sizeof timeout_ms);
    zmq_setsockopt(s, ZMQ_RCVTIMEO, &timeout_ms, sizeof timeout_ms);
    if (zmq_connect(s, endpoint) != 0) {
        zmq_close(s);
        return NULL;
    }
    return s;
}

/* A controller's admin endpoint that answers one "shards" request with
 * `reply` (a thread; bound on a free loopback port). */
typedef struct {
    void *ctx, *sock;
    char endpoint[64];
    const char *reply;
    int asked; /* 1: the request was a v-matching "shards" */
    pthread_t th;
} fake_t;

static void *fake_run(void *arg)
{
    fake_t *f = arg;
    char buf[512];
    int n = zmq_recv(f->sock, buf, sizeof buf - 1, 0);
    if (n < 0)
        return NULL;
    buf[n] = '\0';
    json_t *r = json_loads(buf, 0, NULL);
    f->asked = json_integer_value(json_object_get(r, "v")) == PROTO_ADMIN_VERSION &&
               strcmp(json_string_value(json_object_get(r, "cmd")), "shards") == 0;
    json_decref(r);
    zmq_send(f->sock, f->reply, strlen(f->reply), 0);
    return NULL;
}

static void fake_start(fake_t *f, const char *reply)
{
    memset(f, 0, sizeof *f);
    f->reply = reply;
    f->ctx = zmq_ctx_new();
    f->sock = zmq_socket(f->ctx, ZMQ_REP);
    int zero = 0, t = 5000;
    zmq_setsockopt(f->sock, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(f->sock, ZMQ_RCVTIMEO, &t, sizeof t);
    ck_assert_int_eq(zmq_bind(f->sock, "tcp://127.0.0.1:*"), 0);
    size_t len = sizeof f->endpoint;
    zmq_getsockopt(f->sock, ZMQ_LAST_ENDPOINT, f->endpoint, &len);
    ck_assert_int_eq(pthread_create(&f->th, NULL, fake_run, f), 0);
}

static void fake_stop(fake_t *f)
{
    pthread_join(f->th, NULL);
    zmq_close(f->sock);
    zmq_ctx_term(f->ctx);
}

START_TEST(test_ctlshards_split)
{
    char a[] = "tcp://a:1,tcp://b:1;tcp://c:1";
    const char *out[4];
    ck_assert_int_eq(ctlshards_split(a, out, 4), 2);
    ck_assert_str_eq(out[0], "tcp://a:1,tcp://b:1");
    ck_assert_str_eq(out[1], "tcp://c:1");
    char b[] = "x;;y", c[] = "x;y;z", d[] = "x;";
    ck_assert_int_eq(ctlshards_split(b, out, 4), -1); /* an empty shard */
    ck_assert_int_eq(ctlshards_split(c, out, 2), -1); /* more than max */
    ck_assert_int_eq(ctlshards_split(d, out, 4), -1);
}
END_TEST

START_TEST(test_ctlshards_of_reply)
{
    shardgen_t g;
    json_t *r = json_loads("{\"ok\":true,\"cluster\":{\"k\":2,\"gen\":4,"
                           "\"next\":{\"k\":3,\"gen\":5,\"from_ms\":1000}}}", 0, NULL);
    ck_assert_int_eq(ctlshards_of_reply(r, &g), 0);
    ck_assert_int_eq(g.k, 2);
    ck_assert_int_eq(g.gen, 4);
    ck_assert_int_eq(g.next_k, 3);
    ck_assert_int_eq(g.next_gen, 5);
    ck_assert_int_eq(g.from_ms, 1000);
    json_decref(r);
    static const char *const bad[] = {
        "{\"ok\":true}",                                            /* no cluster */
        "{\"cluster\":{\"k\":0,\"gen\":1}}",                        /* K out of range */
        "{\"cluster\":{\"k\":2,\"gen\":1,\"next\":{\"k\":3,\"gen\":3,\"from_ms\":9}}}", /* gen */
        "{\"cluster\":\"k=2\"}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        r = json_loads(bad[i], 0, NULL);
        ck_assert_msg(ctlshards_of_reply(r, &g) == -1, "accepted %s", bad[i]);
        json_decref(r);
    }
}
END_TEST

/* A bucket whose shard differs between K a and K b (the test needs one). */
static const char *moving(int a, int b, char *buf, size_t n)
{
    for (int i = 0; i < 1000; i++) {
        snprintf(buf, n, "b%d", i);
        if (shardmap_of(buf, a) != shardmap_of(buf, b))
            return buf;
    }
    ck_abort_msg("no bucket moves between %d and %d shards", a, b);
    return NULL;
}

START_TEST(test_ctlshards_route_by_generation)
{
    char nm[32];
    const char *name = moving(2, 3, nm, sizeof nm);
    shardgen_t g = {.k = 2, .gen = 1, .next_k = 3, .next_gen = 2, .from_ms = 10000};
    /* before the change's period the map of 2, from it the map of 3 */
    ck_assert_int_eq(ctlshards_route(&g, 3, name, 9000), shardmap_of(name, 2));
    ck_assert_int_eq(ctlshards_route(&g, 3, name, 10000), shardmap_of(name, 3));
    /* K beyond the lists given, or nothing known: by the number of lists */
    ck_assert_int_eq(ctlshards_route(&g, 2, name, 10000), shardmap_of(name, 2));
    ck_assert_int_eq(ctlshards_route(NULL, 3, name, 9000), shardmap_of(name, 3));
    ck_assert_int_eq(ctlshards_route(NULL, 2, name, 10000), shardmap_of(name, 2));
}
END_TEST

START_TEST(test_ctlshards_ask_all_newest)
{
    fake_t f0, f1;
    fake_start(&f0, "{\"v\":" PROTO_STR(PROTO_ADMIN_VERSION)
                    ",\"ok\":true,\"cluster\":{\"k\":2,\"gen\":1}}");
    fake_start(&f1, "{\"v\":" PROTO_STR(PROTO_ADMIN_VERSION)
                    ",\"ok\":true,\"cluster\":{\"k\":2,\"gen\":1,"
                    "\"next\":{\"k\":3,\"gen\":2,\"from_ms\":5000}}}");
    const char *eps[2] = {f0.endpoint, f1.endpoint};
    shardgen_t g = {0};
    ck_assert_int_eq(ctlshards_ask_all(eps, 2, 3000, NULL, open_plain, &g), 0);
    fake_stop(&f0);
    fake_stop(&f1);
    ck_assert(f0.asked && f1.asked);
    /* shard 1 knows of the change to 3 (shard 0 lags): the newer wins */
    ck_assert_int_eq(g.next_k, 3);
    ck_assert_int_eq(g.next_gen, 2);
    ck_assert_int_eq(g.from_ms, 5000);
}
END_TEST

START_TEST(test_ctlshards_ask_all_dead_and_garbage)
{
    /* shard 0: a dead endpoint then a live one; shard 1 dead: the answer
     * of shard 0 is taken after the grace, long before the timeout */
    fake_t f;
    fake_start(&f, "{\"v\":" PROTO_STR(PROTO_ADMIN_VERSION)
                   ",\"ok\":true,\"cluster\":{\"k\":3,\"gen\":7}}");
    char list0[160];
    snprintf(list0, sizeof list0, "tcp://127.0.0.1:1,%s", f.endpoint);
    const char *eps[2] = {list0, "tcp://127.0.0.1:1"};
    shardgen_t g = {0};
    double t0 = mono_now();
    ck_assert_int_eq(ctlshards_ask_all(eps, 2, 4000, NULL, open_plain, &g), 0);
    ck_assert_msg(mono_now() - t0 < 2.0, "took %.2f s", mono_now() - t0);
    fake_stop(&f);
    ck_assert_int_eq(g.k, 3);
    ck_assert_int_eq(g.gen, 7);

    /* garbage, a refusal and another protocol version: nothing known, g untouched */
    static const char *const bad[] = {
        "not json",
        "{\"v\":" PROTO_STR(PROTO_ADMIN_VERSION) ",\"ok\":false,\"error\":\"x\"}",
        "{\"v\":999,\"ok\":true,\"cluster\":{\"k\":3,\"gen\":7}}",
        "{\"v\":" PROTO_STR(PROTO_ADMIN_VERSION) ",\"ok\":true,\"cluster\":{\"k\":2,\"gen\":0}}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        fake_start(&f, bad[i]);
        const char *one[1] = {f.endpoint};
        shardgen_t h = {.k = 1, .gen = 42};
        ck_assert_msg(ctlshards_ask_all(one, 1, 300, NULL, open_plain, &h) == -1, "took %s",
                      bad[i]);
        ck_assert_int_eq(h.gen, 42);
        fake_stop(&f);
    }
}
END_TEST

/* reload and import (the whole table, shared in etcd) go to the first
 * shard that answers and is in the map: shard 0 while it answers; shard 1
 * when shard 0 is dead (they went to shard 0 and failed); never a shard
 * the configuration leaves out; shard 0 when none answers. */
START_TEST(test_ctlshards_table_any_live_shard)
{
    int64_t now = 1000000;
    shardgen_t two = shardgen_steady(2);
    int both[SHARDMAP_MAX] = {1, 1}, one_only[SHARDMAP_MAX] = {0, 1}, none[SHARDMAP_MAX] = {0};
    ck_assert_int_eq(ctlshards_table_pick(&two, both, 2, now), 0);
    ck_assert_int_eq(ctlshards_table_pick(&two, one_only, 2, now), 1);
    ck_assert_int_eq(ctlshards_table_pick(NULL, one_only, 2, now), 1);
    ck_assert_int_eq(ctlshards_table_pick(&two, none, 2, now), 0);
    /* K 2 -> 1 from now: shard 1 out from its period, in before it */
    shardgen_t down = {.k = 2, .gen = 1, .next_k = 1, .next_gen = 2, .from_ms = now};
    ck_assert_int_eq(ctlshards_table_pick(&down, one_only, 2, now), 0);
    ck_assert_int_eq(ctlshards_table_pick(&down, one_only, 2, now - 1), 1);
    /* a K beyond the lists given: the configuration is not used */
    shardgen_t three = shardgen_steady(3);
    ck_assert_int_eq(ctlshards_table_pick(&three, one_only, 2, now), 1);

    /* on sockets: shard 0 dead, shard 1 answers: shard 1, within the grace */
    fake_t f;
    fake_start(&f, "{\"v\":" PROTO_STR(PROTO_ADMIN_VERSION)
                   ",\"ok\":true,\"cluster\":{\"k\":2,\"gen\":1}}");
    const char *eps[2] = {"tcp://127.0.0.1:1", f.endpoint};
    double t0 = mono_now();
    ck_assert_int_eq(ctlshards_table(eps, 2, 4000, NULL, open_plain), 1);
    ck_assert_msg(mono_now() - t0 < 2.0, "took %.2f s", mono_now() - t0);
    fake_stop(&f);
    ck_assert(f.asked);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {test_ctlshards_split, test_ctlshards_of_reply,
                                  test_ctlshards_route_by_generation,
                                  test_ctlshards_ask_all_newest,
                                  test_ctlshards_ask_all_dead_and_garbage,
                                  test_ctlshards_table_any_live_shard};
    return testlib_run_tests("ctlshards", tests, sizeof tests / sizeof tests[0]);
}
