/* report.h - bqos-load's counters and outputs: completed IOs per bucket per interval and period, CSV, summary JSON, tables; and per-window accuracy (1 s and 200 ms windows), shared with bqos-sim. */
#ifndef BQOS_REPORT_H
#define BQOS_REPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "workloads/scenario.h"

/* Met: achieved >= REPORT_MET_SHARE x reservation.  Over: achieved >
 * REPORT_OVER_SHARE x limit. */
#define REPORT_MET_SHARE 0.99
#define REPORT_OVER_SHARE 1.01

/* ---- Per-window accuracy (issue 14) ------------------------------------
 *
 * A QoS period is cut into equal windows aligned to its start: "long"
 * windows of about 1 s (round(T / 1 s) of them, at least 1) and "short"
 * windows of about 200 ms (each long window cut into round(long / 200 ms),
 * at least 1), so a long window is a whole number of short ones (T = 5 s:
 * 5 x 1 s and 25 x 200 ms; T = 1 s: 1 x 1 s and 5 x 200 ms).  For each
 * bucket-window:
 *   L ratio  served / (limit x window length), buckets with a limit;
 *   R        the window counts when the bucket was demanding in it
 *            (see "Demanding" below: it had a request outstanding
 *            through the window, whatever its clients sent), and meets R when served >=
 *            REPORT_WIN_R_SHARE x reservation x window length.
 * Memory is fixed per bucket (the running long window and the figures);
 * nothing is allocated per IO or per window.
 *
 * Demanding (issue 25; the one rule, used by bqos-load, bqos-sim and the
 * reports): a bucket's idle time in a short window is, at the server where
 * it was smallest, the time in the window during which none of the
 * bucket's requests to that server was outstanding (sent and neither
 * answered nor dropped), wherever it waited (the node's queue, the
 * backend).  A window is demanding when the bucket's idle time in it
 * (summed over its short windows, for a long window) is below
 * REPORT_WIN_IDLE_SHARE x the window's length.  So a closed-loop client
 * that always has a request in flight at a server counts however few it
 * sends, and an open-loop client whose requests are all answered counts
 * only while it is not (its gaps add up).  Producers track, per bucket and
 * server, the time with nothing outstanding in each short window. */
#define REPORT_WIN_LONG_S 1.0
#define REPORT_WIN_SHORT_S 0.2
#define REPORT_WIN_R_SHARE 0.95
#define REPORT_WIN_IDLE_SHARE 0.01

enum { REPORT_WIN_LONG = 0, REPORT_WIN_SHORT = 1 };

/* Figures of one window length (index REPORT_WIN_LONG or _SHORT). */
typedef struct {
    double len;          /* window length, seconds */
    uint64_t windows;    /* bucket-windows fed */
    uint64_t l_windows;  /* ... of buckets with a limit */
    double l_worst;      /* largest L ratio (0 if no l_windows) */
    uint64_t r_windows;  /* demanding bucket-windows (see above) */
    uint64_t r_met;      /* ... of which served >= 95% of R pro rata */
    double r_share;      /* r_met / r_windows (1 if no r_windows) */
    double r_worst;      /* smallest served / (R pro rata) over r_windows (1 if none) */
} report_win_fig_t;

typedef struct report_win report_win_t;

/* Number of short windows per period (*nshort) and per long window
 * (*per_long) for a period of `period` seconds. */
void report_win_layout(double period, size_t *nshort, size_t *per_long);

/* Returns an accumulator for `nbuckets` buckets with reservations res[b]
 * and limits lim[b] in IOs/s (lim[b] < 0: no limit; both copied), for
 * periods of `period` seconds; NULL if out of memory.  Caller owns it; free
 * with report_win_destroy().  One thread at a time. */
report_win_t *report_win_new(size_t nbuckets, double period, const double *res, const double *lim);

