/* test_ctlmerge.c - Check suite for controller/ctl/ctlmerge: several controller shards' answers (status, status_node, history, buckets) merged into one view, sorted and paged on the merge. */
#include <check.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "common/shardmap.h"
#include "controller/ctl/ctlmerge.h"
#include "tests/testlib.h"

/* The parsed JSON text s (the test fails if it is not JSON). */
static json_t *J(const char *s)
{
    json_error_t e;
    json_t *j = json_loads(s, 0, &e);
    ck_assert_msg(j != NULL, "bad fixture: %s at %d", e.text, e.position);
    return j;
}

/* A merge of n shards for request text req, each answer added in turn
 * (NULL: none); returns the view, *m the merge (caller destroys both). */
static json_t *merged(const char *req, int n, const char *const *answers, ctlmerge_t **m)
{
    json_t *rq = J(req);
    *m = ctlmerge_new(rq, n);
    json_decref(rq);
    ck_assert_ptr_nonnull(*m);
    for (int i = 0; i < n; i++) {
        json_t *a = answers[i] ? J(answers[i]) : NULL;
        ck_assert_int_eq(ctlmerge_add(*m, i, a), 0);
        json_decref(a);
    }
    json_t *v = ctlmerge_view(*m);
    ck_assert_ptr_nonnull(v);
    return v;
}

/* Member `key` of row i of array `arr` of v, as a string ("" if none). */
static const char *row_str(json_t *v, const char *arr, size_t i, const char *key)
{
    const char *s = json_string_value(json_object_get(json_array_get(json_object_get(v, arr), i), key));
    return s ? s : "";
}

static long long row_int(json_t *v, const char *arr, size_t i, const char *key)
{
    json_t *x = json_object_get(json_array_get(json_object_get(v, arr), i), key);
    return json_is_integer(x) ? (long long)json_integer_value(x) : -1;
}

#define CLOCK "\"v\":1,\"ok\":true,\"period\":12,\"interval\":2,\"intervals\":5," \
              "\"period_ms\":1000,\"elapsed_ms\":450"

/* Shard 0: red (limit 600, served 14000) and blue (no limit, served 0);
 * n1 up, n2 down.  Shard 1: green (served 20000); n2 up, n1 up. */
static const char *const status2[] = {
    "{" CLOCK ",\"nodes\":[{\"name\":\"n1\",\"state\":\"up\",\"last_report_ms\":120,"
    "\"capacity\":50000,\"buckets\":2},{\"name\":\"n2\",\"state\":\"down\","
    "\"last_report_ms\":null,\"capacity\":40000,\"buckets\":0}],"
    "\"buckets\":[{\"name\":\"red\",\"limit\":600,\"served\":14000},"
    "{\"name\":\"blue\",\"limit\":null,\"served\":0}],"
    "\"summary\":{\"buckets\":2,\"matched\":2,\"served\":14000,\"bucket\":\"*\"}}",
    "{" CLOCK ",\"nodes\":[{\"name\":\"n2\",\"state\":\"up\",\"last_report_ms\":300,"
    "\"capacity\":30000,\"buckets\":1,\"fallbacks\":1},{\"name\":\"n1\",\"state\":\"up\","
    "\"last_report_ms\":100,\"capacity\":60000,\"buckets\":1}],"
    "\"buckets\":[{\"name\":\"green\",\"limit\":900,\"served\":20000}],"
    "\"summary\":{\"buckets\":1,\"matched\":1,\"served\":20000}}"};

