/* conns.h - the node fronts' client connections: the listener, the registry of open connections, the address table, the idle and per-address limits, eviction at the limit, each connection's write buffer, and (conns_set_batched()) a pass's sends, and its reads, in one system call each.
 *
 * A front's gate makes one conns_t (gate_conns(), gate.h) and passes it the
 * front's accept and refuse hooks; the protocol (parsing, replies, what a
 * connection holds) stays in the front, which embeds a conns_conn_t in its
 * own connection struct.  Nothing here knows the scheduler.
 *
 * Threads: a conns_t, its listener, its events and every conns_conn_t in it
 * belong to the loop thread of its event_base; every function here must be
 * called there. */
#ifndef BQOS_CONNS_H
#define BQOS_CONNS_H

#include <event2/event.h>
#include <event2/util.h>
#include <stdint.h>
#include <sys/socket.h>

#include "common/rules.h"
#include "storage-node/io/listener.h"

struct event_base;
struct sockaddr;
struct conns_addr;

/* Who a connection is: what the fronts (and the rules that classify a
 * request by its identity) read through conns_identity().  The address is
 * always there; the names are set by the front as it learns them
 * (conns_set_identity()) and stay until the connection closes:
 *   user       the memcached login (--auth-file), from the login's STORED on;
 *   cert_name  the name of the client's verified TLS certificate (its
 *              subject CN, else its first DNS/e-mail/URI subjectAltName;
 *              tls.h), from the end of the handshake on;
 *   psk_id     the TLS-PSK identity the client's key matched (NBD).
 * NULL: not (yet) known.  Strings of at most CONN_ID_MAX bytes, printable
 * (no control characters), owned by the connection: valid until
 * conns_close() or the next conns_set_identity() of that field.  addr is
 * the peer's address as accept(2) gave it (AF_INET or AF_INET6, port
 * included); ss_family AF_UNIX for a Unix-socket client.  Loop thread. */
#define CONN_ID_MAX 255
typedef struct conn_identity {
    const char *user;
    const char *cert_name;
    const char *psk_id;
    struct sockaddr_storage addr;
} conn_identity_t;

/* The fields conns_set_identity() sets. */
typedef enum { CONN_ID_USER, CONN_ID_CERT, CONN_ID_PSK } conn_id_field_t;

/* The socket side of a front's connection: embed one in the front's
 * connection struct (container_of to get back).  Set up by conns_open(),
 * freed by conns_close(); loop thread. */
typedef struct conns_conn {
    struct conns_conn *prev, *next; /* the registry's list */
    evutil_socket_t fd;
    struct event *rev;             /* read event, persistent; the front arms
                                      and disarms it (backpressure) */
    struct event *wev;             /* write event, armed by conns_write()
                                      only while the socket is full */
    struct evbuffer *out;          /* replies not yet written */
    int writing;                   /* wev is armed */
    int held;                      /* the front's count of this connection's requests
                                      queued, at the backend or unanswered (0 from
                                      conns_open()); --idle-timeout spares c while
                                      it is nonzero */
    /* The registry's own (the front leaves them alone): */
    event_callback_fn on_read;     /* the front's, called by the registry's read callback */
    void *arg;
    double last;                   /* mono_now() of the last read, or of the last idle
                                      or eviction check that found the connection busy */
    uint8_t peer[16];              /* client address (IPv4: first 4 bytes) ... */
    int family;                    /* ... AF_INET or AF_INET6; 0: none (Unix socket) */
    struct conns_addr *addr;       /* its address's entry; NULL for a Unix socket */
    struct conns_conn *aprev, *anext; /* the address's connections, least recently
                                      read first */
    conn_identity_t id;            /* conns_identity(); names set by the front */
    struct writer_conn *wc;        /* the write side on a writer thread
                                      (conns_set_writers()); NULL: none */
    int handshaking;               /* the front's: a TLS handshake runs; reads then
                                      do not count as activity, so --idle-timeout
                                      bounds the handshake (and a connection that
                                      stalls it is shut down whatever it holds) */
    /* io/who.h's cache (who_seen()): the bucket and registry generation
     * this connection was last counted in, and where (an entry, a
     * bucket's "other", or nowhere); its identity's key (0: not computed).
     * Reset by conns_open() and conns_set_identity(). */
    int who_b;
    int who_slot;
    uint32_t who_gen;
    uint64_t who_key;
    /* conns_set_batched(), the registry's own: */
    struct conns *cn;              /* its registry */
    event_callback_fn on_write;    /* the front's write callback (conns_open()) */
    int werr;                      /* a batched send failed: -errno, conns_write() says so */
    int qidx, cbidx;               /* its place in the pass's send queue / in the
                                      flush's callbacks still to run; -1: none */
    char *fb;                      /* conns_reply_room()'s buffer (CONNS_REPLY_ROOM
                                      bytes, made at its first use), NULL: none */
    uint32_t fboff, fblen;         /* its unsent bytes [fboff, fblen): ahead of out's */
    /* conns_read_batched(), the registry's own: */
    char *(*rroom)(void *arg, size_t *room); /* NULL: reads by on_read */
    void (*rgot)(void *arg, ssize_t n);
    int ridx, rcbidx;              /* its place in the pass's read queue / in the
                                      running read batch; -1: none */
} conns_conn_t;

