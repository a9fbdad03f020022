/* shares.c - weighted max-min fair shares of spare capacity over the bucket-server graph: per-server weighted water-filling and proportional-response bids (shares.h says why that is the max-min point). */
#include "controller/shares.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Share of a bucket's bid kept spread evenly over its servers, so that a
 * server it left can win it back when the others fill. */
#define SHARES_SPREAD 1e-3

/* A pair in its server's group: key = want / phi, the water level where
 * it saturates. */
typedef struct {
    double key;
    uint32_t k;
} shares_ent_t;

struct shares {
    /* per pair, [cap_p] */
    double *phi;     /* bid */
    double *a;       /* allocation of the last water-filling */
    double *want;    /* want, lowered for capped buckets at the end */
    shares_ent_t *ord; /* pairs grouped by server (CSR), each group sorted
                          by key */
    size_t cap_p;
    /* per server, [cap_s + 1] */
    uint32_t *start;
    size_t cap_s;
    /* per bucket, [cap_b] */
    double *x, *weff;
    uint32_t *deg;
    size_t cap_b;
};

shares_t *shares_new(void)
{
    return calloc(1, sizeof(shares_t));
}

void shares_destroy(shares_t **shp)
{
    if (!shp || !*shp)
        return;
    shares_t *sh = *shp;
    free(sh->phi);
    free(sh->a);
    free(sh->want);
    free(sh->ord);
    free(sh->start);
    free(sh->x);
    free(sh->weff);
    free(sh->deg);
    free(sh);
    *shp = NULL;
}

/* Grows *pp to hold n elements of size sz.  Returns 0 or -ENOMEM. */
static int grow(void **pp, size_t n, size_t sz)
{
    void *q = realloc(*pp, (n ? n : 1) * sz);
    if (!q)
        return -ENOMEM;
    *pp = q;
    return 0;
}

/* Room for np pairs, ns servers, nb buckets.  Returns 0 or -ENOMEM. */
static int fit(shares_t *sh, size_t np, size_t ns, size_t nb)
{
    if (np > sh->cap_p) {
        if (grow((void **)&sh->phi, np, sizeof(double)) || grow((void **)&sh->a, np, sizeof(double)) ||
            grow((void **)&sh->want, np, sizeof(double)) ||
            grow((void **)&sh->ord, np, sizeof(shares_ent_t)))
            return -ENOMEM;
        sh->cap_p = np;
    }
    if (ns + 1 > sh->cap_s) {
        if (grow((void **)&sh->start, ns + 1, sizeof(uint32_t)))
            return -ENOMEM;
        sh->cap_s = ns + 1;
    }
    if (nb > sh->cap_b) {
        if (grow((void **)&sh->x, nb, sizeof(double)) || grow((void **)&sh->weff, nb, sizeof(double)) ||
            grow((void **)&sh->deg, nb, sizeof(uint32_t)))
            return -ENOMEM;
        sh->cap_b = nb;
    }
    return 0;
}

static int cmp_ent(const void *x, const void *y)
{
    double a = ((const shares_ent_t *)x)->key, b = ((const shares_ent_t *)y)->key;
    return a < b ? -1 : a > b;
}

/* Sorts a group by key ascending: insertion sort, as the keys move little
 * from one iteration to the next (close to linear on a nearly sorted
 * group), falling back to qsort once it has moved 8 entries per entry
 * (the first iterations, where the keys move a lot). */
static void sort_group(shares_ent_t *e, size_t n)
{
    size_t budget = 8 * n + 16;
    for (size_t i = 1; i < n; i++) {
        shares_ent_t v = e[i];
        size_t j = i;
        while (j > 0 && e[j - 1].key > v.key) {
            e[j] = e[j - 1];
            j--;
            if (--budget == 0) {
                e[j] = v;
                qsort(e, n, sizeof *e, cmp_ent);
                return;
            }
        }
        e[j] = v;
    }
}

/* Weighted water-filling of server s's spare among its pairs (bids phi,
 * wants): pairs in increasing key order saturate at their want while the
 * level C / Phi exceeds their key; the rest get phi x level. */
static void fill_server(shares_t *sh, uint32_t s, double spare)
{
    uint32_t lo = sh->start[s], hi = sh->start[s + 1];
    double C = spare, F = 0;
    for (uint32_t i = lo; i < hi; i++) {
        shares_ent_t *e = &sh->ord[i];
        e->key = sh->phi[e->k] > 0 ? sh->want[e->k] / sh->phi[e->k] : INFINITY;
        F += sh->phi[e->k];
    }
    sort_group(sh->ord + lo, hi - lo);
    uint32_t i = lo;
    for (; i < hi && F > 0; i++) {
        uint32_t k = sh->ord[i].k;
        double level = C / F;
        if (sh->want[k] <= sh->phi[k] * level) {
            sh->a[k] = sh->want[k];
            C -= sh->want[k];
            F -= sh->phi[k];
            if (C < 0)
                C = 0;
        } else {
            break;
        }
    }
    double level = F > 0 ? C / F : 0;
    for (; i < hi; i++) {
        uint32_t k = sh->ord[i].k;
        sh->a[k] = sh->phi[k] * level;
        if (sh->a[k] > sh->want[k])
            sh->a[k] = sh->want[k];
    }
}

