/* tree.c - nested buckets: the bucket tree of a configuration and each round's top-down split of parents' limits and reservations into their leaves' effective budgets (tree.h says the rule). */
#include "controller/tree.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "controller/count.h"

/* One round's state of one dimension, per member: the sums of the subtree
 * (a leaf's own), its own budget (a leaf's from the ledger, a parent's by
 * the ledger's rule on the sums) and what the split gave it. */
typedef struct {
    int64_t *served, *held, *demand;
    int64_t *own_r, *own_h;  /* own remaining reservation, headroom */
    int64_t *r, *h;          /* effective: what the split gave it */
    int64_t *cap;            /* scratch: the caps of one water-filling */
    uint8_t *active;         /* demand or a queue in its subtree */
    int valid;               /* a tree_budgets() has run */
} tstate_t;

typedef struct {
    tree_t *t;
    int dim;
} tdim_t;

/* A water-filling's entry: a child and its cap per unit of weight. */
typedef struct {
    double ratio;
    int32_t k;
    int64_t g;
} wf_t;

struct tree {
    size_t nb;               /* buckets of the configuration */
    int32_t *mid;            /* [nb]: member index, -1 not in a tree */
    size_t m;                /* members: buckets with a parent or children */
    int32_t *mb;             /* [m]: bucket index */
    int32_t *mpar;           /* [m]: parent member, -1 a root */
    int32_t *kfirst, *kcount;/* [m]: its children, kids[kfirst .. +kcount) */
    int32_t *kids;           /* [m] */
    int32_t *order;          /* [m]: top-down (a parent before its children) */
    uint32_t *w;             /* [m]: weights */
    int64_t *rr[2], *rl[2];  /* [m]: rates in tokens per period, per
                                dimension (rl CTRL_UNLIMITED: none) */
    tstate_t st[2];
    tdim_t dims[2];
    wf_t *wf;                /* [largest kcount] */
};

static int64_t tokens(int64_t rate, double period_s)
{
    double t = round((double)rate * period_s);
    return t > (double)CTRL_BUCKET_TOKENS_MAX ? CTRL_BUCKET_TOKENS_MAX : (int64_t)t;
}

static void state_free(tstate_t *s)
{
    free(s->served);
    free(s->held);
    free(s->demand);
    free(s->own_r);
    free(s->own_h);
    free(s->r);
    free(s->h);
    free(s->cap);
    free(s->active);
}

static int state_alloc(tstate_t *s, size_t m)
{
    int64_t **a[] = {&s->served, &s->held, &s->demand, &s->own_r, &s->own_h,
                     &s->r, &s->h, &s->cap};
    for (size_t i = 0; i < sizeof a / sizeof a[0]; i++)
        if (!(*a[i] = calloc(m, sizeof(int64_t))))
            return -ENOMEM;
    return (s->active = calloc(m, 1)) ? 0 : -ENOMEM;
}

void tree_destroy(tree_t **tp)
{
    tree_t *t = tp ? *tp : NULL;
    if (!t)
        return;
    free(t->mid);
    free(t->mb);
    free(t->mpar);
    free(t->kfirst);
    free(t->kcount);
    free(t->kids);
    free(t->order);
    free(t->w);
    for (int d = 0; d < 2; d++) {
        free(t->rr[d]);
        free(t->rl[d]);
        state_free(&t->st[d]);
    }
    free(t->wf);
    free(t);
    *tp = NULL;
}

/* Fills t's members, children and top-down order from bf.  Returns 0,
 * -EINVAL (unknown parent, cycle, too deep) or -ENOMEM. */
