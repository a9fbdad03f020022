/* workpool.c - worker threads with a locked FIFO and eventfd completions to the loop thread (see workpool.h). */
#include "storage-node/io/workpool.h"

#include <errno.h>
#include <event2/event.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

/* Shared between the loop thread and the workers: the read-only settings,
 * then the submit FIFO under `lock`, then the completions under
 * `done_lock`. */
struct workpool {
    /* read-only after workpool_new() */
    workpool_config_t cfg;
    void *inline_ctx;        /* inline: the loop thread's context */
    int efd;                 /* workers: their wake-up of the loop */
    struct event *ev;        /* loop thread */
    pthread_t *threads;
    int nthreads;            /* started */

    pthread_mutex_t lock;    /* the submit side: */
    pthread_cond_t cond;
    workpool_item_t *todo_head, *todo_tail; /* FIFO of submitted items */
    int idle;                /* workers waiting on cond */
    int stopping;
    pthread_mutex_t done_lock;
    workpool_item_t *done_head, *done_tail; /* finished, not yet collected */
};

/* Appends the items (linked in order, last->next NULL) to the completions
 * and wakes the loop if they were empty. */
static void hand_back(workpool_t *wp, workpool_item_t *first, workpool_item_t *last)
{
    pthread_mutex_lock(&wp->done_lock);
    int wake = wp->done_head == NULL;
    if (wp->done_tail)
        wp->done_tail->next = first;
    else
        wp->done_head = first;
    wp->done_tail = last;
    pthread_mutex_unlock(&wp->done_lock);
    if (!wake)
        return;
    if (wp->cfg.workers == 0) {
        event_active(wp->ev, EV_READ, 0); /* loop thread: no system call */
        return;
    }
    uint64_t one = 1;
    ssize_t w = write(wp->efd, &one, sizeof one);
    (void)w; /* the counter cannot overflow in practice */
}

/* Runs items[0..n) and hands them back as one chain. */
static void run_and_hand_back(workpool_t *wp, void *ctx, workpool_item_t **items, size_t n)
{
    wp->cfg.run(ctx, items, n, wp->cfg.arg);
    for (size_t i = 0; i + 1 < n; i++)
        items[i]->next = items[i + 1];
    items[n - 1]->next = NULL;
    hand_back(wp, items[0], items[n - 1]);
}

static void *worker_main(void *arg)
{
    workpool_t *wp = arg;
    workpool_item_t *items[WORKPOOL_BATCH_MAX];
    void *ctx = wp->cfg.thread_start ? wp->cfg.thread_start(wp->cfg.arg) : NULL;
    pthread_mutex_lock(&wp->lock);
    for (;;) {
        while (!wp->todo_head && !wp->stopping) {
            wp->idle++;
            pthread_cond_wait(&wp->cond, &wp->lock);
            wp->idle--;
        }
        if (wp->stopping && (!wp->cfg.finish_queued || !wp->todo_head))
            break;
        size_t n = 0;
        while (wp->todo_head && n < (size_t)wp->cfg.batch) {
            items[n++] = wp->todo_head;
            wp->todo_head = wp->todo_head->next;
        }
        if (!wp->todo_head)
            wp->todo_tail = NULL;
        pthread_mutex_unlock(&wp->lock);
        run_and_hand_back(wp, ctx, items, n);
        pthread_mutex_lock(&wp->lock);
    }
    pthread_mutex_unlock(&wp->lock);
    if (wp->cfg.thread_stop)
        wp->cfg.thread_stop(ctx, wp->cfg.arg);
    return NULL;
}

/* The eventfd is edge-triggered and never read: every write to it is a new
 * edge, and the counter cannot overflow in practice (2^64 - 2 signals), so
 * the read(2) each wake-up would cost is saved.  Inline, the event is
 * activated by hand. */
static void on_ready(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    workpool_t *wp = arg;
    wp->cfg.ready(wp->cfg.arg);
}

