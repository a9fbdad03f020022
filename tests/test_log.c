/* test_log.c - Check suite for common/log: level parsing and filtering, the ISO-8601 timestamp, the text and JSON line formats, syslog priorities when stderr is the journal, the per-call-site rate limit (also across threads). */
#include <check.h>
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

/* Stderr on a temporary file from capture_start() to capture_end(),
 * which returns what was written (caller frees). */
static FILE *cap_file;
static int cap_saved = -1;

static void capture_start(void)
{
    cap_file = tmpfile();
    ck_assert_ptr_nonnull(cap_file);
    cap_saved = dup(STDERR_FILENO);
    ck_assert_int_ge(cap_saved, 0);
    ck_assert_int_eq(dup2(fileno(cap_file), STDERR_FILENO), STDERR_FILENO);
}

static char *capture_end(void)
{
    ck_assert_int_eq(dup2(cap_saved, STDERR_FILENO), STDERR_FILENO);
    close(cap_saved);
    size_t cap = 1 << 20;
    char *buf = calloc(1, cap);
    ck_assert_ptr_nonnull(buf);
    rewind(cap_file);
    size_t n = fread(buf, 1, cap - 1, cap_file);
    buf[n] = '\0';
    fclose(cap_file);
    return buf;
}

/* Writes a warning of `text` (bqos_log() itself: not rate-limited, as
 * several tests write many) and a log_debug() line; returns what was
 * written (caller frees). */
static char *captured_warn(const char *text)
{
    capture_start();
    bqos_log(BQOS_LOG_WARN, "%s", text);
    log_debug("an invisible line");
    return capture_end();
}

/* How many times `needle` occurs in s. */
static int count_of(const char *s, const char *needle)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
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

/* Points $JOURNAL_STREAM at the pipe end `fd` (its "DEV:INO"), or at
 * "DEV:INO+1" when `wrong`. */
static void set_journal_stream(int fd, int wrong)
{
    struct stat st;
    ck_assert_int_eq(fstat(fd, &st), 0);
    char v[64];
    snprintf(v, sizeof v, "%llu:%llu", (unsigned long long)st.st_dev,
             (unsigned long long)st.st_ino + (wrong ? 1 : 0));
    ck_assert_int_eq(setenv("JOURNAL_STREAM", v, 1), 0);
}

/* With stderr on a pipe: init (which looks at $JOURNAL_STREAM, pointed at
 * the pipe or, when `wrong`, elsewhere), one line of each level; returns
 * what the pipe got (caller frees). */
static char *journal_lines(int wrong, bqos_log_format_t format)
{
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    int saved = dup(STDERR_FILENO);
    ck_assert_int_eq(dup2(p[1], STDERR_FILENO), STDERR_FILENO);
    set_journal_stream(p[1], wrong);
    bqos_log_set_format(format);
    bqos_log_init("bqos-test", BQOS_LOG_DEBUG);
    int journal = bqos_log_to_journal();
    log_error("disk %d gone", 3);
    log_warn("slow");
    log_info("started");
    log_debug("detail");
    ck_assert_int_eq(dup2(saved, STDERR_FILENO), STDERR_FILENO);
    close(saved);
    close(p[1]);
    unsetenv("JOURNAL_STREAM");
    bqos_log_set_format(BQOS_LOG_TEXT);
    char *buf = calloc(1, 8192);
    ck_assert_ptr_nonnull(buf);
    size_t n = 0;
    ssize_t r;
    while ((r = read(p[0], buf + n, 8191 - n)) > 0)
        n += (size_t)r;
    close(p[0]);
    ck_assert_int_eq(journal, !wrong);
    return buf;
}

