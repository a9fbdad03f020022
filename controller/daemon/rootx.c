/* rootx.c - bqos-controller's root exchange between controller shards: needs to the root, the root step (shardroot), slices back, held for their lease (rootx.h). */
#include "controller/daemon/rootx.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "common/hostport.h"
#include "common/log.h"
#include "common/names.h"
#include "common/shardmap.h"
#include "common/strmap.h"
#include "controller/shardroot.h"

/* The largest rate taken (IOs per second): far beyond any node. */
#define RATE_MAX 1e12
#define NEED_FIELDS 6 /* cap, cons, must, room, demand, placed */

/* A standby of a shard that asked for its shard's slices (so that it holds
 * them when it takes over). */
#define ROOTX_STANDBYS 4
typedef struct {
    unsigned char id[256];
    size_t idl;
    double at;               /* when it last asked (0: free) */
} rlistener_t;

/* The root's view of one shard: its last needs. */
typedef struct {
    rlistener_t standby[ROOTX_STANDBYS];
    uint64_t epoch;          /* highest seen (needs below it are dropped) */
    double at;               /* when its last needs arrived (0: never) */
    unsigned char id[256];   /* the DEALER it came from (routing id) */
    size_t idl;
    double target;
    double *need;            /* [cap_nodes][NEED_FIELDS] */
    unsigned char *has;      /* [cap_nodes]: named in its last needs */
} rshard_t;

/* A slice held by this shard. */
typedef struct {
    double est, cons, at;
} slice_t;

struct rootx {
    rootx_config_t cfg;
    char *listen, *connect, *split;
    curvekey_t own, root;
    int curve;
    void *router;
    void *dealer[ROOTX_ENDPOINTS];
    int nd;
    /* shard side */
    strmap_t *slmap;         /* node name -> sl index */
    slice_t *sl;
    int nsl, capsl;
    /* root side */
    strmap_t *nodes;         /* node name -> root node index */
    char **names;            /* [nn] owned copies */
    int nn, capn;
    rshard_t *sh;            /* [capk] */
    int k, capk;             /* the K in force (rootx_set_k()), sh's size */
    shardroot_t *sr;
    int64_t *scratch;
    rootx_stats_t st;
};

