/* ledger.h - one dimension's ledger of the controller's round (IOs, or bytes/s): from its buckets' budgets, each up node's demands and capacities, token conversion, budgets, the R pass and the L pass with pShift.
 *
 * A dimension (round.c for IOs, bytes.c for bytes) owns its buckets'
 * array (ledger_bucket_t: rates and this round's sums) and a ledger_t (the
 * passes' per-node work arrays, scratch and pShift problems).  Each round
 * it fills, in this order:
 *   ledger_fit()           room for its nodes
 *   the buckets' inputs    r, l, served, held, backlog, arrivals
 *   each node's work       ledger_reserve(), then work[0..nwork-1]: one
 *                          entry per pair (bucket, demand, arrivals, queue,
 *                          LEDGER_* flags)
 *   ledger_convert()       token conversion over the time elapsed
 *   ledger_scratch()       scratch for the passes
 *   ledger_budgets()       headroom and remaining reservation per bucket
 *   ledger_caps()          each node: up or down, its capacities
 *   ledger_rpass(), ledger_lpass()   (the R pass first runs rd.nest, the
 *                          nested buckets' split, if there is one)
 * and reads a pair's R back as ra[rk] of its bucket and its L as la[lk].
 * Nothing here knows nodes' tables or the controller's state: the inputs
 * are these arrays and ledger_round_t.
 *
 * Everything belongs to the one thread that owns the dimension's ctrl_t
 * (ctrl.h); nothing locks. */
#ifndef BQOS_LEDGER_H
#define BQOS_LEDGER_H

#include <stddef.h>
#include <stdint.h>

#include "controller/count.h"
#include "controller/ctrl.h"
#include "pshift/pshift.h"

struct ledger;

/* One pair (bucket, node) during a computation, dense in the dimension's
 * order (IOs: active-list order): the dimension fills b, flags, arrivals,
 * demand, rate_now and queued; the passes use only this. */
typedef struct {
    int b;                 /* the dimension's bucket index, < 0: none */
    int rk, lk;            /* its entry among its bucket's entries in the R /
                              L problem (pshift_bucket_allocs), -1 if none */
    uint8_t flags;         /* LEDGER_* */
    uint16_t kin;          /* requests in flight the node last said (IOs,
                              at most UINT16_MAX), 0: not said */
    double arrivals;       /* last interval (IOs: after the idle reset) */
    int64_t demand;        /* estimate, then the backlog floor */
    double rate_now;       /* demand per interval (before the floor) */
    int64_t queued;        /* requests waiting (IOs only; bytes 0) */
} ledger_work_t;

enum {
    LEDGER_EST = 1,        /* estimated: configured and reported */
    LEDGER_CUR = 2,        /* reported in this period (or the next) */
    LEDGER_QUEUED = 4,     /* reported with requests waiting */
    LEDGER_QUIET = 8,      /* nothing queued, arrived or served this period */
};

/* One bucket of a dimension: its rates (the dimension's, kept across
 * rounds), the inputs it fills each round, and the passes' results. */
typedef struct {
    int64_t r, l;          /* tokens per period; l CTRL_UNLIMITED: no limit */
    /* inputs, per computation */
    int64_t served;        /* this period, every node */
    int64_t held;          /* what down nodes may still serve of it beyond
                              what they reported (their grants) */
    uint8_t backlog;       /* queued on some up node at this round's reports */
    uint8_t alt;           /* R pass: has an R pair on an up node that
                              rpass_cut() does not cut */
    uint8_t inplay;        /* on the dimension's list of buckets in play
                              (IOs: round.c) */
    float carry;           /* R pass, with alt: R-tokens its requests in
                              flight on the up nodes not cut carry (w->kin x
                              ln->kr summed; INFINITY where one is unknown) */
    double arrivals;       /* over the up nodes, last interval */
    /* Token conversion (ledger_convert), over the current period: R-tokens
     * converted (left unused while not backlogged) and served at the last
     * round. */
    double conv;
    int64_t srv_prev;
    uint64_t cseq;         /* lazy ledgers (ledger_t.lazy): conv and srv_prev
                              are as of conversion round cseq */
    /* results, per computation */
    int64_t r_rem, head;   /* remaining reservation, headroom (budgets) */
    int64_t queued;        /* R pass: requests waiting on the up nodes, in
                              the last interval if it has no limit; else -1 */
    int nr;                /* R-problem entries (pairs with demand) */
    int nq;                /* up nodes where it is active and queued (rate
                              limits only, else 0) */
    int64_t ss_alloc;      /* R placed for a single-server bucket (nr == 1):
                              its `ra` points here */
    int pidx, lpidx;       /* bucket index in the R / L problem, -1 none */
    int rn, ln;            /* entries added to the R / L problem so far */
    int64_t ralloc, lalloc;
    const int64_t *ra, *la;/* its entries' allocations in the solved R / L
                              problem (pshift_bucket_allocs) */
} ledger_bucket_t;

