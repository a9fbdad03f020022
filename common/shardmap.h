/* shardmap.h - which controller shard a bucket lives in: rendezvous hashing of the bucket's name over K shards, so that a bucket is in exactly one shard (its R and L stay exact) and changing K moves only the buckets whose shard changes (about |K' - K| / max(K, K') of them).  In common/: the controllers, the nodes and bqos-ctl each compute it. */
#ifndef BQOS_COMMON_SHARDMAP_H
#define BQOS_COMMON_SHARDMAP_H

#include <stddef.h>
#include <stdint.h>

/* Shards at most (the root step's problem and the nodes' connections
 * grow with K; 256 is far beyond what one cluster needs). */
#define SHARDMAP_MAX 256

/* The rule, fixed for good (bqos-ctl, the nodes and every controller must
 * agree on it, across versions): h = FNV-1a 64 of the name's bytes (no
 * terminator); shard j's score is fmix64(h ^ fmix64(j + 1)) (common/
 * hashmix.h); the bucket's shard is the j in 0..K-1 with the highest
 * score, ties to the lower j.  Adding shard K (K -> K + 1) moves exactly
 * the buckets whose score for K beats their old best, about 1 / (K + 1) of
 * them, each from wherever it was to K; removing the last one moves only
 * its own buckets.  Pure functions, any thread. */

/* FNV-1a 64 of `name` (NUL-terminated). */
uint64_t shardmap_name_hash(const char *name);

/* Shard j's score for a name of hash h. */
uint64_t shardmap_score(uint64_t h, int j);

/* The shard of bucket `name` among k shards: 0..k-1.  Returns -EINVAL if
 * name is NULL or k is outside 1..SHARDMAP_MAX.  O(k). */
int shardmap_of(const char *name, int k);

/* The same for a hash from shardmap_name_hash() (callers that place many
 * buckets under several K hash each name once). */
int shardmap_of_hash(uint64_t h, int k);

/* What a change from k_old to k_new shards does to names[0..n-1]: into
 * from[i] and to[i] (either may be NULL) the bucket's shard before and
 * after.  Returns how many buckets move (from != to), or -EINVAL for a bad
 * k or a NULL name.  O(n x max(k_old, k_new)). */
long shardmap_moves(const char *const *names, size_t n, int k_old, int k_new, int *from, int *to);

#endif
