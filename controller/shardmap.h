/* shardmap.h - the shard map's old place: the rule lives in common/shardmap.h (nodes and bqos-ctl compute it too); this header only forwards to it. */
#ifndef BQOS_SHARDMAP_H
#define BQOS_SHARDMAP_H

#include "common/shardmap.h"

#endif
