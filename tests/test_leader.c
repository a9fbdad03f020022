/* test_leader.c - Check suite for controller/daemon/leader (the election state machine, the heartbeat and deposition, driven with fake time and an in-memory store that behaves as etcd's leases, revisions and compare-and-put or -delete) and etcd's base64. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "controller/daemon/etcd.h"
#include "controller/daemon/leader.h"
#include "tests/testlib.h"

/* ---- an in-memory etcd: keys with revisions, leases expiring by fake time */

#define NKEYS 512
#define NLEASES 16
#define NEVENTS 256

/* One change, as etcd's watch replays it. */
typedef struct {
    char key[64];
    char value[256];
    size_t len;
    int64_t create_rev, mod_rev;
    int del;
} fevent_t;

typedef struct {
    char key[64];
    char *value;
    size_t len;
    int64_t create_rev, mod_rev, lease;
} fkey_t;

typedef struct {
    double now;
    int64_t rev;
    fkey_t keys[NKEYS];
    struct { int64_t id; double until; int alive; } leases[NLEASES];
    int nleases;
    int down;          /* every call fails with -EIO */
    int beat_before_delete; /* the next delete_if finds the key written meanwhile */
    double slow;       /* seconds every call takes (fake time moves on) */
    double sched_wait; /* the controllers' wait for a CPU (fake, cumulative) */
    fevent_t ev[NEVENTS]; /* the history since `compacted` */
    int nev;
    int64_t compacted;
    int watches, ranges; /* calls, for the tests */
} fstore_t;

/* Notes a change of key k (after it, or as it is deleted). */
static void f_event(fstore_t *f, const char *key, const char *value, size_t len, int64_t create,
                    int64_t mod, int del)
{
    if (f->nev == NEVENTS) { /* the history is compacted */
        f->nev = 0;
        f->compacted = f->rev;
    }
    fevent_t *e = &f->ev[f->nev++];
    memset(e, 0, sizeof *e);
    snprintf(e->key, sizeof e->key, "%s", key);
    ck_assert_uint_lt(del ? 0 : len, sizeof e->value);
    if (!del)
        memcpy(e->value, value, len);
    e->len = del ? 0 : len;
    e->create_rev = create;
    e->mod_rev = mod;
    e->del = del;
}

/* Every call's start: it takes f->slow; nonzero if etcd is down. */
static int f_call(fstore_t *f)
{
    f->now += f->slow;
    return f->down;
}

static void f_expire(fstore_t *f)
{
    for (int i = 0; i < f->nleases; i++) {
        if (!f->leases[i].alive || f->leases[i].until > f->now)
            continue;
        f->leases[i].alive = 0;
        for (int k = 0; k < NKEYS; k++)
            if (f->keys[k].key[0] && f->keys[k].lease == f->leases[i].id) {
                f->rev++;
                f_event(f, f->keys[k].key, NULL, 0, 0, f->rev, 1);
                free(f->keys[k].value);
                memset(&f->keys[k], 0, sizeof f->keys[k]);
            }
    }
}

static fkey_t *f_find(fstore_t *f, const char *key)
{
    for (int k = 0; k < NKEYS; k++)
        if (f->keys[k].key[0] && strcmp(f->keys[k].key, key) == 0)
            return &f->keys[k];
    return NULL;
}

static int f_grant(void *s, int64_t ttl, int64_t *id, int64_t *granted)
{
    fstore_t *f = s;
    if (f_call(f))
        return -EIO;
    f_expire(f);
    int i = f->nleases++;
    f->leases[i].id = 1000 + i;
    f->leases[i].until = f->now + (double)ttl;
    f->leases[i].alive = 1;
    *id = f->leases[i].id;
    *granted = ttl;
    return 0;
}

static int f_keepalive(void *s, int64_t id, int64_t *ttl)
{
    fstore_t *f = s;
    if (f_call(f))
        return -EIO;
    f_expire(f);
    for (int i = 0; i < f->nleases; i++)
        if (f->leases[i].id == id && f->leases[i].alive) {
            f->leases[i].until = f->now + 1; /* the tests use 1 s leases */
            *ttl = 1;
            return 0;
        }
    return -ENOENT;
}

static int f_revoke(void *s, int64_t id)
{
    fstore_t *f = s;
    for (int i = 0; i < f->nleases; i++)
        if (f->leases[i].id == id)
            f->leases[i].until = f->now;
    f_expire(f);
    return 0;
}

static void f_read(fstore_t *f, const char *key, etcd_kv_t *kv, int keys_only)
{
    memset(kv, 0, sizeof *kv);
    fkey_t *k = f_find(f, key);
    if (!k)
        return;
    kv->found = 1;
    if (!keys_only) {
        kv->value = malloc(k->len + 1);
        memcpy(kv->value, k->value, k->len);
        kv->value[k->len] = '\0';
        kv->len = k->len;
    }
    kv->create_rev = k->create_rev;
    kv->mod_rev = k->mod_rev;
    kv->lease = k->lease;
}

static int f_get2(void *s, const char *k1, etcd_kv_t *v1, const char *k2, etcd_kv_t *v2,
                  int keys_only2, int64_t *hdr)
{
    fstore_t *f = s;
    memset(v1, 0, sizeof *v1);
    memset(v2, 0, sizeof *v2);
    if (f_call(f))
        return -EIO;
    f_expire(f);
    f_read(f, k1, v1, 0);
    f_read(f, k2, v2, keys_only2);
    if (hdr)
        *hdr = f->rev;
    return 0;
}

/* Writes key = value (a new key if absent) at revision f->rev. */
static void f_write(fstore_t *f, const char *key, const char *value, size_t len, int64_t lease)
{
    fkey_t *k = f_find(f, key);
    if (!k) {
        for (int j = 0; j < NKEYS && !k; j++)
            if (!f->keys[j].key[0])
                k = &f->keys[j];
        ck_assert_ptr_nonnull(k);
        ck_assert_uint_lt(strlen(key), sizeof k->key);
        strcpy(k->key, key);
        k->create_rev = f->rev;
    }
    char *v = malloc(len + 1); /* value may be k->value itself */
    memcpy(v, value, len);
    v[len] = '\0';
    free(k->value);
    k->value = v;
    k->len = len;
    k->lease = lease;
    k->mod_rev = f->rev;
    f_event(f, key, k->value, len, k->create_rev, k->mod_rev, 0);
}

/* A new revision of f with `key` set to `value` (no lease). */
static void f_put(fstore_t *f, const char *key, const char *value)
{
    f->rev++;
    f_write(f, key, value, strlen(value), 0);
}

/* Deletes key (if there) at revision f->rev. */
static void f_del(fstore_t *f, const char *key)
{
    fkey_t *k = f_find(f, key);
    if (!k)
        return;
    f_event(f, key, NULL, 0, k->create_rev, f->rev, 1);
    free(k->value);
    memset(k, 0, sizeof *k);
}

/* Nonzero if every compare holds. */
static int f_cmp_ok(fstore_t *f, const etcd_cmp_t *cmp, size_t ncmp)
{
    for (size_t i = 0; i < ncmp; i++) {
        fkey_t *k = f_find(f, cmp[i].key);
        int64_t have = !k ? 0 : cmp[i].mod ? k->mod_rev : k->create_rev;
        if (have != cmp[i].rev)
            return 0;
    }
    return 1;
}

static int f_txn(void *s, const etcd_cmp_t *cmp, size_t ncmp, const etcd_op_t *ops, size_t nops,
                 int64_t *rev)
{
    fstore_t *f = s;
    if (f_call(f))
        return -EIO;
    f_expire(f);
    ck_assert_uint_le(nops, LEADER_TXN_OPS); /* etcd's --max-txn-ops */
    if (!f_cmp_ok(f, cmp, ncmp))
        return 0;
    f->rev++; /* one revision for the whole transaction, as etcd */
    for (size_t i = 0; i < nops; i++) {
        if (ops[i].del)
            f_del(f, ops[i].key);
        else
            f_write(f, ops[i].key, ops[i].value, ops[i].len, ops[i].lease);
    }
    *rev = f->rev;
    return 1;
}

static int key_cmp(const void *a, const void *b)
{
    return strcmp((*(fkey_t *const *)a)->key, (*(fkey_t *const *)b)->key);
}

static int f_range(void *s, const char *key, const char *end, int64_t rev, size_t limit,
                   int keys_only, etcd_kv_t **kvs, size_t *n, int *more, int64_t *hdr)
{
    fstore_t *f = s;
    (void)rev; /* one version of each key here */
    *kvs = NULL;
    *n = 0;
    *more = 0;
    if (f_call(f))
        return -EIO;
    f_expire(f);
    f->ranges++;
    fkey_t *in[NKEYS];
    size_t m = 0;
    for (int k = 0; k < NKEYS; k++)
        if (f->keys[k].key[0] && (end ? strcmp(f->keys[k].key, key) >= 0 &&
                                            strcmp(f->keys[k].key, end) < 0
                                      : strcmp(f->keys[k].key, key) == 0))
            in[m++] = &f->keys[k];
    qsort(in, m, sizeof in[0], key_cmp);
    size_t cnt = m < limit ? m : limit;
    *more = m > limit;
    *kvs = calloc(cnt + 1, sizeof **kvs);
    for (size_t i = 0; i < cnt; i++) {
        f_read(f, in[i]->key, &(*kvs)[i], keys_only);
        (*kvs)[i].key = strdup(in[i]->key);
    }
    *n = cnt;
    *hdr = f->rev;
    return 0;
}

static int f_watch(void *s, const char *key, const char *end, int64_t start, int64_t until,
                   etcd_event_fn fn, void *arg)
{
    fstore_t *f = s;
    if (f_call(f))
        return -EIO;
    f->watches++;
    if (start <= f->compacted)
        return -ESTALE;
    int64_t done = 0;
    for (int i = 0; i < f->nev; i++) {
        fevent_t *e = &f->ev[i];
        if (e->mod_rev < start || strcmp(e->key, key) < 0 || strcmp(e->key, end) >= 0)
            continue;
        if (done && e->mod_rev != done)
            break; /* the answer that held `until` is over */
        etcd_kv_t kv = {.found = 1, .key = e->key, .value = e->del ? NULL : e->value,
                        .len = e->len, .create_rev = e->create_rev, .mod_rev = e->mod_rev};
        if (fn(arg, &kv, e->del))
            return 0;
        if (e->mod_rev >= until)
            done = e->mod_rev;
    }
    return done ? 0 : -ETIMEDOUT;
}

