/* ctrl.h - the controller's control-loop state: nodes and their bucket tables, period/interval accounting, estimates, the two pShift passes, tokens per node.
 *
 * No sockets and no clocks: bqos-controller's main loop (and a benchmark or
 * the simulator) feeds it decoded messages and the current period/interval,
 * and sends what it computes.  Records use the wire structs of
 * common/proto.h so reports and tokens need no conversion.
 *
 * One round per redistribution interval:
 *   ctrl_round_begin(c, period, interval, left)   new interval (new period
 *                                                 resets served counters)
 *   ctrl_node_report(c, node, ...)   for each report that arrives
 *   ctrl_compute(c, &res)            estimates, R pass, L pass (or skip)
 *   ctrl_node_tokens(c, node, ...)   per up node: records to push
 *
 * Accounting: served counters live on the nodes; a report carries the
 * node's cumulative counters of its period, so the controller's view of a
 * period is rebuilt by one round of reports (also after a restart).  Tokens
 * are absolute counts for the rest of the period.  Limits are hard: for a
 * bucket with a limit, the R- plus L-tokens pushed to all nodes never exceed
 * limit - served (in tokens per period).
 *
 * A ctrl_t belongs to one thread (the controller's loop); nothing locks. */
#ifndef BQOS_CTRL_H
#define BQOS_CTRL_H

#include <stddef.h>
#include <stdint.h>

#include "common/bucketfile.h"
#include "common/proto.h"

#define CTRL_UNLIMITED INT64_MAX /* == PROTO_UNLIMITED */

struct pshift_problem;

/* Called after each pShift solve of ctrl_compute() with the solved problem
 * (borrowed, valid during the call only; pjson_write_problem() can save it),
 * which pass it was (0 R, 1 L), the solve's wall time in seconds and the
 * config's solve_hook_arg.  Runs on the computing thread; for diagnosis
 * (bqos-ctrl-prof --dump-slow). */
typedef void (*ctrl_solve_hook_fn)(const struct pshift_problem *p, int lpass, double seconds,
                                   void *arg);

typedef struct {
    double period_s;         /* QoS period T in seconds, > 0 */
    int intervals;           /* K >= 1 redistribution intervals per period */
    int threads;             /* pShift OpenMP threads (<= 0: OpenMP default) */
    int down_after;          /* rounds without any message before a node is
                                marked down, >= 1 */
    double skip_rel;         /* recompute only if some demand rate or
                                capacity moved by more than this fraction
                                (0: always recompute) */
    double skip_abs;         /* ... and by more than this many IOs per interval */
    double default_capacity; /* IOPS profile of a node that gives none */
    size_t approx_top;       /* pShift approximation (paper III-C2): 0 exact */
    int max_path;            /* pShift's longest shift path (pshift_opts_t;
                                0: any; controller shards use a bound) */
    int full_passes;         /* 1: every round visits every bucket (the sums'
                                reset, conversion, budgets, provisional
                                splits), as before the buckets in play
                                (round.c); the same decisions, for tests
                                and benches to compare */
    int no_queue_lift;       /* 1: the period's last round keeps R on the
                                queues even where they fill a node's R
                                capacity (no rq_lift, ledger.c); controller
                                shards set it: their capacity is their slice
                                of the node, and lifting there misplaced R
                                (docs/decisions.md "Shards: the root's needs
                                at a period's start ...") */
    double cap_sd;           /* R-tokens are placed within each node's
                                conservative capacity: the mean of its recent
                                capacity samples minus cap_sd standard
                                deviations (estimate.h), >= 0 */
    double cap_cold;         /* ... or (1 - cap_cold) x the estimate before
                                two samples, 0..1 */
    int cap_recent;          /* ... and at most the most it delivered in
                                its last cap_recent measured intervals
                                (0: no such cap; estimate.h) */
    double conv_slack;       /* token conversion: a bucket keeps this share
                                of R of what it left unused; < 0: no
                                conversion (remaining R = R - served) */
    double limit_depth;      /* limits are rates: a limited bucket's headroom
                                for the rest of the period is at most
                                L x (left + limit_depth / period_s), less what
                                down nodes hold (seconds at its limit, >= 0);
                                < 0: per-period quotas (L - served) */
    int max_nodes;           /* nodes registered at most (1..CTRL_NODES_MAX);
                                a new name beyond takes a forgotten node's
                                slot, else its hello is refused */
    int max_names;           /* a node's table: at most the buckets plus
                                this many names */
    int forget_after;        /* periods a node stays down before it is
                                forgotten (its tables freed); <= 0: never.
                                A node that keeps to the lease is
                                forgotten no earlier than its lease's end */
    int fallback_lease;      /* the static fallback's lease, periods
                                (1..PROTO_LEASE_MAX): a silent node that
                                keeps to it (ctrl_node_set_leases()) holds
                                its grant for this many periods after the
                                last one it heard us in; its grant counts
                                against the limits until one period more
                                has passed since it was marked down */
    double max_profile;      /* a hello's capacity profile is held to this
                                (IOPS); see CTRL_PLAUSIBLE_FACTOR */
    uint32_t table_seed;     /* first table generation - 1; the daemon seeds it
                                from the clock so that a restarted controller's
                                generations rarely repeat the old ones */
    int dyn_max;             /* template-made buckets held cluster-wide, in
                                all (0: DYN_MAX_TOTAL, 4096) ... */
    int dyn_max_rule;        /* ... per template rule (0: DYN_MAX_RULE, 1024) */
    int dyn_idle_periods;    /* ... dropped after this many idle periods
                                (0: DYN_IDLE_PERIODS, 30) */
    ctrl_solve_hook_fn solve_hook; /* NULL: none */
    void *solve_hook_arg;
    int shares;              /* weighted fair shares of spare capacity
                                (issue 28, controller/fair.h): 0 off (the
                                default), 1 on: every computed round divides
                                the spare capacity and ctrl_node_shares()
                                gives each node its share records */
} ctrl_config_t;

