/* pjson.c - read pShift problems from JSON and write problems and solutions as JSON (jansson). */
#include "pshift/tools/pjson.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "common/jsonloc.h"

#define MAX_DEPTH 4

/* Parser state: the raw text (to find positions, which jansson does not keep
 * for values) and the path to the value being checked. */
typedef struct {
    const char *text;
    size_t len;
    jsonloc_err_t *err;
    jsonloc_step_t path[MAX_DEPTH];
    int depth;
} ctx_t;

/* ---- errors ------------------------------------------------------------ */

/* Records an error about the value at the current path (`depth` steps of
 * it) and returns -EINVAL. */
__attribute__((format(printf, 3, 4)))
static int fail_at(ctx_t *c, int depth, const char *fmt, ...)
{
    jsonloc_err_t *e = c->err;
    if (!e) return -EINVAL;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->text, sizeof e->text, fmt, ap);
    va_end(ap);
    /* A value that is not (all) there has no position. */
    if (jsonloc_err_at(e, c->text, c->len, c->path, (size_t)depth) < (size_t)depth) {
        e->line = 0;
        e->col = 0;
    }
    return -EINVAL;
}

#define fail(c, ...) fail_at((c), (c)->depth, __VA_ARGS__)

static void push_key(ctx_t *c, const char *key)
{
    c->path[c->depth].key = key;
    c->path[c->depth].index = 0;
    c->depth++;
}

static void push_index(ctx_t *c, size_t index)
{
    c->path[c->depth].key = NULL;
    c->path[c->depth].index = index;
    c->depth++;
}

static void pop(ctx_t *c)
{
    c->depth--;
}

/* ---- parsing ----------------------------------------------------------- */

static const char *type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a non-integer number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "a value";
}

/* Reads the non-negative integer at the current path into *out. */
static int get_count(ctx_t *c, const json_t *v, const char *what, int64_t *out)
{
    if (!json_is_integer(v))
        return fail(c, "%s must be a non-negative integer, not %s", what, type_name(v));
    json_int_t n = json_integer_value(v);
    if (n < 0)
        return fail(c, "%s must be a non-negative integer, not %lld", what, (long long)n);
    *out = (int64_t)n;
    return 0;
}

/* Adds n to *sum unless that overflows int64_t. */
static int add_checked(int64_t *sum, int64_t n)
{
    if (*sum > INT64_MAX - n) return -1;
    *sum += n;
    return 0;
}

/* Reads the "name" member of the object at the current path. */
static int get_name(ctx_t *c, const json_t *obj, const char *kind, const char **out)
{
    const json_t *v = json_object_get(obj, "name");
    if (!v) return fail(c, "%s has no \"name\"", kind);
    push_key(c, "name");
    int rc = 0;
    if (!json_is_string(v))
        rc = fail(c, "%s name must be a string, not %s", kind, type_name(v));
    else if (json_string_length(v) == 0)
        rc = fail(c, "%s name is empty", kind);
    else if (strlen(json_string_value(v)) != json_string_length(v))
        rc = fail(c, "%s name contains a NUL character", kind);
    else
        *out = json_string_value(v);
    pop(c);
    return rc;
}

/* Rejects keys of the object at the current path that are not in `allowed`
 * (a NULL-terminated list). */
static int check_keys(ctx_t *c, json_t *obj, const char *const *allowed, const char *kind)
{
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        int ok = 0;
        for (const char *const *a = allowed; *a; a++)
            if (strcmp(key, *a) == 0) ok = 1;
        if (!ok) {
            push_key(c, key);
            int rc = fail(c, "unknown key \"%s\" in %s", key, kind);
            pop(c);
            return rc;
        }
    }
    return 0;
}

