/* main.c - bqos-controller: the options, the wiring of ctrl.c to the clock, the rounds, the node and admin endpoints, and the poll loop (signals, high availability). */
#include <curl/curl.h>
#include <errno.h>
#include <malloc.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "common/bucketfile.h"
#include "common/curvekey.h"
#include "common/hostport.h"
#include "common/log.h"
#include "common/metricsd.h"
#include "common/mono.h"
#include "common/notify.h"
#include "common/opts.h"
#include "common/privdrop.h"
#include "common/proto.h"
#include "common/version.h"
#include "controller/ctrlopts.h"
#include "controller/admission.h"
#include "controller/ctrl.h"
#include "controller/reshard.h"
#include "controller/shardset.h"
#include "common/shardmap.h"
#include "controller/daemon/admin.h"
#include "controller/daemon/conf.h"
#include "controller/daemon/auth.h"
#include "controller/daemon/authkeys.h"
#include "controller/daemon/clock.h"
#include "controller/daemon/etcd.h"
#include "controller/daemon/leader.h"
#include "controller/daemon/memtrim.h"
#include "controller/daemon/metrics.h"
#include "controller/daemon/nodes.h"
#include "controller/daemon/rootx.h"
#include "controller/daemon/rounds.h"
#include "controller/daemon/stopguard.h"

/* ---- options ------------------------------------------------------------- */

/* Read-only after parse_args(). */
typedef struct {
    const char *buckets;
    const char *listen;
    const char *admin;
    double period_s;
    int intervals;
    int threads;
    int admission; /* admission_mode_t: index in admission_names */
    int down_after;
    int max_nodes, max_names, forget_after, fallback_lease;
    int unused_periods; /* --reservation-unused-periods */
    double capacity;
    double cap_sd, cap_cold, conv_slack, limit_depth;
    int shares;
    int cap_recent;
    double skip;
    double wait;
    int approx;
    int level;     /* bqos_log_level_t: index in level_names */
    int log_format; /* bqos_log_format_t: index in bqos_log_format_names */
    const char *etcd;     /* NULL: alone */
    const char *id;
    const char *cluster;
    double lease_ttl;
    double etcd_timeout;
    double takeover;      /* intervals without a heartbeat before a standby deposes */
    const char *curve_key, *authorized_keys; /* both or neither */
    int insecure;
    const char *metrics, *user; /* --metrics-listen HOST:PORT, --user NAME; NULL: none */
    int shards, shard;    /* --shards K (0: none), --shard I */
    const char *root_listen, *root, *root_key; /* the root exchange (shards) */
    int check;            /* --check: validate and exit */
    int help, version;
} settings_t;

static const char *const admission_names[] = {"warn", "enforce", NULL};
static const char *const onoff_names[] = {"off", "on", NULL};
_Static_assert(ADMISSION_WARN == 0 && ADMISSION_ENFORCE == 1, "admission_names order");
static const char *const level_names[] = {"error", "warn", "info", "debug", NULL};
_Static_assert(BQOS_LOG_ERROR == 0 && BQOS_LOG_DEBUG == 3, "level_names order");

#define NOPTS 44

