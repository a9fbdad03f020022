/* ctlclient.h - the node's side of the control protocol on the wire: one ZeroMQ DEALER
 * per controller around the node's agent (storage-node/core/agent.h, which
 * holds the logic: hello, reports of the scheduler's counters at every
 * interval start, tokens and bucket weights applied by index, fail static
 * or round robin when the controller goes silent, obeying only the highest
 * leadership epoch; docs/protocol.md).  Hellos, reports, heartbeats and the
 * goodbye go to every controller; the agent obeys the leader.
 *
 * Usage from a libevent loop (everything on the loop thread that owns the
 * scheduler; nothing here locks or blocks):
 *
 *   ctlclient_config_t cc;
 *   ctlclient_config_defaults(&cc);
 *   cc.endpoint = "tcp://127.0.0.1:7070"; cc.agent.name = "n1";
 *   ctlclient_t *c = ctlclient_new(&cc, sched, &ops, &err);
 *   watch ctlclient_fd(c) for EV_READ|EV_PERSIST -> ctlclient_on_readable(c, now)
 *   a timer            -> ctlclient_tick(c, now), re-armed to the returned delay
 *   ...
 *   ctlclient_destroy(&c);      // sends goodbye
 *
 * `now` is seconds on a monotonic clock (ctlclient_now()).  ZMQ_FD is edge
 * triggered: both entry points drain every message ZeroMQ has ready before
 * returning, so the caller never has to poll ZMQ_EVENTS itself. */
#ifndef BQOS_CTLCLIENT_H
#define BQOS_CTLCLIENT_H

#include <stdint.h>

#include "common/jsonloc.h"
#include "common/proto.h"
#include "common/shardgen.h"
#include "storage-node/core/agent.h"
#include "storage-node/core/sched.h"

/* Most controllers one node talks to (--controller A,B,...). */
#define CTLCLIENT_MAX_ENDPOINTS 8

typedef struct {
    const char *endpoint;     /* controller node endpoint, or several
                                 separated by commas (copied; one DEALER
                                 each, at most CTLCLIENT_MAX_ENDPOINTS) */
    agent_config_t agent;     /* the agent's settings (agent.h; its
                                 defaults): agent.name is also the DEALER
                                 identity; agent.instance, this process's
                                 id in hello and routing id, 1..2^53 (0: a
                                 random one, the default); agent.peer is
                                 set by the client (the endpoint list) */
    double hello_s;           /* hello retry while not welcomed (1.0) */
    double heartbeat_s;       /* heartbeat when nothing else was sent for
                                 this long while welcomed (1.0) */
    const char *curve_key;      /* NULL, or this node's CURVE secret key file
                                   (.key, mode 0600), with ... */
    const char *controller_key; /* ... the controllers' public key file
                                   (.pub; one key serves every controller).
                                   Both or neither (docs/security.md) */
    int shards, shard;        /* controller shards (0: none): this client is
                                 the session with shard `shard` of `shards`
                                 (its leader and standbys).  Its hellos,
                                 names parts and reports name only the
                                 node's buckets of that shard
                                 (shardmap_of()), re-indexed as the shard's
                                 own table, and the controller's counts of
                                 it (peer_names) are taken in that table; a
                                 controller table or part of one (welcome,
                                 names, tokens with names) naming a bucket
                                 of another shard,
                                 or `default` (which would take every
                                 other shard's buckets), is refused whole
                                 (counted, warned): fail closed.  The
                                 caller's agent ops must keep the agent's
                                 tokens to the shard's buckets too (the
                                 static fallback renews every bucket's
                                 grant; storage-node/daemon/noderun.c). */
    /* K changing at run time (issue 30; common/shardgen.h).  sg: the
     * cluster's shards configuration the node follows (borrowed, owned by
     * the caller, which moves it forward: NULL = shardgen_steady(shards),
     * `shards` then the K).  With sg, `shards` is the number of shard slots
     * the node has endpoints for, and the session's buckets are those of
     * slot `shard` under either of sg's maps (k's, and next_k's while a
     * change is under way: the shard a bucket moves to hears its demand
     * before it runs it); its table check the same.  on_shards(arg, m):
     * called with every controller message that carries the shards fields
     * (m->shards_k > 0), before its table is checked, so the caller can
     * move sg forward (then ctlclient_remap() each session).  May be NULL. */
    const shardgen_t *sg;
    void (*on_shards)(void *arg, const proto_msg_t *m, double now);
    void *shards_arg;
} ctlclient_config_t;

/* Fills *cfg with the defaults above (endpoint and agent.name NULL). */
void ctlclient_config_defaults(ctlclient_config_t *cfg);

typedef struct ctlclient ctlclient_t;

/* A node in fallback (the controller not heard) closes its controller
 * sockets and connects anew this often: a half-open connection, or our
 * routing id taken over at the controller by another process, would
 * otherwise leave us unheard for good. */
#define CTLCLIENT_REOPEN_S 2.0

/* Counters, for logs and tests: what the client sent, and the agent's own
 * (agent.warn_unreachable also counts the client's warnings from before any
 * controller timing; agent.proto also the decoder's verdicts). */
