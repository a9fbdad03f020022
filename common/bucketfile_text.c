/* bucketfile_text.c - the bucket file's text: the canonical dump, and the render that edits the text a set was read from instead of reformatting it. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/bucketfile_int.h"
#include "common/jsonloc.h"

/* Writes bucket b as one object, {"name": ..., "reservation": R[, "limit": L], "weight": W
 * [, "reservation_bytes": RB][, "limit_bytes": LB]}.
 * Returns 0 or -ENOMEM. */
static int put_bucket(FILE *f, const bucketfile_bucket_t *b)
{
    json_t *s = json_string(b->name);
    char *qname = s ? json_dumps(s, JSON_ENCODE_ANY) : NULL;
    json_decref(s);
    if (!qname)
        return -ENOMEM;
    fprintf(f, "{\"name\": %s, \"reservation\": %lld", qname, (long long)b->reservation);
    if (b->limit != BUCKETFILE_NO_LIMIT)
        fprintf(f, ", \"limit\": %lld", (long long)b->limit);
    fprintf(f, ", \"weight\": %u", b->weight);
    if (b->reservation_bytes > 0)
        fprintf(f, ", \"reservation_bytes\": %lld", (long long)b->reservation_bytes);
    if (b->limit_bytes > 0)
        fprintf(f, ", \"limit_bytes\": %lld", (long long)b->limit_bytes);
    fputs("}", f);
    free(qname);
    return 0;
}

/* Closes the memstream f over *out; returns *out, or NULL (freed) on error. */
static char *close_text(FILE *f, char **out, int rc)
{
    if (fclose(f) != 0 || rc < 0) {
        free(*out);
        *out = NULL;
    }
    return *out;
}

char *bucketfile_dumps(const bucketfile_t *bf)
{
    char *out = NULL;
    size_t n;
    FILE *f = open_memstream(&out, &n);
    if (!f)
        return NULL;
    int rc = 0;
    fputs("{\"buckets\": [\n", f);
    for (size_t i = 0; rc == 0 && i < bf->n; i++) {
        fputs("  ", f);
        rc = put_bucket(f, &bf->v[i]);
        fputs(i + 1 < bf->n ? ",\n" : "\n", f);
    }
    fputs("]}\n", f);
    return close_text(f, &out, rc);
}

static int same_bucket(const bucketfile_bucket_t *a, const bucketfile_bucket_t *b)
{
    return strcmp(a->name, b->name) == 0 && a->reservation == b->reservation &&
           a->limit == b->limit && a->weight == b->weight &&
           a->reservation_bytes == b->reservation_bytes && a->limit_bytes == b->limit_bytes;
}

static int same_set(const bucketfile_t *a, const bucketfile_t *b)
{
    if (a->n != b->n)
        return 0;
    for (size_t i = 0; i < a->n; i++)
        if (!same_bucket(&a->v[i], &b->v[i]))
            return 0;
    return 1;
}

/* The base text edited to hold bf: what lies around the buckets array and
 * between its elements is copied; an unchanged bucket keeps its object's
 * text, a changed one is written anew in its place, a removed one goes
 * with its separator, a new one is appended with the separator the last
 * elements use.  NULL if the base cannot be edited so (or no memory). */
static char *edit_text(const bucketfile_t *bf)
{
    const char *t = bf->text;
    bucketfile_t *old = NULL;
    size_t *st = NULL, *en = NULL, as, ae;
    char *out = NULL;
    FILE *f = NULL;
    int rc = -EINVAL;
    if (bucketfile_parse(t, bf->tlen, NULL, &old, NULL) < 0)
        goto out;
    jsonloc_step_t path[2] = {{"buckets", 0}, {NULL, 0}};
    if (jsonloc_span(t, bf->tlen, path, 1, &as, &ae) != 1 || t[as] != '[' || t[ae - 1] != ']')
        goto out;
    size_t no = old->n;
    st = calloc(no + 1, sizeof *st);
    en = calloc(no + 1, sizeof *en);
    if (!st || !en)
        goto out;
    for (size_t k = 0; k < no; k++) {
        path[1].index = k;
        if (jsonloc_span(t, bf->tlen, path, 2, &st[k], &en[k]) != 2)
            goto out;
    }
    /* The whitespace a new element follows: the last separator's (after
     * its comma), else the one before the first element. */
    const char *ws = "\n  ";
    size_t wsn = 3;
    if (no >= 2) {
        ws = memchr(t + en[no - 2], ',', st[no - 1] - en[no - 2]);
        ws = ws ? ws + 1 : t + st[no - 1];
        wsn = (size_t)(t + st[no - 1] - ws);
    } else if (no == 1) {
        ws = t + as + 1;
        wsn = st[0] - as - 1;
    }
    size_t n;
    if (!(f = open_memstream(&out, &n)))
        goto out;
    rc = 0;
    fwrite(t, 1, as + 1, f);
    size_t p = 0; /* elements written */
    for (size_t i = 0; rc == 0 && i < bf->n; i++) {
        const bucketfile_bucket_t *b = &bf->v[i];
        int k = bucketfile_find(old, b->name);
        if (p == 0)
            fwrite(t + as + 1, 1, (no ? st[0] : ae - 1) - as - 1, f);
        else if (k > 0)
            fwrite(t + en[k - 1], 1, st[k] - en[k - 1], f); /* its own separator */
        else {
            fputc(',', f);
            fwrite(ws, 1, wsn, f);
        }
        if (k >= 0 && same_bucket(b, &old->v[k]))
            fwrite(t + st[k], 1, en[k] - st[k], f);
        else
            rc = put_bucket(f, b);
        p++;
    }
    if (p > 0 && no > 0)
        fwrite(t + en[no - 1], 1, ae - 1 - en[no - 1], f); /* before the ']' */
    fwrite(t + ae - 1, 1, bf->tlen - (ae - 1), f);
out:
    if (f)
        close_text(f, &out, rc);
    free(st);
    free(en);
    bucketfile_destroy(&old);
    return rc < 0 ? NULL : out;
}

char *bucketfile_render(const bucketfile_t *bf)
{
    if (!bf->text)
        return bucketfile_dumps(bf);
    char *out = edit_text(bf);
    bucketfile_t *back = NULL;
    /* Whatever the edit made must read back as bf, or the canonical form
     * is written instead. */
    if (out && (bucketfile_parse(out, strlen(out), NULL, &back, NULL) < 0 || !same_set(back, bf))) {
        free(out);
        out = NULL;
    }
    bucketfile_destroy(&back);
    return out ? out : bucketfile_dumps(bf);
}
