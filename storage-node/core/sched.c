/* sched.c - the token scheduler of bqos-node: paper Algorithm 1 over hierarchical ready bitmaps, with paced tokens and reservations by urgency. */
#include "storage-node/core/sched.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/bitset.h"
#include "common/iheap.h"
#include "common/names.h"
#include "common/strmap.h"
#include "storage-node/core/pace.h"
#include "storage-node/core/sched_bytes.h"

#define MIN_CAP 16

/* The searches a dispatch can make; also the "class" a weighted streak
 * belongs to (L and O share step 2).  STEP_A: pacing, R-tokens ahead of
 * their pace (between steps 1 and 2). */
enum { STEP_R = 0, STEP_L = 1, STEP_RR = 2, STEP_A = 3, STEP_S = 4 };

/* What enqueue and dispatch touch, in exactly one cache line: with 100,000
 * buckets the array is far larger than L2, so each extra line per bucket is
 * an extra memory miss per request.  Names and weights live apart. */
typedef struct {
    /* FIFO as a ring: tail->next is the head.  Every item's prev is exact
     * except the head's, which is never read (the head is tail->next), so
     * neither enqueue nor dispatch touches a third item's cache line. */
    sched_item_t *tail;
    uint64_t queued;
    int64_t r, l;                /* tokens left; l may be SCHED_UNLIMITED */
    uint64_t arrivals, served_r, served_l, served_o; /* this period */
} __attribute__((aligned(64))) bucket_t;
_Static_assert(sizeof(bucket_t) == 64, "bucket_t is one cache line");

/* What pacing and the urgency order keep per bucket, apart from bucket_t:
 * only touched while pacing is on or R is served by urgency. */
typedef struct {
    pace_t r, l;  /* paced credit of each class (unpaced: until INFINITY) */
    double pass;  /* urgency: virtual time of its next R service */
    uint64_t seen_r; /* served_r at the last sched_r_behind() scan */
} xbucket_t;

/* Limit accounting (issue 28), apart from the hot line: never touched by
 * a dispatch of a bucket that is not in shadow.  Shadow: the bucket's
 * L-tokens and their paced credit live here, and the scheduler's own l is
 * SCHED_UNLIMITED, so the bucket is served where an unlimited one would
 * be; each IO it is served beyond R is checked against these as the limit
 * would have been, and counted in shadow_held if the limit would have held
 * it.  Waited: the IOs of a limited bucket's queue have sequence numbers
 * (deq_base + the period's service: the number of the next to leave);
 * when a hold ends (bit `lheld` cleared), the IOs queued then that were not
 * counted yet (numbers above counted_hi) have waited for the limit. */
typedef struct {
    int shadow;
    int64_t sl;               /* shadow: the L-tokens the limit would have left */
    pace_t spl;               /* shadow: their credit */
    uint64_t deq_base;        /* IOs that left the queue before this period,
                                 and those taken out (remove, drain) */
    uint64_t counted_hi;      /* the highest number counted as waited */
    uint64_t shadow_held;     /* this period (the agent's report) */
    uint64_t shadow_held_total, waited_total, near_total; /* since start */
} zbucket_t;

/* Requests in flight per bucket (issue 25): handed to the backend and not
 * back yet (sched_note_done()), and the most in flight, queued plus at the
 * backend, since sched_flight_take() last read it.  Apart from the hot
 * line: one 8-byte entry per bucket, touched once by an enqueue, a
 * dispatch and a completion. */
typedef struct {
    uint32_t backend, max;
} fbucket_t;

/* Owned by one thread (the node's loop thread or a simulator); no locks. */
struct sched {
    fbucket_t *fl;          /* cap entries: requests in flight */
    sched_policy_t policy;
    int weighted;
    bucket_t *b;            /* cap entries, 64-byte aligned */
    char **name;            /* cap entries, owned, NUL-terminated */
    uint32_t *weight;       /* cap entries */
    int *route;             /* cap entries: the queue a bucket's requests
                               wait in (itself unless routed) */
    xbucket_t *x;           /* cap entries: pacing and urgency state */
    zbucket_t *z;           /* cap entries: limit accounting and shadow */
    int nshadow;            /* buckets in shadow */
    bitset_t *lheld;        /* queued, limited, and held for it: no class
                               may pay (waited accounting) */
    sched_units_t *y;       /* cap entries: unit accounts (sched_bytes.h),
                               only read for buckets that have one on */
    int nunits;             /* buckets with a unit account on */
    int new_route;          /* route of buckets added from now on, -1: self */
    int nrouted;            /* buckets routed elsewhere: while 0, enqueue
                               does not read `route` (one cache line less
                               per request at 100,000 buckets) */
    int n, cap;
    strmap_t *names;        /* name -> index */
    bitset_t *elig_r;       /* queued > 0 && r > 0 */
    bitset_t *elig_l;       /* queued > 0 && l > 0 */
    bitset_t *ahead;        /* pacing: queued > 0 && r > 0, out of R credit,
                               and no limit or L credit to pay for it */
    bitset_t *pend;         /* queued > 0 */
    int next;               /* round-robin start, shared by steps 1 and 2 */
    int streak_b;           /* weighted: bucket being served in a row, or -1 */
    int streak_step;
    uint32_t streak_left;   /* further picks it may still take in a row */
    sched_node_stats_t node;
    int pacing;             /* sched_set_pacing() */
    double burst_s;
    sched_order_t r_order;  /* sched_set_r_order() */
    iheap_t *wake;          /* pacing: queued buckets out of credit in a
                               class that holds tokens, keyed by the time
                               that credit returns */
    iheap_t *urg;           /* urgency: the buckets of elig_r by pass */
    double vt;              /* urgency: pass of the last R service */
    bitset_t *rhold;        /* pacing: holds R-tokens under a paced grant
                               (cleared lazily by sched_r_behind()) */
    /* Share tokens (issue 28, sched_set_share()), allocated by the first
     * share: [capshare] counts left and as set, and elig_s: queued,
     * unlimited, eligible in step 2 and holding share tokens, keyed by the
     * share of its tokens spent (least first: the holders are served in
     * proportion to their shares).  nshare: buckets holding some; while 0
     * step 2 is exactly the round robin of old. */
    int64_t *share, *share_set;
    int capshare;
    iheap_t *elig_s;
    int nshare;
    double behind_t;        /* sched_r_behind(): time of the last scan */
    int nbehind;            /* ... and what it found */
    double slack;           /* ... and the least (queued + out) / R rate
                               over the buckets behind (INFINITY: none) */
    int behind[SCHED_BEHIND_LIST]; /* ... and the furthest behind of them,
                               furthest first: sched_dispatch_behind()'s
                               candidates */
    int nlist;              /* entries of behind[] */
};

