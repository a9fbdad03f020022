/* auth.h - bqos-controller's authentication: the ZAP handler (RFC 27) that admits CURVE connections on the node and admin endpoints by the authorized keys, the per-message checks (a node speaks for its key's name, a reader only reads), and the refusal counters.
 *
 * Thread: an auth_t and its ZAP socket (a REP bound at
 * inproc://zeromq.zap.01 in the controller's ZeroMQ context) belong to the
 * controller's loop thread, which polls the socket beside the node and admin
 * sockets; libzmq's I/O thread holds a new connection's handshake until the
 * loop answers (no extra thread; a handshake waits at most one round's
 * computation).  Nothing locks.  docs/security.md. */
#ifndef BQOS_AUTH_H
#define BQOS_AUTH_H

#include <stdint.h>

#include "common/proto.h"
#include "controller/daemon/authkeys.h"

/* Why a connection or a request was refused (counted in status "auth" and
 * bqos_controller_auth_refusals_total). */
typedef enum {
    AUTH_UNKNOWN_KEY = 0, /* key not (or no longer) in the authorized keys */
    AUTH_WRONG_ROLE,      /* a node key on the admin endpoint, an admin or
                             reader key on the node endpoint, a reader's
                             change */
    AUTH_NAME_MISMATCH,   /* a node key speaking for another node's name */
    AUTH_HANDSHAKE,       /* a connection whose handshake failed before ZAP:
                             a client without CURVE, or one that expects
                             another controller key (seen by a monitor) */
    AUTH__NREASONS
} auth_reason_t;

/* ZAP domains set on the two endpoints' sockets (curvekey_set_server()). */
#define AUTH_DOMAIN_NODES "nodes"
#define AUTH_DOMAIN_ADMIN "admin"

typedef struct {
    const char *path;          /* --authorized-keys (borrowed) */
    authkeys_t *keys;          /* owned; replaced whole by auth_reload() */
    void *zap;                 /* owned REP socket, bound */
    void *mon[2];              /* owned PAIR sockets: handshake failures of
                                  the node and admin endpoints */
    const char *mon_domain[2];
    uint64_t accepted;         /* connections admitted */
    uint64_t refused[AUTH__NREASONS];
    double log_next[AUTH__NREASONS];   /* refusal lines: next one not before */
    uint64_t unlogged[AUTH__NREASONS]; /* refusals since the last line */
} auth_t;

/* Loads `path` and binds the ZAP handler in `zctx`; must run before the
 * CURVE sockets are bound.  Returns 0, or -1 (logged; *au then holds
 * nothing to free but auth_clear() is safe). */
int auth_start(auth_t *au, void *zctx, const char *path);

/* Closes the socket and frees the keys.  Accepts a zeroed au. */
void auth_clear(auth_t *au);

/* Answers every ZAP request waiting, without blocking: 200 with User-Id
 * "ROLE NAME" and the key as property X-Bqos-Key for an authorized key of
 * a role the endpoint (domain) takes, else 400 (counted, logged at most
 * once per 10 s per reason). */
void auth_drain(auth_t *au);

/* Watches bound socket `sock` (endpoint `domain`, slot 0 or 1) for
 * handshakes that fail before ZAP; returns 0 or -1 (logged). */
int auth_monitor(auth_t *au, void *zctx, void *sock, int slot, const char *domain);

/* Counts and logs the handshake failures waiting on monitor `slot`,
 * without blocking. */
void auth_drain_monitor(auth_t *au, int slot);

/* Re-reads the authorized keys (SIGHUP).  On error the old ones stay in
 * force (logged); a key removed is refused on its next connection and on
 * its next message.  Returns 0 or -errno. */
int auth_reload(auth_t *au);

/* May the sender `p` of a node message speak for node `node`?  Yes (0)
 * when its key is still authorized as a node key bound to `node`.  Else
 * counts and logs (rate-limited) the refusal and returns -EPERM.  au NULL
 * (no CURVE): always 0. */
int auth_node(auth_t *au, const proto_peer_t *p, const char *node);

/* May the sender `p` of an admin request run command `cmd` (`writes`:
 * whether it changes the configuration)?  0, with *who pointing at its
 * "ROLE NAME" (or "anonymous" without CURVE); else counts and logs the
 * refusal, fills `msg` (`size` bytes) and returns -EPERM. */
int auth_admin(auth_t *au, const proto_peer_t *p, const char *cmd, int writes,
               const char **who, char *msg, size_t size);

/* "unknown_key", "wrong_role", "name_mismatch", "handshake" (status JSON
 * keys). */
const char *auth_reason_str(auth_reason_t r);

/* Nonzero if ZeroMQ endpoint `ep` can only be reached from this host:
 * ipc://, inproc://, or tcp:// on 127.0.0.0/8, ::1, localhost or lo. */
int auth_endpoint_local(const char *ep);

#endif
