/* tree.h - nested buckets (issue 28): the bucket tree of a configuration and, each round, the split of a parent's limit and reservation into its leaves' effective budgets, for either dimension of the ledger.
 *
 * A bucket may name a parent (common/bucketfile, "parent").  A parent's
 * limit L bounds the sum of its children's service across the cluster
 * (each child's own limit still holds) and its reservation R is a floor
 * for that sum.  Requests land only in leaves: a parent has no queue of its
 * own; the controller pushes it R 0 and L 0 everywhere.
 *
 * How (docs/controller.md, "Nested buckets"): each round, after the ledger's
 * per-bucket budgets (headroom and remaining reservation, ledger.h), the
 * tree's hook (tree_budgets(), called by ledger_rpass() through
 * ledger_round_t.nest) works bottom-up: a parent's served, held, demand and
 * backlog are the sums of its children's, and its own budget is the
 * ledger's rule on those sums with its own rates.  Then top-down, each
 * parent's headroom is water-filled among its children by weight: first
 * each child's own reservation left (up to its demand: a child's R holds
 * under its parent's limit), then up to each child's demand, then up to its own headroom among the children
 * with demand, then among the others; never more than the parent's
 * headroom in all.  The parent's remaining reservation beyond what its
 * children with demand hold of their own goes, by weight, to those
 * children up to their demand.  A leaf's headroom and remaining reservation
 * become these effective values, and the ledger's passes run on them
 * unchanged: what each leaf can be served in the period is at most its
 * served + held + headroom (the ledger's guarantee), so the sum over a
 * parent's leaves is at most the parent's served + held + headroom <= its
 * limit, the same argument as a bucket's own limit; the nodes see leaf
 * tokens only (fail static unchanged).
 *
 * A tree_t belongs to the thread that owns the ctrl_t it hangs from (like
 * the ledger); nothing locks. */
#ifndef BQOS_TREE_H
#define BQOS_TREE_H

#include <stddef.h>
#include <stdint.h>

#include "common/bucketfile.h"
#include "controller/ledger.h"

typedef struct tree tree_t;

/* The dimensions: IOs (reservation, limit) and bytes per second
 * (reservation_bytes, limit_bytes). */
enum { TREE_IO = 0, TREE_BYTES = 1 };

/* Builds the tree of bf's buckets for a period of period_s seconds.  If no
 * bucket of bf names a parent, stores NULL in *out (nothing to do, nothing
 * costs).  Returns 0, -EINVAL if a parent is unknown or the parents make a
 * cycle or a chain deeper than BUCKETFILE_MAX_DEPTH (bucketfile refuses
 * those first), or -ENOMEM.  Caller owns *out (tree_destroy()). */
int tree_new(const bucketfile_t *bf, double period_s, tree_t **out);

/* Frees the tree and sets *tp to NULL.  Accepts NULL and *tp == NULL. */
void tree_destroy(tree_t **tp);

/* Bucket b's parent's index, or -1 (none, or t NULL). */
int tree_parent(const tree_t *t, size_t b);

/* Nonzero if bucket b is a parent (some bucket names it). */
int tree_is_parent(const tree_t *t, size_t b);

/* The number of bucket b's children, and the k-th of them (bucket index,
 * -1 if out of range) in the configuration's order. */
int tree_nchildren(const tree_t *t, size_t b);
int tree_child(const tree_t *t, size_t b, int k);

/* The static limit of bucket b in dimension `dim` (tokens per period,
 * CTRL_UNLIMITED: none) given its own `own`: a leaf without a limit of its
 * own under a limited ancestor is limited by the smallest ancestor limit
 * (the rounds then cut it to its share), so that the ledger throttles it.
 * Returns `own` for a bucket outside any tree or with t NULL. */
int64_t tree_static_limit(const tree_t *t, int dim, size_t b, int64_t own);

/* Nonzero (and the first such bucket's index in *bad) if some leaf has no
 * limit in dimension `dim` under an ancestor that has one.  Bytes: such a
 * configuration is refused (ctrl_check_buckets()), since a bucket without
 * a byte rate gets no byte tokens at all. */
int tree_unlimited_under_limit(const tree_t *t, int dim, size_t *bad);

/* The argument of ledger_round_t.nest for dimension `dim` (TREE_IO or
 * TREE_BYTES); valid while t lives. */
void *tree_dim(tree_t *t, int dim);

/* ledger_round_t.nest: the nested budgets of one round for the ledger L
 * (whose buckets are the configuration's, same indices), `arg` from
 * tree_dim().  Reads each leaf's served, held, backlog, remaining
 * reservation and headroom (ledger_budgets()) and its pairs' demands on the
 * up nodes (L's work arrays, ledger_caps() done); writes each leaf's
 * effective remaining reservation and headroom, and a parent's to nothing
 * (R 0; headroom 0, or CTRL_UNLIMITED if it has no limit in this
 * dimension).  Costs O(tree members + the up nodes' work entries). */
void tree_budgets(ledger_t *L, void *arg);

/* What the last tree_budgets() of dimension `dim` worked out for bucket b
 * (a member of the tree): its (subtree's) served this period, and its
 * effective remaining reservation and headroom.  Returns 0, or -ENOENT if b
 * is not in the tree (or t NULL).  For the status. */
typedef struct {
    int64_t served, demand, r_rem, head;
} tree_info_t;
int tree_info(const tree_t *t, int dim, size_t b, tree_info_t *out);

#endif
