/* test_backend.c - Check suite for storage-node/backend: inline (0 workers) and pooled batches against a real memcached, results per op, every op completed exactly once and never from inside submit, a dead server answered with SERVER_ERROR and its going down and up logged once each, what standard clients send (control bytes in keys, large values, cas/touch/append, memcached's own errors), replies into the caller's room, VALUE lines memcached never sends refused. */
#include <check.h>
#include <errno.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/mono.h"
#include "storage-node/mc/backend.h"
#include "tests/testlib.h"

static pid_t mc_pid = -1;
static unsigned mc_port;

static unsigned free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    unsigned p = 0;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
        getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
        p = ntohs(sa.sin_port);
    if (fd >= 0)
        close(fd);
    return p;
}

static int port_open(unsigned port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int ok = fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
    if (fd >= 0)
        close(fd);
    return ok;
}

/* Starts memcached on loopback port `p` and waits until it listens.
 * Returns its pid. */
static pid_t mc_spawn(unsigned p)
{
    char port[16];
    snprintf(port, sizeof port, "%u", p);
    pid_t pid = fork();
    if (pid == 0) {
        if (getuid() == 0)
            execlp("memcached", "memcached", "-u", "nobody", "-l", "127.0.0.1", "-p", port,
                   "-U", "0", (char *)NULL);
        else
            execlp("memcached", "memcached", "-l", "127.0.0.1", "-p", port, "-U", "0",
                   (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 100 && !port_open(p); i++)
        usleep(50000);
    return pid;
}

/* Starts memcached on a free loopback port (suite fixture). */
static void mc_start(void)
{
    mc_port = free_port();
    mc_pid = mc_spawn(mc_port);
}

static void mc_stop(void)
{
    if (mc_pid > 0) {
        kill(mc_pid, SIGTERM);
        waitpid(mc_pid, NULL, 0);
    }
    mc_pid = -1;
}

typedef struct {
    int calls[16];
    int total;
    int in_submit;     /* set around submit: a callback there is a bug */
    int during_submit; /* callbacks seen while in_submit */
    backend_op_t *base_op;
} done_t;

static void on_done(backend_op_t *op, void *arg)
{
    done_t *d = arg;
    d->calls[op - d->base_op]++;
    d->total++;
    if (d->in_submit)
        d->during_submit++;
}

static void op_init(backend_op_t *op, mcp_cmd_t cmd, const char *key, const char *value)
{
    memset(op, 0, sizeof *op);
    op->cmd = cmd;
    op->key = key;
    op->keylen = strlen(key);
    op->value = value ? value : "";
    op->vlen = value ? strlen(value) : 0;
    op->delta = 1;
}

/* Submits ops[0..n-1] as one chain and runs the loop until all are done. */
static void run_chain(struct event_base *base, backend_t *b, done_t *d, backend_op_t *ops,
                      size_t n)
{
    for (size_t i = 0; i + 1 < n; i++)
        ops[i].link.next = &ops[i + 1].link;
    int want = d->total + (int)n;
    d->in_submit = 1;
    ck_assert_int_eq(backend_submit_chain(b, &ops[0], &ops[n - 1], n), 0);
    d->in_submit = 0;
    time_t end = time(NULL) + 10;
    while (d->total < want && time(NULL) < end)
        event_base_loop(base, EVLOOP_ONCE);
    ck_assert_int_eq(d->total, want);
}

/* A backend with its loop and ops, for one test. */
typedef struct {
    struct event_base *base;
    done_t d;
    backend_op_t ops[10];
    backend_t *b;
} fix_t;

static void fix_open(fix_t *x, unsigned port, int nworkers, int batch)
{
    memset(x, 0, sizeof *x);
    x->base = event_base_new();
    x->d.base_op = x->ops;
    int err = 0;
    x->b = backend_new(x->base, "127.0.0.1", port, nworkers, batch, on_done, &x->d, &err);
    ck_assert_ptr_nonnull(x->b);
}

static void fix_close(fix_t *x)
{
    backend_destroy(&x->b);
    ck_assert_ptr_null(x->b);
    event_base_free(x->base);
}

/* One batch mixing gets (hits, a miss, a duplicate key) with stores,
 * delete and incr: every op gets its own result. */
static void check_mixed_batch(int nworkers, int batch)
{
    fix_t x;
    fix_open(&x, mc_port, nworkers, batch);
    backend_op_t *ops = x.ops;

    op_init(&ops[0], MCP_CMD_SET, "t:a", "alpha");
    op_init(&ops[1], MCP_CMD_SET, "t:b", "beta");
    op_init(&ops[2], MCP_CMD_SET, "t:n", "41");
    op_init(&ops[3], MCP_CMD_DELETE, "t:gone", NULL);
    op_init(&ops[4], MCP_CMD_DELETE, "t:c", NULL); /* an earlier case added it */
    run_chain(x.base, x.b, &x.d, ops, 5);
    ck_assert_int_eq(ops[0].reply, MCP_R_STORED);
    ck_assert_int_eq(ops[2].reply, MCP_R_STORED);

    op_init(&ops[0], MCP_CMD_GET, "t:a", NULL);
    op_init(&ops[1], MCP_CMD_ADD, "t:c", "gamma");
    op_init(&ops[2], MCP_CMD_GET, "t:b", NULL);
    op_init(&ops[3], MCP_CMD_GET, "t:missing", NULL);
    op_init(&ops[4], MCP_CMD_INCR, "t:n", NULL);
    op_init(&ops[5], MCP_CMD_GETS, "t:a", NULL);
    op_init(&ops[6], MCP_CMD_DELETE, "t:gone", NULL);
    op_init(&ops[7], MCP_CMD_ADD, "t:a", "again");
    memset(x.d.calls, 0, sizeof x.d.calls);
    double t0 = mono_now();
    run_chain(x.base, x.b, &x.d, ops, 8);
    double t1 = mono_now();
    for (int i = 0; i < 8; i++) {
        ck_assert_int_eq(x.d.calls[i], 1);
        /* stamped when its batch's replies were read */
        ck_assert(ops[i].done_at >= t0 && ops[i].done_at <= t1);
    }
    /* Inline with room for all 8: one exchange (the four gets as one
     * multi-key gets), one stamp; batches of 3: three exchanges. */
    int stamps = 1;
    for (int i = 1; i < 8; i++)
        stamps += ops[i].done_at != ops[i - 1].done_at;
    if (nworkers == 0)
        ck_assert_int_eq(stamps, batch >= 8 ? 1 : 3);
    ck_assert_int_eq(x.d.during_submit, 0);
    ck_assert_int_eq(ops[0].reply, MCP_R_VALUE);
    ck_assert_int_eq((int)ops[0].rvlen, 5);
    ck_assert_int_eq(memcmp(ops[0].rvalue, "alpha", 5), 0);
    ck_assert_int_eq(ops[1].reply, MCP_R_STORED);
    ck_assert_int_eq(ops[2].reply, MCP_R_VALUE);
    ck_assert_int_eq(memcmp(ops[2].rvalue, "beta", 4), 0);
    ck_assert_int_eq(ops[3].reply, MCP_R_MISS);
    ck_assert_int_eq(ops[4].reply, MCP_R_NUMBER);
    ck_assert_int_eq((int)ops[4].number, 42);
    ck_assert_int_eq(ops[5].reply, MCP_R_VALUE);
    ck_assert_int_ne((int)ops[5].rcas, 0);
    ck_assert_int_eq(ops[6].reply, MCP_R_NOT_FOUND);
    ck_assert_int_eq(ops[7].reply, MCP_R_NOT_STORED);
    for (int i = 0; i < 8; i++)
        free(ops[i].rvalue);
    fix_close(&x);
}

START_TEST(test_backend_inline_batch)
{
    check_mixed_batch(0, 64);
}
END_TEST

START_TEST(test_backend_inline_small_batches)
{
    check_mixed_batch(0, 3);
}
END_TEST

START_TEST(test_backend_pool_batch)
{
    check_mixed_batch(2, 4);
}
END_TEST

/* What a standard client may send: keys with control bytes (memcaslap's;
 * libmemcached could not read their VALUE lines back), values larger than
 * the socket buffers in both directions, cas, touch, append, a non-numeric
 * incr, and a value memcached refuses as too large, after which the same
 * connection keeps serving. */
static void check_standard_client(int nworkers)
{
    fix_t x;
    fix_open(&x, mc_port, nworkers, 64);
    backend_op_t *ops = x.ops;
    static char big[600 * 1024], huge[2 * 1024 * 1024];
    memset(big, 'b', sizeof big - 1);
    memset(huge, 'h', sizeof huge - 1);
    const char *k1 = "c:\x10\x10\xf0key", *k2 = "c:\x7f\x01";

    op_init(&ops[0], MCP_CMD_SET, k1, "ctl");
    op_init(&ops[1], MCP_CMD_SET, k2, big);
    op_init(&ops[2], MCP_CMD_SET, "c:huge", huge);
    op_init(&ops[3], MCP_CMD_SET, "c:word", "abc");
    op_init(&ops[4], MCP_CMD_GET, k1, NULL);
    op_init(&ops[5], MCP_CMD_GET, k2, NULL);
    run_chain(x.base, x.b, &x.d, ops, 6);
    ck_assert_int_eq(ops[0].reply, MCP_R_STORED);
    ck_assert_int_eq(ops[1].reply, MCP_R_STORED);
    ck_assert_int_eq(ops[2].reply, MCP_R_SERVER_ERROR);
    ck_assert_str_eq(ops[2].errmsg, "SERVER_ERROR object too large for cache");
    ck_assert_int_eq(ops[3].reply, MCP_R_STORED);
    /* gets go out first: in one batch they see the values from before */
    for (int i = 4; i < 6; i++)
        free(ops[i].rvalue);

    op_init(&ops[0], MCP_CMD_GETS, k1, NULL);
    op_init(&ops[1], MCP_CMD_GET, k2, NULL);
    op_init(&ops[2], MCP_CMD_INCR, "c:word", NULL);
    op_init(&ops[3], MCP_CMD_APPEND, "c:word", "def");
    op_init(&ops[4], MCP_CMD_TOUCH, k1, NULL);
    op_init(&ops[5], MCP_CMD_TOUCH, "c:none", NULL);
    op_init(&ops[6], MCP_CMD_DECR, "c:none", NULL);
    run_chain(x.base, x.b, &x.d, ops, 7);
    ck_assert_int_eq(ops[0].reply, MCP_R_VALUE);
    ck_assert_int_eq((int)ops[0].rvlen, 3);
    ck_assert_int_eq(memcmp(ops[0].rvalue, "ctl", 3), 0);
    ck_assert_int_eq(ops[1].reply, MCP_R_VALUE);
    ck_assert_uint_eq(ops[1].rvlen, sizeof big - 1);
    ck_assert_int_eq(memcmp(ops[1].rvalue, big, sizeof big - 1), 0);
    ck_assert_int_eq(ops[2].reply, MCP_R_NON_NUMERIC);
    ck_assert_int_eq(ops[3].reply, MCP_R_STORED);
    ck_assert_int_eq(ops[4].reply, MCP_R_TOUCHED);
    ck_assert_int_eq(ops[5].reply, MCP_R_NOT_FOUND);
    ck_assert_int_eq(ops[6].reply, MCP_R_NOT_FOUND);
    uint64_t cas = ops[0].rcas;
    for (int i = 0; i < 7; i++)
        free(ops[i].rvalue);

    op_init(&ops[0], MCP_CMD_CAS, k1, "new");
    ops[0].cas = cas;
    op_init(&ops[1], MCP_CMD_CAS, "c:word", "x");
    ops[1].cas = cas + 1000;
    op_init(&ops[2], MCP_CMD_FLUSH_ALL, "", NULL);
    ops[2].keylen = 0;
    run_chain(x.base, x.b, &x.d, ops, 3);
    ck_assert_int_eq(ops[0].reply, MCP_R_STORED);
    ck_assert_int_eq(ops[1].reply, MCP_R_EXISTS);
    ck_assert_int_eq(ops[2].reply, MCP_R_OK);
    fix_close(&x);
}

START_TEST(test_backend_standard_client_inline)
{
    check_standard_client(0);
}
END_TEST

START_TEST(test_backend_standard_client_pool)
{
    check_standard_client(1);
}
END_TEST

/* Nothing listens: every op is answered SERVER_ERROR, exactly once. */
static void check_dead_server(int nworkers)
{
    fix_t x;
    fix_open(&x, free_port(), nworkers, 8);
    backend_op_t *ops = x.ops;
    op_init(&ops[0], MCP_CMD_GET, "x:1", NULL);
    op_init(&ops[1], MCP_CMD_SET, "x:2", "v");
    op_init(&ops[2], MCP_CMD_GET, "x:3", NULL);
    op_init(&ops[3], MCP_CMD_TOUCH, "x:4", NULL);
    run_chain(x.base, x.b, &x.d, ops, 4);
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(x.d.calls[i], 1);
        ck_assert_int_eq(ops[i].reply, MCP_R_SERVER_ERROR);
        ck_assert_int_eq(strncmp(ops[i].errmsg, "SERVER_ERROR", 12), 0);
    }
    fix_close(&x);
}

START_TEST(test_backend_dead_server_inline)
{
    check_dead_server(0);
}
END_TEST

START_TEST(test_backend_dead_server_pool)
{
    check_dead_server(1);
}
END_TEST

/* Stderr on a file until log_end(), which returns what was written
 * (caller frees). */
static FILE *log_file;
static int log_saved = -1;

static void log_start(void)
{
    log_file = tmpfile();
    ck_assert_ptr_nonnull(log_file);
    log_saved = dup(STDERR_FILENO);
    ck_assert_int_eq(dup2(fileno(log_file), STDERR_FILENO), STDERR_FILENO);
}

static char *log_end(void)
{
    ck_assert_int_eq(dup2(log_saved, STDERR_FILENO), STDERR_FILENO);
    close(log_saved);
    char *buf = calloc(1, 65536);
    ck_assert_ptr_nonnull(buf);
    rewind(log_file);
    buf[fread(buf, 1, 65535, log_file)] = '\0';
    fclose(log_file);
    return buf;
}

static int occurrences(const char *s, const char *needle)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

/* Two workers, a server that is dead, then up, then dead again: one warn
 * line when it goes down, one info line when it comes back, however many
 * ops and workers see it (each worker connects on its own). */
START_TEST(test_backend_down_up_logged_once)
{
    bqos_log_init("test", BQOS_LOG_INFO);
    unsigned port = free_port();
    fix_t x;
    fix_open(&x, port, 2, 1);
    backend_op_t *ops = x.ops;
    log_start();
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < 4; i++)
            op_init(&ops[i], MCP_CMD_GET, "x:1", NULL);
        run_chain(x.base, x.b, &x.d, ops, 4);
        ck_assert_int_eq(ops[3].reply, MCP_R_SERVER_ERROR);
        usleep(1100000); /* past the fail-fast second: the workers connect again */
    }
    pid_t pid = mc_spawn(port);
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < 4; i++)
            op_init(&ops[i], MCP_CMD_SET, "x:1", "v");
        run_chain(x.base, x.b, &x.d, ops, 4);
        ck_assert_int_eq(ops[3].reply, MCP_R_STORED);
    }
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    for (int round = 0; round < 3; round++) { /* a fault, then failed connects */
        for (int i = 0; i < 4; i++)
            op_init(&ops[i], MCP_CMD_GET, "x:1", NULL);
        run_chain(x.base, x.b, &x.d, ops, 4);
        usleep(600000);
    }
    char *out = log_end();
    char down[64], up[64];
    snprintf(down, sizeof down, "warn: backend 127.0.0.1:%u down: ", port);
    snprintf(up, sizeof up, "info: backend 127.0.0.1:%u up again\n", port);
    ck_assert_msg(occurrences(out, down) == 2, "want 2 down lines: '%s'", out);
    ck_assert_msg(occurrences(out, up) == 1, "want 1 up line: '%s'", out);
    ck_assert(strstr(out, down) < strstr(out, up));
    ck_assert_ptr_nonnull(strstr(strstr(out, up), down)); /* down again after */
    free(out);
    fix_close(&x);
}
END_TEST

