/* msg.c - the protocol's names (types, reject reasons), the name rule on
 * the wire, reject counters and message storage (init, clear, reserve). */
#include "common/proto/internal.h"

#include "common/names.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

const char *const proto__type_names[NTYPES] = {
    [PROTO_HELLO] = "hello",         [PROTO_WELCOME] = "welcome",
    [PROTO_REPORT] = "report",       [PROTO_TOKENS] = "tokens",
    [PROTO_HEARTBEAT] = "heartbeat", [PROTO_GOODBYE] = "goodbye",
    [PROTO_ERROR] = "error",         [PROTO_RULES] = "rules",
    [PROTO_WHO] = "who",
    [PROTO_NAMES] = "names",
};

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
    return proto__type_names[t];
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

/* The rule has one owner, common/names. */
_Static_assert(PROTO_NAME_MAX == NAMES_MAX, "protocol names follow common/names");

int proto_name_check(const char *name, size_t len)
{
    return names_check(name, len);
}

uint32_t proto_instance_tag(uint64_t instance)
{
    return (uint32_t)instance;
}

size_t proto_node_id(const char *name, uint64_t instance, unsigned char *id)
{
    size_t n = strnlen(name, PROTO_NAME_MAX);
    memcpy(id, name, n);
    if (!instance)
        return n;
    uint32_t t = proto_instance_tag(instance);
    id[n] = 0;
    for (int i = 0; i < 4; i++)
        id[n + 1 + (size_t)i] = (unsigned char)(t >> (8 * i));
    return n + 5;
}

int proto_node_id_split(const void *id, size_t len, const char *name, uint32_t *tag)
{
    const unsigned char *p = id;
    size_t n = strlen(name);
    if (len < n || memcmp(p, name, n) != 0 || (len != n && (len != n + 5 || p[n] != 0)))
        return -EINVAL;
    uint32_t t = 0;
    if (len == n + 5)
        for (int i = 0; i < 4; i++)
            t |= (uint32_t)p[n + 1 + (size_t)i] << (8 * i);
    *tag = t;
    return len == n + 5;
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
#define FREE_BUF(f) free(m->f);
    PROTO__MSG_BUFFERS(FREE_BUF)
#undef FREE_BUF
    proto_msg_init(m);
}

int proto__grow(void *pp, size_t *cap, size_t n, size_t sz)
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
            rc = proto__grow(&m->report, &m->cap_report, n, sizeof *m->report);
        else if (m->type == PROTO_TOKENS)
            rc = proto__grow(&m->tokens, &m->cap_tokens, n, sizeof *m->tokens);
        else
            return -EINVAL;
        if (rc)
            return rc;
    }
    if (nnames > 0) {
        if ((rc = proto__grow(&m->names_own, &m->cap_names, nnames, sizeof *m->names_own)))
            return rc;
        m->names = m->names_own;
    }
    return 0;
}

int proto_msg_reserve_bytes(proto_msg_t *m, size_t n)
{
    /* One capacity for both arrays: a message is one type at a time, and
     * the records are the same size or the report's is larger. */
    if (m->type == PROTO_REPORT) {
        if (m->tbytes) { /* was a tokens message: its array goes */
            free(m->tbytes);
            m->tbytes = NULL;
            m->cap_bytes = 0;
        }
        return n ? proto__grow(&m->rbytes, &m->cap_bytes, n, sizeof *m->rbytes) : 0;
    }
    if (m->type == PROTO_TOKENS) {
        if (m->rbytes) {
            free(m->rbytes);
            m->rbytes = NULL;
            m->cap_bytes = 0;
        }
        return n ? proto__grow(&m->tbytes, &m->cap_bytes, n, sizeof *m->tbytes) : 0;
    }
    return -EINVAL;
}

void proto__msg_reset(proto_msg_t *m)
{
    proto_msg_t keep = *m;
    memset(m, 0, sizeof *m);
#define KEEP(f) m->f = keep.f;
    PROTO__MSG_BUFFERS(KEEP)
    PROTO__MSG_CAPS(KEEP)
#undef KEEP
}

uint64_t proto_basis(uint64_t period, uint32_t interval, uint32_t intervals)
{
    if (!intervals || interval >= intervals || period > (PROTO_MAX_COUNT - 1) / intervals)
        return 0;
    uint64_t b = period * intervals + interval + 1;
    return b <= PROTO_MAX_COUNT ? b : 0;
}
