/* proto.c - the bqos control protocol codec: JSON header frame plus packed
 * little-endian record frames, with strict, counted rejection of bad input. */
#include "common/proto.h"

#include <endian.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <zmq.h>

#define MAX_FRAMES PROTO_MAX_FRAMES /* header, names, weights, records */
#define RECV_MAX_FRAMES (MAX_FRAMES + 2) /* identity + frames + one extra to detect excess */
#define MAX_INTERVALS 100000u
#define MAX_PERIOD_MS 86400000u
#define MAX_BUSY 1e12

static const char *const type_names[] = {
    [PROTO_HELLO] = "hello",         [PROTO_WELCOME] = "welcome",
    [PROTO_REPORT] = "report",       [PROTO_TOKENS] = "tokens",
    [PROTO_HEARTBEAT] = "heartbeat", [PROTO_GOODBYE] = "goodbye",
    [PROTO_ERROR] = "error",
};
#define NTYPES ((int)(sizeof type_names / sizeof type_names[0]))

static const char *const reason_names[PROTO_E__COUNT] = {
    [PROTO_OK] = "ok",
    [PROTO_E_TRUNCATED] = "truncated",
    [PROTO_E_VERSION] = "version",
    [PROTO_E_TYPE] = "type",
    [PROTO_E_COUNT] = "count",
    [PROTO_E_RANGE] = "range",
    [PROTO_E_JSON] = "json",
    [PROTO_E_FIELD] = "field",
    [PROTO_E_NAMES] = "names",
    [PROTO_E_FRAMES] = "frames",
    [PROTO_E_UNKNOWN_NODE] = "unknown_node",
    [PROTO_E_TABLE] = "table",
};

const char *proto_reason_str(proto_reason_t r)
{
    if ((int)r < 0 || r >= PROTO_E__COUNT)
        return "invalid";
    return reason_names[r];
}

const char *proto_type_str(proto_type_t t)
{
    if ((int)t <= 0 || (int)t >= NTYPES)
        return NULL;
    return type_names[t];
}

void proto_stats_note(proto_stats_t *st, proto_reason_t r)
{
    if (!st)
        return;
    if (r == PROTO_OK) {
        st->ok++;
        return;
    }
    if ((int)r < 0 || r >= PROTO_E__COUNT)
        return;
    st->rejected[r]++;
    st->rejected_total++;
}

int proto_name_check(const char *name, size_t len)
{
    if (!name || len == 0 || len > PROTO_NAME_MAX)
        return -EINVAL;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)name[i];
        if (c <= 0x20 || c == 0x7f)
            return -EINVAL;
    }
    return 0;
}

/* ---- message storage ---- */

void proto_msg_init(proto_msg_t *m)
{
    memset(m, 0, sizeof *m);
}

void proto_msg_clear(proto_msg_t *m)
{
    if (!m)
        return;
    free(m->report);
    free(m->tokens);
    free(m->names_own);
    free(m->namebuf);
    free(m->weights_own);
    proto_msg_init(m);
}

/* Grows *p to hold n elements of size sz; *cap tracks the capacity. */
static int grow(void *pp, size_t *cap, size_t n, size_t sz)
{
    void **p = pp;
    if (n <= *cap && *p)
        return 0;
    size_t want = *cap ? *cap : 16;
    while (want < n)
        want *= 2;
    if (want > SIZE_MAX / sz)
        return -ENOMEM;
    void *q = realloc(*p, want * sz);
    if (!q)
        return -ENOMEM;
    *p = q;
    *cap = want;
    return 0;
}

int proto_msg_reserve(proto_msg_t *m, size_t n, size_t nnames)
{
    int rc;
    if (n > 0) {
        if (m->type == PROTO_REPORT)
            rc = grow(&m->report, &m->cap_report, n, sizeof *m->report);
        else if (m->type == PROTO_TOKENS)
            rc = grow(&m->tokens, &m->cap_tokens, n, sizeof *m->tokens);
        else
            return -EINVAL;
        if (rc)
            return rc;
    }
    if (nnames > 0) {
        if ((rc = grow(&m->names_own, &m->cap_names, nnames, sizeof *m->names_own)))
            return rc;
        m->names = m->names_own;
    }
    return 0;
}

/* Zeroes every field except the owned buffers. */
static void msg_reset(proto_msg_t *m)
{
    proto_msg_t keep = *m;
    memset(m, 0, sizeof *m);
    m->report = keep.report;
    m->tokens = keep.tokens;
    m->names_own = keep.names_own;
    m->namebuf = keep.namebuf;
    m->cap_report = keep.cap_report;
    m->cap_tokens = keep.cap_tokens;
    m->cap_names = keep.cap_names;
    m->cap_namebuf = keep.cap_namebuf;
    m->weights_own = keep.weights_own;
    m->cap_weights = keep.cap_weights;
}

/* ---- little-endian records ---- */

static inline void put32(unsigned char *p, uint32_t v)
{
    v = htole32(v);
    memcpy(p, &v, 4);
}
static inline void put64(unsigned char *p, uint64_t v)
{
    v = htole64(v);
    memcpy(p, &v, 8);
}
static inline uint32_t get32(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return le32toh(v);
}
static inline uint64_t get64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return le64toh(v);
}

/* On a little-endian host the in-memory records have exactly the wire
 * layout, so whole arrays move with one memcpy and are validated after. */
#if __BYTE_ORDER == __LITTLE_ENDIAN
#define WIRE_LAYOUT 1
_Static_assert(sizeof(proto_report_rec_t) == PROTO_REPORT_REC_SIZE, "report record layout");
_Static_assert(sizeof(proto_tokens_rec_t) == PROTO_TOKENS_REC_SIZE, "tokens record layout");
#else
#define WIRE_LAYOUT 0
#endif
_Static_assert(PROTO_TOK_UNLIMITED == 1, "compact tokens decode stores the flag as 0 or 1");

/* What each type carries. */
static int type_has_records(proto_type_t t)
{
    return t == PROTO_REPORT || t == PROTO_TOKENS;
}
static int type_may_have_names(proto_type_t t)
{
    return t == PROTO_HELLO || t == PROTO_WELCOME || t == PROTO_REPORT || t == PROTO_TOKENS;
}
static int type_may_have_weights(proto_type_t t)
{
    return t == PROTO_WELCOME || t == PROTO_TOKENS;
}
static int type_has_timing(proto_type_t t)
{
    return t == PROTO_WELCOME || t == PROTO_TOKENS;
}
static int type_may_have_timing(proto_type_t t)
{
    return t == PROTO_HEARTBEAT || t == PROTO_HELLO;
}

/* ---- encoder ---- */

void proto_enc_init(proto_enc_t *e)
{
    memset(e, 0, sizeof *e);
}

void proto_enc_clear(proto_enc_t *e)
{
    if (!e)
        return;
    for (int i = 0; i < MAX_FRAMES; i++)
        free(e->data[i]);
    proto_enc_init(e);
}

/* Makes frame i of e `len` bytes long (buffer grown, contents kept). */
static int frame_at(proto_enc_t *e, size_t i, size_t len, unsigned char **out)
{
    if (len > e->cap[i] || !e->data[i]) {
        size_t want = len < 64 ? 64 : len;
        unsigned char *q = realloc(e->data[i], want);
        if (!q)
            return -ENOMEM;
        e->data[i] = q;
        e->cap[i] = want;
    }
    e->len[i] = len;
    *out = e->data[i];
    return 0;
}

