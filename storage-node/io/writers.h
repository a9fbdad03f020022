/* writers.h - reply-writer threads (`bqos-node --threads N`: the loop thread and N - 1 writers): each connection's socket writes done on one writer thread, the loop told when its bytes are out or a write failed.
 *
 * Writing replies is more than half of the memcached front's CPU per
 * request (docs/performance.md, "A node on more cores"); everything else
 * (accept, reads, parsing, the scheduler, the backend, formatting replies)
 * stays on the loop thread, so a bucket's R, L and pacing are the one
 * scheduler's as before.  conns.c uses this module when the front asks
 * for writers (conns_set_writers()); the front sees only conns_write() and
 * conns_unsent().
 *
 * Per connection (a writer_conn_t): the loop moves its reply bytes into
 * the write side's buffer (a locked evbuffer: the only object both
 * threads touch, under its own lock) and kicks the writer through the
 * writer's hand-off (io/handoff.h, once per batch: a kick already queued
 * is not queued again); the writer writes what the socket takes, waits for
 * writability on its own event_base for the rest, and when the buffer is
 * empty (or a write failed) notes it to the loop through the loop's
 * hand-off (again once while queued), which calls the front's write
 * callback there, as the socket's write event would.  Bytes keep their
 * order (one buffer per connection); a connection's reply bytes are never
 * written by two threads.
 *
 * Lifetime: a write side holds one reference for the loop (dropped by
 * writers_close()), one for its writer (dropped when the writer has
 * processed the close: it frees its event and closes the socket), and one
 * per note in the loop's FIFO; the last one frees it.  So the front frees
 * its connection at once, and the socket is closed on the writer, never
 * while a write of it runs; bytes not written by then are dropped, as
 * conns_close() drops c->out (the front closes a connection it means to
 * answer only once nothing is unsent).
 *
 * Threads: every function here is called on the loop thread that called
 * writers_new(); the writer threads run only this module's code. */
#ifndef BQOS_WRITERS_H
#define BQOS_WRITERS_H

#include <event2/event.h>
#include <event2/util.h>
#include <stddef.h>
#include <stdint.h>

struct evbuffer;

typedef struct writers writers_t;
typedef struct writer_conn writer_conn_t;

#define WRITERS_MAX 64

/* Starts n (1..WRITERS_MAX) writer threads, each with its own event_base,
 * and the loop's hand-off for their notes on `loop`.  Turns on libevent's
 * pthreads locking (evthread_use_pthreads()) for the write buffers.
 * Returns the pool (the caller owns it: writers_destroy()), or NULL and
 * *err = -EINVAL, -ENOMEM or -errno (pthread_create, eventfd). */
writers_t *writers_new(struct event_base *loop, int n, int *err);

/* A write side for the connected socket fd on the next writer (round
 * robin).  on_written(fd, EV_WRITE, arg) runs on the loop thread after
 * the writer emptied the buffer or a write failed (writers_send() then
 * returns -EPIPE), until writers_close().  The socket stays the caller's
 * until writers_close(), which hands it over.  Returns NULL when out of
 * memory. */
writer_conn_t *writers_open(writers_t *ws, evutil_socket_t fd, event_callback_fn on_written,
                            void *arg);

/* Moves every byte of `out` (the loop's buffer, left empty) to the write
 * side and kicks its writer.  Returns 0, or -EPIPE once a write failed
 * (nothing moved: the connection is broken). */
int writers_send(writer_conn_t *wc, struct evbuffer *out);

/* Bytes handed over and not written yet. */
size_t writers_unsent(const writer_conn_t *wc);

/* Ends the write side: bytes not written are dropped, the writer frees its
 * event and closes the socket; on_written is not called again.  wc is
 * invalid after. */
void writers_close(writer_conn_t *wc);

/* Counts: kicks handed to writers, notes handed back, bytes written. */
typedef struct {
    uint64_t kicks, notes, bytes;
} writers_stats_t;
void writers_stats(writers_t *ws, writers_stats_t *out);

/* Stops the writers once they have processed what was handed to them
 * (every write side must be closed first), joins them and frees the pool;
 * sets *wsp to NULL.  Accepts NULL. */
void writers_destroy(writers_t **wsp);

#endif
