/* test_curvekey.c - Check suite for common/curvekey: keygen (modes, no overwrite), loading with the permission check, parse errors with line:column, the line splitter. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "common/curvekey.h"
#include "tests/testlib.h"

static char dir[64];

static void setup(void)
{
    umask(022);
    snprintf(dir, sizeof dir, "/tmp/test_curvekey.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}

/* dir/NAME into buf. */
static const char *path(char *buf, size_t n, const char *name)
{
    snprintf(buf, n, "%s/%s", dir, name);
    return buf;
}

static void write_file(const char *p, mode_t mode, const char *text)
{
    FILE *f = fopen(p, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
    ck_assert_int_eq(chmod(p, mode), 0);
}

/* Generates dir/NAME's pair; its .key path into kp[160]. */
static void generate(const char *name, char *kp)
{
    char base[128];
    jsonloc_err_t err;
    ck_assert_int_eq(curvekey_generate(path(base, sizeof base, name), &err), 0);
    snprintf(kp, 160, "%s.key", base);
}

START_TEST(test_curvekey_generate_modes_and_load)
{
    char base[128], kp[160], pp[160];
    path(base, sizeof base, "n1");
    jsonloc_err_t err;
    ck_assert_int_eq(curvekey_generate(base, &err), 0);
    snprintf(kp, sizeof kp, "%s.key", base);
    snprintf(pp, sizeof pp, "%s.pub", base);
    struct stat st;
    ck_assert_int_eq(stat(kp, &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0600);
    ck_assert_int_eq(stat(pp, &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0644);
    curvekey_t k, p;
    ck_assert_int_eq(curvekey_load(kp, 1, &k, &err), 0);
    ck_assert_int_eq(curvekey_load(pp, 0, &p, &err), 0);
    ck_assert_str_eq(k.public_z85, p.public_z85);
    ck_assert_int_eq((int)strlen(k.secret_z85), CURVEKEY_Z85_LEN);
    ck_assert_str_eq(p.secret_z85, "");
    /* a .pub where a secret is needed */
    ck_assert_int_eq(curvekey_load(pp, 1, &p, &err), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err.text, "secret"));
}
END_TEST

START_TEST(test_curvekey_generate_never_overwrites)
{
    char base[128], kp[160];
    jsonloc_err_t err;
    generate("c", kp);
    path(base, sizeof base, "c");
    curvekey_t before, after;
    ck_assert_int_eq(curvekey_load(kp, 1, &before, &err), 0);
    ck_assert_int_eq(curvekey_generate(base, &err), -EEXIST);
    ck_assert_str_eq(err.source, kp);
    ck_assert_int_eq(curvekey_load(kp, 1, &after, &err), 0);
    ck_assert_str_eq(before.secret_z85, after.secret_z85);
    /* a .pub in the way: the new .key is not left behind */
    char base2[128], pp2[160];
    path(base2, sizeof base2, "d");
    snprintf(pp2, sizeof pp2, "%s.pub", base2);
    write_file(pp2, 0644, "x\n");
    ck_assert_int_eq(curvekey_generate(base2, &err), -EEXIST);
    snprintf(kp, sizeof kp, "%s.key", base2);
    ck_assert_int_eq(access(kp, F_OK), -1);
}
END_TEST

START_TEST(test_curvekey_refuses_secret_readable_by_others)
{
    char kp[160];
    jsonloc_err_t err;
    generate("s", kp);
    static const mode_t bad[] = {0640, 0604, 0660, 0602};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq(chmod(kp, bad[i]), 0);
        curvekey_t k;
        ck_assert_int_eq(curvekey_load(kp, 1, &k, &err), -EACCES);
        ck_assert_str_eq(err.source, kp);
        char mode[16];
        snprintf(mode, sizeof mode, "%04o", (unsigned)bad[i]);
        ck_assert_msg(strstr(err.text, mode), "message names the mode: %s", err.text);
        ck_assert_str_eq(k.secret_z85, ""); /* nothing half-loaded */
    }
    ck_assert_int_eq(chmod(kp, 0400), 0);
    curvekey_t k;
    ck_assert_int_eq(curvekey_load(kp, 1, &k, &err), 0);
}
END_TEST

/* Key file syntax errors: where, and what. */
START_TEST(test_curvekey_parse_errors_have_positions)
{
    char pub[41], sec[41], other_pub[41], other_sec[41], text[512], p[128];
    ck_assert_int_eq(zmq_curve_keypair(pub, sec), 0);
    ck_assert_int_eq(zmq_curve_keypair(other_pub, other_sec), 0);
    struct {
        const char *fmt;
        int line, col;
        const char *what;
    } cases[] = {
        {"# c\nprivate %s\n", 2, 1, "expected"},
        {"public %.39s\n", 1, 8, "not a CURVE key"},
        {"\n  public  %s extra\n", 2, 52, "unexpected"},
        {"public %s\npublic %s\n", 2, 1, "twice"},
        {"public\n", 1, 7, "not a CURVE key"},
        {"public %.39s~\n", 1, 8, "not a CURVE key"}, /* '~' is not Z85 */
    };
    jsonloc_err_t err;
    curvekey_t k;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(text, sizeof text, cases[i].fmt, pub, pub);
        write_file(path(p, sizeof p, "bad.pub"), 0600, text);
        ck_assert_int_eq(curvekey_load(p, 0, &k, &err), -EINVAL);
        ck_assert_msg(err.line == cases[i].line && err.col == cases[i].col,
                      "case %zu: %d:%d, want %d:%d (%s)", i, err.line, err.col, cases[i].line,
                      cases[i].col, err.text);
        ck_assert_msg(strstr(err.text, cases[i].what), "case %zu: %s", i, err.text);
    }
    /* a public line that is not the secret's */
    snprintf(text, sizeof text, "public %s\nsecret %s\n", other_pub, sec);
    write_file(path(p, sizeof p, "mix.key"), 0600, text);
    ck_assert_int_eq(curvekey_load(p, 1, &k, &err), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err.text, "does not match"));
    /* a secret alone: the public half is derived */
    snprintf(text, sizeof text, "secret %s\r\n", sec);
    write_file(p, 0600, text);
    ck_assert_int_eq(curvekey_load(p, 1, &k, &err), 0);
    ck_assert_str_eq(k.public_z85, pub);
    ck_assert_int_eq(curvekey_load(path(p, sizeof p, "missing"), 0, &k, &err), -ENOENT);
}
END_TEST

