/* leader.h - bqos-controller's leader election and shared bucket table in etcd: a lease kept alive, a leader key created under it by transaction, the leader's epoch, and the bucket table key that every controller follows.
 *
 * Keys (PREFIX = "/bqos/<cluster>/"):
 *   PREFIX "leader"   the leader's identity, JSON {"id","admin","listen"},
 *                     attached to its lease: it disappears when the lease
 *                     expires or is revoked, or when a standby deposes
 *                     the leader (below)
 *   PREFIX "buckets"  the bucket table as a bucket file's JSON
 *
 * Election: every controller holds a lease of `ttl_s` and renews it at
 * each poll.  A controller that finds no leader key creates it in a
 * transaction ("create_revision == 0", put with its lease); the one whose
 * transaction succeeds leads.
 *
 * Epochs (docs/controller.md "Epochs"): a leader's epoch is its key's
 * create_revision plus the "floor" its value carries (0 if absent).  etcd's
 * revision only grows, so with an unchanged floor each new leader is above
 * every earlier one.  But an etcd that lost its data (or was restored from
 * a backup) counts revisions from 1 again, while the nodes obey only the
 * highest epoch they have seen.  So every controller keeps the highest
 * epoch it knows in use: its own past ones, every leader's it saw, and
 * what the nodes say they obey (their hello and reports, "follows",
 * leader_note_follows()).  A winner whose floor + revision is not above it
 * raises its floor to it before it leads, and a leader raises it while
 * leading when a node reports a higher one; each raise rewrites the leader
 * key in a transaction that requires the key's create_revision to be ours
 * (and our lease), so a deposed leader cannot raise: it learns it is
 * deposed instead.  A campaign writes the floor of the last leader seen.
 *
 * Takeover within two intervals: the leader's heartbeat.  With `stale_s`
 * > 0 the leader writes its key again at every poll (same value and
 * lease, in a transaction that requires the key's create_revision to be
 * its epoch), so that the key's mod_revision moves; its value declares
 * "stale_ms".  A standby that sees the mod_revision unchanged for longer
 * than the leader declared, by its own clock from the answer that first
 * showed it, deletes the key by a transaction that requires that same
 * mod_revision (a heartbeat that lands meanwhile cancels it) and
 * campaigns: a killed leader is replaced within stale_s plus two polls
 * of its last heartbeat (main: 1.25 intervals + 2 x interval/4; from its
 * death 1-1.75 intervals) instead of a lease.  The trade-off: a leader that is alive but cannot write a
 * heartbeat for that long (a GC-like pause, a starved host, a slow etcd)
 * is deposed after about 1.5 intervals; it learns it at its next etcd
 * call (its heartbeat's compare fails: the key is not its own) and steps
 * down.
 * A leader whose value has no stale_ms (0, or an older bqos) is replaced
 * only when its lease expires.
 *
 * Gray failures (hold_s > 0, docs/controller.md "A slow etcd"): an etcd
 * that answers some polls and not others would let a leader push, stop at
 * its fence, push again after a late heartbeat, round after round, so
 * that the nodes' tokens swing.  Instead a poll is cut short when it has
 * taken slow_s, and counts as failed like an error; a leader whose
 * heartbeat has not landed by its fence pauses its pushes (as without
 * hold_s), but the second time within hold_s it steps down for good (it
 * does not resume at its next heartbeat: one stall of a busy host is a
 * hiccup, a pattern is a failure); and no controller leads (campaigns,
 * deposes, takes back a key of its own: it deletes it instead, handing
 * over) until its polls have all been in time for hold_s.  A slow etcd
 * thus gives a clean hand-over to a controller whose etcd answers, or,
 * when none does, no leader: the nodes fall back to their static policy
 * until etcd has been healthy for hold_s.
 *
 * Fencing by our own clock: the lease cannot expire at etcd before
 * (send time of the last successful grant or keepalive) + TTL, so the
 * leader considers itself leader only until that instant less `margin_s`.
 * And no standby can depose it before (send time of its last successful
 * heartbeat) + stale_s, so it pushes to nodes only until that instant less
 * one poll (leader_may_push()): a leader that cannot beat in time stops
 * pushing at once, before it talks to etcd again, and pushes again after
 * its next heartbeat if it was not deposed meanwhile.  A paused (SIGSTOP)
 * leader is fenced by both when it wakes.  The nodes' epoch check is the
 * second fence: a new leader's epoch is higher, and nodes obey only the
 * highest they have seen.
 *
 * The bucket table: at each poll the leader key and the table key's
 * revisions are read in one transaction; a table whose mod_revision differs
 * from the one last applied is then read whole and handed to hooks.apply
 * (leader and standbys alike).  A missing
 * table key is created from hooks.bootstrap (the --buckets file).  The
 * leader writes a change with leader_write_buckets(): a transaction that
 * compares the table's mod_revision (no lost update) and the leader key's
 * create_revision (a deposed leader cannot write).
 *
 * Acknowledged changes survive etcd losing its data (docs/controller.md,
 * "Acknowledged changes"): every table carries a version (the bucket
 * file's "table_version", one more per change) and every controller keeps
 * the newest table it knows (hooks.apply refuses an older one with
 * -ESTALE).  A controller, leader or standby, that finds the table key
 * missing, or holding a table older than its own, writes its own back
 * (hooks.bootstrap) by a transaction that requires what it saw (the key
 * absent, or that mod_revision), so that it never overwrites a table it
 * has not judged, and says so at warn.  A lost lease (etcd may have lost
 * its data and count revisions from 1 again) makes the next poll read the
 * table whole, whatever its revision.
 *
 * etcd is reached through leader_store_t, so that tests can drive the
 * state machine with a store of their own and fake time.
 *
 * A leader_t belongs to the controller's loop thread, as does its store;
 * nothing locks.  Every call that reaches the store blocks for at most the
 * store's own bound (etcd.h). */
