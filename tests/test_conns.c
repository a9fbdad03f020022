/* test_conns.c - Check suite for storage-node/io/conns: the listener and the registry (admit, refuse beyond max_conns, write, close), accept pauses out of descriptors, the per-address cap, the idle timeout (and the TLS handshake it bounds), each connection's identity, eviction at the limit and the address table, the stop. */
#include <check.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/mono.h"
#include "storage-node/io/conns.h"
#include "storage-node/io/sendbatch.h"
#include "tests/testlib.h"

/* A fake front: counts the hook calls. */
typedef struct {
    conns_t *cn;
    int accepted, refused;
    evutil_socket_t last_fd;
    conns_conn_t *conns; /* non-NULL: f_accept() opens conns[nopen++] */
    int nopen;
    event_callback_fn on_read; /* conns' read callback; NULL: drain_read */
    int evicted, decline;      /* f_evict(): calls; nonzero: it declines */
} fake_t;

static void drain_read(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    (void)arg;
    char buf[64];
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    (void)n;
}

static void f_accept(void *arg, evutil_socket_t fd, const struct sockaddr *sa, int salen)
{
    (void)sa;
    (void)salen;
    fake_t *f = arg;
    f->accepted++;
    f->last_fd = fd;
    if (f->conns)
        ck_assert_int_eq(conns_open(f->cn, &f->conns[f->nopen++], fd,
                                    f->on_read ? f->on_read : drain_read, drain_read, NULL), 0);
}

static void f_refuse(void *arg, evutil_socket_t fd)
{
    (void)fd;
    ((fake_t *)arg)->refused++;
}

/* The front closes an idle connection at the limit (unless told to
 * decline); conns_close() leaves c->fd -1, the test's sign of "evicted". */
static int f_evict(void *arg, conns_conn_t *c)
{
    fake_t *f = arg;
    f->evicted++;
    if (f->decline)
        return 0;
    conns_close(f->cn, c);
    return 1;
}

static const conns_hooks_t hooks = {f_accept, f_refuse, NULL};
static const conns_hooks_t evict_hooks = {f_accept, f_refuse, f_evict};

static struct event_base *base;
static fake_t fk;

/* A registry of at most max_conns connections (with hooks h). */
static conns_t *make_with(int max_conns, const conns_hooks_t *h)
{
    conns_config_t cc = {"test: ", max_conns};
    int err = 0;
    conns_t *cn = conns_new(base, &cc, h, &fk, &err);
    ck_assert_msg(cn != NULL, "conns_new: %s", strerror(-err));
    fk.cn = cn;
    return cn;
}

static conns_t *make(int max_conns)
{
    return make_with(max_conns, &hooks);
}

static void setup(void)
{
    bqos_log_init("test_conns", BQOS_LOG_ERROR);
    memset(&fk, 0, sizeof fk);
    base = event_base_new();
    ck_assert_ptr_nonnull(base);
}

static void teardown(void)
{
    conns_destroy(&fk.cn);
    event_base_free(base);
}

