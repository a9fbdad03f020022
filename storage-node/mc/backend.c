/* backend.c - libmemcached worker pool with eventfd completions (see backend.h). */
#include "storage-node/mc/backend.h"

#include <errno.h>
#include <event2/event.h>
#include <libmemcached/memcached.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "common/log.h"

/* Shared between the loop thread and the workers: the read-only settings,
 * then the submit FIFO under `lock`, then the completions under
 * `done_lock`. */
struct backend {
    /* read-only after backend_new() */
    char host[256];
    unsigned port;
    int nworkers;            /* 0: inline, ops run on the loop thread */
    memcached_st *mc;        /* inline mode's connection (loop thread) */
    int batch;               /* most ops a worker takes at once */
    backend_done_fn done;
    void *arg;
    int efd;
    struct event *ev;        /* loop thread */
    pthread_t *threads;
    int nthreads;            /* started */

    pthread_mutex_t lock;    /* the submit side: */
    pthread_cond_t cond;
    backend_op_t *todo_head, *todo_tail; /* FIFO of submitted ops */
    int idle;                /* workers waiting on cond */
    int stopping;
    /* The completion side has its own lock so that workers handing back
     * results do not contend with the loop thread submitting work. */
    pthread_mutex_t done_lock;
    backend_op_t *done_head, *done_tail; /* completed, not yet delivered */
};

static memcached_st *connect_mc(const backend_t *b)
{
    memcached_st *mc = memcached_create(NULL);
    if (!mc)
        return NULL;
    if (memcached_server_add(mc, b->host, (in_port_t)b->port) !=
        MEMCACHED_SUCCESS) {
        memcached_free(mc);
        return NULL;
    }
    memcached_behavior_set(mc, MEMCACHED_BEHAVIOR_SUPPORT_CAS, 1);
    memcached_behavior_set(mc, MEMCACHED_BEHAVIOR_TCP_NODELAY, 1);
    memcached_behavior_set(mc, MEMCACHED_BEHAVIOR_CONNECT_TIMEOUT, 1000);
    memcached_behavior_set(mc, MEMCACHED_BEHAVIOR_POLL_TIMEOUT, 2000);
    memcached_behavior_set(mc, MEMCACHED_BEHAVIOR_RCV_TIMEOUT, 2000000);
    memcached_behavior_set(mc, MEMCACHED_BEHAVIOR_SND_TIMEOUT, 2000000);
    /* A dead server is retried on the next request after one second, so
     * the node recovers by itself when memcached comes back. */
    memcached_behavior_set(mc, MEMCACHED_BEHAVIOR_RETRY_TIMEOUT, 1);
    memcached_behavior_set(mc, MEMCACHED_BEHAVIOR_SERVER_FAILURE_LIMIT, 0);
    return mc;
}

static void set_error(backend_op_t *op, memcached_st *mc, memcached_return_t rc)
{
    op->reply = MCP_R_SERVER_ERROR;
    if (rc == MEMCACHED_E2BIG) {
        snprintf(op->errmsg, sizeof op->errmsg,
                 "SERVER_ERROR object too large for cache");
        return;
    }
    snprintf(op->errmsg, sizeof op->errmsg, "SERVER_ERROR backend: %s",
             mc ? memcached_strerror(mc, rc) : "no connection");
    /* Keep it one line whatever libmemcached says. */
    for (char *p = op->errmsg; *p; p++)
        if (*p == '\r' || *p == '\n')
            *p = ' ';
}

