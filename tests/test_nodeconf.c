/* test_nodeconf.c - Check suite for storage-node/daemon/nodeconf: option values, bucket and token files; nodeargs' connection defaults. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "storage-node/daemon/nodeargs.h"
#include "storage-node/daemon/nodeconf.h"
#include "storage-node/core/sched.h"
#include "tests/testlib.h"

typedef struct {
    int n;
    char names[8][16];
    int64_t a[8], b[8];
} seen_t;

static int on_bucket(void *arg, const char *name, uint32_t weight)
{
    seen_t *s = arg;
    if (strcmp(name, "boom") == 0)
        return -ENOSPC;
    snprintf(s->names[s->n], sizeof s->names[0], "%s", name);
    s->a[s->n++] = weight;
    return 0;
}

static int on_tokens(void *arg, const char *name, int64_t r, int64_t l)
{
    seen_t *s = arg;
    snprintf(s->names[s->n], sizeof s->names[0], "%s", name);
    s->a[s->n] = r;
    s->b[s->n++] = l;
    return 0;
}

START_TEST(test_nodeconf_buckets_file)
{
    seen_t s = {0};
    char *p = testlib_temp_file("{\"buckets\":[{\"name\":\"red\",\"reservation\":5,\"weight\":3},"
                                "{\"name\":\"blue\",\"reservation\":0,\"limit\":9}]}");
    ck_assert_int_eq(nodeconf_load_buckets(p, on_bucket, &s), 0);
    unlink(p);
    ck_assert_int_eq(s.n, 2);
    ck_assert_str_eq(s.names[0], "red");
    ck_assert_int_eq(s.a[0], 3);
    ck_assert_int_eq(s.a[1], 1);
    /* The controller's rule (common/bucketfile): what it refuses, the node refuses. */
    const char *bad[] = {"{\"buckets\":[{\"name\":\"x\",\"reservation\":1,\"weight\":0}]}",
                         "{\"buckets\":{}}", "{\"buckets\":[{\"weight\":1}]}", "{\"buckets\":[", "[]",
                         /* no reservation (the node used to take it) */
                         "{\"buckets\":[{\"name\":\"x\"}]}",
                         /* unknown members, here and at the top */
                         "{\"buckets\":[{\"name\":\"x\",\"reservation\":1,\"limt\":5}]}",
                         "{\"buckets\":[],\"nodes\":[]}",
                         /* weight above 10^6 (the node took up to 2^32 - 1) */
                         "{\"buckets\":[{\"name\":\"x\",\"reservation\":1,\"weight\":1000001}]}",
                         /* ':' in a name, a duplicate name, limit below the reservation */
                         "{\"buckets\":[{\"name\":\"a:b\",\"reservation\":1}]}",
                         "{\"buckets\":[{\"name\":\"x\",\"reservation\":1},{\"name\":\"x\",\"reservation\":1}]}",
                         "{\"buckets\":[{\"name\":\"x\",\"reservation\":5,\"limit\":4}]}"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        s.n = 0;
        p = testlib_temp_file(bad[i]);
        ck_assert_msg(nodeconf_load_buckets(p, on_bucket, &s) == -EINVAL, "accepted %s", bad[i]);
        unlink(p);
        ck_assert_msg(s.n == 0, "%s: add() called before the file was validated", bad[i]);
    }
    /* A bad bucket after good ones: nothing is added. */
    s.n = 0;
    p = testlib_temp_file("{\"buckets\":[{\"name\":\"ok\",\"reservation\":1},{\"name\":\"x\",\"weight\":0}]}");
    ck_assert_int_eq(nodeconf_load_buckets(p, on_bucket, &s), -EINVAL);
    unlink(p);
    ck_assert_int_eq(s.n, 0);
    p = testlib_temp_file("{\"buckets\":[{\"name\":\"boom\",\"reservation\":1}]}");
    ck_assert_int_eq(nodeconf_load_buckets(p, on_bucket, &s), -ENOSPC);
    unlink(p);
    ck_assert_int_eq(nodeconf_load_buckets("/nonexistent/x.json", on_bucket, &s), -EINVAL);
}
END_TEST