/* One node's side of a ledger's passes: ledger_t.n[node index]. */
typedef struct {
    /* During a computation work[k] is the node's k-th pair of the
     * dimension (IOs: active pair act[k]): the passes between the first and
     * the last stream it instead of missing the caches on pairs scattered
     * in a large table. */
    ledger_work_t *work;
    size_t nwork, capwork;
    /* ... and the positions k of the pairs that may want L-tokens (limited
     * bucket with headroom, demand), in increasing order: the L pass visits
     * only these. */
    uint32_t *lcand;
    size_t nlcand;
    uint8_t up;            /* in this round's problems (ledger_caps) */
    int pidx;              /* server index in this round's problems */
    int64_t capt, load;    /* remaining capacity, R-tokens placed (tokens) */
    int64_t rcap;          /* R pass: conservative capacity left (tokens) */
    int64_t rcap_c;        /* ... where a single-server bucket wants R there:
                              the confined capacity (estimate.h), <= rcap */
    double kr;             /* R pass: R-tokens one request in flight there
                              carries for the rest of the period (time left
                              / (2 x the backend's unloaded latency)), 0:
                              unknown */
    double rcut;           /* R pass: factor on the flexible buckets' demands
                              (< 1 when its single-server buckets need room) */
    uint8_t confd;         /* R pass: rcap lowered to rcap_c this build */
} ledger_node_t;

/* What a round's budgets and passes take besides the arrays. */
typedef struct {
    double conv_slack;     /* ctrl_config_t's: < 0 no conversion */
    double limit_depth;    /* ctrl_config_t's: >= 0 limits are rates */
    double rate_share;     /* limits being rates: the share of a period a
                              bucket's limit covers for the rest of this
                              one: left + lost + limit_depth / period_s */
    int on_queues;         /* the period's last round, and the dimension
                              knows its queues: R where the requests wait */
    int no_lift;           /* ... even where the queues fill a node (no
                              rq_lift(): ctrl_config_t.no_queue_lift) */
    ctrl_solve_hook_fn hook; /* after each solve, NULL: none */
    void *hook_arg;
    /* Nested buckets (controller/tree.h), NULL: no bucket has a parent.
     * Called by ledger_rpass() first, with the budgets done and the nodes'
     * capacities set: it may lower (never raise beyond what the tree
     * allows) the buckets' r_rem and head. */
    void (*nest)(struct ledger *L, void *arg);
    void *nest_arg;
} ledger_round_t;

typedef struct ledger {
    ledger_bucket_t *b;    /* [nb]: the buckets (not owned: the dimension's) */
    size_t nb;
    ledger_node_t *n;      /* [capn]: per node index, the first nn in use */
    int nn, capn;
    ledger_round_t rd;     /* this round's (ledger_budgets) */
    /* scratch for one computation */
    int *cnt;              /* [nb] after the R pass: up nodes where the
                              bucket is active this period */
    int *given;            /* [nb] for the dimension's spreading of the
                              headroom not placed: shares given so far */
    int *rb, *lb;          /* [nb]: bucket of each bucket index of the R / L
                              problem, in the order they were added (the
                              passes after a solve visit those, not the
                              whole table) */
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
    /* The buckets in play (`only`, nonly of them, owned by the dimension),
     * NULL: every bucket.  ledger_budgets(), the R pass's queue marks and
     * r_tokens and the L pass's l_tokens visit only these; the dimension
     * guarantees that every other bucket is quiet: no pair in the work,
     * nothing served, held or converted beyond R x el, and its pass state
     * (ralloc, lalloc, nr, cnt) as ledger_budgets() leaves it. */
    const uint32_t *only;
    size_t nonly;
    /* Lazy conversion (`lazy` set by the dimension before the first
     * round): each bucket's conv is brought up to date when it is
     * converted or budgeted, replaying the period's log of elapsed shares
     * (el[0..nel-1], of conversion rounds cseq0..cseq) on a bucket that
     * was quiet since its own cseq: the same additions in the same order as
     * a pass over every bucket each round, so conv is bit-exact. */
    int lazy;
    double *el;
    size_t nel, capel;
    uint64_t cseq, cseq0;
} ledger_t;

/* The most tokens a node's capacity counts for in a round (2^50: 3 x 10^11
 * IOs/s over an hour): 4,096 of them add up to at most 2^62. */
#define LEDGER_NODE_TOKENS_MAX (INT64_C(1) << 50)

/* Grants: what a node may serve of a limited bucket in a period by what
 * was pushed to it (served at the push + R + L, the highest push), in
 * either dimension; a bucket's `held` input adds up what silent nodes may
 * still serve by theirs. */