static int build(tree_t *t, const bucketfile_t *bf, double period_s)
{
    const size_t nb = t->nb;
    int32_t *pb = malloc((nb ? nb : 1) * sizeof *pb); /* bucket -> parent bucket */
    int rc = -ENOMEM;
    if (!pb)
        return rc;
    for (size_t b = 0; b < nb; b++)
        t->mid[b] = -1;
    for (size_t b = 0; b < nb; b++) {
        const bucketfile_bucket_t *x = bucketfile_get(bf, b);
        pb[b] = -1;
        if (!bucketfile_has_parent(x))
            continue;
        int p = bucketfile_find(bf, bucketfile_parent(x));
        if (p < 0 || (size_t)p == b) {
            rc = -EINVAL;
            goto out;
        }
        pb[b] = p;
        t->mid[b] = t->mid[p] = 0;
    }
    size_t m = 0;
    for (size_t b = 0; b < nb; b++)
        if (t->mid[b] == 0)
            t->mid[b] = (int32_t)m++;
    t->m = m;
    size_t one = m ? m : 1;
    if (!(t->mb = malloc(one * sizeof *t->mb)) || !(t->mpar = malloc(one * sizeof *t->mpar)) ||
        !(t->kfirst = calloc(one, sizeof *t->kfirst)) ||
        !(t->kcount = calloc(one, sizeof *t->kcount)) ||
        !(t->kids = malloc(one * sizeof *t->kids)) ||
        !(t->order = malloc(one * sizeof *t->order)) || !(t->w = malloc(one * sizeof *t->w)))
        goto out;
    for (int d = 0; d < 2; d++)
        if (!(t->rr[d] = malloc(one * sizeof **t->rr)) ||
            !(t->rl[d] = malloc(one * sizeof **t->rl)) || state_alloc(&t->st[d], one) < 0)
            goto out;
    for (size_t b = 0; b < nb; b++) {
        int32_t i = t->mid[b];
        if (i < 0)
            continue;
        const bucketfile_bucket_t *x = bucketfile_get(bf, b);
        t->mb[i] = (int32_t)b;
        t->mpar[i] = pb[b] >= 0 ? t->mid[pb[b]] : -1;
        t->w[i] = x->weight ? x->weight : 1;
        t->rr[TREE_IO][i] = tokens(x->reservation, period_s);
        t->rl[TREE_IO][i] =
            x->limit == BUCKETFILE_NO_LIMIT ? CTRL_UNLIMITED : tokens(x->limit, period_s);
        t->rr[TREE_BYTES][i] = tokens(x->reservation_bytes, period_s);
        t->rl[TREE_BYTES][i] = x->limit_bytes > 0 ? tokens(x->limit_bytes, period_s)
                                                  : CTRL_UNLIMITED;
    }
    size_t most = 1;
    for (size_t i = 0; i < m; i++)
        if (t->mpar[i] >= 0)
            t->kcount[t->mpar[i]]++;
    for (size_t i = 0, at = 0; i < m; i++) {
        t->kfirst[i] = (int32_t)at;
        at += (size_t)t->kcount[i];
        if ((size_t)t->kcount[i] > most)
            most = (size_t)t->kcount[i];
        t->kcount[i] = 0;
    }
    for (size_t i = 0; i < m; i++)
        if (t->mpar[i] >= 0) {
            int32_t p = t->mpar[i];
            t->kids[t->kfirst[p] + t->kcount[p]++] = (int32_t)i;
        }
    if (!(t->wf = malloc(most * sizeof *t->wf)))
        goto out;
    /* Top-down order, level by level from the roots: a member in a cycle
     * is never reached, and the levels are counted. */
    size_t n = 0;
    for (size_t i = 0; i < m; i++)
        if (t->mpar[i] < 0)
            t->order[n++] = (int32_t)i;
    size_t lvl_end = n, depth = 1;
    for (size_t q = 0; q < n; q++) {
        if (q == lvl_end) {
            depth++;
            lvl_end = n;
        }
        int32_t p = t->order[q];
        for (int32_t k = 0; k < t->kcount[p]; k++)
            t->order[n++] = t->kids[t->kfirst[p] + k];
    }
    rc = n == m && depth <= BUCKETFILE_MAX_DEPTH ? 0 : -EINVAL;
out:
    free(pb);
    return rc;
}

int tree_new(const bucketfile_t *bf, double period_s, tree_t **out)
{
    *out = NULL;
    size_t nb = bucketfile_count(bf);
    int any = 0;
    for (size_t b = 0; b < nb && !any; b++)
        any = bucketfile_has_parent(bucketfile_get(bf, b));
    if (!any)
        return 0;
    tree_t *t = calloc(1, sizeof *t);
    if (!t)
        return -ENOMEM;
    t->nb = nb;
    if (!(t->mid = malloc(nb * sizeof *t->mid))) {
        free(t);
        return -ENOMEM;
    }
    int rc = build(t, bf, period_s);
    if (rc < 0) {
        tree_destroy(&t);
        return rc;
    }
    for (int d = 0; d < 2; d++)
        t->dims[d] = (tdim_t){t, d};
    *out = t;
    return 0;
}

int tree_parent(const tree_t *t, size_t b)
{
    if (!t || b >= t->nb || t->mid[b] < 0 || t->mpar[t->mid[b]] < 0)
        return -1;
    return t->mb[t->mpar[t->mid[b]]];
}

int tree_is_parent(const tree_t *t, size_t b)
{
    return t && b < t->nb && t->mid[b] >= 0 && t->kcount[t->mid[b]] > 0;
}

int tree_nchildren(const tree_t *t, size_t b)
{
    return t && b < t->nb && t->mid[b] >= 0 ? t->kcount[t->mid[b]] : 0;
}

int tree_child(const tree_t *t, size_t b, int k)
{
    if (k < 0 || k >= tree_nchildren(t, b))
        return -1;
    return t->mb[t->kids[t->kfirst[t->mid[b]] + k]];
}

