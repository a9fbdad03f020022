/* ctl.c - bqos-ctl: the operator's command line for a running bqos-controller
 * (status, history, watch, buckets, set, remove, reload, import) over the JSON admin
 * endpoint, and keygen for CURVE key pairs. */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "common/bucketfile.h"
#include "common/curvekey.h"
#include "common/names.h"
#include "common/num.h"
#include "common/opts.h"
#include "common/proto.h"
#include "common/shardmap.h"
#include "common/strmap.h"
#include "common/version.h"
#include "controller/ctl/ctlmerge.h"
#include "controller/ctl/ctlreq.h"
#include "controller/ctl/ctlshards.h"


#define DEFAULT_ENDPOINT "tcp://127.0.0.1:7071"

/* The largest request the controller reads: ADMIN_REQUEST_MAX of
 * controller/daemon/admin.h (a bigger one is dropped unread and would look
 * like a controller that does not answer), so import checks it first. */
#define CTL_REQUEST_MAX 65536

/* Exit statuses (documented in --help): ctlreq's. */
enum {
    EXIT_OK = CTLREQ_OK,
    EXIT_REFUSED = CTLREQ_REFUSED,
    EXIT_USAGE = CTLREQ_USAGE,
    EXIT_UNREACHABLE = CTLREQ_UNREACHABLE
};

/* What the command line sets; read-only once parsed. */
typedef struct {
    const char *endpoint;
    int json_out;
    int64_t timeout;    /* ms */
    int64_t res;        /* -1: not given */
    int64_t limit;      /* with have_limit and !limit_none */
    int64_t weight;     /* -1: not given */
    int64_t periods;    /* history: how many */
    double interval;    /* watch: seconds between tables */
    int have_limit, limit_none;
    int64_t bytes[2];   /* --reservation-bytes, --limit-bytes: -1 not given, 0 none */
    const char *curve_key, *controller_key; /* CURVE: both or neither */
    const char *node, *bucket; /* status --node NAME, --bucket NAME */
    int nodes, dry_run;        /* status --bucket --nodes, import --dry-run */
    int shadow, enforce;       /* set --shadow, --enforce */
    const char *parent;        /* set --parent NAME|none (issue 28); NULL not given */
    const char *sort;          /* status --sort FIELD */
    int64_t offset;            /* status --offset N */
    int help, version;
} ctl_opts_t;

/* OPTS_FUNC for --limit N|none: target is the ctl_opts_t. */
static int parse_limit(const char *arg, void *target)
{
    ctl_opts_t *o = target;
    if (strcmp(arg, "none") == 0) {
        o->limit_none = 1;
        return 0;
    }
    o->limit_none = 0;
    return num_i64_in(arg, 0, BUCKETFILE_MAX_RATE, &o->limit);
}

/* OPTS_FUNC for --reservation-bytes / --limit-bytes BYTES|none (suffixes
 * k, m, g): target is the int64_t, 0 for none. */
static int parse_byte_rate(const char *arg, void *target)
{
    uint64_t v;
    if (strcmp(arg, "none") == 0) {
        *(int64_t *)target = 0;
        return 0;
    }
    if (num_bytes(arg, &v) < 0 || v < 1 || v > (uint64_t)BUCKETFILE_MAX_BYTES)
        return -EINVAL;
    *(int64_t *)target = (int64_t)v;
    return 0;
}

/* What --help prints around the option rows. */
static const opts_usage_t usage = {
    .head = "Usage: bqos-ctl [OPTION]... COMMAND [ARG]...\n"
            "\n"
            "Inspect and change a running bqos-controller through its admin endpoint.\n"
            "\n"
            "Commands:\n"
            "  status                 nodes (up/down, age of their last report, fallbacks\n"
            "                         they reported) and buckets\n"
            "                         (reservation, limit, served this period, demand,\n"
            "                         tokens, and why it waits)\n"
            "  status [--limit N|none] [--sort FIELD] [--offset N] [--bucket GLOB]\n"
            "                         the first 100 bucket rows (--limit), in --sort order,\n"
            "                         those matching GLOB; a summary line counts and sums\n"
            "                         every matching bucket\n"
            "  status --node NAME [--limit N|none] [--offset N] [--bucket GLOB]\n"
            "                         node NAME and each configured bucket its table holds\n"
            "                         on it: served this period, queued, demand, and the\n"
            "                         R and L tokens last pushed to it (the first 100, in\n"
            "                         table order, unless told)\n"
            "  status --bucket NAME [--nodes]\n"
            "                         bucket NAME's status row; --nodes: and one row per\n"
            "                         node whose table holds it (where its tokens and\n"
            "                         service are)\n"
            "  history [BUCKET]       each bucket's outcome (reservation met, missed or\n"
            "                         idle, held at its limit) in the last --periods periods,\n"
            "                         newest first; BUCKET: that bucket only\n"
            "  watch                  the status table again every --interval, like top,\n"
            "                         until interrupted (SIGINT)\n"
            "  buckets                the configured buckets\n"
            "  set NAME [--reservation N] [--limit N|none] [--weight N]\n"
            "           [--reservation-bytes B|none] [--limit-bytes B|none]\n"
            "           [--parent NAME|none]\n"
            "                         add bucket NAME (--reservation required) or change\n"
            "                         the fields given, keeping the others; the controller\n"
            "                         applies it from the next interval and saves its\n"
            "                         bucket file (refused if the file was edited by hand\n"
            "                         and not reloaded since)\n"
            "  remove NAME            remove bucket NAME\n"
            "  reload                 re-read the controller's bucket file (like SIGHUP)\n"
            "  import FILE [--dry-run]\n"
            "                         replace the whole bucket table by bucket file FILE\n"
            "                         (read here, checked before it is sent; at most\n"
            "                         64 KiB as a request): all or nothing, saved as set\n"
            "                         saves; prints what changed.  --dry-run: what would\n"
            "                         change (added, removed, changed: old -> new), and\n"
            "                         whether the controller would refuse it\n"
            "  rule list              the rule list in force (index, rule), then the\n"
            "                         analysis's warnings (rules that can never match)\n"
            "  rule add JSON [AT]     add rule JSON ({\"user\":\"bob\",\"bucket\":\"bob\"}) at\n"
            "                         index AT (default: last); warnings are printed\n"
            "  rule change NAME JSON  replace rule NAME (its \"name\" or its index)\n"
            "  rule move NAME AT      move rule NAME to index AT (first match wins)\n"
            "  rule remove NAME       remove rule NAME; every rule change is saved in the\n"
            "                         bucket file and pushed to the nodes\n"
            "  who BUCKET             the identities active in BUCKET in the last 60 s,\n"
            "                         per node: login user, certificate name or PSK\n"
            "                         identity (none: \"-\"), client address, requests,\n"
            "                         first and last seen; then the requests of\n"
            "                         identities past a node's 16 per bucket (\"other\").\n"
            "                         As the nodes last sent it: a few seconds old\n"
            "  shards                 controller shards: the cluster's K as each shard\n"
            "                         read it from etcd (generation, a change under way:\n"
            "                         its K and the period it starts at) and the map each\n"
            "                         shard runs now, with its number of buckets\n"
            "  shards set K [AHEAD]   change the cluster's K at run time: the change takes\n"
            "                         over at the first period boundary at least AHEAD\n"
            "                         periods away (default 3, at least 2); --endpoint lists\n"
            "                         every shard slot (';'), the new shards' controllers\n"
            "                         started before (docs/controller.md \"Changing K\")\n"
            "  keygen DIR/NAME        write a new CURVE key pair: DIR/NAME.key (secret,\n"
            "                         mode 0600) and DIR/NAME.pub; creates DIR (mode\n"
            "                         0700) if missing; never overwrites a key\n"
            "\n"
            "Options:\n",
    .layout = OPTS_LAYOUT_MAN,
    .tail = "\n"
            "Rates are IOs per second, as in the bucket file; the byte rates (cost-aware\n"
            "tokens) bytes per second, and a bucket with one holds both.  A second table\n"
            "lists the buckets with byte rates.  REASON, why a bucket waits:\n"
            "  held at limit      its tokens for the period reach its limit and it asks\n"
            "                     for more\n"
            "  below reservation  behind its reservation's pace with requests queued\n"
            "  reservation met    on pace (or asks for less than its reservation)\n"
            "  no demand          nothing queued nor expected\n"
            "  best effort        no reservation, not held: spare capacity only\n"
            "DEMAND is the controller's estimate for the rest of the period; R TOKENS and\n"
            "L TOKENS are the reservation and limit tokens placed for it (none: no limit).\n"
            "\n"
            "Exit status:\n"
            "  0  success\n"
            "  1  the controller refused the request (its reason is printed); import\n"
            "     --dry-run: it would refuse the import; status --node/--bucket: no\n"
            "     such node or bucket; keygen: a key file or DIR could not be written\n"
            "  2  bad usage; import: FILE unreadable, invalid (the position is printed)\n"
            "     or too large: nothing was sent\n"
            "  3  the controller is unreachable or did not answer within the timeout,\n"
            "     or its answer was not understood\n"
            "\n"
            "Examples:\n"
            "  bqos-ctl status\n"
            "  bqos-ctl history --periods 5 red\n"
            "  bqos-ctl watch --interval 1s\n"
            "  bqos-ctl set red --reservation 30000 --limit 60000\n"
            "  bqos-ctl set red --limit none\n"
            "  bqos-ctl set red --limit 5000 --shadow # count what 5000/s would hold\n"
            "  bqos-ctl set red --limit-bytes 100m     # and at most 100 MiB/s\n"
            "  bqos-ctl --json buckets >backup.json   # a bucket file: --buckets loads it\n"
            "  bqos-ctl import --dry-run buckets.json # what importing it would change\n"
            "  bqos-ctl import buckets.json\n"
            "  bqos-ctl status --node n1\n"
            "  bqos-ctl status --bucket red --nodes\n"
            "  bqos-ctl who alice\n"
            "  bqos-ctl keygen /etc/bqos/keys/admin\n"
            "\n"
            "The admin protocol is described in docs/protocol.md.\n",
};

#define NOPTS 23

