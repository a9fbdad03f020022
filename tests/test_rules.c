/* test_rules.c - Check suite for common/rules: parser errors with positions, each matcher, first match, templates, edits, the shadow analysis. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/bucketfile.h"
#include "common/rules.h"
#include "tests/testlib.h"

static rules_t *load(const char *text)
{
    rules_t *r = NULL;
    jsonloc_err_t err;
    int rc = rules_parse(text, strlen(text), "t.json", &r, &err);
    ck_assert_msg(rc == 0, "%s: %s: %s", text, err.path, err.text);
    return r;
}

static void expect_error(const char *text, const char *path, int line, int col,
                         const char *needle)
{
    rules_t *r = NULL;
    jsonloc_err_t err;
    int rc = rules_parse(text, strlen(text), "t.json", &r, &err);
    ck_assert_msg(rc == -EINVAL, "expected -EINVAL for %s, got %d", text, rc);
    ck_assert_ptr_null(r);
    ck_assert_msg(strcmp(err.path, path) == 0, "path '%s' != '%s' (%s)", err.path, path,
                  err.text);
    ck_assert_msg(err.line == line && err.col == col, "%s: at %d:%d, expected %d:%d (%s)", path,
                  err.line, err.col, line, col, err.text);
    ck_assert_msg(strstr(err.text, needle), "'%s' lacks '%s'", err.text, needle);
}

static rules_subject_t subj(const char *user, const char *v4, rules_op_t op, const char *prefix)
{
    rules_subject_t s = {.user = user, .op = op, .name = prefix, .name_len = strlen(prefix)};
    if (v4) {
        unsigned a, b, c, d;
        ck_assert_int_eq(sscanf(v4, "%u.%u.%u.%u", &a, &b, &c, &d), 4);
        s.family = 4;
        s.addr[0] = (uint8_t)a;
        s.addr[1] = (uint8_t)b;
        s.addr[2] = (uint8_t)c;
        s.addr[3] = (uint8_t)d;
    }
    return s;
}

START_TEST(test_rules_parse_errors_with_position)
{
    expect_error("[\n {\"user\":\"a\",\"bucket\":\"a\"},\n {\"user\":\"b\",\"buckt\":\"b\"}\n]",
                 "[1].buckt", 3, 22, "unknown member");
    expect_error("{\"rules\":[\n {\"addr\":\"10.0.0.1/8\",\"deny\":true}]}", "rules[0].addr", 2,
                 10, "bits set past");
    expect_error("{\"rules\":[{\"addr\":\"10.0.0.300\",\"deny\":true}]}", "rules[0].addr", 1, 19,
                 "not an IPv4");
    expect_error("[{\"op\":\"wrte\",\"deny\":true}]", "[0].op", 1, 8, "op must be one of");
    expect_error("[{\"user\":\"a\"}]", "[0]", 1, 2, "exactly one action");
    expect_error("[{\"bucket\":\"a\",\"deny\":true}]", "[0]", 1, 2, "exactly one action");
    expect_error("[{\"bucket\":\"a:b\"}]", "[0].bucket", 1, 12, "bucket name");
    expect_error("[{\"template\":\"t-{usr}\"}]", "[0].template", 1, 14, "placeholders");
    expect_error("[{\"template\":\"fixed\"}]", "[0].template", 1, 14, "needs {user}");
    expect_error("[{\"template\":\"a:{user}\"}]", "[0].template", 1, 14, "bucket-name");
    expect_error("[{\"template\":\"{user}\",\"reservation\":10,\"limit\":5}]", "[0].limit", 1, 48,
                 "below the reservation");
    expect_error("[{\"bucket\":\"a\",\"limit\":5}]", "[0].limit", 1, 24, "template rule");
    expect_error("[{\"name\":\"x\",\"deny\":true},{\"name\":\"x\",\"deny\":true}]", "[1].name", 1,
                 35, "duplicate rule name");
    expect_error("[{\"name\":\"12\",\"deny\":true}]", "[0].name", 1, 10, "all digits");
    expect_error("{\"rules\":7}", "rules", 1, 10, "must be an array");
    expect_error("[{\"deny\":true},]", "", 1, 16, "");
}
END_TEST

START_TEST(test_rules_each_matcher)
{
    rules_t *r = load("[{\"user\":\"alice\",\"bucket\":\"u\"},"
                      "{\"cert\":\"node-*\",\"bucket\":\"c\"},"
                      "{\"psk\":\"p?\",\"bucket\":\"p\"},"
                      "{\"addr\":[\"10.1.0.0/16\",\"2001:db8::/32\"],\"bucket\":\"a\"},"
                      "{\"op\":[\"delete\",\"nbd-trim\"],\"bucket\":\"o\"},"
                      "{\"key\":\"tmp*\",\"bucket\":\"k\"}]");
    rules_result_t res;
    rules_subject_t s = subj("alice", NULL, RULES_OP_READ, "x");
    ck_assert_int_eq(rules_match(r, &s, &res), RULES_BUCKET);
    ck_assert_str_eq(res.bucket, "u");
    ck_assert_int_eq(res.rule, 0);
    s = subj("alic", NULL, RULES_OP_READ, "x");
    ck_assert_int_eq(rules_match(r, &s, &res), RULES_NONE);
    ck_assert_int_eq(res.rule, -1);
    s = subj(NULL, NULL, RULES_OP_READ, "x");
    s.cert_name = "node-7";
    ck_assert_int_eq(rules_match(r, &s, &res), RULES_BUCKET);
    ck_assert_str_eq(res.bucket, "c");
    s.cert_name = "nod";
    s.psk_id = "p1";
    rules_match(r, &s, &res);
    ck_assert_str_eq(res.bucket, "p");
    s.psk_id = "p12";
    ck_assert_int_eq(rules_match(r, &s, &res), RULES_NONE);
    s = subj(NULL, "10.1.200.3", RULES_OP_WRITE, "x");
    rules_match(r, &s, &res);
    ck_assert_str_eq(res.bucket, "a");
    s = subj(NULL, "10.2.0.1", RULES_OP_WRITE, "x");
    ck_assert_int_eq(rules_match(r, &s, &res), RULES_NONE);
    s.family = 6;
    memset(s.addr, 0, 16);
    s.addr[0] = 0x20, s.addr[1] = 0x01, s.addr[2] = 0x0d, s.addr[3] = 0xb8, s.addr[15] = 1;
    rules_match(r, &s, &res);
    ck_assert_str_eq(res.bucket, "a");
    s = subj(NULL, NULL, RULES_OP_DELETE, "x");
    rules_match(r, &s, &res);
    ck_assert_str_eq(res.bucket, "o");
    s.op = RULES_OP_NBD_TRIM;
    rules_match(r, &s, &res);
    ck_assert_str_eq(res.bucket, "o");
    s.op = RULES_OP_NBD_FLUSH;
    ck_assert_int_eq(rules_match(r, &s, &res), RULES_NONE);
    s = subj(NULL, NULL, RULES_OP_TOUCH, "tmpfiles");
    rules_match(r, &s, &res);
    ck_assert_str_eq(res.bucket, "k");
    s = subj(NULL, NULL, RULES_OP_TOUCH, "tm");
    ck_assert_int_eq(rules_match(r, &s, &res), RULES_NONE);
    /* a key prefix is not NUL-terminated: only name_len bytes count */
    s = subj(NULL, NULL, RULES_OP_TOUCH, "tmpX");
    s.name_len = 2;
    ck_assert_int_eq(rules_match(r, &s, &res), RULES_NONE);
    rules_destroy(&r);
}
END_TEST

