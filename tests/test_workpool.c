/* test_workpool.c - Check suite for storage-node/io/workpool: pooled and inline runs, every item run and handed back exactly once, never from inside submit, batches, per-thread contexts, stopping with and without finishing the queue. */
#include <check.h>
#include <errno.h>
#include <event2/event.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "storage-node/io/workpool.h"
#include "tests/testlib.h"

#define container_of(p, T, m) ((T *)(void *)((char *)(p) - offsetof(T, m)))

typedef struct {
    workpool_item_t link;
    int runs;           /* times run */
    int back;           /* times collected */
    void *ctx;          /* the context it ran with */
} item_t;

typedef struct {
    workpool_t *wp;
    pthread_mutex_t mu;
    int starts, stops;  /* thread_start / thread_stop calls */
    int max_batch;
    int in_submit, ready_in_submit;
    int collected;
    int hold;           /* run blocks while set */
    pthread_cond_t cv;
} pool_t;

static pool_t P;
static struct event_base *base;

static void *t_start(void *arg)
{
    pool_t *p = arg;
    pthread_mutex_lock(&p->mu);
    int n = ++p->starts;
    pthread_mutex_unlock(&p->mu);
    return (void *)(intptr_t)n; /* nonzero: inline accepts it */
}

static void t_stop(void *ctx, void *arg)
{
    (void)ctx;
    pool_t *p = arg;
    pthread_mutex_lock(&p->mu);
    p->stops++;
    pthread_mutex_unlock(&p->mu);
}

static void t_run(void *ctx, workpool_item_t **items, size_t n, void *arg)
{
    pool_t *p = arg;
    pthread_mutex_lock(&p->mu);
    while (p->hold)
        pthread_cond_wait(&p->cv, &p->mu);
    if ((int)n > p->max_batch)
        p->max_batch = (int)n;
    pthread_mutex_unlock(&p->mu);
    for (size_t i = 0; i < n; i++) {
        item_t *it = container_of(items[i], item_t, link);
        it->runs++;
        it->ctx = ctx;
    }
}

static void t_ready(void *arg)
{
    pool_t *p = arg;
    if (p->in_submit)
        p->ready_in_submit++;
    for (workpool_item_t *l = workpool_collect(p->wp); l; l = l->next) {
        container_of(l, item_t, link)->back++;
        p->collected++;
    }
}

static workpool_t *make(int workers, int batch, int finish)
{
    workpool_config_t c = {workers, batch, finish, t_start, t_stop, t_run, t_ready, &P};
    int err = 0;
    P.wp = workpool_new(base, &c, &err);
    ck_assert_msg(P.wp != NULL, "workpool_new: %s", strerror(-err));
    return P.wp;
}

static void setup(void)
{
    memset(&P, 0, sizeof P);
    pthread_mutex_init(&P.mu, NULL);
    pthread_cond_init(&P.cv, NULL);
    base = event_base_new();
    ck_assert_ptr_nonnull(base);
}

static void teardown(void)
{
    workpool_destroy(&P.wp);
    event_base_free(base);
    pthread_mutex_destroy(&P.mu);
    pthread_cond_destroy(&P.cv);
}

/* Submits items[0..n) as one chain. */
static int submit(item_t *items, size_t n)
{
    for (size_t i = 0; i + 1 < n; i++)
        items[i].link.next = &items[i + 1].link;
    P.in_submit = 1;
    int rc = workpool_submit_chain(P.wp, &items[0].link, &items[n - 1].link, n);
    P.in_submit = 0;
    return rc;
}

static void loop_until(int collected)
{
    time_t end = time(NULL) + 10;
    while (P.collected < collected && time(NULL) < end)
        event_base_loop(base, EVLOOP_ONCE);
    ck_assert_int_eq(P.collected, collected);
}

START_TEST(test_workpool_bad_settings)
{
    int err = 0;
    workpool_config_t c = {2, 0, 0, NULL, NULL, t_run, t_ready, &P};
    ck_assert_ptr_null(workpool_new(base, &c, &err));
    ck_assert_int_eq(err, -EINVAL);
    c.batch = WORKPOOL_BATCH_MAX + 1;
    ck_assert_ptr_null(workpool_new(base, &c, &err));
    c.batch = 1;
    c.run = NULL;
    ck_assert_ptr_null(workpool_new(base, &c, &err));
    c.run = t_run;
    c.workers = -1;
    ck_assert_ptr_null(workpool_new(base, &c, &err));
    ck_assert_int_eq(err, -EINVAL);
}
END_TEST

/* Four workers, batches of up to 3: every item is run once with some
 * worker's context and handed back once, on the loop, never from inside
 * submit; each worker started and stopped its context once. */
