/* pshift.c - the pShift token allocator: proportional start, sparse token movement map, progressive shifting. */
#include "pshift/pshift.h"

#include <errno.h>
#include <limits.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* One (bucket, server) demand pair.  After pshift_solve() the array is sorted
 * by bucket, then server, and doubles as the CSR of the problem: entry e of
 * bucket b lies in [boff[b], boff[b+1]). */
typedef struct {
    int32_t b, s;
    int64_t d;
} entry_t;

/* A block of names (NUL-terminated, back to back).  Blocks never move, so a
 * name's pointer stays valid; pshift_problem_clear() empties them and keeps
 * them for the next round. */
typedef struct nameblock {
    struct nameblock *next;
    size_t cap, used;
    char text[];
} nameblock_t;

struct pshift_problem {
    nameblock_t *names, *names_cur; /* every name; the block being filled */

    int nservers, servers_cap;
    int64_t *cap;
    char **sname;

    int nbuckets, buckets_cap;
    int64_t *target;
    char **bname;

    size_t nent, ent_cap;
    entry_t *ent;
    entry_t *ent2;    /* scratch of build_csr's counting sort (swapped) */
    size_t ent2_cap;
    size_t *fill;     /* ... and its per-bucket cursors */
    size_t fill_cap;

    /* Solution state, valid when `solved`.  The arrays outlive a solve
     * (capacities below), so that solving a problem of the same size
     * again, or after pshift_problem_clear(), allocates nothing. */
    int solved;
    size_t alloc_cap, boff_cap, soff_cap, sent_cap, sbkt_cap, mark_cap, active_cap, load_cap,
        tms_cap;
    int64_t *alloc;   /* per entry */
    size_t *boff;     /* nbuckets + 1 */
    size_t *soff;     /* nservers + 1: per-server lists of shiftable entries */
    uint32_t *sent;   /* entry indices grouped by server, in bucket order */
    int32_t *sbkt;    /* bucket of each sent[] entry, for sequential scans */
    uint64_t *mark;   /* one bit per bucket, scratch for move_tokens() */
    unsigned char *active; /* per bucket: may be shifted (approximation) */
    int64_t *load;    /* tokens per server */
    int lists;        /* soff, sent and sbkt hold this solution's server
                         lists (built only when something may shift) */
    int64_t *tms;     /* |S| x |S| token movement sums, row = source;
                         built only when multi-edge shift paths are searched */
    pshift_stats_t stats;
};

/* Per-solve scratch for the shift-path search. */
typedef struct {
    int *parent, *dist, *queue;
} bfs_t;


/* Makes *arr hold at least `need` (>= 1) elements, contents not kept.
 * Returns 0 or -ENOMEM (then *arr is NULL and *cap 0). */
static int reserve(void **arr, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    free(*arr);
    *arr = malloc(need * elem);
    *cap = *arr ? need : 0;
    return *arr ? 0 : -ENOMEM;
}

/* As reserve(), and zeroes the first `need` elements. */
static int reserve0(void **arr, size_t *cap, size_t need, size_t elem)
{
    if (reserve(arr, cap, need, elem))
        return -ENOMEM;
    memset(*arr, 0, need * elem);
    return 0;
}

static int grow(void **arr, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap : 16;
    while (n < need)
        n *= 2;
    void *p = realloc(*arr, n * elem);
    if (!p)
        return -ENOMEM;
    *arr = p;
    *cap = n;
    return 0;
}

pshift_problem_t *pshift_problem_new(void)
{
    return calloc(1, sizeof(pshift_problem_t));
}

/* Forgets the solution; its arrays are kept for the next solve. */
static void forget_solution(pshift_problem_t *p)
{
    p->solved = 0;
    p->lists = 0;
}

/* Frees the solution's arrays (pshift_problem_destroy()). */
static void release_solution(pshift_problem_t *p)
{
    free(p->alloc);
    free(p->boff);
    free(p->soff);
    free(p->sent);
    free(p->sbkt);
    free(p->mark);
    free(p->active);
    free(p->load);
    free(p->tms);
}

void pshift_problem_destroy(pshift_problem_t **pp)
{
    if (!pp || !*pp)
        return;
    pshift_problem_t *p = *pp;
    pshift_problem_clear(p);
    release_solution(p);
    for (nameblock_t *b = p->names, *next; b; b = next) {
        next = b->next;
        free(b);
    }
    free(p->sname);
    free(p->bname);
    free(p->cap);
    free(p->target);
    free(p->ent);
    free(p->ent2);
    free(p->fill);
    free(p);
    *pp = NULL;
}

void pshift_problem_clear(pshift_problem_t *p)
{
    for (nameblock_t *b = p->names; b; b = b->next)
        b->used = 0;
    p->names_cur = p->names;
    p->nservers = p->nbuckets = 0;
    p->nent = 0;
    forget_solution(p);
    memset(&p->stats, 0, sizeof p->stats);
}

/* Copies `name` (NULL stays NULL) into the problem's name blocks: one
 * allocation per block, not per name, so that 10,000 named buckets are a
 * few blocks rather than 10,000 small blocks scattered over the heap (which
 * also fragment the free memory the solver's arrays come from).  A new
 * block is twice the size of the last one. */
