/* scenario.c - load, validate and expand bqos-load scenario files. */
#include "workloads/scenario.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "workloads/jpos.h"
#include "workloads/zipf.h"

/* Parse state: one per scenario_parse() call. */
typedef struct {
    scenario_error_t *err;
    scenario_t *s;
    int cut;   /* --duration shortened the run: drop changes after its end */
} ctx_t;

static int fail(ctx_t *c, const jpos_value_t *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(ctx_t *c, const jpos_value_t *at, const char *fmt, ...)
{
    c->err->line = at ? at->line : 0;
    c->err->col = at ? at->col : 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err->text, sizeof c->err->text, fmt, ap);
    va_end(ap);
    return -EINVAL;
}

/* Rejects members of `obj` not named in the NULL-terminated `allowed`. */
static int check_keys(ctx_t *c, const jpos_value_t *obj, const char *what,
                      const char *const *allowed)
{
    for (size_t i = 0; i < obj->n; i++) {
        int ok = 0;
        for (const char *const *a = allowed; *a; a++)
            if (strcmp(*a, obj->keys[i]) == 0)
                ok = 1;
        if (!ok)
            return fail(c, obj->items[i], "unknown key \"%s\" in %s", obj->keys[i], what);
    }
    return 0;
}

static int expect(ctx_t *c, const jpos_value_t *v, jpos_type_t t, const char *what)
{
    if (v->type != t)
        return fail(c, v, "%s must be a %s, not a %s", what, jpos_type_name(t),
                    jpos_type_name(v->type));
    return 0;
}

/* Reads number member `key` into *out (default `def` if absent) and checks
 * lo <= x <= hi (and x > lo when `open_lo`). */
static int get_num(ctx_t *c, const jpos_value_t *obj, const char *key, double def,
                   double lo, int open_lo, double hi, double *out)
{
    const jpos_value_t *v = jpos_get(obj, key);
    *out = def;
    if (!v)
        return 0;
    if (expect(c, v, JPOS_NUMBER, key) < 0)
        return -EINVAL;
    double x = v->number;
    if (x < lo || (open_lo && x == lo) || x > hi) {
        if (open_lo)
            return fail(c, v, "%s must be > %g and <= %g", key, lo, hi);
        return fail(c, v, "%s must be between %g and %g", key, lo, hi);
    }
    *out = x;
    return 0;
}

static int get_int(ctx_t *c, const jpos_value_t *obj, const char *key, long long def,
                   long long lo, long long hi, long long *out)
{
    const jpos_value_t *v = jpos_get(obj, key);
    *out = def;
    if (!v)
        return 0;
    if (expect(c, v, JPOS_NUMBER, key) < 0)
        return -EINVAL;
    double x = v->number;
    if (x != floor(x))
        return fail(c, v, "%s must be an integer", key);
    if (x < (double)lo || x > (double)hi)
        return fail(c, v, "%s must be between %lld and %lld", key, lo, hi);
    *out = (long long)x;
    return 0;
}

/* A rate: a number of IOs/s, or "N%" of one server's capacity. */
static int rate_value(ctx_t *c, const jpos_value_t *v, const char *key, double *out)
{
    if (v->type == JPOS_NUMBER) {
        if (v->number < 0 || v->number > 1e12)
            return fail(c, v, "%s must be between 0 and 1e12 IOs/s", key);
        *out = v->number;
        return 0;
    }
    if (v->type == JPOS_STRING) {
        char *end;
        double pct = strtod(v->string, &end);
        if (end == v->string || strcmp(end, "%") != 0 || !(pct >= 0) || pct > 1e6)
            return fail(c, v, "%s must be a number of IOs/s or a string \"N%%\" (of one "
                        "server's capacity), not \"%s\"", key, v->string);
        if (c->s->capacity <= 0)
            return fail(c, v, "%s \"%s\" is a share of capacity, but the capacity is "
                        "unknown (set \"capacity\" or --capacity)", key, v->string);
        *out = pct / 100.0 * c->s->capacity;
        return 0;
    }
    return fail(c, v, "%s must be a number or a string \"N%%\", not a %s", key,
                jpos_type_name(v->type));
}

