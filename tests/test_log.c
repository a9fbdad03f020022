/* test_log.c - Check suite for common/log: level parsing and filtering. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>

#include "common/log.h"
#include "tests/testlib.h"

START_TEST(test_log_parse_level)
{
    bqos_log_level_t l;
    ck_assert_int_eq(bqos_log_parse_level("debug", &l), 0);
    ck_assert_int_eq(l, BQOS_LOG_DEBUG);
    ck_assert_int_eq(bqos_log_parse_level("warn", &l), 0);
    ck_assert_int_eq(l, BQOS_LOG_WARN);
    ck_assert_int_eq(bqos_log_parse_level("loud", &l), -EINVAL);
    ck_assert_int_eq(bqos_log_parse_level(NULL, &l), -EINVAL);
}
END_TEST

START_TEST(test_log_threshold)
{
    bqos_log_init("test", BQOS_LOG_WARN);
    ck_assert(bqos_log_enabled(BQOS_LOG_ERROR));
    ck_assert(bqos_log_enabled(BQOS_LOG_WARN));
    ck_assert(!bqos_log_enabled(BQOS_LOG_INFO));
    log_warn("a %s line", "visible");
    log_debug("an invisible line");
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {test_log_parse_level, test_log_threshold};
    return testlib_run_tests("log", tests, sizeof tests / sizeof tests[0]);
}
