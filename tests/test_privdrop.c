/* test_privdrop.c - Check suite for common/privdrop: who may switch to whom, and (as root, in the forked test process) that every id is the target's afterwards and root does not come back. */
#include <check.h>
#include <errno.h>
#include <pwd.h>
#include <unistd.h>

#include "common/log.h"
#include "common/privdrop.h"
#include "tests/testlib.h"

START_TEST(test_privdrop_refusals)
{
    bqos_log_init("test_privdrop", BQOS_LOG_ERROR);
    ck_assert_int_eq(privdrop_apply(NULL), 0); /* nothing asked: nothing done */
    ck_assert_int_eq(privdrop_apply("no-such-user-bqos"), -ENOENT);
    ck_assert_int_eq(privdrop_apply("root"), -EINVAL);
    ck_assert_int_eq(privdrop_apply("0"), -EINVAL);
    if (geteuid() != 0) {
        /* Not root: only the user we are is accepted. */
        struct passwd *pw = getpwuid(geteuid());
        ck_assert_ptr_nonnull(pw);
        ck_assert_int_eq(privdrop_apply(pw->pw_name), 0);
        ck_assert_int_eq(privdrop_apply(geteuid() == 65534 ? "daemon" : "nobody"), -EPERM);
    }
}
END_TEST

/* Runs in Check's forked child: the switch is this process's alone. */
START_TEST(test_privdrop_switch)
{
    if (geteuid() != 0)
        return; /* needs root (it_privileges.sh covers the daemons) */
    bqos_log_init("test_privdrop", BQOS_LOG_ERROR);
    struct passwd *pw = getpwnam("nobody");
    ck_assert_ptr_nonnull(pw);
    uid_t uid = pw->pw_uid;
    gid_t gid = pw->pw_gid;
    ck_assert_int_eq(privdrop_apply("nobody"), 0);
    uid_t r, e, s;
    gid_t rg, eg, sg;
    ck_assert_int_eq(getresuid(&r, &e, &s), 0);
    ck_assert_int_eq(getresgid(&rg, &eg, &sg), 0);
    ck_assert(r == uid && e == uid && s == uid);
    ck_assert(rg == gid && eg == gid && sg == gid);
    gid_t groups[64];
    int n = getgroups(64, groups);
    ck_assert_int_ge(n, 0);
    for (int i = 0; i < n; i++)
        ck_assert_uint_ne(groups[i], 0); /* root's groups are gone */
    ck_assert_int_lt(setuid(0), 0);
    ck_assert_int_lt(setgid(0), 0);
    /* Now unprivileged: switching again to the same user is a no-op,
     * to another one refused. */
    ck_assert_int_eq(privdrop_apply("nobody"), 0);
    ck_assert_int_eq(privdrop_apply("daemon"), -EPERM);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {test_privdrop_refusals, test_privdrop_switch};
    return testlib_run_tests("privdrop", tests, sizeof tests / sizeof tests[0]);
}