/* Fills rows[NOPTS], the option table, with targets in *s. */
static void option_rows(settings_t *s, opts_row_t *rows)
{
    const opts_row_t t[] = {
        {.name = "buckets", .type = OPTS_STRING, .target = &s->buckets, .arg = "FILE",
         .show = "(required)",
         .help = "Bucket reservation file {\"buckets\":[{\"name\":\"red\",\"reservation\":30000,\n"
                 "\"limit\":60000,\"weight\":1},...]}, rates in IOs per second.  Re-read on\n"
                 "SIGHUP and on the admin \"reload\" request; admin \"set\"/\"remove\" rewrite\n"
                 "it atomically."},
        {.name = "listen", .type = OPTS_STRING, .target = &s->listen, .arg = "ENDPOINT",
         .deflt = "tcp://127.0.0.1:7070",
         .help = "ZeroMQ endpoint (ROUTER) the storage nodes connect to."},
        {.name = "admin", .type = OPTS_STRING, .target = &s->admin, .arg = "ENDPOINT",
         .deflt = "tcp://127.0.0.1:7071",
         .help = "ZeroMQ endpoint (REP) for bqos-ctl: status, history, buckets, set, remove, reload."},
        {.name = "period", .type = OPTS_DURATION, .target = &s->period_s, .arg = "DURATION",
         .deflt = "1s", .min = 0.001, .max = 3600,
         .help = "QoS period T: reservations and limits are per period.  DURATION is a\n"
                 "number with an optional unit ms or s (default s), e.g. 500ms, 2s."},
        {.name = "intervals", .type = OPTS_INT, .target = &s->intervals, .arg = "K", .deflt = "5",
         .min = 1, .max = 1000,
         .help = "Redistribution intervals per period ({range}): nodes report and tokens\n"
                 "are recomputed at every interval start."},
        {.name = "threads", .type = OPTS_INT, .target = &s->threads, .arg = "N", .deflt = "1",
         .min = 0, .max = 1024, .help = "OpenMP threads for pShift (0: OpenMP default)."},
        {.name = "admission", .type = OPTS_ENUM, .target = &s->admission, .arg = "warn|enforce",
         .deflt = "warn", .names = admission_names,
         .help = "Admission control: a configuration whose total reservation exceeds the\n"
                 "cluster's estimated capacity, or a bucket whose reservation exceeds the\n"
                 "capacity of the servers it is placed on, is logged (warn) or refused\n"
                 "(enforce; at start-up, on reload and on set)."},
        {.name = "down-after", .type = OPTS_INT, .target = &s->down_after, .arg = "N",
         .deflt = "3", .min = 1, .max = 1000000,
         .help = "A node silent for N intervals is marked down and its buckets are\n"
                 "re-planned on the others; it is taken back when it talks again."},
        {.name = "max-nodes", .type = OPTS_INT, .target = &s->max_nodes, .arg = "N",
         .deflt = "4096", .min = 1, .max = CTRL_NODES_MAX,
         .help = "Nodes registered at most ({range}); a hello under a new name beyond is\n"
                 "refused (error too_many_nodes) unless a forgotten node's slot is free."},
        {.name = "max-names", .type = OPTS_INT, .target = &s->max_names, .arg = "N",
         .deflt = "262144", .min = 1, .max = 4000000,
         .help = "Names a node's table may hold beyond the configured buckets ({range}):\n"
                 "a node's table is held up to the buckets plus N names.  A table that\n"
                 "comes in parts is never refused: names past the bound are not held\n"
                 "(error too_many_names; those buckets get no tokens); an older node's\n"
                 "whole table past it is refused.  Also sets the largest message the node\n"
                 "socket accepts: (2 x buckets at start + N) x 251 bytes."},
        {.name = "forget-after", .type = OPTS_INT, .target = &s->forget_after, .arg = "PERIODS",
         .deflt = "10", .min = 0, .max = 1000000,
         .help = "A node down for PERIODS periods is forgotten: its tables are freed and\n"
                 "it must say hello again (0: never).  A node that keeps to the fallback\n"
                 "lease is forgotten no earlier than the lease's end."},
        {.name = "fallback-lease", .type = OPTS_INT, .target = &s->fallback_lease,
         .arg = "PERIODS", .deflt = "10", .min = 1, .max = 1000000,
         .help = "A node that stops hearing the controller renews its last grant for at\n"
                 "most PERIODS periods (static fallback), then holds its limited buckets\n"
                 "at 0; its grant counts against their limits until PERIODS + 1 periods\n"
                 "after it was marked down, then its share goes to the other nodes."},
        {.name = "reservation-unused-periods", .type = OPTS_INT, .target = &s->unused_periods,
         .arg = "N", .deflt = "10", .min = 1, .max = HISTORY_PERIODS * 1000,
         .help = "A bucket whose reservation went unused (periods judged idle: no demand)\n"
                 "for N periods in a row says so in its status reason and\n"
                 "bqos_bucket_reservation_unused."},
        {.name = "capacity", .type = OPTS_DOUBLE, .target = &s->capacity, .arg = "IOPS",
         .deflt = "50000", .min = 1, .max = 1e12,
         .help = "Capacity profile of a node whose hello gives none (IOs per second); the\n"
                 "estimate then adapts to what the node reports."},
        {.name = "capacity-sd", .type = OPTS_DOUBLE, .target = &s->cap_sd, .arg = "K",
         .deflt = "0", .min = 0, .max = 100,
         .help = "Reservation tokens are placed within each node's conservative capacity:\n"
                 "the mean of its last 8 capacity samples minus K standard deviations\n"
                 "(Haechi's floor; at most the estimate, at least half of it).  Raise it\n"
                 "(e.g. 2) for nodes whose rate varies from interval to interval."},
        {.name = "capacity-cold-margin", .type = OPTS_DOUBLE, .target = &s->cap_cold,
         .arg = "FRACTION", .deflt = "0.2", .min = 0, .max = 1,
         .help = "Until a node has given two capacity samples its conservative capacity\n"
                 "is its estimate (the profile) less this fraction."},
        {.name = "capacity-recent", .type = OPTS_INT, .target = &s->cap_recent, .arg = "N",
         .deflt = "3", .min = 0, .max = 32,
         .help = "A node's conservative capacity is also at most the most it delivered in\n"
                 "its last N measured intervals, so that reservation tokens follow a\n"
                 "node that slowed down within N intervals; on a node where a bucket\n"
                 "with no other server wants reservation tokens, within one interval\n"
                 "(the last busy interval's rate, where it is 15% or more below)\n"
                 "(0: neither cap)."},
        {.name = "conversion-slack", .type = OPTS_DOUBLE, .target = &s->conv_slack,
         .arg = "FRACTION", .deflt = "0.05", .min = -1, .max = 1,
         .help = "Token conversion: reservation a bucket left unused while it had nothing\n"
                 "queued is converted (no longer claimed with priority) beyond this\n"
                 "fraction of its reservation per period; negative: no conversion."},
        CTRL_OPTS_LIMIT_DEPTH(&s->limit_depth),
        {.name = "shares", .type = OPTS_ENUM, .target = &s->shares, .arg = "on|off",
         .deflt = "off", .names = onoff_names,
         .help = "Weighted fair shares of spare capacity (docs/controller.md): each round\n"
                 "divides what reservations leave on every node among the buckets that\n"
                 "want more, by weight across the cluster (weighted max-min over the\n"
                 "bucket-server graph, limits as caps), and sends each node its share\n"
                 "list; off: spare capacity is per-node round robin.  IOs only: with it\n"
                 "on a bucket with a byte rate (reservation_bytes, limit_bytes) is\n"
                 "refused at start, reload and set."},
        {.name = "skip-threshold", .type = OPTS_DOUBLE, .target = &s->skip, .arg = "FRACTION",
         .deflt = "0.1", .min = 0, .max = 1e6,
         .help = "Skip the recomputation and push only heartbeats when no demand rate or\n"
                 "capacity estimate moved by more than this fraction (0: never skip)."},
        {.name = "report-wait", .type = OPTS_DOUBLE, .target = &s->wait, .arg = "FRACTION",
         .deflt = "0.25", .min = 0, .max = 1,
         .help = "How long into an interval to wait for missing reports before computing\n"
                 "with what arrived, as a fraction of the interval."},
        {.name = "approx-top", .type = OPTS_INT, .target = &s->approx, .arg = "M", .deflt = "0",
         .min = 0, .max = 100000000,
         .help = "pShift approximation (paper III-C2): shift only the top M buckets by\n"
                 "tokens and by spare demand; 0 = exact.  Cuts the solve time of large\n"
                 "configurations at a small loss of effective capacity."},
        {.name = "log-level", .type = OPTS_ENUM, .target = &s->level, .arg = "LEVEL",
         .deflt = "info", .names = level_names,
         .help = "error, warn, info or debug (debug logs the time split of every round)."},
        {.name = "log-format", .type = OPTS_ENUM, .target = &s->log_format, .arg = "text|json",
         .deflt = "text", .names = bqos_log_format_names,
         .help = "json: one object a line {\"ts\",\"level\",\"prog\",\"msg\"} (docs/operations.md)."},
        {.name = "etcd", .type = OPTS_STRING, .target = &s->etcd, .arg = "URL[,URL...]",
         .show = "none: this controller runs alone on its bucket file",
         .help = "High availability: etcd v3 client URLs (http://HOST:2379,...).  The\n"
                 "controllers of one --cluster elect a leader through etcd; only the\n"
                 "leader talks to the nodes, stamping its epoch on every message.  The\n"
                 "bucket table lives in etcd (--buckets imports it when etcd has none\n"
                 "and keeps an exported backup); standbys follow it."},
        {.name = "id", .type = OPTS_STRING, .target = &s->id, .arg = "NAME",
         .show = "the host name and --listen",
         .help = "With --etcd: this controller's name, unique in the cluster."},
        {.name = "cluster", .type = OPTS_STRING, .target = &s->cluster, .arg = "NAME",
         .deflt = "default", .help = "With --etcd: the keys' prefix, /bqos/NAME/."},
        {.name = "lease-ttl", .type = OPTS_DURATION, .target = &s->lease_ttl, .arg = "DURATION",
         .deflt = "2s", .min = 1, .max = 60,
         .help = "With --etcd: the leader's lease (etcd may raise it to its own\n"
                 "minimum).  A dead leader is replaced this long after its last renewal\n"
                 "if its heartbeat cannot say so sooner (--takeover-after 0)."},
        {.name = "etcd-timeout", .type = OPTS_DURATION, .target = &s->etcd_timeout,
         .arg = "DURATION", .deflt = "100ms", .min = 0.001, .max = 10,
         .help = "With --etcd: the longest one request to etcd may take: a longer one\n"
                 "counts as failed (a heartbeat as late), and a poll that has taken\n"
                 "this long sends nothing more until the next (the loop waits at most\n"
                 "two timeouts per poll).  No controller leads before its polls have\n"
                 "all been in time for a lease (--lease-ttl).  Keep it well below the\n"
                 "interval."},
        {.name = "takeover-after", .type = OPTS_DOUBLE, .target = &s->takeover,
         .arg = "INTERVALS", .deflt = "1.25", .min = 0, .max = 1000,
         .help = "With --etcd: the leader writes a heartbeat to etcd every quarter interval;\n"
                 "a standby that sees none for this many intervals deposes it (deletes\n"
                 "its key, if still unchanged) and takes over, pushing at once: a killed\n"
                 "leader is replaced 1-1.75 intervals after its death, plus etcd's delays.\n"
                 "The leader stops pushing by its own clock a quarter interval before it\n"
                 "could be deposed, so a leader paused or starved this long is replaced.\n"
                 "0: only when its lease expires (--lease-ttl)."},
        {.name = "shards", .type = OPTS_INT, .target = &s->shards, .arg = "K", .deflt = "0",
         .min = 0, .max = SHARDMAP_MAX,
         .help = "Controller shards (docs/controller.md \"Shards\"): the buckets are\n"
                 "divided among K controllers by a stable hash of their names, and this\n"
                 "one runs only the buckets of shard --shard (the whole table is loaded,\n"
                 "changes to any bucket are taken).  With --etcd each shard elects its\n"
                 "own leader (key /bqos/CLUSTER/shard/I/leader, its own lease and\n"
                 "epoch; standbys per shard).  Every node's capacity is divided evenly:\n"
                 "a shard places tokens within 1/K of each node's estimates.  Periods\n"
                 "start on multiples of --period of the wall clock (NTP-synchronised\n"
                 "hosts), so that every shard's periods are the nodes' one period.  Nodes\n"
                 "connect to every shard (bqos-node --shards).  K changes at run time\n"
                 "(bqos-ctl shards set K'): with --etcd the controller follows the\n"
                 "cluster's K in /bqos/CLUSTER/shards and switches its buckets at the\n"
                 "change's period; --shards is the K it assumes until it has read it\n"
                 "(a new shard's controller: the new K).  0: no shards."},
        {.name = "shard", .type = OPTS_INT, .target = &s->shard, .arg = "I", .deflt = "0",
         .min = 0, .max = SHARDMAP_MAX - 1,
         .help = "With --shards K: the shard this controller runs, 0..K-1."},
        {.name = "root", .type = OPTS_STRING, .target = &s->root, .arg = "ENDPOINT[,ENDPOINT...]",
         .show = "none: every node divided evenly (1/K)",
         .help = "With --shards: the root step's endpoints (the --root-listen of shard\n"
                 "0's controllers).  Shard 0's leader is the root: each shard's leader\n"
                 "sends it its needs per node after every computed round, and the root\n"
                 "divides every node's capacity among the shards by them (reservations\n"
                 "first) at each of its rounds.  A shard holds its slices for 2 periods;\n"
                 "without, 1/K of each node (after a lapsed slice, the smaller of the\n"
                 "two).  With --curve-key\n"
                 "the root must list this controller's key as an `admin` key."},
        {.name = "root-listen", .type = OPTS_STRING, .target = &s->root_listen,
         .arg = "ENDPOINT", .show = "none",
         .help = "With --shards on a controller of shard 0: the root's ZeroMQ endpoint\n"
                 "(ROUTER; CURVE with --curve-key, admin keys only)."},
        {.name = "root-key", .type = OPTS_STRING, .target = &s->root_key, .arg = "FILE",
         .show = "this controller's own public key",
         .help = "With --root and --curve-key: the root's public key (its .pub)."},
        {.name = "curve-key", .type = OPTS_STRING, .target = &s->curve_key, .arg = "FILE",
         .show = "none: no authentication, no encryption",
         .help = "This controller's CURVE secret key (bqos-ctl keygen; mode 0600).  With\n"
                 "--authorized-keys, both endpoints take only CURVE connections of the\n"
                 "keys listed there, encrypted (docs/security.md).  A bare NAME (no '/')\n"
                 "while $CREDENTIALS_DIRECTORY is set is that credential (systemd's\n"
                 "LoadCredential=), as for --authorized-keys."},
        {.name = "authorized-keys", .type = OPTS_STRING, .target = &s->authorized_keys,
         .arg = "FILE", .show = "none",
         .help = "With --curve-key: one 'node NAME KEY', 'admin NAME KEY' or 'reader NAME\n"
                 "KEY' line per peer.  A node key speaks only for its node name; a\n"
                 "reader may only read (status, history, buckets).  Re-read on SIGHUP."},
        {.name = "insecure", .type = OPTS_FLAG, .target = &s->insecure,
         .help = "Allow --listen or --admin on an address other hosts can reach without\n"
                 "CURVE keys (else refused at start): anyone who reaches it can change the\n"
                 "buckets and impersonate nodes.  Warned at start and every period (at most\n"
                 "once a minute)."},
        {.name = "metrics-listen", .type = OPTS_STRING, .target = &s->metrics,
         .arg = "HOST:PORT", .show = "none",
         .help = "Serve Prometheus metrics over HTTP at http://HOST:PORT/metrics\n"
                 "(HOST numeric or a name, [IPv6]:PORT; PORT 0 picks a free one, logged)."},
        {.name = "check", .type = OPTS_FLAG, .target = &s->check,
         .help = "Run every check the start runs, and exit: the options (and --settings),\n"
                 "the bucket file, the rule that a reachable --listen or --admin needs\n"
                 "keys, the --curve-key file (readable, mode 0600, well-formed), the\n"
                 "--authorized-keys file, the --metrics-listen address and the --etcd\n"
                 "URLs.  Every problem is printed with its position (FILE:LINE:COL);\n"
                 "exit 0 if there is none, 1 otherwise.  Nothing is bound or started."},
        OPTS_HELP_ROW(0, &s->help, "Print this help and exit."),
        OPTS_VERSION_ROW(0, &s->version, "Print the version and exit."),
        {.name = "user", .type = OPTS_STRING, .target = &s->user, .arg = "NAME", .show = "none",
         .help = "Started as root: switch to user NAME (or a uid) and its groups once the\n"
                 "sockets are bound, and refuse to run if that fails (nothing needs root)."},
    };
    OPTS_COPY_ROWS(rows, t, NOPTS);
}

