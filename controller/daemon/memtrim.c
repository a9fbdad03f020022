/* memtrim.c - bqos-controller's free heap given back to the kernel when malloc's free bytes grew by a bound (a burst of big arrays freed), so the resident size follows what is live. */
#include <malloc.h>

#include "common/mono.h"
#include "controller/daemon/memtrim.h"

void memtrim_init(memtrim_t *t, size_t grow, size_t pad, double every, double now)
{
    *t = (memtrim_t){.grow = grow, .pad = pad, .every = every, .next = now + every,
                     .base = (size_t)-1};
}

/* malloc's free bytes in every arena (chunks in its bins and the tops). */
static size_t free_bytes(void)
{
    struct mallinfo2 mi = mallinfo2();
    return mi.fordblks;
}

int memtrim_now(memtrim_t *t)
{
    double t0 = mono_now();
    int r = malloc_trim(t->pad);
    t->last_ms = (mono_now() - t0) * 1000;
    t->trims++;
    t->base = t->last_free = free_bytes();
    return r;
}

int memtrim_tick(memtrim_t *t, double now)
{
    if (now < t->next)
        return 0;
    t->next = now + t->every;
    size_t f = t->last_free = free_bytes();
    if (f < t->base) {
        t->base = f; /* reused: what is freed again counts from here */
        return 0;
    }
    if (f - t->base < t->grow)
        return 0;
    memtrim_now(t);
    return 1;
}
