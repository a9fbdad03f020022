/* mcload.c - bqos-mcload: closed-loop memcached text-protocol load generator reporting throughput and p50/p99 latency. */
#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include "common/mono.h"
#include "common/num.h"
#include "common/opts.h"
#include "common/rng.h"
#include "common/version.h"



/* One client connection with one request outstanding at a time. */
typedef struct {
    int fd;
    int is_get;
    double sent_at;
    char *out;
    size_t outlen, outoff;
    char in[65536];
    size_t inlen;
    rng_lcg_t rng; /* glibc rand_r()'s sequence, as always */
} lconn_t;

/* --server's value. */
typedef struct {
    char host[256];
    int port;
} server_t;

/* Settings (read-only after parsing; defaults in option_rows()). */
static struct {
    server_t srv;
    int conns;
    double seconds;
    size_t vsize;
    int keys;
    double get_ratio;
    int buckets;
    int help, version;
} cfg;


static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int dial(void)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai;
    char port[16];
    snprintf(port, sizeof port, "%d", cfg.srv.port);
    if (getaddrinfo(cfg.srv.host, port, &hints, &ai) != 0)
        return -1;
    int fd = socket(ai->ai_family, SOCK_STREAM, 0);
    if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
        close(fd);
        fd = -1;
    }
    freeaddrinfo(ai);
    if (fd >= 0) {
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    return fd;
}

/* Builds the next request of c into c->out. */
static void next_request(lconn_t *c, const char *value)
{
    int k = (int)(rng_lcg_next(&c->rng) % (unsigned)cfg.keys);
    int b = k % cfg.buckets;
    c->is_get = (double)rng_lcg_next(&c->rng) / RNG_LCG_MAX < cfg.get_ratio;
    if (c->is_get)
        c->outlen = (size_t)sprintf(c->out, "get b%d:key%d\r\n", b, k);
    else
        c->outlen = (size_t)sprintf(c->out, "set b%d:key%d 0 0 %zu\r\n%s\r\n", b, k,
                                    cfg.vsize, value);
    c->outoff = 0;
    c->inlen = 0;
}

/* Returns 1 when c->in holds a whole reply, -1 on an error reply. */
static int reply_done(const lconn_t *c)
{
    if (c->inlen < 2 || memcmp(c->in + c->inlen - 2, "\r\n", 2) != 0)
        return 0;
    if (strncmp(c->in, "SERVER_ERROR", 12) == 0 || strncmp(c->in, "CLIENT_ERROR", 12) == 0 ||
        strncmp(c->in, "ERROR", 5) == 0)
        return -1;
    if (!c->is_get)
        return 1;
    return c->inlen >= 5 && memcmp(c->in + c->inlen - 5, "END\r\n", 5) == 0;
}

/* OPTS_FUNC: "HOST:PORT" (the last colon splits) into the server_t at
 * target.  Returns 0 or -EINVAL. */
static int parse_server(const char *arg, void *target)
{
    server_t *srv = target;
    const char *colon = strrchr(arg, ':');
    int64_t port;
    if (!colon || (size_t)(colon - arg) >= sizeof srv->host ||
        num_i64_in(colon + 1, 1, 65535, &port) < 0)
        return -EINVAL;
    memcpy(srv->host, arg, (size_t)(colon - arg));
    srv->host[colon - arg] = '\0';
    srv->port = (int)port;
    return 0;
}

/* What --help prints around the option rows. */
static const opts_usage_t usage = {
    .head = "NAME\n    bqos-mcload - closed-loop memcached load: throughput, p50/p99 latency\n\n"
            "SYNOPSIS\n    bqos-mcload [--server HOST:PORT] [--conns N] [--seconds S]\n"
            "                [--value-size B] [--keys K] [--get-ratio R] [--buckets N]\n\n"
            "DESCRIPTION\n"
            "    Opens N connections, each with one request outstanding at a time\n"
            "    (get with probability R, else set of a B-byte value) on keys\n"
            "    bI:keyJ (J < K, I = J mod N buckets).  First sets every key once.\n"
            "    Prints one line: ops, seconds, ops_per_sec, p50_us, p99_us, errors.\n\n"
            "OPTIONS\n",
    .layout = OPTS_LAYOUT_TABLE,
    .indent = 4,
    .width = 23,
};

#define NOPTS 9

/* Fills rows[NOPTS], the option table, with targets in cfg. */
static void option_rows(opts_row_t *rows)
{
    const opts_row_t t[] = {
        {.name = "server", .type = OPTS_FUNC, .target = &cfg.srv, .func = parse_server,
         .arg = "HOST:PORT", .deflt = "127.0.0.1:11211", .help = "memcached to load"},
        {.name = "conns", .type = OPTS_INT, .target = &cfg.conns, .arg = "N", .deflt = "50",
         .min = 1, .max = INT_MAX, .help = "connections, one request in flight on each"},
        {.name = "seconds", .type = OPTS_DOUBLE, .target = &cfg.seconds, .arg = "S",
         .deflt = "5", .flags = OPTS_XMIN, .help = "how long to run"},
        {.name = "value-size", .type = OPTS_SIZE, .target = &cfg.vsize, .arg = "B",
         .deflt = "100", .min = 1, .max = 60000, .help = "bytes per value set"},
        {.name = "keys", .type = OPTS_INT, .target = &cfg.keys, .arg = "K", .deflt = "10000",
         .min = 1, .max = INT_MAX, .help = "keys bI:keyJ, J < K"},
        {.name = "get-ratio", .type = OPTS_DOUBLE, .target = &cfg.get_ratio, .arg = "R",
         .deflt = "0.9", .help = "probability that a request is a get"},
        {.name = "buckets", .type = OPTS_INT, .target = &cfg.buckets, .arg = "N", .deflt = "4",
         .min = 1, .max = INT_MAX, .help = "buckets bI, I = J mod N"},
        OPTS_HELP_ROW(0, &cfg.help, "show this text and exit"),
        OPTS_VERSION_ROW(0, &cfg.version, "show the version and exit"),
    };
    OPTS_COPY_ROWS(rows, t, NOPTS);
}

