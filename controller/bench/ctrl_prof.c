/* ctrl_prof.c - bqos-ctrl-prof: the controller's per-round work (decode, compute, encode) in one process without sockets, for profilers and repeatable CPU figures. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/bucketfile.h"
#include "common/log.h"
#include "common/num.h"
#include "common/opts.h"
#include "common/proto.h"
#include "common/rng.h"
#include "common/version.h"
#include "controller/ctrl.h"
#include "pshift/pshift.h"
#include "pshift/tools/pjson.h"


/* --dump-slow: keeps the slowest solve above a threshold as a JSON
 * instance for `bqos-pshift solve`. */
typedef struct {
    const char *path;
    double min_s, worst;
    int dumped;
} dump_t;

static void solve_hook(const struct pshift_problem *p, int lpass, double seconds, void *arg)
{
    dump_t *d = arg;
    if (seconds < d->min_s || seconds <= d->worst)
        return;
    d->worst = seconds;
    FILE *f = fopen(d->path, "w");
    if (!f) {
        perror(d->path);
        return;
    }
    json_t *meta = json_pack("{s:s, s:f}", "pass", lpass ? "L" : "R", "solve_seconds", seconds);
    if (pjson_write_problem(f, p, NULL, meta, 0) < 0)
        fprintf(stderr, "bqos-ctrl-prof: cannot write %s\n", d->path);
    json_decref(meta);
    fclose(f);
    d->dumped++;
    fprintf(stderr, "bqos-ctrl-prof: %s solve took %.1f ms: written to %s\n", lpass ? "L" : "R",
            seconds * 1e3, d->path);
}

/* The command line; read-only once parsed. */
typedef struct {
    int nodes, buckets, active, rounds, warmup, full, threads, intervals;
    unsigned seed;
    double capacity, reserved, noise, skip, changing;
    int sparse, full_every, metrics;
    size_t approx;
    dump_t dump;
    int help, version;
} prof_cfg_t;

/* OPTS_FUNC for --dump-slow MS:FILE; target is the dump_t. */
static int parse_dump(const char *arg, void *target)
{
    dump_t *d = target;
    const char *colon = strchr(arg, ':');
    char ms[64];
    if (!colon || colon[1] == 0 || (size_t)(colon - arg) >= sizeof ms)
        return -EINVAL;
    memcpy(ms, arg, (size_t)(colon - arg));
    ms[colon - arg] = '\0';
    int rc = num_double(ms, &d->min_s);
    if (rc < 0)
        return rc;
    d->min_s /= 1e3;
    d->path = colon + 1;
    return 0;
}

/* What --help prints around the option rows. */
static const opts_usage_t usage = {
    .head = "Usage: bqos-ctrl-prof [OPTION]...\n"
            "\n"
            "Runs the controller's per-interval work in one process, without sockets or\n"
            "clocks, on the workload of bqos-ctrl-bench (same buckets, placement and\n"
            "report values for the same seed): every round each simulated node's report\n"
            "is encoded (node side, not counted), then decoded and applied (decode),\n"
            "the tokens are computed (pshift: ctrl_compute) and each node's tokens\n"
            "message is encoded (encode).  Sending is not simulated.  Prints the mean\n"
            "CPU milliseconds per round of each phase (CLOCK_PROCESS_CPUTIME_ID, all\n"
            "threads) and their share of the interval, after --warmup rounds, the\n"
            "largest CPU time of one computation and the longest R-pass solve (wall),\n"
            "and a hash of every token record computed (equal hashes: equal output).\n"
            "Meant for perf and callgrind: the same options give the same work.\n"
            "\n"
            "Options:\n",
    .layout = OPTS_LAYOUT_LIST,
    .width = 16,
    .tail = "  --help, --version\n",
};

#define NOPTS 21

