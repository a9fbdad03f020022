/* scenario.h - bqos-load scenario files: servers, buckets, placement and demand changes as JSON data.
 *
 * A scenario (see docs/workloads.md for every key) looks like
 *   {"duration": 10, "period": 1, "intervals": 5, "capacity": 20000,
 *    "workload": {"get_ratio": 0.5, "value_size": 4096, "preload": 10000, "outstanding": 5},
 *    "servers": [{"name": "s1", "address": "127.0.0.1:7001", "backend": "127.0.0.1:8001"}],
 *    "buckets": [{"name": "b1", "reservation": "60%", "limit": 60000,
 *                 "servers": ["s1"], "changes": [{"at": 2.5, "active": [2, 3]}]}],
 *    "generate": {"count": 200, "reserved": 0.75, "zipf": 0.5, "active": [2, 6]}}
 * Rates are IOs per second, either numbers or strings "N%" meaning N percent
 * of one server's capacity.  Random choices (Zipf splits, random active
 * sets, random change times) are drawn at load time from "seed", so a
 * scenario expands to the same buckets every time.
 *
 * A loaded scenario_t is read-only: any number of threads may read it. */
#ifndef BQOS_SCENARIO_H
#define BQOS_SCENARIO_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/jsonloc.h"

/* `limit` of a bucket without a limit. */
#define SCENARIO_NO_LIMIT (-1.0)
#define SCENARIO_NAME_MAX 64
/* scenario_t.backend_window: the node's adaptive window. */
#define SCENARIO_WINDOW_AUTO (-1)

typedef struct {
    char *name;
    char *host;          /* where bqos-load sends requests */
    int port;
    char *backend_host;  /* where the preload goes (the node's memcached); */
    int backend_port;    /* same as host/port when "backend" is absent */
    /* bqos-sim only ("speed"): from period speed[i].from_period on, the
     * server serves at factor x its capacity (periods ascending); none:
     * always 1. */
    size_t nspeed;
    struct scenario_speed { int from_period; double factor; } *speed;
} scenario_server_t;

/* From time `at` (seconds since the start) on, the bucket is active on
 * servers[0..n-1] (indexes into scenario_t.servers, ascending, distinct). */
typedef struct {
    double at;
    int n;
    int *servers;
} scenario_phase_t;

typedef struct {
    char *name;          /* key prefix: "NAME:objK" */
    double reservation;  /* IOs/s, >= 0 */
    double limit;        /* IOs/s >= reservation, or SCENARIO_NO_LIMIT */
    int outstanding;     /* requests in flight per active server */
    double rate;         /* open loop: total IOs/s over its servers; 0 = closed loop */
    double split_zipf;   /* open loop: Zipf exponent of the split over servers */
    size_t nphases;      /* >= 1; phases[0].at == 0, strictly increasing */
    scenario_phase_t *phases;
    int max_active;      /* largest phase */
    /* bqos-sim only ("set"): from the start of period sets[i].period on,
     * the bucket's reservation and limit are these, as if `bqos-ctl set`
     * ran then (periods increasing, >= 1). */
    size_t nsets;
    struct scenario_set { int period; double reservation, limit; } *sets;
    int parent;          /* "parent": index of its parent bucket (nested
                            buckets, issue 28), -1 none.  A parent is a
                            bucket like the others in the file; give it no
                            load ("servers": [], "changes": []): requests
                            land only in leaves */
    uint32_t weight;     /* "weight" (1..1,000,000; 0: not given, 1): the
                            controller's bucket weight (bqos-sim; fair
                            shares, issue 28) */
} scenario_bucket_t;

