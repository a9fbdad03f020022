/* shardgen.h - the cluster's shard configuration through time: K shards of generation G, and a change to K' (generation G + 1) that takes over at a period boundary `from`, so that every controller, node and bqos-ctl switches the shard map (common/shardmap.h) at the same period, whenever it learnt of the change.  The value of etcd's /bqos/C/shards. */
#ifndef BQOS_COMMON_SHARDGEN_H
#define BQOS_COMMON_SHARDGEN_H

#include <stddef.h>
#include <stdint.h>

/* The configuration, as etcd's /bqos/C/shards holds it:
 *   {"k": K, "gen": G}                                    (steady)
 *   {"k": K, "gen": G, "next": {"k": K', "gen": G + 1, "from": MS}}
 * MS is the wall clock (Unix milliseconds) at which the period P that
 * runs on K' shards starts: every shard starts its periods on whole
 * multiples of --period of the wall clock, so P is the same period for all
 * of them.  Before MS the map of K holds, from MS the map of K'.  A key of
 * only {"k": K} (written before generations) is generation 1.  Plain data:
 * copy it freely; any thread. */
typedef struct {
    int k;             /* shards before `from` (all the time without next): 1..SHARDMAP_MAX */
    uint64_t gen;      /* k's generation, >= 1 */
    int next_k;        /* 0: no change; else the shards from `from` on */
    uint64_t next_gen; /* gen + 1 (with next_k) */
    int64_t from_ms;   /* with next_k: the wall-clock millisecond P starts at (> 0) */
} shardgen_t;

/* What a parse refused and where: `where` is the member ("next.from", or
 * "" for the text itself: then line and column are jansson's). */
typedef struct {
    char where[24];
    char what[168];
    int line, col;
} shardgen_error_t;

/* Wall clocks of controllers and nodes differ by what NTP leaves (a few
 * milliseconds); a period is "from P on" if its middle is at or after
 * from_ms, so callers pass an instant well inside the period. */

/* The steady configuration of k shards, generation 1. */
shardgen_t shardgen_steady(int k);

/* Parses `len` bytes of text (the key's value).  Rejects: not JSON, not an
 * object, k missing or outside 1..SHARDMAP_MAX, gen not a positive
 * integer, next not an object, next.k outside 1..SHARDMAP_MAX or equal to
 * k, next.gen not gen + 1, next.from not a positive integer below 2^53.
 * Other members are allowed (later versions).  Returns 0 with *g filled, or
 * -EINVAL with *err (may be NULL) saying what and where (*g untouched). */
int shardgen_parse(const char *text, size_t len, shardgen_t *g, shardgen_error_t *err);

/* Writes g as the key's JSON (members in the order above) into buf (size
 * bytes, NUL-terminated).  Returns the length, -EINVAL (g not valid), or
 * -ENOSPC (buf too small; 128 bytes always suffice). */
int shardgen_format(const shardgen_t *g, char *buf, size_t size);

/* Nonzero if g is valid (what shardgen_parse() accepts). */
int shardgen_valid(const shardgen_t *g);

/* The shards in force for the period holding wall instant t_ms (pass one
 * well inside the period, e.g. its middle): next_k from from_ms, else k. */
int shardgen_k_at(const shardgen_t *g, int64_t t_ms);

/* The generation in force at t_ms (as shardgen_k_at()). */
uint64_t shardgen_gen_at(const shardgen_t *g, int64_t t_ms);

/* Bucket `name`'s shard in the period holding t_ms: shardmap_of(name,
 * shardgen_k_at(g, t_ms)).  Returns 0..K-1 or -EINVAL (NULL name). */
int shardgen_of(const shardgen_t *g, const char *name, int64_t t_ms);

/* Nonzero if bucket `name` lives in shard `shard` under either map of g
 * (k's or next_k's): what a node reports to that shard while a change is
 * under way, so that the shard a bucket moves to sees its demand before
 * the first period it runs it. */
int shardgen_either(const shardgen_t *g, const char *name, int shard);

/* The most shards g ever names (max of k and next_k). */
int shardgen_kmax(const shardgen_t *g);

/* Nonzero if g leaves shard `shard` out at wall instant t_ms: the map in
 * force has no more shards than it, and no change under way names it
 * before its period (a removed shard from the change's period on, or a
 * slot beyond every K g names).  Its controllers do not lead, and a
 * node's session to it idles, until a change names it again. */
int shardgen_out(const shardgen_t *g, int shard, int64_t t_ms);

/* Starts a change to k_new shards: *g gets next = {k_new, gen + 1, from}
 * with `from` the first period boundary (a multiple of period_ms of the
 * wall clock) at least `ahead` whole periods after now_ms: the change has
 * that long to reach every controller and node.  A change
 * whose period has come (now_ms >= from_ms) is first folded in (its K
 * becomes k).  Returns 0; -EINVAL (k_new outside 1..SHARDMAP_MAX,
 * period_ms < 1, ahead < 2, now_ms < 0); -EALREADY (k_new is the K
 * already in force or under way: nothing to do); -EBUSY (another change is
 * still under way: its period has not come).  *g unchanged on error. */
int shardgen_begin(shardgen_t *g, int k_new, int64_t now_ms, int64_t period_ms, int ahead);

/* Folds a change whose period has come (now_ms >= from_ms) into *g: k =
 * next_k, gen = next_gen, no next.  Returns 1 if it did, else 0. */
int shardgen_settle(shardgen_t *g, int64_t now_ms);

/* Nonzero if g is newer than `than`: a higher generation (a change begun
 * or one settled), or the same generation and K with a change added.  The
 * rule by which a controller (reading etcd) and a node (hearing several
 * controllers) keep the configuration they follow moving forward only:
 * a lagging read or a controller that has not read the change yet never
 * takes it back. */
int shardgen_newer(const shardgen_t *g, const shardgen_t *than);

/* Nonzero if a and b are the same configuration. */
int shardgen_same(const shardgen_t *a, const shardgen_t *b);

/* Nonzero if a controller started with --shards `k_flag` --shard `shard`
 * may run under g: k_flag is g's k or next_k, or (a change has happened
 * since the cluster started: gen > 1, or one under way) `shard` is one of
 * the shards g names (its --shards predates the change: it follows g). */
int shardgen_admits(const shardgen_t *g, int k_flag, int shard);

#endif
