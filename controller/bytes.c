/* bytes.c - the controller's bytes/s dimension (cost-aware tokens): byte rates of the buckets that have them, the nodes' byte reports and capacities, and each round's byte tokens, computed by a second ledger (ledger.c) in bytes. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "common/growarr.h"
#include "controller/bytes.h"
#include "controller/count.h"
#include "controller/estimate.h"



/* What one node said of one byte bucket in its last report, and what was
 * pushed to it.  Zero: nothing yet. */
typedef struct {
    uint8_t has, pushed;  /* a report; a push */
    uint64_t period;      /* of the report */
    uint64_t arr_int;     /* bytes that arrived in its last interval */
    uint64_t served;      /* bytes served in `period` */
    int64_t r, l;         /* last pushed (l CTRL_UNLIMITED) */
    int64_t grant;        /* limited bucket: its grant (ledger.h), in bytes */
    uint64_t gperiod;
    int32_t k;            /* this round: its entry in the node's byte work,
                             -1 none (valid while `has`) */
} pbytes_t;

/* A bucket with a byte rate: what the nodes said of it.  Its rates and
 * budgets are its ledger_bucket_t in bytes_t.b. */
typedef struct {
    pbytes_t *pn;         /* [capn]: per node index */
    int capn;
} bbucket_t;

/* A node's byte capacity (bytes per busy second: the IO capacity
 * estimator fed bytes), whether it is up this round (bytes_compute) and
 * its byte records of the round.  Zero: nothing yet. */
typedef struct {
    uint8_t up;           /* this round, as the view said */
    uint8_t has;          /* a report */
    uint8_t est;          /* cap holds an estimate (a first sample came) */
    uint64_t period, served; /* at its last report */
    double busy;
    estimate_cap_t cap;
    proto_tokens_bytes_t *out;
    int nout, capout;
} bnode_t;

struct bytes {
    bbucket_t *bb;        /* [nb] (zero for buckets without a byte rate) */
    ledger_bucket_t *b;   /* [nb] the byte ledger's buckets (bytes per
                             period; without a byte rate: R 0, no limit) */
    uint8_t *on;          /* [nb] */
    int *off;             /* [nb] rounds left to push "off" (lost its rate) */
    size_t nb;
    size_t non;           /* buckets with a byte rate */
    size_t noff;          /* buckets with off > 0 */
    bnode_t *nd;          /* [capn] */
    int capn;
    ledger_t L;           /* the passes' state (L.b = b) */
    uint64_t conv_period; /* period the conversion state is of */
    int conv_started;
    double period_s;      /* the controller's T and K */
    int intervals;
};

static void bb_free(bbucket_t *b)
{
    free(b->pn);
    b->pn = NULL;
    b->capn = 0;
}

void bytes_destroy(bytes_t **yp)
{
    bytes_t *y = yp ? *yp : NULL;
    if (!y)
        return;
    for (size_t b = 0; b < y->nb; b++)
        bb_free(&y->bb[b]);
    free(y->bb);
    free(y->b);
    free(y->on);
    free(y->off);
    for (int i = 0; i < y->capn; i++)
        free(y->nd[i].out);
    free(y->nd);
    ledger_free(&y->L);
    free(y);
    *yp = NULL;
}

static int64_t per_period(int64_t rate, double period_s)
{
    double t = round((double)rate * period_s);
    return t > (double)CTRL_BUCKET_TOKENS_MAX ? CTRL_BUCKET_TOKENS_MAX : (int64_t)t;
}