static int dup_name(pshift_problem_t *p, const char *name, char **out)
{
    *out = NULL;
    if (!name)
        return 0;
    size_t n = strlen(name) + 1;
    nameblock_t *b = p->names_cur, *last = b;
    while (b && b->cap - b->used < n) {
        last = b;
        b = b->next;
    }
    if (!b) {
        size_t cap = last ? 2 * last->cap : 4096;
        if (cap < n)
            cap = n;
        if (!(b = malloc(sizeof *b + cap)))
            return -ENOMEM;
        b->next = NULL;
        b->cap = cap;
        b->used = 0;
        if (last)
            last->next = b;
        else
            p->names = b;
    }
    p->names_cur = b;
    *out = memcpy(b->text + b->used, name, n);
    b->used += n;
    return 0;
}

int pshift_add_server(pshift_problem_t *p, const char *name, int64_t capacity)
{
    if (capacity < 0)
        return -EINVAL;
    if (p->nservers == INT_MAX)
        return -ENOMEM;
    size_t cap = (size_t)p->servers_cap, cap2 = cap;
    if (grow((void **)&p->cap, &cap, (size_t)p->nservers + 1, sizeof *p->cap) ||
        grow((void **)&p->sname, &cap2, (size_t)p->nservers + 1, sizeof *p->sname))
        return -ENOMEM;
    p->servers_cap = (int)(cap < cap2 ? cap : cap2);
    char *copy;
    if (dup_name(p, name, &copy))
        return -ENOMEM;
    p->cap[p->nservers] = capacity;
    p->sname[p->nservers] = copy;
    p->solved = 0;
    return p->nservers++;
}

int pshift_add_bucket(pshift_problem_t *p, const char *name, int64_t target)
{
    if (target < 0)
        return -EINVAL;
    if (p->nbuckets == INT_MAX)
        return -ENOMEM;
    size_t cap = (size_t)p->buckets_cap, cap2 = cap;
    if (grow((void **)&p->target, &cap, (size_t)p->nbuckets + 1, sizeof *p->target) ||
        grow((void **)&p->bname, &cap2, (size_t)p->nbuckets + 1, sizeof *p->bname))
        return -ENOMEM;
    p->buckets_cap = (int)(cap < cap2 ? cap : cap2);
    char *copy;
    if (dup_name(p, name, &copy))
        return -ENOMEM;
    p->target[p->nbuckets] = target;
    p->bname[p->nbuckets] = copy;
    p->solved = 0;
    return p->nbuckets++;
}

int pshift_set_demands(pshift_problem_t *p, int s, const int32_t *b, const int64_t *d, size_t n)
{
    if (s < 0 || s >= p->nservers)
        return -EINVAL;
    if (p->ent_cap - p->nent < n &&
        grow((void **)&p->ent, &p->ent_cap, p->nent + n, sizeof *p->ent))
        return -ENOMEM;
    size_t at = p->nent;
    for (size_t i = 0; i < n; i++) {
        if (b[i] < 0 || b[i] >= p->nbuckets || d[i] < 0)
            return -EINVAL; /* p->nent not moved yet: nothing recorded */
        p->ent[at] = (entry_t){.b = b[i], .s = s, .d = d[i]};
        at += d[i] != 0; /* a zero demand's slot is overwritten */
    }
    if (at != p->nent)
        p->solved = 0;
    p->nent = at;
    return 0;
}

int pshift_set_demand(pshift_problem_t *p, int b, int s, int64_t demand)
{
    int32_t one = b;
    return pshift_set_demands(p, s, &one, &demand, 1);
}

static int nthreads(const pshift_opts_t *o)
{
    return o->threads > 0 ? o->threads : omp_get_max_threads();
}

/* Sorts the entries by bucket (counting sort, skipped when they were added
 * bucket by bucket) and by server within a bucket, fills boff, and rejects
 * duplicate pairs. */
static int build_csr(pshift_problem_t *p, int nt)
{
    size_t nb = (size_t)p->nbuckets, n = p->nent;
    if (n >= UINT32_MAX)
        return -ENOMEM;
    if (reserve0((void **)&p->boff, &p->boff_cap, nb + 1, sizeof *p->boff))
        return -ENOMEM;
    int grouped = 1;
    for (size_t e = 0; e < n; e++) {
        p->boff[p->ent[e].b + 1]++;
        if (e && p->ent[e].b < p->ent[e - 1].b)
            grouped = 0;
    }
    for (size_t b = 0; b < nb; b++)
        p->boff[b + 1] += p->boff[b];
    if (!grouped) {
        if (reserve((void **)&p->ent2, &p->ent2_cap, n ? n : 1, sizeof *p->ent2) ||
            reserve((void **)&p->fill, &p->fill_cap, nb ? nb : 1, sizeof *p->fill))
            return -ENOMEM;
        entry_t *sorted = p->ent2;
        size_t *fill = p->fill;
        memcpy(fill, p->boff, nb * sizeof *fill);
        for (size_t e = 0; e < n; e++)
            sorted[fill[p->ent[e].b]++] = p->ent[e];
        p->ent2 = p->ent;
        p->ent = sorted;
        size_t c = p->ent2_cap;
        p->ent2_cap = p->ent_cap;
        p->ent_cap = c;
    }
    int err = 0;
    entry_t *ent = p->ent;
#pragma omp parallel for num_threads(nt) schedule(static)
    for (size_t b = 0; b < nb; b++) {
        /* Insertion sort: buckets are active on few servers. */
        for (size_t i = p->boff[b] + 1; i < p->boff[b + 1]; i++) {
            entry_t x = ent[i];
            size_t j = i;
            while (j > p->boff[b] && ent[j - 1].s > x.s) {
                ent[j] = ent[j - 1];
                j--;
            }
            ent[j] = x;
        }
        for (size_t i = p->boff[b] + 1; i < p->boff[b + 1]; i++)
            if (ent[i].s == ent[i - 1].s) {
#pragma omp atomic write
                err = -EEXIST;
            }
    }
    return err;
}

