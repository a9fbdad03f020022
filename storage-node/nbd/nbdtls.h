/* nbdtls.h - TLS for the NBD front (NBD_OPT_STARTTLS): GnuTLS server credentials from X.509 or PSK files, one session per connection on its non-blocking socket, handshake steps and record reads/writes.
 *
 * The front owns when TLS starts (after the STARTTLS ACK left in clear) and
 * drives the handshake from the connection's read and write events
 * (nbdtls_handshake(), nbdtls_wants_write()); from then on every byte in and
 * out goes through nbdtls_read() and nbdtls_write().  docs/nbd.md ("TLS"),
 * docs/security.md.
 *
 * Reload (SIGHUP): nbdtls_reload() reads the files again; new sessions
 * use what it read, sessions already made keep the credentials they were
 * made from (counted references) until they end.
 *
 * Threads: an nbdtls_t and its sessions belong to the node's loop thread
 * (the references are counted without locks). */
#ifndef BQOS_NBDTLS_H
#define BQOS_NBDTLS_H

#include <stddef.h>
#include <sys/types.h>

#include "common/jsonloc.h" /* errors: print with bucketfile_strerror() */
#include "storage-node/io/conns.h"

struct evbuffer;

/* --tls: what a plain client may do. */
typedef enum {
    NBDTLS_OFF = 0,  /* STARTTLS answered NBD_REP_ERR_UNSUP */
    NBDTLS_ALLOW,    /* plain and TLS clients */
    NBDTLS_REQUIRE   /* every option but STARTTLS and ABORT refused before TLS */
} nbdtls_mode_t;

/* The credential files (borrowed): cert and key together (PEM X.509 chain
 * and its private key) and/or psk (psktool's "USERNAME:HEXKEY" lines). */
typedef struct {
    const char *cert, *key, *psk;
} nbdtls_files_t;

typedef struct nbdtls nbdtls_t;

/* Loads the credentials.  The key and the PSK file must not be readable or
 * writable by group or others (curvekey_check_mode()).  Returns the
 * credentials (caller owns them), or NULL with *rc = -EINVAL (a bad file,
 * or cert without key), -EACCES (mode), -ENOMEM or -errno of open/read and
 * *err naming the file and what is wrong. */
nbdtls_t *nbdtls_new(const nbdtls_files_t *files, int *rc, jsonloc_err_t *err);

/* Reads the files nbdtls_new() was given again: on success new sessions
 * use them (open ones keep theirs).  Returns 0, or what nbdtls_new()
 * returns with *err filled, the credentials in force unchanged. */
int nbdtls_reload(nbdtls_t *t, jsonloc_err_t *err);

/* Frees the credentials (sessions made from them keep theirs until
 * nbdtls_sess_free()); sets *tp to NULL.  Accepts NULL. */
void nbdtls_destroy(nbdtls_t **tp);

typedef struct nbdtls_sess nbdtls_sess_t;

/* A server session on non-blocking socket fd (not owned).  Returns it or
 * NULL (out of memory). */
nbdtls_sess_t *nbdtls_sess_new(const nbdtls_t *t, int fd);

/* Sends close_notify if the handshake was done (without waiting) and frees
 * the session; sets *sp to NULL.  Accepts NULL.  The socket is left open. */
void nbdtls_sess_free(nbdtls_sess_t **sp);

/* One step of the handshake.  Returns 1 once done, 0 while the socket must
 * become readable (or writable: nbdtls_wants_write()), -EPROTO on failure
 * with why[0..n) saying what failed. */
int nbdtls_handshake(nbdtls_sess_t *s, char *why, size_t n);
int nbdtls_wants_write(const nbdtls_sess_t *s);

/* What the handshake chose, "(TLS1.3)-(ECDHE-SECP256R1)-...", with ", key
 * exchange ECDHE-PSK" for a PSK, into buf[0..n) (for the log). */
void nbdtls_describe(nbdtls_sess_t *s, char *buf, size_t n);

/* Reads and decrypts at least `ask` bytes or what the socket has, into
 * `in`; leaves nothing decrypted in the session (a record read in part is
 * read to its end), so the socket's read event alone says when more is
 * there; bytes read before the peer's end or an error are returned first
 * (the end comes again with the next read event).  Returns the bytes added (> 0), -EAGAIN for none, 0 once the peer
 * closed, or -ECONNRESET / -ENOMEM. */
ssize_t nbdtls_read(nbdtls_sess_t *s, struct evbuffer *in, size_t ask);

/* conns_write() through the session: encrypts and writes what the
 * socket takes of c->out (records of up to 16 KiB), arming c->wev while
 * bytes are left.  Returns 0, or -errno for a broken socket or session. */
int nbdtls_write(nbdtls_sess_t *s, conns_conn_t *c);

#endif
