/* ledger.c - the passes a dimension of the controller runs each round, the same for IOs and bytes: token conversion, budgets, the R pass (single-server buckets first, within the conservative capacities, in the last interval on the queues) and the L pass. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "controller/ledger.h"

/* The passes below walk a node's work (sequential) and read each pair's
 * bucket record (scattered over a large table): asked for this many pairs
 * ahead, the record is in the cache when its pair comes. */
#define LEDGER_AHEAD 8

/* Asks for the bucket record of work[k + LEDGER_AHEAD] of node ln, if
 * any, for writing: its first, middle and last cache lines.  (A macro: gcc
 * 12 dropped the prefetches of the same code as an inline function.) */
#define BUCKET_AHEAD(L, ln, k)                                                                    \
    do {                                                                                          \
        if ((k) + LEDGER_AHEAD < (ln)->nwork && (ln)->work[(k) + LEDGER_AHEAD].b >= 0) {          \
            const char *a_ = (const char *)&(L)->b[(ln)->work[(k) + LEDGER_AHEAD].b];            \
            __builtin_prefetch(a_, 1);                                                            \
            __builtin_prefetch(a_ + sizeof(ledger_bucket_t) / 2, 1);                              \
            __builtin_prefetch(a_ + sizeof(ledger_bucket_t) - 1, 1);                              \
        }                                                                                         \
    } while (0)

/* A node's capacity for the rest of the period in tokens, at most
 * LEDGER_NODE_TOKENS_MAX (so that pShift's sum over the nodes fits). */
static int64_t node_tokens(double t)
{
    return t > 0 ? (t < (double)LEDGER_NODE_TOKENS_MAX ? (int64_t)t : LEDGER_NODE_TOKENS_MAX) : 0;
}

/* (int64_t)ceil(x) for 0 <= x < 2^63 without the libm call (once per
 * backlogged pair and round): t is exact in a double where x has a
 * fraction. */
static inline int64_t ceil_nonneg(double x)
{
    int64_t t = (int64_t)x;
    return t + ((double)t < x);
}

int ledger_fit(ledger_t *L, ledger_bucket_t *b, size_t nb, int nn)
{
    L->b = b;
    L->nb = nb;
    if (nn > L->capn) {
        ledger_node_t *n = realloc(L->n, (size_t)nn * sizeof *n);
        if (!n)
            return -ENOMEM;
        for (int i = L->capn; i < nn; i++)
            n[i] = (ledger_node_t){.pidx = -1, .rcut = 1};
        L->n = n;
        L->capn = nn;
    }
    L->nn = nn;
    return 0;
}

int ledger_reserve(ledger_node_t *ln, size_t n)
{
    if (ln->capwork >= n)
        return 0;
    ledger_work_t *w = realloc(ln->work, n * sizeof *w);
    if (!w)
        return -ENOMEM;
    ln->work = w;
    uint32_t *lc = realloc(ln->lcand, n * sizeof *lc);
    if (!lc)
        return -ENOMEM;
    ln->lcand = lc;
    ln->capwork = n;
    return 0;
}

int ledger_scratch(ledger_t *L)
{
    const int nn = L->nn;
    if (L->nb + 1 > L->capcnt) {
        size_t cap = L->nb + 1;
        int *a = realloc(L->cnt, cap * sizeof *a);
        if (!a)
            return -ENOMEM;
        L->cnt = a;
        int *g = realloc(L->given, cap * sizeof *g);
        if (!g)
            return -ENOMEM;
        L->given = g;
        int *rb = realloc(L->rb, cap * sizeof *rb);
        if (!rb)
            return -ENOMEM;
        L->rb = rb;
        int *lb = realloc(L->lb, cap * sizeof *lb);
        if (!lb)
            return -ENOMEM;
        L->lb = lb;
        L->capcnt = cap;
    }
    if (nn > L->capsrv) {
        int *sn = realloc(L->srv_node, (size_t)nn * sizeof *sn);
        if (!sn)
            return -ENOMEM;
        L->srv_node = sn;
        L->capsrv = nn;
    }
    size_t most = 0;
    for (int i = 0; i < nn && i < L->capn; i++)
        if (L->n[i].nwork > most)
            most = L->n[i].nwork;
    if (most > L->cape) {
        int32_t *eb = realloc(L->eb, most * sizeof *eb);
        if (!eb)
            return -ENOMEM;
        L->eb = eb;
        int64_t *ed = realloc(L->ed, most * sizeof *ed);
        if (!ed)
            return -ENOMEM;
        L->ed = ed;
        L->cape = most;
    }
    return 0;
}

