/* jsonloc.c - find a value's line and column in JSON text by walking a path of members and indexes. */
#include "common/jsonloc.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    const char *t;
    size_t len, i;
} scan_t;

static int peek(const scan_t *s)
{
    return s->i < s->len ? (unsigned char)s->t[s->i] : -1;
}

static void skip_ws(scan_t *s)
{
    int c;
    while ((c = peek(s)) == ' ' || c == '\t' || c == '\n' || c == '\r')
        s->i++;
}

/* Reads the 4 hex digits at t[at..at+4); 0 if they are not (the text was
 * accepted by jansson, so they are). */
static unsigned hex4(const scan_t *s, size_t at)
{
    unsigned v = 0;
    for (size_t k = 0; k < 4; k++) {
        int c = at + k < s->len ? (unsigned char)s->t[at + k] : -1;
        int h = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (h < 0)
            return 0;
        v = v * 16 + (unsigned)h;
    }
    return v;
}

/* Encodes code point cp as UTF-8 into out; returns its length. */
static size_t utf8(unsigned cp, unsigned char *out)
{
    if (cp < 0x80) {
        out[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (unsigned char)(0xC0 | (cp >> 6));
        out[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (unsigned char)(0xE0 | (cp >> 12));
        out[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (unsigned char)(0xF0 | (cp >> 18));
    out[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

/* At '"': skips the string.  If `key` is non-NULL, returns 1 if the string's
 * unescaped content equals key (escapes compared as the bytes they stand
 * for, \uXXXX and surrogate pairs as UTF-8). */
static int skip_string(scan_t *s, const char *key)
{
    size_t k = 0;
    int match = key != NULL;
    s->i++;
    for (int c; (c = peek(s)) >= 0 && c != '"';) {
        unsigned char u[4];
        size_t n = 1;
        s->i++;
        u[0] = (unsigned char)c;
        if (c == '\\') {
            c = peek(s);
            s->i++;
            if (c == 'u') {
                unsigned cp = hex4(s, s->i);
                s->i = s->i + 4 < s->len ? s->i + 4 : s->len;
                if (cp >= 0xD800 && cp < 0xDC00 && s->i + 6 <= s->len && s->t[s->i] == '\\' &&
                    s->t[s->i + 1] == 'u') {
                    unsigned lo = hex4(s, s->i + 2);
                    if (lo >= 0xDC00 && lo < 0xE000) {
                        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                        s->i += 6;
                    }
                }
                n = utf8(cp, u);
            } else {
                static const char from[] = "bfnrt", to[] = "\b\f\n\r\t";
                const char *m = c > 0 ? strchr(from, c) : NULL;
                u[0] = (unsigned char)(m ? to[m - from] : c);
            }
        }
        for (size_t j = 0; match && j < n; j++, k++)
            if (key[k] == '\0' || (unsigned char)key[k] != u[j])
                match = 0;
    }
    if (match && key[k] != '\0')
        match = 0;
    if (peek(s) == '"')
        s->i++;
    return match;
}

/* Skips one value of any kind. */
static void skip_value(scan_t *s)
{
    int c = peek(s), nest = 0;
    if (c == '"') {
        skip_string(s, NULL);
        return;
    }
    if (c != '{' && c != '[') {
        while ((c = peek(s)) >= 0 && !strchr(",}] \t\r\n", c))
            s->i++;
        return;
    }
    while ((c = peek(s)) >= 0) {
        if (c == '"') {
            skip_string(s, NULL);
            continue;
        }
        if (c == '{' || c == '[')
            nest++;
        else if ((c == '}' || c == ']') && --nest == 0) {
            s->i++;
            return;
        }
        s->i++;
    }
}

/* At '{': moves to the value of member `key`.  Returns 1 if found. */
static int enter_member(scan_t *s, const char *key)
{
    s->i++;
    for (;;) {
        skip_ws(s);
        if (peek(s) != '"')
            return 0;
        int match = skip_string(s, key);
        skip_ws(s);
        if (peek(s) != ':')
            return 0;
        s->i++;
        skip_ws(s);
        if (match)
            return 1;
        skip_value(s);
        skip_ws(s);
        if (peek(s) != ',')
            return 0;
        s->i++;
    }
}

/* At '[': moves to element `index`.  Returns 1 if found. */
static int enter_element(scan_t *s, size_t index)
{
    s->i++;
    skip_ws(s);
    if (peek(s) == ']')
        return 0;
    for (size_t k = 0; k < index; k++) {
        skip_value(s);
        skip_ws(s);
        if (peek(s) != ',')
            return 0;
        s->i++;
        skip_ws(s);
    }
    return peek(s) >= 0;
}

static void line_col(const char *t, size_t at, int *line, int *col)
{
    int l = 1, k = 0;
    for (size_t i = 0; i < at; i++) {
        unsigned char ch = (unsigned char)t[i];
        if (ch == '\n') {
            l++;
            k = 0;
        } else if ((ch & 0xC0) != 0x80) {
            k++;
        }
    }
    *line = l;
    *col = k + 1;
}

/* Walks path[0..n) from the start of text to where the deepest value
 * found begins (*pos).  Returns the number of steps matched. */
static size_t walk(const char *text, size_t len, const jsonloc_step_t *path, size_t n, size_t *pos)
{
    scan_t s = {text, len, 0};
    skip_ws(&s);
    size_t found = s.i, d = 0;
    for (; d < n; d++) {
        scan_t at = s;
        int ok = path[d].key ? peek(&s) == '{' && enter_member(&s, path[d].key)
                             : peek(&s) == '[' && enter_element(&s, path[d].index);
        if (!ok) {
            s = at;
            break;
        }
        found = s.i;
    }
    *pos = found;
    return d;
}

size_t jsonloc_find(const char *text, size_t len, const jsonloc_step_t *path, size_t n,
                    int *line, int *col)
{
    size_t at, d = walk(text, len, path, n, &at);
    line_col(text, at, line, col);
    return d;
}

size_t jsonloc_span(const char *text, size_t len, const jsonloc_step_t *path, size_t n,
                    size_t *start, size_t *end)
{
    size_t d = walk(text, len, path, n, start);
    scan_t s = {text, len, *start};
    skip_value(&s);
    *end = s.i;
    return d;
}

size_t jsonloc_elements(const char *text, size_t len, size_t at, size_t *spans, size_t max)
{
    scan_t s = {text, len, at};
    if (peek(&s) != '[')
        return 0;
    s.i++;
    skip_ws(&s);
    if (peek(&s) == ']')
        return 0;
    size_t k = 0;
    for (;;) {
        size_t st = s.i;
        skip_value(&s);
        if (k < max) {
            spans[2 * k] = st;
            spans[2 * k + 1] = s.i;
        }
        k++;
        skip_ws(&s);
        if (peek(&s) != ',')
            return k;
        s.i++;
        skip_ws(&s);
    }
}

void jsonloc_format(const jsonloc_step_t *path, size_t n, char *out, size_t cap)
{
    size_t o = 0;
    if (cap == 0)
        return;
    out[0] = '\0';
    for (size_t d = 0; d < n && o < cap; d++) {
        int w = path[d].key ? snprintf(out + o, cap - o, "%s%s", d ? "." : "", path[d].key)
                            : snprintf(out + o, cap - o, "[%zu]", path[d].index);
        if (w < 0)
            break;
        o += (size_t)w;
    }
}

void jsonloc_err_clear(jsonloc_err_t *e)
{
    if (e)
        memset(e, 0, sizeof *e);
}

int jsonloc_fail(jsonloc_err_t *e, int rc, const char *source, int line, int col,
                 const char *fmt, ...)
{
    if (!e)
        return rc;
    jsonloc_err_clear(e);
    snprintf(e->source, sizeof e->source, "%s", source);
    e->line = line;
    e->col = col;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->text, sizeof e->text, fmt, ap);
    va_end(ap);
    return rc;
}

size_t jsonloc_err_at(jsonloc_err_t *e, const char *text, size_t len, const jsonloc_step_t *path,
                      size_t n)
{
    jsonloc_format(path, n, e->path, sizeof e->path);
    return jsonloc_find(text, len, path, n, &e->line, &e->col);
}
