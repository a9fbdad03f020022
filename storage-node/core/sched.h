/* sched.h - the token scheduler core of bqos-node (paper Algorithm 1): per-bucket
 * FIFO queues, R-tokens before L-tokens, round robin within each class; and
 * optionally paced tokens and R served by urgency (issue 14).
 *
 * No threads, no sockets, no clocks: the node's event loop and the simulator
 * both drive it.  A sched_t is owned by one thread (the node's loop thread);
 * nothing here locks.  Enqueue, dispatch, remove and set_tokens never scan
 * the buckets: ready buckets are kept in hierarchical bitmaps, one 64-bit word
 * per level (3 levels up to 262,144 buckets), so the cost is O(log64 n).
 *
 * Requests are intrusive: the caller embeds a sched_item_t in its request and
 * keeps ownership of the memory; the scheduler only links items while they
 * wait.  An item is in at most one queue at a time.
 *
 * Tokens: a dispatch in class R consumes one R-token and nothing else; one in
 * class L consumes one L-token.  So a bucket's total service at this node in
 * a period is at most R-tokens + L-tokens, and the controller hands out
 * L-tokens = limit headroom minus R-tokens.  A bucket with r = 0 and l = 0 is
 * never served under the tokens policy, however long its queue.
 *
 * Round robin: `next` is one index shared by steps 1 and 2 (as in the paper);
 * each search takes the first eligible bucket at or after `next` in index
 * order, wrapping, and `next` becomes the chosen index + 1.  Weighted mode:
 * a bucket of weight w may be chosen up to w times in a row within the same
 * step (R, or L/O) before `next` moves past it; it only keeps its turn while
 * it is still eligible in that step, so weights never let an L request
 * overtake an R request.  See docs/scheduler.md.
 *
 * Pacing (sched_set_pacing(), off in a new scheduler): a grant with a finite
 * horizon (sched_set_tokens()'s `until`) makes each class's tokens usable
 * at tokens / (until - now) per second, with a burst depth (pace.h); a
 * bucket out of credit leaves the ready bitmaps and goes back when its
 * credit returns (a min-heap keyed by that time; the caller asks
 * sched_next_ready() when to dispatch again).  A bucket out of R credit
 * that still holds R-tokens is "ahead" of its R pace: when no bucket is
 * R-eligible it is served before step 2 (round robin), with an R-token if
 * it has no limit, else with an L-token and L credit, so reserved capacity
 * never goes to L or opportunistic work while a bucket with R-tokens that
 * its limit lets run waits, and a limited bucket's R and L together stay
 * on its limit's pace.  Urgency
 * (sched_set_r_order(), rr in a new scheduler): step 1 takes the R-eligible
 * bucket with the least stride-scheduling pass, tickets = weight x R-tokens
 * left, so backlogged buckets get R service in proportion to the R-tokens
 * they have left (a min-heap, O(log n)). */
#ifndef BQOS_SCHED_H
#define BQOS_SCHED_H

#include <stddef.h>
#include <stdint.h>

/* L-token count meaning "no limit": the bucket is never throttled. */
#define SCHED_UNLIMITED INT64_MAX

typedef enum {
    SCHED_POLICY_TOKENS = 0, /* Algorithm 1: R class, then L class, else wait */
    SCHED_POLICY_RR = 1      /* plain round robin over buckets, tokens ignored */
} sched_policy_t;

/* The order of step 1 (R) among buckets with usable R-tokens. */
typedef enum {
    SCHED_ORDER_RR = 0,     /* round robin from `next` (the paper) */
    SCHED_ORDER_URGENCY = 1 /* in proportion to weight x R-tokens left */
} sched_order_t;

/* Largest burst depth sched_set_pacing() takes, seconds. */
#define SCHED_BURST_MAX 60.0

/* How a dispatched request was paid for. */
typedef enum {
    SCHED_CLASS_R = 0,   /* consumed one R-token */
    SCHED_CLASS_L = 1,   /* consumed one L-token (bucket with a limit) */
    SCHED_CLASS_O = 2    /* opportunistic: no R-token, bucket has no limit
                            (or policy rr); nothing consumed */
} sched_class_t;

