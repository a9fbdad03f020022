/* shardroot.c - the root step of controller shards: every node's capacity divided among the shards, reservations first (a small pShift over shard x node pairs), then demand, then the rest (shardroot.h has the rule). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "controller/count.h"
#include "controller/shardmap.h"
#include "controller/shardroot.h"

#define SHARDROOT_NODES_MAX 4096

struct shardroot {
    int ns, nn;               /* shards, nodes */
    size_t cap;               /* room of the [ns x nn] arrays */
    int capn, caps;           /* room of the per-node / per-shard arrays */
    int64_t *ncap, *ncons;    /* [nn] */
    int64_t *target;          /* [ns] */
    /* [s * nn + n]: inputs, then the parts and the slices */
    int64_t *must, *room, *dem, *placed, *rpart, *est, *cons;
    int solved;
    pshift_problem_t *p;      /* emptied and rebuilt every solve */
    int32_t *eb;              /* [ns] one node's entries for pShift */
    int64_t *ed;
    shardroot_stats_t st;
};

shardroot_t *shardroot_new(void)
{
    shardroot_t *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    if (!(r->p = pshift_problem_new())) {
        free(r);
        return NULL;
    }
    return r;
}

static void free_arrays(shardroot_t *r)
{
    free(r->ncap);
    free(r->ncons);
    free(r->target);
    free(r->must);
    free(r->room);
    free(r->placed);
    free(r->dem);
    free(r->rpart);
    free(r->est);
    free(r->cons);
    free(r->eb);
    free(r->ed);
    r->ncap = r->ncons = r->target = r->must = r->room = r->placed = r->dem = r->rpart = r->est = r->cons = NULL;
    r->eb = NULL;
    r->ed = NULL;
    r->cap = 0;
    r->capn = r->caps = 0;
}

void shardroot_destroy(shardroot_t **rp)
{
    if (!rp || !*rp)
        return;
    shardroot_t *r = *rp;
    free_arrays(r);
    pshift_problem_destroy(&r->p);
    free(r);
    *rp = NULL;
}

/* Grows *a to n elements (contents not kept).  Returns 0 or -ENOMEM. */
static int grow(int64_t **a, size_t n)
{
    int64_t *x = realloc(*a, n * sizeof *x);
    if (!x)
        return -ENOMEM;
    *a = x;
    return 0;
}

int shardroot_reset(shardroot_t *r, int shards, int nodes)
{
    if (!r || shards < 1 || shards > SHARDMAP_MAX || nodes < 0 || nodes > SHARDROOT_NODES_MAX)
        return -EINVAL;
    size_t m = (size_t)shards * (size_t)nodes;
    if (m > r->cap || nodes > r->capn || shards > r->caps) {
        size_t mm = m ? m : 1, nn = nodes ? (size_t)nodes : 1;
        int32_t *eb = realloc(r->eb, (size_t)shards * sizeof *eb);
        if (eb)
            r->eb = eb;
        if (!eb || grow(&r->ed, (size_t)shards) || grow(&r->ncap, nn) || grow(&r->ncons, nn) ||
            grow(&r->target, (size_t)shards) || grow(&r->must, mm) || grow(&r->room, mm) || grow(&r->placed, mm) || grow(&r->dem, mm) ||
            grow(&r->rpart, mm) || grow(&r->est, mm) || grow(&r->cons, mm)) {
            free_arrays(r);
            r->ns = r->nn = 0;
            return -ENOMEM;
        }
        r->cap = mm;
        r->capn = (int)nn;
        r->caps = shards;
    }
    r->ns = shards;
    r->nn = nodes;
    memset(r->ncap, 0, (size_t)nodes * sizeof *r->ncap);
    memset(r->ncons, 0, (size_t)nodes * sizeof *r->ncons);
    memset(r->target, 0, (size_t)shards * sizeof *r->target);
    memset(r->must, 0, m * sizeof *r->must);
    memset(r->room, 0, m * sizeof *r->room);
    memset(r->placed, 0, m * sizeof *r->placed);
    memset(r->dem, 0, m * sizeof *r->dem);
    memset(r->rpart, 0, m * sizeof *r->rpart);
    memset(r->est, 0, m * sizeof *r->est);
    memset(r->cons, 0, m * sizeof *r->cons);
    r->solved = 0;
    r->st = (shardroot_stats_t){0};
    return 0;
}