static const opts_usage_t usage = {
    .head = "Usage: bqos-controller --buckets FILE [OPTION]...\n"
            "\n"
            "The bqos controller: every redistribution interval it gathers the storage\n"
            "nodes' reports, estimates each bucket's demand on each node and each node's\n"
            "capacity, places reservation tokens with pShift (then limit tokens on the\n"
            "residual), and pushes every node absolute token counts for the rest of the\n"
            "QoS period.  Limits are hard across nodes; buckets without a limit are not\n"
            "throttled.\n"
            "\n"
            "Options:\n",
    .layout = OPTS_LAYOUT_MAN,
    .tail = "\n"
            "Signals:\n"
            "  SIGHUP          re-read the bucket file (kept unchanged if invalid or refused);\n"
            "                  with --etcd only at the leader, which writes it to etcd; and\n"
            "                  the --authorized-keys file\n"
            "  SIGINT, SIGTERM stop; nodes keep their tokens until the period ends, then\n"
            "                  fall back to their local policy; with --etcd the leader\n"
            "                  gives up its lease first, so a standby leads at once\n"
            "\n"
            "Protocol: docs/protocol.md.  Design and status fields: docs/controller.md.\n"
            "Exit status: 0 after a signal, 1 on a start-up error, 2 on bad usage.\n",
};

/* Returns -1 to run, 0 to exit 0 (after --help or --version), 2 on bad
 * usage (as opts_start()). */
static int parse_args(int argc, char **argv, settings_t *s)
{
    *s = (settings_t){0};
    opts_row_t rows[NOPTS];
    option_rows(s, rows);
    const opts_cmd_t cmd = {.prog = "bqos-controller", .rows = rows, .n = NOPTS};
    int rc = opts_start(&cmd, argc, argv, NULL, &usage, NULL);
    if (rc >= 0)
        return rc;
    const char *bad = !s->buckets ? "--buckets FILE is required"
                      : !s->etcd && s->id ? "--id goes with --etcd"
                      : !s->curve_key != !s->authorized_keys
                          ? "--curve-key and --authorized-keys go together"
                      : s->period_s * 1000 / s->intervals < 1 ? "intervals shorter than 1 ms"
                      : s->shards && s->shard >= s->shards ? "--shard I needs I < --shards K"
                      : !s->shards && s->shard ? "--shard goes with --shards"
                      : !s->shards && (s->root || s->root_listen) ? "--root and --root-listen go with --shards"
                      : s->root_listen && s->shard != 0 ? "--root-listen is for shard 0's controllers"
                      : s->root_key && !s->curve_key ? "--root-key goes with --curve-key"
                      : NULL;
    if (!bad)
        return -1;
    opts_fail(&cmd, "%s", bad);
    return 2;
}

/* ---- validation: the same checks at start-up and under --check ----------- */

/* Where problems go: --check prints them on stderr, start-up logs them. */
typedef void (*problem_fn)(const char *text);

static void problem_print(const char *text)
{
    fprintf(stderr, "bqos-controller: %s\n", text);
}

static void problem_log(const char *text)
{
    log_error("%s", text);
}

/* bucketfile_validate()'s report: one problem to the problem_fn. */
static void bucket_problem(void *arg, const jsonloc_err_t *err)
{
    struct { problem_fn say; int n; } *p = arg;
    char buf[700];
    p->say(bucketfile_strerror(err, buf, sizeof buf));
    p->n++;
}

/* Nonzero if --listen or --admin can be reached from another host. */
static int reachable(const settings_t *s)
{
    return !auth_endpoint_local(s->listen) || !auth_endpoint_local(s->admin);
}

/* Every check start-up makes on the settings before it binds anything: the
 * bucket file (each problem with its FILE:LINE:COL, then whether the round's
 * arithmetic holds it under --period), the secure-by-default rule for
 * --listen and --admin, the secret key (readable, mode 0600 or stricter,
 * well-formed), the authorized keys file, the --metrics-listen address and
 * the --etcd URL list.  main()
 * runs it before starting and --check runs it alone, so what --check passes
 * starts.  Each problem goes to say(); returns how many there were. */