/* Embed one in each request.  The scheduler sets `next` to NULL whenever it
 * hands an item back (dispatch, remove, drain), and sched_remove() takes a
 * NULL `next` to mean "not queued".  So an item that may be passed to
 * sched_remove() must start zeroed; otherwise the caller may use the fields
 * freely while it owns the item (e.g. `next` as a free-list link). */
typedef struct sched_item {
    struct sched_item *next; /* owned by the scheduler while queued */
    struct sched_item *prev; /* ditto: O(1) sched_remove() */
    int bucket;              /* the queue it waits in: set by sched_enqueue()
                                (the route of `origin`) */
    int origin;              /* the bucket it was enqueued for */
    int cls;                 /* how sched_dispatch() paid for it (a
                                sched_class_t): set there, for the metrics */
    uint32_t cost;           /* units it costs in the byte dimension (set
                                by the caller before enqueue; 0: not known
                                yet, see sched_charge()) */
} sched_item_t;

/* Per-bucket counters for the current QoS period (reset by
 * sched_period_start()), plus current state. */
typedef struct {
    uint64_t arrivals;     /* requests enqueued this period */
    uint64_t served_r, served_l, served_o; /* dispatched this period by class */
    uint64_t queued;       /* waiting now */
    int64_t r_tokens;      /* left now */
    int64_t l_tokens;      /* left now, SCHED_UNLIMITED if no limit */
    uint32_t weight;
    /* The byte dimension (sched_set_units()); zero when it is off. */
    int units_on;
    uint64_t arrivals_u;   /* units enqueued (and charged late) this period */
    uint64_t served_u;     /* units charged this period */
    int64_t ru_tokens;     /* unit R-tokens left now (< 0: debt) */
    int64_t lu_tokens;     /* unit L-tokens left now, or SCHED_UNLIMITED */
    /* Pacing, as of the bucket's last refill: when each class's credit
     * returns (pace_wake(), on the clock of sched_set_tokens(); at or
     * before the last dispatch: it is there; INFINITY: not under this
     * grant; NAN: the class does not pace).  IO R and L, unit R and L. */
    double r_wake, l_wake, ru_wake, lu_wake;
    int held;              /* queued but not dispatchable (tokens policy):
                              SCHED_HELD_* bits, why; 0 otherwise */
    /* Limits and roll-out (issue 28).  In shadow, l_tokens and l_wake are
     * the shadow account's (what the limit would have left). */
    int shadow;            /* sched_set_shadow() */
    uint64_t shadow_held;  /* this period: IOs served that the limit would
                              have held (shadow only) */
    uint64_t shadow_held_total;   /* ditto since the bucket was added */
    uint64_t waited_limit_total;  /* IOs that waited in the queue while the
                              bucket, limited, was held for its limit
                              (counted once each, as the hold ends) */
    uint64_t near_limit_total;    /* periods ended near the limit (see
                              sched_period_start()) */
} sched_bucket_stats_t;

/* A period ends near the limit above this share of it. */
#define SCHED_NEAR_LIMIT 0.8

/* Turns the period's served counts of *bs into what the limit would have
 * served: for a bucket in shadow, less the IOs it would have held (off
 * served_o first, then served_r); others unchanged.  What the node tells
 * the controller and what its fallback grants are computed from, so that
 * both are the enforced limit's (issue 28). */
static inline void sched_stats_as_limited(sched_bucket_stats_t *bs)
{
    uint64_t h = bs->shadow_held;
    uint64_t o = h < bs->served_o ? h : bs->served_o;
    bs->served_o -= o;
    h -= o;
    bs->served_r -= h < bs->served_r ? h : bs->served_r;
}

/* Why a queued bucket waits: a dimension none of whose classes may pay,
 * for want of tokens, or of credit for the tokens it holds (pacing). */
#define SCHED_HELD_IO_TOKENS 1
#define SCHED_HELD_IO_CREDIT 2
#define SCHED_HELD_BYTE_TOKENS 4
#define SCHED_HELD_BYTE_CREDIT 8
#define SCHED_HELD_NREASONS 4

/* The name of reason i (0 .. SCHED_HELD_NREASONS - 1, bit 1 << i):
 * "io_tokens", "io_credit", "byte_tokens", "byte_credit"; NULL beyond. */
