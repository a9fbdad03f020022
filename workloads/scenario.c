/* scenario.c - load, validate and expand bqos-load scenario files, and answer a loaded scenario's run-time queries (the phase in force, the next demand change, the controller's bucket file). */
#include "workloads/scenario.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/bucketfile.h"
#include "common/jsonloc.h"
#include "common/names.h"
#include "common/num.h"
#include "common/rng.h"

/* Path steps kept for an error position; deeper values are reported at
 * their ancestor this many steps down (scenarios nest 5 deep). */
#define PATH_DEPTH 16

/* A value of the parsed document and the way to it from the root, so that
 * an error can name its path and jsonloc can find its line and column.  The
 * root has up == NULL; a member has `key`, an array element `index`.  `v` is
 * NULL for an absent member.  Lives on the stack of the parse functions. */
typedef struct at {
    json_t *v;                  /* borrowed from the document, read only */
    const struct at *up;
    const char *key;            /* borrowed: a literal or the document's key */
    size_t index;
} at_t;

/* Parse state: one per scenario_parse() call. */
typedef struct {
    jsonloc_err_t *err;
    scenario_t *s;
    const char *text;  /* the JSON text, for positions */
    size_t len;
    int cut;   /* --duration shortened the run: drop changes after its end */
} ctx_t;

static at_t member(const at_t *obj, const char *key)
{
    return (at_t){json_object_get(obj->v, key), obj, key, 0};
}

static at_t element(const at_t *arr, size_t i)
{
    return (at_t){json_array_get(arr->v, i), arr, NULL, i};
}

static int fail(ctx_t *c, const at_t *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Fills the error with the text, and with the line, column and path of `at`
 * (NULL: no position, line 0).  Returns -EINVAL. */
static int fail(ctx_t *c, const at_t *at, const char *fmt, ...)
{
    jsonloc_err_t *e = c->err;
    e->line = e->col = 0;
    e->path[0] = '\0';
    if (at) {
        jsonloc_step_t steps[PATH_DEPTH];
        size_t n = 0;
        for (const at_t *p = at; p->up; p = p->up)
            n++;
        const at_t *p = at;
        for (; n > PATH_DEPTH; n--)
            p = p->up;
        for (size_t i = n; i-- > 0; p = p->up)
            steps[i] = (jsonloc_step_t){p->key, p->index};
        jsonloc_err_at(e, c->text, c->len, steps, n);
    }
    /* The text starts with (at most 95 bytes of) the path. */
    int o = snprintf(e->text, sizeof e->text, "%.95s%s", e->path, e->path[0] ? ": " : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->text + o, sizeof e->text - (size_t)o, fmt, ap);
    va_end(ap);
    return -EINVAL;
}

/* Rejects members of `obj` not named in the NULL-terminated `allowed`
 * (the first one in document order). */
static int check_keys(ctx_t *c, const at_t *obj, const char *what,
                      const char *const *allowed)
{
    const char *key;
    json_t *val;
    json_object_foreach(obj->v, key, val) {
        int ok = 0;
        for (const char *const *a = allowed; *a; a++)
            if (strcmp(*a, key) == 0)
                ok = 1;
        if (!ok) {
            at_t m = {val, obj, key, 0};
            return fail(c, &m, "unknown key \"%s\" in %s", key, what);
        }
    }
    return 0;
}

/* JSON kinds as the messages name them (jansson splits numbers into
 * integers and reals, and has true and false apart). */
typedef enum { K_NULL, K_BOOLEAN, K_NUMBER, K_STRING, K_ARRAY, K_OBJECT } kind_t;

static kind_t kind(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return K_OBJECT;
    case JSON_ARRAY: return K_ARRAY;
    case JSON_STRING: return K_STRING;
    case JSON_INTEGER:
    case JSON_REAL: return K_NUMBER;
    case JSON_TRUE:
    case JSON_FALSE: return K_BOOLEAN;
    default: return K_NULL;
    }
}

/* "a number", "an object", ... for messages. */
static const char *kind_name(kind_t k)
{
    static const char *const names[] = {"null", "a boolean", "a number", "a string",
                                        "an array", "an object"};
    return names[k];
}

static int expect(ctx_t *c, const at_t *v, kind_t k, const char *what)
{
    kind_t got = kind(v->v);
    if (got != k)
        return fail(c, v, "%s must be %s, not %s", what, kind_name(k), kind_name(got));
    return 0;
}

/* Reads number member `key` of `obj` into *x and its place into *m.  Returns
 * 1 if present, 0 if absent (*x untouched), -EINVAL if not a number. */
static int number_member(ctx_t *c, const at_t *obj, const char *key, at_t *m, double *x)
{
    *m = member(obj, key);
    if (!m->v)
        return 0;
    if (expect(c, m, K_NUMBER, key) < 0)
        return -EINVAL;
    *x = json_number_value(m->v);
    return 1;
}

/* Reads number member `key` into *out (default `def` if absent) and checks
 * lo <= x <= hi (and x > lo when `open_lo`). */
static int get_num(ctx_t *c, const at_t *obj, const char *key, double def,
                   double lo, int open_lo, double hi, double *out)
{
    at_t m;
    double x = def;
    int rc = number_member(c, obj, key, &m, &x);
    if (rc <= 0) {
        *out = def;
        return rc;
    }
    if (x < lo || (open_lo && x == lo) || x > hi) {
        if (open_lo)
            return fail(c, &m, "%s must be > %g and <= %g", key, lo, hi);
        return fail(c, &m, "%s must be between %g and %g", key, lo, hi);
    }
    *out = x;
    return 0;
}

