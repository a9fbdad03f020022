/* nbdnode.c - the block storage node as a function: token scheduler + NBD front + file backend + controller client, run by bqos-node --backend file:PATH and by bqos-nbd-node (see nbdnode.h). */
#include "storage-node/nbd/nbdnode.h"

#include <errno.h>
#include <event2/event.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "storage-node/nbd/nbdfront.h"
#include "storage-node/nodeconf.h"
#include "storage-node/noderun.h"
#include "storage-node/core/sched.h"

#ifndef BQOS_VERSION
#define BQOS_VERSION "0.1.0"
#endif

enum {
    OPT_NAME = 1, OPT_NBD_LISTEN, OPT_BACKEND, OPT_EXPORT_SIZE, OPT_DIRECT, OPT_POLICY,
    OPT_OUTSTANDING, OPT_WORKERS, OPT_BUCKETS, OPT_CONFIG, OPT_CONTROLLER, OPT_CAPACITY,
    OPT_TOKENS_FILE, OPT_IO_TIME, OPT_WEIGHTED, OPT_LOG_LEVEL, OPT_HELP, OPT_VERSION,
    OPT_MAX_CONNS, OPT_MC_ONLY
};

/* Option table: one row per option; drives getopt_long and --help. */
static const struct opt {
    const char *name;
    int id;
    const char *arg;     /* NULL: no argument */
    const char *deflt;
    const char *help;    /* NULL: hidden */
    int block_only;      /* listed in bqos-node --help's BLOCK NODE section */
} opts[] = {
    {"name", OPT_NAME, "NAME", "node", "Node name, shown in the log.", 0},
    {"nbd-listen", OPT_NBD_LISTEN, "HOST:PORT|unix:PATH", "127.0.0.1:10809",
     "Where NBD clients connect (fixed newstyle handshake): a numeric\n"
     "IPv4 address and port ([IPv6]:PORT), PORT 0 picking a free one\n"
     "(printed in the start-up log line), or a Unix-domain socket at PATH\n"
     "(clients: nbd+unix:///EXPORT?socket=PATH; a stale socket file is\n"
     "replaced; the file is removed at exit).", 1},
    {"backend", OPT_BACKEND, "file:PATH", NULL,
     "Block store.  PATH a directory: one sparse file PATH/BUCKET.img of\n"
     "--export-size bytes per bucket (created on first use; a trailing '/'\n"
     "creates the directory).  PATH a regular file or block device: every\n"
     "bucket's export is that whole file (an empty or new file is grown to\n"
     "--export-size).  Required.", 1},
    {"export-size", OPT_EXPORT_SIZE, "BYTES", "1g",
     "Size of each bucket's file (suffix k, m, g or t).", 1},
    {"direct", OPT_DIRECT, NULL, "off",
     "Open the store with O_DIRECT as well: IOs aligned to 4 KiB bypass\n"
     "the page cache as kernel AIO from the event loop; unaligned ones,\n"
     "FUA writes, FLUSH and TRIM use a buffered descriptor and the workers.", 1},
    {"policy", OPT_POLICY, "tokens|rr", "tokens",
     "tokens: R-tokens first, then L-tokens, round robin within each\n"
     "(paper Algorithm 1).  rr: plain round robin over buckets.", 0},
    {"outstanding", OPT_OUTSTANDING, "K", "5",
     "Most IOs at the block store at once (1..1024; the paper used 5).", 0},
    {"workers", OPT_WORKERS, "N", "= --outstanding", "IO worker threads (1..1024).", 0},
    {"buckets", OPT_BUCKETS, "A,B,...", "default",
     "Buckets (= NBD exports) that exist from the start, weight 1.", 1},
    {"config", OPT_CONFIG, "FILE", "none",
     "Bucket file {\"buckets\":[{\"name\":\"red\",\"weight\":1},...]} (the\n"
     "controller's format; other fields are ignored).", 0},
    {"controller", OPT_CONTROLLER, "ENDPOINT", "none",
     "ZeroMQ endpoint of bqos-controller (e.g. tcp://127.0.0.1:7070): the\n"
     "node says hello, reports its counters every interval and applies the\n"
     "tokens it receives; while the controller is silent it falls back to\n"
     "rr (docs/protocol.md).", 0},
    {"capacity", OPT_CAPACITY, "IOPS", "0 (unknown)",
     "Capacity profile sent to the controller in the hello.", 1},
    {"tokens-file", OPT_TOKENS_FILE, "FILE", "none",
     "TEST HOOK: token counts {\"red\":{\"r\":100,\"l\":200},...} read at start\n"
     "and again on SIGUSR1 (which also starts a new QoS period); replaces\n"
     "each named bucket's tokens (\"l\" absent or null: no limit).", 0},
    {"io-time-us", OPT_IO_TIME, "N", "0 (off)",
     "EXPERIMENT HOOK: every IO keeps its worker busy for at least N\n"
     "microseconds, emulating a slower device (capacity = workers x\n"
     "1e6 / N IOs/s), so that several nodes sharing one machine behave\n"
     "like separate servers.  Page-cache reads are then not served inline.", 1},
    {"weighted", OPT_WEIGHTED, NULL, "off", "Weighted round robin by bucket weight.", 0},
    {"log-level", OPT_LOG_LEVEL, "LEVEL", "info", "error, warn, info or debug (logs go to stderr).", 0},
    {"max-conns", OPT_MAX_CONNS, "N", "4096", "NBD connections beyond are refused.", 0},
    {"help", OPT_HELP, NULL, NULL, "Print this help and exit.", 0},
    {"version", OPT_VERSION, NULL, NULL, "Print the version and exit.", 0},
    /* bqos-node's memcached-only options: accepted (so that one command
     * line template serves both node kinds) and ignored; not in --help. */
    {"memcached-listen", OPT_MC_ONLY, "X", NULL, NULL, 0},
    {"separator", OPT_MC_ONLY, "X", NULL, NULL, 0},
    {"default-bucket", OPT_MC_ONLY, "X", NULL, NULL, 0},
    {"max-auto-buckets", OPT_MC_ONLY, "X", NULL, NULL, 0},
    {"max-item-size", OPT_MC_ONLY, "X", NULL, NULL, 0},
    {"batch", OPT_MC_ONLY, "X", NULL, NULL, 0},
};
#define NOPTS (sizeof opts / sizeof opts[0])

