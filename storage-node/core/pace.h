/* pace.h - paced token credit for one token class of one bucket: a grant of N tokens until time U becomes usable at N / (U - now) tokens per second, with a burst depth; no clocks (the caller passes the time).
 *
 * A token bucket whose rate is set by each grant: credit accrues at `rate`
 * up to `depth` (1 + burst_s x rate) and stops at the grant's horizon `until`; one IO
 * takes one unit of credit (and one of the caller's tokens, which the
 * caller counts).  Between two grants the rate is constant, so the time at
 * which credit returns (pace_wake()) is exact from any earlier state: a
 * caller may test readiness on credit that was not brought up to date, and
 * it only errs on the side of "not yet".  Across grants the credit carries
 * over (capped at the new depth), so a new grant never adds a burst; the
 * first paced grant of a class starts with one unit.
 *
 * A pace_t is plain data owned by whoever owns the scheduler (one
 * thread).  See docs/scheduler.md, "Paced tokens". */
#ifndef BQOS_PACE_H
#define BQOS_PACE_H

#include <stdint.h>

typedef struct {
    double rate;   /* credit per second (0: none accrues) */
    double depth;  /* most credit held: 1 + burst_s x rate */
    double credit; /* usable units as of `stamp` (fractional) */
    double stamp;  /* time `credit` is for */
    double until;  /* no credit accrues after; INFINITY: not paced */
} pace_t;

/* An unpaced class (until = INFINITY): every token usable at once. */
void pace_init(pace_t *p);

/* Nonzero if p paces (its last grant had a finite horizon). */
int pace_on(const pace_t *p);

/* Applies a grant of `tokens` (the class's whole count for the rest of the
 * horizon) at time `now`: brings the credit up to `now` at the old rate,
 * then sets rate = tokens / (until - now) (0 if tokens <= 0 or the horizon
 * is past) and depth = 1 + burst_s * rate (one IO, plus burst_s of the
 * rate: the "burst tolerance" of GCRA; a dispatcher that is late by up to
 * burst_s loses nothing); the credit is kept, capped at the new depth (one
 * unit if the class was not paced before).  An `until` that is not finite
 * (INFINITY, NaN) makes the class unpaced. */
void pace_grant(pace_t *p, int64_t tokens, double until, double now, double burst_s);

/* Brings the credit up to `now` (no accrual past `until`; a `now` before
 * the last one adds nothing).  Credit that pace_wake() said would be
 * there by `now` is there, whatever the rounding, also when no time is
 * added (past `until`, or at the last refill's time): after a refill the
 * class is ready or its wake is later than `now`. */
void pace_refill(pace_t *p, double now);

/* Nonzero if at least one unit of credit is held (as of the last refill). */
int pace_ready(const pace_t *p);

/* Takes one unit (the caller refilled to the current time first). */
void pace_take(pace_t *p);

/* Takes n units (n >= 1; refilled first, as pace_take()): a request that
 * costs more than the credit held leaves a debt below zero, which the rate
 * pays back before pace_ready() holds again (cost-aware byte credit). */
void pace_take_n(pace_t *p, double n);

/* Brings the credit up to `now` and forgives a debt (credit below zero):
 * for a caller whose new grant already counts the request that made it. */
void pace_forgive(pace_t *p, double now);

/* When the credit reaches one unit: `stamp` if it already has, INFINITY if
 * it never will under this grant (no rate, or not before `until`). */
double pace_wake(const pace_t *p);

#endif
