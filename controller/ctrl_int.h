/* ctrl_int.h - private to the controller core (ctrl.c, round.c, plausible.c, capacity.c, push.c; tree.h's tree hangs from it): the controller state's structs and the few helpers more than one of them uses. */
#ifndef BQOS_CTRL_INT_H
#define BQOS_CTRL_INT_H

#include "common/strmap.h"
#include "controller/ctrl.h"
#include "controller/bytes.h"
#include "controller/dyn.h"
#include "controller/count.h"
#include "controller/estimate.h"
#include "controller/fair.h"
#include "controller/ledger.h"
#include "controller/tree.h"

/* Everything here belongs to the ctrl_t it hangs from, and so to the one
 * thread that owns that ctrl_t (ctrl.h); nothing locks.  Helpers shared by
 * the files carry the ctrl__ prefix. */

/* One (bucket, node) pair: the node's last report for the bucket and the
 * demand estimator's state.  Kept only for a pair that a record of the
 * node wrote (a report or its in-flight counts): node_t.pref[j] says which
 * slot of node_t.pst holds pair j's, and a pair without one reads as
 * ctrl__pair_none (what pair_init() made: never reported).  A full-table
 * node of a million idle buckets so costs 4 bytes per pair here, not 72
 * (issue 26).  What was pushed is in pair_push_t and what one computation
 * works out in ledger_work_t: the passes over the active pairs are
 * memory-bound, and each of these arrays is streamed only by the passes
 * that need it (one 112-byte record per pair made every pass stream all of
 * it). */
typedef struct {
    int bk;                /* controller bucket index, -1 if not configured;
                              read and written through ctrl__pair_b() and
                              ctrl__pair_set_b() (a pair without a slot
                              keeps it in node_t.pref) */
    uint8_t has_report;
    uint8_t throttled;     /* last report: r_left <= 0 and l_left <= 0 */
    uint64_t queued, arrivals;             /* last report */
    int64_t served;        /* served_r + served_l + served_o of the last
                              report (<= 2^53), period `period` */
    uint64_t period;       /* period of the last report of this bucket */
    estimate_demand_t dem;
    /* The last record itself (sparse reports, proto_predict_served()):
     * served as taken, in period bperiod at interval binterval. */
    uint64_t bserved, bperiod;
    uint32_t binterval;
    uint32_t inflight;     /* the most requests in flight the node last said
                              (report "inflight", issue 25); 0: not said */
    /* What the last computation made of it (written by the passes over
     * the active pairs, every one of which has a slot: a pair enters the
     * list by a record): */
    int64_t demand;        /* estimate for the rest of the period */
    double rate_used;      /* demand per interval at the last computation */
} pair_t;

/* The tokens last pushed to a pair, indexed by the node's table index
 * (every pair of a full table gets its record at the full push); the
 * demand estimate is the pair's slot's (pair_t: none without one). */
typedef struct {
    int64_t tok_r, tok_l;  /* last pushed; tok_r < 0: unknown */
    int64_t grant;         /* limited bucket: the most this node may have
                              served in period gperiod by what was pushed
                              (served at the push + R + L, highest push) */
    uint64_t gperiod;      /* period of `grant`; other: none known */
} pair_push_t;

/* What only the status needs of a pair: the last report's served counters
 * by kind.  Apart from pair_t so that the passes of a computation stream
 * fewer bytes; in the same slot (node_t.psv[pref[j]]), zero without one. */
typedef struct {
    uint64_t r, l, o;
    uint64_t arrivals;     /* arrivals this period (only an unconfigured
                              bucket's are kept: for ctrl_unconfigured()) */
} pair_served_t;

/* node_t.inact flags */
enum { INACT_LISTED = 1, INACT_REPORTED = 2 };