#define CTRL_NODES_MAX 4096      /* the round's sums hold this many nodes */
#define CTRL_NAMES_DEFAULT 262144 /* bucket names per node, default cap */

/* T = 1 s, K = 5, 1 thread, down after 3 rounds, skip below 10% / 2 IOs,
 * capacity 50,000 IOPS, cap_sd 0, cap_cold 0.2, cap_recent 3, conv_slack 0.05,
 * limit_depth 0.02 s,
 * max_profile 10^8 IOPS, 4096 nodes, 262,144 names per node, forget after
 * 10 periods down, fallback lease 10 periods. */
ctrl_config_t ctrl_config_default(void);

typedef struct ctrl ctrl_t;

/* Up node `node`'s share records of the last computed round (cfg.shares
 * on; ascending bucket order, at most PROTO_SHARES_MAX), borrowed from c
 * until the next ctrl_compute(); *recs may be NULL.  Returns their count;
 * -1 if shares are off (send no share field). */
long ctrl_node_shares(const ctrl_t *c, int node, const proto_share_rec_t **recs);

/* Returns a new controller state with no buckets and no nodes, or NULL if
 * out of memory or the config is invalid (period_s <= 0, intervals < 1,
 * down_after < 1).  Caller owns it. */
ctrl_t *ctrl_new(const ctrl_config_t *cfg);

/* Frees everything and sets *cp to NULL.  Accepts NULL. */
void ctrl_destroy(ctrl_t **cp);

const ctrl_config_t *ctrl_config(const ctrl_t *c);

/* ---- buckets (the controller's table) ------------------------------------ */

/* The most tokens one bucket may get per period (rate x period_s), and the
 * most all buckets together may (the sum over buckets of the larger of
 * reservation and limit, in tokens): what a round's sums hold without
 * overflow (pShift sums a problem's tokens in int64_t). */
#define CTRL_BUCKET_TOKENS_MAX (INT64_C(1) << 53)
#define CTRL_TOTAL_TOKENS_MAX (INT64_C(1) << 62)

/* Checks that `bf` fits what the arithmetic holds under c's period (the two
 * bounds above), and that no bucket has a byte rate under cfg.shares (fair
 * shares divide IOs only).  Returns 0, or -ERANGE with `msg` (may be NULL)
 * naming the first bucket past a bound.  Any thread that owns `c`. */
int ctrl_check_buckets(const ctrl_t *c, const bucketfile_t *bf, char *msg, size_t msgsize);

/* Replaces the bucket configuration with a copy of `bf` (rates are turned
 * into tokens per period: rate x period_s).  Per-node state of buckets that
 * stay is kept; the table generation changes and the next ctrl_compute()
 * recomputes.  Returns 0, -ERANGE if ctrl_check_buckets() refuses `bf`, or
 * -ENOMEM (state unchanged in both cases). */
int ctrl_set_buckets(ctrl_t *c, const bucketfile_t *bf);

/* Checks that the table with bucket *x added or replacing the bucket of
 * its name still fits what ctrl_check_buckets() checks, from the sums c
 * keeps: O(1).  Returns 0 or -ERANGE with msg (may be NULL) filled. */
int ctrl_check_bucket(const ctrl_t *c, const bucketfile_bucket_t *x, char *msg, size_t msgsize);

/* Adds bucket *x at the end of the table, or replaces the bucket of its
 * name in place, without rebuilding the other buckets' state: the
 * bucket's rates become tokens, its provisional split and ledger entry
 * start afresh (as every bucket's do at ctrl_set_buckets()), a new bucket
 * finds its pair on each node by name (the node's unconfigured names are
 * indexed), the nodes holding it get its limit at the next computation;
 * the table generation changes and the next ctrl_compute() recomputes.
 * O(1) amortised in the table's size (its arrays grow by doubling; c's
 * table is its own copy of the rows, nothing shared to copy); O(nodes).  A table with byte rates (or a bucket that gets one) takes the
 * full ctrl_set_buckets() path.  Returns 0, -ERANGE (ctrl_check_bucket()),
 * -EINVAL (an invalid bucket), -ENOMEM; c unchanged on error. */
