/* sim.c - bqos-sim: runs rr, static, pshift and clairvoyant over the same simulated cluster and reports how many buckets got their reservations. */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/version.h"
#include "workloads/scenario.h"
#include "workloads/sim/sim_model.h"
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
    "    compares the policies rr, static, pshift and clairvoyant on the same\n"
    "    arrivals.  Without --scenario it builds the paper's Experiment 1: bucket\n"
    "    reservations Zipf-distributed over the reserved capacity, each bucket's\n"
    "    demand (DEMAND x reservation) split Zipf over ACTIVE random servers, and\n"
    "    demand changes at random times that move a bucket to a fresh random set of\n"
    "    servers.  Requests arrive open loop at the demand's rate (or, with\n"
    "    --outstanding, closed loop: each bucket keeps N requests in flight at each\n"
    "    of its servers); IO service times are uniform in (1 +- SPREAD)/CAPACITY.\n"
    "    Open-loop requests still queued when a period ends are dropped.  The\n"
    "    defaults are Experiment 1 at full scale.\n"
    "\n"
    "    A bucket meets its reservation in a period when it is served at least\n"
    "    95% (or 99%) of reservation x period IOs.  A progress line per control\n"
    "    round goes to stderr; at the end a summary JSON (per policy: meet95,\n"
    "    meet99, mean_error, worst, events, events_per_s, ...) goes to stdout or\n"
    "    --json.  Runs are deterministic for a given seed, whatever --threads.\n"
    "\n"
    "OPTIONS\n";

static const char usage_tail[] =
    "    -p, --policies LIST    comma-separated policies to run, in order\n"
    "                           (default rr,static,pshift,clairvoyant)\n"
    "        --changes-exact    exactly CHANGES demand changes per period (default:\n"
    "                           uniform 0..CHANGES per bucket and period)\n"
    "        --poisson          Poisson arrivals (default: evenly spaced, as the paper)\n"
    "        --weighted         run the schedulers in weighted round robin, a bucket's\n"
    "                           weight being its reservation over the smallest one\n"
    "                           (default: plain round robin, the paper's Algorithm 1)\n"
    "        --true-capacity    pshift gets the true server capacities instead of\n"
    "                           the Haechi estimates\n"
    "        --scenario FILE    simulate a bqos-load scenario file (servers, capacity,\n"
    "                           period, intervals, duration, seed, buckets: open loop\n"
    "                           with \"rate\" and \"split_zipf\", else closed loop with\n"
    "                           \"outstanding\"; changes); generator options are then\n"
    "                           ignored; see docs/simulator.md\n"
    "    -j, --json FILE        write the summary JSON to FILE instead of stdout\n"
    "        --csv FILE         per-bucket results: policy,period,bucket,reserved,\n"
    "                           served,ratio\n"
    "        --intervals-csv FILE\n"
    "                           IOs per bucket per interval for every SAMPLE-th bucket:\n"
    "                           policy,period,bucket,reserved,i1..iK (Fig. 3(c))\n"
    "        --sample N         bucket stride of --intervals-csv (default 50)\n"
    "    -t, --threads N        OpenMP threads (default: OpenMP's)\n"
    "    -q, --quiet            no progress output\n"
    "    -h, --help             show this text and exit\n"
    "    -V, --version          show the version and exit\n"
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

typedef enum { T_INT, T_DBL, T_U64 } opt_type_t;

/* The generator's numeric settings: one row per option of sim_config_t. */
typedef struct {
    const char *name;
    char shrt;
    opt_type_t type;
    size_t off;
    double min, max;
    const char *arg, *help;
} num_opt_t;

#define OFF(f) offsetof(sim_config_t, f)
static const num_opt_t num_opts[] = {
    {"servers", 'S', T_INT, OFF(servers), 1, 65536, "N", "servers"},
    {"buckets", 'B', T_INT, OFF(buckets), 1, 1e7, "N", "buckets"},
    {"capacity", 'C', T_DBL, OFF(capacity), 1e-9, 1e9, "IOPS", "mean IOPS of a server"},
    {"spread", 0, T_DBL, OFF(svc_spread), 0, 1, "F", "service time spread around 1/C"},
    {"period", 'T', T_DBL, OFF(period), 1e-6, 1e6, "SECS", "QoS period"},
    {"intervals", 'K', T_INT, OFF(intervals), 1, 10000, "K", "redistribution intervals per period"},
    {"periods", 'P', T_INT, OFF(periods), 1, 100000, "N", "periods simulated (incl. warm-up)"},
    {"warmup", 'W', T_INT, OFF(warmup), 0, 99999, "N", "first periods not measured"},
    {"delay", 0, T_DBL, OFF(delay), 0, 1e6, "SECS", "controller delay before tokens apply"},
    {"reserved", 'r', T_DBL, OFF(reserved), 0, 1, "F", "share of capacity reserved"},
    {"res-zipf", 0, T_DBL, OFF(res_zipf), 0, 10, "S", "Zipf exponent of reservations"},
    {"demand", 'D', T_DBL, OFF(demand), 0, 1000, "F", "demand / reservation"},
    {"active", 'A', T_INT, OFF(active), 1, 65536, "N", "active servers per bucket (N_A)"},
    {"split-zipf", 0, T_DBL, OFF(split_zipf), 0, 10, "S", "Zipf exponent of the split"},
    {"changes", 'N', T_INT, OFF(changes), 0, 10000, "N", "demand changes per period (N_D)"},
    {"outstanding", 0, T_INT, OFF(outstanding), 0, 100000, "N",
     "closed loop: requests in flight per active server (0: open loop)"},
    {"seed", 's', T_U64, OFF(seed), 0, 1.8e19, "N", "random seed"},
};
#define NNUM (sizeof(num_opts) / sizeof(num_opts[0]))

