/* sched_bench.c - bqos-sched-bench: ns per enqueue+dispatch of the token scheduler at several bucket counts. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/num.h"
#include "common/opts.h"
#include "common/rng.h"
#include "common/version.h"
#include "storage-node/core/sched.h"


#define MAX_SIZES 16

static const char usage[] =
    "Usage: bqos-sched-bench [OPTION]...\n"
    "Measure the bqos-node token scheduler (storage-node/core/sched.c): nanoseconds\n"
    "per enqueue+dispatch pair at several bucket counts.  The cost should not\n"
    "grow with the number of buckets.\n"
    "\n"
    "Each run adds N buckets, queues requests in each, gives every bucket a\n"
    "random token state (R-tokens 1..8 for a quarter of the buckets, else none;\n"
    "L-tokens unlimited for a third of the buckets, 0..127 for the rest) and\n"
    "then, OPS times: enqueues one request, dispatches one request (tokens\n"
    "policy), and every 16th time replaces one random bucket's tokens as the\n"
    "controller would.  The timed loop includes all three.  The mix of R, L\n"
    "and O dispatches and of idle dispatches (nothing eligible) is printed.\n"
    "ns/dispatch is the thread's CPU time per pair (CLOCK_THREAD_CPUTIME_ID),\n"
    "so time spent descheduled on a busy machine does not count; wall-clock\n"
    "time is printed beside it.\n"
    "\n"
    "Two arrival patterns (both by default):\n"
    "  random   each request goes to a uniformly random bucket: the worst case\n"
    "           for the caches once the buckets outgrow them\n"
    "  closed   every bucket is a closed-loop client with 2 requests out (as in\n"
    "           the paper's experiments): a served request comes straight back\n"
    "           to its own bucket\n"
    "\n"
    "Options:\n";

static const char usage_tail[] =
    "\n"
    "Exit status: 0 on success, 1 on a run-time failure, 2 on bad usage.\n"
    "Example: bqos-sched-bench --buckets 10,100000 --ops 5000000 --json\n";

enum { PAT_RANDOM = 1, PAT_CLOSED = 2 };
static const char *const pat_names[] = {"", "random", "closed"};

typedef struct {
    int pattern;
    int buckets;
    uint64_t ops;
    double ns_per_op;      /* thread CPU time: immune to being descheduled */
    double wall_ns_per_op;
    uint64_t r, l, o, idle;
} result_t;

static void random_tokens(rng_t *g, sched_t *s, int b)
{
    int64_t r = rng_below(g, 4) == 0 ? (int64_t)rng_below(g, 8) + 1 : 0;
    int64_t l = rng_below(g, 3) == 0 ? SCHED_UNLIMITED : (int64_t)rng_below(g, 128);
    sched_set_tokens(s, b, r, l, INFINITY, 0);
}

