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
 * Threads: every function but the worker's runs on the one thread that
 * owns the journal (the controller's loop); the worker shares the journal
 * file and the file's identity with it under a mutex. */
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

/* Waits for a compaction in progress, closes the journal, frees it and
 * sets *jp to NULL.  Accepts NULL. */
void bucketjournal_destroy(bucketjournal_t **jp);

/* The hand-edit check: 0 if the bucket file is still what the journal
 * extends (bucketfile_check_ident(): a stat; the content only if the stat
 * changed), else -ESTALE or -errno with msg filled. */
int bucketjournal_check(bucketjournal_t *j, char *msg, size_t size);

/* Appends the set of bucket *b (the table's version after it: `version`,
 * 0 none) and makes it durable.  Starts a compaction if the journal
 * passed its bound.  Returns 0, or -errno with msg filled (the line is
 * then not in the journal: the change must not be acknowledged). */
int bucketjournal_set(bucketjournal_t *j, const bucketfile_bucket_t *b, uint64_t version,
                      char *msg, size_t size);

/* The same for the removal of bucket `name`. */
int bucketjournal_remove(bucketjournal_t *j, const char *name, uint64_t version, char *msg,
                         size_t size);

/* Writes table `bf` whole (an import, a reload's table): waits for a
 * compaction in progress, checks the file as bucketjournal_check(), then
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
} bucketjournal_stats_t;

/* Fills *st. */
void bucketjournal_stats(bucketjournal_t *j, bucketjournal_stats_t *st);

/* Waits for a compaction in progress (tests, shutdown). */
void bucketjournal_wait(bucketjournal_t *j);

/* Starts a compaction now if none is running (tests).  Returns 0, or
 * -EBUSY if one is running, -errno if the thread cannot start. */
int bucketjournal_compact(bucketjournal_t *j);

#endif
