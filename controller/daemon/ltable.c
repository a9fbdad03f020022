/* ltable.c - bqos-controller's bucket table in etcd: a key per bucket and a head, whole tables written under a claim a step at a time, one change in one transaction, followed by a watch read until the head's revision. */
#include "controller/daemon/ltable.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/mono.h"

/* ---- the bucket table: a key per bucket ---------------------------------- */

/* PREFIX "b/NAME": a new string (caller frees) or NULL. */
static char *bucket_key(const leader_t *ld, const char *name)
{
    size_t a = strlen(ld->key_head), b = strlen(name);
    char *k = malloc(a + b + 1);
    if (k) {
        memcpy(k, ld->key_head, a);
        memcpy(k + a, name, b + 1);
    }
    return k;
}

/* A head's "complete" (absent: complete). */
static int head_complete(json_t *h)
{
    return !json_is_false(json_object_get(h, "complete"));
}

/* A head's "table_version" (absent or not a count: 0). */
static uint64_t head_version(json_t *h)
{
    json_t *v = json_object_get(h, "table_version");
    return json_is_integer(v) && json_integer_value(v) > 0 ? (uint64_t)json_integer_value(v) : 0;
}

/* Parses a head value: a JSON object, or NULL (garbage; logged). */
static json_t *head_parse(const leader_t *ld, const etcd_kv_t *kv)
{
    json_error_t jerr;
    json_t *h = kv->value ? json_loadb(kv->value, kv->len, 0, &jerr) : NULL;
    if (json_is_object(h) && !json_object_get(h, "buckets"))
        return h;
    json_decref(h);
    log_warn("leader %s: the table head %s at revision %lld is not a JSON object without "
             "\"buckets\": ignored", ld->cfg.id, ld->key_head, (long long)kv->mod_rev);
    return NULL;
}

/* Nonzero if `v` (`len` bytes) is one JSON object as far as the brackets
 * go: it opens with '{', closes with '}' and never closes it before its
 * end (strings skipped), so that a value cannot reach outside its element
 * in the text a whole read builds (which apply parses whole). */
static int one_object(const char *v, size_t len)
{
    if (len < 2 || v[0] != '{' || v[len - 1] != '}')
        return 0;
    int depth = 0, str = 0;
    for (size_t i = 0; i < len; i++) {
        char c = v[i];
        if (str) {
            if (c == '\\')
                i++;
            else if (c == '"')
                str = 0;
        } else if (c == '"') {
            str = 1;
        } else if (c == '{' || c == '[') {
            depth++;
        } else if (c == '}' || c == ']') {
            if (--depth == 0 && i != len - 1)
                return 0;
        }
    }
    return depth == 0 && !str;
}

/* ---- writing a whole table --------------------------------------------- */

typedef struct {
    char *key;   /* PREFIX "b/NAME" */
    char *value; /* the bucket's object, compact */
    size_t len;
} tb_item_t;

static int item_cmp(const void *a, const void *b)
{
    return strcmp(((const tb_item_t *)a)->key, ((const tb_item_t *)b)->key);
}

static void items_free(tb_item_t *it, size_t n)
{
    for (size_t i = 0; it && i < n; i++) {
        free(it[i].key);
        free(it[i].value);
    }
    free(it);
}

/* A whole table being written (leader_t.job): the claim is written at its
 * start; then a step at a time (leader_poll() between the loop's other
 * work), transactions of buckets and deletions that each rewrite the
 * incomplete head (so that its mod_revision moves: a claim in progress is
 * not taken for a stuck one) on the head as we last wrote it; then the
 * complete head. */
typedef struct {
    tb_item_t *it;     /* the buckets to put, sorted by key */
    size_t n, i;
    char **dels;       /* keys to delete */
    size_t ndel, di;
    char *h0, *h1;     /* the head incomplete, complete */
    json_t *head;      /* the complete head (becomes ld->head) */
    int64_t claim;     /* the head's mod_revision: our last write */
    int64_t create;    /* the head's create_revision once done */
    int lead, legacy;
    int seen;          /* the head existed when we claimed */
    double t0;
    uint64_t txns;
    char what[32];     /* for the log: "created", "restored", "rewritten" */
} tbjob_t;

static void job_free(tbjob_t *j)
{
    if (!j)
        return;
    items_free(j->it, j->n);
    for (size_t i = 0; i < j->ndel; i++)
        free(j->dels[i]);
    free(j->dels);
    free(j->h0);
    free(j->h1);
    json_decref(j->head);
    free(j);
}

