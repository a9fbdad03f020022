/* headroom.h - the node's dispatch rule behind its backend window (issue 25): while a bucket holding R-tokens is behind its pace, work not on a reservation fills the backend only up to window_open_limit(), so an R request finds a slot and a short FIFO ahead of it; otherwise the whole window, as before.
 *
 * One rule for bqos-node's gate (storage-node/io/gate.c) and bqos-sim
 * (workloads/sim/), so that the simulator runs the code the node runs.
 * The caller has checked that the window has room (inflight < limit). */
#ifndef BQOS_HEADROOM_H
#define BQOS_HEADROOM_H

#include "storage-node/core/sched.h"
#include "storage-node/core/window.h"

/* The next IO to send to the backend at `now`, or NULL: R work only once
 * the backend holds window_open_limit() IOs and some reservation is behind
 * (sched_r_behind(), asked only then: nothing is scanned while the window
 * has room for everything); every class otherwise.  Ownership as
 * sched_dispatch(). */
static inline sched_item_t *headroom_dispatch(sched_t *s, window_t *w, double now,
                                              sched_class_t *cls)
{
    int in = window_inflight(w);
    if (in >= window_open_limit(w, 1) && in >= window_open_limit(w, sched_r_behind(s, now))) {
        window_note_bounded(w);
        return sched_dispatch_r(s, now, cls);
    }
    return sched_dispatch(s, now, cls);
}

#endif
