/* rules.c - the ordered rule list: parse and validate, compile into per-field bitsets, match first-wins, analyse for dead rules (rules.h). */
#include "common/rules.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/names.h"

typedef struct {
    char *s;     /* NULL: the member is absent (matches anything) */
    size_t len;
    int exact;   /* no '*' or '?' */
} pat_t;

typedef struct {
    int family;  /* 4 or 6 */
    int bits;
    uint8_t a[16];
} cidr_t;

typedef struct {
    char *json;             /* canonical text */
    char name[RULES_NAME_MAX + 1];
    pat_t user, cert, psk, key;
    uint32_t ops;           /* bit per rules_op_t */
    cidr_t cidrs[RULES_CIDRS_MAX];
    int ncidrs;             /* 0: any address */
    rules_action_t action;  /* RULES_BUCKET, RULES_TEMPLATE or RULES_DENY */
    char *bucket;           /* bucket name or template */
    int64_t reservation, limit;
} rule_t;

/* One exact value's rules (user or key index). */
typedef struct {
    uint64_t h;
    uint32_t off;           /* into bits, `words` words */
    uint32_t used;
} slot_t;

/* One string field's index: rules with an exact value by hash, rules
 * whose glob starts with a literal byte by that byte, the rest in `any`. */
typedef struct {
    slot_t *t;
    size_t mask;            /* size - 1 */
    uint32_t any;           /* set of the rules with no exact value or first byte */
    uint32_t first[256];    /* set of the globs starting with that byte */
} index_t;

struct rules {
    rule_t *v;
    size_t n;
    size_t words;
    uint64_t *bits;         /* every bitset, `words` words each */
    uint32_t ops[RULES_OP_COUNT];
    index_t user, key;
    uint32_t addr_any;      /* rules without an address, or a CIDR shorter than /8 */
    uint32_t addr4[256], addr6[256]; /* by the CIDR's first byte */
};

#define ALL_OPS ((1u << RULES_OP_COUNT) - 1)

static const char *const op_names[RULES_OP_COUNT] = {
    "read", "write", "delete", "arith", "touch", "admin",
    "nbd-read", "nbd-write", "nbd-flush", "nbd-trim",
};

const char *rules_op_name(rules_op_t op)
{
    return (unsigned)op < RULES_OP_COUNT ? op_names[op] : "?";
}

int rules_op_parse(const char *s, rules_op_t *op)
{
    for (int i = 0; i < RULES_OP_COUNT; i++)
        if (strcmp(s, op_names[i]) == 0) {
            *op = (rules_op_t)i;
            return 0;
        }
    return -EINVAL;
}

static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ULL;
    }
    return h ^ (h >> 29);
}

/* ---- globs ----------------------------------------------------------- */

/* `*` any run of bytes, `?` one byte; iterative with one backtrack point. */
static int glob_match(const char *p, size_t pn, const char *s, size_t sn)
{
    size_t pi = 0, si = 0, star = (size_t)-1, mark = 0;
    while (si < sn) {
        if (pi < pn && (p[pi] == '?' || p[pi] == s[si])) {
            pi++;
            si++;
        } else if (pi < pn && p[pi] == '*') {
            star = pi++;
            mark = si;
        } else if (star != (size_t)-1) {
            pi = star + 1;
            si = ++mark;
        } else {
            return 0;
        }
    }
    while (pi < pn && p[pi] == '*')
        pi++;
    return pi == pn;
}

static int pat_match(const pat_t *p, const char *s, size_t n)
{
    if (!p->s)
        return 1;
    if (p->exact)
        return n == p->len && memcmp(p->s, s, n) == 0;
    return glob_match(p->s, p->len, s, n);
}

/* Bytes before the first wildcard. */
static size_t literal_prefix(const pat_t *p)
{
    return strcspn(p->s, "*?");
}

/* Sound, conservative: nonzero only if every string `b` matches (with an
 * identity present) is matched by `a`. */
static int pat_covers(const pat_t *a, const pat_t *b)
{
    if (!a->s)
        return 1;
    if (!b->s)
        return 0;
    if (a->len == b->len && memcmp(a->s, b->s, a->len) == 0)
        return 1;
    if (a->len == 1 && a->s[0] == '*')
        return 1;
    size_t lit = literal_prefix(a);
    /* "lit*" (one trailing star, nothing else wild) */
    if (lit + 1 == a->len && a->s[lit] == '*') {
        size_t blit = b->exact ? b->len : literal_prefix(b);
        return blit >= lit && memcmp(a->s, b->s, lit) == 0;
    }
    if (!b->exact)
        return 0;
    return glob_match(a->s, a->len, b->s, b->len);
}

/* ---- addresses ------------------------------------------------------- */