int shardroot_set_node(shardroot_t *r, int n, int64_t capacity, int64_t conservative)
{
    if (!r || n < 0 || n >= r->nn || capacity < 0 || conservative < 0)
        return -EINVAL;
    r->ncap[n] = capacity;
    r->ncons[n] = conservative < capacity ? conservative : capacity;
    r->solved = 0;
    return 0;
}

int shardroot_set_target(shardroot_t *r, int s, int64_t target)
{
    if (!r || s < 0 || s >= r->ns || target < 0)
        return -EINVAL;
    r->target[s] = target;
    r->solved = 0;
    return 0;
}

int shardroot_set_need(shardroot_t *r, int s, int n, int64_t must, int64_t r_room, int64_t demand)
{
    if (!r || s < 0 || s >= r->ns || n < 0 || n >= r->nn || must < 0 || r_room < 0 || demand < 0)
        return -EINVAL;
    size_t i = (size_t)s * (size_t)r->nn + (size_t)n;
    r->dem[i] = demand;
    r->room[i] = r_room < demand ? r_room : demand;
    r->must[i] = must < r->room[i] ? must : r->room[i];
    r->solved = 0;
    return 0;
}

int shardroot_set_placed(shardroot_t *r, int s, int n, int64_t placed)
{
    if (!r || s < 0 || s >= r->ns || n < 0 || n >= r->nn || placed < 0)
        return -EINVAL;
    r->placed[(size_t)s * (size_t)r->nn + (size_t)n] = placed;
    r->solved = 0;
    return 0;
}

/* floor(a * b / c) for 0 <= b <= c, c > 0, without overflow. */
static int64_t muldiv(int64_t a, int64_t b, int64_t c)
{
    return (int64_t)((__int128)a * b / c);
}

/* Divides `total` over the k entries x[0], x[stride], ... in proportion to
 * w (same layout), each at most w if `capped`: adds to out (same layout)
 * and returns what it gave, at most total.  Rounds down, then gives the
 * remainder one token each to the entries in order (never past w if
 * capped): the sum never exceeds total. */
static int64_t split(int64_t total, const int64_t *w, int64_t *out, int k, size_t stride,
                     int capped)
{
    int64_t W = 0, given = 0;
    for (int i = 0; i < k; i++)
        W = count_add(W, w[(size_t)i * stride]);
    if (total <= 0)
        return 0;
    if (W == 0) { /* nobody wants any: evenly (never when capped) */
        if (capped)
            return 0;
        for (int i = 0; i < k; i++) {
            int64_t g = total / k + (i < total % k ? 1 : 0);
            out[(size_t)i * stride] += g;
            given += g;
        }
        return given;
    }
    if (capped && W <= total) {
        for (int i = 0; i < k; i++)
            out[(size_t)i * stride] += w[(size_t)i * stride];
        return W;
    }
    for (int i = 0; i < k; i++) {
        int64_t g = muldiv(total, w[(size_t)i * stride], W);
        out[(size_t)i * stride] += g;
        given += g;
    }
    for (int i = 0; i < k && given < total; i++) { /* fewer than k tokens */
        if (w[(size_t)i * stride] == 0)
            continue;
        out[(size_t)i * stride]++;
        given++;
    }
    return given;
}

static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Part 1: the shards' reservations over the nodes' conservative
 * capacities, in three tiers: what must go on each node (cut in
 * proportion where that alone overbooks it); then where each shard
 * placed its reservations last round, as far as its room still allows,
 * in proportion to what is left; then the rest of each shard's target by
 * pShift over its room beyond the first two, and what pShift still
 * leaves beyond a node cut in proportion.  Fills rpart (est and cons
 * serve as scratch).  Returns 0 or a pShift error. */
