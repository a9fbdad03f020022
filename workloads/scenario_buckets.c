/* scenario_buckets.c - a scenario's buckets as the controller's reservation file (bqos-load --print-buckets). */
#include "workloads/scenario.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/bucketfile.h"

int scenario_write_buckets(const scenario_t *s, FILE *f)
{
    /* Through the bucket file's own writer, so the file is one the
     * controller and the nodes accept (scenario_parse() checked the bounds). */
    int rc = -ENOMEM;
    char *text = NULL;
    bucketfile_t *bf = bucketfile_new();
    if (!bf)
        goto out;
    for (size_t i = 0; i < s->nbuckets; i++) {
        const scenario_bucket_t *b = &s->buckets[i];
        bucketfile_bucket_t x = {.reservation = (int64_t)floor(b->reservation),
                                 .limit = b->limit == SCENARIO_NO_LIMIT ? BUCKETFILE_NO_LIMIT
                                                                        : (int64_t)ceil(b->limit),
                                 .weight = 1};
        snprintf(x.name, sizeof x.name, "%s", b->name);
        if ((rc = bucketfile_set(bf, &x, NULL)) < 0)
            goto out;
    }
    rc = -ENOMEM;
    if (!(text = bucketfile_dumps(bf)))
        goto out;
    rc = fputs(text, f) < 0 || ferror(f) ? -EIO : 0;
out:
    free(text);
    bucketfile_destroy(&bf);
    return rc;
}
