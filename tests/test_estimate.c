/* test_estimate.c - Check suite for controller/estimate: demand estimates (incl. throttled backlog) and adaptive capacity estimation. */
#include <check.h>
#include <math.h>
#include <stdlib.h>

#include "common/rng.h"
#include "controller/estimate.h"
#include "tests/testlib.h"

/* One interval's counts given to estimate_demand() and the demand it must
 * return. */
typedef struct {
    uint64_t queued, arrivals;
    int throttled;
    double intervals;
    int64_t want;
} demand_step_t;

/* Feeds steps[0..n) to st in order, checking each demand. */
static void feed_demand(estimate_demand_t *st, const demand_step_t *steps, size_t n)
{
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(estimate_demand(st, steps[i].queued, steps[i].arrivals, steps[i].throttled,
                                      steps[i].intervals) == steps[i].want,
                      "step %zu: want %lld", i, (long long)steps[i].want);
}

START_TEST(test_estimate_demand_queue_plus_rate)
{
    estimate_demand_t st = {0};
    const demand_step_t steps[] = {
        {10, 100, 0, 3, 310}, /* 10 queued, 100 arrivals last interval, 3 intervals left */
        {0, 0, 0, 2, 0},
        {5, 0, 0, 0, 5},
        {0, 7, 0, 1.5, 11},
        {UINT64_MAX, UINT64_MAX, 0, 5, ESTIMATE_DEMAND_MAX},
    };
    feed_demand(&st, steps, sizeof steps / sizeof steps[0]);
}
END_TEST

START_TEST(test_estimate_demand_throttled_keeps_rate)
{
    estimate_demand_t st = {0};
    const demand_step_t steps[] = {
        {4, 1000, 0, 4, 4004},
        /* Throttled with a backlog: a closed-loop client could only send 3. */
        {4, 3, 1, 3, 3004},
        {4, 3, 1, 2, 2004},
        /* Not throttled any more: the real rate counts again. */
        {0, 3, 0, 2, 6},
    };
    feed_demand(&st, steps, sizeof steps / sizeof steps[0]);
    /* Throttled but no backlog: the client really slowed down. */
    estimate_demand_t s2 = {.rate = 500};
    feed_demand(&s2, &(demand_step_t){0, 10, 1, 1, 10}, 1);
}
END_TEST

/* The demand is queue + rate x intervals rounded as llround() does (half
 * away from zero), also at halves and near the largest value. */
START_TEST(test_estimate_demand_rounds_like_llround)
{
    const double il[] = {0.5, 1.5, 2.5, 0.2, 0.6, 1.0 / 3, 4.999999, 0.1234567};
    const uint64_t arr[] = {0, 1, 3, 7, 10, 999, 123457, UINT64_C(1) << 40, (UINT64_C(1) << 49) - 1};
    for (size_t i = 0; i < sizeof il / sizeof il[0]; i++)
        for (size_t a = 0; a < sizeof arr / sizeof arr[0]; a++)
            for (uint64_t q = 0; q < 3; q++) {
                estimate_demand_t st = {0};
                double d = (double)q + (double)arr[a] * il[i];
                int64_t want = d < (double)ESTIMATE_DEMAND_MAX ? (int64_t)llround(d)
                                                               : ESTIMATE_DEMAND_MAX;
                ck_assert_int_eq(estimate_demand(&st, q, arr[a], 0, il[i]), want);
            }
}
END_TEST

/* One interval fed to estimate_cap_update() and the estimate it must give. */
typedef struct {
    uint64_t completions;
    double busy_s, interval_s, want;
} cap_step_t;

/* Feeds steps[0..n) to c in order, checking each resulting estimate. */
static void feed_cap(estimate_cap_t *c, const cap_step_t *steps, size_t n)
{
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(estimate_cap_update(c, steps[i].completions, steps[i].busy_s,
                                          steps[i].interval_s) == steps[i].want,
                      "step %zu: estimate %g, want %g", i, c->estimate, steps[i].want);
}