/* Fills rows[NOPTS], the option table, with targets in *c. */
static void option_rows(prof_cfg_t *c, opts_row_t *rows)
{
    const opts_row_t t[] = {
        {.name = "nodes", .type = OPTS_INT, .target = &c->nodes, .arg = "N", .deflt = "64",
         .min = 1, .max = 4096, .help = "simulated nodes"},
        {.name = "buckets", .type = OPTS_INT, .target = &c->buckets, .arg = "B",
         .deflt = "10000", .min = 1, .max = 1000000,
         .help = "buckets (default {default}); every fourth has a limit of\n"
                 "twice its reservation"},
        {.name = "active", .type = OPTS_INT, .target = &c->active, .arg = "A", .deflt = "8",
         .min = 1, .max = INT_MAX, .help = "nodes each bucket is active on"},
        {.name = "rounds", .type = OPTS_INT, .target = &c->rounds, .arg = "R", .deflt = "50",
         .min = 1, .max = INT_MAX, .help = "measured rounds"},
        {.name = "warmup", .type = OPTS_INT, .target = &c->warmup, .arg = "W", .deflt = "5",
         .min = 0, .max = INT_MAX, .help = "rounds before measuring"},
        {.name = "seed", .type = OPTS_UINT, .target = &c->seed, .arg = "N", .deflt = "1",
         .help = "random seed"},
        {.name = "capacity", .type = OPTS_DOUBLE, .target = &c->capacity, .arg = "C",
         .deflt = "20000", .flags = OPTS_XMIN, .help = "each node's capacity profile, IOs/s"},
        {.name = "reserved", .type = OPTS_DOUBLE, .target = &c->reserved, .arg = "F",
         .deflt = "0.9", .help = "share of the total capacity reserved"},
        {.name = "noise", .type = OPTS_DOUBLE, .target = &c->noise, .arg = "F", .deflt = "0.2",
         .help = "arrivals vary by +-F, queues 0..40F"},
        {.name = "skip", .type = OPTS_DOUBLE, .target = &c->skip, .arg = "F", .deflt = "0",
         .help = "the controller's --skip-threshold"},
        {.name = "threads", .type = OPTS_INT, .target = &c->threads, .arg = "N", .deflt = "1",
         .help = "pShift threads"},
        {.name = "approx-top", .type = OPTS_SIZE, .target = &c->approx, .arg = "M",
         .deflt = "0", .help = "pShift approximation (default {default}: exact)"},
        {.name = "intervals", .type = OPTS_INT, .target = &c->intervals, .arg = "K",
         .deflt = "5", .min = 1, .max = INT_MAX, .help = "intervals per 1 s period"},
        {.name = "full-tables", .type = OPTS_FLAG, .target = &c->full,
         .help = "every node's table holds every bucket"},
        {.name = "sparse", .type = OPTS_FLAG, .target = &c->sparse,
         .help = "sparse reports, as bqos-ctrl-bench's nodes send them: only\n"
                 "the pairs that moved beyond the prediction from their last\n"
                 "record, a full report every --full-every (node i's first\n"
                 "after i reports)"},
        {.name = "full-every", .type = OPTS_INT, .target = &c->full_every, .arg = "N",
         .deflt = "25", .min = 1, .max = INT_MAX,
         .help = "--sparse: a full report every N ({default}, as bqos-node)"},
        {.name = "metrics", .type = OPTS_FLAG, .target = &c->metrics,
         .help = "after each period's last round, every bucket's figures\n"
                 "in one call of ctrl_bucket_info_many(), as the daemon's\n"
                 "per-period metrics read them (timed as \"metrics\")"},
        {.name = "changing", .type = OPTS_DOUBLE, .target = &c->changing, .arg = "F",
         .deflt = "0",
         .help = "each round a pair's demand level moves (to 0.5..1.5x) with\n"
                 "probability F, as bqos-ctrl-bench's (with --noise 0: a steady\n"
                 "load of which F changes per interval)"},
        {.name = "dump-slow", .type = OPTS_FUNC, .target = &c->dump, .func = parse_dump,
         .arg = "MS:FILE",
         .help = "write the slowest pShift solve (wall) that took at\n"
                 "least MS ms to FILE as a `bqos-pshift solve` instance"},
        OPTS_HELP_ROW(0, &c->help, NULL),
        OPTS_VERSION_ROW(0, &c->version, NULL),
    };
    OPTS_COPY_ROWS(rows, t, NOPTS);
}

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

