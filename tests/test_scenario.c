/* test_scenario.c - Check suite for workloads/scenario (and its Zipf helpers): valid scenarios expand as documented, malformed ones fail with FILE:LINE:COL errors. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "workloads/scenario.h"
#include "tests/scenario_fixtures.h"
#include "tests/testlib.h"

#define SERVERS \
    "\"servers\": [{\"name\": \"s1\", \"address\": \"127.0.0.1:7001\", \"backend\": " \
    "\"memcached://127.0.0.1:8001\"}, {\"name\": \"s2\", \"address\": \"127.0.0.1:7002\"}, " \
    "{\"name\": \"s3\", \"address\": \"localhost:7003\"}, {\"name\": \"s4\", \"address\": " \
    "\"127.0.0.1:7004\"}]"

START_TEST(test_scenario_minimal_defaults)
{
    scenario_t *s = parse_ok("{\"duration\": 2, " SERVERS ", \"buckets\": [{\"name\": \"a\"}]}");
    ck_assert_double_eq(s->duration, 2);
    ck_assert_double_eq(s->period, 1);
    ck_assert_int_eq(s->intervals, 5);
    ck_assert_double_eq_tol(s->get_ratio, 0.5, 1e-12);
    ck_assert_uint_eq(s->value_size, 4096);
    ck_assert_uint_eq(s->preload, 10000);
    ck_assert_uint_eq(s->keys, 10000);
    ck_assert_uint_eq(s->nservers, 4);
    ck_assert_str_eq(s->servers[0].host, "127.0.0.1");
    ck_assert_int_eq(s->servers[0].port, 7001);
    ck_assert_int_eq(s->servers[0].backend_port, 8001);
    ck_assert_int_eq(s->servers[1].backend_port, 7002);
    ck_assert_str_eq(s->servers[2].host, "localhost");
    ck_assert_uint_eq(s->nbuckets, 1);
    const scenario_bucket_t *b = &s->buckets[0];
    ck_assert_double_eq(b->reservation, 0);
    ck_assert(b->limit == SCENARIO_NO_LIMIT);
    ck_assert_int_eq(b->outstanding, 5);
    ck_assert_uint_eq(b->nphases, 1);
    ck_assert_int_eq(b->phases[0].n, 4); /* no placement: every server */
    ck_assert_int_eq(b->max_active, 4);
    scenario_destroy(&s);
    ck_assert_ptr_null(s);
    scenario_destroy(&s);
    scenario_destroy(NULL);
}
END_TEST

START_TEST(test_scenario_exp3_placement_and_percent_rates)
{
    scenario_t *s = parse_ok(
        "{\"duration\": 4, \"capacity\": 20000, \"workload\": {\"outstanding\": 3},\n" SERVERS
        ",\n \"buckets\": [\n"
        "  {\"name\": \"b1\", \"reservation\": \"60%\", \"limit\": \"120%\", \"servers\": [\"s1\"]},\n"
        "  {\"name\": \"b2\", \"reservation\": 12000, \"limit\": null, \"servers\": [\"s2\", \"s1\"]},\n"
        "  {\"name\": \"b3\", \"servers\": [\"s1\", \"s2\", \"s3\"], \"outstanding\": 7}]}");
    ck_assert_double_eq_tol(s->buckets[0].reservation, 12000, 1e-9);
    ck_assert_double_eq_tol(s->buckets[0].limit, 24000, 1e-9);
    ck_assert(s->buckets[1].limit == SCENARIO_NO_LIMIT);
    ck_assert_int_eq(s->buckets[0].outstanding, 3);
    ck_assert_int_eq(s->buckets[2].outstanding, 7);
    /* Server lists come out sorted by server index. */
    ck_assert_int_eq(s->buckets[1].phases[0].n, 2);
    ck_assert_int_eq(s->buckets[1].phases[0].servers[0], 0);
    ck_assert_int_eq(s->buckets[1].phases[0].servers[1], 1);
    ck_assert_int_eq(s->buckets[2].max_active, 3);
    scenario_destroy(&s);
}
END_TEST