START_TEST(test_rules_first_match_wins)
{
    rules_t *r = load("[{\"user\":\"bob\",\"key\":\"alice\",\"deny\":true},"
                      "{\"user\":\"bob\",\"op\":\"write\",\"bucket\":\"bob-w\"},"
                      "{\"user\":\"bob\",\"bucket\":\"bob\"},"
                      "{\"user\":\"alice\",\"bucket\":\"alice\"},"
                      "{\"deny\":true}]");
    rules_result_t res;
    rules_subject_t s = subj("bob", NULL, RULES_OP_WRITE, "alice");
    ck_assert_int_eq(rules_match(r, &s, &res), RULES_DENY);
    ck_assert_int_eq(res.rule, 0);
    s = subj("bob", NULL, RULES_OP_WRITE, "bob");
    rules_match(r, &s, &res);
    ck_assert_str_eq(res.bucket, "bob-w");
    s.op = RULES_OP_READ;
    rules_match(r, &s, &res);
    ck_assert_str_eq(res.bucket, "bob");
    s = subj("alice", NULL, RULES_OP_WRITE, "bob");
    rules_match(r, &s, &res);
    ck_assert_str_eq(res.bucket, "alice");
    s = subj("carol", NULL, RULES_OP_WRITE, "bob");
    ck_assert_int_eq(rules_match(r, &s, &res), RULES_DENY);
    ck_assert_int_eq(res.rule, 4);
    /* an empty list matches nothing */
    rules_t *e = rules_new();
    ck_assert_int_eq(rules_match(e, &s, &res), RULES_NONE);
    rules_destroy(&e);
    rules_destroy(&r);
}
END_TEST