int ctrl_set_bucket(ctrl_t *c, const bucketfile_bucket_t *x);

/* Removes bucket `name`, keeping the others' state: the last bucket
 * takes its index, as bucketfile_remove_swap() does to the table (the
 * caller removes it from its own table the same way, so that both keep
 * one order; the file keeps its order).  O(1) in the table's size,
 * O(nodes).  Returns 0, -ENOENT, -ENOMEM (c unchanged). */
int ctrl_remove_bucket(ctrl_t *c, const char *name);

/* ---- what changed, for an observer (the daemon's metrics) ----------------
 * c logs its last CTRL_CHANGE_LOG changes of the table made in place
 * (ctrl_set_bucket(), ctrl_remove_bucket()), numbered from 1, so that an
 * observer keeping its own state per bucket follows them without a pass
 * over the table; a whole new table (ctrl_set_buckets(), a settle of the
 * template-made buckets) tells it to start again. */
#define CTRL_CHANGE_LOG 1024

typedef enum {
    CTRL_CHANGE_SET,    /* bucket b's row changed in place */
    CTRL_CHANGE_ADD,    /* bucket b was appended (b = the old count) */
    CTRL_CHANGE_REMOVE, /* bucket b was removed and the last one, at index
                           `moved` (the old count - 1), took its index */
} ctrl_change_kind_t;

typedef struct {
    ctrl_change_kind_t kind;
    int b, moved;
} ctrl_change_t;

/* The newest change's number (0: none yet).  O(1). */
uint64_t ctrl_change_seq(const ctrl_t *c);

/* Calls fn(arg, ch) for every change numbered after `since`, oldest first.
 * Returns 0, or -ERANGE (fn never called) when some of them left the log
 * or the whole table was replaced after `since`: the caller reads the
 * table again.  O(changes).  The thread that owns c. */
int ctrl_changes(const ctrl_t *c, uint64_t since, void (*fn)(void *arg, const ctrl_change_t *ch),
                 void *arg);

/* Calls fn(arg, b), possibly more than once for one b, for every bucket b
 * that may show anything this period in ctrl_bucket_info(): served,
 * queued or demand (every other bucket has nothing served, queued nor
 * asked for: ctrl_bucket_info() gives them zeros there; the tokens it
 * sums may still be nonzero).  These are the buckets of the nodes' active
 * pairs (the pairs a computation visits) and those a node reported ahead
 * for the next period.  O(active pairs), not O(buckets).  Returns 0, or
 * -ENOMEM if c could not keep the reports ahead, or a whole new table
 * came since one (ctrl_set_buckets(): they name old indexes), until their
 * period has passed (then any bucket may show something: the caller must
 * look at them all).  The thread that owns c. */
int ctrl_touched_buckets(const ctrl_t *c, void (*fn)(void *arg, int b), void *arg);

/* ---- template-made buckets (controller/ctrl_tmpl.c, issue 27) -----------
 * A template rule makes one bucket per entity at the node that classifies
 * the request; the controller learns the name from that node's reports
 * (a record of a name its table lacks, with arrivals or a queue) and, if
 * a template rule of the table's rules could have made it
 * (rules_template_made()), adds it to the table as a dynamic bucket with
 * that rule's R and L, placed by the passes like any other, so that the
 * rule's figures hold over all the nodes together.  The table is the
 * configured buckets (as ctrl_set_buckets() was given them, first, in
 * their order) then the dynamic ones; a configured bucket of the same name
 * wins.  Bounds: cfg.dyn_max in all, cfg.dyn_max_rule per rule; past them
 * a name stays out of the table (counted in refused) and the nodes hold it
 * at no tokens (they never serve a limited template bucket before the
 * controller's grant).  A dynamic bucket whose R does not fit the up
 * nodes' capacity with everything else's R gets R 0 (its limit still
 * holds; counted in r_zeroed).  Idle for cfg.dyn_idle_periods periods it
 * is dropped.  Table changes are applied at most once per computation
 * (ctrl_compute()'s first step). */

/* Rule index that made table bucket b, or -1 (configured, or no bucket
 * b).  O(1). */
int ctrl_bucket_template(const ctrl_t *c, int b);

typedef struct {
    size_t buckets;          /* dynamic buckets in the table now */
    uint64_t made, expired, refused, dropped; /* dyn_stats_t */
    uint64_t r_zeroed;       /* table makes that held one at R 0 */
} ctrl_dyn_stats_t;

void ctrl_dyn_stats(const ctrl_t *c, ctrl_dyn_stats_t *out);

/* The controller's table: generation (>= 1) and bucket names in index order
 * (token records' `bucket`): the configured buckets, then the template-made
 * ones.  The array belongs to `c` and is valid until the next
 * ctrl_set_buckets() or ctrl_compute() (which adds and drops template-made
 * buckets). */
uint32_t ctrl_table(const ctrl_t *c, const char *const **names, size_t *n);

/* The buckets' weights (1..1,000,000) in the same order as ctrl_table()'s
 * names, for the weights frame that goes with them; NULL before the first
 * ctrl_set_buckets().  Belongs to `c`, valid as the names are. */
