/* bucketfile.c - bucket reservation files: load and validate, edit in memory, save atomically. */
#include "common/bucketfile.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/jsonloc.h"
#include "common/names.h"

/* What a file held when it was read or written. */
typedef struct {
    int exists;       /* 0: the file did not exist */
    int64_t mtime_ns; /* modification time, ns since the epoch (shown, not compared) */
    int64_t size;     /* bytes */
    uint64_t hash;    /* FNV-1a 64 of the content */
} bucketfile_ident_t;

struct bucketfile {
    bucketfile_bucket_t *v; /* file order */
    size_t n, cap;
    int *slot;   /* open-addressing hash of names: index into v, -1 empty */
    size_t nslot;
    char *text;  /* the text it was parsed from or last saved as (NUL-terminated),
                    the base bucketfile_render() edits; NULL: none */
    size_t tlen;
    char *opath; /* the file it was loaded from or last saved to; NULL: none */
    bucketfile_ident_t origin; /* what that file held then */
    uint64_t version; /* the top-level "table_version"; 0: none */
};

/* ---- hash index ---------------------------------------------------------- */

static uint64_t hash_bytes(const char *t, size_t n)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (size_t i = 0; i < n; i++) {
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
    if (reindex(bf, 0) < 0) {
        free(bf);
        return NULL;
    }
    return bf;
}