START_TEST(test_rules_templates)
{
    rules_t *r = load("[{\"user\":\"*\",\"op\":\"write\",\"template\":\"w-{user}\","
                      "\"reservation\":10,\"limit\":100},"
                      "{\"addr\":\"192.168.0.0/16\",\"template\":\"h-{addr}-{prefix}\"},"
                      "{\"addr\":\"::/0\",\"template\":\"h-{addr}\"}]");
    rules_result_t res;
    rules_subject_t s = subj("alice", "10.0.0.1", RULES_OP_WRITE, "k");
    ck_assert_int_eq(rules_match(r, &s, &res), RULES_TEMPLATE);
    ck_assert_str_eq(res.bucket, "w-alice");
    ck_assert_int_eq(res.reservation, 10);
    ck_assert_int_eq(res.limit, 100);
    s = subj(NULL, "192.168.3.4", RULES_OP_WRITE, "k");
    ck_assert_int_eq(rules_match(r, &s, &res), RULES_TEMPLATE);
    ck_assert_str_eq(res.bucket, "h-192.168.3.4-k");
    ck_assert_int_eq(res.limit, RULES_NO_LIMIT);
    /* {prefix} of an empty prefix makes no name: refused, not "h-...-" */
    s = subj(NULL, "192.168.3.4", RULES_OP_WRITE, "");
    ck_assert_int_eq(rules_match(r, &s, &res), RULES_BAD_NAME);
    s.family = 6;
    memset(s.addr, 0, 16);
    s.addr[15] = 1;
    ck_assert_int_eq(rules_match(r, &s, &res), RULES_TEMPLATE);
    ck_assert_str_eq(res.bucket, "h-0-0-0-0-0-0-0-1");
    /* a user that is no bucket name (':') makes no bucket */
    s = subj("a:b", NULL, RULES_OP_WRITE, "k");
    ck_assert_int_eq(rules_match(r, &s, &res), RULES_BAD_NAME);
    /* a 250-byte user makes a name past NAMES_MAX */
    char big[251];
    memset(big, 'u', 250);
    big[250] = 0;
    s = subj(big, NULL, RULES_OP_WRITE, "k");
    ck_assert_int_eq(rules_match(r, &s, &res), RULES_BAD_NAME);
    rules_destroy(&r);
}
END_TEST

static void count_warn(void *arg, size_t i, const char *text)
{
    char *out = arg;
    size_t n = strlen(out);
    snprintf(out + n, 1024 - n, "%zu:%s|", i, text);
}

static char *analyze(const char *text)
{
    static char out[1024];
    out[0] = 0;
    rules_t *r = load(text);
    rules_analyze(r, count_warn, out);
    rules_destroy(&r);
    return out;
}

