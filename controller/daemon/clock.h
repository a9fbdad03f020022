/* clock.h - bqos-controller's period clock: where "now" falls in the QoS periods and their redistribution intervals, when a round opens and closes, and adoption of the nodes' clock after a restart.
 *
 * No sockets and no clock reads: every function takes `now` (monotonic
 * seconds, common/mono.h) from the caller.  A pclock_t belongs to the
 * controller's loop thread; nothing locks.  (The prefix is pclock_, for
 * "period clock": clock_ is the C library's.)
 *
 * The loop's use, at every wake-up:
 *   if (pclock_due(pc, now)) {       a new interval (or the first one)
 *       if (pc->round_open)  ...close the round: pclock_close(pc, now)...
 *       left = pclock_begin(pc, now); ctrl_round_begin(..., left)
 *   }
 *   if (pc->round_open && (pclock_expired(pc, now) || all nodes reported))
 *       ...close the round...
 *   sleep until pclock_next(pc)
 */
#ifndef BQOS_CLOCK_H
#define BQOS_CLOCK_H

#include <stdint.h>

#include "common/proto.h"

typedef struct {
    double period_s;       /* QoS period T, seconds (> 0) */
    int intervals;         /* K >= 1 redistribution intervals per period */
    double wait;           /* how long a round waits for reports, as a
                              fraction of an interval (0..1) */
    double started;        /* when the clock started */
    double period_start;   /* start of the current period */
    uint64_t period;       /* current period number (first: 1) */
    uint32_t interval;     /* current interval, 0..K-1 */
    int adopted;           /* times the nodes' clock was adopted */
    int grid;              /* periods keep the phase they started with
                              (pclock_set_grid()) */
    double origin;         /* with grid: a period boundary (pclock_init's now) */
    int off_grid;          /* readings refused for their phase (grid) */
    int round_open;        /* a round waits for reports */
    double round_start;    /* when the current round began; 0: none yet */
    double round_deadline; /* when it computes with what has arrived */
    double last_report;    /* when its last report arrived; 0: none */
} pclock_t;

/* Starts the clock at `now`: period 1 begins, no round is open (the first
 * pclock_due() is true).  `period_s` > 0, `intervals` >= 1, `wait` 0..1. */
void pclock_init(pclock_t *pc, double period_s, int intervals, double wait, double now);

/* Length of one redistribution interval in seconds (T / K). */
double pclock_interval_s(const pclock_t *pc);

/* Seconds from the current interval's boundary to `now` (more than one
 * interval once the next boundary has passed). */
double pclock_since_boundary(const pclock_t *pc, double now);

/* Nonzero if `now` lies in another interval than the current round's, or
 * if no round has begun yet: the caller closes the open round (if any)
 * and calls pclock_begin(). */
int pclock_due(const pclock_t *pc, double now);

/* Moves the clock to the interval that holds `now` (whole periods skipped
 * if the loop slept through them) and opens its round, with its deadline
 * `wait` intervals (at least 1 ms) ahead.  Returns the fraction of the
 * period still to run, (0..1], for ctrl_round_begin(). */
double pclock_begin(pclock_t *pc, double now);

/* Nonzero if the open round's deadline has passed at `now`. */
int pclock_expired(const pclock_t *pc, double now);

/* Notes that a report arrived at `now` (the round's receive time ends at
 * its last report). */
void pclock_report(pclock_t *pc, double now);

/* Closes the open round at `now`.  Returns its receive time: from its
 * start to its last report, or to `now` if none came. */
double pclock_close(pclock_t *pc, double now);

/* When the loop must wake next: the open round's deadline, or else the
 * next interval boundary. */
double pclock_next(const pclock_t *pc);

/* Fills the timing fields of a message to a node (period, interval,
 * intervals, period length and the milliseconds left in the period, as
 * seen at `now`) and sets m->has_timing. */
void pclock_fill_timing(const pclock_t *pc, proto_msg_t *m, double now);

/* One node's clock as the controller last saw it: its period number and
 * when (on our monotonic clock) that period ends.  period 0: none. */
typedef struct {
    uint64_t period;
    double end;
} pclock_reading_t;

/* Largest period number adopted from a node: far beyond any real run
 * (2^52 periods of 1 ms), and far enough below PROTO_MAX_COUNT that our own
 * counting on from it can always be encoded. */
#define PCLOCK_PERIOD_MAX (PROTO_MAX_COUNT / 2)

/* The reading a message gives at `now`: period `period`, interval
 * `interval`, `remaining_ms` left (0 if unknown: the middle of the
 * interval is assumed).  Returns period 0 for a period of 0 or beyond
 * PCLOCK_PERIOD_MAX (implausible: never adopted, never a vote). */
pclock_reading_t pclock_reading(const pclock_t *pc, uint64_t period, uint32_t interval,
                                uint32_t remaining_ms, double now);

/* Nonzero if two readings are one clock: the same period, ending within a
 * quarter interval of each other (what a report's travel time and the
 * nodes' own scheduling can move). */
int pclock_same(const pclock_t *pc, const pclock_reading_t *a, const pclock_reading_t *b);

/* Keeps the clock's phase for good: its periods start where pclock_init()
 * started one, plus whole periods (a controller shard's periods start on
 * multiples of --period of the wall clock, the same instant at every
 * shard, and a node's sessions to them share one scheduler period).
 * pclock_adopt() then takes only a reading whose period ends within a
 * quarter interval of that grid, and snaps it onto the grid. */
void pclock_set_grid(pclock_t *pc);

/* A controller that just started takes the period numbering and phase of
 * its nodes, so the nodes' period counters stay valid across its restart.
 * The caller (nodes.c) offers only a reading that a strict majority of the
 * registered nodes that gave a clock agree on (pclock_same), so one node
 * cannot move the clock of many; `r` must come from pclock_reading() (an
 * implausible period is never adopted).  Considered within 2 periods of
 * the start, and only if `r` differs from our clock; a later majority may
 * move it again in that window (a first, lone liar is outvoted as the
 * other nodes register).  With pclock_set_grid(), a reading off the grid
 * is refused (counted in off_grid; the first one logged).  Returns nonzero
 * if the clock moved: no round is
 * open then, and the caller runs its tick at once. */
int pclock_adopt(pclock_t *pc, const pclock_reading_t *r, double now);

#endif
