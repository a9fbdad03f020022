/* test_ctlreq.c - Check suite for controller/ctl/ctlreq: bqos-ctl's request to one controller (a reply, a refusal, garbage, another version, nobody there, a bad endpoint) and to a list (the leader a standby names, a standby's refusal when no leader answers), over real ZeroMQ sockets on loopback. */
#include <check.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <zmq.h>

#include "common/mono.h"
#include "controller/ctl/ctlreq.h"
#include "tests/testlib.h"

/* No admin endpoint listens here (a reserved port). */
#define DEAD "tcp://127.0.0.1:1"

/* A controller's admin endpoint that answers one request with `reply` (a
 * thread; a REP socket bound on a free loopback port). */
typedef struct {
    void *ctx, *sock;
    char endpoint[64];
    char reply[512];
    char asked[512]; /* the request received ("" none) */
    pthread_t th;
} fake_t;

static void *fake_run(void *arg)
{
    fake_t *f = arg;
    int n = zmq_recv(f->sock, f->asked, sizeof f->asked - 1, 0);
    if (n < 0)
        return NULL;
    f->asked[n] = '\0';
    zmq_send(f->sock, f->reply, strlen(f->reply), 0);
    return NULL;
}

static void fake_start(fake_t *f, const char *reply)
{
    memset(f, 0, sizeof *f);
    snprintf(f->reply, sizeof f->reply, "%s", reply);
    f->ctx = zmq_ctx_new();
    f->sock = zmq_socket(f->ctx, ZMQ_REP);
    int zero = 0, t = 3000;
    zmq_setsockopt(f->sock, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(f->sock, ZMQ_RCVTIMEO, &t, sizeof t);
    ck_assert_int_eq(zmq_bind(f->sock, "tcp://127.0.0.1:*"), 0);
    size_t len = sizeof f->endpoint;
    zmq_getsockopt(f->sock, ZMQ_LAST_ENDPOINT, f->endpoint, &len);
}

static void fake_go(fake_t *f)
{
    ck_assert_int_eq(pthread_create(&f->th, NULL, fake_run, f), 0);
}

static void fake_stop(fake_t *f)
{
    pthread_join(f->th, NULL);
    zmq_close(f->sock);
    zmq_ctx_term(f->ctx);
}

/* The request every case sends. */
static json_t *status_req(void)
{
    return json_pack("{s:i, s:s}", "v", 1, "cmd", "status");
}

/* One endpoint answering `reply`: ctlreq_any()'s result and *code. */
static json_t *ask_one(const char *reply, int *code, fake_t *f)
{
    fake_start(f, reply);
    fake_go(f);
    json_t *req = status_req();
    json_t *r = ctlreq_any(f->endpoint, 2000, req, code, NULL);
    json_decref(req);
    fake_stop(f);
    return r;
}

START_TEST(test_ctlreq_one_answer)
{
    fake_t f;
    int code = -1;
    json_t *r = ask_one("{\"v\":1,\"ok\":true,\"x\":7}", &code, &f);
    ck_assert_ptr_nonnull(r);
    ck_assert_int_eq(code, CTLREQ_OK);
    ck_assert_int_eq(json_integer_value(json_object_get(r, "x")), 7);
    json_decref(r);
    /* what the controller got is the request, as compact JSON */
    json_t *got = json_loads(f.asked, 0, NULL);
    ck_assert_str_eq(json_string_value(json_object_get(got, "cmd")), "status");
    json_decref(got);
}
END_TEST

START_TEST(test_ctlreq_refused)
{
    fake_t f;
    int code = -1;
    json_t *r = ask_one("{\"v\":1,\"ok\":false,\"error\":\"busy\",\"message\":\"try again\"}",
                        &code, &f);
    ck_assert_ptr_nonnull(r); /* the caller may print more of it */
    ck_assert_int_eq(code, CTLREQ_REFUSED);
    ck_assert_str_eq(json_string_value(json_object_get(r, "error")), "busy");
    json_decref(r);
}
END_TEST

/* What is not the protocol's reply is no answer: garbage, another
 * version, an array. */
START_TEST(test_ctlreq_garbage)
{
    static const char *const bad[] = {"nope", "{\"v\":2,\"ok\":true}", "[1,2]", "{\"ok\":true}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        fake_t f;
        int code = -1;
        json_t *r = ask_one(bad[i], &code, &f);
        ck_assert_msg(r == NULL, "took %s", bad[i]);
        ck_assert_int_eq(code, CTLREQ_UNREACHABLE);
    }
}
END_TEST

/* Nobody there: unreachable within the timeout; a bad endpoint: usage. */
START_TEST(test_ctlreq_unreachable)
{
    json_t *req = status_req();
    int code = -1;
    double t0 = mono_now();
    ck_assert_ptr_null(ctlreq_any(DEAD, 200, req, &code, NULL));
    ck_assert_int_eq(code, CTLREQ_UNREACHABLE);
    ck_assert_double_lt(mono_now() - t0, 1.5);
    code = -1;
    ck_assert_ptr_null(ctlreq_any("nonsense", 200, req, &code, NULL));
    ck_assert_int_eq(code, CTLREQ_USAGE);
    code = -1; /* a list of dead ones: each said, unreachable */
    ck_assert_ptr_null(ctlreq_any(DEAD "," DEAD, 200, req, &code, NULL));
    ck_assert_int_eq(code, CTLREQ_UNREACHABLE);
    json_decref(req);
}
END_TEST

/* A list: a standby's not_leader names the leader, which is not in the
 * list; it is asked too and its answer is the one returned. */
START_TEST(test_ctlreq_leader_named)
{
    fake_t leader, standby;
    fake_start(&leader, "{\"v\":1,\"ok\":true,\"leader\":true,\"who\":\"leader\"}");
    char sr[300];
    snprintf(sr, sizeof sr,
             "{\"v\":1,\"ok\":false,\"error\":\"not_leader\",\"message\":\"a standby\","
             "\"leader_id\":\"c2\",\"leader_admin\":\"%s\"}",
             leader.endpoint);
    fake_start(&standby, sr);
    fake_go(&leader);
    fake_go(&standby);
    char list[200];
    snprintf(list, sizeof list, "%s,%s", DEAD, standby.endpoint);
    json_t *req = status_req();
    int code = -1;
    json_t *r = ctlreq_any(list, 2000, req, &code, NULL);
    ck_assert_ptr_nonnull(r);
    ck_assert_int_eq(code, CTLREQ_OK);
    ck_assert_str_eq(json_string_value(json_object_get(r, "who")), "leader");
    json_decref(r);
    json_decref(req);
    fake_stop(&leader);
    fake_stop(&standby);
}
END_TEST

/* A list whose only answer is a standby's refusal naming no leader: that
 * refusal, once the timeout ran out. */
START_TEST(test_ctlreq_no_leader)
{
    fake_t standby;
    fake_start(&standby, "{\"v\":1,\"ok\":false,\"error\":\"not_leader\",\"message\":\"a "
                         "standby\"}");
    fake_go(&standby);
    char list[200];
    snprintf(list, sizeof list, "%s,%s", standby.endpoint, DEAD);
    json_t *req = status_req();
    int code = -1;
    json_t *r = ctlreq_any(list, 300, req, &code, NULL);
    ck_assert_ptr_nonnull(r);
    ck_assert_int_eq(code, CTLREQ_REFUSED);
    ck_assert_str_eq(json_string_value(json_object_get(r, "error")), "not_leader");
    json_decref(r);
    json_decref(req);
    fake_stop(&standby);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {test_ctlreq_one_answer,  test_ctlreq_refused,
                                  test_ctlreq_garbage,     test_ctlreq_unreachable,
                                  test_ctlreq_leader_named, test_ctlreq_no_leader};
    return testlib_run_timed("ctlreq", 20, tests, sizeof tests / sizeof tests[0]);
}