sched_t *sched_new(sched_policy_t policy, int weighted)
{
    if (policy != SCHED_POLICY_TOKENS && policy != SCHED_POLICY_RR)
        return NULL;
    sched_t *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->policy = policy;
    s->weighted = weighted != 0;
    s->streak_b = -1;
    s->new_route = -1;
    s->cap = MIN_CAP;
    s->b = aligned_alloc(64, (size_t)s->cap * sizeof(bucket_t));
    s->name = calloc((size_t)s->cap, sizeof(char *));
    s->weight = calloc((size_t)s->cap, sizeof(uint32_t));
    s->route = calloc((size_t)s->cap, sizeof(int));
    s->x = calloc((size_t)s->cap, sizeof(xbucket_t));
    s->y = calloc((size_t)s->cap, sizeof(sched_units_t));
    s->z = calloc((size_t)s->cap, sizeof(zbucket_t));
    s->fl = calloc((size_t)s->cap, sizeof(fbucket_t));
    s->wake = iheap_new((size_t)s->cap);
    s->urg = iheap_new((size_t)s->cap);
    s->names = strmap_new();
    s->elig_r = bitset_new((size_t)s->cap);
    s->elig_l = bitset_new((size_t)s->cap);
    s->ahead = bitset_new((size_t)s->cap);
    s->pend = bitset_new((size_t)s->cap);
    s->lheld = bitset_new((size_t)s->cap);
    s->rhold = bitset_new((size_t)s->cap);
    s->behind_t = -INFINITY;
    s->slack = INFINITY;
    if (!s->rhold || !s->b || !s->name || !s->weight || !s->route || !s->x || !s->y || !s->z || !s->fl || !s->wake ||
        !s->urg || !s->names || !s->elig_r || !s->elig_l || !s->ahead || !s->pend || !s->lheld)
        sched_destroy(&s);
    return s;
}

void sched_destroy(sched_t **sp)
{
    if (!sp || !*sp)
        return;
    sched_t *s = *sp;
    if (s->name)
        for (int i = 0; i < s->n; i++)
            free(s->name[i]);
    free(s->name);
    free(s->weight);
    free(s->route);
    free(s->x);
    free(s->y);
    free(s->z);
    free(s->fl);
    iheap_destroy(&s->wake);
    iheap_destroy(&s->urg);
    free(s->b);
    strmap_destroy(&s->names);
    bitset_destroy(&s->elig_r);
    bitset_destroy(&s->elig_l);
    bitset_destroy(&s->ahead);
    bitset_destroy(&s->pend);
    bitset_destroy(&s->lheld);
    bitset_destroy(&s->rhold);
    iheap_destroy(&s->elig_s);
    free(s->share);
    free(s->share_set);
    free(s);
    *sp = NULL;
}

void sched_set_policy(sched_t *s, sched_policy_t policy)
{
    if (!s || (policy != SCHED_POLICY_TOKENS && policy != SCHED_POLICY_RR))
        return;
    s->policy = policy;
    s->streak_b = -1;
}

sched_policy_t sched_policy(const sched_t *s)
{
    return s->policy;
}

/* Bucket b enters the R-ready set; by urgency also the heap, at a pass no
 * earlier than the virtual time (a bucket back from idle does not claim
 * the service it did not ask for). */
static void r_on(sched_t *s, int b)
{
    bitset_set(s->elig_r, (size_t)b);
    if (s->r_order == SCHED_ORDER_URGENCY) {
        xbucket_t *x = &s->x[b];
        if (x->pass < s->vt)
            x->pass = s->vt;
        iheap_set(s->urg, b, x->pass);
    }
}

static void r_off(sched_t *s, int b)
{
    bitset_clear(s->elig_r, (size_t)b);
    if (s->r_order == SCHED_ORDER_URGENCY)
        iheap_remove(s->urg, b);
}

/* Waited-for-limit accounting: bucket b (limited) is held now or not.  As
 * a hold ends, every IO in its queue that was not counted yet has waited
 * for the limit.  O(1); touches the bucket's cold state only then. */
static void note_held(sched_t *s, int b, int held)
{
    size_t i = (size_t)b;
    if (held) {
        bitset_set(s->lheld, i);
        return;
    }
    if (!bitset_test(s->lheld, i))
        return;
    bitset_clear(s->lheld, i);
    const bucket_t *k = &s->b[b];
    zbucket_t *z = &s->z[b];
    uint64_t next = z->deq_base + k->served_r + k->served_l + k->served_o;
    uint64_t last = next + k->queued, first = z->counted_hi > next ? z->counted_hi : next;
    if (last > first)
        z->waited_total += last - first;
    z->counted_hi = last;
}

/* Share tokens: bucket b (< capshare, queued) is in elig_s iff it is
 * eligible in step 2 (`l_ok`: no limit, or L-tokens and credit) and holds
 * share tokens. */
static void share_mark(sched_t *s, int b, int l_ok)
{
    if (l_ok && s->share[b] > 0)
        iheap_set(s->elig_s, b, 1.0 - (double)s->share[b] / (double)s->share_set[b]);
    else
        iheap_remove(s->elig_s, b);
}

/* Recomputes bucket b's eligibility from its queue, its tokens and (when
 * pacing) its credit as of the last refill.  A queued bucket held back by
 * credit in a class where it has tokens waits in `wake` until the earliest
 * such credit returns.  Stale credit only errs on "not yet", and its wake
 * time is exact (the rate is constant between grants).  A bucket held back
 * by R credit is "ahead" of its R pace; it may still spend R-tokens when no
 * bucket is R-eligible, if that passes no limit: it has none, or L credit
 * pays for the IO. */
