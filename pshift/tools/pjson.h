/* pjson.h - read pShift problems from JSON and write problems and solutions as JSON (jansson). */
#ifndef BQOS_PJSON_H
#define BQOS_PJSON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "common/jsonloc.h"
#include "pshift/pshift.h"

/* "No limit" marker in pjson_input_t.limits. */
#define PJSON_NO_LIMIT (-1)

/* A parsed solve input.  The caller owns both pointers; free them with
 * pjson_input_clear(). */
typedef struct {
    pshift_problem_t *problem; /* reservation problem: target = reservation */
    int64_t *limits;           /* per bucket: limit, or PJSON_NO_LIMIT */
    int has_limits;            /* nonzero if any bucket has a limit */
} pjson_input_t;

/* Parses a solve input document of `len` bytes at `text` (need not be NUL
 * terminated).  The format is
 *   {"servers":[{"name":S,"capacity":N},...],
 *    "buckets":[{"name":S,"reservation":N,"limit":N,"demand":{S:N,...}},...],
 *    "meta":ANY}
 * with `limit` and `meta` optional and every N a non-negative integer.  Every
 * problem is rejected with its position: malformed JSON, a missing or
 * unknown key, a wrong type, a negative or non-integer number, sums of
 * capacities, reservations, limits or demands that overflow int64_t, a demand
 * on an unknown server, duplicate names or keys, an empty or missing server
 * list, a limit below the reservation.
 * Returns 0 and fills *out (caller owns it); -EINVAL for a bad document
 * (err filled: line and col 0 when no position applies, path the offending
 * value or "", text what is wrong; source is not set); -ENOMEM.  `err` may
 * be NULL.  On error *out is zeroed. */
int pjson_parse(const char *text, size_t len, pjson_input_t *out,
                jsonloc_err_t *err);

/* Reads the whole file `path` ("-" means stdin) and parses it as
 * pjson_parse().  Returns 0, -EINVAL (bad document), -errno of open/read (err
 * filled with the reason), -ENOMEM. */
int pjson_read_file(const char *path, pjson_input_t *out, jsonloc_err_t *err);

/* Frees what `in` holds and zeroes it.  Accepts NULL. */
void pjson_input_clear(pjson_input_t *in);

/* Writes `p` (its servers, buckets, targets as reservations and demands) as
 * a solve input document to `f`, with `limits` (NULL, or one per bucket,
 * PJSON_NO_LIMIT for none) and an optional `meta` value (borrowed, may be
 * NULL).  `pretty` indents the output.  Unnamed servers and buckets are
 * written as "s<index+1>" and "b<index+1>".  The demands are read back through pshift_bucket_entry(), so
 * `p` must have been solved.  Returns 0, -EIO on a write error, -ENOMEM. */
int pjson_write_problem(FILE *f, const pshift_problem_t *p,
                        const int64_t *limits, json_t *meta, int pretty);

/* Writes the solution document of a solved reservation problem `p` to `f`:
 * {"phi","solve_seconds","allocation","stats"} and, when `lim` (the solved
 * limit-pass problem from pshift_residual_new(), or NULL) is given,
 * "limit_phi", "limit_allocation" and "limit_stats".  `solve_seconds` is the
 * sum of the passes' t_total.  Allocations list every server on which the
 * bucket has demand.  `pretty` indents the output (built as a jansson tree;
 * compact output is streamed, so it suits a million buckets).  Returns 0,
 * -EIO on a write error, -ENOMEM. */
int pjson_write_solution(FILE *f, const pshift_problem_t *p,
                         const pshift_problem_t *lim, int pretty);

#endif
