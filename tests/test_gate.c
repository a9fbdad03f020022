/* test_gate.c - Check suite for storage-node/io/gate: the outstanding window (fixed and adaptive, its stats lines), busy time, dispatch at once or at the end of the pass, buckets and tokens, the graceful stop, and connections (admit, refuse, write). */
#include <check.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "storage-node/io/gate.h"
#include "tests/testlib.h"

/* A fake front: counts the hook calls. */
typedef struct {
    gate_t *g;
    int dispatches, drained, stops, idle, accepted, refused;
    evutil_socket_t last_fd;
    gate_conn_t *conns; /* non-NULL: f_accept() opens conns[nopen++] */
    int nopen;
} fake_t;

static void drain_read(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    (void)arg;
    char buf[64];
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    (void)n;
}

static void f_dispatch(void *arg)
{
    ((fake_t *)arg)->dispatches++;
}

static void f_drain(sched_item_t *it, void *arg)
{
    (void)it;
    ((fake_t *)arg)->drained++;
}

static void f_stop(void *arg)
{
    ((fake_t *)arg)->stops++;
}

static int f_idle(void *arg)
{
    return ((fake_t *)arg)->idle;
}

static void f_accept(void *arg, evutil_socket_t fd, const struct sockaddr *sa, int salen)
{
    (void)sa;
    (void)salen;
    fake_t *f = arg;
    f->accepted++;
    f->last_fd = fd;
    if (f->conns)
        ck_assert_int_eq(gate_conn_open(f->g, &f->conns[f->nopen++], fd, drain_read,
                                        drain_read, NULL), 0);
}

static void f_refuse(void *arg, evutil_socket_t fd)
{
    (void)fd;
    ((fake_t *)arg)->refused++;
}

static const gate_hooks_t hooks = {f_dispatch, f_drain, f_stop, f_idle, f_accept, f_refuse};

static struct event_base *base;
static sched_t *s;
static fake_t fk;

static gate_t *make(int outstanding, int defer, int max_buckets, int max_conns)
{
    gate_config_t gc = {"test: ", outstanding, max_conns, max_buckets, defer};
    int err = 0;
    gate_t *g = gate_new(base, s, &gc, &hooks, &fk, &err);
    ck_assert_msg(g != NULL, "gate_new: %s", strerror(-err));
    fk.g = g;
    return g;
}

/* Zeroes it[0..n-1] and queues them all on bucket 0. */
static void enqueue_all(sched_item_t *it, int n)
{
    memset(it, 0, (size_t)n * sizeof *it);
    for (int i = 0; i < n; i++)
        ck_assert_int_eq(sched_enqueue(s, 0, &it[i]), 0);
}

static void setup(void)
{
    bqos_log_init("test_gate", BQOS_LOG_ERROR);
    memset(&fk, 0, sizeof fk);
    base = event_base_new();
    s = sched_new(SCHED_POLICY_RR, 0);
    ck_assert_ptr_nonnull(base);
    ck_assert_ptr_nonnull(s);
    ck_assert_int_eq(sched_add_bucket(s, "default", 1), 0);
}

static void teardown(void)
{
    gate_destroy(&fk.g);
    sched_drain(s, NULL, NULL);
    sched_destroy(&s);
    event_base_free(base);
}

START_TEST(test_gate_bad_settings)
{
    gate_config_t gc = {"", 0, 1, 0, 0};
    int err = 0;
    ck_assert_ptr_null(gate_new(base, s, &gc, &hooks, &fk, &err));
    ck_assert_int_eq(err, -EINVAL);
    gc.outstanding = 1;
    gate_hooks_t h = hooks;
    h.dispatch = NULL;
    ck_assert_ptr_null(gate_new(base, s, &gc, &h, &fk, &err));
    ck_assert_int_eq(err, -EINVAL);
}
END_TEST

/* gate_take() stops at `outstanding`; each way out of the window frees
 * one place; completions are counted, untaken IOs are not. */
