/* wide.c - the wide record layout (header "wide":1): 64-bit counters, report
 * records of PROTO_REPORT_REC_SIZE bytes and tokens records of
 * PROTO_TOKENS_REC_SIZE bytes.  A message goes wide when asked to or when a
 * value does not fit the compact layout. */
#include "common/proto/internal.h"

#include <errno.h>

/* Checks every record and writes the wide layout (internal.h). */
int proto__enc_wide(const proto_msg_t *m, uint64_t nb, unsigned char *p)
{
    if (m->type == PROTO_REPORT) {
        for (size_t i = 0; i < m->count; i++)
            if (!proto__rep_valid(&m->report[i], nb))
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

static proto_reason_t dec_report(proto_msg_t *m, const unsigned char *p)
{
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
        if (!proto__rep_valid(&m->report[i], nb))
            return PROTO_E_RANGE;
    return PROTO_OK;
}

static proto_reason_t dec_tokens(proto_msg_t *m, const unsigned char *p)
{
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

proto_reason_t proto__dec_wide(proto_msg_t *m, const unsigned char *p)
{
    return m->type == PROTO_REPORT ? dec_report(m, p) : dec_tokens(m, p);
}