START_TEST(test_rules_analysis)
{
    /* shadowed: an earlier rule covers every field */
    ck_assert_ptr_nonnull(strstr(analyze("[{\"deny\":true},{\"user\":\"a\",\"bucket\":\"a\"}]"),
                                 "1:rule 1 is shadowed by rule 0"));
    ck_assert_ptr_nonnull(strstr(analyze("[{\"user\":\"a*\",\"bucket\":\"x\"},"
                                         "{\"user\":\"ab?\",\"op\":\"read\",\"bucket\":\"y\"}]"),
                                 "shadowed by rule 0"));
    ck_assert_ptr_nonnull(strstr(analyze("[{\"addr\":\"10.0.0.0/8\",\"bucket\":\"x\"},"
                                         "{\"addr\":[\"10.1.0.0/16\",\"10.2.3.4\"],"
                                         "\"bucket\":\"y\"}]"),
                                 "shadowed"));
    ck_assert_ptr_nonnull(strstr(analyze("[{\"op\":[\"read\",\"write\"],\"bucket\":\"x\"},"
                                         "{\"op\":\"write\",\"key\":\"k\",\"bucket\":\"y\"}]"),
                                 "shadowed"));
    /* not shadowed: a field the earlier rule does not cover */
    ck_assert_str_eq(analyze("[{\"user\":\"a\",\"bucket\":\"a\"},{\"deny\":true}]"), "");
    ck_assert_str_eq(analyze("[{\"op\":\"read\",\"bucket\":\"x\"},"
                             "{\"op\":[\"read\",\"write\"],\"bucket\":\"y\"}]"),
                     "");
    ck_assert_str_eq(analyze("[{\"addr\":\"10.1.0.0/16\",\"bucket\":\"x\"},"
                             "{\"addr\":\"10.0.0.0/8\",\"bucket\":\"y\"}]"),
                     "");
    ck_assert_str_eq(analyze("[{\"user\":\"*\",\"bucket\":\"x\"},{\"bucket\":\"y\"}]"), "");
    ck_assert_str_eq(analyze("[{\"user\":\"a*b\",\"bucket\":\"x\"},{\"user\":\"a*\","
                             "\"bucket\":\"y\"}]"),
                     "");
    /* contradictions within one rule */
    ck_assert_ptr_nonnull(strstr(analyze("[{\"cert\":\"x\",\"psk\":\"y\",\"deny\":true}]"),
                                 "never match"));
    ck_assert_ptr_nonnull(strstr(analyze("[{\"op\":\"nbd-write\",\"template\":\"{user}\"}]"),
                                 "no login user"));
}
END_TEST

/* Two template rules: a request both could match (the later only partly
 * matches), or two templates that could make one bucket name (issue 27). */
