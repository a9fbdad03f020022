/* ctrl_bench.c - bqos-ctrl-bench: many simulated storage nodes (DEALER sockets speaking the real protocol) driving a running bqos-controller, for its time split and for tests. */
#include <errno.h>
#include <limits.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "common/bucketfile.h"
#include "common/curvekey.h"
#include "common/log.h"
#include "common/mono.h"
#include "common/opts.h"
#include "common/proto.h"
#include "common/rng.h"
#include "common/version.h"


typedef struct {
    char name[32];
    void *sock;
    int welcomed;
    uint32_t ctl_table;   /* controller table we hold (0 none) */
    uint32_t peer_ack;    /* our table generation the controller holds */
    size_t n;             /* buckets active here */
    const char **names;   /* their names */
    size_t ntable;        /* our table: the active buckets, or all (--full-tables) */
    const char **tnames;
    uint32_t *bucket;     /* global bucket index per table entry */
    uint64_t *served;     /* per table entry, this period */
    int64_t *r_tok, *l_tok;
    double *level;        /* per active entry: its demand level (--changing) */
    uint64_t *bq, *ba, *bs, *bp; /* per active entry: what the controller holds
                             (sparse reports): queued, arrivals, served, period */
    uint32_t *bi;         /* ... and the interval of that record */
    int sparse;           /* the welcome took sparse reports */
    int want_full;
    int since_full;
    uint64_t lp;          /* (period, interval + 1) of the last report, */
    uint32_t lk;          /* 0: none: served moves on by the intervals since */
    uint64_t tokens_msgs, heartbeats, errors, records;
    uint64_t completions;
    /* names in parts (--parts): ours acked / next to send / reports
     * without progress; the controller's table gen, names held, size */
    size_t acked, next;
    int idle;
    uint32_t rx_gen;
    size_t rx_have, rx_of;
    double t_hello, t_named, last_ctl, max_gap;
} fnode_t;

/* The command line; read-only once parsed. */
typedef struct {
    const char *endpoint, *admin;
    int nodes, buckets, active;
    double seconds, capacity, reserved, noise;
    const char *write;
    const char *curve;  /* --curve-dir: NAME.key per node, admin.key, ctrl.pub */
    int full;
    double changing, warmup;
    int no_sparse, full_every, no_renew, parts, busy;
    int ctrl_pid;
    unsigned seed;
    int quiet;
    int help, version;
} bench_cfg_t;

/* What --help prints around the option rows. */
static const opts_usage_t usage = {
    .head = "Usage: bqos-ctrl-bench [OPTION]...\n"
            "\n"
            "Simulates storage nodes against a running bqos-controller: each node is a\n"
            "ZeroMQ DEALER that says hello with its bucket table, follows the controller's\n"
            "timing, sends a report (36-byte records, one per bucket it holds, or only\n"
            "those that moved when the controller takes sparse reports) at every\n"
            "interval start and applies the tokens it gets.  Bucket b is active on\n"
            "--active consecutive nodes starting at a pseudo-random one; its arrivals per\n"
            "interval vary randomly.  At the end it asks the controller's admin endpoint\n"
            "for its status and prints one JSON object: what the nodes saw plus the\n"
            "controller's timing split (receive, decode, pshift, encode, send).\n"
            "\n"
            "Options:\n",
    .layout = OPTS_LAYOUT_LIST,
    .width = 16,
    .tail = "  --help, --version\n",
};

#define NOPTS 24

