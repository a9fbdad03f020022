/* headroom.h - the node's dispatch rule behind its backend window (issue 25): while a bucket holding R-tokens is behind its pace, work not on a reservation fills the backend only up to window_need_limit() (what the neediest bucket's requests in flight allow, at most window_open_limit()), so an R request finds a slot and a short FIFO ahead of it; otherwise the whole window, as before.
 *
 * One rule for bqos-node's gate (storage-node/io/gate.c) and bqos-sim
 * (workloads/sim/), so that the simulator runs the code the node runs.
 * The caller has checked that the window has room (inflight < limit). */
#ifndef BQOS_HEADROOM_H
#define BQOS_HEADROOM_H

#include "storage-node/core/sched.h"
#include "storage-node/core/window.h"

/* The next IO to send to the backend at `now`, or NULL: R work only once
 * the backend holds window_need_limit() IOs and some reservation is behind
 * (sched_r_behind(), asked only once the backend holds WINDOW_NEED_FLOOR:
 * at most one scan per SCHED_BEHIND_SCAN, O(1) in between and nothing at
 * all while no bucket holds paced R-tokens); every class otherwise.  The
 * IO returned counts as at the backend for its bucket, as every dispatched
 * IO does, until the caller's sched_note_done().  Ownership as
 * sched_dispatch(). */
static inline sched_item_t *headroom_dispatch(sched_t *s, window_t *w, double now,
                                              sched_class_t *cls)
{
    int in = window_inflight(w);
    sched_item_t *it;
    int n;
    if (in >= WINDOW_NEED_FLOOR && (n = sched_r_behind(s, now)) > 0 &&
        in >= window_need_limit(w, n, sched_r_behind_slack(s))) {
        window_note_bounded(w);
        it = sched_dispatch_r(s, now, cls);
    } else {
        it = sched_dispatch(s, now, cls);
    }
    return it;
}

#endif
