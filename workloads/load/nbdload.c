/* nbdload.c - bqos-nbd-load: drive NBD block nodes with a bqos-load scenario (every bucket an export, 4 KiB random reads) and report what each bucket got. */
#include <errno.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/opts.h"
#include "common/rng.h"
#include "common/version.h"
#include "storage-node/nbd/nbd.h"
#include "workloads/driver.h"
#include "workloads/report.h"
#include "workloads/scenario.h"

/* --help: this manual around the option rows. */
static const opts_usage_t usage = DRIVER_USAGE(
    "NAME\n"
    "    bqos-nbd-load - bucket-aware block load generator for NBD servers\n"
    "\n"
    "SYNOPSIS\n"
    "    bqos-nbd-load [OPTIONS] SCENARIO.json\n"
    "    bqos-nbd-load --profile SECONDS [OPTIONS] SCENARIO.json\n"
    "\n"
    "DESCRIPTION\n"
    "    Runs a bqos-load scenario (docs/workloads.md) against NBD servers such as\n"
    "    bqos-nbd-node: every bucket is the export of the same name on each server,\n"
    "    and every request is a read of --block-size bytes at a uniformly random\n"
    "    aligned offset.  For every bucket and every position in its active server\n"
    "    set one thread keeps the bucket's OUTSTANDING requests pipelined on one NBD\n"
    "    connection (closed loop), or issues them at the bucket's rate (open loop,\n"
    "    \"demand_ratio\"; split over the positions by \"split_zipf\"), moving to\n"
    "    the new server at each demand change.  Positions map to the active servers\n"
    "    in a random order drawn per demand change, so that a change re-deals the\n"
    "    split even when the set of servers stays the same.  The\n"
    "    scenario's workload.get_ratio, value_size and preload are ignored.  At the\n"
    "    end it prints bqos-load's table and, with --out, writes the same CSV files\n"
    "    and summary.json as bqos-load (bqos-load --table reads them).\n"
    "\n"
    "OPTIONS\n",
    /* the option rows */
    "\n"
    "EXIT STATUS\n"
    "    0 when the run completed, 1 on a failure, 2 on bad usage.\n"
    "\n"
    "EXAMPLE\n"
    "    bqos-nbd-load -s s1=127.0.0.1:10809 -d 10 -o out/run examples/exp5.json\n"
    "\n"
    "SEE ALSO\n"
    "    bqos-load(1), bqos-nbd-node(1), docs/nbd.md\n");

typedef struct {
    const scenario_t *s;
    report_t *rep;
    driver_run_t d; /* the threads, the clock and the stop flag */
    double align;
    uint32_t bs;
} run_t;

/* One client thread: bucket b at position pos of its active set (or a fixed
 * server when profiling), k requests pipelined. */
typedef struct {
    run_t *run;
    size_t b;
    int pos;
    int server;            /* >= 0: profile mode, fixed server */
    int k;
    double t0, t1;         /* profile window */
    uint64_t done;         /* profile: IOs completed in the window */
    uint64_t seed;
} worker_t;

static int recv_all(int fd, void *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = recv(fd, (char *)buf + got, n - got, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return r == 0 ? -ECONNRESET : -errno;
        got += (size_t)r;
    }
    return 0;
}

static int send_all(int fd, const void *buf, size_t n)
{
    size_t sent = 0;
    while (sent < n) {
        ssize_t r = send(fd, (const char *)buf + sent, n - sent, MSG_NOSIGNAL);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -errno;
        sent += (size_t)r;
    }
    return 0;
}

/* Connects to host:port, negotiates export `name` with NBD_OPT_GO and sets
 * *size.  Returns the socket, or -errno (-ENOENT: no such export). */
