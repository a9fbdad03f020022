/* test_window.c - Check suite for storage-node/core/window: the adaptive window on a simulated backend with a known knee (converges near it, a latency target above the base, shrinks when latency rises, stays within floor and ceiling, steady under noise, does not grow without demand). */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <string.h>

#include "common/rng.h"
#include "storage-node/core/window.h"
#include "tests/sched_fixtures.h"
#include "tests/testlib.h"

/* A backend with `knee` servers of service time `svc` seconds (each IO
 * takes svc * (1 +- noise)): flat latency up to `knee` IOs outstanding,
 * queueing beyond (FIFO, the first free server).  `clients` closed-loop
 * clients with no think time keep their IOs coming. */
typedef struct {
    int knee, clients;
    double svc, noise;
    double t;                /* simulated time, seconds */
    double free_at[1024];    /* each server's next free time */
    double done_at[1024];    /* each outstanding IO's completion time */
    int n;                   /* IOs outstanding */
    rng_t rng;
    uint64_t completions;
} sim_t;

static void sim_init(sim_t *s, int knee, double svc, double noise, int clients)
{
    memset(s, 0, sizeof *s);
    s->knee = knee;
    s->svc = svc;
    s->noise = noise;
    s->clients = clients;
    rng_seed(&s->rng, 42, 7);
}

/* Runs the node's loop for `secs` simulated seconds: sends what the window
 * allows, then advances to the next completion.  Checks the window's
 * bounds at every step; returns the mean window over the run (time
 * weighted) and sets *tput to the completions per second. */
static double sim_run(sim_t *s, window_t *w, double secs, int floor, int ceiling, double *tput)
{
    double end = s->t + secs, wsum = 0;
    int out = 0;
    uint64_t c0 = s->completions;
    while (s->t < end) {
        while (s->n < window_limit(w) && s->n < s->clients) {
            int k = 0;
            for (int i = 1; i < s->knee; i++)
                if (s->free_at[i] < s->free_at[k])
                    k = i;
            double start = s->free_at[k] > s->t ? s->free_at[k] : s->t;
            double d = s->svc * (1 + s->noise * (2 * rng_uniform(&s->rng) - 1));
            s->free_at[k] = start + d;
            s->done_at[s->n++] = start + d;
            window_take(w, s->t);
        }
        int j = 0;
        for (int i = 1; i < s->n; i++)
            if (s->done_at[i] < s->done_at[j])
                j = i;
        double next = s->done_at[j];
        wsum += window_limit(w) * (next - s->t);
        s->t = next;
        s->done_at[j] = s->done_at[--s->n];
        s->completions++;
        window_done(w, s->t);
        if (window_limit(w) < floor || window_limit(w) > ceiling)
            out++; /* (a Check assertion per step would cost a write each) */
    }
    ck_assert_msg(out == 0, "%d steps out of [%d, %d]", out, floor, ceiling);
    *tput = (double)(s->completions - c0) / secs;
    return wsum / secs;
}

static window_t *make(int floor, int ceiling, double alpha)
{
    window_config_t c;
    window_config_defaults(&c);
    c.floor = floor;
    c.ceiling = ceiling;
    c.alpha = alpha;
    c.start = floor;
    int err = 0;
    window_t *w = window_new(&c, 0, &err);
    ck_assert_msg(w != NULL, "window_new: %d", err);
    return w;
}

/* The usual window (floor 2, ceiling 64, alpha 8) on a 100 us backend of
 * the given knee, noise and clients (see sim_init()), after 2 simulated
 * seconds to settle; sets *tput to the throughput of those seconds. */
static window_t *settled(sim_t *s, int knee, double noise, int clients, double *tput)
{
    sim_init(s, knee, 100e-6, noise, clients);
    window_t *w = make(2, 64, 8);
    sim_run(s, w, 2, 2, 64, tput);
    return w;
}

/* Knee 16, 100 us: the window settles at about knee + alpha (the fixed
 * point w (1 - base / L) = alpha with L = w svc / knee), far below the
 * ceiling, and the backend runs at its full rate. */
START_TEST(test_window_converges_to_knee)
{
    sim_t s;
    double tput;
    window_t *w = settled(&s, 16, 0, 1000, &tput);
    double mean = sim_run(&s, w, 1, 2, 64, &tput);
    ck_assert_msg(mean >= 16 && mean <= 16 + 8 + 2, "mean window %.1f", mean);
    ck_assert_msg(tput >= 0.97 * 16 / 100e-6, "throughput %.0f", tput);
    window_stats_t st;
    window_stats(w, &st);
    ck_assert_msg(fabs(st.base - 100e-6) < 5e-6, "base %g", st.base);
    ck_assert_double_le(st.latency, 1.7 * st.base); /* a few IOs wait at the backend, not all */
    window_destroy(&w);
    ck_assert_ptr_null(w);
}
END_TEST

