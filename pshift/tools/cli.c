/* cli.c - bqos-pshift: solve pShift token allocation problems from JSON, generate instances, run the benchmark. */
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/log.h"
#include "common/opts.h"
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
    "    bqos-pshift bench [--fig LIST] [--file FILE] [--quick] [--large]\n"
    "                      [--large-maxflow] [--no-maxflow] [--threads-max N] [--repeat N] [--seed N]\n"
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
    "OPTIONS\n";

static const char usage_solve_tail[] =
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
    "OPTIONS\n";

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
    "      file   the problem in FILE (--file; reservations only), threads\n"
    "             1..N; the JSON rows add the process's first (cold) solve\n"
    "             and max-flow times\n"
    "    Progress lines go to stderr.\n"
    "\n"
    "OPTIONS\n";

/* ---- option tables ------------------------------------------------------ */

/* "-h" is --help too: a second, unlisted row (getopt_long matches "--help"
 * to the first). */
#define HELP_ROWS(flag)                                                                   \
    {.name = "help", .type = OPTS_FLAG, .target = (flag), .flags = OPTS_STOP,            \
     .help = "print this text"},                                                             \
    {.name = "help", .shrt = 'h', .type = OPTS_FLAG, .target = (flag), .flags = OPTS_STOP}

/* The subcommands' manuals: head, the option rows as an OPTIONS table
 * (heads padded to `width`), tail. */
#define CMD_USAGE(head_text, width_cols, tail_text)                                       \
    {.head = (head_text), .layout = OPTS_LAYOUT_TABLE, .indent = 4, .width = (width_cols), \
     .tail = (tail_text)}
static const opts_usage_t solve_usage = CMD_USAGE(usage_solve, 17, usage_solve_tail);
static const opts_usage_t gen_usage = CMD_USAGE(usage_gen, 23, NULL);
static const opts_usage_t bench_usage = CMD_USAGE(usage_bench, 18, NULL);

