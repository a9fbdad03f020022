/* test_nbd.c - Check suite for storage-node/nbd: NBD encoders, parsers, request checks, garbage inputs. */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/be.h"
#include "storage-node/nbd/nbd.h"
#include "tests/testlib.h"

/* Builds a request header. */
static void mkreq(uint8_t *b, uint32_t magic, uint16_t flags, uint16_t type, uint64_t handle,
                  uint64_t off, uint32_t len)
{
    be_put32(b, magic);
    b[4] = (uint8_t)(flags >> 8);
    b[5] = (uint8_t)flags;
    b[6] = (uint8_t)(type >> 8);
    b[7] = (uint8_t)type;
    be_put64(b + 8, handle);
    be_put64(b + 16, off);
    be_put32(b + 24, len);
}

START_TEST(test_nbd_greeting_bytes)
{
    uint8_t b[NBD_GREETING_LEN];
    ck_assert_uint_eq(nbd_encode_greeting(b, NBD_FLAG_FIXED_NEWSTYLE | NBD_FLAG_NO_ZEROES),
                      18);
    ck_assert(memcmp(b, "NBDMAGICIHAVEOPT", 16) == 0);
    ck_assert_uint_eq(b[16], 0);
    ck_assert_uint_eq(b[17], 3);
}
END_TEST

START_TEST(test_nbd_client_flags)
{
    uint8_t b[4] = {0, 0, 0, 3};
    uint32_t f = 99;
    nbd_error_t e;
    ck_assert_int_eq(nbd_parse_client_flags(b, 4, &f, &e), 0);
    ck_assert_uint_eq(f, 3);
    ck_assert_int_eq(nbd_parse_client_flags(b, 3, &f, &e), -EAGAIN);
    b[3] = 4; /* unknown flag: the server must close */
    ck_assert_int_eq(nbd_parse_client_flags(b, 4, &f, &e), -EPROTO);
    ck_assert_ptr_nonnull(strstr(e.text, "unknown"));
    memcpy(b, "GET ", 4); /* an HTTP client */
    ck_assert_int_eq(nbd_parse_client_flags(b, 4, &f, NULL), -EPROTO);
}
END_TEST

START_TEST(test_nbd_option_header)
{
    uint8_t b[16];
    nbd_option_t o;
    nbd_error_t e;
    be_put64(b, NBD_MAGIC_OPT);
    be_put32(b + 8, NBD_OPT_GO);
    be_put32(b + 12, 77);
    ck_assert_int_eq(nbd_parse_option(b, 16, &o, &e), 0);
    ck_assert_uint_eq(o.option, NBD_OPT_GO);
    ck_assert_uint_eq(o.length, 77);
    ck_assert_int_eq(nbd_parse_option(b, 15, &o, &e), -EAGAIN);
    b[3] ^= 0x20; /* garbage magic */
    ck_assert_int_eq(nbd_parse_option(b, 16, &o, &e), -EPROTO);
    ck_assert_uint_eq(e.offset, 0);
}
END_TEST

/* Builds INFO/GO data: name, n info requests. */
static size_t mkinfo(uint8_t *b, const char *name, int n, const uint16_t *reqs)
{
    size_t nl = strlen(name);
    be_put32(b, (uint32_t)nl);
    memcpy(b + 4, name, nl);
    b[4 + nl] = (uint8_t)(n >> 8);
    b[5 + nl] = (uint8_t)n;
    for (int i = 0; i < n; i++) {
        b[6 + nl + 2 * i] = (uint8_t)(reqs[i] >> 8);
        b[7 + nl + 2 * i] = (uint8_t)reqs[i];
    }
    return 6 + nl + 2 * (size_t)n;
}

/* Builds mkinfo(b, name, n, reqs), checks that it parses into q and that
 * q names the export `name`. */
static void parse_info_ok(uint8_t *b, const char *name, int n, const uint16_t *reqs,
                          nbd_info_req_t *q)
{
    size_t len = mkinfo(b, name, n, reqs);
    ck_assert_int_eq(nbd_parse_info_request(b, len, q, NULL), 0);
    ck_assert_uint_eq(q->namelen, strlen(name));
    ck_assert(memcmp(q->name, name, q->namelen) == 0);
}

START_TEST(test_nbd_info_request_good)
{
    uint8_t b[64];
    uint16_t r[2] = {NBD_INFO_NAME, NBD_INFO_BLOCK_SIZE};
    nbd_info_req_t q;
    parse_info_ok(b, "red", 2, r, &q);
    ck_assert_uint_eq(q.nreqs, 2);
    ck_assert_int_eq(q.want_block_size, 1);
    parse_info_ok(b, "", 0, NULL, &q); /* default export, no requests */
    ck_assert_int_eq(q.want_block_size, 0);
}
END_TEST

