/* backend.h - the memcached backend: single-key operations forwarded to the
 * storage server's memcached over pipelined text-protocol connections, on a
 * pool of worker threads (workpool.h) with completions handed back to a
 * libevent loop thread, or inline on the loop thread.
 *
 * Each worker owns one connection to memcached and runs one blocking
 * batch at a time, as one pipelined exchange (one round trip).  The loop thread submits operations; when a batch is
 * done, a worker queues it and wakes the loop through an eventfd, and the
 * loop thread runs the completion callbacks.  How many operations are at the
 * backend at once is the caller's business (bqos-node keeps it at
 * --outstanding); operations beyond the number of workers wait in a FIFO.
 *
 * With 0 workers the pool is "inline": the loop thread's own connection
 * runs every submitted chain at once (blocking the loop for the round
 * trips) and the callbacks run on the loop's next pass over active events.
 * No thread hand-off at all; the price is a loop that waits for memcached. */
#ifndef BQOS_BACKEND_H
#define BQOS_BACKEND_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "storage-node/mc/mcproto.h"
#include "storage-node/io/workpool.h"

struct event_base;

/* One operation.  The caller owns the memory and fills the request part;
 * between backend_submit() and the completion callback the backend owns it
 * and fills the result part (and the caller must not touch it). */
typedef struct backend_op {
    workpool_item_t link;     /* the pool's while submitted; chains for
                                 backend_submit_chain() */
    /* request: set by the caller */
    mcp_cmd_t cmd;            /* get/gets, set..cas, delete, incr/decr,
                                 touch, flush_all, gat/gats, the meta
                                 commands but mn */
    const char *key;          /* not NUL-terminated; caller-owned */
    size_t keylen;
    const char *value;        /* storage commands; caller-owned */
    size_t vlen;
    uint32_t flags;
    int64_t exptime;          /* also flush_all's delay, gat's */
    uint64_t cas;
    uint64_t delta;
    const char *line;         /* meta commands: the client's line, sent as
                                 it is (then ms's value); caller-owned */
    size_t linelen;
    int quiet;                /* meta's q flag: memcached may stay silent,
                                 so an "mn" follows the request */
    char *vbuf;               /* room for the reply (NULL, 0: none): a get's
                                 value or a meta reply of at most vcap bytes
                                 is copied here and rvalue == vbuf (not to
                                 be freed); a larger one is malloc'd */
    size_t vcap;
    /* result: set by the worker */
    mcp_reply_t reply;
    char *rvalue;             /* get hit: the value, in vbuf if it fits,
                                 else malloc'd (backend_free_value()) */
    size_t rvlen;
    uint32_t rflags;
    uint64_t rcas;
    uint64_t number;          /* incr/decr result */
    size_t rdata;             /* meta: bytes of the value in the reply (VA);
                                 the reply itself, every line of it, is
                                 rvalue (NULL: a quiet request answered
                                 nothing) */
    double done_at;           /* mono_now() when its batch's replies were
                                 read (one clock read per batch): where its
                                 time at the backend ends, however late
                                 the callback runs */
    char errmsg[120];         /* MCP_R_SERVER_ERROR: reply line, no CRLF */
} backend_op_t;

/* Called on the loop thread for every completed operation; the caller owns
 * `op` again. */
typedef void (*backend_done_fn)(backend_op_t *op, void *arg);

typedef struct backend backend_t;

/* Frees op's rvalue unless it is op's own vbuf; rvalue NULL after. */
static inline void backend_free_value(backend_op_t *op)
{
    if (op->rvalue != op->vbuf)
        free(op->rvalue);
    op->rvalue = NULL;
}

#define BACKEND_BATCH_MAX 64

/* Starts `nworkers` (>= 0; 0: inline, see above) threads, each connected
 * (lazily) to memcached at host:port (port 0: host is the absolute path of
 * memcached's Unix socket, its -s), and registers the completion event on
 * `base` (the loop the callback runs on).  A worker takes up to `batch`
 * (1..BACKEND_BATCH_MAX) queued ops at once and sends every get among them
 * as one multi-key gets followed by the others, in one write, then reads the
 * replies in order (one round trip); batch 1 runs every op on its own.
 * A connection fault answers the ops not yet answered with SERVER_ERROR
 * and closes the connection; after a failed connect there is no new try
 * for one second (the ops fail at once).
 * Returns the pool, or NULL and sets *err to -EINVAL (bad arguments),
 * -ENOMEM or another -errno.  Caller owns the pool. */
backend_t *backend_new(struct event_base *base, const char *host,
                       unsigned port, int nworkers, int batch,
                       backend_done_fn done, void *arg, int *err);

/* Queues `op` for a worker.  Loop thread (with workers any thread, in fact:
 * it locks; inline, the loop thread only, and the op has run on return).
 * The callback never runs from inside this call.  Returns 0, or
 * -ESHUTDOWN once backend_destroy() has begun. */
int backend_submit(backend_t *b, backend_op_t *op);

/* Queues the n ops linked first->link.next...->last (in that order) with one
 * lock round trip.  Returns 0, or -ESHUTDOWN (nothing queued). */
int backend_submit_chain(backend_t *b, backend_op_t *first, backend_op_t *last,
                         size_t n);

/* The backend's health, for the metrics: connects that failed (a try
 * after RETRY_S, not the fast failures between), connections that failed
 * within a batch (write or read error, memcached closed or silent past
 * IO_MS), both cumulative, and whether the last connect failed (down until
 * one succeeds; connections are made on first use, so a backend never
 * tried counts as up).  Any thread. */
typedef struct {
    uint64_t connect_errors, io_errors;
    int down;
} backend_health_t;

void backend_health(const backend_t *b, backend_health_t *out);

/* Stops the workers after their current operation and frees the pool; sets
 * *bp to NULL.  Operations still waiting in the FIFO or completed but not
 * yet delivered are delivered first (their callbacks run from here, on the
 * calling thread, which must be the loop thread).  Accepts NULL. */
void backend_destroy(backend_t **bp);

/* Parses "memcached://HOST:PORT" (or "HOST:PORT") into host (NUL-terminated,
 * at most hostcap bytes) and port, or "unix:/PATH" (also after
 * "memcached://") into host = "/PATH" and port 0.  Returns 0 or -EINVAL. */
int backend_parse_url(const char *url, char *host, size_t hostcap,
                      unsigned *port);

#endif
