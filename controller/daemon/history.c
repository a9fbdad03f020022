/* history.c - bqos-controller's guarantee history: a fixed ring of one bucket's last period outcomes (see history.h). */
#include "controller/daemon/history.h"

#include <stdlib.h>

struct history {
    history_rec_t rec[HISTORY_PERIODS];
    size_t next;  /* where the next push goes */
    size_t count; /* records held */
};

history_t *history_new(void)
{
    return calloc(1, sizeof(history_t));
}

void history_destroy(history_t **h)
{
    if (!h || !*h)
        return;
    free(*h);
    *h = NULL;
}

void history_push(history_t *h, const history_rec_t *rec)
{
    h->rec[h->next] = *rec;
    h->next = (h->next + 1) % HISTORY_PERIODS;
    if (h->count < HISTORY_PERIODS)
        h->count++;
}

size_t history_count(const history_t *h)
{
    return h ? h->count : 0;
}

const history_rec_t *history_get(const history_t *h, size_t i)
{
    if (!h || i >= h->count)
        return NULL;
    return &h->rec[(h->next + HISTORY_PERIODS - 1 - i) % HISTORY_PERIODS];
}
