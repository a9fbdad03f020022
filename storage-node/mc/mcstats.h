/* mcstats.h - the text of the memcached front's `stats` and `stats buckets` commands. */
#ifndef BQOS_MCSTATS_H
#define BQOS_MCSTATS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "storage-node/io/gate.h"

/* The front's counters and settings that `stats` shows.  Owned by the
 * front, on its loop thread. */
typedef struct {
    const char *name;       /* node name (borrowed) */
    time_t started;
    int threads;            /* backend threads (1: inline) */
    uint64_t cmd_get, cmd_set, cmd_touch, get_hits, get_misses;
    uint64_t rejected;      /* IOs of unknown buckets refused */
    uint64_t backend_errors;
} mcstats_t;

/* Formats the reply to "stats" (arglen 0: memcached's general counters, the
 * bqos_* ones, the gate's figures (gate_stats(): scheduler, window,
 * connections) and its status lines) or "stats buckets" (the gate's rows:
 * per-bucket counters, tokens and weight), each line
 * "STAT name value\r\n", then "END\r\n".  Returns the text (malloc'd, the
 * caller frees it) with its length in *len; NULL for any other argument
 * (the caller answers ERROR) or out of memory. */
char *mcstats_text(const mcstats_t *st, const gate_t *g, const char *arg, size_t arglen,
                   size_t *len);

#endif