/* Raises a limited pair's grant of `period` (*grant of period *gperiod) to
 * what it may serve by a push of (r, l) when it had served `base` this
 * period. */
static inline void ledger_grant_raise(uint64_t period, int64_t *grant, uint64_t *gperiod,
                                      int64_t base, int64_t r, int64_t l)
{
    if (*gperiod != period) {
        *grant = 0;
        *gperiod = period;
    }
    int64_t g = count_add(base, count_add(r, l));
    if (g > *grant)
        *grant = g;
}

/* What a pair of a node whose grants are held (down by silence since its
 * report of period `down_rep`, or back from such a silence) may still
 * serve beyond `served` in `period` by its grant (grant of period
 * gperiod). */
static inline int64_t ledger_grant_left(uint64_t period, uint64_t down_rep, int64_t grant,
                                        uint64_t gperiod, int64_t served)
{
    if (gperiod == UINT64_MAX || gperiod < down_rep || gperiod > period)
        return 0;
    return grant > served ? grant - served : 0;
}

/* Sets the buckets (b[nb], borrowed) and the nodes (nn) of this round:
 * L->n holds nn node entries (new ones zero and down).  Returns 0 or
 * -ENOMEM. */
int ledger_fit(ledger_t *L, ledger_bucket_t *b, size_t nb, int nn);

/* Makes node ln's work and lcand hold `n` pairs.  Returns 0 or -ENOMEM. */
int ledger_reserve(ledger_node_t *ln, size_t n);

/* Makes the scratch arrays fit the buckets, the nodes and every node's
 * nwork.  Returns 0 or -ENOMEM. */
int ledger_scratch(ledger_t *L);

/* Token conversion over the share `el` of the period since the last round
 * (restarted at zero if `reset`): a bucket that is not backlogged adds to
 * its conv the part of R x el it was not served (phase_convert() in
 * round.c says why). */
void ledger_convert(ledger_t *L, double el, int reset);

/* A lazy ledger's conversion over the share `el` of the period (restarted
 * if `reset`): logs el, then converts only the n buckets in `only` (each
 * first brought up to date, ledger_settle()); every other bucket's is
 * replayed when it is next settled.  Returns 0 or -ENOMEM (the log could
 * not grow: nothing changed). */
int ledger_convert_some(ledger_t *L, double el, int reset, const uint32_t *only, size_t n);

/* Brings bucket bs's conversion of a lazy ledger up to the last
 * conversion round (it was quiet since its own): no-op if it is there or
 * the ledger is not lazy. */
void ledger_settle(const ledger_t *L, ledger_bucket_t *bs);

/* Every bucket's (L->only: the buckets in play's) remaining reservation
 * (less what it converted beyond the slack) and headroom, by the round's
 * `rd` (kept in L for the passes); the passes' state cleared. */
void ledger_budgets(ledger_t *L, const ledger_round_t *rd);

/* One bucket's budget by the round's rules `rd`: its remaining
 * reservation (less what it converted beyond the slack, if
 * rd->conv_slack >= 0) and its headroom (its limit less served and held;
 * limits being rates, at most its pro-rata share; ledger.c says how), the
 * reservation at most the headroom.  Reads r, l, served, held, conv; sets
 * r_rem and head.  ledger_budgets() runs it on every bucket; the nested
 * buckets (tree.c) on a parent's sums. */
void ledger_budget(const ledger_round_t *rd, ledger_bucket_t *bs);

/* Node `i` is in this round's problems if `up`, with `est` and `cons`
 * (conservative) capacity per second for the `rem_s` seconds left, and
 * `conf` (the confined capacity, estimate.h; at most `cons`) where a
 * single-server bucket wants R there. */
void ledger_caps(ledger_t *L, int i, int up, double est, double cons, double conf, double rem_s);

/* The R pass over the up nodes' work (ledger.c says what it does): fills
 * each bucket's ra and ralloc, each node's load and lcand, and of *rs
 * buckets, pairs, phi, r_tokens and the R times; sets *any_l if some pair
 * may want L-tokens.  Returns 0, -ENOMEM or a pshift error. */
int ledger_rpass(ledger_t *L, const pshift_opts_t *o, ctrl_result_t *rs, int *any_l);

/* The L pass on the capacity and headroom the R pass left (only if
 * `any_l`): fills each limited bucket's la and lalloc, and of *rs
 * l_tokens, lpass_shifts and the L times.  Returns 0, -ENOMEM or a pshift
 * error. */
int ledger_lpass(ledger_t *L, int any_l, const pshift_opts_t *o, ctrl_result_t *rs);

/* Frees what L owns (not the buckets) and zeroes it.  Accepts a zeroed L. */
void ledger_free(ledger_t *L);

#endif
