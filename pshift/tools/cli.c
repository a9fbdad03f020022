/* cli.c - bqos-pshift: solve pShift token allocation problems from JSON, generate instances, run the benchmark. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/log.h"
#include "common/version.h"
#include "pshift/tools/bench.h"
#include "pshift/tools/gen.h"
#include "pshift/tools/pjson.h"
#include "pshift/pshift.h"

#define PROG "bqos-pshift"

/* Exit codes. */
enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2 };

static const char usage_main[] =
    "NAME\n"
    "    bqos-pshift - place bucket reservation tokens on storage servers (pShift)\n"
    "\n"
    "SYNOPSIS\n"
    "    bqos-pshift solve [--threads N] [--approx-top M] [--pretty] FILE|-\n"
    "    bqos-pshift gen [--servers N] [--buckets N] [--reserved-fraction R]\n"
    "                    [--demand-ratio M] [--zipf S] [--split-zipf S] [--active N]\n"
    "                    [--capacity C] [--limit-ratio L] [--seed N] [--pretty]\n"
    "    bqos-pshift bench [--fig LIST] [--quick] [--large] [--large-maxflow]\n"
    "                      [--no-maxflow] [--threads-max N] [--repeat N] [--seed N]\n"
    "                      [--json] [--quiet]\n"
    "    bqos-pshift COMMAND --help\n"
    "    bqos-pshift --help | --version\n"
    "\n"
    "DESCRIPTION\n"
    "    Given each server's IO capacity and each bucket's reservation and\n"
    "    per-server demand, pShift (Peng, Liu, Varman, MSST 2019) distributes\n"
    "    every bucket's tokens over the servers so that the number of tokens the\n"
    "    servers can consume, the effective capacity Phi, is the maximum.\n"
    "\n"
    "    solve   read a problem as JSON and print the allocation as JSON\n"
    "    gen     print a random problem shaped like the paper's Section IV\n"
    "    bench   time the paper's Fig. 5, 6, 7 configurations against igraph's\n"
    "            max-flow on the same instances\n"
    "\n"
    "    Formats and algorithm: docs/pshift.md.\n"
    "\n"
    "EXIT STATUS\n"
    "    0 success; 1 failure (out of memory, write error, bench mismatch);\n"
    "    2 bad usage or bad input (one line on stderr:\n"
    "    \"bqos-pshift: FILE:LINE:COL: PATH: what is wrong\").\n";

static const char usage_solve[] =
    "NAME\n"
    "    bqos-pshift solve - compute the token allocation of a problem\n"
    "\n"
    "SYNOPSIS\n"
    "    bqos-pshift solve [--threads N] [--approx-top M] [--pretty] FILE|-\n"
    "\n"
    "DESCRIPTION\n"
    "    Reads FILE (or stdin for -), a JSON object\n"
    "      {\"servers\": [{\"name\": \"s1\", \"capacity\": 100}, ...],\n"
    "       \"buckets\": [{\"name\": \"red\", \"reservation\": 100, \"limit\": 150,\n"
    "                    \"demand\": {\"s1\": 150, \"s2\": 50}}, ...],\n"
    "       \"meta\": ANY}\n"
    "    (\"limit\" and \"meta\" optional; numbers are non-negative integers) and\n"
    "    prints one JSON object:\n"
    "      {\"phi\": N, \"solve_seconds\": T, \"allocation\": {\"red\": {\"s1\": 75, ...}},\n"
    "       \"stats\": {...}}\n"
    "    phi is the effective capacity of the reservation allocation and\n"
    "    solve_seconds the allocator's wall time, without parsing and printing.\n"
    "    When any bucket has a limit, a second pass places the limit tokens\n"
    "    (limit minus the reservation tokens placed; no limit = unbounded) on\n"
    "    the residual demand and capacity and adds \"limit_phi\",\n"
    "    \"limit_allocation\" and \"limit_stats\"; solve_seconds then covers both\n"
    "    passes.  Allocations list every server where the bucket has demand.\n"
    "\n"
    "OPTIONS\n"
    "    --threads N      OpenMP threads (default 1; 0 = OpenMP default).  The\n"
    "                     result is the same for any N.\n"
    "    --approx-top M   shift only the top M buckets by tokens and by spare\n"
    "                     demand (default 0 = exact, optimal Phi)\n"
    "    --pretty         indent the output\n"
    "    --help           print this text\n"
    "\n"
    "ERRORS\n"
    "    Bad input is rejected with exit status 2 and one line naming the\n"
    "    position and the path of the offending value, e.g.\n"
    "      bqos-pshift: in.json:7:32: buckets[1].demand.s9: demand of bucket\n"
    "      \"blue\" on unknown server \"s9\"\n";

