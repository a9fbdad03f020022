/* nbdfront.c - NBD front of bqos-node: handshake and transmission state machine per connection, scheduling, replies (see nbdfront.h). */
#include "storage-node/nbd/nbdfront.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/util.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "storage-node/gate.h"
#include "storage-node/nbd/nbd.h"

#define container_of(p, T, m) ((T *)(void *)((char *)(p) - offsetof(T, m)))

#define MAX_EXPORTS 65536
#define MAX_OPTIONS 1024               /* per connection: more is a DoS */
#define OUT_HIGH (8u * 1024 * 1024)    /* unsent reply bytes before we stop reading */
#define BUF_HIGH (64u * 1024 * 1024)   /* per connection: request buffers before we stop reading */
#define READ_MIN (64u * 1024)          /* bytes asked of one read(2) ... */
#define READ_MAX (1024u * 1024)        /* ... or more while a payload is awaited */
#define MAX_EXTENTS 1024               /* descriptors in one BLOCK_STATUS reply */
#define META_ID_ALLOCATION 1           /* our context id of base:allocation */
#define TFLAGS (NBD_FLAG_HAS_FLAGS | NBD_FLAG_SEND_FLUSH | NBD_FLAG_SEND_FUA | \
                NBD_FLAG_SEND_TRIM | NBD_FLAG_CAN_MULTI_CONN)

enum { ST_FLAGS = 0, ST_OPTS, ST_TRANS, ST_CLOSING };
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
} nreq_t;

/* One client connection: a state machine (client flags, options,
 * transmission, closing).  Loop thread.
 *
 * The socket is driven by hand rather than by a bufferevent, to save
 * system calls (each costs ~1 us on a paravirtualised guest): a read event
 * does one readv(2) into `in` (a bufferevent asks FIONREAD first); replies
 * gather in `outb` and are written with one writev(2) per loop iteration
 * (flush_ev), and a write event is armed only when the socket is full (a
 * bufferevent arms and disarms it around every write: two epoll_ctl and an
 * extra epoll_wait). */
typedef struct nconn {
    gate_conn_t link;      /* in the gate's list */
    struct nbdfront *f;
    evutil_socket_t fd;
    struct evbuffer *in, *outb;
    struct event *rev, *wev;
    int writing;           /* wev is armed */
    int dirty;             /* on f->dirty: outb has bytes to write */
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
    int bucket;            /* export, in transmission */
    uint64_t size;
    nreq_t *reqs;          /* queued and in flight */
    int nreqs;
    uint64_t buf_bytes;    /* READ/WRITE buffers of those */
    int reading;
    int in_process;
    char peer[64];
} nconn_t;

struct nbdfront {
    nbdfront_config_t cfg;
    char *path;
    struct event_base *base;
    sched_t *s;
    gate_t *g;             /* listener, connections, window, stop */
    blockdev_t *bd;
    nconn_t *dirty;        /* connections with replies to write */
    struct event *flush_ev;
    int dispatching;       /* inside dispatch_more() */
    uint64_t inline_done;  /* reads served from the page cache at once */
    nbdfront_stats_t st;
};

#define conn_of(l) container_of(l, nconn_t, link)

static void conn_free(nconn_t *c);
static void conn_close_io(nconn_t *c);
static void conn_update(nconn_t *c);
static void dispatch_more(void *arg);

void nbdfront_config_defaults(nbdfront_config_t *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    listener_parse("127.0.0.1:10809", &cfg->listen);
    cfg->outstanding = 5;
    cfg->max_conns = 4096;
    cfg->max_queued = 256;
    cfg->inline_reads = 1;
    cfg->store.export_size = 1ull << 30;
    cfg->store.workers = 5;
    cfg->store.max_exports = MAX_EXPORTS;
}

/* ---- replies ------------------------------------------------------------ */

/* Queues connection c for the writing of its replies at the end of the
 * current loop iteration (after every callback that may add more). */
static void mark_dirty(nconn_t *c)
{
    if (c->dirty || c->writing)
        return; /* already queued, or the write event will send it */
    c->dirty = 1;
    c->dnext = c->f->dirty;
    if (!c->f->dirty)
        event_active(c->f->flush_ev, EV_TIMEOUT, 1);
    c->f->dirty = c;
}

static void out(nconn_t *c, const void *p, size_t n)
{
    if (evbuffer_add(c->outb, p, n) < 0)
        c->state = ST_CLOSING; /* out of memory: the stream is broken */
    mark_dirty(c);
}

static void opt_reply(nconn_t *c, uint32_t opt, uint32_t type)
{
    uint8_t b[NBD_REP_HDR_LEN];
    out(c, b, nbd_encode_rep_header(b, opt, type, 0));
}

/* Transmission flags for this connection: NBD_FLAG_SEND_DF only once
 * structured replies are negotiated (proto.md, "Transmission flags"). */
