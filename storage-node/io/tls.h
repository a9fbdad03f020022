/* tls.h - TLS for both fronts of the node: GnuTLS server credentials (X.509 certificate, PSK keys, a CA for client certificates) loaded from files, one session per connection on its non-blocking socket, the handshake in steps, the peer's identity (certificate name, PSK identity) and record reads and writes.
 *
 * The front decides when a session starts (the memcached front: on accept,
 * its port being a TLS port; the NBD front: after NBD_OPT_STARTTLS) and
 * drives the handshake from the connection's read and write events
 * (tls_handshake(), tls_wants_write()); from then on every byte in and out
 * goes through tls_recv() / tls_read() and tls_write().  Nothing blocks:
 * every call returns what the socket allows now.  docs/security.md ("TLS"),
 * docs/nbd.md ("TLS").
 *
 * Client certificates (tls_files_t.ca, .verify): TLS_VERIFY_REQUEST asks
 * for one and checks it against the CA if sent; TLS_VERIFY_REQUIRE fails
 * the handshake of a client without one.  A certificate that does not
 * verify fails the session (tls_handshake() returns -EPROTO).  The name of
 * a verified certificate (tls_peer_name()) is the connection's certificate
 * identity: its subject's CN, or, with no CN, its first subjectAltName
 * (DNS name, e-mail or URI).
 *
 * Reload (SIGHUP): tls_reload() reads the files again; new sessions use
 * what it read, sessions already made keep the credentials they were made
 * from (counted references) until they end.
 *
 * Threads: a tls_t and its sessions belong to the node's loop thread (the
 * references are counted without locks). */
#ifndef BQOS_TLS_H
#define BQOS_TLS_H

#include <stddef.h>
#include <sys/types.h>

#include "common/jsonloc.h" /* errors: print with bucketfile_strerror() */
#include "storage-node/io/conns.h"

struct evbuffer;

/* Client certificates (memcached's ssl_verify_mode 0, 1, 2). */
typedef enum {
    TLS_VERIFY_NONE = 0,  /* none asked for */
    TLS_VERIFY_REQUEST,   /* asked for; checked if sent */
    TLS_VERIFY_REQUIRE    /* a client without a valid one is refused */
} tls_verify_t;

/* Longest certificate name or PSK identity kept (longer: the handshake
 * fails, as a name we could not match in full). */
#define TLS_NAME_MAX 255

/* The credential files (borrowed): cert and key together (PEM X.509 chain
 * and its private key) and/or psk (psktool's "USERNAME:HEXKEY" lines); ca
 * (PEM, one or more CA certificates) to check client certificates, needed
 * by verify REQUEST and REQUIRE (which need cert and key too). */
typedef struct {
    const char *cert, *key, *psk, *ca;
    tls_verify_t verify;
} tls_files_t;

typedef struct tls tls_t;

/* Loads the credentials.  The key and the PSK file must not be readable or
 * writable by group or others (curvekey_check_mode()).  Returns the
 * credentials (caller owns them), or NULL with *rc = -EINVAL (a bad file,
 * cert without key, verify without ca or ca without verify), -EACCES
 * (mode), -ENOMEM or -errno of open/read and *err naming the file and what
 * is wrong. */
tls_t *tls_new(const tls_files_t *files, int *rc, jsonloc_err_t *err);

/* Reads the files tls_new() was given again: on success new sessions use
 * them (open ones keep theirs).  Returns 0, or what tls_new() returns with
 * *err filled, the credentials in force unchanged. */
int tls_reload(tls_t *t, jsonloc_err_t *err);

/* Frees the credentials (sessions made from them keep theirs until
 * tls_sess_free()); sets *tp to NULL.  Accepts NULL. */
void tls_destroy(tls_t **tp);

/* Client certificates asked for (tls_files_t.verify). */
tls_verify_t tls_verify_mode(const tls_t *t);

typedef struct tls_sess tls_sess_t;

/* A server session on non-blocking socket fd (not owned).  Returns it or
 * NULL (out of memory). */
tls_sess_t *tls_sess_new(const tls_t *t, int fd);

/* Sends close_notify if the handshake was done (without waiting) and frees
 * the session; sets *sp to NULL.  Accepts NULL.  The socket is left open. */
void tls_sess_free(tls_sess_t **sp);

/* One step of the handshake.  Returns 1 once done (and the client's
 * certificate, if any, verified), 0 while the socket must become readable
 * (or writable: tls_wants_write()), -EPROTO on failure (a plaintext
 * client, a bad or missing certificate, an unknown PSK identity) with
 * why[0..n) saying what failed. */
int tls_handshake(tls_sess_t *s, char *why, size_t n);
int tls_wants_write(const tls_sess_t *s);

/* The verified client certificate's name (owned by s, NUL-terminated, no
 * control characters), or NULL: none sent, or before the handshake. */
const char *tls_peer_name(const tls_sess_t *s);

/* The PSK identity the client logged in with (owned by s), or NULL: an
 * X.509 session, or before the handshake. */
const char *tls_psk_id(const tls_sess_t *s);

/* What the handshake chose, "(TLS1.3)-(ECDHE-SECP256R1)-...", with ", key
 * exchange ECDHE-PSK" for a PSK, into buf[0..n) (for the log). */
void tls_describe(tls_sess_t *s, char *buf, size_t n);

/* Reads and decrypts at least `ask` bytes or what the socket has, into
 * `in`; leaves nothing decrypted in the session (a record read in part is
 * read to its end), so the socket's read event alone says when more is
 * there; bytes read before the peer's end or an error are returned first
 * (the end comes again with the next read event).  Returns the bytes
 * added (> 0), -EAGAIN for none, 0 once the peer closed, or -ECONNRESET /
 * -ENOMEM. */
ssize_t tls_read(tls_sess_t *s, struct evbuffer *in, size_t ask);

/* Reads and decrypts up to len bytes into buf (a front with its own read
 * buffer).  Decrypted bytes that did not fit stay in the session:
 * tls_pending() says so, and the front must read again without waiting
 * for the socket.  Returns the bytes read (> 0), -EAGAIN for none, 0 once
 * the peer closed, or -ECONNRESET. */
ssize_t tls_recv(tls_sess_t *s, void *buf, size_t len);

/* Decrypted bytes held in the session (nonzero: tls_recv() again). */
size_t tls_pending(tls_sess_t *s);

/* conns_write() through the session: encrypts and writes what the
 * socket takes of c->out (records of up to 16 KiB), arming c->wev while
 * bytes are left.  Returns 0, or -errno for a broken socket or session. */
int tls_write(tls_sess_t *s, conns_conn_t *c);

#endif
