/* test_proto.c - Check suite for common/proto: round trips of every message
 * type, every rejection reason, a mutation fuzzer, and the zmq helpers. */
#include <check.h>
#include <dirent.h>
#include <stddef.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "common/bench/proto_sample.h"
#include "common/proto.h"
#include "tests/testlib.h"

/* Encodes m with a fresh encoder; returns proto_encode()'s result. */
static int encode_rc(const proto_msg_t *m)
{
    proto_enc_t e;
    proto_enc_init(&e);
    int rc = proto_encode(m, &e);
    proto_enc_clear(&e);
    return rc;
}

/* Encodes m and decodes the frames into out; returns decode's result. */
static int roundtrip(const proto_msg_t *m, proto_msg_t *out, proto_stats_t *st)
{
    proto_enc_t e;
    proto_enc_init(&e);
    ck_assert_int_eq(proto_encode(m, &e), 0);
    proto_frame_t f[PROTO_MAX_FRAMES];
    for (size_t i = 0; i < e.nframes; i++) {
        f[i].data = e.data[i];
        f[i].len = e.len[i];
    }
    int rc = proto_decode(out, f, e.nframes, st, NULL);
    proto_enc_clear(&e);
    return rc;
}

static void set_timing(proto_msg_t *m)
{
    m->period = 42;
    m->interval = 3;
    m->intervals = 5;
    m->period_ms = 1000;
    m->remaining_ms = 350;
}

static const char *names3[] = {"red", "green", "blue"};

static void msg_start(proto_msg_t *m, proto_msg_t *d, proto_type_t type, const char *node);

/* msg_start(), then the test timing, marked present (welcome and tokens
 * always carry it; heartbeat and hello only so marked). */
static void timed_start(proto_msg_t *m, proto_msg_t *d, proto_type_t type, const char *node)
{
    msg_start(m, d, type, node);
    set_timing(m);
    m->has_timing = 1;
}

/* Starts m as an empty message of type from node, and d as an empty one to
 * decode into; the test clears both. */
static void msg_start(proto_msg_t *m, proto_msg_t *d, proto_type_t type, const char *node)
{
    proto_msg_init(m);
    proto_msg_init(d);
    m->type = type;
    strcpy(m->node, node);
}

/* msg_start() for a hello of node holding table 1, its name list empty. */
static void hello_start(proto_msg_t *m, proto_msg_t *d, const char *node)
{
    msg_start(m, d, PROTO_HELLO, node);
    m->table = 1;
    m->has_names = 1;
}

/* Gives m the three names of names3. */
static void set_names3(proto_msg_t *m)
{
    m->has_names = 1;
    m->nnames = 3;
    m->names = names3;
}

/* Makes m a tokens message with set_timing()'s timing, table generation
 * table and room for count records (to fill in). */
static void set_tokens(proto_msg_t *m, uint32_t table, size_t count)
{
    m->type = PROTO_TOKENS;
    set_timing(m);
    m->table = table;
    m->count = count;
    ck_assert_int_eq(proto_msg_reserve(m, count, 0), 0);
}

/* Checks every counter of st against want: accepted, rejected for each
 * reason (unnamed reasons in want: none), rejected in all. */
static void expect_stats(const proto_stats_t *st, const proto_stats_t *want)
{
    ck_assert_uint_eq(st->ok, want->ok);
    for (int r = 0; r < PROTO_E__COUNT; r++)
        ck_assert_msg(st->rejected[r] == want->rejected[r], "%s: %llu rejected, want %llu",
                      proto_reason_str((proto_reason_t)r), (unsigned long long)st->rejected[r],
                      (unsigned long long)want->rejected[r]);
    ck_assert_uint_eq(st->rejected_total, want->rejected_total);
}

/* Checks that d carries set_timing()'s timing. */
static void expect_timing(const proto_msg_t *d)
{
    ck_assert(d->has_timing);
    ck_assert_uint_eq(d->period, 42);
    ck_assert_uint_eq(d->interval, 3);
    ck_assert_uint_eq(d->intervals, 5);
    ck_assert_uint_eq(d->period_ms, 1000);
    ck_assert_uint_eq(d->remaining_ms, 350);
}

START_TEST(test_proto_roundtrip_hello)
{
    proto_msg_t m, d;
    msg_start(&m, &d, PROTO_HELLO, "n1");
    proto_stats_t st = {0};
    m.seq = 9;
    m.capacity = 50000;
    m.table = 7;
    set_names3(&m);
    ck_assert_int_eq(roundtrip(&m, &d, &st), 0);
    ck_assert_int_eq(d.type, PROTO_HELLO);
    ck_assert_str_eq(d.node, "n1");
    ck_assert_uint_eq(d.seq, 9);
    ck_assert_uint_eq(d.capacity, 50000);
    ck_assert_uint_eq(d.table, 7);
    ck_assert(d.has_names);
    ck_assert_uint_eq(d.nnames, 3);
    ck_assert_str_eq(d.names[0], "red");
    ck_assert_str_eq(d.names[2], "blue");
    ck_assert_uint_eq(st.ok, 1);
    /* hello with an empty table */
    m.has_names = 0;
    m.nnames = 0;
    m.names = NULL;
    ck_assert_int_eq(roundtrip(&m, &d, &st), 0);
    ck_assert(d.has_names);
    ck_assert_uint_eq(d.nnames, 0);
    proto_msg_clear(&d);
}
END_TEST

START_TEST(test_proto_roundtrip_welcome)
{
    proto_msg_t m, d;
    timed_start(&m, &d, PROTO_WELCOME, "n1");
    m.table = 3;
    m.peer_table = 7;
    set_names3(&m);
    static const uint32_t w[] = {2, 1, 9};
    m.has_weights = 1;
    m.weights = w;
    ck_assert_int_eq(roundtrip(&m, &d, NULL), 0);
    ck_assert_int_eq(d.type, PROTO_WELCOME);
    ck_assert(d.has_weights);
    ck_assert_uint_eq(d.weights[0], 2);
    ck_assert_uint_eq(d.weights[2], 9);
    expect_timing(&d);
    ck_assert_uint_eq(d.table, 3);
    ck_assert_uint_eq(d.peer_table, 7);
    ck_assert_str_eq(d.names[1], "green");
    proto_msg_clear(&d);
}
END_TEST

START_TEST(test_proto_roundtrip_report)
{
    /* The bench's sample, then what it leaves zero: every field round-trips. */
    proto_msg_t m, d;
    msg_start(&m, &d, PROTO_REPORT, "");
    ck_assert_int_eq(proto_sample(&m, PROTO_REPORT, 1000, 0, NULL), 0);
    m.peer_table = 5;
    m.dispatched = 123460;
    for (size_t i = 0; i < m.count; i++) {
        m.report[i].bucket = (uint32_t)(i * 3);
        m.report[i].served_o = i + 5;
    }
    ck_assert_int_eq(roundtrip(&m, &d, NULL), 0);
    ck_assert_int_eq(d.type, PROTO_REPORT);
    ck_assert_str_eq(d.node, "node-01");
    ck_assert_uint_eq(d.period, 1000);
    ck_assert_uint_eq(d.interval, 2);
    ck_assert_uint_eq(d.remaining_ms, 600);
    ck_assert_uint_eq(d.table, 1);
    ck_assert_uint_eq(d.peer_table, 5);
    ck_assert_uint_eq(d.completions, 12345);
    ck_assert_uint_eq(d.dispatched, 123460);
    ck_assert(d.busy_seconds == 0.5);
    ck_assert(!d.has_names);
    ck_assert_uint_eq(d.count, 1000);
    ck_assert(memcmp(d.report, m.report, m.count * sizeof *m.report) == 0);
    proto_msg_clear(&m);
    proto_msg_clear(&d);
}
END_TEST

START_TEST(test_proto_roundtrip_tokens)
{
    proto_msg_t m, d;
    msg_start(&m, &d, PROTO_TOKENS, "n2");
    set_tokens(&m, 4, 3);
    m.peer_table = 1;
    set_names3(&m);
    m.tokens[0] = (proto_tokens_rec_t){.bucket = 0, .r_tokens = 100, .l_tokens = 200};
    m.tokens[1] = (proto_tokens_rec_t){.bucket = 2, .r_tokens = 0, .l_tokens = PROTO_UNLIMITED};
    m.tokens[2] = (proto_tokens_rec_t){.bucket = 1, .flags = PROTO_TOK_UNLIMITED, .r_tokens = 5};
    ck_assert_int_eq(roundtrip(&m, &d, NULL), 0);
    ck_assert(!d.has_weights); /* optional */
    static const uint32_t w[] = {1, PROTO_WEIGHT_MAX, 3};
    m.has_weights = 1;
    m.weights = w;
    ck_assert_int_eq(roundtrip(&m, &d, NULL), 0);
    ck_assert(d.has_weights);
    ck_assert_uint_eq(d.weights[1], PROTO_WEIGHT_MAX);
    ck_assert_uint_eq(d.weights[2], 3);
    ck_assert_int_eq(d.type, PROTO_TOKENS);
    ck_assert(d.has_timing);
    ck_assert_uint_eq(d.count, 3);
    ck_assert_uint_eq(d.tokens[0].bucket, 0);
    ck_assert_int_eq(d.tokens[0].r_tokens, 100);
    ck_assert_int_eq(d.tokens[0].l_tokens, 200);
    ck_assert_uint_eq(d.tokens[0].flags, 0);
    ck_assert_uint_eq(d.tokens[1].bucket, 2);
    ck_assert_int_eq(d.tokens[1].l_tokens, PROTO_UNLIMITED);
    ck_assert_uint_eq(d.tokens[1].flags, PROTO_TOK_UNLIMITED);
    ck_assert_int_eq(d.tokens[2].l_tokens, PROTO_UNLIMITED);
    ck_assert_int_eq(d.tokens[2].r_tokens, 5);
    ck_assert_str_eq(d.names[2], "blue");
    proto_msg_clear(&m);
    proto_msg_clear(&d);
}
END_TEST

START_TEST(test_proto_roundtrip_small)
{
    proto_msg_t m, d;
    msg_start(&m, &d, PROTO_HEARTBEAT, "n3");
    ck_assert_int_eq(roundtrip(&m, &d, NULL), 0);
    ck_assert_int_eq(d.type, PROTO_HEARTBEAT);
    ck_assert(!d.has_timing);
    set_timing(&m);
    m.has_timing = 1;
    m.peer_table = 9;
    ck_assert_int_eq(roundtrip(&m, &d, NULL), 0);
    ck_assert(d.has_timing);
    ck_assert_uint_eq(d.remaining_ms, 350);
    ck_assert_uint_eq(d.peer_table, 9);

    proto_msg_init(&m);
    strcpy(m.node, "n3");
    m.type = PROTO_GOODBYE;
    ck_assert_int_eq(roundtrip(&m, &d, NULL), 0);
    ck_assert_int_eq(d.type, PROTO_GOODBYE);
    ck_assert_str_eq(d.node, "n3");

    m.type = PROTO_ERROR;
    strcpy(m.code, "unknown_node");
    strcpy(m.text, "say \"hello\" first");
    ck_assert_int_eq(roundtrip(&m, &d, NULL), 0);
    ck_assert_int_eq(d.type, PROTO_ERROR);
    ck_assert_str_eq(d.code, "unknown_node");
    ck_assert_str_eq(d.text, "say \"hello\" first");

    /* escapes on the direct header writer; non-ASCII through jansson */
    strcpy(m.node, "we\"ird\\node");
    strcpy(m.text, "line1\nline2\ttab\x01");
    ck_assert_int_eq(roundtrip(&m, &d, NULL), 0);
    ck_assert_str_eq(d.node, "we\"ird\\node");
    ck_assert_str_eq(d.text, "line1\nline2\ttab\x01");
    strcpy(m.text, "caf\xc3\xa9 ok");
    ck_assert_int_eq(roundtrip(&m, &d, NULL), 0);
    ck_assert_str_eq(d.text, "caf\xc3\xa9 ok");
    strcpy(m.text, "bad \xff utf-8");
    ck_assert_int_eq(encode_rc(&m), -EINVAL);
    proto_msg_clear(&d);
}
END_TEST

START_TEST(test_proto_encode_rejects_invalid)
{
    proto_msg_t m;
    proto_enc_t e;
    proto_enc_init(&e);
    proto_msg_init(&m);
    m.type = PROTO_GOODBYE;
    ck_assert_int_eq(proto_encode(&m, &e), -EINVAL); /* empty node name */
    strcpy(m.node, "bad name");
    ck_assert_int_eq(proto_encode(&m, &e), -EINVAL);
    strcpy(m.node, "n1");
    m.type = 99;
    ck_assert_int_eq(proto_encode(&m, &e), -EINVAL);
    m.type = PROTO_TOKENS;
    m.table = 1;
    set_timing(&m);
    m.interval = 5; /* == intervals */
    ck_assert_int_eq(proto_encode(&m, &e), -EINVAL);
    m.interval = 1;
    m.count = 1;
    ck_assert_int_eq(proto_msg_reserve(&m, 1, 0), 0);
    m.tokens[0] = (proto_tokens_rec_t){.r_tokens = -1, .l_tokens = 0};
    ck_assert_int_eq(proto_encode(&m, &e), -EINVAL);
    m.tokens[0].r_tokens = 1;
    ck_assert_int_eq(proto_encode(&m, &e), 0);
    m.has_names = 1;
    static const char *dup[] = {"a", "a b"};
    m.names = dup;
    m.nnames = 2;
    ck_assert_int_eq(proto_encode(&m, &e), -EINVAL);
    static const char *okn[] = {"a", "b"};
    m.names = okn;
    m.has_weights = 1;
    static const uint32_t w0[] = {1, 0}, wbig[] = {PROTO_WEIGHT_MAX + 1, 1}, wok[] = {1, 2};
    m.weights = w0;
    ck_assert_int_eq(proto_encode(&m, &e), -EINVAL); /* weight 0 */
    m.weights = wbig;
    ck_assert_int_eq(proto_encode(&m, &e), -EINVAL);
    m.weights = wok;
    ck_assert_int_eq(proto_encode(&m, &e), 0);
    ck_assert_uint_eq(e.nframes, 4);
    m.has_names = 0; /* weights only with names */
    ck_assert_int_eq(proto_encode(&m, &e), -EINVAL);
    m.type = PROTO_HELLO; /* and only controller -> node */
    m.has_names = 1;
    m.capacity = 1;
    ck_assert_int_eq(proto_encode(&m, &e), -EINVAL);
    m.has_weights = 0;
    m.type = PROTO_ERROR; /* needs a code */
    m.has_names = 0;
    ck_assert_int_eq(proto_encode(&m, &e), -EINVAL);
    m.type = PROTO_TOKENS;
    proto_msg_clear(&m);
    proto_enc_clear(&e);
}
END_TEST

