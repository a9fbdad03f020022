/* bucketfile.c - bucket reservation files: load and validate, edit in memory, save atomically. */
#include "common/bucketfile.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <malloc.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/jsonloc.h"
#include "common/log.h"
#include "common/rules.h"
#include "common/names.h"


/* Where a bucket stands in the base text: the element of its "buckets"
 * array it was read from (-1: none, a new bucket) and whether it changed
 * since (its object is then written anew). */
typedef struct {
    int32_t elem;
    int32_t changed;
} bucketfile_src_t;

/* The bucket names of a table, out of line at their exact length: chunks
 * appended to and never moved, freed with the last table that shares them.
 * A dup shares them as it shares the rows; a table that makes its rows its
 * own (unshare(), a copy of the rows) copies the names it holds into new
 * chunks of its own, so that what it appends is never held by another
 * table.  A removed bucket's name stays until the table is copied or
 * freed: bounded by the buckets added since it was last read whole.
 * Appends take `mu` (a spin lock: an append is a memcpy of a name), which
 * costs nothing where only one table appends. */
typedef struct bfchunk {
    struct bfchunk *next;
    size_t used, size;
    char data[];
} bfchunk_t;

typedef struct {
    atomic_int refs;
    atomic_flag mu;
    bfchunk_t *head;
} bfnames_t;

#define BFNAMES_CHUNK (64u << 10)

static bfnames_t *names_new(void)
{
    bfnames_t *nm = calloc(1, sizeof *nm);
    if (!nm)
        return NULL;
    atomic_init(&nm->refs, 1);
    atomic_flag_clear(&nm->mu);
    return nm;
}

static void names_unref(bfnames_t **np)
{
    bfnames_t *nm = *np;
    *np = NULL;
    if (!nm || atomic_fetch_sub(&nm->refs, 1) > 1)
        return;
    for (bfchunk_t *c = nm->head, *next; c; c = next) {
        next = c->next;
        free(c);
    }
    free(nm);
}

/* A copy of name s in nm, or NULL if out of memory. */
static const char *names_put(bfnames_t *nm, const char *s)
{
    size_t len = strlen(s) + 1;
    char *out = NULL;
    while (atomic_flag_test_and_set_explicit(&nm->mu, memory_order_acquire))
        ;
    bfchunk_t *c = nm->head;
    if (!c || c->size - c->used < len) {
        size_t size = len > BFNAMES_CHUNK ? len : BFNAMES_CHUNK;
        if ((c = malloc(sizeof *c + size))) {
            c->next = nm->head;
            c->used = 0;
            c->size = size;
            nm->head = c;
        }
    }
    if (c) {
        out = c->data + c->used;
        memcpy(out, s, len);
        c->used += len;
    }
    atomic_flag_clear_explicit(&nm->mu, memory_order_release);
    return out;
}

/* The index of name `name` among rows v by their hash index slot (nslot
 * slots), or -ENOENT. */
static int find_in(const bucketfile_bucket_t *v, const int *slot, size_t nslot, const char *name);

/* Points the n rows of v at copies of their names in new chunks of their
 * own (*out), and each row's parent at its parent's new name (found by the
 * rows' hash index, slot: nslot slots; a parent that is not a row, which a
 * valid table never has, gets a copy of its own).  Returns 0, or -ENOMEM
 * with v's names and parents as they were and *out NULL. */
static int names_copy(bucketfile_bucket_t *v, size_t n, const int *slot, size_t nslot,
                      bfnames_t **out)
{
    bfnames_t *nm = names_new();
    struct was {
        const char *name, *parent;
    } *was = n ? malloc(n * sizeof *was) : NULL;
    size_t i = 0;
    int ok = nm && (was || !n);
    for (; ok && i < n; i++) {
        was[i].name = v[i].name;
        was[i].parent = v[i].parent_name;
        if (!(v[i].name = names_put(nm, was[i].name)))
            ok = 0;
    }
    /* The parents once every name is new: a child may come before its
     * parent.  The lookup compares with the new names (same text). */
    for (size_t k = 0; ok && k < n; k++) {
        if (!was[k].parent)
            continue;
        int j = find_in(v, slot, nslot, was[k].parent);
        v[k].parent_name = j >= 0 ? v[j].name : names_put(nm, was[k].parent);
        if (!v[k].parent_name)
            ok = 0;
    }
    if (!ok) {
        for (size_t k = 0; was && k < i; k++) {
            v[k].name = was[k].name;
            v[k].parent_name = was[k].parent;
        }
        free(was);
        names_unref(&nm);
        *out = NULL;
        return -ENOMEM;
    }
    free(was);
    *out = nm;
    return 0;
}

struct bucketfile {
    bucketfile_bucket_t *v; /* file order */
    bfnames_t *names;       /* what v's names point at (shared by dups and
                               copies of the rows) */
    bucketfile_src_t *src;  /* parallel to v */
    size_t n, cap;
    int *slot;   /* open-addressing hash of names: index into v, -1 empty */
    size_t nslot;
    char *text;  /* the text it was parsed from or last saved as (NUL-terminated),
                    the base bucketfile_render() edits; NULL: none */
    size_t tlen;
    size_t *sp;  /* the base text's elements of "buckets": element k spans
                    text[sp[2k] .. sp[2k+1]); NULL: none known (a render
                    writes the canonical form) */
    size_t nsp;  /* elements in sp */
    size_t as, ae; /* the "buckets" array's span in text */
    size_t vs, ve; /* the top-level "table_version" value's span in text
                      (with sp); vs == ve: none */
    /* bucketfile_dup() shares v, src, slot, text and sp with the original
     * (the controller's copy of the admin's table costs nothing): while
     * *refs > 1 they are read-only, and a change first copies them
     * (unshare()).  NULL: not shared. */
    atomic_int *refs;
    uint64_t version; /* the top-level "table_version"; 0: none */
    /* The top-level "rules" (common/rules.h): shared by dups, replaced
     * whole by bucketfile_set_rules(); NULL: no member.  rules_changed:
     * set since the base text, so a render writes the canonical form. */
    struct bfrules {
        atomic_int refs;
        rules_t *r;
    } *rules;
    int rules_changed;
    char *opath; /* the file it was loaded from or last saved to; NULL: none */
    bucketfile_ident_t origin; /* what that file held then */
};

/* ---- hash index ---------------------------------------------------------- */

/* 8 bytes a step, then FNV-1a over the tail: a file's identity (75 MB at
 * a million buckets, hashed at every save and every check) and the name
 * index.  Only compared within one process: free to change. */
static uint64_t hash_bytes(const char *t, size_t n)
{
    uint64_t h = 1469598103934665603ULL ^ (n * 0x9E3779B97F4A7C15ULL);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, t + i, 8);
        h = (h ^ w) * 0x9E3779B97F4A7C15ULL;
        h ^= h >> 29;
    }
    for (; i < n; i++) {
        h ^= (unsigned char)t[i];
        h *= 1099511628211ULL;
    }
    return h;
}

static uint64_t hash_name(const char *s)
{
    return hash_bytes(s, strlen(s));
}

/* Rebuilds the hash for the current entries with room for at least 2n. */
static int reindex(bucketfile_t *bf, size_t want)
{
    size_t ns = 16;
    while (ns < 2 * want + 2)
        ns *= 2;
    int *slot = malloc(ns * sizeof *slot);
    if (!slot)
        return -ENOMEM;
    for (size_t i = 0; i < ns; i++)
        slot[i] = -1;
    for (size_t i = 0; i < bf->n; i++) {
        size_t h = hash_name(bf->v[i].name) & (ns - 1);
        while (slot[h] >= 0)
            h = (h + 1) & (ns - 1);
        slot[h] = (int)i;
    }
    free(bf->slot);
    bf->slot = slot;
    bf->nslot = ns;
    return 0;
}

bucketfile_t *bucketfile_new(void)
{
    bucketfile_t *bf = calloc(1, sizeof *bf);
    if (!bf)
        return NULL;
    if (!(bf->names = names_new()) || reindex(bf, 0) < 0) {
        names_unref(&bf->names);
        free(bf);
        return NULL;
    }
    return bf;
}

/* Lets go of the arrays: frees them unless a copy still shares them. */
static void release(bucketfile_t *bf)
{
    if (bf->refs && atomic_fetch_sub(bf->refs, 1) > 1) {
        bf->refs = NULL;
        return;
    }
    free(bf->refs);
    bf->refs = NULL;
    free(bf->v);
    free(bf->src);
    free(bf->sp);
    free(bf->slot);
    free(bf->text);
}

/* A copy of n elements of `size` bytes at p; NULL if out of memory (or
 * n is 0). */
static void *dup_array(const void *p, size_t n, size_t size)
{
    void *c = n ? malloc(n * size) : NULL;
    if (c)
        memcpy(c, p, n * size);
    return c;
}

/* Makes bf's arrays its own before a change: copies them if a dup shares
 * them.  Returns 0 or -ENOMEM (bf unchanged). */
static int unshare(bucketfile_t *bf)
{
    if (!bf->refs)
        return 0;
    if (atomic_load(bf->refs) == 1) { /* the others are gone */
        free(bf->refs);
        bf->refs = NULL;
        return 0;
    }
    bucketfile_bucket_t *v = dup_array(bf->v, bf->n, sizeof *v);
    bucketfile_src_t *src = dup_array(bf->src, bf->n, sizeof *src);
    int *slot = dup_array(bf->slot, bf->nslot, sizeof *slot);
    char *text = bf->text ? dup_array(bf->text, bf->tlen + 1, 1) : NULL;
    size_t *sp = bf->sp ? dup_array(bf->sp, 2 * bf->nsp, sizeof *sp) : NULL;
    bfnames_t *nm = NULL;
    if ((bf->n && (!v || !src)) || !slot || (bf->text && !text) || (bf->sp && bf->nsp && !sp) ||
        names_copy(v, v ? bf->n : 0, slot, bf->nslot, &nm) < 0) {
        free(v);
        free(src);
        free(slot);
        free(text);
        free(sp);
        return -ENOMEM;
    }
    atomic_fetch_sub(bf->refs, 1);
    bf->refs = NULL;
    names_unref(&bf->names);
    bf->names = nm;
    bf->v = v;
    bf->src = src;
    bf->cap = bf->n;
    bf->slot = slot;
    bf->text = text;
    bf->sp = bf->nsp ? sp : NULL;
    if (!bf->nsp)
        free(sp);
    return 0;
}

