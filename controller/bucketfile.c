/* bucketfile.c - bucket reservation files: load and validate, edit in memory, save atomically. */
#include "controller/bucketfile.h"

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

static void set_err(bucketfile_error_t *err, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void set_err(bucketfile_error_t *err, const char *path, const char *fmt, ...)
{
    if (!err)
        return;
    snprintf(err->path, sizeof err->path, "%s", path ? path : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->text, sizeof err->text, fmt, ap);
    va_end(ap);
}

int bucketfile_check_name(const char *name, size_t len)
{
    if (!name || len < 1 || len > BUCKETFILE_NAME_MAX)
        return -EINVAL;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)name[i];
        if (c <= 0x20 || c == 0x7f || c == ':')
            return -EINVAL;
    }
    return 0;
}

int bucketfile_check_bucket(const bucketfile_bucket_t *b, bucketfile_error_t *err)
{
    size_t len = strnlen(b->name, sizeof b->name);
    if (len > BUCKETFILE_NAME_MAX || bucketfile_check_name(b->name, len) < 0) {
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

int bucketfile_set(bucketfile_t *bf, const bucketfile_bucket_t *b, bucketfile_error_t *err)
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

/* ---- value positions ------------------------------------------------------
 * jansson keeps no positions for values, so semantic errors re-scan the
 * (already syntax-checked) text to find where buckets[idx].member starts. */

typedef struct {
    const char *s;
    size_t n, i;
    int line, col;
} scan_t;

static void sc_adv(scan_t *sc)
{
    if (sc->i >= sc->n)
        return;
    if (sc->s[sc->i] == '\n') {
        sc->line++;
        sc->col = 1;
    } else {
        sc->col++;
    }
    sc->i++;
}

static int sc_peek(const scan_t *sc)
{
    return sc->i < sc->n ? (unsigned char)sc->s[sc->i] : -1;
}

static void sc_ws(scan_t *sc)
{
    int c;
    while ((c = sc_peek(sc)) == ' ' || c == '\t' || c == '\n' || c == '\r')
        sc_adv(sc);
}

/* At '"': skips the string; stores its raw content span. */
static void sc_string(scan_t *sc, size_t *start, size_t *len)
{
    sc_adv(sc);
    size_t b = sc->i;
    int c;
    while ((c = sc_peek(sc)) >= 0 && c != '"') {
        if (c == '\\')
            sc_adv(sc);
        sc_adv(sc);
    }
    if (start)
        *start = b;
    if (len)
        *len = sc->i - b;
    sc_adv(sc);
}

static void sc_value(scan_t *sc, int depth)
{
    sc_ws(sc);
    int c = sc_peek(sc);
    if (c == '"') {
        sc_string(sc, NULL, NULL);
    } else if ((c == '{' || c == '[') && depth < 4096) {
        int close = c == '{' ? '}' : ']';
        sc_adv(sc);
        for (;;) {
            sc_ws(sc);
            c = sc_peek(sc);
            if (c < 0)
                return;
            if (c == close) {
                sc_adv(sc);
                return;
            }
            if (c == ',' || c == ':') {
                sc_adv(sc);
                continue;
            }
            sc_value(sc, depth + 1);
        }
    } else {
        while ((c = sc_peek(sc)) >= 0 && c != ',' && c != '}' && c != ']' && c != ' ' &&
               c != '\t' && c != '\n' && c != '\r')
            sc_adv(sc);
    }
}

/* At '{': finds member `key` and leaves the scanner at its value.  Returns 1
 * if found, 0 if not (scanner at the object's end). */
static int sc_member(scan_t *sc, const char *key)
{
    sc_adv(sc);
    for (;;) {
        sc_ws(sc);
        int c = sc_peek(sc);
        if (c == ',') {
            sc_adv(sc);
            continue;
        }
        if (c != '"')
            return 0;
        size_t ks, kl;
        sc_string(sc, &ks, &kl);
        sc_ws(sc);
        if (sc_peek(sc) == ':')
            sc_adv(sc);
        sc_ws(sc);
        if (kl == strlen(key) && memcmp(sc->s + ks, key, kl) == 0)
            return 1;
        sc_value(sc, 0);
    }
}

/* Locates the top-level member `top`, then (idx >= 0) its idx-th element,
 * then (member != NULL) that element's member.  Stops at the deepest part
 * found, so a missing member points at its object.  Best effort. */
static void locate(const char *text, size_t len, const char *top, long idx, const char *member,
                   int *line, int *col)
{
    scan_t sc = {text, len, 0, 1, 1};
    sc_ws(&sc);
    *line = sc.line;
    *col = sc.col;
    if (!top || sc_peek(&sc) != '{')
        return;
    scan_t obj = sc;
    if (!sc_member(&sc, top)) {
        *line = obj.line;
        *col = obj.col;
        return;
    }
    *line = sc.line;
    *col = sc.col;
    if (idx < 0 || sc_peek(&sc) != '[')
        return;
    sc_adv(&sc);
    for (long k = 0;; k++) {
        sc_ws(&sc);
        if (sc_peek(&sc) == ',') {
            sc_adv(&sc);
            sc_ws(&sc);
        }
        if (sc_peek(&sc) < 0 || sc_peek(&sc) == ']')
            return;
        if (k == idx)
            break;
        sc_value(&sc, 0);
    }
    *line = sc.line;
    *col = sc.col;
    if (!member || sc_peek(&sc) != '{')
        return;
    if (sc_member(&sc, member)) {
        *line = sc.line;
        *col = sc.col;
    }
}

/* ---- parsing ------------------------------------------------------------- */

typedef struct {
    const char *text;
    size_t len;
    bucketfile_error_t *err;
} pctx_t;

static int fail_at(pctx_t *p, const char *top, long idx, const char *member, const char *fmt,
                   ...) __attribute__((format(printf, 5, 6)));

static int fail_at(pctx_t *p, const char *top, long idx, const char *member, const char *fmt,
                   ...)
{
    bucketfile_error_t *err = p->err;
    if (!err)
        return -EINVAL;
    if (!top)
        err->path[0] = '\0';
    else if (idx < 0)
        snprintf(err->path, sizeof err->path, "%s", top);
    else if (!member)
        snprintf(err->path, sizeof err->path, "%s[%ld]", top, idx);
    else
        snprintf(err->path, sizeof err->path, "%s[%ld].%.30s", top, idx, member);
    locate(p->text, p->len, top, idx, member, &err->line, &err->column);
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
    if (bucketfile_check_name(json_string_value(v), nl) < 0)
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
                     bucketfile_error_t *err)
{
    if (err) {
        memset(err, 0, sizeof *err);
        snprintf(err->source, sizeof err->source, "%s", source ? source : "<string>");
    }
    pctx_t p = {text, len, err};
    json_error_t jerr;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        if (err) {
            err->line = jerr.line > 0 ? jerr.line : 0;
            err->column = jerr.column > 0 ? jerr.column : 0;
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

int bucketfile_load(const char *path, bucketfile_t **out, bucketfile_error_t *err)
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
        memset(err, 0, sizeof *err);
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

const char *bucketfile_strerror(const bucketfile_error_t *err, char *buf, size_t size)
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
        APPEND("%d:%d:", err->line, err->column);
    if (n)
        APPEND(" ");
    if (err->path[0])
        APPEND("%s: ", err->path);
    APPEND("%s", err->text);
#undef APPEND
    return buf;
}
