/* test_authkeys.c - Check suite for the controller's authorized keys file (controller/daemon/authkeys: parse, errors at line:column, duplicates, lookup) and auth's checks (roles, name binding, reachable endpoints). */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "controller/daemon/auth.h"
#include "controller/daemon/authkeys.h"
#include "tests/testlib.h"

static char k1[41], k2[41], k3[41];

static void keys(void)
{
    char s[41];
    ck_assert_int_eq(zmq_curve_keypair(k1, s), 0);
    ck_assert_int_eq(zmq_curve_keypair(k2, s), 0);
    ck_assert_int_eq(zmq_curve_keypair(k3, s), 0);
}

static int parse(const char *text, authkeys_t **a, jsonloc_err_t *err)
{
    return authkeys_parse(text, strlen(text), "ak", a, err);
}

START_TEST(test_authkeys_parses_roles_and_finds_by_key)
{
    keys();
    char text[512];
    snprintf(text, sizeof text,
             "# the cluster's peers\n\nnode n1 %s\n  admin\talice %s   # no: comments are whole lines\n",
             k1, k2);
    authkeys_t *a;
    jsonloc_err_t err;
    ck_assert_int_eq(parse(text, &a, &err), -EINVAL);
    ck_assert_int_eq(err.line, 4);
    ck_assert_int_eq(err.col, 58);
    snprintf(text, sizeof text, "# peers\n\nnode n1 %s\n  admin\talice %s\nreader mon %s", k1, k2,
             k3);
    ck_assert_int_eq(parse(text, &a, &err), 0);
    ck_assert_uint_eq(authkeys_count(a), 3);
    const authkeys_entry_t *e = authkeys_find_key(a, k2);
    ck_assert_ptr_nonnull(e);
    ck_assert_int_eq(e->role, AUTHKEYS_ADMIN);
    ck_assert_str_eq(e->name, "alice");
    e = authkeys_find_key(a, k3);
    ck_assert_int_eq(e->role, AUTHKEYS_READER);
    ck_assert_str_eq(e->name, "mon");
    ck_assert_str_eq(authkeys_find_key(a, k1)->name, "n1");
    char other[41], s[41];
    zmq_curve_keypair(other, s);
    ck_assert_ptr_null(authkeys_find_key(a, other));
    authkeys_destroy(&a);
    ck_assert_ptr_null(a);
    ck_assert_int_eq(parse("", &a, &err), 0); /* nobody */
    ck_assert_uint_eq(authkeys_count(a), 0);
    authkeys_destroy(&a);
}
END_TEST