START_TEST(test_conns_bad_settings)
{
    conns_config_t cc = {"", 0};
    int err = 0;
    ck_assert_ptr_null(conns_new(base, &cc, &hooks, &fk, &err));
    ck_assert_int_eq(err, -EINVAL);
    cc.max_conns = 1;
    conns_hooks_t h = {NULL, f_refuse, NULL};
    err = 0;
    ck_assert_ptr_null(conns_new(base, &cc, &h, &fk, &err));
    ck_assert_int_eq(err, -EINVAL);
    conns_t *cn = make(1);
    ck_assert_uint_eq(conns_port(cn), 0); /* not listening yet */
    ck_assert_str_eq(conns_address(cn), "");
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
static void listen_any(conns_t *cn)
{
    listener_addr_t la;
    ck_assert_int_eq(listener_parse("127.0.0.1:0", &la), 0);
    ck_assert_int_eq(conns_listen(cn, &la), 0);
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

/* A listening registry of at most max_conns connections (hooks h) whose
 * front keeps its connections in gc (size bytes, zeroed here). */
static conns_t *rig(int max_conns, const conns_hooks_t *h, conns_conn_t *gc, size_t size)
{
    conns_t *cn = make_with(max_conns, h);
    listen_any(cn);
    memset(gc, 0, size);
    fk.conns = gc;
    return cn;
}

/* Connects from 127.0.0.`from` and runs the loop until *count (fk.accepted
 * or fk.refused) is want, which it must reach within 2 s.  Returns the
 * client socket. */
static int connect_until(conns_t *cn, int from, const int *count, int want)
{
    int c = connect_from(conns_port(cn), from);
    run_for(2.0, count, want);
    ck_assert_int_eq(*count, want);
    return c;
}

/* Connections below max_conns reach the front, the next one is refused;
 * conns_write() sends the output buffer; closing unlists. */
START_TEST(test_conns_connections)
{
    conns_t *cn = make(1);
    listen_any(cn);
    ck_assert_uint_gt(conns_port(cn), 0);
    ck_assert(strncmp(conns_address(cn), "127.0.0.1:", 10) == 0);
    int c1 = connect_to(conns_port(cn));
    while (fk.accepted == 0)
        event_base_loop(base, EVLOOP_ONCE);
    conns_conn_t gc = {0};
    ck_assert_int_eq(conns_open(cn, &gc, fk.last_fd, nothing, nothing, NULL), 0);
    ck_assert_int_eq(conns_count(cn), 1);
    ck_assert_ptr_eq(conns_first(cn), &gc);
    int c2 = connect_to(conns_port(cn));
    while (fk.refused == 0)
        event_base_loop(base, EVLOOP_ONCE);
    char buf[8];
    ck_assert_int_eq(recv(c2, buf, sizeof buf, 0), 0); /* closed by the registry */
    evbuffer_add(gc.out, "hello", 5);
    ck_assert_int_eq(conns_write(&gc), 0);
    ck_assert_int_eq(gc.writing, 0);
    ck_assert_int_eq(recv(c1, buf, sizeof buf, 0), 5);
    ck_assert(memcmp(buf, "hello", 5) == 0);
    conns_close(cn, &gc);
    ck_assert_int_eq(conns_count(cn), 0);
    conns_stats_t cs;
    conns_stats(cn, &cs);
    ck_assert_int_eq(cs.open, 0);
    ck_assert_uint_eq(cs.total, 1);
    ck_assert_int_eq(recv(c1, buf, sizeof buf, 0), 0);
    close(c1);
    close(c2);
}
END_TEST

static int wrote[4]; /* on_write calls per connection (batched test) */

static void count_write(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    ck_assert_int_eq(what, EV_WRITE);
    (*(int *)arg)++;
}

/* conns_read_batched(): what the batch's callbacks see. */
typedef struct {
    conns_conn_t *c;
    char buf[64];
    size_t len;
    int rooms, gots, plain;
    ssize_t last;
} rd_t;
static rd_t rd[4];
static conns_t *rd_cn;
static int rd_mode; /* 1: the first room() pauses the others; 2: the first got() closes them */

static char *rd_room(void *arg, size_t *room)
{
    rd_t *r = arg;
    r->rooms++;
    if (rd_mode == 1) {
        rd_mode = 0;
        for (int j = 0; j < 4; j++)
            if (&rd[j] != r)
                event_del(rd[j].c->rev);
    }
    *room = sizeof r->buf - r->len;
    return r->buf + r->len;
}

static void rd_got(void *arg, ssize_t n)
{
    rd_t *r = arg;
    r->gots++;
    r->last = n;
    if (n > 0)
        r->len += (size_t)n;
    if (rd_mode == 2) {
        rd_mode = 0;
        for (int j = 0; j < 4; j++)
            if (&rd[j] != r && rd[j].c->fd >= 0)
                conns_close(rd_cn, rd[j].c);
    }
}

static void rd_plain(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    ((rd_t *)arg)->plain++;
}

/* Sends `what` from each client and runs the loop until `want` rd[] have
 * had a got() since, or 2 s. */
static void rd_round(const int *cl, const char *what, int want)
{
    int got0[4];
    for (int i = 0; i < 4; i++) {
        got0[i] = rd[i].gots;
        if (what && cl[i] >= 0)
            ck_assert_int_eq(send(cl[i], what, strlen(what), 0), (ssize_t)strlen(what));
    }
    usleep(20000); /* every client's bytes are there when the loop wakes */
    for (int k = 0; k < 200; k++) {
        int n = 0;
        for (int i = 0; i < 4; i++)
            n += rd[i].gots > got0[i];
        if (n >= want)
            break;
        event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
        usleep(10000);
    }
}

/* A pass's reads in one batch: each connection's bytes reach its own got(),
 * once, and its read event never calls on_read; one the front paused since
 * its note is not read (then read once resumed); one closed by an earlier
 * got() gets no call; the client's end is got(0); a wake without bytes is
 * got(-EAGAIN); the read stamp is not earlier than the read. */
START_TEST(test_conns_batched_reads)
{
    conns_t *cn = make(8);
    rd_cn = cn;
    ck_assert_int_eq(conns_set_batched(cn, SENDBATCH_AUTO), 0);
    listen_any(cn);
    conns_conn_t gc[4];
    int cl[4];
    memset(gc, 0, sizeof gc);
    memset(rd, 0, sizeof rd);
    for (int i = 0; i < 4; i++) {
        cl[i] = connect_to(conns_port(cn));
        while (fk.accepted == i)
            event_base_loop(base, EVLOOP_ONCE);
        rd[i].c = &gc[i];
        ck_assert_int_eq(conns_open(cn, &gc[i], fk.last_fd, rd_plain, nothing, &rd[i]), 0);
        conns_read_batched(&gc[i], rd_room, rd_got);
    }
    double before = mono_now();
    rd_round(cl, "get a\r\n", 4);
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(rd[i].plain, 0);
        ck_assert_int_eq(rd[i].rooms, 1);
        ck_assert_int_eq(rd[i].gots, 1);
        ck_assert_int_eq(rd[i].last, 7);
        ck_assert(gc[i].last >= before);
    }
    /* The first room() pauses the other three: only it is read. */
    rd_mode = 1;
    rd_round(cl, "get b\r\n", 1);
    int first = -1;
    for (int i = 0; i < 4; i++)
        if (rd[i].gots == 2)
            first = i;
    ck_assert_int_ge(first, 0);
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(rd[i].rooms, i == first ? 2 : 1);
        ck_assert_int_eq(rd[i].gots, i == first ? 2 : 1);
    }
    for (int i = 0; i < 4; i++) /* resumed: read in the next pass */
        if (i != first)
            event_add(gc[i].rev, NULL);
    rd_round(cl, NULL, 3);
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(rd[i].gots, 2);
        ck_assert_uint_eq(rd[i].len, 14);
        ck_assert(memcmp(rd[i].buf, "get a\r\nget b\r\n", 14) == 0);
    }
    /* A wake with nothing to read. */
    event_active(gc[0].rev, EV_READ, 0);
    event_base_loop(base, EVLOOP_NONBLOCK);
    ck_assert_int_eq(rd[0].gots, 3);
    ck_assert_int_eq(rd[0].last, -EAGAIN);
    /* The first got() closes the other three: they get no call. */
    rd_mode = 2;
    rd_round(cl, "get c\r\n", 1);
    int open = -1;
    for (int i = 0; i < 4; i++)
        if (gc[i].fd >= 0)
            open = i;
    ck_assert_int_ge(open, 0);
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(rd[i].gots, (i == 0) + 2 + (i == open));
    /* The client's end. */
    close(cl[open]);
    cl[open] = -1;
    rd_round(cl, NULL, 1);
    ck_assert_int_eq(rd[open].last, 0);
    ck_assert_int_eq(rd[open].plain, 0);
    conns_close(cn, &gc[open]);
    for (int i = 0; i < 4; i++)
        if (cl[i] >= 0)
            close(cl[i]);
}
END_TEST