static int get_int(ctx_t *c, const at_t *obj, const char *key, long long def,
                   long long lo, long long hi, long long *out)
{
    at_t m;
    double x = 0;
    int rc = number_member(c, obj, key, &m, &x);
    *out = def;
    if (rc <= 0)
        return rc;
    if (x != floor(x))
        return fail(c, &m, "%s must be an integer", key);
    if (x < (double)lo || x > (double)hi)
        return fail(c, &m, "%s must be between %lld and %lld", key, lo, hi);
    *out = (long long)x;
    return 0;
}

/* A rate: a number of IOs/s, or "N%" of one server's capacity. */
static int rate_value(ctx_t *c, const at_t *v, const char *key, double *out)
{
    if (kind(v->v) == K_NUMBER) {
        double x = json_number_value(v->v);
        if (x < 0 || x > 1e12)
            return fail(c, v, "%s must be between 0 and 1e12 IOs/s", key);
        *out = x;
        return 0;
    }
    if (json_is_string(v->v)) {
        const char *str = json_string_value(v->v);
        char num[64];
        size_t n = strlen(str);
        double pct = 0;
        int bad = n < 2 || n >= sizeof num || str[n - 1] != '%';
        if (!bad) {
            memcpy(num, str, n - 1);
            num[n - 1] = '\0';
            bad = num_double_in(num, 0, 1e6, &pct) < 0;
        }
        if (bad)
            return fail(c, v, "%s must be a number of IOs/s or a string \"N%%\" (of one "
                        "server's capacity), not \"%s\"", key, str);
        if (c->s->capacity <= 0)
            return fail(c, v, "%s \"%s\" is a share of capacity, but the capacity is "
                        "unknown (set \"capacity\" or --capacity)", key, str);
        *out = pct / 100.0 * c->s->capacity;
        return 0;
    }
    return fail(c, v, "%s must be a number or a string \"N%%\", not %s", key,
                kind_name(kind(v->v)));
}

static int get_rate(ctx_t *c, const at_t *obj, const char *key, double def, double *out)
{
    at_t m = member(obj, key);
    *out = def;
    if (!m.v)
        return 0;
    return rate_value(c, &m, key, out);
}

/* Bucket names become key prefixes "NAME:objK" at the nodes. */
static int check_name(ctx_t *c, const at_t *v, const char *what)
{
    if (expect(c, v, K_STRING, what) < 0)
        return -EINVAL;
    const char *str = json_string_value(v->v);
    size_t n = strlen(str);
    if (n == 0 || n > SCENARIO_NAME_MAX)
        return fail(c, v, "%s must be 1 to %d bytes long", what, SCENARIO_NAME_MAX);
    /* The bucket name rule, narrowed: no quotes or backslashes either (the
     * CSV report writes names as they are). */
    if (names_check_bucket(str, n) < 0 || strpbrk(str, "\"\\"))
        return fail(c, v, "%s \"%s\" may not contain ':', quotes, backslashes, "
                    "spaces or control characters", what, str);
    return 0;
}

/* Parses address `str` ("HOST:PORT", optionally "memcached://"); errors
 * point at `at` (NULL: a command-line override, no position). */
static int parse_address(ctx_t *c, const at_t *at, const char *str, const char *what,
                         char **host, int *port)
{
    const char *a = str;
    if (strncmp(a, "memcached://", 12) == 0)
        a += 12;
    const char *colon = strrchr(a, ':');
    int64_t p;
    if (!colon || colon == a || num_i64_in(colon + 1, 1, 65535, &p) < 0)
        return fail(c, at, "%s must be \"HOST:PORT\" with a port 1-65535, not \"%s\"", what,
                    str);
    *host = strndup(a, (size_t)(colon - a));
    if (!*host)
        return -ENOMEM;
    *port = (int)p;
    return 0;
}

/* parse_address() of string member `at`. */
static int address_member(ctx_t *c, const at_t *at, const char *what, char **host, int *port)
{
    if (expect(c, at, K_STRING, what) < 0)
        return -EINVAL;
    return parse_address(c, at, json_string_value(at->v), what, host, port);
}

static int server_index(const scenario_t *s, const char *name)
{
    for (size_t i = 0; i < s->nservers; i++)
        if (strcmp(s->servers[i].name, name) == 0)
            return (int)i;
    return -1;
}

/* Applies one --server override "NAME=ADDR[,BACKEND]". */
static int override_server(ctx_t *c, const char *spec)
{
    const char *eq = strchr(spec, '=');
    char name[SCENARIO_NAME_MAX + 1];
    if (!eq || eq == spec || (size_t)(eq - spec) > SCENARIO_NAME_MAX)
        return fail(c, NULL, "server override \"%s\" is not NAME=HOST:PORT[,HOST:PORT]", spec);
    memcpy(name, spec, (size_t)(eq - spec));
    name[eq - spec] = '\0';
    int i = server_index(c->s, name);
    if (i < 0)
        return fail(c, NULL, "server override \"%s\": the scenario has no server \"%s\"",
                    spec, name);
    scenario_server_t *sv = &c->s->servers[i];
    const char *comma = strchr(eq + 1, ',');
    char *host = NULL, *bhost = NULL;
    int port, bport, rc;
    char *addr = comma ? strndup(eq + 1, (size_t)(comma - eq - 1)) : strdup(eq + 1);
    if (!addr)
        return -ENOMEM;
    rc = parse_address(c, NULL, addr, "server override address", &host, &port);
    free(addr);
    if (rc == 0 && comma)
        rc = parse_address(c, NULL, comma + 1, "server override backend", &bhost, &bport);
    if (rc < 0) {
        free(host);
        return rc;
    }
    free(sv->host);
    sv->host = host;
    sv->port = port;
    if (!bhost && !(bhost = strdup(host))) {
        return -ENOMEM;
    }
    if (!comma)
        bport = port;
    free(sv->backend_host);
    sv->backend_host = bhost;
    sv->backend_port = bport;
    return 0;
}

