/* ltable.h - bqos-controller's bucket table in etcd (leader.h's "The bucket table": the keys, the claim, the rules), kept in the leader_t it belongs to: following it at each poll, whole tables written a step at a time, one change in one transaction.
 *
 * For leader.c only: it calls these from leader_poll() and its public
 * writes, on the loop thread, after its own checks (leading, the lease). */
#ifndef BQOS_LTABLE_H
#define BQOS_LTABLE_H

#include <stddef.h>
#include <stdint.h>

#include "controller/daemon/leader.h"

/* Follows the table whose head the poll read as `hk` (its value read) at
 * etcd's revision `hdr`, at `now` (our clock): replays what changed
 * (hooks.change) or reads it whole (hooks.apply), waits for a whole write
 * in progress (or takes it over, stuck for a lease or older than ours),
 * restores ours over an older one, creates it when missing (from an old
 * single table key first, if there is one).  Errors are logged; the next
 * poll tries again. */
void ltable_follow(leader_t *ld, const etcd_kv_t *hk, int64_t hdr, double now);

/* Runs the whole table being written (ld->job, if any) for about
 * LEADER_STEP_S. */
void ltable_step(leader_t *ld);

/* Writes `text` whole, to its end, on the head as last applied and our
 * leader key: leader_write_buckets()'s returns, but for -EPERM. */
int ltable_write(leader_t *ld, const char *text, size_t len);

/* One change (json NULL: bucket `name` removed) in one transaction:
 * leader_put_bucket()'s returns, but for -EPERM. */
int ltable_change(leader_t *ld, const char *name, const char *json, size_t len,
                  uint64_t version);

/* Frees the table's state in ld (its job, its head).  Accepts a zeroed ld. */
void ltable_clear(leader_t *ld);

#endif
