/* dyn.h - template-made buckets held cluster-wide: the controller's registry of the buckets its template rules made at the nodes (name, rule, R, L, last activity), bounded per rule and in all (issue 27).
 *
 * A template rule ("template": "u-{user}") makes one bucket per matched
 * entity at the node that classifies the request; the controller sees the
 * name only in that node's reports.  ctrl.c notes every reported name its
 * configured table lacks (dyn_note()): a name some template rule could
 * have made (rules_template_made(), the rules in order; the smallest limit
 * of all templates that could have made it and the smallest R, so an ambiguous name is held
 * to the strictest) becomes a dynamic bucket with that rule's R and L,
 * placed by the passes like any configured bucket.  Idle for idle_periods
 * periods (no record with arrivals, queue or service from any node), it
 * is dropped (dyn_expire()); its next request makes it again.
 *
 * Bounds: at most max_total entries, at most max_rule per rule; a name
 * past either is refused (counted: dyn_stats_t.refused) and the node holds
 * it at no tokens (fail closed).  Entries are kept in insertion order; the
 * index of an entry is stable until the next dyn_expire() or dyn_retain().
 *
 * Owned by one thread (the controller's loop); no locks. */
#ifndef BQOS_DYN_H
#define BQOS_DYN_H

#include <stddef.h>
#include <stdint.h>

#include "common/rules.h"

#define DYN_MAX_TOTAL 4096 /* default bound on dynamic buckets in all */
#define DYN_MAX_RULE 1024  /* default bound per template rule */
#define DYN_IDLE_PERIODS 30 /* default: dropped after this many idle periods */

typedef struct {
    const char *name;      /* owned by the registry */
    int rule;              /* the template rule that made it */
    int64_t reservation;   /* IOs per second (what the rule says; the
                              controller may hold it at 0: admission) */
    int64_t limit;         /* IOs per second, RULES_NO_LIMIT: none */
    uint64_t active;       /* last period with activity */
} dyn_entry_t;

typedef struct {
    uint64_t made;         /* entries made */
    uint64_t expired;      /* dropped for idleness */
    uint64_t refused;      /* names past a bound */
    uint64_t dropped;      /* dropped by a rules change (no template makes
                              them now, or a configured bucket took the name) */
} dyn_stats_t;

typedef struct dyn dyn_t;

/* A new empty registry (max_total, max_rule >= 1; idle_periods >= 1), or
 * NULL (bad bounds, out of memory).  Caller owns it. */
dyn_t *dyn_new(size_t max_total, size_t max_rule, uint64_t idle_periods);

/* Frees *dp and sets it NULL.  Accepts NULL. */
void dyn_destroy(dyn_t **dp);

/* A name the configured table lacks, reported active in period `period`:
 * if an entry holds it, it is touched (returns 0); else if a template rule
 * of `r` could have made it, an entry is made with that rule's figures
 * (returns 1: the table must change); else returns 0 (not a template's:
 * the unconfigured traffic it was).  -ENOSPC past a bound (counted),
 * -ENOMEM.  O(templates x name) for a new name, O(1) for a known one. */
int dyn_note(dyn_t *d, const rules_t *r, const char *name, uint64_t period);

/* Entry i was active in `period` (a record of it from some node). */
void dyn_touch(dyn_t *d, size_t i, uint64_t period);

/* Drops the entries idle since before period - idle_periods + 1.  Returns
 * how many were dropped (the table must change if > 0).  O(entries). */
size_t dyn_expire(dyn_t *d, uint64_t period);

/* After a rules or table change: keeps the entries some template rule of
 * `r` still makes and for which keep(arg, name) is nonzero (the caller's
 * configured table lacks the name), with the rules' current figures.
 * Returns how many were dropped. */
size_t dyn_retain(dyn_t *d, const rules_t *r, int (*keep)(void *arg, const char *name),
                  void *arg);

/* Entries (0 .. dyn_count() - 1) and the counters. */
size_t dyn_count(const dyn_t *d);
const dyn_entry_t *dyn_get(const dyn_t *d, size_t i);
int dyn_find(const dyn_t *d, const char *name); /* index or -ENOENT; O(1) */
const dyn_stats_t *dyn_stats(const dyn_t *d);

#endif
