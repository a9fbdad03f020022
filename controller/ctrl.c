/* ctrl.c - the controller's control-loop state: accounting, estimates, the R and L pShift passes, tokens per node. */
#include "controller/ctrl.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/strmap.h"
#include "controller/estimate.h"
#include "pshift/pshift.h"

_Static_assert(BUCKETFILE_MAX_WEIGHT <= PROTO_WEIGHT_MAX, "bucket weights must fit the protocol");

/* One (bucket, node) pair: the node's last report for the bucket and the
 * demand estimator's state.  Indexed by the node's table index, so every
 * pass over the pairs is sequential and touches only buckets the node
 * holds.  What was pushed is in pair_push_t and what one computation works
 * out in work_t: the passes over the active pairs are memory-bound, and
 * each of these three arrays is streamed only by the passes that need it
 * (one 112-byte record per pair made every pass stream all of it). */
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
} pair_served_t;

typedef struct {
    char *name;
    int up;
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
    pair_t *pairs;         /* [ntable] */
    pair_push_t *push;     /* [ntable] */
    pair_served_t *served; /* [ntable] */
    /* Active pairs: reported (and not idle since) or holding tokens that
     * can change.  Every pass of a computation visits only these, so a
     * node whose table holds every configured bucket costs what its busy
     * buckets cost. */
    uint32_t *act;         /* table indices */
    size_t nact, capact;
    uint8_t *inact;        /* [ntable]: 1 if in act */
    /* During a computation, work[k] is active pair act[k]'s: the passes
     * between the first and the last stream it instead of missing the
     * caches on pairs scattered in a large table. */
    work_t *work;
    size_t capwork;
    /* ... and the positions k of the pairs that may want L-tokens (limited
     * bucket with headroom, demand), in increasing order: the L pass visits
     * only these. */
    uint32_t *lcand;
    size_t nlcand;
    int full_push;         /* next computation visits every pair once */
    int act_sorted;        /* act is in table order (sequential passes) */
    proto_tokens_rec_t *out;
    size_t nout, capout;
    int pidx;              /* server index in this round's problems */
    int64_t capt, load;    /* remaining capacity, R-tokens placed (tokens) */
} node_t;

typedef struct {
    int64_t r, l;          /* tokens per period; l CTRL_UNLIMITED: no limit */
    /* per computation */
    int64_t served, r_rem, head;
    double arrivals;       /* over the up nodes, last interval */
    uint8_t prov;          /* its tokens are a provisional split (limited,
                              headroom left, no up node has reported it
                              this period): see prov_walk() */
    uint8_t walk;          /* this computation (re)writes or revokes that
                              split on every node holding the bucket */
    uint8_t fresh;         /* ... and the split begins with it */
    int pidx, lpidx;       /* bucket index in the R / L problem, -1 none */
    int rn, ln;            /* entries added to the R / L problem so far */
    int64_t ralloc, lalloc;
    const int64_t *ra, *la;/* its entries' allocations in the solved R / L
                              problem (pshift_bucket_allocs) */
} bstate_t;

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
    int64_t round_no;
    int started;
    int force;             /* next computation may not be skipped */
    int computed_once;
    uint64_t last_period_computed;
    ctrl_stats_t st;
    /* scratch for one computation */
    int *cnt, *given;      /* [nbuckets] leftover spreading */
    size_t capcnt;
    int *srv_node;         /* [nn]: problem server index -> node */
    int capsrv;
    /* One node's entries for the R or L problem (problem bucket index,
     * demand), handed to pshift_set_demands() at once: [largest nact]. */
    int32_t *eb;
    int64_t *ed;
    size_t cape;
    /* The R and L problems, emptied (pshift_problem_clear) and rebuilt
     * every computation: kept so that their memory is reused instead of
     * allocated anew each round. */
    pshift_problem_t *rp, *lp;
};

/* Asks the CPU to fetch (for writing) the record of `size` bytes at `a`,
 * both cache lines it may straddle, ahead of its use: the active pairs of a
 * large table are scattered, and their indices are known in advance. */
#define PAIR_AHEAD 16
static inline void rec_prefetch(const void *a, size_t size)
{
    __builtin_prefetch(a, 1);
    __builtin_prefetch((const char *)a + size - 1, 1);
}

ctrl_config_t ctrl_config_default(void)
{
    return (ctrl_config_t){
        .period_s = 1.0,
        .intervals = 5,
        .threads = 1,
        .down_after = 3,
        .skip_rel = 0.10,
        .skip_abs = 2,
        .default_capacity = 50000,
    };
}

ctrl_t *ctrl_new(const ctrl_config_t *cfg)
{
    if (!cfg || !(cfg->period_s > 0) || cfg->intervals < 1 || cfg->down_after < 1)
        return NULL;
    ctrl_t *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->cfg = *cfg;
    if (!(c->cfg.default_capacity >= 1))
        c->cfg.default_capacity = 50000;
    c->bf = bucketfile_new();
    c->node_ix = strmap_new();
    if (!c->bf || !c->node_ix) {
        ctrl_destroy(&c);
        return NULL;
    }
    c->table_gen = cfg->table_seed ? cfg->table_seed : 1;
    c->left = 1;
    c->force = 1;
    return c;
}

static void node_free(node_t *n)
{
    free(n->name);
    for (size_t i = 0; i < n->ntable; i++)
        free(n->tnames[i]);
    free(n->tnames);
    free(n->jof);
    free(n->pairs);
    free(n->push);
    free(n->served);
    free(n->work);
    free(n->lcand);
    free(n->act);
    free(n->inact);
    free(n->out);
}

void ctrl_destroy(ctrl_t **cp)
{
    if (!cp || !*cp)
        return;
    ctrl_t *c = *cp;
    for (int i = 0; i < c->nn; i++)
        node_free(&c->nodes[i]);
    free(c->nodes);
    strmap_destroy(&c->node_ix);
    bucketfile_destroy(&c->bf);
    free(c->bnames);
    free(c->bweights);
    free(c->b);
    free(c->cnt);
    free(c->given);
    free(c->srv_node);
    free(c->eb);
    free(c->ed);
    pshift_problem_destroy(&c->rp);
    pshift_problem_destroy(&c->lp);
    free(c);
    *cp = NULL;
}