START_TEST(test_gate_window)
{
    gate_t *g = make(2, 0, 0, 10);
    sched_item_t it[5];
    enqueue_all(it, 5);
    ck_assert_ptr_eq(gate_take(g), &it[0]);
    ck_assert_ptr_eq(gate_take(g), &it[1]);
    ck_assert_ptr_null(gate_take(g));
    ck_assert_int_eq(gate_inflight(g), 2);
    gate_done(g);
    ck_assert_ptr_eq(gate_take(g), &it[2]);
    ck_assert_ptr_null(gate_take(g));
    gate_untake(g);
    ck_assert_ptr_eq(gate_take(g), &it[3]);
    gate_done_inline(g);
    ck_assert_ptr_eq(gate_take(g), &it[4]);
    ck_assert_ptr_null(gate_take(g)); /* window full: nothing taken */
    gate_done(g);
    gate_done(g);
    ck_assert_int_eq(gate_inflight(g), 0);
    ck_assert_ptr_null(gate_take(g)); /* queue empty */
    sched_node_stats_t ns;
    sched_node_stats(s, &ns);
    ck_assert_uint_eq(ns.completions, 4); /* 3 done + 1 inline; not the untaken one */
    ck_assert_uint_eq(ns.dispatched, 5);
}
END_TEST

/* gate_set_window() makes the window adaptive from the current one
 * (clamped), keeps the IOs already out counted, refuses bad settings; the
 * stats hook prints the window's lines, then gate_set_status()'s. */
static void extra_status(void *arg, FILE *fp)
{
    (void)arg;
    fputs("STAT extra 1\r\n", fp);
}

START_TEST(test_gate_adaptive_window)
{
    gate_t *g = make(5, 0, 0, 10);
    sched_item_t it[40];
    enqueue_all(it, 40);
    ck_assert_ptr_nonnull(gate_take(g));
    window_config_t wc;
    window_config_defaults(&wc);
    wc.floor = 2;
    wc.ceiling = 3;
    wc.gain = 0; /* refused */
    ck_assert_int_eq(gate_set_window(g, &wc), -EINVAL);
    wc.gain = 0.5;
    wc.epoch = 1e-9;
    wc.min_samples = 1;
    ck_assert_int_eq(gate_set_window(g, &wc), 0);
    window_stats_t ws;
    gate_window_stats(g, &ws);
    ck_assert_int_eq(ws.window, 3); /* 5 clamped to the ceiling */
    ck_assert_int_eq(gate_inflight(g), 1);
    int n = 1, most = 0;
    while (gate_take(g))
        n++;
    ck_assert_int_eq(n, 3);
    for (int i = 0; i < 37; i++) { /* complete one, take one: every epoch ends */
        gate_done(g);
        ck_assert_ptr_nonnull(gate_take(g));
        gate_window_stats(g, &ws);
        most = ws.window > most ? ws.window : most;
        ck_assert_int_ge(ws.window, 2);
    }
    ck_assert_int_le(most, 3);
    ck_assert_uint_gt(ws.epochs, 10);
    gate_set_status(g, extra_status, NULL);
    gate_status_fn fn;
    void *arg;
    gate_status_hook(g, &fn, &arg);
    char *buf = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&buf, &len);
    fn(arg, fp);
    fclose(fp);
    ck_assert_msg(strncmp(buf, "STAT bqos_window ", 17) == 0, "%s", buf);
    ck_assert_ptr_nonnull(strstr(buf, "STAT bqos_window_latency_us "));
    ck_assert_ptr_nonnull(strstr(buf, "STAT bqos_window_throughput "));
    ck_assert_ptr_nonnull(strstr(buf, "\r\nSTAT extra 1\r\n"));
    free(buf);
    while (gate_inflight(g) > 0)
        gate_done(g);
}
END_TEST

/* Busy time is the time with at least one IO outstanding, reported with
 * the completion that ends it; an inline completion adds none. */
START_TEST(test_gate_busy_time)
{
    gate_t *g = make(4, 0, 0, 10);
    sched_item_t a = {0}, b = {0};
    sched_enqueue(s, 0, &a);
    sched_enqueue(s, 0, &b);
    ck_assert_ptr_nonnull(gate_take(g));
    struct timespec ts = {0, 30 * 1000 * 1000};
    nanosleep(&ts, NULL);
    gate_done(g);
    sched_node_stats_t ns;
    sched_node_stats(s, &ns);
    ck_assert_msg(ns.busy_seconds >= 0.025 && ns.busy_seconds < 1.0, "busy %f", ns.busy_seconds);
    double before = ns.busy_seconds;
    nanosleep(&ts, NULL); /* idle: not busy */
    ck_assert_ptr_nonnull(gate_take(g));
    gate_done_inline(g);
    sched_node_stats(s, &ns);
    ck_assert(ns.busy_seconds == before);
}
END_TEST