/* The smallest limit among member i's ancestors in dimension d. */
static int64_t ancestors_limit(const tree_t *t, int d, int32_t i)
{
    int64_t l = CTRL_UNLIMITED;
    for (int32_t p = t->mpar[i]; p >= 0; p = t->mpar[p])
        if (t->rl[d][p] < l)
            l = t->rl[d][p];
    return l;
}

int64_t tree_static_limit(const tree_t *t, int dim, size_t b, int64_t own)
{
    if (!t || b >= t->nb || t->mid[b] < 0 || own != CTRL_UNLIMITED ||
        t->kcount[t->mid[b]] > 0)
        return own;
    return ancestors_limit(t, dim, t->mid[b]);
}

int tree_unlimited_under_limit(const tree_t *t, int dim, size_t *bad)
{
    for (size_t i = 0; t && i < t->m; i++)
        if (t->kcount[i] == 0 && t->rl[dim][i] == CTRL_UNLIMITED &&
            ancestors_limit(t, dim, (int32_t)i) != CTRL_UNLIMITED) {
            if (bad)
                *bad = (size_t)t->mb[i];
            return 1;
        }
    return 0;
}

void *tree_dim(tree_t *t, int dim)
{
    return t && (dim == TREE_IO || dim == TREE_BYTES) ? &t->dims[dim] : NULL;
}

static int cmp_wf(const void *a, const void *b)
{
    double x = ((const wf_t *)a)->ratio, y = ((const wf_t *)b)->ratio;
    return x < y ? -1 : x > y;
}

/* Weighted water-filling of `budget` tokens among the children kids[0..nk)
 * of a parent, child k at most cap[k] (<= 0: none): each gets
 * min(cap, level x weight) for the one level that spends the budget or
 * fills every cap; rounding down, then the tokens left one each in order.
 * Adds each share to out[k]; returns what was given (<= budget). */
static int64_t wfill(tree_t *t, const int32_t *kids, int32_t nk, const int64_t *cap,
                     int64_t budget, int64_t *out)
{
    if (budget <= 0)
        return 0;
    size_t n = 0;
    double W = 0;
    for (int32_t x = 0; x < nk; x++) {
        int32_t k = kids[x];
        if (cap[k] <= 0)
            continue;
        t->wf[n++] = (wf_t){(double)cap[k] / t->w[k], k, 0};
        W += t->w[k];
    }
    if (!n)
        return 0;
    qsort(t->wf, n, sizeof *t->wf, cmp_wf);
    int64_t B = budget;
    size_t i = 0;
    for (; i < n; i++) { /* caps below the level: filled */
        int32_t k = t->wf[i].k;
        if ((double)cap[k] * W > (double)B * t->w[k])
            break;
        out[k] = count_add(out[k], cap[k]);
        B -= cap[k];
        W -= t->w[k];
    }
    if (i < n && B > 0) {
        double lvl = (double)B / W;
        for (size_t j = i; j < n; j++) {
            wf_t *e = &t->wf[j];
            int64_t g = (int64_t)(lvl * t->w[e->k]);
            if (g > cap[e->k])
                g = cap[e->k];
            if (g > B)
                g = B;
            e->g = g;
            B -= g;
        }
        for (size_t j = i; j < n && B > 0; j++)
            if (t->wf[j].g < cap[t->wf[j].k]) {
                t->wf[j].g++;
                B--;
            }
        for (size_t j = i; j < n; j++)
            out[t->wf[j].k] = count_add(out[t->wf[j].k], t->wf[j].g);
    }
    return budget - B;
}

static inline int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

/* Splits parent p's effective headroom and remaining reservation (s->h[p],
 * s->r[p]) among its children (tree.h says how). */
