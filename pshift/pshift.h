/* pshift.h - the pShift token allocator (Peng, Liu, Varman, MSST 2019): place
 * each bucket's tokens on the servers so that the tokens the servers can
 * actually consume (the effective system capacity Phi) is as large as possible.
 *
 * Usage:
 *   pshift_problem_t *p = pshift_problem_new();
 *   int s1 = pshift_add_server(p, "s1", 100);
 *   int red = pshift_add_bucket(p, "red", 100);
 *   pshift_set_demand(p, red, s1, 150);
 *   ...
 *   pshift_opts_t o = PSHIFT_OPTS_DEFAULT;
 *   if (pshift_solve(p, &o) == 0) { read pshift_alloc(), pshift_stats() }
 *   pshift_problem_destroy(&p);
 *
 * Memory and time follow the non-zero (bucket, server) demand pairs, except a
 * dense |S| x |S| matrix of edge weights (the TMS of the paper), which is
 * 8 MiB at 1,024 servers.  A problem object is not thread-safe: one thread
 * builds, solves and reads it; pshift_solve() itself may use OpenMP threads.
 * Numbers are tokens (int64_t, never negative); every sum the solver forms is
 * checked at pshift_solve() to fit in int64_t. */
#ifndef BQOS_PSHIFT_H
#define BQOS_PSHIFT_H

#include <stddef.h>
#include <stdint.h>

typedef struct pshift_problem pshift_problem_t;

typedef struct {
    int threads;        /* OpenMP threads; <= 0 means the OpenMP default */
    size_t approx_top;  /* 0 = exact; else shift only the top M buckets by
                           tokens and the top M by spare demand (III-C2) */
    int max_path;       /* 0: shift paths of any length (the paper); else at
                           most this many edges (1: direct transfers only,
                           no map built).  Bounds the cost where excess
                           cannot all be removed: each level is a search
                           from every overloaded server over the |S| x |S|
                           map (controller shards, issue 30) */
} pshift_opts_t;

#define PSHIFT_OPTS_DEFAULT ((pshift_opts_t){.threads = 1, .approx_top = 0})

/* Solve statistics, valid after a successful pshift_solve(). */
typedef struct {
    int64_t phi;              /* effective system capacity after shifting */
    int64_t phi_initial;      /* ... of the initial proportional allocation */
    int64_t tokens;           /* sum over buckets of min(target, demand) */
    int64_t weak_excess_initial; /* sum_j max(0, load_j - C_j) before */
    int64_t weak_excess_final;   /* ... after shifting */
    double weak_excess_removed;  /* share removed, 1.0 if there was none */
    int64_t shifts;           /* shift paths used */
    int longest_path;         /* edges in the longest shift path used */
    int levels;               /* path-length levels explored */
    size_t buckets_considered;/* buckets eligible for shifting (approx) */
    double t_init, t_map, t_shift, t_total; /* seconds per phase */
} pshift_stats_t;

/* Returns a new empty problem, or NULL if out of memory.  Caller owns it and
 * must free it with pshift_problem_destroy(). */
pshift_problem_t *pshift_problem_new(void);

/* Frees the problem and sets *pp to NULL.  Accepts NULL and *pp == NULL. */
void pshift_problem_destroy(pshift_problem_t **pp);

/* Empties the problem (no servers, buckets or demands, no solution) but
 * keeps its memory, names' included, so that a problem rebuilt each round
 * (the controller's) allocates and page-faults nothing once it has reached
 * its size. */
void pshift_problem_clear(pshift_problem_t *p);

/* Adds a server with IO capacity `capacity` (tokens it can consume this
 * period).  `name` is copied; it may be NULL.  Returns the server's index
 * (0, 1, ... in order of addition), -EINVAL if capacity < 0, -ENOMEM. */
int pshift_add_server(pshift_problem_t *p, const char *name, int64_t capacity);

/* Adds a bucket that wants `target` tokens (its reservation, or for the limit
 * pass its limit headroom).  `name` is copied; it may be NULL.  Returns the
 * bucket's index, -EINVAL if target < 0, -ENOMEM. */
int pshift_add_bucket(pshift_problem_t *p, const char *name, int64_t target);

