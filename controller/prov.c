/* prov.c - the provisional split of a limited bucket that no up node has reported this period (its headroom divided evenly, so its demand is served at once and its limit stays hard); two steps of ctrl_compute() (round.c). */
#include <errno.h>
#include <stdint.h>

#include "controller/ctrl.h"
#include "controller/ctrl_int.h"

/* Decides, after both passes, which limited buckets get a provisional
 * split: headroom left, but no up node has reported the bucket this period
 * and the estimates placed nothing for it (so it holds nothing to spend
 * when its demand appears, e.g. in the first interval of a period).  Sets
 * bs->prov, and bs->walk where ctrl__prov_walk() must (re)write the split
 * (new, or a forced round: period start, node or configuration change) or
 * revoke it (a report brought the bucket into the computation).  Returns nonzero
 * if any bucket needs a walk. */
int ctrl__prov_plan(ctrl_t *c, int forced)
{
    int any = 0;
    for (size_t b = 0; b < c->nb; b++) {
        bstate_t *bs = &c->b[b];
        int was = bs->prov;
        bs->prov = bs->l != CTRL_UNLIMITED && bs->head > 0 && c->io.cnt[b] == 0 &&
                   bs->ralloc == 0 && bs->lalloc == 0;
        bs->walk = bs->prov ? (forced || !was) : was;
        bs->fresh = bs->prov && !was;
        any |= bs->walk;
    }
    return any;
}

/* Nonzero if pair pr (of a bucket no up node has reported this period) had
 * a report in the previous period. */
static int prov_recent(const ctrl_t *c, const pair_t *pr)
{
    return pr->has_report && c->period > 0 && pr->period == c->period - 1;
}

/* Writes the provisional splits ctrl__prov_plan() asked for.  A bucket's split
 * goes to the up nodes where it was reported in the previous period, or if
 * there are none to every up node that holds it: its remaining reservation
 * as R-tokens and the rest of its headroom as L-tokens, each divided evenly
 * (the first nodes get one more token each for the remainder), so R + L
 * over all nodes is exactly the headroom and the limit stays hard.  The
 * other nodes holding it get R 0 and L 0.  A revoked split is set to R 0
 * and L 0 on the nodes where the pair is not active (the passes wrote the
 * active ones).  Pairs written here stay off the active lists: the bucket,
 * not its pairs, is revisited.  Returns 0 or -ENOMEM. */
int ctrl__prov_walk(ctrl_t *c)
{
    int rc;
    for (size_t b = 0; b < c->nb; b++) {
        bstate_t *bs = &c->b[b];
        if (!bs->walk)
            continue;
        int64_t n = 0, nrecent = 0;
        for (int i = 0; i < c->nn && bs->prov; i++) {
            node_t *nd = &c->nodes[i];
            int j = ctrl__node_slot(nd, (size_t)b);
            if (!nd->up || j < 0)
                continue;
            n++;
            nrecent += prov_recent(c, &nd->pairs[j]);
        }
        int only_recent = nrecent > 0;
        if (only_recent)
            n = nrecent;
        int64_t rt = bs->r_rem, lt = bs->head - bs->r_rem, idx = 0;
        for (int i = 0; i < c->nn; i++) {
            node_t *nd = &c->nodes[i];
            int j = ctrl__node_slot(nd, (size_t)b);
            if (!nd->up || j < 0)
                continue;
            pair_t *pr = &nd->pairs[j];
            int64_t r = 0, l = 0;
            int fresh = 0;
            if (!bs->prov) {
                if (nd->inact[j])
                    continue;
            } else if (!only_recent || prov_recent(c, pr)) {
                r = rt / n + (idx < rt % n);
                l = lt / n + (idx < lt % n);
                idx++;
                /* The node may have spent what we pushed before the split
                 * began; only an unbroken split is known to be intact. */
                fresh = bs->fresh;
            }
            pair_push_t *ps = &nd->push[j];
            if (!fresh && ps->tok_r == r && ps->tok_l == l)
                continue;
            if ((rc = ctrl__push_rec(nd, (uint32_t)b, r, l)) < 0)
                return rc;
            ctrl__pushed(c, pr, ps, r, l);
        }
    }
    return 0;
}
