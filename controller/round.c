/* round.c - one interval's computation (ctrl_compute) as named phases: liveness, estimates, the IO ledger's budgets and R and L pShift passes (ledger.c), token records and the provisional splits of limited buckets no node reported (the byte round is in bytes.c). */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "controller/ctrl.h"
#include "controller/ctrl_int.h"

/* ctrl_compute() (at the end) runs the phases in this order:
 *   phase_liveness   silent nodes down, records emptied
 *   phase_estimate   served sums, grants of silent nodes held, demand
 *                    estimates; nothing moved: skipped
 *   phase_convert    unused reservation converted (every round, skipped too)
 *   budgets          headroom and remaining reservation per bucket
 *   R pass           single-server buckets first, then the R problem
 *                    within the conservative capacities: build, solve
 *   L pass           the L problem on the residual: build, solve, read back
 *   prov_plan        which limited buckets get a provisional split
 *   phase_push       token records per up node
 *   prov_walk        the provisional splits' records
 *   bytes            the byte ledger's round (bytes.c), every round
 * Conversion, budgets and the passes are the IO ledger's (ledger.c), which
 * the byte dimension runs too.  The helpers of the phases come first. */

/* ---- helpers ------------------------------------------------------------- */

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static int64_t pair_served(const ctrl_t *c, const pair_t *p)
{
    if (!p->has_report || p->period != c->period)
        return 0;
    return p->served;
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

/* Appends a token record (bucket b, R r, L l) for node nd.  Returns 0 or
 * -ENOMEM. */
static int push_rec(node_t *nd, uint32_t b, int64_t r, int64_t l)
{
    int rc = out_reserve(nd, 1);
    if (rc == 0)
        out_add(nd, b, r, l);
    return rc;
}

/* Records that (r, l) is pushed to pair pr / ps of the current period:
 * the tokens and, for a limited bucket, what the node may serve in the
 * period by them, its grant (ctrl_node_report() holds its served counts to
 * that). */
static inline void pushed(const ctrl_t *c, const pair_t *pr, pair_push_t *ps, int64_t r,
                          int64_t l)
{
    ps->tok_r = r;
    ps->tok_l = l;
    if (l == CTRL_UNLIMITED)
        return;
    int64_t base = pr->has_report && pr->period == c->period ? pr->served : 0;
    ledger_grant_raise(c->period, &ps->grant, &ps->gperiod, base, r, l);
}

/* How much older than this round the served counts it computes from are,
 * as a share of the period: a round that closed before a node's latest
 * report came computes from the one before, and that node nets its tokens
 * against what it served since that one (the tokens' basis, push_msg());
 * the rate cap counts the time since then as time left, or the node would
 * pay for that interval twice (report_delay.sh: red at 0.75 x L).  At most
 * one interval, and none before this period's start (a report of an older
 * period: the node nets everything of this one).  O(nodes). */
static double rep_age(const ctrl_t *c)
{
    uint32_t most = 0;
    for (int i = 0; i < c->nn && most < 1; i++) {
        const node_t *nd = &c->nodes[i];
        if (nd->up && nd->have_rep && nd->rep_period == c->period && nd->rep_interval < c->interval)
            most = c->interval - nd->rep_interval;
    }
    return most ? 1.0 / c->cfg.intervals : 0;
}

/* This round's ledger_round_t for the IO ledger (`io`: it knows the
 * queues and its solves go to the solve hook) or the byte one. */
static ledger_round_t ledger_round(const ctrl_t *c, int io)
{
    return (ledger_round_t){
        .conv_slack = c->cfg.conv_slack,
        .limit_depth = c->cfg.limit_depth,
        .rate_share = c->left + c->lost + rep_age(c) + c->cfg.limit_depth / c->cfg.period_s,
        .on_queues = io && c->interval + 1 == (uint32_t)c->cfg.intervals,
        .no_lift = c->cfg.no_queue_lift,
        .hook = io ? c->cfg.solve_hook : NULL,
        .hook_arg = c->cfg.solve_hook_arg,
        /* Nested buckets: only if some bucket has a parent (else no cost). */
        .nest = c->tree ? tree_budgets : NULL,
        .nest_arg = tree_dim(c->tree, io ? TREE_IO : TREE_BYTES),
    };
}

/* Keeps what a computation that failed estimated: the active pairs'
 * demands, as its passes left them (a skipped round's are written by
 * estimate_node()). */
static void work_keep_demand(ctrl_t *c)
{
    for (int i = 0; i < c->nn; i++) {
        node_t *nd = &c->nodes[i];
        if (!nd->up)
            continue;
        for (size_t k = 0; k < nd->nact; k++) {
            pair_t *pr = ctrl__pair_held(nd, nd->act[k]); /* every active pair has one */
            if (pr)
                pr->demand = c->io.n[i].work[k].demand;
        }
    }
}

/* ---- the buckets in play -------------------------------------------------- */

/* A round that is not forced visits only the buckets in play (ctrl_int.h:
 * c->play), not the table: the sums' reset, the conversion, the budgets,
 * prov_plan() and the passes' sums.  Every other bucket is quiet: no pair
 * in any node's active list and no silent node's grant since it left the
 * list, so nothing served, held, arriving or queued (the conversion adds
 * R x el to it, replayed when it is next read: ledger.h), and its pass
 * state as the budgets leave it; its provisional split is then what the
 * last round decided (prov_plan() says why it cannot change). */

/* Puts bucket b in play. */
static inline void play_add(ctrl_t *c, int b)
{
    ledger_bucket_t *bs = &c->b[b];
    if (!bs->inplay) {
        bs->inplay = 1;
        c->play[c->nplay++] = (uint32_t)b;
    }
}

/* Makes the list hold every bucket (and a shard's needs scratch).
 * Returns 0 or -ENOMEM. */
static int play_fit(ctrl_t *c)
{
    int sliced = 0; /* a shard's: the root step asks for its needs */
    for (int i = 0; i < c->nn && !sliced; i++)
        sliced = c->nodes[i].sliced;
    if (sliced && c->capneed < c->nb) { /* zeroed scratch of ctrl_shard_needs() */
        size_t cap = c->nb + c->nb / 4 + 16;
        int64_t *t = calloc(cap, sizeof *t);
        if (!t)
            return -ENOMEM;
        free(c->need_tot);
        c->need_tot = t;
        c->capneed = cap;
    }
    if (c->capplay >= c->nb)
        return 0;
    size_t cap = c->nb + c->nb / 4 + 16;
    uint32_t *p = realloc(c->play, cap * sizeof *p);
    if (!p)
        return -ENOMEM;
    c->play = p;
    uint32_t *w = realloc(c->walkl, cap * sizeof *w);
    if (!w)
        return -ENOMEM;
    c->walkl = w;
    c->capplay = cap;
    return 0;
}

/* Nonzero if bucket b must stay in play after this round: something in
 * its sums, conversion or pass state is not what a quiet bucket has. */
static inline int play_keep(const ctrl_t *c, size_t b)
{
    const ledger_bucket_t *bs = &c->b[b];
    return bs->served || bs->held || bs->arrivals != 0 || bs->backlog || bs->srv_prev ||
           bs->ralloc || bs->lalloc || bs->nr ||
           (c->io.cnt && b < c->io.capcnt && c->io.cnt[b]);
}

/* Nonzero if most buckets are in play: the passes then walk the table in
 * its order (the cache lines fetched ahead by the hardware) rather than
 * the list's, which is scattered (a pair's order). */
static inline int play_dense(const ctrl_t *c)
{
    return c->nplay * 4 >= c->nb && c->nb > 0;
}

/* After a computed round: the quiet buckets leave the list. */
static void play_prune(ctrl_t *c)
{
    size_t n = 0;
    for (size_t k = 0; k < c->nplay; k++) {
        uint32_t b = c->play[k];
        if (play_keep(c, b))
            c->play[n++] = b;
        else
            c->b[b].inplay = 0;
    }
    c->nplay = n;
}

/* A bucket's record is fetched this many pairs ahead of its use: its
 * index is in the pair, itself fetched PAIR_AHEAD ahead. */
#define BUCKET_AHEAD (PAIR_AHEAD / 2)

/* Asks for the sums of bucket b (< 0: none) that the first pass adds to. */
static inline void bucket_ahead(const ctrl_t *c, int b)
{
    if (b >= 0)
        ctrl__prefetch(&c->b[b], offsetof(ledger_bucket_t, arrivals) + sizeof(double));
}

/* The first pass over up node nd's active pairs: adds their served
 * counters and arrivals to their buckets' sums, estimates their demands and
 * fills its IO work (ln) for the passes that follow.  Returns nonzero if
 * `changed` or if an estimate moved enough to be worth a recomputation. */
static int estimate_node(ctrl_t *c, node_t *nd, ledger_node_t *ln, double il, int changed)
{
    const int cur_rep = nd->have_rep && nd->rep_period >= c->period;
    ln->nwork = nd->nact;
    for (size_t k = 0; k < nd->nact; k++) {
        /* Fetch ahead, the table sparse or dense (where every pair is
         * active, as in bqos-ctrl-bench's nodes, the hardware's streams fell
         * behind too: bqos-ctrl-prof --sparse --changing 0.1, 8 of 10
         * interleaved runs lower with it): the pair's slot number, then its
         * slot (a pair without one reads ctrl__pair_none), then its
         * bucket's sums. */
        if (k + PAIR_AHEAD < nd->nact)
            __builtin_prefetch(&nd->pref[nd->act[k + PAIR_AHEAD]], 0);
        if (k + PAIR_AHEAD * 3 / 4 < nd->nact) {
            int32_t ar = nd->pref[nd->act[k + PAIR_AHEAD * 3 / 4]];
            if (ar >= 0)
                ctrl__prefetch(&nd->pst[ar], sizeof(pair_t));
        }
        if (k + BUCKET_AHEAD < nd->nact)
            bucket_ahead(c, ctrl__pair_b(nd, nd->act[k + BUCKET_AHEAD]));
        const int b = ctrl__pair_b(nd, nd->act[k]);
        pair_t *pr = ctrl__pair_held(nd, nd->act[k]); /* NULL: never reported */
        const pair_t *pc = pr ? pr : &ctrl__pair_none;
        ledger_work_t *w = &ln->work[k];
        ctrl__pair_carry(nd, nd->act[k]);
        int64_t served = pair_served(c, pc);
        w->b = b;
        w->flags = 0;
        w->kin = pc->inflight > UINT16_MAX ? UINT16_MAX : (uint16_t)pc->inflight;
        w->demand = 0;
        w->arrivals = 0;
        w->queued = 0;
        if (b >= 0) {
            play_add(c, b);
            c->b[b].served = count_add(c->b[b].served, served);
        }
        if (b >= 0 && pc->has_report) { /* pr: the slot, has_report */
            /* Reported in an older period, and the node's report of this
             * one left it out: it is idle there (protocol.md), not still
             * showing the queue and arrivals of its last record. */
            if (pr->period < c->period && cur_rep) {
                pr->queued = pr->arrivals = 0;
                pr->throttled = 0;
            }
            w->demand = estimate_demand(&pr->dem, pr->queued, pr->arrivals, pr->throttled, il);
            w->arrivals = (double)pr->arrivals;
            w->queued = pr->queued < (uint64_t)CTRL_COUNT_MAX ? (int64_t)pr->queued
                                                              : CTRL_COUNT_MAX;
            c->b[b].arrivals += w->arrivals;
            w->rate_now = il > 0 ? (double)w->demand / il : 0;
            w->flags = LEDGER_EST | (pr->period >= c->period ? LEDGER_CUR : 0) |
                       (pr->queued > 0 ? LEDGER_QUEUED : 0);
            if (pr->queued > 0)
                c->b[b].backlog = 1;
            if (!changed && estimate_changed(pr->rate_used, w->rate_now,
                                             c->cfg.skip_rel, c->cfg.skip_abs))
                changed = 1;
        }
        /* While nothing moved (the round may be skipped) the estimate is
         * the pair's demand: a skipped round keeps it without a second
         * pass over the pairs.  Once something moved the round computes,
         * and push_node() writes what the passes made of it (not written
         * here: a computed round would dirty a cache line per pair for
         * nothing).  Every active pair has its slot (pr); without one
         * (never so) the demand reads 0. */
        if (!changed && pr)
            pr->demand = w->demand;
        /* A sparse node's pair whose last record serves at a rate is
         * carried on by its reports (absent_predict()): it stays. */
        if (pc->queued == 0 && pc->arrivals == 0 && served == 0 &&
            (!nd->sparse || !pc->binterval || pc->bserved < pc->binterval))
            w->flags |= LEDGER_QUIET;
    }
    return changed;
}

/* The last pass over up node nd's active pairs, after both solves: their
 * allocations become token records (nd->out) where they can change the
 * node's counts.  Headroom of a limited bucket that the estimates did not
 * place is split evenly (as L-tokens) over the up nodes where the bucket is
 * active this period, so a bucket whose demand moves between them is
 * served at once, never beyond its limit; limits being rates, over those
 * where it is queued if there are any (bs->nq): the headroom is then only
 * the pro-rata share, and spread over every node that saw the bucket this
 * period, much of it sat where the demand had left (Experiment 4: 92.5% of
 * bucket-periods meeting R instead of 100%).  Pairs idle and holding
 * nothing that can change leave the active list (and ln, its IO work).
 * Returns 0 or -ENOMEM. */
static int push_node(ctrl_t *c, node_t *nd, ledger_node_t *ln)
{
    int rc = out_reserve(nd, nd->nact); /* at most one record per pair */
    if (rc < 0)
        return rc;
    size_t k = 0;
    while (k < nd->nact) {
        size_t j = nd->act[k];
        ledger_work_t *w = &ln->work[k];
        pair_push_t *ps = &nd->push[j];
        /* Ahead, dense table or not (estimate_node() says why): the
         * grant's base reads the pair. */
        if (k + PAIR_AHEAD < nd->nact) {
            ctrl__prefetch(&nd->push[nd->act[k + PAIR_AHEAD]], sizeof(pair_push_t));
            __builtin_prefetch(&nd->pref[nd->act[k + PAIR_AHEAD]], 0);
        }
        if (k + PAIR_AHEAD / 2 < nd->nact) {
            int32_t ar = nd->pref[nd->act[k + PAIR_AHEAD / 2]];
            if (ar >= 0)
                ctrl__prefetch(&nd->pst[ar], sizeof(pair_t));
        }
        /* The buckets' records and their R allocations, in two steps: the
         * allocation's address is in the bucket's record. */
        if (k + PAIR_AHEAD < ln->nwork && ln->work[k + PAIR_AHEAD].b >= 0) {
            ctrl__prefetch(&c->b[ln->work[k + PAIR_AHEAD].b], sizeof(ledger_bucket_t));
            __builtin_prefetch(&c->pv[ln->work[k + PAIR_AHEAD].b]);
        }
        if (k + BUCKET_AHEAD < ln->nwork) {
            const ledger_work_t *wa = &ln->work[k + BUCKET_AHEAD];
            if (wa->b >= 0 && wa->rk >= 0 && c->b[wa->b].ra)
                __builtin_prefetch(&c->b[wa->b].ra[wa->rk]);
        }
        pair_t *pr = ctrl__pair_held(nd, j); /* every active pair has one */
        if (pr) {
            pr->demand = w->demand;
            if (w->flags & LEDGER_EST)
                pr->rate_used = w->rate_now;
        }
        if (w->b < 0) {
            k++;
            continue;
        }
        ledger_bucket_t *bs = &c->b[w->b];
        const int prov = c->pv[w->b].prov;
        int64_t r = w->rk >= 0 ? bs->ra[w->rk] : 0;
        int64_t l = bs->l == CTRL_UNLIMITED ? CTRL_UNLIMITED : 0;
        /* Fair shares on: a limited bucket's L-tokens are its shares. */
        const int64_t lgiven = c->fair ? fair_bucket_share(c->fair, (size_t)w->b) : bs->lalloc;
        if (bs->l != CTRL_UNLIMITED && c->fair)
            l += fair_work_share(c->fair, (int)(nd - c->nodes), k);
        else if (w->lk >= 0)
            l += bs->la[w->lk];
        if (bs->l != CTRL_UNLIMITED && (w->flags & LEDGER_CUR) &&
            (bs->nq == 0 || (w->flags & LEDGER_QUEUED))) {
            int64_t left = bs->head - bs->ralloc - lgiven;
            if (left > 0) {
                int n = bs->nq ? bs->nq : c->io.cnt[w->b], idx = c->io.given[w->b]++;
                l += left / n + (idx < left % n ? 1 : 0);
            }
        }
        /* Zero R and an L that cannot change by consumption (0 or
         * unlimited), same as last time: the node already holds it.
         * A provisional split is written by prov_walk(). */
        if (!prov &&
            !(ps->tok_r == 0 && r == 0 && l == ps->tok_l && (l == 0 || l == CTRL_UNLIMITED))) {
            out_add(nd, (uint32_t)w->b, r, l);
            pushed(c, ctrl__pair(nd, j), ps, r, l);
        }
        /* Idle and holding nothing that can change: off the list until
         * the node reports the bucket again. */
        if (w->demand == 0 && (w->flags & LEDGER_QUIET) &&
            (prov || (ps->tok_r == 0 && (ps->tok_l == 0 || ps->tok_l == CTRL_UNLIMITED)))) {
            nd->inact[j] = 0;
            nd->act[k] = nd->act[--nd->nact];
            ln->work[k] = ln->work[--ln->nwork];
            if (c->fair) /* the moved pair's share moves with it */
                fair_work_moved(c->fair, (int)(nd - c->nodes), ln->nwork, k);
            nd->act_sorted = 0;
            continue;
        }
        k++;
    }
    return 0;
}

/* ---- provisional splits ---------------------------------------------------- */

/* A limited bucket that no up node has reported this period gets its headroom
 * divided evenly over the nodes, so its demand is served at once and its
 * limit stays hard: prov_plan() decides which, after both passes, and
 * prov_walk() writes their records after phase_push(). */

/* Decides, after both passes, which limited buckets get a provisional
 * split: headroom left, but no up node has reported the bucket this period
 * and the estimates placed nothing for it (so it holds nothing to spend
 * when its demand appears, e.g. in the first interval of a period).  Sets
 * c->pv[b].prov, and .walk where prov_walk() must (re)write the split
 * (new, or a forced round: period start, node or configuration change) or
 * revoke it (a report brought the bucket into the computation).  Returns nonzero
 * if any bucket needs a walk. */
static void prov_one(ctrl_t *c, size_t b, int forced)
{
    const ledger_bucket_t *bs = &c->b[b];
    prov_t *pv = &c->pv[b];
    int was = pv->prov;
    pv->prov = bs->l != CTRL_UNLIMITED && bs->head > 0 && c->io.cnt[b] == 0 &&
               bs->ralloc == 0 && bs->lalloc == 0;
    pv->walk = pv->prov ? (forced || !was) : was;
    pv->fresh = pv->prov && !was;
    if (pv->walk)
        c->walkl[c->nwalk++] = (uint32_t)b;
}

/* prov_one() of a quiet bucket b (not in play) in a forced round: served
 * and held 0, no pair counted, nothing placed, so its headroom is positive
 * if its limit is (while the share of the period its rate covers is, which
 * ctrl_compute() checks) and it is in a provisional split if limited; a
 * forced round walks every split, so its budget is made here for
 * prov_walk() (the others' are not read). */
static void prov_quiet(ctrl_t *c, size_t b)
{
    ledger_bucket_t *bs = &c->b[b];
    prov_t *pv = &c->pv[b];
    const int was = pv->prov, prov = bs->l != CTRL_UNLIMITED && bs->l > 0;
    if (pv->prov != prov || pv->walk != (prov || was) || pv->fresh != (prov && !was)) {
        pv->prov = (uint8_t)prov;
        pv->walk = (uint8_t)(prov || was);
        pv->fresh = (uint8_t)(prov && !was);
    }
    if (!pv->walk)
        return;
    if (prov) {
        ledger_settle(&c->io, bs);
        ledger_budget(&c->io.rd, bs);
    }
    c->walkl[c->nwalk++] = (uint32_t)b;
}

/* prov_plan() visits every bucket (`all`), or decides on the buckets in
 * play: a quiet bucket's inputs are as in the last round (served and held
 * 0, no pair counted, nothing placed: the head of a limited one stays
 * positive while the share of the period its rate covers is, which
 * ctrl_compute() checks), so its split stays and is not walked unless
 * `forced`: then every split is walked, and the quiet buckets' are judged
 * by prov_quiet() in the same pass.  The walks are listed in c->walkl, in
 * increasing order. */
static int prov_plan(ctrl_t *c, int forced, int all)
{
    if (!all) /* the last round's walks (after a new table: all, every one) */
        for (size_t k = 0; k < c->nwalk; k++) {
            c->pv[c->walkl[k]].walk = 0;
            c->pv[c->walkl[k]].fresh = 0;
        }
    c->nwalk = 0;
    if (all) {
        for (size_t b = 0; b < c->nb; b++)
            prov_one(c, b, forced);
    } else if (forced) {
        c->st.bucket_visits += c->nb;
        for (size_t b = 0; b < c->nb; b++) {
            if (c->b[b].inplay)
                prov_one(c, b, 1);
            else
                prov_quiet(c, b);
        }
    } else {
        for (size_t k = 0; k < c->nplay; k++)
            prov_one(c, c->play[k], 0);
        if (c->nwalk > 1)
            qsort(c->walkl, c->nwalk, sizeof *c->walkl, cmp_u32);
    }
    return c->nwalk > 0;
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
    for (size_t w = 0; w < c->nwalk; w++) {
        const size_t b = c->walkl[w];
        const ledger_bucket_t *bs = &c->b[b];
        const prov_t *pv = &c->pv[b];
        int64_t n = 0, nrecent = 0;
        for (int i = 0; i < c->nn && pv->prov; i++) {
            node_t *nd = &c->nodes[i];
            int j = ctrl__node_slot(nd, (size_t)b);
            if (!nd->up || j < 0)
                continue;
            n++;
            nrecent += prov_recent(c, ctrl__pair(nd, (size_t)j));
        }
        int only_recent = nrecent > 0;
        if (only_recent)
            n = nrecent;
        int64_t rt = bs->r_rem, lt = bs->head - bs->r_rem, idx = 0;
        for (int i = 0; i < c->nn; i++) {
            node_t *nd = &c->nodes[i];
            int j = ctrl__node_slot(nd, (size_t)b);
            if (!nd->up || j < 0)
                continue;
            const pair_t *pr = ctrl__pair(nd, (size_t)j);
            int64_t r = 0, l = 0;
            int fresh = 0;
            if (!pv->prov) {
                if (nd->inact[j])
                    continue;
            } else if (!only_recent || prov_recent(c, pr)) {
                r = rt / n + (idx < rt % n);
                l = lt / n + (idx < lt % n);
                idx++;
                /* The node may have spent what we pushed before the split
                 * began; only an unbroken split is known to be intact. */
                fresh = pv->fresh;
            }
            pair_push_t *ps = &nd->push[j];
            if (!fresh && ps->tok_r == r && ps->tok_l == l)
                continue;
            if ((rc = push_rec(nd, (uint32_t)b, r, l)) < 0)
                return rc;
            pushed(c, pr, ps, r, l);
        }
    }
    return 0;
}

/* ---- the phases ---------------------------------------------------------- */

/* Phase 1, liveness: empties every node's records, sorts its active list,
 * and marks down the nodes silent for down_after rounds (forcing a
 * recomputation).  Counts nodes_up and nodes_down_now into *rs.  Returns 0
 * or -ENOMEM. */
static int phase_liveness(ctrl_t *c, ctrl_result_t *rs)
{
    int rc;
    if ((rc = ledger_fit(&c->io, c->b, c->nb, c->nn)) < 0)
        return rc;
    for (int i = 0; i < c->nn; i++) {
        node_t *nd = &c->nodes[i];
        nd->nout = 0;
        /* A full push made room for a record per pair; once it is sent,
         * the rounds after it need room for the active pairs' only: given
         * back (24 B per pair of every node that holds the whole table). */
        if (nd->capout > 4 * (nd->nact + 1024)) {
            free(nd->out);
            nd->out = NULL;
            nd->capout = 0;
        }
        size_t most = nd->capact > nd->nact ? nd->capact : nd->nact;
        if (c->io.n[i].capwork < nd->nact && (rc = ledger_reserve(&c->io.n[i], most)) < 0)
            return rc;
        if (!nd->act_sorted) {
            qsort(nd->act, nd->nact, sizeof *nd->act, cmp_u32);
            nd->act_sorted = 1;
        }
        if (nd->up && c->round_no - nd->last_seen >= c->cfg.down_after) {
            nd->up = 0;
            nd->down_rep = nd->rep_period;
            nd->lease_from = c->period;
            nd->lease_ended = 0;
            rs->nodes_down_now++;
            c->st.nodes_marked_down++;
            c->force = 1;
            log_warn("node %s silent for %d intervals: down, re-planning its buckets",
                     nd->name, c->cfg.down_after);
        }
        rs->nodes_up += nd->up;
        if (!nd->up && !nd->gone && !nd->lease_ended && nd->have_rep && ctrl__lease_over(c, nd)) {
            nd->lease_ended = 1;
            c->force = 1;
            log_warn("node %s: its fallback lease of %d periods has ended (down since period "
                     "%llu): its share of the limited buckets goes to the other nodes",
                     nd->name, c->cfg.fallback_lease, (unsigned long long)nd->lease_from);
        }
        if (!nd->up && !nd->forgotten && c->cfg.forget_after > 0 && nd->last_seen >= 0 &&
            c->round_no - nd->last_seen >= (int64_t)c->cfg.forget_after * c->cfg.intervals &&
            (!nd->leases || nd->gone || ctrl__lease_over(c, nd)))
            ctrl__node_forget(c, i); /* never while its lease may run: its grant counts */
    }
    return 0;
}

/* Node nd down by silence (not gone: it may be alive, stalled or cut off,
 * and a node that loses its controller keeps spending what it was granted,
 * renewed every period in the static fallback), or back from such a
 * silence in this period (its first reports may predate its spending the
 * tokens that waited in its socket, and the tokens it gets now are only
 * net of what it served since those reports): adds to each limited
 * bucket's `held` what nd may still serve of it beyond what it reported
 * this period.  That is its grant (served at the push + R + L, the most it
 * can spend per period) of the last period it reported in before the
 * silence, or of this one; pairs not pushed since then held no tokens.
 * Visits the whole table, once per round per such node (one that
 * ctrl__holds_grants()).  The byte ledger holds its grants the same way. */
static void held_by_silent(ctrl_t *c, const node_t *nd)
{
    for (size_t j = 0; j < nd->ntable; j++) {
        const int b = ctrl__pair_b(nd, j);
        const pair_push_t *ps = &nd->push[j];
        if (b < 0 || c->b[b].l == CTRL_UNLIMITED)
            continue;
        int64_t left = ledger_grant_left(c->period, nd->down_rep, ps->grant, ps->gperiod,
                                         pair_served(c, ctrl__pair(nd, j)));
        if (left > 0) {
            play_add(c, b);
            c->b[b].held = count_add(c->b[b].held, left);
        }
    }
}

/* Phase 2, estimates: one pass over the pairs: served this period (every
 * node, up or down), what down nodes may still serve, demand estimates (up
 * nodes, into their work arrays), with `il` intervals left.  Returns
 * nonzero if `changed` or if some capacity or demand estimate moved enough
 * to be worth a recomputation. */
static int phase_estimate(ctrl_t *c, double il, int changed, int all)
{
    const double K = c->cfg.intervals;
    /* The sums reset, written only where nonzero: a large table of idle
     * buckets is read, not dirtied (its cache lines need no write-back).
     * Only a quiet bucket is out of play, and its sums are zero: unless
     * `all` (the list is then rebuilt) the buckets in play are visited. */
    for (size_t k = 0, n = all ? c->nb : c->nplay; k < n; k++) {
        ledger_bucket_t *bs = &c->b[all ? k : c->play[k]];
        if (bs->served || bs->held || bs->arrivals != 0 || bs->backlog) {
            bs->served = 0;
            bs->held = 0;
            bs->arrivals = 0;
            bs->backlog = 0;
        }
        if (all && bs->inplay)
            bs->inplay = 0;
    }
    if (all)
        c->nplay = 0;
    c->st.bucket_visits += all ? c->nb : c->nplay;
    for (int i = 0; i < c->nn; i++) {
        node_t *nd = &c->nodes[i];
        if (ctrl__holds_grants(c, nd))
            held_by_silent(c, nd);
        if (!nd->up) {
            for (size_t k = 0; k < nd->nact; k++) {
                const int b = ctrl__pair_b(nd, nd->act[k]);
                if (b < 0)
                    continue;
                play_add(c, b);
                c->b[b].served =
                    count_add(c->b[b].served, pair_served(c, ctrl__pair(nd, nd->act[k])));
            }
            continue;
        }
        if (estimate_changed(nd->cap_used, nd->cap.estimate, c->cfg.skip_rel,
                             c->cfg.skip_abs * K / c->cfg.period_s) ||
            estimate_changed(nd->cons_used, nd->cap.conservative, c->cfg.skip_rel,
                             c->cfg.skip_abs * K / c->cfg.period_s) ||
            estimate_changed(nd->conf_used, nd->cap.confined, c->cfg.skip_rel,
                             c->cfg.skip_abs * K / c->cfg.period_s))
            changed = 1;
        changed = estimate_node(c, nd, &c->io.n[i], il, changed);
    }
    return changed;
}

/* Phase 2b, token conversion (Haechi's, per bucket), every round, also
 * skipped ones: over the interval since the last round a bucket that is
 * not backlogged now (nothing queued on any up node's report) has left
 * unused the part of its reservation's pace, R x (time elapsed) / T, that
 * it was not served; that part is added to bs->conv, which ledger_budgets()
 * takes off its remaining reservation.  A backlogged bucket converts
 * nothing: what it is short of was withheld, not declined (also in the
 * interval where its demand appeared or moved to servers that held no
 * tokens for it: judging by the queue at both ends of the interval
 * converted those, and cost Experiment 1 five points, 99.9% -> 94.8% of
 * buckets at >= 95%).  Restarts at zero each period.  The share of the
 * period it covered stays in c->conv_el for the byte ledger's conversion.
 * Visits every bucket if `all`, else the buckets in play.  Returns 0 or
 * -ENOMEM. */
static int phase_convert(ctrl_t *c, int all)
{
    int reset = !c->conv_started || c->conv_period != c->period;
    if (reset) {
        c->conv_started = 1;
        c->conv_period = c->period;
        c->conv_left = 1;
    }
    c->conv_el = c->conv_left - c->left;
    c->conv_left = c->left;
    c->st.bucket_visits += all || !c->io.lazy ? c->nb : c->nplay;
    /* Not `all`: the buckets in play; the quiet ones' conversion is
     * replayed when they are next read (ledger.h). */
    if (!all && c->io.lazy)
        return ledger_convert_some(&c->io, c->conv_el, reset, c->play, c->nplay);
    ledger_convert(&c->io, c->conv_el, reset);
    return 0;
}

/* Phase 6, token records per up node: everything that can change its
 * counts (push_node), and once after a (re)registration or a configuration
 * change every other pair: R 0 and, for a limited bucket, L 0, so that no
 * bucket is unthrottled on a node that has not reported it.  Returns 0 or
 * -ENOMEM. */
static int phase_push(ctrl_t *c)
{
    int rc;
    for (int i = 0; i < c->nn; i++) {
        node_t *nd = &c->nodes[i];
        nd->cap_used = nd->cap.estimate;
        nd->cons_used = nd->cap.conservative;
        nd->conf_used = nd->cap.confined;
        if (!nd->up)
            continue;
        if ((rc = push_node(c, nd, &c->io.n[i])) < 0)
            return rc;
        if (nd->full_push || nd->tail_from < nd->ntable) {
            for (size_t j = nd->full_push ? 0 : nd->tail_from; j < nd->ntable; j++) {
                int b = ctrl__pair_b(nd, j);
                pair_push_t *ps = &nd->push[j];
                if (nd->inact[j] || b < 0 || (c->pv[b].prov && c->pv[b].walk))
                    continue;
                int64_t l = c->b[b].l == CTRL_UNLIMITED ? CTRL_UNLIMITED : 0;
                if (ps->tok_r == 0 && ps->tok_l == l)
                    continue;
                if ((rc = push_rec(nd, (uint32_t)b, 0, l)) < 0)
                    return rc;
                pushed(c, ctrl__pair(nd, j), ps, 0, l);
            }
            nd->full_push = 0;
            nd->tail_from = nd->ntable;
        }
    }
    return 0;
}

/* ---- one round ------------------------------------------------------------ */

int ctrl_compute(ctrl_t *c, ctrl_result_t *res)
{
    ctrl_result_t rs = {0};
    int rc = 0;
    ctrl__dyn_settle(c); /* template-made buckets in or out (ctrl_tmpl.c) */
    int estimated = 0;    /* the work arrays hold this round's estimates */
    int pushed = 0;       /* ... and they have been applied */
    const double il = c->left * c->cfg.intervals;   /* intervals left */
    const double rem_s = c->left * c->cfg.period_s; /* seconds left */
    pshift_opts_t o = PSHIFT_OPTS_DEFAULT;
    o.threads = c->cfg.threads;
    o.approx_top = c->cfg.approx_top;
    o.max_path = c->cfg.max_path;
    int any_l = 0;

    if ((rc = phase_liveness(c, &rs)) < 0 || (rc = play_fit(c)) < 0)
        goto out;
    const int forced = c->force; /* liveness may have forced it */
    /* Every bucket visited (the list rebuilt): after a new table or a
     * change (indexes move) or a failed round, with the dimensions that
     * read every bucket's state (the nested buckets' split, fair shares,
     * the byte ledger), and where most buckets are in play (play_dense()). */
    const int all = c->play_stale || c->tree || c->fair || c->by || !c->io.lazy ||
                    c->cfg.full_passes || play_dense(c);
    c->play_stale = 1; /* until this round is done */
    int changed = phase_estimate(c, il, forced || c->cfg.skip_rel <= 0, all);
    estimated = 1;
    if ((rc = phase_convert(c, all)) < 0)
        goto out;
    if (!changed) {
        c->st.skipped++;
        rs.skipped = 1;
        goto out;
    }
    if ((rc = ledger_scratch(&c->io)) < 0)
        goto out;
    const ledger_round_t rd = ledger_round(c, 1);
    /* A quiet limited bucket's head stays positive only while its rate
     * covers some of the period (prov_plan()): else every bucket. */
    const int all_b = all || (rd.limit_depth >= 0 && !(rd.rate_share > 0));
    c->io.only = all_b ? NULL : c->play;
    c->io.nonly = all_b ? 0 : c->nplay;
    /* The budgets, and prov_plan() (which counts its own pass if forced). */
    c->st.bucket_visits += all_b ? 2 * c->nb : (forced ? 1 : 2) * c->nplay;
    ledger_budgets(&c->io, &rd);
    for (int i = 0; i < c->nn; i++) {
        const node_t *nd = &c->nodes[i];
        double est = nd->cap.estimate, cons = nd->cap.conservative, conf = nd->cap.confined;
        if (nd->sliced) { /* a shard: the root step's slice (shardctl.c) */
            est = est < nd->slice_est ? est : nd->slice_est;
            cons = cons < nd->slice_cons ? cons : nd->slice_cons;
            conf = conf < cons ? conf : cons;
        }
        ledger_caps(&c->io, i, nd->up, est, cons, conf, rem_s);
        c->io.n[i].kr = nd->base_s > 0 ? rem_s / (2 * nd->base_s) : 0;
    }
    if ((rc = ledger_rpass(&c->io, &o, &rs, &any_l)) < 0)
        goto out;
    if ((rc = ledger_lpass(&c->io, any_l, &o, &rs)) < 0)
        goto out;
    /* Fair shares of what is left (before phase_push: the work arrays
     * still hold every pair's demand and allocations). */
    if (c->fair && (rc = fair_round(c->fair, &c->io, c->bweights)) < 0)
        goto out;
    int any_walk = prov_plan(c, forced, all_b);
    if ((rc = phase_push(c)) < 0)
        goto out;
    if (any_walk && (rc = prov_walk(c)) < 0)
        goto out;
    c->force = 0;
    c->st.computed++;
    pushed = 1;
out:
    if (rc == 0 && c->by) { /* byte tokens: every round, computed or skipped */
        const bytes_view_t v = ctrl__bytes_view(c);
        const bytes_round_t in = {.rem_s = rem_s, .il = il, .conv_el = c->conv_el,
                                  .rd = ledger_round(c, 0)};
        rc = bytes_compute(c->by, &v, &in, &o);
    }
    c->io.only = NULL;
    /* The list: pruned after a computed round (each bucket's provisional
     * split was just judged on what it holds now); a skipped one only added
     * to it, or rebuilt it (`all`) from the buckets with pairs, leaving out
     * some whose pass state the next computation resets: visit every
     * bucket until one has computed. */
    if (rc == 0 && pushed && all && play_dense(c)) {
        /* still dense: the next round visits the table again */
    } else if (rc == 0 && pushed) {
        play_prune(c);
        if (all && c->nplay > 1) /* rebuilt in the order of the pairs: the table's, for the passes */
            qsort(c->play, c->nplay, sizeof *c->play, cmp_u32);
        c->play_stale = 0;
    } else if (rc == 0 && !all) {
        c->play_stale = 0;
    }
    c->lost_open = 0; /* the period's first round is done */
    if (estimated && !pushed && rc < 0)
        work_keep_demand(c); /* an error (a skipped round's are kept) */
    if (rc < 0)
        for (int i = 0; i < c->nn; i++)
            c->nodes[i].nout = 0;
    if (res)
        *res = rs;
    return rc;
}

long ctrl_node_shares(const ctrl_t *c, int node, const proto_share_rec_t **recs)
{
    if (recs)
        *recs = NULL;
    if (!c->fair)
        return -1;
    const node_t *nd = ctrl__get_node(c, node);
    if (!nd || !nd->up)
        return 0;
    return (long)fair_node(c->fair, node, recs);
}

size_t ctrl_node_tokens(const ctrl_t *c, int node, const proto_tokens_rec_t **recs)
{
    const node_t *nd = ctrl__get_node(c, node);
    if (!nd || !nd->up) {
        if (recs)
            *recs = NULL;
        return 0;
    }
    if (recs)
        *recs = nd->out;
    return nd->nout;
}
