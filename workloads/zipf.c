/* zipf.c - splitmix64 random numbers, Zipf weights and random subsets. */
#include "workloads/zipf.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

void zipf_rng_seed(zipf_rng_t *r, uint64_t seed, uint64_t stream)
{
    r->state = seed * 0x9E3779B97F4A7C15ULL ^ (stream + 1) * 0xD1B54A32D192ED03ULL;
    (void)zipf_rng_next(r);
}

uint64_t zipf_rng_next(zipf_rng_t *r)
{
    uint64_t z = (r->state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

double zipf_rng_uniform(zipf_rng_t *r)
{
    return (double)(zipf_rng_next(r) >> 11) * 0x1.0p-53;
}

uint64_t zipf_rng_below(zipf_rng_t *r, uint64_t n)
{
    if (n == 0)
        return 0;
    /* Multiply-shift: bias is negligible for the sizes used here. */
    return (uint64_t)(((unsigned __int128)zipf_rng_next(r) * n) >> 64);
}

int zipf_weights(double *w, size_t n, double s)
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

int zipf_split(int64_t *parts, size_t n, int64_t total, double s)
{
    if (n == 0 || !(s >= 0) || total < 0)
        return -EINVAL;
    double *w = malloc(n * sizeof *w);
    if (!w)
        return -ENOMEM;
    zipf_weights(w, n, s);
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

int zipf_pick(zipf_rng_t *r, int *out, int k, int n)
{
    if (k < 0 || k > n)
        return -EINVAL;
    /* Floyd's algorithm: k draws, no scratch array of size n. */
    int m = 0;
    for (int j = n - k; j < n; j++) {
        int t = (int)zipf_rng_below(r, (uint64_t)j + 1);
        int seen = 0;
        for (int i = 0; i < m; i++)
            if (out[i] == t)
                seen = 1;
        out[m++] = seen ? j : t;
    }
    qsort(out, (size_t)k, sizeof *out, cmp_int);
    return 0;
}