static int parse_v4(const char *s, uint8_t out[4])
{
    int k = 0;
    while (k < 4) {
        if (*s < '0' || *s > '9')
            return -1;
        unsigned v = 0;
        int digits = 0;
        while (*s >= '0' && *s <= '9') {
            v = v * 10 + (unsigned)(*s++ - '0');
            if (++digits > 3 || v > 255)
                return -1;
        }
        out[k++] = (uint8_t)v;
        if (k < 4 && *s++ != '.')
            return -1;
    }
    return *s ? -1 : 0;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* RFC 4291 text (with "::" and a trailing dotted IPv4). */
static int parse_v6(const char *s, uint8_t out[16])
{
    uint16_t g[8];
    int n = 0, gap = -1;
    if (s[0] == ':' && s[1] == ':') {
        gap = 0;
        s += 2;
    }
    while (*s) {
        if (n >= 8)
            return -1;
        const char *dot = strchr(s, '.');
        if (dot && !strchr(s, ':')) {
            uint8_t v4[4];
            if (n > 6 || parse_v4(s, v4) != 0)
                return -1;
            g[n++] = (uint16_t)(v4[0] << 8 | v4[1]);
            g[n++] = (uint16_t)(v4[2] << 8 | v4[3]);
            break;
        }
        unsigned v = 0;
        int d = 0;
        while (hexval(*s) >= 0) {
            v = v << 4 | (unsigned)hexval(*s++);
            if (++d > 4)
                return -1;
        }
        if (!d)
            return -1;
        g[n++] = (uint16_t)v;
        if (!*s)
            break;
        if (*s++ != ':')
            return -1;
        if (*s == ':') {
            if (gap >= 0)
                return -1;
            gap = n;
            s++;
        } else if (!*s) {
            return -1;
        }
    }
    if (gap < 0 ? n != 8 : n > 7)
        return -1;
    memset(out, 0, 16);
    int tail = gap < 0 ? 0 : n - gap;
    int head = gap < 0 ? n : gap;
    for (int i = 0; i < head; i++) {
        out[2 * i] = (uint8_t)(g[i] >> 8);
        out[2 * i + 1] = (uint8_t)g[i];
    }
    for (int i = 0; i < tail; i++) {
        int at = 8 - tail + i;
        out[2 * at] = (uint8_t)(g[head + i] >> 8);
        out[2 * at + 1] = (uint8_t)g[head + i];
    }
    return 0;
}

static int bits_equal(const uint8_t *a, const uint8_t *b, int bits)
{
    int full = bits / 8, rest = bits % 8;
    if (memcmp(a, b, (size_t)full) != 0)
        return 0;
    if (!rest)
        return 1;
    uint8_t m = (uint8_t)(0xff << (8 - rest));
    return (a[full] & m) == (b[full] & m);
}

static int parse_cidr(const char *text, cidr_t *c)
{
    char buf[64];
    size_t n = strlen(text);
    if (n == 0 || n >= sizeof buf)
        return -1;
    memcpy(buf, text, n + 1);
    char *slash = strchr(buf, '/');
    int bits = -1;
    if (slash) {
        *slash = 0;
        const char *b = slash + 1;
        if (!*b || strlen(b) > 3)
            return -1;
        bits = 0;
        for (; *b; b++) {
            if (*b < '0' || *b > '9')
                return -1;
            bits = bits * 10 + (*b - '0');
        }
    }
    memset(c, 0, sizeof *c);
    if (parse_v4(buf, c->a) == 0) {
        c->family = 4;
        if (bits > 32)
            return -1;
        c->bits = bits < 0 ? 32 : bits;
    } else if (parse_v6(buf, c->a) == 0) {
        c->family = 6;
        if (bits > 128)
            return -1;
        c->bits = bits < 0 ? 128 : bits;
    } else {
        return -1;
    }
    /* host bits set ("10.1.2.3/8") are a mistake worth refusing: the
     * operator meant another network */
    uint8_t z[16];
    memcpy(z, c->a, 16);
    for (int i = c->bits; i < (c->family == 4 ? 32 : 128); i++)
        z[i / 8] &= (uint8_t) ~(0x80 >> (i % 8));
    return memcmp(z, c->a, 16) == 0 ? 0 : -2;
}

static int cidr_has(const cidr_t *c, int family, const uint8_t *a)
{
    return c->family == family && bits_equal(c->a, a, c->bits);
}

static int cidr_covers(const cidr_t *a, const cidr_t *b)
{
    return a->family == b->family && a->bits <= b->bits && bits_equal(a->a, b->a, a->bits);
}

/* ---- parse ----------------------------------------------------------- */

/* Where the rule being parsed sits, for errors. */
typedef struct {
    const char *text;
    size_t len;
    const char *source;
    const char *member; /* top-level member holding the array, or NULL */
    long index;         /* element index, or -1: the text is the rule */
    jsonloc_err_t *err;
} pctx_t;

static int fail(const pctx_t *p, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(const pctx_t *p, const char *key, const char *fmt, ...)
{
    if (!p->err)
        return -EINVAL;
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    jsonloc_fail(p->err, -EINVAL, p->source, 0, 0, "%s", msg);
    jsonloc_step_t path[3];
    size_t n = 0;
    if (p->member)
        path[n++] = (jsonloc_step_t){p->member, 0};
    if (p->index >= 0)
        path[n++] = (jsonloc_step_t){NULL, (size_t)p->index};
    if (key)
        path[n++] = (jsonloc_step_t){key, 0};
    if (p->text)
        jsonloc_err_at(p->err, p->text, p->len, path, n);
    else
        jsonloc_format(path, n, p->err->path, sizeof p->err->path);
    return -EINVAL;
}

static void rule_free(rule_t *r)
{
    free(r->json);
    free(r->user.s);
    free(r->cert.s);
    free(r->psk.s);
    free(r->key.s);
    free(r->bucket);
    memset(r, 0, sizeof *r);
}

static int get_pattern(const pctx_t *p, json_t *o, const char *key, pat_t *out)
{
    json_t *v = json_object_get(o, key);
    if (!v)
        return 0;
    if (!json_is_string(v))
        return fail(p, key, "%s must be a string (a glob)", key);
    const char *s = json_string_value(v);
    size_t n = json_string_length(v);
    if (n == 0 || n > RULES_PATTERN_MAX || strlen(s) != n)
        return fail(p, key, "%s must be 1..%d bytes without NUL", key, RULES_PATTERN_MAX);
    if (!(out->s = strdup(s)))
        return -ENOMEM;
    out->len = n;
    out->exact = strcspn(s, "*?") == n;
    return 0;
}

static int get_ops(const pctx_t *p, json_t *o, uint32_t *ops)
{
    json_t *v = json_object_get(o, "op");
    *ops = ALL_OPS;
    if (!v)
        return 0;
    json_t *one[1] = {v};
    size_t n = 1;
    if (json_is_array(v)) {
        n = json_array_size(v);
        if (n == 0)
            return fail(p, "op", "op must name at least one operation class");
    }
    *ops = 0;
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_is_array(v) ? json_array_get(v, i) : one[0];
        rules_op_t op;
        if (!json_is_string(e) || rules_op_parse(json_string_value(e), &op) != 0)
            return fail(p, "op",
                        "op must be one of read, write, delete, arith, touch, admin, nbd-read, "
                        "nbd-write, nbd-flush, nbd-trim (or an array of them)");
        *ops |= 1u << op;
    }
    return 0;
}

static int get_cidrs(const pctx_t *p, json_t *o, rule_t *r)
{
    json_t *v = json_object_get(o, "addr");
    if (!v)
        return 0;
    size_t n = json_is_array(v) ? json_array_size(v) : 1;
    if (n == 0 || n > RULES_CIDRS_MAX)
        return fail(p, "addr", "addr must hold 1..%d CIDRs", RULES_CIDRS_MAX);
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_is_array(v) ? json_array_get(v, i) : v;
        if (!json_is_string(e))
            return fail(p, "addr", "addr must be a CIDR (\"10.0.0.0/8\") or an array of them");
        int rc = parse_cidr(json_string_value(e), &r->cidrs[i]);
        if (rc == -2)
            return fail(p, "addr", "%s has bits set past its prefix length",
                        json_string_value(e));
        if (rc)
            return fail(p, "addr", "\"%s\" is not an IPv4 or IPv6 address or CIDR",
                        json_string_value(e));
    }
    r->ncidrs = (int)n;
    return 0;
}