enum {
    OPT_NUM = 1000, /* + index into num_opts */
    OPT_EXACT = 2000,
    OPT_POISSON,
    OPT_WEIGHTED,
    OPT_TRUECAP,
    OPT_SCENARIO,
    OPT_CSV,
    OPT_IVCSV,
    OPT_SAMPLE
};

/* Command-line settings: filled once by main(), read-only afterwards. */
typedef struct {
    sim_config_t cfg;
    int policies[SIM_NPOLICIES];
    int npolicies;
    const char *scenario, *json, *csv, *ivcsv;
    int sample;
    int threads;
    int weighted;
    int quiet;
} settings_t;

static void usage(FILE *f)
{
    sim_config_t d = sim_config_default();
    char opts[4096] = "", line[256];
    for (size_t i = 0; i < NNUM; i++) {
        const num_opt_t *o = &num_opts[i];
        char head[64], def[32];
        if (o->shrt)
            snprintf(head, sizeof(head), "-%c, --%s %s", o->shrt, o->name, o->arg);
        else
            snprintf(head, sizeof(head), "    --%s %s", o->name, o->arg);
        const char *p = (const char *)&d + o->off;
        if (o->type == T_INT)
            snprintf(def, sizeof(def), "%d", *(const int *)p);
        else if (o->type == T_DBL)
            snprintf(def, sizeof(def), "%g", *(const double *)p);
        else
            snprintf(def, sizeof(def), "%llu", (unsigned long long)*(const uint64_t *)p);
        snprintf(line, sizeof(line), "    %-22s %s (default %s)\n", head, o->help, def);
        strncat(opts, line, sizeof(opts) - strlen(opts) - 1);
    }
    fputs(usage_text, f);
    fputs(opts, f);
    fputs(usage_tail, f);
}

static int set_num(sim_config_t *c, const num_opt_t *o, const char *arg)
{
    char *end;
    errno = 0;
    double v = strtod(arg, &end);
    if (errno || end == arg || *end || !(v >= o->min && v <= o->max) ||
        (o->type != T_DBL && v != (double)(long long)v)) {
        fprintf(stderr, "bqos-sim: --%s: bad value '%s' (%g..%g)\n", o->name, arg, o->min, o->max);
        return -EINVAL;
    }
    char *p = (char *)c + o->off;
    if (o->type == T_INT)
        *(int *)p = (int)v;
    else if (o->type == T_DBL)
        *(double *)p = v;
    else
        *(uint64_t *)p = strtoull(arg, NULL, 10);
    return 0;
}

static int parse_policies(settings_t *st, const char *arg)
{
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", arg);
    st->npolicies = 0;
    for (char *sp, *tok = strtok_r(buf, ",", &sp); tok; tok = strtok_r(NULL, ",", &sp)) {
        int p = sim_policy_parse(tok);
        if (p < 0 || st->npolicies == SIM_NPOLICIES) {
            fprintf(stderr, "bqos-sim: --policies: unknown or repeated policy '%s'\n", tok);
            return -EINVAL;
        }
        st->policies[st->npolicies++] = p;
    }
    return st->npolicies ? 0 : -EINVAL;
}

static long parse_long(const char *name, const char *arg, long min, long max)
{
    char *end;
    errno = 0;
    long v = strtol(arg, &end, 10);
    if (errno || end == arg || *end || v < min || v > max) {
        fprintf(stderr, "bqos-sim: --%s: bad value '%s' (%ld..%ld)\n", name, arg, min, max);
        return -1;
    }
    return v;
}

/* Fills *st from argv.  Returns 0, 1 if the program should exit 0 (help,
 * version), -EINVAL for bad usage. */