typedef struct {
    char *name;
    uint64_t instance;     /* the registered process's id, 0 = not said */
    int up;
    uint8_t gone;          /* down by its goodbye: spends nothing more */
    uint64_t back_period;  /* period it came back in after falling silent
                              (same process): its grant of that period is
                              held as a down node's (UINT64_MAX: none) */
    uint64_t down_rep;     /* rep_period when it was last marked down */
    uint8_t leases;        /* keeps to the fallback lease (its hello said) */
    uint8_t sparse;        /* may send sparse reports (its hello said): a
                              pair whose last record says it serves stays
                              active until a record says otherwise */
    uint64_t lease_from;   /* period it was last marked down in: it heard
                              us last in that period or before */
    uint8_t lease_ended;   /* its lease's end was noted (logged) */
    uint8_t forgotten;     /* down for forget_after periods: tables freed */
    int64_t last_seen;     /* round number, -1 never */
    uint32_t table;        /* the node's table generation */
    char **tnames;         /* the node's table: a copy of each name the
                              configuration lacks, NULL where pair j's
                              bucket names it (read by ctrl__tname()) */
    size_t ntable;
    int *jof;              /* [nbuckets]: controller bucket -> table index or -1 */
    uint32_t peer_table;   /* controller generation the node holds */
    int have_rep;
    uint64_t rep_period;
    uint32_t rep_interval;
    uint64_t completions;
    double busy;
    double base_s;         /* its backend's unloaded latency, seconds, from
                              its last report's base_us (0: not said) */
    estimate_cap_t cap;
    double cap_used;       /* estimate at the last computation */
    double cons_used;      /* conservative capacity at the last computation */
    double conf_used;      /* confined capacity (estimate.h) at the last computation */
    /* Shards (ctrl_node_set_slice()): the root step's slice of the node
     * for this controller, IOs/s; the computations place within the
     * smaller of it and the estimates.  sliced 0: no slice. */
    uint8_t sliced;
    double slice_est, slice_cons;
    /* Pair j's state: pref[j] >= 0 is its slot in pst and psv; < 0 it has
     * none (ctrl__pair_none) and its bucket is -pref[j] - 2 (-1: not
     * configured).  A slot is made at the pair's first record
     * (ctrl__pair_slot(), room from ctrl__pairs_reserve()) and kept while
     * the pair is in the table: at most one per pair (npst <= ntable). */
    int32_t *pref;         /* [ntable] */
    pair_t *pst;           /* [npst] */
    pair_served_t *psv;    /* [npst] */
    size_t npst, cappst;
    pair_push_t *push;     /* [ntable] */
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
    size_t tail_from;      /* names in parts: pairs from this index on were
                              appended since the last computation, which
                              visits them once as full_push does all */
    size_t captable;       /* room of tnames, pref, push, inact
                              (ctrl_node_table_part() appends) */
    int act_sorted;        /* act is in table order (sequential passes) */
    proto_tokens_rec_t *out;
    size_t nout, capout;
    /* The names of its table the configuration lacks (bucket < 0):
     * name -> j, so that a bucket added by ctrl_set_bucket() finds its
     * pair without a scan of the table.  NULL: none yet. */
    strmap_t *unconf;
} node_t;

/* A limited bucket's provisional split (prov_plan() in round.c): its
 * tokens are a provisional split (headroom left, no up node has reported
 * it this period); this computation (re)writes or revokes that split on
 * every node holding the bucket (walk), and the split begins with it
 * (fresh). */
typedef struct {
    uint8_t prov, walk, fresh;
} prov_t;

