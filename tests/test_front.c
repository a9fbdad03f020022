/* test_front.c - Check suite for storage-node/mc/front: a client on a loopback socket and a stub memcached in a thread of the test; a get/set round trip answered once, pipelined replies in request order (same key and out-of-order completions), memcached's error texts, unknown buckets in "default", a bucket without tokens holding its requests until gate_set_tokens(), and a client gone with requests queued and in flight. */
#include <check.h>
#include <errno.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/mono.h"
#include "common/version.h"
#include "storage-node/io/conns.h"
#include "storage-node/io/gate.h"
#include "storage-node/mc/front.h"
#include "tests/testlib.h"

/* ---- the stub memcached --------------------------------------------------
 *
 * What the backend (backend.c) sends, answered as memcached does: "gets K..."
 * (every get of a batch), "set K F E N" with its data, "delete K".  A
 * thread per backend connection, so that one slow reply (a key with "slow"
 * in it waits STUB_SLOW_S) does not hold up another worker's.  `log` lists
 * "VERB KEY" a line in the order the stub answered them. */

#define STUB_CONNS 8
#define STUB_ITEMS 32
#define STUB_SLOW_S 0.3

typedef struct {
    int lfd;
    unsigned port;
    pthread_t acceptor;
    pthread_mutex_t mu; /* everything below */
    int fds[STUB_CONNS];
    pthread_t thr[STUB_CONNS];
    int nconns;
    struct {
        char key[256];
        char val[256];
        size_t vlen;
        unsigned flags;
    } kv[STUB_ITEMS];
    int nkv;
    char log[8192];
    size_t loglen;
} stub_t;

typedef struct {
    stub_t *st;
    int fd;
} stub_conn_t;

static void stub_note(stub_t *st, const char *verb, const char *key)
{
    pthread_mutex_lock(&st->mu);
    int n = snprintf(st->log + st->loglen, sizeof st->log - st->loglen, "%s %s\n", verb, key);
    if (n > 0 && (size_t)n < sizeof st->log - st->loglen)
        st->loglen += (size_t)n;
    pthread_mutex_unlock(&st->mu);
}

/* Stores key (st->mu held). */
static void stub_store(stub_t *st, const char *key, const char *val, size_t vlen, unsigned flags)
{
    int i = 0;
    while (i < st->nkv && strcmp(st->kv[i].key, key) != 0)
        i++;
    if (i == STUB_ITEMS || vlen >= sizeof st->kv[0].val || strlen(key) >= sizeof st->kv[0].key)
        return; /* more than the tests store */
    if (i == st->nkv)
        st->nkv++;
    snprintf(st->kv[i].key, sizeof st->kv[i].key, "%s", key);
    memcpy(st->kv[i].val, val, vlen);
    st->kv[i].vlen = vlen;
    st->kv[i].flags = flags;
}

/* The test's own store, as if an earlier client had set it. */
static void stub_put(stub_t *st, const char *key, const char *val)
{
    pthread_mutex_lock(&st->mu);
    stub_store(st, key, val, strlen(val), 0);
    pthread_mutex_unlock(&st->mu);
}

/* Appends the VALUE block of key (if stored) to out. */
static size_t stub_value(stub_t *st, const char *key, char *out, size_t cap)
{
    size_t n = 0;
    pthread_mutex_lock(&st->mu);
    for (int i = 0; i < st->nkv; i++) {
        if (strcmp(st->kv[i].key, key) != 0)
            continue;
        int h = snprintf(out, cap, "VALUE %s %u %zu 1\r\n", key, st->kv[i].flags, st->kv[i].vlen);
        if (h > 0 && (size_t)h + st->kv[i].vlen + 2 < cap) {
            memcpy(out + h, st->kv[i].val, st->kv[i].vlen);
            memcpy(out + h + st->kv[i].vlen, "\r\n", 2);
            n = (size_t)h + st->kv[i].vlen + 2;
        }
        break;
    }
    pthread_mutex_unlock(&st->mu);
    return n;
}

static void stub_send(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w <= 0)
            return;
        p += w;
        n -= (size_t)w;
    }
}