void ledger_free(ledger_t *L)
{
    for (int i = 0; i < L->capn; i++) {
        free(L->n[i].work);
        free(L->n[i].lcand);
    }
    free(L->n);
    free(L->cnt);
    free(L->given);
    free(L->rb);
    free(L->lb);
    free(L->srv_node);
    free(L->eb);
    free(L->ed);
    free(L->el);
    pshift_problem_destroy(&L->rp);
    pshift_problem_destroy(&L->lp);
    *L = (ledger_t){0};
}

/* One conversion round's step on bucket bs (served at bs->served). */
static inline void convert_one(ledger_bucket_t *bs, double el, int reset)
{
    if (reset) {
        bs->conv = 0;
        bs->srv_prev = 0;
    }
    double unused = (double)bs->r * el - (double)(bs->served - bs->srv_prev);
    if (bs->srv_prev != bs->served)
        bs->srv_prev = bs->served;
    if (el > 0 && !bs->backlog && unused > 0)
        bs->conv += unused;
}

/* Brings lazy bucket bs's conversion from its round bs->cseq to round
 * `last` (<= L->cseq): it was quiet in the rounds between, nothing served
 * nor backlogged (srv_prev 0), so each added R x el as convert_one() would
 * have, in the same order; a bucket last converted in an older period
 * starts from this period's reset.  Rounds of an older period than the
 * log's are not replayed: the caller's round is then this period's reset,
 * which clears them. */
static void settle_to(const ledger_t *L, ledger_bucket_t *bs, uint64_t last)
{
    if (bs->cseq >= last)
        return;
    uint64_t from = bs->cseq + 1;
    if (last < L->cseq0) {
        bs->cseq = last;
        return;
    }
    if (bs->cseq < L->cseq0) {
        bs->conv = 0;
        bs->srv_prev = 0;
        from = L->cseq0;
    }
    for (uint64_t s = from; s <= last; s++) {
        const double el = L->el[s - L->cseq0];
        double unused = (double)bs->r * el - (double)(int64_t)0;
        if (el > 0 && unused > 0)
            bs->conv += unused;
    }
    bs->cseq = last;
}

void ledger_settle(const ledger_t *L, ledger_bucket_t *bs)
{
    if (L->lazy)
        settle_to(L, bs, L->cseq);
}

/* Logs a lazy ledger's conversion round.  Returns 0 or -ENOMEM. */
static int conv_log(ledger_t *L, double el, int reset)
{
    size_t at = reset ? 0 : L->nel;
    if (at + 1 > L->capel) {
        size_t cap = L->capel ? L->capel * 2 : 64;
        double *e = realloc(L->el, cap * sizeof *e);
        if (!e)
            return -ENOMEM;
        L->el = e;
        L->capel = cap;
    }
    L->cseq++;
    if (reset)
        L->cseq0 = L->cseq;
    L->el[at] = el;
    L->nel = at + 1;
    return 0;
}

/* Converts lazy ledger bucket bs in the round just logged. */
static inline void convert_lazy(const ledger_t *L, ledger_bucket_t *bs, double el, int reset)
{
    if (bs->cseq + 1 < L->cseq) /* (converted in the last round: nothing to replay) */
        settle_to(L, bs, L->cseq - 1);
    convert_one(bs, el, reset);
    bs->cseq = L->cseq;
}

void ledger_convert(ledger_t *L, double el, int reset)
{
    if (L->lazy) {
        if (conv_log(L, el, reset) == 0) {
            for (size_t b = 0; b < L->nb; b++)
                convert_lazy(L, &L->b[b], el, reset);
            return;
        }
        /* No room for the log: every bucket settled here, none lags, and
         * the ledger converts every bucket each round from now on. */
        for (size_t b = 0; b < L->nb; b++)
            settle_to(L, &L->b[b], L->cseq);
        L->lazy = 0;
    }
    /* One pass (the reset of a new period in it); srv_prev written only
     * where it moves, so that idle buckets' records stay clean. */
    for (size_t b = 0; b < L->nb; b++)
        convert_one(&L->b[b], el, reset);
}

