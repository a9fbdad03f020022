/* estimate.h - demand and capacity estimators for the control loop (no sockets, no clocks: the simulator shares them).
 *
 * Demand: a bucket's demand on a server for the rest of the QoS period is
 * its queue now plus its arrival rate times the intervals left (paper
 * III-D).  A bucket that was backlogged while it had no tokens to spend was
 * throttled, so its arrivals (from closed-loop clients waiting for answers)
 * understate what it wants; its rate is then not allowed to fall below the
 * previous estimate, or its tokens would shrink every interval and the
 * clients would starve.
 *
 * Capacity: Haechi's Adaptive Capacity Estimation (Algorithm 1) applied per
 * redistribution interval.  Start from the profiled IOPS.  A server busy for
 * a good part of the interval (min_busy) has shown what it delivers: its
 * rate while busy is a sample.  A server that completed its estimate's
 * worth in less time than that may be able to do more: add a step (or jump
 * to the rate it reached, if higher).  Samples above a floor (a sample
 * below is a light-load artefact) enter a window of the last M samples and
 * the estimate moves to their mean.  (Our nodes are work conserving, so
 * unlike Haechi's token-capped clients a busy server's rate shows its
 * capacity without probing; stepping a server that merely did its
 * estimate's worth pushed the estimate past its real rate, where pShift
 * places tokens the server cannot serve.)
 *
 * Steadiness (issue 14): one update moves the estimate by at most
 * `max_change` of its value, so a noisy sample or a step cannot swing it.
 * On a steady load the estimate converges to the server's delivered rate
 * while busy (the mean of the window); after a change of capacity it
 * reaches the new rate once the window holds only new samples (M sampled
 * intervals) or, for a change larger than the clamp, after
 * log(new/old) / log(1 +- max_change) updates, whichever is later.
 *
 * Conservative capacity, for placing reservations: Haechi's floor, the
 * window's mean minus `k_sd` standard deviations of its samples, never
 * above the estimate and never below (1 - `max_margin`) of it.  Before the
 * window holds two samples the estimate is only a claim (the profile, or
 * steps): the conservative capacity is then (1 - `cold_margin`) of it.
 *
 * Delivered cap (issue 25): where the most the server delivered in its
 * last `recent` measured intervals (a busy interval's rate while busy, a
 * stepping interval's completions per second) is more than
 * ESTIMATE_RECENT_DROP below the conservative capacity, the conservative
 * capacity is that rate, whatever `max_margin` says.  After a step down
 * the window's mean (and so the estimate) needs up to `window` samples to
 * follow; the delivered cap follows after `recent`.  Smaller dips are
 * sampling noise, which the window's mean already averages.
 *
 * Confined capacity (issue 25), for a server that a bucket with nowhere
 * else to go depends on: the conservative capacity, or the last interval's
 * delivered rate where that interval was a sample of a server busy through
 * it (at least ESTIMATE_FAST_BUSY of the interval) and its rate is more
 * than ESTIMATE_FAST_DROP below the conservative capacity.  So a step down
 * is followed within one interval where R placed beyond the server's rate
 * cannot move elsewhere; a single dip of sampling noise (a few percent) or
 * an interval the server was partly idle does not count, and the figure is
 * back at the conservative capacity as soon as an interval is not a drop
 * (it holds no history: one interval's sample, not a trend).  On a steady
 * server it converges to the conservative capacity, as that does.  Off
 * with the delivered cap (`recent` 0). */
#ifndef BQOS_ESTIMATE_H
#define BQOS_ESTIMATE_H

#include <math.h>
#include <stdint.h>

/* Largest demand the estimator returns (fits every later sum). */
#define ESTIMATE_DEMAND_MAX (INT64_C(1) << 50)

/* State of one (bucket, server) demand estimate; zero-initialise. */
typedef struct {
    double rate; /* arrivals per interval used last time */
} estimate_demand_t;

/* Estimates the demand (IOs) for the rest of the period and updates *st.
 * `queued`: requests waiting now; `arrivals`: arrivals in the past interval;
 * `throttled`: nonzero if the bucket had no token it could spend (R and L
 * both exhausted) while it was backlogged; `intervals_left` (> 0, may be
 * fractional): intervals until the period ends, counting the current one.
 * Returns a value in 0..ESTIMATE_DEMAND_MAX.  Inline: the controller calls
 * it once per active pair and round. */
