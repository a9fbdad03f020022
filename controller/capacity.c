/* capacity.c - what admission control asks of the controller: the up nodes' capacity in IOs and in bytes per second, over the cluster and where a bucket is placed (ctrl.h). */
#include "controller/ctrl.h"
#include "controller/ctrl_int.h"

/* Node i's capacity estimate in IOs or (`bytes`) bytes per second, 0:
 * unknown. */
static double node_capacity(const ctrl_t *c, int i, int bytes)
{
    return bytes ? bytes_capacity(c->by, i) : c->nodes[i].cap.estimate;
}

/* ctrl_total_capacity() or (`bytes`) ctrl_total_byte_capacity(). */
static double total_capacity(const ctrl_t *c, int bytes)
{
    double s = 0;
    for (int i = 0; i < c->nn; i++)
        if (c->nodes[i].up)
            s += node_capacity(c, i, bytes);
    return s;
}

/* ctrl_bucket_capacity() or (`bytes`) ctrl_bucket_byte_capacity(). */
static double bucket_capacity(const ctrl_t *c, const char *name, int bytes)
{
    int b = bucketfile_find(c->bf, name);
    if (b < 0)
        return -1;
    double s = 0;
    int any = 0;
    for (int i = 0; i < c->nn; i++) {
        const node_t *nd = &c->nodes[i];
        int j = ctrl__node_slot(nd, (size_t)b);
        if (!nd->up || j < 0)
            continue;
        const pair_t *p = ctrl__pair(nd, (size_t)j);
        if (!p->has_report)
            continue;
        if (p->demand > 0 || p->queued > 0 || p->arrivals > 0) {
            double n = node_capacity(c, i, bytes);
            if (!(n > 0) && bytes)
                return -1;
            s += n;
            any = 1;
        }
    }
    return any ? s : -1;
}

double ctrl_total_capacity(const ctrl_t *c)
{
    return total_capacity(c, 0);
}

double ctrl_bucket_capacity(const ctrl_t *c, const char *name)
{
    return bucket_capacity(c, name, 0);
}

double ctrl_total_byte_capacity(const ctrl_t *c)
{
    return total_capacity(c, 1);
}

double ctrl_bucket_byte_capacity(const ctrl_t *c, const char *name)
{
    return bucket_capacity(c, name, 1);
}
