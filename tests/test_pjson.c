/* test_pjson.c - Check suite for pshift/pjson: good input, every bad-input fixture with its position, round trips. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "pshift/tools/gen.h"
#include "pshift/tools/pjson.h"
#include "tests/testlib.h"

#define BAD_DIR "tests/data/pshift/bad"

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s (run from the repository root)", path);
    char *buf = NULL;
    size_t cap = 0, n = 0;
    for (;;) {
        if (n == cap) {
            cap = cap ? cap * 2 : 4096;
            buf = realloc(buf, cap + 1);
            ck_assert_ptr_nonnull(buf);
        }
        size_t r = fread(buf + n, 1, cap - n, f);
        if (r == 0) break;
        n += r;
    }
    fclose(f);
    buf[n] = '\0';
    *len = n;
    return buf;
}

static int parse_str(const char *s, pjson_input_t *in, jsonloc_err_t *e)
{
    return pjson_parse(s, strlen(s), in, e);
}

START_TEST(test_pjson_good)
{
    pjson_input_t in;
    jsonloc_err_t e;
    const char *doc =
        "{\"meta\": {\"anything\": [1, 2]},\n"
        " \"servers\": [{\"name\": \"s1\", \"capacity\": 100}, {\"capacity\": 0, \"name\": \"s2\"}],\n"
        " \"buckets\": [{\"name\": \"red\", \"reservation\": 100, \"limit\": 150,\n"
        "              \"demand\": {\"s2\": 50, \"s1\": 150}},\n"
        "             {\"name\": \"idle\", \"reservation\": 0, \"demand\": {}}]}";
    ck_assert_int_eq(parse_str(doc, &in, &e), 0);
    pshift_problem_t *p = in.problem;
    ck_assert_int_eq(pshift_nservers(p), 2);
    ck_assert_int_eq(pshift_nbuckets(p), 2);
    ck_assert_str_eq(pshift_server_name(p, 1), "s2");
    ck_assert_int_eq(pshift_server_capacity(p, 0), 100);
    ck_assert_int_eq(pshift_server_capacity(p, 1), 0);
    ck_assert_str_eq(pshift_bucket_name(p, 0), "red");
    ck_assert_int_eq(pshift_bucket_target(p, 0), 100);
    ck_assert(in.has_limits);
    ck_assert_int_eq(in.limits[0], 150);
    ck_assert_int_eq(in.limits[1], PJSON_NO_LIMIT);
    pshift_opts_t o = PSHIFT_OPTS_DEFAULT;
    ck_assert_int_eq(pshift_solve(p, &o), 0);
    ck_assert_uint_eq(pshift_bucket_nentries(p, 0), 2);
    int s;
    int64_t d;
    pshift_bucket_entry(p, 0, 1, &s, &d, NULL);
    ck_assert_int_eq(s, 1);
    ck_assert_int_eq(d, 50);
    pjson_input_clear(&in);
    ck_assert_ptr_null(in.problem);
    pjson_input_clear(&in);
    pjson_input_clear(NULL);

    ck_assert_int_eq(parse_str("{\"servers\": [{\"name\": \"a\", \"capacity\": 1}],"
                               " \"buckets\": []}", &in, NULL), 0);
    ck_assert(!in.has_limits);
    pjson_input_clear(&in);
}
END_TEST

START_TEST(test_pjson_bad_fixtures)
{
    DIR *d = opendir(BAD_DIR);
    ck_assert_msg(d != NULL, "no %s (run from the repository root)", BAD_DIR);
    struct dirent *ent;
    int cases = 0;
    while ((ent = readdir(d))) {
        size_t n = strlen(ent->d_name);
        if (n < 6 || strcmp(ent->d_name + n - 5, ".json") != 0) continue;
        char path[512], errpath[512];
        snprintf(path, sizeof path, BAD_DIR "/%s", ent->d_name);
        snprintf(errpath, sizeof errpath, BAD_DIR "/%.*s.err", (int)(n - 5), ent->d_name);
        size_t len, elen;
        char *text = slurp(path, &len), *want = slurp(errpath, &elen);
        while (elen && want[elen - 1] == '\n') want[--elen] = '\0';
        pjson_input_t in;
        jsonloc_err_t e;
        int rc = pjson_parse(text, len, &in, &e);
        ck_assert_msg(rc == -EINVAL, "%s: accepted (rc %d)", path, rc);
        ck_assert_ptr_null(in.problem);
        char got[512];
        snprintf(got, sizeof got, "%d:%d: %s%s%s", e.line, e.col, e.path,
                 e.path[0] ? ": " : "", e.text);
        ck_assert_msg(strcmp(got, want) == 0, "%s:\n got  '%s'\n want '%s'", path, got, want);
        free(text);
        free(want);
        cases++;
    }
    closedir(d);
    ck_assert_int_ge(cases, 30);
}
END_TEST

START_TEST(test_pjson_read_file)
{
    pjson_input_t in;
    jsonloc_err_t e;
    ck_assert_int_eq(pjson_read_file("tests/data/pshift/table2.json", &in, &e), 0);
    ck_assert_int_eq(pshift_nservers(in.problem), 3);
    ck_assert_int_eq(pshift_nbuckets(in.problem), 3);
    pjson_input_clear(&in);
    ck_assert_int_eq(pjson_read_file("tests/data/pshift/no-such-file.json", &in, &e), -ENOENT);
    ck_assert_int_eq(e.line, 0);
    ck_assert_ptr_nonnull(strstr(e.text, "cannot open"));
    ck_assert_int_eq(pjson_read_file(BAD_DIR "/unknown_server.json", &in, &e), -EINVAL);
    ck_assert_str_eq(e.path, "buckets[1].demand.s9");
    ck_assert_int_eq(e.line, 4);
}
END_TEST

/* Writes with `write` into a memory buffer and returns it (caller frees). */
static char *to_memory(int (*write)(FILE *, void *), void *arg, size_t *len)
{
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(write(f, arg), 0);
    fclose(f);
    return buf;
}

