/* gate.c - what both node fronts share: listener, connections, outstanding window, dispatch, busy time, buckets and tokens, graceful stop (see gate.h). */
#include "storage-node/io/gate.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <math.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "common/log.h"
#include "common/mono.h"

#define SHUTDOWN_GRACE_SEC 10

struct gate {
    gate_config_t cfg;
    gate_hooks_t hooks;
    void *front;
    struct event_base *base;
    sched_t *s;
    listener_t *lis;
    gate_conn_t *conns;
    int nconns;
    uint64_t total_conns;
    /* gate_set_conn_limits() */
    double idle_sec;       /* 0: no idle timeout */
    int per_ip;            /* 0: no per-address cap */
    struct event *sweep;   /* idle check, persistent; NULL while idle_sec is 0 */
    const struct sockaddr *accepting; /* peer of the connection hooks->accept is taking */
    uint64_t idle_closed, refused_per_ip;
    double refuse_logged;  /* mono_now() of the last per-address warning */
    window_t *win;         /* IOs at the backend: how many, how many allowed */
    double busy_mark;      /* last time busy time was accounted */
    double busy_pending;   /* busy seconds not yet reported */
    struct iolat *lat;     /* gate_set_iolat(), NULL: none */
    int stopping;
    struct event *stop_timer;
    /* gate_request_dispatch(): one dispatch per pass of the event loop. */
    struct event *kick;
    int kick_armed;
    /* Paced tokens: one timer for the time the scheduler says credit
     * returns (sched_next_ready()), armed when a dispatch finds nothing. */
    struct event *pace;
    double pace_at;        /* when it fires; INFINITY: not armed */
    gate_status_fn status; /* gate_set_status() */
    void *status_arg;
};

void gate_set_status(gate_t *g, gate_status_fn fn, void *arg)
{
    g->status = fn;
    g->status_arg = arg;
}

void gate_set_iolat(gate_t *g, struct iolat *l)
{
    g->lat = l;
}

struct iolat *gate_iolat(const gate_t *g)
{
    return g->lat;
}

/* The gate's own stats lines (the window), then gate_set_status()'s. */
static void status_lines(void *arg, FILE *fp)
{
    gate_t *g = arg;
    window_stats_t ws;
    window_stats(g->win, &ws);
    fprintf(fp, "STAT bqos_window %d\r\n", ws.window);
    fprintf(fp, "STAT bqos_window_latency_us %.1f\r\n", ws.latency * 1e6);
    fprintf(fp, "STAT bqos_window_base_us %.1f\r\n", ws.base * 1e6);
    fprintf(fp, "STAT bqos_window_throughput %.0f\r\n", ws.throughput);
    /* requests waiting at the node (the scheduler's to order), beside the
     * window's at the backend; one pass over the buckets per stats call */
    uint64_t queued = 0;
    for (int b = 0, n = sched_nbuckets(g->s); b < n; b++) {
        sched_bucket_stats_t bs;
        if (sched_bucket_stats(g->s, b, &bs) == 0)
            queued += bs.queued;
    }
    fprintf(fp, "STAT bqos_queued %llu\r\n", (unsigned long long)queued);
    gate_conn_stats_t cs;
    gate_conn_stats(g, &cs);
    fprintf(fp, "STAT bqos_conns_idle_closed %llu\r\n", (unsigned long long)cs.idle_closed);
    fprintf(fp, "STAT bqos_conns_refused_per_ip %llu\r\n",
            (unsigned long long)cs.refused_per_ip);
    fprintf(fp, "STAT bqos_accept_pauses %llu\r\n", (unsigned long long)cs.accept_pauses);
    if (g->status)
        g->status(g->status_arg, fp);
}

void gate_status_hook(gate_t *g, gate_status_fn *fn, void **arg)
{
    *fn = status_lines;
    *arg = g;
}

static void on_kick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    gate_t *g = arg;
    g->kick_armed = 0;
    if (!g->stopping)
        g->hooks.dispatch(g->front);
}

static void on_pace(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    gate_t *g = arg;
    g->pace_at = INFINITY;
    if (!g->stopping)
        g->hooks.dispatch(g->front);
}

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
static int over_per_ip(const gate_t *g, const struct sockaddr *sa)
{
    int family;
    size_t n;
    const void *a = peer_bytes(sa, &family, &n);
    if (!g->per_ip || !a)
        return 0;
    int count = 0;
    for (const gate_conn_t *c = g->conns; c; c = c->next)
        if (c->family == family && memcmp(c->peer, a, n) == 0 && ++count >= g->per_ip)
            return 1;
    return 0;
}