/* Fills rows[NOPTS], the option table, with targets in *o. */
static void option_rows(bench_cfg_t *o, opts_row_t *rows)
{
    const opts_row_t t[] = {
        {.name = "endpoint", .type = OPTS_STRING, .target = &o->endpoint, .arg = "EP",
         .deflt = "tcp://127.0.0.1:7070", .help = "controller node endpoint"},
        {.name = "admin", .type = OPTS_STRING, .target = &o->admin, .arg = "EP",
         .deflt = "tcp://127.0.0.1:7071", .help = "controller admin endpoint"},
        {.name = "nodes", .type = OPTS_INT, .target = &o->nodes, .arg = "N", .deflt = "8",
         .min = 1, .max = 4096, .help = "simulated nodes"},
        {.name = "buckets", .type = OPTS_INT, .target = &o->buckets, .arg = "B", .deflt = "200",
         .min = 1, .max = 1000000,
         .help = "buckets b00000..; must match the controller's file ({default})"},
        {.name = "active", .type = OPTS_INT, .target = &o->active, .arg = "A", .deflt = "3",
         .min = 1, .max = INT_MAX, .help = "nodes each bucket is active on"},
        {.name = "seconds", .type = OPTS_DOUBLE, .target = &o->seconds, .arg = "S",
         .deflt = "5", .flags = OPTS_XMIN, .help = "how long to run"},
        {.name = "seed", .type = OPTS_UINT, .target = &o->seed, .arg = "N", .deflt = "1",
         .help = "random seed"},
        {.name = "capacity", .type = OPTS_DOUBLE, .target = &o->capacity, .arg = "C",
         .deflt = "20000", .help = "each node's capacity profile, IOs/s"},
        {.name = "reserved", .type = OPTS_DOUBLE, .target = &o->reserved, .arg = "F",
         .deflt = "0.9",
         .help = "share of the total capacity reserved (default {default}):\n"
                 "bucket b reserves F*nodes*C/(b+1)^0.5 normalised; its\n"
                 "demand is 1.5x that, split evenly over its nodes, and\n"
                 "each node serves 0.8x its share of the reservation"},
        {.name = "noise", .type = OPTS_DOUBLE, .target = &o->noise, .arg = "F", .deflt = "0.2",
         .help = "arrivals vary uniformly by +-F around the mean, queues\n"
                 "are 0..40F long"},
        {.name = "full-tables", .type = OPTS_FLAG, .target = &o->full,
         .help = "every node's table holds every bucket (as real nodes do\n"
                 "once they created the controller's buckets); reports\n"
                 "still carry only the buckets active on the node"},
        {.name = "changing", .type = OPTS_DOUBLE, .target = &o->changing, .arg = "F",
         .deflt = "0",
         .help = "each interval a pair's demand level moves (to 0.5..1.5x)\n"
                 "with probability F; use with --noise 0 for a steady\n"
                 "load of which F changes per interval"},
        {.name = "no-sparse", .type = OPTS_FLAG, .target = &o->no_sparse,
         .help = "full reports only, as nodes that predate sparse reports"},
        {.name = "no-renew", .type = OPTS_FLAG, .target = &o->no_renew,
         .help = "every grant in every tokens message, as nodes that\n"
                 "predate changed grants (no \"renew\" in the hello)"},
        {.name = "busy", .type = OPTS_INT, .target = &o->busy, .arg = "N", .deflt = "0",
         .min = 0, .max = 1000000,
         .help = "only buckets 0..N-1 have demand (0: all); with --full-tables\n"
                 "the others are in every table, idle"},
        {.name = "parts", .type = OPTS_FLAG, .target = &o->parts,
         .help = "offer names in parts (as bqos-node): tables bigger than a\n"
                 "part go both ways part by part; prints how long each\n"
                 "node took to hold the controller's table and have its own held"},
        {.name = "full-every", .type = OPTS_INT, .target = &o->full_every, .arg = "N",
         .deflt = "25", .min = 1, .max = 1000000,
         .help = "sparse reports: a full report every N ({default}, as bqos-node)"},
        {.name = "warmup", .type = OPTS_DOUBLE, .target = &o->warmup, .arg = "S", .deflt = "2",
         .help = "bytes and CPU per round are counted after S seconds"},
        {.name = "ctrl-pid", .type = OPTS_INT, .target = &o->ctrl_pid, .arg = "PID",
         .deflt = "0", .min = 0, .max = INT_MAX,
         .help = "the controller's pid: its CPU time per round over the\n"
                 "counted window (/proc/PID/stat, every thread)"},
        {.name = "write-buckets", .type = OPTS_STRING, .target = &o->write, .arg = "FILE",
         .help = "write the matching bucket file and exit"},
        {.name = "quiet", .type = OPTS_FLAG, .target = &o->quiet, .help = "no progress lines"},
        {.name = "curve-dir", .type = OPTS_STRING, .target = &o->curve, .arg = "DIR",
         .help = "CURVE: node i uses DIR/fakeNNN.key, the status query DIR/admin.key,\n"
                 "both DIR/ctrl.pub (bqos-ctl keygen)"},
        OPTS_HELP_ROW(0, &o->help, NULL),
        OPTS_VERSION_ROW(0, &o->version, NULL),
    };
    OPTS_COPY_ROWS(rows, t, NOPTS);
}