static int parse_servers(ctx_t *c, json_t *arr, pshift_problem_t *p, json_t *index)
{
    static const char *const keys[] = {"name", "capacity", NULL};
    if (!json_is_array(arr))
        return fail(c, "\"servers\" must be an array, not %s", type_name(arr));
    if (json_array_size(arr) == 0) return fail(c, "server list is empty");
    if (json_array_size(arr) > (size_t)INT32_MAX) return fail(c, "too many servers");
    int64_t total = 0;
    size_t i;
    json_t *s;
    json_array_foreach(arr, i, s) {
        push_index(c, i);
        int rc = 0;
        const char *name = NULL;
        int64_t cap = 0;
        if (!json_is_object(s)) {
            rc = fail(c, "a server must be an object, not %s", type_name(s));
            goto next;
        }
        if ((rc = check_keys(c, s, keys, "a server")) < 0) goto next;
        if ((rc = get_name(c, s, "server", &name)) < 0) goto next;
        json_t *v = json_object_get(s, "capacity");
        if (!v) {
            rc = fail(c, "server \"%s\" has no \"capacity\"", name);
            goto next;
        }
        push_key(c, "capacity");
        rc = get_count(c, v, "capacity", &cap);
        if (rc == 0 && add_checked(&total, cap) < 0)
            rc = fail(c, "sum of server capacities overflows 64 bits");
        pop(c);
        if (rc < 0) goto next;
        if (json_object_get(index, name)) {
            push_key(c, "name");
            rc = fail(c, "duplicate server name \"%s\"", name);
            pop(c);
            goto next;
        }
        int idx = pshift_add_server(p, name, cap);
        if (idx < 0) { rc = idx; goto next; }
        json_t *iv = json_integer(idx);
        if (!iv || json_object_set_new(index, name, iv) < 0) rc = -ENOMEM;
    next:
        pop(c);
        if (rc < 0) return rc;
    }
    return 0;
}

/* Sums the parser keeps to reject input whose sums overflow int64_t. */
typedef struct {
    int64_t reservations, limits, demands;
} sums_t;

static int parse_demand(ctx_t *c, json_t *obj, pshift_problem_t *p, int b,
                        const char *bname, json_t *index, sums_t *sums)
{
    if (!json_is_object(obj))
        return fail(c, "demand of bucket \"%s\" must be an object, not %s", bname,
                    type_name(obj));
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        push_key(c, key);
        int rc = 0;
        int64_t d = 0;
        json_t *iv = json_object_get(index, key);
        if (!iv) {
            rc = fail(c, "demand of bucket \"%s\" on unknown server \"%s\"", bname, key);
        } else if ((rc = get_count(c, v, "demand", &d)) == 0) {
            if (add_checked(&sums->demands, d) < 0)
                rc = fail(c, "sum of demands overflows 64 bits");
            else
                rc = pshift_set_demand(p, b, (int)json_integer_value(iv), d);
        }
        pop(c);
        if (rc < 0) return rc;
    }
    return 0;
}

static int parse_bucket(ctx_t *c, json_t *bk, pshift_problem_t *p, json_t *servers,
                        json_t *names, int64_t *limit, sums_t *sums)
{
    static const char *const keys[] = {"name", "reservation", "limit", "demand", NULL};
    const char *name = NULL;
    int64_t res = 0;
    int rc;
    if (!json_is_object(bk))
        return fail(c, "a bucket must be an object, not %s", type_name(bk));
    if ((rc = check_keys(c, bk, keys, "a bucket")) < 0) return rc;
    if ((rc = get_name(c, bk, "bucket", &name)) < 0) return rc;
    if (json_object_get(names, name)) {
        push_key(c, "name");
        rc = fail(c, "duplicate bucket name \"%s\"", name);
        pop(c);
        return rc;
    }
    if (json_object_set_new(names, name, json_null()) < 0) return -ENOMEM;

    json_t *v = json_object_get(bk, "reservation");
    if (!v) return fail(c, "bucket \"%s\" has no \"reservation\"", name);
    push_key(c, "reservation");
    rc = get_count(c, v, "reservation", &res);
    if (rc == 0 && add_checked(&sums->reservations, res) < 0)
        rc = fail(c, "sum of reservations overflows 64 bits");
    pop(c);
    if (rc < 0) return rc;

    *limit = PJSON_NO_LIMIT;
    v = json_object_get(bk, "limit");
    if (v) {
        int64_t l = 0;
        push_key(c, "limit");
        rc = get_count(c, v, "limit", &l);
        if (rc == 0 && l < res)
            rc = fail(c, "limit %lld of bucket \"%s\" is below its reservation %lld",
                      (long long)l, name, (long long)res);
        if (rc == 0 && add_checked(&sums->limits, l) < 0)
            rc = fail(c, "sum of limits overflows 64 bits");
        pop(c);
        if (rc < 0) return rc;
        *limit = l;
    }

    v = json_object_get(bk, "demand");
    if (!v) return fail(c, "bucket \"%s\" has no \"demand\"", name);
    int b = pshift_add_bucket(p, name, res);
    if (b < 0) return b;
    push_key(c, "demand");
    rc = parse_demand(c, v, p, b, name, servers, sums);
    pop(c);
    return rc;
}