/* The front's side, called on the loop thread with `front` as given to
 * conns_new(). */
typedef struct {
    /* A connection admitted (not stopped, below max_conns and the
     * per-address cap); fd is the front's to close (conns_open() makes it
     * the registry's). */
    void (*accept)(void *front, evutil_socket_t fd, const struct sockaddr *sa, int salen);
    /* A connection refused; the front may say why on fd (the registry
     * closes it afterwards).  May be NULL. */
    void (*refuse)(void *front, evutil_socket_t fd);
    /* At max_conns, to admit a new client: close c now (conns_close()
     * before returning) as a client gone and return 1, or return 0 and
     * leave c alone if it holds what the registry cannot see (a request
     * read but not parsed, an NBD export in use).  The registry asks only
     * about a connection with held 0, nothing unsent, reading not paused
     * and no unread bytes in its socket.  NULL: the front never evicts (at
     * the limit every new connection is refused). */
    int (*evict)(void *front, conns_conn_t *c);
} conns_hooks_t;

typedef struct {
    const char *tag;     /* prefix of the log lines ("" or "NBD: "), borrowed for
                            the registry's life; NULL: "" */
    int max_conns;       /* connections beyond are refused, >= 1 */
} conns_config_t;

typedef struct conns conns_t;

/* Makes an empty registry.  Does not listen yet (conns_listen()).  Returns
 * it (the caller owns it: conns_destroy()), or NULL and *err = -EINVAL (bad
 * settings, hooks->accept NULL) or -ENOMEM. */
conns_t *conns_new(struct event_base *base, const conns_config_t *cfg, const conns_hooks_t *hooks,
                   void *front, int *err);

/* Binds the listening socket; from the next pass of the loop, connections
 * reach hooks->accept.  Returns 0, -EINVAL (already listening), or -errno
 * as listener_new(). */
int conns_listen(conns_t *cn, const listener_addr_t *addr);

/* The TCP port listened on (0 on a Unix socket or before conns_listen()). */
unsigned conns_port(const conns_t *cn);

/* Where clients connect, "ADDR:PORT" or "unix:PATH" (owned by cn; "" before
 * conns_listen()). */
const char *conns_address(const conns_t *cn);

/* Sets up c for the accepted socket fd (from hooks->accept): a read event
 * (armed) calling on_read(fd, what, arg), a write event calling on_write,
 * an empty output buffer; lists c (counted open and, for good, in the
 * total).  Returns 0, or -ENOMEM with nothing made and c not listed (fd is
 * still the caller's to close). */
int conns_open(conns_t *cn, conns_conn_t *c, evutil_socket_t fd, event_callback_fn on_read,
               event_callback_fn on_write, void *arg);

/* Writes what the socket takes of c->out; arms the write event while
 * bytes are left, disarms it once all is written.  Returns 0 (written, or
 * the socket is full), or -errno for a broken socket. */
int conns_write(conns_conn_t *c);

/* Bytes of c's replies not written yet: in c->out, and with writers
 * (conns_set_writers()) what c's writer holds.  The fronts' measure of
 * unsent bytes (backpressure, reply budget, close once written, idle). */
size_t conns_unsent(const conns_conn_t *c);