static int parse_args(int argc, char **argv, settings_t *st)
{
    struct option lo[NNUM + 20];
    char so[128] = "p:j:t:qhV";
    size_t n = 0;
    for (size_t i = 0; i < NNUM; i++) {
        lo[n++] = (struct option){num_opts[i].name, required_argument, NULL, (int)(OPT_NUM + i)};
        if (num_opts[i].shrt) {
            size_t l = strlen(so);
            so[l] = num_opts[i].shrt;
            so[l + 1] = ':';
            so[l + 2] = 0;
        }
    }
    const struct option fixed[] = {
        {"policies", required_argument, NULL, 'p'},
        {"changes-exact", no_argument, NULL, OPT_EXACT},
        {"poisson", no_argument, NULL, OPT_POISSON},
        {"weighted", no_argument, NULL, OPT_WEIGHTED},
            {"scenario", required_argument, NULL, OPT_SCENARIO},
        {"json", required_argument, NULL, 'j'},
        {"csv", required_argument, NULL, OPT_CSV},
        {"intervals-csv", required_argument, NULL, OPT_IVCSV},
        {"sample", required_argument, NULL, OPT_SAMPLE},
        {"threads", required_argument, NULL, 't'},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0}};
    memcpy(&lo[n], fixed, sizeof(fixed));
    int c;
    long v;
    while ((c = getopt_long(argc, argv, so, lo, NULL)) != -1) {
        const num_opt_t *o = NULL;
        for (size_t i = 0; i < NNUM && !o; i++)
            if (c == (int)(OPT_NUM + i) || (num_opts[i].shrt && c == num_opts[i].shrt))
                o = &num_opts[i];
        if (o) {
            if (set_num(&st->cfg, o, optarg) < 0)
                return -EINVAL;
            continue;
        }
        switch (c) {
        case 'p':
            if (parse_policies(st, optarg) < 0)
                return -EINVAL;
            break;
        case OPT_EXACT: st->cfg.changes_upto = 0; break;
        case OPT_POISSON: st->cfg.poisson = 1; break;
        case OPT_WEIGHTED: st->weighted = 1; break;
        case OPT_SCENARIO: st->scenario = optarg; break;
        case 'j': st->json = optarg; break;
        case OPT_CSV: st->csv = optarg; break;
        case OPT_IVCSV: st->ivcsv = optarg; break;
        case OPT_SAMPLE:
            if ((v = parse_long("sample", optarg, 1, 1000000000)) < 0)
                return -EINVAL;
            st->sample = (int)v;
            break;
        case 't':
            if ((v = parse_long("threads", optarg, 1, 1024)) < 0)
                return -EINVAL;
            st->threads = (int)v;
            break;
        case 'q': st->quiet = 1; break;
        case 'h': usage(stdout); return 1;
        case 'V': printf("bqos-sim %s\n", BQOS_VERSION); return 1;
        default:
            fprintf(stderr, "Try 'bqos-sim --help'.\n");
            return -EINVAL;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "bqos-sim: unexpected argument '%s'\nTry 'bqos-sim --help'.\n", argv[optind]);
        return -EINVAL;
    }
    return 0;
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
    return j;
}

static json_t *result_json(const sim_result_t *r)
{
    return json_pack("{s:s,s:I,s:f,s:f,s:f,s:f,s:I,s:f,s:f,s:f,s:I,s:I,s:I,s:I,s:I}", "policy",
                     sim_policy_name(r->policy), "samples", (json_int_t)r->samples, "meet95",
                     r->meet95, "meet99", r->meet99, "mean_error", r->mean_err, "worst", r->worst,
                     "events", (json_int_t)r->events, "events_per_s",
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
                fprintf(f, "%s,%d,%d,%.0f,%llu,%.4f\n", sim_policy_name(r->policy), p, b,
                        r->reserved[b], (unsigned long long)s,
                        r->reserved[b] > 0 ? s / r->reserved[b] : 1.0);
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
                fprintf(f, "%s,%d,%d,%.0f", sim_policy_name(r->policy), p, b, r->reserved[b]);
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
    settings_t st = {.cfg = sim_config_default(), .sample = 50};
    int rc = parse_args(argc, argv, &st);
    if (rc)
        return rc > 0 ? 0 : 1;
    if (!st.npolicies)
        for (int i = 0; i < SIM_NPOLICIES; i++)
            st.policies[st.npolicies++] = i;
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
    progress_t pr = {.tty = isatty(2), .K = m->cfg.intervals, .P = m->cfg.periods};
    sim_run_opts_t ro = {.threads = st.threads, .weighted = st.weighted,
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
    json_decref(root);
    for (int i = 0; i < nres; i++)
        sim_result_destroy(&res[i]);
    sim_model_destroy(&m);
    return status;
}
