/* push.h - one node's whole message of a round in one call: its token records, byte records and, when it has not acknowledged the controller's table, the table's names and weights; or a heartbeat when there is nothing to say.
 *
 * Socket-free: bqos-controller's node endpoint (daemon/nodes.c) adds the
 * timing, encodes and sends.  Reads a ctrl_t and so belongs to its thread. */
#ifndef BQOS_PUSH_H
#define BQOS_PUSH_H

#include <stdint.h>

#include "common/proto.h"
#include "controller/ctrl.h"

/* Where a node's message goes: the registered process. */
typedef struct {
    const char *name;      /* the node's name (owned by the ctrl_t) */
    uint64_t instance;     /* its process's id from its hello, 0 = none
                              (proto_node_id() makes the routing id) */
} push_to_t;

/* Fills m (after proto_msg_init(); the timing fields are left alone) with
 * the message for up node `node` after ctrl_compute(), whose outcome was
 * `skipped`: PROTO_TOKENS with the node's records (after a skipped round
 * only its byte records: the IO records stand), the controller table's
 * generation and, if the node needs them, its names and weights; or
 * PROTO_HEARTBEAT when the round was skipped and there are no byte
 * records, or there is nothing to say.  Either carries the generation of
 * the node's own table we hold (peer_table).  Records, names and weights
 * are borrowed from c (valid until the next ctrl_compute() or
 * ctrl_set_buckets(); never freed through m).  Fills *to.  Returns 0, or
 * -EINVAL if the node is not up (m untouched). */
int push_msg(const ctrl_t *c, int node, int skipped, proto_msg_t *m, push_to_t *to);

#endif