/* --threads: n (0..64) reply-writer threads (io/writers.h) take the
 * socket writes of every connection opened from now on; conns_write()
 * hands c->out's bytes to c's writer, which calls the on_write given to
 * conns_open() on this thread once they are out or a write failed (then
 * conns_write() returns -EPIPE), and conns_close() hands the socket to the
 * writer to close after its earlier writes.  Not for a front that writes
 * by other means (TLS: conns_want_write()).  0: none (the default: writes
 * on this thread).  Call before any connection opens.  Returns 0, -EINVAL
 * (bad n, called twice, connections open) or -errno as writers_new(). */
int conns_set_writers(conns_t *cn, int n);

/* Replies sent once per pass of the loop (the memcached front): from now
 * on conns_write() of a connection whose socket is not known full only
 * notes it, and at the end of the loop's pass (an event made active at
 * the first note, so it runs after the callbacks of the pass before it)
 * every noted connection's c->out goes out in one system call
 * (io/sendbatch.h: io_uring, else one sendmsg each), after which the
 * on_write given to conns_open() runs for each of them on this thread, as
 * a write event would: the front re-counts what is unsent, closes what is
 * done, and its conns_write() returns -errno if the send failed.  Bytes
 * the socket did not take stay in c->out with the write event armed, as
 * before; c->out stays bounded by the front's own limits.  mode is
 * sendbatch_mode_t (SENDBATCH_AUTO, SENDBATCH_PLAIN).  Not with writers
 * (conns_set_writers()) or a front that writes by other means (TLS
 * connections do not call conns_write()).  Call before any connection
 * opens.  Returns 0, -EINVAL (called twice, connections open, writers) or
 * -ENOMEM. */
int conns_set_batched(conns_t *cn, int mode);

/* Replies without libevent's buffer (conns_set_batched() only): bytes
 * added to an empty evbuffer cost a 1 KiB chain malloc'd and freed once
 * sent, i.e. one allocation per reply.  conns_reply_room() returns the
 * free end of c's own flat buffer of CONNS_REPLY_ROOM bytes (made at its
 * first use, kept until conns_close()) and its size in *room; its unsent
 * bytes go out ahead of c->out's, so it is given only while c->out is
 * empty, with writes batched and no writer; NULL: append to c->out
 * instead.  The bytes count once conns_reply_commit(c, len) says how many
 * were written there (len <= *room; no other conns call in between).  Not
 * for a front that writes c->out by other means (TLS).  Loop thread. */
#define CONNS_REPLY_ROOM 1024
char *conns_reply_room(conns_conn_t *c, size_t *room);
void conns_reply_commit(conns_conn_t *c, size_t len);

/* Reads once per pass too (conns_set_batched() only; not for a TLS
 * connection, whose session reads the socket): from now on c's read event
 * only notes c, and the pass's noted connections are read together, one
 * system call for all (io/sendbatch.h), when conns_run_reads() is called
 * or at the latest in an event made active at the pass's first note.  For
 * each, room(arg, &n) is called first: it returns where to read and n, the
 * bytes there (> 0), or NULL if it handled the event without a read (it
 * may then have closed c); then, once every socket is read, got(arg, res)
 * with res the bytes read, 0 at the client's end of stream, or -errno
 * (-EAGAIN: nothing there after all), in the order the connections were
 * noted.  A connection whose read event was deleted (paused) since it was
 * noted is not read, as libevent would not have called it; one closed
 * meanwhile gets no call.  The read stamp (idle timeout, eviction order)
 * is taken once per batch, after the reads.  Loop thread. */
void conns_read_batched(conns_conn_t *c, char *(*room)(void *arg, size_t *room),
                        void (*got)(void *arg, ssize_t n));

/* Runs the reads noted so far in this pass now (conns_read_batched()):
 * returns 1 if there were any (their got() calls have run), 0 if none
 * (or called from within a read batch's callbacks).  Loop thread. */
int conns_run_reads(conns_t *cn);

/* Nonzero if conns_set_batched() is in force and sends through io_uring
 * (2) or plainly (1); 0: writes at once. */
int conns_batched(const conns_t *cn);

/* Arms c's write event (on) or disarms it, and sets c->writing: for a
 * front that writes c->out by other means (TLS, tls.h). */
void conns_want_write(conns_conn_t *c, int on);

/* c's identity (conn_identity_t above); never NULL.  Loop thread. */
static inline const conn_identity_t *conns_identity(const conns_conn_t *c)
{
    return &c->id;
}

