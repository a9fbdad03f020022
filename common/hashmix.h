/* hashmix.h - the 64-bit finaliser of MurmurHash3 (fmix64), shared by the hash tables: every input bit flips each output bit with probability about 1/2, so that the low bits used as a table index depend on all of them. */
#ifndef BQOS_HASHMIX_H
#define BQOS_HASHMIX_H

#include <stdint.h>

/* Returns x mixed (a bijection of the 64-bit values; 0 gives 0). */
static inline uint64_t hashmix64(uint64_t x)
{
    x ^= x >> 33;
    x *= UINT64_C(0xff51afd7ed558ccd);
    x ^= x >> 33;
    x *= UINT64_C(0xc4ceb9fe1a85ec53);
    x ^= x >> 33;
    return x;
}

#endif
