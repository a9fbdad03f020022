/* mcreply.h - the memcached reply text of a finished backend command, and
 * the command counters of `stats`.  Threads: the loop thread. */
#ifndef BQOS_MCREPLY_H
#define BQOS_MCREPLY_H

#include <event2/buffer.h>
#include <stddef.h>
#include <stdint.h>

#include "storage-node/mc/backend.h"
#include "storage-node/mc/mcproto.h"
#include "storage-node/mc/mcstats.h"

/* Appends to `out` the reply of command `cmd` whose `n` finished backend ops
 * lie `stride` bytes apart from `first`: one op's SERVER_ERROR fails the
 * whole command; gets list their hits (counted in st) and END. */
void mcreply_ops(struct evbuffer *out, mcp_cmd_t cmd, const backend_op_t *first,
                 size_t stride, int n, mcstats_t *st);

/* mcreply_ops()'s reply written to buf (at most cap bytes) when it is one
 * of the usual shapes (a get family's VALUEs and END, one fixed line):
 * returns its length, with st counted as mcreply_ops() counts it; -1:
 * another shape or more than cap bytes, nothing written or counted (use
 * mcreply_ops()). */
long mcreply_flat(char *buf, size_t cap, mcp_cmd_t cmd, const backend_op_t *first,
                  size_t stride, int n, mcstats_t *st);

/* Counts request r in st's command counters (or in *other). */
void mcreply_count(mcstats_t *st, const mcp_req_t *r, uint64_t *other);

#endif