/* A server's "speed": [{"from_period": P, "factor": F}, ...], periods
 * strictly increasing, factors in (0, 100]. */
static int parse_speed(ctx_t *c, const at_t *arr, scenario_server_t *sv)
{
    static const char *const keys[] = {"from_period", "factor", NULL};
    if (expect(c, arr, K_ARRAY, "speed") < 0)
        return -EINVAL;
    size_t n = json_array_size(arr->v);
    sv->speed = calloc(n ? n : 1, sizeof *sv->speed);
    if (!sv->speed)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        at_t o = element(arr, i);
        long long from;
        double f;
        int rc;
        if (expect(c, &o, K_OBJECT, "a speed step") < 0 ||
            check_keys(c, &o, "a speed step", keys) < 0)
            return -EINVAL;
        if (!json_object_get(o.v, "factor"))
            return fail(c, &o, "speed step without \"factor\"");
        if ((rc = get_int(c, &o, "from_period", 0, 0, 100000000, &from)) < 0 ||
            (rc = get_num(c, &o, "factor", 1, 0, 1, 100, &f)) < 0)
            return rc;
        if (i > 0 && from <= sv->speed[i - 1].from_period)
            return fail(c, &o, "speed steps must be in increasing period order");
        sv->speed[i].from_period = (int)from;
        sv->speed[i].factor = f;
        sv->nspeed = i + 1;
    }
    return 0;
}

/* The simulator's "backend": {"window": K | "auto", "parallel": P,
 * "service_cv": CV, "headroom": N}. */
static int parse_backend(ctx_t *c, const at_t *o)
{
    static const char *const keys[] = {"window", "parallel", "service_cv", "headroom", NULL};
    scenario_t *s = c->s;
    if (expect(c, o, K_OBJECT, "backend") < 0 || check_keys(c, o, "backend", keys) < 0)
        return -EINVAL;
    at_t w = member(o, "window");
    long long k = 0;
    int rc;
    if (w.v && json_is_string(w.v)) {
        if (strcmp(json_string_value(w.v), "auto") != 0)
            return fail(c, &w, "backend.window must be a number or \"auto\"");
        k = SCENARIO_WINDOW_AUTO;
    } else if ((rc = get_int(c, o, "window", 0, 1, 4096, &k)) < 0)
        return rc;
    s->backend_window = (int)k;
    if ((rc = get_int(c, o, "parallel", 1, 1, 1024, &k)) < 0)
        return rc;
    s->backend_parallel = (int)k;
    if ((rc = get_int(c, o, "headroom", -1, 0, 1024, &k)) < 0)
        return rc;
    s->backend_headroom = (int)k;
    return get_num(c, o, "service_cv", -1, 0, 0, 10, &s->service_cv);
}

static int parse_servers(ctx_t *c, const at_t *arr)
{
    static const char *const keys[] = {"name", "address", "backend", "speed", NULL};
    scenario_t *s = c->s;
    if (expect(c, arr, K_ARRAY, "servers") < 0)
        return -EINVAL;
    size_t n = json_array_size(arr->v);
    if (n == 0)
        return fail(c, arr, "servers must not be empty");
    s->servers = calloc(n, sizeof *s->servers);
    if (!s->servers)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        at_t o = element(arr, i);
        scenario_server_t *sv = &s->servers[i];
        s->nservers = i + 1;
        if (expect(c, &o, K_OBJECT, "a server") < 0 ||
            check_keys(c, &o, "a server", keys) < 0)
            return -EINVAL;
        at_t name = member(&o, "name"), addr = member(&o, "address");
        at_t be = member(&o, "backend");
        if (!name.v)
            return fail(c, &o, "server without a \"name\"");
        if (!addr.v)
            return fail(c, &o, "server without an \"address\"");
        int rc = check_name(c, &name, "server name");
        if (rc < 0)
            return rc;
        const char *nm = json_string_value(name.v);
        for (size_t j = 0; j < i; j++)
            if (strcmp(s->servers[j].name, nm) == 0)
                return fail(c, &name, "duplicate server name \"%s\"", nm);
        if (!(sv->name = strdup(nm)))
            return -ENOMEM;
        if ((rc = address_member(c, &addr, "address", &sv->host, &sv->port)) < 0)
            return rc;
        rc = be.v ? address_member(c, &be, "backend", &sv->backend_host, &sv->backend_port)
                  : ((sv->backend_host = strdup(sv->host)) ? 0 : -ENOMEM);
        if (rc < 0)
            return rc;
        if (!be.v)
            sv->backend_port = sv->port;
        at_t sp = member(&o, "speed");
        if (sp.v && (rc = parse_speed(c, &sp, sv)) < 0)
            return rc;
    }
    return 0;
}


static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* How a bucket picks active servers: an explicit list, or a random count in
 * [lo, hi] drawn for each phase. */
typedef struct {
    const json_t *list; /* array of names (borrowed from the document), or NULL */
    int lo, hi;
} placement_t;

static int parse_active(ctx_t *c, const at_t *v, placement_t *pl)
{
    int n = (int)c->s->nservers;
    pl->list = NULL;
    if (kind(v->v) == K_NUMBER) {
        double x = json_number_value(v->v);
        if (x != floor(x) || x < 1 || x > n)
            return fail(c, v, "active must be an integer from 1 to %d (the servers)", n);
        pl->lo = pl->hi = (int)x;
        return 0;
    }
    const json_t *a = json_array_get(v->v, 0), *b = json_array_get(v->v, 1);
    if (json_array_size(v->v) != 2 || !json_is_number(a) || !json_is_number(b))
        return fail(c, v, "active must be a count or a range [MIN, MAX]");
    double lo = json_number_value(a), hi = json_number_value(b);
    if (lo != floor(lo) || hi != floor(hi) || lo < 1 || hi > n || lo > hi)
        return fail(c, v, "active range must satisfy 1 <= MIN <= MAX <= %d (the servers)", n);
    pl->lo = (int)lo;
    pl->hi = (int)hi;
    return 0;
}

