/* sim_tokens.c - the token policies' allocations for bqos-sim: static splits, and clairvoyant's R and L passes on true demand and capacities. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/bucketfile.h"
#include "pshift/pshift.h"
#include "workloads/sim/sim_model.h"
#include "workloads/sim/sim_run_int.h"

/* Queues tokens records [S][B] in R->tok for every node. */
void sim_run__push_tok(run_t *R)
{
    for (int s = 0; s < R->S; s++) {
        server_t *sv = &R->sv[s];
        sv->push_type = PROTO_TOKENS;
        sv->push_recs = R->tok + (size_t)s * R->B;
        sv->push_n = (size_t)R->B;
    }
}

/* Sets every (server, bucket) record of R->tok to R-tokens `alloc` and,
 * for a bucket with a limit, L-tokens `lalloc` (NULL: 0). */
static void tok_all(run_t *R, const int64_t *alloc, const int64_t *lalloc)
{
    for (int s = 0; s < R->S; s++)
        for (int b = 0; b < R->B; b++) {
            size_t i = (size_t)s * R->B + b;
            int unl = R->cur_lim[b] < 0;
            R->tok[i] = (proto_tokens_rec_t){
                .bucket = (uint32_t)b,
                .flags = unl ? PROTO_TOK_UNLIMITED : 0,
                .r_tokens = alloc ? alloc[i] : 0,
                .l_tokens = unl ? PROTO_UNLIMITED : lalloc ? lalloc[i] : 0};
        }
}

/* A bucket's limit in tokens per period, or BUCKETFILE_NO_LIMIT. */
static int64_t limit_tokens(const run_t *R, int b)
{
    double l = R->cur_lim[b];
    return l < 0 ? BUCKETFILE_NO_LIMIT : llround(ceil(l * R->m->cfg.period));
}

/* Copies the allocation of solved problem p (bucket b at index bidx[b],
 * -1 if absent) into R->tok's R-tokens (lclass 0) or L-tokens (1). */
static void take_solution(run_t *R, pshift_problem_t *p, const int *bidx, int lclass)
{
    for (int b = 0; b < R->B; b++) {
        if (bidx[b] < 0)
            continue;
        size_t n = pshift_bucket_nentries(p, bidx[b]);
        for (size_t e = 0; e < n; e++) {
            int s;
            int64_t a;
            pshift_bucket_entry(p, bidx[b], e, &s, NULL, &a);
            proto_tokens_rec_t *tr = &R->tok[(size_t)s * R->B + b];
            *(lclass ? &tr->l_tokens : &tr->r_tokens) = a;
        }
    }
}

/* clairvoyant, L pass (as the controller's, paper III-D): limited buckets
 * get their headroom (limit - served - R-tokens) placed by pShift on the
 * true capacity left after R and their true demand beyond their R-tokens.
 * Reads R->tok's R-tokens, fills its L-tokens; bidx is scratch.  Returns 0,
 * -ENOMEM or a pShift error. */
static int clairvoyant_lpass(run_t *R, double t, double t_end, int *bidx)
{
    int S = R->S, B = R->B, rc = -ENOMEM;
    pshift_problem_t *q = pshift_problem_new();
    if (!q)
        goto out;
    for (int s = 0; s < S; s++) {
        int64_t used = 0;
        for (int b = 0; b < B; b++)
            used += R->tok[(size_t)s * B + b].r_tokens;
        int64_t cap = llround(R->m->capacity[s] * (t_end - t)) - used;
        if ((rc = pshift_add_server(q, NULL, cap > 0 ? cap : 0)) < 0)
            goto out;
    }
    for (int b = 0; b < B; b++) {
        bidx[b] = -1;
        int64_t lim = limit_tokens(R, b), rsum = 0;
        if (lim == BUCKETFILE_NO_LIMIT)
            continue;
        for (int s = 0; s < S; s++)
            rsum += R->tok[(size_t)s * B + b].r_tokens;
        int64_t head = lim - (int64_t)R->cum[b] - rsum;
        if (head <= 0)
            continue;
        for (int s = 0; s < S; s++) {
            int64_t d = R->dem[(size_t)s * B + b] - R->tok[(size_t)s * B + b].r_tokens;
            if (d <= 0)
                continue;
            if (bidx[b] < 0 && (bidx[b] = rc = pshift_add_bucket(q, NULL, head)) < 0)
                goto out;
            if ((rc = pshift_set_demand(q, bidx[b], s, d)) < 0)
                goto out;
        }
    }
    pshift_opts_t po = PSHIFT_OPTS_DEFAULT;
    po.threads = R->o->threads;
    if ((rc = pshift_solve(q, &po)) < 0)
        goto out;
    take_solution(R, q, bidx, 1);
    rc = 0;
out:
    pshift_problem_destroy(&q);
    return rc;
}

