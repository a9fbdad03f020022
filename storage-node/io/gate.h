/* gate.h - what both node fronts (memcached, NBD) share: the listener and the
 * connection registry, the outstanding window, dispatch (at once or at the
 * end of the loop pass), backend busy time, buckets and tokens, and the
 * graceful stop.
 *
 * A front owns one gate and gives it four hooks; the protocol (parsing,
 * replies, what a connection is) stays in the front.  The hot path is the
 * front's own dispatch loop around gate_take() and its completion callback
 * around gate_done(): direct calls, no allocation, no indirect call per IO.
 * noderun (bucket and token files, controller client, signals) drives a node
 * through its gate only: gate_add_bucket(), gate_set_tokens(), gate_kick(),
 * gate_shutdown().
 *
 * Threads: a gate_t, its listener, its events and the scheduler it borrows
 * belong to the loop thread of its event_base; every function here must be
 * called there. */
#ifndef BQOS_GATE_H
#define BQOS_GATE_H

#include <event2/event.h>
#include <event2/util.h>
#include <stdint.h>
#include <stdio.h>

#include "storage-node/core/sched.h"
#include "storage-node/core/window.h"
#include "storage-node/io/listener.h"

struct event_base;
struct iolat;
struct sockaddr;

/* The socket side of a front's connection: embed one in the front's
 * connection struct (container_of to get back).  Set up by
 * gate_conn_open(), freed by gate_conn_close(); loop thread. */
typedef struct gate_conn {
    struct gate_conn *prev, *next; /* the gate's list */
    evutil_socket_t fd;
    struct event *rev;             /* read event, persistent; the front arms
                                      and disarms it (backpressure) */
    struct event *wev;             /* write event, armed by gate_conn_write()
                                      only while the socket is full */
    struct evbuffer *out;          /* replies not yet written */
    int writing;                   /* wev is armed */
    int held;                      /* the front's count of this connection's requests
                                      queued, at the backend or unanswered (0 from
                                      gate_conn_open()); --idle-timeout spares c while
                                      it is nonzero */
    /* The gate's own (the front leaves them alone): */
    event_callback_fn on_read;     /* the front's, called by the gate's read callback */
    void *arg;
    double last;                   /* mono_now() of the last read, or of the last idle
                                      check that found the connection busy */
    uint8_t peer[16];              /* client address (IPv4: first 4 bytes) ... */
    int family;                    /* ... AF_INET or AF_INET6; 0: none (Unix socket) */
} gate_conn_t;

/* The front's side, called on the loop thread with `front` as given to
 * gate_new(). */
typedef struct {
    /* Hands the backend what gate_take() allows, now.  Called by gate_kick()
     * and gate_set_tokens() (with `defer`, from the end-of-pass event),
     * never while stopping. */
    void (*dispatch)(void *front);
    /* gate_shutdown(): answers one IO taken from the queue with "shutting
     * down" (sched_drain()'s callback: no scheduler calls from in here). */
    void (*drain)(sched_item_t *item, void *front);
    /* gate_shutdown(), after the drain: stop reading, answer and write what
     * can be; may free connections. */
    void (*stop)(void *front);
    /* Returns nonzero once every reply is written (the gate itself checks
     * that nothing is at the backend): then the stop is complete. */
    int (*idle)(void *front);
    /* A connection the gate admitted (not stopping, below max_conns); fd is
     * the front's to close.  */
    void (*accept)(void *front, evutil_socket_t fd, const struct sockaddr *sa, int salen);
    /* A connection refused; the front may say why on fd (the gate closes it
     * afterwards).  May be NULL. */
    void (*refuse)(void *front, evutil_socket_t fd);
} gate_hooks_t;

typedef struct {
    const char *tag;     /* prefix of the gate's log lines ("" or "NBD: "), borrowed
                            for the gate's life */
    int outstanding;     /* most IOs at the backend at once, >= 1 (the window
                            while fixed; see gate_set_window()) */
    int max_conns;       /* connections beyond are refused, >= 1 */
    int max_buckets;     /* gate_add_bucket() refuses beyond (-ENOMEM); 0: no cap */
    int defer;           /* 1: gate_kick() dispatches at the end of this pass of the
                            loop (every read of the pass queued first); 0: at once */
} gate_config_t;

typedef struct gate gate_t;

