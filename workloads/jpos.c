/* jpos.c - recursive-descent JSON reader that records each value's line and column. */
#include "workloads/jpos.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 64

typedef struct {
    const char *s;
    size_t len, pos;
    int line, col;
    jpos_error_t *err;
    int nomem;
} cursor_t;

static void fail(cursor_t *c, int line, int col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void fail(cursor_t *c, int line, int col, const char *fmt, ...)
{
    if (!c->err || c->err->text[0])
        return;
    c->err->line = line;
    c->err->col = col;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err->text, sizeof c->err->text, fmt, ap);
    va_end(ap);
}

static int peek(const cursor_t *c)
{
    return c->pos < c->len ? (unsigned char)c->s[c->pos] : -1;
}

static void advance(cursor_t *c)
{
    if (c->pos >= c->len)
        return;
    /* Columns count characters: skip UTF-8 continuation bytes. */
    if (c->s[c->pos] == '\n') {
        c->line++;
        c->col = 1;
    } else if (((unsigned char)c->s[c->pos] & 0xC0) != 0x80) {
        c->col++;
    }
    c->pos++;
}

static void skip_ws(cursor_t *c)
{
    for (;;) {
        int ch = peek(c);
        if (ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r')
            advance(c);
        else
            return;
    }
}

static jpos_value_t *new_value(cursor_t *c, jpos_type_t t)
{
    jpos_value_t *v = calloc(1, sizeof *v);
    if (!v) {
        c->nomem = 1;
        return NULL;
    }
    v->type = t;
    v->line = c->line;
    v->col = c->col;
    return v;
}

static int literal(cursor_t *c, const char *word)
{
    size_t n = strlen(word);
    if (c->len - c->pos < n || memcmp(c->s + c->pos, word, n) != 0)
        return 0;
    for (size_t i = 0; i < n; i++)
        advance(c);
    return 1;
}

static int hex4(cursor_t *c, unsigned *out)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        int ch = peek(c);
        int d;
        if (ch >= '0' && ch <= '9')
            d = ch - '0';
        else if (ch >= 'a' && ch <= 'f')
            d = ch - 'a' + 10;
        else if (ch >= 'A' && ch <= 'F')
            d = ch - 'A' + 10;
        else
            return -1;
        v = v * 16 + (unsigned)d;
        advance(c);
    }
    *out = v;
    return 0;
}

