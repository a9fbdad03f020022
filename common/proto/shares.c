/* shares.c - the tokens header's share list (issue 28): "bucket:tokens,..." formatted and parsed, fail closed on garbage. */
#include <errno.h>
#include <stdio.h>

#include "common/proto.h"

int proto_shares_format(const proto_share_rec_t *recs, size_t n, char *buf, size_t cap)
{
    if (n > PROTO_SHARES_MAX || cap == 0)
        return -EINVAL;
    size_t o = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        if ((i > 0 && recs[i].bucket <= recs[i - 1].bucket) || recs[i].tokens < 1 ||
            (uint64_t)recs[i].tokens > PROTO_MAX_COUNT)
            return -EINVAL;
        int w = snprintf(buf + o, cap - o, "%s%u:%lld", i ? "," : "", recs[i].bucket,
                         (long long)recs[i].tokens);
        if (w < 0 || (size_t)w >= cap - o)
            return -EINVAL;
        o += (size_t)w;
    }
    return (int)o;
}

/* Reads a decimal number of at most 16 digits at s[*i..len) into *v.
 * Returns 0 or -EINVAL (no digit, too long). */
static int number(const char *s, size_t len, size_t *i, uint64_t *v)
{
    size_t d = 0;
    *v = 0;
    while (*i < len && s[*i] >= '0' && s[*i] <= '9') {
        if (++d > 16)
            return -EINVAL;
        *v = *v * 10 + (uint64_t)(s[*i] - '0');
        (*i)++;
    }
    return d ? 0 : -EINVAL;
}

int proto_shares_parse(const char *s, size_t len, proto_share_rec_t *out, size_t *where)
{
    size_t i = 0, n = 0;
    while (i < len) {
        uint64_t b, t;
        if ((n > 0 && s[i++] != ',') || n >= PROTO_SHARES_MAX)
            goto bad;
        if (number(s, len, &i, &b) < 0 || b > UINT32_MAX || i >= len || s[i++] != ':')
            goto bad;
        if (number(s, len, &i, &t) < 0 || t < 1 || t > PROTO_MAX_COUNT)
            goto bad;
        if (n > 0 && b <= out[n - 1].bucket)
            goto bad;
        out[n].bucket = (uint32_t)b;
        out[n].tokens = (int64_t)t;
        n++;
    }
    return (int)n;
bad:
    if (where)
        *where = i;
    return -EINVAL;
}
