/* cost.h - what a request costs in units of work (cost-aware tokens, issue 15): bytes over a configured unit, weighted by kind.
 *
 * The node charges each request one IO token (the paper) and, for a
 * bucket that has a rate in bytes/s, cost_of() units of its unit account
 * (sched_set_units()).  A unit is `unit` bytes (default 4 KiB): a read of
 * n bytes costs ceil(n x read_weight / unit) units, a write
 * ceil(n x write_weight / unit), a flush `flush` units and a trim (or
 * write-zeroes) `trim` units, whatever its length.  A memcached set is a
 * write of its value; a get is a read of what it returned, known only
 * once the reply is (the front charges it then, sched_charge()).
 *
 * Pure functions over a caller-owned cost_config_t; any thread. */
#ifndef BQOS_COST_H
#define BQOS_COST_H

#include <stdint.h>

#define COST_UNIT_DEFAULT 4096u  /* bytes per unit */
#define COST_UNIT_MAX (1u << 30)
#define COST_WEIGHT_MAX 1000.0
#define COST_FIXED_MAX 1000000u  /* largest flush / trim cost, units */

typedef enum {
    COST_READ = 0,
    COST_WRITE = 1,
    COST_FLUSH = 2,
    COST_TRIM = 3,   /* trim, write-zeroes: no data moves */
    COST_NONE = 4    /* metadata (NBD BLOCK_STATUS): 0 units */
} cost_kind_t;

typedef struct {
    uint32_t unit;        /* bytes per unit, 1..COST_UNIT_MAX */
    double read_weight;   /* units per unit of data read, 0..COST_WEIGHT_MAX */
    double write_weight;  /* ditto written */
    uint32_t flush;       /* units a flush costs, 0..COST_FIXED_MAX */
    uint32_t trim;        /* units a trim costs, 0..COST_FIXED_MAX */
} cost_config_t;

/* The defaults: 4 KiB units, reads and writes weigh 1, flush and trim 1. */
#define COST_CONFIG_DEFAULT                                                      \
    ((cost_config_t){.unit = COST_UNIT_DEFAULT, .read_weight = 1, .write_weight = 1, \
                     .flush = 1, .trim = 1})

/* Returns 0 if every field is within its bounds, else -EINVAL. */
int cost_check(const cost_config_t *c);

/* Units a request of `kind` moving `bytes` bytes costs under c (which must
 * pass cost_check()): at most UINT32_MAX.  0 bytes of data cost 0. */
uint32_t cost_of(const cost_config_t *c, cost_kind_t kind, uint64_t bytes);

#endif
