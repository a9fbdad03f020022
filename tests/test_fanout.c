/* test_fanout.c - Check suite for controller/ctl/fanout: one text sent to several ZeroMQ REQ sockets at once, each reply to a callback until stop, all done, or the deadline (real ZeroMQ sockets on loopback). */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <zmq.h>

#include "common/mono.h"
#include "controller/ctl/fanout.h"
#include "tests/testlib.h"

#define DEAD "tcp://127.0.0.1:1"

/* A REQ socket as bqos-ctl opens one (IMMEDIATE: a dead endpoint never
 * becomes writable). */
static void *open_req(void *ctx, const char *endpoint)
{
    void *s = zmq_socket(ctx, ZMQ_REQ);
    int zero = 0, one = 1;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(s, ZMQ_IMMEDIATE, &one, sizeof one);
    ck_assert_int_eq(zmq_connect(s, endpoint), 0);
    return s;
}

/* A server that answers one request with `reply` after delay_ms, keeping
 * what it was sent (a thread; bound on a free loopback port). */
typedef struct {
    void *ctx, *sock;
    char endpoint[64], got[64];
    const char *reply;
    int delay_ms;
    pthread_t th;
} srv_t;

static void *srv_run(void *arg)
{
    srv_t *v = arg;
    int n = zmq_recv(v->sock, v->got, sizeof v->got - 1, 0);
    if (n < 0)
        return NULL;
    v->got[n] = '\0';
    if (v->delay_ms)
        zmq_poll(NULL, 0, v->delay_ms);
    zmq_send(v->sock, v->reply, strlen(v->reply), 0);
    return NULL;
}

