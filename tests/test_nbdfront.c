/* test_nbdfront.c - Check suite for storage-node/nbdfront: a front on its own loop thread, a blocking NBD client: listing, round trip, simple and structured replies, token-blocked queues, client gone, shutdown answers ESHUTDOWN, meta contexts and BLOCK_STATUS. */
#include <check.h>
#include <errno.h>
#include <event2/event.h>
#include <event2/thread.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "storage-node/nbd/nbd.h"
#include "storage-node/nbd/nbdfront.h"
#include "storage-node/core/sched.h"
#include "tests/testlib.h"

typedef struct {
    struct event_base *base;
    nbdfront_t *f;
    pthread_t thr;
    char dir[64];
} fix_t;

static fix_t fx;

static void *loop_main(void *arg)
{
    (void)arg;
    event_base_loop(fx.base, EVLOOP_NO_EXIT_ON_EMPTY);
    return NULL;
}

/* Runs fn(arg) on the loop thread and waits for it. */
typedef struct {
    void (*fn)(void *);
    void *arg;
    int done;
    pthread_mutex_t mu;
    pthread_cond_t cv;
} call_t;

static void on_call(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    call_t *c = arg;
    c->fn(c->arg);
    pthread_mutex_lock(&c->mu);
    c->done = 1;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

static void on_loop(void (*fn)(void *), void *arg)
{
    call_t c = {fn, arg, 0, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER};
    ck_assert_int_eq(event_base_once(fx.base, -1, EV_TIMEOUT, on_call, &c, NULL), 0);
    pthread_mutex_lock(&c.mu);
    while (!c.done)
        pthread_cond_wait(&c.cv, &c.mu);
    pthread_mutex_unlock(&c.mu);
}

/* Makes the front (with at most max_conns connections) and starts its
 * loop thread. */
static void start_front(int max_conns)
{
    fx.base = event_base_new();
    ck_assert_ptr_nonnull(fx.base);
    nbdfront_config_t cfg;
    nbdfront_config_defaults(&cfg);
    cfg.listen.port = 0;
    cfg.store.path = fx.dir;
    cfg.store.export_size = 1 << 20;
    cfg.policy = SCHED_POLICY_TOKENS;
    cfg.max_conns = max_conns;
    int err = 0;
    fx.f = nbdfront_new(fx.base, &cfg, &err);
    ck_assert_msg(fx.f != NULL, "nbdfront_new: %s", strerror(-err));
    ck_assert_int_ge(gate_bucket(nbdfront_gate(fx.f), "red", 3, 1), 0);
    ck_assert_int_ge(gate_bucket(nbdfront_gate(fx.f), "blue", 4, 1), 0);
    ck_assert_int_eq(pthread_create(&fx.thr, NULL, loop_main, NULL), 0);
}

static void stop_front(void)
{
    /* Thread-safe with evthread_use_pthreads(); harmless if the loop has
     * already left (after gate_shutdown()). */
    event_base_loopbreak(fx.base);
    pthread_join(fx.thr, NULL);
    nbdfront_destroy(&fx.f);
    event_base_free(fx.base);
}

static void setup(void)
{
    evthread_use_pthreads();
    strcpy(fx.dir, "/tmp/test_nbdfront.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(fx.dir));
    start_front(4096);
}

static void teardown(void)
{
    stop_front();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", fx.dir);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", fx.dir);
}

static void recvn(int fd, void *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = recv(fd, (char *)buf + got, n - got, 0);
        ck_assert_msg(r > 0, "recv: %s", r == 0 ? "EOF" : strerror(errno));
        got += (size_t)r;
    }
}

static void sendn(int fd, const void *buf, size_t n)
{
    ck_assert_int_eq(send(fd, buf, n, MSG_NOSIGNAL), (ssize_t)n);
}

/* Connects from 127.0.0.`from` (0: any) and does the flags exchange. */
static int client_from(int from)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (from) {
        struct sockaddr_in b = {.sin_family = AF_INET,
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK - 1 + (unsigned)from)};
        ck_assert_int_eq(bind(fd, (struct sockaddr *)&b, sizeof b), 0);
    }
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)conns_port(gate_conns(nbdfront_gate(fx.f)))),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    uint8_t g[NBD_GREETING_LEN];
    recvn(fd, g, sizeof g);
    ck_assert(memcmp(g, "NBDMAGICIHAVEOPT", 16) == 0);
    uint8_t fl[4] = {0, 0, 0, NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES};
    sendn(fd, fl, 4);
    return fd;
}

