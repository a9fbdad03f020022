/* sim_shards.c - bqos-sim --shards K: K controller shards and the root step in place of the one controller (sim_shards.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "controller/shardset.h"
#include "workloads/sim/sim_shards.h"

/* One node: where each record of its table goes, and its merged tokens. */
typedef struct {
    size_t ntable;
    int16_t *shard;          /* [ntable] */
    uint32_t *local;         /* [ntable]: index in that shard's table of it */
    proto_tokens_rec_t *out; /* merged tokens, [capout] */
    size_t nout, capout;
} snode_t;

struct sim_shards {
    shardset_t *ss;
    int k;
    snode_t *nd;
    int nn, capn;
    proto_report_rec_t **rec; /* [k] per-shard records of one report */
    size_t *nrec, caprec;
};

sim_shards_t *sim_shards_new(const ctrl_config_t *cfg, int k, const bucketfile_t *bf)
{
    sim_shards_t *sh = calloc(1, sizeof *sh);
    if (!sh)
        return NULL;
    sh->k = k;
    sh->rec = calloc((size_t)(k > 0 ? k : 1), sizeof *sh->rec);
    sh->nrec = calloc((size_t)(k > 0 ? k : 1), sizeof *sh->nrec);
    if (!sh->rec || !sh->nrec || !(sh->ss = shardset_new(cfg, k)) ||
        shardset_set_buckets(sh->ss, bf) < 0) {
        sim_shards_destroy(&sh);
        return NULL;
    }
    return sh;
}

void sim_shards_destroy(sim_shards_t **sp)
{
    if (!sp || !*sp)
        return;
    sim_shards_t *sh = *sp;
    shardset_destroy(&sh->ss);
    for (int i = 0; i < sh->nn; i++) {
        free(sh->nd[i].shard);
        free(sh->nd[i].local);
        free(sh->nd[i].out);
    }
    free(sh->nd);
    for (int s = 0; sh->rec && s < sh->k; s++)
        free(sh->rec[s]);
    free(sh->rec);
    free(sh->nrec);
    free(sh);
    *sp = NULL;
}

int sim_shards_set_buckets(sim_shards_t *sh, const bucketfile_t *bf)
{
    return shardset_set_buckets(sh->ss, bf);
}

int sim_shards_hello(sim_shards_t *sh, int node, const proto_msg_t *m)
{
    if (node != sh->nn)
        return -EPROTO;
    if (sh->nn == sh->capn) {
        int cap = sh->capn ? 2 * sh->capn : 16;
        snode_t *v = realloc(sh->nd, (size_t)cap * sizeof *v);
        if (!v)
            return -ENOMEM;
        sh->nd = v;
        sh->capn = cap;
    }
    snode_t *nd = &sh->nd[sh->nn];
    memset(nd, 0, sizeof *nd);
    size_t n = m->nnames;
    const char **names = malloc((n ? n : 1) * sizeof *names);
    nd->shard = malloc((n ? n : 1) * sizeof *nd->shard);
    nd->local = malloc((n ? n : 1) * sizeof *nd->local);
    int rc = -ENOMEM;
    if (!names || !nd->shard || !nd->local)
        goto out;
    nd->ntable = n;
    for (size_t j = 0; j < n; j++)
        nd->shard[j] = (int16_t)shardset_of(sh->ss, m->names[j]);
    for (int s = 0; s < sh->k; s++) {
        size_t c = 0;
        for (size_t j = 0; j < n; j++)
            if (nd->shard[j] == s) {
                nd->local[j] = (uint32_t)c;
                names[c++] = m->names[j];
            }
        rc = ctrl_node_hello(shardset_shard(sh->ss, s), m->node, m->instance, m->capacity, m->table,
                             names, c);
        if (rc < 0)
            goto out;
        if (rc != node) {
            rc = -EPROTO;
            goto out;
        }
    }
    if (n > sh->caprec) {
        for (int s = 0; s < sh->k; s++) {
            proto_report_rec_t *r = realloc(sh->rec[s], n * sizeof *r);
            if (!r) {
                rc = -ENOMEM;
                goto out;
            }
            sh->rec[s] = r;
        }
        sh->caprec = n;
    }
    sh->nn++;
    rc = 0;
out:
    free(names);
    if (rc < 0) {
        free(nd->shard);
        free(nd->local);
    }
    return rc;
}

int sim_shards_begin(sim_shards_t *sh, uint64_t period, uint32_t interval, double left)
{
    for (int s = 0; s < sh->k; s++) {
        int rc = ctrl_round_begin(shardset_shard(sh->ss, s), period, interval, left);
        if (rc < 0)
            return rc;
    }
    ctrl_t *c0 = shardset_shard(sh->ss, 0);
    const double K = ctrl_config(c0)->intervals;
    return shardset_root(sh->ss, left > 0 ? left : (K - interval) / K, NULL);
}

int sim_shards_report(sim_shards_t *sh, int node, const proto_msg_t *m)
{
    if (node < 0 || node >= sh->nn)
        return -EINVAL;
    if (m->has_names)
        return -ENOTSUP; /* a node's new table: not with shards (yet) */
    const snode_t *nd = &sh->nd[node];
    memset(sh->nrec, 0, (size_t)sh->k * sizeof *sh->nrec);
    for (size_t i = 0; i < m->count; i++) {
        uint32_t j = m->report[i].bucket;
        if (j >= nd->ntable)
            return -EINVAL;
        int s = nd->shard[j];
        proto_report_rec_t *r = &sh->rec[s][sh->nrec[s]++];
        *r = m->report[i];
        r->bucket = nd->local[j];
    }
    for (int s = 0; s < sh->k; s++) {
        int rc = ctrl_node_report(shardset_shard(sh->ss, s), node, m->period, m->interval, m->table,
                                  0, m->completions, m->busy_seconds, sh->rec[s], sh->nrec[s]);
        if (rc < 0)
            return rc;
    }
    return 0;
}

int sim_shards_compute(sim_shards_t *sh, double late, int *skipped)
{
    int all = 1;
    for (int i = 0; i < sh->nn; i++)
        sh->nd[i].nout = 0;
    for (int s = 0; s < sh->k; s++) {
        ctrl_t *c = shardset_shard(sh->ss, s);
        ctrl_round_late(c, late);
        ctrl_result_t res;
        int rc = ctrl_compute(c, &res);
        if (rc < 0)
            return rc;
        all &= res.skipped;
        for (int i = 0; i < sh->nn; i++) {
            snode_t *nd = &sh->nd[i];
            const proto_tokens_rec_t *t;
            size_t n = ctrl_node_tokens(c, i, &t);
            if (nd->capout - nd->nout < n) {
                size_t cap = nd->capout ? nd->capout : 64;
                while (cap - nd->nout < n)
                    cap *= 2;
                proto_tokens_rec_t *o = realloc(nd->out, cap * sizeof *o);
                if (!o)
                    return -ENOMEM;
                nd->out = o;
                nd->capout = cap;
            }
            for (size_t x = 0; x < n; x++) {
                int g = shardset_global(sh->ss, s, t[x].bucket);
                if (g < 0)
                    continue; /* no such bucket of the table: nothing sent */
                nd->out[nd->nout] = t[x];
                nd->out[nd->nout++].bucket = (uint32_t)g;
            }
        }
    }
    if (skipped)
        *skipped = all;
    return 0;
}

size_t sim_shards_tokens(sim_shards_t *sh, int node, const proto_tokens_rec_t **recs)
{
    if (node < 0 || node >= sh->nn) {
        *recs = NULL;
        return 0;
    }
    *recs = sh->nd[node].out;
    return sh->nd[node].nout;
}
