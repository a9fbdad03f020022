/* shards_bench.c - bqos-shards-bench: K controller shards and the root step in one process on bqos-ctrl-prof's workload (fake nodes, no sockets): the root step's CPU and each shard's round CPU per round. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/bucketfile.h"
#include "common/log.h"
#include "common/opts.h"
#include "common/proto.h"
#include "common/rng.h"
#include "common/version.h"
#include "controller/ctrl.h"
#include "controller/shardset.h"

/* The command line; read-only once parsed. */
typedef struct {
    int nodes, buckets, active, rounds, warmup, shards, intervals, threads, verbose, max_path;
    size_t approx;
    unsigned seed;
    double capacity, reserved, noise, period;
    int help, version;
} bench_cfg_t;

static const opts_usage_t usage = {
    .head = "Usage: bqos-shards-bench [OPTION]...\n"
            "\n"
            "Runs K controller shards (controller/shardset.h) and the root step between\n"
            "their rounds in one process, without sockets, on bqos-ctrl-prof's workload\n"
            "(buckets b00000.. with Zipf-like reservations, every fourth limited at twice\n"
            "its reservation, each active on A consecutive nodes from a pseudo-random\n"
            "one).  Each bucket lives in the shard shardmap_of() names; each node has a\n"
            "table per shard holding that shard's buckets.  Every round: the root step\n"
            "(capacities and last round's needs in, every node's slices out), then per\n"
            "shard: ctrl_round_begin, every node's report of its buckets applied\n"
            "(ctrl_node_report, records built outside the timing, no wire encoding),\n"
            "ctrl_compute, and every node's token records read and mapped to the whole\n"
            "table's order.  Prints JSON: the root step's CPU per round, each shard's\n"
            "CPU per round (mean and max, CLOCK_THREAD_CPUTIME_ID), their share of the\n"
            "interval, the R and L tokens placed, and the check that no node was\n"
            "promised more than its capacity by the shards together.\n"
            "\n"
            "Options:\n",
    .layout = OPTS_LAYOUT_LIST,
    .width = 16,
    .tail = "  --help, --version\n",
};

#define NOPTS 18

static void option_rows(bench_cfg_t *c, opts_row_t *rows)
{
    const opts_row_t t[] = {
        {.name = "nodes", .type = OPTS_INT, .target = &c->nodes, .arg = "N", .deflt = "1024",
         .min = 1, .max = 4096, .help = "simulated nodes"},
        {.name = "buckets", .type = OPTS_INT, .target = &c->buckets, .arg = "B",
         .deflt = "1000000", .min = 1, .max = 1000000, .help = "buckets"},
        {.name = "active", .type = OPTS_INT, .target = &c->active, .arg = "A", .deflt = "8",
         .min = 1, .max = INT_MAX, .help = "nodes each bucket is active on"},
        {.name = "shards", .type = OPTS_INT, .target = &c->shards, .arg = "K", .deflt = "8",
         .min = 1, .max = 256, .help = "controller shards"},
        {.name = "rounds", .type = OPTS_INT, .target = &c->rounds, .arg = "R", .deflt = "10",
         .min = 1, .max = INT_MAX, .help = "measured rounds"},
        {.name = "warmup", .type = OPTS_INT, .target = &c->warmup, .arg = "W", .deflt = "3",
         .min = 0, .max = INT_MAX, .help = "rounds before measuring"},
        {.name = "seed", .type = OPTS_UINT, .target = &c->seed, .arg = "N", .deflt = "1",
         .help = "random seed"},
        {.name = "capacity", .type = OPTS_DOUBLE, .target = &c->capacity, .arg = "C",
         .deflt = "20000", .flags = OPTS_XMIN, .help = "each node's capacity, IOs/s"},
        {.name = "reserved", .type = OPTS_DOUBLE, .target = &c->reserved, .arg = "F",
         .deflt = "0.9", .help = "share of the total capacity reserved"},
        {.name = "noise", .type = OPTS_DOUBLE, .target = &c->noise, .arg = "F", .deflt = "0.2",
         .help = "arrivals vary by +-F, queues 0..40F"},
        {.name = "period", .type = OPTS_DOUBLE, .target = &c->period, .arg = "SECS",
         .deflt = "5", .flags = OPTS_XMIN, .help = "QoS period, seconds"},
        {.name = "intervals", .type = OPTS_INT, .target = &c->intervals, .arg = "K",
         .deflt = "5", .min = 1, .max = INT_MAX,
         .help = "intervals per period (default {default}: 1 s intervals)"},
        {.name = "threads", .type = OPTS_INT, .target = &c->threads, .arg = "N", .deflt = "1",
         .help = "pShift threads per shard"},
        {.name = "approx-top", .type = OPTS_SIZE, .target = &c->approx, .arg = "M",
         .deflt = "0", .help = "each shard's pShift approximation (default {default}: exact)"},
        {.name = "max-path", .type = OPTS_INT, .target = &c->max_path, .arg = "L",
         .deflt = "0", .min = 0, .max = 4096,
         .help = "each shard's pShift shift paths at most L edges\n"
                 "(default {default}: shardset.h's SHARDSET_MAX_PATH)"},
        {.name = "verbose", .type = OPTS_FLAG, .target = &c->verbose,
         .help = "a line per round on stderr (root and slowest shard CPU)"},
        OPTS_HELP_ROW(0, &c->help, NULL),
        OPTS_VERSION_ROW(0, &c->version, NULL),
    };
    OPTS_COPY_ROWS(rows, t, NOPTS);
}

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* One node's buckets of one shard: global index and served so far. */
typedef struct {
    size_t n;
    uint32_t *bucket;
    uint64_t *served;
    const char **names;
} part_t;

