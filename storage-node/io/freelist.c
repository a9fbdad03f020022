/* freelist.c - a bounded free list of fixed-size blocks (see freelist.h). */
#include "storage-node/io/freelist.h"

#include <stdlib.h>

void freelist_init(freelist_t *fl, size_t size, int max)
{
    fl->head = NULL;
    fl->size = size < sizeof(void *) ? sizeof(void *) : size;
    fl->n = 0;
    fl->max = max < 0 ? 0 : max;
}

void *freelist_get(freelist_t *fl)
{
    void *p = fl->head;
    if (!p)
        return malloc(fl->size);
    fl->head = *(void **)p;
    fl->n--;
    return p;
}

void freelist_put(freelist_t *fl, void *p)
{
    if (!p)
        return;
    if (fl->n >= fl->max) {
        free(p);
        return;
    }
    *(void **)p = fl->head;
    fl->head = p;
    fl->n++;
}

void freelist_fini(freelist_t *fl)
{
    while (fl->head) {
        void *p = fl->head;
        fl->head = *(void **)p;
        free(p);
    }
    fl->n = 0;
}
