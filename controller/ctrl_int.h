/* ctrl_int.h - private to the controller core (ctrl.c, round.c, ledger.c, bytes.c, plausible.c, capacity.c): the controller state's structs, the ledger both dimensions run, and the helpers they share. */
#ifndef BQOS_CTRL_INT_H
#define BQOS_CTRL_INT_H

#include "common/strmap.h"
#include "controller/ctrl.h"
#include "controller/estimate.h"
#include "pshift/pshift.h"

/* Everything here belongs to the ctrl_t it hangs from, and so to the one
 * thread that owns that ctrl_t (ctrl.h); nothing locks.  Helpers shared by
 * the files carry the ctrl__ prefix. */

/* One (bucket, node) pair: the node's last report for the bucket and the
 * demand estimator's state.  Indexed by the node's table index, so every
 * pass over the pairs is sequential and touches only buckets the node
 * holds.  What was pushed is in pair_push_t and what one computation works
 * out in work_t: the passes over the active pairs are memory-bound, and
 * each of these three arrays is streamed only by the passes that need it
 * (one 112-byte record per pair made every pass stream all of it). */
/* node_t.inact flags */
enum { INACT_LISTED = 1, INACT_REPORTED = 2 };

typedef struct {
    int b;                 /* controller bucket index, -1 if not configured */
    uint8_t has_report;
    uint8_t throttled;     /* last report: r_left <= 0 and l_left <= 0 */
    uint64_t queued, arrivals;             /* last report */
    int64_t served;        /* served_r + served_l + served_o of the last
                              report (<= 2^53), period `period` */
    uint64_t period;       /* period of the last report of this bucket */
    estimate_demand_t dem;
} pair_t;

/* What the computations made of a pair: the demand estimate and the tokens
 * last pushed.  Same index as pair_t. */
typedef struct {
    int64_t tok_r, tok_l;  /* last pushed; tok_r < 0: unknown */
    int64_t grant;         /* limited bucket: the most this node may have
                              served in period gperiod by what was pushed
                              (served at the push + R + L, highest push) */
    uint64_t gperiod;      /* period of `grant`; other: none known */
    int64_t demand;        /* estimate for the rest of the period */
    double rate_used;      /* demand per interval at the last computation */
} pair_push_t;

/* One active pair during a computation, dense in active-list order: the
 * first pass fills it from the pair, the passes that build the problems and
 * read them back use only this. */
typedef struct {
    int b;                 /* as pair_t */
    int rk, lk;            /* its entry among its bucket's entries in the R /
                              L problem (pshift_bucket_allocs), -1 if none */
    uint8_t flags;         /* WORK_* */
    double arrivals;       /* as pair_t, after the idle reset */
    int64_t demand;        /* estimate, then the backlog floor */
    double rate_now;       /* demand per interval (before the floor) */
    int64_t queued;        /* as pair_t, after the idle reset */
} work_t;

enum {
    WORK_EST = 1,          /* estimated: configured and reported */
    WORK_CUR = 2,          /* reported in this period (or the next) */
    WORK_QUEUED = 4,       /* reported with requests waiting */
    WORK_QUIET = 8,        /* nothing queued, arrived or served this period */
};

/* What only the status needs of a pair: the last report's served counters
 * by kind.  Apart from pair_t so that the passes of a computation stream
 * fewer bytes. */
typedef struct {
    uint64_t r, l, o;
    uint64_t arrivals;     /* arrivals this period (only an unconfigured
                              bucket's are kept: for ctrl_unconfigured()) */
} pair_served_t;

