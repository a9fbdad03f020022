/* test_report.c - Check suite for workloads/report: per-window accuracy (layout, the demanding rule, known series), and bqos-load's counters folding sends and completions into the summary's windows. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "workloads/report.h"
#include "workloads/scenario.h"
#include "tests/scenario_fixtures.h"
#include "tests/testlib.h"

#define SERVERS \
    "\"servers\": [{\"name\": \"s1\", \"address\": \"127.0.0.1:7001\"}, " \
    "{\"name\": \"s2\", \"address\": \"127.0.0.1:7002\"}]"

/* The summary JSON of r (caller owns it). */
static json_t *summary_of(const report_t *r)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(report_write_summary(r, NULL, f), 0);
    fclose(f);
    json_error_t je;
    json_t *j = json_loads(buf, 0, &je);
    ck_assert_msg(j != NULL, "summary: %s", je.text);
    free(buf);
    return j;
}

/* The summary tests' report: over a scenario of s1 and s2, and the
 * summary it wrote.  rig_teardown() frees them after each test. */
static struct {
    scenario_t *s;
    report_t *r;
    json_t *j;
} rig;

/* A report (rig's) over a scenario of periods of 1 s, one warm-up period,
 * `duration` seconds and the given "buckets" array. */
static report_t *rig_open(int duration, const char *buckets)
{
    char text[1024];
    int n = snprintf(text, sizeof text,
                     "{\"duration\": %d, \"period\": 1, \"warmup_periods\": 1, " SERVERS
                     ", \"buckets\": %s}",
                     duration, buckets);
    ck_assert(n > 0 && (size_t)n < sizeof text);
    rig.s = parse_ok(text);
    rig.r = report_new(rig.s);
    ck_assert_ptr_nonnull(rig.r);
    return rig.r;
}

/* The summary JSON of rig's report (rig owns it). */
static json_t *rig_summary(void)
{
    rig.j = summary_of(rig.r);
    return rig.j;
}

static void rig_teardown(void)
{
    json_decref(rig.j);
    rig.j = NULL;
    report_destroy(&rig.r);
    scenario_destroy(&rig.s);
}

/* windows.<which>.<key> of a summary (or of one of its buckets). */
static json_t *win_get(json_t *j, const char *which, const char *key)
{
    return json_object_get(json_object_get(json_object_get(j, "windows"), which), key);
}

START_TEST(test_report_win_layout)
{
    size_t ns, pl;
    report_win_layout(5, &ns, &pl);
    ck_assert_uint_eq(ns, 25);
    ck_assert_uint_eq(pl, 5);
    report_win_layout(1, &ns, &pl);
    ck_assert_uint_eq(ns, 5);
    ck_assert_uint_eq(pl, 5);
    report_win_layout(2.5, &ns, &pl); /* 3 long windows of 0.833 s, 4 short each */
    ck_assert_uint_eq(ns, 12);
    ck_assert_uint_eq(pl, 4);
    report_win_layout(0.1, &ns, &pl);
    ck_assert_uint_eq(ns, 1);
    ck_assert_uint_eq(pl, 1);
}
END_TEST

/* The rule's edge: idle below 1% of the window is demanding, 1% is not. */
START_TEST(test_report_win_demanding_threshold)
{
    ck_assert(report_win_demanding(0, 0.2));
    ck_assert(report_win_demanding(0.00199, 0.2));
    ck_assert(!report_win_demanding(0.002, 0.2));
    ck_assert(!report_win_demanding(0.2, 0.2));
    ck_assert(report_win_demanding(0.0099, 1.0));
    ck_assert(!report_win_demanding(0.01, 1.0));
}
END_TEST

/* Known served series -> known worst ratios and shares.  T = 1 s: five
 * 200 ms windows make one 1 s window.  Bucket 0: R 10, L 20 (pro rata per
 * 200 ms: R 2, L 4); bucket 1: R 10, no limit. */
