/* main.c - bqos-node: the memcached node's command line and front; bucket and token files, the controller client and signals are noderun's. */
#include <errno.h>
#include <event2/event.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/opts.h"
#include "storage-node/mc/backend.h"
#include "storage-node/nbd/nbdnode.h"
#include "storage-node/nodeconf.h"
#include "storage-node/noderun.h"
#include "storage-node/mc/front.h"

#ifndef BQOS_VERSION
#define BQOS_VERSION "0.1.0"
#endif

/* Option table: one row per option; drives getopt_long and --help. */
enum {
    OPT_NAME = 1, OPT_LISTEN, OPT_BACKEND, OPT_POLICY, OPT_WORKERS,
    OPT_OUTSTANDING, OPT_CONFIG, OPT_CONTROLLER, OPT_TOKENS_FILE,
    OPT_SEPARATOR, OPT_DEFAULT_BUCKET, OPT_MAX_AUTO, OPT_MAX_ITEM,
    OPT_MAX_CONNS, OPT_CAPACITY, OPT_WEIGHTED, OPT_LOG_LEVEL, OPT_HELP, OPT_VERSION,
    OPT_BATCH
};

static const opts_t opts[] = {
    {"name", OPT_NAME, "NAME", "node", "Node name, reported to the controller and in stats."},
    {"memcached-listen", OPT_LISTEN, "HOST:PORT|unix:PATH", "127.0.0.1:11311",
     "Where memcached text-protocol clients connect: a numeric IPv4\n"
     "address and port ([IPv6]:PORT), PORT 0 picking a free one (printed\n"
     "in the start-up log line), or a Unix-domain socket at PATH (a stale\n"
     "socket file is replaced; the file is removed at exit)."},
    {"backend", OPT_BACKEND, "URL", "memcached://127.0.0.1:11211",
     "The server's real memcached, as memcached://HOST:PORT; or file:PATH\n"
     "for a block node (see BLOCK NODE)."},
    {"policy", OPT_POLICY, "tokens|rr", "tokens",
     "tokens: R-tokens first, then L-tokens, round robin within each\n"
     "(paper Algorithm 1).  rr: plain round robin over buckets."},
    {"workers", OPT_WORKERS, "N", "0 (inline)",
     "Backend worker threads, each with its own libmemcached connection\n"
     "(0..256).  0: the event-loop thread makes the (batched) backend\n"
     "calls itself, with no thread hand-off: fastest, but a memcached\n"
     "that hangs (without closing) stalls every client, local commands\n"
     "too, until its calls time out (2 s each).\n"
     "N >= 1: a pool of N threads; IOs beyond the workers wait in their\n"
     "FIFO and are batched.  More threads than cores cost more in\n"
     "wake-ups than they gain."},
    {"outstanding", OPT_OUTSTANDING, "K", "5 with --policy tokens, 64 with rr",
     "Most requests at the backend at once (1..1024).  The scheduler only\n"
     "orders what waits beyond these K, so QoS (tokens) keeps the paper's\n"
     "5; without QoS (rr) 64 lets one multi-get carry ~50 requests: with 5\n"
     "a node reaches about half of memcached's direct throughput here,\n"
     "with 64 about 90% (docs/performance.md)."},
    {"config", OPT_CONFIG, "FILE", "none",
     "Bucket file {\"buckets\":[{\"name\":\"red\",\"weight\":1},...]} (the\n"
     "controller's format; other fields are ignored).  These buckets exist\n"
     "from the start."},
    {"controller", OPT_CONTROLLER, "ENDPOINT", "none",
     "ZeroMQ endpoint of bqos-controller (e.g. tcp://127.0.0.1:7070): the\n"
     "node says hello, reports every interval, applies the tokens it gets\n"
     "and falls back to rr while the controller is silent."},
    {"capacity", OPT_CAPACITY, "IOPS", "0 (unknown)",
     "Capacity profile sent to the controller in the hello (the starting\n"
     "point of its capacity estimate; 0: the controller's --capacity)."},
    {"tokens-file", OPT_TOKENS_FILE, "FILE", "none",
     "TEST HOOK: token counts {\"red\":{\"r\":100,\"l\":200},...} read at start\n"
     "and again on SIGUSR1 (which also starts a new QoS period); replaces\n"
     "each named bucket's tokens (\"l\" absent or null: no limit)."},
    {"separator", OPT_SEPARATOR, "C", ":", "Bucket of a key = its prefix up to the first C."},
    {"default-bucket", OPT_DEFAULT_BUCKET, "serve|reject", "serve",
     "Keys of no known bucket (no separator, unknown prefix beyond\n"
     "--max-auto-buckets): serve them in bucket \"default\", or answer\n"
     "SERVER_ERROR unknown bucket."},
    {"max-auto-buckets", OPT_MAX_AUTO, "N", "1024 without --config, else 0",
     "Buckets created when first seen in a key; beyond, keys go to the\n"
     "default bucket."},
    {"max-item-size", OPT_MAX_ITEM, "BYTES", "1m",
     "Largest value accepted (suffix k or m); larger ones get\n"
     "SERVER_ERROR object too large for cache."},
    {"max-conns", OPT_MAX_CONNS, "N", "4096", "Client connections beyond are refused."},
    {"weighted", OPT_WEIGHTED, NULL, "off", "Weighted round robin by bucket weight."},
    {"log-level", OPT_LOG_LEVEL, "LEVEL", "info", "error, warn, info or debug (logs go to stderr)."},
    {"help", OPT_HELP, NULL, NULL, "Print this help and exit."},
    {"version", OPT_VERSION, NULL, NULL, "Print the version and exit."},
    {"batch", OPT_BATCH, "N", "64",
     "Most backend requests sent together (1..64): a worker (or the loop\n"
     "thread, with --workers 0) takes up to N at once and sends the gets\n"
     "among them to memcached as one multi-key get."},
};
#define NOPTS (sizeof opts / sizeof opts[0])