typedef struct {
    char *name;
    uint64_t instance;     /* the registered process's id, 0 = not said */
    int up;
    uint8_t gone;          /* down by its goodbye: spends nothing more */
    uint64_t back_period;  /* period it came back in after falling silent
                              (same process): its grant of that period is
                              held as a down node's (UINT64_MAX: none) */
    uint64_t down_rep;     /* rep_period when it was last marked down */
    uint8_t forgotten;     /* down for forget_after periods: tables freed */
    int64_t last_seen;     /* round number, -1 never */
    uint32_t table;        /* the node's table generation */
    char **tnames;         /* the node's table (copies) */
    size_t ntable;
    int *jof;              /* [nbuckets]: controller bucket -> table index or -1 */
    uint32_t peer_table;   /* controller generation the node holds */
    int have_rep;
    uint64_t rep_period;
    uint32_t rep_interval;
    uint64_t completions;
    double busy;
    estimate_cap_t cap;
    double cap_used;       /* estimate at the last computation */
    double cons_used;      /* conservative capacity at the last computation */
    pair_t *pairs;         /* [ntable] */
    pair_push_t *push;     /* [ntable] */
    pair_served_t *served; /* [ntable] */
    /* Active pairs: reported (and not idle since) or holding tokens that
     * can change.  Every pass of a computation visits only these, so a
     * node whose table holds every configured bucket costs what its busy
     * buckets cost. */
    uint32_t *act;         /* table indices */
    size_t nact, capact;
    uint8_t *inact;        /* [ntable]: INACT_LISTED if in act, INACT_REPORTED
                              while ctrl_node_report() runs over a report */
    /* During a computation the IO ledger's work[k] for this node
     * (ctrl_t.io.n[its index]) is active pair act[k]'s. */
    int full_push;         /* next computation visits every pair once */
    int act_sorted;        /* act is in table order (sequential passes) */
    proto_tokens_rec_t *out;
    size_t nout, capout;
} node_t;

typedef struct {
    int64_t r, l;          /* tokens per period; l CTRL_UNLIMITED: no limit */
    /* per computation */
    int64_t served, r_rem, head;
    int64_t held;          /* what down nodes may still serve of it beyond
                              what they reported (held_by_silent()) */
    /* Token conversion (phase_convert), over the current period: R-tokens
     * converted (left unused while not backlogged) and served at the last
     * round. */
    double conv;
    int64_t srv_prev;
    uint8_t backlog;       /* queued on some up node at this round's reports */
    int64_t queued;        /* R pass: requests waiting on the up nodes, in
                              the last interval if it has no limit; else -1 */
    int nr;                /* R-problem entries (pairs with demand) */
    int nq;                /* up nodes where it is active and queued (rate
                              limits only, else 0) */
    int64_t ss_alloc;      /* R placed for a single-server bucket (nr == 1):
                              its `ra` points here */
    double arrivals;       /* over the up nodes, last interval */
    uint8_t prov;          /* its tokens are a provisional split (limited,
                              headroom left, no up node has reported it
                              this period): see prov_walk() in round.c */
    uint8_t walk;          /* this computation (re)writes or revokes that
                              split on every node holding the bucket */
    uint8_t fresh;         /* ... and the split begins with it */
    int pidx, lpidx;       /* bucket index in the R / L problem, -1 none */
    int rn, ln;            /* entries added to the R / L problem so far */
    int64_t ralloc, lalloc;
    const int64_t *ra, *la;/* its entries' allocations in the solved R / L
                              problem (pshift_bucket_allocs) */
} bstate_t;

/* One dimension's ledger (ledger.c): IOs (ctrl_t.io) and bytes (bytes.c)
 * are two ledgers run by the same passes, each in its own unit.  A
 * dimension fills its buckets' budgets inputs (r, l, served, held,
 * backlog, arrivals) and each up node's work array and capacities; the
 * ledger's passes do the rest: conversion, budgets, the R pass (single-server
 * buckets first, within the conservative capacities, backlog floor) and
 * the L pass; a dimension reads a pair's R back as ra[rk] and its L as
 * la[lk] of its bucket.  Owned by the ctrl_t (its thread). */

