/* main.c - bqos-controller: the options, the wiring of ctrl.c to the clock, the node and admin endpoints, and the loop (rounds, signals). */
#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "common/log.h"
#include "common/mono.h"
#include "common/opts.h"
#include "common/proto.h"
#include "controller/admission.h"
#include "controller/bucketfile.h"
#include "controller/ctrl.h"
#include "controller/daemon/admin.h"
#include "controller/daemon/clock.h"
#include "controller/daemon/nodes.h"
#include "controller/daemon/timing.h"

#ifndef BQOS_VERSION
#define BQOS_VERSION "0.1.0"
#endif

/* ---- options ------------------------------------------------------------- */

enum {
    OPT_BUCKETS = 1, OPT_LISTEN, OPT_ADMIN, OPT_PERIOD, OPT_INTERVALS, OPT_THREADS,
    OPT_ADMISSION, OPT_DOWN_AFTER, OPT_CAPACITY, OPT_SKIP, OPT_WAIT, OPT_APPROX, OPT_LOG_LEVEL,
    OPT_HELP, OPT_VERSION
};

/* One row per option: drives getopt_long and --help. */
static const opts_t opts[] = {
    {"buckets", OPT_BUCKETS, "FILE", "(required)",
     "Bucket reservation file {\"buckets\":[{\"name\":\"red\",\"reservation\":30000,\n"
     "\"limit\":60000,\"weight\":1},...]}, rates in IOs per second.  Re-read on\n"
     "SIGHUP and on the admin \"reload\" request; admin \"set\"/\"remove\" rewrite\n"
     "it atomically."},
    {"listen", OPT_LISTEN, "ENDPOINT", "tcp://127.0.0.1:7070",
     "ZeroMQ endpoint (ROUTER) the storage nodes connect to."},
    {"admin", OPT_ADMIN, "ENDPOINT", "tcp://127.0.0.1:7071",
     "ZeroMQ endpoint (REP) for bqos-ctl: status, buckets, set, remove, reload."},
    {"period", OPT_PERIOD, "DURATION", "1s",
     "QoS period T: reservations and limits are per period.  DURATION is a\n"
     "number with an optional unit ms or s (default s), e.g. 500ms, 2s."},
    {"intervals", OPT_INTERVALS, "K", "5",
     "Redistribution intervals per period (1..1000): nodes report and tokens\n"
     "are recomputed at every interval start."},
    {"threads", OPT_THREADS, "N", "1", "OpenMP threads for pShift (0: OpenMP default)."},
    {"admission", OPT_ADMISSION, "warn|enforce", "warn",
     "Admission control: a configuration whose total reservation exceeds the\n"
     "cluster's estimated capacity, or a bucket whose reservation exceeds the\n"
     "capacity of the servers it is placed on, is logged (warn) or refused\n"
     "(enforce; at start-up, on reload and on set)."},
    {"down-after", OPT_DOWN_AFTER, "N", "3",
     "A node silent for N intervals is marked down and its buckets are\n"
     "re-planned on the others; it is taken back when it talks again."},
    {"capacity", OPT_CAPACITY, "IOPS", "50000",
     "Capacity profile of a node whose hello gives none (IOs per second); the\n"
     "estimate then adapts to what the node reports."},
    {"skip-threshold", OPT_SKIP, "FRACTION", "0.1",
     "Skip the recomputation and push only heartbeats when no demand rate or\n"
     "capacity estimate moved by more than this fraction (0: never skip)."},
    {"report-wait", OPT_WAIT, "FRACTION", "0.25",
     "How long into an interval to wait for missing reports before computing\n"
     "with what arrived, as a fraction of the interval."},
    {"approx-top", OPT_APPROX, "M", "0",
     "pShift approximation (paper III-C2): shift only the top M buckets by\n"
     "tokens and by spare demand; 0 = exact.  Cuts the solve time of large\n"
     "configurations at a small loss of effective capacity."},
    {"log-level", OPT_LOG_LEVEL, "LEVEL", "info",
     "error, warn, info or debug (debug logs the time split of every round)."},
    {"help", OPT_HELP, NULL, NULL, "Print this help and exit."},
    {"version", OPT_VERSION, NULL, NULL, "Print the version and exit."},
};
#define NOPTS (sizeof opts / sizeof opts[0])