static int parse_buckets(ctx_t *c, json_t *arr, pshift_problem_t *p, json_t *servers,
                         pjson_input_t *out)
{
    if (!json_is_array(arr))
        return fail(c, "\"buckets\" must be an array, not %s", type_name(arr));
    size_t n = json_array_size(arr);
    if (n > (size_t)INT32_MAX) return fail(c, "too many buckets");
    out->limits = malloc((n ? n : 1) * sizeof *out->limits);
    json_t *names = json_object();
    int rc = 0;
    if (!out->limits || !names) { rc = -ENOMEM; goto out; }
    sums_t sums = {0, 0, 0};
    size_t i;
    json_t *bk;
    json_array_foreach(arr, i, bk) {
        push_index(c, i);
        rc = parse_bucket(c, bk, p, servers, names, &out->limits[i], &sums);
        pop(c);
        if (rc < 0) goto out;
        if (out->limits[i] != PJSON_NO_LIMIT) out->has_limits = 1;
    }
out:
    json_decref(names);
    return rc;
}

int pjson_parse(const char *text, size_t len, pjson_input_t *out, jsonloc_err_t *err)
{
    static const char *const keys[] = {"servers", "buckets", "meta", NULL};
    ctx_t c = {.text = text, .len = len, .err = err, .depth = 0};
    json_error_t je;
    json_t *root = NULL, *index = NULL;
    int rc = 0;

    memset(out, 0, sizeof *out);
    jsonloc_err_clear(err);
    memset(&je, 0, sizeof je); /* json_loadb() may fail before touching it */
    root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        /* jansson names every input error; a failed allocation early in
         * json_loadb() leaves the text empty. */
        if (json_error_code(&je) == json_error_out_of_memory || je.text[0] == '\0')
            return -ENOMEM;
        if (err) {
            err->line = je.line > 0 ? je.line : 0;
            err->col = je.column > 0 ? je.column : 0;
            snprintf(err->text, sizeof err->text, "%s", je.text);
        }
        return -EINVAL;
    }
    if (!json_is_object(root)) {
        rc = fail(&c, "the document must be an object, not %s", type_name(root));
        goto out;
    }
    if ((rc = check_keys(&c, root, keys, "the document")) < 0) goto out;
    json_t *servers = json_object_get(root, "servers");
    json_t *buckets = json_object_get(root, "buckets");
    if (!servers) { rc = fail(&c, "no \"servers\" list"); goto out; }
    if (!buckets) { rc = fail(&c, "no \"buckets\" list"); goto out; }
    out->problem = pshift_problem_new();
    index = json_object();
    if (!out->problem || !index) { rc = -ENOMEM; goto out; }
    push_key(&c, "servers");
    rc = parse_servers(&c, servers, out->problem, index);
    pop(&c);
    if (rc < 0) goto out;
    push_key(&c, "buckets");
    rc = parse_buckets(&c, buckets, out->problem, index, out);
    pop(&c);
out:
    json_decref(index);
    json_decref(root);
    if (rc < 0) pjson_input_clear(out);
    return rc;
}

