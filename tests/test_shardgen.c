/* test_shardgen.c - Check suite for common/shardgen: the shards key parsed and refused with what and where, the map in force switching at the change's period and not before, a change begun at least two periods ahead, folded once its period has come, and which controllers may run under it. */
#include <check.h>
#include <errno.h>
#include <string.h>

#include "common/shardgen.h"
#include "common/shardmap.h"
#include "tests/testlib.h"

#define S(text) text, strlen(text)

START_TEST(test_shardgen_parse_format)
{
    shardgen_t g;
    shardgen_error_t e;
    ck_assert_int_eq(shardgen_parse(S("{\"k\":2}"), &g, &e), 0); /* before generations */
    ck_assert_int_eq(g.k, 2);
    ck_assert_uint_eq(g.gen, 1);
    ck_assert_int_eq(g.next_k, 0);
    ck_assert_int_eq(shardgen_parse(S("{\"k\":2,\"gen\":4,\"next\":{\"k\":3,\"gen\":5,"
                                      "\"from\":1765000002000},\"x\":1}"),
                                    &g, &e),
                     0);
    ck_assert_int_eq(g.k, 2);
    ck_assert_uint_eq(g.gen, 4);
    ck_assert_int_eq(g.next_k, 3);
    ck_assert_uint_eq(g.next_gen, 5);
    ck_assert_int_eq(g.from_ms, 1765000002000);
    char buf[128];
    int n = shardgen_format(&g, buf, sizeof buf);
    ck_assert_int_gt(n, 0);
    ck_assert_str_eq(buf, "{\"k\":2,\"gen\":4,\"next\":{\"k\":3,\"gen\":5,\"from\":1765000002000}}");
    shardgen_t h;
    ck_assert_int_eq(shardgen_parse(buf, (size_t)n, &h, NULL), 0);
    ck_assert_mem_eq(&g, &h, sizeof g);
    ck_assert_int_eq(shardgen_format(&g, buf, 20), -ENOSPC);
    g.next_gen = 7;
    ck_assert_int_eq(shardgen_format(&g, buf, sizeof buf), -EINVAL);
    shardgen_t s = shardgen_steady(3);
    ck_assert_int_eq(shardgen_format(&s, buf, sizeof buf), 15);
    ck_assert_str_eq(buf, "{\"k\":3,\"gen\":1}");
}
END_TEST

