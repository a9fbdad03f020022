/* bytes.c - the controller's bytes/s dimension (cost-aware tokens): byte rates of the buckets that have them, the nodes' byte reports and capacities, and each round's byte tokens, computed by the IO round's ledger passes (ledger.c) in bytes. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "common/growarr.h"
#include "controller/ctrl.h"
#include "controller/ctrl_int.h"

/* What one node said of one byte bucket in its last report, and what was
 * pushed to it.  Zero: nothing yet. */
typedef struct {
    uint8_t has, pushed;  /* a report; a push */
    uint64_t period;      /* of the report */
    uint64_t arr_int;     /* bytes that arrived in its last interval */
    uint64_t served;      /* bytes served in `period` */
    int64_t r, l;         /* last pushed (l CTRL_UNLIMITED) */
    int64_t grant;        /* limited bucket: as pair_push_t's, in bytes */
    uint64_t gperiod;
    int32_t k;            /* this round: its entry in the node's byte work,
                             -1 none (valid while `has`) */
} pbytes_t;

/* A bucket with a byte rate: what the nodes said of it.  Its rates and
 * budgets are its ledger_bucket_t in cbytes_t.b. */
typedef struct {
    pbytes_t *pn;         /* [capn]: per node index */
    int capn;
} bbucket_t;

/* A node's byte capacity (bytes per busy second: the IO capacity
 * estimator fed bytes) and its byte records of the round.  Zero: nothing
 * yet. */
typedef struct {
    uint8_t has;          /* a report */
    uint8_t est;          /* cap holds an estimate (a first sample came) */
    uint64_t period, served; /* at its last report */
    double busy;
    estimate_cap_t cap;
    proto_tokens_bytes_t *out;
    int nout, capout;
} bnode_t;