static uint16_t conn_tflags(const nconn_t *c)
{
    return (uint16_t)(TFLAGS | (c->structured ? NBD_FLAG_SEND_DF : 0));
}

/* Answers a request that carries no data back: a failure, or the success of
 * anything but a READ with data.  Without structured replies that is a
 * simple reply.  With them (proto.md, "Structured reply chunk message"): an
 * error is one NBD_REPLY_TYPE_ERROR chunk with a message; a successful
 * zero-length READ is NBD_REPLY_TYPE_NONE (a READ never gets a simple
 * reply); other successes keep the simple reply, which the protocol allows
 * for replies without payload. */
static void cmd_reply(nconn_t *c, uint16_t type, uint32_t error, uint64_t handle,
                      uint64_t offset, uint32_t length)
{
    uint8_t b[NBD_ERROR_CHUNK_MAX];
    if (error)
        c->f->st.errors++;
    if (!c->structured) {
        out(c, b, nbd_encode_simple_reply(b, error, handle));
    } else if (error) {
        char msg[NBD_MAX_ERR_MSG + 1];
        snprintf(msg, sizeof msg, "%s of %u bytes at offset %llu: %s", nbd_cmd_name(type),
                 length, (unsigned long long)offset, strerror((int)error));
        out(c, b, nbd_encode_error_chunk(b, handle, error, msg));
    } else if (type == NBD_CMD_READ) {
        out(c, b, nbd_encode_chunk_header(b, NBD_REPLY_FLAG_DONE, NBD_REPLY_TYPE_NONE, handle, 0));
    } else {
        out(c, b, nbd_encode_simple_reply(b, 0, handle));
    }
}

static void free_buf(const void *data, size_t len, void *arg)
{
    (void)len;
    (void)arg;
    free((void *)data);
}

/* ---- requests ----------------------------------------------------------- */

static void req_unlink(nreq_t *r)
{
    nconn_t *c = r->conn;
    if (!c)
        return;
    if (r->prev)
        r->prev->next = r->next;
    else
        c->reqs = r->next;
    if (r->next)
        r->next->prev = r->prev;
    r->prev = r->next = NULL;
    c->nreqs--;
    if (r->type == NBD_CMD_READ || r->type == NBD_CMD_WRITE)
        c->buf_bytes -= r->op.length;
    r->conn = NULL;
}

static void req_free(nreq_t *r)
{
    free(r->op.buf);
    free(r);
}

/* Answers a finished request on its connection (if it still has one) and
 * frees it; with `update`, lets the connection read on or close. */
static void req_finish(nbdfront_t *f, nreq_t *r, int result, int update)
{
    nconn_t *c = r->conn;
    if (!c) {
        req_free(r);
        return;
    }
    uint32_t e = nbd_errno_to_wire(-result);
    if (result < 0)
        log_debug("%s: %s at %llu+%u: %s", c->peer, nbd_cmd_name(r->type),
                  (unsigned long long)r->op.offset, r->op.length, strerror(-result));
    if (!e && r->type == NBD_CMD_BLOCK_STATUS) {
        /* One chunk per selected context, and we have one (proto.md,
         * "NBD_CMD_BLOCK_STATUS"): it is also the last. */
        nbd_extent_t x[MAX_EXTENTS];
        const blockdev_extent_t *be = r->op.buf;
        uint32_t n = r->op.nextents;
        for (uint32_t i = 0; i < n; i++) {
            x[i].length = be[i].length;
            x[i].flags = (be[i].flags & BLOCKDEV_EXT_HOLE) ? NBD_STATE_HOLE | NBD_STATE_ZERO : 0;
        }
        uint8_t b[NBD_BLOCK_STATUS_HDR_LEN + MAX_EXTENTS * NBD_EXTENT_LEN];
        out(c, b, nbd_encode_block_status(b, NBD_REPLY_FLAG_DONE, r->handle, META_ID_ALLOCATION,
                                          x, n));
    } else if (!e && r->type == NBD_CMD_READ && r->op.length > 0) {
        /* The data is complete before anything is sent, so one chunk that
         * is also the last one is allowed (proto.md, "NBD_CMD_READ"). */
        uint8_t b[NBD_OFFSET_DATA_HDR_LEN];
        if (c->structured)
            out(c, b, nbd_encode_offset_data(b, NBD_REPLY_FLAG_DONE, r->handle, r->op.offset,
                                             r->op.length));
        else
            out(c, b, nbd_encode_simple_reply(b, 0, r->handle));
        struct evbuffer *ob = c->outb;
        if (evbuffer_add_reference(ob, r->op.buf, r->op.length, free_buf, NULL) == 0)
            r->op.buf = NULL;   /* the evbuffer frees it once sent */
        else
            c->state = ST_CLOSING; /* the reply is broken: end the session */
    } else {
        cmd_reply(c, r->type, e, r->handle, r->op.offset, r->op.length);
    }
    if (!e) {
        if (r->type == NBD_CMD_READ)
            f->st.bytes_read += r->op.length;
        else if (r->type == NBD_CMD_WRITE)
            f->st.bytes_written += r->op.length;
    }
    req_unlink(r);
    req_free(r);
    if (update)
        conn_update(c);
}