const ctrl_config_t *ctrl_config(const ctrl_t *c)
{
    return &c->cfg;
}

static void pair_init(pair_t *p, pair_push_t *pp, int b)
{
    memset(p, 0, sizeof *p);
    p->b = b;
    p->period = UINT64_MAX;
    p->throttled = 1; /* no tokens left known */
    *pp = (pair_push_t){.tok_r = -1, .tok_l = CTRL_UNLIMITED};
}

static int64_t rate_to_tokens(int64_t rate, double period_s)
{
    double t = round((double)rate * period_s);
    return t > (double)(INT64_C(1) << 53) ? (INT64_C(1) << 53) : (int64_t)t;
}

/* Points node n's pairs at the buckets of `bf` and rebuilds its reverse
 * index into `jof` (nb entries, owned by the node afterwards). */
static void node_remap(const bucketfile_t *bf, node_t *n, int *jof, size_t nb)
{
    for (size_t b = 0; b < nb; b++)
        jof[b] = -1;
    for (size_t j = 0; j < n->ntable; j++) {
        int b = bucketfile_find(bf, n->tnames[j]);
        n->pairs[j].b = b;
        if (b >= 0)
            jof[b] = (int)j;
    }
    free(n->jof);
    n->jof = jof;
}

int ctrl_set_buckets(ctrl_t *c, const bucketfile_t *bf)
{
    size_t nb = bucketfile_count(bf);
    bucketfile_t *copy = bucketfile_dup(bf);
    const char **names = calloc(nb ? nb : 1, sizeof *names);
    uint32_t *weights = calloc(nb ? nb : 1, sizeof *weights);
    bstate_t *bs = calloc(nb ? nb : 1, sizeof *bs);
    int **jofs = calloc(c->nn ? (size_t)c->nn : 1, sizeof *jofs);
    if (!copy || !names || !weights || !bs || !jofs)
        goto fail;
    for (int i = 0; i < c->nn; i++)
        if (!(jofs[i] = malloc((nb ? nb : 1) * sizeof **jofs)))
            goto fail;
    for (size_t b = 0; b < nb; b++) {
        const bucketfile_bucket_t *x = bucketfile_get(copy, b);
        names[b] = x->name;
        weights[b] = x->weight;
        bs[b].r = rate_to_tokens(x->reservation, c->cfg.period_s);
        bs[b].l = x->limit == BUCKETFILE_NO_LIMIT ? CTRL_UNLIMITED
                                                   : rate_to_tokens(x->limit, c->cfg.period_s);
    }
    for (int i = 0; i < c->nn; i++) {
        node_remap(copy, &c->nodes[i], jofs[i], nb);
        c->nodes[i].nout = 0;
        c->nodes[i].full_push = 1; /* new buckets' limits must reach every node */
    }
    free(jofs);
    bucketfile_destroy(&c->bf);
    c->bf = copy;
    free(c->bnames);
    c->bnames = names;
    free(c->bweights);
    c->bweights = weights;
    free(c->b);
    c->b = bs;
    c->nb = nb;
    c->table_gen++;
    if (c->table_gen == 0)
        c->table_gen = 1;
    c->force = 1;
    return 0;
fail:
    if (jofs)
        for (int i = 0; i < c->nn; i++)
            free(jofs[i]);
    free(jofs);
    free(bs);
    free(names);
    free(weights);
    bucketfile_destroy(&copy);
    return -ENOMEM;
}

uint32_t ctrl_table(const ctrl_t *c, const char *const **names, size_t *n)
{
    if (names)
        *names = c->bnames;
    if (n)
        *n = c->nb;
    return c->table_gen;
}

const uint32_t *ctrl_table_weights(const ctrl_t *c)
{
    return c->bweights;
}

int ctrl_node_find(const ctrl_t *c, const char *name)
{
    int v;
    if (!name || strmap_find(c->node_ix, name, strlen(name), &v) < 0)
        return -ENOENT;
    return v;
}

int ctrl_nnodes(const ctrl_t *c)
{
    return c->nn;
}

static node_t *get_node(const ctrl_t *c, int node)
{
    return node >= 0 && node < c->nn ? &c->nodes[node] : NULL;
}

/* Index of controller bucket b in node nd's table, or -1 if the node does
 * not hold it. */
static int node_slot(const node_t *nd, size_t b)
{
    return nd->jof ? nd->jof[b] : -1;
}