/* Reads a placement from object `o` ("servers" or "active"); `def` applies
 * when both are absent.  An empty "servers" list (a bucket idle until its
 * first change) only if `may_idle`. */
static int get_placement(ctx_t *c, const at_t *o, const placement_t *def, int may_idle,
                         placement_t *pl)
{
    at_t list = member(o, "servers"), act = member(o, "active");
    if (list.v && act.v)
        return fail(c, &act, "give either \"servers\" or \"active\", not both");
    if (act.v)
        return parse_active(c, &act, pl);
    if (!list.v) {
        *pl = *def;
        return 0;
    }
    if (expect(c, &list, K_ARRAY, "servers") < 0)
        return -EINVAL;
    size_t n = json_array_size(list.v);
    if (n == 0 && !may_idle)
        return fail(c, &list, "a bucket's servers must not be empty (except before its first "
                              "explicit change)");
    for (size_t i = 0; i < n; i++) {
        at_t nm = element(&list, i);
        if (expect(c, &nm, K_STRING, "a server name") < 0)
            return -EINVAL;
        const char *str = json_string_value(nm.v);
        if (server_index(c->s, str) < 0)
            return fail(c, &nm, "unknown server \"%s\"", str);
        for (size_t j = 0; j < i; j++)
            if (strcmp(json_string_value(json_array_get(list.v, j)), str) == 0)
                return fail(c, &nm, "server \"%s\" listed twice", str);
    }
    pl->list = list.v;
    pl->lo = pl->hi = (int)n;
    return 0;
}

static int make_phase(ctx_t *c, const placement_t *pl, rng_t *rng, double at,
                      scenario_phase_t *ph)
{
    ph->at = at;
    int k = pl->lo + (int)rng_below(rng, (uint64_t)(pl->hi - pl->lo + 1));
    ph->servers = malloc((size_t)(k ? k : 1) * sizeof *ph->servers);
    if (!ph->servers)
        return -ENOMEM;
    ph->n = k;
    if (pl->list) {
        for (int i = 0; i < k; i++)
            ph->servers[i] =
                server_index(c->s, json_string_value(json_array_get(pl->list, (size_t)i)));
        qsort(ph->servers, (size_t)k, sizeof *ph->servers, cmp_int);
        return 0;
    }
    return rng_pick(rng, ph->servers, k, (int)c->s->nservers);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Builds the phases of bucket `b`: the initial placement, the explicit
 * "changes" (an array; changes->v NULL if absent) and `nrandom` changes at
 * random times that re-pick a set from the initial placement's range. */
static int build_phases(ctx_t *c, scenario_bucket_t *b, const placement_t *init,
                        const at_t *changes, long long nrandom, rng_t *rng)
{
    static const char *const keys[] = {"at", "servers", "active", NULL};
    const scenario_t *s = c->s;
    size_t nexp = json_array_size(changes->v);
    if (changes->v && nrandom > 0)
        return fail(c, changes, "give either \"changes\" or \"random_changes\", not both");
    size_t n = 1 + nexp + (size_t)nrandom;
    b->phases = calloc(n, sizeof *b->phases);
    if (!b->phases)
        return -ENOMEM;
    int rc = make_phase(c, init, rng, 0.0, &b->phases[0]);
    b->nphases = 1;
    if (rc < 0)
        return rc;
    double prev = 0;
    for (size_t i = 0; i < nexp; i++) {
        at_t o = element(changes, i);
        if (expect(c, &o, K_OBJECT, "a demand change") < 0 ||
            check_keys(c, &o, "a demand change", keys) < 0)
            return -EINVAL;
        at_t at = member(&o, "at");
        if (!at.v)
            return fail(c, &o, "demand change without \"at\" (seconds since the start)");
        double t;
        if ((rc = get_num(c, &o, "at", 0, 0, 1, c->cut ? INFINITY : s->duration, &t)) < 0)
            return rc;
        if (t <= prev)
            return fail(c, &at, "demand changes must be in increasing time order");
        if (t >= s->duration && c->cut)
            continue;
        if (t >= s->duration)
            return fail(c, &at, "demand change at %gs is not before the end of the run "
                        "(%gs)", t, s->duration);
        prev = t;
        placement_t pl;
        if (!json_object_get(o.v, "servers") && !json_object_get(o.v, "active"))
            return fail(c, &o, "demand change without \"servers\" or \"active\"");
        if ((rc = get_placement(c, &o, init, 0, &pl)) < 0 ||
            (rc = make_phase(c, &pl, rng, t, &b->phases[b->nphases])) < 0)
            return rc;
        b->nphases++;
    }
    if (nrandom > 0) {
        double *times = malloc((size_t)nrandom * sizeof *times);
        if (!times)
            return -ENOMEM;
        for (long long i = 0; i < nrandom; i++)
            times[i] = rng_uniform(rng) * s->duration;
        qsort(times, (size_t)nrandom, sizeof *times, cmp_double);
        for (long long i = 0; i < nrandom && rc == 0; i++) {
            if (times[i] <= b->phases[b->nphases - 1].at)
                continue; /* a tie: merge */
            rc = make_phase(c, init, rng, times[i], &b->phases[b->nphases]);
            b->nphases++;
        }
        free(times);
        if (rc < 0)
            return rc;
    }
    for (size_t i = 0; i < b->nphases; i++)
        if (b->phases[i].n > b->max_active)
            b->max_active = b->phases[i].n;
    return 0;
}

/* Checks a bucket's rates as --print-buckets writes them: within the bucket file's bounds
 * (common/bucketfile; "N%" rates and generated splits may pass them), limit >= reservation. */
static int check_limit(ctx_t *c, const at_t *at, const scenario_bucket_t *b)
{
    double max = (double)BUCKETFILE_MAX_RATE, lim = b->limit == SCENARIO_NO_LIMIT ? 0 : b->limit;
    int over_l = ceil(lim) > max;
    if (over_l || floor(b->reservation) > max)
        return fail(c, at, "%s (%.0f IOs/s) is above the bucket file's maximum (%.0f IOs/s)",
                    over_l ? "limit" : "reservation", over_l ? lim : b->reservation, max);
    if (b->limit != SCENARIO_NO_LIMIT && b->limit < b->reservation)
        return fail(c, at, "limit (%.0f IOs/s) is below the reservation (%.0f IOs/s)",
                    b->limit, b->reservation);
    return 0;
}

/* A bucket's "set": [{"period": P, "reservation": RATE, "limit": RATE or
 * null}, ...]: runtime changes of its rates, periods increasing, >= 1. */
static int parse_sets(ctx_t *c, const at_t *arr, scenario_bucket_t *b)
{
    static const char *const keys[] = {"period", "reservation", "limit", NULL};
    if (expect(c, arr, K_ARRAY, "set") < 0)
        return -EINVAL;
    size_t n = json_array_size(arr->v);
    b->sets = calloc(n ? n : 1, sizeof *b->sets);
    if (!b->sets)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        at_t o = element(arr, i), lim = member(&o, "limit");
        long long per;
        int rc;
        if (expect(c, &o, K_OBJECT, "a set") < 0 || check_keys(c, &o, "a set", keys) < 0)
            return -EINVAL;
        if (!json_object_get(o.v, "period"))
            return fail(c, &o, "set without \"period\"");
        scenario_bucket_t nb = {.limit = SCENARIO_NO_LIMIT};
        if ((rc = get_int(c, &o, "period", 1, 1, 100000000, &per)) < 0 ||
            (rc = get_rate(c, &o, "reservation", 0, &nb.reservation)) < 0 ||
            (lim.v && !json_is_null(lim.v) && (rc = rate_value(c, &lim, "limit", &nb.limit)) < 0) ||
            (rc = check_limit(c, lim.v ? &lim : &o, &nb)) < 0)
            return rc;
        if (i > 0 && per <= b->sets[i - 1].period)
            return fail(c, &o, "sets must be in increasing period order");
        b->sets[i] = (struct scenario_set){(int)per, nb.reservation, nb.limit};
        b->nsets = i + 1;
    }
    return 0;
}