/* Replies into the caller's room (backend_op_t.vbuf): a value, a gets
 * value and a meta reply that fit are copied there (rvalue == vbuf, no
 * allocation); one byte more than vcap is malloc'd; backend_free_value()
 * frees only that one. */
START_TEST(test_backend_values_in_caller_room)
{
    fix_t x;
    fix_open(&x, mc_port, 0, 64);
    backend_op_t *ops = x.ops;
    op_init(&ops[0], MCP_CMD_SET, "r:fit", "0123456789abcdef");
    op_init(&ops[1], MCP_CMD_SET, "r:over", "0123456789abcdefg");
    run_chain(x.base, x.b, &x.d, ops, 2);
    ck_assert_int_eq(ops[1].reply, MCP_R_STORED);
    char room[5][16];
    op_init(&ops[0], MCP_CMD_GET, "r:fit", NULL);
    op_init(&ops[1], MCP_CMD_GET, "r:over", NULL);
    op_init(&ops[2], MCP_CMD_GETS, "r:fit", NULL);
    op_init(&ops[3], MCP_CMD_MG, "r:fit", NULL);
    ops[3].line = "mg r:fit k";
    ops[3].linelen = strlen(ops[3].line);
    op_init(&ops[4], MCP_CMD_GET, "r:none", NULL);
    for (int i = 0; i < 5; i++) {
        ops[i].vbuf = room[i];
        ops[i].vcap = sizeof room[i];
    }
    run_chain(x.base, x.b, &x.d, ops, 5);
    ck_assert_int_eq(ops[0].reply, MCP_R_VALUE);
    ck_assert_ptr_eq(ops[0].rvalue, room[0]);
    ck_assert_int_eq(memcmp(room[0], "0123456789abcdef", 16), 0);
    ck_assert_int_eq(ops[1].reply, MCP_R_VALUE);
    ck_assert_ptr_ne(ops[1].rvalue, room[1]);
    ck_assert_uint_eq(ops[1].rvlen, 17);
    ck_assert_int_eq(memcmp(ops[1].rvalue, "0123456789abcdefg", 17), 0);
    ck_assert_ptr_eq(ops[2].rvalue, room[2]);
    ck_assert_int_ne((int)ops[2].rcas, 0);
    ck_assert_ptr_eq(ops[3].rvalue, room[3]); /* "HD kr:fit\r\n": 11 bytes */
    ck_assert_int_eq(memcmp(room[3], "HD kr:fit\r\n", 11), 0);
    ck_assert_int_eq(ops[4].reply, MCP_R_MISS);
    ck_assert_ptr_null(ops[4].rvalue);
    for (int i = 0; i < 5; i++) {
        backend_free_value(&ops[i]);
        ck_assert_ptr_null(ops[i].rvalue);
    }
    fix_close(&x);
}
END_TEST

