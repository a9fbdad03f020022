/* test_mcproto.c - Check suite for storage-node/mcproto: request parsing, error replies and reply formatting. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "storage-node/mc/mcproto.h"
#include "tests/testlib.h"

static mcp_req_t req;
static mcp_result_t res;
static const mcp_conf_t conf = {.max_item = 1024};

static mcp_status_t parse(const char *s)
{
    return mcp_parse(s, strlen(s), &conf, &req, &res);
}

static int str_is(mcp_str_t t, const char *s)
{
    return t.len == strlen(s) && memcmp(t.ptr, s, t.len) == 0;
}

START_TEST(test_mcproto_get_multi)
{
    const char *s = "get a  red:b c\r\nrest";
    ck_assert_int_eq(parse(s), MCP_OK);
    ck_assert_int_eq(req.cmd, MCP_CMD_GET);
    ck_assert_uint_eq(req.nkeys, 3);
    ck_assert(str_is(req.keys[0], "a"));
    ck_assert(str_is(req.keys[1], "red:b"));
    ck_assert(str_is(req.keys[2], "c"));
    ck_assert_uint_eq(res.consumed, strlen("get a  red:b c\r\n"));
    ck_assert_int_eq(parse("gets k\n"), MCP_OK);
    ck_assert_int_eq(req.cmd, MCP_CMD_GETS);
    ck_assert_uint_eq(res.consumed, 7);
}
END_TEST

START_TEST(test_mcproto_set_with_data)
{
    const char *s = "set k 5 -1 3 noreply\r\nabc\r\nget k\r\n";
    ck_assert_int_eq(parse(s), MCP_OK);
    ck_assert_int_eq(req.cmd, MCP_CMD_SET);
    ck_assert_uint_eq(req.flags, 5);
    ck_assert_int_eq(req.exptime, -1);
    ck_assert_uint_eq(req.nbytes, 3);
    ck_assert(memcmp(req.data, "abc", 3) == 0);
    ck_assert(req.noreply);
    ck_assert_uint_eq(res.consumed, strlen("set k 5 -1 3 noreply\r\nabc\r\n"));
    ck_assert_int_eq(parse("cas k 0 0 1 77\r\nx\r\n"), MCP_OK);
    ck_assert_uint_eq(req.cas, 77);
    ck_assert(!req.noreply);
}
END_TEST

START_TEST(test_mcproto_incomplete)
{
    ck_assert_int_eq(parse(""), MCP_NEED_MORE);
    ck_assert_int_eq(parse("get a"), MCP_NEED_MORE);
    ck_assert_int_eq(parse("set k 0 0 5\r\nab"), MCP_NEED_MORE);
    ck_assert_int_eq(parse("set k 0 0 5\r\nabcde\r"), MCP_NEED_MORE);
    ck_assert_int_eq(parse("set k 0 0 5\r\nabcde\r\n"), MCP_OK);
}
END_TEST

START_TEST(test_mcproto_errors)
{
    ck_assert_int_eq(parse("bogus\r\n"), MCP_ERROR);
    ck_assert_str_eq(res.error, "ERROR");
    ck_assert_int_eq(parse("\r\n"), MCP_ERROR);
    ck_assert_str_eq(res.error, "ERROR");
    ck_assert_int_eq(parse("set k 0 0\r\n"), MCP_ERROR);
    ck_assert_str_eq(res.error, "ERROR");
    ck_assert_int_eq(parse("get\r\n"), MCP_ERROR);
    ck_assert_str_eq(res.error, "ERROR");
    ck_assert_int_eq(parse("set k x 0 1\r\nx\r\n"), MCP_ERROR);
    ck_assert_str_eq(res.error, "CLIENT_ERROR bad command line format");
    ck_assert_uint_eq(res.column, 6);
    ck_assert_uint_eq(res.consumed, strlen("set k x 0 1\r\n")); /* data is then a command */
    ck_assert_int_eq(parse("set k 0 0 -1\r\n"), MCP_ERROR);
    ck_assert_str_eq(res.error, "CLIENT_ERROR bad command line format");
    ck_assert_int_eq(parse("incr k abc\r\n"), MCP_ERROR);
    ck_assert_str_eq(res.error, "CLIENT_ERROR invalid numeric delta argument");
    ck_assert_int_eq(parse("touch k x\r\n"), MCP_ERROR);
    ck_assert_str_eq(res.error, "CLIENT_ERROR invalid exptime argument");
    ck_assert_int_eq(parse("delete k 5\r\n"), MCP_ERROR);
    ck_assert(strncmp(res.error, "CLIENT_ERROR bad command line format.", 37) == 0);
    ck_assert_int_eq(parse("delete k 0 noreply\r\n"), MCP_OK);
    ck_assert(req.noreply);
}
END_TEST

