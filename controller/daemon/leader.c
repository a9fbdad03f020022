/* leader.c - bqos-controller's election through etcd: the lease, the leader key's transaction, stepping down by our own clock, and the bucket table (a key per bucket) every controller follows. */
#include "controller/daemon/leader.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/mono.h"

/* A whole table being written (below). */
typedef struct tbjob tbjob_t;
static void job_free(tbjob_t *j);

/* ---- the etcd store ------------------------------------------------------ */

static int s_grant(void *s, int64_t ttl, int64_t *id, int64_t *granted)
{
    return etcd_lease_grant(s, ttl, id, granted);
}

static int s_keepalive(void *s, int64_t id, int64_t *ttl)
{
    return etcd_lease_keepalive(s, id, ttl);
}

static int s_revoke(void *s, int64_t id)
{
    return etcd_lease_revoke(s, id);
}

static int s_delete_if(void *s, const etcd_cmp_t *cmp, size_t ncmp, const char *key)
{
    return etcd_delete_if(s, cmp, ncmp, key);
}

static int s_compact(void *s, int64_t rev)
{
    return etcd_compact(s, rev);
}

static int s_get2(void *s, const char *k1, etcd_kv_t *v1, const char *k2, etcd_kv_t *v2,
                  int keys_only2, int64_t *hdr)
{
    return etcd_get2(s, k1, v1, k2, v2, keys_only2, hdr);
}

static int s_txn(void *s, const etcd_cmp_t *cmp, size_t ncmp, const etcd_op_t *ops, size_t nops,
                 int64_t *rev)
{
    return etcd_txn(s, cmp, ncmp, ops, nops, rev);
}

static int s_range(void *s, const char *key, const char *end, int64_t rev, size_t limit,
                   int keys_only, etcd_kv_t **kvs, size_t *n, int *more, int64_t *hdr)
{
    return etcd_range(s, key, end, rev, limit, keys_only, kvs, n, more, hdr);
}

static int s_watch(void *s, const char *key, const char *end, int64_t start, int64_t until,
                   etcd_event_fn fn, void *arg)
{
    return etcd_watch(s, key, end, start, until, fn, arg);
}

static int s_put_if(void *s, const etcd_cmp_t *cmp, size_t ncmp, const char *key,
                    const char *value, size_t len, int64_t lease, int64_t *rev)
{
    return etcd_put_if(s, cmp, ncmp, key, value, len, lease, rev);
}

leader_store_t leader_store_etcd(etcd_t *e)
{
    return (leader_store_t){.grant = s_grant, .keepalive = s_keepalive, .revoke = s_revoke,
                            .get2 = s_get2, .put_if = s_put_if, .delete_if = s_delete_if,
                            .compact = s_compact, .txn = s_txn, .range = s_range,
                            .watch = s_watch, .s = e};
}

/* ---- set up -------------------------------------------------------------- */

/* The leader key's value for epoch floor `floor`: a new string (caller
 * frees) or NULL if out of memory.  stale_ms: how long a standby must see
 * our heartbeat unchanged before it may depose us (0: never, wait for the
 * lease); floor (only when > 0): our epoch is floor + the key's
 * create_revision. */
static char *leader_value(const leader_t *ld, uint64_t floor)
{
    const leader_config_t *cfg = &ld->cfg;
    json_t *v = json_pack("{s:s, s:s, s:s, s:I}", "id", cfg->id, "admin",
                          cfg->admin ? cfg->admin : "", "listen", cfg->listen ? cfg->listen : "",
                          "stale_ms", (json_int_t)llround(cfg->stale_s * 1e3));
    if (v && floor)
        json_object_set_new(v, "floor", json_integer((json_int_t)floor));
    char *s = v ? json_dumps(v, JSON_COMPACT) : NULL;
    json_decref(v);
    return s;
}