/* One node's side of a ledger's passes: ledger_t.n[node index]. */
typedef struct {
    /* During a computation work[k] is the node's k-th pair of the
     * dimension (IOs: active pair act[k]): the passes between the first and
     * the last stream it instead of missing the caches on pairs scattered
     * in a large table. */
    work_t *work;
    size_t nwork, capwork;
    /* ... and the positions k of the pairs that may want L-tokens (limited
     * bucket with headroom, demand), in increasing order: the L pass visits
     * only these. */
    uint32_t *lcand;
    size_t nlcand;
    int pidx;              /* server index in this round's problems */
    int64_t capt, load;    /* remaining capacity, R-tokens placed (tokens) */
    int64_t rcap;          /* R pass: conservative capacity left (tokens) */
    double rcut;           /* R pass: factor on the flexible buckets' demands
                              (< 1 when its single-server buckets need room) */
} lnode_t;

typedef struct {
    bstate_t *b;           /* [nb]: the buckets (not owned: the dimension's) */
    size_t nb;
    lnode_t *n;            /* [capn]: per node index */
    int capn;
    int hook;              /* its solves go to cfg.solve_hook (the IO one) */
    int queues;            /* its work_t.queued is known (IOs; the byte
                              records carry no queue): rq_begin() in
                              ledger.c applies */
    /* scratch for one computation */
    int *cnt, *given;      /* [nb] leftover spreading */
    size_t capcnt;
    int *srv_node;         /* [nn]: problem server index -> node */
    int capsrv;
    /* One node's entries for the R or L problem (problem bucket index,
     * demand), handed to pshift_set_demands() at once: [largest nwork]. */
    int32_t *eb;
    int64_t *ed;
    size_t cape;
    /* The R and L problems, emptied (pshift_problem_clear) and rebuilt
     * every computation: kept so that their memory is reused instead of
     * allocated anew each round. */
    pshift_problem_t *rp, *lp;
} ledger_t;

struct ctrl {
    ctrl_config_t cfg;
    bucketfile_t *bf;
    const char **bnames;
    uint32_t *bweights;    /* [nb]: the buckets' weights, table order */
    bstate_t *b;
    size_t nb;
    uint32_t table_gen;
    node_t *nodes;
    int nn, capn;
    strmap_t *node_ix;
    uint64_t period;
    uint32_t interval;
    double left;
    double lost;           /* share of the period the nodes held no usable
                              tokens at its start (ctrl_round_late()) */
    int lost_open;         /* the period's first round has not computed */
    uint64_t conv_period;  /* period the conversion state is of */
    double conv_left;      /* `left` at the last round's conversion */
    int conv_started;
    int64_t round_no;
    int started;
    int force;             /* next computation may not be skipped */
    ctrl_stats_t st;
    int64_t impl_logged[CTRL_IMPL__COUNT]; /* round of the last log, per reason */
    uint64_t impl_quiet[CTRL_IMPL__COUNT]; /* clamped since, not logged */
    double conv_el;        /* share of the period the last conversion covered */
    ledger_t io;           /* the IO dimension's passes (b: this b) */
    struct cbytes *by;     /* the bytes/s dimension (bytes.c); NULL while
                              no bucket has a byte rate */
};

/* Asks the CPU to fetch (for writing) the record of `size` bytes at `a`,
 * both cache lines it may straddle, ahead of its use: the active pairs of a
 * large table are scattered, and their indices are known in advance. */
#define PAIR_AHEAD 16
static inline void ctrl__prefetch(const void *a, size_t size)
{
    __builtin_prefetch(a, 1);
    __builtin_prefetch((const char *)a + size - 1, 1);
}

/* Counts summed over nodes or buckets (served, queued, demand, tokens)
 * saturate at CTRL_COUNT_MAX = 2^53: a report carries at most that per
 * count (proto check), a bucket gets at most that many tokens per period
 * (ctrl_set_buckets), so a saturated sum still says "more than any limit",
 * never wraps, and stays exact as a double.  Inputs are >= 0. */