static void on_accept(evutil_socket_t fd, const struct sockaddr *sa, int salen, void *arg)
{
    gate_t *g = arg;
    int per_ip = 0;
    if (g->stopping || g->nconns >= g->cfg.max_conns || (per_ip = over_per_ip(g, sa))) {
        if (per_ip) {
            g->refused_per_ip++;
            double now = mono_now();
            if (now - g->refuse_logged >= 10) {
                log_warn("%sconnection refused: its address has --max-conns-per-ip %d open "
                         "(%llu refused so far)",
                         g->cfg.tag, g->per_ip, (unsigned long long)g->refused_per_ip);
                g->refuse_logged = now;
            }
        }
        if (g->hooks.refuse)
            g->hooks.refuse(g->front, fd);
        evutil_closesocket(fd);
        return;
    }
    g->accepting = sa;
    g->hooks.accept(g->front, fd, sa, salen);
    g->accepting = NULL;
}

/* Shuts down every connection that read nothing for idle_sec and holds
 * nothing (gate_set_conn_limits()). */
static void on_sweep(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    gate_t *g = arg;
    if (g->stopping)
        return;
    double now = mono_now();
    gate_conn_t *next;
    for (gate_conn_t *c = g->conns; c; c = next) {
        next = c->next;
        if (now - c->last < g->idle_sec)
            continue;
        c->last = now; /* busy: idle from now at the earliest; shut: not twice */
        if (c->held == 0 && !c->writing && evbuffer_get_length(c->out) == 0 &&
            event_pending(c->rev, EV_READ, NULL) && shutdown(c->fd, SHUT_RDWR) == 0)
            g->idle_closed++;
    }
}

int gate_set_conn_limits(gate_t *g, double idle_sec, int per_ip)
{
    if (!(idle_sec >= 0) || per_ip < 0)
        return -EINVAL;
    if (g->sweep) {
        event_free(g->sweep);
        g->sweep = NULL;
    }
    g->idle_sec = idle_sec;
    g->per_ip = per_ip;
    if (idle_sec > 0) {
        double every = idle_sec / 4 < 1 ? idle_sec / 4 : 1;
        struct timeval tv = {(time_t)every, (suseconds_t)((every - (time_t)every) * 1e6)};
        g->sweep = event_new(g->base, -1, EV_PERSIST, on_sweep, g);
        if (!g->sweep || event_add(g->sweep, &tv) < 0)
            return -ENOMEM;
    }
    return 0;
}

void gate_conn_stats(const gate_t *g, gate_conn_stats_t *out)
{
    out->idle_closed = g->idle_closed;
    out->refused_per_ip = g->refused_per_ip;
    out->accept_pauses = g->lis ? listener_pauses(g->lis) : 0;
}

gate_t *gate_new(struct event_base *base, sched_t *s, const gate_config_t *cfg,
                 const gate_hooks_t *hooks, void *front, int *err)
{
    int rc = 0;
    gate_t *g = NULL;
    if (!base || !s || !cfg || !hooks || !hooks->dispatch || !hooks->drain || !hooks->stop ||
        !hooks->idle || !hooks->accept || cfg->outstanding < 1 || cfg->max_conns < 1 ||
        cfg->max_buckets < 0) {
        rc = -EINVAL;
        goto out;
    }
    g = calloc(1, sizeof *g);
    if (!g) {
        rc = -ENOMEM;
        goto out;
    }
    g->cfg = *cfg;
    if (!g->cfg.tag)
        g->cfg.tag = "";
    g->hooks = *hooks;
    g->front = front;
    g->base = base;
    g->s = s;
    g->kick = evtimer_new(base, on_kick, g);
    g->pace = evtimer_new(base, on_pace, g);
    g->pace_at = INFINITY;
    if (!g->kick || !g->pace) {
        rc = -ENOMEM;
        goto out;
    }
    g->busy_mark = mono_now();
    window_config_t wc;
    window_config_defaults(&wc);
    wc.adaptive = 0;
    wc.start = wc.ceiling = cfg->outstanding;
    wc.floor = 1;
    if (!(g->win = window_new(&wc, g->busy_mark, &rc)))
        goto out;
out:
    if (rc < 0) {
        gate_destroy(&g);
        if (err)
            *err = rc;
        return NULL;
    }
    return g;
}

int gate_listen(gate_t *g, const listener_addr_t *addr)
{
    int rc = 0;
    if (g->lis)
        return -EINVAL;
    g->lis = listener_new(g->base, addr, on_accept, g, &rc);
    return g->lis ? 0 : rc;
}

unsigned gate_port(const gate_t *g)
{
    return g->lis ? listener_port(g->lis) : 0;
}

