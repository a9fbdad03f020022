/* test_replybudget.c - Check suite for storage-node/mc/replybudget: node-wide counting of unsent reply bytes, the per-connection soft limit (not read, closed after soft_secs) and hard limit (closed), and the node-wide budget that holds back the heaviest connections. */
#include <check.h>

#include "storage-node/mc/replybudget.h"
#include "tests/testlib.h"

/* soft 100, hard 400, 60 s at soft, 1000 node-wide */
static const replybudget_config_t cfg = {.soft = 100, .hard = 400, .soft_secs = 60, .total = 1000};

/* Each test's budget with cfg, and two connections holding nothing. */
static replybudget_t b;
static replybudget_conn_t c, c2;

static void setup(void)
{
    replybudget_init(&b, &cfg);
    c = c2 = (replybudget_conn_t){0};
}

START_TEST(test_replybudget_counts)
{
    ck_assert_uint_eq(b.held, 0);
    ck_assert_uint_eq(b.nheld, 0);
    ck_assert_uint_eq(b.cfg.hard, 400);
    ck_assert_int_eq(replybudget_set(&b, &c, 30, 1), REPLYBUDGET_OK);
    ck_assert_int_eq(replybudget_set(&b, &c2, 50, 1), REPLYBUDGET_OK);
    ck_assert_uint_eq(b.held, 80);
    ck_assert_uint_eq(b.nheld, 2);
    /* a new count replaces the connection's old one */
    ck_assert_int_eq(replybudget_set(&b, &c, 10, 2), REPLYBUDGET_OK);
    ck_assert_uint_eq(c.held, 10);
    ck_assert_uint_eq(b.held, 60);
    ck_assert_uint_eq(b.nheld, 2);
    /* 0: it holds nothing (or closed) and leaves the count */
    ck_assert_int_eq(replybudget_set(&b, &c, 0, 3), REPLYBUDGET_OK);
    ck_assert_uint_eq(b.held, 50);
    ck_assert_uint_eq(b.nheld, 1);
    ck_assert_int_eq(replybudget_set(&b, &c, 0, 3), REPLYBUDGET_OK);
    ck_assert_uint_eq(b.nheld, 1);
    ck_assert_int_eq(replybudget_set(&b, &c2, 0, 3), REPLYBUDGET_OK);
    ck_assert_uint_eq(b.held, 0);
    ck_assert_uint_eq(b.nheld, 0);
}
END_TEST

/* Above hard the connection is closed at once; at hard exactly it is not. */
START_TEST(test_replybudget_hard_limit)
{
    ck_assert_int_eq(replybudget_set(&b, &c, 400, 10), REPLYBUDGET_OK);
    ck_assert_int_eq(replybudget_set(&b, &c, 401, 10), REPLYBUDGET_CLOSE);
    ck_assert_int_eq(replybudget_set(&b, &c, 0, 10), REPLYBUDGET_OK);
    ck_assert_uint_eq(b.held, 0);
}
END_TEST

/* At or above soft for soft_secs closes; dropping below soft starts the
 * clock afresh. */
START_TEST(test_replybudget_soft_limit_time)
{
    ck_assert_int_eq(replybudget_set(&b, &c, 99, 100), REPLYBUDGET_OK);
    ck_assert(c.soft_since == 0);
    ck_assert_int_eq(replybudget_set(&b, &c, 100, 100), REPLYBUDGET_OK);
    ck_assert(c.soft_since == 100);
    ck_assert_int_eq(replybudget_set(&b, &c, 200, 130), REPLYBUDGET_OK);
    ck_assert(c.soft_since == 100); /* still the time it reached soft */
    ck_assert_int_eq(replybudget_set(&b, &c, 150, 159.5), REPLYBUDGET_OK);
    ck_assert_int_eq(replybudget_set(&b, &c, 150, 160), REPLYBUDGET_CLOSE);
    /* below soft, then back: a new 60 s */
    ck_assert_int_eq(replybudget_set(&b, &c, 99, 161), REPLYBUDGET_OK);
    ck_assert(c.soft_since == 0);
    ck_assert_int_eq(replybudget_set(&b, &c, 100, 170), REPLYBUDGET_OK);
    ck_assert_int_eq(replybudget_set(&b, &c, 100, 229), REPLYBUDGET_OK);
    ck_assert_int_eq(replybudget_set(&b, &c, 100, 230), REPLYBUDGET_CLOSE);
}
END_TEST

/* A connection reads below soft; once stopped, it reads again only below
 * soft / 2. */
START_TEST(test_replybudget_may_read_per_conn)
{
    ck_assert(replybudget_may_read(&b, &c, 0));
    ck_assert(replybudget_may_read(&b, &c, 1));
    replybudget_set(&b, &c, 99, 1);
    ck_assert(replybudget_may_read(&b, &c, 0));
    ck_assert(!replybudget_may_read(&b, &c, 1));
    replybudget_set(&b, &c, 100, 1);
    ck_assert(!replybudget_may_read(&b, &c, 0));
    replybudget_set(&b, &c, 50, 1);
    ck_assert(!replybudget_may_read(&b, &c, 1));
    replybudget_set(&b, &c, 49, 1);
    ck_assert(replybudget_may_read(&b, &c, 1));
}
END_TEST

/* Over the node-wide budget (strictly above total), the connections that
 * hold at least the mean of those holding anything stop reading; lighter
 * ones and empty ones go on. */
START_TEST(test_replybudget_node_budget)
{
    replybudget_config_t big = cfg;
    big.soft = 1000;
    big.hard = 4000;
    replybudget_conn_t heavy = {0}, mid = {0}, light = {0}, empty = {0};
    replybudget_init(&b, &big);
    replybudget_set(&b, &heavy, 600, 1);
    replybudget_set(&b, &mid, 300, 1);
    replybudget_set(&b, &light, 100, 1);
    ck_assert_uint_eq(b.held, 1000);
    ck_assert(!replybudget_over(&b)); /* at total: not over */
    ck_assert(replybudget_may_read(&b, &heavy, 0));
    replybudget_set(&b, &light, 101, 1);
    ck_assert(replybudget_over(&b)); /* 1001, mean 333.67 */
    ck_assert(!replybudget_may_read(&b, &heavy, 0));
    ck_assert(replybudget_may_read(&b, &mid, 0));
    ck_assert(replybudget_may_read(&b, &light, 0));
    ck_assert(replybudget_may_read(&b, &empty, 0));
    /* the mean itself counts as heavy: 3 x 400 */
    replybudget_set(&b, &heavy, 400, 1);
    replybudget_set(&b, &mid, 400, 1);
    replybudget_set(&b, &light, 400, 1);
    ck_assert(replybudget_over(&b));
    ck_assert(!replybudget_may_read(&b, &mid, 0));
    ck_assert(replybudget_may_read(&b, &empty, 0));
    replybudget_set(&b, &heavy, 0, 1);
    ck_assert(!replybudget_over(&b)); /* 800 */
    ck_assert(replybudget_may_read(&b, &mid, 0));
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {test_replybudget_counts, test_replybudget_hard_limit,
                                  test_replybudget_soft_limit_time,
                                  test_replybudget_may_read_per_conn, test_replybudget_node_budget};
    const testlib_case_t tc = {.name = "replybudget", .setup = setup};
    return testlib_run_case(&tc, tests, sizeof tests / sizeof tests[0]);
}
