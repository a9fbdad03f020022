/* writers.c - reply-writer threads: per-connection write sides handed between the loop thread and a writer thread through io/handoff, freed by reference count (see writers.h). */
#include "storage-node/io/writers.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/thread.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "storage-node/io/handoff.h"

#define container_of(p, T, m) ((T *)(void *)((char *)(p) - offsetof(T, m)))

typedef struct writer {
    struct writers *ws;
    pthread_t thread;
    int started;
    /* the writer thread's own, made there: */
    struct event_base *base;
    handoff_t *in;          /* kicks from the loop, and `stop` */
    handoff_item_t stop;
    /* writer_start()'s handshake with writers_new() */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int ready;              /* 1 running, -errno failed */
} writer_t;

struct writers {
    struct event_base *loop;
    handoff_t *notes;       /* the loop's: write sides with their bytes out */
    writer_t *w;
    int n, next;
    atomic_uint_fast64_t kicks, notes_sent, bytes;
};

struct writer_conn {
    handoff_item_t kick;    /* in the writer's FIFO while `kicked` */
    handoff_item_t note;    /* in the loop's FIFO while `noted` */
    writer_t *w;
    evutil_socket_t fd;
    struct evbuffer *buf;   /* locked: the loop appends, the writer writes */
    struct event *ev;       /* the writer's: EV_WRITE while the socket is full */
    event_callback_fn on_written; /* the loop's */
    void *arg;
    int open;               /* loop only: until writers_close() */
    atomic_int refs;
    atomic_int kicked, noted, closing, failed;
};

static void unref(writer_conn_t *wc)
{
    if (atomic_fetch_sub(&wc->refs, 1) == 1) {
        evbuffer_free(wc->buf);
        free(wc);
    }
}

/* ---- the writer thread ------------------------------------------------------ */

/* Tells the loop that wc's buffer is empty or broken (once while queued). */
static void note(writer_conn_t *wc)
{
    if (atomic_exchange(&wc->noted, 1))
        return;
    atomic_fetch_add(&wc->refs, 1);
    atomic_fetch_add(&wc->w->ws->notes_sent, 1);
    if (handoff_push_chain(wc->w->ws->notes, &wc->note, &wc->note, 1) < 0) {
        atomic_store(&wc->noted, 0); /* the loop is gone (teardown) */
        unref(wc);
    }
}

static void on_writable(evutil_socket_t fd, short what, void *arg);

/* Writes what the socket takes; waits for writability for the rest; notes
 * the loop once the buffer is empty or a write failed. */
static void flush(writer_conn_t *wc)
{
    if (atomic_load(&wc->failed))
        return;
    /* never on an empty buffer: evbuffer_write() then returns -1 with a stale errno */
    while (evbuffer_get_length(wc->buf) > 0) {
        int n = evbuffer_write(wc->buf, wc->fd);
        if (n > 0) {
            atomic_fetch_add(&wc->w->ws->bytes, (uint64_t)n);
            continue;
        }
        if (n == 0)
            break;
        int e = EVUTIL_SOCKET_ERROR();
        if (e == EINTR)
            continue;
        if (e == EAGAIN || e == EWOULDBLOCK)
            break;
        atomic_store(&wc->failed, 1);
        if (wc->ev)
            event_del(wc->ev);
        note(wc);
        return;
    }
    if (evbuffer_get_length(wc->buf) > 0) {
        if (!wc->ev)
            wc->ev = event_new(wc->w->base, wc->fd, EV_WRITE | EV_PERSIST, on_writable, wc);
        if (!wc->ev || event_add(wc->ev, NULL) < 0) {
            atomic_store(&wc->failed, 1); /* out of memory: fail the connection, not the node */
            note(wc);
        }
        return;
    }
    if (wc->ev)
        event_del(wc->ev);
    note(wc);
}

static void on_writable(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    writer_conn_t *wc = arg;
    if (!atomic_load(&wc->closing))
        flush(wc);
}

static void on_kicks(void *arg)
{
    writer_t *w = arg;
    int stop = 0;
    for (handoff_item_t *l = handoff_take(w->in), *next; l; l = next) {
        next = l->next;
        if (l == &w->stop) {
            stop = 1;
            continue;
        }
        writer_conn_t *wc = container_of(l, writer_conn_t, kick);
        atomic_store(&wc->kicked, 0); /* bytes added from now on kick again */
        if (atomic_load(&wc->closing)) {
            if (wc->ev)
                event_free(wc->ev);
            wc->ev = NULL;
            evutil_closesocket(wc->fd);
            unref(wc); /* the writer's reference */
            continue;
        }
        flush(wc);
    }
    if (stop)
        event_base_loopbreak(w->base);
}

static void *writer_main(void *arg)
{
    writer_t *w = arg;
    int err = -ENOMEM;
    w->base = event_base_new();
    if (w->base)
        w->in = handoff_new(w->base, on_kicks, w, &err);
    pthread_mutex_lock(&w->mu);
    w->ready = w->in ? 1 : err;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    if (w->in)
        event_base_loop(w->base, EVLOOP_NO_EXIT_ON_EMPTY);
    /* w->in and w->base are freed by writers_destroy() after the join: the
     * loop thread's push of `stop` may still be writing the eventfd when
     * this thread has already taken it */
    return NULL;
}