START_TEST(test_ctlmerge_bad_arguments)
{
    json_t *r = J("{\"cmd\":\"set\"}");
    errno = 0;
    ck_assert_ptr_null(ctlmerge_new(r, 2));
    ck_assert_int_eq(errno, EINVAL);
    json_decref(r);
    r = J("{\"cmd\":\"status\"}");
    ck_assert_ptr_null(ctlmerge_new(r, 0));
    ck_assert_ptr_null(ctlmerge_new(r, SHARDMAP_MAX + 1));
    json_decref(r);
    r = J("{\"cmd\":\"status\",\"offset\":-1}");
    ck_assert_ptr_null(ctlmerge_new(r, 2));
    json_decref(r);
    r = J("{\"cmd\":\"status_node\"}"); /* no name */
    ck_assert_ptr_null(ctlmerge_new(r, 2));
    json_decref(r);
    r = J("{\"cmd\":\"history\"}");
    ctlmerge_t *m = ctlmerge_new(r, 2);
    ck_assert_ptr_nonnull(m);
    ck_assert_int_eq(ctlmerge_add(m, 2, NULL), -EINVAL);
    ck_assert_int_eq(ctlmerge_add(m, -1, NULL), -EINVAL);
    ck_assert_int_eq(ctlmerge_add(m, 1, r), 0);
    ck_assert_int_eq(ctlmerge_add(m, 1, r), -EINVAL); /* twice */
    ck_assert_int_eq(ctlmerge_answered(m), 0);        /* no "ok" */
    ctlmerge_destroy(&m);
    ck_assert_ptr_null(m);
    ctlmerge_destroy(&m); /* NULL accepted */
    ctlmerge_destroy(NULL);
    json_decref(r);
}
END_TEST

/* Each shard is asked for offset + limit rows and no offset; other
 * commands go as they are. */
START_TEST(test_ctlmerge_shard_request_pages)
{
    json_t *r = J("{\"v\":1,\"cmd\":\"status\",\"limit\":2,\"offset\":3,\"sort\":\"served\"}");
    ctlmerge_t *m = ctlmerge_new(r, 2);
    json_t *s = ctlmerge_shard_request(m);
    ck_assert_int_eq(json_integer_value(json_object_get(s, "limit")), 5);
    ck_assert_ptr_null(json_object_get(s, "offset"));
    ck_assert_str_eq(json_string_value(json_object_get(s, "sort")), "served");
    ck_assert_int_eq(json_integer_value(json_object_get(r, "limit")), 2); /* req untouched */
    json_decref(s);
    ctlmerge_destroy(&m);
    json_decref(r);
    r = J("{\"v\":1,\"cmd\":\"status\",\"limit\":null,\"offset\":3}");
    m = ctlmerge_new(r, 2);
    s = ctlmerge_shard_request(m);
    ck_assert(json_is_null(json_object_get(s, "limit")));
    ck_assert_ptr_null(json_object_get(s, "offset"));
    json_decref(s);
    ctlmerge_destroy(&m);
    json_decref(r);
    r = J("{\"v\":1,\"cmd\":\"history\",\"periods\":4,\"offset\":3}");
    m = ctlmerge_new(r, 2);
    s = ctlmerge_shard_request(m);
    ck_assert(json_equal(s, r));
    json_decref(s);
    ctlmerge_destroy(&m);
    json_decref(r);
}
END_TEST

/* The status: nodes once with each shard's row, the rows in the
 * controller's order across shards and paged on the merge, sums. */
