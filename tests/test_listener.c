/* test_listener.c - Check suite for storage-node/io/listener: address parsing, TCP and Unix-socket listeners, stale socket files. */
#include <check.h>
#include <errno.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "storage-node/io/listener.h"
#include "tests/testlib.h"

typedef struct {
    int accepted;
    int family;
    struct event_base *base;
} seen_t;

static void on_conn(evutil_socket_t fd, const struct sockaddr *peer, int peerlen, void *arg)
{
    (void)peerlen;
    seen_t *s = arg;
    s->accepted++;
    s->family = peer->sa_family;
    close(fd);
    event_base_loopbreak(s->base);
}

/* Connects to *a (TCP port `port` if a is TCP) and runs the loop until the
 * listener has accepted or 2 s have passed. */
static int connect_and_accept(struct event_base *base, const listener_addr_t *a, unsigned port)
{
    struct sockaddr_storage ss;
    socklen_t len;
    memset(&ss, 0, sizeof ss);
    int fd;
    if (a->path[0]) {
        struct sockaddr_un *sun = (struct sockaddr_un *)&ss;
        sun->sun_family = AF_UNIX;
        strcpy(sun->sun_path, a->path);
        len = sizeof *sun;
        fd = socket(AF_UNIX, SOCK_STREAM, 0);
    } else {
        struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
        sin->sin_family = AF_INET;
        sin->sin_port = htons((uint16_t)port);
        sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        len = sizeof *sin;
        fd = socket(AF_INET, SOCK_STREAM, 0);
    }
    ck_assert_int_ge(fd, 0);
    int rc = connect(fd, (struct sockaddr *)&ss, len);
    struct timeval tv = {2, 0};
    event_base_loopexit(base, &tv);
    event_base_dispatch(base);
    close(fd);
    return rc;
}

START_TEST(test_listener_parse)
{
    listener_addr_t a;
    ck_assert_int_eq(listener_parse("127.0.0.1:11311", &a), 0);
    ck_assert_str_eq(a.host, "127.0.0.1");
    ck_assert_uint_eq(a.port, 11311);
    ck_assert_str_eq(a.path, "");
    ck_assert_int_eq(listener_parse("[::1]:0", &a), 0);
    ck_assert_str_eq(a.host, "::1");
    ck_assert_uint_eq(a.port, 0);
    ck_assert_int_eq(listener_parse("unix:/run/bqos/nbd.sock", &a), 0);
    ck_assert_str_eq(a.path, "/run/bqos/nbd.sock");
    ck_assert_str_eq(a.host, "");

    static const char *bad[] = {"", "127.0.0.1", "127.0.0.1:", "127.0.0.1:65536",
                                "127.0.0.1:-1", "127.0.0.1:12x", "localhost:11311",
                                ":11311", "unix:", "[::1]", NULL};
    for (int i = 0; bad[i]; i++)
        ck_assert_msg(listener_parse(bad[i], &a) == -EINVAL, "'%s' accepted", bad[i]);
    ck_assert_int_eq(listener_parse(NULL, &a), -EINVAL);
    char longp[200] = "unix:/";
    memset(longp + 6, 'x', 150);
    longp[156] = '\0';
    ck_assert_int_eq(listener_parse(longp, &a), -EINVAL);
}
END_TEST

START_TEST(test_listener_tcp)
{
    seen_t s = {0};
    s.base = event_base_new();
    listener_addr_t a;
    ck_assert_int_eq(listener_parse("127.0.0.1:0", &a), 0);
    int err = 0;
    listener_t *l = listener_new(s.base, &a, on_conn, &s, &err);
    ck_assert_msg(l != NULL, "listener_new: %s", strerror(-err));
    ck_assert_uint_gt(listener_port(l), 0);
    char want[64];
    snprintf(want, sizeof want, "127.0.0.1:%u", listener_port(l));
    ck_assert_str_eq(listener_name(l), want);
    ck_assert_int_eq(connect_and_accept(s.base, &a, listener_port(l)), 0);
    ck_assert_int_eq(s.accepted, 1);
    ck_assert_int_eq(s.family, AF_INET);

    /* The same port again is taken. */
    a.port = listener_port(l);
    err = 0;
    ck_assert_ptr_null(listener_new(s.base, &a, on_conn, &s, &err));
    ck_assert_int_eq(err, -EADDRINUSE);
    listener_destroy(&l);
    ck_assert_ptr_null(l);
    listener_destroy(&l); /* NULL-safe */
    event_base_free(s.base);
}
END_TEST

START_TEST(test_listener_unix)
{
    char dir[] = "/tmp/test_listener.XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char spec[160], path[128];
    snprintf(path, sizeof path, "%s/s.sock", dir);
    snprintf(spec, sizeof spec, "unix:%s", path);
    seen_t s = {0};
    s.base = event_base_new();
    listener_addr_t a;
    ck_assert_int_eq(listener_parse(spec, &a), 0);
    int err = 0;
    listener_t *l = listener_new(s.base, &a, on_conn, &s, &err);
    ck_assert_msg(l != NULL, "listener_new: %s", strerror(-err));
    ck_assert_uint_eq(listener_port(l), 0);
    ck_assert_str_eq(listener_name(l), spec);
    ck_assert_int_eq(connect_and_accept(s.base, &a, 0), 0);
    ck_assert_int_eq(s.accepted, 1);
    ck_assert_int_eq(s.family, AF_UNIX);

    /* A live socket is not taken over. */
    err = 0;
    ck_assert_ptr_null(listener_new(s.base, &a, on_conn, &s, &err));
    ck_assert_int_eq(err, -EADDRINUSE);
    listener_destroy(&l);
    struct stat st;
    ck_assert_int_eq(stat(path, &st), -1); /* removed on destroy */

    /* A stale socket file (its listener gone without removing it) is
     * replaced. */
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    strcpy(sun.sun_path, path);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&sun, sizeof sun), 0);
    close(fd);
    ck_assert_int_eq(stat(path, &st), 0);
    l = listener_new(s.base, &a, on_conn, &s, &err);
    ck_assert_msg(l != NULL, "stale socket not replaced: %s", strerror(-err));
    ck_assert_int_eq(connect_and_accept(s.base, &a, 0), 0);
    ck_assert_int_eq(s.accepted, 2);

    /* A file the listener did not make is left alone on destroy. */
    ck_assert_int_eq(unlink(path), 0);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    listener_destroy(&l);
    ck_assert_int_eq(stat(path, &st), 0);

    /* ... and refused as a place to listen. */
    err = 0;
    ck_assert_ptr_null(listener_new(s.base, &a, on_conn, &s, &err));
    ck_assert_int_eq(err, -EEXIST);
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert(S_ISREG(st.st_mode));

    unlink(path);
    rmdir(dir);
    event_base_free(s.base);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {test_listener_parse, test_listener_tcp, test_listener_unix};
    return testlib_run_tests("listener", tests, sizeof tests / sizeof tests[0]);
}
