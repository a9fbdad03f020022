/* memtrim.h - bqos-controller's free heap given back: after a burst of big arrays freed (a table's growth, a node's full push, a load), the pages malloc keeps free are handed to the kernel, so the resident size follows what is live (issue 26: memory per configured bucket).
 *
 * The daemon keeps up to 64 MiB of freed memory at the top of its heap
 * (main.c's mallopt(): steady rounds reuse it without page faults), but
 * freed chunks in the middle of the heap stay resident whatever the
 * threshold: at a million buckets, the old arrays of a doubling growth and
 * the records of four full pushes were 130-150 MB (~140 B per bucket).
 * A memtrim_t reads malloc's free bytes now and then and, when they grew
 * by a bound since it last gave pages back, calls malloc_trim(): free
 * chunks' whole pages go back (MADV_DONTNEED), the top's 64 MiB stay.
 * Steady rounds free what they took, so their free bytes do not grow:
 * no trim, no faults.  A memtrim_t belongs to the loop thread. */
#ifndef BQOS_MEMTRIM_H
#define BQOS_MEMTRIM_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    size_t grow;          /* free bytes grown since the last trim that trigger one */
    size_t pad;           /* bytes kept at the heap's top (malloc_trim's pad) */
    double every;         /* seconds between reads of malloc's counts */
    double next;          /* when the next read is due (monotonic s) */
    size_t base;          /* free bytes after the last trim, or the least since */
    uint64_t trims;       /* trims so far */
    size_t last_free;     /* free bytes at the last read */
    double last_ms;       /* the last trim's wall time, ms */
} memtrim_t;

/* Sets t up: a read every `every` seconds from `now` on, a trim when free
 * bytes grew by `grow` or more since the last one (or since the first
 * read), keeping `pad` bytes at the top of the heap. */
void memtrim_init(memtrim_t *t, size_t grow, size_t pad, double every, double now);

/* At most once per t->every: reads malloc's free bytes (mallinfo2(): a
 * walk of its free lists) and trims if they grew by t->grow.  Returns 1 if
 * it trimmed (t->last_ms: how long), else 0.  Loop thread. */
int memtrim_tick(memtrim_t *t, double now);

/* Gives free pages back now, whatever the counts (after a load).  Returns
 * malloc_trim()'s result (1: memory was released). */
int memtrim_now(memtrim_t *t);

#endif