/* Frees the accumulator and sets *wp to NULL.  Accepts NULL. */
/* Bucket b's reservation and limit (IOs/s, lim < 0: none) from the next
 * window fed on (a runtime change, at a period start). */
void report_win_set_rates(report_win_t *w, size_t b, double res, double lim);

void report_win_destroy(report_win_t **wp);

/* Length in seconds of the short windows. */
double report_win_short_len(const report_win_t *w);

/* Feeds the next short window of bucket b: `served` IOs completed in it,
 * and `idle` seconds of it during which the bucket had no request
 * outstanding (at the server where that time was smallest; see
 * "Demanding" above; values outside 0..length are clamped).  Windows of
 * one bucket are fed in time order, whole periods at a time starting at a
 * period start (a long window closes with its last short window; a long
 * window left incomplete is not counted). */
void report_win_feed(report_win_t *w, size_t b, uint64_t served, double idle);

/* Nonzero if a window of `len` seconds in which a bucket had `idle` seconds
 * with nothing outstanding counts as demanding (the rule above). */
int report_win_demanding(double idle, double len);

/* The figures over every bucket (b < 0) or one bucket, for window length
 * `which` (REPORT_WIN_LONG or REPORT_WIN_SHORT). */
report_win_fig_t report_win_figures(const report_win_t *w, long b, int which);

/* Returns {"long": {...}, "short": {...}} with the fields of f[REPORT_WIN_LONG]
 * and f[REPORT_WIN_SHORT] (len_s, windows, l_windows, l_worst, r_windows,
 * r_met, r_share, r_worst), or NULL if out of memory.  Caller owns it. */
json_t *report_win_json(const report_win_fig_t *f);

/* Completion counters of one run.  report_add() and report_add_error() may
 * be called from any thread (atomic counters); everything else reads, and
 * should run after the load threads stopped (or accept a moving picture). */
typedef struct report report_t;

/* Returns counters for scenario `s` (borrowed: it must outlive the report),
 * one slot per redistribution interval (period / intervals) of the run, or
 * NULL if out of memory.  Caller owns it; free with report_destroy(). */
report_t *report_new(const scenario_t *s);

/* Frees the report and sets *rp to NULL.  Accepts NULL and *rp == NULL. */
void report_destroy(report_t **rp);

/* Counts one IO of bucket `b` served by server `srv` (index into the
 * scenario's servers) completed at `t` seconds after the start; completions
 * outside [0, duration) are not counted.  It ends one request outstanding
 * (report_sent()) at that server.  Thread-safe. */
void report_add(report_t *r, size_t b, size_t srv, double t);

/* Adds `bytes` to what bucket `b`'s requests moved (a get: the value it
 * returned; a set: its value; an NBD read: its length), for a request
 * completed at `t` seconds (outside [0, duration): ignored).  Thread-safe.
 * The summary shows each bucket's "bytes" and "bytes_rate" (bytes per
 * second over the run). */
void report_add_bytes(report_t *r, size_t b, double t, uint64_t bytes);
uint64_t report_bytes(const report_t *r, size_t b);

/* IOs served by server `srv` so far. */
uint64_t report_server_total(const report_t *r, size_t srv);

/* Counts one failed request of bucket `b` (not a completed IO).  Thread-safe. */
void report_add_error(report_t *r, size_t b);

/* Per-window accuracy of a run (report_win_*): completions (report_add())
 * are counted per short window in a ring of REPORT_RING windows per
 * bucket, and per bucket and server the time with none of its requests
 * outstanding is added to the windows it falls in (a request is
 * outstanding from report_sent() to report_add() or report_ended(); the
 * counts of one bucket and server are under one lock, and a send stamped
 * before the answer that emptied them adds no time); report_fold() takes
 * the smallest idle time over the servers and moves finished windows into
 * the accumulator, so memory does not grow with the run.  Windows of the
 * warm-up periods are not counted. */
#define REPORT_RING 64
/* How long after a window's end report_fold() waits for late counts. */
#define REPORT_FOLD_LAG 1.0