START_TEST(test_rules_ambiguous_templates)
{
    /* a request of alice matches both: the second takes only the others */
    const char *t = analyze("[{\"user\":\"a*\",\"template\":\"a-{user}\"},"
                            "{\"user\":\"*e\",\"template\":\"e-{user}\"}]");
    ck_assert_ptr_nonnull(strstr(t, "1:rule 1 is ambiguous with template rule 0"));
    ck_assert_ptr_null(strstr(t, "same bucket name"));
    /* disjoint users, ops, addresses, cert against psk: no overlap */
    ck_assert_str_eq(analyze("[{\"user\":\"a*\",\"template\":\"a-{user}\"},"
                             "{\"user\":\"b*\",\"template\":\"b-{user}\"}]"),
                     "");
    ck_assert_str_eq(analyze("[{\"op\":\"read\",\"template\":\"r-{user}\"},"
                             "{\"op\":\"write\",\"template\":\"w-{user}\"}]"),
                     "");
    ck_assert_str_eq(analyze("[{\"addr\":\"10.0.0.0/8\",\"template\":\"a-{addr}\"},"
                             "{\"addr\":\"11.0.0.0/8\",\"template\":\"b-{addr}\"}]"),
                     "");
    ck_assert_str_eq(analyze("[{\"cert\":\"*\",\"template\":\"c-{prefix}\"},"
                             "{\"psk\":\"*\",\"template\":\"p-{prefix}\"}]"),
                     "");
    ck_assert_str_eq(analyze("[{\"key\":\"ab*c\",\"template\":\"x-{user}\"},"
                             "{\"key\":\"ab*d\",\"template\":\"y-{user}\"}]"),
                     "");
    ck_assert_ptr_nonnull(strstr(analyze("[{\"key\":\"ab*\",\"template\":\"x-{user}\"},"
                                         "{\"key\":\"*bc\",\"template\":\"y-{user}\"}]"),
                                 "ambiguous"));
    /* the same name from two templates with different figures */
    t = analyze("[{\"op\":\"read\",\"template\":\"u-{user}\",\"limit\":100},"
                "{\"op\":\"write\",\"template\":\"u-{prefix}\",\"limit\":50}]");
    ck_assert_ptr_nonnull(strstr(t, "1:rule 1's template 'u-{prefix}' and rule 0's 'u-{user}' "
                                    "could make the same bucket name"));
    ck_assert_ptr_null(strstr(t, "ambiguous"));
    ck_assert_ptr_nonnull(strstr(analyze("[{\"op\":\"read\",\"template\":\"{user}-r\"},"
                                         "{\"op\":\"write\",\"template\":\"x{prefix}\"}]"),
                                 "same bucket name"));
    /* ... but not the same template with the same figures (one bucket on
     * purpose), nor templates whose literal text differs */
    ck_assert_str_eq(analyze("[{\"op\":\"read\",\"template\":\"u-{user}\",\"limit\":9},"
                             "{\"op\":\"write\",\"template\":\"u-{user}\",\"limit\":9}]"),
                     "");
    ck_assert_str_eq(analyze("[{\"op\":\"read\",\"template\":\"r-{user}\"},"
                             "{\"op\":\"write\",\"template\":\"w-{user}\"}]"),
                     "");
    ck_assert_str_eq(analyze("[{\"op\":\"read\",\"template\":\"{user}-r\"},"
                             "{\"op\":\"write\",\"template\":\"{user}-w\"}]"),
                     "");
    /* a template against a named bucket: not a template pair */
    ck_assert_str_eq(analyze("[{\"bucket\":\"u-x\",\"user\":\"x\"},"
                             "{\"template\":\"u-{user}\"}]"),
                     "");
}
END_TEST

START_TEST(test_rules_edits)
{
    rules_t *r = load("[{\"name\":\"a\",\"user\":\"a\",\"bucket\":\"a\"}]");
    jsonloc_err_t err;
    const char *b = "{\"name\":\"b\",\"user\":\"b\",\"bucket\":\"b\"}";
    ck_assert_int_eq(rules_insert(r, 99, b, strlen(b), &err), 0);
    const char *c = "{\"name\":\"c\",\"deny\":true}";
    ck_assert_int_eq(rules_insert(r, 0, c, strlen(c), &err), 0);
    ck_assert_uint_eq(rules_count(r), 3);
    ck_assert_str_eq(rules_name(r, 0), "c");
    ck_assert_int_eq(rules_find(r, "b"), 2);
    ck_assert_int_eq(rules_find(r, "1"), 1);
    ck_assert_int_eq(rules_find(r, "9"), -ENOENT);
    ck_assert_int_eq(rules_move(r, 0, 2), 0);
    ck_assert_str_eq(rules_name(r, 2), "c");
    ck_assert_str_eq(rules_name(r, 0), "a");
    const char *bad = "{\"name\":\"x\",\"buckett\":\"b\"}";
    ck_assert_int_eq(rules_insert(r, 0, bad, strlen(bad), &err), -EINVAL);
    ck_assert_str_eq(err.path, "buckett");
    ck_assert_int_eq(err.col, 23);
    const char *dup = "{\"name\":\"a\",\"deny\":true}";
    ck_assert_int_eq(rules_insert(r, 3, dup, strlen(dup), &err), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err.text, "duplicate"));
    ck_assert_uint_eq(rules_count(r), 3);
    const char *b2 = "{\"name\":\"b\",\"user\":\"b\",\"bucket\":\"b2\"}";
    ck_assert_int_eq(rules_replace(r, 1, b2, strlen(b2), &err), 0);
    rules_result_t res;
    rules_subject_t s = subj("b", NULL, RULES_OP_READ, "");
    rules_match(r, &s, &res);
    ck_assert_str_eq(res.bucket, "b2");
    ck_assert_int_eq(rules_remove(r, 1), 0);
    ck_assert_int_eq(rules_remove(r, 5), -ENOENT);
    ck_assert_int_eq(rules_match(r, &s, &res), RULES_DENY);
    /* dumps loads back to an equal list */
    char *t = rules_dumps(r);
    rules_t *again = load(t);
    ck_assert(rules_equal(r, again));
    rules_t *d = rules_dup(r);
    ck_assert(rules_equal(d, again));
    free(t);
    rules_destroy(&d);
    rules_destroy(&again);
    rules_destroy(&r);
    ck_assert_ptr_null(r);
}
END_TEST