static void do_get(memcached_st *mc, backend_op_t *op)
{
    const char *keys[1] = {op->key};
    size_t lens[1] = {op->keylen};
    memcached_return_t rc = memcached_mget(mc, keys, lens, 1);
    if (rc != MEMCACHED_SUCCESS) {
        set_error(op, mc, rc);
        return;
    }
    memcached_result_st res;
    if (!memcached_result_create(mc, &res)) {
        set_error(op, mc, MEMCACHED_MEMORY_ALLOCATION_FAILURE);
        return;
    }
    op->reply = MCP_R_MISS;
    memcached_result_st *r;
    while ((r = memcached_fetch_result(mc, &res, &rc)) != NULL) {
        if (op->reply == MCP_R_VALUE)
            continue;
        size_t n = memcached_result_length(r);
        op->rvalue = malloc(n ? n : 1);
        if (!op->rvalue) {
            set_error(op, mc, MEMCACHED_MEMORY_ALLOCATION_FAILURE);
            break;
        }
        memcpy(op->rvalue, memcached_result_value(r), n);
        op->rvlen = n;
        op->rflags = memcached_result_flags(r);
        op->rcas = memcached_result_cas(r);
        op->reply = MCP_R_VALUE;
    }
    if (op->reply == MCP_R_MISS && rc != MEMCACHED_END &&
        rc != MEMCACHED_NOTFOUND && rc != MEMCACHED_SUCCESS)
        set_error(op, mc, rc);
    memcached_result_free(&res);
}

/* Several gets in one round trip ("gets k1 k2 ..."): each result goes to
 * every op of that key.  The ops' replies are as do_get() would give. */
static void do_get_many(memcached_st *mc, backend_op_t **ops, size_t n)
{
    const char *keys[BACKEND_BATCH_MAX];
    size_t lens[BACKEND_BATCH_MAX];
    for (size_t i = 0; i < n; i++) {
        keys[i] = ops[i]->key;
        lens[i] = ops[i]->keylen;
        ops[i]->reply = MCP_R_MISS;
        ops[i]->rvalue = NULL;
        ops[i]->rvlen = 0;
    }
    memcached_return_t rc = memcached_mget(mc, keys, lens, n);
    if (rc != MEMCACHED_SUCCESS) {
        for (size_t i = 0; i < n; i++)
            set_error(ops[i], mc, rc);
        return;
    }
    memcached_result_st res;
    if (!memcached_result_create(mc, &res)) {
        for (size_t i = 0; i < n; i++)
            set_error(ops[i], mc, MEMCACHED_MEMORY_ALLOCATION_FAILURE);
        return;
    }
    memcached_result_st *r;
    while ((r = memcached_fetch_result(mc, &res, &rc)) != NULL) {
        const char *k = memcached_result_key_value(r);
        size_t kl = memcached_result_key_length(r);
        for (size_t i = 0; i < n; i++) {
            backend_op_t *op = ops[i];
            if (op->reply != MCP_R_MISS || op->keylen != kl || memcmp(op->key, k, kl) != 0)
                continue;
            size_t vl = memcached_result_length(r);
            op->rvalue = malloc(vl ? vl : 1);
            if (!op->rvalue) {
                set_error(op, mc, MEMCACHED_MEMORY_ALLOCATION_FAILURE);
                continue;
            }
            memcpy(op->rvalue, memcached_result_value(r), vl);
            op->rvlen = vl;
            op->rflags = memcached_result_flags(r);
            op->rcas = memcached_result_cas(r);
            op->reply = MCP_R_VALUE;
        }
    }
    if (rc != MEMCACHED_END && rc != MEMCACHED_NOTFOUND && rc != MEMCACHED_SUCCESS)
        for (size_t i = 0; i < n; i++)
            if (ops[i]->reply == MCP_R_MISS)
                set_error(ops[i], mc, rc);
    memcached_result_free(&res);
}

