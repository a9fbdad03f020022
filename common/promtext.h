/* promtext.h - the Prometheus text exposition format 0.0.4 writer: HELP and TYPE lines, samples with escaped labels, counters, gauges and cumulative histograms, into one reusable buffer.
 *
 *   promtext_t *p = promtext_new();
 *   promtext_family(p, "bqos_x_total", PROMTEXT_COUNTER, "What x counts.");
 *   promtext_label_t l[] = {{"bucket", "red"}};
 *   promtext_u64(p, l, 1, 42);                 -> bqos_x_total{bucket="red"} 42
 *   ...
 *   if (promtext_error(p) == 0) send promtext_data(p, &len)
 *   promtext_reset(p);                          (next scrape: memory kept)
 *
 * Errors are sticky: a bad metric or label name (-EINVAL) or out of memory
 * (-ENOMEM) makes every later call a no-op and promtext_error() say so,
 * so a renderer checks once at the end.  A promtext_t belongs to one
 * thread at a time; nothing here locks. */
#ifndef BQOS_PROMTEXT_H
#define BQOS_PROMTEXT_H

#include <stddef.h>
#include <stdint.h>

/* The Content-Type of what promtext writes. */
#define PROMTEXT_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

typedef enum { PROMTEXT_COUNTER, PROMTEXT_GAUGE, PROMTEXT_HISTOGRAM } promtext_type_t;

/* One label: a name [a-zA-Z_][a-zA-Z0-9_]* (not "le") and any value (escaped
 * on output). */
typedef struct {
    const char *name, *value;
} promtext_label_t;

typedef struct promtext promtext_t;

/* Returns an empty writer (caller owns it; promtext_destroy()), or NULL
 * when out of memory. */
promtext_t *promtext_new(void);

/* Frees *pp and sets it to NULL.  Accepts NULL. */
void promtext_destroy(promtext_t **pp);

/* Empties the text and clears the error; the buffer's memory is kept for
 * the next scrape. */
void promtext_reset(promtext_t *p);

/* Starts a metric family: "# HELP name help" (help escaped) and "# TYPE
 * name type".  The samples that follow are this family's.  `name` must
 * match [a-zA-Z_:][a-zA-Z0-9_:]* (counters by convention end in _total).
 * Returns promtext_error(). */
int promtext_family(promtext_t *p, const char *name, promtext_type_t type, const char *help);

/* One sample of the current counter or gauge family with labels l[0..n-1]
 * (n may be 0) and value v: integers below 2^53 exactly, NaN and
 * infinities as NaN, +Inf, -Inf.  Returns promtext_error() (-EINVAL also
 * outside a counter or gauge family). */
int promtext_value(promtext_t *p, const promtext_label_t *l, size_t n, double v);

/* The same with an exact integer value. */
int promtext_u64(promtext_t *p, const promtext_label_t *l, size_t n, uint64_t v);

/* One histogram of the current histogram family: `nb` upper bounds
 * bounds[0] < ... < bounds[nb-1], counts[0..nb] the observations per
 * bucket, NOT cumulative (counts[i]: bounds[i-1] < v <= bounds[i];
 * counts[nb]: above the last bound), and the sum of the observations.
 * Writes the cumulative _bucket series with le="..." up to le="+Inf",
 * then _sum and _count.  Returns promtext_error(). */
int promtext_histogram(promtext_t *p, const promtext_label_t *l, size_t n, const double *bounds,
                       size_t nb, const uint64_t *counts, double sum);

/* Where v falls among `nb` ascending upper bounds: the first i with
 * v <= bounds[i], or nb.  For histograms kept by the caller. */
size_t promtext_bucket(const double *bounds, size_t nb, double v);

/* 0, or the first error (-EINVAL, -ENOMEM) since the last reset. */
int promtext_error(const promtext_t *p);

/* The text so far (NUL-terminated; owned by p, valid until the next call
 * that writes, resets or destroys) and its length in *len if len. */
const char *promtext_data(const promtext_t *p, size_t *len);

#endif
