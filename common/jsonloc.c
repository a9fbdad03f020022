/* jsonloc.c - find a value's line and column in JSON text by walking a path of members and indexes. */
#include "common/jsonloc.h"

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

/* At '"': skips the string.  If `key` is non-NULL, returns 1 if the string's
 * unescaped content equals key (simple escapes compared as the character
 * they stand for; \u escapes never match, keys with them are rare). */
static int skip_string(scan_t *s, const char *key)
{
    size_t k = 0;
    int match = key != NULL;
    s->i++;
    for (int c; (c = peek(s)) >= 0 && c != '"'; s->i++) {
        if (c == '\\') {
            s->i++;
            c = peek(s);
            static const char from[] = "bfnrt", to[] = "\b\f\n\r\t";
            const char *m = c > 0 ? strchr(from, c) : NULL;
            if (m)
                c = to[m - from];
            else if (c == 'u')
                match = 0;
        }
        if (match && (key[k] == '\0' || (unsigned char)key[k] != c))
            match = 0;
        k++;
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

size_t jsonloc_find(const char *text, size_t len, const jsonloc_step_t *path, size_t n,
                    int *line, int *col)
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
    line_col(text, found, line, col);
    return d;
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