START_TEST(test_scenario_changes_and_phase_lookup)
{
    scenario_t *s = parse_ok(
        "{\"duration\": 10, " SERVERS ", \"buckets\": [{\"name\": \"m\", \"servers\": [\"s1\"],"
        " \"changes\": [{\"at\": 2.5, \"servers\": [\"s3\", \"s4\"]}, {\"at\": 7, \"active\": 3}]},"
        " {\"name\": \"r\", \"active\": [2, 3], \"random_changes\": 5}]}");
    const scenario_bucket_t *m = &s->buckets[0];
    ck_assert_uint_eq(m->nphases, 3);
    ck_assert_int_eq(scenario_phase_at(m, 0)->servers[0], 0);
    ck_assert_int_eq(scenario_phase_at(m, 2.49)->n, 1);
    ck_assert_int_eq(scenario_phase_at(m, 2.5)->n, 2);
    ck_assert_int_eq(scenario_phase_at(m, 2.5)->servers[0], 2);
    ck_assert_int_eq(scenario_phase_at(m, 9.9)->n, 3);
    ck_assert_double_eq(scenario_next_change(m, 0), 2.5);
    ck_assert_double_eq(scenario_next_change(m, 2.5), 7);
    ck_assert(isinf(scenario_next_change(m, 7)));
    ck_assert_int_eq(m->max_active, 3);
    const scenario_bucket_t *r = &s->buckets[1];
    ck_assert_uint_ge(r->nphases, 2);
    ck_assert_uint_le(r->nphases, 6);
    for (size_t i = 0; i < r->nphases; i++) {
        ck_assert(r->phases[i].n >= 2 && r->phases[i].n <= 3);
        ck_assert(r->phases[i].at >= 0 && r->phases[i].at < 10);
        if (i)
            ck_assert(r->phases[i].at > r->phases[i - 1].at);
        for (int j = 1; j < r->phases[i].n; j++)
            ck_assert_int_lt(r->phases[i].servers[j - 1], r->phases[i].servers[j]);
    }
    scenario_destroy(&s);
}
END_TEST

START_TEST(test_scenario_generate_zipf)
{
    const char *text = "{\"duration\": 4, \"capacity\": 1000, " SERVERS
                       ", \"generate\": {\"count\": 200, \"prefix\": \"z\", \"reserved\": 0.75,"
                       " \"zipf\": 0.5, \"limit_ratio\": 2, \"active\": [2, 4],"
                       " \"random_changes\": 5, \"outstanding\": 1}}";
    scenario_t *s = parse_ok(text);
    ck_assert_uint_eq(s->nbuckets, 200);
    ck_assert_str_eq(s->buckets[0].name, "z1");
    ck_assert_str_eq(s->buckets[199].name, "z200");
    double sum = 0;
    for (size_t i = 0; i < s->nbuckets; i++) {
        const scenario_bucket_t *b = &s->buckets[i];
        sum += b->reservation;
        if (i)
            ck_assert(b->reservation <= s->buckets[i - 1].reservation);
        ck_assert_double_eq_tol(b->limit, ceil(2 * b->reservation), 1e-9);
        ck_assert_int_eq(b->outstanding, 1);
        ck_assert(b->max_active >= 2 && b->max_active <= 4);
    }
    ck_assert(sum <= 3000 && sum > 3000 - 200);
    /* w1 / w200 = sqrt(200) = 14.1 for s = 0.5, before rounding down */
    double ratio = s->buckets[0].reservation / s->buckets[199].reservation;
    ck_assert_msg(ratio > 13 && ratio < 17, "ratio %g", ratio); /* floors of 111.x and 7.9 */
    /* The same seed expands the same way. */
    scenario_t *again = parse_ok(text);
    for (size_t i = 0; i < s->nbuckets; i++) {
        ck_assert_uint_eq(s->buckets[i].nphases, again->buckets[i].nphases);
        ck_assert_double_eq(s->buckets[i].phases[s->buckets[i].nphases - 1].at,
                            again->buckets[i].phases[again->buckets[i].nphases - 1].at);
    }
    scenario_destroy(&again);
    scenario_opts_t o = SCENARIO_OPTS_DEFAULT;
    o.seed = 99;
    jsonloc_err_t err;
    ck_assert_int_eq(scenario_parse(text, strlen(text), NULL, &o, &again, &err), 0);
    int differ = 0;
    for (size_t i = 0; i < s->nbuckets; i++)
        differ |= s->buckets[i].phases[1].at != again->buckets[i].phases[1].at;
    ck_assert(differ);
    scenario_destroy(&again);
    scenario_destroy(&s);
    /* outstanding_max: concurrency follows the reservation, at least 1. */
    const char *conc = "{\"duration\": 4, \"capacity\": 1000, " SERVERS
                       ", \"generate\": {\"count\": 100, \"reserved\": 0.5, \"zipf\": 1,"
                       " \"outstanding_max\": 8}}";
    s = parse_ok(conc);
    ck_assert_int_eq(s->buckets[0].outstanding, 8);
    ck_assert_int_eq(s->buckets[1].outstanding, 4);
    ck_assert_int_eq(s->buckets[2].outstanding, 3);
    ck_assert_int_eq(s->buckets[99].outstanding, 1);
    scenario_destroy(&s);
}
END_TEST