const char *sched_held_reason(int i);

/* Node-wide counters for the current period (capacity estimation). */
typedef struct {
    uint64_t completions;  /* sched_note_completion() counts */
    double busy_seconds;   /* time with at least one request at the backend */
    uint64_t dispatched;
    uint64_t units;        /* units charged, every bucket (capacity in
                              units/s), counted while some bucket has a
                              unit account */
} sched_node_stats_t;

typedef struct sched sched_t;

/* Returns a new scheduler, or NULL if out of memory or the policy is not
 * one of sched_policy_t.  With `weighted`, a
 * bucket of weight w is served up to w times in a row before the round robin
 * moves on (within each class; R still always before L).  It starts as the
 * paper's scheduler: no pacing, R in round-robin order.  Caller owns it. */
sched_t *sched_new(sched_policy_t policy, int weighted);

/* Frees the scheduler and sets *sp to NULL; queued items are dropped (call
 * sched_drain() first to answer them).  Accepts NULL. */
void sched_destroy(sched_t **sp);

/* Switches policy at once (e.g. fallback to rr when the controller is gone).
 * An unknown policy value is ignored.  Queues, tokens and counters stay. */
void sched_set_policy(sched_t *s, sched_policy_t policy);
sched_policy_t sched_policy(const sched_t *s);

/* Adds a bucket named `name` (copied, 1..250 bytes, no space or control
 * character, NUL-terminated) with weight >= 1 and no
 * tokens (r = 0, l = SCHED_UNLIMITED).  Returns its index (dense, in order of
 * addition); the existing index if the name is known (weight unchanged);
 * -EINVAL for a bad name or weight; -ENOMEM. */
int sched_add_bucket(sched_t *s, const char *name, uint32_t weight);

/* Returns the index of bucket `name` (`len` bytes, need not be
 * NUL-terminated), or -ENOENT.  O(1) expected. */
int sched_find_bucket(const sched_t *s, const char *name, size_t len);

/* Returns the number of buckets (indexes are 0 .. n-1). */
int sched_nbuckets(const sched_t *s);

/* Returns bucket b's name (owned by the scheduler, valid until it is
 * destroyed), or NULL for a bad index. */
const char *sched_bucket_name(const sched_t *s, int b);

/* Returns 0 or -EINVAL (bad index, weight 0). */
int sched_set_weight(sched_t *s, int b, uint32_t weight);

/* Replaces bucket b's token counts with absolute numbers (the controller's
 * counts for the rest of the period); takes effect for the next dispatch.
 * r >= 0; l >= 0 or SCHED_UNLIMITED.  `until` is when the grant ends (the
 * period's end) and `now` the time of the call, seconds on the caller's
 * monotonic clock: while pacing, each class's tokens become usable at
 * tokens / (until - now) per second (credit carried over from the last
 * grant, capped at the depth; an unlimited L is never paced).  until =
 * INFINITY: an unpaced grant, every token usable at once (`now` unused).
 * Returns 0, or -EINVAL (bad index or count, NaN until, or a finite until
 * with a `now` that is not finite). */
int sched_set_tokens(sched_t *s, int b, int64_t r_tokens, int64_t l_tokens, double until,
                     double now);

/* Shadow mode (issue 28): with on, bucket b's limit is counted, not
 * enforced.  Its L-tokens (this grant's and every later
 * sched_set_tokens()'s) and their paced credit go to a shadow account and
 * the bucket is served as if it had no limit: beyond its R-tokens in
 * step 2, class O, after every R (reserved capacity is never taken from
 * others; its own R-tokens are spent at their pace, as the limit would
 * have them: an IO ahead of its R pace, which the limit would pay with an
 * L-token, goes to step 2 too).  Each IO served beyond R takes an
 * L-token and a unit of credit
 * from the shadow account if the limit would have had them, else counts
 * one in shadow_held: the IO the limit would have held.  Off: the shadow
 * account becomes the L account again.  The byte dimension is not
 * shadowed.  One branch per dispatch while no bucket is in shadow.
 * Returns 0 or -EINVAL (bad index). */
int sched_set_shadow(sched_t *s, int b, int on);

