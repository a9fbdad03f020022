/* test_sched.c - Check suite for storage-node/sched: Algorithm 1 service order, weights, rr, counters. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "storage-node/core/headroom.h"
#include "storage-node/core/sched.h"
#include "tests/sched_fixtures.h"
#include "tests/testlib.h"

/* A request as the node would embed it: the item plus an id to check order. */
typedef struct {
    sched_item_t item;
    int id;
} req_t;

#define REQ(it) ((req_t *)(void *)(it))
#define U SCHED_UNLIMITED

static req_t pool[4096];
static int pool_used;

static void enq(sched_t *s, int b, int n)
{
    for (int i = 0; i < n; i++) {
        ck_assert_int_lt(pool_used, (int)(sizeof(pool) / sizeof(pool[0])));
        req_t *r = &pool[pool_used];
        r->id = pool_used++;
        ck_assert_int_eq(sched_enqueue(s, b, &r->item), 0);
    }
}

/* Dispatches once and checks the bucket and class; returns the request. */
static req_t *expect(sched_t *s, int bucket, sched_class_t cls)
{
    sched_class_t c = (sched_class_t)-1;
    sched_item_t *it = sched_dispatch(s, 0, &c);
    ck_assert_msg(it != NULL, "expected bucket %d, got nothing", bucket);
    ck_assert_msg(it->bucket == bucket, "expected bucket %d, got %d", bucket, it->bucket);
    ck_assert_int_eq(c, cls);
    return REQ(it);
}

/* Dispatches as `order` says, checking each step with expect(): steps
 * separated by spaces, each a class letter (R, L or O) and a bucket index,
 * as in "R1 O0". */
static void expect_order(sched_t *s, const char *order)
{
    const char *p = order;
    while (*p) {
        sched_class_t cls = *p == 'R' ? SCHED_CLASS_R : *p == 'L' ? SCHED_CLASS_L : SCHED_CLASS_O;
        ck_assert_msg(strchr("RLO", *p) != NULL, "bad step in \"%s\"", order);
        char *end;
        long b = strtol(p + 1, &end, 10);
        ck_assert_msg(end > p + 1, "bad step in \"%s\"", order);
        expect(s, (int)b, cls);
        for (p = end; *p == ' '; p++)
            ;
    }
}

/* Bucket b's counters, checking that sched_bucket_stats() succeeds. */
static sched_bucket_stats_t stats(sched_t *s, int b)
{
    sched_bucket_stats_t st;
    ck_assert_int_eq(sched_bucket_stats(s, b, &st), 0);
    return st;
}

static void expect_none(sched_t *s)
{
    ck_assert_ptr_null(sched_dispatch(s, 0, NULL));
}

/* Adds buckets "b0".."b{n-1}" to s, which has none. */
static void add_buckets(sched_t *s, int n)
{
    for (int i = 0; i < n; i++) {
        char name[16];
        snprintf(name, sizeof(name), "b%d", i);
        ck_assert_int_eq(sched_add_bucket(s, name, 1), i);
    }
}

/* Builds a scheduler with buckets "b0".."b{n-1}", for the tests that need
 * another configuration than the fixture's. */
static sched_t *make(sched_policy_t p, int weighted, int n)
{
    sched_t *s = sched_new(p, weighted);
    ck_assert_ptr_nonnull(s);
    add_buckets(s, n);
    return s;
}

/* The fixture: most tests work on s, an unweighted scheduler under the token
 * policy, with no buckets and the request pool empty. */
static sched_t *s;

static void setup(void)
{
    pool_used = 0;
    s = sched_new(SCHED_POLICY_TOKENS, 0);
    ck_assert_ptr_nonnull(s);
}

static void teardown(void)
{
    sched_destroy(&s);
}

/* Gives s two buckets; bucket 0 has r R-tokens and l L-tokens (no horizon)
 * and n requests queued. */
static void backlogged0(int64_t r, int64_t l, int n)
{
    add_buckets(s, 2);
    ck_assert_int_eq(sched_set_tokens(s, 0, r, l, INFINITY, 0), 0);
    enq(s, 0, n);
}

START_TEST(test_sched_bad_args)
{
    ck_assert_ptr_null(sched_new((sched_policy_t)7, 0));
    char long_name[252];
    memset(long_name, 'x', sizeof(long_name) - 1);
    long_name[251] = '\0';
    ck_assert_int_eq(sched_add_bucket(s, long_name, 1), -EINVAL); /* 251 bytes */
    long_name[250] = '\0';
    ck_assert_int_eq(sched_add_bucket(s, long_name, 1), 0);       /* 250 bytes */
    ck_assert_int_eq(sched_add_bucket(s, "", 1), -EINVAL);
    ck_assert_int_eq(sched_add_bucket(s, NULL, 1), -EINVAL);
    ck_assert_int_eq(sched_add_bucket(s, "a b", 1), -EINVAL);
    ck_assert_int_eq(sched_add_bucket(s, "a\tb", 1), -EINVAL);
    ck_assert_int_eq(sched_add_bucket(s, "a\x7f", 1), -EINVAL);
    ck_assert_int_eq(sched_add_bucket(s, "red", 0), -EINVAL);
    ck_assert_int_eq(sched_add_bucket(s, "red", 2), 1);
    ck_assert_int_eq(sched_add_bucket(s, "red", 5), 1); /* known: same index */
    sched_bucket_stats_t st = stats(s, 1);
    ck_assert_uint_eq(st.weight, 2);
    ck_assert_int_eq(st.r_tokens, 0);
    ck_assert_int_eq(st.l_tokens, U);
    ck_assert_int_eq(sched_add_bucket(NULL, "x", 1), -EINVAL);

    ck_assert_int_eq(sched_nbuckets(s), 2);
    ck_assert_str_eq(sched_bucket_name(s, 1), "red");
    ck_assert_ptr_null(sched_bucket_name(s, 2));
    ck_assert_ptr_null(sched_bucket_name(s, -1));
    ck_assert_int_eq(sched_find_bucket(s, "red:user42", 3), 1);
    ck_assert_int_eq(sched_find_bucket(s, "re", 2), -ENOENT);
    ck_assert_int_eq(sched_find_bucket(s, NULL, 0), -ENOENT);

    ck_assert_int_eq(sched_set_tokens(s, 2, 1, 1, INFINITY, 0), -EINVAL);
    ck_assert_int_eq(sched_set_tokens(s, -1, 1, 1, INFINITY, 0), -EINVAL);
    ck_assert_int_eq(sched_set_tokens(s, 1, -1, 1, INFINITY, 0), -EINVAL);
    ck_assert_int_eq(sched_set_tokens(s, 1, 1, -5, INFINITY, 0), -EINVAL);
    ck_assert_int_eq(sched_set_weight(s, 1, 0), -EINVAL);
    ck_assert_int_eq(sched_set_weight(s, 9, 1), -EINVAL);
    req_t r;
    ck_assert_int_eq(sched_enqueue(s, 2, &r.item), -EINVAL);
    ck_assert_int_eq(sched_enqueue(s, -1, &r.item), -EINVAL);
    ck_assert_int_eq(sched_enqueue(s, 0, NULL), -EINVAL);
    ck_assert_int_eq(sched_bucket_stats(s, 2, &st), -EINVAL);
    ck_assert_int_eq(sched_bucket_stats(s, 0, NULL), -EINVAL);
    r.item.bucket = 0;
    r.item.next = NULL;
    ck_assert_int_eq(sched_remove(s, &r.item), -ENOENT);
    r.item.bucket = 99;
    ck_assert_int_eq(sched_remove(s, &r.item), -ENOENT);
    ck_assert_int_eq(sched_remove(s, NULL), -ENOENT);
    expect_none(s);
    sched_set_policy(s, (sched_policy_t)9);
    ck_assert_int_eq(sched_policy(s), SCHED_POLICY_TOKENS);
    sched_destroy(&s);
    ck_assert_ptr_null(s);
    sched_destroy(&s);
    sched_destroy(NULL);
    expect_none(NULL);
}
END_TEST

START_TEST(test_sched_fifo_within_bucket)
{
    add_buckets(s, 1);
    enq(s, 0, 5);
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(expect(s, 0, SCHED_CLASS_O)->id, i);
    expect_none(s);
}
END_TEST

/* Step 1 before step 2: a bucket with R-tokens is served before any other,
 * then the unlimited buckets share in round robin (class O). */