static int nbd_open(const char *host, int port, const char *name, uint64_t *size)
{
    struct addrinfo hints = {0}, *ai = NULL;
    char ps[16];
    hints.ai_socktype = SOCK_STREAM;
    snprintf(ps, sizeof ps, "%d", port);
    if (getaddrinfo(host, ps, &hints, &ai) != 0 || !ai)
        return -EHOSTUNREACH;
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int rc = 0;
    if (fd < 0) {
        rc = -errno;
        goto out;
    }
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
        rc = -errno;
        goto out;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct timeval tv = {10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    uint8_t g[NBD_GREETING_LEN];
    if ((rc = recv_all(fd, g, sizeof g)) < 0)
        goto out;
    if (memcmp(g, "NBDMAGICIHAVEOPT", 16) != 0 || !(g[17] & NBD_FLAG_FIXED_NEWSTYLE)) {
        rc = -EPROTO;
        goto out;
    }
    size_t nl = strlen(name);
    uint8_t m[4 + NBD_OPT_HDR_LEN + 4 + 256 + 2];
    m[0] = m[1] = m[2] = 0;
    m[3] = NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES;
    size_t n = 4 + nbd_encode_option(m + 4, NBD_OPT_GO, (uint32_t)(4 + nl + 2));
    m[n] = m[n + 1] = m[n + 2] = 0;
    m[n + 3] = (uint8_t)nl;
    memcpy(m + n + 4, name, nl);
    n += 4 + nl;
    m[n++] = 0;
    m[n++] = 0;
    if ((rc = send_all(fd, m, n)) < 0)
        goto out;
    *size = 0;
    for (;;) {
        uint8_t h[NBD_REP_HDR_LEN], d[64];
        uint32_t opt, type, len;
        if ((rc = recv_all(fd, h, sizeof h)) < 0)
            goto out;
        if (nbd_parse_rep_header(h, sizeof h, &opt, &type, &len, NULL) < 0 || len > sizeof d) {
            rc = -EPROTO;
            goto out;
        }
        if (len && (rc = recv_all(fd, d, len)) < 0)
            goto out;
        if (type == NBD_REP_ACK)
            break;
        if (type & NBD_REP_FLAG_ERROR) {
            rc = type == NBD_REP_ERR_UNKNOWN ? -ENOENT : -EPROTO;
            goto out;
        }
        if (type == NBD_REP_INFO && len >= 12 && d[0] == 0 && d[1] == NBD_INFO_EXPORT)
            for (int i = 0; i < 8; i++)
                *size = (*size << 8) | d[2 + i];
    }
    if (*size == 0)
        rc = -EPROTO;
out:
    freeaddrinfo(ai);
    if (rc < 0) {
        if (fd >= 0)
            close(fd);
        return rc;
    }
    return fd;
}

/* Sends DISC and closes. */
static void nbd_close(int fd)
{
    uint8_t q[NBD_REQUEST_LEN];
    nbd_encode_request(q, 0, NBD_CMD_DISC, 0, 0, 0);
    send_all(fd, q, sizeof q);
    close(fd);
}

/* Reads one reply (and its data).  Returns the NBD error (0 ok) or -errno. */
static int read_reply(int fd, uint8_t *buf, uint32_t bs)
{
    uint8_t h[NBD_SIMPLE_LEN];
    uint32_t e;
    uint64_t handle;
    int rc = recv_all(fd, h, sizeof h);
    if (rc < 0)
        return rc;
    if (nbd_parse_simple_reply(h, sizeof h, &e, &handle, NULL) < 0)
        return -EPROTO;
    if (e == 0 && (rc = recv_all(fd, buf, bs)) < 0)
        return rc;
    return (int)e;
}

/* The index in ph->servers that position `pos` of bucket b uses: the
 * phase's servers in a random order drawn per bucket and phase, so that at
 * each demand change the Zipf split of the bucket's demand lands on its
 * servers in a new order (phases list servers in ascending order). */
static int shuffled(uint64_t seed, size_t b, const scenario_phase_t *ph,
                    const scenario_bucket_t *bk, int pos)
{
    int order[64], n = ph->n < 64 ? ph->n : 64;
    rng_t x; /* splitmix64 from a raw state, as this sequence always was */
    rng_seed_raw(&x, seed ^ ((uint64_t)b << 20) ^ (uint64_t)(ph - bk->phases) * 0x9e37u);
    for (int i = 0; i < n; i++)
        order[i] = i;
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(rng_next(&x) % (uint64_t)(i + 1));
        int t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    return pos < n ? order[pos] : pos;
}

static void *client_main(void *arg)
{
    worker_t *w = arg;
    run_t *run = w->run;
    const scenario_t *s = run->s;
    const scenario_bucket_t *bk = &s->buckets[w->b];
    rng_t x;
    rng_seed_raw(&x, w->seed);
    uint8_t *buf = malloc(run->bs);
    int fd = -1, cur = -1, inflight = 0;
    uint64_t size = 0, handle = 0;
    driver_pace_t pace = {0};
    if (!buf)
        return NULL;
    driver_nap_until(&run->d.start, 0, 10);
    double t;
    while (driver_running(&run->d, &t)) {
        int srv = w->server;
        if (srv < 0) {
            const scenario_phase_t *ph = scenario_phase_at(bk, t);
            srv = w->pos < ph->n ? ph->servers[shuffled(s->seed, w->b, ph, bk, w->pos)] : -1;
            if (srv >= 0 && bk->rate > 0) /* this position's share of the bucket's rate */
                driver_pace_phase(&pace, bk, ph, w->pos, 1, t, &x);
        }
        if (srv != cur) {
            /* Finish what is in flight on the old server, then move. */
            while (fd >= 0 && inflight > 0) {
                int e = read_reply(fd, buf, run->bs);
                double te = driver_since(&run->d.start);
                if (e < 0)
                    break;
                inflight--;
                if (e == 0) {
                    report_add(run->rep, w->b, (size_t)cur, te);
                    report_add_bytes(run->rep, w->b, te, run->bs);
                } else if (w->server < 0) {
                    report_ended(run->rep, w->b, (size_t)cur, te, 1);
                }
            }
            if (cur >= 0 && inflight > 0 && w->server < 0) /* lost with the connection */
                report_ended(run->rep, w->b, (size_t)cur, driver_since(&run->d.start),
                             (uint64_t)inflight);
            if (fd >= 0)
                nbd_close(fd);
            fd = -1;
            inflight = 0;
            cur = srv;
            if (srv < 0) {
                double next = scenario_next_change(bk, t);
                driver_nap_until(&run->d.start, next < run->d.end ? next : run->d.end, 0.05);
                continue;
            }
            const scenario_server_t *sv = &s->servers[srv];
            fd = nbd_open(sv->host, sv->port, bk->name, &size);
            if (fd < 0) {
                log_debug("bucket %s server %s: %s", bk->name, sv->name, strerror(-fd));
                if (w->server < 0)
                    report_add_error(run->rep, w->b);
                cur = -2; /* retry */
                driver_nap_until(&run->d.start, t + 0.1, 0.1);
                continue;
            }
            if (size < run->bs) {
                log_error("export %s on %s is smaller than one block", bk->name, sv->name);
                break;
            }
        }
        if (srv < 0) {
            double next = scenario_next_change(bk, t);
            driver_nap_until(&run->d.start, next < run->d.end ? next : run->d.end, 0.05);
            continue;
        }
        int open = w->server < 0 && bk->rate > 0;
        if (inflight < w->k && (!open || pace.due <= t)) {
            uint64_t off = (rng_next(&x) % (size / run->bs)) * run->bs;
            uint8_t q[NBD_REQUEST_LEN];
            nbd_encode_request(q, 0, NBD_CMD_READ, ++handle, off, run->bs);
            if (send_all(fd, q, sizeof q) < 0) {
                if (w->server < 0 && inflight > 0)
                    report_ended(run->rep, w->b, (size_t)srv, t, (uint64_t)inflight);
                close(fd);
                fd = -1;
                cur = -2;
                inflight = 0;
                continue;
            }
            inflight++;
            if (w->server < 0)
                report_sent(run->rep, w->b, (size_t)srv, t);
            if (open)
                driver_pace_sent(&pace, t);
            continue;
        }
        if (inflight == 0) {
            driver_nap_until(&run->d.start, pace.due, 0.05);
            continue;
        }
        /* Wait for a reply (open loop: no longer than until the next send). */
        int ms = 100;
        if (open && inflight < w->k)
            ms = (int)ceil((pace.due - t) * 1000);
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, ms < 0 ? 0 : ms) <= 0)
            continue;
        int e = read_reply(fd, buf, run->bs);
        double done = driver_since(&run->d.start);
        if (e < 0) {
            log_debug("bucket %s: %s", bk->name, strerror(-e));
            close(fd);
            fd = -1;
            cur = -2;
            if (w->server < 0) {
                report_ended(run->rep, w->b, (size_t)srv, done, (uint64_t)inflight);
                report_add_error(run->rep, w->b);
            }
            inflight = 0;
            continue;
        }
        inflight--;
        if (w->server >= 0) {
            if (e == 0 && done >= w->t0 && done < w->t1)
                w->done++;
        } else if (e == 0) {
            report_add(run->rep, w->b, (size_t)srv, done);
            report_add_bytes(run->rep, w->b, done, run->bs);
        } else {
            report_ended(run->rep, w->b, (size_t)srv, done, 1);
            report_add_error(run->rep, w->b);
        }
    }
    if (fd >= 0)
        close(fd);
    free(buf);
    return NULL;
}

