/* nodeargs.c - the command line of bqos-node and bqos-nbd-node: the option table of both node kinds, their --help texts and the parse (nodeargs.h). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/num.h"
#include "common/opts.h"
#include "common/version.h"
#include "storage-node/core/agent.h"
#include "storage-node/core/sched.h"
#include "storage-node/mc/backend.h"
#include "storage-node/mc/front.h"
#include "storage-node/nbd/nbdfront.h"
#include "storage-node/nbd/nbdtls.h"
#include "storage-node/daemon/nodeargs.h"

/* Which node an option is for. */
enum { MC = 1, BLK = 2, BOTH = MC | BLK };

static const char *const policy_names[] = {"tokens", "rr", NULL};
_Static_assert(SCHED_POLICY_TOKENS == 0 && SCHED_POLICY_RR == 1, "policy_names order");
static const char *const fallback_names[] = {"static", "rr", NULL};
_Static_assert(AGENT_FALLBACK_STATIC == 0 && AGENT_FALLBACK_RR == 1, "fallback_names order");
static const char *const default_names[] = {"serve", "reject", NULL};
_Static_assert(FRONT_DEFAULT_SERVE == 0 && FRONT_DEFAULT_REJECT == 1, "default_names order");
static const char *const onoff_names[] = {"off", "on", NULL};
static const char *const order_names[] = {"rr", "urgency", NULL};
_Static_assert(SCHED_ORDER_RR == 0 && SCHED_ORDER_URGENCY == 1, "order_names order");
const char *const nodeargs_tls_names[] = {"off", "allow", "require", NULL};
_Static_assert(NBDTLS_OFF == 0 && NBDTLS_ALLOW == 1 && NBDTLS_REQUIRE == 2, "nodeargs_tls_names order");
static const char *const verify_names[] = {"none", "request", "require", NULL};
_Static_assert(TLS_VERIFY_NONE == 0 && TLS_VERIFY_REQUEST == 1 && TLS_VERIFY_REQUIRE == 2,
               "verify_names order");
static const char *const level_names[] = {"error", "warn", "info", "debug", NULL};
_Static_assert(BQOS_LOG_ERROR == 0 && BQOS_LOG_DEBUG == 3, "level_names order");

/* OPTS_FUNC: a block node's --backend, "file:PATH", into the const char *
 * at target.  Returns 0 or -EINVAL. */
static int parse_file_url(const char *arg, void *target)
{
    if (strncmp(arg, "file:", 5) != 0 || !arg[5])
        return -EINVAL;
    *(const char **)target = arg;
    return 0;
}

/* OPTS_FUNC: --separator, one character other than a space, into the char
 * at target.  Returns 0 or -EINVAL. */
static int parse_separator(const char *arg, void *target)
{
    if (strlen(arg) != 1 || arg[0] == ' ')
        return -EINVAL;
    *(char *)target = arg[0];
    return 0;
}

/* OPTS_FUNC: --outstanding, "auto" (0) or 1..1024, into the int at
 * target.  Returns 0 or -EINVAL. */
static int parse_outstanding(const char *arg, void *target)
{
    int64_t k = 0;
    if (strcmp(arg, "auto") != 0 && num_i64_in(arg, 1, 1024, &k) < 0)
        return -EINVAL;
    *(int *)target = (int)k;
    return 0;
}

/* OPTS_FUNC: a memcached-only option given to a block node: accepted
 * unchecked and counted in the int at target. */
static int count_ignored(const char *arg, void *target)
{
    (void)arg;
    ++*(int *)target;
    return 0;
}

/* One row of the node's table: an option and the node kinds it is for. */
typedef struct {
    int modes; /* MC, BLK or BOTH */
    opts_row_t o;
} node_row_t;

#define NROWS 61

/* Fills rows[NROWS], the option table of both node kinds, with targets in
 * *a (the --backend and --workers rows follow a->block).  It drives
 * nodeargs_parse(), both --help texts and the error messages.  A
 * memcached-only option given to a block node is accepted and ignored (one
 * command line template serves both kinds); a block-only option given to a
 * memcached node is a usage error. */