/* The compares every transaction of job `j` makes. */
static size_t job_cmp(const leader_t *ld, const tbjob_t *j, etcd_cmp_t *c)
{
    c[0] = (etcd_cmp_t){.key = ld->key_head, .mod = 1, .rev = j->claim};
    c[1] = (etcd_cmp_t){.key = ld->key_leader, .mod = 0, .rev = ld->lead_rev};
    return j->lead ? 2 : 1;
}

/* The buckets of a bucket file's text, each as a tb_item_t sorted by key,
 * and its head (the other members).  Returns 0, -EINVAL (not a bucket
 * file's shape), -E2BIG (an object over LEADER_TABLE_MAX), -ENOMEM. */
static int table_split(const leader_t *ld, const char *text, size_t len, json_t **headp,
                       tb_item_t **itemsp, size_t *np)
{
    json_error_t jerr;
    json_t *doc = json_loadb(text, len, 0, &jerr);
    json_t *arr = json_object_get(doc, "buckets");
    tb_item_t *it = NULL;
    size_t n = json_array_size(arr), i = 0;
    int rc = -EINVAL;
    if (!json_is_object(doc) || (arr && !json_is_array(arr)))
        goto out;
    if (n && !(it = calloc(n, sizeof *it))) {
        rc = -ENOMEM;
        goto out;
    }
    for (; i < n; i++) {
        json_t *o = json_array_get(arr, i);
        const char *name = json_string_value(json_object_get(o, "name"));
        if (!json_is_object(o) || !name || !*name) {
            rc = -EINVAL;
            goto out;
        }
        it[i].key = bucket_key(ld, name);
        it[i].value = json_dumps(o, JSON_COMPACT);
        if (!it[i].key || !it[i].value) {
            i++;
            rc = -ENOMEM;
            goto out;
        }
        it[i].len = strlen(it[i].value);
        if (it[i].len > LEADER_TABLE_MAX) {
            i++;
            rc = -E2BIG;
            goto out;
        }
    }
    if (n)
        qsort(it, n, sizeof *it, item_cmp);
    json_object_del(doc, "buckets");
    json_object_del(doc, "complete");
    *headp = doc;
    *itemsp = it;
    *np = n;
    return 0;
out:
    items_free(it, i);
    json_decref(doc);
    return rc;
}

/* Ends one page of a range read: with `rc` 0 and keys read, `*from` (owned)
 * becomes the page's last key, where the next page starts; the page `kvs`
 * is freed.  Returns `rc`, or -ENOMEM. */
static int page_done(int rc, char **from, etcd_kv_t *kvs, size_t cnt)
{
    if (cnt && rc == 0) {
        free(*from);
        *from = strdup(kvs[cnt - 1].key);
        if (!*from)
            rc = -ENOMEM;
    }
    etcd_kvs_free(kvs, cnt);
    return rc;
}

/* Lists in j->dels every bucket key in etcd that j->it does not hold: a
 * keys-only range read, page by page.  Returns 0 or an error. */
static int list_others(leader_t *ld, tbjob_t *j)
{
    char *from = strdup(ld->key_head);
    int64_t at = 0;
    size_t cap = 0;
    int more = 1, rc = from ? 0 : -ENOMEM;
    while (rc == 0 && more) {
        etcd_kv_t *kvs = NULL;
        size_t cnt = 0;
        int64_t hdr = 0;
        rc = ld->st.range(ld->st.s, from, ld->key_end, at, LEADER_PAGE, 1, &kvs, &cnt, &more,
                          &hdr);
        if (rc < 0)
            break;
        at = hdr;
        for (size_t i = 0; rc == 0 && i < cnt; i++) {
            const char *k = kvs[i].key;
            tb_item_t probe = {.key = (char *)k};
            if (strcmp(k, ld->key_head) == 0 || strcmp(k, from) == 0 ||
                bsearch(&probe, j->it, j->n, sizeof *j->it, item_cmp))
                continue;
            if (j->ndel == cap) {
                size_t nc = cap ? 2 * cap : 64;
                char **d = realloc(j->dels, nc * sizeof *d);
                if (!d) {
                    rc = -ENOMEM;
                    break;
                }
                j->dels = d;
                cap = nc;
            }
            if (!(j->dels[j->ndel] = strdup(k)))
                rc = -ENOMEM;
            else
                j->ndel++;
        }
        rc = page_done(rc, &from, kvs, cnt);
    }
    free(from);
    return rc;
}

