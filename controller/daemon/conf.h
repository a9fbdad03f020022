/* conf.h - bqos-controller's configuration in force and its changes: the bucket table, its journal, the admission sums and the changes parked until their journal line is durable; set, remove, replace, reload and etcd's changes applied to the table, etcd, the file and ctrl.
 *
 * The admin endpoint's commands (controller/daemon/admin.c), SIGHUP and the
 * election's hooks (leader_hooks_t) change the configuration through this
 * module only.  Without etcd a set or remove is made to the table and to
 * ctrl at once and its line queued for the journal's writer
 * (common/bucketjournal); the change is parked (controller/daemon/parked)
 * and its reply, handed over with conf_hold_reply(), goes out through the
 * reply callback once the line is durable (or the error once it failed, the
 * change undone): the caller knows sockets and the reply's format, this
 * module neither.  With etcd (conf_set_leader()) only the leader changes the
 * table: etcd first, then the table, ctrl and the file (etcd's backup).
 *
 * Errors of a change are said as the admin protocol's error codes
 * (docs/controller.md): "invalid", "admission", "file_changed", "io",
 * "busy", "not_leader", "internal", with a message.
 *
 * A conf_t belongs to the controller's loop thread, as does everything it
 * borrows (and the reply callback runs there); nothing locks. */
#ifndef BQOS_CONF_H
#define BQOS_CONF_H

#include <stddef.h>
#include <stdint.h>

#include "common/bucketfile.h"
#include "common/bucketjournal.h"
#include "controller/admission.h"
#include "controller/ctrl.h"
#include "controller/reshard.h"
#include "controller/daemon/leader.h"
#include "controller/daemon/parked.h"

/* A parked change is finished: its reply goes behind `to` (the envelope
 * given to conf_hold_reply(), borrowed for the call).  Durable: `held` is
 * the reply conf_hold_reply() handed over (owned by the callee from now on;
 * NULL if none was held) and code is NULL.  Not acknowledged: held is NULL
 * and `code`, `msg` (borrowed) say why: "io" (the journal's write failed;
 * the change is undone) or "stopping" (conf_answer_stopping()). */
typedef void (*conf_reply_fn)(void *arg, const parked_env_t *to, char *held, const char *code,
                              const char *msg);

typedef struct {
    const char *path;        /* the bucket file (borrowed, for the life of
                                the conf_t) */
    admission_mode_t mode;   /* what a refused admission does */
    ctrl_t *ctrl;            /* borrowed */
    int shards, shard;       /* controller shards (0: none): the table is
                                the whole cluster's, ctrl holds only the
                                buckets of shard `shard` (shardmap_of()); a
                                change to another shard's bucket is made to
                                the table (etcd, the file) and left out of
                                ctrl */
    const reshard_t *rs;     /* shards, K changing at run time: the part
                                ctrl runs is reshard_mine()'s; NULL:
                                shardmap_of(name, shards).  Borrowed */
    conf_reply_fn reply;     /* a parked change's reply; NULL: dropped */
    void *arg;               /* reply's */
} conf_config_t;

typedef struct conf conf_t;

/* A configuration whose table in force is `bf` (owned: taken, also when
 * this fails; NULL: none yet), as the caller gave it to ctrl.  Nothing is
 * read or written: the journal is opened at the first change.  Returns the
 * conf_t (caller owns it: conf_destroy()), or NULL when out of memory. */
conf_t *conf_new(const conf_config_t *cfg, bucketfile_t *bf);

/* Frees the table, the journal and the parked ring; sets *cp to NULL
 * (accepts NULL and *cp == NULL).  Changes still parked are dropped
 * unanswered (conf_answer_stopping() first while their replies can still
 * go out); a compaction in progress is waited for, but a journal whose
 * writer is still in a slow fdatasync is left to the exit (not freed: the
 * process does not wait for the disk).  Loop thread. */
void conf_destroy(conf_t **cp);

/* With etcd: `ld` (borrowed; NULL: none) holds the table, and only its
 * leader changes it; the table's version is noted in ld->table_version. */
void conf_set_leader(conf_t *c, leader_t *ld);

/* The table in force (borrowed: valid until the next change, reload or
 * apply), or NULL (also for c NULL). */
const bucketfile_t *conf_table(const conf_t *c);

/* ctrl_set_buckets(ctrl, bf), or with shards of bf's buckets of this shard
 * and its rules (a copy; bf is borrowed).  A table with parents is refused
 * with shards (-ENOTSUP: a tree would have to live in one shard; not
 * done).  Returns 0, -ENOTSUP, -ENOMEM or ctrl_set_buckets()'s error.  For
 * the start and a change of the shards' map. */
int conf_set_ctrl_buckets(conf_t *c, const bucketfile_t *bf);

/* Logs the rule analysis's warnings (rules_analyze(): rules that can never
 * match, ambiguous templates) of bf's rules, each line prefixed with
 * `source` (the file); nothing without rules.  Called when a table with
 * changed rules is applied, and by the daemon for the file it starts
 * with. */
void conf_log_rules(const bucketfile_t *bf, const char *source);