START_TEST(test_nbd_info_request_garbage)
{
    uint8_t b[64];
    nbd_info_req_t q;
    nbd_error_t e;
    uint16_t r[1] = {NBD_INFO_BLOCK_SIZE};
    size_t n = mkinfo(b, "red", 1, r);
    /* one byte short, one byte extra */
    ck_assert_int_eq(nbd_parse_info_request(b, n - 1, &q, &e), -EINVAL);
    ck_assert_int_eq(nbd_parse_info_request(b, n + 1, &q, &e), -EINVAL);
    /* name length overruns the data */
    be_put32(b, 1000);
    ck_assert_int_eq(nbd_parse_info_request(b, n, &q, &e), -EINVAL);
    ck_assert_uint_eq(e.offset, 0);
    /* name length beyond the protocol's maximum */
    be_put32(b, 0xffffffffu);
    ck_assert_int_eq(nbd_parse_info_request(b, n, &q, &e), -EINVAL);
    /* NUL inside the name */
    n = mkinfo(b, "r\x01" "d", 0, NULL);
    b[5] = 0;
    ck_assert_int_eq(nbd_parse_info_request(b, n, &q, &e), -EINVAL);
    /* too short for anything */
    ck_assert_int_eq(nbd_parse_info_request(b, 5, &q, &e), -EINVAL);
    ck_assert_int_eq(nbd_parse_info_request(b, 0, &q, &e), -EINVAL);
}
END_TEST

START_TEST(test_nbd_option_replies)
{
    uint8_t b[160];
    size_t n = nbd_encode_rep_header(b, NBD_OPT_STRUCTURED_REPLY, NBD_REP_ERR_UNSUP, 0);
    ck_assert_uint_eq(n, 20);
    ck_assert(memcmp(b, "\x00\x03\xe8\x89\x04\x55\x65\xa9", 8) == 0);
    ck_assert(memcmp(b + 8, "\x00\x00\x00\x08\x80\x00\x00\x01\x00\x00\x00\x00", 12) == 0);
    n = nbd_encode_rep_server(b, NBD_OPT_LIST, "blue", 4);
    ck_assert_uint_eq(n, 28);
    ck_assert(memcmp(b + 12, "\x00\x00\x00\x02\x00\x00\x00\x08\x00\x00\x00\x04" "blue", 16) == 0);
    n = nbd_encode_info_export(b, NBD_OPT_GO, 1ull << 30, 0x12d);
    ck_assert_uint_eq(n, 32);
    ck_assert(memcmp(b + 20, "\x00\x00\x00\x00\x00\x00\x40\x00\x00\x00\x01\x2d", 12) == 0);
    n = nbd_encode_info_block_size(b, NBD_OPT_GO, 1, 4096, NBD_MAX_PAYLOAD);
    ck_assert_uint_eq(n, 34);
    ck_assert(memcmp(b + 20, "\x00\x03\x00\x00\x00\x01\x00\x00\x10\x00\x02\x00\x00\x00", 14) == 0);
    memset(b, 0xee, sizeof b);
    ck_assert_uint_eq(nbd_encode_export_reply(b, 512, 1, 1), 10);
    ck_assert_uint_eq(b[10], 0xee);
    ck_assert_uint_eq(nbd_encode_export_reply(b, 512, 1, 0), 134);
    ck_assert_uint_eq(b[133], 0);
    ck_assert_uint_eq(b[6], 2); /* 512 = 0x200 */
}
END_TEST

START_TEST(test_nbd_request_parse)
{
    uint8_t b[NBD_REQUEST_LEN];
    nbd_request_t q;
    nbd_error_t e;
    mkreq(b, NBD_MAGIC_REQUEST, NBD_CMD_FLAG_FUA, NBD_CMD_WRITE, 0x1122334455667788ull,
          4096, 512);
    ck_assert_int_eq(nbd_parse_request(b, sizeof b, &q, &e), 0);
    ck_assert_uint_eq(q.flags, NBD_CMD_FLAG_FUA);
    ck_assert_uint_eq(q.type, NBD_CMD_WRITE);
    ck_assert(q.handle == 0x1122334455667788ull);
    ck_assert_uint_eq(q.offset, 4096);
    ck_assert_uint_eq(q.length, 512);
    ck_assert_int_eq(nbd_parse_request(b, 27, &q, &e), -EAGAIN);
    mkreq(b, NBD_MAGIC_SIMPLE, 0, 0, 0, 0, 0); /* a reply sent back at us */
    ck_assert_int_eq(nbd_parse_request(b, sizeof b, &q, &e), -EPROTO);
    ck_assert_ptr_nonnull(strstr(e.text, "magic"));
}
END_TEST

