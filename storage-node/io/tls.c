/* tls.c - TLS for both fronts: GnuTLS credentials from files, server sessions, non-blocking handshake, the peer's identity and record I/O (see tls.h). */
#include "storage-node/io/tls.h"

#include <errno.h>
#include <event2/buffer.h>
#include <fcntl.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/curvekey.h"

#define PSK_FILE_MAX (64 * 1024)   /* a PSK file larger than this is refused */
#define PSK_MAX_KEYS 1024
#define RECORD_MAX 16384           /* TLS plaintext per record */
/* Our cipher order (AES-GCM first where the CPU has AES instructions).  PSK
 * is off in NORMAL: with (EC)DHE only, for forward secrecy.  A TLS 1.3 PSK
 * is bound to SHA-256, which rules AES-256-GCM out: AES-128-GCM before
 * ChaCha20 (half the CPU per 4 KiB read here, docs/performance.md). */
#define PRIO "NORMAL:%SERVER_PRECEDENCE"
#define PRIO_PSK PRIO ":+ECDHE-PSK:+DHE-PSK:-CHACHA20-POLY1305:+CHACHA20-POLY1305"

typedef struct {
    char *name;
    gnutls_datum_t key;
} psk_entry_t;

/* One reading of the files.  Sessions keep the one they were made from
 * until they end, whatever a reload does meanwhile. */
typedef struct {
    gnutls_certificate_credentials_t x509;  /* NULL: no certificate */
    gnutls_psk_server_credentials_t psk;    /* NULL: no PSK */
    gnutls_priority_t prio;
    psk_entry_t *keys;
    int nkeys;
    tls_verify_t verify;   /* client certificates asked for */
    int refs;              /* the tls_t while current, and each session */
} creds_t;

struct tls {
    creds_t *cur;          /* what new sessions use */
    tls_files_t files;  /* copies, for tls_reload() */
};

struct tls_sess {
    gnutls_session_t s;
    creds_t *c;            /* a reference */
    int up;                /* handshake done */
    int wpending;          /* a record send returned AGAIN: repeat it */
    char *peer_name;       /* the verified client certificate's name, or NULL */
    char *psk_id;          /* the PSK identity, or NULL */
};

/* An error about line `line` of source (0: about the whole file), pointing
 * at the line's start: printed FILE:LINE:1. */
#define fail(err, rc, source, line, ...) \
    jsonloc_fail(err, rc, source, line, (line) > 0, __VA_ARGS__)

/* Refuses a secret file others may read (or one that cannot be stat'ed). */
static int check_secret(const char *path, jsonloc_err_t *err)
{
    struct stat st;
    if (stat(path, &st) < 0)
        return fail(err, -errno, path, 0, "cannot open: %s", strerror(errno));
    return curvekey_check_mode(path, st.st_mode, err);
}

static int hexval(int ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    ch |= 0x20;
    return ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
}

/* Parses psktool's format: "USERNAME:HEXKEY" per line; blank lines and
 * '#' comments allowed. */
static int psk_parse(creds_t *t, const char *path, char *text, size_t len, jsonloc_err_t *err)
{
    int line = 0;
    char *p = text, *end = text + len;
    while (p < end) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        char *le = nl ? nl : end;
        line++;
        if (le > p && le[-1] == '\r')
            le--;
        if (le == p || *p == '#') {
            p = nl ? nl + 1 : end;
            continue;
        }
        char *colon = memchr(p, ':', (size_t)(le - p));
        if (!colon || colon == p)
            return fail(err, -EINVAL, path, line, "expected USERNAME:HEXKEY (psktool's format)");
        size_t hl = (size_t)(le - colon - 1);
        if (hl == 0 || hl % 2)
            return fail(err, -EINVAL, path, line, "the key is not an even number of hex digits");
        if (t->nkeys >= PSK_MAX_KEYS)
            return fail(err, -EINVAL, path, line, "more than %d keys", PSK_MAX_KEYS);
        psk_entry_t *e = &t->keys[t->nkeys];
        e->name = strndup(p, (size_t)(colon - p));
        e->key.data = malloc(hl / 2);
        if (!e->name || !e->key.data) {
            free(e->name);
            free(e->key.data);
            return fail(err, -ENOMEM, path, line, "out of memory");
        }
        t->nkeys++;
        e->key.size = (unsigned)(hl / 2);
        for (size_t i = 0; i < hl / 2; i++) {
            int hi = hexval(colon[1 + 2 * i]), lo = hexval(colon[2 + 2 * i]);
            if (hi < 0 || lo < 0)
                return fail(err, -EINVAL, path, line, "the key is not hex");
            e->key.data[i] = (unsigned char)(hi << 4 | lo);
        }
        p = nl ? nl + 1 : end;
    }
    if (t->nkeys == 0)
        return fail(err, -EINVAL, path, 0, "no USERNAME:HEXKEY line");
    return 0;
}

