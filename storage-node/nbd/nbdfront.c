/* nbdfront.c - NBD front of bqos-node: the state machine per connection, transmission, dispatch through the gate, replies; option haggling is nbdopts.c (see nbdfront.h). */
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
#include "storage-node/io/gate.h"
#include "storage-node/nbd/nbd.h"
#include "storage-node/nbd/nbdconn.h"

#define MAX_OPTIONS 1024               /* per connection: more is a DoS */
#define OUT_HIGH (8u * 1024 * 1024)    /* unsent reply bytes before we stop reading */
#define BUF_HIGH (64u * 1024 * 1024)   /* per connection: request buffers before we stop reading */
#define READ_MIN (64u * 1024)          /* bytes asked of one read(2) ... */
#define READ_MAX (1024u * 1024)        /* ... or more while a payload is awaited */
#define MAX_EXTENTS 1024               /* descriptors in one BLOCK_STATUS reply */
#define REQS_KEEP 1024                 /* free request records a front keeps */

#define conn_of(l) container_of(l, nconn_t, sock)

static void conn_free(nconn_t *c);
static void conn_update(nconn_t *c);
static void dispatch_more(void *arg);

/* ---- replies ------------------------------------------------------------ */

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
        nbdf_out(c, b, nbd_encode_simple_reply(b, error, handle));
    } else if (error) {
        char msg[NBD_MAX_ERR_MSG + 1];
        snprintf(msg, sizeof msg, "%s of %u bytes at offset %llu: %s", nbd_cmd_name(type),
                 length, (unsigned long long)offset, strerror((int)error));
        nbdf_out(c, b, nbd_encode_error_chunk(b, handle, error, msg));
    } else if (type == NBD_CMD_READ) {
        nbdf_out(c, b, nbd_encode_chunk_header(b, NBD_REPLY_FLAG_DONE, NBD_REPLY_TYPE_NONE, handle, 0));
    } else {
        nbdf_out(c, b, nbd_encode_simple_reply(b, 0, handle));
    }
}

/* Request-buffer bytes of the node (--nbd-request-memory): `len` more
 * (delta > 0) or fewer; connections held back by the budget are woken in
 * the next pass of the loop once some are freed. */
static void buf_account(nbdfront_t *f, uint64_t len, int delta)
{
    if (delta > 0) {
        f->buf_total += len;
        return;
    }
    f->buf_total -= len;
    if (f->nbudget_wait > 0)
        event_active(f->budget_ev, EV_TIMEOUT, 1);
}

static void free_buf(const void *data, size_t len, void *arg)
{
    buf_account(arg, len, -1);
    free((void *)data);
}