/* More than 64 rules (several bitset words), exact users indexed: the
 * index must find the same first match as a plain scan. */
START_TEST(test_rules_many_words)
{
    char *t = malloc(200 * 64), *w = t;
    w += sprintf(w, "[");
    for (int i = 0; i < 150; i++)
        w += sprintf(w, "%s{\"user\":\"u%d\",\"op\":\"%s\",\"key\":\"k%d\",\"bucket\":\"b%d\"}",
                     i ? "," : "", i % 50, i % 2 ? "write" : "read", i / 50, i);
    w += sprintf(w, ",{\"user\":\"u*\",\"template\":\"t-{user}\"}]");
    rules_t *r = load(t);
    rules_result_t res;
    char user[16], key[16];
    for (int i = 0; i < 150; i++) {
        snprintf(user, sizeof user, "u%d", i % 50);
        snprintf(key, sizeof key, "k%d", i / 50);
        rules_subject_t s = subj(user, NULL, i % 2 ? RULES_OP_WRITE : RULES_OP_READ, key);
        ck_assert_int_eq(rules_match(r, &s, &res), RULES_BUCKET);
        ck_assert_int_eq(res.rule, i);
    }
    rules_subject_t s = subj("u3", NULL, RULES_OP_READ, "k9");
    ck_assert_int_eq(rules_match(r, &s, &res), RULES_TEMPLATE);
    ck_assert_str_eq(res.bucket, "t-u3");
    free(t);
    rules_destroy(&r);
}
END_TEST

/* The bucket file's "rules" member: parsed with positions, kept through
 * a bucket edit's render as written, rewritten after a rules change, and
 * shared by a dup. */
