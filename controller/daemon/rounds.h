/* rounds.h - bqos-controller's round cadence: a round opens at each interval boundary and closes when every up node has reported or the report wait ran out (then the tokens are computed and pushed), with its timing, its lateness, and the push at once on a takeover.
 *
 * A rounds_t belongs to the controller's loop thread, as do the ctrl_t,
 * clock, node endpoint and metrics it borrows; nothing locks. */
#ifndef BQOS_ROUNDS_H
#define BQOS_ROUNDS_H

#include "controller/ctrl.h"
#include "controller/daemon/clock.h"
#include "controller/daemon/metrics.h"
#include "controller/daemon/nodes.h"
#include "controller/daemon/timing.h"

typedef struct {
    ctrl_t *ctrl;          /* borrowed, as the next three */
    pclock_t *clk;         /* the period clock the rounds follow */
    nodes_t *nodes;        /* pushes each round's tokens */
    cmetrics_t *met;       /* told when a period ends */
    timing_t tm;           /* owned: where the rounds' time goes; the node
                              endpoint adds to tm.cur, the admin status and
                              the metrics read it */
    /* Called when a new period begins, before its first round's
     * ctrl_round_begin() (the clock already moved to it); may be NULL.
     * bqos-controller's K change at run time gives ctrl the shard's new
     * part here (controller/reshard.h). */
    void (*period_hook)(void *arg, double now);
    void *hook_arg;
} rounds_t;

/* Sets up r around what it borrows, with zero timing.  `met` may be set
 * later (before the first rounds_tick()).  Cannot fail. */
void rounds_init(rounds_t *r, ctrl_t *ctrl, pclock_t *clk, nodes_t *nodes, cmetrics_t *met);

/* Moves the clock to `now` (monotonic seconds): at an interval boundary
 * closes the open round (if any; a round that begins more than half an
 * interval late is counted and, once a period, warned about) and opens
 * the next one (ctrl_round_begin(); a new period ends the metrics'
 * period); then closes the open round if its report wait expired or every
 * up node has reported.  Closing a round: its lateness goes to
 * ctrl_round_late(), ctrl_compute() runs (on error the nodes keep their
 * tokens: heartbeats are pushed), nodes_push() sends, and the round's
 * time split and CPU are added to r->tm. */
void rounds_tick(rounds_t *r, double now);

/* This controller just became the leader: pushes the current round's
 * tokens now rather than at the next boundary, so that the nodes hear the
 * new epoch within the takeover time (closing the open round, or
 * computing again from the reports received as a standby).  Nothing if
 * no round has begun yet or one begins now (rounds_tick() pushes it). */
void rounds_push_now(rounds_t *r, double now);

#endif