/* Appends a frame of `len` bytes. */
static int enc_frame(proto_enc_t *e, size_t len, unsigned char **out)
{
    int rc = frame_at(e, e->nframes, len, out);
    if (rc == 0)
        e->nframes++;
    return rc;
}

static int timing_ok(const proto_msg_t *m)
{
    return m->intervals >= 1 && m->intervals <= MAX_INTERVALS && m->interval < m->intervals &&
           m->period_ms >= 1 && m->period_ms <= MAX_PERIOD_MS && m->remaining_ms <= m->period_ms &&
           m->period <= PROTO_MAX_COUNT;
}

static int count_ok(uint64_t v)
{
    return v <= PROTO_MAX_COUNT;
}

static int tok_ok(int64_t v, int unlimited_ok)
{
    return (v >= 0 && (uint64_t)v <= PROTO_MAX_COUNT) || (unlimited_ok && v == PROTO_UNLIMITED);
}

/* Validates a message for encoding.  Returns 0 or -EINVAL. */
static int enc_check(const proto_msg_t *m)
{
    if (!proto_type_str(m->type))
        return -EINVAL;
    if (proto_name_check(m->node, strnlen(m->node, sizeof m->node)) != 0)
        return -EINVAL;
    if (m->seq > (uint64_t)INT64_MAX)
        return -EINVAL;
    if ((type_has_timing(m->type) || (type_may_have_timing(m->type) && m->has_timing)) && !timing_ok(m))
        return -EINVAL;
    if (m->has_names && !type_may_have_names(m->type))
        return -EINVAL;
    if (m->has_names && (m->nnames > PROTO_MAX_RECORDS || (m->nnames && !m->names)))
        return -EINVAL;
    if (m->has_weights) {
        if (!m->has_names || !type_may_have_weights(m->type) || (m->nnames && !m->weights))
            return -EINVAL;
        for (size_t i = 0; i < m->nnames; i++)
            if (m->weights[i] < 1 || m->weights[i] > PROTO_WEIGHT_MAX)
                return -EINVAL;
    }
    switch (m->type) {
    case PROTO_HELLO:
        if (!count_ok(m->capacity) || m->table == 0)
            return -EINVAL;
        break;
    case PROTO_WELCOME:
        if (m->has_names && m->table == 0)
            return -EINVAL;
        break;
    case PROTO_REPORT:
        if (m->period > PROTO_MAX_COUNT || m->table == 0 || !count_ok(m->completions) ||
            !count_ok(m->dispatched) || !(m->busy_seconds >= 0 && m->busy_seconds <= MAX_BUSY) ||
            m->remaining_ms > MAX_PERIOD_MS || m->interval >= MAX_INTERVALS)
            return -EINVAL;
        break;
    case PROTO_TOKENS:
        if (m->table == 0)
            return -EINVAL;
        break;
    case PROTO_ERROR:
        if (m->code[0] == '\0')
            return -EINVAL;
        break;
    default:
        break;
    }
    if (type_has_records(m->type)) {
        if (m->count > PROTO_MAX_RECORDS)
            return -EINVAL;
        if (m->count && !(m->type == PROTO_REPORT ? (void *)m->report : (void *)m->tokens))
            return -EINVAL;
    }
    if (m->has_names) {
        for (size_t i = 0; i < m->nnames; i++)
            if (!m->names[i] || proto_name_check(m->names[i], strnlen(m->names[i], PROTO_NAME_MAX + 1)))
                return -EINVAL;
    }
    return 0;
}

static int jset(json_t *o, const char *k, json_t *v)
{
    return v ? json_object_set_new(o, k, v) : -1;
}

static json_t *enc_header(const proto_msg_t *m, int wide)
{
    json_t *h = json_object();
    if (!h)
        return NULL;
    int bad = 0;
    bad |= jset(h, "v", json_integer(PROTO_VERSION));
    bad |= jset(h, "type", json_string(type_names[m->type]));
    bad |= jset(h, "node", json_string(m->node));
    if (m->seq)
        bad |= jset(h, "seq", json_integer((json_int_t)m->seq));
    if (type_has_timing(m->type) || (type_may_have_timing(m->type) && m->has_timing)) {
        bad |= jset(h, "period", json_integer((json_int_t)m->period));
        bad |= jset(h, "interval", json_integer(m->interval));
        bad |= jset(h, "intervals", json_integer(m->intervals));
        bad |= jset(h, "period_ms", json_integer(m->period_ms));
        bad |= jset(h, "remaining_ms", json_integer(m->remaining_ms));
    }
    if (m->has_names)
        bad |= jset(h, "names", json_integer((json_int_t)m->nnames));
    if (m->has_weights)
        bad |= jset(h, "weights", json_integer((json_int_t)m->nnames));
    switch (m->type) {
    case PROTO_HELLO:
        bad |= jset(h, "capacity", json_integer((json_int_t)m->capacity));
        bad |= jset(h, "table", json_integer(m->table));
        if (!m->has_names)
            bad |= jset(h, "names", json_integer(0));
        break;
    case PROTO_WELCOME:
        bad |= jset(h, "table", json_integer(m->table));
        bad |= jset(h, "peer_table", json_integer(m->peer_table));
        break;
    case PROTO_REPORT:
        bad |= jset(h, "period", json_integer((json_int_t)m->period));
        bad |= jset(h, "interval", json_integer(m->interval));
        bad |= jset(h, "remaining_ms", json_integer(m->remaining_ms));
        bad |= jset(h, "table", json_integer(m->table));
        bad |= jset(h, "peer_table", json_integer(m->peer_table));
        bad |= jset(h, "count", json_integer((json_int_t)m->count));
        bad |= jset(h, "completions", json_integer((json_int_t)m->completions));
        bad |= jset(h, "dispatched", json_integer((json_int_t)m->dispatched));
        bad |= jset(h, "busy", json_real(m->busy_seconds));
        if (wide)
            bad |= jset(h, "wide", json_integer(1));
        break;
    case PROTO_TOKENS:
        bad |= jset(h, "table", json_integer(m->table));
        bad |= jset(h, "peer_table", json_integer(m->peer_table));
        bad |= jset(h, "count", json_integer((json_int_t)m->count));
        if (wide)
            bad |= jset(h, "wide", json_integer(1));
        break;
    case PROTO_HEARTBEAT:
        if (m->peer_table)
            bad |= jset(h, "peer_table", json_integer(m->peer_table));
        break;
    case PROTO_ERROR:
        bad |= jset(h, "code", json_stringn(m->code, strnlen(m->code, sizeof m->code)));
        if (m->text[0])
            bad |= jset(h, "text", json_stringn(m->text, strnlen(m->text, sizeof m->text)));
        break;
    default:
        break;
    }
    if (bad) {
        json_decref(h);
        return NULL;
    }
    return h;
}

/* A JSON header written directly into a buffer: the common case, without
 * jansson's allocations.  Strings that are not plain ASCII make it give up
 * (returns -1) and the caller falls back to jansson, which validates and
 * escapes UTF-8. */
