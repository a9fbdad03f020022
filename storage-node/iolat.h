/* iolat.h - per-bucket IO timing of a node for its metrics: a fixed-bucket latency histogram (arrival at the node to the backend's completion) and the time IOs waited before the backend (queue and same-key order), fed by the fronts.
 *
 * A front stamps each IO (iolat_ts_t, inside its request: no allocation per
 * IO) when it arrives and when it goes to the backend, then calls
 * iolat_done() on its completion.  Every call takes the gate's iolat_t
 * (gate_iolat(); NULL when metrics are off: then nothing reads the clock
 * and nothing is counted).  Arrays grow when a bucket index is first seen,
 * never per IO.  An iolat_t belongs to the node's loop thread. */
#ifndef BQOS_IOLAT_H
#define BQOS_IOLAT_H

#include <stddef.h>
#include <stdint.h>

/* Upper bounds of the histogram's buckets, seconds (then +Inf). */
#define IOLAT_NBOUNDS 16
extern const double iolat_bounds[IOLAT_NBOUNDS];

typedef struct iolat iolat_t;

/* One IO's times (mono_now() seconds), kept in the front's request. */
typedef struct {
    double arrival, dispatch;
} iolat_ts_t;

/* Per-bucket figures, cumulative. */
typedef struct {
    uint64_t counts[IOLAT_NBOUNDS + 1]; /* per histogram bucket, not cumulative */
    double sum;                         /* seconds, arrival to completion */
    double wait;                        /* seconds, arrival to dispatch */
} iolat_bucket_t;

/* Returns an empty recorder (caller owns it) or NULL when out of memory. */
iolat_t *iolat_new(void);

/* Frees *lp, sets it to NULL.  Accepts NULL. */
void iolat_destroy(iolat_t **lp);

/* mono_now() when l is non-NULL, else 0 (no clock read). */
double iolat_now(const iolat_t *l);

/* An IO of scheduler bucket `bucket` completed now: counts its latency
 * (now - ts->arrival) and wait (ts->dispatch - ts->arrival).  Nothing when
 * l is NULL, bucket < 0, or out of memory growing to a new bucket. */
void iolat_done(iolat_t *l, int bucket, const iolat_ts_t *ts);

/* Bucket b's figures, or NULL if none of its IOs (nor any of a higher
 * index) completed yet.  Valid until the next iolat_done(). */
const iolat_bucket_t *iolat_bucket(const iolat_t *l, int b);

#endif
