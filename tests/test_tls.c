/* test_tls.c - Check suite for storage-node/io/tls: credential files refused with what and where, the handshake against a real GnuTLS client over a socket pair (client certificates none/request/require, an untrusted certificate, a plaintext client, a PSK), the peer's identity, and record reads and writes on non-blocking sockets.
 *
 * Certificates are made at test time with certtool (gnutls-bin): a CA, a
 * server certificate, a client certificate "alice" signed by the CA and
 * one "mallory" self-signed. */
#include <check.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <fcntl.h>
#include <gnutls/gnutls.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "storage-node/io/tls.h"
#include "tests/testlib.h"

static char dir[] = "/tmp/test_tls.XXXXXX";
static char path_buf[8][256];
enum { CA, CERT, KEY, ACERT, AKEY, MCERT, MKEY, PSK };

static const char *P(int i)
{
    return path_buf[i];
}

static void run(const char *cmd)
{
    ck_assert_msg(system(cmd) == 0, "failed: %s", cmd);
}

/* The PKI in dir (once per process: each case forks). */
static void pki(void)
{
    static const char *names[] = {"ca.pem", "server.pem", "server.key", "alice.pem",
                                  "alice.key", "mallory.pem", "mallory.key", "keys.psk"};
    if (path_buf[0][0])
        return;
    ck_assert_ptr_nonnull(mkdtemp(dir));
    for (int i = 0; i < 8; i++)
        snprintf(path_buf[i], sizeof path_buf[i], "%s/%s", dir, names[i]);
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "cd %s && umask 077 && "
             "printf 'cn = test CA\\nca\\ncert_signing_key\\nexpiration_days = 2\\n' >ca.tmpl && "
             "printf 'cn = localhost\\ntls_www_server\\nexpiration_days = 2\\n' >server.tmpl && "
             "printf 'cn = alice\\ntls_www_client\\nexpiration_days = 2\\n' >alice.tmpl && "
             "printf 'cn = mallory\\ntls_www_client\\nexpiration_days = 2\\n' >mallory.tmpl && "
             "certtool -p --key-type ecdsa --outfile ca.key 2>/dev/null && "
             "certtool -s --load-privkey ca.key --template ca.tmpl --outfile ca.pem 2>/dev/null && "
             "for n in server alice mallory; do certtool -p --key-type ecdsa --outfile $n.key 2>/dev/null; done && "
             "certtool -c --load-privkey server.key --load-ca-certificate ca.pem --load-ca-privkey ca.key "
             "--template server.tmpl --outfile server.pem 2>/dev/null && "
             "certtool -c --load-privkey alice.key --load-ca-certificate ca.pem --load-ca-privkey ca.key "
             "--template alice.tmpl --outfile alice.pem 2>/dev/null && "
             "certtool -s --load-privkey mallory.key --template mallory.tmpl --outfile mallory.pem 2>/dev/null && "
             "echo 'alice:00112233445566778899aabbccddeeff' >keys.psk",
             dir);
    run(cmd);
}

static tls_t *load(const tls_files_t *f, int *rc, jsonloc_err_t *e)
{
    *rc = 0;
    memset(e, 0, sizeof *e);
    return tls_new(f, rc, e);
}