static void rules_unref(struct bfrules **h)
{
    if (*h && atomic_fetch_sub(&(*h)->refs, 1) == 1) {
        rules_destroy(&(*h)->r);
        free(*h);
    }
    *h = NULL;
}

void bucketfile_destroy(bucketfile_t **bp)
{
    if (!bp || !*bp)
        return;
    release(*bp);
    names_unref(&(*bp)->names);
    rules_unref(&(*bp)->rules);
    free((*bp)->opath);
    free(*bp);
    *bp = NULL;
}

size_t bucketfile_count(const bucketfile_t *bf)
{
    return bf ? bf->n : 0;
}

const bucketfile_bucket_t *bucketfile_get(const bucketfile_t *bf, size_t i)
{
    return bf && i < bf->n ? &bf->v[i] : NULL;
}

static int find_in(const bucketfile_bucket_t *v, const int *slot, size_t nslot, const char *name)
{
    size_t h = hash_name(name) & (nslot - 1);
    while (slot[h] >= 0) {
        if (strcmp(v[slot[h]].name, name) == 0)
            return slot[h];
        h = (h + 1) & (nslot - 1);
    }
    return -ENOENT;
}

int bucketfile_find(const bucketfile_t *bf, const char *name)
{
    if (!bf || !name)
        return -ENOENT;
    return find_in(bf->v, bf->slot, bf->nslot, name);
}

/* The table's copy of parent name p (NULL or "": none, NULL): the name of
 * bucket p if bf has it (nothing more held), else a copy of p in bf's
 * names (a file's child that comes before its parent, until the parse
 * rebinds it).  *rc: 0, or -ENOMEM (returns NULL). */
static const char *intern_parent(bucketfile_t *bf, const char *p, int *rc)
{
    *rc = 0;
    if (!p || !p[0])
        return NULL;
    int j = bucketfile_find(bf, p);
    if (j >= 0)
        return bf->v[j].name;
    const char *c = names_put(bf->names, p);
    if (!c)
        *rc = -ENOMEM;
    return c;
}

/* Replaces bf's base text by a copy of len bytes at t.  Returns 0 or -ENOMEM. */
static int set_text(bucketfile_t *bf, const char *t, size_t len)
{
    if (unshare(bf) < 0)
        return -ENOMEM;
    char *c = malloc(len + 1);
    if (!c)
        return -ENOMEM;
    memcpy(c, t, len);
    c[len] = '\0';
    free(bf->text);
    bf->text = c;
    bf->tlen = len;
    free(bf->sp);
    bf->sp = NULL;
    bf->nsp = 0;
    bf->vs = bf->ve = 0;
    return 0;
}

/* Makes bf's buckets the elements of its base text, in order (just
 * parsed from it): finds every element's span in one pass, so that a
 * render copies what did not change and rewrites only what did.  Without
 * memory, or if the text's elements are not bf's buckets one for one, no
 * spans are kept and a render writes the canonical form.  O(len). */
static void index_text(bucketfile_t *bf)
{
    jsonloc_step_t path[1] = {{"buckets", 0}};
    size_t as, ae, *sp = NULL;
    if (!bf->text || jsonloc_span(bf->text, bf->tlen, path, 1, &as, &ae) != 1 ||
        bf->text[as] != '[' || bf->text[ae - 1] != ']')
        return;
    if (bf->n && !(sp = malloc(2 * bf->n * sizeof *sp)))
        return;
    if (jsonloc_elements(bf->text, bf->tlen, as, sp, bf->n) != bf->n) {
        free(sp);
        return;
    }
    for (size_t i = 0; i < bf->n; i++) {
        if (bf->text[sp[2 * i]] != '{' || bf->text[sp[2 * i + 1] - 1] != '}') {
            free(sp);
            return;
        }
        bf->src[i] = (bucketfile_src_t){(int32_t)i, 0};
    }
    /* Where the version's value is, found once here rather than at each
     * render (it may follow the array: a scan of the whole text). */
    jsonloc_step_t vpath[1] = {{"table_version", 0}};
    size_t vs = 0, ve = 0;
    if (jsonloc_span(bf->text, bf->tlen, vpath, 1, &vs, &ve) != 1)
        vs = ve = 0;
    free(bf->sp);
    bf->sp = sp;
    bf->nsp = bf->n;
    bf->as = as;
    bf->ae = ae;
    bf->vs = vs;
    bf->ve = ve;
}

/* Appends without checks; the caller has verified the name is new. */
static int append(bucketfile_t *bf, const bucketfile_bucket_t *b)
{
    if (bf->n == bf->cap) {
        size_t cap = bf->cap ? bf->cap * 2 : 16;
        bucketfile_bucket_t *v = realloc(bf->v, cap * sizeof *v);
        if (!v)
            return -ENOMEM;
        bf->v = v;
        bucketfile_src_t *src = realloc(bf->src, cap * sizeof *src);
        if (!src)
            return -ENOMEM;
        bf->src = src;
        bf->cap = cap;
    }
    if (2 * (bf->n + 1) + 2 > bf->nslot) {
        int rc = reindex(bf, bf->n + 1);
        if (rc < 0)
            return rc;
    }
    int rc;
    const char *parent = intern_parent(bf, b->parent_name, &rc);
    if (rc < 0)
        return rc;
    const char *name = names_put(bf->names, b->name);
    if (!name)
        return -ENOMEM;
    bf->v[bf->n] = *b;
    bf->v[bf->n].name = name; /* the table's own copy */
    bf->v[bf->n].parent_name = parent;
    bf->src[bf->n] = (bucketfile_src_t){-1, 1};
    size_t h = hash_name(name) & (bf->nslot - 1);
    while (bf->slot[h] >= 0)
        h = (h + 1) & (bf->nslot - 1);
    bf->slot[h] = (int)bf->n;
    bf->n++;
    return 0;
}

/* ---- validation ---------------------------------------------------------- */

