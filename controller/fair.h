/* fair.h - the controller's weighted fair shares of spare capacity (issue 28): each computed round, after the R and L passes, the IO ledger's spare capacity per up node divided among the buckets that want more (shares.h), as per-node share records for the tokens message.
 *
 * A fair_t belongs to the thread that owns its ctrl_t (ctrl.h); nothing
 * locks. */
#ifndef BQOS_FAIR_H
#define BQOS_FAIR_H

#include <stddef.h>
#include <stdint.h>

#include "common/proto.h"
#include "controller/ledger.h"
#include "controller/shares.h"

typedef struct fair fair_t;

/* What one division cost and found (the last computed round's). */
typedef struct {
    size_t pairs;          /* hungry pairs in the problem */
    int iters;             /* solver iterations */
    int64_t spare;         /* spare tokens over the up nodes */
    int64_t given;         /* shares given (every bucket) */
    int64_t sent;          /* shares sent (records) */
    uint64_t truncated;    /* share records left out (over PROTO_SHARES_MAX
                              on a node: the smallest), since start */
} fair_stats_t;

/* A new division with no room yet, or NULL (-ENOMEM).  Caller owns it. */
fair_t *fair_new(void);

/* Frees f and NULLs *fp.  Accepts NULL. */
void fair_destroy(fair_t **fp);

/* Divides the spare capacity of ledger L's up nodes after its R and L
 * passes (capacity capt less the R placed on each node's work) among its
 * pairs that want more than their R (demand beyond R), bucket b weighing
 * weights[b] (NULL: 1 each) and capped, if limited, by its headroom left
 * after R (head - ralloc): a limited bucket's shares replace the L pass's
 * L-tokens (fair_work_share()), so limits hold as before.  Keeps, per node index, the
 * share records of its buckets (at most PROTO_SHARES_MAX,
 * the largest; ascending bucket order).  Returns 0 or -ENOMEM (then every
 * node's list is empty). */
int fair_round(fair_t *f, const ledger_t *L, const uint32_t *weights);

/* Node index i's share records of the last fair_round() (borrowed from f,
 * valid until the next one); *recs NULL and 0 if none. */
size_t fair_node(const fair_t *f, int i, const proto_share_rec_t **recs);

/* The share of node index i's work pair k (its position in the ledger's
 * work at fair_round()) in the last division, 0 if none.  For a limited
 * bucket this is its L-tokens there (round.c's push_node). */
int64_t fair_work_share(const fair_t *f, int i, size_t k);

/* Node index i's work pair at `from` moved to `to` (round.c's push_node
 * takes an idle pair off the work by moving the last one into its place):
 * its share moves with it. */
void fair_work_moved(fair_t *f, int i, size_t from, size_t to);

/* Bucket b's shares over every node in the last division. */
int64_t fair_bucket_share(const fair_t *f, size_t b);

/* The last round's figures. */
fair_stats_t fair_stats(const fair_t *f);

#endif