int ledger_convert_some(ledger_t *L, double el, int reset, const uint32_t *only, size_t n)
{
    int rc;
    if (!L->lazy)
        return -EINVAL;
    if ((rc = conv_log(L, el, reset)) < 0)
        return rc;
    for (size_t k = 0; k < n; k++)
        convert_lazy(L, &L->b[only[k]], el, reset);
    return 0;
}

/* A limited bucket's headroom for the rest of the period: its limit less
 * what it was served and what down nodes hold.  Limits being rates
 * (limit_depth >= 0, docs/controller.md), also at most its pro-rata share
 * of the time left plus the depth, L x (left + depth / T), less what down
 * nodes hold: the nodes pace their parts over the time left, so together
 * they exceed L / T by at most the depth, and a bucket served less earlier
 * (idle, or its demand moved) does not catch up -- except for what is left
 * of its reservation (`r_rem`, after conversion), which the rate never cuts
 * into.  The time the nodes held no usable tokens at the period's start
 * (ctrl_t.lost, ctrl_round_late()) counts as time left: the bucket did not
 * leave it unused.  Unlimited: CTRL_UNLIMITED. */
static int64_t limit_head(const ledger_round_t *rd, const ledger_bucket_t *bs, int64_t r_rem)
{
    if (bs->l == CTRL_UNLIMITED)
        return CTRL_UNLIMITED;
    int64_t spent = count_add(bs->served, bs->held);
    int64_t head = bs->l > spent ? bs->l - spent : 0;
    if (rd->limit_depth >= 0) {
        double share = (double)bs->l * rd->rate_share;
        int64_t rate = share < (double)bs->l ? ceil_nonneg(share) - bs->held : head;
        if (rate < r_rem)
            rate = r_rem;
        if (rate < head)
            head = rate > 0 ? rate : 0;
    }
    return head;
}

void ledger_budget(const ledger_round_t *rd, ledger_bucket_t *bs)
{
    int64_t served = bs->served;
    bs->r_rem = bs->r > served ? bs->r - served : 0;
    if (rd->conv_slack >= 0) {
        double gone = bs->conv - rd->conv_slack * (double)bs->r + 0.5;
        if (gone >= 1)
            bs->r_rem = bs->r_rem > (int64_t)gone ? bs->r_rem - (int64_t)gone : 0;
    }
    bs->head = limit_head(rd, bs, bs->r_rem);
    if (bs->r_rem > bs->head)
        bs->r_rem = bs->head;
}

/* ledger_budgets() on bucket b. */
static inline void budget_reset(ledger_t *L, const ledger_round_t *rd, size_t b)
{
    ledger_bucket_t *bs = &L->b[b];
    ledger_settle(L, bs);
    ledger_budget(rd, bs);
    bs->pidx = bs->lpidx = -1;
    bs->rn = bs->ln = bs->nr = bs->nq = 0;
    bs->ralloc = bs->lalloc = 0;
    /* rq_begin()'s mark, in this pass over the table */
    bs->queued = rd->on_queues && bs->l == CTRL_UNLIMITED ? 0 : -1;
    L->cnt[b] = L->given[b] = 0;
}

void ledger_budgets(ledger_t *L, const ledger_round_t *rd)
{
    L->rd = *rd;
    if (L->only)
        for (size_t k = 0; k < L->nonly; k++)
            budget_reset(L, rd, L->only[k]);
    else
        for (size_t b = 0; b < L->nb; b++)
            budget_reset(L, rd, b);
}

void ledger_caps(ledger_t *L, int i, int up, double est, double cons, double conf, double rem_s)
{
    ledger_node_t *ln = &L->n[i];
    ln->up = (uint8_t)(up != 0);
    if (!up)
        return;
    ln->capt = node_tokens(est * rem_s);
    ln->rcap = node_tokens(cons * rem_s);
    if (ln->rcap > ln->capt)
        ln->rcap = ln->capt;
    ln->rcap_c = node_tokens(conf * rem_s);
    if (ln->rcap_c > ln->rcap)
        ln->rcap_c = ln->rcap;
}

/* ---- the last round's R on the queues -------------------------------------- */