static void set_err(jsonloc_err_t *err, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void set_err(jsonloc_err_t *err, const char *path, const char *fmt, ...)
{
    if (!err)
        return;
    snprintf(err->path, sizeof err->path, "%s", path ? path : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->text, sizeof err->text, fmt, ap);
    va_end(ap);
}

int bucketfile_check_bucket(const bucketfile_bucket_t *b, jsonloc_err_t *err)
{
    size_t len = b->name ? strnlen(b->name, BUCKETFILE_NAME_MAX + 1) : 0;
    if (!b->name || len > BUCKETFILE_NAME_MAX || names_check_bucket(b->name, len) < 0) {
        set_err(err, "name",
                "bucket name must be 1..%d bytes without whitespace, control characters or ':'",
                BUCKETFILE_NAME_MAX);
        return -EINVAL;
    }
    if (b->reservation < 0 || b->reservation > BUCKETFILE_MAX_RATE) {
        set_err(err, "reservation", "reservation must be an integer in 0..%lld",
                (long long)BUCKETFILE_MAX_RATE);
        return -EINVAL;
    }
    if (b->limit != BUCKETFILE_NO_LIMIT && (b->limit < 0 || b->limit > BUCKETFILE_MAX_RATE)) {
        set_err(err, "limit", "limit must be an integer in 0..%lld",
                (long long)BUCKETFILE_MAX_RATE);
        return -EINVAL;
    }
    if (b->weight < 1 || b->weight > BUCKETFILE_MAX_WEIGHT) {
        set_err(err, "weight", "weight must be an integer in 1..%u", BUCKETFILE_MAX_WEIGHT);
        return -EINVAL;
    }
    if (b->reservation > b->limit) {
        set_err(err, "limit", "limit %lld is below the reservation %lld",
                (long long)b->limit, (long long)b->reservation);
        return -EINVAL;
    }
    if (b->reservation_bytes < 0 || b->reservation_bytes > BUCKETFILE_MAX_BYTES) {
        set_err(err, "reservation_bytes", "reservation_bytes must be an integer in 0..%lld (0: none)",
                (long long)BUCKETFILE_MAX_BYTES);
        return -EINVAL;
    }
    if (b->limit_bytes < 0 || b->limit_bytes > BUCKETFILE_MAX_BYTES) {
        set_err(err, "limit_bytes", "limit_bytes must be an integer in 0..%lld (0: none)",
                (long long)BUCKETFILE_MAX_BYTES);
        return -EINVAL;
    }
    if (b->limit_bytes > 0 && b->reservation_bytes > b->limit_bytes) {
        set_err(err, "limit_bytes", "limit_bytes %lld is below reservation_bytes %lld",
                (long long)b->limit_bytes, (long long)b->reservation_bytes);
        return -EINVAL;
    }
    if (b->shadow && b->limit == BUCKETFILE_NO_LIMIT && b->limit_bytes == 0) {
        set_err(err, "shadow", "shadow needs a limit (a bucket without one has nothing to count)");
        return -EINVAL;
    }
    const char *parent = bucketfile_parent(b);
    size_t pl = strnlen(parent, BUCKETFILE_PARENT_MAX + 1);
    if (pl > BUCKETFILE_PARENT_MAX || (pl && names_check_bucket(parent, pl) < 0)) {
        set_err(err, "parent", "parent must be a bucket name of 1..%d bytes",
                BUCKETFILE_PARENT_MAX);
        return -EINVAL;
    }
    return 0;
}

static int same_bucket(const bucketfile_bucket_t *a, const bucketfile_bucket_t *b)
{
    return strcmp(a->name, b->name) == 0 && a->reservation == b->reservation &&
           a->limit == b->limit && a->weight == b->weight &&
           a->reservation_bytes == b->reservation_bytes && a->limit_bytes == b->limit_bytes &&
           a->shadow == b->shadow && strcmp(bucketfile_parent(a), bucketfile_parent(b)) == 0;
}

/* The bucket named `name` in bf, b standing in for the bucket of its name;
 * NULL if neither. */
static const bucketfile_bucket_t *chain_get(const bucketfile_t *bf, const bucketfile_bucket_t *b,
                                            const char *name)
{
    if (strcmp(name, b->name) == 0)
        return b;
    int i = bucketfile_find(bf, name);
    return i >= 0 ? &bf->v[i] : NULL;
}

int bucketfile_check_parent(const bucketfile_t *bf, const bucketfile_bucket_t *b,
                            jsonloc_err_t *err)
{
    const bucketfile_bucket_t *x = b;
    for (int depth = 1; bucketfile_has_parent(x); depth++) {
        const bucketfile_bucket_t *up = chain_get(bf, b, x->parent_name);
        if (!up) {
            set_err(err, "parent", "parent \"%.100s\" of bucket \"%.100s\" is not a bucket "
                    "(add the parent first)", x->parent_name, x->name);
            return -EINVAL;
        }
        if (up == b) {
            set_err(err, "parent", "parent \"%.100s\" makes a cycle (\"%.100s\" would be its "
                    "own ancestor)", b->parent_name, b->name);
            return -EINVAL;
        }
        if (depth >= BUCKETFILE_MAX_DEPTH) {
            set_err(err, "parent", "bucket \"%.100s\": more than %d levels of parents",
                    b->name, BUCKETFILE_MAX_DEPTH);
            return -EINVAL;
        }
        x = up;
    }
    return 0;
}

int bucketfile_has_children(const bucketfile_t *bf, const char *name)
{
    for (size_t i = 0; bf && i < bf->n; i++)
        if (bf->v[i].parent_name && strcmp(bf->v[i].parent_name, name) == 0)
            return 1;
    return 0;
}

int bucketfile_set(bucketfile_t *bf, const bucketfile_bucket_t *b, jsonloc_err_t *err)
{
    if (bucketfile_check_bucket(b, err) < 0)
        return -EINVAL;
    if (bucketfile_has_parent(b) && bucketfile_check_parent(bf, b, err) < 0)
        return -EINVAL;
    if (unshare(bf) < 0)
        return -ENOMEM;
    int i = bucketfile_find(bf, b->name);
    if (i >= 0) {
        if (!same_bucket(&bf->v[i], b)) {
            int rc;
            const char *parent = intern_parent(bf, b->parent_name, &rc); /* a bucket of bf */
            if (rc < 0)
                return rc;
            const char *name = bf->v[i].name; /* the table's copy stays */
            bf->v[i] = *b;
            bf->v[i].name = name;
            bf->v[i].parent_name = parent;
            bf->src[i].changed = 1;
        }
        return 0;
    }
    return append(bf, b);
}

/* Takes index i out of the hash (linear probing: the entries after it in
 * its run move back where a lookup finds them), then renumbers the
 * indexes above i, which the caller moves down by one.  No rehash of the
 * names: one pass over the slots. */
static void unslot(bucketfile_t *bf, int i);

static void unindex(bucketfile_t *bf, int i)
{
    unslot(bf, i);
    for (size_t j = 0; j < bf->nslot; j++)
        if (bf->slot[j] > i)
            bf->slot[j]--;
}

/* Takes index i out of the hash (the entries after it in its run move
 * back where a lookup finds them); no renumbering. */
static void unslot(bucketfile_t *bf, int i)
{
    size_t mask = bf->nslot - 1, h = hash_name(bf->v[i].name) & mask;
    while (bf->slot[h] != i)
        h = (h + 1) & mask;
    bf->slot[h] = -1;
    for (size_t j = (h + 1) & mask; bf->slot[j] >= 0; j = (j + 1) & mask) {
        size_t k = hash_name(bf->v[bf->slot[j]].name) & mask;
        /* Entry j may fill the hole at h if its home k is not in (h, j]. */
        int stays = h <= j ? (k > h && k <= j) : (k > h || k <= j);
        if (!stays) {
            bf->slot[h] = bf->slot[j];
            bf->slot[j] = -1;
            h = j;
        }
    }
}

int bucketfile_remove_swap(bucketfile_t *bf, const char *name)
{
    int i = bucketfile_find(bf, name);
    if (i < 0)
        return -ENOENT;
    if (unshare(bf) < 0)
        return -ENOMEM;
    int m = (int)bf->n - 1;
    unslot(bf, i);
    if (i != m) {
        size_t mask = bf->nslot - 1, h = hash_name(bf->v[m].name) & mask;
        while (bf->slot[h] != m)
            h = (h + 1) & mask;
        bf->slot[h] = i;
        bf->v[i] = bf->v[m];
        bf->src[i] = bf->src[m];
    }
    bf->n--;
    return 0;
}

int bucketfile_remove(bucketfile_t *bf, const char *name)
{
    int i = bucketfile_find(bf, name);
    if (i < 0)
        return -ENOENT;
    if (bucketfile_has_children(bf, name))
        return -EBUSY;
    if (unshare(bf) < 0)
        return -ENOMEM;
    unindex(bf, i);
    size_t after = bf->n - (size_t)i - 1;
    memmove(&bf->v[i], &bf->v[i + 1], after * sizeof bf->v[0]);
    memmove(&bf->src[i], &bf->src[i + 1], after * sizeof bf->src[0]);
    bf->n--;
    return 0;
}

bucketfile_t *bucketfile_dup(const bucketfile_t *bf)
{
    bucketfile_t *c = malloc(sizeof *c);
    if (!c)
        return NULL;
    /* The arrays are shared, not copied (bf's are read-only while they
     * are): bf's `refs` is set up here, hence the cast; nothing bf shows
     * changes. */
    bucketfile_t *m = (bucketfile_t *)bf;
    if (!m->refs) {
        if (!(m->refs = malloc(sizeof *m->refs))) {
            free(c);
            return NULL;
        }
        atomic_init(m->refs, 1);
    }
    *c = *bf;
    c->opath = NULL;
    atomic_fetch_add(c->refs, 1);
    atomic_fetch_add(&c->names->refs, 1);
    if (c->rules)
        atomic_fetch_add(&c->rules->refs, 1);
    if (bucketfile_copy_origin(c, bf) < 0)
        bucketfile_destroy(&c);
    return c;
}

const rules_t *bucketfile_rules(const bucketfile_t *bf)
{
    return bf && bf->rules ? bf->rules->r : NULL;
}

int bucketfile_set_rules(bucketfile_t *bf, rules_t *r)
{
    struct bfrules *h = NULL;
    if (r) {
        if (!(h = malloc(sizeof *h)))
            return -ENOMEM;
        atomic_init(&h->refs, 1);
        h->r = r;
    }
    rules_unref(&bf->rules);
    bf->rules = h;
    bf->rules_changed = 1;
    return 0;
}

bucketfile_t *bucketfile_copy_rows(const bucketfile_t *bf)
{
    bucketfile_t *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    /* Room for a quarter more buckets (and their index) before a change
     * grows the arrays: a copy of them, O(n), every n/4 additions. */
    c->cap = bf->n + bf->n / 4 + 16;
    c->version = bf->version;
    c->v = malloc(c->cap * sizeof *c->v);
    c->src = calloc(c->cap, sizeof *c->src);
    if (c->v && c->src) {
        if (bf->n) /* an empty table's v may be NULL */
            memcpy(c->v, bf->v, bf->n * sizeof *c->v);
        c->n = bf->n;
    }
    if (!c->v || !c->src || reindex(c, c->cap) < 0) {
        bucketfile_destroy(&c);
        return NULL;
    }
    for (size_t i = 0; i < bf->n; i++)
        c->src[i] = (bucketfile_src_t){-1, 1};
    if (names_copy(c->v, c->n, c->slot, c->nslot, &c->names) < 0) { /* its own (see bfnames_t) */
        c->n = 0; /* the rows point at bf's names: nothing of them to free */
        bucketfile_destroy(&c);
        return NULL;
    }
    if ((c->rules = bf->rules)) /* shared, as by a dup */
        atomic_fetch_add(&c->rules->refs, 1);
    return c;
}

uint64_t bucketfile_version(const bucketfile_t *bf)
{
    return bf ? bf->version : 0;
}

void bucketfile_set_version(bucketfile_t *bf, uint64_t version)
{
    bf->version = version <= BUCKETFILE_MAX_VERSION ? version : BUCKETFILE_MAX_VERSION;
}

/* ---- parsing ------------------------------------------------------------- */

typedef struct {
    const char *text;
    size_t len;
    jsonloc_err_t *err;
    /* bucketfile_validate(): every bucket's first problem goes here and
     * parsing goes on with the next bucket; NULL: stop at the first */
    void (*report)(void *arg, const jsonloc_err_t *err);
    void *arg;
    size_t problems;
} pctx_t;

static int fail_at(pctx_t *p, const char *top, long idx, const char *member, const char *fmt,
                   ...) __attribute__((format(printf, 5, 6)));

static int fail_at(pctx_t *p, const char *top, long idx, const char *member, const char *fmt,
                   ...)
{
    jsonloc_err_t *err = p->err;
    if (!err)
        return -EINVAL;
    /* The path top[idx].member, as far as it is given; jsonloc stops at the
     * deepest value present, so a missing member points at its object. */
    jsonloc_step_t steps[3];
    size_t n = 0;
    if (top) {
        steps[n++] = (jsonloc_step_t){top, 0};
        if (idx >= 0) {
            steps[n++] = (jsonloc_step_t){NULL, (size_t)idx};
            if (member)
                steps[n++] = (jsonloc_step_t){member, 0};
        }
    }
    jsonloc_err_at(err, p->text, p->len, steps, n);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->text, sizeof err->text, fmt, ap);
    va_end(ap);
    return -EINVAL;
}