/* conns_set_batched(): conns_write() only notes a connection; at the end
 * of the loop's pass every noted one's bytes go out and its write callback
 * runs once; a connection closed after its note is skipped; a send to a
 * peer gone is reported by conns_write() from that callback on. */
START_TEST(test_conns_batched)
{
    conns_t *cn = make(8);
    ck_assert_int_eq(conns_set_batched(cn, SENDBATCH_AUTO), 0);
    ck_assert_int_eq(conns_set_batched(cn, SENDBATCH_AUTO), -EINVAL);
    ck_assert_int_eq(conns_set_writers(cn, 1), -EINVAL);
    ck_assert_int_ne(conns_batched(cn), 0);
    listen_any(cn);
    conns_conn_t gc[4];
    int cl[4];
    memset(gc, 0, sizeof gc);
    memset(wrote, 0, sizeof wrote);
    for (int i = 0; i < 4; i++) {
        cl[i] = connect_to(conns_port(cn));
        while (fk.accepted == i)
            event_base_loop(base, EVLOOP_ONCE);
        ck_assert_int_eq(conns_open(cn, &gc[i], fk.last_fd, nothing, count_write, &wrote[i]), 0);
    }
    char buf[64];
    for (int i = 0; i < 4; i++) {
        evbuffer_add_printf(gc[i].out, "reply %d", i);
        ck_assert_int_eq(conns_write(&gc[i]), 0);
        ck_assert_int_eq(conns_write(&gc[i]), 0); /* noted once */
        ck_assert_uint_eq(conns_unsent(&gc[i]), 7);
        ck_assert_int_eq(recv(cl[i], buf, sizeof buf, MSG_DONTWAIT), -1); /* not yet */
    }
    conns_close(cn, &gc[2]); /* noted, then closed: skipped */
    event_base_loop(base, EVLOOP_NONBLOCK);
    for (int i = 0; i < 4; i++) {
        if (i == 2) {
            ck_assert_int_eq(wrote[i], 0);
            ck_assert_int_eq(recv(cl[i], buf, sizeof buf, 0), 0); /* closed, nothing sent */
            continue;
        }
        ck_assert_int_eq(wrote[i], 1);
        ck_assert_uint_eq(conns_unsent(&gc[i]), 0);
        ck_assert_int_eq(recv(cl[i], buf, sizeof buf, 0), 7);
        ck_assert(memcmp(buf, "reply ", 6) == 0 && buf[6] == '0' + i);
    }
    /* A peer gone: the failed send comes back through conns_write(). */
    event_del(gc[1].rev); /* its EOF would keep the loop busy: `nothing` reads nothing */
    close(cl[1]);
    cl[1] = -1;
    usleep(10000);
    int rc = 0; /* TCP: the first send after the peer's close may still succeed */
    for (int round = 1; round <= 50 && rc == 0; round++) {
        evbuffer_add(gc[1].out, "x", 1);
        ck_assert_int_eq(conns_write(&gc[1]), 0);
        event_base_loop(base, EVLOOP_NONBLOCK);
        ck_assert_int_eq(wrote[1], 1 + round); /* once per flush */
        rc = conns_write(&gc[1]);
        usleep(2000);
    }
    ck_assert_msg(rc == -EPIPE || rc == -ECONNRESET, "conns_write: %d", rc);
    for (int i = 0; i < 4; i++) {
        if (i != 2)
            conns_close(cn, &gc[i]);
        if (cl[i] >= 0)
            close(cl[i]);
    }
}
END_TEST