START_TEST(test_ctlmerge_status_sorted_paged)
{
    ctlmerge_t *m;
    json_t *v = merged("{\"cmd\":\"status\",\"sort\":\"served\",\"limit\":2}", 2, status2, &m);
    ck_assert_int_eq(ctlmerge_answered(m), 2);
    ck_assert_int_eq(ctlmerge_kind(m), CTLMERGE_STATUS);
    ck_assert_int_eq(json_array_size(json_object_get(v, "buckets")), 2);
    ck_assert_str_eq(row_str(v, "buckets", 0, "name"), "green");
    ck_assert_int_eq(row_int(v, "buckets", 0, "shard"), 1);
    ck_assert_str_eq(row_str(v, "buckets", 1, "name"), "red");
    ck_assert_int_eq(row_int(v, "buckets", 1, "shard"), 0);
    ck_assert_int_eq(json_integer_value(json_object_get(v, "period")), 12);
    json_t *nodes = json_object_get(v, "nodes");
    ck_assert_int_eq(json_array_size(nodes), 2);
    ck_assert_str_eq(row_str(v, "nodes", 0, "name"), "n1");
    ck_assert_int_eq(row_int(v, "nodes", 0, "capacity"), 50000);      /* the smallest */
    ck_assert_int_eq(row_int(v, "nodes", 0, "buckets"), 3);           /* summed */
    ck_assert_int_eq(row_int(v, "nodes", 0, "last_report_ms"), 120);  /* the oldest */
    ck_assert_int_eq(row_int(v, "nodes", 1, "fallbacks"), 1);
    json_t *per = json_object_get(json_array_get(nodes, 1), "shards");
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(per, 0), "state")), "down");
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(per, 1), "state")), "up");
    json_t *sm = json_object_get(v, "summary");
    ck_assert_int_eq(json_integer_value(json_object_get(sm, "served")), 34000);
    ck_assert_int_eq(json_integer_value(json_object_get(sm, "buckets")), 3);
    ck_assert_int_eq(json_integer_value(json_object_get(sm, "shown")), 2);
    ck_assert_str_eq(json_string_value(json_object_get(sm, "sort")), "served");
    ck_assert_str_eq(json_string_value(json_object_get(sm, "bucket")), "*");
    ck_assert_int_eq(json_array_size(json_object_get(v, "shards")), 2);
    json_decref(v);
    ctlmerge_destroy(&m);

    /* --offset 1 --limit 1 by name: green, then red */
    v = merged("{\"cmd\":\"status\",\"sort\":\"name\",\"limit\":1,\"offset\":1}", 2, status2, &m);
    ck_assert_int_eq(json_array_size(json_object_get(v, "buckets")), 1);
    ck_assert_str_eq(row_str(v, "buckets", 0, "name"), "green");
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(v, "summary"), "offset")), 1);
    json_decref(v);
    ctlmerge_destroy(&m);

    /* by limit: no limit above every limit */
    v = merged("{\"cmd\":\"status\",\"sort\":\"limit\"}", 2, status2, &m);
    ck_assert_str_eq(row_str(v, "buckets", 0, "name"), "blue");
    ck_assert_str_eq(row_str(v, "buckets", 1, "name"), "green");
    ck_assert_str_eq(row_str(v, "buckets", 2, "name"), "red");
    json_decref(v);
    ctlmerge_destroy(&m);

    /* table order: shard by shard, each in its own order */
    v = merged("{\"cmd\":\"status\"}", 2, status2, &m);
    ck_assert_str_eq(row_str(v, "buckets", 0, "name"), "red");
    ck_assert_str_eq(row_str(v, "buckets", 1, "name"), "blue");
    ck_assert_str_eq(row_str(v, "buckets", 2, "name"), "green");
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(v, "summary"), "sort")),
                     "table");
    json_decref(v);
    ctlmerge_destroy(&m);
}
END_TEST

/* A shard without an answer, or with a refusal: null in "shards", the
 * others merged. */
START_TEST(test_ctlmerge_status_missing_shard)
{
    const char *const ans[] = {NULL, status2[1],
                               "{\"v\":1,\"ok\":false,\"error\":\"not_leader\"}"};
    ctlmerge_t *m;
    json_t *v = merged("{\"cmd\":\"status\"}", 3, ans, &m);
    ck_assert_int_eq(ctlmerge_answered(m), 1);
    json_t *sh = json_object_get(v, "shards");
    ck_assert_int_eq(json_array_size(sh), 3);
    ck_assert(json_is_null(json_array_get(sh, 0)));
    ck_assert(json_is_object(json_array_get(sh, 1)));
    ck_assert(json_is_null(json_array_get(sh, 2)));
    ck_assert_int_eq(json_array_size(json_object_get(v, "buckets")), 1);
    ck_assert_int_eq(row_int(v, "buckets", 0, "shard"), 1);
    json_t *per = json_object_get(json_array_get(json_object_get(v, "nodes"), 0), "shards");
    ck_assert_int_eq(json_array_size(per), 3);
    ck_assert(json_is_null(json_array_get(per, 0)));
    json_decref(v);
    ctlmerge_destroy(&m);
}
END_TEST

