/* bucketfile.h - bucket reservation files: load and validate, edit in memory, save atomically.
 *
 * The one owner of the format: the controller (bqos-controller, bqos-ctl's
 * admin commands), the node's --config (storage-node/daemon/nodeconf), bqos-load's
 * --print-buckets (workloads/scenario) and the simulator all read, check or
 * write bucket files through this module, so they share one validator and
 * one set of bounds.
 *
 * File format (rates in IOs per second; `limit` and `weight` optional):
 *   {"buckets":[{"name":"red","reservation":30000,"limit":60000,"weight":1}, ...]}
 * A `limit` that is absent or null means no limit (bqos-ctl --json buckets
 * prints null, and its output loads back).  Cost-aware tokens add two
 * optional members in bytes per second, "reservation_bytes" and
 * "limit_bytes" (absent or null: none; each 1..BUCKETFILE_MAX_BYTES,
 * reservation_bytes <= limit_bytes): a bucket with either also needs byte
 * tokens, and both its IO and its byte figures hold.
 *
 * Table version: an optional top-level member "table_version" (an integer
 * in 0..BUCKETFILE_MAX_VERSION; absent: 0), {"table_version": 7, "buckets":
 * [...]}.  The controller with etcd counts its table's changes there (one
 * more per change) so that a controller knows which of two tables is the
 * newer one (docs/controller.md, "Acknowledged changes"); it is kept by a
 * save and by bucketfile_render(), and written only when nonzero, so a file
 * without one is written without one.  bqos 0.1.0 refuses a file that
 * has one (unknown member): delete the member to go back.
 *
 * Validation: the top level is an object with the member "buckets" (an
 * array) and at most "table_version" besides; each element is an object with only the members name,
 * reservation, limit, weight, reservation_bytes, limit_bytes (unknown members are errors: a misspelt
 * "limt" must not silently leave a bucket unlimited); names are unique,
 * 1..250 bytes, no whitespace, control characters or ':' (names are key
 * prefixes); reservation and limit are integers in 0..BUCKETFILE_MAX_RATE;
 * reservation <= limit; weight is an integer in 1..BUCKETFILE_MAX_WEIGHT.
 *
 * Shadow (issue 28): a bucket may also have the member "shadow" (optional
 * boolean, default false; written only when true), which puts its limit in
 * shadow: the nodes count what it would have held and do not hold it
 * (docs/controller.md, "Shadow mode"); a bucket in shadow needs a limit
 * (IO or bytes).
 *
 * Rules (issue 27): an optional top-level member "rules", the ordered
 * rule list that maps a request to a bucket (common/rules.h: parsed and
 * validated by rules.c, errors at "rules[2].addr").  It is kept through
 * edits, saves and renders; a render after bucketfile_set_rules() writes
 * the canonical form (one rule per line), otherwise the operator's text of
 * the member stays as it was.
 *
 * Nesting (issue 28): a bucket may name a "parent" (optional string, the
 * name of another bucket of the set, at most BUCKETFILE_PARENT_MAX bytes;
 * written only when set).  A parent's limit bounds the sum of its children's service across the cluster and
 * its reservation is a floor for that sum (docs/controller.md, "Nested
 * buckets"); requests land only in leaf buckets (a parent has no queue of
 * its own).  A parent that is not in the set, a bucket that is its own
 * ancestor (a cycle) or a chain deeper than BUCKETFILE_MAX_DEPTH levels is
 * refused, at the member "parent" of the bucket that names it; removing a
 * bucket that is some bucket's parent is refused (-EBUSY).
 *
 * Errors are common/jsonloc's jsonloc_err_t: the file name, the JSON path of
 * the offending value ("buckets[3].limit") and its line and column (1-based,
 * columns in characters as jansson counts them) in the text.  A member that
 * is missing is reported at the object that lacks it ("buckets[0]").
 *
 * Config and state: a set read from text keeps that text, and a save edits
 * it (bucketfile_render()) instead of reformatting the file: the operator's
 * order, spacing and line breaks stay; only the objects of changed, removed
 * or new buckets are rewritten.  A set loaded from or saved to a file
 * remembers that file's identity (size, content hash, mtime), and a save
 * refuses to overwrite a file whose content changed since (a hand edit not
 * yet loaded): docs/decisions.md, "Config vs state".
 *
 * A bucketfile_t is a plain value owned by one thread; nothing here locks. */
#ifndef BQOS_BUCKETFILE_H
#define BQOS_BUCKETFILE_H

#include <stddef.h>
#include <stdint.h>