/* Share tokens (issue 28: weighted fair shares of spare capacity): bucket
 * b may take `n` turns of step 2 before the buckets without shares.  Under
 * the tokens policy step 2 (L and opportunistic round robin) gives each
 * turn first to a queued bucket holding share tokens and eligible in step
 * 2 (a limited one needs its L-token and credit, and spends it: shares
 * never lift a limit), which spends one: the holder that has spent the
 * least part of what it was set (O(log n)), so holders are served in
 * proportion to their shares while they last.  Work-conserving: with no
 * share tokens held by a queued eligible bucket, the turn is the plain
 * round robin's.  Step 1 (R) always comes first.  Absolute: replaces what b held; kept across
 * period starts (the agent renews or clears them).  While no bucket holds
 * any, step 2 is exactly as before.  Memory for them is allocated on the
 * first nonzero share.  Returns 0, -EINVAL (bad index, n < 0) or -ENOMEM
 * (nothing changed). */
int sched_set_share(sched_t *s, int b, int64_t n);

/* Share tokens bucket b holds (0 for a bad index). */
int64_t sched_share(const sched_t *s, int b);

/* 1 if bucket b is in shadow, 0 if not, -EINVAL for a bad index. */
int sched_shadow(const sched_t *s, int b);

/* Cost-aware tokens (issue 15): gives bucket b a second token account, in
 * units of work (bytes / the node's cost unit), with its own R and L
 * counts; from then on a request of b needs a token of each dimension.
 * on = 0 turns the account off (the paper: one request, one token; r and
 * l unused).  Counts are absolute for the rest of the period, like
 * sched_set_tokens(), r >= 0, l SCHED_UNLIMITED or any other count down
 * to -(INT64_MAX / 4) (a negative l is a debt the caller knows of: the
 * node's service since the controller counted); and a debt carried from
 * the previous period (see below) is taken off every grant of a period
 * (R first: the grants are counted without it).
 *
 * Eligibility with the account on: step 1 (R) needs an R-token in either
 * dimension and, in each dimension, at least one token of either class
 * (R or L); step 2 (L) needs an L-token of the IO dimension and one token
 * of either class of the unit dimension.  A dispatch charges one IO token
 * (R if it has one, else L: the class it returns) and item->cost units
 * (from the same class if it has any, else from the other), so a request
 * larger than what is left starts as long as one unit is left and drives
 * the count negative: the debt is paid out of later tokens, and
 * sched_period_start() carries what is left of it into the next period
 * (it replaces the carry of the period that ends, which the count already
 * paid).
 * Over any span the service exceeds the tokens by less than one request.
 *
 * Pacing: `until` and `now` as for sched_set_tokens(); while pacing, each
 * class's units become usable at units / (until - now) per second with
 * the same burst depth (an unlimited L never paces).  A class may pay
 * while it holds one unit of credit; the request then takes its whole
 * cost, so a request larger than the depth drives the credit negative and
 * the class waits until the rate has paid it back (never starved; over a
 * window T a class serves at most depth + rate x T + one request less a
 * unit).  A new grant starts a negative credit at zero: its count already
 * paid that debt.  The bucket waits in the same `wake` heap as for IO
 * credit, for the earliest class of either dimension.  Returns 0 or
 * -EINVAL (as sched_set_tokens(), or a bad count). */
int sched_set_units(sched_t *s, int b, int on, int64_t r_units, int64_t l_units, double until,
                    double now);

/* Charges `units` more for `item` after it was dispatched (a get whose
 * size is known once the reply is: charged at completion) to the unit
 * account of the bucket whose queue it waited in (item->bucket), counted
 * as arrival and service there and on its origin (item->origin) if that
 * was routed there.  No-op on an account that is off (the node-wide unit
 * counter still counts).  While pacing the class's credit pays too, as
 * of its last refill (the charge has no clock).  O(log n).  Returns 0 or
 * -EINVAL (bad index). */
int sched_charge(sched_t *s, const sched_item_t *item, uint64_t units);