/* History: judged the smallest, every shard's buckets with their shard;
 * buckets: one bucket file. */
START_TEST(test_ctlmerge_history_buckets)
{
    const char *const h[] = {
        "{\"v\":1,\"ok\":true,\"period\":12,\"period_ms\":1000,\"judged\":4,"
        "\"buckets\":[{\"name\":\"red\",\"periods\":[]}]}",
        "{\"v\":1,\"ok\":true,\"period\":12,\"period_ms\":1000,\"judged\":3,"
        "\"buckets\":[{\"name\":\"green\",\"periods\":[]}]}"};
    ctlmerge_t *m;
    json_t *v = merged("{\"cmd\":\"history\",\"periods\":5}", 2, h, &m);
    ck_assert_int_eq(json_integer_value(json_object_get(v, "judged")), 3);
    ck_assert_int_eq(json_integer_value(json_object_get(v, "period")), 12);
    ck_assert_str_eq(row_str(v, "buckets", 1, "name"), "green");
    ck_assert_int_eq(row_int(v, "buckets", 1, "shard"), 1);
    ck_assert_int_eq(json_array_size(json_object_get(v, "shards")), 2);
    json_decref(v);
    ctlmerge_destroy(&m);

    const char *const b[] = {"{\"v\":1,\"ok\":true,\"buckets\":[{\"name\":\"red\"}]}", NULL,
                             "{\"v\":1,\"ok\":true,\"buckets\":[{\"name\":\"blue\"}]}"};
    v = merged("{\"cmd\":\"buckets\"}", 3, b, &m);
    ck_assert_int_eq(json_object_size(v), 1);
    ck_assert_int_eq(json_array_size(json_object_get(v, "buckets")), 2);
    ck_assert_str_eq(row_str(v, "buckets", 1, "name"), "blue");
    ck_assert_ptr_null(json_object_get(json_array_get(json_object_get(v, "buckets"), 1), "shard"));
    json_decref(v);
    ctlmerge_destroy(&m);
}
END_TEST

/* status --node over shards: the node's row in each shard (null where a
 * shard does not know it, its not_found kept), its buckets of every shard
 * with their shard, in shard then table order, paged on the merge. */
