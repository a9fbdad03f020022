/* conns.c - the node fronts' client connections: listener, registry, address table, idle and per-address limits, eviction at the limit, write buffers, a pass's batched sends and reads (see conns.h). */
#include "storage-node/io/conns.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>

#include "common/hashmix.h"
#include "common/log.h"
#include "common/mono.h"
#include "storage-node/io/sendbatch.h"
#include "storage-node/io/writers.h"

/* One client address with connections open: an entry of the address
 * table, in a hash chain and in the max-heap of counts.  Freed with its
 * last connection.  Loop thread. */
typedef struct conns_addr {
    struct conns_addr *hnext;  /* hash chain */
    uint8_t bytes[16];         /* IPv4: first 4 bytes, the rest 0 */
    int family;
    int count;                 /* its connections open */
    int heap;                  /* its index in conns_t.heap */
    conns_conn_t *head, *tail; /* its connections, least recently read first */
} addr_t;

struct conns {
    conns_config_t cfg;
    conns_hooks_t hooks;
    void *front;
    struct event_base *base;
    listener_t *lis;
    conns_conn_t *list;
    int nconns;
    uint64_t total_conns;
    int stopped;           /* conns_stop() */
    /* conns_set_limits() */
    double idle_sec;       /* 0: no idle timeout */
    int per_ip;            /* 0: no per-address cap */
    struct event *sweep;   /* idle check, persistent; NULL while idle_sec is 0 */
    const struct sockaddr *accepting; /* peer of the connection hooks.accept is taking */
    int accepting_len;     /* its length */
    uint64_t idle_closed, refused_per_ip, evicted;
    uint64_t tls_failed;   /* conns_tls_failed() */
    double refuse_logged;  /* mono_now() of the last per-address warning */
    double evict_logged;   /* mono_now() of the last eviction warning */
    /* The address table: TCP peers with connections open. */
    addr_t **tab;          /* hash chains; ntab of them, a power of two (or 0) */
    size_t ntab;
    uint64_t seed;         /* of the hash: clients cannot aim at one chain */
    addr_t **heap;         /* every entry, a max-heap of count */
    int naddrs, heapcap;
    writers_t *wr;         /* conns_set_writers(); NULL: writes on the loop thread */
    /* conns_set_batched(): the pass's send queue and the flush that empties it. */
    sendbatch_t *sb;       /* NULL: writes at once */
    struct event *flush;   /* made active at the pass's first note */
    int flush_armed;
    conns_conn_t **q;      /* noted this pass, nq of them (NULL: closed since) */
    conns_conn_t **cb;     /* the running flush's, callbacks still due (NULL: done or closed) */
    int nq, ncb, qcap;     /* qcap >= connections open: each is noted once at most */
    sendbatch_job_t *jobs; /* qcap of them */
    int *jconn;            /* a job's index in cb */
    struct iovec *iov;     /* SEND_IOV per job */
    /* conns_read_batched(): the pass's read queue and the batch reading it,
     * arrays of qcap like the send queue's. */
    struct event *rpass;   /* made active at the pass's first read note */
    int rpass_armed;
    int reading;           /* conns_run_reads() runs */
    conns_conn_t **rq;     /* noted this pass, nrq of them (NULL: closed since) */
    conns_conn_t **rcb;    /* the running batch's, got() still due (NULL: done or closed) */
    int nrq, nrcb;
    sendbatch_job_t *rjobs;
    int *rjconn;           /* a read job's index in rcb */
    struct iovec *riov;    /* one per read job */
};

/* Chunks of c->out one batched send offers (more: written at once after). */
#define SEND_IOV 8

/* The address bytes of a TCP peer (NULL for a Unix socket), and their
 * length in *n. */
static const void *peer_bytes(const struct sockaddr *sa, int *family, size_t *n)
{
    *family = sa ? sa->sa_family : 0;
    if (*family == AF_INET) {
        *n = 4;
        return &((const struct sockaddr_in *)sa)->sin_addr;
    }
    if (*family == AF_INET6) {
        *n = 16;
        return &((const struct sockaddr_in6 *)sa)->sin6_addr;
    }
    *family = 0;
    *n = 0;
    return NULL;
}

/* ---- the address table ------------------------------------------------- */

static size_t addr_hash(const conns_t *cn, int family, const uint8_t *key)
{
    uint64_t lo, hi;
    memcpy(&lo, key, 8);
    memcpy(&hi, key + 8, 8);
    return (size_t)hashmix64(hashmix64(lo ^ cn->seed) ^ hi ^ (uint64_t)family);
}

/* The key of a peer: its family and 16 address bytes (IPv4 zero-padded);
 * 0 for a Unix socket or NULL (no entry). */
