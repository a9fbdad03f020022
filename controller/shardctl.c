/* shardctl.c - a controller shard's side of the root step (ctrl.h, "shards"): a node's slice held in the computations, and what the shard needs of each node for the next root step. */
#include <errno.h>
#include <math.h>

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

int ctrl_node_need(const ctrl_t *c, int node, int64_t *r_placed, int64_t *r_room,
                   int64_t *demand)
{
    const node_t *nd = ctrl__get_node(c, node);
    if (!nd)
        return -EINVAL;
    int64_t placed = 0, room = 0, dem = 0;
    if (nd->up && node < c->io.nn && c->st.computed > 0) {
        const ledger_node_t *ln = &c->io.n[node];
        placed = ln->up ? ln->load : 0;
        for (size_t k = 0; k < ln->nwork && k < nd->nact; k++) {
            const ledger_work_t *w = &ln->work[k];
            if (w->b < 0 || (size_t)w->b >= c->nb || w->demand <= 0)
                continue;
            const int64_t r = c->b[w->b].r_rem;
            room = count_add(room, w->demand < r ? w->demand : r);
            dem = count_add(dem, w->demand);
        }
    }
    if (r_placed)
        *r_placed = placed;
    if (r_room)
        *r_room = room;
    if (demand)
        *demand = dem;
    return 0;
}

int64_t ctrl_r_target(const ctrl_t *c)
{
    int64_t t = 0;
    if (c->st.computed == 0)
        return 0;
    for (size_t b = 0; b < c->nb; b++)
        if (c->b[b].nr > 0)
            t = count_add(t, c->b[b].r_rem);
    return t;
}