/* Starts writing table `text` whole: the claim (the head incomplete, if
 * the head is absent (`seen` 0) or at mod_revision `seen`; and, with
 * `lead`, our leader key ours), and the list of keys to delete.  `legacy`:
 * the old single table key goes with the complete head.  Returns 0 (ld->job
 * set), -EAGAIN (lost a compare), -EINVAL, -E2BIG, -ENOMEM or the store's
 * error. */
static int job_start(leader_t *ld, const char *text, size_t len, int64_t seen,
                     int64_t seen_create, int lead, int legacy, const char *what)
{
    tbjob_t *j = calloc(1, sizeof *j);
    if (!j)
        return -ENOMEM;
    int rc = table_split(ld, text, len, &j->head, &j->it, &j->n);
    if (rc < 0) {
        free(j);
        return rc;
    }
    j->h1 = json_dumps(j->head, JSON_COMPACT);
    json_object_set_new(j->head, "complete", json_false());
    j->h0 = json_dumps(j->head, JSON_COMPACT);
    json_object_del(j->head, "complete");
    if (!j->h0 || !j->h1) {
        job_free(j);
        return -ENOMEM;
    }
    j->lead = lead;
    j->legacy = legacy;
    j->seen = seen != 0;
    j->claim = seen;
    j->create = seen_create;
    j->t0 = mono_now();
    snprintf(j->what, sizeof j->what, "%s", what);
    etcd_cmp_t c[2];
    size_t nc = job_cmp(ld, j, c);
    etcd_op_t op = {.key = ld->key_head, .value = j->h0, .len = strlen(j->h0)};
    rc = ld->st.txn(ld->st.s, c, nc, &op, 1, &j->claim);
    if (rc == 1) {
        j->txns++;
        if (!seen)
            j->create = j->claim;
        rc = list_others(ld, j);
    } else if (rc == 0) {
        rc = -EAGAIN;
    }
    if (rc < 0) {
        job_free(j);
        return rc;
    }
    ld->job = j;
    ld->buckets_rev = 0; /* ours is being written */
    return 0;
}

/* The job is over (`rc` 0: written). */
static void job_end(leader_t *ld, int rc)
{
    tbjob_t *j = ld->job;
    ld->job = NULL;
    double ms = (mono_now() - j->t0) * 1e3;
    if (rc < 0) {
        if (rc == -EAGAIN)
            log_warn("leader %s: writing the bucket table whole: the table or the leadership "
                     "changed meanwhile; left", ld->cfg.id);
        else
            log_warn("leader %s: cannot write the bucket table: %s", ld->cfg.id,
                     strerror(-rc));
        ld->buckets_rev = 0; /* the next poll looks again */
        job_free(j);
        return;
    }
    ld->buckets_rev = ld->buckets_seen = j->claim;
    ld->head_create = j->create;
    json_decref(ld->head);
    ld->head = j->head;
    j->head = NULL;
    log_info("leader %s: bucket table %s...: %zu buckets written (%zu deleted) in %llu "
             "transactions, %.0f ms, revision %lld", ld->cfg.id, ld->key_head, j->n, j->ndel,
             (unsigned long long)j->txns, ms, (long long)j->claim);
    if (strcmp(j->what, "rewritten") == 0)
        log_info("leader %s: bucket table %s rewritten as a key per bucket (%s...), version "
                 "%llu", ld->cfg.id, ld->key_legacy, ld->key_head,
                 (unsigned long long)ld->table_version);
    else if (strcmp(j->what, "created") == 0)
        log_info("leader %s: bucket table %s... created from the bucket file", ld->cfg.id,
                 ld->key_head);
    else if (strcmp(j->what, "restored") == 0) {
        ld->restores++;
        log_warn("leader %s: bucket table %s... %s (did etcd lose its data or go back to a "
                 "backup?): restored version %llu, the newest this controller knows (the "
                 "table in force here), at revision %lld", ld->cfg.id, ld->key_head,
                 j->seen ? "held an older or unfinished table than ours" : "was missing",
                 (unsigned long long)ld->table_version, (long long)j->claim);
    }
    job_free(j);
}

/* Runs the job for about `budget` seconds (at least one transaction):
 * buckets and deletions, then the complete head.  Returns 0 (done or to be
 * continued) or the error that ended it. */