/* Puts table entry j on node nd's active list.  Returns 0 or -ENOMEM. */
static int act_add(node_t *nd, size_t j)
{
    if (nd->inact[j])
        return 0;
    if (nd->nact == nd->capact) {
        size_t cap = nd->capact ? nd->capact * 2 : 64;
        uint32_t *a = realloc(nd->act, cap * sizeof *a);
        if (!a)
            return -ENOMEM;
        nd->act = a;
        nd->capact = cap;
    }
    nd->act[nd->nact++] = (uint32_t)j;
    nd->inact[j] = 1;
    nd->act_sorted = 0;
    return 0;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

int ctrl_node_table(ctrl_t *c, int node, uint32_t table, const char *const *names, size_t n)
{
    node_t *nd = get_node(c, node);
    if (!nd || (n && !names))
        return -EINVAL;
    char **tn = calloc(n ? n : 1, sizeof *tn);
    pair_t *pairs = malloc((n ? n : 1) * sizeof *pairs);
    pair_push_t *push = malloc((n ? n : 1) * sizeof *push);
    pair_served_t *served = calloc(n ? n : 1, sizeof *served);
    int *jof = malloc((c->nb ? c->nb : 1) * sizeof *jof);
    uint8_t *inact = calloc(n ? n : 1, 1);
    uint32_t *act = malloc((n ? n : 1) * sizeof *act);
    if (!tn || !pairs || !push || !served || !jof || !inact || !act)
        goto nomem;
    for (size_t j = 0; j < n; j++) {
        if (!(tn[j] = strdup(names[j])))
            goto nomem;
        /* A bucket the node already had keeps its state. */
        int b = bucketfile_find(c->bf, names[j]);
        int old = b >= 0 ? node_slot(nd, (size_t)b) : -1;
        if (old >= 0) {
            pairs[j] = nd->pairs[old];
            push[j] = nd->push[old];
            served[j] = nd->served[old];
        } else
            pair_init(&pairs[j], &push[j], b);
    }
    for (size_t j = 0; j < nd->ntable; j++)
        free(nd->tnames[j]);
    free(nd->tnames);
    free(nd->pairs);
    free(nd->push);
    free(nd->served);
    free(nd->act);
    free(nd->inact);
    nd->tnames = tn;
    nd->pairs = pairs;
    nd->push = push;
    nd->served = served;
    nd->ntable = n;
    nd->table = table;
    nd->act = act;
    nd->capact = n ? n : 1;
    nd->nact = 0;
    nd->inact = inact;
    for (size_t j = 0; j < n; j++)
        if (pairs[j].has_report)
            act_add(nd, j); /* cannot fail: capacity n */
    nd->full_push = 1;
    node_remap(c->bf, nd, jof, c->nb);
    c->force = 1;
    return 0;
nomem:
    if (tn)
        for (size_t j = 0; j < n; j++)
            free(tn[j]);
    free(tn);
    free(pairs);
    free(push);
    free(served);
    free(inact);
    free(act);
    free(jof);
    return -ENOMEM;
}

int ctrl_node_hello(ctrl_t *c, const char *name, uint64_t capacity, uint32_t table,
                    const char *const *names, size_t n)
{
    if (!name || proto_name_check(name, strlen(name)) < 0)
        return -EINVAL;
    int idx = ctrl_node_find(c, name);
    if (idx < 0) {
        if (c->nn == c->capn) {
            int cap = c->capn ? c->capn * 2 : 8;
            node_t *nv = realloc(c->nodes, (size_t)cap * sizeof *nv);
            if (!nv)
                return -ENOMEM;
            c->nodes = nv;
            c->capn = cap;
        }
        node_t *nd = &c->nodes[c->nn];
        memset(nd, 0, sizeof *nd);
        nd->name = strdup(name);
        if (!nd->name || strmap_insert(c->node_ix, name, strlen(name), c->nn) < 0) {
            free(nd->name);
            return -ENOMEM;
        }
        nd->last_seen = -1;
        idx = c->nn++;
    }
    node_t *nd = &c->nodes[idx];
    double prof = capacity > 0 ? (double)capacity : c->cfg.default_capacity;
    if (!nd->cap.estimate || nd->cap.cfg.profile != prof) {
        estimate_cap_cfg_t cc = estimate_cap_defaults(prof);
        estimate_cap_init(&nd->cap, &cc);
    }
    int rc = ctrl_node_table(c, idx, table, names, n);
    if (rc < 0)
        return rc;
    /* Whatever we pushed before is unknown now (a restarted node starts
     * from defaults): push everything next time. */
    for (size_t j = 0; j < nd->ntable; j++)
        nd->push[j].tok_r = -1;
    nd->full_push = 1;
    nd->peer_table = 0;
    if (!nd->up && nd->last_seen >= 0) {
        c->st.nodes_back_up++;
        log_info("node %s is back", nd->name);
    }
    nd->up = 1;
    nd->last_seen = c->round_no;
    c->force = 1;
    return idx;
}

int ctrl_node_seen(ctrl_t *c, int node, uint32_t peer_table)
{
    node_t *nd = get_node(c, node);
    if (!nd)
        return -EINVAL;
    nd->last_seen = c->round_no;
    if (peer_table)
        nd->peer_table = peer_table;
    if (!nd->up) {
        nd->up = 1;
        c->st.nodes_back_up++;
        c->force = 1;
        for (size_t j = 0; j < nd->ntable; j++)
            nd->push[j].tok_r = -1;
        nd->full_push = 1;
        log_info("node %s is back", nd->name);
    }
    return 0;
}

int ctrl_node_goodbye(ctrl_t *c, int node)
{
    node_t *nd = get_node(c, node);
    if (!nd)
        return -EINVAL;
    if (nd->up) {
        nd->up = 0;
        nd->nout = 0;
        c->st.nodes_marked_down++;
        c->force = 1;
        log_info("node %s said goodbye: down", nd->name);
    }
    return 0;
}

uint32_t ctrl_node_table_gen(const ctrl_t *c, int node)
{
    const node_t *nd = get_node(c, node);
    return nd ? nd->table : 0;
}

int ctrl_node_up(const ctrl_t *c, int node)
{
    const node_t *nd = get_node(c, node);
    return nd && nd->up;
}

int ctrl_node_needs_names(const ctrl_t *c, int node)
{
    const node_t *nd = get_node(c, node);
    return nd && nd->peer_table != c->table_gen;
}

int ctrl_node_reported(const ctrl_t *c, int node)
{
    const node_t *nd = get_node(c, node);
    if (!nd || !nd->have_rep)
        return 0;
    return nd->rep_period > c->period ||
           (nd->rep_period == c->period && nd->rep_interval >= c->interval);
}

int ctrl_node_report(ctrl_t *c, int node, uint64_t period, uint32_t interval, uint32_t table,
                     uint32_t peer_table, uint64_t completions, double busy_seconds,
                     const proto_report_rec_t *recs, size_t n)
{
    node_t *nd = get_node(c, node);
    if (!nd)
        return -EINVAL;
    ctrl_node_seen(c, node, peer_table);
    if (table != nd->table)
        return -ESTALE;
    c->st.reports++;
    /* Only the current period, or the next one (a node whose timer fired a
     * little before ours), carries counters we can use. */
    if (c->started && period != c->period && period != c->period + 1) {
        c->st.stale_reports++;
        return 0;
    }
    double interval_s = c->cfg.period_s / c->cfg.intervals;
    if (nd->have_rep && nd->rep_period == period && interval == nd->rep_interval + 1 &&
        completions >= nd->completions && busy_seconds >= nd->busy)
        estimate_cap_update(&nd->cap, completions - nd->completions, busy_seconds - nd->busy,
                            interval_s);
    if (!nd->have_rep || period > nd->rep_period ||
        (period == nd->rep_period && interval >= nd->rep_interval)) {
        nd->have_rep = 1;
        nd->rep_period = period;
        nd->rep_interval = interval;
        nd->completions = completions;
        nd->busy = busy_seconds;
    }
    for (size_t i = 0; i < n; i++) {
        const proto_report_rec_t *r = &recs[i];
        if (r->bucket >= nd->ntable)
            return -EINVAL;
        if (i + PAIR_AHEAD < n && recs[i + PAIR_AHEAD].bucket < nd->ntable) {
            rec_prefetch(&nd->pairs[recs[i + PAIR_AHEAD].bucket], sizeof(pair_t));
            __builtin_prefetch(&nd->served[recs[i + PAIR_AHEAD].bucket], 1);
        }
        pair_t *p = &nd->pairs[r->bucket];
        if (p->b < 0) {
            c->st.unknown_records++;
            continue;
        }
        if (p->has_report && p->period != UINT64_MAX && period < p->period)
            continue; /* older than what we hold */
        p->queued = r->queued;
        p->arrivals = r->arrivals_interval;
        uint64_t sv = r->served_r + r->served_l + r->served_o;
        p->served = sv > (UINT64_C(1) << 53) ? (INT64_C(1) << 53) : (int64_t)sv;
        nd->served[r->bucket] = (pair_served_t){r->served_r, r->served_l, r->served_o};
        p->throttled = r->r_left <= 0 && r->l_left <= 0;
        p->period = period;
        p->has_report = 1;
        if (act_add(nd, r->bucket) < 0)
            return -ENOMEM;
    }
    return 0;
}

int ctrl_round_begin(ctrl_t *c, uint64_t period, uint32_t interval, double left)
{
    if (interval >= (uint32_t)c->cfg.intervals)
        return -EINVAL;
    if (!c->started || period != c->period)
        c->force = 1;
    c->started = 1;
    c->period = period;
    c->interval = interval;
    if (!(left > 0) || left > 1)
        left = (double)(c->cfg.intervals - (int)interval) / c->cfg.intervals;
    c->left = left;
    c->round_no++;
    c->st.rounds++;
    return 0;
}

uint64_t ctrl_period(const ctrl_t *c)
{
    return c->period;
}

uint32_t ctrl_interval(const ctrl_t *c)
{
    return c->interval;
}

static int64_t pair_served(const ctrl_t *c, const pair_t *p)
{
    if (!p->has_report || p->period != c->period)
        return 0;
    return p->served;
}

static int grow_scratch(ctrl_t *c)
{
    if (c->nb + 1 > c->capcnt) {
        size_t cap = c->nb + 1;
        int *a = realloc(c->cnt, cap * sizeof *a);
        if (!a)
            return -ENOMEM;
        c->cnt = a;
        int *g = realloc(c->given, cap * sizeof *g);
        if (!g)
            return -ENOMEM;
        c->given = g;
        c->capcnt = cap;
    }
    if (c->nn > c->capsrv) {
        int *sn = realloc(c->srv_node, (size_t)c->nn * sizeof *sn);
        if (!sn)
            return -ENOMEM;
        c->srv_node = sn;
        c->capsrv = c->nn;
    }
    size_t most = 0;
    for (int i = 0; i < c->nn; i++)
        if (c->nodes[i].nact > most)
            most = c->nodes[i].nact;
    if (most > c->cape) {
        int32_t *eb = realloc(c->eb, most * sizeof *eb);
        if (!eb)
            return -ENOMEM;
        c->eb = eb;
        int64_t *ed = realloc(c->ed, most * sizeof *ed);
        if (!ed)
            return -ENOMEM;
        c->ed = ed;
        c->cape = most;
    }
    return 0;
}

/* Sums a solved problem's allocation per bucket (into ralloc of the
 * buckets in the R problem, or lalloc of those in the L problem if
 * `lpass`) and keeps where each bucket's allocations are (ra / la).
 * Walks the problem's entries in its own order, sequentially. */
static void sum_alloc(ctrl_t *c, const pshift_problem_t *p, int lpass)
{
    for (size_t b = 0; b < c->nb; b++) {
        bstate_t *bs = &c->b[b];
        int pi = lpass ? bs->lpidx : bs->pidx;
        if (pi < 0)
            continue;
        int64_t sum = 0;
        size_t ne = pshift_bucket_nentries(p, pi);
        const int64_t *al = pshift_bucket_allocs(p, pi);
        for (size_t k = 0; k < ne; k++)
            sum += al[k];
        if (lpass) {
            bs->lalloc = sum;
            bs->la = al;
        } else {
            bs->ralloc = sum;
            bs->ra = al;
        }
    }
}

/* Makes room for `n` more token records for node nd.  Returns 0 or
 * -ENOMEM. */
static int out_reserve(node_t *nd, size_t n)
{
    if (nd->capout - nd->nout >= n)
        return 0;
    size_t cap = nd->capout ? nd->capout * 2 : 64;
    while (cap - nd->nout < n)
        cap *= 2;
    proto_tokens_rec_t *o = realloc(nd->out, cap * sizeof *o);
    if (!o)
        return -ENOMEM;
    nd->out = o;
    nd->capout = cap;
    return 0;
}

/* Appends a token record for node nd, which has room for it (out_reserve). */
static inline void out_add(node_t *nd, uint32_t b, int64_t r, int64_t l)
{
    nd->out[nd->nout++] = (proto_tokens_rec_t){
        .bucket = b,
        .flags = l == CTRL_UNLIMITED ? PROTO_TOK_UNLIMITED : 0,
        .r_tokens = r,
        .l_tokens = l,
    };
}

static int push_rec(node_t *nd, uint32_t b, int64_t r, int64_t l)
{
    int rc = out_reserve(nd, 1);
    if (rc == 0)
        out_add(nd, b, r, l);
    return rc;
}

/* (int64_t)ceil(x) for 0 <= x < 2^63 without the libm call (once per
 * backlogged pair and round): t is exact in a double where x has a
 * fraction. */
static inline int64_t ceil_nonneg(double x)
{
    int64_t t = (int64_t)x;
    return t + ((double)t < x);
}

/* Makes room in node nd's work array for its active pairs.  Returns 0 or
 * -ENOMEM. */
static int work_reserve(node_t *nd)
{
    if (nd->capwork >= nd->nact)
        return 0;
    size_t cap = nd->capact > nd->nact ? nd->capact : nd->nact;
    work_t *w = realloc(nd->work, cap * sizeof *w);
    if (!w)
        return -ENOMEM;
    nd->work = w;
    uint32_t *lc = realloc(nd->lcand, cap * sizeof *lc);
    if (!lc)
        return -ENOMEM;
    nd->lcand = lc;
    nd->capwork = cap;
    return 0;
}

/* Keeps what a computation that stopped (skipped or failed) estimated:
 * the active pairs' demands, as its passes left them. */
static void work_keep_demand(ctrl_t *c)
{
    for (int i = 0; i < c->nn; i++) {
        node_t *nd = &c->nodes[i];
        if (!nd->up)
            continue;
        for (size_t k = 0; k < nd->nact; k++)
            nd->push[nd->act[k]].demand = nd->work[k].demand;
    }
}

/* Decides, after both passes, which limited buckets get a provisional
 * split: headroom left, but no up node has reported the bucket this period
 * and the estimates placed nothing for it (so it holds nothing to spend
 * when its demand appears, e.g. in the first interval of a period).  Sets
 * bs->prov, and bs->walk where prov_walk() must (re)write the split (new,
 * or a forced round: period start, node or configuration change) or revoke
 * it (a report brought the bucket into the computation).  Returns nonzero
 * if any bucket needs a walk. */
static int prov_plan(ctrl_t *c, int forced)
{
    int any = 0;
    for (size_t b = 0; b < c->nb; b++) {
        bstate_t *bs = &c->b[b];
        int was = bs->prov;
        bs->prov = bs->l != CTRL_UNLIMITED && bs->head > 0 && c->cnt[b] == 0 &&
                   bs->ralloc == 0 && bs->lalloc == 0;
        bs->walk = bs->prov ? (forced || !was) : was;
        bs->fresh = bs->prov && !was;
        any |= bs->walk;
    }
    return any;
}

/* Nonzero if pair pr (of a bucket no up node has reported this period) had
 * a report in the previous period. */
static int prov_recent(const ctrl_t *c, const pair_t *pr)
{
    return pr->has_report && c->period > 0 && pr->period == c->period - 1;
}

/* Writes the provisional splits prov_plan() asked for.  A bucket's split
 * goes to the up nodes where it was reported in the previous period, or if
 * there are none to every up node that holds it: its remaining reservation
 * as R-tokens and the rest of its headroom as L-tokens, each divided evenly
 * (the first nodes get one more token each for the remainder), so R + L
 * over all nodes is exactly the headroom and the limit stays hard.  The
 * other nodes holding it get R 0 and L 0.  A revoked split is set to R 0
 * and L 0 on the nodes where the pair is not active (the passes wrote the
 * active ones).  Pairs written here stay off the active lists: the bucket,
 * not its pairs, is revisited.  Returns 0 or -ENOMEM. */
static int prov_walk(ctrl_t *c)
{
    int rc;
    for (size_t b = 0; b < c->nb; b++) {
        bstate_t *bs = &c->b[b];
        if (!bs->walk)
            continue;
        int64_t n = 0, nrecent = 0;
        for (int i = 0; i < c->nn && bs->prov; i++) {
            node_t *nd = &c->nodes[i];
            int j = node_slot(nd, (size_t)b);
            if (!nd->up || j < 0)
                continue;
            n++;
            nrecent += prov_recent(c, &nd->pairs[j]);
        }
        int only_recent = nrecent > 0;
        if (only_recent)
            n = nrecent;
        int64_t rt = bs->r_rem, lt = bs->head - bs->r_rem, idx = 0;
        for (int i = 0; i < c->nn; i++) {
            node_t *nd = &c->nodes[i];
            int j = node_slot(nd, (size_t)b);
            if (!nd->up || j < 0)
                continue;
            pair_t *pr = &nd->pairs[j];
            int64_t r = 0, l = 0;
            int fresh = 0;
            if (!bs->prov) {
                if (nd->inact[j])
                    continue;
            } else if (!only_recent || prov_recent(c, pr)) {
                r = rt / n + (idx < rt % n);
                l = lt / n + (idx < lt % n);
                idx++;
                /* The node may have spent what we pushed before the split
                 * began; only an unbroken split is known to be intact. */
                fresh = bs->fresh;
            }
            pair_push_t *ps = &nd->push[j];
            if (!fresh && ps->tok_r == r && ps->tok_l == l)
                continue;
            if ((rc = push_rec(nd, (uint32_t)b, r, l)) < 0)
                return rc;
            ps->tok_r = r;
            ps->tok_l = l;
        }
    }
    return 0;
}

/* The first pass over up node nd's active pairs: adds their served
 * counters and arrivals to their buckets' sums, estimates their demands and
 * fills nd->work for the passes that follow.  Returns nonzero if `changed`
 * or if an estimate moved enough to be worth a recomputation. */
static int estimate_node(ctrl_t *c, node_t *nd, double il, int changed)
{
    const int cur_rep = nd->have_rep && nd->rep_period >= c->period;
    /* Sparse in a large table: fetch ahead, sequential access would not. */
    const int sparse = nd->nact * 4 <= nd->ntable;
    for (size_t k = 0; k < nd->nact; k++) {
        if (sparse && k + PAIR_AHEAD < nd->nact)
            rec_prefetch(&nd->pairs[nd->act[k + PAIR_AHEAD]], sizeof(pair_t));
        pair_t *pr = &nd->pairs[nd->act[k]];
        work_t *w = &nd->work[k];
        int64_t served = pair_served(c, pr);
        w->b = pr->b;
        w->flags = 0;
        w->demand = 0;
        w->arrivals = 0;
        if (pr->b >= 0)
            c->b[pr->b].served += served;
        if (pr->b >= 0 && pr->has_report) {
            /* Reported in an older period, and the node's report of this
             * one left it out: it is idle there (protocol.md), not still
             * showing the queue and arrivals of its last record. */
            if (pr->period < c->period && cur_rep) {
                pr->queued = pr->arrivals = 0;
                pr->throttled = 0;
            }
            w->demand = estimate_demand(&pr->dem, pr->queued, pr->arrivals, pr->throttled, il);
            w->arrivals = (double)pr->arrivals;
            c->b[pr->b].arrivals += w->arrivals;
            w->rate_now = il > 0 ? (double)w->demand / il : 0;
            w->flags = WORK_EST | (pr->period >= c->period ? WORK_CUR : 0) |
                       (pr->queued > 0 ? WORK_QUEUED : 0);
            if (!changed && estimate_changed(nd->push[nd->act[k]].rate_used, w->rate_now,
                                             c->cfg.skip_rel, c->cfg.skip_abs))
                changed = 1;
        }
        if (pr->queued == 0 && pr->arrivals == 0 && served == 0)
            w->flags |= WORK_QUIET;
    }
    return changed;
}

/* The last pass over up node nd's active pairs, after both solves: their
 * allocations become token records (nd->out) where they can change the
 * node's counts.  Headroom of a limited bucket that the estimates did not
 * place is split evenly (as L-tokens) over the up nodes where the bucket is
 * active this period, so a bucket whose demand moves between them is
 * served at once, never beyond its limit.  Pairs idle and holding nothing
 * that can change leave the active list.  Returns 0 or -ENOMEM. */
static int push_node(ctrl_t *c, node_t *nd)
{
    const int sparse = nd->nact * 4 <= nd->ntable;
    int rc = out_reserve(nd, nd->nact); /* at most one record per pair */
    if (rc < 0)
        return rc;
    size_t k = 0;
    while (k < nd->nact) {
        size_t j = nd->act[k];
        work_t *w = &nd->work[k];
        pair_push_t *ps = &nd->push[j];
        if (sparse && k + PAIR_AHEAD < nd->nact)
            rec_prefetch(&nd->push[nd->act[k + PAIR_AHEAD]], sizeof(pair_push_t));
        ps->demand = w->demand;
        if (w->flags & WORK_EST)
            ps->rate_used = w->rate_now;
        if (w->b < 0) {
            k++;
            continue;
        }
        bstate_t *bs = &c->b[w->b];
        int64_t r = w->rk >= 0 ? bs->ra[w->rk] : 0;
        int64_t l = bs->l == CTRL_UNLIMITED ? CTRL_UNLIMITED : 0;
        if (w->lk >= 0)
            l += bs->la[w->lk];
        if (bs->l != CTRL_UNLIMITED && (w->flags & WORK_CUR)) {
            int64_t left = bs->head - bs->ralloc - bs->lalloc;
            if (left > 0) {
                int n = c->cnt[w->b], idx = c->given[w->b]++;
                l += left / n + (idx < left % n ? 1 : 0);
            }
        }
        /* Zero R and an L that cannot change by consumption (0 or
         * unlimited), same as last time: the node already holds it.
         * A provisional split is written by prov_walk(). */
        if (!bs->prov &&
            !(ps->tok_r == 0 && r == 0 && l == ps->tok_l && (l == 0 || l == CTRL_UNLIMITED))) {
            out_add(nd, (uint32_t)w->b, r, l);
            ps->tok_r = r;
            ps->tok_l = l;
        }
        /* Idle and holding nothing that can change: off the list until
         * the node reports the bucket again. */
        if (w->demand == 0 && (w->flags & WORK_QUIET) &&
            (bs->prov || (ps->tok_r == 0 && (ps->tok_l == 0 || ps->tok_l == CTRL_UNLIMITED)))) {
            nd->inact[j] = 0;
            nd->act[k] = nd->act[--nd->nact];
            nd->work[k] = nd->work[nd->nact];
            nd->act_sorted = 0;
            continue;
        }
        k++;
    }
    return 0;
}

int ctrl_compute(ctrl_t *c, ctrl_result_t *res)
{
    ctrl_result_t rs = {0};
    int rc = 0;
    pshift_problem_t *p = NULL, *q = NULL;
    int estimated = 0;    /* the work arrays hold this round's estimates */
    int pushed = 0;       /* ... and they have been applied */
    const double K = c->cfg.intervals;
    const double il = c->left * K;                 /* intervals left */
    const double rem_s = c->left * c->cfg.period_s; /* seconds left */

    /* Liveness. */
    for (int i = 0; i < c->nn; i++) {
        node_t *nd = &c->nodes[i];
        nd->nout = 0;
        if ((rc = work_reserve(nd)) < 0)
            goto out;
        if (!nd->act_sorted) {
            qsort(nd->act, nd->nact, sizeof *nd->act, cmp_u32);
            nd->act_sorted = 1;
        }
        if (nd->up && c->round_no - nd->last_seen >= c->cfg.down_after) {
            nd->up = 0;
            rs.nodes_down_now++;
            c->st.nodes_marked_down++;
            c->force = 1;
            log_warn("node %s silent for %d intervals: down, re-planning its buckets",
                     nd->name, c->cfg.down_after);
        }
        rs.nodes_up += nd->up;
    }

    /* One pass over the pairs: served this period (every node, up or
     * down), demand estimates (up nodes), and whether any estimate moved
     * enough to be worth a recomputation. */
    const int forced = c->force;
    int changed = forced || c->cfg.skip_rel <= 0;
    for (size_t b = 0; b < c->nb; b++) {
        c->b[b].served = 0;
        c->b[b].arrivals = 0;
    }
    for (int i = 0; i < c->nn; i++) {
        node_t *nd = &c->nodes[i];
        if (!nd->up) {
            for (size_t k = 0; k < nd->nact; k++) {
                const pair_t *pr = &nd->pairs[nd->act[k]];
                if (pr->b >= 0)
                    c->b[pr->b].served += pair_served(c, pr);
            }
            continue;
        }
        if (estimate_changed(nd->cap_used, nd->cap.estimate, c->cfg.skip_rel,
                             c->cfg.skip_abs * K / c->cfg.period_s))
            changed = 1;
        changed = estimate_node(c, nd, il, changed);
    }
    estimated = 1;
    if (!changed) {
        c->st.skipped++;
        rs.skipped = 1;
        goto out;
    }
    if ((rc = grow_scratch(c)) < 0)
        goto out;

    for (size_t b = 0; b < c->nb; b++) {
        bstate_t *bs = &c->b[b];
        int64_t served = bs->served;
        bs->head = bs->l == CTRL_UNLIMITED ? CTRL_UNLIMITED
                                           : (bs->l > served ? bs->l - served : 0);
        bs->r_rem = bs->r > served ? bs->r - served : 0;
        if (bs->r_rem > bs->head)
            bs->r_rem = bs->head;
        bs->pidx = bs->lpidx = -1;
        bs->rn = bs->ln = 0;
        bs->ralloc = bs->lalloc = 0;
        c->cnt[b] = c->given[b] = 0;
    }

    /* The R problem: up servers with their remaining capacity, buckets
     * with a remaining reservation and demand. */
    if (!c->rp && !(c->rp = pshift_problem_new())) {
        rc = -ENOMEM;
        goto out;
    }
    p = c->rp;
    pshift_problem_clear(p);
    for (int i = 0; i < c->nn; i++) {
        node_t *nd = &c->nodes[i];
        nd->pidx = -1;
        if (!nd->up)
            continue;
        double capt = nd->cap.estimate * rem_s;
        nd->capt = capt > 0 ? (int64_t)capt : 0;
        nd->load = 0;
        nd->pidx = pshift_add_server(p, NULL, nd->capt);
        if (nd->pidx < 0) {
            rc = nd->pidx;
            goto out;
        }
        c->srv_node[nd->pidx] = i;
    }
    int any_l = 0;
    for (int i = 0; i < c->nn; i++) {
        node_t *nd = &c->nodes[i];
        nd->nlcand = 0;
        if (!nd->up)
            continue;
        size_t ne = 0;
        for (size_t k = 0; k < nd->nact; k++) {
            work_t *w = &nd->work[k];
            w->rk = w->lk = -1;
            if (w->b < 0)
                continue;
            if (w->flags & WORK_CUR)
                c->cnt[w->b]++; /* up nodes where it is active this period */
            bstate_t *bs = &c->b[w->b];
            /* Backlog floor: a bucket with requests waiting here wants more
             * than it got.  Its arrivals come from clients that wait for
             * answers (closed loop), so they only show the service it got:
             * estimated that way, a bucket sharing a server would never be
             * given more than its current rate.  While it is backlogged and
             * short of its reservation, its demand here is at least its
             * remaining reservation times this node's share of its
             * arrivals. */
            if ((w->flags & WORK_QUEUED) && bs->r_rem > 0) {
                double share = bs->arrivals > 0 ? w->arrivals / bs->arrivals : 1;
                int64_t floor_d = ceil_nonneg((double)bs->r_rem * share);
                if (w->demand < floor_d)
                    w->demand = floor_d;
            }
            if (w->demand <= 0)
                continue;
            if (bs->l != CTRL_UNLIMITED && bs->head > 0) {
                any_l = 1;
                nd->lcand[nd->nlcand++] = (uint32_t)k;
            }
            if (bs->r_rem <= 0)
                continue;
            if (bs->pidx < 0) {
                bs->pidx = pshift_add_bucket(p, NULL, bs->r_rem);
                if (bs->pidx < 0) {
                    rc = bs->pidx;
                    goto out;
                }
                rs.buckets++;
            }
            c->eb[ne] = bs->pidx;
            c->ed[ne++] = w->demand;
            /* Nodes are added in increasing server index, so this is the
             * bucket's rn-th entry in pshift's order too. */
            w->rk = bs->rn++;
            rs.pairs++;
        }
        if ((rc = pshift_set_demands(p, nd->pidx, c->eb, c->ed, ne)) < 0)
            goto out;
    }
    pshift_opts_t o = PSHIFT_OPTS_DEFAULT;
    o.threads = c->cfg.threads;
    o.approx_top = c->cfg.approx_top;
    if ((rc = pshift_solve(p, &o)) < 0)
        goto out;
    rs.phi = pshift_stats(p)->phi;
    rs.t_pshift += pshift_stats(p)->t_total;
    rs.t_rpass = pshift_stats(p)->t_total;
    if (c->cfg.solve_hook)
        c->cfg.solve_hook(p, 0, rs.t_rpass, c->cfg.solve_hook_arg);
    {
        /* Per bucket and per node totals straight from the solution (its
         * entries in order), so that the pass over the pairs below can read
         * back R and build the L problem at once. */
        int ns = pshift_nservers(p);
        sum_alloc(c, p, 0);
        for (int s = 0; s < ns; s++)
            c->nodes[c->srv_node[s]].load = pshift_server_load(p, s);
    }
    for (size_t b = 0; b < c->nb; b++)
        rs.r_tokens += c->b[b].ralloc;

    /* The L pass (paper III-D) on the residual capacity and demand: limited
     * buckets want the headroom left after R.  Buckets without a limit are
     * not throttled, need no L-tokens and must not take the residual from
     * limited ones, so they are left out, as are limited buckets with
     * nothing left to place.  Only the pairs the R pass listed as
     * candidates (nd->lcand) are visited; the token pass reads R back. */
    if (any_l) {
        if (!c->lp && !(c->lp = pshift_problem_new())) {
            rc = -ENOMEM;
            goto out;
        }
        q = c->lp;
        pshift_problem_clear(q);
        for (int i = 0; i < c->nn; i++) {
            node_t *nd = &c->nodes[i];
            if (!nd->up)
                continue;
            if ((rc = pshift_add_server(q, NULL, nd->capt > nd->load ? nd->capt - nd->load : 0)) <
                0)
                goto out;
        }
    }
    for (int i = 0; i < c->nn && q; i++) {
        node_t *nd = &c->nodes[i];
        size_t ne = 0;
        for (size_t x = 0; x < nd->nlcand; x++) {
            work_t *w = &nd->work[nd->lcand[x]];
            bstate_t *bs = &c->b[w->b];
            int64_t new_r = w->rk >= 0 ? bs->ra[w->rk] : 0;
            if (w->demand <= new_r || bs->head <= bs->ralloc)
                continue;
            if (bs->lpidx < 0) {
                bs->lpidx = pshift_add_bucket(q, NULL, bs->head - bs->ralloc);
                if (bs->lpidx < 0) {
                    rc = bs->lpidx;
                    goto out;
                }
            }
            c->eb[ne] = bs->lpidx;
            c->ed[ne++] = w->demand - new_r;
            w->lk = bs->ln++;
        }
        if (ne && (rc = pshift_set_demands(q, nd->pidx, c->eb, c->ed, ne)) < 0)
            goto out;
    }
    if (q) {
        if ((rc = pshift_solve(q, &o)) < 0)
            goto out;
        rs.t_pshift += pshift_stats(q)->t_total;
        rs.t_lpass = pshift_stats(q)->t_total;
        if (c->cfg.solve_hook)
            c->cfg.solve_hook(q, 1, rs.t_lpass, c->cfg.solve_hook_arg);
        rs.lpass_shifts = pshift_stats(q)->shifts;
        sum_alloc(c, q, 1);
    }
    for (size_t b = 0; b < c->nb; b++)
        if (c->b[b].l != CTRL_UNLIMITED)
            rs.l_tokens += c->b[b].head - c->b[b].ralloc;
    int any_walk = prov_plan(c, forced);

    /* Records per up node: everything that can change its counts. */
    for (int i = 0; i < c->nn; i++) {
        node_t *nd = &c->nodes[i];
        nd->cap_used = nd->cap.estimate;
        if (!nd->up)
            continue;
        if ((rc = push_node(c, nd)) < 0)
            goto out;
        /* Once after a (re)registration or a configuration change: every
         * other pair gets R 0 and, for a limited bucket, L 0, so that no
         * bucket is unthrottled on a node that has not reported it. */
        if (nd->full_push) {
            for (size_t j = 0; j < nd->ntable; j++) {
                int b = nd->pairs[j].b;
                pair_push_t *ps = &nd->push[j];
                if (nd->inact[j] || b < 0 || (c->b[b].prov && c->b[b].walk))
                    continue;
                int64_t l = c->b[b].l == CTRL_UNLIMITED ? CTRL_UNLIMITED : 0;
                if (ps->tok_r == 0 && ps->tok_l == l)
                    continue;
                if ((rc = push_rec(nd, (uint32_t)b, 0, l)) < 0)
                    goto out;
                ps->tok_r = 0;
                ps->tok_l = l;
            }
            nd->full_push = 0;
        }
    }
    if (any_walk && (rc = prov_walk(c)) < 0)
        goto out;
    c->force = 0;
    c->st.computed++;
    pushed = 1;
out:
    if (estimated && !pushed)
        work_keep_demand(c); /* skipped round or error */
    if (rc < 0)
        for (int i = 0; i < c->nn; i++)
            c->nodes[i].nout = 0;
    if (res)
        *res = rs;
    return rc;
}

size_t ctrl_node_tokens(const ctrl_t *c, int node, const proto_tokens_rec_t **recs)
{
    const node_t *nd = get_node(c, node);
    if (!nd || !nd->up) {
        if (recs)
            *recs = NULL;
        return 0;
    }
    if (recs)
        *recs = nd->out;
    return nd->nout;
}

int ctrl_nbuckets(const ctrl_t *c)
{
    return (int)c->nb;
}

int ctrl_bucket_info(const ctrl_t *c, int b, ctrl_bucket_info_t *out)
{
    if (b < 0 || (size_t)b >= c->nb)
        return -EINVAL;
    const bucketfile_bucket_t *x = bucketfile_get(c->bf, (size_t)b);
    memset(out, 0, sizeof *out);
    out->name = x->name;
    out->reservation = x->reservation;
    out->limit = x->limit;
    out->weight = x->weight;
    int unl = c->b[b].l == CTRL_UNLIMITED;
    for (int i = 0; i < c->nn; i++) {
        const node_t *nd = &c->nodes[i];
        int j = node_slot(nd, (size_t)b);
        if (j < 0)
            continue;
        const pair_t *p = &nd->pairs[j];
        if (p->has_report && p->period == c->period) {
            out->served_r += nd->served[j].r;
            out->served_l += nd->served[j].l;
            out->served_o += nd->served[j].o;
        }
        if (!nd->up)
            continue;
        if (p->has_report)
            out->queued += p->queued;
        const pair_push_t *ps = &nd->push[j];
        out->demand += ps->demand;
        out->servers += ps->demand > 0;
        if (ps->tok_r > 0)
            out->r_tokens += ps->tok_r;
        if (ps->tok_r >= 0 && !unl && ps->tok_l != CTRL_UNLIMITED)
            out->l_tokens += ps->tok_l;
    }
    if (unl)
        out->l_tokens = CTRL_UNLIMITED;
    return 0;
}

int ctrl_node_info(const ctrl_t *c, int n, ctrl_node_info_t *out)
{
    const node_t *nd = get_node(c, n);
    if (!nd)
        return -EINVAL;
    *out = (ctrl_node_info_t){
        .name = nd->name,
        .up = nd->up,
        .rounds_silent = nd->last_seen < 0 ? -1 : c->round_no - nd->last_seen,
        .capacity = nd->cap.estimate,
        .profile = nd->cap.cfg.profile,
        .buckets = nd->ntable,
        .period = nd->rep_period,
        .interval = nd->rep_interval,
    };
    return 0;
}

double ctrl_total_capacity(const ctrl_t *c)
{
    double s = 0;
    for (int i = 0; i < c->nn; i++)
        if (c->nodes[i].up)
            s += c->nodes[i].cap.estimate;
    return s;
}

double ctrl_bucket_capacity(const ctrl_t *c, const char *name)
{
    int b = bucketfile_find(c->bf, name);
    if (b < 0)
        return -1;
    double s = 0;
    int any = 0;
    for (int i = 0; i < c->nn; i++) {
        const node_t *nd = &c->nodes[i];
        int j = node_slot(nd, (size_t)b);
        if (!nd->up || j < 0)
            continue;
        const pair_t *p = &nd->pairs[j];
        if (!p->has_report)
            continue;
        if (nd->push[j].demand > 0 || p->queued > 0 || p->arrivals > 0) {
            s += nd->cap.estimate;
            any = 1;
        }
    }
    return any ? s : -1;
}

const ctrl_stats_t *ctrl_stats(const ctrl_t *c)
{
    return &c->st;
}