static int drive(run_t *run, worker_t *ws, size_t n, int show)
{
    int rc = driver_start(&run->d, n, client_main, ws, sizeof *ws, 0.3 + (double)n * 100e-6,
                          run->align, run->s->period);
    if (rc == -ENOMEM)
        return rc;
    double t;
    while (rc == 0 && driver_running(&run->d, &t)) {
        driver_nap_until(&run->d.start, t + 1.0, 1.0);
        if (run->rep)
            report_fold(run->rep, driver_since(&run->d.start) - REPORT_FOLD_LAG);
        if (show && run->rep && driver_since(&run->d.start) > 0) {
            uint64_t tot = 0;
            for (size_t b = 0; b < run->s->nbuckets; b++)
                tot += report_total(run->rep, b);
            fprintf(stderr, "\r%6.1fs %10llu IOs", driver_since(&run->d.start),
                    (unsigned long long)tot);
        }
    }
    driver_stop(&run->d);
    if (run->rep)
        report_fold(run->rep, INFINITY);
    if (show)
        fprintf(stderr, "\n");
    return rc;
}

/* The command line; read-only once parsed. */
typedef struct {
    scenario_opts_t so;
    driver_servers_t servers;
    const char *out, *label;
    double period_start, profile;
    int64_t bs;
    int per;
    int quiet;
    bqos_log_level_t level;
    int help, version;
} settings_t;