static int psk_load(creds_t *t, const char *path, jsonloc_err_t *err)
{
    int rc = check_secret(path, err);
    if (rc < 0)
        return rc;
    char *buf = malloc(PSK_FILE_MAX + 1);
    t->keys = calloc(PSK_MAX_KEYS, sizeof *t->keys);
    if (!buf || !t->keys) {
        free(buf);
        return fail(err, -ENOMEM, path, 0, "out of memory");
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd < 0 ? -1 : read(fd, buf, PSK_FILE_MAX + 1);
    rc = n < 0 ? -errno : 0;
    if (fd >= 0)
        close(fd);
    if (rc < 0)
        rc = fail(err, rc, path, 0, "cannot read: %s", strerror(-rc));
    else if (n > PSK_FILE_MAX)
        rc = fail(err, -EINVAL, path, 0, "larger than %d bytes", PSK_FILE_MAX);
    else
        rc = psk_parse(t, path, buf, (size_t)n, err);
    explicit_bzero(buf, PSK_FILE_MAX + 1);
    free(buf);
    return rc;
}

/* GnuTLS asks for the key of the PSK identity a client names. */
static int psk_lookup(gnutls_session_t s, const char *name, gnutls_datum_t *key)
{
    const creds_t *t = gnutls_session_get_ptr(s);
    for (int i = 0; i < t->nkeys; i++) {
        if (strcmp(t->keys[i].name, name) != 0)
            continue;
        key->data = gnutls_malloc(t->keys[i].key.size);
        if (!key->data)
            return -1;
        memcpy(key->data, t->keys[i].key.data, t->keys[i].key.size);
        key->size = t->keys[i].key.size;
        return 0;
    }
    return -1; /* unknown identity: the handshake fails */
}

static void creds_unref(creds_t *t)
{
    if (!t || --t->refs > 0)
        return;
    if (t->x509)
        gnutls_certificate_free_credentials(t->x509);
    if (t->psk)
        gnutls_psk_free_server_credentials(t->psk);
    if (t->prio)
        gnutls_priority_deinit(t->prio);
    for (int i = 0; i < t->nkeys; i++) {
        free(t->keys[i].name);
        explicit_bzero(t->keys[i].key.data, t->keys[i].key.size);
        free(t->keys[i].key.data);
    }
    free(t->keys);
    free(t);
}

/* Reads the files into new credentials (one reference, the caller's), or
 * returns NULL with *rcp and err set. */
static creds_t *creds_load(const tls_files_t *files, int *rcp, jsonloc_err_t *err)
{
    int rc = 0, g;
    creds_t *t = calloc(1, sizeof *t);
    if (!t) {
        rc = fail(err, -ENOMEM, "", 0, "out of memory");
        goto out;
    }
    t->refs = 1;
    if (!files->cert != !files->key || (!files->cert && !files->psk)) {
        rc = fail(err, -EINVAL, files->cert ? files->cert : files->key ? files->key : "", 0,
                  "--tls-cert and --tls-key go together (or --tls-psk alone)");
        goto out;
    }
    if ((files->ca != NULL) != (files->verify != TLS_VERIFY_NONE) || (files->ca && !files->cert)) {
        rc = fail(err, -EINVAL, files->ca ? files->ca : "", 0,
                  "--tls-ca goes with --tls-verify request or require, and with --tls-cert");
        goto out;
    }
    t->verify = files->verify;
    if (files->cert) {
        if ((rc = check_secret(files->key, err)) < 0)
            goto out;
        if (gnutls_certificate_allocate_credentials(&t->x509) < 0) {
            rc = fail(err, -ENOMEM, files->cert, 0, "out of memory");
            goto out;
        }
        g = gnutls_certificate_set_x509_key_file(t->x509, files->cert, files->key,
                                                 GNUTLS_X509_FMT_PEM);
        if (g < 0) {
            rc = fail(err, -EINVAL, files->cert, 0, "with key %.100s: %s", files->key,
                      gnutls_strerror(g));
            goto out;
        }
        if (files->ca) {
            struct stat st;
            if (stat(files->ca, &st) < 0) {
                rc = fail(err, -errno, files->ca, 0, "cannot open: %s", strerror(errno));
                goto out;
            }
            g = gnutls_certificate_set_x509_trust_file(t->x509, files->ca, GNUTLS_X509_FMT_PEM);
            if (g <= 0) {
                rc = fail(err, -EINVAL, files->ca, 0, "%s",
                          g < 0 ? gnutls_strerror(g) : "no PEM certificate in it");
                goto out;
            }
        }
    }
    if (files->psk) {
        if ((rc = psk_load(t, files->psk, err)) < 0)
            goto out;
        if (gnutls_psk_allocate_server_credentials(&t->psk) < 0) {
            rc = fail(err, -ENOMEM, files->psk, 0, "out of memory");
            goto out;
        }
        gnutls_psk_set_server_credentials_function(t->psk, psk_lookup);
    }
    g = gnutls_priority_init(&t->prio, t->psk ? PRIO_PSK : PRIO, NULL);
    if (g < 0)
        rc = fail(err, -EINVAL, "", 0, "GnuTLS priority: %s", gnutls_strerror(g));
out:
    if (rc < 0) {
        creds_unref(t);
        t = NULL;
        if (rcp)
            *rcp = rc;
    }
    return t;
}

/* A copy of `s` into *d (NULL stays NULL).  Returns 0 or -ENOMEM. */
static int dup_path(const char **d, const char *s)
{
    return s && !(*d = strdup(s)) ? -ENOMEM : 0;
}

static void free_paths(tls_files_t *f)
{
    free((char *)f->cert);
    free((char *)f->key);
    free((char *)f->psk);
    free((char *)f->ca);
}

tls_t *tls_new(const tls_files_t *files, int *rcp, jsonloc_err_t *err)
{
    tls_t *t = calloc(1, sizeof *t);
    if (t)
        t->files.verify = files->verify;
    if (!t || dup_path(&t->files.cert, files->cert) < 0 ||
        dup_path(&t->files.key, files->key) < 0 || dup_path(&t->files.psk, files->psk) < 0 ||
        dup_path(&t->files.ca, files->ca) < 0) {
        tls_destroy(&t);
        if (rcp)
            *rcp = fail(err, -ENOMEM, "", 0, "out of memory");
        return NULL;
    }
    if (!(t->cur = creds_load(files, rcp, err)))
        tls_destroy(&t);
    return t;
}

int tls_reload(tls_t *t, jsonloc_err_t *err)
{
    int rc = 0;
    creds_t *c = creds_load(&t->files, &rc, err);
    if (!c)
        return rc;
    creds_unref(t->cur);
    t->cur = c;
    return 0;
}

void tls_destroy(tls_t **tp)
{
    if (!tp || !*tp)
        return;
    tls_t *t = *tp;
    creds_unref(t->cur);
    free_paths(&t->files);
    free(t);
    *tp = NULL;
}

tls_sess_t *tls_sess_new(const tls_t *t, int fd)
{
    tls_sess_t *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    if (gnutls_init(&s->s, GNUTLS_SERVER | GNUTLS_NONBLOCK) < 0) {
        free(s);
        return NULL;
    }
    creds_t *c = s->c = t->cur;
    c->refs++;
    gnutls_session_set_ptr(s->s, c);
    if (gnutls_priority_set(s->s, c->prio) < 0 ||
        (c->x509 && gnutls_credentials_set(s->s, GNUTLS_CRD_CERTIFICATE, c->x509) < 0) ||
        (c->psk && gnutls_credentials_set(s->s, GNUTLS_CRD_PSK, c->psk) < 0)) {
        tls_sess_free(&s);
        return NULL;
    }
    gnutls_certificate_server_set_request(s->s, c->verify == TLS_VERIFY_REQUIRE ? GNUTLS_CERT_REQUIRE
                                                : c->verify == TLS_VERIFY_REQUEST ? GNUTLS_CERT_REQUEST
                                                                                  : GNUTLS_CERT_IGNORE);
    gnutls_transport_set_int(s->s, fd);
    return s;
}

void tls_sess_free(tls_sess_t **sp)
{
    if (!sp || !*sp)
        return;
    tls_sess_t *s = *sp;
    if (s->up && !s->wpending)
        gnutls_bye(s->s, GNUTLS_SHUT_WR); /* non-blocking: best effort */
    gnutls_deinit(s->s);
    creds_unref(s->c);
    free(s->peer_name);
    free(s->psk_id);
    free(s);
    *sp = NULL;
}

static int again(ssize_t r)
{
    return r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED;
}

/* A name fit to be an identity: 1..TLS_NAME_MAX bytes, no control
 * character, no NUL inside (a DER string may hold one).  Returns a copy
 * or NULL. */
static char *name_copy(const char *p, size_t len)
{
    if (len == 0 || len > TLS_NAME_MAX)
        return NULL;
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)p[i] < 0x20 || p[i] == 0x7f)
            return NULL;
    return strndup(p, len);
}