int main(int argc, char **argv)
{
    opts_row_t rows[NOPTS];
    option_rows(rows);
    const opts_cmd_t cmd = {.prog = "bqos-mcload", .rows = rows, .n = NOPTS};
    int early = opts_start(&cmd, argc, argv, NULL, &usage, NULL);
    if (early >= 0)
        return early;

    char *value = malloc(cfg.vsize + 1);
    lconn_t *cs = calloc((size_t)cfg.conns, sizeof *cs);
    size_t cap = 1 << 20, nlat = 0;
    double *lat = malloc(cap * sizeof *lat);
    int ep = epoll_create1(0);
    if (!value || !cs || !lat || ep < 0) {
        fprintf(stderr, "bqos-mcload: out of memory\n");
        return 1;
    }
    memset(value, 'x', cfg.vsize);
    value[cfg.vsize] = '\0';

    /* Load every key once over one connection (pipelined in chunks). */
    int fd0 = dial();
    if (fd0 < 0) {
        fprintf(stderr, "bqos-mcload: cannot connect to %s:%d\n", cfg.srv.host, cfg.srv.port);
        return 1;
    }
    {
        char *buf = malloc(cfg.vsize + 128);
        char rb[65536];
        for (int k = 0; k < cfg.keys; k++) {
            int n = sprintf(buf, "set b%d:key%d 0 0 %zu noreply\r\n%s\r\n", k % cfg.buckets, k,
                            cfg.vsize, value);
            if (write(fd0, buf, (size_t)n) != n) {
                fprintf(stderr, "bqos-mcload: load failed\n");
                return 1;
            }
        }
        if (write(fd0, "version\r\n", 9) != 9)
            return 1;
        size_t got = 0;
        while (got < 2 || memcmp(rb + got - 2, "\r\n", 2) != 0) {
            ssize_t r = read(fd0, rb + got, sizeof rb - 1 - got);
            if (r <= 0)
                return 1;
            got += (size_t)r;
        }
        free(buf);
        close(fd0);
    }

    for (int i = 0; i < cfg.conns; i++) {
        lconn_t *c = &cs[i];
        rng_lcg_seed(&c->rng, (unsigned)i * 7919u + 1);
        c->out = malloc(cfg.vsize + 128);
        c->fd = dial();
        if (c->fd < 0 || !c->out) {
            fprintf(stderr, "bqos-mcload: cannot open connection %d\n", i);
            return 1;
        }
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
    }
    double start = mono_now(), end = start + cfg.seconds;
    unsigned long ops = 0, errors = 0;
    for (int i = 0; i < cfg.conns; i++) {
        next_request(&cs[i], value);
        cs[i].sent_at = mono_now();
        if (write(cs[i].fd, cs[i].out, cs[i].outlen) != (ssize_t)cs[i].outlen)
            return 1;
    }
    struct epoll_event evs[256];
    double t = start;
    while (t < end) {
        int n = epoll_wait(ep, evs, 256, 100);
        t = mono_now();
        for (int i = 0; i < n; i++) {
            lconn_t *c = evs[i].data.ptr;
            ssize_t r = read(c->fd, c->in + c->inlen, sizeof c->in - c->inlen);
            if (r <= 0) {
                fprintf(stderr, "bqos-mcload: connection lost\n");
                return 1;
            }
            c->inlen += (size_t)r;
            int d = reply_done(c);
            if (!d) {
                if (c->inlen == sizeof c->in)
                    return 1;
                continue;
            }
            if (d < 0)
                errors++;
            ops++;
            if (nlat == cap) {
                cap *= 2;
                lat = realloc(lat, cap * sizeof *lat);
                if (!lat)
                    return 1;
            }
            lat[nlat++] = (t - c->sent_at) * 1e6;
            if (t >= end)
                continue;
            next_request(c, value);
            c->sent_at = mono_now();
            if (write(c->fd, c->out, c->outlen) != (ssize_t)c->outlen)
                return 1;
        }
    }
    double secs = mono_now() - start;
    qsort(lat, nlat, sizeof *lat, cmp_double);
    double p50 = nlat ? lat[nlat / 2] : 0, p99 = nlat ? lat[(size_t)((double)nlat * 0.99)] : 0;
    printf("ops=%lu seconds=%.2f ops_per_sec=%.0f p50_us=%.0f p99_us=%.0f errors=%lu\n", ops,
           secs, (double)ops / secs, p50, p99, errors);
    return errors ? 3 : 0;
}
