/* test_writers.c - Check suite for storage-node/io/writers: bytes of each connection out in order through a full socket, the loop told once they are out, many connections over several writers, the socket closed by the writer only after earlier bytes, a failed write reported (-EPIPE), teardown with notes in flight, bad arguments. */
#include <check.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "storage-node/io/writers.h"
#include "tests/testlib.h"

#define NCONN 16

typedef struct {
    int sv[2];              /* sv[0]: the node's end (non-blocking), sv[1]: the client's */
    writer_conn_t *wc;
    struct evbuffer *out;
    int written;            /* on_written calls */
    size_t sent;            /* bytes handed over */
} tconn_t;

static struct event_base *base;
static writers_t *ws;

static void on_written(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    ck_assert_int_eq(what, EV_WRITE);
    tconn_t *t = arg;
    t->written++;
}

static void setup(void)
{
    signal(SIGPIPE, SIG_IGN);
    base = event_base_new();
    ck_assert_ptr_nonnull(base);
    int err = 0;
    ws = writers_new(base, 3, &err);
    ck_assert_ptr_nonnull(ws);
}

static void teardown(void)
{
    writers_destroy(&ws);
    ck_assert_ptr_null(ws);
    event_base_free(base);
}

static void tconn_open(tconn_t *t, int sndbuf)
{
    memset(t, 0, sizeof *t);
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, t->sv), 0);
    fcntl(t->sv[0], F_SETFL, O_NONBLOCK);
    if (sndbuf)
        setsockopt(t->sv[0], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
    t->out = evbuffer_new();
    t->wc = writers_open(ws, t->sv[0], on_written, t);
    ck_assert_ptr_nonnull(t->wc);
}

/* Appends n bytes of connection `id`'s pattern (byte k of the stream is
 * (id * 7 + k) % 251) and hands them over. */
static void tsend(tconn_t *t, int id, size_t n)
{
    unsigned char buf[4096];
    while (n > 0) {
        size_t k = n < sizeof buf ? n : sizeof buf;
        for (size_t i = 0; i < k; i++)
            buf[i] = (unsigned char)((id * 7 + t->sent + i) % 251);
        evbuffer_add(t->out, buf, k);
        t->sent += k;
        n -= k;
    }
    ck_assert_int_eq(writers_send(t->wc, t->out), 0);
    ck_assert_uint_eq(evbuffer_get_length(t->out), 0);
}

/* Reads exactly n bytes from the client's end and checks the pattern. */
static void trecv(tconn_t *t, int id, size_t from, size_t n)
{
    unsigned char buf[4096];
    size_t got = 0;
    while (got < n) {
        size_t k = n - got < sizeof buf ? n - got : sizeof buf;
        ssize_t r = read(t->sv[1], buf, k);
        ck_assert_int_gt(r, 0);
        for (ssize_t i = 0; i < r; i++)
            ck_assert_int_eq(buf[i], (unsigned char)((id * 7 + from + got + (size_t)i) % 251));
        got += (size_t)r;
    }
}

/* Runs the loop until t has been told `calls` times (5 s at most). */
static void wait_written(tconn_t *t, int calls)
{
    for (int i = 0; i < 5000 && t->written < calls; i++) {
        event_base_loop(base, EVLOOP_NONBLOCK);
        if (t->written < calls)
            usleep(1000);
    }
    ck_assert_int_ge(t->written, calls);
}

START_TEST(test_writers_bad_arguments)
{
    int err = 0;
    ck_assert_ptr_null(writers_new(NULL, 1, &err));
    ck_assert_int_eq(err, -EINVAL);
    ck_assert_ptr_null(writers_new(base, 0, &err));
    ck_assert_ptr_null(writers_new(base, WRITERS_MAX + 1, &err));
    writers_destroy(NULL);
    writers_t *none = NULL;
    writers_destroy(&none);
}
END_TEST

/* 4 MiB through a 4 KiB send buffer: the writer waits for writability
 * many times; the bytes come out whole and in order; the loop is told
 * once they are all out, and unsent is 0 then. */
