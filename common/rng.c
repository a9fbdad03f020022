/* rng.c - deterministic random numbers (splitmix64, xoshiro256**, glibc
 * rand_r()), Zipf weights and splits, random subsets. */
#include "common/rng.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

/* ---- splitmix64 ---- */

void rng_seed(rng_t *r, uint64_t seed, uint64_t stream)
{
    r->state = seed * 0x9E3779B97F4A7C15ULL ^ (stream + 1) * 0xD1B54A32D192ED03ULL;
    (void)rng_next(r);
}

uint64_t rng_next(rng_t *r)
{
    uint64_t z = (r->state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

void rng_seed_raw(rng_t *r, uint64_t state)
{
    r->state = state;
}

double rng_uniform(rng_t *r)
{
    return (double)(rng_next(r) >> 11) * 0x1.0p-53;
}

uint64_t rng_below(rng_t *r, uint64_t n)
{
    if (n == 0)
        return 0;
    /* Multiply-shift: bias is negligible for the sizes used here. */
    return (uint64_t)(((unsigned __int128)rng_next(r) * n) >> 64);
}

/* ---- xoshiro256** ---- */

void rng_x256_seed(rng_x256_t *r, uint64_t seed)
{
    rng_t sm;
    rng_seed_raw(&sm, seed);
    for (int i = 0; i < 4; i++)
        r->s[i] = rng_next(&sm);
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

uint64_t rng_x256_next(rng_x256_t *r)
{
    uint64_t *s = r->s;
    uint64_t out = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return out;
}

uint64_t rng_x256_below(rng_x256_t *r, uint64_t n)
{
    /* Rejection sampling keeps the draw exactly uniform. */
    uint64_t lim = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do
        x = rng_x256_next(r);
    while (x >= lim);
    return x % n;
}

/* ---- glibc rand_r() ---- */

void rng_lcg_seed(rng_lcg_t *r, unsigned int seed)
{
    r->state = seed;
}

/* glibc's rand_r (stdlib/rand_r.c): three steps of the LCG
 * x' = x * 1103515245 + 12345 (mod 2^32), 11 + 10 + 10 bits of output. */
int rng_lcg_next(rng_lcg_t *r)
{
    unsigned int next = r->state;
    unsigned int result;
    next = next * 1103515245u + 12345u;
    result = (next / 65536) % 2048;
    next = next * 1103515245u + 12345u;
    result <<= 10;
    result ^= (next / 65536) % 1024;
    next = next * 1103515245u + 12345u;
    result <<= 10;
    result ^= (next / 65536) % 1024;
    r->state = next;
    return (int)result;
}

/* ---- Zipf and subsets ---- */

int rng_zipf_weights(double *w, size_t n, double s)
{
    if (n == 0 || !(s >= 0))
        return -EINVAL;
    double sum = 0;
    for (size_t i = 0; i < n; i++) {
        w[i] = 1.0 / pow((double)(i + 1), s);
        sum += w[i];
    }
    for (size_t i = 0; i < n; i++)
        w[i] /= sum;
    return 0;
}

int rng_zipf_split(int64_t *parts, size_t n, int64_t total, double s)
{
    if (n == 0 || !(s >= 0) || total < 0)
        return -EINVAL;
    double *w = malloc(n * sizeof *w);
    if (!w)
        return -ENOMEM;
    rng_zipf_weights(w, n, s);
    int64_t given = 0;
    for (size_t i = 0; i < n; i++) {
        parts[i] = (int64_t)floor(w[i] * (double)total);
        given += parts[i];
    }
    /* Largest remainder: hand the leftover units out one by one. */
    while (given < total) {
        size_t best = 0;
        double bestr = -1;
        for (size_t i = 0; i < n; i++) {
            double r = w[i] * (double)total - (double)parts[i];
            if (r > bestr) {
                bestr = r;
                best = i;
            }
        }
        parts[best]++;
        given++;
    }
    free(w);
    return 0;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

int rng_pick(rng_t *r, int *out, int k, int n)
{
    if (k < 0 || k > n)
        return -EINVAL;
    /* Floyd's algorithm: k draws, no scratch array of size n. */
    int m = 0;
    for (int j = n - k; j < n; j++) {
        int t = (int)rng_below(r, (uint64_t)j + 1);
        int seen = 0;
        for (int i = 0; i < m; i++)
            if (out[i] == t)
                seen = 1;
        out[m++] = seen ? j : t;
    }
    qsort(out, (size_t)k, sizeof *out, cmp_int);
    return 0;
}