static int parse_bucket(ctx_t *c, const at_t *o, scenario_bucket_t *b, size_t idx)
{
    static const char *const keys[] = {"name", "reservation", "limit", "servers", "active",
                                       "outstanding", "rate", "split_zipf", "changes",
                                       "random_changes", "set", "parent", "weight", NULL};
    const scenario_t *s = c->s;
    int rc;
    if (expect(c, o, K_OBJECT, "a bucket") < 0 || check_keys(c, o, "a bucket", keys) < 0)
        return -EINVAL;
    at_t name = member(o, "name");
    if (!name.v)
        return fail(c, o, "bucket without a \"name\"");
    if ((rc = check_name(c, &name, "bucket name")) < 0)
        return rc;
    if (!(b->name = strdup(json_string_value(name.v))))
        return -ENOMEM;
    b->parent = -1; /* parse_parents() */
    at_t lim = member(o, "limit");
    b->limit = SCENARIO_NO_LIMIT;
    if ((rc = get_rate(c, o, "reservation", 0, &b->reservation)) < 0 ||
        (lim.v && !json_is_null(lim.v) && (rc = rate_value(c, &lim, "limit", &b->limit)) < 0) ||
        (rc = check_limit(c, lim.v ? &lim : o, b)) < 0)
        return rc;
    long long outst, nrandom, weight;
    if ((rc = get_int(c, o, "weight", 0, 1, 1000000, &weight)) < 0)
        return rc;
    b->weight = (uint32_t)weight;
    if ((rc = get_int(c, o, "outstanding", 0, 1, 1000, &outst)) < 0 ||
        (rc = get_rate(c, o, "rate", 0, &b->rate)) < 0 ||
        (rc = get_num(c, o, "split_zipf", 0, 0, 0, 10, &b->split_zipf)) < 0 ||
        (rc = get_int(c, o, "random_changes", 0, 0, 1000, &nrandom)) < 0)
        return rc;
    b->outstanding = outst ? (int)outst : -1; /* -1: the workload default */
    at_t set = member(o, "set");
    if (set.v && (rc = parse_sets(c, &set, b)) < 0)
        return rc;
    at_t changes = member(o, "changes");
    if (changes.v && expect(c, &changes, K_ARRAY, "changes") < 0)
        return -EINVAL;
    placement_t all = {NULL, (int)s->nservers, (int)s->nservers}, pl;
    if ((rc = get_placement(c, o, &all, changes.v && nrandom == 0, &pl)) < 0)
        return rc;
    rng_t rng;
    rng_seed(&rng, s->seed, idx);
    return build_phases(c, b, &pl, &changes, nrandom, &rng);
}

/* The listed buckets' "parent" members, once every name is known (a
 * child may come before its parent): each names another listed bucket.
 * Cycles are the bucket file's to refuse (the controller's table). */