START_TEST(test_scenario_overrides)
{
    const char *text = "{\"duration\": 9, \"workload\": {\"preload\": 500}, " SERVERS
                       ", \"buckets\": [{\"name\": \"a\", \"reservation\": \"50%\"}]}";
    scenario_opts_t o = {.capacity = 3000, .duration = 1.5, .preload = 40, .seed = -1};
    scenario_t *s = NULL;
    jsonloc_err_t err;
    ck_assert_int_eq(scenario_parse(text, strlen(text), "x", &o, &s, &err), 0);
    ck_assert_double_eq(s->duration, 1.5);
    ck_assert_uint_eq(s->preload, 40);
    ck_assert_double_eq_tol(s->buckets[0].reservation, 1500, 1e-9);
    scenario_destroy(&s);
    /* A shorter --duration drops the changes after its end. */
    const char *moves = "{\"duration\": 9, " SERVERS ", \"buckets\": [{\"name\": \"a\", "
                        "\"changes\": [{\"at\": 1, \"active\": 1}, {\"at\": 8, \"active\": 2}]}]}";
    ck_assert_int_eq(scenario_parse(moves, strlen(moves), "x", &o, &s, &err), 0);
    ck_assert_uint_eq(s->buckets[0].nphases, 2);
    scenario_destroy(&s);
}
END_TEST

/* One malformed scenario per row: where the error must point and a phrase
 * it must contain. */
