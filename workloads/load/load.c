/* load.c - bqos-load: drive memcached-protocol servers (bqos-node fronts or memcached) with a scenario's buckets and report what each got. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libmemcached/memcached.h>

#include "common/log.h"
#include "common/num.h"
#include "common/opts.h"
#include "common/rng.h"
#include "common/version.h"
#include "workloads/driver.h"
#include "workloads/report.h"
#include "workloads/scenario.h"


/* --help: this manual around the option rows. */
static const opts_usage_t usage = DRIVER_USAGE(
    "NAME\n"
    "    bqos-load - bucket-aware YCSB-A load generator for memcached-protocol servers\n"
    "\n"
    "SYNOPSIS\n"
    "    bqos-load [OPTIONS] SCENARIO.json\n"
    "    bqos-load --profile SECONDS [OPTIONS] SCENARIO.json\n"
    "    bqos-load --print-buckets [OPTIONS] SCENARIO.json\n"
    "    bqos-load --table [--rows N] [--check WHAT] SUMMARY.json...\n"
    "\n"
    "DESCRIPTION\n"
    "    Runs the scenario: preloads every server's backend with each bucket's objects\n"
    "    (keys BUCKET:objK, 4 KB values by default), then for every bucket and every\n"
    "    server the bucket is active on keeps OUTSTANDING requests in flight (closed\n"
    "    loop) or issues them at the bucket's rate (open loop), 50% gets and 50% sets\n"
    "    by default (YCSB core workload A).  Buckets move to fresh sets of servers at\n"
    "    their demand changes.  Each client thread owns one libmemcached connection.\n"
    "    While it runs a progress line is written to stderr.  At the end it prints a\n"
    "    table (bucket, reservation, limit, achieved IOs/s, met?, over?) on stdout and,\n"
    "    with --out, writes the CSV files and summary.json described in\n"
    "    docs/workloads.md.  Met means achieved >= 99% of the reservation, over means\n"
    "    achieved > 101% of the limit, both averaged over the measured QoS periods.\n"
    "\n"
    "OPTIONS\n",
    /* the option rows */
    "\n"
    "EXIT STATUS\n"
    "    0 success; 1 bad usage or scenario (FILE:LINE:COL: what); 2 runtime failure\n"
    "    (cannot reach a server, cannot write outputs); 3 a --check failed;\n"
    "    130 interrupted (outputs are still written).\n"
    "\n"
    "EXAMPLES\n"
    "    bqos-load --profile 2 examples/exp3.json\n"
    "    bqos-load -c 20000 -o out/rr -l rr examples/exp3.json\n"
    "    bqos-load --table out/rr/summary.json out/qos/summary.json\n");

/* Command-line settings: filled once by main(), read-only afterwards. */
typedef struct {
    const char *out;
    const char *label;
    scenario_opts_t sopts;
    double profile;
    int profile_outstanding;
    int print_buckets;
    int table;
    int64_t rows;
    int check;   /* bit 1 met, bit 2 limits */
    int check_word; /* index in check_words, -1 none */
    int quiet;
    double period_start;  /* > 0: align to this wall-clock period start */
    int cpus[256];        /* --server-cpus, by server index */
    int ncpus;
    driver_servers_t servers;
    bqos_log_level_t log_level;
    int help, version;
} settings_t;

/* One run: shared by the main thread and every client thread.  Only `stop`
 * and the report's counters change while the threads run. */
typedef struct {
    const scenario_t *s;
    report_t *rep;
    char *value;               /* value_size bytes, read-only */
    driver_run_t d;            /* the threads, the clock and the stop flag */
    double align;              /* > 0: wall-clock start of some QoS period */
    const int *cpus;           /* CPU per server index, or NULL */
    int ncpus;
} run_t;

/* A client thread: bucket b, position pos among its active servers, slot k
 * of its outstanding requests.  In profile mode `server` is fixed (>= 0). */