static int client(void)
{
    return client_from(0);
}

/* Sends NBD_OPT_GO for `name`; returns the final reply type, *size and
 * *tflags (transmission flags) set. */
static uint32_t go_flags(int fd, const char *name, uint64_t *size, uint16_t *tflags)
{
    uint8_t m[64];
    size_t nl = strlen(name);
    size_t n = nbd_encode_option(m, NBD_OPT_GO, (uint32_t)(6 + nl));
    m[n] = m[n + 1] = m[n + 2] = 0;
    m[n + 3] = (uint8_t)nl;
    memcpy(m + n + 4, name, nl);
    m[n + 4 + nl] = m[n + 5 + nl] = 0;
    sendn(fd, m, n + 6 + nl);
    for (;;) {
        uint8_t h[NBD_REP_HDR_LEN], d[64];
        uint32_t o, t, l;
        recvn(fd, h, sizeof h);
        ck_assert_int_eq(nbd_parse_rep_header(h, sizeof h, &o, &t, &l, NULL), 0);
        ck_assert_uint_le(l, sizeof d);
        if (l)
            recvn(fd, d, l);
        if (t == NBD_REP_INFO && d[1] == NBD_INFO_EXPORT) {
            *size = 0;
            for (int i = 0; i < 8; i++)
                *size = (*size << 8) | d[2 + i];
            *tflags = (uint16_t)((d[10] << 8) | d[11]);
        }
        if (t != NBD_REP_INFO)
            return t;
    }
}

static uint32_t go(int fd, const char *name, uint64_t *size)
{
    uint16_t tf;
    return go_flags(fd, name, size, &tf);
}

/* Sends option `opt` with `len` bytes of data (zeroes); returns the reply type. */
static uint32_t option(int fd, uint32_t opt, uint32_t len)
{
    uint8_t m[NBD_OPT_HDR_LEN + 16] = {0};
    ck_assert_uint_le(len, 16);
    size_t n = nbd_encode_option(m, opt, len);
    sendn(fd, m, n + len);
    uint8_t h[NBD_REP_HDR_LEN];
    uint32_t o, t, l;
    recvn(fd, h, sizeof h);
    ck_assert_int_eq(nbd_parse_rep_header(h, sizeof h, &o, &t, &l, NULL), 0);
    ck_assert_uint_eq(o, opt);
    ck_assert_uint_eq(l, 0);
    return t;
}

/* Receives one structured reply chunk header; the payload is left unread. */
static void chunk(int fd, uint16_t *flags, uint16_t *type, uint64_t *handle, uint32_t *len)
{
    uint8_t h[NBD_CHUNK_HDR_LEN];
    recvn(fd, h, sizeof h);
    ck_assert_int_eq(nbd_parse_chunk_header(h, sizeof h, flags, type, handle, len, NULL), 0);
}

/* Receives the chunk of `handle`'s reply flagged DONE, of type `type`, and
 * its payload into p (at most cap bytes); returns the payload's length. */
static uint32_t last_chunk(int fd, uint64_t handle, uint16_t type, uint8_t *p, size_t cap)
{
    uint16_t fl, ty;
    uint64_t h;
    uint32_t l;
    chunk(fd, &fl, &ty, &h, &l);
    ck_assert_uint_eq(h, handle);
    ck_assert_uint_eq(ty, type);
    ck_assert_uint_eq(fl, NBD_REPLY_FLAG_DONE);
    ck_assert_uint_le(l, cap);
    recvn(fd, p, l);
    return l;
}

/* Receives an error chunk for `handle` and returns its error value. */
static uint32_t error_chunk(int fd, uint64_t handle)
{
    uint16_t ml;
    uint32_t e;
    uint8_t p[NBD_ERROR_CHUNK_MAX];
    const char *msg;
    uint32_t l = last_chunk(fd, handle, NBD_REPLY_TYPE_ERROR, p, sizeof p);
    ck_assert_int_eq(nbd_parse_error_payload(p, l, &e, &msg, &ml, NULL), 0);
    ck_assert_uint_gt(ml, 0); /* a message for humans */
    return e;
}

static void request_flags(int fd, uint16_t flags, uint16_t type, uint64_t handle, uint64_t off,
                          uint32_t len)
{
    uint8_t q[NBD_REQUEST_LEN];
    nbd_encode_request(q, flags, type, handle, off, len);
    sendn(fd, q, sizeof q);
}

