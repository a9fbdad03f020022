/* bucketjournal.h - the writer of a bucket file's journal: one fsync'ed line per change, folded into the file by a compaction in a worker thread.
 *
 * A change to a big bucket table costs one line appended to PATH.journal
 * and an fdatasync (acknowledged means durable), not a render and a
 * rewrite of the whole file: O(1) on the caller's thread.  The format and
 * the replay are common/bucketfile's (bucketfile.h, "the journal"); this
 * module owns the open journal, the identity of the file it extends, and
 * the compaction.
 *
 * Compaction: once the journal passes its bound (bucketjournal_new()), a
 * worker thread reads the file alone and the journal's first `upto` bytes
 * (what was there when it started), renders the table (bucketfile_save_ex:
 * a temporary file, fsync'ed), appends a marker naming the new file and
 * `upto`, renames the new file in place, then rewrites the journal to what
 * came after `upto` (a temporary journal renamed over it).  Every crash
 * point leaves a file and a journal that load to the same table (see
 * bucketfile.h).  The caller's thread never waits for it but for the
 * journal's lock, held for a line's append or the short rewrite of the
 * tail.  A file changed by hand meanwhile is not compacted over (warned;
 * the next change is refused as today until a reload).
 *
 * Appends: a writer thread (started by bucketjournal_new(), for the
 * journal's life) writes the lines queued by bucketjournal_queue_set() /
 * _remove() in their order, every line pending at once as one write and
 * one fdatasync (a group commit), and says so through an eventfd; the
 * owner collects what finished with bucketjournal_done().  The owner's
 * thread never waits for the disk: queueing, collecting and the stats take
 * a lock held for a few instructions.  At most BUCKETJOURNAL_PENDING_MAX
 * lines wait; a further one is refused (-EBUSY).  A failed write fails its
 * lines and every line queued after them (they were made on top of it):
 * none is written until the owner has collected the failure.
 *
 * Threads: every function runs on the one thread that owns the journal
 * (the controller's loop); the writer and the compaction worker share the
 * journal file and the file's identity with it under two mutexes. */
#ifndef BQOS_BUCKETJOURNAL_H
#define BQOS_BUCKETJOURNAL_H

#include <stddef.h>
#include <stdint.h>

#include "common/bucketfile.h"

typedef struct bucketjournal bucketjournal_t;

/* The default bound: a compaction starts when the journal passes the
 * larger of this and a quarter of the file's size (at a million buckets,
 * 75 MB: a compaction per ~250,000 changes; its cost, a parse and a render
 * of the file off the loop, is then amortised over them). */
#define BUCKETJOURNAL_COMPACT_MIN (1u << 20)

/* Opens the journal of bucket file `path` for appending (created if
 * missing, with the file's mode), for table `bf` (borrowed; what
 * bucketfile_load() read: its origin is the file the journal extends).  A
 * torn last line (a crash in an append) is cut off first.  compact_bytes:
 * the bound (0: the default above).  Returns 0 and the journal in *out
 * (caller destroys it), or -errno with msg filled. */
int bucketjournal_new(const char *path, const bucketfile_t *bf, size_t compact_bytes,
                      bucketjournal_t **out, char *msg, size_t size);

/* Waits for a compaction in progress and for the writer to write what is
 * pending (no bound: bucketjournal_flush() first for one), closes the
 * journal, frees it and sets *jp to NULL.  Accepts NULL. */
void bucketjournal_destroy(bucketjournal_t **jp);

/* The hand-edit check: 0 if the bucket file is still what the journal
 * extends (bucketfile_check_ident(): a stat; the content only if the stat
 * changed), else -ESTALE or -errno with msg filled. */
int bucketjournal_check(bucketjournal_t *j, char *msg, size_t size);

/* Lines waiting for the disk at most (queued, or being written). */
#define BUCKETJOURNAL_PENDING_MAX 32

