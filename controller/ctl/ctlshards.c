/* ctlshards.c - bqos-ctl's routing among controller shards: which shard owns a bucket now, by the cluster's shards configuration (the newest any shard gives) and the generation in force. */
#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "common/curvekey.h"
#include "common/mono.h"
#include "common/proto.h"
#include "common/shardgen.h"
#include "common/shardmap.h"
#include "controller/ctl/ctlshards.h"

/* Cuts `list` ("A,B;C,D") at its ';' into out[] (in place).  Returns the
 * number of shards, or -1 (an empty one, more than max). */
int ctlshards_split(char *list, const char **out, int max)
{
    int k = 0;
    for (char *p = list;;) {
        char *semi = strchr(p, ';');
        if (semi)
            *semi = '\0';
        if (!*p || k == max)
            return -1;
        out[k++] = p;
        if (!semi)
            return k;
        p = semi + 1;
    }
}

/* The configuration in admin reply r ("cluster": its from_ms is the key's
 * "from"), into *g.  Returns 0, or -1 (no such member, or one that does
 * not parse). */
int ctlshards_of_reply(const json_t *r, shardgen_t *g)
{
    json_t *c = json_object_get(r, "cluster");
    if (!json_is_object(c))
        return -1;
    json_t *n = json_object_get(c, "next");
    json_t *k = json_pack("{s:O, s:O}", "k", json_object_get(c, "k"), "gen",
                          json_object_get(c, "gen"));
    if (k && json_is_object(n))
        json_object_set_new(k, "next", json_pack("{s:O, s:O, s:O}", "k", json_object_get(n, "k"),
                                                 "gen", json_object_get(n, "gen"), "from",
                                                 json_object_get(n, "from_ms")));
    char *kt = k ? json_dumps(k, JSON_COMPACT) : NULL;
    int rc = kt && shardgen_parse(kt, strlen(kt), g, NULL) == 0 ? 0 : -1;
    free(kt);
    json_decref(k);
    return rc;
}

/* After the first answer, how long ctlshards_ask_all() still waits for the
 * shards that have not answered yet (a dead one costs this, not the
 * timeout). */
#define SHARDS_GRACE_MS 150
#define SHARDS_ASK_MAX 64

/* The cluster's shards configuration, asked of every endpoint of every
 * shard at once (eps[0..n-1]: a comma list per shard; admin "shards",
 * which a standby answers too): the newest of the answers
 * (shardgen_newer(): every controller reads etcd's key every second, one
 * may lag), into *g.  Waits until a controller of every shard answered,
 * SHARDS_GRACE_MS after the first answer, or timeout_ms, whichever comes
 * first: a dead shard, shard 0 too, costs at most the grace and prints
 * nothing (the command's own request says if its shard is dead).  Returns
 * 0, or -1 (no controller answered with a configuration: the caller routes
 * by the number of lists, as before generations). */