typedef struct {
    char *buf;
    size_t n, cap;
    int bad;
} hw_t;

static void hw_raw(hw_t *w, const char *s, size_t l)
{
    if (w->bad || w->n + l > w->cap) {
        w->bad = 1;
        return;
    }
    memcpy(w->buf + w->n, s, l);
    w->n += l;
}

static void hw_key(hw_t *w, const char *k)
{
    if (w->n > 1)
        hw_raw(w, ",", 1);
    hw_raw(w, "\"", 1);
    hw_raw(w, k, strlen(k));
    hw_raw(w, "\":", 2);
}

static void hw_u64(hw_t *w, const char *k, uint64_t v)
{
    char t[24];
    size_t i = sizeof t;
    do { /* snprintf costs ~20 times more */
        t[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    hw_key(w, k);
    hw_raw(w, t + i, sizeof t - i);
}

static void hw_str(hw_t *w, const char *k, const char *s, size_t len)
{
    hw_key(w, k);
    hw_raw(w, "\"", 1);
    for (size_t i = 0; i < len && !w->bad; i++) {
        unsigned char c = (unsigned char)s[i];
        char t[8];
        if (c >= 0x80) {
            w->bad = 1; /* let jansson check the UTF-8 */
        } else if (c == '"' || c == '\\') {
            t[0] = '\\';
            t[1] = (char)c;
            hw_raw(w, t, 2);
        } else if (c < 0x20 || c == 0x7f) {
            snprintf(t, sizeof t, "\\u%04x", c);
            hw_raw(w, t, 6);
        } else {
            hw_raw(w, (const char *)&s[i], 1);
        }
    }
    hw_raw(w, "\"", 1);
}

/* Writes m's header (same fields as enc_header) into buf.  Returns its
 * length, or -1 to ask for the jansson path. */
static ssize_t fast_header(const proto_msg_t *m, int wide, char *buf, size_t cap)
{
    hw_t w = {buf, 0, cap, 0};
    hw_raw(&w, "{", 1);
    hw_u64(&w, "v", PROTO_VERSION);
    hw_str(&w, "type", type_names[m->type], strlen(type_names[m->type]));
    hw_str(&w, "node", m->node, strlen(m->node));
    if (m->seq)
        hw_u64(&w, "seq", m->seq);
    if (type_has_timing(m->type) || (type_may_have_timing(m->type) && m->has_timing)) {
        hw_u64(&w, "period", m->period);
        hw_u64(&w, "interval", m->interval);
        hw_u64(&w, "intervals", m->intervals);
        hw_u64(&w, "period_ms", m->period_ms);
        hw_u64(&w, "remaining_ms", m->remaining_ms);
    }
    if (m->has_names)
        hw_u64(&w, "names", m->nnames);
    if (m->has_weights)
        hw_u64(&w, "weights", m->nnames);
    switch (m->type) {
    case PROTO_HELLO:
        hw_u64(&w, "capacity", m->capacity);
        hw_u64(&w, "table", m->table);
        if (!m->has_names)
            hw_u64(&w, "names", 0);
        break;
    case PROTO_WELCOME:
        hw_u64(&w, "table", m->table);
        hw_u64(&w, "peer_table", m->peer_table);
        break;
    case PROTO_REPORT: {
        hw_u64(&w, "period", m->period);
        hw_u64(&w, "interval", m->interval);
        hw_u64(&w, "remaining_ms", m->remaining_ms);
        hw_u64(&w, "table", m->table);
        hw_u64(&w, "peer_table", m->peer_table);
        hw_u64(&w, "count", m->count);
        hw_u64(&w, "completions", m->completions);
        hw_u64(&w, "dispatched", m->dispatched);
        char t[40];
        int l = snprintf(t, sizeof t, "%.17g", m->busy_seconds);
        hw_key(&w, "busy");
        hw_raw(&w, t, (size_t)l);
        if (wide)
            hw_u64(&w, "wide", 1);
        break;
    }
    case PROTO_TOKENS:
        hw_u64(&w, "table", m->table);
        hw_u64(&w, "peer_table", m->peer_table);
        hw_u64(&w, "count", m->count);
        if (wide)
            hw_u64(&w, "wide", 1);
        break;
    case PROTO_HEARTBEAT:
        if (m->peer_table)
            hw_u64(&w, "peer_table", m->peer_table);
        break;
    case PROTO_ERROR:
        hw_str(&w, "code", m->code, strnlen(m->code, sizeof m->code));
        if (m->text[0])
            hw_str(&w, "text", m->text, strnlen(m->text, sizeof m->text));
        break;
    default:
        break;
    }
    hw_raw(&w, "}", 1);
    return w.bad ? -1 : (ssize_t)w.n;
}

/* The records' range checks.  *_fits() is the common case, true if the
 * record is valid and every value fits its compact field; it uses & and |
 * rather than && and || so that there is no branch to mispredict.
 * *_valid() is the full check, for records that do not fit. */
static int rep_fits(const proto_report_rec_t *r, uint64_t nb)
{
    uint64_t all = r->queued | r->arrivals_interval | r->arrivals_period | r->served_r |
                   r->served_l | r->served_o | (uint64_t)r->r_left;
    return ((all >> 32) == 0) & (r->bucket < nb) & ((r->flags | r->reserved) == 0) &
           (((uint64_t)r->l_left <= PROTO_COMPACT_MAX) | (r->l_left == PROTO_UNLIMITED));
}
static int rep_valid(const proto_report_rec_t *r, uint64_t nb)
{
    return count_ok(r->queued) && count_ok(r->arrivals_interval) &&
           count_ok(r->arrivals_period) && count_ok(r->served_r) && count_ok(r->served_l) &&
           count_ok(r->served_o) && tok_ok(r->r_left, 0) && tok_ok(r->l_left, 1) &&
           r->flags == 0 && r->reserved == 0 && r->bucket < nb;
}
static int tok_unlimited(const proto_tokens_rec_t *t)
{
    return ((t->flags & PROTO_TOK_UNLIMITED) != 0) | (t->l_tokens == PROTO_UNLIMITED);
}
static int tok_fits(const proto_tokens_rec_t *t, uint64_t nb)
{
    return ((uint64_t)t->r_tokens <= UINT32_MAX) & (t->bucket < nb) &
           ((t->flags & ~PROTO_TOK_UNLIMITED) == 0) &
           (tok_unlimited(t) | ((uint64_t)t->l_tokens <= PROTO_COMPACT_MAX));
}
static int tok_rec_valid(const proto_tokens_rec_t *t, uint64_t nb)
{
    return (t->flags & ~PROTO_TOK_UNLIMITED) == 0 && tok_ok(t->r_tokens, 0) &&
           (tok_unlimited(t) || tok_ok(t->l_tokens, 0)) && t->bucket < nb;
}

/* Writes compact records into p while checking them.  Returns 0, 1 if a
 * valid record does not fit (the message must go wide) or -EINVAL. */
static int enc_compact(const proto_msg_t *m, uint64_t nb, unsigned char *p)
{
    if (m->type == PROTO_REPORT) {
        for (size_t i = 0; i < m->count; i++, p += PROTO_REPORT_COMPACT_SIZE) {
            const proto_report_rec_t *r = &m->report[i];
            if (!rep_fits(r, nb))
                return rep_valid(r, nb) ? 1 : -EINVAL;
            put32(p, r->bucket);
            put32(p + 4, (uint32_t)r->queued);
            put32(p + 8, (uint32_t)r->arrivals_interval);
            put32(p + 12, (uint32_t)r->arrivals_period);
            put32(p + 16, (uint32_t)r->served_r);
            put32(p + 20, (uint32_t)r->served_l);
            put32(p + 24, (uint32_t)r->served_o);
            put32(p + 28, (uint32_t)r->r_left);
            /* all ones (PROTO_COMPACT_UNLIMITED) if unlimited, no branch */
            put32(p + 32, (uint32_t)r->l_left | -(uint32_t)(r->l_left == PROTO_UNLIMITED));
        }
        return 0;
    }
    for (size_t i = 0; i < m->count; i++, p += PROTO_TOKENS_COMPACT_SIZE) {
        const proto_tokens_rec_t *t = &m->tokens[i];
        if (!tok_fits(t, nb))
            return tok_rec_valid(t, nb) ? 1 : -EINVAL;
        put32(p, t->bucket);
        put32(p + 4, (uint32_t)t->r_tokens);
        put32(p + 8, (uint32_t)t->l_tokens | -(uint32_t)tok_unlimited(t));
    }
    return 0;
}

/* Checks every record and writes the wide layout.  Returns 0 or -EINVAL. */
static int enc_wide(const proto_msg_t *m, uint64_t nb, unsigned char *p)
{
    if (m->type == PROTO_REPORT) {
        for (size_t i = 0; i < m->count; i++)
            if (!rep_valid(&m->report[i], nb))
                return -EINVAL;
#if WIRE_LAYOUT
        if (m->count)
            memcpy(p, m->report, m->count * PROTO_REPORT_REC_SIZE);
#else
        for (size_t i = 0; i < m->count; i++, p += PROTO_REPORT_REC_SIZE) {
            const proto_report_rec_t *r = &m->report[i];
            put32(p, r->bucket);
            put32(p + 4, 0);
            put64(p + 8, r->queued);
            put64(p + 16, r->arrivals_interval);
            put64(p + 24, r->arrivals_period);
            put64(p + 32, r->served_r);
            put64(p + 40, r->served_l);
            put64(p + 48, r->served_o);
            put64(p + 56, (uint64_t)r->r_left);
            put64(p + 64, (uint64_t)r->l_left);
            put64(p + 72, 0);
        }
#endif
        return 0;
    }
    for (size_t i = 0; i < m->count; i++, p += PROTO_TOKENS_REC_SIZE) {
        const proto_tokens_rec_t *t = &m->tokens[i];
        if (!tok_rec_valid(t, nb))
            return -EINVAL;
        int unl = tok_unlimited(t);
        put32(p, t->bucket);
        put32(p + 4, unl ? PROTO_TOK_UNLIMITED : 0);
        put64(p + 8, (uint64_t)t->r_tokens);
        put64(p + 16, unl ? 0 : (uint64_t)t->l_tokens);
    }
    return 0;
}

/* Encodes m's records into frame `fi` of e: compact if m allows it and
 * every value fits, else wide (*wide set).  Returns 0, -EINVAL, -ENOMEM. */
static int enc_records(const proto_msg_t *m, proto_enc_t *e, size_t fi, int *wide)
{
    uint64_t nb = m->has_names ? m->nnames : UINT64_MAX;
    int rep = m->type == PROTO_REPORT;
    unsigned char *p;
    int rc;
    *wide = m->wide;
    if (!*wide) {
        size_t rs = rep ? PROTO_REPORT_COMPACT_SIZE : PROTO_TOKENS_COMPACT_SIZE;
        if ((rc = frame_at(e, fi, m->count * rs, &p)))
            return rc;
        if ((rc = enc_compact(m, nb, p)) <= 0)
            return rc;
        *wide = 1; /* a value too big for 32 bits: start again, wide */
    }
    size_t rs = rep ? PROTO_REPORT_REC_SIZE : PROTO_TOKENS_REC_SIZE;
    if ((rc = frame_at(e, fi, m->count * rs, &p)))
        return rc;
    return enc_wide(m, nb, p);
}

int proto_encode(const proto_msg_t *m, proto_enc_t *e)
{
    int rc = enc_check(m);
    if (rc)
        return rc;
    /* The records go first (into their frame, the last one) because the
     * header says whether they are wide. */
    e->nframes = 0;
    int wide = 0;
    size_t rec_frame = 1 + (m->has_names ? 1 : 0) + (m->has_weights ? 1 : 0);
    if (type_has_records(m->type) && (rc = enc_records(m, e, rec_frame, &wide)))
        return rc;
    e->nframes = 0;
    unsigned char *p;
    if ((rc = enc_frame(e, PROTO_HEADER_MAX, &p)))
        return rc;
    ssize_t fl = fast_header(m, wide, (char *)p, PROTO_HEADER_MAX);
    if (fl >= 0) {
        e->len[0] = (size_t)fl;
    } else {
        json_t *h = enc_header(m, wide);
        if (!h)
            return -EINVAL; /* json_string refuses invalid UTF-8 in a node name */
        char *s = json_dumps(h, JSON_COMPACT);
        json_decref(h);
        if (!s)
            return -ENOMEM;
        size_t hl = strlen(s);
        if (hl > PROTO_HEADER_MAX) {
            free(s);
            return -EINVAL;
        }
        memcpy(p, s, hl);
        e->len[0] = hl;
        free(s);
    }

    if (m->has_names) {
        size_t total = 0;
        for (size_t i = 0; i < m->nnames; i++)
            total += strlen(m->names[i]) + 1;
        if ((rc = enc_frame(e, total, &p)))
            return rc;
        for (size_t i = 0; i < m->nnames; i++) {
            size_t l = strlen(m->names[i]) + 1;
            memcpy(p, m->names[i], l);
            p += l;
        }
    } else if (m->type == PROTO_HELLO) {
        if ((rc = enc_frame(e, 0, &p)))
            return rc;
    }
    if (m->has_weights) {
        if ((rc = enc_frame(e, m->nnames * 4, &p)))
            return rc;
        for (size_t i = 0; i < m->nnames; i++, p += 4)
            put32(p, m->weights[i]);
    }

    if (type_has_records(m->type))
        e->nframes++; /* the records frame, written above */
    return 0;
}

/* ---- decoder ---- */

/* The header fields the decoder knows, as read from the JSON object (by the
 * flat parser below or, for anything unusual, by jansson). */
enum {
    K_V, K_TYPE, K_NODE, K_SEQ, K_PERIOD, K_INTERVAL, K_INTERVALS, K_PERIOD_MS,
    K_REMAINING_MS, K_NAMES, K_CAPACITY, K_TABLE, K_PEER_TABLE, K_COUNT, K_COMPLETIONS,
    K_DISPATCHED, K_BUSY, K_CODE, K_TEXT, K_WEIGHTS, K_WIDE, K__N
};
static const char *const key_names[K__N] = {
    "v", "type", "node", "seq", "period", "interval", "intervals", "period_ms",
    "remaining_ms", "names", "capacity", "table", "peer_table", "count", "completions",
    "dispatched", "busy", "code", "text", "weights", "wide",
};

typedef enum { V_NONE = 0, V_INT, V_REAL, V_STR, V_OTHER } vkind_t;

typedef struct {
    vkind_t kind;
    int64_t i;
    double r;
    const char *s; /* V_STR: not NUL-terminated, `len` bytes */
    size_t len;
} hval_t;

typedef struct {
    hval_t v[K__N];
} hview_t;

static const unsigned char key_lens[K__N] = {1, 4, 4, 3, 6, 8, 9, 9, 12, 5, 8, 5, 10, 5, 11, 10, 4, 4, 4, 7, 4};

static int key_index(const char *k, size_t l)
{
    for (int i = 0; i < K__N; i++)
        if (key_lens[i] == l && k[0] == key_names[i][0] && memcmp(key_names[i], k, l) == 0)
            return i;
    return -1;
}

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

#define SKIP_WS()                                                                                  \
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))                      \
    p++

