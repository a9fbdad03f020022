/* test_clock.c - Check suite for controller/daemon/clock: intervals, round deadlines, skipped periods, timing fields and adoption of the nodes' clock. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>

#include "common/log.h"
#include "controller/daemon/clock.h"
#include "tests/testlib.h"

/* T = 1 s in K = 4 intervals of 0.25 s, rounds wait half an interval;
 * started at t = 10 (binary fractions: the arithmetic is exact). */
static void start(pclock_t *pc)
{
    pclock_init(pc, 1.0, 4, 0.5, 10.0);
}

/* start(), then the first round begins at now. */
static void start_at(pclock_t *pc, double now)
{
    start(pc);
    pclock_begin(pc, now);
}

/* Checks that pc is in interval `interval` of period `period`. */
static void expect_at(const pclock_t *pc, uint64_t period, uint32_t interval)
{
    ck_assert_uint_eq(pc->period, period);
    ck_assert_uint_eq(pc->interval, interval);
}

START_TEST(test_clock_rounds)
{
    pclock_t pc;
    start(&pc);
    ck_assert(pclock_due(&pc, 10.0)); /* no round yet */
    ck_assert_double_eq(pclock_begin(&pc, 10.0), 1.0);
    expect_at(&pc, 1, 0);
    ck_assert(pc.round_open);
    ck_assert(!pclock_due(&pc, 10.2));
    ck_assert(!pclock_expired(&pc, 10.0625));
    ck_assert(pclock_expired(&pc, 10.125));
    ck_assert_double_eq(pclock_next(&pc), 10.125); /* the deadline */
    pclock_report(&pc, 10.0625);
    ck_assert_double_eq(pclock_close(&pc, 10.125), 0.0625); /* to the last report */
    ck_assert(!pc.round_open);
    ck_assert_double_eq(pclock_next(&pc), 10.25); /* the next boundary */
    ck_assert(pclock_due(&pc, 10.25));
    ck_assert_double_eq(pclock_begin(&pc, 10.25), 0.75);
    ck_assert_uint_eq(pc.interval, 1);
    ck_assert_double_eq(pclock_since_boundary(&pc, 10.375), 0.125); /* how late a round is */
    ck_assert_double_eq(pclock_close(&pc, 10.5), 0.25); /* no report: to now */
}
END_TEST

START_TEST(test_clock_skips_periods)
{
    pclock_t pc;
    start_at(&pc, 10.0);
    ck_assert(pclock_due(&pc, 13.5));
    ck_assert_double_eq(pclock_begin(&pc, 13.5), 0.5);
    expect_at(&pc, 4, 2);
    ck_assert_double_eq(pc.period_start, 13.0);
}
END_TEST

START_TEST(test_clock_timing)
{
    pclock_t pc;
    start_at(&pc, 10.5);
    proto_msg_t m;
    proto_msg_init(&m);
    pclock_fill_timing(&pc, &m, 10.75);
    ck_assert(m.has_timing);
    ck_assert_uint_eq(m.period, 1);
    ck_assert_uint_eq(m.interval, 2);
    ck_assert_uint_eq(m.intervals, 4);
    ck_assert_uint_eq(m.period_ms, 1000);
    ck_assert_uint_eq(m.remaining_ms, 250);
    pclock_fill_timing(&pc, &m, 12.0); /* late: nothing left */
    ck_assert_uint_eq(m.remaining_ms, 0);
}
END_TEST

static pclock_reading_t rd(const pclock_t *pc, uint64_t period, uint32_t interval,
                           uint32_t remaining_ms, double now)
{
    return pclock_reading(pc, period, interval, remaining_ms, now);
}

START_TEST(test_clock_adopt)
{
    pclock_t pc;
    start_at(&pc, 10.0);
    pclock_reading_t r = rd(&pc, 0, 0, 0, 10.5);
    ck_assert(!pclock_adopt(&pc, &r, 10.5)); /* no clock given: not considered */
    r = rd(&pc, 7, 2, 250, 10.5);
    ck_assert(pclock_adopt(&pc, &r, 10.5));
    ck_assert_uint_eq(pc.period, 7);
    ck_assert_double_eq(pc.period_start, 9.75);
    ck_assert(!pc.round_open);
    ck_assert(pclock_due(&pc, 10.5));
    pclock_begin(&pc, 10.5);
    expect_at(&pc, 7, 3);
    /* a later majority within the window may move it again */
    r = rd(&pc, 3, 0, 900, 10.6);
    ck_assert(pclock_adopt(&pc, &r, 10.6));
    ck_assert_uint_eq(pc.period, 3);
    ck_assert_int_eq(pc.adopted, 2);
}
END_TEST

