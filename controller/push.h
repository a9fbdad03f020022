/* push.h - one node's whole message of a round in one call: its token records, byte records and, when it has not acknowledged the controller's table, the table's names and weights; or a heartbeat when there is nothing to say.  Under changed grants only, the records whose grant is unchanged are left out and the node renews them.
 *
 * Socket-free: bqos-controller's node endpoint (daemon/nodes.c) adds the
 * timing, encodes and sends.  Reads a ctrl_t and so belongs to its thread. */
#ifndef BQOS_PUSH_H
#define BQOS_PUSH_H

#include <stddef.h>
#include <stdint.h>

#include "common/proto.h"
#include "controller/ctrl.h"

/* Where a node's message goes: the registered process. */
typedef struct {
    const char *name;      /* the node's name (owned by the ctrl_t) */
    uint64_t instance;     /* its process's id from its hello, 0 = none
                              (proto_node_id() makes the routing id) */
} push_to_t;

/* What the node holds as the base of a pair (its table slot): the record
 * of our renewing message gseq g (0: none). */
typedef struct {
    int64_t r, l;
    uint64_t g;
} push_base_t;

/* Changed grants only, per node and session (docs/protocol.md "Changed
 * grants"): what we believe the node holds as bases.  Zero-initialised
 * = off; push_grants_session() turns it on.  Belongs to the ctrl_t's
 * thread.  Memory follows the bases, not the table: the bases are kept in
 * pages of PUSH_BASE_PAGE slots of the node's table, a page made at the
 * first base in it (a table of a million idle or provisional pairs has
 * none: 8 B per page of slots); the slot lists and the records hold what
 * one message mentions, and a full push's room is given back at the next
 * message. */
#define PUSH_BASE_PAGE 1024
typedef struct {
    int on;                /* the node takes changed grants */
    uint64_t gseq;         /* tokens messages numbered this session */
    uint64_t renew_g;      /* gseq of our last renewing message (0: none:
                              every grant is sent) */
    uint32_t table, peer_table; /* generations the bases are of */
    push_base_t **page;    /* [npage]: slot j's base is page[j / PUSH_BASE_PAGE]
                              [j % PUSH_BASE_PAGE]; a NULL page: all zero */
    size_t npage;
    size_t nbase;          /* slots the pages cover (the node's table) */
    proto_tokens_rec_t *buf; /* the records of the message being built */
    size_t cap;
    uint32_t *list, *next; /* slots whose base is of renew_g (list), the
                              next list being built (next) */
    size_t caplist, capnext;
    size_t nlist;
    uint64_t omitted;      /* records left out (renewed by the node) */
    uint64_t regrants;     /* regrants the node asked for */
} push_grants_t;

/* Starts a session (a welcome): on if the node's hello offered renew and
 * we send changed grants.  Forgets every base. */
void push_grants_session(push_grants_t *g, int on);

/* The node saw a gap (report "regrant"): every grant goes again at the
 * next renewing message. */
void push_grants_regrant(push_grants_t *g);

/* Frees g's arrays and zeroes it.  Accepts NULL. */
void push_grants_clear(push_grants_t *g);

/* Fills m (after proto_msg_init(); the timing fields are left alone) with
 * the message for up node `node` after ctrl_compute(), whose outcome was
 * `skipped`: PROTO_TOKENS with the node's records (after a skipped round
 * only its byte records: the IO records stand), the controller table's
 * generation and, if the node needs them, its names and weights; or
 * PROTO_HEARTBEAT when the round was skipped and there are no byte
 * records, or there is nothing to say.  Either carries the generation of
 * the node's own table we hold (peer_table).
 *
 * With g on (may be NULL: today's messages), every tokens message is
 * numbered (gseq); after a computed round it renews ("renew"): a record
 * equal to the base the node holds from our last renewing message is
 * left out (the node applies its base again, the same as the record),
 * the others follow as bases, then provisional splits, which are not
 * bases ("based").  Any table change forgets the bases.
 *
 * Records, names and weights are borrowed from c or g (valid until the
 * next ctrl_compute(), ctrl_set_buckets() or push_msg(); never freed
 * through m).  Fills *to.  Returns 0, -EINVAL if the node is not up (m
 * untouched).  Out of memory, g forgets its bases and m is the whole
 * message, numbered but not renewing. */
int push_msg(const ctrl_t *c, int node, int skipped, push_grants_t *g, proto_msg_t *m,
             push_to_t *to);

#endif