START_TEST(test_authkeys_errors_have_line_and_column)
{
    keys();
    struct {
        const char *fmt;
        int line, col;
        const char *what;
    } cases[] = {
        {"node n1 %s\nwizard w %s\n", 2, 1, "role"},
        {"node n1\n", 1, 6, "expected ROLE NAME PUBKEY"},
        {"admin\n", 1, 1, "expected ROLE NAME PUBKEY"},
        {"node n1 %.39s\n", 1, 9, "not a CURVE public key"},
        {"node n1 %s x\n", 1, 50, "unexpected"},
        {"node n1 %s\nnode n2 %s\n", 2, 9, "already authorized"},
        {"node n1 %s\n\nadmin n1 %s\n", 3, 10, "already authorized"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[512];
        snprintf(text, sizeof text, cases[i].fmt, k1, i >= 5 ? k1 : k2);
        authkeys_t *a = (authkeys_t *)1;
        jsonloc_err_t err;
        ck_assert_int_eq(parse(text, &a, &err), -EINVAL);
        ck_assert_ptr_null(a);
        ck_assert_msg(err.line == cases[i].line && err.col == cases[i].col,
                      "case %zu: %d:%d, want %d:%d (%s)", i, err.line, err.col, cases[i].line,
                      cases[i].col, err.text);
        ck_assert_msg(strstr(err.text, cases[i].what), "case %zu: %s", i, err.text);
        ck_assert_str_eq(err.source, "ak");
    }
    /* the same name under two roles is two peers; two keys of one name, a
     * rotation */
    char text[512];
    snprintf(text, sizeof text, "node x %s\nadmin x %s\nnode x %s\n", k1, k2, k3);
    authkeys_t *a;
    jsonloc_err_t err;
    ck_assert_int_eq(parse(text, &a, &err), 0);
    ck_assert_str_eq(authkeys_find_key(a, k3)->name, "x");
    ck_assert_str_eq(authkeys_find_key(a, k1)->name, "x");
    authkeys_destroy(&a);
    ck_assert_int_eq(authkeys_load("/nonexistent/ak", &a, &err), -ENOENT);
    ck_assert_str_eq(err.source, "/nonexistent/ak");
}
END_TEST

/* auth_node(), auth_admin(): what a peer may do by its key. */
START_TEST(test_auth_checks_roles_and_names)
{
    keys();
    char text[512];
    snprintf(text, sizeof text, "node n1 %s\nadmin alice %s\nreader mon %s\n", k1, k2, k3);
    auth_t au = {.path = "ak"};
    jsonloc_err_t err;
    ck_assert_int_eq(parse(text, &au.keys, &err), 0);
    proto_peer_t n1 = {.user = "node n1"}, alice = {.user = "admin alice"},
                 mon = {.user = "reader mon"}, gone = {.user = "node n9"};
    memcpy(n1.key, k1, 41);
    memcpy(alice.key, k2, 41);
    memcpy(mon.key, k3, 41);
    char s[41];
    zmq_curve_keypair(gone.key, s);
    ck_assert_int_eq(auth_node(&au, &n1, "n1"), 0);
    ck_assert_int_eq(auth_node(&au, &n1, "n2"), -EPERM); /* a stolen name */
    ck_assert_uint_eq(au.refused[AUTH_NAME_MISMATCH], 1);
    ck_assert_int_eq(auth_node(&au, &alice, "alice"), -EPERM);
    ck_assert_uint_eq(au.refused[AUTH_WRONG_ROLE], 1);
    ck_assert_int_eq(auth_node(&au, &gone, "n9"), -EPERM);
    ck_assert_uint_eq(au.refused[AUTH_UNKNOWN_KEY], 1);
    const char *who;
    char msg[200];
    ck_assert_int_eq(auth_admin(&au, &mon, "status", 0, &who, msg, sizeof msg), 0);
    ck_assert_str_eq(who, "reader mon");
    ck_assert_int_eq(auth_admin(&au, &mon, "set", 1, &who, msg, sizeof msg), -EPERM);
    ck_assert_ptr_nonnull(strstr(msg, "set"));
    ck_assert_uint_eq(au.refused[AUTH_WRONG_ROLE], 2);
    ck_assert_int_eq(auth_admin(&au, &alice, "set", 1, &who, msg, sizeof msg), 0);
    ck_assert_str_eq(who, "admin alice");
    ck_assert_int_eq(auth_admin(&au, &n1, "status", 0, &who, msg, sizeof msg), -EPERM);
    /* no CURVE: anyone, anything */
    ck_assert_int_eq(auth_node(NULL, &gone, "x"), 0);
    ck_assert_int_eq(auth_admin(NULL, &gone, "set", 1, &who, msg, sizeof msg), 0);
    ck_assert_str_eq(who, "anonymous");
    auth_clear(&au);
}
END_TEST

/* The ZAP handler in a real ZeroMQ context: a listed node key gets through
 * with its name and key on every message; an unlisted one never does. */
START_TEST(test_auth_zap_admits_listed_keys_only)
{
    char spub[41], ssec[41], npub[41], nsec[41], xpub[41], xsec[41], path[] = "/tmp/test_auth.XXXXXX";
    ck_assert_int_eq(zmq_curve_keypair(spub, ssec), 0);
    ck_assert_int_eq(zmq_curve_keypair(npub, nsec), 0);
    ck_assert_int_eq(zmq_curve_keypair(xpub, xsec), 0);
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    FILE *f = fdopen(fd, "w");
    fprintf(f, "node n1 %s\n", npub);
    fclose(f);
    void *ctx = zmq_ctx_new();
    auth_t au;
    ck_assert_int_eq(auth_start(&au, ctx, path), 0);
    curvekey_t server = {{0}, {0}}, node = {{0}, {0}}, stranger = {{0}, {0}};
    memcpy(server.public_z85, spub, 41);
    memcpy(server.secret_z85, ssec, 41);
    memcpy(node.public_z85, npub, 41);
    memcpy(node.secret_z85, nsec, 41);
    memcpy(stranger.public_z85, xpub, 41);
    memcpy(stranger.secret_z85, xsec, 41);
    void *router = zmq_socket(ctx, ZMQ_ROUTER);
    ck_assert_int_eq(curvekey_set_server(router, &server, AUTH_DOMAIN_NODES), 0);
    /* tcp: inproc has no handshake, hence no security mechanism */
    char ep[64];
    size_t epl = sizeof ep;
    ck_assert_int_eq(zmq_bind(router, "tcp://127.0.0.1:*"), 0);
    ck_assert_int_eq(zmq_getsockopt(router, ZMQ_LAST_ENDPOINT, ep, &epl), 0);
    void *good = zmq_socket(ctx, ZMQ_DEALER), *bad = zmq_socket(ctx, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(bad, ZMQ_LINGER, &zero, sizeof zero); /* its message never leaves */
    ck_assert_int_eq(curvekey_set_client(good, &node, &server), 0);
    ck_assert_int_eq(curvekey_set_client(bad, &stranger, &server), 0);
    ck_assert_int_eq(zmq_connect(bad, ep), 0);
    ck_assert_int_eq(zmq_connect(good, ep), 0);
    zmq_send(bad, "x", 1, ZMQ_DONTWAIT);
    zmq_send(good, "hi", 2, ZMQ_DONTWAIT);
    int got = 0;
    for (int i = 0; i < 500 && !got; i++) { /* the loop's job: answer ZAP, read */
        zmq_pollitem_t it[2] = {{au.zap, 0, ZMQ_POLLIN, 0}, {router, 0, ZMQ_POLLIN, 0}};
        zmq_poll(it, 2, 10);
        if (it[0].revents & ZMQ_POLLIN)
            auth_drain(&au);
        if (!(it[1].revents & ZMQ_POLLIN))
            continue;
        zmq_msg_t id, body;
        zmq_msg_init(&id);
        zmq_msg_init(&body);
        ck_assert_int_ge(zmq_msg_recv(&id, router, 0), 0);
        ck_assert_int_ge(zmq_msg_recv(&body, router, 0), 0);
        ck_assert_int_eq((int)zmq_msg_size(&body), 2); /* never the stranger's */
        proto_peer_t p;
        proto_peer_get(&body, &p);
        ck_assert_str_eq(p.user, "node n1");
        ck_assert_str_eq(p.key, npub);
        ck_assert_int_eq(auth_node(&au, &p, "n1"), 0);
        ck_assert_int_eq(auth_node(&au, &p, "n2"), -EPERM);
        zmq_msg_close(&id);
        zmq_msg_close(&body);
        got = 1;
    }
    ck_assert_int_eq(got, 1);
    for (int i = 0; i < 100 && au.refused[AUTH_UNKNOWN_KEY] == 0; i++) {
        zmq_pollitem_t it = {au.zap, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&it, 1, 10) > 0)
            auth_drain(&au);
    }
    ck_assert_uint_eq(au.refused[AUTH_UNKNOWN_KEY], 1);
    ck_assert_uint_eq(au.accepted, 1);
    zmq_close(good);
    zmq_close(bad);
    zmq_close(router);
    auth_clear(&au);
    zmq_ctx_term(ctx);
    unlink(path);
}
END_TEST

START_TEST(test_auth_endpoint_local)
{
    static const char *const local[] = {"tcp://127.0.0.1:7070", "tcp://127.9.8.7:1",
                                        "tcp://localhost:7070", "tcp://[::1]:7070",
                                        "ipc:///tmp/x", "inproc://x", "tcp://lo:7070"};
    static const char *const reachable[] = {"tcp://*:7070", "tcp://0.0.0.0:7070",
                                            "tcp://10.1.2.3:7070", "tcp://[::]:7070",
                                            "tcp://eth0:7070", "tcp://128.0.0.1:1",
                                            "tcp://127.0.0.1;10.0.0.1:7070", "udp://x"};
    for (size_t i = 0; i < sizeof local / sizeof local[0]; i++)
        ck_assert_msg(auth_endpoint_local(local[i]), "%s", local[i]);
    for (size_t i = 0; i < sizeof reachable / sizeof reachable[0]; i++)
        ck_assert_msg(!auth_endpoint_local(reachable[i]), "%s", reachable[i]);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {test_authkeys_parses_roles_and_finds_by_key,
                                  test_authkeys_errors_have_line_and_column,
                                  test_auth_checks_roles_and_names,
                                  test_auth_zap_admits_listed_keys_only, test_auth_endpoint_local};
    return testlib_run_tests("authkeys", tests, sizeof tests / sizeof tests[0]);
}