/* Every bad set of files is refused with its errno and the file named. */
START_TEST(test_tls_files_refused)
{
    pki();
    int rc;
    jsonloc_err_t e;
    tls_t *t = load(&(tls_files_t){.cert = P(CERT)}, &rc, &e);
    ck_assert_ptr_null(t);
    ck_assert_int_eq(rc, -EINVAL); /* cert without key */
    t = load(&(tls_files_t){.cert = P(CERT), .key = P(KEY), .verify = TLS_VERIFY_REQUIRE}, &rc, &e);
    ck_assert_ptr_null(t);
    ck_assert_int_eq(rc, -EINVAL); /* verify without a CA */
    t = load(&(tls_files_t){.cert = P(CERT), .key = P(KEY), .ca = P(CA)}, &rc, &e);
    ck_assert_ptr_null(t);
    ck_assert_int_eq(rc, -EINVAL); /* a CA that nothing uses */
    t = load(&(tls_files_t){.psk = P(PSK), .ca = P(CA), .verify = TLS_VERIFY_REQUEST}, &rc, &e);
    ck_assert_ptr_null(t);
    ck_assert_int_eq(rc, -EINVAL); /* client certificates without a certificate */
    t = load(&(tls_files_t){.cert = P(CERT), .key = P(KEY), .ca = P(PSK),
                            .verify = TLS_VERIFY_REQUEST}, &rc, &e);
    ck_assert_ptr_null(t);
    ck_assert_int_eq(rc, -EINVAL); /* a CA file without a certificate */
    ck_assert_str_eq(e.source, P(PSK));
    t = load(&(tls_files_t){.cert = P(CERT), .key = "/nonexistent/key"}, &rc, &e);
    ck_assert_ptr_null(t);
    ck_assert_int_eq(rc, -ENOENT);
    chmod(P(KEY), 0644);
    t = load(&(tls_files_t){.cert = P(CERT), .key = P(KEY)}, &rc, &e);
    chmod(P(KEY), 0600);
    ck_assert_ptr_null(t);
    ck_assert_int_eq(rc, -EACCES);
    char bad[300];
    snprintf(bad, sizeof bad, "%s/bad.psk", dir);
    FILE *fp = fopen(bad, "w");
    fputs("# keys\nalice:0011\nbob 0011\n", fp);
    fclose(fp);
    chmod(bad, 0600);
    t = load(&(tls_files_t){.psk = bad}, &rc, &e);
    ck_assert_ptr_null(t);
    ck_assert_int_eq(rc, -EINVAL);
    ck_assert_int_eq(e.line, 3);
    t = load(&(tls_files_t){.cert = P(CERT), .key = P(KEY), .ca = P(CA),
                            .verify = TLS_VERIFY_REQUIRE}, &rc, &e);
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(tls_verify_mode(t), TLS_VERIFY_REQUIRE);
    ck_assert_int_eq(tls_reload(t, &e), 0);
    tls_destroy(&t);
    ck_assert_ptr_null(t);
    tls_destroy(&t);
}
END_TEST

/* ---- a real client ------------------------------------------------------ */

typedef struct {
    int sv[2];                    /* [0] the server's, [1] the client's */
    tls_t *t;
    tls_sess_t *s;
    gnutls_session_t c;
    gnutls_certificate_credentials_t ccred;
    gnutls_psk_client_credentials_t pcred;
} pair_t;

/* A server with `files` and a GnuTLS client on a non-blocking socket pair;
 * the client shows certificate `cert`/`key` (NULL: none) or PSK `psk`. */
static void pair_new(pair_t *p, const tls_files_t *files, const char *cert, const char *key,
                     const char *psk)
{
    int rc;
    jsonloc_err_t e;
    memset(p, 0, sizeof *p);
    p->t = load(files, &rc, &e);
    ck_assert_msg(p->t != NULL, "%s", e.text);
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, p->sv), 0);
    for (int i = 0; i < 2; i++)
        fcntl(p->sv[i], F_SETFL, O_NONBLOCK);
    p->s = tls_sess_new(p->t, p->sv[0]);
    ck_assert_ptr_nonnull(p->s);
    ck_assert_int_eq(gnutls_init(&p->c, GNUTLS_CLIENT | GNUTLS_NONBLOCK), 0);
    if (psk) {
        gnutls_datum_t k = {(unsigned char *)"\x00\x11\x22\x33\x44\x55\x66\x77\x88\x99\xaa\xbb"
                                             "\xcc\xdd\xee\xff", 16};
        gnutls_psk_allocate_client_credentials(&p->pcred);
        gnutls_psk_set_client_credentials(p->pcred, psk, &k, GNUTLS_PSK_KEY_RAW);
        gnutls_credentials_set(p->c, GNUTLS_CRD_PSK, p->pcred);
        ck_assert_int_eq(gnutls_priority_set_direct(p->c, "NORMAL:+ECDHE-PSK:+DHE-PSK:+PSK", NULL), 0);
    } else {
        gnutls_certificate_allocate_credentials(&p->ccred);
        gnutls_certificate_set_x509_trust_file(p->ccred, P(CA), GNUTLS_X509_FMT_PEM);
        if (cert)
            ck_assert_int_eq(gnutls_certificate_set_x509_key_file(p->ccred, cert, key,
                                                                  GNUTLS_X509_FMT_PEM), 0);
        gnutls_credentials_set(p->c, GNUTLS_CRD_CERTIFICATE, p->ccred);
        gnutls_set_default_priority(p->c);
    }
    gnutls_transport_set_int(p->c, p->sv[1]);
}

