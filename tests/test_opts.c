/* test_opts.c - Check suite for common/opts: getopt table, --help text, option names. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "common/opts.h"

enum { OPT_A = 1, OPT_B, OPT_C };
static const opts_t table[] = {
    {"alpha", OPT_A, "N", "5", "First line.\nSecond line."},
    {"beta", OPT_B, NULL, NULL, "A flag."},
    {"gamma", OPT_C, "FILE", NULL, ""},
};
#define N (sizeof table / sizeof table[0])

START_TEST(test_opts_getopt_and_name)
{
    struct option lo[N + 1];
    opts_getopt(table, N, lo);
    ck_assert_str_eq(lo[0].name, "alpha");
    ck_assert_int_eq(lo[0].has_arg, required_argument);
    ck_assert_int_eq(lo[1].has_arg, no_argument);
    ck_assert_int_eq(lo[2].val, OPT_C);
    ck_assert_ptr_null(lo[3].name);
    ck_assert_str_eq(opts_name(table, N, OPT_B), "beta");
    ck_assert_str_eq(opts_name(table, N, 99), "?");
    char *argv[] = {"prog", "--gamma", "f.json", "--beta", NULL};
    optind = 1;
    ck_assert_int_eq(getopt_long(4, argv, "", lo, NULL), OPT_C);
    ck_assert_str_eq(optarg, "f.json");
    ck_assert_int_eq(getopt_long(4, argv, "", lo, NULL), OPT_B);
    ck_assert_int_eq(getopt_long(4, argv, "", lo, NULL), -1);
}
END_TEST

START_TEST(test_opts_usage_text)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ck_assert_ptr_nonnull(f);
    opts_usage(f, table, N);
    fclose(f);
    ck_assert_str_eq(buf, "    --alpha N\n"
                          "        First line.\n"
                          "        Second line.\n"
                          "        Default: 5.\n"
                          "    --beta\n"
                          "        A flag.\n"
                          "    --gamma FILE\n");
    free(buf);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("opts");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_opts_getopt_and_name);
    tcase_add_test(tc, test_opts_usage_text);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