/* target 2: the latency at the backend may rise to twice the base, so on
 * the same backend the window settles at about 2 * knee + alpha. */
START_TEST(test_window_latency_target)
{
    sim_t s;
    sim_init(&s, 16, 100e-6, 0, 1000);
    window_config_t c;
    window_config_defaults(&c);
    c.target = 2;
    c.alpha = 2;
    window_t *w = window_new(&c, 0, NULL);
    ck_assert_ptr_nonnull(w);
    double tput;
    sim_run(&s, w, 2, 2, 64, &tput);
    double mean = sim_run(&s, w, 1, 2, 64, &tput);
    ck_assert_msg(mean >= 32 && mean <= 32 + 2 + 2, "mean window %.1f", mean);
    window_stats_t st;
    window_stats(w, &st);
    ck_assert_msg(st.latency > 1.9 * st.base && st.latency < 2.3 * st.base, "latency %g, base %g",
                  st.latency, st.base);
    window_destroy(&w);
}
END_TEST

/* The backend gets slower (its knee drops from 32 to 8, as when another
 * tenant of the disk takes most of it): latency rises above the base and
 * the window shrinks to the new knee + alpha. */
START_TEST(test_window_shrinks_when_latency_rises)
{
    sim_t s;
    sim_init(&s, 32, 100e-6, 0, 1000);
    window_t *w = make(2, 64, 4);
    double tput;
    double before = sim_run(&s, w, 2, 2, 64, &tput);
    ck_assert_msg(before >= 32 && before <= 32 + 4 + 2, "before %.1f", before);
    s.knee = 8;
    sim_run(&s, w, 1, 2, 64, &tput);
    double after = sim_run(&s, w, 1, 2, 64, &tput);
    ck_assert_msg(after >= 8 && after <= 8 + 4 + 2, "after %.1f", after);
    ck_assert_msg(tput >= 0.97 * 8 / 100e-6, "throughput %.0f", tput);
    window_destroy(&w);
}
END_TEST

/* A knee beyond the ceiling: the window stops at the ceiling; a knee
 * below the floor: it stays at the floor, where the latency seen becomes
 * the base, or alpha above it (sim_run() checks every step). */
START_TEST(test_window_within_floor_and_ceiling)
{
    sim_t s;
    double tput;
    sim_init(&s, 500, 100e-6, 0, 1000);
    window_t *w = make(2, 40, 8);
    double mean = sim_run(&s, w, 2, 2, 40, &tput);
    ck_assert_int_eq(window_limit(w), 40);
    ck_assert_double_gt(mean, 35);
    window_destroy(&w);

    sim_init(&s, 1, 100e-6, 0, 1000);
    w = make(20, 64, 2);
    sim_run(&s, w, 1, 20, 64, &tput);
    ck_assert_int_ge(window_limit(w), 20);
    ck_assert_int_le(window_limit(w), 20 + 2 + 1);
    window_destroy(&w);
}
END_TEST

/* Service times +-30% at random: the window stays near knee + alpha and
 * does not swing (every epoch's window within a band). */
START_TEST(test_window_steady_under_noise)
{
    sim_t s;
    double tput;
    window_t *w = settled(&s, 16, 0.3, 1000, &tput);
    int lo = 1000, hi = 0;
    for (int i = 0; i < 100; i++) {
        double mean = sim_run(&s, w, 0.01, 2, 64, &tput);
        lo = mean < lo ? (int)mean : lo;
        hi = mean > hi ? (int)ceil(mean) : hi;
    }
    ck_assert_msg(lo >= 14 && hi <= 16 + 8 + 6, "window between %d and %d", lo, hi);
    ck_assert_msg(tput >= 0.9 * 16 / 100e-6, "throughput %.0f", tput);
    window_destroy(&w);
}
END_TEST

/* Five clients only: the window is never filled beyond them, so it does
 * not grow toward the ceiling. */
START_TEST(test_window_no_growth_without_demand)
{
    sim_t s;
    double tput;
    window_t *w = settled(&s, 32, 0, 5, &tput);
    ck_assert_int_le(window_limit(w), 5 + 8);
    ck_assert_msg(tput >= 0.99 * 5 / 100e-6, "throughput %.0f", tput);
    window_destroy(&w);
}
END_TEST