static void split(tree_t *t, tstate_t *s, int32_t p)
{
    const int32_t *kids = &t->kids[t->kfirst[p]];
    const int32_t nk = t->kcount[p];
    const int64_t H = s->h[p];
    for (int32_t x = 0; x < nk; x++)
        s->h[kids[x]] = 0;
    if (H == CTRL_UNLIMITED) {
        for (int32_t x = 0; x < nk; x++)
            s->h[kids[x]] = s->own_h[kids[x]];
    } else {
        /* First each child's own reservation left, up to its demand and
         * its own headroom: a weighted share below a child's R must not
         * take the R away (admission keeps the children's reservations
         * within the parent's limit, so this fits but for what was served
         * beyond R). */
        for (int32_t x = 0; x < nk; x++) {
            int32_t k = kids[x];
            s->cap[k] = min64(min64(s->own_r[k], s->demand[k]), s->own_h[k]);
        }
        int64_t left = H - wfill(t, kids, nk, s->cap, H, s->h);
        for (int stage = 0; stage < 3 && left > 0; stage++) {
            for (int32_t x = 0; x < nk; x++) {
                int32_t k = kids[x];
                int64_t room = s->own_h[k] - s->h[k];
                if (stage == 0)
                    s->cap[k] = min64(s->demand[k], s->own_h[k]) - s->h[k];
                else
                    s->cap[k] = stage == 2 || s->active[k] ? room : 0;
            }
            left -= wfill(t, kids, nk, s->cap, left, s->h);
        }
    }
    /* The parent's floor beyond what the children with demand hold of their
     * own reservations: to those children, up to their demand. */
    int64_t own = 0;
    for (int32_t x = 0; x < nk; x++) {
        int32_t k = kids[x];
        own = count_add(own, min64(s->own_r[k], s->demand[k]));
        s->r[k] = s->own_r[k];
    }
    if (s->r[p] > own) {
        for (int32_t x = 0; x < nk; x++) {
            int32_t k = kids[x];
            int64_t want = min64(s->demand[k], s->h[k]) - s->own_r[k];
            s->cap[k] = want > 0 ? want : 0;
        }
        wfill(t, kids, nk, s->cap, s->r[p] - own, s->r);
    }
    for (int32_t x = 0; x < nk; x++) {
        int32_t k = kids[x];
        if (s->r[k] > s->h[k])
            s->r[k] = s->h[k];
    }
}

void tree_budgets(ledger_t *L, void *arg)
{
    tdim_t *td = arg;
    tree_t *t = td->t;
    const int d = td->dim;
    tstate_t *s = &t->st[d];
    if (L->nb != t->nb) { /* not this configuration's ledger: nothing placed */
        for (size_t i = 0; i < L->nb; i++)
            L->b[i].r_rem = L->b[i].head = 0;
        return;
    }
    for (size_t i = 0; i < t->m; i++) {
        const ledger_bucket_t *bs = &L->b[t->mb[i]];
        int leaf = t->kcount[i] == 0;
        s->served[i] = leaf ? bs->served : 0;
        s->held[i] = leaf ? bs->held : 0;
        s->own_r[i] = leaf ? bs->r_rem : 0;
        s->own_h[i] = leaf ? bs->head : 0;
        s->active[i] = leaf && bs->backlog;
        s->demand[i] = 0;
    }
    for (int n = 0; n < L->nn; n++) {
        const ledger_node_t *ln = &L->n[n];
        if (!ln->up)
            continue;
        for (size_t k = 0; k < ln->nwork; k++) {
            const ledger_work_t *w = &ln->work[k];
            int32_t i = w->b >= 0 ? t->mid[w->b] : -1;
            if (i < 0 || w->demand <= 0)
                continue;
            s->demand[i] = count_add(s->demand[i], w->demand);
            s->active[i] = 1;
        }
    }
    /* Bottom-up: a member's children come after it in `order`. */
    ledger_round_t rd = L->rd;
    rd.conv_slack = -1; /* a parent converts nothing: its children do */
    for (size_t q = t->m; q-- > 0;) {
        int32_t i = t->order[q];
        if (t->kcount[i] > 0) {
            ledger_bucket_t tmp = {.r = t->rr[d][i], .l = t->rl[d][i],
                                   .served = s->served[i], .held = s->held[i]};
            ledger_budget(&rd, &tmp);
            s->own_r[i] = tmp.r_rem;
            s->own_h[i] = tmp.head;
        }
        int32_t p = t->mpar[i];
        if (p >= 0) {
            s->served[p] = count_add(s->served[p], s->served[i]);
            s->held[p] = count_add(s->held[p], s->held[i]);
            s->demand[p] = count_add(s->demand[p], s->demand[i]);
            s->active[p] |= s->active[i];
        }
    }
    /* Top-down. */
    for (size_t q = 0; q < t->m; q++) {
        int32_t i = t->order[q];
        if (t->mpar[i] < 0) {
            s->h[i] = s->own_h[i];
            s->r[i] = min64(s->own_r[i], s->own_h[i]);
        }
        ledger_bucket_t *bs = &L->b[t->mb[i]];
        if (t->kcount[i] > 0) {
            split(t, s, i);
            bs->r_rem = 0;
            bs->head = bs->l == CTRL_UNLIMITED ? CTRL_UNLIMITED : 0;
        } else {
            bs->head = s->h[i];
            bs->r_rem = s->r[i];
        }
    }
    s->valid = 1;
}

int tree_info(const tree_t *t, int dim, size_t b, tree_info_t *out)
{
    if (!t || b >= t->nb || t->mid[b] < 0 || (dim != TREE_IO && dim != TREE_BYTES))
        return -ENOENT;
    const tstate_t *s = &t->st[dim];
    int32_t i = t->mid[b];
    *out = (tree_info_t){s->served[i], s->demand[i], s->r[i], s->h[i]};
    return s->valid ? 0 : -ENOENT;
}