#include "common/jsonloc.h"
#include "common/names.h"
#include "common/rules.h"

/* `limit` of a bucket without a limit (never throttled). */
#define BUCKETFILE_NO_LIMIT INT64_MAX
#define BUCKETFILE_NAME_MAX NAMES_MAX /* 250 */
#define BUCKETFILE_MAX_RATE 1000000000000LL /* 10^12 IOs per second */
#define BUCKETFILE_MAX_WEIGHT 1000000u
#define BUCKETFILE_MAX_BYTES 1000000000000000LL /* 10^15 bytes per second */
#define BUCKETFILE_MAX_VERSION (UINT64_C(1) << 53) /* exact in every JSON reader */
#define BUCKETFILE_MAX_DEPTH 8 /* levels of nesting, the root one of them */
/* The longest name of a bucket that is a parent (the "parent" member).
 * It was held inline in every bucket's record; it is a pointer now (issue
 * 26), so the bound no longer costs memory, and stays as the format's. */
#define BUCKETFILE_PARENT_MAX 63

/* One bucket.  `name` points at the name: a bucket given to
 * bucketfile_set() may point anywhere (the table keeps its own copy); a
 * bucket in a table (bucketfile_get()) points at the table's copy, which
 * stays valid as long as the table (or a dup or copy of it) lives, even
 * after the bucket is removed.  Out of line, at its exact length: an inline
 * 251-byte array was most of the controller's memory per bucket (issue 26:
 * two tables of a million buckets).  NULL is no name (refused).
 *
 * `parent_name` (read it with bucketfile_parent(), set it with
 * bucketfile_bucket_set_parent()) is borrowed the same way: given to
 * bucketfile_set() it may point anywhere (valid for the call); in a table
 * it points at the table's copy of the parent's name (the parent bucket's
 * own `name`: nothing more is held), with the same lifetime as `name`.
 * NULL (zero-initialised) or "": no parent; a table holds NULL.  A bucket
 * without a parent costs the pointer only (issue 26: an inline 64-byte
 * array was ~64 B of every record). */
typedef struct {
    const char *name;
    int64_t reservation; /* IOs per second, >= 0 */
    int64_t limit;       /* IOs per second >= reservation, or BUCKETFILE_NO_LIMIT */
    uint32_t weight;     /* 1..BUCKETFILE_MAX_WEIGHT, default 1 */
    int shadow;          /* 1: the limit is counted at the nodes, not
                            enforced (issue 28); default 0 */
    int64_t reservation_bytes; /* bytes per second; 0: none */
    int64_t limit_bytes;       /* bytes per second >= reservation_bytes;
                                  0: no byte limit (zero-initialised
                                  buckets have no byte rate: the paper) */
    const char *parent_name; /* the parent bucket's name (at most
                            BUCKETFILE_PARENT_MAX bytes), NULL or "": none
                            (issue 28); see above */
} bucketfile_bucket_t;

/* Bucket b's parent's name, or "" if it has none.  Never NULL. */
static inline const char *bucketfile_parent(const bucketfile_bucket_t *b)
{
    return b->parent_name ? b->parent_name : "";
}

/* Nonzero if bucket b names a parent. */
static inline int bucketfile_has_parent(const bucketfile_bucket_t *b)
{
    return b->parent_name && b->parent_name[0];
}

/* Makes bucket b (one of the caller's, not a table's) name `parent` as its
 * parent (NULL or "": none).  Borrows the string: it must stay valid until
 * b is given to bucketfile_set() (which copies it into the table) or no
 * longer used.  Allocates nothing. */
static inline void bucketfile_bucket_set_parent(bucketfile_bucket_t *b, const char *parent)
{
    b->parent_name = parent && parent[0] ? parent : NULL;
}

/* Nonzero if bucket b has a rate in bytes per second (it needs byte tokens
 * too). */
static inline int bucketfile_has_bytes(const bucketfile_bucket_t *b)
{
    return b->reservation_bytes > 0 || b->limit_bytes > 0;
}

typedef struct bucketfile bucketfile_t;

/* What a file held when it was read or written: its identity (device,
 * inode, size, mtime) and a hash of its content. */
typedef struct {
    int exists;       /* 0: the file did not exist */
    int64_t mtime_ns; /* modification time, ns since the epoch */
    int64_t size;     /* bytes */
    uint64_t dev, ino; /* ino 0: not known (the content decides) */
    uint64_t hash;    /* of the content (bucketfile.c's hash_bytes(); it is
                         written in the journal's markers: do not change it) */
} bucketfile_ident_t;