typedef struct {
    run_t *run;
    size_t b;
    int pos, k;
    int server;
    uint64_t done;             /* profile mode: IOs completed in the window */
    double t0, t1;             /* profile window */
} worker_t;

static memcached_st *connect_server(const scenario_server_t *sv, int backend, int timeout_ms)
{
    memcached_st *mc = memcached_create(NULL);
    if (!mc)
        return NULL;
    const char *host = backend ? sv->backend_host : sv->host;
    int port = backend ? sv->backend_port : sv->port;
    if (memcached_server_add(mc, host, (in_port_t)port) != MEMCACHED_SUCCESS) {
        memcached_free(mc);
        return NULL;
    }
    memcached_behavior_set(mc, MEMCACHED_BEHAVIOR_TCP_NODELAY, 1);
    memcached_behavior_set(mc, MEMCACHED_BEHAVIOR_POLL_TIMEOUT, (uint64_t)timeout_ms);
    memcached_behavior_set(mc, MEMCACHED_BEHAVIOR_CONNECT_TIMEOUT, 2000);
    memcached_behavior_set(mc, MEMCACHED_BEHAVIOR_RETRY_TIMEOUT, 1);
    memcached_behavior_set(mc, MEMCACHED_BEHAVIOR_DEAD_TIMEOUT, 1);
    return mc;
}

/* Issues one get or set of bucket `name`.  Returns 1 if the server answered
 * (a get miss counts), 0 on failure; *bytes: the value moved. */
static int one_request(memcached_st *mc, const run_t *run, const char *name, rng_t *rng,
                       memcached_return_t *why, uint64_t *bytes)
{
    const scenario_t *s = run->s;
    char key[SCENARIO_NAME_MAX + 32];
    int klen = snprintf(key, sizeof key, "%s:obj%llu", name,
                        (unsigned long long)rng_below(rng, s->keys));
    memcached_return_t rc;
    if (rng_uniform(rng) < s->get_ratio) {
        size_t vlen;
        uint32_t flags;
        char *v = memcached_get(mc, key, (size_t)klen, &vlen, &flags, &rc);
        *bytes = v ? vlen : 0;
        free(v);
    } else {
        rc = memcached_set(mc, key, (size_t)klen, run->value, s->value_size, 0, 0);
        *bytes = s->value_size;
    }
    *why = rc;
    return rc == MEMCACHED_SUCCESS || rc == MEMCACHED_NOTFOUND;
}

