/* handoff_bench.c - bqos-handoff-bench: the cost of storage-node/io/handoff, the hand-off `--threads` would add per request: a stream of items from producer threads to one loop thread (CPU and wake-ups per item, by chain length), and a ping-pong between two loop threads (round trips per second and CPU per round trip: a request handed to the gate and its reply handed back, with nothing else waiting). */
#include <errno.h>
#include <event2/event.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "storage-node/io/handoff.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

/* ---- stream: producers -> one loop thread ---------------------------------- */

typedef struct {
    handoff_t *h;
    struct event_base *base;
    long want, got;
} sink_t;

typedef struct {
    sink_t *s;
    handoff_item_t *items;
    long n;
    int chain;
} src_t;

static void sink_ready(void *arg)
{
    sink_t *s = arg;
    for (handoff_item_t *l = handoff_take(s->h); l; l = l->next)
        s->got++;
    if (s->got >= s->want)
        event_base_loopbreak(s->base);
}

static void *producer(void *arg)
{
    src_t *p = arg;
    for (long i = 0; i < p->n; i += p->chain) {
        long k = p->n - i < p->chain ? p->n - i : p->chain;
        for (long j = 0; j + 1 < k; j++)
            p->items[i + j].next = &p->items[i + j + 1];
        if (handoff_push_chain(p->s->h, &p->items[i], &p->items[i + k - 1], (size_t)k) < 0)
            abort();
    }
    return NULL;
}

static int stream(int producers, int chain, long per_producer)
{
    sink_t s = {.want = (long)producers * per_producer};
    s.base = event_base_new();
    int err = 0;
    s.h = s.base ? handoff_new(s.base, sink_ready, &s, &err) : NULL;
    handoff_item_t *items = calloc((size_t)s.want, sizeof *items);
    src_t *src = calloc((size_t)producers, sizeof *src);
    pthread_t *t = calloc((size_t)producers, sizeof *t);
    if (!s.h || !items || !src || !t) {
        fprintf(stderr, "bqos-handoff-bench: setup failed (%d)\n", err);
        return 1;
    }
    double w0 = now_s(), c0 = cpu_s();
    for (int i = 0; i < producers; i++) {
        src[i] = (src_t){.s = &s, .items = items + (size_t)i * (size_t)per_producer,
                         .n = per_producer, .chain = chain};
        pthread_create(&t[i], NULL, producer, &src[i]);
    }
    event_base_dispatch(s.base);
    for (int i = 0; i < producers; i++)
        pthread_join(t[i], NULL);
    double w = now_s() - w0, c = cpu_s() - c0;
    handoff_stats_t st;
    handoff_stats(s.h, &st);
    printf("stream producers=%d chain=%d items=%ld wall_ns_per_item=%.1f cpu_ns_per_item=%.1f "
           "wakes_per_item=%.4f\n", producers, chain, s.got, w * 1e9 / (double)s.got,
           c * 1e9 / (double)s.got, (double)st.wakes / (double)s.got);
    handoff_destroy(&s.h);
    event_base_free(s.base);
    free(items);
    free(src);
    free(t);
    return 0;
}

/* ---- ping-pong: two loop threads, one item in flight ----------------------- */

typedef struct side {
    struct event_base *base;
    handoff_t *in;        /* this side's: the other pushes here */
    struct side *peer;
    long left;            /* the front side: round trips still to start */
    long trips;
} side_t;

static handoff_item_t ball, stop; /* the item bounced; the gate's signal to end */

static void front_ready(void *arg)
{
    side_t *s = arg;
    for (handoff_item_t *l = handoff_take(s->in), *next; l; l = next) {
        next = l->next;
        s->trips++;
        if (--s->left <= 0) { /* the gate ends its own loop on `stop` */
            handoff_push_chain(s->peer->in, &stop, &stop, 1);
            event_base_loopbreak(s->base);
            return;
        }
        handoff_push_chain(s->peer->in, l, l, 1);
    }
}

static void gate_ready(void *arg)
{
    side_t *s = arg;
    for (handoff_item_t *l = handoff_take(s->in), *next; l; l = next) {
        next = l->next;
        if (l == &stop) {
            event_base_loopbreak(s->base);
            return;
        }
        handoff_push_chain(s->peer->in, l, l, 1);
    }
}

static void *gate_main(void *arg)
{
    side_t *g = arg;
    event_base_loop(g->base, EVLOOP_NO_EXIT_ON_EMPTY);
    return NULL;
}

/* A handoff is made on its consumer's thread: the gate thread makes its
 * own, says so, then runs its loop. */
typedef struct {
    side_t *g;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int ready;
} gate_boot_t;

static void *gate_boot(void *arg)
{
    gate_boot_t *b = arg;
    int err = 0;
    b->g->in = handoff_new(b->g->base, gate_ready, b->g, &err);
    pthread_mutex_lock(&b->mu);
    b->ready = b->g->in ? 1 : -1;
    pthread_cond_signal(&b->cv);
    pthread_mutex_unlock(&b->mu);
    if (!b->g->in)
        return NULL;
    return gate_main(b->g);
}

static int pingpong(long trips)
{
    side_t f = {0}, g = {0};
    f.base = event_base_new();
    g.base = event_base_new();
    int err = 0;
    f.in = f.base ? handoff_new(f.base, front_ready, &f, &err) : NULL;
    if (!f.in || !g.base) {
        fprintf(stderr, "bqos-handoff-bench: setup failed (%d)\n", err);
        return 1;
    }
    f.peer = &g;
    g.peer = &f;
    f.left = trips;
    gate_boot_t b = {.g = &g};
    pthread_mutex_init(&b.mu, NULL);
    pthread_cond_init(&b.cv, NULL);
    pthread_t t;
    pthread_create(&t, NULL, gate_boot, &b);
    pthread_mutex_lock(&b.mu);
    while (!b.ready)
        pthread_cond_wait(&b.cv, &b.mu);
    pthread_mutex_unlock(&b.mu);
    if (b.ready < 0) {
        pthread_join(t, NULL);
        return 1;
    }
    double w0 = now_s(), c0 = cpu_s();
    handoff_push_chain(g.in, &ball, &ball, 1);
    event_base_dispatch(f.base);
    pthread_join(t, NULL);
    double w = now_s() - w0, c = cpu_s() - c0;
    printf("pingpong trips=%ld wall_us_per_trip=%.2f cpu_us_per_trip=%.2f\n", f.trips,
           w * 1e6 / (double)f.trips, c * 1e6 / (double)f.trips);
    handoff_destroy(&g.in);
    handoff_destroy(&f.in);
    event_base_free(g.base);
    event_base_free(f.base);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "--help") == 0) {
        printf("usage: bqos-handoff-bench [ITEMS [TRIPS]]\n"
               "  stream: ITEMS per producer (default 2000000) from 1 and 2 producer threads\n"
               "  in chains of 1, 16 and 64; pingpong: TRIPS round trips (default 200000)\n");
        return 0;
    }
    long items = argc >= 2 ? strtol(argv[1], NULL, 10) : 2000000;
    long trips = argc >= 3 ? strtol(argv[2], NULL, 10) : 200000;
    if (items < 1 || trips < 1) {
        fprintf(stderr, "bqos-handoff-bench: ITEMS and TRIPS must be >= 1\n");
        return 2;
    }
    static const int chains[] = {1, 16, 64};
    for (int p = 1; p <= 2; p++)
        for (size_t i = 0; i < sizeof chains / sizeof chains[0]; i++)
            if (stream(p, chains[i], items))
                return 1;
    return pingpong(trips);
}