START_TEST(test_nbd_request_bounds)
{
    const uint64_t size = 1 << 20;
    nbd_request_t q = {0, NBD_CMD_READ, 1, 0, 4096};
    ck_assert_uint_eq(nbd_check_request(&q, size, 0), 0);
    q.offset = size - 4096; /* exactly at the end */
    ck_assert_uint_eq(nbd_check_request(&q, size, 0), 0);
    q.offset = size - 4095;
    ck_assert_uint_eq(nbd_check_request(&q, size, 0), NBD_EINVAL);
    q.type = NBD_CMD_WRITE; /* write beyond: ENOSPC (proto.md, Error values) */
    ck_assert_uint_eq(nbd_check_request(&q, size, 0), NBD_ENOSPC);
    q.type = NBD_CMD_TRIM;
    ck_assert_uint_eq(nbd_check_request(&q, size, 0), NBD_EINVAL);
    /* offset + length wraps around 2^64 */
    q.type = NBD_CMD_READ;
    q.offset = UINT64_MAX - 10;
    q.length = 4096;
    ck_assert_uint_eq(nbd_check_request(&q, size, 0), NBD_EINVAL);
    q.type = NBD_CMD_WRITE;
    ck_assert_uint_eq(nbd_check_request(&q, size, 0), NBD_ENOSPC);
    /* zero length at the very end is fine, one past is not */
    q.type = NBD_CMD_READ;
    q.offset = size;
    q.length = 0;
    ck_assert_uint_eq(nbd_check_request(&q, size, 0), 0);
    q.offset = size + 1;
    ck_assert_uint_eq(nbd_check_request(&q, size, 0), NBD_EINVAL);
    /* too long for one payload */
    q.offset = 0;
    q.length = NBD_MAX_PAYLOAD + 1;
    ck_assert_uint_eq(nbd_check_request(&q, UINT64_MAX, 0), NBD_EOVERFLOW);
    q.type = NBD_CMD_WRITE;
    ck_assert_uint_eq(nbd_check_request(&q, UINT64_MAX, 0), NBD_EOVERFLOW);
}
END_TEST

START_TEST(test_nbd_request_flags_and_types)
{
    const uint64_t size = 1 << 20;
    nbd_request_t q = {NBD_CMD_FLAG_FUA, NBD_CMD_WRITE, 1, 0, 512};
    ck_assert_uint_eq(nbd_check_request(&q, size, 0), 0);
    q.flags = 1u << 3; /* REQ_ONE: not for WRITE */
    ck_assert_uint_eq(nbd_check_request(&q, size, 0), NBD_EINVAL);
    q.flags = 0;
    q.type = 9; /* unknown command */
    ck_assert_uint_eq(nbd_check_request(&q, size, 0), NBD_EINVAL);
    q.type = 0xffff;
    ck_assert_uint_eq(nbd_check_request(&q, size, 0), NBD_EINVAL);
    q.type = NBD_CMD_FLUSH; /* offset and length must be zero */
    ck_assert_uint_eq(nbd_check_request(&q, size, 0), NBD_EINVAL);
    q.offset = q.length = 0;
    ck_assert_uint_eq(nbd_check_request(&q, size, 0), 0);
    q.flags = NBD_CMD_FLAG_FUA;
    ck_assert_uint_eq(nbd_check_request(&q, size, 0), NBD_EINVAL);
    /* DF ("don't fragment") is a READ flag, and only once structured
     * replies are negotiated (proto.md, "Command flags") */
    nbd_request_t r = {NBD_CMD_FLAG_DF, NBD_CMD_READ, 2, 0, 4096};
    ck_assert_uint_eq(nbd_check_request(&r, size, 0), NBD_EINVAL);
    ck_assert_uint_eq(nbd_check_request(&r, size, 1), 0);
    r.flags = NBD_CMD_FLAG_DF | NBD_CMD_FLAG_FUA;
    ck_assert_uint_eq(nbd_check_request(&r, size, 1), 0);
    r.type = NBD_CMD_WRITE;
    ck_assert_uint_eq(nbd_check_request(&r, size, 1), NBD_EINVAL);
    r.type = NBD_CMD_READ;
    r.flags = NBD_CMD_FLAG_DF;
    r.offset = size; /* still checked against the end */
    ck_assert_uint_eq(nbd_check_request(&r, size, 1), NBD_EINVAL);
}
END_TEST

/* Structured reply chunks (proto.md, "Structured reply chunk message",
 * "Structured reply types"): exact bytes, and the client-side parsers. */