static int get_rate(const pctx_t *p, json_t *o, const char *key, int64_t dflt, int64_t *out)
{
    json_t *v = json_object_get(o, key);
    *out = dflt;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < 0 ||
        json_integer_value(v) > 1000000000000LL)
        return fail(p, key, "%s must be an integer in 0..10^12 (IOs per second)", key);
    *out = json_integer_value(v);
    return 0;
}

/* A template's literal text must be what a bucket name may hold, and its
 * placeholders known ones. */
static int check_template(const pctx_t *p, const char *t)
{
    char lit[RULES_PATTERN_MAX + 1];
    size_t n = 0;
    int holders = 0;
    for (const char *s = t; *s;) {
        if (*s == '{') {
            const char *e = strchr(s, '}');
            size_t k = e ? (size_t)(e - s + 1) : 0;
            if (!e || !((k == 6 && !memcmp(s, "{user}", 6)) || (k == 6 && !memcmp(s, "{addr}", 6)) ||
                        (k == 8 && !memcmp(s, "{prefix}", 8))))
                return fail(p, "template",
                            "template placeholders are {user}, {addr} and {prefix}");
            holders++;
            s = e + 1;
            continue;
        }
        if (n < RULES_PATTERN_MAX)
            lit[n++] = *s;
        s++;
    }
    if (!holders)
        return fail(p, "template", "a template needs {user}, {addr} or {prefix} (else use "
                                   "\"bucket\")");
    if (n && names_check_bucket(lit, n) != 0)
        return fail(p, "template",
                    "the template's text must be bucket-name characters (no ':', whitespace)");
    return 0;
}

static const char *const members[] = {"name", "user", "cert", "psk", "addr", "op", "key",
                                      "bucket", "template", "deny", "reservation", "limit"};

static int parse_rule(const pctx_t *p, json_t *o, rule_t *r)
{
    memset(r, 0, sizeof *r);
    if (!json_is_object(o))
        return fail(p, NULL, "a rule must be an object");
    const char *key;
    json_t *v;
    json_object_foreach(o, key, v)
    {
        size_t k = 0;
        while (k < sizeof members / sizeof *members && strcmp(key, members[k]) != 0)
            k++;
        if (k == sizeof members / sizeof *members)
            return fail(p, key, "unknown member \"%s\" (a rule has name, user, cert, psk, addr, "
                                "op, key, and one of bucket, template, deny)", key);
    }
    int rc;
    if ((v = json_object_get(o, "name"))) {
        if (!json_is_string(v) || json_string_length(v) == 0 ||
            json_string_length(v) > RULES_NAME_MAX ||
            names_check_bucket(json_string_value(v), json_string_length(v)) != 0)
            return fail(p, "name", "name must be 1..%d bytes without whitespace or ':'",
                        RULES_NAME_MAX);
        const char *s = json_string_value(v);
        if (strspn(s, "0123456789") == strlen(s))
            return fail(p, "name", "a rule's name must not be all digits (digits are indexes)");
        memcpy(r->name, s, json_string_length(v) + 1);
    }
    if ((rc = get_pattern(p, o, "user", &r->user)) || (rc = get_pattern(p, o, "cert", &r->cert)) ||
        (rc = get_pattern(p, o, "psk", &r->psk)) || (rc = get_pattern(p, o, "key", &r->key)) ||
        (rc = get_ops(p, o, &r->ops)) || (rc = get_cidrs(p, o, r)))
        return rc;
    json_t *b = json_object_get(o, "bucket"), *t = json_object_get(o, "template"),
           *d = json_object_get(o, "deny");
    if ((b != NULL) + (t != NULL) + (d != NULL) != 1)
        return fail(p, NULL, "a rule needs exactly one action: \"bucket\", \"template\" or "
                             "\"deny\"");
    if (!t && (json_object_get(o, "reservation") || json_object_get(o, "limit")))
        return fail(p, json_object_get(o, "reservation") ? "reservation" : "limit",
                    "reservation and limit belong to a template rule (a named bucket has its "
                    "own in \"buckets\")");
    if (d) {
        if (!json_is_true(d))
            return fail(p, "deny", "deny must be true");
        r->action = RULES_DENY;
    } else if (b) {
        if (!json_is_string(b) ||
            names_check_bucket(json_string_value(b), json_string_length(b)) != 0)
            return fail(p, "bucket", "bucket must be a bucket name (1..250 bytes, no "
                                     "whitespace or ':')");
        r->action = RULES_BUCKET;
        if (!(r->bucket = strdup(json_string_value(b))))
            return -ENOMEM;
    } else {
        if (!json_is_string(t) || json_string_length(t) == 0 ||
            json_string_length(t) > RULES_PATTERN_MAX)
            return fail(p, "template", "template must be a string of 1..%d bytes",
                        RULES_PATTERN_MAX);
        if ((rc = check_template(p, json_string_value(t))))
            return rc;
        r->action = RULES_TEMPLATE;
        if (!(r->bucket = strdup(json_string_value(t))))
            return -ENOMEM;
        if ((rc = get_rate(p, o, "reservation", 0, &r->reservation)) ||
            (rc = get_rate(p, o, "limit", RULES_NO_LIMIT, &r->limit)))
            return rc;
        if (r->limit < r->reservation)
            return fail(p, "limit", "limit %lld is below the reservation %lld",
                        (long long)r->limit, (long long)r->reservation);
    }
    if (!(r->json = json_dumps(o, JSON_PRESERVE_ORDER)))
        return -ENOMEM;
    return 0;
}