/* An inline batching backend, as bqos-node's memcached front drives it:
 * the node sends what the window allows as one batch; the backend answers
 * the whole batch after a + b n seconds; then the node's loop runs the n
 * callbacks one after the other, c seconds each (writing each reply), and
 * only then sends the next batch.  Clients always have more waiting.
 * `stamped`: window_done() gets the time the backend answered (the
 * backend's stamp, gate_done_at()); otherwise the time each callback runs.
 * `reserved`: every IO is served on a reservation (window_note_reserved()).
 * Runs `secs` seconds from *clock (simulated time, carried from call to
 * call: a window's clock never goes back) and advances it; returns the
 * mean window. */
static double run_batches_r(window_t *w, double *clock, double secs, int stamped, int reserved,
                            double *latency)
{
    const double a = 60e-6, b = 4e-6, c = 8e-6;
    double t = *clock, t0 = t, wsum = 0;
    while (t < t0 + secs) {
        int n = window_limit(w);
        double start = t;
        for (int i = 0; i < n; i++) {
            window_take(w, t);
            if (reserved)
                window_note_reserved(w);
        }
        double answered = t + a + b * n;
        t = answered;
        for (int i = 0; i < n; i++) {
            t += c;
            window_done(w, stamped ? answered : t);
        }
        wsum += n * (t - start);
    }
    window_stats_t st;
    window_stats(w, &st);
    *latency = st.latency;
    *clock = t;
    return wsum / (t - t0);
}

static double run_batches(window_t *w, double *clock, double secs, int stamped, double *latency)
{
    return run_batches_r(w, clock, secs, stamped, 0, latency);
}

/* With the backend's stamp the window sees the backend's own latency
 * (a + b n for a batch of n, the fixed point n (1 - base / L) = alpha
 * gives n of about 17 with these figures); with the callbacks' times it
 * also sees the loop's c per earlier reply, which grows with n, and
 * settles lower (about 14.4: the batches get smaller, the node's
 * per-request cost larger).  A stamp before the window's last mark (completions of one
 * batch delivered after others were taken) leaves the area consistent:
 * the latency measured is the batch's round trip exactly. */
START_TEST(test_window_backend_stamp)
{
    double lat_stamped, lat_loop, clock = 0;
    window_t *w = make(2, 64, 8);
    run_batches(w, &clock, 1, 1, &lat_stamped);
    double stamped = run_batches(w, &clock, 1, 1, &lat_stamped);
    window_destroy(&w);
    clock = 0;
    w = make(2, 64, 8);
    run_batches(w, &clock, 1, 0, &lat_loop);
    double loop = run_batches(w, &clock, 1, 0, &lat_loop);
    window_destroy(&w);
    /* n (1 - (a + 2b) / (a + b n)) = 8  =>  n = 18.4 (the floor's base) */
    ck_assert_msg(stamped >= 16 && stamped <= 21, "stamped: mean window %.1f", stamped);
    ck_assert_msg(fabs(lat_stamped - (60e-6 + 4e-6 * stamped)) < 6e-6, "stamped latency %g at %.1f",
                  lat_stamped, stamped);
    ck_assert_msg(loop < stamped - 1.5, "callback times: window %.1f, stamped %.1f", loop, stamped);
}
END_TEST

/* target_open 2 on the same batching backend: epochs with no IO served
 * on a reservation aim at twice the base (a + b n = 2 (a + 2 b): n about
 * 23, plus what alpha adds: n (1 - 2 (a + 2 b) / (a + b n)) = 8 gives
 * 33.6), epochs with one aim at target 1 (about 18, as above).  When
 * reservations come back the window shrinks to the tighter target. */
START_TEST(test_window_open_target)
{
    window_config_t c;
    window_config_defaults(&c);
    c.target_open = 2;
    double clock = 0;
    window_t *w = window_new(&c, 0, NULL);
    ck_assert_ptr_nonnull(w);
    double lat;
    run_batches_r(w, &clock, 1, 1, 0, &lat);
    double open = run_batches_r(w, &clock, 1, 1, 0, &lat);
    ck_assert_msg(open >= 30 && open <= 37, "open: mean window %.1f", open);
    run_batches_r(w, &clock, 1, 1, 1, &lat);
    double reserved = run_batches_r(w, &clock, 1, 1, 1, &lat);
    ck_assert_msg(reserved >= 16 && reserved <= 21, "reserved: mean window %.1f", reserved);
    window_destroy(&w);
    /* below target, target_open counts as target */
    window_config_defaults(&c);
    c.target = 2;
    c.target_open = 1;
    clock = 0;
    w = window_new(&c, 0, NULL);
    ck_assert_ptr_nonnull(w);
    run_batches_r(w, &clock, 1, 1, 0, &lat);
    open = run_batches_r(w, &clock, 1, 1, 0, &lat);
    ck_assert_msg(open >= 30 && open <= 37, "target 2: mean window %.1f", open);
    window_destroy(&w);
}
END_TEST

