/* backend.c - memcached backend: a pipelined text-protocol connection per worker (workpool.h) or inline (see backend.h). */
#include "storage-node/mc/backend.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/log.h"
#include "common/mono.h"
#include "storage-node/io/workpool.h"

_Static_assert(BACKEND_BATCH_MAX <= WORKPOOL_BATCH_MAX, "a batch fits the pool's");

#define container_of(p, T, m) ((T *)(void *)((char *)(p) - offsetof(T, m)))

#define CONNECT_MS 1000     /* connecting to memcached */
#define IO_MS 2000          /* memcached silent this long in a batch: fail it */
#define RETRY_S 1.0         /* after a failed connect, fail fast this long */
#define BUF_INITIAL 16384
#define VALUE_MAX (1024u * 1024 * 1024) /* memcached's largest item (-I 1024m) */

/* The settings are read-only after backend_new() (the workers read them);
 * the pool has its own locks. */
struct backend {
    char host[256];          /* port 0: a Unix socket's path */
    unsigned port;
    char desc[300];          /* "HOST:PORT" or "unix:PATH", for logs */
    backend_done_fn done;
    void *arg;
    workpool_t *wp;          /* each worker (inline: the loop thread) with
                                its own mconn_t */
    atomic_int down;         /* any thread: 1 from a failed connect to the
                                next that succeeds (note_state()) */
    atomic_uint_fast64_t connect_errors, io_errors; /* any thread (relaxed) */
};

/* One worker's connection to memcached and its buffers, reused from batch
 * to batch (no allocation per request).  The worker's own. */
typedef struct {
    backend_t *b;
    int fd;                  /* -1: not connected */
    double retry_at;         /* after a failed connect: no new try before */
    char *w;                 /* the batch's requests */
    size_t wlen, wcap;
    char *r;                 /* replies: [rpos, rlen) unread */
    size_t rpos, rlen, rcap;
} mconn_t;

/* The pool's thread_start: each worker's (inline: the loop thread's)
 * connection state; it connects on first use. */
static void *mconn_new(void *arg)
{
    mconn_t *c = calloc(1, sizeof *c);
    if (c) {
        c->b = arg;
        c->fd = -1;
        c->wcap = c->rcap = BUF_INITIAL;
        c->w = malloc(c->wcap);
        c->r = malloc(c->rcap);
    }
    if (!c || !c->w || !c->r) {
        if (c) {
            free(c->w);
            free(c->r);
        }
        free(c);
        log_error("backend: out of memory for a connection");
        return NULL;
    }
    return c;
}

static void mconn_close(mconn_t *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    c->rpos = c->rlen = 0;
}

static void mconn_free(void *ctx, void *arg)
{
    (void)arg;
    mconn_t *c = ctx;
    if (!c)
        return;
    mconn_close(c);
    free(c->w);
    free(c->r);
    free(c);
}

/* Waits up to ms for `ev` on fd.  Returns the revents, or -ETIMEDOUT. */
static int wait_fd(int fd, short ev, int ms)
{
    struct pollfd p = {.fd = fd, .events = ev};
    int n;
    while ((n = poll(&p, 1, ms)) < 0 && errno == EINTR)
        ;
    if (n < 0)
        return -errno;
    return n == 0 ? -ETIMEDOUT : p.revents;
}

/* Records the outcome rc of a connect: the backend goes down when one
 * fails and up when one succeeds after; the thread that sees the change
 * logs it, so each is said once (warn, info) whatever the workers. */
static void note_state(backend_t *b, int rc)
{
    if (rc < 0)
        atomic_fetch_add_explicit(&b->connect_errors, 1, memory_order_relaxed);
    if (atomic_exchange(&b->down, rc < 0) == (rc < 0))
        return;
    if (rc < 0)
        log_warn("backend %s down: %s (requests fail with SERVER_ERROR until it answers)",
                 b->desc, strerror(-rc));
    else
        log_info("backend %s up again", b->desc);
}

void backend_health(const backend_t *b, backend_health_t *out)
{
    backend_t *w = (backend_t *)b; /* the atomics are read only */
    *out = (backend_health_t){
        .connect_errors = atomic_load_explicit(&w->connect_errors, memory_order_relaxed),
        .io_errors = atomic_load_explicit(&w->io_errors, memory_order_relaxed),
        .down = atomic_load(&w->down),
    };
}

