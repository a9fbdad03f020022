/* main.c - bqos-controller: command line, ZeroMQ node and admin endpoints, the interval clock and signals around ctrl.c. */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
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

/* Time split of one round, seconds. */
typedef struct {
    double receive, decode, pshift, encode, send;
} split_t;

typedef struct {
    double last_msg; /* monotonic seconds, 0 = never */
} nodex_t;

/* Everything the loop owns; one thread. */
typedef struct {
    const settings_t *set;
    ctrl_t *ctrl;
    bucketfile_t *bf;
    void *zctx, *router, *admin;
    int sigfd;
    proto_msg_t in, out;
    proto_enc_t enc;
    proto_stats_t pst;
    /* clock */
    double started;
    double period_start; /* monotonic seconds */
    uint64_t period;
    uint32_t interval;
    int adopted;
    int round_open;
    double round_start, round_deadline, last_report;
    /* measurements */
    split_t cur, last, total;
    uint64_t nsplits;
    double cpu_mark, cpu_total; /* process CPU seconds (all threads) */
    ctrl_result_t last_res;
    uint64_t push_tokens, push_heartbeats, send_failed, records_sent;
    nodex_t *nx;
    int nnx;
    int stop;
} app_t;


static nodex_t *nodex(app_t *a, int node)
{
    if (node < 0)
        return NULL;
    if (node >= a->nnx) {
        int n = node + 16;
        nodex_t *v = realloc(a->nx, (size_t)n * sizeof *v);
        if (!v)
            return NULL;
        memset(v + a->nnx, 0, (size_t)(n - a->nnx) * sizeof *v);
        a->nx = v;
        a->nnx = n;
    }
    return &a->nx[node];
}

/* CPU seconds used by the whole process (loop, ZeroMQ I/O thread, OpenMP):
 * unlike the wall-clock split it does not grow when the machine is busy. */
static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static double interval_s(const app_t *a)
{
    return a->set->period_s / a->set->intervals;
}

/* ---- sending to nodes ---------------------------------------------------- */

static void fill_timing(app_t *a, proto_msg_t *m, double now)
{
    uint32_t pms = (uint32_t)lround(a->set->period_s * 1000);
    double rem = (a->period_start + a->set->period_s - now) * 1000;
    m->has_timing = 1;
    m->period = a->period;
    m->interval = a->interval;
    m->intervals = (uint32_t)a->set->intervals;
    m->period_ms = pms ? pms : 1;
    m->remaining_ms = rem <= 0 ? 0 : rem >= pms ? pms : (uint32_t)lround(rem);
}