/* A front's write callback: write what is left (the write event, or the
 * flush's callback). */
static void write_more(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    ck_assert_int_eq(conns_write(arg), 0);
}

/* conns_reply_room(): only with writes batched and while c->out is empty;
 * its bytes go out ahead of c->out's, in order, through partial sends to
 * a full socket (flushes and the write event): 100,000 numbered records,
 * each into the room when given, else into c->out, 800 kB that the
 * client reads only once all are queued, arrive in order. */
START_TEST(test_conns_reply_room_order)
{
    conns_t *plain = make(8); /* writes at once: no room */
    conns_conn_t pc = {0};
    listen_any(plain);
    int pcl = connect_to(conns_port(plain));
    while (fk.accepted == 0)
        event_base_loop(base, EVLOOP_ONCE);
    ck_assert_int_eq(conns_open(plain, &pc, fk.last_fd, nothing, nothing, NULL), 0);
    size_t room = 0;
    ck_assert_ptr_null(conns_reply_room(&pc, &room));
    conns_close(plain, &pc);
    close(pcl);
    conns_destroy(&plain);

    conns_t *cn = make(8);
    ck_assert_int_eq(conns_set_batched(cn, SENDBATCH_AUTO), 0);
    listen_any(cn);
    fk.accepted = 0;
    int cl = connect_to(conns_port(cn));
    while (fk.accepted == 0)
        event_base_loop(base, EVLOOP_ONCE);
    conns_conn_t gc = {0};
    ck_assert_int_eq(conns_open(cn, &gc, fk.last_fd, nothing, write_more, &gc), 0);
    int small = 4096;
    setsockopt(gc.fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    char *p = conns_reply_room(&gc, &room);
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_eq(room, CONNS_REPLY_ROOM);
    enum { N = 100000 };
    int in_room = 0, in_out = 0;
    for (int i = 0; i < N; i++) {
        char rec[16];
        snprintf(rec, sizeof rec, "%07d\n", i);
        if ((p = conns_reply_room(&gc, &room)) != NULL && room >= 8) {
            memcpy(p, rec, 8);
            conns_reply_commit(&gc, 8);
            in_room++;
        } else {
            ck_assert(p == NULL || evbuffer_get_length(gc.out) == 0);
            evbuffer_add(gc.out, rec, 8);
            in_out++;
        }
        if (i % 97 == 0) {
            ck_assert_int_eq(conns_write(&gc), 0);
            event_base_loop(base, EVLOOP_NONBLOCK);
        }
    }
    ck_assert_int_eq(conns_write(&gc), 0);
    ck_assert_int_gt(in_room, 1000);
    ck_assert_int_gt(in_out, 1000);
    ck_assert_uint_gt(conns_unsent(&gc), 100000); /* the client read nothing yet */
    static char got[N * 8];
    size_t have = 0;
    double end = mono_now() + 3; /* a bound within Check's 4 s: well under 1 s idle */
    while (have < sizeof got && mono_now() < end) {
        ssize_t r = recv(cl, got + have, sizeof got - have, MSG_DONTWAIT);
        if (r > 0)
            have += (size_t)r;
        event_base_loop(base, EVLOOP_NONBLOCK);
    }
    ck_assert_msg(have == sizeof got, "got %zu: writing %d fb [%u, %u) out %zu werr %d", have,
                  gc.writing, gc.fboff, gc.fblen, evbuffer_get_length(gc.out), gc.werr);
    for (int i = 0; i < N; i++) {
        char rec[16];
        snprintf(rec, sizeof rec, "%07d\n", i);
        ck_assert_msg(memcmp(got + (size_t)i * 8, rec, 8) == 0, "record %d out of order", i);
    }
    ck_assert_uint_eq(conns_unsent(&gc), 0);
    conns_close(cn, &gc);
    close(cl);
}
END_TEST

/* Defect 7: out of file descriptors, accepting pauses instead of spinning
 * (few loop iterations, few accept errors in 200 ms) and resumes once a
 * connection closes. */
START_TEST(test_conns_emfile_no_spin)
{
    conns_conn_t gc[2];
    conns_t *cn = rig(100, &hooks, gc, sizeof gc);
    int cl[3];
    for (int i = 0; i < 3; i++)
        cl[i] = connect_to(conns_port(cn));
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
    conns_stats_t cs;
    conns_stats(cn, &cs);
    ck_assert_int_eq(fk.accepted, 1);
    ck_assert_msg(iters < 100, "loop spun: %ld iterations in 200 ms", iters);
    ck_assert_msg(cs.accept_pauses >= 1 && cs.accept_pauses <= 5, "%llu accept pauses",
                  (unsigned long long)cs.accept_pauses);
    conns_close(cn, &gc[0]); /* a descriptor frees: accepting resumes */
    run_for(2.0, &fk.accepted, 2);
    ck_assert_int_eq(fk.accepted, 2);
    ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &old), 0);
    conns_close(cn, &gc[1]);
    for (int i = 0; i < 3; i++)
        close(cl[i]);
}
END_TEST

