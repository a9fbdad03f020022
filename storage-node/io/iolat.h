/* iolat.h - per-bucket IO accounting of a node for its metrics: a fixed-bucket latency histogram (arrival at the node to the backend's completion), the time IOs waited before the backend (queue and same-key order), the bytes served by class and the requests refused, fed by the fronts.
 *
 * A front stamps each IO (iolat_ts_t, inside its request: no allocation per
 * IO) when it arrives and when it goes to the backend, then calls
 * iolat_done() on its completion, or iolat_refused() when it answers a
 * request with an error without the backend.  Every call takes the gate's
 * iolat_t (gate_iolat(); NULL when metrics are off: then nothing reads the
 * clock and nothing is counted).  Arrays grow when a bucket index is first
 * seen, never per IO.  An iolat_t belongs to the node's loop thread. */
#ifndef BQOS_IOLAT_H
#define BQOS_IOLAT_H

#include <stddef.h>
#include <stdint.h>

#include "storage-node/core/sched.h"

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
    uint64_t bytes[3];                  /* served, by sched_class_t */
    uint64_t refused;                   /* answered with an error, unserved */
} iolat_bucket_t;

/* Returns an empty recorder (caller owns it) or NULL when out of memory. */
iolat_t *iolat_new(void);

/* Frees *lp, sets it to NULL.  Accepts NULL. */
void iolat_destroy(iolat_t **lp);

/* mono_now() when l is non-NULL, else 0 (no clock read). */
double iolat_now(const iolat_t *l);

/* IO `it` (borrowed; dispatched by the scheduler) completed now, moving
 * `bytes` of data (0 for one that failed or carries none): counts its
 * latency (now - ts->arrival) and wait (ts->dispatch - ts->arrival) on the
 * bucket it was enqueued for (it->origin), and its bytes in its class
 * (it->cls) there and, when routed, on the bucket whose queue it waited
 * in (it->bucket), as the scheduler counts IOs served.  Nothing when l is
 * NULL, a bucket is < 0, or out of memory growing to a new bucket. */
void iolat_done(iolat_t *l, const sched_item_t *it, const iolat_ts_t *ts, uint64_t bytes);

/* `bucket` of a request refused because it names no bucket of the node's
 * table and the table has no `default` (fail closed, gate_table()). */
#define IOLAT_UNCONFIGURED (-4096) /* below every -errno */

/* A request of scheduler bucket `bucket` was answered with an error
 * without reaching the backend (out of memory, shutting down, refused by
 * the protocol's checks); bucket IOLAT_UNCONFIGURED counts in
 * iolat_refused_unconfigured(), any other bucket < 0 (no bucket:
 * --default reject) in iolat_refused_unknown().  Nothing when l is NULL
 * or out of memory. */
void iolat_refused(iolat_t *l, int bucket);

/* Requests refused because they named no bucket (--default-bucket reject),
 * and because the table has no bucket for them nor a `default`. */
uint64_t iolat_refused_unknown(const iolat_t *l);
uint64_t iolat_refused_unconfigured(const iolat_t *l);

/* Bucket b's figures, or NULL if none of its IOs (nor any of a higher
 * index) completed yet.  Valid until the next iolat_done(). */
const iolat_bucket_t *iolat_bucket(const iolat_t *l, int b);

#endif
