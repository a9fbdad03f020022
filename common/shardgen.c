/* shardgen.c - the cluster's shard configuration through time (shardgen.h): parse, format, the map in force at a period, a change begun and settled. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "common/shardgen.h"
#include "common/shardmap.h"

#define FROM_MAX ((int64_t)1 << 53) /* what a JSON number holds exactly */

shardgen_t shardgen_steady(int k)
{
    shardgen_t g = {.k = k, .gen = 1};
    return g;
}

int shardgen_valid(const shardgen_t *g)
{
    if (!g || g->k < 1 || g->k > SHARDMAP_MAX || g->gen < 1 || g->gen >= (uint64_t)FROM_MAX)
        return 0;
    if (!g->next_k)
        return 1;
    return g->next_k >= 1 && g->next_k <= SHARDMAP_MAX && g->next_k != g->k &&
           g->next_gen == g->gen + 1 && g->from_ms > 0 && g->from_ms < FROM_MAX;
}

static int fail(shardgen_error_t *err, const char *where, const char *what)
{
    if (err) {
        snprintf(err->where, sizeof err->where, "%s", where);
        snprintf(err->what, sizeof err->what, "%s", what);
        err->line = err->col = 0;
    }
    return -EINVAL;
}

/* The integer member `key` of o into *v if it is one in lo..hi; -1 if
 * absent, -2 if not such an integer, else 0. */
static int member(const json_t *o, const char *key, int64_t lo, int64_t hi, int64_t *v)
{
    json_t *x = json_object_get(o, key);
    if (!x)
        return -1;
    if (!json_is_integer(x) || json_integer_value(x) < lo || json_integer_value(x) > hi)
        return -2;
    *v = json_integer_value(x);
    return 0;
}

int shardgen_parse(const char *text, size_t len, shardgen_t *g, shardgen_error_t *err)
{
    json_error_t je;
    json_t *v = text ? json_loadb(text, len, 0, &je) : NULL;
    int rc = 0;
    if (!v) {
        rc = fail(err, "", text ? je.text : "no text");
        if (err && text) {
            err->line = je.line;
            err->col = je.column;
        }
        return rc;
    }
    shardgen_t n = {0};
    int64_t x = 0;
    int m;
    if (!json_is_object(v)) {
        rc = fail(err, "", "not a JSON object");
        goto out;
    }
    if ((m = member(v, "k", 1, SHARDMAP_MAX, &x)) < 0) {
        rc = fail(err, "k", m == -1 ? "missing" : "not an integer in 1..256");
        goto out;
    }
    n.k = (int)x;
    n.gen = 1; /* a key written before generations */
    if ((m = member(v, "gen", 1, FROM_MAX - 1, &x)) == -2) {
        rc = fail(err, "gen", "not a positive integer");
        goto out;
    }
    if (m == 0)
        n.gen = (uint64_t)x;
    json_t *nx = json_object_get(v, "next");
    if (nx && !json_is_null(nx)) {
        if (!json_is_object(nx)) {
            rc = fail(err, "next", "not an object");
            goto out;
        }
        if ((m = member(nx, "k", 1, SHARDMAP_MAX, &x)) < 0 || (int)x == n.k) {
            rc = fail(err, "next.k", m == -1 ? "missing"
                                     : m == -2 ? "not an integer in 1..256"
                                               : "the K already in force");
            goto out;
        }
        n.next_k = (int)x;
        if ((m = member(nx, "gen", 1, FROM_MAX - 1, &x)) < 0 || (uint64_t)x != n.gen + 1) {
            rc = fail(err, "next.gen", m == -1 ? "missing" : "not gen + 1");
            goto out;
        }
        n.next_gen = (uint64_t)x;
        if ((m = member(nx, "from", 1, FROM_MAX - 1, &x)) < 0) {
            rc = fail(err, "next.from", m == -1 ? "missing"
                                                : "not a wall-clock millisecond in 1..2^53");
            goto out;
        }
        n.from_ms = x;
    }
    *g = n;
out:
    json_decref(v);
    return rc;
}

