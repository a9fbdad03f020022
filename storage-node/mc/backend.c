/* backend.c - memcached backend: libmemcached calls on a worker pool (workpool.h) or inline (see backend.h). */
#include "storage-node/mc/backend.h"

#include <errno.h>
#include <libmemcached/memcached.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "storage-node/workpool.h"

_Static_assert(BACKEND_BATCH_MAX <= WORKPOOL_BATCH_MAX, "a batch fits the pool's");

#define container_of(p, T, m) ((T *)(void *)((char *)(p) - offsetof(T, m)))

/* The settings are read-only after backend_new() (the workers read them);
 * the pool has its own locks. */
struct backend {
    char host[256];
    unsigned port;
    backend_done_fn done;
    void *arg;
    workpool_t *wp;          /* each worker (inline: the loop thread) with
                                its own memcached_st */
};

/* The pool's thread_start: each worker's (inline: the loop thread's)
 * libmemcached handle; it connects on first use. */
static void *connect_mc(void *arg)
{
    const backend_t *b = arg;
    memcached_st *mc = memcached_create(NULL);
    if (!mc)
        goto fail;
    if (memcached_server_add(mc, b->host, (in_port_t)b->port) !=
        MEMCACHED_SUCCESS) {
        memcached_free(mc);
        goto fail;
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
fail:
    log_error("backend: cannot create a libmemcached handle");
    return NULL;
}

static void disconnect_mc(void *ctx, void *arg)
{
    (void)arg;
    if (ctx)
        memcached_free(ctx);
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

/* The pool's run: a batch on this thread's connection (NULL: none). */
static void run_items(void *ctx, workpool_item_t **items, size_t n, void *arg)
{
    (void)arg;
    backend_op_t *ops[BACKEND_BATCH_MAX];
    for (size_t i = 0; i < n; i++)
        ops[i] = container_of(items[i], backend_op_t, link);
    run_batch(ctx, ops, n);
}

/* The pool's ready, on the loop thread: runs the callbacks in order. */
static void deliver(void *arg)
{
    backend_t *b = arg;
    workpool_item_t *it = workpool_collect(b->wp);
    while (it) {
        workpool_item_t *next = it->next;
        it->next = NULL;
        b->done(container_of(it, backend_op_t, link), b->arg);
        it = next;
    }
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
    b->done = done;
    b->arg = arg;
    workpool_config_t pc = {.workers = nworkers, .batch = batch, .finish_queued = 1,
                            .thread_start = connect_mc, .thread_stop = disconnect_mc,
                            .run = run_items, .ready = deliver, .arg = b};
    b->wp = workpool_new(base, &pc, &rc);
out:
    if (rc < 0) {
        backend_destroy(&b);
        if (err)
            *err = rc;
        return NULL;
    }
    return b;
}

int backend_submit(backend_t *b, backend_op_t *op)
{
    return workpool_submit_chain(b->wp, &op->link, &op->link, 1);
}

int backend_submit_chain(backend_t *b, backend_op_t *first, backend_op_t *last,
                         size_t n)
{
    return workpool_submit_chain(b->wp, &first->link, &last->link, n);
}

void backend_destroy(backend_t **bp)
{
    if (!bp || !*bp)
        return;
    backend_t *b = *bp;
    if (b->wp) {
        workpool_stop(b->wp); /* the workers finish the queue first */
        deliver(b);
        workpool_destroy(&b->wp);
    }
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