#ifndef BQOS_LEADER_H
#define BQOS_LEADER_H

#include <stddef.h>
#include <stdint.h>

#include "controller/daemon/etcd.h"

/* The largest epoch (the protocol's, PROTO_MAX_COUNT = 2^53). */
#define LEADER_EPOCH_MAX (UINT64_C(1) << 53)

/* The largest bucket table written to etcd as one value: etcd refuses a
 * request over its --max-request-bytes (default 1.5 MiB) with HTTP 429,
 * and a leader that sent a bigger one at every poll would miss its lease
 * (issue 26 case 5).  Bigger tables are refused before they are sent; one
 * key per bucket is the real fix (docs/decisions.md). */
#define LEADER_TABLE_MAX (1536u * 1024u - 8192u)

/* The etcd operations the election needs (etcd.h's, with `s` the etcd_t). */
typedef struct {
    int (*grant)(void *s, int64_t ttl, int64_t *id, int64_t *granted);
    int (*keepalive)(void *s, int64_t id, int64_t *ttl);
    int (*revoke)(void *s, int64_t id);
    int (*get2)(void *s, const char *k1, etcd_kv_t *v1, const char *k2, etcd_kv_t *v2,
                int keys_only2);
    int (*put_if)(void *s, const etcd_cmp_t *cmp, size_t ncmp, const char *key,
                  const char *value, size_t len, int64_t lease, int64_t *rev);
    int (*delete_if)(void *s, const etcd_cmp_t *cmp, size_t ncmp, const char *key);
    int (*compact)(void *s, int64_t rev); /* may be NULL */
    double (*clock)(void *s); /* NULL: mono_now(); tests pass their fake time */
    void *s;
} leader_store_t;

/* The store that talks to etcd through `e` (borrowed). */
leader_store_t leader_store_etcd(etcd_t *e);

/* What the election asks of the controller.  Called from leader_poll()
 * and leader_write_buckets() on the loop thread. */
typedef struct {
    /* The table key holds `text` (`len` bytes, borrowed) at revision `rev`:
     * make it the configuration.  Returns 0, -ESTALE if it is older than
     * the table in force here (not applied: the poll writes bootstrap's
     * text back in its place), or another error (logged by the callee; the
     * revision is not applied again). */
    int (*apply)(void *arg, const char *text, size_t len, int64_t rev);
    /* We became the leader (epoch > 0) or stopped leading (epoch 0). */
    void (*role)(void *arg, uint64_t epoch);
    /* The table to create when the key is missing, or to restore over an
     * older one: the newest this controller knows, a new text (caller of
     * the hook frees it) or NULL for none. */
    char *(*bootstrap)(void *arg, size_t *len);
    void *arg;
} leader_hooks_t;

typedef struct {
    const char *cluster;   /* key prefix part, 1..100 bytes, no '/' */
    const char *id;        /* this controller's name, unique in the cluster */
    const char *admin;     /* its admin endpoint (told to bqos-ctl), may be "" */
    const char *listen;    /* its node endpoint, may be "" */
    double ttl_s;          /* lease TTL asked for, >= 1 */
    double margin_s;       /* stop leading this long before the lease's end */
    double poll_s;         /* time between polls, > 0 */
    double stale_s;        /* 0: no heartbeat (takeover at lease expiry);
                              else >= 2 x poll_s: a standby may depose us
                              after this long without a heartbeat */
    double slow_s;         /* a poll that takes longer is over its budget:
                              counted as failed, the rest of it skipped
                              (0: no budget, only errors count) */
    double hold_s;         /* gray failures (0: off): with a heartbeat, a
                              leader whose heartbeat is late twice within
                              hold_s steps down for good instead of
                              pausing its pushes again, and
                              no controller leads (campaigns, deposes or
                              takes back its own key) before etcd has
                              answered every poll in time for hold_s */
} leader_config_t;