static const struct {
    const char *text;
    int line, col;
    const char *phrase;
} bad[] = {
    /* Syntax errors carry jansson's position: the offending token's last
     * character (end of text: the column before it). */
    {"{\"duration\": 1,\n \"servers\": [] \"buckets\": []}", 2, 24,
     "'}' expected near '\"buckets\"'"},
    {"{\"duration\": 1, \"servrs\": []}", 1, 27, "servrs: unknown key \"servrs\""},
    {"{\"duration\": \"long\"}", 1, 14, "duration must be a number"},
    {"{\"duration\": 0, " SERVERS "}", 1, 14, "duration must be > 0"},
    {"{\"period\": 1}", 1, 1, "without a \"duration\""},
    {"{\"duration\": 1, \"servers\": []}", 1, 28, "servers must not be empty"},
    {"{\"duration\": 1, \"servers\": [{\"name\": \"s1\", \"address\": \"nohost\"}]}", 1, 55,
     "HOST:PORT"},
    {"{\"duration\": 1, \"servers\": [{\"name\": \"s1\", \"address\": \"h:99999\"}]}", 1, 55,
     "HOST:PORT"},
    /* An empty server list only before an explicit change. */
    {"{\"duration\": 1, " SERVERS ", \"buckets\": [{\"name\": \"b\", \"servers\": []}]}", 1, 288,
     "servers must not be empty"},
    {"{\"duration\": 1, \"servers\": [{\"name\": \"s1\", \"address\": \"h:1\"}, {\"name\": \"s1\", "
     "\"address\": \"h:2\"}]}", 1, 72, "duplicate server name"},
    {"{\"duration\": 1, " SERVERS "}", 1, 1, "without buckets"},
    {"{\"duration\": 1, " SERVERS ",\n\"buckets\": [{\"name\": \"a:b\"}]}", 2, 22,
     "buckets[0].name: bucket name \"a:b\" may not contain ':'"},
    {"{\"duration\": 1, " SERVERS ",\n\"buckets\": [{\"name\": \"a\"}, {\"name\": \"a\"}]}", 2,
     37, "duplicate bucket name \"a\""},
    {"{\"duration\": 1, " SERVERS ",\n\"buckets\": [{\"name\": \"a\", \"servers\": [\"s9\"]}]}",
     2, 39, "unknown server \"s9\""},
    {"{\"duration\": 1, " SERVERS ",\n\"buckets\": [{\"name\": \"a\", \"reservation\": 50, "
     "\"limit\": 10}]}", 2, 55, "buckets[0].limit: limit (10 IOs/s) is below the reservation"},
    /* Rates --print-buckets could not write: over common/bucketfile's maximum. */
    {"{\"duration\": 1, \"capacity\": 1e12, " SERVERS ",\n\"buckets\": [{\"name\": \"a\", "
     "\"reservation\": \"200%\"}]}", 2, 13,
     "buckets[0]: reservation (2000000000000 IOs/s) is above the bucket file's maximum"},
    {"{\"duration\": 1, \"capacity\": 1e12, " SERVERS ",\n\"buckets\": [{\"name\": \"a\", "
     "\"reservation\": 1, \"limit\": \"300%\"}]}", 2, 54,
     "buckets[0].limit: limit (3000000000000 IOs/s) is above the bucket file's maximum"},
    {"{\"duration\": 1, " SERVERS ",\n\"buckets\": [{\"name\": \"a\", \"reservation\": \"60%\"}]}",
     2, 42, "capacity is unknown"},
    {"{\"duration\": 1, \"capacity\": 10, " SERVERS ",\n\"buckets\": [{\"name\": \"a\", "
     "\"reservation\": \"lots\"}]}", 2, 42, "\"N%\""},
    {"{\"duration\": 1, " SERVERS ",\n\"buckets\": [{\"name\": \"a\", \"limt\": 5}]}", 2, 35,
     "buckets[0].limt: unknown key \"limt\" in a bucket"},
    {"{\"duration\": 5, " SERVERS ",\n\"buckets\": [{\"name\": \"a\", \"changes\": [{\"at\": 3, "
     "\"active\": 1}, {\"at\": 2, \"active\": 2}]}]}", 2, 70,
     "buckets[0].changes[1].at: demand changes must be in increasing time order"},
    {"{\"duration\": 5, " SERVERS ",\n\"buckets\": [{\"name\": \"a\", \"changes\": [{\"at\": 5, "
     "\"active\": 1}]}]}", 2, 46, "not before the end"},
    {"{\"duration\": 5, " SERVERS ",\n\"buckets\": [{\"name\": \"a\", \"active\": [3, 9]}]}", 2, 37, "active range"},
    {"{\"duration\": 5, " SERVERS ",\n\"buckets\": [{\"name\": \"a\", \"outstanding\": 2.5}]}",
     2, 42, "outstanding must be an integer"},
    {"{\"duration\": 5, " SERVERS ",\n\"generate\": {\"count\": 3, \"reserved\": 0.5}}", 2, 38,
     "capacity is unknown"},
    {"{\"duration\": 5, " SERVERS ",\n\"generate\": {\"reserved\": 0.5}}", 2, 13,
     "generate: generate without a \"count\""},
    {"{\"duration\": 5, " SERVERS ",\n\"workload\": {\"get_ratio\": 1.5}}", 2, 27,
     "get_ratio must be between 0 and 1"},
    {"[1, 2]", 1, 1, "a scenario must be an object, not an array"},
    {"{\"duration\": 1, \"backend\": {\"window\": \"big\"}}", 1, 39,
     "backend.window must be a number or \"auto\""},
    {"{\"duration\": 1, \"backend\": {\"windw\": 2}}", 1, 38, "unknown key \"windw\""},
    {"{\"duration\": 1, \"servers\": [{\"name\": \"s\", \"address\": \"h:1\", \"speed\": "
     "[{\"from_period\": 3, \"factor\": 0.5}, {\"from_period\": 3, \"factor\": 1}]}]}", 1, 106,
     "speed steps must be in increasing period order"},
    {"{\"duration\": 1, \"servers\": [{\"name\": \"s\", \"address\": \"h:1\", \"speed\": "
     "[{\"factor\": 0}]}]}", 1, 82, "factor must be > 0"},
    {"{\"duration\": 1, " SERVERS ",\n\"buckets\": [{\"name\": \"a\", \"set\": [{\"period\": 1, "
     "\"reservation\": 5, \"limit\": 2}]}]}", 2, 76, "limit (2 IOs/s) is below the reservation"},
    {"{\"duration\": 1, " SERVERS ",\n\"buckets\": [{\"name\": \"a\", \"set\": [{\"reservation\": 5}]}]}",
     2, 35, "set without \"period\""},
    {"{\"duration\": 1, \"duration\": 2}", 1, 26, "duplicate object key"},
    {"{\"duration\": 1,\n  \"x\": \"\\q\"}", 2, 10, "invalid escape"},
    {"{\"duration\": 1", 1, 14, "'}' expected near end of file"},
    {"", 1, 0, "unexpected token near end of file"},
    /* true, false and null are shared values in jansson: positions still
     * come from the path; columns count characters, not bytes. */
    {"{\"duration\": 5, " SERVERS ",\n\"buckets\": [{\"name\": \"\xc3\xa4\", \"limit\": null},"
     " {\"name\": \"b\", \"limit\": null, \"outstanding\": null}]}", 2, 87,
     "buckets[1].outstanding: outstanding must be a number, not null"},
};

