/* grant.h - what the controller granted this node per bucket in the last period it covered, kept so that a node whose controller is gone can go on enforcing it ("fail static", docs/decisions.md).
 *
 * The grant of bucket b on this node for a period is what the node could
 * serve of b in that period: the IOs it served plus the tokens it still
 * held when the period ended.  Tokens are absolute counts for the rest of
 * the period, net of what the node served since its report, so after the
 * controller's last tokens message of a period "served + left" stays what
 * the controller allowed, and summed over the nodes it is within the
 * bucket's limit.  R part: served with R-tokens + R-tokens left (the
 * reservation's placement here).  L part: everything else served + L-tokens
 * left, or no limit.
 *
 *   grant_snapshot(g, s)                   at the end of a period the
 *                                          controller covered
 *   grant_tokens(g, s, b, &r, &l)          what to hold for the rest of a
 *                                          period without a controller
 *   grant_pace(g, b, share, &r, &l)        ... at most the grant's rate
 *                                          over the time left
 *
 * A grant_t belongs to the agent that owns it (the node's loop thread);
 * nothing here locks, sends or reads a clock. */
#ifndef BQOS_GRANT_H
#define BQOS_GRANT_H

#include <stddef.h>
#include <stdint.h>

#include "storage-node/core/sched.h"

typedef struct {
    int64_t *r, *l;      /* per scheduler bucket; l may be SCHED_UNLIMITED */
    size_t n;            /* buckets with a grant (indices 0..n-1) */
    int cap_r, cap_l;    /* growarr() capacities of r and l */
    int64_t unseen_l;    /* L share of a bucket without a grant (see
                            grant_snapshot()) */
    uint64_t snapshots;  /* periods taken */
} grant_t;

/* An empty grant (no period taken): every bucket is "never seen". */
void grant_init(grant_t *g);

/* Frees the arrays and re-initialises.  Accepts NULL. */
void grant_clear(grant_t *g);

/* Takes the grant of the period that is ending from the scheduler's
 * counters and tokens (call before sched_period_start()), for every
 * bucket the scheduler has.  The share of a bucket never seen (created
 * after this) is the smallest total grant (R + L) of a limited bucket, or
 * no limit if no bucket is limited here.  Returns 0, or -ENOMEM (the
 * previous grant is kept whole). */
int grant_snapshot(grant_t *g, const sched_t *s);

/* The tokens bucket b should hold for the rest of a period without a
 * controller: its grant less what it served in this period so far (R
 * first, then the total), never below 0; an unlimited grant stays
 * unlimited.  A bucket without a grant: R 0, L = the never-seen share less
 * what it served.  Before any snapshot every bucket is left as it is and
 * the function returns -ENOENT.  Returns 0, -ENOENT, or -EINVAL (bad
 * index). */
int grant_tokens(const grant_t *g, const sched_t *s, int b, int64_t *r, int64_t *l);

/* Caps tokens for the rest of a period (grant_tokens()'s) at bucket b's
 * grant as a rate: R + L at most ceil((R + L of the grant) x share), where
 * share = (time left in the period + the burst depth) / the period, R
 * first (the rule of a limited bucket's headroom, docs/decisions.md
 * "Limits are rates with a depth").  Without it a node that falls back
 * late in a period serves the rest of the period's grant in the time left,
 * so a period-long window across the entry sees up to 1.6 x the grant.  A
 * grant without a limit is left as it is (R is a floor); share >= 1 or NaN
 * changes nothing, share < 0 counts as 0.  Returns 0, or -ENOENT before
 * any snapshot (nothing changed). */
int grant_pace(const grant_t *g, int b, double share, int64_t *r, int64_t *l);

#endif