/* ---- compile --------------------------------------------------------- */

static uint64_t *bitset(const rules_t *r, uint32_t off)
{
    return r->bits + (size_t)off * r->words;
}

static int build_index(rules_t *r, index_t *ix, size_t field, uint32_t *next)
{
    size_t size = 4;
    while (size < 2 * r->n + 2)
        size *= 2;
    if (!(ix->t = calloc(size, sizeof *ix->t)))
        return -ENOMEM;
    ix->mask = size - 1;
    ix->any = (*next)++;
    for (int c = 0; c < 256; c++)
        ix->first[c] = (*next)++;
    for (size_t i = 0; i < r->n; i++) {
        const pat_t *p = field ? &r->v[i].key : &r->v[i].user;
        if (!p->s || (!p->exact && (p->s[0] == '*' || p->s[0] == '?'))) {
            bitset(r, ix->any)[i / 64] |= 1ULL << (i % 64);
            continue;
        }
        if (!p->exact) {
            bitset(r, ix->first[(unsigned char)p->s[0]])[i / 64] |= 1ULL << (i % 64);
            continue;
        }
        uint64_t h = hash_bytes(p->s, p->len);
        size_t at = h & ix->mask;
        while (ix->t[at].used && ix->t[at].h != h)
            at = (at + 1) & ix->mask;
        if (!ix->t[at].used) {
            ix->t[at] = (slot_t){h, (*next)++, 1};
        }
        bitset(r, ix->t[at].off)[i / 64] |= 1ULL << (i % 64);
    }
    return 0;
}

static void uncompile(rules_t *r)
{
    free(r->bits);
    free(r->user.t);
    free(r->key.t);
    r->bits = NULL;
    r->user.t = r->key.t = NULL;
}

static int compile(rules_t *r)
{
    uncompile(r);
    r->words = (r->n + 63) / 64;
    if (!r->words)
        r->words = 1;
    /* ops; per string index its any, 256 first-byte sets and at most one
     * set per rule; the address sets */
    size_t sets = RULES_OP_COUNT + 2 * (257 + r->n) + 513;
    if (!(r->bits = calloc(sets * r->words, sizeof *r->bits)))
        return -ENOMEM;
    uint32_t next = 0;
    for (int op = 0; op < RULES_OP_COUNT; op++) {
        r->ops[op] = next++;
        for (size_t i = 0; i < r->n; i++)
            if (r->v[i].ops & (1u << op))
                bitset(r, r->ops[op])[i / 64] |= 1ULL << (i % 64);
    }
    int rc = build_index(r, &r->user, 0, &next);
    if (!rc)
        rc = build_index(r, &r->key, 1, &next);
    r->addr_any = next++;
    for (int c = 0; c < 256; c++) {
        r->addr4[c] = next++;
        r->addr6[c] = next++;
    }
    for (size_t i = 0; i < r->n && !rc; i++) {
        const rule_t *u = &r->v[i];
        int wide = !u->ncidrs;
        for (int k = 0; k < u->ncidrs; k++)
            wide |= u->cidrs[k].bits < 8;
        if (wide) {
            bitset(r, r->addr_any)[i / 64] |= 1ULL << (i % 64);
            continue;
        }
        for (int k = 0; k < u->ncidrs; k++) {
            const cidr_t *c = &u->cidrs[k];
            uint32_t set = c->family == 4 ? r->addr4[c->a[0]] : r->addr6[c->a[0]];
            bitset(r, set)[i / 64] |= 1ULL << (i % 64);
        }
    }
    if (rc)
        uncompile(r);
    return rc;
}

/* ---- list ------------------------------------------------------------ */

rules_t *rules_new(void)
{
    rules_t *r = calloc(1, sizeof *r);
    if (r && compile(r) != 0) {
        free(r);
        return NULL;
    }
    return r;
}

static void clear(rules_t *r)
{
    for (size_t i = 0; i < r->n; i++)
        rule_free(&r->v[i]);
    free(r->v);
    r->v = NULL;
    r->n = 0;
    uncompile(r);
}

void rules_destroy(rules_t **rp)
{
    if (!rp || !*rp)
        return;
    clear(*rp);
    free(*rp);
    *rp = NULL;
}