static int job_step(leader_t *ld, double budget)
{
    tbjob_t *j = ld->job;
    double t0 = mono_now();
    etcd_op_t ops[LEADER_TXN_OPS];
    etcd_cmp_t c[2];
    int rc = 0;
    do {
        size_t nops = 0, bytes = 0;
        int last = j->i == j->n && j->di == j->ndel;
        ops[nops++] = (etcd_op_t){.key = ld->key_head, .value = last ? j->h1 : j->h0,
                                  .len = strlen(last ? j->h1 : j->h0)};
        while (!last && nops < LEADER_TXN_OPS && bytes < LEADER_TXN_BYTES / 2) {
            if (j->di < j->ndel) {
                ops[nops] = (etcd_op_t){.key = j->dels[j->di++], .del = 1};
            } else if (j->i < j->n) {
                tb_item_t *b = &j->it[j->i++];
                ops[nops] = (etcd_op_t){.key = b->key, .value = b->value, .len = b->len};
            } else {
                break;
            }
            bytes += (strlen(ops[nops].key) + ops[nops].len) / 3 * 4 + 96;
            nops++;
        }
        if (last && j->legacy)
            ops[nops++] = (etcd_op_t){.key = ld->key_legacy, .del = 1};
        size_t nc = job_cmp(ld, j, c);
        rc = ld->st.txn(ld->st.s, c, nc, ops, nops, &j->claim);
        j->txns++;
        if (rc == 1 && last) {
            job_end(ld, 0);
            return 0;
        }
        rc = rc == 1 ? 0 : rc == 0 ? -EAGAIN : rc;
    } while (rc == 0 && mono_now() - t0 < budget);
    if (rc < 0)
        job_end(ld, rc);
    return rc;
}

/* Writes our newest table (hooks.bootstrap) to etcd if its head is still
 * as we saw it: absent (`seen` 0) or at mod_revision `seen` (an older
 * table, or a claim we take over).  The writing goes on at the next calls
 * of leader_poll(); when done it says so at warn when it restored a table
 * (ours has a version, or etcd held an older one); the first table of a
 * new cluster is info.  `legacy`: the old single table key is rewritten
 * (and deleted).  A failure leaves buckets_rev 0: the next poll looks
 * again. */
static void restore_table(leader_t *ld, int64_t seen, int64_t seen_create, int legacy)
{
    size_t len = 0;
    char *text = ld->hooks.bootstrap ? ld->hooks.bootstrap(ld->hooks.arg, &len) : NULL;
    if (!text)
        return;
    const char *what = legacy ? "rewritten" : !seen && !ld->table_version ? "created" : "restored";
    int rc = job_start(ld, text, len, seen, seen_create, 0, legacy, what);
    free(text);
    if (rc < 0) {
        ld->buckets_rev = 0;
        if (rc != -EAGAIN)
            log_warn("leader %s: cannot write the bucket table: %s", ld->cfg.id, strerror(-rc));
        return;
    }
    job_step(ld, LEADER_STEP_S);
}

/* ---- reading it --------------------------------------------------------- */

/* A growing text buffer. */
typedef struct {
    char *p;
    size_t len, cap;
    int oom;
} tbuf_t;

static void tb_put(tbuf_t *t, const char *s, size_t n)
{
    if (t->oom)
        return;
    if (t->len + n + 1 > t->cap) {
        size_t cap = t->cap ? t->cap : 65536;
        while (cap < t->len + n + 1)
            cap *= 2;
        char *q = realloc(t->p, cap);
        if (!q) {
            t->oom = 1;
            return;
        }
        t->p = q;
        t->cap = cap;
    }
    memcpy(t->p + t->len, s, n);
    t->len += n;
    t->p[t->len] = '\0';
}

/* Reads the table whole (pages at one revision) and hands it to
 * hooks.apply; restores ours over an older one.  A missing or incomplete
 * head: nothing applied (the next poll decides). */
