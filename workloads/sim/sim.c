/* sim.c - bqos-sim: runs rr, static, pshift and clairvoyant over the same simulated cluster and reports how many buckets got their reservations. */
#include <errno.h>
#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/opts.h"
#include "common/version.h"
#include "controller/ctrlopts.h"
#include "workloads/scenario.h"
#include "workloads/sim/sim_model.h"
#include "storage-node/core/sched.h"
#include "workloads/sim/sim_run.h"

static const char usage_text[] =
    "NAME\n"
    "    bqos-sim - discrete-event simulator of bucket QoS on many servers\n"
    "\n"
    "SYNOPSIS\n"
    "    bqos-sim [OPTIONS]\n"
    "    bqos-sim [OPTIONS] --scenario SCENARIO.json\n"
    "\n"
    "DESCRIPTION\n"
    "    Simulates S servers and B buckets in simulated time with the real scheduler\n"
    "    core (storage-node/core/sched.c), the controller's demand and capacity estimators\n"
    "    (controller/ctrl.c, estimate.c) and the pShift allocator (pshift/pshift.c), and\n"
    "    compares the policies rr, static, pshift, pshift-paced (paced tokens, R by\n"
    "    urgency) and clairvoyant on the same arrivals.  Without --scenario it\n"
    "    builds the paper's Experiment 1: bucket reservations Zipf-distributed\n"
    "    over the reserved capacity, each bucket's\n"
    "    demand (DEMAND x reservation) split Zipf over ACTIVE random servers, and\n"
    "    demand changes at random times that move a bucket to a fresh random set of\n"
    "    servers.  Requests arrive open loop at the demand's rate (or, with\n"
    "    --outstanding, closed loop: each bucket keeps N requests in flight at each\n"
    "    of its servers); IO service times are uniform in (1 +- SPREAD)/CAPACITY.\n"
    "    A scenario may also model the node's backend (a FIFO behind the node's\n"
    "    window, fixed or adaptive; lognormal service times), servers whose speed\n"
    "    changes by period and clients' network round trips (docs/simulator.md).\n"
    "    Open-loop requests still queued when a period ends are dropped.  The\n"
    "    defaults are Experiment 1 at full scale.\n"
    "\n"
    "    A bucket meets its reservation in a period when it is served at least\n"
    "    95% (or 99%) of reservation x period IOs.  A progress line per control\n"
    "    round goes to stderr, then a table of the policies side by side; at the\n"
    "    end a summary JSON (per policy: meet95, meet99, mean_error, worst,\n"
    "    windows: the share of 1 s and 200 ms windows served >= 95% of R and the\n"
    "    worst window / L, events, ...) goes to stdout or --json.  Runs are\n"
    "    deterministic for a given seed, whatever --threads.\n"
    "\n"
    "OPTIONS\n";

static const char usage_tail[] =
    "\n"
    "ENVIRONMENT\n"
    "    OMP_NUM_THREADS    threads, as --threads\n"
    "    OMP_WAIT_POLICY    bqos-sim sets it to passive (threads sleep at barriers,\n"
    "                       much faster on a loaded machine) unless it is set\n"
    "\n"
    "EXIT STATUS\n"
    "    0 success; 1 bad usage or scenario (FILE:LINE:COL: what); 2 runtime failure.\n"
    "\n"
    "EXAMPLES\n"
    "    bqos-sim > exp1.json                        # Experiment 1, full scale\n"
    "    bqos-sim -S 8 -B 200 --intervals-csv iv.csv # a small cluster\n"
    "    bqos-sim -A 2 --changes 5 --changes-exact --seed 3 -p pshift\n"
    "    bqos-sim --scenario examples/exp3.json\n"
    "\n"
    "SEE ALSO\n"
    "    docs/simulator.md (model, outputs, scenario mapping, results),\n"
    "    examples/exp1.sh, examples/exp2.sh, bqos-load(1)\n";

/* Buckets --trace-buckets may name. */
#define SIM_TRACE_MAX 64