/* Protocol v3: records go compact (32-bit fields) unless a value does not
 * fit, then the whole message goes wide; never saturated, both decode to
 * the same structs. */
START_TEST(test_proto_compact_records)
{
    proto_msg_t m, d;
    msg_start(&m, &d, PROTO_REPORT, "n1");
    proto_enc_t e;
    proto_enc_init(&e);
    m.table = 1;
    m.count = 2;
    ck_assert_int_eq(proto_msg_reserve(&m, 2, 0), 0);
    memset(m.report, 0, 2 * sizeof *m.report);
    m.report[0] = (proto_report_rec_t){.bucket = 7, .queued = UINT32_MAX, .served_o = 3,
                                       .r_left = UINT32_MAX, .l_left = PROTO_COMPACT_MAX};
    m.report[1] = (proto_report_rec_t){.bucket = 1, .arrivals_period = 9, .l_left = PROTO_UNLIMITED};
    ck_assert_int_eq(proto_encode(&m, &e), 0);
    ck_assert_uint_eq(e.len[1], 2 * PROTO_REPORT_COMPACT_SIZE);
    ck_assert_ptr_null(memmem(e.data[0], e.len[0], "wide", 4));
    ck_assert_int_eq(roundtrip(&m, &d, NULL), 0);
    ck_assert(!d.wide);
    ck_assert(memcmp(d.report, m.report, 2 * sizeof *m.report) == 0);
    /* one value too big for 32 bits: the message goes wide, nothing lost */
    static const struct { size_t off; int64_t v; } big[] = {
        {offsetof(proto_report_rec_t, queued), INT64_C(1) << 32},
        {offsetof(proto_report_rec_t, arrivals_interval), INT64_C(1) << 40},
        {offsetof(proto_report_rec_t, served_r), (int64_t)PROTO_MAX_COUNT},
        {offsetof(proto_report_rec_t, r_left), INT64_C(1) << 32},
        {offsetof(proto_report_rec_t, l_left), (int64_t)PROTO_COMPACT_UNLIMITED},
    };
    for (size_t k = 0; k < sizeof big / sizeof big[0]; k++) {
        proto_report_rec_t keep = m.report[1];
        memcpy((char *)&m.report[1] + big[k].off, &big[k].v, 8);
        ck_assert_int_eq(proto_encode(&m, &e), 0);
        ck_assert_uint_eq(e.len[1], 2 * PROTO_REPORT_REC_SIZE);
        ck_assert_int_eq(roundtrip(&m, &d, NULL), 0);
        ck_assert(d.wide);
        ck_assert(memcmp(d.report, m.report, 2 * sizeof *m.report) == 0);
        m.report[1] = keep;
    }
    m.wide = 1; /* asked for */
    ck_assert_int_eq(proto_encode(&m, &e), 0);
    ck_assert_uint_eq(e.len[1], 2 * PROTO_REPORT_REC_SIZE);
    ck_assert_ptr_nonnull(memmem(e.data[0], e.len[0], "\"wide\":1", 8));

    proto_msg_clear(&m);
    strcpy(m.node, "n1");
    set_tokens(&m, 1, 3);
    m.tokens[0] = (proto_tokens_rec_t){.bucket = 0, .r_tokens = UINT32_MAX, .l_tokens = 0};
    m.tokens[1] = (proto_tokens_rec_t){.bucket = 5, .r_tokens = 1, .l_tokens = PROTO_UNLIMITED};
    m.tokens[2] = (proto_tokens_rec_t){.bucket = 2, .flags = PROTO_TOK_UNLIMITED, .r_tokens = 2,
                                       .l_tokens = PROTO_UNLIMITED};
    ck_assert_int_eq(proto_encode(&m, &e), 0);
    ck_assert_uint_eq(e.len[1], 3 * PROTO_TOKENS_COMPACT_SIZE);
    ck_assert_int_eq(roundtrip(&m, &d, NULL), 0);
    ck_assert(!d.wide);
    ck_assert_int_eq(d.tokens[0].r_tokens, UINT32_MAX);
    ck_assert_int_eq(d.tokens[0].l_tokens, 0);
    ck_assert_uint_eq(d.tokens[1].flags, PROTO_TOK_UNLIMITED);
    ck_assert_int_eq(d.tokens[1].l_tokens, PROTO_UNLIMITED);
    ck_assert(memcmp(&d.tokens[2], &m.tokens[2], sizeof m.tokens[2]) == 0);
    m.tokens[0].l_tokens = (int64_t)PROTO_COMPACT_MAX + 1;
    ck_assert_int_eq(proto_encode(&m, &e), 0);
    ck_assert_uint_eq(e.len[1], 3 * PROTO_TOKENS_REC_SIZE);
    ck_assert_int_eq(roundtrip(&m, &d, NULL), 0);
    ck_assert(d.wide);
    ck_assert_int_eq(d.tokens[0].l_tokens, (int64_t)PROTO_COMPACT_MAX + 1);
    proto_msg_clear(&m);
    proto_msg_clear(&d);
    proto_enc_clear(&e);
}
END_TEST

/* ---- bad messages ---- */

static unsigned char recbuf[4096];

/* Decodes a header string plus optional frames; returns the reason. */
static proto_reason_t dec3(const char *hdr, const void *f1, ssize_t l1, const void *f2, ssize_t l2,
                           proto_stats_t *st)
{
    proto_msg_t m;
    proto_msg_init(&m);
    proto_frame_t f[3] = {{hdr, hdr ? strlen(hdr) : 0}, {f1, (size_t)l1}, {f2, (size_t)l2}};
    size_t n = hdr ? 1 : 0;
    if (l1 >= 0)
        n = 2;
    if (l2 >= 0)
        n = 3;
    proto_reason_t why = PROTO_E__COUNT;
    int rc = proto_decode(&m, f, n, st, &why);
    ck_assert_int_eq(rc, why == PROTO_OK ? 0 : -EPROTO);
    proto_msg_clear(&m);
    return why;
}
#define DEC(h) dec3(h, NULL, -1, NULL, -1, &st)

static void put_tok(unsigned char *p, uint32_t b, uint32_t fl, int64_t r, int64_t l)
{
    memcpy(p, &b, 4); /* little-endian host assumed by the test */
    memcpy(p + 4, &fl, 4);
    memcpy(p + 8, &r, 8);
    memcpy(p + 16, &l, 8);
}

/* A tokens header with wide (24-byte) records, which put_tok() writes. */
#define TOKHDR(extra)                                                                              \
    "{\"v\":3,\"type\":\"tokens\",\"node\":\"n1\",\"period\":1,\"interval\":0,"                    \
    "\"intervals\":5,\"period_ms\":1000,\"remaining_ms\":900,\"table\":1,\"peer_table\":0,"           \
    "\"wide\":1" extra "}"

/* A hello header of node n1 holding table 1, without names. */
#define HELLOHDR(extra)                                                                            \
    "{\"v\":3,\"type\":\"hello\",\"node\":\"n1\",\"capacity\":0,\"table\":1,\"names\":0" extra "}"

/* Decodes a tokens header with recbuf's one wide record (put_tok()). */
#define DEC_TOK1(h) dec3(h, recbuf, 24, NULL, -1, &st)
/* Decodes a header with an empty records frame (REPHDR, HELLOHDR). */
#define DEC_EMPTY(h) dec3(h, "", 0, NULL, -1, &st)

/* A report header without records (count 0: the records frame is empty). */
#define REPHDR(extra)                                                                              \
    "{\"v\":3,\"type\":\"report\",\"node\":\"n1\",\"period\":1,\"interval\":0,\"table\":1,"      \
    "\"peer_table\":0,\"count\":0,\"completions\":0,\"dispatched\":0,\"busy\":0" extra "}"

