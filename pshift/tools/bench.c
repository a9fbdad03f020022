/* bench.c - the pShift benchmark: the paper's Fig. 5, 6 and 7 configurations and a large case, against igraph max-flow. */
#include "pshift/tools/bench.h"

#include <errno.h>
#include <inttypes.h>
#include <omp.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "pshift/tools/gen.h"
#include "pshift/tools/pjson.h"
#include "pshift/pshift.h"
#include "pshift/tools/maxflow.h"

/* One measured point. */
typedef struct {
    const char *fig;
    const gen_params_t *g;
    int threads;
    size_t approx;
    pshift_stats_t st;     /* stats of the fastest solve */
    double cpu;            /* least process CPU seconds of a solve */
    int have_mf;
    maxflow_result_t mf;
    int64_t reference;     /* optimum to compare phi with, -1 if unknown */
    long rss_kib;          /* peak RSS so far, 0 if not reported */
    double median;         /* wall seconds of the median solve */
    double first;          /* file: seconds of the process's first solve */
    double mf_first;       /* file: ... and of its first max-flow */
} row_t;

/* Printer state: rows printed so far, for headers and JSON commas. */
typedef struct {
    const bench_opts_t *o;
    FILE *out;
    int rows;
    const char *last_fig;
    int status; /* 0, or -EDOM once a mismatch was seen */
} run_t;

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static long peak_rss_kib(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_maxrss : 0;
}

static void print_row(run_t *run, const row_t *r)
{
    FILE *f = run->out;
    const gen_params_t *g = r->g;
    double ratio = r->reference > 0 ? (double)r->st.phi / (double)r->reference
                 : r->reference == 0 ? 1.0 : -1.0;
    int mismatch = r->approx == 0 && r->reference >= 0 && r->st.phi != r->reference;
    if (mismatch) run->status = -EDOM;
    char rbuf[32] = "null";
    if (ratio >= 0) snprintf(rbuf, sizeof rbuf, "%.6f", ratio);
    if (run->o->json) {
        fprintf(f, "%s  {\"fig\":\"%s\",\"servers\":%d,\"buckets\":%d,\"active\":%d,"
                "\"r\":%g,\"m\":%g,\"s\":%g,\"threads\":%d,\"approx_top\":%zu,"
                "\"solve_seconds\":%.6f,\"solve_cpu_seconds\":%.6f,\"t_init\":%.6f,\"t_map\":%.6f,\"t_shift\":%.6f,"
                "\"phi\":%" PRId64 ",\"phi_initial\":%" PRId64 ",\"tokens\":%" PRId64 ","
                "\"weak_excess_removed\":%.6f,\"shifts\":%" PRId64 ",\"longest_path\":%d,"
                "\"reference_phi\":%" PRId64 ",\"phi_ratio\":%s,\"mismatch\":%s",
                run->rows ? ",\n" : "[\n", r->fig, g->servers, g->buckets, g->active,
                g->reserved_fraction, g->demand_ratio, g->zipf, r->threads, r->approx,
                r->st.t_total, r->cpu, r->st.t_init, r->st.t_map, r->st.t_shift, r->st.phi,
                r->st.phi_initial, r->st.tokens, r->st.weak_excess_removed, r->st.shifts,
                r->st.longest_path, r->reference, rbuf, mismatch ? "true" : "false");
        if (r->have_mf)
            fprintf(f, ",\"maxflow_phi\":%" PRId64 ",\"maxflow_build_seconds\":%.6f,"
                    "\"maxflow_seconds\":%.6f,\"maxflow_cpu_seconds\":%.6f,"
                    "\"maxflow_over_pshift\":%.3f",
                    r->mf.value, r->mf.t_build, r->mf.t_flow, r->mf.cpu_flow,
                    r->st.t_total > 0 ? r->mf.t_flow / r->st.t_total : 0.0);
        if (r->rss_kib) fprintf(f, ",\"peak_rss_kib\":%ld", r->rss_kib);
        if (strcmp(r->fig, "file") == 0) {
            fprintf(f, ",\"solve_median_seconds\":%.6f,\"first_solve_seconds\":%.6f", r->median,
                    r->first);
            if (r->have_mf) fprintf(f, ",\"maxflow_first_seconds\":%.6f", r->mf_first);
        }
        fputc('}', f);
    } else {
        if (!run->last_fig || strcmp(run->last_fig, r->fig) != 0) {
            fprintf(f, "%s%-5s %5s %7s %4s %4s %4s %3s %5s %10s %9s %12s %8s %7s %7s %4s %10s %9s %10s %7s%s\n",
                    run->rows ? "\n" : "", "fig", "S", "B", "r", "m", "s", "thr", "M",
                    "solve_ms", "cpu_ms", "phi", "phi/opt", "wex_rm%", "shifts", "path",
                    "mf_ms", "mf_cpu_ms", "mf_bld_ms", "mf/pS", r->rss_kib ? "  peak_rss_MiB" : "");
        }
        if (ratio >= 0) snprintf(rbuf, sizeof rbuf, "%.5f", ratio);
        else snprintf(rbuf, sizeof rbuf, "-");
        fprintf(f, "%-5s %5d %7d %4.2f %4.2f %4.2f %3d %5zu %10.3f %9.3f %12" PRId64 " %8s %7.2f %7" PRId64
                " %4d", r->fig, g->servers, g->buckets, g->reserved_fraction, g->demand_ratio,
                g->zipf, r->threads, r->approx, r->st.t_total * 1e3, r->cpu * 1e3, r->st.phi, rbuf,
                r->st.weak_excess_removed * 100.0, r->st.shifts, r->st.longest_path);
        if (r->have_mf)
            fprintf(f, " %10.3f %9.3f %10.3f %7.2f", r->mf.t_flow * 1e3, r->mf.cpu_flow * 1e3,
                    r->mf.t_build * 1e3,
                    r->st.t_total > 0 ? r->mf.t_flow / r->st.t_total : 0.0);
        else
            fprintf(f, " %10s %9s %10s %7s", "-", "-", "-", "-");
        if (r->rss_kib) fprintf(f, " %13.1f", (double)r->rss_kib / 1024.0);
        if (mismatch) fprintf(f, "  MISMATCH (optimum %" PRId64 ")", r->reference);
        fputc('\n', f);
    }
    fflush(f);
    run->rows++;
    run->last_fig = r->fig;
}

