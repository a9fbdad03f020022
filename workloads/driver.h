/* driver.h - what the scenario load tools (bqos-load, bqos-nbd-load) share: their common option rows and manual layout, the --server overrides, the client threads and the run's clock, open-loop pacing and a position's share of a bucket's rate, the profile summary and the run's output files. */
#ifndef BQOS_WORKLOADS_DRIVER_H
#define BQOS_WORKLOADS_DRIVER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "common/opts.h"
#include "common/rng.h"
#include "workloads/report.h"
#include "workloads/scenario.h"

/* The option rows for where a run's files go (driver_write_outputs()) and
 * what its summary calls it; where: the const char * they set. */
#define DRIVER_OPTS_OUT(where)                                                           \
    {.name = "out", .shrt = 'o', .type = OPTS_STRING, .target = (where), .arg = "DIR",  \
     .help = "write intervals.csv, cumulative.csv, periods.csv,\n"                      \
             "servers.csv and summary.json into DIR (created if missing)"}
#define DRIVER_OPTS_LABEL(where)                                                          \
    {.name = "label", .shrt = 'l', .type = OPTS_STRING, .target = (where), .arg = "NAME", \
     .help = "name of this run in summary.json and tables"}

/* The option rows that override a scenario's duration, per-server capacity
 * and seed, in the scenario_opts_t fields at where; the rest of a row (its
 * bounds; the capacity's help text) is the tool's own. */
#define DRIVER_OPTS_DURATION(where, ...)                                                  \
    {.name = "duration", .shrt = 'd', .type = OPTS_DOUBLE, .target = (where),             \
     .arg = "SECS", __VA_ARGS__, .help = "override the scenario's duration"}
#define DRIVER_OPTS_CAPACITY(where, text, ...)                                            \
    {.name = "capacity", .shrt = 'c', .type = OPTS_DOUBLE, .target = (where),             \
     .arg = "IOPS", __VA_ARGS__, .help = (text)}
#define DRIVER_OPTS_SEED(where)                                                           \
    {.name = "seed", .type = OPTS_I64, .target = (where), .arg = "N", .min = 0,           \
     .max = INFINITY, .help = "override the scenario's seed"}
/* The rows for profiling each server's throughput instead of running the
 * scenario (a double of seconds at where), aligning the run's periods with
 * the controller's (a double, wall-clock time, at where) and silencing the
 * progress line (an int flag at where); help text and bounds are the
 * tool's own. */
#define DRIVER_OPTS_PROFILE(where, text, ...)                                             \
    {.name = "profile", .type = OPTS_DOUBLE, .target = (where), .arg = "SECS",            \
     __VA_ARGS__, .help = (text)}
#define DRIVER_OPTS_PERIOD_START(where, text, ...)                                        \
    {.name = "period-start", .type = OPTS_DOUBLE, .target = (where), .arg = "T",          \
     __VA_ARGS__, .help = (text)}
#define DRIVER_OPTS_QUIET(where)                                                          \
    {.name = "quiet", .shrt = 'q', .type = OPTS_FLAG, .target = (where),                 \
     .help = "no progress line"}

/* A load tool's --help (opts_usage_t): before, the rows as a manual's
 * OPTIONS table (indent 4, heads padded to 23 columns), after. */
#define DRIVER_USAGE(before, after)                                                        \
    {.head = (before), .layout = OPTS_LAYOUT_TABLE, .indent = 4, .width = 23, .tail = (after)}

/* A tool's --server overrides: room for DRIVER_SERVERS_MAX of them, and
 * the scenario_opts_t whose servers they become (set `so` before
 * parsing). */
#define DRIVER_SERVERS_MAX 256
typedef struct {
    scenario_opts_t *so;
    const char *list[DRIVER_SERVERS_MAX];
} driver_servers_t;

/* OPTS_FUNC for --server, target a driver_servers_t: one more override, arg
 * (borrowed) into its list, and so->servers points at the list.  Returns
 * 0, or -EINVAL when DRIVER_SERVERS_MAX are there already. */