/* Scans a string body after its opening quote.  Returns 0 at the closing
 * quote with *s and *l set, -1 for escapes, control or non-ASCII bytes. */
static int flat_string(const char **pp, const char *end, const char **s, size_t *l)
{
    const char *p = *pp;
    *s = p;
    while (p < end && *p != '"') {
        unsigned char c = (unsigned char)*p;
        if (c == '\\' || c < 0x20 || c >= 0x80)
            return -1;
        p++;
    }
    if (p >= end)
        return -1;
    *l = (size_t)(p - *s);
    *pp = p + 1;
    return 0;
}

/* Parses a flat JSON object of ASCII strings, numbers and literals into
 * *hv.  Returns 1, or 0 for anything else (nested values, escapes,
 * non-ASCII, duplicate keys, numbers out of range, syntax errors): the
 * caller then asks jansson, whose verdict is authoritative.  The common
 * header costs a few hundred instructions here instead of tens of
 * thousands in a general parser. */
static int flat_parse(const char *p, size_t len, hview_t *hv)
{
    const char *end = p + len;
    struct {
        const char *s;
        size_t l;
    } keys[32];
    size_t nk = 0;
    memset(hv, 0, sizeof *hv);
    SKIP_WS();
    if (p >= end || *p != '{')
        return 0;
    p++;
    SKIP_WS();
    if (p < end && *p == '}') {
        p++;
        goto tail;
    }
    for (;;) {
        const char *ks;
        size_t kl;
        if (p >= end || *p != '"')
            return 0;
        p++;
        if (flat_string(&p, end, &ks, &kl) || nk == sizeof keys / sizeof keys[0])
            return 0;
        for (size_t i = 0; i < nk; i++)
            if (keys[i].l == kl && memcmp(keys[i].s, ks, kl) == 0)
                return 0;
        keys[nk].s = ks;
        keys[nk].l = kl;
        nk++;
        SKIP_WS();
        if (p >= end || *p != ':')
            return 0;
        p++;
        SKIP_WS();
        if (p >= end)
            return 0;
        hval_t val = {0};
        if (*p == '"') {
            p++;
            if (flat_string(&p, end, &val.s, &val.len))
                return 0;
            val.kind = V_STR;
        } else if (*p == '-' || is_digit(*p)) {
            const char *ns = p;
            int neg = *p == '-', real = 0;
            if (neg)
                p++;
            if (p >= end || !is_digit(*p) || (*p == '0' && p + 1 < end && is_digit(p[1])))
                return 0;
            uint64_t acc = 0;
            while (p < end && is_digit(*p)) {
                if (acc > (UINT64_MAX - 9) / 10)
                    return 0;
                acc = acc * 10 + (uint64_t)(*p - '0');
                p++;
            }
            if (p < end && *p == '.') {
                real = 1;
                p++;
                if (p >= end || !is_digit(*p))
                    return 0;
                while (p < end && is_digit(*p))
                    p++;
            }
            if (p < end && (*p == 'e' || *p == 'E')) {
                real = 1;
                p++;
                if (p < end && (*p == '+' || *p == '-'))
                    p++;
                if (p >= end || !is_digit(*p))
                    return 0;
                while (p < end && is_digit(*p))
                    p++;
            }
            if (real) {
                char buf[64];
                size_t nl = (size_t)(p - ns);
                if (nl >= sizeof buf)
                    return 0;
                memcpy(buf, ns, nl);
                buf[nl] = '\0';
                val.kind = V_REAL;
                val.r = strtod(buf, NULL);
                if (!isfinite(val.r))
                    return 0;
            } else {
                if (acc > (uint64_t)INT64_MAX + (uint64_t)neg)
                    return 0;
                val.kind = V_INT;
                val.i = !neg ? (int64_t)acc : acc > (uint64_t)INT64_MAX ? INT64_MIN : -(int64_t)acc;
            }
        } else if (end - p >= 4 && (memcmp(p, "true", 4) == 0 || memcmp(p, "null", 4) == 0)) {
            val.kind = V_OTHER;
            p += 4;
        } else if (end - p >= 5 && memcmp(p, "false", 5) == 0) {
            val.kind = V_OTHER;
            p += 5;
        } else {
            return 0;
        }
        int k = key_index(ks, kl);
        if (k >= 0)
            hv->v[k] = val;
        SKIP_WS();
        if (p < end && *p == ',') {
            p++;
            SKIP_WS();
            continue;
        }
        if (p < end && *p == '}') {
            p++;
            break;
        }
        return 0;
    }
tail:
    SKIP_WS();
    return p == end;
}