/* Encodes (timed as encode) and sends (timed as send) `m` to node `name`. */
static int send_to(app_t *a, const char *name, proto_msg_t *m)
{
    double t0 = mono_now();
    snprintf(m->node, sizeof m->node, "%s", name);
    int rc = proto_encode(m, &a->enc);
    double t1 = mono_now();
    a->cur.encode += t1 - t0;
    if (rc < 0) {
        log_error("cannot encode %s for %s: %s", proto_type_str(m->type), name, strerror(-rc));
        return rc;
    }
    if (zmq_send(a->router, name, strlen(name), ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0) {
        rc = -zmq_errno();
    } else {
        for (size_t i = 0; i < a->enc.nframes; i++) {
            int more = i + 1 < a->enc.nframes ? ZMQ_SNDMORE : 0;
            if (zmq_send(a->router, a->enc.data[i], a->enc.len[i], more | ZMQ_DONTWAIT) < 0) {
                rc = -zmq_errno();
                break;
            }
        }
    }
    a->cur.send += mono_now() - t1;
    if (rc < 0) {
        a->send_failed++;
        log_debug("send %s to %s failed: %s", proto_type_str(m->type), name, zmq_strerror(-rc));
    }
    return rc;
}

static void send_error(app_t *a, const char *node, const char *code, const char *text)
{
    proto_msg_t m;
    proto_msg_init(&m);
    m.type = PROTO_ERROR;
    snprintf(m.code, sizeof m.code, "%s", code);
    snprintf(m.text, sizeof m.text, "%s", text ? text : "");
    send_to(a, node, &m);
}

/* Tokens (or a heartbeat when the round was skipped) to every up node. */
static void push_all(app_t *a, const ctrl_result_t *res, double now)
{
    const char *const *names;
    size_t nnames;
    uint32_t gen = ctrl_table(a->ctrl, &names, &nnames);
    for (int i = 0; i < ctrl_nnodes(a->ctrl); i++) {
        if (!ctrl_node_up(a->ctrl, i))
            continue;
        ctrl_node_info_t ni;
        ctrl_node_info(a->ctrl, i, &ni);
        const proto_tokens_rec_t *recs;
        size_t n = ctrl_node_tokens(a->ctrl, i, &recs);
        int names_needed = ctrl_node_needs_names(a->ctrl, i);
        proto_msg_t m;
        proto_msg_init(&m);
        fill_timing(a, &m, now);
        m.peer_table = ctrl_node_table_gen(a->ctrl, i);
        if (res->skipped || (n == 0 && !names_needed)) {
            m.type = PROTO_HEARTBEAT;
            a->push_heartbeats++;
        } else {
            m.type = PROTO_TOKENS;
            m.table = gen;
            m.count = n;
            m.tokens = (proto_tokens_rec_t *)recs; /* borrowed; never freed via m */
            if (names_needed) {
                m.has_names = 1;
                m.nnames = nnames;
                m.names = (const char **)names;
                m.has_weights = 1; /* the weights go with the table */
                m.weights = ctrl_table_weights(a->ctrl);
            }
            a->push_tokens++;
            a->records_sent += n;
        }
        send_to(a, ni.name, &m);
    }
}

/* ---- rounds -------------------------------------------------------------- */

static void close_round(app_t *a, double now)
{
    a->round_open = 0;
    a->cur.receive = (a->last_report > a->round_start ? a->last_report : now) - a->round_start;
    ctrl_result_t res;
    double t0 = mono_now();
    int rc = ctrl_compute(a->ctrl, &res);
    a->cur.pshift = mono_now() - t0;
    if (rc < 0) {
        log_error("token computation failed: %s; nodes keep their tokens", strerror(-rc));
        res = (ctrl_result_t){.skipped = 1};
    }
    push_all(a, &res, mono_now());
    a->last = a->cur;
    a->last_res = res;
    a->total.receive += a->cur.receive;
    a->total.decode += a->cur.decode;
    a->total.pshift += a->cur.pshift;
    a->total.encode += a->cur.encode;
    a->total.send += a->cur.send;
    a->nsplits++;
    double cpu = cpu_now();
    if (a->nsplits > 1)
        a->cpu_total += cpu - a->cpu_mark;
    a->cpu_mark = cpu;
    log_debug("round %llu.%u: %s, %d nodes up, %zu buckets, %zu pairs, R %lld L %lld; "
              "ms receive %.3f decode %.3f pshift %.3f (R %.3f, L %.3f) encode %.3f send %.3f",
              (unsigned long long)a->period, a->interval,
              res.skipped ? "skipped" : "computed", res.nodes_up, res.buckets, res.pairs,
              (long long)res.r_tokens, (long long)res.l_tokens, a->cur.receive * 1e3,
              a->cur.decode * 1e3, a->cur.pshift * 1e3, res.t_rpass * 1e3, res.t_lpass * 1e3,
              a->cur.encode * 1e3,
              a->cur.send * 1e3);
    memset(&a->cur, 0, sizeof a->cur);
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
    const settings_t *s = a->set;
    double T = s->period_s;
    uint64_t p = a->period;
    double ps = a->period_start;
    if (now >= ps + T) {
        double n = floor((now - ps) / T);
        p += (uint64_t)n;
        ps += n * T;
    }
    int k = (int)floor((now - ps) / interval_s(a));
    if (k < 0)
        k = 0;
    if (k >= s->intervals)
        k = s->intervals - 1;
    if (p != a->period || (uint32_t)k != a->interval || !a->round_start) {
        if (a->round_open)
            close_round(a, now);
        a->period = p;
        a->period_start = ps;
        a->interval = (uint32_t)k;
        double left = (ps + T - now) / T;
        ctrl_round_begin(a->ctrl, p, (uint32_t)k, left > 0 ? left : 1e-3);
        a->round_open = 1;
        a->round_start = now;
        a->last_report = 0;
        double w = s->wait * interval_s(a);
        a->round_deadline = now + (w < 0.001 ? 0.001 : w);
    }
    /* Reports that came a little before our boundary (the nodes' clocks
     * are ours +- half a millisecond) already count for this round. */
    if (a->round_open && (now >= a->round_deadline || all_reported(a)))
        close_round(a, now);
}

/* A controller that just started takes the period numbering and phase of
 * the nodes it finds, so their period counters stay valid (restart). */
static void maybe_adopt(app_t *a, const proto_msg_t *m, double now)
{
    if (a->adopted || m->period == 0)
        return;
    a->adopted = 1;
    if (now - a->started > 2 * a->set->period_s)
        return;
    double rem = m->remaining_ms > 0 ? m->remaining_ms / 1000.0
                                     : a->set->period_s - (m->interval + 0.5) * interval_s(a);
    if (rem > a->set->period_s)
        rem = a->set->period_s;
    /* Nodes that already follow our clock (they took it from a welcome)
     * need no adoption. */
    if (m->period == a->period &&
        fabs(now + rem - (a->period_start + a->set->period_s)) < 0.1 * interval_s(a))
        return;
    a->period = m->period;
    a->period_start = now + rem - a->set->period_s;
    a->round_start = 0; /* restart the round on the adopted clock */
    a->round_open = 0;
    log_info("adopted the nodes' clock: period %llu, %.0f ms left",
             (unsigned long long)m->period, rem * 1e3);
    tick(a, now);
}

/* ---- node messages ------------------------------------------------------- */

static int known_node(const char *node, void *arg)
{
    return ctrl_node_find(((app_t *)arg)->ctrl, node) >= 0;
}

static void on_hello(app_t *a, proto_msg_t *m, double now)
{
    if (m->has_timing)
        maybe_adopt(a, m, now);
    int node = ctrl_node_hello(a->ctrl, m->node, m->capacity, m->table, m->names, m->nnames);
    if (node < 0) {
        log_warn("hello from %s refused: %s", m->node, strerror(-node));
        send_error(a, m->node, "bad_message", "registration failed");
        return;
    }
    nodex_t *x = nodex(a, node);
    if (x)
        x->last_msg = now;
    log_info("node %s registered (%zu buckets, capacity %llu IOs/s)", m->node, m->nnames,
             (unsigned long long)m->capacity);
    const char *const *names;
    size_t n;
    proto_msg_t w;
    proto_msg_init(&w);
    w.type = PROTO_WELCOME;
    fill_timing(a, &w, mono_now());
    w.peer_table = m->table;
    w.table = ctrl_table(a->ctrl, &names, &n);
    w.has_names = 1;
    w.nnames = n;
    w.names = (const char **)names;
    w.has_weights = 1;
    w.weights = ctrl_table_weights(a->ctrl);
    send_to(a, m->node, &w);
}

static void on_report(app_t *a, proto_msg_t *m, int node, double now)
{
    if (m->has_names) {
        int rc = ctrl_node_table(a->ctrl, node, m->table, m->names, m->nnames);
        if (rc < 0) {
            log_error("node %s: cannot take its table: %s", m->node, strerror(-rc));
            return;
        }
    }
    int rc = ctrl_node_report(a->ctrl, node, m->period, m->interval, m->table, m->peer_table,
                              m->completions, m->busy_seconds, m->report, m->count);
    if (rc == -ESTALE) {
        proto_stats_note(&a->pst, PROTO_E_TABLE);
        send_error(a, m->node, "unknown_table", "send your bucket names");
    } else if (rc < 0) {
        proto_stats_note(&a->pst, PROTO_E_RANGE);
        send_error(a, m->node, "bad_message", "record outside your table");
    }
    a->last_report = now;
}

static void drain_router(app_t *a)
{
    for (int budget = 0; budget < 100000; budget++) {
        char id[PROTO_NAME_MAX + 1];
        size_t idlen = 0;
        proto_reason_t why;
        double t0 = mono_now();
        int rc = proto_recv(a->router, id, sizeof id - 1, &idlen, &a->in, &a->pst, &why,
                            known_node, a, ZMQ_DONTWAIT);
        double now = mono_now();
        if (rc == -EAGAIN || rc == -EINTR)
            return;
        a->cur.decode += now - t0;
        if (rc == -EPROTO) {
            id[idlen] = '\0';
            log_warn("bad message from '%s' dropped: %s", id, proto_reason_str(why));
            continue;
        }
        if (rc < 0) {
            log_error("receive: %s", zmq_strerror(-rc));
            return;
        }
        proto_msg_t *m = &a->in;
        if (rc == PROTO_RECV_UNKNOWN) {
            if (m->type == PROTO_REPORT)
                maybe_adopt(a, m, now);
            if (m->type != PROTO_GOODBYE)
                send_error(a, m->node, "unknown_node", "say hello first");
            continue;
        }
        if (m->type == PROTO_HELLO) {
            on_hello(a, m, now);
            continue;
        }
        int node = ctrl_node_find(a->ctrl, m->node);
        nodex_t *x = nodex(a, node);
        if (x)
            x->last_msg = now;
        double t1 = mono_now();
        switch (m->type) {
        case PROTO_REPORT:
            maybe_adopt(a, m, now);
            on_report(a, m, node, now);
            break;
        case PROTO_HEARTBEAT:
            ctrl_node_seen(a->ctrl, node, m->peer_table);
            break;
        case PROTO_GOODBYE:
            ctrl_node_goodbye(a->ctrl, node);
            break;
        default:
            proto_stats_note(&a->pst, PROTO_E_TYPE);
            log_debug("node %s sent a %s message; ignored", m->node, proto_type_str(m->type));
            break;
        }
        a->cur.decode += mono_now() - t1;
        tick(a, mono_now());
    }
}

/* ---- configuration changes ----------------------------------------------- */

static double view_bucket(const char *name, void *arg)
{
    return ctrl_bucket_capacity(arg, name);
}

/* Admission for a candidate configuration.  Returns 0 if it may be
 * applied; -EDQUOT (msg filled) if enforce refuses it. */
static int admit(app_t *a, const bucketfile_t *bf, char *msg, size_t size)
{
    admission_view_t v = {
        .total_capacity = ctrl_total_capacity(a->ctrl),
        .bucket_capacity = view_bucket,
        .arg = a->ctrl,
    };
    int rc = admission_check(bf, &v, msg, size);
    if (rc == 0) {
        if (msg[0])
            log_info("admission: %s", msg);
        return 0;
    }
    if (a->set->admission == ADMISSION_ENFORCE) {
        log_warn("admission refused the configuration: %s", msg);
        return rc;
    }
    log_warn("admission (warn only): %s", msg);
    return 0;
}

/* Makes `bf` (owned, consumed) the configuration. */
static int apply(app_t *a, bucketfile_t *bf)
{
    int rc = ctrl_set_buckets(a->ctrl, bf);
    if (rc < 0) {
        bucketfile_destroy(&bf);
        return rc;
    }
    bucketfile_destroy(&a->bf);
    a->bf = bf;
    return 0;
}

/* Re-reads the file.  Returns 0, or an error code name with msg filled. */
static const char *reload(app_t *a, char *msg, size_t size)
{
    bucketfile_t *bf = NULL;
    bucketfile_error_t err;
    int rc = bucketfile_load(a->set->buckets, &bf, &err);
    if (rc < 0) {
        bucketfile_strerror(&err, msg, size);
        log_error("reload: %s; keeping the current buckets", msg);
        return rc == -EINVAL ? "invalid" : "io";
    }
    if (admit(a, bf, msg, size) < 0) {
        bucketfile_destroy(&bf);
        return "admission";
    }
    size_t n = bucketfile_count(bf);
    if (apply(a, bf) < 0) {
        snprintf(msg, size, "out of memory");
        return "internal";
    }
    log_info("loaded %zu buckets from %s", n, a->set->buckets);
    return NULL;
}

/* ---- admin requests ------------------------------------------------------ */

static json_t *reply_error(const char *code, const char *msg)
{
    return json_pack("{s:i, s:b, s:s, s:s}", "v", 1, "ok", 0, "error", code, "message", msg);
}

static json_t *reply_ok(void)
{
    return json_pack("{s:i, s:b}", "v", 1, "ok", 1);
}

static json_t *limit_json(int64_t limit)
{
    return limit == BUCKETFILE_NO_LIMIT ? json_null() : json_integer(limit);
}

static json_t *split_json(const split_t *s, double scale)
{
    return json_pack("{s:f, s:f, s:f, s:f, s:f}", "receive", s->receive * scale, "decode",
                     s->decode * scale, "pshift", s->pshift * scale, "encode", s->encode * scale,
                     "send", s->send * scale);
}

static json_t *cmd_status(app_t *a)
{
    double now = mono_now();
    json_t *r = reply_ok();
    double pms = a->set->period_s * 1000;
    double elapsed = (now - a->period_start) * 1000;
    if (elapsed < 0)
        elapsed = 0;
    json_object_set_new(r, "period", json_integer((json_int_t)a->period));
    json_object_set_new(r, "interval", json_integer(a->interval));
    json_object_set_new(r, "intervals", json_integer(a->set->intervals));
    json_object_set_new(r, "period_ms", json_integer((json_int_t)llround(pms)));
    json_object_set_new(r, "elapsed_ms", json_integer((json_int_t)llround(elapsed)));
    json_t *nodes = json_array();
    for (int i = 0; i < ctrl_nnodes(a->ctrl); i++) {
        ctrl_node_info_t ni;
        ctrl_node_info(a->ctrl, i, &ni);
        nodex_t *x = nodex(a, i);
        json_t *age = x && x->last_msg > 0 ? json_integer((json_int_t)llround((now - x->last_msg) * 1000))
                                           : json_null();
        json_array_append_new(
            nodes, json_pack("{s:s, s:s, s:o, s:I, s:I, s:I}", "name", ni.name, "state",
                             ni.up ? "up" : "down", "last_report_ms", age, "capacity",
                             (json_int_t)llround(ni.capacity), "profile",
                             (json_int_t)llround(ni.profile), "buckets", (json_int_t)ni.buckets));
    }
    json_object_set_new(r, "nodes", nodes);
    json_t *bs = json_array();
    for (int b = 0; b < ctrl_nbuckets(a->ctrl); b++) {
        ctrl_bucket_info_t bi;
        ctrl_bucket_info(a->ctrl, b, &bi);
        uint64_t served = bi.served_r + bi.served_l + bi.served_o;
        double res_tokens = (double)bi.reservation * a->set->period_s;
        int on_track = bi.reservation == 0 || (double)served >= res_tokens ||
                       (double)served >= res_tokens * elapsed / pms || bi.queued == 0;
        json_t *o = json_pack(
            "{s:s, s:I, s:o, s:i, s:I, s:I, s:I, s:I, s:I, s:b, s:I, s:I, s:o}", "name", bi.name,
            "reservation", (json_int_t)bi.reservation, "limit", limit_json(bi.limit), "weight",
            (int)bi.weight, "served", (json_int_t)served, "served_r", (json_int_t)bi.served_r,
            "served_l", (json_int_t)bi.served_l, "served_o", (json_int_t)bi.served_o, "queued",
            (json_int_t)bi.queued, "on_track", on_track, "demand", (json_int_t)bi.demand,
            "r_tokens", (json_int_t)bi.r_tokens, "l_tokens",
            bi.l_tokens == CTRL_UNLIMITED ? json_null() : json_integer(bi.l_tokens));
        json_array_append_new(bs, o);
    }
    json_object_set_new(r, "buckets", bs);
    const ctrl_stats_t *cs = ctrl_stats(a->ctrl);
    json_t *st = json_pack(
        "{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "rounds",
        (json_int_t)cs->rounds, "computed", (json_int_t)cs->computed, "skipped",
        (json_int_t)cs->skipped, "reports", (json_int_t)cs->reports, "stale_reports",
        (json_int_t)cs->stale_reports, "unknown_records", (json_int_t)cs->unknown_records,
        "nodes_marked_down", (json_int_t)cs->nodes_marked_down, "nodes_back_up",
        (json_int_t)cs->nodes_back_up, "push_tokens", (json_int_t)a->push_tokens,
        "push_heartbeats", (json_int_t)a->push_heartbeats, "send_failed",
        (json_int_t)a->send_failed, "messages_ok", (json_int_t)a->pst.ok, "messages_rejected",
        (json_int_t)a->pst.rejected_total);
    json_t *rej = json_object();
    for (int i = 1; i < PROTO_E__COUNT; i++)
        if (a->pst.rejected[i])
            json_object_set_new(rej, proto_reason_str((proto_reason_t)i),
                                json_integer((json_int_t)a->pst.rejected[i]));
    json_object_set_new(st, "rejected", rej);
    json_object_set_new(r, "stats", st);
    json_t *tm = json_object();
    json_object_set_new(tm, "last_ms", split_json(&a->last, 1e3));
    json_object_set_new(tm, "mean_ms",
                        split_json(&a->total, a->nsplits ? 1e3 / (double)a->nsplits : 0));
    json_object_set_new(tm, "rounds", json_integer((json_int_t)a->nsplits));
    json_object_set_new(tm, "cpu_ms_per_round",
                        json_real(a->nsplits > 1 ? a->cpu_total * 1e3 / (double)(a->nsplits - 1) : 0));
    json_object_set_new(tm, "last_skipped", json_boolean(a->last_res.skipped));
    json_object_set_new(r, "timing", tm);
    return r;
}

static json_t *cmd_buckets(app_t *a)
{
    json_t *r = reply_ok();
    json_t *arr = json_array();
    for (size_t i = 0; i < bucketfile_count(a->bf); i++) {
        const bucketfile_bucket_t *b = bucketfile_get(a->bf, i);
        json_array_append_new(arr, json_pack("{s:s, s:I, s:o, s:i}", "name", b->name,
                                             "reservation", (json_int_t)b->reservation, "limit",
                                             limit_json(b->limit), "weight", (int)b->weight));
    }
    json_object_set_new(r, "buckets", arr);
    return r;
}

/* Validates, admits, persists, then applies `bf` (consumed). */
static json_t *commit_change(app_t *a, bucketfile_t *bf, json_t *ok)
{
    char msg[512];
    if (admit(a, bf, msg, sizeof msg) < 0) {
        bucketfile_destroy(&bf);
        json_decref(ok);
        return reply_error("admission", msg);
    }
    int rc = bucketfile_save(bf, a->set->buckets);
    if (rc < 0) {
        snprintf(msg, sizeof msg, "cannot write %s: %s", a->set->buckets, strerror(-rc));
        log_error("%s", msg);
        bucketfile_destroy(&bf);
        json_decref(ok);
        return reply_error("io", msg);
    }
    if (apply(a, bf) < 0) {
        json_decref(ok);
        return reply_error("internal", "out of memory");
    }
    return ok;
}

static int get_rate(json_t *req, const char *key, int64_t max, int64_t *out, char *msg,
                    size_t size)
{
    json_t *v = json_object_get(req, key);
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > max) {
        snprintf(msg, size, "%s must be an integer in 0..%lld", key, (long long)max);
        return -EINVAL;
    }
    *out = json_integer_value(v);
    return 0;
}