/* Command-line settings: filled once by main(), read-only afterwards. */
typedef struct {
    sim_config_t cfg;
    int policies[SIM_NPOLICIES];
    int npolicies;
    const char *policy_list;
    int changes_exact;
    const char *scenario, *json, *csv, *ivcsv;
    const char *trace, *trace_list;     /* --trace FILE, --trace-buckets LIST */
    int trace_b[SIM_TRACE_MAX];
    size_t ntrace;
    int sample;
    int threads;
    int weighted;
    double burst_s;
    double limit_depth;
    int shares;
    int shards;
    int quiet;
    int help, version;
} settings_t;

/* The generator's options first, one per field of sim_config_t; their
 * defaults are sim_config_default()'s (the caller sets them, option_rows()
 * prints them into `shown` for --help). */
#define NGEN 18
#define NOPTS (NGEN + 19)

/* Fills rows[NOPTS], the option table, with targets in *st; shown[NGEN]
 * receives the generator's defaults as text. */
static void option_rows(settings_t *st, opts_row_t *rows, char (*shown)[32])
{
    sim_config_t *c = &st->cfg;
    const sim_config_t d = sim_config_default();
    const double dflt[NGEN] = {d.servers, d.buckets, d.capacity, d.svc_spread, d.period,
                               d.intervals, d.periods, d.warmup, d.delay, d.reserved,
                               d.res_zipf, d.demand, d.active, d.split_zipf, d.changes,
                               d.outstanding, d.limit, (double)d.seed};
    for (int i = 0; i < NGEN; i++)
        snprintf(shown[i], 32, "%g", dflt[i]);
    snprintf(shown[NGEN - 1], 32, "%llu", (unsigned long long)d.seed);
    const opts_row_t t[] = {
        {.name = "servers", .shrt = 'S', .type = OPTS_INT, .target = &c->servers, .arg = "N",
         .show = shown[0], .min = 1, .max = 65536, .help = "servers"},
        {.name = "buckets", .shrt = 'B', .type = OPTS_INT, .target = &c->buckets, .arg = "N",
         .show = shown[1], .min = 1, .max = 1e7, .help = "buckets"},
        {.name = "capacity", .shrt = 'C', .type = OPTS_DOUBLE, .target = &c->capacity,
         .arg = "IOPS", .show = shown[2], .min = 1e-9, .max = 1e9,
         .help = "mean IOPS of a server"},
        {.name = "spread", .type = OPTS_DOUBLE, .target = &c->svc_spread, .arg = "F",
         .show = shown[3], .min = 0, .max = 1, .help = "service time spread around 1/C"},
        {.name = "period", .shrt = 'T', .type = OPTS_DOUBLE, .target = &c->period, .arg = "SECS",
         .show = shown[4], .min = 1e-6, .max = 1e6, .help = "QoS period"},
        {.name = "intervals", .shrt = 'K', .type = OPTS_INT, .target = &c->intervals, .arg = "K",
         .show = shown[5], .min = 1, .max = 10000, .help = "redistribution intervals per period"},
        {.name = "periods", .shrt = 'P', .type = OPTS_INT, .target = &c->periods, .arg = "N",
         .show = shown[6], .min = 1, .max = 100000, .help = "periods simulated (incl. warm-up)"},
        {.name = "warmup", .shrt = 'W', .type = OPTS_INT, .target = &c->warmup, .arg = "N",
         .show = shown[7], .min = 0, .max = 99999, .help = "first periods not measured"},
        {.name = "delay", .type = OPTS_DOUBLE, .target = &c->delay, .arg = "SECS",
         .show = shown[8], .min = 0, .max = 1e6, .help = "controller delay before tokens apply"},
        {.name = "reserved", .shrt = 'r', .type = OPTS_DOUBLE, .target = &c->reserved,
         .arg = "F", .show = shown[9], .min = 0, .max = 1, .help = "share of capacity reserved"},
        {.name = "res-zipf", .type = OPTS_DOUBLE, .target = &c->res_zipf, .arg = "S",
         .show = shown[10], .min = 0, .max = 10, .help = "Zipf exponent of reservations"},
        {.name = "demand", .shrt = 'D', .type = OPTS_DOUBLE, .target = &c->demand, .arg = "F",
         .show = shown[11], .min = 0, .max = 1000, .help = "demand / reservation"},
        {.name = "active", .shrt = 'A', .type = OPTS_INT, .target = &c->active, .arg = "N",
         .show = shown[12], .min = 1, .max = 65536, .help = "active servers per bucket (N_A)"},
        {.name = "split-zipf", .type = OPTS_DOUBLE, .target = &c->split_zipf, .arg = "S",
         .show = shown[13], .min = 0, .max = 10, .help = "Zipf exponent of the split"},
        {.name = "changes", .shrt = 'N', .type = OPTS_INT, .target = &c->changes, .arg = "N",
         .show = shown[14], .min = 0, .max = 10000, .help = "demand changes per period (N_D)"},
        {.name = "outstanding", .type = OPTS_INT, .target = &c->outstanding, .arg = "N",
         .show = shown[15], .min = 0, .max = 100000,
         .help = "closed loop: requests in flight per active server (0: open loop)"},
        {.name = "limit", .shrt = 'L', .type = OPTS_DOUBLE, .target = &c->limit, .arg = "F",
         .show = shown[16], .min = 0, .max = 1000,
         .help = "limit / reservation of every bucket (0: no limits)"},
        {.name = "seed", .shrt = 's', .type = OPTS_U64, .target = &c->seed, .arg = "N",
         .show = shown[17], .help = "random seed"},
        {.name = "policies", .shrt = 'p', .type = OPTS_STRING, .target = &st->policy_list,
         .arg = "LIST", .deflt = "rr,static,pshift,pshift-paced,clairvoyant",
         .help = "comma-separated policies to run, in order\n(default {default})"},
        {.name = "changes-exact", .type = OPTS_FLAG, .target = &st->changes_exact,
         .help = "exactly CHANGES demand changes per period (default:\n"
                 "uniform 0..CHANGES per bucket and period)"},
        {.name = "poisson", .type = OPTS_FLAG, .target = &c->poisson,
         .help = "Poisson arrivals (default: evenly spaced, as the paper)"},
        {.name = "burst", .type = OPTS_DOUBLE, .target = &st->burst_s, .arg = "SECS",
         .deflt = "0.02", .min = 0, .max = SCHED_BURST_MAX,
         .help = "pshift-paced: burst depth of paced tokens (bqos-node --burst)"},
        CTRL_OPTS_LIMIT_DEPTH(&st->limit_depth),
        {.name = "shares", .type = OPTS_FLAG, .target = &st->shares,
         .help = "pshift: the controller divides spare capacity in\n"
                 "weighted fair shares across the cluster\n"
                 "(bqos-controller --shares on; default off)"},
        {.name = "shards", .type = OPTS_INT, .target = &st->shards, .arg = "K",
         .deflt = "0", .min = 0, .max = 256,
         .help = "pshift policies: the controller as K shards (buckets\n"
                 "divided by a hash of their names), each node's capacity\n"
                 "divided among them by the root step every round\n"
                 "(issue 30; default 0: one controller)"},
        {.name = "weighted", .type = OPTS_FLAG, .target = &st->weighted,
         .help = "run the schedulers in weighted round robin, a bucket's\n"
                 "weight being its reservation over the smallest one\n"
                 "(default: plain round robin, the paper's Algorithm 1)"},
        {.name = "scenario", .type = OPTS_STRING, .target = &st->scenario, .arg = "FILE",
         .help = "simulate a bqos-load scenario file (servers, capacity,\n"
                 "period, intervals, duration, seed, buckets: open loop\n"
                 "with \"rate\" and \"split_zipf\", else closed loop with\n"
                 "\"outstanding\"; changes); generator options are then\n"
                 "ignored; see docs/simulator.md"},
        {.name = "json", .shrt = 'j', .type = OPTS_STRING, .target = &st->json, .arg = "FILE",
         .help = "write the summary JSON to FILE instead of stdout"},
        {.name = "csv", .type = OPTS_STRING, .target = &st->csv, .arg = "FILE",
         .help = "per-bucket results: policy,period,bucket,reserved,\nserved,ratio"},
        {.name = "intervals-csv", .type = OPTS_STRING, .target = &st->ivcsv, .arg = "FILE",
         .help = "IOs per bucket per interval for every SAMPLE-th bucket:\n"
                 "policy,period,bucket,reserved,i1..iK (Fig. 3(c))"},
        {.name = "trace", .type = OPTS_STRING, .target = &st->trace, .arg = "FILE",
         .help = "pshift policies: per control round, node and bucket of\n"
                 "--trace-buckets, what the controller placed and the node\n"
                 "did (CSV; docs/simulator.md, \"Outputs\")"},
        {.name = "trace-buckets", .type = OPTS_STRING, .target = &st->trace_list, .arg = "LIST",
         .help = "bucket indices to --trace, comma-separated (default 0)"},
        {.name = "sample", .type = OPTS_INT, .target = &st->sample, .arg = "N", .deflt = "50",
         .min = 1, .max = 1000000000, .help = "bucket stride of --intervals-csv"},
        {.name = "threads", .shrt = 't', .type = OPTS_INT, .target = &st->threads, .arg = "N",
         .min = 1, .max = 1024, .help = "OpenMP threads (default: OpenMP's)"},
        {.name = "quiet", .shrt = 'q', .type = OPTS_FLAG, .target = &st->quiet,
         .help = "no progress output"},
        {.name = "help", .shrt = 'h', .type = OPTS_FLAG, .target = &st->help, .flags = OPTS_STOP,
         .help = "show this text and exit"},
        {.name = "version", .shrt = 'V', .type = OPTS_FLAG, .target = &st->version,
         .flags = OPTS_STOP, .help = "show the version and exit"},
    };
    _Static_assert(sizeof t / sizeof t[0] == NOPTS, "NOPTS");
    memcpy(rows, t, sizeof t);
}

