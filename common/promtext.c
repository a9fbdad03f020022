/* promtext.c - the Prometheus text exposition format 0.0.4 writer (see promtext.h). */
#include "common/promtext.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct promtext {
    char *buf;
    size_t len, cap;
    int err;
    promtext_type_t type;  /* of the current family */
    char family[256];      /* its name; "" before the first */
};

static const char *const type_names[] = {"counter", "gauge", "histogram"};

promtext_t *promtext_new(void)
{
    promtext_t *p = calloc(1, sizeof *p);
    if (p && !(p->buf = malloc(p->cap = 4096))) {
        free(p);
        return NULL;
    }
    if (p)
        p->buf[0] = '\0';
    return p;
}

void promtext_destroy(promtext_t **pp)
{
    if (!pp || !*pp)
        return;
    free((*pp)->buf);
    free(*pp);
    *pp = NULL;
}

void promtext_reset(promtext_t *p)
{
    p->len = 0;
    p->buf[0] = '\0';
    p->err = 0;
    p->family[0] = '\0';
}

int promtext_error(const promtext_t *p)
{
    return p->err;
}

const char *promtext_data(const promtext_t *p, size_t *len)
{
    if (len)
        *len = p->len;
    return p->buf;
}

static void fail(promtext_t *p, int err)
{
    if (!p->err)
        p->err = err;
}

/* Room for n more bytes and the NUL. */
static int reserve(promtext_t *p, size_t n)
{
    if (p->err)
        return -1;
    if (p->len + n + 1 <= p->cap)
        return 0;
    size_t cap = p->cap;
    while (cap < p->len + n + 1)
        cap *= 2;
    char *b = realloc(p->buf, cap);
    if (!b) {
        fail(p, -ENOMEM);
        return -1;
    }
    p->buf = b;
    p->cap = cap;
    return 0;
}

static void put(promtext_t *p, const char *s, size_t n)
{
    if (reserve(p, n) < 0)
        return;
    memcpy(p->buf + p->len, s, n);
    p->len += n;
    p->buf[p->len] = '\0';
}

static void puts_(promtext_t *p, const char *s)
{
    put(p, s, strlen(s));
}

/* s with \ and newline escaped, and " too when `quote` (label values). */
static void put_escaped(promtext_t *p, const char *s, int quote)
{
    for (const char *run = s;; s++) {
        const char *esc = *s == '\\' ? "\\\\" : *s == '\n' ? "\\n"
                        : (quote && *s == '"') ? "\\\"" : NULL;
        if (!esc && *s)
            continue;
        put(p, run, (size_t)(s - run));
        if (!*s)
            return;
        puts_(p, esc);
        run = s + 1;
    }
}

/* A value as the format writes it, into b[40]: exact integers, else the
 * shorter of %.15g and %.17g that reads back as v. */
static const char *fmt_double(char *b, double v)
{
    if (isnan(v))
        return "NaN";
    if (isinf(v))
        return v > 0 ? "+Inf" : "-Inf";
    if (v == floor(v) && fabs(v) < 0x1p53)
        snprintf(b, 40, "%.0f", v);
    else if (snprintf(b, 40, "%.15g", v), strtod(b, NULL) != v)
        snprintf(b, 40, "%.17g", v);
    return b;
}

static void put_double(promtext_t *p, double v)
{
    char b[40];
    puts_(p, fmt_double(b, v));
}

static int name_ok(const char *s, int colon)
{
    if (!*s || (*s >= '0' && *s <= '9'))
        return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '_' || (colon && *s == ':')))
            return 0;
    return 1;
}

int promtext_family(promtext_t *p, const char *name, promtext_type_t type, const char *help)
{
    if (p->err)
        return p->err;
    if (!name_ok(name, 1) || strlen(name) >= sizeof p->family || (unsigned)type > PROMTEXT_HISTOGRAM) {
        fail(p, -EINVAL);
        return p->err;
    }
    snprintf(p->family, sizeof p->family, "%s", name);
    p->type = type;
    puts_(p, "# HELP ");
    puts_(p, name);
    puts_(p, " ");
    put_escaped(p, help ? help : "", 0);
    puts_(p, "\n# TYPE ");
    puts_(p, name);
    puts_(p, " ");
    puts_(p, type_names[type]);
    puts_(p, "\n");
    return p->err;
}

/* "family[suffix]{labels[,le="..."]} " */
static void series(promtext_t *p, const char *suffix, const promtext_label_t *l, size_t n,
                   const char *le)
{
    puts_(p, p->family);
    puts_(p, suffix);
    if (n || le) {
        puts_(p, "{");
        for (size_t i = 0; i < n; i++) {
            if (!name_ok(l[i].name, 0) || strcmp(l[i].name, "le") == 0) {
                fail(p, -EINVAL);
                return;
            }
            puts_(p, i ? "," : "");
            puts_(p, l[i].name);
            puts_(p, "=\"");
            put_escaped(p, l[i].value ? l[i].value : "", 1);
            puts_(p, "\"");
        }
        if (le) {
            puts_(p, n ? ",le=\"" : "le=\"");
            puts_(p, le);
            puts_(p, "\"");
        }
        puts_(p, "}");
    }
    puts_(p, " ");
}

/* A sample of a counter or gauge family may follow. */
static int scalar_ok(promtext_t *p)
{
    if (!p->err && (!p->family[0] || p->type == PROMTEXT_HISTOGRAM))
        fail(p, -EINVAL);
    return !p->err;
}

int promtext_value(promtext_t *p, const promtext_label_t *l, size_t n, double v)
{
    if (!scalar_ok(p))
        return p->err;
    series(p, "", l, n, NULL);
    put_double(p, v);
    puts_(p, "\n");
    return p->err;
}

int promtext_u64(promtext_t *p, const promtext_label_t *l, size_t n, uint64_t v)
{
    if (!scalar_ok(p))
        return p->err;
    char b[24];
    snprintf(b, sizeof b, "%" PRIu64 "\n", v);
    series(p, "", l, n, NULL);
    puts_(p, b);
    return p->err;
}

int promtext_histogram(promtext_t *p, const promtext_label_t *l, size_t n, const double *bounds,
                       size_t nb, const uint64_t *counts, double sum)
{
    if (!p->err && (!p->family[0] || p->type != PROMTEXT_HISTOGRAM))
        fail(p, -EINVAL);
    for (size_t i = 1; !p->err && i < nb; i++)
        if (!(bounds[i - 1] < bounds[i]))
            fail(p, -EINVAL);
    if (p->err)
        return p->err;
    uint64_t cum = 0;
    char le[40], b[24];
    for (size_t i = 0; i <= nb; i++) {
        cum += counts[i];
        series(p, "_bucket", l, n, i < nb ? fmt_double(le, bounds[i]) : "+Inf");
        snprintf(b, sizeof b, "%" PRIu64 "\n", cum);
        puts_(p, b);
    }
    series(p, "_sum", l, n, NULL);
    put_double(p, sum);
    puts_(p, "\n");
    series(p, "_count", l, n, NULL);
    snprintf(b, sizeof b, "%" PRIu64 "\n", cum);
    puts_(p, b);
    return p->err;
}

size_t promtext_bucket(const double *bounds, size_t nb, double v)
{
    size_t lo = 0, hi = nb; /* the answer is in [lo, hi] */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v <= bounds[mid])
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}