static json_t *cmd_set(app_t *a, json_t *req)
{
    char msg[400];
    json_t *jn = json_object_get(req, "name");
    if (!json_is_string(jn))
        return reply_error("bad_request", "\"name\" (string) is required");
    if (!json_object_get(req, "reservation"))
        return reply_error("bad_request", "\"reservation\" is required");
    const char *name = json_string_value(jn);
    size_t nl = json_string_length(jn);
    if (bucketfile_check_name(name, nl) < 0 || strlen(name) != nl)
        return reply_error("invalid", "bad bucket name: 1..250 bytes without whitespace, "
                                      "control characters or ':'");
    bucketfile_bucket_t b = {.limit = BUCKETFILE_NO_LIMIT, .weight = 1};
    memcpy(b.name, name, nl + 1);
    int old = bucketfile_find(a->bf, name);
    if (old >= 0) { /* a change: what the request leaves out stays as it was */
        b.weight = bucketfile_get(a->bf, (size_t)old)->weight;
        b.limit = bucketfile_get(a->bf, (size_t)old)->limit;
    }
    if (get_rate(req, "reservation", BUCKETFILE_MAX_RATE, &b.reservation, msg, sizeof msg) < 0)
        return reply_error("invalid", msg);
    json_t *jl = json_object_get(req, "limit");
    if (jl && json_is_null(jl))
        b.limit = BUCKETFILE_NO_LIMIT; /* explicitly none */
    else if (jl && get_rate(req, "limit", BUCKETFILE_MAX_RATE, &b.limit, msg, sizeof msg) < 0)
        return reply_error("invalid", msg);
    if (json_object_get(req, "weight")) {
        int64_t w;
        if (get_rate(req, "weight", BUCKETFILE_MAX_WEIGHT, &w, msg, sizeof msg) < 0 || w < 1)
            return reply_error("invalid", "weight must be an integer in 1..1000000");
        b.weight = (uint32_t)w;
    }
    bucketfile_error_t err;
    if (bucketfile_check_bucket(&b, &err) < 0) {
        snprintf(msg, sizeof msg, "%s: %s", err.path, err.text);
        return reply_error("invalid", msg);
    }
    bucketfile_t *bf = bucketfile_dup(a->bf);
    if (!bf || bucketfile_set(bf, &b, &err) < 0) {
        bucketfile_destroy(&bf);
        return reply_error("internal", "out of memory");
    }
    json_t *ok = reply_ok();
    json_object_set_new(ok, "created", json_boolean(old < 0));
    json_t *r = commit_change(a, bf, ok);
    if (json_is_true(json_object_get(r, "ok")))
        log_info("bucket %s %s: reservation %lld limit %lld weight %u", b.name,
                 old < 0 ? "created" : "changed", (long long)b.reservation,
                 (long long)(b.limit == BUCKETFILE_NO_LIMIT ? -1 : b.limit), b.weight);
    return r;
}

