/* ctlreq.c - bqos-ctl's requests to controllers: a REQ socket per endpoint, the reply parsed into an exit status, one request to a list answered by its leader. */
#include "controller/ctl/ctlreq.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "common/hostport.h"
#include "common/proto.h"
#include "controller/ctl/fanout.h"

void *ctlreq_open(void *ctx, const char *endpoint, int timeout_ms, const curvekey_t *keys,
                  int *code)
{
    void *sock = zmq_socket(ctx, ZMQ_REQ);
    if (!sock) {
        fprintf(stderr, "bqos-ctl: cannot set up ZeroMQ: %s\n", zmq_strerror(zmq_errno()));
        return NULL;
    }
    int zero = 0, one = 1, v6 = hostport_zmq_ipv6(endpoint);
    zmq_setsockopt(sock, ZMQ_IPV6, &v6, sizeof v6);
    zmq_setsockopt(sock, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(sock, ZMQ_IMMEDIATE, &one, sizeof one);
    zmq_setsockopt(sock, ZMQ_SNDTIMEO, &timeout_ms, sizeof timeout_ms);
    zmq_setsockopt(sock, ZMQ_RCVTIMEO, &timeout_ms, sizeof timeout_ms);
    if (keys && curvekey_set_client(sock, &keys[0], &keys[1]) < 0) {
        fprintf(stderr, "bqos-ctl: cannot set the CURVE keys: %s\n", zmq_strerror(zmq_errno()));
        zmq_close(sock);
        return NULL;
    }
    if (zmq_connect(sock, endpoint) != 0) {
        fprintf(stderr, "bqos-ctl: bad endpoint '%s': %s\n", endpoint, zmq_strerror(zmq_errno()));
        *code = CTLREQ_USAGE;
        zmq_close(sock);
        return NULL;
    }
    return sock;
}

/* The message for an endpoint that took no request within timeout_ms. */
static void print_unreachable(const char *endpoint, int timeout_ms, const curvekey_t *keys)
{
    fprintf(stderr,
            "bqos-ctl: controller unreachable at %s (no connection within %d ms); "
            "is bqos-controller running with this admin endpoint?%s\n",
            endpoint, timeout_ms,
            keys ? "  Or it does not accept our key (--curve-key), or it is not the "
                   "key of --controller-key"
                 : "  A controller with --curve-key takes only clients with keys "
                   "(--curve-key, --controller-key)");
}

/* The reply in msg, parsed and checked (caller owns it), or NULL with a
 * message printed; *code set to the exit status to use.  `quiet`: a
 * not_leader refusal is not printed (several endpoints are tried: it is said
 * only if no leader answers). */
static json_t *parse_reply(const char *data, size_t len, int quiet, int *code)
{
    json_error_t jerr;
    *code = CTLREQ_UNREACHABLE;
    json_t *reply = json_loadb(data, len, 0, &jerr);
    if (!reply || !json_is_object(reply)) {
        fprintf(stderr, "bqos-ctl: the controller's reply is not a JSON object%s%s\n",
                reply ? "" : ": ", reply ? "" : jerr.text);
        json_decref(reply);
        return NULL;
    }
    json_t *v = json_object_get(reply, "v");
    if (!json_is_integer(v) || json_integer_value(v) != PROTO_ADMIN_VERSION) {
        fprintf(stderr, "bqos-ctl: the controller speaks another admin protocol version\n");
        json_decref(reply);
        return NULL;
    }
    if (!json_is_true(json_object_get(reply, "ok"))) {
        const char *ec = json_string_value(json_object_get(reply, "error"));
        const char *msgtext = json_string_value(json_object_get(reply, "message"));
        if (!(quiet && ec && strcmp(ec, "not_leader") == 0))
            fprintf(stderr, "bqos-ctl: controller refused: %s%s%s\n", ec ? ec : "error",
                msgtext ? ": " : "", msgtext ? msgtext : "");
        *code = CTLREQ_REFUSED;
    } else {
        *code = CTLREQ_OK;
    }
    return reply;
}

/* Sends `req` to the admin endpoint and waits for the reply.  Returns the
 * parsed reply (caller owns it) or NULL with a message printed; *code is
 * set to the exit status to use. */
static json_t *request(const char *endpoint, int timeout_ms, json_t *req, int *code,
                       const curvekey_t *keys)
{
    json_t *reply = NULL;
    char *text = json_dumps(req, JSON_COMPACT);
    void *ctx = zmq_ctx_new();
    *code = CTLREQ_UNREACHABLE;
    void *sock = ctx && text ? ctlreq_open(ctx, endpoint, timeout_ms, keys, code) : NULL;
    if (!text || !ctx) {
        fprintf(stderr, "bqos-ctl: cannot set up ZeroMQ: %s\n", zmq_strerror(zmq_errno()));
        goto out;
    }
    if (!sock)
        goto out;
    if (zmq_send(sock, text, strlen(text), 0) < 0) {
        if (zmq_errno() == EAGAIN)
            print_unreachable(endpoint, timeout_ms, keys);
        else
            fprintf(stderr, "bqos-ctl: send to %s failed: %s\n", endpoint,
                    zmq_strerror(zmq_errno()));
        goto out;
    }
    zmq_msg_t msg;
    zmq_msg_init(&msg);
    if (zmq_msg_recv(&msg, sock, 0) < 0) {
        if (zmq_errno() == EAGAIN)
            fprintf(stderr, "bqos-ctl: controller at %s did not answer within %d ms\n", endpoint,
                    timeout_ms);
        else
            fprintf(stderr, "bqos-ctl: receive from %s failed: %s\n", endpoint,
                    zmq_strerror(zmq_errno()));
        zmq_msg_close(&msg);
        goto out;
    }
    reply = parse_reply(zmq_msg_data(&msg), zmq_msg_size(&msg), 0, code);
    zmq_msg_close(&msg);
out:
    free(text);
    if (sock)
        zmq_close(sock);
    if (ctx)
        zmq_ctx_term(ctx);
    return reply;
}

/* Nonzero if `reply` is a not_leader refusal. */
static int not_leader(json_t *reply)
{
    const char *ec = json_string_value(json_object_get(reply, "error"));
    return reply && ec && strcmp(ec, "not_leader") == 0;
}

/* ctlreq_any()'s state while the answers come (fanout_run()'s arg). */
typedef struct {
    char **eps; /* [CTLREQ_ENDPOINTS_MAX + 1]: the list's, then a leader a standby names */
    int n;      /* endpoints in eps[], one socket each in the fanout */
    char named[300];
    json_t *first, *leader; /* owned */
    int first_code, code;
    void *ctx;
    int timeout_ms;
    const curvekey_t *keys;
} any_t;

/* An endpoint's answer: a leader's stops the fanout; a standby's that names
 * a leader not in the list adds it; the first answer is kept. */
static int any_reply(fanout_t *f, int i, const char *data, size_t len, void *arg)
{
    (void)i;
    any_t *a = arg;
    int c;
    json_t *r = data ? parse_reply(data, len, 1, &c) : NULL;
    if (!r)
        return FANOUT_GO_ON;
    if (!(not_leader(r) || json_is_false(json_object_get(r, "leader")))) {
        a->leader = r;
        a->code = c;
        return FANOUT_STOP;
    }
    const char *la = json_string_value(json_object_get(r, "leader_admin"));
    if (la && *la && !a->named[0]) {
        snprintf(a->named, sizeof a->named, "%s", la);
        int listed = 0;
        for (int m = 0; m < a->n; m++)
            listed |= strcmp(a->eps[m], la) == 0;
        if (!listed && a->n < CTLREQ_ENDPOINTS_MAX + 1) { /* ask the leader it names too */
            a->eps[a->n] = a->named;
            void *s = ctlreq_open(a->ctx, a->named, a->timeout_ms, a->keys, &c);
            if (s && fanout_add(f, s) == a->n)
                a->n++;
            else if (s)
                zmq_close(s); /* never: FANOUT_MAX is beyond CTLREQ_ENDPOINTS_MAX + 1 */
        }
    }
    if (!a->first) {
        a->first = r;
        a->first_code = c;
    } else {
        json_decref(r);
    }
    return FANOUT_GO_ON;
}

json_t *ctlreq_any(const char *list, int timeout_ms, json_t *req, int *code,
                   const curvekey_t *keys)
{
    char *eps[CTLREQ_ENDPOINTS_MAX + 1];
    int n = 0;
    char *copy = strdup(list), *save = NULL;
    if (!copy) {
        *code = CTLREQ_UNREACHABLE;
        return NULL;
    }
    for (char *t = strtok_r(copy, ",", &save); t && n < CTLREQ_ENDPOINTS_MAX;
         t = strtok_r(NULL, ",", &save))
        eps[n++] = t;
    if (n <= 1) {
        json_t *r = request(n ? eps[0] : list, timeout_ms, req, code, keys);
        free(copy);
        return r;
    }
    any_t a = {.eps = eps, .n = n, .first_code = CTLREQ_UNREACHABLE, .timeout_ms = timeout_ms,
               .keys = keys};
    char *text = json_dumps(req, JSON_COMPACT);
    fanout_t *f = fanout_new();
    a.ctx = zmq_ctx_new();
    *code = CTLREQ_UNREACHABLE;
    if (!text || !f || !a.ctx) {
        fprintf(stderr, "bqos-ctl: cannot set up ZeroMQ: %s\n", zmq_strerror(zmq_errno()));
        goto out;
    }
    for (int i = 0; i < n; i++)
        fanout_add(f, ctlreq_open(a.ctx, eps[i], timeout_ms, keys, code));
    fanout_run(f, text, timeout_ms, any_reply, &a);
    if (a.leader) {
        json_decref(a.first);
        *code = a.code;
        goto out;
    }
    *code = a.first_code;
    for (int i = 0; i < a.n && !a.first; i++) { /* nobody answered: say why, per endpoint */
        if (fanout_state(f, i) == FANOUT_TO_SEND)
            print_unreachable(eps[i], timeout_ms, keys);
        else if (fanout_state(f, i) == FANOUT_SENT)
            fprintf(stderr, "bqos-ctl: controller at %s did not answer within %d ms\n", eps[i],
                    timeout_ms);
    }
    if (a.first && not_leader(a.first)) {
        const char *m = json_string_value(json_object_get(a.first, "message"));
        fprintf(stderr, "bqos-ctl: controller refused: not_leader: %s; no leader answered among %s\n",
                m ? m : "", list);
    }
    a.leader = a.first;
out:
    fanout_destroy(f); /* its sockets, before the context */
    if (a.ctx)
        zmq_ctx_term(a.ctx);
    free(text);
    free(copy);
    return a.leader;
}