static int send_msg(fnode_t *f, proto_msg_t *m, proto_enc_t *e)
{
    snprintf(m->node, sizeof m->node, "%s", f->name);
    return proto_send(f->sock, NULL, 0, m, e, ZMQ_DONTWAIT);
}

/* The controller's CPU seconds so far (utime + stime of every thread), or
 * -1 if unknown. */
static double proc_cpu(int pid)
{
    if (pid <= 0)
        return -1;
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *fp = fopen(path, "r");
    if (!fp)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, fp);
    fclose(fp);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')');
    unsigned long ut, st;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
        return -1;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static uint64_t names_out; /* bytes of hellos and names messages sent */
static uint64_t names_in;  /* bytes of welcomes and names messages received */

static void hello(fnode_t *f, proto_enc_t *e, int sparse, int renew, int parts)
{
    proto_msg_t m;
    proto_msg_init(&m);
    m.type = PROTO_HELLO;
    m.sparse = sparse;
    m.renew = renew; /* changed grants only (the records are counted, not applied) */
    m.capacity = 20000;
    m.table = 1;
    m.has_names = 1;
    m.nnames = f->ntable;
    m.names = f->tnames;
    m.parts = parts;
    if (parts && (m.nnames = proto_part_len(f->tnames, f->ntable, 0)) < f->ntable)
        m.names_of = f->ntable; /* a first part: the rest in names messages */
    if (!f->t_hello)
        f->t_hello = mono_now();
    if (send_msg(f, &m, e) == 0)
        for (size_t i = 0; i < e->nframes; i++)
            names_out += e->len[i];
}

/* --parts: the next parts of f's table (64 at most, a window of 262,144
 * names beyond what the controller acknowledged), as bqos-node. */
static void send_parts(fnode_t *f, proto_enc_t *e)
{
    for (int i = 0; i < 64 && f->next < f->ntable && f->next - f->acked < 262144; i++) {
        proto_msg_t m;
        proto_msg_init(&m);
        m.type = PROTO_NAMES;
        m.table = 1;
        m.has_names = 1;
        m.names = f->tnames + f->next;
        m.nnames = proto_part_len(f->tnames, f->ntable, f->next);
        m.names_at = f->next;
        m.names_of = f->ntable;
        if (send_msg(f, &m, e) < 0)
            break;
        for (size_t k = 0; k < e->nframes; k++)
            names_out += e->len[k];
        f->next += m.nnames;
    }
}

/* --parts: what the controller said it holds of f's table. */
static void take_ack(fnode_t *f, const proto_msg_t *m)
{
    if (!m->has_peer_names || m->peer_table != 1 || m->peer_names <= f->acked)
        return;
    f->acked = (size_t)m->peer_names;
    f->idle = 0;
    if (f->next < f->acked)
        f->next = f->acked;
}

/* Timing shared by every simulated node (they all follow one controller). */
typedef struct {
    int has;
    uint64_t period;
    uint32_t intervals;
    double period_s, period_end;
} timing_t;

static void take_timing(timing_t *t, const proto_msg_t *m, double now)
{
    if (!m->has_timing && m->type != PROTO_WELCOME && m->type != PROTO_TOKENS)
        return;
    if (t->has && m->period < t->period)
        return;
    t->has = 1;
    t->period = m->period;
    t->intervals = m->intervals ? m->intervals : 1;
    t->period_s = m->period_ms / 1000.0;
    t->period_end = now + m->remaining_ms / 1000.0;
}

/* Makes sock a CURVE client with DIR/NAME.key, for DIR/ctrl.pub.  Returns
 * 0 or -1 (said on stderr). */