static void read_whole(leader_t *ld)
{
    tbuf_t t = {0};
    json_t *head = NULL;
    etcd_kv_t hk = {0};
    char *from = strdup(ld->key_head);
    int64_t at = 0;
    int more = 1, rc = from ? 0 : -ENOMEM, first = 1;
    size_t nb = 0;
    ld->whole_reads++;
    double t0 = mono_now();
    while (rc == 0 && more) {
        etcd_kv_t *kvs = NULL;
        size_t cnt = 0;
        int64_t hdr = 0;
        rc = ld->st.range(ld->st.s, from, ld->key_end, at, LEADER_PAGE, 0, &kvs, &cnt, &more,
                          &hdr);
        if (rc < 0)
            break;
        for (size_t i = 0; rc == 0 && i < cnt; i++) {
            etcd_kv_t *kv = &kvs[i];
            if (first) { /* the head sorts first */
                first = 0;
                if (strcmp(kv->key, ld->key_head) != 0 || !(head = head_parse(ld, kv)) ||
                    !head_complete(head)) {
                    rc = -EAGAIN;
                    break;
                }
                hk = *kv;
                hk.key = hk.value = NULL;
                json_t *h = json_copy(head);
                json_object_del(h, "complete");
                char *hs = json_dumps(h, JSON_COMPACT);
                json_decref(h);
                if (!hs) {
                    rc = -ENOMEM;
                    break;
                }
                tb_put(&t, hs, strlen(hs) - 1); /* without its '}' */
                tb_put(&t, strlen(hs) > 2 ? ",\"buckets\":[" : "\"buckets\":[", strlen(hs) > 2 ? 12 : 11);
                free(hs);
                continue;
            }
            if (at && strcmp(kv->key, from) == 0)
                continue; /* the last key of the page before */
            if (!kv->value || !one_object(kv->value, kv->len)) {
                log_warn("leader %s: %s is not one JSON object: the table is not applied",
                         ld->cfg.id, kv->key);
                rc = -EINVAL;
                break;
            }
            if (nb++)
                tb_put(&t, ",", 1);
            tb_put(&t, kv->value, kv->len);
        }
        at = hdr;
        rc = page_done(rc, &from, kvs, cnt);
    }
    free(from);
    if (rc == 0 && first)
        rc = -EAGAIN; /* no head (deleted since the poll read it) */
    tb_put(&t, "]}", 2);
    if (rc == 0 && t.oom)
        rc = -ENOMEM;
    if (rc < 0) {
        if (rc != -EAGAIN)
            log_warn("leader %s: cannot read the bucket table: %s", ld->cfg.id, strerror(-rc));
        ld->buckets_rev = 0;
        goto out;
    }
    ld->buckets_rev = hk.mod_rev;
    ld->buckets_seen = at;
    ld->head_create = hk.create_rev;
    json_decref(ld->head);
    ld->head = json_incref(head);
    double t1 = mono_now();
    rc = ld->hooks.apply ? ld->hooks.apply(ld->hooks.arg, t.p, t.len, hk.mod_rev) : 0;
    log_debug("leader %s: bucket table read whole: %zu buckets, %zu bytes, read %.0f ms, "
              "applied %.0f ms", ld->cfg.id, nb, t.len, (t1 - t0) * 1e3, (mono_now() - t1) * 1e3);
    if (rc == -ESTALE)
        restore_table(ld, hk.mod_rev, hk.create_rev, 0);
out:
    json_decref(head);
    free(t.p);
}

/* A replay of the table's changes (follow_changes()). */
typedef struct {
    leader_t *ld;
    etcd_kv_t *ev; /* the events, in order; value NULL: deleted */
    int *del;
    size_t n, cap;
    int whole;     /* a whole table was written meanwhile: read it whole */
    int oom;
} replay_t;

/* Events a replay holds at most: more (a whole table written meanwhile,
 * or a burst of changes) and the table is read whole instead. */
#define REPLAY_MAX 65536

static int on_event(void *arg, const etcd_kv_t *kv, int deleted)
{
    replay_t *r = arg;
    if (r->n == REPLAY_MAX) {
        r->whole = 1;
        return 1;
    }
    if (r->n == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 64;
        etcd_kv_t *ev = realloc(r->ev, cap * sizeof *ev);
        int *del = ev ? realloc(r->del, cap * sizeof *del) : NULL;
        if (ev)
            r->ev = ev;
        if (!ev || !del) {
            r->oom = 1;
            return 1;
        }
        r->del = del;
        r->cap = cap;
    }
    etcd_kv_t *c = &r->ev[r->n];
    *c = *kv;
    c->key = strdup(kv->key);
    c->value = NULL;
    if (kv->value && (c->value = malloc(kv->len + 1)))
        memcpy(c->value, kv->value, kv->len + 1);
    if (!c->key || (kv->value && !c->value)) {
        etcd_kv_clear(c);
        r->oom = 1;
        return 1;
    }
    r->del[r->n++] = deleted;
    return 0;
}

