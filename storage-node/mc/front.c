/* front.c - memcached front of bqos-node: connections, ordered reply slots,
 * per-bucket scheduling and the backend hand-off (see front.h). */
#include "storage-node/mc/front.h"

#include <errno.h>
#include <event2/event.h>
#include <event2/buffer.h>
#include <event2/util.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/version.h"
#include "storage-node/io/freelist.h"
#include "storage-node/io/gate.h"
#include "storage-node/io/iolat.h"
#include "storage-node/io/sendbatch.h"
#include "storage-node/io/writers.h"
#include "storage-node/mc/backend.h"
#include "storage-node/mc/keyorder.h"
#include "storage-node/mc/mcauth.h"
#include "storage-node/mc/mcproto.h"
#include "storage-node/mc/mcreply.h"
#include "storage-node/mc/mcstats.h"
#include "storage-node/mc/replybudget.h"

#define RBUF_INITIAL 16384
#define SLOTS_HIGH 1024              /* unanswered slots before we stop reading */
#define OUT_HIGH (4u * 1024 * 1024)  /* unsent reply bytes before we stop reading */
#define SLOT_KEEP 1024               /* free slots a front keeps for reuse */
/* Bytes of a reusable slot: one IO with 2 KiB of keys and value (or a few
 * keys); a larger request gets a slot of its own size from malloc. */
#define SLOT_BLOCK (sizeof(slot_t) + sizeof(io_t) + 2048)

#define container_of(p, T, m) ((T *)(void *)((char *)(p) - offsetof(T, m)))

enum { IO_NEW = 0, IO_BLOCKED, IO_QUEUED, IO_INFLIGHT, IO_DONE };

struct slot;
struct conn;

/* One backend IO (one key).  Lives inside its slot's allocation. */
typedef struct io {
    sched_item_t item;     /* scheduler's link while IO_QUEUED */
    backend_op_t op;       /* backend's while IO_INFLIGHT */
    struct slot *slot;
    int state;
    int bucket;            /* scheduler bucket, chosen on arrival */
    iolat_ts_t ts;         /* arrival and dispatch, with metrics on */
    /* Same-key ordering within a connection (keyorder.h): a later IO of
     * the same key is this one's waiter (IO_BLOCKED) and enters the
     * scheduler only when this one is finished. */
    keyorder_entry_t ko;
} io_t;

/* One request's place in its connection's reply order.  Owned by the
 * connection while it lives; a slot whose connection went away with IOs
 * still at the backend is an orphan, freed by the last completion. */
typedef struct slot {
    struct slot *next;
    struct conn *conn;     /* NULL: orphan */
    mcp_cmd_t cmd;
    int noreply;
    int pooled;            /* a SLOT_BLOCK from the front's free list */
    int close_after;       /* quit / fatal error: close once written */
    int nios, pending, inflight;
    const char *ctext;     /* local reply (static or in the slot) ... */
    char *text;            /* ... or malloc'd */
    size_t textlen;
    io_t ios[];            /* then the copied keys and value */
} slot_t;

/* One client connection.  Loop thread. */
typedef struct conn {
    conns_conn_t sock;     /* socket, events, output buffer (conns.h) */
    struct front *f;
    char *rbuf;
    size_t rlen, rcap;
    size_t swallow;        /* bytes still to discard (too-large value) */
    slot_t *head, *tail;
    keyorder_t keys;       /* keys with unfinished IOs */
    int paused;            /* reading stopped for backpressure */
    int in_process;        /* inside conn_process(): no recursion */
    int closing;           /* quit or fatal parse error: read no more */
    int barrier;           /* a flush_all is unanswered: parse nothing more */
    int barrier_blocked;   /* parsing stopped at a barrier; resume when idle */
    int close_when_written;
    int broken;            /* EOF or write error: close now */
    size_t vbytes;         /* values fetched for slots not yet written */
    replybudget_conn_t rb; /* vbytes + output buffer, in f->rb */
    mcauth_conn_t auth;    /* --auth-file: logged in, and as whom */
    tls_sess_t *tls;       /* on a TLS port (front_config_t.tls); NULL: plain */
} conn_t;

struct front {
    front_config_t cfg;
    char *name, *backend_host;
    char backend_desc[300]; /* stats settings' bqos_backend */
    struct event_base *base;
    /* The scheduler, window, dispatch once per pass of the event loop
     * (after the reads and completions of that pass), stop. */
    gate_t *g;
    conns_t *cn;           /* the gate's listener and connections */
    backend_t *be;
    int default_bucket;
    int auto_buckets;
    mcp_req_t req;         /* parse scratch (large) */
    mcstats_t st;          /* counters of the stats command */
    uint64_t cmd_other;
    freelist_t slots;      /* free SLOT_BLOCKs */
    replybudget_t rb;      /* unsent reply bytes (replybudget.h) */
    struct event *rbtick;  /* once a second: the soft limit's time */
};

#define conn_of(l) container_of(l, conn_t, sock)

static void conn_flush(conn_t *c);
static void resume_if_room(conn_t *c);
static void conn_process(conn_t *c);
static int conn_maybe_close(conn_t *c);

/* ---- slots ------------------------------------------------------------ */

/* A zeroed slot with room for nios IOs and `extra` bytes after them (one
 * more, zero, at the end), or NULL when out of memory. */
static slot_t *slot_new(front_t *f, size_t nios, size_t extra)
{
    size_t need = sizeof(slot_t) + nios * sizeof(io_t) + extra + 1;
    if (need > SLOT_BLOCK)
        return calloc(1, need);
    slot_t *sl = freelist_get(&f->slots);
    if (sl) {
        memset(sl, 0, need);
        sl->pooled = 1;
    }
    return sl;
}

static void slot_free(front_t *f, slot_t *sl)
{
    for (int i = 0; i < sl->nios; i++)
        backend_free_value(&sl->ios[i].op);
    free(sl->text);
    if (sl->pooled)
        freelist_put(&f->slots, sl);
    else
        free(sl);
}