static void request(int fd, uint16_t type, uint64_t handle, uint64_t off, uint32_t len,
                    const void *payload)
{
    uint8_t q[NBD_REQUEST_LEN];
    nbd_encode_request(q, 0, type, handle, off, len);
    sendn(fd, q, sizeof q);
    if (payload)
        sendn(fd, payload, len);
}

static uint32_t reply(int fd, uint64_t *handle)
{
    uint8_t h[NBD_SIMPLE_LEN];
    uint32_t e;
    recvn(fd, h, sizeof h);
    ck_assert_int_eq(nbd_parse_simple_reply(h, sizeof h, &e, handle, NULL), 0);
    return e;
}

START_TEST(test_nbdfront_list_and_round_trip)
{
    int fd = client();
    uint8_t m[NBD_OPT_HDR_LEN];
    sendn(fd, m, nbd_encode_option(m, NBD_OPT_LIST, 0));
    int names = 0;
    for (;;) {
        uint8_t h[NBD_REP_HDR_LEN], d[300];
        uint32_t o, t, l;
        recvn(fd, h, sizeof h);
        ck_assert_int_eq(nbd_parse_rep_header(h, sizeof h, &o, &t, &l, NULL), 0);
        if (l)
            recvn(fd, d, l);
        if (t != NBD_REP_SERVER) {
            ck_assert_uint_eq(t, NBD_REP_ACK);
            break;
        }
        names++;
    }
    ck_assert_int_eq(names, 2);
    uint64_t size = 0;
    ck_assert_uint_eq(go(fd, "nope", &size), NBD_REP_ERR_UNKNOWN);
    ck_assert_uint_eq(go(fd, "red", &size), NBD_REP_ACK);
    ck_assert_uint_eq(size, 1 << 20);
    char w[4096], r[4096];
    memset(w, 'q', sizeof w);
    request(fd, NBD_CMD_WRITE, 1, 8192, sizeof w, w);
    uint64_t h;
    ck_assert_uint_eq(reply(fd, &h), 0);
    ck_assert_uint_eq(h, 1);
    request(fd, NBD_CMD_READ, 2, 8192, sizeof r, NULL);
    ck_assert_uint_eq(reply(fd, &h), 0);
    recvn(fd, r, sizeof r);
    ck_assert(memcmp(r, w, sizeof r) == 0);
    request(fd, NBD_CMD_READ, 3, (1 << 20) - 100, 200, NULL);
    ck_assert_uint_eq(reply(fd, &h), NBD_EINVAL);
    close(fd);
}
END_TEST

/* Without NBD_OPT_STRUCTURED_REPLY every reply is simple and DF is neither
 * offered nor accepted. */
START_TEST(test_nbdfront_simple_without_negotiation)
{
    int fd = client();
    uint64_t size, h;
    uint16_t tf = 0;
    ck_assert_uint_eq(go_flags(fd, "blue", &size, &tf), NBD_REP_ACK);
    ck_assert_uint_eq(tf & NBD_FLAG_SEND_DF, 0);
    request(fd, NBD_CMD_READ, 1, 0, 0, NULL); /* zero-length READ */
    ck_assert_uint_eq(reply(fd, &h), 0);
    ck_assert_uint_eq(h, 1);
    request_flags(fd, NBD_CMD_FLAG_DF, NBD_CMD_READ, 2, 0, 512);
    ck_assert_uint_eq(reply(fd, &h), NBD_EINVAL);
    ck_assert_uint_eq(h, 2);
    request(fd, NBD_CMD_FLUSH, 3, 0, 0, NULL);
    ck_assert_uint_eq(reply(fd, &h), 0);
    close(fd);
}
END_TEST

/* NBD_OPT_STRUCTURED_REPLY: ACK once, ERR_INVALID with data or a second
 * time; then READs come back as one OFFSET_DATA chunk flagged DONE, errors
 * as ERROR chunks (never a simple reply to a READ), other successes as
 * simple replies. */
