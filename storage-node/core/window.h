/* window.h - the adaptive backend window: how many IOs a node keeps at one
 * backend, found by a delay-based controller (FAST TCP / PARDA style).
 *
 * The node reports every IO sent to the backend (window_take()) and every
 * one that came back (window_done()), with the time.  The window measures,
 * over short epochs, the throughput X (completions per second) and, by
 * Little's law, the mean time an IO spends at the backend L = (integral of
 * the IOs outstanding over the epoch) / completions; no per-IO timestamp.
 * At the end of each epoch it updates
 *
 *     w' = (1 - gain) w + gain (target * base / L * w + alpha),
 *
 * clamped to [floor, ceiling], where base is the lowest L seen (or the
 * last L measured at the floor, so that a backend that became slower for
 * good gets a new base).  With target 1 this is FAST TCP's rule: at the
 * fixed point w (1 - base / L) = alpha, about alpha IOs wait at the
 * backend beyond what its throughput needs and the rest wait at the node,
 * where the scheduler orders them; a backend with flat latency up to k IOs
 * gets a window of k + alpha.  A target above 1 (PARDA's latency
 * threshold, relative to the base) lets the latency at the backend rise to
 * about target * base before the window stops growing: for a backend that
 * serves larger batches more efficiently (a multi-key get) throughput
 * keeps growing with latency, and target trades latency for it.  While
 * latency stays below target * base the window grows by up to gain *
 * ((target - 1) w + alpha) per epoch; above it, it shrinks in proportion.  The window grows only in epochs where it was filled (as TCP
 * grows a congestion window only when the flight reached it): a node whose
 * clients keep fewer IOs in flight than the window does not inflate it.
 *
 * The target may differ by epoch: `target` in epochs in which the node
 * served some IO on a reservation (window_note_reserved()), `target_open`
 * in the others, when the order at the node protects nothing the tokens do
 * not.
 *
 * No sockets, no clock of its own (times are passed in, seconds on any
 * monotonic clock), no threads: a window_t belongs to the thread that
 * drives it (the node's loop thread).  A fixed window (window_config_t
 * adaptive = 0) measures the same figures and never moves. */
#ifndef BQOS_WINDOW_H
#define BQOS_WINDOW_H

#include <stdint.h>

typedef struct {
    int adaptive;      /* 0: the window stays at `start` */
    int start;         /* the window at the beginning, clamped to [floor, ceiling] */
    int floor;         /* 1 <= floor <= ceiling */
    int ceiling;
    double gain;       /* share of the new estimate per epoch, 0 < gain <= 1 */
    double alpha;      /* IOs let wait at the backend at the fixed point, > 0 */
    double target;     /* latency aimed at, as a multiple of the base, >= 1 */
    double target_open; /* the same in epochs without window_note_reserved()
                           (nothing served on reservations), >= 1; below
                           target it counts as target */
    double epoch;      /* seconds an epoch lasts at least, > 0 */
    int min_samples;   /* completions an epoch needs at least (longer otherwise), >= 1 */
    int headroom;      /* window slots kept for R work per bucket behind its R
                          pace (window_open_limit(), issue 25), >= 0; 0: off */
} window_config_t;

/* What the window measured in its last epoch, and where it stands. */
typedef struct {
    int window;          /* IOs allowed at the backend now */
    int inflight;        /* IOs at the backend now */
    double latency;      /* mean seconds at the backend, last epoch (0: none yet) */
    double base;         /* base latency, seconds (0: none yet) */
    double throughput;   /* completions per second, last epoch */
    uint64_t epochs;     /* epochs ended so far */
} window_stats_t;

typedef struct window window_t;

/* Fills *cfg with the defaults: adaptive, start 2, floor 2, ceiling 64,
 * gain 0.5, alpha 8, target 1, target_open 1, epoch 10 ms, 32 samples,
 * headroom WINDOW_HEADROOM. */
void window_config_defaults(window_config_t *cfg);

/* Makes a window whose first epoch begins at `now`.  Returns it (caller
 * owns it; window_destroy()), or NULL and *err = -EINVAL (a setting out of
 * its range above) or -ENOMEM. */
window_t *window_new(const window_config_t *cfg, double now, int *err);

/* Frees *wp and sets it to NULL.  Accepts NULL. */
void window_destroy(window_t **wp);

/* IOs allowed at the backend now (floor..ceiling). */
int window_limit(const window_t *w);

