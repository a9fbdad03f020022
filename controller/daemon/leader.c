/* leader.c - bqos-controller's election through etcd: the lease, the leader key's transaction, stepping down by our own clock, the epoch floor; the bucket table's keys are ltable.c's. */
#include "controller/daemon/leader.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/mono.h"
#include "controller/daemon/ltable.h"

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

/* The calling thread's time waiting on a run queue, from the kernel's
 * schedstat (its second field, ns); 0 where there is none. */
static double s_sched_wait(void *s)
{
    (void)s;
    FILE *f = fopen("/proc/thread-self/schedstat", "re");
    unsigned long long run = 0, wait = 0;
    int n = f ? fscanf(f, "%llu %llu", &run, &wait) : 0;
    if (f)
        fclose(f);
    return n == 2 ? (double)wait / 1e9 : 0;
}

leader_store_t leader_store_etcd(etcd_t *e)
{
    return (leader_store_t){.grant = s_grant, .keepalive = s_keepalive, .revoke = s_revoke,
                            .get2 = s_get2, .put_if = s_put_if, .delete_if = s_delete_if,
                            .compact = s_compact, .txn = s_txn, .range = s_range,
                            .watch = s_watch, .sched_wait = s_sched_wait, .s = e};
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
        cfg->slow_s < 0 || cfg->hold_s < 0 || cfg->shards < 0 || cfg->shards > 256 ||
        (cfg->shards && (cfg->shard < 0 || cfg->shard >= cfg->shards)))
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
    if (cfg->shards) /* a shard's own election (docs/controller.md "Shards") */
        snprintf(ld->key_leader, n, "/bqos/%s/shard/%d/leader", cfg->cluster, cfg->shard);
    else
        snprintf(ld->key_leader, n, "/bqos/%s/leader", cfg->cluster);
    snprintf(ld->key_head, n, "/bqos/%s/b/", cfg->cluster);
    snprintf(ld->key_end, n, "/bqos/%s/b0", cfg->cluster); /* '0' follows '/' */
    snprintf(ld->key_legacy, n, "/bqos/%s/buckets", cfg->cluster);
    if (cfg->shards) {
        if (!(ld->key_shards = malloc(n))) {
            leader_clear(ld);
            return -ENOMEM;
        }
        snprintf(ld->key_shards, n, "/bqos/%s/shards", cfg->cluster);
    }
    return 0;
}

void leader_clear(leader_t *ld)
{
    free(ld->key_leader);
    free(ld->key_head);
    free(ld->key_end);
    free(ld->key_legacy);
    free(ld->value);
    free(ld->key_shards);
    ld->key_leader = ld->key_head = ld->key_end = ld->key_legacy = ld->value = NULL;
    ld->key_shards = NULL;
    ltable_clear(ld);
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
            ld->renew_at = now + (double)ttl / 4;
            return 0;
        }
        if (rc != -ENOENT)
            return rc;
        log_warn("leader %s: lease %lld expired or revoked", ld->cfg.id, (long long)ld->lease);
        step_down(ld, "lease expired or revoked at etcd");
        ld->lease = 0;
        /* etcd may have lost its data: its revisions start again, and the
         * ones we applied may now name another table (or none): the head's
         * version tells (ltable_follow()) */
    }
    int64_t id = 0, granted = 0;
    rc = ld->st.grant(ld->st.s, (int64_t)(ld->cfg.ttl_s + 0.5), &id, &granted);
    if (rc < 0)
        return rc;
    ld->lease = id;
    ld->lease_ttl = granted;
    ld->lease_until = now + (double)granted;
    ld->renew_at = now + (double)granted / 4;
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
    ld->beat_wait = ld->st.sched_wait ? ld->st.sched_wait(ld->st.s) : 0;
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
 * (its "stale_ms"; none: never), counted only over time we watched: each
 * gap between two of our answers counts for at most two polls, so that a
 * stall of our own (a busy host: we, etcd and the leader all not run) is
 * not taken for the leader's silence.  Counting less than the time that
 * passed only makes a deposition later, never earlier than the leader's
 * fence assumes. */