START_TEST(test_nbdfront_structured_replies)
{
    int fd = client();
    ck_assert_uint_eq(option(fd, NBD_OPT_STRUCTURED_REPLY, 4), NBD_REP_ERR_INVALID);
    ck_assert_uint_eq(option(fd, NBD_OPT_STRUCTURED_REPLY, 0), NBD_REP_ACK);
    ck_assert_uint_eq(option(fd, NBD_OPT_STRUCTURED_REPLY, 0), NBD_REP_ERR_INVALID);
    uint64_t size, h;
    uint16_t tf = 0, fl, ty;
    uint32_t len;
    ck_assert_uint_eq(go_flags(fd, "red", &size, &tf), NBD_REP_ACK);
    ck_assert_uint_ne(tf & NBD_FLAG_SEND_DF, 0);
    char w[4096], r[4096];
    for (size_t i = 0; i < sizeof w; i++)
        w[i] = (char)(i * 7);
    request(fd, NBD_CMD_WRITE, 1, 12288, sizeof w, w);
    ck_assert_uint_eq(reply(fd, &h), 0); /* no payload: simple reply allowed */
    ck_assert_uint_eq(h, 1);
    request_flags(fd, NBD_CMD_FLAG_DF, NBD_CMD_READ, 2, 12288, sizeof r);
    chunk(fd, &fl, &ty, &h, &len);
    ck_assert(fl == NBD_REPLY_FLAG_DONE && ty == NBD_REPLY_TYPE_OFFSET_DATA && h == 2);
    ck_assert_uint_eq(len, 8 + sizeof r);
    uint8_t off[8];
    recvn(fd, off, 8);
    uint64_t o = 0;
    for (int i = 0; i < 8; i++)
        o = (o << 8) | off[i];
    ck_assert_uint_eq(o, 12288);
    recvn(fd, r, sizeof r);
    ck_assert(memcmp(r, w, sizeof r) == 0);
    /* zero-length READ: NONE + DONE */
    request(fd, NBD_CMD_READ, 3, 100, 0, NULL);
    chunk(fd, &fl, &ty, &h, &len);
    ck_assert(fl == NBD_REPLY_FLAG_DONE && ty == NBD_REPLY_TYPE_NONE && h == 3 && len == 0);
    /* refused before any IO: READ beyond the end, too long, bad flag;
     * WRITE beyond the end (its payload skipped) */
    request(fd, NBD_CMD_READ, 4, size - 100, 200, NULL);
    ck_assert_uint_eq(error_chunk(fd, 4), NBD_EINVAL);
    request(fd, NBD_CMD_READ, 5, 0, NBD_MAX_PAYLOAD + 1, NULL);
    ck_assert_uint_eq(error_chunk(fd, 5), NBD_EOVERFLOW);
    request_flags(fd, 1u << 3, NBD_CMD_READ, 6, 0, 512);
    ck_assert_uint_eq(error_chunk(fd, 6), NBD_EINVAL);
    request(fd, NBD_CMD_WRITE, 7, size - 100, sizeof w, w);
    ck_assert_uint_eq(error_chunk(fd, 7), NBD_ENOSPC);
    request(fd, 42, 8, 0, 0, NULL); /* unknown command */
    ck_assert_uint_eq(error_chunk(fd, 8), NBD_EINVAL);
    /* the stream is still in sync */
    request(fd, NBD_CMD_READ, 9, 12288, 512, NULL);
    chunk(fd, &fl, &ty, &h, &len);
    ck_assert(fl == NBD_REPLY_FLAG_DONE && ty == NBD_REPLY_TYPE_OFFSET_DATA && h == 9);
    ck_assert_uint_eq(len, 8 + 512);
    recvn(fd, off, 8);
    recvn(fd, r, 512);
    ck_assert(memcmp(r, w, 512) == 0);
    close(fd);
}
END_TEST

static void block_red(void *arg)
{
    (void)arg;
    ck_assert_int_eq(gate_set_tokens(nbdfront_gate(fx.f), "red", 0, 0), 0); /* never served */
}

static void unblock_red(void *arg)
{
    (void)arg;
    ck_assert_int_eq(gate_set_tokens(nbdfront_gate(fx.f), "red", 100, SCHED_UNLIMITED), 0);
}

typedef struct {
    uint64_t queued, served;
} qs_t;

static void read_stats(void *arg)
{
    qs_t *q = arg;
    sched_bucket_stats_t st;
    gate_t *g = nbdfront_gate(fx.f);
    ck_assert_ptr_nonnull(gate_bucket_stats(g, gate_bucket(g, "red", 3, 0), &st));
    q->queued = st.queued;
    q->served = st.served_r + st.served_l + st.served_o;
}

/* Polls bucket red's counters until `want` requests are queued or 5 s
 * have passed; returns the last counters seen, for the caller to check. */
static qs_t wait_queued(uint64_t want)
{
    qs_t q;
    for (int i = 0; i < 500; i++) {
        on_loop(read_stats, &q);
        if (q.queued == want)
            break;
        usleep(10000);
    }
    return q;
}

/* Requests of a bucket without tokens wait in its queue; new tokens let
 * them through; a client that goes away leaves nothing queued. */