static void conn_append(conn_t *c, slot_t *sl)
{
    sl->conn = c;
    if (c->tail)
        c->tail->next = sl;
    else
        c->head = sl;
    c->tail = sl;
    c->sock.held++;
}

/* A slot answered locally with a fixed line (no CRLF in `line`). */
static void add_local(conn_t *c, const char *line, int noreply, int close_after)
{
    size_t n = strlen(line);
    slot_t *sl = slot_new(c->f, 0, n + 2);
    if (!sl) {
        c->broken = 1; /* out of memory: nothing sane to answer with */
        return;
    }
    char *t = (char *)&sl->ios[0];
    memcpy(t, line, n);
    memcpy(t + n, "\r\n", 2);
    sl->ctext = t; /* NUL-terminated: slot_new() zeroed one byte more */
    sl->noreply = noreply;
    sl->close_after = close_after;
    conn_append(c, sl);
}

static void add_local_text(conn_t *c, char *text, size_t len)
{
    slot_t *sl = slot_new(c->f, 0, 0);
    if (!sl) {
        free(text);
        c->broken = 1;
        return;
    }
    sl->text = text;
    sl->textlen = len;
    conn_append(c, sl);
}

/* Writes a finished slot's reply to the connection's output buffer. */
static void slot_write(front_t *f, conn_t *c, slot_t *sl)
{
    struct evbuffer *out = c->sock.out;
    if (sl->noreply)
        return;
    if (sl->text) {
        evbuffer_add(out, sl->text, sl->textlen);
        return;
    }
    if (sl->ctext) {
        evbuffer_add(out, sl->ctext, strlen(sl->ctext));
        return;
    }
    size_t room;
    char *p = c->tls ? NULL : conns_reply_room(&c->sock, &room);
    long n = p ? mcreply_flat(p, room, sl->cmd, &sl->ios[0].op, sizeof(io_t), sl->nios, &f->st)
               : -1;
    if (n >= 0) { /* the connection's own buffer: no libevent chain per reply */
        conns_reply_commit(&c->sock, (size_t)n);
        return;
    }
    mcreply_ops(out, sl->cmd, &sl->ios[0].op, sizeof(io_t), sl->nios, &f->st);
}

/* ---- connections -------------------------------------------------------- */

/* Re-counts c's unsent reply bytes (0 when `gone`); past its limits c is
 * closed, logged.  Once the node is back within its budget, the
 * connections it held back read again. */
static void conn_account(conn_t *c, int gone)
{
    front_t *f = c->f;
    int over = replybudget_over(&f->rb);
    size_t held = gone ? 0 : c->vbytes + conns_unsent(&c->sock);
    if (replybudget_set(&f->rb, &c->rb, held, (double)time(NULL)) == REPLYBUDGET_CLOSE && !c->broken) {
        log_error("closing a client that holds %zu bytes of unsent replies (limit %zu, "
                  "%zu for 60 s)", held, f->cfg.conn_reply_limit, f->rb.cfg.soft);
        c->broken = 1;
    }
    if (over && !replybudget_over(&f->rb))
        for (conns_conn_t *l = conns_first(f->cn); l; l = l->next)
            resume_if_room(conn_of(l));
}

/* Closes, every second, the connections held at their soft limit too long. */
static void on_rbtick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    front_t *f = arg;
    for (conns_conn_t *l = conns_first(f->cn), *next; l; l = next) {
        next = l->next;
        if (conn_of(l)->rb.soft_since > 0) {
            conn_account(conn_of(l), 0);
            conn_maybe_close(conn_of(l));
        }
    }
}

static void conn_free(conn_t *c)
{
    front_t *f = c->f;
    slot_t *sl = c->head;
    while (sl) {
        slot_t *next = sl->next;
        for (int i = 0; i < sl->nios; i++) {
            io_t *io = &sl->ios[i];
            keyorder_forget(&io->ko); /* waiters die with this connection */
            if (io->state == IO_QUEUED) {
                gate_remove(f->g, &io->item);
                io->state = IO_DONE;
                sl->pending--;
            } else if (io->state == IO_BLOCKED) {
                io->state = IO_DONE;
                sl->pending--;
            }
        }
        if (sl->inflight > 0) {
            sl->conn = NULL; /* orphan: the last completion frees it */
            sl->next = NULL;
        } else {
            slot_free(f, sl);
        }
        sl = next;
    }
    keyorder_free(&c->keys);
    c->closing = 1;
    conn_account(c, 1);
    tls_sess_free(&c->tls); /* close_notify, best effort, before the socket closes */
    conns_close(f->cn, &c->sock);
    free(c->rbuf);
    free(c);
}

/* Closes the connection if it is done; returns 1 if it was freed.  Called
 * at the end of every top-level callback that touched `c`. */
static int conn_maybe_close(conn_t *c)
{
    if (c->broken ||
        (c->close_when_written && conns_unsent(&c->sock) == 0)) {
        front_t *f = c->f;
        conn_free(c);
        if (gate_stopping(f->g))
            gate_check_stopped(f->g);
        return 1;
    }
    return 0;
}

static void conn_try_write(conn_t *c)
{
    if ((c->tls ? tls_write(c->tls, &c->sock) : conns_write(&c->sock)) < 0)
        c->broken = 1;
}

/* Stops reading c until resume_if_room() finds room again. */
static void conn_pause(conn_t *c)
{
    if (!c->paused) {
        c->paused = 1;
        event_del(c->sock.rev);
    }
}

/* Reading restarts in the next pass of the loop, with the requests
 * already buffered (on_read()). */
static void resume_if_room(conn_t *c)
{
    if (c->paused && !c->closing && !gate_stopping(c->f->g) &&
        c->sock.held < SLOTS_HIGH / 2 && conns_unsent(&c->sock) < OUT_HIGH / 2 &&
        replybudget_may_read(&c->f->rb, &c->rb, 1)) {
        c->paused = 0;
        event_add(c->sock.rev, NULL);
        event_active(c->sock.rev, EV_READ, 0);
    }
}