/* Answers the complete commands at buf[0..len); returns the bytes used. */
static size_t stub_answer(stub_t *st, int fd, char *buf, size_t len)
{
    size_t pos = 0;
    for (;;) {
        char *nl = memmem(buf + pos, len - pos, "\r\n", 2);
        if (!nl)
            return pos;
        char line[1024];
        size_t ll = (size_t)(nl - (buf + pos));
        if (ll >= sizeof line)
            return len; /* nothing the backend sends */
        memcpy(line, buf + pos, ll);
        line[ll] = '\0';
        size_t next = pos + ll + 2;
        char *save = NULL, *verb = strtok_r(line, " ", &save);
        if (verb && (strcmp(verb, "gets") == 0 || strcmp(verb, "get") == 0)) {
            char out[4096];
            for (char *k; (k = strtok_r(NULL, " ", &save)) != NULL;) {
                if (strstr(k, "slow"))
                    usleep((useconds_t)(STUB_SLOW_S * 1e6));
                size_t n = stub_value(st, k, out, sizeof out);
                stub_send(fd, out, n);
                stub_note(st, "get", k);
            }
            stub_send(fd, "END\r\n", 5);
        } else if (verb && strcmp(verb, "set") == 0) {
            char *k = strtok_r(NULL, " ", &save), *fl = strtok_r(NULL, " ", &save);
            strtok_r(NULL, " ", &save);
            char *nb = strtok_r(NULL, " ", &save);
            if (!k || !fl || !nb)
                return len;
            size_t vlen = strtoul(nb, NULL, 10);
            if (len - next < vlen + 2)
                return pos; /* its data is still coming */
            pthread_mutex_lock(&st->mu);
            stub_store(st, k, buf + next, vlen, (unsigned)strtoul(fl, NULL, 10));
            pthread_mutex_unlock(&st->mu);
            next += vlen + 2;
            stub_send(fd, "STORED\r\n", 8);
            stub_note(st, "set", k);
        } else if (verb && strcmp(verb, "delete") == 0) {
            char *k = strtok_r(NULL, " ", &save);
            stub_send(fd, "DELETED\r\n", 9);
            stub_note(st, "delete", k ? k : "");
        } else {
            stub_send(fd, "ERROR\r\n", 7);
        }
        pos = next;
    }
}

static void *stub_conn(void *arg)
{
    stub_conn_t *sc = arg;
    static __thread char buf[65536];
    size_t len = 0;
    for (;;) {
        ssize_t n = recv(sc->fd, buf + len, sizeof buf - len, 0);
        if (n <= 0)
            break;
        len += (size_t)n;
        size_t used = stub_answer(sc->st, sc->fd, buf, len);
        memmove(buf, buf + used, len - used);
        len -= used;
    }
    free(sc);
    return NULL;
}

static void *stub_accept(void *arg)
{
    stub_t *st = arg;
    for (;;) {
        int fd = accept(st->lfd, NULL, NULL);
        if (fd < 0)
            return NULL; /* stub_stop() shut the socket down */
        stub_conn_t *sc = malloc(sizeof *sc);
        pthread_mutex_lock(&st->mu);
        if (!sc || st->nconns == STUB_CONNS) {
            pthread_mutex_unlock(&st->mu);
            free(sc);
            close(fd);
            continue;
        }
        *sc = (stub_conn_t){st, fd};
        st->fds[st->nconns] = fd;
        if (pthread_create(&st->thr[st->nconns], NULL, stub_conn, sc) == 0)
            st->nconns++;
        else
            free(sc), close(fd);
        pthread_mutex_unlock(&st->mu);
    }
}

static void stub_start(stub_t *st)
{
    memset(st, 0, sizeof *st);
    pthread_mutex_init(&st->mu, NULL);
    st->lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    ck_assert_int_ge(st->lfd, 0);
    ck_assert_int_eq(bind(st->lfd, (struct sockaddr *)&sa, sizeof sa), 0);
    ck_assert_int_eq(listen(st->lfd, 16), 0);
    ck_assert_int_eq(getsockname(st->lfd, (struct sockaddr *)&sa, &sl), 0);
    st->port = ntohs(sa.sin_port);
    ck_assert_int_eq(pthread_create(&st->acceptor, NULL, stub_accept, st), 0);
}

/* Stops the stub: no more connections, each one's thread ends. */
static void stub_stop(stub_t *st)
{
    shutdown(st->lfd, SHUT_RDWR);
    pthread_join(st->acceptor, NULL);
    close(st->lfd);
    for (int i = 0; i < st->nconns; i++) {
        shutdown(st->fds[i], SHUT_RDWR);
        pthread_join(st->thr[i], NULL);
        close(st->fds[i]);
    }
    pthread_mutex_destroy(&st->mu);
}