static int config_validate(const settings_t *s, problem_fn say)
{
    struct { problem_fn say; int n; } p = {say, 0};
    char buf[1024];
    jsonloc_err_t err;
    if (!(s->etcd && access(s->buckets, F_OK) < 0 && errno == ENOENT)) {
        if (bucketfile_validate(s->buckets, bucket_problem, &p) < 0) {
            say("out of memory");
            p.n++;
        }
        bucketfile_t *bf = NULL;
        ctrl_config_t cc = ctrl_config_default();
        cc.period_s = s->period_s;
        cc.shares = s->shares; /* it refuses byte rates */
        ctrl_t *c = p.n ? NULL : ctrl_new(&cc);
        char why[512] = "";
        if (c && bucketfile_load(s->buckets, &bf, NULL) == 0 &&
            ctrl_check_buckets(c, bf, why, sizeof why) < 0) {
            snprintf(buf, sizeof buf, "%s: %s", s->buckets, why);
            say(buf);
            p.n++;
        }
        bucketfile_destroy(&bf);
        ctrl_destroy(&c);
    }
    if (!s->curve_key && reachable(s) && !s->insecure) {
        snprintf(buf, sizeof buf,
                 "--listen %s / --admin %s can be reached from other hosts, and without "
                 "--curve-key and --authorized-keys anyone there could change the buckets "
                 "and impersonate nodes: give keys (docs/security.md), bind 127.0.0.1, or "
                 "say --insecure", s->listen, s->admin);
        say(buf);
        p.n++;
    }
    if (s->curve_key) {
        curvekey_t key;
        char ebuf[700];
        if (curvekey_load(s->curve_key, 1, &key, &err) < 0) {
            snprintf(buf, sizeof buf, "--curve-key %s", bucketfile_strerror(&err, ebuf, sizeof ebuf));
            say(buf);
            p.n++;
        }
        explicit_bzero(&key, sizeof key);
        authkeys_t *ak = NULL;
        if (authkeys_load(s->authorized_keys, &ak, &err) < 0) {
            snprintf(buf, sizeof buf, "--authorized-keys %s",
                     bucketfile_strerror(&err, ebuf, sizeof ebuf));
            say(buf);
            p.n++;
        }
        authkeys_destroy(&ak);
    }
    char mhost[256];
    unsigned mport;
    if (s->metrics && hostport_split(s->metrics, mhost, sizeof mhost, &mport) < 0) {
        snprintf(buf, sizeof buf, "--metrics-listen %s: expected HOST:PORT or [IPv6]:PORT",
                 s->metrics);
        say(buf);
        p.n++;
    }
    if (s->etcd) {
        etcd_t *e = curl_global_init(CURL_GLOBAL_DEFAULT) == 0 ? etcd_new(s->etcd, s->etcd_timeout)
                                                               : NULL;
        if (!e) {
            snprintf(buf, sizeof buf, "--etcd %s: bad URL list (http://HOST:PORT,...)", s->etcd);
            say(buf);
            p.n++;
        }
        etcd_destroy(&e);
        curl_global_cleanup();
    }
    return p.n;
}

/* --check, after the options (and settings) passed: config_validate().
 * Returns the exit status. */
static int check_config(const settings_t *s)
{
    if (config_validate(s, problem_print) > 0)
        return 1;
    if (s->etcd && access(s->buckets, F_OK) < 0 && errno == ENOENT)
        printf("bqos-controller: %s does not exist: the bucket table will come from etcd\n",
               s->buckets);
    printf("bqos-controller: configuration OK (bucket file %s%s)\n", s->buckets,
           s->curve_key ? ", CURVE keys" : "");
    return 0;
}

/* ---- state --------------------------------------------------------------- */

/* Everything the loop owns; one thread. */
typedef struct {
    const settings_t *set;
    ctrl_t *ctrl;
    void *zctx, *router, *asock;
    int sigfd;
    pclock_t clk;
    nodes_t nodes;
    admin_t admin;
    conf_t *conf;      /* the configuration in force and its changes */
    rounds_t rounds;   /* the round cadence; owns the timing */
    etcd_t *etcd;      /* NULL: alone */
    leader_t ld;       /* with etcd */
    auth_t auth;       /* with --curve-key: the ZAP handler */
    double insecure_warn_next; /* --insecure on a reachable address: next warning */
    char id[300];
    cmetrics_t met;    /* what /metrics shows */
    metricsd_t *md;    /* --metrics-listen; NULL: none */
    int stop;
    int takeover_push;  /* we just became the leader: push at once */
    int slice_nn;       /* --shards: nodes whose slices were set ... */
    uint64_t slice_pos; /* ... at this interval (period x K + interval + 1) */
    uint64_t slice_taken; /* ... with the slices rootx had taken then */
    rootx_t *rx;        /* --root / --root-listen: the root exchange; NULL: none */
    int slices_root;    /* some node's slice is the root's (else 1/K each) */
    uint64_t root_epoch; /* the root epoch of the last slices taken */
    uint64_t rounds_seen; /* computed rounds whose needs went to the root */
    reshard_t rs;       /* --shards: the part ctrl runs through a change of K */
    uint64_t settle_at; /* the period the root last tried to fold a change */
    memtrim_t trim;     /* free heap given back after bursts of frees */
} app_t;

/* ---- shards (--shards K): the slices ------------------------------------- */

/* Nonzero if this controller may act as its shard's leader at `now`. */
static int shard_leads(const app_t *a, double now)
{
    return !a->etcd || leader_may_push(&a->ld, now);
}

/* With shards, every node's capacity is divided among the K shards: this
 * shard computes within its slice of each node's estimate (the L pass)
 * and of its conservative capacity (the R pass), so that the K shards
 * together never promise a node more than its estimates
 * (ctrl_node_set_slice()).  The slice is the root's (--root: rootx, held
 * for its lease) or else 1/K of the node's own estimates (no root, a node
 * the root did not name), and after a lease the smaller of 1/K and the
 * lapsed slice: once every shard's has lapsed their sum is within the
 * node, whatever each had (a shard on a lapsed slice of more than 1/K
 * beside shards on the root's newer ones is what is left open).  Set at each round's start (the
 * estimates of the round before), when the root's slices arrive, and for
 * a node that registers, before any round can compute with it; at its
 * round's start shard 0's leader runs the root step first.  Cost: O(nodes)
 * once an interval, and when the node count changes or slices arrive. */
static void slices_static(app_t *a, double now)
{
    const int k = a->set->shards ? a->rs.k_run : 0, nn = ctrl_nnodes(a->ctrl);
    if (!k)
        return;
    uint64_t pos = a->clk.period * (uint64_t)a->set->intervals + a->clk.interval + 1;
    int due = pclock_due(&a->clk, now);
    rootx_stats_t rs = {0};
    if (a->rx) {
        if (due && a->set->shard == 0 && shard_leads(a, now))
            rootx_step(a->rx, a->etcd ? a->ld.epoch : 1, now);
        rootx_stats(a->rx, &rs);
    }
    if (!due && pos == a->slice_pos && nn == a->slice_nn && rs.slices_taken == a->slice_taken)
        return;
    int from_root = 0;
    for (int n = 0; n < nn; n++) {
        ctrl_node_info_t ni;
        double est, cons;
        if (ctrl_node_info(a->ctrl, n, &ni) < 0)
            continue;
        int got = a->rx ? rootx_slice(a->rx, ni.name, now, &est, &cons) : 0;
        if (got > 0) {
            from_root++;
        } else { /* 1/K, or less: a lapsed slice of less is kept (fail closed) */
            double e = ni.capacity / k, c = ni.conservative / k;
            est = got < 0 && est < e ? est : e;
            cons = got < 0 && cons < c ? cons : c;
        }
        ctrl_node_set_slice(a->ctrl, n, est, cons);
    }
    if (a->rx && rs.root_epoch != a->root_epoch) {
        a->root_epoch = rs.root_epoch;
        log_info("shard %d: slices from the root of epoch %llu", a->set->shard,
                 (unsigned long long)rs.root_epoch);
    }
    if (a->rx && (from_root > 0) != a->slices_root) {
        a->slices_root = from_root > 0;
        if (a->slices_root)
            log_info("shard %d: the root's slices (root epoch %llu) hold %d of %d nodes",
                     a->set->shard, (unsigned long long)rs.root_epoch, from_root, nn);
        else
            log_warn("shard %d: no live slice from the root: every node divided evenly (1/%d, "
                     "or its lapsed slice if smaller)", a->set->shard, k);
    }
    a->slice_nn = nn;
    a->slice_pos = pos;
    a->slice_taken = rs.slices_taken;
}