/* Reads integer member `key` of `o` into *out if present.  Returns 1 if
 * present and valid, 0 if absent, -EINVAL (error filled) if invalid. */
static int get_int(pctx_t *p, json_t *o, long idx, const char *key, int64_t max, int64_t *out)
{
    json_t *v = json_object_get(o, key);
    if (!v || (json_is_null(v) && strcmp(key, "reservation") != 0 && strcmp(key, "weight") != 0))
        return 0; /* "limit": null is no limit, as bqos-ctl --json buckets prints it; the
                     byte rates' null is none */
    if (!json_is_integer(v))
        return fail_at(p, "buckets", idx, key, "%s must be a non-negative integer", key);
    json_int_t x = json_integer_value(v);
    if (x < 0)
        return fail_at(p, "buckets", idx, key, "%s must not be negative", key);
    if (x > max)
        return fail_at(p, "buckets", idx, key, "%s %lld is absurdly large (maximum %lld)", key,
                       (long long)x, (long long)max);
    *out = (int64_t)x;
    return 1;
}

/* Reads and validates bucket object o (element idx of "buckets") into *out;
 * bf (may be NULL) is checked for a duplicate name. */
static int parse_bucket_obj(pctx_t *p, json_t *o, long idx, const bucketfile_t *bf,
                            bucketfile_bucket_t *out)
{
    if (!json_is_object(o))
        return fail_at(p, "buckets", idx, NULL, "bucket must be an object");
    const char *key;
    json_t *v;
    json_object_foreach(o, key, v)
    {
        if (strcmp(key, "name") && strcmp(key, "reservation") && strcmp(key, "limit") &&
            strcmp(key, "weight") && strcmp(key, "reservation_bytes") &&
            strcmp(key, "limit_bytes") && strcmp(key, "shadow") && strcmp(key, "parent"))
            return fail_at(p, "buckets", idx, key,
                           "unknown member \"%.40s\" (expected name, reservation, limit, weight, "
                           "reservation_bytes, limit_bytes, shadow, parent)",
                           key);
    }
    bucketfile_bucket_t b = {.limit = BUCKETFILE_NO_LIMIT, .weight = 1};
    v = json_object_get(o, "name");
    if (!v)
        return fail_at(p, "buckets", idx, NULL, "bucket has no \"name\"");
    if (!json_is_string(v))
        return fail_at(p, "buckets", idx, "name", "name must be a string");
    size_t nl = json_string_length(v);
    if (names_check_bucket(json_string_value(v), nl) < 0)
        return fail_at(p, "buckets", idx, "name",
                       "bad bucket name: must be 1..%d bytes without whitespace, control "
                       "characters or ':'",
                       BUCKETFILE_NAME_MAX);
    if (strlen(json_string_value(v)) != nl) /* a NUL inside */
        return fail_at(p, "buckets", idx, "name",
                       "bad bucket name: must be 1..%d bytes without whitespace, control "
                       "characters or ':'",
                       BUCKETFILE_NAME_MAX);
    b.name = json_string_value(v); /* o's: appending copies it into the table */
    if (bf && bucketfile_find(bf, b.name) >= 0)
        return fail_at(p, "buckets", idx, "name", "duplicate bucket name \"%s\"", b.name);
    int rc = get_int(p, o, idx, "reservation", BUCKETFILE_MAX_RATE, &b.reservation);
    if (rc < 0)
        return rc;
    if (rc == 0)
        return fail_at(p, "buckets", idx, NULL, "bucket \"%s\" has no \"reservation\"", b.name);
    if ((rc = get_int(p, o, idx, "limit", BUCKETFILE_MAX_RATE, &b.limit)) < 0)
        return rc;
    int64_t w = 1;
    if ((rc = get_int(p, o, idx, "weight", BUCKETFILE_MAX_WEIGHT, &w)) < 0)
        return rc;
    if (w < 1)
        return fail_at(p, "buckets", idx, "weight", "weight must be at least 1");
    b.weight = (uint32_t)w;
    if (b.reservation > b.limit)
        return fail_at(p, "buckets", idx, "limit", "limit %lld is below the reservation %lld",
                       (long long)b.limit, (long long)b.reservation);
    static const char *const bkeys[2] = {"reservation_bytes", "limit_bytes"};
    int64_t *bdst[2] = {&b.reservation_bytes, &b.limit_bytes};
    for (int k = 0; k < 2; k++) {
        if ((rc = get_int(p, o, idx, bkeys[k], BUCKETFILE_MAX_BYTES, bdst[k])) < 0)
            return rc;
        if (rc == 1 && *bdst[k] == 0)
            return fail_at(p, "buckets", idx, bkeys[k],
                           "%s must be at least 1 (leave it out for none)", bkeys[k]);
    }
    if (b.limit_bytes > 0 && b.reservation_bytes > b.limit_bytes)
        return fail_at(p, "buckets", idx, "limit_bytes",
                       "limit_bytes %lld is below reservation_bytes %lld",
                       (long long)b.limit_bytes, (long long)b.reservation_bytes);
    if ((v = json_object_get(o, "shadow"))) {
        if (!json_is_boolean(v))
            return fail_at(p, "buckets", idx, "shadow", "shadow must be true or false");
        b.shadow = json_is_true(v);
        if (b.shadow && b.limit == BUCKETFILE_NO_LIMIT && b.limit_bytes == 0)
            return fail_at(p, "buckets", idx, "shadow",
                           "shadow needs a limit (a bucket without one has nothing to count)");
    }
    if ((v = json_object_get(o, "parent")) && !json_is_null(v)) {
        size_t pl = json_is_string(v) ? json_string_length(v) : 0;
        if (!json_is_string(v) || pl > BUCKETFILE_PARENT_MAX ||
            names_check_bucket(json_string_value(v), pl) < 0)
            return fail_at(p, "buckets", idx, "parent",
                           "parent must be a bucket name (a string of 1..%d bytes without "
                           "whitespace, control characters or ':')", BUCKETFILE_PARENT_MAX);
        bucketfile_bucket_set_parent(&b, json_string_value(v)); /* o's: copied by append */
    }
    *out = b;
    return 0;
}

static int parse_bucket(pctx_t *p, json_t *o, long idx, bucketfile_t *bf)
{
    bucketfile_bucket_t b;
    int rc = parse_bucket_obj(p, o, idx, bf, &b);
    return rc < 0 ? rc : append(bf, &b);
}

/* bucketfile_parse() with p's report (may be NULL). */
static int parse_text(pctx_t *p, const char *source, bucketfile_t **out)
{
    const char *text = p->text;
    size_t len = p->len;
    jsonloc_err_t *err = p->err;
    if (err) {
        jsonloc_err_clear(err);
        snprintf(err->source, sizeof err->source, "%s", source ? source : "<string>");
    }
    json_error_t jerr;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        if (err) {
            err->line = jerr.line > 0 ? jerr.line : 0;
            err->col = jerr.column > 0 ? jerr.column : 0;
            snprintf(err->text, sizeof err->text, "%s", jerr.text);
        }
        if (p->report) {
            p->report(p->arg, err);
            p->problems++;
        }
        return -EINVAL;
    }
    int rc = 0;
    bucketfile_t *bf = bucketfile_new();
    if (!bf) {
        rc = -ENOMEM;
        goto out;
    }
    if (!json_is_object(root)) {
        rc = fail_at(p, NULL, -1, NULL, "top level must be an object {\"buckets\": [...]}");
        goto out;
    }
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v)
    {
        if (strcmp(key, "table_version") == 0) {
            if (!json_is_integer(v) || json_integer_value(v) < 0 ||
                (uint64_t)json_integer_value(v) > BUCKETFILE_MAX_VERSION) {
                rc = fail_at(p, key, -1, NULL, "table_version must be an integer in 0..%llu",
                             (unsigned long long)BUCKETFILE_MAX_VERSION);
                goto out;
            }
            bf->version = (uint64_t)json_integer_value(v);
        } else if (strcmp(key, "rules") == 0) {
            rules_t *r = NULL;
            rc = rules_from_json(v, text, len, source ? source : "<string>", "rules", &r, err);
            if (rc == 0 && (rc = bucketfile_set_rules(bf, r)) < 0)
                rules_destroy(&r);
            if (rc < 0)
                goto out;
            bf->rules_changed = 0;
        } else if (strcmp(key, "buckets")) {
            rc = fail_at(p, key, -1, NULL,
                         "unknown member \"%.40s\" (expected \"buckets\", \"table_version\", "
                         "\"rules\")",
                         key);
            goto out;
        }
    }
    json_t *arr = json_object_get(root, "buckets");
    if (!arr) {
        rc = fail_at(p, NULL, -1, NULL, "no \"buckets\" array");
        goto out;
    }
    if (!json_is_array(arr)) {
        rc = fail_at(p, "buckets", -1, NULL, "\"buckets\" must be an array");
        goto out;
    }
    for (size_t i = 0; i < json_array_size(arr); i++) {
        rc = parse_bucket(p, json_array_get(arr, i), (long)i, bf);
        if (rc == -EINVAL && p->report) {
            p->report(p->arg, err);
            p->problems++;
            rc = 0;
            continue;
        }
        if (rc < 0)
            goto out;
    }
    /* The parents, once every bucket is known (a child may come first);
     * after bad buckets (--check) the indices no longer match the file's. */
    for (size_t i = 0; !p->problems && i < bf->n; i++) {
        jsonloc_err_t pe;
        if (!bf->v[i].parent_name)
            continue;
        if (bucketfile_check_parent(bf, &bf->v[i], &pe) == 0) {
            /* the parent bucket's own name (a copy if it came after) */
            bf->v[i].parent_name = bf->v[bucketfile_find(bf, bf->v[i].parent_name)].name;
        } else {
            rc = fail_at(p, "buckets", (long)i, "parent", "%s", pe.text);
            if (p->report) {
                p->report(p->arg, err);
                p->problems++;
                rc = 0;
                continue;
            }
            goto out;
        }
    }
    if (p->problems) {
        rc = -EINVAL;
        goto out;
    }
    if ((rc = set_text(bf, text, len)) < 0)
        goto out;
    index_text(bf);
    *out = bf;
    bf = NULL;
