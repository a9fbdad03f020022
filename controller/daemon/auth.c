/* auth.c - bqos-controller's ZAP handler (CURVE keys by the authorized keys file), the node and admin checks per message, and the refusal counters and rate-limited refusal log. */
#include "controller/daemon/auth.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <zmq.h>

#include "common/bucketfile.h"
#include "common/log.h"
#include "common/mono.h"

#define ZAP_ENDPOINT "inproc://zeromq.zap.01"
#define ZAP_FRAMES 8       /* RFC 27: 7 for CURVE; one more to see excess */
#define LOG_EVERY_S 10.0   /* one refusal line per reason at most this often */

static const char *const reason_names[AUTH__NREASONS] = {"unknown_key", "wrong_role",
                                                         "name_mismatch", "handshake"};

const char *auth_reason_str(auth_reason_t r)
{
    return (unsigned)r < AUTH__NREASONS ? reason_names[r] : "?";
}

/* Counts a refusal and logs it unless a line for `r` was written in the
 * last LOG_EVERY_S (then the next line says how many were not logged). */
static void refused(auth_t *au, auth_reason_t r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void refused(auth_t *au, auth_reason_t r, const char *fmt, ...)
{
    au->refused[r]++;
    double now = mono_now();
    if (now < au->log_next[r]) {
        au->unlogged[r]++;
        return;
    }
    char text[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    log_warn("refused (%s): %s (%llu more since the last such line; %llu in all)",
             reason_names[r], text, (unsigned long long)au->unlogged[r],
             (unsigned long long)au->refused[r]);
    au->unlogged[r] = 0;
    au->log_next[r] = now + LOG_EVERY_S;
}

static int load(const char *path, authkeys_t **out)
{
    jsonloc_err_t err;
    int rc = authkeys_load(path, out, &err);
    if (rc < 0) {
        char buf[700];
        log_error("--authorized-keys %s", bucketfile_strerror(&err, buf, sizeof buf));
    }
    return rc;
}

int auth_start(auth_t *au, void *zctx, const char *path)
{
    *au = (auth_t){.path = path};
    if (load(path, &au->keys) < 0)
        return -1;
    int zero = 0;
    au->zap = zmq_socket(zctx, ZMQ_REP);
    if (!au->zap || zmq_setsockopt(au->zap, ZMQ_LINGER, &zero, sizeof zero) < 0 ||
        zmq_bind(au->zap, ZAP_ENDPOINT) < 0) {
        log_error("cannot start the ZAP handler on %s: %s", ZAP_ENDPOINT,
                  zmq_strerror(zmq_errno()));
        return -1;
    }
    log_info("CURVE: %zu authorized keys from %s", authkeys_count(au->keys), path);
    return 0;
}

int auth_monitor(auth_t *au, void *zctx, void *sock, int slot, const char *domain)
{
    char ep[64];
    int zero = 0;
    snprintf(ep, sizeof ep, "inproc://bqos-auth-monitor-%d", slot);
    au->mon_domain[slot] = domain;
    if (zmq_socket_monitor(sock, ep, ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                                         ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) < 0 ||
        !(au->mon[slot] = zmq_socket(zctx, ZMQ_PAIR)) ||
        zmq_setsockopt(au->mon[slot], ZMQ_LINGER, &zero, sizeof zero) < 0 ||
        zmq_connect(au->mon[slot], ep) < 0) {
        log_error("cannot monitor the %s endpoint: %s", domain, zmq_strerror(zmq_errno()));
        return -1;
    }
    return 0;
}

void auth_drain_monitor(auth_t *au, int slot)
{
    for (;;) {
        zmq_msg_t ev;
        zmq_msg_init(&ev);
        if (zmq_msg_recv(&ev, au->mon[slot], ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&ev);
            return;
        }
        int more = zmq_msg_more(&ev);
        zmq_msg_close(&ev);
        while (more) { /* the endpoint frame */
            zmq_msg_t x;
            zmq_msg_init(&x);
            if (zmq_msg_recv(&x, au->mon[slot], 0) < 0) {
                zmq_msg_close(&x);
                break;
            }
            more = zmq_msg_more(&x);
            zmq_msg_close(&x);
        }
        refused(au, AUTH_HANDSHAKE, "%s endpoint: a connection failed its handshake (a client "
                "without --curve-key, or whose --controller-key is not this controller's)",
                au->mon_domain[slot]);
    }
}

void auth_clear(auth_t *au)
{
    for (int i = 0; i < 2; i++)
        if (au->mon[i])
            zmq_close(au->mon[i]);
    if (au->zap)
        zmq_close(au->zap);
    au->zap = au->mon[0] = au->mon[1] = NULL;
    authkeys_destroy(&au->keys);
}

int auth_reload(auth_t *au)
{
    authkeys_t *k;
    int rc = load(au->path, &k);
    if (rc < 0) {
        log_error("the authorized keys in force are kept (%zu keys)", authkeys_count(au->keys));
        return rc;
    }
    authkeys_destroy(&au->keys);
    au->keys = k;
    log_info("CURVE: %zu authorized keys re-read from %s", authkeys_count(k), au->path);
    return 0;
}

/* Appends one ZMTP property (name, 4-byte length, value) to buf at *n. */
static void put_prop(unsigned char *buf, size_t *n, const char *name, const char *value)
{
    size_t nl = strlen(name), vl = strlen(value);
    buf[(*n)++] = (unsigned char)nl;
    memcpy(buf + *n, name, nl);
    *n += nl;
    uint32_t be = htonl((uint32_t)vl);
    memcpy(buf + *n, &be, 4);
    *n += 4;
    memcpy(buf + *n, value, vl);
    *n += vl;
}

/* Decides one ZAP request (frames f[0..n)); fills the status code, text and
 * user id.  Returns the entry admitted or NULL. */
static const authkeys_entry_t *decide(auth_t *au, zmq_msg_t *f, size_t n, const char **code,
                                      const char **text)
{
    *code = "400";
    if (n != 7 || zmq_msg_size(&f[5]) != 5 || memcmp(zmq_msg_data(&f[5]), "CURVE", 5) != 0 ||
        zmq_msg_size(&f[6]) != 32) {
        *text = "CURVE only";
        return NULL;
    }
    char domain[16] = "", addr[64] = "", key[CURVEKEY_Z85_LEN + 1];
    snprintf(domain, sizeof domain, "%.*s", (int)zmq_msg_size(&f[2]), (char *)zmq_msg_data(&f[2]));
    snprintf(addr, sizeof addr, "%.*s", (int)zmq_msg_size(&f[3]), (char *)zmq_msg_data(&f[3]));
    zmq_z85_encode(key, zmq_msg_data(&f[6]), 32);
    int nodes = strcmp(domain, AUTH_DOMAIN_NODES) == 0;
    const authkeys_entry_t *e = authkeys_find_key(au->keys, key);
    if (!e) {
        *text = "unknown key";
        refused(au, AUTH_UNKNOWN_KEY, "%s endpoint: a connection from %s with key %s, which "
                "is not in %s", domain, addr, key, au->path);
        return NULL;
    }
    if (nodes != (e->role == AUTHKEYS_NODE)) {
        *text = "wrong role";
        refused(au, AUTH_WRONG_ROLE, "%s endpoint: a connection from %s with the %s key of "
                "'%s'", domain, addr, authkeys_role_str(e->role), e->name);
        return NULL;
    }
    *code = "200";
    *text = "OK";
    au->accepted++;
    log_debug("%s endpoint: %s %s connected from %s", domain, authkeys_role_str(e->role),
              e->name, addr);
    return e;
}

void auth_drain(auth_t *au)
{
    for (;;) {
        zmq_msg_t f[ZAP_FRAMES];
        size_t n = 0;
        int more = 1;
        while (more) {
            zmq_msg_t *p = &f[n < ZAP_FRAMES ? n : ZAP_FRAMES - 1];
            if (n >= ZAP_FRAMES)
                zmq_msg_close(p); /* keep the last slot for the excess */
            zmq_msg_init(p);
            if (zmq_msg_recv(p, au->zap, n == 0 ? ZMQ_DONTWAIT : 0) < 0) {
                zmq_msg_close(p);
                for (size_t i = 0; i < n && i < ZAP_FRAMES - 1; i++)
                    zmq_msg_close(&f[i]);
                return;
            }
            more = zmq_msg_more(p);
            n++;
        }
        size_t nf = n < ZAP_FRAMES ? n : ZAP_FRAMES;
        const char *code, *text;
        const authkeys_entry_t *e = decide(au, f, n, &code, &text);
        char user[300] = "";
        unsigned char meta[64];
        size_t ml = 0;
        if (e) {
            snprintf(user, sizeof user, "%s %s", authkeys_role_str(e->role), e->name);
            put_prop(meta, &ml, "X-Bqos-Key", e->key);
        }
        /* Reply: version, request id (echoed), status code and text, user
         * id, metadata. */
        int rc = zmq_send(au->zap, "1.0", 3, ZMQ_SNDMORE);
        if (rc >= 0)
            rc = zmq_send(au->zap, nf > 1 ? zmq_msg_data(&f[1]) : "", nf > 1 ? zmq_msg_size(&f[1]) : 0,
                          ZMQ_SNDMORE);
        if (rc >= 0)
            rc = zmq_send(au->zap, code, 3, ZMQ_SNDMORE);
        if (rc >= 0)
            rc = zmq_send(au->zap, text, strlen(text), ZMQ_SNDMORE);
        if (rc >= 0)
            rc = zmq_send(au->zap, user, strlen(user), ZMQ_SNDMORE);
        if (rc >= 0)
            rc = zmq_send(au->zap, meta, ml, 0);
        if (rc < 0)
            log_error("ZAP reply failed: %s", zmq_strerror(zmq_errno()));
        for (size_t i = 0; i < nf; i++)
            zmq_msg_close(&f[i]);
    }
}

/* The authorized entry of the key a message came with, or NULL (refused
 * as unknown_key: it was removed since the connection was admitted). */
static const authkeys_entry_t *current(auth_t *au, const proto_peer_t *p, const char *what)
{
    const authkeys_entry_t *e = p->key[0] ? authkeys_find_key(au->keys, p->key) : NULL;
    if (!e)
        refused(au, AUTH_UNKNOWN_KEY, "%s from '%s': its key %s is no longer authorized",
                what, p->user, p->key[0] ? p->key : "(none)");
    return e;
}

int auth_node(auth_t *au, const proto_peer_t *p, const char *node)
{
    if (!au)
        return 0;
    const authkeys_entry_t *e = current(au, p, "a node message");
    if (!e)
        return -EPERM;
    if (e->role != AUTHKEYS_NODE) {
        refused(au, AUTH_WRONG_ROLE, "a node message under the %s key of '%s'",
                authkeys_role_str(e->role), e->name);
        return -EPERM;
    }
    if (strcmp(e->name, node) != 0) {
        refused(au, AUTH_NAME_MISMATCH, "the key of node '%s' spoke for node '%s'", e->name,
                node);
        return -EPERM;
    }
    return 0;
}

int auth_admin(auth_t *au, const proto_peer_t *p, const char *cmd, int writes,
               const char **who, char *msg, size_t size)
{
    *who = "anonymous";
    if (!au)
        return 0;
    const authkeys_entry_t *e = current(au, p, "an admin request");
    if (!e) {
        snprintf(msg, size, "your key is no longer authorized");
        return -EPERM;
    }
    *who = p->user;
    if (e->role == AUTHKEYS_ADMIN || (e->role == AUTHKEYS_READER && !writes))
        return 0;
    refused(au, AUTH_WRONG_ROLE, "%s '%s' may not %s", authkeys_role_str(e->role), e->name, cmd);
    snprintf(msg, size, "the %s key '%s' may not '%s' (reader keys may only read)",
             authkeys_role_str(e->role), e->name, cmd);
    return -EPERM;
}

int auth_endpoint_local(const char *ep)
{
    if (strncmp(ep, "ipc://", 6) == 0 || strncmp(ep, "inproc://", 9) == 0)
        return 1;
    if (strncmp(ep, "tcp://", 6) != 0)
        return 0;
    const char *h = ep + 6, *semi = strchr(h, ';'); /* tcp://SOURCE;DEST: the bound side */
    if (semi)
        return 0;
    char host[256];
    const char *colon = strrchr(h, ':');
    size_t len = colon ? (size_t)(colon - h) : strlen(h);
    if (len >= sizeof host)
        return 0;
    memcpy(host, h, len);
    host[len] = '\0';
    if (host[0] == '[' && len > 2 && host[len - 1] == ']') {
        memmove(host, host + 1, len - 2);
        host[len - 2] = '\0';
    }
    struct in_addr a4;
    struct in6_addr a6;
    if (inet_pton(AF_INET, host, &a4) == 1)
        return (ntohl(a4.s_addr) >> 24) == 127;
    if (inet_pton(AF_INET6, host, &a6) == 1)
        return IN6_IS_ADDR_LOOPBACK(&a6);
    return strcmp(host, "localhost") == 0 || strcmp(host, "lo") == 0;
}