static void refresh(sched_t *s, int b)
{
    const bucket_t *k = &s->b[b];
    size_t i = (size_t)b;
    if (k->queued == 0) {
        if (b < s->capshare)
            iheap_remove(s->elig_s, b);
        if (k->l != SCHED_UNLIMITED && bitset_test(s->lheld, i))
            bitset_clear(s->lheld, i); /* taken out, not served: not counted */
        bitset_clear(s->pend, i);
        r_off(s, b);
        bitset_clear(s->elig_l, i);
        bitset_clear(s->ahead, i);
        if (s->pacing)
            iheap_remove(s->wake, b);
        return;
    }
    bitset_set(s->pend, i);
    int r_ok = k->r > 0, l_ok = k->l > 0, ahead = 0;
    const sched_units_t *y = s->nunits && s->y[b].on ? &s->y[b] : NULL;
    double wake = INFINITY;
    if (s->pacing) {
        const xbucket_t *x = &s->x[b];
        if (r_ok && pace_on(&x->r) && !pace_ready(&x->r)) {
            r_ok = 0;
            ahead = 1;
            wake = pace_wake(&x->r);
        }
        if (l_ok && k->l != SCHED_UNLIMITED && pace_on(&x->l) && !pace_ready(&x->l)) {
            l_ok = 0;
            double w = pace_wake(&x->l);
            wake = w < wake ? w : wake;
        }
        /* In shadow the limit would pay an IO ahead of the R pace with an
         * L-token (step A): here it goes to step 2 as class O, where the
         * shadow account is checked, and its R-tokens keep their pace. */
        ahead = ahead && l_ok && !(s->nshadow && s->z[b].shadow);
    }
    if (y) {
        /* A usable class in each dimension, an R one in either (step 1)
         * or the IO L (step 2). */
        int u = sched__units_usable(y, s->pacing, &wake), u_ok = u & SCHED__U_ANY;
        r_ok = (r_ok || ((u & SCHED__U_R) && l_ok)) && u_ok;
        l_ok = l_ok && u_ok;
        ahead = ahead && u_ok;
    }
    if (wake < INFINITY)
        iheap_set(s->wake, b, wake);
    else if (s->pacing)
        iheap_remove(s->wake, b);
    if (r_ok)
        r_on(s, b);
    else
        r_off(s, b);
    if (l_ok)
        bitset_set(s->elig_l, i);
    else
        bitset_clear(s->elig_l, i);
    if (ahead)
        bitset_set(s->ahead, i);
    else
        bitset_clear(s->ahead, i);
    if (k->l != SCHED_UNLIMITED)
        note_held(s, b, !r_ok && !l_ok && !ahead && s->policy == SCHED_POLICY_TOKENS);
    if (b < s->capshare)
        share_mark(s, b, l_ok);
}

/* Makes room for one more bucket.  Returns 0 or -ENOMEM (nothing changed
 * that matters: bitsets only ever grow). */
static int grow(sched_t *s)
{
    if (s->n < s->cap)
        return 0;
    if (s->cap > (1 << 29))
        return -ENOMEM;
    int ncap = s->cap * 2;
    bucket_t *nb = aligned_alloc(64, (size_t)ncap * sizeof(bucket_t));
    if (!nb)
        return -ENOMEM;
    char **nn = realloc(s->name, (size_t)ncap * sizeof(char *));
    if (!nn) {
        free(nb);
        return -ENOMEM;
    }
    s->name = nn;
    uint32_t *nw = realloc(s->weight, (size_t)ncap * sizeof(uint32_t));
    if (!nw) {
        free(nb);
        return -ENOMEM;
    }
    s->weight = nw;
    int *nr = realloc(s->route, (size_t)ncap * sizeof(int));
    if (!nr) {
        free(nb);
        return -ENOMEM;
    }
    s->route = nr;
    xbucket_t *nx = realloc(s->x, (size_t)ncap * sizeof(xbucket_t));
    if (!nx) {
        free(nb);
        return -ENOMEM;
    }
    s->x = nx;
    sched_units_t *ny = realloc(s->y, (size_t)ncap * sizeof(sched_units_t));
    if (!ny) {
        free(nb);
        return -ENOMEM;
    }
    s->y = ny;
    zbucket_t *nz = realloc(s->z, (size_t)ncap * sizeof(zbucket_t));
    if (!nz) {
        free(nb);
        return -ENOMEM;
    }
    s->z = nz;
    fbucket_t *nf = realloc(s->fl, (size_t)ncap * sizeof(fbucket_t));
    if (!nf) {
        free(nb);
        return -ENOMEM;
    }
    s->fl = nf;
    memcpy(nb, s->b, (size_t)s->n * sizeof(bucket_t));
    free(s->b);
    s->b = nb;
    if (bitset_resize(s->elig_r, (size_t)ncap) < 0 ||
        bitset_resize(s->elig_l, (size_t)ncap) < 0 || bitset_resize(s->ahead, (size_t)ncap) < 0 ||
        bitset_resize(s->pend, (size_t)ncap) < 0 || bitset_resize(s->lheld, (size_t)ncap) < 0 ||
        bitset_resize(s->rhold, (size_t)ncap) < 0 || iheap_reserve(s->wake, (size_t)ncap) < 0 ||
        iheap_reserve(s->urg, (size_t)ncap) < 0)
        return -ENOMEM;
    s->cap = ncap;
    return 0;
}

int sched_add_bucket(sched_t *s, const char *name, uint32_t weight)
{
    if (!s || !name || names_check(name, strnlen(name, NAMES_MAX + 1)) < 0 || weight == 0)
        return -EINVAL;
    size_t len = strlen(name);
    int idx;
    if (strmap_find(s->names, name, len, &idx) == 0)
        return idx;
    int rc = grow(s);
    if (rc < 0)
        return rc;
    char *copy = strdup(name);
    if (!copy)
        return -ENOMEM;
    rc = strmap_insert(s->names, name, len, s->n);
    if (rc < 0) {
        free(copy);
        return rc;
    }
    s->b[s->n] = (bucket_t){.r = 0, .l = SCHED_UNLIMITED};
    xbucket_t *x = &s->x[s->n];
    pace_init(&x->r);
    pace_init(&x->l);
    x->pass = s->vt;
    x->seen_r = 0;
    sched__units_reset(&s->y[s->n]);
    s->z[s->n] = (zbucket_t){0};
    pace_init(&s->z[s->n].spl);
    s->fl[s->n] = (fbucket_t){0};
    s->name[s->n] = copy;
    s->weight[s->n] = weight;
    s->route[s->n] = s->new_route >= 0 && s->new_route < s->n ? s->new_route : s->n;
    s->nrouted += s->route[s->n] != s->n;
    return s->n++;
}

int sched_find_bucket(const sched_t *s, const char *name, size_t len)
{
    int idx;
    if (!s || !name || strmap_find(s->names, name, len, &idx) < 0)
        return -ENOENT;
    return idx;
}

int sched_nbuckets(const sched_t *s)
{
    return s->n;
}

