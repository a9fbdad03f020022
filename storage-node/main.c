/* main.c - bqos-node (and bqos-nbd-node, the same program): one option table, then the memcached front or the NBD front; bucket and token files, the controller client and signals are noderun's. */
#include <errno.h>
#include <event2/event.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/opts.h"
#include "storage-node/mc/backend.h"
#include "storage-node/mc/front.h"
#include "storage-node/nbd/nbdfront.h"
#include "storage-node/nodeconf.h"
#include "storage-node/noderun.h"

#ifndef BQOS_VERSION
#define BQOS_VERSION "0.1.0"
#endif

/* Which node an option is for. */
enum { MC = 1, BLK = 2, BOTH = MC | BLK };

enum {
    OPT_NAME = 1, OPT_LISTEN, OPT_NBD_LISTEN, OPT_BACKEND, OPT_EXPORT_SIZE, OPT_DIRECT,
    OPT_POLICY, OPT_WORKERS, OPT_OUTSTANDING, OPT_BATCH, OPT_BUCKETS, OPT_CONFIG,
    OPT_CONTROLLER, OPT_CAPACITY, OPT_TOKENS_FILE, OPT_IO_TIME, OPT_SEPARATOR,
    OPT_DEFAULT_BUCKET, OPT_MAX_AUTO, OPT_MAX_ITEM, OPT_MAX_CONNS, OPT_WEIGHTED,
    OPT_LOG_LEVEL, OPT_HELP, OPT_VERSION
};

/* The option table of both node kinds: one row per option (name, id,
 * argument, default, help; then which node it is for).  It drives
 * getopt_long, both --help texts and the error messages.  A memcached-only
 * option given to a block node is accepted and ignored (one command line
 * template serves both kinds); a block-only option given to a memcached
 * node is a usage error. */