static int parse_parents(ctx_t *c, const at_t *buckets)
{
    scenario_t *s = c->s;
    for (size_t i = 0; i < s->nbuckets; i++) {
        at_t o = element(buckets, i), p = member(&o, "parent");
        s->buckets[i].parent = -1;
        if (!p.v || json_is_null(p.v))
            continue;
        if (expect(c, &p, K_STRING, "a parent (bucket name)") < 0)
            return -EINVAL;
        const char *name = json_string_value(p.v);
        if (strlen(name) > BUCKETFILE_PARENT_MAX)
            return fail(c, &p, "a parent's name is at most %d bytes", BUCKETFILE_PARENT_MAX);
        for (size_t j = 0; j < s->nbuckets && s->buckets[i].parent < 0; j++)
            if (j != i && strcmp(s->buckets[j].name, name) == 0)
                s->buckets[i].parent = (int)j;
        if (s->buckets[i].parent < 0)
            return fail(c, &p, "parent \"%s\" is not another bucket of the scenario", name);
    }
    return 0;
}

/* Expands "generate" into `count` buckets appended after the listed ones. */
static int parse_generate(ctx_t *c, const at_t *g, size_t first)
{
    static const char *const keys[] = {"count", "prefix", "reserved", "reservation", "zipf",
                                       "limit", "limit_ratio", "active", "random_changes",
                                       "outstanding", "outstanding_max", "demand_ratio",
                                       "split_zipf", NULL};
    scenario_t *s = c->s;
    int rc;
    if (expect(c, g, K_OBJECT, "generate") < 0 || check_keys(c, g, "generate", keys) < 0)
        return -EINVAL;
    long long count, outst, outst_max, nrandom;
    double reserved, zipf, ratio, demand, split, fixed_res = 0, fixed_lim = SCENARIO_NO_LIMIT;
    at_t prefix = member(g, "prefix"), res = member(g, "reservation");
    at_t resd = member(g, "reserved"), lim = member(g, "limit");
    at_t omax = member(g, "outstanding_max");
    if ((rc = get_int(c, g, "count", 0, 1, 100000, &count)) < 0 ||
        (rc = get_num(c, g, "reserved", -1, 0, 0, 1, &reserved)) < 0 ||
        (rc = get_num(c, g, "zipf", 0, 0, 0, 10, &zipf)) < 0 ||
        (rc = get_num(c, g, "limit_ratio", 0, 1, 0, 1e6, &ratio)) < 0 ||
        (rc = get_num(c, g, "demand_ratio", 0, 0, 0, 1e6, &demand)) < 0 ||
        (rc = get_num(c, g, "split_zipf", 0, 0, 0, 10, &split)) < 0 ||
        (rc = get_int(c, g, "outstanding", 0, 1, 1000, &outst)) < 0 ||
        (rc = get_int(c, g, "outstanding_max", 0, 1, 1000, &outst_max)) < 0 ||
        (rc = get_int(c, g, "random_changes", 0, 0, 1000, &nrandom)) < 0 ||
        (rc = get_rate(c, g, "reservation", 0, &fixed_res)) < 0 ||
        (rc = get_rate(c, g, "limit", SCENARIO_NO_LIMIT, &fixed_lim)) < 0)
        return rc;
    if (!json_object_get(g->v, "count"))
        return fail(c, g, "generate without a \"count\"");
    if (prefix.v && (rc = check_name(c, &prefix, "generate prefix")) < 0)
        return rc;
    if (reserved >= 0 && res.v)
        return fail(c, &res, "give either \"reserved\" or \"reservation\", not both");
    if (reserved >= 0 && s->capacity <= 0)
        return fail(c, &resd, "reserved is a share of the cluster's capacity, but the "
                    "capacity is unknown (set \"capacity\" or --capacity)");
    if (ratio > 0 && lim.v)
        return fail(c, &lim, "give either \"limit\" or \"limit_ratio\", not both");
    if (outst_max && outst_max < (outst ? outst : 1))
        return fail(c, &omax, "outstanding_max must be >= outstanding");
    placement_t all = {NULL, (int)s->nservers, (int)s->nservers}, pl;
    if ((rc = get_placement(c, g, &all, 0, &pl)) < 0)
        return rc;
    double *w = malloc((size_t)count * sizeof *w);
    scenario_bucket_t *nb = realloc(s->buckets, (first + (size_t)count) * sizeof *nb);
    if (!w || !nb) {
        free(w);
        if (nb)
            s->buckets = nb;
        return -ENOMEM;
    }
    s->buckets = nb;
    memset(nb + first, 0, (size_t)count * sizeof *nb);
    rng_zipf_weights(w, (size_t)count, zipf);
    double total = reserved >= 0 ? reserved * s->capacity * (double)s->nservers : 0;
    const char *pre = prefix.v ? json_string_value(prefix.v) : "g";
    at_t none = {NULL, g, "changes", 0};
    rc = 0;
    for (long long i = 0; i < count && rc == 0; i++) {
        scenario_bucket_t *b = &s->buckets[first + (size_t)i];
        s->nbuckets = first + (size_t)i + 1;
        char name[SCENARIO_NAME_MAX + 32];
        snprintf(name, sizeof name, "%s%lld", pre, i + 1);
        for (size_t j = 0; j < first; j++)
            if (strcmp(s->buckets[j].name, name) == 0) {
                rc = fail(c, g, "generated bucket name \"%s\" clashes with a listed bucket",
                          name);
                break;
            }
        if (rc < 0 || !(b->name = strdup(name))) {
            rc = rc < 0 ? rc : -ENOMEM;
            break;
        }
        b->parent = -1;
        b->reservation = reserved >= 0 ? floor(total * w[i]) : fixed_res;
        b->limit = ratio > 0 ? ceil(b->reservation * ratio) : fixed_lim;
        if ((rc = check_limit(c, g, b)) < 0)
            break;
        b->outstanding = outst ? (int)outst : -1;
        if (outst_max) {
            /* Concurrency in proportion to the reservation (the largest
             * bucket gets outstanding_max), so big buckets stay backlogged. */
            int lo = outst ? (int)outst : 1;
            int o = (int)ceil((double)outst_max * w[i] / w[0]);
            b->outstanding = o < lo ? lo : o;
        }
        b->rate = demand * b->reservation;
        b->split_zipf = split;
        rng_t rng;
        rng_seed(&rng, s->seed, first + (size_t)i);
        rc = build_phases(c, b, &pl, &none, nrandom, &rng);
    }
    free(w);
    return rc;
}

