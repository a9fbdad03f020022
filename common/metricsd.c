/* metricsd.c - the /metrics HTTP endpoint: evhttp on its own thread, the text rendered on the owner's thread per scrape (see metricsd.h). */
#include "common/metricsd.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/hostport.h"

#define SCRAPE_WAIT_S 5 /* the owner answers within this, or 503 */
#define METRICSD_HEADERS_MAX 16384 /* request line and headers; more: 400 and closed */
#define METRICSD_BODY_MAX 4096     /* request body; more: 413 and closed */

struct metricsd {
    metricsd_render_fn render;
    void *arg;
    int askfd;              /* eventfd: HTTP thread -> owner, "a scrape waits" */
    int stopfd;             /* eventfd: owner -> HTTP thread, "stop" */
    struct event_base *base; /* the HTTP thread's */
    struct evhttp *http;
    struct event *stop_ev;
    pthread_t thread;
    int started;
    char address[80];
    /* Under mu: the scrape handshake and the text. */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t asked, answered; /* scrape numbers */
    int closing;
    promtext_t *text;
};

/* ---- the HTTP thread ----------------------------------------------------- */

static void on_stop(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    event_base_loopbreak(((metricsd_t *)arg)->base);
}

/* Asks the owner for the text and waits; fills `body` with it.  Returns
 * 0, or -ETIMEDOUT / -ESHUTDOWN / -ENOMEM. */
static int scrape(metricsd_t *m, struct evbuffer *body)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += SCRAPE_WAIT_S;
    pthread_mutex_lock(&m->mu);
    uint64_t mine = ++m->asked;
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
        size_t len;
        const char *t = promtext_data(m->text, &len);
        rc = promtext_error(m->text);
        if (rc == 0 && evbuffer_add(body, t, len) < 0)
            rc = -ENOMEM;
    }
    pthread_mutex_unlock(&m->mu);
    return rc;
}

static void on_metrics(struct evhttp_request *req, void *arg)
{
    metricsd_t *m = arg;
    enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
    if (cmd != EVHTTP_REQ_GET && cmd != EVHTTP_REQ_HEAD) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "GET, HEAD");
        evhttp_send_error(req, 405, NULL);
        return;
    }
    struct evbuffer *body = evbuffer_new();
    int rc = body ? scrape(m, body) : -ENOMEM;
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

static void on_other(struct evhttp_request *req, void *arg)
{
    (void)arg;
    evhttp_send_error(req, 404, "only /metrics here");
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
    if (!(m->text = promtext_new()) || !(m->base = event_base_new()) ||
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
    if (evhttp_set_cb(m->http, "/metrics", on_metrics, m) < 0) {
        rc = -ENOMEM;
        goto out;
    }
    evhttp_set_gencb(m->http, on_other, m);
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

void metricsd_serve(metricsd_t *m)
{
    uint64_t n;
    if (read(m->askfd, &n, sizeof n) < 0 && errno != EAGAIN)
        return;
    pthread_mutex_lock(&m->mu);
    if (m->answered < m->asked) {
        promtext_reset(m->text);
        m->render(m->arg, m->text);
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
    if (m->askfd >= 0)
        close(m->askfd);
    if (m->stopfd >= 0)
        close(m->stopfd);
    pthread_cond_destroy(&m->cv);
    pthread_mutex_destroy(&m->mu);
    free(m);
    *mp = NULL;
}