int pjson_read_file(const char *path, pjson_input_t *out, jsonloc_err_t *err)
{
    FILE *f = NULL;
    char *buf = NULL;
    size_t len = 0, cap = 0;
    int rc = 0;

    memset(out, 0, sizeof *out);
    jsonloc_err_clear(err);
    if (strcmp(path, "-") == 0) {
        f = stdin;
    } else if (!(f = fopen(path, "rb"))) {
        rc = -errno;
        if (err) snprintf(err->text, sizeof err->text, "cannot open: %s", strerror(-rc));
        return rc;
    }
    for (;;) {
        if (len == cap) {
            size_t ncap = cap ? cap * 2 : 65536;
            char *nb = realloc(buf, ncap);
            if (!nb) { rc = -ENOMEM; goto out; }
            buf = nb;
            cap = ncap;
        }
        size_t n = fread(buf + len, 1, cap - len, f);
        len += n;
        if (n == 0) {
            if (ferror(f)) {
                rc = -EIO;
                if (err) snprintf(err->text, sizeof err->text, "read error");
                goto out;
            }
            break;
        }
    }
    rc = pjson_parse(buf, len, out, err);
out:
    if (f && f != stdin) fclose(f);
    free(buf);
    return rc;
}

void pjson_input_clear(pjson_input_t *in)
{
    if (!in) return;
    pshift_problem_destroy(&in->problem);
    free(in->limits);
    memset(in, 0, sizeof *in);
}

/* ---- writing ----------------------------------------------------------- */

static const char *server_name(const pshift_problem_t *p, int s, char *buf, size_t n)
{
    const char *name = pshift_server_name(p, s);
    if (name) return name;
    snprintf(buf, n, "s%d", s + 1);
    return buf;
}

static const char *bucket_name(const pshift_problem_t *p, int b, char *buf, size_t n)
{
    const char *name = pshift_bucket_name(p, b);
    if (name) return name;
    snprintf(buf, n, "b%d", b + 1);
    return buf;
}

/* Sets key to a new value; returns -ENOMEM if either failed. */
static int set(json_t *obj, const char *key, json_t *v)
{
    if (!v) return -ENOMEM;
    return json_object_set_new(obj, key, v) < 0 ? -ENOMEM : 0;
}

static int dump(FILE *f, json_t *root, int pretty)
{
    size_t flags = JSON_REAL_PRECISION(6) | (pretty ? JSON_INDENT(2) : JSON_COMPACT);
    if (json_dumpf(root, f, flags) < 0 || fputc('\n', f) == EOF || fflush(f) == EOF)
        return -EIO;
    return 0;
}

static int tree_problem(FILE *f, const pshift_problem_t *p, const int64_t *limits,
                        json_t *meta, int pretty)
{
    json_t *root = json_object(), *servers = json_array(), *buckets = json_array();
    char sb[32], bb[32];
    int rc = -ENOMEM;
    if (!root || !servers || !buckets) goto out;
    if (meta && set(root, "meta", json_incref(meta)) < 0) goto out;
    for (int s = 0; s < pshift_nservers(p); s++) {
        json_t *o = json_object();
        if (set(o, "name", json_string(server_name(p, s, sb, sizeof sb))) < 0 ||
            set(o, "capacity", json_integer(pshift_server_capacity(p, s))) < 0 ||
            json_array_append_new(servers, o) < 0) {
            json_decref(o);
            goto out;
        }
    }
    for (int b = 0; b < pshift_nbuckets(p); b++) {
        json_t *o = json_object(), *d = json_object();
        int bad = !o || !d;
        bad = bad || set(o, "name", json_string(bucket_name(p, b, bb, sizeof bb))) < 0;
        bad = bad || set(o, "reservation", json_integer(pshift_bucket_target(p, b))) < 0;
        if (!bad && limits && limits[b] != PJSON_NO_LIMIT)
            bad = set(o, "limit", json_integer(limits[b])) < 0;
        for (size_t k = 0; !bad && k < pshift_bucket_nentries(p, b); k++) {
            int s;
            int64_t dem;
            pshift_bucket_entry(p, b, k, &s, &dem, NULL);
            bad = set(d, server_name(p, s, sb, sizeof sb), json_integer(dem)) < 0;
        }
        if (!bad) {
            bad = json_object_set_new(o, "demand", d) < 0;
            d = NULL;
        }
        if (bad || json_array_append_new(buckets, o) < 0) {
            json_decref(o);
            json_decref(d);
            goto out;
        }
    }
    if (json_object_set_new(root, "servers", servers) < 0) goto out;
    servers = NULL;
    if (json_object_set_new(root, "buckets", buckets) < 0) goto out;
    buckets = NULL;
    rc = dump(f, root, pretty);
out:
    json_decref(servers);
    json_decref(buckets);
    json_decref(root);
    return rc;
}

