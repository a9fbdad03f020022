/* admin.h - bqos-controller's admin endpoint: the ROUTER socket bqos-ctl (REQ) talks to, its commands (a table: status, status_node, status_bucket, history, buckets, set, remove, reload, import, diff, ...), and their replies, a change's held until its journal line is durable.
 *
 * Requests and replies are one JSON object each ({"v":1,"cmd":...}; the
 * protocol is in docs/controller.md).  The changes themselves (the table,
 * its journal, admission, etcd, the parked changes) are the conf_t's
 * (controller/daemon/conf.h), whose reply callback is admin_reply().  An admin_t belongs to the
 * controller's loop thread, as does everything it borrows; nothing locks. */
#ifndef BQOS_ADMIN_H
#define BQOS_ADMIN_H

#include <stddef.h>

#include "common/bucketfile.h"
#include "common/bucketjournal.h"
#include "controller/admission.h"
#include "controller/daemon/auth.h"
#include "controller/ctrl.h"
#include "controller/reshard.h"
#include "controller/daemon/clock.h"
#include "controller/daemon/conf.h"
#include "controller/daemon/leader.h"
#include "controller/daemon/metrics.h"
#include "controller/daemon/nodes.h"
#include "controller/daemon/parked.h"
#include "controller/daemon/timing.h"

/* Largest admin request (bytes) the endpoint takes: a bigger frame drops
 * the connection unread (ZMQ_MAXMSGSIZE).  Every command fits in 1 KiB but
 * import and diff, which carry a whole bucket file (bqos-ctl refuses to send
 * one past this bound: its CTL_REQUEST_MAX is this value). */
#define ADMIN_REQUEST_MAX 65536

/* How long a stop waits for changes still waiting for the disk (seconds,
 * from the stop): SIGTERM is answered within a second. */
#define ADMIN_STOP_WAIT 0.25

/* Until when, from the stop (seconds), it waits for the clients it answered
 * in the last ADMIN_SENT_WINDOW seconds to hang up (admin_stop()).  A REQ
 * client with ZMQ_IMMEDIATE (bqos-ctl's) drops a reply that is in its
 * queue, unread, when the connection closes: the controller keeps the
 * connection open until the client took its answer and left. */
#define ADMIN_HANGUP_WAIT 0.55
#define ADMIN_SENT_WINDOW 1.0
/* The replies remembered for that (the newest; one per request). */
#define ADMIN_SENT_MAX 64

typedef struct {
    void *sock;              /* bound ROUTER (borrowed: the caller closes
                                it): REQ clients; a change's reply waits
                                for the disk while other requests are
                                answered */
    conf_t *conf;            /* borrowed: the configuration in force and
                                its changes (its reply callback must be
                                admin_reply() with this admin_t) */
    ctrl_t *ctrl;            /* borrowed */
    const pclock_t *clk;     /* borrowed, for the status */
    const nodes_t *nodes;    /* borrowed, for the status */
    const timing_t *tm;      /* borrowed, for the status */
    const cmetrics_t *met;   /* borrowed, for the history; NULL: none */
    leader_t *ld;            /* borrowed; NULL without etcd (the controller
                                runs alone and its file is the table).  With
                                it, only the leader changes the table
                                (conf_set_leader()); standbys answer
                                set/remove/reload with not_leader */
    auth_t *auth;            /* borrowed; NULL without CURVE (anyone who
                                reaches the endpoint may do everything) */
    cmetrics_reloads_t *reloads; /* borrowed: "reload" counted here; NULL:
                                not counted */
    int shards, shard;       /* controller shards (0: none), for the
                                shards command */
    const reshard_t *rs;     /* shards, K changing at run time: the map in
                                force (controller/reshard.h); NULL: none.
                                Borrowed */
    int parking;             /* the request being run parked its change
                                (its reply goes to conf_hold_reply()) */
    parked_env_t cur;        /* admin_drain(): the request's envelope
                                (nenv 0 outside it) */
    char *direct;            /* admin_answer(): a parked change's reply */
    struct {
        int fd;              /* the connection a reply went to */
        double at;           /* when (mono_now()); 0: unused */
    } sent[ADMIN_SENT_MAX];  /* the newest replies, a ring */
    size_t sent_next;
} admin_t;

/* The stop's answers, on the loop's thread once the loop ended at `since`
 * (mono_now()), before the admin socket closes: waits for the disk until
 * since + ADMIN_STOP_WAIT and answers what became durable ("ok"); answers
 * every change still waiting with the error "stopping" (not acknowledged:
 * its line may or may not reach the file); then waits until since +
 * ADMIN_HANGUP_WAIT at most for every client answered in the last
 * ADMIN_SENT_WINDOW seconds to hang up, so that no answer is lost in a
 * client's queue when the connection closes.  Logs what it could not do. */
void admin_stop(admin_t *ad, double since);

/* Frees what the admin endpoint owns (a reply kept for admin_answer()),
 * after admin_stop(), for the end of the program: changes still parked are
 * answered "stopping" first (as admin_stop() does; ad->conf may be NULL).
 * The conf_t is the caller's (conf_destroy() after this). */
void admin_close(admin_t *ad);

/* Answers every request waiting on the socket, without blocking.  A
 * request that is not understood gets an error reply; a reply that cannot
 * be sent is logged. */
void admin_drain(admin_t *ad);

/* The reply to one request, `len` bytes at data (borrowed), from sender p
 * (proto_peer_get(); unused without ad->auth): the command run or refused,
 * as admin_drain() does for each request; no socket is touched; a change
 * is waited for until durable.  Returns
 * the reply's JSON text (caller frees it with free()), or NULL when out of
 * memory. */
char *admin_answer(admin_t *ad, const char *data, size_t len, const proto_peer_t *p);

/* conf_reply_fn for the admin_t `arg`: a parked change's reply (`held`,
 * taken; or the error `code` with `msg`) sent behind `to` without blocking
 * (a client that went away loses it), or kept for admin_answer() when the
 * change was asked there (to->nenv 0).  Loop thread. */
void admin_reply(void *arg, const parked_env_t *to, char *held, const char *code,
                 const char *msg);

#endif
