/* fair.c - the controller's weighted fair shares of spare capacity: the problem from the IO ledger after its passes, solved by shares.c, kept as per-node share records. */
#include "controller/fair.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "controller/ctrl.h"

struct fair {
    shares_t *sh;
    shares_pair_t *p;      /* [np]: the hungry pairs, node by node */
    size_t np, capp;
    int *pnode;            /* [np]: node index of p[k] (its server is the
                              up node's rank) */
    uint32_t *pwork;       /* [np]: its position in the node's work */
    int64_t *spare;        /* [ns] */
    int *srv_node;         /* [ns]: server -> node index */
    int caps;
    int64_t *cap;          /* [nb] */
    uint32_t *w;           /* [nb] */
    size_t capb;
    int64_t *wshare;       /* [woff[nn]]: share of node i's work pair k at
                              woff[i] + k (0: none) */
    size_t capw;
    size_t *woff;          /* [nn + 1] */
    int capwo;
    int64_t *bshare;       /* [nb]: each bucket's shares in all */
    size_t capbs;
    proto_share_rec_t *out;/* every node's records, node by node */
    size_t capout;
    size_t *ostart;        /* [nn + 1] */
    int capo, nn;
    fair_stats_t st;
};

fair_t *fair_new(void)
{
    fair_t *f = calloc(1, sizeof *f);
    if (f && !(f->sh = shares_new())) {
        free(f);
        f = NULL;
    }
    return f;
}

void fair_destroy(fair_t **fp)
{
    if (!fp || !*fp)
        return;
    fair_t *f = *fp;
    shares_destroy(&f->sh);
    free(f->p);
    free(f->pnode);
    free(f->pwork);
    free(f->spare);
    free(f->srv_node);
    free(f->cap);
    free(f->w);
    free(f->out);
    free(f->ostart);
    free(f->wshare);
    free(f->woff);
    free(f->bshare);
    free(f);
    *fp = NULL;
}

/* Grows *pp (of *cap elements of size sz) to hold n.  0 or -ENOMEM. */
static int room(void *pp, size_t *cap, size_t n, size_t sz)
{
    if (n <= *cap)
        return 0;
    size_t c = *cap ? *cap : 16;
    while (c < n)
        c *= 2;
    void *q = realloc(*(void **)pp, c * sz);
    if (!q)
        return -ENOMEM;
    *(void **)pp = q;
    *cap = c;
    return 0;
}

/* What pair w of bucket bs was given by the R pass.  The L pass's
 * L-tokens are not counted: with shares on, a limited bucket's L-tokens
 * are its share of the division (its headroom left after R is its cap),
 * so that limits and spare capacity divide by the same rule. */
static int64_t given(const ledger_bucket_t *bs, const ledger_work_t *w)
{
    return w->rk >= 0 && bs->ra ? bs->ra[w->rk] : 0;
}

static int cmp_tokens_desc(const void *x, const void *y)
{
    int64_t a = ((const proto_share_rec_t *)x)->tokens, b = ((const proto_share_rec_t *)y)->tokens;
    return a > b ? -1 : a < b;
}

static int cmp_bucket(const void *x, const void *y)
{
    uint32_t a = ((const proto_share_rec_t *)x)->bucket, b = ((const proto_share_rec_t *)y)->bucket;
    return a < b ? -1 : a > b;
}

