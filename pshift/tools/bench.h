/* bench.h - the pShift benchmark: the paper's Fig. 5, 6 and 7 configurations and a large case, against igraph max-flow. */
#ifndef BQOS_BENCH_H
#define BQOS_BENCH_H

#include <stdint.h>
#include <stdio.h>

/* Which configurations to run and how. */
typedef struct {
    int fig5;          /* 64 x 10,000, r in {1.0, 0.9}, m in {1.1 .. 2}, threads 1..N */
    int fig6;          /* 64 x 10,000, r 1.0, m 1.1, approx M and Zipf s */
    int fig7;          /* 64 x 100..1,000 buckets, r 1.0, m 1.1, 1 thread */
    int large;         /* 1,024 x 1,000,000 x 8 active, r 1.0, m 1.1 */
    int large_maxflow; /* also run igraph on the large case (slow, big) */
    const char *file;  /* a solve document to run instead of the figures
                          (one row per thread count, fig "file"), or NULL */
    int quick;         /* fewer points per figure, one repetition */
    int maxflow;       /* run the max-flow baseline (default on) */
    int threads_max;   /* threads 1..threads_max; <= 0: number of CPUs */
    int repeat;        /* solves per point, the fastest is reported */
    uint64_t seed;
    int json;          /* JSON array on `out` instead of the table */
    int progress;      /* progress lines on stderr */
} bench_opts_t;

#define BENCH_OPTS_DEFAULT                                                    \
    ((bench_opts_t){.fig5 = 0, .fig6 = 0, .fig7 = 0, .large = 0,              \
                    .large_maxflow = 0, .file = NULL, .quick = 0, .maxflow = 1,             \
                    .threads_max = 0, .repeat = 3, .seed = 1, .json = 0,      \
                    .progress = 1})

/* Runs the selected configurations (all of fig5, fig6 and fig7 if none is
 * selected; only `file` when it is set) and prints one row per point to `out`: a table, or a JSON array
 * with `json`.  Every pShift result is checked against the max-flow optimum
 * when that runs; a mismatch in exact mode is reported in the row and makes
 * the return value -EDOM.  Returns 0, -EDOM, -ENOMEM, -EIO; for `file`,
 * -EINVAL if it is not a valid solve document (or -errno if it cannot be
 * read), with the reason on stderr. */
int bench_run(const bench_opts_t *o, FILE *out);

#endif