int leader_init(leader_t *ld, const leader_config_t *cfg, const leader_store_t *st,
                const leader_hooks_t *hooks)
{
    memset(ld, 0, sizeof *ld);
    if (!cfg->cluster || !*cfg->cluster || strlen(cfg->cluster) > 100 ||
        strchr(cfg->cluster, '/') || !cfg->id || !*cfg->id || strlen(cfg->id) > 200 ||
        cfg->ttl_s < 1 || cfg->poll_s <= 0 || cfg->margin_s < 0 || cfg->margin_s >= cfg->ttl_s ||
        cfg->stale_s < 0 || (cfg->stale_s > 0 && cfg->stale_s < 2 * cfg->poll_s) ||
        cfg->slow_s < 0 || cfg->hold_s < 0)
        return -EINVAL;
    ld->cfg = *cfg;
    ld->bad_at = ld->lapse_seen = -INFINITY;
    ld->lapse_at = NAN;
    ld->st = *st;
    ld->hooks = *hooks;
    ld->value = leader_value(ld, 0);
    size_t n = strlen(cfg->cluster) + 32;
    ld->key_leader = malloc(n);
    ld->key_head = malloc(n);
    ld->key_end = malloc(n);
    ld->key_legacy = malloc(n);
    if (!ld->value || !ld->key_leader || !ld->key_head || !ld->key_end || !ld->key_legacy) {
        leader_clear(ld);
        return -ENOMEM;
    }
    snprintf(ld->key_leader, n, "/bqos/%s/leader", cfg->cluster);
    snprintf(ld->key_head, n, "/bqos/%s/b/", cfg->cluster);
    snprintf(ld->key_end, n, "/bqos/%s/b0", cfg->cluster); /* '0' follows '/' */
    snprintf(ld->key_legacy, n, "/bqos/%s/buckets", cfg->cluster);
    return 0;
}

void leader_clear(leader_t *ld)
{
    free(ld->key_leader);
    free(ld->key_head);
    free(ld->key_end);
    free(ld->key_legacy);
    free(ld->value);
    json_decref(ld->head);
    ld->key_leader = ld->key_head = ld->key_end = ld->key_legacy = ld->value = NULL;
    ld->head = NULL;
    job_free(ld->job);
    ld->job = NULL;
}

/* ---- roles --------------------------------------------------------------- */

/* Our lease is safely alive at `now` by our own clock. */
static int lease_ok(const leader_t *ld, double now)
{
    return now < ld->lease_until - ld->cfg.margin_s;
}

/* Until when our last heartbeat keeps every standby from deposing us: a
 * standby deposes only after seeing the same heartbeat for stale_s, and it
 * cannot have seen it before we sent it; one poll less, for the messages
 * on their way. */
static double beat_fence(const leader_t *ld)
{
    return ld->beat_at + ld->cfg.stale_s - ld->cfg.poll_s;
}

/* Gray failures: our heartbeat did not land by its fence (hold_s set). */
static int beat_overdue(const leader_t *ld, double now)
{
    return ld->cfg.hold_s > 0 && ld->cfg.stale_s > 0 && now >= beat_fence(ld);
}

/* Gray failures: every poll has been in time for hold_s at `now` (always
 * true when hold_s is 0): we may campaign, depose or take our key back. */
static int etcd_healthy(const leader_t *ld, double now)
{
    return ld->cfg.hold_s <= 0 || now - ld->bad_at >= ld->cfg.hold_s;
}

int leader_may_push(const leader_t *ld, double now)
{
    return ld->leading && lease_ok(ld, now) && (ld->cfg.stale_s <= 0 || now < beat_fence(ld));
}

double leader_next(const leader_t *ld)
{
    if (ld->job)
        return 0; /* the next step at once, after the loop's other work */
    double t = ld->next_poll;
    if (ld->leading && ld->lease_until - ld->cfg.margin_s < t)
        t = ld->lease_until - ld->cfg.margin_s;
    return t;
}

static void step_down(leader_t *ld, const char *why)
{
    if (!ld->leading)
        return;
    log_warn("leader %s: no longer leading (epoch %llu): %s", ld->cfg.id,
             (unsigned long long)ld->epoch, why);
    if (ld->epoch > ld->known)
        ld->known = ld->epoch; /* a later leadership of ours leads above it */
    ld->leading = 0;
    ld->epoch = 0;
    ld->lead_rev = 0;
    ld->stepdowns++;
    if (ld->hooks.role)
        ld->hooks.role(ld->hooks.arg, 0);
}

/* `sent`: our clock when the request that made the key ours left; our
 * epoch is ld->floor + ld->lead_rev. */
