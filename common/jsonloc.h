/* jsonloc.h - where a value sits in JSON text (line, column), for error messages about parsed documents.
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
 * (n if the value was found).  Keys are compared after unescaping.  Safe on
 * any input: garbage just matches fewer steps.  Thread-safe, no allocation. */
size_t jsonloc_find(const char *text, size_t len, const jsonloc_step_t *path, size_t n,
                    int *line, int *col);

/* Writes the path as "buckets[3].limit" into out (always NUL-terminated,
 * truncated to cap). */
void jsonloc_format(const jsonloc_step_t *path, size_t n, char *out, size_t cap);

#endif