START_TEST(test_nbdfront_tokens_gate_and_client_gone)
{
    on_loop(block_red, NULL);
    int fd = client();
    uint64_t size, h;
    ck_assert_uint_eq(go(fd, "red", &size), NBD_REP_ACK);
    for (int i = 0; i < 4; i++)
        request(fd, NBD_CMD_READ, 10 + (uint64_t)i, 0, 512, NULL);
    qs_t q = wait_queued(4);
    ck_assert_uint_eq(q.queued, 4);
    ck_assert_uint_eq(q.served, 0);
    on_loop(unblock_red, NULL);
    char buf[512];
    for (int i = 0; i < 4; i++) {
        ck_assert_uint_eq(reply(fd, &h), 0);
        recvn(fd, buf, sizeof buf);
    }
    on_loop(read_stats, &q);
    ck_assert_uint_eq(q.served, 4);
    /* queue some again, then vanish */
    on_loop(block_red, NULL);
    for (int i = 0; i < 3; i++)
        request(fd, NBD_CMD_READ, 20 + (uint64_t)i, 0, 512, NULL);
    q = wait_queued(3);
    ck_assert_uint_eq(q.queued, 3);
    close(fd);
    q = wait_queued(0);
    ck_assert_uint_eq(q.queued, 0);
}
END_TEST

static void do_shutdown(void *arg)
{
    (void)arg;
    gate_shutdown(nbdfront_gate(fx.f));
}

/* Shutdown answers queued requests with ESHUTDOWN and closes; on a
 * connection with structured replies the answers are error chunks. */
START_TEST(test_nbdfront_shutdown_answers_queued)
{
    on_loop(block_red, NULL);
    int fd = client();
    int fd2 = client();
    uint64_t size, h;
    ck_assert_uint_eq(go(fd, "red", &size), NBD_REP_ACK);
    ck_assert_uint_eq(option(fd2, NBD_OPT_STRUCTURED_REPLY, 0), NBD_REP_ACK);
    ck_assert_uint_eq(go(fd2, "red", &size), NBD_REP_ACK);
    request(fd, NBD_CMD_READ, 7, 0, 512, NULL);
    request(fd, NBD_CMD_FLUSH, 8, 0, 0, NULL);
    request(fd2, NBD_CMD_READ, 17, 0, 512, NULL);
    ck_assert_uint_eq(wait_queued(3).queued, 3); /* all three wait for tokens */
    on_loop(do_shutdown, NULL);
    int seen = 0;
    for (int i = 0; i < 2; i++) {
        ck_assert_uint_eq(reply(fd, &h), NBD_ESHUTDOWN);
        seen |= h == 7 ? 1 : h == 8 ? 2 : 0;
    }
    ck_assert_int_eq(seen, 3);
    ck_assert_uint_eq(error_chunk(fd2, 17), NBD_ESHUTDOWN);
    char c;
    ck_assert_int_eq(recv(fd, &c, 1, 0), 0); /* closed */
    ck_assert_int_eq(recv(fd2, &c, 1, 0), 0);
    close(fd);
    close(fd2);
    /* a new client is not accepted any more (listener disabled): connect
     * may succeed in the backlog, but nothing is served */
}
END_TEST

/* Sends LIST_ or SET_META_CONTEXT for export `name` with `nq` queries (or
 * raw data if `raw`), collects the NBD_REP_META_CONTEXT replies (*nctx,
 * the id and name of the last in *id) and returns the final reply type. */