START_TEST(test_sched_r_before_l)
{
    add_buckets(s, 2);
    ck_assert_int_eq(sched_set_tokens(s, 1, 2, U, INFINITY, 0), 0);
    enq(s, 0, 3);
    enq(s, 1, 3);
    expect_order(s, "R1 R1 O0 O1 O0 O0");
    expect_none(s);
}
END_TEST

/* Round robin in index order from `next`, wrapping; next = chosen + 1. */
START_TEST(test_sched_round_robin_next)
{
    add_buckets(s, 4);
    for (int b = 0; b < 4; b++) {
        ck_assert_int_eq(sched_set_tokens(s, b, 100, U, INFINITY, 0), 0);
        enq(s, b, 2);
    }
    for (int round = 0; round < 2; round++)
        for (int b = 0; b < 4; b++)
            expect(s, b, SCHED_CLASS_R);
    expect_none(s);

    /* next is now 4 (wraps to 0).  Only 1 and 3 are backlogged: 1, then a
     * newly backlogged 2 comes before 3 because the search starts at 2. */
    enq(s, 1, 2);
    enq(s, 3, 2);
    expect(s, 1, SCHED_CLASS_R);
    enq(s, 2, 1);
    expect_order(s, "R2 R3 R1 R3"); /* then 1: wrapped */
    expect_none(s);

    /* A bucket added later sits after the last one in the cycle. */
    ck_assert_int_eq(sched_add_bucket(s, "late", 1), 4);
    ck_assert_int_eq(sched_set_tokens(s, 4, 100, U, INFINITY, 0), 0);
    enq(s, 0, 1);
    enq(s, 4, 1);
    expect_order(s, "R4 R0"); /* next was 4 after serving 3 */
}
END_TEST

/* One `next` serves both steps, as in the paper: an R dispatch moves the
 * L-class round robin along too. */
START_TEST(test_sched_next_shared_by_steps)
{
    add_buckets(s, 4);
    ck_assert_int_eq(sched_set_tokens(s, 0, 1, 0, INFINITY, 0), 0); /* one R, no L */
    ck_assert_int_eq(sched_set_tokens(s, 3, 1, 0, INFINITY, 0), 0);
    enq(s, 0, 5);
    enq(s, 1, 5);
    enq(s, 2, 5);
    expect_order(s, "R0 O1"); /* next = 1, then 2 */
    enq(s, 3, 1);
    /* R first (next = 4, wraps); then 1, not 2: the R dispatch moved next
     * past it. */
    expect_order(s, "R3 O1 O2 O1");
}
END_TEST

/* A limited bucket with no L-tokens (and no R-tokens) is never served, even
 * if it is the only one backlogged. */
START_TEST(test_sched_no_service_without_l_tokens)
{
    backlogged0(0, 0, 3);
    for (int i = 0; i < 10; i++)
        expect_none(s);
    ck_assert_int_eq(sched_set_tokens(s, 0, 0, 1, INFINITY, 0), 0);
    expect(s, 0, SCHED_CLASS_L);
    expect_none(s);
    /* Others are served meanwhile; bucket 0 still waits. */
    enq(s, 1, 1);
    expect(s, 1, SCHED_CLASS_O);
    expect_none(s);
    sched_bucket_stats_t st = stats(s, 0);
    ck_assert_uint_eq(st.queued, 2);
    ck_assert_uint_eq(st.served_l, 1);
    ck_assert_int_eq(st.l_tokens, 0);
}
END_TEST

/* Each R dispatch takes one R-token only, each L dispatch one L-token; an
 * unlimited bucket's L count is never touched. */
START_TEST(test_sched_token_decrement)
{
    backlogged0(3, 5, 10);
    for (int i = 0; i < 3; i++)
        expect(s, 0, SCHED_CLASS_R);
    sched_bucket_stats_t st = stats(s, 0);
    ck_assert_int_eq(st.r_tokens, 0);
    ck_assert_int_eq(st.l_tokens, 5); /* R service did not take L-tokens */
    for (int i = 0; i < 5; i++)
        expect(s, 0, SCHED_CLASS_L);
    expect_none(s);
    st = stats(s, 0);
    ck_assert_int_eq(st.l_tokens, 0);
    ck_assert_uint_eq(st.served_r, 3);
    ck_assert_uint_eq(st.served_l, 5);
    ck_assert_uint_eq(st.queued, 2);

    ck_assert_int_eq(sched_set_tokens(s, 1, 1, U, INFINITY, 0), 0);
    enq(s, 1, 3);
    expect_order(s, "R1 O1 O1");
    st = stats(s, 1);
    ck_assert_int_eq(st.r_tokens, 0);
    ck_assert_int_eq(st.l_tokens, U);
    ck_assert_uint_eq(st.served_o, 2);
}
END_TEST

/* set_tokens replaces counts at once, while requests keep flowing. */
START_TEST(test_sched_token_replacement)
{
    backlogged0(5, 0, 20);
    enq(s, 1, 20);
    expect_order(s, "R0 R0");
    ck_assert_int_eq(sched_set_tokens(s, 0, 1, 0, INFINITY, 0), 0); /* replaced, not added */
    expect_order(s, "R0 O1 O1"); /* bucket 0: r = 0, l = 0 */
    /* Giving bucket 1 R-tokens mid-stream and bucket 0 L-tokens. */
    ck_assert_int_eq(sched_set_tokens(s, 0, 0, 2, INFINITY, 0), 0);
    ck_assert_int_eq(sched_set_tokens(s, 1, 2, 0, INFINITY, 0), 0);
    expect_order(s, "R1 R1 L0 L0");
    expect_none(s);
    /* Taking tokens away stops service at once. */
    ck_assert_int_eq(sched_set_tokens(s, 0, 3, U, INFINITY, 0), 0);
    ck_assert_int_eq(sched_set_tokens(s, 0, 0, 0, INFINITY, 0), 0);
    expect_none(s);
}
END_TEST

/* Weighted: shares w0:w1:w2 within a class, in runs of w. */
START_TEST(test_sched_weights_share)
{
    sched_t *s = make(SCHED_POLICY_TOKENS, 1, 3);
    ck_assert_int_eq(sched_set_weight(s, 0, 3), 0);
    ck_assert_int_eq(sched_set_weight(s, 2, 2), 0);
    for (int b = 0; b < 3; b++) {
        ck_assert_int_eq(sched_set_tokens(s, b, 1000, U, INFINITY, 0), 0);
        enq(s, b, 60);
    }
    int want[] = {0, 0, 0, 1, 2, 2};
    for (int round = 0; round < 10; round++)
        for (int i = 0; i < 6; i++)
            expect(s, want[i], SCHED_CLASS_R);
    /* The same weights without `weighted` are ignored. */
    sched_t *u = sched_new(SCHED_POLICY_TOKENS, 0);
    ck_assert_int_eq(sched_add_bucket(u, "a", 3), 0);
    ck_assert_int_eq(sched_add_bucket(u, "b", 1), 1);
    ck_assert_int_eq(sched_add_bucket(u, "c", 2), 2);
    for (int b = 0; b < 3; b++)
        enq(u, b, 4);
    for (int round = 0; round < 4; round++)
        for (int b = 0; b < 3; b++)
            expect(u, b, SCHED_CLASS_O);
    sched_destroy(&u);
    sched_destroy(&s);
}
END_TEST

/* Weights never break R-before-L: a heavy bucket's run ends when it runs out
 * of R-tokens and another bucket still has them; runs restart per class. */
START_TEST(test_sched_weights_keep_r_first)
{
    sched_t *s = make(SCHED_POLICY_TOKENS, 1, 2);
    ck_assert_int_eq(sched_set_weight(s, 0, 3), 0);
    ck_assert_int_eq(sched_set_tokens(s, 0, 1, U, INFINITY, 0), 0);
    ck_assert_int_eq(sched_set_tokens(s, 1, 2, U, INFINITY, 0), 0);
    enq(s, 0, 20);
    enq(s, 1, 20);
    /* A run of 3 begins at 0; then 1, because 0 has L-tokens but 1 has an
     * R-token; step 2: a fresh run of 3. */
    expect_order(s, "R0 R1 R1 O0 O0 O0 O1 O0");
    /* An R-token for bucket 1 in the middle of 0's run preempts it. */
    ck_assert_int_eq(sched_set_tokens(s, 1, 1, U, INFINITY, 0), 0);
    expect_order(s, "R1 O0");
    /* Lowering the weight shortens the current run. */
    ck_assert_int_eq(sched_set_weight(s, 0, 2), 0);
    expect_order(s, "O0 O1");
    sched_destroy(&s);
}
END_TEST