typedef struct {
    pshift_problem_t *p;
    int64_t *limits;
    pshift_problem_t *lim;
} wargs_t;

static int write_problem(FILE *f, void *arg)
{
    wargs_t *w = arg;
    json_t *meta = json_pack("{s:i}", "seed", 3);
    int rc = pjson_write_problem(f, w->p, w->limits, meta, 0);
    json_decref(meta);
    return rc;
}

static int write_solution(FILE *f, void *arg)
{
    wargs_t *w = arg;
    return pjson_write_solution(f, w->p, w->lim, 1);
}

START_TEST(test_pjson_roundtrip)
{
    gen_params_t g = GEN_PARAMS_DEFAULT;
    g.servers = 12;
    g.buckets = 200;
    g.active = 4;
    g.limit_ratio = 1.25;
    wargs_t w = {0};
    ck_assert_int_eq(gen_problem(&g, &w.p, &w.limits), 0);
    pshift_opts_t o = PSHIFT_OPTS_DEFAULT;
    ck_assert_int_eq(pshift_solve(w.p, &o), 0);
    size_t len;
    char *doc = to_memory(write_problem, &w, &len);
    pjson_input_t in;
    jsonloc_err_t e;
    int rc = pjson_parse(doc, len, &in, &e);
    ck_assert_msg(rc == 0, "%d:%d: %s: %s", e.line, e.col, e.path, e.text);
    ck_assert_int_eq(pshift_nservers(in.problem), g.servers);
    ck_assert_int_eq(pshift_nbuckets(in.problem), g.buckets);
    ck_assert_int_eq(pshift_solve(in.problem, &o), 0);
    for (int b = 0; b < g.buckets; b++) {
        ck_assert_str_eq(pshift_bucket_name(in.problem, b), pshift_bucket_name(w.p, b));
        ck_assert_int_eq(pshift_bucket_target(in.problem, b), pshift_bucket_target(w.p, b));
        ck_assert_int_eq(in.limits[b], w.limits[b]);
        ck_assert_uint_eq(pshift_bucket_nentries(in.problem, b), pshift_bucket_nentries(w.p, b));
        for (int s = 0; s < g.servers; s++)
            ck_assert_int_eq(pshift_alloc(in.problem, b, s), pshift_alloc(w.p, b, s));
    }
    ck_assert_int_eq(pshift_stats(in.problem)->phi, pshift_stats(w.p)->phi);
    pjson_input_clear(&in);
    free(doc);
    free(w.limits);
    pshift_problem_destroy(&w.p);
}
END_TEST