const char *sched_bucket_name(const sched_t *s, int b)
{
    if (!s || b < 0 || b >= s->n)
        return NULL;
    return s->name[b];
}

/* Urgency: bucket b's tickets (weight x R-tokens) change from `from` to
 * `to`.  As in stride scheduling, the part of its pass still ahead of the
 * virtual time scales by from / to: a bucket that just got many more
 * R-tokens is not held back by the long strides of its few old ones. */
static void retick(sched_t *s, int b, double from, double to)
{
    xbucket_t *x = &s->x[b];
    if (s->r_order != SCHED_ORDER_URGENCY || !(from > 0) || !(to > 0) || !(x->pass > s->vt))
        return;
    x->pass = s->vt + (x->pass - s->vt) * (from / to);
    if (iheap_contains(s->urg, b))
        iheap_set(s->urg, b, x->pass);
}

int sched_set_weight(sched_t *s, int b, uint32_t weight)
{
    if (!s || b < 0 || b >= s->n || weight == 0)
        return -EINVAL;
    double r = (double)s->b[b].r;
    retick(s, b, s->weight[b] * r, weight * r);
    s->weight[b] = weight;
    if (s->streak_b == b && s->streak_left > weight - 1)
        s->streak_left = weight - 1;
    return 0;
}

int sched_set_tokens(sched_t *s, int b, int64_t r_tokens, int64_t l_tokens, double until,
                     double now)
{
    if (!s || b < 0 || b >= s->n || r_tokens < 0 || l_tokens < 0 || isnan(until) ||
        (until < INFINITY && !isfinite(now)))
        return -EINVAL;
    bucket_t *k = &s->b[b];
    xbucket_t *x = &s->x[b];
    if (s->nshadow && s->z[b].shadow) {
        /* The limit becomes the shadow account; the bucket runs unlimited. */
        zbucket_t *z = &s->z[b];
        pace_grant(&z->spl, l_tokens, l_tokens == SCHED_UNLIMITED ? INFINITY : until, now,
                   s->burst_s);
        z->sl = l_tokens;
        l_tokens = SCHED_UNLIMITED;
    }
    /* Out of R-tokens, its pass is still ahead by its last token's stride,
     * taken with one token left (1 / weight): scaled as from one, not kept,
     * or a bucket whose period ended on its last token waited for the
     * virtual time to catch up with that stride, a whole period at a busy
     * node (issue 25: seed 499's b22, 2 IOs in 600 ms with 130 R-tokens). */
    retick(s, b, (double)s->weight[b] * (double)(k->r > 0 ? k->r : 1),
           (double)s->weight[b] * (double)r_tokens);
    pace_grant(&x->r, r_tokens, until, now, s->burst_s);
    pace_grant(&x->l, l_tokens, l_tokens == SCHED_UNLIMITED ? INFINITY : until, now, s->burst_s);
    k->r = r_tokens;
    k->l = l_tokens;
    if (r_tokens > 0 && pace_on(&x->r))
        bitset_set(s->rhold, (size_t)b);
    else
        bitset_clear(s->rhold, (size_t)b);
    refresh(s, b);
    if (l_tokens == SCHED_UNLIMITED)
        note_held(s, b, 0); /* no limit now: a hold for it ends */
    return 0;
}

int sched_set_shadow(sched_t *s, int b, int on)
{
    if (!s || b < 0 || b >= s->n)
        return -EINVAL;
    on = on != 0;
    bucket_t *k = &s->b[b];
    xbucket_t *x = &s->x[b];
    zbucket_t *z = &s->z[b];
    if (z->shadow == on)
        return 0;
    /* The L account and its credit change places: the limit's tokens go
     * to the shadow account and the bucket runs unlimited, or back. */
    if (on) {
        z->sl = k->l;
        z->spl = x->l;
        k->l = SCHED_UNLIMITED;
        pace_init(&x->l);
    } else {
        k->l = z->sl;
        x->l = z->spl;
        pace_init(&z->spl);
        z->sl = 0;
    }
    z->shadow = on;
    s->nshadow += on ? 1 : -1;
    refresh(s, b);
    if (on)
        note_held(s, b, 0);
    return 0;
}

int sched_shadow(const sched_t *s, int b)
{
    if (!s || b < 0 || b >= s->n)
        return -EINVAL;
    return s->z[b].shadow;
}

int sched_set_units(sched_t *s, int b, int on, int64_t r_units, int64_t l_units, double until,
                    double now)
{
    if (!s || b < 0 || b >= s->n || isnan(until) || (until < INFINITY && !isfinite(now)) ||
        (on && (r_units < 0 || l_units < -(INT64_MAX / 4))))
        return -EINVAL;
    sched_units_t *y = &s->y[b];
    s->nunits += (on != 0) - y->on;
    if (on)
        sched__units_grant(y, r_units, l_units, until, now, s->burst_s);
    else
        sched__units_reset(y);
    refresh(s, b);
    return 0;
}

int sched_charge(sched_t *s, const sched_item_t *item, uint64_t units)
{
    if (!s || !item)
        return -EINVAL;
    int b = item->bucket, origin = item->origin;
    if (b < 0 || b >= s->n || origin >= s->n)
        return -EINVAL;
    s->node.units += units;
    sched_units_t *y = &s->y[b];
    if (origin >= 0 && origin != b) {
        s->y[origin].arrivals += units;
        s->y[origin].served += units;
    }
    if (!y->on)
        return 0;
    y->arrivals += units;
    sched__units_take(y, y->r > 0, units, s->pacing, -1);
    refresh(s, b);
    return 0;
}

int sched_set_pacing(sched_t *s, int on, double burst_s)
{
    if (!s || !(burst_s >= 0) || burst_s > SCHED_BURST_MAX)
        return -EINVAL;
    s->pacing = on != 0;
    s->burst_s = burst_s;
    iheap_clear(s->wake);
    for (int b = 0; b < s->n; b++)
        refresh(s, b);
    return 0;
}

int sched_set_r_order(sched_t *s, sched_order_t order)
{
    if (!s || (order != SCHED_ORDER_RR && order != SCHED_ORDER_URGENCY))
        return -EINVAL;
    s->r_order = order;
    s->streak_b = -1;
    iheap_clear(s->urg);
    for (int b = 0; b < s->n; b++)
        s->x[b].pass = s->vt; /* everyone starts level */
    if (order == SCHED_ORDER_URGENCY)
        for (long b = bitset_next(s->elig_r, 0); b >= 0; b = bitset_next(s->elig_r, (size_t)b + 1))
            iheap_set(s->urg, (int)b, s->vt);
    return 0;
}