int bytes_config(bytes_t **yp, const bucketfile_t *old, const bucketfile_t *bf, double period_s,
                 int intervals)
{
    size_t nb = bucketfile_count(bf);
    bytes_t *o = *yp;
    size_t non = 0;
    for (size_t b = 0; b < nb; b++)
        non += bucketfile_has_bytes(bucketfile_get(bf, b)) != 0;
    if (!non && (!o || !o->non)) {
        bytes_destroy(yp); /* the paper: nothing to do, nothing kept */
        return 0;
    }
    bytes_t *y = calloc(1, sizeof *y);
    if (!y || !(y->bb = calloc(nb ? nb : 1, sizeof *y->bb)) ||
        !(y->b = calloc(nb ? nb : 1, sizeof *y->b)) || !(y->on = calloc(nb ? nb : 1, 1)) ||
        !(y->off = calloc(nb ? nb : 1, sizeof *y->off))) {
        if (y) {
            free(y->bb);
            free(y->b);
            free(y->on);
            free(y->off);
        }
        free(y);
        return -ENOMEM;
    }
    y->nb = nb;
    y->non = non;
    y->period_s = period_s;
    y->intervals = intervals;
    for (size_t b = 0; b < nb; b++) {
        const bucketfile_bucket_t *x = bucketfile_get(bf, b);
        int ob = o && old ? bucketfile_find(old, x->name) : -1;
        int was = ob >= 0 && (size_t)ob < o->nb && o->on[ob];
        y->b[b].l = CTRL_UNLIMITED;
        if (bucketfile_has_bytes(x)) {
            y->on[b] = 1;
            y->b[b].r = per_period(x->reservation_bytes, period_s);
            y->b[b].l = x->limit_bytes > 0 ? per_period(x->limit_bytes, period_s)
                                           : CTRL_UNLIMITED;
            if (was) { /* keeps what the nodes said of it and its conversion */
                y->bb[b].pn = o->bb[ob].pn;
                y->bb[b].capn = o->bb[ob].capn;
                o->bb[ob].pn = NULL;
                o->bb[ob].capn = 0;
                y->b[b].conv = o->b[ob].conv;
                y->b[b].srv_prev = o->b[ob].srv_prev;
            }
        } else if (was || (ob >= 0 && (size_t)ob < o->nb && o->off[ob] > 0)) {
            /* Lost its byte rate: the nodes are told for two periods. */
            y->off[b] = 2 * intervals + 1;
            y->noff++;
        }
    }
    if (o) { /* the nodes' byte state stays */
        y->nd = o->nd;
        y->capn = o->capn;
        y->L = o->L;
        y->conv_period = o->conv_period;
        y->conv_started = o->conv_started;
        o->nd = NULL;
        o->capn = 0;
        o->L = (ledger_t){0};
    }
    bytes_destroy(yp);
    *yp = y;
    return 0;
}

/* Grows the per-node arrays to hold node index n.  Returns 0 or -ENOMEM. */
static int fit_nodes(bytes_t *y, int n)
{
    return growarr((void **)&y->nd, &y->capn, n + 1, sizeof *y->nd);
}

/* Byte bucket bb's record of node n (grown to it), or NULL if out of memory. */
static pbytes_t *pair_of(bbucket_t *bb, int n)
{
    return growarr((void **)&bb->pn, &bb->capn, n + 1, sizeof *bb->pn) < 0 ? NULL : &bb->pn[n];
}

/* Feeds node bn's byte capacity estimator the bytes it served in `busy`
 * busy seconds since its last report: the IO estimator's rules (a window
 * of samples, steady moves, a conservative capacity under the estimate),
 * started at the first sample (bytes have no profile) and without the
 * bounds tied to a profile (floor, max_factor): a node's bytes per busy
 * second follow its requests' sizes. */
static void cap_sample(const bytes_t *y, bnode_t *bn, uint64_t bytes, double busy)
{
    double iv = y->period_s / y->intervals;
    if (!bn->est) {
        estimate_cap_cfg_t cfg = estimate_cap_defaults((double)bytes / busy);
        cfg.floor = 0;
        cfg.max_factor = 0;
        cfg.min_busy = 0;
        cfg.recent = 0; /* the delivered cap (issue 25) is judged for IOs only */
        estimate_cap_init(&bn->cap, &cfg);
        bn->est = 1;
    }
    estimate_cap_update(&bn->cap, bytes, busy, busy > iv ? busy : iv);
}

int bytes_report(bytes_t *y, int node, uint64_t period, uint64_t served_bytes,
                 double busy_seconds)
{
    if (fit_nodes(y, node) < 0)
        return -ENOMEM;
    bnode_t *bn = &y->nd[node];
    if (bn->has && bn->period == period && served_bytes > bn->served && busy_seconds > bn->busy)
        cap_sample(y, bn, served_bytes - bn->served, busy_seconds - bn->busy);
    bn->has = 1;
    bn->period = period;
    bn->served = served_bytes;
    bn->busy = busy_seconds;
    return 0;
}

int bytes_report_rec(bytes_t *y, int node, int b, uint64_t period, uint64_t arrivals_interval,
                     uint64_t served)
{
    if (b < 0 || (size_t)b >= y->nb || !y->on[b])
        return 0;
    pbytes_t *p = pair_of(&y->bb[b], node);
    if (!p)
        return -ENOMEM;
    if (p->has && period < p->period)
        return 0; /* older than what we hold */
    p->has = 1;
    p->period = period;
    p->arr_int = arrivals_interval;
    p->served = served;
    return 0;
}

/* Appends a byte record for node i.  Returns 0 or -ENOMEM. */
static int out_add(bytes_t *y, int i, uint32_t b, uint32_t flags, int64_t r, int64_t l)
{
    bnode_t *bn = &y->nd[i];
    if (growarr((void **)&bn->out, &bn->capout, bn->nout + 1, sizeof *bn->out) < 0)
        return -ENOMEM;
    bn->out[bn->nout++] = (proto_tokens_bytes_t){.bucket = b, .flags = flags, .r_bytes = r,
                                                 .l_bytes = l};
    return 0;
}