/* Fills rows[NOPTS], the option table, with targets in *o. */
static void option_rows(ctl_opts_t *o, opts_row_t *rows)
{
    const opts_row_t t[] = {
        {.name = "endpoint", .type = OPTS_STRING, .target = &o->endpoint, .arg = "ENDPOINT",
         .show = DEFAULT_ENDPOINT " (or $BQOS_CTL_ENDPOINT if set)",
         .help = "Controller admin endpoint, or a comma-separated list of the\n"
                 "endpoints of controllers that share etcd: status and buckets come\n"
                 "from the leader, set/remove/reload/import go to it (a standby's\n"
                 "not_leader answer names it).  Every endpoint is asked at once:\n"
                 "a dead one costs nothing while another answers.  Controller shards\n"
                 "(bqos-controller --shards K): K such lists separated by ';', shard\n"
                 "0's first (quote it).  A command on one bucket (set, remove, who,\n"
                 "history BUCKET, status --bucket NAME) goes to the bucket's shard;\n"
                 "status, status --node, history and buckets ask every shard: status\n"
                 "and history are merged (one node table with each node's state per\n"
                 "shard, one bucket table with a SHARD column, sorted and paged on the\n"
                 "merge; --json: the merged \"nodes\", \"buckets\", \"summary\" and each\n"
                 "shard's answer in \"shards\"), buckets is one table; status --node\n"
                 "is one view of the node: a row per shard (its state there, or \"not\n"
                 "known\") and its buckets of every shard with a SHARD column, paged\n"
                 "on the merge in shard, then table order (--json: \"node\" with its\n"
                 "row per shard in \"shards\", \"buckets\", \"summary\", \"shards\");\n"
                 "exit 1 only if no shard knows it.  reload and import go to the\n"
                 "first shard, from shard 0, that answers and is in the cluster's map\n"
                 "(the table in etcd is one for all shards: any shard's leader writes\n"
                 "it; reload reads that leader's file); watch takes one shard."},
        {.name = "json", .type = OPTS_FLAG, .target = &o->json_out,
         .help = "Print the controller's JSON reply instead of tables; for buckets,\n"
                 "its bucket list as a bucket file {\"buckets\":[...]}."},
        {.name = "timeout", .type = OPTS_I64, .target = &o->timeout, .arg = "MS", .deflt = "2000",
         .min = 1, .max = 3600000,
         .help = "Give up after MS milliseconds without a connection or an answer."},
        {.name = "reservation", .type = OPTS_I64, .target = &o->res, .arg = "N", .min = 0,
         .max = (double)BUCKETFILE_MAX_RATE,
         .show = "unchanged (required for a new bucket)",
         .help = "set: reserved IOs per second (integer >= {min})."},
        {.name = "limit", .type = OPTS_FUNC, .target = o, .func = parse_limit, .arg = "N|none",
         .given = &o->have_limit, .show = "unchanged (a new bucket has none)",
         .help = "set: at most N IOs per second (>= reservation); none: no limit.\n"
                 "status, watch: at most N bucket rows (default 100; 0: the summary\n"
                 "only; none: every bucket)."},
        {.name = "weight", .type = OPTS_I64, .target = &o->weight, .arg = "N", .min = 1,
         .max = BUCKETFILE_MAX_WEIGHT, .show = "1 for a new bucket, unchanged otherwise",
         .help = "set: weight for weighted round robin (integer >= {min})."},
        {.name = "shadow", .type = OPTS_FLAG, .target = &o->shadow,
         .help = "set: put the bucket's limit in shadow: the nodes count what it\n"
                 "would hold (bqos_bucket_shadow_held_total) and do not hold it."},
        {.name = "enforce", .type = OPTS_FLAG, .target = &o->enforce,
         .help = "set: enforce the bucket's limit again (out of shadow)."},
        {.name = "parent", .type = OPTS_STRING, .target = &o->parent, .arg = "NAME|none",
         .show = "unchanged (a new bucket has none)",
         .help = "set: nest the bucket under bucket NAME (none: no parent): NAME's\n"
                 "limit bounds the sum of its children's service, its reservation is\n"
                 "a floor for it; requests land only in buckets without children."},
        {.name = "periods", .type = OPTS_I64, .target = &o->periods, .arg = "N", .deflt = "10",
         .min = 1, .max = 64,
         .help = "history: the last N periods ({min}..{max}; the controller keeps 64)."},
        {.name = "interval", .type = OPTS_DURATION, .target = &o->interval, .arg = "DURATION",
         .deflt = "2s", .min = 0.1, .max = 3600,
         .help = "watch: time between two tables (\"2\", \"2s\", \"500ms\")."},
        {.name = "curve-key", .type = OPTS_STRING, .target = &o->curve_key, .arg = "FILE",
         .show = "none: plain",
         .help = "Our CURVE secret key (an admin or reader key of the controller's\n"
                 "--authorized-keys; mode 0600).  A key the controller refuses looks\n"
                 "like a controller that does not answer (exit 3)."},
        {.name = "controller-key", .type = OPTS_STRING, .target = &o->controller_key,
         .arg = "FILE", .show = "none",
         .help = "With --curve-key: the controller's public key (its .pub); one key\n"
                 "serves every controller of --endpoint."},
        OPTS_HELP_ROW(0, &o->help, "Print this help and exit."),
        OPTS_VERSION_ROW(0, &o->version, "Print the version and exit."),
        {.name = "reservation-bytes", .type = OPTS_FUNC, .target = &o->bytes[0],
         .func = parse_byte_rate, .arg = "BYTES|none", .show = "unchanged (a new bucket has none)",
         .wants = "1..10^15 bytes (suffix k, m, g) or none",
         .help = "set: reserved bytes per second (cost-aware tokens: its requests\n"
                 "also need byte tokens); none: no byte reservation."},
        {.name = "limit-bytes", .type = OPTS_FUNC, .target = &o->bytes[1],
         .func = parse_byte_rate, .arg = "BYTES|none", .show = "unchanged (a new bucket has none)",
         .wants = "1..10^15 bytes (suffix k, m, g) or none",
         .help = "set: at most BYTES per second (>= --reservation-bytes), on top of\n"
                 "the IO limit: both hold; none: no byte limit."},
        {.name = "node", .type = OPTS_STRING, .target = &o->node, .arg = "NAME",
         .show = "none", .help = "status: node NAME's buckets only (tokens, service, demand)."},
        {.name = "bucket", .type = OPTS_STRING, .target = &o->bucket, .arg = "NAME|GLOB",
         .show = "none",
         .help = "status: bucket NAME only (with --nodes: per node); a GLOB\n"
                 "(with * ? or [...], quoted): the buckets whose names match."},
        {.name = "sort", .type = OPTS_STRING, .target = &o->sort, .arg = "FIELD",
         .show = "table order",
         .help = "status, watch: bucket rows by name (ascending), or by reservation,\n"
                 "limit, demand, served or queued (the largest first)."},
        {.name = "offset", .type = OPTS_I64, .target = &o->offset, .arg = "N", .deflt = "0",
         .min = 0, .max = 1e12,
         .help = "status, watch: skip the first N bucket rows (the next page)."},
        {.name = "nodes", .type = OPTS_FLAG, .target = &o->nodes,
         .help = "status --bucket: one row per node whose table holds the bucket."},
        {.name = "dry-run", .type = OPTS_FLAG, .target = &o->dry_run,
         .help = "import: show what would change, change nothing."},
    };
    OPTS_COPY_ROWS(rows, t, NOPTS);
}

/* Prints the usage error and returns the exit status for it. */
#define usage_error(cmd, ...) (opts_fail(cmd, __VA_ARGS__), EXIT_USAGE)

/* ---- tables ---- */

#define MAXCOLS 14

typedef struct {
    size_t ncols, nrows, cap;
    char **cells; /* nrows x ncols, row 0 = heading */
    int right[MAXCOLS];
} table_t;

static void t_rowv(table_t *t, const char *const *v);

static void t_row(table_t *t, ...)
{
    const char *v[MAXCOLS];
    va_list ap;
    va_start(ap, t);
    for (size_t c = 0; c < t->ncols && c < MAXCOLS; c++)
        v[c] = va_arg(ap, const char *);
    va_end(ap);
    t_rowv(t, v);
}

/* One row from an array of t->ncols cells. */
static void t_rowv(table_t *t, const char *const *v)
{
    if (t->nrows + 1 > t->cap) {
        t->cap = t->cap ? 2 * t->cap : 16;
        char **p = realloc(t->cells, t->cap * t->ncols * sizeof *p);
        if (!p) {
            fputs("bqos-ctl: out of memory\n", stderr);
            exit(EXIT_UNREACHABLE);
        }
        t->cells = p;
    }
    for (size_t c = 0; c < t->ncols; c++)
        t->cells[t->nrows * t->ncols + c] = strdup(v[c] ? v[c] : "-");
    t->nrows++;
}

static void t_free(table_t *t)
{
    for (size_t i = 0; i < t->nrows * t->ncols; i++)
        free(t->cells[i]);
    free(t->cells);
}

static void t_print(table_t *t)
{
    size_t w[MAXCOLS] = {0};
    for (size_t r = 0; r < t->nrows; r++)
        for (size_t c = 0; c < t->ncols; c++) {
            const char *s = t->cells[r * t->ncols + c];
            size_t l = s ? strlen(s) : 0;
            if (l > w[c])
                w[c] = l;
        }
    for (size_t r = 0; r < t->nrows; r++) {
        for (size_t c = 0; c < t->ncols; c++) {
            const char *s = t->cells[r * t->ncols + c];
            int last = c + 1 == t->ncols;
            if (t->right[c])
                printf("%*s%s", (int)w[c], s ? s : "", last ? "" : "  ");
            else
                printf("%-*s%s", last ? 0 : (int)w[c], s ? s : "", last ? "" : "  ");
        }
        putchar('\n');
    }
    t_free(t);
}

/* who BUCKET: one row per node and identity, then "other" per node. */
static void print_who(json_t *r)
{
    json_t *ids = json_object_get(r, "identities"), *other = json_object_get(r, "other"), *e;
    const char *bucket = json_string_value(json_object_get(r, "bucket"));
    size_t i;
    if (json_array_size(ids) == 0 && json_array_size(other) == 0) {
        printf("no identity active in bucket %s in the last %.0f s (%lld nodes sent theirs)\n",
               bucket ? bucket : "?", json_number_value(json_object_get(r, "active_s")),
               (long long)json_integer_value(json_object_get(r, "nodes")));
        return;
    }
    table_t t = {.ncols = 6, .right = {0, 0, 0, 1, 1, 1}};
    t_row(&t, "NODE", "IDENTITY", "ADDRESS", "REQUESTS", "FIRST SEEN", "LAST SEEN");
    json_array_foreach(ids, i, e) {
        char c[3][32];
        const char *id = json_string_value(json_object_get(e, "identity"));
        snprintf(c[0], sizeof c[0], "%lld",
                 (long long)json_integer_value(json_object_get(e, "requests")));
        snprintf(c[1], sizeof c[1], "%.0f s ago",
                 json_number_value(json_object_get(e, "first_seen_s")));
        snprintf(c[2], sizeof c[2], "%.0f s ago",
                 json_number_value(json_object_get(e, "last_seen_s")));
        t_row(&t, json_string_value(json_object_get(e, "node")), id && *id ? id : "-",
              json_string_value(json_object_get(e, "addr")), c[0], c[1], c[2]);
    }
    t_print(&t);
    json_array_foreach(other, i, e)
        printf("other: %lld requests on %s from identities past its 16 per bucket\n",
               (long long)json_integer_value(json_object_get(e, "requests")),
               json_string_value(json_object_get(e, "node")));
}

/* Formats a JSON number/null/bool field for a table cell into buf. */
static const char *cell(json_t *o, const char *key, const char *ifnull, char *buf, size_t n)
{
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v))
        return ifnull;
    if (json_is_integer(v))
        snprintf(buf, n, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
    else if (json_is_real(v))
        snprintf(buf, n, "%.1f", json_real_value(v));
    else if (json_is_boolean(v))
        snprintf(buf, n, "%s", json_is_true(v) ? "yes" : "no");
    else if (json_is_string(v))
        snprintf(buf, n, "%s", json_string_value(v));
    else
        return "?";
    return buf;
}

