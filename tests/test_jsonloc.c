/* test_jsonloc.c - Check suite for common/jsonloc: value positions in JSON text. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "common/jsonloc.h"
#include "tests/testlib.h"

static const char doc[] =
    "{\n"
    "  \"buckets\": [\n"
    "    {\"name\": \"red\", \"reservation\": 10},\n"
    "    {\"name\": \"bl\\\"ue\", \"limit\": [1, {\"x\": 2}]},\n"
    "    {\"n\\u00e4me\": \"\xc3\xa4\", \"w\": 3}\n"
    "  ]\n"
    "}\n";

static size_t find(const jsonloc_step_t *p, size_t n, int *line, int *col)
{
    return jsonloc_find(doc, strlen(doc), p, n, line, col);
}

START_TEST(test_jsonloc_member_and_index)
{
    int line, col;
    jsonloc_step_t p[] = {{"buckets", 0}, {NULL, 0}, {"reservation", 0}};
    ck_assert_uint_eq(find(p, 3, &line, &col), 3);
    ck_assert_int_eq(line, 3);
    ck_assert_int_eq(col, 36);
    jsonloc_step_t q[] = {{"buckets", 0}, {NULL, 1}, {"limit", 0}, {NULL, 1}, {"x", 0}};
    ck_assert_uint_eq(find(q, 5, &line, &col), 5);
    ck_assert_int_eq(line, 4);
    ck_assert_int_eq(col, 43);
}
END_TEST

START_TEST(test_jsonloc_escaped_key_and_utf8_columns)
{
    int line, col;
    jsonloc_step_t p[] = {{"buckets", 0}, {NULL, 1}, {"name", 0}};
    ck_assert_uint_eq(find(p, 3, &line, &col), 3);
    ck_assert_int_eq(line, 4);
    ck_assert_int_eq(col, 14);
    /* a member after a two-byte character counts it as one column */
    jsonloc_step_t q[] = {{"buckets", 0}, {NULL, 2}, {"w", 0}};
    ck_assert_uint_eq(find(q, 3, &line, &col), 3);
    ck_assert_int_eq(line, 5);
    ck_assert_int_eq(col, 29);
}
END_TEST

START_TEST(test_jsonloc_missing_steps_stop_at_parent)
{
    int line, col;
    jsonloc_step_t p[] = {{"buckets", 0}, {NULL, 0}, {"limit", 0}};
    ck_assert_uint_eq(find(p, 3, &line, &col), 2);
    ck_assert_int_eq(line, 3);
    ck_assert_int_eq(col, 5);
    jsonloc_step_t q[] = {{"buckets", 0}, {NULL, 9}};
    ck_assert_uint_eq(find(q, 2, &line, &col), 1);
    ck_assert_int_eq(line, 2);
    ck_assert_int_eq(col, 14);
    jsonloc_step_t r[] = {{"servers", 0}};
    ck_assert_uint_eq(find(r, 1, &line, &col), 0);
    ck_assert_int_eq(line, 1);
    ck_assert_int_eq(col, 1);
}
END_TEST

START_TEST(test_jsonloc_garbage_is_safe)
{
    const char *bad[] = {"", "{", "[", "{\"a\"", "{\"a\":", "{\"a\":[1,", "\"abc", "{\"a\\", "]]]}"};
    jsonloc_step_t p[] = {{"a", 0}, {NULL, 1}, {"b", 0}};
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        int line = 0, col = 0;
        size_t n = jsonloc_find(bad[k], strlen(bad[k]), p, 3, &line, &col);
        ck_assert_uint_lt(n, 3);
        ck_assert_int_ge(line, 1);
        ck_assert_int_ge(col, 1);
    }
}
END_TEST

START_TEST(test_jsonloc_format)
{
    char out[64];
    jsonloc_step_t p[] = {{"buckets", 0}, {NULL, 3}, {"demand", 0}, {"s9", 0}};
    jsonloc_format(p, 4, out, sizeof out);
    ck_assert_str_eq(out, "buckets[3].demand.s9");
    jsonloc_format(p, 4, out, 8);
    ck_assert_str_eq(out, "buckets");
    jsonloc_format(p, 0, out, sizeof out);
    ck_assert_str_eq(out, "");
}
END_TEST