/* Whether the table in force violates admission now (warn mode accepted
 * it, or capacity went since).  `quick`: the aggregate only, from the sums
 * (O(1)); else every bucket.  Returns 1 with msg filled, or 0 (also
 * without a table). */
int conf_warning(conf_t *c, int quick, char *msg, size_t size);

/* What a replacement of the table by `bf` (borrowed) would meet, judged as
 * conf_replace() judges it but nothing written, applied or logged: NULL
 * when it would pass (*warned 1 and msg filled when admission in warn mode
 * would let it through a violation, else 0), or the error code
 * ("file_changed", "io", "admission") with msg filled. */
const char *conf_check(conf_t *c, const bucketfile_t *bf, char *msg, size_t size, int *warned);

/* Bucket *b (borrowed; the caller checked it: bucketfile_check_bucket())
 * set: created or changed.  Without a parent and a tree, in place (O(1) in
 * the table's size, admission judged from the sums); else the table whole
 * (conf_replace()'s way, after the parked changes settled).  With etcd it
 * is written there first (acknowledged once etcd has it).  Without etcd
 * the change is made to the table and ctrl and its line queued for the
 * journal: *parked is 1, and the caller hands the reply over with
 * conf_hold_reply() before anything else changes the configuration; it goes
 * out through the reply callback once durable.  A refused change leaves the
 * table as it was.  Returns NULL (done or parked), or the error code with
 * msg filled ("busy" past PARKED_MAX parked changes). */
const char *conf_set(conf_t *c, const bucketfile_bucket_t *b, int *parked, char *msg,
                     size_t size);

/* Bucket `name` removed, as conf_set() sets one; "not_found" when the
 * table has no such bucket, "invalid" when it is a parent. */
const char *conf_remove(conf_t *c, const char *name, int *parked, char *msg, size_t size);

/* The table replaced by `bf` (owned, consumed): validated, admitted,
 * persisted (etcd first with a leader; the file, or through its journal),
 * then applied.  A bucket file changed by hand since it was last loaded or
 * written is not overwritten: refused (file_changed) until a reload.
 * Returns NULL, or the error code with msg filled (the table unchanged).
 * The caller settles the parked changes first (conf_settle()). */
const char *conf_replace(conf_t *c, bucketfile_t *bf, char *msg, size_t size);

/* The reply of the change conf_set() or conf_remove() just parked: `text`
 * (owned, taken; NULL: out of memory) to go behind `to` (copied).  Nothing
 * when nothing is parked. */
void conf_hold_reply(conf_t *c, char *text, const parked_env_t *to);

/* How many changes are parked (0 for NULL). */
size_t conf_waiting(const conf_t *c);

/* Re-reads the bucket file and, if it is valid and admitted, makes it the
 * configuration (the parked changes settled first; with etcd, at the leader
 * only: written there first).  Returns NULL, or the name of the error
 * ("not_leader", "invalid", "io", "admission", "internal") with `msg`
 * filled; the configuration is then unchanged.  Logs the outcome.  For
 * SIGHUP and the reload command. */
const char *conf_reload(conf_t *c, char *msg, size_t size);

/* The table key in etcd holds `text` (`len` bytes, borrowed) at revision
 * `rev`: parse it, make it the configuration (no admission: the leader
 * admitted it) and export it to the bucket file if that differs.  Returns 0,
 * -ESTALE (older than ours: not applied) or -errno (logged; the
 * configuration is then unchanged).  For leader_hooks_t.apply. */
int conf_apply_text(conf_t *c, const char *text, size_t len, int64_t rev);

/* One change of etcd's table at revision `rev`: bucket `name` is now the
 * bucket file element `json` (`len` bytes, borrowed), or removed (json
 * NULL), and the table's version `version`.  Applied as conf_apply_text()
 * applies a table (no admission; exported to the file).  Returns 0, -ESTALE
 * (`version` older than ours: not applied), -EINVAL (not a bucket of that
 * name) or -errno (logged; unchanged).  For leader_hooks_t.change. */
int conf_apply_bucket(conf_t *c, const char *name, const char *json, size_t len,
                      uint64_t version, int64_t rev);

/* The journal's eventfd for the loop's poll (readable when parked changes
 * became durable or failed), or -1 when there is no journal. */
int conf_journal_fd(const conf_t *c);

/* Fills *st with the journal's figures.  Returns 0, or -ENOENT when there
 * is no journal (*st untouched). */
int conf_journal_stats(const conf_t *c, bucketjournal_stats_t *st);

/* Replies to the parked changes the journal finished, through the reply
 * callback: the reply held for a durable one; for a failed one (and every
 * change parked after it, made on top of it) the change is undone in the
 * table and ctrl, newest first, and the reply is the error "io". */
void conf_journal_done(conf_t *c);

/* Waits at most timeout_s (< 0: no bound) for the parked changes, then
 * conf_journal_done().  Returns how many are still parked.  For a
 * whole-table change and the stop. */
size_t conf_settle(conf_t *c, double timeout_s);

/* Answers every change still parked with the error "stopping" through the
 * reply callback (not acknowledged: its line was handed to the writer and
 * may or may not reach the file) and logs how many.  For the stop; nothing
 * for NULL. */
void conf_answer_stopping(conf_t *c);

#endif