static void usage(FILE *f, const opts_row_t *rows)
{
    fputs(usage_text, f);
    opts_help_table(f, rows, NOPTS, 4, 23);
    fputs(usage_tail, f);
}

/* Parses the --policies list into st->policies.  Returns 0, or -EINVAL
 * after saying why. */
static int parse_policies(settings_t *st, const char *arg, const opts_cmd_t *cmd)
{
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", arg);
    st->npolicies = 0;
    for (char *sp, *tok = strtok_r(buf, ",", &sp); tok; tok = strtok_r(NULL, ",", &sp)) {
        int p = sim_policy_parse(tok);
        if (p < 0 || st->npolicies == SIM_NPOLICIES) {
            return opts_fail(cmd, "--policies: unknown or repeated policy '%s'", tok);
        }
        st->policies[st->npolicies++] = p;
    }
    return st->npolicies ? 0 : opts_fail(cmd, "--policies: no policy in '%s'", arg);
}

/* Fills *st from argv.  Returns 0, 1 if the program should exit 0 (help,
 * version), -EINVAL for bad usage. */
static int parse_args(int argc, char **argv, settings_t *st)
{
    opts_row_t rows[NOPTS];
    char shown[NGEN][32];
    option_rows(st, rows, shown);
    const opts_cmd_t cmd = {.prog = "bqos-sim", .rows = rows, .n = NOPTS};
    if (opts_parse(&cmd, argc, argv, NULL) < 0)
        return -EINVAL;
    if (st->help) {
        usage(stdout, rows);
        return 1;
    }
    if (st->version) {
        printf("bqos-sim %s\n", BQOS_VERSION);
        return 1;
    }
    if (st->changes_exact)
        st->cfg.changes_upto = 0;
    const char *tl = st->trace_list ? st->trace_list : "0";
    for (const char *q = tl; *q;) {
        char *end;
        long b = strtol(q, &end, 10);
        if (end == q || b < 0 || b > INT32_MAX || (*end && *end != ',') ||
            st->ntrace == SIM_TRACE_MAX)
            return opts_fail(&cmd, "--trace-buckets: bad list '%s' at '%s' (at most %d indices)",
                             tl, q, SIM_TRACE_MAX);
        st->trace_b[st->ntrace++] = (int)b;
        q = *end ? end + 1 : end;
    }
    return parse_policies(st, st->policy_list, &cmd);
}