int driver_opt_server(const char *arg, void *target);

/* Raises the soft limit on open files to the hard limit, for a run's many
 * connections; where that fails the limit stays as it was. */
void driver_raise_nofile(void);

/* Seconds from `start` (CLOCK_MONOTONIC) to now; negative before it. */
double driver_since(const struct timespec *start);

/* Sleeps until `t` seconds after `start`, at most `cap` seconds; returns at
 * once when `t` has passed. */
void driver_nap_until(const struct timespec *start, double t, double cap);

/* Sets *start (CLOCK_MONOTONIC) to time zero of a run: `lead` seconds from
 * now, or with align > 0 the first boundary of a QoS period of `period`
 * seconds (periods start at wall-clock time align + k * period) at least
 * `lead` seconds from now. */
void driver_set_start(struct timespec *start, double lead, double align, double period);

/* IOs/s of open-loop bucket bk that position `pos` of phase ph carries: its
 * Zipf share (exponent bk->split_zipf) of bk->rate. */
double driver_position_rate(const scenario_bucket_t *bk, const scenario_phase_t *ph, int pos);

/* A run's client threads and its clock: the main thread starts and stops
 * them; client threads read the clock, `end` and the stop flag. */
typedef struct {
    struct timespec start; /* CLOCK_MONOTONIC time zero */
    double end;            /* seconds after start when the clients stop */
    atomic_int stop;       /* set by driver_stop() */
    pthread_t *tids;       /* the main thread's */
    size_t started;
} driver_run_t;

/* Sets time zero (driver_set_start(&r->start, lead, align, period)) and
 * starts fn(args + i * size) for i = 0 .. n-1, each on a thread of its own
 * with a 256 KiB stack, until one fails.  Returns 0, -ENOMEM, or -EAGAIN
 * after logging which failed (the threads started run until
 * driver_stop()). */
int driver_start(driver_run_t *r, size_t n, void *(*fn)(void *), void *args, size_t size,
                 double lead, double align, double period);

/* A client thread's loop test: sets *t to the run's seconds now; returns 0
 * once the run is stopped or past its end. */
int driver_running(driver_run_t *r, double *t);

/* Main thread: stops the clients and waits for every thread started. */
void driver_stop(driver_run_t *r);

/* One client's open-loop pacing: a send every `gap` seconds.  Zero it to
 * start; the client's thread owns it. */
typedef struct {
    const scenario_phase_t *phase; /* the phase `gap` was set for */
    double due;                    /* when the next send is due (run seconds) */
    double gap;
} driver_pace_t;

/* At time t, in phase ph of open-loop bucket bk, for position pos: when ph
 * is not the phase p was set for, the gap becomes one over the position's
 * rate (driver_position_rate()) divided by `per` (the position's senders;
 * no rate: never), and the next send falls due at a uniformly random point
 * (one rng_uniform() draw) of the first gap from t. */
void driver_pace_phase(driver_pace_t *p, const scenario_bucket_t *bk, const scenario_phase_t *ph,
                       int pos, double per, double t, rng_t *rng);

/* A send made at time t: the next is due one gap later, or at t when that
 * is more than a second behind (far behind, no burst to catch up). */
void driver_pace_sent(driver_pace_t *p, double t);

/* Prints a profile's result on stdout: "server NAME IOPS" per server, from
 * done[j] (IOs server j completed in `secs` seconds), then "capacity MEAN"
 * and "min MIN". */
void driver_print_capacity(const scenario_t *s, const uint64_t *done, double secs);

/* Writes intervals.csv, cumulative.csv, periods.csv, servers.csv and summary.json
 * (labelled `label`, may be NULL) of rep into directory `dir`, created with
 * `mode` if missing.  Returns 0, or -errno after logging what failed. */
int driver_write_outputs(const char *dir, int mode, const report_t *rep, const char *label);

#endif
