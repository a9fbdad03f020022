/* simprop.c - bqos-sim-prop: the QoS property test over random scenarios in the simulator (issue 25), one line per seed and the totals against the targets. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/opts.h"
#include "controller/ctrl.h"
#include "workloads/scenario.h"
#include "workloads/sim/sim_measured.h"
#include "workloads/sim/sim_model.h"
#include "workloads/sim/sim_prop.h"
#include "workloads/sim/sim_run.h"

static const char usage_text[] =
    "bqos-sim-prop - the QoS property test: random scenarios in bqos-sim, judged\n"
    "\n"
    "Runs seeds FIRST..FIRST+SEEDS-1: each draws a scenario (docs/simulator.md,\n"
    "\"Property test\"), simulates POLICY over it and judges every bucket-period\n"
    "whose period's reservations fit into what the servers delivered (max-flow)\n"
    "and whose concurrency allows its R.  Prints per seed: servers, buckets,\n"
    "judged bucket-periods, the share served >= 99% of R, the worst, and the\n"
    "limit figures; then the totals against issue 25's targets (>= 99.5% at\n"
    ">= 99% of R, none below 90%, none over 1.01 x L per period or 1.05 x L per\n"
    "1 s window).  Exit status 1 when a --require-* bound fails, 2 on errors.\n"
    "\n"
    "    bqos-sim-prop --seeds 500                # the targets' run\n"
    "    bqos-sim-prop --dump 17 > s17.json       # seed 17's scenario, for bqos-sim\n"
    "    bqos-sim-prop --scenario examples/issue25-sim.json\n"
    "    bqos-sim-prop --scenario real.json --measured out/run   # a real-node run\n"
    "\n"
    "With --measured DIR nothing is simulated: the checker judges what bqos-load\n"
    "measured on real nodes running --scenario (DIR/periods.csv and servers.csv,\n"
    "bqos-load -o DIR; the scenario's capacity is the real servers' throughput, and\n"
    "its workload rtt_ms plus 1 / capacity their unloaded round trip, which the\n"
    "concurrency test uses).\n"
    "\n";

typedef struct {
    int seeds, threads, quiet, help, limits, headroom;
    long long first, dump;
    const char *policy, *scenario, *misses, *measured;
    double min_met99, min_worst;
} settings_t;

#define NROWS 14

int main(int argc, char **argv)
{
    settings_t st = {0};
    const opts_row_t rows[NROWS] = {
        {.name = "seeds", .type = OPTS_INT, .target = &st.seeds, .arg = "N", .deflt = "20",
         .min = 1, .max = 1000000, .help = "seeds to run ({default})"},
        {.name = "first", .type = OPTS_I64, .target = &st.first, .arg = "SEED", .deflt = "1",
         .min = 0, .max = 1e15, .help = "first seed ({default})"},
        {.name = "policy", .type = OPTS_STRING, .target = &st.policy, .arg = "NAME",
         .deflt = "pshift-paced", .help = "bqos-sim policy ({default})"},
        {.name = "dump", .type = OPTS_I64, .target = &st.dump, .arg = "SEED", .deflt = "-1",
         .min = -1, .max = 1e15, .help = "print seed SEED's scenario JSON and exit"},
        {.name = "scenario", .type = OPTS_STRING, .target = &st.scenario, .arg = "FILE",
         .help = "judge this scenario file instead of random seeds"},
        {.name = "measured", .type = OPTS_STRING, .target = &st.measured, .arg = "DIR",
         .help = "judge bqos-load's outputs in DIR (a real-node run of --scenario)\n"
                 "instead of simulating"},
        {.name = "require-met99", .type = OPTS_DOUBLE, .target = &st.min_met99, .arg = "F",
         .deflt = "0", .min = 0, .max = 1,
         .help = "exit 1 unless this share of judged bucket-periods got >= 99% of R"},
        {.name = "require-worst", .type = OPTS_DOUBLE, .target = &st.min_worst, .arg = "F",
         .deflt = "0", .min = 0, .max = 1,
         .help = "exit 1 if a judged bucket-period got less than F x R"},
        {.name = "require-limits", .type = OPTS_FLAG, .target = &st.limits,
         .help = "exit 1 if a period exceeds 1.01 x L or a 1 s window 1.05 x L"},
        {.name = "headroom", .type = OPTS_INT, .target = &st.headroom, .arg = "N",
         .deflt = "-1", .min = -1, .max = 1024,
         .help = "the adaptive window's reserved headroom in every scenario (bqos-node's\n"
                 "--window-headroom; 0: off); -1: the scenario's, else the default"},
        {.name = "judged-csv", .type = OPTS_STRING, .target = &st.misses, .arg = "FILE",
         .help = "write every judged bucket-period to FILE (CSV: served / R and what it\n"
                 "had: concurrency, servers, slow, step, set, moved)"},
        {.name = "threads", .shrt = 't', .type = OPTS_INT, .target = &st.threads, .arg = "N",
         .deflt = "1", .min = 1, .max = 1024, .help = "simulator threads ({default})"},
        {.name = "quiet", .shrt = 'q', .type = OPTS_FLAG, .target = &st.quiet,
         .help = "only the totals"},
        {.name = "help", .shrt = 'h', .type = OPTS_FLAG, .target = &st.help, .flags = OPTS_STOP,
         .help = "print this help and exit"},
    };
    const opts_cmd_t cmd = {.prog = "bqos-sim-prop", .rows = rows, .n = NROWS};
    int rc = opts_parse(&cmd, argc, argv, NULL);
    if (rc < 0)
        return 2;
    if (st.help) {
        fputs(usage_text, stdout);
        opts_help_table(stdout, rows, NROWS, 4, 23);
        return 0;
    }
    int policy = sim_policy_parse(st.policy);
    if (policy < 0)
        return opts_fail(&cmd, "--policy: unknown policy '%s'", st.policy), 2;
    if (st.dump >= 0) {
        char *text = sim_prop_scenario((uint64_t)st.dump);
        if (!text)
            return 2;
        puts(text);
        free(text);
        return 0;
    }
    size_t sjudged = 0, smet = 0, judged = 0, met = 0, below90 = 0, lper = 0, lover = 0, fit = 0, periods = 0;
    double worst = 1, lworst = 0, lwin = 0;
    long long worst_seed = -1, lwin_seed = -1;
    int bad = 0;
    if (!st.quiet)
        printf("%6s %3s %3s %7s %7s %8s %6s %8s %7s %7s %7s\n", "seed", "S", "B", "fit", "judged",
               ">=99%R", "worst", "(b@per)", "L over", "L/per", "L/1s");
    if (st.measured && !st.scenario)
        return opts_fail(&cmd, "--measured needs --scenario (the scenario that ran)"), 2;
    if (st.measured)
        st.policy = "measured";
    if (st.scenario) {
        st.first = 0;
        st.seeds = 1;
    }
    FILE *mlog = NULL;
    if (st.misses) {
        if (!(mlog = fopen(st.misses, "w"))) {
            fprintf(stderr, "bqos-sim-prop: %s: %s\n", st.misses, strerror(errno));
            return 2;
        }
        fputs("seed,period,bucket,ratio,concurrency,servers,server,slow,step,set,moved,r,"
              "limited,util\n", mlog);
    }
    for (long long seed = st.first; seed < st.first + st.seeds; seed++) {
        char *text = st.scenario ? NULL : sim_prop_scenario((uint64_t)seed);
        scenario_t *sc = NULL;
        sim_model_t *m = NULL;
        sim_result_t *r = NULL;
        jsonloc_err_t je;
        char err[256];
        sim_config_t run = sim_config_default();
        run.delay = 0.01;
        run.warmup = 0;
        if (st.scenario && scenario_load(st.scenario, NULL, &sc, &je) < 0) {
            fprintf(stderr, "bqos-sim-prop: %s:%d:%d: %s\n", je.source, je.line, je.col, je.text);
            return 2;
        }
        if (!sc && (!text || scenario_parse(text, strlen(text), "random", NULL, &sc, &je) < 0)) {
            fprintf(stderr, "bqos-sim-prop: seed %lld: bad scenario: %s\n", seed,
                    text ? je.text : "out of memory");
            return 2;
        }
        /* bqos-node's --burst and bqos-controller's --limit-depth defaults */
        sim_run_opts_t ro = {.threads = st.threads, .burst_s = SIM_BURST_DEFAULT,
                             .limit_depth = ctrl_config_default().limit_depth};
        sim_prop_verdict_t v;
        if (st.headroom >= 0)
            sc->backend_headroom = st.headroom;
        if ((rc = sim_model_from_scenario(sc, &run, &m, err, sizeof(err))) < 0) {
            fprintf(stderr, "bqos-sim-prop: seed %lld: %s\n", seed, err);
            return 2;
        }
        if (st.measured && (rc = sim_measured_load(sc, m, st.measured, &r, err, sizeof(err))) < 0) {
            fprintf(stderr, "bqos-sim-prop: %s\n", err);
            return 2;
        }
        if ((!st.measured && (rc = sim_run(m, (sim_policy_t)policy, &ro, &r)) < 0) ||
            (rc = sim_prop_check_log(m, r, &v, mlog, seed)) < 0) {
            fprintf(stderr, "bqos-sim-prop: seed %lld: %s\n", seed, strerror(-rc));
            return 2;
        }
        if (!st.quiet)
            printf("%6lld %3d %3d %3zu/%-3zu %7zu %7.2f%% %6.3f %4d@%-3d %7zu %7.3f %7.3f\n",
                   seed, m->cfg.servers, m->cfg.buckets, v.fit, v.periods, v.judged,
                   v.judged ? 100.0 * v.met99 / v.judged : 100.0, v.worst, v.worst_bucket,
                   v.worst_period, v.l_over, v.l_worst, v.l_win_worst);
        judged += v.judged;
        sjudged += v.short_judged;
        smet += v.short_met99;
        met += v.met99;
        below90 += v.below90;
        lper += v.l_periods;
        lover += v.l_over;
        fit += v.fit;
        periods += v.periods;
        if (v.worst < worst) {
            worst = v.worst;
            worst_seed = seed;
        }
        if (v.l_worst > lworst)
            lworst = v.l_worst;
        if (v.l_win_worst > lwin) {
            lwin = v.l_win_worst;
            lwin_seed = seed;
        }
        sim_result_destroy(&r);
        sim_model_destroy(&m);
        scenario_destroy(&sc);
        free(text);
    }
    if (mlog)
        fclose(mlog);
    double share = judged ? (double)met / judged : 1;
    printf("bqos-sim-prop: %d seeds from %lld, policy %s: %zu of %zu periods fit, %zu judged "
           "bucket-periods\n", st.seeds, st.first, st.policy, fit, periods, judged);
    printf("  R: %.2f%% >= 99%% of R (target >= 99.5%%: %s), %zu below 90%% (target 0: %s), "
           "worst %.3f (seed %lld)\n", 100 * share, share >= 0.995 ? "met" : "NOT met", below90,
           below90 ? "NOT met" : "met", worst, worst_seed);
    printf("  below the guarantee (in flight for 1-2 x R at the unloaded round trip; not judged): "
           "%zu bucket-periods, %.2f%% >= 99%% of R\n", sjudged,
           sjudged ? 100.0 * smet / sjudged : 100.0);
    printf("  L: %zu of %zu limited bucket-periods over 1.01 x L (worst %.3f); worst 1 s window "
           "%.3f x L (seed %lld) (target <= 1.05: %s)\n", lover, lper, lworst, lwin, lwin_seed,
           lwin <= 1.05 ? "met" : "NOT met");
    if (share < st.min_met99) {
        printf("FAIL: %.2f%% >= 99%% of R, required %.2f%%\n", 100 * share, 100 * st.min_met99);
        bad = 1;
    }
    if (judged && worst < st.min_worst) {
        printf("FAIL: worst %.3f x R, required >= %.3f\n", worst, st.min_worst);
        bad = 1;
    }
    if (st.limits && (lover || lwin > 1.05)) {
        printf("FAIL: limits exceeded\n");
        bad = 1;
    }
    return bad;
}