static void *client_main(void *arg)
{
    worker_t *w = arg;
    run_t *run = w->run;
    const scenario_t *s = run->s;
    const scenario_bucket_t *bk = &s->buckets[w->b];
    rng_t rng;
    rng_seed(&rng, s->seed ^ 0x5eed, ((uint64_t)w->b << 24) ^ ((uint64_t)w->pos << 12) ^
                                              (uint64_t)w->k ^ ((uint64_t)(w->server + 1) << 40));
    memcached_st *mc = NULL;
    int cur = -1;
    driver_pace_t pace = {0};
    driver_nap_until(&run->d.start, 0, 10);
    double t;
    while (driver_running(&run->d, &t)) {
        int srv = w->server;
        if (srv < 0) {
            const scenario_phase_t *ph = scenario_phase_at(bk, t);
            if (w->pos >= ph->n) {
                double next = scenario_next_change(bk, t);
                driver_nap_until(&run->d.start, next < run->d.end ? next : run->d.end, 0.05);
                continue;
            }
            srv = ph->servers[w->pos];
            if (bk->rate > 0) {
                /* This server's share of the bucket's rate, per slot. */
                driver_pace_phase(&pace, bk, ph, w->pos, bk->outstanding, t, &rng);
                if (pace.due > t) {
                    driver_nap_until(&run->d.start, pace.due, 0.05);
                    continue;
                }
                driver_pace_sent(&pace, t);
            }
        }
        if (srv != cur) {
            if (run->cpus && srv < run->ncpus) {
                cpu_set_t set;
                CPU_ZERO(&set);
                CPU_SET(run->cpus[srv], &set);
                pthread_setaffinity_np(pthread_self(), sizeof set, &set);
            }
            memcached_free(mc);
            mc = connect_server(&s->servers[srv], 0, s->timeout_ms);
            cur = srv;
            if (!mc) {
                log_error("cannot create a libmemcached handle for %s", s->servers[srv].name);
                break;
            }
        }
        memcached_return_t why;
        if (w->server < 0)
            report_sent(run->rep, w->b, (size_t)srv, driver_since(&run->d.start));
        uint64_t moved = 0;
        int ok = one_request(mc, run, bk->name, &rng, &why, &moved);
        double done = driver_since(&run->d.start);
        if (w->server >= 0) {
            if (ok && done >= w->t0 && done < w->t1)
                w->done++;
        } else if (ok) {
            report_add(run->rep, w->b, (size_t)srv, done);
            report_add_bytes(run->rep, w->b, done, moved);
        } else {
            report_ended(run->rep, w->b, (size_t)srv, done, 1);
            report_add_error(run->rep, w->b);
            log_debug("bucket %s server %s: %s", bk->name, s->servers[srv].name,
                      memcached_strerror(mc, why));
            driver_nap_until(&run->d.start, done + 0.01, 0.01);
        }
    }
    memcached_free(mc);
    return NULL;
}

typedef struct {
    const run_t *run;
    size_t server;
    int rc;
} preload_t;

/* Writes every bucket's keys into one server's backend. */
static void *preload_main(void *arg)
{
    preload_t *p = arg;
    const scenario_t *s = p->run->s;
    const scenario_server_t *sv = &s->servers[p->server];
    memcached_st *mc = connect_server(sv, 1, s->timeout_ms);
    p->rc = 0;
    if (!mc) {
        p->rc = -ENOMEM;
        return NULL;
    }
    for (size_t k = 0; k < s->keys && p->rc == 0; k++) {
        for (size_t b = 0; b < s->nbuckets; b++) {
            char key[SCENARIO_NAME_MAX + 32];
            int klen = snprintf(key, sizeof key, "%s:obj%zu", s->buckets[b].name, k);
            memcached_return_t rc =
                memcached_set(mc, key, (size_t)klen, p->run->value, s->value_size, 0, 0);
            if (rc != MEMCACHED_SUCCESS) {
                log_error("preload of %s at %s:%d failed: %s", sv->name, sv->backend_host,
                          sv->backend_port, memcached_strerror(mc, rc));
                p->rc = -EIO;
                break;
            }
        }
    }
    memcached_free(mc);
    return NULL;
}

static int preload(const run_t *run)
{
    const scenario_t *s = run->s;
    if (s->preload == 0)
        return 0;
    preload_t *ps = calloc(s->nservers, sizeof *ps);
    pthread_t *tids = calloc(s->nservers, sizeof *tids);
    int rc = 0;
    size_t started = 0;
    if (!ps || !tids) {
        rc = -ENOMEM;
        goto out;
    }
    log_info("preloading %zu objects of %zu bytes into each of %zu servers", s->keys * s->nbuckets,
             s->value_size, s->nservers);
    for (; started < s->nservers; started++) {
        ps[started] = (preload_t){run, started, 0};
        if (pthread_create(&tids[started], NULL, preload_main, &ps[started]) != 0) {
            rc = -EAGAIN;
            break;
        }
    }
    for (size_t i = 0; i < started; i++) {
        pthread_join(tids[i], NULL);
        if (ps[i].rc < 0)
            rc = ps[i].rc;
    }
out:
    free(ps);
    free(tids);
    return rc;
}

/* Waits up to `secs` for SIGINT/SIGTERM (blocked in every thread).  Returns
 * 1 if one arrived. */