/* rr: backlogged buckets in turn, tokens neither needed nor consumed. */
/* A routed bucket's requests wait in its route's queue and pay its tokens
 * (so unconfigured traffic stays within `default`'s limit); both buckets
 * count them; waiting requests move with the route; new buckets start
 * routed where sched_set_new_route() says. */
START_TEST(test_sched_route_pays_the_targets_tokens)
{
    add_buckets(s, 3); /* b0 plays `default` */
    ck_assert_int_eq(sched_route(s, 1), 1);
    enq(s, 1, 2);                                 /* waiting before the route */
    ck_assert_int_eq(sched_set_tokens(s, 0, 0, 3, INFINITY, 0), 0);
    ck_assert_int_eq(sched_set_route(s, 1, 0), 0);
    ck_assert_int_eq(sched_route(s, 1), 0);
    sched_bucket_stats_t b0, b1;
    sched_bucket_stats(s, 0, &b0);
    sched_bucket_stats(s, 1, &b1);
    ck_assert_uint_eq(b0.queued, 2);              /* moved, in order */
    ck_assert_uint_eq(b1.queued, 0);
    enq(s, 1, 3);
    enq(s, 2, 1);                                 /* unlimited, not routed */
    ck_assert_int_eq(expect(s, 0, SCHED_CLASS_L)->id, 0);
    ck_assert_int_eq(expect(s, 2, SCHED_CLASS_O)->id, 5); /* round robin, as b1 would */
    ck_assert_int_eq(expect(s, 0, SCHED_CLASS_L)->id, 1);
    ck_assert_int_eq(expect(s, 0, SCHED_CLASS_L)->id, 2);
    expect_none(s);                               /* b1's traffic is held at b0's limit */
    sched_bucket_stats(s, 0, &b0);
    sched_bucket_stats(s, 1, &b1);
    ck_assert_uint_eq(b0.arrivals, 3);            /* enqueued through the route */
    ck_assert_uint_eq(b0.served_l, 3);
    ck_assert_uint_eq(b0.queued, 2);
    ck_assert_int_eq(b0.l_tokens, 0);
    ck_assert_uint_eq(b1.arrivals, 5);            /* who sent them */
    ck_assert_uint_eq(b1.served_l, 3);
    ck_assert_int_eq(b1.l_tokens, U);             /* its own tokens are not used */
    /* new buckets follow the new-bucket route */
    ck_assert_int_eq(sched_set_new_route(s, 0), 0);
    ck_assert_int_eq(sched_add_bucket(s, "b3", 1), 3);
    ck_assert_int_eq(sched_route(s, 3), 0);
    ck_assert_int_eq(sched_set_new_route(s, -1), 0);
    ck_assert_int_eq(sched_add_bucket(s, "b4", 1), 4);
    ck_assert_int_eq(sched_route(s, 4), 4);
    /* back to itself: what waits in b0 stays there; removal still works */
    ck_assert_int_eq(sched_set_route(s, 1, -1), 0);
    ck_assert_int_eq(sched_route(s, 1), 1);
    ck_assert_int_eq(sched_remove(s, &pool[3].item), 0);
    sched_bucket_stats(s, 0, &b0);
    ck_assert_uint_eq(b0.queued, 1);
    ck_assert_int_eq(sched_set_route(s, 9, 0), -EINVAL);
    ck_assert_int_eq(sched_set_route(s, 1, 9), -EINVAL);
    ck_assert_int_eq(sched_set_new_route(s, 9), -EINVAL);
    ck_assert_int_eq(sched_route(s, 9), -EINVAL);
}
END_TEST

START_TEST(test_sched_rr_policy)
{
    sched_t *s = make(SCHED_POLICY_RR, 0, 3);
    ck_assert_int_eq(sched_set_tokens(s, 0, 0, 0, INFINITY, 0), 0);
    ck_assert_int_eq(sched_set_tokens(s, 1, 5, 0, INFINITY, 0), 0);
    enq(s, 0, 3);
    enq(s, 1, 3);
    enq(s, 2, 3);
    for (int b = 0; b < 3; b++)
        expect(s, b, SCHED_CLASS_O);
    sched_bucket_stats_t st = stats(s, 1);
    ck_assert_int_eq(st.r_tokens, 5);
    ck_assert_uint_eq(st.served_o, 1);
    ck_assert_uint_eq(st.served_r, 0);
    /* Fall back to tokens: bucket 1 (R) first, bucket 0 (no L) never. */
    sched_set_policy(s, SCHED_POLICY_TOKENS);
    ck_assert_int_eq(sched_policy(s), SCHED_POLICY_TOKENS);
    expect_order(s, "R1 R1 O2 O2");
    expect_none(s);
    sched_set_policy(s, SCHED_POLICY_RR);
    expect_order(s, "O0 O0");
    expect_none(s);
    sched_destroy(&s);
}
END_TEST

static void drained(sched_item_t *it, void *arg)
{
    int *seen = arg;
    seen[REQ(it)->id]++;
    ck_assert_ptr_null(it->next);
}

START_TEST(test_sched_drain_and_remove)
{
    add_buckets(s, 3);
    enq(s, 0, 4); /* ids 0..3 */
    enq(s, 2, 2); /* ids 4..5 */
    ck_assert_int_eq(sched_remove(s, &pool[1].item), 0); /* middle */
    ck_assert_int_eq(sched_remove(s, &pool[1].item), -ENOENT);
    ck_assert_int_eq(sched_remove(s, &pool[3].item), 0); /* tail */
    ck_assert_int_eq(sched_remove(s, &pool[0].item), 0); /* head */
    ck_assert_int_eq(expect(s, 0, SCHED_CLASS_O)->id, 2);
    ck_assert_int_eq(sched_remove(s, &pool[2].item), -ENOENT); /* dispatched */
    /* Tail was fixed: a new item after removals queues correctly. */
    enq(s, 0, 1); /* id 6 */
    ck_assert_int_eq(sched_remove(s, &pool[5].item), 0);
    ck_assert_int_eq(sched_remove(s, &pool[4].item), 0); /* bucket 2 empty */
    ck_assert_int_eq(expect(s, 0, SCHED_CLASS_O)->id, 6);
    expect_none(s);
    /* The only item; then a queue rebuilt after removing its head and tail. */
    enq(s, 1, 1); /* id 7 */
    ck_assert_int_eq(sched_remove(s, &pool[7].item), 0);
    expect_none(s);
    enq(s, 1, 4); /* ids 8..11 */
    ck_assert_int_eq(sched_remove(s, &pool[8].item), 0);
    ck_assert_int_eq(sched_remove(s, &pool[11].item), 0);
    enq(s, 1, 1); /* id 12 */
    ck_assert_int_eq(sched_remove(s, &pool[10].item), 0);
    ck_assert_int_eq(expect(s, 1, SCHED_CLASS_O)->id, 9);
    ck_assert_int_eq(expect(s, 1, SCHED_CLASS_O)->id, 12);
    expect_none(s);
    pool_used = 13;

    enq(s, 0, 3);
    enq(s, 1, 2);
    enq(s, 2, 1);
    ck_assert_int_eq(sched_set_tokens(s, 1, 0, 0, INFINITY, 0), 0); /* ineligible, still drained */
    int seen[64] = {0};
    ck_assert_uint_eq(sched_drain(s, drained, seen), 6);
    for (int i = 13; i < 19; i++)
        ck_assert_int_eq(seen[i], 1);
    expect_none(s);
    ck_assert_uint_eq(sched_drain(s, drained, seen), 0);
    sched_bucket_stats_t st = stats(s, 0);
    ck_assert_uint_eq(st.queued, 0);
    ck_assert_uint_eq(st.arrivals, 8); /* counters untouched by drain/remove */
    /* Usable afterwards; NULL callback allowed. */
    enq(s, 1, 2);
    ck_assert_uint_eq(sched_drain(s, NULL, NULL), 2);
}
END_TEST