/* IOs at the backend now (taken, not yet done or untaken). */
int window_inflight(const window_t *w);

/* One IO sent to the backend at `now`. */
void window_take(window_t *w, double now);

/* One IO from window_take() came back at `now`: counts a completion and
 * may end the epoch and move the window.  `now` may lie before the time of
 * the previous call (a completion the backend stamped before its callback
 * ran, after other IOs were taken or done): the IO then counts as
 * outstanding up to that previous time. */
void window_done(window_t *w, double now);

/* One IO from window_take() that the backend refused: it leaves without
 * counting as a completion. */
void window_untake(window_t *w, double now);

/* The IO just taken was served on a reservation (an R-token): this epoch
 * aims at `target`.  An epoch with none aims at `target_open`: when no
 * bucket draws on a reservation, the order at the node protects nothing the
 * tokens do not (limits hold by tokens whatever the window), so the window
 * may grow for throughput; while reservations are served, it keeps the
 * tighter target, and with it the node's hold on the order. */
void window_note_reserved(window_t *w);

/* Window slots kept for R work per bucket behind its R pace, by default. */
#ifndef WINDOW_HEADROOM
#define WINDOW_HEADROOM 8
#endif

/* Reserved headroom (issue 25): the IOs at the backend up to which the
 * node may send work that is not on a reservation (L, opportunistic)
 * while `behind` buckets holding R-tokens are behind their R pace
 * (sched_r_behind()); the slots beyond, up to window_limit(), take R
 * work only.  The backend serves its queue in FIFO order, so an R request
 * sent behind a window full of other work waits for all of it, and a
 * closed-loop client cannot reach its R however its tokens are placed;
 * with `headroom` slots per behind bucket kept free, its requests go to
 * the backend as they arrive.  window_limit() less behind x headroom, at
 * least 1; the window itself when behind <= 0 or headroom is 0 (nobody
 * behind: nothing kept, nothing lost). */
int window_open_limit(const window_t *w, int behind);

/* The fewest IOs at the backend the bound below keeps for other work. */
#ifndef WINDOW_NEED_FLOOR
#define WINDOW_NEED_FLOOR 2
#endif

/* Reserved headroom as far as the buckets behind need it (issue 25):
 * window_open_limit(w, behind), lowered to what the neediest bucket's
 * concurrency allows.  A client with K requests in flight at this node and
 * a paced R rate r reaches r only if each request comes back within K / r
 * (`slack`, sched_r_behind_slack()); the backend answers in about its base
 * latency plus the IOs queued beyond its pipe (base x X, X its throughput)
 * / X, so the IOs at the backend may be at most the pipe plus (slack -
 * base) x X = slack x X (Little's law: N IOs there take N / X once busy).  X is the larger of the last epoch's
 * throughput and that of the last epoch the bound did not hold (while it
 * holds, throughput is what it lets through).  At least WINDOW_NEED_FLOOR,
 * never above window_open_limit(); that limit itself while nothing is
 * measured yet (no base or throughput), `slack` is INFINITY, behind <= 0
 * or headroom is 0 (nobody behind: the whole window, as before). */
int window_need_limit(const window_t *w, int behind, double slack);

/* IOs kept at the backend beyond its pipe by window_pipe_limit(). */
#ifndef WINDOW_PIPE_SLACK
#define WINDOW_PIPE_SLACK 2
#endif

/* The backend's pipe (issue 25): base x X (X as window_need_limit()'s),
 * the IOs it serves at once at its base latency, rounded up, plus
 * WINDOW_PIPE_SLACK; at least WINDOW_NEED_FLOOR, at most window_limit();
 * window_limit() while nothing is measured yet or with headroom 0 (off:
 * the whole rule of headroom.h is then off, as before).  While a bucket holding R
 * is behind, the node keeps the backend here for every IO but that
 * bucket's: a request it sends then waits behind at most the slack, not
 * behind a FIFO the window's alpha fills (headroom.h). */
int window_pipe_limit(const window_t *w);

/* The node sent R work only, for window_open_limit() held the rest (the
 * slots beyond were kept for R work): this epoch counts as filled, so
 * that the window may still grow while the bound holds, and its latency
 * does not become the base (the IOs at the backend fell as the bound
 * began: area / completions understates the latency). */
void window_note_bounded(window_t *w);

/* Fills *out. */
void window_stats(const window_t *w, window_stats_t *out);

#endif