/* 1 if the stub answered `line` ("get red:k"). */
static int stub_saw(stub_t *st, const char *line)
{
    char want[300];
    snprintf(want, sizeof want, "%s\n", line);
    pthread_mutex_lock(&st->mu);
    int seen = 0;
    for (const char *p = st->log; (p = strstr(p, want)) != NULL; p++)
        if (p == st->log || p[-1] == '\n')
            seen = 1;
    pthread_mutex_unlock(&st->mu);
    return seen;
}

/* What the stub answered so far (a copy, in a static buffer). */
static const char *stub_log(stub_t *st)
{
    static char copy[sizeof st->log];
    pthread_mutex_lock(&st->mu);
    memcpy(copy, st->log, st->loglen);
    copy[st->loglen] = '\0';
    pthread_mutex_unlock(&st->mu);
    return copy;
}

/* ---- the front, a client and the loop ------------------------------------- */

typedef struct {
    int workers;       /* backend threads; 0: inline */
    int batch;         /* ops per backend exchange */
    int max_auto;      /* buckets made on first sight */
    int reject;        /* unknown buckets: SERVER_ERROR instead of "default" */
    mcauth_t *auth;    /* clients log in first (--auth-file) */
} fx_opts_t;

typedef struct {
    struct event_base *base;
    front_t *f;
    gate_t *g;         /* the front's: tokens */
    unsigned port;     /* where clients connect */
    int fd;            /* the first client */
    stub_t stub;
} fx_t;

static fx_t x; /* the test's */

/* A client connected to the front. */
static int fx_client(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)x.port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    return fd;
}

/* The one place that knows how a front is made: a front on a new loop,
 * listening on a free loopback port, its backend the stub.  Returns a
 * client connected to it (fx_close() closes it). */
static int fx_open(const fx_opts_t *o)
{
    memset(&x, 0, sizeof x);
    stub_start(&x.stub);
    x.base = event_base_new();
    ck_assert_ptr_nonnull(x.base);
    front_config_t cfg;
    front_config_defaults(&cfg);
    ck_assert_int_eq(listener_parse("127.0.0.1:0", &cfg.listen), 0);
    cfg.backend_host = "127.0.0.1";
    cfg.backend_port = x.stub.port;
    cfg.workers = o->workers;
    cfg.batch = o->batch ? o->batch : 64;
    cfg.outstanding = 64;
    cfg.max_auto_buckets = o->max_auto;
    cfg.default_mode = o->reject ? FRONT_DEFAULT_REJECT : FRONT_DEFAULT_SERVE;
    cfg.auth = o->auth;
    int err = 0;
    x.f = front_new(x.base, &cfg, &err);
    ck_assert_msg(x.f != NULL, "front_new: %s", strerror(-err));
    x.g = front_gate(x.f);
    x.port = conns_port(gate_conns(x.g));
    x.fd = fx_client();
    return x.fd;
}

static void fx_close(void)
{
    close(x.fd);
    front_destroy(&x.f);
    ck_assert_ptr_null(x.f);
    event_base_free(x.base);
    stub_stop(&x.stub);
}


static void send_str(int fd, const char *s)
{
    ck_assert_int_eq(send(fd, s, strlen(s), MSG_NOSIGNAL), (ssize_t)strlen(s));
}

/* What a client read: bytes, and whether it saw the end of the stream. */
typedef struct {
    char buf[16384];
    size_t len;
    int eof;
} rx_t;

/* Runs the front's loop for `secs`, or until rx holds `want` bytes (0:
 * the whole time), reading what fd receives into rx. */
static void pump(int fd, rx_t *rx, size_t want, double secs)
{
    double end = mono_now() + secs;
    while (mono_now() < end && (want == 0 || rx->len < want)) {
        event_base_loop(x.base, EVLOOP_NONBLOCK);
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (fd < 0 || rx->eof || poll(&p, 1, 2) <= 0)
            continue;
        ssize_t n = recv(fd, rx->buf + rx->len, sizeof rx->buf - 1 - rx->len, MSG_DONTWAIT);
        if (n > 0)
            rx->len += (size_t)n;
        else if (n == 0)
            rx->eof = 1;
        rx->buf[rx->len] = '\0';
    }
}

/* Runs the loop (reading fd into rx) until the stub has answered `line`
 * (5 s at most). */
static void wait_stub(int fd, rx_t *rx, const char *line)
{
    double end = mono_now() + 5;
    while (!stub_saw(&x.stub, line) && mono_now() < end)
        pump(fd, rx, 0, 0.01);
    ck_assert_msg(stub_saw(&x.stub, line), "the stub never saw %s", line);
}