static void pair_free(pair_t *p)
{
    tls_sess_free(&p->s);
    gnutls_deinit(p->c);
    if (p->ccred)
        gnutls_certificate_free_credentials(p->ccred);
    if (p->pcred)
        gnutls_psk_free_client_credentials(p->pcred);
    tls_destroy(&p->t);
    close(p->sv[0]);
    close(p->sv[1]);
}

/* Steps both sides until the server is done or fails: its last result. */
static int pair_handshake(pair_t *p, char *why, size_t n)
{
    int srv = 0, cli = GNUTLS_E_AGAIN;
    for (int i = 0; i < 200 && srv == 0; i++) {
        if (cli == GNUTLS_E_AGAIN || cli == GNUTLS_E_INTERRUPTED)
            cli = gnutls_handshake(p->c);
        srv = tls_handshake(p->s, why, n);
    }
    return srv;
}

/* With client certificates required, a client with one signed by the CA
 * gets through, its CN is the identity, and records flow both ways; the
 * session holds what did not fit a small read buffer (tls_pending()). */
START_TEST(test_tls_client_cert_name)
{
    pki();
    pair_t p;
    char why[256];
    pair_new(&p, &(tls_files_t){.cert = P(CERT), .key = P(KEY), .ca = P(CA),
                                .verify = TLS_VERIFY_REQUIRE}, P(ACERT), P(AKEY), NULL);
    ck_assert_int_eq(pair_handshake(&p, why, sizeof why), 1);
    ck_assert_str_eq(tls_peer_name(p.s), "alice");
    ck_assert_ptr_null(tls_psk_id(p.s));
    tls_describe(p.s, why, sizeof why);
    ck_assert_msg(strstr(why, "TLS1.") != NULL, "%s", why);
    /* client -> server, read into a buffer too small for the record */
    ck_assert_int_eq(gnutls_record_send(p.c, "get alice:k\r\n", 13), 13);
    char buf[64];
    ssize_t n = tls_recv(p.s, buf, 4);
    ck_assert_int_eq(n, 4);
    ck_assert_uint_eq(tls_pending(p.s), 9);
    n = tls_recv(p.s, buf + 4, sizeof buf - 4);
    ck_assert_int_eq(n, 9);
    ck_assert_int_eq(memcmp(buf, "get alice:k\r\n", 13), 0);
    ck_assert_int_eq(tls_recv(p.s, buf, sizeof buf), -EAGAIN);
    /* server -> client through a connection's output buffer */
    struct event_base *base = event_base_new();
    conns_conn_t c = {.fd = p.sv[0], .out = evbuffer_new()};
    c.wev = event_new(base, p.sv[0], EV_WRITE, NULL, NULL);
    evbuffer_add(c.out, "END\r\n", 5);
    ck_assert_int_eq(tls_write(p.s, &c), 0);
    ck_assert_uint_eq(evbuffer_get_length(c.out), 0);
    ck_assert_int_eq(c.writing, 0);
    n = gnutls_record_recv(p.c, buf, sizeof buf);
    ck_assert_int_eq(n, 5);
    ck_assert_int_eq(memcmp(buf, "END\r\n", 5), 0);
    /* the client's end */
    gnutls_bye(p.c, GNUTLS_SHUT_WR);
    ck_assert_int_eq(tls_recv(p.s, buf, sizeof buf), 0);
    event_free(c.wev);
    evbuffer_free(c.out);
    event_base_free(base);
    pair_free(&p);
}
END_TEST

/* require: a client without a certificate fails the handshake. */
START_TEST(test_tls_require_refuses_no_cert)
{
    pki();
    pair_t p;
    char why[256] = "";
    pair_new(&p, &(tls_files_t){.cert = P(CERT), .key = P(KEY), .ca = P(CA),
                                .verify = TLS_VERIFY_REQUIRE}, NULL, NULL, NULL);
    ck_assert_int_eq(pair_handshake(&p, why, sizeof why), -EPROTO);
    ck_assert_msg(why[0], "no reason given");
    ck_assert_ptr_null(tls_peer_name(p.s));
    pair_free(&p);
}
END_TEST

