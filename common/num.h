/* num.h - the one place that turns command-line and text numbers into values: whole string, decimal, no silent wrap. */
#ifndef BQOS_NUM_H
#define BQOS_NUM_H

#include <stdint.h>

/* All parsers take a NUL-terminated string, accept it only whole (no
 * leading blanks, no trailing text) and return 0 with *out set, -EINVAL
 * for text that is not such a number, or -ERANGE for a number outside the
 * type or the given bounds; *out is left alone on error.  Pure functions:
 * any thread may call them. */

/* A signed decimal integer: optional '-', then digits (no '+'). */
int num_i64(const char *s, int64_t *out);

/* An unsigned decimal integer: digits only (a '-' is -EINVAL, not a wrap). */
int num_u64(const char *s, uint64_t *out);

/* A finite decimal or scientific number as strtod(3) reads it ("0.5",
 * "1e6", "-2"); "nan", "inf" and numbers that overflow or underflow are
 * refused. */
int num_double(const char *s, double *out);

/* A duration in seconds: a number with an optional unit "s" (the default)
 * or "ms", e.g. "2", "2s", "500ms". */
int num_duration(const char *s, double *out);

/* A size in bytes: an unsigned integer with an optional suffix k, m, g or
 * t (either case, powers of 1024), e.g. "64k", "1m"; -ERANGE past 2^64. */
int num_bytes(const char *s, uint64_t *out);

/* num_i64() within [lo, hi]. */
int num_i64_in(const char *s, int64_t lo, int64_t hi, int64_t *out);

/* num_double() within [lo, hi]. */
int num_double_in(const char *s, double lo, double hi, double *out);

#endif