/* `w` is the "workload" member (w->v NULL if absent: all defaults). */
static int parse_workload(ctx_t *c, const at_t *w, const scenario_opts_t *opts,
                          long long *outstanding)
{
    static const char *const keys[] = {"get_ratio", "value_size", "preload", "keys",
                                       "outstanding", "timeout_ms", "rtt_ms", NULL};
    scenario_t *s = c->s;
    if (w->v && (expect(c, w, K_OBJECT, "workload") < 0 ||
                 check_keys(c, w, "workload", keys) < 0))
        return -EINVAL;
    long long vs, pre, nkeys, to;
    int rc;
    if ((rc = get_num(c, w, "get_ratio", 0.5, 0, 0, 1, &s->get_ratio)) < 0 ||
        (rc = get_int(c, w, "value_size", 4096, 1, 1000000, &vs)) < 0 ||
        (rc = get_int(c, w, "preload", 10000, 0, 100000000, &pre)) < 0 ||
        (rc = get_int(c, w, "keys", 0, 0, 100000000, &nkeys)) < 0 ||
        (rc = get_int(c, w, "outstanding", 5, 1, 1000, outstanding)) < 0 ||
        (rc = get_int(c, w, "timeout_ms", 5000, 10, 600000, &to)) < 0 ||
        (rc = get_num(c, w, "rtt_ms", 0, 0, 0, 60000, &s->rtt_ms)) < 0)
        return rc;
    s->value_size = (size_t)vs;
    s->preload = opts->preload >= 0 ? (size_t)opts->preload : (size_t)pre;
    s->keys = (size_t)nkeys;
    s->timeout_ms = (int)to;
    return 0;
}

static int parse_root(ctx_t *c, const at_t *root, const scenario_opts_t *opts)
{
    static const char *const keys[] = {"description", "duration", "period", "intervals",
                                       "warmup_periods", "seed", "capacity", "workload",
                                       "servers", "buckets", "generate", "backend", NULL};
    scenario_t *s = c->s;
    int rc;
    if (expect(c, root, K_OBJECT, "a scenario") < 0 ||
        check_keys(c, root, "the scenario", keys) < 0)
        return -EINVAL;
    long long intervals, warmup, seed, outstanding;
    if ((rc = get_num(c, root, "duration", 0, 0, 1, 86400, &s->duration)) < 0 ||
        (rc = get_num(c, root, "period", 1, 0, 1, 3600, &s->period)) < 0 ||
        (rc = get_int(c, root, "intervals", 5, 1, 1000, &intervals)) < 0 ||
        (rc = get_int(c, root, "warmup_periods", 0, 0, 1000000, &warmup)) < 0 ||
        (rc = get_int(c, root, "seed", 1, 0, 1LL << 53, &seed)) < 0 ||
        (rc = get_num(c, root, "capacity", 0, 0, 0, 1e12, &s->capacity)) < 0)
        return rc;
    if (!json_object_get(root->v, "duration") && opts->duration <= 0)
        return fail(c, root, "scenario without a \"duration\" (seconds)");
    c->cut = opts->duration > 0 && opts->duration < s->duration;
    if (opts->duration > 0)
        s->duration = opts->duration;
    if (opts->capacity > 0)
        s->capacity = opts->capacity;
    s->intervals = (int)intervals;
    s->warmup_periods = (int)warmup;
    s->seed = opts->seed >= 0 ? (uint64_t)opts->seed : (uint64_t)seed;
    at_t workload = member(root, "workload"), backend = member(root, "backend");
    if ((rc = parse_workload(c, &workload, opts, &outstanding)) < 0)
        return rc;
    s->service_cv = -1;
    if (backend.v && (rc = parse_backend(c, &backend)) < 0)
        return rc;
    at_t servers = member(root, "servers");
    if (!servers.v)
        return fail(c, root, "scenario without \"servers\"");
    if ((rc = parse_servers(c, &servers)) < 0)
        return rc;
    for (size_t i = 0; i < opts->nservers; i++)
        if ((rc = override_server(c, opts->servers[i])) < 0)
            return rc;
    at_t buckets = member(root, "buckets"), gen = member(root, "generate");
    if (buckets.v) {
        if (expect(c, &buckets, K_ARRAY, "buckets") < 0)
            return -EINVAL;
        size_t n = json_array_size(buckets.v);
        s->buckets = calloc(n ? n : 1, sizeof *s->buckets);
        if (!s->buckets)
            return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
            at_t o = element(&buckets, i);
            s->nbuckets = i + 1;
            if ((rc = parse_bucket(c, &o, &s->buckets[i], i)) < 0)
                return rc;
            for (size_t j = 0; j < i; j++)
                if (strcmp(s->buckets[j].name, s->buckets[i].name) == 0) {
                    at_t name = member(&o, "name");
                    return fail(c, &name, "duplicate bucket name \"%s\"", s->buckets[i].name);
                }
        }
        if ((rc = parse_parents(c, &buckets)) < 0)
            return rc;
    }
    if (gen.v && (rc = parse_generate(c, &gen, s->nbuckets)) < 0)
        return rc;
    if (s->nbuckets == 0)
        return fail(c, buckets.v ? &buckets : root, "scenario without buckets (give "
                    "\"buckets\" or \"generate\")");
    for (size_t i = 0; i < s->nbuckets; i++)
        if (s->buckets[i].outstanding < 0)
            s->buckets[i].outstanding = (int)outstanding;
    if (s->keys == 0) {
        s->keys = s->preload / s->nbuckets;
        if (s->keys == 0)
            s->keys = 1;
    }
    return 0;
}

