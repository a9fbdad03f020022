/* ctlmerge.c - bqos-ctl's view of several controller shards as one: their answers merged, paged and sorted on the merge (ctlmerge.h). */
#include "controller/ctl/ctlmerge.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/shardmap.h"

/* How merged bucket rows are ordered. */
typedef enum { ORDER_TABLE, ORDER_NAME, ORDER_FIGURE } order_t;

struct ctlmerge {
    ctlmerge_kind_t kind;
    int n;                          /* shards */
    json_t *req;                    /* a copy of the request */
    json_t *rep[SHARDMAP_MAX];      /* each shard's answer (owned), NULL: none */
    int added[SHARDMAP_MAX];
    int64_t offset, limit;          /* the merge's page; limit -1: none */
    const char *sort;               /* in req, "table" when not given */
};

/* A bucket row of a merged view: its shard's reply row, where it came. */
typedef struct {
    json_t *row; /* borrowed */
    int shard;
    size_t pos;  /* its place in its shard's rows */
    int64_t key;
    const char *name;
    order_t order;
} mrow_t;

static const char *const cmds[] = {[CTLMERGE_STATUS] = "status",
                                   [CTLMERGE_NODE] = "status_node",
                                   [CTLMERGE_HISTORY] = "history",
                                   [CTLMERGE_BUCKETS] = "buckets"};

ctlmerge_t *ctlmerge_new(const json_t *req, int nshards)
{
    const char *cmd = json_string_value(json_object_get(req, "cmd"));
    int kind = -1;
    for (int k = 0; cmd && k < (int)(sizeof cmds / sizeof cmds[0]); k++)
        if (strcmp(cmd, cmds[k]) == 0)
            kind = k;
    if (kind < 0 || nshards < 1 || nshards > SHARDMAP_MAX) {
        errno = EINVAL;
        return NULL;
    }
    json_t *l = json_object_get(req, "limit"), *o = json_object_get(req, "offset");
    json_t *s = json_object_get(req, "sort");
    int paged = kind == CTLMERGE_STATUS || kind == CTLMERGE_NODE;
    int64_t offset = paged && json_is_integer(o) ? json_integer_value(o) : 0;
    int64_t limit = paged && json_is_integer(l) ? json_integer_value(l) : -1;
    if (offset < 0 || (json_is_integer(l) && limit < 0) ||
        (kind == CTLMERGE_NODE && !json_is_string(json_object_get(req, "name")))) {
        errno = EINVAL;
        return NULL;
    }
    ctlmerge_t *m = calloc(1, sizeof *m);
    if (!m || !(m->req = json_deep_copy(req))) {
        free(m);
        errno = ENOMEM;
        return NULL;
    }
    m->kind = (ctlmerge_kind_t)kind;
    m->n = nshards;
    m->offset = offset;
    m->limit = limit;
    s = json_object_get(m->req, "sort");
    m->sort = kind == CTLMERGE_STATUS && json_is_string(s) ? json_string_value(s) : "table";
    return m;
}

void ctlmerge_destroy(ctlmerge_t **mp)
{
    if (!mp || !*mp)
        return;
    ctlmerge_t *m = *mp;
    for (int i = 0; i < m->n; i++)
        json_decref(m->rep[i]);
    json_decref(m->req);
    free(m);
    *mp = NULL;
}

ctlmerge_kind_t ctlmerge_kind(const ctlmerge_t *m)
{
    return m->kind;
}

json_t *ctlmerge_shard_request(const ctlmerge_t *m)
{
    json_t *r = json_deep_copy(m->req);
    if (!r || (m->kind != CTLMERGE_STATUS && m->kind != CTLMERGE_NODE))
        return r;
    if (m->limit >= 0 && json_object_set_new(r, "limit", json_integer(m->offset + m->limit)) < 0) {
        json_decref(r);
        return NULL;
    }
    json_object_del(r, "offset");
    return r;
}

int ctlmerge_add(ctlmerge_t *m, int shard, json_t *reply)
{
    if (shard < 0 || shard >= m->n || m->added[shard])
        return -EINVAL;
    m->added[shard] = 1;
    m->rep[shard] = json_incref(reply);
    return 0;
}

