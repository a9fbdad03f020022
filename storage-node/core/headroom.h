/* headroom.h - the node's dispatch rule behind its backend window (issue 25): while a bucket holding R-tokens is behind its pace, work not on a reservation fills the backend only up to window_need_limit() (what the neediest bucket's requests in flight allow), R work of any bucket up to the backend's pipe (window_pipe_limit()), and only the buckets behind beyond it, so their requests find a slot and a short FIFO ahead of them; otherwise the whole window, as before.
 *
 * One rule for bqos-node's gate (storage-node/io/gate.c) and bqos-sim
 * (workloads/sim/), so that the simulator runs the code the node runs.
 * The caller has checked that the window has room (inflight < limit). */
#ifndef BQOS_HEADROOM_H
#define BQOS_HEADROOM_H

#include "storage-node/core/sched.h"
#include "storage-node/core/window.h"

/* The next IO to send to the backend at `now`, or NULL.  While some
 * reservation is behind (sched_r_behind(), asked only once the backend
 * holds WINDOW_NEED_FLOOR: at most one scan per SCHED_BEHIND_SCAN, O(1) in
 * between and nothing at all while no bucket holds paced R-tokens): every
 * class below min(window_need_limit(), window_pipe_limit()) IOs at the
 * backend, R work of any bucket below window_pipe_limit(), and beyond it
 * only R work of the buckets behind (sched_dispatch_behind()), up to the
 * window: a closed-loop client behind its pace sees the backend's pipe
 * and a short queue, not a FIFO the window's alpha filled with other
 * buckets' work, whatever its class.  Nobody behind: every class up to
 * the window (nothing held, nothing lost).  The
 * IO returned counts as at the backend for its bucket, as every dispatched
 * IO does, until the caller's sched_note_done().  Ownership as
 * sched_dispatch(). */
static inline sched_item_t *headroom_dispatch(sched_t *s, window_t *w, double now,
                                              sched_class_t *cls)
{
    int in = window_inflight(w);
    int n;
    if (in < WINDOW_NEED_FLOOR || (n = sched_r_behind(s, now)) <= 0)
        return sched_dispatch(s, now, cls); /* nobody behind: the whole window */
    int pipe = window_pipe_limit(w);
    int need = window_need_limit(w, n, sched_r_behind_slack(s));
    need = need < pipe ? need : pipe;
    if (in < need)
        return sched_dispatch(s, now, cls);
    window_note_bounded(w);
    if (in < pipe)
        return sched_dispatch_r(s, now, cls); /* R work, of any bucket */
    return sched_dispatch_behind(s, now, cls); /* past the pipe: the buckets behind */
}

#endif