/* Rejects problems whose sums of capacities, per-bucket demands or tokens
 * would overflow int64_t. */
static int check_sums(const pshift_problem_t *p)
{
    int64_t sum = 0, tokens = 0;
    for (int s = 0; s < p->nservers; s++)
        if (__builtin_add_overflow(sum, p->cap[s], &sum))
            return -EOVERFLOW;
    for (int b = 0; b < p->nbuckets; b++) {
        int64_t d = 0;
        for (size_t e = p->boff[b]; e < p->boff[b + 1]; e++)
            if (__builtin_add_overflow(d, p->ent[e].d, &d))
                return -EOVERFLOW;
        int64_t a = d < p->target[b] ? d : p->target[b];
        if (__builtin_add_overflow(tokens, a, &tokens))
            return -EOVERFLOW;
    }
    return 0;
}

typedef struct {
    uint64_t rem;
    size_t e;
} remainder_t;

static int cmp_remainder(const void *x, const void *y)
{
    const remainder_t *a = x, *b = y;
    if (a->rem != b->rem)
        return a->rem < b->rem ? 1 : -1;
    return a->e < b->e ? -1 : (a->e > b->e);
}

/* Gives one token each to the `left` entries of scratch[0..n) (n <= 16, in
 * increasing entry order, remainders below D <= 2^32) that come first in
 * the order of cmp_remainder(): an entry gets its token iff fewer than
 * `left` entries come before it.  Counting without branches beats sorting,
 * whose comparisons of random remainders the CPU cannot predict.  The key
 * remainder * 16 + (15 - position) orders entries as cmp_remainder() does
 * (ties to the lower entry), so each pair costs one comparison. */
static void give_leftover_small(int64_t *alloc, const remainder_t *scratch, size_t n,
                                int64_t left, uint64_t D)
{
    if (D <= UINT64_C(1) << 27) {
        /* Keys below 2^31 (the usual case): 32-bit, and always 16 of them
         * (padding 0 sorts after every key, remainders being >= 1), so that
         * the compiler compares four at a time. */
        int32_t k32[16] = {0};
        for (size_t i = 0; i < n; i++)
            k32[i] = (int32_t)(scratch[i].rem << 4 | (15 - i));
        for (size_t i = 0; i < n; i++) {
            int before = 0;
            for (size_t j = 0; j < 16; j++)
                before += k32[j] > k32[i];
            alloc[scratch[i].e] += before < left;
        }
        return;
    }
    uint64_t key[16];
    for (size_t i = 0; i < n; i++)
        key[i] = scratch[i].rem << 4 | (15 - i);
    for (size_t i = 0; i < n; i++) {
        int64_t before = 0;
        for (size_t j = 0; j < n; j++)
            before += key[j] > key[i];
        alloc[scratch[i].e] += before < left;
    }
}

/* InitialTokenAllocation (Algorithm 3) for one bucket: A = min(R, D) tokens
 * in proportion to demand, floors first, then the leftover to the largest
 * remainders (ties to the lower server index).  a <= d holds because
 * A <= D; the sum is exactly A. */
static int64_t initial_bucket(pshift_problem_t *p, int b, remainder_t *scratch)
{
    size_t lo = p->boff[b], hi = p->boff[b + 1];
    int64_t D = 0;
    for (size_t e = lo; e < hi; e++)
        D += p->ent[e].d;
    int64_t A = D < p->target[b] ? D : p->target[b];
    if (A == 0) {
        for (size_t e = lo; e < hi; e++)
            p->alloc[e] = 0;
        return 0;
    }
    int64_t given = 0;
    size_t nrem = 0;
    /* A * d needs 128 bits only when either is 2^32 or more (A <= D). */
    int wide = (uint64_t)D > UINT32_MAX;
    for (size_t e = lo; e < hi; e++) {
        uint64_t d = (uint64_t)p->ent[e].d, r;
        if (wide) {
            unsigned __int128 q = (unsigned __int128)A * d;
            p->alloc[e] = (int64_t)(q / (uint64_t)D);
            r = (uint64_t)(q % (uint64_t)D);
        } else {
            uint64_t q = (uint64_t)A * d;
            p->alloc[e] = (int64_t)(q / (uint64_t)D);
            r = q % (uint64_t)D;
        }
        given += p->alloc[e];
        if (r)
            scratch[nrem++] = (remainder_t){r, e};
    }
    int64_t left = A - given; /* < number of entries with a remainder */
    if (left > 0) {
        if (nrem <= 16 && !wide) {
            /* Few entries (buckets are active on few servers), and the
             * remainders, below D < 2^32, leave room for the key. */
            give_leftover_small(p->alloc, scratch, nrem, left, (uint64_t)D);
        } else if (nrem <= 16) {
            for (size_t i = 0; i < nrem; i++) {
                uint64_t ri = scratch[i].rem;
                size_t ei = scratch[i].e;
                int64_t before = 0;
                for (size_t j = 0; j < nrem; j++)
                    before += (scratch[j].rem > ri) | ((scratch[j].rem == ri) & (scratch[j].e < ei));
                p->alloc[ei] += before < left;
            }
        } else {
            qsort(scratch, nrem, sizeof *scratch, cmp_remainder);
            for (int64_t k = 0; k < left; k++)
                p->alloc[scratch[k].e]++;
        }
    }
    return A;
}