/* Shard i's answer if it is "ok", else NULL. */
static json_t *ok_answer(const ctlmerge_t *m, int i)
{
    return json_is_true(json_object_get(m->rep[i], "ok")) ? m->rep[i] : NULL;
}

int ctlmerge_answered(const ctlmerge_t *m)
{
    int k = 0;
    for (int i = 0; i < m->n; i++)
        k += ok_answer(m, i) != NULL;
    return k;
}

/* The controller's order (admin.c's ranks_before()): name ascending, the
 * figures descending (no limit above every limit), ties and "table" in
 * shard order then each shard's. */
static int mrow_cmp(const void *pa, const void *pb)
{
    const mrow_t *x = pa, *y = pb;
    if (x->order == ORDER_NAME) {
        int c = strcmp(x->name, y->name);
        if (c)
            return c;
    } else if (x->order == ORDER_FIGURE && x->key != y->key) {
        return x->key > y->key ? -1 : 1;
    }
    if (x->shard != y->shard)
        return x->shard < y->shard ? -1 : 1;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/* A row's key for the sort `sort` (served, queued etc.; limit: null is
 * no limit, above every figure). */
static int64_t mrow_key(json_t *row, const char *sort)
{
    json_t *v = json_object_get(row, sort);
    if (strcmp(sort, "limit") == 0 && (!v || json_is_null(v)))
        return INT64_MAX;
    return json_is_integer(v) ? (int64_t)json_integer_value(v) : 0;
}

/* The summary fields summed over the shards. */
static const char *const sum_keys[] = {"buckets", "matched", "reservation", "limited", "demand",
                                       "served", "queued", "queued_buckets"};

/* The clock every status reply starts with. */
static const char *const clock_keys[] = {"period", "interval", "intervals", "elapsed_ms",
                                         "period_ms"};

/* Copies the clock of the first answer that has one into out. */
static void take_clock(json_t *out, json_t *rep)
{
    if (json_object_get(out, "period"))
        return;
    for (size_t c = 0; c < sizeof clock_keys / sizeof clock_keys[0]; c++)
        if (json_object_get(rep, clock_keys[c]))
            json_object_set(out, clock_keys[c], json_object_get(rep, clock_keys[c]));
}

/* Folds one shard's node row nd into the merged node m: capacity the
 * smallest, buckets and fallbacks summed, last_report_ms the oldest. */
static void fold_node(json_t *m, json_t *nd)
{
    static const char *const fig[] = {"capacity", "buckets", "fallbacks", "last_report_ms"};
    for (int f = 0; f < 4; f++) {
        json_t *v = json_object_get(nd, fig[f]), *was = json_object_get(m, fig[f]);
        if (!json_is_integer(v))
            continue;
        json_int_t x = json_integer_value(v), w = json_integer_value(was);
        if (was && (f == 0 ? w < x : f == 3 ? w > x : 0))
            x = w; /* the smallest capacity, the oldest report */
        else if (was && (f == 1 || f == 2))
            x += w;
        json_object_set_new(m, fig[f], json_integer(x));
    }
}

/* Appends the bucket rows of `arr` (shard i's) to *rows. Returns 0 or -1. */
static int collect_rows(mrow_t **rows, size_t *nrows, size_t *cap, json_t *arr, int i,
                        const char *sort)
{
    size_t j;
    json_t *row;
    order_t order = strcmp(sort, "name") == 0    ? ORDER_NAME
                    : strcmp(sort, "table") == 0 ? ORDER_TABLE
                                                 : ORDER_FIGURE;
    json_array_foreach(arr, j, row) {
        if (!json_is_object(row))
            continue;
        if (*nrows == *cap) {
            size_t c = *cap ? 2 * *cap : 64;
            mrow_t *p = realloc(*rows, c * sizeof *p);
            if (!p)
                return -1;
            *rows = p;
            *cap = c;
        }
        const char *nm = json_string_value(json_object_get(row, "name"));
        (*rows)[(*nrows)++] = (mrow_t){row, i, j, mrow_key(row, sort), nm ? nm : "", order};
    }
    return 0;
}

/* Sorts rows and appends rows offset..offset + limit to bs, each a copy
 * with its "shard".  Returns 0 or -1. */
static int page_rows(const ctlmerge_t *m, mrow_t *rows, size_t nrows, json_t *bs)
{
    if (nrows > 1)
        qsort(rows, nrows, sizeof *rows, mrow_cmp);
    for (size_t r = (size_t)m->offset;
         r < nrows && (m->limit < 0 || r < (size_t)(m->offset + m->limit)); r++) {
        json_t *c = json_deep_copy(rows[r].row);
        if (!c || json_object_set_new(c, "shard", json_integer(rows[r].shard)) < 0 ||
            json_array_append_new(bs, c) < 0) {
            json_decref(c);
            return -1;
        }
    }
    return 0;
}

/* The status merged (ctlmerge.h). */
static json_t *merge_status(const ctlmerge_t *m)
{
    json_t *out = json_object(), *shards = json_array(), *nodes = json_array();
    json_t *index = json_object(), *sm = json_object(), *bs = json_array();
    mrow_t *rows = NULL;
    size_t nrows = 0, cap = 0;
    if (!out || !shards || !nodes || !index || !sm || !bs)
        goto fail;
    for (int i = 0; i < m->n; i++) {
        json_t *rep = ok_answer(m, i);
        json_array_append(shards, rep ? rep : json_null());
        if (!rep)
            continue;
        take_clock(out, rep);
        size_t j;
        json_t *nd;
        json_array_foreach(json_object_get(rep, "nodes"), j, nd) {
            const char *name = json_string_value(json_object_get(nd, "name"));
            if (!name)
                continue;
            json_t *mn = json_object_get(index, name);
            if (!mn) {
                json_t *per = json_array();
                for (int s = 0; per && s < m->n; s++)
                    json_array_append_new(per, json_null());
                mn = json_pack("{s:s, s:o}", "name", name, "shards", per ? per : json_null());
                if (!mn || json_array_append_new(nodes, mn) < 0 ||
                    json_object_set(index, name, mn) < 0)
                    goto fail;
            }
            json_array_set(json_object_get(mn, "shards"), (size_t)i, nd);
            fold_node(mn, nd);
        }
        if (collect_rows(&rows, &nrows, &cap, json_object_get(rep, "buckets"), i, m->sort) < 0)
            goto fail;
        json_t *ssm = json_object_get(rep, "summary");
        for (size_t k = 0; k < sizeof sum_keys / sizeof sum_keys[0]; k++) {
            json_t *v = json_object_get(ssm, sum_keys[k]);
            if (json_is_integer(v))
                json_object_set_new(sm, sum_keys[k],
                                    json_integer(json_integer_value(json_object_get(sm, sum_keys[k])) +
                                                 json_integer_value(v)));
        }
        if (json_object_get(ssm, "bucket"))
            json_object_set(sm, "bucket", json_object_get(ssm, "bucket"));
    }
    if (page_rows(m, rows, nrows, bs) < 0)
        goto fail;
    json_object_set_new(sm, "shown", json_integer((json_int_t)json_array_size(bs)));
    json_object_set_new(sm, "offset", json_integer(m->offset));
    json_object_set_new(sm, "sort", json_string(m->sort));
    json_object_set_new(out, "shards", shards);
    json_object_set_new(out, "nodes", nodes);
    json_object_set_new(out, "buckets", bs);
    json_object_set_new(out, "summary", sm);
    json_decref(index);
    free(rows);
    return out;
fail:
    free(rows);
    json_decref(index);
    json_decref(out);
    json_decref(shards);
    json_decref(nodes);
    json_decref(sm);
    json_decref(bs);
    return NULL;
}

/* One node across the shards (ctlmerge.h, status_node). */
static json_t *merge_node(const ctlmerge_t *m)
{
    json_t *out = json_object(), *shards = json_array(), *per = json_array();
    json_t *sm = json_object(), *bs = json_array(), *nd = NULL;
    mrow_t *rows = NULL;
    size_t nrows = 0, cap = 0;
    const char *glob = NULL;
    if (!out || !shards || !per || !sm || !bs)
        goto fail;
    nd = json_pack("{s:O}", "name", json_object_get(m->req, "name"));
    if (!nd)
        goto fail;
    int fallback = 0;
    for (int i = 0; i < m->n; i++) {
        json_t *rep = ok_answer(m, i);
        /* a refusal stays: a shard's not_found says it does not know the node */
        json_array_append(shards, m->rep[i] ? m->rep[i] : json_null());
        json_t *one = rep ? json_object_get(rep, "node") : NULL;
        json_array_append(per, json_is_object(one) ? one : json_null());
        if (!rep)
            continue;
        take_clock(out, rep);
        if (json_is_object(one)) {
            fold_node(nd, one);
            fallback |= json_is_true(json_object_get(one, "fallback"));
        }
        if (collect_rows(&rows, &nrows, &cap, json_object_get(rep, "buckets"), i, "table") < 0)
            goto fail;
        json_t *ssm = json_object_get(rep, "summary");
        static const char *const keys[] = {"buckets", "matched"};
        for (size_t k = 0; k < 2; k++) {
            json_t *v = json_object_get(ssm, keys[k]);
            if (json_is_integer(v))
                json_object_set_new(sm, keys[k],
                                    json_integer(json_integer_value(json_object_get(sm, keys[k])) +
                                                 json_integer_value(v)));
        }
        if (json_is_string(json_object_get(ssm, "bucket")))
            glob = json_string_value(json_object_get(ssm, "bucket"));
    }
    json_object_set_new(nd, "fallback", json_boolean(fallback));
    json_object_set(nd, "shards", per);
    if (page_rows(m, rows, nrows, bs) < 0)
        goto fail;
    json_object_set_new(sm, "shown", json_integer((json_int_t)json_array_size(bs)));
    json_object_set_new(sm, "offset", json_integer(m->offset));
    json_object_set_new(sm, "sort", json_string("table"));
    if (glob)
        json_object_set_new(sm, "bucket", json_string(glob));
    json_object_set_new(out, "node", nd);
    json_object_set_new(out, "buckets", bs);
    json_object_set_new(out, "summary", sm);
    json_object_set_new(out, "shards", shards);
    json_decref(per);
    free(rows);
    return out;
fail:
    free(rows);
    json_decref(nd);
    json_decref(out);
    json_decref(shards);
    json_decref(per);
    json_decref(sm);
    json_decref(bs);
    return NULL;
}

/* The history merged (ctlmerge.h). */
static json_t *merge_history(const ctlmerge_t *m)
{
    json_t *out = json_object(), *shards = json_array(), *bs = json_array();
    if (!out || !shards || !bs) {
        json_decref(out);
        json_decref(shards);
        json_decref(bs);
        return NULL;
    }
    for (int i = 0; i < m->n; i++) {
        json_t *rep = ok_answer(m, i);
        json_array_append(shards, rep ? rep : json_null());
        if (!rep)
            continue;
        static const char *const head[] = {"period", "period_ms"};
        for (int h = 0; h < 2; h++)
            if (!json_object_get(out, head[h]) && json_object_get(rep, head[h]))
                json_object_set(out, head[h], json_object_get(rep, head[h]));
        json_t *j = json_object_get(rep, "judged"), *was = json_object_get(out, "judged");
        if (json_is_integer(j) && (!was || json_integer_value(j) < json_integer_value(was)))
            json_object_set(out, "judged", j);
        size_t k;
        json_t *b;
        json_array_foreach(json_object_get(rep, "buckets"), k, b) {
            json_t *c = json_deep_copy(b);
            if (c && json_object_set_new(c, "shard", json_integer(i)) == 0)
                json_array_append_new(bs, c);
            else
                json_decref(c);
        }
    }
    json_object_set_new(out, "buckets", bs);
    json_object_set_new(out, "shards", shards);
    return out;
}

/* The configured buckets of every shard, one bucket file. */
static json_t *merge_buckets(const ctlmerge_t *m)
{
    json_t *bs = json_array();
    for (int i = 0; bs && i < m->n; i++) {
        json_t *rep = ok_answer(m, i);
        if (rep && json_array_extend(bs, json_object_get(rep, "buckets")) < 0) {
            json_decref(bs);
            return NULL;
        }
    }
    return bs ? json_pack("{s:o}", "buckets", bs) : NULL;
}

json_t *ctlmerge_view(const ctlmerge_t *m)
{
    switch (m->kind) {
    case CTLMERGE_STATUS:
        return merge_status(m);
    case CTLMERGE_HISTORY:
        return merge_history(m);
    case CTLMERGE_BUCKETS:
        return merge_buckets(m);
    case CTLMERGE_NODE:
        return merge_node(m);
    }
    return NULL;
}
