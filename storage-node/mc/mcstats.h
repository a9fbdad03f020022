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
    /* `stats settings`: the node's own (set once by the front) */
    int maxconns;
    size_t item_size_max;
    int flush_enabled;
    const char *backend;    /* "HOST:PORT" or "unix:PATH" (borrowed) */
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

/* Formats the node's answer to the `stats` arguments that are about the
 * client's connection or about memcached's cache rather than the node:
 *   settings   memcached's keys the node has its own value for (maxconns,
 *              tcpport: of fd's listener, item_size_max, ...) and
 *              bqos_backend
 *   conns      fd's connection only (another client's address is another
 *              tenant's business)
 *   items, slabs, sizes
 *              no rows: memcached's figures are every tenant's aggregate
 *   cachedump N [LIMIT]
 *              no keys: a key listing would show other tenants' keys
 * in memcached's "STAT ..." form ending "END\r\n".  fd is the asking
 * client's socket.  Returns the text (malloc'd, the caller frees it) with
 * its length in *len; NULL for any other argument or out of memory. */
char *mcstats_client_text(const mcstats_t *st, int fd, const char *arg, size_t arglen,
                          size_t *len);

#endif
