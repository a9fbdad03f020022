/* shardset.c - K controller shards in one process with the root step between their rounds (shardset.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "controller/shardmap.h"
#include "controller/shardset.h"

struct shardset {
    int k;
    ctrl_config_t cfg;
    ctrl_t **sh;             /* [k] */
    int32_t **glob;          /* [k][buckets of shard s]: global index */
    size_t *nglob;           /* [k] */
    shardroot_t *root;
    /* scratch of the root step, [nodes] per array */
    int64_t *placed, *must, *room, *dem;
    double *cap, *cons;
    int capn;
    double left_prev;        /* `left` of the last root step (the shards'
                                needs are as of that round's time left) */
    double *pnorm;           /* [k][capn]: R each shard placed on each node
                                per unit of time left, from its last round
                                that was not a period's last (which places
                                R on the queues, not where it will go) */
    int capnorm;
};

shardset_t *shardset_new(const ctrl_config_t *cfg, int k)
{
    if (!cfg || k < 1 || k > SHARDMAP_MAX)
        return NULL;
    shardset_t *ss = calloc(1, sizeof *ss);
    if (!ss)
        return NULL;
    ss->k = k;
    ss->cfg = *cfg;
    if (ss->cfg.max_path == 0) /* shards bound pShift's paths (shardset.h) */
        ss->cfg.max_path = SHARDSET_MAX_PATH;
    ss->cfg.no_queue_lift = 1; /* (shardset.h) */
    ss->sh = calloc((size_t)k, sizeof *ss->sh);
    ss->glob = calloc((size_t)k, sizeof *ss->glob);
    ss->nglob = calloc((size_t)k, sizeof *ss->nglob);
    ss->root = shardroot_new();
    if (!ss->sh || !ss->glob || !ss->nglob || !ss->root)
        goto fail;
    for (int s = 0; s < k; s++)
        if (!(ss->sh[s] = ctrl_new(&ss->cfg)))
            goto fail;
    return ss;
fail:
    shardset_destroy(&ss);
    return NULL;
}

void shardset_destroy(shardset_t **sp)
{
    if (!sp || !*sp)
        return;
    shardset_t *ss = *sp;
    for (int s = 0; ss->sh && s < ss->k; s++)
        ctrl_destroy(&ss->sh[s]);
    for (int s = 0; ss->glob && s < ss->k; s++)
        free(ss->glob[s]);
    free(ss->sh);
    free(ss->glob);
    free(ss->nglob);
    shardroot_destroy(&ss->root);
    free(ss->placed);
    free(ss->must);
    free(ss->room);
    free(ss->dem);
    free(ss->cap);
    free(ss->cons);
    free(ss->pnorm);
    free(ss);
    *sp = NULL;
}

int shardset_count(const shardset_t *ss)
{
    return ss->k;
}

ctrl_t *shardset_shard(shardset_t *ss, int s)
{
    return s >= 0 && s < ss->k ? ss->sh[s] : NULL;
}

int shardset_of(const shardset_t *ss, const char *name)
{
    return shardmap_of(name, ss->k);
}

int shardset_set_buckets(shardset_t *ss, const bucketfile_t *bf)
{
    const size_t n = bucketfile_count(bf);
    int rc = -ENOMEM;
    bucketfile_t **part = calloc((size_t)ss->k, sizeof *part);
    int32_t **glob = calloc((size_t)ss->k, sizeof *glob);
    size_t *ng = calloc((size_t)ss->k, sizeof *ng);
    if (!part || !glob || !ng)
        goto out;
    for (int s = 0; s < ss->k; s++)
        if (!(part[s] = bucketfile_new()) || !(glob[s] = malloc((n ? n : 1) * sizeof **glob)))
            goto out;
    for (size_t i = 0; i < n; i++) {
        const bucketfile_bucket_t *x = bucketfile_get(bf, i);
        if (bucketfile_has_parent(x)) {
            rc = -ENOTSUP;
            goto out;
        }
        int s = shardmap_of(x->name, ss->k);
        if ((rc = bucketfile_set(part[s], x, NULL)) < 0)
            goto out;
        glob[s][ng[s]++] = (int32_t)i;
    }
    for (int s = 0; s < ss->k; s++)
        if ((rc = ctrl_set_buckets(ss->sh[s], part[s])) < 0)
            goto out;
    for (int s = 0; s < ss->k; s++) {
        free(ss->glob[s]);
        ss->glob[s] = glob[s];
        ss->nglob[s] = ng[s];
        glob[s] = NULL;
    }
    rc = 0;
out:
    for (int s = 0; part && s < ss->k; s++)
        bucketfile_destroy(&part[s]);
    for (int s = 0; glob && s < ss->k; s++)
        free(glob[s]);
    free(part);
    free(glob);
    free(ng);
    return rc;
}

int shardset_global(const shardset_t *ss, int s, uint32_t local)
{
    if (s < 0 || s >= ss->k || local >= ss->nglob[s])
        return -1;
    return ss->glob[s][local];
}