typedef struct {
    int tty;
    int K, P;
} progress_t;

static void progress(void *arg, sim_policy_t p, int period, int interval, uint64_t events,
                     double wall_s)
{
    progress_t *pr = arg;
    if (!pr->tty && interval != pr->K - 1)
        return;
    fprintf(stderr, "%sbqos-sim: %-11s period %d/%d interval %d/%d  %.1fM events  %.2fM events/s  %.1fs%s",
            pr->tty ? "\r" : "", sim_policy_name(p), period + 1, pr->P, interval + 1, pr->K,
            events / 1e6, wall_s > 0 ? events / wall_s / 1e6 : 0, wall_s, pr->tty ? "" : "\n");
    fflush(stderr);
}

static json_t *config_json(const sim_model_t *m, const settings_t *st)
{
    const sim_config_t *c = &m->cfg;
    json_t *j = json_pack("{s:i,s:i,s:f,s:f,s:f,s:i,s:i,s:i,s:f,s:f,s:f,s:f,s:i,s:f,s:i,s:b,s:b,s:i,s:I}",
                          "servers", c->servers, "buckets", c->buckets, "capacity", c->capacity,
                          "spread", c->svc_spread, "period", c->period, "intervals", c->intervals,
                          "periods", c->periods, "warmup", c->warmup, "delay", c->delay,
                          "reserved", c->reserved, "res_zipf", c->res_zipf, "demand", c->demand,
                          "active", c->active, "split_zipf", c->split_zipf, "changes", c->changes,
                          "changes_upto", c->changes_upto, "poisson", c->poisson, "outstanding",
                          c->outstanding, "seed",
                          (json_int_t)c->seed);
    if (j && st->scenario)
        json_object_set_new(j, "scenario", json_string(st->scenario));
    if (j)
        json_object_set_new(j, "weighted", json_boolean(st->weighted));
    if (j)
        json_object_set_new(j, "burst", json_real(st->burst_s));
    if (j)
        json_object_set_new(j, "limit_depth", json_real(st->limit_depth));
    if (j && st->shards)
        json_object_set_new(j, "shards", json_integer(st->shards));
    return j;
}