/* A reason code of the status ("held_at_limit") in words, into buf. */
static const char *reason_cell(json_t *o, char *buf, size_t n)
{
    json_t *u = json_object_get(o, "unused_periods");
    const char *why = json_string_value(json_object_get(o, "reason"));
    if (why && strcmp(why, "reservation_unused") == 0 && json_is_integer(u)) {
        snprintf(buf, n, "reservation unused for %lld periods", (long long)json_integer_value(u));
        return buf;
    }
    const char *r = cell(o, "reason", "-", buf, n);
    for (char *p = buf; r == buf && *p; p++)
        if (*p == '_')
            *p = ' ';
    return r;
}

/* The buckets with byte rates (cost-aware tokens), if any: a second table
 * in bytes per second and, with `with_served`, bytes this period (t_row()
 * takes the first ncols cells). */
static void print_bytes_table(json_t *buckets, int with_served)
{
    table_t t = {.ncols = with_served ? 6 : 3, .right = {0, 1, 1, 1, 1, 1}};
    t_row(&t, "BUCKET", "RES BYTES/S", "LIMIT BYTES/S", "SERVED BYTES", "R BYTES", "L BYTES");
    size_t i;
    json_t *b;
    json_array_foreach(buckets, i, b) {
        char c[6][32];
        if (json_object_get(b, "reservation_bytes") || json_object_get(b, "limit_bytes"))
            t_row(&t, cell(b, "name", "?", c[0], 32), cell(b, "reservation_bytes", "-", c[1], 32),
                  cell(b, "limit_bytes", "none", c[2], 32), cell(b, "served_bytes", "-", c[3], 32),
                  cell(b, "r_bytes", "-", c[4], 32), cell(b, "l_bytes", "none", c[5], 32));
    }
    if (t.nrows < 2) { /* the heading alone */
        t_free(&t);
        return;
    }
    putchar('\n');
    t_print(&t);
}

/* The LIMIT cell: the limit, with " SHADOW" when it is counted, not
 * enforced (issue 28). */
static const char *limit_cell(json_t *o, char *buf, size_t n)
{
    const char *l = cell(o, "limit", "none", buf, n);
    if (json_is_true(json_object_get(o, "shadow")) && l == buf) {
        size_t len = strlen(buf);
        snprintf(buf + len, n - len, " SHADOW");
    }
    return l;
}

/* Nested buckets (issue 28): the rows of `buckets` in tree order, each
 * parent followed depth-first by its children (in the order listed), a
 * bucket whose parent is not among the rows standing as a root; into
 * order[] and depth[] (one each per row).  Without parents, or out of
 * memory: the listed order, depth 0. */
static void tree_rows(json_t *buckets, size_t *order, int *depth)
{
    size_t n = json_array_size(buckets);
    for (size_t i = 0; i < n; i++) {
        order[i] = i;
        depth[i] = 0;
    }
    size_t *kid = malloc((n ? n : 1) * sizeof *kid), *next = malloc((n ? n : 1) * sizeof *next);
    size_t *last = malloc((n ? n : 1) * sizeof *last), *stack = malloc((n ? n : 1) * sizeof *stack);
    int *par = malloc((n ? n : 1) * sizeof *par);
    strmap_t *ix = strmap_new();
    int any = 0;
    if (!kid || !next || !last || !stack || !par || !ix)
        goto out;
    for (size_t i = 0; i < n; i++) {
        const char *nm = json_string_value(json_object_get(json_array_get(buckets, i), "name"));
        if (nm && strmap_insert(ix, nm, strlen(nm), (int)i) < 0)
            goto out;
        kid[i] = next[i] = last[i] = SIZE_MAX;
    }
    for (size_t i = 0; i < n; i++) {
        const char *p = json_string_value(json_object_get(json_array_get(buckets, i), "parent"));
        par[i] = -1;
        if (p && strmap_find(ix, p, strlen(p), &par[i]) == 0 && par[i] != (int)i) {
            size_t q = (size_t)par[i];
            if (kid[q] == SIZE_MAX)
                kid[q] = i;
            else
                next[last[q]] = i;
            last[q] = i;
            any = 1;
        } else {
            par[i] = -1;
        }
    }
    if (!any)
        goto out;
    size_t k = 0;
    for (size_t r = 0; r < n; r++) {
        if (par[r] >= 0)
            continue;
        size_t sp = 0;
        stack[sp++] = r;
        depth[r] = 0;
        while (sp > 0 && k < n) {
            size_t i = stack[--sp];
            order[k++] = i;
            /* Children in listed order: push them reversed. */
            size_t c0 = sp;
            for (size_t c = kid[i]; c != SIZE_MAX && sp < n; c = next[c]) {
                depth[c] = depth[i] + 1;
                stack[sp++] = c;
            }
            for (size_t a = c0, b = sp; b > a + 1; a++, b--) {
                size_t x = stack[a];
                stack[a] = stack[b - 1];
                stack[b - 1] = x;
            }
        }
    }
    if (k != n) /* a cycle among the rows: never from the controller */
        for (size_t i = 0; i < n; i++) {
            order[i] = i;
            depth[i] = 0;
        }
out:
    free(kid);
    free(next);
    free(last);
    free(stack);
    free(par);
    strmap_destroy(&ix);
}

/* The BUCKET cell: the name, indented two spaces per level under its
 * parents; a template-made bucket (issue 27) followed by the rule that made
 * it, " <per-user>" (its name) or " <rule 3>". */
static const char *name_cell(json_t *o, int depth, char *buf, size_t n)
{
    const char *nm = json_string_value(json_object_get(o, "name"));
    int ind = depth > 8 ? 16 : 2 * depth;
    int len = snprintf(buf, n, "%*s%s", ind, "", nm ? nm : "?");
    json_t *rule = json_object_get(o, "template_rule");
    const char *rn = json_string_value(json_object_get(o, "template_rule_name"));
    if (json_is_integer(rule) && len >= 0 && (size_t)len < n) {
        if (rn)
            snprintf(buf + len, n - (size_t)len, " <%s>", rn);
        else
            snprintf(buf + len, n - (size_t)len, " <rule %lld>", (long long)json_integer_value(rule));
    }
    return buf;
}

/* The buckets table; `tree`: in tree order (tree_rows()), else as listed
 * (a sorted status keeps its order, children still indented). */
static void print_buckets_table(json_t *buckets, int with_served, int tree)
{
    size_t nb = json_array_size(buckets);
    size_t *order = malloc((nb ? nb : 1) * sizeof *order);
    int *depth = malloc((nb ? nb : 1) * sizeof *depth);
    if (!order || !depth) {
        free(order);
        free(depth);
        fprintf(stderr, "bqos-ctl: out of memory\n");
        return;
    }
    tree_rows(buckets, order, depth);
    if (!tree) { /* the depths stay */
        for (size_t i = 0; i < nb; i++)
            order[i] = i;
    }
    /* rows merged from controller shards carry their "shard": a column */
    int sh = json_is_integer(json_object_get(json_array_get(buckets, 0), "shard"));
    table_t t = {.ncols = (with_served ? 13 : 4) + (size_t)sh};
    for (size_t c = 1; c < t.ncols; c++)
        t.right[c] = c < t.ncols - (with_served ? 1 : 0);
    static const char *const head[14] = {"BUCKET", "SHARD", "RESERVATION", "LIMIT", "WEIGHT",
                                         "SERVED", "R", "L", "O", "QUEUED", "DEMAND", "R TOKENS",
                                         "L TOKENS", "REASON"};
    t_rowv(&t, sh ? head : (const char *const[]){head[0], head[2], head[3], head[4], head[5],
                                                  head[6], head[7], head[8], head[9], head[10],
                                                  head[11], head[12], head[13]});
    for (size_t i = 0; i < nb; i++) {
        json_t *b = json_array_get(buckets, order[i]);
        char c[14][48];
        const char *v[14];
        size_t k = 0;
        v[k++] = name_cell(b, depth[order[i]], c[0], 48);
        if (sh)
            v[k++] = cell(b, "shard", "?", c[13], 48);
        v[k++] = cell(b, "reservation", "-", c[1], 48);
        v[k++] = limit_cell(b, c[2], 48);
        v[k++] = cell(b, "weight", "1", c[3], 48);
        if (with_served) {
            v[k++] = cell(b, "served", "-", c[4], 48);
            v[k++] = cell(b, "served_r", "-", c[5], 48);
            v[k++] = cell(b, "served_l", "-", c[6], 48);
            v[k++] = cell(b, "served_o", "-", c[7], 48);
            v[k++] = cell(b, "queued", "-", c[8], 48);
            v[k++] = cell(b, "demand", "-", c[9], 48);
            v[k++] = cell(b, "r_tokens", "-", c[10], 48);
            v[k++] = cell(b, "l_tokens", "none", c[11], 48);
            v[k++] = reason_cell(b, c[12], 48);
        }
        t_rowv(&t, v);
    }
    free(order);
    free(depth);
    if (json_array_size(buckets) == 0) {
        printf("(no buckets)\n");
        t_free(&t);
    } else {
        t_print(&t);
    }
    print_bytes_table(buckets, with_served);
}

/* The status's "default" object: the limit that holds traffic of buckets
 * the file lacks (or that there is none), and that traffic by bucket. */
static void print_default(json_t *d)
{
    if (!json_is_object(d))
        return;
    char x[4][32];
    if (json_is_true(json_object_get(d, "configured")))
        printf("\ndefault: reservation %s, limit %s: holds the traffic of every bucket "
               "not in the file\n",
               cell(d, "reservation", "?", x[0], 32), cell(d, "limit", "none", x[1], 32));
    else
        printf("\ndefault: unlimited (no `default` bucket in the file): the traffic of buckets "
               "not in the file is not limited\n");
    json_t *u = json_object_get(d, "unconfigured");
    json_t *o = json_object_get(d, "other");
    if (json_array_size(u) == 0 && !json_is_object(o))
        return;
    table_t t = {.ncols = 4, .right = {0, 1, 1, 1}};
    t_row(&t, "  NOT CONFIGURED", "ARRIVALS", "SERVED", "NODES");
    size_t i;
    json_t *e;
    json_array_foreach(u, i, e) {
        const char *name = json_string_value(json_object_get(e, "name"));
        char nm[300];
        snprintf(nm, sizeof nm, "  %s", name ? name : "?");
        t_row(&t, nm, cell(e, "arrivals", "-", x[0], 32), cell(e, "served", "-", x[1], 32),
              cell(e, "nodes", "-", x[2], 32));
    }
    if (json_is_object(o)) {
        char nm[64];
        snprintf(nm, sizeof nm, "  (other: %s buckets)", cell(o, "buckets", "?", x[3], 32));
        t_row(&t, nm, cell(o, "arrivals", "-", x[0], 32), cell(o, "served", "-", x[1], 32), "-");
    }
    t_print(&t);
}