static const struct row {
    opts_t o;
    int modes;
} rows[] = {
    {{"name", OPT_NAME, "NAME", "node", "Node name: in the log, in stats and reported to the controller."}, BOTH},
    {{"memcached-listen", OPT_LISTEN, "HOST:PORT|unix:PATH", "127.0.0.1:11311",
      "Where memcached text-protocol clients connect: a numeric IPv4\n"
      "address and port ([IPv6]:PORT), PORT 0 picking a free one (printed\n"
      "in the start-up log line), or a Unix-domain socket at PATH (a stale\n"
      "socket file is replaced; the file is removed at exit)."}, MC},
    {{"nbd-listen", OPT_NBD_LISTEN, "HOST:PORT|unix:PATH", "127.0.0.1:10809",
      "Where NBD clients connect (fixed newstyle handshake): a numeric\n"
      "IPv4 address and port ([IPv6]:PORT), PORT 0 picking a free one\n"
      "(printed in the start-up log line), or a Unix-domain socket at PATH\n"
      "(clients: nbd+unix:///EXPORT?socket=PATH; a stale socket file is\n"
      "replaced; the file is removed at exit).  Makes bqos-node a block node."}, BLK},
    {{"backend", OPT_BACKEND, "URL", "memcached://127.0.0.1:11211; a block node needs file:PATH",
      "memcached://HOST:PORT: the server's real memcached.\n"
      "file:PATH: a block store (bqos-node is then a block node).  PATH a\n"
      "directory: one sparse file PATH/BUCKET.img of --export-size bytes per\n"
      "bucket (created on first use; a trailing '/' creates the directory).\n"
      "PATH a regular file or block device: every bucket's export is that\n"
      "whole file (an empty or new file is grown to --export-size)."}, BOTH},
    {{"export-size", OPT_EXPORT_SIZE, "BYTES", "1g", "Size of each bucket's file (suffix k, m, g or t)."}, BLK},
    {{"direct", OPT_DIRECT, NULL, "off",
      "Open the store with O_DIRECT as well: IOs aligned to 4 KiB bypass\n"
      "the page cache as kernel AIO from the event loop; unaligned ones,\n"
      "FUA writes, FLUSH and TRIM use a buffered descriptor and the workers."}, BLK},
    {{"buckets", OPT_BUCKETS, "A,B,...", "default",
      "Buckets (= NBD exports) that exist from the start, weight 1."}, BLK},
    {{"policy", OPT_POLICY, "tokens|rr", "tokens",
      "tokens: R-tokens first, then L-tokens, round robin within each\n"
      "(paper Algorithm 1).  rr: plain round robin over buckets."}, BOTH},
    {{"workers", OPT_WORKERS, "N", "0 (inline); a block node: = --outstanding",
      "Backend worker threads.  Memcached node (0..256): each with its own\n"
      "libmemcached connection; 0: the event-loop thread makes the\n"
      "(batched) backend calls itself, with no thread hand-off: fastest, but\n"
      "a memcached that hangs (without closing) stalls every client, local\n"
      "commands too, until its calls time out (2 s each).  N >= 1: a pool of\n"
      "N threads; IOs beyond the workers wait in their FIFO and are batched.\n"
      "More threads than cores cost more in wake-ups than they gain.\n"
      "Block node (1..1024): the IO threads."}, BOTH},
    {{"outstanding", OPT_OUTSTANDING, "K", "5 with --policy tokens, 64 with rr; a block node: 5",
      "Most requests at the backend at once (1..1024).  The scheduler only\n"
      "orders what waits beyond these K, so QoS (tokens) keeps the paper's\n"
      "5; without QoS (rr) 64 lets one multi-get carry ~50 requests: with 5\n"
      "a node reaches about half of memcached's direct throughput here,\n"
      "with 64 about 90% (docs/performance.md)."}, BOTH},
    {{"batch", OPT_BATCH, "N", "64",
      "Most backend requests sent together (1..64): a worker (or the loop\n"
      "thread, with --workers 0) takes up to N at once and sends the gets\n"
      "among them to memcached as one multi-key get."}, MC},
    {{"config", OPT_CONFIG, "FILE", "none",
      "Bucket file {\"buckets\":[{\"name\":\"red\",\"weight\":1},...]} (the\n"
      "controller's format; other fields are ignored).  These buckets exist\n"
      "from the start."}, BOTH},
    {{"controller", OPT_CONTROLLER, "ENDPOINT", "none",
      "ZeroMQ endpoint of bqos-controller (e.g. tcp://127.0.0.1:7070): the\n"
      "node says hello, reports every interval, applies the tokens it gets\n"
      "and falls back to rr while the controller is silent."}, BOTH},
    {{"capacity", OPT_CAPACITY, "IOPS", "0 (unknown)",
      "Capacity profile sent to the controller in the hello (the starting\n"
      "point of its capacity estimate; 0: the controller's --capacity)."}, BOTH},
    {{"tokens-file", OPT_TOKENS_FILE, "FILE", "none",
      "TEST HOOK: token counts {\"red\":{\"r\":100,\"l\":200},...} read at start\n"
      "and again on SIGUSR1 (which also starts a new QoS period); replaces\n"
      "each named bucket's tokens (\"l\" absent or null: no limit)."}, BOTH},
    {{"io-time-us", OPT_IO_TIME, "N", "0 (off)",
      "EXPERIMENT HOOK: every IO keeps its worker busy for at least N\n"
      "microseconds, emulating a slower device (capacity = workers x\n"
      "1e6 / N IOs/s), so that several nodes sharing one machine behave\n"
      "like separate servers.  Page-cache reads are then not served inline."}, BLK},
    {{"separator", OPT_SEPARATOR, "C", ":", "Bucket of a key = its prefix up to the first C."}, MC},
    {{"default-bucket", OPT_DEFAULT_BUCKET, "serve|reject", "serve",
      "Keys of no known bucket (no separator, unknown prefix beyond\n"
      "--max-auto-buckets): serve them in bucket \"default\", or answer\n"
      "SERVER_ERROR unknown bucket."}, MC},
    {{"max-auto-buckets", OPT_MAX_AUTO, "N", "1024 without --config, else 0",
      "Buckets created when first seen in a key; beyond, keys go to the\n"
      "default bucket."}, MC},
    {{"max-item-size", OPT_MAX_ITEM, "BYTES", "1m",
      "Largest value accepted (suffix k or m); larger ones get\n"
      "SERVER_ERROR object too large for cache."}, MC},
    {{"max-conns", OPT_MAX_CONNS, "N", "4096", "Client connections beyond are refused."}, BOTH},
    {{"weighted", OPT_WEIGHTED, NULL, "off", "Weighted round robin by bucket weight."}, BOTH},
    {{"log-level", OPT_LOG_LEVEL, "LEVEL", "info", "error, warn, info or debug (logs go to stderr)."}, BOTH},
    {{"help", OPT_HELP, NULL, NULL, "Print this help and exit."}, BOTH},
    {{"version", OPT_VERSION, NULL, NULL, "Print the version and exit."}, BOTH},
};
#define NROWS (sizeof rows / sizeof rows[0])

