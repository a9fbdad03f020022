/* parked.c - the changes waiting for their journal line to be durable: a ring of PARKED_MAX slots in ticket order. */
#include "controller/daemon/parked.h"

#include <stdlib.h>

/* Owned by the controller's loop thread. */
struct parked {
    parked_change_t slot[PARKED_MAX];
    size_t head, count; /* the oldest waiting change; how many wait */
};

parked_t *parked_new(void)
{
    return calloc(1, sizeof(parked_t));
}

void parked_destroy(parked_t **pp)
{
    if (!pp || !*pp)
        return;
    parked_change_t *c;
    while ((c = parked_take_oldest(*pp)))
        free(c->text);
    free(*pp);
    *pp = NULL;
}

size_t parked_count(const parked_t *p)
{
    return p ? p->count : 0;
}

parked_change_t *parked_slot(parked_t *p)
{
    if (p->count == PARKED_MAX)
        return NULL;
    parked_change_t *c = &p->slot[(p->head + p->count) % PARKED_MAX];
    *c = (parked_change_t){.to.fd = -1};
    return c;
}

void parked_add(parked_t *p)
{
    if (p->count < PARKED_MAX)
        p->count++;
}

parked_change_t *parked_newest(parked_t *p)
{
    return p && p->count ? &p->slot[(p->head + p->count - 1) % PARKED_MAX] : NULL;
}

parked_change_t *parked_take_oldest(parked_t *p)
{
    if (!p || !p->count)
        return NULL;
    parked_change_t *c = &p->slot[p->head];
    p->head = (p->head + 1) % PARKED_MAX;
    p->count--;
    return c;
}

parked_change_t *parked_take_durable(parked_t *p, uint64_t durable)
{
    if (!p || !p->count || p->slot[p->head].ticket > durable)
        return NULL;
    return parked_take_oldest(p);
}

parked_change_t *parked_take_failed(parked_t *p, uint64_t from, uint64_t to)
{
    parked_change_t *c = parked_newest(p);
    if (!c || c->ticket < from || c->ticket > to)
        return NULL;
    p->count--;
    return c;
}