static double now_ns(clockid_t clk)
{
    struct timespec ts;
    clock_gettime(clk, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* One measurement at n buckets.  Returns 0 or -ENOMEM. */
static int run(rng_t *g, int n, int pattern, uint64_t ops, int weighted, result_t *res)
{
    int rc = -ENOMEM;
    size_t pool_n = (size_t)n * 4 + 1024, nfree = 0;
    sched_item_t *items = calloc(pool_n, sizeof(*items));
    sched_item_t **freel = calloc(pool_n, sizeof(*freel));
    sched_t *s = sched_new(SCHED_POLICY_TOKENS, weighted);
    if (!items || !freel || !s)
        goto out;
    char name[32];
    for (int i = 0; i < n; i++) {
        snprintf(name, sizeof(name), "bucket-%d", i);
        if (sched_add_bucket(s, name, (uint32_t)rng_below(g, 4) + 1) != i)
            goto out;
        random_tokens(g, s, i);
    }
    for (size_t i = 0; i < pool_n; i++)
        freel[nfree++] = &items[i];
    for (int q = 0; q < (pattern == PAT_CLOSED ? 2 : 1); q++)
        for (int i = 0; i < n; i++)
            sched_enqueue(s, i, freel[--nfree]);

    memset(res, 0, sizeof(*res));
    res->pattern = pattern;
    res->buckets = n;
    res->ops = ops;
    uint64_t cnt[3] = {0, 0, 0};
    double t0 = now_ns(CLOCK_MONOTONIC), c0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
    sched_item_t *back = NULL; /* closed loop: the request to resubmit */
    for (uint64_t i = 0; i < ops; i++) {
        if (back) {
            sched_enqueue(s, back->bucket, back);
            back = NULL;
        } else if (pattern == PAT_RANDOM && nfree) {
            sched_enqueue(s, (int)rng_below(g, (uint64_t)n), freel[--nfree]);
        }
        sched_class_t c;
        sched_item_t *it = sched_dispatch(s, 0, &c);
        if (it) {
            if (pattern == PAT_CLOSED)
                back = it;
            else
                freel[nfree++] = it;
            cnt[c]++;
        } else {
            res->idle++;
        }
        if ((i & 15) == 0)
            random_tokens(g, s, (int)rng_below(g, (uint64_t)n));
    }
    double c1 = now_ns(CLOCK_THREAD_CPUTIME_ID), t1 = now_ns(CLOCK_MONOTONIC);
    res->ns_per_op = (c1 - c0) / (double)ops;
    res->wall_ns_per_op = (t1 - t0) / (double)ops;
    res->r = cnt[SCHED_CLASS_R];
    res->l = cnt[SCHED_CLASS_L];
    res->o = cnt[SCHED_CLASS_O];
    rc = 0;
out:
    sched_destroy(&s);
    free(items);
    free(freel);
    return rc;
}

/* Bucket counts of --buckets. */
typedef struct {
    int n;
    int v[MAX_SIZES];
} sizes_t;

/* OPTS_FUNC: parses "10,1000,100000" into the sizes_t at target.  Returns 0
 * or -EINVAL. */
static int parse_sizes(const char *arg, void *target)
{
    sizes_t *sz = target, out = {0};
    char buf[256];
    if (snprintf(buf, sizeof buf, "%s", arg) >= (int)sizeof buf)
        return -EINVAL;
    char *p = buf;
    for (;;) {
        char *comma = strchr(p, ',');
        if (comma)
            *comma = '\0';
        int64_t v;
        if (out.n == MAX_SIZES || num_i64_in(p, 1, 10000000, &v) < 0)
            return -EINVAL;
        out.v[out.n++] = (int)v;
        if (!comma || !comma[1])
            break;
        p = comma + 1;
    }
    *sz = out;
    return 0;
}

/* The command line; read-only once parsed. */
typedef struct {
    sizes_t sizes;
    uint64_t ops, seed;
    int pattern; /* index in pattern_names: PAT_* bits minus one */
    int weighted, json;
    int help, version;
} settings_t;

static const char *const pattern_names[] = {"random", "closed", "both", NULL};

#define NOPTS 8

/* Fills rows[NOPTS], the option table, with targets in *s. */
static void option_rows(settings_t *s, opts_row_t *rows)
{
    const opts_row_t t[] = {
        {.name = "buckets", .shrt = 'b', .type = OPTS_FUNC, .target = &s->sizes,
         .func = parse_sizes, .arg = "LIST", .deflt = "10,1000,100000",
         .help = "comma-separated bucket counts"},
        {.name = "ops", .shrt = 'n', .type = OPTS_U64, .target = &s->ops, .arg = "N",
         .deflt = "2000000", .flags = OPTS_XMIN, .help = "enqueue+dispatch pairs per run"},
        {.name = "pattern", .shrt = 'p', .type = OPTS_ENUM, .target = &s->pattern, .arg = "P",
         .names = pattern_names, .deflt = "both", .help = "random, closed or both"},
        {.name = "weighted", .shrt = 'w', .type = OPTS_FLAG, .target = &s->weighted,
         .help = "use the weighted round robin (weights 1..4)"},
        {.name = "seed", .shrt = 's', .type = OPTS_U64, .target = &s->seed, .arg = "N",
         .deflt = "1", .help = "random seed"},
        {.name = "json", .shrt = 'j', .type = OPTS_FLAG, .target = &s->json,
         .help = "print one JSON object instead of a table"},
        {.name = "help", .shrt = 'h', .type = OPTS_FLAG, .target = &s->help, .flags = OPTS_STOP,
         .help = "print this help and exit"},
        {.name = "version", .shrt = 'V', .type = OPTS_FLAG, .target = &s->version,
         .flags = OPTS_STOP, .help = "print the version and exit"},
    };
    _Static_assert(sizeof t / sizeof t[0] == NOPTS, "NOPTS");
    memcpy(rows, t, sizeof t);
}

int main(int argc, char **argv)
{
    settings_t s = {0};
    opts_row_t rows[NOPTS];
    option_rows(&s, rows);
    const opts_cmd_t cmd = {.prog = "bqos-sched-bench", .rows = rows, .n = NOPTS};
    if (opts_parse(&cmd, argc, argv, NULL) < 0)
        return 2;
    if (s.help) {
        fputs(usage, stdout);
        opts_help_list(stdout, rows, NOPTS, 21);
        fputs(usage_tail, stdout);
        return 0;
    }
    if (s.version) {
        printf("bqos-sched-bench %s\n", BQOS_VERSION);
        return 0;
    }
    const int *sizes = s.sizes.v, nsizes = s.sizes.n;
    const uint64_t ops = s.ops, seed = s.seed;
    const int json = s.json, weighted = s.weighted, patterns = s.pattern + 1;

    result_t res[2 * MAX_SIZES];
    int nres = 0;
    for (int p = PAT_RANDOM; p <= PAT_CLOSED; p++) {
        if (!(patterns & p))
            continue;
        for (int i = 0; i < nsizes; i++) {
            rng_t g;
            rng_seed(&g, seed, 0);
            if (run(&g, sizes[i], p, ops, weighted, &res[nres++]) < 0) {
                fprintf(stderr, "bqos-sched-bench: out of memory at %d buckets\n", sizes[i]);
                return 1;
            }
        }
    }

    if (json) {
        printf("{\"bench\":\"sched\",\"policy\":\"tokens\",\"weighted\":%s,\"ops\":%" PRIu64
               ",\"results\":[", weighted ? "true" : "false", ops);
        for (int i = 0; i < nres; i++)
            printf("%s{\"pattern\":\"%s\",\"buckets\":%d,\"ns_per_dispatch\":%.1f,"
                   "\"wall_ns_per_dispatch\":%.1f,"
                   "\"served_r\":%" PRIu64 ",\"served_l\":%" PRIu64 ",\"served_o\":%" PRIu64
                   ",\"idle\":%" PRIu64 "}",
                   i ? "," : "", pat_names[res[i].pattern], res[i].buckets, res[i].ns_per_op,
                   res[i].wall_ns_per_op, res[i].r, res[i].l, res[i].o, res[i].idle);
        printf("]}\n");
        return 0;
    }
    printf("scheduler: tokens policy%s, %" PRIu64 " enqueue+dispatch pairs per run\n",
           weighted ? " (weighted)" : "", ops);
    printf("%-8s %10s %14s %10s %7s %7s %7s %7s\n", "pattern", "buckets", "ns/dispatch", "wall ns",
           "R%", "L%", "O%", "idle%");
    for (int i = 0; i < nres; i++) {
        double d = (double)res[i].ops / 100.0;
        printf("%-8s %10d %14.1f %10.1f %7.1f %7.1f %7.1f %7.1f\n", pat_names[res[i].pattern],
               res[i].buckets, res[i].ns_per_op, res[i].wall_ns_per_op,
               (double)res[i].r / d, (double)res[i].l / d, (double)res[i].o / d,
               (double)res[i].idle / d);
    }
    return 0;
}