/* Connects to a Unix socket (port 0: host is its path).  Returns 0 or
 * -errno. */
static int mconn_connect_unix(mconn_t *c)
{
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    size_t n = strlen(c->b->host);
    if (n >= sizeof sun.sun_path) /* backend_new() refused it */
        return -ENAMETOOLONG;
    memcpy(sun.sun_path, c->b->host, n + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (connect(fd, (struct sockaddr *)&sun, sizeof sun) < 0 && errno != EINPROGRESS) {
        int rc = -errno;
        close(fd);
        return rc;
    }
    if (errno == EINPROGRESS) {
        int err = 0;
        socklen_t len = sizeof err;
        int ev = wait_fd(fd, POLLOUT, CONNECT_MS);
        if (ev < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err) {
            int rc = ev < 0 ? ev : err ? -err : -errno;
            close(fd);
            return rc;
        }
    }
    c->fd = fd;
    return 0;
}

/* Connects (non-blocking socket, TCP_NODELAY; or a Unix socket) within
 * CONNECT_MS.  Returns 0 or -errno. */
static int mconn_connect(mconn_t *c)
{
    if (mono_now() < c->retry_at)
        return -ECONNREFUSED; /* failed less than RETRY_S ago */
    if (c->b->port == 0) {
        int rc = mconn_connect_unix(c);
        if (rc < 0)
            c->retry_at = mono_now() + RETRY_S;
        note_state(c->b, rc);
        return rc;
    }
    char port[16];
    snprintf(port, sizeof port, "%u", c->b->port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
    int rc = getaddrinfo(c->b->host, port, &hints, &ai);
    if (rc != 0) {
        rc = -EHOSTUNREACH;
        goto out;
    }
    rc = -ECONNREFUSED;
    for (struct addrinfo *a = ai; a && c->fd < 0; a = a->ai_next) {
        int fd = socket(a->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            rc = -errno;
            continue;
        }
        int one = 1, err = 0;
        socklen_t len = sizeof err;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (connect(fd, a->ai_addr, a->ai_addrlen) < 0) {
            if (errno != EINPROGRESS) {
                rc = -errno;
                close(fd);
                continue;
            }
            int ev = wait_fd(fd, POLLOUT, CONNECT_MS);
            if (ev < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err) {
                rc = ev < 0 ? ev : err ? -err : -errno;
                close(fd);
                continue;
            }
        }
        c->fd = fd;
        rc = 0;
    }
out:
    if (ai)
        freeaddrinfo(ai);
    if (rc < 0)
        c->retry_at = mono_now() + RETRY_S;
    note_state(c->b, rc);
    return rc;
}

static void set_error(backend_op_t *op, const char *why)
{
    op->reply = MCP_R_SERVER_ERROR;
    snprintf(op->errmsg, sizeof op->errmsg, "SERVER_ERROR backend: %s", why);
}

/* Makes room for n more bytes in a buffer.  Returns 0 or -ENOMEM. */
static int reserve(char **buf, size_t *cap, size_t used, size_t n)
{
    if (*cap - used >= n)
        return 0;
    size_t ncap = *cap;
    while (ncap - used < n) {
        if (ncap > SIZE_MAX / 2)
            return -ENOMEM;
        ncap *= 2;
    }
    char *nb = realloc(*buf, ncap);
    if (!nb)
        return -ENOMEM;
    *buf = nb;
    *cap = ncap;
    return 0;
}

static int put(mconn_t *c, const void *p, size_t n)
{
    if (reserve(&c->w, &c->wcap, c->wlen, n) < 0)
        return -ENOMEM;
    memcpy(c->w + c->wlen, p, n);
    c->wlen += n;
    return 0;
}

/* Appends a space and the n bytes at p. */
static int put_word(mconn_t *c, const char *p, size_t n)
{
    int rc = put(c, " ", 1);
    return rc < 0 ? rc : put(c, p, n);
}

/* Reads what the socket has (waiting up to IO_MS for something).  Returns
 * 0 or -errno (-ECONNRESET: memcached closed). */
static int fill(mconn_t *c)
{
    if (c->rpos > 0) {
        memmove(c->r, c->r + c->rpos, c->rlen - c->rpos);
        c->rlen -= c->rpos;
        c->rpos = 0;
    }
    if (reserve(&c->r, &c->rcap, c->rlen, 4096) < 0)
        return -ENOMEM;
    for (;;) {
        ssize_t n = recv(c->fd, c->r + c->rlen, c->rcap - c->rlen, 0);
        if (n > 0) {
            c->rlen += (size_t)n;
            return 0;
        }
        if (n == 0)
            return -ECONNRESET;
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return -errno;
        int ev = wait_fd(c->fd, POLLIN, IO_MS);
        if (ev < 0)
            return ev;
    }
}

/* Sends the batch, reading replies meanwhile so that neither side blocks
 * on a full socket.  Returns 0 or -errno. */
static int send_all(mconn_t *c)
{
    size_t off = 0;
    while (off < c->wlen) {
        ssize_t n = send(c->fd, c->w + off, c->wlen - off, MSG_NOSIGNAL);
        if (n > 0) {
            off += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
            return -errno;
        int ev = wait_fd(c->fd, POLLOUT | POLLIN, IO_MS);
        if (ev < 0)
            return ev;
        if (ev & POLLIN) {
            int rc = fill(c);
            if (rc < 0)
                return rc;
        }
    }
    return 0;
}

/* The next reply line, without its CRLF, NUL-terminated in place.  Returns
 * 0 or -errno. */
static int get_line(mconn_t *c, char **line, size_t *len)
{
    size_t scanned = c->rpos;
    for (;;) {
        char *nl = scanned < c->rlen ? memchr(c->r + scanned, '\n', c->rlen - scanned) : NULL;
        if (nl) {
            char *p = c->r + c->rpos;
            size_t n = (size_t)(nl - p);
            if (n == 0 || p[n - 1] != '\r')
                return -EPROTO;
            p[n - 1] = '\0';
            *line = p;
            *len = n - 1;
            c->rpos += n + 1;
            return 0;
        }
        size_t seen = c->rlen - c->rpos;
        int rc = fill(c); /* moves the unread part to the front */
        if (rc < 0)
            return rc;
        scanned = seen;
    }
}

/* Makes n bytes and a CRLF after them readable at c->r + c->rpos.
 * Returns 0 or -errno. */
static int get_data(mconn_t *c, size_t n)
{
    while (c->rlen - c->rpos < n + 2) {
        if (reserve(&c->r, &c->rcap, c->rlen, n + 2) < 0)
            return -ENOMEM;
        int rc = fill(c);
        if (rc < 0)
            return rc;
    }
    return memcmp(c->r + c->rpos + n, "\r\n", 2) == 0 ? 0 : -EPROTO;
}

static int is_get(const backend_op_t *op)
{
    return op->cmd == MCP_CMD_GET || op->cmd == MCP_CMD_GETS;
}

static int is_gat(const backend_op_t *op)
{
    return op->cmd == MCP_CMD_GAT || op->cmd == MCP_CMD_GATS;
}

/* Writes v in decimal at p (after a '-' if neg): at most 21 bytes.
 * Returns the end. */
static char *put_dec(char *p, uint64_t v, int neg)
{
    char tmp[20];
    int n = 0;
    if (neg)
        *p++ = '-';
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n)
        *p++ = tmp[--n];
    return p;
}

/* Appends op's request (not a get).  Returns 0 or -ENOMEM. */
static int put_request(mconn_t *c, const backend_op_t *op)
{
    static const char *const verb[MCP_CMD__COUNT] = {
        [MCP_CMD_SET] = "set", [MCP_CMD_ADD] = "add", [MCP_CMD_REPLACE] = "replace",
        [MCP_CMD_APPEND] = "append", [MCP_CMD_PREPEND] = "prepend", [MCP_CMD_CAS] = "cas",
        [MCP_CMD_DELETE] = "delete", [MCP_CMD_INCR] = "incr", [MCP_CMD_DECR] = "decr",
        [MCP_CMD_TOUCH] = "touch", [MCP_CMD_FLUSH_ALL] = "flush_all"};
    char tail[96];
    int n;
    switch (op->cmd) {
    case MCP_CMD_SET:
    case MCP_CMD_ADD:
    case MCP_CMD_REPLACE:
    case MCP_CMD_APPEND:
    case MCP_CMD_PREPEND:
    case MCP_CMD_CAS: { /* " <flags> <exptime> <bytes>[ <cas>]\r\n", by hand (once per store) */
        char *p = tail;
        *p++ = ' ';
        p = put_dec(p, op->flags, 0);
        *p++ = ' ';
        p = put_dec(p, op->exptime < 0 ? -(uint64_t)op->exptime : (uint64_t)op->exptime,
                    op->exptime < 0);
        *p++ = ' ';
        p = put_dec(p, op->vlen, 0);
        if (op->cmd == MCP_CMD_CAS) {
            *p++ = ' ';
            p = put_dec(p, op->cas, 0);
        }
        *p++ = '\r';
        *p++ = '\n';
        n = (int)(p - tail);
        break;
    }
    case MCP_CMD_INCR:
    case MCP_CMD_DECR:
        n = snprintf(tail, sizeof tail, " %llu\r\n", (unsigned long long)op->delta);
        break;
    case MCP_CMD_TOUCH:
    case MCP_CMD_FLUSH_ALL:
        n = snprintf(tail, sizeof tail, " %lld\r\n", (long long)op->exptime);
        break;
    case MCP_CMD_MG:
    case MCP_CMD_MS:
    case MCP_CMD_MD:
    case MCP_CMD_MA:
    case MCP_CMD_ME: {
        int rc = put(c, op->line, op->linelen);
        if (!rc)
            rc = put(c, "\r\n", 2);
        if (!rc && op->cmd == MCP_CMD_MS) {
            rc = put(c, op->value, op->vlen);
            if (!rc)
                rc = put(c, "\r\n", 2);
        }
        if (!rc && op->quiet) /* whatever memcached says, the MN ends it */
            rc = put(c, "mn\r\n", 4);
        return rc;
    }
    case MCP_CMD_GAT:
    case MCP_CMD_GATS: /* one key each: "gats <exptime> <key>" */
        n = snprintf(tail, sizeof tail, "gats %lld", (long long)op->exptime);
        if (put(c, tail, (size_t)n) < 0 || put_word(c, op->key, op->keylen) < 0)
            return -ENOMEM;
        return put(c, "\r\n", 2);
    default: /* delete */
        memcpy(tail, "\r\n", 2);
        n = 2;
        break;
    }
    int rc = put(c, verb[op->cmd], strlen(verb[op->cmd]));
    if (!rc && op->cmd != MCP_CMD_FLUSH_ALL)
        rc = put_word(c, op->key, op->keylen);
    if (!rc)
        rc = put(c, tail, (size_t)n);
    if (!rc && op->cmd >= MCP_CMD_SET && op->cmd <= MCP_CMD_CAS) {
        rc = put(c, op->value, op->vlen);
        if (!rc)
            rc = put(c, "\r\n", 2);
    }
    return rc;
}

/* A space and a decimal number of at most 20 digits that fits 64 bits, at
 * p (a VALUE line's field).  Returns the end of the digits (*v their
 * value), or NULL: no space, no digit, or too large. */
static const char *dec_field(const char *p, uint64_t *v)
{
    if (*p++ != ' ' || *p < '0' || *p > '9')
        return NULL;
    uint64_t x = 0;
    for (; *p >= '0' && *p <= '9'; p++) {
        unsigned d = (unsigned)(*p - '0');
        if (x > (UINT64_MAX - d) / 10)
            return NULL;
        x = x * 10 + d;
    }
    *v = x;
    return p;
}

/* Where op's reply of n bytes goes: the caller's vbuf if it fits (no
 * allocation per request), else a malloc'd block; NULL: out of memory. */
static char *value_room(backend_op_t *op, size_t n)
{
    if (op->vbuf && n <= op->vcap)
        return op->vbuf;
    return malloc(n ? n : 1);
}

/* Reads the VALUE blocks of one multi-key gets up to END: each value goes
 * to the first unanswered op of its key (memcached answers a key asked
 * twice twice).  Returns 0 or -errno. */
static int read_values(mconn_t *c, backend_op_t **gets, size_t ng)
{
    size_t cur = 0; /* where the next VALUE's op is looked for first */
    for (;;) {
        char *l;
        size_t len;
        int rc = get_line(c, &l, &len);
        if (rc < 0)
            return rc;
        if (strcmp(l, "END") == 0)
            return 0;
        if (strncmp(l, "VALUE ", 6) != 0) {
            /* SERVER_ERROR and the like: the gets failed as a whole (and
             * the connection is started afresh) */
            for (size_t i = 0; i < ng; i++)
                snprintf(gets[i]->errmsg, sizeof gets[i]->errmsg, "%s%.90s",
                         strncmp(l, "SERVER_ERROR", 12) ? "SERVER_ERROR backend: " : "", l);
            return -EPROTO;
        }
        char key[MCP_KEY_MAX + 1];
        const char *sp = memchr(l + 6, ' ', len - 6);
        if (!sp || (size_t)(sp - (l + 6)) > MCP_KEY_MAX)
            return -EPROTO;
        uint64_t flags, bytes, cas = 0;
        const char *end = dec_field(sp, &flags);
        if (!end || *end != ' ' || !(end = dec_field(end, &bytes)) || bytes > VALUE_MAX)
            return -EPROTO;
        if (*end == ' ' && !(end = dec_field(end, &cas)))
            return -EPROTO;
        if (*end != '\0')
            return -EPROTO;
        size_t kl = (size_t)(sp - (l + 6));
        memcpy(key, l + 6, kl); /* get_data() may move the buffer */
        rc = get_data(c, (size_t)bytes);
        if (rc < 0)
            return rc;
        const char *data = c->r + c->rpos;
        /* memcached answers a multi-get's keys in the order asked (misses
         * left out, a key asked twice answered twice), so the op is found
         * from just after the last one answered: one comparison per value
         * rather than a scan of the batch.  Each VALUE goes to the first
         * unanswered op of its key from there, wrapping around. */
        for (size_t k = 0; k < ng; k++) {
            size_t i = cur + k < ng ? cur + k : cur + k - ng;
            backend_op_t *op = gets[i];
            if (op->reply != MCP_R_MISS || op->keylen != kl || memcmp(op->key, key, kl) != 0)
                continue;
            cur = i + 1 < ng ? i + 1 : 0;
            op->rvalue = value_room(op, (size_t)bytes);
            if (!op->rvalue) {
                set_error(op, "out of memory");
                continue;
            }
            memcpy(op->rvalue, data, (size_t)bytes);
            op->rvlen = (size_t)bytes;
            op->rflags = (uint32_t)flags;
            op->rcas = cas;
            op->reply = MCP_R_VALUE;
            break;
        }
        c->rpos += (size_t)bytes + 2;
    }
}

/* Reads the one-line reply of a non-get op.  Returns 0 or -errno. */
static int read_reply(mconn_t *c, backend_op_t *op)
{
    static const struct {
        const char *line;
        mcp_reply_t reply;
    } words[] = {{"STORED", MCP_R_STORED}, {"NOT_STORED", MCP_R_NOT_STORED},
                 {"EXISTS", MCP_R_EXISTS}, {"NOT_FOUND", MCP_R_NOT_FOUND},
                 {"DELETED", MCP_R_DELETED}, {"TOUCHED", MCP_R_TOUCHED},
                 {"OK", MCP_R_OK}};
    char *l;
    size_t len;
    int rc = get_line(c, &l, &len);
    if (rc < 0)
        return rc;
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        if (strcmp(l, words[i].line) == 0) {
            op->reply = words[i].reply;
            return 0;
        }
    }
    if ((op->cmd == MCP_CMD_INCR || op->cmd == MCP_CMD_DECR) && l[0] >= '0' && l[0] <= '9') {
        op->number = strtoull(l, NULL, 10);
        op->reply = MCP_R_NUMBER;
        return 0;
    }
    if ((op->cmd == MCP_CMD_INCR || op->cmd == MCP_CMD_DECR) &&
        strncmp(l, "CLIENT_ERROR", 12) == 0) {
        op->reply = MCP_R_NON_NUMERIC;
        return 0;
    }
    /* memcached's own SERVER_ERROR (object too large, out of memory) goes
     * to the client as it is; anything else is a backend fault. */
    op->reply = MCP_R_SERVER_ERROR;
    if (strncmp(l, "SERVER_ERROR", 12) == 0)
        snprintf(op->errmsg, sizeof op->errmsg, "%s", l);
    else
        snprintf(op->errmsg, sizeof op->errmsg, "SERVER_ERROR backend: %.90s", l);
    for (char *p = op->errmsg; *p; p++)
        if (*p < ' ')
            *p = ' ';
    return 0;
}

/* Reads the reply of a meta op into its rvalue as memcached wrote it: one
 * line, and for VA its data block (one allocation); for a quiet op, up to
 * the MN that followed it (memcached's silence leaves rvalue NULL).
 * Returns 0 or -errno. */
static int read_meta(mconn_t *c, backend_op_t *op)
{
    char *l;
    size_t len;
    int rc = get_line(c, &l, &len);
    if (rc < 0)
        return rc;
    op->reply = MCP_R_OK;
    op->rdata = 0;
    if (op->quiet && strcmp(l, "MN") == 0)
        return 0;
    size_t vbytes = 0, total = len + 2;
    if (strncmp(l, "VA ", 3) == 0) {
        char *end;
        unsigned long long v = strtoull(l + 3, &end, 10);
        if (end == l + 3 || (*end != ' ' && *end != '\0') || v > VALUE_MAX)
            return -EPROTO;
        vbytes = (size_t)v;
        total += vbytes + 2;
        op->reply = MCP_R_VALUE;
    }
    if (!(op->rvalue = value_room(op, total)))
        return -ENOMEM;
    memcpy(op->rvalue, l, len); /* before get_data() moves the buffer */
    memcpy(op->rvalue + len, "\r\n", 2);
    op->rvlen = total;
    if (op->reply == MCP_R_VALUE) {
        if ((rc = get_data(c, vbytes)) < 0)
            return rc;
        memcpy(op->rvalue + len + 2, c->r + c->rpos, vbytes + 2);
        c->rpos += vbytes + 2;
        op->rdata = vbytes;
    }
    if (op->quiet) {
        if ((rc = get_line(c, &l, &len)) < 0)
            return rc;
        if (strcmp(l, "MN") != 0)
            return -EPROTO;
    }
    return 0;
}

/* Runs a batch taken from the FIFO as one pipelined exchange: every get of
 * the batch as one multi-key gets, then the other ops in order, all written
 * at once, then the replies read in order (one round trip).  Ops of one
 * batch are all outstanding at once, so their relative order is free: the
 * front never has two unfinished IOs of one key on one connection, and a
 * flush_all is alone on its connection.  A connection fault fails the ops
 * not yet answered with SERVER_ERROR and closes the connection (the next
 * batch reconnects; after a failed connect, not for RETRY_S). */
static void run_batch(mconn_t *c, backend_op_t **ops, size_t n)
{
    backend_op_t *gets[BACKEND_BATCH_MAX];
    size_t ng = 0, upto = 0;  /* the non-gets before ops[upto] are answered */
    int rc = 0, gets_done = 0;
    for (size_t i = 0; i < n; i++) {
        backend_op_t *op = ops[i];
        op->rvalue = NULL;
        op->rvlen = 0;
        op->errmsg[0] = '\0';
        op->reply = MCP_R_SERVER_ERROR; /* until answered */
        if (is_get(op)) {
            op->reply = MCP_R_MISS;
            gets[ng++] = op;
        } else if (is_gat(op)) {
            op->reply = MCP_R_MISS;
        }
    }
    if (!c) {
        rc = -ENOMEM;
        goto fail;
    }
    if (c->fd < 0 && (rc = mconn_connect(c)) < 0)
        goto fail;
    c->wlen = 0;
    if (ng) {
        rc = put(c, "gets", 4);
        for (size_t i = 0; !rc && i < ng; i++)
            rc = put_word(c, gets[i]->key, gets[i]->keylen);
        if (!rc)
            rc = put(c, "\r\n", 2);
    }
    for (size_t i = 0; !rc && i < n; i++)
        if (!is_get(ops[i]))
            rc = put_request(c, ops[i]);
    if (rc < 0 || (rc = send_all(c)) < 0)
        goto fail;
    if (ng && (rc = read_values(c, gets, ng)) < 0)
        goto fail;
    gets_done = 1;
    for (upto = 0; upto < n; upto++)
        if (!is_get(ops[upto]) &&
            (rc = is_gat(ops[upto]) ? read_values(c, &ops[upto], 1)
                  : mcp_cmd_is_meta(ops[upto]->cmd) ? read_meta(c, ops[upto])
                                                    : read_reply(c, ops[upto])) < 0)
            goto fail;
    if (c->rpos != c->rlen)
        mconn_close(c); /* replies nobody asked for: start afresh */
    return;
fail:
    if (c && c->fd >= 0) {
        atomic_fetch_add_explicit(&c->b->io_errors, 1, memory_order_relaxed);
        log_debug("backend %s: %s; reconnecting", c->b->desc, strerror(-rc));
        mconn_close(c);
    }
    for (size_t i = 0; i < n; i++) {
        backend_op_t *op = ops[i];
        if (is_get(op) ? gets_done : i < upto)
            continue;
        backend_free_value(op);
        op->rvlen = 0;
        if (op->errmsg[0])
            op->reply = MCP_R_SERVER_ERROR; /* memcached's own message */
        else
            set_error(op, strerror(-rc));
    }
}

/* The pool's run: a batch on this thread's connection (NULL: none). */
static void run_items(void *ctx, workpool_item_t **items, size_t n, void *arg)
{
    (void)arg;
    backend_op_t *ops[BACKEND_BATCH_MAX];
    for (size_t i = 0; i < n; i++)
        ops[i] = container_of(items[i], backend_op_t, link);
    run_batch(ctx, ops, n);
    double t = mono_now();
    for (size_t i = 0; i < n; i++)
        ops[i]->done_at = t;
}

/* The pool's ready, on the loop thread: runs the callbacks in order. */
static void deliver(void *arg)
{
    backend_t *b = arg;
    workpool_item_t *it = workpool_collect(b->wp);
    while (it) {
        workpool_item_t *next = it->next;
        it->next = NULL;
        b->done(container_of(it, backend_op_t, link), b->arg);
        it = next;
    }
}

backend_t *backend_new(struct event_base *base, const char *host,
                       unsigned port, int nworkers, int batch,
                       backend_done_fn done, void *arg, int *err)
{
    int rc = 0;
    backend_t *b = NULL;
    if (!base || !host || !*host || strlen(host) >= sizeof b->host ||
        (port == 0 && (host[0] != '/' || strlen(host) >= sizeof(((struct sockaddr_un *)0)->sun_path))) ||
        port > 65535 || nworkers < 0 || batch < 1 ||
        batch > BACKEND_BATCH_MAX || !done) {
        rc = -EINVAL;
        goto out;
    }
    b = calloc(1, sizeof *b);
    if (!b) {
        rc = -ENOMEM;
        goto out;
    }
    snprintf(b->host, sizeof b->host, "%s", host);
    b->port = port;
    if (port)
        snprintf(b->desc, sizeof b->desc, "%s:%u", host, port);
    else
        snprintf(b->desc, sizeof b->desc, "unix:%s", host);
    b->done = done;
    b->arg = arg;
    workpool_config_t pc = {.workers = nworkers, .batch = batch, .finish_queued = 1,
                            .thread_start = mconn_new, .thread_stop = mconn_free,
                            .run = run_items, .ready = deliver, .arg = b};
    b->wp = workpool_new(base, &pc, &rc);
out:
    if (rc < 0) {
        backend_destroy(&b);
        if (err)
            *err = rc;
        return NULL;
    }
    return b;
}

int backend_submit(backend_t *b, backend_op_t *op)
{
    return workpool_submit_chain(b->wp, &op->link, &op->link, 1);
}

int backend_submit_chain(backend_t *b, backend_op_t *first, backend_op_t *last,
                         size_t n)
{
    return workpool_submit_chain(b->wp, &first->link, &last->link, n);
}

void backend_destroy(backend_t **bp)
{
    if (!bp || !*bp)
        return;
    backend_t *b = *bp;
    if (b->wp) {
        workpool_stop(b->wp); /* the workers finish the queue first */
        deliver(b);
        workpool_destroy(&b->wp);
    }
    free(b);
    *bp = NULL;
}

int backend_parse_url(const char *url, char *host, size_t hostcap,
                      unsigned *port)
{
    if (!url)
        return -EINVAL;
    if (strncmp(url, "memcached://", 12) == 0)
        url += 12;
    if (strncmp(url, "unix:", 5) == 0) {
        size_t n = strlen(url + 5);
        if (url[5] != '/' || n >= hostcap || n >= sizeof(((struct sockaddr_un *)0)->sun_path))
            return -EINVAL;
        memcpy(host, url + 5, n + 1);
        *port = 0;
        return 0;
    }
    const char *colon = strrchr(url, ':');
    if (!colon || colon == url || (size_t)(colon - url) >= hostcap)
        return -EINVAL;
    char *end;
    errno = 0;
    unsigned long p = strtoul(colon + 1, &end, 10);
    if (errno || *end || end == colon + 1 || p == 0 || p > 65535)
        return -EINVAL;
    memcpy(host, url, (size_t)(colon - url));
    host[colon - url] = '\0';
    *port = (unsigned)p;
    return 0;
}