/* ---- shards: K changing at run time (controller/reshard.h) --------------- */

/* The wall-clock millisecond in the middle of the period the clock is in
 * (with shards, periods start on multiples of --period of the wall clock,
 * so this names the same period at every shard). */
static int64_t period_mid_ms(const app_t *a, double now)
{
    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    double wall = (double)rt.tv_sec + rt.tv_nsec / 1e9;
    return (int64_t)((wall - (now - a->clk.period_start) + a->clk.period_s / 2) * 1e3);
}

/* Learns the cluster's shard configuration (the leader's reads of etcd's
 * shards key) and, when the period the clock is in runs on another map
 * than the part ctrl holds, gives ctrl the new part: called at every
 * period's start before its first round (rounds' period hook), so a
 * bucket that leaves is granted nothing here from the change's period on
 * and one that arrives is computed from its first round; and at every
 * wake-up, for a configuration learnt late or a --shards that differs
 * from the key's K (the key's map wins at once).  A part that cannot be
 * made (out of memory) is tried again at the next call, logged. */
static void reshard_check(app_t *a, double now)
{
    if (!a->set->shards || !a->clk.round_start)
        return;
    if (a->etcd && a->ld.k_agreed)
        a->nodes.sg = &a->rs.g; /* the nodes hear it once it is etcd's */
    if (a->etcd && a->ld.k_agreed && reshard_learn(&a->rs, &a->ld.sg) == 1 && a->rs.g.next_k)
        log_info("shard %d: K changes from %d to %d (generation %llu) at wall-clock ms %lld",
                 a->set->shard, a->rs.g.k, a->rs.g.next_k,
                 (unsigned long long)a->rs.g.next_gen, (long long)a->rs.g.from_ms);
    int64_t mid = period_mid_ms(a, now);
    if (a->etcd && a->set->shard == 0 && a->ld.sg.next_k && a->settle_at != a->clk.period &&
        a->rs.k_run == a->ld.sg.next_k && leader_leads(&a->ld, now)) {
        /* the root folds a change past its period into the key (tried once
         * a period) */
        a->settle_at = a->clk.period;
        int64_t pm = (int64_t)llround(a->clk.period_s * 1e3);
        leader_shards_settle(&a->ld, mid, 2 * pm);
    }
    if (!reshard_due(&a->rs, mid))
        return;
    reshard_t was = a->rs;
    reshard_switch(&a->rs, mid);
    int rc = conf_set_ctrl_buckets(a->conf, conf_table(a->conf));
    if (rc < 0) {
        a->rs = was; /* again at the next call */
        log_error("shard %d: cannot take the part of K = %d: %s", a->set->shard,
                  shardgen_k_at(&a->rs.g, mid), strerror(-rc));
        return;
    }
    if (a->rx && rootx_set_k(a->rx, a->rs.k_run) < 0)
        log_error("shard %d: the root exchange stays on its K (out of memory)", a->set->shard);
    a->slice_pos = 0; /* slices of 1/K anew, before the round computes */
    slices_static(a, now);
    log_info("shard %d: period %llu runs on K = %d (generation %llu): %d buckets here%s",
             a->set->shard, (unsigned long long)a->clk.period, a->rs.k_run,
             (unsigned long long)a->rs.gen_run, ctrl_nbuckets(a->ctrl),
             reshard_idle(&a->rs) ? " (none: this shard is not in the map)" : "");
}

static void on_period(void *arg, double now)
{
    reshard_check(arg, now);
}

/* After a computed round of a leader: its needs to the root. */
static void needs_to_root(app_t *a, double now)
{
    if (!a->rx || a->rounds.tm.nsplits == a->rounds_seen)
        return;
    if (reshard_idle(&a->rs)) { /* not in the map in force (K changing): nothing to need */
        a->rounds_seen = a->rounds.tm.nsplits;
        return;
    }
    a->rounds_seen = a->rounds.tm.nsplits;
    if (!shard_leads(a, now)) { /* a standby: the slices too, for its takeover */
        rootx_send_standby(a->rx);
        return;
    }
    if (a->rounds.tm.last_res.skipped)
        return;
    const int iv = a->set->intervals;
    rootx_send_needs(a->rx, a->ctrl, (double)(iv - (int)a->clk.interval) / iv,
                     a->etcd ? a->ld.epoch : 1);
}

/* ---- rounds (rounds.c) and their hooks ------------------------------------ */

/* nodes_hooks_t: a clock that most registered nodes agree on differs from
 * ours. */
static void on_adopt(void *arg, const pclock_reading_t *r, double now)
{
    app_t *a = arg;
    slices_static(a, now);
    if (a->etcd && !leader_leads(&a->ld, now)) {
        /* A standby keeps following the nodes' clock (the leader's), not
         * only after its start, so that it takes over on the same periods
         * and its accounting is the nodes' all along. */
        a->clk.started = now;
    }
    if (pclock_adopt(&a->clk, r, now))
        rounds_tick(&a->rounds, now);
}

/* nodes_hooks_t: after a registered node's message. */
static void on_tick(void *arg, double now)
{
    slices_static(arg, now);
    rounds_tick(&((app_t *)arg)->rounds, now);
    needs_to_root(arg, now);
}

/* metricsd_ready_fn (/readyz), on the loop thread: alone, ready (the table
 * was loaded at start); with --etcd, once the table from etcd is applied and
 * a leader is known (ourselves or another). */
static int controller_ready(void *arg, char *why, size_t cap)
{
    const app_t *a = arg;
    if (!a->etcd)
        return 1;
    if (a->ld.buckets_rev <= 0) {
        snprintf(why, cap, "no bucket table from etcd yet");
        return 0;
    }
    if (!a->ld.leading && !a->ld.leader_id[0]) {
        snprintf(why, cap, "no leader known");
        return 0;
    }
    return 1;
}

/* ---- high availability (--etcd) ------------------------------------------ */

/* nodes_hooks_t: only a leader whose lease is alive by our clock sends. */
static int may_send(void *arg, double now)
{
    return leader_may_push(&((app_t *)arg)->ld, now);
}

/* leader_hooks_t: the table key changed. */
static int on_table(void *arg, const char *text, size_t len, int64_t rev)
{
    return conf_apply_text(((app_t *)arg)->conf, text, len, rev);
}

/* leader_hooks_t: one bucket of the table changed. */
static int on_change(void *arg, const char *name, const char *json, size_t len,
                     uint64_t version, int64_t rev)
{
    return conf_apply_bucket(((app_t *)arg)->conf, name, json, len, version, rev);
}

/* leader_hooks_t: we lead from now on (epoch > 0), or no longer. */
static void on_role(void *arg, uint64_t epoch)
{
    app_t *a = arg;
    a->nodes.epoch = epoch;
    if (epoch) { /* a standby's "pushes" never left: push everything */
        ctrl_forget_pushed(a->ctrl);
        nodes_hail_unknown(&a->nodes);
        a->takeover_push = 1;
    }
}

/* leader_hooks_t: etcd has no table; offer the bucket file's. */
static char *on_bootstrap(void *arg, size_t *len)
{
    char *t = bucketfile_dumps(conf_table(((app_t *)arg)->conf));
    if (t)
        *len = strlen(t);
    return t;
}

