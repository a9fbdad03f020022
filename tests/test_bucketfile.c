/* test_bucketfile.c - Check suite for common/bucketfile: parsing, validation errors with positions, edits, atomic save. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utime.h>

#include "common/bucketfile.h"
#include "tests/testlib.h"

static int parse(const char *text, bucketfile_t **out, jsonloc_err_t *err)
{
    return bucketfile_parse(text, strlen(text), "t.json", out, err);
}

/* Expects `text` to fail at path/line/column with `needle` in the message. */
static void expect_error(const char *text, const char *path, int line, int col,
                         const char *needle)
{
    bucketfile_t *bf = NULL;
    jsonloc_err_t err;
    int rc = parse(text, &bf, &err);
    ck_assert_msg(rc == -EINVAL, "expected -EINVAL for %s, got %d", text, rc);
    ck_assert_ptr_null(bf);
    ck_assert_str_eq(err.source, "t.json");
    ck_assert_msg(strcmp(err.path, path) == 0, "path '%s' != '%s' (%s)", err.path, path,
                  err.text);
    ck_assert_msg(err.line == line && err.col == col, "%s: at %d:%d, expected %d:%d (%s)",
                  path, err.line, err.col, line, col, err.text);
    ck_assert_msg(strstr(err.text, needle), "'%s' lacks '%s'", err.text, needle);
}

START_TEST(test_bucketfile_parse_valid)
{
    const char *t = "{\"buckets\":[\n"
                    " {\"name\":\"red\",\"reservation\":30000,\"limit\":60000,\"weight\":2},\n"
                    " {\"name\":\"blue\",\"reservation\":0},\n"
                    " {\"name\":\"caf\\u00e9/x\",\"reservation\":5,\"limit\":5}\n"
                    "]}";
    bucketfile_t *bf = NULL;
    jsonloc_err_t err;
    ck_assert_int_eq(parse(t, &bf, &err), 0);
    ck_assert_uint_eq(bucketfile_count(bf), 3);
    const bucketfile_bucket_t *b = bucketfile_get(bf, 0);
    ck_assert_str_eq(b->name, "red");
    ck_assert_int_eq(b->reservation, 30000);
    ck_assert_int_eq(b->limit, 60000);
    ck_assert_uint_eq(b->weight, 2);
    b = bucketfile_get(bf, 1);
    ck_assert_int_eq(b->limit, BUCKETFILE_NO_LIMIT);
    ck_assert_uint_eq(b->weight, 1);
    ck_assert_int_eq(bucketfile_find(bf, "caf\xc3\xa9/x"), 2);
    ck_assert_int_eq(bucketfile_find(bf, "green"), -ENOENT);
    ck_assert_ptr_null(bucketfile_get(bf, 3));
    bucketfile_destroy(&bf);
    ck_assert_ptr_null(bf);
    bucketfile_destroy(&bf);

    ck_assert_int_eq(parse("{\"buckets\":[]}", &bf, NULL), 0);
    ck_assert_uint_eq(bucketfile_count(bf), 0);
    bucketfile_destroy(&bf);
}
END_TEST

START_TEST(test_bucketfile_syntax_error_position)
{
    bucketfile_t *bf = NULL;
    jsonloc_err_t err;
    ck_assert_int_eq(parse("{\"buckets\":[\n  {\"name\": \"a\",, }\n]}", &bf, &err), -EINVAL);
    ck_assert_int_eq(err.line, 2);
    ck_assert_int_ge(err.col, 15);
    ck_assert_str_eq(err.path, "");
    char buf[512];
    bucketfile_strerror(&err, buf, sizeof buf);
    ck_assert_msg(strncmp(buf, "t.json:2:", 9) == 0, "%s", buf);
    ck_assert_int_eq(parse("", &bf, &err), -EINVAL);
    ck_assert_int_eq(parse("{\"buckets\":[]} x", &bf, &err), -EINVAL);
    /* Duplicate keys are refused by the parser itself. */
    ck_assert_int_eq(parse("{\"buckets\":[{\"name\":\"a\",\"name\":\"b\",\"reservation\":1}]}",
                           &bf, &err),
                     -EINVAL);
    ck_assert_int_eq(err.line, 1);
}
END_TEST

START_TEST(test_bucketfile_semantic_error_positions)
{
    /* Columns are 1-based; the value's first character is reported. */
    expect_error("{\"buckets\":[\n"
                 "  {\"name\":\"a\",\"reservation\":1},\n"
                 "  {\"name\":\"a\",\"reservation\":2}\n"
                 "]}",
                 "buckets[1].name", 3, 11, "duplicate");
    expect_error("{\"buckets\":[\n"
                 "  {\"name\":\"a\",\n"
                 "   \"reservation\":100,\n"
                 "   \"limit\":50}\n"
                 "]}",
                 "buckets[0].limit", 4, 12, "below the reservation");
    expect_error("{\"buckets\":[{\"name\":\"a\",\"reservation\":-1}]}", "buckets[0].reservation",
                 1, 39, "negative");
    expect_error("{\"buckets\":[{\"name\":\"a\",\"reservation\":1.5}]}",
                 "buckets[0].reservation", 1, 39, "integer");
    expect_error("{\"buckets\":[{\"name\":\"a\",\"reservation\":\"7\"}]}",
                 "buckets[0].reservation", 1, 39, "integer");
    expect_error("{\"buckets\":[{\"name\":\"a\",\"reservation\":1000000000000000}]}",
                 "buckets[0].reservation", 1, 39, "absurd");
    expect_error("{\"buckets\":[{\"name\":\"a\",\"reservation\":1,\"limt\":5}]}",
                 "buckets[0].limt", 1, 48, "unknown member");
    expect_error("{\"buckets\":[{\"name\":\"a b\",\"reservation\":1}]}", "buckets[0].name", 1,
                 21, "bad bucket name");
    expect_error("{\"buckets\":[{\"name\":\"a:b\",\"reservation\":1}]}", "buckets[0].name", 1,
                 21, "bad bucket name");
    expect_error("{\"buckets\":[{\"name\":\"\",\"reservation\":1}]}", "buckets[0].name", 1, 21,
                 "bad bucket name");
    expect_error("{\"buckets\":[{\"name\":\"a\\tb\",\"reservation\":1}]}", "buckets[0].name", 1,
                 21, "bad bucket name");
    expect_error("{\"buckets\":[{\"name\":7,\"reservation\":1}]}", "buckets[0].name", 1, 21,
                 "string");
    expect_error("{\"buckets\":[{\"reservation\":1}]}", "buckets[0]", 1, 13, "no \"name\"");
    expect_error("{\"buckets\":[{\"name\":\"a\"}]}", "buckets[0]", 1, 13, "no \"reservation\"");
    expect_error("{\"buckets\":[{\"name\":\"a\",\"reservation\":1,\"weight\":0}]}",
                 "buckets[0].weight", 1, 50, "at least 1");
    expect_error("{\"buckets\":[1]}", "buckets[0]", 1, 13, "object");
    expect_error("{\"buckets\":{}}", "buckets", 1, 12, "array");
    expect_error("  {}", "", 1, 3, "no \"buckets\"");
    expect_error("[]", "", 1, 1, "top level");
    expect_error("{\"buckets\":[],\n \"extra\":1}", "extra", 2, 10, "unknown member");
    /* 251-byte name. */
    char big[400];
    char name[252];
    memset(name, 'x', 251);
    name[251] = '\0';
    snprintf(big, sizeof big, "{\"buckets\":[{\"name\":\"%s\",\"reservation\":1}]}", name);
    expect_error(big, "buckets[0].name", 1, 21, "1..250");
    name[250] = '\0';
    snprintf(big, sizeof big, "{\"buckets\":[{\"name\":\"%s\",\"reservation\":1}]}", name);
    bucketfile_t *bf = NULL;
    ck_assert_int_eq(parse(big, &bf, NULL), 0);
    bucketfile_destroy(&bf);
}
END_TEST

