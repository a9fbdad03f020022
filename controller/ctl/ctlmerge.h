/* ctlmerge.h - bqos-ctl's view of several controller shards as one: every shard leader's answer to one command (status, status --node, history, buckets) merged into one JSON view, paged and sorted on the merge.
 *
 * Use (one command, any number of shards up to SHARDMAP_MAX):
 *   m = ctlmerge_new(req, k)            req: the request bqos-ctl built
 *   sreq = ctlmerge_shard_request(m)    what each shard is asked (a status's
 *                                       page moved onto the merge)
 *   per shard s: ctlmerge_add(m, s, answer or NULL)
 *   view = ctlmerge_view(m)             the merged view (JSON, caller owns)
 *   ctlmerge_destroy(&m)
 *
 * The views (bqos-ctl(1), "Controller shards"; each but buckets' keeps
 * every shard's answer in "shards", null where there was none):
 *   status   the clock of the first shard that answered; "nodes": each node
 *            once, its row in each shard ("shards") and the figures
 *            (capacity the smallest of the shards' estimates, buckets and
 *            fallbacks summed, last_report_ms the oldest); "buckets": every
 *            shard's rows with their "shard", in the request's "sort" order
 *            (the controller's: name ascending, figures descending, no limit
 *            above every limit, ties and "table" in shard order); "summary":
 *            the shards' sums, and shown, offset and sort of the merge.
 *   status_node  one node across the shards: the clock; "node": its name,
 *            "shards" (its row in each shard, null where the shard does not
 *            know it), capacity the smallest, buckets summed, last_report_ms
 *            the oldest, fallback if any shard says so; "buckets": its
 *            buckets of every shard with their "shard", in shard then table
 *            order (the controller lists a node's buckets in table order);
 *            "summary" as the status's ("sort": "table").  A shard's
 *            not_found refusal (the node never said hello there) is kept in
 *            "shards" and is no error of the view.
 *   history  the period of the first that answered, "judged" the smallest,
 *            "buckets" every shard's with their "shard" (a bucket lives in one).
 *   buckets  {"buckets": every shard's configured buckets} (a bucket file).
 * Paging: each shard is asked for its first offset + limit rows (no
 * "offset"), so rows offset..offset + limit of the merge are among them.
 *
 * Pure JSON, no sockets; a ctlmerge_t belongs to the thread that made it. */
#ifndef BQOS_CTLMERGE_H
#define BQOS_CTLMERGE_H

#include <jansson.h>

typedef struct ctlmerge ctlmerge_t;

/* What is merged, from the request's "cmd". */
typedef enum {
    CTLMERGE_STATUS,
    CTLMERGE_NODE,    /* "status_node" */
    CTLMERGE_HISTORY,
    CTLMERGE_BUCKETS,
} ctlmerge_kind_t;

/* A merge of `nshards` (1..SHARDMAP_MAX) answers to `req` (borrowed; its
 * "cmd": status, status_node, history or buckets; a status's and a
 * status_node's "limit" (absent or null: no limit), "offset", "sort" and a
 * status_node's "name" are read).  Returns the merge (caller owns it:
 * ctlmerge_destroy()) or NULL with errno EINVAL (another command, a bad
 * count, a negative offset or limit, a status_node without a name) or
 * ENOMEM. */
ctlmerge_t *ctlmerge_new(const json_t *req, int nshards);

/* Destroys *m (NULL accepted) and the answers it holds; sets *m to NULL. */
void ctlmerge_destroy(ctlmerge_t **m);

/* The kind of merge `m` does. */
ctlmerge_kind_t ctlmerge_kind(const ctlmerge_t *m);

/* The request to send each shard: a copy of the request with a status's
 * page moved onto the merge ("limit" offset + limit when limited, no
 * "offset").  Returns a new object (caller owns) or NULL (out of memory). */
json_t *ctlmerge_shard_request(const ctlmerge_t *m);

/* Shard `shard`'s answer: `reply` (the parsed reply, "ok" true or a
 * refusal; borrowed: the merge takes its own reference) or NULL (it did not
 * answer).  Returns 0, or -EINVAL (shard out of range, already added).
 * Shards may be added in any order; one not added counts as no answer. */
int ctlmerge_add(ctlmerge_t *m, int shard, json_t *reply);

/* The number of shards added whose answer is "ok" (for status_node: the
 * shards that know the node). */
int ctlmerge_answered(const ctlmerge_t *m);

/* The merged view (the header's comment says what it holds).  Returns a new
 * object (caller owns) or NULL (out of memory). */
json_t *ctlmerge_view(const ctlmerge_t *m);

#endif