static void *open_sock(rootx_t *x, int type, const char *ep, int bind)
{
    void *s = zmq_socket(x->cfg.zctx, type);
    if (!s)
        return NULL;
    int linger = 0, hwm = 64, v6 = hostport_zmq_ipv6(ep), one = 1;
    int64_t maxmsg = ROOTX_MSG_MAX;
    zmq_setsockopt(s, ZMQ_IPV6, &v6, sizeof v6);
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(s, ZMQ_SNDHWM, &hwm, sizeof hwm);
    zmq_setsockopt(s, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
    if (type == ZMQ_ROUTER)
        zmq_setsockopt(s, ZMQ_ROUTER_HANDOVER, &one, sizeof one);
    else
        zmq_setsockopt(s, ZMQ_IMMEDIATE, &one, sizeof one);
    int rc = 0;
    if (x->curve)
        rc = bind ? curvekey_set_server(s, &x->own, "admin")
                  : curvekey_set_client(s, &x->own, &x->root);
    if (rc == 0)
        rc = bind ? zmq_bind(s, ep) : zmq_connect(s, ep);
    if (rc < 0) {
        log_error("root exchange: cannot %s %s: %s", bind ? "bind" : "connect to", ep,
                  zmq_strerror(zmq_errno()));
        zmq_close(s);
        return NULL;
    }
    return s;
}

rootx_t *rootx_new(const rootx_config_t *cfg, int *err)
{
    int rc = -EINVAL;
    rootx_t *x = NULL;
    if (!cfg || cfg->shards < 1 || cfg->shard < 0 || cfg->shard >= cfg->shards || !cfg->zctx ||
        !(cfg->period_s > 0) || cfg->intervals < 1 || (!cfg->listen && !cfg->connect))
        goto out;
    rc = -ENOMEM;
    if (!(x = calloc(1, sizeof *x)))
        goto out;
    x->cfg = *cfg;
    if ((cfg->listen && !(x->listen = strdup(cfg->listen))) ||
        (cfg->connect && (!(x->connect = strdup(cfg->connect)) || !(x->split = strdup(cfg->connect)))) ||
        !(x->slmap = strmap_new()) || !(x->nodes = strmap_new()) ||
        !(x->sh = calloc((size_t)cfg->shards, sizeof *x->sh)) || !(x->sr = shardroot_new()))
        goto out;
    x->k = x->capk = cfg->shards;
    x->cfg.listen = x->listen;
    x->cfg.connect = x->connect;
    if (cfg->own) {
        x->own = *cfg->own;
        x->root = cfg->root ? *cfg->root : *cfg->own;
        x->curve = 1;
    }
    rc = -EINVAL;
    if (x->listen && !(x->router = open_sock(x, ZMQ_ROUTER, x->listen, 1)))
        goto out;
    for (char *p = x->split; p;) {
        char *comma = strchr(p, ',');
        if (comma)
            *comma = '\0';
        if (!*p || x->nd == ROOTX_ENDPOINTS || !(x->dealer[x->nd] = open_sock(x, ZMQ_DEALER, p, 0)))
            goto out;
        x->nd++;
        p = comma ? comma + 1 : NULL;
    }
    return x;
out:
    if (err)
        *err = rc;
    rootx_destroy(&x);
    return NULL;
}

void rootx_destroy(rootx_t **xp)
{
    if (!xp || !*xp)
        return;
    rootx_t *x = *xp;
    if (x->router)
        zmq_close(x->router);
    for (int i = 0; i < x->nd; i++)
        zmq_close(x->dealer[i]);
    for (int i = 0; i < x->nn; i++)
        free(x->names[i]);
    for (int s = 0; x->sh && s < x->capk; s++) {
        free(x->sh[s].need);
        free(x->sh[s].has);
    }
    free(x->sh);
    free(x->names);
    free(x->sl);
    free(x->scratch);
    strmap_destroy(&x->slmap);
    strmap_destroy(&x->nodes);
    shardroot_destroy(&x->sr);
    explicit_bzero(&x->own, sizeof x->own);
    free(x->listen);
    free(x->connect);
    free(x->split);
    free(x);
    *xp = NULL;
}

int rootx_sockets(const rootx_t *x, void **socks, int max)
{
    int n = 0;
    if (x->router && n < max)
        socks[n++] = x->router;
    for (int i = 0; i < x->nd && n < max; i++)
        socks[n++] = x->dealer[i];
    return n;
}

void rootx_stats(const rootx_t *x, rootx_stats_t *out)
{
    *out = x->st;
}

void rootx_view(const rootx_t *x, double now, rootx_view_t *out)
{
    memset(out, 0, sizeof *out);
    out->root = x->router != NULL;
    out->shards = x->k;
    for (int i = 0; i < x->nsl; i++) {
        if (now - x->sl[i].at > ROOTX_LEASE_PERIODS * x->cfg.period_s)
            out->lapsed++;
        else
            out->live++;
    }
    const double fresh = 2 * x->cfg.period_s / x->cfg.intervals;
    for (int s = 0; s < x->k && s < 256; s++) {
        const rshard_t *sh = &x->sh[s];
        out->fresh[s] = !x->router || !sh->at ? -1 : now - sh->at <= fresh;
        out->age_s[s] = sh->at ? now - sh->at : 0;
    }
}

/* ---- parsing ---- */

static int rate_ok(const json_t *v, double *out)
{
    if (!json_is_number(v))
        return 0;
    double d = json_number_value(v);
    if (!isfinite(d) || d < 0 || d > RATE_MAX)
        return 0;
    *out = d;
    return 1;
}

/* Checks record r ([NAME, n numbers]) into *name and vals[0..n). */
static int record_ok(const json_t *r, size_t n, const char **name, double *vals)
{
    if (!json_is_array(r) || json_array_size(r) != n + 1)
        return 0;
    const json_t *nm = json_array_get(r, 0);
    if (!json_is_string(nm) || names_check(json_string_value(nm), json_string_length(nm)))
        return 0;
    *name = json_string_value(nm);
    for (size_t i = 0; i < n; i++)
        if (!rate_ok(json_array_get(r, i + 1), &vals[i]))
            return 0;
    return 1;
}

/* The root node index of `name`, added if new (bounded).  -1: full. */
static int root_node(rootx_t *x, const char *name)
{
    int v;
    if (strmap_find(x->nodes, name, strlen(name), &v) == 0)
        return v;
    if (x->nn >= ROOTX_NODES)
        return -1;
    if (x->nn == x->capn) {
        int cap = x->capn ? 2 * x->capn : 64;
        char **nm = realloc(x->names, (size_t)cap * sizeof *nm);
        if (!nm)
            return -1;
        x->names = nm;
        for (int s = 0; s < x->capk; s++) {
            double *d = realloc(x->sh[s].need, (size_t)cap * NEED_FIELDS * sizeof *d);
            if (d)
                x->sh[s].need = d;
            unsigned char *h = d ? realloc(x->sh[s].has, (size_t)cap) : NULL;
            if (!h)
                return -1;
            memset(h + x->capn, 0, (size_t)(cap - x->capn));
            x->sh[s].has = h;
        }
        x->capn = cap;
    }
    if (!(x->names[x->nn] = strdup(name)) || strmap_insert(x->nodes, name, strlen(name), x->nn) < 0) {
        free(x->names[x->nn]);
        return -1;
    }
    return x->nn++;
}

/* The root takes shard needs `j` from routing id `id`. */
static void take_needs(rootx_t *x, const json_t *j, const unsigned char *id, size_t idl, double now)
{
    json_int_t s = json_integer_value(json_object_get(j, "shard"));
    json_int_t k = json_integer_value(json_object_get(j, "k"));
    json_int_t e = json_integer_value(json_object_get(j, "epoch"));
    const json_t *nodes = json_object_get(j, "nodes");
    double target, v[NEED_FIELDS];
    const char *name;
    if (k != x->k || s < 0 || s >= k || e < 0 || idl > sizeof x->sh[0].id ||
        !rate_ok(json_object_get(j, "target"), &target) || !json_is_array(nodes) ||
        json_array_size(nodes) > ROOTX_NODES) {
        x->st.dropped++;
        return;
    }
    rshard_t *sh = &x->sh[s];
    if (json_is_true(json_object_get(j, "standby"))) { /* slices, please; no needs */
        rlistener_t *slot = NULL;
        for (int i = 0; i < ROOTX_STANDBYS; i++) {
            rlistener_t *l = &sh->standby[i];
            if (l->idl == idl && memcmp(l->id, id, idl) == 0) {
                slot = l;
                break;
            }
            if (!slot || l->at < slot->at) /* a free or the stalest slot */
                slot = l;
        }
        memcpy(slot->id, id, idl);
        slot->idl = idl;
        slot->at = now;
        return;
    }
    if ((uint64_t)e < sh->epoch) { /* a deposed leader's */
        x->st.dropped++;
        return;
    }
    for (size_t i = 0; i < json_array_size(nodes); i++)
        if (!record_ok(json_array_get(nodes, i), NEED_FIELDS, &name, v)) {
            x->st.dropped++;
            return;
        }
    sh->epoch = (uint64_t)e;
    sh->at = now;
    sh->target = target;
    memcpy(sh->id, id, idl);
    sh->idl = idl;
    if (sh->has)
        memset(sh->has, 0, (size_t)x->capn);
    for (size_t i = 0; i < json_array_size(nodes); i++) {
        record_ok(json_array_get(nodes, i), NEED_FIELDS, &name, v);
        int n = root_node(x, name);
        if (n < 0)
            continue; /* the root's node table is full: this node gets nothing here */
        memcpy(&sh->need[(size_t)n * NEED_FIELDS], v, sizeof v);
        sh->has[n] = 1;
    }
    x->st.needs_taken++;
}

/* A shard takes slices `j`. */
static void take_slices(rootx_t *x, const json_t *j, double now)
{
    json_int_t s = json_integer_value(json_object_get(j, "shard"));
    json_int_t e = json_integer_value(json_object_get(j, "epoch"));
    const json_t *nodes = json_object_get(j, "nodes");
    double v[2];
    const char *name;
    if (s != x->cfg.shard || e < 0 || (uint64_t)e < x->st.root_epoch || !json_is_array(nodes) ||
        json_array_size(nodes) > ROOTX_NODES) {
        x->st.dropped++;
        return;
    }
    for (size_t i = 0; i < json_array_size(nodes); i++)
        if (!record_ok(json_array_get(nodes, i), 2, &name, v) || v[1] > v[0]) {
            x->st.dropped++;
            return;
        }
    x->st.root_epoch = (uint64_t)e;
    for (size_t i = 0; i < json_array_size(nodes); i++) {
        record_ok(json_array_get(nodes, i), 2, &name, v);
        int k;
        if (strmap_find(x->slmap, name, strlen(name), &k) < 0) {
            if (x->nsl >= ROOTX_NODES)
                continue;
            if (x->nsl == x->capsl) {
                int cap = x->capsl ? 2 * x->capsl : 64;
                slice_t *p = realloc(x->sl, (size_t)cap * sizeof *p);
                if (!p)
                    continue;
                x->sl = p;
                x->capsl = cap;
            }
            if (strmap_insert(x->slmap, name, strlen(name), x->nsl) < 0)
                continue;
            k = x->nsl++;
        }
        x->sl[k] = (slice_t){.est = v[0], .cons = v[1], .at = now};
    }
    x->st.slices_taken++;
}

/* Receives one message from `sock` (ROUTER: with its routing id).  Returns
 * 1 if one was handled or dropped, 0 if none waits. */
static int recv_one(rootx_t *x, void *sock, int router, double now)
{
    unsigned char id[256];
    size_t idl = 0;
    zmq_msg_t m;
    if (router) {
        int n = zmq_recv(sock, id, sizeof id, ZMQ_DONTWAIT);
        if (n < 0)
            return 0;
        idl = (size_t)n > sizeof id ? sizeof id : (size_t)n;
    }
    zmq_msg_init(&m);
    if (zmq_msg_recv(&m, sock, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&m);
        return router; /* a lone routing id: dropped */
    }
    int more = zmq_msg_more(&m);
    const char *user = x->curve && router ? zmq_msg_gets(&m, "User-Id") : NULL;
    json_t *j = more ? NULL : json_loadb(zmq_msg_data(&m), zmq_msg_size(&m), 0, NULL);
    while (more) { /* extra frames: the message is refused whole */
        zmq_msg_close(&m);
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, sock, ZMQ_DONTWAIT) < 0)
            break;
        more = zmq_msg_more(&m);
    }
    zmq_msg_close(&m);
    const char *t = json_string_value(json_object_get(j, "t"));
    if (!j || !t || (x->curve && router && (!user || strncmp(user, "admin ", 6) != 0)))
        x->st.dropped++;
    else if (router && strcmp(t, "needs") == 0)
        take_needs(x, j, id, idl, now);
    else if (!router && strcmp(t, "slices") == 0)
        take_slices(x, j, now);
    else
        x->st.dropped++;
    json_decref(j);
    return 1;
}

