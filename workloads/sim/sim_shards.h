/* sim_shards.h - bqos-sim --shards K: the pshift policies' controller side as K controller shards with the root step between their rounds (controller/shardset.h), each node registered with every shard under that shard's buckets of its table, its report split among them and their tokens merged into one push. */
#ifndef BQOS_SIM_SHARDS_H
#define BQOS_SIM_SHARDS_H

#include "common/bucketfile.h"
#include "common/proto.h"
#include "controller/ctrl.h"

typedef struct sim_shards sim_shards_t;

/* K shards of controllers made with `cfg` holding the buckets of `bf`
 * (the whole table, in the simulator's order), or NULL (bad K, a table
 * with parents, out of memory).  Caller owns it.  Main thread. */
sim_shards_t *sim_shards_new(const ctrl_config_t *cfg, int k, const bucketfile_t *bf);

void sim_shards_destroy(sim_shards_t **sp);

/* The table changed (runtime sets): every shard gets its part.  Returns 0
 * or shardset_set_buckets()'s error. */
int sim_shards_set_buckets(sim_shards_t *sh, const bucketfile_t *bf);

/* Node `node` (0, 1, ... in order) says hello with *hello (its table):
 * registered on every shard with that shard's names of its table.
 * Returns 0, -EPROTO (out of order), or ctrl_node_hello()'s error. */
int sim_shards_hello(sim_shards_t *sh, int node, const proto_msg_t *hello);

/* Starts the round on every shard and runs the root step (with `left` of
 * the period to run).  Returns 0 or -errno. */
int sim_shards_begin(sim_shards_t *sh, uint64_t period, uint32_t interval, double left);

/* Node `node`'s report *m, its records given to each shard for its
 * buckets.  Returns 0, -ENOTSUP (a report with a new table), or
 * ctrl_node_report()'s error. */
int sim_shards_report(sim_shards_t *sh, int node, const proto_msg_t *m);

/* Every shard computes (late by `late` seconds, ctrl_round_late()); *all
 * skipped is set if every shard skipped.  Returns 0 or -errno. */
int sim_shards_compute(sim_shards_t *sh, double late, int *skipped);

/* Node `node`'s tokens of every shard, bucket fields in the whole table's
 * order, borrowed until the next sim_shards_compute().  Returns the
 * count. */
size_t sim_shards_tokens(sim_shards_t *sh, int node, const proto_tokens_rec_t **recs);

#endif
