/* grant.c - the last covered period's grant per bucket, and the tokens that keep enforcing it without a controller. */
#include "storage-node/core/grant.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/growarr.h"

void grant_init(grant_t *g)
{
    memset(g, 0, sizeof *g);
    g->unseen_l = SCHED_UNLIMITED;
}

void grant_clear(grant_t *g)
{
    if (!g)
        return;
    free(g->r);
    free(g->l);
    grant_init(g);
}

static int64_t sat_add(int64_t a, uint64_t b)
{
    if (a == SCHED_UNLIMITED)
        return a;
    return b >= (uint64_t)(SCHED_UNLIMITED - 1 - a) ? SCHED_UNLIMITED - 1 : a + (int64_t)b;
}

int grant_snapshot(grant_t *g, const sched_t *s)
{
    int n = sched_nbuckets(s);
    if (n < 0)
        n = 0;
    if (growarr((void **)&g->r, &g->cap_r, n, sizeof *g->r) < 0 ||
        growarr((void **)&g->l, &g->cap_l, n, sizeof *g->l) < 0)
        return -ENOMEM;
    int64_t unseen = SCHED_UNLIMITED;
    for (int b = 0; b < n; b++) {
        sched_bucket_stats_t bs;
        if (sched_bucket_stats(s, b, &bs)) {
            g->r[b] = 0;
            g->l[b] = 0; /* cannot happen; fail closed */
            continue;
        }
        sched_stats_as_limited(&bs);
        g->r[b] = sat_add(bs.r_tokens < 0 ? 0 : bs.r_tokens, bs.served_r);
        if (bs.l_tokens == SCHED_UNLIMITED) {
            g->l[b] = SCHED_UNLIMITED;
            continue;
        }
        g->l[b] = sat_add(bs.l_tokens < 0 ? 0 : bs.l_tokens, bs.served_l + bs.served_o);
        int64_t total = sat_add(g->l[b], (uint64_t)g->r[b]);
        if (total < unseen)
            unseen = total;
    }
    g->n = (size_t)n;
    g->unseen_l = unseen;
    g->snapshots++;
    return 0;
}

int grant_tokens(const grant_t *g, const sched_t *s, int b, int64_t *r, int64_t *l)
{
    sched_bucket_stats_t bs;
    if (b < 0 || sched_bucket_stats(s, b, &bs))
        return -EINVAL;
    if (!g->snapshots)
        return -ENOENT;
    sched_stats_as_limited(&bs);
    int64_t gr = (size_t)b < g->n ? g->r[b] : 0;
    int64_t gl = (size_t)b < g->n ? g->l[b] : g->unseen_l;
    uint64_t served = bs.served_r + bs.served_l + bs.served_o;
    /* R: the placement less what R already paid for this period. */
    *r = (uint64_t)gr > bs.served_r ? gr - (int64_t)bs.served_r : 0;
    if (gl == SCHED_UNLIMITED) {
        *l = SCHED_UNLIMITED;
        return 0;
    }
    /* The total (R + L) less everything served; what R keeps comes first. */
    int64_t total = sat_add(gl, (uint64_t)gr);
    int64_t left = (uint64_t)total > served ? total - (int64_t)served : 0;
    if (*r > left)
        *r = left;
    *l = left - *r;
    return 0;
}

int grant_pace(const grant_t *g, int b, double share, int64_t *r, int64_t *l)
{
    if (!g->snapshots)
        return -ENOENT;
    if (b < 0 || *l == SCHED_UNLIMITED || !(share < 1.0))
        return 0;
    int64_t gr = (size_t)b < g->n ? g->r[b] : 0;
    int64_t gl = (size_t)b < g->n ? g->l[b] : g->unseen_l;
    if (gl == SCHED_UNLIMITED)
        return 0;
    double most = ceil((double)sat_add(gl, (uint64_t)gr) * (share > 0 ? share : 0));
    int64_t cap = (int64_t)most; /* < the grant, share < 1 */
    if (*r > cap)
        *r = cap;
    if (*l > cap - *r)
        *l = cap - *r;
    return 0;
}