static void become_leader(leader_t *ld, double sent)
{
    uint64_t epoch = ld->floor + (uint64_t)ld->lead_rev;
    ld->leading = 1;
    ld->beat_at = sent;
    ld->epoch = epoch;
    ld->leader_epoch = epoch;
    snprintf(ld->leader_id, sizeof ld->leader_id, "%s", ld->cfg.id);
    snprintf(ld->leader_admin, sizeof ld->leader_admin, "%s", ld->cfg.admin ? ld->cfg.admin : "");
    ld->elections++;
    log_warn("leader %s: leading with epoch %llu (lease %lld, %lld s)", ld->cfg.id,
             (unsigned long long)epoch, (long long)ld->lease, (long long)ld->lease_ttl);
    if (ld->hooks.role)
        ld->hooks.role(ld->hooks.arg, epoch);
}

/* The epoch floor in a leader key's value `v` (0: none, an older bqos, or
 * out of range). */
static uint64_t value_floor(json_t *v, int64_t create_rev)
{
    json_t *f = json_object_get(v, "floor");
    if (!json_is_integer(f) || json_integer_value(f) <= 0 || create_rev < 0 ||
        (uint64_t)json_integer_value(f) > LEADER_EPOCH_MAX - (uint64_t)create_rev)
        return 0;
    return (uint64_t)json_integer_value(f);
}

/* Notes who leads from the leader key's value (JSON {"id","admin",
 * "stale_ms","floor"}): its epoch is floor + the key's create_revision. */
static void note_leader(leader_t *ld, const etcd_kv_t *kv)
{
    json_error_t jerr;
    json_t *v = json_loadb(kv->value, kv->len, 0, &jerr);
    const char *id = json_string_value(json_object_get(v, "id"));
    const char *admin = json_string_value(json_object_get(v, "admin"));
    json_t *stale = json_object_get(v, "stale_ms"); /* absent: an older bqos, no heartbeat */
    ld->leader_stale_s = json_is_integer(stale) && json_integer_value(stale) > 0
                             ? (double)json_integer_value(stale) / 1e3
                             : 0;
    ld->floor = value_floor(v, kv->create_rev);
    uint64_t epoch = ld->floor + (uint64_t)kv->create_rev;
    if (ld->leader_epoch != epoch && !ld->leading)
        log_info("leader %s: the leader is %s (epoch %llu)", ld->cfg.id, id ? id : "?",
                 (unsigned long long)epoch);
    snprintf(ld->leader_id, sizeof ld->leader_id, "%s", id ? id : "");
    snprintf(ld->leader_admin, sizeof ld->leader_admin, "%s", admin ? admin : "");
    ld->leader_epoch = epoch;
    if (epoch > ld->known)
        ld->known = epoch;
    json_decref(v);
}

/* The highest epoch known to be in use: led by us or by a leader we saw,
 * or obeyed by a node (leader_note_follows()). */
static uint64_t known_epoch(const leader_t *ld)
{
    return ld->follows > ld->known ? ld->follows : ld->known;
}

/* Rewrites our leader key (same lease) with epoch floor `floor`, if its
 * create_revision is still ld->lead_rev: a deposed leader cannot raise.
 * Returns 1 (written: ld->floor and ld->value are the new ones), 0 (the key
 * is not ours) or the store's error. */
static int write_floor(leader_t *ld, uint64_t floor)
{
    char *v = leader_value(ld, floor);
    if (!v)
        return -ENOMEM;
    etcd_cmp_t c = {.key = ld->key_leader, .mod = 0, .rev = ld->lead_rev};
    int64_t rev = 0;
    int rc = ld->st.put_if(ld->st.s, &c, 1, ld->key_leader, v, strlen(v), ld->lease, &rev);
    if (rc != 1) {
        free(v);
        return rc;
    }
    log_warn("leader %s: epoch floor raised from %llu to %llu: a node or controller knows "
             "epoch %llu, above our %llu (did etcd lose or restore its data?); leading at %llu",
             ld->cfg.id, (unsigned long long)ld->floor, (unsigned long long)floor,
             (unsigned long long)known_epoch(ld),
             (unsigned long long)(ld->floor + (uint64_t)ld->lead_rev),
             (unsigned long long)(floor + (uint64_t)ld->lead_rev));
    free(ld->value);
    ld->value = v;
    ld->floor = floor;
    ld->raises++;
    return 1;
}

/* The floor that puts our epoch above every epoch known (0: ours is above
 * already, or the sum would exceed LEADER_EPOCH_MAX: logged).  `leading`:
 * we lead already, and a node that obeys our epoch reports it: only an
 * epoch above ours is another's. */
