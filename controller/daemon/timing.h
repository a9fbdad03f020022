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

/* Upper bounds (seconds) of the round-time histograms, 1 ms to 1 s. */
#define TIMING_ROUND_BOUNDS {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}
#define TIMING_NBOUNDS 10

/* A histogram of round times: counts per bucket of TIMING_ROUND_BOUNDS
 * (not cumulative; the last: above 1 s) and their sum, seconds. */
typedef struct {
    uint64_t counts[TIMING_NBOUNDS + 1];
    double sum;
} timing_hist_t;

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
    timing_hist_t round;  /* closed rounds: compute + push (close to sent) */
    timing_hist_t compute; /* ... their token computation alone */
} timing_t;

#endif