/* The same view from a jansson object (strings point into it). */
static void jansson_view(json_t *h, hview_t *hv)
{
    memset(hv, 0, sizeof *hv);
    const char *key;
    json_t *val;
    json_object_foreach(h, key, val) {
        int k = key_index(key, strlen(key));
        if (k < 0)
            continue;
        hval_t *x = &hv->v[k];
        if (json_is_integer(val)) {
            x->kind = V_INT;
            x->i = json_integer_value(val);
        } else if (json_is_real(val)) {
            x->kind = V_REAL;
            x->r = json_real_value(val);
        } else if (json_is_string(val)) {
            x->kind = V_STR;
            x->s = json_string_value(val);
            x->len = json_string_length(val);
        } else {
            x->kind = V_OTHER;
        }
    }
}

int proto__flat_agrees(const void *data, size_t len)
{
    hview_t a, b;
    if (!flat_parse(data, len, &a))
        return 1; /* declined: jansson decides, nothing to compare */
    json_t *h = json_loadb(data, len, JSON_REJECT_DUPLICATES, NULL);
    if (!h || !json_is_object(h)) {
        json_decref(h);
        return 0;
    }
    jansson_view(h, &b);
    int same = 1;
    for (int k = 0; k < K__N; k++) {
        const hval_t *x = &a.v[k], *y = &b.v[k];
        if (x->kind != y->kind || (x->kind == V_INT && x->i != y->i) ||
            (x->kind == V_REAL && x->r != y->r) ||
            (x->kind == V_STR && (x->len != y->len || memcmp(x->s, y->s, x->len) != 0)))
            same = 0;
    }
    json_decref(h);
    return same ? 2 : 0;
}