/* Runs one operation synchronously on this worker's connection. */
static void run_op(memcached_st *mc, backend_op_t *op)
{
    memcached_return_t rc;
    time_t exp = (time_t)op->exptime;
    op->rvalue = NULL;
    op->rvlen = 0;
    op->errmsg[0] = '\0';
    if (!mc) {
        set_error(op, NULL, MEMCACHED_FAILURE);
        return;
    }
    switch (op->cmd) {
    case MCP_CMD_GET:
    case MCP_CMD_GETS:
        do_get(mc, op);
        return;
    case MCP_CMD_SET:
        rc = memcached_set(mc, op->key, op->keylen, op->value, op->vlen, exp,
                           op->flags);
        break;
    case MCP_CMD_ADD:
        rc = memcached_add(mc, op->key, op->keylen, op->value, op->vlen, exp,
                           op->flags);
        break;
    case MCP_CMD_REPLACE:
        rc = memcached_replace(mc, op->key, op->keylen, op->value, op->vlen,
                               exp, op->flags);
        break;
    case MCP_CMD_APPEND:
        rc = memcached_append(mc, op->key, op->keylen, op->value, op->vlen,
                              exp, op->flags);
        break;
    case MCP_CMD_PREPEND:
        rc = memcached_prepend(mc, op->key, op->keylen, op->value, op->vlen,
                               exp, op->flags);
        break;
    case MCP_CMD_CAS:
        rc = memcached_cas(mc, op->key, op->keylen, op->value, op->vlen, exp,
                           op->flags, op->cas);
        break;
    case MCP_CMD_DELETE:
        rc = memcached_delete(mc, op->key, op->keylen, 0);
        if (rc == MEMCACHED_SUCCESS) {
            op->reply = MCP_R_DELETED;
            return;
        }
        break;
    case MCP_CMD_INCR:
    case MCP_CMD_DECR:
        if (op->cmd == MCP_CMD_INCR)
            rc = memcached_increment_by_key(mc, op->key, op->keylen, op->key,
                                            op->keylen, op->delta, &op->number);
        else
            rc = memcached_decrement_by_key(mc, op->key, op->keylen, op->key,
                                            op->keylen, op->delta, &op->number);
        if (rc == MEMCACHED_SUCCESS) {
            op->reply = MCP_R_NUMBER;
            return;
        }
        if (rc == MEMCACHED_CLIENT_ERROR) {
            op->reply = MCP_R_NON_NUMERIC;
            return;
        }
        break;
    case MCP_CMD_TOUCH:
        rc = memcached_touch(mc, op->key, op->keylen, exp);
        if (rc == MEMCACHED_SUCCESS) {
            op->reply = MCP_R_TOUCHED;
            return;
        }
        break;
    case MCP_CMD_FLUSH_ALL:
        rc = memcached_flush(mc, exp);
        if (rc == MEMCACHED_SUCCESS) {
            op->reply = MCP_R_OK;
            return;
        }
        break;
    default:
        snprintf(op->errmsg, sizeof op->errmsg,
                 "SERVER_ERROR backend: unsupported command");
        op->reply = MCP_R_SERVER_ERROR;
        return;
    }
    switch (rc) {
    case MEMCACHED_SUCCESS:
    case MEMCACHED_STORED:
        op->reply = MCP_R_STORED;
        break;
    case MEMCACHED_NOTSTORED:
        op->reply = MCP_R_NOT_STORED;
        break;
    case MEMCACHED_DATA_EXISTS:
        op->reply = MCP_R_EXISTS;
        break;
    case MEMCACHED_NOTFOUND:
        op->reply = MCP_R_NOT_FOUND;
        break;
    default:
        set_error(op, mc, rc);
        break;
    }
}

static int is_get(const backend_op_t *op)
{
    return op->cmd == MCP_CMD_GET || op->cmd == MCP_CMD_GETS;
}

/* Runs a batch taken from the FIFO: every get of the batch goes out as one
 * multi-key get (one round trip), then the other ops run in order.  Ops of
 * one batch are all outstanding at once, so their relative order is free:
 * the front never has two unfinished IOs of one key on one connection, and
 * a flush_all is alone on its connection. */
static void run_batch(memcached_st *mc, backend_op_t **ops, size_t n)
{
    backend_op_t *gets[BACKEND_BATCH_MAX];
    size_t ng = 0;
    for (size_t i = 0; mc && i < n; i++)
        if (is_get(ops[i]))
            gets[ng++] = ops[i];
    if (ng == 1)
        run_op(mc, gets[0]);
    else if (ng > 1)
        do_get_many(mc, gets, ng);
    for (size_t i = 0; i < n; i++)
        if (!mc || !is_get(ops[i]))
            run_op(mc, ops[i]);
}