START_TEST(test_log_journal_prefix)
{
    /* stderr is the stream $JOURNAL_STREAM names: priorities, no stamp, no
     * program name (the journal records both). */
    char *out = journal_lines(0, BQOS_LOG_TEXT);
    ck_assert_str_eq(out, "<3>error: disk 3 gone\n<4>warn: slow\n<6>info: started\n<7>debug: detail\n");
    free(out);
    /* JSON keeps its object whole after the priority. */
    out = journal_lines(0, BQOS_LOG_JSON);
    ck_assert_msg(strncmp(out, "<3>{\"ts\":\"", 10) == 0, "'%s'", out);
    char *warn = strstr(out, "\n<4>{");
    ck_assert_ptr_nonnull(warn);
    json_error_t jerr;
    json_t *o = json_loadb(warn + 4, (size_t)(strchr(warn + 1, '\n') - warn - 4), 0, &jerr);
    ck_assert_msg(json_is_object(o), "not JSON (%s): '%s'", jerr.text, warn);
    ck_assert_str_eq(json_string_value(json_object_get(o, "msg")), "slow");
    json_decref(o);
    ck_assert_ptr_nonnull(strstr(out, "\n<6>{"));
    ck_assert_ptr_nonnull(strstr(out, "\n<7>{"));
    free(out);
}
END_TEST

START_TEST(test_log_journal_other_stream)
{
    /* $JOURNAL_STREAM names another stream (stderr was redirected): the
     * usual stamped lines, no priority. */
    char *out = journal_lines(1, BQOS_LOG_TEXT);
    ck_assert_int_eq(count_of(out, "\n"), 4);
    ck_assert_int_eq(count_of(out, "<"), 0);
    ck_assert_ptr_nonnull(strstr(out, "Z bqos-test error: disk 3 gone\n"));
    ck_assert_ptr_nonnull(strstr(out, "Z bqos-test debug: detail\n"));
    free(out);
    /* Malformed values are not the journal. */
    const char *bad[] = {"", "12", "12:", ":34", "12:34x", "x:y"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv("JOURNAL_STREAM", bad[i], 1);
        bqos_log_init("bqos-test", BQOS_LOG_INFO);
        ck_assert_msg(!bqos_log_to_journal(), "'%s' taken for the journal", bad[i]);
    }
    unsetenv("JOURNAL_STREAM");
    bqos_log_init("bqos-test", BQOS_LOG_INFO);
    ck_assert(!bqos_log_to_journal());
}
END_TEST

/* The rate limit's clock in these tests. */
static double fake_now;
static double fake_clock(void)
{
    return fake_now;
}

/* One call site, a warning. */
static void warn_site(int i)
{
    log_warn("backend down (try %d)", i);
}

START_TEST(test_log_ratelimit_count)
{
    bqos_log_init("bqos-test", BQOS_LOG_INFO);
    bqos_log_set_clock(fake_clock);
    bqos_log_set_ratelimit(3, 10.0);
    fake_now = 100;
    capture_start();
    for (int i = 0; i < 10; i++)
        warn_site(i); /* 0, 1, 2 pass; 3..9 are counted */
    log_warn("another site");   /* its own budget */
    for (int i = 0; i < 4; i++)
        log_info("info %d", i); /* never limited */
    fake_now = 109;
    warn_site(10); /* 0.9 of a token: still refused */
    fake_now = 110;
    warn_site(11); /* a token earned: passes with the count */
    warn_site(12); /* refused */
    fake_now = 1000;
    for (int i = 13; i < 17; i++)
        warn_site(i); /* quiet long enough: the burst again, 13..15, with the count of 12 */
    char *out = capture_end();
    /* What follows "warn: backend down (try N)" on try N's line; NULL: no
     * line for try N at all. */
    static const char *const tail[17] = {
        [0] = "\n",
        [1] = "\n",
        [2] = "\n",
        [11] = " (8 similar messages suppressed)\n",
        [13] = " (1 similar message suppressed)\n",
        [14] = "\n",
        [15] = "\n",
    };
    for (int i = 0; i < 17; i++) {
        char want[96];
        if (tail[i])
            snprintf(want, sizeof want, "warn: backend down (try %d)%s", i, tail[i]);
        else
            snprintf(want, sizeof want, "(try %d)", i);
        ck_assert_msg(!strstr(out, want) == !tail[i], "%s '%s' in '%s'", tail[i] ? "no" : "unwanted",
                      want, out);
    }
    ck_assert_int_eq(count_of(out, "warn: backend down"), 7); /* 0..2, 11, 13..15 */
    ck_assert_int_eq(count_of(out, "warn: another site\n"), 1);
    ck_assert_int_eq(count_of(out, "info: info "), 4);
    free(out);
}
END_TEST