static int f_put_if(void *s, const etcd_cmp_t *cmp, size_t ncmp, const char *key,
                    const char *value, size_t len, int64_t lease, int64_t *rev)
{
    fstore_t *f = s;
    if (f_call(f))
        return -EIO;
    f_expire(f);
    if (lease) { /* etcd refuses a put with a lease that does not exist */
        int alive = 0;
        for (int i = 0; i < f->nleases; i++)
            alive |= f->leases[i].id == lease && f->leases[i].alive;
        if (!alive)
            return -EIO;
    }
    if (!f_cmp_ok(f, cmp, ncmp))
        return 0;
    f->rev++;
    f_write(f, key, value, len, lease);
    *rev = f->rev;
    return 1;
}

static int f_delete_if(void *s, const etcd_cmp_t *cmp, size_t ncmp, const char *key)
{
    fstore_t *f = s;
    if (f_call(f))
        return -EIO;
    f_expire(f);
    fkey_t *k = f_find(f, key);
    if (k && f->beat_before_delete) { /* the leader's heartbeat lands first */
        f->beat_before_delete = 0;
        f->rev++;
        f_write(f, key, k->value, k->len, k->lease);
    }
    if (!f_cmp_ok(f, cmp, ncmp))
        return 0;
    if (k) {
        f->rev++;
        f_del(f, key);
    }
    return 1;
}

static double f_clock(void *s)
{
    return ((fstore_t *)s)->now;
}

static double f_sched_wait(void *s)
{
    return ((fstore_t *)s)->sched_wait;
}

static void f_clear(fstore_t *f)
{
    for (int k = 0; k < NKEYS; k++)
        free(f->keys[k].value);
}

/* ---- controllers under test ---------------------------------------------- */

typedef struct {
    leader_t ld;
    uint64_t role_epoch;
    int roles;
    char applied[32768];
    int64_t applied_rev;
    int applies, changes; /* hooks.apply, hooks.change calls */
    int boot_applied;     /* what is applied becomes what bootstrap offers */
    char changed[64];    /* the last change's bucket name */
    char changed_json[256]; /* and its object ("" removed) */
    const char *boot;
    long version; /* the newest table's "table_version" applied (as admin.c) */
} ctl_t;

/* A test table's "table_version" (0: none). */
static long text_version(const char *text)
{
    const char *v = strstr(text, "\"table_version\":");
    return v ? atol(v + strlen("\"table_version\":")) : 0;
}

static int h_apply(void *arg, const char *text, size_t len, int64_t rev)
{
    ctl_t *c = arg;
    if (text_version(text) < c->version)
        return -ESTALE; /* older than ours: not applied */
    c->version = text_version(text);
    c->ld.table_version = (uint64_t)c->version; /* as admin.c's apply() */
    ck_assert_uint_lt(len, sizeof c->applied);
    memcpy(c->applied, text, len);
    c->applied[len] = '\0';
    c->applied_rev = rev;
    c->applies++;
    if (c->boot_applied) /* admin.c's bootstrap offers the table in force */
        c->boot = c->applied;
    return 0;
}

static int h_change(void *arg, const char *name, const char *json, size_t len, uint64_t version,
                    int64_t rev)
{
    ctl_t *c = arg;
    (void)rev;
    if ((long)version < c->version)
        return -ESTALE;
    c->version = (long)version;
    c->ld.table_version = version;
    c->changes++;
    snprintf(c->changed, sizeof c->changed, "%s", name);
    snprintf(c->changed_json, sizeof c->changed_json, "%.*s", json ? (int)len : 0,
             json ? json : "");
    return 0;
}

static void h_role(void *arg, uint64_t epoch)
{
    ctl_t *c = arg;
    c->role_epoch = epoch;
    c->roles++;
}

static char *h_boot(void *arg, size_t *len)
{
    ctl_t *c = arg;
    if (!c->boot)
        return NULL;
    *len = strlen(c->boot);
    return strdup(c->boot);
}

static leader_store_t f_store(fstore_t *f)
{
    return (leader_store_t){.grant = f_grant, .keepalive = f_keepalive, .revoke = f_revoke,
                            .get2 = f_get2, .put_if = f_put_if, .delete_if = f_delete_if,
                            .txn = f_txn, .range = f_range, .watch = f_watch,
                            .clock = f_clock, .sched_wait = f_sched_wait, .s = f};
}

/* A controller polling every `poll` s; `stale` > 0: with a heartbeat. */
static void ctl_init_hb(ctl_t *c, fstore_t *f, const char *id, double poll, double stale)
{
    memset(c, 0, sizeof *c);
    leader_config_t lc = {.cluster = "t", .id = id, .admin = "tcp://x", .listen = "tcp://y",
                          .ttl_s = 1, .margin_s = 0.25, .poll_s = poll, .stale_s = stale};
    leader_store_t st = f_store(f);
    leader_hooks_t h = {.apply = h_apply, .role = h_role, .bootstrap = h_boot,
                        .change = h_change, .arg = c};
    ck_assert_int_eq(leader_init(&c->ld, &lc, &st, &h), 0);
}

static void ctl_init(ctl_t *c, fstore_t *f, const char *id)
{
    ctl_init_hb(c, f, id, 0.1, 0);
}

/* Polls c at fake time t. */
static void poll_at(ctl_t *c, fstore_t *f, double t)
{
    f->now = t;
    leader_poll(&c->ld, t);
}

/* Two controllers, "a" and "b", on one store. */
typedef struct {
    fstore_t f;
    ctl_t a, b;
} two_t;

/* Starts w with the bootstrap texts boot_a and boot_b (NULL: none): a polls
 * at time 0 and leads, b polls at tb and finds a leading. */
static void two_start(two_t *w, double tb, const char *boot_a, const char *boot_b)
{
    memset(&w->f, 0, sizeof w->f);
    ctl_init(&w->a, &w->f, "a");
    ctl_init(&w->b, &w->f, "b");
    w->a.boot = boot_a;
    w->b.boot = boot_b;
    poll_at(&w->a, &w->f, 0);
    poll_at(&w->b, &w->f, tb);
}

static void two_end(two_t *w)
{
    leader_clear(&w->a.ld);
    leader_clear(&w->b.ld);
    f_clear(&w->f);
}

START_TEST(test_leader_one_leader)
{
    two_t w;
    two_start(&w, 0.01, NULL, NULL);
    ck_assert(leader_may_push(&w.a.ld, 0.02));
    ck_assert(!leader_may_push(&w.b.ld, 0.02));
    ck_assert_uint_gt(w.a.role_epoch, 0);
    ck_assert_uint_eq(w.b.roles, 0);
    ck_assert_str_eq(w.b.ld.leader_id, "a");
    ck_assert_str_eq(w.b.ld.leader_admin, "tcp://x");
    ck_assert_uint_eq(w.b.ld.leader_epoch, w.a.ld.epoch);
    /* steady state: renewals keep it so */
    for (double t = 0.1; t < 3; t += 0.1) {
        poll_at(&w.a, &w.f, t);
        poll_at(&w.b, &w.f, t + 0.01);
    }
    ck_assert(leader_may_push(&w.a.ld, 3));
    ck_assert(!leader_may_push(&w.b.ld, 3));
    ck_assert_uint_eq(w.a.ld.elections, 1);
    ck_assert_uint_eq(w.b.ld.elections, 0);
    two_end(&w);
}
END_TEST

/* The leader dies (no more polls): the standby leads once the lease has
 * expired, with a higher epoch, and not before. */
START_TEST(test_leader_kill_takeover)
{
    two_t w;
    two_start(&w, 0.05, NULL, NULL);
    uint64_t e1 = w.a.ld.epoch;
    poll_at(&w.a, &w.f, 0.2); /* its last renewal (a quarter lease on): lease until 1.2 */
    double t = 0.25;
    for (; t < 1.19; t += 0.1) {
        poll_at(&w.b, &w.f, t);
        ck_assert(!w.b.ld.leading);
    }
    for (; t < 1.4; t += 0.1)
        poll_at(&w.b, &w.f, t);
    ck_assert(w.b.ld.leading);
    ck_assert_uint_gt(w.b.ld.epoch, e1);
    ck_assert_uint_eq(w.b.role_epoch, w.b.ld.epoch);
    ck_assert(leader_may_push(&w.b.ld, t));
    two_end(&w);
}
END_TEST

/* A paused leader: after the pause it may not push, before it polls; its
 * poll then makes it a standby that names the new leader. */
START_TEST(test_leader_pause)
{
    two_t w;
    two_start(&w, 0.05, NULL, NULL);
    ck_assert(leader_may_push(&w.a.ld, 0.5));
    ck_assert(!leader_may_push(&w.a.ld, 0.76)); /* lease until 1.0, margin 0.25 */
    for (double t = 0.1; t < 5; t += 0.1)
        poll_at(&w.b, &w.f, t); /* a is stopped */
    ck_assert(w.b.ld.leading);
    ck_assert(!leader_may_push(&w.a.ld, 5.0)); /* SIGCONT: fenced at once */
    int roles = w.a.roles;
    poll_at(&w.a, &w.f, 5.0);
    ck_assert(!w.a.ld.leading);
    ck_assert_int_eq(w.a.roles, roles + 1);
    ck_assert_uint_eq(w.a.role_epoch, 0);
    ck_assert_str_eq(w.a.ld.leader_id, "b");
    ck_assert_uint_eq(w.a.ld.leader_epoch, w.b.ld.epoch);
    two_end(&w);
}
END_TEST

/* etcd unreachable: the leader stops by its own clock before its lease can
 * have ended at etcd, and polls less often meanwhile. */
START_TEST(test_leader_etcd_down)
{
    fstore_t f = {.now = 0};
    ctl_t a;
    ctl_init(&a, &f, "a");
    poll_at(&a, &f, 0);
    ck_assert(a.ld.leading);
    f.down = 1;
    int polls = 0, standby_polls = 0;
    for (double t = 0.1; t < 2; t += 0.01) {
        uint64_t before = a.ld.polls;
        int leading = a.ld.leading;
        poll_at(&a, &f, t);
        polls += a.ld.polls != before;
        standby_polls += a.ld.polls != before && !leading;
        if (t >= 0.75)
            ck_assert(!leader_may_push(&a.ld, t));
    }
    ck_assert(!a.ld.leading);
    ck_assert_int_ge(polls - standby_polls, 6); /* the leader kept trying */
    ck_assert_int_le(standby_polls, 6);        /* then backed off to a quarter lease */
    f.down = 0;
    for (double t = 2; t < 3.5; t += 0.1)
        poll_at(&a, &f, t);
    ck_assert(a.ld.leading); /* back, with a new lease and epoch */
    leader_clear(&a.ld);
    f_clear(&f);
}
END_TEST

/* The table key: created from the bootstrap once, followed by standbys;
 * writes only by the leader, refused on a stale revision. */