/* Hands IOs to the backend while fewer than `outstanding` are there.  A
 * read the page cache can satisfy completes here at once (no worker round
 * trip); its reply may let connections read on, which may call back in
 * here: the nested call returns and this loop picks their requests up. */
static void dispatch_more(void *arg)
{
    nbdfront_t *f = arg;
    if (f->dispatching)
        return;
    f->dispatching = 1;
    sched_item_t *it;
    while ((it = gate_take(f->g)) != NULL) {
        nreq_t *r = container_of(it, nreq_t, item);
        r->state = RQ_INFLIGHT;
        if (f->cfg.inline_reads && blockdev_try_inline(f->bd, &r->op)) {
            f->inline_done++;
            gate_done_inline(f->g);
            req_finish(f, r, r->op.result, 1);
            continue;
        }
        int rc = blockdev_submit(f->bd, &r->op);
        if (rc < 0) {
            gate_untake(f->g);
            req_finish(f, r, rc, 1);
        }
    }
    f->dispatching = 0;
}

static void on_done(blockdev_op_t *op, void *arg)
{
    nbdfront_t *f = arg;
    nreq_t *r = container_of(op, nreq_t, op);
    gate_done(f->g);
    req_finish(f, r, op->result, 1);
    if (!gate_stopping(f->g))
        dispatch_more(f);
    else
        gate_check_stopped(f->g);
}

/* Starts a request whose header is consumed and whose WRITE payload is
 * complete in `in`.  Returns 0, or -1 if the connection must close. */
static int start_request(nconn_t *c, const nbd_request_t *q, struct evbuffer *in)
{
    nbdfront_t *f = c->f;
    nreq_t *r = calloc(1, sizeof *r);
    if (!r)
        return -1;
    r->handle = q->handle;
    r->type = q->type;
    r->op.export_id = c->bucket;
    r->op.offset = q->offset;
    r->op.length = q->length;
    r->op.fua = (q->flags & NBD_CMD_FLAG_FUA) != 0;
    switch (q->type) {
    case NBD_CMD_READ:
        r->op.kind = BLOCKDEV_READ;
        f->st.reads++;
        break;
    case NBD_CMD_WRITE:
        r->op.kind = BLOCKDEV_WRITE;
        f->st.writes++;
        break;
    case NBD_CMD_FLUSH:
        r->op.kind = BLOCKDEV_FLUSH;
        f->st.flushes++;
        break;
    case NBD_CMD_BLOCK_STATUS:
        r->op.kind = BLOCKDEV_EXTENTS;
        r->op.max_extents = (q->flags & NBD_CMD_FLAG_REQ_ONE) ? 1 : MAX_EXTENTS;
        r->op.buf = calloc(r->op.max_extents, sizeof(blockdev_extent_t));
        if (!r->op.buf) {
            free(r);
            return -1;
        }
        f->st.block_status++;
        break;
    default:
        r->op.kind = BLOCKDEV_TRIM;
        f->st.trims++;
        break;
    }
    if (q->type == NBD_CMD_READ || q->type == NBD_CMD_WRITE) {
        r->op.buf = blockdev_alloc(q->length);
        if (!r->op.buf) {
            free(r);
            return -1;
        }
        if (q->type == NBD_CMD_WRITE && q->length > 0 &&
            evbuffer_remove(in, r->op.buf, q->length) != (int)q->length) {
            req_free(r);
            return -1;
        }
    }
    r->conn = c;
    r->next = c->reqs;
    if (c->reqs)
        c->reqs->prev = r;
    c->reqs = r;
    c->nreqs++;
    if (q->type == NBD_CMD_READ || q->type == NBD_CMD_WRITE)
        c->buf_bytes += q->length;
    r->state = RQ_QUEUED;
    f->st.requests++;
    if (sched_enqueue(f->s, c->bucket, &r->item) < 0)
        req_finish(f, r, -EIO, 0);
    return 0;
}

/* ---- handshake ---------------------------------------------------------- */

/* Looks up an export by name (empty: "default") and opens its store.
 * Returns the bucket index, -ENOENT, or -errno from the backend. */
static int find_export(nbdfront_t *f, const char *name, size_t len, uint64_t *size)
{
    if (len == 0) {
        name = "default";
        len = 7;
    }
    int b = sched_find_bucket(f->s, name, len);
    if (b < 0)
        return -ENOENT;
    int rc = blockdev_export(f->bd, b, sched_bucket_name(f->s, b), size);
    if (rc < 0) {
        log_warn("export '%s': %s", sched_bucket_name(f->s, b), strerror(-rc));
        return rc;
    }
    return b;
}

