/* header.c - frame 0, the JSON header: written directly into the frame for
 * plain-ASCII messages (jansson otherwise), read by a flat-object parser for
 * the common case (jansson, authoritative, otherwise). */
#include "common/proto/internal.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- writing ---- */

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
    bad |= jset(h, "type", json_string(proto__type_names[m->type]));
    bad |= jset(h, "node", json_string(m->node));
    if (m->seq)
        bad |= jset(h, "seq", json_integer((json_int_t)m->seq));
    if (m->epoch && type_has_epoch(m->type))
        bad |= jset(h, "epoch", json_integer((json_int_t)m->epoch));
    if (m->instance && type_has_instance(m->type))
        bad |= jset(h, "instance", json_integer((json_int_t)m->instance));
    if (m->follows && type_has_follows(m->type))
        bad |= jset(h, "follows", json_integer((json_int_t)m->follows));
    if (m->lease && type_has_lease(m->type))
        bad |= jset(h, "lease", json_integer((json_int_t)m->lease));
    if (m->leases && m->type == PROTO_HELLO)
        bad |= jset(h, "leases", json_integer(1));
    if (m->shards_k && type_has_lease(m->type)) { /* the cluster's shards (issue 30) */
        bad |= jset(h, "shards_k", json_integer((json_int_t)m->shards_k));
        bad |= jset(h, "shards_gen", json_integer((json_int_t)m->shards_gen));
        if (m->shards_next) {
            bad |= jset(h, "shards_next", json_integer((json_int_t)m->shards_next));
            bad |= jset(h, "shards_from", json_integer((json_int_t)m->shards_from));
        }
    }
    if (m->sparse && type_has_sparse(m->type))
        bad |= jset(h, "sparse", json_integer(1));
    if (m->full && type_has_full(m->type))
        bad |= jset(h, "full", json_integer(1));
    if (m->basis && type_has_basis(m->type))
        bad |= jset(h, "basis", json_integer((json_int_t)m->basis));
    if (m->renew && type_has_renew(m->type))
        bad |= jset(h, "renew", json_integer(1));
    if (m->gseq && m->type == PROTO_TOKENS) {
        bad |= jset(h, "gseq", json_integer((json_int_t)m->gseq));
        if (m->renew && m->based != m->count)
            bad |= jset(h, "based", json_integer((json_int_t)m->based));
    }
    if (m->regrant && m->type == PROTO_REPORT)
        bad |= jset(h, "regrant", json_integer(1));
    if (m->parts && (m->type == PROTO_HELLO || m->type == PROTO_WELCOME))
        bad |= jset(h, "parts", json_integer(1));
    if (m->has_names && m->names_of && type_may_have_part(m->type)) {
        if (m->type == PROTO_NAMES)
            bad |= jset(h, "names_at", json_integer((json_int_t)m->names_at));
        bad |= jset(h, "names_of", json_integer((json_int_t)m->names_of));
    }
    if (m->has_peer_names && type_has_peer_names(m->type))
        bad |= jset(h, "peer_names", json_integer((json_int_t)m->peer_names));
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
    if (m->has_names && m->shadow && m->shadow[0])
        bad |= jset(h, "shadow", json_string(m->shadow));
    if (m->has_shares && m->type == PROTO_TOKENS) {
        char sl[PROTO_SHARES_MAX * 32];
        if (proto_shares_format(m->shares, m->nshares, sl, sizeof sl) < 0)
            bad = 1;
        else
            bad |= jset(h, "shares", json_string(sl));
    }
    if (m->has_inflight && m->type == PROTO_REPORT) {
        char sl[PROTO_SHARES_MAX * 32];
        if (proto_shares_format(m->inflight, m->ninflight, sl, sizeof sl) < 0)
            bad = 1;
        else
            bad |= jset(h, "inflight", json_string(sl));
    }
    if (m->base_us && m->type == PROTO_REPORT)
        bad |= jset(h, "base_us", json_integer((json_int_t)m->base_us));
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
        if (m->rules_version)
            bad |= jset(h, "rules", json_integer((json_int_t)m->rules_version));
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
        if (m->fallback)
            bad |= jset(h, "fallback", json_integer(1));
        if (m->fallbacks)
            bad |= jset(h, "fallbacks", json_integer((json_int_t)m->fallbacks));
        if (m->nbytes)
            bad |= jset(h, "bytes", json_integer((json_int_t)m->nbytes));
        if (m->served_bytes)
            bad |= jset(h, "served_bytes", json_integer((json_int_t)m->served_bytes));
        break;
    case PROTO_TOKENS:
        bad |= jset(h, "table", json_integer(m->table));
        bad |= jset(h, "peer_table", json_integer(m->peer_table));
        bad |= jset(h, "count", json_integer((json_int_t)m->count));
        if (wide)
            bad |= jset(h, "wide", json_integer(1));
        if (m->nbytes)
            bad |= jset(h, "bytes", json_integer((json_int_t)m->nbytes));
        break;
    case PROTO_HEARTBEAT:
        if (m->peer_table)
            bad |= jset(h, "peer_table", json_integer(m->peer_table));
        break;
    case PROTO_NAMES:
        bad |= jset(h, "table", json_integer(m->table));
        break;
    case PROTO_RULES:
        bad |= jset(h, "rules", json_integer((json_int_t)m->rules_version));
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
    hw_str(&w, "type", proto__type_names[m->type], strlen(proto__type_names[m->type]));
    hw_str(&w, "node", m->node, strlen(m->node));
    if (m->seq)
        hw_u64(&w, "seq", m->seq);
    if (m->epoch && type_has_epoch(m->type))
        hw_u64(&w, "epoch", m->epoch);
    if (m->instance && type_has_instance(m->type))
        hw_u64(&w, "instance", m->instance);
    if (m->follows && type_has_follows(m->type))
        hw_u64(&w, "follows", m->follows);
    if (m->lease && type_has_lease(m->type))
        hw_u64(&w, "lease", m->lease);
    if (m->leases && m->type == PROTO_HELLO)
        hw_u64(&w, "leases", 1);
    if (m->shards_k && type_has_lease(m->type)) {
        hw_u64(&w, "shards_k", m->shards_k);
        hw_u64(&w, "shards_gen", m->shards_gen);
        if (m->shards_next) {
            hw_u64(&w, "shards_next", m->shards_next);
            hw_u64(&w, "shards_from", m->shards_from);
        }
    }
    if (m->sparse && type_has_sparse(m->type))
        hw_u64(&w, "sparse", 1);
    if (m->full && type_has_full(m->type))
        hw_u64(&w, "full", 1);
    if (m->basis && type_has_basis(m->type))
        hw_u64(&w, "basis", m->basis);
    if (m->renew && type_has_renew(m->type))
        hw_u64(&w, "renew", 1);
    if (m->gseq && m->type == PROTO_TOKENS) {
        hw_u64(&w, "gseq", m->gseq);
        if (m->renew && m->based != m->count)
            hw_u64(&w, "based", m->based);
    }
    if (m->regrant && m->type == PROTO_REPORT)
        hw_u64(&w, "regrant", 1);
    if (m->parts && (m->type == PROTO_HELLO || m->type == PROTO_WELCOME))
        hw_u64(&w, "parts", 1);
    if (m->has_names && m->names_of && type_may_have_part(m->type)) {
        if (m->type == PROTO_NAMES)
            hw_u64(&w, "names_at", m->names_at);
        hw_u64(&w, "names_of", m->names_of);
    }
    if (m->has_peer_names && type_has_peer_names(m->type))
        hw_u64(&w, "peer_names", m->peer_names);
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
    if (m->has_names && m->shadow && m->shadow[0])
        hw_str(&w, "shadow", m->shadow, strlen(m->shadow));
    if (m->has_shares && m->type == PROTO_TOKENS) {
        char sl[PROTO_SHARES_MAX * 32];
        int n = proto_shares_format(m->shares, m->nshares, sl, sizeof sl);
        if (n < 0)
            w.bad = 1; /* the jansson path refuses it too */
        else
            hw_str(&w, "shares", sl, (size_t)n);
    }
    if (m->has_inflight && m->type == PROTO_REPORT) {
        char sl[PROTO_SHARES_MAX * 32];
        int n = proto_shares_format(m->inflight, m->ninflight, sl, sizeof sl);
        if (n < 0)
            w.bad = 1;
        else
            hw_str(&w, "inflight", sl, (size_t)n);
    }
    if (m->base_us && m->type == PROTO_REPORT)
        hw_u64(&w, "base_us", m->base_us);
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
        if (m->rules_version)
            hw_u64(&w, "rules", m->rules_version);
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
        if (m->fallback)
            hw_u64(&w, "fallback", 1);
        if (m->fallbacks)
            hw_u64(&w, "fallbacks", m->fallbacks);
        if (m->nbytes)
            hw_u64(&w, "bytes", m->nbytes);
        if (m->served_bytes)
            hw_u64(&w, "served_bytes", m->served_bytes);
        break;
    }
    case PROTO_TOKENS:
        hw_u64(&w, "table", m->table);
        hw_u64(&w, "peer_table", m->peer_table);
        hw_u64(&w, "count", m->count);
        if (wide)
            hw_u64(&w, "wide", 1);
        if (m->nbytes)
            hw_u64(&w, "bytes", m->nbytes);
        break;
    case PROTO_HEARTBEAT:
        if (m->peer_table)
            hw_u64(&w, "peer_table", m->peer_table);
        break;
    case PROTO_NAMES:
        hw_u64(&w, "table", m->table);
        break;
    case PROTO_RULES:
        hw_u64(&w, "rules", m->rules_version);
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

