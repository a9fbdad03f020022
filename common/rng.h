/* rng.h - deterministic random numbers (splitmix64, xoshiro256**, the glibc
 * rand_r() sequence) and Zipf weights, splits and random subsets. */
#ifndef BQOS_RNG_H
#define BQOS_RNG_H

#include <stddef.h>
#include <stdint.h>

/* Three generators, because existing outputs depend on each sequence:
 *   rng_t       splitmix64: small and fast; workloads, the simulator.
 *   rng_x256_t  xoshiro256** seeded by splitmix64: pShift instances
 *               (bqos-pshift gen) and the pShift tests.
 *   rng_lcg_t   glibc's rand_r() algorithm, reproduced here so that the
 *               controller benches (bqos-ctrl-prof token hashes) and
 *               bqos-mcload give the same sequence with any C library.
 * Each generator is a value owned by one thread; there is no global state. */

/* ---- splitmix64 ---- */

typedef struct {
    uint64_t state;
} rng_t;

/* Seeds `r` from `seed` and a stream number, so that (seed, stream) pairs
 * give independent sequences (one stream per bucket or per thread). */
void rng_seed(rng_t *r, uint64_t seed, uint64_t stream);

/* Starts the sequence at `state` as it is (no mixing, nothing discarded),
 * for callers whose sequences are defined from a raw splitmix64 state. */
void rng_seed_raw(rng_t *r, uint64_t state);

/* Returns the next 64 random bits. */
uint64_t rng_next(rng_t *r);

/* Returns a double uniform in [0, 1). */
double rng_uniform(rng_t *r);

/* Returns an integer uniform in [0, n) (multiply-shift, bias negligible at
 * the sizes used); 0 if n == 0. */
uint64_t rng_below(rng_t *r, uint64_t n);

/* ---- xoshiro256** ---- */

typedef struct {
    uint64_t s[4];
} rng_x256_t;

/* Seeds `r` from `seed` (four splitmix64 outputs of it). */
void rng_x256_seed(rng_x256_t *r, uint64_t seed);

/* Returns the next 64 random bits. */
uint64_t rng_x256_next(rng_x256_t *r);

/* Returns an integer exactly uniform in [0, n) (rejection sampling); n must
 * be >= 1. */
uint64_t rng_x256_below(rng_x256_t *r, uint64_t n);

/* ---- glibc rand_r() ---- */

#define RNG_LCG_MAX 2147483647 /* rng_lcg_next() returns 0..this (glibc RAND_MAX) */

typedef struct {
    unsigned int state;
} rng_lcg_t;

/* Seeds `r` as rand_r() would be with *seedp == seed. */
void rng_lcg_seed(rng_lcg_t *r, unsigned int seed);

/* Returns the next value of glibc's rand_r() sequence, 0..RNG_LCG_MAX. */
int rng_lcg_next(rng_lcg_t *r);

/* ---- Zipf and subsets ---- */

/* Fills w[0..n-1] with Zipf weights w_i = (1/(i+1)^s) / sum_j (1/(j+1)^s),
 * which sum to 1 (s = 0 gives equal weights).  Returns 0, or -EINVAL if
 * s < 0 or n == 0. */
int rng_zipf_weights(double *w, size_t n, double s);

/* Splits the integer `total` into n parts proportional to the Zipf weights
 * of exponent s (largest first), by largest remainder, so the parts sum to
 * exactly `total`.  Returns 0; -EINVAL as rng_zipf_weights() or if
 * total < 0; -ENOMEM. */
int rng_zipf_split(int64_t *parts, size_t n, int64_t total, double s);

/* Picks k distinct values from [0, n) uniformly at random into out[0..k-1]
 * (k draws of rng_below), sorted ascending.  Returns 0, or -EINVAL if
 * k < 0 or k > n. */
int rng_pick(rng_t *r, int *out, int k, int n);

#endif