static int wait_signal(double secs)
{
    if (secs <= 0)
        return 0;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    struct timespec ts = {(time_t)secs, (long)((secs - floor(secs)) * 1e9)};
    return sigtimedwait(&set, NULL, &ts) > 0;
}

static void progress(const run_t *run, double t, uint64_t *last, double *last_t, int tty)
{
    const scenario_t *s = run->s;
    uint64_t total = 0, errors = 0;
    for (size_t b = 0; b < s->nbuckets; b++) {
        total += report_total(run->rep, b);
        errors += report_errors(run->rep, b);
    }
    double rate = t > *last_t ? (double)(total - *last) / (t - *last_t) : 0;
    char line[512];
    int period = (int)(t / s->period - 1e-9) + 1;
    int n = snprintf(line, sizeof line, "%6.1f/%.1fs  period %d  %llu IOs  %.0f IO/s", t,
                     s->duration, period, (unsigned long long)total, rate);
    if (errors)
        n += snprintf(line + n, sizeof line - (size_t)n, "  errors %llu",
                      (unsigned long long)errors);
    for (size_t b = 0; b < s->nbuckets && b < 6 && n < (int)sizeof line - 40; b++)
        n += snprintf(line + n, sizeof line - (size_t)n, "  %s %llu", s->buckets[b].name,
                      (unsigned long long)report_total(run->rep, b));
    if (tty)
        fprintf(stderr, "\r%s\033[K", line);
    else
        fprintf(stderr, "%s\n", line);
    *last = total;
    *last_t = t;
}

static void fill_value(char *v, size_t n, uint64_t seed)
{
    rng_t r;
    rng_seed(&r, seed, 77);
    for (size_t i = 0; i < n; i++)
        v[i] = (char)('a' + rng_below(&r, 26));
}

/* Runs the client threads until the end of the run or a signal.  Returns 0,
 * 1 if interrupted, -errno. */
static int drive(run_t *run, worker_t *ws, size_t n, int show)
{
    /* Time zero a little after the threads start, so they start together;
     * with --period-start, on the next period boundary after that. */
    int rc = driver_start(&run->d, n, client_main, ws, sizeof *ws, 0.2 + (double)n * 50e-6,
                          run->align, run->s->period);
    if (rc == -ENOMEM)
        return rc;
    int tty = isatty(STDERR_FILENO);
    uint64_t last = 0;
    /* Wake at least every half second to fold the report's windows;
     * progress every `tick`. */
    double last_t = 0, tick = tty ? 0.5 : run->s->period, wake = tick < 0.5 ? tick : 0.5;
    double t;
    while (rc == 0 && driver_running(&run->d, &t)) {
        double next = t < 0 ? 0 : (floor(t / wake) + 1) * wake;
        if (next > run->d.end)
            next = run->d.end;
        if (wait_signal(next - t)) {
            rc = 1;
            break;
        }
        double now = driver_since(&run->d.start);
        if (run->rep)
            report_fold(run->rep, now - REPORT_FOLD_LAG);
        if (show && run->rep && now > 0.01 && floor(now / tick + 1e-9) > floor(t / tick + 1e-9))
            progress(run, now, &last, &last_t, tty);
    }
    double stopped = driver_since(&run->d.start);
    driver_stop(&run->d);
    if (rc == 1 && run->rep)
        report_set_end(run->rep, stopped);
    if (run->rep)
        report_fold(run->rep, INFINITY);
    if (show && run->rep && tty)
        fprintf(stderr, "\n");
    return rc;
}