/* One water-filling of every server and the buckets' totals. */
static void fill_all(shares_t *sh, const int64_t *spare, int ns, shares_pair_t *p, size_t np,
                     size_t nb)
{
    for (int s = 0; s < ns; s++)
        fill_server(sh, (uint32_t)s, spare[s] > 0 ? (double)spare[s] : 0);
    for (size_t b = 0; b < nb; b++)
        sh->x[b] = 0;
    for (size_t k = 0; k < np; k++)
        if (sh->phi[k] > 0)
            sh->x[p[k].b] += sh->a[k];
}

/* Nonzero if pair k takes part: bucket and server in range, want > 0. */
static int pair_ok(const shares_pair_t *q, int ns, size_t nb)
{
    return q->b >= 0 && (size_t)q->b < nb && q->s >= 0 && q->s < ns && q->want > 0;
}

int shares_solve(shares_t *sh, const int64_t *spare, int ns, const uint32_t *w,
                 const int64_t *cap, size_t nb, shares_pair_t *p, size_t np,
                 const shares_opts_t *o, int *iters)
{
    shares_opts_t d = SHARES_OPTS_DEFAULT;
    if (!o)
        o = &d;
    if (iters)
        *iters = 0;
    for (size_t k = 0; k < np; k++)
        p[k].share = 0;
    if (ns <= 0 || nb == 0 || np == 0)
        return 0;
    if (np > UINT32_MAX || (size_t)ns >= UINT32_MAX)
        return -ENOMEM;
    int rc = fit(sh, np, (size_t)ns, nb);
    if (rc < 0)
        return rc;

    /* Degrees and the pairs grouped by server (counting sort). */
    memset(sh->deg, 0, nb * sizeof *sh->deg);
    memset(sh->start, 0, ((size_t)ns + 1) * sizeof *sh->start);
    for (size_t k = 0; k < np; k++) {
        if (!pair_ok(&p[k], ns, nb))
            continue;
        sh->deg[p[k].b]++;
        sh->start[p[k].s + 1]++;
    }
    for (int s = 0; s < ns; s++)
        sh->start[s + 1] += sh->start[s];
    {
        /* start[] serves as the cursors, then is shifted back */
        uint32_t *cur = sh->start;
        for (size_t k = 0; k < np; k++) {
            if (!pair_ok(&p[k], ns, nb))
                continue;
            sh->ord[cur[p[k].s]++] = (shares_ent_t){.key = 0, .k = (uint32_t)k};
        }
        /* cur[s] now is the old start[s + 1]: shift back */
        for (int s = ns; s > 0; s--)
            cur[s] = cur[s - 1];
        cur[0] = 0;
    }
    for (size_t b = 0; b < nb; b++)
        sh->weff[b] = w[b] ? (double)w[b] : 1.0;
    for (size_t k = 0; k < np; k++) {
        if (!pair_ok(&p[k], ns, nb)) {
            sh->phi[k] = 0;
            sh->a[k] = 0;
            sh->want[k] = 0;
            continue;
        }
        sh->want[k] = (double)p[k].want;
        sh->phi[k] = sh->weff[p[k].b] / sh->deg[p[k].b];
    }

    int it = 0;
    for (; it < o->iters; it++) {
        fill_all(sh, spare, ns, p, np, nb);
        /* Caps: a bucket over its cap bids less, one under it that bid
         * less before bids more again (never above its weight). */
        double moved = 0;
        for (size_t b = 0; b < nb; b++) {
            double wb = w[b] ? (double)w[b] : 1.0;
            if (cap[b] != SHARES_NOCAP && sh->x[b] > 0) {
                double f = (double)cap[b] / sh->x[b];
                double ne = sh->weff[b] * f;
                sh->weff[b] = ne > wb ? wb : ne;
            }
        }
        /* Proportional response: each bucket's bid follows its allocation. */
        for (size_t k = 0; k < np; k++) {
            if (sh->phi[k] <= 0)
                continue;
            size_t b = (size_t)p[k].b;
            double xb = sh->x[b], np_ = sh->weff[b] * SHARES_SPREAD / sh->deg[b];
            double ne = xb > 0 ? sh->weff[b] * (1 - SHARES_SPREAD) * sh->a[k] / xb + np_
                               : sh->weff[b] / sh->deg[b];
            if (ne < 1e-300)
                ne = 1e-300; /* stays in the server's water-filling */
            double dv = fabs(ne - sh->phi[k]) / sh->weff[b];
            if (dv > moved)
                moved = dv;
            sh->phi[k] = ne;
        }
        if (moved < o->tol) {
            it++;
            break;
        }
    }
    /* A capped bucket's pairs are held to their share of its cap, and the
     * spare they leave goes to the others in one last water-filling. */
    fill_all(sh, spare, ns, p, np, nb);
    int capped = 0;
    for (size_t k = 0; k < np; k++) {
        if (sh->phi[k] <= 0)
            continue;
        size_t b = (size_t)p[k].b;
        if (cap[b] != SHARES_NOCAP && sh->x[b] > (double)cap[b]) {
            sh->want[k] = sh->a[k] * (double)cap[b] / sh->x[b];
            capped = 1;
        }
    }
    if (capped)
        fill_all(sh, spare, ns, p, np, nb);
    for (size_t k = 0; k < np; k++) {
        if (sh->phi[k] <= 0)
            continue;
        double v = floor(sh->a[k] + 1e-9);
        int64_t s = v >= (double)p[k].want ? p[k].want : (int64_t)v;
        p[k].share = s > 0 ? s : 0;
    }
    if (iters)
        *iters = it;
    return 0;
}
