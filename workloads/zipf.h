/* zipf.h - deterministic random numbers and Zipf weights for workload generation. */
#ifndef BQOS_ZIPF_H
#define BQOS_ZIPF_H

#include <stddef.h>
#include <stdint.h>

/* A splitmix64 generator: small, fast, good enough for workloads.  A value
 * owned by one thread; seed it with zipf_rng_seed(). */
typedef struct {
    uint64_t state;
} zipf_rng_t;

/* Seeds `r` from `seed` and a stream number, so that (seed, stream) pairs
 * give independent sequences (one stream per bucket or per thread). */
void zipf_rng_seed(zipf_rng_t *r, uint64_t seed, uint64_t stream);

/* Returns the next 64 random bits. */
uint64_t zipf_rng_next(zipf_rng_t *r);

/* Returns a double uniform in [0, 1). */
double zipf_rng_uniform(zipf_rng_t *r);

/* Returns an integer uniform in [0, n); 0 if n == 0. */
uint64_t zipf_rng_below(zipf_rng_t *r, uint64_t n);

/* Fills w[0..n-1] with Zipf weights w_i = (1/(i+1)^s) / sum_j (1/(j+1)^s),
 * which sum to 1 (s = 0 gives equal weights).  Returns 0, or -EINVAL if
 * s < 0 or n == 0. */
int zipf_weights(double *w, size_t n, double s);

/* Splits the integer `total` into n parts proportional to the Zipf weights
 * of exponent s (largest first), by largest remainder, so the parts sum to
 * exactly `total`.  Returns 0; -EINVAL as zipf_weights() or if total < 0;
 * -ENOMEM. */
int zipf_split(int64_t *parts, size_t n, int64_t total, double s);

/* Picks k distinct values from [0, n) uniformly at random into out[0..k-1],
 * sorted ascending.  Returns 0, or -EINVAL if k > n. */
int zipf_pick(zipf_rng_t *r, int *out, int k, int n);

#endif
