/* test_statuspage.c - Check suite for controller/daemon/statuspage: the status page request read and checked, and the bounded heap's rows equal to a full sort's page for every sort field, offset and limit. */
#include <check.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/rng.h"
#include "controller/daemon/statuspage.h"
#include "tests/testlib.h"

/* The request text s parsed into *pg; returns statuspage_parse()'s code. */
static int parse(const char *s, statuspage_req_t *pg, const char **err)
{
    json_t *j = json_loads(s, 0, NULL);
    ck_assert_ptr_nonnull(j);
    *err = NULL;
    int rc = statuspage_parse(j, pg, err);
    json_decref(j);
    return rc;
}

START_TEST(test_statuspage_parse)
{
    statuspage_req_t pg;
    const char *err;
    ck_assert_int_eq(parse("{}", &pg, &err), 0);
    ck_assert_int_eq(pg.limit, -1);
    ck_assert_int_eq(pg.offset, 0);
    ck_assert_ptr_null(pg.glob);
    ck_assert_int_eq(pg.sort, STATUSPAGE_TABLE);
    ck_assert_int_eq(parse("{\"limit\":null,\"offset\":4,\"sort\":\"queued\"}", &pg, &err), 0);
    ck_assert_int_eq(pg.limit, -1);
    ck_assert_int_eq(pg.offset, 4);
    ck_assert_int_eq(pg.sort, STATUSPAGE_QUEUED);
    ck_assert_str_eq(statuspage_sort_name(pg.sort), "queued");
    ck_assert_str_eq(statuspage_sort_name(STATUSPAGE_TABLE), "table");
    ck_assert_int_eq(parse("{\"limit\":0}", &pg, &err), 0);
    ck_assert_int_eq(pg.limit, 0);
    static const char *const bad[][2] = {
        {"{\"limit\":-1}", "\"limit\" must be an integer >= 0 or null (all)"},
        {"{\"limit\":\"5\"}", "\"limit\" must be an integer >= 0 or null (all)"},
        {"{\"offset\":-2}", "\"offset\" must be an integer >= 0"},
        {"{\"offset\":null}", "\"offset\" must be an integer >= 0"},
        {"{\"bucket\":7}", "\"bucket\" must be a string (a name or a glob)"},
        {"{\"sort\":\"size\"}", "\"sort\" must be one of table, name, reservation, limit, "
                                "demand, served, queued"},
        {"{\"sort\":1}", "\"sort\" must be one of table, name, reservation, limit, demand, "
                         "served, queued"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq(parse(bad[i][0], &pg, &err), -EINVAL);
        ck_assert_str_eq(err, bad[i][1]);
    }
}
END_TEST

typedef struct {
    int b;
    int64_t key;
    char name[8];
} row_t;

static statuspage_sort_t cmp_sort;

/* The order statuspage.h states, for qsort: the reference. */
static int row_cmp(const void *pa, const void *pb)
{
    const row_t *x = pa, *y = pb;
    if (cmp_sort == STATUSPAGE_NAME) {
        int c = strcmp(x->name, y->name);
        if (c)
            return c;
    } else if (cmp_sort != STATUSPAGE_TABLE && x->key != y->key) {
        return x->key > y->key ? -1 : 1;
    }
    return x->b - y->b;
}

/* For random tables (few distinct keys and names: many ties), every sort,
 * offset and limit: the heap's page is the full sort's rows
 * offset..offset + limit. */
START_TEST(test_statuspage_page_is_full_sort)
{
    rng_t rng;
    rng_seed(&rng, 30, 1);
    row_t rows[40], sorted[40];
    for (int round = 0; round < 40; round++) {
        int n = (int)rng_below(&rng, 40) + (round == 0 ? 0 : 1);
        if (round == 0)
            n = 0;
        for (int i = 0; i < n; i++) {
            rows[i].b = i;
            rows[i].key = (int64_t)rng_below(&rng, 5);
            snprintf(rows[i].name, sizeof rows[i].name, "b%u", (unsigned)rng_below(&rng, 7));
        }
        for (int s = 0; s < STATUSPAGE__NSORTS; s++) {
            memcpy(sorted, rows, (size_t)n * sizeof *rows);
            cmp_sort = (statuspage_sort_t)s;
            qsort(sorted, (size_t)n, sizeof *sorted, row_cmp);
            for (int64_t off = 0; off <= n + 1; off += 1 + (off > 3) * 4) {
                for (int64_t lim = -1; lim <= n + 1; lim += 1 + (lim > 3) * 5) {
                    statuspage_req_t pg = {.limit = lim, .offset = off, .sort = cmp_sort};
                    statuspage_t *sp = statuspage_new(&pg, (size_t)n);
                    ck_assert_ptr_nonnull(sp);
                    for (int i = 0; i < n; i++)
                        statuspage_offer(sp, rows[i].b, rows[i].key, rows[i].name);
                    const int *idx;
                    size_t got = statuspage_rows(sp, &idx);
                    size_t want = off >= n ? 0 : (size_t)(n - off);
                    if (lim >= 0 && (size_t)lim < want)
                        want = (size_t)lim;
                    ck_assert_msg(got == want, "n %d sort %d offset %lld limit %lld: %zu rows, "
                                  "not %zu", n, s, (long long)off, (long long)lim, got, want);
                    for (size_t i = 0; i < got; i++)
                        ck_assert_msg(idx[i] == sorted[off + (int64_t)i].b,
                                      "n %d sort %d offset %lld limit %lld: row %zu is %d, not %d",
                                      n, s, (long long)off, (long long)lim, i, idx[i],
                                      sorted[off + (int64_t)i].b);
                    statuspage_destroy(&sp);
                    ck_assert_ptr_null(sp);
                }
            }
        }
    }
    statuspage_destroy(NULL);
}
END_TEST

/* The heap holds offset + limit rows, whatever the table's size. */
START_TEST(test_statuspage_bounded)
{
    statuspage_req_t pg = {.limit = 3, .offset = 2, .sort = STATUSPAGE_SERVED};
    statuspage_t *sp = statuspage_new(&pg, 1000000);
    ck_assert_ptr_nonnull(sp);
    for (int i = 0; i < 1000000; i++)
        statuspage_offer(sp, i, i % 1000, "x");
    const int *idx;
    ck_assert_int_eq(statuspage_rows(sp, &idx), 3);
    /* keys 999 at 999, 1999, ...: the third to fifth of them */
    ck_assert_int_eq(idx[0], 2999);
    ck_assert_int_eq(idx[1], 3999);
    ck_assert_int_eq(idx[2], 4999);
    statuspage_destroy(&sp);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {test_statuspage_parse, test_statuspage_page_is_full_sort,
                                  test_statuspage_bounded};
    return testlib_run_tests("statuspage", tests, sizeof tests / sizeof tests[0]);
}