START_TEST(test_report_win_known_series)
{
    const double res[2] = {10, 10}, lim[2] = {20, -1};
    report_win_t *w = report_win_new(2, 1.0, res, lim);
    ck_assert_ptr_nonnull(w);
    ck_assert_double_eq_tol(report_win_short_len(w), 0.2, 1e-12);
    /* Period 1, bucket 0: served 4,4,0,2,2 (12 in 1 s), always something
     * outstanding (idle 0; a negative idle is clamped to 0). */
    static const uint64_t s0[5] = {4, 4, 0, 2, 2};
    for (int k = 0; k < 5; k++)
        report_win_feed(w, 0, s0[k], k == 1 ? -0.001 : 0);
    /* Period 2, bucket 0: served 6 in the first window (1.5 x L pro rata),
     * outstanding throughout, then nothing outstanding (idle windows do not
     * count for R). */
    report_win_feed(w, 0, 6, 0);
    for (int k = 1; k < 5; k++)
        report_win_feed(w, 0, 0, 0.2);
    /* Bucket 1: 1 per window, idle 30% of each: never counts for R; no
     * limit: no L ratio.  Two windows only: its long window is incomplete
     * and not counted. */
    report_win_feed(w, 1, 1, 0.06);
    report_win_feed(w, 1, 1, 0.06);
    report_win_fig_t f = report_win_figures(w, 0, REPORT_WIN_SHORT);
    ck_assert_uint_eq(f.windows, 10);
    ck_assert_uint_eq(f.l_windows, 10);
    ck_assert_double_eq_tol(f.l_worst, 1.5, 1e-12);
    ck_assert_uint_eq(f.r_windows, 6);   /* 5 + the first of period 2 */
    ck_assert_uint_eq(f.r_met, 5);       /* the 0 misses */
    ck_assert_double_eq_tol(f.r_share, 5.0 / 6, 1e-12);
    ck_assert_double_eq_tol(f.r_worst, 0, 1e-12);
    f = report_win_figures(w, 0, REPORT_WIN_LONG);
    ck_assert_uint_eq(f.windows, 2);
    ck_assert_double_eq_tol(f.l_worst, 0.6, 1e-12); /* 12 / 20 */
    ck_assert_uint_eq(f.r_windows, 1);   /* period 2: idle 0.8 s of 1 s */
    ck_assert_uint_eq(f.r_met, 1);       /* 12 >= 9.5 */
    ck_assert_double_eq_tol(f.r_worst, 1.2, 1e-12);
    f = report_win_figures(w, 1, REPORT_WIN_SHORT);
    ck_assert_uint_eq(f.windows, 2);
    ck_assert_uint_eq(f.l_windows, 0);
    ck_assert_uint_eq(f.r_windows, 0);
    ck_assert_double_eq_tol(f.r_share, 1, 1e-12);
    ck_assert_uint_eq(report_win_figures(w, 1, REPORT_WIN_LONG).windows, 0);
    f = report_win_figures(w, -1, REPORT_WIN_SHORT);
    ck_assert_uint_eq(f.windows, 12);
    ck_assert_uint_eq(f.l_windows, 10);
    report_win_destroy(&w);
    ck_assert_ptr_null(w);
    report_win_destroy(&w);
}
END_TEST

/* bqos-load's side: completions and sends at known times go through the
 * ring and report_fold() into the summary's "windows"; the warm-up period
 * is left out. */
START_TEST(test_report_windows_in_summary)
{
    report_t *r = rig_open(3, "[{\"name\": \"a\", \"reservation\": 10, \"limit\": 20, "
                              "\"servers\": [\"s1\"]}]");
    /* Warm-up period: 50 IOs in its first 200 ms, not counted. */
    for (int i = 0; i < 50; i++) {
        report_sent(r, 0, 0, 0.001 * i);
        report_add(r, 0, 0, 0.001 * i + 0.0005);
    }
    /* Periods 2 and 3: one client with one request in flight from 1 s on,
     * 3 IOs per 200 ms window (15/s); in period 3 the last window gets 5
     * (25/s). */
    report_sent(r, 0, 0, 1.0);
    for (int p = 1; p < 3; p++)
        for (int k = 0; k < 5; k++) {
            int n = p == 2 && k == 4 ? 5 : 3;
            for (int i = 0; i < n; i++) {
                double t = p + 0.2 * k + 0.19 * (i + 1) / n;
                report_add(r, 0, 0, t);
                report_sent(r, 0, 0, t);
            }
        }
    report_fold(r, 1.5); /* the warm-up and two windows of period 2 */
    report_fold(r, INFINITY);
    json_t *j = rig_summary();
    ck_assert_int_eq(json_integer_value(win_get(j, "short", "windows")), 10);
    ck_assert_double_eq_tol(json_real_value(win_get(j, "short", "l_worst")), 5.0 / 4, 1e-9);
    ck_assert_double_eq_tol(json_real_value(win_get(j, "long", "l_worst")), 17.0 / 20, 1e-9);
    /* Always one outstanding: every window demanding, and R pro rata (2)
     * met with 3. */
    ck_assert_int_eq(json_integer_value(win_get(j, "short", "r_windows")), 10);
    ck_assert_double_eq_tol(json_real_value(win_get(j, "short", "r_share")), 1, 1e-12);
    ck_assert_int_eq(json_integer_value(win_get(j, "long", "r_windows")), 2);
    json_t *b0 = json_array_get(json_object_get(j, "buckets"), 0);
    ck_assert_ptr_nonnull(json_object_get(json_object_get(b0, "windows"), "long"));
}
END_TEST