/* Builds the problem.  Returns 0 or -ENOMEM. */
static int build(fair_t *f, const ledger_t *L, const uint32_t *weights, int *ns_out)
{
    size_t nb = L->nb, capb = f->capb, np = 0;
    if (room(&f->cap, &capb, nb, sizeof *f->cap) < 0)
        return -ENOMEM;
    size_t capw = f->capb;
    if (room(&f->w, &capw, nb, sizeof *f->w) < 0)
        return -ENOMEM;
    f->capb = capb < capw ? capb : capw;
    for (size_t b = 0; b < nb; b++) {
        const ledger_bucket_t *bs = &L->b[b];
        f->w[b] = weights && weights[b] ? weights[b] : 1;
        if (bs->l == CTRL_UNLIMITED) {
            f->cap[b] = SHARES_NOCAP;
        } else {
            int64_t left = bs->head - bs->ralloc;
            f->cap[b] = left > 0 ? left : 0;
        }
    }
    size_t caps = (size_t)f->caps;
    if (room(&f->spare, &caps, (size_t)L->nn, sizeof *f->spare) < 0)
        return -ENOMEM;
    size_t caps2 = (size_t)f->caps;
    if (room(&f->srv_node, &caps2, (size_t)L->nn, sizeof *f->srv_node) < 0)
        return -ENOMEM;
    f->caps = (int)(caps < caps2 ? caps : caps2);
    int ns = 0;
    for (int i = 0; i < L->nn; i++) {
        const ledger_node_t *ln = &L->n[i];
        if (!ln->up)
            continue;
        int64_t used = 0;
        for (size_t k = 0; k < ln->nwork; k++) {
            const ledger_work_t *w = &ln->work[k];
            if (w->b < 0)
                continue;
            const ledger_bucket_t *bs = &L->b[w->b];
            int64_t g = given(bs, w);
            used = count_add(used, g);
            /* A pair with requests waiting at its report is hungry: it
             * would take whatever it is given there (a closed-loop client
             * speeds up as it is served), so its want is the node's whole
             * capacity left, not the demand estimate, which follows what
             * it was served lately (arrivals) and would keep the last
             * division (by footprint at first) wherever the wants fit
             * the spare, e.g. on a node that delivers less than its
             * estimate. */
            int64_t want = w->queued > 0 && ln->capt > w->demand ? ln->capt : w->demand;
            if (want > g) {
                size_t capp = f->capp, capn = f->capp, capk = f->capp;
                if (room(&f->p, &capp, np + 1, sizeof *f->p) < 0 ||
                    room(&f->pnode, &capn, np + 1, sizeof *f->pnode) < 0 ||
                    room(&f->pwork, &capk, np + 1, sizeof *f->pwork) < 0)
                    return -ENOMEM;
                f->capp = capp < capn ? capp : capn;
                f->pwork[np] = (uint32_t)k;
                f->p[np] = (shares_pair_t){.b = w->b, .s = ns, .want = want - g};
                f->pnode[np] = i;
                np++;
            }
        }
        f->spare[ns] = ln->capt > used ? ln->capt - used : 0;
        f->srv_node[ns] = i;
        ns++;
    }
    f->np = np;
    *ns_out = ns;
    return 0;
}

/* The records of node index i: its pairs' shares (a limited bucket's are
 * its L-tokens there too: they order its turns), the largest
 * PROTO_SHARES_MAX, in bucket order. */
static void node_records(fair_t *f, size_t from, size_t to, int64_t *sent)
{
    size_t o = f->ostart[f->nn], start = o;
    for (size_t k = from; k < to; k++) {
        const shares_pair_t *q = &f->p[k];
        if (q->share <= 0)
            continue;
        f->out[o++] = (proto_share_rec_t){.bucket = (uint32_t)q->b, .tokens = q->share};
    }
    size_t n = o - start;
    if (n > PROTO_SHARES_MAX) {
        qsort(f->out + start, n, sizeof *f->out, cmp_tokens_desc);
        f->st.truncated += n - PROTO_SHARES_MAX;
        n = PROTO_SHARES_MAX;
    }
    qsort(f->out + start, n, sizeof *f->out, cmp_bucket);
    for (size_t k = 0; k < n; k++)
        *sent += f->out[start + k].tokens;
    f->ostart[++f->nn] = start + n;
}