/* bqos-sim's model keys: the backend, a server's speed steps, the round trip. */
START_TEST(test_scenario_sim_model_keys)
{
    scenario_t *s = parse_ok("{\"duration\": 2, " SERVERS ", \"buckets\": [{\"name\": \"a\"}]}");
    ck_assert_int_eq(s->backend_window, 0);
    ck_assert_double_eq(s->service_cv, -1);
    ck_assert_double_eq(s->rtt_ms, 0);
    ck_assert_uint_eq(s->servers[0].nspeed, 0);
    scenario_destroy(&s);
    s = parse_ok("{\"duration\": 2, \"workload\": {\"rtt_ms\": 0.25}, \"backend\": "
                 "{\"window\": \"auto\", \"parallel\": 8, \"service_cv\": 0.3}, \"servers\": "
                 "[{\"name\": \"s1\", \"address\": \"h:1\", \"speed\": [{\"from_period\": 2, "
                 "\"factor\": 0.6}, {\"from_period\": 4, \"factor\": 1}]}], "
                 "\"buckets\": [{\"name\": \"a\"}]}");
    ck_assert_int_eq(s->backend_window, SCENARIO_WINDOW_AUTO);
    ck_assert_int_eq(s->backend_parallel, 8);
    ck_assert_double_eq_tol(s->service_cv, 0.3, 1e-12);
    ck_assert_double_eq_tol(s->rtt_ms, 0.25, 1e-12);
    ck_assert_uint_eq(s->servers[0].nspeed, 2);
    ck_assert_int_eq(s->servers[0].speed[0].from_period, 2);
    ck_assert_double_eq_tol(s->servers[0].speed[0].factor, 0.6, 1e-12);
    ck_assert_int_eq(s->servers[0].speed[1].from_period, 4);
    scenario_destroy(&s);
    s = parse_ok("{\"duration\": 2, \"backend\": {\"window\": 16}, " SERVERS
                 ", \"buckets\": [{\"name\": \"a\", \"set\": [{\"period\": 1, \"reservation\": 5, "
                 "\"limit\": 9}, {\"period\": 3, \"reservation\": 7}]}]}");
    ck_assert_int_eq(s->backend_window, 16);
    ck_assert_uint_eq(s->buckets[0].nsets, 2);
    ck_assert_int_eq(s->buckets[0].sets[0].period, 1);
    ck_assert_double_eq(s->buckets[0].sets[0].reservation, 5);
    ck_assert_double_eq(s->buckets[0].sets[0].limit, 9);
    ck_assert(s->buckets[0].sets[1].limit == SCENARIO_NO_LIMIT);
    scenario_destroy(&s);
}
END_TEST

START_TEST(test_scenario_rejects_malformed)
{
    const char *text = bad[_i].text;
    scenario_t *s = (scenario_t *)0x1;
    jsonloc_err_t err;
    int rc = scenario_parse(text, strlen(text), "bad.json", NULL, &s, &err);
    ck_assert_msg(rc == -EINVAL, "case %d: accepted %s", _i, text);
    ck_assert_ptr_null(s);
    ck_assert_str_eq(err.source, "bad.json");
    ck_assert_msg(strstr(err.text, bad[_i].phrase) != NULL, "case %d: \"%s\" lacks \"%s\"", _i,
                  err.text, bad[_i].phrase);
    ck_assert_msg(err.line == bad[_i].line && err.col == bad[_i].col,
                  "case %d: %s at %d:%d, want %d:%d", _i, err.text, err.line, err.col,
                  bad[_i].line, bad[_i].col);
}
END_TEST

START_TEST(test_scenario_load_file_errors)
{
    scenario_t *s = NULL;
    jsonloc_err_t err;
    ck_assert_int_eq(scenario_load("/nonexistent/x.json", NULL, &s, &err), -ENOENT);
    ck_assert_str_eq(err.source, "/nonexistent/x.json");
    char path[] = "/tmp/test_scenario_XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    FILE *f = fdopen(fd, "w");
    fputs("{\"duration\": 1,\n\n   \"bogus\": 1}\n", f);
    fclose(f);
    ck_assert_int_eq(scenario_load(path, NULL, &s, &err), -EINVAL);
    ck_assert_str_eq(err.source, path);
    ck_assert_int_eq(err.line, 3);
    ck_assert_int_eq(err.col, 13);
    unlink(path);
}
END_TEST

