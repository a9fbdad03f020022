/* admin.h - bqos-controller's admin endpoint: the ROUTER socket bqos-ctl (REQ) talks to, a change's reply held until its journal line is durable, its commands (a table: status, status_node, status_bucket, history, buckets, set, remove, reload, import, diff), and the configuration changes they and SIGHUP make.
 *
 * Requests and replies are one JSON object each ({"v":1,"cmd":...}; the
 * protocol is in docs/controller.md).  An admin_t belongs to the
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
    const char *path;        /* the bucket file (borrowed) */
    admission_mode_t mode;   /* what a refused admission does */
    ctrl_t *ctrl;            /* borrowed */
    bucketfile_t *bf;        /* owned: the configuration in force, as given
                                to ctrl_set_buckets(); the caller destroys
                                it at the end (bucketfile_destroy(&ad->bf)) */
    const pclock_t *clk;     /* borrowed, for the status */
    const nodes_t *nodes;    /* borrowed, for the status */
    const timing_t *tm;      /* borrowed, for the status */
    const cmetrics_t *met;   /* borrowed, for the history; NULL: none */
    leader_t *ld;            /* borrowed; NULL without etcd (the controller
                                runs alone and its file is the table).  With
                                it, only the leader changes the table: it
                                writes etcd first, then applies and exports
                                the file as a backup; standbys answer
                                set/remove/reload with not_leader */
    auth_t *auth;            /* borrowed; NULL without CURVE (anyone who
                                reaches the endpoint may do everything) */
    cmetrics_reloads_t *reloads; /* borrowed: "reload" counted here; NULL:
                                not counted */
    int shards, shard;       /* controller shards (0: none): ad->bf is the
                                whole table, ctrl holds only the buckets of
                                shard `shard` (shardmap_of()); a change to
                                another shard's bucket is made to the table
                                (etcd, the file) and left out of ctrl */
    const reshard_t *rs;     /* shards, K changing at run time: the part
                                ctrl runs is reshard_mine()'s (the map in
                                force, controller/reshard.h); NULL:
                                shardmap_of(name, shards).  Borrowed */
    /* Without etcd, set and remove append a line to the bucket file's
     * journal (common/bucketjournal) instead of writing the file, and
     * change ad->bf and ctrl in place: O(1) in the table's size.  Opened
     * at the first change; NULL before, and with etcd.  Owned. */
    bucketjournal_t *journal;
    admission_sums_t sums;   /* ad->bf's reservations (admission by deltas) */
    int sums_ok;             /* sums are ad->bf's (0: computed at first use) */
    /* Changes made to ad->bf and ctrl whose journal line is not yet
     * durable, oldest first: their replies wait (issue 26).  Owned; made at
     * the first change (NULL before). */
    parked_t *parked;
    int parking;             /* the request being run parked its reply (the
                                newest parked change) */
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

/* ctrl_set_buckets(ad->ctrl, bf), or with shards (ad->shards) of bf's
 * buckets of shard ad->shard and its rules (a copy; bf is borrowed).  A
 * table with parents is refused with shards (-ENOTSUP: a tree would have
 * to live in one shard; not done).  Returns 0, -ENOTSUP, -ENOMEM or
 * ctrl_set_buckets()'s error.  Loop thread. */
int admin_set_ctrl_buckets(admin_t *ad, const bucketfile_t *bf);

/* Frees what the admin endpoint owns besides ad->bf (the journal: a
 * compaction in progress is waited for).  For the end of the program,
 * after admin_stop(): changes still parked are answered "stopping" (as
 * admin_stop() does) and the journal is left to the exit (its writer may be
 * in a slow fdatasync: the process does not wait for it). */
void admin_close(admin_t *ad);

/* Logs the rule analysis's warnings (rules_analyze(): rules that can never
 * match, ambiguous templates) of bf's rules, each line prefixed with
 * `source` (the file); nothing without rules.  Called when a table with
 * changed rules is applied, and by the daemon for the file it starts
 * with. */
void admin_log_rules(const bucketfile_t *bf, const char *source);

/* The journal's eventfd for the loop's poll (readable when parked changes
 * became durable or failed), or -1 when there is no journal. */
int admin_journal_fd(const admin_t *ad);

/* Replies to the parked changes the journal finished: the reply held for
 * a durable one; for a failed one (and every change parked after it,
 * made on top of it) the change is undone in ad->bf and ctrl, newest
 * first, and the reply is the error (io).  On the loop's thread. */
void admin_journal_done(admin_t *ad);

/* Waits at most timeout_s (< 0: no bound) for the parked changes, then
 * admin_journal_done().  Returns how many are still parked.  For a
 * whole-table change (reload, import) and the end of the program. */
size_t admin_settle(admin_t *ad, double timeout_s);

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

/* Re-reads the bucket file and, if it is valid and admitted, makes it the
 * configuration (ctrl_set_buckets; ad->bf replaced).  Returns NULL, or the
 * name of the error ("invalid", "io", "admission", "internal") with `msg`
 * (`size` bytes) filled; the configuration is then unchanged.  Logs the
 * outcome.  For SIGHUP and the reload command. */
const char *admin_reload(admin_t *ad, char *msg, size_t size);

/* The table key in etcd holds `text` (`len` bytes, borrowed) at revision
 * `rev`: parse it, make it the configuration (no admission: the leader
 * admitted it) and export it to the bucket file if that differs.  Returns 0
 * or -errno (logged; the configuration is then unchanged).  For
 * leader_hooks_t.apply. */
int admin_apply_text(admin_t *ad, const char *text, size_t len, int64_t rev);

/* One change of etcd's table at revision `rev`: bucket `name` is now the
 * bucket file element `json` (`len` bytes, borrowed), or removed (json
 * NULL), and the table's version `version`.  Applied as admin_apply_text()
 * applies a table (no admission; exported to the file).  Returns 0, -ESTALE
 * (`version` older than ours: not applied), -EINVAL (not a bucket of that
 * name) or -errno (logged; unchanged).  For leader_hooks_t.change. */
int admin_apply_bucket(admin_t *ad, const char *name, const char *json, size_t len,
                       uint64_t version, int64_t rev);

#endif