ssize_t proto__header_write(const proto_msg_t *m, int wide, char *buf, size_t cap)
{
    ssize_t fl = fast_header(m, wide, buf, cap);
    if (fl >= 0)
        return fl;
    json_t *h = enc_header(m, wide);
    if (!h)
        return -EINVAL; /* json_string refuses invalid UTF-8 in a node name */
    char *s = json_dumps(h, JSON_COMPACT);
    json_decref(h);
    if (!s)
        return -ENOMEM;
    size_t hl = strlen(s);
    if (hl > cap) {
        free(s);
        return -EINVAL;
    }
    memcpy(buf, s, hl);
    free(s);
    return (ssize_t)hl;
}

/* ---- reading ---- */

/* The keys of internal.h's K_* fields. */
static const char *const key_names[K__N] = {
    "v", "type", "node", "seq", "period", "interval", "intervals", "period_ms",
    "remaining_ms", "names", "capacity", "table", "peer_table", "count", "completions",
    "dispatched", "busy", "code", "text", "weights", "wide", "epoch", "instance", "fallback",
    "fallbacks", "bytes", "served_bytes", "follows", "shadow", "lease", "leases", "rules",
    "sparse", "full", "shares", "basis", "renew", "gseq", "based", "regrant", "inflight",
    "base_us", "parts", "names_at", "names_of", "peer_names", "shards_k", "shards_gen",
    "shards_next", "shards_from",
};

static const unsigned char key_lens[K__N] = {1, 4, 4, 3, 6, 8, 9, 9, 12, 5, 8, 5, 10, 5, 11, 10,
                                             4, 4, 4, 7, 4, 5, 8, 8, 9, 5, 12, 7, 6, 5, 6, 5, 6, 4,
                                             6, 5, 5, 4, 5, 7, 8, 7, 5, 8, 8, 10, 8, 10,
                                             11, 11};

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

int proto__header_read(const void *data, size_t len, hview_t *hv, void **keep)
{
    *keep = NULL;
    if (flat_parse(data, len, hv))
        return 0;
    json_t *jh = json_loadb(data, len, JSON_REJECT_DUPLICATES, NULL);
    if (!jh || !json_is_object(jh)) {
        json_decref(jh);
        return -1;
    }
    jansson_view(jh, hv);
    *keep = jh;
    return 0;
}

void proto__header_release(void *keep)
{
    json_decref(keep);
}