const uint32_t *ctrl_table_weights(const ctrl_t *c);

/* The buckets of the table in shadow, as the protocol's list
 * (proto_msg_t.shadow: indexes in table order, "" if none, NULL before
 * the first table); owned by c, valid until the next ctrl_set_buckets(). */
const char *ctrl_table_shadow(const ctrl_t *c);

/* The table's rule list (its bucket file's "rules", common/rules.h), or
 * NULL if it has none; owned by c, valid until the next
 * ctrl_set_buckets().  daemon/nodes.c pushes it to every node (issue 27). */
const rules_t *ctrl_rules(const ctrl_t *c);

/* Most buckets in shadow at once (ctrl_check_buckets() refuses more): the
 * list goes in one message header (PROTO_HEADER_MAX). */
#define CTRL_SHADOW_MAX 256

/* ---- nodes --------------------------------------------------------------- */

/* Registers node `name` running as process `instance` (the hello's random
 * id; 0 = not said) or re-registers a known one (a reconnect, or a restart
 * after its old process went down), with its capacity profile (IOPS; 0 =
 * the default) and its bucket table (generation `table`, `n` names, index
 * order).  The node is up and nothing has been pushed to it yet.  A name
 * that is up under another instance (both non-zero) is refused: a second
 * node started under the same name must not take the first one's place
 * (counted in ctrl_stats()'s duplicate_names; the first is unchanged).
 * Returns the node's index (stable until the node is forgotten: down for
 * forget_after periods, its tables freed; a hello brings it back, under
 * the same index unless a new name took the slot), -EEXIST for such a
 * duplicate, -EINVAL for a bad name, -E2BIG for more names than the
 * controller's buckets plus max_names (ctrl_node_table_part() takes a
 * table in parts),
 * -EUSERS if max_nodes are registered and none is forgotten, -ENOMEM. */
int ctrl_node_hello(ctrl_t *c, const char *name, uint64_t instance, uint64_t capacity,
                    uint32_t table, const char *const *names, size_t n);

/* Says whether node `node` keeps to the static fallback's lease (its
 * hello's `leases`): silent, it renews its grant for at most
 * cfg.fallback_lease periods after the last period it heard us in, then
 * holds its limited buckets at 0.  Its grant then counts against the
 * limits only until cfg.fallback_lease + 1 periods after the period it
 * was marked down in (the one period more covers its clock against ours);
 * then its share goes to the other nodes, and it may be forgotten.  A
 * node that does not (an older one renews for ever) keeps its grant
 * counted until it is forgotten, as before.  Cleared by a hello
 * (ctrl_node_hello()); call after it.  Returns 0 or -EINVAL. */
int ctrl_node_set_leases(ctrl_t *c, int node, int leases);

/* Index of node `name`, or -ENOENT (also for a forgotten node: it must say
 * hello again). */
int ctrl_node_find(const ctrl_t *c, const char *name);

/* Replaces node `node`'s bucket table (a names frame in a report).
 * Returns 0, -EINVAL, -ENOMEM. */
int ctrl_node_table(ctrl_t *c, int node, uint32_t table, const char *const *names, size_t n);

/* Names in parts (docs/protocol.md "Names in parts"): names[n] are the
 * names [at, at + n) of node `node`'s table generation `table`.  at 0
 * starts that table (as ctrl_node_table()); otherwise the part must extend
 * the table held (same generation, at = the names held), else -ESTALE and
 * nothing changes (a part out of order, or of a table given up).  The
 * pairs appended are visited once by the next computed round (none is
 * forced: until then they hold no tokens from us).  A node's table holds at most the
 * controller's buckets plus cfg.max_names names: beyond, -E2BIG (nothing
 * appended).  A name the table holds already, or a bad one: -EINVAL
 * (nothing appended).  -ENOMEM.  O(n) amortised. */
int ctrl_node_table_part(ctrl_t *c, int node, uint32_t table, size_t at,
                         const char *const *names, size_t n);

/* Makes room for node `node`'s table to grow to n names (at most the
 * buckets plus cfg.max_names), so that its parts append without copying
 * the per-pair arrays (the memory is touched as the names come).  Returns
 * 0, -EINVAL, -ENOMEM (nothing lost: appends grow by doubling then). */
int ctrl_node_table_reserve(ctrl_t *c, int node, size_t n);

/* How many names of node `node`'s table the controller holds (0 for an
 * unknown node). */
size_t ctrl_node_table_size(const ctrl_t *c, int node);

/* Notes any message from the node this round (heartbeat, report...): it is
 * alive.  `peer_table` is the controller table generation the node holds
 * (0 = not said: unchanged).  A down node comes back up.  Returns 0 or
 * -EINVAL. */
int ctrl_node_seen(ctrl_t *c, int node, uint32_t peer_table);

/* The node said goodbye: it is down at once, and what it was granted no
 * longer counts against the limits (a node down because it fell silent may
 * still be serving: its grant keeps counting until it is back or
 * forgotten).  Returns 0 or -EINVAL. */
int ctrl_node_goodbye(ctrl_t *c, int node);

