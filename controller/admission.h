/* admission.h - Haechi admission control for bucket configurations: the aggregate and the per-bucket (local) capacity constraints.
 *
 * A configuration is admissible if the sum of all reservations fits the
 * cluster's estimated capacity, and every bucket's reservation fits the
 * capacity of the servers where it is placed (known from the nodes'
 * reports; a bucket with unknown placement is only held to the aggregate
 * constraint).  Both units are checked so: reservations in IOs per second
 * against capacities in IOs per second, byte reservations
 * (reservation_bytes) against the nodes' byte capacities.  With no
 * capacity known at all (no node registered yet) nothing can be judged and
 * every configuration passes with a note; so do byte reservations while
 * the byte capacity is unknown.
 *
 * Nested buckets (issue 28), whatever the capacity: a parent's children's
 * reservations must add up to at most the parent's limit (in each unit);
 * a parent's reservation below its children's sum is allowed and noted (it
 * adds no floor beyond theirs).  The aggregate counts a tree once: at each
 * parent max(its reservation, what its children need), not both.  Pure
 * functions; the running sums a caller keeps for admission_check_change()
 * are its own (they know no trees: a change in a table with parents is
 * judged by admission_check()).
 */
#ifndef BQOS_ADMISSION_H
#define BQOS_ADMISSION_H

#include <stddef.h>

#include "common/bucketfile.h"

typedef enum {
    ADMISSION_WARN = 0,   /* log violations, accept the configuration */
    ADMISSION_ENFORCE = 1 /* refuse a configuration that violates */
} admission_mode_t;

/* Parses "warn" or "enforce".  Returns 0 or -EINVAL. */
int admission_parse_mode(const char *s, admission_mode_t *out);

/* What the controller knows about the cluster. */
typedef struct {
    double total_capacity; /* IOPS of the live servers; <= 0: unknown */
    /* IOPS of the live servers holding bucket `name`, or < 0 if unknown.
     * May be NULL (no placement known for any bucket). */
    double (*bucket_capacity)(const char *name, void *arg);
    void *arg;
    /* The same in bytes per second, for the byte reservations (0 / NULL:
     * unknown). */
    double total_byte_capacity;
    double (*bucket_byte_capacity)(const char *name, void *arg);
} admission_view_t;

/* Checks `bf` against the view.  Returns 0 if admissible (or nothing can be
 * judged), -EDQUOT if a constraint is violated.  `msg` (may be NULL)
 * receives a one-line explanation: the violations found (at most four,
 * each naming its unit, IOs/s or bytes/s), or a note why the check could
 * not be made, or "" if all is well. */
int admission_check(const bucketfile_t *bf, const admission_view_t *view, char *msg,
                    size_t msgsize);

/* Running sums of a table's reservations, kept by the caller across
 * changes so that a change to one bucket is judged in O(1): exact
 * integers (a million buckets at the largest rates fit). */
typedef struct {
    __int128 reservation;       /* IOs per second */
    __int128 reservation_bytes; /* bytes per second */
    size_t with_bytes;          /* buckets with a byte reservation */
} admission_sums_t;

/* The sums of table bf.  O(buckets). */
void admission_sums_init(admission_sums_t *s, const bucketfile_t *bf);

/* Adds bucket *b to the sums (sign +1) or takes it out (sign -1).  A
 * change of a bucket is its old row out, its new row in. */
void admission_sums_add(admission_sums_t *s, const bucketfile_bucket_t *b, int sign);

/* admission_check() of a table after one change, from its sums `after`:
 * the aggregate constraints in both units, and the local one of
 * `changed` (the bucket set; NULL for a removal), not the other
 * buckets' (they were judged when they changed; a full check is
 * admission_check()).  Returns and fills msg as admission_check(). */
int admission_check_change(const admission_sums_t *after, const bucketfile_bucket_t *changed,
                           const admission_view_t *view, char *msg, size_t msgsize);

#endif