/* Starts the etcd client and the election.  Returns 0 or -1 (logged). */
static int ha_start(app_t *a)
{
    const settings_t *s = a->set;
    if (s->id) {
        snprintf(a->id, sizeof a->id, "%s", s->id);
    } else {
        char host[256] = "";
        gethostname(host, sizeof host - 1);
        snprintf(a->id, sizeof a->id, "%s-%s", host, s->listen);
    }
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0 ||
        !(a->etcd = etcd_new(s->etcd, s->etcd_timeout))) {
        log_error("--etcd %s: bad URL list or libcurl failed", s->etcd);
        return -1;
    }
    /* Polls every quarter interval (10-250 ms); the heartbeat's staleness
     * is at least two polls. */
    double iv = s->period_s / s->intervals;
    double poll = iv / 4 < 0.01 ? 0.01 : iv / 4 > 0.25 ? 0.25 : iv / 4;
    double stale = s->takeover * iv;
    if (stale > 0 && stale < 2 * poll)
        stale = 2 * poll;
    const leader_config_t lc = {
        .cluster = s->cluster,
        .id = a->id,
        .admin = s->admin,
        .listen = s->listen,
        .ttl_s = s->lease_ttl,
        .margin_s = 0.25,
        .poll_s = poll,
        .stale_s = stale,
        /* gray failures (docs/controller.md "A slow etcd"): a poll may
         * take one request's timeout; leading needs etcd in time for a
         * lease */
        .slow_s = s->etcd_timeout,
        .hold_s = s->lease_ttl,
        .shards = s->shards,
        .shard = s->shard,
    };
    leader_store_t st = leader_store_etcd(a->etcd);
    leader_hooks_t h = {.apply = on_table, .role = on_role, .bootstrap = on_bootstrap,
                        .change = on_change, .arg = a};
    if (leader_init(&a->ld, &lc, &st, &h) < 0) {
        log_error("--cluster and --id: 1..100 and 1..200 bytes, no '/' in the cluster name");
        return -1;
    }
    a->admin.ld = &a->ld;
    conf_set_leader(a->conf, &a->ld);
    a->ld.table_version = bucketfile_version(conf_table(a->conf)); /* the newest we know so far */
    a->nodes.hooks.may_send = may_send;
    log_info("high availability: id %s, cluster %s, etcd %s, lease %.0f s, poll %.0f ms, "
             "takeover after %.0f ms without a heartbeat%s; standby until elected",
             a->id, s->cluster, s->etcd, s->lease_ttl, poll * 1e3, stale * 1e3,
             stale > 0 ? "" : " (off: at lease expiry)");
    return 0;
}

/* ---- the root exchange (--root, --root-listen) ---------------------------- */

/* Starts a->rx with this controller's keys `key` (NULL: plain) and the
 * root's (--root-key, else the same).  Returns 0 or -1 (logged). */
static int root_start(app_t *a, const curvekey_t *key)
{
    const settings_t *s = a->set;
    curvekey_t rk;
    jsonloc_err_t err;
    if (key && s->root_key && curvekey_load(s->root_key, 0, &rk, &err) < 0) {
        char buf[700];
        log_error("--root-key %s", bucketfile_strerror(&err, buf, sizeof buf));
        return -1;
    }
    const rootx_config_t rc = {.shards = s->shards, .shard = s->shard, .listen = s->root_listen,
                               .connect = s->root, .own = key,
                               .root = key && s->root_key ? &rk : NULL, .zctx = a->zctx,
                               .period_s = s->period_s, .intervals = s->intervals};
    int e = 0;
    if (!(a->rx = rootx_new(&rc, &e))) {
        log_error("the root exchange (--root %s, --root-listen %s): %s", s->root ? s->root : "-",
                  s->root_listen ? s->root_listen : "-", strerror(-e));
        return -1;
    }
    log_info("root exchange: %s%s%s%s", s->root_listen ? "root candidate on " : "",
             s->root_listen ? s->root_listen : "", s->root_listen && s->root ? ", " : "",
             s->root ? "needs to the root at " : "");
    if (s->root)
        log_info("root endpoints: %s", s->root);
    return 0;
}

/* ---- security (--curve-key, --insecure; docs/security.md) ---------------- */

/* With keys: loads ours and starts the ZAP handler (in a new a->zctx)
 * before any CURVE socket binds.  Without: a reachable endpoint (allowed by
 * config_validate() only with --insecure) is warned about.  Returns 0 or -1
 * (logged). */
static int secure_start(app_t *a, curvekey_t *key)
{
    const settings_t *s = a->set;
    a->insecure_warn_next = -1;
    if (!s->curve_key) {
        a->insecure_warn_next = reachable(s) ? mono_now() : -1;
        return 0;
    }
    jsonloc_err_t err;
    if (curvekey_load(s->curve_key, 1, key, &err) < 0) {
        char buf[700];
        log_error("--curve-key %s", bucketfile_strerror(&err, buf, sizeof buf));
        return -1;
    }
    if (!(a->zctx = zmq_ctx_new()) || auth_start(&a->auth, a->zctx, s->authorized_keys) < 0)
        return -1;
    log_info("CURVE on both endpoints; this controller's public key is %s", key->public_z85);
    return 0;
}

/* --insecure on a reachable endpoint: says so at warn, at most once a
 * period and once a minute. */
static void warn_insecure(app_t *a, double now)
{
    if (a->insecure_warn_next < 0 || now < a->insecure_warn_next)
        return;
    log_warn("running --insecure: %s and %s take any peer, unauthenticated and in clear "
             "(docs/security.md)", a->set->listen, a->set->admin);
    double every = a->set->period_s > 60 ? a->set->period_s : 60;
    a->insecure_warn_next = now + every;
}

/* ---- main ---------------------------------------------------------------- */

static void on_signals(app_t *a)
{
    struct signalfd_siginfo si;
    while (read(a->sigfd, &si, sizeof si) == (ssize_t)sizeof si) {
        if (si.ssi_signo == SIGHUP) {
            char msg[512];
            log_info("SIGHUP: reloading %s", a->set->buckets);
            const char *code = conf_reload(a->conf, msg, sizeof msg);
            int ok = !code || !strcmp(code, "not_leader"); /* a standby: its keys only */
            if (a->auth.zap && auth_reload(&a->auth) < 0)
                ok = 0;
            if (ok)
                a->met.reloads.ok++;
            else
                a->met.reloads.error++;
        } else {
            log_info("signal %u: stopping", si.ssi_signo);
            a->stop = 1;
        }
    }
}

/* The largest frame a node may legally send when its table holds at most
 * the `nb` buckets plus `max_names` names (twice the table at start, so
 * that buckets added later fit): the names frame of an older node's whole
 * table (each NUL-terminated), a report's records, a part, or the JSON
 * header. */
static int64_t node_msg_max(size_t nb, int max_names)
{
    int64_t most_names = 2 * (int64_t)nb + max_names;
    int64_t names = most_names * (PROTO_NAME_MAX + 1);
    int64_t recs = most_names * PROTO_REPORT_REC_SIZE;
    if (names < PROTO_PART_BYTES)
        names = PROTO_PART_BYTES;
    int64_t most = names > recs ? names : recs;
    if (most < PROTO_WHO_MAX) /* a who message's text frame (issue 27) */
        most = PROTO_WHO_MAX;
    return most > PROTO_HEADER_MAX ? most : PROTO_HEADER_MAX;
}

/* Binds a socket of `type` at `ep`, a CURVE server with `key` in ZAP
 * `domain` when key is not NULL; frames beyond `maxmsg` bytes (> 0) drop
 * the connection. */