/* Prints the rows for `modes` exactly (BOTH: every row a memcached node
 * takes; BLK: the block-only ones), or every row of a block node. */
static void print_rows(FILE *out, int want, int exact)
{
    for (size_t i = 0; i < NROWS; i++)
        if (exact ? rows[i].modes == want : (rows[i].modes & want) != 0)
            opts_usage(out, &rows[i].o, 1);
}

static const char *row_name(int id)
{
    for (size_t i = 0; i < NROWS; i++)
        if (rows[i].o.id == id)
            return rows[i].o.name;
    return "?";
}

static int row_modes(int id)
{
    for (size_t i = 0; i < NROWS; i++)
        if (rows[i].o.id == id)
            return rows[i].modes;
    return 0;
}

static void usage_memcached(FILE *out)
{
    fprintf(out,
            "NAME\n"
            "    bqos-node - bucket-QoS storage-node agent in front of memcached\n\n"
            "SYNOPSIS\n"
            "    bqos-node --name NAME --memcached-listen HOST:PORT\n"
            "              --backend memcached://HOST:PORT [--policy tokens|rr]\n"
            "              [--workers N] [--outstanding K] [--config FILE]\n"
            "              [--controller ENDPOINT] [--log-level L] [OPTION]...\n\n"
            "DESCRIPTION\n"
            "    Speaks the memcached text protocol to clients, puts every key IO\n"
            "    in the queue of its bucket (the key prefix before the separator),\n"
            "    lets the token scheduler pick which bucket is served next and\n"
            "    forwards the IO to the real memcached through libmemcached\n"
            "    (batched, from the event loop or from a pool of worker threads,\n"
            "    see --workers).  Replies on a connection keep request\n"
            "    order.  The binary protocol is not supported (the connection is\n"
            "    closed).\n\n"
            "OPTIONS\n");
    print_rows(out, MC, 0);
    fprintf(out,
            "\nBLOCK NODE\n"
            "    With --backend file:PATH or --nbd-listen, bqos-node is a block node\n"
            "    (bqos-nbd-node is the same program, always a block node): every\n"
            "    bucket is an NBD export of the same name and every NBD request one\n"
            "    IO through the same token scheduler (docs/nbd.md).  The options\n"
            "    above apply as described; the memcached-only ones are accepted and\n"
            "    ignored; in addition:\n");
    print_rows(out, BLK, 1);
    fprintf(out,
            "\nSIGNALS\n"
            "    SIGTERM, SIGINT  stop accepting, finish in-flight requests, answer\n"
            "                     queued ones with SERVER_ERROR shutting down, exit 0.\n"
            "    SIGUSR1          start a new QoS period and re-read --tokens-file.\n\n"
            "EXIT STATUS\n"
            "    0 after a clean stop, 1 on a start-up error, 2 on bad usage.\n\n"
            "EXAMPLE\n"
            "    bqos-node --name n1 --memcached-listen 127.0.0.1:11311 \\\n"
            "              --backend memcached://127.0.0.1:11211 --policy rr\n\n"
            "SEE ALSO\n"
            "    docs/node.md, docs/nbd.md, memcached(1), memccapable(1)\n");
}

