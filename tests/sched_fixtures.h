/* sched_fixtures.h - what the scheduler and window suites (test_sched, test_pace, test_sched_bytes, test_window) share: a token scheduler with buckets b0..bN-1, a fixed backend window. */
#ifndef BQOS_SCHED_FIXTURES_H
#define BQOS_SCHED_FIXTURES_H

#include <check.h>
#include <stdio.h>

#include "storage-node/core/sched.h"
#include "storage-node/core/window.h"

/* A tokens-policy scheduler, pacing `pacing` with burst depth `burst` (s),
 * with nb buckets named b0..b(nb-1) at indices 0..nb-1.  Fails the test on
 * any error; the caller destroys it. */
static inline sched_t *sched_fixture_new(int nb, int pacing, double burst)
{
    sched_t *s = sched_new(SCHED_POLICY_TOKENS, 0);
    ck_assert_ptr_nonnull(s);
    ck_assert_int_eq(sched_set_pacing(s, pacing, burst), 0);
    for (int b = 0; b < nb; b++) {
        char name[16];
        snprintf(name, sizeof name, "b%d", b);
        ck_assert_int_eq(sched_add_bucket(s, name, 1), b);
    }
    return s;
}

/* A fixed (not adaptive) window of `size`, at least `floor` (0: the
 * default) and `headroom` slots kept for reserved buckets behind (-1: the
 * default).  Fails the test on any error; the caller destroys it. */
static inline window_t *window_fixture_fixed(int size, int floor, int headroom)
{
    window_config_t c;
    window_config_defaults(&c);
    c.adaptive = 0;
    c.start = c.ceiling = size;
    if (floor > 0)
        c.floor = floor;
    if (headroom >= 0)
        c.headroom = headroom;
    window_t *w = window_new(&c, 0, NULL);
    ck_assert_ptr_nonnull(w);
    return w;
}

#endif
