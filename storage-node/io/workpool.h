/* workpool.h - a pool of worker threads for blocking backend calls: a locked
 * FIFO of submitted items, batches run on the workers, completions handed
 * back to the libevent loop thread through an eventfd.
 *
 * Both node backends use it: the memcached backend (backend.h; one
 * connection to memcached per worker, a batch as one pipelined exchange) and
 * the block backend (blockdev.h; pread/pwrite/fdatasync one op at a time).
 * Items are intrusive: embed a workpool_item_t in each operation.  The pool
 * does not call back per item: when completions are waiting it calls the
 * owner's `ready` hook on the loop thread, and the owner takes them all with
 * workpool_collect() and answers them itself.
 *
 * With 0 workers the pool is "inline": workpool_submit_chain() runs the
 * items at once on the calling (loop) thread, and `ready` runs on the loop's
 * next pass over active events; no thread hand-off at all.
 *
 * Threads: workpool_new(), _submit_chain(), _collect(), _stop() and
 * _destroy() are called on the loop thread that owns the event_base; `run`,
 * `thread_start` and `thread_stop` run on the workers (inline: on the loop
 * thread); `ready` runs on the loop thread.  The submit FIFO and the
 * completions each have their own lock, so workers handing results back do
 * not contend with the loop thread submitting work. */
#ifndef BQOS_WORKPOOL_H
#define BQOS_WORKPOOL_H

#include <stddef.h>

struct event_base;

/* Embed one in each operation.  `next` is the pool's from submission until
 * workpool_collect() or workpool_stop() hands the item back (then it links
 * the returned chain). */
typedef struct workpool_item {
    struct workpool_item *next;
} workpool_item_t;

#define WORKPOOL_BATCH_MAX 64

typedef struct {
    int workers;       /* threads, 0..1024; 0: inline (see above) */
    int batch;         /* most items one worker takes at once, 1..WORKPOOL_BATCH_MAX */
    int finish_queued; /* at stop: 1, workers run what is still queued first;
                          0, they stop after their current batch and
                          workpool_stop() returns the rest */
    /* On each worker as it starts (inline: once, in workpool_new()):
     * returns its context for `run` (may be NULL; inline, NULL fails
     * workpool_new() with -ENOMEM).  May be NULL. */
    void *(*thread_start)(void *arg);
    /* On each worker as it ends (inline: in workpool_destroy()).  May be NULL. */
    void (*thread_stop)(void *ctx, void *arg);
    /* Runs n (1..batch) items, blocking as long as it likes; results go in
     * the items.  Required. */
    void (*run)(void *ctx, workpool_item_t **items, size_t n, void *arg);
    /* Loop thread: completions are waiting (workpool_collect()).  Required. */
    void (*ready)(void *arg);
    void *arg;
} workpool_config_t;

typedef struct workpool workpool_t;

/* Starts the workers and registers the completion event on `base`.
 * Returns the pool (caller owns it, destroy with workpool_destroy()), or
 * NULL and *err = -EINVAL (bad settings), -ENOMEM, or -errno from
 * eventfd/pthread_create. */
workpool_t *workpool_new(struct event_base *base, const workpool_config_t *cfg, int *err);

/* Queues the n items linked first->next...->last (in that order) with one
 * lock round trip, and wakes an idle worker (every idle one for more than
 * a batch).  Inline, runs them now, `batch` at a time.  `ready` never runs
 * from inside this call.  Returns 0, or -ESHUTDOWN once workpool_stop() has
 * begun (nothing queued). */
int workpool_submit_chain(workpool_t *wp, workpool_item_t *first, workpool_item_t *last,
                          size_t n);

/* Takes every finished item, in the order they finished, linked through
 * next (NULL-terminated); NULL if none.  The caller owns them again. */
workpool_item_t *workpool_collect(workpool_t *wp);

/* The eventfd the pool's completion event watches (edge-triggered, never
 * read: every write to it is a new edge), for other sources of completions
 * on the same event, such as kernel AIO's IOCB_FLAG_RESFD; each write makes
 * `ready` run.  -1 inline. */
int workpool_eventfd(const workpool_t *wp);

/* Stops the workers (see finish_queued) and joins them.  Returns the items
 * never started, in order (NULL with finish_queued); finished ones wait
 * for workpool_collect().  Later calls return NULL. */
workpool_item_t *workpool_stop(workpool_t *wp);

/* Stops the pool if needed and frees it; items never started or not
 * collected are dropped (the owner collects first).  Sets *wpp to NULL.
 * Accepts NULL. */
void workpool_destroy(workpool_t **wpp);

#endif