START_TEST(test_curvekey_split_words)
{
    curvekey_word_t w[3];
    int extra = 0;
    ck_assert_int_eq(curvekey_split("", 0, w, 3, &extra), 0);
    ck_assert_int_eq(curvekey_split("  # x y", 7, w, 3, &extra), 0);
    ck_assert_int_eq(curvekey_split(" a\tbc  d\r", 9, w, 3, &extra), 3);
    ck_assert_int_eq(w[0].col, 2);
    ck_assert_int_eq(w[1].col, 4);
    ck_assert_int_eq((int)w[1].len, 2);
    ck_assert_int_eq(w[2].col, 8);
    ck_assert_int_eq((int)w[2].len, 1);
    ck_assert_int_eq(curvekey_split("a b c d", 7, w, 3, &extra), 4);
    ck_assert_int_eq(extra, 7);
    ck_assert_int_eq(curvekey_split("a #b", 4, w, 3, &extra), 2); /* '#' only first */
}
END_TEST

START_TEST(test_curvekey_client_pair_goes_together)
{
    curvekey_t a, b;
    int on = 1;
    jsonloc_err_t err;
    ck_assert_int_eq(curvekey_load_client(NULL, NULL, &a, &b, &on, &err), 0);
    ck_assert_int_eq(on, 0);
    ck_assert_int_eq(curvekey_load_client("x.key", NULL, &a, &b, &on, &err), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err.text, "together"));
}
END_TEST

/* LoadCredential=: a bare name is the credential, a path stays a path, and
 * without $CREDENTIALS_DIRECTORY nothing changes. */
START_TEST(test_curvekey_path_reads_credentials)
{
    char buf[256];
    unsetenv("CREDENTIALS_DIRECTORY");
    ck_assert_str_eq(curvekey_path("ctrl.key", buf, sizeof buf), "ctrl.key");
    setenv("CREDENTIALS_DIRECTORY", "/run/credentials/bqos-controller.service", 1);
    ck_assert_str_eq(curvekey_path("ctrl.key", buf, sizeof buf),
                     "/run/credentials/bqos-controller.service/ctrl.key");
    ck_assert_str_eq(curvekey_path("keys/ctrl.key", buf, sizeof buf), "keys/ctrl.key");
    ck_assert_str_eq(curvekey_path("/etc/bqos/ctrl.key", buf, sizeof buf), "/etc/bqos/ctrl.key");
    char tiny[8];
    ck_assert_str_eq(curvekey_path("ctrl.key", tiny, sizeof tiny), "ctrl.key"); /* no room: as given */
    unsetenv("CREDENTIALS_DIRECTORY");
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {test_curvekey_generate_modes_and_load,
                                  test_curvekey_generate_never_overwrites,
                                  test_curvekey_refuses_secret_readable_by_others,
                                  test_curvekey_parse_errors_have_positions,
                                  test_curvekey_split_words,
                                  test_curvekey_client_pair_goes_together,
                                  test_curvekey_path_reads_credentials};
    const testlib_case_t c = {.name = "curvekey", .setup = setup, .teardown = teardown};
    return testlib_run_case(&c, tests, sizeof tests / sizeof tests[0]);
}