/* Read-only after parse_args(). */
typedef struct {
    const char *buckets;
    const char *listen;
    const char *admin;
    double period_s;
    int intervals;
    int threads;
    admission_mode_t admission;
    int down_after;
    double capacity;
    double skip;
    double wait;
    int approx;
    bqos_log_level_t level;
} settings_t;

static void usage(FILE *fp)
{
    fprintf(fp,
            "Usage: bqos-controller --buckets FILE [OPTION]...\n"
            "\n"
            "The bqos controller: every redistribution interval it gathers the storage\n"
            "nodes' reports, estimates each bucket's demand on each node and each node's\n"
            "capacity, places reservation tokens with pShift (then limit tokens on the\n"
            "residual), and pushes every node absolute token counts for the rest of the\n"
            "QoS period.  Limits are hard across nodes; buckets without a limit are not\n"
            "throttled.\n"
            "\n"
            "Options:\n");
    opts_usage(fp, opts, NOPTS);
    fprintf(fp,
            "\n"
            "Signals:\n"
            "  SIGHUP          re-read the bucket file (kept unchanged if invalid or refused)\n"
            "  SIGINT, SIGTERM stop; nodes keep their tokens until the period ends, then\n"
            "                  fall back to their local policy\n"
            "\n"
            "Protocol: docs/protocol.md.  Design and status fields: docs/controller.md.\n"
            "Exit status: 0 after a signal, 1 on a start-up error, 2 on bad usage.\n");
}

static int parse_duration(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || !(v > 0))
        return -EINVAL;
    if (strcmp(end, "ms") == 0)
        v /= 1000;
    else if (*end && strcmp(end, "s") != 0)
        return -EINVAL;
    if (v < 0.001 || v > 3600)
        return -EINVAL;
    *out = v;
    return 0;
}

static int parse_int(const char *s, long lo, long hi, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return -EINVAL;
    *out = (int)v;
    return 0;
}

static int parse_num(const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo) || !(v <= hi))
        return -EINVAL;
    *out = v;
    return 0;
}

/* Returns 0 to run, 1 to exit 0 (help/version), 2 on bad usage. */
static int parse_args(int argc, char **argv, settings_t *s)
{
    *s = (settings_t){
        .listen = "tcp://127.0.0.1:7070",
        .admin = "tcp://127.0.0.1:7071",
        .period_s = 1,
        .intervals = 5,
        .threads = 1,
        .admission = ADMISSION_WARN,
        .down_after = 3,
        .capacity = 50000,
        .skip = 0.1,
        .wait = 0.25,
        .level = BQOS_LOG_INFO,
    };
    struct option lo[NOPTS + 1];
    opts_getopt(opts, NOPTS, lo);
    int c;
    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        int bad = 0;
        switch (c) {
        case OPT_BUCKETS: s->buckets = optarg; break;
        case OPT_LISTEN: s->listen = optarg; break;
        case OPT_ADMIN: s->admin = optarg; break;
        case OPT_PERIOD: bad = parse_duration(optarg, &s->period_s); break;
        case OPT_INTERVALS: bad = parse_int(optarg, 1, 1000, &s->intervals); break;
        case OPT_THREADS: bad = parse_int(optarg, 0, 1024, &s->threads); break;
        case OPT_ADMISSION: bad = admission_parse_mode(optarg, &s->admission); break;
        case OPT_DOWN_AFTER: bad = parse_int(optarg, 1, 1000000, &s->down_after); break;
        case OPT_CAPACITY: bad = parse_num(optarg, 1, 1e12, &s->capacity); break;
        case OPT_SKIP: bad = parse_num(optarg, 0, 1e6, &s->skip); break;
        case OPT_WAIT: bad = parse_num(optarg, 0, 1, &s->wait); break;
        case OPT_APPROX: bad = parse_int(optarg, 0, 100000000, &s->approx); break;
        case OPT_LOG_LEVEL: bad = bqos_log_parse_level(optarg, &s->level); break;
        case OPT_HELP: usage(stdout); return 1;
        case OPT_VERSION: printf("bqos-controller %s\n", BQOS_VERSION); return 1;
        default: fprintf(stderr, "Try 'bqos-controller --help'.\n"); return 2;
        }
        if (bad) {
            fprintf(stderr, "bqos-controller: bad value '%s' for --%s (try --help)\n", optarg,
                    opts_name(opts, NOPTS, c));
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "bqos-controller: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    if (!s->buckets) {
        fprintf(stderr, "bqos-controller: --buckets FILE is required (try --help)\n");
        return 2;
    }
    if (s->period_s * 1000 / s->intervals < 1) {
        fprintf(stderr, "bqos-controller: intervals shorter than 1 ms\n");
        return 2;
    }
    return 0;
}