START_TEST(test_sched_counters_and_period)
{
    backlogged0(2, 1, 5);
    enq(s, 1, 1);
    expect_order(s, "R0 R0 O1 L0");
    expect_none(s);
    sched_note_completion(s, 3, 0.25);
    sched_note_completion(s, 1, -1.0); /* bogus time ignored */
    sched_note_completion(s, 0, 0.5);
    sched_bucket_stats_t st = stats(s, 0);
    ck_assert_uint_eq(st.arrivals, 5);
    ck_assert_uint_eq(st.served_r, 2);
    ck_assert_uint_eq(st.served_l, 1);
    ck_assert_uint_eq(st.served_o, 0);
    ck_assert_uint_eq(st.queued, 2);
    ck_assert_int_eq(st.r_tokens, 0);
    ck_assert_int_eq(st.l_tokens, 0);
    sched_node_stats_t ns;
    sched_node_stats(s, &ns);
    ck_assert_uint_eq(ns.dispatched, 4);
    ck_assert_uint_eq(ns.completions, 4);
    ck_assert_double_eq_tol(ns.busy_seconds, 0.75, 1e-12);

    ck_assert_int_eq(sched_set_tokens(s, 0, 7, 9, INFINITY, 0), 0);
    sched_period_start(s);
    st = stats(s, 0);
    ck_assert_uint_eq(st.arrivals, 0);
    ck_assert_uint_eq(st.served_r + st.served_l + st.served_o, 0);
    ck_assert_uint_eq(st.queued, 2);    /* state, not a period counter */
    ck_assert_int_eq(st.r_tokens, 7);   /* tokens left alone */
    ck_assert_int_eq(st.l_tokens, 9);
    sched_node_stats(s, &ns);
    ck_assert_uint_eq(ns.dispatched, 0);
    ck_assert_uint_eq(ns.completions, 0);
    ck_assert_double_eq(ns.busy_seconds, 0.0);
    expect(s, 0, SCHED_CLASS_R);
    st = stats(s, 0);
    ck_assert_uint_eq(st.served_r, 1);
}
END_TEST

/* Paper Experiment 3 without QoS: buckets backlogged on servers {1}, {1,2},
 * {1,2,3}, {1,2,3,4}.  Server j serves the 5-j buckets present on it in turn,
 * so bucket i gets sum over j <= i of 1/(5-j) of a server:
 * 1/4 : 1/4+1/3 : 1/4+1/3+1/2 : 1/4+1/3+1/2+1 = 3 : 7 : 13 : 25. */
START_TEST(test_sched_experiment3_rr_ratio)
{
    enum { SERVERS = 4, BUCKETS = 4, TICKS = 12 * 1000 + 7 };
    sched_t *srv[SERVERS];
    static req_t reqs[SERVERS][BUCKETS];
    uint64_t served[BUCKETS] = {0};
    for (int j = 0; j < SERVERS; j++) {
        srv[j] = sched_new(SCHED_POLICY_RR, 0);
        ck_assert_ptr_nonnull(srv[j]);
        for (int i = 0; i < BUCKETS; i++) {
            char name[16];
            snprintf(name, sizeof(name), "bucket%d", i + 1);
            ck_assert_int_eq(sched_add_bucket(srv[j], name, 1), i);
            if (j <= i) /* bucket i+1 lives on servers 1..i+1 */
                ck_assert_int_eq(sched_enqueue(srv[j], i, &reqs[j][i].item), 0);
        }
    }
    for (int t = 0; t < TICKS; t++)
        for (int j = 0; j < SERVERS; j++) {
            sched_item_t *it = sched_dispatch(srv[j], 0, NULL);
            ck_assert_ptr_nonnull(it);
            served[it->bucket]++;
            /* Backlogged: the client sends the next request at once. */
            ck_assert_int_eq(sched_enqueue(srv[j], it->bucket, it), 0);
        }
    const double want[BUCKETS] = {3, 7, 13, 25};
    for (int i = 0; i < BUCKETS; i++) {
        double got = (double)served[i] / (double)served[0] * 3.0;
        ck_assert_msg(got > want[i] * 0.99 && got < want[i] * 1.01,
                      "bucket %d: ratio %.3f, want %.0f", i + 1, got, want[i]);
    }
    /* Throughput of one server per tick in total. */
    ck_assert_uint_eq(served[0] + served[1] + served[2] + served[3],
                      (uint64_t)TICKS * SERVERS);
    for (int j = 0; j < SERVERS; j++)
        sched_destroy(&srv[j]);
}
END_TEST

/* ---- differential test against a plain O(n) scan of Algorithm 1 ---- */

/* The model's FIFOs: per bucket a vector of item indexes with a head index;
 * removed items are skipped lazily (state[] says which are queued). */
#define NITEMS 200000
static int mq[512][NITEMS / 64];
static int mq_len[512], mq_head[512];
static unsigned char queued_state[NITEMS];

typedef struct {
    int n, next, weighted, policy;
    int64_t r[512], l[512];
    uint64_t q[512];
    uint32_t w[512];
    int streak_b, streak_step;
    uint32_t streak_left;
    int served_item;
} model_t;

/* Returns the bucket the model serves (and its class) or -1. */
static int model_dispatch(model_t *m, sched_class_t *cls)
{
    int start = m->next >= m->n ? 0 : m->next;
    for (int step = 0; step < 2; step++) {
        for (int j = 0; j < m->n; j++) {
            int b = (start + j) % m->n;
            int ok = m->q[b] > 0 &&
                     (m->policy == SCHED_POLICY_RR ||
                      (step == 0 ? m->r[b] > 0 : m->l[b] > 0));
            if (!ok)
                continue;
            int st = m->policy == SCHED_POLICY_RR ? 2 : step;
            m->q[b]--;
            while (!queued_state[mq[b][mq_head[b]]])
                mq_head[b]++;
            m->served_item = mq[b][mq_head[b]++];
            queued_state[m->served_item] = 0;
            if (m->policy == SCHED_POLICY_RR)
                *cls = SCHED_CLASS_O;
            else if (step == 0) {
                m->r[b]--;
                *cls = SCHED_CLASS_R;
            } else if (m->l[b] == U) {
                *cls = SCHED_CLASS_O;
            } else {
                m->l[b]--;
                *cls = SCHED_CLASS_L;
            }
            uint32_t w = m->weighted ? m->w[b] : 1;
            if (m->streak_b == b && m->streak_step == st && m->streak_left > 0) {
                m->streak_left--;
            } else {
                m->streak_b = b;
                m->streak_step = st;
                m->streak_left = w - 1;
            }
            if (m->streak_left > 0) {
                m->next = b;
            } else {
                m->streak_b = -1;
                m->next = b + 1;
            }
            return b;
        }
        if (m->policy == SCHED_POLICY_RR)
            break;
    }
    return -1;
}

static uint64_t xs = 0x9E3779B97F4A7C15ULL;
static uint64_t rnd(void)
{
    xs ^= xs << 13;
    xs ^= xs >> 7;
    xs ^= xs << 17;
    return xs;
}