static int place_r(shardroot_t *r, const pshift_opts_t *o)
{
    const int ns = r->ns, nn = r->nn;
    int64_t *w = r->est; /* scratch: est is filled after this part */
    int64_t *fixed = r->cons; /* scratch too: the first two tiers */
    pshift_problem_clear(r->p);
    /* Tier 1 per node. */
    for (int n = 0; n < nn; n++) {
        int64_t msum = 0;
        for (int s = 0; s < ns; s++)
            msum = count_add(msum, r->must[(size_t)s * nn + n]);
        if (msum <= r->ncons[n]) {
            for (int s = 0; s < ns; s++)
                fixed[(size_t)s * nn + n] = r->must[(size_t)s * nn + n];
        } else {
            r->st.r_cut = count_add(r->st.r_cut, msum - r->ncons[n]);
            for (int s = 0; s < ns; s++)
                fixed[(size_t)s * nn + n] = 0;
            split(r->ncons[n], r->must + n, fixed + n, ns, (size_t)nn, 1);
        }
    }
    /* Tier 2's claims: last round's placement beyond must, within the
     * room, and over all nodes at most the shard's target less its must
     * parts (a shard behind or ahead of its pace placed more or less than
     * its reservation left now: scaled to it, in proportion). */
    for (int s = 0; s < ns; s++) {
        int64_t want = 0, room = 0, must = 0;
        for (int n = 0; n < nn; n++) {
            size_t i = (size_t)s * nn + n;
            int64_t p = r->placed[i] < r->room[i] ? r->placed[i] : r->room[i];
            w[i] = p > r->must[i] ? p - r->must[i] : 0;
            want = count_add(want, w[i]);
            room = count_add(room, r->room[i]);
            must = count_add(must, r->must[i]);
        }
        int64_t t = r->target[s] < room ? r->target[s] : room;
        int64_t allow = t > must ? t - must : 0;
        if (want > allow)
            for (int n = 0; n < nn; n++) {
                size_t i = (size_t)s * nn + n;
                w[i] = muldiv(allow, w[i], want);
            }
    }
    for (int n = 0; n < nn; n++) {
        int64_t msum = 0;
        for (int s = 0; s < ns; s++)
            msum += fixed[(size_t)s * nn + n]; /* <= ncons[n] */
        msum += split(r->ncons[n] - msum, w + n, fixed + n, ns, (size_t)nn, 1);
        for (int s = 0; s < ns; s++)
            w[(size_t)s * nn + n] = 0;
        int rc = pshift_add_server(r->p, NULL, r->ncons[n] - msum);
        if (rc < 0)
            return rc;
    }
    for (int s = 0; s < ns; s++) {
        int64_t room = 0;
        for (int n = 0; n < nn; n++) {
            size_t i = (size_t)s * nn + n;
            room = count_add(room, r->room[i]);
        }
        int64_t t = r->target[s] < room ? r->target[s] : room;
        r->st.r_target = count_add(r->st.r_target, t);
        /* Less what the tiers took, and the must part they cut (it has
         * nowhere else to go); tier 2's cut part goes to pShift. */
        int64_t took = 0;
        for (int n = 0; n < nn; n++) {
            size_t i = (size_t)s * nn + n;
            took = count_add(took, fixed[i] > r->must[i] ? fixed[i] : r->must[i]);
        }
        t = t > took ? t - took : 0;
        int rc = pshift_add_bucket(r->p, NULL, t);
        if (rc < 0)
            return rc;
    }
    for (int n = 0; n < nn; n++) {
        size_t k = 0;
        for (int s = 0; s < ns; s++) {
            size_t i = (size_t)s * nn + n;
            int64_t d = r->room[i] - (fixed[i] > r->must[i] ? fixed[i] : r->must[i]);
            if (d > 0 && r->ncons[n] > 0) { /* a down node takes nothing */
                r->eb[k] = s;
                r->ed[k++] = d;
            }
        }
        int rc = k ? pshift_set_demands(r->p, n, r->eb, r->ed, k) : 0;
        if (rc < 0)
            return rc;
    }
    pshift_opts_t po = o ? *o : PSHIFT_OPTS_DEFAULT;
    int rc = pshift_solve(r->p, &po);
    if (rc < 0)
        return rc;
    for (size_t i = 0; i < (size_t)ns * nn; i++)
        r->rpart[i] = fixed[i];
    for (int s = 0; s < ns; s++) {
        size_t m = pshift_bucket_nentries(r->p, s);
        for (size_t k = 0; k < m; k++) {
            int n;
            int64_t a;
            pshift_bucket_entry(r->p, s, k, &n, NULL, &a);
            r->rpart[(size_t)s * nn + n] += a;
        }
    }
    memset(fixed, 0, (size_t)ns * nn * sizeof *fixed);
    /* What pShift could not move off a node is cut in proportion. */
    for (int n = 0; n < nn; n++) {
        int64_t load = 0;
        for (int s = 0; s < ns; s++)
            load = count_add(load, r->rpart[(size_t)s * nn + n]);
        if (load <= r->ncons[n]) {
            r->st.r_placed = count_add(r->st.r_placed, load);
            continue;
        }
        r->st.r_cut = count_add(r->st.r_cut, load - r->ncons[n]);
        /* The wanted amounts as weights, then the cut ones in their place. */
        for (int s = 0; s < ns; s++) {
            w[(size_t)s * nn + n] = r->rpart[(size_t)s * nn + n];
            r->rpart[(size_t)s * nn + n] = 0;
        }
        int64_t g = split(r->ncons[n], w + n, r->rpart + n, ns, (size_t)nn, 1);
        for (int s = 0; s < ns; s++)
            w[(size_t)s * nn + n] = 0;
        r->st.r_placed = count_add(r->st.r_placed, g);
    }
    return 0;
}

