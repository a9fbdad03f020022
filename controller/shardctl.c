/* shardctl.c - a controller shard's side of the root step (ctrl.h, "shards"): a node's slice held in the computations, and what the shard needs of each node for the next root step. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "controller/ctrl.h"
#include "controller/ctrl_int.h"
#include "controller/estimate.h"

int ctrl_node_set_slice(ctrl_t *c, int node, double est, double cons)
{
    node_t *nd = ctrl__get_node(c, node);
    if (!nd || isnan(est) || isnan(cons))
        return -EINVAL;
    if (est < 0) {
        if (nd->sliced)
            c->force = 1;
        nd->sliced = 0;
        return 0;
    }
    if (cons < 0)
        cons = 0;
    if (cons > est)
        cons = est;
    const double K = c->cfg.intervals, abs = c->cfg.skip_abs * K / c->cfg.period_s;
    /* A slice that moved as much as an estimate must to be recomputed
     * (the skip rule's own test): the placement within it is stale. */
    if (!nd->sliced || estimate_changed(nd->slice_est, est, c->cfg.skip_rel, abs) ||
        estimate_changed(nd->slice_cons, cons, c->cfg.skip_rel, abs))
        c->force = 1;
    nd->sliced = 1;
    nd->slice_est = est;
    nd->slice_cons = cons;
    return 0;
}

/* The work array of up node i after a computed round, or NULL. */
static const ledger_node_t *node_work(const ctrl_t *c, int i)
{
    const node_t *nd = &c->nodes[i];
    if (!nd->up || i >= c->io.nn || !c->io.n[i].up)
        return NULL;
    return &c->io.n[i];
}

/* A bucket's reservation left for the needs: as of the last computed
 * round (r_frac < 0), or its whole reservation for a period (the smaller
 * of R and L per period) times r_frac. */
static int64_t need_r(const ledger_bucket_t *bs, double r_frac)
{
    if (r_frac < 0)
        return bs->r_rem;
    int64_t r = bs->l != CTRL_UNLIMITED && bs->l < bs->r ? bs->l : bs->r;
    return r > 0 ? (int64_t)((double)r * r_frac) : 0;
}

/* ctrl_shard_needs() and ctrl_shard_needs_next() (r_frac as need_r()). */
static int needs(const ctrl_t *c, double r_frac, int64_t *placed, int64_t *must, int64_t *room,
                 int64_t *demand, int64_t *target)
{
    const int nn = c->nn;
    for (int i = 0; i < nn; i++) {
        if (placed)
            placed[i] = 0;
        if (must)
            must[i] = 0;
        if (room)
            room[i] = 0;
        if (demand)
            demand[i] = 0;
    }
    if (target)
        *target = 0;
    if (c->st.computed == 0)
        return 0;
    /* Each bucket's demand over the up nodes, for its must parts and the
     * target. */
    const int want_tot = must || (target && r_frac >= 0);
    /* The round's zeroed scratch if it has room (zeroed again below where
     * written), else one of our own. */
    const int own = want_tot && !(c->need_tot && c->capneed >= c->nb);
    int64_t *tot = !want_tot ? NULL : own ? calloc(c->nb ? c->nb : 1, sizeof *tot) : c->need_tot;
    if (want_tot && !tot)
        return -ENOMEM;
    for (int i = 0; i < nn; i++) {
        const ledger_node_t *ln = node_work(c, i);
        if (!ln)
            continue;
        if (placed)
            placed[i] = ln->load;
        for (size_t k = 0; k < ln->nwork; k++) {
            const ledger_work_t *w = &ln->work[k];
            if (w->b < 0 || (size_t)w->b >= c->nb || w->demand <= 0)
                continue;
            const int64_t r = need_r(&c->b[w->b], r_frac);
            if (room)
                room[i] = count_add(room[i], w->demand < r ? w->demand : r);
            if (demand)
                demand[i] = count_add(demand[i], w->demand);
            if (tot)
                tot[w->b] = count_add(tot[w->b], w->demand);
        }
    }
    for (int i = 0; must && i < nn; i++) {
        const ledger_node_t *ln = node_work(c, i);
        for (size_t k = 0; ln && k < ln->nwork; k++) {
            const ledger_work_t *w = &ln->work[k];
            if (w->b < 0 || (size_t)w->b >= c->nb || w->demand <= 0)
                continue;
            const int64_t elsewhere = tot[w->b] - w->demand, r = need_r(&c->b[w->b], r_frac);
            if (r > elsewhere) {
                int64_t m = r - elsewhere;
                must[i] = count_add(must[i], m < w->demand ? m : w->demand);
            }
        }
    }
    if (target) {
        if (r_frac < 0)
            *target = ctrl_r_target(c);
        else
            for (size_t b = 0; b < c->nb; b++)
                if (tot[b] > 0)
                    *target = count_add(*target, need_r(&c->b[b], r_frac));
    }
    if (own) {
        free(tot);
    } else if (tot) {
        for (int i = 0; i < nn; i++) {
            const ledger_node_t *ln = node_work(c, i);
            for (size_t k = 0; ln && k < ln->nwork; k++)
                if (ln->work[k].b >= 0 && (size_t)ln->work[k].b < c->nb)
                    tot[ln->work[k].b] = 0;
        }
    }
    return 0;
}

int ctrl_shard_needs(const ctrl_t *c, int64_t *placed, int64_t *must, int64_t *room,
                     int64_t *demand)
{
    return needs(c, -1, placed, must, room, demand, NULL);
}

int ctrl_shard_needs_next(const ctrl_t *c, double r_frac, int64_t *placed, int64_t *must,
                          int64_t *room, int64_t *demand, int64_t *target)
{
    if (!(r_frac >= 0)) /* NaN too */
        return -EINVAL;
    return needs(c, r_frac, placed, must, room, demand, target);
}

int64_t ctrl_r_target(const ctrl_t *c)
{
    int64_t t = 0;
    if (c->st.computed == 0)
        return 0;
    /* A bucket with R pairs is in play (round.c) unless the list is to be
     * rebuilt. */
    if (c->force || c->play_stale) {
        for (size_t b = 0; b < c->nb; b++)
            if (c->b[b].nr > 0)
                t = count_add(t, c->b[b].r_rem);
    } else {
        for (size_t k = 0; k < c->nplay; k++)
            if (c->b[c->play[k]].nr > 0)
                t = count_add(t, c->b[c->play[k]].r_rem);
    }
    return t;
}