/* Without defer, gate_kick() dispatches at once; with defer, once at the
 * end of the pass however often it is asked, and not at all while
 * stopping. */
START_TEST(test_gate_dispatch_points)
{
    gate_t *g = make(1, 0, 0, 10);
    gate_kick(g);
    ck_assert_int_eq(fk.dispatches, 1);
    gate_destroy(&fk.g);
    g = make(1, 1, 0, 10);
    fk.dispatches = 0;
    gate_kick(g);
    gate_kick(g);
    gate_request_dispatch(g, 0);
    ck_assert_int_eq(fk.dispatches, 0);
    event_base_loop(base, EVLOOP_NONBLOCK);
    ck_assert_int_eq(fk.dispatches, 1);
    gate_request_dispatch(g, 1); /* next pass: a zero timer */
    event_base_loop(base, EVLOOP_ONCE);
    ck_assert_int_eq(fk.dispatches, 2);
    fk.idle = 0;
    gate_shutdown(g);
    gate_kick(g);
    gate_request_dispatch(g, 0);
    event_base_loop(base, EVLOOP_NONBLOCK);
    ck_assert_int_eq(fk.dispatches, 2);
}
END_TEST

START_TEST(test_gate_buckets_and_tokens)
{
    gate_t *g = make(1, 0, 3, 10);
    ck_assert_int_eq(gate_add_bucket(g, "red", 2), 1);
    ck_assert_int_eq(gate_add_bucket(g, "red", 5), 1); /* found: weight set */
    sched_bucket_stats_t bs;
    sched_bucket_stats(s, 1, &bs);
    ck_assert_uint_eq(bs.weight, 5);
    ck_assert_int_eq(gate_add_bucket(g, "bad name", 1), -EINVAL);
    ck_assert_int_eq(gate_add_bucket(g, "blue", 1), 2);
    ck_assert_int_eq(gate_add_bucket(g, "green", 1), -ENOMEM); /* max_buckets 3 */
    ck_assert_int_eq(gate_set_tokens(g, "red", 7, 9), 0);
    ck_assert_int_eq(fk.dispatches, 1); /* the new tokens are dispatched */
    sched_bucket_stats(s, 1, &bs);
    ck_assert_int_eq(bs.r_tokens, 7);
    ck_assert_int_eq(bs.l_tokens, 9);
    ck_assert_int_eq(gate_set_tokens(g, "green", 1, 1), -ENOMEM);
    ck_assert_int_eq(gate_set_tokens(g, "red", -1, 1), -EINVAL);
    ck_assert_int_eq(fk.dispatches, 1);
    gate_destroy(&fk.g);
    g = make(1, 0, 0, 10); /* no cap: an unknown bucket is added, weight 1 */
    ck_assert_int_eq(gate_set_tokens(g, "green", 1, SCHED_UNLIMITED), 0);
    ck_assert_int_eq(sched_find_bucket(s, "green", 5), 3);
}
END_TEST

static void on_loop_timeout(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    *(int *)arg = 1;
    event_base_loopbreak(base);
}

/* The stop drains the queue through the front, calls its stop hook, and
 * ends the loop only once nothing is at the backend and the front is idle. */
START_TEST(test_gate_graceful_stop)
{
    gate_t *g = make(1, 1, 0, 10);
    sched_item_t a = {0}, b = {0}, c = {0};
    sched_enqueue(s, 0, &a);
    sched_enqueue(s, 0, &b);
    sched_enqueue(s, 0, &c);
    ck_assert_ptr_nonnull(gate_take(g));
    gate_shutdown(g);
    gate_shutdown(g); /* idempotent */
    ck_assert(gate_stopping(g));
    ck_assert_int_eq(fk.drained, 2);
    ck_assert_int_eq(fk.stops, 1);
    ck_assert(!event_base_got_exit(base));
    gate_done(g); /* the last IO: but the front is not idle yet */
    gate_check_stopped(g);
    ck_assert(!event_base_got_exit(base));
    fk.idle = 1;
    gate_check_stopped(g);
    int timed_out = 0;
    struct timeval tv = {2, 0};
    event_base_once(base, -1, EV_TIMEOUT, on_loop_timeout, &timed_out, &tv);
    event_base_loop(base, 0);
    ck_assert(event_base_got_exit(base));
    ck_assert_int_eq(timed_out, 0);
}
END_TEST

