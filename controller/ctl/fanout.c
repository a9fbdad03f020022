/* fanout.c - bqos-ctl's one request sent to several controllers at once: a text to N ZeroMQ REQ sockets, each reply handed to a callback until it says stop, every socket is done, or a deadline. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "common/mono.h"
#include "controller/ctl/fanout.h"

struct fanout {
    void *socks[FANOUT_MAX];
    int state[FANOUT_MAX], skip[FANOUT_MAX];
    int n;
    double deadline; /* mono_now() seconds, during fanout_run() */
};

fanout_t *fanout_new(void)
{
    return calloc(1, sizeof(fanout_t));
}

void fanout_destroy(fanout_t *f)
{
    if (!f)
        return;
    for (int i = 0; i < f->n; i++)
        if (f->socks[i])
            zmq_close(f->socks[i]);
    free(f);
}

int fanout_add(fanout_t *f, void *sock)
{
    if (f->n == FANOUT_MAX)
        return -ENOSPC;
    f->socks[f->n] = sock;
    f->state[f->n] = sock ? FANOUT_TO_SEND : FANOUT_DONE;
    f->skip[f->n] = 0;
    return f->n++;
}

int fanout_count(const fanout_t *f)
{
    return f->n;
}

int fanout_state(const fanout_t *f, int i)
{
    return f->state[i];
}

void fanout_skip(fanout_t *f, int i)
{
    f->skip[i] = 1;
}

void fanout_cut(fanout_t *f, int ms)
{
    double d = mono_now() + ms / 1e3;
    if (d < f->deadline)
        f->deadline = d;
}

int fanout_run(fanout_t *f, const char *text, int timeout_ms, fanout_reply_fn fn, void *arg)
{
    size_t tlen = strlen(text);
    f->deadline = mono_now() + timeout_ms / 1e3;
    for (;;) {
        zmq_pollitem_t items[FANOUT_MAX];
        int map[FANOUT_MAX], ni = 0;
        for (int i = 0; i < f->n; i++)
            if (f->state[i] != FANOUT_DONE && !f->skip[i]) {
                items[ni] = (zmq_pollitem_t){
                    f->socks[i], 0, f->state[i] == FANOUT_TO_SEND ? ZMQ_POLLOUT : ZMQ_POLLIN, 0};
                map[ni++] = i;
            }
        long left = (long)((f->deadline - mono_now()) * 1e3) + 1;
        if (ni == 0 || left <= 0)
            return 0;
        if (zmq_poll(items, ni, left) < 0 && zmq_errno() != EINTR)
            return 0;
        for (int k = 0; k < ni; k++) {
            int i = map[k];
            if (f->state[i] == FANOUT_TO_SEND && (items[k].revents & ZMQ_POLLOUT)) {
                f->state[i] = zmq_send(f->socks[i], text, tlen, ZMQ_DONTWAIT) < 0 ? FANOUT_DONE
                                                                                   : FANOUT_SENT;
                continue;
            }
            if (f->state[i] != FANOUT_SENT || !(items[k].revents & ZMQ_POLLIN))
                continue;
            f->state[i] = FANOUT_DONE;
            zmq_msg_t msg;
            zmq_msg_init(&msg);
            int got = zmq_msg_recv(&msg, f->socks[i], ZMQ_DONTWAIT) >= 0;
            int stop = fn(f, i, got ? zmq_msg_data(&msg) : NULL, got ? zmq_msg_size(&msg) : 0, arg);
            zmq_msg_close(&msg);
            if (stop == FANOUT_STOP)
                return 1;
        }
    }
}