START_TEST(test_proto_reject_reasons)
{
    proto_stats_t st = {0};
    /* truncated */
    ck_assert_int_eq(dec3(NULL, NULL, -1, NULL, -1, &st), PROTO_E_TRUNCATED);
    ck_assert_int_eq(DEC(""), PROTO_E_TRUNCATED);
    put_tok(recbuf, 0, 0, 1, 2);
    ck_assert_int_eq(DEC_TOK1(TOKHDR(",\"count\":2")), PROTO_E_TRUNCATED);
    ck_assert_int_eq(DEC(TOKHDR(",\"count\":1")), PROTO_E_TRUNCATED);
    ck_assert_int_eq(DEC_TOK1(TOKHDR(",\"count\":1,\"names\":1")), PROTO_E_TRUNCATED);
    ck_assert_int_eq(dec3(TOKHDR(",\"count\":1,\"names\":1"), "red", 3, recbuf, 24, &st),
                     PROTO_E_TRUNCATED);
    /* version */
    ck_assert_int_eq(DEC("{\"v\":1,\"type\":\"goodbye\",\"node\":\"n1\"}"), PROTO_E_VERSION);
    ck_assert_int_eq(DEC("{\"v\":2,\"type\":\"goodbye\",\"node\":\"n1\"}"), PROTO_E_VERSION);
    ck_assert_int_eq(DEC("{\"type\":\"goodbye\",\"node\":\"n1\"}"), PROTO_E_VERSION);
    ck_assert_int_eq(DEC("{\"v\":\"1\",\"type\":\"goodbye\",\"node\":\"n1\"}"), PROTO_E_VERSION);
    /* type */
    ck_assert_int_eq(DEC("{\"v\":3,\"type\":\"frobnicate\",\"node\":\"n1\"}"), PROTO_E_TYPE);
    ck_assert_int_eq(DEC("{\"v\":3,\"type\":3,\"node\":\"n1\"}"), PROTO_E_TYPE);
    ck_assert_int_eq(DEC("{\"v\":3,\"node\":\"n1\"}"), PROTO_E_TYPE);
    /* count */
    ck_assert_int_eq(dec3(TOKHDR(",\"count\":1"), recbuf, 48, NULL, -1, &st), PROTO_E_COUNT);
    ck_assert_int_eq(dec3(TOKHDR(",\"count\":1"), recbuf, 25, NULL, -1, &st), PROTO_E_COUNT);
    ck_assert_int_eq(DEC_TOK1(TOKHDR(",\"count\":0")), PROTO_E_COUNT);
    ck_assert_int_eq(dec3(TOKHDR(",\"count\":1,\"names\":2"), "red", 4, recbuf, 24, &st),
                     PROTO_E_COUNT);
    ck_assert_int_eq(dec3(TOKHDR(",\"count\":1,\"names\":1"), "red\0b", 6, recbuf, 24, &st),
                     PROTO_E_COUNT);
    /* range */
    ck_assert_int_eq(dec3(TOKHDR(",\"count\":-1"), recbuf, 0, NULL, -1, &st), PROTO_E_RANGE);
    ck_assert_int_eq(dec3(TOKHDR(",\"count\":99999999999"), recbuf, 0, NULL, -1, &st),
                     PROTO_E_RANGE);
    put_tok(recbuf, 0, 0, -5, 2);
    ck_assert_int_eq(DEC_TOK1(TOKHDR(",\"count\":1")), PROTO_E_RANGE);
    put_tok(recbuf, 0, 0, INT64_MAX, 2);
    ck_assert_int_eq(DEC_TOK1(TOKHDR(",\"count\":1")), PROTO_E_RANGE);
    put_tok(recbuf, 0, 0, 1, INT64_MAX); /* unlimited needs the flag */
    ck_assert_int_eq(DEC_TOK1(TOKHDR(",\"count\":1")), PROTO_E_RANGE);
    put_tok(recbuf, 0, 4, 1, 1); /* unknown flag */
    ck_assert_int_eq(DEC_TOK1(TOKHDR(",\"count\":1")), PROTO_E_RANGE);
    put_tok(recbuf, 1, 0, 1, 1); /* index beyond the names sent with it */
    ck_assert_int_eq(dec3(TOKHDR(",\"count\":1,\"names\":1"), "red", 4, recbuf, 24, &st),
                     PROTO_E_RANGE);
    ck_assert_int_eq(DEC("{\"v\":3,\"type\":\"heartbeat\",\"node\":\"n1\",\"period\":1,"
                         "\"interval\":5,\"intervals\":5,\"period_ms\":1000,\"remaining_ms\":1}"),
                     PROTO_E_RANGE);
    ck_assert_int_eq(DEC("{\"v\":3,\"type\":\"heartbeat\",\"node\":\"n1\",\"period\":1,"
                         "\"interval\":0,\"intervals\":5,\"period_ms\":1000,\"remaining_ms\":1001}"),
                     PROTO_E_RANGE);
    ck_assert_int_eq(DEC("{\"v\":3,\"type\":\"report\",\"node\":\"n1\",\"period\":1,\"interval\":0,"
                         "\"table\":1,\"peer_table\":0,\"count\":0,\"completions\":1,"
                         "\"dispatched\":1,\"busy\":-0.5}"),
                     PROTO_E_RANGE);
    ck_assert_int_eq(DEC("{\"v\":3,\"type\":\"hello\",\"node\":\"n1\",\"capacity\":-1,"
                         "\"table\":1,\"names\":0}"),
                     PROTO_E_RANGE);
    /* json */
    ck_assert_int_eq(DEC("{\"v\":3,"), PROTO_E_JSON);
    ck_assert_int_eq(DEC("[1,2]"), PROTO_E_JSON);
    ck_assert_int_eq(DEC("\x01\x02garbage"), PROTO_E_JSON);
    ck_assert_int_eq(DEC("{\"v\":3,\"v\":3,\"type\":\"goodbye\",\"node\":\"n1\"}"), PROTO_E_JSON);
    char big[PROTO_HEADER_MAX + 64];
    memset(big, ' ', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    big[0] = '{';
    big[sizeof big - 2] = '}';
    ck_assert_int_eq(DEC(big), PROTO_E_JSON);
    /* field */
    ck_assert_int_eq(DEC("{\"v\":3,\"type\":\"goodbye\"}"), PROTO_E_FIELD);
    ck_assert_int_eq(DEC("{\"v\":3,\"type\":\"goodbye\",\"node\":\"\"}"), PROTO_E_FIELD);
    ck_assert_int_eq(DEC("{\"v\":3,\"type\":\"goodbye\",\"node\":\"a b\"}"), PROTO_E_FIELD);
    ck_assert_int_eq(DEC("{\"v\":3,\"type\":\"goodbye\",\"node\":7}"), PROTO_E_FIELD);
    ck_assert_int_eq(DEC_TOK1(TOKHDR(",\"count\":\"1\"")), PROTO_E_FIELD);
    ck_assert_int_eq(DEC("{\"v\":3,\"type\":\"error\",\"node\":\"n1\"}"), PROTO_E_FIELD);
    ck_assert_int_eq(DEC("{\"v\":3,\"type\":\"hello\",\"node\":\"n1\",\"capacity\":1,\"table\":1}"),
                     PROTO_E_FIELD);
    ck_assert_int_eq(DEC("{\"v\":3,\"type\":\"goodbye\",\"node\":\"n1\",\"names\":0}"),
                     PROTO_E_FIELD);
    /* names */
    put_tok(recbuf, 0, 0, 1, 1);
    ck_assert_int_eq(dec3(TOKHDR(",\"count\":1,\"names\":2"), "red\0red", 8, recbuf, 24, &st),
                     PROTO_E_NAMES);
    ck_assert_int_eq(dec3(TOKHDR(",\"count\":1,\"names\":2"), "red\0\0", 5, recbuf, 24, &st),
                     PROTO_E_NAMES);
    ck_assert_int_eq(dec3(TOKHDR(",\"count\":1,\"names\":1"), "r d", 4, recbuf, 24, &st),
                     PROTO_E_NAMES);
    char longname[300];
    memset(longname, 'x', 299);
    longname[299] = '\0';
    ck_assert_int_eq(dec3(TOKHDR(",\"count\":1,\"names\":1"), longname, 300, recbuf, 24, &st),
                     PROTO_E_NAMES);
    /* frames */
    ck_assert_int_eq(dec3("{\"v\":3,\"type\":\"goodbye\",\"node\":\"n1\"}", "x", 1, NULL, -1, &st),
                     PROTO_E_FRAMES);
    ck_assert_int_eq(dec3(TOKHDR(",\"count\":1"), recbuf, 24, recbuf, 24, &st), PROTO_E_FRAMES);

    /* counted per reason */
    expect_stats(&st, &(proto_stats_t){.ok = 0,
                                       .rejected = {[PROTO_E_TRUNCATED] = 6,
                                                    [PROTO_E_VERSION] = 4,
                                                    [PROTO_E_TYPE] = 3,
                                                    [PROTO_E_COUNT] = 5,
                                                    [PROTO_E_RANGE] = 11,
                                                    [PROTO_E_JSON] = 5,
                                                    [PROTO_E_FIELD] = 8,
                                                    [PROTO_E_NAMES] = 4,
                                                    [PROTO_E_FRAMES] = 2},
                                       .rejected_total = 48});
    ck_assert_str_eq(proto_reason_str(PROTO_E_COUNT), "count");
    proto_stats_note(&st, PROTO_E_TABLE);
    ck_assert_uint_eq(st.rejected[PROTO_E_TABLE], 1);

    /* and a good one still decodes, unknown fields ignored */
    ck_assert_int_eq(DEC_TOK1(TOKHDR(",\"count\":1,\"future\":[1]")), PROTO_OK);
    ck_assert_uint_eq(st.ok, 1);
}
END_TEST

/* Decodes a tokens header (TOKHDR) with names "red","blue", a weights
 * frame of `wl` bytes (-1: no frame) and one tokens record; returns the
 * reason. */
static proto_reason_t dec_w(const char *hdr, const void *w, ssize_t wl, proto_stats_t *st)
{
    proto_msg_t m;
    proto_msg_init(&m);
    unsigned char rec[24];
    put_tok(rec, 1, 0, 3, 4);
    proto_frame_t f[PROTO_MAX_FRAMES] = {{hdr, strlen(hdr)}, {"red\0blue", 9}};
    size_t n = 2;
    if (wl >= 0)
        f[n++] = (proto_frame_t){w, (size_t)wl};
    f[n++] = (proto_frame_t){rec, sizeof rec};
    proto_reason_t why = PROTO_E__COUNT;
    int rc = proto_decode(&m, f, n, st, &why);
    ck_assert_int_eq(rc, why == PROTO_OK ? 0 : -EPROTO);
    if (rc == 0 && m.has_weights) { /* what decodes re-encodes the same */
        proto_enc_t e;
        proto_enc_init(&e);
        ck_assert_int_eq(proto_encode(&m, &e), 0);
        ck_assert_uint_eq(e.nframes, 4);
        ck_assert_mem_eq(e.data[2], w, (size_t)wl);
        proto_enc_clear(&e);
    }
    proto_msg_clear(&m);
    return why;
}

/* Round trips m into d (which must decode); returns d, to read a field. */
static const proto_msg_t *rt(const proto_msg_t *m, proto_msg_t *d)
{
    ck_assert_int_eq(roundtrip(m, d, NULL), 0);
    return d;
}

/* Encodes m (which must encode) and checks that its header carries text
 * (want 1) or does not (want 0). */
static void expect_in_header(const proto_msg_t *m, const char *text, int want)
{
    proto_enc_t e;
    proto_enc_init(&e);
    ck_assert_int_eq(proto_encode(m, &e), 0);
    ck_assert_msg((memmem(e.data[0], e.len[0], text, strlen(text)) != NULL) == want,
                  "header %s %s", want ? "lacks" : "carries", text);
    proto_enc_clear(&e);
}

/* Checks the optional header field f of *m (key "f", absent when 0): v (a
 * number written as it is in the header) and max round trip into *d,
 * max + 1 is refused, 0 leaves the key out and v puts "f":v in. */
#define EXPECT_OPTIONAL(m, d, f, v, max)                                                           \
    do {                                                                                           \
        (m)->f = (v);                                                                              \
        ck_assert_uint_eq(rt((m), (d))->f, (v));                                                   \
        (m)->f = (max);                                                                            \
        ck_assert_uint_eq(rt((m), (d))->f, (max));                                                 \
        (m)->f = (max) + 1;                                                                        \
        ck_assert_int_eq(encode_rc(m), -EINVAL);                                                   \
        (m)->f = 0;                                                                                \
        expect_in_header((m), #f, 0);                                                              \
        (m)->f = (v);                                                                              \
        expect_in_header((m), "\"" #f "\":" #v, 1);                                                \
    } while (0)

/* The two node names that take the two header writers: the hand writer,
 * and the jansson writer (a non-ASCII name). */
static const char *const writer_nodes[] = {"n1", "n\xc3\xa9"};

/* The controller's leadership epoch rides on what a controller sends a node
 * (welcome, tokens, heartbeat, error), absent when 0; anywhere else it is a
 * field error. */
START_TEST(test_proto_epoch)
{
    proto_msg_t m, d;
    timed_start(&m, &d, PROTO_HEARTBEAT, "n1");
    m.epoch = 77;
    ck_assert_uint_eq(rt(&m, &d)->epoch, 77);
    m.epoch = 0;
    ck_assert_uint_eq(rt(&m, &d)->epoch, 0);
    m.type = PROTO_ERROR;
    strcpy(m.code, "deposed");
    m.epoch = UINT64_C(1) << 40;
    ck_assert_uint_eq(rt(&m, &d)->epoch, UINT64_C(1) << 40);
    /* the jansson writer (non-ASCII text) says the same */
    strcpy(m.text, "caf\xc3\xa9");
    ck_assert_uint_eq(rt(&m, &d)->epoch, UINT64_C(1) << 40);
    /* a node's message never carries one: the encoder leaves it out */
    m.type = PROTO_GOODBYE;
    ck_assert_uint_eq(rt(&m, &d)->epoch, 0);
    proto_msg_clear(&d);
}
END_TEST

/* A hello may carry the node process's instance id (absent when 0); on any
 * other type it is a field error; above 2^53 a range error. */
START_TEST(test_proto_instance)
{
    proto_msg_t m, d;
    hello_start(&m, &d, "n1");
    m.instance = (UINT64_C(1) << 53) - 3;
    ck_assert_uint_eq(rt(&m, &d)->instance, (UINT64_C(1) << 53) - 3);
    m.instance = 0;
    ck_assert_uint_eq(rt(&m, &d)->instance, 0);
    m.instance = (UINT64_C(1) << 53) + 1; /* the encoder refuses what no reader keeps */
    ck_assert_int_eq(encode_rc(&m), -EINVAL);
    /* a heartbeat never carries one: the encoder leaves it out */
    m.type = PROTO_HEARTBEAT;
    m.has_names = 0;
    m.instance = 9;
    ck_assert_uint_eq(rt(&m, &d)->instance, 0);
    proto_msg_clear(&d);
}
END_TEST

/* A report says whether the node is in fallback and how many times it fell
 * back (absent when 0: a node that does not say is following); both
 * writers agree; the encoder refuses what the decoder would. */
START_TEST(test_proto_fallback)
{
    static const struct {
        int fallback;
        uint64_t fallbacks;
        int rc; /* the encoder's */
    } steps[] = {
        {1, 14, 0},
        {0, 14, 0}, /* resumed: the count stays */
        {0, 0, 0},
        {1, PROTO_MAX_COUNT, 0},
        {2, PROTO_MAX_COUNT, -EINVAL},
        {1, PROTO_MAX_COUNT + 1, -EINVAL},
    };
    proto_msg_t m, d;
    for (size_t w = 0; w < 2; w++) {
        msg_start(&m, &d, PROTO_REPORT, writer_nodes[w]);
        m.period = 3;
        m.table = 1;
        for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
            m.fallback = steps[i].fallback;
            m.fallbacks = steps[i].fallbacks;
            if (steps[i].rc) {
                ck_assert_int_eq(encode_rc(&m), steps[i].rc);
                continue;
            }
            ck_assert_msg(rt(&m, &d)->fallback == m.fallback && d.fallbacks == m.fallbacks,
                          "%s, step %zu: %d, %llu", writer_nodes[w], i, d.fallback,
                          (unsigned long long)d.fallbacks);
        }
        /* a heartbeat never carries them: the encoder leaves them out */
        m.type = PROTO_HEARTBEAT;
        m.fallback = 1;
        m.fallbacks = 3;
        ck_assert_int_eq(rt(&m, &d)->fallback, 0);
        ck_assert_uint_eq(d.fallbacks, 0);
        proto_msg_clear(&d);
    }
}
END_TEST

/* The optional header fields a message type may or may not carry (epoch,
 * lease: what a controller sends; instance, leases: hello; follows: hello
 * and report), as the decoder reads them. */
START_TEST(test_proto_optional_field_rules)
{
    static const struct {
        const char *hdr;
        int tokens_frame; /* 1: with one wide tokens record; 2: an empty records frame */
        proto_reason_t want;
    } cases[] = {
        {TOKHDR(",\"count\":1,\"epoch\":5"), 1, PROTO_OK},
        {"{\"v\":3,\"type\":\"goodbye\",\"node\":\"n1\",\"epoch\":5}", 0, PROTO_E_FIELD},
        {"{\"v\":3,\"type\":\"heartbeat\",\"node\":\"n1\",\"epoch\":-1}", 0, PROTO_E_RANGE},
        {"{\"v\":3,\"type\":\"heartbeat\",\"node\":\"n1\",\"epoch\":\"5\"}", 0, PROTO_E_FIELD},
        {"{\"v\":3,\"type\":\"goodbye\",\"node\":\"n1\",\"instance\":5}", 0, PROTO_E_FIELD},
        {"{\"v\":3,\"type\":\"heartbeat\",\"node\":\"n1\",\"fallback\":1}", 0, PROTO_E_FIELD},
        {"{\"v\":3,\"type\":\"goodbye\",\"node\":\"n1\",\"fallbacks\":2}", 0, PROTO_E_FIELD},
        {REPHDR(",\"fallback\":1,\"fallbacks\":2"), 2, PROTO_OK},
        {REPHDR(",\"fallback\":2"), 2, PROTO_E_RANGE},
        {REPHDR(",\"fallbacks\":-1"), 2, PROTO_E_RANGE},
        {REPHDR(",\"fallbacks\":9007199254740993"), 2, PROTO_E_RANGE},
        {REPHDR(",\"fallback\":true"), 2, PROTO_E_FIELD},
        /* a hello's instance: taken up to 2^53, a range error above */
        {HELLOHDR(",\"instance\":42"), 2, PROTO_OK},
        {HELLOHDR(",\"instance\":9007199254740993"), 2, PROTO_E_RANGE},
        /* follows (test_proto_follows): a node's, never on what a controller sends */
        {REPHDR(",\"follows\":264"), 2, PROTO_OK},
        {REPHDR(",\"follows\":-1"), 2, PROTO_E_RANGE},
        {REPHDR(",\"follows\":\"5\""), 2, PROTO_E_FIELD},
        {REPHDR(",\"epoch\":264"), 2, PROTO_E_FIELD},
        {TOKHDR(",\"count\":1,\"follows\":5"), 1, PROTO_E_FIELD},
        /* the rule an older controller reads "follows" by: unknown keys pass */
        {REPHDR(",\"zz_new\":264"), 2, PROTO_OK},
        {HELLOHDR(",\"follows\":7"), 2, PROTO_OK},
        /* lease and leases (test_proto_lease) */
        {TOKHDR(",\"count\":1,\"lease\":10"), 1, PROTO_OK},
        {TOKHDR(",\"count\":1,\"lease\":1000001"), 1, PROTO_E_RANGE},
        {TOKHDR(",\"count\":1,\"leases\":1"), 1, PROTO_E_FIELD},
        {REPHDR(",\"lease\":10"), 2, PROTO_E_FIELD},
        /* the cluster's shards (test_proto_shards) */
        {TOKHDR(",\"count\":1,\"shards_k\":2,\"shards_gen\":1"), 1, PROTO_OK},
        {TOKHDR(",\"count\":1,\"shards_k\":2,\"shards_gen\":1,\"shards_next\":3,"
                "\"shards_from\":5"), 1, PROTO_OK},
        {TOKHDR(",\"count\":1,\"shards_k\":2,\"shards_gen\":1,\"shards_next\":2,"
                "\"shards_from\":5"), 1, PROTO_E_FIELD},
        {TOKHDR(",\"count\":1,\"shards_k\":2"), 1, PROTO_E_FIELD},
        {TOKHDR(",\"count\":1,\"shards_k\":257,\"shards_gen\":1"), 1, PROTO_E_RANGE},
        {TOKHDR(",\"count\":1,\"shards_k\":2,\"shards_gen\":1,\"shards_next\":3"), 1,
         PROTO_E_FIELD},
        {REPHDR(",\"shards_k\":2,\"shards_gen\":1"), 2, PROTO_E_FIELD},
        {HELLOHDR(",\"leases\":2"), 2, PROTO_E_RANGE},
        /* sparse and full (test_proto_sparse) */
        {REPHDR(",\"sparse\":1"), 2, PROTO_OK},
        {HELLOHDR(",\"sparse\":1"), 2, PROTO_OK},
        {REPHDR(",\"sparse\":2"), 2, PROTO_E_RANGE},
        {REPHDR(",\"sparse\":true"), 2, PROTO_E_FIELD},
        {REPHDR(",\"full\":1"), 2, PROTO_E_FIELD},
        {TOKHDR(",\"count\":1,\"full\":1"), 1, PROTO_OK},
        {TOKHDR(",\"count\":1,\"full\":2"), 1, PROTO_E_RANGE},
        {TOKHDR(",\"count\":1,\"sparse\":1"), 1, PROTO_E_FIELD},
        {"{\"v\":3,\"type\":\"goodbye\",\"node\":\"n1\",\"full\":1}", 0, PROTO_E_FIELD},
        /* basis (test_proto_basis): on tokens only */
        {TOKHDR(",\"count\":1,\"basis\":7"), 1, PROTO_OK},
        {TOKHDR(",\"count\":1,\"basis\":-1"), 1, PROTO_E_RANGE},
        {TOKHDR(",\"count\":1,\"basis\":9007199254740993"), 1, PROTO_E_RANGE},
        {REPHDR(",\"basis\":7"), 2, PROTO_E_FIELD},
        {"{\"v\":3,\"type\":\"heartbeat\",\"node\":\"n1\",\"basis\":7}", 0, PROTO_E_FIELD},
        /* changed grants (test_proto_grants) */
        {TOKHDR(",\"count\":1,\"renew\":1,\"gseq\":7"), 1, PROTO_OK},
        {TOKHDR(",\"count\":1,\"renew\":1,\"gseq\":7,\"based\":0"), 1, PROTO_OK},
        {TOKHDR(",\"count\":1,\"renew\":1,\"gseq\":7,\"based\":2"), 1, PROTO_E_RANGE},
        {TOKHDR(",\"count\":1,\"gseq\":7,\"based\":0"), 1, PROTO_E_FIELD},
        {TOKHDR(",\"count\":1,\"renew\":1,\"based\":0"), 1, PROTO_E_FIELD},
        {TOKHDR(",\"count\":1,\"renew\":2"), 1, PROTO_E_RANGE},
        {TOKHDR(",\"count\":1,\"gseq\":9007199254740993"), 1, PROTO_E_RANGE},
        {TOKHDR(",\"count\":1,\"regrant\":1"), 1, PROTO_E_FIELD},
        {REPHDR(",\"regrant\":1"), 2, PROTO_OK},
        {REPHDR(",\"regrant\":2"), 2, PROTO_E_RANGE},
        {REPHDR(",\"renew\":1"), 2, PROTO_E_FIELD},
        {REPHDR(",\"gseq\":1"), 2, PROTO_E_FIELD},
        {HELLOHDR(",\"renew\":1"), 2, PROTO_OK},
        {"{\"v\":3,\"type\":\"heartbeat\",\"node\":\"n1\",\"renew\":1}", 0, PROTO_E_FIELD},
    };
    proto_stats_t st = {0};
    put_tok(recbuf, 0, 0, 1, 2);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int fr = cases[i].tokens_frame;
        proto_reason_t got = fr == 1   ? DEC_TOK1(cases[i].hdr)
                             : fr == 2 ? DEC_EMPTY(cases[i].hdr)
                                       : DEC(cases[i].hdr);
        ck_assert_msg(got == cases[i].want, "case %zu (%s): reason %d, want %d", i, cases[i].hdr,
                      (int)got, (int)cases[i].want);
    }
}
END_TEST

/* A node's hello and report may say the epoch it obeys, under the key
 * "follows" (absent when 0), so that a controller whose etcd lost its data
 * leads above it; both writers agree; the encoder refuses above 2^53 and
 * leaves it out of other types.  The key is new so that an older
 * controller ignores it (an unknown key) instead of refusing the message
 * ("epoch" on a hello is a field error, as it was). */
START_TEST(test_proto_follows)
{
    proto_msg_t m, d;
    for (size_t w = 0; w < 2; w++) {
        hello_start(&m, &d, writer_nodes[w]);
        EXPECT_OPTIONAL(&m, &d, follows, 264, PROTO_MAX_COUNT);
        m.type = PROTO_REPORT;
        m.has_names = 0;
        m.period = 3;
        EXPECT_OPTIONAL(&m, &d, follows, 9, PROTO_MAX_COUNT);
        /* what a controller sends never carries one */
        m.type = PROTO_HEARTBEAT;
        ck_assert_uint_eq(rt(&m, &d)->follows, 0);
        proto_msg_clear(&d);
    }
}
END_TEST

/* The fallback lease (issue 26 case 2): "lease" on what a controller
 * sends with timing (welcome, tokens, heartbeat), "leases" on a hello;
 * both optional and absent when 0, both refused on other types and out
 * of range, and an older peer passes them as unknown keys. */
START_TEST(test_proto_lease)
{
    proto_msg_t m, d;
    for (size_t w = 0; w < 2; w++) {
        hello_start(&m, &d, writer_nodes[w]);
        m.leases = 1;
        ck_assert_int_eq(rt(&m, &d)->leases, 1);
        m.leases = 2;
        ck_assert_int_eq(encode_rc(&m), -EINVAL);
        m.leases = 0;
        ck_assert_int_eq(rt(&m, &d)->leases, 0);
        m.type = PROTO_HEARTBEAT; /* with timing */
        m.has_names = 0;
        m.has_timing = 1;
        set_timing(&m);
        EXPECT_OPTIONAL(&m, &d, lease, 10, PROTO_LEASE_MAX);
        /* what a node sends never carries one */
        m.type = PROTO_REPORT;
        m.table = 1;
        ck_assert_uint_eq(rt(&m, &d)->lease, 0);
        proto_msg_clear(&d);
    }
}
END_TEST

/* The cluster's shards (issue 30, K changing at run time): "shards_k",
 * "shards_gen", "shards_next", "shards_from" on what a controller sends
 * with timing, both writers; absent when shards_k is 0; an invalid
 * configuration refused at encoding and at decoding; never on a report. */
START_TEST(test_proto_shards)
{
    proto_msg_t m, d;
    for (size_t w = 0; w < 2; w++) {
        hello_start(&m, &d, writer_nodes[w]);
        m.type = PROTO_HEARTBEAT;
        m.has_names = 0;
        m.has_timing = 1;
        set_timing(&m);
        m.shards_k = 2;
        m.shards_gen = 4;
        rt(&m, &d);
        ck_assert_uint_eq(d.shards_k, 2);
        ck_assert_uint_eq(d.shards_gen, 4);
        ck_assert_uint_eq(d.shards_next, 0);
        m.shards_next = 3;
        m.shards_from = UINT64_C(1765000003000);
        rt(&m, &d);
        ck_assert_uint_eq(d.shards_next, 3);
        ck_assert_uint_eq(d.shards_from, UINT64_C(1765000003000));
        expect_in_header(&m, "\"shards_from\":1765000003000", 1);
        m.shards_next = 2; /* the K in force */
        ck_assert_int_eq(encode_rc(&m), -EINVAL);
        m.shards_next = 257;
        ck_assert_int_eq(encode_rc(&m), -EINVAL);
        m.shards_next = 3;
        m.shards_gen = 0;
        ck_assert_int_eq(encode_rc(&m), -EINVAL);
        m.shards_gen = 4;
        m.shards_from = 0;
        ck_assert_int_eq(encode_rc(&m), -EINVAL);
        m.shards_k = 0;
        m.shards_gen = m.shards_next = 0;
        ck_assert_uint_eq(rt(&m, &d)->shards_k, 0);
        expect_in_header(&m, "shards", 0);
        m.shards_k = 1; /* never on what a node sends */
        m.shards_gen = 1;
        m.type = PROTO_REPORT;
        m.table = 1;
        ck_assert_uint_eq(rt(&m, &d)->shards_k, 0);
        expect_in_header(&m, "shards", 0);
        proto_msg_clear(&d);
    }
}
END_TEST

/* Sparse reports (issue 30): "sparse" on a hello (can), a welcome (takes)
 * and a report (is), "full" on what a controller sends with timing (asks
 * for a full report); both optional, absent when 0, refused elsewhere and
 * above 1, and an older peer passes them as unknown keys. */
START_TEST(test_proto_sparse)
{
    proto_msg_t m, d;
    for (size_t w = 0; w < 2; w++) {
        hello_start(&m, &d, writer_nodes[w]);
        EXPECT_OPTIONAL(&m, &d, sparse, 1, 1);
        m.sparse = 0;
        m.type = PROTO_REPORT;
        m.has_names = 0;
        m.period = 3;
        EXPECT_OPTIONAL(&m, &d, sparse, 1, 1);
        m.full = 1; /* a node never asks: left out */
        ck_assert_int_eq(rt(&m, &d)->full, 0);
        m.full = 0;
        m.sparse = 0;
        m.type = PROTO_HEARTBEAT; /* with timing */
        m.has_timing = 1;
        set_timing(&m);
        EXPECT_OPTIONAL(&m, &d, full, 1, 1);
        m.sparse = 1; /* a controller's heartbeat never says it: left out */
        ck_assert_int_eq(rt(&m, &d)->sparse, 0);
        proto_msg_clear(&d);
    }
}
END_TEST

/* Tokens net of served (issue 26): a tokens message may name the node's
 * report it was computed from ("basis", proto_basis()); optional, absent
 * when 0, left out of other types, refused above 2^53. */
START_TEST(test_proto_basis)
{
    proto_msg_t m, d;
    for (size_t w = 0; w < 2; w++) {
        hello_start(&m, &d, writer_nodes[w]);
        m.type = PROTO_TOKENS;
        m.has_names = 0;
        m.has_timing = 1;
        set_timing(&m);
        m.table = 1;
        m.peer_table = 1;
        EXPECT_OPTIONAL(&m, &d, basis, 18, PROTO_MAX_COUNT);
        m.type = PROTO_HEARTBEAT; /* only tokens carry one */
        ck_assert_uint_eq(rt(&m, &d)->basis, 0);
        proto_msg_clear(&d);
    }
    ck_assert_uint_eq(proto_basis(3, 2, 5), 18);
    ck_assert_uint_eq(proto_basis(0, 0, 5), 1); /* never 0: 0 is "not said" */
    ck_assert_uint_eq(proto_basis(3, 5, 5), 0);
    ck_assert_uint_eq(proto_basis(3, 0, 0), 0);
    ck_assert_uint_eq(proto_basis(PROTO_MAX_COUNT / 5, 4, 5), 0);
}
END_TEST

/* The prediction both ends compute for a bucket a sparse report leaves
 * out: served carried on at its record's rate (served / interval), from 0
 * again in a later period, held for an older one; the nearness test. */
START_TEST(test_proto_predict)
{
    /* 300 served by interval 3: 100 per interval */
    ck_assert_uint_eq(proto_predict_served(300, 7, 3, 7, 3), 300);
    ck_assert_uint_eq(proto_predict_served(300, 7, 3, 7, 4), 400);
    ck_assert_uint_eq(proto_predict_served(300, 7, 3, 8, 0), 0);
    ck_assert_uint_eq(proto_predict_served(300, 7, 3, 8, 2), 200);
    ck_assert_uint_eq(proto_predict_served(300, 7, 3, 6, 4), 300);
    ck_assert_uint_eq(proto_predict_served(300, 7, 3, 7, 1), 300); /* never backwards */
    /* interval 0: no rate yet */
    ck_assert_uint_eq(proto_predict_served(5, 7, 0, 7, 4), 5);
    ck_assert_uint_eq(proto_predict_served(5, 7, 0, 8, 4), 0);
    /* saturates */
    ck_assert_uint_eq(proto_predict_served(PROTO_MAX_COUNT, 1, 1, 1, 9), PROTO_MAX_COUNT);
    ck_assert_uint_eq(proto_predict_served(UINT64_MAX, 1, 1, 1, 1), PROTO_MAX_COUNT);
    ck_assert_uint_eq(proto_predict_served(PROTO_MAX_COUNT - 5, 1, 1, 2, UINT32_MAX),
                      PROTO_MAX_COUNT);
    /* The saturation test, one division fewer: the same figures as
     * rate > (MAX - base) / steps, near the bound and far from it. */
    uint64_t x = 88172645463325252u;
    for (int k = 0; k < 200000; k++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        uint64_t served = k % 4 == 0 ? PROTO_MAX_COUNT - (x % 4096) : x >> (x % 64);
        uint32_t bi = (uint32_t)(x % 7), iv = (uint32_t)((x >> 8) % (k % 3 ? 12 : UINT32_MAX));
        uint64_t bp = 5, pp = 5 + (x >> 20) % 2;
        uint64_t sv = served > PROTO_MAX_COUNT ? PROTO_MAX_COUNT : served;
        uint64_t rate = bi ? sv / bi : 0, base = pp == bp ? sv : 0;
        uint64_t steps = pp == bp ? (iv > bi ? iv - bi : 0) : iv;
        uint64_t want = steps && rate > (PROTO_MAX_COUNT - base) / steps ? PROTO_MAX_COUNT
                                                                          : base + rate * steps;
        ck_assert_uint_eq(proto_predict_served(served, bp, bi, pp, iv), want);
    }

    proto_pred_t a = {.queued = 10, .arrivals = 100, .served = 1000, .throttled = 0};
    proto_pred_t b = a;
    ck_assert(proto_pred_near(&a, &b, 0.10, 0.02, 2));
    b.arrivals = 109;
    ck_assert(proto_pred_near(&a, &b, 0.10, 0.02, 2));
    b.arrivals = 112;
    ck_assert(!proto_pred_near(&a, &b, 0.10, 0.02, 2));
    b = a;
    b.served = 1021; /* 2% of 1021 = 20.4 */
    ck_assert(!proto_pred_near(&a, &b, 0.10, 0.02, 2));
    b.served = 1019;
    ck_assert(proto_pred_near(&a, &b, 0.10, 0.02, 2));
    b = a;
    b.throttled = 1;
    ck_assert(!proto_pred_near(&a, &b, 0.10, 0.02, 2));
    b = a;
    b.queued = 12; /* within abs 2 */
    ck_assert(proto_pred_near(&a, &b, 0.0, 0.0, 2));
    b.queued = 13;
    ck_assert(!proto_pred_near(&a, &b, 0.0, 0.0, 2));
}
END_TEST

/* The routing id of a node process: its name, then (instance != 0) a NUL
 * and the instance's low 32 bits; the controller reads both back. */
START_TEST(test_proto_node_id)
{
    unsigned char id[PROTO_ID_MAX];
    size_t n = proto_node_id("n1", 0, id);
    ck_assert_uint_eq(n, 2);
    ck_assert_int_eq(memcmp(id, "n1", 2), 0);
    uint32_t inst = 1;
    ck_assert_int_eq(proto_node_id_split(id, n, "n1", &inst), 0);
    ck_assert_uint_eq(inst, 0);
    n = proto_node_id("n1", UINT64_C(0x1234567890abcdef), id);
    ck_assert_uint_eq(n, 7);
    ck_assert_int_eq(id[2], 0);
    ck_assert_int_eq(proto_node_id_split(id, n, "n1", &inst), 1);
    ck_assert_uint_eq(inst, 0x90abcdefu);
    ck_assert_uint_eq(inst, proto_instance_tag(UINT64_C(0x1234567890abcdef)));
    ck_assert_int_eq(proto_node_id_split(id, n, "n2", &inst), -EINVAL);
    ck_assert_int_eq(proto_node_id_split(id, n, "n", &inst), -EINVAL);
    ck_assert_int_eq(proto_node_id_split(id, 6, "n1", &inst), -EINVAL); /* short suffix */
    /* the longest name still fits ZeroMQ's 255-byte routing id */
    char big[PROTO_NAME_MAX + 1];
    memset(big, 'x', PROTO_NAME_MAX);
    big[PROTO_NAME_MAX] = '\0';
    n = proto_node_id(big, 5, id);
    ck_assert_uint_eq(n, 255);
    ck_assert_int_eq(proto_node_id_split(id, n, big, &inst), 1);
    ck_assert_uint_eq(inst, 5);
}
END_TEST

/* The weights frame (protocol v2): only with names, only controller ->
 * node, one u32 per name, each 1..PROTO_WEIGHT_MAX; anything else is
 * rejected and counted. */
START_TEST(test_proto_weights_rejected)
{
    proto_stats_t st = {0};
    static const uint32_t w[3] = {3, 1, 5};
    static const uint32_t bad0[2] = {0, 1}, bigw[2] = {1, PROTO_WEIGHT_MAX + 1};
#define W2 ",\"count\":1,\"names\":2,\"weights\":2"
    static const struct {
        const char *hdr;
        const uint32_t *w;
        ssize_t wl; /* -1: no weights frame */
        proto_reason_t want;
    } cases[] = {
        {TOKHDR(W2), w, 8, PROTO_OK},
        /* one name's weight missing, one too many, a partial one */
        {TOKHDR(W2), w, 4, PROTO_E_TRUNCATED},
        {TOKHDR(W2), w, 12, PROTO_E_COUNT},
        {TOKHDR(W2), w, 7, PROTO_E_COUNT},
        /* the header's count disagrees with the names */
        {TOKHDR(",\"count\":1,\"names\":2,\"weights\":3"), w, 12, PROTO_E_COUNT},
        /* weight 0, above the maximum */
        {TOKHDR(W2), bad0, 8, PROTO_E_RANGE},
        {TOKHDR(W2), bigw, 8, PROTO_E_RANGE},
        /* negative or non-integer count */
        {TOKHDR(",\"count\":1,\"names\":2,\"weights\":-2"), w, 8, PROTO_E_RANGE},
        {TOKHDR(",\"count\":1,\"names\":2,\"weights\":\"2\""), w, 8, PROTO_E_FIELD},
        /* the frame missing: the records frame is taken for it */
        {TOKHDR(W2), NULL, -1, PROTO_E_TRUNCATED},
        /* a weights frame nobody announced */
        {TOKHDR(",\"count\":1,\"names\":2"), w, 8, PROTO_E_FRAMES},
    };
#undef W2
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        proto_reason_t why = dec_w(cases[i].hdr, cases[i].w, cases[i].wl, &st);
        ck_assert_msg(why == cases[i].want, "case %zu: got %s, want %s", i, proto_reason_str(why),
                      proto_reason_str(cases[i].want));
    }
    /* weights without names, or in a node's message */
    ck_assert_int_eq(dec3(TOKHDR(",\"count\":0,\"weights\":0"), "", 0, "", 0, &st), PROTO_E_FIELD);
    ck_assert_int_eq(dec3("{\"v\":3,\"type\":\"hello\",\"node\":\"n1\",\"capacity\":1,\"table\":1,"
                          "\"names\":1,\"weights\":1}",
                          "red", 4, w, 4, &st),
                     PROTO_E_FIELD);
    expect_stats(&st, &(proto_stats_t){.ok = 1,
                                       .rejected = {[PROTO_E_TRUNCATED] = 2,
                                                    [PROTO_E_COUNT] = 3,
                                                    [PROTO_E_RANGE] = 3,
                                                    [PROTO_E_FIELD] = 3,
                                                    [PROTO_E_FRAMES] = 1},
                                       .rejected_total = 12});
}
END_TEST

