/* decode.c - proto_decode(): frames into a message, checking the header's
 * fields, the names and weights frames and the records frame's size; any
 * byte sequence is safe and every rejection has a counted reason. */
#include "common/proto/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

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
static proto_reason_t dec_names(proto_msg_t *m, const proto_frame_t *f, size_t declared,
                                size_t *bad_at)
{
    const unsigned char *d = f->data;
    size_t len = f->len;
    *bad_at = len;
    if (len == 0 && declared != 0)
        return PROTO_E_COUNT;
    if (len > 0 && d[len - 1] != '\0')
        return PROTO_E_TRUNCATED; /* the last name is cut off */
    size_t n = 0;
    for (size_t i = 0; i < len; i++)
        n += d[i] == '\0';
    if (n != declared)
        return PROTO_E_COUNT;
    if (proto__grow(&m->namebuf, &m->cap_namebuf, len ? len : 1, 1) ||
        (n && proto__grow(&m->names_own, &m->cap_names, n, sizeof *m->names_own)))
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
            *bad_at = (size_t)(p - m->namebuf);
            break;
        }
        size_t slot = hash_name(p, l) & (hcap - 1);
        while (set[slot]) {
            const char *o = m->names[set[slot] - 1];
            if (strcmp(o, p) == 0) {
                why = PROTO_E_NAMES;
                *bad_at = (size_t)(p - m->namebuf);
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
    if (n && proto__grow(&m->weights_own, &m->cap_weights, n, sizeof *m->weights_own))
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

static proto_reason_t decode(proto_msg_t *m, const proto_frame_t *frames, size_t nframes)
{
    proto_reason_t why = PROTO_OK;
    size_t bad_at = 0; /* names frame: where it went wrong (m->bad_at) */
    void *jh = NULL; /* what the header view points into */
    proto__msg_reset(m);
    if (!frames || nframes == 0 || !frames[0].data || frames[0].len == 0)
        return PROTO_E_TRUNCATED;
    if (frames[0].len > PROTO_HEADER_MAX)
        return PROTO_E_JSON;
    hview_t hv;
    const hview_t *h = &hv;
    if (proto__header_read(frames[0].data, frames[0].len, &hv, &jh)) {
        why = PROTO_E_JSON;
        goto out;
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
        if (strlen(proto__type_names[i]) == t->len && memcmp(t->s, proto__type_names[i], t->len) == 0)
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
    if (hv.v[K_EPOCH].kind != V_NONE && !type_has_epoch(m->type)) {
        why = PROTO_E_FIELD;
        goto out;
    }
    GET(K_EPOCH, 0, PROTO_MAX_COUNT, m->epoch);
    if (hv.v[K_INSTANCE].kind != V_NONE && !type_has_instance(m->type)) {
        why = PROTO_E_FIELD;
        goto out;
    }
    GET(K_INSTANCE, 0, PROTO_MAX_COUNT, m->instance);
    if (hv.v[K_FOLLOWS].kind != V_NONE && !type_has_follows(m->type)) {
        why = PROTO_E_FIELD;
        goto out;
    }
    GET(K_FOLLOWS, 0, PROTO_MAX_COUNT, m->follows);
    if ((hv.v[K_LEASE].kind != V_NONE && !type_has_lease(m->type)) ||
        (hv.v[K_LEASES].kind != V_NONE && m->type != PROTO_HELLO)) {
        why = PROTO_E_FIELD;
        goto out;
    }
    GET(K_LEASE, 0, PROTO_LEASE_MAX, m->lease);
    GET(K_LEASES, 0, 1, m->leases);
    if ((hv.v[K_SHARDS_K].kind != V_NONE || hv.v[K_SHARDS_GEN].kind != V_NONE ||
         hv.v[K_SHARDS_NEXT].kind != V_NONE || hv.v[K_SHARDS_FROM].kind != V_NONE) &&
        !type_has_lease(m->type)) {
        why = PROTO_E_FIELD;
        goto out;
    }
    GET(K_SHARDS_K, 0, PROTO_SHARDS_MAX, m->shards_k);
    GET(K_SHARDS_GEN, 0, PROTO_MAX_COUNT, m->shards_gen);
    GET(K_SHARDS_NEXT, 0, PROTO_SHARDS_MAX, m->shards_next);
    GET(K_SHARDS_FROM, 0, PROTO_MAX_COUNT, m->shards_from);
    if (!proto_shards_ok(m)) {
        why = PROTO_E_FIELD;
        goto out;
    }
    if ((hv.v[K_SPARSE].kind != V_NONE && !type_has_sparse(m->type)) ||
        (hv.v[K_FULL].kind != V_NONE && !type_has_full(m->type))) {
        why = PROTO_E_FIELD;
        goto out;
    }
    GET(K_SPARSE, 0, 1, m->sparse);
    GET(K_FULL, 0, 1, m->full);
    if (hv.v[K_BASIS].kind != V_NONE && !type_has_basis(m->type)) {
        why = PROTO_E_FIELD;
        goto out;
    }
    GET(K_BASIS, 0, PROTO_MAX_COUNT, m->basis);
    if ((hv.v[K_RENEW].kind != V_NONE && !type_has_renew(m->type)) ||
        ((hv.v[K_GSEQ].kind != V_NONE || hv.v[K_BASED].kind != V_NONE) &&
         m->type != PROTO_TOKENS) ||
        (hv.v[K_REGRANT].kind != V_NONE && m->type != PROTO_REPORT)) {
        why = PROTO_E_FIELD;
        goto out;
    }
    GET(K_RENEW, 0, 1, m->renew);
    GET(K_GSEQ, 0, PROTO_MAX_COUNT, m->gseq);
    GET(K_REGRANT, 0, 1, m->regrant);
    {
        uint64_t based_ = 0;
        GET(K_BASED, 0, PROTO_MAX_RECORDS, based_);
        /* "based" only on a renewing message with a sequence */
        if (hv.v[K_BASED].kind != V_NONE && (!m->renew || !m->gseq)) {
            why = PROTO_E_FIELD;
            goto out;
        }
        m->based = hv.v[K_BASED].kind != V_NONE ? (size_t)based_ : SIZE_MAX;
    }
    if ((hv.v[K_FALLBACK].kind != V_NONE || hv.v[K_FALLBACKS].kind != V_NONE ||
         hv.v[K_SERVED_BYTES].kind != V_NONE) &&
        m->type != PROTO_REPORT) {
        why = PROTO_E_FIELD;
        goto out;
    }
    if (hv.v[K_RULES].kind != V_NONE && m->type != PROTO_RULES && m->type != PROTO_WELCOME) {
        why = PROTO_E_FIELD;
        goto out;
    }
    if (hv.v[K_BYTES].kind != V_NONE && !type_has_records(m->type)) {
        why = PROTO_E_FIELD;
        goto out;
    }

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
    const hval_t *sh = &hv.v[K_SHADOW];
    if (sh->kind != V_NONE) {
        if (sh->kind != V_STR || !type_may_have_weights(m->type) || !names) {
            why = PROTO_E_FIELD;
            goto out;
        }
        if (proto_shadow_check(sh->s, sh->len, nnames) < 0) {
            why = PROTO_E_RANGE;
            goto out;
        }
        if (proto__grow(&m->shadow_own, &m->cap_shadow, sh->len + 1, 1)) {
            why = PROTO_E__COUNT;
            goto out;
        }
        memcpy(m->shadow_own, sh->s, sh->len);
        m->shadow_own[sh->len] = '\0';
        m->shadow = m->shadow_own;
    }
    const hval_t *shv = &hv.v[K_SHARES];
    if (shv->kind != V_NONE) {
        /* tokens only; a list that is not good refuses the message */
        if (shv->kind != V_STR || m->type != PROTO_TOKENS) {
            why = PROTO_E_FIELD;
            goto out;
        }
        if (proto__grow(&m->shares_own, &m->cap_shares, PROTO_SHARES_MAX, sizeof *m->shares_own)) {
            why = PROTO_E__COUNT;
            goto out;
        }
        int n = proto_shares_parse(shv->s, shv->len, m->shares_own, NULL);
        if (n < 0) {
            why = PROTO_E_RANGE;
            goto out;
        }
        m->has_shares = 1;
        m->nshares = (size_t)n;
        m->shares = m->shares_own;
    }
    const hval_t *ifv = &hv.v[K_INFLIGHT];
    if (ifv->kind != V_NONE) {
        /* report only; a list that is not good refuses the message */
        if (ifv->kind != V_STR || m->type != PROTO_REPORT) {
            why = PROTO_E_FIELD;
            goto out;
        }
        if (proto__grow(&m->inflight_own, &m->cap_inflight, PROTO_SHARES_MAX,
                        sizeof *m->inflight_own)) {
            why = PROTO_E__COUNT;
            goto out;
        }
        int n = proto_shares_parse(ifv->s, ifv->len, m->inflight_own, NULL);
        if (n < 0) {
            why = PROTO_E_RANGE;
            goto out;
        }
        m->has_inflight = 1;
        m->ninflight = (size_t)n;
        m->inflight = m->inflight_own;
    }
    if (hv.v[K_BASE_US].kind != V_NONE && m->type != PROTO_REPORT) {
        why = PROTO_E_FIELD;
        goto out;
    }
    GET(K_BASE_US, 0, PROTO_BASE_US_MAX, m->base_us);
    if (hv.v[K_BASE_US].kind != V_NONE && m->base_us == 0) {
        why = PROTO_E_RANGE;
        goto out;
    }
    if (m->type != PROTO_TOKENS)
        m->based = 0; /* "based" is refused above on other types */
    /* names in parts */
    int part = hv.v[K_NAMES_OF].kind != V_NONE;
    if (((hv.v[K_PARTS].kind != V_NONE) && m->type != PROTO_HELLO && m->type != PROTO_WELCOME) ||
        ((part || hv.v[K_NAMES_AT].kind != V_NONE) && (!type_may_have_part(m->type) || !names)) ||
        (hv.v[K_NAMES_AT].kind != V_NONE && m->type != PROTO_NAMES) ||
        (hv.v[K_PEER_NAMES].kind != V_NONE && !type_has_peer_names(m->type))) {
        why = PROTO_E_FIELD;
        goto out;
    }
    GET(K_PARTS, 0, 1, m->parts);
    GET(K_NAMES_AT, m->type == PROTO_NAMES, PROTO_MAX_RECORDS, m->names_at);
    GET(K_NAMES_OF, m->type == PROTO_NAMES, PROTO_MAX_RECORDS, m->names_of);
    GET(K_PEER_NAMES, 0, PROTO_MAX_COUNT, m->peer_names);
    m->has_peer_names = hv.v[K_PEER_NAMES].kind != V_NONE;
    if (part && (m->names_of == 0 || m->names_at > m->names_of ||
                 nnames > m->names_of - m->names_at)) {
        why = PROTO_E_RANGE;
        goto out;
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
        GET(K_RULES, 0, PROTO_MAX_COUNT, m->rules_version);
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
        GET(K_FALLBACK, 0, 1, m->fallback);
        GET(K_FALLBACKS, 0, PROTO_MAX_COUNT, m->fallbacks);
        GET(K_SERVED_BYTES, 0, PROTO_MAX_COUNT, m->served_bytes);
        GET(K_BYTES, 0, PROTO_MAX_RECORDS, m->nbytes);
        break;
    }
    case PROTO_TOKENS:
        GET(K_TABLE, 1, UINT32_MAX, m->table);
        GET(K_PEER_TABLE, 1, UINT32_MAX, m->peer_table);
        GET(K_COUNT, 1, PROTO_MAX_RECORDS, m->count);
        GET(K_WIDE, 0, 1, m->wide);
        GET(K_BYTES, 0, PROTO_MAX_RECORDS, m->nbytes);
        if (m->based == SIZE_MAX) {
            m->based = m->count; /* absent: every record is a base */
        } else if (m->based > m->count) {
            why = PROTO_E_RANGE;
            goto out;
        }
        break;
    case PROTO_HEARTBEAT:
        GET(K_PEER_TABLE, 0, UINT32_MAX, m->peer_table);
        break;
    case PROTO_NAMES:
        GET(K_TABLE, 1, UINT32_MAX, m->table);
        if (!names || nnames == 0) {
            why = PROTO_E_FIELD;
            goto out;
        }
        break;
    case PROTO_RULES:
        GET(K_RULES, 1, PROTO_MAX_COUNT, m->rules_version);
        if (m->rules_version == 0) {
            why = PROTO_E_RANGE;
            goto out;
        }
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
         m->type == PROTO_NAMES || (m->type == PROTO_WELCOME && names)) &&
        m->table == 0) {
        why = PROTO_E_RANGE;
        goto out;
    }

    size_t want = 1 + (size_t)names + (size_t)weights + (size_t)type_has_records(m->type) +
                  (m->nbytes > 0) + (size_t)proto__text(m, NULL, NULL);
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
        if (part && (frames[fi].len > PROTO_PART_BYTES || nnames > PROTO_PART_NAMES)) {
            why = PROTO_E_RANGE; /* a part bigger than a part may be */
            bad_at = PROTO_PART_BYTES;
            goto out;
        }
        if ((why = dec_names(m, &frames[fi], nnames, &bad_at)) != PROTO_OK)
            goto out;
        bad_at = 0;
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
        why = m->wide ? proto__dec_wide(m, frames[fi].data)
                      : proto__dec_compact(m, frames[fi].data);
        fi++;
    }
    if (why == PROTO_OK && proto__text(m, NULL, NULL) &&
        (why = proto__dec_text(m, &frames[fi])) != PROTO_OK)
        goto out;
    if (why == PROTO_OK && m->nbytes) {
        size_t rs = m->type == PROTO_REPORT ? PROTO_REPORT_BYTES_SIZE : PROTO_TOKENS_BYTES_SIZE;
        if (frames[fi].len != m->nbytes * rs || !frames[fi].data) {
            why = frames[fi].len < m->nbytes * rs && frames[fi].len % rs == 0 ? PROTO_E_TRUNCATED
                                                                              : PROTO_E_COUNT;
            goto out;
        }
        if (proto_msg_reserve_bytes(m, m->nbytes)) {
            why = PROTO_E__COUNT;
            goto out;
        }
        why = proto__dec_bytes(m, frames[fi].data);
    }
out:
    proto__header_release(jh);
    if (why != PROTO_OK) {
        proto_type_t ty = m->type;
        proto__msg_reset(m);
        m->type = why == PROTO_E_TYPE ? 0 : ty;
        m->bad_at = bad_at;
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