static uint64_t floor_needed(const leader_t *ld, int leading)
{
    uint64_t need = known_epoch(ld), rev = (uint64_t)ld->lead_rev;
    uint64_t ours = ld->floor + rev;
    if (ours > need || (leading && ours == need))
        return 0;
    if (need > LEADER_EPOCH_MAX - rev) {
        log_error("leader %s: epoch %llu is known, too close to the largest (%llu) to lead "
                  "above it", ld->cfg.id, (unsigned long long)need,
                  (unsigned long long)LEADER_EPOCH_MAX);
        return 0;
    }
    return need;
}

/* We hold the leader key, created at revision `rev`, whose value says
 * epoch floor `floor`: we lead at floor + rev, the floor raised first if
 * that is not above every epoch we know of (etcd lost or restored its
 * data: its revisions start again lower).  If the raise cannot be written
 * (etcd error) we lead at the lower epoch, which nodes that know a higher
 * one ignore, and the next poll tries again.  Returns 0, or the store's
 * error. */
static int take_lead(leader_t *ld, int64_t rev, uint64_t floor, double sent)
{
    ld->lead_rev = rev;
    ld->floor = floor;
    uint64_t need = floor_needed(ld, 0);
    int rc = need ? write_floor(ld, need) : 1;
    if (rc == 0) { /* not ours any more */
        ld->lead_rev = 0;
        return 0;
    }
    become_leader(ld, sent);
    return rc < 0 ? rc : 0;
}

/* Leading: a node obeys an epoch above ours (it heard a leader of an etcd
 * that lost its data, or of the one before a restore, or we won without
 * hearing it): raise our floor above it, in a transaction that requires
 * our leader key, and tell the loop our new epoch.  A deposed leader's
 * transaction fails: it steps down.  Returns 0 or the store's error. */
static int raise_lead(leader_t *ld)
{
    uint64_t need = floor_needed(ld, 1);
    if (!need)
        return 0;
    int rc = write_floor(ld, need);
    if (rc == 0)
        step_down(ld, "another controller took the leader key (we were deposed)");
    if (rc != 1)
        return rc;
    ld->epoch = ld->leader_epoch = ld->floor + (uint64_t)ld->lead_rev;
    if (ld->hooks.role)
        ld->hooks.role(ld->hooks.arg, ld->epoch);
    return 0;
}

void leader_note_follows(leader_t *ld, uint64_t epoch)
{
    if (epoch > ld->follows && epoch <= LEADER_EPOCH_MAX)
        ld->follows = epoch;
}

/* ---- the poll ------------------------------------------------------------ */

/* Our clock now, for a poll that began at `now` (its caller's clock) when
 * mono_now() read t0: the time the poll has spent in requests added (or
 * the store's clock, a test's). */
static double poll_clock(const leader_t *ld, double now, double t0)
{
    return ld->st.clock ? ld->st.clock(ld->st.s) : now + (mono_now() - t0);
}

/* Renews the lease, or grants one.  Returns 0 when a lease is held. */
static int renew(leader_t *ld, double now)
{
    int rc;
    if (ld->lease) {
        int64_t ttl = 0;
        rc = ld->st.keepalive(ld->st.s, ld->lease, &ttl);
        if (rc == 0) {
            ld->lease_until = now + (double)ttl;
            return 0;
        }
        if (rc != -ENOENT)
            return rc;
        log_warn("leader %s: lease %lld expired or revoked", ld->cfg.id, (long long)ld->lease);
        step_down(ld, "lease expired or revoked at etcd");
        ld->lease = 0;
        /* etcd may have lost its data: its revisions start again, and the
         * ones we applied may now name another table (or none): the head's
         * version tells (follow_table()) */
    }
    int64_t id = 0, granted = 0;
    rc = ld->st.grant(ld->st.s, (int64_t)(ld->cfg.ttl_s + 0.5), &id, &granted);
    if (rc < 0)
        return rc;
    ld->lease = id;
    ld->lease_ttl = granted;
    ld->lease_until = now + (double)granted;
    return 0;
}

#define COMPACT_EVERY 10000 /* etcd revisions between two compactions */

/* The leader's heartbeat: the leader key written again (same value, same
 * lease) if its create_revision is still our epoch, so that its
 * mod_revision moves; `sent` is our clock as the request leaves.  Losing
 * the compare means another controller took the key: we step down.  Every
 * COMPACT_EVERY revisions the history the heartbeats leave is compacted.
 * Returns 0 or the store's error. */