static json_t *cmd_remove(app_t *a, json_t *req)
{
    json_t *jn = json_object_get(req, "name");
    if (!json_is_string(jn))
        return reply_error("bad_request", "\"name\" (string) is required");
    if (bucketfile_find(a->bf, json_string_value(jn)) < 0)
        return reply_error("not_found", "no such bucket");
    bucketfile_t *bf = bucketfile_dup(a->bf);
    if (!bf)
        return reply_error("internal", "out of memory");
    bucketfile_remove(bf, json_string_value(jn));
    json_t *r = commit_change(a, bf, reply_ok());
    if (json_is_true(json_object_get(r, "ok")))
        log_info("bucket %s removed", json_string_value(jn));
    return r;
}

static json_t *cmd_reload(app_t *a)
{
    char msg[512];
    const char *code = reload(a, msg, sizeof msg);
    if (code)
        return reply_error(code, msg);
    json_t *r = reply_ok();
    json_object_set_new(r, "buckets", json_integer((json_int_t)bucketfile_count(a->bf)));
    return r;
}

static json_t *admin_request(app_t *a, const char *data, size_t len)
{
    json_error_t jerr;
    json_t *req = json_loadb(data, len, 0, &jerr);
    if (!json_is_object(req)) {
        json_decref(req);
        return reply_error("bad_request", "request must be a JSON object");
    }
    json_t *r;
    json_t *v = json_object_get(req, "v");
    const char *cmd = json_string_value(json_object_get(req, "cmd"));
    if (!json_is_integer(v) || json_integer_value(v) != 1)
        r = reply_error("bad_request", "\"v\" must be 1");
    else if (!cmd)
        r = reply_error("bad_request", "\"cmd\" (string) is required");
    else if (strcmp(cmd, "status") == 0)
        r = cmd_status(a);
    else if (strcmp(cmd, "buckets") == 0)
        r = cmd_buckets(a);
    else if (strcmp(cmd, "set") == 0)
        r = cmd_set(a, req);
    else if (strcmp(cmd, "remove") == 0)
        r = cmd_remove(a, req);
    else if (strcmp(cmd, "reload") == 0)
        r = cmd_reload(a);
    else
        r = reply_error("bad_request", "unknown cmd");
    json_decref(req);
    return r;
}