/* Issue 25: `make demo`'s rr run printed "1s windows >=95% of R: 100.0%"
 * while bucket b1 got 52% of its reservation.  A closed-loop client that
 * always has 1-8 requests in flight but is answered at only 52% of R sends
 * fewer than R x len per window, so the old rule (requests in flight at a
 * window's start plus those sent in it >= R x len) never counted its
 * windows; the new one counts every window as demanding and below 95%. */
START_TEST(test_report_starved_closed_loop_counts)
{
    report_t *r = rig_open(3, "[{\"name\": \"b1\", \"reservation\": 1000, "
                              "\"servers\": [\"s1\"]}]");
    /* Answers at 520/s; after each answer the client resends at once so
     * that its requests in flight go down from 8 to 1 and back up to 8. */
    int out = 8, up = 0, lo = 8, hi = 0;
    for (int i = 0; i < out; i++)
        report_sent(r, 0, 0, 0);
    for (int c = 1;; c++) {
        double t = (c - 0.5) / 520.0;
        if (t >= 3)
            break;
        report_add(r, 0, 0, t);
        out--;
        int send = up ? 2 : out < 1;
        if (out + send > 8)
            send = 8 - out;
        for (int i = 0; i < send; i++)
            report_sent(r, 0, 0, t + 1e-5);
        out += send;
        up = up ? out < 8 : out <= 1;
        lo = out < lo ? out : lo;
        hi = out > hi ? out : hi;
    }
    ck_assert_int_eq(lo, 1);
    ck_assert_int_eq(hi, 8);
    report_fold(r, INFINITY);
    json_t *j = rig_summary();
    /* 10 windows of 200 ms and 2 of 1 s after the warm-up, each served
     * 52% of R pro rata: all demanding, none at 95%. */
    ck_assert_int_eq(json_integer_value(win_get(j, "short", "windows")), 10);
    ck_assert_int_eq(json_integer_value(win_get(j, "short", "r_windows")), 10);
    ck_assert_int_eq(json_integer_value(win_get(j, "short", "r_met")), 0);
    ck_assert_double_eq_tol(json_real_value(win_get(j, "short", "r_share")), 0, 1e-12);
    ck_assert_double_eq_tol(json_real_value(win_get(j, "short", "r_worst")), 0.52, 0.011);
    ck_assert_int_eq(json_integer_value(win_get(j, "long", "r_windows")), 2);
    ck_assert_double_eq_tol(json_real_value(win_get(j, "long", "r_share")), 0, 1e-12);
    ck_assert_double_eq_tol(json_real_value(win_get(j, "long", "r_worst")), 0.52, 0.003);
}
END_TEST

/* Gaps add up: requests answered at once leave the bucket idle most of the
 * time, and an error reply (report_ended()) ends a request as a completion
 * does.  A bucket busy throughout at one server is demanding even if idle
 * at the other (the server where its idle time is smallest). */