static void option_rows(args_t *a, node_row_t *rows)
{
    const node_row_t t[] = {
        {BOTH, {.name = "name", .type = OPTS_STRING, .target = &a->name, .arg = "NAME",
                .deflt = "node",
                .help = "Node name: in the log, in stats and reported to the controller."}},
        {MC, {.name = "memcached-listen", .type = OPTS_STRING, .target = &a->listen,
              .arg = "HOST:PORT|unix:PATH", .deflt = "127.0.0.1:11311",
              .help = "Where memcached text-protocol clients connect: a numeric IPv4\n"
                      "address and port ([IPv6]:PORT), PORT 0 picking a free one (printed\n"
                      "in the start-up log line), or a Unix-domain socket at PATH (a stale\n"
                      "socket file is replaced; the file is removed at exit)."}},
        {BLK, {.name = "nbd-listen", .type = OPTS_STRING, .target = &a->nbd_listen,
               .arg = "HOST:PORT|unix:PATH", .deflt = "127.0.0.1:10809",
               .help = "Where NBD clients connect (fixed newstyle handshake): a numeric\n"
                       "IPv4 address and port ([IPv6]:PORT), PORT 0 picking a free one\n"
                       "(printed in the start-up log line), or a Unix-domain socket at PATH\n"
                       "(clients: nbd+unix:///EXPORT?socket=PATH; a stale socket file is\n"
                       "replaced; the file is removed at exit).  Makes bqos-node a block node."}},
        {BOTH, {.name = "backend", .type = a->block ? OPTS_FUNC : OPTS_STRING,
                .target = &a->backend, .func = parse_file_url, .arg = "URL",
                .wants = a->block ? "a block node needs file:PATH" : NULL,
                .deflt = a->block ? NULL : "memcached://127.0.0.1:11211",
                .show = "memcached://127.0.0.1:11211; a block node needs file:PATH",
                .help = "memcached://HOST:PORT: the server's real memcached.\n"
                        "unix:/PATH: the real memcached on its Unix socket (memcached -s\n"
                        "PATH -a 0700: only the node's user reaches it, local clients\n"
                        "cannot go around the node).\n"
                        "file:PATH: a block store (bqos-node is then a block node).  PATH a\n"
                        "directory: one sparse file PATH/BUCKET.img of --export-size bytes per\n"
                        "bucket (created on first use; a trailing '/' creates the directory).\n"
                        "PATH a regular file or block device: every bucket's export is that\n"
                        "whole file (an empty or new file is grown to --export-size)."}},
        {BOTH, {.name = "tls", .type = OPTS_ENUM, .target = &a->tls, .arg = "off|allow|require",
                .names = nodeargs_tls_names, .show = "require with --tls-cert or --tls-psk, else off",
                .help = "memcached node: require makes --memcached-listen a TLS port (as\n"
                        "memcached's -Z / --enable-ssl): every client starts with the TLS\n"
                        "handshake; plaintext clients are closed.  NBD node: NBD over TLS\n"
                        "(NBD_OPT_STARTTLS; clients: nbds:// URIs); require: every option but\n"
                        "STARTTLS and ABORT is refused (NBD_REP_ERR_TLS_REQD) before the\n"
                        "handshake; allow (NBD only): plain and TLS clients.  off: no TLS."}},
        {BOTH, {.name = "tls-cert", .type = OPTS_STRING, .target = &a->tls_cert, .arg = "FILE",
                .show = "none",
                .help = "The server's X.509 certificate (chain), PEM; with --tls-key\n"
                        "(memcached's -o ssl_chain_cert)."}},
        {BOTH, {.name = "tls-key", .type = OPTS_STRING, .target = &a->tls_key, .arg = "FILE",
                .show = "none",
                .help = "Its private key, PEM; mode 0600 or stricter (memcached's\n"
                        "-o ssl_key)."}},
        {BOTH, {.name = "tls-ca", .type = OPTS_STRING, .target = &a->tls_ca, .arg = "FILE",
                .show = "none",
                .help = "CA certificates (PEM) that client certificates must chain to\n"
                        "(memcached's -o ssl_ca_cert); with --tls-verify request|require."}},
        {BOTH, {.name = "tls-verify", .type = OPTS_ENUM, .target = &a->tls_verify,
                .arg = "none|request|require", .names = verify_names, .deflt = "none",
                .help = "Client certificates (memcached's -o ssl_verify_mode 0, 1, 2): none\n"
                        "asks for none; request asks, and checks one sent against --tls-ca;\n"
                        "require refuses a client without a valid one.  A verified\n"
                        "certificate's subject CN (else its first DNS, e-mail or URI\n"
                        "subjectAltName) is the connection's certificate identity\n"
                        "(docs/security.md, \"Identities\")."}},
        {BOTH, {.name = "tls-psk", .type = OPTS_STRING, .target = &a->tls_psk, .arg = "FILE",
                .show = "none",
                .help = "Pre-shared keys, one USERNAME:HEXKEY per line (psktool's\n"
                        "format); mode 0600 or stricter.  The USERNAME a client's key\n"
                        "matched is its PSK identity."}},
        {BLK, {.name = "export-size", .type = OPTS_BYTES, .target = &a->export_size,
               .arg = "BYTES", .deflt = "1g", .min = 1, .max = 0x1p50,
               .help = "Size of each bucket's file (suffix k, m, g or t)."}},
        {BLK, {.name = "direct", .type = OPTS_FLAG, .target = &a->direct, .deflt = "off",
               .help = "Open the store with O_DIRECT as well: IOs aligned to 4 KiB bypass\n"
                       "the page cache as kernel AIO from the event loop; unaligned ones,\n"
                       "FUA writes, FLUSH and TRIM use a buffered descriptor and the workers."}},
        {BLK, {.name = "buckets", .type = OPTS_STRING, .target = &a->buckets, .arg = "A,B,...",
               .deflt = "default",
               .help = "Buckets (= NBD exports) that exist from the start, weight 1."}},
        {BOTH, {.name = "policy", .type = OPTS_ENUM, .target = &a->policy, .arg = "tokens|rr",
                .deflt = "tokens", .names = policy_names,
                .help = "tokens: R-tokens first, then L-tokens, round robin within each\n"
                        "(paper Algorithm 1).  rr: plain round robin over buckets."}},
        {BOTH, {.name = "workers", .type = OPTS_INT, .target = &a->workers, .arg = "N",
                .min = a->block ? 1 : 0, .max = a->block ? 1024 : 256,
                .show = "0 (inline); a block node: = --outstanding",
                .help = "Backend worker threads.  Memcached node (0..256): each with its own\n"
                        "connection to memcached; 0: the event-loop thread makes the\n"
                        "(batched) backend calls itself, with no thread hand-off: fastest, but\n"
                        "a memcached that hangs (without closing) stalls every client, local\n"
                        "commands too, until its calls time out (2 s each).  N >= 1: a pool of\n"
                        "N threads; IOs beyond the workers wait in their FIFO and are batched.\n"
                        "More threads than cores cost more in wake-ups than they gain.\n"
                        "Block node (1..1024): the IO threads."}},
        {MC, {.name = "threads", .type = OPTS_INT, .target = &a->threads, .arg = "N",
               .deflt = "1", .min = 1, .max = 65,
               .help = "Threads serving clients: the event-loop thread (accepts, reads,\n"
                       "parses, schedules, talks to the backend, formats replies) and N - 1\n"
                       "reply-writer threads that write the replies to the clients' sockets,\n"
                       "each connection's on one of them.  One scheduler either way, so\n"
                       "R, L and pacing are exact and the node reports as one node.  1: every\n"
                       "write on the loop thread, as before.  Not with TLS (--tls-cert).\n"
                       "Worth it only with cores to spare beyond the clients' and memcached's."}},
        {BOTH, {.name = "pacing", .type = OPTS_ENUM, .target = &a->pacing, .arg = "on|off",
                .deflt = "on", .names = onoff_names,
                .help = "on: a bucket's tokens from the controller become usable at a paced\n"
                        "rate, tokens left / time left in the period (R and L each), so a\n"
                        "limited bucket runs at its limit instead of spending its period's\n"
                        "tokens in a burst and then waiting; a bucket out of credit waits\n"
                        "for it on a timer.  off: every token is usable at once (paper\n"
                        "Algorithm 1).  Tokens from --tokens-file are never paced."}},
        {BOTH, {.name = "burst", .type = OPTS_DURATION, .target = &a->burst_s, .arg = "DURATION",
                .deflt = "20ms", .min = 0, .max = SCHED_BURST_MAX,
                .help = "Burst depth of paced tokens: a bucket may save up one IO plus\n"
                        "this long at its paced rate, per class (R, L): 20ms at 100/s is\n"
                        "3 IOs.  It absorbs a late timer; a limited bucket does at most\n"
                        "2 + L x (T + burst) in any window T, within 1.25 x L over 200 ms\n"
                        "and 1.05 x L over 1 s for L >= 67/s at 20ms.  0: strict."}},
        {BOTH, {.name = "r-order", .type = OPTS_ENUM, .target = &a->r_order, .arg = "rr|urgency",
                .deflt = "urgency", .names = order_names,
                .help = "Which bucket with usable R-tokens is served first.  urgency: in\n"
                        "proportion to its R-tokens left (times its weight), so a bucket\n"
                        "with 1,000 R-tokens is served 10 times as often as one with 100.\n"
                        "rr: round robin (the paper; with --pacing off, the paper's\n"
                        "scheduler)."}},
        {BOTH, {.name = "outstanding", .type = OPTS_FUNC, .target = &a->outstanding,
                .func = parse_outstanding, .arg = "K|auto", .wants = "1..1024 or auto",
                .show = "auto with --policy tokens, 64 with rr; a block node: 5",
                .help = "Most requests at the backend at once (1..1024), or auto: a window\n"
                        "that follows the backend's latency (docs/node.md), within\n"
                        "--window-min..--window-max.  The scheduler only orders what waits\n"
                        "beyond the window: a small fixed K (the paper's 5) leaves the\n"
                        "backend idle between round trips, a large one lets requests wait\n"
                        "at the backend instead of the node; auto keeps a few waiting there\n"
                        "(docs/performance.md)."}},
        {BOTH, {.name = "window-min", .type = OPTS_INT, .target = &a->window_min, .arg = "N",
                .deflt = "2", .min = 1, .max = 1024,
                .help = "Smallest window of --outstanding auto ({range})."}},
        {BOTH, {.name = "window-max", .type = OPTS_INT, .target = &a->window_max, .arg = "N",
                .deflt = "64", .min = 1, .max = 1024,
                .help = "Largest window of --outstanding auto ({range}, >= --window-min;\n"
                        "a block node: also the default --workers)."}},
        {BOTH, {.name = "window-latency", .type = OPTS_DOUBLE, .target = &a->window_latency,
                .arg = "F", .deflt = "1", .min = 1, .max = 100,
                .help = "--outstanding auto lets the latency at the backend rise to about F\n"
                        "times the lowest it has seen ({range}): 1 keeps the window at the\n"
                        "backend's knee (a few IOs waiting there); more trades latency, and\n"
                        "the scheduler's hold on the order, for throughput (a memcached\n"
                        "node with 2: about rr's throughput, reservations held less\n"
                        "surely; docs/performance.md).  Applies while requests are served on\n"
                        "reservations (R-tokens); see --window-latency-open."}},
        {BOTH, {.name = "window-latency-open", .type = OPTS_DOUBLE,
                .target = &a->window_latency_open, .arg = "F",
                .deflt = a->block ? "1" : "4", .show = "4; a block node: 1", .min = 1, .max = 100,
                .help = "--window-latency for the epochs in which no request is served on\n"
                        "reservations ({range}; below --window-latency it counts as that):\n"
                        "the order at the node then protects nothing the tokens do not, so\n"
                        "a memcached node lets its batches grow to about rr's size."}},
        {BOTH, {.name = "window-headroom", .type = OPTS_INT, .target = &a->window_headroom,
                .arg = "N", .deflt = "8", .min = 0, .max = 1024,
                .help = "--outstanding auto keeps N window slots free for reserved work per\n"
                        "bucket behind its R pace ({range}; 0: off): while one is behind, L\n"
                        "and opportunistic work fill the backend only up to the window less\n"
                        "N x the buckets behind, so the reserved bucket's requests do not\n"
                        "wait behind them in the backend's FIFO; nobody behind: the whole\n"
                        "window (docs/scheduler.md, \"Reserved headroom\")."}},
        {MC, {.name = "batch", .type = OPTS_INT, .target = &a->batch, .arg = "N", .deflt = "64",
              .min = 1, .max = BACKEND_BATCH_MAX,
              .help = "Most backend requests sent together (1..64): a worker (or the loop\n"
                      "thread, with --workers 0) takes up to N at once and sends the gets\n"
                      "among them to memcached as one multi-key get."}},
        {BOTH, {.name = "config", .type = OPTS_STRING, .target = &a->config, .arg = "FILE",
                .show = "none",
                .help = "Bucket file {\"buckets\":[{\"name\":\"red\",\"weight\":1},...]} (the\n"
                        "controller's format; other fields are ignored).  These buckets exist\n"
                        "from the start."}},
        {BOTH, {.name = "controller", .type = OPTS_STRING, .target = &a->controller,
                .arg = "ENDPOINT[,ENDPOINT...][;...]", .show = "none",
                .help = "ZeroMQ endpoint of bqos-controller (e.g. tcp://127.0.0.1:7070), or\n"
                        "up to 8 separated by commas (a leader and its standbys): the node\n"
                        "says hello and reports to every one every interval, and obeys only\n"
                        "the controller with the highest leadership epoch it has seen (a\n"
                        "deposed leader's late tokens are ignored).  Without a controller\n"
                        "the node runs on --config and --tokens-file alone.  With --shards K:\n"
                        "K such lists separated by ';', shard 0's first (quote it)."}},
        {BOTH, {.name = "shards", .type = OPTS_INT, .target = &a->shards, .arg = "K",
                .deflt = "0", .min = 0, .max = 256,
                .help = "Controller shards (bqos-controller --shards K): --controller holds\n"
                        "K endpoint lists separated by ';', one per shard.  The node talks\n"
                        "to each shard about that shard's buckets only (a stable hash of\n"
                        "the name), obeys each for its buckets only (a shard's tokens for\n"
                        "another shard's bucket are refused), and falls back per shard.\n"
                        "Needs --fallback static.  0: no shards.  K changing at run time\n"
                        "(bqos-ctl shards set): --controller may list more shard slots\n"
                        "than K (every shard the cluster may grow to); the node follows\n"
                        "the K the controllers say (etcd's) and talks to the slots in it."}},
        {BOTH, {.name = "curve-key", .type = OPTS_STRING, .target = &a->curve_key,
                .arg = "FILE", .show = "none: plain",
                .help = "This node's CURVE secret key (bqos-ctl keygen; mode 0600), for a\n"
                        "controller with --curve-key: authenticated, encrypted control traffic.\n"
                        "The controller's authorized keys bind it to this node's --name.  A\n"
                        "bare NAME (no '/') while $CREDENTIALS_DIRECTORY is set is that\n"
                        "credential (systemd's LoadCredential=), as for --controller-key."}},
        {BOTH, {.name = "controller-key", .type = OPTS_STRING, .target = &a->controller_key,
                .arg = "FILE", .show = "none",
                .help = "With --curve-key: the controller's public key (its .pub); one key\n"
                        "serves all the controllers of --controller."}},
        {BOTH, {.name = "fallback", .type = OPTS_ENUM, .target = &a->fallback,
                .arg = "static|rr", .deflt = "static", .names = fallback_names,
                .help = "What the node does while no controller is heard (--silence).\n"
                        "static: keeps enforcing.  Each period every bucket gets what the\n"
                        "controller granted it on this node in the last period it covered\n"
                        "(reservation placement and limit share), so a limit summed over\n"
                        "the nodes stays within the bucket's limit; a bucket without a\n"
                        "limit stays unlimited; a bucket never granted here gets no\n"
                        "reservation and the smallest limited share of this node.  Demand\n"
                        "that moves between nodes during the outage is not followed.\n"
                        "rr: plain round robin, no reservations and NO LIMITS, until the\n"
                        "controller is back; only when an operator prefers that."}},
        {BOTH, {.name = "silence", .type = OPTS_DOUBLE, .target = &a->silence, .arg = "N",
                .deflt = "3", .min = 0.5, .max = 1000,
                .help = "Intervals ({range}) without tokens or heartbeat from the leader\n"
                        "before the node falls back, plus a grace for scheduling delay\n"
                        "(0.1 s or a quarter interval, the larger), counted on the node's\n"
                        "clock and on the controller's (the period and interval its last\n"
                        "message carried).  A controller that is late but alive does not\n"
                        "trigger it; tokens already given stay good to the period's end, so\n"
                        "the switch happens at a period start at the earliest.  Every\n"
                        "fallback and resume is logged at warn and counted in stats."}},
        {BOTH, {.name = "capacity", .type = OPTS_U64, .target = &a->capacity, .arg = "IOPS",
                .deflt = "0", .min = 0, .max = 1e9, .show = "0 (unknown)",
                .help = "Capacity profile sent to the controller in the hello (the starting\n"
                        "point of its capacity estimate; 0: the controller's --capacity)."}},
        {BOTH, {.name = "tokens-file", .type = OPTS_STRING, .target = &a->tokens_file,
                .arg = "FILE", .show = "none",
                .help = "TEST HOOK: token counts {\"red\":{\"r\":100,\"l\":200},...} read at start\n"
                        "and again on SIGUSR1 (which also starts a new QoS period); replaces\n"
                        "each named bucket's tokens (\"l\" absent or null: no limit)."}},
        {BLK, {.name = "io-time-us", .type = OPTS_UINT, .target = &a->io_time_us, .arg = "N",
               .deflt = "0", .min = 0, .max = 1e7, .show = "0 (off)",
               .help = "EXPERIMENT HOOK: every IO keeps its worker busy for at least N\n"
                       "microseconds, emulating a slower device (capacity = workers x\n"
                       "1e6 / N IOs/s), so that several nodes sharing one machine behave\n"
                       "like separate servers.  Page-cache reads are then not served inline."}},
        {MC, {.name = "auth-file", .type = OPTS_STRING, .target = &a->auth_file, .arg = "FILE",
              .show = "none (no login)",
              .help = "Clients log in first, as with memcached -Y FILE: user:password lines\n"
                      "(mode 0600 or stricter; re-read on SIGHUP).  A connection's first\n"
                      "command is `set <any> 0 0 <n>` with data `user password`; before it\n"
                      "every command gets CLIENT_ERROR unauthenticated (docs/security.md)."}},
        {MC, {.name = "separator", .type = OPTS_FUNC, .target = &a->separator,
              .func = parse_separator, .arg = "C", .deflt = ":",
              .wants = "one character, not a space",
              .help = "Bucket of a key = its prefix up to the first C."}},
        {MC, {.name = "default-bucket", .type = OPTS_ENUM, .target = &a->default_mode,
              .arg = "serve|reject", .deflt = "serve", .names = default_names,
              .help = "Keys of no known bucket (no separator, unknown prefix beyond\n"
                      "--max-auto-buckets): serve them in bucket \"default\", or answer\n"
                      "SERVER_ERROR unknown bucket.  With a bucket table (--config, or a\n"
                      "controller's) serve needs a `default` bucket in it: without one\n"
                      "they are refused (CLIENT_ERROR unknown bucket: no default ...)."}},
        {MC, {.name = "max-auto-buckets", .type = OPTS_INT, .target = &a->max_auto, .arg = "N",
              .min = 0, .max = 1000000, .show = "1024 without --config, else 0",
              .help = "Buckets created when first seen in a key; beyond, keys go to the\n"
                      "default bucket."}},
        {MC, {.name = "max-item-size", .type = OPTS_BYTES, .target = &a->max_item,
              .arg = "BYTES", .deflt = "1m", .min = 1, .max = 0x1p30,
              .help = "Largest value accepted (suffix k or m); larger ones get\n"
                      "SERVER_ERROR object too large for cache."}},
        {BOTH, {.name = "max-conns", .type = OPTS_INT, .target = &a->max_conns, .arg = "N",
                .deflt = "4096", .min = 1, .max = 1000000,
                .help = "Client connections beyond are refused, unless the address holding\n"
                        "the most connections holds at least two more than the new client's:\n"
                        "then its longest-idle connection with nothing to answer is closed\n"
                        "and the new client admitted (a block node only closes connections\n"
                        "that have not chosen an export).  Lowered at start (with a warning)\n"
                        "to what the file descriptor limit (ulimit -n) allows once\n"
                        "descriptors for the backend, controller and files are kept apart;\n"
                        "the soft limit is first raised towards the hard one if needed."}},
        {BOTH, {.name = "max-conns-per-ip", .type = OPTS_INT, .target = &a->per_ip, .arg = "N",
                .min = 0, .max = 1000000, .show = "max-conns/2",
                .help = "TCP connections from one client address beyond N are refused, so\n"
                        "that one client cannot take every connection; 0: no cap."}},
        {MC, {.name = "idle-timeout", .type = OPTS_DURATION, .target = &a->idle_timeout,
              .arg = "DURATION", .deflt = "300", .min = 0, .max = 1e7, .show = "300 (5 minutes)",
              .help = "Close a client connection that sent nothing for DURATION (\"300\",\n"
                      "\"300s\", \"500ms\") and has no request queued, at the backend or\n"
                      "unanswered; 0: never (memcached's default)."}},
        {MC, {.name = "conn-reply-limit", .type = OPTS_BYTES, .target = &a->conn_reply,
              .arg = "BYTES", .deflt = "256m", .min = 65536, .max = 0x1p40,
              .help = "Unsent reply bytes one client may hold: closed (logged) above;\n"
                      "its requests not read at a quarter of it, closed after 60 s there."}},
        {MC, {.name = "reply-memory", .type = OPTS_BYTES, .target = &a->reply_mem,
              .arg = "BYTES", .deflt = "1g", .min = 1, .max = 0x1p40,
              .help = "Unsent reply bytes of all clients; above, the heaviest clients'\n"
                      "requests are not read."}},
        {BLK, {.name = "nbd-request-memory", .type = OPTS_BYTES, .target = &a->nbd_mem,
               .arg = "BYTES", .deflt = "256m", .min = 1 << 20, .max = 0x1p40,
               .help = "Request-buffer bytes of all NBD clients; a client that would\n"
                       "exceed it is not read until buffers free."}},
        {BOTH, {.name = "weighted", .type = OPTS_FLAG, .target = &a->weighted, .deflt = "off",
                .help = "Weighted round robin by bucket weight."}},
        {BOTH, {.name = "metrics-listen", .type = OPTS_STRING, .target = &a->metrics,
                .arg = "HOST:PORT", .show = "none",
                .help = "Serve Prometheus metrics over HTTP at http://HOST:PORT/metrics\n"
                        "(HOST numeric or a name, [IPv6]:PORT; PORT 0 picks a free one, logged)."}},
        {BOTH, {.name = "log-level", .type = OPTS_ENUM, .target = &a->level, .arg = "LEVEL",
                .deflt = "info", .names = level_names,
                .help = "error, warn, info or debug (logs go to stderr)."}},
        {BOTH, {.name = "log-format", .type = OPTS_ENUM, .target = &a->log_format, .arg = "text|json",
                .deflt = "text", .names = bqos_log_format_names,
                .help = "json: one object a line {\"ts\",\"level\",\"prog\",\"msg\"}."}},
        {BOTH, {.name = "check", .type = OPTS_FLAG, .target = &a->check,
                .help = "Validate the options (and --settings), --config and --tokens-file,\n"
                        "and the key files the start reads (--curve-key, --controller-key;\n"
                        "the TLS files, --auth-file), print every problem with its position\n"
                        "(FILE:LINE:COL), and exit: 0 if there is none, 1 otherwise.\n"
                        "Nothing is bound or started."}},
        {BOTH, {.name = "help", .type = OPTS_FLAG, .target = &a->help, .flags = OPTS_STOP,
                .help = "Print this help and exit."}},
        {BOTH, {.name = "version", .type = OPTS_FLAG, .target = &a->version, .flags = OPTS_STOP,
                .help = "Print the version and exit."}},
        {BOTH, {.name = "user", .type = OPTS_STRING, .target = &a->user, .arg = "NAME",
                .show = "none: the user that started it",
                .help = "Started as root: switch to user NAME (or a numeric uid) and its\n"
                        "groups once the sockets are bound and the files open, and refuse to\n"
                        "run if that fails.  Nothing else needs root (only ports < 1024)."}},
        {MC, {.name = "disable-flush-all", .type = OPTS_FLAG, .target = &a->no_flush,
              .deflt = "off",
              .help = "Answer flush_all with \"CLIENT_ERROR flush_all not allowed\"\n"
                      "(memcached's -F)."}},
        {BOTH, {.name = "cost-unit", .type = OPTS_BYTES, .target = &a->cost_unit, .arg = "BYTES",
                .deflt = "4k", .min = 1, .max = COST_UNIT_MAX,
                .help = "Cost-aware tokens: a request of a bucket with a rate in bytes/s\n"
                        "costs ceil(bytes x weight / BYTES) of its byte tokens (one IO token\n"
                        "whatever its size, as without a byte rate).  docs/node.md."}},
        {BOTH, {.name = "cost-read-weight", .type = OPTS_DOUBLE, .target = &a->cost_read,
                .arg = "F", .deflt = "1", .min = 0, .max = COST_WEIGHT_MAX,
                .help = "Weight of a byte read (an NBD READ, a memcached get's reply)."}},
        {BOTH, {.name = "cost-write-weight", .type = OPTS_DOUBLE, .target = &a->cost_write,
                .arg = "F", .deflt = "1", .min = 0, .max = COST_WEIGHT_MAX,
                .help = "Weight of a byte written (an NBD WRITE, a memcached store)."}},
        {BLK, {.name = "cost-flush", .type = OPTS_UINT, .target = &a->cost_flush, .arg = "N",
               .deflt = "1", .min = 0, .max = COST_FIXED_MAX,
               .help = "Units an NBD FLUSH costs in byte tokens."}},
        {BLK, {.name = "cost-trim", .type = OPTS_UINT, .target = &a->cost_trim, .arg = "N",
               .deflt = "1", .min = 0, .max = COST_FIXED_MAX,
               .help = "Units an NBD TRIM costs in byte tokens, whatever its length."}},
    };
    _Static_assert(sizeof t / sizeof t[0] == NROWS, "NROWS");
    memcpy(rows, t, sizeof t);
}

