/* bytes.h - the controller's bytes/s dimension (cost-aware tokens): the byte rates of the buckets that have them, the nodes' byte reports and byte capacities, and each round's byte records, computed by a second ledger (ledger.h) in bytes.
 *
 * The byte dimension knows nodes only by their index and through a
 * bytes_view_t, which the IO side (ctrl.c) supplies: whether a node is up,
 * whether its grants are held, and which buckets its table holds and has
 * requests waiting for.  Without any byte rate there is no bytes_t and
 * none of this runs (the paper).
 *
 * A bytes_t belongs to the thread that owns its ctrl_t; nothing locks. */
#ifndef BQOS_BYTES_H
#define BQOS_BYTES_H

#include <stddef.h>
#include <stdint.h>

#include "common/bucketfile.h"
#include "common/proto.h"
#include "controller/ctrl.h"
#include "controller/ledger.h"
#include "pshift/pshift.h"

typedef struct bytes bytes_t;

/* What the byte dimension is told of node i now. */
typedef struct {
    uint8_t up;            /* up */
    uint8_t holds;         /* its grants are held against the limits (down by
                              silence, or back from such a silence this
                              period: held_by_silent() in round.c) */
    uint64_t down_rep;     /* period of its last report before it was last
                              marked down */
} bytes_node_t;

/* How the byte dimension sees the nodes (ctrl__bytes_view() in ctrl.c).
 * node() fills *out for node i < nn; pair() says of node i and controller
 * bucket b: -1 its table does not hold b, 0 it does, 1 it does and its
 * last report had requests of b waiting. */
typedef struct {
    int nn;
    uint64_t period;       /* the current period */
    void (*node)(const void *arg, int i, bytes_node_t *out);
    int (*pair)(const void *arg, int i, size_t b);
    const void *arg;
} bytes_view_t;

/* What one round of the byte dimension takes besides the view. */
typedef struct {
    double rem_s, il;      /* seconds and intervals left in the period */
    double conv_el;        /* share of the period since the last round's
                              conversion (phase_convert() in round.c) */
    ledger_round_t rd;     /* for the byte ledger's budgets and passes */
} bytes_round_t;

/* Takes the byte rates of `bf` (the configuration that replaces `old`;
 * rates become bytes per period of `period_s` seconds, K = `intervals`)
 * into *yp, keeping what the nodes said of buckets that keep a byte rate;
 * *yp becomes NULL when no bucket has or had a byte rate.  Returns 0 or
 * -ENOMEM (*yp unchanged). */
int bytes_config(bytes_t **yp, const bucketfile_t *old, const bucketfile_t *bf, double period_s,
                 int intervals);

/* Frees *yp and sets it to NULL.  Accepts NULL. */
void bytes_destroy(bytes_t **yp);

/* Node `node`'s byte report header of `period`: the bytes it served this
 * period in `busy_seconds` busy seconds (its byte capacity).  Returns 0 or
 * -ENOMEM. */
int bytes_report(bytes_t *y, int node, uint64_t period, uint64_t served_bytes,
                 double busy_seconds);

/* One byte record of that report, for controller bucket b (< 0: not
 * configured, ignored): bytes arrived in the node's last interval and
 * served this period.  Returns 0 or -ENOMEM. */
int bytes_report_rec(bytes_t *y, int node, int b, uint64_t period, uint64_t arrivals_interval,
                     uint64_t served);

/* Makes the byte records of a round by the ledger's passes (solved with
 * `o`).  Returns 0, -ENOMEM or a pshift error (no records then). */
int bytes_compute(bytes_t *y, const bytes_view_t *v, const bytes_round_t *in,
                  const pshift_opts_t *o);

/* Node `node`'s byte records of the last bytes_compute() (bucket = index
 * in the controller's table; PROTO_TOK_OFF for a bucket that lost its byte
 * rate), owned by y (NULL: none).  Returns the count, the records in *recs
 * (NULL when y has none for the node). */
size_t bytes_tokens(const bytes_t *y, int node, const proto_tokens_bytes_t **recs);

/* Adds bucket b's byte figures (served this period, tokens last pushed to
 * the up nodes) to *out; nothing if y is NULL or b has no byte rate. */
void bytes_info(const bytes_t *y, const bytes_view_t *v, int b, ctrl_bucket_info_t *out);

/* Node `node`'s byte rate while busy (bytes per second), 0 if unknown or
 * y is NULL. */
double bytes_capacity(const bytes_t *y, int node);

#endif