START_TEST(test_nbd_structured_chunks)
{
    uint8_t b[NBD_ERROR_CHUNK_MAX + 8];
    uint16_t fl, ty, ml;
    uint64_t h;
    uint32_t len, e;
    const char *msg;
    nbd_error_t err;
    /* OFFSET_DATA: header length covers the offset and the data */
    ck_assert_uint_eq(nbd_encode_offset_data(b, NBD_REPLY_FLAG_DONE, 0x0102030405060708ull,
                                             1ull << 33, 4096),
                      NBD_OFFSET_DATA_HDR_LEN);
    static const uint8_t want[28] = {0x66, 0x8e, 0x33, 0xef, 0, 1, 0, 1, 1, 2, 3, 4, 5, 6, 7, 8,
                                     0, 0, 0x10, 0x08, 0, 0, 0, 2, 0, 0, 0, 0};
    ck_assert(memcmp(b, want, sizeof want) == 0);
    ck_assert_int_eq(nbd_parse_chunk_header(b, 20, &fl, &ty, &h, &len, &err), 0);
    ck_assert(fl == NBD_REPLY_FLAG_DONE && ty == NBD_REPLY_TYPE_OFFSET_DATA &&
              h == 0x0102030405060708ull && len == 4104);
    ck_assert_int_eq(nbd_parse_chunk_header(b, 19, &fl, &ty, &h, &len, &err), -EAGAIN);
    /* NONE + DONE */
    ck_assert_uint_eq(nbd_encode_chunk_header(b, NBD_REPLY_FLAG_DONE, NBD_REPLY_TYPE_NONE, 5, 0),
                      20);
    ck_assert_int_eq(nbd_parse_chunk_header(b, 20, &fl, &ty, &h, &len, &err), 0);
    ck_assert(fl == 1 && ty == 0 && h == 5 && len == 0);
    /* a simple reply is not a chunk */
    nbd_encode_simple_reply(b, 0, 5);
    memset(b + 16, 0, 4);
    ck_assert_int_eq(nbd_parse_chunk_header(b, 20, &fl, &ty, &h, &len, &err), -EPROTO);
    ck_assert_ptr_nonnull(strstr(err.text, "magic"));
    /* ERROR: error, message length, message; DONE set */
    size_t n = nbd_encode_error_chunk(b, 9, NBD_EINVAL, "READ beyond the end");
    ck_assert_uint_eq(n, 20 + 6 + 19);
    ck_assert_int_eq(nbd_parse_chunk_header(b, n, &fl, &ty, &h, &len, &err), 0);
    ck_assert(fl == NBD_REPLY_FLAG_DONE && ty == NBD_REPLY_TYPE_ERROR && h == 9 && len == 25);
    ck_assert(ty & (1u << 15)); /* every error type has bit 15 set */
    ck_assert_int_eq(nbd_parse_error_payload(b + 20, len, &e, &msg, &ml, &err), 0);
    ck_assert(e == NBD_EINVAL && ml == 19 && memcmp(msg, "READ beyond the end", 19) == 0);
    /* no message; an over-long message is cut */
    n = nbd_encode_error_chunk(b, 9, NBD_EIO, NULL);
    ck_assert_uint_eq(n, 26);
    ck_assert_int_eq(nbd_parse_error_payload(b + 20, 6, &e, &msg, &ml, &err), 0);
    ck_assert(e == NBD_EIO && ml == 0);
    char longmsg[600];
    memset(longmsg, 'x', sizeof longmsg - 1);
    longmsg[sizeof longmsg - 1] = 0;
    n = nbd_encode_error_chunk(b, 9, NBD_EIO, longmsg);
    ck_assert_uint_eq(n, NBD_ERROR_CHUNK_MAX);
    /* bad error payloads */
    ck_assert_int_eq(nbd_parse_error_payload(b + 20, 5, &e, &msg, &ml, &err), -EPROTO);
    uint8_t z[6] = {0, 0, 0, 0, 0, 0}; /* error value 0 */
    ck_assert_int_eq(nbd_parse_error_payload(z, 6, &e, &msg, &ml, &err), -EPROTO);
    uint8_t o[8] = {0, 0, 0, 5, 0, 3, 'a', 'b'}; /* message overruns */
    ck_assert_int_eq(nbd_parse_error_payload(o, 8, &e, &msg, &ml, &err), -EPROTO);
    o[5] = 2; /* now it fits exactly */
    ck_assert_int_eq(nbd_parse_error_payload(o, 8, &e, &msg, &ml, &err), 0);
    ck_assert(ml == 2 && msg[0] == 'a');
}
END_TEST

START_TEST(test_nbd_errno_mapping)
{
    ck_assert_uint_eq(nbd_errno_to_wire(0), 0);
    ck_assert_uint_eq(nbd_errno_to_wire(ENOSPC), NBD_ENOSPC);
    ck_assert_uint_eq(nbd_errno_to_wire(EDQUOT), NBD_ENOSPC);
    ck_assert_uint_eq(nbd_errno_to_wire(EFBIG), NBD_ENOSPC);
    ck_assert_uint_eq(nbd_errno_to_wire(EROFS), NBD_EPERM);
    ck_assert_uint_eq(nbd_errno_to_wire(ESHUTDOWN), NBD_ESHUTDOWN);
    ck_assert_uint_eq(nbd_errno_to_wire(EBADF), NBD_EIO);
    ck_assert_str_eq(nbd_opt_name(NBD_OPT_GO), "GO");
    ck_assert_str_eq(nbd_opt_name(12345), "unknown");
    ck_assert_str_eq(nbd_cmd_name(NBD_CMD_TRIM), "TRIM");
    ck_assert_str_eq(nbd_cmd_name(77), "unknown");
}
END_TEST