/* Where the locator (common/jsonloc) is subtle: columns count characters as
 * jansson's syntax errors do, escaped keys match, a missing member points at
 * its object, and long member names are kept whole in the path. */
START_TEST(test_bucketfile_error_positions_subtle)
{
    /* "caf\xc3\xa9" is 4 characters in 5 bytes: the column counts 42, not 43. */
    expect_error("{\"buckets\":[{\"name\":\"caf\xc3\xa9\",\"reservation\":-1}]}",
                 "buckets[0].reservation", 1, 42, "negative");
    /* A key written with an escape is the member it decodes to. */
    expect_error("{\"buckets\":[{\"name\":\"a\",\"re\\u0073ervation\":-1}]}",
                 "buckets[0].reservation", 1, 44, "negative");
    /* Missing members: the object that lacks them, also after other buckets. */
    expect_error("{\"buckets\":[{\"name\":\"a\",\"reservation\":1},\n"
                 "  {\"name\":\"b\"}]}",
                 "buckets[1]", 2, 3, "no \"reservation\"");
    expect_error("{\"buckets\":[{\"name\":\"a\",\"reservation\":1},\n"
                 "   {\"limit\":4}]}",
                 "buckets[1]", 2, 4, "no \"name\"");
    /* A 40-byte unknown member: the path names it whole, the text cuts it at 40. */
    char key[41], text[200], path[80];
    memset(key, 'k', 40);
    key[40] = '\0';
    snprintf(text, sizeof text, "{\"buckets\":[{\"name\":\"a\",\"reservation\":1,\"%s\":2}]}",
             key);
    snprintf(path, sizeof path, "buckets[0].%s", key);
    expect_error(text, path, 1, 84, "unknown member");
    /* bucketfile_strerror() puts it together. */
    bucketfile_t *bf = NULL;
    jsonloc_err_t err;
    ck_assert_int_eq(parse("{\"buckets\":[\n {\"name\":\"a\",\"reservation\":5,\"limit\":4}]}",
                           &bf, &err),
                     -EINVAL);
    char buf[600];
    ck_assert_str_eq(bucketfile_strerror(&err, buf, sizeof buf),
                     "t.json:2:38: buckets[0].limit: limit 4 is below the reservation 5");
}
END_TEST

START_TEST(test_bucketfile_edit)
{
    bucketfile_t *bf = bucketfile_new();
    ck_assert_ptr_nonnull(bf);
    jsonloc_err_t err;
    char name[32];
    for (int i = 0; i < 1000; i++) {
        bucketfile_bucket_t b = {.reservation = i, .limit = BUCKETFILE_NO_LIMIT, .weight = 1};
        snprintf(name, sizeof name, "b%d", i);
        b.name = name;
        ck_assert_int_eq(bucketfile_set(bf, &b, &err), 0);
    }
    ck_assert_uint_eq(bucketfile_count(bf), 1000);
    bucketfile_bucket_t b = {.name = "b7", .reservation = 70, .limit = 80, .weight = 3};
    ck_assert_int_eq(bucketfile_set(bf, &b, &err), 0);
    ck_assert_uint_eq(bucketfile_count(bf), 1000);
    ck_assert_int_eq(bucketfile_get(bf, 7)->limit, 80);
    b.limit = 10;
    ck_assert_int_eq(bucketfile_set(bf, &b, &err), -EINVAL);
    ck_assert_str_eq(err.path, "limit");
    ck_assert_int_eq(bucketfile_get(bf, 7)->limit, 80);
    b.limit = 100;
    b.weight = 0;
    ck_assert_int_eq(bucketfile_set(bf, &b, &err), -EINVAL);
    b.name = "bad:name";
    b.weight = 1;
    ck_assert_int_eq(bucketfile_set(bf, &b, &err), -EINVAL);
    ck_assert_int_eq(bucketfile_remove(bf, "b3"), 0);
    ck_assert_int_eq(bucketfile_remove(bf, "b3"), -ENOENT);
    ck_assert_uint_eq(bucketfile_count(bf), 999);
    ck_assert_str_eq(bucketfile_get(bf, 3)->name, "b4");
    for (int i = 0; i < 1000; i++) {
        snprintf(name, sizeof name, "b%d", i);
        int k = bucketfile_find(bf, name);
        if (i == 3)
            ck_assert_int_eq(k, -ENOENT);
        else
            ck_assert_str_eq(bucketfile_get(bf, (size_t)k)->name, name);
    }
    bucketfile_t *c = bucketfile_dup(bf);
    ck_assert_uint_eq(bucketfile_count(c), 999);
    ck_assert_int_eq(bucketfile_find(c, "b999"), 998);
    bucketfile_destroy(&c);
    bucketfile_destroy(&bf);
}
END_TEST

static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

/* Makes a fresh directory from the template dir (in place) and puts in
 * path the file name in it; the test removes both. */
static void temp_file(char *dir, char *path, size_t size, const char *name)
{
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, size, "%s/%s", dir, name);
}

START_TEST(test_bucketfile_save_atomic_roundtrip)
{
    char dir[] = "/tmp/test_bucketfile.XXXXXX";
    char path[256];
    temp_file(dir, path, sizeof path, "buckets.json");
    const char *t = "{\"buckets\":[{\"name\":\"red\",\"reservation\":30000,\"limit\":60000},"
                    "{\"name\":\"q\\\"uote\\\\\",\"reservation\":7,\"weight\":9}]}";
    bucketfile_t *bf = NULL, *back = NULL;
    jsonloc_err_t err;
    ck_assert_int_eq(parse(t, &bf, &err), 0);
    ck_assert_int_eq(bucketfile_save(bf, path, NULL, 0), 0);
    ck_assert_int_eq(count_entries(dir), 1); /* no temporary left */
    ck_assert_int_eq(bucketfile_load(path, &back, &err), 0);
    ck_assert_uint_eq(bucketfile_count(back), 2);
    ck_assert_str_eq(bucketfile_get(back, 1)->name, "q\"uote\\");
    ck_assert_uint_eq(bucketfile_get(back, 1)->weight, 9);
    ck_assert_int_eq(bucketfile_get(back, 0)->limit, 60000);
    ck_assert_int_eq(bucketfile_get(back, 1)->limit, BUCKETFILE_NO_LIMIT);
    bucketfile_destroy(&back);

    /* Mode of an existing file is kept. */
    chmod(path, 0600);
    ck_assert_int_eq(bucketfile_remove(bf, "red"), 0);
    ck_assert_int_eq(bucketfile_save(bf, path, NULL, 0), 0);
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0600);
    ck_assert_int_eq(bucketfile_load(path, &back, &err), 0);
    ck_assert_uint_eq(bucketfile_count(back), 1);
    bucketfile_destroy(&back);

    /* A failed save leaves nothing behind. */
    char bad[300];
    snprintf(bad, sizeof bad, "%s/nodir/b.json", dir);
    ck_assert_int_eq(bucketfile_save(bf, bad, NULL, 0), -ENOENT);
    ck_assert_int_eq(bucketfile_load(bad, &back, &err), -ENOENT);
    ck_assert_msg(strstr(err.text, "cannot read"), "%s", err.text);
    ck_assert_int_eq(count_entries(dir), 1);

    unlink(path);
    rmdir(dir);
    bucketfile_destroy(&bf);
}
END_TEST

