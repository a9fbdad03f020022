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
#include <unistd.h>

#include "common/jsonloc.h"
#include "common/names.h"

struct bucketfile {
    bucketfile_bucket_t *v; /* file order */
    size_t n, cap;
    int *slot;   /* open-addressing hash of names: index into v, -1 empty */
    size_t nslot;
};

/* ---- hash index ---------------------------------------------------------- */

static uint64_t hash_name(const char *s)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ULL;
    }
    return h;
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
    return c;
}

/* ---- parsing ------------------------------------------------------------- */

typedef struct {
    const char *text;
    size_t len;
    jsonloc_err_t *err;
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
    if (!v)
        return 0;
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
            strcmp(key, "weight"))
            return fail_at(p, "buckets", idx, key,
                           "unknown member \"%.40s\" (expected name, reservation, limit, weight)",
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
    return append(bf, &b);
}

int bucketfile_parse(const char *text, size_t len, const char *source, bucketfile_t **out,
                     jsonloc_err_t *err)
{
    if (err) {
        jsonloc_err_clear(err);
        snprintf(err->source, sizeof err->source, "%s", source ? source : "<string>");
    }
    pctx_t p = {text, len, err};
    json_error_t jerr;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        if (err) {
            err->line = jerr.line > 0 ? jerr.line : 0;
            err->col = jerr.column > 0 ? jerr.column : 0;
            snprintf(err->text, sizeof err->text, "%s", jerr.text);
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
        rc = fail_at(&p, NULL, -1, NULL, "top level must be an object {\"buckets\": [...]}");
        goto out;
    }
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v)
    {
        if (strcmp(key, "buckets")) {
            rc = fail_at(&p, key, -1, NULL, "unknown member \"%.40s\" (expected \"buckets\")",
                         key);
            goto out;
        }
    }
    json_t *arr = json_object_get(root, "buckets");
    if (!arr) {
        rc = fail_at(&p, NULL, -1, NULL, "no \"buckets\" array");
        goto out;
    }
    if (!json_is_array(arr)) {
        rc = fail_at(&p, "buckets", -1, NULL, "\"buckets\" must be an array");
        goto out;
    }
    for (size_t i = 0; i < json_array_size(arr); i++) {
        if ((rc = parse_bucket(&p, json_array_get(arr, i), (long)i, bf)) < 0)
            goto out;
    }
    *out = bf;
    bf = NULL;
out:
    if (rc == -ENOMEM && err)
        snprintf(err->text, sizeof err->text, "out of memory");
    bucketfile_destroy(&bf);
    json_decref(root);
    return rc;
}

int bucketfile_load(const char *path, bucketfile_t **out, jsonloc_err_t *err)
{
    int rc = 0;
    char *buf = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) {
        rc = -errno;
        goto io_err;
    }
    size_t cap = 65536, n = 0;
    buf = malloc(cap);
    if (!buf) {
        rc = -ENOMEM;
        goto io_err;
    }
    for (;;) {
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (n < cap) {
            if (ferror(f)) {
                rc = -EIO;
                goto io_err;
            }
            break;
        }
        char *nb = realloc(buf, cap * 2);
        if (!nb) {
            rc = -ENOMEM;
            goto io_err;
        }
        buf = nb;
        cap *= 2;
    }
    fclose(f);
    f = NULL;
    rc = bucketfile_parse(buf, n, path, out, err);
    free(buf);
    return rc;
io_err:
    if (err) {
        jsonloc_err_clear(err);
        snprintf(err->source, sizeof err->source, "%s", path);
        snprintf(err->text, sizeof err->text, "cannot read: %s", strerror(-rc));
    }
    if (f)
        fclose(f);
    free(buf);
    return rc;
}

/* ---- output -------------------------------------------------------------- */

char *bucketfile_dumps(const bucketfile_t *bf)
{
    size_t cap = 64 + bf->n * 128, n = 0;
    char *out = malloc(cap);
    if (!out)
        return NULL;
    n += (size_t)snprintf(out, cap, "{\"buckets\": [\n");
    for (size_t i = 0; i < bf->n; i++) {
        const bucketfile_bucket_t *b = &bf->v[i];
        json_t *s = json_string(b->name);
        char *qname = s ? json_dumps(s, JSON_ENCODE_ANY) : NULL;
        json_decref(s);
        if (!qname) {
            free(out);
            return NULL;
        }
        char lim[48] = "";
        if (b->limit != BUCKETFILE_NO_LIMIT)
            snprintf(lim, sizeof lim, ", \"limit\": %lld", (long long)b->limit);
        size_t need = strlen(qname) + 160;
        if (n + need > cap) {
            size_t nc = (n + need) * 2;
            char *no = realloc(out, nc);
            if (!no) {
                free(qname);
                free(out);
                return NULL;
            }
            out = no;
            cap = nc;
        }
        n += (size_t)snprintf(out + n, cap - n,
                              "  {\"name\": %s, \"reservation\": %lld%s, \"weight\": %u}%s\n",
                              qname, (long long)b->reservation, lim, b->weight,
                              i + 1 < bf->n ? "," : "");
        free(qname);
    }
    if (n + 8 > cap) {
        char *no = realloc(out, n + 8);
        if (!no) {
            free(out);
            return NULL;
        }
        out = no;
    }
    memcpy(out + n, "]}\n", 4);
    return out;
}

int bucketfile_save(const bucketfile_t *bf, const char *path)
{
    int rc = 0, fd = -1, dfd = -1;
    char *text = NULL, *tmp = NULL, *dcopy = NULL;
    int tmp_made = 0;
    if (!(text = bucketfile_dumps(bf)) || !(dcopy = strdup(path))) {
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
out:
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