/* adaptive = 0: the window never moves but still measures. */
START_TEST(test_window_fixed)
{
    window_t *w = window_fixture_fixed(5, 1, -1);
    sim_t s;
    sim_init(&s, 2, 100e-6, 0, 1000);
    double tput;
    sim_run(&s, w, 1, 5, 5, &tput);
    window_stats_t st;
    window_stats(w, &st);
    ck_assert_int_eq(st.window, 5);
    ck_assert_uint_gt(st.epochs, 10);
    ck_assert_msg(fabs(st.latency - 250e-6) < 10e-6, "latency %g", st.latency); /* 5 IOs on 2 servers */
    ck_assert_msg(fabs(st.throughput - 20000) < 500, "throughput %g", st.throughput);
    window_destroy(&w);
}
END_TEST

START_TEST(test_window_bad_settings)
{
    window_config_t ok, c;
    window_config_defaults(&ok);
    int err = 0;
    window_t *w = window_new(&ok, 0, &err);
    ck_assert_ptr_nonnull(w);
    ck_assert_int_eq(window_limit(w), 2);
    window_destroy(&w);
    window_destroy(&w);       /* NULL is fine */
    window_destroy(NULL);
    c = ok, c.floor = 0;
    ck_assert_ptr_null(window_new(&c, 0, &err));
    ck_assert_int_eq(err, -EINVAL);
    c = ok, c.ceiling = 1;
    ck_assert_ptr_null(window_new(&c, 0, &err));
    c = ok, c.gain = 0;
    ck_assert_ptr_null(window_new(&c, 0, &err));
    c = ok, c.gain = 1.5;
    ck_assert_ptr_null(window_new(&c, 0, &err));
    c = ok, c.alpha = 0;
    ck_assert_ptr_null(window_new(&c, 0, &err));
    c = ok, c.epoch = 0;
    ck_assert_ptr_null(window_new(&c, 0, &err));
    c = ok, c.min_samples = 0;
    ck_assert_ptr_null(window_new(&c, 0, &err));
    c = ok, c.gain = NAN;
    ck_assert_ptr_null(window_new(&c, 0, &err));
    c = ok, c.target = 0.5; /* targets are multiples of the base latency, >= 1 */
    ck_assert_ptr_null(window_new(&c, 0, &err));
    c = ok, c.target = 2, c.target_open = 0.5;
    ck_assert_ptr_null(window_new(&c, 0, &err));
    c = ok, c.start = 1000; /* clamped, not refused */
    w = window_new(&c, 0, &err);
    ck_assert_int_eq(window_limit(w), 64);
    window_destroy(&w);
}
END_TEST

/* Reserved headroom (issue 25): the bound on work not on a reservation is
 * the window while nobody is behind (nothing kept), the window less
 * headroom x the buckets behind while some are, never below 1, and the
 * window again with headroom 0 (off). */
START_TEST(test_window_headroom_only_while_behind)
{
    window_config_t c;
    window_config_defaults(&c);
    ck_assert_int_eq(c.headroom, WINDOW_HEADROOM);
    window_t *w = window_fixture_fixed(24, 0, 4);
    ck_assert_int_eq(window_open_limit(w, 0), 24); /* nobody behind: the whole window */
    ck_assert_int_eq(window_open_limit(w, 1), 20);
    ck_assert_int_eq(window_open_limit(w, 3), 12);
    ck_assert_int_eq(window_open_limit(w, 6), 1);  /* at least one IO of other work */
    ck_assert_int_eq(window_open_limit(w, 1000000), 1);
    ck_assert_int_eq(window_limit(w), 24);         /* R work still up to the window */
    window_destroy(&w);
    w = window_fixture_fixed(24, 0, 0);
    ck_assert_int_eq(window_open_limit(w, 3), 24); /* off */
    window_destroy(&w);
    c.headroom = -1;
    ck_assert_ptr_null(window_new(&c, 0, NULL));
}
END_TEST

