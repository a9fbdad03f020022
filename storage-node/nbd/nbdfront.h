/* nbdfront.h - the NBD front of bqos-node: NBD client connections on a
 * libevent loop, every READ/WRITE/FLUSH/TRIM/BLOCK_STATUS one scheduler item
 * charged to the export's bucket, executed by the block backend (blockdev).
 *
 * Exports are the scheduler's buckets: export name = bucket name (the empty
 * name means the bucket "default" if it exists).  One request = one token,
 * whatever its length, as in the paper (see docs/nbd.md).
 *
 * Life cycle of a request: the loop thread reads a whole request (header
 * and, for WRITE, payload) from the connection, checks it against the
 * export size (bad ones are answered at once and cost no token), and
 * enqueues it in its bucket's scheduler queue.  Whenever fewer than
 * `outstanding` IOs are at the backend it takes the next one from the gate
 * (gate_take(), gate.h) and submits it to a blockdev worker; the completion comes back on the loop thread,
 * is counted (sched_note_completion() with the backend busy time) and
 * answered with a simple reply, or structured reply chunks once the client
 * negotiated NBD_OPT_STRUCTURED_REPLY.  Replies may leave in any order
 * (proto.md, "Transmission").
 *
 * The front's gate creates the node's scheduler (cfg.policy, cfg.weighted)
 * and the front is its only dispatcher: every item in it is an NBD
 * request.  Threads: an
 * nbdfront_t belongs to the loop thread of its event_base; every function
 * here must be called there. */
#ifndef BQOS_NBDFRONT_H
#define BQOS_NBDFRONT_H

#include <stdint.h>

#include "storage-node/nbd/blockdev.h"
#include "storage-node/nbd/nbdtls.h"
#include "storage-node/io/gate.h"
#include "storage-node/io/listener.h"
#include "storage-node/core/cost.h"
#include "storage-node/core/sched.h"

struct event_base;

/* Settings; the strings are copied by nbdfront_new(). */
typedef struct {
    listener_addr_t listen;    /* where clients connect (listener_parse());
                                  port 0 picks a free one (conns_port()) */
    int outstanding;           /* max IOs at the backend, >= 1 */
    int max_conns;             /* connections beyond are closed at once */
    int max_queued;            /* per connection: reading pauses beyond */
    size_t request_memory;     /* node-wide READ/WRITE buffer bytes: a
                                  connection whose next request would pass
                                  it is not read until buffers free */
    int inline_reads;          /* serve page-cached reads on the loop thread
                                  (preadv2 RWF_NOWAIT), default 1 */
    blockdev_config_t store;   /* the backend (workers, path, size, direct) */
    const tls_t *tls;       /* TLS credentials (borrowed: they must outlive
                                  the front); NULL: none */
    nbdtls_mode_t tls_mode;    /* NBDTLS_OFF unless tls is set */
    cost_config_t cost;        /* what a request costs in units (cost.h):
                                  READ/WRITE by length, FLUSH and TRIM
                                  fixed, BLOCK_STATUS nothing */
    sched_policy_t policy;     /* the scheduler's (gate_config_t) */
    int weighted;              /* weighted round robin (bucket weights) */
} nbdfront_config_t;

/* Fills *cfg with the defaults: 127.0.0.1:10809, outstanding 5, 4096
 * connections, 256 queued requests per connection, 256 MiB of request
 * buffers, 5 workers, export size 1 GiB, buffered IO, inline page-cache
 * reads, no path (must be set), no TLS. */
void nbdfront_config_defaults(nbdfront_config_t *cfg);

typedef struct nbdfront nbdfront_t;

/* Creates the gate (and with it the node's scheduler, without buckets),
 * opens the block backend, binds the listening socket and starts accepting.
 * Returns the front (caller owns it), or NULL and
 * *err = -EINVAL (bad settings), -EADDRINUSE or another -errno from bind or
 * from the backend, -ENOMEM. */
nbdfront_t *nbdfront_new(struct event_base *base, const nbdfront_config_t *cfg, int *err);

/* The front's gate (owned by the front): its connections (gate_conns():
 * address, port), buckets (= exports; gate_bucket() makes none beyond
 * store.max_exports) and
 * tokens (gate_set_tokens(), the token test hook's entry point),
 * gate_kick(), and the graceful stop, gate_shutdown(): the listener closes,
 * every queued request is answered ESHUTDOWN, in-flight IOs finish, every
 * reply is written and every connection closed, then the event loop breaks
 * (after 10 s at the latest). */
gate_t *nbdfront_gate(nbdfront_t *f);

/* Per-front counters. */
typedef struct {
    uint64_t conns, requests, reads, writes, flushes, trims, errors;
    uint64_t block_status;     /* NBD_CMD_BLOCK_STATUS requests executed */
    uint64_t bytes_read, bytes_written;
    uint64_t inline_reads;     /* of the reads: served from the page cache at once */
    int inflight;
} nbdfront_stats_t;
void nbdfront_stats(const nbdfront_t *f, nbdfront_stats_t *out);

/* Closes every connection, stops the backend (its last completions are
 * delivered here) and frees everything; sets *fp to NULL.  Accepts NULL.
 * The gate and its scheduler go with it. */
void nbdfront_destroy(nbdfront_t **fp);

#endif