START_TEST(test_nbd_client_round_trip)
{
    uint8_t b[64];
    nbd_request_t q;
    nbd_option_t o;
    uint32_t e, opt, type, len;
    uint64_t h;
    ck_assert_uint_eq(nbd_encode_request(b, 1, NBD_CMD_WRITE, 42, 1ull << 40, 777), 28);
    ck_assert_int_eq(nbd_parse_request(b, 28, &q, NULL), 0);
    ck_assert(q.flags == 1 && q.type == NBD_CMD_WRITE && q.handle == 42 &&
              q.offset == 1ull << 40 && q.length == 777);
    ck_assert_uint_eq(nbd_encode_option(b, NBD_OPT_LIST, 0), 16);
    ck_assert_int_eq(nbd_parse_option(b, 16, &o, NULL), 0);
    ck_assert(o.option == NBD_OPT_LIST && o.length == 0);
    nbd_encode_rep_header(b, NBD_OPT_GO, NBD_REP_ERR_UNKNOWN, 5);
    ck_assert_int_eq(nbd_parse_rep_header(b, 20, &opt, &type, &len, NULL), 0);
    ck_assert(opt == NBD_OPT_GO && type == NBD_REP_ERR_UNKNOWN && len == 5);
    ck_assert_int_eq(nbd_parse_rep_header(b, 19, &opt, &type, &len, NULL), -EAGAIN);
    b[0] ^= 1;
    ck_assert_int_eq(nbd_parse_rep_header(b, 20, &opt, &type, &len, NULL), -EPROTO);
    nbd_encode_simple_reply(b, NBD_ENOSPC, 99);
    ck_assert_int_eq(nbd_parse_simple_reply(b, 16, &e, &h, NULL), 0);
    ck_assert(e == NBD_ENOSPC && h == 99);
    ck_assert_int_eq(nbd_parse_simple_reply(b, 15, &e, &h, NULL), -EAGAIN);
    b[0] = 0x66; /* structured reply magic 0x668e33ef */
    b[1] = 0x8e;
    b[2] = 0x33;
    b[3] = 0xef;
    ck_assert_int_eq(nbd_parse_simple_reply(b, 16, &e, &h, NULL), -EPROTO);
}
END_TEST

/* Builds LIST/SET_META_CONTEXT data: export name, count, queries. */
static size_t mkmeta(uint8_t *b, const char *name, int nq, const char *const *qs)
{
    size_t nl = strlen(name), n = 0;
    be_put32(b, (uint32_t)nl);
    memcpy(b + 4, name, nl);
    n = 4 + nl;
    be_put32(b + n, (uint32_t)nq);
    n += 4;
    for (int i = 0; i < nq; i++) {
        size_t ql = strlen(qs[i]);
        be_put32(b + n, (uint32_t)ql);
        memcpy(b + n + 4, qs[i], ql);
        n += 4 + ql;
    }
    return n;
}

/* Builds mkmeta(b, name, nq, qs), checks that it parses into m and that m
 * names the export `name`; returns the request's length. */
static size_t parse_meta_ok(uint8_t *b, const char *name, int nq, const char *const *qs,
                            nbd_meta_req_t *m)
{
    size_t len = mkmeta(b, name, nq, qs);
    ck_assert_int_eq(nbd_parse_meta_request(b, len, m, NULL), 0);
    ck_assert_uint_eq(m->namelen, strlen(name));
    ck_assert(memcmp(m->name, name, m->namelen) == 0);
    return len;
}

START_TEST(test_nbd_meta_request_good)
{
    uint8_t b[256];
    const char *qs[3] = {"x-foo:bar", "base:allocation", ""};
    nbd_meta_req_t m;
    parse_meta_ok(b, "red", 3, qs, &m);
    ck_assert_uint_eq(m.nqueries, 3);
    size_t cur = 0;
    const char *q;
    uint32_t ql;
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(nbd_meta_next_query(&m, &cur, &q, &ql), 1);
        ck_assert_uint_eq(ql, strlen(qs[i]));
        ck_assert(memcmp(q, qs[i], ql) == 0);
    }
    ck_assert_int_eq(nbd_meta_next_query(&m, &cur, &q, &ql), 0);
    /* default export, no queries */
    ck_assert_uint_eq(parse_meta_ok(b, "", 0, NULL, &m), 8);
    ck_assert_uint_eq(m.nqueries, 0);
    cur = 0;
    ck_assert_int_eq(nbd_meta_next_query(&m, &cur, &q, &ql), 0);
}
END_TEST

