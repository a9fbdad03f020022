/* num.c - strict parsing of decimal integers, numbers, durations and byte sizes (see num.h). */
#include "common/num.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int num_i64(const char *s, int64_t *out)
{
    if (!s || !(isdigit((unsigned char)s[0]) || (s[0] == '-' && isdigit((unsigned char)s[1]))))
        return -EINVAL;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (*end)
        return -EINVAL;
    if (errno == ERANGE)
        return -ERANGE;
    *out = (int64_t)v;
    return 0;
}

int num_u64(const char *s, uint64_t *out)
{
    if (!s || !isdigit((unsigned char)s[0]))
        return -EINVAL;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end)
        return -EINVAL;
    if (errno == ERANGE)
        return -ERANGE;
    *out = (uint64_t)v;
    return 0;
}

/* strtod() of a prefix of s that starts with a digit, sign or point;
 * *end is where the number stops.  Returns 0, -EINVAL or -ERANGE. */
static int double_prefix(const char *s, double *v, char **end)
{
    if (!s || !(isdigit((unsigned char)s[0]) || s[0] == '-' || s[0] == '+' || s[0] == '.'))
        return -EINVAL;
    errno = 0;
    *v = strtod(s, end);
    if (*end == s)
        return -EINVAL;
    if (errno == ERANGE)
        return -ERANGE;
    return isfinite(*v) ? 0 : -EINVAL;
}

int num_double(const char *s, double *out)
{
    double v;
    char *end;
    int rc = double_prefix(s, &v, &end);
    if (rc == 0 && *end)
        rc = -EINVAL;
    if (rc == 0)
        *out = v;
    return rc;
}

int num_duration(const char *s, double *out)
{
    double v;
    char *end;
    int rc = double_prefix(s, &v, &end);
    if (rc < 0)
        return rc;
    if (strcmp(end, "ms") == 0)
        v /= 1000;
    else if (*end && strcmp(end, "s") != 0)
        return -EINVAL;
    *out = v;
    return 0;
}

int num_bytes(const char *s, uint64_t *out)
{
    if (!s || !isdigit((unsigned char)s[0]))
        return -EINVAL;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno == ERANGE)
        return -ERANGE;
    int shift = 0;
    switch (*end) {
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    case 't': case 'T': shift = 40; end++; break;
    }
    if (*end)
        return -EINVAL;
    if (shift && v > (UINT64_MAX >> shift))
        return -ERANGE;
    *out = (uint64_t)v << shift;
    return 0;
}

int num_i64_in(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    int64_t v;
    int rc = num_i64(s, &v);
    if (rc == 0 && (v < lo || v > hi))
        rc = -ERANGE;
    if (rc == 0)
        *out = v;
    return rc;
}

int num_double_in(const char *s, double lo, double hi, double *out)
{
    double v;
    int rc = num_double(s, &v);
    if (rc == 0 && !(v >= lo && v <= hi))
        rc = -ERANGE;
    if (rc == 0)
        *out = v;
    return rc;
}
