/* test_names.c - Check suite for common/names: the bucket and node name rule. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/names.h"
#include "common/proto.h"
#include "tests/testlib.h"

#define CHECK(f, s) f(s, strlen(s))

START_TEST(test_names_accepts_printable_and_utf8)
{
    ck_assert_int_eq(CHECK(names_check, "b1"), 0);
    ck_assert_int_eq(CHECK(names_check, "node-7.example_x"), 0);
    ck_assert_int_eq(CHECK(names_check, "caf\xc3\xa9"), 0); /* bytes >= 0x80 are fine */
    ck_assert_int_eq(CHECK(names_check, "a:b"), 0);         /* a node name may hold ':' */
    char max[NAMES_MAX + 2];
    memset(max, 'x', sizeof max);
    ck_assert_int_eq(names_check(max, NAMES_MAX), 0);
    ck_assert_int_eq(names_check(max, NAMES_MAX + 1), -EINVAL);
    /* len, not the NUL, ends the name */
    ck_assert_int_eq(names_check("abc", 2), 0);
}
END_TEST

START_TEST(test_names_rejects_empty_space_control)
{
    ck_assert_int_eq(names_check(NULL, 1), -EINVAL);
    ck_assert_int_eq(names_check("", 0), -EINVAL);
    ck_assert_int_eq(CHECK(names_check, "a b"), -EINVAL);
    ck_assert_int_eq(CHECK(names_check, "a\tb"), -EINVAL);
    ck_assert_int_eq(CHECK(names_check, "a\x7f"), -EINVAL);
    ck_assert_int_eq(CHECK(names_check, "\x01"), -EINVAL);
    ck_assert_int_eq(names_check("a\0b", 3), -EINVAL); /* an embedded NUL */
}
END_TEST

START_TEST(test_names_bucket_has_no_colon)
{
    ck_assert_int_eq(CHECK(names_check_bucket, "b1"), 0);
    ck_assert_int_eq(CHECK(names_check_bucket, "a:b"), -EINVAL);
    ck_assert_int_eq(CHECK(names_check_bucket, ":"), -EINVAL);
    ck_assert_int_eq(CHECK(names_check_bucket, "a b"), -EINVAL);
    ck_assert_int_eq(names_check_bucket("", 0), -EINVAL);
}
END_TEST

/* The protocol's check is this rule. */
START_TEST(test_names_is_the_protocol_rule)
{
    static const char *const cases[] = {"b1", "a:b", "a b", "", "x\x7f", "caf\xc3\xa9", "\x1f"};
    ck_assert_int_eq(PROTO_NAME_MAX, NAMES_MAX);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        ck_assert_int_eq(proto_name_check(cases[i], strlen(cases[i])),
                         names_check(cases[i], strlen(cases[i])));
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {test_names_accepts_printable_and_utf8,
                                  test_names_rejects_empty_space_control,
                                  test_names_bucket_has_no_colon, test_names_is_the_protocol_rule};
    return testlib_run_tests("names", tests, sizeof tests / sizeof tests[0]);
}
