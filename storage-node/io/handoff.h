/* handoff.h - a FIFO that hands intrusive items from any thread to one libevent loop thread: chains pushed under one lock, the consumer woken once per empty-to-nonempty edge (an eventfd, or event_active() when the producer is the consumer itself), all items taken at once.
 *
 * The building block of `bqos-node --threads N` (docs/decisions.md, "A node
 * that uses every core"): front threads hand parsed requests to the gate's
 * loop thread (the one that owns the scheduler, the backend and the agent)
 * through one handoff_t, and the gate hands each front thread its finished
 * replies through that thread's own.  Every item pushed is taken exactly
 * once (handoff_take()) or returned by handoff_close(); items of one
 * producer come out in the order it pushed them, so a connection owned by
 * one thread keeps its requests' order.
 *
 * Costs: one uncontended lock round trip per chain; one write(2) to the
 * eventfd per wake-up, and a wake-up only when the FIFO was empty (pushes
 * that find items waiting add to the consumer's next take for free); the
 * consumer never reads the eventfd (edge-triggered, as workpool.h).
 * Nothing is allocated per item.  Bounds: the FIFO holds only what
 * producers push; each producer bounds its own (a front's per-connection
 * cap on unanswered requests).
 *
 * Threads: handoff_new(), handoff_take(), handoff_close() and
 * handoff_destroy() are called on the consumer's loop thread (the thread
 * that called handoff_new(), owning `base`); handoff_push_chain() and
 * handoff_stats() on any thread; `ready` runs on the consumer's loop
 * thread, never from inside handoff_push_chain(). */
#ifndef BQOS_HANDOFF_H
#define BQOS_HANDOFF_H

#include <stddef.h>
#include <stdint.h>

struct event_base;

/* Embed one in each item.  `next` is the FIFO's from the push until
 * handoff_take() or handoff_close() returns the item (then it links the
 * returned chain). */
typedef struct handoff_item {
    struct handoff_item *next;
} handoff_item_t;

typedef struct handoff handoff_t;

/* Consumer's loop thread: items are waiting (handoff_take()).  Called once
 * per wake-up; items pushed after the take wake it again. */
typedef void (*handoff_ready_fn)(void *arg);

/* Makes an empty FIFO whose wake-ups call ready(arg) on `base`'s loop; the
 * calling thread is the consumer.  Returns it (the caller owns it:
 * handoff_destroy()), or NULL and *err = -EINVAL (base or ready NULL),
 * -ENOMEM, or -errno from eventfd(2). */
handoff_t *handoff_new(struct event_base *base, handoff_ready_fn ready, void *arg, int *err);

/* Appends the n >= 1 items linked first->next...->last (in that order;
 * last->next is set to NULL) with one lock round trip, and wakes the
 * consumer if the FIFO was empty.  Any thread.  Returns 0, or -ESHUTDOWN
 * after handoff_close() (nothing appended: the items stay the caller's),
 * or -EINVAL (first or last NULL, n 0). */
int handoff_push_chain(handoff_t *h, handoff_item_t *first, handoff_item_t *last, size_t n);

/* Takes every waiting item, in the order pushed (per producer), linked
 * through next (NULL-terminated); NULL if none.  The caller owns them
 * again.  Consumer thread. */
handoff_item_t *handoff_take(handoff_t *h);

/* Refuses later pushes (-ESHUTDOWN) and returns the items never taken, in
 * order (NULL if none); later calls return NULL.  Consumer thread. */
handoff_item_t *handoff_close(handoff_t *h);

/* Counts since handoff_new(): items and chains pushed, wake-ups (eventfd
 * writes or event_active() calls).  Any thread. */
typedef struct {
    uint64_t items, chains, wakes;
} handoff_stats_t;
void handoff_stats(handoff_t *h, handoff_stats_t *out);

/* Frees the FIFO and its event; items still in it are dropped (the owner
 * closes it first and takes them back).  Producers must be done pushing:
 * returned from their last handoff_push_chain(), which may still write the
 * eventfd after the consumer took the item (so a consumer that ends on an
 * item pushed to it leaves the destroy to a thread that joined the
 * producer, or vice versa).  Sets *hp to NULL.  Accepts NULL.  Consumer
 * thread, or any thread once the consumer has stopped (joined). */
void handoff_destroy(handoff_t **hp);

#endif