static void drain_admin(app_t *a)
{
    for (;;) {
        zmq_msg_t msg;
        zmq_msg_init(&msg);
        if (zmq_msg_recv(&msg, a->admin, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&msg);
            return;
        }
        /* REP: a multipart request is read whole, answered once. */
        int more = zmq_msg_more(&msg);
        json_t *r = more ? reply_error("bad_request", "one frame per request")
                         : admin_request(a, zmq_msg_data(&msg), zmq_msg_size(&msg));
        zmq_msg_close(&msg);
        while (more) {
            zmq_msg_t x;
            zmq_msg_init(&x);
            if (zmq_msg_recv(&x, a->admin, 0) < 0) {
                zmq_msg_close(&x);
                break;
            }
            more = zmq_msg_more(&x);
            zmq_msg_close(&x);
        }
        char *text = r ? json_dumps(r, JSON_COMPACT) : NULL;
        json_decref(r);
        const char *out = text ? text : "{\"v\":1,\"ok\":false,\"error\":\"internal\","
                                        "\"message\":\"out of memory\"}";
        if (zmq_send(a->admin, out, strlen(out), 0) < 0)
            log_warn("admin reply failed: %s", zmq_strerror(zmq_errno()));
        free(text);
    }
}

/* ---- main ---------------------------------------------------------------- */