/* Turns pacing on or off (off in a new scheduler), and sets the burst
 * depth: the credit a class may hold is one token plus burst_s seconds of
 * its paced rate (0 <= burst_s <= SCHED_BURST_MAX).  Off: every token is
 * usable at once (the paper).  A new depth applies from each bucket's next
 * grant.  O(buckets).  Returns 0 or -EINVAL. */
int sched_set_pacing(sched_t *s, int on, double burst_s);

/* Sets the order of step 1 (rr in a new scheduler); every pass restarts
 * level.  O(buckets).  Returns 0 or -EINVAL. */
int sched_set_r_order(sched_t *s, sched_order_t order);

/* Reads the settings above (any pointer may be NULL). */
void sched_get_pacing(const sched_t *s, int *on, double *burst_s, sched_order_t *order);

/* While pacing under the tokens policy: the earliest time a queued bucket
 * that waits for credit gets some back (it may then be dispatched: call
 * sched_dispatch() at that time), or INFINITY if none waits.  O(1). */
double sched_next_ready(const sched_t *s);

/* Appends `item` to the queue of bucket b's route (b itself unless
 * sched_set_route() said otherwise) and counts an arrival on b and, if
 * routed, on the route too.  Returns 0 or -EINVAL for a bad index. */
int sched_enqueue(sched_t *s, int b, sched_item_t *item);

/* Routes bucket b to bucket `to` (to == b, or -1: to itself).  A routed
 * bucket's requests wait in `to`'s queue, are dispatched in its turn and
 * pay its tokens, exactly like `to`'s own: this is how traffic of a bucket
 * the controller does not configure is held to the `default` bucket's
 * limit.  b's own counters still count their arrivals and service (so that
 * a report shows who sent them); `to`'s counters count them too.  Requests
 * already waiting in b's queue move to the tail of `to`'s, in order
 * (O(their number); a route changes with the controller's table, not per
 * request).  One hop: enqueue never follows `to`'s own route.  Returns 0,
 * or -EINVAL for a bad index. */
int sched_set_route(sched_t *s, int b, int to);

/* Bucket b's route (b if not routed), or -EINVAL for a bad index. */
int sched_route(const sched_t *s, int b);

/* The route of buckets created from now on by sched_add_bucket(): `to`, or
 * -1 for themselves (the default).  Returns 0 or -EINVAL. */
int sched_set_new_route(sched_t *s, int to);

/* Picks the next request per the policy, removes it from its queue, consumes
 * its token (and, pacing, a unit of credit) and counts it (on its queue's
 * bucket, and on its origin if that was routed there).  `now`: the time,
 * on the clock of sched_set_tokens() (unused unless pacing); buckets whose
 * credit has returned by then are eligible again.  Returns the item (caller
 * owns it again) and sets *cls if non-NULL; NULL if no bucket may be served
 * now (empty, every backlogged bucket out of L-tokens, or out of credit
 * until sched_next_ready()).  O(log n). */
sched_item_t *sched_dispatch(sched_t *s, double now, sched_class_t *cls);

/* sched_dispatch() restricted to step 1: a request paid with an R-token
 * of a bucket that is R-eligible now (holds R-tokens and, pacing, R
 * credit), or NULL (nothing else is served).  Under the rr policy always
 * NULL.  What the node's dispatch takes while a reservation is behind and
 * the backend holds as much other work as the headroom rule allows
 * (window_open_limit()). */
sched_item_t *sched_dispatch_r(sched_t *s, double now, sched_class_t *cls);

/* Buckets behind sched_dispatch_behind() chooses among: this many, the
 * furthest behind that the last sched_r_behind() scan found. */
#ifndef SCHED_BEHIND_LIST
#define SCHED_BEHIND_LIST 16
#endif

/* sched_dispatch_r() restricted to the buckets the last sched_r_behind()
 * scan found behind their R pace (the SCHED_BEHIND_LIST furthest behind):
 * of those R-eligible now, the one furthest behind (its R credit unspent,
 * capped at its depth, over its paced R rate; the list is sorted the same
 * way at the scan); its pass moves as an R service's does, the urgency
 * order's virtual time stays.  NULL when none is R-eligible, when that scan found
 * nobody behind, or under rr.  What the node's dispatch takes while a
 * reservation is behind and the backend holds its pipe
 * (window_pipe_limit(), issue 25).  O(SCHED_BEHIND_LIST + log n). */