/* Writes every finished slot at the head of the list, in order. */
static void conn_flush(conn_t *c)
{
    int wrote = 0;
    while (c->head && c->head->pending == 0) {
        slot_t *sl = c->head;
        c->head = sl->next;
        if (!c->head)
            c->tail = NULL;
        c->sock.held--;
        slot_write(c->f, c, sl);
        for (int i = 0; i < sl->nios; i++)
            c->vbytes -= sl->ios[i].op.rvalue ? sl->ios[i].op.rvlen : 0;
        wrote = 1;
        if (sl->close_after) {
            c->close_when_written = 1;
            c->closing = 1;
        }
        slot_free(c->f, sl);
        if (c->close_when_written)
            break;
    }
    if (wrote)
        conn_try_write(c);
    conn_account(c, 0);
    if (c->barrier_blocked && !c->head && !c->in_process) {
        c->barrier_blocked = 0;
        conn_process(c);
        return;
    }
    resume_if_room(c);
}

static io_t *waiter_io(keyorder_entry_t *e)
{
    return e ? container_of(e, io_t, ko) : NULL;
}

static void io_fail(io_t *io, const char *msg)
{
    iolat_refused(io->slot->conn ? gate_iolat(io->slot->conn->f->g) : NULL, io->bucket);
    io->op.reply = MCP_R_SERVER_ERROR;
    snprintf(io->op.errmsg, sizeof io->op.errmsg, "%s", msg);
    io->state = IO_DONE;
    io->slot->pending--;
}

/* Lets the waiter of a finished io into the scheduler (or fails the chain
 * when stopping).  Returns nonzero if some slot of c finished. */
static void release_waiter(front_t *f, conn_t *c, io_t *done)
{
    io_t *w = waiter_io(keyorder_finish(&c->keys, &done->ko));
    while (w) {
        if (!gate_stopping(f->g) && gate_enqueue(f->g, w->bucket, &w->item) == 0) {
            w->state = IO_QUEUED;
            return;
        }
        io_fail(w, "SERVER_ERROR shutting down");
        w = waiter_io(keyorder_finish(&c->keys, &w->ko));
    }
}

/* Bucket of a key: its prefix's, "default", or < 0 to refuse it: -ENOENT
 * (--default-bucket reject), IOLAT_UNCONFIGURED (the node's table lists no
 * such bucket and has no `default`: fail closed, front.h). */
static int bucket_of(front_t *f, const char *key, size_t len)
{
    const char *sep = memchr(key, f->cfg.separator, len);
    gate_table_t t = gate_table(f->g);
    int reject = f->cfg.default_mode == FRONT_DEFAULT_REJECT ? -ENOENT
                 : t == GATE_TABLE_CLOSED                    ? IOLAT_UNCONFIGURED
                                                             : 0;
    if (!sep || sep == key)
        return reject ? reject : f->default_bucket;
    size_t n = (size_t)(sep - key);
    int b = gate_bucket(f->g, key, n, 0);
    if (t == GATE_TABLE_CLOSED) /* only what the table lists; nothing made */
        return gate_listed(f->g, b) && b != f->default_bucket ? b : reject;
    if (b >= 0)
        return b;
    if (f->auto_buckets < f->cfg.max_auto_buckets && (b = gate_bucket(f->g, key, n, 1)) >= 0) {
        f->auto_buckets++; /* --max-auto-buckets: prefixes made buckets on first sight */
        log_debug("bucket '%.*s' created on first sight (%d)", (int)n, key, b);
        return b;
    }
    return reject ? reject : f->default_bucket;
}

/* The operation class of each command for the rules (common/rules.h):
 * gat/gats change an expiry, so they are touches. */
static const unsigned char cmd_op[MCP_CMD__COUNT] = {
    [MCP_CMD_GET] = RULES_OP_READ,       [MCP_CMD_GETS] = RULES_OP_READ,
    [MCP_CMD_SET] = RULES_OP_WRITE,      [MCP_CMD_ADD] = RULES_OP_WRITE,
    [MCP_CMD_REPLACE] = RULES_OP_WRITE,  [MCP_CMD_APPEND] = RULES_OP_WRITE,
    [MCP_CMD_PREPEND] = RULES_OP_WRITE,  [MCP_CMD_CAS] = RULES_OP_WRITE,
    [MCP_CMD_DELETE] = RULES_OP_DELETE,  [MCP_CMD_INCR] = RULES_OP_ARITH,
    [MCP_CMD_DECR] = RULES_OP_ARITH,     [MCP_CMD_TOUCH] = RULES_OP_TOUCH,
    [MCP_CMD_FLUSH_ALL] = RULES_OP_ADMIN, [MCP_CMD_VERSION] = RULES_OP_ADMIN,
    [MCP_CMD_VERBOSITY] = RULES_OP_ADMIN, [MCP_CMD_STATS] = RULES_OP_ADMIN,
    [MCP_CMD_QUIT] = RULES_OP_ADMIN,     [MCP_CMD_GAT] = RULES_OP_TOUCH,
    [MCP_CMD_GATS] = RULES_OP_TOUCH,     [MCP_CMD_MG] = RULES_OP_READ,
    [MCP_CMD_MS] = RULES_OP_WRITE,       [MCP_CMD_MD] = RULES_OP_DELETE,
    [MCP_CMD_MA] = RULES_OP_ARITH,       [MCP_CMD_MN] = RULES_OP_ADMIN,
    [MCP_CMD_ME] = RULES_OP_ADMIN,
};

/* What a client is told when the rules refuse a request (gate_rule_reason_t
 * order); memcached-style CLIENT_ERRORs. */
static const char *const rule_refusal[GATE_RULE_NREASONS] = {
    "CLIENT_ERROR access denied by rule",
    "CLIENT_ERROR access denied: no rule matches",
    "CLIENT_ERROR access denied: the rule makes no bucket name for this client",
    "CLIENT_ERROR access denied: too many template buckets on this node",
    "CLIENT_ERROR access denied: the rule's bucket is not in the node's table",
};