static uint32_t meta(int fd, uint32_t opt, const char *name, int nq, const char *const *qs,
                     const uint8_t *raw, size_t rawlen, int *nctx, uint32_t *id)
{
    uint8_t m[512];
    size_t n = NBD_OPT_HDR_LEN;
    if (raw) {
        memcpy(m + n, raw, rawlen);
        n += rawlen;
    } else {
        size_t nl = strlen(name);
        uint8_t *p = m + n;
        p[0] = p[1] = p[2] = 0;
        p[3] = (uint8_t)nl;
        memcpy(p + 4, name, nl);
        p += 4 + nl;
        p[0] = p[1] = p[2] = 0;
        p[3] = (uint8_t)nq;
        p += 4;
        for (int i = 0; i < nq; i++) {
            size_t ql = strlen(qs[i]);
            p[0] = p[1] = p[2] = 0;
            p[3] = (uint8_t)ql;
            memcpy(p + 4, qs[i], ql);
            p += 4 + ql;
        }
        n = (size_t)(p - m);
    }
    nbd_encode_option(m, opt, (uint32_t)(n - NBD_OPT_HDR_LEN));
    sendn(fd, m, n);
    *nctx = 0;
    for (;;) {
        uint8_t h[NBD_REP_HDR_LEN], d[64];
        uint32_t o, t, l;
        recvn(fd, h, sizeof h);
        ck_assert_int_eq(nbd_parse_rep_header(h, sizeof h, &o, &t, &l, NULL), 0);
        ck_assert_uint_eq(o, opt);
        ck_assert_uint_le(l, sizeof d);
        if (l)
            recvn(fd, d, l);
        if (t != NBD_REP_META_CONTEXT)
            return t;
        const char *cn;
        uint32_t cl;
        ck_assert_int_eq(nbd_parse_rep_meta_context(d, l, id, &cn, &cl, NULL), 0);
        ck_assert_uint_eq(cl, 15);
        ck_assert(memcmp(cn, "base:allocation", 15) == 0);
        (*nctx)++;
    }
}

/* Receives a BLOCK_STATUS reply for `handle`: one chunk flagged DONE for
 * context `id`; returns the number of descriptors (at most max in x). */
static uint32_t block_status(int fd, uint64_t handle, uint32_t id, nbd_extent_t *x, uint32_t max)
{
    uint32_t cid, n;
    uint8_t p[NBD_BLOCK_STATUS_HDR_LEN + 1024 * NBD_EXTENT_LEN];
    uint32_t l = last_chunk(fd, handle, NBD_REPLY_TYPE_BLOCK_STATUS, p, sizeof p);
    ck_assert_int_eq(nbd_parse_block_status(p, l, &cid, x, max, &n, NULL), 0);
    ck_assert_uint_eq(cid, id);
    return n;
}

/* Meta contexts and BLOCK_STATUS: LIST/SET answers and their bad inputs;
 * extents of a sparse export (data where written, hole + zero elsewhere);
 * REQ_ONE; bad requests; a BLOCK_STATUS is a scheduler item (waits for a
 * token); without a selected context, or with one for another export, it
 * is EINVAL. */