/* Reads an unsigned integer field.  Returns PROTO_OK, PROTO_E_FIELD (missing
 * and required, or not an integer) or PROTO_E_RANGE (negative or > max). */
static proto_reason_t get_uint(const hview_t *h, int key, int required, uint64_t max, uint64_t *out)
{
    const hval_t *v = &h->v[key];
    *out = 0;
    if (v->kind == V_NONE)
        return required ? PROTO_E_FIELD : PROTO_OK;
    if (v->kind != V_INT)
        return PROTO_E_FIELD;
    if (v->i < 0 || (uint64_t)v->i > max)
        return PROTO_E_RANGE;
    *out = (uint64_t)v->i;
    return PROTO_OK;
}

#define GET(key, req, max, dst)                                                                    \
    do {                                                                                           \
        uint64_t v_;                                                                               \
        if ((why = get_uint(h, key, req, max, &v_)) != PROTO_OK)                                   \
            goto out;                                                                              \
        dst = v_;                                                                                  \
    } while (0)

static proto_reason_t dec_timing(const hview_t *h, proto_msg_t *m, int required)
{
    proto_reason_t why;
    if (!required && h->v[K_PERIOD].kind == V_NONE)
        return PROTO_OK;
    GET(K_PERIOD, 1, PROTO_MAX_COUNT, m->period);
    GET(K_INTERVAL, 1, MAX_INTERVALS, m->interval);
    GET(K_INTERVALS, 1, MAX_INTERVALS, m->intervals);
    GET(K_PERIOD_MS, 1, MAX_PERIOD_MS, m->period_ms);
    GET(K_REMAINING_MS, 1, MAX_PERIOD_MS, m->remaining_ms);
    if (!timing_ok(m))
        return PROTO_E_RANGE;
    m->has_timing = 1;
out:
    return why;
}

static proto_reason_t dec_string(const hview_t *h, int key, int required, char *dst, size_t cap)
{
    const hval_t *v = &h->v[key];
    if (v->kind == V_NONE)
        return required ? PROTO_E_FIELD : PROTO_OK;
    if (v->kind != V_STR)
        return PROTO_E_FIELD;
    if (v->len >= cap)
        return PROTO_E_RANGE;
    memcpy(dst, v->s, v->len);
    dst[v->len] = '\0';
    if (memchr(dst, '\0', v->len))
        return PROTO_E_FIELD;
    return PROTO_OK;
}

static uint32_t hash_name(const char *s, size_t l)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < l; i++)
        h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

/* Splits and validates the names frame into m->names / m->namebuf. */
static proto_reason_t dec_names(proto_msg_t *m, const proto_frame_t *f, size_t declared)
{
    const unsigned char *d = f->data;
    size_t len = f->len;
    if (len == 0 && declared != 0)
        return PROTO_E_COUNT;
    if (len > 0 && d[len - 1] != '\0')
        return PROTO_E_TRUNCATED; /* the last name is cut off */
    size_t n = 0;
    for (size_t i = 0; i < len; i++)
        n += d[i] == '\0';
    if (n != declared)
        return PROTO_E_COUNT;
    if (grow(&m->namebuf, &m->cap_namebuf, len ? len : 1, 1) ||
        (n && grow(&m->names_own, &m->cap_names, n, sizeof *m->names_own)))
        return PROTO_OK + PROTO_E__COUNT; /* out of memory, see caller */
    memcpy(m->namebuf, d, len);
    /* Open-addressed set of name indices to catch duplicates. */
    size_t hcap = 16;
    while (hcap < 2 * n)
        hcap *= 2;
    uint32_t *set = n ? calloc(hcap, sizeof *set) : NULL;
    if (n && !set)
        return PROTO_OK + PROTO_E__COUNT;
    proto_reason_t why = PROTO_OK;
    size_t k = 0;
    char *p = m->namebuf;
    m->names = m->names_own;
    for (size_t i = 0; i < n; i++) {
        size_t l = strlen(p);
        if (proto_name_check(p, l)) {
            why = PROTO_E_NAMES;
            break;
        }
        size_t slot = hash_name(p, l) & (hcap - 1);
        while (set[slot]) {
            const char *o = m->names[set[slot] - 1];
            if (strcmp(o, p) == 0) {
                why = PROTO_E_NAMES;
                goto out;
            }
            slot = (slot + 1) & (hcap - 1);
        }
        set[slot] = (uint32_t)(i + 1);
        m->names[k++] = p;
        p += l + 1;
    }
out:
    free(set);
    if (why == PROTO_OK) {
        m->nnames = n;
        m->has_names = 1;
    }
    return why;
}

/* Reads the weights frame (n u32, each 1..PROTO_WEIGHT_MAX) into
 * m->weights. */
static proto_reason_t dec_weights(proto_msg_t *m, const proto_frame_t *f, size_t n)
{
    if (f->len != n * 4)
        return f->len < n * 4 && f->len % 4 == 0 ? PROTO_E_TRUNCATED : PROTO_E_COUNT;
    if (n && !f->data)
        return PROTO_E_TRUNCATED;
    if (n && grow(&m->weights_own, &m->cap_weights, n, sizeof *m->weights_own))
        return PROTO_E__COUNT; /* out of memory, see caller */
    const unsigned char *p = f->data;
    for (size_t i = 0; i < n; i++, p += 4) {
        uint32_t w = get32(p);
        if (w < 1 || w > PROTO_WEIGHT_MAX)
            return PROTO_E_RANGE;
        m->weights_own[i] = w;
    }
    m->weights = m->weights_own;
    m->has_weights = 1;
    return PROTO_OK;
}

/* Compact counters take any 32-bit value; in l_left / l_tokens
 * PROTO_COMPACT_UNLIMITED means no limit. */
static proto_reason_t dec_report_recs(proto_msg_t *m, const unsigned char *p)
{
    if (!m->wide) {
        for (size_t i = 0; i < m->count; i++, p += PROTO_REPORT_COMPACT_SIZE) {
            proto_report_rec_t *r = &m->report[i];
            uint32_t b = get32(p), q = get32(p + 4), ai = get32(p + 8), ap = get32(p + 12);
            uint32_t sr = get32(p + 16), sl = get32(p + 20), so = get32(p + 24);
            uint32_t rl = get32(p + 28), ll = get32(p + 32);
            if (m->has_names && b >= m->nnames)
                return PROTO_E_RANGE;
            r->bucket = b;
            r->flags = 0;
            r->queued = q;
            r->arrivals_interval = ai;
            r->arrivals_period = ap;
            r->served_r = sr;
            r->served_l = sl;
            r->served_o = so;
            r->r_left = rl;
            r->l_left = ll == PROTO_COMPACT_UNLIMITED ? PROTO_UNLIMITED : (int64_t)ll;
            r->reserved = 0;
        }
        return PROTO_OK;
    }
#if WIRE_LAYOUT
    if (m->count)
        memcpy(m->report, p, m->count * PROTO_REPORT_REC_SIZE);
#else
    for (size_t i = 0; i < m->count; i++, p += PROTO_REPORT_REC_SIZE) {
        proto_report_rec_t *r = &m->report[i];
        r->bucket = get32(p);
        r->flags = get32(p + 4);
        r->queued = get64(p + 8);
        r->arrivals_interval = get64(p + 16);
        r->arrivals_period = get64(p + 24);
        r->served_r = get64(p + 32);
        r->served_l = get64(p + 40);
        r->served_o = get64(p + 48);
        r->r_left = (int64_t)get64(p + 56);
        r->l_left = (int64_t)get64(p + 64);
        r->reserved = get64(p + 72);
    }
#endif
    uint64_t nb = m->has_names ? m->nnames : UINT64_MAX;
    for (size_t i = 0; i < m->count; i++)
        if (!rep_valid(&m->report[i], nb))
            return PROTO_E_RANGE;
    return PROTO_OK;
}

