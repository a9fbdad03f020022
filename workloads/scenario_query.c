/* scenario_query.c - a loaded scenario at run time: the phase in force at a time, the next demand change, the controller's bucket file, and freeing it. */
#include "workloads/scenario.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/bucketfile.h"

void scenario_destroy(scenario_t **sp)
{
    if (!sp || !*sp)
        return;
    scenario_t *s = *sp;
    for (size_t i = 0; i < s->nservers; i++) {
        free(s->servers[i].name);
        free(s->servers[i].host);
        free(s->servers[i].backend_host);
    }
    free(s->servers);
    for (size_t i = 0; i < s->nbuckets; i++) {
        for (size_t j = 0; j < s->buckets[i].nphases; j++)
            free(s->buckets[i].phases[j].servers);
        free(s->buckets[i].phases);
        free(s->buckets[i].name);
    }
    free(s->buckets);
    free(s);
    *sp = NULL;
}

const scenario_phase_t *scenario_phase_at(const scenario_bucket_t *b, double t)
{
    size_t i = 0;
    while (i + 1 < b->nphases && b->phases[i + 1].at <= t)
        i++;
    return &b->phases[i];
}

double scenario_next_change(const scenario_bucket_t *b, double t)
{
    for (size_t i = 0; i < b->nphases; i++)
        if (b->phases[i].at > t)
            return b->phases[i].at;
    return INFINITY;
}

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