static int leader_stale(leader_t *ld, const etcd_kv_t *lk, double seen)
{
    if (lk->create_rev != ld->seen_create || lk->mod_rev != ld->seen_mod) {
        ld->seen_create = lk->create_rev;
        ld->seen_mod = lk->mod_rev;
        ld->seen_at = ld->seen_last = seen;
        ld->seen_quiet = 0;
        return 0;
    }
    double gap = seen - ld->seen_last, cap = 2 * ld->cfg.poll_s;
    ld->seen_quiet += gap < cap ? gap : cap;
    ld->seen_last = seen;
    return ld->leader_stale_s > 0 && ld->seen_quiet > ld->leader_stale_s;
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

/* How long our thread has waited, runnable, for a CPU since our last
 * heartbeat was sent (0 without the store's sched_wait). */
static double own_wait(const leader_t *ld)
{
    if (!ld->st.sched_wait)
        return 0;
    double w = ld->st.sched_wait(ld->st.s) - ld->beat_wait;
    return w > 0 ? w : 0;
}

/* The poll that began at `now` (mono_now() read t0) has taken longer than
 * slow_s: the rest of it waits for the next (not a failure: every round
 * trip may have been in time; this bounds the loop's wait). */
static int over_budget(const leader_t *ld, double now, double t0)
{
    return ld->cfg.slow_s > 0 && poll_clock(ld, now, t0) - now > ld->cfg.slow_s;
}

/* The request sent at `sent` (our clock) by the poll that began at `now`
 * (mono_now() read t0) has just been answered: nonzero if its round trip
 * took longer than slow_s, a slow etcd's answer (the budget is per round
 * trip: the poll counts as failed). */
static int rt_slow(const leader_t *ld, double now, double t0, double sent)
{
    return ld->cfg.slow_s > 0 && poll_clock(ld, now, t0) - sent > ld->cfg.slow_s;
}

/* The leader's heartbeat, first thing in its poll (nothing of the poll
 * waits before it).  A heartbeat whose round trip is over slow_s landed,
 * but counts as late (beat_at stays: our fence comes no later) and fails
 * the poll.  Returns 0 or the store's error, -ETIMEDOUT for a slow one. */
static int beat_first(leader_t *ld, double now, double t0)
{
    double prev = ld->beat_at, sent = poll_clock(ld, now, t0);
    int rc = beat(ld, sent);
    if (rc == 0 && ld->leading && rt_slow(ld, now, t0, sent)) {
        ld->beat_at = prev;
        ld->beats_slow++;
        rc = -ETIMEDOUT;
    }
    return rc;
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

/* The shards key's value (`len` bytes) into *g: shardgen_parse(),
 * logging what and where it refused.  Returns 0 or -EINVAL. */
static int shards_parse(const leader_t *ld, const char *value, size_t len, shardgen_t *g)
{
    shardgen_error_t e;
    int rc = shardgen_parse(value, len, g, &e);
    if (rc < 0 && e.where[0])
        log_error("leader %s: etcd %s: %s: %s", ld->cfg.id, ld->key_shards, e.where, e.what);
    else if (rc < 0)
        log_error("leader %s: etcd %s: %s (line %d column %d)", ld->cfg.id, ld->key_shards,
                  e.what, e.line, e.col);
    return rc;
}

/* Agrees the cluster's K with etcd's /bqos/C/shards: creates it with ours
 * if absent (only if absent: the first shard controller's K wins), else
 * reads it and asks shardgen_admits().  Returns 0 (agreed), LEADER_EK
 * (not admitted, or garbage: logged once), or the store's error. */
static int shards_agree(leader_t *ld)
{
    char val[128];
    shardgen_t mine = shardgen_steady(ld->cfg.shards);
    int n = shardgen_format(&mine, val, sizeof val);
    if (n < 0)
        return n;
    etcd_cmp_t absent = {.key = ld->key_shards, .mod = 0, .rev = 0};
    int64_t rev = 0;
    int rc = ld->st.put_if(ld->st.s, &absent, 1, ld->key_shards, val, (size_t)n, 0, &rev);
    if (rc < 0)
        return rc;
    if (rc == 1) {
        ld->k_agreed = 1;
        ld->sg = mine;
        log_info("leader %s: the cluster's shards key %s created: %s", ld->cfg.id,
                 ld->key_shards, val);
        return 0;
    }
    etcd_kv_t kv, other;
    rc = ld->st.get2(ld->st.s, ld->key_shards, &kv, ld->key_leader, &other, 1, NULL);
    shardgen_t g = {0};
    int found = rc == 0 && kv.found;
    int bad = found ? shards_parse(ld, kv.value, kv.len, &g) : 0;
    etcd_kv_clear(&kv);
    etcd_kv_clear(&other);
    if (rc < 0 || !found)
        return rc < 0 ? rc : -EAGAIN; /* gone between the two: the next poll creates it */
    if (!bad && shardgen_admits(&g, ld->cfg.shards, ld->cfg.shard)) {
        ld->k_agreed = 1;
        ld->sg = g;
        ld->sg_reads++;
        if (g.k == ld->cfg.shards && !g.next_k)
            log_info("leader %s: the cluster's shards key %s holds K = %d, as --shards",
                     ld->cfg.id, ld->key_shards, g.k);
        else
            log_info("leader %s: the cluster's shards key %s holds K = %d (generation %llu): "
                     "this controller (--shards %d --shard %d) follows it", ld->cfg.id,
                     ld->key_shards, g.k, (unsigned long long)g.gen, ld->cfg.shards,
                     ld->cfg.shard);
        if (g.next_k)
            log_info("leader %s: K changes to %d (generation %llu) at wall-clock ms %lld",
                     ld->cfg.id, g.next_k, (unsigned long long)g.next_gen,
                     (long long)g.from_ms);
        return 0;
    }
    if (!bad)
        log_error("leader %s: the cluster runs %d shards (etcd %s, generation %llu%s) but this "
                  "controller has --shards %d --shard %d: it will not lead (restart it with "
                  "--shards %d; to change K, bqos-ctl shards set K')",
                  ld->cfg.id, g.k, ld->key_shards, (unsigned long long)g.gen,
                  g.next_k ? ", a change under way" : "", ld->cfg.shards, ld->cfg.shard, g.k);
    else
        log_error("leader %s: etcd %s does not hold a shards configuration: it will not lead "
                  "(fix or delete the key)", ld->cfg.id, ld->key_shards);
    ld->k_cluster = !bad ? g.k : -1;
    return LEADER_EK;
}

/* Reads the shards key again (once agreed): a change begun by any
 * controller reaches ld->sg within LEADER_SHARDS_READ_S.  A read that
 * does not parse keeps the last (counted, logged).  Returns 0 or the
 * store's error. */
static int shards_follow(leader_t *ld)
{
    etcd_kv_t kv, other;
    int rc = ld->st.get2(ld->st.s, ld->key_shards, &kv, ld->key_leader, &other, 1, NULL);
    shardgen_t g;
    if (rc == 0 && kv.found && shards_parse(ld, kv.value, kv.len, &g) == 0) {
        if (!shardgen_same(&g, &ld->sg) && g.next_k)
            log_info("leader %s: the cluster's shards key is now K = %d generation %llu, "
                     "changing to K = %d at wall-clock ms %lld", ld->cfg.id, g.k,
                     (unsigned long long)g.gen, g.next_k, (long long)g.from_ms);
        else if (!shardgen_same(&g, &ld->sg))
            log_info("leader %s: the cluster's shards key is now K = %d generation %llu",
                     ld->cfg.id, g.k, (unsigned long long)g.gen);
        ld->sg = g;
        ld->sg_reads++;
    } else if (rc == 0) {
        ld->sg_bad++;
    }
    etcd_kv_clear(&kv);
    etcd_kv_clear(&other);
    return rc;
}

/* Nonzero if the shards key as last read leaves our shard out at wall
 * instant now_ms (shardgen_out(): a change that names it again makes us
 * campaign before its period, as a new shard does). */
static int shard_out(const leader_t *ld, int64_t now_ms)
{
    return ld->key_shards && ld->k_agreed && shardgen_out(&ld->sg, ld->cfg.shard, now_ms);
}

/* Wall-clock milliseconds now (the shards key's instants are wall clock). */
static int64_t wall_now_ms(void)
{
    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    return (int64_t)rt.tv_sec * 1000 + rt.tv_nsec / 1000000;
}

/* A removed shard (shard_out()) from its change's period on: its leader
 * gives the leader key up (its lease revoked: the key goes with it) and
 * steps down, and no controller of it campaigns while the key leaves it
 * out.  The shard ran nothing from that period (reshard.h), so nothing is
 * lost; a node's session to it finds no leader and the node's tokens
 * filter takes none of its buckets from it.  Returns nonzero if out. */
static int shards_step_out(leader_t *ld)
{
    int out = shard_out(ld, wall_now_ms());
    if (out && ld->leading) {
        int rc = ld->lease ? ld->st.revoke(ld->st.s, ld->lease) : 0;
        if (rc < 0)
            log_warn("leader %s: cannot revoke lease: %s", ld->cfg.id, strerror(-rc));
        ld->sg_outs++;
        step_down(ld, "the cluster's shards key leaves this shard out (K changed): not "
                      "campaigning until a change names it again");
        ld->lease = 0;
    } else if (out && !ld->sg_out) {
        log_info("leader %s: the cluster's shards key leaves shard %d out: not campaigning",
                 ld->cfg.id, ld->cfg.shard);
    } else if (!out && ld->sg_out) {
        log_info("leader %s: the cluster's shards key names shard %d again: campaigning",
                 ld->cfg.id, ld->cfg.shard);
    }
    ld->sg_out = out;
    return out;
}

int leader_shards_begin(leader_t *ld, int k_new, int64_t now_ms, int64_t period_ms, int ahead,
                        shardgen_t *out)
{
    if (!ld->key_shards || !ld->leading || !ld->lead_rev)
        return -EPERM;
    etcd_kv_t kv, lk;
    int rc = ld->st.get2(ld->st.s, ld->key_shards, &kv, ld->key_leader, &lk, 1, NULL);
    if (rc < 0)
        goto out;
    shardgen_t g;
    if (!kv.found || !lk.found || lk.create_rev != ld->lead_rev) {
        rc = !kv.found ? -EINVAL : -EAGAIN;
        goto out;
    }
    if ((rc = shards_parse(ld, kv.value, kv.len, &g)) < 0)
        goto out;
    rc = shardgen_begin(&g, k_new, now_ms, period_ms, ahead);
    if (out)
        *out = g;
    if (rc < 0)
        goto out;
    char val[128];
    int n = shardgen_format(&g, val, sizeof val);
    if (n < 0) {
        rc = n;
        goto out;
    }
    etcd_cmp_t cmp[2] = {{.key = ld->key_shards, .mod = 1, .rev = kv.mod_rev},
                         {.key = ld->key_leader, .mod = 0, .rev = ld->lead_rev}};
    int64_t rev = 0;
    rc = ld->st.put_if(ld->st.s, cmp, 2, ld->key_shards, val, (size_t)n, 0, &rev);
    if (rc == 1) {
        rc = 0;
        ld->sg = g;
        log_info("leader %s: began a change of K from %d to %d (generation %llu) at wall-clock "
                 "ms %lld: %s", ld->cfg.id, g.k, g.next_k, (unsigned long long)g.next_gen,
                 (long long)g.from_ms, val);
    } else if (rc == 0) {
        rc = -EAGAIN;
    }
out:
    etcd_kv_clear(&kv);
    etcd_kv_clear(&lk);
    return rc;
}

int leader_shards_settle(leader_t *ld, int64_t now_ms, int64_t after_ms)
{
    if (!ld->key_shards || !ld->leading || !ld->lead_rev)
        return -EPERM;
    if (!ld->sg.next_k || now_ms < ld->sg.from_ms + after_ms)
        return 0;
    etcd_kv_t kv, lk;
    int rc = ld->st.get2(ld->st.s, ld->key_shards, &kv, ld->key_leader, &lk, 1, NULL);
    shardgen_t g;
    if (rc < 0)
        goto out;
    rc = -EAGAIN;
    if (!kv.found || !lk.found || lk.create_rev != ld->lead_rev ||
        shards_parse(ld, kv.value, kv.len, &g) < 0)
        goto out;
    rc = 0;
    if (!shardgen_settle(&g, now_ms - after_ms))
        goto out;
    char val[128];
    int n = shardgen_format(&g, val, sizeof val);
    etcd_cmp_t cmp[2] = {{.key = ld->key_shards, .mod = 1, .rev = kv.mod_rev},
                         {.key = ld->key_leader, .mod = 0, .rev = ld->lead_rev}};
    int64_t rev = 0;
    rc = n < 0 ? n : ld->st.put_if(ld->st.s, cmp, 2, ld->key_shards, val, (size_t)n, 0, &rev);
    if (rc == 1) {
        ld->sg = g;
        log_info("leader %s: the change to K = %d has come: the shards key is %s", ld->cfg.id,
                 g.k, val);
    } else if (rc == 0) {
        rc = -EAGAIN;
    }
out:
    etcd_kv_clear(&kv);
    etcd_kv_clear(&lk);
    return rc;
}

int leader_poll(leader_t *ld, double now)
{
    if (ld->k_cluster) /* another K: never leads (the caller exits) */
        return LEADER_EK;
    if (ld->leading && !lease_ok(ld, now) && beat_overdue(ld, now)) {
        /* no heartbeat and no renewal in time: a slow etcd, as below */
        ld->bad_at = now;
        ld->gray_stepdowns++;
        step_down(ld, "lease not renewed and heartbeat late (etcd slow or host starved): not "
                      "leading again before etcd answers in time");
    } else if (ld->leading && !lease_ok(ld, now)) {
        step_down(ld, "lease not renewed in time by our clock");
    }
    if (ld->leading && beat_overdue(ld, now) && ld->lapse_at != ld->beat_at &&
        now - own_wait(ld) < beat_fence(ld)) {
        /* late only by the time our thread waited for a CPU: the host's
         * stall, not etcd's failure; pushes pause all the same */
        ld->lapse_at = ld->beat_at;
        ld->host_lapses++;
        log_info("leader %s: heartbeat %.0f ms old, %.0f ms of it waiting for a CPU: a host "
                 "stall, pushes pause, not counted as etcd's", ld->cfg.id,
                 (now - ld->beat_at) * 1e3, own_wait(ld) * 1e3);
    } else if (ld->leading && beat_overdue(ld, now) && ld->lapse_at != ld->beat_at) {
        /* a late heartbeat: pushes pause until the next lands (late by
         * the takeover time too: a standby that deposed us meanwhile is
         * found by that heartbeat's compare, which comes first in the
         * poll); the second within hold_s is a gray failure, not a
         * hiccup */
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
            ltable_step(ld);
        return 0;
    }
    ld->next_poll = now + ld->cfg.poll_s;
    ld->polls++;
    double t0 = mono_now(), sent;
    /* the heartbeat first, then the lease when a quarter of it has gone
     * (or the heartbeat failed: the lease may be why), then the read;
     * each round trip within slow_s, and no request sent once the poll
     * has taken slow_s (the rest waits for the next poll) */
    int beaten = ld->leading && ld->cfg.stale_s > 0;
    int rc = beaten ? beat_first(ld, now, t0) : 0;
    if (!ld->lease || now >= ld->renew_at - ld->cfg.poll_s / 2 || (rc < 0 && rc != -ETIMEDOUT)) {
        if (rc == -ETIMEDOUT || over_budget(ld, now, t0))
            goto out; /* a lease held lasts to the next poll (lease_ok) */
        sent = poll_clock(ld, now, t0);
        int rrc = renew(ld, now);
        if (rrc == 0 && rt_slow(ld, now, t0, sent))
            rrc = -ETIMEDOUT;
        if (rrc < 0 || rc < 0) {
            rc = rc < 0 ? rc : rrc;
            goto out;
        }
    }
    if (rc < 0)
        goto out;
    if (ld->leading && !lease_ok(ld, now)) {
        step_down(ld, "lease about to end");
        goto out;
    }
    if (over_budget(ld, now, t0))
        goto out; /* the read waits for the next poll */
    if (ld->key_shards && !ld->k_agreed) { /* K before any read or campaign */
        sent = poll_clock(ld, now, t0);
        rc = shards_agree(ld);
        if (rc == 0 && rt_slow(ld, now, t0, sent))
            rc = -ETIMEDOUT;
        if (rc < 0)
            goto out;
        ld->sg_next = now + LEADER_SHARDS_READ_S;
    } else if (ld->key_shards && now >= ld->sg_next) { /* a change of K, begun anywhere */
        ld->sg_next = now + LEADER_SHARDS_READ_S;
        sent = poll_clock(ld, now, t0);
        rc = shards_follow(ld);
        if (rc == 0 && rt_slow(ld, now, t0, sent))
            rc = -ETIMEDOUT;
        if (rc < 0)
            goto out;
        if (over_budget(ld, now, t0))
            goto out;
    }
    int out_of_map = shards_step_out(ld);
    etcd_kv_t lk, bk;
    int64_t hdr = 0;
    sent = poll_clock(ld, now, t0);
    rc = ld->st.get2(ld->st.s, ld->key_leader, &lk, ld->key_head, &bk, 0, &hdr);
    if (rc < 0) {
        etcd_kv_clear(&lk);
        etcd_kv_clear(&bk);
        goto out;
    }
    double seen = poll_clock(ld, now, t0); /* the answer is at least this recent */
    if (rt_slow(ld, now, t0, sent)) {
        rc = -ETIMEDOUT; /* no heartbeat, no campaign on an answer this late */
    } else if (over_budget(ld, now, t0)) {
        rc = 0; /* in time, but the poll has had its budget: acting waits */
    } else if (out_of_map) {
        if (lk.found)
            note_leader(ld, &lk); /* no campaign, no deposing, no taking back */
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
            beaten = 0;
        }
        if (ld->leading && ld->cfg.stale_s > 0 && !beaten)
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
        ltable_follow(ld, &bk, hdr, poll_clock(ld, now, t0));
    etcd_kv_clear(&lk);
    etcd_kv_clear(&bk);
out:
    if (rc < 0 && rc != LEADER_EK) {
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
            log_warn("leader %s: etcd: a round trip over its %.0f ms budget", ld->cfg.id,
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
    return ltable_write(ld, text, len);
}

int leader_put_bucket(leader_t *ld, const char *name, const char *json, size_t len,
                      uint64_t version, double now)
{
    if (!leader_leads(ld, now))
        return -EPERM;
    if (!json)
        return -EINVAL;
    return ltable_change(ld, name, json, len, version);
}

int leader_remove_bucket(leader_t *ld, const char *name, uint64_t version, double now)
{
    if (!leader_leads(ld, now))
        return -EPERM;
    return ltable_change(ld, name, NULL, 0, version);
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