const char *gate_address(const gate_t *g)
{
    return g->lis ? listener_name(g->lis) : "";
}

sched_t *gate_sched(gate_t *g)
{
    return g->s;
}

/* ---- connections -------------------------------------------------------- */

/* Frees what gate_conn_open() made (not the socket). */
static void free_io(gate_conn_t *c)
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
    gate_conn_t *c = arg;
    c->last = mono_now();
    c->on_read(fd, what, c->arg);
}

int gate_conn_open(gate_t *g, gate_conn_t *c, evutil_socket_t fd,
                   event_callback_fn on_read, event_callback_fn on_write, void *arg)
{
    c->fd = fd;
    c->writing = 0;
    c->held = 0;
    c->on_read = on_read;
    c->arg = arg;
    c->last = mono_now();
    size_t n;
    const void *a = peer_bytes(g->accepting, &c->family, &n);
    memset(c->peer, 0, sizeof c->peer);
    if (a)
        memcpy(c->peer, a, n);
    c->out = evbuffer_new();
    c->rev = event_new(g->base, fd, EV_READ | EV_PERSIST, conn_read, c);
    c->wev = event_new(g->base, fd, EV_WRITE | EV_PERSIST, on_write, arg);
    if (!c->out || !c->rev || !c->wev || event_add(c->rev, NULL) < 0) {
        free_io(c);
        return -ENOMEM;
    }
    c->prev = NULL;
    c->next = g->conns;
    if (g->conns)
        g->conns->prev = c;
    g->conns = c;
    g->nconns++;
    g->total_conns++;
    return 0;
}

int gate_conn_write(gate_conn_t *c)
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
    gate_conn_want_write(c, evbuffer_get_length(c->out) > 0);
    return 0;
}

void gate_conn_want_write(gate_conn_t *c, int on)
{
    if (on == c->writing)
        return;
    c->writing = on;
    if (on)
        event_add(c->wev, NULL);
    else
        event_del(c->wev);
}

void gate_conn_close(gate_t *g, gate_conn_t *c)
{
    free_io(c);
    if (c->fd >= 0)
        evutil_closesocket(c->fd);
    c->fd = -1;
    if (c->prev)
        c->prev->next = c->next;
    else
        g->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    c->prev = c->next = NULL;
    g->nconns--;
    if (!g->stopping)
        listener_resume(g->lis);
}

gate_conn_t *gate_conns(gate_t *g)
{
    return g->conns;
}

int gate_nconns(const gate_t *g)
{
    return g->nconns;
}

uint64_t gate_total_conns(const gate_t *g)
{
    return g->total_conns;
}

/* ---- the window ----------------------------------------------------------- */

/* Adds the busy time up to `t` (now) since the last mark (if anything was
 * outstanding); returns t. */
static double busy_account(gate_t *g, double t)
{
    if (window_inflight(g->win) > 0)
        g->busy_pending += t - g->busy_mark;
    g->busy_mark = t;
    return t;
}

/* Nothing may be dispatched at `now`: if a paced bucket waits for credit,
 * the pacing timer fires when it returns (moved earlier if needed; one
 * timer for the whole scheduler). */
static void pace_arm(gate_t *g, double now)
{
    double t = sched_next_ready(g->s);
    if (!(t < g->pace_at) || g->stopping)
        return;
    g->pace_at = t;
    long long us = t > now ? (long long)ceil((t - now) * 1e6) : 0; /* never early */
    struct timeval tv = {(time_t)(us / 1000000), (suseconds_t)(us % 1000000)};
    evtimer_add(g->pace, &tv);
}

sched_item_t *gate_take(gate_t *g)
{
    if (window_inflight(g->win) >= window_limit(g->win))
        return NULL;
    double now = mono_now();
    sched_class_t cls;
    sched_item_t *it = sched_dispatch(g->s, now, &cls);
    if (!it) {
        pace_arm(g, now);
        return NULL;
    }
    window_take(g->win, busy_account(g, now));
    if (cls == SCHED_CLASS_R)
        window_note_reserved(g->win);
    return it;
}

void gate_done(gate_t *g)
{
    gate_done_at(g, INFINITY);
}

void gate_done_at(gate_t *g, double at)
{
    double now = busy_account(g, mono_now());
    window_done(g->win, at < now ? at : now);
    sched_note_completion(g->s, 1, g->busy_pending);
    g->busy_pending = 0;
}

/* Not a backend round trip: leaves the window's figures alone. */
void gate_done_inline(gate_t *g)
{
    window_untake(g->win, g->busy_mark);
    sched_note_completion(g->s, 1, 0);
}

void gate_untake(gate_t *g)
{
    window_untake(g->win, g->busy_mark);
}

