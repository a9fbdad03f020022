/* test_handoff.c - Check suite for storage-node/io/handoff: every item pushed taken exactly once, per-producer order under several producer threads, one wake-up per empty-to-nonempty edge, no ready from inside a push, pushes from the consumer itself, close refusing later pushes and returning what was never taken, bad arguments. */
#include <check.h>
#include <errno.h>
#include <event2/event.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "storage-node/io/handoff.h"
#include "tests/testlib.h"

#define container_of(p, T, m) ((T *)(void *)((char *)(p) - offsetof(T, m)))

#define PRODUCERS 4
#define PER_PRODUCER 20000

typedef struct {
    handoff_item_t link;
    int producer;
    int seq;
    int taken;          /* times the consumer took it */
} item_t;

typedef struct {
    handoff_t *h;
    struct event_base *base;
    int readies;
    int in_push, ready_in_push;
    long got;           /* items taken */
    long want;          /* stop the loop at this many */
    int last[PRODUCERS]; /* the last seq taken per producer */
    int order_bad;
} cons_t;

static cons_t C;

static void on_ready(void *arg)
{
    cons_t *c = arg;
    c->readies++;
    if (c->in_push)
        c->ready_in_push = 1;
    for (handoff_item_t *l = handoff_take(c->h), *next; l; l = next) {
        next = l->next;
        item_t *it = container_of(l, item_t, link);
        it->taken++;
        if (it->seq != c->last[it->producer] + 1)
            c->order_bad = 1;
        c->last[it->producer] = it->seq;
        c->got++;
    }
    if (c->want && c->got >= c->want)
        event_base_loopbreak(c->base);
}

static void setup(void)
{
    memset(&C, 0, sizeof C);
    for (int i = 0; i < PRODUCERS; i++)
        C.last[i] = -1;
    C.base = event_base_new();
    ck_assert_ptr_nonnull(C.base);
    int err = 0;
    C.h = handoff_new(C.base, on_ready, &C, &err);
    ck_assert_ptr_nonnull(C.h);
}

static void teardown(void)
{
    handoff_destroy(&C.h);
    ck_assert_ptr_null(C.h);
    event_base_free(C.base);
}

/* Links items[0..n) in order; pushes them as one chain. */
static int push(item_t *items, size_t n)
{
    for (size_t i = 0; i + 1 < n; i++)
        items[i].link.next = &items[i + 1].link;
    return handoff_push_chain(C.h, &items[0].link, &items[n - 1].link, n);
}

START_TEST(test_handoff_bad_arguments)
{
    int err = 0;
    ck_assert_ptr_null(handoff_new(NULL, on_ready, NULL, &err));
    ck_assert_int_eq(err, -EINVAL);
    err = 0;
    ck_assert_ptr_null(handoff_new(C.base, NULL, NULL, &err));
    ck_assert_int_eq(err, -EINVAL);
    item_t a = {0};
    ck_assert_int_eq(handoff_push_chain(C.h, NULL, &a.link, 1), -EINVAL);
    ck_assert_int_eq(handoff_push_chain(C.h, &a.link, NULL, 1), -EINVAL);
    ck_assert_int_eq(handoff_push_chain(C.h, &a.link, &a.link, 0), -EINVAL);
    handoff_destroy(NULL);
    handoff_t *none = NULL;
    handoff_destroy(&none);
}
END_TEST

/* On the consumer thread: no ready from inside the push, one wake-up for
 * several pushes before the loop runs, all items in push order. */
START_TEST(test_handoff_same_thread)
{
    item_t items[10];
    memset(items, 0, sizeof items);
    for (int i = 0; i < 10; i++)
        items[i].seq = i;
    C.in_push = 1;
    ck_assert_int_eq(push(&items[0], 3), 0);
    ck_assert_int_eq(push(&items[3], 1), 0);
    ck_assert_int_eq(push(&items[4], 6), 0);
    C.in_push = 0;
    ck_assert_int_eq(C.readies, 0);
    event_base_loop(C.base, EVLOOP_NONBLOCK);
    ck_assert_int_eq(C.ready_in_push, 0);
    ck_assert_int_eq(C.readies, 1);
    ck_assert_int_eq(C.got, 10);
    ck_assert_int_eq(C.order_bad, 0);
    for (int i = 0; i < 10; i++)
        ck_assert_int_eq(items[i].taken, 1);
    handoff_stats_t st;
    handoff_stats(C.h, &st);
    ck_assert_uint_eq(st.items, 10);
    ck_assert_uint_eq(st.chains, 3);
    ck_assert_uint_eq(st.wakes, 1);
    /* taken: the next push wakes again */
    ck_assert_int_eq(push(&items[0], 1), -0);
    ck_assert_ptr_eq(handoff_take(C.h), &items[0].link);
    ck_assert_ptr_null(handoff_take(C.h));
    handoff_stats(C.h, &st);
    ck_assert_uint_eq(st.wakes, 2);
}
END_TEST