/* The last round of a period places R where the requests wait: a queued
 * request is served where it is, while R-tokens on forecast arrivals are
 * stranded if the demand moves and no later round moves them.  rq_begin()
 * sets bs->queued to 0 for the buckets it applies to (last interval, no
 * limit, a ledger that knows queues), -1 for the others, and returns
 * nonzero if any may apply; the R pass adds each pair's queue.
 * rq_demand() is the demand a pair stands for in the R problem.
 * rq_lift(), after a solve, gives buckets back their forecasts where their
 * queues overbook a node, and returns nonzero if it did (then solve again,
 * at most RQ_PASSES times). */
#define RQ_PASSES 4

/* A bucket whose queued requests cover its remaining reservation has R
 * placed only where they wait, at most as many as wait there. */
static inline int64_t rq_demand(const ledger_work_t *w, const ledger_bucket_t *bs)
{
    return bs->queued >= 0 && bs->queued >= bs->r_rem && w->queued < w->demand ? w->queued
                                                                              : w->demand;
}

/* How much of a node's excess one rq_lift() pass gives back: the
 * next solve refills part of what the lifted buckets leave with other
 * queues (measured on the simulator's Experiments 1 and 2 with
 * RQ_PASSES, docs/performance.md). */
#define RQ_COVER 4

/* Only in the last interval (earlier, the next round places again what a
 * move strands) and only for buckets without a limit (a limited bucket's R
 * placement also decides where its L-tokens go, and its headroom is spread
 * over its active nodes anyway). */
static int rq_begin(ledger_t *L)
{
    const int last = L->rd.on_queues;
    if (L->only)
        for (size_t k = 0; k < L->nonly; k++)
            L->b[L->only[k]].queued = last && L->b[L->only[k]].l == CTRL_UNLIMITED ? 0 : -1;
    else
        for (size_t b = 0; b < L->nb; b++)
            L->b[b].queued = last && L->b[b].l == CTRL_UNLIMITED ? 0 : -1;
    return last;
}

/* On every up node where the solution places more R than the node can
 * take (its conservative capacity less the single-server buckets: pShift
 * goes beyond it where demands leave no choice), buckets held to their
 * queues there get their whole demand back (bs->queued = -1), in the
 * node's order, until what they were given there is RQ_COVER times the
 * excess: the queues of a bucket whose tokens elsewhere matched its demand
 * sit on the nodes that are full. */
static int rq_lift(ledger_t *L)
{
    int any = 0;
    for (int s = 0; s < pshift_nservers(L->rp); s++) {
        ledger_node_t *ln = &L->n[L->srv_node[s]];
        int64_t over = pshift_server_load(L->rp, s) - (ln->rcap - ln->load);
        if (over <= 0)
            continue;
        over *= RQ_COVER;
        for (size_t k = 0; k < ln->nwork && over > 0; k++) {
            const ledger_work_t *w = &ln->work[k];
            if (w->rk < 0 || L->b[w->b].nr == 1)
                continue;
            ledger_bucket_t *bs = &L->b[w->b];
            if (rq_demand(w, bs) < w->demand) {
                over -= pshift_bucket_allocs(L->rp, bs->pidx)[w->rk];
                bs->queued = -1;
                any = 1;
            }
        }
    }
    return any;
}

/* Sums a solved problem's allocation per bucket (into ralloc of the
 * buckets in the R problem, or lalloc of those in the L problem if
 * `lpass`) and keeps where each bucket's allocations are (ra / la).
 * Walks the problem's entries in its own order, sequentially. */
static void sum_alloc(ledger_t *L, const pshift_problem_t *p, int lpass)
{
    const int *of = lpass ? L->lb : L->rb;
    for (int pi = 0; pi < pshift_nbuckets(p); pi++) {
        ledger_bucket_t *bs = &L->b[of[pi]];
        int64_t sum = 0;
        size_t ne = pshift_bucket_nentries(p, pi);
        const int64_t *al = pshift_bucket_allocs(p, pi);
        for (size_t k = 0; k < ne; k++)
            sum = count_add(sum, al[k]);
        if (lpass) {
            bs->lalloc = sum;
            bs->la = al;
        } else {
            bs->ralloc = sum;
            bs->ra = al;
        }
    }
}

/* Raises w's demand to its backlog floor: a bucket with requests waiting
 * here wants more than it got.  Its arrivals come from clients that wait
 * for answers (closed loop), so they only show the service it got:
 * estimated that way, a bucket sharing a server would never be given more
 * than its current rate.  While it is backlogged and short of its
 * reservation, its demand here is at least its remaining reservation times
 * this node's share of its arrivals. */