void nbdnode_usage_options(FILE *out, int block_only)
{
    for (size_t i = 0; i < NOPTS; i++) {
        const struct opt *o = &opts[i];
        if (!o->help || (block_only && !o->block_only))
            continue;
        fprintf(out, "    --%s%s%s\n", o->name, o->arg ? " " : "", o->arg ? o->arg : "");
        const char *p = o->help;
        while (*p) {
            const char *nl = strchr(p, '\n');
            int n = nl ? (int)(nl - p) : (int)strlen(p);
            fprintf(out, "        %.*s\n", n, p);
            p += n + (nl ? 1 : 0);
        }
        if (o->deflt)
            fprintf(out, "        Default: %s.\n", o->deflt);
    }
}

static void usage(FILE *out, const char *prog)
{
    fprintf(out,
            "NAME\n"
            "    %s - bucket-QoS block storage node: NBD exports, one per\n"
            "    bucket, served through the token scheduler\n\n"
            "SYNOPSIS\n"
            "    %s --backend file:PATH [--nbd-listen HOST:PORT]\n"
            "        [--export-size BYTES] [--direct] [--policy tokens|rr]\n"
            "        [--outstanding K] [--buckets A,B,...]\n"
            "        [--controller ENDPOINT] [OPTION]...\n\n", prog, prog);
    fprintf(out,
            "DESCRIPTION\n"
            "    Serves every bucket as an NBD export of the same name (NBD_OPT_GO,\n"
            "    NBD_OPT_INFO, NBD_OPT_EXPORT_NAME, NBD_OPT_LIST, NBD_OPT_ABORT; simple\n"
            "    replies; READ, WRITE with FUA, FLUSH, TRIM, DISC).  Every request is\n"
            "    one IO charged one token of its bucket, whatever its length; the\n"
            "    token scheduler picks which bucket's IO goes to the block store\n"
            "    next, with at most --outstanding IOs there at once.  bqos-node runs\n"
            "    this when given --backend file:PATH or --nbd-listen; bqos-nbd-node is\n"
            "    the same block node as a program of its own (docs/nbd.md).  bqos-node's\n"
            "    memcached-only options are accepted and ignored.\n\n"
            "OPTIONS\n");
    nbdnode_usage_options(out, 0);
    fprintf(out,
            "\nSIGNALS\n"
            "    SIGTERM, SIGINT  stop accepting, answer queued requests with ESHUTDOWN,\n"
            "                     finish in-flight ones, exit 0.\n"
            "    SIGUSR1          start a new QoS period and re-read --tokens-file.\n\n"
            "EXIT STATUS\n"
            "    0 after a clean stop, 1 on a start-up error, 2 on bad usage.\n\n"
            "EXAMPLE\n"
            "    %s --backend file:/var/lib/bqos/ --buckets red,blue \\\n"
            "        --nbd-listen 127.0.0.1:10809 --policy rr\n"
            "    nbdinfo --list nbd://127.0.0.1:10809\n\n"
            "SEE ALSO\n"
            "    docs/nbd.md, bqos-node(1), nbdinfo(1), nbdcopy(1), fio(1)\n", prog);
}