/* Prints the side-by-side table of the policies' results to f. */
static void print_table(FILE *f, sim_result_t *const *res, int n)
{
    fprintf(f, "%-13s %9s %9s %7s | %12s %12s | %10s %10s\n", "policy", "R>=95%/T", "R>=99%/T",
            "worst", "R>=95% 1s", "R>=95% 200ms", "L max 1s", "L max 200ms");
    for (int i = 0; i < n; i++) {
        const sim_result_t *r = res[i];
        const report_win_fig_t *wl = &r->win[REPORT_WIN_LONG], *ws = &r->win[REPORT_WIN_SHORT];
        char l1[16] = "-", l2[16] = "-";
        if (wl->l_windows)
            snprintf(l1, sizeof l1, "%.3f", wl->l_worst);
        if (ws->l_windows)
            snprintf(l2, sizeof l2, "%.3f", ws->l_worst);
        fprintf(f, "%-13s %8.2f%% %8.2f%% %7.3f | %11.2f%% %11.2f%% | %10s %10s\n",
                sim_policy_name(r->policy), 100 * r->meet95, 100 * r->meet99, r->worst,
                100 * wl->r_share, 100 * ws->r_share, l1, l2);
    }
}

static json_t *result_json(const sim_result_t *r)
{
    json_t *w = report_win_json(r->win);
    return json_pack("{s:s,s:I,s:f,s:f,s:f,s:f,s:o*,s:I,s:f,s:f,s:f,s:I,s:I,s:I,s:I,s:I}", "policy",
                     sim_policy_name(r->policy), "samples", (json_int_t)r->samples, "meet95",
                     r->meet95, "meet99", r->meet99, "mean_error", r->mean_err, "worst", r->worst,
                     "windows", w, "events", (json_int_t)r->events, "events_per_s",
                     r->wall_s > 0 ? r->events / r->wall_s : 0.0, "wall_s", r->wall_s, "ctrl_s",
                     r->ctrl_s, "rounds", (json_int_t)r->rounds, "skipped", (json_int_t)r->skipped, "arrivals",
                     (json_int_t)r->arrivals, "completions", (json_int_t)r->completions,
                     "dropped", (json_int_t)r->dropped);
}