/* clairvoyant: pShift over each (bucket, server)'s queue plus its true
 * demand for the rest of the period, and the true capacities. */
int sim_run__clairvoyant_round(run_t *R, double t, double t_end)
{
    const sim_model_t *m = R->m;
    int S = R->S, B = R->B, nomem = 0;
    #pragma omp parallel reduction(| : nomem)
    {
        double *acc = calloc((size_t)S, sizeof(double));
        nomem |= !acc;
        #pragma omp for schedule(static)
        for (int b = 0; b < B; b++) {
            if (!acc)
                continue;
            memset(acc, 0, (size_t)S * sizeof(double));
            sim_model_demand(m, b, t, t_end, acc);
            for (int s = 0; s < S; s++) {
                sched_bucket_stats_t st;
                sched_bucket_stats(R->sv[s].sch, b, &st);
                R->dem[(size_t)s * B + b] = (int64_t)st.queued + llround(acc[s]);
            }
        }
        free(acc);
    }
    if (nomem)
        return -ENOMEM;
    pshift_problem_t *p = pshift_problem_new();
    int *bidx = malloc((size_t)B * sizeof(int));
    int rc = -ENOMEM;
    if (!p || !bidx)
        goto out;
    for (int s = 0; s < S; s++)
        if ((rc = pshift_add_server(p, NULL, llround(m->capacity[s] * (t_end - t)))) < 0)
            goto out;
    for (int b = 0; b < B; b++) {
        bidx[b] = -1;
        int64_t target = R->res_tokens[b] - (int64_t)R->cum[b];
        int any = 0;
        for (int s = 0; s < S && !any; s++)
            any = R->dem[(size_t)s * B + b] > 0;
        if (target <= 0 || !any)
            continue;
        if ((rc = pshift_add_bucket(p, NULL, target)) < 0)
            goto out;
        bidx[b] = rc;
        for (int s = 0; s < S; s++) {
            int64_t d = R->dem[(size_t)s * B + b];
            if (d > 0 && (rc = pshift_set_demand(p, bidx[b], s, d)) < 0)
                goto out;
        }
    }
    pshift_opts_t po = PSHIFT_OPTS_DEFAULT;
    po.threads = R->o->threads;
    if ((rc = pshift_solve(p, &po)) < 0)
        goto out;
    tok_all(R, NULL, NULL);
    take_solution(R, p, bidx, 0);
    if (R->any_limit && (rc = clairvoyant_lpass(R, t, t_end, bidx)) < 0)
        goto out;
    sim_run__push_tok(R);
    R->r->rounds++;
    rc = 0;
out:
    pshift_problem_destroy(&p);
    free(bidx);
    return rc;
}

/* static: the reservation and the limit's headroom split by the initial
 * demand, every period. */
void sim_run__static_tokens(run_t *R)
{
    int64_t *alloc = R->dem, *lalloc = R->lal; /* scratch */
    memset(alloc, 0, (size_t)R->S * R->B * sizeof(int64_t));
    memset(lalloc, 0, (size_t)R->S * R->B * sizeof(int64_t));
    for (int b = 0; b < R->B; b++) {
        const sim_bucket_t *bk = &R->m->buckets[b];
        const sim_phase_t *ph = &bk->phases[0];
        /* A closed-loop bucket wants the same everywhere it is active. */
        double sum = 0;
        for (int i = 0; i < ph->n; i++)
            sum += bk->outstanding ? 1 : ph->rates[i];
        if (!(sum > 0))
            continue;
        int64_t lim = limit_tokens(R, b);
        int64_t head = lim == BUCKETFILE_NO_LIMIT ? 0 : lim - R->res_tokens[b];
        for (int i = 0; i < ph->n; i++) {
            double share = (bk->outstanding ? 1 : ph->rates[i]) / sum;
            alloc[(size_t)ph->servers[i] * R->B + b] += llround(R->res_tokens[b] * share);
            lalloc[(size_t)ph->servers[i] * R->B + b] += llround((double)head * share);
        }
    }
    tok_all(R, alloc, lalloc);
}

