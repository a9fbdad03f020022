/* iheap.h - indexed binary min-heap of small integer ids keyed by a double: insert, re-key, remove and top in O(log n) by id.
 *
 * Each id (0 .. capacity-1) is in the heap at most once; iheap_set() inserts
 * it or changes its key.  The top is the id with the least key, the lower id
 * first among equal keys, so that the order never depends on the history
 * of the heap.  Used by the node's scheduler for "credit returns at t" and
 * "next by urgency" (storage-node/core/sched.c).
 *
 * An iheap_t is not thread-safe: its owner serialises every call. */
#ifndef BQOS_IHEAP_H
#define BQOS_IHEAP_H

#include <stddef.h>

typedef struct iheap iheap_t;

/* Returns an empty heap with room for ids 0 .. cap-1 (more with
 * iheap_reserve()), or NULL if out of memory.  Caller owns it. */
iheap_t *iheap_new(size_t cap);

/* Frees the heap and sets *hp to NULL.  Accepts NULL and *hp == NULL. */
void iheap_destroy(iheap_t **hp);

/* Makes room for ids 0 .. cap-1.  Returns 0 or -ENOMEM (unchanged). */
int iheap_reserve(iheap_t *h, size_t cap);

/* Inserts id with `key`, or moves it to `key` if present.  O(log n).
 * Returns 0, or -EINVAL for an id outside the reserved room or a NaN key
 * (nothing changed).  Never allocates. */
int iheap_set(iheap_t *h, int id, double key);

/* Removes id if present (else nothing).  O(log n). */
void iheap_remove(iheap_t *h, int id);

/* Returns 1 if id is in the heap, else 0.  O(1). */
int iheap_contains(const iheap_t *h, int id);

/* Returns the id with the least key (lower id first among equals) and sets
 * *key if non-NULL, or -1 when the heap is empty.  O(1). */
int iheap_top(const iheap_t *h, double *key);

/* Removes every id.  O(n). */
void iheap_clear(iheap_t *h);

/* Returns the number of ids in the heap. */
size_t iheap_size(const iheap_t *h);

#endif