int rules_from_json(const void *array, const char *text, size_t len, const char *source,
                    const char *member, rules_t **out, jsonloc_err_t *err)
{
    json_t *a = (json_t *)array;
    pctx_t p = {text, len, source, member, -1, err};
    if (!json_is_array(a))
        return fail(&p, NULL, "rules must be an array of rule objects");
    size_t n = json_array_size(a);
    if (n > RULES_MAX)
        return fail(&p, NULL, "%zu rules: at most %d", n, RULES_MAX);
    rules_t *r = calloc(1, sizeof *r);
    if (!r || (n && !(r->v = calloc(n, sizeof *r->v)))) {
        free(r);
        return -ENOMEM;
    }
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        p.index = (long)i;
        rc = parse_rule(&p, json_array_get(a, i), &r->v[i]);
        r->n = i + 1;
        if (!rc && r->v[i].name[0])
            for (size_t j = 0; j < i; j++)
                if (strcmp(r->v[j].name, r->v[i].name) == 0) {
                    rc = fail(&p, "name", "duplicate rule name \"%s\" (rule %zu has it)",
                              r->v[i].name, j);
                    break;
                }
    }
    if (!rc)
        rc = compile(r);
    if (rc) {
        rules_destroy(&r);
        return rc;
    }
    *out = r;
    return 0;
}

int rules_parse(const char *text, size_t len, const char *source, rules_t **out,
                jsonloc_err_t *err)
{
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return jsonloc_fail(err, -EINVAL, source, je.line, je.column, "%s", je.text);
    const char *member = NULL;
    json_t *a = root;
    int rc;
    if (json_is_object(root)) {
        member = "rules";
        a = json_object_get(root, "rules");
        if (!a) {
            rc = jsonloc_fail(err, -EINVAL, source, 1, 1, "no \"rules\" member");
            goto out;
        }
    }
    rc = rules_from_json(a, text, len, source, member, out, err);
out:
    json_decref(root);
    return rc;
}

size_t rules_count(const rules_t *r)
{
    return r ? r->n : 0;
}

const char *rules_json(const rules_t *r, size_t i)
{
    return r && i < r->n ? r->v[i].json : NULL;
}

const char *rules_name(const rules_t *r, size_t i)
{
    return r && i < r->n ? r->v[i].name : NULL;
}

rules_action_t rules_action(const rules_t *r, size_t i, const char **bucket)
{
    *bucket = r && i < r->n ? r->v[i].bucket : NULL;
    return r && i < r->n ? r->v[i].action : RULES_NONE;
}

int rules_has_key(const rules_t *r, size_t i)
{
    return r && i < r->n && r->v[i].key.s != NULL;
}

int rules_template_rates(const rules_t *r, size_t i, int64_t *reservation, int64_t *limit)
{
    if (!r || i >= r->n || r->v[i].action != RULES_TEMPLATE)
        return -EINVAL;
    *reservation = r->v[i].reservation;
    *limit = r->v[i].limit;
    return 0;
}

/* The next token of template t at *pos: a literal byte (its value), or -1
 * for a placeholder ("{user}": one byte or more, as "?*" in a glob), -2 at
 * the end; *pos moves past it. */
static int tmpl_token(const char *t, size_t *pos)
{
    if (!t[*pos])
        return -2;
    if (t[*pos] == '{') {
        const char *e = strchr(t + *pos, '}');
        *pos = e ? (size_t)(e - t) + 1 : strlen(t);
        return -1;
    }
    return (unsigned char)t[(*pos)++];
}

int rules_template_made(const rules_t *r, size_t i, const char *name)
{
    if (!r || i >= r->n || r->v[i].action != RULES_TEMPLATE || !name)
        return 0;
    /* Greedy wildcard match with one backtrack point (the last
     * placeholder): each placeholder takes one byte at once, then as few
     * more as the rest needs.  O(template x name). */
    const char *t = r->v[i].bucket;
    size_t tp = 0, np = 0, n = strlen(name);
    size_t star_tp = 0, star_np = 0;
    int star = 0;
    for (;;) {
        int k = tmpl_token(t, &tp);
        if (k == -2 && np == n)
            return 1;
        if (k == -1 && np < n) {
            np++; /* the placeholder's first byte */
            star = 1;
            star_tp = tp;
            star_np = np;
            continue;
        }
        if (k >= 0 && np < n && (unsigned char)name[np] == k) {
            np++;
            continue;
        }
        if (!star || star_np >= n)
            return 0;
        tp = star_tp; /* the last placeholder takes one byte more */
        np = ++star_np;
    }
}

int rules_find(const rules_t *r, const char *name)
{
    if (!name || !*name)
        return -ENOENT;
    if (strspn(name, "0123456789") == strlen(name)) {
        if (strlen(name) > 6)
            return -ENOENT;
        size_t i = (size_t)atol(name);
        return i < r->n ? (int)i : -ENOENT;
    }
    for (size_t i = 0; i < r->n; i++)
        if (strcmp(r->v[i].name, name) == 0)
            return (int)i;
    return -ENOENT;
}

/* texts[0..n) joined as a JSON array, one per line. */
static char *join(const char *const *texts, size_t n)
{
    size_t len = 4;
    for (size_t i = 0; i < n; i++)
        len += strlen(texts[i]) + 4;
    char *s = malloc(len), *w = s;
    if (!s)
        return NULL;
    *w++ = '[';
    for (size_t i = 0; i < n; i++) {
        w += sprintf(w, "%s\n  %s", i ? "," : "", texts[i]);
    }
    strcpy(w, n ? "\n]" : "]");
    return s;
}

char *rules_dumps(const rules_t *r)
{
    const char **t = malloc((r->n + 1) * sizeof *t);
    if (!t)
        return NULL;
    for (size_t i = 0; i < r->n; i++)
        t[i] = r->v[i].json;
    char *s = join(t, r->n);
    free(t);
    return s;
}

rules_t *rules_dup(const rules_t *r)
{
    char *s = rules_dumps(r);
    rules_t *out = NULL;
    if (s && rules_parse(s, strlen(s), NULL, &out, NULL) != 0)
        out = NULL;
    free(s);
    return out;
}

int rules_equal(const rules_t *a, const rules_t *b)
{
    if (rules_count(a) != rules_count(b))
        return 0;
    for (size_t i = 0; i < rules_count(a); i++)
        if (strcmp(a->v[i].json, b->v[i].json) != 0)
            return 0;
    return 1;
}

/* Rebuilds r from texts[0..n) (the edit's new order); r is unchanged on
 * error.  `at` is the edited rule's index for errors (or -1). */
