/* sched_bytes.c - the scheduler's unit accounts: counts with debts, carried across periods, each class paced through pace.h (see sched_bytes.h). */
#include "storage-node/core/sched_bytes.h"

#include <math.h>

#include "storage-node/core/sched.h"

void sched__units_reset(sched_units_t *y)
{
    *y = (sched_units_t){.l = SCHED_UNLIMITED};
    pace_init(&y->pr);
    pace_init(&y->pl);
}

/* A new grant of a paced class forgives the debt a large request left (its
 * count having paid it: pace_forgive()). */
static void grant_class(pace_t *p, int64_t n, double until, double now, double burst_s)
{
    if (pace_on(p) && until < INFINITY)
        pace_forgive(p, now);
    pace_grant(p, n, until, now, burst_s);
}

void sched__units_grant(sched_units_t *y, int64_t r, int64_t l, double until, double now,
                        double burst_s)
{
    /* Last period's debt comes off every grant of this one (the grants do
     * not know of it), R first; what R cannot pay stays owed by L (or by R
     * if L has no limit). */
    int64_t d = y->carry;
    if (d < 0 && r > 0) {
        int64_t pay = r < -d ? r : -d;
        r -= pay;
        d += pay;
    }
    if (d < 0) {
        if (l != SCHED_UNLIMITED)
            l += d;
        else
            r += d;
    }
    y->on = 1;
    y->r = r;
    y->l = l;
    grant_class(&y->pr, r, until, now, burst_s);
    grant_class(&y->pl, l, l == SCHED_UNLIMITED ? INFINITY : until, now, burst_s);
}

int sched__class_may(const pace_t *p, int64_t count, int pacing)
{
    if (count == SCHED_UNLIMITED)
        return 1;
    return count > 0 && (!pacing || !pace_on(p) || pace_ready(p));
}

/* While pacing, a class that holds tokens but no credit: when it returns. */
static void held(const pace_t *p, int64_t count, int pacing, double *wake)
{
    if (pacing && wake && count > 0 && count != SCHED_UNLIMITED && pace_on(p) && !pace_ready(p)) {
        double w = pace_wake(p);
        if (w < *wake)
            *wake = w;
    }
}

int sched__units_usable(const sched_units_t *y, int pacing, double *wake)
{
    held(&y->pr, y->r, pacing, wake);
    held(&y->pl, y->l, pacing, wake);
    int r = sched__class_may(&y->pr, y->r, pacing), l = sched__class_may(&y->pl, y->l, pacing);
    return (r ? SCHED__U_R | SCHED__U_ANY : 0) | (l ? SCHED__U_ANY : 0);
}

void sched__units_refill(sched_units_t *y, double now)
{
    pace_refill(&y->pr, now);
    pace_refill(&y->pl, now);
}

/* Takes u units from one class's count and, when it paces, its credit. */
static void pay(pace_t *p, int64_t *count, int64_t u, int pacing, double now)
{
    *count -= u;
    if (pacing && pace_on(p)) {
        if (now >= 0)
            pace_refill(p, now);
        pace_take_n(p, u);
    }
}

void sched__units_take(sched_units_t *y, int r_first, uint64_t units, int pacing, double now)
{
    int64_t u = units > (uint64_t)INT64_MAX / 2 ? INT64_MAX / 2 : (int64_t)units;
    y->served += units;
    int r_ok = sched__class_may(&y->pr, y->r, pacing);
    int l_ok = sched__class_may(&y->pl, y->l, pacing);
    if ((r_first && r_ok) || (!l_ok && (r_ok || y->r > 0)))
        pay(&y->pr, &y->r, u, pacing, now);
    else if (y->l != SCHED_UNLIMITED)
        pay(&y->pl, &y->l, u, pacing, now);
}

void sched__units_period(sched_units_t *y)
{
    y->arrivals = y->served = 0;
    if (y->on) /* a debt still owed is paid out of the next period */
        y->carry = (y->r < 0 ? y->r : 0) + (y->l < 0 && y->l != SCHED_UNLIMITED ? y->l : 0);
}

double sched__credit_wake(const pace_t *p)
{
    return pace_on(p) ? pace_wake(p) : NAN;
}

int sched__units_held(const sched_units_t *y, int pacing, int tokens_flag)
{
    if (sched__class_may(&y->pr, y->r, pacing) || sched__class_may(&y->pl, y->l, pacing))
        return 0;
    return y->r > 0 || y->l > 0 ? tokens_flag << 1 : tokens_flag;
}

const char *sched_held_reason(int i)
{
    static const char *const name[SCHED_HELD_NREASONS] = {"io_tokens", "io_credit",
                                                          "byte_tokens", "byte_credit"};
    return i >= 0 && i < SCHED_HELD_NREASONS ? name[i] : NULL;
}