void sched_get_pacing(const sched_t *s, int *on, double *burst_s, sched_order_t *order)
{
    if (on)
        *on = s->pacing;
    if (burst_s)
        *burst_s = s->burst_s;
    if (order)
        *order = s->r_order;
}

double sched_next_ready(const sched_t *s)
{
    double t;
    if (!s || !s->pacing || s->policy != SCHED_POLICY_TOKENS || iheap_top(s->wake, &t) < 0)
        return INFINITY;
    return t;
}

/* Appends item to queue q's FIFO (no counters but the queue length). */
static void push_tail(sched_t *s, int q, sched_item_t *item)
{
    bucket_t *k = &s->b[q];
    item->bucket = q;
    if (k->tail) {
        item->next = k->tail->next;
        item->prev = k->tail;
        k->tail->next = item;
    } else {
        item->next = item->prev = item;
    }
    k->tail = item;
    if (k->queued++ == 0)
        refresh(s, q);
}

int sched_enqueue(sched_t *s, int b, sched_item_t *item)
{
    if (!s || !item || b < 0 || b >= s->n)
        return -EINVAL;
    item->origin = b;
    int q = s->nrouted ? s->route[b] : b;
    if (q != b) {
        s->b[b].arrivals++; /* who sent it; the queue's bucket counts it too */
        if (s->nunits)
            s->y[b].arrivals += item->cost;
        b = q;
    }
    s->b[b].arrivals++;
    if (s->nunits)
        s->y[b].arrivals += item->cost;
    push_tail(s, b, item);
    fbucket_t *f = &s->fl[item->origin];
    uint64_t n = s->b[b].queued + f->backend;
    if (n > f->max)
        f->max = n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
    return 0;
}

int sched_set_route(sched_t *s, int b, int to)
{
    if (!s || b < 0 || b >= s->n || to < -1 || to >= s->n)
        return -EINVAL;
    if (to < 0)
        to = b;
    s->nrouted += (to != b) - (s->route[b] != b);
    s->route[b] = to;
    bucket_t *k = &s->b[b];
    if (to == b || !k->tail)
        return 0;
    /* Move the waiting requests over, oldest first: open the ring after
     * the tail, then append each to `to`'s queue. */
    sched_item_t *it = k->tail->next;
    k->tail->next = NULL;
    k->tail = NULL;
    k->queued = 0;
    refresh(s, b);
    while (it) {
        sched_item_t *nx = it->next;
        push_tail(s, to, it);
        it = nx;
    }
    return 0;
}

int sched_route(const sched_t *s, int b)
{
    if (!s || b < 0 || b >= s->n)
        return -EINVAL;
    return s->route[b];
}

int sched_set_new_route(sched_t *s, int to)
{
    if (!s || to < -1 || to >= s->n)
        return -EINVAL;
    s->new_route = to;
    return 0;
}

/* Round-robin search of one ready bitmap starting at `next` (with wrap).
 * The O(1) emptiness test first: in steady state most dispatches find no
 * R-eligible bucket, and a failed search would climb every level twice. */
static int search(const sched_t *s, const bitset_t *ready)
{
    if (!bitset_any(ready))
        return -1;
    return (int)bitset_next_wrap(ready, (size_t)s->next);
}

/* Moves `next` after serving bucket b in step `step`: to b + 1 as in the
 * paper, unless the weighted round robin lets b go again. */
static void advance(sched_t *s, int b, int step)
{
    if (s->weighted) {
        if (s->streak_b == b && s->streak_step == step && s->streak_left > 0) {
            s->streak_left--;
        } else {
            s->streak_b = b;
            s->streak_step = step;
            s->streak_left = s->weight[b] - 1;
        }
        if (s->streak_left > 0) {
            s->next = b; /* search starts at b: it is found first if still eligible */
            return;
        }
        s->streak_b = -1;
    }
    /* May equal n: the search then wraps to 0, or finds a bucket added
     * since, which is next in index order. */
    s->next = b + 1;
}

/* Pacing: every queued bucket whose credit has returned by `now` goes back
 * into the ready sets; O(log n) per bucket that returns.  A bucket popped
 * here leaves `wake` or goes back later than `now` (pace_refill() makes
 * due credit usable), so the loop ends. */
static void wake_due(sched_t *s, double now)
{
    double t;
    int b;
    while ((b = iheap_top(s->wake, &t)) >= 0 && t <= now) {
        pace_refill(&s->x[b].r, now);
        pace_refill(&s->x[b].l, now);
        if (s->nunits && s->y[b].on)
            sched__units_refill(&s->y[b], now);
        refresh(s, b);
    }
}

/* Pacing: takes one unit of a class's credit at `now` (if it paces). */
static void take_credit(pace_t *p, double now)
{
    if (pace_on(p)) {
        pace_refill(p, now);
        pace_take(p);
    }
}

/* Shadow: an IO of bucket b's (z) served beyond R, where the limit would
 * have had it pay an L-token and (pacing) a unit of credit.  If it would
 * have had them they are taken from the shadow account, else the limit
 * would have held it: counted. */
static void shadow_take(sched_t *s, zbucket_t *z, double now)
{
    if (z->sl == SCHED_UNLIMITED)
        return;
    int ok = z->sl > 0;
    if (ok && s->pacing && pace_on(&z->spl)) {
        pace_refill(&z->spl, now);
        if ((ok = pace_ready(&z->spl)))
            pace_take(&z->spl);
    }
    if (ok) {
        z->sl--;
    } else {
        z->shadow_held++;
        z->shadow_held_total++;
    }
}

/* Unpaced, a dispatch clears the bit of a count that hit 0 without
 * refresh(): if that left queued limited bucket b in no ready set, it is
 * held from now (the waited accounting).  Only when a count hits 0. */
static void held_by_count(sched_t *s, int b)
{
    const bucket_t *k = &s->b[b];
    if (k->queued && k->l != SCHED_UNLIMITED && s->policy == SCHED_POLICY_TOKENS &&
        !bitset_test(s->elig_r, (size_t)b) && !bitset_test(s->elig_l, (size_t)b))
        note_held(s, b, 1);
}

/* Step 2 with share tokens in use: the round robin found bucket b; the
 * turn goes first to a bucket holding share tokens, the one that has spent
 * the least part of them (so holders are served in proportion to their
 * shares), as step S: a limited one pays with an L-token as in step 2.
 * Returns the bucket to serve. */
