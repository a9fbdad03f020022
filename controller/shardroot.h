/* shardroot.h - the root step of controller shards (issue 30): each round, every node's capacity divided among the K shards by what each needs there (reservations first, then demand, then the rest in proportion), so that no node is ever promised more than it has.
 *
 * Usage, once per round (units: tokens for the rest of the period, any
 * unit as long as all inputs share it):
 *   shardroot_t *r = shardroot_new();
 *   shardroot_reset(r, shards, nodes);
 *   shardroot_set_node(r, n, capacity, conservative);      every up node
 *   shardroot_set_target(r, s, reservation left);          every shard
 *   shardroot_set_need(r, s, n, must, r_room, demand);     pairs with need
 *   shardroot_set_placed(r, s, n, last round's R there);   (feedback)
 *   shardroot_solve(r, &opts);
 *   shardroot_slice(r, s, n, &est, &cons);  -> ctrl_node_set_slice()
 *   shardroot_destroy(&r);
 *
 * The division, per node n (slices are integers; every split rounds
 * down, so the invariants hold exactly):
 *  1. Reservations: first what each shard must place on n (its buckets'
 *     reservation that has nowhere else to go), in proportion if that
 *     alone overbooks n; then where the shard placed its reservations on
 *     n last round (shardroot_set_placed()), as far as its room there
 *     allows, in proportion to what is left; then a pShift problem with the shards as buckets
 *     (target: the shard's reservation left beyond its must parts;
 *     demand on n: r_room beyond must, where its buckets' reservations
 *     can go there) and the nodes' conservative capacities left as
 *     servers.  pShift moves each shard's R to where it
 *     fits, as the unsharded R pass moves each bucket's; what it still
 *     leaves beyond a node's conservative capacity is cut in proportion
 *     (counted in the stats as r_cut).  Gives r(s, n).
 *  2. Demand: what is left of the node's capacity (the full estimate) goes
 *     to each shard's demand beyond r(s, n), all of it if it fits, else in
 *     proportion.
 *  3. The rest: in proportion to the shards' demands there, evenly if none
 *     has any (a shard whose demand appears before the next step has room).
 * The slice est(s, n) = the three parts; cons(s, n) = r(s, n) plus the
 * node's conservative capacity beyond all r, divided as the parts beyond r
 * are.  Invariants (tests/test_shardroot.c checks them on random cases):
 * sum over s of est(s, n) <= capacity(n), of cons(s, n) <= conservative(n),
 * cons <= est, r(s, n) <= cons(s, n).
 *
 * A shardroot_t belongs to one thread (the root's loop); it keeps its
 * memory across rounds (reset reuses it). */
#ifndef BQOS_SHARDROOT_H
#define BQOS_SHARDROOT_H

#include <stddef.h>
#include <stdint.h>

#include "pshift/pshift.h"

typedef struct shardroot shardroot_t;

/* What the last solve did. */
typedef struct {
    int64_t r_target;     /* sum of the shards' targets, capped by r_room */
    int64_t r_placed;     /* sum of r(s, n) */
    int64_t r_cut;        /* reservation pShift left beyond a node's
                             conservative capacity, cut (0 when it fits) */
    int64_t demand_cut;   /* demand beyond r that did not fit (part 2) */
    double t_solve;       /* seconds (wall) in shardroot_solve() */
} shardroot_stats_t;

/* Returns a new empty root step (no shards, no nodes), or NULL if out of
 * memory.  Caller owns it (shardroot_destroy()). */
shardroot_t *shardroot_new(void);

/* Frees r and sets *rp to NULL.  Accepts NULL and *rp == NULL. */
void shardroot_destroy(shardroot_t **rp);

/* Sizes r for `shards` shards (1..SHARDMAP_MAX) and `nodes` nodes (0..
 * 4096) and clears every input and slice (a node not set has capacity 0:
 * down).  Returns 0, -EINVAL, -ENOMEM (r then empty). */
int shardroot_reset(shardroot_t *r, int shards, int nodes);

/* Node n's capacity and conservative capacity (conservative is held to
 * capacity).  Returns 0, -EINVAL (bad index, negative value). */
int shardroot_set_node(shardroot_t *r, int n, int64_t capacity, int64_t conservative);

/* Shard s's reservation left to place (ctrl_r_target()).  Returns 0 or
 * -EINVAL. */
int shardroot_set_target(shardroot_t *r, int s, int64_t target);

/* What shard s needs on node n (ctrl_shard_needs()): must, the
 * reservation its buckets can place nowhere else (a bucket's remaining
 * reservation less its demand on the other nodes), r_room, the
 * reservation its buckets could take there, and demand, its demand there
 * (must <= r_room <= demand, held so).  Returns 0 or -EINVAL. */
int shardroot_set_need(shardroot_t *r, int s, int n, int64_t must, int64_t r_room,
                       int64_t demand);

/* Where shard s placed its reservations on node n in its last round
 * (ctrl_shard_needs()'s placed; 0 if unknown): the root keeps that
 * placement where it still fits (the second tier of part 1), so that over
 * rounds the shards' own R passes and the root's converge as one
 * controller's would.  Returns 0 or -EINVAL. */
int shardroot_set_placed(shardroot_t *r, int s, int n, int64_t placed);

/* Divides every node's capacity among the shards (the header says how).
 * Returns 0; -ENOMEM or a pShift error (-EOVERFLOW for sums beyond
 * int64_t), after which every slice is 0 (fail closed: a shard without a
 * slice places nothing on the node). */
int shardroot_solve(shardroot_t *r, const pshift_opts_t *o);

/* Shard s's slice of node n after shardroot_solve(): *est of the capacity
 * (the shard's L pass and everything), *cons of the conservative capacity
 * (its R pass), *r (may be NULL) the part given to its reservations.
 * Zeros for bad indexes or before a solve. */
void shardroot_slice(const shardroot_t *r, int s, int n, int64_t *est, int64_t *cons,
                     int64_t *rpart);

const shardroot_stats_t *shardroot_stats(const shardroot_t *r);

#endif