START_TEST(test_nodeconf_tokens_file)
{
    seen_t s = {0};
    char *p = testlib_temp_file("{\"red\":{\"r\":10,\"l\":20},\"blue\":{\"l\":null},"
                                "\"green\":{\"r\":1,\"l\":\"unlimited\"},\"bad\":{\"r\":-1}}");
    ck_assert_int_eq(nodeconf_load_tokens(p, on_tokens, &s), -EINVAL); /* "bad" */
    unlink(p);
    ck_assert_int_eq(s.n, 3); /* the good entries are applied */
    ck_assert_str_eq(s.names[0], "red");
    ck_assert_int_eq(s.a[0], 10);
    ck_assert_int_eq(s.b[0], 20);
    ck_assert_int_eq(s.a[1], 0);
    ck_assert_int_eq(s.b[1], SCHED_UNLIMITED);
    ck_assert_int_eq(s.b[2], SCHED_UNLIMITED);
    p = testlib_temp_file("[1,2]");
    ck_assert_int_eq(nodeconf_load_tokens(p, on_tokens, &s), -EINVAL);
    unlink(p);
}
END_TEST

START_TEST(test_nodeconf_check)
{
    /* --check: every bad bucket and token entry, each with its position. */
    char b[64], t[64];
    snprintf(b, sizeof b, "%s", testlib_temp_file("{\"buckets\":[{\"name\":\"a\",\"reservation\":5,\"limit\":1},\n"
                                                  "{\"name\":\"b\",\"reservation\":1,\"limit\":null},\n"
                                                  "{\"name\":\"c\"}]}"));
    snprintf(t, sizeof t, "%s", testlib_temp_file("{\"red\":{\"r\":1},\n \"bad\":{\"r\":-1}}"));
    char errs[4096] = "";
    FILE *mem = fmemopen(errs, sizeof errs, "w");
    ck_assert_ptr_nonnull(mem);
    FILE *saved = stderr;
    stderr = mem;
    int n = nodeconf_check("node", b, t);
    stderr = saved;
    fclose(mem);
    ck_assert_int_eq(n, 3);
    char want[1024];
    snprintf(want, sizeof want,
             "node: %1$s:1:49: buckets[0].limit: limit 1 is below the reservation 5\n"
             "node: %1$s:3:1: buckets[2]: bucket \"c\" has no \"reservation\"\n"
             "node: %2$s:2:8: bad: want {\"r\":N,\"l\":N|null}\n",
             b, t);
    ck_assert_str_eq(errs, want);
    ck_assert_int_eq(nodeconf_check("node", NULL, NULL), 0);
    unlink(b);
    unlink(t);
}
END_TEST

/* Issue 26 case 6: a memcached node closes idle connections after 300 s
 * unless told otherwise (--idle-timeout 0: never, memcached's default). */
START_TEST(test_nodeconf_idle_timeout_default)
{
    char prog[] = "bqos-node", opt[] = "--idle-timeout", zero[] = "0";
    char *argv1[] = {prog, NULL};
    args_t a = {.prog = "bqos-node", .workers = -1, .outstanding = -1, .max_auto = -1,
                .per_ip = -1, .tls = -1};
    ck_assert_int_eq(nodeargs_parse(1, argv1, &a), -1);
    ck_assert(a.idle_timeout == 300);
    char *argv2[] = {prog, opt, zero, NULL};
    args_t b = {.prog = "bqos-node", .workers = -1, .outstanding = -1, .max_auto = -1,
                .per_ip = -1, .tls = -1};
    ck_assert_int_eq(nodeargs_parse(3, argv2, &b), -1);
    ck_assert(b.idle_timeout == 0);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {test_nodeconf_buckets_file, test_nodeconf_tokens_file,
                                  test_nodeconf_check, test_nodeconf_idle_timeout_default};
    return testlib_run_tests("nodeconf", tests, sizeof tests / sizeof tests[0]);
}