static int write_csv(const char *path, sim_result_t *const *res, int n)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -errno;
    fprintf(f, "policy,period,bucket,reserved,served,ratio\n");
    for (int i = 0; i < n; i++) {
        const sim_result_t *r = res[i];
        for (int p = 0; p < r->periods; p++)
            for (int b = 0; b < r->buckets; b++) {
                uint64_t s = r->served[(size_t)p * r->buckets + b];
                double want = r->reserved_p[(size_t)p * r->buckets + b];
                fprintf(f, "%s,%d,%d,%.0f,%llu,%.4f\n", sim_policy_name(r->policy), p, b, want,
                        (unsigned long long)s, want > 0 ? s / want : 1.0);
            }
    }
    return fclose(f) ? -EIO : 0;
}

static int write_ivcsv(const char *path, sim_result_t *const *res, int n, int sample)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -errno;
    int K = res[0]->intervals;
    fprintf(f, "policy,period,bucket,reserved");
    for (int k = 0; k < K; k++)
        fprintf(f, ",i%d", k + 1);
    fprintf(f, "\n");
    for (int i = 0; i < n; i++) {
        const sim_result_t *r = res[i];
        for (int p = 0; p < r->periods; p++)
            for (int b = 0; b < r->buckets; b += sample) {
                fprintf(f, "%s,%d,%d,%.0f", sim_policy_name(r->policy), p, b,
                        r->reserved_p[(size_t)p * r->buckets + b]);
                for (int k = 0; k < K; k++)
                    fprintf(f, ",%u", r->served_iv[((size_t)p * K + k) * r->buckets + b]);
                fprintf(f, "\n");
            }
    }
    return fclose(f) ? -EIO : 0;
}

