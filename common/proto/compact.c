/* compact.c - the v3 compact record layout: 32-bit fields, report records of
 * PROTO_REPORT_COMPACT_SIZE bytes and tokens records of
 * PROTO_TOKENS_COMPACT_SIZE bytes, PROTO_COMPACT_UNLIMITED for "no limit". */
#include "common/proto/internal.h"

#include <errno.h>

/* Writes compact records into p while checking them (internal.h). */
int proto__enc_compact(const proto_msg_t *m, uint64_t nb, unsigned char *p)
{
    if (m->type == PROTO_REPORT) {
        for (size_t i = 0; i < m->count; i++, p += PROTO_REPORT_COMPACT_SIZE) {
            const proto_report_rec_t *r = &m->report[i];
            if (!rep_fits(r, nb))
                return proto__rep_valid(r, nb) ? 1 : -EINVAL;
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

/* Compact counters take any 32-bit value; in l_left / l_tokens
 * PROTO_COMPACT_UNLIMITED means no limit. */
static proto_reason_t dec_report(proto_msg_t *m, const unsigned char *p)
{
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

static proto_reason_t dec_tokens(proto_msg_t *m, const unsigned char *p)
{
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

proto_reason_t proto__dec_compact(proto_msg_t *m, const unsigned char *p)
{
    return m->type == PROTO_REPORT ? dec_report(m, p) : dec_tokens(m, p);
}