/* The head's changes since we last applied it, up to `hk` (complete, the
 * same create_revision): replayed through hooks.change, or read whole. */
static void follow_changes(leader_t *ld, const etcd_kv_t *hk)
{
    replay_t r = {.ld = ld};
    int64_t from = (ld->buckets_seen > ld->buckets_rev ? ld->buckets_seen : ld->buckets_rev) + 1;
    int rc = ld->st.watch(ld->st.s, ld->key_head, ld->key_end, from, hk->mod_rev, on_event, &r);
    if (rc == 0 && r.oom)
        rc = -ENOMEM;
    json_t *head = NULL;
    size_t hl = ld->head ? strlen(ld->key_head) : 0;
    /* a whole write meanwhile (a claim), the head deleted, or too many
     * changes to hold: read whole */
    for (size_t i = 0; rc == 0 && i < r.n && !r.whole; i++) {
        if (r.ev[i].mod_rev > hk->mod_rev || strcmp(r.ev[i].key, ld->key_head) != 0)
            continue;
        json_decref(head);
        head = r.del[i] ? NULL : head_parse(ld, &r.ev[i]);
        r.whole = !head || !head_complete(head);
    }
    if (rc < 0 || r.whole || !hl || !head) {
        log_debug("leader %s: changes %lld..%lld not replayed (%s, %zu events%s%s): read whole",
                  ld->cfg.id, (long long)from, (long long)hk->mod_rev,
                  rc < 0 ? strerror(-rc) : "ok", r.n, r.whole ? ", a whole write" : "",
                  !head ? ", no head" : "");
        if (rc < 0 && rc != -ESTALE)
            log_warn("leader %s: cannot follow the bucket table's changes: %s", ld->cfg.id,
                     strerror(-rc));
        read_whole(ld);
        goto out;
    }
    for (size_t i = 0; i < r.n && rc == 0; i++) {
        const etcd_kv_t *e = &r.ev[i];
        if (e->mod_rev > hk->mod_rev || strcmp(e->key, ld->key_head) == 0)
            continue;
        /* the version of the head written with it (one transaction) */
        uint64_t v = head_version(head);
        for (size_t j = i + 1; j < r.n; j++)
            if (r.ev[j].mod_rev == e->mod_rev && strcmp(r.ev[j].key, ld->key_head) == 0) {
                json_t *h = head_parse(ld, &r.ev[j]);
                v = head_version(h);
                json_decref(h);
                break;
            }
        const char *name = e->key + hl;
        if (!r.del[i] && (!e->value || !one_object(e->value, e->len))) {
            log_warn("leader %s: %s is not one JSON object", ld->cfg.id, e->key);
            rc = -EINVAL;
        } else {
            rc = ld->hooks.change(ld->hooks.arg, name, r.del[i] ? NULL : e->value,
                                  r.del[i] ? 0 : e->len, v, e->mod_rev);
            ld->follows_changes++;
        }
    }
    if (rc < 0) {
        read_whole(ld); /* the controller could not take a change as it came */
        goto out;
    }
    ld->buckets_rev = ld->buckets_seen = hk->mod_rev;
    json_decref(ld->head);
    ld->head = head;
    head = NULL;
out:
    json_decref(head);
    for (size_t i = 0; i < r.n; i++)
        etcd_kv_clear(&r.ev[i]);
    free(r.ev);
    free(r.del);
}

/* The head is missing: an old single table key is applied (once per
 * revision) and, by the leader, rewritten as keys; without one, ours is
 * created. */
static void follow_legacy(leader_t *ld)
{
    etcd_kv_t *kvs = NULL;
    size_t n = 0;
    int more = 0;
    int64_t hdr = 0;
    int rc = ld->st.range(ld->st.s, ld->key_legacy, NULL, 0, 1, 0, &kvs, &n, &more, &hdr);
    if (rc < 0) {
        log_warn("leader %s: cannot read %s: %s", ld->cfg.id, ld->key_legacy, strerror(-rc));
        return;
    }
    if (!n) {
        etcd_kvs_free(kvs, n);
        restore_table(ld, 0, 0, 0);
        return;
    }
    if (kvs[0].mod_rev != ld->legacy_rev && kvs[0].value) {
        ld->legacy_rev = kvs[0].mod_rev;
        if (ld->hooks.apply) /* -ESTALE: ours is newer, and written below */
            ld->hooks.apply(ld->hooks.arg, kvs[0].value, kvs[0].len, kvs[0].mod_rev);
    }
    if (ld->leading)
        restore_table(ld, 0, 0, 1);
    etcd_kvs_free(kvs, n);
}

