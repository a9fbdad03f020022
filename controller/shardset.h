/* shardset.h - K controller shards in one process (the benchmark's and the simulator's; the daemons will run one shard each): the table split by shardmap, a ctrl_t per shard, and the root step between their rounds (shardroot), with each shard's tokens mapped back to the whole table's bucket order.
 *
 * Each round (in the caller's order):
 *   shardset_root(ss)                 the root step: node capacities (the
 *                                     shards' estimates) and the needs the
 *                                     shards' last computed rounds left,
 *                                     divided, and each shard's slices set
 *   per shard s: ctrl_round_begin(), reports, ctrl_compute() on
 *   shardset_shard(ss, s), then its tokens' bucket field through
 *   shardset_global(ss, s, local)
 * Nodes are registered on every shard by the caller, in the same order
 * (node index n is the same node in every shard), each shard with the
 * node's names of that shard's buckets only (shardset_of()).
 *
 * A shardset_t belongs to one thread, as its ctrl_t's do. */
#ifndef BQOS_SHARDSET_H
#define BQOS_SHARDSET_H

#include <stddef.h>
#include <stdint.h>

#include "common/bucketfile.h"
#include "controller/ctrl.h"
#include "controller/shardroot.h"

typedef struct shardset shardset_t;

/* pShift's longest shift path in a shard's passes unless cfg.max_path says
 * otherwise: within slices a shard's R often cannot all fit (the root
 * sees sums), and at 1,024 nodes pShift then searches paths of tens of
 * edges over the |S| x |S| map for seconds (docs/decisions.md "Controller
 * shards, the first slice"); the root's own pShift moves R between shards. */
#define SHARDSET_MAX_PATH 2

/* Returns k (1..SHARDMAP_MAX) empty shards, each a ctrl_new(cfg) (with
 * max_path SHARDSET_MAX_PATH if cfg's is 0, and no_queue_lift: a shard's
 * R pass sees its slice of a node full where the node is not, and lifting
 * its last round's R off the queues there cost Experiment 1 0.1-0.3 points
 * of buckets at >= 95% of R), or NULL
 * (bad k or config, out of memory).  Caller owns it. */
shardset_t *shardset_new(const ctrl_config_t *cfg, int k);

/* Frees every shard and sets *sp to NULL.  Accepts NULL. */
void shardset_destroy(shardset_t **sp);

int shardset_count(const shardset_t *ss);

/* Shard s's controller state (borrowed; NULL for a bad s). */
ctrl_t *shardset_shard(shardset_t *ss, int s);

/* Splits `bf` (the whole table, in its order: global index i = the i-th
 * bucket) by shardmap_of() and gives each shard its part
 * (ctrl_set_buckets()).  A table with parents is refused (-ENOTSUP: a
 * tree's buckets would have to share a shard; not done).  Returns 0,
 * -ENOTSUP, -ENOMEM or ctrl_set_buckets()'s error. */
int shardset_set_buckets(shardset_t *ss, const bucketfile_t *bf);

/* The shard of bucket `name`: shardmap_of(name, k). */
int shardset_of(const shardset_t *ss, const char *name);

/* Global index of shard s's table bucket `local` (its tokens' bucket
 * field), or -1.  O(1).  Valid until the next shardset_set_buckets() or
 * ctrl_compute() that adds template-made buckets (not supported with
 * shards: those keep -1). */
int shardset_global(const shardset_t *ss, int s, uint32_t local);

/* The root step for the round about to run with `left` (0..1] of the
 * period left: every node's capacity (the smallest of the shards'
 * estimates, tokens for the time left) divided among the shards by the
 * needs of their last computed rounds, and the slices set
 * (ctrl_node_set_slice()).  `o` are pShift's options (NULL: defaults).
 * Returns 0, -ENOMEM or a pShift error (then every shard's slices are 0
 * on every node: nothing placed, fail closed). */
int shardset_root(shardset_t *ss, double left, const pshift_opts_t *o);

/* Shard s's slices of node n by the last root step (tokens for the time
 * left then; shardroot_slice()); zeros for bad indexes. */
void shardset_slice(const shardset_t *ss, int s, int n, int64_t *est, int64_t *cons);

/* The last root step's statistics. */
const shardroot_stats_t *shardset_root_stats(const shardset_t *ss);

#endif