START_TEST(test_pjson_solution)
{
    pjson_input_t in;
    ck_assert_int_eq(pjson_read_file("tests/data/pshift/table1.json", &in, NULL), 0);
    pshift_opts_t o = PSHIFT_OPTS_DEFAULT;
    ck_assert_int_eq(pshift_solve(in.problem, &o), 0);
    wargs_t w = {.p = in.problem};
    size_t len;
    char *out = to_memory(write_solution, &w, &len);
    json_error_t je;
    json_t *root = json_loadb(out, len, 0, &je);
    ck_assert_ptr_nonnull(root);
    ck_assert_int_eq(json_integer_value(json_object_get(root, "phi")), 200);
    ck_assert(json_is_real(json_object_get(root, "solve_seconds")));
    json_t *red = json_object_get(json_object_get(root, "allocation"), "red");
    ck_assert_int_eq(json_integer_value(json_object_get(red, "s1")), 50);
    ck_assert_int_eq(json_integer_value(json_object_get(red, "s2")), 50);
    json_t *st = json_object_get(root, "stats");
    ck_assert_int_eq(json_integer_value(json_object_get(st, "phi_initial")), 175);
    ck_assert_ptr_null(json_object_get(root, "limit_allocation"));
    json_decref(root);
    free(out);

    /* With a limit pass. */
    int64_t targets[2] = {INT64_MAX, 0};
    w.lim = pshift_residual_new(in.problem, targets);
    ck_assert_ptr_nonnull(w.lim);
    ck_assert_int_eq(pshift_solve(w.lim, &o), 0);
    out = to_memory(write_solution, &w, &len);
    root = json_loadb(out, len, 0, &je);
    ck_assert_ptr_nonnull(root);
    ck_assert(json_is_integer(json_object_get(root, "limit_phi")));
    ck_assert(json_is_object(json_object_get(root, "limit_allocation")));
    ck_assert(json_is_object(json_object_get(root, "limit_stats")));
    json_decref(root);
    free(out);
    pshift_problem_destroy(&w.lim);
    pjson_input_clear(&in);
}
END_TEST

/* jansson allocator that fails after `budget` allocations. */
static long budget = -1;

static void *failing_malloc(size_t n)
{
    if (budget == 0) return NULL;
    if (budget > 0) budget--;
    return malloc(n);
}

START_TEST(test_pjson_alloc_failures)
{
    /* Make each of jansson's allocations fail in turn: the parser must
     * answer -ENOMEM (never crash, never claim bad input) until it has
     * enough memory to succeed. */
    size_t len;
    char *text = slurp("tests/data/pshift/limits.json", &len);
    json_set_alloc_funcs(failing_malloc, free);
    int ok = 0, nomem = 0;
    for (long k = 0; k < 10000 && !ok; k++) {
        pjson_input_t in;
        jsonloc_err_t e;
        budget = k;
        int rc = pjson_parse(text, len, &in, &e);
        budget = -1;
        /* jansson's lexer reports some allocation failures as syntax
         * errors (e.g. "string or '}' expected"); those carry no path.  Past
         * json_loadb() every failure must be -ENOMEM. */
        int jansson_lexer = rc == -EINVAL && e.path[0] == '\0';
        ck_assert_msg(rc == 0 || rc == -ENOMEM || jansson_lexer, "allocation %ld: rc %d (%s: %s)",
                      k, rc, e.path, e.text);
        if (rc == -ENOMEM) nomem++;
        if (rc == 0) {
            ok = 1;
            ck_assert_int_eq(pshift_nbuckets(in.problem), 3);
        } else {
            ck_assert_ptr_null(in.problem);
        }
        pjson_input_clear(&in);
    }
    json_set_alloc_funcs(malloc, free);
    ck_assert(ok);
    ck_assert_int_gt(nomem, 10);
    free(text);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {test_pjson_good, test_pjson_bad_fixtures, test_pjson_read_file,
                                  test_pjson_roundtrip, test_pjson_solution,
                                  test_pjson_alloc_failures};
    return testlib_run_tests("pjson", tests, sizeof tests / sizeof tests[0]);
}