/* Defect 9: --max-conns-per-ip refuses an address's connection beyond the
 * cap, not another address's. */
START_TEST(test_conns_per_ip_cap)
{
    conns_conn_t gc[2];
    conns_t *cn = rig(10, &hooks, gc, sizeof gc);
    ck_assert_int_eq(conns_set_limits(cn, 0, 1), 0);
    int c1 = connect_from(conns_port(cn), 1);
    run_for(2.0, &fk.accepted, 1);
    int c2 = connect_from(conns_port(cn), 1);
    run_for(2.0, &fk.refused, 1);
    int c3 = connect_until(cn, 2, &fk.accepted, 2);
    ck_assert_int_eq(fk.refused, 1);
    conns_stats_t cs;
    conns_stats(cn, &cs);
    ck_assert_uint_eq(cs.refused_per_ip, 1);
    char b;
    ck_assert_int_eq(recv(c2, &b, 1, 0), 0); /* closed */
    conns_close(cn, &gc[0]);
    conns_close(cn, &gc[1]);
    close(c1);
    close(c2);
    close(c3);
}
END_TEST

/* Defect 9: --idle-timeout shuts a connection that read nothing for the
 * timeout, never one that holds a request, and reads keep it open. */
START_TEST(test_conns_idle_timeout)
{
    conns_conn_t gc[1];
    conns_t *cn = rig(10, &hooks, gc, sizeof gc);
    ck_assert_int_eq(conns_set_limits(cn, -1, 0), -EINVAL);
    ck_assert_int_eq(conns_set_limits(cn, 0.2, 0), 0);
    int c = connect_to(conns_port(cn));
    run_for(2.0, &fk.accepted, 1);
    ck_assert_int_eq(fk.accepted, 1);
    for (int i = 0; i < 12; i++) { /* 0.6 s of a byte every 50 ms */
        ck_assert_int_eq(send(c, "x", 1, 0), 1);
        run_for(0.05, NULL, 0);
    }
    conns_stats_t cs;
    conns_stats(cn, &cs);
    ck_assert_uint_eq(cs.idle_closed, 0);
    gc[0].held = 1; /* a request queued: never idle */
    run_for(0.6, NULL, 0);
    conns_stats(cn, &cs);
    ck_assert_uint_eq(cs.idle_closed, 0);
    gc[0].held = 0;
    for (int i = 0; i < 200 && cs.idle_closed == 0; i++) {
        run_for(0.01, NULL, 0);
        conns_stats(cn, &cs);
    }
    ck_assert_uint_eq(cs.idle_closed, 1);
    char b;
    ck_assert_int_eq(recv(c, &b, 1, 0), 0); /* shut down: EOF for the client */
    conns_close(cn, &gc[0]);
    close(c);
}
END_TEST

/* A read's stamp (c->last, what --idle-timeout measures from) is never
 * earlier than the monotonic clock at the read, and at most a tick (10 ms)
 * later: a connection is never found idle sooner than it is. */
START_TEST(test_conns_read_stamp_not_early)
{
    conns_conn_t gc[1];
    conns_t *cn = rig(10, &hooks, gc, sizeof gc);
    int c = connect_to(conns_port(cn));
    run_for(2.0, &fk.accepted, 1);
    ck_assert_int_eq(fk.accepted, 1);
    for (int i = 0; i < 50; i++) {
        double before = mono_now();
        ck_assert_int_eq(send(c, "x", 1, 0), 1);
        event_base_loop(base, EVLOOP_ONCE);
        double after = mono_now();
        ck_assert_msg(gc[0].last >= before, "stamp %.6f before the read (%.6f)", gc[0].last,
                      before);
        ck_assert(gc[0].last <= after + 0.011);
        usleep(1000);
    }
    conns_close(cn, &gc[0]);
    close(c);
}
END_TEST

/* A connection in a TLS handshake (handshaking set by its front): bytes
 * that trickle in do not keep it, and the sweep shuts it down even while
 * it holds something (a handshake in progress has nothing to lose). */