static void usage_block(FILE *out, const char *prog)
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
            "    the same program, always a block node (docs/nbd.md).  bqos-node's\n"
            "    memcached-only options are accepted and ignored.\n\n"
            "OPTIONS\n");
    print_rows(out, BLK, 0);
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

/* Everything the command line says, for either node kind. */
typedef struct {
    const char *prog;
    int block;                 /* a block node */
    const char *name, *listen, *nbd_listen, *backend, *buckets;
    const char *config, *controller, *tokens_file;
    sched_policy_t policy;
    int weighted, direct;
    long workers, outstanding; /* -1: the node kind's default */
    long batch, max_auto, max_conns;
    char separator;
    front_default_t default_mode;
    uint64_t max_item, export_size, capacity;
    uint32_t io_time_us;
    bqos_log_level_t level;
    int ignored;               /* memcached-only options given to a block node */
} args_t;

/* Returns 1 if the command line asks for a block node: the program is
 * called bqos-nbd-node, or --backend names a file: store, or --nbd-listen
 * is given.  Reads argv only. */
static int block_wanted(int argc, char **argv, const char *prog)
{
    if (strcmp(prog, "bqos-nbd-node") == 0)
        return 1;
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

/* Parses one option's value into *a.  Returns 0, or -EINVAL for a bad
 * value. */
static int set_option(args_t *a, int id, const char *v)
{
    long n;
    switch (id) {
    case OPT_NAME: a->name = v; return 0;
    case OPT_LISTEN: a->listen = v; return 0;
    case OPT_NBD_LISTEN: a->nbd_listen = v; return 0;
    case OPT_BACKEND:
        if (a->block && (strncmp(v, "file:", 5) != 0 || !v[5]))
            return -EINVAL;
        a->backend = v;
        return 0;
    case OPT_EXPORT_SIZE: return nodeconf_parse_bytes(v, 1ull << 50, &a->export_size);
    case OPT_DIRECT: a->direct = 1; return 0;
    case OPT_BUCKETS: a->buckets = v; return 0;
    case OPT_POLICY:
        if (strcmp(v, "tokens") == 0)
            a->policy = SCHED_POLICY_TOKENS;
        else if (strcmp(v, "rr") == 0)
            a->policy = SCHED_POLICY_RR;
        else
            return -EINVAL;
        return 0;
    case OPT_WORKERS:
        return nodeconf_parse_long(v, a->block ? 1 : 0, a->block ? 1024 : 256, &a->workers);
    case OPT_OUTSTANDING: return nodeconf_parse_long(v, 1, 1024, &a->outstanding);
    case OPT_BATCH: return nodeconf_parse_long(v, 1, BACKEND_BATCH_MAX, &a->batch);
    case OPT_CONFIG: a->config = v; return 0;
    case OPT_CONTROLLER: a->controller = v; return 0;
    case OPT_TOKENS_FILE: a->tokens_file = v; return 0;
    case OPT_CAPACITY:
        if (nodeconf_parse_long(v, 0, 1000000000, &n) < 0)
            return -EINVAL;
        a->capacity = (uint64_t)n;
        return 0;
    case OPT_IO_TIME:
        if (nodeconf_parse_long(v, 0, 10000000, &n) < 0)
            return -EINVAL;
        a->io_time_us = (uint32_t)n;
        return 0;
    case OPT_SEPARATOR:
        if (strlen(v) != 1 || v[0] == ' ')
            return -EINVAL;
        a->separator = v[0];
        return 0;
    case OPT_DEFAULT_BUCKET:
        if (strcmp(v, "serve") == 0)
            a->default_mode = FRONT_DEFAULT_SERVE;
        else if (strcmp(v, "reject") == 0)
            a->default_mode = FRONT_DEFAULT_REJECT;
        else
            return -EINVAL;
        return 0;
    case OPT_MAX_AUTO: return nodeconf_parse_long(v, 0, 1000000, &a->max_auto);
    case OPT_MAX_ITEM: return nodeconf_parse_bytes(v, 1ull << 30, &a->max_item);
    case OPT_MAX_CONNS: return nodeconf_parse_long(v, 1, 1000000, &a->max_conns);
    case OPT_WEIGHTED: a->weighted = 1; return 0;
    case OPT_LOG_LEVEL: return bqos_log_parse_level(v, &a->level);
    }
    return -EINVAL;
}

/* Parses argv into *a.  Returns -1 to go on, or the exit status (0 after
 * --help or --version, 2 on bad usage, with a message). */
static int parse_args(int argc, char **argv, args_t *a)
{
    struct option lopts[NROWS + 1];
    opts_t t[NROWS];
    for (size_t i = 0; i < NROWS; i++)
        t[i] = rows[i].o;
    opts_getopt(t, NROWS, lopts);
    int mode = a->block ? BLK : MC, c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", lopts, NULL)) != -1) {
        if (c == OPT_HELP) {
            if (a->block)
                usage_block(stdout, a->prog);
            else
                usage_memcached(stdout);
            return 0;
        }
        if (c == OPT_VERSION) {
            printf("%s %s\n", a->prog, BQOS_VERSION);
            return 0;
        }
        int m = row_modes(c);
        if (!m) {
            fprintf(stderr, "Try '%s --help'.\n", a->prog);
            return 2;
        }
        if (!(m & mode)) {
            if (a->block) {
                a->ignored++; /* a memcached-only option: accepted, ignored */
                continue;
            }
            fprintf(stderr, "%s: --%s is for a block node (--backend file:PATH)\n"
                    "Try '%s --help'.\n", a->prog, row_name(c), a->prog);
            return 2;
        }
        if (set_option(a, c, optarg) < 0) {
            fprintf(stderr, "%s: bad value '%s' for --%s\nTry '%s --help'.\n", a->prog, optarg,
                    row_name(c), a->prog);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "%s: unexpected argument '%s'\nTry '%s --help'.\n", a->prog,
                argv[optind], a->prog);
        return 2;
    }
    return -1;
}