START_TEST(test_nbdfront_block_status)
{
    int fd = client();
    int nctx;
    uint32_t id = 99;
    const char *all[1] = {"base:"};
    const char *want[2] = {"x-foo:bar", "base:allocation"};
    const char *other[2] = {"qemu:dirty-bitmap:a", "base:nothing"};
    /* SET needs structured replies; LIST does not */
    ck_assert_uint_eq(meta(fd, NBD_OPT_SET_META_CONTEXT, "red", 2, want, NULL, 0, &nctx, &id),
                      NBD_REP_ERR_INVALID);
    ck_assert_uint_eq(meta(fd, NBD_OPT_LIST_META_CONTEXT, "red", 0, NULL, NULL, 0, &nctx, &id),
                      NBD_REP_ACK);
    ck_assert_int_eq(nctx, 1);
    ck_assert_uint_eq(id, 0); /* reserved in LIST replies */
    ck_assert_uint_eq(option(fd, NBD_OPT_STRUCTURED_REPLY, 0), NBD_REP_ACK);
    /* bad data: too short, a query overrunning the data, an unknown export */
    static const uint8_t shortd[3] = {0, 0, 0};
    static const uint8_t overrun[16] = {0, 0, 0, 3, 'r', 'e', 'd', 0, 0, 0, 1, 0, 0, 0, 200, 'b'};
    ck_assert_uint_eq(meta(fd, NBD_OPT_LIST_META_CONTEXT, NULL, 0, NULL, shortd, sizeof shortd,
                           &nctx, &id), NBD_REP_ERR_INVALID);
    ck_assert_uint_eq(meta(fd, NBD_OPT_SET_META_CONTEXT, NULL, 0, NULL, overrun, sizeof overrun,
                           &nctx, &id), NBD_REP_ERR_INVALID);
    ck_assert_uint_eq(meta(fd, NBD_OPT_SET_META_CONTEXT, "nope", 2, want, NULL, 0, &nctx, &id),
                      NBD_REP_ERR_UNKNOWN);
    /* queries: "base:" lists it, unknown namespaces and leaves are ignored */
    ck_assert_uint_eq(meta(fd, NBD_OPT_LIST_META_CONTEXT, "red", 1, all, NULL, 0, &nctx, &id),
                      NBD_REP_ACK);
    ck_assert_int_eq(nctx, 1);
    ck_assert_uint_eq(meta(fd, NBD_OPT_LIST_META_CONTEXT, "red", 2, other, NULL, 0, &nctx, &id),
                      NBD_REP_ACK);
    ck_assert_int_eq(nctx, 0);
    ck_assert_uint_eq(meta(fd, NBD_OPT_SET_META_CONTEXT, "red", 1, all, NULL, 0, &nctx, &id),
                      NBD_REP_ACK);
    ck_assert_int_eq(nctx, 0); /* "base:" selects nothing in SET */
    ck_assert_uint_eq(meta(fd, NBD_OPT_SET_META_CONTEXT, "red", 2, want, NULL, 0, &nctx, &id),
                      NBD_REP_ACK);
    ck_assert_int_eq(nctx, 1);
    uint32_t ctx = id;
    uint64_t size, h;
    ck_assert_uint_eq(go(fd, "red", &size), NBD_REP_ACK);
    /* a fresh export is one hole */
    nbd_extent_t x[8];
    request(fd, NBD_CMD_BLOCK_STATUS, 1, 0, (uint32_t)size, NULL);
    ck_assert_uint_eq(block_status(fd, 1, ctx, x, 8), 1);
    ck_assert(x[0].length == size && x[0].flags == (NBD_STATE_HOLE | NBD_STATE_ZERO));
    char w[8192];
    memset(w, 'b', sizeof w);
    request(fd, NBD_CMD_WRITE, 2, 65536, sizeof w, w);
    ck_assert_uint_eq(reply(fd, &h), 0);
    request(fd, NBD_CMD_BLOCK_STATUS, 3, 0, (uint32_t)size, NULL);
    ck_assert_uint_eq(block_status(fd, 3, ctx, x, 8), 3);
    ck_assert(x[0].length == 65536 && x[0].flags == (NBD_STATE_HOLE | NBD_STATE_ZERO));
    ck_assert(x[1].length == 8192 && x[1].flags == 0);
    ck_assert(x[2].length == size - 65536 - 8192 &&
              x[2].flags == (NBD_STATE_HOLE | NBD_STATE_ZERO));
    /* REQ_ONE: one descriptor, inside the request */
    request_flags(fd, NBD_CMD_FLAG_REQ_ONE, NBD_CMD_BLOCK_STATUS, 4, 4096, (uint32_t)size - 4096);
    ck_assert_uint_eq(block_status(fd, 4, ctx, x, 8), 1);
    ck_assert(x[0].length == 65536 - 4096 && x[0].flags == 3);
    request(fd, NBD_CMD_BLOCK_STATUS, 5, 65536 + 100, 1000, NULL);
    ck_assert_uint_eq(block_status(fd, 5, ctx, x, 8), 1);
    ck_assert(x[0].length == 1000 && x[0].flags == 0);
    /* beyond the end, zero length, a bad flag */
    request(fd, NBD_CMD_BLOCK_STATUS, 6, size - 512, 1024, NULL);
    ck_assert_uint_eq(error_chunk(fd, 6), NBD_EINVAL);
    request(fd, NBD_CMD_BLOCK_STATUS, 7, 0, 0, NULL);
    ck_assert_uint_eq(error_chunk(fd, 7), NBD_EINVAL);
    request_flags(fd, NBD_CMD_FLAG_DF, NBD_CMD_BLOCK_STATUS, 8, 0, 512);
    ck_assert_uint_eq(error_chunk(fd, 8), NBD_EINVAL);
    /* one token per request: without tokens it waits in the bucket */
    on_loop(block_red, NULL);
    request(fd, NBD_CMD_BLOCK_STATUS, 9, 0, 4096, NULL);
    ck_assert_uint_eq(wait_queued(1).queued, 1);
    on_loop(unblock_red, NULL);
    ck_assert_uint_eq(block_status(fd, 9, ctx, x, 8), 1);
    close(fd);

    /* no context selected; a context for another export; SET replaced */
    const char *none[1] = {"x-foo:bar"};
    for (int k = 0; k < 3; k++) {
        fd = client();
        ck_assert_uint_eq(option(fd, NBD_OPT_STRUCTURED_REPLY, 0), NBD_REP_ACK);
        if (k == 1)
            ck_assert_uint_eq(meta(fd, NBD_OPT_SET_META_CONTEXT, "blue", 2, want, NULL, 0,
                                   &nctx, &id), NBD_REP_ACK);
        if (k == 2) {
            ck_assert_uint_eq(meta(fd, NBD_OPT_SET_META_CONTEXT, "red", 2, want, NULL, 0,
                                   &nctx, &id), NBD_REP_ACK);
            ck_assert_uint_eq(meta(fd, NBD_OPT_SET_META_CONTEXT, "red", 1, none, NULL, 0,
                                   &nctx, &id), NBD_REP_ACK);
            ck_assert_int_eq(nctx, 0);
        }
        ck_assert_uint_eq(go(fd, "red", &size), NBD_REP_ACK);
        request(fd, NBD_CMD_BLOCK_STATUS, 10, 0, 4096, NULL);
        ck_assert_uint_eq(error_chunk(fd, 10), NBD_EINVAL);
        request(fd, NBD_CMD_READ, 11, 65536, 512, NULL); /* still in sync */
        uint16_t fl, ty;
        uint32_t len;
        chunk(fd, &fl, &ty, &h, &len);
        ck_assert(ty == NBD_REPLY_TYPE_OFFSET_DATA && h == 11 && len == 8 + 512);
        char r[8 + 512];
        recvn(fd, r, sizeof r);
        ck_assert_int_eq(r[8], 'b');
        close(fd);
    }
}
END_TEST

