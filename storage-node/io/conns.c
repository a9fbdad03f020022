/* conns.c - the node fronts' client connections: listener, registry, idle and per-address limits, write buffers (see conns.h). */
#include "storage-node/io/conns.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "common/log.h"
#include "common/mono.h"

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
    uint64_t idle_closed, refused_per_ip;
    double refuse_logged;  /* mono_now() of the last per-address warning */
};

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

/* Nonzero if the peer `sa` already has per_ip connections open.  A scan of
 * the connections, once per accept (not per request). */
static int over_per_ip(const conns_t *cn, const struct sockaddr *sa)
{
    int family;
    size_t n;
    const void *a = peer_bytes(sa, &family, &n);
    if (!cn->per_ip || !a)
        return 0;
    int count = 0;
    for (const conns_conn_t *c = cn->list; c; c = c->next)
        if (c->family == family && memcmp(c->peer, a, n) == 0 && ++count >= cn->per_ip)
            return 1;
    return 0;
}

static void on_accept(evutil_socket_t fd, const struct sockaddr *sa, int salen, void *arg)
{
    conns_t *cn = arg;
    int per_ip = 0;
    if (cn->stopped || cn->nconns >= cn->cfg.max_conns || (per_ip = over_per_ip(cn, sa))) {
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
        c->last = now; /* busy: idle from now at the earliest; shut: not twice */
        if (c->held == 0 && !c->writing && evbuffer_get_length(c->out) == 0 &&
            event_pending(c->rev, EV_READ, NULL) && shutdown(c->fd, SHUT_RDWR) == 0)
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

void conns_stats(const conns_t *cn, conns_stats_t *out)
{
    out->open = cn->nconns;
    out->total = cn->total_conns;
    out->idle_closed = cn->idle_closed;
    out->refused_per_ip = cn->refused_per_ip;
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

/* Frees what conns_open() made (not the socket). */
static void free_io(conns_conn_t *c)
{
    if (c->rev)
        event_free(c->rev);
    if (c->wev)
        event_free(c->wev);
    if (c->out)
        evbuffer_free(c->out);
    c->rev = c->wev = NULL;
    c->out = NULL;
}

/* Every read event: the connection is not idle. */
static void conn_read(evutil_socket_t fd, short what, void *arg)
{
    conns_conn_t *c = arg;
    c->last = mono_now();
    c->on_read(fd, what, c->arg);
}

int conns_open(conns_t *cn, conns_conn_t *c, evutil_socket_t fd, event_callback_fn on_read,
               event_callback_fn on_write, void *arg)
{
    c->fd = fd;
    c->writing = 0;
    c->held = 0;
    c->on_read = on_read;
    c->arg = arg;
    c->last = mono_now();
    size_t n;
    const void *a = peer_bytes(cn->accepting, &c->family, &n);
    memset(c->peer, 0, sizeof c->peer);
    if (a)
        memcpy(c->peer, a, n);
    c->out = evbuffer_new();
    c->rev = event_new(cn->base, fd, EV_READ | EV_PERSIST, conn_read, c);
    c->wev = event_new(cn->base, fd, EV_WRITE | EV_PERSIST, on_write, arg);
    if (!c->out || !c->rev || !c->wev || event_add(c->rev, NULL) < 0) {
        free_io(c);
        return -ENOMEM;
    }
    c->prev = NULL;
    c->next = cn->list;
    if (cn->list)
        cn->list->prev = c;
    cn->list = c;
    cn->nconns++;
    cn->total_conns++;
    return 0;
}

int conns_write(conns_conn_t *c)
{
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

void conns_close(conns_t *cn, conns_conn_t *c)
{
    free_io(c);
    if (c->fd >= 0)
        evutil_closesocket(c->fd);
    c->fd = -1;
    if (c->prev)
        c->prev->next = c->next;
    else
        cn->list = c->next;
    if (c->next)
        c->next->prev = c->prev;
    c->prev = c->next = NULL;
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
    free(cn);
    *cnp = NULL;
}