START_TEST(test_mcproto_long_key)
{
    char line[400];
    char key[MCP_KEY_MAX + 2];
    memset(key, 'k', sizeof key - 1);
    key[MCP_KEY_MAX + 1] = '\0'; /* 251 bytes */
    snprintf(line, sizeof line, "get a %s\r\n", key);
    ck_assert_int_eq(parse(line), MCP_ERROR);
    ck_assert_str_eq(res.error, "CLIENT_ERROR bad command line format");
    ck_assert_uint_eq(res.column, 6);
    key[MCP_KEY_MAX] = '\0'; /* 250 bytes: fine */
    snprintf(line, sizeof line, "set %s 0 0 1\r\nx\r\n", key);
    ck_assert_int_eq(parse(line), MCP_OK);
}
END_TEST

START_TEST(test_mcproto_too_large_swallows)
{
    ck_assert_int_eq(parse("set big 0 0 2000\r\nxx"), MCP_ERROR);
    ck_assert_str_eq(res.error, "SERVER_ERROR object too large for cache");
    ck_assert_uint_eq(res.consumed, strlen("set big 0 0 2000\r\n"));
    ck_assert_uint_eq(res.swallow, 2002);
    ck_assert_int_eq(res.cmd, MCP_CMD_SET);
    ck_assert(str_is(res.key, "big"));
}
END_TEST

START_TEST(test_mcproto_bad_data_chunk)
{
    const char *s = "set k 0 0 1\r\nxyz\r\n";
    ck_assert_int_eq(parse(s), MCP_ERROR);
    ck_assert_str_eq(res.error, "CLIENT_ERROR bad data chunk");
    /* memcached reads exactly bytes+2 and parses the rest as commands */
    ck_assert_uint_eq(res.consumed, strlen("set k 0 0 1\r\nxyz"));
}
END_TEST

START_TEST(test_mcproto_line_too_long_and_binary)
{
    size_t n = MCP_LINE_MAX + 10;
    char *buf = malloc(n);
    ck_assert_ptr_nonnull(buf);
    memset(buf, 'a', n);
    ck_assert_int_eq(mcp_parse(buf, n, &conf, &req, &res), MCP_CLOSE);
    ck_assert_str_eq(res.error, "CLIENT_ERROR line too long");
    free(buf);
    const char bin[] = "\x80\x01\x00\x00";
    ck_assert_int_eq(mcp_parse(bin, 4, &conf, &req, &res), MCP_CLOSE);
    ck_assert_ptr_null(res.error);
    ck_assert_int_eq(res.binary, 1);
}
END_TEST

START_TEST(test_mcproto_gat)
{
    ck_assert_int_eq(parse("gat 100 a red:b\r\n"), MCP_OK);
    ck_assert_int_eq(req.cmd, MCP_CMD_GAT);
    ck_assert_int_eq(req.exptime, 100);
    ck_assert_uint_eq(req.nkeys, 2);
    ck_assert(str_is(req.keys[0], "a"));
    ck_assert(str_is(req.keys[1], "red:b"));
    ck_assert_int_eq(parse("gats -1 k\r\n"), MCP_OK);
    ck_assert_int_eq(req.cmd, MCP_CMD_GATS);
    ck_assert_int_eq(req.exptime, -1);
    ck_assert_int_eq(parse("gat 5\r\n"), MCP_OK); /* memcached: END */
    ck_assert_uint_eq(req.nkeys, 0);
    ck_assert_int_eq(parse("gat\r\n"), MCP_ERROR);
    ck_assert_str_eq(res.error, "ERROR");
    ck_assert_int_eq(parse("gat x k\r\n"), MCP_ERROR);
    ck_assert_str_eq(res.error, "CLIENT_ERROR invalid exptime argument");
    ck_assert_uint_eq(res.column, 4);
    ck_assert_int_eq(parse("gats 99999999999 k\r\n"), MCP_ERROR);
    ck_assert_str_eq(res.error, "CLIENT_ERROR invalid exptime argument");
    char line[400];
    snprintf(line, sizeof line, "gat 1 k %0251d\r\n", 0);
    ck_assert_int_eq(parse(line), MCP_ERROR);
    ck_assert_str_eq(res.error, "CLIENT_ERROR bad command line format");
    ck_assert_uint_eq(res.column, 8);
}
END_TEST

