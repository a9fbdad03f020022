/* reshard.c - one controller shard through a change of K: the part it runs and the switch at the change's period (reshard.h). */
#include <errno.h>
#include <string.h>

#include "common/rules.h"
#include "common/shardmap.h"
#include "controller/reshard.h"

int reshard_init(reshard_t *rs, int shard, const shardgen_t *g)
{
    if (!rs || shard < 0 || shard >= SHARDMAP_MAX || !shardgen_valid(g))
        return -EINVAL;
    memset(rs, 0, sizeof *rs);
    rs->shard = shard;
    rs->g = *g;
    rs->k_run = g->k;
    rs->gen_run = g->gen;
    return 0;
}

int reshard_learn(reshard_t *rs, const shardgen_t *g)
{
    if (!shardgen_valid(g))
        return -EINVAL;
    if (rs->known && shardgen_same(g, &rs->g))
        return 0;
    if (rs->known && !shardgen_newer(g, &rs->g)) {
        rs->stale++;
        return -ESTALE;
    }
    rs->g = *g;
    rs->known = 1;
    rs->learnt++;
    return 1;
}

int reshard_due(const reshard_t *rs, int64_t t_ms)
{
    return shardgen_gen_at(&rs->g, t_ms) != rs->gen_run || shardgen_k_at(&rs->g, t_ms) != rs->k_run;
}

int reshard_switch(reshard_t *rs, int64_t t_ms)
{
    int k = shardgen_k_at(&rs->g, t_ms);
    rs->gen_run = shardgen_gen_at(&rs->g, t_ms);
    if (k == rs->k_run)
        return 0;
    rs->k_run = k;
    rs->switches++;
    return 1;
}

int reshard_mine(const reshard_t *rs, const char *name)
{
    return name && rs->shard < rs->k_run && shardmap_of(name, rs->k_run) == rs->shard;
}

int reshard_idle(const reshard_t *rs)
{
    return rs->shard >= rs->k_run;
}

int reshard_part(const reshard_t *rs, const bucketfile_t *whole, bucketfile_t **out)
{
    bucketfile_t *part = bucketfile_new();
    int rc = part ? 0 : -ENOMEM;
    for (size_t i = 0; rc == 0 && i < bucketfile_count(whole); i++) {
        const bucketfile_bucket_t *x = bucketfile_get(whole, i);
        if (bucketfile_has_parent(x))
            rc = -ENOTSUP;
        else if (reshard_mine(rs, x->name))
            rc = bucketfile_set(part, x, NULL);
    }
    if (rc == 0 && bucketfile_rules(whole)) { /* templates: made in the shard of each name */
        rules_t *rl = rules_dup(bucketfile_rules(whole));
        rc = rl ? bucketfile_set_rules(part, rl) : -ENOMEM;
        if (rc < 0)
            rules_destroy(&rl);
    }
    if (rc < 0)
        bucketfile_destroy(&part);
    *out = part;
    return rc;
}
