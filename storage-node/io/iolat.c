/* iolat.c - per-bucket IO accounting of a node: latency histogram, wait time, bytes by class, refusals (see iolat.h). */
#include "storage-node/io/iolat.h"

#include <stdlib.h>

#include "common/growarr.h"
#include "common/mono.h"
#include "common/promtext.h"

/* 50 us (a memcached hit on loopback) to 5 s (a client's timeout). */
const double iolat_bounds[IOLAT_NBOUNDS] = {50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3,
                                            5e-3,  10e-3,  25e-3,  50e-3,  0.1,  0.25,
                                            0.5,   1,      2.5,    5};

struct iolat {
    iolat_bucket_t *b; /* [cap], zeroed beyond the buckets seen */
    int cap;
    uint64_t refused_unknown, refused_unconfigured;
};

iolat_t *iolat_new(void)
{
    return calloc(1, sizeof(iolat_t));
}

void iolat_destroy(iolat_t **lp)
{
    if (!lp || !*lp)
        return;
    free((*lp)->b);
    free(*lp);
    *lp = NULL;
}

double iolat_now(const iolat_t *l)
{
    return l ? mono_now() : 0;
}

/* Bucket b's figures, the array grown to hold it; NULL when b < 0 or out
 * of memory. */
static iolat_bucket_t *slot(iolat_t *l, int b)
{
    void *arr = l->b;
    if (b < 0 || growarr(&arr, &l->cap, b + 1, sizeof *l->b) < 0) /* a new bucket */
        return NULL;
    l->b = arr;
    return &l->b[b];
}

void iolat_done(iolat_t *l, const sched_item_t *it, const iolat_ts_t *ts, uint64_t bytes)
{
    iolat_bucket_t *b;
    if (!l || !(b = slot(l, it->origin)))
        return;
    double lat = mono_now() - ts->arrival;
    b->counts[promtext_bucket(iolat_bounds, IOLAT_NBOUNDS, lat)]++;
    b->sum += lat;
    b->wait += ts->dispatch - ts->arrival;
    int c = it->cls >= 0 && it->cls < 3 ? it->cls : SCHED_CLASS_O;
    b->bytes[c] += bytes;
    if (it->bucket != it->origin && (b = slot(l, it->bucket)) != NULL)
        b->bytes[c] += bytes; /* routed: its queue's bucket counts it too */
}

void iolat_refused(iolat_t *l, int bucket)
{
    iolat_bucket_t *b;
    if (!l)
        return;
    if (bucket == IOLAT_UNCONFIGURED)
        l->refused_unconfigured++;
    else if (bucket < 0)
        l->refused_unknown++;
    else if ((b = slot(l, bucket)) != NULL)
        b->refused++;
}

uint64_t iolat_refused_unknown(const iolat_t *l)
{
    return l ? l->refused_unknown : 0;
}

uint64_t iolat_refused_unconfigured(const iolat_t *l)
{
    return l ? l->refused_unconfigured : 0;
}

const iolat_bucket_t *iolat_bucket(const iolat_t *l, int b)
{
    if (!l || b < 0 || b >= l->cap)
        return NULL;
    return &l->b[b];
}