typedef struct {
    size_t n;             /* buckets active here */
    uint32_t *bucket;     /* global index per active entry */
    uint64_t *served;
    double *level;        /* per active entry: its demand level (--changing) */
    proto_pred_t *base;   /* --sparse: per active entry, its last record */
    uint64_t *bp;         /* ... its period */
    uint32_t *bi;         /* ... and interval */
    int since_full;       /* --sparse: reports since the last full one */
    size_t ntable;
    const char **tnames;
} pnode_t;

int main(int argc, char **argv)
{
    prof_cfg_t cfg = {0};
    opts_row_t rows[NOPTS];
    option_rows(&cfg, rows);
    const opts_cmd_t cmd = {.prog = "bqos-ctrl-prof", .rows = rows, .n = NOPTS};
    int early = opts_start(&cmd, argc, argv, NULL, &usage, NULL);
    if (early >= 0)
        return early;
    int nodes = cfg.nodes, buckets = cfg.buckets, active = cfg.active, rounds = cfg.rounds;
    int warmup = cfg.warmup, full = cfg.full, thr = cfg.threads, intervals = cfg.intervals;
    unsigned seed0 = cfg.seed;
    double capacity = cfg.capacity, reserved = cfg.reserved, noise = cfg.noise, skip = cfg.skip;
    size_t approx = cfg.approx;
    dump_t dump = cfg.dump;
    if (active > nodes)
        active = nodes;
    bqos_log_init("bqos-ctrl-prof", BQOS_LOG_WARN);

    /* Buckets as bqos-ctrl-bench --write-buckets writes them. */
    char **bname = calloc((size_t)buckets, sizeof *bname);
    double *rate = calloc((size_t)buckets, sizeof *rate);
    pnode_t *pn = calloc((size_t)nodes, sizeof *pn);
    bucketfile_t *bf = bucketfile_new();
    if (!bname || !rate || !pn || !bf)
        return 1;
    double wsum = 0;
    for (int b = 0; b < buckets; b++)
        wsum += 1 / sqrt(b + 1.0);
    for (int b = 0; b < buckets; b++) {
        rate[b] = floor(reserved * nodes * capacity / sqrt(b + 1.0) / wsum);
        bname[b] = malloc(16);
        snprintf(bname[b], 16, "b%05d", b);
        bucketfile_bucket_t x = {.reservation = (int64_t)rate[b],
                                 .limit = b % 4 == 3 ? (int64_t)(2 * rate[b]) : BUCKETFILE_NO_LIMIT,
                                 .weight = 1};
        x.name = bname[b];
        if (bucketfile_set(bf, &x, NULL) < 0) {
            fprintf(stderr, "bqos-ctrl-prof: bucket %d rejected\n", b);
            return 1;
        }
    }
    /* Placement as bqos-ctrl-bench: `active` consecutive nodes from a
     * pseudo-random one. */
    rng_lcg_t rng; /* glibc rand_r()'s sequence: the figures depend on it */
    rng_lcg_seed(&rng, seed0);
    int *start = calloc((size_t)buckets, sizeof *start);
    for (int b = 0; b < buckets; b++) {
        (void)rng_lcg_next(&rng);
        start[b] = rng_lcg_next(&rng) % nodes;
        for (int k = 0; k < active; k++)
            pn[(start[b] + k) % nodes].n++;
    }
    for (int i = 0; i < nodes; i++) {
        pn[i].bucket = calloc(pn[i].n + 1, sizeof *pn[i].bucket);
        pn[i].served = calloc(pn[i].n + 1, sizeof *pn[i].served);
        pn[i].tnames = calloc(pn[i].n + 1, sizeof *pn[i].tnames);
        pn[i].level = calloc(pn[i].n + 1, sizeof *pn[i].level);
        pn[i].base = calloc(pn[i].n + 1, sizeof *pn[i].base);
        pn[i].bp = calloc(pn[i].n + 1, sizeof *pn[i].bp);
        pn[i].bi = calloc(pn[i].n + 1, sizeof *pn[i].bi);
        if (!pn[i].bucket || !pn[i].served || !pn[i].tnames || !pn[i].level || !pn[i].base ||
            !pn[i].bp || !pn[i].bi)
            return 1;
        for (size_t j = 0; j <= pn[i].n; j++)
            pn[i].level[j] = 1;
        pn[i].since_full = cfg.full_every - 1 - i % cfg.full_every; /* staggered */
        pn[i].n = 0;
    }
    for (int b = 0; b < buckets; b++)
        for (int k = 0; k < active; k++) {
            pnode_t *f = &pn[(start[b] + k) % nodes];
            f->tnames[f->n] = bname[b];
            f->bucket[f->n++] = (uint32_t)b;
        }
    for (int i = 0; i < nodes; i++) {
        pn[i].ntable = full ? (size_t)buckets : pn[i].n;
        if (full) {
            free(pn[i].tnames);
            pn[i].tnames = (const char **)bname;
        }
    }

    ctrl_config_t cc = ctrl_config_default();
    cc.intervals = intervals;
    cc.threads = thr;
    cc.skip_rel = skip;
    cc.approx_top = approx;
    cc.default_capacity = capacity;
    if (dump.path) {
        cc.solve_hook = solve_hook;
        cc.solve_hook_arg = &dump;
    }
    ctrl_t *c = ctrl_new(&cc);
    if (!c || ctrl_set_buckets(c, bf) < 0)
        return 1;
    int *nid = calloc((size_t)nodes, sizeof *nid);
    for (int i = 0; i < nodes; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "fake%03d", i);
        nid[i] = ctrl_node_hello(c, nm, 0, (uint64_t)capacity, 1, pn[i].tnames, pn[i].ntable);
        if (nid[i] < 0) {
            fprintf(stderr, "bqos-ctrl-prof: hello: %s\n", strerror(-nid[i]));
            return 1;
        }
        if (cfg.sparse)
            ctrl_node_set_sparse(c, nid[i], 1);
    }

    proto_enc_t enc, tenc;
    proto_enc_init(&enc);
    proto_enc_init(&tenc);
    proto_msg_t rep, in, tok;
    proto_msg_init(&rep);
    proto_msg_init(&in);
    double max_comp = 0, max_rpass = 0;
    double t_dec = 0, t_comp = 0, t_enc = 0, t_rpass = 0, t_lpass = 0, t_met = 0;
    double t_skip = 0; /* of t_comp, in skipped rounds */
    ctrl_binfo_t *bscr = cfg.metrics ? ctrl_binfo_new() : NULL;
    int *mb = cfg.metrics ? calloc((size_t)buckets, sizeof *mb) : NULL;
    ctrl_bucket_info_t *mi = cfg.metrics ? calloc((size_t)buckets, sizeof *mi) : NULL;
    if (cfg.metrics && (!bscr || !mb || !mi))
        return 1;
    for (int b = 0; cfg.metrics && b < buckets; b++)
        mb[b] = b;
    uint64_t recs_out = 0, computed = 0, sum_h = UINT64_C(14695981039346656037);
    double isec = 1.0 / intervals;
    for (int r = 0; r < warmup + rounds; r++) {
        uint64_t period = (uint64_t)(r / intervals) + 1;
        uint32_t k = (uint32_t)(r % intervals);
        if (k == 0)
            for (int i = 0; i < nodes; i++)
                memset(pn[i].served, 0, pn[i].n * sizeof *pn[i].served);
        ctrl_round_begin(c, period, k, 0);
        int meas = r >= warmup;
        for (int i = 0; i < nodes; i++) {
            pnode_t *f = &pn[i];
            rep.type = PROTO_REPORT;
            snprintf(rep.node, sizeof rep.node, "fake%03d", i);
            proto_msg_reserve(&rep, f->n ? f->n : 1, 0);
            rep.period = period;
            rep.interval = k;
            rep.remaining_ms = (uint32_t)(1000 - 1000 * isec * k);
            rep.table = 1;
            rep.peer_table = 0;
            /* Sparse as bqos-ctrl-bench's nodes: full every --full-every. */
            const int sparse = cfg.sparse && f->since_full + 1 < cfg.full_every;
            f->since_full = sparse ? f->since_full + 1 : 0;
            rep.sparse = sparse;
            size_t cnt = 0;
            uint64_t done = 0;
            for (size_t j = 0; j < f->n; j++) {
                if (cfg.changing > 0 &&
                    (rng_lcg_next(&rng) % 1000000) < (int)(cfg.changing * 1e6))
                    f->level[j] = 0.5 + (rng_lcg_next(&rng) % 1000) / 1000.0;
                double share = rate[f->bucket[j]] * isec / active * f->level[j];
                double u = (rng_lcg_next(&rng) % 1000) / 1000.0;
                double a = 1.5 * share * (1 - noise + 2 * noise * u);
                uint64_t spend = (uint64_t)(0.8 * share);
                f->served[j] += spend;
                done += spend;
                proto_report_rec_t rec = {
                    .bucket = full ? f->bucket[j] : (uint32_t)j,
                    .queued = (uint64_t)(rng_lcg_next(&rng) % (1 + (int)(40 * noise))),
                    .arrivals_interval = (uint64_t)a,
                    .arrivals_period = f->served[j],
                    .served_r = f->served[j],
                    .r_left = 0,
                    .l_left = PROTO_UNLIMITED,
                };
                if (cfg.sparse) {
                    /* As bqos-node's: a report at interval k's start
                     * covers k intervals (the prediction's rate). */
                    rec.served_r = rec.arrivals_period = f->served[j] - spend;
                    proto_pred_t now_v = {.queued = rec.queued,
                                          .arrivals = rec.arrivals_interval,
                                          .served = rec.served_r};
                    proto_pred_t pred = f->base[j];
                    pred.served = proto_predict_served(pred.served, f->bp[j], f->bi[j], period, k);
                    if (sparse && proto_pred_near(&pred, &now_v, 0.10, 0.02, 2))
                        continue;
                    f->base[j] = now_v;
                    f->bp[j] = period;
                    f->bi[j] = k;
                }
                rep.report[cnt++] = rec;
            }
            rep.count = cnt;
            rep.completions = (uint64_t)(capacity * isec * (k + 1) * 0.9);
            rep.busy_seconds = isec * (k + 1) * 0.9;
            (void)done;
            if (proto_encode(&rep, &enc) < 0) {
                fprintf(stderr, "bqos-ctrl-prof: encode report failed\n");
                return 1;
            }
            proto_frame_t fr[3];
            for (size_t x = 0; x < enc.nframes; x++)
                fr[x] = (proto_frame_t){enc.data[x], enc.len[x]};
            double t0 = cpu_now();
            if (proto_decode(&in, fr, enc.nframes, NULL, NULL) < 0) {
                fprintf(stderr, "bqos-ctrl-prof: decode failed\n");
                return 1;
            }
            int rc = in.sparse ? ctrl_node_report_sparse(c, nid[i], in.period, in.interval,
                                                         in.table, in.peer_table, in.completions,
                                                         in.busy_seconds, in.report, in.count)
                               : ctrl_node_report(c, nid[i], in.period, in.interval, in.table,
                                                  in.peer_table, in.completions,
                                                  in.busy_seconds, in.report, in.count);
            if (meas)
                t_dec += cpu_now() - t0;
            if (rc < 0) {
                fprintf(stderr, "bqos-ctrl-prof: report: %s\n", strerror(-rc));
                return 1;
            }
        }
        ctrl_result_t res;
        double t0 = cpu_now();
        int rc = ctrl_compute(c, &res);
        double t1 = cpu_now();
        if (rc < 0) {
            fprintf(stderr, "bqos-ctrl-prof: compute: %s\n", strerror(-rc));
            return 1;
        }
        const char *const *names;
        size_t nn;
        uint32_t gen = ctrl_table(c, &names, &nn);
        for (int i = 0; i < nodes; i++) {
            const proto_tokens_rec_t *recs;
            size_t n = ctrl_node_tokens(c, nid[i], &recs);
            proto_msg_init(&tok);
            tok.type = n ? PROTO_TOKENS : PROTO_HEARTBEAT;
            snprintf(tok.node, sizeof tok.node, "fake%03d", i);
            tok.period = period;
            tok.interval = k;
            tok.intervals = (uint32_t)intervals;
            tok.period_ms = 1000;
            tok.table = gen;
            tok.count = n;
            tok.tokens = (proto_tokens_rec_t *)recs;
            if (ctrl_node_needs_names(c, nid[i])) {
                tok.has_names = 1;
                tok.nnames = nn;
                tok.names = (const char **)names;
            }
            double te = cpu_now();
            int erc = proto_encode(&tok, &tenc);
            if (meas)
                t_enc += cpu_now() - te;
            if (erc < 0) {
                fprintf(stderr, "bqos-ctrl-prof: encode tokens failed\n");
                return 1;
            }
            if (meas)
                recs_out += n;
            for (size_t x = 0; x < n; x++) /* FNV-1a over every record pushed */
                for (const unsigned char *q = (const unsigned char *)&recs[x],
                                         *e = q + sizeof recs[x];
                     q < e; q++)
                    sum_h = (sum_h ^ *q) * UINT64_C(1099511628211);
            ctrl_node_seen(c, nid[i], gen); /* the node acknowledges the table */
        }
        if (cfg.metrics && k + 1 == (uint32_t)intervals) {
            double tm = cpu_now();
            if (ctrl_bucket_info_many(c, bscr, mb, (size_t)buckets, mi) < 0) {
                fprintf(stderr, "bqos-ctrl-prof: bucket figures failed\n");
                return 1;
            }
            if (meas)
                t_met += cpu_now() - tm;
            for (int b = 0; b < buckets; b++) /* into the hash: equal figures */
                for (const unsigned char *q = (const unsigned char *)&mi[b].served_r,
                                         *e = (const unsigned char *)(&mi[b].l_tokens + 1);
                     q < e; q++)
                    sum_h = (sum_h ^ *q) * UINT64_C(1099511628211);
        }
        if (meas) {
            if (t1 - t0 > max_comp)
                max_comp = t1 - t0;
            if (res.t_rpass > max_rpass)
                max_rpass = res.t_rpass;
            t_comp += t1 - t0;
            if (res.skipped)
                t_skip += t1 - t0;
            t_rpass += res.t_rpass;
            t_lpass += res.t_lpass;
            computed += !res.skipped;
        }
    }
    double iv_ms = 1000.0 / intervals, sum = (t_dec + t_comp + t_enc + t_met) * 1e3 / rounds;
    printf("{\"nodes\": %d, \"buckets\": %d, \"active\": %d, \"full_tables\": %d, "
           "\"noise\": %g, \"rounds\": %d, \"computed\": %llu, \"records_out_per_round\": %.0f,\n"
           " \"tokens_hash\": \"%016llx\",\n"
           " \"cpu_ms_per_round\": {\"decode\": %.3f, \"pshift\": %.3f, \"rpass_wall\": %.3f, "
           "\"lpass_wall\": %.3f, \"encode\": %.3f, \"metrics\": %.3f, \"sum\": %.3f},\n"
           " \"pshift_per_computed_ms\": %.3f, \"pshift_per_skipped_ms\": %.3f,\n"
           " \"max_pshift_cpu_ms\": %.3f, \"max_rpass_wall_ms\": %.3f,\n"
           " \"interval_ms\": %.1f, \"share_of_interval\": %.4f}\n",
           nodes, buckets, active, full, noise, rounds, (unsigned long long)computed,
           (double)recs_out / rounds, (unsigned long long)sum_h, t_dec * 1e3 / rounds, t_comp * 1e3 / rounds,
           t_rpass * 1e3 / rounds, t_lpass * 1e3 / rounds, t_enc * 1e3 / rounds, t_met * 1e3 / rounds, sum,
           computed ? (t_comp - t_skip) * 1e3 / (double)computed : 0,
           (uint64_t)rounds > computed ? t_skip * 1e3 / (double)((uint64_t)rounds - computed) : 0,
           max_comp * 1e3, max_rpass * 1e3, iv_ms,
           sum / iv_ms);
    ctrl_binfo_destroy(&bscr);
    free(mb);
    free(mi);
    ctrl_destroy(&c);
    proto_msg_clear(&rep);
    proto_msg_clear(&in);
    proto_enc_clear(&enc);
    proto_enc_clear(&tenc);
    bucketfile_destroy(&bf);
    for (int i = 0; i < nodes; i++) {
        free(pn[i].bucket);
        free(pn[i].served);
        free(pn[i].level);
        free(pn[i].base);
        free(pn[i].bp);
        free(pn[i].bi);
        if (!full)
            free(pn[i].tnames);
    }
    for (int b = 0; b < buckets; b++)
        free(bname[b]);
    free(bname);
    free(rate);
    free(pn);
    free(start);
    free(nid);
    return 0;
}