/* Makes the scratch hold n nodes.  Returns 0 or -ENOMEM. */
static int scratch(shardset_t *ss, int n)
{
    if (n <= ss->capn)
        return 0;
    int64_t **a[] = {&ss->placed, &ss->must, &ss->room, &ss->dem};
    for (size_t i = 0; i < sizeof a / sizeof a[0]; i++) {
        int64_t *x = realloc(*a[i], (size_t)n * sizeof *x);
        if (!x)
            return -ENOMEM;
        *a[i] = x;
    }
    double **d[] = {&ss->cap, &ss->cons};
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++) {
        double *x = realloc(*d[i], (size_t)n * sizeof *x);
        if (!x)
            return -ENOMEM;
        *d[i] = x;
    }
    double *pn = calloc((size_t)ss->k * (size_t)n, sizeof *pn);
    if (!pn)
        return -ENOMEM;
    for (int s = 0; ss->pnorm && s < ss->k; s++)
        memcpy(pn + (size_t)s * n, ss->pnorm + (size_t)s * ss->capn, (size_t)ss->capn * sizeof *pn);
    free(ss->pnorm);
    ss->pnorm = pn;
    ss->capn = n;
    return 0;
}

/* Every shard's slices of every node: none (est 0). */
static void slices_zero(shardset_t *ss, int nn)
{
    for (int s = 0; s < ss->k; s++)
        for (int n = 0; n < nn && n < ctrl_nnodes(ss->sh[s]); n++)
            ctrl_node_set_slice(ss->sh[s], n, 0, 0);
}

int shardset_root(shardset_t *ss, double left, const pshift_opts_t *o)
{
    int nn = 0;
    for (int s = 0; s < ss->k; s++)
        if (ctrl_nnodes(ss->sh[s]) > nn)
            nn = ctrl_nnodes(ss->sh[s]);
    const double rem_s = (left > 0 ? left : 1) * ss->cfg.period_s;
    int rc = scratch(ss, nn ? nn : 1);
    if (rc == 0)
        rc = shardroot_reset(ss->root, ss->k, nn);
    if (rc < 0)
        goto fail;
    /* A node's capacity: the smallest of the shards' estimates (they see
     * the same reports; a shard that missed one must not lift another's
     * view), down if any shard has it down. */
    for (int n = 0; n < nn; n++) {
        ss->cap[n] = ss->cons[n] = -1;
        for (int s = 0; s < ss->k; s++) {
            ctrl_node_info_t ni;
            if (n >= ctrl_nnodes(ss->sh[s]) || ctrl_node_info(ss->sh[s], n, &ni) < 0 || !ni.up) {
                ss->cap[n] = ss->cons[n] = 0;
                break;
            }
            if (ss->cap[n] < 0 || ni.capacity < ss->cap[n])
                ss->cap[n] = ni.capacity;
            if (ss->cons[n] < 0 || ni.conservative < ss->cons[n])
                ss->cons[n] = ni.conservative;
        }
        int64_t c = (int64_t)(ss->cap[n] * rem_s), cv = (int64_t)(ss->cons[n] * rem_s);
        if ((rc = shardroot_set_node(ss->root, n, c > 0 ? c : 0, cv > 0 ? cv : 0)) < 0)
            goto fail;
    }
    /* The needs are for the time left at the shards' last round: scaled
     * to the time left now (at a period's start, from its last interval
     * to the whole period), so that they weigh against the capacities as
     * they will in this round. */
    const double f = ss->left_prev > 0 && left > 0 ? left / ss->left_prev : 1;
    const double now = left > 0 ? left : 1;
    const int iv = ss->cfg.intervals;
    const int fresh = ss->left_prev > 1.0 / iv + 1e-9; /* not a last interval */
    /* A new period since the last step (the time left grew): the needs are
     * those of the new period, every reservation whole again, not what was
     * left of the old one's (ctrl_shard_needs_next()). */
    const int newp = ss->left_prev > 0 && left > ss->left_prev + 1e-9;
#define SCALE(x) ((int64_t)((double)(x) * f))
    for (int s = 0; s < ss->k; s++) {
        ctrl_t *c = ss->sh[s];
        int64_t target = 0;
        if (newp)
            rc = ctrl_shard_needs_next(c, ss->left_prev, ss->placed, ss->must, ss->room, ss->dem,
                                       &target);
        else if ((rc = ctrl_shard_needs(c, ss->placed, ss->must, ss->room, ss->dem)) == 0)
            target = ctrl_r_target(c);
        if (rc < 0)
            goto fail;
        if ((rc = shardroot_set_target(ss->root, s, SCALE(target))) < 0)
            goto fail;
        for (int n = 0; n < ctrl_nnodes(c) && n < nn; n++) {
            double *pn = &ss->pnorm[(size_t)s * ss->capn + n];
            if (fresh)
                *pn = (double)ss->placed[n] / ss->left_prev;
            if ((rc = shardroot_set_need(ss->root, s, n, SCALE(ss->must[n]), SCALE(ss->room[n]),
                                         SCALE(ss->dem[n]))) < 0 ||
                (rc = shardroot_set_placed(ss->root, s, n, (int64_t)(*pn * now))) < 0)
                goto fail;
        }
    }
#undef SCALE
    ss->left_prev = left > 0 ? left : 1;
    if ((rc = shardroot_solve(ss->root, o)) < 0)
        goto fail;
    for (int s = 0; s < ss->k; s++)
        for (int n = 0; n < ctrl_nnodes(ss->sh[s]) && n < nn; n++) {
            int64_t e, cv;
            shardroot_slice(ss->root, s, n, &e, &cv, NULL);
            ctrl_node_set_slice(ss->sh[s], n, (double)e / rem_s, (double)cv / rem_s);
        }
    return 0;
fail:
    slices_zero(ss, nn);
    return rc;
}

const shardroot_stats_t *shardset_root_stats(const shardset_t *ss)
{
    return shardroot_stats(ss->root);
}

void shardset_slice(const shardset_t *ss, int s, int n, int64_t *est, int64_t *cons)
{
    shardroot_slice(ss->root, s, n, est, cons, NULL);
}