START_TEST(test_shardgen_parse_refuses)
{
    static const struct {
        const char *text, *where;
    } bad[] = {
        {"", ""},
        {"{\"k\":", ""},
        {"[1]", ""},
        {"{}", "k"},
        {"{\"k\":0}", "k"},
        {"{\"k\":257}", "k"},
        {"{\"k\":\"2\"}", "k"},
        {"{\"k\":2,\"gen\":0}", "gen"},
        {"{\"k\":2,\"gen\":1.5}", "gen"},
        {"{\"k\":2,\"next\":3}", "next"},
        {"{\"k\":2,\"next\":{\"gen\":2,\"from\":5}}", "next.k"},
        {"{\"k\":2,\"next\":{\"k\":2,\"gen\":2,\"from\":5}}", "next.k"},
        {"{\"k\":2,\"next\":{\"k\":3,\"gen\":3,\"from\":5}}", "next.gen"},
        {"{\"k\":2,\"next\":{\"k\":3,\"gen\":2}}", "next.from"},
        {"{\"k\":2,\"next\":{\"k\":3,\"gen\":2,\"from\":0}}", "next.from"},
        {"{\"k\":2,\"next\":{\"k\":3,\"gen\":2,\"from\":9007199254740993}}", "next.from"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        shardgen_t g = shardgen_steady(5);
        shardgen_error_t e;
        memset(&e, 0, sizeof e);
        ck_assert_msg(shardgen_parse(bad[i].text, strlen(bad[i].text), &g, &e) == -EINVAL,
                      "accepted %s", bad[i].text);
        ck_assert_msg(strcmp(e.where, bad[i].where) == 0, "%s: where %s, not %s", bad[i].text,
                      e.where, bad[i].where);
        ck_assert(e.what[0]);
        ck_assert_int_eq(g.k, 5); /* untouched */
    }
    shardgen_t g;
    ck_assert_int_eq(shardgen_parse(NULL, 0, &g, NULL), -EINVAL);
}
END_TEST

/* The map switches at the change's period, not before: every name keeps
 * its K = 2 shard in the period before `from`, has its K = 3 shard from
 * the period that starts at `from`; the names that move go to shard 2. */
START_TEST(test_shardgen_switch_at_period)
{
    shardgen_t g = shardgen_steady(2);
    const int64_t period = 1000, now = 1765000000300;
    ck_assert_int_eq(shardgen_begin(&g, 3, now, period, 2), 0);
    ck_assert_int_eq(g.from_ms, 1765000003000); /* >= 2 whole periods from now, on a boundary */
    ck_assert_uint_eq(g.next_gen, 2);
    const int64_t before = g.from_ms - period / 2, at = g.from_ms + period / 2;
    ck_assert_int_eq(shardgen_k_at(&g, before), 2);
    ck_assert_int_eq(shardgen_k_at(&g, g.from_ms - 1), 2);
    ck_assert_int_eq(shardgen_k_at(&g, at), 3);
    ck_assert_uint_eq(shardgen_gen_at(&g, before), 1);
    ck_assert_uint_eq(shardgen_gen_at(&g, at), 2);
    int moved = 0;
    char name[32];
    for (int i = 0; i < 3000; i++) {
        snprintf(name, sizeof name, "b%d", i);
        int a = shardgen_of(&g, name, before), b = shardgen_of(&g, name, at);
        ck_assert_int_eq(a, shardmap_of(name, 2));
        ck_assert_int_eq(b, shardmap_of(name, 3));
        ck_assert(a == b || b == 2);
        ck_assert(shardgen_either(&g, name, a) && shardgen_either(&g, name, b));
        for (int s = 0; s < 3; s++)
            ck_assert_int_eq(shardgen_either(&g, name, s), s == a || s == b);
        moved += a != b;
    }
    ck_assert_int_gt(moved, 800); /* about a third */
    ck_assert_int_lt(moved, 1200);
    ck_assert_int_eq(shardgen_of(&g, NULL, at), -EINVAL);
    ck_assert_int_eq(shardgen_kmax(&g), 3);
}
END_TEST

START_TEST(test_shardgen_begin_settle)
{
    shardgen_t g = shardgen_steady(2);
    const int64_t period = 1000;
    int64_t now = 5000;
    ck_assert_int_eq(shardgen_begin(&g, 2, now, period, 2), -EALREADY);
    ck_assert_int_eq(shardgen_begin(&g, 3, now, period, 1), -EINVAL);
    ck_assert_int_eq(shardgen_begin(&g, 0, now, period, 2), -EINVAL);
    ck_assert_int_eq(shardgen_begin(&g, 3, now, 0, 2), -EINVAL);
    ck_assert_int_eq(shardgen_begin(&g, 3, now, period, 3), 0);
    ck_assert_int_eq(g.from_ms, 9000);
    shardgen_t keep = g;
    ck_assert_int_eq(shardgen_begin(&g, 3, now + 100, period, 2), -EALREADY);
    ck_assert_int_eq(shardgen_begin(&g, 4, 8999, period, 2), -EBUSY);
    ck_assert_mem_eq(&g, &keep, sizeof g);
    ck_assert_int_eq(shardgen_settle(&g, 8999), 0);
    ck_assert_int_eq(shardgen_settle(&g, 9000), 1);
    ck_assert_int_eq(g.k, 3);
    ck_assert_uint_eq(g.gen, 2);
    ck_assert_int_eq(g.next_k, 0);
    /* a change whose period has come is folded in by the next begin */
    g = keep;
    ck_assert_int_eq(shardgen_begin(&g, 1, 9100, period, 2), 0);
    ck_assert_int_eq(g.k, 3);
    ck_assert_uint_eq(g.gen, 2);
    ck_assert_int_eq(g.next_k, 1);
    ck_assert_uint_eq(g.next_gen, 3);
    ck_assert_int_eq(g.from_ms, 12000);
}
END_TEST

START_TEST(test_shardgen_admits)
{
    shardgen_t g = shardgen_steady(2);
    ck_assert(shardgen_admits(&g, 2, 1));
    ck_assert(!shardgen_admits(&g, 3, 2)); /* another K, no change: refused */
    ck_assert(!shardgen_admits(&g, 3, 0));
    ck_assert_int_eq(shardgen_begin(&g, 3, 0, 1000, 2), 0);
    ck_assert(shardgen_admits(&g, 3, 2)); /* the new shard, started before P */
    ck_assert(shardgen_admits(&g, 2, 0)); /* the old ones */
    ck_assert(!shardgen_admits(&g, 4, 3)); /* not a shard g names */
    ck_assert(shardgen_admits(&g, 4, 1));  /* a stale flag, a shard g names */
    shardgen_settle(&g, 3000);
    ck_assert(shardgen_admits(&g, 2, 1)); /* started under K = 2: follows g */
    ck_assert(!shardgen_admits(&g, 5, 4)); /* beyond every shard g names */
}
END_TEST

/* A shard left out: from a shrinking change's period on (not a
 * millisecond before), and until a change names it again, before that
 * change's period. */
START_TEST(test_shardgen_out)
{
    shardgen_t g = shardgen_steady(2);
    ck_assert(!shardgen_out(&g, 0, 0) && !shardgen_out(&g, 1, 0));
    ck_assert(shardgen_out(&g, 2, 0)); /* a slot beyond K */
    ck_assert_int_eq(shardgen_begin(&g, 1, 0, 1000, 2), 0);
    int64_t p = g.from_ms;
    ck_assert(!shardgen_out(&g, 1, p - 1));
    ck_assert(shardgen_out(&g, 1, p));
    ck_assert(!shardgen_out(&g, 0, p));
    shardgen_settle(&g, p);
    ck_assert(shardgen_out(&g, 1, p + 500));
    ck_assert_int_eq(shardgen_begin(&g, 3, p + 1000, 1000, 2), 0); /* back to 3 */
    int64_t q = g.from_ms;
    ck_assert(!shardgen_out(&g, 1, p + 1000) && !shardgen_out(&g, 2, p + 1000));
    ck_assert(!shardgen_out(&g, 2, q));
    ck_assert(shardgen_out(&g, 3, q));
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {test_shardgen_parse_format, test_shardgen_parse_refuses,
                                  test_shardgen_switch_at_period, test_shardgen_begin_settle,
                                  test_shardgen_admits, test_shardgen_out};
    return testlib_run_tests("shardgen", tests, sizeof tests / sizeof tests[0]);
}