START_TEST(test_leader_table)
{
    two_t w;
    two_start(&w, 0.01, "{\"buckets\":[]}",
              "{\"buckets\":[{\"name\":\"x\",\"reservation\":1}]}");
    ck_assert_str_eq(w.b.applied, "{\"buckets\":[]}"); /* a's import won */
    ck_assert_int_eq(w.a.applied_rev, 0);                  /* a runs it already */
    const char *t2 = "{\"buckets\":[{\"name\":\"y\",\"reservation\":2}]}";
    ck_assert_int_eq(leader_write_buckets(&w.b.ld, t2, strlen(t2), 0.02), -EPERM);
    ck_assert_int_eq(leader_write_buckets(&w.a.ld, t2, strlen(t2), 0.02), 0);
    poll_at(&w.a, &w.f, 0.1);
    ck_assert_int_eq(w.a.applied_rev, 0); /* its own write is not applied again */
    poll_at(&w.b, &w.f, 0.11);
    ck_assert_str_eq(w.b.applied, t2);
    /* a write from an older revision loses */
    w.a.ld.buckets_rev--;
    ck_assert_int_eq(leader_write_buckets(&w.a.ld, "{}", 2, 0.15), -EAGAIN);
    /* a bucket over what etcd takes as one value is refused, not sent
     * (issue 26 case 5: etcd's 429 at every poll cost the lease) */
    w.a.ld.buckets_rev++;
    char *big = malloc(LEADER_TABLE_MAX + 64);
    int n = snprintf(big, 64, "{\"buckets\":[{\"name\":\"z\",\"x\":\"");
    memset(big + n, 'x', LEADER_TABLE_MAX);
    strcpy(big + n + LEADER_TABLE_MAX, "\"}]}");
    int64_t rev = w.f.rev;
    ck_assert_int_eq(leader_write_buckets(&w.a.ld, big, strlen(big), 0.15), -E2BIG);
    ck_assert_int_eq(leader_put_bucket(&w.a.ld, "z", big + 12, strlen(big) - 14, 9, 0.15), -E2BIG);
    ck_assert_int_eq(w.f.rev, rev); /* nothing sent */
    free(big);
    /* not a bucket file: refused */
    ck_assert_int_eq(leader_write_buckets(&w.a.ld, "[1]", 3, 0.15), -EINVAL);
    ck_assert_int_eq(leader_put_bucket(&w.a.ld, "z", "{\"a\":1}],[{", 11, 9, 0.15), -EINVAL);
    ck_assert_int_eq(leader_leads(&w.a.ld, 0.15), 1);
    two_end(&w);
}
END_TEST

/* A clean stop revokes the lease: the standby leads at its next poll. */
START_TEST(test_leader_resign)
{
    two_t w;
    two_start(&w, 0.01, NULL, NULL);
    leader_resign(&w.a.ld);
    ck_assert(!w.a.ld.leading);
    poll_at(&w.b, &w.f, 0.11);
    ck_assert(w.b.ld.leading);
    two_end(&w);
}
END_TEST

/* ---- the heartbeat: takeover within stale_s and two polls ---------------- */

#define HB_POLL 0.05
#define HB_STALE 0.25

/* Two controllers with a heartbeat: a leads, b polls 10 ms after it. */
static void two_start_hb(two_t *w)
{
    memset(&w->f, 0, sizeof w->f);
    ctl_init_hb(&w->a, &w->f, "a", HB_POLL, HB_STALE);
    ctl_init_hb(&w->b, &w->f, "b", HB_POLL, HB_STALE);
    poll_at(&w->a, &w->f, 0);
    poll_at(&w->b, &w->f, 0.01);
}

/* Both poll every HB_POLL from `from` to `to` (a only if a_alive). */
static void run_both(two_t *w, double from, double to, int a_alive)
{
    for (double t = from; t < to - 1e-9; t += HB_POLL) {
        if (a_alive)
            poll_at(&w->a, &w->f, t);
        poll_at(&w->b, &w->f, t + 0.01);
    }
}

/* two_start_hb(), then both poll through the first second: a leads, b
 * stands by.  Returns a's epoch. */
static uint64_t two_hb_a_leading(two_t *w)
{
    two_start_hb(w);
    run_both(w, 0.05, 1.0, 1);
    return w->a.ld.epoch;
}

/* A leader that beats is never deposed, even when its polls come late by
 * up to one poll; the standby names it all along. */
START_TEST(test_leader_heartbeat_steady)
{
    two_t w;
    two_start_hb(&w);
    for (double t = 0.05; t < 3; t += HB_POLL) {
        if ((int)(t * 100 + 0.5) % 40 != 0) /* every 8th poll skipped: a late loop */
            poll_at(&w.a, &w.f, t);
        poll_at(&w.b, &w.f, t + 0.01);
    }
    ck_assert(w.a.ld.leading);
    ck_assert(!w.b.ld.leading);
    ck_assert_uint_eq(w.b.ld.depositions, 0);
    ck_assert_uint_gt(w.a.ld.beats, 40);
    ck_assert(leader_may_push(&w.a.ld, 2.99));
    ck_assert_double_eq_tol(w.b.ld.leader_stale_s, HB_STALE, 1e-9); /* declared by a */
    two_end(&w);
}
END_TEST

/* kill -9: the standby leads within HB_STALE and two polls of the leader's
 * last heartbeat, long before the 1 s lease could expire, and not before
 * HB_STALE; the dead leader's own clock fenced it one poll earlier. */
START_TEST(test_leader_heartbeat_kill)
{
    two_t w;
    uint64_t e1 = two_hb_a_leading(&w);
    double last_beat = 0.95; /* a's last poll */
    ck_assert(leader_may_push(&w.a.ld, last_beat + HB_STALE - HB_POLL - 0.001));
    ck_assert(!leader_may_push(&w.a.ld, last_beat + HB_STALE - HB_POLL + 0.001));
    double t = 1.0, led = 0;
    for (; t < 2 && !led; t += HB_POLL) {
        poll_at(&w.b, &w.f, t + 0.01);
        if (w.b.ld.leading)
            led = t + 0.01;
    }
    ck_assert(led > last_beat + HB_STALE);
    ck_assert(led <= last_beat + HB_STALE + 2 * HB_POLL + 0.011);
    ck_assert_uint_gt(w.b.ld.epoch, e1);
    ck_assert_uint_eq(w.b.ld.depositions, 1);
    ck_assert(leader_may_push(&w.b.ld, led));
    two_end(&w);
}
END_TEST

/* A leader that is late but alive (paused 0.5 s): deposed; it stopped
 * pushing by its own clock before the standby could take over, and its
 * next poll finds its lease revoked: it steps down and names the new one. */
START_TEST(test_leader_heartbeat_late)
{
    two_t w;
    two_hb_a_leading(&w);
    run_both(&w, 1.0, 1.5, 0); /* a paused */
    ck_assert(w.b.ld.leading);
    ck_assert(!leader_may_push(&w.a.ld, 1.5)); /* on waking, before any poll */
    ck_assert(w.a.ld.leading);                 /* it does not know yet */
    poll_at(&w.a, &w.f, 1.5);
    ck_assert(!w.a.ld.leading);
    ck_assert_uint_eq(w.a.role_epoch, 0);
    run_both(&w, 1.55, 2.5, 1);
    ck_assert(!w.a.ld.leading);
    ck_assert(w.b.ld.leading);
    ck_assert_str_eq(w.a.ld.leader_id, "b");
    ck_assert_uint_eq(w.a.ld.leader_epoch, w.b.ld.epoch);
    ck_assert_uint_eq(w.a.ld.depositions, 0); /* b beats: a never deposes it */
    two_end(&w);
}
END_TEST

/* The deposition is a compare-and-delete on the heartbeat seen stale: a
 * heartbeat that lands between the standby's read and its delete (the
 * leader may push on after it) cancels it. */
START_TEST(test_leader_heartbeat_race)
{
    two_t w;
    two_hb_a_leading(&w);
    run_both(&w, 1.0, 1.2, 0); /* a late: its last heartbeat at 0.95 */
    ck_assert(!w.b.ld.leading);
    w.f.beat_before_delete = 1;
    poll_at(&w.b, &w.f, 1.31); /* stale for 0.34 s: b tries */
    ck_assert(!w.b.ld.leading);
    ck_assert_uint_eq(w.b.ld.depositions, 0);
    poll_at(&w.a, &w.f, 1.32); /* a goes on leading */
    ck_assert(w.a.ld.leading);
    run_both(&w, 1.35, 2.5, 1);
    ck_assert(w.a.ld.leading);
    ck_assert(!w.b.ld.leading);
    two_end(&w);
}
END_TEST

/* A leader without a heartbeat (stale 0, or an older bqos: no stale_ms in
 * its key) is replaced only when its lease expires. */
START_TEST(test_leader_heartbeat_none)
{
    two_t w;
    memset(&w.f, 0, sizeof w.f);
    ctl_init_hb(&w.a, &w.f, "a", HB_POLL, 0);
    ctl_init_hb(&w.b, &w.f, "b", HB_POLL, HB_STALE);
    poll_at(&w.a, &w.f, 0);
    run_both(&w, 0.05, 0.55, 1); /* renewals every quarter lease: at 0.25, 0.5 */
    run_both(&w, 0.55, 1.45, 0); /* a dies after 0.5: lease until 1.5 */
    ck_assert(!w.b.ld.leading);
    ck_assert_uint_eq(w.b.ld.depositions, 0);
    run_both(&w, 1.45, 1.75, 0);
    ck_assert(w.b.ld.leading);
    two_end(&w);
}
END_TEST

/* ---- gray failures: a slow etcd (issue 26, case 3) ---------------------- */

#define GR_SLOW 0.1 /* a round trip's budget (main: --etcd-timeout) */
#define GR_HOLD 1.0 /* etcd in time this long before leading (main: the lease) */

/* A controller with a heartbeat and the gray-failure rules on. */
static void ctl_init_gray(ctl_t *c, fstore_t *f, const char *id)
{
    memset(c, 0, sizeof *c);
    leader_config_t lc = {.cluster = "t", .id = id, .admin = "tcp://x", .listen = "tcp://y",
                          .ttl_s = 1, .margin_s = 0.25, .poll_s = HB_POLL, .stale_s = HB_STALE,
                          .slow_s = GR_SLOW, .hold_s = GR_HOLD};
    leader_store_t st = f_store(f);
    leader_hooks_t h = {.apply = h_apply, .role = h_role, .bootstrap = h_boot,
                        .change = h_change, .arg = c};
    ck_assert_int_eq(leader_init(&c->ld, &lc, &st, &h), 0);
}