/* Prints the rows for `want` exactly (BLK: the block-only ones), or every
 * row that a `want` node takes. */
static void print_rows(FILE *out, const node_row_t *rows, int want, int exact)
{
    for (size_t i = 0; i < NROWS; i++)
        if (exact ? rows[i].modes == want : (rows[i].modes & want) != 0)
            opts_help(out, &rows[i].o, 1);
}

static void usage_memcached(FILE *out, const node_row_t *rows)
{
    fprintf(out,
            "NAME\n"
            "    bqos-node - bucket-QoS storage-node agent in front of memcached\n\n"
            "SYNOPSIS\n"
            "    bqos-node --name NAME --memcached-listen HOST:PORT\n"
            "              --backend memcached://HOST:PORT [--policy tokens|rr]\n"
            "              [--workers N] [--outstanding K|auto] [--config FILE]\n"
            "              [--controller ENDPOINT] [--log-level L] [OPTION]...\n\n"
            "DESCRIPTION\n"
            "    Speaks the memcached text protocol to clients, puts every key IO\n"
            "    in the queue of its bucket (the key prefix before the separator),\n"
            "    lets the token scheduler pick which bucket is served next and\n"
            "    forwards the IO to the real memcached, pipelined\n"
            "    (batched, from the event loop or from a pool of worker threads,\n"
            "    see --workers).  Replies on a connection keep request\n"
            "    order.  The binary protocol is not supported (the connection is\n"
            "    closed).\n\n"
            "OPTIONS\n");
    print_rows(out, rows, MC, 0);
    opts_help(out, &opts_settings_row, 1);
    fprintf(out,
            "\nBLOCK NODE\n"
            "    With --backend file:PATH or --nbd-listen, bqos-node is a block node\n"
            "    (bqos-nbd-node is the same program, always a block node): every\n"
            "    bucket is an NBD export of the same name and every NBD request one\n"
            "    IO through the same token scheduler (docs/nbd.md).  The options\n"
            "    above apply as described; the memcached-only ones are accepted and\n"
            "    ignored; in addition:\n");
    print_rows(out, rows, BLK, 1);
    fprintf(out,
            "\nSIGNALS\n"
            "    SIGTERM, SIGINT  stop accepting, finish in-flight requests, answer\n"
            "                     queued ones with SERVER_ERROR shutting down, exit 0.\n"
            "    SIGUSR1          start a new QoS period and re-read --tokens-file.\n"
            "    SIGHUP           re-read --config (new buckets, weights), --tokens-file,\n"
            "                     the CURVE keys (changed: connect anew), --auth-file and\n"
            "                     the TLS files (--tls-cert, --tls-key, --tls-ca,\n"
            "                     --tls-psk: new connections use them, open ones keep\n"
            "                     theirs); a file that does not load changes nothing.\n\n"
            "EXIT STATUS\n"
            "    0 after a clean stop, 1 on a start-up error, 2 on bad usage.\n\n"
            "EXAMPLE\n"
            "    bqos-node --name n1 --memcached-listen 127.0.0.1:11311 \\\n"
            "              --backend memcached://127.0.0.1:11211 --policy rr\n\n"
            "SEE ALSO\n"
            "    docs/node.md, docs/nbd.md, memcached(1), memccapable(1)\n");
}