/* ---- state --------------------------------------------------------------- */

/* Everything the loop owns; one thread. */
typedef struct {
    const settings_t *set;
    ctrl_t *ctrl;
    void *zctx, *router, *asock;
    int sigfd;
    pclock_t clk;
    nodes_t nodes;
    admin_t admin;
    timing_t tm;
    int stop;
} app_t;

/* CPU seconds used by the whole process (loop, ZeroMQ I/O thread, OpenMP):
 * unlike the wall-clock split it does not grow when the machine is busy. */
static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ---- rounds -------------------------------------------------------------- */

/* Computes the round, pushes its tokens and accounts for its time. */
static void close_round(app_t *a, double now)
{
    timing_t *t = &a->tm;
    t->cur.receive = pclock_close(&a->clk, now);
    ctrl_result_t res;
    double t0 = mono_now();
    int rc = ctrl_compute(a->ctrl, &res);
    t->cur.pshift = mono_now() - t0;
    if (rc < 0) {
        log_error("token computation failed: %s; nodes keep their tokens", strerror(-rc));
        res = (ctrl_result_t){.skipped = 1};
    }
    nodes_push(&a->nodes, &res, mono_now());
    t->last = t->cur;
    t->last_res = res;
    t->total.receive += t->cur.receive;
    t->total.decode += t->cur.decode;
    t->total.pshift += t->cur.pshift;
    t->total.encode += t->cur.encode;
    t->total.send += t->cur.send;
    t->nsplits++;
    double cpu = cpu_now();
    if (t->nsplits > 1)
        t->cpu_total += cpu - t->cpu_mark;
    t->cpu_mark = cpu;
    log_debug("round %llu.%u: %s, %d nodes up, %zu buckets, %zu pairs, R %lld L %lld; "
              "ms receive %.3f decode %.3f pshift %.3f (R %.3f, L %.3f) encode %.3f send %.3f",
              (unsigned long long)a->clk.period, a->clk.interval,
              res.skipped ? "skipped" : "computed", res.nodes_up, res.buckets, res.pairs,
              (long long)res.r_tokens, (long long)res.l_tokens, t->cur.receive * 1e3,
              t->cur.decode * 1e3, t->cur.pshift * 1e3, res.t_rpass * 1e3, res.t_lpass * 1e3,
              t->cur.encode * 1e3,
              t->cur.send * 1e3);
    memset(&t->cur, 0, sizeof t->cur);
}

static int all_reported(const app_t *a)
{
    for (int i = 0; i < ctrl_nnodes(a->ctrl); i++)
        if (ctrl_node_up(a->ctrl, i) && !ctrl_node_reported(a->ctrl, i))
            return 0;
    return 1;
}

