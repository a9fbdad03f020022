/* encode.c - proto_encode(): a message into its frames (header, names,
 * weights, records), in encoder-owned buffers reused across calls. */
#include "common/proto/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

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
        if ((rc = proto__enc_compact(m, nb, p)) <= 0)
            return rc;
        *wide = 1; /* a value too big for 32 bits: start again, wide */
    }
    size_t rs = rep ? PROTO_REPORT_REC_SIZE : PROTO_TOKENS_REC_SIZE;
    if ((rc = frame_at(e, fi, m->count * rs, &p)))
        return rc;
    return proto__enc_wide(m, nb, p);
}

int proto_encode(const proto_msg_t *m, proto_enc_t *e)
{
    int rc = proto__check(m);
    if (rc)
        return rc;
    /* The records go first (into their frame, the last one) because the
     * header says whether they are wide. */
    e->nframes = 0;
    int wide = 0;
    unsigned char *p;
    size_t rec_frame = 1 + (m->has_names ? 1 : 0) + (m->has_weights ? 1 : 0);
    if (type_has_records(m->type) && (rc = enc_records(m, e, rec_frame, &wide)))
        return rc;
    if (m->nbytes) {
        size_t rs = m->type == PROTO_REPORT ? PROTO_REPORT_BYTES_SIZE : PROTO_TOKENS_BYTES_SIZE;
        if ((rc = frame_at(e, rec_frame + 1, m->nbytes * rs, &p)) ||
            (rc = proto__enc_bytes(m, m->has_names ? m->nnames : UINT64_MAX, p)))
            return rc;
    }
    e->nframes = 0;
    if ((rc = enc_frame(e, PROTO_HEADER_MAX, &p)))
        return rc;
    ssize_t fl = proto__header_write(m, wide, (char *)p, PROTO_HEADER_MAX);
    if (fl < 0)
        return (int)fl;
    e->len[0] = (size_t)fl;

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

    const char *text;
    size_t tlen;
    if (proto__text(m, &text, &tlen)) {
        if ((rc = enc_frame(e, tlen, &p)))
            return rc;
        if (tlen)
            memcpy(p, text, tlen);
    }
    if (type_has_records(m->type))
        e->nframes++; /* the records frame, written above */
    if (m->nbytes)
        e->nframes++; /* and the byte records' */
    return 0;
}