int scenario_parse(const char *text, size_t len, const char *source,
                   const scenario_opts_t *opts, scenario_t **out, jsonloc_err_t *err)
{
    jsonloc_err_t dummy;
    scenario_opts_t defaults = SCENARIO_OPTS_DEFAULT;
    ctx_t c = {.err = err ? err : &dummy, .text = text, .len = len};
    jsonloc_err_clear(c.err);
    snprintf(c.err->source, sizeof c.err->source, "%s", source ? source : "<string>");
    *out = NULL;
    int rc = 0;
    /* Syntax errors (and duplicate keys) come with jansson's position: the
     * line and the column of the offending token's last character. */
    json_error_t je;
    json_t *doc = json_loadb(text, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je);
    if (!doc) {
        if (json_error_code(&je) == json_error_out_of_memory)
            return -ENOMEM;
        c.err->line = je.line;
        c.err->col = je.column;
        snprintf(c.err->text, sizeof c.err->text, "%s", je.text);
        return -EINVAL;
    }
    c.s = calloc(1, sizeof *c.s);
    if (!c.s) {
        rc = -ENOMEM;
        goto out;
    }
    at_t root = {doc, NULL, NULL, 0};
    rc = parse_root(&c, &root, opts ? opts : &defaults);
    if (rc == 0)
        *out = c.s;
    else
        scenario_destroy(&c.s);
out:
    json_decref(doc);
    return rc;
}

int scenario_load(const char *path, const scenario_opts_t *opts, scenario_t **out,
                  jsonloc_err_t *err)
{
    jsonloc_err_t dummy;
    if (!err)
        err = &dummy;
    jsonloc_err_clear(err);
    snprintf(err->source, sizeof err->source, "%s", path);
    *out = NULL;
    char *buf = NULL;
    size_t len = 0, cap = 0;
    int rc = 0;
    FILE *f = fopen(path, "rb");
    if (!f) {
        rc = -errno;
        snprintf(err->text, sizeof err->text, "cannot open: %s", strerror(errno));
        return rc;
    }
    for (;;) {
        if (len == cap) {
            cap = cap ? cap * 2 : 65536;
            char *nb = realloc(buf, cap);
            if (!nb) {
                rc = -ENOMEM;
                goto out;
            }
            buf = nb;
        }
        size_t n = fread(buf + len, 1, cap - len, f);
        len += n;
        if (n == 0)
            break;
    }
    if (ferror(f)) {
        rc = -EIO;
        snprintf(err->text, sizeof err->text, "read error");
        goto out;
    }
    rc = scenario_parse(buf, len, path, opts, out, err);
out:
    free(buf);
    fclose(f);
    return rc;
}

void scenario_destroy(scenario_t **sp)
{
    if (!sp || !*sp)
        return;
    scenario_t *s = *sp;
    for (size_t i = 0; i < s->nservers; i++) {
        free(s->servers[i].name);
        free(s->servers[i].host);
        free(s->servers[i].backend_host);
        free(s->servers[i].speed);
    }
    free(s->servers);
    for (size_t i = 0; i < s->nbuckets; i++) {
        for (size_t j = 0; j < s->buckets[i].nphases; j++)
            free(s->buckets[i].phases[j].servers);
        free(s->buckets[i].phases);
        free(s->buckets[i].sets);
        free(s->buckets[i].name);
    }
    free(s->buckets);
    free(s);
    *sp = NULL;
}

const scenario_phase_t *scenario_phase_at(const scenario_bucket_t *b, double t)
{
    size_t i = 0;
    while (i + 1 < b->nphases && b->phases[i + 1].at <= t)
        i++;
    return &b->phases[i];
}

double scenario_next_change(const scenario_bucket_t *b, double t)
{
    for (size_t i = 0; i < b->nphases; i++)
        if (b->phases[i].at > t)
            return b->phases[i].at;
    return INFINITY;
}

int scenario_write_buckets(const scenario_t *s, FILE *f)
{
    /* Through the bucket file's own writer, so the file is one the
     * controller and the nodes accept (scenario_parse() checked the bounds). */
    int rc = -ENOMEM;
    char *text = NULL;
    bucketfile_t *bf = bucketfile_new();
    if (!bf)
        goto out;
    for (size_t i = 0; i < s->nbuckets; i++) {
        const scenario_bucket_t *b = &s->buckets[i];
        bucketfile_bucket_t x = {.reservation = (int64_t)floor(b->reservation),
                                 .limit = b->limit == SCENARIO_NO_LIMIT ? BUCKETFILE_NO_LIMIT
                                                                        : (int64_t)ceil(b->limit),
                                 .weight = 1};
        x.name = b->name;
        if ((rc = bucketfile_set(bf, &x, NULL)) < 0)
            goto out;
    }
    /* Parents once every bucket is in (a child may come first). */
    for (size_t i = 0; i < s->nbuckets; i++) {
        const scenario_bucket_t *b = &s->buckets[i];
        if (b->parent < 0)
            continue;
        bucketfile_bucket_t x = *bucketfile_get(bf, i);
        bucketfile_bucket_set_parent(&x, s->buckets[b->parent].name);
        if ((rc = bucketfile_set(bf, &x, NULL)) < 0)
            goto out;
    }
    rc = -ENOMEM;
    if (!(text = bucketfile_dumps(bf)))
        goto out;
    rc = fputs(text, f) < 0 || ferror(f) ? -EIO : 0;
out:
    free(text);
    bucketfile_destroy(&bf);
    return rc;
}