static void print_clock(json_t *r);

/* The status's "summary": which bucket rows were shown of how many, and
 * the sums over every matching bucket.  Nothing for a controller without
 * it. */
static void print_summary(json_t *sm)
{
    if (!json_is_object(sm))
        return;
    char x[10][32];
    json_int_t shown = json_integer_value(json_object_get(sm, "shown"));
    json_int_t matched = json_integer_value(json_object_get(sm, "matched"));
    json_int_t off = json_integer_value(json_object_get(sm, "offset"));
    const char *glob = json_string_value(json_object_get(sm, "bucket"));
    printf("buckets: %s configured", cell(sm, "buckets", "?", x[0], 32));
    if (glob)
        printf(", %s matching %s", cell(sm, "matched", "?", x[1], 32), glob);
    if (shown == 0 && matched > 0)
        printf(", no rows shown (--limit, --offset)");
    else if (shown < matched)
        printf(", rows %lld-%lld shown (%s order; --limit, --offset, --sort)", (long long)(off + 1),
               (long long)(off + shown), cell(sm, "sort", "table", x[2], 32));
    printf("\n  reservation %s, %s limited; demand %s, served %s, queued %s in %s buckets\n",
           cell(sm, "reservation", "?", x[3], 32), cell(sm, "limited", "?", x[4], 32),
           cell(sm, "demand", "?", x[5], 32), cell(sm, "served", "?", x[6], 32),
           cell(sm, "queued", "?", x[7], 32), cell(sm, "queued_buckets", "?", x[8], 32));
}

static void print_status(json_t *r)
{
    char a[32], b[32], c[32];
    print_clock(r);
    const char *warn = json_string_value(json_object_get(r, "warning"));
    if (warn)
        printf("WARNING (admission): %s\n\n", warn);
    if (json_object_get(r, "id"))
        printf("controller %s: %s, epoch %s (leader %s)\n", cell(r, "id", "?", a, 32),
               json_is_true(json_object_get(r, "leader")) ? "leader" : "standby",
               cell(r, "epoch", "?", b, 32), cell(r, "leader_id", "unknown", c, 32));
    json_t *nodes = json_object_get(r, "nodes");
    if (json_array_size(nodes) == 0) {
        printf("(no nodes)\n");
    } else {
        table_t t = {.ncols = 6, .right = {0, 0, 1, 1, 1, 1}};
        t_row(&t, "NODE", "STATE", "LAST REPORT", "CAPACITY", "BUCKETS", "FALLBACKS");
        size_t i;
        json_t *n;
        json_array_foreach(nodes, i, n) {
            char x[6][48];
            const char *age = cell(n, "last_report_ms", "never", x[2], 40);
            if (age == x[2])
                strcat(x[2], " ms");
            const char *state = cell(n, "state", "?", x[1], 32);
            if (json_is_true(json_object_get(n, "fallback")) && state == x[1])
                strcat(x[1], ", fallback"); /* the node's own report */
            t_row(&t, cell(n, "name", "?", x[0], 48), state, age,
                  cell(n, "capacity", "-", x[3], 48), cell(n, "buckets", "-", x[4], 48),
                  cell(n, "fallbacks", "-", x[5], 48));
        }
        t_print(&t);
    }
    putchar('\n');
    json_t *sm = json_object_get(r, "summary");
    if (!json_is_object(sm) || json_array_size(json_object_get(r, "buckets")) > 0 ||
        json_integer_value(json_object_get(sm, "matched")) == 0)
        print_buckets_table(json_object_get(r, "buckets"), 1,
                            strcmp(cell(sm, "sort", "table", a, sizeof a), "table") == 0);
    print_summary(sm);
    print_default(json_object_get(r, "default"));

    /* Optional extras (docs/protocol.md): round and message counters, and
     * where the controller's time goes. */
    json_t *st = json_object_get(r, "stats");
    if (json_is_object(st)) {
        char x[6][32];
        printf("\nrounds %s (computed %s, skipped %s); node messages ok %s, rejected %s",
               cell(st, "rounds", "?", x[0], 32), cell(st, "computed", "?", x[1], 32),
               cell(st, "skipped", "?", x[2], 32), cell(st, "messages_ok", "?", x[3], 32),
               cell(st, "messages_rejected", "?", x[4], 32));
        json_t *rej = json_object_get(st, "rejected");
        const char *k;
        json_t *v;
        int first = 1;
        json_object_foreach(rej, k, v) {
            printf("%s%s %s", first ? " (" : ", ", k, cell(rej, k, "?", x[5], 32));
            first = 0;
        }
        printf("%s\n", first ? "" : ")");
        json_t *dup = json_object_get(st, "duplicate_names");
        if (json_integer_value(dup) > 0)
            printf("hellos refused for a duplicate node name: %s\n",
                   cell(st, "duplicate_names", "?", x[5], 32));
    }
    json_t *au = json_object_get(r, "auth"), *arf = json_object_get(au, "refused");
    if (json_is_object(arf)) { /* CURVE (docs/security.md) */
        const char *k;
        json_t *v;
        printf("CURVE: %" JSON_INTEGER_FORMAT " keys, %" JSON_INTEGER_FORMAT " connections "
               "accepted; refused:", json_integer_value(json_object_get(au, "keys")),
               json_integer_value(json_object_get(au, "accepted")));
        json_object_foreach(arf, k, v)
            printf(" %s %" JSON_INTEGER_FORMAT, k, json_integer_value(v));
        putchar('\n');
    }
    json_t *tm = json_object_get(json_object_get(r, "timing"), "mean_ms");
    if (json_is_object(tm)) {
        static const char *const parts[] = {"receive", "decode", "pshift", "encode", "send"};
        printf("controller ms per round (mean):");
        for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
            json_t *v = json_object_get(tm, parts[i]);
            if (json_is_number(v))
                printf(" %s %.3f", parts[i], json_number_value(v));
        }
        putchar('\n');
    }
}

/* The history reply: one row per bucket and period, newest first. */
static void print_history(json_t *r)
{
    char a[32], b[32], j[32];
    json_t *buckets = json_object_get(r, "buckets");
    printf("period %s (%s ms); %s periods judged; outcomes of the last periods, newest first\n\n",
           cell(r, "period", "?", a, 32), cell(r, "period_ms", "?", b, 32),
           cell(r, "judged", "0", j, 32));
    /* merged from controller shards: a SHARD column */
    int sh = json_is_integer(json_object_get(json_array_get(buckets, 0), "shard"));
    table_t t = {.ncols = 5 + (size_t)sh, .right = {0, 1, 1, 0, 1, 1}};
    if (!sh)
        t.right[2] = 0;
    const char *const head[] = {"BUCKET", "SHARD", "PERIOD", "OUTCOME", "SERVED", "QUEUED"};
    t_rowv(&t, sh ? head : (const char *const[]){head[0], head[2], head[3], head[4], head[5]});
    size_t i, k;
    json_t *bk, *p;
    json_array_foreach(buckets, i, bk) {
        json_array_foreach(json_object_get(bk, "periods"), k, p) {
            const char *res = json_string_value(json_object_get(p, "reservation"));
            int held = json_is_true(json_object_get(p, "held_at_limit"));
            char out[64], c[5][32];
            snprintf(out, sizeof out, "%s%s%s", res ? "reservation " : "", res ? res : "",
                     held ? (res ? ", held at limit" : "held at limit") : (res ? "" : "-"));
            const char *v[6];
            size_t x = 0;
            v[x++] = cell(bk, "name", "?", c[0], 32);
            if (sh)
                v[x++] = cell(bk, "shard", "?", c[4], 32);
            v[x++] = cell(p, "period", "?", c[1], 32);
            v[x++] = out;
            v[x++] = cell(p, "served", "-", c[2], 32);
            v[x++] = cell(p, "queued", "-", c[3], 32);
            t_rowv(&t, v);
        }
    }
    if (t.nrows == 1) {
        printf("(no period judged yet: the controller judges each period at its end, while it leads)\n");
        t_free(&t);
        return;
    }
    t_print(&t);
}

/* The clock line every status reply starts with. */
static void print_clock(json_t *r)
{
    char a[32], b[32], c[32], d[32], e[32];
    printf("period %s  interval %s/%s  elapsed %s/%s ms\n\n", cell(r, "period", "?", a, 32),
           cell(r, "interval", "?", b, 32), cell(r, "intervals", "?", c, 32),
           cell(r, "elapsed_ms", "?", d, 32), cell(r, "period_ms", "?", e, 32));
}

/* One bucket on one node per row (status_node's buckets, keyed "name";
 * status_bucket's nodes, keyed "node", with their STATE; rows merged from
 * controller shards carry their "shard": a SHARD column): served this
 * period ("-" if the node has not reported it this period), queued,
 * demand, and the tokens last pushed ("-": none yet; L "none": no limit). */
static void print_pairs(json_t *arr, const char *key)
{
    int nodes = strcmp(key, "node") == 0;
    int sh = json_is_integer(json_object_get(json_array_get(arr, 0), "shard"));
    table_t t = {.ncols = (nodes ? 10 : 9) + (size_t)sh};
    for (size_t c = 1; c < t.ncols; c++)
        t.right[c] = !(nodes && c == 1);
    static const char *const head[] = {"SHARD", "SERVED", "R", "L", "O", "QUEUED", "DEMAND",
                                       "R TOKENS", "L TOKENS"};
    const char *h[11];
    size_t k = 0;
    h[k++] = nodes ? "NODE" : "BUCKET";
    if (nodes)
        h[k++] = "STATE";
    for (size_t c = sh ? 0 : 1; c < sizeof head / sizeof head[0]; c++)
        h[k++] = head[c];
    t_rowv(&t, h);
    size_t i;
    json_t *p;
    json_array_foreach(arr, i, p) {
        char c[11][32];
        int rep = json_is_true(json_object_get(p, "reported"));
        const char *v[11];
        k = 0;
        v[k++] = cell(p, key, "?", c[0], 32);
        if (nodes)
            v[k++] = cell(p, "state", "?", c[1], 32);
        if (sh)
            v[k++] = cell(p, "shard", "?", c[10], 32);
        v[k++] = rep ? cell(p, "served", "-", c[2], 32) : "-";
        v[k++] = rep ? cell(p, "served_r", "-", c[3], 32) : "-";
        v[k++] = rep ? cell(p, "served_l", "-", c[4], 32) : "-";
        v[k++] = rep ? cell(p, "served_o", "-", c[5], 32) : "-";
        v[k++] = cell(p, "queued", "-", c[6], 32);
        v[k++] = cell(p, "demand", "-", c[7], 32);
        v[k++] = cell(p, "r_tokens", "-", c[8], 32);
        v[k++] = json_is_null(json_object_get(p, "r_tokens")) ? "-"
                                                               : cell(p, "l_tokens", "none", c[9], 32);
        t_rowv(&t, v);
    }
    t_print(&t);
}

/* A status_node reply's buckets (r: one controller's, or the merge of the
 * shards'): the pairs table and, when not every row is shown or a GLOB
 * chose them, the line that says which; `order` names the rows' order. */