/* request: a client without one gets through with no certificate name;
 * with verify none a certificate is not even asked for. */
START_TEST(test_tls_request_optional)
{
    pki();
    pair_t p;
    char why[256];
    pair_new(&p, &(tls_files_t){.cert = P(CERT), .key = P(KEY), .ca = P(CA),
                                .verify = TLS_VERIFY_REQUEST}, NULL, NULL, NULL);
    ck_assert_int_eq(pair_handshake(&p, why, sizeof why), 1);
    ck_assert_ptr_null(tls_peer_name(p.s));
    pair_free(&p);
    pair_new(&p, &(tls_files_t){.cert = P(CERT), .key = P(KEY)}, P(ACERT), P(AKEY), NULL);
    ck_assert_int_eq(pair_handshake(&p, why, sizeof why), 1);
    ck_assert_ptr_null(tls_peer_name(p.s)); /* not asked for: no identity */
    pair_free(&p);
}
END_TEST

/* A certificate the CA did not sign never names the connection: under
 * require the handshake fails, under request the client goes on without
 * a certificate identity (GnuTLS clients offer only a certificate whose
 * issuer the server's CertificateRequest lists). */
START_TEST(test_tls_untrusted_cert)
{
    pki();
    pair_t p;
    char why[256] = "";
    pair_new(&p, &(tls_files_t){.cert = P(CERT), .key = P(KEY), .ca = P(CA),
                                .verify = TLS_VERIFY_REQUIRE}, P(MCERT), P(MKEY), NULL);
    ck_assert_int_eq(pair_handshake(&p, why, sizeof why), -EPROTO);
    ck_assert_ptr_null(tls_peer_name(p.s));
    pair_free(&p);
    pair_new(&p, &(tls_files_t){.cert = P(CERT), .key = P(KEY), .ca = P(CA),
                                .verify = TLS_VERIFY_REQUEST}, P(MCERT), P(MKEY), NULL);
    int rc = pair_handshake(&p, why, sizeof why);
    ck_assert_ptr_null(tls_peer_name(p.s));
    ck_assert_int_ne(rc, 0);
    pair_free(&p);
}
END_TEST

/* A plaintext memcached client on a TLS port fails the handshake at once. */
START_TEST(test_tls_plaintext_refused)
{
    pki();
    pair_t p;
    char why[256] = "";
    pair_new(&p, &(tls_files_t){.cert = P(CERT), .key = P(KEY)}, NULL, NULL, NULL);
    ck_assert_int_eq(write(p.sv[1], "version\r\n", 9), 9);
    ck_assert_int_eq(tls_handshake(p.s, why, sizeof why), -EPROTO);
    ck_assert_msg(why[0], "no reason given");
    pair_free(&p);
}
END_TEST

/* A PSK client: its identity is the one its key matched; an unknown one is
 * refused. */
START_TEST(test_tls_psk_identity)
{
    pki();
    pair_t p;
    char why[256];
    pair_new(&p, &(tls_files_t){.psk = P(PSK)}, NULL, NULL, "alice");
    ck_assert_int_eq(pair_handshake(&p, why, sizeof why), 1);
    ck_assert_str_eq(tls_psk_id(p.s), "alice");
    ck_assert_ptr_null(tls_peer_name(p.s));
    pair_free(&p);
    pair_new(&p, &(tls_files_t){.psk = P(PSK)}, NULL, NULL, "bob");
    ck_assert_int_eq(pair_handshake(&p, why, sizeof why), -EPROTO);
    ck_assert_ptr_null(tls_psk_id(p.s));
    pair_free(&p);
}
END_TEST

static void cleanup(void)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (path_buf[0][0] && system(cmd) != 0)
        fprintf(stderr, "test_tls: could not remove %s\n", dir);
}

int main(void)
{
    const TTest *const tests[] = {test_tls_files_refused, test_tls_client_cert_name,
                                  test_tls_require_refuses_no_cert, test_tls_request_optional,
                                  test_tls_untrusted_cert, test_tls_plaintext_refused,
                                  test_tls_psk_identity};
    const testlib_case_t c = {.name = "tls", .timeout = 30, .setup = pki, .teardown = cleanup,
                              .unchecked = 1};
    return testlib_run_case(&c, tests, sizeof tests / sizeof tests[0]);
}