static size_t put_utf8(char *dst, unsigned cp)
{
    if (cp < 0x80) {
        dst[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        dst[0] = (char)(0xC0 | (cp >> 6));
        dst[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        dst[0] = (char)(0xE0 | (cp >> 12));
        dst[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        dst[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    dst[0] = (char)(0xF0 | (cp >> 18));
    dst[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    dst[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    dst[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Reads a string at the opening quote; returns a malloc'd copy or NULL. */
static char *parse_string(cursor_t *c)
{
    int line = c->line, col = c->col;
    advance(c); /* opening quote */
    /* The decoded string is never longer than the raw text. */
    size_t start = c->pos;
    size_t end = start;
    while (end < c->len && c->s[end] != '"') {
        if (c->s[end] == '\\')
            end++;
        end++;
    }
    char *out = malloc(end - start + 1);
    if (!out) {
        c->nomem = 1;
        return NULL;
    }
    size_t n = 0;
    for (;;) {
        int ch = peek(c);
        if (ch < 0) {
            fail(c, line, col, "unterminated string");
            goto bad;
        }
        if (ch == '"') {
            advance(c);
            break;
        }
        if (ch < 0x20) {
            fail(c, c->line, c->col, "control character in string");
            goto bad;
        }
        if (ch != '\\') {
            out[n++] = (char)ch;
            advance(c);
            continue;
        }
        int el = c->line, ec = c->col;
        advance(c);
        ch = peek(c);
        const char *simple = "\"\\/bfnrt";
        const char *repl = "\"\\/\b\f\n\r\t";
        const char *hit = ch > 0 ? strchr(simple, ch) : NULL;
        if (hit) {
            out[n++] = repl[hit - simple];
            advance(c);
            continue;
        }
        if (ch != 'u') {
            fail(c, el, ec, "invalid escape in string");
            goto bad;
        }
        advance(c);
        unsigned cp;
        if (hex4(c, &cp) < 0) {
            fail(c, el, ec, "invalid \\u escape in string");
            goto bad;
        }
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            unsigned lo;
            if (!literal(c, "\\u") || hex4(c, &lo) < 0 || lo < 0xDC00 || lo > 0xDFFF) {
                fail(c, el, ec, "invalid surrogate pair in string");
                goto bad;
            }
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            fail(c, el, ec, "invalid surrogate pair in string");
            goto bad;
        }
        if (cp == 0) {
            fail(c, el, ec, "NUL character in string");
            goto bad;
        }
        n += put_utf8(out + n, cp);
    }
    out[n] = '\0';
    return out;
bad:
    free(out);
    return NULL;
}

static int parse_number(cursor_t *c, double *out)
{
    size_t start = c->pos;
    int line = c->line, col = c->col;
    if (peek(c) == '-')
        advance(c);
    if (peek(c) == '0') {
        advance(c);
    } else if (peek(c) >= '1' && peek(c) <= '9') {
        while (peek(c) >= '0' && peek(c) <= '9')
            advance(c);
    } else {
        goto bad;
    }
    if (peek(c) == '.') {
        advance(c);
        if (!(peek(c) >= '0' && peek(c) <= '9'))
            goto bad;
        while (peek(c) >= '0' && peek(c) <= '9')
            advance(c);
    }
    if (peek(c) == 'e' || peek(c) == 'E') {
        advance(c);
        if (peek(c) == '+' || peek(c) == '-')
            advance(c);
        if (!(peek(c) >= '0' && peek(c) <= '9'))
            goto bad;
        while (peek(c) >= '0' && peek(c) <= '9')
            advance(c);
    }
    char buf[64];
    size_t n = c->pos - start;
    if (n >= sizeof buf) {
        fail(c, line, col, "number too long");
        return -1;
    }
    memcpy(buf, c->s + start, n);
    buf[n] = '\0';
    *out = strtod(buf, NULL);
    if (!isfinite(*out)) {
        fail(c, line, col, "number out of range");
        return -1;
    }
    return 0;
bad:
    fail(c, line, col, "invalid number");
    return -1;
}

static jpos_value_t *parse_value(cursor_t *c, int depth);

static int append(cursor_t *c, jpos_value_t *parent, jpos_value_t *item, char *key)
{
    jpos_value_t **items = realloc(parent->items, (parent->n + 1) * sizeof *items);
    if (!items)
        goto nomem;
    parent->items = items;
    if (parent->type == JPOS_OBJECT) {
        char **keys = realloc(parent->keys, (parent->n + 1) * sizeof *keys);
        if (!keys)
            goto nomem;
        parent->keys = keys;
        keys[parent->n] = key;
    }
    items[parent->n++] = item;
    return 0;
nomem:
    c->nomem = 1;
    return -1;
}

static jpos_value_t *parse_container(cursor_t *c, int depth, int is_object)
{
    jpos_value_t *v = new_value(c, is_object ? JPOS_OBJECT : JPOS_ARRAY);
    if (!v)
        return NULL;
    if (depth >= MAX_DEPTH) {
        fail(c, c->line, c->col, "nesting deeper than %d levels", MAX_DEPTH);
        goto bad;
    }
    advance(c);
    skip_ws(c);
    int close = is_object ? '}' : ']';
    if (peek(c) == close) {
        advance(c);
        return v;
    }
    for (;;) {
        char *key = NULL;
        skip_ws(c);
        if (is_object) {
            int kl = c->line, kc = c->col;
            if (peek(c) != '"') {
                fail(c, c->line, c->col, "expected a string key");
                goto bad;
            }
            key = parse_string(c);
            if (!key)
                goto bad;
            if (jpos_get(v, key)) {
                fail(c, kl, kc, "duplicate key \"%s\"", key);
                free(key);
                goto bad;
            }
            skip_ws(c);
            if (peek(c) != ':') {
                fail(c, c->line, c->col, "expected ':' after key");
                free(key);
                goto bad;
            }
            advance(c);
        }
        jpos_value_t *item = parse_value(c, depth + 1);
        if (!item) {
            free(key);
            goto bad;
        }
        if (append(c, v, item, key) < 0) {
            free(key);
            jpos_free(&item);
            goto bad;
        }
        skip_ws(c);
        if (peek(c) == ',') {
            advance(c);
            continue;
        }
        if (peek(c) == close) {
            advance(c);
            return v;
        }
        fail(c, c->line, c->col, "expected ',' or '%c'", close);
        goto bad;
    }
bad:
    jpos_free(&v);
    return NULL;
}

static jpos_value_t *parse_value(cursor_t *c, int depth)
{
    skip_ws(c);
    int ch = peek(c);
    jpos_value_t *v = NULL;
    if (ch == '{' || ch == '[')
        return parse_container(c, depth, ch == '{');
    if (ch == '"') {
        v = new_value(c, JPOS_STRING);
        if (v && !(v->string = parse_string(c)))
            jpos_free(&v);
        return v;
    }
    if (ch == '-' || (ch >= '0' && ch <= '9')) {
        v = new_value(c, JPOS_NUMBER);
        if (v && parse_number(c, &v->number) < 0)
            jpos_free(&v);
        return v;
    }
    int line = c->line, col = c->col;
    if (ch == 't' || ch == 'f' || ch == 'n') {
        v = new_value(c, ch == 'n' ? JPOS_NULL : JPOS_BOOL);
        if (!v)
            return NULL;
        if (literal(c, "true"))
            v->boolean = 1;
        else if (literal(c, "false"))
            v->boolean = 0;
        else if (!literal(c, "null"))
            goto bad;
        return v;
    }
bad:
    jpos_free(&v);
    if (ch < 0)
        fail(c, line, col, "unexpected end of text");
    else
        fail(c, line, col, "unexpected character '%c'", ch);
    return NULL;
}

int jpos_parse(const char *text, size_t len, jpos_value_t **out, jpos_error_t *err)
{
    jpos_error_t dummy;
    cursor_t c = {.s = text, .len = len, .line = 1, .col = 1, .err = err ? err : &dummy};
    memset(c.err, 0, sizeof *c.err);
    *out = NULL;
    jpos_value_t *v = parse_value(&c, 0);
    if (v) {
        skip_ws(&c);
        if (c.pos < c.len) {
            fail(&c, c.line, c.col, "unexpected text after the JSON value");
            jpos_free(&v);
        }
    }
    if (c.nomem) {
        jpos_free(&v);
        return -ENOMEM;
    }
    if (!v)
        return -EINVAL;
    *out = v;
    return 0;
}

void jpos_free(jpos_value_t **vp)
{
    if (!vp || !*vp)
        return;
    jpos_value_t *v = *vp;
    for (size_t i = 0; i < v->n; i++) {
        jpos_free(&v->items[i]);
        if (v->keys)
            free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->string);
    free(v);
    *vp = NULL;
}

const jpos_value_t *jpos_get(const jpos_value_t *obj, const char *key)
{
    if (!obj || obj->type != JPOS_OBJECT)
        return NULL;
    for (size_t i = 0; i < obj->n; i++)
        if (strcmp(obj->keys[i], key) == 0)
            return obj->items[i];
    return NULL;
}

const char *jpos_type_name(jpos_type_t t)
{
    static const char *const names[] = {"null", "boolean", "number", "string", "array", "object"};
    return (unsigned)t < sizeof names / sizeof names[0] ? names[t] : "?";
}