static const char usage_gen[] =
    "NAME\n"
    "    bqos-pshift gen - print a random problem for bqos-pshift solve\n"
    "\n"
    "SYNOPSIS\n"
    "    bqos-pshift gen [OPTIONS]\n"
    "\n"
    "DESCRIPTION\n"
    "    Prints a problem shaped like the paper's Section IV: bucket i gets the\n"
    "    weight 1/i^S and the reserved capacity R * servers * capacity is split\n"
    "    in proportion to the weights; each bucket's demand M * reservation is\n"
    "    split over N random distinct servers with Zipf weights 1/k^S2.  The\n"
    "    same options and seed give the same output on every machine.  The\n"
    "    parameters are echoed under \"meta\".\n"
    "\n"
    "OPTIONS\n"
    "    --servers N            servers s1..sN (default 64)\n"
    "    --buckets N            buckets b1..bN (default 10000)\n"
    "    --reserved-fraction R  share of the total capacity reserved, 0..1 (1.0)\n"
    "    --demand-ratio M       demand / reservation of every bucket, >= 1 (1.5)\n"
    "    --zipf S               Zipf exponent of the reservations (0.5)\n"
    "    --split-zipf S2        Zipf exponent of the demand split (0.5)\n"
    "    --active N             servers with demand per bucket (8, at most servers)\n"
    "    --capacity C           capacity of every server (100000)\n"
    "    --limit-ratio L        give each bucket limit L * reservation; 0 = none (0)\n"
    "    --seed N               random seed (1)\n"
    "    --pretty               indent the output\n"
    "    --help                 print this text\n";

static const char usage_bench[] =
    "NAME\n"
    "    bqos-pshift bench - time pShift against igraph max-flow\n"
    "\n"
    "SYNOPSIS\n"
    "    bqos-pshift bench [OPTIONS]\n"
    "\n"
    "DESCRIPTION\n"
    "    Runs the paper's configurations and prints one row per point: solve\n"
    "    time, Phi, Phi over the optimum, weak excess removed, shifts, longest\n"
    "    shift path, and igraph's push-relabel max-flow time (mf_ms, graph\n"
    "    building apart in mf_bld_ms) on the same instance with the ratio\n"
    "    mf/pS.  Every exact Phi is checked against the max-flow value; a\n"
    "    mismatch is flagged and makes the exit status 1.\n"
    "      fig5   64 x 10,000, r in {1.0, 0.9}, m in {1.1, 1.25, 1.5, 2},\n"
    "             threads 1..N\n"
    "      fig6   64 x 10,000, r 1.0, m 1.1, s in {0, 0.1, 0.25, 0.5, 1, 2},\n"
    "             approximation M in {exact, 100, 200, 500, 1000, 2000, 5000}\n"
    "      fig7   64 servers x 100..1,000 buckets, r 1.0, m 1.1, 1 thread\n"
    "      large  1,024 x 1,000,000, 8 active, r 1.0, m 1.1, threads 1..N,\n"
    "             with the peak RSS (getrusage)\n"
    "    Progress lines go to stderr.\n"
    "\n"
    "OPTIONS\n"
    "    --fig LIST        comma-separated subset of 5,6,7 (default: all three\n"
    "                      unless --large is given)\n"
    "    --quick           fewer points and one repetition\n"
    "    --large           run the large case\n"
    "    --large-maxflow   also run igraph on the large case (slow, several GB)\n"
    "    --no-maxflow      skip the max-flow baseline\n"
    "    --threads-max N   thread counts 1..N (default: number of CPUs)\n"
    "    --repeat N        solves per point, the fastest is reported (3)\n"
    "    --seed N          instance seed (1)\n"
    "    --json            a JSON array instead of the table\n"
    "    --quiet           no progress lines\n"
    "    --help            print this text\n";

/* ---- option tables ------------------------------------------------------ */

typedef enum { OPT_INT, OPT_I64, OPT_U64, OPT_DBL, OPT_FLAG, OPT_STR } opt_type_t;

/* One option: its name without "--", its type, where it goes and the bounds
 * of numeric values.  OPT_FLAG stores `min` (as int) into *dst. */
typedef struct {
    const char *name;
    opt_type_t type;
    void *dst;
    double min, max;
} opt_t;

static int bad_usage(const char *cmd, const char *fmt, const char *arg)
{
    fprintf(stderr, PROG ": ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nTry '" PROG "%s%s --help'.\n", cmd ? " " : "", cmd ? cmd : "");
    return -EINVAL;
}

