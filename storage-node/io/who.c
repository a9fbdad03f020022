/* who.c - the identities active in each bucket of a node: entries per (bucket, identity, address), a per-connection cache, a tick that ages them and sends the set when it changed (who.h). */
#include "storage-node/io/who.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "common/log.h"
#include "common/mono.h"

#define NHEADS (2 * WHO_MAX)    /* a power of two: at most WHO_MAX buckets have entries */
#define SWEEP_S 10.0            /* idle entries are dropped this often */
#define ADDR_LEN 48

/* One identity seen in one bucket. */
typedef struct {
    int b;                  /* bucket; -1: free */
    int next;               /* the bucket's next entry, -1: none */
    uint64_t key;           /* identity and address, hashed (never 0) */
    uint64_t n;             /* requests */
    double first, last;     /* mono seconds (tick resolution) */
    char id[WHO_ID_LEN];
    char addr[ADDR_LEN];
} ent_t;

/* A bucket with entries: its chain and the requests of identities past
 * WHO_PER_BUCKET. */
typedef struct {
    int b;                  /* -1: empty slot */
    int head;
    int count;
    uint64_t other;
} head_t;

/* Loop thread's. */
struct who {
    struct event_base *base;
    struct event *tick;     /* persistent, WHO_TICK_S; armed at the first request */
    who_name_fn name;
    void *name_arg;
    who_sink_fn sink;
    void *sink_arg;
    ent_t *ent;             /* WHO_MAX; NULL before the first request */
    int *freel;             /* free entries' indexes, nfree of them */
    int nfree;
    head_t *heads, *spare;  /* NHEADS each: the index by bucket, and the sweep's */
    uint32_t gen;           /* moves every tick: the connections' caches go stale */
    double now;             /* the tick's time */
    double last_sweep, last_send;
    int changed;            /* the set of entries changed since the last send */
    uint64_t dropped, sent;
    char *text;
    size_t cap;
};

static uint64_t mix(uint64_t h, const char *s)
{
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ULL;
    }
    return h;
}

/* c's identity and address, as shown (who.h). */
static void ident(const conns_conn_t *c, char *id, size_t idn, char *addr, size_t an)
{
    const conn_identity_t *i = conns_identity(c);
    if (i->user)
        snprintf(id, idn, "user:%s", i->user);
    else if (i->cert_name)
        snprintf(id, idn, "cert:%s", i->cert_name);
    else if (i->psk_id)
        snprintf(id, idn, "psk:%s", i->psk_id);
    else
        id[0] = '\0';
    rules_subject_t s;
    conns_subject(c, &s);
    if (!(s.family && inet_ntop(s.family == 4 ? AF_INET : AF_INET6, s.addr, addr, (socklen_t)an)))
        snprintf(addr, an, "%s", s.family ? "?" : "unix");
}

static uint64_t key_of(const conns_conn_t *c)
{
    char id[WHO_ID_LEN + 8], addr[ADDR_LEN];
    /* the whole name: two identities cut to one shown prefix stay apart */
    const conn_identity_t *i = conns_identity(c);
    ident(c, id, sizeof id, addr, sizeof addr);
    uint64_t h = mix(1469598103934665603ULL, i->user ? i->user : "");
    h = mix(h ^ 1, i->cert_name ? i->cert_name : "");
    h = mix(h ^ 2, i->psk_id ? i->psk_id : "");
    h = mix(h ^ 3, addr);
    return (h ^ (h >> 29)) | 1;
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    who_tick(arg, mono_now());
}

who_t *who_new(struct event_base *base, who_name_fn name, void *arg, int *err)
{
    who_t *w = NULL;
    int rc = 0;
    if (!base || !name) {
        rc = -EINVAL;
        goto out;
    }
    if (!(w = calloc(1, sizeof *w)) || !(w->tick = event_new(base, -1, EV_PERSIST, on_tick, w))) {
        rc = -ENOMEM;
        goto out;
    }
    w->base = base;
    w->name = name;
    w->name_arg = arg;
    w->gen = 1;
out:
    if (rc < 0) {
        who_destroy(&w);
        if (err)
            *err = rc;
    }
    return w;
}

void who_destroy(who_t **wp)
{
    if (!wp || !*wp)
        return;
    who_t *w = *wp;
    if (w->tick)
        event_free(w->tick);
    free(w->ent);
    free(w->freel);
    free(w->heads);
    free(w->spare);
    free(w->text);
    free(w);
    *wp = NULL;
}

void who_set_sink(who_t *w, who_sink_fn fn, void *arg)
{
    w->sink = fn;
    w->sink_arg = arg;
}