/* Two gray-aware controllers: a leads through the first second, b stands by. */
static void two_start_gray(two_t *w)
{
    memset(&w->f, 0, sizeof w->f);
    ctl_init_gray(&w->a, &w->f, "a");
    ctl_init_gray(&w->b, &w->f, "b");
    poll_at(&w->a, &w->f, 0);
    poll_at(&w->b, &w->f, 0.01);
    run_both(w, 0.05, 1.0, 1);
    ck_assert(w->a.ld.leading);
    ck_assert(!w->b.ld.leading);
}

/* etcd paused 450 ms of every 700 ms for 5 s (the probe): the
 * leader pauses its pushes at its first late heartbeat (a hiccup, even
 * late by more than the takeover time), steps down at the second, and
 * nobody pushes again
 * while etcd is slow, instead of pushing in every window etcd answers
 * (the swinging tokens); once etcd has answered in time for GR_HOLD one
 * controller leads again, once. */
START_TEST(test_leader_gray_slow_etcd_no_swing)
{
    two_t w;
    two_start_gray(&w);
    int pushed = 0;
    for (double t = 1.0; t < 6.0 - 1e-9; t += HB_POLL) {
        w.f.down = fmod(t - 1.0 + 1e-9, 0.7) < 0.45;
        poll_at(&w.a, &w.f, t);
        poll_at(&w.b, &w.f, t + 0.01);
        if (t >= 1.85 && (leader_may_push(&w.a.ld, t + 0.02) || leader_may_push(&w.b.ld, t + 0.02)))
            pushed++;
    }
    /* the first pause is a hiccup (pushes resume at 1.45, when etcd
     * answers); from the second late heartbeat (fence 1.65 + 0.2), none */
    ck_assert_int_eq(pushed, 0);
    ck_assert(!w.a.ld.leading && !w.b.ld.leading);
    ck_assert_uint_eq(w.a.ld.gray_stepdowns, 1);
    ck_assert_uint_eq(w.a.ld.elections + w.b.ld.elections, 1); /* a's first only */
    w.f.down = 0;
    double led = 0;
    for (double t = 6.0; t < 8.5 - 1e-9 && !led; t += HB_POLL) {
        poll_at(&w.a, &w.f, t);
        poll_at(&w.b, &w.f, t + 0.01);
        if (w.a.ld.leading || w.b.ld.leading)
            led = t;
    }
    /* etcd's last pause began at 5.9: GR_HOLD after it at the earliest,
     * and at most a standby's backoff (a quarter lease) and a poll more */
    ck_assert(led >= 5.9 + GR_HOLD - 1e-6);
    ck_assert(led <= 6.0 + GR_HOLD + 0.25 + HB_POLL + 1e-6);
    ck_assert(!(w.a.ld.leading && w.b.ld.leading));
    ck_assert_uint_eq(w.a.ld.elections + w.b.ld.elections, 2);
    two_end(&w);
}
END_TEST

/* Only the leader's etcd round trips are slow (110 ms a request, each
 * over its 100 ms budget): its heartbeats land late (they do not count),
 * it stops pushing at its fence, steps down when its lease is not renewed
 * in time (no renewal fits in a poll whose heartbeat took the budget) and
 * never pushes again; the standby, whose etcd answers, deposes it and
 * leads: a clean hand-over. */
START_TEST(test_leader_gray_slow_round_trips_step_down)
{
    two_t w;
    two_start_gray(&w);
    uint64_t e1 = w.a.ld.epoch;
    int pushed_after = 0;
    double fence = 0.95 + HB_STALE - HB_POLL; /* a's last heartbeat at 0.95 */
    for (double t = 1.0; t < 3.0 - 1e-9; t += 0.15) {
        w.f.slow = GR_SLOW + 0.01;
        poll_at(&w.a, &w.f, t);
        w.f.slow = 0;
        poll_at(&w.b, &w.f, t + 0.13);
        if (t > fence && leader_may_push(&w.a.ld, t + 0.14))
            pushed_after++;
    }
    ck_assert_int_eq(pushed_after, 0);
    ck_assert(!w.a.ld.leading);
    ck_assert_uint_eq(w.a.ld.gray_stepdowns, 1);
    ck_assert_uint_gt(w.a.ld.slow_polls, 5);
    ck_assert(w.b.ld.leading);
    ck_assert_uint_gt(w.b.ld.epoch, e1);
    ck_assert(leader_may_push(&w.b.ld, 3.0));
    ck_assert_uint_eq(w.b.ld.elections, 1);
    two_end(&w);
}
END_TEST

/* A busy but healthy etcd (issue 26's busy host): every round trip takes
 * 60 ms, within the 100 ms budget, so that a poll of two or three of them
 * is over it.  The heartbeat goes first and each round trip has its own
 * budget: the leader keeps leading and pushing, no election.  (Before, the
 * poll's keepalive and read used the budget up before the heartbeat,
 * every time: the leader stepped down.) */
START_TEST(test_leader_gray_busy_round_trips_in_budget)
{
    two_t w;
    two_start_gray(&w);
    int paused = 0;
    for (double t = 1.0; t < 4.0 - 1e-9; t += 0.15) {
        w.f.slow = 0.06;
        poll_at(&w.a, &w.f, t);
        poll_at(&w.b, &w.f, t + 0.13);
        paused += !leader_may_push(&w.a.ld, t + 0.14);
    }
    w.f.slow = 0;
    ck_assert_int_eq(paused, 0);
    ck_assert(w.a.ld.leading);
    ck_assert(!w.b.ld.leading);
    ck_assert_uint_eq(w.a.ld.gray_stepdowns, 0);
    ck_assert_uint_eq(w.a.ld.slow_polls, 0);
    ck_assert_uint_eq(w.a.ld.elections + w.b.ld.elections, 1);
    ck_assert_uint_eq(w.b.ld.depositions, 0);
    two_end(&w);
}
END_TEST

/* A busy host stalls everyone at once (seen at load 20: the controllers'
 * loops, etcd and the raw nodes all silent 250-600 ms): 400 ms in which
 * neither controller runs, then both poll again, the standby first.  The
 * leader's heartbeat is late (it pauses its pushes, then resumes: one
 * hiccup); the standby does not count the stall as the leader's silence;
 * no election.  (Before: the standby deposed the leader at its first poll
 * after the stall, 400 ms since its last answer, and the leader stepped
 * down, its heartbeat late by the takeover time.) */
START_TEST(test_leader_gray_host_stall_no_election)
{
    two_t w;
    two_start_gray(&w);
    run_both(&w, 1.0, 1.5, 1); /* last polls: a at 1.45, b at 1.46 */
    poll_at(&w.b, &w.f, 1.85); /* the stall ends; b runs first */
    ck_assert_uint_eq(w.b.ld.depositions, 0);
    poll_at(&w.a, &w.f, 1.86);
    ck_assert(w.a.ld.leading);
    ck_assert(leader_may_push(&w.a.ld, 1.87)); /* its heartbeat landed: pushes resume */
    run_both(&w, 1.9, 4.0, 1);
    ck_assert(w.a.ld.leading);
    ck_assert(!w.b.ld.leading);
    ck_assert_uint_eq(w.a.ld.gray_stepdowns, 0);
    ck_assert_uint_eq(w.b.ld.depositions, 0);
    ck_assert_uint_eq(w.a.ld.elections + w.b.ld.elections, 1);
    two_end(&w);
}
END_TEST

/* Two host stalls 0.8 s apart (within the hold time), 400 ms each, in
 * which the leader's thread waited for a CPU (its scheduling wait grows
 * by the stall): each heartbeat is late only by that wait, so neither
 * counts toward the gray rule: pushes pause and resume, no step-down.
 * (Before: the second stepped the leader down.)  An etcd that stalls the
 * same way while we run (the slow-etcd tests) still counts. */
START_TEST(test_leader_gray_own_wait_not_counted)
{
    two_t w;
    two_start_gray(&w);
    run_both(&w, 1.0, 1.5, 1);
    w.f.sched_wait += 0.4;
    poll_at(&w.b, &w.f, 1.85);
    poll_at(&w.a, &w.f, 1.86);
    run_both(&w, 1.9, 2.3, 1);
    w.f.sched_wait += 0.4;
    poll_at(&w.b, &w.f, 2.65);
    poll_at(&w.a, &w.f, 2.66);
    run_both(&w, 2.7, 4.0, 1);
    ck_assert(w.a.ld.leading);
    ck_assert(leader_may_push(&w.a.ld, 3.99));
    ck_assert_uint_eq(w.a.ld.host_lapses, 2);
    ck_assert_uint_eq(w.a.ld.gray_stepdowns, 0);
    ck_assert_uint_eq(w.a.ld.elections + w.b.ld.elections, 1);
    two_end(&w);
}
END_TEST

/* A single failed poll within the leader's budget (its heartbeat lands
 * before its fence) is no gray failure: no step-down, no election. */
START_TEST(test_leader_gray_one_failed_poll_tolerated)
{
    two_t w;
    two_start_gray(&w);
    w.f.down = 1;
    poll_at(&w.a, &w.f, 1.0);
    poll_at(&w.b, &w.f, 1.01);
    w.f.down = 0;
    run_both(&w, 1.05, 3.0, 1);
    ck_assert(w.a.ld.leading);
    ck_assert(leader_may_push(&w.a.ld, 2.99));
    ck_assert_uint_eq(w.a.ld.gray_stepdowns, 0);
    ck_assert_uint_eq(w.a.ld.elections + w.b.ld.elections, 1);
    two_end(&w);
}
END_TEST

/* ---- epochs across an etcd that loses its data (issue 26) ---------------- */

/* etcd restarted with an empty data directory: no keys, no leases, and
 * revisions from 1 again. */
static void f_wipe(fstore_t *f)
{
    f_clear(f);
    memset(f->keys, 0, sizeof f->keys);
    memset(f->leases, 0, sizeof f->leases);
    f->nleases = 0;
    f->rev = 1;
    f->nev = 0;
    f->compacted = 0;
}

/* Both poll every 0.1 s from `from` to `to` (a only if a_alive, b only
 * if b_alive). */
static void run_two(two_t *w, double from, double to, int a_alive, int b_alive)
{
    for (double t = from; t < to - 1e-9; t += 0.1) {
        if (a_alive)
            poll_at(&w->a, &w->f, t);
        if (b_alive)
            poll_at(&w->b, &w->f, t + 0.01);
    }
}

/* etcd loses its data under a leader whose epoch (its key's revision) is
 * 201; the nodes obey 201 and say so.  Whoever wins the empty etcd leads
 * above 201, once: the floor it writes in its key makes the standby name
 * the same epoch, and the next leader of that etcd is higher still
 * without a raise of its own. */
