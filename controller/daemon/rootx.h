/* rootx.h - bqos-controller's root exchange between controller shards (issue 30): every shard leader sends the root its needs per node after each computed round, the root (shard 0's leader) divides every node's capacity among the shards (controller/shardroot.h) at each of its rounds and answers each shard its slices; a shard holds its slices for two periods, else falls back to 1/K of each node.
 *
 * Wire (ZeroMQ, CURVE when the controller has keys; docs/controller.md
 * "Shards"): each controller of a shard connects a DEALER to every root
 * endpoint (--root: shard 0's controllers' --root-listen); the root binds a
 * ROUTER (--root-listen) in the admin domain and takes needs only from an
 * `admin` key (a shard controller's).  One JSON frame per message:
 *   needs   {"t":"needs","shard":S,"k":K,"epoch":E,"target":R,
 *            "nodes":[[NAME,cap,cons,must,room,demand,placed],...]}
 *           rates, IOs per second of the period left at the round (the
 *           round's tokens divided by its time left), after every computed
 *           round of a leader
 *           ({"t":"needs",...,"standby":true,"nodes":[]} from a standby:
 *           send me my shard's slices too)
 *   slices  {"t":"slices","epoch":RE,"shard":S,"nodes":[[NAME,est,cons],...]}
 *           IOs per second, at the root's every round start, to the shards
 *           whose needs arrived within the last two intervals, and to
 *           their standbys that asked within that time
 * Epochs: the root drops needs of a shard epoch below the highest it has
 * seen for that shard (a deposed leader's); a shard drops slices of a root
 * epoch (shard 0's leader epoch) below the highest it has seen.  Bounds:
 * at most ROOTX_NODES nodes in a message and at the root, frames over
 * ROOTX_MSG_MAX bytes drop the connection; a message that does not parse
 * or holds an out-of-range value is dropped whole (counted).  Etcd holds
 * none of it.
 *
 * A rootx_t belongs to the controller's loop thread, as its sockets do;
 * nothing blocks (sends are ZMQ_DONTWAIT: a slow peer loses messages, the
 * next round sends again). */
#ifndef BQOS_ROOTX_H
#define BQOS_ROOTX_H

#include <stdint.h>

#include "common/curvekey.h"
#include "controller/ctrl.h"

#define ROOTX_NODES 4096
#define ROOTX_MSG_MAX (1 << 20)
#define ROOTX_ENDPOINTS 8
/* A slice holds this many periods after it arrived (its lease), then the
 * node's static 1/K again. */
#define ROOTX_LEASE_PERIODS 2

typedef struct {
    int shards, shard;      /* K >= 1, this controller's shard */
    const char *listen;     /* --root-listen: bind the root's ROUTER (NULL: not
                               a root candidate) */
    const char *connect;    /* --root: the root endpoints, comma-separated
                               (1..ROOTX_ENDPOINTS; NULL: no exchange) */
    const curvekey_t *own;  /* this controller's keys (NULL: plain) ... */
    const curvekey_t *root; /* ... and the root's public key (NULL: own's) */
    void *zctx;             /* the controller's ZeroMQ context (borrowed) */
    double period_s;
    int intervals;
} rootx_config_t;

typedef struct {
    uint64_t needs_sent, needs_taken, slices_sent, slices_taken;
    uint64_t dropped;       /* messages refused: garbage, bounds, old epoch,
                               a key that is not an admin's */
    uint64_t steps;         /* root steps run */
    uint64_t step_failed;   /* root steps that failed (no slices sent) */
    uint64_t root_epoch;    /* highest root epoch taken (0: none) */
} rootx_stats_t;

typedef struct rootx rootx_t;

/* Binds and connects as cfg says (copied).  Returns the exchange (caller
 * owns it) or NULL with *err = -EINVAL (bad config or endpoint list),
 * -ENOMEM, or ZeroMQ's error (logged). */
rootx_t *rootx_new(const rootx_config_t *cfg, int *err);

/* Closes the sockets and frees; sets *xp to NULL.  Accepts NULL. */
void rootx_destroy(rootx_t **xp);

/* The sockets to poll for input: fills socks[0..n) (n <= max), returns n. */
int rootx_sockets(const rootx_t *x, void **socks, int max);

/* Takes every message waiting: needs at the root, slices at a shard. */
void rootx_drain(rootx_t *x, double now);

/* A leader's needs after its computed round (c's last round, ctrl_shard_needs();
 * after a period's last round, left <= 1 / intervals, the next period's:
 * ctrl_shard_needs_next()), `left` (0..1] the part of the period that round had, `epoch` this
 * shard's leader epoch: sent to every root endpoint.  Returns 0, -ENOMEM, or
 * -EAGAIN (no root connected). */
int rootx_send_needs(rootx_t *x, const ctrl_t *c, double left, uint64_t epoch);

/* A standby's request for its shard's slices (sent after each of its
 * rounds): the root sends it the slices it sends the shard's leader, so
 * that it holds them when it takes over instead of starting on 1/K beside
 * shards on the root's slices.  Returns 0 or -EAGAIN. */
int rootx_send_standby(rootx_t *x);

/* The root's step (shard 0's leader, `epoch` its epoch, `now`): every node
 * the shards' recent needs name, its capacity the smallest of theirs,
 * divided (shardroot_solve()) and each shard sent its slices.  Nothing
 * without a listening socket.  Returns 0 or an error (counted; nothing
 * sent: the shards keep their last slices for their lease). */
int rootx_step(rootx_t *x, uint64_t epoch, double now);

/* The slice of node `name` for this shard: 1 if one is live at `now`
 * (taken within ROOTX_LEASE_PERIODS periods), -1 if the last one has
 * lapsed, with *est and *cons (IOs per second) set to it either way; 0 if
 * none was ever taken (nothing set). */
int rootx_slice(const rootx_t *x, const char *name, double now, double *est, double *cons);

void rootx_stats(const rootx_t *x, rootx_stats_t *out);

/* K changing at run time (controller/reshard.h): the exchange runs on k
 * shards from now on (1..SHARDMAP_MAX; the config's shards at the start):
 * needs of another K are dropped, the root divides among k shards, a
 * shard's needs say k.  Every shard calls it when it switches its map, at
 * the change's period: the root step of that period's first interval may
 * lack a shard whose needs still said the old K (it is given its even
 * part; its slices held meanwhile).  Returns 0, -EINVAL, -ENOMEM (K as it
 * was). */
int rootx_set_k(rootx_t *x, int k);

/* What the exchange holds at `now`, for the status and /metrics: this
 * shard's slices (nodes whose root slice is live, lapsed) and, at a root
 * candidate (--root-listen), each shard's needs (fresh: they arrived
 * within the last two intervals, so its slices are sent and live there;
 * lapsed: older, it gets only its even part).  O(nodes + shards). */
typedef struct {
    int root;                    /* binds the root's socket (--root-listen) */
    int live, lapsed;            /* this shard's slices held */
    int shards;                  /* K */
    signed char fresh[256];      /* root: per shard 1 fresh, 0 lapsed, -1 never */
    double age_s[256];           /* root: seconds since its last needs (fresh/lapsed) */
} rootx_view_t;

void rootx_view(const rootx_t *x, double now, rootx_view_t *out);

#endif