static void backlog_floor(ledger_work_t *w, const ledger_bucket_t *bs)
{
    if ((w->flags & LEDGER_QUEUED) && bs->r_rem > 0) {
        double share = bs->arrivals > 0 ? w->arrivals / bs->arrivals : 1;
        int64_t floor_d = ceil_nonneg((double)bs->r_rem * share);
        if (w->demand < floor_d)
            w->demand = floor_d;
    }
}

/* Places the R-tokens of the single-server buckets (one pair with demand in
 * the R problem: they have nowhere else to go) on up node ln before pShift
 * sees the others: each gets min(remaining reservation, demand), scaled
 * down (rounding down) if together they exceed ln->rcap tokens, the node's
 * R capacity for the rest of the period.  With any, that capacity is the
 * confined one (ln->rcap lowered to ln->rcap_c, ln->confd set; pShift's
 * server and the cut use it too): R placed beyond what a server that
 * stepped down delivers is not served, and these buckets cannot go
 * elsewhere.  Their allocations are their own (bs->ss_alloc), their sum
 * ln->load. */
static void place_single(ledger_t *L, ledger_node_t *ln, ctrl_result_t *rs)
{
    int64_t sum = 0;
    ln->load = 0;
    for (size_t k = 0; k < ln->nwork; k++) {
        const ledger_work_t *w = &ln->work[k];
        BUCKET_AHEAD(L, ln, k);
        if (w->rk == 0 && L->b[w->b].nr == 1)
            sum = count_add(sum, w->demand < L->b[w->b].r_rem ? w->demand : L->b[w->b].r_rem);
    }
    if (sum == 0)
        return;
    if (ln->rcap_c < ln->rcap) {
        ln->rcap = ln->rcap_c;
        ln->confd = 1;
    }
    int64_t cons = ln->rcap;
    double scale = sum > cons ? (double)cons / (double)sum : 1;
    for (size_t k = 0; k < ln->nwork; k++) {
        const ledger_work_t *w = &ln->work[k];
        BUCKET_AHEAD(L, ln, k);
        if (w->rk != 0 || L->b[w->b].nr != 1)
            continue;
        ledger_bucket_t *bs = &L->b[w->b];
        int64_t claim = w->demand < bs->r_rem ? w->demand : bs->r_rem;
        bs->ss_alloc = scale < 1 ? (int64_t)((double)claim * scale) : claim;
        bs->ralloc = bs->ss_alloc;
        bs->ra = &bs->ss_alloc;
        ln->load = count_add(ln->load, bs->ss_alloc);
        rs->buckets++;
        rs->pairs++;
    }
}

/* Builds the R problem in L->rp from the demands of ledger_rpass():
 * each up node's single-server buckets placed first (place_single) on its
 * conservative capacity, pShift's server the capacity they leave, and the
 * other buckets' demands there times the node's rcut (pairs cut to zero
 * stay out); once `cut` (rpass_cut() set some rcut), a queued pair on a
 * node not cut at least what its requests in flight carry (w->kin x
 * ln->kr, at most the bucket's remaining reservation), so what the cut
 * takes can go where the bucket's requests wait.  Counts buckets and
 * pairs into *rs.  Returns 0, -ENOMEM or a
 * pshift error. */