static void enter_transmission(nconn_t *c, int b, uint64_t size)
{
    c->bucket = b;
    c->size = size;
    c->meta = c->meta_bucket >= 0 && c->meta_bucket == b;
    c->state = ST_TRANS;
    log_debug("%s: export '%s' (%llu bytes)", c->peer, sched_bucket_name(c->f->s, b),
              (unsigned long long)size);
}

static void opt_list(nconn_t *c, uint32_t opt)
{
    nbdfront_t *f = c->f;
    int n = sched_nbuckets(f->s);
    for (int b = 0; b < n; b++) {
        const char *name = sched_bucket_name(f->s, b);
        size_t nl = strlen(name);
        uint8_t buf[NBD_REP_HDR_LEN + 4 + 256];
        out(c, buf, nbd_encode_rep_server(buf, opt, name, (uint32_t)nl));
    }
    opt_reply(c, opt, NBD_REP_ACK);
}

/* Answers an option whose data did not parse (logged at debug level). */
static void opt_invalid(nconn_t *c, uint32_t opt, const nbd_error_t *e)
{
    log_debug("%s: %s at byte %zu: %s", c->peer, nbd_opt_name(opt), e->offset, e->text);
    opt_reply(c, opt, NBD_REP_ERR_INVALID);
}

/* find_export() for an option: on failure answers it (unknown export, or
 * the store could not be opened) and returns < 0. */
static int opt_find_export(nconn_t *c, uint32_t opt, const char *name, size_t len,
                           uint64_t *size)
{
    int b = find_export(c->f, name, len, size);
    if (b < 0)
        opt_reply(c, opt, b == -ENOENT ? NBD_REP_ERR_UNKNOWN : NBD_REP_ERR_PLATFORM);
    return b;
}

static void opt_info_go(nconn_t *c, uint32_t opt, const uint8_t *data, uint32_t len)
{
    nbd_info_req_t ir;
    nbd_error_t e;
    if (nbd_parse_info_request(data, len, &ir, &e) < 0) {
        opt_invalid(c, opt, &e);
        return;
    }
    uint64_t size;
    int b = opt_find_export(c, opt, ir.name, ir.namelen, &size);
    if (b < 0)
        return;
    uint8_t buf[64];
    out(c, buf, nbd_encode_info_export(buf, opt, size, conn_tflags(c)));
    if (ir.want_block_size)
        out(c, buf, nbd_encode_info_block_size(buf, opt, 1, 4096, NBD_MAX_PAYLOAD));
    opt_reply(c, opt, NBD_REP_ACK);
    if (opt == NBD_OPT_GO)
        enter_transmission(c, b, size);
}

/* NBD_OPT_LIST_META_CONTEXT / NBD_OPT_SET_META_CONTEXT (proto.md, "Option
 * types", "Metadata querying", "The base: metadata namespace").  The only
 * context is base:allocation.  LIST: all contexts for no query, "base:" or
 * the exact name for a query, context id 0 ("reserved"); allowed without
 * structured replies, as qemu-nbd does.  SET: needs structured replies,
 * selects base:allocation only by its exact name, for the export named,
 * and replaces the previous selection even when it fails.  Unknown
 * namespaces and leaves are ignored; malformed data is
 * NBD_REP_ERR_INVALID, an unknown export NBD_REP_ERR_UNKNOWN. */
static void opt_meta(nconn_t *c, uint32_t opt, const uint8_t *data, uint32_t len)
{
    int list = opt == NBD_OPT_LIST_META_CONTEXT;
    if (!list)
        c->meta_bucket = -1;
    if (!list && !c->structured) {
        log_debug("%s: SET_META_CONTEXT before STRUCTURED_REPLY", c->peer);
        opt_reply(c, opt, NBD_REP_ERR_INVALID);
        return;
    }
    nbd_meta_req_t mr;
    nbd_error_t e;
    if (nbd_parse_meta_request(data, len, &mr, &e) < 0) {
        opt_invalid(c, opt, &e);
        return;
    }
    uint64_t size;
    int b = opt_find_export(c, opt, mr.name, mr.namelen, &size);
    if (b < 0)
        return;
    int match = list && mr.nqueries == 0;
    size_t cur = 0;
    const char *q;
    uint32_t ql;
    while (!match && nbd_meta_next_query(&mr, &cur, &q, &ql))
        match = nbd_meta_query_matches(q, ql, list);
    if (match) {
        uint8_t buf[NBD_REP_HDR_LEN + 4 + sizeof NBD_META_BASE_ALLOCATION];
        out(c, buf, nbd_encode_rep_meta_context(buf, opt, list ? 0 : META_ID_ALLOCATION,
                                                NBD_META_BASE_ALLOCATION));
        if (!list)
            c->meta_bucket = b;
    }
    opt_reply(c, opt, NBD_REP_ACK);
}