/* Bucket of a request by the node's rules (gate_classify()): the
 * connection's identity (conns_subject(): login user, certificate name, PSK
 * identity, address), the command's class, the key's prefix (text before
 * the separator; "" without one).  < 0: refused, *why says why. */
static int rule_bucket(front_t *f, const conn_t *c, mcp_cmd_t cmd, const char *key, size_t len,
                       gate_rule_reason_t *why)
{
    rules_subject_t s = {.op = (rules_op_t)cmd_op[cmd], .name = key ? key : ""};
    const char *sep = key ? memchr(key, f->cfg.separator, len) : NULL;

    conns_subject(&c->sock, &s);
    s.name_len = sep ? (size_t)(sep - key) : 0;
    return gate_classify(f->g, &s, why);
}

/* Builds the slot of a backend command and enqueues its IOs. */
static void handle_backend(front_t *f, conn_t *c, const mcp_req_t *r)
{
    size_t nios = r->nkeys ? r->nkeys : 1;
    int meta = mcp_cmd_is_meta(r->cmd);
    size_t extra = r->nbytes + (meta ? r->line.len : 0);
    for (size_t i = 0; i < r->nkeys; i++)
        extra += r->keys[i].len;
    slot_t *sl = slot_new(f, nios, extra);
    if (!sl) {
        add_local(c, "SERVER_ERROR out of memory", 0, 0);
        return;
    }
    char *p = (char *)&sl->ios[nios];
    sl->cmd = r->cmd;
    sl->noreply = r->noreply;
    sl->nios = (int)nios;
    sl->pending = (int)nios;
    const char *value = NULL;
    if (r->nbytes) {
        memcpy(p, r->data, r->nbytes);
        value = p;
        p += r->nbytes;
    }
    const char *line = NULL;
    if (meta) { /* forwarded as the client wrote it */
        memcpy(p, r->line.ptr, r->line.len);
        line = p;
        p += r->line.len;
    }
    for (size_t i = 0; i < nios; i++) {
        io_t *io = &sl->ios[i];
        backend_op_t *op = &io->op;
        io->slot = sl;
        op->cmd = r->cmd;
        if (r->nkeys) {
            memcpy(p, r->keys[i].ptr, r->keys[i].len);
            op->key = p;
            op->keylen = r->keys[i].len;
            p += r->keys[i].len;
        }
        op->value = value ? value : "";
        op->vlen = r->nbytes;
        io->item.cost = cost_of(&f->cfg.cost, COST_WRITE, r->nbytes);
        op->flags = r->flags;
        op->exptime = r->exptime;
        op->cas = r->cas;
        op->delta = r->delta;
        op->line = line;
        op->linelen = meta ? r->line.len : 0;
        op->quiet = r->quiet;
    }
    /* A pooled slot's bytes after the keys take the replies' values
     * (backend_op_t.vbuf), shared among its IOs: no allocation per hit. */
    size_t spare = sl->pooled ? SLOT_BLOCK - 1 - (size_t)(p - (char *)sl) : 0;
    for (size_t i = 0; i < nios && spare / nios > 0; i++) {
        sl->ios[i].op.vbuf = p + i * (spare / nios);
        sl->ios[i].op.vcap = spare / nios;
    }
    conn_append(c, sl);
    double t = iolat_now(gate_iolat(f->g));
    for (size_t i = 0; i < nios; i++) {
        io_t *io = &sl->ios[i];
        io->ts.arrival = t;
        gate_rule_reason_t why;
        int b = gate_has_rules(f->g)
                    ? rule_bucket(f, c, r->cmd, r->nkeys ? io->op.key : NULL,
                                  r->nkeys ? io->op.keylen : 0, &why)
                : r->nkeys ? bucket_of(f, io->op.key, io->op.keylen)
                           : f->default_bucket;
        io->bucket = b;
        if (b < 0 && gate_has_rules(f->g)) {
            f->st.rejected++;
            io_fail(io, rule_refusal[why]);
            continue;
        }
        if (b < 0) {
            f->st.rejected++;
            io_fail(io, b == IOLAT_UNCONFIGURED
                            ? "CLIENT_ERROR unknown bucket: no default bucket configured"
                            : "SERVER_ERROR unknown bucket");
            continue;
        }
        who_seen(gate_who(f->g), &c->sock, b); /* bqos-ctl who: cached per connection */
        int k = r->nkeys ? keyorder_register(&c->keys, &io->ko, io->op.key, io->op.keylen) : 0;
        if (k < 0) {
            io_fail(io, "SERVER_ERROR out of memory");
            continue;
        }
        if (k > 0) {
            io->state = IO_BLOCKED;
            continue;
        }
        if (gate_enqueue(f->g, b, &io->item) < 0) {
            keyorder_finish(&c->keys, &io->ko);
            io_fail(io, "SERVER_ERROR unknown bucket");
            continue;
        }
        io->state = IO_QUEUED;
    }
}

static void handle(front_t *f, conn_t *c, const mcp_req_t *r)
{
    switch (r->cmd) {
    case MCP_CMD_QUIT:
        add_local(c, "", 1, 1);
        c->closing = 1;
        return;
    case MCP_CMD_VERSION:
        add_local(c, "VERSION " BQOS_MEMCACHED_VERSION, 0, 0);
        return;
    case MCP_CMD_VERBOSITY:
        add_local(c, "OK", r->noreply, 0);
        return;
    case MCP_CMD_STATS: {
        size_t len = 0;
        if ((r->arg.len == 9 && memcmp(r->arg.ptr, "detail on", 9) == 0) ||
            (r->arg.len == 10 && memcmp(r->arg.ptr, "detail off", 10) == 0)) {
            add_local(c, "OK", 0, 0);
            return;
        }
        if (r->arg.len == 5 && memcmp(r->arg.ptr, "reset", 5) == 0) {
            add_local(c, "RESET", 0, 0);
            return;
        }
        char *t = mcstats_text(&f->st, f->g, r->arg.ptr, r->arg.len, &len);
        if (!t) /* settings, conns, items, slabs, cachedump: the node's own */
            t = mcstats_client_text(&f->st, c->sock.fd, r->arg.ptr, r->arg.len, &len);
        if (t)
            add_local_text(c, t, len);
        else
            add_local(c, "ERROR", 0, 0);
        return;
    }
    case MCP_CMD_MN: /* after every earlier reply, as slots are ordered */
        add_local(c, "MN", 0, 0);
        return;
    case MCP_CMD_GAT:
    case MCP_CMD_GATS:
        if (r->nkeys == 0) { /* "gat <exptime>" alone: memcached's END */
            add_local(c, "END", 0, 0);
            return;
        }
        mcreply_count(&f->st, r, &f->cmd_other);
        break;
    default:
        mcreply_count(&f->st, r, &f->cmd_other);
        break;
    }
    handle_backend(f, c, r);
}