static int rebuild(rules_t *r, const char *const *texts, size_t n, long at, jsonloc_err_t *err)
{
    if (n > RULES_MAX)
        return jsonloc_fail(err, -EINVAL, NULL, 0, 0, "the list is full (%d rules)", RULES_MAX);
    char *s = join(texts, n);
    if (!s)
        return -ENOMEM;
    rules_t *nr = NULL;
    jsonloc_err_t e;
    int rc = rules_parse(s, strlen(s), NULL, &nr, &e);
    free(s);
    if (rc) {
        if (err) {
            *err = e;
            err->line = err->col = 0;
            (void)at;
        }
        return rc;
    }
    clear(r);
    *r = *nr;
    free(nr);
    return 0;
}

static int check_one(const char *json, size_t len, jsonloc_err_t *err)
{
    json_error_t je;
    json_t *o = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
    if (!o)
        return jsonloc_fail(err, -EINVAL, NULL, je.line, je.column, "%s", je.text);
    pctx_t p = {json, len, NULL, NULL, -1, err};
    rule_t tmp;
    int rc = parse_rule(&p, o, &tmp);
    rule_free(&tmp);
    json_decref(o);
    return rc;
}

static int edit(rules_t *r, size_t at, const char *json, size_t len, int replace,
                jsonloc_err_t *err)
{
    int rc = check_one(json, len, err);
    if (rc)
        return rc;
    char *one = strndup(json, len);
    const char **t = malloc((r->n + 1) * sizeof *t);
    if (!one || !t) {
        free(one);
        free(t);
        return -ENOMEM;
    }
    size_t n = 0;
    if (at > r->n)
        at = r->n;
    for (size_t i = 0; i <= r->n; i++) {
        if (i == at)
            t[n++] = one;
        if (i < r->n && !(replace && i == at))
            t[n++] = r->v[i].json;
    }
    rc = rebuild(r, t, n, (long)at, err);
    free(one);
    free(t);
    return rc;
}

int rules_insert(rules_t *r, size_t pos, const char *json, size_t len, jsonloc_err_t *err)
{
    return edit(r, pos, json, len, 0, err);
}

int rules_replace(rules_t *r, size_t i, const char *json, size_t len, jsonloc_err_t *err)
{
    if (i >= r->n)
        return -ENOENT;
    return edit(r, i, json, len, 1, err);
}

/* The texts of r's rules but rule i (i < r->n), in order, in a new array
 * (r->n + 1 slots, the first r->n - 1 set; the texts borrowed).  Returns
 * it, or NULL (out of memory). */
static const char **others(const rules_t *r, size_t i)
{
    const char **t = malloc((r->n + 1) * sizeof *t);
    if (!t)
        return NULL;
    size_t n = 0;
    for (size_t k = 0; k < r->n; k++)
        if (k != i)
            t[n++] = r->v[k].json;
    return t;
}

int rules_remove(rules_t *r, size_t i)
{
    if (i >= r->n)
        return -ENOENT;
    size_t n = r->n - 1;
    const char **t = others(r, i);
    if (!t)
        return -ENOMEM;
    int rc = rebuild(r, t, n, -1, NULL);
    free(t);
    return rc;
}

int rules_move(rules_t *r, size_t i, size_t to)
{
    if (i >= r->n)
        return -ENOENT;
    if (to >= r->n)
        to = r->n - 1;
    size_t n = r->n - 1;
    const char **t = others(r, i);
    if (!t)
        return -ENOMEM;
    memmove(t + to + 1, t + to, (n - to) * sizeof *t);
    t[to] = r->v[i].json;
    int rc = rebuild(r, t, r->n, -1, NULL);
    free(t);
    return rc;
}

/* ---- match ----------------------------------------------------------- */

static int ident_match(const pat_t *p, const char *s)
{
    if (!p->s)
        return 1;
    return s && pat_match(p, s, strlen(s));
}

static int rule_match(const rule_t *r, const rules_subject_t *s)
{
    if (!(r->ops & (1u << s->op)) || !pat_match(&r->key, s->name, s->name_len) ||
        !ident_match(&r->user, s->user) || !ident_match(&r->cert, s->cert_name) ||
        !ident_match(&r->psk, s->psk_id))
        return 0;
    if (!r->ncidrs)
        return 1;
    for (int i = 0; i < r->ncidrs; i++)
        if (cidr_has(&r->cidrs[i], s->family, s->addr))
            return 1;
    return 0;
}

static size_t put(char *buf, size_t at, const char *s, size_t n)
{
    if (at + n > NAMES_MAX)
        return NAMES_MAX + 1;
    memcpy(buf + at, s, n);
    return at + n;
}

static size_t put_addr(char *buf, size_t at, const rules_subject_t *s)
{
    char a[64];
    int n = 0;
    if (s->family == 4)
        n = snprintf(a, sizeof a, "%u.%u.%u.%u", s->addr[0], s->addr[1], s->addr[2], s->addr[3]);
    else if (s->family == 6)
        for (int i = 0; i < 8; i++)
            n += snprintf(a + n, sizeof a - (size_t)n, "%s%x", i ? "-" : "",
                          (unsigned)(s->addr[2 * i] << 8 | s->addr[2 * i + 1]));
    else
        return NAMES_MAX + 1;
    return put(buf, at, a, (size_t)n);
}

/* Expands rule r's template for s into res->buf; 0 or -1 (no name). */
static int expand(const rule_t *r, const rules_subject_t *s, rules_result_t *res)
{
    size_t at = 0;
    for (const char *t = r->bucket; *t && at <= NAMES_MAX;) {
        if (*t != '{') {
            at = put(res->buf, at, t, 1);
            t++;
        } else if (t[1] == 'u') {
            at = s->user && *s->user ? put(res->buf, at, s->user, strlen(s->user)) : NAMES_MAX + 1;
            t += 6;
        } else if (t[1] == 'a') {
            at = put_addr(res->buf, at, s);
            t += 6;
        } else {
            at = s->name_len ? put(res->buf, at, s->name, s->name_len) : NAMES_MAX + 1;
            t += 8;
        }
    }
    if (at > NAMES_MAX || names_check_bucket(res->buf, at) != 0)
        return -1;
    res->buf[at] = 0;
    return 0;
}