/* Applies a report header (period, interval, table, completions, busy
 * seconds) and its `n` records (bucket = index in the node's table).  Also
 * counts as ctrl_node_seen(c, node, peer_table).  Counters of a period other
 * than the current one are not used (counted as stale).  Returns 0;
 * -ESTALE if `table` is not the node's current table (records dropped: the
 * caller answers unknown_table); -EINVAL for a bad node or a record index
 * outside the node's table (records before it are applied). */
int ctrl_node_report(ctrl_t *c, int node, uint64_t period, uint32_t interval, uint32_t table,
                     uint32_t peer_table, uint64_t completions, double busy_seconds,
                     const proto_report_rec_t *recs, size_t n);

/* ctrl_node_report() for a sparse report (docs/protocol.md "Sparse
 * reports"): a pair of the node that the records leave out is as
 * proto_predict_served() says from its last record (queue, arrivals and
 * throttled state held, served carried on at that record's rate), not
 * idle.  Same returns.  Costs O(records + the node's active pairs), as a
 * full report does. */
int ctrl_node_report_sparse(ctrl_t *c, int node, uint64_t period, uint32_t interval,
                            uint32_t table, uint32_t peer_table, uint64_t completions,
                            double busy_seconds, const proto_report_rec_t *recs, size_t n);

/* Applies a report's in-flight figures (issue 25; proto_msg_t
 * "inflight" and "base_us", after ctrl_node_report() of the same
 * message): recs[i].tokens is the most requests of the node's table
 * bucket recs[i].bucket it held in flight over the interval, kept until
 * the node says another (buckets left out keep theirs); base_us its
 * backend's unloaded latency in microseconds (0: not said, the last one
 * stays).  The R pass places at most what a pair's figure carries (docs/
 * controller.md "Concurrency").  Returns 0; -ESTALE if `table` is not the
 * node's current table (nothing applied); -EINVAL for a bad node or a
 * bucket outside the node's table (figures before it are applied). */
int ctrl_node_inflight(ctrl_t *c, int node, uint32_t table, uint64_t base_us,
                       const proto_share_rec_t *recs, size_t n);

/* Node `node` may send sparse reports (its hello said so; 0: it does
 * not).  Returns 0 or -EINVAL. */
int ctrl_node_set_sparse(ctrl_t *c, int node, int sparse);

/* The generation of node `node`'s own table that we hold (0 if none). */
uint32_t ctrl_node_table_gen(const ctrl_t *c, int node);

/* Forgets what was pushed to every node (this controller just became the
 * leader: what it computed as a standby never left, and the nodes hold the
 * old leader's tokens and table).  The next ctrl_compute() is forced and
 * lists every record of every up node, and tokens carry the names. */
void ctrl_forget_pushed(ctrl_t *c);

/* Nonzero if the node is up. */
int ctrl_node_up(const ctrl_t *c, int node);

/* Nonzero if the node has not acknowledged the current controller table, so
 * a tokens message to it must carry the names. */
int ctrl_node_needs_names(const ctrl_t *c, int node);

/* Nonzero if the node has reported in the current round. */
int ctrl_node_reported(const ctrl_t *c, int node);

int ctrl_nnodes(const ctrl_t *c);

/* ---- rounds -------------------------------------------------------------- */

/* Starts the round of interval `interval` (0..K-1) of period `period`, with
 * `left` (0..1] of the period still to run (<= 0: (K - interval) / K).  A
 * period different from the previous round's starts a new period: every
 * served counter is zeroed until reports of the new period arrive.
 * Returns 0, or -EINVAL for interval >= K. */
int ctrl_round_begin(ctrl_t *c, uint64_t period, uint32_t interval, double left);

/* The current round computes `seconds` after its interval's boundary
 * (the wait for reports, a late wake-up).  Call before ctrl_compute().  In
 * a period's first round that is time no node could serve a limited
 * bucket (last period's tokens stop at its end, the new ones are not
 * there yet), so for the rest of the period the bucket's rate share
 * (limit_depth >= 0) grows by it, at most one interval: a bucket is not
 * held below its limit for the controller's lateness.  Other rounds:
 * ignored (the nodes pace the previous tokens meanwhile). */
void ctrl_round_late(ctrl_t *c, double seconds);

uint64_t ctrl_period(const ctrl_t *c);
uint32_t ctrl_interval(const ctrl_t *c);

/* Outcome of one ctrl_compute(). */
typedef struct {
    int skipped;          /* no estimate moved beyond the threshold: nothing
                             recomputed, push heartbeats instead of tokens */
    int nodes_up;         /* servers in the problem */
    int nodes_down_now;   /* nodes marked down by this round */
    size_t buckets;       /* buckets in the R problem (reservation left, demand) */
    size_t pairs;         /* (bucket, server) demand pairs */
    int64_t r_tokens;     /* R-tokens placed this round */
    int64_t l_tokens;     /* headroom left after R of the limited buckets
                             (every one in a forced round, those in play
                             in the others) */
    int64_t phi;          /* effective capacity of the R allocation */
    double t_pshift;      /* seconds in the two pShift solves */
    double t_rpass, t_lpass; /* ... of which the R pass and the L pass */
    int64_t lpass_shifts; /* shift paths the L pass used */
} ctrl_result_t;