static json_t *allocation(const pshift_problem_t *p)
{
    json_t *all = json_object();
    char sb[32], bb[32];
    if (!all) return NULL;
    for (int b = 0; b < pshift_nbuckets(p); b++) {
        json_t *o = json_object();
        if (!o) goto fail;
        for (size_t k = 0; k < pshift_bucket_nentries(p, b); k++) {
            int s;
            int64_t a;
            pshift_bucket_entry(p, b, k, &s, NULL, &a);
            if (set(o, server_name(p, s, sb, sizeof sb), json_integer(a)) < 0) {
                json_decref(o);
                goto fail;
            }
        }
        if (set(all, bucket_name(p, b, bb, sizeof bb), o) < 0) goto fail;
    }
    return all;
fail:
    json_decref(all);
    return NULL;
}

static json_t *stats(const pshift_stats_t *st)
{
    json_t *o = json_object();
    int bad = !o;
    bad = bad || set(o, "phi", json_integer(st->phi)) < 0;
    bad = bad || set(o, "phi_initial", json_integer(st->phi_initial)) < 0;
    bad = bad || set(o, "tokens", json_integer(st->tokens)) < 0;
    bad = bad || set(o, "weak_excess_initial", json_integer(st->weak_excess_initial)) < 0;
    bad = bad || set(o, "weak_excess_final", json_integer(st->weak_excess_final)) < 0;
    bad = bad || set(o, "weak_excess_removed", json_real(st->weak_excess_removed)) < 0;
    bad = bad || set(o, "shifts", json_integer(st->shifts)) < 0;
    bad = bad || set(o, "longest_path", json_integer(st->longest_path)) < 0;
    bad = bad || set(o, "levels", json_integer(st->levels)) < 0;
    bad = bad || set(o, "buckets_considered",
                     json_integer((json_int_t)st->buckets_considered)) < 0;
    bad = bad || set(o, "t_init", json_real(st->t_init)) < 0;
    bad = bad || set(o, "t_map", json_real(st->t_map)) < 0;
    bad = bad || set(o, "t_shift", json_real(st->t_shift)) < 0;
    bad = bad || set(o, "t_total", json_real(st->t_total)) < 0;
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static int tree_solution(FILE *f, const pshift_problem_t *p, const pshift_problem_t *lim,
                         int pretty)
{
    const pshift_stats_t *st = pshift_stats(p);
    double secs = st->t_total + (lim ? pshift_stats(lim)->t_total : 0.0);
    json_t *root = json_object();
    int rc = -ENOMEM;
    if (!root) goto out;
    if (set(root, "phi", json_integer(st->phi)) < 0) goto out;
    if (set(root, "solve_seconds", json_real(secs)) < 0) goto out;
    if (set(root, "allocation", allocation(p)) < 0) goto out;
    if (set(root, "stats", stats(st)) < 0) goto out;
    if (lim) {
        const pshift_stats_t *ls = pshift_stats(lim);
        if (set(root, "limit_phi", json_integer(ls->phi)) < 0) goto out;
        if (set(root, "limit_allocation", allocation(lim)) < 0) goto out;
        if (set(root, "limit_stats", stats(ls)) < 0) goto out;
    }
    rc = dump(f, root, pretty);
out:
    json_decref(root);
    return rc;
}

/* Compact output is streamed rather than built as one jansson tree: a
 * million buckets would otherwise cost gigabytes and tens of seconds. */

/* Writes `s` as a JSON string. */
static void put_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\') {
            fputc('\\', f);
            fputc(*c, f);
        } else if (*c < 0x20) {
            fprintf(f, "\\u%04x", *c);
        } else {
            fputc(*c, f);
        }
    }
    fputc('"', f);
}

