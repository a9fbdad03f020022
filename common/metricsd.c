/* metricsd.c - the /metrics, /healthz and /readyz HTTP endpoint: evhttp on its own thread, the text rendered on the owner's thread per scrape, the process_* series and build info added on the HTTP thread (see metricsd.h). */
#include "common/metricsd.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/hostport.h"
#include "common/log.h"
#include "common/version.h"

#define SCRAPE_WAIT_S 5 /* the owner answers within this, or 503 */
#define METRICSD_HEADERS_MAX 16384 /* request line and headers; more: 400 and closed */
#define METRICSD_BODY_MAX 4096     /* request body; more: 413 and closed */

/* What a request asks of the owner's thread (bits; none: only an answer). */
enum { WANT_TEXT = 1, WANT_READY = 2 };

struct metricsd {
    metricsd_render_fn render;
    void *arg;
    metricsd_ready_fn ready_fn; /* owner's thread; NULL: ready when it answers */
    void *ready_arg;
    int askfd;              /* eventfd: HTTP thread -> owner, "a scrape waits" */
    int stopfd;             /* eventfd: owner -> HTTP thread, "stop" */
    struct event_base *base; /* the HTTP thread's */
    struct evhttp *http;
    struct event *stop_ev;
    pthread_t thread;
    int started;
    char address[80];
    promtext_t *proc;       /* the HTTP thread's: process_* and build info */
    /* Under mu: the handshake, what was asked, the answers. */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t asked, answered; /* request numbers */
    unsigned want;            /* WANT_* of the requests not yet answered */
    int closing;
    promtext_t *text;
    int ready;                /* the last answer to WANT_READY */
    char why[128];            /* and, when not ready, why */
};

/* ---- the HTTP thread ----------------------------------------------------- */

static void on_stop(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    event_base_loopbreak(((metricsd_t *)arg)->base);
}

/* Asks the owner's thread for `want` (WANT_* bits) and waits for its
 * answer, then copies it: the text into `body` (WANT_TEXT), readiness
 * into *ready and its reason into why[0..cap) (WANT_READY).  Returns 0,
 * or -ETIMEDOUT (no answer within SCRAPE_WAIT_S) / -ESHUTDOWN / -ENOMEM /
 * another -errno. */
static int ask(metricsd_t *m, unsigned want, struct evbuffer *body, int *ready, char *why,
               size_t cap)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += SCRAPE_WAIT_S;
    pthread_mutex_lock(&m->mu);
    uint64_t mine = ++m->asked;
    m->want |= want;
    pthread_mutex_unlock(&m->mu);
    uint64_t one = 1;
    if (write(m->askfd, &one, sizeof one) != (ssize_t)sizeof one)
        return -errno;
    int rc = 0;
    pthread_mutex_lock(&m->mu);
    while (m->answered < mine && !m->closing && rc == 0)
        rc = -pthread_cond_timedwait(&m->cv, &m->mu, &until);
    if (m->closing) {
        rc = -ESHUTDOWN;
    } else if (m->answered >= mine) {
        rc = 0;
        if (want & WANT_TEXT) {
            size_t len;
            const char *t = promtext_data(m->text, &len);
            rc = promtext_error(m->text);
            if (rc == 0 && evbuffer_add(body, t, len) < 0)
                rc = -ENOMEM;
        }
        if (want & WANT_READY) {
            *ready = m->ready;
            snprintf(why, cap, "%s", m->why);
        }
    }
    pthread_mutex_unlock(&m->mu);
    return rc;
}

/* Reads the fields of /proc/self/stat the process_* series need.
 * Returns 0 or -1. */
