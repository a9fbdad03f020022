/* bytes.c - the byte records (frame 4, header "bytes":N): the bytes/s dimension of cost-aware tokens, one fixed layout with 64-bit fields. */
#include "common/proto/internal.h"

#include <errno.h>

/* A byte count left, which may be a debt: -PROTO_MAX_COUNT..PROTO_MAX_COUNT,
 * or PROTO_UNLIMITED where allowed. */
static int left_ok(int64_t v, int unlimited_ok)
{
    return (v >= -(int64_t)PROTO_MAX_COUNT && v <= (int64_t)PROTO_MAX_COUNT) ||
           (unlimited_ok && v == PROTO_UNLIMITED);
}

static int rbytes_valid(const proto_report_bytes_t *r, uint64_t nb)
{
    return r->bucket < nb && r->flags == 0 && count_ok(r->arrivals_interval) &&
           count_ok(r->arrivals_period) && count_ok(r->served) && left_ok(r->r_left, 0) &&
           left_ok(r->l_left, 1);
}

static int tbytes_valid(const proto_tokens_bytes_t *t, uint64_t nb)
{
    if (t->bucket >= nb || (t->flags & ~(PROTO_TOK_UNLIMITED | PROTO_TOK_OFF)))
        return 0;
    if (t->flags & PROTO_TOK_OFF)
        return 1;
    return tok_ok(t->r_bytes, 0) &&
           ((t->flags & PROTO_TOK_UNLIMITED) || tok_ok(t->l_bytes, 1));
}

int proto__enc_bytes(const proto_msg_t *m, uint64_t nb, unsigned char *p)
{
    if (m->type == PROTO_REPORT) {
        for (size_t i = 0; i < m->nbytes; i++, p += PROTO_REPORT_BYTES_SIZE) {
            const proto_report_bytes_t *r = &m->rbytes[i];
            if (!rbytes_valid(r, nb))
                return -EINVAL;
            put32(p, r->bucket);
            put32(p + 4, 0);
            put64(p + 8, r->arrivals_interval);
            put64(p + 16, r->arrivals_period);
            put64(p + 24, r->served);
            put64(p + 32, (uint64_t)r->r_left);
            put64(p + 40, (uint64_t)r->l_left);
        }
        return 0;
    }
    for (size_t i = 0; i < m->nbytes; i++, p += PROTO_TOKENS_BYTES_SIZE) {
        const proto_tokens_bytes_t *t = &m->tbytes[i];
        if (!tbytes_valid(t, nb))
            return -EINVAL;
        uint32_t fl = t->flags;
        if (!(fl & PROTO_TOK_OFF) && t->l_bytes == PROTO_UNLIMITED)
            fl |= PROTO_TOK_UNLIMITED;
        int zero_l = (fl & (PROTO_TOK_OFF | PROTO_TOK_UNLIMITED)) != 0;
        put32(p, t->bucket);
        put32(p + 4, fl);
        put64(p + 8, fl & PROTO_TOK_OFF ? 0 : (uint64_t)t->r_bytes);
        put64(p + 16, zero_l ? 0 : (uint64_t)t->l_bytes);
    }
    return 0;
}

proto_reason_t proto__dec_bytes(proto_msg_t *m, const unsigned char *p)
{
    uint64_t nb = m->has_names ? m->nnames : UINT64_MAX;
    if (m->type == PROTO_REPORT) {
        for (size_t i = 0; i < m->nbytes; i++, p += PROTO_REPORT_BYTES_SIZE) {
            proto_report_bytes_t *r = &m->rbytes[i];
            r->bucket = get32(p);
            r->flags = get32(p + 4);
            r->arrivals_interval = get64(p + 8);
            r->arrivals_period = get64(p + 16);
            r->served = get64(p + 24);
            r->r_left = (int64_t)get64(p + 32);
            r->l_left = (int64_t)get64(p + 40);
            if (!rbytes_valid(r, nb))
                return PROTO_E_RANGE;
        }
        return PROTO_OK;
    }
    for (size_t i = 0; i < m->nbytes; i++, p += PROTO_TOKENS_BYTES_SIZE) {
        proto_tokens_bytes_t *t = &m->tbytes[i];
        t->bucket = get32(p);
        t->flags = get32(p + 4);
        t->r_bytes = (int64_t)get64(p + 8);
        t->l_bytes = (int64_t)get64(p + 16);
        if (!tbytes_valid(t, nb))
            return PROTO_E_RANGE;
        if (t->flags & PROTO_TOK_OFF)
            t->r_bytes = t->l_bytes = 0;
        else if (t->flags & PROTO_TOK_UNLIMITED)
            t->l_bytes = PROTO_UNLIMITED;
    }
    return PROTO_OK;
}
