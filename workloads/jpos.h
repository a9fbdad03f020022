/* jpos.h - a small JSON reader that remembers where every value sits (line and column), for error messages. */
#ifndef BQOS_JPOS_H
#define BQOS_JPOS_H

#include <stddef.h>

typedef enum {
    JPOS_NULL,
    JPOS_BOOL,
    JPOS_NUMBER,
    JPOS_STRING,
    JPOS_ARRAY,
    JPOS_OBJECT
} jpos_type_t;

/* One parsed value.  The whole tree is owned by its root (free it with
 * jpos_free()); readers treat it as read-only and may share it between
 * threads.  `line` and `col` are 1-based and point at the value's first
 * character. */
typedef struct jpos_value {
    jpos_type_t type;
    int line, col;
    int boolean;                /* JPOS_BOOL */
    double number;              /* JPOS_NUMBER */
    char *string;               /* JPOS_STRING, NUL-terminated UTF-8 */
    size_t n;                   /* JPOS_ARRAY / JPOS_OBJECT: members */
    struct jpos_value **items;  /* member values, in document order */
    char **keys;                /* JPOS_OBJECT: member names */
} jpos_value_t;

/* Where and why parsing failed. */
typedef struct {
    int line, col;
    char text[160];
} jpos_error_t;

/* Parses `len` bytes of JSON text (RFC 8259; nesting depth at most 64).
 * Returns 0 and stores the root in *out (caller owns it, free with
 * jpos_free()); -EINVAL for invalid text with *err filled (if non-NULL);
 * -ENOMEM.  Duplicate object keys are rejected.  *out is NULL on error. */
int jpos_parse(const char *text, size_t len, jpos_value_t **out, jpos_error_t *err);

/* Frees a tree and sets *vp to NULL.  Accepts NULL and *vp == NULL. */
void jpos_free(jpos_value_t **vp);

/* Returns the member `key` of object `obj`, or NULL if absent or if `obj`
 * is not an object.  The result is borrowed from the tree. */
const jpos_value_t *jpos_get(const jpos_value_t *obj, const char *key);

/* Returns a name for a type ("object", "number", ...) for messages. */
const char *jpos_type_name(jpos_type_t t);

#endif