/* Ends the round: marks silent nodes down, estimates demand and capacity,
 * runs the R pass then the L pass (or skips when nothing changed and the
 * round is not forced: first round of a period, configuration change, node
 * up/down), and prepares each up node's token records.  Returns 0, -ENOMEM,
 * or a pshift error (-EOVERFLOW); on error the previous tokens stay. */
int ctrl_compute(ctrl_t *c, ctrl_result_t *res);

/* The records to push to node `node` after ctrl_compute() (bucket = index
 * in the controller's table; flags PROTO_TOK_UNLIMITED for no limit).  Only
 * records that can change the node's counts are listed.  The array belongs
 * to `c`, valid until the next ctrl_compute() or configuration change.
 * Returns the count (0 for a skipped round, a down node, or nothing to say). */
size_t ctrl_node_tokens(const ctrl_t *c, int node, const proto_tokens_rec_t **recs);

/* ---- the bytes/s dimension (cost-aware tokens, controller/bytes.c) ------- */

/* Buckets with "reservation_bytes" or "limit_bytes" also get byte tokens,
 * computed by the same steps as IO tokens, in bytes (conversion, budgets
 * net of silent nodes' grants, R pass, L pass): every computed or skipped
 * round, each up node holding such a bucket gets a byte record (R: the
 * byte reservation left, placed where the bucket's bytes arrive within the
 * nodes' conservative byte capacities; L: the byte headroom beyond that,
 * placed on the byte capacity left, the rest spread evenly), so that the
 * byte limit holds over the nodes as the IO limit does.  Without any byte
 * rate none of this runs and nothing changes (the paper). */

/* Applies a report's byte records (bucket = index in the node's table;
 * call after ctrl_node_report() of the same report) and the bytes the node
 * served this period with its busy time (its byte capacity).  Returns 0,
 * -EINVAL (bad node, record outside its table) or -ENOMEM. */
int ctrl_node_report_bytes(ctrl_t *c, int node, uint64_t period, uint64_t served_bytes,
                           double busy_seconds, const proto_report_bytes_t *recs, size_t n);

/* The byte records to push to node `node` after ctrl_compute() (bucket =
 * index in the controller's table; PROTO_TOK_OFF for a bucket that lost
 * its byte rate).  Owned by `c`, valid until the next ctrl_compute().
 * Returns the count (0 for a down node or without byte rates). */
size_t ctrl_node_tokens_bytes(const ctrl_t *c, int node, const proto_tokens_bytes_t **recs);

/* ---- shards (controller/shardroot.h, shardctl.c; issue 30) ---------------
 * A controller shard is a ctrl_t holding only its buckets (shardmap.h);
 * each round the root step divides every node's capacity among the shards
 * and each shard computes within its slices.  Without a slice nothing
 * changes. */

/* Holds node `node`'s capacities in c's computations to at most `est`
 * IOs/s (the L pass, the full estimate) and `cons` IOs/s (the R pass, the
 * conservative capacity), the root step's slices of the node for this
 * shard; est < 0 removes the slice (the node's own estimates, as without
 * shards).  cons is held to est.  A slice that moved beyond the skip
 * threshold forces the next computation.  Returns 0 or -EINVAL (bad node,
 * NaN).  The thread that owns c. */
int ctrl_node_set_slice(ctrl_t *c, int node, double est, double cons);

/* What c needs of each node by its last computed round, for the root
 * step, in tokens for the rest of the period as of that round, into
 * arrays of ctrl_nnodes(c) entries (any may be NULL): placed[n] the
 * R-tokens placed there; must[n] the reservation its buckets can place
 * nowhere else (a bucket's remaining reservation less its demand on the
 * other up nodes, at most its demand there); room[n] the sum over the
 * node's active pairs of min(the bucket's remaining reservation, its
 * demand there) (where R could go); demand[n] the sum of the demand
 * estimates.  Zeros for a down node or before the first computed round.
 * Returns 0 or -ENOMEM.  O(active pairs + buckets). */
int ctrl_shard_needs(const ctrl_t *c, int64_t *placed, int64_t *must, int64_t *room,
                     int64_t *demand);

/* The reservation c's last computed round had to place (the sum over
 * buckets with demand of their remaining reservation, tokens), for the
 * root step.  O(buckets in that round's R problem). */
int64_t ctrl_r_target(const ctrl_t *c);

/* As ctrl_shard_needs(), plus *target (may be NULL) as ctrl_r_target(),
 * for the first round of the next period: every bucket's reservation
 * left taken as r_frac x its whole reservation per period (the smaller
 * of R and L), r_frac being the share of the period that was left at the
 * last computed round, so that the needs scale to the new period as
 * ctrl_shard_needs()'s do to the rest of one (the demands stay the last
 * round's forecasts).  A bucket with demand counts in the target even if
 * it had met its reservation.  Returns 0, -EINVAL (r_frac < 0 or NaN) or
 * -ENOMEM.  Same cost. */