/* The memcached node: front_t in front of memcached. */
static int run_memcached(const args_t *a)
{
    front_config_t cfg;
    front_config_defaults(&cfg);
    cfg.name = a->name;
    cfg.policy = a->policy;
    cfg.weighted = a->weighted;
    cfg.workers = a->workers >= 0 ? (int)a->workers : 0;
    cfg.outstanding = a->outstanding >= 0 ? (int)a->outstanding
                                          : (a->policy == SCHED_POLICY_RR ? 64 : 5);
    cfg.batch = (int)a->batch;
    cfg.separator = a->separator;
    cfg.default_mode = a->default_mode;
    cfg.max_auto_buckets = a->max_auto >= 0 ? (int)a->max_auto : (a->config ? 0 : 1024);
    cfg.max_item = (size_t)a->max_item;
    cfg.max_conns = (int)a->max_conns;
    char bhost[256];
    if (listener_parse(a->listen, &cfg.listen) < 0) {
        fprintf(stderr, "%s: bad --memcached-listen '%s': expected " LISTENER_SYNTAX "\n",
                a->prog, a->listen);
        return 2;
    }
    if (backend_parse_url(a->backend, bhost, sizeof bhost, &cfg.backend_port) < 0) {
        fprintf(stderr, "%s: bad --backend '%s'\n", a->prog, a->backend);
        return 2;
    }
    cfg.backend_host = bhost;

    noderun_prepare();
    int rc = 1, err = 0;
    struct event_base *base = event_base_new();
    front_t *f = NULL;
    if (!base) {
        log_error("cannot create the event loop");
        goto out;
    }
    f = front_new(base, &cfg, &err);
    if (!f) {
        log_error("cannot start on %s (backend %s): %s", a->listen, a->backend, strerror(-err));
        goto out;
    }
    log_info("node %s: memcached clients on %s, backend %s:%u, policy %s, %d workers, "
             "%d outstanding, batch %d",
             cfg.name, gate_address(front_gate(f)), bhost, cfg.backend_port,
             cfg.policy == SCHED_POLICY_RR ? "rr" : "tokens", cfg.workers, cfg.outstanding,
             cfg.batch);
    noderun_config_t nc = {cfg.name, a->config, a->tokens_file, a->controller, a->capacity,
                           cfg.policy};
    if (noderun_run(base, front_gate(f), &nc) < 0)
        goto out;
    log_info("stopped");
    rc = 0;
out:
    front_destroy(&f);
    if (base)
        event_base_free(base);
    return rc;
}