/* Handles one option with its data.  Returns 0, or -1 to close at once. */
static int handle_option(nconn_t *c, uint32_t opt, const uint8_t *data, uint32_t len)
{
    nbdfront_t *f = c->f;
    log_debug("%s: option %s (%u), %u bytes", c->peer, nbd_opt_name(opt), opt, len);
    if (gate_stopping(f->g) && opt != NBD_OPT_ABORT) {
        if (opt == NBD_OPT_EXPORT_NAME)
            return -1;
        opt_reply(c, opt, NBD_REP_ERR_SHUTDOWN);
        return 0;
    }
    switch (opt) {
    case NBD_OPT_EXPORT_NAME: {
        /* No way to answer an error: an unknown export ends the session
         * (proto.md, "Termination of the session during option haggling"). */
        uint64_t size;
        if (len > NBD_MAX_NAME || memchr(data, '\0', len))
            return -1;
        int b = find_export(f, (const char *)data, len, &size);
        if (b < 0) {
            log_info("%s: EXPORT_NAME '%.*s': no such export; closing", c->peer,
                     (int)(len > 64 ? 64 : len), (const char *)data);
            return -1;
        }
        uint8_t buf[NBD_EXPORT_REPLY_LEN];
        out(c, buf, nbd_encode_export_reply(buf, size, conn_tflags(c), c->no_zeroes));
        enter_transmission(c, b, size);
        return 0;
    }
    case NBD_OPT_ABORT:
        opt_reply(c, opt, NBD_REP_ACK);
        c->state = ST_CLOSING;
        return 0;
    case NBD_OPT_LIST:
        if (len != 0)
            opt_reply(c, opt, NBD_REP_ERR_INVALID);
        else
            opt_list(c, opt);
        return 0;
    case NBD_OPT_INFO:
    case NBD_OPT_GO:
        opt_info_go(c, opt, data, len);
        return 0;
    case NBD_OPT_STRUCTURED_REPLY:
        /* No data allowed; a second request is refused as nbdkit and
         * qemu-nbd do (proto.md, "Option types"). */
        if (len != 0 || c->structured) {
            opt_reply(c, opt, NBD_REP_ERR_INVALID);
        } else {
            c->structured = 1;
            opt_reply(c, opt, NBD_REP_ACK);
        }
        return 0;
    case NBD_OPT_LIST_META_CONTEXT:
    case NBD_OPT_SET_META_CONTEXT:
        opt_meta(c, opt, data, len);
        return 0;
    default:
        /* STARTTLS, extended headers and anything unknown. */
        opt_reply(c, opt, NBD_REP_ERR_UNSUP);
        return 0;
    }
}

/* ---- connection --------------------------------------------------------- */

