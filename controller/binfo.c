/* binfo.c - ctrl_bucket_info() for many buckets in one pass over the nodes' active pairs (the per-period metrics), not one pass over the nodes per bucket (ctrl.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "controller/ctrl.h"
#include "controller/ctrl_int.h"

/* pos[b]: the index in the caller's list of table bucket b while a call
 * sums it, -1 otherwise (every entry -1 between calls). */
struct ctrl_binfo {
    int *pos;
    size_t cap;
};

ctrl_binfo_t *ctrl_binfo_new(void)
{
    return calloc(1, sizeof(ctrl_binfo_t));
}

void ctrl_binfo_destroy(ctrl_binfo_t **sp)
{
    if (!sp || !*sp)
        return;
    free((*sp)->pos);
    free(*sp);
    *sp = NULL;
}

/* Makes s->pos hold n entries, the new ones -1.  Returns 0 or -ENOMEM. */
static int fit(ctrl_binfo_t *s, size_t n)
{
    if (s->cap >= n)
        return 0;
    size_t cap = n + n / 4 + 16;
    int *p = realloc(s->pos, cap * sizeof *p);
    if (!p)
        return -ENOMEM;
    for (size_t b = s->cap; b < cap; b++)
        p[b] = -1;
    s->pos = p;
    s->cap = cap;
    return 0;
}

/* Nonzero if a pair not in its node's active list may hold something
 * ctrl_bucket_info() sums: tokens a computation has not yet replaced (a
 * new table's pairs before their full push, the tail of a table in
 * parts).  Otherwise such a pair holds zeros in every summed figure:
 * round.c's push_node() takes a pair off the list only with nothing
 * served this period, queued or asked for and its tokens 0 (or
 * unlimited, not summed), or in a provisional split (those buckets go
 * the per-bucket way), and only a record brings it back. */
static int pending_push(const ctrl_t *c)
{
    for (int i = 0; i < c->nn; i++) {
        const node_t *nd = &c->nodes[i];
        if (nd->ntable && (nd->full_push || nd->tail_from < nd->ntable))
            return 1;
    }
    return 0;
}

int ctrl_bucket_info_many(const ctrl_t *c, ctrl_binfo_t *s, const int *bs, size_t n,
                          ctrl_bucket_info_t *out)
{
    int rc;
    if (!c || !s || (n && (!bs || !out)))
        return -EINVAL;
    if ((rc = fit(s, c->nb)) < 0)
        return rc;
    /* Summing over the active pairs is exact only where every pair off
     * the lists holds zeros (pending_push()); else, and for a parent (its
     * children's sums), a provisional split (its tokens are on pairs off
     * the lists) or a bucket listed twice, the per-bucket way. */
    const int slow_all = c->tree || pending_push(c);
    const bytes_view_t v = ctrl__bytes_view(c);
    size_t nfast = 0;
    for (size_t k = 0; k < n; k++) {
        const int b = bs[k];
        ctrl_bucket_info_t *o = &out[k];
        if (b < 0 || (size_t)b >= c->nb) {
            memset(o, 0, sizeof *o); /* name NULL: not in the table */
            continue;
        }
        if (slow_all || c->pv[b].prov || c->pv[b].walk || s->pos[b] >= 0) {
            ctrl_bucket_info(c, b, o);
            continue;
        }
        const bucketfile_bucket_t *x = bucketfile_get(c->bf, (size_t)b);
        memset(o, 0, sizeof *o);
        o->parent = bucketfile_has_parent(x) ? x->parent_name : NULL;
        o->name = x->name;
        o->reservation = x->reservation;
        o->limit = x->limit;
        o->weight = x->weight;
        o->reservation_bytes = x->reservation_bytes;
        o->limit_bytes = x->limit_bytes;
        o->shadow = x->shadow;
        bytes_info(c->by, &v, b, o);
        s->pos[b] = (int)k;
        nfast++;
    }
    if (nfast > 0) {
        for (int i = 0; i < c->nn; i++) {
            const node_t *nd = &c->nodes[i];
            for (size_t a = 0; a < nd->nact; a++) {
                const size_t j = nd->act[a];
                const int b = ctrl__pair_b(nd, j);
                if (b < 0 || s->pos[b] < 0)
                    continue;
                ctrl__bucket_add_pair(c, nd, j, c->b[b].l == CTRL_UNLIMITED, &out[s->pos[b]]);
            }
        }
    }
    for (size_t k = 0; k < n; k++) {
        const int b = bs[k];
        if (b < 0 || (size_t)b >= c->nb || s->pos[b] != (int)k)
            continue;
        if (c->b[b].l == CTRL_UNLIMITED)
            out[k].l_tokens = CTRL_UNLIMITED;
        s->pos[b] = -1;
    }
    return 0;
}