workpool_t *workpool_new(struct event_base *base, const workpool_config_t *cfg, int *err)
{
    int rc = 0;
    workpool_t *wp = NULL;
    if (!base || !cfg || cfg->workers < 0 || cfg->workers > 1024 || cfg->batch < 1 ||
        cfg->batch > WORKPOOL_BATCH_MAX || !cfg->run || !cfg->ready) {
        rc = -EINVAL;
        goto out;
    }
    wp = calloc(1, sizeof *wp);
    if (!wp) {
        rc = -ENOMEM;
        goto out;
    }
    wp->cfg = *cfg;
    wp->efd = -1;
    pthread_mutex_init(&wp->lock, NULL);
    pthread_mutex_init(&wp->done_lock, NULL);
    pthread_cond_init(&wp->cond, NULL);
    if (cfg->workers == 0) {
        if (cfg->thread_start && !(wp->inline_ctx = cfg->thread_start(cfg->arg)))
            rc = -ENOMEM;
        wp->ev = event_new(base, -1, 0, on_ready, wp);
        if (!wp->ev)
            rc = -ENOMEM;
        goto out;
    }
    wp->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (wp->efd < 0) {
        rc = -errno;
        goto out;
    }
    wp->ev = event_new(base, wp->efd, EV_READ | EV_PERSIST | EV_ET, on_ready, wp);
    if (!wp->ev || event_add(wp->ev, NULL) < 0) {
        rc = -ENOMEM;
        goto out;
    }
    wp->threads = calloc((size_t)cfg->workers, sizeof *wp->threads);
    if (!wp->threads) {
        rc = -ENOMEM;
        goto out;
    }
    for (int i = 0; i < cfg->workers; i++) {
        int e = pthread_create(&wp->threads[i], NULL, worker_main, wp);
        if (e) {
            rc = -e;
            goto out;
        }
        wp->nthreads++;
    }
out:
    if (rc < 0) {
        workpool_destroy(&wp);
        if (err)
            *err = rc;
        return NULL;
    }
    return wp;
}

int workpool_submit_chain(workpool_t *wp, workpool_item_t *first, workpool_item_t *last,
                          size_t n)
{
    last->next = NULL;
    if (wp->cfg.workers == 0) {
        if (wp->stopping)
            return -ESHUTDOWN;
        workpool_item_t *items[WORKPOOL_BATCH_MAX];
        workpool_item_t *it = first;
        while (it) {
            size_t k = 0;
            for (; it && k < (size_t)wp->cfg.batch; it = it->next)
                items[k++] = it;
            wp->cfg.run(wp->inline_ctx, items, k, wp->cfg.arg);
        }
        hand_back(wp, first, last);
        return 0;
    }
    pthread_mutex_lock(&wp->lock);
    if (wp->stopping) {
        pthread_mutex_unlock(&wp->lock);
        return -ESHUTDOWN;
    }
    if (wp->todo_tail)
        wp->todo_tail->next = first;
    else
        wp->todo_head = first;
    wp->todo_tail = last;
    /* Busy workers come back for more by themselves; wake an idle one (all
     * of them for more than a batch). */
    if (wp->idle > 0) {
        if (n > (size_t)wp->cfg.batch)
            pthread_cond_broadcast(&wp->cond);
        else
            pthread_cond_signal(&wp->cond);
    }
    pthread_mutex_unlock(&wp->lock);
    return 0;
}

workpool_item_t *workpool_collect(workpool_t *wp)
{
    pthread_mutex_lock(&wp->done_lock);
    workpool_item_t *it = wp->done_head;
    wp->done_head = wp->done_tail = NULL;
    pthread_mutex_unlock(&wp->done_lock);
    return it;
}

int workpool_eventfd(const workpool_t *wp)
{
    return wp->efd;
}

workpool_item_t *workpool_stop(workpool_t *wp)
{
    pthread_mutex_lock(&wp->lock);
    if (wp->stopping) {
        pthread_mutex_unlock(&wp->lock);
        return NULL;
    }
    wp->stopping = 1;
    pthread_cond_broadcast(&wp->cond);
    pthread_mutex_unlock(&wp->lock);
    for (int i = 0; i < wp->nthreads; i++)
        pthread_join(wp->threads[i], NULL);
    wp->nthreads = 0;
    workpool_item_t *never = wp->todo_head; /* workers are gone: no lock needed */
    wp->todo_head = wp->todo_tail = NULL;
    return never;
}

void workpool_destroy(workpool_t **wpp)
{
    if (!wpp || !*wpp)
        return;
    workpool_t *wp = *wpp;
    workpool_stop(wp);
    if (wp->cfg.workers == 0 && wp->inline_ctx && wp->cfg.thread_stop)
        wp->cfg.thread_stop(wp->inline_ctx, wp->cfg.arg);
    if (wp->ev)
        event_free(wp->ev);
    if (wp->efd >= 0)
        close(wp->efd);
    free(wp->threads);
    pthread_cond_destroy(&wp->cond);
    pthread_mutex_destroy(&wp->lock);
    pthread_mutex_destroy(&wp->done_lock);
    free(wp);
    *wpp = NULL;
}
