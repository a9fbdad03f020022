/* replybudget.h - reply memory of the memcached front: what each connection
 * holds in unsent replies (values fetched but not yet written, and its output
 * buffer), bounded per connection like Redis's client-output-buffer-limit and
 * by a node-wide budget (docs/node.md, "Memory bounds").
 *
 * Per connection: at or above `soft` the connection's requests are not read;
 * above `hard`, or at or above `soft` for `soft_secs`, it is closed.  Node-wide:
 * while the total exceeds `total`, the heaviest connections (holding at least
 * the mean of the connections that hold anything) are not read.
 *
 * Plain counters, no allocation.  Threads: the loop thread only. */
#ifndef BQOS_REPLYBUDGET_H
#define BQOS_REPLYBUDGET_H

#include <stddef.h>

typedef struct {
    size_t soft, hard;      /* per connection, bytes */
    double soft_secs;       /* at or above soft this long: close */
    size_t total;           /* node-wide, bytes */
} replybudget_config_t;

typedef struct {
    replybudget_config_t cfg;
    size_t held;            /* sum over connections */
    size_t nheld;           /* connections holding anything */
} replybudget_t;

/* One connection's share; zero it to start. */
typedef struct {
    size_t held;
    double soft_since;      /* when it reached soft; 0: below */
} replybudget_conn_t;

enum { REPLYBUDGET_OK = 0, REPLYBUDGET_CLOSE = 1 };

/* Starts an empty budget with `cfg` (hard >= soft > 0, total > 0). */
void replybudget_init(replybudget_t *b, const replybudget_config_t *cfg);

/* Records that c now holds `bytes` (0 when it closes), at time `now`
 * (seconds, monotonic).  Returns REPLYBUDGET_CLOSE if c passed its hard limit
 * or stayed at or above soft for soft_secs, else REPLYBUDGET_OK. */
int replybudget_set(replybudget_t *b, replybudget_conn_t *c, size_t bytes, double now);

/* 1 if c may read requests: below soft (below soft / 2 with `resume`, so
 * that reading restarts with room), and not among the heaviest while the
 * node is over its budget. */
int replybudget_may_read(const replybudget_t *b, const replybudget_conn_t *c, int resume);

/* 1 while the node-wide total exceeds the budget. */
int replybudget_over(const replybudget_t *b);

#endif