static int set_value(const char *cmd, const opt_t *o, const char *val)
{
    char *end = NULL;
    errno = 0;
    switch (o->type) {
    case OPT_INT:
    case OPT_I64:
    case OPT_U64: {
        if (o->type == OPT_U64 && val[0] == '-') break;
        long long n = strtoll(val, &end, 10);
        if (errno || end == val || *end || (double)n < o->min || (double)n > o->max) break;
        if (o->type == OPT_INT) *(int *)o->dst = (int)n;
        else if (o->type == OPT_I64) *(int64_t *)o->dst = n;
        else *(uint64_t *)o->dst = (uint64_t)n;
        return 0;
    }
    case OPT_DBL: {
        double d = strtod(val, &end);
        if (errno || end == val || *end || !isfinite(d) || d < o->min || d > o->max) break;
        *(double *)o->dst = d;
        return 0;
    }
    case OPT_STR:
        *(const char **)o->dst = val;
        return 0;
    case OPT_FLAG:
        break;
    }
    char msg[160];
    snprintf(msg, sizeof msg, "bad value for --%s: '%%s' (expected a %s in [%g, %g])", o->name,
             o->type == OPT_DBL ? "number" : "whole number", o->min, o->max);
    return bad_usage(cmd, msg, val);
}

/* Parses argv[1..argc) against `opts`: "--name value", "--name=value" and
 * flags; other arguments ("-" included) go to pos[] (at most `maxpos`).
 * Returns the number of positional arguments, 1000 for --help, or -EINVAL
 * after printing the reason. */
static int parse_opts(const char *cmd, int argc, char **argv, const opt_t *opts,
                      const char **pos, int maxpos)
{
    int npos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) return 1000;
        if (strncmp(a, "--", 2) != 0 || a[2] == '\0') {
            if (strcmp(a, "--") == 0) continue;
            if (a[0] == '-' && a[1] != '\0') return bad_usage(cmd, "unknown option '%s'", a);
            if (npos >= maxpos) return bad_usage(cmd, "unexpected argument '%s'", a);
            pos[npos++] = a;
            continue;
        }
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t nlen = eq ? (size_t)(eq - name) : strlen(name);
        const opt_t *o = NULL;
        for (const opt_t *p = opts; p->name; p++)
            if (strlen(p->name) == nlen && strncmp(p->name, name, nlen) == 0) o = p;
        if (!o) return bad_usage(cmd, "unknown option '%s'", a);
        if (o->type == OPT_FLAG) {
            if (eq) return bad_usage(cmd, "option '%s' takes no value", a);
            *(int *)o->dst = (int)o->min;
            continue;
        }
        const char *val = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (!val) return bad_usage(cmd, "option '%s' needs a value", a);
        if (set_value(cmd, o, val) < 0) return -EINVAL;
    }
    return npos;
}

/* ---- solve -------------------------------------------------------------- */

static void print_input_error(const char *file, const jsonloc_err_t *e)
{
    const char *name = strcmp(file, "-") == 0 ? "<stdin>" : file;
    if (e->line > 0)
        fprintf(stderr, PROG ": %s:%d:%d: ", name, e->line, e->col);
    else
        fprintf(stderr, PROG ": %s: ", name);
    if (e->path[0]) fprintf(stderr, "%s: ", e->path);
    fprintf(stderr, "%s\n", e->text);
}

static int solve_error(const char *file, int rc)
{
    const char *name = strcmp(file, "-") == 0 ? "<stdin>" : file;
    switch (rc) {
    case -EOVERFLOW:
        fprintf(stderr, PROG ": %s: a sum of demands, capacities or targets overflows 64 bits\n",
                name);
        return EXIT_USAGE;
    case -EEXIST:
        fprintf(stderr, PROG ": %s: a demand is given twice\n", name);
        return EXIT_USAGE;
    default:
        fprintf(stderr, PROG ": %s: cannot solve: %s\n", name, strerror(-rc));
        return EXIT_FAIL;
    }
}

