/* cost.c - what a request costs in units of work: bytes over a configured unit, weighted by kind. */
#include "storage-node/core/cost.h"

#include <errno.h>
#include <math.h>

int cost_check(const cost_config_t *c)
{
    if (!c || c->unit < 1 || c->unit > COST_UNIT_MAX || !(c->read_weight >= 0) ||
        c->read_weight > COST_WEIGHT_MAX || !(c->write_weight >= 0) ||
        c->write_weight > COST_WEIGHT_MAX || c->flush > COST_FIXED_MAX ||
        c->trim > COST_FIXED_MAX)
        return -EINVAL;
    return 0;
}

/* ceil(bytes x w / unit), exact in integers when w is 1. */
static uint32_t weigh(uint64_t bytes, double w, uint32_t unit)
{
    if (bytes == 0 || w <= 0)
        return 0;
    double u;
    if (w == 1)
        u = (double)(bytes / unit + (bytes % unit != 0));
    else
        u = ceil((double)bytes * w / (double)unit - 1e-9);
    return u >= (double)UINT32_MAX ? UINT32_MAX : (uint32_t)u;
}

uint32_t cost_of(const cost_config_t *c, cost_kind_t kind, uint64_t bytes)
{
    switch (kind) {
    case COST_READ:
        return weigh(bytes, c->read_weight, c->unit);
    case COST_WRITE:
        return weigh(bytes, c->write_weight, c->unit);
    case COST_FLUSH:
        return c->flush;
    case COST_TRIM:
        return c->trim;
    case COST_NONE:
        break;
    }
    return 0;
}