/* Byte pair p's bytes served in `period` (the current one). */
static int64_t pair_served(uint64_t period, const pbytes_t *p)
{
    if (!p->has || p->period != period)
        return 0;
    return p->served > (uint64_t)CTRL_COUNT_MAX ? CTRL_COUNT_MAX : (int64_t)p->served;
}

/* The byte service of bucket bb in `period` (the current one) over every
 * node that reported. */
static int64_t served_of(uint64_t period, const bbucket_t *bb)
{
    int64_t s = 0;
    for (int i = 0; i < bb->capn; i++)
        s = count_add(s, pair_served(period, &bb->pn[i]));
    return s;
}

/* Bucket bb's byte demand on node i for the rest of `period` (`il`
 * intervals left): its byte arrivals of the last interval for every
 * interval left, doubled while requests wait there (`queued`: arrivals of
 * a closed loop only show what it got). */
static int64_t demand_of(uint64_t period, const bbucket_t *bb, int i, int queued, double il)
{
    if (i >= bb->capn || !bb->pn[i].has || bb->pn[i].period + 1 < period)
        return 0;
    double d = (double)bb->pn[i].arr_int * il;
    if (queued)
        d = 2 * d + 1;
    return d < (double)CTRL_COUNT_MAX ? (int64_t)d : CTRL_COUNT_MAX;
}

/* The byte ledger's inputs, as phase_estimate() makes the IO ones: each
 * byte bucket's bytes served this period (every node), what silent nodes
 * may still serve of it by their byte grants (held), its arrivals and
 * backlog (requests queued on an up node), and each up node's byte work:
 * one entry per byte pair it reported (byte demand, flags).  Returns 0 or
 * -ENOMEM. */
static int byte_work(bytes_t *y, const bytes_view_t *v, double il)
{
    const uint64_t period = v->period;
    for (size_t b = 0; b < y->nb; b++) {
        ledger_bucket_t *bs = &y->b[b];
        bs->served = y->on[b] ? served_of(period, &y->bb[b]) : 0;
        bs->held = 0;
        bs->arrivals = 0;
        bs->backlog = 0;
    }
    for (int i = 0; i < v->nn; i++) {
        bytes_node_t nd;
        v->node(v->arg, i, &nd);
        y->nd[i].up = nd.up;
        ledger_node_t *ln = &y->L.n[i];
        const int holds = nd.holds;
        ln->nwork = 0;
        if (!nd.up && !holds)
            continue;
        if (nd.up && ledger_reserve(ln, y->non) < 0)
            return -ENOMEM;
        for (size_t b = 0; b < y->nb; b++) {
            bbucket_t *bb = &y->bb[b];
            ledger_bucket_t *bs = &y->b[b];
            if (!y->on[b] || i >= bb->capn)
                continue;
            pbytes_t *p = &bb->pn[i];
            p->k = -1;
            if (holds && bs->l != CTRL_UNLIMITED)
                bs->held = count_add(bs->held,
                                     ledger_grant_left(period, nd.down_rep, p->grant, p->gperiod,
                                                       pair_served(period, p)));
            int j = nd.up && p->has ? v->pair(v->arg, i, b) : -1;
            if (j < 0)
                continue;
            ledger_work_t *w = &ln->work[ln->nwork];
            p->k = (int32_t)ln->nwork++;
            int queued = j > 0;
            w->b = (int)b;
            w->demand = demand_of(period, bb, i, queued, il);
            w->arrivals = (double)p->arr_int;
            w->queued = 0; /* unknown in bytes (rq_begin() does not apply) */
            w->flags = LEDGER_EST | (p->period >= period ? LEDGER_CUR : 0) |
                       (queued ? LEDGER_QUEUED : 0);
            bs->arrivals += w->arrivals;
            bs->backlog |= queued;
        }
    }
    return 0;
}

/* The byte records of bucket b for every up node holding it: R as the
 * R pass placed it, L as the L pass placed it plus an even share of the
 * headroom it did not place (no demand for it), so that demand moving
 * between the nodes is served at once -- limits being rates, only over the
 * nodes where it is queued if there are any (bs->nq), as push_node() does
 * for IOs; served + held + R + L add up to at most the byte limit.
 * Returns 0 or -ENOMEM. */