int shardgen_format(const shardgen_t *g, char *buf, size_t size)
{
    if (!shardgen_valid(g))
        return -EINVAL;
    int n = g->next_k ? snprintf(buf, size,
                                 "{\"k\":%d,\"gen\":%" PRIu64 ",\"next\":{\"k\":%d,\"gen\":%" PRIu64
                                 ",\"from\":%" PRId64 "}}",
                                 g->k, g->gen, g->next_k, g->next_gen, g->from_ms)
                      : snprintf(buf, size, "{\"k\":%d,\"gen\":%" PRIu64 "}", g->k, g->gen);
    return n < 0 || (size_t)n >= size ? -ENOSPC : n;
}

/* Nonzero if the change of g holds at t_ms. */
static int changed_at(const shardgen_t *g, int64_t t_ms)
{
    return g->next_k && t_ms >= g->from_ms;
}

int shardgen_k_at(const shardgen_t *g, int64_t t_ms)
{
    return changed_at(g, t_ms) ? g->next_k : g->k;
}

uint64_t shardgen_gen_at(const shardgen_t *g, int64_t t_ms)
{
    return changed_at(g, t_ms) ? g->next_gen : g->gen;
}

int shardgen_of(const shardgen_t *g, const char *name, int64_t t_ms)
{
    return name ? shardmap_of(name, shardgen_k_at(g, t_ms)) : -EINVAL;
}

int shardgen_either(const shardgen_t *g, const char *name, int shard)
{
    if (!name)
        return 0;
    uint64_t h = shardmap_name_hash(name);
    return shardmap_of_hash(h, g->k) == shard ||
           (g->next_k && shardmap_of_hash(h, g->next_k) == shard);
}

int shardgen_kmax(const shardgen_t *g)
{
    return g->next_k > g->k ? g->next_k : g->k;
}

int shardgen_out(const shardgen_t *g, int shard, int64_t t_ms)
{
    if (shard < shardgen_k_at(g, t_ms))
        return 0;
    return !(g->next_k && t_ms < g->from_ms && shard < g->next_k);
}

int shardgen_settle(shardgen_t *g, int64_t now_ms)
{
    if (!changed_at(g, now_ms))
        return 0;
    g->k = g->next_k;
    g->gen = g->next_gen;
    g->next_k = 0;
    g->next_gen = 0;
    g->from_ms = 0;
    return 1;
}

int shardgen_begin(shardgen_t *g, int k_new, int64_t now_ms, int64_t period_ms, int ahead)
{
    if (!shardgen_valid(g) || k_new < 1 || k_new > SHARDMAP_MAX || period_ms < 1 || ahead < 2 ||
        now_ms < 0 || ahead > 1000000)
        return -EINVAL;
    shardgen_t n = *g;
    shardgen_settle(&n, now_ms);
    if (n.next_k)
        return n.next_k == k_new ? -EALREADY : -EBUSY;
    if (n.k == k_new)
        return -EALREADY;
    int64_t from = (now_ms / period_ms + 1 + ahead) * period_ms; /* >= ahead periods away */
    if (from >= FROM_MAX || n.gen + 1 >= (uint64_t)FROM_MAX)
        return -EINVAL;
    n.next_k = k_new;
    n.next_gen = n.gen + 1;
    n.from_ms = from;
    *g = n;
    return 0;
}

int shardgen_admits(const shardgen_t *g, int k_flag, int shard)
{
    if (k_flag == g->k || (g->next_k && k_flag == g->next_k))
        return shard >= 0 && shard < k_flag;
    return (g->gen > 1 || g->next_k) && shard >= 0 && shard < shardgen_kmax(g);
}

int shardgen_same(const shardgen_t *a, const shardgen_t *b)
{
    return a->k == b->k && a->gen == b->gen && a->next_k == b->next_k &&
           (!a->next_k || (a->next_gen == b->next_gen && a->from_ms == b->from_ms));
}

int shardgen_newer(const shardgen_t *g, const shardgen_t *than)
{
    return g->gen > than->gen || (g->gen == than->gen && g->k == than->k && g->next_k &&
                                  !than->next_k);
}
