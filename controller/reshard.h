/* reshard.h - one controller shard through a change of K (issue 30): which of the cluster's buckets the shard runs in the period at hand under the cluster's shard configuration (common/shardgen.h), and the switch at the change's period P: from P's first round the shard runs the new map's part, so a bucket that leaves it is granted nothing there from P and one that arrives is computed there from P.
 *
 * The caller (the daemon's loop, at each period's first round, before
 * ctrl_round_begin()):
 *   reshard_learn(rs, &g_from_etcd);        whenever etcd's key is read
 *   if (reshard_due(rs, mid_of_period_ms)) {
 *       reshard_switch(rs, mid_of_period_ms);
 *       ...give ctrl the new part: reshard_part() / ctrl_set_buckets()...
 *   }
 * Per-node state of the buckets that stay is kept by ctrl_set_buckets();
 * a bucket that arrives starts as a new bucket does (its provisional
 * split, then the nodes' reports); served counters start at 0 with every
 * period on both sides, so nothing is handed from shard to shard.
 *
 * A reshard_t is plain data of the thread that owns the shard's ctrl_t. */
#ifndef BQOS_RESHARD_H
#define BQOS_RESHARD_H

#include <stdint.h>

#include "common/bucketfile.h"
#include "common/shardgen.h"

typedef struct {
    int shard;         /* this controller's shard, 0..SHARDMAP_MAX-1 */
    shardgen_t g;      /* the cluster's configuration as last learnt */
    int known;         /* g came from reshard_learn() (0: reshard_init()'s
                          assumption, e.g. --shards, which the first
                          configuration learnt replaces whatever it says) */
    int k_run;         /* the K whose part the shard's ctrl runs (the map
                          of the last reshard_switch(), or g.k at init) */
    uint64_t gen_run;  /* its generation */
    uint64_t switches; /* reshard_switch() calls that changed k_run */
    uint64_t learnt;   /* configurations taken by reshard_learn() */
    uint64_t stale;    /* configurations refused as older than g */
} reshard_t;

/* Starts at g (valid, shardgen_valid()) with the part of g.k: a shard
 * >= g.k runs nothing until the map in force names it.  Returns 0 or
 * -EINVAL (bad shard or g). */
int reshard_init(reshard_t *rs, int shard, const shardgen_t *g);

/* Takes a configuration read from etcd (the first one whatever it says:
 * what reshard_init() had was assumed): a newer one (a higher generation,
 * or the same with a change under way that we did not know) replaces g;
 * the same one is a no-op; an older one (a lagging read, or a key rewritten
 * by hand to an older generation) is refused and counted: a change once
 * learnt is never forgotten, so the switch at its period happens whatever
 * etcd says later.  Returns 1 (taken), 0 (the same), -ESTALE (older),
 * -EINVAL (not valid). */
int reshard_learn(reshard_t *rs, const shardgen_t *g);

/* Nonzero if the period holding wall instant t_ms (pass its middle) runs
 * on another map than the part the shard runs now: call reshard_switch()
 * and give ctrl the new part before that period's first round. */
int reshard_due(const reshard_t *rs, int64_t t_ms);

/* Moves k_run to the map in force at t_ms.  Returns 1 if it changed. */
int reshard_switch(reshard_t *rs, int64_t t_ms);

/* Nonzero if bucket `name` is this shard's under the map it runs now. */
int reshard_mine(const reshard_t *rs, const char *name);

/* Nonzero if this shard runs no bucket under the map it runs now (a new
 * shard before its period, a removed one after). */
int reshard_idle(const reshard_t *rs);

/* The shard's part of `whole` under the map it runs now, with whole's
 * rules: *out (caller owns it; bucketfile_destroy()).  Returns 0,
 * -ENOTSUP (a bucket with a parent: a tree would have to live in one
 * shard; not done), -ENOMEM (*out NULL). */
int reshard_part(const reshard_t *rs, const bucketfile_t *whole, bucketfile_t **out);

#endif