/* Returns a new empty bucket set, or NULL if out of memory.  Caller owns it
 * and frees it with bucketfile_destroy(). */
bucketfile_t *bucketfile_new(void);

/* Frees the set and sets *bp to NULL.  Accepts NULL and *bp == NULL. */
void bucketfile_destroy(bucketfile_t **bp);

/* Parses and validates `len` bytes of JSON text.  `source` names the text in
 * errors (may be NULL).  On success returns 0 and stores a new set in *out
 * (caller owns it).  Returns -EINVAL for invalid text (and fills *err if
 * non-NULL), -ENOMEM.  *out is untouched on error. */
int bucketfile_parse(const char *text, size_t len, const char *source,
                     bucketfile_t **out, jsonloc_err_t *err);

/* Reads and parses file `path` as bucketfile_parse(), and records the
 * file's identity as the set's origin; then applies the journal beside
 * it, PATH.journal, if there is one (bucketfile_journal_apply(); a torn
 * last line is dropped with a warning).  Returns 0, -EINVAL (err: the file
 * or the journal, line, column), -ENOMEM, or the -errno of open/read
 * (err->text says which). */
int bucketfile_load(const char *path, bucketfile_t **out, jsonloc_err_t *err);

/* bucketfile_load() of the file alone, without its journal (the
 * journal's compaction). */
int bucketfile_load_file(const char *path, bucketfile_t **out, jsonloc_err_t *err);

/* Checks file `path` whole, as bucketfile_load() would, but goes on after
 * a bad bucket: calls report(arg, err) for every problem (the first of
 * each bucket, or the one that makes the whole file unreadable: syntax,
 * top level, I/O), with its position; then its journal's first problem,
 * if the file is valid.  Returns the number of problems (0: the file and
 * its journal are valid) or -ENOMEM.  For --check. */
int bucketfile_validate(const char *path, void (*report)(void *arg, const jsonloc_err_t *err),
                        void *arg);

/* Makes `to` remember what `from` knows of its file (the file it was
 * loaded from or last saved to; bucketfile_dup() copies it too): the
 * controller with etcd carries it over to the tables that come from etcd.
 * Returns 0 or -ENOMEM. */
int bucketfile_copy_origin(bucketfile_t *to, const bucketfile_t *from);

/* Returns 0 if file `path` still holds what the set's origin says (or the
 * set has no origin, or another file's); -ESTALE if its content changed or it was removed,
 * with a message naming the file and saying to reload first in msg; or
 * the -errno of reading it (msg says so).  The rule: the same device,
 * inode, size and mtime as the origin is unchanged (one stat, nothing
 * read); any of them different and the content decides (the file is read
 * and hashed: a touch loses nothing, an edit that keeps the size does). */
int bucketfile_check_unchanged(const bucketfile_t *bf, const char *path, char *msg, size_t size);

/* bucketfile_check_unchanged() against identity *id rather than a set's
 * origin. */
int bucketfile_check_ident(const bucketfile_ident_t *id, const char *path, char *msg, size_t size);

/* Copies the set's origin (what its file held when it was loaded or last
 * saved) into *id.  Returns 0, or -ENOENT if the set has none. */
int bucketfile_origin(const bucketfile_t *bf, bucketfile_ident_t *id);

/* Writes the set to `path` atomically: a temporary file in the same
 * directory is written, fsync'ed and renamed over `path`, then the directory
 * is fsync'ed.  A crash leaves either the old or the new file.  The text is
 * bucketfile_render()'s.  Refuses (-ESTALE) when the set's origin is known
 * and the file changed since (bucketfile_check_unchanged()).  On success
 * the written text and file become the set's base and origin.  Returns 0
 * or -errno, with a one-line reason in msg (`size` bytes; msg may be
 * NULL); on error `path` is unchanged and the temporary file removed. */
int bucketfile_save(bucketfile_t *bf, const char *path, char *msg, size_t size);

/* bucketfile_save() with hooks, for the journal's compaction
 * (common/bucketjournal).  before_rename runs once the new text is
 * written and fsync'ed to the temporary file, with its size and hash: a
 * negative return aborts the save (returned; the file unchanged).
 * after_rename runs once the new file is in place (the directory
 * fsync'ed), with its identity.  no_check skips the hand-edit check (the
 * caller made it).  bucketfile_save() is this with no_check 0 and hooks
 * that keep PATH.journal right: a marker before the rename, emptied after. */
