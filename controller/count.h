/* count.h - saturating counts of the controller core: sums of served, queued, demand and tokens that never wrap.
 *
 * Header only; every function is pure. */
#ifndef BQOS_COUNT_H
#define BQOS_COUNT_H

#include <stdint.h>

/* Counts summed over nodes or buckets (served, queued, demand, tokens)
 * saturate at CTRL_COUNT_MAX = 2^53: a report carries at most that per
 * count (proto check), a bucket gets at most that many tokens per period
 * (ctrl_set_buckets), so a saturated sum still says "more than any limit",
 * never wraps, and stays exact as a double.  Inputs are >= 0. */
#define CTRL_COUNT_MAX (INT64_C(1) << 53)

/* a + b, at most CTRL_COUNT_MAX. */
static inline int64_t count_add(int64_t a, int64_t b)
{
    int64_t s;
    if (__builtin_add_overflow(a, b, &s) || s > CTRL_COUNT_MAX)
        return CTRL_COUNT_MAX;
    return s;
}

/* The same for unsigned counts. */
static inline uint64_t count_uadd(uint64_t a, uint64_t b)
{
    uint64_t s;
    if (__builtin_add_overflow(a, b, &s) || s > (uint64_t)CTRL_COUNT_MAX)
        return (uint64_t)CTRL_COUNT_MAX;
    return s;
}

#endif