out:
    if (rc == -ENOMEM && err)
        snprintf(err->text, sizeof err->text, "out of memory");
    if (rc == -EINVAL && p->report && !p->problems) { /* a problem of the whole file */
        p->report(p->arg, err);
        p->problems++;
    }
    bucketfile_destroy(&bf);
    json_decref(root);
    /* A big document's tree (a million small objects, several hundred MB)
     * is gone: give its pages back rather than keep them as a free heap. */
    if (len > (1u << 24))
        malloc_trim(0);
    return rc;
}

int bucketfile_parse(const char *text, size_t len, const char *source, bucketfile_t **out,
                     jsonloc_err_t *err)
{
    pctx_t p = {.text = text, .len = len, .err = err};
    return parse_text(&p, source, out);
}

/* ---- files -------------------------------------------------------------- */

static int load_journal(bucketfile_t *bf, const char *path, jsonloc_err_t *err);

/* Reads file `path` whole into *buf (NUL-terminated, caller frees; *len
 * bytes) and fills *id from the same descriptor.  Returns 0 or -errno. */
static int read_all(const char *path, char **buf, size_t *len, bucketfile_ident_t *id)
{
    int rc = 0, fd = open(path, O_RDONLY | O_CLOEXEC);
    char *b = NULL;
    size_t cap = 65536, n = 0;
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        rc = -errno;
        goto out;
    }
    if (st.st_size > 0 && (size_t)st.st_size < SIZE_MAX / 2)
        cap = (size_t)st.st_size + 2; /* one read, no doubling (a 75 MB file) */
    if (!(b = malloc(cap))) {
        rc = -ENOMEM;
        goto out;
    }
    for (;;) {
        if (n + 1 >= cap) {
            char *nb = realloc(b, cap * 2);
            if (!nb) {
                rc = -ENOMEM;
                goto out;
            }
            b = nb;
            cap *= 2;
        }
        ssize_t got = read(fd, b + n, cap - n - 1);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            rc = -errno;
            goto out;
        }
        if (got == 0)
            break;
        n += (size_t)got;
    }
    b[n] = '\0';
    *id = (bucketfile_ident_t){.exists = 1, .size = (int64_t)n,
                               .mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec,
                               .dev = (uint64_t)st.st_dev, .ino = (uint64_t)st.st_ino,
                               .hash = hash_bytes(b, n)};
    if ((int64_t)st.st_size != id->size)
        id->ino = 0; /* it changed while read: the stat says nothing of this content */
    *buf = b;
    *len = n;
    b = NULL;
out:
    if (fd >= 0)
        close(fd);
    free(b);
    return rc;
}

/* Fills err for a file that cannot be read. */
static void io_error(jsonloc_err_t *err, const char *path, int rc)
{
    if (!err)
        return;
    jsonloc_err_clear(err);
    snprintf(err->source, sizeof err->source, "%s", path);
    snprintf(err->text, sizeof err->text, "cannot read: %s", strerror(-rc));
}

/* Records that bf came from or went to file `path`, which held *id. */
static int set_origin(bucketfile_t *bf, const char *path, const bucketfile_ident_t *id)
{
    char *p = path ? strdup(path) : NULL;
    if (path && !p)
        return -ENOMEM;
    free(bf->opath);
    bf->opath = p;
    bf->origin = *id;
    return 0;
}

int bucketfile_load(const char *path, bucketfile_t **out, jsonloc_err_t *err)
{
    int rc = bucketfile_load_file(path, out, err);
    if (rc == 0 && (rc = load_journal(*out, path, err)) < 0)
        bucketfile_destroy(out);
    return rc;
}

int bucketfile_load_file(const char *path, bucketfile_t **out, jsonloc_err_t *err)
{
    char *buf = NULL;
    size_t n = 0;
    bucketfile_ident_t id;
    int rc = read_all(path, &buf, &n, &id);
    if (rc < 0) {
        io_error(err, path, rc);
        return rc;
    }
    rc = bucketfile_parse(buf, n, path, out, err);
    if (rc == 0 && set_origin(*out, path, &id) < 0) {
        bucketfile_destroy(out);
        rc = -ENOMEM;
    }
    free(buf);
    return rc;
}

int bucketfile_validate(const char *path, void (*report)(void *arg, const jsonloc_err_t *err),
                        void *arg)
{
    char *buf = NULL;
    size_t n = 0;
    bucketfile_ident_t id;
    jsonloc_err_t err;
    int rc = read_all(path, &buf, &n, &id);
    if (rc < 0) {
        io_error(&err, path, rc);
        report(arg, &err);
        return rc == -ENOMEM ? rc : 1;
    }
    pctx_t p = {.text = buf, .len = n, .err = &err, .report = report, .arg = arg};
    bucketfile_t *bf = NULL;
    rc = parse_text(&p, path, &bf);
    /* The journal beside it, as bucketfile_load() applies it. */
    if (rc == 0 && bf && set_origin(bf, path, &id) == 0 &&
        (rc = load_journal(bf, path, &err)) < 0) {
        report(arg, &err);
        p.problems++;
        rc = rc == -ENOMEM ? rc : 0;
    }
    bucketfile_destroy(&bf);
    free(buf);
    return rc == -ENOMEM ? rc : (int)p.problems;
}

/* Fills *id with what file `path` holds now (a missing file: exists 0).
 * Returns 0 or the -errno of open/read. */
static int file_ident(const char *path, bucketfile_ident_t *id)
{
    char *buf = NULL;
    size_t n;
    int rc = read_all(path, &buf, &n, id);
    free(buf);
    if (rc == -ENOENT) {
        *id = (bucketfile_ident_t){0};
        return 0;
    }
    return rc;
}

int bucketfile_copy_origin(bucketfile_t *to, const bucketfile_t *from)
{
    return set_origin(to, from->opath, &from->origin);
}

int bucketfile_check_unchanged(const bucketfile_t *bf, const char *path, char *msg, size_t size)
{
    if (!bf->opath || strcmp(bf->opath, path) != 0)
        return 0;
    return bucketfile_check_ident(&bf->origin, path, msg, size);
}

int bucketfile_origin(const bucketfile_t *bf, bucketfile_ident_t *id)
{
    if (!bf->opath)
        return -ENOENT;
    *id = bf->origin;
    return 0;
}