static int initial_allocation(pshift_problem_t *p, const pshift_opts_t *o)
{
    size_t maxn = 1;
    for (int b = 0; b < p->nbuckets; b++)
        if (p->boff[b + 1] - p->boff[b] > maxn)
            maxn = p->boff[b + 1] - p->boff[b];
    int nt = nthreads(o), err = 0;
    int64_t tokens = 0;
#pragma omp parallel num_threads(nt) reduction(+ : tokens)
    {
        remainder_t *scratch = malloc(maxn * sizeof *scratch);
        if (!scratch) {
#pragma omp atomic write
            err = -ENOMEM;
        }
#pragma omp for schedule(static)
        for (int b = 0; b < p->nbuckets; b++)
            if (scratch)
                tokens += initial_bucket(p, b, scratch);
        free(scratch);
    }
    p->stats.tokens = tokens;
    return err;
}

/* Key of bucket b for the approximation: tokens (which == 0) or spare
 * demand (which == 1). */
static int64_t approx_key(const pshift_problem_t *p, int b, int which)
{
    int64_t a = 0, d = 0;
    for (size_t e = p->boff[b]; e < p->boff[b + 1]; e++) {
        a += p->alloc[e];
        d += p->ent[e].d;
    }
    return which ? d - a : a;
}

/* Returns the m-th largest value of keys[0..n) (1 <= m <= n); reorders keys.
 * Three-way quickselect, descending. */
static int64_t select_mth_largest(int64_t *keys, size_t n, size_t m)
{
    size_t lo = 0, hi = n, k = m - 1;
    while (hi - lo > 1) {
        int64_t pivot = keys[lo + (hi - lo) / 2], t;
        size_t lt = lo, i = lo, gt = hi;
        while (i < gt) {
            if (keys[i] > pivot) {
                t = keys[lt], keys[lt++] = keys[i], keys[i++] = t;
            } else if (keys[i] < pivot) {
                t = keys[--gt], keys[gt] = keys[i], keys[i] = t;
            } else {
                i++;
            }
        }
        if (k < lt)
            hi = lt;
        else if (k >= gt)
            lo = gt;
        else
            return pivot;
    }
    return keys[k];
}

/* Marks the top m buckets by `which` key in `active`: all above the m-th
 * largest value, then ties in index order. */
static int mark_top(const pshift_problem_t *p, size_t m, int which, unsigned char *active)
{
    size_t n = (size_t)p->nbuckets;
    if (m >= n) {
        memset(active, 1, n);
        return 0;
    }
    int64_t *keys = malloc(n * sizeof *keys), *copy = malloc(n * sizeof *copy);
    if (!keys || !copy) {
        free(keys);
        free(copy);
        return -ENOMEM;
    }
    for (size_t b = 0; b < n; b++)
        keys[b] = copy[b] = approx_key(p, (int)b, which);
    int64_t thr = select_mth_largest(copy, n, m);
    size_t taken = 0;
    for (size_t b = 0; b < n; b++)
        if (keys[b] > thr) {
            active[b] = 1;
            taken++;
        }
    for (size_t b = 0; b < n && taken < m; b++)
        if (keys[b] == thr) {
            active[b] = 1;
            taken++;
        }
    free(keys);
    free(copy);
    return 0;
}

/* Builds the per-server lists of shiftable entries (all of them, or those of
 * the approximation's buckets) and the server loads.  Each thread counts and
 * then fills its own contiguous range of buckets, so every list keeps bucket
 * order whatever the thread count. */
/* Marks the buckets that may be shifted (all, or the approximation's top
 * ones) and sums each server's load. */
static int mark_and_load(pshift_problem_t *p, const pshift_opts_t *o)
{
    size_t ns = (size_t)p->nservers, nb = (size_t)p->nbuckets;
    if (reserve0((void **)&p->active, &p->active_cap, nb ? nb : 1, 1) ||
        reserve0((void **)&p->load, &p->load_cap, ns ? ns : 1, sizeof *p->load))
        return -ENOMEM;
    unsigned char *active = p->active;
    if (o->approx_top == 0) {
        memset(active, 1, nb);
    } else if (mark_top(p, o->approx_top, 0, active) ||
               mark_top(p, o->approx_top, 1, active)) {
        return -ENOMEM;
    }
    size_t considered = 0;
    for (size_t b = 0; b < nb; b++)
        considered += active[b];
    p->stats.buckets_considered = considered;
    for (size_t e = 0; e < p->nent; e++)
        p->load[p->ent[e].s] += p->alloc[e];
    return 0;
}