static void on_signals(app_t *a)
{
    struct signalfd_siginfo si;
    while (read(a->sigfd, &si, sizeof si) == (ssize_t)sizeof si) {
        if (si.ssi_signo == SIGHUP) {
            char msg[512];
            log_info("SIGHUP: reloading %s", a->set->buckets);
            reload(a, msg, sizeof msg);
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
    proto_msg_init(&a.in);
    proto_msg_init(&a.out);
    proto_enc_init(&a.enc);

    bucketfile_error_t err;
    int rc = bucketfile_load(set.buckets, &a.bf, &err);
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
    if (!a.ctrl || ctrl_set_buckets(a.ctrl, a.bf) < 0) {
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
        !(a.admin = bind_sock(a.zctx, ZMQ_REP, set.admin)))
        goto out;
    log_info("bqos-controller %s: %zu buckets from %s, nodes on %s, admin on %s, period %.3f s "
             "in %d intervals, admission %s",
             BQOS_VERSION, bucketfile_count(a.bf), set.buckets, set.listen, set.admin,
             set.period_s, set.intervals, set.admission == ADMISSION_ENFORCE ? "enforce" : "warn");

    a.started = mono_now();
    a.period = 1;
    a.period_start = a.started;
    tick(&a, a.started);
    while (!a.stop) {
        double now = mono_now();
        tick(&a, now);
        double next = a.round_open ? a.round_deadline
                                   : a.period_start + (a.interval + 1) * interval_s(&a);
        long tmo = (long)ceil((next - now) * 1000);
        if (tmo < 0)
            tmo = 0;
        zmq_pollitem_t items[3] = {
            {a.router, 0, ZMQ_POLLIN, 0},
            {a.admin, 0, ZMQ_POLLIN, 0},
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
            drain_router(&a);
        if (items[1].revents & ZMQ_POLLIN)
            drain_admin(&a);
        if (items[2].revents & ZMQ_POLLIN)
            on_signals(&a);
    }
    status = 0;
out:
    if (a.router)
        zmq_close(a.router);
    if (a.admin)
        zmq_close(a.admin);
    if (a.zctx)
        zmq_ctx_term(a.zctx);
    if (a.sigfd >= 0)
        close(a.sigfd);
    proto_msg_clear(&a.in);
    proto_msg_clear(&a.out);
    proto_enc_clear(&a.enc);
    ctrl_destroy(&a.ctrl);
    bucketfile_destroy(&a.bf);
    free(a.nx);
    return status;
}
