/* check.c - what a message must satisfy before it is encoded: known type,
 * valid names, timing and counters in range, arrays present.  The records'
 * values are checked by the layouts as they write them (internal.h). */
#include "common/proto/internal.h"

#include <errno.h>
#include <string.h>

int proto_shadow_check(const char *s, size_t len, size_t nnames)
{
    size_t i = 0;
    uint64_t prev = 0;
    int first = 1;
    while (i < len) {
        if (s[i] < '0' || s[i] > '9' || (s[i] == '0' && i + 1 < len && s[i + 1] != ','))
            return -EINVAL;
        uint64_t v = 0;
        for (; i < len && s[i] >= '0' && s[i] <= '9'; i++) {
            v = v * 10 + (uint64_t)(s[i] - '0');
            if (v >= nnames)
                return -EINVAL;
        }
        if (!first && v <= prev)
            return -EINVAL;
        prev = v;
        first = 0;
        if (i < len && (s[i] != ',' || ++i == len))
            return -EINVAL;
    }
    return 0;
}

size_t proto_part_len(const char *const *names, size_t n, size_t from)
{
    size_t bytes = 0, k = 0;
    while (from + k < n && k < PROTO_PART_NAMES) {
        size_t l = strlen(names[from + k]) + 1;
        if (bytes + l > PROTO_PART_BYTES)
            break;
        bytes += l;
        k++;
    }
    return k;
}

int proto_shards_ok(const proto_msg_t *m)
{
    if (!m->shards_k)
        return !m->shards_gen && !m->shards_next && !m->shards_from;
    if (m->shards_k > PROTO_SHARDS_MAX || !m->shards_gen || m->shards_gen > PROTO_MAX_COUNT)
        return 0;
    if (!m->shards_next)
        return !m->shards_from;
    return m->shards_next <= PROTO_SHARDS_MAX && m->shards_next != m->shards_k &&
           m->shards_from >= 1 && m->shards_from <= PROTO_MAX_COUNT;
}

/* Validates a message for encoding (internal.h).  Returns 0 or -EINVAL. */
int proto__check(const proto_msg_t *m)
{
    if (!proto_type_str(m->type))
        return -EINVAL;
    if (proto_name_check(m->node, strnlen(m->node, sizeof m->node)) != 0)
        return -EINVAL;
    if (m->seq > (uint64_t)INT64_MAX || m->follows > PROTO_MAX_COUNT || m->lease > PROTO_LEASE_MAX ||
        m->leases > 1 || m->sparse > 1 || m->sparse < 0 || m->full > 1 || m->full < 0 ||
        m->basis > PROTO_MAX_COUNT ||
        m->renew > 1 || m->renew < 0 || m->regrant > 1 || m->regrant < 0 ||
        m->gseq > PROTO_MAX_COUNT || m->base_us > PROTO_BASE_US_MAX ||
        ((m->has_inflight || m->base_us) && m->type != PROTO_REPORT))
        return -EINVAL;
    if (!proto_shards_ok(m)) /* written only where a lease is (header.c) */
        return -EINVAL;
    if (m->type == PROTO_TOKENS && m->renew && m->gseq && m->based > m->count)
        return -EINVAL;
    if (m->parts < 0 || m->parts > 1 || m->peer_names > PROTO_MAX_COUNT)
        return -EINVAL;
    if (m->type == PROTO_NAMES && (!m->has_names || !m->nnames || !m->names_of || !m->table))
        return -EINVAL;
    if (m->has_names && m->names_of && type_may_have_part(m->type)) {
        if (m->names_of > PROTO_MAX_RECORDS || m->names_at > m->names_of ||
            m->nnames > m->names_of - m->names_at || (m->type != PROTO_NAMES && m->names_at))
            return -EINVAL;
        size_t bytes = 0;
        for (size_t i = 0; i < m->nnames; i++)
            bytes += m->names[i] ? strnlen(m->names[i], PROTO_NAME_MAX + 1) + 1 : 0;
        if (bytes > PROTO_PART_BYTES || m->nnames > PROTO_PART_NAMES)
            return -EINVAL;
    }
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
    if (m->shadow && m->shadow[0] &&
        (!m->has_names || !type_may_have_weights(m->type) ||
         proto_shadow_check(m->shadow, strlen(m->shadow), m->nnames) < 0))
        return -EINVAL;
    switch (m->type) {
    case PROTO_HELLO:
        if (!count_ok(m->capacity) || m->table == 0 || m->instance > PROTO_MAX_COUNT)
            return -EINVAL;
        break;
    case PROTO_WELCOME:
        if ((m->has_names && m->table == 0) || m->rules_version > PROTO_MAX_COUNT)
            return -EINVAL;
        break;
    case PROTO_REPORT:
        if (m->period > PROTO_MAX_COUNT || m->table == 0 || !count_ok(m->completions) ||
            !count_ok(m->dispatched) || !(m->busy_seconds >= 0 && m->busy_seconds <= MAX_BUSY) ||
            m->remaining_ms > MAX_PERIOD_MS || m->interval >= MAX_INTERVALS ||
            (m->fallback != 0 && m->fallback != 1) || !count_ok(m->fallbacks) ||
            !count_ok(m->served_bytes))
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
    case PROTO_RULES:
        if (m->rules_version == 0 || m->rules_version > PROTO_MAX_COUNT ||
            m->rules_len > PROTO_RULES_MAX || (m->rules_len && !m->rules_text))
            return -EINVAL;
        break;
    case PROTO_WHO:
        if (m->who_len > PROTO_WHO_MAX || (m->who_len && !m->who_text))
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
        if (m->nbytes > PROTO_MAX_RECORDS ||
            (m->nbytes && !(m->type == PROTO_REPORT ? (void *)m->rbytes : (void *)m->tbytes)))
            return -EINVAL;
    } else if (m->nbytes) {
        return -EINVAL;
    }
    if (m->has_names) {
        for (size_t i = 0; i < m->nnames; i++)
            if (!m->names[i] || proto_name_check(m->names[i], strnlen(m->names[i], PROTO_NAME_MAX + 1)))
                return -EINVAL;
    }
    return 0;
}

/* The full check of a report record (internal.h). */
int proto__rep_valid(const proto_report_rec_t *r, uint64_t nb)
{
    return count_ok(r->queued) && count_ok(r->arrivals_interval) &&
           count_ok(r->arrivals_period) && count_ok(r->served_r) && count_ok(r->served_l) &&
           count_ok(r->served_o) && tok_ok(r->r_left, 0) && tok_ok(r->l_left, 1) &&
           r->flags == 0 && r->reserved == 0 && r->bucket < nb;
}