static void print_node_buckets(json_t *r, const char *order)
{
    json_t *bs = json_object_get(r, "buckets"), *sm = json_object_get(r, "summary");
    json_int_t held = json_integer_value(json_object_get(sm, "buckets"));
    putchar('\n');
    if (json_array_size(bs) == 0 && (!json_is_object(sm) || held == 0)) {
        printf("(no configured bucket in its table)\n");
        return;
    }
    if (json_array_size(bs) > 0)
        print_pairs(bs, "name");
    if (!json_is_object(sm)) /* a controller without paging */
        return;
    json_int_t matched = json_integer_value(json_object_get(sm, "matched"));
    json_int_t shown = json_integer_value(json_object_get(sm, "shown"));
    json_int_t off = json_integer_value(json_object_get(sm, "offset"));
    const char *glob = json_string_value(json_object_get(sm, "bucket"));
    if (!glob && shown == matched && held > 0)
        return;
    printf("%s%lld configured bucket%s in its table", json_array_size(bs) ? "\n" : "",
           (long long)held, held == 1 ? "" : "s");
    if (glob)
        printf(", %lld matching %s", (long long)matched, glob);
    if (shown == 0 && matched > 0)
        printf(", no rows shown (--limit, --offset)");
    else if (shown < matched)
        printf(", rows %lld-%lld shown (%s; --limit, --offset)", (long long)(off + 1),
               (long long)(off + shown), order);
    putchar('\n');
}

/* The status_node reply: the node's line, then its buckets. */
static void print_status_node(json_t *r)
{
    print_clock(r);
    json_t *n = json_object_get(r, "node");
    char x[5][48];
    const char *age = cell(n, "last_report_ms", NULL, x[1], 40);
    printf("node %s: %s%s, last report %s%s, capacity %s IOPS, %s bucket names\n",
           cell(n, "name", "?", x[0], 48), cell(n, "state", "?", x[2], 48),
           json_is_true(json_object_get(n, "fallback")) ? " (fallback)" : "",
           age ? age : "never", age ? " ms ago" : "", cell(n, "capacity", "?", x[3], 48),
           cell(n, "buckets", "?", x[4], 48));
    print_node_buckets(r, "table order");
}

/* The status_bucket reply: the bucket's status row and, with `nodes`, its
 * rows per node. */
static void print_status_bucket(json_t *r, int nodes)
{
    print_clock(r);
    json_t *one = json_array();
    json_array_append(one, json_object_get(r, "bucket"));
    print_buckets_table(one, 1, 1);
    json_decref(one);
    if (!nodes)
        return;
    json_t *ns = json_object_get(r, "nodes");
    json_int_t without = json_integer_value(json_object_get(r, "nodes_without"));
    putchar('\n');
    if (json_array_size(ns) == 0)
        printf("(no node's table holds it)\n");
    else
        print_pairs(ns, "node");
    if (without > 0)
        printf("%" JSON_INTEGER_FORMAT " node%s without it in %s table\n", without,
               without == 1 ? "" : "s", without == 1 ? "its" : "their");
}

/* A cell of the import diff: key's value in `now`, as "old -> new" when
 * `was` (NULL: none) has another. */
static const char *diff_cell(json_t *was, json_t *now, const char *key, const char *ifnull,
                             char *buf, size_t n)
{
    char a[32], b[32];
    const char *o = was ? cell(was, key, ifnull, a, sizeof a) : NULL;
    const char *v = cell(now, key, ifnull, b, sizeof b);
    if (o && strcmp(o, v) != 0)
        snprintf(buf, n, "%s -> %s", o, v);
    else
        snprintf(buf, n, "%s", v);
    return buf;
}

/* The import and diff replies: a count line, then one row per added,
 * removed or changed bucket (byte rates only if one of them has any). */
static void print_diff(json_t *r, const char *file, int dry)
{
    json_t *add = json_object_get(r, "added"), *rem = json_object_get(r, "removed"),
           *chg = json_object_get(r, "changed");
    size_t na = json_array_size(add), nr = json_array_size(rem), nc = json_array_size(chg);
    char nb[32], nu[32];
    printf("%s %s%s: %s buckets; ", dry ? "import" : "imported", file, dry ? " (dry run)" : "",
           cell(r, "buckets", "?", nb, 32));
    int rules = json_is_true(json_object_get(r, "rules_changed"));
    if (na + nr + nc == 0) {
        printf(rules ? "the rules change, no bucket does\n"
                     : "nothing to change: the controller's table is this one\n");
        return;
    }
    if (rules)
        printf("the rules change; ");
    printf("%zu added, %zu removed, %zu changed, %s unchanged\n\n", na, nr, nc,
           cell(r, "unchanged", "?", nu, 32));
    int bytes = 0;
    size_t i;
    json_t *e;
    json_t *lists[3] = {add, rem, chg};
    for (int l = 0; l < 3; l++)
        json_array_foreach(lists[l], i, e) {
            json_t *b = l == 2 ? json_object_get(e, "new") : e;
            json_t *o = l == 2 ? json_object_get(e, "old") : NULL;
            bytes |= json_object_get(b, "reservation_bytes") || json_object_get(b, "limit_bytes") ||
                     json_object_get(o, "reservation_bytes") || json_object_get(o, "limit_bytes");
        }
    table_t t = {.ncols = bytes ? 7 : 5};
    t_row(&t, "CHANGE", "BUCKET", "RESERVATION", "LIMIT", "WEIGHT", "RES BYTES/S", "LIMIT BYTES/S");
    static const char *const what[3] = {"added", "removed", "changed"};
    for (int l = 0; l < 3; l++)
        json_array_foreach(lists[l], i, e) {
            json_t *b = l == 2 ? json_object_get(e, "new") : e;
            json_t *o = l == 2 ? json_object_get(e, "old") : NULL;
            char c[6][80];
            t_row(&t, what[l], cell(b, "name", "?", c[0], 80),
                  diff_cell(o, b, "reservation", "-", c[1], 80),
                  diff_cell(o, b, "limit", "none", c[2], 80), diff_cell(o, b, "weight", "1", c[3], 80),
                  diff_cell(o, b, "reservation_bytes", "-", c[4], 80),
                  diff_cell(o, b, "limit_bytes", "none", c[5], 80));
        }
    t_print(&t);
}

/* ---- watch ---- */

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig)
{
    (void)sig;
    interrupted = 1;
}

/* bqos-ctl watch: the status every `interval` seconds until SIGINT; on a
 * terminal each table replaces the last (ANSI clear), otherwise tables
 * follow one another.  An unanswered request is reported and retried.
 * Returns the exit status (0 once interrupted). */
static int watch(const char *endpoint, int timeout_ms, json_t *req, const curvekey_t *keys,
                 double interval, int json_out)
{
    struct sigaction sa = {.sa_handler = on_sigint}; /* no SA_RESTART: the sleep ends */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    int tty = isatty(STDOUT_FILENO);
    while (!interrupted) {
        int code;
        json_t *reply = ctlreq_any(endpoint, timeout_ms, req, &code, keys);
        if (interrupted) {
            json_decref(reply);
            break;
        }
        char when[32];
        time_t now = time(NULL);
        struct tm tm;
        strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", localtime_r(&now, &tm));
        if (tty)
            fputs("\033[H\033[2J", stdout);
        printf("bqos-ctl watch: every %gs, %s%s\n", interval, when, tty ? " (^C to stop)" : "");
        if (reply && code == EXIT_OK && json_out) {
            char *s = json_dumps(reply, JSON_COMPACT);
            if (s)
                puts(s);
            free(s);
        } else if (reply && code == EXIT_OK) {
            print_status(reply);
        }
        if (!tty)
            putchar('\n');
        fflush(stdout);
        json_decref(reply);
        struct timespec ts = {(time_t)interval, (long)((interval - (double)(time_t)interval) * 1e9)};
        while (!interrupted && nanosleep(&ts, &ts) < 0 && errno == EINTR)
            ;
    }
    return EXIT_OK;
}

/* ---- main ---- */

/* Creates directory `dir` and the missing directories above it, each mode
 * 0700 (whatever the umask).  Returns 1 if it created `dir`, 0 if it was
 * there, or -errno with the message printed. */
static int make_dirs(const char *dir)
{
    char path[4096];
    struct stat st;
    if (stat(dir, &st) == 0) {
        if (S_ISDIR(st.st_mode))
            return 0;
        fprintf(stderr, "bqos-ctl: keygen: %s is not a directory\n", dir);
        return -ENOTDIR;
    }
    if ((size_t)snprintf(path, sizeof path, "%s", dir) >= sizeof path) {
        fprintf(stderr, "bqos-ctl: keygen: path too long\n");
        return -ENAMETOOLONG;
    }
    for (char *p = path + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char end = *p;
        *p = '\0';
        if (mkdir(path, 0700) == 0) {
            chmod(path, 0700); /* the umask may have taken bits */
        } else if (errno != EEXIST) {
            int rc = -errno;
            fprintf(stderr, "bqos-ctl: keygen: cannot create directory %s: %s\n", path,
                    strerror(-rc));
            return rc;
        }
        *p = end;
        if (!end)
            break;
    }
    return 1;
}

/* bqos-ctl keygen DIR/NAME: a new CURVE key pair, for a controller, a node
 * or an operator (docs/security.md), DIR created if missing.  Returns the
 * exit status. */
static int keygen(const opts_cmd_t *oc, const char *base)
{
    if (!base)
        return usage_error(oc, "keygen takes one DIR/NAME (writes NAME.key and NAME.pub)");
    const char *slash = strrchr(base, '/');
    if (slash && slash > base) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - base), base);
        int made = make_dirs(dir);
        if (made < 0)
            return EXIT_REFUSED;
        if (made)
            printf("created directory %s (mode 0700)\n", dir);
    }
    jsonloc_err_t err;
    if (curvekey_generate(base, &err) < 0) {
        char b[700];
        fprintf(stderr, "bqos-ctl: keygen %s\n", bucketfile_strerror(&err, b, sizeof b));
        return EXIT_REFUSED;
    }
    curvekey_t k;
    char pub[4200];
    snprintf(pub, sizeof pub, "%s.pub", base);
    if (curvekey_load(pub, 0, &k, &err) == 0)
        printf("%s.key (secret, mode 0600) and %s: public key %s\n", base, pub, k.public_z85);
    return EXIT_OK;
}

/* Reads bucket file `path` whole into *text (caller frees; *len bytes;
 * a file past CTL_REQUEST_MAX bytes is read only that far and then some,
 * *len > CTL_REQUEST_MAX: too large to send) and checks what was read as
 * the controller will (common/bucketfile), so that a bad file is refused
 * here with its position.  Returns 0, or the exit status with the problem
 * printed. */