sched_item_t *sched_dispatch_behind(sched_t *s, double now, sched_class_t *cls);

/* Seconds between two scans of sched_r_behind(): in between it returns
 * the last count. */
#define SCHED_BEHIND_SCAN 0.001
/* R credit (IOs) a bucket leaves unspent to be behind (or its whole
 * depth, if less). */
#define SCHED_BEHIND_CREDIT 2.0
/* ... or this share of its burst depth, if more (0.1: 2 ms of its R
 * rate late with the default 20 ms burst). */
#ifndef SCHED_BEHIND_DEPTH
#define SCHED_BEHIND_DEPTH 0.1
#endif

/* The number of buckets behind their R pace at `now`: pacing under the
 * tokens policy, holding R-tokens of a paced grant, with at least
 * max(SCHED_BEHIND_CREDIT, SCHED_BEHIND_DEPTH x its depth) of R credit
 * unspent (or its whole depth, if less), and
 * with demand (requests queued here, at the backend until sched_note_done(),
 * or some served on R since the last scan: a closed-loop client's requests
 * are on their way back).  An idle bucket is not behind, whatever its credit.  0 at
 * once when pacing is off, under rr, or when no bucket holds paced
 * R-tokens; otherwise a scan of the buckets holding R-tokens at most
 * every SCHED_BEHIND_SCAN seconds (the count is kept in between). */
int sched_r_behind(sched_t *s, double now);

/* The least K / r over the buckets the last sched_r_behind() scan found
 * behind, in seconds: K its requests at this node (queued, and at the
 * backend: dispatched and not yet sched_note_done()), r its paced R rate.
 * A closed-loop client with K requests here reaches r only if each comes
 * back within K / r (window_need_limit(), issue 25).  INFINITY when that
 * scan found nobody behind.  O(1). */
double sched_r_behind_slack(const sched_t *s);

/* Removes every queued item, calling fn(item, arg) for each (to answer it
 * with an error); fn may be NULL, may free the item, and must not call into
 * this scheduler.  Returns the number removed.  Counters are unchanged. */
size_t sched_drain(sched_t *s, void (*fn)(sched_item_t *item, void *arg), void *arg);

/* Removes one queued item from the queue of its bucket (item->bucket, as set
 * by sched_enqueue(); a client that went away).  Counters are unchanged.
 * Returns 0, or -ENOENT if it is not queued (item->next is NULL, or a bad
 * bucket index).  O(1). */
int sched_remove(sched_t *s, sched_item_t *item);

/* Node counters: the caller reports completions and backend busy time
 * (added to this period's totals; a negative or non-finite time is
 * ignored). */
void sched_note_completion(sched_t *s, uint64_t n, double busy_seconds);

/* Requests in flight per bucket (issue 25): a bucket's requests queued
 * here plus those a dispatch handed to the backend that are not back.
 * sched_note_done(): one request of bucket b (its sender, the item's
 * origin) that a dispatch handed out left the backend, answered or
 * dropped; a caller that never calls it sees every dispatched request as
 * still in flight (the figure then only grows until the next take).
 * sched_flight_take(): the most in flight since the last take (at least
 * the number now), and starts the next span at the number now; 0 for a
 * bad bucket.  Loop thread. */
void sched_note_done(sched_t *s, int b);
uint64_t sched_flight_take(sched_t *s, int b);

/* Reads counters into *out.  Returns 0 or -EINVAL (bad index, NULL). */
int sched_bucket_stats(const sched_t *s, int b, sched_bucket_stats_t *out);
void sched_node_stats(const sched_t *s, sched_node_stats_t *out);

/* Starts a new QoS period: zeroes the per-period counters of every bucket
 * and the node (O(buckets), once a period).  Tokens are left alone.  First
 * counts each limited bucket whose period ended near its limit
 * (near_limit_total): served (R and L; in shadow R and beyond) more than
 * SCHED_NEAR_LIMIT of what the limit let it do at this node this period,
 * its R and L service plus the R- and L-tokens it has left (in shadow: R
 * service, service beyond R it would not have held, shadow L-tokens left). */
void sched_period_start(sched_t *s);

#endif