START_TEST(test_leader_wipe_floor)
{
    two_t w;
    memset(&w.f, 0, sizeof w.f);
    w.f.rev = 200;
    ctl_init(&w.a, &w.f, "a");
    ctl_init(&w.b, &w.f, "b");
    run_two(&w, 0, 0.5, 1, 1);
    ck_assert(w.a.ld.leading);
    uint64_t e0 = w.a.ld.epoch;
    ck_assert_uint_eq(e0, 201);
    ck_assert_uint_eq(w.b.ld.leader_epoch, e0);
    leader_note_follows(&w.a.ld, e0); /* the nodes' reports */
    leader_note_follows(&w.b.ld, e0);
    f_wipe(&w.f);
    run_two(&w, 0.5, 1.5, 1, 1);
    ctl_t *l = w.a.ld.leading ? &w.a : &w.b, *s = l == &w.a ? &w.b : &w.a;
    ck_assert(l->ld.leading && !s->ld.leading);
    ck_assert_int_lt(l->ld.lead_rev, 10); /* the new etcd's revision */
    uint64_t e1 = l->ld.epoch;
    ck_assert_uint_gt(e1, e0);
    ck_assert_uint_eq(l->role_epoch, e1); /* what the loop stamps */
    ck_assert_uint_eq(l->ld.raises, 1);
    ck_assert_uint_eq(s->ld.leader_epoch, e1); /* from the floor in its key */
    /* the nodes now obey e1 and say so: no further raise */
    leader_note_follows(&l->ld, e1);
    leader_note_follows(&s->ld, e1);
    run_two(&w, 1.5, 2.5, 1, 1);
    ck_assert_uint_eq(l->ld.epoch, e1);
    ck_assert_uint_eq(l->ld.raises, 1);
    /* the leader dies: the standby leads above it, the floor inherited */
    int a_alive = s == &w.a, b_alive = s == &w.b;
    run_two(&w, 2.5, 4.5, a_alive, b_alive);
    ck_assert(s->ld.leading);
    ck_assert_uint_gt(s->ld.epoch, e1);
    ck_assert_uint_eq(s->ld.raises, 0);
    ck_assert_uint_eq(s->role_epoch, s->ld.epoch);
    two_end(&w);
}
END_TEST

/* The table in f as a bucket file's text, put together as a reader does
 * (the head's members, then "buckets" in key order); "" if there is no
 * head, "incomplete" under an incomplete head. */
static const char *f_table(fstore_t *f)
{
    static char buf[1024];
    etcd_kv_t *kvs;
    size_t n;
    int more;
    int64_t hdr;
    ck_assert_int_eq(f_range(f, "/bqos/t/b/", "/bqos/t/b0", 0, 100, 0, &kvs, &n, &more, &hdr), 0);
    buf[0] = '\0';
    if (n && strcmp(kvs[0].key, "/bqos/t/b/") == 0) {
        etcd_kv_t *h = &kvs[0];
        if (strstr(h->value, "\"complete\":false")) {
            snprintf(buf, sizeof buf, "incomplete");
        } else {
            size_t o = (size_t)snprintf(buf, sizeof buf, "%.*s%s\"buckets\":[", (int)h->len - 1,
                                        h->value, h->len > 2 ? "," : "");
            for (size_t i = 1; i < n; i++)
                o += (size_t)snprintf(buf + o, sizeof buf - o, "%s%s", i > 1 ? "," : "",
                                      kvs[i].value);
            snprintf(buf + o, sizeof buf - o, "]}");
        }
    }
    etcd_kvs_free(kvs, n);
    f->ranges--; /* not the controllers' */
    return buf;
}

static const char *const TV0 = "{\"buckets\":[]}";
static const char *const TV1 = "{\"table_version\":1,\"buckets\":[{\"name\":\"r\",\"reservation\":1}]}";
static const char *const TV2 = "{\"table_version\":2,\"buckets\":[{\"name\":\"r\",\"reservation\":2}]}";

/* The leader writes table `t` as admin.c does: etcd first, then it is the
 * table in force (and the newest it knows). */
static void write_table(ctl_t *c, const char *t, double now)
{
    ck_assert_int_eq(leader_write_buckets(&c->ld, t, strlen(t), now), 0);
    c->boot = t;
    c->version = text_version(t);
    c->ld.table_version = (uint64_t)c->version;
}

/* Issue 26 case 4: a's acknowledged change while b is cut off, then etcd
 * wiped: a restores it (at warn).  The new etcd counts revisions from 1
 * again, so the table a restores may land at the very revision b applied
 * its older table from: b's lost lease makes it read the table whole, and
 * it follows. */
START_TEST(test_leader_wipe_restores_acked_table)
{
    two_t w;
    memset(&w.f, 0, sizeof w.f);
    w.f.rev = 1; /* as etcd: the first write is revision 2 */
    ctl_init(&w.a, &w.f, "a");
    ctl_init(&w.b, &w.f, "b");
    w.a.boot = w.b.boot = TV0;
    run_two(&w, 0, 0.3, 1, 1);
    ck_assert(w.a.ld.leading);
    ck_assert_str_eq(w.b.applied, TV0);
    int64_t b_rev = w.b.ld.buckets_rev;
    write_table(&w.a, TV1, 0.3); /* b cut off: it never sees it */
    f_wipe(&w.f);
    run_two(&w, 0.4, 1.5, 1, 0);
    ck_assert(w.a.ld.leading);
    ck_assert_str_eq(f_table(&w.f), TV1);
    ck_assert_uint_eq(w.a.ld.restores, 1); /* said at warn */
    fkey_t *k = f_find(&w.f, "/bqos/t/b/");
    ck_assert_int_ne(b_rev, 0);
    /* the new etcd may well count to the revisions b applied TV0 at (here
     * the floor's raise took one more): b must read the table anyway (its
     * version tells) */
    w.b.ld.buckets_rev = k->mod_rev;
    w.b.ld.head_create = k->create_rev;
    run_two(&w, 1.5, 3.0, 1, 1); /* b back */
    ck_assert_str_eq(w.b.applied, TV1);
    ck_assert_str_eq(f_table(&w.f), TV1);
    two_end(&w);
}
END_TEST

/* The newest table's holder (a, version 2) is cut off while etcd is wiped;
 * b, holding version 1, wins the empty etcd and creates the table from it.
 * a back: it refuses the older table and writes its own over it (a
 * transaction on the revision it judged), and b follows. */
START_TEST(test_leader_newer_table_restored_over_older)
{
    two_t w;
    memset(&w.f, 0, sizeof w.f);
    ctl_init(&w.a, &w.f, "a");
    ctl_init(&w.b, &w.f, "b");
    w.a.boot = w.b.boot = TV0;
    run_two(&w, 0, 0.3, 1, 1);
    write_table(&w.a, TV1, 0.3);
    run_two(&w, 0.3, 0.6, 1, 1);
    ck_assert_str_eq(w.b.applied, TV1);
    w.b.boot = TV1;        /* what b runs, and its file */
    write_table(&w.a, TV2, 0.6); /* b cut off */
    f_wipe(&w.f);
    w.f.nleases = 4; /* new lease IDs: none of them is a's old one */
    run_two(&w, 0.7, 2.5, 0, 1); /* a cut off: b meets the empty etcd */
    ck_assert(w.b.ld.leading);
    ck_assert_str_eq(f_table(&w.f), TV1);
    run_two(&w, 2.5, 4.0, 1, 1); /* a back */
    ck_assert_str_eq(f_table(&w.f), TV2);
    ck_assert_uint_eq(w.a.ld.restores, 1);
    ck_assert(!w.a.ld.leading);
    ck_assert_str_eq(w.b.applied, TV2);
    ck_assert_int_eq(w.b.version, 2);
    ck_assert_int_eq(w.a.version, 2); /* a's table stayed version 2 */
    two_end(&w);
}
END_TEST

/* A deep copy of f's keys, leases and revision (an etcd backup). */
static void f_copy(fstore_t *dst, const fstore_t *src)
{
    *dst = *src;
    for (int k = 0; k < NKEYS; k++)
        if (src->keys[k].value) {
            dst->keys[k].value = malloc(src->keys[k].len + 1);
            memcpy(dst->keys[k].value, src->keys[k].value, src->keys[k].len + 1);
        }
}

/* etcd restored from a backup taken while a led: revisions go back to the
 * backup's, the leader key in it is a's (its lease long expired).  b, which
 * led since at a higher epoch that the nodes obey, wins the restored etcd
 * at a lower revision and leads above what the nodes obey. */
START_TEST(test_leader_restored_backup)
{
    two_t w;
    two_start(&w, 0.05, NULL, NULL);
    fstore_t backup;
    f_copy(&backup, &w.f);
    run_two(&w, 0.1, 1.0, 1, 1);
    for (int i = 0; i < 40; i++) /* other writes move the revision */
        ck_assert_int_eq(leader_write_buckets(&w.a.ld, "{}", 2, 1.0), 0);
    run_two(&w, 1.0, 2.5, 0, 1); /* a dies: b leads */
    ck_assert(w.b.ld.leading);
    uint64_t eb = w.b.ld.epoch;
    ck_assert_uint_gt(eb, 40);
    leader_note_follows(&w.b.ld, eb);
    f_clear(&w.f);
    backup.now = w.f.now;
    w.f = backup; /* restored: keys, leases and revision of time 0.05 */
    run_two(&w, 2.5, 4.0, 0, 1);
    ck_assert(w.b.ld.leading);
    ck_assert_int_lt(w.b.ld.lead_rev, 40);
    ck_assert_uint_gt(w.b.ld.epoch, eb);
    ck_assert_uint_eq(w.b.ld.raises, 1);
    ck_assert_uint_eq(w.b.role_epoch, w.b.ld.epoch);
    two_end(&w);
}
END_TEST

/* A leader that won knowing nothing (a fresh process on an emptied etcd)
 * leads at a low epoch; when a node reports a higher one, its next poll
 * raises its floor above it and tells the loop its new epoch, while its
 * heartbeats and table writes go on (they compare its key's revision, not
 * its epoch).  A node that obeys its epoch raises nothing. */