/* ---- data-driven fixtures (tests/data/proto/CASE/) ---- */

#define FIXTURES "tests/data/proto"

/* Reads fixture frame i of case dir into buf; returns its length, or -1 if
 * the case has no such frame. */
static ssize_t read_frame(const char *dir, int i, unsigned char *buf, size_t cap)
{
    char path[512];
    snprintf(path, sizeof path, "%s/frame%d.txt", dir, i);
    FILE *f = fopen(path, "rb");
    if (f) {
        size_t n = fread(buf, 1, cap, f);
        fclose(f);
        return (ssize_t)n;
    }
    snprintf(path, sizeof path, "%s/frame%d.hex", dir, i);
    if (!(f = fopen(path, "r")))
        return -1;
    size_t n = 0;
    unsigned v;
    while (n < cap && fscanf(f, "%2x", &v) == 1)
        buf[n++] = (unsigned char)v;
    fclose(f);
    return (ssize_t)n;
}

START_TEST(test_proto_fixtures)
{
    DIR *d = opendir(FIXTURES);
    ck_assert_msg(d != NULL, "run from the repository root: no %s", FIXTURES);
    static unsigned char bufs[PROTO_MAX_FRAMES][8192];
    int cases = 0, oks = 0;
    struct dirent *e;
    proto_msg_t m;
    proto_msg_init(&m);
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' || strcmp(e->d_name, "README") == 0)
            continue;
        char dir[300], path[400], expect[32] = "";
        snprintf(dir, sizeof dir, "%s/%s", FIXTURES, e->d_name);
        snprintf(path, sizeof path, "%s/expect", dir);
        FILE *f = fopen(path, "r");
        ck_assert_msg(f != NULL, "%s: no expect file", dir);
        ck_assert(fscanf(f, "%31s", expect) == 1);
        fclose(f);
        proto_frame_t fr[PROTO_MAX_FRAMES];
        size_t n = 0;
        for (int i = 0; i < PROTO_MAX_FRAMES; i++) {
            ssize_t l = read_frame(dir, i, bufs[i], sizeof bufs[i]);
            if (l < 0)
                break;
            fr[n].data = bufs[i];
            fr[n].len = (size_t)l;
            n++;
        }
        ck_assert_msg(n > 0, "%s: no frames", dir);
        proto_reason_t why;
        int rc = proto_decode(&m, fr, n, NULL, &why);
        ck_assert_msg(strcmp(proto_reason_str(why), expect) == 0, "%s: got %s, want %s", dir,
                      proto_reason_str(why), expect);
        ck_assert_int_eq(rc, why == PROTO_OK ? 0 : -EPROTO);
        cases++;
        oks += why == PROTO_OK;
    }
    closedir(d);
    proto_msg_clear(&m);
    ck_assert_int_ge(cases, 20);
    ck_assert_int_ge(oks, 5);
}
END_TEST