static void srv_start(srv_t *v, const char *reply, int delay_ms)
{
    memset(v, 0, sizeof *v);
    v->reply = reply;
    v->delay_ms = delay_ms;
    v->ctx = zmq_ctx_new();
    v->sock = zmq_socket(v->ctx, ZMQ_REP);
    int zero = 0, t = 3000;
    zmq_setsockopt(v->sock, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(v->sock, ZMQ_RCVTIMEO, &t, sizeof t);
    ck_assert_int_eq(zmq_bind(v->sock, "tcp://127.0.0.1:*"), 0);
    size_t len = sizeof v->endpoint;
    zmq_getsockopt(v->sock, ZMQ_LAST_ENDPOINT, v->endpoint, &len);
    ck_assert_int_eq(pthread_create(&v->th, NULL, srv_run, v), 0);
}

static void srv_stop(srv_t *v)
{
    pthread_join(v->th, NULL);
    zmq_close(v->sock);
    zmq_ctx_term(v->ctx);
}

/* What the callbacks saw, and what they do. */
typedef struct {
    char seen[4][16];
    int who[4], nseen;
    int stop_at_first, cut_ms, skip; /* skip: index to fanout_skip() at the first reply */
    void *ctx;
    const char *add; /* an endpoint to add at the first reply */
} log_t;

static int on_reply(fanout_t *f, int i, const char *data, size_t len, void *arg)
{
    log_t *l = arg;
    if (l->nseen < 4) {
        snprintf(l->seen[l->nseen], sizeof l->seen[0], "%.*s", data ? (int)len : 4,
                 data ? data : "NULL");
        l->who[l->nseen] = i;
    }
    if (l->nseen++ == 0) {
        if (l->cut_ms)
            fanout_cut(f, l->cut_ms);
        if (l->skip >= 0)
            fanout_skip(f, l->skip);
        if (l->add)
            ck_assert_int_eq(fanout_add(f, open_req(l->ctx, l->add)), fanout_count(f) - 1);
        if (l->stop_at_first)
            return FANOUT_STOP;
    }
    return FANOUT_GO_ON;
}

START_TEST(test_fanout_all_answer)
{
    srv_t a, b;
    srv_start(&a, "one", 0);
    srv_start(&b, "two", 50);
    void *ctx = zmq_ctx_new();
    fanout_t *f = fanout_new();
    ck_assert_int_eq(fanout_add(f, open_req(ctx, a.endpoint)), 0);
    ck_assert_int_eq(fanout_add(f, NULL), 1); /* could not be opened: done at once */
    ck_assert_int_eq(fanout_add(f, open_req(ctx, b.endpoint)), 2);
    ck_assert_int_eq(fanout_state(f, 1), FANOUT_DONE);
    log_t l = {.skip = -1};
    double t0 = mono_now();
    ck_assert_int_eq(fanout_run(f, "hello", 3000, on_reply, &l), 0);
    ck_assert_msg(mono_now() - t0 < 1.5, "took %.2f s", mono_now() - t0); /* not the timeout */
    ck_assert_int_eq(l.nseen, 2);
    ck_assert_str_eq(l.seen[0], "one"); /* b answers 50 ms later */
    ck_assert_int_eq(l.who[0], 0);
    ck_assert_str_eq(l.seen[1], "two");
    ck_assert_int_eq(l.who[1], 2);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(fanout_state(f, i), FANOUT_DONE);
    fanout_destroy(f);
    zmq_ctx_term(ctx);
    srv_stop(&a);
    srv_stop(&b);
    ck_assert_str_eq(a.got, "hello");
    ck_assert_str_eq(b.got, "hello");
}
END_TEST

START_TEST(test_fanout_stop)
{
    srv_t a, b;
    srv_start(&a, "first", 0);
    srv_start(&b, "late", 400);
    void *ctx = zmq_ctx_new();
    fanout_t *f = fanout_new();
    fanout_add(f, open_req(ctx, a.endpoint));
    fanout_add(f, open_req(ctx, b.endpoint));
    log_t l = {.skip = -1, .stop_at_first = 1};
    double t0 = mono_now();
    ck_assert_int_eq(fanout_run(f, "x", 3000, on_reply, &l), 1);
    ck_assert_msg(mono_now() - t0 < 0.3, "took %.2f s", mono_now() - t0);
    ck_assert_int_eq(l.nseen, 1);
    ck_assert_str_eq(l.seen[0], "first");
    /* not answered: asked, or not yet (sent on POLLOUT: on a starved host
     * the first reply can come before the second connection is up) */
    ck_assert_int_ne(fanout_state(f, 1), FANOUT_DONE);
    fanout_destroy(f);
    zmq_ctx_term(ctx);
    srv_stop(&a);
    srv_stop(&b);
}
END_TEST

START_TEST(test_fanout_dead_timeout_and_cut)
{
    /* a dead endpoint alone: never sent, the run ends at the timeout */
    void *ctx = zmq_ctx_new();
    fanout_t *f = fanout_new();
    fanout_add(f, open_req(ctx, DEAD));
    log_t l = {.skip = -1};
    double t0 = mono_now();
    ck_assert_int_eq(fanout_run(f, "x", 300, on_reply, &l), 0);
    double took = mono_now() - t0;
    ck_assert_msg(took >= 0.29 && took < 1.5, "took %.2f s", took);
    ck_assert_int_eq(l.nseen, 0);
    ck_assert_int_eq(fanout_state(f, 0), FANOUT_TO_SEND);
    fanout_destroy(f);

    /* a live one and a dead one: the cut at the first answer ends the run
     * long before the timeout */
    srv_t a;
    srv_start(&a, "live", 0);
    f = fanout_new();
    fanout_add(f, open_req(ctx, DEAD));
    fanout_add(f, open_req(ctx, a.endpoint));
    log_t m = {.skip = -1, .cut_ms = 100};
    t0 = mono_now();
    ck_assert_int_eq(fanout_run(f, "x", 4000, on_reply, &m), 0);
    took = mono_now() - t0;
    ck_assert_msg(took >= 0.09 && took < 1.5, "took %.2f s", took);
    ck_assert_int_eq(m.nseen, 1);
    ck_assert_int_eq(fanout_state(f, 0), FANOUT_TO_SEND);
    fanout_destroy(f);
    srv_stop(&a);

    /* the same with the dead one skipped: nothing left to poll, no wait */
    srv_start(&a, "live", 0);
    f = fanout_new();
    fanout_add(f, open_req(ctx, DEAD));
    fanout_add(f, open_req(ctx, a.endpoint));
    log_t s = {.skip = 0};
    t0 = mono_now();
    ck_assert_int_eq(fanout_run(f, "x", 4000, on_reply, &s), 0);
    ck_assert_msg(mono_now() - t0 < 0.5, "took %.2f s", mono_now() - t0);
    ck_assert_int_eq(s.nseen, 1);
    fanout_destroy(f);
    srv_stop(&a);
    zmq_ctx_term(ctx);
}
END_TEST

START_TEST(test_fanout_add_during_run)
{
    srv_t a, b;
    srv_start(&a, "standby", 0);
    srv_start(&b, "leader", 0);
    void *ctx = zmq_ctx_new();
    fanout_t *f = fanout_new();
    fanout_add(f, open_req(ctx, a.endpoint));
    log_t l = {.skip = -1, .ctx = ctx, .add = b.endpoint};
    ck_assert_int_eq(fanout_run(f, "ask", 3000, on_reply, &l), 0);
    ck_assert_int_eq(l.nseen, 2);
    ck_assert_str_eq(l.seen[1], "leader");
    ck_assert_int_eq(l.who[1], 1);
    fanout_destroy(f);
    zmq_ctx_term(ctx);
    srv_stop(&a);
    srv_stop(&b);
    ck_assert_str_eq(b.got, "ask");
}
END_TEST

START_TEST(test_fanout_full)
{
    fanout_t *f = fanout_new();
    for (int i = 0; i < FANOUT_MAX; i++)
        ck_assert_int_eq(fanout_add(f, NULL), i);
    ck_assert_int_eq(fanout_add(f, NULL), -ENOSPC);
    ck_assert_int_eq(fanout_count(f), FANOUT_MAX);
    log_t l = {.skip = -1};
    ck_assert_int_eq(fanout_run(f, "x", 1000, on_reply, &l), 0); /* all done: returns at once */
    ck_assert_int_eq(l.nseen, 0);
    fanout_destroy(f);
    fanout_destroy(NULL);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {test_fanout_all_answer, test_fanout_stop,
                                  test_fanout_dead_timeout_and_cut, test_fanout_add_during_run,
                                  test_fanout_full};
    return testlib_run_tests("fanout", tests, sizeof tests / sizeof tests[0]);
}