static int cmd_solve(int argc, char **argv)
{
    int threads = 1, pretty = 0;
    int64_t approx = 0;
    const opt_t opts[] = {
        {"threads", OPT_INT, &threads, 0, 1024},
        {"approx-top", OPT_I64, &approx, 0, 1e15},
        {"pretty", OPT_FLAG, &pretty, 1, 1},
        {NULL, OPT_FLAG, NULL, 0, 0},
    };
    const char *pos[1];
    int n = parse_opts("solve", argc, argv, opts, pos, 1);
    if (n == 1000) {
        fputs(usage_solve, stdout);
        return EXIT_OK;
    }
    if (n < 0) return EXIT_USAGE;
    if (n != 1) {
        bad_usage("solve", "%s", "missing FILE (use - for stdin)");
        return EXIT_USAGE;
    }

    pjson_input_t in;
    jsonloc_err_t err;
    pshift_problem_t *lim = NULL;
    int64_t *targets = NULL;
    int status = EXIT_FAIL;
    int rc = pjson_read_file(pos[0], &in, &err);
    if (rc < 0) {
        if (rc == -ENOMEM) {
            fprintf(stderr, PROG ": out of memory\n");
            return EXIT_FAIL;
        }
        print_input_error(pos[0], &err);
        return EXIT_USAGE; /* bad document, or a file that cannot be read */
    }
    pshift_opts_t o = PSHIFT_OPTS_DEFAULT;
    o.threads = threads;
    o.approx_top = (size_t)approx;
    if ((rc = pshift_solve(in.problem, &o)) < 0) {
        status = solve_error(pos[0], rc);
        goto out;
    }
    if (in.has_limits) {
        int nb = pshift_nbuckets(in.problem);
        targets = malloc((nb ? (size_t)nb : 1) * sizeof *targets);
        if (!targets) goto nomem;
        for (int b = 0; b < nb; b++) {
            int64_t placed = 0;
            for (size_t k = 0; k < pshift_bucket_nentries(in.problem, b); k++) {
                int64_t a;
                pshift_bucket_entry(in.problem, b, k, NULL, NULL, &a);
                placed += a;
            }
            int64_t l = in.limits[b];
            targets[b] = l == PJSON_NO_LIMIT ? INT64_MAX : (l > placed ? l - placed : 0);
        }
        if (!(lim = pshift_residual_new(in.problem, targets))) goto nomem;
        if ((rc = pshift_solve(lim, &o)) < 0) {
            status = solve_error(pos[0], rc);
            goto out;
        }
    }
    if (pjson_write_solution(stdout, in.problem, lim, pretty) < 0) {
        fprintf(stderr, PROG ": cannot write the solution: %s\n", strerror(errno));
        goto out;
    }
    status = EXIT_OK;
    goto out;
nomem:
    fprintf(stderr, PROG ": out of memory\n");
out:
    pshift_problem_destroy(&lim);
    free(targets);
    pjson_input_clear(&in);
    return status;
}

/* ---- gen ---------------------------------------------------------------- */

static int cmd_gen(int argc, char **argv)
{
    gen_params_t g = GEN_PARAMS_DEFAULT;
    int pretty = 0;
    g.active = -1;
    const opt_t opts[] = {
        {"servers", OPT_INT, &g.servers, 1, 1 << 20},
        {"buckets", OPT_INT, &g.buckets, 0, 1 << 30},
        {"reserved-fraction", OPT_DBL, &g.reserved_fraction, 0, 1},
        {"demand-ratio", OPT_DBL, &g.demand_ratio, 1, 1e6},
        {"zipf", OPT_DBL, &g.zipf, 0, 100},
        {"split-zipf", OPT_DBL, &g.split_zipf, 0, 100},
        {"active", OPT_INT, &g.active, 1, 1 << 20},
        {"capacity", OPT_I64, &g.capacity, 0, 1e15},
        {"limit-ratio", OPT_DBL, &g.limit_ratio, 0, 1e6},
        {"seed", OPT_U64, &g.seed, 0, 9.2e18},
        {"pretty", OPT_FLAG, &pretty, 1, 1},
        {NULL, OPT_FLAG, NULL, 0, 0},
    };
    const char *pos[1];
    int n = parse_opts("gen", argc, argv, opts, pos, 0);
    if (n == 1000) {
        fputs(usage_gen, stdout);
        return EXIT_OK;
    }
    if (n < 0) return EXIT_USAGE;
    /* The paper's 8 active servers, unless there are fewer servers. */
    if (g.active < 0) g.active = g.servers < 8 ? g.servers : 8;
    char msg[128];
    if (gen_check(&g, msg, sizeof msg) < 0) {
        bad_usage("gen", "%s", msg);
        return EXIT_USAGE;
    }

    pshift_problem_t *p = NULL;
    int64_t *limits = NULL;
    json_t *meta = NULL;
    int status = EXIT_FAIL;
    int rc = gen_problem(&g, &p, &limits);
    if (rc < 0) {
        fprintf(stderr, PROG ": gen: %s\n", strerror(-rc));
        goto out;
    }
    /* pjson_write_problem() reads demands back from a solved problem. */
    pshift_opts_t o = PSHIFT_OPTS_DEFAULT;
    if ((rc = pshift_solve(p, &o)) < 0) {
        fprintf(stderr, PROG ": gen: %s\n", strerror(-rc));
        goto out;
    }
    meta = json_pack("{s:s,s:i,s:i,s:f,s:f,s:f,s:f,s:i,s:I,s:f,s:I}", "generator", PROG " gen",
                     "servers", g.servers, "buckets", g.buckets, "reserved_fraction",
                     g.reserved_fraction, "demand_ratio", g.demand_ratio, "zipf", g.zipf,
                     "split_zipf", g.split_zipf, "active", g.active, "capacity",
                     (json_int_t)g.capacity, "limit_ratio", g.limit_ratio, "seed",
                     (json_int_t)g.seed);
    if (!meta) {
        fprintf(stderr, PROG ": out of memory\n");
        goto out;
    }
    if (pjson_write_problem(stdout, p, g.limit_ratio > 0 ? limits : NULL, meta, pretty) < 0) {
        fprintf(stderr, PROG ": cannot write the problem: %s\n", strerror(errno));
        goto out;
    }
    status = EXIT_OK;
out:
    json_decref(meta);
    free(limits);
    pshift_problem_destroy(&p);
    return status;
}

