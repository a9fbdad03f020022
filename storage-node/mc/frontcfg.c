/* frontcfg.c - the defaults of the memcached front's settings (front.h,
 * docs/node.md). */
#include "storage-node/mc/front.h"

#include <string.h>

#include "storage-node/mc/mcproto.h"

void front_config_defaults(front_config_t *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->name = "node";
    listener_parse("127.0.0.1:11311", &cfg->listen);
    cfg->backend_host = "127.0.0.1";
    cfg->backend_port = 11211;
    cfg->workers = 0;       /* inline: see backend.h */
    cfg->outstanding = 5;   /* the paper's, for tokens; bqos-node uses 64
                               with rr (docs/node.md) */
    cfg->batch = 64;
    cfg->policy = SCHED_POLICY_TOKENS;
    cfg->separator = ':';
    cfg->default_mode = FRONT_DEFAULT_SERVE;
    cfg->max_auto_buckets = 1024;
    cfg->proto.max_item = MCP_ITEM_MAX_DEFAULT;
    cfg->max_conns = 4096;
    cfg->conn_reply_limit = 256u << 20;
    cfg->reply_memory = (size_t)1 << 30;
    cfg->cost = COST_CONFIG_DEFAULT;
}