/* Counts one request of bucket `b` sent to server `srv` at `t` seconds:
 * outstanding until report_add() or report_ended() for the same bucket and
 * server.  Thread-safe. */
void report_sent(report_t *r, size_t b, size_t srv, double t);

/* Ends `n` outstanding requests of bucket `b` at server `srv` at `t`
 * seconds that did not complete an IO (an error reply, a connection lost
 * with them in flight); count the errors with report_add_error().  Ends
 * no more than are outstanding.  Thread-safe. */
void report_ended(report_t *r, size_t b, size_t srv, double t, uint64_t n);

/* Folds the windows that ended at or before `upto` seconds (and before the
 * run's end).  Call from one thread (the main thread) at least every few
 * seconds while the load runs, with `upto` = now - REPORT_FOLD_LAG (counts
 * more than REPORT_RING windows ahead of the last fold are lost), and once
 * after the load threads stopped with `upto` = INFINITY. */
void report_fold(report_t *r, double upto);

/* Marks the run as ended after `t` seconds (an interrupted run): periods
 * after `t` are left out of periods.csv and the summary.  Call after the
 * load threads stopped. */
void report_set_end(report_t *r, double t);

/* Number of interval slots, and the IOs of bucket `b` in slot `k`. */
size_t report_nslots(const report_t *r);
uint64_t report_count(const report_t *r, size_t b, size_t k);

/* IOs of bucket `b` so far, and its failed requests. */
uint64_t report_total(const report_t *r, size_t b);
uint64_t report_errors(const report_t *r, size_t b);

/* CSV writers; each returns 0 or -EIO.
 * intervals: time,period,interval,bucket,completed,cumulative,rate (one row
 *            per bucket per interval; time is the interval's end, rate IOs/s)
 * cumulative: time,B1,B2,... cumulative completed IOs (for plotting)
 * periods:   period,bucket,reservation,limit,completed,met,over (IOs per
 *            period; limit empty when unlimited; full periods only)
 * servers:   period,server,completed (IOs each server delivered to this
 *            run's clients per full period: what the property test's
 *            checker fits the reservations into) */
int report_write_intervals(const report_t *r, FILE *f);
int report_write_cumulative(const report_t *r, FILE *f);
int report_write_periods(const report_t *r, FILE *f);
int report_write_servers(const report_t *r, FILE *f);

/* Writes the summary JSON: run parameters; per bucket reservation, limit
 * (null if none), achieved (mean IOs/s over the measured periods: the full
 * periods after warmup_periods; the whole run if it has no full period),
 * min/max period, met, over, periods met and over, errors; met_share and
 * over_share (of buckets), period_met_share and period_over_share (of
 * bucket-periods); total IOs/s; per server its completed IOs and mean IOs/s
 * over the run; "windows": {"long", "short"} per-window accuracy (see
 * report_win_figures(): len_s, windows, l_windows, l_worst, r_windows,
 * r_met, r_share, r_worst) over all buckets at the top and per bucket.
 * `label` (may be NULL) names the run.
 * Returns 0, -EIO, -ENOMEM. */
int report_write_summary(const report_t *r, const char *label, FILE *f);

/* Reads the summary files paths[0..n-1] and prints one side-by-side table to
 * `out`: bucket and reservation (from the first file), then per file
 * achieved IOs/s (headed by the file's label), limit, met?, over?; then the
 * share lines and total IOs/s.  At most `max_rows`
 * bucket rows (0: all).  Buckets are matched by name to the first file.
 * Returns 0; -EINVAL if a file cannot be read or is not a summary (message
 * on stderr). */
int report_print_table(FILE *out, const char *const *paths, size_t n, size_t max_rows);

/* Returns nonzero if summary file `path` shows every bucket met and none
 * over (`need` bit 1: check met, bit 2: check over); 0 otherwise or on a read
 * error (message on stderr). */
int report_check(const char *path, int need);

#endif