/* Consumes what it can from the input.  Returns 0, or -1 to close now. */
static int process_input(nconn_t *c)
{
    nbdfront_t *f = c->f;
    struct evbuffer *in = c->in;
    nbd_error_t e;
    c->want = 0;
    for (;;) {
        size_t avail = evbuffer_get_length(in);
        if (c->swallow > 0) {
            size_t n = avail < c->swallow ? avail : (size_t)c->swallow;
            evbuffer_drain(in, n);
            c->swallow -= n;
            if (c->swallow > 0) {
                c->want = c->swallow;
                return 0;
            }
            if (c->reply_after == 1)
                opt_reply(c, c->ra_opt, c->ra_code);
            else if (c->reply_after == 2)
                cmd_reply(c, NBD_CMD_WRITE, c->ra_code, c->ra_handle, c->ra_offset,
                          c->ra_length);
            c->reply_after = 0;
            continue;
        }
        if (c->state == ST_CLOSING)
            return 0;
        if (c->state == ST_FLAGS) {
            uint32_t fl;
            uint8_t b[4];
            if (avail < 4)
                return 0;
            evbuffer_copyout(in, b, 4);
            if (nbd_parse_client_flags(b, 4, &fl, &e) < 0) {
                log_info("%s: handshake: %s; closing", c->peer, e.text);
                return -1;
            }
            evbuffer_drain(in, 4);
            c->no_zeroes = (fl & NBD_FLAG_C_NO_ZEROES) != 0;
            c->state = ST_OPTS;
            continue;
        }
        if (c->state == ST_OPTS) {
            uint8_t h[NBD_OPT_HDR_LEN];
            nbd_option_t o;
            if (avail < NBD_OPT_HDR_LEN)
                return 0;
            evbuffer_copyout(in, h, sizeof h);
            if (nbd_parse_option(h, sizeof h, &o, &e) < 0) {
                log_info("%s: option haggling: %s at byte %zu; closing", c->peer, e.text,
                         e.offset);
                return -1;
            }
            if (o.length > NBD_MAX_OPT_DATA) {
                if (o.option == NBD_OPT_EXPORT_NAME)
                    return -1;
                if (++c->nopts > MAX_OPTIONS)
                    return -1;
                evbuffer_drain(in, sizeof h);
                c->swallow = o.length;
                c->reply_after = 1;
                c->ra_opt = o.option;
                c->ra_code = NBD_REP_ERR_TOO_BIG;
                continue;
            }
            if (avail < NBD_OPT_HDR_LEN + (size_t)o.length)
                return 0;
            if (++c->nopts > MAX_OPTIONS) {
                log_info("%s: more than %d options; closing", c->peer, MAX_OPTIONS);
                return -1;
            }
            evbuffer_drain(in, sizeof h);
            static const uint8_t none[1];
            const uint8_t *data = o.length ? evbuffer_pullup(in, o.length) : none;
            if (!data)
                return -1;
            int rc = handle_option(c, o.option, data, o.length);
            evbuffer_drain(in, o.length);
            if (rc < 0)
                return -1;
            continue;
        }
        /* ST_TRANS */
        if (c->nreqs >= f->cfg.max_queued || c->buf_bytes > BUF_HIGH ||
            evbuffer_get_length(c->outb) > OUT_HIGH)
            return 0; /* a completion calls conn_update() again */
        uint8_t h[NBD_REQUEST_LEN];
        nbd_request_t q;
        if (avail < NBD_REQUEST_LEN)
            return 0;
        evbuffer_copyout(in, h, sizeof h);
        if (nbd_parse_request(h, sizeof h, &q, &e) < 0) {
            log_info("%s: transmission: %s; closing", c->peer, e.text);
            return -1;
        }
        if (q.type == NBD_CMD_DISC) {
            evbuffer_drain(in, sizeof h);
            log_debug("%s: DISC", c->peer);
            c->state = ST_CLOSING;
            return 0;
        }
        uint32_t err = nbd_check_request(&q, c->size, c->structured);
        if (!err && q.type == NBD_CMD_BLOCK_STATUS && !c->meta)
            err = NBD_EINVAL; /* no context selected (proto.md, "Metadata querying") */
        if (!err && gate_stopping(f->g))
            err = NBD_ESHUTDOWN;
        uint32_t payload = q.type == NBD_CMD_WRITE ? q.length : 0;
        if (err) {
            /* Answered at once and costs no token; a WRITE's payload is
             * read and discarded first. */
            log_debug("%s: %s at %llu+%u refused: error %u", c->peer, nbd_cmd_name(q.type),
                      (unsigned long long)q.offset, q.length, err);
            evbuffer_drain(in, sizeof h);
            if (payload) {
                c->swallow = payload;
                c->reply_after = 2;
                c->ra_code = err;
                c->ra_handle = q.handle;
                c->ra_offset = q.offset;
                c->ra_length = q.length;
            } else {
                cmd_reply(c, q.type, err, q.handle, q.offset, q.length);
            }
            continue;
        }
        if (avail < NBD_REQUEST_LEN + (size_t)payload) {
            /* Wait for the whole payload: a client that goes away now
             * leaves nothing written. */
            c->want = NBD_REQUEST_LEN + (size_t)payload - avail;
            return 0;
        }
        evbuffer_drain(in, sizeof h);
        if (start_request(c, &q, in) < 0)
            return -1;
        dispatch_more(f);
    }
}

/* Processes buffered input, closes the connection once a requested close
 * has nothing left to send, and decides whether to keep reading.  May free
 * the connection. */
static void conn_update(nconn_t *c)
{
    nbdfront_t *f = c->f;
    if (c->in_process)
        return;
    c->in_process = 1;
    int rc = process_input(c);
    c->in_process = 0;
    if (rc < 0) {
        conn_free(c);
        if (gate_stopping(f->g))
            gate_check_stopped(f->g);
        return;
    }
    size_t outlen = evbuffer_get_length(c->outb);
    if ((c->state == ST_CLOSING || gate_stopping(f->g)) && c->nreqs == 0 && c->swallow == 0 &&
        outlen == 0) {
        conn_free(c);
        if (gate_stopping(f->g))
            gate_check_stopped(f->g);
        return;
    }
    /* Backpressure: stop reading while too much is queued or unsent.  A
     * payload being discarded is read even then. */
    int want = c->swallow > 0 ||
               (c->state != ST_CLOSING && !gate_stopping(f->g) && c->nreqs < f->cfg.max_queued &&
                c->buf_bytes <= BUF_HIGH && outlen <= OUT_HIGH);
    if (want != c->reading) {
        c->reading = want;
        if (want)
            event_add(c->rev, NULL);
        else
            event_del(c->rev);
    }
}