#define CTRL_COUNT_MAX (INT64_C(1) << 53)
static inline int64_t ctrl__count_add(int64_t a, int64_t b)
{
    int64_t s;
    if (__builtin_add_overflow(a, b, &s) || s > CTRL_COUNT_MAX)
        return CTRL_COUNT_MAX;
    return s;
}

static inline uint64_t ctrl__ucount_add(uint64_t a, uint64_t b)
{
    uint64_t s;
    if (__builtin_add_overflow(a, b, &s) || s > (uint64_t)CTRL_COUNT_MAX)
        return (uint64_t)CTRL_COUNT_MAX;
    return s;
}

/* The most tokens a node's capacity counts for in a round (2^50: 3 x 10^11
 * IOs/s over an hour): 4,096 of them add up to at most 2^62. */
#define CTRL_NODE_TOKENS_MAX (INT64_C(1) << 50)

/* Records that (r, l) is pushed to pair pr / ps of the current period:
 * the tokens and, for a limited bucket, what the node may serve in the
 * period by them (ctrl_node_report() holds its served counts to that). */
/* Raises a limited pair's grant of the current period (*grant of period
 * *gperiod, either dimension) to what it may serve by a push of (r, l)
 * when it had served `base` this period. */
static inline void ctrl__grant_raise(const ctrl_t *c, int64_t *grant, uint64_t *gperiod,
                                     int64_t base, int64_t r, int64_t l)
{
    if (*gperiod != c->period) {
        *grant = 0;
        *gperiod = c->period;
    }
    int64_t g = ctrl__count_add(base, ctrl__count_add(r, l));
    if (g > *grant)
        *grant = g;
}

static inline void ctrl__pushed(const ctrl_t *c, const pair_t *pr, pair_push_t *ps, int64_t r,
                                int64_t l)
{
    ps->tok_r = r;
    ps->tok_l = l;
    if (l == CTRL_UNLIMITED)
        return;
    int64_t base = pr->has_report && pr->period == c->period ? pr->served : 0;
    ctrl__grant_raise(c, &ps->grant, &ps->gperiod, base, r, l);
}

/* Nonzero if node nd's grants are held against its buckets' limits
 * (held_by_silent() in round.c says why): down by silence, or back from
 * such a silence in this period. */
static inline int ctrl__holds_grants(const ctrl_t *c, const node_t *nd)
{
    return nd->have_rep && (nd->up ? nd->back_period == c->period : !nd->gone);
}

/* What a pair of node nd (ctrl__holds_grants()) may still serve beyond
 * `served` this period by its grant (*grant of period gperiod). */
static inline int64_t ctrl__grant_left(const ctrl_t *c, const node_t *nd, int64_t grant,
                                       uint64_t gperiod, int64_t served)
{
    if (gperiod == UINT64_MAX || gperiod < nd->down_rep || gperiod > c->period)
        return 0;
    return grant > served ? grant - served : 0;
}

/* round.c: appends a token record (bucket b, R r, L l) for node nd.
 * Returns 0 or -ENOMEM. */
int ctrl__push_rec(node_t *nd, uint32_t b, int64_t r, int64_t l);

/* ledger.c, the passes both dimensions run (ledger_t above).  All return
 * 0 or -ENOMEM (and the passes a pshift error).
 * ctrl__ledger_fit(): n[] holds node indices < nn (new ones zero).
 * ctrl__ledger_reserve(): node ln's work and lcand hold `n` pairs.
 * ctrl__ledger_scratch(): the scratch arrays fit nb, nn and every nwork.
 * ctrl__ledger_convert(): token conversion over the share `el` of the
 * period since the last round, restarted if `reset` (phase_convert() in
 * round.c says how).
 * ctrl__budget(): bucket bs's headroom and remaining reservation.
 * ctrl__ledger_budgets(): ctrl__budget() of every bucket, pass state cleared.
 * ctrl__ledger_caps(): node ln's capacities for the `rem_s` seconds left
 * from its estimate and conservative capacity (per second).
 * ctrl__ledger_rpass() / _lpass(): the R and L passes over the demands of
 * the up nodes' work (ledger.c says what they do; *rs gets their figures). */