static proto_reason_t dec_tokens_recs(proto_msg_t *m, const unsigned char *p)
{
    if (!m->wide) {
        for (size_t i = 0; i < m->count; i++, p += PROTO_TOKENS_COMPACT_SIZE) {
            proto_tokens_rec_t *t = &m->tokens[i];
            uint32_t b = get32(p), r = get32(p + 4), l = get32(p + 8);
            if (m->has_names && b >= m->nnames)
                return PROTO_E_RANGE;
            uint32_t unl = l == PROTO_COMPACT_UNLIMITED;
            t->bucket = b;
            t->flags = unl; /* PROTO_TOK_UNLIMITED */
            t->r_tokens = r;
            t->l_tokens = unl ? PROTO_UNLIMITED : (int64_t)l;
        }
        return PROTO_OK;
    }
    for (size_t i = 0; i < m->count; i++, p += PROTO_TOKENS_REC_SIZE) {
        proto_tokens_rec_t *t = &m->tokens[i];
        t->bucket = get32(p);
        t->flags = get32(p + 4);
        t->r_tokens = (int64_t)get64(p + 8);
        t->l_tokens = (int64_t)get64(p + 16);
        if ((t->flags & ~PROTO_TOK_UNLIMITED) || !tok_ok(t->r_tokens, 0) ||
            (m->has_names && t->bucket >= m->nnames))
            return PROTO_E_RANGE;
        if (t->flags & PROTO_TOK_UNLIMITED)
            t->l_tokens = PROTO_UNLIMITED;
        else if (!tok_ok(t->l_tokens, 0))
            return PROTO_E_RANGE;
    }
    return PROTO_OK;
}

/* The decoder proper.  Returns a reason, or PROTO_E__COUNT for -ENOMEM. */
static proto_reason_t decode(proto_msg_t *m, const proto_frame_t *frames, size_t nframes)
{
    proto_reason_t why = PROTO_OK;
    json_t *jh = NULL;
    msg_reset(m);
    if (!frames || nframes == 0 || !frames[0].data || frames[0].len == 0)
        return PROTO_E_TRUNCATED;
    if (frames[0].len > PROTO_HEADER_MAX)
        return PROTO_E_JSON;
    hview_t hv;
    const hview_t *h = &hv;
    if (!flat_parse(frames[0].data, frames[0].len, &hv)) {
        jh = json_loadb(frames[0].data, frames[0].len, JSON_REJECT_DUPLICATES, NULL);
        if (!jh || !json_is_object(jh)) {
            why = PROTO_E_JSON;
            goto out;
        }
        jansson_view(jh, &hv);
    }
    const hval_t *v = &hv.v[K_V];
    if (v->kind != V_INT || v->i != PROTO_VERSION) {
        why = PROTO_E_VERSION;
        goto out;
    }
    const hval_t *t = &hv.v[K_TYPE];
    if (t->kind != V_STR) {
        why = PROTO_E_TYPE;
        goto out;
    }
    int type = 0;
    for (int i = 1; i < NTYPES; i++)
        if (strlen(type_names[i]) == t->len && memcmp(t->s, type_names[i], t->len) == 0)
            type = i;
    if (!type) {
        why = PROTO_E_TYPE;
        goto out;
    }
    m->type = (proto_type_t)type;
    if ((why = dec_string(h, K_NODE, 1, m->node, sizeof m->node)) != PROTO_OK)
        goto out;
    if (proto_name_check(m->node, strlen(m->node))) {
        why = PROTO_E_FIELD;
        goto out;
    }
    GET(K_SEQ, 0, (uint64_t)INT64_MAX, m->seq);

    uint64_t nnames = 0;
    int names = hv.v[K_NAMES].kind != V_NONE;
    if (names) {
        if (!type_may_have_names(m->type)) {
            why = PROTO_E_FIELD;
            goto out;
        }
        GET(K_NAMES, 1, PROTO_MAX_RECORDS, nnames);
    }
    uint64_t nweights = 0;
    int weights = hv.v[K_WEIGHTS].kind != V_NONE;
    if (weights) {
        if (!type_may_have_weights(m->type) || !names) {
            why = PROTO_E_FIELD;
            goto out;
        }
        GET(K_WEIGHTS, 1, PROTO_MAX_RECORDS, nweights);
        if (nweights != nnames) {
            why = PROTO_E_COUNT;
            goto out;
        }
    }
    switch (m->type) {
    case PROTO_HELLO:
        GET(K_CAPACITY, 1, PROTO_MAX_COUNT, m->capacity);
        GET(K_TABLE, 1, UINT32_MAX, m->table);
        if (!names) {
            why = PROTO_E_FIELD;
            goto out;
        }
        break;
    case PROTO_WELCOME:
        GET(K_TABLE, 1, UINT32_MAX, m->table);
        GET(K_PEER_TABLE, 1, UINT32_MAX, m->peer_table);
        break;
    case PROTO_REPORT: {
        GET(K_PERIOD, 1, PROTO_MAX_COUNT, m->period);
        GET(K_INTERVAL, 1, MAX_INTERVALS - 1, m->interval);
        GET(K_REMAINING_MS, 0, MAX_PERIOD_MS, m->remaining_ms);
        GET(K_TABLE, 1, UINT32_MAX, m->table);
        GET(K_PEER_TABLE, 1, UINT32_MAX, m->peer_table);
        GET(K_COUNT, 1, PROTO_MAX_RECORDS, m->count);
        GET(K_COMPLETIONS, 1, PROTO_MAX_COUNT, m->completions);
        GET(K_DISPATCHED, 1, PROTO_MAX_COUNT, m->dispatched);
        const hval_t *b = &hv.v[K_BUSY];
        if (b->kind != V_INT && b->kind != V_REAL) {
            why = PROTO_E_FIELD;
            goto out;
        }
        double busy = b->kind == V_INT ? (double)b->i : b->r;
        if (!(busy >= 0 && busy <= MAX_BUSY)) {
            why = PROTO_E_RANGE;
            goto out;
        }
        m->busy_seconds = busy;
        GET(K_WIDE, 0, 1, m->wide);
        break;
    }
    case PROTO_TOKENS:
        GET(K_TABLE, 1, UINT32_MAX, m->table);
        GET(K_PEER_TABLE, 1, UINT32_MAX, m->peer_table);
        GET(K_COUNT, 1, PROTO_MAX_RECORDS, m->count);
        GET(K_WIDE, 0, 1, m->wide);
        break;
    case PROTO_HEARTBEAT:
        GET(K_PEER_TABLE, 0, UINT32_MAX, m->peer_table);
        break;
    case PROTO_ERROR:
        if ((why = dec_string(h, K_CODE, 1, m->code, sizeof m->code)) != PROTO_OK ||
            (why = dec_string(h, K_TEXT, 0, m->text, sizeof m->text)) != PROTO_OK)
            goto out;
        if (m->code[0] == '\0') {
            why = PROTO_E_FIELD;
            goto out;
        }
        break;
    default:
        break;
    }
    if ((type_has_timing(m->type) || type_may_have_timing(m->type)) &&
        (why = dec_timing(h, m, type_has_timing(m->type))) != PROTO_OK)
        goto out;
    if ((m->type == PROTO_HELLO || m->type == PROTO_REPORT || m->type == PROTO_TOKENS ||
         (m->type == PROTO_WELCOME && names)) &&
        m->table == 0) {
        why = PROTO_E_RANGE;
        goto out;
    }

    size_t want = 1 + (size_t)names + (size_t)weights + (size_t)type_has_records(m->type);
    if (nframes < want) {
        why = PROTO_E_TRUNCATED;
        goto out;
    }
    if (nframes > want) {
        why = PROTO_E_FRAMES;
        goto out;
    }
    size_t fi = 1;
    if (names) {
        if (!frames[fi].data && frames[fi].len) {
            why = PROTO_E_TRUNCATED;
            goto out;
        }
        if ((why = dec_names(m, &frames[fi], nnames)) != PROTO_OK)
            goto out;
        fi++;
    }
    if (weights) {
        if ((why = dec_weights(m, &frames[fi], nweights)) != PROTO_OK)
            goto out;
        fi++;
    }
    if (type_has_records(m->type)) {
        size_t rs = m->type == PROTO_REPORT
                        ? (m->wide ? PROTO_REPORT_REC_SIZE : PROTO_REPORT_COMPACT_SIZE)
                        : (m->wide ? PROTO_TOKENS_REC_SIZE : PROTO_TOKENS_COMPACT_SIZE);
        if (frames[fi].len != m->count * rs) {
            why = frames[fi].len < m->count * rs ? PROTO_E_TRUNCATED : PROTO_E_COUNT;
            /* A frame that is not a whole number of records, or holds more
             * records than declared, disagrees with the count. */
            if (frames[fi].len % rs != 0 || frames[fi].len > m->count * rs)
                why = PROTO_E_COUNT;
            goto out;
        }
        if (m->count && !frames[fi].data) {
            why = PROTO_E_TRUNCATED;
            goto out;
        }
        if (proto_msg_reserve(m, m->count, 0)) {
            why = PROTO_E__COUNT;
            goto out;
        }
        why = m->type == PROTO_REPORT ? dec_report_recs(m, frames[fi].data)
                                      : dec_tokens_recs(m, frames[fi].data);
    }
out:
    json_decref(jh);
    if (why != PROTO_OK) {
        proto_type_t ty = m->type;
        msg_reset(m);
        m->type = why == PROTO_E_TYPE ? 0 : ty;
    }
    return why;
}