START_TEST(test_log_ratelimit_json_and_off)
{
    bqos_log_init("bqos-test", BQOS_LOG_INFO);
    bqos_log_set_clock(fake_clock);
    bqos_log_set_ratelimit(1, 10.0);
    bqos_log_set_format(BQOS_LOG_JSON);
    fake_now = 5;
    capture_start();
    for (int i = 0; i < 5; i++)
        warn_site(i);
    fake_now = 15;
    warn_site(5);
    char *out = capture_end();
    ck_assert_int_eq(count_of(out, "\n"), 2);
    json_error_t jerr;
    json_t *o = json_loads(strchr(out, '\n') + 1, 0, &jerr);
    ck_assert_msg(json_is_object(o), "not JSON (%s): '%s'", jerr.text, out);
    ck_assert_str_eq(json_string_value(json_object_get(o, "msg")), "backend down (try 5)");
    ck_assert_int_eq(json_integer_value(json_object_get(o, "suppressed")), 4);
    json_decref(o);
    free(out);
    /* Burst 0: no limit. */
    bqos_log_set_format(BQOS_LOG_TEXT);
    bqos_log_set_ratelimit(0, 10.0);
    capture_start();
    for (int i = 0; i < 20; i++)
        warn_site(i);
    out = capture_end();
    ck_assert_int_eq(count_of(out, "warn: backend down"), 20);
    ck_assert_int_eq(count_of(out, "suppressed"), 0);
    free(out);
}
END_TEST

enum { LOG_THREADS = 4, LOG_PER_THREAD = 250, LOG_BURST = 10 };

static void *warn_many(void *arg)
{
    (void)arg;
    for (int i = 0; i < LOG_PER_THREAD; i++)
        warn_site(i);
    return NULL;
}

START_TEST(test_log_ratelimit_threads)
{
    /* Threads logging through one site: exactly the burst is written, as
     * whole lines, and every other line is counted once. */
    bqos_log_init("bqos-test", BQOS_LOG_INFO);
    bqos_log_set_clock(fake_clock);
    bqos_log_set_ratelimit(LOG_BURST, 10.0);
    fake_now = 1;
    capture_start();
    pthread_t t[LOG_THREADS];
    for (int i = 0; i < LOG_THREADS; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, warn_many, NULL), 0);
    for (int i = 0; i < LOG_THREADS; i++)
        pthread_join(t[i], NULL);
    fake_now = 11;
    warn_site(-1);
    char *out = capture_end();
    ck_assert_int_eq(count_of(out, "\n"), LOG_BURST + 1);
    regex_t re;
    ck_assert_int_eq(regcomp(&re, "^[0-9T:.Z-]{24} bqos-test warn: backend down \\(try [0-9]+\\)$",
                             REG_EXTENDED | REG_NOSUB),
                     0);
    char *save = NULL;
    int lines = 0;
    for (char *l = strtok_r(out, "\n", &save); l; l = strtok_r(NULL, "\n", &save), lines++)
        if (lines < LOG_BURST)
            ck_assert_msg(regexec(&re, l, 0, NULL, 0) == 0, "line %d: '%s'", lines, l);
        else
            ck_assert_msg(strstr(l, "warn: backend down (try -1) (990 similar messages suppressed)"),
                          "last line: '%s'", l);
    regfree(&re);
    ck_assert_int_eq(lines, LOG_BURST + 1);
    ck_assert_int_eq(LOG_THREADS * LOG_PER_THREAD - LOG_BURST, 990);
    free(out);
}
END_TEST

int main(void)
{
    unsetenv("JOURNAL_STREAM"); /* the runner's own stderr may be the journal */
    const TTest *const tests[] = {test_log_parse_level,         test_log_threshold,
                                  test_log_time_iso8601,        test_log_line_has_date,
                                  test_log_json_escaping,       test_log_journal_prefix,
                                  test_log_journal_other_stream, test_log_ratelimit_count,
                                  test_log_ratelimit_json_and_off, test_log_ratelimit_threads};
    return testlib_run_tests("log", tests, sizeof tests / sizeof tests[0]);
}
