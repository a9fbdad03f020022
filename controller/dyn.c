/* dyn.c - the controller's registry of template-made buckets: recognised from the nodes' reports, bounded, expired when idle (see dyn.h). */
#include "controller/dyn.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/strmap.h"

struct dyn {
    size_t max_total, max_rule;
    uint64_t idle;
    dyn_entry_t *v;        /* n entries, room for cap */
    size_t n, cap;
    strmap_t *ix;          /* name -> index */
    uint32_t per_rule[RULES_MAX]; /* entries per rule */
    dyn_stats_t st;
};

dyn_t *dyn_new(size_t max_total, size_t max_rule, uint64_t idle_periods)
{
    if (max_total < 1 || max_rule < 1 || idle_periods < 1)
        return NULL;
    dyn_t *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    d->max_total = max_total;
    d->max_rule = max_rule;
    d->idle = idle_periods;
    if (!(d->ix = strmap_new()))
        dyn_destroy(&d);
    return d;
}

void dyn_destroy(dyn_t **dp)
{
    if (!dp || !*dp)
        return;
    dyn_t *d = *dp;
    for (size_t i = 0; i < d->n; i++)
        free((char *)d->v[i].name);
    free(d->v);
    strmap_destroy(&d->ix);
    free(d);
    *dp = NULL;
}

/* The template rule that could have made `name` and the figures it is
 * held to: the first such rule, with the smallest R and L of all that
 * could have (an ambiguous name gets the strictest).  -1 if none. */
static int recognise(const rules_t *r, const char *name, int64_t *res, int64_t *lim)
{
    int rule = -1;
    for (size_t i = 0; i < rules_count(r); i++) {
        int64_t rr, ll;
        if (rules_template_rates(r, i, &rr, &ll) < 0 || !rules_template_made(r, i, name))
            continue;
        if (rule < 0 || rr < *res)
            *res = rr;
        if (rule < 0 || ll < *lim)
            *lim = ll;
        if (rule < 0)
            rule = (int)i;
    }
    return rule;
}

int dyn_note(dyn_t *d, const rules_t *r, const char *name, uint64_t period)
{
    int i;
    size_t len = strlen(name);
    if (strmap_find(d->ix, name, len, &i) == 0) {
        dyn_touch(d, (size_t)i, period);
        return 0;
    }
    int64_t res = 0, lim = RULES_NO_LIMIT;
    int rule = recognise(r, name, &res, &lim);
    if (rule < 0)
        return 0;
    if (d->n >= d->max_total || d->per_rule[rule] >= d->max_rule) {
        d->st.refused++;
        return -ENOSPC;
    }
    if (d->n == d->cap) {
        size_t nc = d->cap ? d->cap * 2 : 16;
        if (nc > d->max_total)
            nc = d->max_total;
        dyn_entry_t *p = realloc(d->v, nc * sizeof *p);
        if (!p)
            return -ENOMEM;
        d->v = p;
        d->cap = nc;
    }
    char *copy = strdup(name);
    if (!copy || strmap_insert(d->ix, name, len, (int)d->n) < 0) {
        free(copy);
        return -ENOMEM;
    }
    d->v[d->n++] = (dyn_entry_t){copy, rule, res, lim, period};
    d->per_rule[rule]++;
    d->st.made++;
    return 1;
}

void dyn_touch(dyn_t *d, size_t i, uint64_t period)
{
    if (i < d->n && period > d->v[i].active)
        d->v[i].active = period;
}

/* Keeps the entries for which keep[i] is set, in order; re-indexes. */
static size_t compact(dyn_t *d, const unsigned char *keep)
{
    size_t w = 0, dropped = 0;
    for (size_t i = 0; i < d->n; i++) {
        if (!keep[i]) {
            strmap_remove(d->ix, d->v[i].name, strlen(d->v[i].name), NULL);
            d->per_rule[d->v[i].rule]--;
            free((char *)d->v[i].name);
            dropped++;
            continue;
        }
        if (w != i) {
            d->v[w] = d->v[i];
            strmap_set(d->ix, d->v[w].name, strlen(d->v[w].name), (int)w); /* present: no alloc */
        }
        w++;
    }
    d->n = w;
    return dropped;
}

size_t dyn_expire(dyn_t *d, uint64_t period)
{
    if (!d->n)
        return 0;
    unsigned char *keep = malloc(d->n);
    if (!keep)
        return 0; /* nothing dropped now; the next period tries again */
    int any = 0;
    for (size_t i = 0; i < d->n; i++) {
        keep[i] = d->v[i].active + d->idle > period;
        any |= !keep[i];
    }
    size_t dropped = any ? compact(d, keep) : 0;
    d->st.expired += dropped;
    free(keep);
    return dropped;
}

size_t dyn_retain(dyn_t *d, const rules_t *r, int (*keep_fn)(void *arg, const char *name),
                  void *arg)
{
    if (!d->n)
        return 0;
    unsigned char *keep = malloc(d->n);
    if (!keep)
        return 0;
    for (size_t i = 0; i < d->n; i++) {
        int64_t res = 0, lim = RULES_NO_LIMIT;
        int rule = keep_fn(arg, d->v[i].name) ? recognise(r, d->v[i].name, &res, &lim) : -1;
        keep[i] = rule >= 0;
        if (rule >= 0) {
            d->per_rule[d->v[i].rule]--;
            d->per_rule[rule]++;
            d->v[i].rule = rule;
            d->v[i].reservation = res;
            d->v[i].limit = lim;
        }
    }
    size_t dropped = compact(d, keep);
    d->st.dropped += dropped;
    free(keep);
    return dropped;
}

size_t dyn_count(const dyn_t *d)
{
    return d->n;
}

const dyn_entry_t *dyn_get(const dyn_t *d, size_t i)
{
    return i < d->n ? &d->v[i] : NULL;
}

int dyn_find(const dyn_t *d, const char *name)
{
    int i;
    return strmap_find(d->ix, name, strlen(name), &i) == 0 ? i : -ENOENT;
}

const dyn_stats_t *dyn_stats(const dyn_t *d)
{
    return &d->st;
}