/* Queues the set of bucket *b (the table's version after it: `version`, 0
 * none) for the writer.  Returns 0 with the change's ticket in *ticket
 * (1, 2, ... in the order of the calls), or -errno with msg filled and
 * nothing queued (ticket may be NULL: a line nobody waits for, as etcd's
 * backup): -EBUSY when BUCKETJOURNAL_PENDING_MAX lines are pending,
 * the failed write's error while one is not yet collected, -ENOMEM.  The
 * change is durable only once bucketjournal_done() says so. */
int bucketjournal_queue_set(bucketjournal_t *j, const bucketfile_bucket_t *b, uint64_t version,
                            uint64_t *ticket, char *msg, size_t size);

/* The same for the removal of bucket `name`. */
int bucketjournal_queue_remove(bucketjournal_t *j, const char *name, uint64_t version,
                               uint64_t *ticket, char *msg, size_t size);

/* An eventfd that is readable when the writer finished lines (for the
 * owner's poll); bucketjournal_done() empties it. */
int bucketjournal_fd(const bucketjournal_t *j);

typedef struct {
    uint64_t durable;      /* every ticket up to this one is durable */
    int rc;                /* < 0: tickets failed_from..failed_to are not
                              in the journal (undo them, newest first) */
    uint64_t failed_from, failed_to;
    char msg[256];         /* rc's message */
} bucketjournal_done_t;

/* Collects what the writer finished into *d (a ticket is reported
 * durable or failed once, by the first call that sees it; a ticket <=
 * d->durable that a previous call reported is reported again: compare).
 * Starts a compaction if the journal passed its bound.  Returns how many
 * lines are still pending. */
size_t bucketjournal_done(bucketjournal_t *j, bucketjournal_done_t *d);

/* Waits until no line is being written (every one durable or failed) or
 * timeout_s passed (< 0: no bound).  Returns how many are still pending;
 * collect the outcome with bucketjournal_done(). */
size_t bucketjournal_flush(bucketjournal_t *j, double timeout_s);

/* Appends the set of bucket *b (the table's version after it: `version`,
 * 0 none) and makes it durable: queued and waited for (a caller that
 * queues changes must not use it).  Starts a compaction if the journal
 * passed its bound.  Returns 0, or -errno with msg filled (the line is
 * then not in the journal: the change must not be acknowledged). */
int bucketjournal_set(bucketjournal_t *j, const bucketfile_bucket_t *b, uint64_t version,
                      char *msg, size_t size);

/* The same for the removal of bucket `name`. */
int bucketjournal_remove(bucketjournal_t *j, const char *name, uint64_t version, char *msg,
                         size_t size);

/* Writes table `bf` whole (an import, a reload's table): waits for a
 * compaction in progress and for the writer (collect its outcome first:
 * changes still pending would be undone over the new table), checks the
 * file as bucketjournal_check(), then
 * bucketfile_save_ex() with a marker before the rename and the journal
 * emptied after.  Returns 0 or -errno (msg filled; file and journal as
 * they were). */
int bucketjournal_save(bucketjournal_t *j, bucketfile_t *bf, char *msg, size_t size);

/* The table was loaded again from the file and its journal (a reload):
 * `bf` (borrowed) is what the file holds now.  Returns 0 or -ENOENT (bf
 * has no origin), or -errno.  A journal that does not extend that file
 * (it was edited by hand: the load did not apply the journal) is set
 * aside as PATH.journal.ignored and starts empty; so does
 * bucketjournal_new(). */
int bucketjournal_rebase(bucketjournal_t *j, const bucketfile_t *bf);

typedef struct {
    uint64_t bytes;        /* the journal's size now */
    uint64_t appends;      /* lines appended */
    uint64_t compactions;  /* compactions done */
    uint64_t failures;     /* compactions abandoned (logged) */
    int running;           /* a compaction is in progress */
    size_t pending;        /* lines waiting for the disk */
} bucketjournal_stats_t;

/* Fills *st. */
void bucketjournal_stats(bucketjournal_t *j, bucketjournal_stats_t *st);

/* Waits for a compaction in progress (tests, shutdown). */
void bucketjournal_wait(bucketjournal_t *j);

/* Starts a compaction now if none is running (tests).  Returns 0, or
 * -EBUSY if one is running, -errno if the thread cannot start. */
int bucketjournal_compact(bucketjournal_t *j);

#endif
