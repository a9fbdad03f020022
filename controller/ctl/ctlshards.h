/* ctlshards.h - bqos-ctl's routing among controller shards: which shard owns a bucket now and which takes a whole-table command, by the cluster's shards configuration (common/shardgen.h; the newest any shard gives) and the generation in force.
 *
 * A command about one bucket (set, remove, status --bucket, history
 * BUCKET) goes to one shard's controllers: --endpoint "A,B;C,D" is cut
 * into a list per shard (ctlshards_split()), every endpoint of every shard
 * is asked at once for the cluster's configuration (admin "shards",
 * ctlshards_ask_all()), and the newest answer decides the shard in the
 * period now (ctlshards_route(); ctlshards_now() does both).  Without an
 * answer, or with a K beyond the lists given, the route is by the number
 * of lists (shardmap_of()), as before generations.  A command on the
 * whole table (reload, import) goes to the first shard that answers and
 * is in the map (ctlshards_table()).
 *
 * The sockets are opened by the caller's transport (ctlshards_open_fn:
 * bqos-ctl's REQ socket with its timeouts and CURVE keys), so a bad
 * endpoint is said as every other command says it.  No global state; the
 * functions run on the calling thread and keep nothing between calls. */
#ifndef BQOS_CTLSHARDS_H
#define BQOS_CTLSHARDS_H

#include <jansson.h>
#include <stdint.h>

#include "common/curvekey.h"
#include "common/shardgen.h"

/* Opens a REQ socket of ZeroMQ context ctx connected to endpoint, sends
 * and receives bounded by timeout_ms, with keys (NULL: no CURVE; else our
 * pair and the controller's public key).  Returns it (the caller closes
 * it), or NULL (a message printed; *code may be set to an exit status). */
typedef void *(*ctlshards_open_fn)(void *ctx, const char *endpoint, int timeout_ms,
                                   const curvekey_t *keys, int *code);

/* Cuts `list` ("A,B;C,D") at its ';' into out[0..] (in place: out[]
 * points into list, which the caller keeps).  Returns the number of shards
 * (1..max), or -1 (an empty shard, or more than max). */
int ctlshards_split(char *list, const char **out, int max);

/* The configuration in admin reply r (borrowed; its "cluster": k, gen and
 * next's k, gen, from_ms) into *g.  Returns 0, or -1 (no "cluster", or
 * one shardgen_parse() rejects; *g then unspecified). */
int ctlshards_of_reply(const json_t *r, shardgen_t *g);

/* The cluster's configuration, asked of every endpoint of every shard at
 * once (eps[0..n-1]: a comma list per shard, borrowed; admin "shards",
 * which a standby answers too; sockets from open_fn): the newest answer
 * (shardgen_newer()) into *g.  Waits until a controller of every shard
 * answered, 150 ms after the first answer, or timeout_ms, whichever comes
 * first; at most 64 endpoints are asked.  Answers of another protocol
 * version, refusals and unparsable ones are ignored.  Returns 0, or -1
 * (no controller answered with a configuration, or out of memory; *g
 * untouched). */
int ctlshards_ask_all(const char **eps, int n, int timeout_ms, const curvekey_t *keys,
                      ctlshards_open_fn open_fn, shardgen_t *g);

/* Bucket `name`'s shard at wall instant now_ms (Unix ms) among n endpoint
 * lists (1..SHARDMAP_MAX): shardgen_of(g, ...) when g is not NULL and its
 * largest K fits n, else shardmap_of(name, n).  Returns 0..n-1. */
int ctlshards_route(const shardgen_t *g, int n, const char *name, int64_t now_ms);

/* ctlshards_ask_all() then ctlshards_route() at the wall clock now.
 * Returns 0..n-1 (never an error: without an answer, by n). */
int ctlshards_now(const char **eps, int n, int timeout_ms, const curvekey_t *keys,
                  ctlshards_open_fn open_fn, const char *name);

/* The shard that takes a command on the whole bucket table (reload,
 * import) among n endpoint lists, at wall instant now_ms: the first shard,
 * from shard 0, of which a controller answered (heard[0..n-1], nonzero:
 * answered) and that configuration g (NULL: none known; ignored when its
 * K does not fit n) does not leave out (shardgen_out()).  The table in
 * etcd is one for all shards, and any shard's leader writes it whole (its
 * writes are fenced by its own leader key and by the table head's
 * revision: leader.h), so a dead shard 0 need not refuse them.  Returns
 * 0..n-1; 0 when no shard qualifies (its request then says why). */
int ctlshards_table_pick(const shardgen_t *g, const int *heard, int n, int64_t now_ms);

/* Every shard asked at once as by ctlshards_ask_all(), then
 * ctlshards_table_pick() at the wall clock now.  Returns 0..n-1. */
int ctlshards_table(const char **eps, int n, int timeout_ms, const curvekey_t *keys,
                    ctlshards_open_fn open_fn);

/* Wall-clock (CLOCK_REALTIME) milliseconds now. */
int64_t ctlshards_wall_ms(void);

#endif
