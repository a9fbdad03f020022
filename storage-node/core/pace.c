/* pace.c - paced token credit: rate = tokens left / time left, a burst depth, credit carried across grants. */
#include "storage-node/core/pace.h"

#include <math.h>

/* Credit this close to one unit counts as one (rounding of rate x time). */
#define EPS 1e-9

void pace_init(pace_t *p)
{
    *p = (pace_t){.depth = 1, .until = INFINITY};
}

int pace_on(const pace_t *p)
{
    return p->until < INFINITY;
}

int pace_ready(const pace_t *p)
{
    return p->credit >= 1 - EPS;
}

double pace_wake(const pace_t *p)
{
    if (pace_ready(p))
        return p->stamp;
    if (!(p->rate > 0))
        return INFINITY;
    double w = p->stamp + (1 - p->credit) / p->rate;
    return w <= p->until ? w : INFINITY;
}

void pace_refill(pace_t *p, double now)
{
    if (!pace_on(p))
        return;
    double t = now < p->until ? now : p->until;
    double due = INFINITY;
    if (t > p->stamp) {
        due = pace_wake(p);
        p->credit += p->rate * (t - p->stamp);
        if (p->credit > p->depth)
            p->credit = p->depth;
        p->stamp = t;
    }
    /* What was announced as due by now is usable now, and so is a unit
     * whose wake would not move the clock (below its resolution): a
     * caller that waits for pace_wake() never finds "not yet" again.
     * Also when the clock does not move: past `until` (stamp stays
     * there) a take can leave the credit a hair under one unit, whose
     * wake rounds to `until` itself; without this the scheduler's
     * wake_due() found that wake due forever (a spin). */
    if (p->credit < 1 && (due <= t || pace_wake(p) <= t))
        p->credit = 1;
}

void pace_take(pace_t *p)
{
    p->credit -= 1;
}

void pace_take_n(pace_t *p, double n)
{
    p->credit -= n;
}

void pace_forgive(pace_t *p, double now)
{
    pace_refill(p, now);
    if (p->credit < 0)
        p->credit = 0;
}

void pace_grant(pace_t *p, int64_t tokens, double until, double now, double burst_s)
{
    if (!(until < INFINITY)) {
        pace_init(p);
        return;
    }
    double credit = 1; /* a class paced for the first time */
    if (pace_on(p)) {
        pace_refill(p, now);
        credit = p->credit;
    }
    double left = until - now;
    p->rate = tokens > 0 && left > 0 ? (double)tokens / left : 0;
    p->depth = 1 + burst_s * p->rate;
    p->credit = credit < p->depth ? credit : p->depth;
    p->stamp = now;
    p->until = until;
}