static void break_loop(void *arg)
{
    (void)arg;
    event_base_loopbreak(fx.base);
}

static void read_conns_stats(void *arg)
{
    conns_stats(gate_conns(nbdfront_gate(fx.f)), arg);
}

/* Nonzero once the node closed fd (EOF or reset within 5 s). */
static int closed_by_node(int fd)
{
    char b;
    return recv(fd, &b, 1, 0) <= 0;
}

/* Issue 26 case 6 on a block node: at --max-conns a connection still in
 * the handshake (no export chosen) of the address holding the most is
 * closed for a new client; one in transmission never is (the kernel's
 * client does not reconnect): with only those left, the newcomer is
 * refused. */
START_TEST(test_nbdfront_evicts_only_handshakes)
{
    on_loop(break_loop, NULL); /* the loop runs: a break before it starts is lost */
    stop_front();
    start_front(3);
    uint64_t size = 0;
    int a = client_from(2), b = client_from(2), idle = client_from(2);
    ck_assert_uint_eq(go(a, "red", &size), NBD_REP_ACK);
    ck_assert_uint_eq(go(b, "blue", &size), NBD_REP_ACK);
    ck_assert_uint_eq(option(idle, NBD_OPT_STRUCTURED_REPLY, 0), NBD_REP_ACK);
    int d = client_from(3); /* admitted: greeting and flags (client_from() checks) */
    ck_assert(closed_by_node(idle));
    /* 127.0.0.2 holds 2, both exports in use: the next newcomer is refused */
    int e = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in from = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000004)};
    ck_assert_int_eq(bind(e, (struct sockaddr *)&from, sizeof from), 0);
    struct sockaddr_in to = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)conns_port(gate_conns(nbdfront_gate(fx.f)))),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    ck_assert_int_eq(connect(e, (struct sockaddr *)&to, sizeof to), 0);
    struct timeval tv = {5, 0};
    setsockopt(e, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ck_assert(closed_by_node(e)); /* no greeting: closed at once */
    char w[512], r[512];
    memset(w, 'z', sizeof w);
    uint64_t h;
    request(a, NBD_CMD_WRITE, 1, 0, sizeof w, w); /* both exports still served */
    ck_assert_uint_eq(reply(a, &h), 0);
    request(b, NBD_CMD_READ, 2, 0, sizeof r, NULL);
    ck_assert_uint_eq(reply(b, &h), 0);
    recvn(b, r, sizeof r);
    conns_stats_t cs;
    on_loop(read_conns_stats, &cs);
    ck_assert_uint_eq(cs.evicted, 1);
    close(a);
    close(b);
    close(idle);
    close(d);
    close(e);
}
END_TEST

int main(void)
{
    bqos_log_init("test_nbdfront", BQOS_LOG_ERROR);
    const TTest *const tests[] = {test_nbdfront_list_and_round_trip,
                                  test_nbdfront_simple_without_negotiation,
                                  test_nbdfront_structured_replies,
                                  test_nbdfront_tokens_gate_and_client_gone,
                                  test_nbdfront_shutdown_answers_queued,
                                  test_nbdfront_block_status,
                                  test_nbdfront_evicts_only_handshakes};
    const testlib_case_t c = {.name = "nbdfront", .timeout = 30,
                              .setup = setup, .teardown = teardown};
    return testlib_run_case(&c, tests, sizeof tests / sizeof tests[0]);
}