START_TEST(test_bucketfile_null_limit)
{
    bucketfile_t *bf = NULL;
    jsonloc_err_t err;
    /* What bqos-ctl --json buckets prints loads back: null is no limit. */
    ck_assert_int_eq(parse("{\"buckets\": [{\"name\": \"a\", \"reservation\": 5, \"limit\": null, "
                           "\"weight\": 2}]}",
                           &bf, &err),
                     0);
    ck_assert_int_eq(bucketfile_get(bf, 0)->limit, BUCKETFILE_NO_LIMIT);
    char *t = bucketfile_dumps(bf);
    ck_assert_ptr_null(strstr(t, "limit")); /* written without one */
    free(t);
    bucketfile_destroy(&bf);
    /* Only the limit may be null. */
    expect_error("{\"buckets\":[{\"name\":\"a\",\"reservation\":null}]}", "buckets[0].reservation", 1,
                 39, "non-negative integer");
    expect_error("{\"buckets\":[{\"name\":\"a\",\"reservation\":1,\"weight\":null}]}",
                 "buckets[0].weight", 1, 50, "non-negative integer");
}
END_TEST

/* Writes text to path. */
static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

/* A bucket file in a new temporary folder dir (a mkdtemp template), at
 * path (cap bytes), holding text: loaded, or the test fails. */
static bucketfile_t *loaded(char *dir, char *path, size_t cap, const char *text)
{
    temp_file(dir, path, cap, "b.json");
    put(path, text);
    bucketfile_t *bf = NULL;
    jsonloc_err_t err;
    ck_assert_int_eq(bucketfile_load(path, &bf, &err), 0);
    return bf;
}