static int rpass_build(ledger_t *L, ctrl_result_t *rs, int cut)
{
    int rc;
    pshift_problem_t *p = L->rp;
    /* The buckets of the last build (ledger_budgets() reset every bucket
     * before the first one of a round). */
    for (int pi = 0; pi < pshift_nbuckets(p); pi++)
        if ((size_t)L->rb[pi] < L->nb) {
            L->b[L->rb[pi]].pidx = -1;
            L->b[L->rb[pi]].rn = 0;
        }
    pshift_problem_clear(p);
    for (int i = 0; i < L->nn; i++) {
        ledger_node_t *ln = &L->n[i];
        ln->pidx = -1;
        if (!ln->up)
            continue;
        place_single(L, ln, rs);
        ln->pidx = pshift_add_server(p, NULL, ln->rcap - ln->load);
        if (ln->pidx < 0)
            return ln->pidx;
        L->srv_node[ln->pidx] = i;
    }
    for (int i = 0; i < L->nn; i++) {
        ledger_node_t *ln = &L->n[i];
        if (!ln->up)
            continue;
        size_t ne = 0;
        for (size_t k = 0; k < ln->nwork; k++) {
            ledger_work_t *w = &ln->work[k];
            BUCKET_AHEAD(L, ln, k);
            if (w->rk == -1 || L->b[w->b].nr == 1)
                continue;
            ledger_bucket_t *bs = &L->b[w->b];
            int64_t d = rq_demand(w, bs);
            if (ln->rcut < 1 && bs->alt) { /* (a bucket with nowhere else keeps it) */
                int64_t cut_d = (int64_t)((double)d * ln->rcut);
                /* On a node held to its confined capacity (a step down),
                 * a bucket keeps what its requests in flight on the nodes
                 * not cut cannot carry (bs->carry). */
                double need = (double)bs->r_rem - (double)bs->carry;
                if (ln->confd && need > (double)cut_d)
                    cut_d = need < (double)d ? (int64_t)need : d;
                d = cut_d;
            }
            else if (cut && ln->rcut >= 1 && w->rk >= 0 && (w->flags & LEDGER_QUEUED) && w->kin &&
                     ln->kr > 0) {
                /* After a cut, a queued pair on a node not cut stands for
                 * what its requests in flight can take, not only its
                 * forecast (its past service there). */
                double k = (double)w->kin * ln->kr;
                int64_t carry = k < (double)bs->r_rem ? (int64_t)k : bs->r_rem;
                if (d < carry)
                    d = carry;
            }
            w->rk = 0;
            if (d <= 0) {
                w->rk = -2; /* no R here in this build (cut, or no queue) */
                continue;
            }
            if (bs->pidx < 0) {
                bs->pidx = pshift_add_bucket(p, NULL, bs->r_rem);
                if (bs->pidx < 0)
                    return bs->pidx;
                L->rb[bs->pidx] = w->b;
                rs->buckets++;
            }
            L->eb[ne] = bs->pidx;
            L->ed[ne++] = d;
            /* Nodes are added in increasing server index, so this is the
             * bucket's rn-th entry in pshift's order too. */
            w->rk = bs->rn++;
            rs->pairs++;
        }
        if ((rc = pshift_set_demands(p, ln->pidx, L->eb, L->ed, ne)) < 0)
            return rc;
    }
    return 0;
}

/* After a solve: sets rcut on every up node whose single-server buckets
 * and pShift's allocation there together exceed its conservative capacity
 * (pShift places every bucket's reservation where it has demand, beyond
 * capacity if need be), so that the flexible buckets' demands there fit in
 * what the single-server buckets leave, and bs->alt on every bucket with an
 * R pair on an up node that is not cut: the cut applies to those only.
 * On a node held to its confined capacity (ln->confd: it stepped down) the
 * cut leaves such a bucket at least what its requests in flight on those
 * nodes cannot carry (bs->carry, the sum of w->kin x ln->kr there; issue
 * 25: one request in flight at a bucket's other server does not take what
 * the cut moves).  Returns nonzero if any was set. */
static int rpass_cut(ledger_t *L)
{
    int any = 0;
    for (int s = 0; s < pshift_nservers(L->rp); s++) {
        ledger_node_t *ln = &L->n[L->srv_node[s]];
        int64_t room = ln->rcap - ln->load;
        if (ln->load == 0 || pshift_server_load(L->rp, s) <= room)
            continue;
        int64_t dem = 0;
        for (size_t k = 0; k < ln->nwork; k++) {
            const ledger_work_t *w = &ln->work[k];
            BUCKET_AHEAD(L, ln, k);
            if (w->rk >= 0 && L->b[w->b].nr != 1)
                dem = count_add(dem, rq_demand(w, &L->b[w->b]));
        }
        ln->rcut = dem > 0 ? (double)(room > 0 ? room : 0) / (double)dem : 0;
        any = 1;
    }
    /* Which buckets have an R pair on a node that is not cut: only these
     * are cut (issue 25: a bucket whose every pair is on a cut node has
     * nowhere else to take its R, and a uniform cut left seed 110's b16
     * 1,724 of 4,000). */
    if (any) {
        /* Read only for the work's buckets: cleared on those. */
        for (int i = 0; i < L->nn; i++)
            for (size_t k = 0; L->n[i].up && k < L->n[i].nwork; k++)
                if (L->n[i].work[k].b >= 0)
                    L->b[L->n[i].work[k].b].alt = 0;
        for (int i = 0; i < L->nn; i++) {
            const ledger_node_t *ln = &L->n[i];
            if (!ln->up || ln->rcut < 1)
                continue;
            for (size_t k = 0; k < ln->nwork; k++) {
                const ledger_work_t *w = &ln->work[k];
                if (w->rk < 0)
                    continue;
                ledger_bucket_t *bs = &L->b[w->b];
                if (!bs->alt)
                    bs->carry = 0;
                bs->alt = 1;
                bs->carry = w->kin && ln->kr > 0 ? bs->carry + (float)((double)w->kin * ln->kr)
                                                 : INFINITY;
            }
        }
    }
    return any;
}