struct ctrl {
    ctrl_config_t cfg;
    bucketfile_t *bf;
    const char **bnames;
    uint32_t *bweights;    /* [nb]: the buckets' weights, table order */
    char *bshadow;         /* the buckets in shadow as the protocol's list
                              (proto_msg_t.shadow), "" if none; owned */
    ledger_bucket_t *b;    /* [nb]: the IO ledger's buckets */
    prov_t *pv;            /* [nb]: their provisional splits (round.c) */
    size_t nb;
    size_t capb;           /* room of bnames, bweights, b, pv and every
                              node's jof (ctrl_set_bucket() appends) */
    int64_t tok_total;     /* sum over buckets of max(R, L) tokens: what
                              ctrl_check_buckets() bounds, kept per change */
    int nshadow;           /* buckets in shadow */
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
    /* The buckets in play (round.c): every bucket with a pair in a node's
     * active list (up or down) or a silent node's grant since the list was
     * last pruned, and those whose sums, conversion or pass state the last
     * round left other than a quiet bucket's (ctrl_compute() prunes the
     * others after each round); play[0..nplay-1], each with
     * ledger_bucket_t.inplay set.  A round that is not forced visits only
     * these.  play_stale: the list may be wrong (a round failed), the next
     * round visits every bucket and rebuilds it. */
    uint32_t *play;
    size_t nplay, capplay;
    int play_stale;
    /* The buckets whose provisional split this round walks (pv[b].walk),
     * in increasing order (prov_plan()). */
    uint32_t *walkl;
    size_t nwalk;
    /* ctrl_shard_needs()'s per-bucket demand sums (shardctl.c): [capneed],
     * all zero between calls (each call zeroes what it wrote), so a call
     * costs the work, not the table; sized by the round (round.c). */
    int64_t *need_tot;
    size_t capneed;
    bytes_t *by;           /* the bytes/s dimension (bytes.h); NULL while
                              no bucket has a byte rate */
    tree_t *tree;          /* the nested buckets (tree.h); NULL while no
                              bucket has a parent */
    /* Template-made buckets (ctrl_tmpl.c, issue 27): the table is the
     * operator's buckets (conf, nconf of them) then the dynamic ones. */
    bucketfile_t *conf;    /* ctrl_set_buckets()'s, as given */
    int conf_stale;        /* ctrl_set_bucket()/ctrl_remove_bucket() changed the
                              table in place while it held no template-made
                              bucket: conf is the table itself (compose()
                              takes it from there) */
    size_t nconf;          /* table indexes below are configured */
    dyn_t *dyn;            /* the registry */
    int32_t *dyn_ix;       /* [nb - nconf]: table index - nconf -> dyn index */
    int dyn_dirty;         /* the registry changed: settle before computing */
    uint64_t dyn_period;   /* period of the last expiry */
    uint64_t dyn_r_zeroed; /* dynamic buckets held at R 0: it did not fit */
    uint64_t dyn_refused_logged; /* dyn refusals when last logged */
    fair_t *fair;          /* the fair shares (fair.h); NULL: cfg.shares off */
    /* The change log (ctrl_changes()): change number k is chlog[k %
     * CTRL_CHANGE_LOG]; chseq the newest, chreset the number taken by the
     * last whole new table (no entry). */
    ctrl_change_t *chlog;
    uint64_t chseq, chreset;
    /* Buckets a node reported served ahead, for a period after the
     * current one: ctrl_touched_buckets() adds them, as their pairs may
     * leave the active list before that period begins (a pair's served
     * count of another period reads 0 to the computation).  Dropped once
     * their period has passed (ctrl_round_begin()). */
    struct ctrl_ahead {
        int b;
        uint64_t period;
    } *ahead;
    size_t nahead, capahead;
    uint64_t ahead_lost;   /* one was not kept (out of memory): its
                              period + 1; 0: none */
};

/* ---- a node's pairs (node_t.pref, pst, psv) ---------------------------- */

/* The state of a pair without a slot: as pair_init() leaves it (never
 * reported, no tokens left known).  Its bk is not the pair's bucket. */
static const pair_t ctrl__pair_none = {.bk = -1, .throttled = 1, .period = UINT64_MAX};

/* Pair j's state (j < nd->ntable), read-only: its slot's or ctrl__pair_none.
 * Its bucket is ctrl__pair_b()'s, never this bk. */
static inline const pair_t *ctrl__pair(const node_t *nd, size_t j)
{
    int32_t r = nd->pref[j];
    return r >= 0 ? &nd->pst[r] : &ctrl__pair_none;
}

