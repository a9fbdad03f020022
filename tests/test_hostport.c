/* test_hostport.c - Check suite for common/hostport: HOST:PORT and [IPv6]:PORT, and which ZeroMQ endpoints need ZMQ_IPV6. */
#include <check.h>
#include <errno.h>

#include "common/hostport.h"
#include "tests/testlib.h"

START_TEST(test_hostport_split)
{
    char host[64];
    unsigned port;
    TESTLIB_CHECK_HOSTPORT(hostport_split, "127.0.0.1:11311", "127.0.0.1", 11311);
    TESTLIB_CHECK_HOSTPORT(hostport_split, "[::1]:80", "::1", 80);
    TESTLIB_CHECK_HOSTPORT(hostport_split, "[::]:0", "::", 0);
    ck_assert_int_eq(hostport_split("nohost", host, sizeof host, &port), -EINVAL);
    ck_assert_int_eq(hostport_split(":80", host, sizeof host, &port), -EINVAL);
    ck_assert_int_eq(hostport_split("h:99999", host, sizeof host, &port), -EINVAL);
    ck_assert_int_eq(hostport_split("a-very-long-host:1", host, 4, &port), -EINVAL);
}
END_TEST

START_TEST(test_hostport_zmq_ipv6)
{
    ck_assert_int_eq(hostport_zmq_ipv6("tcp://[::1]:7070"), 1);
    ck_assert_int_eq(hostport_zmq_ipv6("tcp://[::]:7070"), 1);
    ck_assert_int_eq(hostport_zmq_ipv6("tcp://127.0.0.1:7070"), 0);
    ck_assert_int_eq(hostport_zmq_ipv6("tcp://localhost:7070"), 0);
    ck_assert_int_eq(hostport_zmq_ipv6("ipc:///tmp/[x]"), 0);
    ck_assert_int_eq(hostport_zmq_ipv6(NULL), 0);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {test_hostport_split, test_hostport_zmq_ipv6};
    return testlib_run_tests("hostport", tests, sizeof tests / sizeof tests[0]);
}