/* ---- bench -------------------------------------------------------------- */

static int cmd_bench(int argc, char **argv)
{
    bench_opts_t b = BENCH_OPTS_DEFAULT;
    const char *figs = NULL;
    int quiet = 0, no_mf = 0;
    const opt_t opts[] = {
        {"fig", OPT_STR, &figs, 0, 0},
        {"quick", OPT_FLAG, &b.quick, 1, 1},
        {"large", OPT_FLAG, &b.large, 1, 1},
        {"large-maxflow", OPT_FLAG, &b.large_maxflow, 1, 1},
        {"no-maxflow", OPT_FLAG, &no_mf, 1, 1},
        {"threads-max", OPT_INT, &b.threads_max, 1, 1024},
        {"repeat", OPT_INT, &b.repeat, 1, 1000},
        {"seed", OPT_U64, &b.seed, 0, 9.2e18},
        {"json", OPT_FLAG, &b.json, 1, 1},
        {"quiet", OPT_FLAG, &quiet, 1, 1},
        {NULL, OPT_FLAG, NULL, 0, 0},
    };
    const char *pos[1];
    int n = parse_opts("bench", argc, argv, opts, pos, 0);
    if (n == 1000) {
        fputs(usage_bench, stdout);
        return EXIT_OK;
    }
    if (n < 0) return EXIT_USAGE;
    if (figs) {
        for (const char *c = figs; *c; c++) {
            if (*c == '5') b.fig5 = 1;
            else if (*c == '6') b.fig6 = 1;
            else if (*c == '7') b.fig7 = 1;
            else if (*c != ',') {
                bad_usage("bench", "bad --fig list '%s' (expected e.g. 5,6,7)", figs);
                return EXIT_USAGE;
            }
        }
    } else if (b.large) {
        b.fig5 = b.fig6 = b.fig7 = 0; /* --large alone runs only the large case */
    }
    if (b.large_maxflow) b.large = 1;
    if (b.quick && b.repeat == BENCH_OPTS_DEFAULT.repeat) b.repeat = 1;
    b.maxflow = !no_mf;
    if (no_mf) b.large_maxflow = 0;
    b.progress = !quiet;
    int rc = bench_run(&b, stdout);
    if (rc == -EDOM) {
        fprintf(stderr, PROG ": bench: pShift's Phi differs from the max-flow optimum\n");
        return EXIT_FAIL;
    }
    if (rc < 0) {
        fprintf(stderr, PROG ": bench: %s\n", strerror(-rc));
        return EXIT_FAIL;
    }
    return EXIT_OK;
}

/* ---- main --------------------------------------------------------------- */

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
} command_t;

static const command_t commands[] = {
    {"solve", cmd_solve},
    {"gen", cmd_gen},
    {"bench", cmd_bench},
};

int main(int argc, char **argv)
{
    bqos_log_init(PROG, BQOS_LOG_WARN);
    if (argc < 2) {
        fputs(usage_main, stderr);
        return EXIT_USAGE;
    }
    const char *c = argv[1];
    if (strcmp(c, "--help") == 0 || strcmp(c, "-h") == 0 || strcmp(c, "help") == 0) {
        fputs(usage_main, stdout);
        return EXIT_OK;
    }
    if (strcmp(c, "--version") == 0) {
        printf(PROG " " BQOS_VERSION "\n");
        return EXIT_OK;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(c, commands[i].name) == 0) return commands[i].run(argc - 1, argv + 1);
    bad_usage(NULL, "unknown command '%s'", c);
    return EXIT_USAGE;
}