static void progress(const run_t *run, const char *fig, const gen_params_t *g, const char *what)
{
    if (!run->o->progress) return;
    fprintf(stderr, "bench: %s %dx%d r=%.2f m=%.2f s=%.2f: %s\n", fig, g->servers,
            g->buckets, g->reserved_fraction, g->demand_ratio, g->zipf, what);
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* Solves `p` o->repeat times and keeps the stats of the fastest run, and
 * (if `median` is not NULL) the median wall time. */
static int solve_best(const bench_opts_t *o, pshift_problem_t *p, int threads, size_t approx,
                      pshift_stats_t *best, double *cpu, double *median)
{
    pshift_opts_t po = PSHIFT_OPTS_DEFAULT;
    po.threads = threads;
    po.approx_top = approx;
    int reps = o->repeat > 0 ? o->repeat : 1;
    double t[1000]; /* --repeat is at most 1,000 */
    if (reps > 1000) reps = 1000;
    for (int i = 0; i < reps; i++) {
        double c0 = cpu_now();
        int rc = pshift_solve(p, &po);
        double c = cpu_now() - c0;
        if (rc < 0) return rc;
        const pshift_stats_t *st = pshift_stats(p);
        if (i == 0 || st->t_total < best->t_total) *best = *st;
        if (i == 0 || c < *cpu) *cpu = c;
        t[i] = st->t_total;
    }
    if (median) {
        qsort(t, (size_t)reps, sizeof t[0], cmp_double);
        *median = reps % 2 ? t[reps / 2] : (t[reps / 2 - 1] + t[reps / 2]) / 2;
    }
    return 0;
}

static int maxflow_best(const bench_opts_t *o, const pshift_problem_t *p, maxflow_result_t *best)
{
    int reps = o->repeat > 0 ? o->repeat : 1;
    for (int i = 0; i < reps; i++) {
        maxflow_result_t r;
        int rc = maxflow_solve(p, &r);
        if (rc < 0) return rc;
        if (i == 0 || r.t_flow < best->t_flow) *best = r;
        if (r.cpu_flow < best->cpu_flow) best->cpu_flow = r.cpu_flow;
    }
    return 0;
}

/* Builds one instance; solves it exactly with 1 thread first so that the
 * max-flow baseline (which reads demands back from a solved problem) can
 * run; returns the problem and the baseline. */
static int prepare(run_t *run, const char *fig, const gen_params_t *g, int with_mf,
                   pshift_problem_t **pp, maxflow_result_t *mf)
{
    progress(run, fig, g, "generating");
    int rc = gen_problem(g, pp, NULL);
    if (rc < 0) return rc;
    pshift_opts_t po = PSHIFT_OPTS_DEFAULT;
    if ((rc = pshift_solve(*pp, &po)) < 0) return rc;
    if (with_mf) {
        progress(run, fig, g, "max-flow baseline");
        if ((rc = maxflow_best(run->o, *pp, mf)) < 0) return rc;
    }
    return 0;
}

static int threads_max(const bench_opts_t *o)
{
    return o->threads_max > 0 ? o->threads_max : omp_get_num_procs();
}

static int run_fig5(run_t *run)
{
    static const double rs[] = {1.0, 0.9};
    static const double ms_all[] = {1.1, 1.25, 1.5, 2.0}, ms_quick[] = {1.1, 2.0};
    const bench_opts_t *o = run->o;
    const double *ms = o->quick ? ms_quick : ms_all;
    size_t nm = o->quick ? 2 : 4;
    int rc = 0;
    for (size_t ri = 0; ri < 2; ri++) {
        for (size_t mi = 0; mi < nm; mi++) {
            gen_params_t g = GEN_PARAMS_DEFAULT;
            g.reserved_fraction = rs[ri];
            g.demand_ratio = ms[mi];
            g.seed = o->seed;
            g.names = 0;
            pshift_problem_t *p = NULL;
            row_t r = {.fig = "fig5", .g = &g, .have_mf = o->maxflow, .reference = -1};
            if ((rc = prepare(run, "fig5", &g, o->maxflow, &p, &r.mf)) < 0) goto next;
            if (o->maxflow) r.reference = r.mf.value;
            for (int t = 1; t <= threads_max(o); t++) {
                r.threads = t;
                if ((rc = solve_best(o, p, t, 0, &r.st, &r.cpu, NULL)) < 0) goto next;
                print_row(run, &r);
            }
        next:
            pshift_problem_destroy(&p);
            if (rc < 0) return rc;
        }
    }
    return 0;
}

static int run_fig6(run_t *run)
{
    static const double ss_all[] = {0, 0.1, 0.25, 0.5, 1, 2}, ss_quick[] = {0.5};
    static const size_t ms_all[] = {0, 100, 200, 500, 1000, 2000, 5000},
                        ms_quick[] = {0, 100, 1000, 5000};
    const bench_opts_t *o = run->o;
    const double *ss = o->quick ? ss_quick : ss_all;
    const size_t *ms = o->quick ? ms_quick : ms_all;
    size_t ns = o->quick ? 1 : 6, nm = o->quick ? 4 : 7;
    int rc = 0, t = threads_max(o);
    for (size_t si = 0; si < ns; si++) {
        gen_params_t g = GEN_PARAMS_DEFAULT;
        g.demand_ratio = 1.1;
        g.zipf = ss[si];
        g.seed = o->seed;
        g.names = 0;
        pshift_problem_t *p = NULL;
        row_t r = {.fig = "fig6", .g = &g, .threads = t, .reference = -1};
        if ((rc = prepare(run, "fig6", &g, o->maxflow, &p, &r.mf)) < 0) goto next;
        for (size_t mi = 0; mi < nm; mi++) {
            r.approx = ms[mi];
            r.have_mf = o->maxflow && ms[mi] == 0;
            if ((rc = solve_best(o, p, t, ms[mi], &r.st, &r.cpu, NULL)) < 0) goto next;
            /* The exact row (M = 0, listed first) is the reference. */
            if (ms[mi] == 0) r.reference = o->maxflow ? r.mf.value : r.st.phi;
            print_row(run, &r);
        }
    next:
        pshift_problem_destroy(&p);
        if (rc < 0) return rc;
    }
    return 0;
}

static int run_fig7(run_t *run)
{
    static const int bs_all[] = {100, 200, 300, 400, 500, 600, 700, 800, 900, 1000},
                     bs_quick[] = {100, 500, 1000};
    const bench_opts_t *o = run->o;
    const int *bs = o->quick ? bs_quick : bs_all;
    size_t nb = o->quick ? 3 : 10;
    int rc = 0;
    for (size_t bi = 0; bi < nb; bi++) {
        gen_params_t g = GEN_PARAMS_DEFAULT;
        g.buckets = bs[bi];
        g.demand_ratio = 1.1;
        g.seed = o->seed;
        g.names = 0;
        pshift_problem_t *p = NULL;
        row_t r = {.fig = "fig7", .g = &g, .threads = 1, .have_mf = o->maxflow,
                   .reference = -1};
        if ((rc = prepare(run, "fig7", &g, o->maxflow, &p, &r.mf)) < 0) goto next;
        if (o->maxflow) r.reference = r.mf.value;
        if ((rc = solve_best(o, p, 1, 0, &r.st, &r.cpu, NULL)) < 0) goto next;
        print_row(run, &r);
    next:
        pshift_problem_destroy(&p);
        if (rc < 0) return rc;
    }
    return 0;
}

static int run_large(run_t *run)
{
    const bench_opts_t *o = run->o;
    gen_params_t g = GEN_PARAMS_DEFAULT;
    g.servers = 1024;
    g.buckets = 1000000;
    g.demand_ratio = 1.1;
    g.seed = o->seed;
    g.names = 0;
    pshift_problem_t *p = NULL;
    row_t r = {.fig = "large", .g = &g, .have_mf = o->large_maxflow, .reference = -1};
    int rc = 0;
    progress(run, "large", &g, "generating");
    if ((rc = gen_problem(&g, &p, NULL)) < 0) goto out;
    if (o->progress)
        fprintf(stderr, "bench: large: peak RSS after generation %.1f MiB\n",
                (double)peak_rss_kib() / 1024.0);
    int tmax = threads_max(o);
    for (int t = 1; t <= tmax; t++) {
        char what[64];
        snprintf(what, sizeof what, "solving with %d thread%s", t, t > 1 ? "s" : "");
        progress(run, "large", &g, what);
        r.threads = t;
        if ((rc = solve_best(o, p, t, 0, &r.st, &r.cpu, NULL)) < 0) goto out;
        /* Before igraph, whose graph is several times pShift's memory. */
        if (t == 1) r.rss_kib = peak_rss_kib();
        if (t == 1 && o->large_maxflow) {
            progress(run, "large", &g, "max-flow baseline");
            if ((rc = maxflow_solve(p, &r.mf)) < 0) goto out;
            r.reference = r.mf.value;
        }
        if (t > 1 && !o->large_maxflow) r.rss_kib = peak_rss_kib();
        print_row(run, &r);
    }
out:
    pshift_problem_destroy(&p);
    return rc;
}

/* One instance from a solve document (limits are ignored: the reservation
 * pass only).  The first solve comes right after reading, as in
 * `bqos-pshift solve`, so that first_solve_seconds is the one-shot (cold)
 * time and solve_ms the fastest of the repeats (warm); likewise for
 * max-flow. */
static int run_file(run_t *run)
{
    const bench_opts_t *o = run->o;
    pjson_input_t in;
    jsonloc_err_t err;
    int rc = pjson_read_file(o->file, &in, &err);
    if (rc < 0) {
        if (rc != -ENOMEM) {
            fprintf(stderr, "bench: %s:", o->file);
            if (err.line > 0) fprintf(stderr, "%d:%d:", err.line, err.col);
            fprintf(stderr, " %s%s%s\n", err.path, err.path[0] ? ": " : "", err.text);
        }
        return rc;
    }
    pshift_problem_t *p = in.problem;
    gen_params_t g = GEN_PARAMS_DEFAULT;
    g.servers = pshift_nservers(p);
    g.buckets = pshift_nbuckets(p);
    g.active = 0;
    g.reserved_fraction = g.demand_ratio = g.zipf = 0;
    row_t r = {.fig = "file", .g = &g, .have_mf = o->maxflow, .reference = -1};
    pshift_opts_t po = PSHIFT_OPTS_DEFAULT;
    if ((rc = pshift_solve(p, &po)) < 0) {
        fprintf(stderr, "bench: %s: cannot solve: %s\n", o->file, strerror(-rc));
        goto out;
    }
    r.first = pshift_stats(p)->t_total;
    if (o->maxflow) {
        progress(run, "file", &g, "max-flow baseline");
        maxflow_result_t first;
        if ((rc = maxflow_solve(p, &first)) < 0) goto out;
        r.mf_first = first.t_flow;
        if ((rc = maxflow_best(o, p, &r.mf)) < 0) goto out;
        if (first.t_flow < r.mf.t_flow) r.mf = first;
        r.reference = r.mf.value;
    }
    for (int t = 1; t <= threads_max(o); t++) {
        r.threads = t;
        if ((rc = solve_best(o, p, t, 0, &r.st, &r.cpu, &r.median)) < 0) goto out;
        print_row(run, &r);
    }
out:
    pjson_input_clear(&in);
    return rc;
}

int bench_run(const bench_opts_t *o, FILE *out)
{
    run_t run = {.o = o, .out = out};
    int any = o->fig5 || o->fig6 || o->fig7 || o->large || o->file;
    int rc = 0;
    if (o->file && (rc = run_file(&run)) < 0) goto out;
    if ((!any || o->fig5) && (rc = run_fig5(&run)) < 0) goto out;
    if ((!any || o->fig6) && (rc = run_fig6(&run)) < 0) goto out;
    if ((!any || o->fig7) && (rc = run_fig7(&run)) < 0) goto out;
    if (o->large && (rc = run_large(&run)) < 0) goto out;
out:
    if (o->json) fputs(run.rows ? "\n]\n" : "[]\n", out);
    if (fflush(out) == EOF && rc == 0) rc = -EIO;
    return rc < 0 ? rc : run.status;
}