static void on_budget(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    nbdfront_t *f = arg;
    for (conns_conn_t *l = conns_first(f->cn), *next; l; l = next) {
        next = l->next;
        nconn_t *c = conn_of(l);
        if (c->budget_wait) {
            c->budget_wait = 0;
            f->nbudget_wait--;
            conn_update(c);
        }
    }
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

static void req_free(nbdfront_t *f, nreq_t *r)
{
    if (r->op.buf && (r->type == NBD_CMD_READ || r->type == NBD_CMD_WRITE))
        buf_account(f, r->op.length, -1);
    free(r->op.buf);
    freelist_put(&f->reqs, r);
}

/* Answers a finished request on its connection (if it still has one) and
 * frees it; with `update`, lets the connection read on or close. */
static void req_finish(nbdfront_t *f, nreq_t *r, int result, int update)
{
    nconn_t *c = r->conn;
    if (!c) {
        req_free(f, r);
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
        nbdf_out(c, b, nbd_encode_block_status(b, NBD_REPLY_FLAG_DONE, r->handle, META_ID_ALLOCATION,
                                          x, n));
    } else if (!e && r->type == NBD_CMD_READ && r->op.length > 0) {
        /* The data is complete before anything is sent, so one chunk that
         * is also the last one is allowed (proto.md, "NBD_CMD_READ"). */
        uint8_t b[NBD_OFFSET_DATA_HDR_LEN];
        if (c->structured)
            nbdf_out(c, b, nbd_encode_offset_data(b, NBD_REPLY_FLAG_DONE, r->handle, r->op.offset,
                                             r->op.length));
        else
            nbdf_out(c, b, nbd_encode_simple_reply(b, 0, r->handle));
        struct evbuffer *ob = c->sock.out;
        if (evbuffer_add_reference(ob, r->op.buf, r->op.length, free_buf, c->f) == 0)
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
    req_free(f, r);
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
    double t = iolat_now(gate_iolat(f->g));
    while ((it = gate_take(f->g)) != NULL) {
        nreq_t *r = container_of(it, nreq_t, item);
        r->state = RQ_INFLIGHT;
        r->ts.dispatch = t;
        if (f->cfg.inline_reads && blockdev_try_inline(f->bd, &r->op)) {
            f->inline_done++;
            gate_done_inline(f->g);
            gate_back(f->g, &r->item);
            iolat_done(gate_iolat(f->g), &r->item, &r->ts, blockdev_op_bytes(&r->op));
            req_finish(f, r, r->op.result, 1);
            continue;
        }
        int rc = blockdev_submit(f->bd, &r->op);
        if (rc < 0) {
            gate_untake(f->g);
            gate_back(f->g, &r->item);
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
    gate_back(f->g, &r->item);
    iolat_done(gate_iolat(f->g), &r->item, &r->ts, blockdev_op_bytes(&r->op));
    req_finish(f, r, op->result, 1);
    if (!gate_stopping(f->g))
        dispatch_more(f);
    else
        gate_check_stopped(f->g);
}

/* What a transmission command becomes at the backend, what it costs in
 * byte tokens and the counter of nbdfront_stats_t it counts in
 * (nbd_check_request() lets only these through; the last row: default). */
typedef struct {
    uint16_t type;
    blockdev_kind_t kind;
    cost_kind_t cost;
    size_t count; /* offsetof(nbdfront_stats_t, ...), a uint64_t */
} cmd_row_t;

static const cmd_row_t cmd_rows[] = {
    {NBD_CMD_READ, BLOCKDEV_READ, COST_READ, offsetof(nbdfront_stats_t, reads)},
    {NBD_CMD_WRITE, BLOCKDEV_WRITE, COST_WRITE, offsetof(nbdfront_stats_t, writes)},
    {NBD_CMD_FLUSH, BLOCKDEV_FLUSH, COST_FLUSH, offsetof(nbdfront_stats_t, flushes)},
    {NBD_CMD_BLOCK_STATUS, BLOCKDEV_EXTENTS, COST_NONE, offsetof(nbdfront_stats_t, block_status)},
    {NBD_CMD_TRIM, BLOCKDEV_TRIM, COST_TRIM, offsetof(nbdfront_stats_t, trims)},
};

static const cmd_row_t *cmd_row(uint16_t type)
{
    size_t n = sizeof cmd_rows / sizeof cmd_rows[0];
    for (size_t i = 0; i < n - 1; i++)
        if (cmd_rows[i].type == type)
            return &cmd_rows[i];
    return &cmd_rows[n - 1];
}

/* Starts a request whose header is consumed and whose WRITE payload is
 * complete in `in`.  Returns 0, or -1 if the connection must close. */
static int start_request(nconn_t *c, const nbd_request_t *q, struct evbuffer *in)
{
    nbdfront_t *f = c->f;
    nreq_t *r = freelist_get(&f->reqs);
    if (!r)
        return -1;
    memset(r, 0, sizeof *r);
    r->handle = q->handle;
    r->type = q->type;
    r->op.export_id = c->bucket;
    r->op.offset = q->offset;
    r->op.length = q->length;
    r->op.fua = (q->flags & NBD_CMD_FLAG_FUA) != 0;
    const cmd_row_t *k = cmd_row(q->type);
    r->op.kind = k->kind;
    if (k->kind == BLOCKDEV_EXTENTS) {
        r->op.max_extents = (q->flags & NBD_CMD_FLAG_REQ_ONE) ? 1 : MAX_EXTENTS;
        r->op.buf = calloc(r->op.max_extents, sizeof(blockdev_extent_t));
        if (!r->op.buf) {
            req_free(f, r);
            return -1;
        }
    }
    (*(uint64_t *)(void *)((char *)&f->st + k->count))++;
    if (q->type == NBD_CMD_READ || q->type == NBD_CMD_WRITE) {
        r->op.buf = blockdev_alloc(q->length);
        if (!r->op.buf) {
            req_free(f, r);
            return -1;
        }
        buf_account(f, q->length, 1);
        if (q->type == NBD_CMD_WRITE && q->length > 0 &&
            evbuffer_remove(in, r->op.buf, q->length) != (int)q->length) {
            req_free(f, r);
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
    r->item.cost = cost_of(&f->cfg.cost, k->cost, q->length);
    r->ts.arrival = iolat_now(gate_iolat(f->g));
    f->st.requests++;
    if (gate_enqueue(f->g, c->bucket, &r->item) < 0) {
        iolat_refused(gate_iolat(f->g), c->bucket);
        req_finish(f, r, -EIO, 0);
    }
    return 0;
}

/* ---- connection --------------------------------------------------------- */

/* Copies the next n bytes of the input (a message header) to h, leaving
 * them there.  Returns 1, or 0 while fewer than n are buffered. */
static int peek(struct evbuffer *in, void *h, size_t n)
{
    return evbuffer_copyout(in, h, n) == (ev_ssize_t)n;
}

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
                nbdf_opt_reply(c, c->ra_opt, c->ra_code);
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
            if (!peek(in, b, sizeof b))
                return 0;
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
            if (!peek(in, h, sizeof h))
                return 0;
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
            int rc = nbdf_handle_option(c, o.option, data, o.length);
            evbuffer_drain(in, o.length);
            if (rc < 0)
                return -1;
            if (c->state == ST_STARTTLS && evbuffer_get_length(in) > 0) {
                /* Bytes sent in clear behind STARTTLS would pass for
                 * encrypted ones (command injection): refused. */
                log_info("%s: data after STARTTLS before the handshake; closing", c->peer);
                return -1;
            }
            continue;
        }
        if (c->state == ST_STARTTLS || c->state == ST_TLSHS)
            return 0;
        /* ST_TRANS */
        if (c->nreqs >= f->cfg.max_queued || c->buf_bytes > BUF_HIGH ||
            evbuffer_get_length(c->sock.out) > OUT_HIGH)
            return 0; /* a completion calls conn_update() again */
        uint8_t h[NBD_REQUEST_LEN];
        nbd_request_t q;
        if (!peek(in, h, sizeof h))
            return 0;
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
            iolat_refused(gate_iolat(f->g), c->bucket);
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
        uint64_t need = q.type == NBD_CMD_READ || q.type == NBD_CMD_WRITE ? q.length : 0;
        if (need && f->buf_total > 0 && f->buf_total + need > f->cfg.request_memory) {
            /* Over the node's budget: read on once buffers free (on_budget()). */
            if (!c->budget_wait)
                f->nbudget_wait++;
            c->budget_wait = 1;
            return 0;
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
    size_t outlen = evbuffer_get_length(c->sock.out);
    if ((c->state == ST_CLOSING || gate_stopping(f->g)) && c->nreqs == 0 && c->swallow == 0 &&
        outlen == 0) {
        conn_free(c);
        if (gate_stopping(f->g))
            gate_check_stopped(f->g);
        return;
    }
    if (c->state == ST_TLSHS)
        return; /* the handshake arms the events (tls_step()) */
    /* Backpressure: stop reading while too much is queued or unsent.  A
     * payload being discarded is read even then. */
    int want = c->swallow > 0 ||
               (c->state != ST_CLOSING && c->state != ST_STARTTLS && !gate_stopping(f->g) &&
                c->nreqs < f->cfg.max_queued && !c->budget_wait &&
                c->buf_bytes <= BUF_HIGH && outlen <= OUT_HIGH);
    if (want != c->reading) {
        c->reading = want;
        if (want)
            event_add(c->sock.rev, NULL);
        else
            event_del(c->sock.rev);
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

/* ---- TLS (io/tls.h) ----------------------------------------------------- */

/* Bytes one read event asks of the socket. */
static size_t read_ask(const nconn_t *c)
{
    return c->want > READ_MIN ? (c->want < READ_MAX ? c->want : READ_MAX) : READ_MIN;
}

/* One handshake step; arms the event it waits for.  Returns 1 once TLS is
 * up (option haggling goes on, encrypted), 0 while it runs, -1 if the
 * connection was freed (failed handshake). */
static int tls_step(nconn_t *c)
{
    char why[128];
    int rc = tls_handshake(c->tls, why, sizeof why);
    if (rc < 0) {
        log_info("%s: TLS handshake: %s; closing", c->peer, why);
        conns_tls_failed(c->f->cn);
        c->state = ST_CLOSING;
        conn_gone(c, 0);
        return -1;
    }
    conns_want_write(&c->sock, rc == 0 && tls_wants_write(c->tls));
    if (!c->reading) {
        c->reading = 1;
        event_add(c->sock.rev, NULL);
    }
    if (rc == 1) {
        c->state = ST_OPTS;
        c->sock.handshaking = 0;
        /* the connection's identity (conns.h): what the rules match on */
        const char *cert = tls_peer_name(c->tls), *psk = tls_psk_id(c->tls);
        if ((cert && conns_set_identity(&c->sock, CONN_ID_CERT, cert) < 0) ||
            (psk && conns_set_identity(&c->sock, CONN_ID_PSK, psk) < 0)) {
            log_warn("%s: out of memory for its TLS identity; closing", c->peer);
            c->state = ST_CLOSING;
            conn_gone(c, 0);
            return -1;
        }
        tls_describe(c->tls, why, sizeof why);
        log_debug("%s: TLS up: %s%s%s%s%s", c->peer, why, cert ? ", certificate " : "",
                  cert ? cert : "", psk ? ", PSK identity " : "", psk ? psk : "");
    }
    return rc;
}

/* A read or write event of a TLS connection: steps the handshake, or reads
 * and decrypts what came.  May free the connection. */
static void tls_event(nconn_t *c)
{
    if (c->state == ST_TLSHS && tls_step(c) <= 0)
        return;
    ssize_t n = tls_read(c->tls, c->in, read_ask(c));
    if (n == -EAGAIN)
        return;
    if (n <= 0) {
        conn_gone(c, (int)-n);
        return;
    }
    conn_update(c);
}

/* The STARTTLS ACK is written: the handshake begins.  Returns 0, or -1 if
 * the connection was freed. */
static int tls_start(nconn_t *c)
{
    c->tls = tls_sess_new(c->f->cfg.tls, c->sock.fd);
    if (!c->tls) {
        conn_gone(c, ENOMEM);
        return -1;
    }
    c->state = ST_TLSHS;
    c->sock.handshaking = 1; /* an idle timeout, if any, bounds the handshake */
    return tls_step(c) < 0 ? -1 : 0;
}

/* Writes what it can of the replies.  Returns 0, or -1 if the connection
 * was freed (write error). */
static int conn_flush(nconn_t *c)
{
    int rc = c->tls ? tls_write(c->tls, &c->sock) : conns_write(&c->sock);
    if (rc < 0) {
        conn_gone(c, -rc);
        return -1;
    }
    if (c->state == ST_STARTTLS && !c->sock.writing)
        return tls_start(c);
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
        if (conn_flush(c) == 0 && was_blocked && !c->sock.writing)
            conn_update(c); /* output drained: read on, or close */
    }
}

static void on_writable(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    nconn_t *c = arg;
    if (c->state == ST_TLSHS) {
        tls_event(c);
        return;
    }
    if (conn_flush(c) == 0 && !c->sock.writing)
        conn_update(c);
}

static void on_readable(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    nconn_t *c = arg;
    if (c->tls) {
        tls_event(c);
        return;
    }
    size_t ask = read_ask(c);
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
    if (c->budget_wait)
        f->nbudget_wait--;
    while (c->reqs) {
        nreq_t *r = c->reqs;
        req_unlink(r);
        if (r->state == RQ_QUEUED) {
            gate_remove(f->g, &r->item);
            req_free(f, r);
        }
        /* in flight: now an orphan, freed by its completion */
    }
    if (c->dirty) {
        nconn_t **pp = &f->dirty;
        while (*pp && *pp != c)
            pp = &(*pp)->dnext;
        if (*pp)
            *pp = c->dnext;
    }
    evbuffer_free(c->in);
    tls_sess_free(&c->tls);
    conns_close(f->cn, &c->sock); /* its buffer frees the read buffers replies refer to */
    free(c);
}

/* The gate refuses a connection (stopping, or max_conns reached). */
static void on_refuse(void *arg, evutil_socket_t fd)
{
    (void)fd;
    nbdfront_t *f = arg;
    log_warn("NBD connection refused (%d open%s)", conns_count(f->cn),
             gate_stopping(f->g) ? ", shutting down" : "");
}

/* The registry's eviction at --max-conns (conns.h): only a connection
 * still haggling (no export chosen, no TLS session), with nothing read and
 * nothing to write, is closed.  A connection in transmission never is: the
 * kernel's client does not reconnect, so closing an idle export would fail
 * the device.  Returns 1 if closed. */
static int on_evict(void *arg, conns_conn_t *l)
{
    (void)arg;
    nconn_t *c = conn_of(l);
    if ((c->state != ST_FLAGS && c->state != ST_OPTS) || c->tls || c->reqs || c->dirty ||
        c->in_process || c->swallow || c->reply_after || evbuffer_get_length(c->in) > 0)
        return 0;
    conn_free(c);
    return 1;
}

static void on_accept(void *arg, evutil_socket_t fd, const struct sockaddr *sa, int salen)
{
    (void)salen;
    nbdfront_t *f = arg;
    nconn_t *c = calloc(1, sizeof *c);
    if (c) {
        c->f = f;
        c->bucket = -1;
        c->meta_bucket = -1;
        c->in = evbuffer_new();
    }
    if (!c || !c->in || conns_open(f->cn, &c->sock, fd, on_readable, on_writable, c) < 0) {
        if (c && c->in)
            evbuffer_free(c->in);
        free(c);
        evutil_closesocket(fd);
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
    uint8_t g[NBD_GREETING_LEN];
    nbdf_out(c, g, nbd_encode_greeting(g, NBD_FLAG_FIXED_NEWSTYLE | NBD_FLAG_NO_ZEROES));
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
    conns_conn_t *l = conns_first(f->cn);
    while (l) {
        conns_conn_t *next = l->next;
        conn_update(conn_of(l));
        l = next;
    }
}

static int on_idle(void *arg)
{
    nbdfront_t *f = arg;
    return conns_first(f->cn) == NULL;
}

/* ---- public ------------------------------------------------------------- */

void nbdfront_config_defaults(nbdfront_config_t *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    listener_parse("127.0.0.1:10809", &cfg->listen);
    cfg->outstanding = 5;
    cfg->max_conns = 4096;
    cfg->max_queued = 256;
    cfg->request_memory = 256u << 20;
    cfg->inline_reads = 1;
    cfg->store.export_size = 1ull << 30;
    cfg->store.workers = 5;
    cfg->store.max_exports = MAX_EXPORTS;
    cfg->cost = COST_CONFIG_DEFAULT;
}

nbdfront_t *nbdfront_new(struct event_base *base, const nbdfront_config_t *cfg, int *err)
{
    int rc = 0;
    nbdfront_t *f = NULL;
    if (!base || !cfg || cfg->outstanding < 1 || cfg->max_conns < 1 ||
        cfg->max_queued < 1 || !cfg->store.path || (cfg->tls_mode != NBDTLS_OFF && !cfg->tls) ||
        cost_check(&cfg->cost) < 0) {
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
    freelist_init(&f->reqs, sizeof(nreq_t), REQS_KEEP);
    f->path = strdup(cfg->store.path);
    if (!f->path) {
        rc = -ENOMEM;
        goto out;
    }
    f->cfg.store.path = f->path;
    if (f->cfg.store.max_exports < 1)
        f->cfg.store.max_exports = MAX_EXPORTS;
    static const gate_hooks_t hooks = {.dispatch = dispatch_more, .drain = drain_one,
                                       .stop = on_stop, .idle = on_idle,
                                       .accept = on_accept, .refuse = on_refuse,
                                       .evict = on_evict};
    gate_config_t gc = {.tag = "NBD: ", .outstanding = cfg->outstanding,
                        .max_conns = cfg->max_conns, .max_buckets = f->cfg.store.max_exports,
                        .defer = 0, .policy = cfg->policy, .weighted = cfg->weighted};
    if (!(f->g = gate_new(base, &gc, &hooks, f, &rc)))
        goto out;
    f->cn = gate_conns(f->g);
    f->flush_ev = event_new(base, -1, 0, on_flush, f);
    f->budget_ev = event_new(base, -1, 0, on_budget, f);
    if (!f->flush_ev || !f->budget_ev) {
        rc = -ENOMEM;
        goto out;
    }
    f->bd = blockdev_new(base, &f->cfg.store, on_done, f, &rc);
    if (!f->bd)
        goto out;
    rc = conns_listen(f->cn, &cfg->listen);
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
    conns_stats_t cs;
    conns_stats(f->cn, &cs);
    *o = f->st;
    o->conns = cs.total;
    o->inflight = gate_inflight(f->g);
    o->inline_reads = f->inline_done;
}

void nbdfront_destroy(nbdfront_t **fp)
{
    if (!fp || !*fp)
        return;
    nbdfront_t *f = *fp;
    gate_close(f->g);
    while (f->g && conns_first(f->cn))
        conn_free(conn_of(conns_first(f->cn)));
    blockdev_destroy(&f->bd); /* delivers the last completions: orphans freed */
    gate_destroy(&f->g);      /* what is still queued goes to drain_one() */
    if (f->flush_ev)
        event_free(f->flush_ev);
    if (f->budget_ev)
        event_free(f->budget_ev);
    freelist_fini(&f->reqs);
    free(f->path);
    free(f);
    *fp = NULL;
}
