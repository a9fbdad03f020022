/* sched_bytes.h - the scheduler's unit accounts (cost-aware tokens, issue 15): a bucket's second token account, in units of work, with R and L counts, debts, and paced credit through pace.h (private to sched.c; prefix sched__units_).
 *
 * A sched_units_t is plain data inside the scheduler, owned by the thread
 * that owns it.  Every function is O(1) and never allocates.
 *
 * Pacing: each class's units are paced like the IO tokens (pace.h: rate =
 * units / time left, depth 1 + burst_s x rate).  A class is usable while
 * it holds a unit token and (if it paces) one unit of credit; a request
 * takes its whole cost from both, so a request larger than what is left
 * drives them negative: the count's debt is paid out of later tokens, the
 * credit's by the rate before the class is usable again.  A grant re-aims
 * the rate at the count left, which already holds the request, so it starts
 * the credit at zero at least: a debt is paid once, not twice. */
#ifndef BQOS_SCHED_BYTES_H
#define BQOS_SCHED_BYTES_H

#include <stdint.h>

#include "storage-node/core/pace.h"

typedef struct {
    int64_t r, l;       /* unit tokens left (< 0: a debt); l may be
                           SCHED_UNLIMITED */
    int64_t carry;      /* debt carried from the last period (<= 0),
                           taken off every grant of this one */
    uint64_t arrivals, served; /* units, this period */
    pace_t pr, pl;      /* paced credit of each class, in units */
    int on;
} sched_units_t;

/* What sched__units_usable() found. */
enum {
    SCHED__U_ANY = 1, /* a class may pay: a token, and credit if it paces */
    SCHED__U_R = 2    /* the R class may pay */
};

/* Whether a class holding `count` tokens may pay: a token, and one unit
 * of credit (as of the last refill) if `pacing` and it paces; an
 * unlimited count always may.  For the IO classes too (sched.c). */
int sched__class_may(const pace_t *p, int64_t count, int pacing);

/* An account that is off: no counts, L unlimited, unpaced. */
void sched__units_reset(sched_units_t *y);

/* Turns the account on with counts r (>= 0) and l for the rest of the
 * period, last period's debt taken off (R first; what R cannot pay stays
 * owed by L, or by R if L has no limit), and paces each class from `now`
 * to `until` (INFINITY: unpaced; an unlimited L never paces) with depth
 * burst_s. */
void sched__units_grant(sched_units_t *y, int64_t r, int64_t l, double until, double now,
                        double burst_s);

/* Which classes may pay now (SCHED__U_* bits), credit as of the last
 * refill when `pacing` (else tokens only).  While pacing, *wake becomes
 * the earlier of itself and the time credit returns to a class that holds
 * tokens but no credit. */
int sched__units_usable(const sched_units_t *y, int pacing, double *wake);

/* Brings both classes' credit up to `now`. */
void sched__units_refill(sched_units_t *y, double now);

/* Takes `units` (counted as served): from R if `r_first` and R may pay,
 * else from L if it may (an unlimited L takes nothing), else from R if it
 * may, else from whichever still has a count (L if limited); the class's
 * credit pays too when `pacing`, refilled to `now` first (now < 0: not
 * refilled, a charge made after dispatch).  Count and credit may go
 * negative. */
void sched__units_take(sched_units_t *y, int r_first, uint64_t units, int pacing, double now);

/* A period ends: what is still owed becomes the carry (it replaces the
 * carry of the period that ends, which the counts already paid); the
 * period's counters restart. */
void sched__units_period(sched_units_t *y);

/* Why a queued bucket may not be served in this dimension (y may hold
 * the IO counts and credit too: the same shape): 0 if a class may pay,
 * `tokens_flag` if neither has a token, tokens_flag << 1 if tokens wait
 * for credit (SCHED_HELD_* of sched.h). */
int sched__units_held(const sched_units_t *y, int pacing, int tokens_flag);

/* When a class's credit returns (pace_wake()), or NAN if it does not pace. */
double sched__credit_wake(const pace_t *p);

#endif