START_TEST(test_nbd_meta_request_garbage)
{
    uint8_t b[256];
    const char *qs[2] = {"base:allocation", "qemu:dirty-bitmap:x"};
    nbd_meta_req_t m;
    nbd_error_t e;
    size_t n = mkmeta(b, "red", 2, qs);
    /* every truncation and one extra byte */
    for (size_t l = 0; l < n; l++) {
        e.text[0] = 0;
        ck_assert_msg(nbd_parse_meta_request(b, l, &m, &e) == -EINVAL, "len %zu accepted", l);
        ck_assert(e.text[0] != 0);
    }
    ck_assert_int_eq(nbd_parse_meta_request(b, n + 1, &m, &e), -EINVAL);
    ck_assert_ptr_nonnull(strstr(e.text, "after"));
    /* name length overruns / beyond the maximum */
    be_put32(b, 1000);
    ck_assert_int_eq(nbd_parse_meta_request(b, n, &m, &e), -EINVAL);
    ck_assert_uint_eq(e.offset, 0);
    be_put32(b, 0xffffffffu);
    ck_assert_int_eq(nbd_parse_meta_request(b, n, &m, &e), -EINVAL);
    /* more queries announced than sent, and a huge count */
    n = mkmeta(b, "red", 2, qs);
    be_put32(b + 7, 3);
    ck_assert_int_eq(nbd_parse_meta_request(b, n, &m, &e), -EINVAL);
    ck_assert_ptr_nonnull(strstr(e.text, "query 3"));
    be_put32(b + 7, 0xffffffffu);
    ck_assert_int_eq(nbd_parse_meta_request(b, n, &m, &e), -EINVAL);
    /* fewer queries announced than sent: bytes left over */
    be_put32(b + 7, 1);
    ck_assert_int_eq(nbd_parse_meta_request(b, n, &m, &e), -EINVAL);
    /* a query length that overruns, or is beyond the maximum */
    n = mkmeta(b, "red", 2, qs);
    be_put32(b + 11, 200);
    ck_assert_int_eq(nbd_parse_meta_request(b, n, &m, &e), -EINVAL);
    ck_assert_uint_eq(e.offset, 11);
    be_put32(b + 11, 0x80000000u);
    ck_assert_int_eq(nbd_parse_meta_request(b, n, &m, &e), -EINVAL);
    /* NUL in the name or in a query */
    n = mkmeta(b, "red", 2, qs);
    b[5] = 0;
    ck_assert_int_eq(nbd_parse_meta_request(b, n, &m, &e), -EINVAL);
    n = mkmeta(b, "red", 2, qs);
    b[15 + 4] = 0;
    ck_assert_int_eq(nbd_parse_meta_request(b, n, &m, &e), -EINVAL);
    ck_assert_ptr_nonnull(strstr(e.text, "NUL"));
}
END_TEST

/* base:allocation by name; "base:" only as a LIST wildcard; anything else
 * is ignored (proto.md, "The base: metadata namespace"). */
START_TEST(test_nbd_meta_query_matching)
{
    static const struct {
        const char *q;
        int list, set;
    } t[] = {
        {"base:allocation", 1, 1}, {"base:", 1, 0},        {"base:alloc", 0, 0},
        {"base:allocationX", 0, 0}, {"base", 0, 0},        {"BASE:allocation", 0, 0},
        {"qemu:dirty-bitmap:a", 0, 0}, {"x-foo:", 0, 0},   {"", 0, 0},
        {"nbd-server:allocation", 0, 0},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        uint32_t l = (uint32_t)strlen(t[i].q);
        ck_assert_msg(nbd_meta_query_matches(t[i].q, l, 1) == t[i].list, "LIST %s", t[i].q);
        ck_assert_msg(nbd_meta_query_matches(t[i].q, l, 0) == t[i].set, "SET %s", t[i].q);
    }
}
END_TEST

START_TEST(test_nbd_meta_context_reply)
{
    uint8_t b[64];
    size_t n = nbd_encode_rep_meta_context(b, NBD_OPT_SET_META_CONTEXT, 7,
                                           NBD_META_BASE_ALLOCATION);
    ck_assert_uint_eq(n, NBD_REP_HDR_LEN + 4 + 15);
    uint32_t o, t, l, id, nl;
    const char *name;
    ck_assert_int_eq(nbd_parse_rep_header(b, n, &o, &t, &l, NULL), 0);
    ck_assert(o == NBD_OPT_SET_META_CONTEXT && t == NBD_REP_META_CONTEXT && l == 19);
    ck_assert_int_eq(nbd_parse_rep_meta_context(b + NBD_REP_HDR_LEN, l, &id, &name, &nl, NULL),
                     0);
    ck_assert_uint_eq(id, 7);
    ck_assert_uint_eq(nl, 15);
    ck_assert(memcmp(name, "base:allocation", 15) == 0);
    nbd_error_t e;
    ck_assert_int_eq(nbd_parse_rep_meta_context(b + NBD_REP_HDR_LEN, 3, &id, &name, &nl, &e),
                     -EPROTO);
}
END_TEST

