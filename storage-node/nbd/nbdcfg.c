/* nbdcfg.c - the defaults of the NBD front's settings (nbdfront.h, docs/nbd.md). */
#include "storage-node/nbd/nbdfront.h"

#include <string.h>

#include "storage-node/nbd/nbdconn.h"

void nbdfront_config_defaults(nbdfront_config_t *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    listener_parse("127.0.0.1:10809", &cfg->listen);
    cfg->outstanding = 5;
    cfg->max_conns = 4096;
    cfg->max_queued = 256;
    cfg->request_memory = 256u << 20;
    cfg->inline_reads = 1;
    cfg->store.export_size = 1ull << 30;
    cfg->store.workers = 5;
    cfg->store.max_exports = MAX_EXPORTS;
    cfg->cost = COST_CONFIG_DEFAULT;
}