static int curve_client(void *sock, const char *dir, const char *name)
{
    char key[4096], pub[4096], buf[700];
    curvekey_t own, srv;
    jsonloc_err_t err;
    snprintf(key, sizeof key, "%s/%s.key", dir, name);
    snprintf(pub, sizeof pub, "%s/ctrl.pub", dir);
    int on;
    if (curvekey_load_client(key, pub, &own, &srv, &on, &err) < 0) {
        fprintf(stderr, "bqos-ctrl-bench: %s\n", bucketfile_strerror(&err, buf, sizeof buf));
        return -1;
    }
    if (curvekey_set_client(sock, &own, &srv) < 0) {
        fprintf(stderr, "bqos-ctrl-bench: CURVE: %s\n", zmq_strerror(zmq_errno()));
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    bench_cfg_t o = {0};
    opts_row_t rows[NOPTS];
    option_rows(&o, rows);
    const opts_cmd_t cmd = {.prog = "bqos-ctrl-bench", .rows = rows, .n = NOPTS};
    int rc = opts_start(&cmd, argc, argv, NULL, &usage, NULL);
    if (rc >= 0)
        return rc;
    if (o.active > o.nodes)
        o.active = o.nodes;
    bqos_log_init("bqos-ctrl-bench", BQOS_LOG_WARN);

    /* Bucket names and placement. */
    char **bname = calloc((size_t)o.buckets, sizeof *bname);
    fnode_t *fn = calloc((size_t)o.nodes, sizeof *fn);
    double *rate = calloc((size_t)o.buckets, sizeof *rate);
    if (!bname || !fn || !rate)
        return 1;
    double wsum = 0;
    for (int b = 0; b < o.buckets; b++)
        wsum += 1 / sqrt(b + 1.0);
    for (int b = 0; b < o.buckets; b++)
        rate[b] = floor(o.reserved * o.nodes * o.capacity / sqrt(b + 1.0) / wsum); /* R_b, IOs/s */
    if (o.write) { /* the controller's file, written by its owner (common/bucketfile) */
        bucketfile_t *bf = bucketfile_new();
        rc = bf ? 0 : -ENOMEM;
        for (int b = 0; rc == 0 && b < o.buckets; b++) {
            /* every fourth bucket has a limit of twice its reservation */
            bucketfile_bucket_t x = {.reservation = (int64_t)rate[b], .weight = 1,
                                     .limit = b % 4 == 3 ? (int64_t)(2 * rate[b])
                                                         : BUCKETFILE_NO_LIMIT};
            char name[16];
            snprintf(name, sizeof name, "b%05d", b);
            x.name = name;
            rc = bucketfile_set(bf, &x, NULL);
        }
        if (rc == 0)
            rc = bucketfile_save(bf, o.write, NULL, 0);
        if (rc < 0)
            fprintf(stderr, "bqos-ctrl-bench: %s: %s\n", o.write, strerror(-rc));
        bucketfile_destroy(&bf);
        free(bname);
        free(fn);
        free(rate);
        return rc < 0 ? 1 : 0;
    }
    rng_lcg_t rng; /* glibc rand_r()'s sequence: the figures depend on it */
    rng_lcg_seed(&rng, o.seed);
    for (int b = 0; b < o.buckets; b++) {
        bname[b] = malloc(16);
        snprintf(bname[b], 16, "b%05d", b);
        (void)rng_lcg_next(&rng);
        int start = rng_lcg_next(&rng) % o.nodes;
        for (int k = 0; k < o.active && (!o.busy || b < o.busy); k++)
            fn[(start + k) % o.nodes].n++;
    }
    void *ctx = zmq_ctx_new();
    for (int i = 0; i < o.nodes; i++) {
        fnode_t *f = &fn[i];
        snprintf(f->name, sizeof f->name, "fake%03d", i);
        f->names = calloc(f->n + 1, sizeof *f->names);
        f->bucket = calloc(f->n + 1, sizeof *f->bucket);
        f->served = calloc(f->n + 1, sizeof *f->served);
        f->r_tok = calloc(f->n + 1, sizeof *f->r_tok);
        f->l_tok = calloc(f->n + 1, sizeof *f->l_tok);
        f->level = calloc(f->n + 1, sizeof *f->level);
        f->bq = calloc(f->n + 1, sizeof *f->bq);
        f->ba = calloc(f->n + 1, sizeof *f->ba);
        f->bs = calloc(f->n + 1, sizeof *f->bs);
        f->bp = calloc(f->n + 1, sizeof *f->bp);
        f->bi = calloc(f->n + 1, sizeof *f->bi);
        f->n = 0;
        f->sock = zmq_socket(ctx, ZMQ_DEALER);
        int linger = 0, hwm = 100000;
        zmq_setsockopt(f->sock, ZMQ_LINGER, &linger, sizeof linger);
        zmq_setsockopt(f->sock, ZMQ_SNDHWM, &hwm, sizeof hwm);
        zmq_setsockopt(f->sock, ZMQ_RCVHWM, &hwm, sizeof hwm);
        zmq_setsockopt(f->sock, ZMQ_ROUTING_ID, f->name, strlen(f->name));
        if (o.curve && curve_client(f->sock, o.curve, f->name) < 0)
            return 1;
        if (zmq_connect(f->sock, o.endpoint) < 0) {
            fprintf(stderr, "bqos-ctrl-bench: connect %s: %s\n", o.endpoint,
                    zmq_strerror(zmq_errno()));
            return 1;
        }
    }
    rng_lcg_seed(&rng, o.seed);
    for (int b = 0; b < o.buckets; b++) {
        (void)rng_lcg_next(&rng);
        int start = rng_lcg_next(&rng) % o.nodes;
        for (int k = 0; k < o.active && (!o.busy || b < o.busy); k++) {
            fnode_t *f = &fn[(start + k) % o.nodes];
            f->names[f->n] = bname[b];
            f->bucket[f->n] = (uint32_t)b;
            f->l_tok[f->n] = PROTO_UNLIMITED;
            f->level[f->n] = 1.0;
            f->n++;
        }
    }
    for (int i = 0; i < o.nodes; i++) {
        fn[i].ntable = o.full ? (size_t)o.buckets : fn[i].n;
        fn[i].tnames = o.full ? (const char **)bname : fn[i].names;
    }
    proto_enc_t enc;
    proto_enc_init(&enc);
    proto_msg_t in, rep;
    proto_msg_init(&in);
    proto_msg_init(&rep);
    proto_stats_t pst = {0};
    for (int i = 0; i < o.nodes; i++)
        hello(&fn[i], &enc, !o.no_sparse, !o.no_renew, o.parts);

    timing_t tm = {0};
    /* The counted window: after --warmup. */
    int counting = 0;
    uint64_t w_rounds = 0, w_bytes_out = 0, w_bytes_in = 0, w_recs_out = 0, w_recs_in = 0;
    uint64_t w_sparse = 0, w_full = 0, bytes_in0 = 0, recs_in0 = 0;
    double cpu0 = -1, cpu1 = -1;
    double t0 = mono_now(), next_hello = t0 + 1, last_report = 0;
    uint64_t rep_period = UINT64_MAX;
    int rep_interval = -1;
    uint64_t reports = 0, interval_rounds = 0;
    zmq_pollitem_t *items = calloc((size_t)o.nodes, sizeof *items);
    for (int i = 0; i < o.nodes; i++)
        items[i] = (zmq_pollitem_t){fn[i].sock, 0, ZMQ_POLLIN, 0};
    for (;;) {
        double now = mono_now();
        if (now - t0 >= o.seconds)
            break;
        if (now >= next_hello) {
            for (int i = 0; i < o.nodes; i++)
                if (!fn[i].welcomed)
                    hello(&fn[i], &enc, !o.no_sparse, !o.no_renew, o.parts);
            next_hello = now + 1;
        }
        /* Reports at each interval start of the controller's clock. */
        if (tm.has) {
            while (now >= tm.period_end) {
                tm.period++;
                tm.period_end += tm.period_s;
            }
            double el = tm.period_s - (tm.period_end - now);
            int k = (int)floor(el / (tm.period_s / tm.intervals));
            if (k >= (int)tm.intervals)
                k = (int)tm.intervals - 1;
            if (k < 0)
                k = 0;
            if (tm.period != rep_period || k != rep_interval) {
                rep_period = tm.period;
                rep_interval = k;
                interval_rounds++;
                if (!counting && now - t0 >= o.warmup) {
                    counting = 1;
                    cpu0 = proc_cpu(o.ctrl_pid);
                    bytes_in0 = pst.bytes;
                    for (int i = 0; i < o.nodes; i++)
                        recs_in0 += fn[i].records;
                }
                w_rounds += counting;
                double isec = tm.period_s / tm.intervals;
                for (int i = 0; i < o.nodes; i++) {
                    fnode_t *f = &fn[i];
                    if (!f->welcomed)
                        continue;
                    rep.type = PROTO_REPORT;
                    proto_msg_reserve(&rep, f->n ? f->n : 1, 0);
                    rep.period = tm.period;
                    rep.interval = (uint32_t)k;
                    rep.remaining_ms = (uint32_t)fmax(0, (tm.period_end - now) * 1000);
                    rep.table = 1;
                    rep.peer_table = f->ctl_table;
                    rep.has_names = !o.parts && f->peer_ack != 1;
                    rep.has_peer_names = o.parts && f->rx_have < f->rx_of;
                    rep.peer_names = f->rx_have;
                    if (o.parts && f->next > f->acked && ++f->idle >= 50) {
                        f->next = f->acked; /* go back */
                        f->idle = 0;
                    }
                    rep.nnames = rep.has_names ? f->ntable : 0;
                    rep.names = rep.has_names ? f->tnames : NULL;
                    /* Sparse as bqos-node: full when asked, every
                     * --full-every reports and while names go. */
                    int sparse = f->sparse && !f->want_full && !rep.has_names &&
                                 f->since_full + 1 < o.full_every;
                    rep.sparse = sparse;
                    size_t cnt = 0;
                    uint64_t done = 0;
                    /* Intervals served since the last report: service
                     * follows the clock, not the reports (a late loop
                     * skips a report, not the service). */
                    uint64_t steps = f->lk && f->lp == tm.period ? (uint64_t)k + 1 - f->lk
                                                                 : (uint64_t)k;
                    if (f->lp != tm.period) /* the period's counters restart */
                        memset(f->served, 0, f->n * sizeof *f->served);
                    f->lp = tm.period;
                    f->lk = (uint32_t)k + 1;
                    for (size_t j = 0; j < f->n; j++) {
                        if (o.changing > 0 &&
                            (rng_lcg_next(&rng) % 1000000) < (int)(o.changing * 1e6))
                            f->level[j] = 0.5 + (rng_lcg_next(&rng) % 1000) / 1000.0;
                        double share = rate[f->bucket[j]] * isec / o.active * f->level[j];
                        double u = (rng_lcg_next(&rng) % 1000) / 1000.0;
                        double r = 1.5 * share * (1 - o.noise + 2 * o.noise * u);
                        uint64_t spend = (uint64_t)(0.8 * share);
                        /* The counters of a report at interval k's start
                         * cover k intervals (as bqos-node's). */
                        proto_report_rec_t rec = {
                            .bucket = o.full ? f->bucket[j] : (uint32_t)j,
                            .queued = (uint64_t)(rng_lcg_next(&rng) % (1 + (int)(40 * o.noise))),
                            .arrivals_interval = (uint64_t)r,
                            .arrivals_period = f->served[j],
                            .served_r = f->served[j],
                            .r_left = f->r_tok[j] > 0 ? f->r_tok[j] : 0,
                            .l_left = f->l_tok[j],
                        };
                        f->served[j] += spend * steps;
                        if (o.parts && rec.bucket >= f->acked)
                            continue; /* its name is not held there yet */
                        rec.arrivals_period = rec.served_r = f->served[j];
                        done += spend * steps;
                        proto_pred_t now_v = {.queued = rec.queued,
                                              .arrivals = rec.arrivals_interval,
                                              .served = rec.served_r,
                                              .throttled = rec.r_left <= 0 && rec.l_left <= 0};
                        if (sparse) {
                            proto_pred_t pred = {
                                .queued = f->bq[j],
                                .arrivals = f->ba[j],
                                .served = proto_predict_served(f->bs[j], f->bp[j], f->bi[j],
                                                               tm.period, (uint32_t)k),
                                .throttled = 0,
                            };
                            if (proto_pred_near(&pred, &now_v, 0.10, 0.02, 2))
                                continue;
                        }
                        f->bq[j] = now_v.queued;
                        f->ba[j] = now_v.arrivals;
                        f->bs[j] = now_v.served;
                        f->bp[j] = tm.period;
                        f->bi[j] = (uint32_t)k;
                        rep.report[cnt++] = rec;
                    }
                    rep.count = cnt;
                    if (sparse) {
                        f->since_full++;
                    } else {
                        f->since_full = 0;
                        f->want_full = 0;
                    }
                    f->completions += done;
                    rep.completions = f->completions;
                    rep.dispatched = f->completions;
                    rep.busy_seconds = isec * (k + 1) * 0.9;
                    if (send_msg(f, &rep, &enc) == 0) {
                        reports++;
                        if (counting) {
                            for (size_t e = 0; e < enc.nframes; e++)
                                w_bytes_out += enc.len[e];
                            w_recs_out += cnt;
                            w_sparse += sparse;
                            w_full += !sparse;
                        }
                    }
                    if (o.parts)
                        send_parts(f, &enc);
                }
                last_report = now;
            }
        }
        double wait = 0.05;
        if (tm.has) {
            double isec = tm.period_s / tm.intervals;
            double el = tm.period_s - (tm.period_end - now);
            double nb = (floor(el / isec) + 1) * isec - el;
            if (nb < wait)
                wait = nb;
        }
        int n = zmq_poll(items, o.nodes, (long)ceil(wait * 1000));
        if (n <= 0)
            continue;
        now = mono_now();
        for (int i = 0; i < o.nodes; i++) {
            if (!(items[i].revents & ZMQ_POLLIN))
                continue;
            fnode_t *f = &fn[i];
            for (;;) {
                uint64_t b0 = pst.bytes;
                int rc = proto_recv(f->sock, NULL, 0, NULL, &in, &pst, NULL, NULL, NULL,
                                    ZMQ_DONTWAIT);
                if (rc == -EAGAIN || (rc < 0 && rc != -EPROTO))
                    break;
                if (rc < 0)
                    continue;
                if (in.type == PROTO_WELCOME || in.type == PROTO_NAMES)
                    names_in += pst.bytes - b0;
                if (f->welcomed && f->last_ctl && now - f->last_ctl > f->max_gap)
                    f->max_gap = now - f->last_ctl;
                f->last_ctl = now;
                switch (in.type) {
                case PROTO_WELCOME:
                    f->welcomed = 1;
                    f->sparse = in.sparse && !o.no_sparse;
                    f->want_full = 1;
                    f->peer_ack = in.peer_table;
                    f->ctl_table = in.has_names ? in.table : 0;
                    f->rx_gen = f->ctl_table;
                    f->rx_have = in.nnames;
                    f->rx_of = in.names_of ? (size_t)in.names_of : in.nnames;
                    f->acked = f->next = in.peer_table == 1 && o.parts
                                             ? (in.has_peer_names ? (size_t)in.peer_names
                                                                  : f->ntable)
                                             : 0;
                    take_timing(&tm, &in, now);
                    break;
                case PROTO_NAMES:
                    if (in.names_at == 0) {
                        f->rx_gen = f->ctl_table = in.table;
                        f->rx_of = (size_t)in.names_of;
                        f->rx_have = in.nnames;
                    } else if (in.table == f->rx_gen && in.names_at == f->rx_have) {
                        f->rx_have += in.nnames;
                    }
                    break;
                case PROTO_TOKENS:
                    f->tokens_msgs++;
                    f->want_full |= in.full;
                    f->peer_ack = in.peer_table;
                    take_ack(f, &in);
                    if (in.has_names)
                        f->ctl_table = in.table;
                    f->records += in.count;
                    take_timing(&tm, &in, now);
                    break;
                case PROTO_HEARTBEAT:
                    f->heartbeats++;
                    f->want_full |= in.full;
                    if (in.peer_table)
                        f->peer_ack = in.peer_table;
                    take_ack(f, &in);
                    take_timing(&tm, &in, now);
                    break;
                case PROTO_ERROR:
                    f->errors++;
                    if (strcmp(in.code, "unknown_node") == 0) {
                        f->welcomed = 0;
                        hello(f, &enc, !o.no_sparse, !o.no_renew, o.parts);
                    } else if (strcmp(in.code, "unknown_table") == 0) {
                        f->peer_ack = 0;
                    }
                    break;
                default:
                    break;
                }
                if (o.parts && f->welcomed && !f->t_named && f->rx_have >= f->rx_of &&
                    f->acked >= f->ntable)
                    f->t_named = now - f->t_hello;
            }
        }
    }
    (void)last_report;
    cpu1 = proc_cpu(o.ctrl_pid);
    w_bytes_in = pst.bytes - bytes_in0;
    w_recs_in = 0;
    for (int i = 0; i < o.nodes; i++)
        w_recs_in += fn[i].records;
    w_recs_in -= recs_in0;
    uint64_t tokmsgs = 0, hbs = 0, errs = 0, recs = 0;
    int welcomed = 0;
    for (int i = 0; i < o.nodes; i++) {
        tokmsgs += fn[i].tokens_msgs;
        hbs += fn[i].heartbeats;
        errs += fn[i].errors;
        recs += fn[i].records;
        welcomed += fn[i].welcomed;
    }
    /* The controller's own view. */
    json_t *status = NULL;
    void *req = zmq_socket(ctx, ZMQ_REQ);
    int linger = 0, tmo = 10000; /* a loaded host answers a 10,000-bucket status slowly */
    zmq_setsockopt(req, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(req, ZMQ_RCVTIMEO, &tmo, sizeof tmo);
    zmq_setsockopt(req, ZMQ_SNDTIMEO, &tmo, sizeof tmo);
    if ((!o.curve || curve_client(req, o.curve, "admin") == 0) && zmq_connect(req, o.admin) == 0) {
        const char *q = "{\"v\":1,\"cmd\":\"status\"}";
        if (zmq_send(req, q, strlen(q), 0) >= 0) {
            zmq_msg_t msg;
            zmq_msg_init(&msg);
            if (zmq_msg_recv(&msg, req, 0) >= 0)
                status = json_loadb(zmq_msg_data(&msg), zmq_msg_size(&msg), 0, NULL);
            zmq_msg_close(&msg);
        }
    }
    zmq_close(req);
    json_t *out = json_pack("{s:i, s:i, s:i, s:f, s:i, s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
                            "nodes", o.nodes, "buckets", o.buckets, "active", o.active,
                            "seconds", o.seconds, "welcomed", welcomed, "intervals_seen",
                            (json_int_t)interval_rounds, "reports_sent", (json_int_t)reports,
                            "tokens_msgs", (json_int_t)tokmsgs, "heartbeats", (json_int_t)hbs,
                            "errors", (json_int_t)errs, "token_records", (json_int_t)recs,
                            "bad_messages", (json_int_t)pst.rejected_total);
    {
        /* Per round of the counted window: bytes each way on the wire
         * (frames, ZeroMQ's framing not counted), records, and per active
         * pair (nodes x buckets x active / nodes = buckets x active). */
        double r = w_rounds ? (double)w_rounds : 1, pairs = (double)(o.busy && o.busy < o.buckets ? o.busy : o.buckets) * o.active;
        json_t *w = json_pack("{s:I, s:f, s:f, s:f, s:f, s:f, s:f, s:I, s:I}", "rounds",
                              (json_int_t)w_rounds, "report_bytes", w_bytes_out / r,
                              "token_bytes", w_bytes_in / r, "bytes_per_pair",
                              (w_bytes_out + w_bytes_in) / r / pairs, "report_records",
                              w_recs_out / r, "token_records", w_recs_in / r, "cpu_ms",
                              cpu0 >= 0 && cpu1 >= 0 ? (cpu1 - cpu0) * 1000 / r : -1.0,
                              "sparse_reports", (json_int_t)w_sparse, "full_reports",
                              (json_int_t)w_full);
        json_object_set_new(out, "per_round", w);
    }
    {
        /* names: how long a node took from its first hello until it held
         * the controller's table and the controller its own (--parts), the
         * bytes of hellos, welcomes and names messages, and the longest
         * the controller was silent to a welcomed node */
        double nmin = -1, nmax = -1, gap = 0;
        int named = 0;
        for (int i = 0; i < o.nodes; i++) {
            if (fn[i].max_gap > gap)
                gap = fn[i].max_gap;
            if (!fn[i].t_named)
                continue;
            named++;
            if (nmin < 0 || fn[i].t_named < nmin)
                nmin = fn[i].t_named;
            if (fn[i].t_named > nmax)
                nmax = fn[i].t_named;
        }
        json_object_set_new(out, "names",
                            json_pack("{s:i, s:f, s:f, s:I, s:I, s:f}", "named", named,
                                      "named_min_s", nmin, "named_max_s", nmax, "bytes_out",
                                      (json_int_t)names_out, "bytes_in", (json_int_t)names_in,
                                      "max_ctl_gap_ms", gap * 1000));
    }
    if (status) {
        json_object_set(out, "timing", json_object_get(status, "timing"));
        json_object_set(out, "stats", json_object_get(status, "stats"));
        json_object_set(out, "period_ms", json_object_get(status, "period_ms"));
        json_object_set(out, "intervals", json_object_get(status, "intervals"));
        json_decref(status);
    }
    char *txt = json_dumps(out, JSON_INDENT(1));
    printf("%s\n", txt);
    free(txt);
    json_decref(out);
    for (int i = 0; i < o.nodes; i++) {
        zmq_close(fn[i].sock);
        free(fn[i].names);
        free(fn[i].bucket);
        free(fn[i].served);
        free(fn[i].r_tok);
        free(fn[i].l_tok);
        free(fn[i].level);
        free(fn[i].bq);
        free(fn[i].ba);
        free(fn[i].bs);
        free(fn[i].bp);
        free(fn[i].bi);
    }
    zmq_ctx_term(ctx);
    proto_msg_clear(&in);
    proto_msg_clear(&rep);
    proto_enc_clear(&enc);
    for (int b = 0; b < o.buckets; b++)
        free(bname[b]);
    free(bname);
    free(fn);
    free(rate);
    free(items);
    return welcomed == o.nodes ? 0 : 1;
}