/* A client connected to 127.0.0.1:port from 127.0.0.`from` (0: any). */
static int connect_from(unsigned port, int from)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(fd, 0);
    if (from) {
        struct sockaddr_in b = {.sin_family = AF_INET,
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK - 1 + (unsigned)from)};
        ck_assert_int_eq(bind(fd, (struct sockaddr *)&b, sizeof b), 0);
    }
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    return fd;
}

static int connect_to(unsigned port)
{
    return connect_from(port, 0);
}



static void nothing(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
}

/* Makes g listen on a free loopback port. */
static void listen_any(gate_t *g)
{
    listener_addr_t la;
    ck_assert_int_eq(listener_parse("127.0.0.1:0", &la), 0);
    ck_assert_int_eq(gate_listen(g, &la), 0);
}

/* Runs the loop for `sec` seconds (or until *until >= want, if until is
 * set); returns how many loop iterations ran. */
static long run_for(double sec, const int *until, int want)
{
    long n = 0;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    struct event *wake = event_new(base, -1, EV_PERSIST, nothing, NULL);
    struct timeval tv = {0, 10000};
    event_add(wake, &tv); /* the loop never blocks longer than 10 ms */
    for (;;) {
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9 >= sec ||
            (until && *until >= want))
            break;
        event_base_loop(base, EVLOOP_ONCE);
        n++;
    }
    event_free(wake);
    return n;
}

/* Connections below max_conns reach the front, the next one is refused;
 * gate_conn_write() sends the output buffer; closing unlists. */
START_TEST(test_gate_connections)
{
    gate_t *g = make(1, 0, 0, 1);
    listen_any(g);
    ck_assert_uint_gt(gate_port(g), 0);
    ck_assert(strncmp(gate_address(g), "127.0.0.1:", 10) == 0);
    int c1 = connect_to(gate_port(g));
    while (fk.accepted == 0)
        event_base_loop(base, EVLOOP_ONCE);
    gate_conn_t gc = {0};
    ck_assert_int_eq(gate_conn_open(g, &gc, fk.last_fd, nothing, nothing, NULL), 0);
    ck_assert_int_eq(gate_nconns(g), 1);
    ck_assert_ptr_eq(gate_conns(g), &gc);
    int c2 = connect_to(gate_port(g));
    while (fk.refused == 0)
        event_base_loop(base, EVLOOP_ONCE);
    char buf[8];
    ck_assert_int_eq(recv(c2, buf, sizeof buf, 0), 0); /* closed by the gate */
    evbuffer_add(gc.out, "hello", 5);
    ck_assert_int_eq(gate_conn_write(&gc), 0);
    ck_assert_int_eq(gc.writing, 0);
    ck_assert_int_eq(recv(c1, buf, sizeof buf, 0), 5);
    ck_assert(memcmp(buf, "hello", 5) == 0);
    gate_conn_close(g, &gc);
    ck_assert_int_eq(gate_nconns(g), 0);
    ck_assert_uint_eq(gate_total_conns(g), 1);
    ck_assert_int_eq(recv(c1, buf, sizeof buf, 0), 0);
    close(c1);
    close(c2);
}
END_TEST

/* Defect 7: out of file descriptors, accepting pauses instead of spinning
 * (few loop iterations, few accept errors in 200 ms) and resumes once a
 * connection closes. */
START_TEST(test_gate_emfile_no_spin)
{
    gate_t *g = make(1, 0, 0, 100);
    listen_any(g);
    gate_conn_t gc[2];
    memset(gc, 0, sizeof gc);
    fk.conns = gc;
    int cl[3];
    for (int i = 0; i < 3; i++)
        cl[i] = connect_to(gate_port(g));
    int m = dup(0); /* the lowest free descriptor: the only one left below */
    ck_assert_int_ge(m, 0);
    close(m);
    struct rlimit old, low;
    ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &old), 0);
    low = old;
    low.rlim_cur = (rlim_t)m + 1;
    ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &low), 0);
    run_for(2.0, &fk.accepted, 1);
    ck_assert_int_eq(fk.accepted, 1);
    long iters = run_for(0.2, NULL, 0);
    gate_conn_stats_t cs;
    gate_conn_stats(g, &cs);
    ck_assert_int_eq(fk.accepted, 1);
    ck_assert_msg(iters < 100, "loop spun: %ld iterations in 200 ms", iters);
    ck_assert_msg(cs.accept_pauses >= 1 && cs.accept_pauses <= 5, "%llu accept pauses",
                  (unsigned long long)cs.accept_pauses);
    gate_conn_close(g, &gc[0]); /* a descriptor frees: accepting resumes */
    run_for(2.0, &fk.accepted, 2);
    ck_assert_int_eq(fk.accepted, 2);
    ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &old), 0);
    gate_conn_close(g, &gc[1]);
    for (int i = 0; i < 3; i++)
        close(cl[i]);
}
END_TEST