/* ---- fuzz ---- */

static uint64_t rng = 88172645463325252ull;
static uint64_t xr(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* Mutates buf (len bytes, capacity cap) in place; returns the new length. */
static size_t mutate(unsigned char *buf, size_t len, size_t cap)
{
    int k = 1 + (int)(xr() % 4);
    for (int j = 0; j < k; j++) {
        switch (xr() % 6) {
        case 0: /* flip a bit */
            if (len)
                buf[xr() % len] ^= (unsigned char)(1u << (xr() % 8));
            break;
        case 1: /* random byte */
            if (len)
                buf[xr() % len] = (unsigned char)xr();
            break;
        case 2: /* truncate */
            if (len)
                len = xr() % len;
            break;
        case 3: /* extend with junk */
            while (len < cap && xr() % 4)
                buf[len++] = (unsigned char)xr();
            break;
        case 4: /* interesting digits into JSON */
            if (len) {
                static const char dig[] = "-09\"{}:,e.";
                buf[xr() % len] = (unsigned char)dig[xr() % (sizeof dig - 1)];
            }
            break;
        default: /* extreme 64-bit value at a random aligned spot */
            if (len >= 8) {
                size_t at = (xr() % (len / 8)) * 8;
                uint64_t v = xr() % 2 ? UINT64_MAX : (uint64_t)INT64_MAX;
                memcpy(buf + at, &v, 8);
            }
            break;
        }
    }
    return len;
}

START_TEST(test_proto_fuzz_mutations)
{
    /* Seeds: one valid message of each bulky type. */
    proto_msg_t seeds[3];
    for (int i = 0; i < 3; i++)
        proto_msg_init(&seeds[i]);
    seeds[0].type = PROTO_REPORT;
    seeds[0].table = 1;
    seeds[0].count = 4;
    set_names3(&seeds[0]);
    proto_msg_reserve(&seeds[0], 4, 0);
    memset(seeds[0].report, 0, 4 * sizeof *seeds[0].report);
    seeds[0].report[3].bucket = 2;
    seeds[0].report[3].l_left = PROTO_UNLIMITED;
    set_tokens(&seeds[1], 1, 3);
    for (int i = 0; i < 3; i++)
        seeds[1].tokens[i] = (proto_tokens_rec_t){.bucket = (uint32_t)i, .r_tokens = i, .l_tokens = 9};
    static const uint32_t w3[] = {1, 7, PROTO_WEIGHT_MAX};
    set_names3(&seeds[1]); /* header, names, weights, records */
    seeds[1].has_weights = 1;
    seeds[1].weights = w3;
    seeds[2].type = PROTO_HELLO;
    seeds[2].table = 1;
    seeds[2].capacity = 100;
    set_names3(&seeds[2]);
    for (int i = 0; i < 3; i++)
        strcpy(seeds[i].node, "fuzz");

    /* e[0..2]: the seeds as sent (records compact); e[3], e[4]: the report
     * and the tokens message with wide records */
    enum { NENC = 5 };
    proto_enc_t e[NENC];
    for (int i = 0; i < NENC; i++) {
        proto_enc_init(&e[i]);
        seeds[i % 3].wide = i >= 3;
        ck_assert_int_eq(proto_encode(&seeds[i % 3], &e[i]), 0);
    }
    proto_stats_t st = {0};
    proto_msg_t d;
    proto_msg_init(&d);
    proto_enc_t scratch;
    proto_enc_init(&scratch);
    enum { CAP = 1024, N = 20000 };
    static unsigned char bufs[PROTO_MAX_FRAMES][CAP];
    size_t total = 0;
    for (int it = 0; it < N; it++) {
        const proto_enc_t *src = &e[it % NENC];
        proto_frame_t f[PROTO_MAX_FRAMES] = {{0}};
        size_t nf = src->nframes;
        for (size_t i = 0; i < nf; i++) {
            size_t l = src->len[i] < CAP ? src->len[i] : CAP;
            memcpy(bufs[i], src->data[i], l);
            f[i].len = l;
            f[i].data = bufs[i];
        }
        size_t which = xr() % (nf + 1);
        if (which == nf) { /* drop or duplicate a frame */
            if (xr() % 2) {
                nf--;
            } else if (nf < PROTO_MAX_FRAMES) {
                f[nf] = f[nf - 1];
                nf++;
            }
        } else {
            f[which].len = mutate(bufs[which], f[which].len, CAP);
        }
        if (it % 7 == 0) { /* pure random frames too */
            size_t l = xr() % 64;
            for (size_t i = 0; i < l; i++)
                bufs[0][i] = (unsigned char)xr();
            f[0].len = l;
        }
        proto_reason_t why;
        int rc = proto_decode(&d, f, nf, &st, &why);
        ck_assert(rc == 0 || rc == -EPROTO);
        ck_assert((rc == 0) == (why == PROTO_OK));
        if (rc == 0) /* whatever decodes must re-encode */
            ck_assert_int_eq(proto_encode(&d, &scratch), 0);
        total++;
    }
    ck_assert_uint_eq(st.ok + st.rejected_total, total);
    ck_assert_uint_gt(st.rejected_total, total / 2);
    for (int i = 0; i < NENC; i++)
        proto_enc_clear(&e[i]);
    for (int i = 0; i < 3; i++)
        proto_msg_clear(&seeds[i]);
    proto_msg_clear(&d);
    proto_enc_clear(&scratch);
}
END_TEST

/* The fast header parser must read exactly what jansson reads whenever it
 * accepts a header, on valid and on mutated input. */
START_TEST(test_proto_flat_parser_agrees)
{
    static const char *seeds[] = {
        "{\"v\":3,\"type\":\"report\",\"node\":\"n1\",\"seq\":12,\"period\":3,\"interval\":1,"
        "\"remaining_ms\":700,\"table\":1,\"peer_table\":2,\"count\":10,\"completions\":10,"
        "\"dispatched\":10,\"busy\":0.25}",
        " { \"v\" : 1 , \"type\" : \"tokens\" , \"node\" : \"a-b.c\" , \"period\" : 0 , "
        "\"interval\" : 4 , \"intervals\":5,\"period_ms\":1000,\"remaining_ms\":-0,\"table\":9,"
        "\"peer_table\":0,\"count\":9223372036854775807,\"x\":true,\"y\":null,\"z\":false}\n",
        "{\"v\":3,\"type\":\"error\",\"node\":\"n\",\"code\":\"unknown_node\",\"text\":\"a b\","
        "\"busy\":1e-3,\"seq\":-9223372036854775808,\"names\":1.5E+2}",
        "{}",
    };
    char buf[512];
    int accepted = 0;
    for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++)
        ck_assert_int_eq(proto__flat_agrees(seeds[i], strlen(seeds[i])), 2);
    for (int it = 0; it < 60000; it++) {
        const char *sd = seeds[xr() % (sizeof seeds / sizeof seeds[0])];
        size_t l = strlen(sd);
        memcpy(buf, sd, l);
        int k = 1 + (int)(xr() % 3);
        for (int j = 0; j < k && l; j++) {
            static const char alpha[] = " \t\n{}[]:,\"\\-+.eE0123456789tfnulx\x01\x80";
            size_t at = xr() % l;
            switch (xr() % 4) {
            case 0: /* replace */
                buf[at] = alpha[xr() % (sizeof alpha - 1)];
                break;
            case 1: /* delete */
                memmove(buf + at, buf + at + 1, l - at - 1);
                l--;
                break;
            case 2: /* insert */
                if (l + 1 < sizeof buf) {
                    memmove(buf + at + 1, buf + at, l - at);
                    buf[at] = alpha[xr() % (sizeof alpha - 1)];
                    l++;
                }
                break;
            default: /* truncate */
                l = at;
                break;
            }
        }
        int r = proto__flat_agrees(buf, l);
        ck_assert_msg(r != 0, "flat parser disagrees with jansson on: %.*s", (int)l, buf);
        accepted += r == 2;
    }
    ck_assert_int_gt(accepted, 1000); /* the mutations do reach the fast path */
}
END_TEST

