/* shares_bench.c - bqos-shares-bench: the time of one weighted fair division (controller/shares) at N servers x B buckets, each bucket hungry on A consecutive servers from a pseudo-random one, random weights, spare on every server. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "common/rng.h"
#include "controller/shares.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    int ns = argc > 1 ? atoi(argv[1]) : 64;
    int nb = argc > 2 ? atoi(argv[2]) : 10000;
    int act = argc > 3 ? atoi(argv[3]) : 3;
    int reps = argc > 4 ? atoi(argv[4]) : 5;
    if (ns < 1 || nb < 1 || act < 1 || act > ns || reps < 1) {
        fprintf(stderr, "usage: bqos-shares-bench [SERVERS [BUCKETS [ACTIVE [REPS]]]]\n");
        return 2;
    }
    rng_t r;
    rng_seed(&r, 1, 0);
    int64_t *spare = malloc((size_t)ns * sizeof *spare);
    uint32_t *w = malloc((size_t)nb * sizeof *w);
    int64_t *cap = malloc((size_t)nb * sizeof *cap);
    size_t np = (size_t)nb * (size_t)act;
    shares_pair_t *p = malloc(np * sizeof *p);
    shares_t *sh = shares_new();
    if (!spare || !w || !cap || !p || !sh)
        return 2;
    for (int s = 0; s < ns; s++)
        spare[s] = 4000;
    size_t k = 0;
    for (int b = 0; b < nb; b++) {
        w[b] = 1 + (uint32_t)(rng_next(&r) % 8);
        cap[b] = rng_next(&r) % 4 ? SHARES_NOCAP : (int64_t)(rng_next(&r) % 100);
        int first = (int)(rng_next(&r) % (uint64_t)ns);
        for (int a = 0; a < act; a++)
            p[k++] = (shares_pair_t){.b = b, .s = (first + a) % ns,
                                     .want = 1 + (int64_t)(rng_next(&r) % 200)};
    }
    double best = 1e9;
    int iters = 0;
    for (int i = 0; i < reps; i++) {
        double t0 = now_s();
        if (shares_solve(sh, spare, ns, w, cap, (size_t)nb, p, np, NULL, &iters) < 0)
            return 2;
        double t = now_s() - t0;
        best = t < best ? t : best;
    }
    int64_t given = 0;
    for (size_t j = 0; j < np; j++)
        given += p[j].share;
    printf("{\"servers\":%d,\"buckets\":%d,\"active\":%d,\"pairs\":%zu,\"iterations\":%d,"
           "\"ms\":%.2f,\"spare\":%lld,\"given\":%lld}\n",
           ns, nb, act, np, iters, best * 1e3, (long long)ns * 4000, (long long)given);
    shares_destroy(&sh);
    free(spare);
    free(w);
    free(cap);
    free(p);
    return 0;
}