int ctlshards_ask_all(const char **eps, int n, int timeout_ms, const curvekey_t *keys,
                      ctlshards_open_fn open_fn, shardgen_t *g)
{
    void *socks[SHARDS_ASK_MAX] = {0};
    int shard_of[SHARDS_ASK_MAX], state[SHARDS_ASK_MAX] = {0}; /* 0 to send, 1 sent, 2 done */
    int heard[SHARDMAP_MAX] = {0}, nheard = 0, ns = 0, got = 0, code;
    char *copies[SHARDMAP_MAX] = {0};
    json_t *req = json_pack("{s:i, s:s}", "v", PROTO_ADMIN_VERSION, "cmd", "shards");
    char *text = req ? json_dumps(req, JSON_COMPACT) : NULL;
    void *ctx = text ? zmq_ctx_new() : NULL;
    if (!ctx)
        goto out;
    for (int s = 0; s < n && s < SHARDMAP_MAX; s++) {
        char *save = NULL;
        if (!(copies[s] = strdup(eps[s])))
            goto out;
        for (char *t = strtok_r(copies[s], ",", &save); t && ns < SHARDS_ASK_MAX;
             t = strtok_r(NULL, ",", &save)) {
            shard_of[ns] = s;
            if (!(socks[ns] = open_fn(ctx, t, timeout_ms, keys, &code)))
                state[ns] = 2;
            ns++;
        }
    }
    double now = mono_now(), deadline = now + timeout_ms / 1e3;
    while (nheard < n) {
        zmq_pollitem_t items[SHARDS_ASK_MAX];
        int map[SHARDS_ASK_MAX], ni = 0;
        for (int i = 0; i < ns; i++)
            if (state[i] < 2 && !heard[shard_of[i]]) {
                items[ni] = (zmq_pollitem_t){socks[i], 0,
                                             state[i] == 0 ? ZMQ_POLLOUT : ZMQ_POLLIN, 0};
                map[ni++] = i;
            }
        long left = (long)((deadline - mono_now()) * 1e3) + 1;
        if (ni == 0 || left <= 0)
            break;
        if (zmq_poll(items, ni, left) < 0 && zmq_errno() != EINTR)
            break;
        for (int k = 0; k < ni; k++) {
            int i = map[k];
            if (state[i] == 0 && (items[k].revents & ZMQ_POLLOUT)) {
                state[i] = zmq_send(socks[i], text, strlen(text), ZMQ_DONTWAIT) < 0 ? 2 : 1;
                continue;
            }
            if (state[i] != 1 || !(items[k].revents & ZMQ_POLLIN))
                continue;
            state[i] = 2;
            zmq_msg_t msg;
            zmq_msg_init(&msg);
            json_t *r = zmq_msg_recv(&msg, socks[i], ZMQ_DONTWAIT) < 0
                            ? NULL
                            : json_loadb(zmq_msg_data(&msg), zmq_msg_size(&msg), 0, NULL);
            zmq_msg_close(&msg);
            shardgen_t one;
            json_t *v = json_object_get(r, "v");
            if (json_is_integer(v) && json_integer_value(v) == PROTO_ADMIN_VERSION &&
                json_is_true(json_object_get(r, "ok")) && ctlshards_of_reply(r, &one) == 0) {
                if (!got || shardgen_newer(&one, g))
                    *g = one;
                if (!got) /* the first answer: the others get the grace */
                    deadline = mono_now() + SHARDS_GRACE_MS / 1e3 < deadline
                                   ? mono_now() + SHARDS_GRACE_MS / 1e3
                                   : deadline;
                got = 1;
                if (!heard[shard_of[i]]) {
                    heard[shard_of[i]] = 1;
                    nheard++;
                }
            }
            json_decref(r);
        }
    }
out:
    for (int i = 0; i < ns; i++)
        if (socks[i])
            zmq_close(socks[i]);
    if (ctx)
        zmq_ctx_term(ctx);
    for (int s = 0; s < SHARDMAP_MAX; s++)
        free(copies[s]);
    free(text);
    json_decref(req);
    return got ? 0 : -1;
}

/* Wall-clock milliseconds now. */
int64_t ctlshards_wall_ms(void)
{
    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    return (int64_t)rt.tv_sec * 1000 + rt.tv_nsec / 1000000;
}

/* The shard of bucket `name` at wall instant now_ms among n endpoint
 * lists: by g (NULL: none known) when its K fits the n lists, else by n. */
int ctlshards_route(const shardgen_t *g, int n, const char *name, int64_t now_ms)
{
    if (g && shardgen_kmax(g) <= n) {
        int s = shardgen_of(g, name, now_ms);
        if (s >= 0)
            return s;
    }
    return shardmap_of(name, n);
}

/* The shard of bucket `name` now: by the cluster's configuration (the
 * newest any shard gives, ctlshards_ask_all()) when its K fits the n endpoint
 * lists, else by n. */
int ctlshards_now(const char **eps, int n, int timeout_ms, const curvekey_t *keys,
                  ctlshards_open_fn open_fn, const char *name)
{
    shardgen_t g;
    int known = ctlshards_ask_all(eps, n, timeout_ms, keys, open_fn, &g) == 0;
    return ctlshards_route(known ? &g : NULL, n, name, ctlshards_wall_ms());
}