static int proc_stat(unsigned long long *ticks, unsigned long long *start, unsigned long long *vsize,
                     long long *rss_pages)
{
    char buf[1024];
    FILE *f = fopen("/proc/self/stat", "re");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* after the command name, which may hold anything */
    unsigned long long ut, st;
    /* fields 3..24 of proc(5): state .. cmajflt, utime, stime, cutime ..
     * itrealvalue, starttime, vsize, rss */
    if (!p || sscanf(p + 1, " %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %llu %llu %*s %*s %*s %*s "
                            "%*s %*s %llu %llu %lld", &ut, &st, start, vsize, rss_pages) != 5)
        return -1;
    *ticks = ut + st;
    return 0;
}

/* The boot time, seconds since the epoch ("btime" of /proc/stat), or -1. */
static long long boot_time(void)
{
    char line[256];
    long long bt = -1;
    FILE *f = fopen("/proc/stat", "re");
    if (!f)
        return -1;
    while (bt < 0 && fgets(line, sizeof line, f))
        if (sscanf(line, "btime %lld", &bt) != 1)
            bt = -1;
    fclose(f);
    return bt;
}

/* Open descriptors: the entries of /proc/self/fd but the one reading it;
 * -1 if it cannot be read. */
static long open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    long n = 0;
    const struct dirent *e;
    while ((e = readdir(d)))
        n += e->d_name[0] != '.';
    closedir(d);
    return n - 1;
}

void metricsd_render_process(promtext_t *out, const char *program)
{
    unsigned long long ticks, start, vsize;
    long long rss;
    long hz = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
    if (hz > 0 && page > 0 && proc_stat(&ticks, &start, &vsize, &rss) == 0) {
        promtext_family(out, "process_cpu_seconds_total", PROMTEXT_COUNTER,
                        "Total user and system CPU time spent in seconds.");
        promtext_value(out, NULL, 0, (double)ticks / (double)hz);
        promtext_family(out, "process_virtual_memory_bytes", PROMTEXT_GAUGE,
                        "Virtual memory size in bytes.");
        promtext_u64(out, NULL, 0, vsize);
        promtext_family(out, "process_resident_memory_bytes", PROMTEXT_GAUGE,
                        "Resident memory size in bytes.");
        promtext_u64(out, NULL, 0, rss > 0 ? (uint64_t)rss * (uint64_t)page : 0);
        long long bt = boot_time();
        if (bt >= 0) {
            promtext_family(out, "process_start_time_seconds", PROMTEXT_GAUGE,
                            "Start time of the process since unix epoch in seconds.");
            promtext_value(out, NULL, 0, (double)bt + (double)start / (double)hz);
        }
    }
    long fds = open_fds();
    if (fds >= 0) {
        promtext_family(out, "process_open_fds", PROMTEXT_GAUGE, "Number of open file descriptors.");
        promtext_u64(out, NULL, 0, (uint64_t)fds);
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        promtext_family(out, "process_max_fds", PROMTEXT_GAUGE,
                        "Maximum number of open file descriptors.");
        promtext_value(out, NULL, 0, rl.rlim_cur == RLIM_INFINITY ? INFINITY : (double)rl.rlim_cur);
    }
    promtext_family(out, "bqos_build_info", PROMTEXT_GAUGE,
                    "The program and its bqos version; always 1.");
    const promtext_label_t l[] = {{"program", program}, {"version", BQOS_VERSION}};
    promtext_u64(out, l, 2, 1);
}

static void on_metrics(struct evhttp_request *req, void *arg)
{
    metricsd_t *m = arg;
    struct evbuffer *body = evbuffer_new();
    int rc = body ? ask(m, WANT_TEXT, body, NULL, NULL, 0) : -ENOMEM;
    if (rc == 0) {
        /* Read here, not on the owner's thread: /proc costs the loop nothing. */
        promtext_reset(m->proc);
        metricsd_render_process(m->proc, bqos_log_prog());
        size_t len;
        const char *t = promtext_data(m->proc, &len);
        if (promtext_error(m->proc) == 0 && evbuffer_add(body, t, len) < 0)
            rc = -ENOMEM;
    }
    if (rc < 0) {
        evhttp_send_error(req, 503, rc == -ETIMEDOUT ? "the daemon did not answer in time"
                                                     : strerror(-rc));
    } else {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                          PROMTEXT_CONTENT_TYPE);
        evhttp_send_reply(req, 200, "OK", body);
    }
    if (body)
        evbuffer_free(body);
}