/* A client speaking the binary protocol: a binary "not supported" reply,
 * a log line naming the client (rate-limited), then the close. */
/* The client's address for a log line ("unix socket" for a local one). */
static const char *peer_text(const conn_t *c, char *buf, size_t cap)
{
    if (!c->sock.family || !inet_ntop(c->sock.family, c->sock.peer, buf, (socklen_t)cap))
        snprintf(buf, cap, "unix socket");
    return buf;
}

static void refuse_binary(conn_t *c, const char *req, size_t len)
{
    char addr[INET6_ADDRSTRLEN];
    peer_text(c, addr, sizeof addr);
    log_warn("closing client %s: it speaks memcached's binary protocol (opcode 0x%02x), "
             "which bqos-node does not serve; use the text or meta protocol",
             addr, len > 1 ? (unsigned char)req[1] : 0);
    char *pkt = malloc(MCP_BINARY_REFUSAL_LEN);
    int n = pkt ? mcp_format_binary_refusal(pkt, MCP_BINARY_REFUSAL_LEN, req, len) : -ENOMEM;
    if (n < 0) {
        free(pkt);
        c->broken = 1;
        return;
    }
    add_local_text(c, pkt, (size_t)n);
    if (c->tail)
        c->tail->close_after = 1;
}

/* --auth-file (mcauth.h): a connection not logged in gets the login
 * exchange only, answered in order with its other replies.  Advances *off
 * past what it used; returns nonzero to stop parsing (more bytes needed,
 * or closing). */
static int conn_login(conn_t *c, size_t *off)
{
    mcauth_result_t ar;
    mcauth_status_t st = mcauth_step(c->f->cfg.auth, c->f->g, &c->auth, c->rbuf + *off,
                                     c->rlen - *off, &ar);
    *off += ar.consumed;
    if (ar.reply)
        add_local(c, ar.reply, 0, st == MCAUTH_CLOSE);
    if (st == MCAUTH_CLOSE) {
        c->closing = 1;
        c->broken = !ar.reply;
    }
    if (c->auth.ok && ar.reply) {
        if (conns_set_identity(&c->sock, CONN_ID_USER, c->auth.user) < 0)
            c->broken = 1; /* out of memory: no identity, no service */
        char addr[INET6_ADDRSTRLEN];
        log_debug("client %s logged in as '%s'", peer_text(c, addr, sizeof addr), c->auth.user);
    }
    return st != MCAUTH_REPLY;
}

/* Parses and starts every complete request in the read buffer. */
static void conn_process(conn_t *c)
{
    front_t *f = c->f;
    size_t off = 0;
    c->in_process = 1;
    while (off < c->rlen && !c->closing && !c->broken && !gate_stopping(f->g)) {
        if (c->sock.held >= SLOTS_HIGH || conns_unsent(&c->sock) >= OUT_HIGH ||
            !replybudget_may_read(&f->rb, &c->rb, 0)) {
            conn_pause(c);
            break;
        }
        if (c->barrier) {
            if (c->head) {
                c->barrier_blocked = 1;
                break;
            }
            c->barrier = 0;
        }
        if (c->swallow) {
            size_t n = c->rlen - off < c->swallow ? c->rlen - off : c->swallow;
            off += n;
            c->swallow -= n;
            continue;
        }
        if (f->cfg.auth && !c->auth.ok) {
            if (conn_login(c, &off))
                break;
            continue;
        }
        mcp_result_t res;
        mcp_status_t st = mcp_parse(c->rbuf + off, c->rlen - off,
                                    &f->cfg.proto, &f->req, &res);
        if (st == MCP_NEED_MORE)
            break;
        if (st == MCP_OK && f->req.cmd == MCP_CMD_FLUSH_ALL) {
            /* flush_all is a barrier on its connection: it runs once every
             * earlier request is answered and nothing later starts before
             * it is answered, as with memcached's sequential processing. */
            if (c->head) {
                c->barrier_blocked = 1;
                break;
            }
            c->barrier = 1;
        }
        if (st == MCP_OK) {
            handle(f, c, &f->req);
        } else if (st == MCP_ERROR) {
            log_debug("client error at column %zu: %s", res.column, res.error);
            if (res.swallow && res.key.ptr && (res.cmd == MCP_CMD_SET || res.cmd == MCP_CMD_MS)) {
                /* memcached drops the old value of a key whose new value
                 * was too large, so a later get cannot see stale data. */
                mcp_req_t *d = &f->req;
                d->cmd = MCP_CMD_DELETE;
                d->keys[0] = res.key;
                d->nkeys = 1;
                d->nbytes = 0;
                d->noreply = res.noreply;
                handle_backend(f, c, d);
                if (c->tail)
                    c->tail->ctext = "SERVER_ERROR object too large for cache\r\n";
            } else {
                add_local(c, res.error, res.noreply, 0);
            }
            c->swallow = res.swallow;
        } else {
            if (res.binary)
                refuse_binary(c, c->rbuf + off, c->rlen - off);
            else if (res.error)
                add_local(c, res.error, 0, 1);
            else
                c->broken = 1;
            c->closing = 1;
        }
        off += res.consumed;
    }
    if (off > 0) {
        memmove(c->rbuf, c->rbuf + off, c->rlen - off);
        c->rlen -= off;
    }
    c->in_process = 0;
    conn_flush(c);
    gate_request_dispatch(f->g, 0);
}