/* A store's line, formatted by hand: the largest flags, a negative expiry
 * (memcached stores the item already expired), a cas. */
START_TEST(test_backend_store_line_numbers)
{
    fix_t x;
    fix_open(&x, mc_port, 0, 64);
    backend_op_t *ops = x.ops;
    op_init(&ops[0], MCP_CMD_SET, "n:gone", "v");
    ops[0].exptime = -1;
    op_init(&ops[1], MCP_CMD_SET, "n:flags", "w");
    ops[1].flags = 4294967295u;
    ops[1].exptime = 1000;
    run_chain(x.base, x.b, &x.d, ops, 2);
    ck_assert_int_eq(ops[0].reply, MCP_R_STORED);
    ck_assert_int_eq(ops[1].reply, MCP_R_STORED);
    op_init(&ops[0], MCP_CMD_GET, "n:gone", NULL);
    op_init(&ops[1], MCP_CMD_GETS, "n:flags", NULL);
    run_chain(x.base, x.b, &x.d, ops, 2);
    ck_assert_int_eq(ops[0].reply, MCP_R_MISS);
    ck_assert_int_eq(ops[1].reply, MCP_R_VALUE);
    ck_assert_uint_eq(ops[1].rflags, 4294967295u);
    uint64_t cas = ops[1].rcas;
    backend_free_value(&ops[1]);
    op_init(&ops[0], MCP_CMD_CAS, "n:flags", "x");
    ops[0].cas = cas;
    op_init(&ops[1], MCP_CMD_CAS, "n:flags", "y");
    ops[1].cas = cas;
    run_chain(x.base, x.b, &x.d, ops, 2);
    ck_assert_int_eq(ops[0].reply, MCP_R_STORED);
    ck_assert_int_eq(ops[1].reply, MCP_R_EXISTS);
    fix_close(&x);
}
END_TEST