START_TEST(test_rules_bucketfile_member)
{
    const char *t = "{\"buckets\": [{\"name\":\"a\",\"reservation\":1}],\n"
                    " \"rules\": [ {\"user\":\"a\",  \"bucket\":\"a\"} ]}";
    bucketfile_t *bf = NULL;
    jsonloc_err_t err;
    ck_assert_int_eq(bucketfile_parse(t, strlen(t), "b.json", &bf, &err), 0);
    ck_assert_uint_eq(rules_count(bucketfile_rules(bf)), 1);
    bucketfile_bucket_t b = {.name = "z", .reservation = 2, .limit = BUCKETFILE_NO_LIMIT,
                             .weight = 1};
    ck_assert_int_eq(bucketfile_set(bf, &b, &err), 0);
    char *r = bucketfile_render(bf);
    ck_assert_ptr_nonnull(strstr(r, "\"rules\": [ {\"user\":\"a\",  \"bucket\":\"a\"} ]"));
    free(r);
    bucketfile_t *d = bucketfile_dup(bf);
    rules_t *nr = NULL;
    const char *two = "[{\"deny\":true},{\"user\":\"b\",\"bucket\":\"b\"}]";
    ck_assert_int_eq(rules_parse(two, strlen(two), NULL, &nr, &err), 0);
    ck_assert_int_eq(bucketfile_set_rules(bf, nr), 0);
    ck_assert_uint_eq(rules_count(bucketfile_rules(d)), 1);
    r = bucketfile_render(bf);
    bucketfile_t *again = NULL;
    ck_assert_int_eq(bucketfile_parse(r, strlen(r), "r", &again, &err), 0);
    ck_assert(rules_equal(bucketfile_rules(again), bucketfile_rules(bf)));
    ck_assert_int_eq(bucketfile_find(again, "z"), 1);
    free(r);
    bucketfile_destroy(&again);
    bucketfile_destroy(&d);
    ck_assert_int_eq(bucketfile_set_rules(bf, NULL), 0);
    r = bucketfile_dumps(bf);
    ck_assert_ptr_null(strstr(r, "rules"));
    free(r);
    bucketfile_destroy(&bf);
    const char *bad = "{\"buckets\": [],\n \"rules\": [{\"deny\":true},\n  {\"op\":\"x\","
                      "\"deny\":true}]}";
    ck_assert_int_eq(bucketfile_parse(bad, strlen(bad), "b.json", &bf, &err), -EINVAL);
    ck_assert_str_eq(err.path, "rules[1].op");
    ck_assert_int_eq(err.line, 3);
    ck_assert_int_eq(err.col, 9);
    ck_assert_str_eq(err.source, "b.json");
}
END_TEST

/* rules_template_made(): the controller's recognition of a name a node's
 * template made: literal text matched, each placeholder at least one
 * byte; every name a template expands to is recognised. */
START_TEST(test_rules_template_made)
{
    rules_t *r = load("[{\"user\":\"*\",\"template\":\"u-{user}-x\",\"reservation\":3,\"limit\":9},"
                      "{\"template\":\"{prefix}.{addr}\"},{\"bucket\":\"b\"}]");
    ck_assert_int_eq(rules_template_made(r, 0, "u-alice-x"), 1);
    ck_assert_int_eq(rules_template_made(r, 0, "u-a-x-x"), 1);   /* the placeholder takes "a-x" */
    ck_assert_int_eq(rules_template_made(r, 0, "u--x"), 0);      /* empty entity */
    ck_assert_int_eq(rules_template_made(r, 0, "u-alice"), 0);
    ck_assert_int_eq(rules_template_made(r, 0, "v-alice-x"), 0);
    ck_assert_int_eq(rules_template_made(r, 1, "k.10.0.0.1"), 1);
    ck_assert_int_eq(rules_template_made(r, 1, "k10"), 0);
    ck_assert_int_eq(rules_template_made(r, 1, "k."), 0);
    ck_assert_int_eq(rules_template_made(r, 2, "b"), 0);         /* not a template */
    ck_assert_int_eq(rules_template_made(r, 9, "b"), 0);
    int64_t res, lim;
    ck_assert_int_eq(rules_template_rates(r, 0, &res, &lim), 0);
    ck_assert_int_eq(res, 3);
    ck_assert_int_eq(lim, 9);
    ck_assert_int_eq(rules_template_rates(r, 1, &res, &lim), 0);
    ck_assert_int_eq(lim, RULES_NO_LIMIT);
    ck_assert_int_eq(rules_template_rates(r, 2, &res, &lim), -EINVAL);
    /* what a match expands to is recognised */
    rules_subject_t s = subj("bob", "10.1.2.3", RULES_OP_READ, "k");
    rules_result_t m;
    ck_assert_int_eq(rules_match(r, &s, &m), RULES_TEMPLATE);
    ck_assert_int_eq(rules_template_made(r, (size_t)m.rule, m.bucket), 1);
    rules_destroy(&r);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {test_rules_parse_errors_with_position, test_rules_each_matcher,
                                  test_rules_first_match_wins, test_rules_templates,
                                  test_rules_analysis, test_rules_ambiguous_templates, test_rules_edits, test_rules_many_words,
                                  test_rules_bucketfile_member, test_rules_template_made};
    return testlib_run_tests("rules", tests, sizeof tests / sizeof tests[0]);
}
