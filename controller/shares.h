/* shares.h - weighted max-min fair shares of the nodes' spare capacity across the cluster (issue 28): water-filling over the bucket-server graph, capped by each pair's want and each bucket's cap.
 *
 * The problem: servers s with spare capacity spare[s] (tokens), buckets b
 * with a weight w[b] and a cap[b] (the most it may take in all, its limit's
 * headroom left; SHARES_NOCAP: none), and pairs (b, s, want): bucket b can
 * use up to `want` more tokens on server s.  The answer gives each pair a
 * share so that the buckets' totals x[b] are the weighted max-min fair
 * point of what the graph allows: no bucket's x[b] / w[b] can grow without
 * lowering that of a bucket at or below it.  A bucket on one server with
 * weight 2 gets twice what a bucket on eight servers with weight 1 gets, as
 * far as that one server allows.
 *
 * The feasible totals form a polymatroid (a flow network's), on which the
 * weighted max-min point is also the one that maximises sum w[b] log x[b],
 * a Fisher market's equilibrium: every server divides its spare among its
 * pairs by weighted water-filling (each pair at most its want), each bucket
 * bidding its weight split over its servers, and each bucket moves its
 * bids towards the servers that give it most per unit bid (proportional
 * response).  shares_solve() runs that to a tolerance or an iteration cap:
 * O(pairs x log(pairs per server)) per iteration, no allocation once fit.
 *
 * A shares_t belongs to one thread (the controller's computing thread);
 * nothing locks. */
#ifndef BQOS_SHARES_H
#define BQOS_SHARES_H

#include <stddef.h>
#include <stdint.h>

/* A bucket cap meaning "no cap". */
#define SHARES_NOCAP INT64_MAX

/* One pair of the problem: the caller fills b, s and want; shares_solve()
 * fills share (tokens, <= want). */
typedef struct {
    int32_t b;      /* bucket, < nb */
    int32_t s;      /* server, < ns */
    int64_t want;   /* >= 0: the most it can use there */
    int64_t share;  /* result */
} shares_pair_t;

/* The solver's knobs. */
typedef struct {
    int iters;      /* most iterations (>= 1) */
    double tol;     /* stop when no bucket's total moved by more than this
                       share of it (and 1 token) in an iteration */
} shares_opts_t;

#define SHARES_OPTS_DEFAULT ((shares_opts_t){.iters = 40, .tol = 1e-3})

typedef struct shares shares_t;

/* A solver with no room yet.  Returns NULL on -ENOMEM.  Caller owns it
 * (shares_destroy). */
shares_t *shares_new(void);

/* Frees sh and NULLs *shp.  Accepts NULL and a NULL *shp. */
void shares_destroy(shares_t **shp);

/* Divides the servers' spare[ns] among the pairs p[np] of buckets of
 * weights w[nb] (each >= 1) and caps cap[nb] (>= 0 or SHARES_NOCAP),
 * filling every pair's share: each at most its want, each server's shares
 * at most its spare, each bucket's at most its cap.  Pairs with an
 * out-of-range bucket or server, or a negative want, get share 0 (never
 * more than was asked).  Iterations run (at most o->iters) go to *iters if
 * not NULL.  Returns 0 or -ENOMEM (the shares are then all 0). */
int shares_solve(shares_t *sh, const int64_t *spare, int ns, const uint32_t *w,
                 const int64_t *cap, size_t nb, shares_pair_t *p, size_t np,
                 const shares_opts_t *o, int *iters);

#endif