START_TEST(test_mcproto_meta_get)
{
    const char *s = "mg red:k v q  k O12\r\nmn\r\n";
    ck_assert_int_eq(parse(s), MCP_OK);
    ck_assert_int_eq(req.cmd, MCP_CMD_MG);
    ck_assert(mcp_cmd_is_meta(req.cmd));
    ck_assert_uint_eq(req.nkeys, 1);
    ck_assert(str_is(req.keys[0], "red:k"));
    ck_assert(req.quiet);
    ck_assert(!req.noreply);
    ck_assert(str_is(req.line, "mg red:k v q  k O12"));
    ck_assert_uint_eq(res.consumed, strlen("mg red:k v q  k O12\r\n"));
    ck_assert_int_eq(parse("mn\r\n"), MCP_OK);
    ck_assert_int_eq(req.cmd, MCP_CMD_MN);
    ck_assert(!mcp_cmd_is_meta(req.cmd));
    ck_assert_int_eq(parse("mn whatever\n"), MCP_OK);
    /* base64: classified by the decoded key, forwarded as written */
    ck_assert_int_eq(parse("mg cmVkOms= b v\r\n"), MCP_OK);
    ck_assert(str_is(req.keys[0], "red:k"));
    ck_assert(str_is(req.line, "mg cmVkOms= b v"));
    ck_assert(!req.quiet);
    ck_assert_int_eq(parse("md red:k q C5\r\n"), MCP_OK);
    ck_assert_int_eq(req.cmd, MCP_CMD_MD);
    ck_assert(req.quiet);
    ck_assert_int_eq(parse("ma red:n N0 J5 MI D2 v\r\n"), MCP_OK);
    ck_assert_int_eq(req.cmd, MCP_CMD_MA);
    ck_assert_int_eq(parse("me red:k\r\n"), MCP_OK);
    ck_assert_int_eq(req.cmd, MCP_CMD_ME);
    ck_assert_int_eq(parse("me cmVkOms= b\r\n"), MCP_OK);
    ck_assert(str_is(req.keys[0], "red:k"));
}
END_TEST

START_TEST(test_mcproto_meta_set)
{
    const char *s = "ms red:k 3 T0 F5 q\r\nabc\r\nmn\r\n";
    ck_assert_int_eq(parse(s), MCP_OK);
    ck_assert_int_eq(req.cmd, MCP_CMD_MS);
    ck_assert(str_is(req.keys[0], "red:k"));
    ck_assert_uint_eq(req.nbytes, 3);
    ck_assert(memcmp(req.data, "abc", 3) == 0);
    ck_assert(req.quiet);
    ck_assert(str_is(req.line, "ms red:k 3 T0 F5 q"));
    ck_assert_uint_eq(res.consumed, strlen("ms red:k 3 T0 F5 q\r\nabc\r\n"));
    ck_assert_int_eq(parse("ms red:k 3\r\nab"), MCP_NEED_MORE);
    ck_assert_int_eq(parse("ms red:k 3\r\nabcd\r\n"), MCP_ERROR);
    ck_assert_str_eq(res.error, "CLIENT_ERROR bad data chunk");
    /* too large: swallowed, and the key given for the delete */
    ck_assert_int_eq(parse("ms cmVkOms= 2000 b\r\n"), MCP_ERROR);
    ck_assert_str_eq(res.error, "SERVER_ERROR object too large for cache");
    ck_assert_uint_eq(res.swallow, 2002);
    ck_assert_int_eq(res.cmd, MCP_CMD_MS);
    ck_assert(str_is(res.key, "red:k"));
    ck_assert_uint_eq(res.column, 12);
    /* a key that is not base64: memcached drops the data block */
    ck_assert_int_eq(parse("ms Zm8 2 b\r\nfo\r\n"), MCP_ERROR);
    ck_assert_str_eq(res.error, "CLIENT_ERROR error decoding key");
    ck_assert_uint_eq(res.swallow, 4);
    ck_assert_ptr_null(res.key.ptr);
    /* a bad length: no data block is read (memcached parses it as commands) */
    ck_assert_int_eq(parse("ms red:k x\r\nabc\r\n"), MCP_ERROR);
    ck_assert_str_eq(res.error, "CLIENT_ERROR bad command line format");
    ck_assert_uint_eq(res.column, 9);
    ck_assert_uint_eq(res.swallow, 0);
    ck_assert_uint_eq(res.consumed, strlen("ms red:k x\r\n"));
    ck_assert_int_eq(parse("ms red:k -1\r\n"), MCP_ERROR);
    ck_assert_str_eq(res.error, "CLIENT_ERROR bad command line format");
    ck_assert_int_eq(parse("ms red:k\r\n"), MCP_ERROR);
    ck_assert_str_eq(res.error, "CLIENT_ERROR bad command line format");
    ck_assert_uint_eq(res.column, 3);
}
END_TEST

