/* scenario_query.c - a loaded scenario at run time: the phase in force at a time, the next demand change, the controller's bucket file, and freeing it. */
#include "workloads/scenario.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

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
    fprintf(f, "{\"buckets\": [\n");
    for (size_t i = 0; i < s->nbuckets; i++) {
        const scenario_bucket_t *b = &s->buckets[i];
        fprintf(f, "  {\"name\": \"%s\", \"reservation\": %.0f", b->name, floor(b->reservation));
        if (b->limit != SCENARIO_NO_LIMIT)
            fprintf(f, ", \"limit\": %.0f", ceil(b->limit));
        fprintf(f, "}%s\n", i + 1 < s->nbuckets ? "," : "");
    }
    fprintf(f, "]}\n");
    return ferror(f) ? -EIO : 0;
}