typedef struct {
    leader_config_t cfg;
    leader_store_t st;
    leader_hooks_t hooks;
    char *key_leader, *key_buckets, *value; /* owned */
    int64_t lease;          /* 0: none */
    int64_t lease_ttl;      /* as granted */
    double lease_until;     /* our clock: the lease cannot end before this */
    int leading;
    uint64_t epoch;         /* ours while leading (floor + lead_rev), else 0 */
    uint64_t leader_epoch;  /* the leader's epoch last seen (floor +
                               create_revision of its key) */
    int64_t lead_rev;       /* leading: our key's create_revision, else 0 */
    uint64_t floor;         /* epoch floor: ours while leading, else the
                               last leader's as seen */
    uint64_t known;         /* highest epoch led by us (before) or by a
                               leader we saw */
    uint64_t follows;       /* highest epoch a node said it obeys */
    uint64_t raises;        /* times we raised our floor */
    char leader_id[256], leader_admin[256]; /* from the leader key; "" unknown */
    int64_t buckets_rev;    /* mod_revision of the table last applied (0:
                               read it whole at the next poll) */
    uint64_t table_version; /* the version of the table in force here; set
                               by the controller (admin.c), shown in logs */
    uint64_t restores;      /* tables we wrote back over a missing or older one */
    double beat_at;         /* leading: our clock when our last successful
                               heartbeat (or campaign) was sent */
    int64_t compact_next;   /* revision of the next compaction (0: unset) */
    double leader_stale_s;  /* the leader's declared stale_ms / 1000 (0: none) */
    int64_t seen_create, seen_mod; /* standby: the leader key's revisions last seen */
    double seen_at;         /* our clock when they were first seen */
    uint64_t beats, depositions; /* heartbeats written; leaders we deposed */
    double next_poll;
    uint64_t polls, errors, elections, stepdowns;
    double poll_seconds;    /* wall time the polls took (etcd's cost to the loop) */
    double bad_at;          /* our clock at the last poll that failed or
                               went over slow_s, or heartbeat that came
                               late (-inf: none) */
    double lapse_at;        /* beat_at of the last heartbeat found late */
    double lapse_seen;      /* our clock when it was found late (-inf: never) */
    uint64_t slow_polls;    /* polls over slow_s (cut short) */
    uint64_t gray_stepdowns; /* times we stopped leading for a late heartbeat */
} leader_t;

/* Sets up `ld` (nothing is sent yet; the first leader_poll() does).
 * Returns 0, -EINVAL (bad config), -ENOMEM. */
int leader_init(leader_t *ld, const leader_config_t *cfg, const leader_store_t *st,
                const leader_hooks_t *hooks);

/* Frees what ld owns.  Accepts a zeroed ld. */
void leader_clear(leader_t *ld);

/* If a poll is due at `now` (monotonic seconds, taken just before the
 * call): renews (or grants) the lease, steps down if it is lost or
 * about to end, reads the leader and table keys, writes the leader's
 * heartbeat (stepping down if the key is no longer its own), campaigns if
 * there is no leader or deposes a leader whose heartbeat is stale, applies
 * a new table.  Also steps down without a poll when the
 * lease is about to end.  Returns 0, or the store's error (logged; the next
 * poll tries again). */
int leader_poll(leader_t *ld, double now);

/* Nonzero if this controller may send to nodes at `now`: it leads, its
 * lease is safely alive by its own clock and (with a heartbeat) no standby
 * can have deposed it yet. */
int leader_may_push(const leader_t *ld, double now);

/* Nonzero if this controller leads at `now` (its lease is safely alive by
 * its own clock): it may write the table and says "leader" in its status,
 * even while a late heartbeat keeps it from pushing. */
int leader_leads(const leader_t *ld, double now);

/* When the loop must next call leader_poll(). */
double leader_next(const leader_t *ld);

/* The leader writes table `text` (`len` bytes).  Returns 0 (written; its
 * revision counts as applied), -EPERM (not leader_leads()), -EAGAIN (the table
 * or the leadership changed meanwhile: nothing written), -E2BIG (over
 * LEADER_TABLE_MAX: nothing sent), or the store's error. */
int leader_write_buckets(leader_t *ld, const char *text, size_t len, double now);

/* Notes that an authenticated node obeys `epoch` (its hello or report
 * said so): the next poll leads above it if we lead, or a later
 * win does.  Values above LEADER_EPOCH_MAX are ignored. */
void leader_note_follows(leader_t *ld, uint64_t epoch);

/* Gives up leadership and the lease (clean shutdown): the key goes at
 * once, so a standby takes over at its next poll. */
void leader_resign(leader_t *ld);

#endif