static int push_bucket(bytes_t *y, const bytes_view_t *v, size_t b)
{
    bbucket_t *bb = &y->bb[b];
    const ledger_bucket_t *bs = &y->b[b];
    int64_t spread = 0;
    if (bs->l != CTRL_UNLIMITED && bs->head > bs->ralloc + bs->lalloc)
        spread = bs->head - bs->ralloc - bs->lalloc;
    int holders = 0, idx = 0;
    for (int i = 0; i < v->nn; i++)
        holders += y->nd[i].up && v->pair(v->arg, i, b) >= 0;
    int n = bs->nq ? bs->nq : holders;
    for (int i = 0; i < v->nn; i++) {
        if (!y->nd[i].up || v->pair(v->arg, i, b) < 0)
            continue;
        pbytes_t *p = pair_of(bb, i);
        if (!p)
            return -ENOMEM;
        const ledger_work_t *w = p->has && p->k >= 0 ? &y->L.n[i].work[p->k] : NULL;
        int64_t r = w && w->rk >= 0 ? bs->ra[w->rk] : 0, l = CTRL_UNLIMITED;
        if (bs->l != CTRL_UNLIMITED) {
            l = w && w->lk >= 0 ? bs->la[w->lk] : 0;
            const uint8_t cq = LEDGER_CUR | LEDGER_QUEUED;
            if (!bs->nq || (w && (w->flags & cq) == cq))
                l += spread / n + (idx++ < spread % n ? 1 : 0);
            ledger_grant_raise(v->period, &p->grant, &p->gperiod, pair_served(v->period, p), r,
                               l);
        }
        p->pushed = 1;
        p->r = r;
        p->l = l;
        int rc = out_add(y, i, (uint32_t)b, 0, r, l);
        if (rc < 0)
            return rc;
    }
    return 0;
}

int bytes_compute(bytes_t *y, const bytes_view_t *v, const bytes_round_t *in,
                  const pshift_opts_t *o)
{
    ledger_t *L = &y->L;
    int rc = fit_nodes(y, v->nn > 0 ? v->nn - 1 : 0);
    if (rc == 0)
        rc = ledger_fit(L, y->b, y->nb, v->nn);
    if (rc < 0)
        return rc;
    for (int i = 0; i < y->capn; i++)
        y->nd[i].nout = 0;
    if ((rc = byte_work(y, v, in->il)) < 0 || (rc = ledger_scratch(L)) < 0)
        goto out;
    int reset = !y->conv_started || y->conv_period != v->period;
    y->conv_started = 1;
    y->conv_period = v->period;
    ledger_convert(L, in->conv_el, reset);
    ledger_budgets(L, &in->rd);
    for (int i = 0; i < v->nn; i++) {
        const bnode_t *bn = &y->nd[i]; /* unknown: not bounded */
        ledger_caps(L, i, bn->up, bn->est ? bn->cap.estimate : INFINITY,
                    bn->est ? bn->cap.conservative : INFINITY,
                    bn->est ? bn->cap.confined : INFINITY, in->rem_s);
    }
    ctrl_result_t rs = {0};
    int any_l = 0;
    if ((rc = ledger_rpass(L, o, &rs, &any_l)) < 0 ||
        (rc = ledger_lpass(L, any_l, o, &rs)) < 0)
        goto out;
    for (size_t b = 0; b < y->nb; b++) {
        if (y->off[b] > 0) {
            for (int i = 0; i < v->nn; i++)
                if (y->nd[i].up && v->pair(v->arg, i, b) >= 0 &&
                    (rc = out_add(y, i, (uint32_t)b, PROTO_TOK_OFF, 0, 0)) < 0)
                    goto out;
            if (--y->off[b] == 0)
                y->noff--;
        } else if (y->on[b] && (rc = push_bucket(y, v, b)) < 0) {
            goto out;
        }
    }
out:
    if (rc < 0)
        for (int i = 0; i < y->capn; i++)
            y->nd[i].nout = 0;
    return rc;
}

size_t bytes_tokens(const bytes_t *y, int node, const proto_tokens_bytes_t **recs)
{
    if (recs)
        *recs = NULL;
    if (!y || node < 0 || node >= y->capn)
        return 0;
    if (recs)
        *recs = y->nd[node].out;
    return (size_t)y->nd[node].nout;
}

void bytes_info(const bytes_t *y, const bytes_view_t *v, int b, ctrl_bucket_info_t *out)
{
    if (!y || b < 0 || (size_t)b >= y->nb || !y->on[b])
        return;
    const bbucket_t *bb = &y->bb[b];
    out->served_bytes = (uint64_t)served_of(v->period, bb);
    int unl = 0;
    for (int i = 0; i < bb->capn && i < v->nn; i++) {
        const pbytes_t *p = &bb->pn[i];
        bytes_node_t nd;
        v->node(v->arg, i, &nd);
        if (!nd.up || !p->pushed)
            continue;
        out->r_bytes = count_add(out->r_bytes, p->r);
        if (p->l == CTRL_UNLIMITED)
            unl = 1;
        else
            out->l_bytes = count_add(out->l_bytes, p->l);
    }
    if (unl)
        out->l_bytes = CTRL_UNLIMITED;
}

double bytes_capacity(const bytes_t *y, int node)
{
    return y && node >= 0 && node < y->capn && y->nd[node].est ? y->nd[node].cap.estimate : 0;
}