static int bad_usage(const char *cmd, const char *fmt, const char *arg)
{
    fprintf(stderr, PROG ": ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nTry '" PROG "%s%s --help'.\n", cmd ? " " : "", cmd ? cmd : "");
    return -EINVAL;
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

/* solve's command line. */
typedef struct {
    int threads;
    int64_t approx;
    int pretty;
    int help;
} solve_settings_t;

#define NSOLVE 5

static void solve_rows(solve_settings_t *s, opts_row_t *rows)
{
    const opts_row_t t[] = {
        {.name = "threads", .type = OPTS_INT, .target = &s->threads, .arg = "N", .deflt = "1",
         .min = 0, .max = 1024,
         .help = "OpenMP threads (default {default}; 0 = OpenMP default).  The\n"
                 "result is the same for any N."},
        {.name = "approx-top", .type = OPTS_I64, .target = &s->approx, .arg = "M", .deflt = "0",
         .min = 0, .max = 1e15,
         .help = "shift only the top M buckets by tokens and by spare\n"
                 "demand (default {default} = exact, optimal Phi)"},
        {.name = "pretty", .type = OPTS_FLAG, .target = &s->pretty, .help = "indent the output"},
        HELP_ROWS(&s->help),
    };
    OPTS_COPY_ROWS(rows, t, NSOLVE);
}

static int cmd_solve(int argc, char **argv)
{
    solve_settings_t s = {0};
    opts_row_t rows[NSOLVE];
    solve_rows(&s, rows);
    const opts_cmd_t cmd = {.prog = PROG " solve", .rows = rows, .n = NSOLVE};
    int argi;
    int rc = opts_start(&cmd, argc, argv, &argi, &solve_usage, NULL);
    if (rc >= 0) return rc;
    if (argi >= argc) {
        opts_fail(&cmd, "missing FILE (use - for stdin)");
        return EXIT_USAGE;
    }
    if (argc - argi > 1) {
        opts_fail(&cmd, "unexpected argument '%s'", argv[argi + 1]);
        return EXIT_USAGE;
    }
    const char *pos[1] = {argv[argi]};

    pjson_input_t in;
    jsonloc_err_t err;
    pshift_problem_t *lim = NULL;
    int64_t *targets = NULL;
    int status = EXIT_FAIL;
    rc = pjson_read_file(pos[0], &in, &err);
    if (rc < 0) {
        if (rc == -ENOMEM) {
            fprintf(stderr, PROG ": out of memory\n");
            return EXIT_FAIL;
        }
        print_input_error(pos[0], &err);
        return EXIT_USAGE; /* bad document, or a file that cannot be read */
    }
    pshift_opts_t o = PSHIFT_OPTS_DEFAULT;
    o.threads = s.threads;
    o.approx_top = (size_t)s.approx;
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
    if (pjson_write_solution(stdout, in.problem, lim, s.pretty) < 0) {
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

/* gen's command line. */
typedef struct {
    gen_params_t g;
    int active_given;
    int pretty;
    int help;
} gen_settings_t;

#define NGEN 13

static void gen_rows(gen_settings_t *s, opts_row_t *rows)
{
    gen_params_t *g = &s->g;
    const opts_row_t t[] = {
        {.name = "servers", .type = OPTS_INT, .target = &g->servers, .arg = "N", .deflt = "64",
         .min = 1, .max = 1 << 20, .help = "servers s1..sN (default {default})"},
        {.name = "buckets", .type = OPTS_INT, .target = &g->buckets, .arg = "N",
         .deflt = "10000", .min = 0, .max = 1 << 30, .help = "buckets b1..bN (default {default})"},
        {.name = "reserved-fraction", .type = OPTS_DOUBLE, .target = &g->reserved_fraction,
         .arg = "R", .deflt = "1.0", .min = 0, .max = 1,
         .help = "share of the total capacity reserved, 0..1 ({default})"},
        {.name = "demand-ratio", .type = OPTS_DOUBLE, .target = &g->demand_ratio, .arg = "M",
         .deflt = "1.5", .min = 1, .max = 1e6,
         .help = "demand / reservation of every bucket, >= 1 ({default})"},
        {.name = "zipf", .type = OPTS_DOUBLE, .target = &g->zipf, .arg = "S", .deflt = "0.5",
         .min = 0, .max = 100, .help = "Zipf exponent of the reservations ({default})"},
        {.name = "split-zipf", .type = OPTS_DOUBLE, .target = &g->split_zipf, .arg = "S2",
         .deflt = "0.5", .min = 0, .max = 100,
         .help = "Zipf exponent of the demand split ({default})"},
        {.name = "active", .type = OPTS_INT, .target = &g->active, .arg = "N",
         .show = "8, at most servers", .min = 1, .max = 1 << 20, .given = &s->active_given,
         .help = "servers with demand per bucket ({default})"},
        {.name = "capacity", .type = OPTS_I64, .target = &g->capacity, .arg = "C",
         .deflt = "100000", .min = 0, .max = 1e15,
         .help = "capacity of every server ({default})"},
        {.name = "limit-ratio", .type = OPTS_DOUBLE, .target = &g->limit_ratio, .arg = "L",
         .deflt = "0", .min = 0, .max = 1e6,
         .help = "give each bucket limit L * reservation; 0 = none ({default})"},
        {.name = "seed", .type = OPTS_U64, .target = &g->seed, .arg = "N", .deflt = "1",
         .min = 0, .max = 9.2e18, .help = "random seed ({default})"},
        {.name = "pretty", .type = OPTS_FLAG, .target = &s->pretty, .help = "indent the output"},
        HELP_ROWS(&s->help),
    };
    OPTS_COPY_ROWS(rows, t, NGEN);
}

static int cmd_gen(int argc, char **argv)
{
    gen_settings_t s = {.g = GEN_PARAMS_DEFAULT};
    opts_row_t rows[NGEN];
    gen_rows(&s, rows);
    const opts_cmd_t cmd = {.prog = PROG " gen", .rows = rows, .n = NGEN};
    int done = opts_start(&cmd, argc, argv, NULL, &gen_usage, NULL);
    if (done >= 0) return done;
    gen_params_t g = s.g;
    /* The paper's 8 active servers, unless there are fewer servers. */
    if (!s.active_given) g.active = g.servers < 8 ? g.servers : 8;
    char msg[128];
    if (gen_check(&g, msg, sizeof msg) < 0) {
        opts_fail(&cmd, "%s", msg);
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
    if (pjson_write_problem(stdout, p, g.limit_ratio > 0 ? limits : NULL, meta, s.pretty) < 0) {
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

/* bench's command line. */
typedef struct {
    bench_opts_t b;
    const char *figs;
    int quiet, no_mf;
    int help;
} bench_settings_t;

#define NBENCH 13

static void bench_rows(bench_settings_t *s, opts_row_t *rows)
{
    bench_opts_t *b = &s->b;
    const opts_row_t t[] = {
        {.name = "fig", .type = OPTS_STRING, .target = &s->figs, .arg = "LIST",
         .help = "comma-separated subset of 5,6,7 (default: all three\n"
                 "unless --large is given)"},
        {.name = "file", .type = OPTS_STRING, .target = &b->file, .arg = "FILE",
         .help = "time the problem in FILE (a solve document) instead\n"
                 "of the figures"},
        {.name = "quick", .type = OPTS_FLAG, .target = &b->quick,
         .help = "fewer points and one repetition"},
        {.name = "large", .type = OPTS_FLAG, .target = &b->large, .help = "run the large case"},
        {.name = "large-maxflow", .type = OPTS_FLAG, .target = &b->large_maxflow,
         .help = "also run igraph on the large case (slow, several GB)"},
        {.name = "no-maxflow", .type = OPTS_FLAG, .target = &s->no_mf,
         .help = "skip the max-flow baseline"},
        {.name = "threads-max", .type = OPTS_INT, .target = &b->threads_max, .arg = "N",
         .min = 1, .max = 1024, .help = "thread counts 1..N (default: number of CPUs)"},
        {.name = "repeat", .type = OPTS_INT, .target = &b->repeat, .arg = "N", .deflt = "3",
         .min = 1, .max = 1000,
         .help = "solves per point, the fastest is reported ({default})"},
        {.name = "seed", .type = OPTS_U64, .target = &b->seed, .arg = "N", .deflt = "1",
         .min = 0, .max = 9.2e18, .help = "instance seed ({default})"},
        {.name = "json", .type = OPTS_FLAG, .target = &b->json,
         .help = "a JSON array instead of the table"},
        {.name = "quiet", .type = OPTS_FLAG, .target = &s->quiet, .help = "no progress lines"},
        HELP_ROWS(&s->help),
    };
    OPTS_COPY_ROWS(rows, t, NBENCH);
}

static int cmd_bench(int argc, char **argv)
{
    bench_settings_t s = {.b = BENCH_OPTS_DEFAULT};
    opts_row_t rows[NBENCH];
    bench_rows(&s, rows);
    const opts_cmd_t cmd = {.prog = PROG " bench", .rows = rows, .n = NBENCH};
    int done = opts_start(&cmd, argc, argv, NULL, &bench_usage, NULL);
    if (done >= 0) return done;
    bench_opts_t b = s.b;
    const char *figs = s.figs;
    int quiet = s.quiet, no_mf = s.no_mf;
    if (figs) {
        for (const char *c = figs; *c; c++) {
            if (*c == '5') b.fig5 = 1;
            else if (*c == '6') b.fig6 = 1;
            else if (*c == '7') b.fig7 = 1;
            else if (*c != ',') {
                opts_fail(&cmd, "bad --fig list '%s' (expected e.g. 5,6,7)", figs);
                return EXIT_USAGE;
            }
        }
    } else if (b.large || b.file) {
        b.fig5 = b.fig6 = b.fig7 = 0; /* --large or --file alone runs only that */
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
    if (rc < 0 && b.file && rc != -ENOMEM && rc != -EIO)
        return EXIT_USAGE; /* the file cannot be read or solved: said on stderr */
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
    /* No glibc fastbins.  Reading a document builds jansson's tree of a few
     * hundred thousand small blocks (250,000 at 64 x 10,000) and frees it;
     * fastbins would keep them unmerged, and glibc merges them all
     * (malloc_consolidate) at the next allocation of 1 KiB or more: the
     * solver's first array, which then took 13-25 ms instead of
     * microseconds, 4-10x the rest of the solve.  Without fastbins each
     * block is merged with its free neighbours when it is freed, in the
     * order it was allocated, which costs less in total. */
    mallopt(M_MXFAST, 0);
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