/* ---- the loop thread -------------------------------------------------------- */

static void on_notes(void *arg)
{
    writers_t *ws = arg;
    for (handoff_item_t *l = handoff_take(ws->notes), *next; l; l = next) {
        next = l->next;
        writer_conn_t *wc = container_of(l, writer_conn_t, note);
        atomic_store(&wc->noted, 0);
        if (wc->open)
            wc->on_written(wc->fd, EV_WRITE, wc->arg); /* may writers_close(wc) */
        unref(wc); /* the note's reference */
    }
}

static void kick(writer_conn_t *wc)
{
    if (atomic_exchange(&wc->kicked, 1))
        return; /* queued: the writer sees the new bytes and the close too */
    atomic_fetch_add(&wc->w->ws->kicks, 1);
    handoff_push_chain(wc->w->in, &wc->kick, &wc->kick, 1);
}

writers_t *writers_new(struct event_base *loop, int n, int *err)
{
    int rc = 0;
    writers_t *ws = NULL;
    if (!loop || n < 1 || n > WRITERS_MAX) {
        rc = -EINVAL;
        goto out;
    }
    if (evthread_use_pthreads() < 0) {
        rc = -ENOMEM;
        goto out;
    }
    ws = calloc(1, sizeof *ws);
    if (!ws || !(ws->w = calloc((size_t)n, sizeof *ws->w))) {
        rc = -ENOMEM;
        goto out;
    }
    ws->loop = loop;
    ws->notes = handoff_new(loop, on_notes, ws, &rc);
    if (!ws->notes)
        goto out;
    for (int i = 0; i < n; i++) {
        writer_t *w = &ws->w[i];
        w->ws = ws;
        pthread_mutex_init(&w->mu, NULL);
        pthread_cond_init(&w->cv, NULL);
        int e = pthread_create(&w->thread, NULL, writer_main, w);
        if (e) {
            rc = -e;
            goto out;
        }
        w->started = 1;
        ws->n++;
        pthread_mutex_lock(&w->mu);
        while (!w->ready)
            pthread_cond_wait(&w->cv, &w->mu);
        pthread_mutex_unlock(&w->mu);
        if (w->ready < 0) {
            rc = w->ready;
            goto out;
        }
    }
out:
    if (rc < 0) {
        writers_destroy(&ws);
        if (err)
            *err = rc;
    }
    return ws;
}

writer_conn_t *writers_open(writers_t *ws, evutil_socket_t fd, event_callback_fn on_written,
                            void *arg)
{
    writer_conn_t *wc = calloc(1, sizeof *wc);
    if (!wc)
        return NULL;
    wc->buf = evbuffer_new();
    if (!wc->buf || evbuffer_enable_locking(wc->buf, NULL) < 0) {
        if (wc->buf)
            evbuffer_free(wc->buf);
        free(wc);
        return NULL;
    }
    wc->w = &ws->w[ws->next];
    ws->next = (ws->next + 1) % ws->n;
    wc->fd = fd;
    wc->on_written = on_written;
    wc->arg = arg;
    wc->open = 1;
    atomic_init(&wc->refs, 2); /* the loop's and the writer's */
    return wc;
}

int writers_send(writer_conn_t *wc, struct evbuffer *out)
{
    if (atomic_load(&wc->failed))
        return -EPIPE;
    if (evbuffer_get_length(out) == 0)
        return 0;
    if (evbuffer_add_buffer(wc->buf, out) < 0)
        return -ENOMEM;
    kick(wc);
    return 0;
}

size_t writers_unsent(const writer_conn_t *wc)
{
    return evbuffer_get_length(wc->buf);
}

void writers_close(writer_conn_t *wc)
{
    wc->open = 0;
    atomic_store(&wc->closing, 1);
    kick(wc); /* queued or not, the writer sees `closing` after this */
    unref(wc); /* the loop's reference */
}

void writers_stats(writers_t *ws, writers_stats_t *out)
{
    out->kicks = atomic_load(&ws->kicks);
    out->notes = atomic_load(&ws->notes_sent);
    out->bytes = atomic_load(&ws->bytes);
}

void writers_destroy(writers_t **wsp)
{
    if (!wsp || !*wsp)
        return;
    writers_t *ws = *wsp;
    for (int i = 0; ws->w && i < ws->n; i++) {
        writer_t *w = &ws->w[i];
        if (w->ready > 0)
            handoff_push_chain(w->in, &w->stop, &w->stop, 1);
        if (w->started)
            pthread_join(w->thread, NULL);
        handoff_destroy(&w->in);
        if (w->base)
            event_base_free(w->base);
        pthread_mutex_destroy(&w->mu);
        pthread_cond_destroy(&w->cv);
    }
    if (ws->notes) {
        /* notes the writers handed back before they stopped: drop them */
        for (handoff_item_t *l = handoff_close(ws->notes), *next; l; l = next) {
            next = l->next;
            writer_conn_t *wc = container_of(l, writer_conn_t, note);
            unref(wc);
        }
        handoff_destroy(&ws->notes);
    }
    free(ws->w);
    free(ws);
    *wsp = NULL;
}