/* Appends the ops (linked in order through ->next, last->next NULL) to the
 * completions and wakes the loop if they were empty. */
static void hand_back(backend_t *b, backend_op_t *first, backend_op_t *last)
{
    pthread_mutex_lock(&b->done_lock);
    int wake = b->done_head == NULL;
    if (b->done_tail)
        b->done_tail->next = first;
    else
        b->done_head = first;
    b->done_tail = last;
    pthread_mutex_unlock(&b->done_lock);
    if (!wake)
        return;
    if (b->nworkers == 0) {
        event_active(b->ev, EV_READ, 0); /* loop thread: no syscall */
        return;
    }
    uint64_t one = 1;
    ssize_t w = write(b->efd, &one, sizeof one);
    (void)w; /* the counter cannot overflow in practice */
}

static void *worker_main(void *arg)
{
    backend_t *b = arg;
    backend_op_t *ops[BACKEND_BATCH_MAX];
    memcached_st *mc = connect_mc(b);
    if (!mc)
        log_error("backend: cannot create a libmemcached handle");
    pthread_mutex_lock(&b->lock);
    for (;;) {
        while (!b->todo_head && !b->stopping) {
            b->idle++;
            pthread_cond_wait(&b->cond, &b->lock);
            b->idle--;
        }
        if (!b->todo_head)
            break; /* stopping and nothing left */
        size_t n = 0;
        while (b->todo_head && n < (size_t)b->batch) {
            ops[n++] = b->todo_head;
            b->todo_head = b->todo_head->next;
        }
        if (!b->todo_head)
            b->todo_tail = NULL;
        pthread_mutex_unlock(&b->lock);

        run_batch(mc, ops, n);
        for (size_t i = 0; i + 1 < n; i++)
            ops[i]->next = ops[i + 1];
        ops[n - 1]->next = NULL;
        hand_back(b, ops[0], ops[n - 1]);
        pthread_mutex_lock(&b->lock);
    }
    pthread_mutex_unlock(&b->lock);
    if (mc)
        memcached_free(mc);
    return NULL;
}

/* Loop thread: takes every completed op and runs the callbacks in order. */
static void deliver(backend_t *b)
{
    pthread_mutex_lock(&b->done_lock);
    backend_op_t *op = b->done_head;
    b->done_head = b->done_tail = NULL;
    pthread_mutex_unlock(&b->done_lock);
    while (op) {
        backend_op_t *next = op->next;
        op->next = NULL;
        b->done(op, b->arg);
        op = next;
    }
}

/* Inline mode: completions were queued by backend_submit_chain() on this
 * thread and the event activated by hand. */
static void on_inline_done(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    deliver(arg);
}

static void on_eventfd(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    uint64_t n;
    ssize_t r = read(fd, &n, sizeof n);
    (void)r; /* EAGAIN only if another read raced: harmless */
    deliver(arg);
}

backend_t *backend_new(struct event_base *base, const char *host,
                       unsigned port, int nworkers, int batch,
                       backend_done_fn done, void *arg, int *err)
{
    int rc = 0;
    backend_t *b = NULL;
    if (!base || !host || !*host || strlen(host) >= sizeof b->host ||
        port == 0 || port > 65535 || nworkers < 0 || batch < 1 ||
        batch > BACKEND_BATCH_MAX || !done) {
        rc = -EINVAL;
        goto out;
    }
    b = calloc(1, sizeof *b);
    if (!b) {
        rc = -ENOMEM;
        goto out;
    }
    snprintf(b->host, sizeof b->host, "%s", host);
    b->port = port;
    b->nworkers = nworkers;
    b->batch = batch;
    b->done = done;
    b->arg = arg;
    b->efd = -1;
    pthread_mutex_init(&b->lock, NULL);
    pthread_mutex_init(&b->done_lock, NULL);
    pthread_cond_init(&b->cond, NULL);
    if (nworkers == 0) {
        b->mc = connect_mc(b);
        b->ev = event_new(base, -1, 0, on_inline_done, b);
        if (!b->mc || !b->ev)
            rc = -ENOMEM;
        goto out;
    }
    b->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (b->efd < 0) {
        rc = -errno;
        goto out;
    }
    b->ev = event_new(base, b->efd, EV_READ | EV_PERSIST, on_eventfd, b);
    if (!b->ev || event_add(b->ev, NULL) < 0) {
        rc = -ENOMEM;
        goto out;
    }
    b->threads = calloc((size_t)nworkers, sizeof *b->threads);
    if (!b->threads) {
        rc = -ENOMEM;
        goto out;
    }
    for (int i = 0; i < nworkers; i++) {
        int e = pthread_create(&b->threads[i], NULL, worker_main, b);
        if (e) {
            rc = -e;
            goto out;
        }
        b->nthreads++;
    }
out:
    if (rc < 0) {
        backend_destroy(&b);
        if (err)
            *err = rc;
        return NULL;
    }
    return b;
}