static void usage_block(FILE *out, const char *prog, const node_row_t *rows)
{
    fprintf(out,
            "NAME\n"
            "    %s - bucket-QoS block storage node: NBD exports, one per\n"
            "    bucket, served through the token scheduler\n\n"
            "SYNOPSIS\n"
            "    %s --backend file:PATH [--nbd-listen HOST:PORT]\n"
            "        [--export-size BYTES] [--direct] [--policy tokens|rr]\n"
            "        [--outstanding K|auto] [--buckets A,B,...]\n"
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
    print_rows(out, rows, BLK, 0);
    opts_help(out, &opts_settings_row, 1);
    fprintf(out,
            "\nSIGNALS\n"
            "    SIGTERM, SIGINT  stop accepting, answer queued requests with ESHUTDOWN,\n"
            "                     finish in-flight ones, exit 0.\n"
            "    SIGUSR1          start a new QoS period and re-read --tokens-file.\n"
            "    SIGHUP           re-read --config (new buckets, weights), --tokens-file,\n"
            "                     the CURVE keys (changed: connect anew) and the TLS\n"
            "                     files (--tls-cert, --tls-key, --tls-ca, --tls-psk: new\n"
            "                     connections use them, open ones keep theirs); a file\n"
            "                     that does not load changes nothing.\n\n"
            "EXIT STATUS\n"
            "    0 after a clean stop, 1 on a start-up error, 2 on bad usage.\n\n"
            "EXAMPLE\n"
            "    %s --backend file:/var/lib/bqos/ --buckets red,blue \\\n"
            "        --nbd-listen 127.0.0.1:10809 --policy rr\n"
            "    nbdinfo --list nbd://127.0.0.1:10809\n\n"
            "SEE ALSO\n"
            "    docs/nbd.md, bqos-node(1), nbdinfo(1), nbdcopy(1), fio(1)\n", prog);
}

/* Returns 1 if the command line asks for a block node: the program is
 * called bqos-nbd-node, or --backend names a file: store, or --nbd-listen
 * is given (on argv or in the --settings file). */
int nodeargs_block_wanted(int argc, char **argv, const char *prog)
{
    char v[16];
    if (strcmp(prog, "bqos-nbd-node") == 0)
        return 1;
    /* So may a settings file (--settings) that names either. */
    if (opts_settings_peek(argc, argv, "nbd-listen", v, sizeof v) ||
        (opts_settings_peek(argc, argv, "backend", v, sizeof v) && strncmp(v, "file:", 5) == 0))
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

/* Parses argv into *a (a->prog and a->block set; the -1 defaults in
 * place).  Returns -1 to go on, or the exit status (0 after --help or
 * --version, 2 on bad usage, with a message). */
int nodeargs_parse(int argc, char **argv, args_t *a)
{
    node_row_t rows[NROWS];
    opts_row_t p[NROWS];
    int refused[NROWS] = {0};
    int flagged[NROWS] = {0}; /* an ignored flag's own target: opts sets it to 1 */
    option_rows(a, rows);
    /* The rows opts_parse() gets: this kind's as they are; the other
     * kind's ignored (memcached-only ones, all with an argument, on a block
     * node) or refused (block-only ones on a memcached node: parsing stops
     * there and the message below says why). */
    int mode = a->block ? BLK : MC;
    for (size_t i = 0; i < NROWS; i++) {
        p[i] = rows[i].o;
        if (rows[i].modes & mode)
            continue;
        if (a->block && p[i].type == OPTS_FLAG)
            p[i] = (opts_row_t){.name = p[i].name, .target = &flagged[i], .type = OPTS_FLAG};
        else if (a->block)
            p[i] = (opts_row_t){.name = p[i].name, .target = &a->ignored, .func = count_ignored,
                                .type = OPTS_FUNC};
        else
            p[i] = (opts_row_t){.name = p[i].name,
                                .type = p[i].type == OPTS_FLAG ? OPTS_FLAG : OPTS_STRING,
                                .given = &refused[i], .flags = OPTS_STOP};
    }
    const opts_cmd_t cmd = {.prog = a->prog, .rows = p, .n = NROWS};
    int rc = opts_parse(&cmd, argc, argv, NULL);
    if (rc == -EBADMSG) /* the settings file: each problem printed */
        return 1;
    if (rc < 0)
        return 2;
    for (size_t i = 0; i < NROWS; i++)
        a->ignored += flagged[i];
    if (a->help) {
        if (a->block)
            usage_block(stdout, a->prog, rows);
        else
            usage_memcached(stdout, rows);
        return 0;
    }
    if (a->version) {
        printf("%s %s\n", a->prog, BQOS_VERSION);
        return 0;
    }
    if (a->window_min > a->window_max) {
        opts_fail(&cmd, "--window-min %d is above --window-max %d", a->window_min,
                  a->window_max);
        return 2;
    }
    int groups = 1;
    for (const char *c = a->controller; c && *c; c++)
        groups += *c == ';';
    if (!a->shards && groups > 1) {
        opts_fail(&cmd, "--controller with %d endpoint lists separated by ';' (controller "
                  "shards) needs --shards %d", groups, groups);
        return 2;
    }
    if (a->shards && (!a->controller || groups < a->shards)) {
        opts_fail(&cmd, "--shards %d needs --controller with at least %d endpoint lists "
                  "separated by ';' (it has %d)", a->shards, a->shards, a->controller ? groups : 0);
        return 2;
    }
    for (size_t i = 0; rc == 1 && i < NROWS; i++) {
        if (refused[i]) {
            opts_fail(&cmd, "--%s is for a block node (--backend file:PATH)", p[i].name);
            return 2;
        }
    }
    return -1;
}