/* A server that answers the n-th connection's first request with
 * replies[n] (then closes it); the pid of the child that does. */
static pid_t fake_spawn(unsigned *port, const char *const *replies, int n)
{
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    ck_assert_int_eq(bind(lfd, (struct sockaddr *)&sa, sizeof sa), 0);
    ck_assert_int_eq(listen(lfd, 16), 0);
    ck_assert_int_eq(getsockname(lfd, (struct sockaddr *)&sa, &len), 0);
    *port = ntohs(sa.sin_port);
    pid_t pid = fork();
    if (pid == 0) {
        for (int i = 0; i < n; i++) {
            int fd = accept(lfd, NULL, NULL);
            char buf[4096];
            size_t got = 0;
            ssize_t r;
            while (got < sizeof buf && (r = read(fd, buf + got, sizeof buf - got)) > 0 &&
                   !memchr(buf, '\n', got += (size_t)r))
                ;
            ssize_t w = write(fd, replies[i], strlen(replies[i]));
            (void)w;
            usleep(100000);
            close(fd);
        }
        _exit(0);
    }
    close(lfd);
    return pid;
}

/* VALUE lines a memcached never sends are refused (SERVER_ERROR, the
 * connection started afresh), not read as numbers: a length past 64 bits
 * or negative (strtoull() took both, as a length near 2^64), one past
 * memcached's largest item (1 GiB), a sign, no digits, a space too many;
 * a well-formed one with a cas is served. */
