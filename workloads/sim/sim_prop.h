/* sim_prop.h - the QoS property test's random scenarios and its checker: which bucket-periods could have had their reservation, and did they.
 *
 * sim_prop_scenario() draws a scenario (bqos-load's JSON, so that a seed
 * that fails can be dumped and run again with bqos-sim --scenario) of the
 * kind issue 25 asks for: 3-16 servers, 4-64 buckets on 1-4 servers each
 * with uneven overlap (hot servers), skewed reservations up to 75-80% of
 * what the servers deliver, a bounded number of requests in flight per
 * bucket and server behind a network round trip, unlimited buckets with a
 * small reservation that are hungry for spare capacity, limits below
 * demand, buckets whose demand moves to other servers, and one server that
 * slows down for a few periods; the backend is the node's (a FIFO behind
 * the adaptive window, lognormal service times).
 *
 * sim_prop_check() judges a run: a bucket-period is judged when the
 * period's reservations fit into what the servers delivered in it
 * (max-flow: buckets to the servers they were on, servers' completions as
 * capacities), the bucket stayed on the same servers through it, and its
 * concurrency allows its reservation within issue 25's guarantee (sum over
 * its servers of K / the unloaded round trip, rtt + one IO's service time,
 * >= 2 x R: K >= 2 x share x RTT0 at each server; those between 1 and 2 x R
 * are counted apart, not judged).  A bucket that moved in mid-period counts
 * at each set of servers for the time it was there.  Limits are
 * checked on every bucket-period with a limit and on the 1 s windows. */
#ifndef BQOS_SIM_PROP_H
#define BQOS_SIM_PROP_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "workloads/sim/sim_model.h"
#include "workloads/sim/sim_run.h"

/* Returns the scenario JSON of random seed `seed` (caller owns it, free()),
 * or NULL if out of memory.  The same seed gives the same text. */
char *sim_prop_scenario(uint64_t seed);

/* What sim_prop_check() found in one run. */
typedef struct {
    size_t periods;        /* measured periods */
    size_t fit;            /* ... of which the reservations fit */
    size_t judged;         /* judged bucket-periods */
    size_t met99;          /* ... served >= 99% of R */
    size_t below90;        /* ... served < 90% of R */
    double worst;          /* smallest served / R over judged (1 if none) */
    int worst_bucket, worst_period;   /* where (-1 if none) */
    size_t l_periods;      /* bucket-periods with a limit */
    size_t l_over;         /* ... served > 1.01 x L x T */
    double l_worst;        /* largest served / (L x T) per period (0 if none) */
    double l_win_worst;    /* largest 1 s window / L (the run's report figure) */
    size_t short_judged;   /* bucket-periods that would be judged but whose
                              requests in flight allow only 1-2 x R at the
                              unloaded round trip (below the guarantee) */
    size_t short_met99;    /* ... served >= 99% of R */
} sim_prop_verdict_t;

/* Judges result `r` of a run over model `m` (read-only) into *v.  Returns
 * 0 or -ENOMEM. */
int sim_prop_check(const sim_model_t *m, const sim_result_t *r, sim_prop_verdict_t *v);

/* sim_prop_check(), and one CSV line per judged bucket-period to `log`
 * (if not NULL): seed,period,bucket,ratio,concurrency (what its
 * requests in flight allow / R),servers,server (if one, else -1),slow (one
 * of its servers below full speed),step (a speed change this or last
 * period),set (its R changed this period),moved (it moved last period),
 * R,limited,utilisation (its servers' completions / their speed x C). */
int sim_prop_check_log(const sim_model_t *m, const sim_result_t *r, sim_prop_verdict_t *v,
                       FILE *log, long long seed);

#endif