/* Builds the per-server lists of the shiftable buckets' entries (soff,
 * sent, sbkt), which the shifting phases walk.  Only called when some server
 * is overloaded and another underloaded: on a loaded system (the
 * controller's usual case) nothing can shift and this is skipped. */
static int build_server_lists(pshift_problem_t *p, const pshift_opts_t *o)
{
    size_t ns = (size_t)p->nservers, nb = (size_t)p->nbuckets;
    int nt = nthreads(o);
    size_t *cnt = calloc((size_t)nt * (ns ? ns : 1), sizeof *cnt);
    if (!cnt || reserve0((void **)&p->soff, &p->soff_cap, ns + 1, sizeof *p->soff) ||
        reserve0((void **)&p->mark, &p->mark_cap, nb / 64 + 1, sizeof *p->mark))
        goto nomem;
    const unsigned char *active = p->active;
#pragma omp parallel num_threads(nt)
    {
        size_t *mine = cnt + (size_t)omp_get_thread_num() * ns;
#pragma omp for schedule(static)
        for (size_t b = 0; b < nb; b++)
            if (active[b])
                for (size_t e = p->boff[b]; e < p->boff[b + 1]; e++)
                    mine[p->ent[e].s]++;
#pragma omp single
        {
            size_t at = 0;
            for (size_t s = 0; s < ns; s++) {
                p->soff[s] = at;
                for (int t = 0; t < nt; t++) {
                    size_t c = cnt[(size_t)t * ns + s];
                    cnt[(size_t)t * ns + s] = at;
                    at += c;
                }
            }
            p->soff[ns] = at;
            /* On failure reserve() leaves the array NULL: checked below. */
            reserve((void **)&p->sent, &p->sent_cap, at ? at : 1, sizeof *p->sent);
            reserve((void **)&p->sbkt, &p->sbkt_cap, at ? at : 1, sizeof *p->sbkt);
        }
        if (p->sent && p->sbkt) {
#pragma omp for schedule(static)
            for (size_t b = 0; b < nb; b++)
                if (active[b])
                    for (size_t e = p->boff[b]; e < p->boff[b + 1]; e++) {
                        size_t x = mine[p->ent[e].s]++;
                        p->sent[x] = (uint32_t)e;
                        p->sbkt[x] = (int32_t)b;
                    }
        }
    }
    free(cnt);
    p->lists = p->sent && p->sbkt;
    return p->lists ? 0 : -ENOMEM;
nomem:
    free(cnt);
    return -ENOMEM;
}

/* TM(e -> f) of the paper for one bucket: tokens of entry e movable to the
 * server of entry f without exceeding demand there. */
static inline int64_t tm(const pshift_problem_t *p, size_t e, size_t f)
{
    int64_t spare = p->ent[f].d - p->alloc[f];
    int64_t a = p->alloc[e];
    return spare <= 0 || a <= 0 ? 0 : (a < spare ? a : spare);
}

/* MakeTokenMovementMap (Algorithm 4), sparse: TMS(j, k) sums TM over the
 * buckets present on both j and k, so each bucket adds its n^2 - n pairs and
 * buckets are read in memory order.  Threads split the buckets and sum into
 * private matrices that are added up at the end: integer sums, so the map is
 * the same for any thread count. */
static int make_map(pshift_problem_t *p, const pshift_opts_t *o)
{
    size_t ns = (size_t)p->nservers, cells = ns * ns;
    if (reserve0((void **)&p->tms, &p->tms_cap, ns ? cells : 1, sizeof *p->tms))
        return -ENOMEM;
    int nt = nthreads(o), err = 0;
    int64_t **priv = calloc((size_t)nt, sizeof *priv);
    if (!priv)
        return -ENOMEM;
#pragma omp parallel num_threads(nt)
    {
        int me = omp_get_thread_num();
        int64_t *t = me == 0 ? p->tms : calloc(ns ? cells : 1, sizeof *t);
        priv[me] = t;
        if (!t) {
#pragma omp atomic write
            err = -ENOMEM;
        }
#pragma omp for schedule(static)
        for (int b = 0; b < p->nbuckets; b++) {
            size_t lo = p->boff[b], n = p->boff[b + 1] - lo;
            if (!t || !p->active[b] || n < 2)
                continue;
            for (size_t i = 0; i < n; i++) {
                int64_t a = p->alloc[lo + i];
                if (a == 0)
                    continue;
                int64_t *row = t + (size_t)p->ent[lo + i].s * ns;
                for (size_t k = 0; k < n; k++) {
                    int64_t spare = p->ent[lo + k].d - p->alloc[lo + k];
                    if (k != i && spare > 0)
                        row[p->ent[lo + k].s] += a < spare ? a : spare;
                }
            }
        }
#pragma omp for schedule(static)
        for (size_t c = 0; c < cells; c++)
            for (int k = 1; k < nt; k++)
                if (priv[k])
                    p->tms[c] += priv[k][c];
    }
    for (int k = 1; k < nt; k++)
        free(priv[k]);
    free(priv);
    if (err)
        return err;
    return 0;
}