START_TEST(test_workpool_pooled)
{
    make(4, 3, 1);
    ck_assert_int_ge(workpool_eventfd(P.wp), 0);
    static item_t items[200];
    memset(items, 0, sizeof items);
    ck_assert_int_eq(submit(items, 100), 0);
    ck_assert_int_eq(submit(items + 100, 100), 0);
    loop_until(200);
    for (int i = 0; i < 200; i++) {
        ck_assert_int_eq(items[i].runs, 1);
        ck_assert_int_eq(items[i].back, 1);
        ck_assert_ptr_nonnull(items[i].ctx);
    }
    ck_assert_int_eq(P.ready_in_submit, 0);
    ck_assert_int_le(P.max_batch, 3);
    ck_assert_ptr_null(workpool_stop(P.wp));
    ck_assert_int_eq(P.starts, 4);
    ck_assert_int_eq(P.stops, 4);
    ck_assert_int_eq(submit(items, 1), -ESHUTDOWN);
}
END_TEST

/* Inline: the items have run when submit returns, in batches, with the
 * loop thread's one context; they come back on the next pass. */
START_TEST(test_workpool_inline)
{
    make(0, 4, 1);
    ck_assert_int_eq(workpool_eventfd(P.wp), -1);
    ck_assert_int_eq(P.starts, 1);
    item_t items[10];
    memset(items, 0, sizeof items);
    ck_assert_int_eq(submit(items, 10), 0);
    for (int i = 0; i < 10; i++) {
        ck_assert_int_eq(items[i].runs, 1);
        ck_assert_int_eq(items[i].back, 0);
        ck_assert_ptr_eq(items[i].ctx, (void *)(intptr_t)1);
    }
    ck_assert_int_eq(P.max_batch, 4);
    event_base_loop(base, EVLOOP_NONBLOCK);
    ck_assert_int_eq(P.collected, 10);
    ck_assert_int_eq(P.ready_in_submit, 0);
    workpool_destroy(&P.wp);
    ck_assert_int_eq(P.stops, 1);
}
END_TEST

static void release(void)
{
    pthread_mutex_lock(&P.mu);
    P.hold = 0;
    pthread_cond_broadcast(&P.cv);
    pthread_mutex_unlock(&P.mu);
}

static void *release_later(void *arg)
{
    (void)arg;
    usleep(100 * 1000);
    release();
    return NULL;
}

/* Holds the workers (P.hold) and submits items[0..n-1], zeroed. */
static void submit_held(item_t *items, size_t n)
{
    P.hold = 1;
    memset(items, 0, n * sizeof *items);
    ck_assert_int_eq(submit(items, n), 0);
}

/* Stops the pool while its workers are held, another thread releasing them
 * 100 ms later; returns what workpool_stop() returned. */
static workpool_item_t *stop_then_release(void)
{
    pthread_t t;
    pthread_create(&t, NULL, release_later, NULL);
    workpool_item_t *never = workpool_stop(P.wp);
    pthread_join(t, NULL);
    return never;
}

/* Without finish_queued, stop leaves the queue: the items never started
 * come back from workpool_stop(), in order; the started ones finish. */
START_TEST(test_workpool_stop_leaves_queue)
{
    make(1, 1, 0);
    item_t items[5];
    submit_held(items, 5);
    usleep(50 * 1000); /* the worker takes item 0 and waits */
    workpool_item_t *never = stop_then_release();
    int n = 0;
    for (workpool_item_t *l = never; l; l = l->next, n++)
        ck_assert_ptr_eq(l, &items[1 + n].link);
    ck_assert_int_eq(n, 4);
    ck_assert_int_eq(items[0].runs, 1);
    ck_assert_int_eq(items[1].runs, 0);
    t_ready(&P);
    ck_assert_int_eq(items[0].back, 1);
}
END_TEST

/* With finish_queued, stop runs the whole queue first. */
START_TEST(test_workpool_stop_finishes_queue)
{
    make(2, 2, 1);
    item_t items[9];
    submit_held(items, 9);
    ck_assert_ptr_null(stop_then_release());
    t_ready(&P);
    for (int i = 0; i < 9; i++) {
        ck_assert_int_eq(items[i].runs, 1);
        ck_assert_int_eq(items[i].back, 1);
    }
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {test_workpool_bad_settings, test_workpool_pooled,
                                  test_workpool_inline, test_workpool_stop_leaves_queue,
                                  test_workpool_stop_finishes_queue};
    const testlib_case_t c = {.name = "workpool", .setup = setup, .teardown = teardown};
    return testlib_run_case(&c, tests, sizeof tests / sizeof tests[0]);
}