/* The peer closed or the socket failed: drops the connection. */
static void conn_gone(nconn_t *c, int err)
{
    nbdfront_t *f = c->f;
    if (c->state != ST_CLOSING &&
        (c->nreqs > 0 || c->swallow > 0 || evbuffer_get_length(c->in) > 0))
        log_info("%s: client went away with %d requests pending, %zu bytes unread%s%s",
                 c->peer, c->nreqs, evbuffer_get_length(c->in), err ? ": " : "",
                 err ? strerror(err) : "");
    conn_free(c);
    if (gate_stopping(f->g))
        gate_check_stopped(f->g);
}

/* Writes what it can of the replies.  Returns 0, or -1 if the connection
 * was freed (write error). */
static int conn_flush(nconn_t *c)
{
    while (evbuffer_get_length(c->outb) > 0) {
        int n = evbuffer_write(c->outb, c->fd);
        if (n < 0) {
            int e = EVUTIL_SOCKET_ERROR();
            if (e == EINTR)
                continue;
            if (e == EAGAIN || e == EWOULDBLOCK)
                break;
            conn_gone(c, e);
            return -1;
        }
        if (n == 0)
            break;
    }
    int full = evbuffer_get_length(c->outb) > 0;
    if (full != c->writing) {
        c->writing = full;
        if (full)
            event_add(c->wev, NULL);
        else
            event_del(c->wev);
    }
    return 0;
}

/* End of a loop iteration's callbacks: writes every connection's replies. */
static void on_flush(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    nbdfront_t *f = arg;
    while (f->dirty) {
        nconn_t *c = f->dirty;
        f->dirty = c->dnext;
        c->dirty = 0;
        c->dnext = NULL;
        int was_blocked = !c->reading || c->state == ST_CLOSING || gate_stopping(f->g);
        if (conn_flush(c) == 0 && was_blocked && !c->writing)
            conn_update(c); /* output drained: read on, or close */
    }
}

static void on_writable(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    nconn_t *c = arg;
    if (conn_flush(c) == 0 && !c->writing)
        conn_update(c);
}

static void on_readable(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    nconn_t *c = arg;
    size_t ask = c->want > READ_MIN ? (c->want < READ_MAX ? c->want : READ_MAX) : READ_MIN;
    struct evbuffer_iovec v[2];
    int nv = evbuffer_reserve_space(c->in, (ev_ssize_t)ask, v, 2);
    if (nv <= 0) {
        conn_gone(c, ENOMEM);
        return;
    }
    struct iovec iov[2];
    for (int i = 0; i < nv; i++) {
        iov[i].iov_base = v[i].iov_base;
        iov[i].iov_len = v[i].iov_len;
    }
    ssize_t n = readv(fd, iov, nv);
    if (n < 0) {
        int e = errno;
        evbuffer_commit_space(c->in, v, 0);
        if (e == EAGAIN || e == EWOULDBLOCK || e == EINTR)
            return;
        conn_gone(c, e);
        return;
    }
    if (n == 0) {
        evbuffer_commit_space(c->in, v, 0);
        conn_gone(c, 0);
        return;
    }
    size_t left = (size_t)n;
    int used = 0;
    for (int i = 0; i < nv && left > 0; i++, used++) {
        if (v[i].iov_len > left)
            v[i].iov_len = left;
        left -= v[i].iov_len;
    }
    evbuffer_commit_space(c->in, v, used);
    conn_update(c);
}

static void conn_free(nconn_t *c)
{
    nbdfront_t *f = c->f;
    while (c->reqs) {
        nreq_t *r = c->reqs;
        req_unlink(r);
        if (r->state == RQ_QUEUED) {
            sched_remove(f->s, &r->item);
            req_free(r);
        }
        /* in flight: now an orphan, freed by its completion */
    }
    gate_conn_remove(f->g, &c->link);
    if (c->dirty) {
        nconn_t **pp = &f->dirty;
        while (*pp && *pp != c)
            pp = &(*pp)->dnext;
        if (*pp)
            *pp = c->dnext;
    }
    conn_close_io(c);
    free(c);
}

/* Frees the socket side of a connection (also of a half-built one). */
static void conn_close_io(nconn_t *c)
{
    if (c->rev)
        event_free(c->rev);
    if (c->wev)
        event_free(c->wev);
    if (c->in)
        evbuffer_free(c->in);
    if (c->outb)
        evbuffer_free(c->outb); /* frees the read buffers referenced by replies */
    if (c->fd >= 0)
        evutil_closesocket(c->fd);
}

/* The gate refuses a connection (stopping, or max_conns reached). */
static void on_refuse(void *arg, evutil_socket_t fd)
{
    (void)fd;
    nbdfront_t *f = arg;
    log_warn("NBD connection refused (%d open%s)", gate_nconns(f->g),
             gate_stopping(f->g) ? ", shutting down" : "");
}