/* The R pass (phase 4 of a round), robust to capacity error (issue 14):
 * single-server buckets first, then pShift (solved with `o`) for the others
 * on the up nodes' conservative capacity for the rest of the period
 * (ledger_caps(), rpass_build), in the last interval on the queues
 * where they fit (rq_begin), once more with cut demands where that
 * overbooks a node holding single-server buckets (rpass_cut); the allocation is summed per bucket
 * and per node.  On the way backlogged demands are raised to their floor
 * and each node's L candidates listed (ln->lcand); *any_l is set if there
 * are any.  Fills buckets, pairs, phi, r_tokens and the R times of *rs.
 * Returns 0, -ENOMEM or a pshift error. */
int ledger_rpass(ledger_t *L, const pshift_opts_t *o, ctrl_result_t *rs, int *any_l)
{
    int rc;
    if (!L->rp && !(L->rp = pshift_problem_new()))
        return -ENOMEM;
    pshift_problem_t *p = L->rp;
    /* Nested buckets (tree.h): the leaves' budgets become their shares of
     * their parents'.  Here, not in ledger_budgets(): the split weighs the
     * demands of the up nodes, known after ledger_caps(). */
    if (L->rd.nest)
        L->rd.nest(L, L->rd.nest_arg);
    /* ledger_budgets() marked the queues; the nested split may have moved
     * what rq_begin() reads: then mark them again. */
    int lifts = (L->rd.nest ? rq_begin(L) : L->rd.on_queues) && !L->rd.no_lift ? RQ_PASSES : 0, cut = 0;
    /* Demands, queues, L candidates and which pairs want R (rk 0, counted
     * in nr). */
    for (int i = 0; i < L->nn; i++) {
        ledger_node_t *ln = &L->n[i];
        ln->nlcand = 0;
        if (!ln->up)
            continue;
        ln->rcut = 1;
        ln->confd = 0;
        for (size_t k = 0; k < ln->nwork; k++) {
            ledger_work_t *w = &ln->work[k];
            BUCKET_AHEAD(L, ln, k);
            w->rk = w->lk = -1;
            if (w->b < 0)
                continue;
            ledger_bucket_t *bs = &L->b[w->b];
            if (w->flags & LEDGER_CUR)
                L->cnt[w->b]++; /* up nodes where it is active this period */
            if ((w->flags & (LEDGER_CUR | LEDGER_QUEUED)) == (LEDGER_CUR | LEDGER_QUEUED) &&
                L->rd.limit_depth >= 0)
                bs->nq++; /* ... and queued, limits being rates (push_node()) */
            if (bs->queued >= 0)
                bs->queued = count_add(bs->queued, w->queued);
            backlog_floor(w, bs);
            if (w->demand <= 0)
                continue;
            if (bs->l != CTRL_UNLIMITED && bs->head > 0) {
                *any_l = 1;
                ln->lcand[ln->nlcand++] = (uint32_t)k;
            }
            if (bs->r_rem > 0) {
                w->rk = 0;
                bs->nr++;
            }
        }
    }
    const ctrl_result_t rs0 = *rs;
    double t = 0;
    for (;;) {
        *rs = rs0;
        if ((rc = rpass_build(L, rs, cut)) < 0 || (rc = pshift_solve(p, o)) < 0)
            return rc;
        t += pshift_stats(p)->t_total;
        if (lifts > 0 && (lifts--, rq_lift(L)))
            continue;
        if (cut || !(cut = rpass_cut(L)))
            break;
    }
    rs->phi = pshift_stats(p)->phi; /* + the single-server buckets' below */
    rs->t_pshift += t;
    rs->t_rpass = t;
    if (L->rd.hook)
        L->rd.hook(p, 0, rs->t_rpass, L->rd.hook_arg);
    /* Per bucket and per node totals straight from the solution (its
     * entries in order), so that the pass over the pairs that follows can
     * read back R and build the L problem at once. */
    int ns = pshift_nservers(p);
    sum_alloc(L, p, 0);
    for (int s = 0; s < ns; s++) {
        ledger_node_t *ln = &L->n[L->srv_node[s]];
        rs->phi = count_add(rs->phi, ln->load);
        ln->load = count_add(ln->load, pshift_server_load(p, s));
    }
    if (L->only)
        for (size_t k = 0; k < L->nonly; k++)
            rs->r_tokens = count_add(rs->r_tokens, L->b[L->only[k]].ralloc);
    else
        for (size_t b = 0; b < L->nb; b++)
            rs->r_tokens = count_add(rs->r_tokens, L->b[b].ralloc);
    return 0;
}

