/* rqueue.c - the last round of a period places R where the requests wait: a queued request is served where it is, while R-tokens on forecast arrivals are stranded if the demand moves and no later round moves them; steps of a ledger's R pass (ledger.c). */
#include <stdint.h>

#include "controller/ctrl.h"
#include "controller/ctrl_int.h"
#include "pshift/pshift.h"

/* How much of a node's excess one ctrl__rq_lift() pass gives back: the
 * next solve refills part of what the lifted buckets leave with other
 * queues (measured on the simulator's Experiments 1 and 2 with
 * CTRL_RQ_PASSES, docs/performance.md). */
#define RQ_COVER 4

/* Only in the last interval (earlier, the next round places again what a
 * move strands) and only for buckets without a limit (a limited bucket's R
 * placement also decides where its L-tokens go, and its headroom is spread
 * over its active nodes anyway). */
int ctrl__rq_begin(const ctrl_t *c, ledger_t *L)
{
    const int last = L->queues && c->interval + 1 == (uint32_t)c->cfg.intervals;
    for (size_t b = 0; b < L->nb; b++)
        L->b[b].queued = last && L->b[b].l == CTRL_UNLIMITED ? 0 : -1;
    return last;
}

/* On every up node where the solution places more R than the node can
 * take (its conservative capacity less the single-server buckets: pShift
 * goes beyond it where demands leave no choice), buckets held to their
 * queues there get their whole demand back (bs->queued = -1), in the
 * node's order, until what they were given there is RQ_COVER times the
 * excess: the queues of a bucket whose tokens elsewhere matched its demand
 * sit on the nodes that are full. */
int ctrl__rq_lift(ledger_t *L)
{
    int any = 0;
    for (int s = 0; s < pshift_nservers(L->rp); s++) {
        lnode_t *ln = &L->n[L->srv_node[s]];
        int64_t over = pshift_server_load(L->rp, s) - (ln->rcap - ln->load);
        if (over <= 0)
            continue;
        over *= RQ_COVER;
        for (size_t k = 0; k < ln->nwork && over > 0; k++) {
            const work_t *w = &ln->work[k];
            if (w->rk < 0 || L->b[w->b].nr == 1)
                continue;
            bstate_t *bs = &L->b[w->b];
            if (ctrl__rq_demand(w, bs) < w->demand) {
                over -= pshift_bucket_allocs(L->rp, bs->pidx)[w->rk];
                bs->queued = -1;
                any = 1;
            }
        }
    }
    return any;
}