typedef struct {
    double duration;     /* seconds of load, > 0 */
    double period;       /* QoS period in seconds, > 0 */
    int intervals;       /* redistribution intervals per period, >= 1 */
    int warmup_periods;  /* periods left out of the summary */
    uint64_t seed;
    double capacity;     /* IOs/s of one server, 0 if unknown */
    double get_ratio;    /* share of gets, the rest are sets */
    size_t value_size;   /* bytes per set */
    size_t preload;      /* objects written to each server before the run */
    size_t keys;         /* objects per bucket (key space), >= 1 */
    int timeout_ms;      /* per request */
    double rtt_ms;       /* bqos-sim: the client's network round trip (workload
                            "rtt_ms"): a closed-loop client sends its next
                            request this long after one completes; 0 */
    /* bqos-sim's backend model ("backend": {"window", "service_cv"}):
     * window 0 (absent): the node serves one IO at a time straight from
     * the scheduler; K > 0: up to K IOs sit in the backend's FIFO behind
     * the scheduler; SCENARIO_WINDOW_AUTO: the node's adaptive window
     * (storage-node/core/window.h, bqos-node's --outstanding auto
     * defaults).  backend_parallel: IOs the backend serves at once (its
     * latency is flat up to that many; 1).  service_cv < 0 (absent):
     * service times uniform in (1 +- spread) / C; >= 0: lognormal with
     * this coefficient of variation.  backend_headroom: with "auto", the
     * window's reserved headroom (window_config_t.headroom, bqos-node's
     * --window-headroom); < 0 (absent): its default. */
    int backend_window;
    int backend_headroom;
    int backend_parallel;
    double service_cv;
    size_t nservers;
    scenario_server_t *servers;
    size_t nbuckets;
    scenario_bucket_t *buckets;
} scenario_t;

/* Command-line overrides applied while loading (0 / negative = keep). */
typedef struct {
    double capacity;     /* > 0: replaces "capacity" */
    double duration;     /* > 0: replaces "duration" */
    long long preload;   /* >= 0: replaces workload.preload; < 0 keep */
    long long seed;      /* >= 0: replaces "seed"; < 0 keep */
    /* "NAME=HOST:PORT" or "NAME=HOST:PORT,BACKEND_HOST:PORT": replaces
     * server NAME's address and backend (the backend is the address when
     * not given); borrowed strings. */
    const char *const *servers;
    size_t nservers;
} scenario_opts_t;

#define SCENARIO_OPTS_DEFAULT ((scenario_opts_t){0, 0, -1, -1, NULL, 0})

/* Where and why a scenario was rejected is a jsonloc_err_t (common/jsonloc):
 * print it as "SOURCE:LINE:COL: TEXT" (line 0 when unknown).  Semantic
 * errors point at the value's first character, set `path` and TEXT starts
 * with the path too ("buckets[2].limit: limit ... is below ..."); syntax
 * errors carry jansson's text and position (the offending token's last
 * character; column 0 for an empty text).
 *
 * Parses and validates `len` bytes of scenario JSON; `source` names the text
 * in errors (NULL: "<string>"), `opts` may be NULL.  Returns 0 and stores a
 * new scenario in *out (caller owns it, free with scenario_destroy());
 * -EINVAL for a bad scenario (err filled if non-NULL); -ENOMEM.  Rejected:
 * malformed JSON, unknown keys, wrong types, out-of-range numbers, "N%" rates
 * without a capacity, unknown or duplicate server names, duplicate bucket
 * names or names unusable as key prefixes, limit < reservation, rates over
 * the bucket file's maximum (BUCKETFILE_MAX_RATE), changes out
 * of order or outside the run, no buckets at all, a server override that
 * names no server or has a bad address (reported at line 0). */
int scenario_parse(const char *text, size_t len, const char *source,
                   const scenario_opts_t *opts, scenario_t **out, jsonloc_err_t *err);

/* Reads file `path` and parses it as scenario_parse() with `path` as the
 * source.  Returns as scenario_parse(), or -errno if the file cannot be read
 * (err filled). */
int scenario_load(const char *path, const scenario_opts_t *opts, scenario_t **out,
                  jsonloc_err_t *err);

/* Frees a scenario and sets *sp to NULL.  Accepts NULL and *sp == NULL. */
void scenario_destroy(scenario_t **sp);

/* Returns the phase of bucket `b` in force at time `t` (seconds). */
const scenario_phase_t *scenario_phase_at(const scenario_bucket_t *b, double t);

/* Returns the start of the first phase of `b` after time `t`, or +infinity. */
double scenario_next_change(const scenario_bucket_t *b, double t);

/* Writes the controller's bucket reservation file for the scenario to `f`
 * with common/bucketfile's writer (bucketfile_dumps(): one bucket per line,
 * {"name", "reservation", "limit", "weight"[, "parent"]}; integer IOs/s, the reservation
 * rounded down and the limit up, no "limit" for unlimited buckets, weight
 * 1).  Returns 0, -EIO if writing fails, -ENOMEM, or -EINVAL if a bucket is
 * outside the bucket file's bounds (scenario_parse() refuses those). */
int scenario_write_buckets(const scenario_t *s, FILE *f);

#endif