static int import_read(const char *path, char **text, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *buf = malloc(CTL_REQUEST_MAX + 2);
    size_t n = f && buf ? fread(buf, 1, CTL_REQUEST_MAX + 1, f) : 0;
    int bad = !f || !buf || ferror(f);
    int e = errno;
    if (f)
        fclose(f);
    if (bad) {
        fprintf(stderr, "bqos-ctl: import: cannot read %s: %s; nothing sent\n", path,
                buf ? strerror(e) : "out of memory");
        free(buf);
        return EXIT_USAGE;
    }
    *text = buf;
    *len = n;
    if (n > CTL_REQUEST_MAX)
        return EXIT_OK; /* too large: the request check says so */
    /* bucketfile_parse() says what is wrong and where. */
    char b[700];
    jsonloc_err_t err;
    bucketfile_t *bf = NULL;
    if (bucketfile_parse(buf, n, path, &bf, &err) < 0) {
        fprintf(stderr, "bqos-ctl: import: %s; nothing sent\n", bucketfile_strerror(&err, b, sizeof b));
        free(buf);
        *text = NULL;
        return EXIT_USAGE;
    }
    bucketfile_destroy(&bf);
    return EXIT_OK;
}

/* bqos-ctl rule list | add JSON [AT] | change NAME JSON | move NAME AT |
 * remove NAME (issue 27): the admin "rules" and "rule" requests; prints
 * the list or the change and the analysis's warnings (stderr), or the
 * reply as JSON with --json. */
