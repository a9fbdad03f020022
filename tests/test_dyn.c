/* test_dyn.c - Check suite for controller/dyn: the registry of template-made buckets (recognition, bounds, expiry, a rules change). */
#include <check.h>
#include <errno.h>
#include <string.h>

#include "controller/dyn.h"
#include "tests/testlib.h"

static rules_t *load(const char *text)
{
    rules_t *r = NULL;
    ck_assert_int_eq(rules_parse(text, strlen(text), NULL, &r, NULL), 0);
    return r;
}

static const char *const two =
    "[{\"user\":\"*\",\"template\":\"u-{user}\",\"reservation\":5,\"limit\":50},"
    "{\"template\":\"u-{prefix}\",\"limit\":20},{\"template\":\"a-{addr}\"}]";

/* A name is recognised by the first template that could have made it, held
 * to the strictest figures of all that could; other names are not noted;
 * a known name is touched. */
START_TEST(test_dyn_recognise)
{
    rules_t *r = load(two);
    dyn_t *d = dyn_new(8, 8, 3);
    ck_assert_int_eq(dyn_note(d, r, "u-alice", 1), 1);
    ck_assert_int_eq(dyn_note(d, r, "u-alice", 2), 0);
    ck_assert_int_eq(dyn_note(d, r, "zzz", 2), 0);
    ck_assert_int_eq(dyn_note(d, r, "a-1.2.3.4", 2), 1);
    ck_assert_uint_eq(dyn_count(d), 2);
    const dyn_entry_t *e = dyn_get(d, (size_t)dyn_find(d, "u-alice"));
    ck_assert_int_eq(e->rule, 0);
    ck_assert_int_eq(e->reservation, 0); /* u-{prefix} could have made it too: */
    ck_assert_int_eq(e->limit, 20);      /* the strictest of both */
    ck_assert_uint_eq(e->active, 2);
    e = dyn_get(d, (size_t)dyn_find(d, "a-1.2.3.4"));
    ck_assert_int_eq(e->rule, 2);
    ck_assert_int_eq(e->limit, RULES_NO_LIMIT);
    ck_assert_int_eq(dyn_find(d, "zzz"), -ENOENT);
    dyn_destroy(&d);
    rules_destroy(&r);
}
END_TEST

/* Bounds per rule and in all: refused and counted, nothing made. */
START_TEST(test_dyn_bounds)
{
    rules_t *r = load(two);
    dyn_t *d = dyn_new(3, 2, 3);
    ck_assert_int_eq(dyn_note(d, r, "u-a", 1), 1);
    ck_assert_int_eq(dyn_note(d, r, "u-b", 1), 1);
    ck_assert_int_eq(dyn_note(d, r, "u-c", 1), -ENOSPC); /* per rule */
    ck_assert_int_eq(dyn_note(d, r, "a-x", 1), 1);
    ck_assert_int_eq(dyn_note(d, r, "a-y", 1), -ENOSPC); /* in all */
    ck_assert_uint_eq(dyn_count(d), 3);
    ck_assert_uint_eq(dyn_stats(d)->refused, 2);
    ck_assert_uint_eq(dyn_stats(d)->made, 3);
    dyn_destroy(&d);
    ck_assert_ptr_null(dyn_new(0, 1, 1));
    ck_assert_ptr_null(dyn_new(1, 1, 0));
    rules_destroy(&r);
}
END_TEST

static int not_b(void *arg, const char *name)
{
    (void)arg;
    return strcmp(name, "u-b") != 0;
}

/* Idle entries go after idle_periods; the others keep their names and
 * are found again (re-indexed); a rules change keeps what the new rules
 * make, at their figures, and frees the slots of what they do not. */
START_TEST(test_dyn_expire_and_retain)
{
    rules_t *r = load(two);
    dyn_t *d = dyn_new(8, 2, 3);
    ck_assert_int_eq(dyn_note(d, r, "u-a", 1), 1);
    ck_assert_int_eq(dyn_note(d, r, "u-b", 1), 1);
    ck_assert_int_eq(dyn_note(d, r, "a-x", 1), 1);
    dyn_touch(d, (size_t)dyn_find(d, "u-b"), 3);
    ck_assert_uint_eq(dyn_expire(d, 3), 0);
    ck_assert_uint_eq(dyn_expire(d, 4), 2); /* u-a, a-x: idle since 1 */
    ck_assert_uint_eq(dyn_count(d), 1);
    ck_assert_int_eq(dyn_find(d, "u-b"), 0);
    ck_assert_int_eq(dyn_find(d, "u-a"), -ENOENT);
    ck_assert_int_eq(dyn_note(d, r, "u-a", 4), 1); /* its slot is free again */
    ck_assert_int_eq(dyn_note(d, r, "u-c", 4), -ENOSPC);
    rules_t *r2 = load("[{\"template\":\"u-{prefix}\",\"limit\":7}]");
    ck_assert_uint_eq(dyn_retain(d, r2, not_b, NULL), 1); /* u-b: configured now */
    ck_assert_uint_eq(dyn_count(d), 1);
    const dyn_entry_t *e = dyn_get(d, (size_t)dyn_find(d, "u-a"));
    ck_assert_int_eq(e->rule, 0);
    ck_assert_int_eq(e->limit, 7);
    ck_assert_int_eq(e->reservation, 0);
    ck_assert_int_eq(dyn_note(d, r2, "u-c", 4), 1);
    ck_assert_int_eq(dyn_note(d, r2, "u-d", 4), -ENOSPC); /* two per rule under r2 */
    ck_assert_uint_eq(dyn_retain(d, NULL, not_b, NULL), 2); /* no rules: none left */
    ck_assert_uint_eq(dyn_count(d), 0);
    dyn_destroy(&d);
    rules_destroy(&r2);
    rules_destroy(&r);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {test_dyn_recognise, test_dyn_bounds, test_dyn_expire_and_retain};
    return testlib_run_tests("dyn", tests, sizeof tests / sizeof tests[0]);
}