static int beat(leader_t *ld, double sent)
{
    etcd_cmp_t c = {.key = ld->key_leader, .mod = 0, .rev = ld->lead_rev};
    int64_t rev = 0;
    int rc = ld->st.put_if(ld->st.s, &c, 1, ld->key_leader, ld->value, strlen(ld->value),
                           ld->lease, &rev);
    if (rc < 0)
        return rc;
    if (rc == 0) {
        step_down(ld, "another controller took the leader key (we were deposed)");
        return 0;
    }
    ld->beat_at = sent;
    ld->beats++;
    if (!ld->compact_next) {
        ld->compact_next = rev + COMPACT_EVERY;
    } else if (rev >= ld->compact_next && ld->st.compact) {
        ld->compact_next = rev + COMPACT_EVERY;
        int crc = ld->st.compact(ld->st.s, rev);
        if (crc < 0)
            log_debug("leader %s: etcd compaction at %lld: %s", ld->cfg.id, (long long)rev,
                      strerror(-crc));
    }
    return 0;
}

/* Puts the leader key with our lease if there is none.  `sent`: our clock
 * as the request leaves.  Returns 0 (won or lost) or the store's error. */
static int campaign(leader_t *ld, double sent)
{
    int64_t rev = 0;
    etcd_cmp_t c = {.key = ld->key_leader, .mod = 0, .rev = 0};
    /* the floor of the last leader we saw (or ours): raised after the
     * win only if the revision does not put us above every known epoch */
    char *v = leader_value(ld, ld->floor);
    if (!v)
        return -ENOMEM;
    int won = ld->st.put_if(ld->st.s, &c, 1, ld->key_leader, v, strlen(v), ld->lease, &rev);
    if (won == 1) {
        free(ld->value);
        ld->value = v;
        return take_lead(ld, rev, ld->floor, sent);
    }
    free(v);
    ld->leader_id[0] = ld->leader_admin[0] = '\0'; /* the winner is read at the next poll */
    return won < 0 ? won : 0;
}

/* A standby's watch on another controller's leader key `lk`, read by the
 * answer that came at `seen` (our clock): nonzero if its heartbeat (its
 * mod_revision) has not moved for longer than the leader itself declared
 * (its "stale_ms"; none: never). */
static int leader_stale(leader_t *ld, const etcd_kv_t *lk, double seen)
{
    if (lk->create_rev != ld->seen_create || lk->mod_rev != ld->seen_mod) {
        ld->seen_create = lk->create_rev;
        ld->seen_mod = lk->mod_rev;
        ld->seen_at = seen;
        return 0;
    }
    return ld->leader_stale_s > 0 && seen - ld->seen_at > ld->leader_stale_s;
}

/* The leader key `lk` has shown the same heartbeat for longer than its
 * leader declared: the leader has stopped pushing by its own clock
 * (leader_may_push()).  Its key is deleted by a transaction that requires
 * the heartbeat we saw stale, so that one landing meanwhile (which would
 * let it push on) cancels the deposition; then we campaign.  (Revoking
 * its lease instead could not be made conditional.)  Returns 0 or the
 * store's error. */
static int depose(leader_t *ld, const etcd_kv_t *lk, double seen, double sent)
{
    etcd_cmp_t c[2] = {
        {.key = ld->key_leader, .mod = 1, .rev = lk->mod_rev},
        {.key = ld->key_leader, .mod = 0, .rev = lk->create_rev},
    };
    int rc = ld->st.delete_if(ld->st.s, c, 2, ld->key_leader);
    if (rc < 0)
        return rc;
    if (rc == 0)
        return 0; /* it beat meanwhile, or another standby was first: next poll */
    ld->depositions++;
    log_warn("leader %s: leader %s (epoch %lld) wrote no heartbeat for %.0f ms: deposed, "
             "taking over", ld->cfg.id, ld->leader_id[0] ? ld->leader_id : "?",
             (long long)lk->create_rev, (seen - ld->seen_at) * 1e3);
    return campaign(ld, sent);
}

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
struct tbjob {
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
};

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
        if (cnt && rc == 0) {
            free(from);
            from = strdup(kvs[cnt - 1].key);
            if (!from)
                rc = -ENOMEM;
        }
        etcd_kvs_free(kvs, cnt);
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
        if (cnt && rc == 0) {
            free(from);
            from = strdup(kvs[cnt - 1].key);
            if (!from)
                rc = -ENOMEM;
        }
        etcd_kvs_free(kvs, cnt);
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