/* The name of the client's certificate: its subject's CN, or its first
 * DNS, e-mail or URI subjectAltName.  Returns 0 (s->peer_name set), or
 * -EPROTO with why filled. */
static int cert_name(tls_sess_t *s, const gnutls_datum_t *der, char *why, size_t n)
{
    gnutls_x509_crt_t crt;
    char buf[TLS_NAME_MAX + 2];
    size_t len = sizeof buf;
    if (gnutls_x509_crt_init(&crt) < 0) {
        snprintf(why, n, "out of memory");
        return -EPROTO;
    }
    int g = gnutls_x509_crt_import(crt, der, GNUTLS_X509_FMT_DER);
    if (g >= 0)
        g = gnutls_x509_crt_get_dn_by_oid(crt, GNUTLS_OID_X520_COMMON_NAME, 0, 0, buf, &len);
    if (g == GNUTLS_E_REQUESTED_DATA_NOT_AVAILABLE) { /* no CN: the first usable SAN */
        for (unsigned i = 0;; i++) {
            len = sizeof buf;
            g = gnutls_x509_crt_get_subject_alt_name(crt, i, buf, &len, NULL);
            if (g < 0 || g == GNUTLS_SAN_DNSNAME || g == GNUTLS_SAN_RFC822NAME ||
                g == GNUTLS_SAN_URI)
                break; /* else an IP address, ...: the next one */
        }
    }
    gnutls_x509_crt_deinit(crt);
    if (g < 0 || !(s->peer_name = name_copy(buf, len))) {
        snprintf(why, n, "the client certificate has no usable name (a CN or subjectAltName of "
                 "1..%d printable bytes)%s%s", TLS_NAME_MAX, g < 0 ? ": " : "",
                 g < 0 ? gnutls_strerror(g) : "");
        return -EPROTO;
    }
    return 0;
}