/* Defect 9: --max-conns-per-ip refuses an address's connection beyond the
 * cap, not another address's. */
START_TEST(test_gate_per_ip_cap)
{
    gate_t *g = make(1, 0, 0, 10);
    ck_assert_int_eq(gate_set_conn_limits(g, 0, 1), 0);
    listen_any(g);
    gate_conn_t gc[2];
    memset(gc, 0, sizeof gc);
    fk.conns = gc;
    int c1 = connect_from(gate_port(g), 1);
    run_for(2.0, &fk.accepted, 1);
    int c2 = connect_from(gate_port(g), 1);
    run_for(2.0, &fk.refused, 1);
    int c3 = connect_from(gate_port(g), 2);
    run_for(2.0, &fk.accepted, 2);
    ck_assert_int_eq(fk.accepted, 2);
    ck_assert_int_eq(fk.refused, 1);
    gate_conn_stats_t cs;
    gate_conn_stats(g, &cs);
    ck_assert_uint_eq(cs.refused_per_ip, 1);
    char b;
    ck_assert_int_eq(recv(c2, &b, 1, 0), 0); /* closed */
    gate_conn_close(g, &gc[0]);
    gate_conn_close(g, &gc[1]);
    close(c1);
    close(c2);
    close(c3);
}
END_TEST

/* Defect 9: --idle-timeout shuts a connection that read nothing for the
 * timeout, never one that holds a request, and reads keep it open. */
START_TEST(test_gate_idle_timeout)
{
    gate_t *g = make(1, 0, 0, 10);
    ck_assert_int_eq(gate_set_conn_limits(g, -1, 0), -EINVAL);
    ck_assert_int_eq(gate_set_conn_limits(g, 0.2, 0), 0);
    listen_any(g);
    gate_conn_t gc[1];
    memset(gc, 0, sizeof gc);
    fk.conns = gc;
    int c = connect_to(gate_port(g));
    run_for(2.0, &fk.accepted, 1);
    ck_assert_int_eq(fk.accepted, 1);
    for (int i = 0; i < 12; i++) { /* 0.6 s of a byte every 50 ms */
        ck_assert_int_eq(send(c, "x", 1, 0), 1);
        run_for(0.05, NULL, 0);
    }
    gate_conn_stats_t cs;
    gate_conn_stats(g, &cs);
    ck_assert_uint_eq(cs.idle_closed, 0);
    gc[0].held = 1; /* a request queued: never idle */
    run_for(0.6, NULL, 0);
    gate_conn_stats(g, &cs);
    ck_assert_uint_eq(cs.idle_closed, 0);
    gc[0].held = 0;
    for (int i = 0; i < 200 && cs.idle_closed == 0; i++) {
        run_for(0.01, NULL, 0);
        gate_conn_stats(g, &cs);
    }
    ck_assert_uint_eq(cs.idle_closed, 1);
    char b;
    ck_assert_int_eq(recv(c, &b, 1, 0), 0); /* shut down: EOF for the client */
    gate_conn_close(g, &gc[0]);
    close(c);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {test_gate_bad_settings,    test_gate_window,
                                  test_gate_busy_time,       test_gate_dispatch_points,
                                  test_gate_buckets_and_tokens, test_gate_graceful_stop,
                                  test_gate_connections, test_gate_adaptive_window,
                                  test_gate_emfile_no_spin, test_gate_per_ip_cap,
                                  test_gate_idle_timeout};
    const testlib_case_t c = {.name = "gate", .setup = setup, .teardown = teardown};
    return testlib_run_case(&c, tests, sizeof tests / sizeof tests[0]);
}
