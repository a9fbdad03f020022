/* gen.c - deterministic pShift instances shaped like the paper's Section IV (Zipf reservations and demand splits). */
#include "pshift/tools/gen.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/rng.h"

int gen_check(const gen_params_t *g, char *msg, size_t n)
{
    const char *bad = NULL;
    if (g->servers < 1) bad = "servers must be at least 1";
    else if (g->buckets < 0) bad = "buckets must not be negative";
    else if (!(g->reserved_fraction >= 0 && g->reserved_fraction <= 1))
        bad = "reserved fraction must be in [0, 1]";
    else if (!(g->demand_ratio >= 1 && g->demand_ratio <= 1e6))
        bad = "demand ratio must be in [1, 1e6]";
    else if (!(g->zipf >= 0 && g->zipf <= 100)) bad = "zipf must be in [0, 100]";
    else if (!(g->split_zipf >= 0 && g->split_zipf <= 100))
        bad = "split zipf must be in [0, 100]";
    else if (g->active < 1 || g->active > g->servers)
        bad = "active servers must be between 1 and the number of servers";
    else if (g->capacity < 0) bad = "capacity must not be negative";
    else if (g->capacity > INT64_MAX / 4 / g->servers)
        bad = "capacity times servers is too large";
    else if (!(g->limit_ratio == 0 || (g->limit_ratio >= 1 && g->limit_ratio <= 1e6)))
        bad = "limit ratio must be 0 or in [1, 1e6]";
    if (!bad) return 0;
    if (n) snprintf(msg, n, "%s", bad);
    return -EINVAL;
}

typedef struct {
    double frac;
    size_t idx;
} rem_t;

static int rem_cmp(const void *a, const void *b)
{
    const rem_t *x = a, *y = b;
    if (x->frac != y->frac) return x->frac > y->frac ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* Splits `total` into n integer shares proportional to w[] so that they sum
 * to exactly `total` (largest remainder; ties go to the lower index).  `rem`
 * is scratch of n entries. */
static void apportion(int64_t total, const double *w, size_t n, int64_t *out, rem_t *rem)
{
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += w[i];
    if (n == 0) return;
    if (!(sum > 0)) {
        memset(out, 0, n * sizeof *out);
        out[0] = total;
        return;
    }
    int64_t given = 0;
    for (size_t i = 0; i < n; i++) {
        double exact = (double)total * (w[i] / sum);
        double f = floor(exact);
        if (f < 0) f = 0;
        if (f > (double)(total - given)) f = (double)(total - given);
        out[i] = (int64_t)f;
        given += out[i];
        rem[i].frac = exact - f;
        rem[i].idx = i;
    }
    qsort(rem, n, sizeof *rem, rem_cmp);
    /* Floating point may leave more than n tokens over in extreme cases:
     * keep cycling until all are given. */
    for (size_t k = 0; given < total; k = (k + 1) % n) {
        out[rem[k].idx]++;
        given++;
    }
}

int gen_problem(const gen_params_t *g, pshift_problem_t **out, int64_t **limits)
{
    pshift_problem_t *p = NULL;
    int64_t *res = NULL, *lim = NULL, share[64];
    double *w = NULL, *sw = NULL;
    rem_t *rem = NULL;
    int *perm = NULL;
    char name[32];
    int rc = gen_check(g, NULL, 0);

    *out = NULL;
    if (limits) *limits = NULL;
    if (rc < 0) return rc;
    size_t nb = (size_t)g->buckets, na = (size_t)g->active;
    size_t nmax = nb > na ? nb : na;
    p = pshift_problem_new();
    res = malloc((nb ? nb : 1) * sizeof *res);
    w = malloc((nb ? nb : 1) * sizeof *w);
    sw = malloc(na * sizeof *sw);
    rem = malloc((nmax ? nmax : 1) * sizeof *rem);
    perm = malloc((size_t)g->servers * sizeof *perm);
    int64_t *split = na <= 64 ? share : malloc(na * sizeof *split);
    if (!p || !res || !w || !sw || !rem || !perm || !split) { rc = -ENOMEM; goto out; }
    if (limits) {
        lim = malloc((nb ? nb : 1) * sizeof *lim);
        if (!lim) { rc = -ENOMEM; goto out; }
    }

    for (int s = 0; s < g->servers; s++) {
        if (g->names) snprintf(name, sizeof name, "s%d", s + 1);
        int idx = pshift_add_server(p, g->names ? name : NULL, g->capacity);
        if (idx < 0) { rc = idx; goto out; }
        perm[s] = s;
    }
    int64_t total = (int64_t)floor(g->reserved_fraction * (double)g->servers *
                                   (double)g->capacity);
    for (size_t i = 0; i < nb; i++) w[i] = pow((double)(i + 1), -g->zipf);
    apportion(total, w, nb, res, rem);
    for (size_t k = 0; k < na; k++) sw[k] = pow((double)(k + 1), -g->split_zipf);

    rng_x256_t rng;
    rng_x256_seed(&rng, g->seed);
    for (size_t i = 0; i < nb; i++) {
        double dd = round(g->demand_ratio * (double)res[i]);
        if (dd >= 9.0e18) { rc = -EOVERFLOW; goto out; }
        int64_t demand = (int64_t)dd;
        if (g->names) snprintf(name, sizeof name, "b%zu", i + 1);
        int b = pshift_add_bucket(p, g->names ? name : NULL, res[i]);
        if (b < 0) { rc = b; goto out; }
        if (lim) {
            lim[i] = -1;
            if (g->limit_ratio > 0) {
                double l = round(g->limit_ratio * (double)res[i]);
                if (l >= 9.0e18) { rc = -EOVERFLOW; goto out; }
                lim[i] = (int64_t)l < res[i] ? res[i] : (int64_t)l;
            }
        }
        /* Partial Fisher-Yates: the first `active` entries of perm become a
         * uniform random ordered choice of distinct servers. */
        for (size_t k = 0; k < na; k++) {
            size_t j = k + (size_t)rng_x256_below(&rng, (uint64_t)g->servers - k);
            int t = perm[k];
            perm[k] = perm[j];
            perm[j] = t;
        }
        apportion(demand, sw, na, split, rem);
        for (size_t k = 0; k < na; k++) {
            if ((rc = pshift_set_demand(p, b, perm[k], split[k])) < 0) goto out;
        }
    }
    *out = p;
    p = NULL;
    if (limits) {
        *limits = lim;
        lim = NULL;
    }
    rc = 0;
out:
    if (split && split != share) free(split);
    pshift_problem_destroy(&p);
    free(res);
    free(lim);
    free(w);
    free(sw);
    free(rem);
    free(perm);
    return rc;
}