START_TEST(test_writers_full_socket_in_order)
{
    tconn_t t;
    tconn_open(&t, 4096);
    size_t total = 4u << 20;
    for (int i = 0; i < 64; i++)
        tsend(&t, 1, total / 64);
    trecv(&t, 1, 0, total);
    for (int i = 0; i < 5000 && writers_unsent(t.wc) > 0; i++)
        usleep(1000);
    ck_assert_uint_eq(writers_unsent(t.wc), 0);
    wait_written(&t, 1);
    writers_stats_t st;
    writers_stats(ws, &st);
    ck_assert_uint_eq(st.bytes, total);
    ck_assert_uint_le(st.kicks, 64);
    writers_close(t.wc);
    char c;
    for (int i = 0; i < 5000; i++) { /* EOF once the writer closed the socket */
        ssize_t r = read(t.sv[1], &c, 1);
        if (r == 0)
            break;
        ck_assert_int_lt(r, 0);
    }
    ck_assert_int_eq(read(t.sv[1], &c, 1), 0);
    close(t.sv[1]);
    evbuffer_free(t.out);
}
END_TEST

/* Many connections over 3 writers, interleaved sends: each stream whole
 * and in order. */
START_TEST(test_writers_many_connections)
{
    static tconn_t t[NCONN];
    for (int c = 0; c < NCONN; c++)
        tconn_open(&t[c], 0);
    for (int round = 0; round < 50; round++)
        for (int c = 0; c < NCONN; c++)
            tsend(&t[c], c, 100 + (size_t)(round * 13 + c) % 900);
    for (int c = 0; c < NCONN; c++)
        trecv(&t[c], c, 0, t[c].sent);
    for (int c = 0; c < NCONN; c++) {
        wait_written(&t[c], 1);
        writers_close(t[c].wc);
        close(t[c].sv[1]);
        evbuffer_free(t[c].out);
    }
}
END_TEST

/* Closed once its bytes are out (the front's close once written): the
 * client reads them all, then EOF; closed with bytes still queued (a
 * broken connection): they are dropped, as conns_close() drops c->out,
 * and the client sees EOF after at most what was written. */
START_TEST(test_writers_close_after_writes)
{
    tconn_t t;
    tconn_open(&t, 0);
    tsend(&t, 3, 10000);
    wait_written(&t, 1);
    ck_assert_uint_eq(writers_unsent(t.wc), 0);
    writers_close(t.wc);
    trecv(&t, 3, 0, 10000);
    char c;
    ck_assert_int_eq(read(t.sv[1], &c, 1), 0);
    close(t.sv[1]);
    evbuffer_free(t.out);

    tconn_open(&t, 4096);
    tsend(&t, 3, 1u << 20);
    writers_close(t.wc);
    size_t got = 0;
    for (;;) {
        char buf[4096];
        ssize_t r = read(t.sv[1], buf, sizeof buf);
        ck_assert_int_ge(r, 0);
        if (r == 0)
            break;
        got += (size_t)r;
    }
    ck_assert_uint_lt(got, 1u << 20);
    close(t.sv[1]);
    evbuffer_free(t.out);
}
END_TEST

/* The client gone: the writer's write fails, the loop is told, and
 * writers_send() says -EPIPE from then on. */
START_TEST(test_writers_failed_write)
{
    tconn_t t;
    tconn_open(&t, 0);
    close(t.sv[1]);
    tsend(&t, 4, 100);
    wait_written(&t, 1);
    evbuffer_add(t.out, "x", 1);
    ck_assert_int_eq(writers_send(t.wc, t.out), -EPIPE);
    writers_close(t.wc);
    evbuffer_free(t.out);
}
END_TEST

/* Closed with a note still in the loop's FIFO, then torn down: nothing
 * leaks or is freed twice (ASan/TSan builds), on_written not called after
 * the close. */
START_TEST(test_writers_close_with_note_pending)
{
    tconn_t t;
    tconn_open(&t, 0);
    tsend(&t, 5, 10);
    trecv(&t, 5, 0, 10);
    for (int i = 0; i < 5000 && writers_unsent(t.wc) > 0; i++)
        usleep(1000);
    usleep(20000); /* the note is pushed, the loop has not run */
    writers_close(t.wc);
    event_base_loop(base, EVLOOP_NONBLOCK);
    ck_assert_int_eq(t.written, 0);
    close(t.sv[1]);
    evbuffer_free(t.out);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {test_writers_bad_arguments, test_writers_full_socket_in_order,
                                  test_writers_many_connections, test_writers_close_after_writes,
                                  test_writers_failed_write, test_writers_close_with_note_pending};
    const testlib_case_t c = {.name = "writers", .setup = setup, .teardown = teardown,
                              .timeout = 30};
    return testlib_run_case(&c, tests, sizeof tests / sizeof tests[0]);
}