/* Reads from fd until `want` has come (5 s at most), then for 100 ms
 * more: the replies are exactly `want`, nothing after. */
static void expect(int fd, const char *want)
{
    rx_t rx = {.len = 0};
    pump(fd, &rx, strlen(want), 5);
    pump(fd, &rx, 0, 0.1);
    ck_assert_str_eq(rx.buf, want);
    ck_assert_int_eq(rx.eof, 0);
}

/* A `stats ARG` on a new connection; returns its text (a static buffer). */
static const char *stats(const char *arg)
{
    static rx_t rx;
    int fd = fx_client();
    char cmd[64];
    snprintf(cmd, sizeof cmd, "stats%s%s\r\n", *arg ? " " : "", arg);
    send_str(fd, cmd);
    memset(&rx, 0, sizeof rx);
    double end = mono_now() + 5;
    while (!strstr(rx.buf, "END\r\n") && mono_now() < end)
        pump(fd, &rx, rx.len + 1, 0.05);
    close(fd);
    pump(-1, NULL, 0, 0.02); /* the front sees it go */
    return rx.buf;
}

/* ---- cases ---------------------------------------------------------------- */

static const fx_opts_t inline_opts = {.workers = 0, .max_auto = 1024};

START_TEST(test_front_set_get_round_trip)
{
    int fd = fx_open(&inline_opts);
    send_str(fd, "set red:k 5 0 3\r\nabc\r\n");
    expect(fd, "STORED\r\n");
    send_str(fd, "get red:k\r\n");
    expect(fd, "VALUE red:k 5 3\r\nabc\r\nEND\r\n");
    send_str(fd, "get red:nothing\r\n");
    expect(fd, "END\r\n");
    send_str(fd, "get red:k red:nothing red:k\r\n");
    expect(fd, "VALUE red:k 5 3\r\nabc\r\nVALUE red:k 5 3\r\nabc\r\nEND\r\n");
    ck_assert(stub_saw(&x.stub, "set red:k"));
    ck_assert(stub_saw(&x.stub, "get red:nothing"));
    fx_close();
}
END_TEST

/* A pipelined set and get of one key read their own write: the get waits
 * for the set although both could go to the backend in one batch (where
 * the backend sends gets first). */
START_TEST(test_front_pipeline_same_key_in_order)
{
    int fd = fx_open(&inline_opts);
    send_str(fd, "set k 0 0 2\r\nv1\r\nget k\r\nset k 0 0 2\r\nv2\r\nget k\r\n"
                 "delete k\r\nget other\r\n");
    expect(fd, "STORED\r\nVALUE k 0 2\r\nv1\r\nEND\r\nSTORED\r\nVALUE k 0 2\r\nv2\r\nEND\r\n"
                   "DELETED\r\nEND\r\n");
    ck_assert_ptr_nonnull(strstr(stub_log(&x.stub), "set k\nget k\nset k\nget k\n"));
    fx_close();
}
END_TEST

/* Two workers: a slow get and a fast one of another key complete out of
 * order at the backend; the client gets the replies in request order. */
START_TEST(test_front_pipeline_replies_in_request_order)
{
    int fd = fx_open(&(fx_opts_t){.workers = 2, .batch = 1, .max_auto = 1024});
    stub_put(&x.stub, "a:slow", "first");
    stub_put(&x.stub, "a:fast", "second");
    send_str(fd, "get a:slow\r\nget a:fast\r\nversion\r\n");
    expect(fd, "VALUE a:slow 0 5\r\nfirst\r\nEND\r\nVALUE a:fast 0 6\r\nsecond\r\nEND\r\n"
                   "VERSION " BQOS_MEMCACHED_VERSION "\r\n");
    /* the backend did answer them the other way round */
    ck_assert_str_eq(stub_log(&x.stub), "get a:fast\nget a:slow\n");
    fx_close();
}
END_TEST

/* Client mistakes get memcached's texts, in their place in the reply
 * order, and reach no backend; the connection goes on. */
START_TEST(test_front_malformed_commands)
{
    int fd = fx_open(&inline_opts);
    stub_put(&x.stub, "k", "v");
    send_str(fd, "bogus\r\nget k\r\nset k x 0 1\r\nget\r\nincr k\r\nget k\r\n");
    expect(fd, "ERROR\r\nVALUE k 0 1\r\nv\r\nEND\r\nCLIENT_ERROR bad command line format\r\n"
                   "ERROR\r\nERROR\r\nVALUE k 0 1\r\nv\r\nEND\r\n");
    ck_assert_str_eq(stub_log(&x.stub), "get k\nget k\n");
    fx_close();
}
END_TEST