static void on_accept(void *arg, evutil_socket_t fd, const struct sockaddr *sa, int salen)
{
    (void)salen;
    nbdfront_t *f = arg;
    nconn_t *c = calloc(1, sizeof *c);
    if (!c) {
        evutil_closesocket(fd);
        return;
    }
    c->f = f;
    c->bucket = -1;
    c->meta_bucket = -1;
    c->fd = fd;
    c->in = evbuffer_new();
    c->outb = evbuffer_new();
    c->rev = event_new(f->base, fd, EV_READ | EV_PERSIST, on_readable, c);
    c->wev = event_new(f->base, fd, EV_WRITE | EV_PERSIST, on_writable, c);
    if (evutil_make_socket_nonblocking(fd) < 0 || !c->in || !c->outb || !c->rev || !c->wev ||
        event_add(c->rev, NULL) < 0) {
        conn_close_io(c);
        free(c);
        return;
    }
    if (sa->sa_family == AF_INET) {
        char a[INET_ADDRSTRLEN];
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        evutil_inet_ntop(AF_INET, &in->sin_addr, a, sizeof a);
        snprintf(c->peer, sizeof c->peer, "nbd %s:%u", a, ntohs(in->sin_port));
    } else {
        snprintf(c->peer, sizeof c->peer, "nbd fd %d", (int)fd);
    }
    gate_conn_add(f->g, &c->link);
    uint8_t g[NBD_GREETING_LEN];
    out(c, g, nbd_encode_greeting(g, NBD_FLAG_FIXED_NEWSTYLE | NBD_FLAG_NO_ZEROES));
    c->reading = 1;
}

/* ---- stopping (the gate's hooks) ------------------------------------------- */

static void drain_one(sched_item_t *it, void *arg)
{
    nbdfront_t *f = arg;
    nreq_t *r = container_of(it, nreq_t, item);
    req_finish(f, r, -ESHUTDOWN, 0); /* no scheduler calls from in here */
}

/* After the drain: every connection stops reading, and closes once it has
 * nothing left to answer. */
static void on_stop(void *arg)
{
    nbdfront_t *f = arg;
    gate_conn_t *l = gate_conns(f->g);
    while (l) {
        gate_conn_t *next = l->next;
        conn_update(conn_of(l));
        l = next;
    }
}

static int on_idle(void *arg)
{
    nbdfront_t *f = arg;
    return gate_conns(f->g) == NULL;
}

/* ---- public ------------------------------------------------------------- */

nbdfront_t *nbdfront_new(struct event_base *base, sched_t *s,
                         const nbdfront_config_t *cfg, int *err)
{
    int rc = 0;
    nbdfront_t *f = NULL;
    if (!base || !s || !cfg || cfg->outstanding < 1 || cfg->max_conns < 1 ||
        cfg->max_queued < 1 || !cfg->store.path) {
        rc = -EINVAL;
        goto out;
    }
    f = calloc(1, sizeof *f);
    if (!f) {
        rc = -ENOMEM;
        goto out;
    }
    f->cfg = *cfg;
    f->base = base;
    f->s = s;
    f->path = strdup(cfg->store.path);
    if (!f->path) {
        rc = -ENOMEM;
        goto out;
    }
    f->cfg.store.path = f->path;
    if (f->cfg.store.max_exports < 1)
        f->cfg.store.max_exports = MAX_EXPORTS;
    static const gate_hooks_t hooks = {dispatch_more, drain_one, on_stop, on_idle,
                                       on_accept, on_refuse};
    gate_config_t gc = {"NBD: ", cfg->outstanding, cfg->max_conns,
                        f->cfg.store.max_exports, 0};
    if (!(f->g = gate_new(base, s, &gc, &hooks, f, &rc)))
        goto out;
    f->flush_ev = event_new(base, -1, 0, on_flush, f);
    if (!f->flush_ev) {
        rc = -ENOMEM;
        goto out;
    }
    f->bd = blockdev_new(base, &f->cfg.store, on_done, f, &rc);
    if (!f->bd)
        goto out;
    rc = gate_listen(f->g, &cfg->listen);
out:
    if (rc < 0) {
        nbdfront_destroy(&f);
        if (err)
            *err = rc;
        return NULL;
    }
    return f;
}

gate_t *nbdfront_gate(nbdfront_t *f)
{
    return f->g;
}

void nbdfront_stats(const nbdfront_t *f, nbdfront_stats_t *o)
{
    *o = f->st;
    o->conns = gate_total_conns(f->g);
    o->inflight = gate_inflight(f->g);
    o->inline_reads = f->inline_done;
}

void nbdfront_destroy(nbdfront_t **fp)
{
    if (!fp || !*fp)
        return;
    nbdfront_t *f = *fp;
    gate_close(f->g);
    while (f->g && gate_conns(f->g))
        conn_free(conn_of(gate_conns(f->g)));
    blockdev_destroy(&f->bd); /* delivers the last completions: orphans freed */
    if (f->s)
        sched_drain(f->s, drain_one, f);
    gate_destroy(&f->g);
    if (f->flush_ev)
        event_free(f->flush_ev);
    free(f->path);
    free(f);
    *fp = NULL;
}