static int run_scenario(const settings_t *st, const scenario_t *s, run_t *run)
{
    size_t n = 0;
    for (size_t b = 0; b < s->nbuckets; b++)
        n += (size_t)s->buckets[b].max_active * (size_t)s->buckets[b].outstanding;
    worker_t *ws = calloc(n ? n : 1, sizeof *ws);
    if (!ws)
        return -ENOMEM;
    size_t i = 0;
    for (size_t b = 0; b < s->nbuckets; b++)
        for (int p = 0; p < s->buckets[b].max_active; p++)
            for (int k = 0; k < s->buckets[b].outstanding; k++)
                ws[i++] = (worker_t){.run = run, .b = b, .pos = p, .k = k, .server = -1};
    log_info("running %zu buckets on %zu servers for %.1fs with %zu client threads",
             s->nbuckets, s->nservers, s->duration, n);
    run->d.end = s->duration;
    int rc = drive(run, ws, n, !st->quiet);
    free(ws);
    return rc;
}

static int run_profile(const settings_t *st, const scenario_t *s, run_t *run)
{
    size_t per = (size_t)st->profile_outstanding;
    if (per == 0) {
        /* As many requests in flight per server as the scenario puts there
         * on average at its start. */
        size_t total = 0;
        for (size_t b = 0; b < s->nbuckets; b++)
            total += (size_t)s->buckets[b].phases[0].n * (size_t)s->buckets[b].outstanding;
        per = (total + s->nservers - 1) / s->nservers;
        if (per == 0)
            per = 1;
    }
    size_t n = s->nservers * per;
    worker_t *ws = calloc(n, sizeof *ws);
    if (!ws)
        return -ENOMEM;
    double warm = 0.3;
    for (size_t i = 0; i < n; i++)
        ws[i] = (worker_t){.run = run, .b = i % s->nbuckets, .server = (int)(i / per),
                           .k = (int)i, .t0 = warm, .t1 = warm + st->profile};
    log_info("profiling %zu servers for %.1fs with %zu requests in flight each", s->nservers,
             st->profile, per);
    run->d.end = warm + st->profile;
    int rc = drive(run, ws, n, 0);
    uint64_t *done = rc == 0 ? calloc(s->nservers, sizeof *done) : NULL;
    if (done) {
        for (size_t i = 0; i < n; i++)
            done[i / per] += ws[i].done;
        driver_print_capacity(s, done, st->profile);
        free(done);
    } else if (rc == 0) {
        rc = -ENOMEM;
    }
    free(ws);
    return rc;
}

/* OPTS_FUNC: "0,1,1,0" into the settings_t's cpus.  Returns 0 or -EINVAL. */
static int parse_cpus(const char *arg, void *target)
{
    settings_t *st = target;
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", arg) >= (int)sizeof buf)
        return -EINVAL;
    int n = 0;
    for (char *p = buf;;) {
        char *comma = strchr(p, ',');
        if (comma)
            *comma = '\0';
        int64_t cpu;
        if (n == 256 || num_i64_in(p, 0, CPU_SETSIZE - 1, &cpu) < 0)
            return -EINVAL;
        st->cpus[n++] = (int)cpu;
        if (!comma)
            break;
        p = comma + 1;
    }
    st->ncpus = n;
    return 0;
}

static const char *const check_words[] = {"met", "limits", "all", NULL};

#define NOPTS 19