int ctrl_shard_needs_next(const ctrl_t *c, double r_frac, int64_t *placed, int64_t *must,
                          int64_t *room, int64_t *demand, int64_t *target);

/* ---- introspection (status, admission) ----------------------------------- */

typedef struct {
    const char *name;
    int64_t reservation, limit;  /* IOs per second (limit: BUCKETFILE_NO_LIMIT) */
    uint32_t weight;
    uint64_t served_r, served_l, served_o; /* this period, all nodes */
    uint64_t queued;             /* last reported, up nodes */
    int64_t demand;              /* estimated for the rest of the period */
    int64_t r_tokens, l_tokens;  /* last pushed, summed (l: CTRL_UNLIMITED) */
    int servers;                 /* up nodes where it has demand */
    int64_t reservation_bytes, limit_bytes; /* bytes per second, 0: none */
    uint64_t served_bytes;       /* this period, all nodes (byte buckets) */
    int64_t r_bytes, l_bytes;    /* last pushed, summed (l: CTRL_UNLIMITED) */
    int shadow;                  /* its limit is in shadow (issue 28) */
    const char *parent;          /* nested buckets (issue 28): its parent's
                                    name, NULL none */
    int children;                /* buckets naming it as their parent; a
                                    parent's served, queued, demand and
                                    tokens are the sums of its children's */
} ctrl_bucket_info_t;

/* Fills *out for bucket b (controller table index).  Returns 0 or -EINVAL.
 * A parent's figures sum its subtree (O(its buckets x nodes)). */
int ctrl_bucket_info(const ctrl_t *c, int b, ctrl_bucket_info_t *out);

/* Scratch of ctrl_bucket_info_many() (controller/binfo.c): caller-owned,
 * kept across calls (4 bytes per bucket of the largest table seen).
 * ctrl_binfo_new() returns NULL when out of memory; ctrl_binfo_destroy()
 * accepts NULL and nulls the caller's pointer. */
typedef struct ctrl_binfo ctrl_binfo_t;
ctrl_binfo_t *ctrl_binfo_new(void);
void ctrl_binfo_destroy(ctrl_binfo_t **s);

/* Fills out[k] as ctrl_bucket_info(c, bs[k], &out[k]) does, for k < n, in
 * one pass over the nodes' active pairs: O(n + active pairs + nodes), not
 * O(n x nodes) (the per-period metrics of a table whose every bucket has
 * traffic).  Where that pass cannot be exact (nested buckets, a
 * provisional split, pushes pending after a new node table, a bucket
 * listed twice) those buckets are filled the per-bucket way.  An index out
 * of range gets a zeroed record (name NULL).  Returns 0, -EINVAL (NULL
 * arguments) or -ENOMEM (s could not grow to the table).  Read-only on c;
 * the thread that owns c. */
int ctrl_bucket_info_many(const ctrl_t *c, ctrl_binfo_t *s, const int *bs, size_t n,
                          ctrl_bucket_info_t *out);

/* Nested buckets (issue 28), O(1): 1 if bucket b has a parent or children
 * (its parent's name into *parent, NULL if none; its number of children
 * into *children; either may be NULL), 0 if it is in no tree or out of
 * range (then *parent NULL, *children 0). */
int ctrl_bucket_nesting(const ctrl_t *c, int b, const char **parent, int *children);

/* Nonzero while some bucket of the table has a parent (a tree is built).
 * Changes then take the whole-table path (ctrl_set_bucket() rebuilds;
 * the admin checks and admits the table whole).  Main thread. */
int ctrl_nested(const ctrl_t *c);

/* Index of bucket `name` in the controller's table, or -ENOENT.  O(1)
 * (the bucket file's hash index). */
int ctrl_bucket_find(const ctrl_t *c, const char *name);
int ctrl_nbuckets(const ctrl_t *c);

/* One bucket on one node: what ctrl_bucket_info() sums, before the sum
 * (it sums the queues, demands and tokens of the up nodes only). */
typedef struct {
    int reported;                /* the node reported it this period */
    uint64_t served_r, served_l, served_o; /* this period (0 unless reported) */
    uint64_t queued;             /* its last report's queue (any period) */
    int64_t demand;              /* estimated for the rest of the period */
    int64_t r_tokens, l_tokens;  /* last pushed; r_tokens -1: nothing pushed
                                    yet; l_tokens CTRL_UNLIMITED: no limit */
} ctrl_pair_info_t;

/* Fills *out for bucket b (controller table index) on node n.  Returns 0,
 * -ENOENT if the node's table lacks the bucket (or the node was forgotten),
 * -EINVAL for a bad index.  Read-only, for the admin status. */
int ctrl_pair_info(const ctrl_t *c, int n, int b, ctrl_pair_info_t *out);