int gate_inflight(const gate_t *g)
{
    return window_inflight(g->win);
}

int gate_set_window(gate_t *g, const window_config_t *cfg)
{
    int rc = 0;
    double now = mono_now();
    window_config_t wc = *cfg;
    wc.start = window_limit(g->win);
    window_t *w = window_new(&wc, now, &rc);
    if (!w)
        return rc;
    for (int i = window_inflight(g->win); i > 0; i--)
        window_take(w, now);
    window_destroy(&g->win);
    g->win = w;
    return 0;
}

void gate_window_stats(const gate_t *g, window_stats_t *out)
{
    window_stats(g->win, out);
}

/* Asks for a dispatch at the end of this pass of the event loop rather
 * than now: every request read in one pass (one epoll_wait) then goes to
 * the backend together, as one batch.  After completions (next_pass), the
 * dispatch waits for the next pass instead, after the requests that
 * arrived meanwhile were read: with inline backend calls, dispatching again
 * in the same pass would serve everything already queued before reading
 * anything new, so a bucket with R-tokens whose clients answer quickly
 * would lose its priority over queued L-token work.  The order of dispatch
 * is still the scheduler's alone. */
void gate_request_dispatch(gate_t *g, int next_pass)
{
    static const struct timeval now = {0, 0};
    if (g->kick_armed || g->stopping)
        return;
    g->kick_armed = 1;
    if (next_pass)
        evtimer_add(g->kick, &now);
    else
        event_active(g->kick, EV_TIMEOUT, 0);
}

/* ---- buckets and tokens --------------------------------------------------- */

int gate_add_bucket(gate_t *g, const char *name, uint32_t weight)
{
    int b = sched_find_bucket(g->s, name, strlen(name));
    if (b >= 0) {
        int rc = sched_set_weight(g->s, b, weight);
        return rc < 0 ? rc : b;
    }
    if (g->cfg.max_buckets > 0 && sched_nbuckets(g->s) >= g->cfg.max_buckets)
        return -ENOMEM;
    return sched_add_bucket(g->s, name, weight);
}

int gate_set_tokens(gate_t *g, const char *name, int64_t r, int64_t l)
{
    int b = sched_find_bucket(g->s, name, strlen(name));
    if (b < 0)
        b = gate_add_bucket(g, name, 1);
    if (b < 0)
        return b;
    int rc = sched_set_tokens(g->s, b, r, l, INFINITY, 0); /* a test hook: unpaced */
    if (rc == 0)
        gate_kick(g);
    return rc;
}

void gate_kick(gate_t *g)
{
    if (g->stopping)
        return;
    if (g->cfg.defer)
        gate_request_dispatch(g, 0);
    else
        g->hooks.dispatch(g->front);
}

/* ---- stopping ------------------------------------------------------------- */

void gate_check_stopped(gate_t *g)
{
    if (gate_inflight(g) > 0 || !g->hooks.idle(g->front))
        return;
    log_info("%severy request answered; stopping", g->cfg.tag);
    event_base_loopexit(g->base, NULL);
}

static void on_stop_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    gate_t *g = arg;
    log_warn("%sshutdown grace period over; %d IOs in flight, closing", g->cfg.tag,
             gate_inflight(g));
    event_base_loopexit(g->base, NULL);
}

void gate_shutdown(gate_t *g)
{
    if (g->stopping)
        return;
    g->stopping = 1;
    if (g->lis)
        listener_disable(g->lis);
    size_t n = sched_drain(g->s, g->hooks.drain, g->front);
    log_info("%sshutting down: %zu queued requests failed, %d in flight", g->cfg.tag, n,
             gate_inflight(g));
    g->hooks.stop(g->front);
    struct timeval tv = {SHUTDOWN_GRACE_SEC, 0};
    g->stop_timer = evtimer_new(g->base, on_stop_timer, g);
    if (g->stop_timer)
        evtimer_add(g->stop_timer, &tv);
    gate_check_stopped(g);
}

int gate_stopping(const gate_t *g)
{
    return g->stopping;
}

void gate_close(gate_t *g)
{
    if (!g)
        return;
    g->stopping = 1;
    listener_destroy(&g->lis);
}

void gate_destroy(gate_t **gp)
{
    if (!gp || !*gp)
        return;
    gate_t *g = *gp;
    listener_destroy(&g->lis);
    if (g->sweep)
        event_free(g->sweep);
    if (g->stop_timer)
        event_free(g->stop_timer);
    if (g->kick)
        event_free(g->kick);
    if (g->pace)
        event_free(g->pace);
    window_destroy(&g->win);
    free(g);
    *gp = NULL;
}