/* The L pass (phase 5 of a round, paper III-D) on the residual capacity
 * and demand: limited buckets want the headroom left after R.  Buckets without a limit
 * are not throttled, need no L-tokens and must not take the residual from
 * limited ones, so they are left out, as are limited buckets with nothing
 * left to place.  Only the pairs the R pass listed as candidates
 * (ln->lcand) are visited, and only if `any_l`; the token phase reads R
 * back.  Fills l_tokens, lpass_shifts and the L times of *rs.  Returns 0,
 * -ENOMEM or a pshift error. */
int ledger_lpass(ledger_t *L, int any_l, const pshift_opts_t *o, ctrl_result_t *rs)
{
    int rc;
    pshift_problem_t *q = NULL;
    if (any_l) {
        if (!L->lp && !(L->lp = pshift_problem_new()))
            return -ENOMEM;
        q = L->lp;
        pshift_problem_clear(q);
        for (int i = 0; i < L->nn; i++) {
            ledger_node_t *ln = &L->n[i];
            if (!ln->up)
                continue;
            if ((rc = pshift_add_server(q, NULL, ln->capt > ln->load ? ln->capt - ln->load : 0)) <
                0)
                return rc;
        }
    }
    for (int i = 0; i < L->nn && q; i++) {
        ledger_node_t *ln = &L->n[i];
        size_t ne = 0;
        for (size_t x = 0; x < ln->nlcand; x++) {
            ledger_work_t *w = &ln->work[ln->lcand[x]];
            ledger_bucket_t *bs = &L->b[w->b];
            int64_t new_r = w->rk >= 0 ? bs->ra[w->rk] : 0;
            if (w->demand <= new_r || bs->head <= bs->ralloc)
                continue;
            if (bs->lpidx < 0) {
                bs->lpidx = pshift_add_bucket(q, NULL, bs->head - bs->ralloc);
                if (bs->lpidx < 0)
                    return bs->lpidx;
                L->lb[bs->lpidx] = w->b;
            }
            L->eb[ne] = bs->lpidx;
            L->ed[ne++] = w->demand - new_r;
            w->lk = bs->ln++;
        }
        if (ne && (rc = pshift_set_demands(q, ln->pidx, L->eb, L->ed, ne)) < 0)
            return rc;
    }
    if (q) {
        if ((rc = pshift_solve(q, o)) < 0)
            return rc;
        rs->t_pshift += pshift_stats(q)->t_total;
        rs->t_lpass = pshift_stats(q)->t_total;
        if (L->rd.hook)
            L->rd.hook(q, 1, rs->t_lpass, L->rd.hook_arg);
        rs->lpass_shifts = pshift_stats(q)->shifts;
        sum_alloc(L, q, 1);
    }
    /* The headroom left after R of the limited buckets in play (L->only),
     * or of every limited bucket. */
    for (size_t k = 0, n = L->only ? L->nonly : L->nb; k < n; k++) {
        const ledger_bucket_t *bs = &L->b[L->only ? L->only[k] : k];
        if (bs->l != CTRL_UNLIMITED)
            rs->l_tokens += bs->head - bs->ralloc;
    }
    return 0;
}