/* c's counters: steps taken, samples averaged, intervals ignored. */
static void expect_cap_counts(const estimate_cap_t *c, uint64_t steps, uint64_t samples,
                              uint64_t ignored)
{
    ck_assert_uint_eq(c->steps, steps);
    ck_assert_uint_eq(c->samples, samples);
    ck_assert_uint_eq(c->ignored, ignored);
}

/* A capacity estimator with defaults for `profile`, or `window` if > 0,
 * without the clamp on its moves (these cases pin Haechi's plain mean). */
static void cap_start(estimate_cap_t *c, double profile, int window)
{
    estimate_cap_cfg_t cfg = estimate_cap_defaults(profile);
    cfg.max_change = 0;
    if (window > 0)
        cfg.window = window;
    estimate_cap_init(c, &cfg);
}

START_TEST(test_estimate_capacity_profile_and_step)
{
    estimate_cap_t c;
    cap_start(&c, 10000, 0);
    ck_assert_double_eq(c.estimate, 10000);
    const cap_step_t steps[] = {
        /* 0.2 s interval, served its estimate's worth busy less than half
         * of it: the estimate is low, step up 5%. */
        {2000, 0.09, 0.2, 10500},
        {2100, 0.09, 0.2, 11000},
    };
    feed_cap(&c, steps, sizeof steps / sizeof steps[0]);
    expect_cap_counts(&c, 2, 0, 0);
    const cap_step_t more[] = {
        /* Idle interval: ignored (not busy enough). */
        {10, 0.01, 0.2, 11000},
        /* Busy the whole interval but only 1600: capacity is 8000/s. */
        {1600, 0.2, 0.2, 8000},
        {1200, 0.2, 0.2, 7000},
        /* Below the floor (2500/s): a light-load artefact, ignored. */
        {400, 0.2, 0.2, 7000},
        /* Bad intervals change nothing. */
        {400, 0.2, 0, 7000},
    };
    feed_cap(&c, more, sizeof more / sizeof more[0]);
    expect_cap_counts(&c, 2, 2, 2);
}
END_TEST

/* A server busy the whole time at its real rate must not be stepped past
 * it (it would oscillate above its capacity): its busy rate is a sample. */
START_TEST(test_estimate_capacity_full_busy_no_overshoot)
{
    estimate_cap_t c;
    cap_start(&c, 20000, 0);
    for (int i = 0; i < 50; i++)
        feed_cap(&c, &(cap_step_t){20000, 1.0, 1.0, 20000}, 1);
    expect_cap_counts(&c, 0, 50, 0);
    /* Busy 90% at a higher rate: a sample, not a step past it. */
    feed_cap(&c, &(cap_step_t){20000, 0.9, 1.0, 20277.777777777777}, 1);
    /* Its estimate's worth busy only 40% of the time: step. */
    feed_cap(&c, &(cap_step_t){20000, 0.4, 1.0, 21277.777777777777}, 1);
}
END_TEST

START_TEST(test_estimate_capacity_window)
{
    estimate_cap_t c;
    cap_start(&c, 1000, 2);
    const cap_step_t steps[] = {
        {600, 1, 1, 600},
        {500, 1, 1, 550},
        {400, 1, 1, 450}, /* 600 dropped */
        /* Busy half the time at 400/s: sample 400. */
        {200, 0.5, 1, 400},
        /* Did far more than the estimate busy under half the time: jump to
         * what it demonstrably did. */
        {900, 0.45, 1, 900},
        {900, 0.45, 1, 950},
    };
    feed_cap(&c, steps, sizeof steps / sizeof steps[0]);
    estimate_cap_cfg_t cfg = estimate_cap_defaults(1000);
    cfg.window = 1000;
    cfg.profile = -5;
    estimate_cap_init(&c, &cfg);
    ck_assert_int_eq(c.cfg.window, ESTIMATE_WINDOW_MAX);
    ck_assert_double_eq(c.estimate, 1);
}
END_TEST