/* A TLS connection whose session holds decrypted bytes that did not fit
 * the read buffer: the socket will not say so, read again in the next
 * pass of the loop (unless reading is paused: resume_if_room() does). */
static void tls_more(conn_t *c)
{
    if (c->tls && !c->paused && !c->closing && tls_pending(c->tls))
        event_active(c->sock.rev, EV_READ, 0);
}

/* One step of a TLS connection's handshake (its read or write event).  A
 * failure (a plaintext client, a certificate refused) closes it; once done
 * its certificate name or PSK identity is its identity and requests flow
 * (--idle-timeout counts from now on; until now it bounded the
 * handshake). */
static void conn_handshake(conn_t *c)
{
    char why[256], addr[INET6_ADDRSTRLEN];
    int rc = tls_handshake(c->tls, why, sizeof why);
    if (rc < 0) {
        log_warn("closing client %s: TLS handshake failed: %s",
                 peer_text(c, addr, sizeof addr), why);
        conns_tls_failed(c->f->cn);
        c->broken = 1;
        conn_maybe_close(c);
        return;
    }
    conns_want_write(&c->sock, rc == 0 && tls_wants_write(c->tls));
    if (rc == 0)
        return;
    c->sock.handshaking = 0;
    const char *cert = tls_peer_name(c->tls), *psk = tls_psk_id(c->tls);
    if ((cert && conns_set_identity(&c->sock, CONN_ID_CERT, cert) < 0) ||
        (psk && conns_set_identity(&c->sock, CONN_ID_PSK, psk) < 0)) {
        c->broken = 1; /* out of memory: no identity, no service */
        conn_maybe_close(c);
        return;
    }
    if (bqos_log_enabled(BQOS_LOG_DEBUG)) {
        tls_describe(c->tls, why, sizeof why);
        log_debug("client %s: TLS %s%s%s%s%s", peer_text(c, addr, sizeof addr), why,
                  cert ? ", certificate " : "", cert ? cert : "", psk ? ", PSK identity " : "",
                  psk ? psk : "");
    }
    event_active(c->sock.rev, EV_READ, 0); /* requests sent with the Finished */
}

/* Before a read: room at the end of c's buffer.  Returns 1 if there is,
 * 0 if the event was handled without a read (a TLS handshake's step, a
 * buffer full of requests that wait, out of memory: c may be closed). */
static int read_prep(conn_t *c)
{
    front_t *f = c->f;
    if (c->tls && c->sock.handshaking) {
        conn_handshake(c);
        return 0;
    }
    if (c->rlen == c->rcap) {
        size_t max = MCP_LINE_MAX + f->cfg.proto.max_item + 64;
        size_t ncap = c->rcap * 2 > max ? max : c->rcap * 2;
        if (ncap <= c->rcap) {
            /* Full of requests that wait (flush_all, backpressure). */
            conn_process(c);
            if (c->rlen == c->rcap)
                conn_pause(c);
            conn_maybe_close(c);
            return 0;
        }
        char *nb = realloc(c->rbuf, ncap);
        if (!nb) {
            c->broken = 1;
            conn_maybe_close(c);
            return 0;
        }
        c->rbuf = nb;
        c->rcap = ncap;
    }
    return 1;
}

static void read_got(conn_t *c, ssize_t n);

static void on_read(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    conn_t *c = arg;
    if (!read_prep(c))
        return;
    ssize_t n;
    if (c->tls) {
        n = tls_recv(c->tls, c->rbuf + c->rlen, c->rcap - c->rlen);
        if (n < 0) {
            errno = n == -EAGAIN ? EAGAIN : ECONNRESET;
            n = -1;
        }
    } else {
        n = recv(fd, c->rbuf + c->rlen, c->rcap - c->rlen, 0);
    }
    read_got(c, n);
}

/* The batched read's room (conns_read_batched()): read_prep(), then the
 * free end of c's buffer. */
static char *on_read_room(void *arg, size_t *room)
{
    conn_t *c = arg;
    if (!read_prep(c))
        return NULL;
    *room = c->rcap - c->rlen;
    return c->rbuf + c->rlen;
}

/* The batched read's result: n bytes, 0 at EOF, or -errno. */
static void on_read_got(void *arg, ssize_t n)
{
    if (n < 0) {
        errno = (int)-n;
        n = -1;
    }
    read_got(arg, n);
}

/* After a read of n bytes into c's buffer (0: the client's end of stream;
 * -1: errno says why, EAGAIN or EINTR: nothing, e.g. woken by
 * resume_if_room()): the requests it completes. */
static void read_got(conn_t *c, ssize_t n)
{
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        c->broken = 1; /* client gone: queued requests are discarded */
        conn_maybe_close(c);
        return;
    }
    if (n > 0)
        c->rlen += (size_t)n; /* else: woken by resume_if_room() */
    if (c->closing) {
        c->rlen = 0; /* after quit: ignore */
        return;
    }
    conn_process(c);
    if (!conn_maybe_close(c))
        tls_more(c);
}

static void on_write(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    conn_t *c = arg;
    front_t *f = c->f;
    if (c->tls && c->sock.handshaking) {
        conn_handshake(c);
        return;
    }
    conn_try_write(c);
    conn_account(c, 0);
    resume_if_room(c);
    if (!conn_maybe_close(c) && gate_stopping(f->g))
        gate_check_stopped(f->g);
}

/* The gate refuses a connection (stopping, or --max-conns reached). */
static void on_refuse(void *arg, evutil_socket_t fd)
{
    (void)arg;
    static const char msg[] = "ERROR Too many open connections\r\n";
    ssize_t w = send(fd, msg, sizeof msg - 1, MSG_NOSIGNAL);
    (void)w;
}