START_TEST(test_conns_idle_bounds_handshake)
{
    conns_conn_t gc[1];
    conns_t *cn = rig(10, &hooks, gc, sizeof gc);
    ck_assert_int_eq(conns_set_limits(cn, 0.2, 0), 0);
    int c = connect_to(conns_port(cn));
    run_for(2.0, &fk.accepted, 1);
    ck_assert_int_eq(fk.accepted, 1);
    gc[0].handshaking = 1;
    gc[0].held = 1;
    conns_stats_t cs = {0};
    for (int i = 0; i < 40 && cs.idle_closed == 0; i++) { /* a byte every 50 ms, up to 2 s */
        if (send(c, "x", 1, MSG_NOSIGNAL) != 1)
            break;
        run_for(0.05, NULL, 0);
        conns_stats(cn, &cs);
    }
    ck_assert_uint_eq(cs.idle_closed, 1);
    char b[64];
    ssize_t n;
    while ((n = recv(c, b, sizeof b, 0)) > 0)
        ;
    ck_assert_int_eq(n, 0); /* shut down: EOF for the client */
    conns_close(cn, &gc[0]);
    ck_assert_int_eq(gc[0].handshaking, 0);
    close(c);
}
END_TEST

/* Every connection has its address from the accept; the names are copies
 * the front sets and clears, refused when too long or not printable, freed
 * at close. */
START_TEST(test_conns_identity)
{
    conns_conn_t gc[1];
    conns_t *cn = rig(10, &hooks, gc, sizeof gc);
    int c = connect_from(conns_port(cn), 7);
    run_for(2.0, &fk.accepted, 1);
    ck_assert_int_eq(fk.accepted, 1);
    const conn_identity_t *id = conns_identity(&gc[0]);
    ck_assert_int_eq(id->addr.ss_family, AF_INET);
    const struct sockaddr_in *sin = (const struct sockaddr_in *)&id->addr;
    ck_assert_uint_eq(ntohl(sin->sin_addr.s_addr), INADDR_LOOPBACK + 6);
    ck_assert_uint_ne(ntohs(sin->sin_port), 0);
    ck_assert_ptr_null(id->user);
    ck_assert_ptr_null(id->cert_name);
    ck_assert_ptr_null(id->psk_id);
    char name[] = "alice";
    ck_assert_int_eq(conns_set_identity(&gc[0], CONN_ID_USER, name), 0);
    name[0] = 'X'; /* a copy was kept */
    ck_assert_str_eq(id->user, "alice");
    ck_assert_int_eq(conns_set_identity(&gc[0], CONN_ID_CERT, "alice.example"), 0);
    ck_assert_int_eq(conns_set_identity(&gc[0], CONN_ID_PSK, "tenant-a"), 0);
    ck_assert_str_eq(id->cert_name, "alice.example");
    ck_assert_str_eq(id->psk_id, "tenant-a");
    ck_assert_int_eq(conns_set_identity(&gc[0], CONN_ID_USER, "bob"), 0); /* replaced */
    ck_assert_str_eq(id->user, "bob");
    ck_assert_int_eq(conns_set_identity(&gc[0], CONN_ID_USER, "b\nob"), -EINVAL);
    ck_assert_str_eq(id->user, "bob"); /* unchanged */
    char longname[CONN_ID_MAX + 2];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    ck_assert_int_eq(conns_set_identity(&gc[0], CONN_ID_CERT, longname), -EINVAL);
    longname[CONN_ID_MAX] = 0;
    ck_assert_int_eq(conns_set_identity(&gc[0], CONN_ID_CERT, longname), 0);
    ck_assert_uint_eq(strlen(id->cert_name), CONN_ID_MAX);
    ck_assert_int_eq(conns_set_identity(&gc[0], (conn_id_field_t)7, "x"), -EINVAL);
    ck_assert_int_eq(conns_set_identity(&gc[0], CONN_ID_PSK, NULL), 0);
    ck_assert_ptr_null(id->psk_id);
    /* the rules' subject: the names and the address, IPv4 as 4 bytes */
    rules_subject_t s = {.op = RULES_OP_READ};
    conns_subject(&gc[0], &s);
    ck_assert_str_eq(s.user, "bob");
    ck_assert_ptr_eq(s.cert_name, id->cert_name);
    ck_assert_ptr_null(s.psk_id);
    ck_assert_int_eq(s.family, 4);
    ck_assert_mem_eq(s.addr, ((const uint8_t[]){127, 0, 0, 7}), 4);
    ck_assert_int_eq(s.op, RULES_OP_READ);
    conns_close(cn, &gc[0]); /* frees the names (ASan: no leak) */
    ck_assert_ptr_null(id->user);
    ck_assert_ptr_null(id->cert_name);
    close(c);
}
END_TEST

/* 127.0.0.`from` as a sockaddr, for conns_peer_count(). */
static const struct sockaddr *peer(int from)
{
    static struct sockaddr_in a;
    a = (struct sockaddr_in){.sin_family = AF_INET,
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK - 1 + (unsigned)from)};
    return (const struct sockaddr *)&a;
}