#define NOPTS 14

/* Fills rows[NOPTS], the option table, with targets in *st. */
static void option_rows(settings_t *st, opts_row_t *rows)
{
    scenario_opts_t *so = &st->so;
    st->servers.so = so;
    const opts_row_t t[] = {
        DRIVER_OPTS_OUT(&st->out),
        DRIVER_OPTS_LABEL(&st->label),
        DRIVER_OPTS_DURATION(&so->duration, .flags = OPTS_XMIN),
        DRIVER_OPTS_CAPACITY(&so->capacity, "override the scenario's per-server capacity",
                             .flags = OPTS_XMIN),
        DRIVER_OPTS_SEED(&so->seed),
        {.name = "server", .shrt = 's', .type = OPTS_FUNC, .target = &st->servers,
         .func = driver_opt_server, .arg = "NAME=HOST:PORT",
         .help = "override server NAME's address; repeatable"},
        {.name = "block-size", .type = OPTS_I64, .target = &st->bs, .arg = "BYTES",
         .deflt = "4096", .min = 1, .max = NBD_MAX_PAYLOAD, .help = "bytes per read"},
        DRIVER_OPTS_PERIOD_START(&st->period_start,
                                 "align the run's QoS periods with the controller's:\n"
                                 "wall-clock time (seconds since the epoch) at which\n"
                                 "one of its periods started",
                                 .flags = OPTS_XMIN),
        DRIVER_OPTS_PROFILE(&st->profile,
                            "measure each server's throughput instead: all\n"
                            "servers at once, closed loop; prints \"server NAME\n"
                            "IOPS\" lines, then \"capacity MEAN\" and \"min MIN\"",
                            .flags = OPTS_XMIN),
        {.name = "profile-outstanding", .type = OPTS_INT, .target = &st->per, .arg = "N",
         .deflt = "10", .min = 1, .max = 1000,
         .help = "requests in flight per server while profiling\n(default {default})"},
        DRIVER_OPTS_QUIET(&st->quiet),
        {.name = "log-level", .type = OPTS_FUNC, .target = &st->level, .func = opts_log_level,
         .arg = "LEVEL", .help = "error, warn, info or debug (stderr)"},
        OPTS_HELP_ROW('h', &st->help, "this text"),
        OPTS_VERSION_ROW('V', &st->version, "print the version"),
    };
    OPTS_COPY_ROWS(rows, t, NOPTS);
}

