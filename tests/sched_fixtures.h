/* sched_fixtures.h - what the paced-scheduler suites (test_pace, test_sched_bytes) share: a token scheduler with pacing on and buckets b0..bN-1. */
#ifndef BQOS_SCHED_FIXTURES_H
#define BQOS_SCHED_FIXTURES_H

#include <check.h>
#include <stdio.h>

#include "storage-node/core/sched.h"

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

#endif