START_TEST(test_ctlmerge_node_across_shards)
{
    const char *const ans[] = {
        "{" CLOCK ",\"node\":{\"name\":\"n1\",\"state\":\"up\",\"last_report_ms\":120,"
        "\"capacity\":50000,\"buckets\":2,\"fallback\":false},\"buckets\":[{\"name\":\"red\","
        "\"reported\":true,\"served\":700,\"queued\":3},{\"name\":\"blue\",\"reported\":false,"
        "\"served\":0,\"queued\":0}],\"summary\":{\"buckets\":2,\"matched\":2,\"shown\":2,"
        "\"offset\":0,\"sort\":\"table\",\"bucket\":\"*e*\"}}",
        "{\"v\":1,\"ok\":false,\"error\":\"not_found\",\"message\":\"no node 'n1'\"}",
        NULL,
        "{" CLOCK ",\"node\":{\"name\":\"n1\",\"state\":\"up\",\"last_report_ms\":400,"
        "\"capacity\":30000,\"buckets\":1,\"fallback\":true},\"buckets\":[{\"name\":\"green\","
        "\"reported\":true,\"served\":900,\"queued\":1}],\"summary\":{\"buckets\":1,"
        "\"matched\":1,\"shown\":1,\"offset\":0,\"sort\":\"table\"}}"};
    ctlmerge_t *m;
    json_t *rq = J("{\"cmd\":\"status_node\",\"name\":\"n1\",\"limit\":2,\"offset\":1}");
    m = ctlmerge_new(rq, 4);
    json_t *s = ctlmerge_shard_request(m);
    ck_assert_int_eq(json_integer_value(json_object_get(s, "limit")), 3);
    ck_assert_ptr_null(json_object_get(s, "offset"));
    ck_assert_str_eq(json_string_value(json_object_get(s, "name")), "n1");
    json_decref(s);
    ctlmerge_destroy(&m);
    json_decref(rq);

    json_t *v = merged("{\"cmd\":\"status_node\",\"name\":\"n1\",\"limit\":2,\"offset\":1}", 4,
                       ans, &m);
    ck_assert_int_eq(ctlmerge_kind(m), CTLMERGE_NODE);
    ck_assert_int_eq(ctlmerge_answered(m), 2);
    ck_assert_int_eq(json_integer_value(json_object_get(v, "period")), 12);
    json_t *nd = json_object_get(v, "node");
    ck_assert_str_eq(json_string_value(json_object_get(nd, "name")), "n1");
    ck_assert_int_eq(json_integer_value(json_object_get(nd, "capacity")), 30000);
    ck_assert_int_eq(json_integer_value(json_object_get(nd, "buckets")), 3);
    ck_assert_int_eq(json_integer_value(json_object_get(nd, "last_report_ms")), 400);
    ck_assert(json_is_true(json_object_get(nd, "fallback")));
    json_t *per = json_object_get(nd, "shards");
    ck_assert_int_eq(json_array_size(per), 4);
    ck_assert(json_is_object(json_array_get(per, 0)));
    ck_assert(json_is_null(json_array_get(per, 1)));
    ck_assert(json_is_null(json_array_get(per, 2)));
    ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(per, 3), "capacity")), 30000);
    json_t *sh = json_object_get(v, "shards");
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(sh, 1), "error")),
                     "not_found");
    ck_assert(json_is_null(json_array_get(sh, 2)));
    /* rows 1..2 of red(0), blue(0), green(3) */
    ck_assert_int_eq(json_array_size(json_object_get(v, "buckets")), 2);
    ck_assert_str_eq(row_str(v, "buckets", 0, "name"), "blue");
    ck_assert_int_eq(row_int(v, "buckets", 0, "shard"), 0);
    ck_assert_str_eq(row_str(v, "buckets", 1, "name"), "green");
    ck_assert_int_eq(row_int(v, "buckets", 1, "shard"), 3);
    json_t *sm = json_object_get(v, "summary");
    ck_assert_int_eq(json_integer_value(json_object_get(sm, "buckets")), 3);
    ck_assert_int_eq(json_integer_value(json_object_get(sm, "matched")), 3);
    ck_assert_int_eq(json_integer_value(json_object_get(sm, "shown")), 2);
    ck_assert_int_eq(json_integer_value(json_object_get(sm, "offset")), 1);
    ck_assert_str_eq(json_string_value(json_object_get(sm, "sort")), "table");
    ck_assert_str_eq(json_string_value(json_object_get(sm, "bucket")), "*e*");
    json_decref(v);
    ctlmerge_destroy(&m);

    /* no shard knows it: no node row anywhere, nothing answered */
    const char *const none[] = {ans[1], ans[1]};
    v = merged("{\"cmd\":\"status_node\",\"name\":\"n1\"}", 2, none, &m);
    ck_assert_int_eq(ctlmerge_answered(m), 0);
    ck_assert_int_eq(json_array_size(json_object_get(v, "buckets")), 0);
    json_decref(v);
    ctlmerge_destroy(&m);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {test_ctlmerge_bad_arguments, test_ctlmerge_shard_request_pages,
                                  test_ctlmerge_status_sorted_paged,
                                  test_ctlmerge_status_missing_shard,
                                  test_ctlmerge_history_buckets,
                                  test_ctlmerge_node_across_shards};
    return testlib_run_tests("ctlmerge", tests, sizeof tests / sizeof tests[0]);
}