/* An epoch in which the bound held (window_note_bounded()) does not set
 * the base: as the bound begins the IOs at the backend fall, and
 * completions of IOs that began earlier make area / completions smaller
 * than any real latency. */
START_TEST(test_window_bounded_epoch_keeps_base)
{
    window_config_t c;
    window_config_defaults(&c);
    c.min_samples = 4;
    window_t *w = window_new(&c, 0, NULL);
    ck_assert_ptr_nonnull(w);
    /* first epoch: 2 IOs of 10 ms each, over and over: base 10 ms */
    double t = 0;
    for (int i = 0; i < 4; i++) {
        window_take(w, t);
        window_take(w, t);
        t += 0.01;
        window_done(w, t);
        window_done(w, t);
    }
    window_stats_t st;
    window_stats(w, &st);
    ck_assert(fabs(st.base - 0.01) < 1e-9);
    /* 16 IOs taken late in an epoch, their completions in the next, which
     * the bound held: its apparent latency is far below 10 ms */
    for (int i = 0; i < 16; i++)
        window_take(w, t + 0.0099);
    window_note_bounded(w);
    t += 0.0101;
    for (int i = 0; i < 16; i++)
        window_done(w, t);
    window_stats(w, &st);
    ck_assert_uint_eq(st.epochs, 3);
    ck_assert(st.latency < 0.005);
    ck_assert_msg(fabs(st.base - 0.01) < 1e-9, "base %.5f", st.base);
    window_destroy(&w);
}
END_TEST

/* The backend's pipe (issue 25): the window itself while nothing is
 * measured or with headroom off; then base x throughput rounded up plus WINDOW_PIPE_SLACK,
 * never above the window nor below WINDOW_NEED_FLOOR. */
START_TEST(test_window_pipe_limit)
{
    window_t *w = window_fixture_fixed(40, 0, -1);
    ck_assert_int_eq(window_pipe_limit(w), 40); /* nothing measured */
    /* 7 at a time, 2 ms each: base 2 ms, 3,500 IOs/s, a pipe of 7 */
    for (int i = 0; i < 20; i++) {
        for (int j = 0; j < 7; j++)
            window_take(w, i * 0.002);
        for (int j = 0; j < 7; j++)
            window_done(w, (i + 1) * 0.002);
    }
    window_stats_t st;
    window_stats(w, &st);
    ck_assert_double_eq_tol(st.base, 0.002, 1e-6);
    ck_assert_int_eq(window_pipe_limit(w), 7 + WINDOW_PIPE_SLACK);
    window_destroy(&w);
    w = window_fixture_fixed(40, 0, 0); /* headroom off: the window */
    for (int i = 0; i < 20; i++) {
        for (int j = 0; j < 7; j++)
            window_take(w, i * 0.002);
        for (int j = 0; j < 7; j++)
            window_done(w, (i + 1) * 0.002);
    }
    ck_assert_int_eq(window_pipe_limit(w), 40);
    window_destroy(&w);
    w = window_fixture_fixed(6, 0, -1); /* a window below the pipe: the window */
    for (int i = 0; i < 20; i++) {
        for (int j = 0; j < 6; j++)
            window_take(w, i * 0.002);
        for (int j = 0; j < 6; j++)
            window_done(w, (i + 1) * 0.002);
    }
    ck_assert_int_eq(window_pipe_limit(w), 6);
    window_destroy(&w);
    w = window_fixture_fixed(6, 0, -1); /* one at a time, short: the floor */
    for (int i = 0; i < 400; i++) {
        window_take(w, i * 0.0001);
        window_done(w, i * 0.0001 + 0.00001);
    }
    ck_assert_int_ge(window_pipe_limit(w), WINDOW_NEED_FLOOR);
    ck_assert_int_le(window_pipe_limit(w), 1 + WINDOW_PIPE_SLACK);
    window_destroy(&w);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {test_window_headroom_only_while_behind, test_window_pipe_limit,
                            test_window_bounded_epoch_keeps_base,test_window_converges_to_knee, test_window_shrinks_when_latency_rises,
                            test_window_latency_target, test_window_backend_stamp, test_window_open_target,
                            test_window_within_floor_and_ceiling, test_window_steady_under_noise,
                            test_window_no_growth_without_demand, test_window_fixed,
                            test_window_bad_settings};
    return testlib_run_tests("window", tests, sizeof tests / sizeof tests[0]);
}
