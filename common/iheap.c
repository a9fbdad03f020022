/* iheap.c - indexed binary min-heap of ids keyed by a double, ties broken by id. */
#include "common/iheap.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

typedef struct {
    double key;
    int id;
} slot_t;

struct iheap {
    slot_t *a;   /* a[0 .. n-1]: the heap */
    int *pos;    /* pos[id]: its slot, or -1 */
    size_t n, cap;
};

iheap_t *iheap_new(size_t cap)
{
    iheap_t *h = calloc(1, sizeof *h);
    if (!h || iheap_reserve(h, cap ? cap : 1) < 0)
        iheap_destroy(&h);
    return h;
}

void iheap_destroy(iheap_t **hp)
{
    if (!hp || !*hp)
        return;
    free((*hp)->a);
    free((*hp)->pos);
    free(*hp);
    *hp = NULL;
}

int iheap_reserve(iheap_t *h, size_t cap)
{
    if (cap <= h->cap)
        return 0;
    if (cap > (size_t)1 << 30)
        return -ENOMEM;
    slot_t *a = realloc(h->a, cap * sizeof *a);
    if (!a)
        return -ENOMEM;
    h->a = a;
    int *pos = realloc(h->pos, cap * sizeof *pos);
    if (!pos)
        return -ENOMEM;
    h->pos = pos;
    for (size_t i = h->cap; i < cap; i++)
        pos[i] = -1;
    h->cap = cap;
    return 0;
}

static int less(const slot_t *x, const slot_t *y)
{
    return x->key < y->key || (x->key == y->key && x->id < y->id);
}

/* Puts slot value v at index i and records its position. */
static void place(iheap_t *h, size_t i, slot_t v)
{
    h->a[i] = v;
    h->pos[v.id] = (int)i;
}

static void sift_up(iheap_t *h, size_t i)
{
    slot_t v = h->a[i];
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!less(&v, &h->a[p]))
            break;
        place(h, i, h->a[p]);
        i = p;
    }
    place(h, i, v);
}

static void sift_down(iheap_t *h, size_t i)
{
    slot_t v = h->a[i];
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n)
            break;
        if (c + 1 < h->n && less(&h->a[c + 1], &h->a[c]))
            c++;
        if (!less(&h->a[c], &v))
            break;
        place(h, i, h->a[c]);
        i = c;
    }
    place(h, i, v);
}

int iheap_set(iheap_t *h, int id, double key)
{
    if (id < 0 || (size_t)id >= h->cap || isnan(key))
        return -EINVAL;
    int p = h->pos[id];
    if (p < 0) {
        place(h, h->n, (slot_t){key, id});
        sift_up(h, h->n++);
        return 0;
    }
    double old = h->a[p].key;
    h->a[p].key = key;
    if (key < old)
        sift_up(h, (size_t)p);
    else if (key > old)
        sift_down(h, (size_t)p);
    return 0;
}

void iheap_remove(iheap_t *h, int id)
{
    if (id < 0 || (size_t)id >= h->cap || h->pos[id] < 0)
        return;
    size_t i = (size_t)h->pos[id];
    h->pos[id] = -1;
    if (i == --h->n)
        return;
    slot_t last = h->a[h->n];
    place(h, i, last);
    if (i > 0 && less(&last, &h->a[(i - 1) / 2]))
        sift_up(h, i);
    else
        sift_down(h, i);
}

int iheap_contains(const iheap_t *h, int id)
{
    return id >= 0 && (size_t)id < h->cap && h->pos[id] >= 0;
}

int iheap_top(const iheap_t *h, double *key)
{
    if (h->n == 0)
        return -1;
    if (key)
        *key = h->a[0].key;
    return h->a[0].id;
}

void iheap_clear(iheap_t *h)
{
    for (size_t i = 0; i < h->n; i++)
        h->pos[h->a[i].id] = -1;
    h->n = 0;
}

size_t iheap_size(const iheap_t *h)
{
    return h->n;
}
