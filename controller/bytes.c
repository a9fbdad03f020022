/* bytes.c - the controller's bytes/s dimension (cost-aware tokens): byte rates of the buckets that have them, the nodes' byte reports, and each round's byte tokens (an R pass and an L pass by pShift within the nodes' byte capacities, as for IOs). */
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
} pbytes_t;

/* A bucket with a byte rate. */
typedef struct {
    int64_t rb, lb;       /* bytes per period (lb CTRL_UNLIMITED: no limit) */
    pbytes_t *pn;         /* [capn]: per node index */
    int capn;
} bbucket_t;

/* A node's byte throughput while busy (its byte capacity), and its byte
 * records of the round.  Zero: nothing yet. */
typedef struct {
    uint8_t has;          /* a report */
    uint64_t period, served; /* at its last report */
    double busy;
    double rate;          /* bytes per busy second, 0: unknown */
    proto_tokens_bytes_t *out;
    int nout, capout;
} bnode_t;

struct cbytes {
    bbucket_t *bb;        /* [nb] (zero for buckets without a byte rate) */
    uint8_t *on;          /* [nb] */
    int *off;             /* [nb] rounds left to push "off" (lost its rate) */
    size_t nb;
    size_t non;           /* buckets with a byte rate */
    size_t noff;          /* buckets with off > 0 */
    bnode_t *nd;          /* [capn] */
    int capn;
    pshift_problem_t *p, *q; /* the byte R and L problems, reused */
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
    free(y->on);
    free(y->off);
    for (int i = 0; i < y->capn; i++)
        free(y->nd[i].out);
    free(y->nd);
    pshift_problem_destroy(&y->p);
    pshift_problem_destroy(&y->q);
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
        !(y->on = calloc(nb ? nb : 1, 1)) || !(y->off = calloc(nb ? nb : 1, sizeof *y->off))) {
        if (y) {
            free(y->bb);
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
        if (bucketfile_has_bytes(x)) {
            y->on[b] = 1;
            y->bb[b].rb = per_period(x->reservation_bytes, c->cfg.period_s);
            y->bb[b].lb = x->limit_bytes > 0 ? per_period(x->limit_bytes, c->cfg.period_s)
                                             : CTRL_UNLIMITED;
            if (was) { /* keeps what the nodes said of it */
                y->bb[b].pn = o->bb[ob].pn;
                y->bb[b].capn = o->bb[ob].capn;
                o->bb[ob].pn = NULL;
                o->bb[ob].capn = 0;
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
        y->p = o->p;
        y->q = o->q;
        o->nd = NULL;
        o->capn = 0;
        o->p = o->q = NULL;
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
    if (bn->has && bn->period == period && served_bytes > bn->served && busy_seconds > bn->busy) {
        double r = (double)(served_bytes - bn->served) / (busy_seconds - bn->busy);
        bn->rate = bn->rate > 0 ? 0.5 * bn->rate + 0.5 * r : r;
    }
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

/* This period's byte service of bucket b over every node that reported. */
static int64_t served_of(const ctrl_t *c, const bbucket_t *bb)
{
    int64_t s = 0;
    for (int i = 0; i < bb->capn; i++)
        if (bb->pn[i].has && bb->pn[i].period == c->period)
            s = ctrl__count_add(s, (int64_t)(bb->pn[i].served > (uint64_t)CTRL_COUNT_MAX
                                                 ? (uint64_t)CTRL_COUNT_MAX
                                                 : bb->pn[i].served));
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

/* Adds a bucket's demand d on server s to problem p; the bucket (`target`
 * tokens) is created on its first demand, *bi its index (-1 before).
 * Returns 0 or a negative error. */
static int add_demand(pshift_problem_t *p, int *bi, int64_t target, int s, int64_t d)
{
    if (*bi < 0 && (*bi = pshift_add_bucket(p, NULL, target)) < 0)
        return *bi;
    return pshift_set_demand(p, *bi, s, d);
}

/* Solves p with the controller's pShift threads: 0 or a negative error. */
static int solve(const ctrl_t *c, pshift_problem_t *p)
{
    pshift_opts_t o = PSHIFT_OPTS_DEFAULT;
    o.threads = c->cfg.threads;
    return pshift_solve(p, &o);
}

/* The byte R pass: pShift places every byte bucket's remaining byte
 * reservation on the up nodes where it has demand, within their byte
 * capacities for the `rem_s` seconds left (unknown: not bounded).  The
 * allocations are read back by pshift_alloc().  Returns 1 if it solved a
 * problem, 0 if there was none, or a negative error. */
static int rpass(ctrl_t *c, double rem_s, double il, const int64_t *r_rem, int *pidx, int *sidx)
{
    cbytes_t *y = c->by;
    if (!y->p && !(y->p = pshift_problem_new()))
        return -ENOMEM;
    pshift_problem_clear(y->p);
    int ns = 0;
    for (int i = 0; i < c->nn; i++) {
        sidx[i] = -1;
        if (!c->nodes[i].up)
            continue;
        double rate = i < y->capn ? y->nd[i].rate : 0;
        double cap = rate > 0 ? rate * rem_s : (double)CTRL_NODE_TOKENS_MAX;
        int64_t ct = cap < (double)CTRL_NODE_TOKENS_MAX ? (int64_t)cap : CTRL_NODE_TOKENS_MAX;
        if ((sidx[i] = pshift_add_server(y->p, NULL, ct)) < 0)
            return sidx[i];
        ns++;
    }
    int any = 0;
    for (size_t b = 0; b < y->nb; b++) {
        pidx[b] = -1;
        if (!y->on[b] || r_rem[b] <= 0 || !ns)
            continue;
        for (int i = 0; i < c->nn; i++) {
            int64_t d = sidx[i] >= 0 ? demand_of(c, &y->bb[b], i, b, il) : 0;
            int rc = d > 0 ? add_demand(y->p, &pidx[b], r_rem[b], sidx[i], d) : 0;
            if (rc < 0)
                return rc;
            any |= d > 0;
        }
    }
    if (!any)
        return 0;
    int rc = solve(c, y->p);
    return rc < 0 ? rc : 1;
}

/* R placed for byte bucket b on node i. */
static int64_t r_of(const cbytes_t *y, const int *pidx, const int *sidx, size_t b, int i)
{
    return pidx[b] >= 0 && sidx[i] >= 0 ? pshift_alloc(y->p, pidx[b], sidx[i]) : 0;
}

/* The byte L pass, as the IO one: pShift places the byte headroom beyond
 * R of each limited byte bucket (rest[b]) on the up nodes' byte capacity
 * left after R (`solved`: the R problem was), by its demand beyond R there.
 * lidx[b] is its bucket in y->q, -1 if none.  Returns 0 or a negative
 * error. */
static int lpass(ctrl_t *c, double il, const int64_t *rest, const int *pidx, const int *sidx,
                 int solved, int *lidx)
{
    cbytes_t *y = c->by;
    if (!y->q && !(y->q = pshift_problem_new()))
        return -ENOMEM;
    pshift_problem_clear(y->q);
    for (int i = 0; i < c->nn; i++) {
        if (sidx[i] < 0)
            continue;
        int64_t left = pshift_server_capacity(y->p, sidx[i]) -
                       (solved ? pshift_server_load(y->p, sidx[i]) : 0);
        int rc = pshift_add_server(y->q, NULL, left > 0 ? left : 0);
        if (rc < 0)
            return rc;
    }
    int any = 0;
    for (size_t b = 0; b < y->nb; b++) {
        lidx[b] = -1;
        if (!y->on[b] || rest[b] == CTRL_UNLIMITED || rest[b] <= 0)
            continue;
        for (int i = 0; i < c->nn; i++) {
            if (sidx[i] < 0 || ctrl__node_slot(&c->nodes[i], b) < 0)
                continue;
            int64_t d = demand_of(c, &y->bb[b], i, b, il) - r_of(y, pidx, sidx, b, i);
            int rc = d > 0 ? add_demand(y->q, &lidx[b], rest[b], sidx[i], d) : 0;
            if (rc < 0)
                return rc;
            any |= d > 0;
        }
    }
    return any ? solve(c, y->q) : 0;
}

int ctrl__bytes_compute(ctrl_t *c, double rem_s, double il)
{
    cbytes_t *y = c->by;
    if (!y)
        return 0;
    int rc = fit_nodes(y, c->nn > 0 ? c->nn - 1 : 0);
    if (rc < 0)
        return rc;
    for (int i = 0; i < y->capn; i++)
        y->nd[i].nout = 0;
    int64_t *r_rem = calloc(y->nb ? y->nb : 1, sizeof *r_rem);
    int *pidx = calloc(y->nb ? y->nb : 1, sizeof *pidx);
    int *lidx = calloc(y->nb ? y->nb : 1, sizeof *lidx);
    int *sidx = calloc(c->nn ? (size_t)c->nn : 1, sizeof *sidx);
    int64_t *head = calloc(y->nb ? y->nb : 1, sizeof *head);
    rc = -ENOMEM;
    if (!r_rem || !pidx || !lidx || !sidx || !head)
        goto out;
    for (size_t b = 0; b < y->nb; b++) {
        if (!y->on[b])
            continue;
        bbucket_t *bb = &y->bb[b];
        int64_t served = served_of(c, bb);
        head[b] = bb->lb == CTRL_UNLIMITED ? CTRL_UNLIMITED
                                           : (bb->lb > served ? bb->lb - served : 0);
        r_rem[b] = bb->rb > served ? bb->rb - served : 0;
        if (r_rem[b] > head[b])
            r_rem[b] = head[b];
    }
    int solved = rc = rpass(c, rem_s, il, r_rem, pidx, sidx);
    if (rc < 0)
        goto out;
    /* What is left of each bucket's headroom after R: for the L pass. */
    for (size_t b = 0; b < y->nb; b++) {
        if (!y->on[b] || head[b] == CTRL_UNLIMITED)
            continue;
        int64_t rsum = 0;
        for (int i = 0; i < c->nn; i++)
            rsum = ctrl__count_add(rsum, r_of(y, pidx, sidx, b, i));
        head[b] = head[b] > rsum ? head[b] - rsum : 0;
    }
    if ((rc = lpass(c, il, head, pidx, sidx, solved, lidx)) < 0)
        goto out;
    for (size_t b = 0; b < y->nb; b++) {
        if (y->off[b] > 0) {
            for (int i = 0; i < c->nn; i++)
                if (c->nodes[i].up && ctrl__node_slot(&c->nodes[i], b) >= 0 &&
                    (rc = out_add(y, i, (uint32_t)b, PROTO_TOK_OFF, 0, 0)) < 0)
                    goto out;
            if (--y->off[b] == 0)
                y->noff--;
            continue;
        }
        if (!y->on[b])
            continue;
        bbucket_t *bb = &y->bb[b];
        /* L: what the L pass placed, and the headroom it did not place
         * (no demand for it) spread evenly over the nodes holding the
         * bucket, so that demand moving between them is served at once;
         * it all adds up to the headroom, so the byte limit holds. */
        int64_t rest = head[b], placed = 0;
        int holders = 0;
        for (int i = 0; i < c->nn; i++) {
            if (!c->nodes[i].up || ctrl__node_slot(&c->nodes[i], b) < 0)
                continue;
            holders++;
            if (lidx[b] >= 0)
                placed = ctrl__count_add(placed, pshift_alloc(y->q, lidx[b], sidx[i]));
        }
        int64_t spread = rest == CTRL_UNLIMITED ? 0 : (rest > placed ? rest - placed : 0);
        int k = 0;
        for (int i = 0; i < c->nn; i++) {
            if (!c->nodes[i].up || ctrl__node_slot(&c->nodes[i], b) < 0)
                continue;
            int64_t r = r_of(y, pidx, sidx, b, i), l = CTRL_UNLIMITED;
            if (rest != CTRL_UNLIMITED)
                l = (lidx[b] >= 0 ? pshift_alloc(y->q, lidx[b], sidx[i]) : 0) +
                    spread / holders + (k++ < spread % holders ? 1 : 0);
            pbytes_t *p = pair_of(bb, i);
            if (!p) {
                rc = -ENOMEM;
                goto out;
            }
            p->pushed = 1;
            p->r = r;
            p->l = l;
            if ((rc = out_add(y, i, (uint32_t)b, 0, r, l)) < 0)
                goto out;
        }
    }
    rc = 0;
out:
    free(r_rem);
    free(pidx);
    free(lidx);
    free(sidx);
    free(head);
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
        out->r_bytes = ctrl__count_add(out->r_bytes, p->r);
        if (p->l == CTRL_UNLIMITED)
            unl = 1;
        else
            out->l_bytes = ctrl__count_add(out->l_bytes, p->l);
    }
    if (unl)
        out->l_bytes = CTRL_UNLIMITED;
}

double ctrl__bytes_capacity(const ctrl_t *c, int node)
{
    const cbytes_t *y = c->by;
    return y && node >= 0 && node < y->capn ? y->nd[node].rate : 0;
}
