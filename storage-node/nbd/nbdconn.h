/* nbdconn.h - private to the NBD front (nbdfront.c, nbdopts.c; helpers in nbdconn.c): the front's and a
 * connection's state, and the helpers the option-haggling phase shares with
 * the transmission phase.  Not a public header: prefix nbdf_.
 *
 * Threads: everything here belongs to the front's loop thread. */
#ifndef BQOS_NBDCONN_H
#define BQOS_NBDCONN_H

#include <stddef.h>
#include <stdint.h>

#include "storage-node/io/freelist.h"
#include "storage-node/io/gate.h"
#include "storage-node/io/iolat.h"
#include "storage-node/nbd/blockdev.h"
#include "storage-node/nbd/nbd.h"
#include "storage-node/nbd/nbdfront.h"

#define container_of(p, T, m) ((T *)(void *)((char *)(p) - offsetof(T, m)))

#define MAX_EXPORTS 65536
#define META_ID_ALLOCATION 1           /* our context id of base:allocation */
#define TFLAGS (NBD_FLAG_HAS_FLAGS | NBD_FLAG_SEND_FLUSH | NBD_FLAG_SEND_FUA | \
                NBD_FLAG_SEND_TRIM | NBD_FLAG_CAN_MULTI_CONN)

/* ST_STARTTLS: the STARTTLS ACK is being written in clear; ST_TLSHS: the
 * TLS handshake runs (then ST_OPTS again, encrypted). */
enum { ST_FLAGS = 0, ST_OPTS, ST_TRANS, ST_CLOSING, ST_STARTTLS, ST_TLSHS };
enum { RQ_QUEUED = 0, RQ_INFLIGHT };

struct nconn;

/* One transmission request.  Owned by its connection while it lives; one
 * whose connection went away while the IO was at the backend is an orphan,
 * freed by its completion. */
typedef struct nreq {
    sched_item_t item;     /* scheduler's link while RQ_QUEUED */
    blockdev_op_t op;      /* backend's while RQ_INFLIGHT */
    struct nconn *conn;    /* NULL: orphan */
    struct nreq *prev, *next;
    uint64_t handle;
    uint16_t type;
    int state;
    iolat_ts_t ts;         /* arrival and dispatch, with metrics on */
} nreq_t;

/* One client connection: a state machine (client flags, options,
 * transmission, closing).  Loop thread.
 *
 * The socket is driven by hand rather than by a bufferevent, to save
 * system calls (each costs ~1 us on a paravirtualised guest): a read event
 * does one readv(2) into `in` (a bufferevent asks FIONREAD first); replies
 * gather in `sock.out` and are written with one writev(2) per loop iteration
 * (flush_ev), and a write event is armed only when the socket is full (a
 * bufferevent arms and disarms it around every write: two epoll_ctl and an
 * extra epoll_wait). */
typedef struct nconn {
    conns_conn_t sock;     /* socket, events, reply buffer `out` (conns.h) */
    struct nbdfront *f;
    struct evbuffer *in;
    int dirty;             /* on f->dirty: sock.out has bytes to write */
    struct nconn *dnext;
    size_t want;           /* bytes still missing of the message being read */
    int state;
    int no_zeroes;
    int structured;        /* NBD_OPT_STRUCTURED_REPLY was acknowledged */
    int meta_bucket;       /* export of the last SET_META_CONTEXT, if it
                              selected base:allocation; else -1 */
    int meta;              /* in transmission: base:allocation selected for
                              this export (BLOCK_STATUS allowed) */
    int nopts;
    uint64_t swallow;      /* payload bytes still to discard */
    int reply_after;       /* after swallowing: 1 option error, 2 WRITE error */
    uint32_t ra_code;      /* ... its reply type or error value */
    uint32_t ra_opt;
    uint64_t ra_handle, ra_offset;
    uint32_t ra_length;
    int bucket;            /* export, in transmission (its store) */
    /* Per-request operation classes (issue 27): the bucket each class of
     * request (NBDF_CLS_*) is queued in, or -1: refused (cls_why says
     * why; the request gets EPERM and counts as a refusal).  Resolved by
     * the rules once (nbdf_resolve_classes()) at the start of
     * transmission and again when gate_rules_gen() moves; without rules
     * every class is the export's bucket. */
    int cls[4];
    unsigned char cls_why[4];
    uint32_t cls_gen;
    uint64_t size;
    nreq_t *reqs;          /* queued and in flight */
    int nreqs;
    uint64_t buf_bytes;    /* READ/WRITE buffers of those */
    int budget_wait;       /* not read: the node's request buffers are full */
    int reading;
    int in_process;
    tls_sess_t *tls;    /* from STARTTLS on; NULL: plain */
    char peer[64];
} nconn_t;

struct nbdfront {
    nbdfront_config_t cfg;
    char *path;
    struct event_base *base;
    gate_t *g;             /* the scheduler's door, window, stop */
    conns_t *cn;           /* the gate's listener and connections */
    blockdev_t *bd;
    nconn_t *dirty;        /* connections with replies to write */
    struct event *flush_ev;
    int dispatching;       /* inside dispatch_more() */
    uint64_t inline_done;  /* reads served from the page cache at once */
    nbdfront_stats_t st;
    freelist_t reqs;       /* free nreq_t records */
    uint64_t buf_total;    /* READ/WRITE buffers of the node, replies' too */
    int nbudget_wait;      /* connections with budget_wait */
    struct event *budget_ev; /* wakes them once buffers free */
};

/* Operation classes of transmission requests, in the order of rules_op_t's
 * NBD classes: a READ (and BLOCK_STATUS, a read of the map), a WRITE, a
 * FLUSH, a TRIM. */
enum { NBDF_CLS_READ = 0, NBDF_CLS_WRITE, NBDF_CLS_FLUSH, NBDF_CLS_TRIM, NBDF_NCLS };

/* The buckets of c's classes for its export c->bucket (nbdopts.c): by the
 * node's rules (gate_resolve(): template buckets may be made), or all the
 * export's without rules.  Sets c->cls_gen.  O(rules matching) x 4, once
 * per connection and rules change, never per request. */
void nbdf_resolve_classes(nconn_t *c);

/* Counts a request of class k that c's classes refuse (gate_refusal():
 * per reason and per identity).  Only on the refusal path. */
void nbdf_class_refused(nconn_t *c, int k);

/* Queues n bytes of reply on c, written at the end of this loop pass (out
 * of memory breaks the stream: the connection closes). */
void nbdf_out(nconn_t *c, const void *p, size_t n);

/* Queues an option reply without data. */
void nbdf_opt_reply(nconn_t *c, uint32_t opt, uint32_t type);

/* Transmission flags for this connection: NBD_FLAG_SEND_DF only once
 * structured replies are negotiated (proto.md, "Transmission flags"). */
uint16_t nbdf_tflags(const nconn_t *c);

/* Handles one option (nbdopts.c) with its data, in ST_OPTS; may move the
 * connection to ST_TRANS or ST_CLOSING.  Returns 0, or -1 to close at
 * once. */
int nbdf_handle_option(nconn_t *c, uint32_t opt, const uint8_t *data, uint32_t len);

#endif