static void run_differential(int policy, int weighted)
{
    static model_t m;
    memset(&m, 0, sizeof(m));
    m.policy = policy;
    m.weighted = weighted;
    m.streak_b = -1;
    sched_t *s = sched_new((sched_policy_t)policy, weighted);
    static sched_item_t items[NITEMS];
    memset(items, 0, sizeof(items));
    memset(queued_state, 0, sizeof(queued_state));
    memset(mq_len, 0, sizeof(mq_len));
    memset(mq_head, 0, sizeof(mq_head));
    int used = 0;
    char name[16];
    for (int op = 0; op < 150000; op++) {
        int k = (int)(rnd() % 100);
        if (m.n == 0 || (k < 1 && m.n < 512)) {
            /* sparse indexes matter: spread buckets over several bitmap words */
            snprintf(name, sizeof(name), "k%d", m.n);
            uint32_t w = (uint32_t)(rnd() % 4) + 1;
            ck_assert_int_eq(sched_add_bucket(s, name, w), m.n);
            m.r[m.n] = 0;
            m.l[m.n] = U;
            m.w[m.n] = w;
            m.n++;
        } else if (k < 45 && used < NITEMS) {
            int b = (int)(rnd() % (uint64_t)m.n);
            if (b % 7 == 3 && rnd() % 4)
                continue; /* keep some buckets idle most of the time */
            if (mq_len[b] == NITEMS / 64)
                continue;
            ck_assert_int_eq(sched_enqueue(s, b, &items[used]), 0);
            mq[b][mq_len[b]++] = used;
            queued_state[used++] = 1;
            m.q[b]++;
        } else if (k < 49 && used > 0) {
            /* Remove a recent item (often still queued, sometimes served). */
            int i = used - 1 - (int)(rnd() % (uint64_t)(used < 50 ? used : 50));
            int rc = sched_remove(s, &items[i]);
            if (queued_state[i]) {
                ck_assert_int_eq(rc, 0);
                queued_state[i] = 0;
                m.q[items[i].bucket]--;
            } else {
                ck_assert_int_eq(rc, -ENOENT);
            }
        } else if (k < 52) {
            int b = (int)(rnd() % (uint64_t)m.n);
            int64_t r = (int64_t)(rnd() % 4);
            int64_t l = rnd() % 3 == 0 ? U : (int64_t)(rnd() % 4);
            ck_assert_int_eq(sched_set_tokens(s, b, r, l, INFINITY, 0), 0);
            m.r[b] = r;
            m.l[b] = l;
        } else if (k < 53 && weighted) {
            int b = (int)(rnd() % (uint64_t)m.n);
            uint32_t w = (uint32_t)(rnd() % 4) + 1;
            ck_assert_int_eq(sched_set_weight(s, b, w), 0);
            m.w[b] = w;
            if (m.streak_b == b && m.streak_left > w - 1)
                m.streak_left = w - 1;
        } else {
            sched_class_t c1 = (sched_class_t)-1, c2 = (sched_class_t)-1;
            int want = model_dispatch(&m, &c2);
            sched_item_t *it = sched_dispatch(s, 0, &c1);
            if (want < 0) {
                ck_assert_msg(it == NULL, "op %d: served %d, want none", op, it ? it->bucket : -1);
            } else {
                ck_assert_msg(it != NULL, "op %d: served none, want %d", op, want);
                ck_assert_msg(it->bucket == want, "op %d: served %d, want %d", op, it->bucket, want);
                ck_assert_int_eq(c1, c2);
                ck_assert_int_eq((int)(it - items), m.served_item); /* FIFO */
            }
        }
    }
    sched_destroy(&s);
}

START_TEST(test_sched_matches_linear_scan_model)
{
    run_differential(SCHED_POLICY_TOKENS, 0);
    run_differential(SCHED_POLICY_TOKENS, 1);
    run_differential(SCHED_POLICY_RR, 0);
    run_differential(SCHED_POLICY_RR, 1);
}
END_TEST

/* Growth to many buckets keeps names, indexes and the round robin. */
START_TEST(test_sched_many_buckets)
{
    enum { N = 100000 };
    char name[32];
    for (int i = 0; i < N; i++) {
        int n = snprintf(name, sizeof(name), "tenant-%d", i);
        ck_assert_int_eq(sched_add_bucket(s, name, 1), i);
        ck_assert_int_eq(sched_find_bucket(s, name, (size_t)n), i);
    }
    ck_assert_int_eq(sched_find_bucket(s, "tenant-77777", 12), 77777);
    static req_t r[4];
    int idx[4] = {N - 1, 5, 70000, 64};
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(sched_enqueue(s, idx[i], &r[i].item), 0);
    ck_assert_int_eq(sched_set_tokens(s, 70000, 1, U, INFINITY, 0), 0);
    expect(s, 70000, SCHED_CLASS_R);
    expect(s, N - 1, SCHED_CLASS_O);
    expect(s, 5, SCHED_CLASS_O);
    expect(s, 64, SCHED_CLASS_O);
    expect_none(s);
}
END_TEST

/* Out of memory while adding buckets: -ENOMEM, and the scheduler stays
 * consistent and usable.  The address-space limit makes the growth of the
 * bucket array, the name map or a name copy fail (whichever comes first).
 * Skipped under ASan and valgrind, which need the address space themselves. */
START_TEST(test_sched_out_of_memory)
{
    if (testlib_oom_skip())
        return;
    add_buckets(s, 3);
    enq(s, 1, 2);
    struct rlimit old;
    testlib_limit_memory((size_t)48 << 20, &old);
    int rc = 0, i;
    char name[32];
    for (i = 3; i < 50000000; i++) {
        snprintf(name, sizeof(name), "oom-bucket-%d", i);
        rc = sched_add_bucket(s, name, 1);
        if (rc < 0)
            break;
        ck_assert_int_eq(rc, i);
    }
    ck_assert_int_eq(setrlimit(RLIMIT_AS, &old), 0);
    ck_assert_int_eq(rc, -ENOMEM);
    /* Every bucket that was added is findable, the failed one is not. */
    ck_assert_int_eq(sched_nbuckets(s), i);
    ck_assert_int_eq(sched_find_bucket(s, name, strlen(name)), -ENOENT);
    snprintf(name, sizeof(name), "oom-bucket-%d", i - 1);
    ck_assert_int_eq(sched_find_bucket(s, name, strlen(name)), i - 1);
    /* And it still schedules, and grows once memory is back. */
    ck_assert_int_eq(sched_set_tokens(s, i - 1, 1, U, INFINITY, 0), 0);
    enq(s, i - 1, 1);
    expect(s, i - 1, SCHED_CLASS_R);
    expect_order(s, "O1 O1");
    expect_none(s);
    snprintf(name, sizeof(name), "oom-bucket-%d", i);
    ck_assert_int_eq(sched_add_bucket(s, name, 1), i);
}
END_TEST


/* Shadow (issue 28): a bucket in shadow is never held for its limit; its
 * IOs beyond R go as class O after every R, and the ones the limit would
 * have held are counted: as many as the same limit enforced leaves queued. */
START_TEST(test_sched_shadow_never_held)
{
    backlogged0(2, 3, 10);
    ck_assert_int_eq(sched_set_shadow(s, 0, 1), 0);
    ck_assert_int_eq(sched_shadow(s, 0), 1);
    ck_assert_int_eq(sched_set_tokens(s, 1, 1, U, INFINITY, 0), 0);
    enq(s, 1, 1);
    expect_order(s, "R0 R1 R0 O0 O0 O0 O0 O0 O0 O0 O0");
    expect_none(s);
    sched_bucket_stats_t st = stats(s, 0);
    ck_assert_uint_eq(st.served_r, 2);
    ck_assert_uint_eq(st.served_o, 8);
    ck_assert_uint_eq(st.shadow_held, 5);
    ck_assert_uint_eq(st.shadow_held_total, 5);
    ck_assert_int_eq(st.l_tokens, 0); /* the limit's account */
    ck_assert_int_eq(st.held, 0);
    ck_assert_uint_eq(st.waited_limit_total, 0);

    /* The same limit enforced holds the same 5 (paired run). */
    sched_t *e = make(SCHED_POLICY_TOKENS, 0, 1);
    ck_assert_int_eq(sched_set_tokens(e, 0, 2, 3, INFINITY, 0), 0);
    enq(e, 0, 10);
    expect_order(e, "R0 R0 L0 L0 L0");
    expect_none(e);
    ck_assert_uint_eq(stats(e, 0).queued, 5);
    sched_destroy(&e);

    /* A new grant refills the shadow account; off gives the limit back. */
    sched_period_start(s);
    ck_assert_uint_eq(stats(s, 0).shadow_held, 0);
    ck_assert_uint_eq(stats(s, 0).shadow_held_total, 5);
    ck_assert_int_eq(sched_set_tokens(s, 0, 0, 1, INFINITY, 0), 0);
    enq(s, 0, 3);
    expect_order(s, "O0 O0");
    ck_assert_uint_eq(stats(s, 0).shadow_held, 1);
    ck_assert_int_eq(sched_set_shadow(s, 0, 0), 0);
    ck_assert_int_eq(sched_shadow(s, 0), 0);
    ck_assert_int_eq(stats(s, 0).l_tokens, 0);
    expect_none(s); /* enforced again: no L-token left */
    ck_assert_int_eq(sched_set_shadow(s, 9, 1), -EINVAL);
}
END_TEST

/* Paced, over a period: a bucket in shadow with a load twice its limit
 * is served all of it, and counts as held what the same limit enforced
 * does not serve, within 10%. */