int proto_decode(proto_msg_t *m, const proto_frame_t *frames, size_t nframes, proto_stats_t *st,
                 proto_reason_t *why)
{
    proto_reason_t r = decode(m, frames, nframes);
    if (why)
        *why = r == PROTO_E__COUNT ? PROTO_OK : r;
    if (r == PROTO_E__COUNT)
        return -ENOMEM;
    proto_stats_note(st, r);
    return r == PROTO_OK ? 0 : -EPROTO;
}

/* ---- ZeroMQ helpers ---- */

int proto_send(void *sock, const void *identity, size_t idlen, const proto_msg_t *m, proto_enc_t *e,
               int zflags)
{
    int rc = proto_encode(m, e);
    if (rc)
        return rc;
    zflags &= ZMQ_DONTWAIT;
    if (identity && zmq_send(sock, identity, idlen, ZMQ_SNDMORE | zflags) < 0)
        return -zmq_errno();
    for (size_t i = 0; i < e->nframes; i++) {
        int more = i + 1 < e->nframes ? ZMQ_SNDMORE : 0;
        /* Once the first part is queued the rest of a multipart message is
         * accepted atomically, so only the first part can see EAGAIN. */
        if (zmq_send(sock, e->data[i], e->len[i], more | zflags) < 0)
            return -zmq_errno();
    }
    return 0;
}

int proto_recv(void *sock, void *identity, size_t idcap, size_t *idlen, proto_msg_t *m,
               proto_stats_t *st, proto_reason_t *why, proto_known_fn known, void *known_arg,
               int zflags)
{
    zmq_msg_t parts[RECV_MAX_FRAMES];
    size_t n = 0;
    int rc = 0, more = 1, excess = 0;
    proto_reason_t r = PROTO_OK;
    zflags &= ZMQ_DONTWAIT;
    if (why)
        *why = PROTO_OK;
    while (more) {
        zmq_msg_t tmp;
        zmq_msg_t *p = n < RECV_MAX_FRAMES ? &parts[n] : &tmp;
        zmq_msg_init(p);
        if (zmq_msg_recv(p, sock, n == 0 && !excess ? zflags : 0) < 0) {
            rc = -zmq_errno();
            zmq_msg_close(p);
            goto out;
        }
        more = zmq_msg_more(p);
        if (p == &tmp) {
            zmq_msg_close(p); /* drop the excess part, keep draining */
            excess = 1;
        } else {
            n++;
        }
    }
    size_t first = 0;
    if (identity) {
        size_t l = zmq_msg_size(&parts[0]);
        if (l > idcap)
            l = idcap;
        memcpy(identity, zmq_msg_data(&parts[0]), l);
        if (idlen)
            *idlen = l;
        first = 1;
    }
    proto_frame_t fr[RECV_MAX_FRAMES];
    size_t nf = 0;
    for (size_t i = first; i < n; i++, nf++) {
        fr[nf].data = zmq_msg_data(&parts[i]);
        fr[nf].len = zmq_msg_size(&parts[i]);
    }
    if (excess) {
        r = PROTO_E_FRAMES;
    } else {
        r = decode(m, fr, nf);
        if (r == PROTO_E__COUNT) {
            rc = -ENOMEM;
            goto out;
        }
    }
    if (r == PROTO_OK && identity) {
        size_t l = zmq_msg_size(&parts[0]);
        if (l != strlen(m->node) || memcmp(zmq_msg_data(&parts[0]), m->node, l) != 0)
            r = PROTO_E_UNKNOWN_NODE;
    }
    if (r != PROTO_OK) {
        proto_stats_note(st, r);
        if (why)
            *why = r;
        rc = -EPROTO;
        goto out;
    }
    if (known && m->type != PROTO_HELLO && !known(m->node, known_arg)) {
        proto_stats_note(st, PROTO_E_UNKNOWN_NODE);
        if (why)
            *why = PROTO_E_UNKNOWN_NODE;
        rc = PROTO_RECV_UNKNOWN;
        goto out;
    }
    proto_stats_note(st, PROTO_OK);
out:
    for (size_t i = 0; i < n; i++)
        zmq_msg_close(&parts[i]);
    return rc;
}