/* Pair j's slot, or NULL if it has none (never written by a record: a
 * caller that writes only a reported pair's state, has_report, finds it). */
static inline pair_t *ctrl__pair_held(node_t *nd, size_t j)
{
    int32_t r = nd->pref[j];
    return r >= 0 ? &nd->pst[r] : NULL;
}

/* Pair j's served counters by kind: its slot's, or zeros. */
static inline pair_served_t ctrl__pair_served(const node_t *nd, size_t j)
{
    int32_t r = nd->pref[j];
    return r >= 0 ? nd->psv[r] : (pair_served_t){0};
}

/* The controller bucket of pair j of nd, -1 if not configured. */
static inline int ctrl__pair_b(const node_t *nd, size_t j)
{
    int32_t r = nd->pref[j];
    return r >= 0 ? nd->pst[r].bk : -r - 2;
}

/* Sets the controller bucket of pair j of nd (any b < 0: not configured,
 * read back as -1). */
static inline void ctrl__pair_set_b(node_t *nd, size_t j, int b)
{
    int32_t r = nd->pref[j];
    if (b < 0)
        b = -1;
    if (r >= 0)
        nd->pst[r].bk = b;
    else
        nd->pref[j] = -b - 2;
}

/* Makes room for n more slots of nd (never beyond one per pair of its
 * table), so that ctrl__pair_slot() cannot fail for the next n pairs.
 * Returns 0 or -ENOMEM (nothing changed). ctrl.c. */
int ctrl__pairs_reserve(node_t *nd, size_t n);

/* Pair j's slot, made (pair_init()'s state, its bucket kept) if it had
 * none: ctrl__pairs_reserve() must have made the room. */
static inline pair_t *ctrl__pair_slot(node_t *nd, size_t j)
{
    int32_t r = nd->pref[j];
    if (r < 0) {
        r = (int32_t)nd->npst++;
        nd->pst[r] = ctrl__pair_none;
        nd->pst[r].bk = -nd->pref[j] - 2;
        nd->psv[r] = (pair_served_t){0};
        nd->pref[j] = r;
    }
    return &nd->pst[r];
}

/* The name of pair j of node nd: the bucket table's for a configured
 * bucket (tnames[j] NULL: not copied per node), else the node's copy. */
static inline const char *ctrl__tname(const ctrl_t *c, const node_t *nd, size_t j)
{
    return nd->tnames[j] ? nd->tnames[j] : c->bnames[ctrl__pair_b(nd, j)];
}

/* ctrl.c: replaces the table with a copy of bf as it is (ctrl_set_buckets()
 * before the template-made buckets were added to it). */
int ctrl__table_set(ctrl_t *c, const bucketfile_t *bf);

/* ctrl.c: ctrl_set_bucket() and ctrl_remove_bucket() in place, for a
 * table without byte rates, parents or template-made buckets (ctrl_tmpl.c
 * decides and takes the whole-table path otherwise).  x is valid and
 * passed ctrl_check_bucket().  Returns 0, -ENOENT (remove), -ENOMEM. */
int ctrl__set_bucket_here(ctrl_t *c, const bucketfile_bucket_t *x);
int ctrl__remove_bucket_here(ctrl_t *c, const char *name);

/* A node reported name `name` (not in the table) active: a template's,
 * it becomes a dynamic bucket at the next settle (ctrl_tmpl.c; inline so
 * that ctrl.c and ctrl_tmpl.c do not call each other). */
static inline void ctrl__dyn_note(ctrl_t *c, const char *name)
{
    const rules_t *r = bucketfile_rules(c->conf ? c->conf : c->bf); /* c->bf shares them */
    if (r && dyn_note(c->dyn, r, name, c->period) > 0)
        c->dyn_dirty = 1;
}