/* Feeds `n` intervals of 0.2 s of a server delivering `rate` IOs/s while
 * busy, +-10% noise per interval, busy 60..100% of the interval, to c
 * (defaults).  Returns the largest relative move of the estimate between
 * two intervals after the first `warm` and checks that the estimate and the
 * conservative capacity stay within their bounds around `rate` then. */
static double feed_noisy(estimate_cap_t *c, rng_t *r, double rate, int n, int warm)
{
    double worst = 0;
    for (int i = 0; i < n; i++) {
        double before = c->estimate;
        double busy = 0.2 * (0.6 + 0.4 * rng_uniform(r));
        double real = rate * (0.9 + 0.2 * rng_uniform(r));
        estimate_cap_update(c, (uint64_t)(real * busy), busy, 0.2);
        if (i < warm)
            continue;
        double move = fabs(c->estimate - before) / before;
        if (move > worst)
            worst = move;
        ck_assert_msg(fabs(c->estimate - rate) <= 0.1 * rate, "interval %d: estimate %g vs %g",
                      i, c->estimate, rate);
        ck_assert_msg(c->conservative <= c->estimate && c->conservative >= 0.8 * rate &&
                          c->conservative <= 1.0 * rate,
                      "interval %d: conservative %g, estimate %g, rate %g", i, c->conservative,
                      c->estimate, rate);
    }
    return worst;
}

/* Issue 14: on a steady server with noise the estimate holds within +-10%
 * of the delivered rate after the window has filled, never moves more than
 * 10% between intervals, and the conservative capacity (mean - 2 sd) sits
 * at or below the delivered rate. */
START_TEST(test_estimate_capacity_steady_under_noise)
{
    rng_t r;
    rng_seed(&r, 14, 0);
    estimate_cap_cfg_t cfg = estimate_cap_defaults(1000);
    cfg.k_sd = 2;
    estimate_cap_t c;
    estimate_cap_init(&c, &cfg);
    double worst = feed_noisy(&c, &r, 1000, 500, 8);
    ck_assert_msg(worst <= 0.1 + 1e-9, "largest move %g", worst);
    /* A profile 20% above the server's real rate: before any sample the
     * conservative capacity is still below what it delivers. */
    cfg = estimate_cap_defaults(1200);
    cfg.k_sd = 2;
    estimate_cap_init(&c, &cfg);
    ck_assert(c.conservative <= 1000);
    feed_noisy(&c, &r, 1000, 200, 10);
}
END_TEST

/* After a step change of capacity the estimate is within 10% of the new
 * rate within one window (8 sampled intervals), both ways. */
START_TEST(test_estimate_capacity_step_change_converges)
{
    static const double rates[] = {1000, 600, 1100};
    estimate_cap_cfg_t cfg = estimate_cap_defaults(1000);
    estimate_cap_t c;
    estimate_cap_init(&c, &cfg);
    for (size_t k = 0; k < sizeof rates / sizeof rates[0]; k++) {
        int n = 0;
        while (fabs(c.estimate - rates[k]) > 0.1 * rates[k]) {
            ck_assert_msg(n < 8, "rate %g: estimate %g after %d intervals", rates[k], c.estimate,
                          n);
            /* Busy the whole interval: every interval is a sample. */
            estimate_cap_update(&c, (uint64_t)(rates[k] * 0.2), 0.2, 0.2);
            n++;
        }
        for (int i = 0; i < 16; i++)
            estimate_cap_update(&c, (uint64_t)(rates[k] * 0.2), 0.2, 0.2);
        ck_assert(fabs(c.estimate - rates[k]) <= 1);
        ck_assert(c.conservative <= c.estimate);
    }
}
END_TEST

/* Issue 25: a server delivering 30k IOs/s, saturated (busy the whole
 * 200 ms interval), steps down to 15k.  The estimate (window mean, at most
 * 10% per update) is within 5% of 15k after 8 intervals (the window holds
 * only new samples; the clamp alone would allow it after 7); the
 * conservative capacity, held to the most delivered in the last 3
 * intervals, is at 15k after 3 and never above 30k's worth before. */