static uint64_t paced_run(int shadow, uint64_t *served)
{
    sched_t *t = make(SCHED_POLICY_TOKENS, 0, 1);
    ck_assert_int_eq(sched_set_pacing(t, 1, 0.02), 0);
    if (shadow)
        ck_assert_int_eq(sched_set_shadow(t, 0, 1), 0);
    ck_assert_int_eq(sched_set_tokens(t, 0, 0, 1000, 10.0, 0.0), 0); /* 100/s */
    static req_t rq[2000];
    uint64_t n = 0;
    for (int ms = 0; ms < 10000; ms++) { /* 200/s arrive, dispatch each ms */
        double now = ms / 1000.0;
        if (ms % 5 == 0) {
            rq[n].item = (sched_item_t){0};
            ck_assert_int_eq(sched_enqueue(t, 0, &rq[n].item), 0);
            n++;
        }
        while (sched_dispatch(t, now, NULL))
            ;
    }
    sched_bucket_stats_t st;
    ck_assert_int_eq(sched_bucket_stats(t, 0, &st), 0);
    *served = st.served_r + st.served_l + st.served_o;
    uint64_t held = shadow ? st.shadow_held : st.arrivals - *served;
    ck_assert_int_eq(st.shadow, shadow);
    sched_destroy(&t);
    return held;
}

START_TEST(test_sched_shadow_counts_what_enforced_holds)
{
    uint64_t es, ss;
    uint64_t eh = paced_run(0, &es), sh = paced_run(1, &ss);
    ck_assert_uint_eq(ss, 2000);          /* never held */
    ck_assert_uint_le(es, 1000 + 5);      /* the limit held */
    ck_assert_uint_ge(eh, 900);
    ck_assert_msg(sh >= eh * 0.9 && sh <= eh * 1.1, "shadow held %llu, enforced %llu",
                  (unsigned long long)sh, (unsigned long long)eh);
}
END_TEST

/* waited_limit_total counts the IOs that waited while their bucket was
 * held for its limit, each once, as the hold ends; near_limit_total the periods a bucket
 * ended above 80% of what its limit let it do. */
START_TEST(test_sched_waited_and_near_limit)
{
    backlogged0(0, 2, 5);
    ck_assert_int_eq(sched_set_tokens(s, 1, 0, 100, INFINITY, 0), 0);
    enq(s, 1, 2);
    expect_order(s, "L0 L1 L0 L1");
    expect_none(s); /* bucket 0 held with 3 queued */
    enq(s, 0, 1);   /* arrives while held */
    ck_assert_int_eq(sched_set_tokens(s, 0, 0, 10, INFINITY, 0), 0);
    expect_order(s, "L0 L0 L0 L0");
    enq(s, 0, 1);   /* not held now: served at once */
    expect_order(s, "L0");
    sched_bucket_stats_t st = stats(s, 0);
    ck_assert_uint_eq(st.waited_limit_total, 4);
    ck_assert_uint_eq(stats(s, 1).waited_limit_total, 0);
    /* Bucket 0: 7 served of 7 + 5 left (58%): not near; bucket 1: 2 of 102. */
    sched_period_start(s);
    ck_assert_uint_eq(stats(s, 0).near_limit_total, 0);
    ck_assert_uint_eq(stats(s, 1).near_limit_total, 0);
    enq(s, 0, 5);
    expect_order(s, "L0 L0 L0 L0 L0");
    sched_period_start(s); /* 5 of 5: near */
    ck_assert_uint_eq(stats(s, 0).near_limit_total, 1);
    ck_assert_uint_eq(stats(s, 1).near_limit_total, 0);
    sched_period_start(s); /* no service: not near */
    ck_assert_uint_eq(stats(s, 0).near_limit_total, 1);

    /* An IO that sits through two holds counts once; across a period. */
    sched_t *t = make(SCHED_POLICY_TOKENS, 0, 1);
    ck_assert_int_eq(sched_set_tokens(t, 0, 0, 1, INFINITY, 0), 0);
    enq(t, 0, 3);
    expect_order(t, "L0");
    expect_none(t); /* held, 2 queued */
    sched_period_start(t);
    ck_assert_int_eq(sched_set_tokens(t, 0, 0, 1, INFINITY, 0), 0);
    ck_assert_uint_eq(stats(t, 0).waited_limit_total, 2);
    expect_order(t, "L0");
    expect_none(t); /* held again, 1 queued: counted already */
    ck_assert_int_eq(sched_set_tokens(t, 0, 0, 5, INFINITY, 0), 0);
    ck_assert_uint_eq(stats(t, 0).waited_limit_total, 2);
    expect_order(t, "L0");
    expect_none(t);
    sched_destroy(&t);
}
END_TEST

/* sched_r_behind() (issue 25): a bucket holding paced R-tokens is behind
 * once it leaves SCHED_BEHIND_CREDIT (or a tenth of its depth) of R credit
 * unspent while it has demand; an idle one is not, whatever its credit;
 * nothing is behind without pacing or R-tokens. */
START_TEST(test_sched_r_behind_needs_credit_and_demand)
{
    sched_t *t = sched_fixture_new(2, 0, 0.1);
    ck_assert_int_eq(sched_r_behind(t, 0), 0);                   /* pacing off */
    ck_assert_int_eq(sched_set_pacing(t, 1, 0.1), 0);            /* depth 1 + 0.1 x rate */
    ck_assert_int_eq(sched_set_tokens(t, 1, 0, U, 10, 0), 0);
    ck_assert_int_eq(sched_r_behind(t, 0), 0);                   /* no R-tokens anywhere */
    ck_assert_int_eq(sched_set_tokens(t, 0, 1000, U, 10, 0), 0); /* 100/s, depth 11 */
    enq(t, 0, 1);
    ck_assert_int_eq(sched_r_behind(t, 0.001), 0);               /* credit 1.1 < 2 */
    ck_assert_int_eq(sched_r_behind(t, 0.1), 1);                 /* queued, credit 11 */
    sched_item_t *it = sched_dispatch(t, 0.1, NULL);             /* served: credit 10 */
    ck_assert_ptr_nonnull(it);
    ck_assert_int_eq(sched_r_behind(t, 0.2), 1);                 /* served since: demand */
    ck_assert_int_eq(sched_r_behind(t, 0.25), 1);                /* at the backend: demand */
    sched_note_done(t, 0);                                       /* back */
    ck_assert_int_eq(sched_r_behind(t, 0.3), 0);                 /* idle: not behind */
    ck_assert_int_eq(sched_r_behind(t, 5.0), 0);
    ck_assert_int_eq(sched_set_tokens(t, 0, 0, U, 10, 5.0), 0);  /* no R left */
    enq(t, 0, 1);
    ck_assert_int_eq(sched_r_behind(t, 6.0), 0);
    sched_set_policy(t, SCHED_POLICY_RR);
    ck_assert_int_eq(sched_r_behind(t, 7.0), 0);
    sched_destroy(&t);
}
END_TEST

/* sched_dispatch_r(): step 1 alone; L and opportunistic work wait. */
START_TEST(test_sched_dispatch_r_serves_only_r)
{
    sched_t *t = sched_fixture_new(2, 0, 0.02);
    ck_assert_int_eq(sched_set_tokens(t, 0, 1, U, INFINITY, 0), 0);
    ck_assert_int_eq(sched_set_tokens(t, 1, 0, 5, INFINITY, 0), 0);
    enq(t, 1, 2);
    ck_assert_ptr_null(sched_dispatch_r(t, 0, NULL)); /* only L queued */
    enq(t, 0, 2);
    sched_class_t c;
    sched_item_t *it = sched_dispatch_r(t, 0, &c);
    ck_assert_ptr_nonnull(it);
    ck_assert_int_eq(it->bucket, 0);
    ck_assert_int_eq(c, SCHED_CLASS_R);
    ck_assert_ptr_null(sched_dispatch_r(t, 0, NULL)); /* a's R spent: its next is O */
    expect_order(t, "L1 O0 L1");
    sched_set_policy(t, SCHED_POLICY_RR);
    enq(t, 0, 1);
    ck_assert_ptr_null(sched_dispatch_r(t, 0, NULL));
    sched_destroy(&t);
}
END_TEST

/* The node's dispatch rule (core/headroom.h) over a window of 10 with
 * headroom 3: with nobody behind, L work fills the whole window (no
 * cost); while a reserved bucket is behind, L work stops at 10 - 3 and a
 * request of the reserved bucket that arrives then is sent at once, ahead
 * of the L work still queued; once it is no longer behind, L work fills
 * the window again. */