START_TEST(test_mcproto_meta_errors)
{
    static const struct {
        const char *in, *error;
        size_t column;
    } cases[] = {
        {"mg\r\n", "ERROR", 0},
        {"ms\r\n", "ERROR", 0},
        {"md\r\n", "ERROR", 0},
        {"ma\r\n", "ERROR", 0},
        {"me\r\n", "CLIENT_ERROR bad command line format", 0},
        {"mg foo@ b\r\n", "CLIENT_ERROR error decoding key", 3},
        {"mg Zm9v= b\r\n", "CLIENT_ERROR error decoding key", 3},
        {"me foo b\r\n", "CLIENT_ERROR bad command line format", 3},
        {"mg a b c d e f g h i j k l m n o p q r s\r\n",
         "CLIENT_ERROR options flags are too long", 39},
        {"md a b c d e f g h i j k l m n o p q r s\r\n",
         "CLIENT_ERROR options flags too long", 39},
        {"ms a 1 c d e f g h i j k l m n o p q r s\r\n",
         "CLIENT_ERROR options flags too long", 39},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ck_assert_msg(parse(cases[i].in) == MCP_ERROR, "%s", cases[i].in);
        ck_assert_str_eq(res.error, cases[i].error);
        ck_assert_msg(res.column == cases[i].column, "%s: column %zu", cases[i].in, res.column);
    }
    /* 18 tokens of flags are fine for mg (memcached checks them) */
    ck_assert_int_eq(parse("mg k v c d e f g h i j k l m n o p q r\r\n"), MCP_OK);
    ck_assert_int_eq(parse("me a x y z c d e f g h i j k l m n o p q r s t\r\n"), MCP_OK);
    char line[400];
    snprintf(line, sizeof line, "mg %0251d v\r\n", 0);
    ck_assert_int_eq(parse(line), MCP_ERROR);
    ck_assert_str_eq(res.error, "CLIENT_ERROR bad command line format");
    ck_assert_uint_eq(res.column, 3);
}
END_TEST

START_TEST(test_mcproto_base64)
{
    char out[8];
    ck_assert_int_eq(mcp_base64_decode("Zm9v", 4, out, sizeof out), 3);
    ck_assert(memcmp(out, "foo", 3) == 0);
    ck_assert_int_eq(mcp_base64_decode("Zm8=", 4, out, sizeof out), 2);
    ck_assert_int_eq(mcp_base64_decode("Zg==", 4, out, sizeof out), 1);
    ck_assert_int_eq(mcp_base64_decode("+/+/", 4, out, sizeof out), 3);
    ck_assert_int_eq(mcp_base64_decode("Zm8", 3, out, sizeof out), -EINVAL);
    ck_assert_int_eq(mcp_base64_decode("", 0, out, sizeof out), -EINVAL);
    ck_assert_int_eq(mcp_base64_decode("Z===", 4, out, sizeof out), -EINVAL);
    ck_assert_int_eq(mcp_base64_decode("Zg=a", 4, out, sizeof out), -EINVAL);
    ck_assert_int_eq(mcp_base64_decode("Zg==Zg==", 8, out, sizeof out), -EINVAL);
    ck_assert_int_eq(mcp_base64_decode("Zm9vYmFyYmF6", 12, out, 8), -ENOSPC);
}
END_TEST