START_TEST(test_estimate_capacity_step_down_periods)
{
    estimate_cap_cfg_t cfg = estimate_cap_defaults(30000);
    estimate_cap_t c;
    estimate_cap_init(&c, &cfg);
    for (int i = 0; i < 16; i++)
        estimate_cap_update(&c, 6000, 0.2, 0.2);
    ck_assert_double_eq_tol(c.estimate, 30000, 1e-6);
    ck_assert_double_eq_tol(c.conservative, 30000, 1e-6);
    int n_est = 0, n_cons = 0;
    for (int i = 1; i <= 16; i++) {
        estimate_cap_update(&c, 3000, 0.2, 0.2);
        if (!n_est && c.estimate <= 1.05 * 15000)
            n_est = i;
        if (!n_cons && c.conservative <= 1.05 * 15000)
            n_cons = i;
        ck_assert(c.conservative <= c.estimate);
    }
    ck_assert_int_eq(n_est, 8);
    ck_assert_int_eq(n_cons, 3);
    ck_assert_double_eq_tol(c.estimate, 15000, 1e-6);
    ck_assert_double_eq_tol(c.conservative, 15000, 1e-6);
    /* Without the delivered cap (recent 0) the conservative capacity is
     * the estimate here (no spread in the window): 8 intervals too. */
    cfg.recent = 0;
    estimate_cap_init(&c, &cfg);
    for (int i = 0; i < 16; i++)
        estimate_cap_update(&c, 6000, 0.2, 0.2);
    n_cons = 0;
    for (int i = 1; i <= 16 && !n_cons; i++) {
        estimate_cap_update(&c, 3000, 0.2, 0.2);
        if (c.conservative <= 1.05 * 15000)
            n_cons = i;
    }
    ck_assert_int_eq(n_cons, 8);
}
END_TEST

/* The delivered cap follows what the server did, not the estimate: a
 * server stepping up (completions at its estimate in half the interval)
 * raises it with its delivered rate, and a noisy server's cap is the
 * largest of its last 3 samples, so it never binds below the window's
 * mean by more than the noise. */
START_TEST(test_estimate_capacity_delivered_cap)
{
    estimate_cap_cfg_t cfg = estimate_cap_defaults(1000);
    estimate_cap_t c;
    estimate_cap_init(&c, &cfg);
    /* Two samples at 900 and 1000, then one at 600. */
    estimate_cap_update(&c, 180, 0.2, 0.2);
    estimate_cap_update(&c, 200, 0.2, 0.2);
    estimate_cap_update(&c, 120, 0.2, 0.2);
    /* The window's mean (833) is below the cap (1,000): the cap is idle. */
    ck_assert_double_eq_tol(c.conservative, 2500.0 / 3, 1e-9);
    estimate_cap_update(&c, 120, 0.2, 0.2);
    estimate_cap_update(&c, 120, 0.2, 0.2); /* last 3: 600 each */
    ck_assert_double_eq_tol(c.conservative, 600, 1e-9);
    ck_assert(c.estimate > 700);
    /* Stepping: 200 IOs (its estimate's worth) in 0.05 s busy of 0.2 s:
     * delivered 1,000/s enters the last 3. */
    estimate_cap_update(&c, (uint64_t)(c.estimate * 0.2) + 1, 0.05, 0.2);
    ck_assert(c.steps == 1);
    ck_assert(c.conservative > 600);
}
END_TEST

/* Issue 25: the confined capacity (what R is placed within on a server a
 * single-server bucket depends on) follows a step down of a busy server
 * within one interval: 10,000 IOs/s steps to 6,000, and after the first
 * slow interval it is 6,000 while the conservative capacity is still
 * above 9,000 (it takes 3).  Noise does not move it: +-10% around the
 * rate, or an interval busy only 80% of the time at half the rate (a
 * partly idle server, not a slow one), leave it at the conservative
 * capacity; and it is back there at the first interval that is not a
 * drop (it keeps no history).  With the delivered cap off (recent 0) it
 * is the conservative capacity. */
