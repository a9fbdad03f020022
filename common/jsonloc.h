/* jsonloc.h - where a value sits in JSON text (line, column) and the one error struct of the
 * JSON file parsers (pShift instances, scenarios, bucket files).
 *
 * jansson reports positions of syntax errors but keeps none for values, so a
 * semantic error ("buckets[3].limit is below the reservation") would have no
 * line.  jsonloc re-scans the text, which jansson has already accepted, and
 * walks a path of member names and array indexes to the value. */
#ifndef BQOS_JSONLOC_H
#define BQOS_JSONLOC_H

#include <stddef.h>

/* One step of a path: an object member (`key` != NULL) or an array element
 * (`key` == NULL, `index`). */
typedef struct {
    const char *key;
    size_t index;
} jsonloc_step_t;

/* Finds the first character of the value at path[0..n) in `len` bytes of
 * JSON `text`.  Sets *line and *col (1-based; columns count characters as
 * jansson does, one per UTF-8 sequence).  Where a step is missing (a member
 * not present), stops at the deepest value found, so the position points at
 * the object that lacks the member.  Returns the number of steps matched
 * (n if the value was found).  Keys are compared after unescaping (\uXXXX
 * and surrogate pairs as UTF-8).  Safe on any input: garbage just matches
 * fewer steps.  Thread-safe, no allocation. */
size_t jsonloc_find(const char *text, size_t len, const jsonloc_step_t *path, size_t n,
                    int *line, int *col);

/* Like jsonloc_find(), and also the value's extent: *start and *end
 * (byte offsets into text; end one past its last byte) of the value at
 * path[0..n), or of the deepest value found.  Returns the number of steps
 * matched. */
size_t jsonloc_span(const char *text, size_t len, const jsonloc_step_t *path, size_t n,
                    size_t *start, size_t *end);

/* Every element of the array that starts at text[at] ('['), in one pass:
 * element k's start and end (byte offsets, end one past its last byte)
 * go to spans[2k] and spans[2k+1] for k < max.  Returns the number of
 * elements (more than max: only max stored), or 0 if text[at] is not '['.
 * O(len) however many elements: the walk jsonloc_span() does per element
 * is done once.  Safe on any input; no allocation. */
size_t jsonloc_elements(const char *text, size_t len, size_t at, size_t *spans, size_t max);

/* Writes the path as "buckets[3].limit" into out (always NUL-terminated,
 * truncated to cap). */
void jsonloc_format(const jsonloc_step_t *path, size_t n, char *out, size_t cap);

/* Why and where a document was rejected; print it as "SOURCE:LINE:COL: TEXT"
 * (without ":LINE:COL" when line is 0).  Filled by the parser the caller
 * passes it to; owned by the caller, no pointers inside. */
typedef struct {
    char source[256]; /* the file name, "-" or "<string>"; "" if none was given */
    char path[160];   /* the offending value ("buckets[3].limit"); "" for syntax
                         errors and errors about no value */
    int line;         /* 1-based; 0 when no position applies */
    int col;          /* 1-based, characters as jansson counts them; 0 when none */
    char text[256];   /* what is wrong, one line */
} jsonloc_err_t;

/* Zeroes *e.  Accepts NULL. */
void jsonloc_err_clear(jsonloc_err_t *e);

/* Fills *e afresh for an error with no JSON path: source, line and col (0
 * where none applies) and the text printed from fmt (truncated to fit).
 * Returns rc, for `return jsonloc_fail(err, -EINVAL, ...)`.  Accepts e ==
 * NULL: then it only returns rc. */
int jsonloc_fail(jsonloc_err_t *e, int rc, const char *source, int line, int col,
                 const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* Points *e at the value at path[0..n) of `len` bytes of `text`: sets
 * e->path (jsonloc_format) and e->line, e->col (jsonloc_find: the deepest
 * value found).  Returns the number of steps matched, as jsonloc_find(). */
size_t jsonloc_err_at(jsonloc_err_t *e, const char *text, size_t len, const jsonloc_step_t *path,
                      size_t n);

#endif