typedef struct {
    int no_check;
    int (*before_rename)(void *arg, const char *path, int64_t size, uint64_t hash);
    void (*after_rename)(void *arg, const char *path, const bucketfile_ident_t *id);
    void *arg;
} bucketfile_save_opts_t;
int bucketfile_save_ex(bucketfile_t *bf, const char *path, const bucketfile_save_opts_t *o,
                       char *msg, size_t size);

/* ---- the journal -------------------------------------------------------
 *
 * Beside a bucket file PATH the controller keeps PATH.journal: one line
 * per acknowledged change since the file was last written, applied after
 * the file by bucketfile_load() (the writer, with its compaction, is
 * common/bucketjournal).  Lines (each one JSON object and '\n'):
 *   {"set": {bucket object as in the file}[, "table_version": V]}
 *   {"remove": "name"[, "table_version": V]}
 *   {"compacted": {"size": S, "hash": "16 hex digits", "upto": OFFSET}}
 *   {"base": {"size": S, "hash": "16 hex digits"}}   (first line only)
 * The base line names the file the lines extend (the writer puts it
 * first): read over another file (the file was edited by hand, or
 * replaced, since) and with no marker naming that file either, the
 * journal is not applied (warned: the file is the operator's word).
 * A set adds or replaces the bucket, a remove takes it out (a name not
 * there is no error: see below), a version sets the table's.  A marker
 * says that a file of that size and hash holds every line before byte
 * OFFSET: when the file read has them, those lines are skipped (a save or
 * a compaction renamed its file but had not yet cut the journal); when it
 * does not (the rename never happened), every line is applied.  Applying
 * lines the file already holds gives the same table (each line sets or
 * removes one bucket whole: the last line for a name decides), which is
 * what makes every crash point safe.  A last line without its '\n' that
 * does not parse is a write cut short by a crash (never acknowledged):
 * dropped with a warning; anything else that does not parse or validate
 * is an error with its line and column. */
#define BUCKETFILE_JOURNAL_SUFFIX ".journal"

/* "PATH.journal", or NULL if out of memory; caller frees. */
char *bucketfile_journal_path(const char *path);

typedef struct {
    size_t lines;        /* set/remove lines read */
    size_t applied;      /* ... that changed something */
    uint64_t skipped_to; /* a marker named the file: lines before this offset skipped */
    int torn;            /* a torn last line was dropped */
    int ignored;         /* its base is another file: nothing applied */
} bucketfile_journal_result_t;

/* Applies `len` bytes of journal text to bf (the set read from the file;
 * its origin decides the markers), as bucketfile_load() does.  `source`
 * names the journal in errors.  Returns 0 (fills *res if non-NULL),
 * -EINVAL (err: source, line, column, member) or -ENOMEM; bf may hold
 * some lines then. */
int bucketfile_journal_apply(bucketfile_t *bf, const char *text, size_t len, const char *source,
                             bucketfile_journal_result_t *res, jsonloc_err_t *err);

/* Nonzero if the journal text applies to file *file (its base line, or a
 * marker, names it; or it has no base line), as bucketfile_load() judges. */
int bucketfile_journal_extends(const char *text, size_t len, const bucketfile_ident_t *file);

/* The journal line of a set of *b, a remove of `name`, and a marker; each
 * with its '\n'; version 0: none.  NULL if out of memory; caller frees. */
char *bucketfile_journal_set_line(const bucketfile_bucket_t *b, uint64_t version);
char *bucketfile_journal_remove_line(const char *name, uint64_t version);
char *bucketfile_journal_marker(int64_t size, uint64_t hash, uint64_t upto);
char *bucketfile_journal_base(int64_t size, uint64_t hash);

/* Writes `len` bytes at `line` to fd (opened O_APPEND) and fdatasync()s.
 * Returns 0 or -errno. */
int bucketfile_journal_write(int fd, const char *line, size_t len);

/* Returns a new NUL-terminated JSON text of the set, one bucket per line
 * (the canonical format), or NULL if out of memory.  Caller frees it with
 * free(). */
char *bucketfile_dumps(const bucketfile_t *bf);

/* Returns a new NUL-terminated JSON text of the set that keeps the text it
 * was read from: everything outside the buckets' objects, and the object
 * of every unchanged bucket, as it was; a changed bucket's object replaced
 * in place by one line {"name": ..., ...}; a removed one cut out with its
 * separator; a new one appended after the last, with the separator the
 * file uses.  Without such a text (or one whose elements are not one
 * {...} per bucket), bucketfile_dumps().  One pass, O(length of the text)
 * whatever changed: the set remembers where each bucket's object lies in
 * its base text.  NULL if out of memory; caller frees. */
