/* gen.h - deterministic pShift instances shaped like the paper's Section IV (Zipf reservations and demand splits). */
#ifndef BQOS_GEN_H
#define BQOS_GEN_H

#include <stddef.h>
#include <stdint.h>

#include "pshift/pshift.h"

/* Instance parameters (paper Section IV-B/C).  Reservations: bucket i
 * (1-based rank) gets weight 1/i^zipf and the reserved capacity
 * floor(reserved_fraction * servers * capacity) is split in proportion to the
 * weights (largest remainder, so the sum is exact).  Each bucket's demand
 * D_i = round(demand_ratio * R_i) is split over `active` distinct servers
 * chosen uniformly at random, the k-th of them getting weight 1/k^split_zipf.
 * With limit_ratio > 0 each bucket also gets limit round(limit_ratio * R_i)
 * (at least R_i).  Same parameters and seed, same instance, on any machine. */
typedef struct {
    int servers;              /* >= 1 */
    int buckets;              /* >= 0 */
    double reserved_fraction; /* r, in [0, 1] */
    double demand_ratio;      /* m, >= 1 */
    double zipf;              /* s of the reservations, >= 0 */
    double split_zipf;        /* s of the per-server demand split, >= 0 */
    int active;               /* active servers per bucket, 1..servers */
    int64_t capacity;         /* capacity of every server, >= 0 */
    uint64_t seed;
    double limit_ratio;       /* 0 = no limits, else >= 1 */
    int names;                /* nonzero: name servers s1.. and buckets b1.. */
} gen_params_t;

/* The paper's Section IV-C instance: 64 servers, 10,000 buckets, r = 1.0,
 * m = 1.5, s = 0.5 for both, 8 active servers, capacity 100,000, seed 1. */
#define GEN_PARAMS_DEFAULT                                                     \
    ((gen_params_t){.servers = 64, .buckets = 10000, .reserved_fraction = 1.0, \
                    .demand_ratio = 1.5, .zipf = 0.5, .split_zipf = 0.5,       \
                    .active = 8, .capacity = 100000, .seed = 1,                \
                    .limit_ratio = 0, .names = 1})

/* Checks the parameters; returns 0, or -EINVAL and a message naming the bad
 * parameter in `msg` (`n` bytes, may be 0). */
int gen_check(const gen_params_t *g, char *msg, size_t n);

/* Builds the instance into a new problem *out (caller owns it).  If `limits`
 * is not NULL, *limits gets a malloc'd array of one limit per bucket (-1 when
 * limit_ratio is 0), which the caller frees.  Returns 0, -EINVAL for bad
 * parameters, -EOVERFLOW if a number does not fit in int64_t, -ENOMEM. */
int gen_problem(const gen_params_t *g, pshift_problem_t **out, int64_t **limits);

#endif