static void heads_clear(head_t *h)
{
    for (int i = 0; i < NHEADS; i++)
        h[i] = (head_t){.b = -1, .head = -1};
}

/* The first request: the entries and the index, and the tick. */
static int start(who_t *w)
{
    w->ent = calloc(WHO_MAX, sizeof *w->ent);
    w->freel = calloc(WHO_MAX, sizeof *w->freel);
    w->heads = calloc(NHEADS, sizeof *w->heads);
    w->spare = calloc(NHEADS, sizeof *w->spare);
    if (!w->ent || !w->freel || !w->heads || !w->spare) {
        free(w->ent);
        free(w->freel);
        free(w->heads);
        free(w->spare);
        w->ent = NULL;
        w->freel = NULL;
        w->heads = w->spare = NULL;
        return -ENOMEM;
    }
    for (int i = 0; i < WHO_MAX; i++) {
        w->ent[i].b = -1;
        w->freel[i] = WHO_MAX - 1 - i;
    }
    w->nfree = WHO_MAX;
    heads_clear(w->heads);
    w->now = w->last_sweep = mono_now();
    struct timeval tv = {(time_t)WHO_TICK_S, 0};
    event_add(w->tick, &tv);
    return 0;
}

/* Bucket b's slot in index h: its head, or (make) the empty slot it takes;
 * -1 if absent (and not made). */
static int head_find(head_t *h, int b, int make)
{
    uint32_t i = ((uint32_t)b * 2654435761u) & (NHEADS - 1);
    for (int n = 0; n < NHEADS; n++, i = (i + 1) & (NHEADS - 1)) {
        if (h[i].b == b)
            return (int)i;
        if (h[i].b < 0) {
            if (!make)
                return -1;
            h[i] = (head_t){.b = b, .head = -1};
            return (int)i;
        }
    }
    return -1;
}

/* The slow path of who_seen(): a new tick, another bucket or identity. */
static void note(who_t *w, conns_conn_t *c, int b)
{
    if (!w->ent && start(w) < 0) {
        w->dropped++;
        return;
    }
    if (!c->who_key)
        c->who_key = key_of(c);
    c->who_gen = w->gen;
    c->who_b = b;
    c->who_slot = -1;
    int h = head_find(w->heads, b, 0);
    if (h >= 0)
        for (int e = w->heads[h].head; e >= 0; e = w->ent[e].next)
            if (w->ent[e].key == c->who_key) {
                w->ent[e].last = w->now;
                w->ent[e].n++;
                c->who_slot = e;
                return;
            }
    if ((h < 0 || w->heads[h].count < WHO_PER_BUCKET) && w->nfree > 0) {
        if (h < 0)
            h = head_find(w->heads, b, 1);
        int e = w->freel[--w->nfree];
        ent_t *x = &w->ent[e];
        ident(c, x->id, sizeof x->id, x->addr, sizeof x->addr);
        x->b = b;
        x->key = c->who_key;
        x->n = 1;
        x->first = x->last = w->now;
        x->next = w->heads[h].head;
        w->heads[h].head = e;
        w->heads[h].count++;
        w->changed = 1;
        c->who_slot = e;
        return;
    }
    if (h >= 0) {
        w->heads[h].other++;
        c->who_slot = -2 - h;
        return;
    }
    w->dropped++;
}

void who_seen(who_t *w, conns_conn_t *c, int b)
{
    if (!w)
        return;
    if (c->who_gen == w->gen && c->who_b == b) {
        if (c->who_slot >= 0)
            w->ent[c->who_slot].n++;
        else if (c->who_slot <= -2)
            w->heads[-2 - c->who_slot].other++;
        else
            w->dropped++;
        return;
    }
    note(w, c, b);
}

/* Drops the entries not seen for WHO_IDLE_S and rebuilds the index (a
 * bucket keeps its "other" while it has entries). */
static void sweep(who_t *w)
{
    head_t *old = w->heads, *nu = w->spare;
    heads_clear(nu);
    w->nfree = 0;
    for (int e = WHO_MAX - 1; e >= 0; e--) {
        ent_t *x = &w->ent[e];
        if (x->b >= 0 && w->now - x->last > WHO_IDLE_S) {
            x->b = -1;
            w->changed = 1;
        }
        if (x->b < 0) {
            w->freel[w->nfree++] = e;
            continue;
        }
        int h = head_find(nu, x->b, 1);
        if (nu[h].count == 0) {
            int o = head_find(old, x->b, 0);
            nu[h].other = o >= 0 ? old[o].other : 0;
        }
        x->next = nu[h].head;
        nu[h].head = e;
        nu[h].count++;
    }
    w->heads = nu;
    w->spare = old;
}