static int get_rate(ctx_t *c, const jpos_value_t *obj, const char *key, double def,
                    double *out)
{
    const jpos_value_t *v = jpos_get(obj, key);
    *out = def;
    if (!v)
        return 0;
    return rate_value(c, v, key, out);
}

/* Bucket names become key prefixes "NAME:objK" at the nodes. */
static int check_name(ctx_t *c, const jpos_value_t *v, const char *what)
{
    if (expect(c, v, JPOS_STRING, what) < 0)
        return -EINVAL;
    size_t n = strlen(v->string);
    if (n == 0 || n > SCENARIO_NAME_MAX)
        return fail(c, v, "%s must be 1 to %d bytes long", what, SCENARIO_NAME_MAX);
    for (const char *p = v->string; *p; p++)
        if (*p == ':' || *p == '"' || *p == '\\' || (unsigned char)*p <= ' ' || *p == 0x7f)
            return fail(c, v, "%s \"%s\" may not contain ':', quotes, backslashes, "
                        "spaces or control characters", what, v->string);
    return 0;
}

static int parse_address(ctx_t *c, const jpos_value_t *v, const char *what, char **host,
                         int *port)
{
    if (expect(c, v, JPOS_STRING, what) < 0)
        return -EINVAL;
    const char *a = v->string;
    if (strncmp(a, "memcached://", 12) == 0)
        a += 12;
    const char *colon = strrchr(a, ':');
    char *end;
    long p = colon ? strtol(colon + 1, &end, 10) : 0;
    if (!colon || colon == a || colon[1] == '\0' || *end || p < 1 || p > 65535)
        return fail(c, v, "%s must be \"HOST:PORT\" with a port 1-65535, not \"%s\"", what,
                    v->string);
    *host = strndup(a, (size_t)(colon - a));
    if (!*host)
        return -ENOMEM;
    *port = (int)p;
    return 0;
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
    jpos_value_t v = {.type = JPOS_STRING};
    char *host = NULL, *bhost = NULL;
    int port, bport, rc;
    v.string = comma ? strndup(eq + 1, (size_t)(comma - eq - 1)) : strdup(eq + 1);
    if (!v.string)
        return -ENOMEM;
    rc = parse_address(c, &v, "server override address", &host, &port);
    free(v.string);
    if (rc == 0 && comma) {
        v.string = (char *)(comma + 1);
        rc = parse_address(c, &v, "server override backend", &bhost, &bport);
    }
    if (rc < 0) {
        c->err->line = c->err->col = 0;
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

static int parse_servers(ctx_t *c, const jpos_value_t *arr)
{
    static const char *const keys[] = {"name", "address", "backend", NULL};
    scenario_t *s = c->s;
    if (expect(c, arr, JPOS_ARRAY, "servers") < 0)
        return -EINVAL;
    if (arr->n == 0)
        return fail(c, arr, "servers must not be empty");
    s->servers = calloc(arr->n, sizeof *s->servers);
    if (!s->servers)
        return -ENOMEM;
    for (size_t i = 0; i < arr->n; i++) {
        const jpos_value_t *o = arr->items[i];
        scenario_server_t *sv = &s->servers[i];
        s->nservers = i + 1;
        if (expect(c, o, JPOS_OBJECT, "a server") < 0 ||
            check_keys(c, o, "a server", keys) < 0)
            return -EINVAL;
        const jpos_value_t *name = jpos_get(o, "name"), *addr = jpos_get(o, "address");
        const jpos_value_t *be = jpos_get(o, "backend");
        if (!name)
            return fail(c, o, "server without a \"name\"");
        if (!addr)
            return fail(c, o, "server without an \"address\"");
        int rc = check_name(c, name, "server name");
        if (rc < 0)
            return rc;
        for (size_t j = 0; j < i; j++)
            if (strcmp(s->servers[j].name, name->string) == 0)
                return fail(c, name, "duplicate server name \"%s\"", name->string);
        if (!(sv->name = strdup(name->string)))
            return -ENOMEM;
        if ((rc = parse_address(c, addr, "address", &sv->host, &sv->port)) < 0)
            return rc;
        rc = be ? parse_address(c, be, "backend", &sv->backend_host, &sv->backend_port)
                : ((sv->backend_host = strdup(sv->host)) ? 0 : -ENOMEM);
        if (rc < 0)
            return rc;
        if (!be)
            sv->backend_port = sv->port;
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
    const jpos_value_t *list; /* array of names, or NULL */
    int lo, hi;
} placement_t;

static int parse_active(ctx_t *c, const jpos_value_t *v, placement_t *pl)
{
    int n = (int)c->s->nservers;
    pl->list = NULL;
    if (v->type == JPOS_NUMBER) {
        if (v->number != floor(v->number) || v->number < 1 || v->number > n)
            return fail(c, v, "active must be an integer from 1 to %d (the servers)", n);
        pl->lo = pl->hi = (int)v->number;
        return 0;
    }
    if (v->type != JPOS_ARRAY || v->n != 2 || v->items[0]->type != JPOS_NUMBER ||
        v->items[1]->type != JPOS_NUMBER)
        return fail(c, v, "active must be a count or a range [MIN, MAX]");
    double lo = v->items[0]->number, hi = v->items[1]->number;
    if (lo != floor(lo) || hi != floor(hi) || lo < 1 || hi > n || lo > hi)
        return fail(c, v, "active range must satisfy 1 <= MIN <= MAX <= %d (the servers)", n);
    pl->lo = (int)lo;
    pl->hi = (int)hi;
    return 0;
}

/* Reads a placement from object `o` ("servers" or "active"); `def` applies
 * when both are absent. */
static int get_placement(ctx_t *c, const jpos_value_t *o, const placement_t *def,
                         placement_t *pl)
{
    const jpos_value_t *list = jpos_get(o, "servers"), *act = jpos_get(o, "active");
    if (list && act)
        return fail(c, act, "give either \"servers\" or \"active\", not both");
    if (act)
        return parse_active(c, act, pl);
    if (!list) {
        *pl = *def;
        return 0;
    }
    if (expect(c, list, JPOS_ARRAY, "servers") < 0)
        return -EINVAL;
    if (list->n == 0)
        return fail(c, list, "a bucket's servers must not be empty");
    for (size_t i = 0; i < list->n; i++) {
        const jpos_value_t *nm = list->items[i];
        if (expect(c, nm, JPOS_STRING, "a server name") < 0)
            return -EINVAL;
        if (server_index(c->s, nm->string) < 0)
            return fail(c, nm, "unknown server \"%s\"", nm->string);
        for (size_t j = 0; j < i; j++)
            if (strcmp(list->items[j]->string, nm->string) == 0)
                return fail(c, nm, "server \"%s\" listed twice", nm->string);
    }
    pl->list = list;
    pl->lo = pl->hi = (int)list->n;
    return 0;
}

static int make_phase(ctx_t *c, const placement_t *pl, zipf_rng_t *rng, double at,
                      scenario_phase_t *ph)
{
    ph->at = at;
    int k = pl->lo + (int)zipf_rng_below(rng, (uint64_t)(pl->hi - pl->lo + 1));
    ph->servers = malloc((size_t)k * sizeof *ph->servers);
    if (!ph->servers)
        return -ENOMEM;
    ph->n = k;
    if (pl->list) {
        for (int i = 0; i < k; i++)
            ph->servers[i] = server_index(c->s, pl->list->items[i]->string);
        qsort(ph->servers, (size_t)k, sizeof *ph->servers, cmp_int);
        return 0;
    }
    return zipf_pick(rng, ph->servers, k, (int)c->s->nservers);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Builds the phases of bucket `b`: the initial placement, the explicit
 * "changes" (array, may be NULL) and `nrandom` changes at random times that
 * re-pick a set from the initial placement's range. */
static int build_phases(ctx_t *c, scenario_bucket_t *b, const placement_t *init,
                        const jpos_value_t *changes, long long nrandom, zipf_rng_t *rng)
{
    static const char *const keys[] = {"at", "servers", "active", NULL};
    const scenario_t *s = c->s;
    size_t nexp = changes ? changes->n : 0;
    if (changes && nrandom > 0)
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
        const jpos_value_t *o = changes->items[i];
        if (expect(c, o, JPOS_OBJECT, "a demand change") < 0 ||
            check_keys(c, o, "a demand change", keys) < 0)
            return -EINVAL;
        const jpos_value_t *at = jpos_get(o, "at");
        if (!at)
            return fail(c, o, "demand change without \"at\" (seconds since the start)");
        double t;
        if ((rc = get_num(c, o, "at", 0, 0, 1, c->cut ? INFINITY : s->duration, &t)) < 0)
            return rc;
        if (t <= prev)
            return fail(c, at, "demand changes must be in increasing time order");
        if (t >= s->duration && c->cut)
            continue;
        if (t >= s->duration)
            return fail(c, at, "demand change at %gs is not before the end of the run "
                        "(%gs)", t, s->duration);
        prev = t;
        placement_t pl;
        if (!jpos_get(o, "servers") && !jpos_get(o, "active"))
            return fail(c, o, "demand change without \"servers\" or \"active\"");
        if ((rc = get_placement(c, o, init, &pl)) < 0 ||
            (rc = make_phase(c, &pl, rng, t, &b->phases[b->nphases])) < 0)
            return rc;
        b->nphases++;
    }
    if (nrandom > 0) {
        double *times = malloc((size_t)nrandom * sizeof *times);
        if (!times)
            return -ENOMEM;
        for (long long i = 0; i < nrandom; i++)
            times[i] = zipf_rng_uniform(rng) * s->duration;
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

static int check_limit(ctx_t *c, const jpos_value_t *at, const scenario_bucket_t *b)
{
    if (b->limit != SCENARIO_NO_LIMIT && b->limit < b->reservation)
        return fail(c, at, "limit (%.0f IOs/s) is below the reservation (%.0f IOs/s)",
                    b->limit, b->reservation);
    return 0;
}

static int parse_bucket(ctx_t *c, const jpos_value_t *o, scenario_bucket_t *b, size_t idx)
{
    static const char *const keys[] = {"name", "reservation", "limit", "servers", "active",
                                       "outstanding", "rate", "split_zipf", "changes",
                                       "random_changes", NULL};
    const scenario_t *s = c->s;
    int rc;
    if (expect(c, o, JPOS_OBJECT, "a bucket") < 0 || check_keys(c, o, "a bucket", keys) < 0)
        return -EINVAL;
    const jpos_value_t *name = jpos_get(o, "name");
    if (!name)
        return fail(c, o, "bucket without a \"name\"");
    if ((rc = check_name(c, name, "bucket name")) < 0)
        return rc;
    if (!(b->name = strdup(name->string)))
        return -ENOMEM;
    const jpos_value_t *lim = jpos_get(o, "limit");
    b->limit = SCENARIO_NO_LIMIT;
    if ((rc = get_rate(c, o, "reservation", 0, &b->reservation)) < 0 ||
        (lim && lim->type != JPOS_NULL && (rc = rate_value(c, lim, "limit", &b->limit)) < 0) ||
        (rc = check_limit(c, lim ? lim : o, b)) < 0)
        return rc;
    long long outst, nrandom;
    if ((rc = get_int(c, o, "outstanding", 0, 1, 1000, &outst)) < 0 ||
        (rc = get_rate(c, o, "rate", 0, &b->rate)) < 0 ||
        (rc = get_num(c, o, "split_zipf", 0, 0, 0, 10, &b->split_zipf)) < 0 ||
        (rc = get_int(c, o, "random_changes", 0, 0, 1000, &nrandom)) < 0)
        return rc;
    b->outstanding = outst ? (int)outst : -1; /* -1: the workload default */
    const jpos_value_t *changes = jpos_get(o, "changes");
    if (changes && expect(c, changes, JPOS_ARRAY, "changes") < 0)
        return -EINVAL;
    placement_t all = {NULL, (int)s->nservers, (int)s->nservers}, pl;
    if ((rc = get_placement(c, o, &all, &pl)) < 0)
        return rc;
    zipf_rng_t rng;
    zipf_rng_seed(&rng, s->seed, idx);
    return build_phases(c, b, &pl, changes, nrandom, &rng);
}

/* Expands "generate" into `count` buckets appended after the listed ones. */
static int parse_generate(ctx_t *c, const jpos_value_t *g, size_t first)
{
    static const char *const keys[] = {"count", "prefix", "reserved", "reservation", "zipf",
                                       "limit", "limit_ratio", "active", "random_changes",
                                       "outstanding", "outstanding_max", "demand_ratio",
                                       "split_zipf", NULL};
    scenario_t *s = c->s;
    int rc;
    if (expect(c, g, JPOS_OBJECT, "generate") < 0 || check_keys(c, g, "generate", keys) < 0)
        return -EINVAL;
    long long count, outst, outst_max, nrandom;
    double reserved, zipf, ratio, demand, split, fixed_res = 0, fixed_lim = SCENARIO_NO_LIMIT;
    const jpos_value_t *prefix = jpos_get(g, "prefix");
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
    if (!jpos_get(g, "count"))
        return fail(c, g, "generate without a \"count\"");
    if (prefix && (rc = check_name(c, prefix, "generate prefix")) < 0)
        return rc;
    if (reserved >= 0 && jpos_get(g, "reservation"))
        return fail(c, jpos_get(g, "reservation"),
                    "give either \"reserved\" or \"reservation\", not both");
    if (reserved >= 0 && s->capacity <= 0)
        return fail(c, jpos_get(g, "reserved"), "reserved is a share of the cluster's "
                    "capacity, but the capacity is unknown (set \"capacity\" or --capacity)");
    if (ratio > 0 && jpos_get(g, "limit"))
        return fail(c, jpos_get(g, "limit"), "give either \"limit\" or \"limit_ratio\", not both");
    if (outst_max && outst_max < (outst ? outst : 1))
        return fail(c, jpos_get(g, "outstanding_max"), "outstanding_max must be >= outstanding");
    placement_t all = {NULL, (int)s->nservers, (int)s->nservers}, pl;
    if ((rc = get_placement(c, g, &all, &pl)) < 0)
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
    zipf_weights(w, (size_t)count, zipf);
    double total = reserved >= 0 ? reserved * s->capacity * (double)s->nservers : 0;
    const char *pre = prefix ? prefix->string : "g";
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
        zipf_rng_t rng;
        zipf_rng_seed(&rng, s->seed, first + (size_t)i);
        rc = build_phases(c, b, &pl, NULL, nrandom, &rng);
    }
    free(w);
    return rc;
}

static int parse_workload(ctx_t *c, const jpos_value_t *w, const scenario_opts_t *opts,
                          long long *outstanding)
{
    static const char *const keys[] = {"get_ratio", "value_size", "preload", "keys",
                                       "outstanding", "timeout_ms", NULL};
    scenario_t *s = c->s;
    static const jpos_value_t empty = {.type = JPOS_OBJECT};
    if (!w)
        w = &empty;
    if (expect(c, w, JPOS_OBJECT, "workload") < 0 || check_keys(c, w, "workload", keys) < 0)
        return -EINVAL;
    long long vs, pre, nkeys, to;
    int rc;
    if ((rc = get_num(c, w, "get_ratio", 0.5, 0, 0, 1, &s->get_ratio)) < 0 ||
        (rc = get_int(c, w, "value_size", 4096, 1, 1000000, &vs)) < 0 ||
        (rc = get_int(c, w, "preload", 10000, 0, 100000000, &pre)) < 0 ||
        (rc = get_int(c, w, "keys", 0, 0, 100000000, &nkeys)) < 0 ||
        (rc = get_int(c, w, "outstanding", 5, 1, 1000, outstanding)) < 0 ||
        (rc = get_int(c, w, "timeout_ms", 5000, 10, 600000, &to)) < 0)
        return rc;
    s->value_size = (size_t)vs;
    s->preload = opts->preload >= 0 ? (size_t)opts->preload : (size_t)pre;
    s->keys = (size_t)nkeys;
    s->timeout_ms = (int)to;
    return 0;
}

static int parse_root(ctx_t *c, const jpos_value_t *root, const scenario_opts_t *opts)
{
    static const char *const keys[] = {"description", "duration", "period", "intervals",
                                       "warmup_periods", "seed", "capacity", "workload",
                                       "servers", "buckets", "generate", NULL};
    scenario_t *s = c->s;
    int rc;
    if (expect(c, root, JPOS_OBJECT, "a scenario") < 0 ||
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
    if (!jpos_get(root, "duration") && opts->duration <= 0)
        return fail(c, root, "scenario without a \"duration\" (seconds)");
    c->cut = opts->duration > 0 && opts->duration < s->duration;
    if (opts->duration > 0)
        s->duration = opts->duration;
    if (opts->capacity > 0)
        s->capacity = opts->capacity;
    s->intervals = (int)intervals;
    s->warmup_periods = (int)warmup;
    s->seed = opts->seed >= 0 ? (uint64_t)opts->seed : (uint64_t)seed;
    if ((rc = parse_workload(c, jpos_get(root, "workload"), opts, &outstanding)) < 0)
        return rc;
    const jpos_value_t *servers = jpos_get(root, "servers");
    if (!servers)
        return fail(c, root, "scenario without \"servers\"");
    if ((rc = parse_servers(c, servers)) < 0)
        return rc;
    for (size_t i = 0; i < opts->nservers; i++)
        if ((rc = override_server(c, opts->servers[i])) < 0)
            return rc;
    const jpos_value_t *buckets = jpos_get(root, "buckets"), *gen = jpos_get(root, "generate");
    if (buckets) {
        if (expect(c, buckets, JPOS_ARRAY, "buckets") < 0)
            return -EINVAL;
        s->buckets = calloc(buckets->n ? buckets->n : 1, sizeof *s->buckets);
        if (!s->buckets)
            return -ENOMEM;
        for (size_t i = 0; i < buckets->n; i++) {
            s->nbuckets = i + 1;
            if ((rc = parse_bucket(c, buckets->items[i], &s->buckets[i], i)) < 0)
                return rc;
            for (size_t j = 0; j < i; j++)
                if (strcmp(s->buckets[j].name, s->buckets[i].name) == 0)
                    return fail(c, jpos_get(buckets->items[i], "name"),
                                "duplicate bucket name \"%s\"", s->buckets[i].name);
        }
    }
    if (gen && (rc = parse_generate(c, gen, s->nbuckets)) < 0)
        return rc;
    if (s->nbuckets == 0)
        return fail(c, buckets ? buckets : root, "scenario without buckets (give "
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
                   const scenario_opts_t *opts, scenario_t **out, scenario_error_t *err)
{
    scenario_error_t dummy;
    scenario_opts_t defaults = SCENARIO_OPTS_DEFAULT;
    ctx_t c = {.err = err ? err : &dummy};
    memset(c.err, 0, sizeof *c.err);
    snprintf(c.err->source, sizeof c.err->source, "%s", source ? source : "<string>");
    *out = NULL;
    jpos_value_t *root = NULL;
    jpos_error_t jerr;
    int rc = jpos_parse(text, len, &root, &jerr);
    if (rc == -EINVAL) {
        c.err->line = jerr.line;
        c.err->col = jerr.col;
        snprintf(c.err->text, sizeof c.err->text, "%s", jerr.text);
    }
    if (rc < 0)
        goto out;
    c.s = calloc(1, sizeof *c.s);
    if (!c.s) {
        rc = -ENOMEM;
        goto out;
    }
    rc = parse_root(&c, root, opts ? opts : &defaults);
    if (rc == 0)
        *out = c.s;
    else
        scenario_destroy(&c.s);
out:
    jpos_free(&root);
    return rc;
}

int scenario_load(const char *path, const scenario_opts_t *opts, scenario_t **out,
                  scenario_error_t *err)
{
    scenario_error_t dummy;
    if (!err)
        err = &dummy;
    memset(err, 0, sizeof *err);
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
    }
    free(s->servers);
    for (size_t i = 0; i < s->nbuckets; i++) {
        for (size_t j = 0; j < s->buckets[i].nphases; j++)
            free(s->buckets[i].phases[j].servers);
        free(s->buckets[i].phases);
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
    fprintf(f, "{\"buckets\": [\n");
    for (size_t i = 0; i < s->nbuckets; i++) {
        const scenario_bucket_t *b = &s->buckets[i];
        fprintf(f, "  {\"name\": \"%s\", \"reservation\": %.0f", b->name, floor(b->reservation));
        if (b->limit != SCENARIO_NO_LIMIT)
            fprintf(f, ", \"limit\": %.0f", ceil(b->limit));
        fprintf(f, "}%s\n", i + 1 < s->nbuckets ? "," : "");
    }
    fprintf(f, "]}\n");
    return ferror(f) ? -EIO : 0;
}
