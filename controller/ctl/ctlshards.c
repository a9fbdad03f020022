/* ctlshards.c - bqos-ctl's routing among controller shards: which shard owns a bucket now, by the cluster's shards configuration (the newest any shard gives) and the generation in force. */
#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "common/curvekey.h"
#include "common/proto.h"
#include "common/shardgen.h"
#include "common/shardmap.h"
#include "controller/ctl/ctlshards.h"
#include "controller/ctl/fanout.h"

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

/* ctlshards_ask_all()'s state while the answers come (fanout_run()'s arg). */
typedef struct {
    int shard_of[SHARDS_ASK_MAX];
    int heard[SHARDMAP_MAX], got;
    shardgen_t *g;
} ask_t;

/* A shard's answer: the newest configuration kept; the first answer
 * brings the deadline to the grace; the endpoints of a shard that answered
 * are not polled again (once every shard answered, none is left). */
static int ask_reply(fanout_t *f, int i, const char *data, size_t len, void *arg)
{
    ask_t *a = arg;
    json_t *r = data ? json_loadb(data, len, 0, NULL) : NULL;
    shardgen_t one;
    json_t *v = json_object_get(r, "v");
    if (json_is_integer(v) && json_integer_value(v) == PROTO_ADMIN_VERSION &&
        json_is_true(json_object_get(r, "ok")) && ctlshards_of_reply(r, &one) == 0) {
        if (!a->got || shardgen_newer(&one, a->g))
            *a->g = one;
        if (!a->got) /* the first answer: the others get the grace */
            fanout_cut(f, SHARDS_GRACE_MS);
        a->got = 1;
        int s = a->shard_of[i];
        if (!a->heard[s]) {
            a->heard[s] = 1;
            for (int j = 0; j < fanout_count(f); j++)
                if (a->shard_of[j] == s)
                    fanout_skip(f, j);
        }
    }
    json_decref(r);
    return FANOUT_GO_ON;
}

static int ask(const char **eps, int n, int timeout_ms, const curvekey_t *keys,
               ctlshards_open_fn open_fn, shardgen_t *g, int *heard);

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
    return ask(eps, n, timeout_ms, keys, open_fn, g, NULL);
}

/* ctlshards_ask_all(), and heard[s] (SHARDMAP_MAX of them; may be NULL)
 * set to 1 for each shard s of which a controller answered (else 0). */
static int ask(const char **eps, int n, int timeout_ms, const curvekey_t *keys,
               ctlshards_open_fn open_fn, shardgen_t *g, int *heard)
{
    ask_t a = {.g = g};
    int code;
    char *copies[SHARDMAP_MAX] = {0};
    json_t *req = json_pack("{s:i, s:s}", "v", PROTO_ADMIN_VERSION, "cmd", "shards");
    char *text = req ? json_dumps(req, JSON_COMPACT) : NULL;
    fanout_t *f = text ? fanout_new() : NULL;
    void *ctx = f ? zmq_ctx_new() : NULL;
    if (!ctx)
        goto out;
    for (int s = 0; s < n && s < SHARDMAP_MAX; s++) {
        char *save = NULL;
        if (!(copies[s] = strdup(eps[s])))
            goto out;
        for (char *t = strtok_r(copies[s], ",", &save); t && fanout_count(f) < SHARDS_ASK_MAX;
             t = strtok_r(NULL, ",", &save)) {
            a.shard_of[fanout_count(f)] = s;
            fanout_add(f, open_fn(ctx, t, timeout_ms, keys, &code));
        }
    }
    fanout_run(f, text, timeout_ms, ask_reply, &a);
out:
    fanout_destroy(f); /* its sockets, before the context */
    if (ctx)
        zmq_ctx_term(ctx);
    for (int s = 0; s < SHARDMAP_MAX; s++)
        free(copies[s]);
    free(text);
    json_decref(req);
    if (heard)
        memcpy(heard, a.heard, sizeof a.heard);
    return a.got ? 0 : -1;
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

/* The shard for a command on the whole table (reload, import) among n
 * endpoint lists: the first, from shard 0, of which a controller answered
 * (heard[s]) and that the configuration g (NULL: none known) does not
 * leave out at now_ms; shard 0 when there is none. */
int ctlshards_table_pick(const shardgen_t *g, const int *heard, int n, int64_t now_ms)
{
    int fits = g && shardgen_kmax(g) <= n;
    for (int s = 0; s < n && s < SHARDMAP_MAX; s++)
        if (heard[s] && !(fits && shardgen_out(g, s, now_ms)))
            return s;
    return 0;
}

/* The shard for reload and import now: every shard asked at once (ask()),
 * then ctlshards_table_pick() at the wall clock now. */
int ctlshards_table(const char **eps, int n, int timeout_ms, const curvekey_t *keys,
                    ctlshards_open_fn open_fn)
{
    shardgen_t g;
    int heard[SHARDMAP_MAX] = {0};
    int known = ask(eps, n, timeout_ms, keys, open_fn, &g, heard) == 0;
    return ctlshards_table_pick(known ? &g : NULL, heard, n, ctlshards_wall_ms());
}