/* ctrl_tmpl.c: table bucket b (>= nconf) was reported active. */
static inline void ctrl__dyn_touch(ctrl_t *c, int b)
{
    if (b >= 0 && (size_t)b >= c->nconf && (size_t)b < c->nb)
        dyn_touch(c->dyn, (size_t)c->dyn_ix[(size_t)b - c->nconf], c->period);
}

/* ctrl_tmpl.c: before a computation: drops the idle dynamic buckets (once
 * per period) and, if the registry changed, makes the table again. */
void ctrl__dyn_settle(ctrl_t *c);

/* Asks the CPU to fetch (for writing) the record of `size` bytes at `a`,
 * both cache lines it may straddle, ahead of its use: the active pairs of a
 * large table are scattered, and their indices are known in advance. */
#define PAIR_AHEAD 16
static inline void ctrl__prefetch(const void *a, size_t size)
{
    __builtin_prefetch(a, 1);
    __builtin_prefetch((const char *)a + size - 1, 1);
}

/* Nonzero if down node nd keeps to the fallback lease and its lease has
 * surely ended: it renews its grant up to period lease_from +
 * fallback_lease by its own clock (it heard us last in lease_from or
 * before), and one period more covers its clock against ours. */
static inline int ctrl__lease_over(const ctrl_t *c, const node_t *nd)
{
    return nd->leases && c->period > nd->lease_from + (uint64_t)c->cfg.fallback_lease + 1;
}

/* Nonzero if node nd's grants are held against its buckets' limits
 * (held_by_silent() in round.c says why): down by silence, or back from
 * such a silence in this period. */
static inline int ctrl__holds_grants(const ctrl_t *c, const node_t *nd)
{
    return nd->have_rep &&
           (nd->up ? nd->back_period == c->period : !nd->gone && !ctrl__lease_over(c, nd));
}

/* ctrl.c: how the byte dimension (bytes.h) sees c's nodes now. */
bytes_view_t ctrl__bytes_view(const ctrl_t *c);

/* Sparse reports: pair j of sparse node nd whose last record is older than
 * the node's newest report was left out of the reports since, so it is as
 * proto_predict_served() says at that report: its served count carried on
 * (queue, arrivals and throttled state held).  Brings pair p (the pair's
 * state or a copy of it) up to that report: its served count and period.
 * Returns nonzero if it did (the pair is carried).  Called by the
 * computation's first pass over the active pairs (once per active pair and
 * round: the status's counts by class are left alone, see
 * ctrl__pair_classes()), and on copies by the status (a round may not have
 * run since). */
static inline int ctrl__pair_carry_p(const node_t *nd, pair_t *p)
{
    if (!nd->sparse || !p->has_report || p->bk < 0 || !nd->have_rep)
        return 0;
    if (p->bperiod > nd->rep_period ||
        (p->bperiod == nd->rep_period && p->binterval >= nd->rep_interval))
        return 0;
    /* A record of an idle pair (no queue, no arrivals, no rate to carry
     * on) predicts nothing in the periods after it: there the pair is
     * what a full report's absence says, idle and not reported, so its
     * bucket can have its provisional split again (carried forward, one
     * zero record held the bucket "reported" on that node for good). */
    if (p->period != nd->rep_period && !p->queued && !p->arrivals &&
        (!p->binterval || p->bserved < p->binterval))
        return 0;
    uint64_t s = proto_predict_served(p->bserved, p->bperiod, p->binterval, nd->rep_period,
                                      nd->rep_interval);
    p->served = s < (uint64_t)CTRL_COUNT_MAX ? (int64_t)s : CTRL_COUNT_MAX;
    /* The base stays the record: node and controller predict from the
     * same one (carrying it anew each round gives the same value). */
    p->period = nd->rep_period;
    return 1;
}

