/* zipf.h - transitional: the old zipf_ names of common/rng.h, kept only for
 * workloads/sim until it is converted; new code includes common/rng.h. */
#ifndef BQOS_ZIPF_H
#define BQOS_ZIPF_H

#include "common/rng.h"

typedef rng_t zipf_rng_t;
#define zipf_rng_seed rng_seed
#define zipf_rng_next rng_next
#define zipf_rng_uniform rng_uniform
#define zipf_rng_below rng_below
#define zipf_weights rng_zipf_weights
#define zipf_split rng_zipf_split
#define zipf_pick rng_pick

#endif
