/* replybudget.c - per-connection and node-wide bounds on unsent reply bytes
 * (see replybudget.h). */
#include "storage-node/mc/replybudget.h"

#include <string.h>

void replybudget_init(replybudget_t *b, const replybudget_config_t *cfg)
{
    memset(b, 0, sizeof *b);
    b->cfg = *cfg;
}

int replybudget_set(replybudget_t *b, replybudget_conn_t *c, size_t bytes, double now)
{
    if (c->held == 0 && bytes > 0)
        b->nheld++;
    else if (c->held > 0 && bytes == 0)
        b->nheld--;
    b->held = b->held - c->held + bytes;
    c->held = bytes;
    if (bytes < b->cfg.soft) {
        c->soft_since = 0;
        return REPLYBUDGET_OK;
    }
    if (c->soft_since == 0)
        c->soft_since = now;
    if (bytes > b->cfg.hard || now - c->soft_since >= b->cfg.soft_secs)
        return REPLYBUDGET_CLOSE;
    return REPLYBUDGET_OK;
}

int replybudget_over(const replybudget_t *b)
{
    return b->held > b->cfg.total;
}

int replybudget_may_read(const replybudget_t *b, const replybudget_conn_t *c, int resume)
{
    if (c->held >= (resume ? b->cfg.soft / 2 : b->cfg.soft))
        return 0;
    /* Heaviest: at or above the mean of the connections holding replies. */
    return !replybudget_over(b) || c->held == 0 || c->held * b->nheld < b->held;
}
