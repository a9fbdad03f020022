/* mcauth.h - memcached's text-protocol authentication for the memcached front (bqos-node --auth-file): the auth file (memcached's -Y format, user:password lines) and the login exchange of a connection.
 *
 * As memcached 1.5.15+ with -Y: until a connection has logged in, its
 * first line must be `set <any> <flags> <exptime> <n>` whose data block
 * (n bytes, then CRLF) is `user password`.  The replies are memcached's,
 * byte for byte: STORED (logged in; the connection's user is its
 * identity), "CLIENT_ERROR authentication failure" (no such user, or a
 * wrong password: the client cannot tell which), "CLIENT_ERROR bad
 * authentication token format", "CLIENT_ERROR bad command line
 * termination"; any other command before the login gets "CLIENT_ERROR
 * unauthenticated" and the connection stays open.  A line of more than
 * MCAUTH_LINE_MAX bytes without a newline closes the connection, as
 * memcached does.  Differences (docs/security.md): a login data block of
 * more than MCAUTH_DATA_MAX bytes is answered "CLIENT_ERROR bad data chunk"
 * and the connection closed (memcached waits for it); every pipelined
 * command before the login gets its own reply (memcached 1.6 sends only the
 * last one of a batch read at once); a file memcached truncates silently
 * (more than 8 users, lines over 255 bytes) is taken whole or refused.
 *
 * Passwords are compared in constant time (mcauth_ct_equal()), and every
 * user of the file is compared, so the time of a login does not tell
 * whether the user exists.  Threads: an mcauth_t belongs to the loop thread
 * of the front that uses it (load, reload and logins all there). */
#ifndef BQOS_MCAUTH_H
#define BQOS_MCAUTH_H

#include <stddef.h>

#include "common/jsonloc.h" /* errors: print with bucketfile_strerror() */
#include "storage-node/io/gate.h"

#define MCAUTH_FILE_MAX (1 << 20) /* bytes of an auth file */
#define MCAUTH_ENTRY_MAX 255      /* bytes of one user:password line (memcached's) */
#define MCAUTH_USERS_MAX 10000    /* lines of an auth file */
#define MCAUTH_LINE_MAX 2048      /* bytes of a command line before the login */
#define MCAUTH_DATA_MAX 2048      /* bytes of a login's data block */
#define MCAUTH_USER_MAX MCAUTH_ENTRY_MAX

typedef struct mcauth mcauth_t;

/* A connection's login state, inside the front's connection (zeroed when
 * it opens).  Loop thread. */
typedef struct {
    int ok;                            /* logged in */
    char user[MCAUTH_USER_MAX + 1];    /* its identity once ok */
} mcauth_conn_t;

/* What the front does with the bytes mcauth_step() looked at. */
typedef enum {
    MCAUTH_NEED_MORE = 0, /* nothing consumed: read more */
    MCAUTH_REPLY,         /* consumed `consumed` bytes; answer `reply` */
    MCAUTH_CLOSE          /* close the connection (after `reply` if any) */
} mcauth_status_t;

typedef struct {
    size_t consumed;   /* bytes of the buffer used */
    const char *reply; /* a static line without CRLF, or NULL */
} mcauth_result_t;

/* Reads auth file `path`: every line `user:password` (the password is
 * everything after the first ':' up to the end of the line, CR excluded),
 * no empty lines, no user or password that is empty or holds a space or a
 * control character (neither could log in), no user twice, lines of at
 * most MCAUTH_ENTRY_MAX bytes, MCAUTH_USERS_MAX lines and MCAUTH_FILE_MAX
 * bytes.  The file must give group and others nothing (the rule of every
 * file holding a secret: curvekey_check_mode()).  Returns the users (caller
 * owns them: mcauth_destroy()), or NULL with *err filled: "FILE:LINE: what"
 * for a bad line (err->line set), else the file and why; *rc (may be NULL)
 * = -EINVAL, -EACCES, -ENOMEM or -errno of open/read. */
mcauth_t *mcauth_load(const char *path, jsonloc_err_t *err, int *rc);

/* Replaces a's users by those of its file, read again (SIGHUP).  Returns 0,
 * or the error of mcauth_load() with *err filled; then a is unchanged.
 * Connections already logged in stay so. */
int mcauth_reload(mcauth_t *a, jsonloc_err_t *err);

/* The file a was loaded from (owned by a). */
const char *mcauth_path(const mcauth_t *a);

/* Number of users. */
int mcauth_users(const mcauth_t *a);

/* Frees *ap (the passwords wiped first) and sets it to NULL.  Accepts NULL. */
void mcauth_destroy(mcauth_t **ap);

/* Nonzero if `user` with `pass` is in a's file.  Every user is compared
 * (in constant time for equal lengths), whether or not one matched. */
int mcauth_check(const mcauth_t *a, const char *user, size_t ulen, const char *pass,
                 size_t plen);

/* Compares a[0..alen) and b[0..blen) in time that depends on the lengths
 * only.  Returns 1 if equal. */
int mcauth_ct_equal(const char *a, size_t alen, const char *b, size_t blen);

/* One step of connection c's login, on the `len` bytes at buf (the
 * connection's unparsed input; c not yet ok): fills *res and returns what
 * to do (see mcauth_status_t).  On success c->ok is set and c->user holds
 * the user.  Failures are counted on g (gate_auth_failed(); g may be NULL)
 * by reason, successes too. */
mcauth_status_t mcauth_step(const mcauth_t *a, gate_t *g, mcauth_conn_t *c, const char *buf,
                            size_t len, mcauth_result_t *res);

#endif
