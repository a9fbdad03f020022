/* test_log.c - Check suite for common/log: level parsing and filtering, the ISO-8601 timestamp, the text and JSON line formats. */
#include <check.h>
#include <errno.h>
#include <jansson.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "tests/testlib.h"

START_TEST(test_log_parse_level)
{
    TESTLIB_CHECK_ENUM_PARSER(bqos_log_parse_level, bqos_log_level_t, "loud",
                              {"debug", BQOS_LOG_DEBUG}, {"warn", BQOS_LOG_WARN});
}
END_TEST

/* Runs log_warn("%s", text) and log_debug() with stderr on a file;
 * returns what was written (caller frees). */
static char *captured_warn(const char *text)
{
    FILE *f = tmpfile();
    ck_assert_ptr_nonnull(f);
    int saved = dup(STDERR_FILENO);
    ck_assert_int_ge(saved, 0);
    ck_assert_int_eq(dup2(fileno(f), STDERR_FILENO), STDERR_FILENO);
    log_warn("%s", text);
    log_debug("an invisible line");
    ck_assert_int_eq(dup2(saved, STDERR_FILENO), STDERR_FILENO);
    close(saved);
    char *buf = calloc(1, 4096);
    ck_assert_ptr_nonnull(buf);
    rewind(f);
    size_t n = fread(buf, 1, 4095, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

START_TEST(test_log_threshold)
{
    bqos_log_init("test", BQOS_LOG_WARN);
    ck_assert(bqos_log_enabled(BQOS_LOG_ERROR));
    ck_assert(bqos_log_enabled(BQOS_LOG_WARN));
    ck_assert(!bqos_log_enabled(BQOS_LOG_INFO));
    char *out = captured_warn("a visible line");
    ck_assert_ptr_nonnull(strstr(out, "test warn: a visible line\n"));
    ck_assert_ptr_null(strstr(out, "invisible"));
    free(out);
}
END_TEST

START_TEST(test_log_time_iso8601)
{
    char buf[40];
    struct timespec ts = {0, 0};
    ck_assert_int_eq(bqos_log_format_time(&ts, buf, sizeof buf), 24);
    ck_assert_str_eq(buf, "1970-01-01T00:00:00.000Z");
    /* 2026-02-28 23:59:59.999999999 UTC: milliseconds truncate, never carry into the next day. */
    ts = (struct timespec){1772323199, 999999999};
    bqos_log_format_time(&ts, buf, sizeof buf);
    ck_assert_str_eq(buf, "2026-02-28T23:59:59.999Z");
    ts = (struct timespec){951782400 + 45296, 7000000}; /* 2000-02-29 12:34:56.007: a leap day */
    bqos_log_format_time(&ts, buf, sizeof buf);
    ck_assert_str_eq(buf, "2000-02-29T12:34:56.007Z");
    ck_assert_int_eq(bqos_log_format_time(&ts, buf, 11), 24); /* truncated like snprintf */
    ck_assert_str_eq(buf, "2000-02-29");
}
END_TEST

START_TEST(test_log_line_has_date)
{
    bqos_log_init("bqos-test", BQOS_LOG_INFO);
    time_t before = time(NULL);
    char *out = captured_warn("disk 90% full");
    time_t after = time(NULL);
    regex_t re;
    ck_assert_int_eq(regcomp(&re,
                             "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z "
                             "bqos-test warn: disk 90% full\n$",
                             REG_EXTENDED | REG_NOSUB),
                     0);
    int match = regexec(&re, out, 0, NULL, 0);
    regfree(&re);
    ck_assert_msg(match == 0, "line: '%s'", out);
    struct tm tm = {0};
    ck_assert_ptr_nonnull(strptime(out, "%Y-%m-%dT%H:%M:%S", &tm));
    time_t t = timegm(&tm);
    ck_assert_msg(t >= before && t <= after, "stamp %lld outside [%lld, %lld]", (long long)t,
                  (long long)before, (long long)after);
    free(out);
}
END_TEST

/* One JSON log line of `text`: parses as one object whose fields are what
 * was logged. */
static void check_json_line(const char *text, const char *want_msg)
{
    char *out = captured_warn(text);
    size_t n = strlen(out);
    ck_assert_msg(n > 0 && out[n - 1] == '\n' && !memchr(out, '\n', n - 1), "one line: '%s'", out);
    json_error_t jerr;
    json_t *o = json_loads(out, 0, &jerr);
    ck_assert_msg(json_is_object(o), "not JSON (%s): '%s'", jerr.text, out);
    ck_assert_uint_eq(json_object_size(o), 4);
    ck_assert_str_eq(json_string_value(json_object_get(o, "level")), "warn");
    ck_assert_str_eq(json_string_value(json_object_get(o, "prog")), "bqos-test");
    const char *ts = json_string_value(json_object_get(o, "ts"));
    ck_assert_ptr_nonnull(ts);
    ck_assert_uint_eq(strlen(ts), 24);
    if (want_msg)
        ck_assert_str_eq(json_string_value(json_object_get(o, "msg")), want_msg);
    else /* cut short: still a whole string, a prefix of the text */
        ck_assert(strncmp(text, json_string_value(json_object_get(o, "msg")),
                          strlen(json_string_value(json_object_get(o, "msg")))) == 0);
    json_decref(o);
    free(out);
}

START_TEST(test_log_json_escaping)
{
    bqos_log_init("bqos-test", BQOS_LOG_INFO);
    bqos_log_set_format(BQOS_LOG_JSON);
    check_json_line("plain", "plain");
    check_json_line("say \"hi\" \\ back\\", "say \"hi\" \\ back\\");
    check_json_line("two\nlines\tand\r\x01\x1f bell", "two\nlines\tand\r\x01\x1f bell");
    check_json_line("bucket \xc3\xa9t\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", /* UTF-8 passes */
                    "bucket \xc3\xa9t\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
    /* Not UTF-8 (a lone continuation byte, a cut sequence, an overlong
     * '/', a surrogate): each bad byte becomes U+FFFD. */
    check_json_line("a\x80z \xe2\x82 \xc0\xaf \xed\xa0\x80",
                    "a\xef\xbf\xbdz \xef\xbf\xbd\xef\xbf\xbd \xef\xbf\xbd\xef\xbf\xbd "
                    "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
    /* Long messages of quotes and controls (6 bytes each escaped) are cut,
     * never inside an escape. */
    char big[1500];
    for (size_t i = 0; i < sizeof big - 1; i++)
        big[i] = i % 3 == 0 ? '"' : i % 3 == 1 ? '\x02' : 'x';
    big[sizeof big - 1] = '\0';
    check_json_line(big, NULL);
    bqos_log_set_format(BQOS_LOG_TEXT);
    char *out = captured_warn("back to \"text\"");
    ck_assert_ptr_nonnull(strstr(out, " bqos-test warn: back to \"text\"\n"));
    free(out);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {test_log_parse_level, test_log_threshold, test_log_time_iso8601,
                                  test_log_line_has_date, test_log_json_escaping};
    return testlib_run_tests("log", tests, sizeof tests / sizeof tests[0]);
}