static int share_turn(sched_t *s, int b, int *step)
{
    int sb;
    /* Every holder in the heap is eligible in step 2 (refresh() and the
     * dispatch keep it so); one that is not would be a bug: it leaves. */
    while ((sb = iheap_top(s->elig_s, NULL)) >= 0 && !bitset_test(s->elig_l, (size_t)sb))
        iheap_remove(s->elig_s, sb);
    if (sb < 0)
        return b;
    *step = STEP_S;
    return sb;
}

/* A dispatch of bucket b by a share token: one less. */
static void share_take(sched_t *s, int b)
{
    if (--s->share[b] == 0) {
        s->nshare--;
        iheap_remove(s->elig_s, b);
    } else if (iheap_contains(s->elig_s, b)) {
        iheap_set(s->elig_s, b, 1.0 - (double)s->share[b] / (double)s->share_set[b]);
    }
}

int sched_set_share(sched_t *s, int b, int64_t n)
{
    if (!s || b < 0 || b >= s->n || n < 0)
        return -EINVAL;
    if (b >= s->capshare) {
        if (n == 0)
            return 0; /* nothing to hold: no memory spent */
        int ncap = s->cap;
        int64_t *ns = realloc(s->share, (size_t)ncap * sizeof *ns);
        if (!ns)
            return -ENOMEM;
        s->share = ns;
        int64_t *nz = realloc(s->share_set, (size_t)ncap * sizeof *nz);
        if (!nz)
            return -ENOMEM;
        s->share_set = nz;
        memset(ns + s->capshare, 0, (size_t)(ncap - s->capshare) * sizeof *ns);
        memset(nz + s->capshare, 0, (size_t)(ncap - s->capshare) * sizeof *nz);
        if (!s->elig_s && !(s->elig_s = iheap_new((size_t)ncap)))
            return -ENOMEM;
        if (iheap_reserve(s->elig_s, (size_t)ncap) < 0)
            return -ENOMEM;
        s->capshare = ncap;
    }
    s->nshare += (n > 0) - (s->share[b] > 0);
    s->share[b] = n;
    s->share_set[b] = n;
    if (s->b[b].queued)
        share_mark(s, b, bitset_test(s->elig_l, (size_t)b));
    else
        iheap_remove(s->elig_s, b);
    return 0;
}

int64_t sched_share(const sched_t *s, int b)
{
    if (!s || b < 0 || b >= s->n || b >= s->capshare)
        return 0;
    return s->share[b];
}

/* R credit of p at `now` without moving it (pace_refill() would). */
static double credit_at(const pace_t *p, double now)
{
    double t = now < p->until ? now : p->until;
    double c = p->credit + (t > p->stamp ? p->rate * (t - p->stamp) : 0);
    return c < p->depth ? c : p->depth;
}

/* How far bucket b is behind its R pace at `now`, in seconds of its paced
 * R rate: its R credit unspent (capped at its depth) over that rate.
 * -INFINITY when it has no paced R rate. */
static double r_lag(const sched_t *s, int b, double now)
{
    const pace_t *p = &s->x[b].r;
    if (!(p->rate > 0))
        return -INFINITY;
    return credit_at(p, now) / p->rate;
}

/* sched_dispatch_behind()'s bucket: of the last scan's list, the one
 * R-eligible now that is furthest behind (r_lag()), or -1.  At most
 * SCHED_BEHIND_LIST tests. */
static int behind_pick(sched_t *s, double now)
{
    int best = -1;
    double lag = -INFINITY;
    for (int j = 0; j < s->nlist; j++) {
        int b = s->behind[j];
        if (!bitset_test(s->elig_r, (size_t)b))
            continue;
        double d = r_lag(s, b, now);
        if (best < 0 || d > lag) {
            lag = d;
            best = b;
        }
    }
    return best;
}

/* The scan keeps the SCHED_BEHIND_LIST buckets furthest behind: bucket b
 * at lag d enters the list (sorted, furthest first) if it beats its last. */
static void behind_keep(sched_t *s, double *lags, int b, double d)
{
    int j;
    if (s->nlist < SCHED_BEHIND_LIST)
        j = s->nlist++;
    else if (lags[SCHED_BEHIND_LIST - 1] >= d)
        return;
    else
        j = SCHED_BEHIND_LIST - 1;
    while (j > 0 && lags[j - 1] < d) {
        lags[j] = lags[j - 1];
        s->behind[j] = s->behind[j - 1];
        j--;
    }
    lags[j] = d;
    s->behind[j] = b;
}

/* sched_dispatch(), or with r_only step 1 alone (sched_dispatch_r()), or
 * with behind_only step 1 for the buckets behind (sched_dispatch_behind()). */