/* Adds sign * (every TM term of bucket b that involves entry x or entry y)
 * to the map: the terms that change when tokens move between x and y. */
static void map_touch(pshift_problem_t *p, int b, size_t x, size_t y, int sign)
{
    size_t ns = (size_t)p->nservers;
    int64_t *t = p->tms;
    size_t sx = (size_t)p->ent[x].s, sy = (size_t)p->ent[y].s;
    for (size_t g = p->boff[b]; g < p->boff[b + 1]; g++) {
        size_t sg = (size_t)p->ent[g].s;
        if (g != x) {
            t[sx * ns + sg] += sign * tm(p, x, g);
            t[sg * ns + sx] += sign * tm(p, g, x);
        }
        if (g != x && g != y) {
            t[sy * ns + sg] += sign * tm(p, y, g);
            t[sg * ns + sy] += sign * tm(p, g, y);
        }
    }
}

/* Entry of bucket b on server s, or SIZE_MAX. */
static size_t find_entry(const pshift_problem_t *p, int b, int s)
{
    size_t lo = p->boff[b], hi = p->boff[b + 1];
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (p->ent[mid].s < s)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < p->boff[b + 1] && p->ent[lo].s == s ? lo : SIZE_MAX;
}

/* Moves m tokens of bucket b from entry e to entry f and updates the map. */
static void move_one(pshift_problem_t *p, int b, size_t e, size_t f, int64_t m)
{
    map_touch(p, b, e, f, -1);
    p->alloc[e] -= m;
    p->alloc[f] += m;
    map_touch(p, b, e, f, +1);
}

/* Moves w tokens from server u to server v in a prudent transfer and updates
 * the map.  The buckets present on both servers are found by marking v's
 * buckets in a bitmap and scanning u's list: two sequential scans instead of
 * a lookup per entry.  Buckets are taken in u's list order.  Returns tokens
 * moved (w unless the map was wrong). */
static int64_t move_tokens(pshift_problem_t *p, int u, int v, int64_t w)
{
    int64_t moved = 0;
    for (size_t y = p->soff[v]; y < p->soff[v + 1]; y++)
        p->mark[p->sbkt[y] >> 6] |= 1ull << (p->sbkt[y] & 63);
    for (size_t x = p->soff[u]; x < p->soff[u + 1] && moved < w; x++) {
        int b = p->sbkt[x];
        if (!(p->mark[b >> 6] >> (b & 63) & 1))
            continue;
        size_t e = p->sent[x], f = find_entry(p, b, v);
        int64_t m = tm(p, e, f);
        if (m == 0)
            continue;
        if (m > w - moved)
            m = w - moved;
        move_one(p, b, e, f, m);
        moved += m;
    }
    for (size_t y = p->soff[v]; y < p->soff[v + 1]; y++)
        p->mark[p->sbkt[y] >> 6] = 0;
    p->load[u] -= moved;
    p->load[v] += moved;
    return moved;
}

/* BFS over the token transfer graph from overloaded server src to the
 * nearest underloaded server, using paths of at most maxlen edges.  Returns
 * the sink, or -1 if none; sets *cut if the depth limit hid vertices. */
static int find_path(const pshift_problem_t *p, int src, int maxlen, bfs_t *w, int *cut)
{
    int ns = p->nservers, head = 0, tail = 0;
    for (int i = 0; i < ns; i++)
        w->dist[i] = -1;
    w->dist[src] = 0;
    w->queue[tail++] = src;
    while (head < tail) {
        int u = w->queue[head++];
        const int64_t *row = p->tms + (size_t)u * (size_t)ns;
        if (w->dist[u] == maxlen) {
            for (int v = 0; v < ns && !*cut; v++)
                if (row[v] > 0 && w->dist[v] < 0)
                    *cut = 1;
            continue;
        }
        for (int v = 0; v < ns; v++) {
            if (row[v] <= 0 || w->dist[v] >= 0)
                continue;
            w->dist[v] = w->dist[u] + 1;
            w->parent[v] = u;
            if (p->load[v] < p->cap[v])
                return v;
            w->queue[tail++] = v;
        }
    }
    return -1;
}

/* Level 1 of ProgressiveShifting: shift paths of one edge, i.e. direct
 * prudent transfers from each overloaded server P to underloaded servers.
 * Instead of a search per shift, one pass over P's buckets moves, for each
 * bucket, Omega = min(overload of P, underload of Q, a_b^P, spare_b^Q) to
 * every underloaded Q where the bucket has spare demand.  Afterwards no
 * one-edge shift path is left (transfers only lower a_b^P, spare demand and
 * underload), exactly as when Algorithm 5 finishes l = 1.  No map is needed:
 * the bucket's entries on the other servers sit next to its entry on P. */
