/* handoff.c - a locked FIFO of intrusive items from any thread to one loop thread, woken through an eventfd on the empty-to-nonempty edge (see handoff.h). */
#include "storage-node/io/handoff.h"

#include <errno.h>
#include <event2/event.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

/* The consumer's fields are set once in handoff_new() and read-only after;
 * the FIFO, the closed flag and the counts are under `lock`. */
struct handoff {
    pthread_t consumer;       /* the loop thread: pushes from it need no write(2) */
    int efd;
    struct event *ev;
    handoff_ready_fn ready;
    void *arg;

    pthread_mutex_t lock;
    handoff_item_t *head, *tail;
    int closed;
    handoff_stats_t st;
};

/* The eventfd is edge-triggered and never read: every write is a new edge
 * (the counter cannot overflow in practice), so each wake-up costs the
 * producer one write(2) and the consumer nothing beyond its epoll_wait. */
static void on_ready(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    handoff_t *h = arg;
    h->ready(h->arg);
}

handoff_t *handoff_new(struct event_base *base, handoff_ready_fn ready, void *arg, int *err)
{
    int rc = 0;
    handoff_t *h = NULL;
    if (!base || !ready) {
        rc = -EINVAL;
        goto out;
    }
    h = calloc(1, sizeof *h);
    if (!h) {
        rc = -ENOMEM;
        goto out;
    }
    h->efd = -1;
    h->consumer = pthread_self();
    h->ready = ready;
    h->arg = arg;
    pthread_mutex_init(&h->lock, NULL);
    h->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (h->efd < 0) {
        rc = -errno;
        goto out;
    }
    h->ev = event_new(base, h->efd, EV_READ | EV_PERSIST | EV_ET, on_ready, h);
    if (!h->ev || event_add(h->ev, NULL) < 0)
        rc = -ENOMEM;
out:
    if (rc < 0) {
        handoff_destroy(&h);
        if (err)
            *err = rc;
    }
    return h;
}

int handoff_push_chain(handoff_t *h, handoff_item_t *first, handoff_item_t *last, size_t n)
{
    if (!first || !last || n == 0)
        return -EINVAL;
    last->next = NULL;
    pthread_mutex_lock(&h->lock);
    if (h->closed) {
        pthread_mutex_unlock(&h->lock);
        return -ESHUTDOWN;
    }
    int wake = h->head == NULL;
    if (h->tail)
        h->tail->next = first;
    else
        h->head = first;
    h->tail = last;
    h->st.items += n;
    h->st.chains++;
    h->st.wakes += (uint64_t)wake;
    pthread_mutex_unlock(&h->lock);
    if (!wake)
        return 0;
    if (pthread_equal(pthread_self(), h->consumer)) {
        event_active(h->ev, EV_READ, 0); /* runs in the loop's pass, not from here */
        return 0;
    }
    uint64_t one = 1;
    ssize_t w = write(h->efd, &one, sizeof one);
    (void)w; /* cannot fail short of a closed fd; the counter cannot overflow in practice */
    return 0;
}

handoff_item_t *handoff_take(handoff_t *h)
{
    pthread_mutex_lock(&h->lock);
    handoff_item_t *it = h->head;
    h->head = h->tail = NULL;
    pthread_mutex_unlock(&h->lock);
    return it;
}

handoff_item_t *handoff_close(handoff_t *h)
{
    pthread_mutex_lock(&h->lock);
    h->closed = 1;
    handoff_item_t *it = h->head;
    h->head = h->tail = NULL;
    pthread_mutex_unlock(&h->lock);
    return it;
}

void handoff_stats(handoff_t *h, handoff_stats_t *out)
{
    pthread_mutex_lock(&h->lock);
    *out = h->st;
    pthread_mutex_unlock(&h->lock);
}

void handoff_destroy(handoff_t **hp)
{
    if (!hp || !*hp)
        return;
    handoff_t *h = *hp;
    if (h->ev)
        event_free(h->ev);
    if (h->efd >= 0)
        close(h->efd);
    pthread_mutex_destroy(&h->lock);
    free(h);
    *hp = NULL;
}