/* /healthz and /readyz: 200 with "ok" or "ready", else 503 with why. */
static void on_probe(struct evhttp_request *req, metricsd_t *m, unsigned want)
{
    struct evbuffer *body = evbuffer_new();
    int ready = 1, code = 200;
    char why[128] = "";
    int rc = body ? ask(m, want, body, &ready, why, sizeof why) : -ENOMEM;
    if (!body) {
        evhttp_send_error(req, 503, strerror(ENOMEM));
        return;
    }
    if (rc < 0) {
        code = 503;
        evbuffer_add_printf(body, "%s\n", rc == -ETIMEDOUT ? "the daemon did not answer in time"
                                                           : strerror(-rc));
    } else if (!ready) {
        code = 503;
        evbuffer_add_printf(body, "not ready: %s\n", why[0] ? why : "(no reason given)");
    } else {
        evbuffer_add_printf(body, "%s\n", want & WANT_READY ? "ready" : "ok");
    }
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                      "text/plain; charset=utf-8");
    evhttp_send_reply(req, code, code == 200 ? "OK" : "Service Unavailable", body);
    evbuffer_free(body);
}

/* Every path: GET and HEAD only; then /metrics, /healthz, /readyz or 404. */
static void on_request(struct evhttp_request *req, void *arg)
{
    metricsd_t *m = arg;
    enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
    if (!path || (strcmp(path, "/metrics") && strcmp(path, "/healthz") && strcmp(path, "/readyz"))) {
        evhttp_send_error(req, 404, "only /metrics, /healthz and /readyz here");
        return;
    }
    if (cmd != EVHTTP_REQ_GET && cmd != EVHTTP_REQ_HEAD) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "GET, HEAD");
        evhttp_send_error(req, 405, NULL);
        return;
    }
    if (strcmp(path, "/metrics") == 0)
        on_metrics(req, m);
    else
        on_probe(req, m, strcmp(path, "/readyz") == 0 ? WANT_READY : 0);
}

static void *http_main(void *arg)
{
    metricsd_t *m = arg;
    event_base_dispatch(m->base);
    return NULL;
}

/* ---- the owner's side ---------------------------------------------------- */

/* Binds m->http to host:port and records the address bound.  Returns 0 or
 * -errno. */
static int bind_http(metricsd_t *m, const char *host, unsigned port)
{
    struct evhttp_bound_socket *bs = evhttp_bind_socket_with_handle(m->http, host, (uint16_t)port);
    if (!bs)
        return -EADDRINUSE;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    char a[INET6_ADDRSTRLEN] = "?";
    unsigned p = port;
    if (getsockname(evhttp_bound_socket_get_fd(bs), (struct sockaddr *)&ss, &sl) == 0) {
        if (ss.ss_family == AF_INET6) {
            const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)&ss;
            inet_ntop(AF_INET6, &s6->sin6_addr, a, sizeof a);
            p = ntohs(s6->sin6_port);
        } else {
            const struct sockaddr_in *s4 = (const struct sockaddr_in *)&ss;
            inet_ntop(AF_INET, &s4->sin_addr, a, sizeof a);
            p = ntohs(s4->sin_port);
        }
    }
    snprintf(m->address, sizeof m->address, ss.ss_family == AF_INET6 ? "[%s]:%u" : "%s:%u", a, p);
    return 0;
}

