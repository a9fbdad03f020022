/* listener.c - the node fronts' listening socket: TCP on a numeric address and port, or a Unix-domain socket path. */
#include "storage-node/io/listener.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/listener.h>

#include "common/hostport.h"
#include "common/log.h"
#include "common/mono.h"

_Static_assert(sizeof(((listener_addr_t *)0)->path) <= sizeof(((struct sockaddr_un *)0)->sun_path),
               "listener path must fit sun_path");

/* Out of descriptors (or memory), accepting pauses this long unless a
 * connection closes first (listener_resume()); at most one warning per
 * LOG_EVERY_SEC. */
#define RETRY_SEC 0.1
#define LOG_EVERY_SEC 10.0

struct listener {
    struct evconnlistener *lis;
    struct event *retry;  /* re-enables accepting after a pause */
    int paused;           /* accepting paused by an accept error */
    int off;              /* listener_disable(): never resume */
    uint64_t pauses;
    uint64_t pauses_logged;
    double logged_at;     /* mono_now() of the last warning, 0: none yet */
    listener_cb cb;
    void *arg;
    unsigned port;
    char *path;       /* Unix socket file this listener made, else NULL */
    dev_t dev;        /* ... and its identity, so that destroy removes */
    ino_t ino;        /*     only that file */
    char name[128];   /* for log lines */
};

int listener_parse(const char *spec, listener_addr_t *a)
{
    memset(a, 0, sizeof *a);
    if (!spec)
        return -EINVAL;
    if (strncmp(spec, "unix:", 5) == 0) {
        size_t n = strlen(spec + 5);
        if (n == 0 || n >= sizeof a->path)
            return -EINVAL;
        memcpy(a->path, spec + 5, n + 1);
        return 0;
    }
    struct in6_addr tmp;
    if (hostport_split(spec, a->host, sizeof a->host, &a->port) < 0 ||
        (evutil_inet_pton(AF_INET, a->host, &tmp) != 1 &&
         evutil_inet_pton(AF_INET6, a->host, &tmp) != 1))
        return -EINVAL;
    return 0;
}

/* A socket file at `path` whose listener is gone is in the way of bind();
 * one that still accepts belongs to a running process, and anything else
 * is not ours to remove. */