/* With no buckets made on first sight, a key of an unknown bucket, and a
 * key without a separator, are served in bucket "default"; with
 * --default-bucket reject they are answered SERVER_ERROR unknown bucket. */
START_TEST(test_front_unknown_bucket_default)
{
    int fd = fx_open(&(fx_opts_t){.workers = 0, .max_auto = 0});
    send_str(fd, "set zz:k 0 0 1\r\nz\r\nget plainkey\r\n");
    expect(fd, "STORED\r\nEND\r\n");
    const char *s = stats("buckets");
    ck_assert_ptr_nonnull(strstr(s, "STAT default:arrivals 2\r\n"));
    ck_assert_ptr_null(strstr(s, "STAT zz:"));
    ck_assert_ptr_nonnull(strstr(stats(""), "STAT bqos_buckets 1\r\n"));
    fx_close();

    fd = fx_open(&(fx_opts_t){.workers = 0, .max_auto = 0, .reject = 1});
    send_str(fd, "set zz:k 0 0 1\r\nz\r\nget plainkey\r\n");
    expect(fd, "SERVER_ERROR unknown bucket\r\nSERVER_ERROR unknown bucket\r\n");
    ck_assert_str_eq(stub_log(&x.stub), "");
    fx_close();
}
END_TEST

/* A bucket with no tokens holds its requests (the policy is tokens): none
 * reaches the backend until gate_set_tokens() gives it one, and then only
 * one. Another bucket's request behind them on the connection waits for
 * its turn in the reply order, not at the backend. */
START_TEST(test_front_zero_tokens_hold)
{
    int fd = fx_open(&inline_opts);
    stub_put(&x.stub, "red:a", "A");
    stub_put(&x.stub, "red:b", "B");
    ck_assert_int_eq(gate_set_tokens(x.g, "red", 0, 0), 0);
    send_str(fd, "get red:a\r\nget red:b\r\nget blue:c\r\n");
    rx_t rx = {.len = 0};
    wait_stub(fd, &rx, "get blue:c"); /* served, its reply waits its turn */
    pump(fd, &rx, 0, 0.2);
    ck_assert_uint_eq(rx.len, 0);
    ck_assert(!stub_saw(&x.stub, "get red:a"));
    ck_assert_int_eq(gate_set_tokens(x.g, "red", 1, 0), 0);
    expect(fd, "VALUE red:a 0 1\r\nA\r\nEND\r\n");
    ck_assert(!stub_saw(&x.stub, "get red:b"));
    ck_assert_int_eq(gate_set_tokens(x.g, "red", 0, 1), 0);
    expect(fd, "VALUE red:b 0 1\r\nB\r\nEND\r\nEND\r\n");
    fx_close();
}
END_TEST

/* A client that goes away with one request at the backend and one held in
 * its queue: nothing is written to it, the queued one never reaches the
 * backend, the in-flight one completes into nothing, and the front is
 * left with no connection and nothing outstanding (ASan/valgrind: no
 * leak once the front is destroyed). */
START_TEST(test_front_close_in_flight)
{
    int fd = fx_open(&(fx_opts_t){.workers = 1, .batch = 1, .max_auto = 1024});
    stub_put(&x.stub, "a:slow", "v");
    ck_assert_int_eq(gate_set_tokens(x.g, "red", 0, 0), 0);
    send_str(fd, "get a:slow\r\nget red:held\r\nset a:x 0 0 1\r\nx\r\n");
    shutdown(fd, SHUT_WR);
    rx_t rx = {.len = 0};
    wait_stub(fd, &rx, "set a:x"); /* after a:slow, in the one worker */
    ck_assert(stub_saw(&x.stub, "get a:slow"));
    pump(fd, &rx, 0, 0.1);
    ck_assert_uint_eq(rx.len, 0);
    ck_assert_int_eq(rx.eof, 1);
    ck_assert_int_eq(gate_set_tokens(x.g, "red", 10, 10), 0);
    pump(-1, NULL, 0, 0.1);
    ck_assert(!stub_saw(&x.stub, "get red:held"));
    const char *s = stats("");
    ck_assert_ptr_nonnull(strstr(s, "STAT curr_connections 1\r\n")); /* the stats one */
    ck_assert_ptr_nonnull(strstr(s, "STAT bqos_outstanding 0\r\n"));
    ck_assert_ptr_nonnull(strstr(stats("buckets"), "STAT red:queued 0\r\n"));
    fx_close();
}
END_TEST