/* Makes a gate over scheduler `s` (borrowed: it must outlive the gate, and
 * only this gate's front may dispatch from it).  Does not listen yet (see
 * gate_listen()).  Returns the gate (the front owns it), or NULL and *err =
 * -EINVAL (bad settings) or -ENOMEM. */
gate_t *gate_new(struct event_base *base, sched_t *s, const gate_config_t *cfg,
                 const gate_hooks_t *hooks, void *front, int *err);

/* Binds the listening socket; from the next pass of the loop, connections
 * reach hooks->accept.  Returns 0, or -errno as listener_new(). */
int gate_listen(gate_t *g, const listener_addr_t *addr);

/* The TCP port listened on (0 on a Unix socket or before gate_listen()). */
unsigned gate_port(const gate_t *g);

/* Where clients connect, "ADDR:PORT" or "unix:PATH" (owned by g; "" before
 * gate_listen()). */
const char *gate_address(const gate_t *g);

/* The scheduler the gate dispatches from (borrowed from the front). */
sched_t *gate_sched(gate_t *g);

/* ---- connections ---- */

/* Sets up c for the accepted socket fd: a read event (armed) calling
 * on_read(fd, what, arg), a write event calling on_write, an empty output
 * buffer; lists c (counted in gate_nconns() and, for good, in
 * gate_total_conns()).  Returns 0, or -ENOMEM with nothing made and c not
 * listed (fd is still the caller's to close). */
int gate_conn_open(gate_t *g, gate_conn_t *c, evutil_socket_t fd,
                   event_callback_fn on_read, event_callback_fn on_write, void *arg);

/* Writes what the socket takes of c->out; arms the write event while
 * bytes are left, disarms it once all is written.  Returns 0 (written, or
 * the socket is full), or -errno for a broken socket. */
int gate_conn_write(gate_conn_t *c);

/* Arms c's write event (on) or disarms it, and sets c->writing: for a
 * front that writes c->out by other means (TLS, nbdtls.h). */
void gate_conn_want_write(gate_conn_t *c, int on);

/* Unlists c, frees its events and output buffer and closes its socket;
 * resumes accepting if out of descriptors had paused it
 * (listener_resume()). */
void gate_conn_close(gate_t *g, gate_conn_t *c);

/* Connection limits beyond max_conns (--idle-timeout,
 * --max-conns-per-ip).  idle_sec > 0: a connection that read nothing for
 * idle_sec seconds (checked every min(1, idle_sec / 4) s), with held 0,
 * nothing unsent and its read event armed, is shut down (shutdown(2), both
 * ways): the front reads EOF and closes it as a client gone, with nothing
 * to lose.  Only for a front that keeps c->held; 0: never.  per_ip > 0: a
 * TCP connection from an address that already has per_ip open is refused
 * (hooks->refuse); 0: no cap (Unix-socket connections are never capped).
 * Returns 0, or -EINVAL (negative values) or -ENOMEM. */
int gate_set_conn_limits(gate_t *g, double idle_sec, int per_ip);

/* Counts for stats: connections closed idle, refused by the per-address
 * cap, and accept pauses for want of descriptors (listener_pauses()). */
typedef struct {
    uint64_t idle_closed, refused_per_ip, accept_pauses;
} gate_conn_stats_t;
void gate_conn_stats(const gate_t *g, gate_conn_stats_t *out);

/* The first listed connection (then c->next), or NULL. */
gate_conn_t *gate_conns(gate_t *g);
int gate_nconns(const gate_t *g);
uint64_t gate_total_conns(const gate_t *g);

/* ---- the window (hot path) ---- */

/* Returns the next IO the scheduler allows while fewer than the window
 * are at the backend, or NULL.  The IO counts as outstanding from now on;
 * it ends with gate_done(), gate_done_inline() or gate_untake().  The
 * window is `outstanding` unless gate_set_window() made it adaptive (an IO
 * served on an R-token tells it so: window_note_reserved()).  When
 * the scheduler allows nothing because paced buckets wait for credit, one
 * timer calls hooks->dispatch when the first credit returns. */
sched_item_t *gate_take(gate_t *g);

/* A backend completion of an IO from gate_take(): adds the busy time
 * (time with at least one IO outstanding) and reports one completion with
 * it (sched_note_completion()); the window counts it (window_done(): the
 * time at the backend, by Little's law over its epoch).  Call before
 * answering the IO. */
void gate_done(gate_t *g);