/* ---- zmq helpers over inproc ---- */

static int known_n1(const char *node, void *arg)
{
    (void)arg;
    return strcmp(node, "n1") == 0;
}

START_TEST(test_proto_zmq_router_dealer)
{
    void *ctx = zmq_ctx_new();
    void *router = zmq_socket(ctx, ZMQ_ROUTER);
    ck_assert_int_eq(zmq_bind(router, "inproc://proto-test"), 0);
    void *nodes[2];
    const char *ids[2] = {"n1", "n2"};
    for (int i = 0; i < 2; i++) {
        nodes[i] = zmq_socket(ctx, ZMQ_DEALER);
        zmq_setsockopt(nodes[i], ZMQ_ROUTING_ID, ids[i], 2);
        ck_assert_int_eq(zmq_connect(nodes[i], "inproc://proto-test"), 0);
    }
    int to = 2000;
    zmq_setsockopt(router, ZMQ_RCVTIMEO, &to, sizeof to);
    zmq_setsockopt(nodes[0], ZMQ_RCVTIMEO, &to, sizeof to);

    proto_enc_t e;
    proto_enc_init(&e);
    proto_msg_t m, d;
    proto_msg_init(&m);
    proto_msg_init(&d);
    proto_stats_t st = {0};
    char id[256];
    size_t idlen = 0;

    /* report from n1: known */
    m.type = PROTO_REPORT;
    strcpy(m.node, "n1");
    m.table = 1;
    m.count = 0;
    ck_assert_int_eq(proto_send(nodes[0], NULL, 0, &m, &e, 0), 0);
    ck_assert_int_eq(proto_recv(router, id, sizeof id, &idlen, &d, &st, NULL, known_n1, NULL, 0), 0);
    ck_assert_uint_eq(idlen, 2);
    ck_assert(memcmp(id, "n1", 2) == 0);
    ck_assert_int_eq(d.type, PROTO_REPORT);

    /* heartbeat from n2: unknown to the hook, still returned */
    m.type = PROTO_HEARTBEAT;
    strcpy(m.node, "n2");
    ck_assert_int_eq(proto_send(nodes[1], NULL, 0, &m, &e, 0), 0);
    proto_reason_t why;
    ck_assert_int_eq(proto_recv(router, id, sizeof id, &idlen, &d, &st, &why, known_n1, NULL, 0),
                     PROTO_RECV_UNKNOWN);
    ck_assert_int_eq(why, PROTO_E_UNKNOWN_NODE);
    ck_assert_str_eq(d.node, "n2");
    /* hello from n2 passes the hook */
    m.type = PROTO_HELLO;
    m.table = 1;
    ck_assert_int_eq(proto_send(nodes[1], NULL, 0, &m, &e, 0), 0);
    ck_assert_int_eq(proto_recv(router, id, sizeof id, &idlen, &d, &st, NULL, known_n1, NULL, 0), 0);

    /* n2 claiming to be n1: identity mismatch */
    m.type = PROTO_GOODBYE;
    strcpy(m.node, "n1");
    ck_assert_int_eq(proto_send(nodes[1], NULL, 0, &m, &e, 0), 0);
    ck_assert_int_eq(proto_recv(router, id, sizeof id, &idlen, &d, &st, &why, known_n1, NULL, 0),
                     -EPROTO);
    ck_assert_int_eq(why, PROTO_E_UNKNOWN_NODE);

    /* raw garbage with too many frames is consumed and counted */
    for (int i = 0; i < 7; i++)
        zmq_send(nodes[0], "x", 1, i < 6 ? ZMQ_SNDMORE : 0);
    ck_assert_int_eq(proto_recv(router, id, sizeof id, &idlen, &d, &st, &why, NULL, NULL, 0),
                     -EPROTO);
    ck_assert_int_eq(why, PROTO_E_FRAMES);
    ck_assert_uint_eq(st.rejected[PROTO_E_UNKNOWN_NODE], 2);
    ck_assert_uint_eq(st.rejected[PROTO_E_FRAMES], 1);
    ck_assert_uint_eq(st.ok, 2);

    /* controller -> n1 tokens */
    set_tokens(&m, 3, 1);
    m.tokens[0] = (proto_tokens_rec_t){.bucket = 0, .r_tokens = 10, .l_tokens = PROTO_UNLIMITED};
    ck_assert_int_eq(proto_send(router, "n1", 2, &m, &e, ZMQ_DONTWAIT), 0);
    ck_assert_int_eq(proto_recv(nodes[0], NULL, 0, NULL, &d, &st, NULL, NULL, NULL, 0), 0);
    ck_assert_int_eq(d.type, PROTO_TOKENS);
    ck_assert_int_eq(d.tokens[0].r_tokens, 10);

    /* nothing waiting: -EAGAIN with DONTWAIT */
    ck_assert_int_eq(proto_recv(nodes[0], NULL, 0, NULL, &d, &st, NULL, NULL, NULL, ZMQ_DONTWAIT),
                     -EAGAIN);

    /* Two processes under the name n3 (routing ids with instance tags):
     * both are accepted as n3, each is addressed on its own, and neither
     * may speak for another name. */
    void *twins[2];
    for (int i = 0; i < 2; i++) {
        unsigned char tid[PROTO_ID_MAX];
        size_t tl = proto_node_id("n3", (uint64_t)(i + 1) << 40 | 7u * (unsigned)(i + 1), tid);
        twins[i] = zmq_socket(ctx, ZMQ_DEALER);
        zmq_setsockopt(twins[i], ZMQ_ROUTING_ID, tid, tl);
        zmq_setsockopt(twins[i], ZMQ_RCVTIMEO, &to, sizeof to);
        ck_assert_int_eq(zmq_connect(twins[i], "inproc://proto-test"), 0);
    }
    proto_msg_t h;
    proto_msg_init(&h);
    h.type = PROTO_HEARTBEAT;
    strcpy(h.node, "n3");
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(proto_send(twins[i], NULL, 0, &h, &e, 0), 0);
        ck_assert_int_eq(proto_recv(router, id, sizeof id, &idlen, &d, &st, NULL, NULL, NULL, 0), 0);
        uint32_t tag = 0;
        ck_assert_int_eq(proto_node_id_split(id, idlen, "n3", &tag), 1);
        ck_assert_uint_eq(tag, 7u * (unsigned)(i + 1));
    }
    strcpy(h.node, "n1");
    ck_assert_int_eq(proto_send(twins[0], NULL, 0, &h, &e, 0), 0);
    ck_assert_int_eq(proto_recv(router, id, sizeof id, &idlen, &d, &st, &why, NULL, NULL, 0),
                     -EPROTO);
    ck_assert_int_eq(why, PROTO_E_UNKNOWN_NODE);
    strcpy(h.node, "n3");
    unsigned char tid[PROTO_ID_MAX];
    size_t tl = proto_node_id("n3", (UINT64_C(2) << 40) | 14u, tid);
    ck_assert_int_eq(proto_send(router, tid, tl, &h, &e, ZMQ_DONTWAIT), 0);
    ck_assert_int_eq(proto_recv(twins[1], NULL, 0, NULL, &d, &st, NULL, NULL, NULL, 0), 0);
    ck_assert_int_eq(proto_recv(twins[0], NULL, 0, NULL, &d, &st, NULL, NULL, NULL, ZMQ_DONTWAIT),
                     -EAGAIN);
    for (int i = 0; i < 2; i++) {
        int z = 0;
        zmq_setsockopt(twins[i], ZMQ_LINGER, &z, sizeof z);
        zmq_close(twins[i]);
    }

    proto_msg_clear(&m);
    proto_msg_clear(&d);
    proto_enc_clear(&e);
    int zero = 0;
    for (int i = 0; i < 2; i++) {
        zmq_setsockopt(nodes[i], ZMQ_LINGER, &zero, sizeof zero);
        zmq_close(nodes[i]);
    }
    zmq_setsockopt(router, ZMQ_LINGER, &zero, sizeof zero);
    zmq_close(router);
    zmq_ctx_term(ctx);
}
END_TEST

/* Byte records (cost-aware tokens): both kinds round trip, with debts,
 * "no limit" and "off"; a message without them has no extra frame. */
START_TEST(test_proto_bytes_records)
{
    proto_msg_t m, d;
    msg_start(&m, &d, PROTO_TOKENS, "n2");
    set_tokens(&m, 4, 1);
    m.tokens[0] = (proto_tokens_rec_t){.bucket = 1, .r_tokens = 1, .l_tokens = 2};
    proto_enc_t e;
    proto_enc_init(&e);
    ck_assert_int_eq(proto_encode(&m, &e), 0);
    ck_assert_uint_eq(e.nframes, 2);
    ck_assert_int_eq(proto_msg_reserve_bytes(&m, 3), 0);
    m.nbytes = 3;
    m.tbytes[0] = (proto_tokens_bytes_t){.bucket = 1, .r_bytes = 4096, .l_bytes = 1 << 20};
    m.tbytes[1] = (proto_tokens_bytes_t){.bucket = 2, .r_bytes = 7, .l_bytes = PROTO_UNLIMITED};
    m.tbytes[2] = (proto_tokens_bytes_t){.bucket = 3, .flags = PROTO_TOK_OFF, .r_bytes = 9};
    ck_assert_int_eq(proto_encode(&m, &e), 0);
    ck_assert_uint_eq(e.nframes, 3);
    ck_assert_uint_eq(e.len[2], 3 * PROTO_TOKENS_BYTES_SIZE);
    proto_enc_clear(&e);
    ck_assert_int_eq(roundtrip(&m, &d, NULL), 0);
    ck_assert_uint_eq(d.nbytes, 3);
    ck_assert_int_eq(d.tbytes[0].r_bytes, 4096);
    ck_assert_int_eq(d.tbytes[0].l_bytes, 1 << 20);
    ck_assert_int_eq(d.tbytes[1].l_bytes, PROTO_UNLIMITED);
    ck_assert_uint_eq(d.tbytes[1].flags, PROTO_TOK_UNLIMITED);
    ck_assert_uint_eq(d.tbytes[2].flags, PROTO_TOK_OFF);
    ck_assert_int_eq(d.tbytes[2].r_bytes, 0);
    m.tbytes[0].r_bytes = -1; /* a grant is never negative */
    ck_assert_int_eq(encode_rc(&m), -EINVAL);
    proto_msg_clear(&m);
    proto_msg_clear(&d);

    msg_start(&m, &d, PROTO_REPORT, "n1");
    m.period = 7;
    m.table = 1;
    m.peer_table = 1;
    m.served_bytes = 123456;
    ck_assert_int_eq(proto_msg_reserve_bytes(&m, 1), 0);
    m.nbytes = 1;
    m.rbytes[0] = (proto_report_bytes_t){.bucket = 0, .arrivals_interval = 10,
                                         .arrivals_period = 20, .served = 30,
                                         .r_left = -4096, .l_left = PROTO_UNLIMITED};
    ck_assert_int_eq(roundtrip(&m, &d, NULL), 0);
    ck_assert_uint_eq(d.served_bytes, 123456);
    ck_assert_uint_eq(d.nbytes, 1);
    ck_assert_uint_eq(d.rbytes[0].served, 30);
    ck_assert_int_eq(d.rbytes[0].r_left, -4096);
    ck_assert_int_eq(d.rbytes[0].l_left, PROTO_UNLIMITED);
    m.rbytes[0].flags = 1;
    ck_assert_int_eq(encode_rc(&m), -EINVAL);
    proto_msg_clear(&m);
    proto_msg_clear(&d);

    msg_start(&m, &d, PROTO_HEARTBEAT, "n1");
    m.nbytes = 1;
    ck_assert_int_eq(encode_rc(&m), -EINVAL);
    ck_assert_int_eq(proto_msg_reserve_bytes(&m, 1), -EINVAL);
    proto_msg_clear(&m);
}
END_TEST

/* The shadow list (issue 28): an optional header string with the names
 * frame; what decodes re-encodes the same; a bad list, or one without
 * names, is refused; an old node's decoder ignores keys it does not know,
 * as this one ignores "shadow2". */
/* The tokens header's share list (issue 28): a round trip, the empty list,
 * garbage refused with the reason, not allowed outside tokens. */