void bucketfile_destroy(bucketfile_t **bp)
{
    if (!bp || !*bp)
        return;
    free((*bp)->v);
    free((*bp)->slot);
    free((*bp)->text);
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

int bucketfile_find(const bucketfile_t *bf, const char *name)
{
    if (!bf || !name)
        return -ENOENT;
    size_t h = hash_name(name) & (bf->nslot - 1);
    while (bf->slot[h] >= 0) {
        if (strcmp(bf->v[bf->slot[h]].name, name) == 0)
            return bf->slot[h];
        h = (h + 1) & (bf->nslot - 1);
    }
    return -ENOENT;
}

/* Replaces bf's base text by a copy of len bytes at t.  Returns 0 or -ENOMEM. */
static int set_text(bucketfile_t *bf, const char *t, size_t len)
{
    char *c = malloc(len + 1);
    if (!c)
        return -ENOMEM;
    memcpy(c, t, len);
    c[len] = '\0';
    free(bf->text);
    bf->text = c;
    bf->tlen = len;
    return 0;
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
        bf->cap = cap;
    }
    if (2 * (bf->n + 1) + 2 > bf->nslot) {
        int rc = reindex(bf, bf->n + 1);
        if (rc < 0)
            return rc;
    }
    bf->v[bf->n] = *b;
    size_t h = hash_name(b->name) & (bf->nslot - 1);
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
    size_t len = strnlen(b->name, sizeof b->name);
    if (len > BUCKETFILE_NAME_MAX || names_check_bucket(b->name, len) < 0) {
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
    return 0;
}

int bucketfile_set(bucketfile_t *bf, const bucketfile_bucket_t *b, jsonloc_err_t *err)
{
    if (bucketfile_check_bucket(b, err) < 0)
        return -EINVAL;
    int i = bucketfile_find(bf, b->name);
    if (i >= 0) {
        bf->v[i] = *b;
        return 0;
    }
    return append(bf, b);
}

int bucketfile_remove(bucketfile_t *bf, const char *name)
{
    int i = bucketfile_find(bf, name);
    if (i < 0)
        return -ENOENT;
    memmove(&bf->v[i], &bf->v[i + 1], (bf->n - (size_t)i - 1) * sizeof bf->v[0]);
    bf->n--;
    /* Indexes moved: rebuild.  Removal is an admin action, not a hot path. */
    int rc = reindex(bf, bf->n);
    if (rc < 0) {
        /* Keep a consistent index even without memory: fall back to a scan
         * of the old table would be wrong, so rebuild in place. */
        for (size_t k = 0; k < bf->nslot; k++)
            bf->slot[k] = -1;
        for (size_t k = 0; k < bf->n; k++) {
            size_t h = hash_name(bf->v[k].name) & (bf->nslot - 1);
            while (bf->slot[h] >= 0)
                h = (h + 1) & (bf->nslot - 1);
            bf->slot[h] = (int)k;
        }
    }
    return 0;
}

bucketfile_t *bucketfile_dup(const bucketfile_t *bf)
{
    bucketfile_t *c = bucketfile_new();
    if (!c)
        return NULL;
    for (size_t i = 0; i < bf->n; i++) {
        if (append(c, &bf->v[i]) < 0) {
            bucketfile_destroy(&c);
            return NULL;
        }
    }
    if (bf->text && set_text(c, bf->text, bf->tlen) < 0) {
        bucketfile_destroy(&c);
        return NULL;
    }
    c->version = bf->version;
    if (bucketfile_copy_origin(c, bf) < 0)
        bucketfile_destroy(&c);
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

static int parse_bucket(pctx_t *p, json_t *o, long idx, bucketfile_t *bf)
{
    if (!json_is_object(o))
        return fail_at(p, "buckets", idx, NULL, "bucket must be an object");
    const char *key;
    json_t *v;
    json_object_foreach(o, key, v)
    {
        if (strcmp(key, "name") && strcmp(key, "reservation") && strcmp(key, "limit") &&
            strcmp(key, "weight") && strcmp(key, "reservation_bytes") &&
            strcmp(key, "limit_bytes") && strcmp(key, "shadow"))
            return fail_at(p, "buckets", idx, key,
                           "unknown member \"%.40s\" (expected name, reservation, limit, weight, "
                           "reservation_bytes, limit_bytes, shadow)",
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
    memcpy(b.name, json_string_value(v), nl);
    b.name[nl] = '\0';
    if (bucketfile_find(bf, b.name) >= 0)
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
    return append(bf, &b);
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
        } else if (strcmp(key, "buckets")) {
            rc = fail_at(p, key, -1, NULL,
                         "unknown member \"%.40s\" (expected \"buckets\", \"table_version\")",
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
    if (p->problems) {
        rc = -EINVAL;
        goto out;
    }
    if ((rc = set_text(bf, text, len)) < 0)
        goto out;
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
    return rc;
}

int bucketfile_parse(const char *text, size_t len, const char *source, bucketfile_t **out,
                     jsonloc_err_t *err)
{
    pctx_t p = {.text = text, .len = len, .err = err};
    return parse_text(&p, source, out);
}

/* ---- files -------------------------------------------------------------- */

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
                               .hash = hash_bytes(b, n)};
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
    const bucketfile_ident_t *o = &bf->origin;
    bucketfile_ident_t now;
    if (!bf->opath || strcmp(bf->opath, path) != 0)
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

/* Writes bucket b as one object, {"name": ..., "reservation": R[, "limit": L], "weight": W
 * [, "reservation_bytes": RB][, "limit_bytes": LB][, "shadow": true]}.
 * Returns 0 or -ENOMEM. */
static int put_bucket(FILE *f, const bucketfile_bucket_t *b)
{
    json_t *s = json_string(b->name);
    char *qname = s ? json_dumps(s, JSON_ENCODE_ANY) : NULL;
    json_decref(s);
    if (!qname)
        return -ENOMEM;
    fprintf(f, "{\"name\": %s, \"reservation\": %lld", qname, (long long)b->reservation);
    if (b->limit != BUCKETFILE_NO_LIMIT)
        fprintf(f, ", \"limit\": %lld", (long long)b->limit);
    fprintf(f, ", \"weight\": %u", b->weight);
    if (b->reservation_bytes > 0)
        fprintf(f, ", \"reservation_bytes\": %lld", (long long)b->reservation_bytes);
    if (b->limit_bytes > 0)
        fprintf(f, ", \"limit_bytes\": %lld", (long long)b->limit_bytes);
    if (b->shadow)
        fputs(", \"shadow\": true", f);
    fputs("}", f);
    free(qname);
    return 0;
}

/* Closes the memstream f over *out; returns *out, or NULL (freed) on error. */
static char *close_text(FILE *f, char **out, int rc)
{
    if (fclose(f) != 0 || rc < 0) {
        free(*out);
        *out = NULL;
    }
    return *out;
}

char *bucketfile_dumps(const bucketfile_t *bf)
{
    char *out = NULL;
    size_t n;
    FILE *f = open_memstream(&out, &n);
    if (!f)
        return NULL;
    int rc = 0;
    if (bf->version)
        fprintf(f, "{\"table_version\": %llu, \"buckets\": [\n", (unsigned long long)bf->version);
    else
        fputs("{\"buckets\": [\n", f);
    for (size_t i = 0; rc == 0 && i < bf->n; i++) {
        fputs("  ", f);
        rc = put_bucket(f, &bf->v[i]);
        fputs(i + 1 < bf->n ? ",\n" : "\n", f);
    }
    fputs("]}\n", f);
    return close_text(f, &out, rc);
}

static int same_bucket(const bucketfile_bucket_t *a, const bucketfile_bucket_t *b)
{
    return strcmp(a->name, b->name) == 0 && a->reservation == b->reservation &&
           a->limit == b->limit && a->weight == b->weight &&
           a->reservation_bytes == b->reservation_bytes && a->limit_bytes == b->limit_bytes &&
           a->shadow == b->shadow;
}

static int same_set(const bucketfile_t *a, const bucketfile_t *b)
{
    if (a->n != b->n)
        return 0;
    for (size_t i = 0; i < a->n; i++)
        if (!same_bucket(&a->v[i], &b->v[i]))
            return 0;
    return 1;
}

/* The base text edited to hold bf: what lies around the buckets array and
 * between its elements is copied; an unchanged bucket keeps its object's
 * text, a changed one is written anew in its place, a removed one goes
 * with its separator, a new one is appended with the separator the last
 * elements use.  NULL if the base cannot be edited so (or no memory). */
static char *edit_text(const bucketfile_t *bf)
{
    const char *t = bf->text;
    bucketfile_t *old = NULL;
    size_t *st = NULL, *en = NULL, as, ae;
    char *out = NULL;
    FILE *f = NULL;
    int rc = -EINVAL;
    if (bucketfile_parse(t, bf->tlen, NULL, &old, NULL) < 0)
        goto out;
    jsonloc_step_t path[2] = {{"buckets", 0}, {NULL, 0}};
    if (jsonloc_span(t, bf->tlen, path, 1, &as, &ae) != 1 || t[as] != '[' || t[ae - 1] != ']')
        goto out;
    size_t no = old->n;
    st = calloc(no + 1, sizeof *st);
    en = calloc(no + 1, sizeof *en);
    if (!st || !en)
        goto out;
    for (size_t k = 0; k < no; k++) {
        path[1].index = k;
        if (jsonloc_span(t, bf->tlen, path, 2, &st[k], &en[k]) != 2)
            goto out;
    }
    /* The whitespace a new element follows: the last separator's (after
     * its comma), else the one before the first element. */
    const char *ws = "\n  ";
    size_t wsn = 3;
    if (no >= 2) {
        ws = memchr(t + en[no - 2], ',', st[no - 1] - en[no - 2]);
        ws = ws ? ws + 1 : t + st[no - 1];
        wsn = (size_t)(t + st[no - 1] - ws);
    } else if (no == 1) {
        ws = t + as + 1;
        wsn = st[0] - as - 1;
    }
    size_t n;
    if (!(f = open_memstream(&out, &n)))
        goto out;
    rc = 0;
    fwrite(t, 1, as + 1, f);
    size_t p = 0; /* elements written */
    for (size_t i = 0; rc == 0 && i < bf->n; i++) {
        const bucketfile_bucket_t *b = &bf->v[i];
        int k = bucketfile_find(old, b->name);
        if (p == 0)
            fwrite(t + as + 1, 1, (no ? st[0] : ae - 1) - as - 1, f);
        else if (k > 0)
            fwrite(t + en[k - 1], 1, st[k] - en[k - 1], f); /* its own separator */
        else {
            fputc(',', f);
            fwrite(ws, 1, wsn, f);
        }
        if (k >= 0 && same_bucket(b, &old->v[k]))
            fwrite(t + st[k], 1, en[k] - st[k], f);
        else
            rc = put_bucket(f, b);
        p++;
    }
    if (p > 0 && no > 0)
        fwrite(t + en[no - 1], 1, ae - 1 - en[no - 1], f); /* before the ']' */
    fwrite(t + ae - 1, 1, bf->tlen - (ae - 1), f);
out:
    if (f)
        close_text(f, &out, rc);
    free(st);
    free(en);
    bucketfile_destroy(&old);
    return rc < 0 ? NULL : out;
}

/* Text `in` (consumed) with its top-level "table_version" set to bf's:
 * the value replaced in place, or the member put first (a version of 0
 * leaves a text without one as it is).  NULL if out of memory, or if the
 * text has no top-level object to hold it (no edit: the caller's check
 * falls back to bucketfile_dumps()). */
static char *stamp_version(const bucketfile_t *bf, char *in)
{
    if (!in)
        return NULL;
    size_t len = strlen(in), vs, ve, os, oe;
    jsonloc_step_t path[1] = {{"table_version", 0}};
    char num[32], *out = NULL;
    snprintf(num, sizeof num, "%llu", (unsigned long long)bf->version);
    size_t got = jsonloc_span(in, len, path, 1, &vs, &ve);
    if (got == 1) { /* replace the value */
        if (asprintf(&out, "%.*s%s%s", (int)vs, in, num, in + ve) < 0)
            out = NULL;
    } else if (!bf->version) {
        return in;
    } else if (jsonloc_span(in, len, path, 0, &os, &oe) == 0 && os < len && in[os] == '{') {
        if (asprintf(&out, "%.*s\"table_version\": %s, %s", (int)os + 1, in, num,
                     in + os + 1) < 0)
            out = NULL;
    }
    free(in);
    return out;
}

char *bucketfile_render(const bucketfile_t *bf)
{
    if (!bf->text)
        return bucketfile_dumps(bf);
    char *out = stamp_version(bf, edit_text(bf));
    bucketfile_t *back = NULL;
    /* Whatever the edit made must read back as bf, or the canonical form
     * is written instead. */
    if (out && (bucketfile_parse(out, strlen(out), NULL, &back, NULL) < 0 || !same_set(back, bf) ||
                back->version != bf->version)) {
        free(out);
        out = NULL;
    }
    bucketfile_destroy(&back);
    return out ? out : bucketfile_dumps(bf);
}

int bucketfile_save(bucketfile_t *bf, const char *path, char *msg, size_t size)
{
    int rc = 0, fd = -1, dfd = -1;
    char *text = NULL, *tmp = NULL, *dcopy = NULL;
    int tmp_made = 0;
    char ignored[8];
    if (!msg)
        msg = ignored, size = sizeof ignored;
    snprintf(msg, size, "%s", "");
    if ((rc = bucketfile_check_unchanged(bf, path, msg, size)) < 0)
        goto out;
    if (!(text = bucketfile_render(bf)) || !(dcopy = strdup(path))) {
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
    size_t len = strlen(text), off = 0;
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
    if (stat(path, &st) == 0)
        id.mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
    if (set_origin(bf, path, &id) < 0)
        bf->opath = NULL; /* no memory: it forgets the file rather than misjudge it */
    free(bf->text);
    bf->text = text;
    bf->tlen = len;
    text = NULL;
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