metricsd_t *metricsd_new(const char *hostport, metricsd_render_fn render, void *arg, int *err)
{
    int rc = 0;
    char host[256];
    unsigned port;
    metricsd_t *m = NULL;
    if (!hostport || !render || hostport_split(hostport, host, sizeof host, &port) < 0) {
        rc = -EINVAL;
        goto out;
    }
    if (!(m = calloc(1, sizeof *m))) {
        rc = -ENOMEM;
        goto out;
    }
    m->render = render;
    m->arg = arg;
    m->askfd = m->stopfd = -1;
    pthread_mutex_init(&m->mu, NULL);
    pthread_cond_init(&m->cv, NULL);
    if ((m->askfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0 ||
        (m->stopfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0) {
        rc = -errno;
        goto out;
    }
    if (!(m->text = promtext_new()) || !(m->proc = promtext_new()) || !(m->base = event_base_new()) ||
        !(m->http = evhttp_new(m->base)) ||
        !(m->stop_ev = event_new(m->base, m->stopfd, EV_READ, on_stop, m)) ||
        event_add(m->stop_ev, NULL) < 0) {
        rc = -ENOMEM;
        goto out;
    }
    evhttp_set_allowed_methods(m->http, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD | EVHTTP_REQ_POST |
                                            EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE);
    evhttp_set_timeout(m->http, 30);
    evhttp_set_max_headers_size(m->http, METRICSD_HEADERS_MAX); /* a scrape is a small GET */
    evhttp_set_max_body_size(m->http, METRICSD_BODY_MAX);
    evhttp_set_gencb(m->http, on_request, m);
    if ((rc = bind_http(m, host, port)) < 0)
        goto out;
    /* The thread starts with every signal blocked: signals stay the
     * owner's (signalfd, libevent's handlers). */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    rc = -pthread_create(&m->thread, NULL, http_main, m);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc < 0)
        goto out;
    m->started = 1;
out:
    if (rc < 0) {
        metricsd_destroy(&m);
        if (err)
            *err = rc;
    }
    return m;
}

int metricsd_fd(const metricsd_t *m)
{
    return m->askfd;
}

const char *metricsd_address(const metricsd_t *m)
{
    return m->address;
}

void metricsd_set_ready(metricsd_t *m, metricsd_ready_fn fn, void *arg)
{
    pthread_mutex_lock(&m->mu); /* serve() reads them under mu */
    m->ready_fn = fn;
    m->ready_arg = arg;
    pthread_mutex_unlock(&m->mu);
}

void metricsd_serve(metricsd_t *m)
{
    uint64_t n;
    if (read(m->askfd, &n, sizeof n) < 0 && errno != EAGAIN)
        return;
    pthread_mutex_lock(&m->mu);
    if (m->answered < m->asked) {
        unsigned want = m->want;
        m->want = 0;
        if (want & WANT_TEXT) {
            promtext_reset(m->text);
            m->render(m->arg, m->text);
        }
        if (want & WANT_READY) {
            m->why[0] = '\0';
            m->ready = m->ready_fn ? m->ready_fn(m->ready_arg, m->why, sizeof m->why) != 0 : 1;
        }
        m->answered = m->asked;
        pthread_cond_broadcast(&m->cv);
    }
    pthread_mutex_unlock(&m->mu);
}

void metricsd_destroy(metricsd_t **mp)
{
    metricsd_t *m = mp ? *mp : NULL;
    if (!m)
        return;
    if (m->started) {
        pthread_mutex_lock(&m->mu);
        m->closing = 1;
        pthread_cond_broadcast(&m->cv);
        pthread_mutex_unlock(&m->mu);
        uint64_t one = 1;
        ssize_t w = write(m->stopfd, &one, sizeof one); /* an eventfd below its maximum */
        (void)w;
        pthread_join(m->thread, NULL);
    }
    if (m->http)
        evhttp_free(m->http);
    if (m->stop_ev)
        event_free(m->stop_ev);
    if (m->base)
        event_base_free(m->base);
    promtext_destroy(&m->text);
    promtext_destroy(&m->proc);
    if (m->askfd >= 0)
        close(m->askfd);
    if (m->stopfd >= 0)
        close(m->stopfd);
    pthread_cond_destroy(&m->cv);
    pthread_mutex_destroy(&m->mu);
    free(m);
    *mp = NULL;
}
