/* sim_model.h - what bqos-sim simulates: servers, buckets with reservations, and each bucket's demand over time.
 *
 * A model is built once, from command-line settings (the paper's
 * Experiment 1 generator) or from a bqos-load scenario file, and is then
 * read-only: every policy of a run reads the same model from any number of
 * threads, so all policies see the same arrivals.
 *
 * Demand is a list of phases per bucket: from time t on, the bucket sends
 * `rates[i]` IOs per second to server `servers[i]` (open loop), or keeps
 * `outstanding` requests in flight at each of its servers (closed loop:
 * a new request as soon as one completes, as bqos-load's clients do).  For the simulator's
 * inner loop the phases are also cut into per-server segments: a segment is
 * one (bucket, server, start, end, rate) request generator. */
#ifndef BQOS_SIM_MODEL_H
#define BQOS_SIM_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "workloads/scenario.h"

/* Settings of the built-in generator, and run settings shared with
 * scenario-built models.  Times in seconds, rates in IOs per second. */
typedef struct {
    int servers;          /* S >= 1 */
    int buckets;          /* B >= 1 */
    double capacity;      /* C: mean IOPS of one server, > 0 */
    double svc_spread;    /* service time uniform in (1 +- spread) / C, 0..1 */
    double period;        /* QoS period T, > 0 */
    int intervals;        /* K redistribution intervals per period, >= 1 */
    int periods;          /* periods simulated, >= 1 */
    int warmup;           /* first periods left out of the results, < periods */
    double delay;         /* controller delay before new tokens apply, < T/K */
    double reserved;      /* r: share of the capacity reserved, 0..1 */
    double res_zipf;      /* Zipf exponent of reservations over buckets */
    double demand;        /* demand / reservation (1.5 in the paper) */
    int active;           /* N_A: active servers per bucket, 1..S */
    double split_zipf;    /* Zipf exponent of a bucket's split over servers */
    int changes;          /* N_D: demand changes per bucket per period */
    int changes_upto;     /* nonzero: 0..N_D changes (uniform) instead of N_D */
    int poisson;          /* nonzero: Poisson arrivals; 0: evenly spaced */
    int outstanding;      /* > 0: closed loop with this many requests in
                             flight per active server (rates only split
                             the phases); 0: open loop */
    double limit;         /* >= 1: every bucket's limit is this multiple of
                             its reservation; 0: no limits */
    uint64_t seed;
} sim_config_t;

/* The paper's Experiment 1: 64 servers, 10,000 buckets, 20,000 IOPS,
 * spread 0.1, T = 5 s, K = 5, 2 periods of which 1 warm-up, delay 10 ms,
 * r = 1, Zipf 0.5 reservations, demand 1.5, 8 active servers split Zipf
 * 0.5, up to 2 changes per period, even arrivals, seed 1.  Reservations
 * are rounded to whole IOs per second (at least 1), as bucket files hold
 * them; no limits (with `limit`, limit x reservation rounded up). */
sim_config_t sim_config_default(void);

/* Checks the settings.  Returns 0, or -EINVAL with a message in
 * err[0..errlen-1] naming the bad setting. */
int sim_config_check(const sim_config_t *c, char *err, size_t errlen);

typedef struct {
    double t;        /* start (seconds since the run's start) */
    int n;           /* active servers */
    int *servers;    /* [n] server indexes, distinct */
    double *rates;   /* [n] IOs per second, > 0 (open loop) */
} sim_phase_t;

typedef struct {
    double reservation;   /* IOs per second */
    double limit;         /* IOs per second >= reservation; < 0: no limit */
    int outstanding;      /* > 0: closed loop (requests in flight per server) */
    size_t nphases;       /* >= 1, phases[0].t == 0, increasing */
    sim_phase_t *phases;
    size_t nsets;         /* runtime sets (scenario "set"), by period */
    struct scenario_set *sets;
    int parent;           /* nested buckets (scenario "parent"): its
                             parent's index, -1 none */
    uint32_t weight;      /* scenario "weight": the controller's bucket
                             weight, 0 not given */
} sim_bucket_t;

/* Bucket bk's reservation in period p (IOs per second); its limit into
 * *lim (< 0: none) if lim is not NULL. */
double sim_bucket_rates(const sim_bucket_t *bk, int p, double *lim);

/* One request generator: bucket `bucket` sends `rate` IOs per second to a
 * server during [start, end), or keeps `outstanding` requests in flight
 * there (closed loop, `outstanding` > 0). */
typedef struct {
    int bucket;
    uint32_t key;         /* unique in the model: seeds the generator */
    double start, end, rate;
    int outstanding;
} sim_segment_t;

typedef struct {
    sim_config_t cfg;     /* servers/buckets/capacity/period... as used */
    double horizon;       /* periods * period */
    sim_bucket_t *buckets;   /* [cfg.buckets] */
    size_t *nsegs;           /* [cfg.servers] */
    sim_segment_t **segs;    /* [cfg.servers][nsegs[s]], by start time */
    double *capacity;        /* [cfg.servers] true mean IOPS per server */
    /* What the real node has (scenario options, off by default): */
    int window;              /* backend FIFO behind the scheduler: 0 none (one
                                IO at a time straight from the scheduler), K
                                fixed, SIM_WINDOW_AUTO the node's adaptive
                                window (storage-node/core/window.h) */
    int headroom;            /* adaptive window: reserved headroom (window.h),
                                < 0: the default */
    int parallel;            /* with a window: IOs the backend serves at once,
                                each in parallel / (C x speed) on average, so
                                latency is flat up to this many; >= 1 */
    double service_cv;       /* < 0: service uniform (1 +- svc_spread) / C;
                                >= 0: lognormal with this CV */
    double rtt;              /* closed loop: seconds from a completion to the
                                client's next request at that server */
    double *speed;           /* [cfg.periods][cfg.servers] speed factor of a
                                server in a period, or NULL (all 1) */
} sim_model_t;

#define SIM_WINDOW_AUTO (-1)

/* Speed factor of server s at time t (1 without "speed"). */
double sim_model_speed(const sim_model_t *m, int s, double t);

/* Builds the Experiment 1 style model described by *cfg (checked with
 * sim_config_check()).  Returns 0 and a new model in *out (caller owns it,
 * free with sim_model_destroy()), -EINVAL (message in err), -ENOMEM. */
int sim_model_generate(const sim_config_t *cfg, sim_model_t **out, char *err, size_t errlen);

/* Builds a model from a loaded bqos-load scenario: its servers, capacity,
 * period, intervals, duration (rounded up to whole periods), seed and
 * buckets (reservation; open-loop rate split over each phase's servers by
 * split_zipf, as bqos-load does, or closed loop with the bucket's
 * outstanding requests per server).  Run settings not in a scenario (delay,
 * spread, warmup, poisson) come from *run; limits are the scenario's.  Returns 0
 * and *out (caller owns it), -EINVAL with a message in err (no capacity,
 * bad run settings), -ENOMEM. */
int sim_model_from_scenario(const scenario_t *sc, const sim_config_t *run, sim_model_t **out,
                            char *err, size_t errlen);

/* Frees the model and sets *mp to NULL.  Accepts NULL. */
void sim_model_destroy(sim_model_t **mp);

/* Adds to acc[s] (an array of cfg.servers doubles the caller zeroed) the
 * IOs bucket b sends to each server during [t0, t1): the true demand that
 * the clairvoyant policy is fed.  A closed-loop bucket always has work
 * where it is active: it counts the server's whole capacity there. */
void sim_model_demand(const sim_model_t *m, int b, double t0, double t1, double *acc);

#endif