/* Writes `v` compactly and releases it; -ENOMEM if it is NULL. */
static int put_value(FILE *f, json_t *v)
{
    if (!v) return -ENOMEM;
    int rc = json_dumpf(v, f, JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(6));
    json_decref(v);
    return rc < 0 ? -EIO : 0;
}

static int finish(FILE *f)
{
    if (fputc('\n', f) == EOF || fflush(f) == EOF || ferror(f)) return -EIO;
    return 0;
}

int pjson_write_problem(FILE *f, const pshift_problem_t *p, const int64_t *limits,
                        json_t *meta, int pretty)
{
    char sb[32], bb[32];
    if (pretty) return tree_problem(f, p, limits, meta, pretty);
    fputc('{', f);
    if (meta) {
        fputs("\"meta\":", f);
        if (put_value(f, json_incref(meta)) < 0) return -EIO;
        fputc(',', f);
    }
    fputs("\"servers\":[", f);
    for (int s = 0; s < pshift_nservers(p); s++) {
        fputs(s ? ",{\"name\":" : "{\"name\":", f);
        put_string(f, server_name(p, s, sb, sizeof sb));
        fprintf(f, ",\"capacity\":%" PRId64 "}", pshift_server_capacity(p, s));
    }
    fputs("],\"buckets\":[", f);
    for (int b = 0; b < pshift_nbuckets(p); b++) {
        fputs(b ? ",{\"name\":" : "{\"name\":", f);
        put_string(f, bucket_name(p, b, bb, sizeof bb));
        fprintf(f, ",\"reservation\":%" PRId64, pshift_bucket_target(p, b));
        if (limits && limits[b] != PJSON_NO_LIMIT) fprintf(f, ",\"limit\":%" PRId64, limits[b]);
        fputs(",\"demand\":{", f);
        for (size_t k = 0; k < pshift_bucket_nentries(p, b); k++) {
            int s;
            int64_t d;
            pshift_bucket_entry(p, b, k, &s, &d, NULL);
            if (k) fputc(',', f);
            put_string(f, server_name(p, s, sb, sizeof sb));
            fprintf(f, ":%" PRId64, d);
        }
        fputs("}}", f);
    }
    fputs("]}", f);
    return finish(f);
}

static void put_allocation(FILE *f, const pshift_problem_t *p)
{
    char sb[32], bb[32];
    fputc('{', f);
    for (int b = 0; b < pshift_nbuckets(p); b++) {
        if (b) fputc(',', f);
        put_string(f, bucket_name(p, b, bb, sizeof bb));
        fputs(":{", f);
        for (size_t k = 0; k < pshift_bucket_nentries(p, b); k++) {
            int s;
            int64_t a;
            pshift_bucket_entry(p, b, k, &s, NULL, &a);
            if (k) fputc(',', f);
            put_string(f, server_name(p, s, sb, sizeof sb));
            fprintf(f, ":%" PRId64, a);
        }
        fputc('}', f);
    }
    fputc('}', f);
}

int pjson_write_solution(FILE *f, const pshift_problem_t *p, const pshift_problem_t *lim,
                         int pretty)
{
    if (pretty) return tree_solution(f, p, lim, pretty);
    const pshift_stats_t *st = pshift_stats(p);
    double secs = st->t_total + (lim ? pshift_stats(lim)->t_total : 0.0);
    fprintf(f, "{\"phi\":%" PRId64 ",\"solve_seconds\":", st->phi);
    if (put_value(f, json_real(secs)) < 0) return -ENOMEM;
    fputs(",\"allocation\":", f);
    put_allocation(f, p);
    fputs(",\"stats\":", f);
    if (put_value(f, stats(st)) < 0) return -ENOMEM;
    if (lim) {
        fprintf(f, ",\"limit_phi\":%" PRId64 ",\"limit_allocation\":", pshift_stats(lim)->phi);
        put_allocation(f, lim);
        fputs(",\"limit_stats\":", f);
        if (put_value(f, stats(pshift_stats(lim))) < 0) return -ENOMEM;
    }
    fputc('}', f);
    return finish(f);
}
