/* sparse.c - what a sparse report leaves out: the prediction both ends of the protocol compute for a bucket not re-sent, and the node's test of whether its counters are still near it. */
#include "common/proto/internal.h"

uint64_t proto_predict_served(uint64_t served, uint64_t bperiod, uint32_t binterval,
                              uint64_t period, uint32_t interval)
{
    if (served > PROTO_MAX_COUNT)
        served = PROTO_MAX_COUNT;
    uint64_t rate = binterval ? served / binterval : 0;
    uint64_t base, steps;
    if (period == bperiod) {
        base = served;
        steps = interval > binterval ? interval - binterval : 0;
    } else if (period > bperiod) {
        base = 0; /* the counters restarted */
        steps = interval;
    } else {
        return served; /* an older period: what was said */
    }
    /* rate > (MAX - base) / steps, without a second division (once per
     * carried pair and round in the controller): the same test in
     * integers, the product's overflow included. */
    uint64_t add;
    if (__builtin_mul_overflow(rate, steps, &add) || add > PROTO_MAX_COUNT - base)
        return PROTO_MAX_COUNT;
    return base + add;
}

/* Nonzero if a and b differ by at most max(abs, rel x the larger). */
static int near(uint64_t a, uint64_t b, double rel, uint64_t abs)
{
    uint64_t d = a > b ? a - b : b - a, hi = a > b ? a : b;
    return d <= abs || (double)d <= rel * (double)hi;
}

int proto_pred_near(const proto_pred_t *pred, const proto_pred_t *now, double rel_demand,
                    double rel_served, uint64_t abs)
{
    return (pred->throttled != 0) == (now->throttled != 0) &&
           near(pred->queued, now->queued, rel_demand, abs) &&
           near(pred->arrivals, now->arrivals, rel_demand, abs) &&
           near(pred->served, now->served, rel_served, abs);
}
