/* timing.h - bqos-controller's round timing: where each round's wall time goes, filled by the rounds (rounds.c) and nodes.c, read by the admin status and the metrics. Types only.
 *
 * Owned by the loop thread (a rounds_t holds it), like everything in the
 * daemon. */
#ifndef BQOS_TIMING_H
#define BQOS_TIMING_H

#include <stdint.h>

#include "controller/ctrl.h"

/* Time split of one round, seconds. */
typedef struct {
    double receive, decode, pshift, encode, send;
} split_t;

typedef struct {
    split_t cur;          /* the open round, so far */
    split_t last;         /* the last closed round */
    split_t total;        /* sum over the closed rounds */
    uint64_t nsplits;     /* closed rounds */
    double cpu_mark;      /* process CPU seconds (all threads) at the last close */
    double cpu_total;     /* ... between the first and the last close */
    ctrl_result_t last_res; /* the last round's outcome */
    uint64_t late_rounds; /* rounds begun more than half an interval after
                             their boundary (a starved or paused host) */
    double late_max;      /* the latest of them, seconds after the boundary */
    uint64_t late_logged_period; /* the period of the last warning */
} timing_t;

#endif