int shardroot_solve(shardroot_t *r, const pshift_opts_t *o)
{
    if (!r)
        return -EINVAL;
    double t0 = wall_now();
    const int ns = r->ns, nn = r->nn;
    const size_t m = (size_t)ns * (size_t)nn;
    r->st = (shardroot_stats_t){0};
    memset(r->rpart, 0, m * sizeof *r->rpart);
    memset(r->est, 0, m * sizeof *r->est);
    memset(r->cons, 0, m * sizeof *r->cons);
    int rc = nn ? place_r(r, o) : 0;
    if (rc < 0) {
        memset(r->rpart, 0, m * sizeof *r->rpart);
        r->solved = 0;
        return rc;
    }
    /* Parts 2 and 3 per node, with cons (zero here) as scratch for the
     * parts beyond r. */
    int64_t *beyond = r->cons;
    for (int n = 0; n < nn; n++) {
        int64_t rsum = 0;
        for (int s = 0; s < ns; s++)
            rsum += r->rpart[(size_t)s * nn + n]; /* <= ncons[n] */
        int64_t left = r->ncap[n] - rsum;
        /* Part 2: demand beyond r, in est (as weights) then in beyond. */
        int64_t wsum = 0;
        for (int s = 0; s < ns; s++) {
            size_t i = (size_t)s * nn + n;
            int64_t want = r->dem[i] > r->rpart[i] ? r->dem[i] - r->rpart[i] : 0;
            r->est[i] = want;
            wsum = count_add(wsum, want);
        }
        int64_t g = split(left, r->est + n, beyond + n, ns, (size_t)nn, 1);
        if (wsum > g)
            r->st.demand_cut = count_add(r->st.demand_cut, wsum - g);
        left -= g;
        /* Part 3: the rest, in proportion to demand (evenly if none). */
        left -= split(left, r->dem + n, beyond + n, ns, (size_t)nn, 0);
        /* The slices: est = r + beyond; cons = r + the conservative
         * capacity beyond all r, divided as beyond is. */
        int64_t bsum = r->ncap[n] - rsum - left;
        for (int s = 0; s < ns; s++) {
            size_t i = (size_t)s * nn + n;
            r->est[i] = r->rpart[i] + beyond[i];
        }
        for (int s = 0; s < ns; s++) {
            size_t i = (size_t)s * nn + n;
            int64_t extra = bsum > 0 ? muldiv(r->ncons[n] - rsum, beyond[i], bsum) : 0;
            r->cons[i] = r->rpart[i] + extra;
        }
    }
    r->solved = 1;
    r->st.t_solve = wall_now() - t0;
    return 0;
}

void shardroot_slice(const shardroot_t *r, int s, int n, int64_t *est, int64_t *cons,
                     int64_t *rpart)
{
    int ok = r && r->solved && s >= 0 && s < r->ns && n >= 0 && n < r->nn;
    size_t i = ok ? (size_t)s * (size_t)r->nn + (size_t)n : 0;
    if (est)
        *est = ok ? r->est[i] : 0;
    if (cons)
        *cons = ok ? r->cons[i] : 0;
    if (rpart)
        *rpart = ok ? r->rpart[i] : 0;
}

const shardroot_stats_t *shardroot_stats(const shardroot_t *r)
{
    return &r->st;
}
