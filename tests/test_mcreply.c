/* test_mcreply.c - Check suite for storage-node/mc/mcreply: the flat reply (mcreply_flat()) is byte for byte and count for count mcreply_ops()'s, or declines with nothing written or counted. */
#include <check.h>
#include <event2/buffer.h>
#include <string.h>

#include "storage-node/mc/mcreply.h"
#include "tests/testlib.h"

/* An op answered with `reply` (a hit's value, flags and cas). */
static backend_op_t op(const char *key, mcp_reply_t reply, const char *value, uint32_t flags,
                       uint64_t cas)
{
    backend_op_t o = {0};
    o.key = key;
    o.keylen = strlen(key);
    o.reply = reply;
    if (value) {
        o.rvalue = (char *)value;
        o.rvlen = strlen(value);
    }
    o.rflags = flags;
    o.rcas = cas;
    return o;
}

/* mcreply_flat() with room `cap`: returns its length (-1: declined) and
 * checks that its bytes and counts are mcreply_ops()'s, or that it wrote
 * and counted nothing. */
static long same_as_ops(mcp_cmd_t cmd, const backend_op_t *ops, int n, size_t cap)
{
    static char flat[4096];
    memset(flat, 'Z', sizeof flat);
    mcstats_t sf = {0}, se = {0};
    ck_assert_uint_le(cap, sizeof flat);
    long len = mcreply_flat(flat, cap, cmd, ops, sizeof *ops, n, &sf);
    if (len < 0) {
        ck_assert_uint_eq(sf.get_hits + sf.get_misses, 0);
        ck_assert_int_eq(flat[0], 'Z');
        return len;
    }
    ck_assert_uint_le((size_t)len, cap);
    struct evbuffer *out = evbuffer_new();
    mcreply_ops(out, cmd, ops, sizeof *ops, n, &se);
    size_t elen = evbuffer_get_length(out);
    const char *e = (const char *)evbuffer_pullup(out, -1);
    ck_assert_msg((size_t)len == elen && memcmp(flat, e, elen) == 0, "flat '%.*s' ops '%.*s'",
                  (int)len, flat, (int)elen, e);
    ck_assert_uint_eq(sf.get_hits, se.get_hits);
    ck_assert_uint_eq(sf.get_misses, se.get_misses);
    evbuffer_free(out);
    return len;
}

/* The get family: one hit, hits around a miss, gets with cas, gat, all
 * missed; fixed lines. */
START_TEST(test_mcreply_flat_as_ops)
{
    backend_op_t g1[] = {op("k:1", MCP_R_VALUE, "hello", 7, 0)};
    ck_assert_int_eq(same_as_ops(MCP_CMD_GET, g1, 1, 1024), 15 + 7 + 5); /* VALUE k:1 7 5, hello, END */
    backend_op_t g3[] = {op("a", MCP_R_VALUE, "1", 0, 0), op("b", MCP_R_MISS, NULL, 0, 0),
                         op("c", MCP_R_VALUE, "", 4294967295u, 0)};
    ck_assert_int_gt(same_as_ops(MCP_CMD_GET, g3, 3, 1024), 0);
    backend_op_t gs[] = {op("a", MCP_R_VALUE, "xyz", 1, 18446744073709551615ull),
                         op("a", MCP_R_VALUE, "xyz", 1, 42)};
    ck_assert_int_gt(same_as_ops(MCP_CMD_GETS, gs, 2, 1024), 0);
    ck_assert_int_gt(same_as_ops(MCP_CMD_GATS, gs, 1, 1024), 0);
    ck_assert_int_gt(same_as_ops(MCP_CMD_GAT, gs, 1, 1024), 0);
    backend_op_t miss[] = {op("a", MCP_R_MISS, NULL, 0, 0), op("b", MCP_R_MISS, NULL, 0, 0)};
    ck_assert_int_eq(same_as_ops(MCP_CMD_GET, miss, 2, 1024), 5);
    static const mcp_reply_t lines[] = {MCP_R_STORED, MCP_R_NOT_STORED, MCP_R_EXISTS,
                                        MCP_R_NOT_FOUND, MCP_R_DELETED, MCP_R_TOUCHED, MCP_R_OK};
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
        backend_op_t s[] = {op("k", lines[i], NULL, 0, 0)};
        ck_assert_int_gt(same_as_ops(MCP_CMD_SET, s, 1, 1024), 0);
    }
}
END_TEST

/* It declines what it does not format (a number, a failed key, a meta
 * reply) and what may not fit cap, counting nothing. */
START_TEST(test_mcreply_flat_declines)
{
    backend_op_t num[] = {op("n", MCP_R_NUMBER, NULL, 0, 0)};
    num[0].number = 12;
    ck_assert_int_eq(same_as_ops(MCP_CMD_INCR, num, 1, 1024), -1);
    backend_op_t fail[] = {op("a", MCP_R_VALUE, "v", 0, 0), op("b", MCP_R_SERVER_ERROR, NULL, 0, 0)};
    ck_assert_int_eq(same_as_ops(MCP_CMD_GET, fail, 2, 1024), -1);
    backend_op_t meta[] = {op("m", MCP_R_VALUE, "VA 1\r\nx\r\n", 0, 0)};
    ck_assert_int_eq(same_as_ops(MCP_CMD_MG, meta, 1, 1024), -1);
    static char big[2000];
    memset(big, 'b', sizeof big - 1);
    backend_op_t g[] = {op("k", MCP_R_VALUE, big, 0, 0)};
    ck_assert_int_eq(same_as_ops(MCP_CMD_GET, g, 1, 1024), -1);
    ck_assert_int_gt(same_as_ops(MCP_CMD_GET, g, 1, 4096), 0);
    backend_op_t s[] = {op("k", MCP_R_NOT_STORED, NULL, 0, 0)};
    ck_assert_int_eq(same_as_ops(MCP_CMD_SET, s, 1, 11), -1); /* "NOT_STORED\r\n" is 12 */
    ck_assert_int_eq(same_as_ops(MCP_CMD_SET, s, 1, 12), 12);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {test_mcreply_flat_as_ops, test_mcreply_flat_declines};
    const testlib_case_t tc = {.name = "mcreply"};
    return testlib_run_case(&tc, tests, sizeof tests / sizeof tests[0]);
}