START_TEST(test_clock_adopt_own_or_late)
{
    pclock_t pc;
    start_at(&pc, 10.0);
    /* A node that follows our clock already: nothing to adopt. */
    pclock_reading_t r = rd(&pc, 1, 1, 750, 10.25);
    ck_assert(!pclock_adopt(&pc, &r, 10.25));
    ck_assert_uint_eq(pc.period, 1);
    start_at(&pc, 10.0);
    /* More than two periods after the start: too late to adopt. */
    r = rd(&pc, 9, 0, 500, 12.5);
    ck_assert(!pclock_adopt(&pc, &r, 12.5));
    ck_assert_uint_eq(pc.period, 1);
}
END_TEST

/* Issue 18, defect 3: one report of period 2^53 made the controller adopt
 * a period it could no longer encode. */
START_TEST(test_clock_implausible_period_never_adopted)
{
    pclock_t pc;
    start_at(&pc, 10.0);
    pclock_reading_t r = rd(&pc, UINT64_C(1) << 53, 0, 500, 10.1);
    ck_assert_uint_eq(r.period, 0);
    ck_assert(!pclock_adopt(&pc, &r, 10.1));
    r = (pclock_reading_t){PCLOCK_PERIOD_MAX + 1, 10.6};
    ck_assert(!pclock_adopt(&pc, &r, 10.1));
    ck_assert_uint_eq(pc.period, 1);
    r = rd(&pc, PCLOCK_PERIOD_MAX, 0, 500, 10.1);
    ck_assert(pclock_adopt(&pc, &r, 10.1));
    /* counting on from the largest adoptable period stays encodable */
    ck_assert(pc.period + UINT64_C(1000000000) < PROTO_MAX_COUNT);
}
END_TEST

/* Controller shards keep one phase (periods on multiples of the period of
 * the wall clock): a standby adopts the nodes' period numbering only from
 * a reading on its grid, snapped onto it; a reading off it (a node's
 * session that had idled said hello with the period it idled in, ended:
 * 100 ms left) is refused, and the clock does not move. */
START_TEST(test_clock_adopt_on_grid)
{
    pclock_t pc;
    start(&pc);
    pclock_set_grid(&pc);
    pclock_begin(&pc, 10.0);
    /* ends at 10.8 + 0.1: 0.1 s off the grid (boundaries at whole seconds) */
    pclock_reading_t r = rd(&pc, 7, 3, 100, 10.8);
    ck_assert(!pclock_adopt(&pc, &r, 10.8));
    ck_assert_uint_eq(pc.period, 1);
    ck_assert_double_eq(pc.period_start, 10.0);
    ck_assert_int_eq(pc.off_grid, 1);
    ck_assert_int_eq(pc.adopted, 0);
    /* 10 ms off (travel): taken, and snapped onto the grid */
    r = rd(&pc, 7, 3, 210, 10.8);
    ck_assert(pclock_adopt(&pc, &r, 10.8));
    ck_assert_uint_eq(pc.period, 7);
    ck_assert_double_eq(pc.period_start, 10.0);
    /* the same clock again: nothing to adopt */
    r = rd(&pc, 7, 3, 190, 10.8);
    ck_assert(!pclock_adopt(&pc, &r, 10.8));
    ck_assert_int_eq(pc.adopted, 1);
    /* without the grid the off reading moves the clock (the old rule) */
    start(&pc);
    pclock_begin(&pc, 10.0);
    r = rd(&pc, 7, 3, 100, 10.8);
    ck_assert(pclock_adopt(&pc, &r, 10.8));
    ck_assert_double_eq_tol(pc.period_start, 9.9, 1e-9);
}
END_TEST

START_TEST(test_clock_same)
{
    pclock_t pc;
    start_at(&pc, 10.0); /* interval 0.25 s */
    pclock_reading_t a = {5, 11.0}, b = {5, 11.06}, c = {5, 11.07}, d = {6, 11.0}, z = {0, 11.0};
    ck_assert(pclock_same(&pc, &a, &b));
    ck_assert(!pclock_same(&pc, &a, &c));
    ck_assert(!pclock_same(&pc, &a, &d));
    ck_assert(!pclock_same(&pc, &z, &z));
}
END_TEST

int main(void)
{
    bqos_log_init("test_clock", BQOS_LOG_ERROR);
    const TTest *const tests[] = {test_clock_rounds, test_clock_skips_periods, test_clock_timing,
                                  test_clock_adopt, test_clock_adopt_own_or_late,
                                  test_clock_implausible_period_never_adopted, test_clock_adopt_on_grid,
                                  test_clock_same};
    return testlib_run_tests("clock", tests, sizeof tests / sizeof tests[0]);
}
