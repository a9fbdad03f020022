/* bucketfile_int.h - private to common/bucketfile.c and bucketfile_text.c: the bucket set's struct. */
#ifndef BQOS_BUCKETFILE_INT_H
#define BQOS_BUCKETFILE_INT_H

#include <stddef.h>
#include <stdint.h>

#include "common/bucketfile.h"

/* What a file held when it was read or written. */
typedef struct {
    int exists;       /* 0: the file did not exist */
    int64_t mtime_ns; /* modification time, ns since the epoch (shown, not compared) */
    int64_t size;     /* bytes */
    uint64_t hash;    /* FNV-1a 64 of the content */
} bucketfile_ident_t;

struct bucketfile {
    bucketfile_bucket_t *v; /* file order */
    size_t n, cap;
    int *slot;   /* open-addressing hash of names: index into v, -1 empty */
    size_t nslot;
    char *text;  /* the text it was parsed from or last saved as (NUL-terminated),
                    the base bucketfile_render() edits; NULL: none */
    size_t tlen;
    char *opath; /* the file it was loaded from or last saved to; NULL: none */
    bucketfile_ident_t origin; /* what that file held then */
};

#endif