static int addr_key(const struct sockaddr *sa, uint8_t key[16])
{
    int family;
    size_t n;
    const void *a = peer_bytes(sa, &family, &n);
    memset(key, 0, 16);
    if (a)
        memcpy(key, a, n);
    return family;
}

static addr_t *addr_find(const conns_t *cn, int family, const uint8_t *key)
{
    if (!family || !cn->ntab)
        return NULL;
    addr_t *a = cn->tab[addr_hash(cn, family, key) & (cn->ntab - 1)];
    while (a && (a->family != family || memcmp(a->bytes, key, 16) != 0))
        a = a->hnext;
    return a;
}

static void heap_put(conns_t *cn, int i, addr_t *a)
{
    cn->heap[i] = a;
    a->heap = i;
}

/* Restores the heap after heap[i]'s count grew (up) or shrank (down). */
static void heap_up(conns_t *cn, int i)
{
    addr_t *a = cn->heap[i];
    while (i > 0 && cn->heap[(i - 1) / 2]->count < a->count) {
        heap_put(cn, i, cn->heap[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
    heap_put(cn, i, a);
}

static void heap_down(conns_t *cn, int i)
{
    addr_t *a = cn->heap[i];
    for (;;) {
        int m = 2 * i + 1;
        if (m >= cn->naddrs)
            break;
        if (m + 1 < cn->naddrs && cn->heap[m + 1]->count > cn->heap[m]->count)
            m++;
        if (cn->heap[m]->count <= a->count)
            break;
        heap_put(cn, i, cn->heap[m]);
        i = m;
    }
    heap_put(cn, i, a);
}

/* Doubles the hash chains (64 at first).  Returns 0 or -ENOMEM (the table
 * as it was). */
static int tab_grow(conns_t *cn)
{
    size_t n = cn->ntab ? cn->ntab * 2 : 64;
    addr_t **t = calloc(n, sizeof *t);
    if (!t)
        return -ENOMEM;
    for (size_t i = 0; i < cn->ntab; i++)
        for (addr_t *a = cn->tab[i], *next; a; a = next) {
            next = a->hnext;
            size_t h = addr_hash(cn, a->family, a->bytes) & (n - 1);
            a->hnext = t[h];
            t[h] = a;
        }
    free(cn->tab);
    cn->tab = t;
    cn->ntab = n;
    return 0;
}

/* The entry of the peer (family, key), made with count 0 if new.  NULL
 * if out of memory. */
static addr_t *addr_get(conns_t *cn, int family, const uint8_t *key)
{
    addr_t *a = addr_find(cn, family, key);
    if (a)
        return a;
    if ((size_t)cn->naddrs >= cn->ntab && tab_grow(cn) < 0)
        return NULL;
    if (cn->naddrs == cn->heapcap) {
        int cap = cn->heapcap ? cn->heapcap * 2 : 64;
        addr_t **h = realloc(cn->heap, (size_t)cap * sizeof *h);
        if (!h)
            return NULL;
        cn->heap = h;
        cn->heapcap = cap;
    }
    if (!(a = calloc(1, sizeof *a)))
        return NULL;
    a->family = family;
    memcpy(a->bytes, key, 16);
    size_t h = addr_hash(cn, family, key) & (cn->ntab - 1);
    a->hnext = cn->tab[h];
    cn->tab[h] = a;
    heap_put(cn, cn->naddrs++, a); /* count 0: a leaf where it is */
    return a;
}

/* Frees a (count 0): out of its chain and the heap. */
static void addr_free(conns_t *cn, addr_t *a)
{
    addr_t **pp = &cn->tab[addr_hash(cn, a->family, a->bytes) & (cn->ntab - 1)];
    while (*pp != a)
        pp = &(*pp)->hnext;
    *pp = a->hnext;
    int i = a->heap;
    addr_t *last = cn->heap[--cn->naddrs];
    if (last != a) {
        heap_put(cn, i, last);
        heap_up(cn, i);
        heap_down(cn, last->heap);
    }
    free(a);
}

/* Appends c to its address's order (the most recently read). */
static void lru_append(conns_conn_t *c)
{
    addr_t *a = c->addr;
    c->anext = NULL;
    c->aprev = a->tail;
    if (a->tail)
        a->tail->anext = c;
    else
        a->head = c;
    a->tail = c;
}

static void lru_unlink(conns_conn_t *c)
{
    addr_t *a = c->addr;
    if (c->aprev)
        c->aprev->anext = c->anext;
    else
        a->head = c->anext;
    if (c->anext)
        c->anext->aprev = c->aprev;
    else
        a->tail = c->aprev;
    c->aprev = c->anext = NULL;
}

/* c read now (or was found busy): the back of its address's order. */
static void lru_touch(conns_conn_t *c, double now)
{
    c->last = now;
    if (c->addr && c->addr->tail != c) {
        lru_unlink(c);
        lru_append(c);
    }
}

/* ---- admission ------------------------------------------------------------ */

/* Nonzero if c holds nothing the registry can see: no request of it
 * queued, at the backend or unanswered, nothing unsent, reading not paused
 * by the front (the idle timeout's test). */
static int holds_nothing(const conns_conn_t *c)
{
    return c->held == 0 && !c->writing && conns_unsent(c) == 0 &&
           event_pending(c->rev, EV_READ, NULL);
}

/* Nonzero if nothing the client sent waits in c's socket (or the client
 * is gone): one recv(MSG_PEEK). */
static int nothing_unread(const conns_conn_t *c)
{
    char b;
    ssize_t n = recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EINTR);
}

/* At max_conns: closes an idle connection of the address holding the most
 * for a newcomer whose address holds k (the rule in conns.h).  Returns 1
 * if one was closed. */
static int evict_one(conns_t *cn, int k)
{
    if (!cn->hooks.evict || cn->naddrs == 0)
        return 0;
    addr_t *top = cn->heap[0];
    if (top->count < k + 2)
        return 0;
    double now = mono_now();
    /* Each one met goes to the back, so at most count steps visit each once. */
    int steps = top->count < CONNS_EVICT_SCAN ? top->count : CONNS_EVICT_SCAN;
    conns_conn_t *c = top->head, *next;
    for (int i = 0; c && i < steps; i++, c = next) {
        next = c->anext;
        if (holds_nothing(c) && nothing_unread(c)) {
            int from = top->count, before = cn->nconns;
            char who[INET6_ADDRSTRLEN];
            if (!inet_ntop(c->family, c->peer, who, sizeof who))
                strcpy(who, "?");
            if (cn->hooks.evict(cn->front, c) && cn->nconns < before) {
                cn->evicted++;
                if (now - cn->evict_logged >= 10) {
                    log_warn("%sat --max-conns %d: closed the longest-idle connection of %s "
                             "(%d open from it) for a new client (%llu evicted so far)",
                             cn->cfg.tag, cn->cfg.max_conns, who, from,
                             (unsigned long long)cn->evicted);
                    cn->evict_logged = now;
                }
                return 1;
            }
        }
        lru_touch(c, now); /* busy: idle from now at the earliest */
    }
    return 0;
}

static void on_accept(evutil_socket_t fd, const struct sockaddr *sa, int salen, void *arg)
{
    conns_t *cn = arg;
    uint8_t key[16];
    int family = addr_key(sa, key);
    const addr_t *a = addr_find(cn, family, key);
    int k = a ? a->count : 0;
    int per_ip = cn->per_ip > 0 && k >= cn->per_ip;
    if (cn->stopped || per_ip || (cn->nconns >= cn->cfg.max_conns && !evict_one(cn, k))) {
        if (per_ip) {
            cn->refused_per_ip++;
            double now = mono_now();
            if (now - cn->refuse_logged >= 10) {
                log_warn("%sconnection refused: its address has --max-conns-per-ip %d open "
                         "(%llu refused so far)",
                         cn->cfg.tag, cn->per_ip, (unsigned long long)cn->refused_per_ip);
                cn->refuse_logged = now;
            }
        }
        if (cn->hooks.refuse)
            cn->hooks.refuse(cn->front, fd);
        evutil_closesocket(fd);
        return;
    }
    cn->accepting = sa;
    cn->accepting_len = salen;
    cn->hooks.accept(cn->front, fd, sa, salen);
    cn->accepting = NULL;
}

/* Shuts down every connection that read nothing for idle_sec and holds
 * nothing (conns_set_limits()). */
static void on_sweep(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    conns_t *cn = arg;
    if (cn->stopped)
        return;
    double now = mono_now();
    conns_conn_t *next;
    for (conns_conn_t *c = cn->list; c; c = next) {
        next = c->next;
        if (now - c->last < cn->idle_sec)
            continue;
        lru_touch(c, now); /* busy: idle from now at the earliest; shut: not twice */
        if ((c->handshaking || holds_nothing(c)) && shutdown(c->fd, SHUT_RDWR) == 0)
            cn->idle_closed++;
    }
}

int conns_set_limits(conns_t *cn, double idle_sec, int per_ip)
{
    if (!(idle_sec >= 0) || per_ip < 0)
        return -EINVAL;
    if (cn->sweep) {
        event_free(cn->sweep);
        cn->sweep = NULL;
    }
    cn->idle_sec = idle_sec;
    cn->per_ip = per_ip;
    if (idle_sec > 0) {
        double every = idle_sec / 4 < 1 ? idle_sec / 4 : 1;
        struct timeval tv = {(time_t)every, (suseconds_t)((every - (time_t)every) * 1e6)};
        cn->sweep = event_new(cn->base, -1, EV_PERSIST, on_sweep, cn);
        if (!cn->sweep || event_add(cn->sweep, &tv) < 0)
            return -ENOMEM;
    }
    return 0;
}

void conns_tls_failed(conns_t *cn)
{
    cn->tls_failed++;
}

void conns_stats(const conns_t *cn, conns_stats_t *out)
{
    out->open = cn->nconns;
    out->total = cn->total_conns;
    out->idle_closed = cn->idle_closed;
    out->tls_failed = cn->tls_failed;
    out->refused_per_ip = cn->refused_per_ip;
    out->evicted = cn->evicted;
    out->addresses = cn->naddrs;
    out->accept_pauses = cn->lis ? listener_pauses(cn->lis) : 0;
}

conns_t *conns_new(struct event_base *base, const conns_config_t *cfg, const conns_hooks_t *hooks,
                   void *front, int *err)
{
    int rc = 0;
    conns_t *cn = NULL;
    if (!base || !cfg || !hooks || !hooks->accept || cfg->max_conns < 1) {
        rc = -EINVAL;
        goto out;
    }
    cn = calloc(1, sizeof *cn);
    if (!cn) {
        rc = -ENOMEM;
        goto out;
    }
    cn->cfg = *cfg;
    if (!cn->cfg.tag)
        cn->cfg.tag = "";
    cn->hooks = *hooks;
    cn->front = front;
    cn->base = base;
    if (getrandom(&cn->seed, sizeof cn->seed, GRND_NONBLOCK) != sizeof cn->seed)
        cn->seed = hashmix64((uint64_t)(uintptr_t)cn ^ (uint64_t)(mono_now() * 1e9));
out:
    if (rc < 0 && err)
        *err = rc;
    return cn;
}

int conns_listen(conns_t *cn, const listener_addr_t *addr)
{
    int rc = 0;
    if (cn->lis)
        return -EINVAL;
    cn->lis = listener_new(cn->base, addr, on_accept, cn, &rc);
    return cn->lis ? 0 : rc;
}

unsigned conns_port(const conns_t *cn)
{
    return cn->lis ? listener_port(cn->lis) : 0;
}

const char *conns_address(const conns_t *cn)
{
    return cn->lis ? listener_name(cn->lis) : "";
}

/* The field `which` of c's identity. */
static const char **id_field(conns_conn_t *c, conn_id_field_t which)
{
    return which == CONN_ID_USER ? &c->id.user : which == CONN_ID_CERT ? &c->id.cert_name
                                                                       : &c->id.psk_id;
}

int conns_set_identity(conns_conn_t *c, conn_id_field_t which, const char *value)
{
    if ((unsigned)which > CONN_ID_PSK)
        return -EINVAL;
    char *v = NULL;
    if (value) {
        size_t n = strnlen(value, CONN_ID_MAX + 1);
        if (n > CONN_ID_MAX)
            return -EINVAL;
        for (size_t i = 0; i < n; i++)
            if ((unsigned char)value[i] < 0x20 || value[i] == 0x7f)
                return -EINVAL;
        if (!(v = strndup(value, n)))
            return -ENOMEM;
    }
    const char **f = id_field(c, which);
    free((char *)*f);
    *f = v;
    c->who_gen = 0; /* another identity: who_seen() counts it anew */
    c->who_key = 0;
    return 0;
}

/* Frees what conns_open() made (not the socket). */
static void free_io(conns_conn_t *c)
{
    for (int i = CONN_ID_USER; i <= CONN_ID_PSK; i++) {
        const char **f = id_field(c, (conn_id_field_t)i);
        free((char *)*f);
        *f = NULL;
    }
    if (c->rev)
        event_free(c->rev);
    c->handshaking = 0;
    if (c->wev)
        event_free(c->wev);
    if (c->out)
        evbuffer_free(c->out);
    free(c->fb);
    c->fb = NULL;
    c->fboff = c->fblen = 0;
    c->rev = c->wev = NULL;
    c->out = NULL;
    if (c->wc) /* hands the socket to its writer, which closes it */
        writers_close(c->wc);
    c->wc = NULL;
}

/* Notes c for the pass's batched read. */
static void read_note(conns_conn_t *c)
{
    conns_t *cn = c->cn;
    if (c->ridx >= 0)
        return;
    if (cn->nrq == cn->qcap) { /* closed since noted, and others opened: drop the holes */
        int n = 0;
        for (int i = 0; i < cn->nrq; i++)
            if (cn->rq[i]) {
                cn->rq[i]->ridx = n;
                cn->rq[n++] = cn->rq[i];
            }
        cn->nrq = n; /* < qcap: c is open and not among them */
    }
    c->ridx = cn->nrq;
    cn->rq[cn->nrq++] = c;
    if (!cn->rpass_armed) {
        cn->rpass_armed = 1;
        event_active(cn->rpass, EV_READ, 0);
    }
}

/* Every read event: the connection is not idle (batched: the stamp is
 * taken when the batch has read it). */
static void conn_read(evutil_socket_t fd, short what, void *arg)
{
    conns_conn_t *c = arg;
    if (c->rgot) {
        read_note(c);
        return;
    }
    if (!c->handshaking)
        lru_touch(c, mono_now());
    c->on_read(fd, what, c->arg);
}

/* Makes room in the batched send's arrays for one more connection. */
static int batch_room(conns_t *cn)
{
    if (!cn->sb || cn->nconns < cn->qcap)
        return 0;
    int cap = cn->qcap ? cn->qcap * 2 : 64;
    conns_conn_t **q = realloc(cn->q, (size_t)cap * sizeof *q);
    if (q)
        cn->q = q;
    conns_conn_t **cb = q ? realloc(cn->cb, (size_t)cap * sizeof *cb) : NULL;
    if (cb)
        cn->cb = cb;
    sendbatch_job_t *jobs = cb ? realloc(cn->jobs, (size_t)cap * sizeof *jobs) : NULL;
    if (jobs)
        cn->jobs = jobs;
    int *jconn = jobs ? realloc(cn->jconn, (size_t)cap * sizeof *jconn) : NULL;
    if (jconn)
        cn->jconn = jconn;
    struct iovec *iov = jconn ? realloc(cn->iov, (size_t)cap * SEND_IOV * sizeof *iov) : NULL;
    if (iov)
        cn->iov = iov;
    conns_conn_t **rq = iov ? realloc(cn->rq, (size_t)cap * sizeof *rq) : NULL;
    if (rq)
        cn->rq = rq;
    conns_conn_t **rcb = rq ? realloc(cn->rcb, (size_t)cap * sizeof *rcb) : NULL;
    if (rcb)
        cn->rcb = rcb;
    sendbatch_job_t *rjobs = rcb ? realloc(cn->rjobs, (size_t)cap * sizeof *rjobs) : NULL;
    if (rjobs)
        cn->rjobs = rjobs;
    int *rjconn = rjobs ? realloc(cn->rjconn, (size_t)cap * sizeof *rjconn) : NULL;
    if (rjconn)
        cn->rjconn = rjconn;
    struct iovec *riov = rjconn ? realloc(cn->riov, (size_t)cap * sizeof *riov) : NULL;
    if (!riov)
        return -ENOMEM; /* what grew stays: qcap counts only full success */
    cn->riov = riov;
    cn->qcap = cap;
    return 0;
}

int conns_open(conns_t *cn, conns_conn_t *c, evutil_socket_t fd, event_callback_fn on_read,
               event_callback_fn on_write, void *arg)
{
    if (batch_room(cn) < 0)
        return -ENOMEM;
    c->fd = fd;
    c->cn = cn;
    c->on_write = on_write;
    c->werr = 0;
    c->qidx = c->cbidx = -1;
    c->ridx = c->rcbidx = -1;
    c->rroom = NULL;
    c->rgot = NULL;
    c->fb = NULL;
    c->fboff = c->fblen = 0;
    c->writing = 0;
    c->held = 0;
    c->on_read = on_read;
    c->arg = arg;
    c->last = mono_now();
    c->family = addr_key(cn->accepting, c->peer);
    c->addr = NULL;
    memset(&c->id, 0, sizeof c->id);
    c->handshaking = 0;
    c->who_gen = 0;
    c->who_key = 0;
    if (cn->accepting && cn->accepting_len > 0 &&
        (size_t)cn->accepting_len <= sizeof c->id.addr)
        memcpy(&c->id.addr, cn->accepting, (size_t)cn->accepting_len);
    else
        c->id.addr.ss_family = AF_UNIX;
    c->aprev = c->anext = NULL;
    addr_t *a = c->family ? addr_get(cn, c->family, c->peer) : NULL;
    c->out = evbuffer_new();
    c->rev = event_new(cn->base, fd, EV_READ | EV_PERSIST, conn_read, c);
    c->wev = event_new(cn->base, fd, EV_WRITE | EV_PERSIST, on_write, arg);
    c->wc = NULL; /* made last: a failure below leaves the socket the caller's */
    if ((c->family && !a) || !c->out || !c->rev || !c->wev || event_add(c->rev, NULL) < 0 ||
        (cn->wr && !(c->wc = writers_open(cn->wr, fd, on_write, arg)))) {
        free_io(c);
        if (a && a->count == 0)
            addr_free(cn, a);
        return -ENOMEM;
    }
    if (a) {
        c->addr = a;
        a->count++;
        heap_up(cn, a->heap);
        lru_append(c);
    }
    c->prev = NULL;
    c->next = cn->list;
    if (cn->list)
        cn->list->prev = c;
    cn->list = c;
    cn->nconns++;
    cn->total_conns++;
    if (cn->sb)
        sendbatch_register(cn->sb, fd); /* -ENOSPC and the like: the plain fd serves */
    return 0;
}

/* Notes c for the pass's batched send. */
static void batch_note(conns_conn_t *c)
{
    conns_t *cn = c->cn;
    if (c->qidx >= 0)
        return;
    if (cn->nq == cn->qcap) { /* closed since noted, and others opened: drop the holes */
        int n = 0;
        for (int i = 0; i < cn->nq; i++)
            if (cn->q[i]) {
                cn->q[i]->qidx = n;
                cn->q[n++] = cn->q[i];
            }
        cn->nq = n; /* < qcap: c is open and not among them */
    }
    c->qidx = cn->nq;
    cn->q[cn->nq++] = c;
    if (!cn->flush_armed) {
        cn->flush_armed = 1;
        event_active(cn->flush, EV_WRITE, 0);
    }
}

/* Writes what the socket takes of c->out now, one writev at a time;
 * arms the write event while bytes are left.  Returns 0 or -errno. */
static int write_now(conns_conn_t *c)
{
    while (c->fboff < c->fblen) { /* the flat buffer's bytes come first */
        ssize_t n = send(c->fd, c->fb + c->fboff, c->fblen - c->fboff,
                         MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            conns_want_write(c, 1);
            return 0;
        }
        if (n < 0)
            return -errno;
        if (n == 0)
            break;
        c->fboff += (uint32_t)n;
    }
    if (c->fboff < c->fblen) {
        conns_want_write(c, 1);
        return 0;
    }
    while (evbuffer_get_length(c->out) > 0) {
        int n = evbuffer_write(c->out, c->fd);
        if (n < 0) {
            int e = EVUTIL_SOCKET_ERROR();
            if (e == EINTR)
                continue;
            if (e == EAGAIN || e == EWOULDBLOCK)
                break;
            return -e;
        }
        if (n == 0)
            break;
    }
    conns_want_write(c, evbuffer_get_length(c->out) > 0);
    return 0;
}

/* c's bytes not yet sent on this thread: its flat buffer's and c->out's. */
static size_t local_unsent(const conns_conn_t *c)
{
    return (size_t)(c->fblen - c->fboff) + evbuffer_get_length(c->out);
}

char *conns_reply_room(conns_conn_t *c, size_t *room)
{
    if (!c->cn->sb || c->wc || evbuffer_get_length(c->out) > 0)
        return NULL;
    if (c->fboff == c->fblen)
        c->fboff = c->fblen = 0;
    if (c->fblen >= CONNS_REPLY_ROOM || (!c->fb && !(c->fb = malloc(CONNS_REPLY_ROOM))))
        return NULL;
    *room = CONNS_REPLY_ROOM - c->fblen;
    return c->fb + c->fblen;
}

void conns_reply_commit(conns_conn_t *c, size_t len)
{
    c->fblen += (uint32_t)len;
}

int conns_write(conns_conn_t *c)
{
    if (c->wc)
        return writers_send(c->wc, c->out);
    if (c->werr)
        return c->werr;
    if (c->cn->sb && !c->writing) { /* batched, and the socket is not known full */
        if (local_unsent(c) > 0)
            batch_note(c);
        return 0;
    }
    return write_now(c);
}

/* The end of a pass (conns_set_batched()): every noted connection's bytes
 * in one batch, then each one's write callback. */
static void on_flush(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    conns_t *cn = arg;
    cn->flush_armed = 0;
    conns_conn_t **t = cn->cb; /* the noted become the flush's; new notes start afresh */
    cn->cb = cn->q;
    cn->q = t;
    cn->ncb = cn->nq;
    cn->nq = 0;
    size_t nj = 0;
    for (int i = 0; i < cn->ncb; i++) {
        conns_conn_t *c = cn->cb[i];
        if (!c)
            continue;
        c->qidx = -1;
        c->cbidx = i;
        if (c->writing || local_unsent(c) == 0)
            continue; /* full since (a direct write), or nothing left */
        struct iovec *iov = &cn->iov[nj * SEND_IOV];
        int f = 0; /* the flat buffer's bytes first, then c->out's chunks */
        if (c->fboff < c->fblen) {
            iov[0] = (struct iovec){c->fb + c->fboff, c->fblen - c->fboff};
            f = 1;
        }
        int k = evbuffer_get_length(c->out) > 0
                    ? evbuffer_peek(c->out, -1, NULL, iov + f, SEND_IOV - f) : 0;
        cn->jobs[nj] = (sendbatch_job_t){.fd = c->fd, .iov = iov,
                                         .iovcnt = f + (k < SEND_IOV - f ? k : SEND_IOV - f)};
        cn->jconn[nj++] = i;
    }
    sendbatch_run(cn->sb, cn->jobs, nj);
    for (size_t j = 0; j < nj; j++) {
        conns_conn_t *c = cn->cb[cn->jconn[j]];
        const sendbatch_job_t *job = &cn->jobs[j];
        size_t offered = 0;
        for (int k = 0; k < job->iovcnt; k++)
            offered += job->iov[k].iov_len;
        if (job->res > 0) {
            size_t sent = (size_t)job->res, flat = c->fblen - c->fboff;
            size_t k = sent < flat ? sent : flat;
            c->fboff += (uint32_t)k;
            if (sent > k)
                evbuffer_drain(c->out, sent - k);
        }
        if (job->res < 0 && job->res != -EAGAIN)
            c->werr = (int)job->res;
        else if (job->res == (ssize_t)offered && local_unsent(c) > 0)
            c->werr = write_now(c); /* more chunks than one send offers */
        else
            conns_want_write(c, local_unsent(c) > 0);
    }
    /* The callbacks may close any of these (conns_close() clears its
     * entry) and note connections again (for the next flush). */
    for (int i = 0; i < cn->ncb; i++) {
        conns_conn_t *c = cn->cb[i];
        if (!c)
            continue;
        cn->cb[i] = NULL;
        c->cbidx = -1;
        c->on_write(c->fd, EV_WRITE, c->arg);
    }
    cn->ncb = 0;
}

void conns_read_batched(conns_conn_t *c, char *(*room)(void *arg, size_t *room),
                        void (*got)(void *arg, ssize_t n))
{
    if (!c->cn->sb || c->wc)
        return; /* not batched: reads stay on_read's */
    c->rroom = room;
    c->rgot = got;
}

int conns_run_reads(conns_t *cn)
{
    if (cn->reading || cn->nrq == 0)
        return 0;
    cn->reading = 1;
    conns_conn_t **t = cn->rcb; /* the noted become the batch's; new notes start afresh */
    cn->rcb = cn->rq;
    cn->rq = t;
    cn->nrcb = cn->nrq;
    cn->nrq = 0;
    for (int i = 0; i < cn->nrcb; i++)
        if (cn->rcb[i]) {
            cn->rcb[i]->ridx = -1;
            cn->rcb[i]->rcbidx = i;
        }
    int nj = 0;
    for (int i = 0; i < cn->nrcb; i++) {
        conns_conn_t *c = cn->rcb[i];
        if (!c)
            continue;
        size_t room = 0;
        char *p = event_pending(c->rev, EV_READ, NULL) ? c->rroom(c->arg, &room) : NULL;
        if (cn->rcb[i] != c)
            continue; /* room() closed it */
        if (!p || room == 0) { /* paused since noted, or handled without a read */
            cn->rcb[i] = NULL;
            c->rcbidx = -1;
            continue;
        }
        cn->riov[nj] = (struct iovec){p, room};
        cn->rjobs[nj] = (sendbatch_job_t){.fd = c->fd, .iov = &cn->riov[nj], .iovcnt = 1,
                                          .recv = 1};
        cn->rjconn[nj++] = i;
    }
    int k = 0; /* a room() may have closed a connection read before it: drop its job */
    for (int j = 0; j < nj; j++)
        if (cn->rcb[cn->rjconn[j]]) {
            cn->rjobs[k] = cn->rjobs[j];
            cn->rjobs[k].iov = &cn->riov[k];
            cn->riov[k] = cn->riov[j];
            cn->rjconn[k++] = cn->rjconn[j];
        }
    sendbatch_run(cn->sb, cn->rjobs, (size_t)k);
    double now = mono_now(); /* after the reads: no stamp is earlier than its read */
    /* The callbacks may close any of these (conns_close() clears its
     * entry) and note connections again (for the next batch). */
    for (int j = 0; j < k; j++) {
        conns_conn_t *c = cn->rcb[cn->rjconn[j]];
        if (!c)
            continue;
        cn->rcb[cn->rjconn[j]] = NULL;
        c->rcbidx = -1;
        lru_touch(c, now);
        c->rgot(c->arg, cn->rjobs[j].res);
    }
    cn->nrcb = 0;
    cn->reading = 0;
    return 1;
}

/* The pass's reads, if nobody ran them earlier (conns_run_reads()). */
static void on_rpass(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    conns_t *cn = arg;
    cn->rpass_armed = 0;
    conns_run_reads(cn);
}

int conns_set_batched(conns_t *cn, int mode)
{
    if (cn->sb || cn->wr || cn->list || (mode != SENDBATCH_AUTO && mode != SENDBATCH_PLAIN))
        return -EINVAL;
    int err = -ENOMEM;
    if (!(cn->flush = event_new(cn->base, -1, 0, on_flush, cn)) ||
        !(cn->rpass = event_new(cn->base, -1, 0, on_rpass, cn)) ||
        !(cn->sb = sendbatch_new(256, (sendbatch_mode_t)mode, &err))) {
        if (cn->flush)
            event_free(cn->flush);
        if (cn->rpass)
            event_free(cn->rpass);
        cn->flush = cn->rpass = NULL;
        return err;
    }
    return 0;
}

int conns_batched(const conns_t *cn)
{
    return !cn->sb ? 0 : sendbatch_uring(cn->sb) ? 2 : 1;
}

void conns_subject(const conns_conn_t *c, rules_subject_t *s)
{
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

    s->user = c->id.user;
    s->cert_name = c->id.cert_name;
    s->psk_id = c->id.psk_id;
    s->family = 0;
    if (c->family == AF_INET) {
        s->family = 4;
        memcpy(s->addr, c->peer, 4);
    } else if (c->family == AF_INET6 && memcmp(c->peer, mapped, 12) == 0) {
        s->family = 4;
        memcpy(s->addr, c->peer + 12, 4);
    } else if (c->family == AF_INET6) {
        s->family = 6;
        memcpy(s->addr, c->peer, 16);
    }
}

void conns_want_write(conns_conn_t *c, int on)
{
    if (on == c->writing)
        return;
    c->writing = on;
    if (on)
        event_add(c->wev, NULL);
    else
        event_del(c->wev);
}

size_t conns_unsent(const conns_conn_t *c)
{
    return local_unsent(c) + (c->wc ? writers_unsent(c->wc) : 0);
}

int conns_set_writers(conns_t *cn, int n)
{
    if (n < 0 || n > WRITERS_MAX || cn->wr || cn->list || cn->sb)
        return -EINVAL;
    if (n == 0)
        return 0;
    int err = 0;
    cn->wr = writers_new(cn->base, n, &err);
    return cn->wr ? 0 : err;
}

void conns_close(conns_t *cn, conns_conn_t *c)
{
    if (c->qidx >= 0)
        cn->q[c->qidx] = NULL;
    if (c->cbidx >= 0)
        cn->cb[c->cbidx] = NULL;
    if (c->ridx >= 0)
        cn->rq[c->ridx] = NULL;
    if (c->rcbidx >= 0)
        cn->rcb[c->rcbidx] = NULL;
    c->qidx = c->cbidx = c->ridx = c->rcbidx = -1;
    c->rroom = NULL;
    c->rgot = NULL;
    int handed = c->wc != NULL; /* free_io() gives the socket to its writer */
    free_io(c);
    if (cn->sb && c->fd >= 0)
        sendbatch_unregister(cn->sb, c->fd); /* the ring's table must not hold it open */
    if (c->fd >= 0 && !handed)
        evutil_closesocket(c->fd);
    c->fd = -1;
    if (c->prev)
        c->prev->next = c->next;
    else
        cn->list = c->next;
    if (c->next)
        c->next->prev = c->prev;
    c->prev = c->next = NULL;
    addr_t *a = c->addr;
    if (a) {
        lru_unlink(c);
        c->addr = NULL;
        if (--a->count == 0)
            addr_free(cn, a);
        else
            heap_down(cn, a->heap);
    }
    cn->nconns--;
    if (!cn->stopped)
        listener_resume(cn->lis);
}

conns_conn_t *conns_first(conns_t *cn)
{
    return cn->list;
}

int conns_count(const conns_t *cn)
{
    return cn->nconns;
}

int conns_peer_count(const conns_t *cn, const struct sockaddr *sa)
{
    uint8_t key[16];
    int family = addr_key(sa, key);
    const addr_t *a = addr_find(cn, family, key);
    return a ? a->count : 0;
}

void conns_stop(conns_t *cn, int close_listener)
{
    if (!cn)
        return;
    cn->stopped = 1;
    if (close_listener)
        listener_destroy(&cn->lis);
    else if (cn->lis)
        listener_disable(cn->lis);
}

void conns_destroy(conns_t **cnp)
{
    if (!cnp || !*cnp)
        return;
    conns_t *cn = *cnp;
    listener_destroy(&cn->lis);
    if (cn->sweep)
        event_free(cn->sweep);
    writers_destroy(&cn->wr);
    if (cn->flush)
        event_free(cn->flush);
    if (cn->rpass)
        event_free(cn->rpass);
    sendbatch_destroy(&cn->sb);
    free(cn->q);
    free(cn->cb);
    free(cn->jobs);
    free(cn->jconn);
    free(cn->iov);
    free(cn->rq);
    free(cn->rcb);
    free(cn->rjobs);
    free(cn->rjconn);
    free(cn->riov);
    for (int i = 0; i < cn->naddrs; i++) /* connections the front left listed */
        free(cn->heap[i]);
    free(cn->heap);
    free(cn->tab);
    free(cn);
    *cnp = NULL;
}