typedef struct {
    item_t *items;
    int id;
} prod_t;

/* Pushes PER_PRODUCER items in chains of 1..16. */
static void *producer(void *arg)
{
    prod_t *p = arg;
    unsigned seed = (unsigned)p->id * 7919u + 1;
    for (int i = 0; i < PER_PRODUCER;) {
        int n = 1 + (int)(rand_r(&seed) % 16);
        if (n > PER_PRODUCER - i)
            n = PER_PRODUCER - i;
        for (int k = 0; k < n; k++) {
            p->items[i + k].producer = p->id;
            p->items[i + k].seq = i + k;
        }
        for (int k = 0; k + 1 < n; k++)
            p->items[i + k].link.next = &p->items[i + k + 1].link;
        int rc = handoff_push_chain(C.h, &p->items[i].link, &p->items[i + n - 1].link,
                                    (size_t)n);
        if (rc != 0)
            return (void *)(intptr_t)rc;
        i += n;
    }
    return NULL;
}

/* Several producer threads against the loop thread: every item taken
 * exactly once, each producer's in its order, fewer wake-ups than chains
 * once the consumer lags. */
START_TEST(test_handoff_threads)
{
    item_t *items = calloc((size_t)PRODUCERS * PER_PRODUCER, sizeof *items);
    ck_assert_ptr_nonnull(items);
    prod_t p[PRODUCERS];
    pthread_t t[PRODUCERS];
    C.want = (long)PRODUCERS * PER_PRODUCER;
    for (int i = 0; i < PRODUCERS; i++) {
        p[i] = (prod_t){.items = items + (size_t)i * PER_PRODUCER, .id = i};
        ck_assert_int_eq(pthread_create(&t[i], NULL, producer, &p[i]), 0);
    }
    event_base_dispatch(C.base);
    for (int i = 0; i < PRODUCERS; i++) {
        void *rc;
        pthread_join(t[i], &rc);
        ck_assert_ptr_null(rc);
    }
    ck_assert_int_eq(C.got, C.want);
    ck_assert_int_eq(C.order_bad, 0);
    for (long i = 0; i < C.want; i++)
        ck_assert_int_eq(items[i].taken, 1);
    for (int i = 0; i < PRODUCERS; i++)
        ck_assert_int_eq(C.last[i], PER_PRODUCER - 1);
    handoff_stats_t st;
    handoff_stats(C.h, &st);
    ck_assert_uint_eq(st.items, (uint64_t)C.want);
    ck_assert_uint_le(st.wakes, st.chains);
    ck_assert_uint_ge(st.wakes, (uint64_t)C.readies > 0 ? 1 : 0);
    free(items);
}
END_TEST

/* A wake-up from another thread while the loop is not running is not
 * lost: the eventfd edge waits for the next pass. */
static void *push_one(void *arg)
{
    item_t *it = arg;
    return (void *)(intptr_t)handoff_push_chain(C.h, &it->link, &it->link, 1);
}

START_TEST(test_handoff_wake_waits_for_loop)
{
    item_t a = {.seq = 0};
    pthread_t t;
    void *rc;
    ck_assert_int_eq(pthread_create(&t, NULL, push_one, &a), 0);
    pthread_join(t, &rc);
    ck_assert_ptr_null(rc);
    C.want = 1;
    event_base_dispatch(C.base);
    ck_assert_int_eq(C.readies, 1);
    ck_assert_int_eq(a.taken, 1);
}
END_TEST

START_TEST(test_handoff_close)
{
    item_t items[4];
    memset(items, 0, sizeof items);
    ck_assert_int_eq(push(&items[0], 2), 0);
    ck_assert_int_eq(push(&items[2], 1), 0);
    handoff_item_t *l = handoff_close(C.h);
    ck_assert_ptr_eq(l, &items[0].link);
    ck_assert_ptr_eq(l->next, &items[1].link);
    ck_assert_ptr_eq(l->next->next, &items[2].link);
    ck_assert_ptr_null(l->next->next->next);
    ck_assert_int_eq(push(&items[3], 1), -ESHUTDOWN);
    ck_assert_ptr_null(handoff_close(C.h));
    ck_assert_ptr_null(handoff_take(C.h));
    event_base_loop(C.base, EVLOOP_NONBLOCK); /* the pending wake-up finds nothing */
    ck_assert_int_eq(C.got, 0);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {test_handoff_bad_arguments, test_handoff_same_thread,
                                  test_handoff_threads, test_handoff_wake_waits_for_loop,
                                  test_handoff_close};
    const testlib_case_t c = {.name = "handoff", .setup = setup, .teardown = teardown};
    return testlib_run_case(&c, tests, sizeof tests / sizeof tests[0]);
}