/* Fills rows[NOPTS], the option table, with targets in *st. */
static void option_rows(settings_t *st, opts_row_t *rows)
{
    scenario_opts_t *so = &st->sopts;
    st->servers.so = so;
    const opts_row_t t[] = {
        DRIVER_OPTS_OUT(&st->out),
        DRIVER_OPTS_LABEL(&st->label),
        DRIVER_OPTS_DURATION(&so->duration, .min = 0.001, .max = INFINITY),
        DRIVER_OPTS_CAPACITY(&so->capacity,
                             "override the scenario's per-server capacity (used by\n"
                             "\"N%\" rates and generate.reserved)",
                             .min = 1, .max = INFINITY),
        {.name = "preload", .type = OPTS_I64, .target = &so->preload, .arg = "N", .min = 0,
         .max = INFINITY,
         .help = "override workload.preload (objects per server); 0\nskips the preload"},
        DRIVER_OPTS_SEED(&so->seed),
        {.name = "server", .shrt = 's', .type = OPTS_FUNC, .target = &st->servers,
         .func = driver_opt_server,
         .arg = "NAME=HOST:PORT[,BACKEND_HOST:PORT]",
         .help = "override server NAME's address (and the backend\n"
                 "memcached the preload writes to); repeatable"},
        DRIVER_OPTS_PROFILE(&st->profile,
                            "measure each server's throughput instead of running\n"
                            "the scenario: all servers at once, closed loop; prints\n"
                            "\"server NAME IOPS\" lines, then \"capacity MEAN\" and\n"
                            "\"min MIN\" (IOs/s per server)",
                            .min = 0.1, .max = INFINITY),
        {.name = "profile-outstanding", .type = OPTS_INT, .target = &st->profile_outstanding,
         .arg = "N", .min = 1, .max = 1000,
         .help = "requests in flight per server while profiling\n"
                 "(default: the scenario's own, its buckets' initial\n"
                 "active servers times outstanding over the servers)"},
        {.name = "print-buckets", .type = OPTS_FLAG, .target = &st->print_buckets,
         .help = "print the controller's bucket reservation file for the\n"
                 "scenario ({\"buckets\":[...]}) on stdout and exit"},
        {.name = "table", .type = OPTS_FLAG, .target = &st->table,
         .help = "read the SUMMARY.json files of earlier runs and print\nthem side by side"},
        {.name = "rows", .type = OPTS_I64, .target = &st->rows, .arg = "N", .min = 0,
         .max = INFINITY, .help = "at most N bucket rows in tables (default: all)"},
        {.name = "check", .type = OPTS_ENUM, .target = &st->check_word, .names = check_words,
         .arg = "WHAT",
         .help = "exit 3 unless every bucket met its reservation\n"
                 "(WHAT=met), none exceeded its limit (limits), or both\n"
                 "(all); with --table every summary is checked"},
        {.name = "server-cpus", .type = OPTS_FUNC, .target = st, .func = parse_cpus,
         .arg = "LIST",
         .help = "comma-separated CPU numbers, one per server in\n"
                 "scenario order: a client thread runs on the CPU\n"
                 "of the server it currently talks to (pin that\n"
                 "server's processes there too, e.g. with taskset,\n"
                 "to make servers behave like separate machines)"},
        DRIVER_OPTS_PERIOD_START(&st->period_start,
                                 "align the run's QoS periods with the controller's:\n"
                                 "T is the wall-clock time (Unix seconds, fractions\n"
                                 "allowed) at which one of its periods started; the\n"
                                 "run starts at the next period boundary",
                                 .min = 1, .max = INFINITY),
        DRIVER_OPTS_QUIET(&st->quiet),
        {.name = "log-level", .type = OPTS_FUNC, .target = &st->log_level, .func = opts_log_level,
         .arg = "LEVEL", .help = "error, warn, info (default) or debug"},
        OPTS_HELP_ROW('h', &st->help, "show this text and exit"),
        OPTS_VERSION_ROW('V', &st->version, "show the version and exit"),
    };
    OPTS_COPY_ROWS(rows, t, NOPTS);
}

/* Fills *st from argv; *argi receives the index of the first argument.
 * Returns 0, 1 when --help or --version was printed, or -EINVAL after
 * saying why. */
static int parse_settings(int argc, char **argv, settings_t *st, int *argi)
{
    *st = (settings_t){.sopts = SCENARIO_OPTS_DEFAULT, .check_word = -1,
                       .log_level = BQOS_LOG_INFO};
    opts_row_t rows[NOPTS];
    option_rows(st, rows);
    const opts_cmd_t cmd = {.prog = "bqos-load", .rows = rows, .n = NOPTS};
    int rc = opts_start(&cmd, argc, argv, argi, &usage, NULL);
    if (rc >= 0)
        return rc == 0 ? 1 : -EINVAL;
    st->check = st->check_word + 1; /* met 1, limits 2, all 3 */
    bqos_log_init("bqos-load", st->log_level);
    return 0;
}