/* Inline mode: runs the chain now, `batch` ops at a time, and queues the
 * completions for the loop's next pass over active events. */
static int run_inline(backend_t *b, backend_op_t *first, backend_op_t *last)
{
    if (b->stopping)
        return -ESHUTDOWN;
    backend_op_t *ops[BACKEND_BATCH_MAX];
    backend_op_t *op = first;
    while (op) {
        size_t n = 0;
        for (; op && n < (size_t)b->batch; op = op->next)
            ops[n++] = op;
        run_batch(b->mc, ops, n);
    }
    hand_back(b, first, last);
    return 0;
}

int backend_submit(backend_t *b, backend_op_t *op)
{
    op->next = NULL;
    return backend_submit_chain(b, op, op, 1);
}

int backend_submit_chain(backend_t *b, backend_op_t *first, backend_op_t *last,
                         size_t n)
{
    last->next = NULL;
    if (b->nworkers == 0)
        return run_inline(b, first, last);
    pthread_mutex_lock(&b->lock);
    if (b->stopping) {
        pthread_mutex_unlock(&b->lock);
        return -ESHUTDOWN;
    }
    if (b->todo_tail)
        b->todo_tail->next = first;
    else
        b->todo_head = first;
    b->todo_tail = last;
    /* Busy workers come back for more by themselves; wake an idle one
     * (all of them for more than a batch). */
    if (b->idle > 0) {
        if (n > (size_t)b->batch)
            pthread_cond_broadcast(&b->cond);
        else
            pthread_cond_signal(&b->cond);
    }
    pthread_mutex_unlock(&b->lock);
    return 0;
}

void backend_destroy(backend_t **bp)
{
    if (!bp || !*bp)
        return;
    backend_t *b = *bp;
    pthread_mutex_lock(&b->lock);
    b->stopping = 1;
    pthread_cond_broadcast(&b->cond);
    pthread_mutex_unlock(&b->lock);
    for (int i = 0; i < b->nthreads; i++)
        pthread_join(b->threads[i], NULL);
    if (b->done)
        deliver(b);
    if (b->ev)
        event_free(b->ev);
    if (b->efd >= 0)
        close(b->efd);
    if (b->mc)
        memcached_free(b->mc);
    free(b->threads);
    pthread_cond_destroy(&b->cond);
    pthread_mutex_destroy(&b->lock);
    pthread_mutex_destroy(&b->done_lock);
    free(b);
    *bp = NULL;
}

int backend_parse_url(const char *url, char *host, size_t hostcap,
                      unsigned *port)
{
    if (!url)
        return -EINVAL;
    if (strncmp(url, "memcached://", 12) == 0)
        url += 12;
    const char *colon = strrchr(url, ':');
    if (!colon || colon == url || (size_t)(colon - url) >= hostcap)
        return -EINVAL;
    char *end;
    errno = 0;
    unsigned long p = strtoul(colon + 1, &end, 10);
    if (errno || *end || end == colon + 1 || p == 0 || p > 65535)
        return -EINVAL;
    memcpy(host, url, (size_t)(colon - url));
    host[colon - url] = '\0';
    *port = (unsigned)p;
    return 0;
}