START_TEST(test_report_idle_gaps_and_servers)
{
    report_t *r = rig_open(2, "[{\"name\": \"open\", \"reservation\": 10, "
                              "\"servers\": [\"s1\"]}, {\"name\": \"err\", \"reservation\": 10, "
                              "\"servers\": [\"s1\"]}, {\"name\": \"two\", \"reservation\": 10, "
                              "\"servers\": [\"s1\", \"s2\"]}]");
    for (int i = 0; i < 100; i++) { /* open: 100/s, each answered in 1 ms */
        double t = 1 + 0.01 * i;
        report_sent(r, 0, 0, t);
        report_add(r, 0, 0, t + 0.001);
    }
    report_sent(r, 1, 0, 1.0); /* err: one request, an error at 1.9 s */
    report_ended(r, 1, 0, 1.9, 1);
    report_ended(r, 1, 0, 1.95, 3); /* nothing outstanding: no effect */
    /* two: one request in flight at s2 from 1 s on (never answered),
     * a few quick ones at s1 */
    report_sent(r, 2, 1, 1.0);
    for (int i = 0; i < 10; i++) {
        report_sent(r, 2, 0, 1 + 0.1 * i);
        report_add(r, 2, 0, 1 + 0.1 * i + 0.001);
    }
    report_fold(r, INFINITY);
    json_t *j = rig_summary();
    json_t *bs = json_object_get(j, "buckets");
    /* open: 20 per window >= R, but idle 90%: not demanding. */
    ck_assert_int_eq(json_integer_value(win_get(json_array_get(bs, 0), "short", "r_windows")), 0);
    /* err: demanding in the 4 windows before 1.8 s (0 served), not in the
     * last; the long window is idle 0.1 s of 1 s. */
    json_t *e = json_array_get(bs, 1);
    ck_assert_int_eq(json_integer_value(win_get(e, "short", "r_windows")), 4);
    ck_assert_int_eq(json_integer_value(win_get(e, "short", "r_met")), 0);
    ck_assert_int_eq(json_integer_value(win_get(e, "long", "r_windows")), 0);
    /* two: busy at s2 throughout. */
    json_t *tw = json_array_get(bs, 2);
    ck_assert_int_eq(json_integer_value(win_get(tw, "short", "r_windows")), 5);
    ck_assert_int_eq(json_integer_value(win_get(tw, "long", "r_windows")), 1);
}
END_TEST

/* Threads take their timestamps before they count: an answer stamped
 * 1.2001 s may be counted before a send stamped 1.1999 s, which must not
 * leave the bucket idle.  An idle stretch over several windows, folded
 * while it lasts, counts in each. */
START_TEST(test_report_idle_across_windows_and_stamps)
{
    report_t *r = rig_open(2, "[{\"name\": \"busy\", \"reservation\": 10, "
                              "\"servers\": [\"s1\"]}, {\"name\": \"gap\", \"reservation\": 10, "
                              "\"servers\": [\"s2\"]}]");
    report_sent(r, 0, 0, 0.5);
    report_add(r, 0, 0, 1.2001);
    report_sent(r, 0, 0, 1.1999);
    report_sent(r, 1, 1, 0.9); /* gap: idle from 1.05 s to 1.65 s */
    report_add(r, 1, 1, 1.05);
    report_fold(r, 1.3);
    report_sent(r, 1, 1, 1.65);
    report_fold(r, INFINITY);
    json_t *j = rig_summary();
    json_t *bs = json_object_get(j, "buckets");
    json_t *b0 = json_array_get(bs, 0), *b1 = json_array_get(bs, 1);
    ck_assert_int_eq(json_integer_value(win_get(b0, "short", "r_windows")), 5);
    ck_assert_int_eq(json_integer_value(win_get(b0, "long", "r_windows")), 1);
    /* gap: idle 0.15, 0.2, 0.2, 0.05 s, then busy in [1.8, 2). */
    ck_assert_int_eq(json_integer_value(win_get(b1, "short", "r_windows")), 1);
    ck_assert_int_eq(json_integer_value(win_get(b1, "long", "r_windows")), 0);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {test_report_win_layout,
                                  test_report_win_demanding_threshold,
                                  test_report_win_known_series,
                                  test_report_windows_in_summary,
                                  test_report_starved_closed_loop_counts,
                                  test_report_idle_gaps_and_servers,
                                  test_report_idle_across_windows_and_stamps};
    const testlib_case_t c = {.name = "report", .teardown = rig_teardown};
    return testlib_run_case(&c, tests, sizeof tests / sizeof tests[0]);
}