static sched_item_t *dispatch(sched_t *s, double now, sched_class_t *cls, int r_only,
                              int behind_only)
{
    if (!s || s->n == 0)
        return NULL;
    int b, step;
    sched_class_t c;
    if (r_only && s->policy == SCHED_POLICY_RR) {
        return NULL;
    } else if (s->policy == SCHED_POLICY_RR) {
        b = search(s, s->pend);
        step = STEP_RR;
        c = SCHED_CLASS_O;
    } else {
        if (s->pacing)
            wake_due(s, now);
        if (behind_only) {
            if ((b = behind_pick(s, now)) < 0)
                return NULL;
            step = STEP_R;
            c = SCHED_CLASS_R;
        } else if ((b = s->r_order == SCHED_ORDER_URGENCY ? iheap_top(s->urg, NULL)
                                                          : search(s, s->elig_r)) >= 0) {
            step = STEP_R; /* Step 1: pending and R-tokens */
            c = SCHED_CLASS_R;
        } else if (r_only) {
            return NULL;
        } else if (s->pacing && (b = search(s, s->ahead)) >= 0) {
            /* R-tokens ahead of their pace, before step 2: an R-token if
             * the bucket has no limit, else an L-token (its credit then
             * pays, and R and L stay on the limit's pace together) */
            step = STEP_A;
            c = s->b[b].l == SCHED_UNLIMITED ? SCHED_CLASS_R : SCHED_CLASS_L;
        } else {
            b = search(s, s->elig_l); /* Step 2: pending and L-tokens */
            step = STEP_L;
            c = SCHED_CLASS_L;
            if (s->nshare && b >= 0)
                b = share_turn(s, b, &step);
        }
    }
    if (b < 0)
        return NULL; /* Step 3: nothing may be served now */

    bucket_t *k = &s->b[b];
    xbucket_t *x = &s->x[b];
    sched_item_t *item = k->tail->next;
    if (item == k->tail)
        k->tail = NULL;
    else
        k->tail->next = item->next;
    item->next = item->prev = NULL;
    k->queued--;

    /* Only bits that can have changed are touched: all three when the queue
     * empties, else the one of the token count that may have hit zero.
     * With pacing or urgency a dispatch also moves credit or the pass:
     * refresh() then recomputes the bucket's place. */
    int slow = s->pacing || s->r_order == SCHED_ORDER_URGENCY;
    sched_units_t *y = s->nunits && s->y[b].on ? &s->y[b] : NULL;
    const int u_rfirst = c == SCHED_CLASS_R;
    if (y) {
        slow = 1;
        if (c == SCHED_CLASS_R && step == STEP_R && !sched__class_may(&x->r, k->r, s->pacing))
            c = SCHED_CLASS_L; /* eligible by a unit R-token: the IO token is an L */
    }
    switch (c) {
    case SCHED_CLASS_R:
        k->served_r++;
        if (step != STEP_A) { /* ahead: R credit and pass stay */
            if (s->r_order == SCHED_ORDER_URGENCY) {
                /* stride scheduling: tickets = weight x R-tokens left
                 * (a bucket taken out of turn, behind: the virtual time
                 * stays, its pass moves) */
                if (!behind_only)
                    s->vt = x->pass;
                x->pass += 1.0 / ((double)s->weight[b] * (double)k->r);
            }
            if (s->pacing)
                take_credit(&x->r, now);
        }
        if (--k->r == 0 && !slow) {
            bitset_clear(s->elig_r, (size_t)b);
            held_by_count(s, b);
        }
        break;
    case SCHED_CLASS_L:
        if (k->l == SCHED_UNLIMITED) {
            c = SCHED_CLASS_O; /* no limit: nothing to consume */
            k->served_o++;
        } else {
            k->served_l++;
            if (s->pacing)
                take_credit(&x->l, now);
            if (--k->l == 0 && !slow) {
                bitset_clear(s->elig_l, (size_t)b);
                if (b < s->capshare) /* out of L-tokens: no share turn either */
                    iheap_remove(s->elig_s, b);
                held_by_count(s, b);
            }
        }
        break;
    case SCHED_CLASS_O:
        k->served_o++;
        break;
    }
    if (step == STEP_S)
        share_take(s, b);
    if (s->nunits) /* (only read while some bucket has a unit account) */
        s->node.units += item->cost;
    if (y)
        sched__units_take(y, u_rfirst, item->cost, s->pacing, now);
    if (k->queued == 0 || slow)
        refresh(s, b);
    if (s->nshadow && c == SCHED_CLASS_O && s->z[b].shadow) /* one branch unless in use */
        shadow_take(s, &s->z[b], now);
    if (item->origin != b && item->origin >= 0 && item->origin < s->n) {
        bucket_t *o = &s->b[item->origin]; /* routed: who sent it */
        if (c == SCHED_CLASS_R)
            o->served_r++;
        else if (c == SCHED_CLASS_L)
            o->served_l++;
        else
            o->served_o++;
        if (s->nunits)
            s->y[item->origin].served += item->cost;
    }
    s->node.dispatched++;
    if (item->origin >= 0 && item->origin < s->n)
        s->fl[item->origin].backend++;
    /* By urgency an R service leaves the round robin of L alone. */
    if (!(step == STEP_R && s->r_order == SCHED_ORDER_URGENCY))
        advance(s, b, step);
    item->cls = (int)c;
    if (cls)
        *cls = c;
    return item;
}

sched_item_t *sched_dispatch(sched_t *s, double now, sched_class_t *cls)
{
    return dispatch(s, now, cls, 0, 0);
}

sched_item_t *sched_dispatch_r(sched_t *s, double now, sched_class_t *cls)
{
    return dispatch(s, now, cls, 1, 0);
}

sched_item_t *sched_dispatch_behind(sched_t *s, double now, sched_class_t *cls)
{
    if (!s || s->nbehind <= 0 || s->policy != SCHED_POLICY_TOKENS)
        return NULL;
    return dispatch(s, now, cls, 1, 1);
}

int sched_r_behind(sched_t *s, double now)
{
    if (!s->pacing || s->policy != SCHED_POLICY_TOKENS || !bitset_any(s->rhold))
        return s->nlist = s->nbehind = 0; /* and sched_r_behind_slack() says none */
    if (now >= s->behind_t && now < s->behind_t + SCHED_BEHIND_SCAN)
        return s->nbehind;
    int n = 0;
    double slack = INFINITY, lags[SCHED_BEHIND_LIST];
    s->nlist = 0;
    for (long i = bitset_next(s->rhold, 0); i >= 0; i = bitset_next(s->rhold, (size_t)i + 1)) {
        const bucket_t *k = &s->b[i];
        xbucket_t *x = &s->x[i];
        if (k->r <= 0 || !pace_on(&x->r)) {
            bitset_clear(s->rhold, (size_t)i);
            continue;
        }
        /* behind: max(2 IOs, a tenth of the depth) of credit unspent (or
         * the whole depth, if less),
         * with demand: queued here, at the backend, or served since the
         * last scan (its requests are on their way back) */
        double thr = x->r.depth * SCHED_BEHIND_DEPTH;
        thr = thr > SCHED_BEHIND_CREDIT ? thr : SCHED_BEHIND_CREDIT;
        thr = x->r.depth < thr ? x->r.depth : thr;
        uint32_t out = s->fl[i].backend; /* sched_note_done()'s count */
        int demand = k->queued > 0 || out > 0 || k->served_r != x->seen_r;
        x->seen_r = k->served_r;
        if (demand && credit_at(&x->r, now) >= thr) {
            n++;
            behind_keep(s, lags, (int)i, r_lag(s, (int)i, now));
            /* the round trip its requests here allow: K / r */
            double in = (double)k->queued + out;
            if (x->r.rate > 0 && in / x->r.rate < slack)
                slack = in / x->r.rate;
        }
    }
    s->behind_t = now;
    s->nbehind = n;
    s->slack = slack;
    return n;
}

double sched_r_behind_slack(const sched_t *s)
{
    return s->nbehind > 0 ? s->slack : INFINITY;
}