static void direct_shifts(pshift_problem_t *p)
{
    /* Underloaded servers: a transfer can only fill them (a source stays at
     * or above its capacity), so once there are none nothing can move and
     * the rest of the scan, most of the solve's time on a loaded system,
     * is skipped. */
    int nunder = 0;
    for (int s = 0; s < p->nservers; s++)
        nunder += p->load[s] < p->cap[s];
    for (int src = 0; src < p->nservers && nunder > 0; src++) {
        int64_t over = p->load[src] - p->cap[src];
        for (size_t x = p->soff[src]; x < p->soff[src + 1] && over > 0 && nunder > 0; x++) {
            size_t e = p->sent[x];
            int b = p->sbkt[x];
            for (size_t f = p->boff[b]; f < p->boff[b + 1] && p->alloc[e] > 0 && over > 0; f++) {
                int v = p->ent[f].s;
                int64_t under = p->cap[v] - p->load[v], m = f == e ? 0 : tm(p, e, f);
                if (under <= 0 || m <= 0)
                    continue;
                m = m < over ? m : over;
                m = m < under ? m : under;
                p->alloc[e] -= m;
                p->alloc[f] += m;
                p->load[src] -= m;
                p->load[v] += m;
                nunder -= p->load[v] == p->cap[v];
                over -= m;
                p->stats.shifts++;
                p->stats.longest_path = 1;
            }
        }
    }
    p->stats.levels = 1;
}

/* Nonzero if some server is overloaded and some other underloaded. */
static int shift_possible(const pshift_problem_t *p)
{
    int over = 0, under = 0;
    for (int s = 0; s < p->nservers; s++) {
        over |= p->load[s] > p->cap[s];
        under |= p->load[s] < p->cap[s];
    }
    return over && under;
}

/* ProgressiveShifting (Algorithm 5) for path lengths l = 2, 3, ...: move
 * tokens from each overloaded server along shortest shift paths of at most
 * l edges (found by BFS over the map) until it is no longer overloaded or no
 * path exists.  Stops once no search was cut short by the length bound. */
static int progressive_shifting(pshift_problem_t *p, int max_path)
{
    int ns = p->nservers, err = 0;
    bfs_t w = {malloc(sizeof(int) * (size_t)ns), malloc(sizeof(int) * (size_t)ns),
               malloc(sizeof(int) * (size_t)ns)};
    int *path = malloc(sizeof(int) * (size_t)(ns + 1));
    if (!w.parent || !w.dist || !w.queue || !path) {
        err = -ENOMEM;
        goto out;
    }
    for (int l = 2; l <= ns - 1 && (max_path <= 0 || l <= max_path); l++) {
        int cut = 0;
        p->stats.levels = l;
        for (int src = 0; src < ns; src++) {
            while (p->load[src] > p->cap[src]) {
                int dst = find_path(p, src, l, &w, &cut);
                if (dst < 0)
                    break;
                int len = 0;
                for (int v = dst; v != src; v = w.parent[v])
                    path[len++] = v;
                path[len] = src;
                int64_t omega = p->load[src] - p->cap[src];
                if (p->cap[dst] - p->load[dst] < omega)
                    omega = p->cap[dst] - p->load[dst];
                for (int i = len; i > 0; i--) {
                    int64_t wt = p->tms[(size_t)path[i] * (size_t)ns + (size_t)path[i - 1]];
                    if (wt < omega)
                        omega = wt;
                }
                for (int i = len; i > 0; i--) {
                    if (move_tokens(p, path[i], path[i - 1], omega) != omega) {
                        err = -EFAULT; /* the map disagrees with the allocation */
                        goto out;
                    }
                }
                p->stats.shifts++;
                if (len > p->stats.longest_path)
                    p->stats.longest_path = len;
            }
        }
        if (!cut)
            break;
    }
out:
    free(w.parent);
    free(w.dist);
    free(w.queue);
    free(path);
    return err;
}

static void measure(pshift_problem_t *p, int64_t *phi, int64_t *excess)
{
    *phi = *excess = 0;
    for (int s = 0; s < p->nservers; s++) {
        int64_t l = p->load[s], c = p->cap[s];
        *phi += l < c ? l : c;
        *excess += l > c ? l - c : 0;
    }
}

/* Runs the phases; with map_only, stops after MakeTokenMovementMap. */
static int solve(pshift_problem_t *p, const pshift_opts_t *opts, int map_only)
{
    pshift_opts_t o = opts ? *opts : PSHIFT_OPTS_DEFAULT;
    forget_solution(p);
    memset(&p->stats, 0, sizeof p->stats);
    double t0 = omp_get_wtime();
    int err = build_csr(p, nthreads(&o));
    if (!err)
        err = check_sums(p);
    if (err)
        goto out;
    if (reserve((void **)&p->alloc, &p->alloc_cap, p->nent ? p->nent : 1, sizeof *p->alloc)) {
        err = -ENOMEM;
        goto out;
    }
    if ((err = initial_allocation(p, &o)) || (err = mark_and_load(p, &o)))
        goto out;
    measure(p, &p->stats.phi_initial, &p->stats.weak_excess_initial);
    double t1 = omp_get_wtime(), t_map = 0;
    if (map_only) {
        err = make_map(p, &o);
        goto out;
    }
    p->stats.levels = 1;
    if (shift_possible(p)) {
        if ((err = build_server_lists(p, &o)))
            goto out;
        direct_shifts(p);
    }
    if ((o.max_path <= 0 || o.max_path > 1) && shift_possible(p)) {
        double tm0 = omp_get_wtime();
        if ((err = make_map(p, &o)))
            goto out;
        t_map = omp_get_wtime() - tm0;
        if ((err = progressive_shifting(p, o.max_path)))
            goto out;
    }
    double t3 = omp_get_wtime();
    measure(p, &p->stats.phi, &p->stats.weak_excess_final);
    p->stats.weak_excess_removed =
        p->stats.weak_excess_initial
            ? (double)(p->stats.weak_excess_initial - p->stats.weak_excess_final) /
                  (double)p->stats.weak_excess_initial
            : 1.0;
    p->stats.t_init = t1 - t0;
    p->stats.t_map = t_map;
    p->stats.t_shift = t3 - t1 - t_map;
    p->stats.t_total = t3 - t0;
    p->solved = 1;
out:
    if (err || map_only)
        p->solved = 0;
    if (err)
        forget_solution(p);
    return err;
}