static int table_mode(const settings_t *st, int argc, char **argv)
{
    if (argc < 1) {
        fprintf(stderr, "bqos-load: --table needs SUMMARY.json files\n");
        return 1;
    }
    if (report_print_table(stdout, (const char *const *)argv, (size_t)argc, (size_t)st->rows) < 0)
        return 2;
    int ok = 1;
    for (int i = 0; st->check && i < argc; i++)
        if (!report_check(argv[i], st->check)) {
            fprintf(stderr, "bqos-load: check failed for %s\n", argv[i]);
            ok = 0;
        }
    return ok ? 0 : 3;
}

int main(int argc, char **argv)
{
    settings_t st;
    bqos_log_init("bqos-load", BQOS_LOG_INFO);
    int argi;
    int rc = parse_settings(argc, argv, &st, &argi);
    if (rc)
        return rc > 0 ? 0 : 1;
    argc -= argi;
    argv += argi;
    if (st.table)
        return table_mode(&st, argc, argv);
    if (argc != 1) {
        fprintf(stderr, "bqos-load: expected one SCENARIO.json (try --help)\n");
        return 1;
    }
    scenario_t *s = NULL;
    jsonloc_err_t err;
    rc = scenario_load(argv[0], &st.sopts, &s, &err);
    if (rc < 0) {
        if (err.line > 0)
            fprintf(stderr, "%s:%d:%d: %s\n", err.source, err.line, err.col, err.text);
        else
            fprintf(stderr, "%s: %s\n", err.source, err.text);
        return 1;
    }
    if (st.print_buckets) {
        rc = scenario_write_buckets(s, stdout) < 0 ? 2 : 0;
        scenario_destroy(&s);
        return rc;
    }
    /* Signals are taken synchronously by the main thread (sigtimedwait). */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    driver_raise_nofile();
    int status = 0;
    run_t run = {.s = s, .align = st.period_start, .cpus = st.ncpus ? st.cpus : NULL,
                 .ncpus = st.ncpus};
    run.value = malloc(s->value_size);
    if (!run.value) {
        status = 2;
        goto out;
    }
    fill_value(run.value, s->value_size, s->seed);
    if ((rc = preload(&run)) < 0) {
        status = 2;
        goto out;
    }
    if (st.profile > 0) {
        rc = run_profile(&st, s, &run);
        status = rc < 0 ? 2 : rc == 1 ? 130 : 0;
        goto out;
    }
    if (!(run.rep = report_new(s))) {
        status = 2;
        goto out;
    }
    rc = run_scenario(&st, s, &run);
    if (rc < 0) {
        log_error("run failed: %s", strerror(-rc));
        status = 2;
        goto out;
    }
    if (rc == 1) {
        log_warn("interrupted; writing what was measured");
        status = 130;
    }
    if (st.out && driver_write_outputs(st.out, 0777, run.rep, st.label) < 0) {
        status = 2;
        goto out;
    }
    uint64_t errors = 0;
    for (size_t b = 0; b < s->nbuckets; b++)
        errors += report_errors(run.rep, b);
    if (errors)
        log_warn("%llu requests failed (see --log-level debug)", (unsigned long long)errors);
    if (st.out) {
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/summary.json", st.out);
        const char *paths[] = {path};
        report_print_table(stdout, paths, 1, (size_t)st.rows);
        if (status == 0 && st.check && !report_check(path, st.check))
            status = 3;
    } else {
        report_write_summary(run.rep, st.label, stdout);
        if (st.check)
            log_warn("--check needs --out; not checked");
    }
out:
    report_destroy(&run.rep);
    free(run.value);
    scenario_destroy(&s);
    return status;
}