void rootx_drain(rootx_t *x, double now)
{
    int budget = 1000; /* a flood waits for the next poll */
    if (x->router)
        while (budget-- > 0 && recv_one(x, x->router, 1, now))
            ;
    for (int i = 0; i < x->nd; i++)
        while (budget-- > 0 && recv_one(x, x->dealer[i], 0, now))
            ;
}

/* ---- sending ---- */

/* Sends text (len bytes) on sock, after routing id `id` if idl > 0. */
static int send_text(void *sock, const unsigned char *id, size_t idl, const char *text)
{
    if (idl && zmq_send(sock, id, idl, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0)
        return -zmq_errno();
    return zmq_send(sock, text, strlen(text), ZMQ_DONTWAIT) < 0 ? -zmq_errno() : 0;
}

int rootx_send_needs(rootx_t *x, const ctrl_t *c, double left, uint64_t epoch)
{
    int nn = ctrl_nnodes(c), rc = -ENOMEM;
    if (!x->nd)
        return -EAGAIN;
    int64_t *a = calloc((size_t)(nn > 0 ? nn : 1) * 4, sizeof *a);
    json_t *nodes = json_array();
    json_t *j = NULL;
    char *text = NULL;
    /* After a period's last round the root's next step is the new period's
     * first: every reservation whole again (ctrl_shard_needs_next()). */
    const int last = x->cfg.intervals > 0 && left <= 1.0 / x->cfg.intervals + 1e-9;
    int64_t target = 0;
    if (!a || !nodes ||
        (last ? ctrl_shard_needs_next(c, left, a, a + nn, a + 2 * nn, a + 3 * nn, &target)
              : ctrl_shard_needs(c, a, a + nn, a + 2 * nn, a + 3 * nn)) < 0)
        goto out;
    if (!last)
        target = ctrl_r_target(c);
    const double dt = (left > 0 && left <= 1 ? left : 1) * x->cfg.period_s;
    for (int n = 0; n < nn && n < ROOTX_NODES; n++) {
        ctrl_node_info_t ni;
        if (ctrl_node_info(c, n, &ni) < 0 || !ni.name || !ni.up)
            continue;
        json_array_append_new(nodes, json_pack("[s,f,f,f,f,f,f]", ni.name, ni.capacity,
                                               ni.conservative, a[nn + n] / dt, a[2 * nn + n] / dt,
                                               a[3 * nn + n] / dt, a[n] / dt));
    }
    j = json_pack("{s:s,s:i,s:i,s:I,s:f,s:O}", "t", "needs", "shard", x->cfg.shard, "k",
                  x->k, "epoch", (json_int_t)epoch, "target", target / dt,
                  "nodes", nodes);
    if (!j || !(text = json_dumps(j, JSON_COMPACT)))
        goto out;
    rc = -EAGAIN;
    for (int i = 0; i < x->nd; i++)
        if (send_text(x->dealer[i], NULL, 0, text) == 0)
            rc = 0;
    if (rc == 0)
        x->st.needs_sent++;
out:
    free(text);
    json_decref(j);
    json_decref(nodes);
    free(a);
    return rc;
}

int rootx_send_standby(rootx_t *x)
{
    char text[128];
    snprintf(text, sizeof text, "{\"t\":\"needs\",\"shard\":%d,\"k\":%d,\"epoch\":0,"
             "\"standby\":true,\"target\":0,\"nodes\":[]}", x->cfg.shard, x->k);
    int rc = -EAGAIN;
    for (int i = 0; i < x->nd; i++)
        if (send_text(x->dealer[i], NULL, 0, text) == 0)
            rc = 0;
    return rc;
}

int rootx_step(rootx_t *x, uint64_t epoch, double now)
{
    if (!x->router)
        return 0;
    const int k = x->k, nn = x->nn;
    const double fresh = 2 * x->cfg.period_s / x->cfg.intervals;
    int rc = shardroot_reset(x->sr, k, nn > 0 ? nn : 1);
    for (int n = 0; rc == 0 && n < nn; n++) {
        double cap = -1, cons = -1;
        for (int s = 0; s < k; s++) { /* the smallest of the shards' estimates */
            const rshard_t *sh = &x->sh[s];
            if (!sh->at || now - sh->at > fresh || !sh->has[n])
                continue;
            const double *v = &sh->need[(size_t)n * NEED_FIELDS];
            if (cap < 0 || v[0] < cap)
                cap = v[0];
            if (cons < 0 || v[1] < cons)
                cons = v[1];
        }
        rc = shardroot_set_node(x->sr, n, cap > 0 ? (int64_t)cap : 0, cons > 0 ? (int64_t)cons : 0);
    }
    for (int s = 0; rc == 0 && s < k; s++) {
        const rshard_t *sh = &x->sh[s];
        if (!sh->at || now - sh->at > fresh)
            continue; /* no needs: nothing but its even part of the rest */
        rc = shardroot_set_target(x->sr, s, (int64_t)sh->target);
        for (int n = 0; rc == 0 && n < nn; n++) {
            if (!sh->has[n])
                continue;
            const double *v = &sh->need[(size_t)n * NEED_FIELDS];
            rc = shardroot_set_need(x->sr, s, n, (int64_t)v[2], (int64_t)v[3], (int64_t)v[4]);
            if (rc == 0)
                rc = shardroot_set_placed(x->sr, s, n, (int64_t)v[5]);
        }
    }
    if (rc == 0)
        rc = shardroot_solve(x->sr, NULL);
    x->st.steps++;
    if (rc < 0) {
        x->st.step_failed++;
        return rc;
    }
    for (int s = 0; s < k; s++) {
        const rshard_t *sh = &x->sh[s];
        if (!sh->at || now - sh->at > fresh || !sh->idl)
            continue;
        json_t *nodes = json_array();
        for (int n = 0; nodes && n < nn; n++) {
            int64_t est, cons;
            if (!sh->has[n])
                continue;
            shardroot_slice(x->sr, s, n, &est, &cons, NULL);
            json_array_append_new(nodes, json_pack("[s,I,I]", x->names[n], (json_int_t)est,
                                                   (json_int_t)(cons < est ? cons : est)));
        }
        json_t *j = nodes ? json_pack("{s:s,s:I,s:i,s:O}", "t", "slices", "epoch",
                                      (json_int_t)epoch, "shard", s, "nodes", nodes)
                          : NULL;
        char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
        if (text && send_text(x->router, sh->id, sh->idl, text) == 0)
            x->st.slices_sent++;
        for (int i = 0; text && i < ROOTX_STANDBYS; i++) {
            const rlistener_t *l = &sh->standby[i];
            if (l->at > 0 && now - l->at <= fresh && send_text(x->router, l->id, l->idl, text) == 0)
                x->st.slices_sent++;
        }
        free(text);
        json_decref(j);
        json_decref(nodes);
    }
    return 0;
}

int rootx_slice(const rootx_t *x, const char *name, double now, double *est, double *cons)
{
    int k;
    if (!name || strmap_find(x->slmap, name, strlen(name), &k) < 0)
        return 0;
    const slice_t *s = &x->sl[k];
    *est = s->est;
    *cons = s->cons;
    return now - s->at > ROOTX_LEASE_PERIODS * x->cfg.period_s ? -1 : 1;
}

int rootx_set_k(rootx_t *x, int k)
{
    if (k < 1 || k > SHARDMAP_MAX)
        return -EINVAL;
    if (k > x->capk) {
        rshard_t *sh = realloc(x->sh, (size_t)k * sizeof *sh);
        if (!sh)
            return -ENOMEM;
        x->sh = sh;
        memset(sh + x->capk, 0, (size_t)(k - x->capk) * sizeof *sh);
        for (int s = x->capk; s < k; s++) { /* arrays as the others' (capn nodes) */
            if (x->capn && (!(sh[s].need = calloc((size_t)x->capn * NEED_FIELDS, sizeof(double))) ||
                            !(sh[s].has = calloc((size_t)x->capn, 1)))) {
                free(sh[s].need);
                sh[s].need = NULL;
                x->capk = s; /* the ones made so far are kept */
                return -ENOMEM;
            }
        }
        x->capk = k;
    }
    x->k = k;
    return 0;
}