static char *slurp(const char *path)
{
    static char buf[4096];
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

START_TEST(test_bucketfile_save_keeps_format)
{
    char dir[] = "/tmp/test_bucketfile.XXXXXX";
    char path[256];
    /* An operator's layout: odd spacing, members in their own order. */
    bucketfile_t *bf = loaded(dir, path, sizeof path,
                              "{ \"buckets\" : [\n"
                              "    {\"reservation\":100, \"name\":\"red\",   \"limit\":200},\n"
                              "    {\"name\":\"blue\",\"reservation\":10},\n"
                              "    {\"weight\":3,\"name\":\"green\",\"reservation\":1}\n"
                              "  ]\n"
                              "}\n");
    jsonloc_err_t err;
    /* Change one field of blue: only blue's object is rewritten. */
    bucketfile_bucket_t b = *bucketfile_get(bf, 1);
    b.limit = 500;
    ck_assert_int_eq(bucketfile_set(bf, &b, &err), 0);
    char msg[512];
    ck_assert_int_eq(bucketfile_save(bf, path, msg, sizeof msg), 0);
    ck_assert_str_eq(slurp(path),
                     "{ \"buckets\" : [\n"
                     "    {\"reservation\":100, \"name\":\"red\",   \"limit\":200},\n"
                     "    {\"name\": \"blue\", \"reservation\": 10, \"limit\": 500, \"weight\": 1},\n"
                     "    {\"weight\":3,\"name\":\"green\",\"reservation\":1}\n"
                     "  ]\n"
                     "}\n");
    /* Remove the first, add one: it goes last, with the file's separator. */
    ck_assert_int_eq(bucketfile_remove(bf, "red"), 0);
    b = (bucketfile_bucket_t){.name = "pink", .reservation = 7, .limit = BUCKETFILE_NO_LIMIT,
                              .weight = 1};
    ck_assert_int_eq(bucketfile_set(bf, &b, &err), 0);
    ck_assert_int_eq(bucketfile_save(bf, path, msg, sizeof msg), 0);
    ck_assert_str_eq(slurp(path),
                     "{ \"buckets\" : [\n"
                     "    {\"name\": \"blue\", \"reservation\": 10, \"limit\": 500, \"weight\": 1},\n"
                     "    {\"weight\":3,\"name\":\"green\",\"reservation\":1},\n"
                     "    {\"name\": \"pink\", \"reservation\": 7, \"weight\": 1}\n"
                     "  ]\n"
                     "}\n");
    /* Remove the last: its separator goes with it. */
    ck_assert_int_eq(bucketfile_remove(bf, "pink"), 0);
    ck_assert_int_eq(bucketfile_save(bf, path, msg, sizeof msg), 0);
    ck_assert_str_eq(slurp(path),
                     "{ \"buckets\" : [\n"
                     "    {\"name\": \"blue\", \"reservation\": 10, \"limit\": 500, \"weight\": 1},\n"
                     "    {\"weight\":3,\"name\":\"green\",\"reservation\":1}\n"
                     "  ]\n"
                     "}\n");

    /* A hand edit not loaded: the save is refused and the edit kept. */
    const char *edit = "{\"buckets\":[{\"name\":\"hand\",\"reservation\":1}]}\n";
    put(path, edit);
    b = (bucketfile_bucket_t){.name = "blue", .reservation = 11, .limit = BUCKETFILE_NO_LIMIT,
                              .weight = 1};
    ck_assert_int_eq(bucketfile_set(bf, &b, &err), 0);
    ck_assert_int_eq(bucketfile_save(bf, path, msg, sizeof msg), -ESTALE);
    ck_assert_msg(strstr(msg, path) && strstr(msg, "changed on disk") && strstr(msg, "reload"),
                  "%s", msg);
    ck_assert_str_eq(slurp(path), edit);
    /* A copy remembers the file too; a touch (same content) is no change. */
    bucketfile_t *c = NULL;
    ck_assert_int_eq(bucketfile_load(path, &c, &err), 0);
    bucketfile_t *d = bucketfile_dup(c);
    ck_assert_int_eq(utime(path, NULL), 0);
    ck_assert_int_eq(bucketfile_set(d, &b, &err), 0);
    ck_assert_int_eq(bucketfile_save(d, path, msg, sizeof msg), 0);
    ck_assert_int_eq(bucketfile_save(c, path, msg, sizeof msg), -ESTALE); /* d changed it */
    unlink(path);
    ck_assert_int_eq(bucketfile_save(d, path, msg, sizeof msg), -ESTALE); /* removed */
    ck_assert_ptr_nonnull(strstr(msg, "was removed"));
    bucketfile_destroy(&c);
    bucketfile_destroy(&d);
    bucketfile_destroy(&bf);
    rmdir(dir);
}
END_TEST

static void count_report(void *arg, const jsonloc_err_t *err)
{
    char buf[600];
    char *out = arg;
    bucketfile_strerror(err, buf, sizeof buf);
    strcat(out, buf);
    strcat(out, "\n");
}

START_TEST(test_bucketfile_validate_every_problem)
{
    char path[] = "/tmp/test_bucketfile.v.XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    put(path, "{\"buckets\": [\n"
              "  {\"name\": \"a\", \"reservation\": 5, \"limit\": 4},\n"
              "  {\"name\": \"b\", \"reservation\": 1},\n"
              "  {\"name\": \"c\", \"reservation\": 1, \"weight\": 0}\n"
              "]}\n");
    char out[4096] = "";
    ck_assert_int_eq(bucketfile_validate(path, count_report, out), 2);
    char want[1024];
    snprintf(want, sizeof want,
             "%1$s:2:44: buckets[0].limit: limit 4 is below the reservation 5\n"
             "%1$s:4:45: buckets[2].weight: weight must be at least 1\n",
             path);
    ck_assert_str_eq(out, want);
    put(path, "{\"buckets\": [\n");
    out[0] = '\0';
    ck_assert_int_eq(bucketfile_validate(path, count_report, out), 1);
    ck_assert_ptr_nonnull(strstr(out, ":2:")); /* the syntax error, at the end */
    put(path, "{\"buckets\": []}");
    ck_assert_int_eq(bucketfile_validate(path, count_report, out), 0);
    unlink(path);
    out[0] = '\0';
    ck_assert_int_eq(bucketfile_validate(path, count_report, out), 1);
    ck_assert_ptr_nonnull(strstr(out, "cannot read"));
}
END_TEST

/* Byte rates (cost-aware tokens): optional, null or absent is none, they
 * survive a dump and a load, 0 and reservation above limit are refused,
 * and a bucket without them has none (the paper). */
/* Shadow (issue 28): an optional boolean, written only when true, that
 * needs a limit; parse, render, validate. */
START_TEST(test_bucketfile_shadow)
{
    bucketfile_t *bf = NULL;
    jsonloc_err_t err;
    ck_assert_int_eq(parse("{\"buckets\": [{\"name\": \"a\", \"reservation\": 5, \"limit\": 50, "
                           "\"shadow\": true},"
                           "{\"name\": \"b\", \"reservation\": 1, \"limit\": 9, \"shadow\": false},"
                           "{\"name\": \"c\", \"reservation\": 1, \"limit_bytes\": 10, "
                           "\"shadow\": true}]}",
                           &bf, &err),
                     0);
    ck_assert_int_eq(bucketfile_get(bf, 0)->shadow, 1);
    ck_assert_int_eq(bucketfile_get(bf, 1)->shadow, 0);
    ck_assert_int_eq(bucketfile_get(bf, 2)->shadow, 1);
    char *t = bucketfile_dumps(bf);
    ck_assert_ptr_nonnull(strstr(t, "\"limit\": 50, \"weight\": 1, \"shadow\": true}"));
    ck_assert_ptr_null(strstr(t, "false"));
    bucketfile_t *back = NULL;
    ck_assert_int_eq(parse(t, &back, &err), 0);
    ck_assert_int_eq(bucketfile_get(back, 0)->shadow, 1);
    ck_assert_int_eq(bucketfile_get(back, 1)->shadow, 0);
    free(t);
    bucketfile_destroy(&back);
    /* An edit: shadow off and on again; without a limit it is refused. */
    bucketfile_bucket_t x = *bucketfile_get(bf, 0);
    x.shadow = 0;
    ck_assert_int_eq(bucketfile_set(bf, &x, &err), 0);
    ck_assert_int_eq(bucketfile_get(bf, 0)->shadow, 0);
    x.shadow = 1;
    x.limit = BUCKETFILE_NO_LIMIT;
    ck_assert_int_eq(bucketfile_set(bf, &x, &err), -EINVAL);
    ck_assert_str_eq(err.path, "shadow");
    bucketfile_destroy(&bf);
    expect_error("{\"buckets\":[{\"name\":\"a\",\"reservation\":1,\"shadow\":true}]}",
                 "buckets[0].shadow", 1, 50, "needs a limit");
    expect_error("{\"buckets\":[{\"name\":\"a\",\"reservation\":1,\"limit\":2,\"shadow\":1}]}",
                 "buckets[0].shadow", 1, 60, "true or false");
}
END_TEST

START_TEST(test_bucketfile_byte_rates)
{
    bucketfile_t *bf = NULL;
    jsonloc_err_t err;
    ck_assert_int_eq(parse("{\"buckets\": [{\"name\": \"a\", \"reservation\": 5, "
                           "\"reservation_bytes\": 1048576, \"limit_bytes\": 4194304},"
                           "{\"name\": \"b\", \"reservation\": 1, \"limit_bytes\": null},"
                           "{\"name\": \"c\", \"reservation\": 1, \"limit_bytes\": 10}]}",
                           &bf, &err),
                     0);
    const bucketfile_bucket_t *a = bucketfile_get(bf, 0);
    ck_assert_int_eq(a->reservation_bytes, 1048576);
    ck_assert_int_eq(a->limit_bytes, 4194304);
    ck_assert(bucketfile_has_bytes(a));
    ck_assert(!bucketfile_has_bytes(bucketfile_get(bf, 1)));
    ck_assert_int_eq(bucketfile_get(bf, 2)->reservation_bytes, 0);
    char *t = bucketfile_dumps(bf);
    bucketfile_t *back = NULL;
    ck_assert_int_eq(parse(t, &back, &err), 0);
    ck_assert_int_eq(bucketfile_get(back, 0)->limit_bytes, 4194304);
    ck_assert_int_eq(bucketfile_get(back, 2)->limit_bytes, 10);
    ck_assert(!bucketfile_has_bytes(bucketfile_get(back, 1)));
    free(t);
    bucketfile_destroy(&back);
    bucketfile_bucket_t x = *bucketfile_get(bf, 0);
    x.reservation_bytes = x.limit_bytes + 1;
    ck_assert_int_eq(bucketfile_set(bf, &x, &err), -EINVAL);
    ck_assert_str_eq(err.path, "limit_bytes");
    bucketfile_destroy(&bf);
    expect_error("{\"buckets\":[{\"name\":\"a\",\"reservation\":1,\"limit_bytes\":0}]}",
                 "buckets[0].limit_bytes", 1, 55, "at least 1");
    expect_error("{\"buckets\":[{\"name\":\"a\",\"reservation\":1,\"reservation_bytes\":9,"
                 "\"limit_bytes\":8}]}",
                 "buckets[0].limit_bytes", 1, 77, "below reservation_bytes");
}
END_TEST

/* The table's version (issue 26 case 4): an optional top-level
 * "table_version" read, kept by a copy and an edit, written by dumps and
 * by a render that keeps the operator's text (its value replaced in
 * place, or the member put first); 0 writes none; bad values are errors
 * at the member. */
START_TEST(test_bucketfile_table_version)
{
    bucketfile_t *bf = NULL;
    jsonloc_err_t err;
    const char *t = "{\"buckets\": [{\"name\":\"red\", \"reservation\":1}]}";
    ck_assert_int_eq(parse(t, &bf, &err), 0);
    ck_assert_uint_eq(bucketfile_version(bf), 0);
    char *r = bucketfile_render(bf);
    ck_assert_str_eq(r, t); /* none: the text as it was */
    free(r);
    bucketfile_set_version(bf, 7);
    r = bucketfile_render(bf);
    ck_assert_str_eq(r, "{\"table_version\": 7, \"buckets\": [{\"name\":\"red\", \"reservation\":1}]}");
    free(r);
    r = bucketfile_dumps(bf);
    ck_assert_ptr_nonnull(strstr(r, "{\"table_version\": 7, \"buckets\": [\n"));
    free(r);
    bucketfile_t *c = bucketfile_dup(bf);
    ck_assert_uint_eq(bucketfile_version(c), 7);
    bucketfile_destroy(&c);
    bucketfile_destroy(&bf);

    t = "{\"buckets\": [{\"name\":\"red\", \"reservation\":1}],\n \"table_version\" : 41}\n";
    ck_assert_int_eq(parse(t, &bf, &err), 0);
    ck_assert_uint_eq(bucketfile_version(bf), 41);
    bucketfile_bucket_t b = *bucketfile_get(bf, 0);
    b.limit = 5;
    ck_assert_int_eq(bucketfile_set(bf, &b, &err), 0);
    ck_assert_uint_eq(bucketfile_version(bf), 41); /* the caller counts a change */
    bucketfile_set_version(bf, 42);
    r = bucketfile_render(bf);
    ck_assert_str_eq(r, "{\"buckets\": [{\"name\": \"red\", \"reservation\": 1, \"limit\": 5, "
                        "\"weight\": 1}],\n \"table_version\" : 42}\n");
    free(r);
    bucketfile_set_version(bf, BUCKETFILE_MAX_VERSION + 5);
    ck_assert_uint_eq(bucketfile_version(bf), BUCKETFILE_MAX_VERSION);
    bucketfile_destroy(&bf);

    expect_error("{\"table_version\": -1, \"buckets\": []}", "table_version", 1, 19,
                 "table_version must be an integer");
    expect_error("{\"table_version\": \"3\", \"buckets\": []}", "table_version", 1, 19,
                 "table_version must be an integer");
    expect_error("{\"table_version\": 9007199254740993, \"buckets\": []}", "table_version", 1,
                 19, "table_version must be an integer");
    expect_error("{\"version\": 1, \"buckets\": []}", "version", 1, 13, "unknown member");
}
END_TEST

/* File `path` whole (caller frees). */
static char *slurp_all(const char *path)
{
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    char *buf = NULL;
    size_t cap = 0, n = 0, got;
    do {
        if (cap - n < 65536)
            ck_assert_ptr_nonnull(buf = realloc(buf, cap = cap * 2 + 65536));
        got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
    } while (got > 0);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* The text of a big file as the test expects it: line i of `lines` for
 * each kept bucket, "," between them, in a frame of odd spacing. */
static char *big_text(char **lines, size_t n)
{
    size_t len = 64;
    for (size_t i = 0; i < n; i++)
        len += lines[i] ? strlen(lines[i]) + 6 : 0;
    char *t = malloc(len), *p = t;
    ck_assert_ptr_nonnull(t);
    p += sprintf(p, "{ \"buckets\" : [\n");
    int first = 1;
    for (size_t i = 0; i < n; i++) {
        if (!lines[i])
            continue;
        p += sprintf(p, "%s   %s", first ? "" : ",\n", lines[i]);
        first = 0;
    }
    sprintf(p, "\n ]}\n");
    return t;
}

/* Set and remove on a table of 20,000 buckets: the render copies every
 * unchanged object and rewrites only the changed ones, byte for byte
 * what an edit of those lines gives, before and after a save (the saved
 * text is the base of the next edit), and the name index follows the
 * removals. */
START_TEST(test_bucketfile_big_table_edit)
{
    enum { N = 20000, EXTRA = 2 };
    char *lines[N + EXTRA] = {0};
    for (size_t i = 0; i < N; i++) {
        char buf[128];
        snprintf(buf, sizeof buf, "{\"name\":\"t%05zu\" , \"reservation\":%zu,\"limit\":%zu}", i,
                 i % 97, 100 + i);
        lines[i] = strdup(buf);
    }
    char *text = big_text(lines, N);
    char dir[] = "/tmp/test_bucketfile.XXXXXX";
    char path[256], msg[512];
    bucketfile_t *bf = loaded(dir, path, sizeof path, text);
    free(text);
    jsonloc_err_t err;
    ck_assert_uint_eq(bucketfile_count(bf), N);

    /* Change two, remove the first, one in the middle and the last, add two. */
    bucketfile_bucket_t b = *bucketfile_get(bf, 7);
    b.limit = 999999;
    ck_assert_int_eq(bucketfile_set(bf, &b, &err), 0);
    free(lines[7]);
    lines[7] = strdup("{\"name\": \"t00007\", \"reservation\": 7, \"limit\": 999999, \"weight\": 1}");
    b = *bucketfile_get(bf, 19998);
    ck_assert_int_eq(bucketfile_set(bf, &b, &err), 0); /* the same values: no change */
    for (size_t k = 0; k < 3; k++) {
        size_t i = (size_t[]){0, 12345, N - 1}[k];
        ck_assert_int_eq(bucketfile_remove(bf, bucketfile_get(bf, i - k * (i > 0))->name), 0);
        free(lines[i]);
        lines[i] = NULL;
    }
    for (size_t k = 0; k < EXTRA; k++) {
        b = (bucketfile_bucket_t){.reservation = 5, .limit = BUCKETFILE_NO_LIMIT, .weight = 2};
        char nm[32];
        snprintf(nm, sizeof nm, "new%zu", k);
        b.name = nm;
        ck_assert_int_eq(bucketfile_set(bf, &b, &err), 0);
        char buf[128];
        snprintf(buf, sizeof buf, "{\"name\": \"new%zu\", \"reservation\": 5, \"weight\": 2}", k);
        lines[N + k] = strdup(buf);
    }
    char *want = big_text(lines, N + EXTRA), *got = bucketfile_render(bf);
    ck_assert_str_eq(got, want);
    free(got);
    ck_assert_int_eq(bucketfile_save(bf, path, msg, sizeof msg), 0);
    got = slurp_all(path);
    ck_assert_str_eq(got, want);
    free(got);
    free(want);

    /* After the save: edit again (the saved text's spans). */
    b = *bucketfile_get(bf, 100);
    b.reservation = 1;
    ck_assert_int_eq(bucketfile_set(bf, &b, &err), 0);
    free(lines[101]);
    snprintf(msg, sizeof msg, "{\"name\": \"t00101\", \"reservation\": 1, \"limit\": 201, \"weight\": 1}");
    lines[101] = strdup(msg);
    ck_assert_int_eq(bucketfile_remove(bf, "new0"), 0);
    free(lines[N]);
    lines[N] = NULL;
    ck_assert_int_eq(bucketfile_save(bf, path, msg, sizeof msg), 0);
    want = big_text(lines, N + EXTRA);
    got = slurp_all(path);
    ck_assert_str_eq(got, want);
    free(got);
    free(want);

    /* Remove every 37th bucket: each name left is found where it is. */
    for (size_t i = 0; i < N; i += 37)
        if (lines[i]) {
            char name[16];
            snprintf(name, sizeof name, "t%05zu", i);
            ck_assert_int_eq(bucketfile_remove(bf, name), 0);
            ck_assert_int_eq(bucketfile_find(bf, name), -ENOENT);
        }
    for (size_t i = 0; i < bucketfile_count(bf); i++)
        ck_assert_int_eq(bucketfile_find(bf, bucketfile_get(bf, i)->name), (int)i);
    bucketfile_t *back = NULL;
    got = bucketfile_render(bf);
    ck_assert_int_eq(bucketfile_parse(got, strlen(got), NULL, &back, &err), 0);
    ck_assert_uint_eq(bucketfile_count(back), bucketfile_count(bf));
    free(got);
    bucketfile_destroy(&back);
    for (size_t i = 0; i < N + EXTRA; i++)
        free(lines[i]);
    bucketfile_destroy(&bf);
    unlink(path);
    rmdir(dir);
}
END_TEST

/* A copy shares the original's arrays until one of them changes: each
 * change is its own, and either may be destroyed first. */
START_TEST(test_bucketfile_dup_copy_on_write)
{
    const char *text = "{\"buckets\":[{\"name\":\"a\",\"reservation\":1},\n"
                       " {\"name\":\"b\",\"reservation\":2}]}";
    bucketfile_t *o = NULL;
    jsonloc_err_t err;
    ck_assert_int_eq(parse(text, &o, &err), 0);
    bucketfile_t *c1 = bucketfile_dup(o), *c2 = bucketfile_dup(o);
    ck_assert_ptr_eq(bucketfile_get(c1, 0), bucketfile_get(o, 0)); /* shared */
    bucketfile_bucket_t b = *bucketfile_get(c1, 1);
    b.reservation = 9;
    ck_assert_int_eq(bucketfile_set(c1, &b, &err), 0);
    ck_assert_int_eq(bucketfile_remove(c2, "a"), 0);
    ck_assert_int_eq(bucketfile_get(o, 1)->reservation, 2);
    ck_assert_uint_eq(bucketfile_count(o), 2);
    ck_assert_int_eq(bucketfile_get(c1, 1)->reservation, 9);
    ck_assert_uint_eq(bucketfile_count(c2), 1);
    ck_assert_int_eq(bucketfile_find(c2, "b"), 0);
    char *r = bucketfile_render(o);
    ck_assert_str_eq(r, text);
    free(r);
    r = bucketfile_render(c2);
    ck_assert_str_eq(r, "{\"buckets\":[{\"name\":\"b\",\"reservation\":2}]}");
    free(r);
    bucketfile_t *c3 = bucketfile_dup(c1);
    bucketfile_destroy(&o); /* the original first: the copies keep theirs */
    bucketfile_destroy(&c1);
    ck_assert_int_eq(bucketfile_get(c3, 1)->reservation, 9);
    r = bucketfile_render(c3);
    ck_assert_ptr_nonnull(strstr(r, "\"reservation\": 9"));
    free(r);
    bucketfile_destroy(&c3);
    bucketfile_destroy(&c2);
}
END_TEST

/* The merge of issue 26 cases 4 and 5: a "table_version" inserted before
 * the buckets array (or its value grown in place) moves the text the
 * element spans point into; the spans a save records must be the new
 * text's, so the next edit after the save still copies and rewrites the
 * right objects.  A shadow flip is a change: its object is rewritten. */
START_TEST(test_bucketfile_version_spans_shadow)
{
    char dir[] = "/tmp/test_bucketfile.XXXXXX";
    char path[256], msg[512];
    bucketfile_t *bf = loaded(dir, path, sizeof path,
                              "{ \"buckets\" : [\n   {\"name\":\"a\" , \"reservation\":1, \"limit\":5},\n"
                              "   {\"name\":\"b\",\"reservation\":2, \"limit\":6}\n ]}\n");
    jsonloc_err_t err;
    bucketfile_bucket_t b = *bucketfile_get(bf, 1);
    b.shadow = 1;
    ck_assert_int_eq(bucketfile_set(bf, &b, &err), 0);
    bucketfile_set_version(bf, 9);
    ck_assert_int_eq(bucketfile_save(bf, path, msg, sizeof msg), 0);
    char *got = slurp_all(path);
    ck_assert_str_eq(got, "{\"table_version\": 9,  \"buckets\" : [\n"
                          "   {\"name\":\"a\" , \"reservation\":1, \"limit\":5},\n"
                          "   {\"name\": \"b\", \"reservation\": 2, \"limit\": 6, \"weight\": 1, "
                          "\"shadow\": true}\n ]}\n");
    free(got);
    /* After the save (spans of the text with the member): the version
     * grows by a digit, "a" changes, "b" leaves shadow, "c" is added. */
    b = *bucketfile_get(bf, 0);
    b.limit = 50;
    ck_assert_int_eq(bucketfile_set(bf, &b, &err), 0);
    b = *bucketfile_get(bf, 1);
    b.shadow = 0;
    ck_assert_int_eq(bucketfile_set(bf, &b, &err), 0);
    b = (bucketfile_bucket_t){.name = "c", .reservation = 3, .limit = 7, .weight = 1, .shadow = 1};
    ck_assert_int_eq(bucketfile_set(bf, &b, &err), 0);
    bucketfile_set_version(bf, 10);
    bucketfile_t *c = bucketfile_dup(bf);
    ck_assert_uint_eq(bucketfile_version(c), 10);
    ck_assert_int_eq(bucketfile_save(bf, path, msg, sizeof msg), 0);
    const char *want = "{\"table_version\": 10,  \"buckets\" : [\n"
                       "   {\"name\": \"a\", \"reservation\": 1, \"limit\": 50, \"weight\": 1},\n"
                       "   {\"name\": \"b\", \"reservation\": 2, \"limit\": 6, \"weight\": 1},\n"
                       "   {\"name\": \"c\", \"reservation\": 3, \"limit\": 7, \"weight\": 1, "
                       "\"shadow\": true}\n ]}\n";
    got = slurp_all(path);
    ck_assert_str_eq(got, want);
    free(got);
    got = bucketfile_render(c); /* the copy renders the same from the old base */
    ck_assert_str_eq(got, want);
    free(got);
    bucketfile_destroy(&c);
    /* Once more after the second save: only "c" changes. */
    b = *bucketfile_get(bf, 2);
    b.shadow = 0;
    ck_assert_int_eq(bucketfile_set(bf, &b, &err), 0);
    got = bucketfile_render(bf);
    ck_assert_str_eq(got, "{\"table_version\": 10,  \"buckets\" : [\n"
                          "   {\"name\": \"a\", \"reservation\": 1, \"limit\": 50, \"weight\": 1},\n"
                          "   {\"name\": \"b\", \"reservation\": 2, \"limit\": 6, \"weight\": 1},\n"
                          "   {\"name\": \"c\", \"reservation\": 3, \"limit\": 7, \"weight\": 1}\n"
                          " ]}\n");
    bucketfile_t *back = NULL;
    ck_assert_int_eq(bucketfile_parse(got, strlen(got), NULL, &back, &err), 0);
    ck_assert_uint_eq(bucketfile_version(back), 10);
    ck_assert_int_eq(bucketfile_get(back, 2)->shadow, 0);
    bucketfile_destroy(&back);
    free(got);
    bucketfile_destroy(&bf);

    /* The member after the array: its value replaced there, save after
     * save (the span of the value a save writes is recorded too). */
    put(path, "{\"buckets\": [{\"name\":\"a\",\"reservation\":1}],\n \"table_version\": 99}\n");
    ck_assert_int_eq(bucketfile_load(path, &bf, &err), 0);
    for (uint64_t v = 100; v <= 10000; v *= 10) {
        bucketfile_set_version(bf, v);
        ck_assert_int_eq(bucketfile_save(bf, path, msg, sizeof msg), 0);
    }
    got = slurp_all(path);
    ck_assert_str_eq(got,
                     "{\"buckets\": [{\"name\":\"a\",\"reservation\":1}],\n \"table_version\": 10000}\n");
    free(got);
    bucketfile_destroy(&bf);
    unlink(path);
    rmdir(dir);
}
END_TEST

/* bucketfile_remove_swap() moves the last bucket into the hole (O(1)),
 * and the file's order stays: the render writes the text's elements in
 * their order, byte for byte what bucketfile_remove() gives, also after a
 * save (the spans recorded in the order written) and more edits. */
START_TEST(test_bucketfile_remove_swap_keeps_file_order)
{
    enum { N = 2000 };
    char *t = malloc(N * 64 + 64);
    size_t n = (size_t)sprintf(t, "{\"buckets\": [\n");
    for (int i = 0; i < N; i++)
        n += (size_t)sprintf(t + n, "  {\"name\":\"b%d\", \"reservation\": %d}%s\n", i, i,
                             i + 1 < N ? "," : "");
    sprintf(t + n, "]}\n");
    bucketfile_t *a = NULL, *b = NULL;
    ck_assert_int_eq(bucketfile_parse(t, strlen(t), "t", &a, NULL), 0);
    ck_assert_int_eq(bucketfile_parse(t, strlen(t), "t", &b, NULL), 0);
    free(t);
    char dir[] = "/tmp/test_bf_swap.XXXXXX", path[64], msg[256];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/b.json", dir);
    for (int round = 0; round < 3; round++) {
        for (int i = round; i < N; i += 7) {
            char name[16];
            snprintf(name, sizeof name, "b%d", i);
            if (bucketfile_find(a, name) < 0)
                continue;
            ck_assert_int_eq(bucketfile_remove(a, name), 0);
            ck_assert_int_eq(bucketfile_remove_swap(b, name), 0);
            ck_assert_int_lt(bucketfile_find(b, name), 0);
        }
        bucketfile_bucket_t x = {.reservation = round, .limit = BUCKETFILE_NO_LIMIT, .weight = 1};
        char nm[32];
        snprintf(nm, sizeof nm, "new%d", round);
        x.name = nm;
        ck_assert_int_eq(bucketfile_set(a, &x, NULL), 0);
        ck_assert_int_eq(bucketfile_set(b, &x, NULL), 0);
        snprintf(nm, sizeof nm, "b%d", 5 + round * 7 + 1);
        ck_assert_int_eq(bucketfile_set(a, &x, NULL), 0);
        ck_assert_int_eq(bucketfile_set(b, &x, NULL), 0);
        ck_assert_uint_eq(bucketfile_count(a), bucketfile_count(b));
        for (size_t i = 0; i < bucketfile_count(b); i++) /* every name still found */
            ck_assert_int_eq(bucketfile_find(b, bucketfile_get(b, i)->name), (int)i);
        char *ra = bucketfile_render(a), *rb = bucketfile_render(b);
        ck_assert_str_eq(ra, rb);
        free(ra);
        free(rb);
        if (round == 1) { /* a save in between: the next edits render from it */
            ck_assert_int_eq(bucketfile_save(b, path, msg, sizeof msg), 0);
            unlink(path);
            ck_assert_int_eq(bucketfile_save(a, path, msg, sizeof msg), 0);
            unlink(path);
        }
    }
    bucketfile_destroy(&a);
    bucketfile_destroy(&b);
    rmdir(dir);
}
END_TEST

/* Names out of line (issue 26, memory per bucket): a bucket's record holds
 * a pointer, the table its own copy at the name's length; the copy of a
 * removed bucket stays valid while the table lives (the admin's undo puts
 * a removed bucket back from its record); a dup's change and a copy of
 * the rows never touch the original's names; a caller's buffer may change
 * after a set. */
START_TEST(test_bucketfile_names_out_of_line)
{
    /* the record without the inline 251-byte name (was 368 bytes) */
    ck_assert_uint_lt(sizeof(bucketfile_bucket_t), 128);
    const char *t = "{\"buckets\": [{\"name\": \"a\", \"reservation\": 1},"
                    " {\"name\": \"b\", \"reservation\": 2}]}";
    bucketfile_t *bf = NULL;
    ck_assert_int_eq(bucketfile_parse(t, strlen(t), "t", &bf, NULL), 0);
    char buf[BUCKETFILE_NAME_MAX + 1];
    memset(buf, 'x', BUCKETFILE_NAME_MAX);
    buf[BUCKETFILE_NAME_MAX] = '\0';
    bucketfile_bucket_t x = {.name = buf, .reservation = 3, .limit = BUCKETFILE_NO_LIMIT,
                             .weight = 1};
    ck_assert_int_eq(bucketfile_set(bf, &x, NULL), 0); /* a 250-byte name */
    buf[0] = 'y'; /* the caller's buffer is the caller's */
    int i = bucketfile_find(bf, "b");
    ck_assert_int_ge(i, 0);
    bucketfile_bucket_t old = *bucketfile_get(bf, (size_t)i);
    ck_assert_int_eq(bucketfile_remove_swap(bf, "b"), 0);
    ck_assert_str_eq(old.name, "b"); /* still the table's copy */
    ck_assert_int_eq(bucketfile_set(bf, &old, NULL), 0);
    ck_assert_int_ge(bucketfile_find(bf, "b"), 0);
    ck_assert_int_lt(bucketfile_find(bf, buf), 0);
    buf[0] = 'x';
    ck_assert_int_ge(bucketfile_find(bf, buf), 0);
    bucketfile_t *d = bucketfile_dup(bf), *c = bucketfile_copy_rows(bf);
    ck_assert_ptr_nonnull(d);
    ck_assert_ptr_nonnull(c);
    const char *an = bucketfile_get(bf, (size_t)bucketfile_find(bf, "a"))->name;
    bucketfile_bucket_t z = {.name = "z", .reservation = 4, .limit = BUCKETFILE_NO_LIMIT,
                             .weight = 1};
    ck_assert_int_eq(bucketfile_set(d, &z, NULL), 0);
    ck_assert_int_eq(bucketfile_remove_swap(d, "a"), 0);
    ck_assert_int_eq(bucketfile_set(c, &z, NULL), 0);
    bucketfile_destroy(&d);
    bucketfile_destroy(&c);
    ck_assert_str_eq(an, "a"); /* the original's names outlive its copies */
    ck_assert_uint_eq(bucketfile_count(bf), 3);
    ck_assert_int_lt(bucketfile_find(bf, "z"), 0);
    bucketfile_destroy(&bf);
}
END_TEST

START_TEST(test_bucketfile_parent_by_reference)
{
    /* the record without the inline 64-byte parent (was 120 bytes) */
    ck_assert_uint_le(sizeof(bucketfile_bucket_t), 56);
    /* a child before its parent, and one after */
    const char *t = "{\"buckets\": [{\"name\": \"c1\", \"reservation\": 1, \"parent\": \"p\"},"
                    " {\"name\": \"p\", \"reservation\": 2, \"limit\": 100},"
                    " {\"name\": \"solo\", \"reservation\": 1},"
                    " {\"name\": \"c2\", \"reservation\": 1, \"parent\": \"p\"}]}";
    bucketfile_t *bf = NULL;
    ck_assert_int_eq(bucketfile_parse(t, strlen(t), "t", &bf, NULL), 0);
    const char *pn = bucketfile_get(bf, 1)->name;
    /* a child's parent is the parent bucket's own name: nothing more held */
    ck_assert_ptr_eq(bucketfile_get(bf, 0)->parent_name, pn);
    ck_assert_ptr_eq(bucketfile_get(bf, 3)->parent_name, pn);
    ck_assert_ptr_null(bucketfile_get(bf, 2)->parent_name); /* none: NULL */
    ck_assert_str_eq(bucketfile_parent(bucketfile_get(bf, 2)), "");
    /* a parent given from the caller's buffer: the table's is its own */
    char buf[8];
    snprintf(buf, sizeof buf, "p");
    bucketfile_bucket_t x = {.name = "c3", .reservation = 1, .limit = BUCKETFILE_NO_LIMIT,
                             .weight = 1};
    bucketfile_bucket_set_parent(&x, buf);
    ck_assert_int_eq(bucketfile_set(bf, &x, NULL), 0);
    buf[0] = 'q';
    int i3 = bucketfile_find(bf, "c3");
    ck_assert_ptr_eq(bucketfile_get(bf, (size_t)i3)->parent_name, pn);
    /* re-parented in place, then back to none ("" is none) */
    x = *bucketfile_get(bf, (size_t)bucketfile_find(bf, "solo"));
    bucketfile_bucket_set_parent(&x, "c3");
    ck_assert_int_eq(bucketfile_set(bf, &x, NULL), 0);
    ck_assert_str_eq(bucketfile_parent(bucketfile_get(bf, 2)), "c3");
    ck_assert_ptr_eq(bucketfile_get(bf, 2)->parent_name, bucketfile_get(bf, (size_t)i3)->name);
    x.parent_name = "";
    ck_assert_int_eq(bucketfile_set(bf, &x, NULL), 0);
    ck_assert_ptr_null(bucketfile_get(bf, 2)->parent_name);
    /* a dup changed (its rows and names its own), then the original gone:
     * the dup's parents are its own names (ASan: no use after free) */
    bucketfile_t *d = bucketfile_dup(bf);
    ck_assert_ptr_nonnull(d);
    bucketfile_bucket_t z = {.name = "z", .reservation = 4, .limit = BUCKETFILE_NO_LIMIT,
                             .weight = 1};
    ck_assert_int_eq(bucketfile_set(d, &z, NULL), 0);
    bucketfile_t *c = bucketfile_copy_rows(bf);
    ck_assert_ptr_nonnull(c);
    bucketfile_destroy(&bf);
    for (int k = 0; k < 2; k++) {
        bucketfile_t *y = k ? c : d;
        const char *yp = bucketfile_get(y, (size_t)bucketfile_find(y, "p"))->name;
        for (const char *const *n = (const char *const[]){"c1", "c2", "c3", NULL}; *n; n++) {
            const bucketfile_bucket_t *b = bucketfile_get(y, (size_t)bucketfile_find(y, *n));
            ck_assert_ptr_eq(b->parent_name, yp);
            ck_assert_str_eq(bucketfile_parent(b), "p");
        }
        ck_assert_int_eq(bucketfile_remove(y, "p"), -EBUSY);
        /* the last row moves into c1's place, its parent with it */
        ck_assert_int_eq(bucketfile_remove_swap(y, "c1"), 0);
        char *out = bucketfile_dumps(y);
        ck_assert_ptr_nonnull(out);
        ck_assert_msg(strstr(out, "\"name\": \"c3\"") && strstr(out, "\"parent\": \"p\""), "%s",
                      out);
        free(out);
    }
    bucketfile_destroy(&d);
    bucketfile_destroy(&c);
    /* still refused: a parent name over BUCKETFILE_PARENT_MAX bytes */
    char longp[BUCKETFILE_PARENT_MAX + 2];
    memset(longp, 'l', sizeof longp - 1);
    longp[sizeof longp - 1] = '\0';
    bucketfile_bucket_set_parent(&z, longp);
    jsonloc_err_t err;
    ck_assert_int_eq(bucketfile_check_bucket(&z, &err), -EINVAL);
    ck_assert_str_eq(err.path, "parent");
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {test_bucketfile_parse_valid,
                                  test_bucketfile_syntax_error_position,
                                  test_bucketfile_semantic_error_positions,
                                  test_bucketfile_error_positions_subtle, test_bucketfile_edit,
                                  test_bucketfile_shadow,
                                  test_bucketfile_save_atomic_roundtrip,
                                  test_bucketfile_null_limit, test_bucketfile_save_keeps_format,
                                  test_bucketfile_validate_every_problem,
                                  test_bucketfile_byte_rates, test_bucketfile_table_version,
                                  test_bucketfile_big_table_edit,
                                  test_bucketfile_dup_copy_on_write,
                                  test_bucketfile_version_spans_shadow,
                                  test_bucketfile_remove_swap_keeps_file_order,
                                  test_bucketfile_names_out_of_line,
                                  test_bucketfile_parent_by_reference};
    return testlib_run_tests("bucketfile", tests, sizeof tests / sizeof tests[0]);
}
