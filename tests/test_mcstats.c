/* test_mcstats.c - Check suite for storage-node/mc/mcstats: the node's own answers to stats settings|conns|items|slabs|sizes|cachedump (no tenant's data). */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "storage-node/mc/mcstats.h"
#include "tests/testlib.h"

static const mcstats_t st = {.name = "n1", .threads = 3, .maxconns = 77, .item_size_max = 2048,
                             .flush_enabled = 0, .backend = "unix:/run/mc.sock"};

static char *ask(int fd, const char *arg, size_t *len)
{
    return mcstats_client_text(&st, fd, arg, strlen(arg), len);
}

/* The connection a test asks on: sv[0], a socket pair's end (not TCP). */
static int sv[2] = {-1, -1};

static void pair_open(void)
{
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
}

static void pair_close(void)
{
    close(sv[0]);
    close(sv[1]);
    sv[0] = sv[1] = -1;
}

START_TEST(test_mcstats_settings_are_the_nodes)
{
    size_t len = 0;
    char *t = ask(sv[0], "settings", &len);
    ck_assert_ptr_nonnull(t);
    ck_assert_uint_eq(len, strlen(t));
    ck_assert_ptr_nonnull(strstr(t, "STAT maxconns 77\r\n"));
    ck_assert_ptr_nonnull(strstr(t, "STAT item_size_max 2048\r\n"));
    ck_assert_ptr_nonnull(strstr(t, "STAT num_threads 3\r\n"));
    ck_assert_ptr_nonnull(strstr(t, "STAT flush_enabled no\r\n"));
    ck_assert_ptr_nonnull(strstr(t, "STAT tcpport 0\r\n")); /* not a TCP socket */
    ck_assert_ptr_nonnull(strstr(t, "STAT bqos_backend unix:/run/mc.sock\r\n"));
    ck_assert_str_eq(t + len - 5, "END\r\n");
    free(t);
}
END_TEST

START_TEST(test_mcstats_conns_only_the_asker)
{
    size_t len = 0;
    char *t = ask(sv[0], "conns", &len);
    ck_assert_ptr_nonnull(t);
    char want[64];
    snprintf(want, sizeof want, "STAT %d:state conn_parse_cmd\r\n", sv[0]);
    ck_assert_ptr_nonnull(strstr(t, want));
    int rows = 0;
    for (const char *p = t; (p = strstr(p, "STAT ")) != NULL; p++)
        rows++;
    ck_assert_int_eq(rows, 4);
    free(t);
}
END_TEST

START_TEST(test_mcstats_no_listing)
{
    size_t len = 0;
    static const char *const empty[] = {"items", "slabs", "cachedump 1 0", "cachedump 7 100"};
    for (size_t i = 0; i < sizeof empty / sizeof empty[0]; i++) {
        char *t = ask(-1, empty[i], &len);
        ck_assert_ptr_nonnull(t);
        ck_assert_str_eq(t, "END\r\n");
        free(t);
    }
    char *t = ask(-1, "sizes", &len);
    ck_assert_str_eq(t, "STAT sizes_status disabled\r\nEND\r\n");
    free(t);
    ck_assert_ptr_null(ask(-1, "cachedump", &len)); /* ERROR, as other unknowns */
    ck_assert_ptr_null(ask(-1, "detail dump", &len));
    ck_assert_ptr_null(ask(-1, "settingsx", &len));
    ck_assert_ptr_null(ask(-1, "", &len));
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {test_mcstats_settings_are_the_nodes,
                                  test_mcstats_conns_only_the_asker, test_mcstats_no_listing};
    const testlib_case_t c = {.name = "mcstats", .setup = pair_open, .teardown = pair_close};
    return testlib_run_case(&c, tests, sizeof tests / sizeof tests[0]);
}