/* The registry's eviction at --max-conns (conns.h): closes c, as a client
 * gone, if it holds nothing, not even a request read but not parsed yet
 * (a complete line in the read buffer; a partial line is no request yet).
 * Returns 1 if closed. */
static int on_evict(void *arg, conns_conn_t *l)
{
    (void)arg;
    conn_t *c = conn_of(l);
    if (c->head || c->paused || c->barrier || c->barrier_blocked || c->closing ||
        c->close_when_written || c->in_process || memchr(c->rbuf, '\n', c->rlen) ||
        (c->tls && tls_pending(c->tls)))
        return 0;
    c->broken = 1;
    conn_maybe_close(c);
    return 1;
}

static void on_accept(void *arg, evutil_socket_t fd, const struct sockaddr *sa, int salen)
{
    (void)sa;
    (void)salen;
    front_t *f = arg;
    conn_t *c = calloc(1, sizeof *c);
    if (c) {
        c->f = f;
        c->rcap = RBUF_INITIAL;
        c->rbuf = malloc(c->rcap);
    }
    if (!c || !c->rbuf || conns_open(f->cn, &c->sock, fd, on_read, on_write, c) < 0) {
        log_warn("out of memory accepting a connection");
        if (c)
            free(c->rbuf);
        free(c);
        evutil_closesocket(fd);
        return;
    }
    if (!f->cfg.tls && f->cfg.batch_reads) /* a pass's reads in one system call */
        conns_read_batched(&c->sock, on_read_room, on_read_got);
    if (f->cfg.tls) { /* a TLS port: the client's ClientHello comes first */
        c->sock.handshaking = 1;
        if (!(c->tls = tls_sess_new(f->cfg.tls, fd))) {
            log_warn("out of memory accepting a TLS connection");
            conn_free(c);
        }
    }
}

/* ---- scheduling and completions --------------------------------------- */

/* Hands the backend what the scheduler allows, as one chain (the gate's
 * dispatch hook, run once per pass of the loop). */
static void dispatch_now(void *arg)
{
    front_t *f = arg;
    /* Requests read this pass but not yet parsed go with the others: the
     * batched reads first, then the dispatch again, later in this pass
     * (the gate's clock for the take is then read after them). */
    if (conns_run_reads(f->cn)) {
        gate_request_dispatch(f->g, 0);
        return;
    }
    backend_op_t *first = NULL, *last = NULL;
    size_t n = 0;
    sched_item_t *it;
    double t = iolat_now(gate_iolat(f->g));
    while ((it = gate_take(f->g)) != NULL) {
        io_t *io = container_of(it, io_t, item);
        io->ts.dispatch = t;
        io->state = IO_INFLIGHT;
        io->slot->inflight++;
        io->op.link.next = NULL;
        if (last)
            last->link.next = &io->op.link;
        else
            first = &io->op;
        last = &io->op;
        n++;
    }
    if (!n || backend_submit_chain(f->be, first, last, n) == 0)
        return;
    /* Only possible while tearing down. */
    for (workpool_item_t *l = &first->link, *next; l; l = next) {
        next = l->next;
        io_t *io = container_of(l, io_t, op.link);
        gate_untake(f->g);
        gate_item_done(f->g, &io->item);
        io->slot->inflight--;
        io_fail(io, "SERVER_ERROR shutting down");
        if (io->slot->conn)
            conn_flush(io->slot->conn);
    }
}

static void on_done(backend_op_t *op, void *arg)
{
    front_t *f = arg;
    io_t *io = container_of(op, io_t, op);
    slot_t *sl = io->slot;
    gate_done_at(f->g, op->done_at);
    gate_item_done(f->g, &io->item);
    /* a get's value costs as read, and so does a meta reply's VA block
     * (rvalue is then the whole reply, rdata its value's bytes) */
    int meta = mcp_cmd_is_meta(op->cmd);
    size_t rbytes = meta ? op->rdata : op->rvlen;
    int read = meta ? op->reply == MCP_R_VALUE : op->rvalue != NULL;
    gate_charge(f->g, &io->item, read ? cost_of(&f->cfg.cost, COST_READ, rbytes) : 0);
    int failed = op->reply == MCP_R_SERVER_ERROR;
    iolat_done(gate_iolat(f->g), &io->item, &io->ts, failed ? 0 : op->vlen + rbytes);
    f->st.backend_errors += failed;
    io->state = IO_DONE;
    sl->inflight--;
    sl->pending--;
    conn_t *c = sl->conn;
    if (!c) {
        if (sl->inflight == 0)
            slot_free(f, sl); /* its client went away */
    } else {
        if (op->key)
            release_waiter(f, c, io);
        if (op->rvalue) {
            c->vbytes += op->rvlen;
            conn_account(c, 0);
        }
        if (c->head->pending == 0)
            conn_flush(c);
        conn_maybe_close(c);
    }
    if (!gate_stopping(f->g))
        gate_request_dispatch(f->g, 1);
    else
        gate_check_stopped(f->g);
}

/* ---- stopping (the gate's hooks) ------------------------------------------- */

static void drain_one(sched_item_t *it, void *arg)
{
    (void)arg;
    io_fail(container_of(it, io_t, item), "SERVER_ERROR shutting down");
}

/* After the drain: IOs behind a same-key IO fail too; no more reading. */
static void on_stop(void *arg)
{
    front_t *f = arg;
    for (conns_conn_t *l = conns_first(f->cn); l; l = l->next)
        for (slot_t *sl = conn_of(l)->head; sl; sl = sl->next)
            for (int i = 0; i < sl->nios; i++)
                if (sl->ios[i].state == IO_BLOCKED)
                    io_fail(&sl->ios[i], "SERVER_ERROR shutting down");
    conns_conn_t *l = conns_first(f->cn);
    while (l) {
        conns_conn_t *next = l->next;
        conn_t *c = conn_of(l);
        event_del(c->sock.rev);
        c->closing = 1;
        conn_flush(c);
        conn_maybe_close(c);
        l = next;
    }
}