START_TEST(test_leader_floor_raised_while_leading)
{
    fstore_t f = {.now = 0};
    ctl_t a;
    ctl_init_hb(&a, &f, "a", HB_POLL, HB_STALE);
    poll_at(&a, &f, 0);
    ck_assert(a.ld.leading);
    ck_assert_uint_eq(a.ld.epoch, 1);
    int roles = a.roles;
    leader_note_follows(&a.ld, 500);
    poll_at(&a, &f, 0.05);
    ck_assert(a.ld.leading);
    ck_assert_uint_eq(a.ld.epoch, 501);
    ck_assert_uint_eq(a.role_epoch, 501);
    ck_assert_int_eq(a.roles, roles + 1);
    leader_note_follows(&a.ld, 501);
    leader_note_follows(&a.ld, 7); /* lower: kept the highest */
    uint64_t beats = a.ld.beats;
    for (double t = 0.1; t < 1.5; t += HB_POLL)
        poll_at(&a, &f, t);
    ck_assert(a.ld.leading && leader_may_push(&a.ld, 1.5));
    ck_assert_uint_eq(a.ld.epoch, 501);
    ck_assert_uint_eq(a.ld.raises, 1);
    ck_assert_uint_gt(a.ld.beats, beats + 20);
    const char *t2 = "{\"buckets\":[]}";
    ck_assert_int_eq(leader_write_buckets(&a.ld, t2, strlen(t2), 1.5), 0);
    /* absurd reports are ignored, not led above */
    leader_note_follows(&a.ld, LEADER_EPOCH_MAX + 1);
    poll_at(&a, &f, 1.55);
    ck_assert_uint_eq(a.ld.epoch, 501);
    leader_clear(&a.ld);
    f_clear(&f);
}
END_TEST

/* A deposed leader cannot win the nodes back: paused, deposed, it learns
 * (from the nodes' reports) the new leader's epoch; when it wakes it may
 * not push before it polls, and its poll makes it a standby: it never
 * raises its epoch, because a raise needs its key. */
START_TEST(test_leader_deposed_cannot_raise)
{
    two_t w;
    uint64_t ea = two_hb_a_leading(&w);
    run_both(&w, 1.0, 1.5, 0); /* a paused: b deposes it */
    ck_assert(w.b.ld.leading);
    uint64_t eb = w.b.ld.epoch;
    ck_assert_uint_gt(eb, ea);
    leader_note_follows(&w.a.ld, eb); /* reports reached the paused one */
    leader_note_follows(&w.b.ld, eb);
    ck_assert(!leader_may_push(&w.a.ld, 1.5));
    poll_at(&w.a, &w.f, 1.5);
    ck_assert(!w.a.ld.leading);
    ck_assert_uint_eq(w.a.ld.raises, 0);
    run_both(&w, 1.55, 2.5, 1);
    ck_assert(!w.a.ld.leading && w.b.ld.leading);
    ck_assert_uint_eq(w.b.ld.epoch, eb);
    ck_assert_uint_eq(w.a.ld.raises + w.b.ld.raises, 0);
    ck_assert_uint_eq(w.a.ld.leader_epoch, eb);
    two_end(&w);
}
END_TEST


/* ---- one key per bucket (issue 26 case 5) ------------------------------- */

/* A table of `n` buckets "bNNN" (reservation i) at version `v`: a new
 * string. */
static char *many(int n, int v)
{
    size_t cap = (size_t)n * 48 + 64, o = 0;
    char *t = malloc(cap);
    o += (size_t)snprintf(t, cap, "{\"table_version\":%d,\"buckets\":[", v);
    for (int i = 0; i < n; i++)
        o += (size_t)snprintf(t + o, cap - o, "%s{\"name\":\"b%03d\",\"reservation\":%d}",
                              i ? "," : "", i, i);
    snprintf(t + o, cap - o, "]}");
    return t;
}

/* A change is one transaction of its key and the head; the standby
 * replays it by a watch and applies it bucket by bucket (hooks.change),
 * without reading the table whole again; a removal too. */
START_TEST(test_leader_keys_change_followed)
{
    two_t w;
    two_start(&w, 0.01, TV0, TV0);
    poll_at(&w.b, &w.f, 0.1);
    ck_assert_int_eq(w.b.applies, 1); /* the first read is whole */
    int ranges = w.f.ranges;
    int64_t rev = w.f.rev;
    const char *r = "{\"name\":\"r\",\"reservation\":5}";
    ck_assert_int_eq(leader_put_bucket(&w.b.ld, "r", r, strlen(r), 1, 0.1), -EPERM);
    ck_assert_int_eq(leader_put_bucket(&w.a.ld, "r", r, strlen(r), 1, 0.1), 0);
    ck_assert_int_eq(w.f.rev, rev + 1); /* one transaction */
    ck_assert_str_eq(f_table(&w.f), "{\"table_version\":1,\"buckets\":[{\"name\":\"r\",\"reservation\":5}]}");
    poll_at(&w.b, &w.f, 0.2);
    ck_assert_int_eq(w.b.changes, 1);
    ck_assert_str_eq(w.b.changed, "r");
    ck_assert_str_eq(w.b.changed_json, r);
    ck_assert_int_eq(w.b.version, 1);
    ck_assert_int_eq(w.b.applies, 1); /* no whole read */
    ck_assert_int_eq(w.f.ranges, ranges);
    /* two changes between two polls: both replayed, in order */
    const char *q = "{\"name\":\"q\",\"reservation\":1}";
    ck_assert_int_eq(leader_put_bucket(&w.a.ld, "q", q, strlen(q), 2, 0.2), 0);
    ck_assert_int_eq(leader_remove_bucket(&w.a.ld, "r", 3, 0.2), 0);
    poll_at(&w.b, &w.f, 0.31);
    ck_assert_int_eq(w.b.changes, 3);
    ck_assert_str_eq(w.b.changed, "r");
    ck_assert_str_eq(w.b.changed_json, ""); /* removed */
    ck_assert_int_eq(w.b.version, 3);
    ck_assert_int_eq(w.b.applies, 1);
    ck_assert_str_eq(f_table(&w.f), "{\"table_version\":3,\"buckets\":[{\"name\":\"q\",\"reservation\":1}]}");
    /* a write on a head we did not apply loses (no lost update) */
    w.a.ld.buckets_rev--;
    ck_assert_int_eq(leader_put_bucket(&w.a.ld, "q", q, strlen(q), 4, 0.3), -EAGAIN);
    two_end(&w);
}
END_TEST

/* A whole table over etcd's operations per transaction is written in
 * several, the head last; a reader under an incomplete head applies
 * nothing (never half a table), and reads it whole once complete. */
START_TEST(test_leader_keys_whole_in_chunks)
{
    two_t w;
    two_start(&w, 0.01, TV0, TV0);
    poll_at(&w.b, &w.f, 0.1);
    char *t = many(300, 1);
    int64_t rev = w.f.rev;
    ck_assert_int_eq(leader_write_buckets(&w.a.ld, t, strlen(t), 0.1), 0);
    ck_assert_int_ge(w.f.rev - rev, 1 + 3 + 1); /* claim, 300 / 127 chunks, head */
    poll_at(&w.b, &w.f, 0.2);
    ck_assert_str_eq(w.b.applied, t); /* read whole: a whole write in its history */
    /* a claim in progress (the head incomplete, some buckets written) */
    int applies = w.b.applies;
    f_put(&w.f, "/bqos/t/b/", "{\"table_version\":2,\"complete\":false}");
    f_put(&w.f, "/bqos/t/b/b000", "{\"name\":\"b000\",\"reservation\":77}");
    w.a.boot = t; /* a runs t: version 1 is not newer than the claim */
    w.a.version = 1;
    w.a.ld.table_version = 1;
    poll_at(&w.b, &w.f, 0.31);
    poll_at(&w.a, &w.f, 0.31);
    ck_assert_int_eq(w.b.ld.polls, 3); /* it did poll */
    ck_assert_int_eq(w.b.applies, applies);
    ck_assert_int_eq(w.b.changes, 0);
    ck_assert_str_eq(f_table(&w.f), "incomplete");
    /* it completes: read whole */
    f_put(&w.f, "/bqos/t/b/", "{\"table_version\":2}");
    poll_at(&w.b, &w.f, 0.42);
    ck_assert_int_eq(w.b.applies, applies + 1);
    ck_assert_int_eq(w.b.version, 2);
    ck_assert_ptr_nonnull(strstr(w.b.applied, "{\"name\":\"b000\",\"reservation\":77}"));
    free(t);
    two_end(&w);
}
END_TEST

/* A claim that does not move for a lease (its writer died) is taken over
 * by a controller that holds a table; one of an older version at once. */
START_TEST(test_leader_keys_stuck_claim_taken_over)
{
    two_t w;
    two_start(&w, 0.01, TV1, TV1);
    w.a.version = w.b.version = 1;
    w.a.ld.table_version = w.b.ld.table_version = 1;
    poll_at(&w.b, &w.f, 0.1);
    f_put(&w.f, "/bqos/t/b/", "{\"table_version\":1,\"complete\":false}");
    poll_at(&w.a, &w.f, 0.2);
    poll_at(&w.b, &w.f, 0.2);
    ck_assert_str_eq(f_table(&w.f), "incomplete"); /* in progress, for now */
    run_two(&w, 0.3, 1.6, 1, 1);
    ck_assert_str_eq(f_table(&w.f), TV1); /* stuck for a lease: restored */
    /* an older claim: at once */
    f_put(&w.f, "/bqos/t/b/", "{\"complete\":false}");
    poll_at(&w.a, &w.f, 1.7);
    ck_assert_str_eq(f_table(&w.f), TV1);
    two_end(&w);
}
END_TEST

/* An etcd holding the old single table key: every controller applies it,
 * the leader rewrites it as keys and deletes it; nothing is lost. */
START_TEST(test_leader_keys_migration)
{
    two_t w;
    memset(&w.f, 0, sizeof w.f);
    w.f.rev = 1;
    f_put(&w.f, "/bqos/t/buckets", TV2);
    ctl_init(&w.a, &w.f, "a");
    ctl_init(&w.b, &w.f, "b");
    w.a.boot = w.b.boot = TV0;
    w.a.boot_applied = w.b.boot_applied = 1;
    poll_at(&w.a, &w.f, 0);
    ck_assert(w.a.ld.leading);
    ck_assert_str_eq(w.a.applied, TV2);
    ck_assert_ptr_null(f_find(&w.f, "/bqos/t/buckets"));
    ck_assert_str_eq(f_table(&w.f), TV2);
    poll_at(&w.b, &w.f, 0.15);
    ck_assert_str_eq(w.b.applied, TV2);
    two_end(&w);
}
END_TEST

/* A standby away for longer than the history etcd keeps (compacted) reads
 * the table whole instead of replaying it. */
START_TEST(test_leader_keys_compacted_history)
{
    two_t w;
    two_start(&w, 0.01, TV0, TV0);
    poll_at(&w.b, &w.f, 0.1);
    int applies = w.b.applies;
    const char *r = "{\"name\":\"r\",\"reservation\":5}";
    for (int v = 1; v <= NEVENTS; v++)
        ck_assert_int_eq(leader_put_bucket(&w.a.ld, "r", r, strlen(r), (uint64_t)v, 0.1), 0);
    ck_assert_int_gt(w.f.compacted, 0);
    poll_at(&w.b, &w.f, 0.2);
    ck_assert_int_eq(w.b.applies, applies + 1);
    ck_assert_int_eq(w.b.changes, 0);
    ck_assert_int_eq(w.b.version, NEVENTS);
    two_end(&w);
}
END_TEST