START_TEST(test_estimate_capacity_confined_follows_step_down)
{
    estimate_cap_cfg_t cfg = estimate_cap_defaults(10000);
    estimate_cap_t c;
    estimate_cap_init(&c, &cfg);
    ck_assert_double_eq(c.confined, c.conservative);
    rng_t r;
    rng_seed(&r, 25, 0);
    for (int i = 0; i < 64; i++) {
        double rate = 10000 * (0.9 + 0.2 * rng_uniform(&r));
        estimate_cap_update(&c, (uint64_t)(rate * 0.2), 0.2, 0.2);
        ck_assert_msg(c.confined == c.conservative, "noise, interval %d: confined %g, cons %g", i,
                      c.confined, c.conservative);
    }
    /* Partly idle at half the rate: not a step. */
    double before = c.conservative;
    estimate_cap_update(&c, 800, 0.16, 0.2);
    ck_assert_double_eq(c.confined, c.conservative);
    ck_assert(c.confined >= 0.9 * before);
    /* Steady again, then the step: one interval. */
    for (int i = 0; i < 8; i++)
        estimate_cap_update(&c, 2000, 0.2, 0.2);
    ck_assert_double_eq_tol(c.conservative, 10000, 1e-6);
    estimate_cap_update(&c, 1200, 0.2, 0.2);
    ck_assert_double_eq_tol(c.confined, 6000, 1e-6);
    ck_assert(c.conservative >= 9000);
    for (int i = 2; i <= 3; i++) {
        estimate_cap_update(&c, 1200, 0.2, 0.2);
        ck_assert_double_eq_tol(c.confined, 6000, 1e-6);
        ck_assert_msg((i < 3) == (c.conservative > 6000 * 1.05), "interval %d: cons %g", i,
                      c.conservative);
    }
    /* Converged: both at the new rate; back up, the confined capacity is
     * the conservative one at once. */
    for (int i = 0; i < 16; i++)
        estimate_cap_update(&c, 1200, 0.2, 0.2);
    ck_assert_double_eq_tol(c.confined, 6000, 1e-6);
    ck_assert_double_eq_tol(c.conservative, 6000, 1e-6);
    estimate_cap_update(&c, 2000, 0.2, 0.2);
    ck_assert_double_eq(c.confined, c.conservative);
    ck_assert(c.confined > 6000);
    /* Off with the delivered cap. */
    cfg.recent = 0;
    estimate_cap_init(&c, &cfg);
    for (int i = 0; i < 8; i++)
        estimate_cap_update(&c, 2000, 0.2, 0.2);
    estimate_cap_update(&c, 1200, 0.2, 0.2);
    ck_assert_double_eq(c.confined, c.conservative);
    ck_assert(c.confined >= 9000);
}
END_TEST

START_TEST(test_estimate_changed_threshold)
{
    ck_assert(!estimate_changed(100, 105, 0.1, 2));
    ck_assert(estimate_changed(100, 120, 0.1, 2));
    ck_assert(!estimate_changed(1, 2, 0.1, 2)); /* small counts: noise */
    ck_assert(estimate_changed(0, 10, 0.1, 2));
    ck_assert(estimate_changed(100, 50, 0.1, 2));
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {test_estimate_demand_queue_plus_rate,
                                  test_estimate_demand_throttled_keeps_rate,
                                  test_estimate_demand_rounds_like_llround,
                                  test_estimate_capacity_profile_and_step,
                                  test_estimate_capacity_window,
                                  test_estimate_capacity_full_busy_no_overshoot,
                                  test_estimate_capacity_steady_under_noise,
                                  test_estimate_capacity_step_change_converges,
                                  test_estimate_capacity_step_down_periods,
                                  test_estimate_capacity_delivered_cap,
                                  test_estimate_capacity_confined_follows_step_down,
                                  test_estimate_changed_threshold};
    return testlib_run_tests("estimate", tests, sizeof tests / sizeof tests[0]);
}