int main(int argc, char **argv)
{
    /* OpenMP threads that spin at barriers are a disaster on a loaded
     * machine (a run took 7x longer at load 100: the simulator meets a
     * barrier at every control round).  libgomp reads OMP_WAIT_POLICY only
     * when it loads, so set it and start again; the user's value wins. */
    if (!getenv("OMP_WAIT_POLICY") && setenv("OMP_WAIT_POLICY", "passive", 1) == 0)
        execv("/proc/self/exe", argv); /* on failure, just run as we are */
    settings_t st = {.cfg = sim_config_default(), .burst_s = SIM_BURST_DEFAULT};
    int rc = parse_args(argc, argv, &st);
    if (rc)
        return rc > 0 ? 0 : 1;
    char err[512];
    sim_model_t *m = NULL;
    sim_result_t *res[SIM_NPOLICIES] = {0};
    json_t *root = NULL;
    int nres = 0, status = 2;
    if (st.scenario) {
        scenario_t *sc = NULL;
        jsonloc_err_t se;
        if (scenario_load(st.scenario, NULL, &sc, &se) < 0) {
            fprintf(stderr, "%s:%d:%d: %s\n", se.source, se.line, se.col, se.text);
            return 1;
        }
        rc = sim_model_from_scenario(sc, &st.cfg, &m, err, sizeof(err));
        scenario_destroy(&sc);
    } else {
        rc = sim_model_generate(&st.cfg, &m, err, sizeof(err));
    }
    if (rc < 0) {
        fprintf(stderr, "bqos-sim: %s%s%s\n", st.scenario ? st.scenario : "", st.scenario ? ": " : "",
                err);
        return rc == -EINVAL ? 1 : 2;
    }
    FILE *trace = NULL;
    if (st.trace) {
        if (!(trace = fopen(st.trace, "w"))) {
            fprintf(stderr, "bqos-sim: %s: %s\n", st.trace, strerror(errno));
            goto out;
        }
        fputs("period,interval,bucket,node,capacity,conservative,r_booked,served_r,served_l,"
              "served_o,queued,arrivals,demand,r_tokens,l_tokens,window,backend,latency_ms,"
              "base_ms,throughput\n", trace);
    }
    progress_t pr = {.tty = isatty(2), .K = m->cfg.intervals, .P = m->cfg.periods};
    sim_run_opts_t ro = {.threads = st.threads, .weighted = st.weighted, .burst_s = st.burst_s,
                         .limit_depth = st.limit_depth, .shares = st.shares,
                         .shards = st.shards, .trace = trace, .trace_b = st.trace_b,
                         .ntrace = st.ntrace,
                         .progress = st.quiet ? NULL : progress, .arg = &pr};
    for (int i = 0; i < st.npolicies; i++) {
        if ((rc = sim_run(m, st.policies[i], &ro, &res[nres])) < 0) {
            fprintf(stderr, "\nbqos-sim: %s: %s\n", sim_policy_name(st.policies[i]), strerror(-rc));
            goto out;
        }
        const sim_result_t *r = res[nres++];
        if (!st.quiet)
            fprintf(stderr, "%sbqos-sim: %-11s meet95 %.4f  meet99 %.4f  mean error %.4f  %.2fM events/s  %.1fs\n",
                    pr.tty ? "\r\033[K" : "", sim_policy_name(r->policy), r->meet95, r->meet99,
                    r->mean_err, r->wall_s > 0 ? r->events / r->wall_s / 1e6 : 0, r->wall_s);
    }
    if (!st.quiet && nres)
        print_table(stderr, res, nres);
    root = json_object();
    json_t *pol = json_array();
    if (!root || !pol) {
        json_decref(pol);
        goto out;
    }
    json_object_set_new(root, "version", json_string(BQOS_VERSION));
    json_object_set_new(root, "config", config_json(m, &st));
    json_object_set_new(root, "policies", pol);
    for (int i = 0; i < nres; i++)
        json_array_append_new(pol, result_json(res[i]));
    if (st.json) {
        if (json_dump_file(root, st.json, JSON_INDENT(2)) < 0) {
            fprintf(stderr, "bqos-sim: cannot write %s\n", st.json);
            goto out;
        }
    } else {
        json_dumpf(root, stdout, JSON_INDENT(2));
        printf("\n");
    }
    if (st.csv && (rc = write_csv(st.csv, res, nres)) < 0) {
        fprintf(stderr, "bqos-sim: %s: %s\n", st.csv, strerror(-rc));
        goto out;
    }
    if (st.ivcsv && nres && (rc = write_ivcsv(st.ivcsv, res, nres, st.sample)) < 0) {
        fprintf(stderr, "bqos-sim: %s: %s\n", st.ivcsv, strerror(-rc));
        goto out;
    }
    status = 0;
out:
    if (trace && fclose(trace) != 0 && status == 0) {
        fprintf(stderr, "bqos-sim: %s: %s\n", st.trace, strerror(errno));
        status = 2;
    }
    json_decref(root);
    for (int i = 0; i < nres; i++)
        sim_result_destroy(&res[i]);
    sim_model_destroy(&m);
    return status;
}