void ltable_follow(leader_t *ld, const etcd_kv_t *hk, int64_t hdr, double now)
{
    if (!hk->found) {
        follow_legacy(ld);
        return;
    }
    json_t *h = head_parse(ld, hk);
    if (h && hk->mod_rev == ld->buckets_rev && hk->create_rev == ld->head_create &&
        head_version(h) == head_version(ld->head)) {
        /* nothing changed up to here (the same revisions in an etcd that
         * counted them again after losing its data would hold another
         * version: the version is the table's name) */
        ld->buckets_seen = hdr;
        json_decref(h);
        return;
    }
    if (!h) { /* garbage: ours over it */
        restore_table(ld, hk->mod_rev, hk->create_rev, 0);
        return;
    }
    if (!head_complete(h)) { /* a whole table being written */
        if (hk->mod_rev != ld->claim_rev) {
            ld->claim_rev = hk->mod_rev;
            ld->claim_at = now;
        }
        if (head_version(h) < ld->table_version || now - ld->claim_at > ld->cfg.ttl_s)
            restore_table(ld, hk->mod_rev, hk->create_rev, 0);
        json_decref(h);
        return;
    }
    json_decref(h);
    if (ld->buckets_rev && hk->create_rev == ld->head_create && ld->st.watch && ld->hooks.change)
        follow_changes(ld, hk);
    else
        read_whole(ld);
}

/* ---- writing: the leader's ---------------------------------------------- */

int ltable_write(leader_t *ld, const char *text, size_t len)
{
    if (ld->job)
        return -EAGAIN; /* a whole write of ours is in progress */
    int rc = job_start(ld, text, len, ld->buckets_rev, ld->head_create, 1, 0, "written");
    while (rc == 0 && ld->job)
        rc = job_step(ld, INFINITY);
    if (rc == -EAGAIN)
        ld->next_poll = 0; /* find out what changed at once */
    return rc;
}

int ltable_change(leader_t *ld, const char *name, const char *json, size_t len,
                  uint64_t version)
{
    if (json && !one_object(json, len))
        return -EINVAL;
    if (ld->job)
        return -EAGAIN; /* a whole write of ours is in progress */
    if (!name || !*name)
        return -EINVAL;
    if (json && len > LEADER_TABLE_MAX)
        return -E2BIG;
    json_t *h = ld->head ? json_copy(ld->head) : json_object();
    if (h && version)
        json_object_set_new(h, "table_version", json_integer((json_int_t)version));
    char *hs = h ? json_dumps(h, JSON_COMPACT) : NULL;
    char *bk = bucket_key(ld, name);
    int rc = -ENOMEM;
    if (!hs || !bk)
        goto out;
    etcd_cmp_t c[2] = {
        {.key = ld->key_head, .mod = 1, .rev = ld->buckets_rev},
        {.key = ld->key_leader, .mod = 0, .rev = ld->lead_rev},
    };
    etcd_op_t ops[2] = {
        {.key = bk, .value = json, .len = len, .del = !json},
        {.key = ld->key_head, .value = hs, .len = strlen(hs)},
    };
    int64_t rev = 0;
    rc = ld->st.txn(ld->st.s, c, 2, ops, 2, &rev);
    if (rc == 0) {
        ld->next_poll = 0; /* find out what changed at once */
        rc = -EAGAIN;
    } else if (rc == 1) {
        rc = 0;
        log_debug("leader %s: bucket %s %s: one transaction, %zu bytes of keys and values, "
                  "revision %lld", ld->cfg.id, name, json ? "put" : "deleted",
                  strlen(bk) + len + strlen(ld->key_head) + strlen(hs), (long long)rev);
        ld->buckets_rev = ld->buckets_seen = rev;
        json_decref(ld->head);
        ld->head = h;
        h = NULL;
    }
out:
    json_decref(h);
    free(hs);
    free(bk);
    return rc;
}

void ltable_step(leader_t *ld)
{
    if (ld->job)
        job_step(ld, LEADER_STEP_S);
}

void ltable_clear(leader_t *ld)
{
    job_free(ld->job);
    ld->job = NULL;
    json_decref(ld->head);
    ld->head = NULL;
}