int bucketfile_check_ident(const bucketfile_ident_t *o, const char *path, char *msg, size_t size)
{
    bucketfile_ident_t now;
    struct stat st;
    /* The same file (device, inode), size and mtime: unchanged, nothing
     * read (a change costs a stat, not a hash of the whole file).  A
     * stat that differs (a touch, a copy back, an edit) has the content
     * decide, as before. */
    if (o->exists && o->ino && stat(path, &st) == 0 && (uint64_t)st.st_dev == o->dev &&
        (uint64_t)st.st_ino == o->ino && (int64_t)st.st_size == o->size &&
        (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec == o->mtime_ns)
        return 0;
    int rc = file_ident(path, &now);
    if (rc < 0) {
        snprintf(msg, size, "cannot read %s: %s", path, strerror(-rc));
        return rc;
    }
    /* The content decides: a touch loses nothing, an edit that keeps the
     * size does. */
    if (now.exists == o->exists && now.size == o->size && now.hash == o->hash)
        return 0;
    if (!now.exists) {
        snprintf(msg, size, "%s was removed since the controller last loaded or wrote it", path);
        return -ESTALE;
    }
    char when[40] = "?";
    time_t sec = (time_t)(now.mtime_ns / 1000000000);
    struct tm tm;
    if (gmtime_r(&sec, &tm))
        strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    snprintf(msg, size,
             "%s changed on disk since the controller last loaded or wrote it (modified %s, "
             "%lld bytes, was %lld): not overwriting that edit; load it first (bqos-ctl reload "
             "or SIGHUP), then repeat the change",
             path, when, (long long)now.size, (long long)o->size);
    return -ESTALE;
}

/* ---- output -------------------------------------------------------------- */

/* A text being written: a growing buffer, and the spans of the elements
 * of its "buckets" array as they are written (what index_text() would
 * find in it), so that the saved text is the base of the next edit
 * without a scan. */
typedef struct {
    char *p;
    size_t n, cap;
    size_t *sp; /* 2 per element */
    size_t nsp;
    size_t as, ae; /* the "buckets" array's span */
    size_t vs, ve; /* the "table_version" value's span; vs == ve: none */
    int32_t *ord;  /* the buckets in the order written (write_edited());
                      NULL: table order */
    int oom;
} tbuf_t;

static void tb_put(tbuf_t *t, const char *s, size_t n)
{
    if (t->oom)
        return;
    if (t->n + n + 1 > t->cap) {
        size_t cap = t->cap ? t->cap : 4096;
        while (cap < t->n + n + 1)
            cap *= 2;
        char *p = realloc(t->p, cap);
        if (!p) {
            t->oom = 1;
            return;
        }
        t->p = p;
        t->cap = cap;
    }
    memcpy(t->p + t->n, s, n);
    t->n += n;
    t->p[t->n] = '\0';
}

static void tb_puts(tbuf_t *t, const char *s)
{
    tb_put(t, s, strlen(s));
}

/* Writes name s as a JSON string. */
static void put_string(tbuf_t *t, const char *s)
{
    if (strpbrk(s, "\"\\")) { /* jansson escapes it; other bytes go as they are */
        json_t *j = json_string(s);
        char *q = j ? json_dumps(j, JSON_ENCODE_ANY) : NULL;
        json_decref(j);
        if (!q) {
            t->oom = 1;
            return;
        }
        tb_puts(t, q);
        free(q);
    } else {
        tb_puts(t, "\"");
        tb_puts(t, s);
        tb_puts(t, "\"");
    }
}

/* Writes bucket b as one object, {"name": ..., "reservation": R[, "limit": L], "weight": W
 * [, "reservation_bytes": RB][, "limit_bytes": LB][, "shadow": true][, "parent": P]}. */
static void put_bucket(tbuf_t *t, const bucketfile_bucket_t *b)
{
    char num[192];
    tb_puts(t, "{\"name\": ");
    put_string(t, b->name);
    if (t->oom)
        return;
    int n = snprintf(num, sizeof num, ", \"reservation\": %lld", (long long)b->reservation);
    if (b->limit != BUCKETFILE_NO_LIMIT)
        n += snprintf(num + n, sizeof num - (size_t)n, ", \"limit\": %lld", (long long)b->limit);
    n += snprintf(num + n, sizeof num - (size_t)n, ", \"weight\": %u", b->weight);
    tb_put(t, num, (size_t)n);
    if (b->reservation_bytes > 0) {
        n = snprintf(num, sizeof num, ", \"reservation_bytes\": %lld", (long long)b->reservation_bytes);
        tb_put(t, num, (size_t)n);
    }
    if (b->limit_bytes > 0) {
        n = snprintf(num, sizeof num, ", \"limit_bytes\": %lld", (long long)b->limit_bytes);
        tb_put(t, num, (size_t)n);
    }
    if (b->shadow)
        tb_puts(t, ", \"shadow\": true");
    if (bucketfile_has_parent(b)) {
        tb_puts(t, ", \"parent\": ");
        put_string(t, b->parent_name);
    }
    tb_puts(t, "}");
}

/* Writes the element of bucket i as put_bucket(), or, if it is in the
 * base text unchanged, copies its object, and records its span. */
static void put_element(tbuf_t *t, const bucketfile_t *bf, size_t i, int copy)
{
    size_t st = t->n;
    int32_t k = bf->src[i].elem;
    if (copy && k >= 0 && !bf->src[i].changed)
        tb_put(t, bf->text + bf->sp[2 * k], bf->sp[2 * k + 1] - bf->sp[2 * k]);
    else
        put_bucket(t, &bf->v[i]);
    if (t->sp) {
        t->sp[2 * t->nsp] = st;
        t->sp[2 * t->nsp + 1] = t->n;
        t->nsp++;
    }
}

/* The canonical text of bf into t: one bucket per line. */
static void write_canonical(tbuf_t *t, const bucketfile_t *bf)
{
    if (bf->version) {
        char num[32];
        int n = snprintf(num, sizeof num, "%llu", (unsigned long long)bf->version);
        tb_puts(t, "{\"table_version\": ");
        t->vs = t->n;
        tb_put(t, num, (size_t)n);
        t->ve = t->n;
        tb_puts(t, ", \"buckets\": ");
    } else {
        tb_puts(t, "{\"buckets\": ");
    }
    t->as = t->n;
    tb_puts(t, "[\n");
    for (size_t i = 0; i < bf->n && !t->oom; i++) {
        tb_puts(t, "  ");
        put_element(t, bf, i, 0);
        tb_puts(t, i + 1 < bf->n ? ",\n" : "\n");
    }
    tb_puts(t, "]");
    t->ae = t->n;
    if (bf->rules) {
        char *r = rules_dumps(bf->rules->r);
        if (!r)
            t->oom = 1;
        tb_puts(t, ",\n \"rules\": ");
        if (r)
            tb_puts(t, r);
        free(r);
    }
    tb_puts(t, "}\n");
}

/* The one change a render makes outside the buckets array: the base
 * text's x[at, end) written as `put` (the "table_version" value replaced,
 * or, at == end, the member inserted); put NULL: none. */
typedef struct {
    size_t at, end;
    const char *put;
    size_t val, vlen; /* the value's place in put */
} tb_patch_t;

/* Copies x[from, to) into t, with the patch applied if it lies in that
 * range.  The patch is outside the buckets array, so the spans recorded
 * for the elements (after it, if it is before the array) stay right: they
 * are positions in t, not in x. */
static void tb_copy(tbuf_t *t, const char *x, size_t from, size_t to, const tb_patch_t *pt)
{
    if (pt->put && pt->at >= from && pt->at < to && pt->end <= to) {
        tb_put(t, x + from, pt->at - from);
        t->vs = t->n + pt->val;
        t->ve = t->vs + pt->vlen;
        tb_puts(t, pt->put);
        from = pt->end;
    }
    tb_put(t, x + from, to - from);
}

/* The patch that makes the base text's top-level "table_version" bf's:
 * its value replaced where it is, or, if it has none and bf a version,
 * the member put first in the top-level object (as bucketfile_dumps()
 * writes it); no patch if neither.  `num` (48 bytes) holds the text put;
 * the value's span comes from index_text() or the last save, no scan.
 * Returns 0, or -EINVAL if the base has no top-level '{' before the array
 * to put the member after (the caller writes the canonical form). */
static int version_patch(const bucketfile_t *bf, char *num, tb_patch_t *pt)
{
    *pt = (tb_patch_t){0};
    if (bf->ve > bf->vs) { /* index_text() or the last save found it */
        int n = snprintf(num, 48, "%llu", (unsigned long long)bf->version);
        *pt = (tb_patch_t){bf->vs, bf->ve, num, 0, (size_t)n};
        return 0;
    }
    if (!bf->version)
        return 0;
    size_t r = 0;
    while (r < bf->as && strchr(" \t\r\n", bf->text[r]))
        r++;
    if (r >= bf->as || bf->text[r] != '{')
        return -EINVAL;
    int n = snprintf(num, 48, "\"table_version\": %llu, ", (unsigned long long)bf->version);
    size_t key = strlen("\"table_version\": ");
    *pt = (tb_patch_t){r + 1, r + 1, num, key, (size_t)n - key - 2};
    return 0;
}

/* The base text edited to hold bf into t: what lies around the buckets
 * array and between its elements is copied (the "table_version" patched,
 * `pt`); an unchanged bucket keeps its object's text, a changed one is
 * written anew in its place, a removed one goes with its separator, a
 * new one is appended with the separator the last elements use.  One
 * pass: O(length of the text), whatever changed (the spans come from the
 * parse, index_text(), or the last save). */
static void write_edited(tbuf_t *t, const bucketfile_t *bf, const tb_patch_t *pt)
{
    const char *x = bf->text;
    const size_t *sp = bf->sp, no = bf->nsp, as = bf->as, ae = bf->ae;
    /* The whitespace a new element follows: the last separator's (after
     * its comma), else the one before the first element. */
    const char *ws = "\n  ";
    size_t wsn = 3;
    if (no >= 2) {
        ws = memchr(x + sp[2 * (no - 2) + 1], ',', sp[2 * (no - 1)] - sp[2 * (no - 2) + 1]);
        ws = ws ? ws + 1 : x + sp[2 * (no - 1)];
        wsn = (size_t)(x + sp[2 * (no - 1)] - ws);
    } else if (no == 1) {
        ws = x + as + 1;
        wsn = sp[0] - as - 1;
    }
    /* The order written: the base text's elements in their order (a
     * bucket moved by bucketfile_remove_swap() keeps its place in the
     * file), then the new buckets in table order. */
    int32_t *inv = malloc((no ? no : 1) * sizeof *inv);
    int32_t *ord = malloc((bf->n ? bf->n : 1) * sizeof *ord);
    if (!inv || !ord) {
        free(inv);
        free(ord);
        t->oom = 1;
        return;
    }
    for (size_t k = 0; k < no; k++)
        inv[k] = -1;
    for (size_t i = 0; i < bf->n; i++)
        if (bf->src[i].elem >= 0)
            inv[bf->src[i].elem] = (int32_t)i;
    size_t nord = 0;
    for (size_t k = 0; k < no; k++)
        if (inv[k] >= 0)
            ord[nord++] = inv[k];
    for (size_t i = 0; i < bf->n; i++)
        if (bf->src[i].elem < 0)
            ord[nord++] = (int32_t)i;
    free(inv);
    free(t->ord);
    t->ord = ord;
    tb_copy(t, x, 0, as, pt);
    t->as = t->n;
    tb_put(t, x + as, 1); /* '[' */
    for (size_t w = 0; w < bf->n && !t->oom; w++) {
        size_t i = (size_t)ord[w];
        int32_t k = bf->src[i].elem;
        if (w == 0)
            tb_put(t, x + as + 1, (no ? sp[0] : ae - 1) - as - 1);
        else if (k > 0)
            tb_put(t, x + sp[2 * k - 1], sp[2 * k] - sp[2 * k - 1]); /* its own separator */
        else {
            tb_puts(t, ",");
            tb_put(t, ws, wsn);
        }
        put_element(t, bf, i, 1);
    }
    if (bf->n > 0 && no > 0)
        tb_put(t, x + sp[2 * no - 1], ae - 1 - sp[2 * no - 1]); /* before the ']' */
    tb_put(t, x + ae - 1, 1); /* ']' */
    t->ae = t->n;
    tb_copy(t, x, ae, bf->tlen, pt);
}

/* Renders bf into *t (bucketfile_render()), with the spans of its
 * elements when `spans`.  Returns 0 or -ENOMEM (t freed). */
static int render(const bucketfile_t *bf, tbuf_t *t, int spans)
{
    *t = (tbuf_t){0};
    if (spans && bf->n && !(t->sp = malloc(2 * bf->n * sizeof *t->sp)))
        return -ENOMEM;
    char num[48];
    tb_patch_t pt;
    if (bf->text && bf->sp && !bf->rules_changed && version_patch(bf, num, &pt) == 0)
        write_edited(t, bf, &pt);
    else
        write_canonical(t, bf);
    if (!t->p)
        tb_put(t, "", 0);
    if (t->oom) {
        free(t->p);
        free(t->sp);
        free(t->ord);
        *t = (tbuf_t){0};
        return -ENOMEM;
    }
    return 0;
}

char *bucketfile_dumps(const bucketfile_t *bf)
{
    tbuf_t t = {0};
    write_canonical(&t, bf);
    if (t.oom) {
        free(t.p);
        return NULL;
    }
    return t.p;
}

char *bucketfile_render(const bucketfile_t *bf)
{
    tbuf_t t;
    if (render(bf, &t, 0) < 0)
        return NULL;
    free(t.ord);
    return t.p;
}

/* ---- the journal (PATH.journal) ---------------------------------------- */

char *bucketfile_journal_path(const char *path)
{
    char *j = NULL;
    return asprintf(&j, "%s%s", path, BUCKETFILE_JOURNAL_SUFFIX) < 0 ? NULL : j;
}

/* Reads file `path` whole (NUL-terminated; *len bytes); a missing file is
 * empty.  Returns 0 or -errno. */
static int read_journal(const char *path, char **buf, size_t *len)
{
    bucketfile_ident_t id;
    int rc = read_all(path, buf, len, &id);
    if (rc == -ENOENT) {
        *buf = NULL;
        *len = 0;
        return 0;
    }
    return rc;
}

/* Fills err for journal line `line` (1-based). */
static int journal_fail(jsonloc_err_t *err, const char *source, int line, int col,
                        const char *path, const char *text)
{
    if (err) {
        jsonloc_err_clear(err);
        snprintf(err->source, sizeof err->source, "%s", source ? source : "<journal>");
        err->line = line;
        err->col = col;
        snprintf(err->path, sizeof err->path, "%.*s", (int)sizeof err->path - 1,
                 path ? path : "");
        snprintf(err->text, sizeof err->text, "%.*s", (int)sizeof err->text - 1, text);
    }
    return -EINVAL;
}

/* A marker's or base line's file (size, "hash": 16 hex digits) and the
 * marker's "upto" (a base line has none: 0). */
static int mark_of(json_t *root, const char *key, int64_t *size, uint64_t *hash, uint64_t *upto)
{
    json_t *m = json_object_get(root, key);
    json_t *js = json_object_get(m, "size"), *jh = json_object_get(m, "hash"),
           *ju = json_object_get(m, "upto");
    char *end;
    int base = strcmp(key, "base") == 0;
    if (!json_is_object(m) || !json_is_integer(js) || !json_is_string(jh) ||
        json_string_length(jh) != 16 || json_object_size(m) != (base ? 2u : 3u) ||
        (!base && (!json_is_integer(ju) || json_integer_value(ju) < 0)))
        return -EINVAL;
    *hash = strtoull(json_string_value(jh), &end, 16);
    if (*end)
        return -EINVAL;
    *size = json_integer_value(js);
    *upto = base ? 0 : (uint64_t)json_integer_value(ju);
    return 0;
}

static int marker_of(json_t *root, int64_t *size, uint64_t *hash, uint64_t *upto)
{
    return mark_of(root, "compacted", size, hash, upto);
}

/* Nonzero if *f (may be NULL) is the file (size, hash). */
static int is_file(const bucketfile_ident_t *f, int64_t size, uint64_t hash)
{
    return f && f->exists && f->size == size && f->hash == hash;
}

/* Where the lines that apply to file *f (NULL: none known) begin: *from
 * (after the last marker naming f; 0 if none), and whether they apply
 * at all (0: the base line names another file and no marker names f). */
static int journal_start(const char *text, size_t len, const bucketfile_ident_t *f, size_t *from)
{
    int marked = 0, base = -1; /* base: the first line names f (1), another (0) */
    int64_t size;
    uint64_t hash, upto;
    *from = 0;
    if (len > 9 && memcmp(text, "{\"base\":", 8) == 0) {
        const char *nl = memchr(text, '\n', len);
        json_t *root = nl ? json_loadb(text, (size_t)(nl - text), 0, NULL) : NULL;
        if (root && mark_of(root, "base", &size, &hash, &upto) == 0)
            base = is_file(f, size, hash);
        json_decref(root);
    }
    /* A marker that names f: what lies before its `upto` is in that file
     * (a compaction or a save got as far as the rename).  The last one
     * counts. */
    for (size_t at = 0; at < len;) {
        const char *nl = memchr(text + at, '\n', len - at);
        size_t end = nl ? (size_t)(nl - text) : len;
        if (end - at > 14 && memcmp(text + at, "{\"compacted\":", 13) == 0) {
            json_t *root = json_loadb(text + at, end - at, 0, NULL);
            if (root && marker_of(root, &size, &hash, &upto) == 0 && is_file(f, size, hash) &&
                upto <= at) {
                *from = (size_t)upto;
                marked = 1;
            }
            json_decref(root);
        }
        at = end + 1;
    }
    return !(base == 0 && !marked);
}

int bucketfile_journal_extends(const char *text, size_t len, const bucketfile_ident_t *file)
{
    size_t from;
    return journal_start(text, len, file, &from);
}

int bucketfile_journal_apply(bucketfile_t *bf, const char *text, size_t len, const char *source,
                             bucketfile_journal_result_t *res, jsonloc_err_t *err)
{
    bucketfile_journal_result_t r = {0};
    size_t from = 0;
    if (!journal_start(text, len, bf->opath ? &bf->origin : NULL, &from)) {
        /* The lines extend another version of the file: it was edited by
         * hand (or replaced) since.  The file is the operator's word. */
        r.ignored = 1;
        if (res)
            *res = r;
        return 0;
    }
    r.skipped_to = from;
    int line = 1;
    for (size_t at = 0; at < from; at++)
        line += text[at] == '\n';
    for (size_t at = from; at < len; line++) {
        const char *nl = memchr(text + at, '\n', len - at);
        size_t end = nl ? (size_t)(nl - text) : len;
        size_t ll = end - at;
        const char *lt = text + at;
        at = end + 1;
        if (ll == 0)
            continue;
        json_error_t je;
        json_t *root = json_loadb(lt, ll, JSON_REJECT_DUPLICATES, &je);
        if (!root) {
            if (!nl) { /* a torn last line: the write a crash cut short */
                r.torn = 1;
                break;
            }
            return journal_fail(err, source, line, je.column > 0 ? je.column : 1, NULL, je.text);
        }
        int rc = 0;
        json_t *js = json_object_get(root, "set"), *jr = json_object_get(root, "remove"),
               *jv = json_object_get(root, "table_version");
        const char *key;
        json_t *v;
        json_object_foreach(root, key, v)
        {
            if (strcmp(key, "set") && strcmp(key, "remove") && strcmp(key, "table_version") &&
                strcmp(key, "compacted") && strcmp(key, "base")) {
                rc = journal_fail(err, source, line, 1, key,
                                  "unknown member (expected set, remove, table_version, "
                                  "compacted)");
                break;
            }
        }
        if (rc == 0 && jv && (!json_is_integer(jv) || json_integer_value(jv) < 0 ||
                              (uint64_t)json_integer_value(jv) > BUCKETFILE_MAX_VERSION))
            rc = journal_fail(err, source, line, 1, "table_version",
                              "table_version must be an integer in 0..2^53");
        int64_t size;
        uint64_t hash, upto;
        if (rc == 0 && json_object_get(root, "base")) {
            if (json_object_size(root) != 1 || mark_of(root, "base", &size, &hash, &upto) < 0)
                rc = journal_fail(err, source, line, 1, "base",
                                  "a base line is {\"base\": {\"size\": N, \"hash\": \"16 hex "
                                  "digits\"}} alone");
        } else if (rc == 0 && json_object_get(root, "compacted")) {
            if (js || jr || json_object_size(root) != 1 ||
                marker_of(root, &size, &hash, &upto) < 0)
                rc = journal_fail(err, source, line, 1, "compacted",
                                  "a marker is {\"compacted\": {\"size\": N, \"hash\": "
                                  "\"16 hex digits\", \"upto\": OFFSET}} alone");
        } else if (rc == 0 && (!js) == (!jr)) {
            rc = journal_fail(err, source, line, 1, NULL,
                              "a line is {\"set\": {bucket}} or {\"remove\": \"name\"}");
        } else if (rc == 0 && js) {
            bucketfile_bucket_t b;
            pctx_t p = {.text = "", .len = 0, .err = err};
            if (parse_bucket_obj(&p, js, 0, NULL, &b) < 0) {
                char what[sizeof err->text];
                snprintf(what, sizeof what, "%s", err ? err->text : "invalid bucket");
                char path[sizeof err->path + 8];
                const char *m = err ? strrchr(err->path, '.') : NULL;
                snprintf(path, sizeof path, "set%s", m ? m : "");
                rc = journal_fail(err, source, line, 1, path, what);
            } else if ((rc = bucketfile_set(bf, &b, err)) == 0) {
                r.applied++;
            } else if (rc == -EINVAL) {
                rc = journal_fail(err, source, line, 1, "set", "invalid bucket");
            }
        } else if (rc == 0) {
            if (!json_is_string(jr))
                rc = journal_fail(err, source, line, 1, "remove", "remove takes a bucket name");
            else if (bucketfile_remove(bf, json_string_value(jr)) == 0)
                r.applied++;
            /* an absent name: the line is already in the file (replayed
             * after a compaction that renamed but had not yet cut the
             * journal), or undoes a set that is */
        }
        if (rc == 0 && jv && (js || jr))
            bucketfile_set_version(bf, (uint64_t)json_integer_value(jv));
        int counted = js || jr;
        json_decref(root);
        if (rc < 0)
            return rc == -ENOMEM && err ? (snprintf(err->text, sizeof err->text, "out of memory"), rc)
                                        : rc;
        r.lines += counted;
    }
    if (res)
        *res = r;
    return 0;
}

/* bucketfile_load()'s second half: PATH.journal over the set just read. */
static int load_journal(bucketfile_t *bf, const char *path, jsonloc_err_t *err)
{
    char *jp = bucketfile_journal_path(path), *buf = NULL;
    size_t n = 0;
    int rc = jp ? read_journal(jp, &buf, &n) : -ENOMEM;
    if (rc < 0) {
        io_error(err, jp ? jp : path, rc);
        goto out;
    }
    bucketfile_journal_result_t r;
    if (n && (rc = bucketfile_journal_apply(bf, buf, n, jp, &r, err)) == 0 && r.ignored)
        log_warn("%s: its changes extend another version of %s (edited by hand or replaced "
                 "since): not applied; the file is loaded as it is", jp, path);
    else if (n && rc == 0 && r.torn)
        log_warn("%s: its last line is incomplete (a write cut short by a crash: that change "
                 "was never acknowledged): dropped", jp);
out:
    free(buf);
    free(jp);
    return rc;
}

char *bucketfile_journal_set_line(const bucketfile_bucket_t *b, uint64_t version)
{
    tbuf_t t = {0};
    char num[48];
    tb_puts(&t, "{\"set\": ");
    put_bucket(&t, b);
    if (version) {
        snprintf(num, sizeof num, ", \"table_version\": %llu", (unsigned long long)version);
        tb_puts(&t, num);
    }
    tb_puts(&t, "}\n");
    if (t.oom) {
        free(t.p);
        return NULL;
    }
    return t.p;
}

char *bucketfile_journal_remove_line(const char *name, uint64_t version)
{
    json_t *o = json_pack("{s:s}", "remove", name);
    if (o && version)
        json_object_set_new(o, "table_version", json_integer((json_int_t)version));
    char *q = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(o);
    char *line = NULL;
    if (q && asprintf(&line, "%s\n", q) < 0)
        line = NULL;
    free(q);
    return line;
}

char *bucketfile_journal_base(int64_t size, uint64_t hash)
{
    char *line = NULL;
    if (asprintf(&line, "{\"base\": {\"size\": %lld, \"hash\": \"%016llx\"}}\n", (long long)size,
                 (unsigned long long)hash) < 0)
        return NULL;
    return line;
}

char *bucketfile_journal_marker(int64_t size, uint64_t hash, uint64_t upto)
{
    char *line = NULL;
    if (asprintf(&line, "{\"compacted\": {\"size\": %lld, \"hash\": \"%016llx\", \"upto\": %llu}}\n",
                 (long long)size, (unsigned long long)hash, (unsigned long long)upto) < 0)
        return NULL;
    return line;
}

/* Appends `line` to the file at fd and makes it durable.  Returns 0 or
 * -errno. */
int bucketfile_journal_write(int fd, const char *line, size_t len)
{
    size_t off = 0;
    while (off < len) {
        ssize_t w = write(fd, line + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -errno;
        off += (size_t)w;
    }
    return fdatasync(fd) < 0 ? -errno : 0;
}

/* bucketfile_save()'s hooks: with a journal beside the file that holds
 * lines, a marker naming the new file goes in before the rename (every
 * line so far is in it), and the journal is emptied after. */
static int journal_mark(void *arg, const char *path, int64_t size, uint64_t hash)
{
    (void)arg;
    char *jp = bucketfile_journal_path(path), *m = NULL;
    int rc = 0, fd = jp ? open(jp, O_WRONLY | O_APPEND | O_CLOEXEC) : -1;
    struct stat st;
    if (!jp)
        rc = -ENOMEM;
    else if (fd < 0)
        rc = errno == ENOENT ? 0 : -errno;
    else if (fstat(fd, &st) < 0)
        rc = -errno;
    else if (st.st_size > 0) {
        if (!(m = bucketfile_journal_marker(size, hash, (uint64_t)st.st_size)))
            rc = -ENOMEM;
        else
            rc = bucketfile_journal_write(fd, m, strlen(m));
    }
    if (fd >= 0)
        close(fd);
    free(m);
    free(jp);
    return rc;
}

static void journal_clear(void *arg, const char *path, const bucketfile_ident_t *id)
{
    (void)arg;
    (void)id;
    char *jp = bucketfile_journal_path(path);
    int fd = jp ? open(jp, O_WRONLY | O_CLOEXEC) : -1;
    if (fd >= 0) {
        if (ftruncate(fd, 0) == 0)
            fdatasync(fd);
        close(fd);
    }
    free(jp);
}

int bucketfile_save(bucketfile_t *bf, const char *path, char *msg, size_t size)
{
    bucketfile_save_opts_t o = {.before_rename = journal_mark, .after_rename = journal_clear};
    return bucketfile_save_ex(bf, path, &o, msg, size);
}

int bucketfile_save_ex(bucketfile_t *bf, const char *path, const bucketfile_save_opts_t *o,
                       char *msg, size_t size)
{
    int rc = 0, fd = -1, dfd = -1;
    char *text = NULL, *tmp = NULL, *dcopy = NULL;
    tbuf_t t = {0};
    int tmp_made = 0;
    char ignored[8];
    if (!msg)
        msg = ignored, size = sizeof ignored;
    snprintf(msg, size, "%s", "");
    if (unshare(bf) < 0) { /* what a save adopts must be bf's own */
        rc = -ENOMEM;
        goto out;
    }
    if (!o->no_check && (rc = bucketfile_check_unchanged(bf, path, msg, size)) < 0)
        goto out;
    if (render(bf, &t, 1) < 0 || !(text = t.p) || !(dcopy = strdup(path))) {
        rc = -ENOMEM;
        goto out;
    }
    const char *dir = dirname(dcopy);
    if (asprintf(&tmp, "%s.tmp.XXXXXX", path) < 0) {
        tmp = NULL;
        rc = -ENOMEM;
        goto out;
    }
    if ((fd = mkstemp(tmp)) < 0) {
        rc = -errno;
        goto out;
    }
    tmp_made = 1;
    struct stat st;
    mode_t mode = 0644;
    if (stat(path, &st) == 0)
        mode = st.st_mode & 07777;
    if (fchmod(fd, mode) < 0) {
        rc = -errno;
        goto out;
    }
    text = t.p;
    size_t len = t.n, off = 0;
    while (off < len) {
        ssize_t w = write(fd, text + off, len - off);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            rc = -errno;
            goto out;
        }
        off += (size_t)w;
    }
    if (fsync(fd) < 0) {
        rc = -errno;
        goto out;
    }
    if (close(fd) < 0) {
        fd = -1;
        rc = -errno;
        goto out;
    }
    fd = -1;
    if (o->before_rename &&
        (rc = o->before_rename(o->arg, path, (int64_t)len, hash_bytes(text, len))) < 0)
        goto out;
    if (rename(tmp, path) < 0) {
        rc = -errno;
        goto out;
    }
    tmp_made = 0;
    /* Make the rename itself durable. */
    if ((dfd = open(dir, O_RDONLY | O_DIRECTORY)) >= 0)
        fsync(dfd);
    /* What is on disk now is ours: the base of the next edit and save. */
    bucketfile_ident_t id = {.exists = 1, .size = (int64_t)len,
                             .hash = hash_bytes(text, len)};
    if (stat(path, &st) == 0 && st.st_size == (off_t)len) {
        id.mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
        id.dev = (uint64_t)st.st_dev;
        id.ino = (uint64_t)st.st_ino;
    }
    if (set_origin(bf, path, &id) < 0)
        bf->opath = NULL; /* no memory: it forgets the file rather than misjudge it */
    free(bf->text);
    bf->text = text;
    bf->tlen = len;
    text = t.p = NULL;
    free(bf->sp);
    bf->sp = t.sp;
    bf->nsp = t.nsp;
    bf->as = t.as;
    bf->ae = t.ae;
    bf->vs = t.vs;
    bf->ve = t.ve;
    bf->rules_changed = 0;
    t.sp = NULL;
    for (size_t w = 0; w < bf->n; w++) /* element w of the text written */
        bf->src[t.ord ? (size_t)t.ord[w] : w] = (bucketfile_src_t){(int32_t)w, 0};
    if (o->after_rename)
        o->after_rename(o->arg, path, &bf->origin);
out:
    if (rc < 0 && !msg[0])
        snprintf(msg, size, "cannot write %s: %s", path, strerror(-rc));
    if (fd >= 0)
        close(fd);
    if (dfd >= 0)
        close(dfd);
    if (tmp_made)
        unlink(tmp);
    free(tmp);
    free(dcopy);
    free(text);
    free(t.sp);
    free(t.ord);
    return rc;
}

const char *bucketfile_strerror(const jsonloc_err_t *err, char *buf, size_t size)
{
    size_t n = 0;
    buf[0] = '\0';
#define APPEND(...)                                                                    \
    do {                                                                               \
        if (n < size)                                                                  \
            n += (size_t)snprintf(buf + n, size - n, __VA_ARGS__);                     \
    } while (0)
    if (err->source[0])
        APPEND("%s:", err->source);
    if (err->line > 0)
        APPEND("%d:%d:", err->line, err->col);
    if (n)
        APPEND(" ");
    if (err->path[0])
        APPEND("%s: ", err->path);
    APPEND("%s", err->text);
#undef APPEND
    return buf;
}