int main(int argc, char **argv)
{
    bench_cfg_t cfg = {0};
    opts_row_t rows[NOPTS];
    option_rows(&cfg, rows);
    const opts_cmd_t cmd = {.prog = "bqos-shards-bench", .rows = rows, .n = NOPTS};
    int early = opts_start(&cmd, argc, argv, NULL, &usage, NULL);
    if (early >= 0)
        return early;
    const int N = cfg.nodes, B = cfg.buckets, K = cfg.shards, iv = cfg.intervals;
    const int A = cfg.active > N ? N : cfg.active;
    bqos_log_init("bqos-shards-bench", BQOS_LOG_WARN);

    char **bname = calloc((size_t)B, sizeof *bname);
    double *rate = calloc((size_t)B, sizeof *rate);
    int *shard = calloc((size_t)B, sizeof *shard);
    bucketfile_t *bf = bucketfile_new();
    if (!bname || !rate || !shard || !bf)
        return 1;
    double wsum = 0;
    for (int b = 0; b < B; b++)
        wsum += 1 / sqrt(b + 1.0);
    for (int b = 0; b < B; b++) {
        rate[b] = floor(cfg.reserved * N * cfg.capacity / sqrt(b + 1.0) / wsum);
        bname[b] = malloc(16);
        snprintf(bname[b], 16, "b%05d", b);
        bucketfile_bucket_t x = {.reservation = (int64_t)rate[b],
                                 .limit = b % 4 == 3 ? (int64_t)(2 * rate[b]) : BUCKETFILE_NO_LIMIT,
                                 .weight = 1};
        x.name = bname[b]; /* the table copies it */
        if (bucketfile_set(bf, &x, NULL) < 0) {
            fprintf(stderr, "bqos-shards-bench: bucket %d rejected\n", b);
            return 1;
        }
    }
    ctrl_config_t cc = ctrl_config_default();
    cc.period_s = cfg.period;
    cc.intervals = iv;
    cc.threads = cfg.threads;
    cc.approx_top = cfg.approx;
    cc.max_path = cfg.max_path;
    cc.default_capacity = cfg.capacity;
    cc.skip_rel = 0; /* every round computes: the figure is the worst case */
    shardset_t *ss = shardset_new(&cc, K);
    if (!ss) {
        fprintf(stderr, "bqos-shards-bench: cannot make %d shards\n", K);
        return 1;
    }
    int rc = shardset_set_buckets(ss, bf);
    if (rc < 0) {
        fprintf(stderr, "bqos-shards-bench: buckets: %s\n", strerror(-rc));
        return 1;
    }
    for (int b = 0; b < B; b++)
        shard[b] = shardset_of(ss, bname[b]);
    /* Placement as bqos-ctrl-prof: A consecutive nodes from a
     * pseudo-random one. */
    rng_lcg_t rng;
    rng_lcg_seed(&rng, cfg.seed);
    part_t *pt = calloc((size_t)N * K, sizeof *pt); /* [node * K + shard] */
    int *start = calloc((size_t)B, sizeof *start);
    if (!pt || !start)
        return 1;
    for (int b = 0; b < B; b++) {
        (void)rng_lcg_next(&rng);
        start[b] = rng_lcg_next(&rng) % N;
        for (int k = 0; k < A; k++)
            pt[(size_t)((start[b] + k) % N) * K + shard[b]].n++;
    }
    size_t maxn = 1;
    for (size_t i = 0; i < (size_t)N * K; i++) {
        pt[i].bucket = calloc(pt[i].n + 1, sizeof *pt[i].bucket);
        pt[i].served = calloc(pt[i].n + 1, sizeof *pt[i].served);
        pt[i].names = calloc(pt[i].n + 1, sizeof *pt[i].names);
        if (!pt[i].bucket || !pt[i].served || !pt[i].names)
            return 1;
        if (pt[i].n > maxn)
            maxn = pt[i].n;
        pt[i].n = 0;
    }
    for (int b = 0; b < B; b++)
        for (int k = 0; k < A; k++) {
            part_t *p = &pt[(size_t)((start[b] + k) % N) * K + shard[b]];
            p->names[p->n] = bname[b];
            p->bucket[p->n++] = (uint32_t)b;
        }
    for (int s = 0; s < K; s++)
        for (int n = 0; n < N; n++) {
            char nm[32];
            snprintf(nm, sizeof nm, "fake%04d", n);
            part_t *p = &pt[(size_t)n * K + s];
            int id = ctrl_node_hello(shardset_shard(ss, s), nm, 0, (uint64_t)cfg.capacity, 1,
                                     p->names, p->n);
            if (id != n) {
                fprintf(stderr, "bqos-shards-bench: hello: %d\n", id);
                return 1;
            }
        }
    proto_report_rec_t *recs = calloc(maxn, sizeof *recs);
    double *t_shard = calloc((size_t)K, sizeof *t_shard), *max_shard = calloc((size_t)K, sizeof *max_shard);
    double *round_cpu = calloc((size_t)K, sizeof *round_cpu);
    int64_t *rplaced = calloc((size_t)N, sizeof *rplaced), *placed = calloc((size_t)N, sizeof *placed);
    if (!recs || !t_shard || !max_shard || !round_cpu || !rplaced || !placed)
        return 1;
    double t_root = 0, max_root = 0, t_solve = 0, isec = cfg.period / iv;
    uint64_t recs_out = 0;
    int64_t r_tok = 0, l_tok = 0, over = 0, r_cut = 0, r_beyond = 0;
    for (int r = 0; r < cfg.warmup + cfg.rounds; r++) {
        uint64_t period = (uint64_t)(r / iv) + 1;
        uint32_t k = (uint32_t)(r % iv);
        int meas = r >= cfg.warmup;
        double left = (double)(iv - (int)k) / iv;
        double t0 = cpu_now();
        if ((rc = shardset_root(ss, left, NULL)) < 0) {
            fprintf(stderr, "bqos-shards-bench: root step: %s\n", strerror(-rc));
            return 1;
        }
        double tr = cpu_now() - t0;
        if (meas) {
            t_root += tr;
            if (tr > max_root)
                max_root = tr;
            r_cut += shardset_root_stats(ss)->r_cut;
            t_solve += shardset_root_stats(ss)->t_solve;
        }
        for (int s = 0; s < K; s++) {
            ctrl_t *c = shardset_shard(ss, s);
            double ts = 0;
            ctrl_round_begin(c, period, k, 0);
            for (int n = 0; n < N; n++) {
                part_t *p = &pt[(size_t)n * K + s];
                if (k == 0)
                    memset(p->served, 0, p->n * sizeof *p->served);
                for (size_t j = 0; j < p->n; j++) {
                    double share = rate[p->bucket[j]] * isec / A;
                    double u = (rng_lcg_next(&rng) % 1000) / 1000.0;
                    double a = 1.5 * share * (1 - cfg.noise + 2 * cfg.noise * u);
                    p->served[j] += (uint64_t)(0.8 * share);
                    recs[j] = (proto_report_rec_t){
                        .bucket = (uint32_t)j,
                        .queued = (uint64_t)(rng_lcg_next(&rng) % (1 + (int)(40 * cfg.noise))),
                        .arrivals_interval = (uint64_t)a,
                        .arrivals_period = p->served[j],
                        .served_r = p->served[j],
                        .l_left = PROTO_UNLIMITED,
                    };
                }
                double t1 = cpu_now();
                rc = ctrl_node_report(c, n, period, k, 1, 0,
                                      (uint64_t)(cfg.capacity * isec * (k + 1) * 0.9),
                                      isec * (k + 1) * 0.9, recs, p->n);
                ts += cpu_now() - t1;
                if (rc < 0) {
                    fprintf(stderr, "bqos-shards-bench: report: %s\n", strerror(-rc));
                    return 1;
                }
            }
            ctrl_result_t res;
            double t1 = cpu_now();
            if ((rc = ctrl_compute(c, &res)) < 0) {
                fprintf(stderr, "bqos-shards-bench: compute: %s\n", strerror(-rc));
                return 1;
            }
            uint64_t nrec = 0;
            for (int n = 0; n < N; n++) {
                const proto_tokens_rec_t *tk;
                size_t m = ctrl_node_tokens(c, n, &tk);
                for (size_t x = 0; x < m; x++) {
                    int g = shardset_global(ss, s, tk[x].bucket);
                    if (g < 0) {
                        fprintf(stderr, "bqos-shards-bench: token of no bucket\n");
                        return 1;
                    }
                }
                nrec += m;
            }
            ts += cpu_now() - t1;
            round_cpu[s] = ts;
            if (meas) {
                t_shard[s] += ts;
                if (ts > max_shard[s])
                    max_shard[s] = ts;
                recs_out += nrec;
                r_tok += res.r_tokens;
                l_tok += res.l_tokens;
            }
        }
        if (cfg.verbose) {
            double worst_r = 0;
            for (int s = 0; s < K; s++)
                if (round_cpu[s] > worst_r)
                    worst_r = round_cpu[s];
            fprintf(stderr, "round %d (period %llu interval %u): root %.1f ms (solve %.1f), slowest shard %.1f ms, R cut %lld\n",
                    r, (unsigned long long)period, k, tr * 1e3, shardset_root_stats(ss)->t_solve * 1e3, worst_r * 1e3,
                    (long long)shardset_root_stats(ss)->r_cut);
        }
        /* The checks: the shards' slices of a node together within its
         * capacity (the root's invariant), and the R the shards placed on
         * a node together against its conservative capacity. */
        memset(rplaced, 0, (size_t)N * sizeof *rplaced);
        for (int s = 0; meas && s < K; s++) {
            if (ctrl_shard_needs(shardset_shard(ss, s), placed, NULL, NULL, NULL) < 0)
                return 1;
            for (int n = 0; n < N; n++)
                rplaced[n] += placed[n];
        }
        for (int n = 0; n < N; n++) {
            int64_t sum = 0, cap = INT64_MAX, cons = INT64_MAX;
            for (int s = 0; s < K; s++) {
                ctrl_node_info_t ni;
                int64_t e;
                ctrl_node_info(shardset_shard(ss, s), n, &ni);
                shardset_slice(ss, s, n, &e, NULL);
                sum += e;
                if ((int64_t)(ni.capacity * left * cfg.period) < cap)
                    cap = (int64_t)(ni.capacity * left * cfg.period);
                if ((int64_t)(ni.conservative * left * cfg.period) < cons)
                    cons = (int64_t)(ni.conservative * left * cfg.period);
            }
            over += sum > cap;
            if (meas && rplaced[n] > cons)
                r_beyond += rplaced[n] - cons;
        }
    }
    double iv_ms = isec * 1e3, worst = 0, mean = 0;
    printf("{\"nodes\": %d, \"buckets\": %d, \"active\": %d, \"shards\": %d, \"rounds\": %d,\n"
           " \"interval_ms\": %.0f, \"records_out_per_round\": %.0f,\n"
           " \"root_cpu_ms_per_round\": %.3f, \"root_cpu_ms_max\": %.3f, \"root_solve_wall_ms\": %.3f,\n"
           " \"root_r_cut_per_round\": %.0f,\n"
           " \"shard_cpu_ms_per_round\": [",
           N, B, A, K, cfg.rounds, iv_ms, (double)recs_out / cfg.rounds, t_root * 1e3 / cfg.rounds,
           max_root * 1e3, t_solve * 1e3 / cfg.rounds, (double)r_cut / cfg.rounds);
    for (int s = 0; s < K; s++) {
        double m = t_shard[s] * 1e3 / cfg.rounds;
        mean += m / K;
        if (max_shard[s] * 1e3 > worst)
            worst = max_shard[s] * 1e3;
        printf("%s%.1f", s ? ", " : "", m);
    }
    printf("],\n \"shard_cpu_ms_mean\": %.1f, \"shard_cpu_ms_max\": %.1f, \"shard_share_of_interval_max\": %.4f,\n"
           " \"r_tokens_per_round\": %.0f, \"l_tokens_per_round\": %.0f, \"overbooked_nodes\": %lld,\n \"r_beyond_conservative_per_round\": %.0f}\n",
           mean, worst, worst / iv_ms, (double)r_tok / cfg.rounds, (double)l_tok / cfg.rounds,
           (long long)over, (double)r_beyond / cfg.rounds);
    shardset_destroy(&ss);
    bucketfile_destroy(&bf);
    for (size_t i = 0; i < (size_t)N * K; i++) {
        free(pt[i].bucket);
        free(pt[i].served);
        free(pt[i].names);
    }
    for (int b = 0; b < B; b++)
        free(bname[b]);
    free(bname);
    free(rate);
    free(shard);
    free(pt);
    free(start);
    free(recs);
    free(t_shard);
    free(max_shard);
    free(round_cpu);
    free(rplaced);
    free(placed);
    return 0;
}