START_TEST(test_proto_shares_list)
{
    proto_stats_t st = {0};
    static const struct {
        const char *hdr;
        proto_reason_t want;
    } cases[] = {
        {TOKHDR(",\"count\":0,\"shares\":\"1:5,7:100\""), PROTO_OK},
        {TOKHDR(",\"count\":0,\"shares\":\"\""), PROTO_OK},
        {TOKHDR(",\"count\":0,\"shares\":\"7:5,1:100\""), PROTO_E_RANGE}, /* order */
        {TOKHDR(",\"count\":0,\"shares\":\"1:0\""), PROTO_E_RANGE},       /* no token */
        {TOKHDR(",\"count\":0,\"shares\":\"1:5,\""), PROTO_E_RANGE},
        {TOKHDR(",\"count\":0,\"shares\":\"1\""), PROTO_E_RANGE},
        {TOKHDR(",\"count\":0,\"shares\":\"x:1\""), PROTO_E_RANGE},
        {TOKHDR(",\"count\":0,\"shares\":5"), PROTO_E_FIELD},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        proto_reason_t why = dec3(cases[i].hdr, "", 0, "", -1, &st);
        ck_assert_msg(why == cases[i].want, "case %zu: got %s, want %s", i, proto_reason_str(why),
                      proto_reason_str(cases[i].want));
    }
    proto_msg_t m, d;
    timed_start(&m, &d, PROTO_TOKENS, "n1");
    m.table = 3;
    static const proto_share_rec_t sr[3] = {{2, 10}, {5, 1}, {4000000000u, 1ll << 40}};
    m.has_shares = 1;
    m.shares = sr;
    m.nshares = 3;
    ck_assert_int_eq(roundtrip(&m, &d, &st), 0);
    ck_assert_int_eq(d.has_shares, 1);
    ck_assert_uint_eq(d.nshares, 3);
    for (int i = 0; i < 3; i++) {
        ck_assert_uint_eq(d.shares[i].bucket, sr[i].bucket);
        ck_assert_int_eq(d.shares[i].tokens, sr[i].tokens);
    }
    m.nshares = 0; /* the empty list travels: "clear them" */
    ck_assert_int_eq(roundtrip(&m, &d, &st), 0);
    ck_assert_int_eq(d.has_shares, 1);
    ck_assert_uint_eq(d.nshares, 0);
    m.has_shares = 0;
    ck_assert_int_eq(roundtrip(&m, &d, &st), 0);
    ck_assert_int_eq(d.has_shares, 0);
    /* The encoder refuses a bad list (not ascending). */
    static const proto_share_rec_t bad[2] = {{5, 1}, {2, 1}};
    m.has_shares = 1;
    m.shares = bad;
    m.nshares = 2;
    proto_enc_t e;
    proto_enc_init(&e);
    ck_assert_int_eq(proto_encode(&m, &e), -EINVAL);
    proto_enc_clear(&e);
    proto_msg_clear(&m);
    proto_msg_clear(&d);
}
END_TEST

START_TEST(test_proto_shadow_list)
{
    proto_stats_t st = {0};
    static const uint32_t w[2] = {1, 1};
#define W2 ",\"count\":1,\"names\":2,\"weights\":2"
    static const struct {
        const char *hdr;
        proto_reason_t want;
    } cases[] = {
        {TOKHDR(W2 ",\"shadow\":\"1\""), PROTO_OK},
        {TOKHDR(W2 ",\"shadow\":\"0,1\""), PROTO_OK},
        {TOKHDR(W2 ",\"shadow\":\"\""), PROTO_OK},
        {TOKHDR(W2 ",\"shadow2\":[1]"), PROTO_OK},
        {TOKHDR(W2 ",\"shadow\":\"2\""), PROTO_E_RANGE},   /* beyond the names */
        {TOKHDR(W2 ",\"shadow\":\"1,0\""), PROTO_E_RANGE}, /* not ascending */
        {TOKHDR(W2 ",\"shadow\":\"0,\""), PROTO_E_RANGE},
        {TOKHDR(W2 ",\"shadow\":\"01\""), PROTO_E_RANGE},
        {TOKHDR(W2 ",\"shadow\":1"), PROTO_E_FIELD},
    };
#undef W2
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        proto_reason_t why = dec_w(cases[i].hdr, w, 8, &st);
        ck_assert_msg(why == cases[i].want, "case %zu: got %s, want %s", i, proto_reason_str(why),
                      proto_reason_str(cases[i].want));
    }
    ck_assert_int_eq(dec3(TOKHDR(",\"count\":0,\"shadow\":\"0\""), "", 0, "", 0, &st),
                     PROTO_E_FIELD);
    /* Round trip through the encoder: the list arrives as sent. */
    proto_msg_t m, d;
    timed_start(&m, &d, PROTO_WELCOME, "n1");
    m.table = 3;
    m.peer_table = 7;
    set_names3(&m);
    static const uint32_t w3[] = {2, 1, 9};
    m.has_weights = 1;
    m.weights = w3;
    m.shadow = "0,2";
    ck_assert_int_eq(roundtrip(&m, &d, NULL), 0);
    ck_assert_str_eq(d.shadow, "0,2");
    proto_msg_clear(&d);
    m.shadow = "3"; /* beyond the names: not encoded */
    proto_enc_t e;
    proto_enc_init(&e);
    ck_assert_int_eq(proto_encode(&m, &e), -EINVAL);
    proto_enc_clear(&e);
}
END_TEST

/* The rules message (issue 27): version and text round trip (with an
 * epoch, an empty list); a welcome says which version follows; what is
 * refused: version 0, "rules" on another type, a missing text frame, a
 * text over PROTO_RULES_MAX. */
START_TEST(test_proto_rules_message)
{
    proto_msg_t m, d;
    proto_stats_t st = {0};
    msg_start(&m, &d, PROTO_RULES, "n1");
    const char *text = "[{\"user\":\"alice\",\"bucket\":\"alice\"}]";
    m.rules_version = 7;
    m.epoch = 3;
    m.rules_text = text;
    m.rules_len = strlen(text);
    ck_assert_int_eq(roundtrip(&m, &d, &st), 0);
    ck_assert_int_eq(d.type, PROTO_RULES);
    ck_assert_uint_eq(d.rules_version, 7);
    ck_assert_uint_eq(d.epoch, 3);
    ck_assert_uint_eq(d.rules_len, strlen(text));
    ck_assert_str_eq(d.rules_text, text);
    m.rules_text = "";
    m.rules_len = 0;
    ck_assert_int_eq(roundtrip(&m, &d, &st), 0);
    ck_assert_uint_eq(d.rules_len, 0);
    ck_assert_str_eq(d.rules_text, "");
    m.rules_version = 0;
    ck_assert_int_eq(encode_rc(&m), -EINVAL);
    m.rules_version = 1;
    m.rules_len = PROTO_RULES_MAX + 1;
    m.rules_text = text;
    ck_assert_int_eq(encode_rc(&m), -EINVAL);
    /* a welcome says which rules message follows; 0: none (absent) */
    proto_msg_init(&m);
    m.type = PROTO_WELCOME;
    strcpy(m.node, "n1");
    set_timing(&m);
    m.rules_version = 4;
    ck_assert_int_eq(roundtrip(&m, &d, &st), 0);
    ck_assert_uint_eq(d.rules_version, 4);
    m.rules_version = 0;
    ck_assert_int_eq(roundtrip(&m, &d, &st), 0);
    ck_assert_uint_eq(d.rules_version, 0);
    /* raw frames the decoder refuses */
    static const struct {
        const char *hdr;
        int frames;
        proto_reason_t why;
    } bad[] = {
        {"{\"v\":3,\"type\":\"rules\",\"node\":\"n1\",\"rules\":0}", 2, PROTO_E_RANGE},
        {"{\"v\":3,\"type\":\"rules\",\"node\":\"n1\"}", 2, PROTO_E_FIELD},
        {"{\"v\":3,\"type\":\"rules\",\"node\":\"n1\",\"rules\":1}", 1, PROTO_E_TRUNCATED},
        {"{\"v\":3,\"type\":\"rules\",\"node\":\"n1\",\"rules\":1}", 3, PROTO_E_FRAMES},
        {"{\"v\":3,\"type\":\"goodbye\",\"node\":\"n1\",\"rules\":1}", 1, PROTO_E_FIELD},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        proto_frame_t f[3] = {{bad[i].hdr, strlen(bad[i].hdr)}, {"[]", 2}, {"x", 1}};
        proto_reason_t why;
        ck_assert_int_eq(proto_decode(&d, f, (size_t)bad[i].frames, NULL, &why), -EPROTO);
        ck_assert_msg(why == bad[i].why, "case %zu: %s", i, proto_reason_str(why));
    }
    char *big = malloc(PROTO_RULES_MAX + 1);
    memset(big, ' ', PROTO_RULES_MAX + 1);
    const char *h = "{\"v\":3,\"type\":\"rules\",\"node\":\"n1\",\"rules\":1}";
    proto_frame_t f[2] = {{h, strlen(h)}, {big, PROTO_RULES_MAX + 1}};
    proto_reason_t why;
    ck_assert_int_eq(proto_decode(&d, f, 2, NULL, &why), -EPROTO);
    ck_assert_int_eq(why, PROTO_E_RANGE);
    free(big);
    proto_msg_clear(&d);
}
END_TEST

/* The who message (node -> controller, issue 27): one frame of text after
 * the header, empty allowed; over PROTO_WHO_MAX or a missing or extra
 * frame refused. */
START_TEST(test_proto_who_message)
{
    proto_msg_t m, d;
    proto_stats_t st = {0};
    msg_start(&m, &d, PROTO_WHO, "n1");
    const char *text = "{\"who\":[{\"bucket\":\"a\",\"id\":\"user:alice\"}],\"other\":[],\"dropped\":0}";
    m.who_text = text;
    m.who_len = strlen(text);
    ck_assert_int_eq(roundtrip(&m, &d, &st), 0);
    ck_assert_int_eq(d.type, PROTO_WHO);
    ck_assert_str_eq(proto_type_str(PROTO_WHO), "who");
    ck_assert_uint_eq(d.who_len, strlen(text));
    ck_assert_str_eq(d.who_text, text);
    ck_assert_ptr_null(d.rules_text);
    m.who_text = "";
    m.who_len = 0;
    ck_assert_int_eq(roundtrip(&m, &d, &st), 0);
    ck_assert_str_eq(d.who_text, "");
    m.who_len = PROTO_WHO_MAX + 1;
    m.who_text = text;
    ck_assert_int_eq(encode_rc(&m), -EINVAL);
    const char *h = "{\"v\":3,\"type\":\"who\",\"node\":\"n1\"}";
    proto_frame_t f[3] = {{h, strlen(h)}, {"{}", 2}, {"x", 1}};
    proto_reason_t why;
    ck_assert_int_eq(proto_decode(&d, f, 1, NULL, &why), -EPROTO);
    ck_assert_int_eq(why, PROTO_E_TRUNCATED);
    ck_assert_int_eq(proto_decode(&d, f, 3, NULL, &why), -EPROTO);
    ck_assert_int_eq(why, PROTO_E_FRAMES);
    char *big = malloc(PROTO_WHO_MAX + 1);
    memset(big, ' ', PROTO_WHO_MAX + 1);
    f[1] = (proto_frame_t){big, PROTO_WHO_MAX + 1};
    ck_assert_int_eq(proto_decode(&d, f, 2, NULL, &why), -EPROTO);
    ck_assert_int_eq(why, PROTO_E_RANGE);
    free(big);
    proto_msg_clear(&d);
}
END_TEST

/* Changed grants (issue 30): "renew" on a hello (can), a welcome (will)
 * and tokens (renews), "gseq" and "based" on tokens (based absent: every
 * record, and left out when it equals count), "regrant" on a report; the
 * encoder refuses based > count and out-of-range flags. */
START_TEST(test_proto_grants)
{
    proto_msg_t m, d;
    for (size_t w = 0; w < 2; w++) {
        hello_start(&m, &d, writer_nodes[w]);
        EXPECT_OPTIONAL(&m, &d, renew, 1, 1);
        m.renew = 0;
        m.has_names = 0;
        set_tokens(&m, 1, 3);
        for (size_t i = 0; i < 3; i++)
            m.tokens[i] = (proto_tokens_rec_t){.bucket = (uint32_t)i, .r_tokens = 1, .l_tokens = 2};
        m.gseq = 41;
        m.renew = 1;
        m.based = 2;
        rt(&m, &d);
        ck_assert_uint_eq(d.gseq, 41);
        ck_assert_int_eq(d.renew, 1);
        ck_assert_uint_eq(d.based, 2);
        ck_assert_uint_eq(d.count, 3);
        m.based = 3; /* every record: the key is left out, decoded as count */
        expect_in_header(&m, "based", 0);
        ck_assert_uint_eq(rt(&m, &d)->based, 3);
        m.based = 4;
        ck_assert_int_eq(encode_rc(&m), -EINVAL);
        m.based = 0;
        m.renew = 0; /* numbered, not renewing: every record is a base to no one */
        ck_assert_uint_eq(rt(&m, &d)->based, 3);
        ck_assert_int_eq(d.renew, 0);
        m.gseq = PROTO_MAX_COUNT + 1;
        ck_assert_int_eq(encode_rc(&m), -EINVAL);
        m.gseq = 0;
        m.regrant = 1; /* a controller never says it: left out */
        ck_assert_int_eq(rt(&m, &d)->regrant, 0);
        m.regrant = 0;
        proto_msg_clear(&m);
        proto_msg_clear(&d);
        hello_start(&m, &d, writer_nodes[w]);
        m.type = PROTO_REPORT;
        m.has_names = 0;
        m.period = 3;
        EXPECT_OPTIONAL(&m, &d, regrant, 1, 1);
        m.regrant = 0;
        m.renew = 1; /* a report never renews: left out */
        ck_assert_int_eq(rt(&m, &d)->renew, 0);
        proto_msg_clear(&d);
        proto_msg_clear(&m);
    }
}
END_TEST


/* The in-flight figures of a report (issue 25): "inflight" a share list of
 * bucket:count, "base_us" the node's unloaded backend latency; both
 * optional, report only, refused when garbled, out of range or on another
 * type. */