/* Sets (a copy of) `value` as c's field `which`, replacing what it held;
 * NULL clears it.  Returns 0, -EINVAL (longer than CONN_ID_MAX or a control
 * character in it: the field is left unchanged) or -ENOMEM. */
int conns_set_identity(conns_conn_t *c, conn_id_field_t which, const char *value);

/* Fills the who-part of a rules subject from c: its user, certificate name
 * and PSK identity (borrowed: valid while c is open and unchanged) and its
 * address (an IPv4-mapped IPv6 address as IPv4; family 0 for a Unix-socket
 * client).  op and name are the caller's.  Loop thread. */
void conns_subject(const conns_conn_t *c, rules_subject_t *s);

/* Unlists c, frees its events, output buffer and identity and closes its socket;
 * resumes accepting if out of descriptors had paused it
 * (listener_resume()), unless stopped. */
void conns_close(conns_t *cn, conns_conn_t *c);

/* The first listed connection (then c->next), or NULL.  The list may be
 * walked while closing the connection at hand (take c->next first). */
conns_conn_t *conns_first(conns_t *cn);

/* Connections open now (listed). */
int conns_count(const conns_t *cn);

/* Connections open now from the address of `sa` (0 for a Unix-socket
 * peer or NULL).  O(1). */
int conns_peer_count(const conns_t *cn, const struct sockaddr *sa);

/* Connection limits beyond max_conns (--idle-timeout,
 * --max-conns-per-ip; eviction at max_conns needs only hooks->evict, see
 * below).  idle_sec > 0: a connection that read nothing for idle_sec
 * seconds (checked every min(1, idle_sec / 4) s), with held 0, nothing
 * unsent and its read event armed, is shut down (shutdown(2), both ways):
 * the front reads EOF and closes it as a client gone, with nothing to
 * lose.  Only for a front that keeps c->held; 0: never.  per_ip > 0: a TCP
 * connection from an address that already has per_ip open is refused
 * (hooks->refuse); 0: no cap (Unix-socket connections are never capped).
 * Returns 0, or -EINVAL (negative values) or -ENOMEM. */
int conns_set_limits(conns_t *cn, double idle_sec, int per_ip);

/* Eviction at the limit.  A new connection that finds max_conns open,
 * from an address holding k of them (k = 0 for a Unix-socket peer), is
 * admitted when the address holding the most connections holds at least
 * k + 2 and one of them is idle (hooks->evict's conditions): the one that
 * read nothing for the longest, among the first CONNS_EVICT_SCAN of that
 * address in least-recently-read order, is closed through hooks->evict.
 * A busy one met on the way goes to the back of its address's order (as
 * the idle check does).  Otherwise the new connection is refused as
 * before.  So a few addresses cannot keep every slot from the others,
 * while two addresses at the limit never take slots back and forth (after
 * the swap the newcomer's address holds no more than the other).  The
 * address table keeps per-address counts in a hash map (keyed with a
 * random seed) and the addresses in a max-heap of counts: O(log
 * addresses) per accept and close, O(1) per read; one entry per address
 * with connections open (at most max_conns), freed with its last
 * connection. */
#define CONNS_EVICT_SCAN 8

/* Counts for stats: connections open now and accepted in all; closed
 * idle, refused by the per-address cap, evicted at the limit for a new
 * client, and accept pauses for want of descriptors (listener_pauses());
 * addresses with connections open now; TLS handshakes failed. */
typedef struct {
    int open;
    uint64_t total;
    uint64_t idle_closed, refused_per_ip, evicted, accept_pauses;
    int addresses;
    uint64_t tls_failed;  /* TLS handshakes that failed (conns_tls_failed()) */
} conns_stats_t;
void conns_stats(const conns_t *cn, conns_stats_t *out);

/* Counts a TLS handshake that failed (a front closing such a connection:
 * a plaintext client on a TLS port, a certificate or PSK refused). */
void conns_tls_failed(conns_t *cn);

/* Stops accepting for good (every later connection is refused, idle checks
 * end): with `close_listener` 0 the listening socket is only disabled (it
 * stays bound until conns_destroy(); the graceful stop), with 1 it is
 * closed now (teardown).  Connections already open are not touched.
 * Idempotent. */
void conns_stop(conns_t *cn, int close_listener);

/* Frees the registry (listener, events); sets *cnp to NULL.  Accepts NULL.
 * Connections still listed are the front's to close first. */
void conns_destroy(conns_t **cnp);

#endif