START_TEST(test_mcproto_binary_refusal)
{
    /* a binary GET (opcode 0x00) with opaque 0xdeadbeef */
    const char bin[24] = {(char)0x80, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                          (char)0xde, (char)0xad, (char)0xbe, (char)0xef};
    char out[MCP_BINARY_REFUSAL_LEN];
    int n = mcp_format_binary_refusal(out, sizeof out, bin, sizeof bin);
    size_t body = strlen(MCP_BINARY_MSG);
    ck_assert_int_eq(n, (int)(24 + body));
    ck_assert_uint_eq((unsigned char)out[0], 0x81);
    ck_assert_uint_eq((unsigned char)out[1], 0x00);
    ck_assert_uint_eq((unsigned char)out[6] << 8 | (unsigned char)out[7], 0x0083);
    ck_assert_uint_eq((unsigned char)out[11], body);
    ck_assert(memcmp(out + 12, bin + 12, 4) == 0);
    ck_assert(memcmp(out + 24, MCP_BINARY_MSG, body) == 0);
    ck_assert_int_eq(mcp_format_binary_refusal(out, 10, bin, sizeof bin), -ENOSPC);
    /* a short request: opcode and opaque zero where missing */
    n = mcp_format_binary_refusal(out, sizeof out, "\x80\x0a", 2);
    ck_assert_uint_eq((unsigned char)out[1], 0x0a);
    ck_assert_uint_eq((unsigned char)out[12], 0);
}
END_TEST

START_TEST(test_mcproto_misc_commands)
{
    ck_assert_int_eq(parse("flush_all 10 noreply\r\n"), MCP_OK);
    ck_assert_int_eq(req.cmd, MCP_CMD_FLUSH_ALL);
    ck_assert_int_eq(req.exptime, 10);
    ck_assert(req.noreply);
    ck_assert_int_eq(parse("flush_all x\r\n"), MCP_ERROR);
    ck_assert_int_eq(parse("verbosity 1\r\n"), MCP_OK);
    ck_assert_int_eq(parse("verbosity\r\n"), MCP_ERROR);
    ck_assert_int_eq(parse("version\r\n"), MCP_OK);
    ck_assert_int_eq(parse("stats detail on\r\n"), MCP_OK);
    ck_assert(str_is(req.arg, "detail on"));
    ck_assert_int_eq(parse("stats\r\n"), MCP_OK);
    ck_assert_uint_eq(req.arg.len, 0);
    ck_assert_int_eq(parse("stats cachedump 1  0\r\n"), MCP_OK); /* memcdump's */
    ck_assert(str_is(req.arg, "cachedump 1  0"));
    ck_assert_int_eq(parse("stats a b c d\r\n"), MCP_ERROR);
    ck_assert_str_eq(res.error, "ERROR");
    ck_assert_int_eq(parse("incr n 18446744073709551615\r\n"), MCP_OK);
    ck_assert(req.delta == UINT64_MAX);
    ck_assert_int_eq(parse("quit\r\n"), MCP_OK);
    ck_assert_int_eq(req.cmd, MCP_CMD_QUIT);
}
END_TEST

/* Defect 13: with no_flush (memcached's -F) every flush_all is refused as
 * memcached refuses it, before its arguments; noreply silences the refusal. */
START_TEST(test_mcproto_flush_all_disabled)
{
    const mcp_conf_t no = {.max_item = 1024, .no_flush = 1};
    const char *lines[] = {"flush_all\r\n", "flush_all 10\r\n", "flush_all x\r\n"};
    for (size_t i = 0; i < 3; i++) {
        ck_assert_int_eq(mcp_parse(lines[i], strlen(lines[i]), &no, &req, &res), MCP_ERROR);
        ck_assert_str_eq(res.error, "CLIENT_ERROR flush_all not allowed");
        ck_assert_uint_eq(res.consumed, strlen(lines[i]));
        ck_assert(!res.noreply);
    }
    const char *q = "flush_all noreply\r\n";
    ck_assert_int_eq(mcp_parse(q, strlen(q), &no, &req, &res), MCP_ERROR);
    ck_assert(res.noreply);
    const char *g = "get k\r\n";
    ck_assert_int_eq(mcp_parse(g, strlen(g), &no, &req, &res), MCP_OK);
}
END_TEST