static int on_idle(void *arg)
{
    front_t *f = arg;
    for (conns_conn_t *l = conns_first(f->cn); l; l = l->next)
        if (conn_of(l)->head || conns_unsent(&conn_of(l)->sock) > 0)
            return 0;
    return 1;
}

/* ---- public ------------------------------------------------------------- */

void front_config_defaults(front_config_t *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->name = "node";
    listener_parse("127.0.0.1:11311", &cfg->listen);
    cfg->backend_host = "127.0.0.1";
    cfg->backend_port = 11211;
    cfg->workers = 0;       /* inline: see backend.h */
    cfg->outstanding = 5;   /* the paper's, for tokens; bqos-node uses 64
                               with rr (docs/node.md) */
    cfg->batch = 64;
    cfg->policy = SCHED_POLICY_TOKENS;
    cfg->separator = ':';
    cfg->default_mode = FRONT_DEFAULT_SERVE;
    cfg->max_auto_buckets = 1024;
    cfg->proto.max_item = MCP_ITEM_MAX_DEFAULT;
    cfg->max_conns = 4096;
    cfg->conn_reply_limit = 256u << 20;
    cfg->reply_memory = (size_t)1 << 30;
    cfg->cost = COST_CONFIG_DEFAULT;
    cfg->threads = 1;
    cfg->batch_reads = 1;
}

front_t *front_new(struct event_base *base, const front_config_t *cfg, int *err)
{
    int rc = 0;
    front_t *f = NULL;
    if (!base || !cfg || cfg->workers < 0 || cfg->outstanding < 1 || cfg->batch < 1 ||
        cfg->batch > BACKEND_BATCH_MAX || cfg->proto.max_item < 1 || cfg->max_conns < 1 ||
        cfg->conn_reply_limit < 16 || cfg->reply_memory < 1 || cfg->max_auto_buckets < 0 ||
        cost_check(&cfg->cost) < 0 || !cfg->backend_host || cfg->threads < 1 ||
        cfg->threads > WRITERS_MAX + 1 || (cfg->threads > 1 && cfg->tls)) {
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
    freelist_init(&f->slots, SLOT_BLOCK, SLOT_KEEP);
    replybudget_init(&f->rb, &(replybudget_config_t){
        .soft = cfg->conn_reply_limit / 4, .hard = cfg->conn_reply_limit,
        .soft_secs = 60, .total = cfg->reply_memory});
    f->rbtick = event_new(base, -1, EV_PERSIST, on_rbtick, f);
    if (!f->rbtick || event_add(f->rbtick, &(struct timeval){1, 0}) < 0) {
        rc = -ENOMEM;
        goto out;
    }
    f->name = strdup(cfg->name ? cfg->name : "node");
    f->backend_host = strdup(cfg->backend_host);
    if (!f->name || !f->backend_host) {
        rc = -ENOMEM;
        goto out;
    }
    f->cfg.name = f->name;
    f->st.name = f->name;
    f->st.started = time(NULL);
    /* memcached counts its worker threads; inline, the loop is one. */
    f->st.threads = cfg->workers > 0 ? cfg->workers : 1;
    f->st.maxconns = cfg->max_conns;
    f->st.item_size_max = cfg->proto.max_item;
    f->st.flush_enabled = !cfg->proto.no_flush;
    f->cfg.backend_host = f->backend_host;
    if (cfg->backend_port)
        snprintf(f->backend_desc, sizeof f->backend_desc, "%s:%u", f->backend_host,
                 cfg->backend_port);
    else
        snprintf(f->backend_desc, sizeof f->backend_desc, "unix:%s", f->backend_host);
    f->st.backend = f->backend_desc;
    static const gate_hooks_t hooks = {.dispatch = dispatch_now, .drain = drain_one,
                                       .stop = on_stop, .idle = on_idle,
                                       .accept = on_accept, .refuse = on_refuse,
                                       .evict = on_evict};
    /* One dispatch at the end of each pass of the loop (docs/node.md). */
    gate_config_t gc = {.tag = "", .outstanding = cfg->outstanding, .max_conns = cfg->max_conns,
                        .max_buckets = 0, .defer = 1, .policy = cfg->policy,
                        .weighted = cfg->weighted};
    if (!(f->g = gate_new(base, &gc, &hooks, f, &rc)))
        goto out;
    gate_set_auth(f->g, cfg->auth != NULL);
    f->cn = gate_conns(f->g);
    if (cfg->threads > 1 && (rc = conns_set_writers(f->cn, cfg->threads - 1)) < 0)
        goto out;
    /* One thread: a pass's replies go out together (conns_set_batched()). */
    if (cfg->threads == 1 && (rc = conns_set_batched(f->cn, SENDBATCH_AUTO)) < 0)
        goto out;
    f->default_bucket = gate_bucket(f->g, "default", 7, 1);
    if (f->default_bucket < 0) {
        rc = f->default_bucket;
        goto out;
    }
    f->be = backend_new(base, f->backend_host, cfg->backend_port, cfg->workers,
                        cfg->batch, on_done, f, &rc);
    if (!f->be)
        goto out;
    rc = conns_listen(f->cn, &cfg->listen);
out:
    if (rc < 0) {
        front_destroy(&f);
        if (err)
            *err = rc;
        return NULL;
    }
    return f;
}

gate_t *front_gate(front_t *f)
{
    return f->g;
}

const backend_t *front_backend(const front_t *f)
{
    return f->be;
}

void front_destroy(front_t **fp)
{
    if (!fp || !*fp)
        return;
    front_t *f = *fp;
    /* Connections first (orphaning in-flight slots), then the backend,
     * whose shutdown delivers the last completions to on_done(), which
     * frees the orphans. */
    gate_close(f->g);
    while (f->g && conns_first(f->cn))
        conn_free(conn_of(conns_first(f->cn)));
    backend_destroy(&f->be);
    gate_destroy(&f->g); /* nothing is queued: the connections took theirs back */
    freelist_fini(&f->slots);
    if (f->rbtick)
        event_free(f->rbtick);
    free(f->name);
    free(f->backend_host);
    free(f);
    *fp = NULL;
}