static void usage(FILE *out)
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
    opts_usage(out, opts, NOPTS);
    /* The block node's own options (storage-node/nbd/nbdnode.h). */
    fprintf(out,
            "\nBLOCK NODE\n"
            "    With --backend file:PATH or --nbd-listen, bqos-node is a block node:\n"
            "    every bucket is an NBD export of the same name and every NBD request\n"
            "    one IO through the same token scheduler (docs/nbd.md).  --name,\n"
            "    --policy, --outstanding, --config, --controller, --tokens-file,\n"
            "    --weighted, --max-conns and --log-level apply as above; --workers N\n"
            "    is the number of IO threads there (1..1024, default: --outstanding);\n"
            "    the memcached-only options are ignored; in addition:\n");
    nbdnode_usage_options(out, 1);
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
            "    docs/node.md, memcached(1), memccapable(1)\n");
}

int main(int argc, char **argv)
{
    /* Block node: --backend file:PATH or --nbd-listen (docs/nbd.md). */
    if (nbdnode_wanted(argc, argv))
        return nbdnode_main(argc, argv, "bqos-node");
    front_config_t cfg;
    front_config_defaults(&cfg);
    const char *listen = "127.0.0.1:11311", *backend = "memcached://127.0.0.1:11211";
    const char *config = NULL, *controller = NULL, *tokens_file = NULL;
    bqos_log_level_t level = BQOS_LOG_INFO;
    int max_auto = -1, outstanding_set = 0;
    long v;
    uint64_t bytes, capacity = 0;

    struct option lopts[NOPTS + 1];
    opts_getopt(opts, NOPTS, lopts);

    int c;
    while ((c = getopt_long(argc, argv, "", lopts, NULL)) != -1) {
        switch (c) {
        case OPT_NAME: cfg.name = optarg; break;
        case OPT_LISTEN: listen = optarg; break;
        case OPT_BACKEND: backend = optarg; break;
        case OPT_POLICY:
            if (strcmp(optarg, "tokens") == 0)
                cfg.policy = SCHED_POLICY_TOKENS;
            else if (strcmp(optarg, "rr") == 0)
                cfg.policy = SCHED_POLICY_RR;
            else
                goto bad;
            break;
        case OPT_WORKERS:
            if (nodeconf_parse_long(optarg, 0, 256, &v) < 0)
                goto bad;
            cfg.workers = (int)v;
            break;
        case OPT_OUTSTANDING:
            if (nodeconf_parse_long(optarg, 1, 1024, &v) < 0)
                goto bad;
            cfg.outstanding = (int)v;
            outstanding_set = 1;
            break;
        case OPT_BATCH:
            if (nodeconf_parse_long(optarg, 1, BACKEND_BATCH_MAX, &v) < 0)
                goto bad;
            cfg.batch = (int)v;
            break;
        case OPT_CONFIG: config = optarg; break;
        case OPT_CONTROLLER: controller = optarg; break;
        case OPT_TOKENS_FILE: tokens_file = optarg; break;
        case OPT_SEPARATOR:
            if (strlen(optarg) != 1 || optarg[0] == ' ')
                goto bad;
            cfg.separator = optarg[0];
            break;
        case OPT_DEFAULT_BUCKET:
            if (strcmp(optarg, "serve") == 0)
                cfg.default_mode = FRONT_DEFAULT_SERVE;
            else if (strcmp(optarg, "reject") == 0)
                cfg.default_mode = FRONT_DEFAULT_REJECT;
            else
                goto bad;
            break;
        case OPT_MAX_AUTO:
            if (nodeconf_parse_long(optarg, 0, 1000000, &v) < 0)
                goto bad;
            max_auto = (int)v;
            break;
        case OPT_MAX_ITEM:
            if (nodeconf_parse_bytes(optarg, 1ull << 30, &bytes) < 0)
                goto bad;
            cfg.max_item = (size_t)bytes;
            break;
        case OPT_CAPACITY:
            if (nodeconf_parse_long(optarg, 0, 1000000000, &v) < 0)
                goto bad;
            capacity = (uint64_t)v;
            break;
        case OPT_MAX_CONNS:
            if (nodeconf_parse_long(optarg, 1, 1000000, &v) < 0)
                goto bad;
            cfg.max_conns = (int)v;
            break;
        case OPT_WEIGHTED: cfg.weighted = 1; break;
        case OPT_LOG_LEVEL:
            if (bqos_log_parse_level(optarg, &level) < 0)
                goto bad;
            break;
        case OPT_HELP: usage(stdout); return 0;
        case OPT_VERSION: printf("bqos-node %s\n", BQOS_VERSION); return 0;
        default:
            fprintf(stderr, "Try 'bqos-node --help'.\n");
            return 2;
        }
        continue;
    bad:
        fprintf(stderr, "bqos-node: bad value '%s' for --%s\nTry 'bqos-node --help'.\n",
                optarg, opts_name(opts, NOPTS, c));
        return 2;
    }
    if (optind < argc) {
        fprintf(stderr, "bqos-node: unexpected argument '%s'\nTry 'bqos-node --help'.\n",
                argv[optind]);
        return 2;
    }
    bqos_log_init("bqos-node", level);
    if (!outstanding_set)
        cfg.outstanding = cfg.policy == SCHED_POLICY_RR ? 64 : 5;
    cfg.max_auto_buckets = max_auto >= 0 ? max_auto : (config ? 0 : 1024);

    char bhost[256];
    if (listener_parse(listen, &cfg.listen) < 0) {
        fprintf(stderr, "bqos-node: bad --memcached-listen '%s': expected " LISTENER_SYNTAX "\n",
                listen);
        return 2;
    }
    if (backend_parse_url(backend, bhost, sizeof bhost, &cfg.backend_port) < 0) {
        fprintf(stderr, "bqos-node: bad --backend '%s'\n", backend);
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
        log_error("cannot start on %s (backend %s): %s", listen, backend, strerror(-err));
        goto out;
    }
    log_info("node %s: memcached clients on %s, backend %s:%u, policy %s, %d workers, "
             "%d outstanding, batch %d",
             cfg.name, gate_address(front_gate(f)), bhost, cfg.backend_port,
             cfg.policy == SCHED_POLICY_RR ? "rr" : "tokens", cfg.workers, cfg.outstanding, cfg.batch);
    noderun_config_t nc = {cfg.name, config, tokens_file, controller, capacity, cfg.policy};
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