/* Nonzero once the server closed the client socket fd (EOF within 1 s). */
static int client_closed(int fd)
{
    struct timeval tv = {1, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char b;
    return recv(fd, &b, 1, 0) == 0;
}

/* Nonzero if the server has not closed the client socket fd (no EOF now). */
static int client_open(int fd)
{
    char b;
    ssize_t n = recv(fd, &b, 1, MSG_DONTWAIT);
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

/* Opens n connections from 127.0.0.`from` into cl[] and runs the loop
 * until the registry took them. */
static void flood(conns_t *cn, int *cl, int n, int from)
{
    int want = fk.accepted + n;
    for (int i = 0; i < n; i++)
        cl[i] = connect_from(conns_port(cn), from);
    run_for(2.0, &fk.accepted, want);
    ck_assert_int_eq(fk.accepted, want);
}

/* Issue 26 case 6: connections from a few addresses fill max_conns; a
 * client from another address is admitted by closing the longest-idle
 * connection of the address holding the most (not a recently read one,
 * not another address's), counted; the flooding address itself cannot
 * take a slot back; the counts per address follow. */
START_TEST(test_conns_evict_for_another_address)
{
    conns_conn_t gc[8];
    conns_t *cn = rig(6, &evict_hooks, gc, sizeof gc);
    int a[4], b[2], c, d;
    flood(cn, a, 4, 2);
    flood(cn, b, 2, 3);
    ck_assert_int_eq(conns_count(cn), 6);
    ck_assert_int_eq(conns_peer_count(cn, peer(2)), 4);
    ck_assert_int_eq(conns_peer_count(cn, peer(3)), 2);
    ck_assert_int_eq(send(a[0], "x", 1, 0), 1); /* a[0] read: a[1] is now the longest idle */
    run_for(0.1, NULL, 0);
    c = connect_until(cn, 5, &fk.accepted, 7);
    ck_assert_int_eq(fk.refused, 0);
    ck_assert_int_eq(fk.evicted, 1);
    ck_assert_int_eq(gc[1].fd, -1);
    ck_assert(client_closed(a[1]));
    ck_assert(client_open(a[0]) && client_open(a[2]) && client_open(b[0]));
    conns_stats_t cs;
    conns_stats(cn, &cs);
    ck_assert_uint_eq(cs.evicted, 1);
    ck_assert_int_eq(cs.open, 6);
    ck_assert_int_eq(cs.addresses, 3);
    ck_assert_int_eq(conns_peer_count(cn, peer(2)), 3);
    ck_assert_int_eq(conns_peer_count(cn, peer(5)), 1);
    /* 127.0.0.2 holds 3, one more than 127.0.0.3's 2: no slot for it. */
    d = connect_until(cn, 2, &fk.refused, 1);
    ck_assert_int_eq(fk.evicted, 1);
    ck_assert(client_closed(d));
    for (int i = 0; i < fk.nopen; i++)
        if (gc[i].fd >= 0)
            conns_close(cn, &gc[i]);
    conns_stats(cn, &cs);
    ck_assert_int_eq(cs.addresses, 0);
    ck_assert_int_eq(conns_peer_count(cn, peer(2)), 0);
    for (int i = 0; i < 4; i++)
        close(a[i]);
    close(b[0]);
    close(b[1]);
    close(c);
    close(d);
}
END_TEST

/* A connection that holds anything is never evicted: a request queued
 * (held), a reply unsent, reading paused, bytes unread in its socket, or
 * the front declining; the new client is refused instead, and admitted
 * once one of them is idle. */
START_TEST(test_conns_evict_spares_busy)
{
    conns_conn_t gc[4];
    conns_t *cn = rig(3, &evict_hooks, gc, sizeof gc);
    int a[3], c1, c2, c3;
    flood(cn, a, 3, 2);
    gc[0].held = 1;
    evbuffer_add(gc[1].out, "reply", 5); /* not written yet */
    event_del(gc[2].rev);                /* paused by the front */
    c1 = connect_until(cn, 3, &fk.refused, 1);
    ck_assert_int_eq(fk.evicted, 0);
    ck_assert(client_closed(c1));
    event_add(gc[2].rev, NULL);
    fk.decline = 1; /* the front sees a request read but not parsed */
    c2 = connect_until(cn, 3, &fk.refused, 2);
    ck_assert_int_eq(fk.evicted, 1);
    ck_assert_int_ge(gc[2].fd, 0);
    fk.decline = 0;
    c3 = connect_until(cn, 3, &fk.accepted, 4);
    ck_assert_int_eq(gc[2].fd, -1); /* the idle one, though not first in line */
    ck_assert(client_closed(a[2]));
    ck_assert(client_open(a[0]) && client_open(a[1]));
    conns_stats_t cs;
    conns_stats(cn, &cs);
    ck_assert_uint_eq(cs.evicted, 1);
    evbuffer_drain(gc[1].out, 5);
    for (int i = 0; i < fk.nopen; i++)
        if (gc[i].fd >= 0)
            conns_close(cn, &gc[i]);
    for (int i = 0; i < 3; i++)
        close(a[i]);
    close(c1);
    close(c2);
    close(c3);
}
END_TEST

/* Bytes the client sent but the front has not read yet keep a connection
 * from eviction (the registry peeks). */
START_TEST(test_conns_evict_spares_unread)
{
    conns_conn_t gc[3];
    conns_t *cn = rig(2, &evict_hooks, gc, sizeof gc);
    fk.on_read = nothing; /* the front reads nothing: bytes stay in the socket */
    int a[2], c;
    flood(cn, a, 2, 2);
    ck_assert_int_eq(send(a[0], "get k\r\n", 7, 0), 7);
    ck_assert_int_eq(send(a[1], "get k\r\n", 7, 0), 7);
    run_for(0.05, NULL, 0);
    c = connect_until(cn, 3, &fk.refused, 1);
    ck_assert_int_eq(fk.evicted, 0);
    ck_assert(client_open(a[0]) && client_open(a[1]));
    conns_close(cn, &gc[0]);
    conns_close(cn, &gc[1]);
    close(a[0]);
    close(a[1]);
    close(c);
}
END_TEST

/* The address table follows opens and closes in any order across many
 * addresses (its hash chains grow past the first 64), and its heap keeps
 * the address holding the most on top: the one evicted from. */
START_TEST(test_conns_address_counts)
{
    enum { N = 150, ALL = N + 70 + 1 };
    conns_t *cn = make_with(N, &evict_hooks);
    listen_any(cn);
    conns_conn_t *gc = calloc(ALL, sizeof *gc);
    int *cl = calloc(ALL, sizeof *cl);
    ck_assert(gc && cl);
    fk.conns = gc;
    /* 100 addresses with one connection each (127.0.0.10 ...), 50 from .2 */
    for (int i = 0; i < 100; i++)
        flood(cn, &cl[i], 1, 10 + i);
    flood(cn, &cl[100], 50, 2);
    conns_stats_t cs;
    conns_stats(cn, &cs);
    ck_assert_int_eq(cs.addresses, 101);
    ck_assert_int_eq(conns_peer_count(cn, peer(2)), 50);
    ck_assert_int_eq(conns_peer_count(cn, peer(109)), 1);
    /* every other single address goes, and 20 of .2's */
    for (int i = 0; i < 120; i += i < 100 ? 2 : 1)
        conns_close(cn, &gc[i]);
    conns_stats(cn, &cs);
    ck_assert_int_eq(cs.addresses, 51);
    ck_assert_int_eq(cs.open, 80);
    ck_assert_int_eq(conns_peer_count(cn, peer(2)), 30);
    ck_assert_int_eq(conns_peer_count(cn, peer(10)), 0);
    ck_assert_int_eq(conns_peer_count(cn, peer(11)), 1);
    /* .3 fills the rest: 70 there, the most; a newcomer evicts its oldest */
    flood(cn, &cl[N], 70, 3);
    ck_assert_int_eq(conns_count(cn), N);
    flood(cn, &cl[N + 70], 1, 4);
    ck_assert_int_eq(fk.evicted, 1);
    ck_assert_int_eq(gc[N].fd, -1);
    ck_assert_int_eq(conns_peer_count(cn, peer(3)), 69);
    ck_assert_int_eq(conns_peer_count(cn, peer(4)), 1);
    ck_assert_int_eq(conns_peer_count(cn, peer(2)), 30);
    for (int i = 0; i < fk.nopen; i++)
        if (gc[i].fd >= 0)
            conns_close(cn, &gc[i]);
    conns_stats(cn, &cs);
    ck_assert_int_eq(cs.addresses, 0);
    ck_assert_int_eq(cs.open, 0);
    for (int i = 0; i < ALL; i++)
        close(cl[i]);
    free(gc);
    free(cl);
}
END_TEST

/* After conns_stop() every connection is refused; with close_listener the
 * socket is gone. */
START_TEST(test_conns_stop)
{
    conns_t *cn = make(10);
    listen_any(cn);
    unsigned port = conns_port(cn);
    conns_stop(cn, 0);
    conns_stop(cn, 0); /* idempotent */
    ck_assert_uint_eq(conns_port(cn), port); /* still bound: clients wait */
    conns_stop(cn, 1);
    ck_assert_uint_eq(conns_port(cn), 0);
    ck_assert_str_eq(conns_address(cn), "");
    conns_stop(NULL, 1);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {test_conns_bad_settings, test_conns_connections,
                                  test_conns_emfile_no_spin, test_conns_per_ip_cap,
                                  test_conns_idle_timeout, test_conns_read_stamp_not_early,
                                  test_conns_reply_room_order,
                                  test_conns_evict_for_another_address,
                                  test_conns_evict_spares_busy, test_conns_evict_spares_unread,
                                  test_conns_address_counts, test_conns_stop,
                                  test_conns_idle_bounds_handshake, test_conns_identity,
                                  test_conns_batched, test_conns_batched_reads};
    const testlib_case_t c = {.name = "conns", .setup = setup, .teardown = teardown};
    return testlib_run_case(&c, tests, sizeof tests / sizeof tests[0]);
}