START_TEST(test_proto_inflight)
{
    proto_stats_t st = {0};
    static const struct {
        const char *hdr;
        proto_reason_t want;
    } cases[] = {
        {REPHDR(",\"inflight\":\"0:4,9:16\",\"base_us\":800"), PROTO_OK},
        {REPHDR(",\"inflight\":\"\""), PROTO_OK},
        {REPHDR(",\"base_us\":1000000000"), PROTO_OK},
        {REPHDR(",\"inflight\":\"9:4,0:16\""), PROTO_E_RANGE}, /* not ascending */
        {REPHDR(",\"inflight\":\"3:0\""), PROTO_E_RANGE},      /* 0 is never said */
        {REPHDR(",\"inflight\":\"3:\""), PROTO_E_RANGE},
        {REPHDR(",\"inflight\":\"3:4,\""), PROTO_E_RANGE},
        {REPHDR(",\"inflight\":\"-3:4\""), PROTO_E_RANGE},
        {REPHDR(",\"inflight\":4"), PROTO_E_FIELD},
        {REPHDR(",\"base_us\":0"), PROTO_E_RANGE},
        {REPHDR(",\"base_us\":1000000001"), PROTO_E_RANGE},
        {REPHDR(",\"base_us\":-5"), PROTO_E_RANGE},
        {REPHDR(",\"base_us\":\"800\""), PROTO_E_FIELD},
        {HELLOHDR(",\"inflight\":\"0:4\""), PROTO_E_FIELD},
        {HELLOHDR(",\"base_us\":800"), PROTO_E_FIELD},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        proto_reason_t why = DEC_EMPTY(cases[i].hdr);
        ck_assert_msg(why == cases[i].want, "case %zu: got %s, want %s", i, proto_reason_str(why),
                      proto_reason_str(cases[i].want));
    }
    static const proto_share_rec_t fl[3] = {{0, 4}, {7, 1}, {4000000000u, PROTO_MAX_COUNT}};
    proto_msg_t m, d;
    for (size_t w = 0; w < 2; w++) {
        msg_start(&m, &d, PROTO_REPORT, writer_nodes[w]);
        m.period = 3;
        m.table = 1;
        ck_assert_int_eq(rt(&m, &d)->has_inflight, 0); /* absent: not said */
        ck_assert_uint_eq(d.base_us, 0);
        m.has_inflight = 1;
        m.inflight = fl;
        m.ninflight = 3;
        m.base_us = 812;
        ck_assert_int_eq(rt(&m, &d)->has_inflight, 1);
        ck_assert_uint_eq(d.ninflight, 3);
        ck_assert_uint_eq(d.base_us, 812);
        for (int i = 0; i < 3; i++) {
            ck_assert_uint_eq(d.inflight[i].bucket, fl[i].bucket);
            ck_assert_int_eq(d.inflight[i].tokens, fl[i].tokens);
        }
        /* The encoder refuses a bad list, a base out of range, either on
         * another type. */
        static const proto_share_rec_t bad[2] = {{5, 1}, {2, 1}};
        m.inflight = bad;
        m.ninflight = 2;
        ck_assert_int_eq(encode_rc(&m), -EINVAL);
        m.inflight = fl;
        m.ninflight = 3;
        m.base_us = (uint64_t)PROTO_BASE_US_MAX + 1;
        ck_assert_int_eq(encode_rc(&m), -EINVAL);
        m.base_us = 812;
        m.type = PROTO_HEARTBEAT;
        ck_assert_int_eq(encode_rc(&m), -EINVAL);
        proto_msg_clear(&d);
    }
}
END_TEST

/* Decodes a header (a C string) and a names frame of `len` bytes; returns
 * the reason, and m->bad_at is what the decoder left there. */
static proto_reason_t dec_part(proto_msg_t *m, const char *hdr, const void *names, size_t len)
{
    proto_frame_t f[2] = {{hdr, strlen(hdr)}, {names, len}};
    proto_reason_t why = PROTO_OK;
    proto_decode(m, f, 2, NULL, &why);
    return why;
}

/* Names in parts: the names message, a first part in hello and welcome,
 * peer_names; garbage refused with what and where. */
START_TEST(test_proto_name_parts)
{
    proto_msg_t m, d;
    static const uint32_t w3[] = {5, 6, 7};
    msg_start(&m, &d, PROTO_NAMES, "n1");
    m.table = 7;
    set_names3(&m);
    m.names_at = 3;
    m.names_of = 10;
    m.has_weights = 1;
    m.weights = w3;
    m.shadow = "1";
    ck_assert_int_eq(roundtrip(&m, &d, NULL), 0);
    ck_assert_int_eq(d.type, PROTO_NAMES);
    ck_assert_uint_eq(d.table, 7);
    ck_assert_uint_eq(d.names_at, 3);
    ck_assert_uint_eq(d.names_of, 10);
    ck_assert_uint_eq(d.nnames, 3);
    ck_assert_str_eq(d.names[2], "blue");
    ck_assert_uint_eq(d.weights[1], 6);
    ck_assert_str_eq(d.shadow, "1");
    /* the encoder refuses what the decoder would */
    m.names_at = 8; /* 8 + 3 > 10 */
    ck_assert_int_eq(encode_rc(&m), -EINVAL);
    m.names_at = 0;
    m.names_of = 0;
    ck_assert_int_eq(encode_rc(&m), -EINVAL);
    m.names_of = 3;
    m.nnames = 0;
    ck_assert_int_eq(encode_rc(&m), -EINVAL);
    proto_msg_clear(&d);

    /* a hello and a welcome with a first part; peer_names both ways */
    hello_start(&m, &d, "n1");
    set_names3(&m);
    m.names_of = 1000000;
    m.parts = 1;
    ck_assert_int_eq(roundtrip(&m, &d, NULL), 0);
    ck_assert_uint_eq(d.names_of, 1000000);
    ck_assert_uint_eq(d.names_at, 0);
    ck_assert_int_eq(d.parts, 1);
    ck_assert_uint_eq(d.nnames, 3);
    m.names_at = 1; /* a hello's part is the first */
    ck_assert_int_eq(encode_rc(&m), -EINVAL);
    m.names_at = 0;
    m.names_of = 0;
    m.parts = 0;
    ck_assert_int_eq(roundtrip(&m, &d, NULL), 0);
    ck_assert_uint_eq(d.names_of, 0); /* a whole table, as before */
    ck_assert_int_eq(d.parts, 0);
    proto_msg_clear(&d);
    timed_start(&m, &d, PROTO_WELCOME, "n1");
    m.table = 2;
    m.peer_table = 9;
    set_names3(&m);
    m.names_of = 4;
    m.parts = 1;
    m.has_peer_names = 1;
    m.peer_names = 0;
    ck_assert_int_eq(roundtrip(&m, &d, NULL), 0);
    ck_assert_uint_eq(d.names_of, 4);
    ck_assert_int_eq(d.has_peer_names, 1);
    ck_assert_uint_eq(d.peer_names, 0);
    m.has_peer_names = 0;
    ck_assert_int_eq(roundtrip(&m, &d, NULL), 0);
    ck_assert_int_eq(d.has_peer_names, 0);
    proto_msg_clear(&d);

    /* a part bigger than a part may be */
    static char big[PROTO_PART_BYTES + 16];
    static const char *bign[2];
    memset(big, 'x', sizeof big);
    big[PROTO_NAME_MAX] = '\0';
    bign[0] = big;
    msg_start(&m, &d, PROTO_NAMES, "n1");
    m.table = 1;
    m.has_names = 1;
    m.names = bign;
    m.nnames = 1;
    m.names_of = 300;
    ck_assert_int_eq(encode_rc(&m), 0);
    const char **many = calloc(300, sizeof *many);
    char (*nm)[PROTO_NAME_MAX + 1] = calloc(300, sizeof *nm);
    ck_assert(many && nm);
    for (int i = 0; i < 300; i++) {
        memset(nm[i], 'a', PROTO_NAME_MAX - 3);
        snprintf(nm[i] + PROTO_NAME_MAX - 3, 4, "%03d", i);
        many[i] = nm[i];
    }
    m.names = many;
    m.nnames = 300; /* 300 x 251 bytes > 64 KiB */
    ck_assert_int_eq(encode_rc(&m), -EINVAL);
    /* at most PROTO_PART_NAMES names, however short */
    const char **shortn = calloc(PROTO_PART_NAMES + 1, sizeof *shortn);
    char (*sn)[8] = calloc(PROTO_PART_NAMES + 1, sizeof *sn);
    ck_assert(shortn && sn);
    for (unsigned i = 0; i <= PROTO_PART_NAMES; i++) {
        snprintf(sn[i], sizeof sn[i], "%u", i);
        shortn[i] = sn[i];
    }
    const char **keep = m.names;
    m.names = shortn;
    m.nnames = PROTO_PART_NAMES + 1;
    m.names_of = PROTO_PART_NAMES + 1;
    ck_assert_int_eq(encode_rc(&m), -EINVAL);
    ck_assert_uint_eq(proto_part_len(shortn, PROTO_PART_NAMES + 1, 0), PROTO_PART_NAMES);
    ck_assert_uint_eq(proto_part_len(shortn, PROTO_PART_NAMES + 1, PROTO_PART_NAMES), 1);
    ck_assert_uint_eq(proto_part_len(keep, 300, 0), PROTO_PART_BYTES / (PROTO_NAME_MAX + 1));
    m.nnames = PROTO_PART_NAMES;
    ck_assert_int_eq(encode_rc(&m), 0);
    free(shortn);
    free(sn);
    m.names = keep;
    m.nnames = 300;
    m.names_of = 0; /* not a part: any size, as before (a tokens or welcome) */
    m.type = PROTO_WELCOME;
    set_timing(&m);
    ck_assert_int_eq(encode_rc(&m), 0);
    free(many);
    free(nm);

    /* garbage, with what and where */
    const char *H = "{\"v\":3,\"type\":\"names\",\"node\":\"n1\",\"table\":1,\"names_at\":0,"
                    "\"names_of\":2,\"names\":2}";
    ck_assert_int_eq(dec_part(&d, H, "a\0b\0", 4), PROTO_OK);
    ck_assert_int_eq(dec_part(&d, H, "ab\0ab\0", 6), PROTO_E_NAMES); /* duplicate */
    ck_assert_uint_eq(d.bad_at, 3);
    ck_assert_int_eq(dec_part(&d, H, "ab\0a b\0", 7), PROTO_E_NAMES); /* a space */
    ck_assert_uint_eq(d.bad_at, 3);
    ck_assert_int_eq(dec_part(&d, H, "ab\0ab", 5), PROTO_E_TRUNCATED);
    ck_assert_uint_eq(d.bad_at, 5);
    ck_assert_int_eq(dec_part(&d, H, "ab\0", 3), PROTO_E_COUNT);
    ck_assert_int_eq(dec_part(&d, "{\"v\":3,\"type\":\"names\",\"node\":\"n1\",\"table\":1,"
                                  "\"names_at\":1,\"names_of\":2,\"names\":2}", "a\0b\0", 4),
                     PROTO_E_RANGE);
    ck_assert_int_eq(dec_part(&d, "{\"v\":3,\"type\":\"names\",\"node\":\"n1\",\"table\":1,"
                                  "\"names_of\":2,\"names\":2}", "a\0b\0", 4),
                     PROTO_E_FIELD); /* no names_at */
    ck_assert_int_eq(dec_part(&d, "{\"v\":3,\"type\":\"names\",\"node\":\"n1\",\"table\":0,"
                                  "\"names_at\":0,\"names_of\":2,\"names\":2}", "a\0b\0", 4),
                     PROTO_E_RANGE); /* table 0 */
    ck_assert_int_eq(dec_part(&d, "{\"v\":3,\"type\":\"names\",\"node\":\"n1\",\"table\":1,"
                                  "\"names_at\":0,\"names_of\":0,\"names\":2}", "a\0b\0", 4),
                     PROTO_E_RANGE);
    ck_assert_int_eq(dec_part(&d, "{\"v\":3,\"type\":\"hello\",\"node\":\"n1\",\"capacity\":1,"
                                  "\"table\":1,\"names_at\":0,\"names_of\":2,\"names\":2}",
                              "a\0b\0", 4),
                     PROTO_E_FIELD); /* names_at: names messages only */
    ck_assert_int_eq(dec_part(&d, "{\"v\":3,\"type\":\"hello\",\"node\":\"n1\",\"capacity\":1,"
                                  "\"table\":1,\"peer_names\":3,\"names\":2}", "a\0b\0", 4),
                     PROTO_E_FIELD); /* peer_names: not in a hello */
    ck_assert_int_eq(dec_part(&d, "{\"v\":3,\"type\":\"hello\",\"node\":\"n1\",\"capacity\":1,"
                                  "\"table\":1,\"parts\":2,\"names\":2}", "a\0b\0", 4),
                     PROTO_E_RANGE);
    char *frame = malloc(PROTO_PART_BYTES + 2);
    ck_assert(frame);
    memset(frame, 'a', PROTO_PART_BYTES + 2);
    frame[PROTO_PART_BYTES - 1] = frame[PROTO_PART_BYTES + 1] = '\0';
    ck_assert_int_eq(dec_part(&d, H, frame, PROTO_PART_BYTES + 2), PROTO_E_RANGE);
    ck_assert_uint_eq(d.bad_at, PROTO_PART_BYTES);
    free(frame);
    /* a report with peer_names; a report may not carry a part */
    proto_msg_clear(&m);
    proto_msg_clear(&d);
    hello_start(&m, &d, "n1");
    m.type = PROTO_REPORT;
    m.has_names = 0;
    m.period = 3;
    m.peer_table = 4;
    m.has_peer_names = 1;
    m.peer_names = 12345;
    ck_assert_int_eq(roundtrip(&m, &d, NULL), 0);
    ck_assert_uint_eq(d.peer_names, 12345);
    ck_assert_int_eq(d.has_peer_names, 1);
    set_names3(&m);
    m.names_of = 9; /* not a part's type: left out, the frame is the table */
    ck_assert_int_eq(roundtrip(&m, &d, NULL), 0);
    ck_assert_uint_eq(d.names_of, 0);
    proto_msg_clear(&d);
    proto_msg_clear(&m);
}
END_TEST


int main(void)
{
    const TTest *const tests[] = {
        test_proto_grants,
        test_proto_roundtrip_hello, test_proto_roundtrip_welcome, test_proto_roundtrip_report,
        test_proto_roundtrip_tokens, test_proto_roundtrip_small, test_proto_encode_rejects_invalid,
        test_proto_compact_records, test_proto_reject_reasons, test_proto_weights_rejected,
        test_proto_shadow_list, test_proto_shares_list,
        test_proto_epoch, test_proto_follows, test_proto_lease, test_proto_shards, test_proto_instance, test_proto_fallback, test_proto_optional_field_rules, test_proto_node_id,
        test_proto_fixtures, test_proto_fuzz_mutations, test_proto_flat_parser_agrees, test_proto_zmq_router_dealer,
        test_proto_bytes_records, test_proto_rules_message, test_proto_who_message, test_proto_sparse, test_proto_basis, test_proto_predict,
        test_proto_inflight, test_proto_name_parts
    };
    return testlib_run_tests("proto", tests, sizeof tests / sizeof tests[0]);
}