/* gate_done() for an IO whose backend call ended at `at` (mono_now()
 * seconds, at most now), earlier than its completion callback runs: the
 * window takes `at` as the end of the IO's time at the backend, so that
 * the loop's own work between the backend's reply and the callback (other
 * callbacks writing their replies, reads of new requests) does not count
 * as backend latency.  Busy time still runs to now. */
void gate_done_at(gate_t *g, double at);

/* An IO from gate_take() finished at once, without the backend (a read
 * from the page cache): one completion, no busy time. */
void gate_done_inline(gate_t *g);

/* An IO from gate_take() that the backend refused: it leaves the window
 * uncounted. */
void gate_untake(gate_t *g);

/* IOs at the backend now. */
int gate_inflight(const gate_t *g);

/* Makes the window adaptive (storage-node/core/window.h) with *cfg's
 * settings, starting from the current window clamped to [floor, ceiling]
 * (cfg->start is ignored); IOs already at the backend stay counted.
 * Returns 0, or -EINVAL / -ENOMEM as window_new() (the window unchanged). */
int gate_set_window(gate_t *g, const window_config_t *cfg);

/* The window's figures (window_stats()). */
void gate_window_stats(const gate_t *g, window_stats_t *out);

/* Asks for hooks->dispatch once the callbacks of this pass of the loop
 * are done (next_pass 0), or in the next pass, after its reads (next_pass
 * 1: after completions, so that the requests that arrived meanwhile are
 * queued first).  One request per pass; none while stopping. */
void gate_request_dispatch(gate_t *g, int next_pass);

/* ---- buckets and tokens (noderun, the controller client) ---- */

/* Adds bucket `name` with weight w, or finds it and sets its weight.
 * Returns its index, or -ENOMEM beyond max_buckets, or -EINVAL/-ENOMEM as
 * sched_add_bucket(). */
int gate_add_bucket(gate_t *g, const char *name, uint32_t weight);

/* Sets bucket `name`'s tokens to absolute counts (adding it with weight 1
 * if unknown) and dispatches what they allow (gate_kick()).  l may be
 * SCHED_UNLIMITED.  Returns 0 or -EINVAL/-ENOMEM. */
int gate_set_tokens(gate_t *g, const char *name, int64_t r, int64_t l);

/* Dispatches what the scheduler allows now (after its tokens or policy
 * changed): hooks->dispatch at once, or at the end of this pass with
 * `defer`.  Nothing while stopping. */
void gate_kick(gate_t *g);

/* Statistics lines from the node around the front (noderun: the controller
 * client's state), each "STAT name value\r\n" written to fp.  fn is called on
 * the loop thread while a front formats its stats; NULL removes it. */
typedef void (*gate_status_fn)(void *arg, FILE *fp);
void gate_set_status(gate_t *g, gate_status_fn fn, void *arg);

/* The IO timing recorder the fronts feed (storage-node/io/iolat.h; borrowed,
 * NULL: none, the default) and the one set. */
void gate_set_iolat(gate_t *g, struct iolat *l);
struct iolat *gate_iolat(const gate_t *g);

/* What a front calls while formatting its stats: the gate's own lines
 * (bqos_window: IOs allowed at the backend now; bqos_window_latency_us and
 * bqos_window_base_us: the mean time at the backend in the last epoch and
 * the controller's base; bqos_window_throughput: completions per second in
 * the last epoch), then the hook set by gate_set_status() if any. */
void gate_status_hook(gate_t *g, gate_status_fn *fn, void **arg);

/* ---- stopping ---- */

/* Begins a graceful stop: closes the listener, drains the queue through
 * hooks->drain, calls hooks->stop, arms a 10 s grace timer, and breaks the
 * loop (event_base_loopexit) once nothing is at the backend and
 * hooks->idle says every reply is out (gate_check_stopped()), or when the
 * timer fires.  Idempotent. */
void gate_shutdown(gate_t *g);

/* Nonzero once gate_shutdown() or gate_close() was called. */
int gate_stopping(const gate_t *g);

/* While stopping: breaks the loop if nothing is at the backend and
 * hooks->idle() agrees.  Fronts call it when a completion or a closed
 * connection may have been the last thing waited for. */
void gate_check_stopped(gate_t *g);

/* Teardown begins (the front's destroy): closes the listener and stops
 * dispatching, without a grace timer.  Accepts NULL. */
void gate_close(gate_t *g);

/* Frees the gate (listener, events); sets *gp to NULL.  Accepts NULL.  The
 * scheduler is the front's. */
void gate_destroy(gate_t **gp);

#endif