typedef struct {
    uint64_t sent_hello, sent_report, sent_heartbeat, sent_goodbye, send_dropped;
    uint64_t reconnects;         /* times the sockets were made anew because
                                    the controller was not heard (every
                                    CTLCLIENT_REOPEN_S of fallback) */
    agent_stats_t agent;
    const char *state;           /* agent_state_str(): waiting, following,
                                    static, rr; or idle: the shard is out of
                                    the map the node follows (a constant) */
    uint64_t idles;              /* times the session went idle for that */
    const char *leader_endpoint; /* the obeyed controller's endpoint (owned
                                    by the client), or NULL */
    int endpoints;               /* controllers configured */
    uint64_t shard_refused;      /* controller tables refused: a bucket of
                                    another shard, or `default` (shards) */
} ctlclient_stats_t;

/* Creates the client and connects (asynchronously: an absent controller is
 * not an error; ZeroMQ keeps retrying).  `sched` is borrowed and must
 * outlive the client (the node's: gate_sched()); `ops` is how the agent
 * acts on the node (agent_ops_t, core/agent.h: given to agent_new(),
 * copied; may be NULL), its hooks called on the caller's thread from
 * inside ctlclient_on_readable() and ctlclient_tick().  Sends the first hello
 * at once; until a welcome and tokens arrive the node runs the fallback
 * policy (when manage_policy).  Returns the client (caller owns it), or
 * NULL with *err = -EINVAL (bad name/endpoint/config: an empty endpoint in
 * the list, more than CTLCLIENT_MAX_ENDPOINTS), -ENOMEM, or another -errno
 * from ZeroMQ. */
ctlclient_t *ctlclient_new(const ctlclient_config_t *cfg, sched_t *sched,
                           const agent_ops_t *ops, int *err);

/* Sends goodbye (best effort, waits at most 100 ms for it to leave),
 * closes the socket and frees the client; sets *cp to NULL.  Accepts NULL. */
void ctlclient_destroy(ctlclient_t **cp);

/* The ZeroMQ socket's file descriptor (ZMQ_FD) of controller 0 (the first
 * endpoint) to watch for readability; ctlclient_fd_at() gives controller
 * i's (0 <= i < ctlclient_nendpoints()).  Every socket must be watched
 * (ctlclient_attach() does); any of them becoming readable may call
 * ctlclient_on_readable(), which drains them all.  Returns -1 on error. */
int ctlclient_fd(const ctlclient_t *c);
int ctlclient_fd_at(const ctlclient_t *c, int i);
int ctlclient_nendpoints(const ctlclient_t *c);

/* Handles every message waiting on every controller's socket.  Returns 0,
 * or -errno from ZeroMQ (bad messages are counted, never an error). */
int ctlclient_on_readable(ctlclient_t *c, double now);

/* Does the timed work due at `now`: hello retries, period starts, reports,
 * the controller-silence check; then drains the socket.  Returns the seconds
 * until it next needs to run (> 0, at most min(hello_s, heartbeat_s)). */
double ctlclient_tick(ctlclient_t *c, double now);

/* The configuration cfg.sg points to moved: if the session's buckets
 * changed with it (O(the node's buckets) to see), maps the node's table
 * to the session's anew and says hello again at once (welcomed or not), so
 * the controller takes the new table before any report indexed by it (a
 * hello goes before later reports on every connection).  Shards only.
 * Returns 0, -ENOMEM (the mapping as it was: tried again at the next
 * call), or the hello's send error (sent again as a lost hello is). */
int ctlclient_remap(ctlclient_t *c, double now);

/* Sends a report for the current interval now (outside the schedule).
 * Returns 0, -EAGAIN (not connected / queue full: dropped), or -errno. */
int ctlclient_report_now(ctlclient_t *c, double now);

/* Sends a who message (common/proto.h PROTO_WHO: the identities active in
 * the node's buckets, `len` bytes of JSON text, borrowed) to every
 * controller, once welcomed (before: nothing sent, -ENOTCONN).  Returns 0
 * or -errno as a send.  Loop thread. */
int ctlclient_send_who(ctlclient_t *c, const char *text, size_t len);

/* Convenience for a libevent loop: registers a persistent read event on
 * every controller's ZMQ_FD calling ctlclient_on_readable() and a timer calling
 * ctlclient_tick() (re-armed to the delay it returns), both with
 * ctlclient_now().  The first tick runs at once.  Call at most once; the
 * events are freed by ctlclient_destroy(), which must run before
 * event_base_free(base).  Returns 0, -EINVAL (already attached), -ENOMEM. */
struct event_base;
int ctlclient_attach(ctlclient_t *c, struct event_base *base);

/* SIGHUP: reads the CURVE key files of the config again (their paths must
 * still be valid).  Keys that changed take effect at once: every
 * controller's connection is opened anew with them (the controllers must
 * already authorize the new key).  Returns 1 (changed, reconnected), 0
 * (unchanged, or no CURVE), or -errno with *err filled (the keys in force
 * stay). */
int ctlclient_reload_keys(ctlclient_t *c, jsonloc_err_t *err);

/* Copies the counters. */
void ctlclient_stats(const ctlclient_t *c, ctlclient_stats_t *out);

/* Seconds on CLOCK_MONOTONIC, for the `now` arguments. */
double ctlclient_now(void);

#endif