int ctrl__ledger_fit(ledger_t *L, int nn);
int ctrl__ledger_reserve(lnode_t *ln, size_t n);
int ctrl__ledger_scratch(ledger_t *L, int nn);
void ctrl__ledger_convert(ledger_t *L, double el, int reset);
void ctrl__budget(const ctrl_t *c, bstate_t *bs);
void ctrl__ledger_budgets(const ctrl_t *c, ledger_t *L);
void ctrl__ledger_caps(lnode_t *ln, double est, double cons, double rem_s);
int ctrl__ledger_rpass(ctrl_t *c, ledger_t *L, const pshift_opts_t *o, ctrl_result_t *rs,
                       int *any_l);
int ctrl__ledger_lpass(ctrl_t *c, ledger_t *L, int any_l, const pshift_opts_t *o,
                       ctrl_result_t *rs);
void ctrl__ledger_free(ledger_t *L);

/* plausible.c: counts a value of node nd's that the controller does not
 * believe (`said`, taken as `kept`; about bucket `bucket`, NULL if none)
 * and logs it, at most once per CTRL_IMPL_LOG_ROUNDS rounds per reason. */
void ctrl__implausible(ctrl_t *c, const node_t *nd, ctrl_impl_t why, const char *bucket,
                       double said, double kept);

/* The most IOs per second node nd is believed to do: CTRL_PLAUSIBLE_FACTOR
 * x the larger of its profile and its estimate. */
double ctrl__plausible_rate(const node_t *nd);

/* Checks record r of node nd (pair p, configured) of a report of `period`
 * against what the controller granted and what the node can do (`ub`:
 * counts per period), and keeps in p and nd->served what it believes. */
void ctrl__report_rec(ctrl_t *c, node_t *nd, pair_t *p, const proto_report_rec_t *r,
                      uint64_t period, uint64_t ub);

/* bytes.c: the bytes/s dimension.  ctrl__bytes_config() takes the byte
 * rates of `bf` (the configuration that replaces `old`), keeping what the
 * nodes said of buckets that keep a byte rate; 0 or -ENOMEM (nothing
 * changed).  ctrl__bytes_compute() makes the byte records of a round
 * (`rem_s` seconds and `il` intervals left) by the ledger's passes (solved
 * with `o`, after the IO ones: phase_convert() set conv_el); 0, -ENOMEM or
 * a pshift error (no records then).  ctrl__bytes_info() adds bucket b's byte figures to
 * *out, ctrl__bytes_capacity() is node `node`'s byte rate while busy. */
typedef struct cbytes cbytes_t;
int ctrl__bytes_config(ctrl_t *c, const bucketfile_t *old, const bucketfile_t *bf);
int ctrl__bytes_compute(ctrl_t *c, double rem_s, double il, const pshift_opts_t *o);
void ctrl__bytes_info(const ctrl_t *c, int b, ctrl_bucket_info_t *out);
double ctrl__bytes_capacity(const ctrl_t *c, int node);
void ctrl__bytes_free(ctrl_t *c);

/* Frees down node `node`'s tables (ctrl_node_hello() on forget_after). */
void ctrl__node_forget(ctrl_t *c, int node);

/* Node `node`, or NULL if there is no such node. */
static inline node_t *ctrl__get_node(const ctrl_t *c, int node)
{
    return node >= 0 && node < c->nn ? &c->nodes[node] : NULL;
}

/* Index of controller bucket b in node nd's table, or -1 if the node does
 * not hold it. */
static inline int ctrl__node_slot(const node_t *nd, size_t b)
{
    return nd->jof ? nd->jof[b] : -1;
}

#endif