typedef struct {
    const char *name;
    int up;
    int64_t rounds_silent;   /* rounds since the last message (-1: never) */
    double capacity;         /* current estimate, IOPS */
    double conservative;     /* what R-tokens are placed within, IOPS */
    double profile;          /* profiled capacity, IOPS */
    size_t buckets;          /* names in its table */
    size_t pairs_held;       /* pairs of its table with state of their own:
                                those a record (report, in flight) named
                                while they were in the table (the others
                                cost 4 bytes each: issue 26) */
    uint64_t instance;       /* its process's id from its hello, 0 = none */
    uint64_t period;         /* period of its last report */
    uint32_t interval;       /* interval of its last report */
    double byte_capacity;    /* bytes per busy second, 0: unknown (only
                                measured while some bucket has a byte rate) */
} ctrl_node_info_t;

/* Fills *out for node n.  Returns 0 or -EINVAL. */
int ctrl_node_info(const ctrl_t *c, int n, ctrl_node_info_t *out);

/* Sum of the capacity estimates of the up nodes (IOPS). */
double ctrl_total_capacity(const ctrl_t *c);

/* Sum of the capacity estimates of the up nodes where bucket `name` had
 * demand in its last reports (IOPS); -1 if its placement is unknown (no
 * node reports demand for it). */
double ctrl_bucket_capacity(const ctrl_t *c, const char *name);

/* The same in bytes per second (byte_capacity of ctrl_node_info_t): the
 * sum over the up nodes that have one (only nodes that serve byte buckets
 * do), 0 if none; for bucket `name`, -1 also if a node where it has demand
 * has none yet (a sum short of a node would refuse what fits). */
double ctrl_total_byte_capacity(const ctrl_t *c);
double ctrl_bucket_byte_capacity(const ctrl_t *c, const char *name);

/* Implausible reports (issue 18): values a node sends that the controller
 * does not believe, clamped, counted per reason in ctrl_stats() and logged
 * at most once per CTRL_IMPL_LOG_ROUNDS rounds per reason.  A node's
 * plausible rate is CTRL_PLAUSIBLE_FACTOR x the larger of its profile and
 * its capacity estimate. */
typedef enum {
    CTRL_IMPL_SERVED_GRANT, /* limited bucket: served beyond what the
                               tokens pushed to the node this period allow
                               (+1/32 + 64 for requests in flight) */
    CTRL_IMPL_SERVED_RATE,  /* served beyond the plausible rate x period */
    CTRL_IMPL_DEMAND,       /* queued or arrivals beyond CTRL_DEMAND_FACTOR
                               x the plausible rate x period */
    CTRL_IMPL_CAPACITY,     /* completions beyond it, or a hello's profile
                               beyond max_profile or beyond the factor x the
                               node's estimate so far */
    CTRL_IMPL__COUNT
} ctrl_impl_t;
#define CTRL_PLAUSIBLE_FACTOR 4
#define CTRL_DEMAND_FACTOR 16
#define CTRL_IMPL_LOG_ROUNDS 50

/* "served_beyond_grant", "served_beyond_rate", "demand", "capacity". */
const char *ctrl_impl_str(ctrl_impl_t r);

typedef struct {
    uint64_t rounds, computed, skipped;
    uint64_t reports, stale_reports, unknown_records;
    uint64_t nodes_marked_down, nodes_back_up;
    uint64_t duplicate_names; /* hellos refused: the name is up elsewhere */
    uint64_t nodes_forgotten; /* down for forget_after periods: tables freed */
    uint64_t implausible[CTRL_IMPL__COUNT]; /* values clamped, per reason */
    uint64_t full_rebuilds;   /* ctrl_set_buckets(): every bucket's state
                                 and every node's map rebuilt, O(buckets) */
    uint64_t bucket_changes;  /* ctrl_set_bucket(), ctrl_remove_bucket()
                                 applied without a full rebuild */
    uint64_t bucket_visits;   /* buckets the rounds' per-bucket passes
                                 visited (the sums' reset, the conversion,
                                 the budgets, the provisional splits' plan;
                                 one per pass): the table's size per pass
                                 in a forced round, the buckets in play in
                                 the others */
} ctrl_stats_t;

const ctrl_stats_t *ctrl_stats(const ctrl_t *c);

/* Traffic of buckets the configuration lacks, by name, summed over the
 * nodes' reports of the current period: key prefixes nobody configured,
 * buckets the controller removed, buckets only a node's --config names.
 * With a `default` bucket configured the nodes queue it in `default` and
 * charge it to `default`'s tokens (so `default`'s own figures include it);
 * without one it is not limited. */
typedef struct {
    const char *name;        /* owned by c: valid until the node's table changes */
    uint64_t arrivals;       /* this period, all nodes */
    uint64_t served;         /* this period, all nodes */
    int nodes;               /* nodes that reported it */
} ctrl_unconf_t;

/* Fills out[0..max-1] with the `max` busiest (by arrivals, then name) such
 * buckets and adds the others into *rest (rest->nodes = how many buckets
 * they are).  Returns how many were written, or -ENOMEM.  O(pairs of the
 * up nodes' tables): for the admin status, never per round. */
int ctrl_unconfigured(const ctrl_t *c, ctrl_unconf_t *out, size_t max, ctrl_unconf_t *rest);

#endif