START_TEST(test_sched_headroom_r_ahead_of_queued_l)
{
    sched_t *t = sched_fixture_new(2, 1, 0.1);
    ck_assert_int_eq(sched_set_tokens(t, 1, 0, U, 100, 0), 0);
    window_t *w = window_fixture_fixed(10, 0, 3);
    /* nobody holds R: L fills the window */
    enq(t, 1, 40);
    double now = 1;
    sched_item_t *it;
    while (window_inflight(w) < window_limit(w) && (it = headroom_dispatch(t, w, now, NULL))) {
        ck_assert_int_eq(it->bucket, 1);
        window_take(w, now);
    }
    ck_assert_int_eq(window_inflight(w), 10);
    for (int i = 0; i < 10; i++)
        window_done(w, now);
    /* r: 1,000 R-tokens over 10 s (100/s, depth 11), one served at 1 s,
     * then its client's next request is on its way: behind at 2 s */
    ck_assert_int_eq(sched_set_tokens(t, 0, 1000, U, 11, 1), 0);
    enq(t, 0, 1);
    it = headroom_dispatch(t, w, now, NULL);
    ck_assert_int_eq(it->bucket, 0);
    window_take(w, now);
    window_done(w, now + 0.001);
    sched_note_done(t, 0);
    now = 2;
    while (window_inflight(w) < window_limit(w) && (it = headroom_dispatch(t, w, now, NULL))) {
        ck_assert_int_eq(it->bucket, 1);
        window_take(w, now);
    }
    ck_assert_int_eq(window_inflight(w), 7); /* 3 slots kept, L still queued */
    ck_assert_uint_gt(stats(t, 1).queued, 0);
    enq(t, 0, 1);                             /* the reserved request arrives */
    sched_class_t cls;
    it = headroom_dispatch(t, w, now, &cls);
    ck_assert_ptr_nonnull(it);
    ck_assert_int_eq(it->bucket, 0);          /* sent at once, ahead of L */
    ck_assert_int_eq(cls, SCHED_CLASS_R);
    window_take(w, now);
    ck_assert_ptr_null(headroom_dispatch(t, w, now, NULL));
    window_done(w, now + 0.001);              /* r's request comes back */
    sched_note_done(t, 0);
    /* r goes idle (its credit stays): not behind, L fills the window */
    now = 3;
    (void)sched_r_behind(t, now - 0.5);       /* a scan that sees its last service */
    while (window_inflight(w) < window_limit(w) && (it = headroom_dispatch(t, w, now, NULL))) {
        ck_assert_int_eq(it->bucket, 1);
        window_take(w, now);
    }
    ck_assert_int_eq(window_inflight(w), 10);
    window_destroy(&w);
    sched_destroy(&t);
}
END_TEST

/* The headroom as far as the bucket behind needs it (issue 25): a window
 * of 20 with headroom 3 that measured 1 ms at the backend and 10,000
 * IOs/s.  A reserved bucket behind with one request in flight here at
 * 1,000/s needs it back within 1 ms: other work stops at 1 ms x 10,000 =
 * 10 IOs at the backend, not at 20 - 3 = 17 (the old rule); with 4 in
 * flight it needs 40, and the backend's pipe (window_pipe_limit(): 10
 * + WINDOW_PIPE_SLACK) holds it; nobody behind: all 20. */
static int fill_l(sched_t *t, window_t *w, double now)
{
    sched_item_t *it;
    while (window_inflight(w) < window_limit(w) && (it = headroom_dispatch(t, w, now, NULL))) {
        ck_assert_int_eq(it->bucket, 1);
        window_take(w, now);
    }
    return window_inflight(w);
}

static void empty_window(sched_t *t, window_t *w, double now)
{
    while (window_inflight(w) > 0) {
        window_done(w, now);
        sched_note_done(t, 1);
    }
}

START_TEST(test_sched_headroom_as_far_as_needed)
{
    /* all within one epoch of the window (10 ms) after its measurement */
    sched_t *t = sched_fixture_new(2, 1, 0.01);
    ck_assert_int_eq(sched_set_tokens(t, 1, 0, U, 100, 0), 0);
    /* r: 10,000 R-tokens over 10 s (1,000/s, depth 11), nothing queued */
    ck_assert_int_eq(sched_set_tokens(t, 0, 10000, U, 10.4, 0.4), 0);
    window_t *w = window_fixture_fixed(20, 0, 3);
    for (int i = 0; i < 20; i++) { /* 10 at a time, 1 ms each */
        for (int j = 0; j < 10; j++)
            window_take(w, 0.5 + i * 0.001);
        for (int j = 0; j < 10; j++)
            window_done(w, 0.5 + (i + 1) * 0.001);
    }
    window_stats_t ws;
    window_stats(w, &ws);
    ck_assert_double_eq_tol(ws.base, 0.001, 2e-5);
    ck_assert_double_eq_tol(ws.throughput, 10000, 200);
    ck_assert_int_eq(window_need_limit(w, 1, INFINITY), 17);
    ck_assert_int_eq(window_need_limit(w, 1, 0.001), 10);
    ck_assert_int_eq(window_need_limit(w, 1, 0.0001), WINDOW_NEED_FLOOR);
    ck_assert_int_eq(window_need_limit(w, 1, 0.004), 17);
    ck_assert_int_eq(window_need_limit(w, 0, 0.001), 20);
    enq(t, 1, 100);
    ck_assert_int_eq(fill_l(t, w, 0.521), 20); /* r holds R but is idle */
    empty_window(t, w, 0.521);
    /* r's client sends one request: served at once, at the backend at
     * 0.523 s: behind (credit 10), K = 1 */
    enq(t, 0, 1);
    sched_item_t *it = headroom_dispatch(t, w, 0.521, NULL);
    ck_assert_int_eq(it->bucket, 0);
    window_take(w, 0.521);
    ck_assert_int_eq(fill_l(t, w, 0.523), 10);
    ck_assert_int_eq(sched_r_behind(t, 0.523), 1);
    ck_assert_double_eq_tol(sched_r_behind_slack(t), 0.001, 1e-12);
    /* it comes back (the L work with it); its client now keeps 4 at the
     * backend: K = 4 needs 40, the old bound (17) holds */
    empty_window(t, w, 0.524);
    sched_note_done(t, 0);
    enq(t, 0, 4);
    for (int i = 0; i < 4; i++) {
        it = headroom_dispatch(t, w, 0.524, NULL);
        ck_assert_int_eq(it->bucket, 0);
        window_take(w, 0.524);
    }
    /* the old bound (17) no longer holds L work above the pipe (10 + slack) */
    ck_assert_int_eq(fill_l(t, w, 0.526), 10 + WINDOW_PIPE_SLACK);
    ck_assert_int_eq(sched_r_behind(t, 0.526), 1);
    ck_assert_double_eq_tol(sched_r_behind_slack(t), 0.004, 1e-12);
    window_destroy(&w);
    sched_destroy(&t);
}
END_TEST

/* The backend at its pipe while a reservation is behind (issue 25): a
 * window of 20 that measured 1 ms at the backend and 10,000 IOs/s (a pipe
 * of 10, window_pipe_limit() 10 + WINDOW_PIPE_SLACK).  Another bucket's R
 * work (unpaced R-tokens: never behind) fills the whole window while
 * nobody is behind; while r (K = 1 at 1,000/s) is behind it stops at the
 * pipe, and r's next request is sent at once, behind the pipe and not
 * behind 19 others (the rule before held only L and opportunistic work:
 * the other R work filled all 20 and r's request waited at the node for a
 * slot, then behind a FIFO of 19). */
static int fill_other_r(sched_t *t, window_t *w, double now)
{
    sched_item_t *it;
    sched_class_t cls;
    while (window_inflight(w) < window_limit(w) && (it = headroom_dispatch(t, w, now, &cls))) {
        ck_assert_int_eq(it->bucket, 1);
        ck_assert_int_eq(cls, SCHED_CLASS_R);
        window_take(w, now);
    }
    return window_inflight(w);
}

