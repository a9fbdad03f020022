/* test_mcauth.c - Check suite for storage-node/mc/mcauth: auth files (good ones, and bad ones refused with their line), the mode check, logins as memcached -Y answers them (ok, wrong password, unknown user, bad format, commands before the login, partial input, oversized lines), the counters by reason, and the constant-time comparison. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "storage-node/mc/mcauth.h"
#include "tests/testlib.h"

/* Loads `text` as an auth file (mode 0600).  Returns the users, or NULL
 * with *err and *rc filled. */
static mcauth_t *load_text(const char *text, jsonloc_err_t *err, int *rc)
{
    char *path = testlib_temp_file(text);
    mcauth_t *a = mcauth_load(path, err, rc);
    unlink(path);
    return a;
}

/* One mcauth_step() on the string s; the reply (or "" for none). */
static mcauth_status_t step(mcauth_t *a, mcauth_conn_t *c, const char *s, size_t *used,
                            const char **reply)
{
    mcauth_result_t r;
    mcauth_status_t st = mcauth_step(a, NULL, c, s, strlen(s), &r);
    *used = r.consumed;
    *reply = r.reply ? r.reply : "";
    return st;
}

START_TEST(test_mcauth_loads_users)
{
    jsonloc_err_t e;
    int rc = 1;
    mcauth_t *a = load_text("alice:secret\nbob:pw:with:colons\r\ncarol:x", &e, &rc);
    ck_assert_ptr_nonnull(a);
    ck_assert_int_eq(rc, 0);
    ck_assert_int_eq(mcauth_users(a), 3);
    ck_assert(mcauth_check(a, "alice", 5, "secret", 6));
    ck_assert(mcauth_check(a, "bob", 3, "pw:with:colons", 14)); /* CR not part of it */
    ck_assert(mcauth_check(a, "carol", 5, "x", 1));              /* no final newline */
    ck_assert(!mcauth_check(a, "alice", 5, "secre", 5));
    ck_assert(!mcauth_check(a, "alice", 5, "secretx", 7));
    ck_assert(!mcauth_check(a, "dave", 4, "secret", 6));
    mcauth_destroy(&a);
    ck_assert_ptr_null(a);
    mcauth_destroy(&a); /* accepts NULL */
}
END_TEST