/* A get takes MCP_MAX_KEYS keys; one more is a format error (a bound of
 * docs/security.md). */
START_TEST(test_mcproto_max_keys)
{
    char *line = malloc(4 + 3 * (MCP_MAX_KEYS + 1) + 3);
    ck_assert_ptr_nonnull(line);
    for (int extra = 0; extra < 2; extra++) {
        char *p = line + sprintf(line, "get");
        for (int i = 0; i < MCP_MAX_KEYS + extra; i++)
            p += sprintf(p, " %c%c", 'a' + i % 26, 'a' + i / 26 % 26);
        strcpy(p, "\r\n");
        mcp_status_t st = mcp_parse(line, strlen(line), &conf, &req, &res);
        if (!extra) {
            ck_assert_int_eq(st, MCP_OK);
            ck_assert_uint_eq(req.nkeys, MCP_MAX_KEYS);
        } else {
            ck_assert_int_eq(st, MCP_ERROR);
            ck_assert_str_eq(res.error, "CLIENT_ERROR bad command line format");
        }
    }
    free(line);
}
END_TEST

START_TEST(test_mcproto_format)
{
    char buf[MCP_KEY_MAX + 96];
    int n = mcp_format_value_header(buf, sizeof buf, "red:k", 5, 3, 10, 0, 0);
    ck_assert_int_eq(n, (int)strlen("VALUE red:k 3 10\r\n"));
    ck_assert_str_eq(buf, "VALUE red:k 3 10\r\n");
    n = mcp_format_value_header(buf, sizeof buf, "k", 1, 0, 1, 1, 42);
    ck_assert_str_eq(buf, "VALUE k 0 1 42\r\n");
    ck_assert_int_eq(mcp_format_value_header(buf, 5, "k", 1, 0, 1, 0, 0), -ENOSPC);
    ck_assert_str_eq(mcp_reply_line(MCP_R_STORED), "STORED\r\n");
    ck_assert_str_eq(mcp_reply_line(MCP_R_NOT_FOUND), "NOT_FOUND\r\n");
    ck_assert_str_eq(mcp_reply_line(MCP_R_TOUCHED), "TOUCHED\r\n");
    ck_assert_str_eq(mcp_cmd_name(MCP_CMD_PREPEND), "prepend");
}
END_TEST

/* Every prefix of a valid pipeline is either incomplete or parses the same
 * first request: the parser never reads past the buffer (run under ASan). */
START_TEST(test_mcproto_prefixes)
{
    const char *s = "set k 1 2 4\r\nabcd\r\nget k j\r\n";
    size_t n = strlen(s);
    for (size_t i = 0; i < n; i++) {
        char *b = malloc(i ? i : 1);
        memcpy(b, s, i);
        mcp_status_t st = mcp_parse(b, i, &conf, &req, &res);
        ck_assert(st == MCP_NEED_MORE || (st == MCP_OK && res.consumed <= i));
        free(b);
    }
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {test_mcproto_get_multi, test_mcproto_set_with_data,
                                  test_mcproto_incomplete, test_mcproto_errors,
                                  test_mcproto_long_key, test_mcproto_too_large_swallows,
                                  test_mcproto_bad_data_chunk,
                                  test_mcproto_line_too_long_and_binary, test_mcproto_binary_refusal,
                                  test_mcproto_gat, test_mcproto_meta_get, test_mcproto_meta_set,
                                  test_mcproto_meta_errors, test_mcproto_base64,
                                  test_mcproto_misc_commands,
                                  test_mcproto_format, test_mcproto_prefixes,
                                  test_mcproto_flush_all_disabled, test_mcproto_max_keys};
    return testlib_run_tests("mcproto", tests, sizeof tests / sizeof tests[0]);
}