static void *bind_sock(void *ctx, int type, const char *ep, const curvekey_t *key,
                       const char *domain, int64_t maxmsg)
{
    void *s = zmq_socket(ctx, type);
    if (!s)
        return NULL;
    if (key && curvekey_set_server(s, key, domain) < 0) {
        log_error("cannot make %s a CURVE server: %s", ep, zmq_strerror(zmq_errno()));
        zmq_close(s);
        return NULL;
    }
    int linger = 0, hwm = 10000, one = 1, v6 = hostport_zmq_ipv6(ep);
    zmq_setsockopt(s, ZMQ_IPV6, &v6, sizeof v6);
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(s, ZMQ_SNDHWM, &hwm, sizeof hwm);
    zmq_setsockopt(s, ZMQ_RCVHWM, &hwm, sizeof hwm);
    if (maxmsg > 0)
        zmq_setsockopt(s, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
    if (type == ZMQ_ROUTER) {
        zmq_setsockopt(s, ZMQ_ROUTER_MANDATORY, &one, sizeof one);
        /* A node that reconnects (same identity) replaces the old pipe. */
        zmq_setsockopt(s, ZMQ_ROUTER_HANDOVER, &one, sizeof one);
    }
    if (zmq_bind(s, ep) < 0) {
        log_error("cannot bind %s: %s", ep, zmq_strerror(zmq_errno()));
        zmq_close(s);
        return NULL;
    }
    return s;
}

int main(int argc, char **argv)
{
    settings_t set;
    int pr = parse_args(argc, argv, &set);
    if (pr >= 0)
        return pr;
    if (set.check)
        return check_config(&set);
    bqos_log_init("bqos-controller", (bqos_log_level_t)set.level);
    bqos_log_set_format((bqos_log_format_t)set.log_format);
    if (config_validate(&set, problem_log) > 0)
        return 1;

    /* Every round at 64 nodes x 10,000 buckets moves megabytes through
     * malloc in two threads: ZeroMQ's I/O thread allocates a buffer per
     * report (~45 KB; ~100 KB before protocol v3's compact records) that
     * this thread frees after decoding, and zmq_send allocates a buffer per
     * token message that the I/O thread frees after sending.  With glibc's default trim threshold (128 KiB) the freed top
     * of each heap is handed back to the kernel (brk / MADV_DONTNEED) and
     * page-faulted in again the next round: 150-300 faults and several ms
     * of CPU per round (docs/performance.md, "Controller").  Keep up to
     * 64 MiB of freed memory instead, and take buffers under 32 MiB (full
     * node tables: 800 KB reports) from the heap rather than mmap. */
    mallopt(M_TRIM_THRESHOLD, 64 << 20);
    mallopt(M_MMAP_THRESHOLD, 32 << 20);

    int status = 1;
    app_t a = {.set = &set, .sigfd = -1};
    stopguard_t *guard = NULL; /* SIGTERM answered within 1 s while the loop is busy */
    bucketfile_t *bf = NULL;

    jsonloc_err_t err;
    int rc = bucketfile_load(set.buckets, &bf, &err);
    if (rc == -ENOENT && set.etcd) { /* the table comes from etcd */
        log_info("%s does not exist: the bucket table will come from etcd", set.buckets);
        rc = (bf = bucketfile_new()) ? 0 : -ENOMEM;
    }
    if (rc < 0) {
        char buf[600];
        log_error("%s", bucketfile_strerror(&err, buf, sizeof buf));
        goto out;
    }
    ctrl_config_t cc = ctrl_config_default();
    cc.period_s = set.period_s;
    cc.intervals = set.intervals;
    cc.threads = set.threads;
    cc.down_after = set.down_after;
    cc.max_nodes = set.max_nodes;
    cc.max_names = set.max_names;
    cc.forget_after = set.forget_after;
    cc.fallback_lease = set.fallback_lease;
    cc.skip_rel = set.skip;
    cc.default_capacity = set.capacity;
    cc.cap_sd = set.cap_sd;
    cc.cap_cold = set.cap_cold;
    cc.cap_recent = set.cap_recent;
    cc.conv_slack = set.conv_slack;
    cc.limit_depth = set.limit_depth;
    cc.shares = set.shares;
    cc.approx_top = (size_t)set.approx;
    cc.table_seed = (uint32_t)time(NULL); /* protocol.md: generations rarely repeat */
    if (set.shards) { /* a shard computes as shardset's do (shardset.h) */
        cc.max_path = SHARDSET_MAX_PATH;
        cc.no_queue_lift = 1;
    }
    a.ctrl = ctrl_new(&cc);
    if (!a.ctrl) {
        log_error("out of memory");
        goto out;
    }
    char why[512];
    if (ctrl_check_buckets(a.ctrl, bf, why, sizeof why) < 0) {
        log_error("%s: %s", set.buckets, why);
        goto out;
    }
    if (!set.shards && ctrl_set_buckets(a.ctrl, bf) < 0) { /* shards: below */
        log_error("out of memory");
        goto out;
    }
    conf_log_rules(bf, set.buckets);
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGHUP);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    signal(SIGPIPE, SIG_IGN);
    a.sigfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
    if (a.sigfd < 0) {
        log_error("signalfd: %s", strerror(errno));
        goto out;
    }
    guard = stopguard_start(0.3);
    curvekey_t key = {.secret_z85 = ""};
    /* the table read at start (bf, not yet conf's): the admin's table was
     * read here before it was set, so the bound counted no bucket since
     * 7a67745 (docs/decisions.md, 8 Dec) */
    if (secure_start(&a, &key) == 0 && (a.zctx || (a.zctx = zmq_ctx_new())) &&
        (a.router = bind_sock(a.zctx, ZMQ_ROUTER, set.listen, a.auth.zap ? &key : NULL,
                              AUTH_DOMAIN_NODES, node_msg_max(bucketfile_count(bf), set.max_names))))
        a.asock = bind_sock(a.zctx, ZMQ_ROUTER, set.admin, a.auth.zap ? &key : NULL,
                            AUTH_DOMAIN_ADMIN, ADMIN_REQUEST_MAX);
    if (a.asock && (set.root || set.root_listen) && root_start(&a, a.auth.zap ? &key : NULL) < 0)
        goto out_key;
    explicit_bzero(&key, sizeof key); /* libzmq keeps its own copy */
    if (!a.asock)
        goto out;
    if (a.auth.zap && (auth_monitor(&a.auth, a.zctx, a.router, 0, AUTH_DOMAIN_NODES) < 0 ||
                       auth_monitor(&a.auth, a.zctx, a.asock, 1, AUTH_DOMAIN_ADMIN) < 0))
        goto out;
    rounds_init(&a.rounds, a.ctrl, &a.clk, &a.nodes, &a.met);
    nodes_init(&a.nodes, a.router, a.ctrl, &a.clk, &a.rounds.tm.cur,
               &(nodes_hooks_t){.adopt = on_adopt, .tick = on_tick, .arg = &a});
    a.admin = (admin_t){
        .sock = a.asock,
        .ctrl = a.ctrl,
        .clk = &a.clk,
        .nodes = &a.nodes,
        .tm = &a.rounds.tm,
        .met = &a.met,
        .auth = a.auth.zap ? &a.auth : NULL,
        .shards = set.shards,
        .shard = set.shard,
    };
    a.nodes.auth = a.admin.auth;
    if (set.shards) { /* the flag's K until etcd's key says otherwise */
        shardgen_t g0 = shardgen_steady(set.shards);
        reshard_init(&a.rs, set.shard, &g0);
        a.admin.rs = &a.rs;
        a.nodes.sg = set.etcd ? NULL : &a.rs.g; /* with etcd: once read (reshard_check) */
        a.rounds.period_hook = on_period;
        a.rounds.hook_arg = &a;
    }
    a.conf = conf_new(&(conf_config_t){.path = set.buckets,
                                       .mode = (admission_mode_t)set.admission,
                                       .ctrl = a.ctrl,
                                       .shards = set.shards,
                                       .shard = set.shard,
                                       .rs = a.admin.rs,
                                       .reply = admin_reply,
                                       .arg = &a.admin},
                      bf);
    bf = NULL; /* the conf_t's now */
    if (!a.conf) {
        log_error("out of memory");
        goto out;
    }
    a.admin.conf = a.conf;
    if (set.shards && (rc = conf_set_ctrl_buckets(a.conf, conf_table(a.conf))) < 0) {
        log_error("%s: %s", set.buckets, rc == -ENOTSUP ? "nested buckets (parents) are not "
                  "supported with --shards" : strerror(-rc));
        goto out;
    }
    if (set.etcd && ha_start(&a) < 0)
        goto out;
    if (cmetrics_init(&a.met, a.ctrl, &a.nodes, &a.rounds.tm, &a.clk, set.etcd ? &a.ld : NULL) < 0)
        goto out;
    a.met.unused_periods = (uint64_t)set.unused_periods;
    a.met.auth = &a.auth; /* zeros without CURVE */
    a.met.rx = a.rx;      /* the root's figures (NULL: no shards' exchange) */
    a.admin.reloads = &a.met.reloads;
    int merr = 0;
    if (set.metrics && !(a.md = metricsd_new(set.metrics, cmetrics_render, &a.met, &merr))) {
        log_error("--metrics-listen %s: %s", set.metrics, strerror(-merr));
        goto out;
    }
    if (a.md) {
        metricsd_set_ready(a.md, controller_ready, &a);
        log_info("metrics on http://%s/metrics", metricsd_address(a.md));
    }
    if (privdrop_apply(set.user) < 0) /* every socket bound, every file open */
        goto out;
    log_info("bqos-controller %s: %zu buckets from %s, nodes on %s, admin on %s, period %.3f s "
             "in %d intervals, admission %s",
             BQOS_VERSION, bucketfile_count(conf_table(a.conf)), set.buckets, set.listen, set.admin,
             set.period_s, set.intervals, set.admission == ADMISSION_ENFORCE ? "enforce" : "warn");
    notify_ready();

    double started = mono_now();
    /* Free pages back after the load (the tree of a big file is trimmed
     * by bucketfile_load(); ctrl's and the admin's growth are not), then
     * whenever 32 MiB more came free (memtrim.h); the 64 MiB top that
     * the rounds reuse stays, as mallopt() above keeps it. */
    memtrim_init(&a.trim, 32u << 20, 64u << 20, 1.0, started);
    memtrim_now(&a.trim);
    if (set.shards) { /* every shard's periods are the nodes' one period */
        struct timespec rt;
        clock_gettime(CLOCK_REALTIME, &rt);
        started -= fmod((double)rt.tv_sec + rt.tv_nsec / 1e9, set.period_s);
        log_info("shard %d of %d: periods start on multiples of %.3f s of the wall clock",
                 set.shard, set.shards, set.period_s);
    }
    pclock_init(&a.clk, set.period_s, set.intervals, set.wait, started);
    if (set.shards)
        pclock_set_grid(&a.clk); /* a standby adopts the nodes' numbering, never their phase */
    slices_static(&a, mono_now());
    rounds_tick(&a.rounds, mono_now());
    while (!a.stop) {
        double now = mono_now();
        reshard_check(&a, now);
        slices_static(&a, now);
        rounds_tick(&a.rounds, now);
        needs_to_root(&a, now);
        if (memtrim_tick(&a.trim, now))
            log_debug("gave free heap back to the kernel (%zu MB free in malloc, %.1f ms)",
                      a.trim.last_free >> 20, a.trim.last_ms);
        double next = pclock_next(&a.clk);
        if (a.etcd) {
            leader_note_follows(&a.ld, a.nodes.follows); /* leads above it */
            if (leader_poll(&a.ld, now) == LEADER_EK) {
                /* another K in etcd (logged): fail at the controller, with
                 * a status a supervisor shows, rather than stand by forever
                 * or lead shards the nodes' tables would refuse */
                log_error("--shards %d does not match the cluster's shards key: exiting",
                          set.shards);
                goto out;
            }
            now = mono_now(); /* the poll may have waited for etcd */
            if (a.takeover_push) {
                a.takeover_push = 0;
                slices_static(&a, now);
                rounds_push_now(&a.rounds, now);
            }
            if (leader_next(&a.ld) < next)
                next = leader_next(&a.ld);
        }
        long tmo = (long)ceil((next - now) * 1000);
        if (tmo < 0)
            tmo = 0;
        /* the node and admin sockets, the signals; then, when on, the
         * metrics thread's wake-ups and the CURVE handler's three sockets */
        zmq_pollitem_t items[8 + 1 + ROOTX_ENDPOINTS] = {
            {a.router, 0, ZMQ_POLLIN, 0},
            {a.asock, 0, ZMQ_POLLIN, 0},
            {NULL, a.sigfd, ZMQ_POLLIN, 0},
        };
        int ni = 3, imd = -1, izap = -1, ij = -1;
        if (conf_journal_fd(a.conf) >= 0) { /* parked changes became durable */
            ij = ni;
            items[ni++] = (zmq_pollitem_t){NULL, conf_journal_fd(a.conf), ZMQ_POLLIN, 0};
        }
        if (a.md) {
            imd = ni;
            items[ni++] = (zmq_pollitem_t){NULL, metricsd_fd(a.md), ZMQ_POLLIN, 0};
        }
        int irx = ni, nrx = 0;
        if (a.rx) {
            void *rs[1 + ROOTX_ENDPOINTS];
            nrx = rootx_sockets(a.rx, rs, 1 + ROOTX_ENDPOINTS);
            for (int i = 0; i < nrx; i++)
                items[ni++] = (zmq_pollitem_t){rs[i], 0, ZMQ_POLLIN, 0};
        }
        if (a.auth.zap) {
            izap = ni;
            items[ni++] = (zmq_pollitem_t){a.auth.zap, 0, ZMQ_POLLIN, 0};
            items[ni++] = (zmq_pollitem_t){a.auth.mon[0], 0, ZMQ_POLLIN, 0};
            items[ni++] = (zmq_pollitem_t){a.auth.mon[1], 0, ZMQ_POLLIN, 0};
        }
        int n = zmq_poll(items, ni, tmo);
        if (n < 0) {
            if (zmq_errno() == EINTR)
                continue;
            log_error("poll: %s", zmq_strerror(zmq_errno()));
            goto out;
        }
        if (items[0].revents & ZMQ_POLLIN)
            nodes_drain(&a.nodes);
        if (ij >= 0 && (items[ij].revents & ZMQ_POLLIN))
            conf_journal_done(a.conf);
        if (items[1].revents & ZMQ_POLLIN)
            admin_drain(&a.admin);
        if (items[2].revents & ZMQ_POLLIN)
            on_signals(&a);
        if (imd >= 0 && (items[imd].revents & ZMQ_POLLIN))
            metricsd_serve(a.md);
        for (int i = 0; i < nrx; i++)
            if (items[irx + i].revents & ZMQ_POLLIN) {
                rootx_drain(a.rx, mono_now());
                break;
            }
        if (izap >= 0) {
            if (items[izap].revents & ZMQ_POLLIN)
                auth_drain(&a.auth);
            for (int i = 0; i < 2; i++)
                if (items[izap + 1 + i].revents & ZMQ_POLLIN)
                    auth_drain_monitor(&a.auth, i);
        }
        warn_insecure(&a, now);
    }
    notify_stopping();
    /* Changes waiting for the disk: answered (durable, or "stopping"), and
     * the answered clients given until ADMIN_HANGUP_WAIT to read theirs
     * before the socket closes (SIGTERM within a second: this wait,
     * bounded, then the guard's bound on the rest, which must not start
     * before it, or the guard ends the process with the answers unread). */
    admin_stop(&a.admin, mono_now());
    stopguard_stopping(guard); /* what follows is bounded too */
    status = 0;
    if (0) {
    out_key:
        explicit_bzero(&key, sizeof key);
    }
out:
    if (a.etcd) /* first: the guard may end a slow stop (stopguard_stopping()) */
        leader_resign(&a.ld); /* a standby takes over at its next poll */
    metricsd_destroy(&a.md);
    cmetrics_clear(&a.met);
    if (a.etcd) {
        leader_clear(&a.ld);
        etcd_destroy(&a.etcd);
        curl_global_cleanup();
    }
    admin_close(&a.admin); /* answers changes still waiting: before the socket closes */
    if (a.router)
        zmq_close(a.router);
    if (a.asock) { /* admin_close()'s answers go out (bounded by this and the guard) */
        int linger = 100;
        zmq_setsockopt(a.asock, ZMQ_LINGER, &linger, sizeof linger);
        zmq_close(a.asock);
    }
    if (a.rx) {
        rootx_stats_t rs;
        rootx_stats(a.rx, &rs);
        log_info("root exchange: needs sent %llu, taken %llu; slices sent %llu, taken %llu; root "
                 "steps %llu (%llu failed); messages dropped %llu",
                 (unsigned long long)rs.needs_sent, (unsigned long long)rs.needs_taken,
                 (unsigned long long)rs.slices_sent, (unsigned long long)rs.slices_taken,
                 (unsigned long long)rs.steps, (unsigned long long)rs.step_failed,
                 (unsigned long long)rs.dropped);
    }
    rootx_destroy(&a.rx);
    auth_clear(&a.auth);
    if (a.zctx)
        zmq_ctx_term(a.zctx);
    if (a.sigfd >= 0)
        close(a.sigfd);
    nodes_clear(&a.nodes);
    ctrl_destroy(&a.ctrl);
    conf_destroy(&a.conf); /* after admin_close(): nothing parked is left */
    bucketfile_destroy(&bf);
    stopguard_stop(&guard);
    if (status == 0)
        log_info("stopped"); /* the stop's end, for the operator and it_journal_slow */
    return status;
}
