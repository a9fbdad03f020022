/* testlib.h - what every Check suite's main() shares: build the usual one-case suite, run it, turn its failures into the exit status; a temporary file with given text; the check of a name-to-enum parser; and the address-space cap of the out-of-memory tests. */
#ifndef BQOS_TESTLIB_H
#define BQOS_TESTLIB_H

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* Runs every case of suite s (the runner takes s over and frees it) with
 * CK_NORMAL output.  Returns EXIT_SUCCESS when all passed, EXIT_FAILURE
 * otherwise: main() returns it. */
static inline int testlib_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/* The usual suite of a module: one test case. */
typedef struct {
    const char *name;        /* the suite's */
    const char *tcase;       /* the test case's; NULL: "core" */
    double timeout;          /* seconds per test; 0: Check's default */
    void (*setup)(void);     /* fixture; NULL: none */
    void (*teardown)(void);
    int unchecked;           /* 1: the fixture runs once around the case, not per test */
} testlib_case_t;

/* Runs tests[0..n-1] as c's suite.  Returns as testlib_run(). */
static inline int testlib_run_case(const testlib_case_t *c, const TTest *const *tests, size_t n)
{
    Suite *s = suite_create(c->name);
    TCase *tc = tcase_create(c->tcase ? c->tcase : "core");
    if ((c->setup || c->teardown) && c->unchecked)
        tcase_add_unchecked_fixture(tc, c->setup, c->teardown);
    else if (c->setup || c->teardown)
        tcase_add_checked_fixture(tc, c->setup, c->teardown);
    if (c->timeout > 0)
        tcase_set_timeout(tc, c->timeout);
    for (size_t i = 0; i < n; i++)
        tcase_add_test(tc, tests[i]);
    suite_add_tcase(s, tc);
    return testlib_run(s);
}

/* testlib_run_case() with a timeout (seconds per test) and no fixture. */
static inline int testlib_run_timed(const char *name, double timeout, const TTest *const *tests,
                                    size_t n)
{
    const testlib_case_t c = {.name = name, .timeout = timeout};
    return testlib_run_case(&c, tests, n);
}

/* testlib_run_case() without fixture or timeout. */
static inline int testlib_run_tests(const char *name, const TTest *const *tests, size_t n)
{
    const testlib_case_t c = {.name = name};
    return testlib_run_case(&c, tests, n);
}

/* Checks a parser of names into an enum of type T, int parse(const char *,
 * T *): each {name, value} pair after `bad` parses to 0 with that value;
 * `bad` and NULL give -EINVAL.  A macro: the parsers differ in T. */
#define TESTLIB_CHECK_ENUM_PARSER(parse, T, bad, ...)                                        \
    do {                                                                                     \
        static const struct {                                                                \
            const char *name;                                                                \
            T value;                                                                         \
        } ok_[] = {__VA_ARGS__};                                                             \
        T v_;                                                                                \
        for (size_t i_ = 0; i_ < sizeof ok_ / sizeof ok_[0]; i_++) {                         \
            ck_assert_msg(parse(ok_[i_].name, &v_) == 0, "%s refused", ok_[i_].name);        \
            ck_assert_msg(v_ == ok_[i_].value, "%s: %d, want %d", ok_[i_].name, (int)v_,     \
                          (int)ok_[i_].value);                                               \
        }                                                                                    \
        ck_assert_int_eq(parse(bad, &v_), -EINVAL);                                          \
        ck_assert_int_eq(parse(NULL, &v_), -EINVAL);                                         \
    } while (0)

/* Checks a HOST:PORT parser int parse(const char *in, char *host, size_t cap,
 * unsigned *port) (hostport_split, backend_parse_url): `in` parses to 0
 * with host want_host and port want_port, the host in a 64-byte buffer.  A
 * macro, so that a failure names the caller's line. */
#define TESTLIB_CHECK_HOSTPORT(parse, in, want_host, want_port)                              \
    do {                                                                                     \
        char host_[64];                                                                      \
        unsigned port_ = 0;                                                                  \
        ck_assert_int_eq(parse(in, host_, sizeof host_, &port_), 0);                         \
        ck_assert_str_eq(host_, want_host);                                                  \
        ck_assert_uint_eq(port_, want_port);                                                 \
    } while (0)

/* Returns 1 when an out-of-memory test must skip: under ASan or valgrind,
 * which need the address space themselves.  0 otherwise. */
static inline int testlib_oom_skip(void)
{
#if defined(__SANITIZE_ADDRESS__)
    return 1;
#endif
    const char *pre = getenv("LD_PRELOAD");
    return pre && strstr(pre, "vgpreload");
}

/* Returns the process's virtual size in bytes from /proc, or 0. */
static inline size_t testlib_vm_size(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    size_t kb = 0;
    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "VmSize: %zu kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb * 1024;
}

/* Writes text to a new temporary file under /tmp; returns its path, in a
 * buffer the next call overwrites.  The test removes the file.  Fails the
 * test when it cannot. */
static inline char *testlib_temp_file(const char *text)
{
    static char path[64];
    strcpy(path, "/tmp/bqos_test.XXXXXX");
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return path;
}

/* Caps the address space at the process's size now plus extra bytes (never
 * above the cap it had), and saves the old cap in *old: the test puts it back
 * with setrlimit(RLIMIT_AS, old).  Fails the test when it cannot. */
static inline void testlib_limit_memory(size_t extra, struct rlimit *old)
{
    struct rlimit lim;
    ck_assert_int_eq(getrlimit(RLIMIT_AS, old), 0);
    size_t vm = testlib_vm_size();
    ck_assert_uint_gt(vm, 0);
    lim = *old;
    lim.rlim_cur = (rlim_t)(vm + extra);
    if (old->rlim_cur != RLIM_INFINITY && old->rlim_cur < lim.rlim_cur)
        lim.rlim_cur = old->rlim_cur;
    ck_assert_int_eq(setrlimit(RLIMIT_AS, &lim), 0);
}

#endif
