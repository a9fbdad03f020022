/* sim_run.h - runs one QoS policy over a bqos-sim model in simulated time and measures what each bucket received.
 *
 * Every server is the node's real core (storage-node/core: the scheduler,
 * and the agent that reports its counters and applies tokens, as in
 * bqos-node) fed by the model's request generators and drained by one IO
 * at a time with service times uniform in (1 +- spread) / C, or, with the
 * model's backend (sim_model_t.window), through a FIFO of at most the
 * node's window (fixed, or storage-node/core/window's adaptive one) served
 * `parallel` IOs at a time; servers' speed steps and closed-loop clients'
 * round trips come from the model too.  Servers only
 * interact through the controller, so between control rounds each server
 * is simulated on its own (in parallel, OpenMP), which keeps a run
 * deterministic for a seed whatever the thread count.  Open-loop requests
 * still queued when a period ends are dropped (overload would otherwise
 * grow the queues forever); closed-loop ones stay queued.
 *
 * Policies:
 *   rr           the scheduler's round-robin policy, no tokens
 *   static       token policy; each bucket's reservation split over its
 *                initial servers in proportion to its initial demand, the
 *                same split every period
 *   pshift       token policy; the controller's own control loop
 *                (controller/ctrl.h: estimators, skip rule, R and L pShift
 *                passes) gets every node agent's report at each interval
 *                boundary, and the tokens it pushes reach the agents after
 *                the controller delay (applied net of what each node served
 *                since its report, as on a real node)
 *   pshift-paced as pshift, with the node scheduler's paced tokens and
 *                R class served by urgency (the new scheduler; pshift is
 *                the paper's: round robin, a period's tokens at once)
 *   clairvoyant  as pshift, but pShift gets each (bucket, server)'s true
 *                future demand for the rest of the period and the true
 *                capacities (R pass, then an L pass on what is left)
 * Limits: static splits L like R; pshift and pshift-paced get them from
 * the controller's L pass; rr has no tokens, so no limits.
 * Every policy's tokens (and heartbeats, for rr and the intervals static
 * leaves alone) go through the agents, which also start each period. */
#ifndef BQOS_SIM_RUN_H
#define BQOS_SIM_RUN_H

#include <stddef.h>
#include <stdint.h>

#include "workloads/report.h"
#include "workloads/sim/sim_model.h"

typedef enum {
    SIM_POLICY_RR = 0,
    SIM_POLICY_STATIC,
    SIM_POLICY_PSHIFT,
    SIM_POLICY_PSHIFT_PACED,
    SIM_POLICY_CLAIRVOYANT,
    SIM_NPOLICIES
} sim_policy_t;

/* bqos-node's default --burst, seconds. */
#define SIM_BURST_DEFAULT 0.02

/* "rr", "static", "pshift", "pshift-paced", "clairvoyant"; "?" for a bad
 * value. */
const char *sim_policy_name(sim_policy_t p);

/* Returns the policy named `name`, or -EINVAL. */
int sim_policy_parse(const char *name);

/* Called by sim_run() on its calling thread after each control round. */
typedef void (*sim_progress_fn)(void *arg, sim_policy_t p, int period, int interval,
                                uint64_t events, double wall_s);

typedef struct {
    int threads;              /* OpenMP threads for servers and pShift; <= 0: default */
    int weighted;             /* schedulers in weighted mode, weight of a bucket
                                 = its reservation / the smallest one */
    double burst_s;           /* pshift-paced: burst depth of paced tokens
                                 (sched_set_pacing()), seconds; bqos-node's
                                 default is SIM_BURST_DEFAULT */
    double limit_depth;       /* the controller's limit_depth (ctrl_config_t:
                                 limits are rates with this depth, seconds;
                                 < 0: per-period quotas; 0, as zeroed: rates
                                 with no depth); bqos-controller's default is
                                 ctrl_config_default()'s */
    int shares;               /* the controller's fair shares of spare
                                 capacity (ctrl_config_t.shares) */
    int shards;               /* pshift policies: > 0 runs the controller as
                                 this many shards with the root step
                                 between their rounds (controller/
                                 shardset.h); 0: one controller */
    /* pshift policies: one CSV line per control round, node and traced
     * bucket (docs/simulator.md, "Outputs") to `trace` (caller's
     * stream, not closed; NULL: no trace) for the ntrace bucket indices
     * at trace_b (caller-owned) */
    FILE *trace;
    const int *trace_b;
    size_t ntrace;
    sim_progress_fn progress; /* may be NULL */
    void *arg;
} sim_run_opts_t;

/* What one policy achieved.  Arrays are indexed [period][interval][bucket]
 * over the measured (non-warm-up) periods only. */
typedef struct {
    sim_policy_t policy;
    int buckets, intervals, periods;   /* periods = measured periods */
    double *reserved;       /* [B] IOs per period a bucket reserves at the start */
    double *reserved_p;     /* [periods][B] ... in each measured period (runtime
                               sets: scenario "set") */
    uint64_t *served;       /* [periods][B] IOs served in the period */
    uint32_t *served_iv;    /* [periods][intervals][B] IOs served per interval */
    int servers;
    uint64_t *delivered;    /* [periods][servers] IOs each server completed */
    uint64_t events;        /* arrivals + completions simulated (all periods) */
    uint64_t arrivals, completions, dropped;
    uint64_t rounds;        /* control rounds (pshift, clairvoyant) */
    uint64_t skipped;       /* pshift: rounds the controller skipped */
    double wall_s;          /* wall-clock seconds of the run */
    double ctrl_s;          /* ... of which in estimation + pShift */
    /* Over all (measured period, bucket) pairs with a reservation: */
    size_t samples;
    double meet95, meet99;  /* share served >= 95% / 99% of the reservation */
    double mean_err;        /* mean of max(0, 1 - served/reserved) */
    double worst;           /* smallest served/reserved */
    /* Per-window accuracy over the measured periods (workloads/report.h:
     * windows of about 1 s and 200 ms aligned to the periods; a bucket is
     * demanding in a window when, at one server, it had a request queued
     * or in service for all but REPORT_WIN_IDLE_SHARE of it),
     * [REPORT_WIN_LONG] and [REPORT_WIN_SHORT]: */
    report_win_fig_t win[2];
} sim_result_t;

/* Simulates policy `p` over model `m` (read-only, may be shared by
 * concurrent runs).  Returns 0 and a new result in *out (caller owns it,
 * free with sim_result_destroy()); -EINVAL for a bad policy; -ENOMEM; or a
 * pShift error. */
int sim_run(const sim_model_t *m, sim_policy_t p, const sim_run_opts_t *opts, sim_result_t **out);

/* Frees a result and sets *rp to NULL.  Accepts NULL. */
void sim_result_destroy(sim_result_t **rp);

#endif