int nbdnode_wanted(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0)
            break;
        if (strncmp(a, "--nbd-listen", 12) == 0 && (a[12] == '\0' || a[12] == '='))
            return 1;
        if (strncmp(a, "--backend=file:", 15) == 0)
            return 1;
        if (strcmp(a, "--backend") == 0 && i + 1 < argc && strncmp(argv[i + 1], "file:", 5) == 0)
            return 1;
    }
    return 0;
}

int nbdnode_main(int argc, char **argv, const char *prog)
{
    nbdfront_config_t cfg;
    nbdfront_config_defaults(&cfg);
    const char *name = "node", *listen = "127.0.0.1:10809", *backend = NULL;
    const char *buckets = "default", *config = NULL, *tokens_file = NULL, *controller = NULL;
    uint64_t capacity = 0;
    sched_policy_t policy = SCHED_POLICY_TOKENS;
    bqos_log_level_t level = BQOS_LOG_INFO;
    int weighted = 0, workers = 0, mc_only = 0, idx = 0;
    long v;

    struct option lopts[NOPTS + 1];
    for (size_t i = 0; i < NOPTS; i++)
        lopts[i] = (struct option){opts[i].name, opts[i].arg ? required_argument : no_argument,
                                   NULL, opts[i].id};
    lopts[NOPTS] = (struct option){0, 0, 0, 0};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", lopts, &idx)) != -1) {
        switch (c) {
        case OPT_NAME: name = optarg; break;
        case OPT_NBD_LISTEN: listen = optarg; break;
        case OPT_BACKEND:
            if (strncmp(optarg, "file:", 5) != 0 || !optarg[5])
                goto bad;
            backend = optarg + 5;
            break;
        case OPT_EXPORT_SIZE:
            if (nodeconf_parse_bytes(optarg, 1ull << 50, &cfg.store.export_size) < 0)
                goto bad;
            break;
        case OPT_DIRECT: cfg.store.direct = 1; break;
        case OPT_POLICY:
            if (strcmp(optarg, "tokens") == 0)
                policy = SCHED_POLICY_TOKENS;
            else if (strcmp(optarg, "rr") == 0)
                policy = SCHED_POLICY_RR;
            else
                goto bad;
            break;
        case OPT_OUTSTANDING:
            if (nodeconf_parse_long(optarg, 1, 1024, &v) < 0)
                goto bad;
            cfg.outstanding = (int)v;
            break;
        case OPT_WORKERS:
            if (nodeconf_parse_long(optarg, 1, 1024, &v) < 0)
                goto bad;
            workers = (int)v;
            break;
        case OPT_BUCKETS: buckets = optarg; break;
        case OPT_CONFIG: config = optarg; break;
        case OPT_TOKENS_FILE: tokens_file = optarg; break;
        case OPT_CONTROLLER: controller = optarg; break;
        case OPT_CAPACITY:
            if (nodeconf_parse_long(optarg, 0, 1000000000, &v) < 0)
                goto bad;
            capacity = (uint64_t)v;
            break;
        case OPT_IO_TIME:
            if (nodeconf_parse_long(optarg, 0, 10000000, &v) < 0)
                goto bad;
            cfg.store.io_time_us = (uint32_t)v;
            break;
        case OPT_WEIGHTED: weighted = 1; break;
        case OPT_LOG_LEVEL:
            if (bqos_log_parse_level(optarg, &level) < 0)
                goto bad;
            break;
        case OPT_MAX_CONNS:
            if (nodeconf_parse_long(optarg, 1, 1000000, &v) < 0)
                goto bad;
            cfg.max_conns = (int)v;
            break;
        case OPT_MC_ONLY: mc_only++; break;
        case OPT_HELP: usage(stdout, prog); return 0;
        case OPT_VERSION: printf("%s %s\n", prog, BQOS_VERSION); return 0;
        default:
            fprintf(stderr, "Try '%s --help'.\n", prog);
            return 2;
        }
        continue;
    bad:
        fprintf(stderr, "%s: bad value '%s' for --%s\nTry '%s --help'.\n", prog, optarg,
                lopts[idx].name, prog);
        return 2;
    }
    if (optind < argc) {
        fprintf(stderr, "%s: unexpected argument '%s'\nTry '%s --help'.\n", prog, argv[optind],
                prog);
        return 2;
    }
    if (!backend) {
        fprintf(stderr, "%s: a block node needs --backend file:PATH\nTry '%s --help'.\n", prog,
                prog);
        return 2;
    }
    if (listener_parse(listen, &cfg.listen) < 0) {
        fprintf(stderr, "%s: bad --nbd-listen '%s': expected " LISTENER_SYNTAX "\n", prog,
                listen);
        return 2;
    }
    bqos_log_init(prog, level);
    if (mc_only)
        log_warn("%d memcached-only option(s) ignored: this is a block node", mc_only);
    cfg.store.path = backend;
    cfg.store.workers = workers ? workers : cfg.outstanding;

    noderun_prepare();
    int rc = 1, err = 0;
    struct event_base *base = event_base_new();
    sched_t *s = sched_new(policy, weighted);
    nbdfront_t *f = NULL;
    char *list = strdup(buckets);
    if (!base || !s || !list) {
        log_error("out of memory");
        goto out;
    }
    f = nbdfront_new(base, s, &cfg, &err);
    if (!f) {
        log_error("cannot start NBD on %s (backend file:%s): %s", listen, backend,
                  strerror(-err));
        goto out;
    }
    char *save = NULL;
    for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int b = gate_add_bucket(nbdfront_gate(f), t, 1);
        if (b < 0) {
            log_error("--buckets: '%s': %s", t, strerror(-b));
            goto out;
        }
    }
    log_info("node %s: NBD on %s, backend file:%s%s, policy %s, "
             "%d outstanding, %d workers%s%s",
             name, gate_address(nbdfront_gate(f)), backend, cfg.store.direct ? " (O_DIRECT)" : "",
             policy == SCHED_POLICY_RR ? "rr" : "tokens", cfg.outstanding,
             cfg.store.workers, controller ? ", controller " : "", controller ? controller : "");
    noderun_config_t nc = {name, config, tokens_file, controller, capacity, policy};
    if (noderun_run(base, nbdfront_gate(f), &nc) < 0)
        goto out;
    nbdfront_stats_t st;
    nbdfront_stats(f, &st);
    log_info("stopped: %llu connections, %llu requests (%llu reads, %llu writes, %llu "
             "flushes, %llu trims, %llu block status; %llu reads from the page cache "
             "inline), %llu errors",
             (unsigned long long)st.conns, (unsigned long long)st.requests,
             (unsigned long long)st.reads, (unsigned long long)st.writes,
             (unsigned long long)st.flushes, (unsigned long long)st.trims,
             (unsigned long long)st.block_status,
             (unsigned long long)st.inline_reads,
             (unsigned long long)st.errors);
    rc = 0;
out:
    nbdfront_destroy(&f);
    sched_destroy(&s);
    if (base)
        event_base_free(base);
    free(list);
    return rc;
}