/* Controller shards: each shard elects apart under its own key (a leader
 * of shard 0 does not keep shard 1 from leading), a second controller of
 * a shard stands by for that shard only, and the shard's standby takes
 * over when its leader dies while the other shard's leader goes on. */
/* The cluster's K (/bqos/C/shards): the first shard controller creates
 * it, the others agree with it, one with another --shards never leads
 * (nor campaigns), and a key that does not parse stops every one. */
START_TEST(test_leader_shards_k_agree)
{
    fstore_t f = {0};
    ctl_t c[3];
    const char *ids[] = {"s0a", "s1a", "s1x"};
    const int shard[] = {0, 1, 1}, k[] = {2, 2, 3};
    for (int i = 0; i < 3; i++) {
        memset(&c[i], 0, sizeof c[i]);
        leader_config_t lc = {.cluster = "t", .id = ids[i], .admin = "tcp://x",
                              .listen = "tcp://y", .ttl_s = 1, .margin_s = 0.25,
                              .poll_s = 0.1, .shards = k[i], .shard = shard[i]};
        leader_store_t st = f_store(&f);
        leader_hooks_t h = {.apply = h_apply, .role = h_role, .bootstrap = h_boot,
                            .change = h_change, .arg = &c[i]};
        ck_assert_int_eq(leader_init(&c[i].ld, &lc, &st, &h), 0);
    }
    f.now = 0;
    ck_assert_int_eq(leader_poll(&c[0].ld, 0), 0);
    ck_assert(c[0].ld.leading);
    fkey_t *key = f_find(&f, "/bqos/t/shards");
    ck_assert_ptr_nonnull(key);
    ck_assert_str_eq(key->value, "{\"k\":2,\"gen\":1}");
    f.now = 0.01;
    ck_assert_int_eq(leader_poll(&c[1].ld, 0.01), 0);
    ck_assert(c[1].ld.leading && c[1].ld.k_agreed);
    /* shard 1's leader dies; s1x (--shards 3) never takes its place */
    for (double t = 0.1; t < 3; t += 0.1) {
        poll_at(&c[0], &f, t);
        f.now = t + 0.01;
        ck_assert_int_eq(leader_poll(&c[2].ld, t + 0.01), LEADER_EK);
        ck_assert(!c[2].ld.leading);
    }
    ck_assert_int_eq(c[2].ld.k_cluster, 2);
    ck_assert_uint_eq(c[2].ld.elections, 0);
    ck_assert_ptr_null(f_find(&f, "/bqos/t/shard/1/leader"));
    ck_assert_str_eq(f_find(&f, "/bqos/t/shards")->value, "{\"k\":2,\"gen\":1}"); /* unchanged */
    leader_clear(&c[2].ld);

    /* garbage in the key: refused, not taken for a K */
    f_put(&f, "/bqos/t/shards", "{\"k\":\"two\"}");
    memset(&c[2], 0, sizeof c[2]);
    leader_config_t lc = {.cluster = "t", .id = "s1y", .admin = "", .listen = "", .ttl_s = 1,
                          .margin_s = 0.25, .poll_s = 0.1, .shards = 2, .shard = 1};
    leader_store_t st = f_store(&f);
    leader_hooks_t h = {.apply = h_apply, .role = h_role, .bootstrap = h_boot,
                        .change = h_change, .arg = &c[2]};
    ck_assert_int_eq(leader_init(&c[2].ld, &lc, &st, &h), 0);
    f.now = 3.5;
    ck_assert_int_eq(leader_poll(&c[2].ld, 3.5), LEADER_EK);
    ck_assert_int_eq(c[2].ld.k_cluster, -1);
    ck_assert(!c[2].ld.leading);
    for (int i = 0; i < 3; i++)
        leader_clear(&c[i].ld);
    f_clear(&f);
}
END_TEST

/* K changing at run time: shard 0's leader begins a change from 2 to 3
 * shards (etcd holds "next"); a new shard-2 controller (--shards 3), which
 * the steady key refused, is admitted and leads its shard; shard 1's
 * leader learns the change within LEADER_SHARDS_READ_S; a second begin is
 * -EALREADY or -EBUSY, a standby's -EPERM; and once the change has come a
 * controller started with the old --shards still runs (it follows the key). */
START_TEST(test_leader_shards_change)
{
    fstore_t f = {0};
    ctl_t c[4];
    const char *ids[] = {"s0a", "s1a", "s2a", "s0b"};
    const int shard[] = {0, 1, 2, 0}, k[] = {2, 2, 3, 2};
    for (int i = 0; i < 4; i++) {
        memset(&c[i], 0, sizeof c[i]);
        leader_config_t lc = {.cluster = "t", .id = ids[i], .admin = "tcp://x",
                              .listen = "tcp://y", .ttl_s = 1, .margin_s = 0.25,
                              .poll_s = 0.1, .shards = k[i], .shard = shard[i]};
        leader_store_t st = f_store(&f);
        leader_hooks_t h = {.apply = h_apply, .role = h_role, .bootstrap = h_boot,
                            .change = h_change, .arg = &c[i]};
        ck_assert_int_eq(leader_init(&c[i].ld, &lc, &st, &h), 0);
    }
    poll_at(&c[0], &f, 0);
    poll_at(&c[1], &f, 0.01);
    ck_assert(c[0].ld.leading && c[1].ld.leading);
    poll_at(&c[3], &f, 0.02);
    ck_assert(!c[3].ld.leading);
    ck_assert_int_eq(leader_shards_begin(&c[3].ld, 3, 100000, 1000, 2, NULL), -EPERM);
    shardgen_t g;
    ck_assert_int_eq(leader_shards_begin(&c[0].ld, 3, 100300, 1000, 2, &g), 0);
    ck_assert_int_eq(g.next_k, 3);
    ck_assert_int_eq(g.from_ms, 103000);
    ck_assert_str_eq(f_find(&f, "/bqos/t/shards")->value,
                     "{\"k\":2,\"gen\":1,\"next\":{\"k\":3,\"gen\":2,\"from\":103000}}");
    ck_assert_int_eq(leader_shards_begin(&c[0].ld, 3, 100400, 1000, 2, NULL), -EALREADY);
    ck_assert_int_eq(leader_shards_begin(&c[0].ld, 4, 100400, 1000, 2, &g), -EBUSY);
    ck_assert_int_eq(g.next_k, 3);
    /* the new shard's controller is admitted and leads shard 2 */
    f.now = 0.05;
    ck_assert_int_eq(leader_poll(&c[2].ld, 0.05), 0);
    ck_assert(c[2].ld.k_agreed && c[2].ld.leading);
    /* shard 1's leader reads the key again within LEADER_SHARDS_READ_S */
    ck_assert_int_eq(c[1].ld.sg.next_k, 0);
    for (double t = 0.1; t <= 0.11 + LEADER_SHARDS_READ_S; t += 0.1) {
        poll_at(&c[0], &f, t);
        poll_at(&c[1], &f, t + 0.01);
    }
    ck_assert_int_eq(c[1].ld.sg.next_k, 3);
    ck_assert_int_eq(c[1].ld.sg.from_ms, 103000);
    ck_assert(c[1].ld.leading);
    /* the root folds the change into the key once its period is 2 s past */
    ck_assert_int_eq(leader_shards_settle(&c[1].ld, 104000, 2000), 0); /* not past yet */
    ck_assert_int_eq(leader_shards_settle(&c[0].ld, 104999, 2000), 0); /* not yet */
    ck_assert_str_eq(f_find(&f, "/bqos/t/shards")->value,
                     "{\"k\":2,\"gen\":1,\"next\":{\"k\":3,\"gen\":2,\"from\":103000}}");
    ck_assert_int_eq(leader_shards_settle(&c[0].ld, 105000, 2000), 1);
    ck_assert_str_eq(f_find(&f, "/bqos/t/shards")->value, "{\"k\":3,\"gen\":2}");
    ck_assert_int_eq(c[0].ld.sg.k, 3);
    ck_assert_int_eq(leader_shards_settle(&c[0].ld, 106000, 2000), 0); /* nothing left */
    ck_assert_int_eq(leader_shards_settle(&c[3].ld, 106000, 2000), -EPERM); /* a standby */
    /* settled (k = 3, gen 2): a controller started with --shards 2 runs */
    f_put(&f, "/bqos/t/shards", "{\"k\":3,\"gen\":2}");
    leader_clear(&c[3].ld);
    memset(&c[3], 0, sizeof c[3]);
    leader_config_t lc = {.cluster = "t", .id = "s1b", .admin = "", .listen = "", .ttl_s = 1,
                          .margin_s = 0.25, .poll_s = 0.1, .shards = 2, .shard = 1};
    leader_store_t st = f_store(&f);
    leader_hooks_t h = {.apply = h_apply, .role = h_role, .bootstrap = h_boot,
                        .change = h_change, .arg = &c[3]};
    ck_assert_int_eq(leader_init(&c[3].ld, &lc, &st, &h), 0);
    f.now = 1.5;
    ck_assert_int_eq(leader_poll(&c[3].ld, 1.5), 0);
    ck_assert(c[3].ld.k_agreed);
    ck_assert_int_eq(c[3].ld.sg.k, 3);
    for (int i = 0; i < 4; i++)
        leader_clear(&c[i].ld);
    f_clear(&f);
}
END_TEST

/* K shrinking at run time: 2 -> 1 shards.  Before the change's period
 * shard 1's leader leads on; once the key (read again) puts the period in
 * the past, it gives its key up and steps down, and neither it nor shard
 * 1's standby campaigns while the key leaves shard 1 out (settled too);
 * a later change back to 2 shards names it again: it campaigns before
 * that change's period.  Shard 0 is unmoved throughout. */