void who_tick(who_t *w, double now)
{
    if (!w->ent)
        return;
    w->now = now;
    w->gen++; /* every cache stale: entries and their indexes may move below */
    if (w->gen == 0)
        w->gen = 1;
    if (now - w->last_sweep >= SWEEP_S) {
        sweep(w);
        w->last_sweep = now;
    }
    int nonempty = w->nfree < WHO_MAX;
    if (!w->sink || !(w->changed || (nonempty && now - w->last_send >= WHO_REFRESH_S)))
        return;
    long n = who_format(w, &w->text, &w->cap);
    if (n < 0) {
        log_warn("who: no memory for the identities' message");
        return;
    }
    w->sink(w->sink_arg, w->text, (size_t)n);
    w->changed = 0;
    w->last_send = now;
    w->sent++;
}

/* ---- the text -------------------------------------------------------------- */

typedef struct {
    char **buf;
    size_t *cap;
    size_t len;
    int oom;
} out_t;

static void put(out_t *o, const char *s, size_t n)
{
    if (o->oom)
        return;
    if (o->len + n + 1 > *o->cap) {
        size_t c = *o->cap ? *o->cap : 4096;
        while (c < o->len + n + 1)
            c *= 2;
        char *p = realloc(*o->buf, c);
        if (!p) {
            o->oom = 1;
            return;
        }
        *o->buf = p;
        *o->cap = c;
    }
    memcpy(*o->buf + o->len, s, n);
    o->len += n;
    (*o->buf)[o->len] = '\0';
}

static void putf(out_t *o, const char *fmt, unsigned long long a, double b, double c)
{
    char t[128];
    int n = snprintf(t, sizeof t, fmt, a, b, c);
    put(o, t, (size_t)n);
}

/* A JSON string: '"' and '\\' escaped, bytes outside printable ASCII as
 * \u00XX (the names are printable; other bytes are shown, not lost). */
static void put_str(out_t *o, const char *s)
{
    put(o, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char t[8];
        if (*p == '"' || *p == '\\') {
            t[0] = '\\';
            t[1] = (char)*p;
            put(o, t, 2);
        } else if (*p < 0x20 || *p >= 0x7f) {
            snprintf(t, sizeof t, "\\u%04x", *p);
            put(o, t, 6);
        } else {
            put(o, (const char *)p, 1);
        }
    }
    put(o, "\"", 1);
}

long who_format(who_t *w, char **buf, size_t *cap)
{
    out_t o = {buf, cap, 0, 0};
    double now = mono_now();
    uint64_t cut = 0;
    /* an entry's text is at most ~6 x (250 + WHO_ID_LEN + ADDR_LEN) + 120 */
    const size_t room = WHO_TEXT_MAX - 6 * (250 + WHO_ID_LEN + ADDR_LEN) - 200;
    put(&o, "{\"who\":[", 8);
    int first = 1;
    for (int h = 0; w->heads && h < NHEADS; h++) {
        const char *name = w->heads[h].b >= 0 ? w->name(w->name_arg, w->heads[h].b) : NULL;
        if (!name)
            continue;
        for (int e = w->heads[h].head; e >= 0; e = w->ent[e].next) {
            const ent_t *x = &w->ent[e];
            if (o.len > room) {
                cut += x->n;
                continue;
            }
            put(&o, first ? "{\"bucket\":" : ",{\"bucket\":", first ? 10 : 11);
            first = 0;
            put_str(&o, name);
            put(&o, ",\"id\":", 6);
            put_str(&o, x->id);
            put(&o, ",\"addr\":", 8);
            put_str(&o, x->addr);
            putf(&o, ",\"requests\":%llu,\"first\":%.1f,\"last\":%.1f}", (unsigned long long)x->n,
                 now - x->first, now - x->last);
        }
    }
    put(&o, "],\"other\":[", 11);
    first = 1;
    for (int h = 0; w->heads && h < NHEADS; h++) {
        const char *name = w->heads[h].b >= 0 && w->heads[h].other
                               ? w->name(w->name_arg, w->heads[h].b)
                               : NULL;
        if (!name || o.len > room)
            continue;
        put(&o, first ? "{\"bucket\":" : ",{\"bucket\":", first ? 10 : 11);
        first = 0;
        put_str(&o, name);
        putf(&o, ",\"requests\":%llu}", (unsigned long long)w->heads[h].other, 0, 0);
    }
    putf(&o, "],\"dropped\":%llu}", (unsigned long long)(w->dropped + cut), 0, 0);
    return o.oom ? -ENOMEM : (long)o.len;
}

void who_stats(const who_t *w, who_stats_t *out)
{
    out->entries = w->ent ? WHO_MAX - w->nfree : 0;
    out->dropped = w->dropped;
    out->sent = w->sent;
}