int fair_round(fair_t *f, const ledger_t *L, const uint32_t *weights)
{
    fair_stats_t st = {.truncated = f->st.truncated};
    f->nn = 0;
    size_t capo = (size_t)f->capo;
    if (room(&f->ostart, &capo, (size_t)L->nn + 1, sizeof *f->ostart) < 0)
        return -ENOMEM;
    f->capo = (int)capo;
    f->ostart[0] = 0;
    size_t capwo = (size_t)f->capwo;
    if (room(&f->woff, &capwo, (size_t)L->nn + 1, sizeof *f->woff) < 0 ||
        room(&f->bshare, &f->capbs, L->nb, sizeof *f->bshare) < 0)
        return -ENOMEM;
    f->capwo = (int)capwo;
    f->woff[0] = 0;
    for (int i = 0; i < L->nn; i++)
        f->woff[i + 1] = f->woff[i] + (L->n[i].up ? L->n[i].nwork : 0);
    if (room(&f->wshare, &f->capw, f->woff[L->nn], sizeof *f->wshare) < 0)
        return -ENOMEM;
    memset(f->wshare, 0, f->woff[L->nn] * sizeof *f->wshare);
    memset(f->bshare, 0, L->nb * sizeof *f->bshare);
    int ns = 0, rc = build(f, L, weights, &ns);
    if (rc == 0)
        rc = shares_solve(f->sh, f->spare, ns, f->w, f->cap, L->nb, f->p, f->np, NULL, &st.iters);
    if (rc == 0)
        rc = room(&f->out, &f->capout, f->np, sizeof *f->out);
    if (rc < 0) {
        f->np = 0;
        for (int i = 0; i < L->nn; i++)
            f->ostart[i + 1] = 0;
        f->nn = L->nn;
        f->st = st;
        return rc;
    }
    for (int s = 0; s < ns; s++)
        st.spare = count_add(st.spare, f->spare[s]);
    for (size_t k = 0; k < f->np; k++) {
        st.given += f->p[k].share;
        f->wshare[f->woff[f->pnode[k]] + f->pwork[k]] = f->p[k].share;
        f->bshare[f->p[k].b] = count_add(f->bshare[f->p[k].b], f->p[k].share);
    }
    /* The pairs are node by node, in node index order. */
    size_t k = 0;
    for (int i = 0; i < L->nn; i++) {
        size_t from = k;
        while (k < f->np && f->pnode[k] == i)
            k++;
        node_records(f, from, k, &st.sent);
    }
    st.pairs = f->np;
    f->st = st;
    log_debug("fair shares: %zu hungry pairs, %d iterations, %lld spare tokens, %lld given",
              st.pairs, st.iters, (long long)st.spare, (long long)st.given);
    return 0;
}

int64_t fair_work_share(const fair_t *f, int i, size_t k)
{
    if (!f || i < 0 || i >= f->nn || f->woff[i] + k >= f->woff[i + 1])
        return 0;
    return f->wshare[f->woff[i] + k];
}

void fair_work_moved(fair_t *f, int i, size_t from, size_t to)
{
    if (!f || i < 0 || i >= f->nn)
        return;
    size_t n = f->woff[i + 1] - f->woff[i];
    if (to >= n)
        return;
    f->wshare[f->woff[i] + to] = from < n ? f->wshare[f->woff[i] + from] : 0;
}

int64_t fair_bucket_share(const fair_t *f, size_t b)
{
    return f && b < f->capbs && f->nn > 0 ? f->bshare[b] : 0;
}

size_t fair_node(const fair_t *f, int i, const proto_share_rec_t **recs)
{
    if (!f || i < 0 || i >= f->nn) {
        if (recs)
            *recs = NULL;
        return 0;
    }
    if (recs)
        *recs = f->out + f->ostart[i];
    return f->ostart[i + 1] - f->ostart[i];
}

fair_stats_t fair_stats(const fair_t *f)
{
    return f ? f->st : (fair_stats_t){0};
}