static rules_action_t result(const rules_t *rl, size_t i, const rules_subject_t *s,
                             rules_result_t *res)
{
    const rule_t *r = &rl->v[i];
    res->rule = (int)i;
    res->action = r->action;
    if (r->action == RULES_BUCKET) {
        res->bucket = r->bucket;
    } else if (r->action == RULES_TEMPLATE) {
        res->reservation = r->reservation;
        res->limit = r->limit;
        if (expand(r, s, res) == 0)
            res->bucket = res->buf;
        else
            res->action = RULES_BAD_NAME;
    }
    return res->action;
}

static const uint64_t *lookup(const rules_t *r, const index_t *ix, const char *s, size_t n,
                              const uint64_t **first)
{
    *first = NULL;
    if (!s)
        return NULL;
    if (n)
        *first = bitset(r, ix->first[(unsigned char)s[0]]);
    uint64_t h = hash_bytes(s, n);
    size_t at = h & ix->mask;
    while (ix->t[at].used) {
        if (ix->t[at].h == h)
            return bitset(r, ix->t[at].off);
        at = (at + 1) & ix->mask;
    }
    return NULL;
}

rules_action_t rules_match(const rules_t *r, const rules_subject_t *s, rules_result_t *res)
{
    res->action = RULES_NONE;
    res->rule = -1;
    res->bucket = NULL;
    res->reservation = 0;
    res->limit = RULES_NO_LIMIT;
    if (!r || !r->n || (unsigned)s->op >= RULES_OP_COUNT)
        return RULES_NONE;
    const uint64_t *ops = bitset(r, r->ops[s->op]);
    const uint64_t *uany = bitset(r, r->user.any), *kany = bitset(r, r->key.any);
    const uint64_t *uf, *kf;
    const uint64_t *ux = lookup(r, &r->user, s->user, s->user ? strlen(s->user) : 0, &uf);
    const uint64_t *kx = lookup(r, &r->key, s->name ? s->name : "", s->name_len, &kf);
    const uint64_t *aany = bitset(r, r->addr_any);
    const uint64_t *ax = s->family == 4   ? bitset(r, r->addr4[s->addr[0]])
                         : s->family == 6 ? bitset(r, r->addr6[s->addr[0]])
                                          : NULL;
    for (size_t w = 0; w < r->words; w++) {
        uint64_t c = ops[w] & (uany[w] | (ux ? ux[w] : 0) | (uf ? uf[w] : 0)) &
                     (kany[w] | (kx ? kx[w] : 0) | (kf ? kf[w] : 0)) &
                     (aany[w] | (ax ? ax[w] : 0));
        while (c) {
            size_t i = w * 64 + (size_t)__builtin_ctzll(c);
            c &= c - 1;
            if (rule_match(&r->v[i], s))
                return result(r, i, s, res);
        }
    }
    return RULES_NONE;
}

/* ---- analysis -------------------------------------------------------- */

/* Sound: nonzero only if every subject b matches, a matches too. */
static int covers(const rule_t *a, const rule_t *b)
{
    if ((a->ops & b->ops) != b->ops)
        return 0;
    if (!pat_covers(&a->user, &b->user) || !pat_covers(&a->cert, &b->cert) ||
        !pat_covers(&a->psk, &b->psk) || !pat_covers(&a->key, &b->key))
        return 0;
    if (!a->ncidrs)
        return 1;
    if (!b->ncidrs)
        return 0;
    for (int j = 0; j < b->ncidrs; j++) {
        int in = 0;
        for (int i = 0; i < a->ncidrs && !in; i++)
            in = cidr_covers(&a->cidrs[i], &b->cidrs[j]);
        if (!in)
            return 0;
    }
    return 1;
}

/* ---- ambiguous templates ----------------------------------------------- */

/* A pattern as tokens: a literal byte (0..255), one byte of any value
 * (TK_ONE), or a run of any length (TK_RUN).  A glob's `?` and `*`; a
 * template's placeholder is TK_ONE then TK_RUN (one byte or more). */
#define TK_ONE (-1)
#define TK_RUN (-2)
#define TK_MAX (2 * RULES_PATTERN_MAX + 2)

static size_t glob_tokens(const char *s, size_t len, int *out)
{
    size_t n = 0;
    for (size_t i = 0; i < len && n < TK_MAX; i++)
        out[n++] = s[i] == '*' ? TK_RUN : s[i] == '?' ? TK_ONE : (unsigned char)s[i];
    return n;
}

static size_t template_tokens(const char *t, int *out)
{
    size_t n = 0, pos = 0;
    int k;
    while ((k = tmpl_token(t, &pos)) != -2 && n + 2 <= TK_MAX) {
        if (k == -1) {
            out[n++] = TK_ONE;
            out[n++] = TK_RUN;
        } else {
            out[n++] = k;
        }
    }
    return n;
}

/* Nonzero if some string matches both token patterns: reachability in the
 * product of the two (a run may take the other side's next token, whatever
 * it is, or end).  Exact for these patterns; O(m x n) bytes and steps. */