/* The status's served counts by class of a carried pair p (as
 * ctrl__pair_carry_p() left it, now or in an earlier round:
 * ctrl__pair_moved()), from its record's counts *sv (node_t.psv holds a
 * record's counts as taken, never carried): in the record's proportions
 * while the pair is in its record's period (p->bperiod; absent_base() in
 * ctrl.c makes the counts what they are as carried before it moves the
 * base), else all of it as "other" (the counters restarted).  Computed
 * when the status reads it, not in every round: the third array of a pair
 * is then streamed by no pass of a computation.  The same figures as
 * rescaling the counts at every carry but for the rounding (one scaling
 * from the record's counts, not one per round). */
static inline void ctrl__pair_classes(const pair_t *p, pair_served_t *sv)
{
    uint64_t s = p->served > 0 ? (uint64_t)p->served : 0;
    uint64_t was = count_uadd(count_uadd(sv->r, sv->l), sv->o);
    if (p->period != p->bperiod || was == 0) {
        *sv = (pair_served_t){.o = s};
        return;
    }
    double f = (double)s / (double)was;
    sv->r = (uint64_t)((double)sv->r * f);
    sv->l = (uint64_t)((double)sv->l * f);
    sv->o = s >= sv->r + sv->l ? s - sv->r - sv->l : 0;
}

/* Nonzero if pair p (configured, reported) is not as its record said: it
 * was carried, now or by an earlier round; its counts by class are then
 * ctrl__pair_classes()'s, not the record's. */
static inline int ctrl__pair_moved(const pair_t *p, const pair_served_t *sv)
{
    return p->has_report && p->bk >= 0 &&
           (p->period != p->bperiod ||
            (uint64_t)p->served != count_uadd(count_uadd(sv->r, sv->l), sv->o));
}

/* ctrl__pair_carry_p() on a copy p of a pair of nd and its counts by class
 * *sv (copies of the record's): both as of the node's newest report. */
static inline void ctrl__pair_carry_to(const node_t *nd, pair_t *p, pair_served_t *sv)
{
    (void)ctrl__pair_carry_p(nd, p);
    if (ctrl__pair_moved(p, sv))
        ctrl__pair_classes(p, sv);
}

/* ctrl__pair_carry_p() on pair j of nd itself (a pair without a slot was
 * never reported: nothing to carry). */
static inline void ctrl__pair_carry(node_t *nd, size_t j)
{
    int32_t r = nd->pref[j];
    if (r >= 0)
        (void)ctrl__pair_carry_p(nd, &nd->pst[r]);
}

/* Adds pair j of node nd (its bucket unlimited if `unl`) to the bucket's
 * figures *out: served this period (as of a sparse node's newest report),
 * queued, demand, servers, R and L tokens.  The per-pair part of
 * ctrl_bucket_info(); ctrl_bucket_info_many() (binfo.c) sums the same. */
static inline void ctrl__bucket_add_pair(const ctrl_t *c, const node_t *nd, size_t j, int unl,
                                         ctrl_bucket_info_t *out)
{
    pair_t pc = *ctrl__pair(nd, j);
    pc.bk = ctrl__pair_b(nd, j);
    (void)ctrl__pair_carry_p(nd, &pc);
    if (pc.has_report && pc.period == c->period) {
        /* the counts by class only where they are summed */
        pair_served_t sv = ctrl__pair_served(nd, j);
        if (ctrl__pair_moved(&pc, &sv))
            ctrl__pair_classes(&pc, &sv);
        out->served_r = count_uadd(out->served_r, sv.r);
        out->served_l = count_uadd(out->served_l, sv.l);
        out->served_o = count_uadd(out->served_o, sv.o);
    }
    if (!nd->up)
        return;
    if (pc.has_report)
        out->queued = count_uadd(out->queued, pc.queued);
    const pair_push_t *ps = &nd->push[j];
    out->demand = count_add(out->demand, pc.demand);
    out->servers += pc.demand > 0;
    if (ps->tok_r > 0)
        out->r_tokens = count_add(out->r_tokens, ps->tok_r);
    if (ps->tok_r >= 0 && !unl && ps->tok_l != CTRL_UNLIMITED)
        out->l_tokens = count_add(out->l_tokens, ps->tok_l);
}

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