/* The block node: a scheduler, nbdfront_t and its file backend. */
static int run_block(const args_t *a)
{
    if (!a->backend) {
        fprintf(stderr, "%s: a block node needs --backend file:PATH\nTry '%s --help'.\n",
                a->prog, a->prog);
        return 2;
    }
    nbdfront_config_t cfg;
    nbdfront_config_defaults(&cfg);
    if (listener_parse(a->nbd_listen, &cfg.listen) < 0) {
        fprintf(stderr, "%s: bad --nbd-listen '%s': expected " LISTENER_SYNTAX "\n", a->prog,
                a->nbd_listen);
        return 2;
    }
    if (a->ignored)
        log_warn("%d memcached-only option(s) ignored: this is a block node", a->ignored);
    const char *path = a->backend + 5; /* after "file:" */
    cfg.outstanding = a->outstanding >= 0 ? (int)a->outstanding : 5;
    cfg.max_conns = (int)a->max_conns;
    cfg.store.path = path;
    cfg.store.export_size = a->export_size;
    cfg.store.direct = a->direct;
    cfg.store.io_time_us = a->io_time_us;
    cfg.store.workers = a->workers >= 1 ? (int)a->workers : cfg.outstanding;

    noderun_prepare();
    int rc = 1, err = 0;
    struct event_base *base = event_base_new();
    sched_t *s = sched_new(a->policy, a->weighted);
    nbdfront_t *f = NULL;
    char *list = strdup(a->buckets);
    if (!base || !s || !list) {
        log_error("out of memory");
        goto out;
    }
    f = nbdfront_new(base, s, &cfg, &err);
    if (!f) {
        log_error("cannot start NBD on %s (backend file:%s): %s", a->nbd_listen, path,
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
             a->name, gate_address(nbdfront_gate(f)), path, cfg.store.direct ? " (O_DIRECT)" : "",
             a->policy == SCHED_POLICY_RR ? "rr" : "tokens", cfg.outstanding,
             cfg.store.workers, a->controller ? ", controller " : "",
             a->controller ? a->controller : "");
    noderun_config_t nc = {a->name, a->config, a->tokens_file, a->controller, a->capacity,
                           a->policy};
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
             (unsigned long long)st.block_status, (unsigned long long)st.inline_reads,
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

int main(int argc, char **argv)
{
    const char *base = argc > 0 ? strrchr(argv[0], '/') : NULL;
    base = base ? base + 1 : (argc > 0 ? argv[0] : "");
    args_t a = {
        .prog = strcmp(base, "bqos-nbd-node") == 0 ? "bqos-nbd-node" : "bqos-node",
        .name = "node", .listen = "127.0.0.1:11311", .nbd_listen = "127.0.0.1:10809",
        .buckets = "default", .policy = SCHED_POLICY_TOKENS, .workers = -1,
        .outstanding = -1, .batch = 64, .max_auto = -1, .max_conns = 4096, .separator = ':',
        .default_mode = FRONT_DEFAULT_SERVE, .max_item = MCP_ITEM_MAX_DEFAULT,
        .export_size = 1ull << 30, .level = BQOS_LOG_INFO,
    };
    a.block = block_wanted(argc, argv, a.prog);
    if (!a.block)
        a.backend = "memcached://127.0.0.1:11211";
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0)
        return rc;
    bqos_log_init(a.prog, a.level);
    return a.block ? run_block(&a) : run_memcached(&a);
}