struct cbytes {
    bbucket_t *bb;        /* [nb] (zero for buckets without a byte rate) */
    ledger_bucket_t *b;          /* [nb] the byte ledger's buckets (bytes per
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
};

static void bb_free(bbucket_t *b)
{
    free(b->pn);
    b->pn = NULL;
    b->capn = 0;
}

void ctrl__bytes_free(ctrl_t *c)
{
    cbytes_t *y = c->by;
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
    c->by = NULL;
}

static int64_t per_period(int64_t rate, double period_s)
{
    double t = round((double)rate * period_s);
    return t > (double)CTRL_BUCKET_TOKENS_MAX ? CTRL_BUCKET_TOKENS_MAX : (int64_t)t;
}

int ctrl__bytes_config(ctrl_t *c, const bucketfile_t *old, const bucketfile_t *bf)
{
    size_t nb = bucketfile_count(bf);
    cbytes_t *o = c->by;
    size_t non = 0;
    for (size_t b = 0; b < nb; b++)
        non += bucketfile_has_bytes(bucketfile_get(bf, b)) != 0;
    if (!non && (!o || !o->non)) {
        ctrl__bytes_free(c); /* the paper: nothing to do, nothing kept */
        return 0;
    }
    cbytes_t *y = calloc(1, sizeof *y);
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
    for (size_t b = 0; b < nb; b++) {
        const bucketfile_bucket_t *x = bucketfile_get(bf, b);
        int ob = o && old ? bucketfile_find(old, x->name) : -1;
        int was = ob >= 0 && (size_t)ob < o->nb && o->on[ob];
        y->b[b].l = CTRL_UNLIMITED;
        if (bucketfile_has_bytes(x)) {
            y->on[b] = 1;
            y->b[b].r = per_period(x->reservation_bytes, c->cfg.period_s);
            y->b[b].l = x->limit_bytes > 0 ? per_period(x->limit_bytes, c->cfg.period_s)
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
            y->off[b] = 2 * c->cfg.intervals + 1;
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
    ctrl__bytes_free(c);
    c->by = y;
    return 0;
}

/* Grows the per-node arrays to hold node index n.  Returns 0 or -ENOMEM. */
static int fit_nodes(cbytes_t *y, int n)
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
static void cap_sample(const ctrl_t *c, bnode_t *bn, uint64_t bytes, double busy)
{
    double iv = c->cfg.period_s / c->cfg.intervals;
    if (!bn->est) {
        estimate_cap_cfg_t cfg = estimate_cap_defaults((double)bytes / busy);
        cfg.floor = 0;
        cfg.max_factor = 0;
        cfg.min_busy = 0;
        estimate_cap_init(&bn->cap, &cfg);
        bn->est = 1;
    }
    estimate_cap_update(&bn->cap, bytes, busy, busy > iv ? busy : iv);
}

int ctrl_node_report_bytes(ctrl_t *c, int node, uint64_t period, uint64_t served_bytes,
                           double busy_seconds, const proto_report_bytes_t *recs, size_t n)
{
    node_t *nd = ctrl__get_node(c, node);
    if (!nd)
        return -EINVAL;
    cbytes_t *y = c->by;
    if (!y)
        return 0; /* no bucket has a byte rate: nothing to keep */
    if (fit_nodes(y, node) < 0)
        return -ENOMEM;
    bnode_t *bn = &y->nd[node];
    if (bn->has && bn->period == period && served_bytes > bn->served && busy_seconds > bn->busy)
        cap_sample(c, bn, served_bytes - bn->served, busy_seconds - bn->busy);
    bn->has = 1;
    bn->period = period;
    bn->served = served_bytes;
    bn->busy = busy_seconds;
    for (size_t i = 0; i < n; i++) {
        const proto_report_bytes_t *r = &recs[i];
        if (r->bucket >= nd->ntable)
            return -EINVAL;
        int b = nd->pairs[r->bucket].b;
        if (b < 0 || (size_t)b >= y->nb || !y->on[b])
            continue;
        pbytes_t *p = pair_of(&y->bb[b], node);
        if (!p)
            return -ENOMEM;
        if (p->has && period < p->period)
            continue; /* older than what we hold */
        p->has = 1;
        p->period = period;
        p->arr_int = r->arrivals_interval;
        p->served = r->served;
    }
    return 0;
}

/* Appends a byte record for node i.  Returns 0 or -ENOMEM. */
static int out_add(cbytes_t *y, int i, uint32_t b, uint32_t flags, int64_t r, int64_t l)
{
    bnode_t *bn = &y->nd[i];
    if (growarr((void **)&bn->out, &bn->capout, bn->nout + 1, sizeof *bn->out) < 0)
        return -ENOMEM;
    bn->out[bn->nout++] = (proto_tokens_bytes_t){.bucket = b, .flags = flags, .r_bytes = r,
                                                 .l_bytes = l};
    return 0;
}

/* Byte pair p's bytes served this period. */
static int64_t pair_served(const ctrl_t *c, const pbytes_t *p)
{
    if (!p->has || p->period != c->period)
        return 0;
    return p->served > (uint64_t)CTRL_COUNT_MAX ? CTRL_COUNT_MAX : (int64_t)p->served;
}

/* This period's byte service of bucket b over every node that reported. */
static int64_t served_of(const ctrl_t *c, const bbucket_t *bb)
{
    int64_t s = 0;
    for (int i = 0; i < bb->capn; i++)
        s = count_add(s, pair_served(c, &bb->pn[i]));
    return s;
}

/* Bucket b's byte demand on node i for the rest of the period: its byte
 * arrivals of the last interval for every interval left, doubled while
 * requests wait there (arrivals of a closed loop only show what it got). */
static int64_t demand_of(const ctrl_t *c, const bbucket_t *bb, int i, size_t b, double il)
{
    if (i >= bb->capn || !bb->pn[i].has || bb->pn[i].period + 1 < c->period)
        return 0;
    double d = (double)bb->pn[i].arr_int * il;
    const node_t *nd = &c->nodes[i];
    int j = ctrl__node_slot(nd, b);
    if (j >= 0 && nd->pairs[j].queued > 0)
        d = 2 * d + 1;
    return d < (double)CTRL_COUNT_MAX ? (int64_t)d : CTRL_COUNT_MAX;
}

/* The byte ledger's inputs, as phase_estimate() makes the IO ones: each
 * byte bucket's bytes served this period (every node), what silent nodes
 * may still serve of it by their byte grants (held), its arrivals and
 * backlog (requests queued on an up node), and each up node's byte work:
 * one entry per byte pair it reported (byte demand, flags).  Returns 0 or
 * -ENOMEM. */
static int byte_work(ctrl_t *c, cbytes_t *y, double il)
{
    for (size_t b = 0; b < y->nb; b++) {
        ledger_bucket_t *bs = &y->b[b];
        bs->served = y->on[b] ? served_of(c, &y->bb[b]) : 0;
        bs->held = 0;
        bs->arrivals = 0;
        bs->backlog = 0;
    }
    for (int i = 0; i < c->nn; i++) {
        const node_t *nd = &c->nodes[i];
        ledger_node_t *ln = &y->L.n[i];
        int holds = ctrl__holds_grants(c, nd);
        ln->nwork = 0;
        if (!nd->up && !holds)
            continue;
        if (nd->up && ledger_reserve(ln, y->non) < 0)
            return -ENOMEM;
        for (size_t b = 0; b < y->nb; b++) {
            bbucket_t *bb = &y->bb[b];
            ledger_bucket_t *bs = &y->b[b];
            if (!y->on[b] || i >= bb->capn)
                continue;
            pbytes_t *p = &bb->pn[i];
            p->k = -1;
            if (holds && bs->l != CTRL_UNLIMITED)
                bs->held = count_add(
                    bs->held, ctrl__grant_left(c, nd, p->grant, p->gperiod, pair_served(c, p)));
            int j = ctrl__node_slot(nd, b);
            if (!nd->up || !p->has || j < 0)
                continue;
            ledger_work_t *w = &ln->work[ln->nwork];
            p->k = (int32_t)ln->nwork++;
            int queued = nd->pairs[j].queued > 0;
            w->b = (int)b;
            w->demand = demand_of(c, bb, i, b, il);
            w->arrivals = (double)p->arr_int;
            w->queued = 0; /* unknown in bytes (rq_begin() does not apply) */
            w->flags = LEDGER_EST | (p->period >= c->period ? LEDGER_CUR : 0) |
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
static int push_bucket(ctrl_t *c, cbytes_t *y, size_t b)
{
    bbucket_t *bb = &y->bb[b];
    const ledger_bucket_t *bs = &y->b[b];
    int64_t spread = 0;
    if (bs->l != CTRL_UNLIMITED && bs->head > bs->ralloc + bs->lalloc)
        spread = bs->head - bs->ralloc - bs->lalloc;
    int holders = 0, idx = 0;
    for (int i = 0; i < c->nn; i++)
        holders += c->nodes[i].up && ctrl__node_slot(&c->nodes[i], b) >= 0;
    int n = bs->nq ? bs->nq : holders;
    for (int i = 0; i < c->nn; i++) {
        if (!c->nodes[i].up || ctrl__node_slot(&c->nodes[i], b) < 0)
            continue;
        pbytes_t *p = pair_of(bb, i);
        if (!p)
            return -ENOMEM;
        const ledger_work_t *w = p->has && p->k >= 0 ? &y->L.n[i].work[p->k] : NULL;
        int64_t r = w && w->rk >= 0 ? bs->ra[w->rk] : 0, l = CTRL_UNLIMITED;
        if (bs->l != CTRL_UNLIMITED) {
            l = w && w->lk >= 0 ? bs->la[w->lk] : 0;
            if (!bs->nq || (w && (w->flags & (LEDGER_CUR | LEDGER_QUEUED)) == (LEDGER_CUR | LEDGER_QUEUED)))
                l += spread / n + (idx++ < spread % n ? 1 : 0);
            ctrl__grant_raise(c, &p->grant, &p->gperiod, pair_served(c, p), r, l);
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

int ctrl__bytes_compute(ctrl_t *c, double rem_s, double il, const pshift_opts_t *o)
{
    cbytes_t *y = c->by;
    if (!y)
        return 0;
    ledger_t *L = &y->L;
    int rc = fit_nodes(y, c->nn > 0 ? c->nn - 1 : 0);
    if (rc == 0)
        rc = ledger_fit(L, y->b, y->nb, c->nn);
    if (rc < 0)
        return rc;
    for (int i = 0; i < y->capn; i++)
        y->nd[i].nout = 0;
    if ((rc = byte_work(c, y, il)) < 0 || (rc = ledger_scratch(L)) < 0)
        goto out;
    int reset = !y->conv_started || y->conv_period != c->period;
    y->conv_started = 1;
    y->conv_period = c->period;
    ledger_convert(L, c->conv_el, reset);
    const ledger_round_t rd = ctrl__ledger_round(c, 0);
    ledger_budgets(L, &rd);
    for (int i = 0; i < c->nn; i++) {
        const bnode_t *bn = &y->nd[i]; /* unknown: not bounded */
        ledger_caps(L, i, c->nodes[i].up, bn->est ? bn->cap.estimate : INFINITY,
                    bn->est ? bn->cap.conservative : INFINITY, rem_s);
    }
    ctrl_result_t rs = {0};
    int any_l = 0;
    if ((rc = ledger_rpass(L, o, &rs, &any_l)) < 0 ||
        (rc = ledger_lpass(L, any_l, o, &rs)) < 0)
        goto out;
    for (size_t b = 0; b < y->nb; b++) {
        if (y->off[b] > 0) {
            for (int i = 0; i < c->nn; i++)
                if (c->nodes[i].up && ctrl__node_slot(&c->nodes[i], b) >= 0 &&
                    (rc = out_add(y, i, (uint32_t)b, PROTO_TOK_OFF, 0, 0)) < 0)
                    goto out;
            if (--y->off[b] == 0)
                y->noff--;
        } else if (y->on[b] && (rc = push_bucket(c, y, b)) < 0) {
            goto out;
        }
    }
out:
    if (rc < 0)
        for (int i = 0; i < y->capn; i++)
            y->nd[i].nout = 0;
    return rc;
}

size_t ctrl_node_tokens_bytes(const ctrl_t *c, int node, const proto_tokens_bytes_t **recs)
{
    const node_t *nd = ctrl__get_node(c, node);
    const cbytes_t *y = c->by;
    if (recs)
        *recs = NULL;
    if (!nd || !nd->up || !y || node >= y->capn)
        return 0;
    if (recs)
        *recs = y->nd[node].out;
    return (size_t)y->nd[node].nout;
}

void ctrl__bytes_info(const ctrl_t *c, int b, ctrl_bucket_info_t *out)
{
    const cbytes_t *y = c->by;
    if (!y || b < 0 || (size_t)b >= y->nb || !y->on[b])
        return;
    const bbucket_t *bb = &y->bb[b];
    out->served_bytes = (uint64_t)served_of(c, bb);
    int unl = 0;
    for (int i = 0; i < bb->capn && i < c->nn; i++) {
        const pbytes_t *p = &bb->pn[i];
        if (!c->nodes[i].up || !p->pushed)
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

double ctrl__bytes_capacity(const ctrl_t *c, int node)
{
    const cbytes_t *y = c->by;
    return y && node >= 0 && node < y->capn && y->nd[node].est ? y->nd[node].cap.estimate : 0;
}