/* Moves the clock to `now`; starts a round at each interval boundary. */
static void tick(app_t *a, double now)
{
    if (pclock_due(&a->clk, now)) {
        if (a->clk.round_open)
            close_round(a, now);
        double left = pclock_begin(&a->clk, now);
        ctrl_round_begin(a->ctrl, a->clk.period, a->clk.interval, left);
    }
    /* Reports that came a little before our boundary (the nodes' clocks
     * are ours +- half a millisecond) already count for this round. */
    if (a->clk.round_open && (pclock_expired(&a->clk, now) || all_reported(a)))
        close_round(a, now);
}

/* nodes_hooks_t: a node's message carried its clock. */
static void on_adopt(void *arg, const proto_msg_t *m, double now)
{
    app_t *a = arg;
    if (pclock_adopt(&a->clk, m->period, m->interval, m->remaining_ms, now))
        tick(a, now);
}

/* nodes_hooks_t: after a registered node's message. */
static void on_tick(void *arg, double now)
{
    tick(arg, now);
}

/* ---- main ---------------------------------------------------------------- */

static void on_signals(app_t *a)
{
    struct signalfd_siginfo si;
    while (read(a->sigfd, &si, sizeof si) == (ssize_t)sizeof si) {
        if (si.ssi_signo == SIGHUP) {
            char msg[512];
            log_info("SIGHUP: reloading %s", a->set->buckets);
            admin_reload(&a->admin, msg, sizeof msg);
        } else {
            log_info("signal %u: stopping", si.ssi_signo);
            a->stop = 1;
        }
    }
}

static void *bind_sock(void *ctx, int type, const char *ep)
{
    void *s = zmq_socket(ctx, type);
    if (!s)
        return NULL;
    int linger = 0, hwm = 10000, one = 1;
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(s, ZMQ_SNDHWM, &hwm, sizeof hwm);
    zmq_setsockopt(s, ZMQ_RCVHWM, &hwm, sizeof hwm);
    if (type == ZMQ_ROUTER) {
        zmq_setsockopt(s, ZMQ_ROUTER_MANDATORY, &one, sizeof one);
        /* A node that reconnects (same identity) replaces the old pipe. */
        zmq_setsockopt(s, ZMQ_ROUTER_HANDOVER, &one, sizeof one);
    }
    if (zmq_bind(s, ep) < 0) {
        log_error("cannot bind %s: %s", ep, zmq_strerror(zmq_errno()));
        zmq_close(s);
        return NULL;
    }
    return s;
}