int pshift_solve(pshift_problem_t *p, const pshift_opts_t *opts)
{
    return solve(p, opts, 0);
}

int pshift_initial_map(pshift_problem_t *p, int64_t *out)
{
    int err = solve(p, NULL, 1);
    if (err) {
        forget_solution(p);
        return err;
    }
    size_t ns = (size_t)p->nservers;
    memcpy(out, p->tms, ns * ns * sizeof *out);
    forget_solution(p); /* not a solution: shifting did not run */
    return 0;
}

int pshift_nservers(const pshift_problem_t *p) { return p->nservers; }
int pshift_nbuckets(const pshift_problem_t *p) { return p->nbuckets; }

const char *pshift_server_name(const pshift_problem_t *p, int s)
{
    return s >= 0 && s < p->nservers ? p->sname[s] : NULL;
}

const char *pshift_bucket_name(const pshift_problem_t *p, int b)
{
    return b >= 0 && b < p->nbuckets ? p->bname[b] : NULL;
}

int64_t pshift_server_capacity(const pshift_problem_t *p, int s)
{
    return s >= 0 && s < p->nservers ? p->cap[s] : 0;
}

int64_t pshift_bucket_target(const pshift_problem_t *p, int b)
{
    return b >= 0 && b < p->nbuckets ? p->target[b] : 0;
}

int64_t pshift_alloc(const pshift_problem_t *p, int b, int s)
{
    if (!p->solved || b < 0 || b >= p->nbuckets)
        return 0;
    size_t e = find_entry(p, b, s);
    return e == SIZE_MAX ? 0 : p->alloc[e];
}

size_t pshift_bucket_nentries(const pshift_problem_t *p, int b)
{
    if (!p->solved || b < 0 || b >= p->nbuckets)
        return 0;
    return p->boff[b + 1] - p->boff[b];
}

const int64_t *pshift_bucket_allocs(const pshift_problem_t *p, int b)
{
    if (!p->solved || b < 0 || b >= p->nbuckets)
        return NULL;
    return p->alloc + p->boff[b];
}

void pshift_bucket_entry(const pshift_problem_t *p, int b, size_t k, int *server,
                         int64_t *demand, int64_t *alloc)
{
    size_t e = p->boff[b] + k;
    if (server)
        *server = p->ent[e].s;
    if (demand)
        *demand = p->ent[e].d;
    if (alloc)
        *alloc = p->alloc[e];
}

int64_t pshift_server_load(const pshift_problem_t *p, int s)
{
    return p->solved && s >= 0 && s < p->nservers ? p->load[s] : 0;
}

const pshift_stats_t *pshift_stats(const pshift_problem_t *p)
{
    return &p->stats;
}

int64_t pshift_tms(const pshift_problem_t *p, int j, int k)
{
    if (!p->solved || j < 0 || k < 0 || j >= p->nservers || k >= p->nservers || j == k)
        return 0;
    int64_t sum = 0;
    if (!p->lists) { /* nothing shifted: no server lists, scan the buckets */
        for (int b = 0; b < p->nbuckets; b++) {
            size_t e = p->active[b] ? find_entry(p, b, j) : SIZE_MAX;
            size_t f = e != SIZE_MAX ? find_entry(p, b, k) : SIZE_MAX;
            if (f != SIZE_MAX)
                sum += tm(p, e, f);
        }
        return sum;
    }
    for (size_t x = p->soff[j]; x < p->soff[j + 1]; x++) {
        size_t f = find_entry(p, p->sbkt[x], k);
        if (f != SIZE_MAX)
            sum += tm(p, p->sent[x], f);
    }
    return sum;
}

pshift_problem_t *pshift_residual_new(const pshift_problem_t *solved, const int64_t *targets)
{
    if (!solved->solved)
        return NULL;
    pshift_problem_t *r = pshift_problem_new();
    if (!r)
        return NULL;
    for (int s = 0; s < solved->nservers; s++) {
        int64_t left = solved->cap[s] - solved->load[s];
        if (pshift_add_server(r, solved->sname[s], left > 0 ? left : 0) < 0)
            goto fail;
    }
    for (int b = 0; b < solved->nbuckets; b++) {
        if (pshift_add_bucket(r, solved->bname[b], targets ? targets[b] : INT64_MAX) < 0)
            goto fail;
        for (size_t e = solved->boff[b]; e < solved->boff[b + 1]; e++)
            if (pshift_set_demand(r, b, solved->ent[e].s, solved->ent[e].d - solved->alloc[e]))
                goto fail;
    }
    return r;
fail:
    pshift_problem_destroy(&r);
    return NULL;
}