START_TEST(test_leader_shards_removed)
{
    fstore_t f = {0};
    ctl_t c[3];
    const char *ids[] = {"s0a", "s1a", "s1b"};
    const int shard[] = {0, 1, 1};
    for (int i = 0; i < 3; i++) {
        memset(&c[i], 0, sizeof c[i]);
        leader_config_t lc = {.cluster = "t", .id = ids[i], .admin = "tcp://x",
                              .listen = "tcp://y", .ttl_s = 1, .margin_s = 0.25,
                              .poll_s = 0.1, .shards = 2, .shard = shard[i]};
        leader_store_t st = f_store(&f);
        leader_hooks_t h = {.apply = h_apply, .role = h_role, .bootstrap = h_boot,
                            .change = h_change, .arg = &c[i]};
        ck_assert_int_eq(leader_init(&c[i].ld, &lc, &st, &h), 0);
    }
    double t = 0;
    for (int i = 0; i < 3; i++)
        poll_at(&c[i], &f, t + 0.01 * i);
    ck_assert(c[0].ld.leading && c[1].ld.leading && !c[2].ld.leading);
    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    long long wall = (long long)rt.tv_sec * 1000 + rt.tv_nsec / 1000000;
    char v[160];
    /* the change under way, its period an hour away: shard 1 still leads */
    snprintf(v, sizeof v, "{\"k\":2,\"gen\":1,\"next\":{\"k\":1,\"gen\":2,\"from\":%lld}}",
             wall + 3600000);
    f_put(&f, "/bqos/t/shards", v);
    for (t = 0.1; t < 0.15 + LEADER_SHARDS_READ_S; t += 0.1)
        for (int i = 0; i < 3; i++)
            poll_at(&c[i], &f, t + 0.01 * i);
    ck_assert_int_eq(c[1].ld.sg.next_k, 1);
    ck_assert(c[1].ld.leading && !c[1].ld.sg_out);
    /* its period has come: shard 1's leader steps out, its key goes */
    snprintf(v, sizeof v, "{\"k\":2,\"gen\":1,\"next\":{\"k\":1,\"gen\":2,\"from\":%lld}}",
             wall - 1000);
    f_put(&f, "/bqos/t/shards", v);
    for (; t < 0.25 + 2 * LEADER_SHARDS_READ_S; t += 0.1)
        for (int i = 0; i < 3; i++)
            poll_at(&c[i], &f, t + 0.01 * i);
    ck_assert(!c[1].ld.leading && !c[2].ld.leading);
    ck_assert(c[1].ld.sg_out && c[2].ld.sg_out);
    ck_assert_uint_eq(c[1].ld.sg_outs, 1);
    ck_assert_ptr_null(f_find(&f, "/bqos/t/shard/1/leader"));
    ck_assert(c[0].ld.leading && !c[0].ld.sg_out);
    /* settled, and past the lease's time: still no campaign */
    f_put(&f, "/bqos/t/shards", "{\"k\":1,\"gen\":2}");
    for (; t < 0.35 + 4 * LEADER_SHARDS_READ_S; t += 0.1)
        for (int i = 0; i < 3; i++)
            poll_at(&c[i], &f, t + 0.01 * i);
    ck_assert(!c[1].ld.leading && !c[2].ld.leading);
    ck_assert_ptr_null(f_find(&f, "/bqos/t/shard/1/leader"));
    ck_assert_uint_eq(c[0].ld.elections + c[1].ld.elections + c[2].ld.elections, 2);
    /* back to 2 shards, its period ahead: shard 1 campaigns again */
    snprintf(v, sizeof v, "{\"k\":1,\"gen\":2,\"next\":{\"k\":2,\"gen\":3,\"from\":%lld}}",
             wall + 3600000);
    f_put(&f, "/bqos/t/shards", v);
    for (double end = t + 2 * LEADER_SHARDS_READ_S; t < end; t += 0.1)
        for (int i = 0; i < 3; i++)
            poll_at(&c[i], &f, t + 0.01 * i);
    ck_assert(c[1].ld.leading || c[2].ld.leading);
    ck_assert(!c[1].ld.sg_out && !c[2].ld.sg_out);
    for (int i = 0; i < 3; i++)
        leader_clear(&c[i].ld);
    f_clear(&f);
}
END_TEST

START_TEST(test_leader_shards_elect_apart)
{
    fstore_t f = {0};
    ctl_t c[3];
    const char *ids[] = {"s0a", "s1a", "s1b"};
    const int shard[] = {0, 1, 1};
    for (int i = 0; i < 3; i++) {
        memset(&c[i], 0, sizeof c[i]);
        leader_config_t lc = {.cluster = "t", .id = ids[i], .admin = "tcp://x",
                              .listen = "tcp://y", .ttl_s = 1, .margin_s = 0.25,
                              .poll_s = 0.1, .shards = 2, .shard = shard[i]};
        leader_store_t st = f_store(&f);
        leader_hooks_t h = {.apply = h_apply, .role = h_role, .bootstrap = h_boot,
                            .change = h_change, .arg = &c[i]};
        ck_assert_int_eq(leader_init(&c[i].ld, &lc, &st, &h), 0);
    }
    ck_assert_str_eq(c[0].ld.key_leader, "/bqos/t/shard/0/leader");
    ck_assert_str_eq(c[1].ld.key_leader, "/bqos/t/shard/1/leader");
    ck_assert_str_eq(c[0].ld.key_head, "/bqos/t/b/"); /* one table for all */
    for (int i = 0; i < 3; i++)
        poll_at(&c[i], &f, 0.01 * i);
    ck_assert(c[0].ld.leading);
    ck_assert(c[1].ld.leading);
    ck_assert(!c[2].ld.leading);
    ck_assert_str_eq(c[2].ld.leader_id, "s1a");
    uint64_t e0 = c[0].ld.epoch, e1 = c[1].ld.epoch;
    /* shard 1's leader dies: its standby takes over, shard 0 unmoved */
    double t = 0.1;
    for (; t < 1.6; t += 0.1) {
        poll_at(&c[0], &f, t);
        poll_at(&c[2], &f, t + 0.01);
    }
    ck_assert(c[2].ld.leading);
    ck_assert_uint_gt(c[2].ld.epoch, e1);
    ck_assert(c[0].ld.leading);
    ck_assert_uint_eq(c[0].ld.epoch, e0);
    ck_assert_uint_eq(c[0].ld.elections, 1);
    for (int i = 0; i < 3; i++)
        leader_clear(&c[i].ld);
    f_clear(&f);
}
END_TEST

START_TEST(test_leader_bad_config)
{
    fstore_t f = {0};
    leader_t ld;
    leader_store_t st = f_store(&f);
    leader_hooks_t h = {0};
    leader_config_t lc = {.cluster = "a/b", .id = "x", .ttl_s = 1, .margin_s = 0.25, .poll_s = 0.1};
    ck_assert_int_eq(leader_init(&ld, &lc, &st, &h), -EINVAL);
    lc.cluster = "c";
    lc.margin_s = 1;
    ck_assert_int_eq(leader_init(&ld, &lc, &st, &h), -EINVAL);
    lc.margin_s = 0.25;
    lc.stale_s = 0.15; /* under two polls: a standby could not tell late from dead */
    ck_assert_int_eq(leader_init(&ld, &lc, &st, &h), -EINVAL);
    lc.stale_s = 0.25;
    lc.shards = 2;
    lc.shard = 2; /* shards 0..1 */
    ck_assert_int_eq(leader_init(&ld, &lc, &st, &h), -EINVAL);
    lc.shards = lc.shard = 0;
    ck_assert_int_eq(leader_init(&ld, &lc, &st, &h), 0);
    ck_assert_str_eq(ld.key_leader, "/bqos/c/leader");
    ck_assert_str_eq(ld.key_head, "/bqos/c/b/");
    ck_assert_str_eq(ld.key_legacy, "/bqos/c/buckets");
    leader_clear(&ld);
}
END_TEST

START_TEST(test_leader_base64)
{
    const char *in[] = {"", "f", "fo", "foo", "foob", "/bqos/x/leader", "a\0b"};
    size_t lens[] = {0, 1, 2, 3, 4, 14, 3};
    const char *want[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "L2Jxb3MveC9sZWFkZXI=", "YQBi"};
    for (size_t i = 0; i < sizeof in / sizeof in[0]; i++) {
        char *e = etcd_b64_encode(in[i], lens[i]);
        ck_assert_str_eq(e, want[i]);
        char *d;
        size_t n;
        ck_assert_int_eq(etcd_b64_decode(e, &d, &n), 0);
        ck_assert_uint_eq(n, lens[i]);
        ck_assert_mem_eq(d, in[i], n);
        free(d);
        free(e);
    }
    char *d;
    size_t n;
    ck_assert_int_eq(etcd_b64_decode("Zm9", &d, &n), -EINVAL);
    ck_assert_int_eq(etcd_b64_decode("Zm9*", &d, &n), -EINVAL);
    ck_assert_int_eq(etcd_b64_decode("Z=9v", &d, &n), -EINVAL);
}
END_TEST

/* The client refuses bad URL lists; a URL nobody listens on is an error
 * within the timeout, not a hang. */
START_TEST(test_leader_etcd_unreachable)
{
    ck_assert_ptr_null(etcd_new("", 0.1));
    ck_assert_ptr_null(etcd_new("ftp://x", 0.1));
    etcd_t *e = etcd_new("http://127.0.0.1:1,http://127.0.0.1:2/", 0.1);
    ck_assert_ptr_nonnull(e);
    int64_t id, ttl;
    ck_assert_int_eq(etcd_lease_grant(e, 1, &id, &ttl), -EIO);
    ck_assert_uint_eq(etcd_requests(e), 2); /* both URLs tried */
    ck_assert(etcd_seconds(e) < 1);
    etcd_destroy(&e);
    ck_assert_ptr_null(e);
}
END_TEST

int main(void)
{
    bqos_log_init("test_leader", BQOS_LOG_ERROR);
    const TTest *const tests[] = {test_leader_one_leader, test_leader_kill_takeover,
                                  test_leader_pause,      test_leader_etcd_down,
                                  test_leader_table,      test_leader_resign,
                                  test_leader_heartbeat_steady, test_leader_heartbeat_kill,
                                  test_leader_heartbeat_late, test_leader_heartbeat_none,
                                  test_leader_heartbeat_race,
                                  test_leader_gray_slow_etcd_no_swing,
                                  test_leader_gray_slow_round_trips_step_down,
                                  test_leader_gray_busy_round_trips_in_budget,
                                  test_leader_gray_host_stall_no_election,
                                  test_leader_gray_own_wait_not_counted,
                                  test_leader_gray_one_failed_poll_tolerated,
                                  test_leader_wipe_floor, test_leader_floor_raised_while_leading,
                                  test_leader_deposed_cannot_raise, test_leader_restored_backup,
                                  test_leader_wipe_restores_acked_table,
                                  test_leader_newer_table_restored_over_older,
                                  test_leader_keys_change_followed,
                                  test_leader_keys_whole_in_chunks,
                                  test_leader_keys_stuck_claim_taken_over,
                                  test_leader_keys_migration,
                                  test_leader_keys_compacted_history,
                                  test_leader_bad_config, test_leader_shards_elect_apart,
                                  test_leader_shards_k_agree, test_leader_shards_change,
                                  test_leader_shards_removed,
                                  test_leader_base64,
                                  test_leader_etcd_unreachable};
    return testlib_run_tests("leader", tests, sizeof tests / sizeof tests[0]);
}