START_TEST(test_nbd_block_status_chunk)
{
    uint8_t b[NBD_BLOCK_STATUS_HDR_LEN + 3 * NBD_EXTENT_LEN];
    nbd_extent_t x[3] = {{4096, 0}, {61440, NBD_STATE_HOLE | NBD_STATE_ZERO}, {1, 0}};
    size_t n = nbd_encode_block_status(b, NBD_REPLY_FLAG_DONE, 99, 5, x, 3);
    ck_assert_uint_eq(n, sizeof b);
    uint16_t fl, ty;
    uint64_t h;
    uint32_t l, id, cnt;
    ck_assert_int_eq(nbd_parse_chunk_header(b, n, &fl, &ty, &h, &l, NULL), 0);
    ck_assert(fl == NBD_REPLY_FLAG_DONE && ty == NBD_REPLY_TYPE_BLOCK_STATUS && h == 99);
    ck_assert_uint_eq(l, 4 + 3 * 8);
    nbd_extent_t y[2];
    ck_assert_int_eq(nbd_parse_block_status(b + NBD_CHUNK_HDR_LEN, l, &id, y, 2, &cnt, NULL), 0);
    ck_assert_uint_eq(id, 5);
    ck_assert_uint_eq(cnt, 3); /* all counted, the first 2 copied */
    ck_assert(y[0].length == 4096 && y[0].flags == 0);
    ck_assert(y[1].length == 61440 && y[1].flags == 3);
    /* garbage: no descriptor, a partial one, a zero-length one */
    nbd_error_t e;
    const uint8_t *p = b + NBD_CHUNK_HDR_LEN;
    ck_assert_int_eq(nbd_parse_block_status(p, 4, &id, y, 2, &cnt, &e), -EPROTO);
    ck_assert_int_eq(nbd_parse_block_status(p, 0, &id, y, 2, &cnt, &e), -EPROTO);
    ck_assert_int_eq(nbd_parse_block_status(p, 13, &id, y, 2, &cnt, &e), -EPROTO);
    ck_assert_int_eq(nbd_parse_block_status(p, l - 1, &id, y, 2, &cnt, &e), -EPROTO);
    x[1].length = 0;
    nbd_encode_block_status(b, NBD_REPLY_FLAG_DONE, 99, 5, x, 3);
    ck_assert_int_eq(nbd_parse_block_status(p, l, &id, NULL, 0, &cnt, &e), -EPROTO);
    ck_assert_uint_eq(e.offset, 12);
}
END_TEST

/* BLOCK_STATUS: structured replies only, flags FUA and REQ_ONE, nonzero
 * length, inside the export. */
START_TEST(test_nbd_block_status_request)
{
    nbd_request_t q = {.type = NBD_CMD_BLOCK_STATUS, .offset = 0, .length = 4096};
    ck_assert_uint_eq(nbd_check_request(&q, 1 << 20, 1), 0);
    ck_assert_uint_eq(nbd_check_request(&q, 1 << 20, 0), NBD_EINVAL);
    q.flags = NBD_CMD_FLAG_REQ_ONE | NBD_CMD_FLAG_FUA;
    ck_assert_uint_eq(nbd_check_request(&q, 1 << 20, 1), 0);
    q.flags = NBD_CMD_FLAG_DF;
    ck_assert_uint_eq(nbd_check_request(&q, 1 << 20, 1), NBD_EINVAL);
    q.flags = 0;
    q.length = 0;
    ck_assert_uint_eq(nbd_check_request(&q, 1 << 20, 1), NBD_EINVAL);
    q.offset = (1 << 20) - 512;
    q.length = 512;
    ck_assert_uint_eq(nbd_check_request(&q, 1 << 20, 1), 0);
    q.length = 513;
    ck_assert_uint_eq(nbd_check_request(&q, 1 << 20, 1), NBD_EINVAL);
    q.offset = UINT64_MAX - 10; /* wraps */
    q.length = 100;
    ck_assert_uint_eq(nbd_check_request(&q, 1 << 20, 1), NBD_EINVAL);
    ck_assert_str_eq(nbd_cmd_name(NBD_CMD_BLOCK_STATUS), "BLOCK_STATUS");
    ck_assert_str_eq(nbd_opt_name(NBD_OPT_SET_META_CONTEXT), "SET_META_CONTEXT");
}
END_TEST

