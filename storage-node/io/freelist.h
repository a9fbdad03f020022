/* freelist.h - a bounded free list of fixed-size blocks, so that the fronts'
 * per-request records (a memcached reply slot, an NBD request) are reused
 * instead of allocated and freed once per request.
 *
 * A block given back goes on the list while fewer than `max` wait there,
 * and to free(3) otherwise, so the list never holds more than max * size
 * bytes beyond what is in use.  Blocks come from malloc(3) and may be
 * handed to free(3) directly, too.
 *
 * Threads: none of its own; one list belongs to one thread (the front's
 * loop thread). */
#ifndef BQOS_FREELIST_H
#define BQOS_FREELIST_H

#include <stddef.h>

typedef struct freelist {
    void *head;     /* blocks waiting, linked through their first bytes */
    size_t size;    /* bytes of every block */
    int n, max;
} freelist_t;

/* Sets up an empty list of blocks of `size` bytes (at least a pointer's),
 * keeping at most `max` (>= 0) free blocks. */
void freelist_init(freelist_t *fl, size_t size, int max);

/* Returns a block of fl->size bytes, its content unspecified (not zeroed),
 * or NULL when out of memory.  Caller owns it; give it back with
 * freelist_put() (or free(3)). */
void *freelist_get(freelist_t *fl);

/* Takes back a block from freelist_get(): keeps it for reuse, or frees it
 * when `max` wait already.  Accepts NULL. */
void freelist_put(freelist_t *fl, void *p);

/* Frees every waiting block; the list is empty (and still usable). */
void freelist_fini(freelist_t *fl);

#endif