/* After the handshake: checks the client's certificate against the CA (if
 * it sent one) and takes the identities.  Returns 0 or -EPROTO with why. */
static int peer_check(tls_sess_t *s, char *why, size_t n)
{
    if (gnutls_auth_get_type(s->s) == GNUTLS_CRD_PSK) {
        const char *id = gnutls_psk_server_get_username(s->s);
        if (!id || !(s->psk_id = name_copy(id, strlen(id)))) {
            snprintf(why, n, "unusable PSK identity");
            return -EPROTO;
        }
        return 0;
    }
    unsigned ncerts = 0;
    const gnutls_datum_t *certs = gnutls_certificate_get_peers(s->s, &ncerts);
    if (!certs || ncerts == 0) {
        if (s->c->verify == TLS_VERIFY_REQUIRE) { /* GnuTLS refuses it first; to be sure */
            snprintf(why, n, "no client certificate (--tls-verify require)");
            return -EPROTO;
        }
        return 0;
    }
    if (s->c->verify == TLS_VERIFY_NONE)
        return 0; /* not asked for: no identity from it */
    unsigned status = 0;
    int g = gnutls_certificate_verify_peers2(s->s, &status);
    if (g < 0 || status != 0) {
        gnutls_datum_t txt = {NULL, 0};
        if (g >= 0 && gnutls_certificate_verification_status_print(
                          status, GNUTLS_CRT_X509, &txt, 0) >= 0)
            snprintf(why, n, "client certificate: %s", (const char *)txt.data);
        else
            snprintf(why, n, "client certificate: %s", gnutls_strerror(g < 0 ? g : 0));
        gnutls_free(txt.data);
        return -EPROTO;
    }
    return cert_name(s, &certs[0], why, n);
}