static inline int64_t estimate_demand(estimate_demand_t *st, uint64_t queued, uint64_t arrivals,
                                      int throttled, double intervals_left)
{
    double rate = (double)arrivals;
    /* Backlogged and throttled: arrivals were held back by us, not by the
     * client; keep the previous rate so the estimate cannot collapse. */
    if (throttled && queued > 0 && st->rate > rate)
        rate = st->rate;
    st->rate = rate;
    if (!(intervals_left > 0))
        intervals_left = 0;
    double d = (double)queued + rate * intervals_left;
    if (!(d < (double)ESTIMATE_DEMAND_MAX))
        return ESTIMATE_DEMAND_MAX;
    /* llround(d) for 0 <= d < 2^50, without the libm call (once per pair
     * and round in the controller): d - t is exact there. */
    int64_t t = (int64_t)d;
    return t + (d - (double)t >= 0.5);
}

/* Capacity estimator settings; rates in IOs per second. */
typedef struct {
    double profile;    /* starting estimate (profiled capacity), > 0 */
    double step;       /* added when the server was saturated at its estimate */
    double floor;      /* busy-rate samples below this are ignored */
    double saturated;  /* completions >= saturated * estimate * interval
                          counts as "at its estimate" (e.g. 0.95) */
    double min_busy;   /* busy >= min_busy * interval: a sample; below, a
                          step if it did its estimate's worth (0..1) */
    int window;        /* samples averaged, 1..ESTIMATE_WINDOW_MAX */
    double max_change; /* largest relative move of the estimate per update
                          (0..1; 0: no clamp, the plain Haechi mean) */
    double k_sd;       /* conservative = mean - k_sd standard deviations */
    double cold_margin;/* conservative = (1 - cold_margin) x estimate while
                          fewer than two samples (0..1) */
    double max_margin; /* conservative >= (1 - max_margin) x estimate (0..1) */
    double max_factor; /* estimate <= max_factor x profile (0: no bound):
                          reports cannot talk it up without end */
    int recent;        /* conservative = the most delivered in the last
                          `recent` measured intervals where that is lower
                          (by ESTIMATE_RECENT_DROP), 0..ESTIMATE_WINDOW_MAX
                          (0: no such cap) */
} estimate_cap_cfg_t;

#define ESTIMATE_WINDOW_MAX 32

/* The delivered cap applies when the recent samples are this far (a
 * fraction) below the conservative capacity. */
#define ESTIMATE_RECENT_DROP 0.05

/* The confined capacity takes the last interval's rate when it is this far
 * (a fraction) below the conservative capacity, the server busy for at
 * least ESTIMATE_FAST_BUSY of the interval.  Steps the simulator models
 * are 30-50% down; interval-to-interval noise of a loaded server is a few
 * percent (docs/decisions.md, "A step down followed in one interval"). */
#define ESTIMATE_FAST_DROP 0.15
#define ESTIMATE_FAST_BUSY 0.9

/* Returns settings derived from a profile: step 5%, floor 25% of the
 * profile, saturated 0.95, min_busy 0.5, window 8,
 * max_change 0.1, k_sd 0, cold_margin 0.2, max_margin 0.5, max_factor 4,
 * recent 3. */
estimate_cap_cfg_t estimate_cap_defaults(double profile);

/* One server's capacity estimator: a plain value (no allocation). */
typedef struct {
    estimate_cap_cfg_t cfg;
    double estimate;    /* IOs per second */
    double conservative;/* IOs per second, <= estimate (see above) */
    double confined;    /* IOs per second, <= conservative: the confined
                           capacity (see above) */
    double fast;        /* the last interval's rate if it was a busy
                           sample (ESTIMATE_FAST_BUSY), else 0 */
    double hist[ESTIMATE_WINDOW_MAX];
    int nhist, pos;
    double rec[ESTIMATE_WINDOW_MAX]; /* delivered rates, last `recent` */
    int nrec, rpos;
    uint64_t steps, samples, ignored; /* what the updates did, for stats */
} estimate_cap_t;

/* Initialises *c from *cfg (bad values are clamped: profile >= 1, window
 * and recent in 1..ESTIMATE_WINDOW_MAX (recent: 0 too), fractions in 0..1,
 * k_sd >= 0). */
void estimate_cap_init(estimate_cap_t *c, const estimate_cap_cfg_t *cfg);

/* Feeds one interval: `completions` IOs finished and `busy_s` seconds with
 * work at the backend during an interval of `interval_s` seconds.  Returns
 * the new estimate (IOs per second); c->conservative and c->confined are
 * updated too. */
double estimate_cap_update(estimate_cap_t *c, uint64_t completions, double busy_s,
                           double interval_s);

/* Returns nonzero if `now` differs from `before` by more than `rel` of the
 * larger magnitude and by more than `abs_floor` (noise on small counts). */
static inline int estimate_changed(double before, double now, double rel, double abs_floor)
{
    double diff = fabs(now - before);
    double mag = fmax(fabs(before), fabs(now));
    return diff > abs_floor && diff > rel * mag;
}

#endif
