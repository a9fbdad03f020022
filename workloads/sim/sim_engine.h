/* sim_engine.h - the simulator's event queue: a binary min-heap of (time, id) pairs.
 *
 * An id names an event source (a request generator, a server); the caller
 * keeps what the id means.  Ties in time are broken by the smaller id, so
 * the order of events, and with it a whole run, depends only on the times
 * and ids pushed: never on the heap's history.  A sim_heap_t belongs to one
 * thread (the simulator gives each server its own heap). */
#ifndef BQOS_SIM_ENGINE_H
#define BQOS_SIM_ENGINE_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    double t;     /* when the event happens (simulated seconds) */
    uint32_t id;  /* what happens: the caller's event source */
} sim_event_t;

typedef struct sim_heap sim_heap_t;

/* Returns an empty heap with room for `hint` events (it grows as needed),
 * or NULL if out of memory.  Caller owns it. */
sim_heap_t *sim_heap_new(size_t hint);

/* Frees the heap and sets *hp to NULL.  Accepts NULL and *hp == NULL. */
void sim_heap_destroy(sim_heap_t **hp);

/* Number of events queued. */
size_t sim_heap_size(const sim_heap_t *h);

/* Removes every event (keeps the memory). */
void sim_heap_clear(sim_heap_t *h);

/* Adds an event.  Returns 0 or -ENOMEM (heap unchanged). */
int sim_heap_push(sim_heap_t *h, double t, uint32_t id);

/* Returns the earliest event, or NULL if the heap is empty.  The pointer is
 * valid until the next change to the heap. */
const sim_event_t *sim_heap_top(const sim_heap_t *h);

/* Removes the earliest event into *out (may be NULL).  Returns 0, or
 * -ENOENT if the heap is empty. */
int sim_heap_pop(sim_heap_t *h, sim_event_t *out);

/* Moves the earliest event to time `t` (same id), the cheap way to
 * reschedule a source that just fired.  Returns 0, or -ENOENT if empty. */
int sim_heap_retime_top(sim_heap_t *h, double t);

#endif