int tls_handshake(tls_sess_t *s, char *why, size_t n)
{
    int r;
    do {
        r = gnutls_handshake(s->s);
    } while (r < 0 && !again(r) && !gnutls_error_is_fatal(r)); /* warning alerts */
    if (r == 0) {
        if (peer_check(s, why, n) < 0)
            return -EPROTO;
        s->up = 1;
        return 1;
    }
    if (again(r))
        return 0;
    snprintf(why, n, "%s", gnutls_strerror(r));
    return -EPROTO;
}

int tls_wants_write(const tls_sess_t *s)
{
    return gnutls_record_get_direction(s->s) == 1;
}

const char *tls_peer_name(const tls_sess_t *s)
{
    return s->peer_name;
}

const char *tls_psk_id(const tls_sess_t *s)
{
    return s->psk_id;
}

tls_verify_t tls_verify_mode(const tls_t *t)
{
    return t->cur->verify;
}

void tls_describe(tls_sess_t *s, char *buf, size_t n)
{
    char *d = gnutls_session_get_desc(s->s);
    const char *kx = gnutls_auth_get_type(s->s) == GNUTLS_CRD_PSK
                         ? gnutls_kx_get_name(gnutls_kx_get(s->s)) : NULL;
    snprintf(buf, n, "%s%s%s", d ? d : "?", kx ? ", key exchange " : "", kx ? kx : "");
    gnutls_free(d);
}

ssize_t tls_read(tls_sess_t *s, struct evbuffer *in, size_t ask)
{
    size_t total = 0;
    while (total < ask || gnutls_record_check_pending(s->s) > 0) {
        struct evbuffer_iovec v;
        if (evbuffer_reserve_space(in, RECORD_MAX, &v, 1) != 1)
            return -ENOMEM;
        ssize_t r = gnutls_record_recv(s->s, v.iov_base, v.iov_len);
        if (r > 0) {
            v.iov_len = (size_t)r;
            evbuffer_commit_space(in, &v, 1);
            total += (size_t)r;
            continue;
        }
        evbuffer_commit_space(in, &v, 0);
        if (r < 0 && !again(r) && !gnutls_error_is_fatal((int)r))
            continue; /* a warning alert */
        if (again(r) || total > 0)
            break; /* an end or error comes again with the next read event */
        return r == 0 || r == GNUTLS_E_PREMATURE_TERMINATION ? 0 : -ECONNRESET;
    }
    return total ? (ssize_t)total : -EAGAIN;
}

ssize_t tls_recv(tls_sess_t *s, void *buf, size_t len)
{
    for (;;) {
        ssize_t r = gnutls_record_recv(s->s, buf, len);
        if (r > 0)
            return r;
        if (r < 0 && !again(r) && !gnutls_error_is_fatal((int)r))
            continue; /* a warning alert */
        if (again(r))
            return -EAGAIN;
        return r == 0 || r == GNUTLS_E_PREMATURE_TERMINATION ? 0 : -ECONNRESET;
    }
}

size_t tls_pending(tls_sess_t *s)
{
    return gnutls_record_check_pending(s->s);
}

int tls_write(tls_sess_t *s, conns_conn_t *c)
{
    for (;;) {
        ssize_t r;
        if (s->wpending) {
            r = gnutls_record_send(s->s, NULL, 0); /* the record already encrypted */
        } else {
            size_t len = evbuffer_get_length(c->out);
            if (len == 0)
                break;
            if (len > RECORD_MAX)
                len = RECORD_MAX;
            unsigned char *p = evbuffer_pullup(c->out, (ev_ssize_t)len);
            if (!p)
                return -ENOMEM;
            r = gnutls_record_send(s->s, p, len);
        }
        if (again(r)) {
            s->wpending = 1;
            break;
        }
        if (r < 0)
            return -EPIPE;
        s->wpending = 0;
        evbuffer_drain(c->out, (size_t)r);
    }
    conns_want_write(c, s->wpending || evbuffer_get_length(c->out) > 0);
    return 0;
}