static int tokens_meet(const int *p, size_t m, const int *q, size_t n)
{
    unsigned char small[1024] = {0}, *f = (m + 1) * (n + 1) <= sizeof small
                                              ? small
                                              : calloc((m + 1) * (n + 1), 1);
    if (!f)
        return 0; /* out of memory: no warning (the checks only ever warn) */
#define F(i, j) f[(i) * (n + 1) + (j)]
    for (size_t i = m + 1; i-- > 0;)
        for (size_t j = n + 1; j-- > 0;) {
            int v;
            if (i == m && j == n)
                v = 1;
            else if (i < m && p[i] == TK_RUN)
                v = F(i + 1, j) || (j < n && F(i, j + 1));
            else if (j < n && q[j] == TK_RUN)
                v = F(i, j + 1) || (i < m && F(i + 1, j));
            else
                v = i < m && j < n && (p[i] == TK_ONE || q[j] == TK_ONE || p[i] == q[j]) &&
                    F(i + 1, j + 1);
            F(i, j) = (unsigned char)v;
        }
    int v = F(0, 0);
#undef F
    if (f != small)
        free(f);
    return v;
}

/* Nonzero if some value matches both patterns (absent: anything). */
static int pat_meet(const pat_t *a, const pat_t *b)
{
    if (!a->s || !b->s)
        return 1;
    int x[TK_MAX], y[TK_MAX];
    return tokens_meet(x, glob_tokens(a->s, a->len, x), y, glob_tokens(b->s, b->len, y));
}

/* Sound: nonzero only if one request can match both rules. */
static int rules_meet(const rule_t *a, const rule_t *b)
{
    if (!(a->ops & b->ops) || ((a->cert.s || b->cert.s) && (a->psk.s || b->psk.s)))
        return 0;
    if (!pat_meet(&a->user, &b->user) || !pat_meet(&a->cert, &b->cert) ||
        !pat_meet(&a->psk, &b->psk) || !pat_meet(&a->key, &b->key))
        return 0;
    if (!a->ncidrs || !b->ncidrs)
        return 1;
    for (int i = 0; i < a->ncidrs; i++)
        for (int j = 0; j < b->ncidrs; j++)
            if (cidr_covers(&a->cidrs[i], &b->cidrs[j]) || cidr_covers(&b->cidrs[j], &a->cidrs[i]))
                return 1;
    return 0;
}

/* Nonzero if the two templates could make one bucket name. */
static int templates_meet(const rule_t *a, const rule_t *b)
{
    int x[TK_MAX], y[TK_MAX];
    return tokens_meet(x, template_tokens(a->bucket, x), y, template_tokens(b->bucket, y));
}

static void rule_label(const rules_t *r, size_t i, char *buf, size_t size)
{
    const rule_t *v = &r->v[i];
    snprintf(buf, size, "rule %zu%s%s%s", i, v->name[0] ? " (" : "", v->name,
             v->name[0] ? ")" : "");
}

/* Template rule j against every earlier template rule i: a request both
 * match goes to i (j matches only part of what it names), and two
 * templates that can make one name make a bucket the controller holds at
 * the stricter figures of the two (controller/dyn.c).  The same template
 * with the same figures is one bucket on purpose (no warning for the
 * name).  Returns the warnings given. */
static int analyze_templates(const rules_t *r, size_t j, char *msg, size_t size,
                             void (*warn)(void *arg, size_t i, const char *text), void *arg)
{
    const rule_t *b = &r->v[j];
    int n = 0;
    char lj[100], li[100];
    if (b->action != RULES_TEMPLATE)
        return 0;
    rule_label(r, j, lj, sizeof lj);
    for (size_t i = 0; i < j; i++) {
        const rule_t *a = &r->v[i];
        if (a->action != RULES_TEMPLATE)
            continue;
        rule_label(r, i, li, sizeof li);
        if (rules_meet(a, b)) {
            snprintf(msg, size, "%s is ambiguous with template %s: a request both match "
                                "goes to %s's '%s', so %s matches only part of what it names",
                     lj, li, li, a->bucket, lj);
            warn(arg, j, msg);
            n++;
        }
        int same = strcmp(a->bucket, b->bucket) == 0 && a->reservation == b->reservation &&
                   a->limit == b->limit;
        if (!same && templates_meet(a, b)) {
            snprintf(msg, size, "%s's template '%s' and %s's '%s' could make the same bucket "
                                "name: such a bucket gets the smaller reservation and limit "
                                "of the two",
                     lj, b->bucket, li, a->bucket);
            warn(arg, j, msg);
            n++;
        }
    }
    return n;
}

int rules_analyze(const rules_t *r, void (*warn)(void *arg, size_t i, const char *text),
                  void *arg)
{
    int n = 0;
    char msg[800];
    for (size_t j = 0; j < r->n; j++) {
        const rule_t *b = &r->v[j];
        if (b->cert.s && b->psk.s) {
            snprintf(msg, sizeof msg, "rule %zu can never match: a connection presents a "
                                      "certificate or a PSK, not both", j);
            warn(arg, j, msg);
            n++;
            continue;
        }
        int mc = (b->ops & ((1u << RULES_OP_NBD_READ) - 1)) != 0;
        if (b->action == RULES_TEMPLATE && strstr(b->bucket, "{addr}") == NULL &&
            strstr(b->bucket, "{user}") && !b->user.s && !mc) {
            /* NBD has no login user: {user} never expands */
            snprintf(msg, sizeof msg, "rule %zu can never make a bucket: NBD clients have no "
                                      "login user for {user}", j);
            warn(arg, j, msg);
            n++;
            continue;
        }
        int shadowed = 0;
        for (size_t i = 0; i < j && !shadowed; i++)
            if (covers(&r->v[i], b)) {
                snprintf(msg, sizeof msg, "rule %zu%s%s%s is shadowed by rule %zu%s%s%s: it "
                                          "can never match", j, b->name[0] ? " (" : "", b->name,
                         b->name[0] ? ")" : "", i, r->v[i].name[0] ? " (" : "", r->v[i].name,
                         r->v[i].name[0] ? ")" : "");
                warn(arg, j, msg);
                n++;
                shadowed = 1;
            }
        if (!shadowed)
            n += analyze_templates(r, j, msg, sizeof msg, warn, arg);
    }
    return n;
}
