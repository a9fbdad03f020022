/* statuspage.c - which bucket rows a status reply shows, in what order: the page request read, the best offset + limit rows kept in a bounded heap (statuspage.h). */
#include "controller/daemon/statuspage.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char *const sort_names[STATUSPAGE__NSORTS] = {"table", "name", "reservation", "limit",
                                                           "demand", "served", "queued"};

/* A row as ranked: its index, its sort key and its name. */
typedef struct {
    int b;
    int64_t key;
    const char *name;
} ranked_t;

struct statuspage {
    statuspage_req_t pg;
    ranked_t *h;    /* max-heap of the best `want` seen so far, the worst at h[0] */
    size_t nh, want;
    int *idx;       /* statuspage_rows()'s answer (want entries) */
};

const char *statuspage_sort_name(statuspage_sort_t sort)
{
    return (unsigned)sort < STATUSPAGE__NSORTS ? sort_names[sort] : "?";
}

int statuspage_parse(const json_t *req, statuspage_req_t *pg, const char **err)
{
    *pg = (statuspage_req_t){.limit = -1};
    json_t *v = json_object_get(req, "limit");
    if (v && !json_is_null(v) && (!json_is_integer(v) || (pg->limit = json_integer_value(v)) < 0)) {
        *err = "\"limit\" must be an integer >= 0 or null (all)";
        return -EINVAL;
    }
    v = json_object_get(req, "offset");
    if (v && (!json_is_integer(v) || (pg->offset = json_integer_value(v)) < 0)) {
        *err = "\"offset\" must be an integer >= 0";
        return -EINVAL;
    }
    v = json_object_get(req, "bucket");
    if (v && !(pg->glob = json_string_value(v))) {
        *err = "\"bucket\" must be a string (a name or a glob)";
        return -EINVAL;
    }
    v = json_object_get(req, "sort");
    if (v) {
        const char *f = json_string_value(v);
        size_t k = 0;
        while (f && k < STATUSPAGE__NSORTS && strcmp(f, sort_names[k]))
            k++;
        if (!f || k == STATUSPAGE__NSORTS) {
            *err = "\"sort\" must be one of table, name, reservation, limit, demand, served, "
                   "queued";
            return -EINVAL;
        }
        pg->sort = (statuspage_sort_t)k;
    }
    return 0;
}

/* Nonzero if x ranks before y (ties: table order). */
static int ranks_before(const ranked_t *x, const ranked_t *y, statuspage_sort_t sort)
{
    if (sort == STATUSPAGE_NAME) {
        int c = strcmp(x->name, y->name);
        if (c)
            return c < 0;
    } else if (sort != STATUSPAGE_TABLE && x->key != y->key)
        return x->key > y->key;
    return x->b < y->b;
}

static void heap_down(ranked_t *h, size_t n, size_t i, statuspage_sort_t sort)
{
    for (;;) {
        size_t w = i, l = 2 * i + 1, r = l + 1;
        if (l < n && ranks_before(&h[w], &h[l], sort))
            w = l;
        if (r < n && ranks_before(&h[w], &h[r], sort))
            w = r;
        if (w == i)
            return;
        ranked_t t = h[i];
        h[i] = h[w];
        h[w] = t;
        i = w;
    }
}

static void heap_up(ranked_t *h, size_t i, statuspage_sort_t sort)
{
    while (i > 0 && ranks_before(&h[(i - 1) / 2], &h[i], sort)) {
        ranked_t t = h[i];
        h[i] = h[(i - 1) / 2];
        h[(i - 1) / 2] = t;
        i = (i - 1) / 2;
    }
}

statuspage_t *statuspage_new(const statuspage_req_t *pg, size_t n)
{
    statuspage_t *sp = calloc(1, sizeof *sp);
    if (!sp)
        return NULL;
    sp->pg = *pg;
    sp->want = n; /* the best offset + limit are kept */
    if (pg->limit >= 0 && (uint64_t)pg->limit < n && (uint64_t)pg->offset < n - (uint64_t)pg->limit)
        sp->want = (size_t)(pg->offset + pg->limit);
    if (sp->want && (!(sp->h = malloc(sp->want * sizeof *sp->h)) ||
                     !(sp->idx = malloc(sp->want * sizeof *sp->idx)))) {
        free(sp->h);
        free(sp);
        return NULL;
    }
    return sp;
}

void statuspage_destroy(statuspage_t **sp)
{
    if (!sp || !*sp)
        return;
    free((*sp)->h);
    free((*sp)->idx);
    free(*sp);
    *sp = NULL;
}

void statuspage_offer(statuspage_t *sp, int index, int64_t key, const char *name)
{
    if (!sp->h)
        return;
    ranked_t x = {index, key, name};
    if (sp->nh < sp->want) {
        sp->h[sp->nh] = x;
        heap_up(sp->h, sp->nh++, sp->pg.sort);
    } else if (ranks_before(&x, &sp->h[0], sp->pg.sort)) {
        sp->h[0] = x;
        heap_down(sp->h, sp->nh, 0, sp->pg.sort);
    }
}

size_t statuspage_rows(statuspage_t *sp, const int **idx)
{
    ranked_t *h = sp->h;
    size_t nh = sp->nh, off = (size_t)sp->pg.offset;
    *idx = NULL;
    /* The heap, worst first, out into rank order. */
    for (size_t n = nh; n > 1; n--) {
        ranked_t t = h[0];
        h[0] = h[n - 1];
        h[n - 1] = t;
        heap_down(h, n - 1, 0, sp->pg.sort);
    }
    sp->nh = 0; /* once per page */
    if (off >= nh)
        return 0;
    for (size_t i = off; i < nh; i++)
        sp->idx[i - off] = h[i].b;
    *idx = sp->idx;
    return nh - off;
}
