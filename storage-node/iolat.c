/* iolat.c - per-bucket IO timing of a node: latency histogram and wait time (see iolat.h). */
#include "storage-node/iolat.h"

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

void iolat_done(iolat_t *l, int bucket, const iolat_ts_t *ts)
{
    if (!l || bucket < 0)
        return;
    void *arr = l->b;
    if (growarr(&arr, &l->cap, bucket + 1, sizeof *l->b) < 0) /* a new bucket */
        return;
    l->b = arr;
    double lat = mono_now() - ts->arrival;
    iolat_bucket_t *b = &l->b[bucket];
    b->counts[promtext_bucket(iolat_bounds, IOLAT_NBOUNDS, lat)]++;
    b->sum += lat;
    b->wait += ts->dispatch - ts->arrival;
}

const iolat_bucket_t *iolat_bucket(const iolat_t *l, int b)
{
    if (!l || b < 0 || b >= l->cap)
        return NULL;
    return &l->b[b];
}