static int clear_stale_socket(const char *path)
{
    struct stat st;
    if (lstat(path, &st) < 0)
        return errno == ENOENT ? 0 : -errno;
    if (!S_ISSOCK(st.st_mode)) {
        log_error("%s exists and is not a socket: not replacing it", path);
        return -EEXIST;
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    memcpy(sun.sun_path, path, strlen(path) + 1);
    int rc = connect(fd, (struct sockaddr *)&sun, sizeof sun) == 0 ? -EADDRINUSE : -errno;
    close(fd);
    if (rc != -ECONNREFUSED)
        return rc == -EADDRINUSE ? rc : -EADDRINUSE;
    log_info("removing stale socket %s", path);
    return unlink(path) < 0 && errno != ENOENT ? -errno : 0;
}

static void on_accept(struct evconnlistener *lis, evutil_socket_t fd, struct sockaddr *sa,
                      int salen, void *arg)
{
    (void)lis;
    listener_t *l = arg;
    if (!l->path) {
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    l->cb(fd, sa, salen, l->arg);
}

/* libevent calls this for an accept error it will not retry (EMFILE,
 * ENFILE, ENOBUFS, ENOMEM...).  The socket stays readable, so accepting on
 * would spin: pause until a connection closes or RETRY_SEC passes. */
static void on_accept_error(struct evconnlistener *lis, void *arg)
{
    listener_t *l = arg;
    int e = EVUTIL_SOCKET_ERROR();
    evconnlistener_disable(lis);
    l->paused = 1;
    l->pauses++;
    struct timeval tv = {0, (int)(RETRY_SEC * 1e6)};
    evtimer_add(l->retry, &tv);
    double now = mono_now();
    if (l->logged_at == 0 || now - l->logged_at >= LOG_EVERY_SEC) {
        log_warn("accept on %s: %s; pausing accepts until a connection closes "
                 "(%llu pauses since the last warning)",
                 l->name, evutil_socket_error_to_string(e),
                 (unsigned long long)(l->pauses - l->pauses_logged));
        l->logged_at = now;
        l->pauses_logged = l->pauses;
    }
}

static void on_retry(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    listener_resume(arg);
}

listener_t *listener_new(struct event_base *base, const listener_addr_t *a,
                         listener_cb cb, void *arg, int *err)
{
    int rc = 0;
    struct sockaddr_storage ss;
    int sslen;
    memset(&ss, 0, sizeof ss);
    listener_t *l = calloc(1, sizeof *l);
    if (!l) {
        rc = -ENOMEM;
        goto out;
    }
    l->cb = cb;
    l->arg = arg;
    if (!(l->retry = evtimer_new(base, on_retry, l))) {
        rc = -ENOMEM;
        goto out;
    }
    if (a->path[0]) {
        struct sockaddr_un *sun = (struct sockaddr_un *)&ss;
        sun->sun_family = AF_UNIX;
        memcpy(sun->sun_path, a->path, strlen(a->path) + 1);
        sslen = sizeof *sun;
        snprintf(l->name, sizeof l->name, "unix:%s", a->path);
        if ((rc = clear_stale_socket(a->path)) < 0)
            goto out;
        if (!(l->path = strdup(a->path))) {
            rc = -ENOMEM;
            goto out;
        }
    } else {
        /* Not evutil_parse_sockaddr_port(): it refuses port 0. */
        struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
        if (evutil_inet_pton(AF_INET, a->host, &s4->sin_addr) == 1) {
            s4->sin_family = AF_INET;
            s4->sin_port = htons((uint16_t)a->port);
            sslen = sizeof *s4;
        } else if (evutil_inet_pton(AF_INET6, a->host, &s6->sin6_addr) == 1) {
            s6->sin6_family = AF_INET6;
            s6->sin6_port = htons((uint16_t)a->port);
            sslen = sizeof *s6;
        } else {
            rc = -EINVAL;
            goto out;
        }
    }
    errno = 0;
    l->lis = evconnlistener_new_bind(base, on_accept, l,
                                     LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE |
                                         LEV_OPT_CLOSE_ON_EXEC,
                                     1024, (struct sockaddr *)&ss, sslen);
    if (!l->lis) {
        rc = errno ? -errno : -EADDRINUSE;
        goto out;
    }
    evconnlistener_set_error_cb(l->lis, on_accept_error);
    if (l->path) {
        struct stat st;
        if (stat(l->path, &st) == 0) {
            l->dev = st.st_dev;
            l->ino = st.st_ino;
        }
    } else {
        struct sockaddr_storage bound;
        socklen_t blen = sizeof bound;
        if (getsockname(evconnlistener_get_fd(l->lis), (struct sockaddr *)&bound, &blen) == 0)
            l->port = ntohs(bound.ss_family == AF_INET
                                ? ((struct sockaddr_in *)&bound)->sin_port
                                : ((struct sockaddr_in6 *)&bound)->sin6_port);
        snprintf(l->name, sizeof l->name, "%s%s%s:%u", strchr(a->host, ':') ? "[" : "",
                 a->host, strchr(a->host, ':') ? "]" : "", l->port);
    }
out:
    if (rc < 0) {
        if (l && l->lis)
            evconnlistener_free(l->lis);
        if (l && l->retry)
            event_free(l->retry);
        if (l)
            free(l->path);
        free(l);
        if (err)
            *err = rc;
        return NULL;
    }
    return l;
}

unsigned listener_port(const listener_t *l)
{
    return l->port;
}

const char *listener_name(const listener_t *l)
{
    return l->name;
}

void listener_disable(listener_t *l)
{
    if (!l)
        return;
    l->off = 1;
    evtimer_del(l->retry);
    evconnlistener_disable(l->lis);
}

void listener_resume(listener_t *l)
{
    if (!l || !l->paused || l->off)
        return;
    l->paused = 0;
    evtimer_del(l->retry);
    evconnlistener_enable(l->lis);
}

uint64_t listener_pauses(const listener_t *l)
{
    return l->pauses;
}

void listener_destroy(listener_t **lp)
{
    listener_t *l = lp ? *lp : NULL;
    if (!l)
        return;
    evconnlistener_free(l->lis);
    event_free(l->retry);
    struct stat st;
    if (l->path && stat(l->path, &st) == 0 && st.st_dev == l->dev && st.st_ino == l->ino)
        unlink(l->path);
    free(l->path);
    free(l);
    *lp = NULL;
}