START_TEST(test_backend_garbage_value_line)
{
    static const char *const replies[] = {
        "VALUE g:k 0 18446744073709551616\r\nx\r\nEND\r\n",
        "VALUE g:k 0 -1\r\nx\r\nEND\r\n",
        "VALUE g:k +0 1\r\nx\r\nEND\r\n",
        "VALUE g:k 0 \r\nx\r\nEND\r\n",
        "VALUE g:k 0 1 \r\nx\r\nEND\r\n",
        "VALUE g:k 0 9223372036854775807\r\nx\r\nEND\r\n",
        "VALUE g:k 0 1073741825\r\nx\r\nEND\r\n",
        "VALUE g:k 7 1 42\r\nx\r\nEND\r\n",
    };
    int n = (int)(sizeof replies / sizeof replies[0]);
    unsigned port;
    pid_t pid = fake_spawn(&port, replies, n);
    fix_t x;
    fix_open(&x, port, 0, 8);
    for (int i = 0; i < n; i++) {
        op_init(&x.ops[0], MCP_CMD_GETS, "g:k", NULL);
        run_chain(x.base, x.b, &x.d, x.ops, 1);
        if (i < n - 1) {
            ck_assert_msg(x.ops[0].reply == MCP_R_SERVER_ERROR, "reply %d taken: %d", i,
                          (int)x.ops[0].reply);
            ck_assert_ptr_null(x.ops[0].rvalue);
        } else {
            ck_assert_int_eq(x.ops[0].reply, MCP_R_VALUE);
            ck_assert_int_eq((int)x.ops[0].rflags, 7);
            ck_assert_int_eq((int)x.ops[0].rcas, 42);
            ck_assert_int_eq(memcmp(x.ops[0].rvalue, "x", 1), 0);
            backend_free_value(&x.ops[0]);
        }
    }
    fix_close(&x);
    kill(pid, SIGKILL); /* not TERM: the child has check's handler, which ends the group */
    waitpid(pid, NULL, 0);
}
END_TEST

