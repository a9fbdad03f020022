/* who.c - the messages that carry one frame of text after their header: rules (ctl -> node, the rule list) and who (node -> ctl, the identities active in its buckets, issue 27). */
#include "common/proto/internal.h"

#include <string.h>

int proto__text(const proto_msg_t *m, const char **text, size_t *len)
{
    const char *t;
    size_t n;
    if (m->type == PROTO_RULES) {
        t = m->rules_text;
        n = m->rules_len;
    } else if (m->type == PROTO_WHO) {
        t = m->who_text;
        n = m->who_len;
    } else {
        return 0;
    }
    if (text)
        *text = t;
    if (len)
        *len = n;
    return 1;
}

proto_reason_t proto__dec_text(proto_msg_t *m, const proto_frame_t *f)
{
    int who = m->type == PROTO_WHO;
    char **own = who ? &m->who_own : &m->rules_own;
    size_t *cap = who ? &m->cap_who : &m->cap_rules;
    if (f->len > (who ? PROTO_WHO_MAX : PROTO_RULES_MAX))
        return PROTO_E_RANGE;
    if (f->len && !f->data)
        return PROTO_E_TRUNCATED;
    if (proto__grow(own, cap, f->len + 1, 1))
        return PROTO_E__COUNT;
    if (f->len)
        memcpy(*own, f->data, f->len);
    (*own)[f->len] = '\0';
    if (who) {
        m->who_text = *own;
        m->who_len = f->len;
    } else {
        m->rules_text = *own;
        m->rules_len = f->len;
    }
    return PROTO_OK;
}