size_t sched_drain(sched_t *s, void (*fn)(sched_item_t *item, void *arg), void *arg)
{
    if (!s)
        return 0;
    size_t removed = 0;
    long b = bitset_next(s->pend, 0);
    while (b >= 0) {
        bucket_t *k = &s->b[b];
        /* Unlink the whole queue first (fn may free the items): open the
         * ring after the tail. */
        sched_item_t *it = k->tail->next;
        k->tail->next = NULL;
        k->tail = NULL;
        s->z[b].deq_base += k->queued;
        k->queued = 0;
        refresh(s, (int)b);
        while (it) {
            sched_item_t *nx = it->next;
            it->next = it->prev = NULL;
            if (fn)
                fn(it, arg);
            removed++;
            it = nx;
        }
        b = bitset_next(s->pend, (size_t)b + 1);
    }
    return removed;
}

int sched_remove(sched_t *s, sched_item_t *item)
{
    if (!s || !item || !item->next || item->bucket < 0 || item->bucket >= s->n)
        return -ENOENT;
    bucket_t *k = &s->b[item->bucket];
    if (!k->tail)
        return -ENOENT;
    if (item->next == item) {
        k->tail = NULL;                    /* the only item */
    } else if (item == k->tail->next) {
        k->tail->next = item->next;        /* the head: its prev is stale */
    } else {
        item->prev->next = item->next;
        if (item == k->tail)
            k->tail = item->prev;
        else
            item->next->prev = item->prev; /* not the head: keep prev exact */
    }
    item->next = item->prev = NULL;
    s->z[item->bucket].deq_base++; /* its number goes: the later ones move up */
    if (--k->queued == 0)
        refresh(s, item->bucket);
    return 0;
}

void sched_note_done(sched_t *s, int b)
{
    if (s && b >= 0 && b < s->n && s->fl[b].backend > 0)
        s->fl[b].backend--;
}

uint64_t sched_flight_take(sched_t *s, int b)
{
    if (!s || b < 0 || b >= s->n)
        return 0;
    fbucket_t *f = &s->fl[b];
    uint64_t max = f->max, now = s->b[b].queued + f->backend;
    f->max = now > UINT32_MAX ? UINT32_MAX : (uint32_t)now;
    return max > now ? max : now;
}

void sched_note_completion(sched_t *s, uint64_t n, double busy_seconds)
{
    if (!s)
        return;
    s->node.completions += n;
    if (isfinite(busy_seconds) && busy_seconds > 0)
        s->node.busy_seconds += busy_seconds;
}

int sched_bucket_stats(const sched_t *s, int b, sched_bucket_stats_t *out)
{
    if (!s || !out || b < 0 || b >= s->n)
        return -EINVAL;
    const bucket_t *k = &s->b[b];
    *out = (sched_bucket_stats_t){
        .arrivals = k->arrivals,
        .served_r = k->served_r,
        .served_l = k->served_l,
        .served_o = k->served_o,
        .queued = k->queued,
        .r_tokens = k->r,
        .l_tokens = k->l,
        .weight = s->weight[b],
        .units_on = s->y[b].on,
        .arrivals_u = s->y[b].arrivals,
        .served_u = s->y[b].served,
        .ru_tokens = s->y[b].on ? s->y[b].r : 0,
        .lu_tokens = s->y[b].on ? s->y[b].l : 0,
        .r_wake = sched__credit_wake(&s->x[b].r),
        .l_wake = k->l == SCHED_UNLIMITED ? NAN : sched__credit_wake(&s->x[b].l),
        .ru_wake = s->y[b].on ? sched__credit_wake(&s->y[b].pr) : NAN,
        .lu_wake = s->y[b].on ? sched__credit_wake(&s->y[b].pl) : NAN,
        .shadow = s->z[b].shadow,
        .shadow_held = s->z[b].shadow_held,
        .shadow_held_total = s->z[b].shadow_held_total,
        .waited_limit_total = s->z[b].waited_total,
        .near_limit_total = s->z[b].near_total,
    };
    if (s->z[b].shadow) {
        out->l_tokens = s->z[b].sl; /* the limit's account, not the unlimited run */
        out->l_wake = s->z[b].sl == SCHED_UNLIMITED ? NAN : sched__credit_wake(&s->z[b].spl);
    }
    if (k->queued && s->policy == SCHED_POLICY_TOKENS &&
        !bitset_test(s->elig_r, (size_t)b) && !bitset_test(s->elig_l, (size_t)b) &&
        !bitset_test(s->ahead, (size_t)b)) {
        /* Why it waits: a dimension with no usable class (tokens, or
         * credit when pacing). */
        sched_units_t io = {.r = k->r, .l = k->l, .pr = s->x[b].r, .pl = s->x[b].l};
        out->held = sched__units_held(&io, s->pacing, SCHED_HELD_IO_TOKENS);
        if (s->y[b].on)
            out->held |= sched__units_held(&s->y[b], s->pacing, SCHED_HELD_BYTE_TOKENS);
    }
    return 0;
}

void sched_node_stats(const sched_t *s, sched_node_stats_t *out)
{
    if (!s || !out)
        return;
    *out = s->node;
}

/* At a period's end: counts bucket b near its limit if it was served
 * more than SCHED_NEAR_LIMIT of its share at this node, that is of its
 * service in R and L plus the R- and L-tokens it has left (what the limit
 * let it do here this period).  In shadow, what the limit would have let
 * it: service beyond R less the IOs it would have held, plus the shadow
 * L-tokens left.  Unlimited buckets and buckets with no service are never
 * near. */
static void near_limit(sched_t *s, int b)
{
    const bucket_t *k = &s->b[b];
    zbucket_t *z = &s->z[b];
    int64_t l_left = z->shadow ? z->sl : k->l;
    if (l_left == SCHED_UNLIMITED)
        return;
    uint64_t beyond_r = z->shadow ? k->served_o : k->served_l;
    uint64_t used = k->served_r + beyond_r; /* shadow: counts what it would have held */
    uint64_t held = z->shadow ? z->shadow_held : 0;
    uint64_t allowed = k->served_r + (beyond_r > held ? beyond_r - held : 0) +
                       (uint64_t)k->r + (uint64_t)(l_left > 0 ? l_left : 0);
    if (used > 0 && (double)used > SCHED_NEAR_LIMIT * (double)allowed)
        z->near_total++;
}

void sched_period_start(sched_t *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->n; i++) {
        bucket_t *k = &s->b[i];
        near_limit(s, i);
        s->z[i].deq_base += k->served_r + k->served_l + k->served_o;
        k->arrivals = k->served_r = k->served_l = k->served_o = 0;
        s->z[i].shadow_held = 0;
        sched__units_period(&s->y[i]);
    }
    s->node = (sched_node_stats_t){0};
}