/* Bad settings are refused with -EINVAL; URLs parse or are refused. */
START_TEST(test_backend_bad_arguments)
{
    struct event_base *base = event_base_new();
    done_t d = {0};
    int err = 0;
    ck_assert_ptr_null(backend_new(base, "127.0.0.1", 11211, -1, 8, on_done, &d, &err));
    ck_assert_int_eq(err, -EINVAL);
    err = 0;
    ck_assert_ptr_null(backend_new(base, "127.0.0.1", 11211, 0, 0, on_done, &d, &err));
    ck_assert_int_eq(err, -EINVAL);
    err = 0;
    ck_assert_ptr_null(
        backend_new(base, "127.0.0.1", 11211, 0, BACKEND_BATCH_MAX + 1, on_done, &d, &err));
    ck_assert_int_eq(err, -EINVAL);
    err = 0;
    ck_assert_ptr_null(backend_new(base, "127.0.0.1", 0, 0, 8, on_done, &d, &err));
    ck_assert_int_eq(err, -EINVAL); /* port 0 wants a socket path */
    backend_destroy(NULL);
    char host[64];
    unsigned port = 0;
    TESTLIB_CHECK_HOSTPORT(backend_parse_url, "memcached://10.0.0.1:11211", "10.0.0.1", 11211);
    ck_assert_int_eq(backend_parse_url("memcached://10.0.0.1:0", host, sizeof host, &port),
                     -EINVAL);
    ck_assert_int_eq(backend_parse_url("nohost", host, sizeof host, &port), -EINVAL);
    TESTLIB_CHECK_HOSTPORT(backend_parse_url, "unix:/run/mc.sock", "/run/mc.sock", 0);
    TESTLIB_CHECK_HOSTPORT(backend_parse_url, "memcached://unix:/run/mc.sock", "/run/mc.sock", 0);
    ck_assert_int_eq(backend_parse_url("unix:relative.sock", host, sizeof host, &port), -EINVAL);
    ck_assert_int_eq(backend_parse_url("unix:", host, sizeof host, &port), -EINVAL);
    char longpath[200];
    memset(longpath, 'a', sizeof longpath - 1);
    longpath[0] = '/';
    longpath[sizeof longpath - 1] = '\0';
    char url[220];
    snprintf(url, sizeof url, "unix:%s", longpath);
    ck_assert_int_eq(backend_parse_url(url, host, sizeof host, &port), -EINVAL); /* > sun_path */
    event_base_free(base);
}
END_TEST

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const TTest *const tests[] = {test_backend_inline_batch, test_backend_inline_small_batches,
                                  test_backend_pool_batch, test_backend_dead_server_inline,
                                  test_backend_dead_server_pool, test_backend_bad_arguments,
                                  test_backend_standard_client_inline,
                                  test_backend_standard_client_pool,
                                  test_backend_down_up_logged_once,
                                  test_backend_values_in_caller_room,
                                  test_backend_garbage_value_line,
                                  test_backend_store_line_numbers};
    const testlib_case_t c = {.name = "backend", .tcase = "memcached", .timeout = 60,
                              .setup = mc_start, .teardown = mc_stop, .unchecked = 1};
    return testlib_run_case(&c, tests, sizeof tests / sizeof tests[0]);
}