/* Every bad line is refused with its line number. */
START_TEST(test_mcauth_parse_errors_have_lines)
{
    static const struct {
        const char *text;
        int line;
        const char *what;
    } cases[] = {
        {"alice:pw\nnocolon\n", 2, "expected user:password"},
        {"alice:pw\n\nbob:pw\n", 2, "empty line"},
        {"alice:pw\n:pw\n", 2, "the user is empty"},
        {"alice:\n", 1, "the password is empty"},
        {"al ice:pw\n", 1, "the user is empty or holds a space"},
        {"alice:p w\n", 1, "the password is empty or holds a space"},
        {"alice:pw\nbob:x\nalice:y\n", 3, "given twice"},
        {"", 0, "no user:password line"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        jsonloc_err_t e;
        int rc = 0;
        ck_assert_ptr_null(load_text(cases[i].text, &e, &rc));
        ck_assert_int_eq(rc, -EINVAL);
        ck_assert_msg(e.line == cases[i].line, "case %zu: line %d", i, e.line);
        ck_assert_msg(strstr(e.text, cases[i].what), "case %zu: %s", i, e.text);
        ck_assert_int_eq(strncmp(e.source, "/tmp/bqos_test.", 15), 0); /* names the file */
    }
    /* A line longer than memcached's 255 bytes. */
    char big[400];
    memset(big, 'x', sizeof big);
    memcpy(big, "alice:pw\nlong:", 14);
    big[sizeof big - 2] = '\n';
    big[sizeof big - 1] = '\0';
    jsonloc_err_t e;
    int rc = 0;
    ck_assert_ptr_null(load_text(big, &e, &rc));
    ck_assert_int_eq(e.line, 2);
    ck_assert_ptr_nonnull(strstr(e.text, "longer than 255"));
}
END_TEST

/* A file readable by group or others is refused, as CURVE key files are. */
START_TEST(test_mcauth_refuses_readable_file)
{
    char *path = testlib_temp_file("alice:secret\n");
    jsonloc_err_t e;
    int rc = 0;
    ck_assert_int_eq(chmod(path, 0644), 0);
    ck_assert_ptr_null(mcauth_load(path, &e, &rc));
    ck_assert_int_eq(rc, -EACCES);
    ck_assert_ptr_nonnull(strstr(e.text, "chmod 600"));
    ck_assert_int_eq(chmod(path, 0400), 0);
    mcauth_t *a = mcauth_load(path, &e, &rc);
    ck_assert_ptr_nonnull(a);
    /* reload: a bad file changes nothing */
    ck_assert_int_eq(chmod(path, 0600), 0);
    FILE *fp = fopen(path, "w");
    fputs("bob:pw\nbroken\n", fp);
    fclose(fp);
    ck_assert_int_eq(mcauth_reload(a, &e), -EINVAL);
    ck_assert_int_eq(e.line, 2);
    ck_assert(mcauth_check(a, "alice", 5, "secret", 6));
    fp = fopen(path, "w");
    fputs("bob:pw\n", fp);
    fclose(fp);
    ck_assert_int_eq(mcauth_reload(a, &e), 0);
    ck_assert(!mcauth_check(a, "alice", 5, "secret", 6));
    ck_assert(mcauth_check(a, "bob", 3, "pw", 2));
    mcauth_destroy(&a);
    unlink(path);
    ck_assert_ptr_null(mcauth_load("/nonexistent/auth", &e, &rc));
    ck_assert_int_eq(rc, -ENOENT);
}
END_TEST

/* The replies memcached 1.6 -Y sends (it_node_auth.sh compares them byte
 * for byte with a real memcached). */
START_TEST(test_mcauth_login_replies)
{
    jsonloc_err_t e;
    mcauth_t *a = load_text("alice:secret\nbob:pw\n", &e, NULL);
    ck_assert_ptr_nonnull(a);
    static const struct {
        const char *in;
        mcauth_status_t st;
        const char *reply;
        int ok;
    } cases[] = {
        {"get a\r\n", MCAUTH_REPLY, "CLIENT_ERROR unauthenticated", 0},
        {"version\r\n", MCAUTH_REPLY, "CLIENT_ERROR unauthenticated", 0},
        {"\r\n", MCAUTH_REPLY, "CLIENT_ERROR unauthenticated", 0},
        {"SET x 0 0 3\r\na b\r\n", MCAUTH_REPLY, "CLIENT_ERROR unauthenticated", 0},
        {"set x 0 0\r\n", MCAUTH_REPLY, "CLIENT_ERROR unauthenticated", 0},
        {"set x 0 0 -1\r\n", MCAUTH_REPLY, "CLIENT_ERROR unauthenticated", 0},
        {"set x 0 0 1a\r\n", MCAUTH_REPLY, "CLIENT_ERROR unauthenticated", 0},
        {"set x 0 0 11\r\nalice wrong\r\n", MCAUTH_REPLY, "CLIENT_ERROR authentication failure", 0},
        {"set x 0 0 10\r\ncarol pass\r\n", MCAUTH_REPLY, "CLIENT_ERROR authentication failure", 0},
        {"set x 0 0 5\r\nalice\r\n", MCAUTH_REPLY, "CLIENT_ERROR bad authentication token format", 0},
        {"set x 0 0 12\r\nalice secretXX", MCAUTH_REPLY, "CLIENT_ERROR bad command line termination", 0},
        {"set x 0 0 12\r\nalice secret\r\n", MCAUTH_REPLY, "STORED", 1},
        {"set  x  0 0 12 noreply\r\nalice secret\r\n", MCAUTH_REPLY, "STORED", 1},
        {"set x 0 0 13\nalice  secret\r\n", MCAUTH_REPLY, "STORED", 1},
        {"set x 1 2 16\r\nalice secret xyz\r\n", MCAUTH_REPLY, "STORED", 1},
        {"set x 0 0 7\r\nbob pw2\r\n", MCAUTH_REPLY, "CLIENT_ERROR authentication failure", 0},
        {"set x 0 0 5000\r\n", MCAUTH_CLOSE, "CLIENT_ERROR bad data chunk", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mcauth_conn_t c = {0};
        size_t used;
        const char *reply;
        mcauth_status_t st = step(a, &c, cases[i].in, &used, &reply);
        ck_assert_msg(st == cases[i].st, "case %zu: status %d", i, (int)st);
        ck_assert_msg(strcmp(reply, cases[i].reply) == 0, "case %zu: %s", i, reply);
        ck_assert_int_eq(c.ok, cases[i].ok);
        /* a command before the login is its line only (memcached's too) */
        size_t want = strcmp(reply, "CLIENT_ERROR unauthenticated") == 0
                          ? (size_t)(strchr(cases[i].in, '\n') - cases[i].in) + 1
                          : strlen(cases[i].in);
        if (st == MCAUTH_REPLY)
            ck_assert_msg(used == want, "case %zu: used %zu", i, used);
        if (c.ok)
            ck_assert_str_eq(c.user, "alice");
    }
    mcauth_destroy(&a);
}
END_TEST

/* A login split across reads waits for its data; a line without a newline
 * beyond MCAUTH_LINE_MAX closes the connection without a reply. */
START_TEST(test_mcauth_partial_and_oversized)
{
    jsonloc_err_t e;
    mcauth_t *a = load_text("alice:secret\n", &e, NULL);
    ck_assert_ptr_nonnull(a);
    mcauth_conn_t c = {0};
    size_t used;
    const char *reply;
    ck_assert_int_eq(step(a, &c, "set x 0", &used, &reply), MCAUTH_NEED_MORE);
    ck_assert_int_eq(step(a, &c, "set x 0 0 12\r\nalice ", &used, &reply), MCAUTH_NEED_MORE);
    ck_assert_int_eq(step(a, &c, "set x 0 0 12\r\nalice secret\r", &used, &reply),
                     MCAUTH_NEED_MORE);
    ck_assert_int_eq(used, 0);
    ck_assert_int_eq(c.ok, 0);
    /* pipelined: only the login is consumed, the rest is the front's */
    const char *two = "set x 0 0 12\r\nalice secret\r\nget a\r\n";
    ck_assert_int_eq(step(a, &c, two, &used, &reply), MCAUTH_REPLY);
    ck_assert_str_eq(reply, "STORED");
    ck_assert_str_eq(two + used, "get a\r\n");
    char junk[MCAUTH_LINE_MAX + 2];
    memset(junk, 'a', sizeof junk - 1);
    junk[sizeof junk - 1] = '\0';
    mcauth_conn_t d = {0};
    ck_assert_int_eq(step(a, &d, junk, &used, &reply), MCAUTH_CLOSE);
    ck_assert_str_eq(reply, "");
    junk[MCAUTH_LINE_MAX - 1] = '\0'; /* short enough: wait for its newline */
    ck_assert_int_eq(step(a, &d, junk, &used, &reply), MCAUTH_NEED_MORE);
    mcauth_destroy(&a);
}
END_TEST

/* Failures count on the gate by reason; here through a NULL gate (nothing
 * counted, nothing breaks) - the counts themselves are checked by
 * it_node_auth.sh in stats and /metrics. */
START_TEST(test_mcauth_null_gate_counts_nothing)
{
    gate_auth_failed(NULL, GATE_AUTH_BAD_PASSWORD);
    gate_auth_ok(NULL);
    ck_assert_str_eq(gate_auth_reason_names[GATE_AUTH_UNAUTHENTICATED], "unauthenticated");
    ck_assert_str_eq(gate_auth_reason_names[GATE_AUTH_UNKNOWN_USER], "unknown_user");
    ck_assert_str_eq(gate_auth_reason_names[GATE_AUTH_BAD_PASSWORD], "bad_password");
    ck_assert_str_eq(gate_auth_reason_names[GATE_AUTH_BAD_FORMAT], "bad_format");
}
END_TEST

START_TEST(test_mcauth_ct_equal_is_equality)
{
    ck_assert(mcauth_ct_equal("abc", 3, "abc", 3));
    ck_assert(mcauth_ct_equal("", 0, "", 0));
    ck_assert(!mcauth_ct_equal("abc", 3, "abd", 3));
    ck_assert(!mcauth_ct_equal("abc", 3, "ab", 2));
    ck_assert(!mcauth_ct_equal("ab", 2, "abc", 3));
    ck_assert(!mcauth_ct_equal("ab\0", 3, "ab", 2)); /* a NUL does not end it */
    ck_assert(!mcauth_ct_equal("xbc", 3, "abc", 3));
}
END_TEST

/* The comparison sees every byte whatever it finds: a difference in the
 * first byte, in the last byte or in the length is unequal; equal strings
 * (also empty ones) are equal.  (That it takes the same time wherever they
 * differ is a speed property: measured by no unit test.) */
START_TEST(test_mcauth_ct_equal_every_position)
{
    enum { N = 4096 };
    static char a[N], b[N];
    memset(a, 'p', N);
    memcpy(b, a, N);
    ck_assert(mcauth_ct_equal(a, N, b, N));
    ck_assert(mcauth_ct_equal("", 0, "", 0));
    for (size_t i = 0; i < N; i += N / 8 - 1) {
        b[i] = 'q';
        ck_assert_msg(!mcauth_ct_equal(a, N, b, N), "a difference at byte %zu", i);
        b[i] = 'p';
    }
    b[N - 1] = 'q';
    ck_assert(!mcauth_ct_equal(a, N, b, N));
    b[N - 1] = 'p';
    ck_assert(!mcauth_ct_equal(a, N, b, N - 1));
    ck_assert(!mcauth_ct_equal(a, N - 1, b, N));
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {test_mcauth_loads_users,
                                  test_mcauth_parse_errors_have_lines,
                                  test_mcauth_refuses_readable_file,
                                  test_mcauth_login_replies,
                                  test_mcauth_partial_and_oversized,
                                  test_mcauth_null_gate_counts_nothing,
                                  test_mcauth_ct_equal_is_equality,
                                  test_mcauth_ct_equal_every_position};
    return testlib_run_tests("mcauth", tests, sizeof tests / sizeof tests[0]);
}