START_TEST(test_jsonloc_unicode_escaped_key_matches)
{
    int line, col;
    /* "n\u00e4me" is the key "n\xc3\xa4me" */
    jsonloc_step_t p[] = {{"buckets", 0}, {NULL, 2}, {"n\xc3\xa4me", 0}};
    ck_assert_uint_eq(find(p, 3, &line, &col), 3);
    ck_assert_int_eq(line, 5);
    ck_assert_int_eq(col, 19);
    /* a surrogate pair is one code point, four UTF-8 bytes */
    static const char pair[] = "{\"a\\ud83d\\ude00\": 1, \"b\\/\": 2}";
    jsonloc_step_t q[] = {{"a\xf0\x9f\x98\x80", 0}};
    ck_assert_uint_eq(jsonloc_find(pair, strlen(pair), q, 1, &line, &col), 1);
    ck_assert_int_eq(col, 19);
    jsonloc_step_t r[] = {{"b/", 0}};
    ck_assert_uint_eq(jsonloc_find(pair, strlen(pair), r, 1, &line, &col), 1);
    ck_assert_int_eq(col, 29);
    jsonloc_step_t t[] = {{"a", 0}}; /* a prefix of the key is not the key */
    ck_assert_uint_eq(jsonloc_find(pair, strlen(pair), t, 1, &line, &col), 0);
}
END_TEST

START_TEST(test_jsonloc_err_at_fills_path_and_position)
{
    jsonloc_err_t e;
    memset(&e, 0x55, sizeof e);
    jsonloc_err_clear(&e);
    ck_assert_int_eq(e.line, 0);
    ck_assert_str_eq(e.path, "");
    ck_assert_str_eq(e.text, "");
    jsonloc_err_clear(NULL);
    jsonloc_step_t p[] = {{"buckets", 0}, {NULL, 1}, {"limit", 0}, {NULL, 1}};
    ck_assert_uint_eq(jsonloc_err_at(&e, doc, strlen(doc), p, 4), 4);
    ck_assert_str_eq(e.path, "buckets[1].limit[1]");
    ck_assert_int_eq(e.line, 4);
    ck_assert_int_eq(e.col, 37);
    jsonloc_step_t q[] = {{"buckets", 0}, {NULL, 0}, {"limit", 0}};
    ck_assert_uint_eq(jsonloc_err_at(&e, doc, strlen(doc), q, 3), 2);
    ck_assert_str_eq(e.path, "buckets[0].limit");
    ck_assert_int_eq(e.line, 3); /* the object that lacks it */
    ck_assert_int_eq(e.col, 5);
}
END_TEST

START_TEST(test_jsonloc_fail_fills_source_position_and_text)
{
    jsonloc_err_t e;
    memset(&e, 0x55, sizeof e);
    ck_assert_int_eq(jsonloc_fail(&e, -22, "users.auth", 3, 1, "user '%s' given %d times", "bob", 2),
                     -22);
    ck_assert_str_eq(e.source, "users.auth");
    ck_assert_str_eq(e.path, "");
    ck_assert_int_eq(e.line, 3);
    ck_assert_int_eq(e.col, 1);
    ck_assert_str_eq(e.text, "user 'bob' given 2 times");
    ck_assert_int_eq(jsonloc_fail(NULL, -12, "x", 0, 0, "out of memory"), -12);
}
END_TEST

/* Every element's span in one pass: nested values, strings with brackets
 * and commas, spacing; more elements than room; not an array. */
START_TEST(test_jsonloc_elements_spans)
{
    const char *t = "{\"a\": [ {\"x\":\"],[\"} ,\n 12, [1,[2]] , \"s\\\"]\"]}";
    jsonloc_step_t path[1] = {{"a", 0}};
    size_t as, ae, sp[8];
    ck_assert_uint_eq(jsonloc_span(t, strlen(t), path, 1, &as, &ae), 1);
    ck_assert_uint_eq(jsonloc_elements(t, strlen(t), as, sp, 4), 4);
    const char *want[4] = {"{\"x\":\"],[\"}", "12", "[1,[2]]", "\"s\\\"]\""};
    for (size_t k = 0; k < 4; k++) {
        ck_assert_uint_eq(sp[2 * k + 1] - sp[2 * k], strlen(want[k]));
        ck_assert_int_eq(memcmp(t + sp[2 * k], want[k], strlen(want[k])), 0);
    }
    ck_assert_uint_eq(jsonloc_elements(t, strlen(t), as, sp, 1), 4); /* counted, one stored */
    ck_assert_uint_eq(jsonloc_elements("[ ]", 3, 0, sp, 4), 0);
    ck_assert_uint_eq(jsonloc_elements(t, strlen(t), 0, sp, 4), 0); /* an object */
    ck_assert_uint_eq(jsonloc_elements("[1,", 3, 0, sp, 4), 2);    /* garbage: safe */
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {test_jsonloc_member_and_index,
                                  test_jsonloc_escaped_key_and_utf8_columns,
                                  test_jsonloc_missing_steps_stop_at_parent,
                                  test_jsonloc_garbage_is_safe, test_jsonloc_format,
                                  test_jsonloc_unicode_escaped_key_matches,
                                  test_jsonloc_err_at_fills_path_and_position,
                                  test_jsonloc_fail_fills_source_position_and_text,
                                  test_jsonloc_elements_spans};
    return testlib_run_tests("jsonloc", tests, sizeof tests / sizeof tests[0]);
}