START_TEST(test_scenario_write_buckets)
{
    scenario_t *s = parse_ok("{\"duration\": 2, " SERVERS ", \"buckets\": [{\"name\": \"a\", "
                             "\"reservation\": 10.7, \"limit\": 20.2}, {\"name\": \"b\"}]}");
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ck_assert_int_eq(scenario_write_buckets(s, f), 0);
    fclose(f);
    json_error_t je;
    json_t *j = json_loads(buf, 0, &je);
    ck_assert_ptr_nonnull(j);
    json_t *arr = json_object_get(j, "buckets");
    ck_assert_uint_eq(json_array_size(arr), 2);
    ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(arr, 0), "reservation")), 10);
    ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(arr, 0), "limit")), 21);
    ck_assert_ptr_null(json_object_get(json_array_get(arr, 1), "limit"));
    /* common/bucketfile's writer: every bucket carries its weight. */
    ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(arr, 1), "weight")), 1);
    json_decref(j);
    free(buf);
    scenario_destroy(&s);
}
END_TEST

/* Nested buckets: "parent" names another bucket (resolved after all are
 * read: a child may come first), goes to the bucket file, and an unknown
 * one is refused at the member. */
START_TEST(test_scenario_parent)
{
    scenario_t *s = parse_ok("{\"duration\": 2, " SERVERS ", \"buckets\": [{\"name\": \"a\", "
                             "\"parent\": \"t\"}, {\"name\": \"t\", \"limit\": 100, "
                             "\"servers\": [], \"changes\": []}, {\"name\": \"b\"}]}");
    ck_assert_int_eq(s->buckets[0].parent, 1);
    ck_assert_int_eq(s->buckets[1].parent, -1);
    ck_assert_int_eq(s->buckets[2].parent, -1);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ck_assert_int_eq(scenario_write_buckets(s, f), 0);
    fclose(f);
    ck_assert_msg(strstr(buf, "{\"name\": \"a\", \"reservation\": 0, \"weight\": 1, "
                              "\"parent\": \"t\"}"), "%s", buf);
    free(buf);
    scenario_destroy(&s);
    const char *bad = "{\"duration\": 2, " SERVERS ", \"buckets\": [{\"name\": \"a\", "
                      "\"parent\": \"nope\"}]}";
    jsonloc_err_t err;
    scenario_opts_t o = SCENARIO_OPTS_DEFAULT;
    ck_assert_int_eq(scenario_parse(bad, strlen(bad), "x", &o, &s, &err), -EINVAL);
    ck_assert_msg(strstr(err.path, "parent") && strstr(err.text, "nope"), "%s: %s", err.path,
                  err.text);
}
END_TEST

/* A bucket may start idle (no servers) until its first explicit change. */
START_TEST(test_scenario_bucket_idle_until_first_change)
{
    scenario_t *s = parse_ok("{\"duration\": 4, " SERVERS ", \"buckets\": [{\"name\": \"late\", "
                             "\"servers\": [], \"changes\": [{\"at\": 2, \"servers\": [\"s2\"]}]}]}");
    const scenario_bucket_t *b = &s->buckets[0];
    ck_assert_uint_eq(b->nphases, 2);
    ck_assert_int_eq(scenario_phase_at(b, 1.0)->n, 0);
    ck_assert_int_eq(scenario_phase_at(b, 3.0)->n, 1);
    ck_assert_int_eq(b->max_active, 1);
    scenario_destroy(&s);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("scenario");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_scenario_minimal_defaults);
    tcase_add_test(tc, test_scenario_exp3_placement_and_percent_rates);
    tcase_add_test(tc, test_scenario_changes_and_phase_lookup);
    tcase_add_test(tc, test_scenario_generate_zipf);
    tcase_add_test(tc, test_scenario_overrides);
    tcase_add_test(tc, test_scenario_sim_model_keys);
    tcase_add_loop_test(tc, test_scenario_rejects_malformed, 0, (int)(sizeof bad / sizeof bad[0]));
    tcase_add_test(tc, test_scenario_load_file_errors);
    tcase_add_test(tc, test_scenario_write_buckets);
    tcase_add_test(tc, test_scenario_bucket_idle_until_first_change);
    tcase_add_test(tc, test_scenario_parent);
    suite_add_tcase(s, tc);
    return testlib_run(s);
}