START_TEST(test_sched_headroom_pipe_for_the_behind)
{
    sched_t *t = sched_fixture_new(2, 1, 0.01);
    /* b1: 1,000 R-tokens usable at once (another bucket's R work) */
    ck_assert_int_eq(sched_set_tokens(t, 1, 1000, U, INFINITY, 0), 0);
    /* r: 10,000 R-tokens over 10 s (1,000/s, depth 11) */
    ck_assert_int_eq(sched_set_tokens(t, 0, 10000, U, 10.4, 0.4), 0);
    window_t *w = window_fixture_fixed(20, 0, 3);
    for (int i = 0; i < 20; i++) { /* 10 at a time, 1 ms each */
        for (int j = 0; j < 10; j++)
            window_take(w, 0.5 + i * 0.001);
        for (int j = 0; j < 10; j++)
            window_done(w, 0.5 + (i + 1) * 0.001);
    }
    ck_assert_int_eq(window_pipe_limit(w), 10 + WINDOW_PIPE_SLACK);
    enq(t, 1, 100);
    ck_assert_int_eq(fill_other_r(t, w, 0.521), 20); /* r idle: nobody behind */
    empty_window(t, w, 0.521);
    enq(t, 0, 1); /* r's client sends its one request */
    sched_item_t *it = headroom_dispatch(t, w, 0.521, NULL);
    ck_assert_int_eq(it->bucket, 0);
    window_take(w, 0.521);
    /* r behind (credit 10 of 11), its request at the backend */
    ck_assert_int_eq(fill_other_r(t, w, 0.523), 10 + WINDOW_PIPE_SLACK);
    ck_assert_int_eq(sched_r_behind(t, 0.523), 1);
    ck_assert_uint_gt(stats(t, 1).queued, 0);
    /* r's client sends a second request: sent at once, past the pipe */
    enq(t, 0, 1);
    sched_class_t cls;
    it = headroom_dispatch(t, w, 0.5232, &cls);
    ck_assert_ptr_nonnull(it);
    ck_assert_int_eq(it->bucket, 0);
    ck_assert_int_eq(cls, SCHED_CLASS_R);
    window_take(w, 0.5232);
    ck_assert_ptr_null(headroom_dispatch(t, w, 0.5232, NULL)); /* b1 still held */
    ck_assert_int_eq(window_inflight(w), 11 + WINDOW_PIPE_SLACK);
    /* sched_dispatch_behind() alone: r has nothing queued */
    ck_assert_ptr_null(sched_dispatch_behind(t, 0.5232, NULL));
    window_destroy(&w);
    sched_destroy(&t);
}
END_TEST

/* Share tokens (issue 28): a step-2 turn goes first to a bucket holding
 * share tokens, in proportion to them; a limited one still needs its
 * L-tokens (a share never lifts a limit); what nobody with a share claims
 * is served as before (work-conserving). */
START_TEST(test_sched_share_before_opportunistic)
{
    add_buckets(s, 4);
    ck_assert_int_eq(sched_set_tokens(s, 0, 0, 2, INFINITY, 0), 0);
    for (int b = 1; b < 4; b++)
        ck_assert_int_eq(sched_set_tokens(s, b, 0, U, INFINITY, 0), 0);
    ck_assert_int_eq(sched_set_share(s, 3, 3), 0);
    ck_assert_int_eq(sched_share(s, 3), 3);
    for (int b = 0; b < 4; b++)
        enq(s, b, 5);
    expect_order(s, "O3 O3 O3 L0 O1 O2 O3 L0 O1 O2 O3 O1 O2 O1 O2 O1 O2");
    expect_none(s);
    ck_assert_int_eq(sched_share(s, 3), 0);
    ck_assert_uint_eq(stats(s, 3).served_o, 5);

    /* Shares in proportion: b1 holds 4, b2 holds 2 (b1 first, having spent
     * the least part); a limited b0 with a share but no L-tokens left is
     * not served by it. */
    ck_assert_int_eq(sched_set_share(s, 0, 5), 0);
    ck_assert_int_eq(sched_set_share(s, 1, 4), 0);
    ck_assert_int_eq(sched_set_share(s, 2, 2), 0);
    enq(s, 0, 3);
    enq(s, 1, 6);
    enq(s, 2, 6);
    expect_order(s, "O1 O2 O1 O1 O2 O1");
    ck_assert_int_eq(sched_share(s, 1), 0);
    ck_assert_int_eq(sched_share(s, 2), 0);
    ck_assert_int_eq(sched_share(s, 0), 5);
    expect_order(s, "O2 O1 O2 O1 O2 O2");
    expect_none(s);
    ck_assert_uint_eq(stats(s, 0).queued, 6);
    /* L-tokens back: the limited holder goes first, paying L-tokens. */
    ck_assert_int_eq(sched_set_tokens(s, 0, 0, 2, INFINITY, 0), 0);
    enq(s, 1, 2);
    expect_order(s, "L0 L0 O1 O1");
    expect_none(s);
    ck_assert_int_eq(sched_share(s, 0), 3); /* its limit held it, not the share */
    ck_assert_int_eq(stats(s, 0).l_tokens, 0);

    /* A share held by a bucket with nothing queued takes no turn. */
    ck_assert_int_eq(sched_set_share(s, 2, 4), 0);
    enq(s, 1, 2);
    expect_order(s, "O1 O1");
    expect_none(s);
    ck_assert_int_eq(sched_share(s, 2), 4);
    /* Absolute: 0 clears it, and the round robin is the plain one. */
    ck_assert_int_eq(sched_set_share(s, 2, 0), 0);
    enq(s, 1, 2);
    enq(s, 2, 2);
    expect_order(s, "O2 O1 O2 O1");
    ck_assert_int_eq(sched_set_share(s, 2, -1), -EINVAL);
    ck_assert_int_eq(sched_set_share(s, 9, 1), -EINVAL);
    ck_assert_int_eq(sched_share(s, 9), 0);
}
END_TEST

/* Requests in flight per bucket (issue 25): queued plus handed out and
 * not done; a take returns the most since the last one and starts again
 * from the number now. */
START_TEST(test_sched_flight_counts_queue_and_backend)
{
    add_buckets(s, 2);
    ck_assert_uint_eq(sched_flight_take(s, 0), 0);
    enq(s, 0, 3);
    enq(s, 1, 1);
    expect(s, 0, SCHED_CLASS_O);
    expect(s, 1, SCHED_CLASS_O);
    expect(s, 0, SCHED_CLASS_O); /* 0: 2 at the backend, 1 queued */
    enq(s, 0, 1);                /* 4 in flight */
    sched_note_done(s, 0);
    sched_note_done(s, 0);       /* 2: the one queued and the one enqueued */
    ck_assert_uint_eq(sched_flight_take(s, 0), 4);
    ck_assert_uint_eq(sched_flight_take(s, 0), 2);
    ck_assert_uint_eq(sched_flight_take(s, 1), 1); /* at the backend, not done */
    sched_note_done(s, 1);
    sched_note_done(s, 1); /* more than it had: stays at 0 */
    ck_assert_uint_eq(sched_flight_take(s, 1), 1); /* the most since the last take */
    ck_assert_uint_eq(sched_flight_take(s, 1), 0);
    ck_assert_uint_eq(sched_flight_take(s, 7), 0); /* no such bucket */
    sched_note_done(s, -1);
    sched_note_done(NULL, 0);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {
        test_sched_flight_counts_queue_and_backend,
        test_sched_r_behind_needs_credit_and_demand, test_sched_dispatch_r_serves_only_r,
        test_sched_headroom_r_ahead_of_queued_l, test_sched_headroom_as_far_as_needed,
        test_sched_headroom_pipe_for_the_behind,
        test_sched_bad_args, test_sched_fifo_within_bucket, test_sched_r_before_l,
        test_sched_round_robin_next, test_sched_next_shared_by_steps,
        test_sched_no_service_without_l_tokens, test_sched_token_decrement,
        test_sched_token_replacement, test_sched_weights_share, test_sched_weights_keep_r_first,
        test_sched_rr_policy, test_sched_route_pays_the_targets_tokens,
        test_sched_drain_and_remove, test_sched_counters_and_period,
        test_sched_experiment3_rr_ratio, test_sched_matches_linear_scan_model,
        test_sched_many_buckets, test_sched_out_of_memory, test_sched_shadow_never_held,
        test_sched_shadow_counts_what_enforced_holds, test_sched_waited_and_near_limit,
        test_sched_share_before_opportunistic
    };
    const testlib_case_t c = {.name = "sched", .timeout = 60, .setup = setup, .teardown = teardown};
    return testlib_run_case(&c, tests, sizeof tests / sizeof tests[0]);
}