static int on_event(void *arg, const etcd_kv_t *kv, int deleted)
{
    replay_t *r = arg;
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
    /* a whole write meanwhile (a claim), or the head deleted: read whole */
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

/* Follows the table whose head the poll read as `hk` at etcd's revision
 * `hdr`, at `now` (our clock): applies what changed, waits for a whole
 * write in progress (or takes it over, stuck for a lease or older than
 * ours), restores ours over an older one, creates it if missing. */
static void follow_table(leader_t *ld, const etcd_kv_t *hk, int64_t hdr, double now)
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

/* The poll that began at `now` (mono_now() read t0) has taken longer than
 * slow_s: the rest of it waits for the next. */
static int over_budget(const leader_t *ld, double now, double t0)
{
    return ld->cfg.slow_s > 0 && poll_clock(ld, now, t0) - now > ld->cfg.slow_s;
}

/* Our own leader key `lk`, read at `seen` (our clock), while we may not
 * lead (etcd not healthy for hold_s): deleted if it is still that key, so
 * that a controller whose etcd answers can take over at once.  Returns 0
 * or the store's error. */
static int hand_over(leader_t *ld, const etcd_kv_t *lk, double seen)
{
    etcd_cmp_t c = {.key = ld->key_leader, .mod = 0, .rev = lk->create_rev};
    int rc = ld->st.delete_if(ld->st.s, &c, 1, ld->key_leader);
    if (rc == 1)
        log_warn("leader %s: etcd was slow or failing %.1f s ago (leading needs %.1f s in "
                 "time): gave up our leader key", ld->cfg.id,
                 seen - ld->bad_at, ld->cfg.hold_s);
    ld->leader_id[0] = ld->leader_admin[0] = '\0';
    return rc < 0 ? rc : 0;
}

int leader_poll(leader_t *ld, double now)
{
    if (ld->leading && !lease_ok(ld, now))
        step_down(ld, "lease not renewed in time by our clock");
    if (ld->leading && beat_overdue(ld, now) && now >= ld->beat_at + ld->cfg.stale_s) {
        /* a standby may have deposed us by now, and a poll cut short
         * would not tell us */
        ld->bad_at = now;
        ld->gray_stepdowns++;
        step_down(ld, "no heartbeat landed for the takeover time (etcd slow or host "
                      "starved): not leading again before etcd answers in time");
    } else if (ld->leading && beat_overdue(ld, now) && ld->lapse_at != ld->beat_at) {
        /* a late heartbeat: pushes pause until the next lands; the second
         * within hold_s is a gray failure, not a hiccup */
        int again = now - ld->lapse_seen < ld->cfg.hold_s;
        ld->lapse_at = ld->beat_at;
        ld->lapse_seen = ld->bad_at = now;
        if (again) {
            ld->gray_stepdowns++;
            step_down(ld, "a second heartbeat late within the hold time (etcd slow or host "
                          "starved): not leading again before etcd answers in time");
        }
    }
    if (now < ld->next_poll) {
        if (ld->job)
            job_step(ld, LEADER_STEP_S);
        return 0;
    }
    ld->next_poll = now + ld->cfg.poll_s;
    ld->polls++;
    double t0 = mono_now();
    int rc = renew(ld, now);
    if (rc < 0)
        goto out;
    if (ld->leading && !lease_ok(ld, now)) {
        step_down(ld, "lease about to end");
        goto out;
    }
    if (over_budget(ld, now, t0)) {
        rc = -ETIMEDOUT;
        goto out;
    }
    etcd_kv_t lk, bk;
    int64_t hdr = 0;
    rc = ld->st.get2(ld->st.s, ld->key_leader, &lk, ld->key_head, &bk, 0, &hdr);
    if (rc < 0) {
        etcd_kv_clear(&lk);
        etcd_kv_clear(&bk);
        goto out;
    }
    double seen = poll_clock(ld, now, t0); /* the answer is at least this recent */
    if (over_budget(ld, now, t0)) {
        rc = -ETIMEDOUT; /* no heartbeat, no campaign on an answer this late */
    } else if (lk.found && lk.lease == ld->lease && !ld->leading && !etcd_healthy(ld, seen)) {
        rc = hand_over(ld, &lk, seen);
    } else if (lk.found && lk.lease == ld->lease) {
        if (!ld->leading) { /* our campaign's answer was lost; the key is ours */
            json_t *v = json_loadb(lk.value, lk.len, 0, NULL);
            uint64_t floor = value_floor(v, lk.create_rev);
            json_decref(v);
            char *nv = leader_value(ld, floor); /* what our beats write */
            if (nv) {
                free(ld->value);
                ld->value = nv;
            }
            rc = take_lead(ld, lk.create_rev, floor, -INFINITY); /* pushes after a beat */
        }
        if (ld->leading && ld->cfg.stale_s > 0)
            rc = beat(ld, poll_clock(ld, now, t0));
        if (ld->leading && rc == 0)
            rc = raise_lead(ld);
    } else if (lk.found) {
        step_down(ld, "another controller holds the leader key");
        note_leader(ld, &lk);
        if (leader_stale(ld, &lk, seen) && etcd_healthy(ld, seen))
            rc = depose(ld, &lk, seen, poll_clock(ld, now, t0));
    } else {
        step_down(ld, "the leader key is gone");
        if (etcd_healthy(ld, seen))
            rc = campaign(ld, poll_clock(ld, now, t0));
    }
    if (rc >= 0 && !over_budget(ld, now, t0) && !ld->job)
        follow_table(ld, &bk, hdr, poll_clock(ld, now, t0));
    etcd_kv_clear(&lk);
    etcd_kv_clear(&bk);
out:
    if (rc < 0) {
        ld->bad_at = poll_clock(ld, now, t0); /* no lead before hold_s from here */
        if (rc == -ETIMEDOUT)
            ld->slow_polls++;
        /* etcd unreachable or slow: a failed request may have cost the loop
         * a whole timeout, so a standby's next poll waits longer (a quarter
         * of the lease).  A leader keeps trying at every poll: its lease,
         * and the nodes' tokens, depend on the next renewal. */
        ld->errors++;
        double backoff = ld->cfg.ttl_s / 4 > ld->cfg.poll_s ? ld->cfg.ttl_s / 4 : ld->cfg.poll_s;
        if (!ld->leading)
            ld->next_poll = now + backoff;
        if (rc == -ETIMEDOUT)
            log_warn("leader %s: etcd: poll over its %.0f ms budget, cut short", ld->cfg.id,
                     ld->cfg.slow_s * 1e3);
        else
            log_warn("leader %s: etcd: %s", ld->cfg.id, strerror(-rc));
    }
    if (ld->leading && !lease_ok(ld, now))
        step_down(ld, "lease not renewed in time");
    ld->poll_seconds += mono_now() - t0;
    return rc;
}

int leader_leads(const leader_t *ld, double now)
{
    return ld->leading && lease_ok(ld, now);
}

int leader_write_buckets(leader_t *ld, const char *text, size_t len, double now)
{
    if (!leader_leads(ld, now))
        return -EPERM;
    if (ld->job)
        return -EAGAIN; /* a whole write of ours is in progress */
    int rc = job_start(ld, text, len, ld->buckets_rev, ld->head_create, 1, 0, "written");
    while (rc == 0 && ld->job)
        rc = job_step(ld, INFINITY);
    if (rc == -EAGAIN)
        ld->next_poll = 0; /* find out what changed at once */
    return rc;
}

/* One change: bucket `name` put (`json`) or deleted (NULL), and the head
 * at `version`, in one transaction on the head as last applied and our
 * leader key. */
static int write_change(leader_t *ld, const char *name, const char *json, size_t len,
                        uint64_t version, double now)
{
    if (!leader_leads(ld, now))
        return -EPERM;
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

int leader_put_bucket(leader_t *ld, const char *name, const char *json, size_t len,
                      uint64_t version, double now)
{
    if (!json || !one_object(json, len))
        return -EINVAL;
    return write_change(ld, name, json, len, version, now);
}

int leader_remove_bucket(leader_t *ld, const char *name, uint64_t version, double now)
{
    return write_change(ld, name, NULL, 0, version, now);
}

void leader_resign(leader_t *ld)
{
    if (ld->lease) {
        int rc = ld->st.revoke(ld->st.s, ld->lease);
        if (rc < 0)
            log_warn("leader %s: cannot revoke lease: %s", ld->cfg.id, strerror(-rc));
    }
    step_down(ld, "shutting down");
    ld->lease = 0;
}