/* A bucket table without `default` (gate_set_table() and
 * gate_set_listed(), as noderun sets them from --config or the controller's
 * table): keys of buckets it lacks are refused with a CLIENT_ERROR - an
 * unknown prefix, no prefix, "default:", a bucket the scheduler has but the
 * table does not list; with a `default` they are served there. */
START_TEST(test_front_table_without_default_refuses)
{
    int fd = fx_open(&(fx_opts_t){.workers = 0, .max_auto = 0});
    int red = gate_bucket(x.g, "red", 3, 1);
    ck_assert_int_ge(gate_bucket(x.g, "blue", 4, 1), 0); /* a bucket the table lacks */
    ck_assert_int_ge(red, 1);
    unsigned char listed[8] = {0};
    listed[red] = 1;
    ck_assert_int_eq(gate_set_listed(x.g, listed, red + 1), 0);
    gate_set_table(x.g, GATE_TABLE_CLOSED);
    send_str(fd, "set red:k 0 0 1\r\nz\r\nset zz:k 0 0 1\r\nz\r\nget plainkey\r\nget default:k\r\n"
                 "get blue:k\r\n");
#define REFUSED "CLIENT_ERROR unknown bucket: no default bucket configured\r\n"
    expect(fd, "STORED\r\n" REFUSED REFUSED REFUSED REFUSED);
    ck_assert_str_eq(stub_log(&x.stub), "set red:k\n");
    ck_assert_ptr_nonnull(strstr(stats(""), "STAT bqos_rejected 4\r\n"));
    ck_assert_ptr_nonnull(strstr(stats(""), "STAT bqos_bucket_table closed\r\n"));
    gate_set_table(x.g, GATE_TABLE_DEFAULT);
    send_str(fd, "set zz:k 0 0 1\r\nz\r\nget plainkey\r\n");
    expect(fd, "STORED\r\nEND\r\n");
    ck_assert_ptr_nonnull(strstr(stats("buckets"), "STAT default:arrivals 2\r\n"));
    fx_close();
}
END_TEST

/* --auth-file: before the login every command is refused and nothing
 * reaches the backend; the login itself is not stored; afterwards the
 * connection is served.  Counted in stats. */
START_TEST(test_front_login_first)
{
    char *path = testlib_temp_file("alice:secret\n");
    jsonloc_err_t e;
    mcauth_t *a = mcauth_load(path, &e, NULL);
    unlink(path);
    ck_assert_ptr_nonnull(a);
    int fd = fx_open(&(fx_opts_t){.workers = 0, .max_auto = 0, .auth = a});
    send_str(fd, "get k\r\nversion\r\nset x 0 0 1\r\nv\r\nset x 0 0 11\r\nalice wrong\r\n");
    expect(fd, "CLIENT_ERROR unauthenticated\r\nCLIENT_ERROR unauthenticated\r\n"
               "CLIENT_ERROR bad authentication token format\r\n"
               "CLIENT_ERROR authentication failure\r\n");
    send_str(fd, "set x 0 0 12\r\nalice secret\r\nset k 0 0 1\r\nv\r\nget k\r\n");
    expect(fd, "STORED\r\nSTORED\r\nVALUE k 0 1\r\nv\r\nEND\r\n");
    ck_assert_str_eq(stub_log(&x.stub), "set k\nget k\n");
    gate_stats_t gs;
    gate_stats(x.g, &gs);
    ck_assert_int_eq(gs.auth, 1);
    ck_assert_int_eq(gs.auth_ok, 1);
    ck_assert_int_eq(gs.auth_failures[GATE_AUTH_UNAUTHENTICATED], 2);
    ck_assert_int_eq(gs.auth_failures[GATE_AUTH_BAD_FORMAT], 1);
    ck_assert_int_eq(gs.auth_failures[GATE_AUTH_BAD_PASSWORD], 1);
    fx_close();
    mcauth_destroy(&a);
}
END_TEST

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const TTest *const tests[] = {test_front_set_get_round_trip,
                                  test_front_pipeline_same_key_in_order,
                                  test_front_pipeline_replies_in_request_order,
                                  test_front_malformed_commands,
                                  test_front_unknown_bucket_default,
                                  test_front_zero_tokens_hold,
                                  test_front_close_in_flight,
                                  test_front_table_without_default_refuses,
                                  test_front_login_first};
    return testlib_run_timed("front", 30, tests, sizeof tests / sizeof tests[0]);
}