/* Records bucket `b`'s demand on server `s`.  Zero demands are ignored.
 * Returns 0, -EINVAL for a bad index or a negative demand, -ENOMEM.  Setting
 * the same (b, s) pair twice is reported by pshift_solve() as -EEXIST. */
int pshift_set_demand(pshift_problem_t *p, int b, int s, int64_t demand);

/* Records the demands of `n` buckets on server `s`: bucket b[i] wants d[i]
 * there, as pshift_set_demand(p, b[i], s, d[i]) for i = 0, 1, ... would,
 * in one call (a caller adding tens of thousands of pairs a round pays a
 * call per server instead of per pair).  Returns 0; -EINVAL for a bad index
 * or a negative demand (then none of them is recorded); -ENOMEM. */
int pshift_set_demands(pshift_problem_t *p, int s, const int32_t *b, const int64_t *d, size_t n);

/* Runs InitialTokenAllocation, MakeTokenMovementMap and ProgressiveShifting.
 * Afterwards every bucket holds exactly min(target, total demand) tokens,
 * no server gets more tokens of a bucket than its demand there, and Phi is
 * the optimum (approx_top == 0).  May be called again after changes.
 * Returns 0; -EEXIST if a (bucket, server) demand was set twice; -EOVERFLOW
 * if a sum of demands, capacities or targets overflows int64_t; -ENOMEM.
 * On error the problem keeps no allocation. */
int pshift_solve(pshift_problem_t *p, const pshift_opts_t *opts);

/* Counts and names.  Names are owned by the problem (NULL if none given)
 * and stay valid until pshift_problem_clear() or pshift_problem_destroy(). */
int pshift_nservers(const pshift_problem_t *p);
int pshift_nbuckets(const pshift_problem_t *p);
const char *pshift_server_name(const pshift_problem_t *p, int s);
const char *pshift_bucket_name(const pshift_problem_t *p, int b);
int64_t pshift_server_capacity(const pshift_problem_t *p, int s);
int64_t pshift_bucket_target(const pshift_problem_t *p, int b);

/* Tokens of bucket `b` on server `s` after pshift_solve() (0 if none). */
int64_t pshift_alloc(const pshift_problem_t *p, int b, int s);

/* Sparse read-back: number of servers where bucket `b` has demand, and the
 * k-th of them (servers in increasing index order).  Valid after a
 * successful pshift_solve(); out-pointers may be NULL. */
size_t pshift_bucket_nentries(const pshift_problem_t *p, int b);
void pshift_bucket_entry(const pshift_problem_t *p, int b, size_t k, int *server,
                         int64_t *demand, int64_t *alloc);

/* The allocations of bucket `b`'s entries after pshift_solve(): element k
 * is what pshift_bucket_entry(p, b, k, ...) returns as alloc.  Points into
 * the problem, valid until it is changed, solved again or destroyed; NULL
 * before a successful solve or for a bad index.  For read-back loops that
 * would otherwise call pshift_bucket_entry() per entry. */
const int64_t *pshift_bucket_allocs(const pshift_problem_t *p, int b);

/* Total tokens placed on server `s` (sum over buckets). */
int64_t pshift_server_load(const pshift_problem_t *p, int s);

/* Statistics of the last successful pshift_solve(). */
const pshift_stats_t *pshift_stats(const pshift_problem_t *p);

/* Builds the limit-pass problem of paper III-D from a solved reservation
 * problem: same servers with residual capacity max(0, C - load), same buckets
 * with targets `targets[b]` (INT64_MAX for "no limit"), and residual demand
 * d - a.  Returns a new problem the caller owns, or NULL if out of memory or
 * `solved` has no solution. */
pshift_problem_t *pshift_residual_new(const pshift_problem_t *solved,
                                      const int64_t *targets);

/* Returns the token movement map entry TMS(j, k) of the final allocation:
 * tokens movable from server j to server k in one prudent transfer (buckets
 * outside the approximation's set excluded).  Computed on demand in
 * O(entries on j); 0 before a successful solve.  For tests and tools. */
int64_t pshift_tms(const pshift_problem_t *p, int j, int k);

/* Computes, without solving, the TMS map of the initial proportional
 * allocation (paper Table III) into the |S| x |S| row-major array `out`.
 * Returns 0, -EEXIST, -EOVERFLOW, -ENOMEM as pshift_solve(). */
int pshift_initial_map(pshift_problem_t *p, int64_t *out);

#endif
