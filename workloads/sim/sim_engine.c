/* sim_engine.c - binary min-heap of (time, id) events for bqos-sim. */
#include "workloads/sim/sim_engine.h"

#include <errno.h>
#include <stdlib.h>

struct sim_heap {
    sim_event_t *ev;
    size_t n, cap;
};

static inline int before(const sim_event_t *a, const sim_event_t *b)
{
    return a->t < b->t || (a->t == b->t && a->id < b->id);
}

sim_heap_t *sim_heap_new(size_t hint)
{
    sim_heap_t *h = calloc(1, sizeof(*h));
    if (!h)
        return NULL;
    h->cap = hint < 16 ? 16 : hint;
    h->ev = malloc(h->cap * sizeof(*h->ev));
    if (!h->ev) {
        free(h);
        return NULL;
    }
    return h;
}

void sim_heap_destroy(sim_heap_t **hp)
{
    if (!hp || !*hp)
        return;
    free((*hp)->ev);
    free(*hp);
    *hp = NULL;
}

size_t sim_heap_size(const sim_heap_t *h)
{
    return h->n;
}

void sim_heap_clear(sim_heap_t *h)
{
    h->n = 0;
}

static void sift_down(sim_heap_t *h, size_t i)
{
    sim_event_t x = h->ev[i];
    size_t n = h->n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && before(&h->ev[c + 1], &h->ev[c]))
            c++;
        if (!before(&h->ev[c], &x))
            break;
        h->ev[i] = h->ev[c];
        i = c;
    }
    h->ev[i] = x;
}

int sim_heap_push(sim_heap_t *h, double t, uint32_t id)
{
    if (h->n == h->cap) {
        size_t cap = h->cap * 2;
        sim_event_t *ev = realloc(h->ev, cap * sizeof(*ev));
        if (!ev)
            return -ENOMEM;
        h->ev = ev;
        h->cap = cap;
    }
    sim_event_t x = {t, id};
    size_t i = h->n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!before(&x, &h->ev[p]))
            break;
        h->ev[i] = h->ev[p];
        i = p;
    }
    h->ev[i] = x;
    return 0;
}

const sim_event_t *sim_heap_top(const sim_heap_t *h)
{
    return h->n ? &h->ev[0] : NULL;
}

int sim_heap_pop(sim_heap_t *h, sim_event_t *out)
{
    if (!h->n)
        return -ENOENT;
    if (out)
        *out = h->ev[0];
    h->ev[0] = h->ev[--h->n];
    if (h->n)
        sift_down(h, 0);
    return 0;
}

int sim_heap_retime_top(sim_heap_t *h, double t)
{
    if (!h->n)
        return -ENOENT;
    h->ev[0].t = t;
    sift_down(h, 0);
    return 0;
}