char *bucketfile_render(const bucketfile_t *bf);

/* Number of buckets, and the i-th (file order; NULL if out of range).  The
 * pointer is valid until the set is next modified. */
size_t bucketfile_count(const bucketfile_t *bf);
const bucketfile_bucket_t *bucketfile_get(const bucketfile_t *bf, size_t i);

/* Index of bucket `name`, or -ENOENT. */
int bucketfile_find(const bucketfile_t *bf, const char *name);

/* Checks one bucket (name by names_check_bucket(), ranges, reservation <=
 * limit).  Returns 0, or -EINVAL and fills err->path and err->text (the
 * member's name, "limit"; no source or position: those fields are left as
 * they were) if err is non-NULL. */
int bucketfile_check_bucket(const bucketfile_bucket_t *b, jsonloc_err_t *err);

/* Adds bucket *b, or replaces the bucket of the same name in place.
 * Returns 0, -EINVAL if the bucket is invalid or its parent is not in the
 * set, is the bucket itself or one of its descendants (a cycle), or makes a
 * chain deeper than BUCKETFILE_MAX_DEPTH (fills *err if non-NULL: path
 * "parent"), -ENOMEM. */
int bucketfile_set(bucketfile_t *bf, const bucketfile_bucket_t *b, jsonloc_err_t *err);

/* Removes bucket `name`, keeping the order of the others.  Returns 0,
 * -ENOENT, or -EBUSY if another bucket names it as its parent (remove or
 * re-parent the children first).  O(buckets): the rows after it move down. */
int bucketfile_remove(bucketfile_t *bf, const char *name);

/* Removes bucket `name` by moving the last bucket into its place: O(1)
 * (the controller's remove at a million buckets).  The table's order
 * changes (the last bucket takes the index), the file's does not: a
 * render writes the buckets read from the text in the text's order, then
 * the new ones.  Returns 0, -ENOENT, -EBUSY (as bucketfile_remove()) or
 * -ENOMEM. */
int bucketfile_remove_swap(bucketfile_t *bf, const char *name);

/* Checks the parent chain bucket *b would have in bf (b need not be in
 * it; a bucket of bf with b's name is taken as b): its parent exists, is
 * not b or below b, and the chain has at most BUCKETFILE_MAX_DEPTH levels.
 * Returns 0, or -EINVAL with err->path "parent" and err->text saying what
 * (err may be NULL). */
int bucketfile_check_parent(const bucketfile_t *bf, const bucketfile_bucket_t *b,
                            jsonloc_err_t *err);

/* Nonzero if some bucket of bf names `name` as its parent (O(n)). */
int bucketfile_has_children(const bucketfile_t *bf, const char *name);

/* The set's "table_version" (0: none), and setting it (values above
 * BUCKETFILE_MAX_VERSION are taken as that bound).  Editing buckets leaves
 * it as it is: the caller that writes a change counts it. */
uint64_t bucketfile_version(const bucketfile_t *bf);
void bucketfile_set_version(bucketfile_t *bf, uint64_t version);

/* The set's rules, or NULL if it has no "rules" member.  Valid until the
 * set's rules are next replaced or the set destroyed; read-only (copies
 * made by bucketfile_dup() share it). */
const rules_t *bucketfile_rules(const bucketfile_t *bf);

/* Replaces the set's rules with r (the set takes ownership; NULL removes
 * the member).  Returns 0 or -ENOMEM (r is then still the caller's). */
int bucketfile_set_rules(bucketfile_t *bf, rules_t *r);

/* Returns a new copy of the set (its version too), or NULL if out of
 * memory.  The copy shares the original's arrays until either is changed
 * (copy on write, an atomic count: the two may then live in different
 * threads), so a dup is O(1) and the first change to either copies O(n).
 * Caller owns it. */
bucketfile_t *bucketfile_dup(const bucketfile_t *bf);

/* Returns a new copy of the set's buckets, its index and version, owned
 * whole (nothing shared: a change to either copies nothing), without the
 * text it was read from or its file (a render writes the canonical
 * form), or NULL if out of memory.  O(n).  For a table edited in place
 * beside the caller's (the controller's: ctrl_set_buckets()).  Caller
 * owns it. */
bucketfile_t *bucketfile_copy_rows(const bucketfile_t *bf);

/* Formats *err as "FILE:LINE:COL: PATH: TEXT" (parts that are unknown are
 * left out) into buf.  Returns buf. */
const char *bucketfile_strerror(const jsonloc_err_t *err, char *buf, size_t size);

#endif