int main(int argc, char **argv)
{
    settings_t set;
    int pr = parse_args(argc, argv, &set);
    if (pr)
        return pr == 1 ? 0 : 2;
    bqos_log_init("bqos-controller", set.level);

    /* Every round at 64 nodes x 10,000 buckets moves megabytes through
     * malloc in two threads: ZeroMQ's I/O thread allocates a buffer per
     * report (~45 KB; ~100 KB before protocol v3's compact records) that
     * this thread frees after decoding, and zmq_send allocates a buffer per
     * token message that the I/O thread frees after sending.  With glibc's default trim threshold (128 KiB) the freed top
     * of each heap is handed back to the kernel (brk / MADV_DONTNEED) and
     * page-faulted in again the next round: 150-300 faults and several ms
     * of CPU per round (docs/performance.md, "Controller").  Keep up to
     * 64 MiB of freed memory instead, and take buffers under 32 MiB (full
     * node tables: 800 KB reports) from the heap rather than mmap. */
    mallopt(M_TRIM_THRESHOLD, 64 << 20);
    mallopt(M_MMAP_THRESHOLD, 32 << 20);

    int status = 1;
    app_t a = {.set = &set, .sigfd = -1};
    bucketfile_t *bf = NULL;

    bucketfile_error_t err;
    int rc = bucketfile_load(set.buckets, &bf, &err);
    if (rc < 0) {
        char buf[600];
        log_error("%s", bucketfile_strerror(&err, buf, sizeof buf));
        goto out;
    }
    ctrl_config_t cc = ctrl_config_default();
    cc.period_s = set.period_s;
    cc.intervals = set.intervals;
    cc.threads = set.threads;
    cc.down_after = set.down_after;
    cc.skip_rel = set.skip;
    cc.default_capacity = set.capacity;
    cc.approx_top = (size_t)set.approx;
    cc.table_seed = (uint32_t)time(NULL); /* protocol.md: generations rarely repeat */
    a.ctrl = ctrl_new(&cc);
    if (!a.ctrl || ctrl_set_buckets(a.ctrl, bf) < 0) {
        log_error("out of memory");
        goto out;
    }
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGHUP);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    signal(SIGPIPE, SIG_IGN);
    a.sigfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
    if (a.sigfd < 0) {
        log_error("signalfd: %s", strerror(errno));
        goto out;
    }
    a.zctx = zmq_ctx_new();
    if (!a.zctx || !(a.router = bind_sock(a.zctx, ZMQ_ROUTER, set.listen)) ||
        !(a.asock = bind_sock(a.zctx, ZMQ_REP, set.admin)))
        goto out;
    nodes_init(&a.nodes, a.router, a.ctrl, &a.clk, &a.tm.cur,
               &(nodes_hooks_t){.adopt = on_adopt, .tick = on_tick, .arg = &a});
    a.admin = (admin_t){
        .sock = a.asock,
        .path = set.buckets,
        .mode = set.admission,
        .ctrl = a.ctrl,
        .bf = bf,
        .clk = &a.clk,
        .nodes = &a.nodes,
        .tm = &a.tm,
    };
    bf = NULL; /* the admin endpoint's now */
    log_info("bqos-controller %s: %zu buckets from %s, nodes on %s, admin on %s, period %.3f s "
             "in %d intervals, admission %s",
             BQOS_VERSION, bucketfile_count(a.admin.bf), set.buckets, set.listen, set.admin,
             set.period_s, set.intervals, set.admission == ADMISSION_ENFORCE ? "enforce" : "warn");

    double started = mono_now();
    pclock_init(&a.clk, set.period_s, set.intervals, set.wait, started);
    tick(&a, started);
    while (!a.stop) {
        double now = mono_now();
        tick(&a, now);
        double next = pclock_next(&a.clk);
        long tmo = (long)ceil((next - now) * 1000);
        if (tmo < 0)
            tmo = 0;
        zmq_pollitem_t items[3] = {
            {a.router, 0, ZMQ_POLLIN, 0},
            {a.asock, 0, ZMQ_POLLIN, 0},
            {NULL, a.sigfd, ZMQ_POLLIN, 0},
        };
        int n = zmq_poll(items, 3, tmo);
        if (n < 0) {
            if (zmq_errno() == EINTR)
                continue;
            log_error("poll: %s", zmq_strerror(zmq_errno()));
            goto out;
        }
        if (items[0].revents & ZMQ_POLLIN)
            nodes_drain(&a.nodes);
        if (items[1].revents & ZMQ_POLLIN)
            admin_drain(&a.admin);
        if (items[2].revents & ZMQ_POLLIN)
            on_signals(&a);
    }
    status = 0;
out:
    if (a.router)
        zmq_close(a.router);
    if (a.asock)
        zmq_close(a.asock);
    if (a.zctx)
        zmq_ctx_term(a.zctx);
    if (a.sigfd >= 0)
        close(a.sigfd);
    nodes_clear(&a.nodes);
    ctrl_destroy(&a.ctrl);
    bucketfile_destroy(&a.admin.bf);
    bucketfile_destroy(&bf);
    return status;
}