static int rule_command(const opts_cmd_t *oc, const ctl_opts_t *o, int nargs, char **args)
{
    static const struct {
        const char *op;
        int nargs[2]; /* arguments after the op: at least, at most */
        int name, json, at; /* where each is (0: none) */
    } forms[] = {{"list", {0, 0}, 0, 0, 0},   {"add", {1, 2}, 0, 1, 2},
                 {"change", {2, 2}, 1, 2, 0}, {"move", {2, 2}, 1, 0, 2},
                 {"remove", {1, 1}, 1, 0, 0}};
    if (nargs < 1)
        return usage_error(oc, "rule needs list, add, change, move or remove");
    size_t f = 0;
    while (f < sizeof forms / sizeof *forms && strcmp(forms[f].op, args[0]))
        f++;
    if (f == sizeof forms / sizeof *forms)
        return usage_error(oc, "unknown rule command '%s' (list, add, change, move, remove)",
                           args[0]);
    int n = nargs - 1;
    if (n < forms[f].nargs[0] || n > forms[f].nargs[1])
        return usage_error(oc, "usage: rule list | add JSON [AT] | change NAME JSON | move NAME AT "
                               "| remove NAME");
    json_t *req = json_pack("{s:i, s:s}", "v", PROTO_ADMIN_VERSION, "cmd", f ? "rule" : "rules");
    if (!req) {
        fputs("bqos-ctl: out of memory\n", stderr);
        return EXIT_UNREACHABLE;
    }
    if (f)
        json_object_set_new(req, "op", json_string(forms[f].op));
    if (forms[f].name)
        json_object_set_new(req, "name", json_string(args[forms[f].name]));
    if (forms[f].json && forms[f].json <= n) {
        json_error_t je;
        json_t *r = json_loads(args[forms[f].json], JSON_REJECT_DUPLICATES, &je);
        if (!json_is_object(r)) {
            fprintf(stderr, "bqos-ctl: rule: JSON:%d:%d: %s\n", je.line, je.column,
                    r ? "a rule is an object {...}" : je.text);
            json_decref(r);
            json_decref(req);
            return EXIT_USAGE;
        }
        json_object_set_new(req, "rule", r);
    }
    if (forms[f].at && forms[f].at <= n) {
        const char *a = args[forms[f].at];
        if (!*a || strspn(a, "0123456789") != strlen(a) || strlen(a) > 6) {
            json_decref(req);
            return usage_error(oc, "AT must be a rule index (0 is the first), not '%s'", a);
        }
        json_object_set_new(req, "at", json_integer(atol(a)));
    }
    curvekey_t keys[2];
    int curve = 0, code;
    jsonloc_err_t kerr;
    if (curvekey_load_client(o->curve_key, o->controller_key, &keys[0], &keys[1], &curve,
                             &kerr) < 0) {
        char b[700];
        fprintf(stderr, "bqos-ctl: %s\n", bucketfile_strerror(&kerr, b, sizeof b));
        json_decref(req);
        return EXIT_USAGE;
    }
    json_t *reply = ctlreq_any(o->endpoint, (int)o->timeout, req, &code, curve ? keys : NULL);
    explicit_bzero(keys, sizeof keys);
    json_decref(req);
    if (!reply)
        return code;
    if (o->json_out) {
        char *s = json_dumps(reply, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        if (s)
            puts(s);
        free(s);
    } else if (code == EXIT_OK) {
        json_t *rules = json_object_get(reply, "rules");
        if (f == 0) {
            for (size_t i = 0; i < json_array_size(rules); i++) {
                char *s = json_dumps(json_array_get(rules, i), JSON_PRESERVE_ORDER | JSON_COMPACT);
                printf("%3zu  %s\n", i, s ? s : "?");
                free(s);
            }
        } else {
            json_t *ix = json_object_get(reply, "index");
            printf("rule %s%s", forms[f].op[strlen(forms[f].op) - 1] == 'e' ? forms[f].op : forms[f].op,
                   forms[f].op[strlen(forms[f].op) - 1] == 'e' ? "d" : "ed");
            if (json_is_integer(ix))
                printf(" at %lld", (long long)json_integer_value(ix));
            printf(" (%zu rules)\n", json_array_size(rules));
        }
        json_t *w = json_object_get(reply, "warnings");
        for (size_t i = 0; i < json_array_size(w); i++)
            fprintf(stderr, "bqos-ctl: warning: %s\n", json_string_value(json_array_get(w, i)));
    }
    json_decref(reply);
    return code;
}

/* ---- controller shards ---------------------------------------------------- */

/* bqos-ctl shards | shards set K [AHEAD]: each shard's view of the
 * cluster's K and the map it runs, or a change of K begun (admin
 * "shards_set" to shard 0's controllers: its leader writes etcd).
 * Returns the exit status. */
static int shards_command(const opts_cmd_t *oc, const ctl_opts_t *o, int nargs, char **args)
{
    int set = nargs >= 1 && strcmp(args[0], "set") == 0;
    if ((nargs && !set) || (set && (nargs < 2 || nargs > 3)))
        return usage_error(oc, "usage: shards | shards set K [AHEAD]");
    long k = 0, ahead = 3;
    char *end;
    if (set) {
        k = strtol(args[1], &end, 10);
        if (*end || k < 1 || k > SHARDMAP_MAX)
            return usage_error(oc, "K must be 1..%d, not '%s'", SHARDMAP_MAX, args[1]);
        if (nargs == 3 && ((ahead = strtol(args[2], &end, 10)) < 2 || *end || ahead > 1000))
            return usage_error(oc, "AHEAD must be 2..1000 periods, not '%s'", args[2]);
    }
    char *buf = strdup(o->endpoint);
    const char *eps[SHARDMAP_MAX];
    int n = buf ? ctlshards_split(buf, eps, SHARDMAP_MAX) : -1;
    if (n < 0) {
        free(buf);
        return usage_error(oc, "--endpoint %s: shards separated by ';', none empty, at most %d",
                           o->endpoint, SHARDMAP_MAX);
    }
    curvekey_t keys[2];
    int curve = 0, worst = EXIT_OK;
    jsonloc_err_t kerr;
    if (curvekey_load_client(o->curve_key, o->controller_key, &keys[0], &keys[1], &curve,
                             &kerr) < 0) {
        char b[700];
        fprintf(stderr, "bqos-ctl: %s\n", bucketfile_strerror(&kerr, b, sizeof b));
        free(buf);
        return EXIT_USAGE;
    }
    for (int i = 0; i < (set ? 1 : n); i++) {
        json_t *req = json_pack("{s:i, s:s}", "v", PROTO_ADMIN_VERSION, "cmd",
                                set ? "shards_set" : "shards");
        if (req && set) {
            json_object_set_new(req, "k", json_integer(k));
            json_object_set_new(req, "ahead", json_integer(ahead));
        }
        int code;
        json_t *r = req ? ctlreq_any(eps[i], (int)o->timeout, req, &code, curve ? keys : NULL)
                        : NULL;
        json_decref(req);
        if (!r) {
            fprintf(stderr, "bqos-ctl: shard %d of %d: no answer\n", i, n);
            worst = worst == EXIT_OK ? (code ? code : EXIT_UNREACHABLE) : worst;
            continue;
        }
        if (code != EXIT_OK)
            worst = worst == EXIT_OK ? code : worst;
        if (o->json_out) {
            char *t = json_dumps(r, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
            if (t)
                puts(t);
            free(t);
        } else if (code == EXIT_OK) {
            json_t *c = json_object_get(r, "cluster"), *nx = json_object_get(c, "next");
            json_t *run = json_object_get(r, "run");
            printf("%s%d: cluster K %lld generation %lld", set ? "shards set: shard " : "shard ",
                   i, (long long)json_integer_value(json_object_get(c, "k")),
                   (long long)json_integer_value(json_object_get(c, "gen")));
            if (json_is_object(nx)) {
                int64_t from = json_integer_value(json_object_get(nx, "from_ms"));
                printf(", changing to K %lld (generation %lld) in %.1f s (wall-clock ms %lld)",
                       (long long)json_integer_value(json_object_get(nx, "k")),
                       (long long)json_integer_value(json_object_get(nx, "gen")),
                       (double)(from - ctlshards_wall_ms()) / 1e3, (long long)from);
            }
            if (run)
                printf("; runs K %lld generation %lld, %lld buckets",
                       (long long)json_integer_value(json_object_get(run, "k")),
                       (long long)json_integer_value(json_object_get(run, "gen")),
                       (long long)json_integer_value(json_object_get(run, "buckets")));
            if (set && !json_is_true(json_object_get(r, "begun")))
                printf(" (already under way)");
            putchar('\n');
        }
        json_decref(r);
    }
    explicit_bzero(keys, sizeof keys);
    free(buf);
    return worst;
}

/* The merged status for people: a line per shard (its controller, role,
 * epoch, rounds), one node table (a node's state in each shard), one
 * bucket table with a SHARD column, the summary. */
static void print_merged_status(json_t *m)
{
    print_clock(m);
    json_t *shards = json_object_get(m, "shards");
    size_t n = json_array_size(shards), i;
    json_t *r;
    json_array_foreach(shards, i, r) {
        char a[32], b[32], c[32], x[3][32];
        if (!json_is_object(r)) {
            printf("shard %zu of %zu: no answer\n", i, n);
            continue;
        }
        printf("shard %zu of %zu", i, n);
        if (json_object_get(r, "id")) /* a controller under etcd */
            printf(": controller %s: %s, epoch %s (leader %s)", cell(r, "id", "?", a, 32),
                   json_is_true(json_object_get(r, "leader")) ? "leader" : "standby",
                   cell(r, "epoch", "?", b, 32), cell(r, "leader_id", "unknown", c, 32));
        json_t *st = json_object_get(r, "stats");
        if (json_is_object(st))
            printf("; rounds %s (computed %s, skipped %s)", cell(st, "rounds", "?", x[0], 32),
                   cell(st, "computed", "?", x[1], 32), cell(st, "skipped", "?", x[2], 32));
        putchar('\n');
        const char *warn = json_string_value(json_object_get(r, "warning"));
        if (warn)
            printf("  WARNING (admission): %s\n", warn);
    }
    putchar('\n');
    json_t *nodes = json_object_get(m, "nodes");
    if (json_array_size(nodes) == 0) {
        printf("(no nodes)\n");
    } else {
        char head[64];
        snprintf(head, sizeof head, "STATE (SHARD 0%s%zu)", n > 2 ? "..": "/", n - 1);
        table_t t = {.ncols = 6, .right = {0, 0, 1, 1, 1, 1}};
        t_row(&t, "NODE", n > 1 ? head : "STATE", "LAST REPORT", "CAPACITY", "BUCKETS",
              "FALLBACKS");
        json_t *nd;
        json_array_foreach(nodes, i, nd) {
            char x[6][48], states[256] = "";
            size_t k;
            json_t *one;
            json_array_foreach(json_object_get(nd, "shards"), k, one) {
                const char *st = json_is_object(one)
                                     ? json_string_value(json_object_get(one, "state"))
                                     : NULL;
                size_t l = strlen(states);
                snprintf(states + l, sizeof states - l, "%s%s%s", k ? "/" : "",
                         st ? st : "-",
                         json_is_true(json_object_get(one, "fallback")) ? "+fallback" : "");
            }
            const char *age = cell(nd, "last_report_ms", "never", x[2], 40);
            if (age == x[2])
                strcat(x[2], " ms");
            t_row(&t, cell(nd, "name", "?", x[0], 48), states, age,
                  cell(nd, "capacity", "-", x[3], 48), cell(nd, "buckets", "-", x[4], 48),
                  cell(nd, "fallbacks", "-", x[5], 48));
        }
        t_print(&t);
    }
    putchar('\n');
    json_t *sm = json_object_get(m, "summary");
    if (json_array_size(json_object_get(m, "buckets")) > 0 ||
        json_integer_value(json_object_get(sm, "matched")) == 0)
        print_buckets_table(json_object_get(m, "buckets"), 1, 0);
    print_summary(sm);
}

/* The merged status --node for people (ctlmerge.h, status_node): the
 * node's line (the smallest capacity, bucket names summed), one row per
 * shard (its state, report, capacity and bucket names there, or why
 * none), then its buckets of every shard with a SHARD column. */
static void print_merged_node(json_t *m)
{
    print_clock(m);
    json_t *nd = json_object_get(m, "node"), *shards = json_object_get(m, "shards");
    json_t *per = json_object_get(nd, "shards");
    size_t n = json_array_size(shards), i;
    char x[6][48];
    printf("node %s over %zu shards: capacity %s IOPS (the smallest of the shards' estimates), "
           "%s bucket names%s\n\n", cell(nd, "name", "?", x[0], 48), n,
           cell(nd, "capacity", "?", x[1], 48), cell(nd, "buckets", "?", x[2], 48),
           json_is_true(json_object_get(nd, "fallback")) ? " (fallback)" : "");
    table_t t = {.ncols = 5, .right = {1, 0, 1, 1, 1}};
    t_row(&t, "SHARD", "STATE", "LAST REPORT", "CAPACITY", "BUCKETS");
    json_t *ans;
    json_array_foreach(shards, i, ans) {
        json_t *one = json_array_get(per, i);
        char sh[24], why[64];
        snprintf(sh, sizeof sh, "%zu", i);
        if (!json_is_object(one)) {
            const char *ec = json_string_value(json_object_get(ans, "error"));
            snprintf(why, sizeof why, "%s", !json_is_object(ans) ? "no answer"
                                           : ec && strcmp(ec, "not_found") == 0
                                               ? "not known (no hello)"
                                               : ec ? ec : "?");
            t_row(&t, sh, why, "-", "-", "-");
            continue;
        }
        const char *age = cell(one, "last_report_ms", "never", x[3], 40);
        if (age == x[3])
            strcat(x[3], " ms");
        const char *state = cell(one, "state", "?", x[1], 32);
        if (json_is_true(json_object_get(one, "fallback")) && state == x[1])
            strcat(x[1], ", fallback");
        t_row(&t, sh, state, age, cell(one, "capacity", "-", x[4], 48),
              cell(one, "buckets", "-", x[5], 48));
    }
    t_print(&t);
    print_node_buckets(m, "shard, then table order");
}

/* A command for the whole cluster, asked of every shard's leader (`eps`,
 * n lists): buckets as one table (or one bucket file with --json); status,
 * status --node and history merged (ctlmerge.h; --json: the merge, with
 * every shard's answer in "shards").  A status's and a status --node's
 * rows are paged on the merge: each shard is asked for the first offset +
 * limit rows.  A shard that does not answer is said on stderr and makes
 * the exit status its code (the others are still shown); for status
 * --node, a shard that does not know the node (not_found) is shown as such
 * and is an error only when no shard knows it.  Returns the exit status. */
static int each_shard(const char **eps, int n, int timeout_ms, json_t *req, const curvekey_t *keys,
                      int json_out)
{
    int worst = EXIT_OK, known = 0;
    json_t *sreq = NULL, *out = NULL;
    ctlmerge_t *m = ctlmerge_new(req, n);
    if (!m || !(sreq = ctlmerge_shard_request(m))) {
        fputs("bqos-ctl: out of memory\n", stderr);
        worst = EXIT_UNREACHABLE;
        goto out;
    }
    int node = ctlmerge_kind(m) == CTLMERGE_NODE;
    for (int i = 0; i < n; i++) {
        int code = EXIT_OK;
        json_t *r = ctlreq_any(eps[i], timeout_ms, sreq, &code, keys);
        const char *ec = json_string_value(json_object_get(r, "error"));
        if (node && code == EXIT_REFUSED && ec && strcmp(ec, "not_found") == 0)
            code = EXIT_OK; /* the node never said hello to this shard */
        else
            known++;
        if (code != EXIT_OK && worst == EXIT_OK)
            worst = code;
        ctlmerge_add(m, i, r);
        if (!r)
            fprintf(stderr, "bqos-ctl: shard %d of %d (%s) did not answer\n", i, n, eps[i]);
        json_decref(r);
    }
    if (node && known == 0) /* no shard knows it: their refusals are said */
        worst = EXIT_REFUSED;
    out = ctlmerge_view(m);
    if (json_out && out) {
        char *s = json_dumps(out, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        if (s)
            puts(s);
        free(s);
    } else if (!out) {
        fputs("bqos-ctl: out of memory\n", stderr);
    } else if (ctlmerge_kind(m) == CTLMERGE_BUCKETS) {
        print_buckets_table(json_object_get(out, "buckets"), 0, 1);
    } else if (!ctlmerge_answered(m)) {
        ; /* every shard's error is said already: no empty view */
    } else if (ctlmerge_kind(m) == CTLMERGE_HISTORY) {
        print_history(out);
    } else if (node) {
        print_merged_node(out);
    } else {
        print_merged_status(out);
    }
out:
    json_decref(out);
    json_decref(sreq);
    ctlmerge_destroy(&m);
    return worst;
}

int main(int argc, char **argv)
{
    ctl_opts_t o = {.endpoint = getenv("BQOS_CTL_ENDPOINT"), .res = -1, .weight = -1,
                   .bytes = {-1, -1}};
    if (!o.endpoint || !*o.endpoint)
        o.endpoint = DEFAULT_ENDPOINT;
    opts_row_t rows[NOPTS];
    option_rows(&o, rows);
    const opts_cmd_t oc = {.prog = "bqos-ctl", .rows = rows, .n = NOPTS};
    int argi;
    char note[32];
    snprintf(note, sizeof note, " (admin protocol v%d)", PROTO_ADMIN_VERSION);
    int rc = opts_start(&oc, argc, argv, &argi, &usage, note);
    if (rc >= 0)
        return rc;
    const char *endpoint = o.endpoint;
    int64_t res = o.res, limit = o.limit, weight = o.weight;
    int have_limit = o.have_limit, limit_none = o.limit_none;
    if (argi >= argc)
        return usage_error(&oc, "no command given (status, history, watch, buckets, set, remove, "
                                "reload, import, rule, who, shards, keygen)");
    const char *cmd = argv[argi++];
    int nargs = argc - argi;
    if (strcmp(cmd, "keygen") == 0)
        return keygen(&oc, nargs == 1 ? argv[argi] : NULL);
    if (strcmp(cmd, "rule") == 0)
        return rule_command(&oc, &o, nargs, argv + argi);
    if (strcmp(cmd, "shards") == 0)
        return shards_command(&oc, &o, nargs, argv + argi);
    const char *name = nargs > 0 ? argv[argi] : NULL;
    int is_set = strcmp(cmd, "set") == 0;
    int is_who = strcmp(cmd, "who") == 0;
    int wants_name = is_set || strcmp(cmd, "remove") == 0 || is_who;
    int is_history = strcmp(cmd, "history") == 0, is_watch = strcmp(cmd, "watch") == 0;
    int is_import = strcmp(cmd, "import") == 0, is_status = strcmp(cmd, "status") == 0;
    if (!is_set && strcmp(cmd, "remove") && !is_status && !is_who && strcmp(cmd, "buckets") &&
        strcmp(cmd, "reload") && !is_history && !is_watch && !is_import)
        return usage_error(&oc, "unknown command '%s'", cmd);
    if (wants_name && nargs != 1)
        return usage_error(&oc, nargs == 0 ? "%s needs a bucket NAME" : "%s takes one NAME", cmd);
    if (is_history && nargs > 1)
        return usage_error(&oc, "history takes at most one BUCKET");
    if (is_import && nargs != 1)
        return usage_error(&oc, nargs == 0 ? "import needs a bucket FILE"
                                           : "import takes one FILE");
    if (!wants_name && !is_history && !is_import && nargs != 0)
        return usage_error(&oc, "%s takes no arguments (got '%s')", cmd, name);
    if (!is_status && (o.node || o.bucket || o.nodes))
        return usage_error(&oc, "--node, --bucket and --nodes go with 'status' only");
    /* --bucket with a wildcard: the status's rows whose names match */
    const char *glob = o.bucket && strpbrk(o.bucket, "*?[") ? o.bucket : NULL;
    if (glob)
        o.bucket = NULL;
    /* status --node NAME is paged too (its buckets: --limit, --offset,
     * --bucket GLOB), in table order. */
    int paged = (is_status || is_watch) && !o.bucket;
    if (!paged && (o.sort || o.offset > 0))
        return usage_error(&oc, "--sort and --offset go with 'status' and 'watch' (not with "
                                "--bucket NAME)");
    if (o.node && o.sort)
        return usage_error(&oc, "--sort goes with the status's bucket rows, not with --node "
                                "(a node's buckets are in table order)");
    if (glob && o.nodes)
        return usage_error(&oc, "--nodes needs one bucket NAME, not a pattern");
    if (o.node && o.bucket)
        return usage_error(&oc, "status takes --node NAME or --bucket NAME, not both");
    if (o.nodes && !o.bucket)
        return usage_error(&oc, "--nodes needs --bucket NAME (status --node NAME lists a node's "
                                "buckets)");
    if (o.dry_run && !is_import)
        return usage_error(&oc, "--dry-run goes with 'import' only");
    if (o.bucket && names_check_bucket(o.bucket, strlen(o.bucket)))
        return usage_error(&oc, "bad bucket name '%s' (1..%d bytes, no spaces, control characters "
                           "or ':')", o.bucket, BUCKETFILE_NAME_MAX);
    if (o.node && names_check(o.node, strlen(o.node)))
        return usage_error(&oc, "bad node name '%s' (1..%d bytes, no spaces or control characters)",
                           o.node, BUCKETFILE_NAME_MAX);
    int have_bytes = o.bytes[0] >= 0 || o.bytes[1] >= 0;
    if (!is_set && (res >= 0 || (have_limit && !paged) || weight >= 0 || have_bytes || o.shadow ||
                    o.enforce || o.parent))
        return usage_error(&oc, "--reservation, --weight, --shadow, --enforce, --parent and the "
                                "byte rates go with 'set' only (--limit with 'set', or with 'status' "
                                "and 'watch' for the rows shown)");
    if (o.shadow && o.enforce)
        return usage_error(&oc, "--shadow and --enforce exclude each other");
    /* The bucket file's own rules (common/bucketfile), so that what is refused
     * here is what the controller would refuse. */
    if (wants_name && names_check_bucket(name, strlen(name)))
        return usage_error(&oc, "bad bucket name '%s' (1..%d bytes, no spaces, control characters "
                           "or ':')", name, BUCKETFILE_NAME_MAX);
    if (is_set) {
        if (res < 0 && !have_limit && weight < 0 && !have_bytes && !o.shadow && !o.enforce &&
            !o.parent)
            return usage_error(&oc, "set needs --reservation N, --limit N|none, --weight N, "
                                    "--shadow, --enforce, --parent or a byte rate");
        if (o.parent && strcmp(o.parent, "none") &&
            (strlen(o.parent) > BUCKETFILE_PARENT_MAX ||
             names_check_bucket(o.parent, strlen(o.parent))))
            return usage_error(&oc, "bad --parent '%s' (a bucket name of at most %d bytes, or "
                               "none)", o.parent, BUCKETFILE_PARENT_MAX);
        if (o.parent && name && strcmp(o.parent, name) == 0)
            return usage_error(&oc, "--parent %s: a bucket cannot be its own parent", o.parent);
        if (o.bytes[0] > 0 && o.bytes[1] > 0 && o.bytes[1] < o.bytes[0])
            return usage_error(&oc, "--limit-bytes %lld is below --reservation-bytes %lld",
                               (long long)o.bytes[1], (long long)o.bytes[0]);
        if (res >= 0 && have_limit && !limit_none && limit < res)
            return usage_error(&oc, "--limit %lld is below --reservation %lld", (long long)limit,
                               (long long)res);
    }

    json_t *req = json_pack("{s:i, s:s}", "v", PROTO_ADMIN_VERSION, "cmd", cmd);
    if (!req) {
        fputs("bqos-ctl: out of memory\n", stderr);
        return EXIT_UNREACHABLE;
    }
    if (wants_name)
        json_object_set_new(req, "name", json_string(name));
    if (o.node || o.bucket) {
        json_object_set_new(req, "cmd", json_string(o.node ? "status_node" : "status_bucket"));
        json_object_set_new(req, "name", json_string(o.node ? o.node : o.bucket));
    }
    if (is_import) {
        char *text = NULL;
        size_t len = 0;
        rc = import_read(name, &text, &len);
        if (rc != EXIT_OK) {
            json_decref(req);
            return rc;
        }
        const char *base = strrchr(name, '/') ? strrchr(name, '/') + 1 : name;
        json_object_set_new(req, "cmd", json_string(o.dry_run ? "diff" : "import"));
        json_object_set_new(req, "source", json_string(base));
        json_object_set_new(req, "text", json_stringn(text, len));
        free(text);
        char *wire = json_dumps(req, JSON_COMPACT);
        size_t size = wire ? strlen(wire) : 0;
        free(wire);
        if (!json_object_get(req, "text") || size > CTL_REQUEST_MAX) {
            fprintf(stderr,
                    "bqos-ctl: import: %s is too large: as a request it takes %s%zu bytes and the "
                    "controller reads at most %d (a larger one is dropped unread); nothing sent.  "
                    "Change it in parts (set, remove), or put the file in the controller's "
                    "--buckets and reload\n",
                    name, len > CTL_REQUEST_MAX ? "more than " : "", size, CTL_REQUEST_MAX);
            json_decref(req);
            return EXIT_USAGE;
        }
    }
    if (is_watch)
        json_object_set_new(req, "cmd", json_string("status"));
    if (paged) { /* a bounded reply: the first 100 rows unless told */
        json_object_set_new(req, "limit", !have_limit ? json_integer(100)
                                          : limit_none ? json_null() : json_integer(limit));
        if (o.offset > 0)
            json_object_set_new(req, "offset", json_integer(o.offset));
        if (o.sort && !o.node)
            json_object_set_new(req, "sort", json_string(o.sort));
        if (glob)
            json_object_set_new(req, "bucket", json_string(glob));
    }
    if (is_history) {
        json_object_set_new(req, "periods", json_integer(o.periods));
        if (name)
            json_object_set_new(req, "bucket", json_string(name));
    }
    if (is_set) {
        if (res >= 0)
            json_object_set_new(req, "reservation", json_integer(res));
        if (have_limit)
            json_object_set_new(req, "limit", limit_none ? json_null() : json_integer(limit));
        if (weight >= 0)
            json_object_set_new(req, "weight", json_integer(weight));
        if (o.shadow || o.enforce)
            json_object_set_new(req, "shadow", json_boolean(o.shadow));
        if (o.parent)
            json_object_set_new(req, "parent", strcmp(o.parent, "none") ? json_string(o.parent)
                                                                        : json_null());
        static const char *const bkeys[2] = {"reservation_bytes", "limit_bytes"};
        for (int k = 0; k < 2; k++)
            if (o.bytes[k] >= 0)
                json_object_set_new(req, bkeys[k],
                                    o.bytes[k] ? json_integer(o.bytes[k]) : json_null());
    }
    int code;
    curvekey_t keys[2];
    int curve = 0;
    jsonloc_err_t kerr;
    if (curvekey_load_client(o.curve_key, o.controller_key, &keys[0], &keys[1], &curve,
                             &kerr) < 0) {
        char b[700];
        fprintf(stderr, "bqos-ctl: %s\n", bucketfile_strerror(&kerr, b, sizeof b));
        json_decref(req);
        return EXIT_USAGE;
    }
    if (is_watch && strchr(endpoint, ';')) {
        explicit_bzero(keys, sizeof keys);
        json_decref(req);
        return usage_error(&oc, "watch takes one shard's endpoints (no ';')");
    }
    if (is_watch) {
        code = watch(endpoint, (int)o.timeout, req, curve ? keys : NULL, o.interval, o.json_out);
        explicit_bzero(keys, sizeof keys);
        json_decref(req);
        return code;
    }
    /* Controller shards: "A,B;C,D" (a list per shard). */
    char *shardbuf = strchr(endpoint, ';') ? strdup(endpoint) : NULL;
    const char *shard_ep[SHARDMAP_MAX];
    int nshards = shardbuf ? ctlshards_split(shardbuf, shard_ep, SHARDMAP_MAX) : 1;
    if (nshards < 0) {
        free(shardbuf);
        json_decref(req);
        explicit_bzero(keys, sizeof keys);
        return usage_error(&oc, "--endpoint %s: shards separated by ';', none empty, at most %d",
                           endpoint, SHARDMAP_MAX);
    }
    const char *one = wants_name ? name : o.bucket ? o.bucket : is_history ? name : NULL;
    if (shardbuf && (one || strcmp(cmd, "reload") == 0 || is_import)) {
        endpoint = shard_ep[one ? ctlshards_now(shard_ep, nshards, (int)o.timeout,
                                                curve ? keys : NULL, ctlreq_open, one)
                                : ctlshards_table(shard_ep, nshards, (int)o.timeout,
                                                  curve ? keys : NULL, ctlreq_open)];
    } else if (shardbuf) { /* every shard: status, status --node, history, buckets */
        code = each_shard(shard_ep, nshards, (int)o.timeout, req, curve ? keys : NULL,
                          o.json_out);
        explicit_bzero(keys, sizeof keys);
        json_decref(req);
        free(shardbuf);
        return code;
    }
    json_t *reply = ctlreq_any(endpoint, (int)o.timeout, req, &code, curve ? keys : NULL);
    explicit_bzero(keys, sizeof keys);
    json_decref(req);
    free(shardbuf);
    if (!reply)
        return code;
    if (o.json_out) {
        /* buckets: the list alone, a bucket file (common/bucketfile reads
         * its "limit": null as no limit). */
        json_t *out = code == EXIT_OK && strcmp(cmd, "buckets") == 0
                          ? json_pack("{s:O}", "buckets", json_object_get(reply, "buckets"))
                          : json_incref(reply);
        char *s = out ? json_dumps(out, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
        json_decref(out);
        if (s) {
            puts(s);
            free(s);
        }
    } else if (code == EXIT_OK) {
        const char *warn = json_string_value(json_object_get(reply, "warning"));
        if (warn && strcmp(cmd, "status") != 0) /* the status prints its own */
            fprintf(stderr, "bqos-ctl: warning: %s\n", warn);
        if (o.node) {
            print_status_node(reply);
        } else if (o.bucket) {
            print_status_bucket(reply, o.nodes);
        } else if (is_status) {
            print_status(reply);
        } else if (is_import) {
            print_diff(reply, name, o.dry_run);
        } else if (is_history) {
            print_history(reply);
        } else if (is_who) {
            print_who(reply);
        } else if (strcmp(cmd, "buckets") == 0) {
            print_buckets_table(json_object_get(reply, "buckets"), 0, 1);
        } else if (is_set) {
            printf("bucket %s %s\n", name,
                   json_is_true(json_object_get(reply, "created")) ? "created" : "changed");
        } else if (strcmp(cmd, "remove") == 0) {
            printf("bucket %s removed\n", name);
        } else {
            char b[32];
            printf("reloaded: %s buckets\n", cell(reply, "buckets", "?", b, sizeof b));
        }
    }
    /* A dry run the controller would refuse: the diff, then why, and 1. */
    json_t *refusal = json_object_get(reply, "refusal");
    if (code == EXIT_OK && is_import && json_is_object(refusal)) {
        const char *ec = json_string_value(json_object_get(refusal, "error"));
        const char *m = json_string_value(json_object_get(refusal, "message"));
        fprintf(stderr, "bqos-ctl: the controller would refuse this import: %s: %s\n",
                ec ? ec : "error", m ? m : "");
        code = EXIT_REFUSED;
    }
    json_decref(reply);
    return code;
}