/* Random bytes into every parser: no crash, no read past the length (ASan
 * build), and every success is a consistent message. */
START_TEST(test_nbd_fuzz_garbage)
{
    uint8_t *b = malloc(256);
    ck_assert_ptr_nonnull(b);
    unsigned seed = 12345;
    for (int i = 0; i < 50000; i++) {
        size_t len = (size_t)(rand_r(&seed) % 64);
        for (size_t j = 0; j < len; j++)
            b[j] = (uint8_t)rand_r(&seed);
        if (i % 3 == 0 && len >= 8)
            be_put64(b, NBD_MAGIC_OPT);
        if (i % 3 == 1 && len >= 4)
            be_put32(b, NBD_MAGIC_REQUEST);
        nbd_error_t e;
        uint32_t f;
        nbd_option_t o;
        nbd_info_req_t ir;
        nbd_request_t q;
        int rc = nbd_parse_client_flags(b, len, &f, &e);
        ck_assert(rc == 0 || rc == -EAGAIN || rc == -EPROTO);
        if (rc == 0)
            ck_assert_uint_eq(f & ~3u, 0);
        rc = nbd_parse_option(b, len, &o, &e);
        ck_assert(rc == 0 || rc == -EAGAIN || rc == -EPROTO);
        rc = nbd_parse_info_request(b, len, &ir, &e);
        ck_assert(rc == 0 || rc == -EINVAL);
        if (rc == 0) {
            ck_assert_uint_eq(6 + ir.namelen + 2u * ir.nreqs, len);
            ck_assert_ptr_null(memchr(ir.name, 0, ir.namelen));
        }
        uint16_t cf, ct, ml;
        uint32_t cl, ev;
        uint64_t ch;
        const char *msg;
        rc = nbd_parse_chunk_header(b, len, &cf, &ct, &ch, &cl, &e);
        ck_assert(rc == 0 || rc == -EAGAIN || rc == -EPROTO);
        rc = nbd_parse_error_payload(b, len, &ev, &msg, &ml, &e);
        ck_assert(rc == 0 || rc == -EPROTO);
        if (rc == 0)
            ck_assert(ev != 0 && (size_t)ml + 6 <= len);
        nbd_meta_req_t mr;
        rc = nbd_parse_meta_request(b, len, &mr, &e);
        ck_assert(rc == 0 || rc == -EINVAL);
        if (rc == 0) {
            size_t cur = 0, total = 8 + mr.namelen;
            const char *mq;
            uint32_t mql, k = 0;
            while (nbd_meta_next_query(&mr, &cur, &mq, &mql)) {
                total += 4 + mql;
                k++;
            }
            ck_assert_uint_eq(k, mr.nqueries);
            ck_assert_uint_eq(total, len);
        }
        uint32_t bid, bn;
        nbd_extent_t bx[4];
        rc = nbd_parse_block_status(b, len, &bid, bx, 4, &bn, &e);
        ck_assert(rc == 0 || rc == -EPROTO);
        if (rc == 0)
            ck_assert(4 + 8 * (size_t)bn == len && bx[0].length != 0);
        rc = nbd_parse_request(b, len, &q, &e);
        ck_assert(rc == 0 || rc == -EAGAIN || rc == -EPROTO);
        if (rc == 0) {
            uint32_t err = nbd_check_request(&q, 1 << 20, i & 1);
            if (err == 0 && q.type == NBD_CMD_BLOCK_STATUS)
                ck_assert(q.length > 0 && (i & 1));
            if (err == 0 && q.type != NBD_CMD_FLUSH && q.type != NBD_CMD_DISC)
                ck_assert(q.offset + q.length <= (1u << 20));
            if (err == 0 && !(i & 1))
                ck_assert_uint_eq(q.flags & NBD_CMD_FLAG_DF, 0);
        }
    }
    free(b);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {test_nbd_greeting_bytes, test_nbd_client_flags,
                                  test_nbd_option_header, test_nbd_info_request_good,
                                  test_nbd_info_request_garbage, test_nbd_option_replies,
                                  test_nbd_request_parse, test_nbd_request_bounds,
                                  test_nbd_request_flags_and_types, test_nbd_errno_mapping,
                                  test_nbd_client_round_trip, test_nbd_structured_chunks,
                                  test_nbd_meta_request_good, test_nbd_meta_request_garbage,
                                  test_nbd_meta_query_matching, test_nbd_meta_context_reply,
                                  test_nbd_block_status_chunk, test_nbd_block_status_request,
                                  test_nbd_fuzz_garbage};
    const testlib_case_t c = {.name = "nbd"};
    return testlib_run_case(&c, tests, sizeof tests / sizeof tests[0]);
}
