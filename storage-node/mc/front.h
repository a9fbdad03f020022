/* front.h - the memcached front of bqos-node: client connections on a
 * libevent loop, per-bucket scheduling of every key IO, forwarding through
 * the backend (backend.h), and replies in request order per connection.
 *
 * Life cycle of a request: the loop thread reads and parses a command
 * (mcproto), appends a reply slot to the connection's ordered slot list,
 * and enqueues one IO per key in the scheduler queue of the key's bucket.
 * Once per pass of the event loop (after that pass's reads; after
 * completions, in the next pass, once the requests that arrived meanwhile
 * are queued), while fewer than `outstanding` IOs are at the backend, the
 * front takes IOs through its gate (gate_take(), gate.h) and hands them to
 * the backend as one chain; their completions come back on the loop
 * thread, which counts them (gate_done(): backend busy time) and writes
 * every finished slot at the head of the list.  A multi-key get is one slot with
 * one IO per key, answered when all are done.
 *
 * Threads: a front_t and everything in it belong to the loop thread of the
 * event_base it was created on; every function here must be called there. */
#ifndef BQOS_FRONT_H
#define BQOS_FRONT_H

#include <stddef.h>
#include <stdint.h>

#include "storage-node/io/gate.h"
#include "storage-node/io/listener.h"
#include "storage-node/io/tls.h"
#include "storage-node/mc/backend.h"
#include "storage-node/mc/mcauth.h"
#include "storage-node/mc/mcproto.h"
#include "storage-node/core/cost.h"
#include "storage-node/core/sched.h"

struct event_base;

typedef enum {
    FRONT_DEFAULT_SERVE = 0,  /* keys of unknown buckets go to "default" */
    FRONT_DEFAULT_REJECT = 1  /* ... are answered SERVER_ERROR unknown bucket */
} front_default_t;
/* Once the node has a bucket table (gate_table() is not GATE_TABLE_NONE:
 * --config, or a controller's) the table decides instead.  With a
 * `default` in it, as above (unlisted buckets made on first sight are
 * routed to `default` by the agent under a controller).  Without one
 * (GATE_TABLE_CLOSED), a key of a bucket it does not list (gate_listed();
 * no separator, an unknown prefix; nothing made on first sight) is
 * answered "CLIENT_ERROR unknown bucket: no default bucket configured"
 * (fail closed).  --default-bucket reject refuses such keys in any case. */

/* Settings; the strings are copied by front_new(). */
typedef struct {
    const char *name;            /* node name, shown in stats */
    listener_addr_t listen;      /* where clients connect (listener_parse());
                                    port 0 picks a free one (conns_port()) */
    const char *backend_host;    /* the real memcached */
    unsigned backend_port;       /* 0: backend_host is a Unix socket's path */
    int workers;                 /* backend threads, >= 0 (0: backend
                                    calls on the loop thread, backend.h) */
    int outstanding;             /* max IOs at the backend, >= 1 */
    int batch;                   /* ops a worker may take at once (gets
                                    among them share a round trip) */
    sched_policy_t policy;
    int weighted;                /* weighted round robin (bucket weights) */
    char separator;              /* bucket = key prefix up to this byte */
    front_default_t default_mode;
    int max_auto_buckets;        /* buckets created on first sight; 0: none */
    mcp_conf_t proto;            /* the largest value accepted; flush_all
                                    refused (memcached's -F) */
    int max_conns;               /* connections beyond are closed at once */
    size_t conn_reply_limit;     /* unsent reply bytes a connection may hold:
                                    closed above; not read at a quarter
                                    (or closed after 60 s there) */
    size_t reply_memory;         /* node-wide budget of unsent reply bytes */
    mcauth_t *auth;              /* --auth-file: clients log in first
                                    (mcauth.h); borrowed; NULL: no login */
    const tls_t *tls;            /* --tls-cert/--tls-key: the listen port is a
                                    TLS port, every client starts with the
                                    handshake (io/tls.h); borrowed, outlives
                                    the front; NULL: plain */
    int threads;                 /* --threads: the loop thread and threads - 1
                                    reply-writer threads (io/writers.h), 1..65;
                                    1 (the default): every write on the loop
                                    thread; > 1 only without tls */
    int batch_reads;             /* with threads 1 and without tls: a pass's
                                    client reads in one system call
                                    (conns_read_batched()); 1 by default,
                                    0: one recv(2) per read event */
    cost_config_t cost;          /* what an IO costs in units (cost.h): a
                                    store is a write of its value, charged
                                    when queued; a get a read of what it
                                    returned, charged when it completes */
} front_config_t;

/* Fills *cfg with the defaults (see docs/node.md). */
void front_config_defaults(front_config_t *cfg);

typedef struct front front_t;

/* Creates the gate (which creates the node's scheduler, with the bucket
 * "default"), starts the backend pool and binds the listening socket.  Returns the front (caller owns it,
 * destroy with front_destroy()), or NULL and *err = -EINVAL (bad settings),
 * -EADDRINUSE or another -errno from bind, -ENOMEM. */
front_t *front_new(struct event_base *base, const front_config_t *cfg,
                   int *err);

/* The front's gate (owned by the front): its connections (gate_conns():
 * address, port, limits), the scheduler's buckets, tokens and stats
 * (gate_set_tokens(): the token test hook; the controller client),
 * gate_kick() and the graceful
 * stop, gate_shutdown(): the listener closes, reading stops, every queued
 * IO is answered "SERVER_ERROR shutting down", in-flight IOs finish, every
 * reply is written, then the event loop breaks. */
gate_t *front_gate(front_t *f);

/* The front's memcached backend pool (borrowed: f owns it), for its
 * health (backend_health()). */
const backend_t *front_backend(const front_t *f);

/* Frees everything (connections are closed, the backend pool is stopped);
 * sets *fp to NULL.  Accepts NULL. */
void front_destroy(front_t **fp);

#endif