int main(int argc, char **argv)
{
    settings_t st = {.so = SCENARIO_OPTS_DEFAULT, .level = BQOS_LOG_INFO};
    opts_row_t rows[NOPTS];
    option_rows(&st, rows);
    const opts_cmd_t cmd = {.prog = "bqos-nbd-load", .rows = rows, .n = NOPTS};
    int argi;
    int early = opts_start(&cmd, argc, argv, &argi, &usage, NULL);
    if (early >= 0)
        return early;
    if (argi != argc - 1) {
        opts_fail(&cmd, "need one SCENARIO.json");
        return 2;
    }
    const scenario_opts_t so = st.so;
    const char *out = st.out, *label = st.label;
    const double period_start = st.period_start, profile = st.profile;
    const long bs = (long)st.bs, per = st.per;
    const int quiet = st.quiet;
    const bqos_log_level_t level = st.level;
    bqos_log_init("bqos-nbd-load", level);
    scenario_t *s = NULL;
    jsonloc_err_t se;
    int rc = scenario_load(argv[argi], &so, &s, &se);
    if (rc < 0) {
        fprintf(stderr, "%s:%d:%d: %s\n", se.source, se.line, se.col, se.text);
        return 2;
    }
    driver_raise_nofile();
    signal(SIGPIPE, SIG_IGN);
    run_t run = {.s = s, .align = period_start, .bs = (uint32_t)bs};
    worker_t *ws = NULL;
    size_t n = 0;
    rc = 1;
    if (profile > 0) {
        n = s->nservers * (size_t)per;
        ws = calloc(n, sizeof *ws);
        if (!ws)
            goto done;
        double warm = 0.3;
        for (size_t i = 0; i < n; i++)
            ws[i] = (worker_t){.run = &run, .b = i % s->nbuckets, .server = (int)(i / (size_t)per),
                               .k = 1, .t0 = warm, .t1 = warm + profile, .seed = s->seed + i};
        run.d.end = warm + profile;
        log_info("profiling %zu servers for %.1fs with %ld reads in flight each", s->nservers,
                 profile, per);
        uint64_t *done = NULL;
        if (drive(&run, ws, n, 0) != 0 || !(done = calloc(s->nservers, sizeof *done)))
            goto done;
        for (size_t i = 0; i < n; i++)
            done[i / (size_t)per] += ws[i].done;
        driver_print_capacity(s, done, profile);
        free(done);
        rc = 0;
        goto done;
    }
    run.rep = report_new(s);
    if (!run.rep)
        goto done;
    for (size_t b = 0; b < s->nbuckets; b++)
        n += (size_t)s->buckets[b].max_active;
    ws = calloc(n ? n : 1, sizeof *ws);
    if (!ws)
        goto done;
    size_t i = 0;
    for (size_t b = 0; b < s->nbuckets; b++)
        for (int p = 0; p < s->buckets[b].max_active; p++, i++)
            ws[i] = (worker_t){.run = &run, .b = b, .pos = p, .server = -1,
                               .k = s->buckets[b].outstanding > 0 ? s->buckets[b].outstanding : 1,
                               .seed = s->seed * 1000003u + i * 7919u + 1};
    run.d.end = s->duration;
    log_info("running %zu buckets on %zu servers for %.1fs with %zu client threads", s->nbuckets,
             s->nservers, s->duration, n);
    if (drive(&run, ws, n, !quiet) != 0)
        goto done;
    if (out) {
        if (driver_write_outputs(out, 0755, run.rep, label) < 0)
            goto done;
        char path[4096];
        snprintf(path, sizeof path, "%s/summary.json", out);
        const char *paths[1] = {path};
        report_print_table(stdout, paths, 1, 0);
    } else {
        for (size_t b = 0; b < s->nbuckets; b++)
            printf("%s %.0f\n", s->buckets[b].name,
                   (double)report_total(run.rep, b) / s->duration);
    }
    rc = 0;
done:
    free(ws);
    report_destroy(&run.rep);
    scenario_destroy(&s);
    return rc;
}
