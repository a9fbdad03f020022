/* leader.h - bqos-controller's leader election and shared bucket table in etcd: a lease kept alive, a leader key created under it by transaction, the leader's epoch, and the bucket table (one key per bucket) that every controller follows.
 *
 * Keys (PREFIX = "/bqos/<cluster>/"):
 *   PREFIX "leader"   the leader's identity, JSON {"id","admin","listen"},
 *                     (with shards, cfg.shards > 0: PREFIX "shard/S/leader",
 *                     one election, lease and epoch per shard S; the
 *                     bucket table below is one for every shard)
 *                     attached to its lease: it disappears when the lease
 *                     expires or is revoked, or when a standby deposes
 *                     the leader (below)
 *   PREFIX "b/"       the table's head: the bucket file's top-level
 *                     members but "buckets" (its "table_version", and any
 *                     later member) as a JSON object, plus "complete"
 *   PREFIX "b/NAME"   bucket NAME's object of the bucket file
 *   PREFIX "buckets"  (before this layout: the whole bucket file as one
 *                     value; read once and rewritten as above, then gone)
 *
 * Election: every controller holds a lease of `ttl_s` and renews it at
 * the first poll a quarter TTL after the last renewal.  A controller that finds no leader key creates it in a
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
 * showed it (each gap between two of its answers counted for at most two
 * polls: a stall of its own host is not the leader's silence), deletes
 * the key by a transaction that requires that same
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
 * that the nodes' tokens swing.  Instead each round trip has a budget of
 * slow_s: one over it counts as failed like an error, and a heartbeat
 * over it counts as late (it landed, but our fence does not move); a poll
 * that has taken slow_s sends nothing more (the rest waits for the next
 * poll, not a failure).  The leader's poll writes its heartbeat first,
 * renews the lease only every quarter TTL, then reads, so that a busy but
 * healthy etcd (round trips within slow_s, a poll of two or three over it)
 * lets every heartbeat land, and only an etcd whose own round trips are
 * slow or failing makes it late (docs/controller.md, "A busy host").  A
 * leader whose
 * heartbeat has not landed by its fence pauses its pushes (as without
 * hold_s), but the second time within hold_s, or when its lease runs out
 * by its clock while its heartbeat is late, it steps down for good (it
 * does not resume at its next heartbeat: one stall of a busy host is a
 * hiccup, a pattern is a failure); and no controller leads (campaigns,
 * deposes, takes back a key of its own: it deletes it instead, handing
 * over) until its polls have all been in time for hold_s.  A slow etcd
 * thus gives a clean hand-over to a controller whose etcd answers, or,
 * when none does, no leader: the nodes fall back to their static policy
 * until etcd has been healthy for hold_s.  A heartbeat late only by the
 * time our own thread waited runnable for a CPU since it was sent (the
 * store's sched_wait: a busy host did not run us, and had we run, it would
 * have been in time) pauses the pushes but is not counted.
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
 * The bucket table (docs/decisions.md "One key per bucket"): a bucket file
 * in etcd as one key per bucket and a head key.  The head is always the
 * last thing written:
 *   - a change to one bucket (leader_put_bucket(), leader_remove_bucket())
 *     is one transaction: the bucket's key and the head (its new
 *     table_version), compared on the head's mod_revision as last applied
 *     (no lost update) and on the leader key's create_revision (a deposed
 *     leader cannot write);
 *   - a whole table (a bootstrap, a restore, a migration, reload/import:
 *     leader_write_buckets()) first writes the head "complete": false by a
 *     transaction that requires what the writer judged (the head absent, or
 *     at the mod_revision it saw): that claims the table; then the buckets
 *     in transactions of at most LEADER_TXN_OPS operations and
 *     LEADER_TXN_BYTES bytes, each requiring the claim to stand (the head
 *     unchanged), deleting the keys of buckets the table no longer has;
 *     then the head "complete": true, again on the claim.  A reader takes a
 *     table only under a complete head: never half a table.  A claim that
 *     has not moved for a lease is taken over by whoever holds a table; a
 *     claim of an older table at once by the holder of a newer one.
 * Reading: at each poll the leader key and the head are read in one
 * transaction.  A head whose mod_revision differs from the one last
 * applied: its changes are replayed by a watch from the revision after it
 * up to the head's (etcd_watch(): a stream read until then, bounded as
 * every call) and handed to hooks.change bucket by bucket; the whole table
 * is read (a paged range read at one revision, LEADER_PAGE keys a page) and
 * handed to hooks.apply instead when this controller has not followed yet,
 * when the history is compacted, when a whole table was written meanwhile
 * (an incomplete head in the history), or when hooks.change is NULL.  A
 * missing head is created from hooks.bootstrap (the --buckets file); an old
 * single table key is applied and rewritten as keys by the leader.
 *
 * Acknowledged changes survive etcd losing its data (docs/controller.md,
 * "Acknowledged changes"): every table carries a version (the bucket
 * file's "table_version", one more per change) and every controller keeps
 * the newest table it knows (hooks.apply refuses an older one with
 * -ESTALE).  A controller, leader or standby, that finds the head
 * missing, or a table older than its own, writes its own back
 * (hooks.bootstrap) by a transaction that requires what it saw (the head
 * absent, or that mod_revision), so that it never overwrites a table it
 * has not judged, and says so at warn.  An etcd that lost its data counts
 * revisions from 1 again, so the head's revisions alone do not say it is
 * the table we applied: its version must match too, or the table is read
 * whole.
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

#include "common/shardgen.h"
#include "controller/daemon/etcd.h"

/* The largest epoch (the protocol's, PROTO_MAX_COUNT = 2^53). */
#define LEADER_EPOCH_MAX (UINT64_C(1) << 53)

/* etcd's limits on one transaction, by default: --max-txn-ops 128 and
 * --max-request-bytes 1.5 MiB (a request over it: HTTP 429).  A whole
 * table is written in transactions under both (base64 and JSON counted);
 * one bucket's object or the head over LEADER_TABLE_MAX is refused
 * (-E2BIG) before it is sent. */
#define LEADER_TXN_OPS 128
#define LEADER_TXN_BYTES (1024u * 1024u)
#define LEADER_TABLE_MAX (512u * 1024u)
/* Keys per page of a whole-table read. */
#define LEADER_PAGE 8192
/* A whole table written by the poll (a bootstrap, a restore, a migration)
 * takes the loop for about this long at a time (at least one transaction),
 * between its other work, until it is done. */
#define LEADER_STEP_S 0.02

/* The etcd operations the election needs (etcd.h's, with `s` the etcd_t). */
typedef struct {
    int (*grant)(void *s, int64_t ttl, int64_t *id, int64_t *granted);
    int (*keepalive)(void *s, int64_t id, int64_t *ttl);
    int (*revoke)(void *s, int64_t id);
    int (*get2)(void *s, const char *k1, etcd_kv_t *v1, const char *k2, etcd_kv_t *v2,
                int keys_only2, int64_t *hdr);
    int (*put_if)(void *s, const etcd_cmp_t *cmp, size_t ncmp, const char *key,
                  const char *value, size_t len, int64_t lease, int64_t *rev);
    int (*delete_if)(void *s, const etcd_cmp_t *cmp, size_t ncmp, const char *key);
    int (*compact)(void *s, int64_t rev); /* may be NULL */
    int (*txn)(void *s, const etcd_cmp_t *cmp, size_t ncmp, const etcd_op_t *ops, size_t nops,
               int64_t *rev);
    int (*range)(void *s, const char *key, const char *end, int64_t rev, size_t limit,
                 int keys_only, etcd_kv_t **kvs, size_t *n, int *more, int64_t *hdr);
    int (*watch)(void *s, const char *key, const char *end, int64_t start, int64_t until,
                 etcd_event_fn fn, void *arg); /* NULL: changes read whole */
    double (*clock)(void *s); /* NULL: mono_now(); tests pass their fake time */
    double (*sched_wait)(void *s); /* seconds the calling thread has waited
                                      runnable for a CPU, cumulative (the
                                      etcd store: /proc/thread-self/schedstat);
                                      NULL: none known */
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
    /* One change of the table followed from etcd: bucket `name` is now the
     * JSON object `json` (`len` bytes, borrowed), or removed (json NULL),
     * and the table's version `version`, at revision `rev`.  Returns 0, or
     * an error: the table is then read whole at the next poll (through
     * apply).  NULL: every change is read whole. */
    int (*change)(void *arg, const char *name, const char *json, size_t len, uint64_t version,
                  int64_t rev);
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
    double slow_s;         /* a round trip that takes longer counts as
                              failed (a heartbeat: as late); a poll that
                              has taken this long sends nothing more
                              (0: no budget, only errors count) */
    double hold_s;         /* gray failures (0: off): with a heartbeat, a
                              leader whose heartbeat is late twice within
                              hold_s steps down for good instead of
                              pausing its pushes again, and
                              no controller leads (campaigns, deposes or
                              takes back its own key) before etcd has
                              answered every poll in time for hold_s */
    int shards, shard;     /* controller shards (0: none): this controller
                              stands for shard `shard` (0..shards-1, shards
                              <= 256) under its own leader key */
} leader_config_t;

typedef struct {
    leader_config_t cfg;
    leader_store_t st;
    leader_hooks_t hooks;
    char *key_leader, *key_head, *key_end, *key_legacy, *value; /* owned; key_end:
                               the end of the table's range (after every
                               PREFIX "b/..." key) */
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
    int64_t buckets_rev;    /* mod_revision of the head last applied (0:
                               read it whole at the next poll) */
    int64_t buckets_seen;   /* a revision at which the head was still
                               buckets_rev: a watch starts after it */
    int64_t head_create;    /* create_revision of the head last applied */
    int64_t legacy_rev;     /* mod_revision of the old table key applied */
    int64_t claim_rev;      /* an incomplete head's mod_revision seen ... */
    double claim_at;        /* ... first at this time (our clock) */
    void *head;             /* json_t: the head last applied or written */
    void *job;              /* a whole table being written, or NULL */
    uint64_t follows_changes, whole_reads; /* changes replayed; whole reads */
    uint64_t table_version; /* the version of the table in force here; set
                               by the controller (admin.c), shown in logs */
    uint64_t restores;      /* tables we wrote back over a missing or older one */
    double beat_at;         /* leading: our clock when our last successful
                               heartbeat (or campaign) was sent */
    int64_t compact_next;   /* revision of the next compaction (0: unset) */
    double leader_stale_s;  /* the leader's declared stale_ms / 1000 (0: none) */
    int64_t seen_create, seen_mod; /* standby: the leader key's revisions last seen */
    double seen_at;         /* our clock when they were first seen */
    double seen_last;       /* our clock at the last answer showing them */
    double seen_quiet;      /* how long we watched them unchanged: the
                               gaps between our answers, each counted for
                               at most two polls */
    uint64_t beats, depositions; /* heartbeats written; leaders we deposed */
    double next_poll;
    uint64_t polls, errors, elections, stepdowns;
    double poll_seconds;    /* wall time the polls took (etcd's cost to the loop) */
    double bad_at;          /* our clock at the last poll that failed or
                               went over slow_s, or heartbeat that came
                               late (-inf: none) */
    double lapse_at;        /* beat_at of the last heartbeat found late */
    double lapse_seen;      /* our clock when it was found late (-inf: never) */
    uint64_t slow_polls;    /* polls with a round trip over slow_s */
    uint64_t beats_slow;    /* heartbeats that landed over slow_s (late) */
    double beat_wait;       /* st.sched_wait() when our last heartbeat was sent */
    uint64_t host_lapses;   /* late heartbeats not counted: late only by our
                               thread's wait for a CPU (a host stall) */
    double renew_at;        /* our clock: the lease is renewed at the first
                               poll from here (a quarter TTL after the last
                               renewal) */
    uint64_t gray_stepdowns; /* times we stopped leading for a late heartbeat */
    /* Controller shards: the cluster's K in etcd (/bqos/C/shards, {"k": K}),
     * checked before the first read and campaign (leader_poll()) */
    char *key_shards;       /* owned; NULL without shards */
    int k_agreed;           /* the key holds our K (we created it, or read it) */
    int k_cluster;          /* the K the key holds when it differs (0: none
                               seen); the poll then returns LEADER_EK and
                               never campaigns */
    /* K changing at run time (common/shardgen.h): the key's value as last
     * read, read again every LEADER_SHARDS_READ_S once agreed, so that
     * every controller learns a change (bqos-ctl shards set) well before
     * its period; the daemon hands it to its reshard_t */
    shardgen_t sg;          /* valid once k_agreed */
    uint64_t sg_reads;      /* reads of the key that parsed */
    uint64_t sg_bad;        /* reads that did not parse (kept the last) */
    double sg_next;         /* our clock: the next read */
    int sg_out;             /* the key leaves our shard out now (a change
                               removed it): we do not lead, nor campaign,
                               until a change names it again */
    uint64_t sg_outs;       /* times we stepped down for that */
} leader_t;

/* How often a controller that agreed K reads the shards key again. */
#define LEADER_SHARDS_READ_S 1.0

/* leader_poll()'s answer when the cluster's K (/bqos/C/shards) does not
 * admit this controller (shardgen_admits(): its --shards is neither the
 * key's k nor its next k, and no change has happened that would make its
 * flag merely stale), or the key does not parse: it never leads. */
#define LEADER_EK (-EDOM)

/* Sets up `ld` (nothing is sent yet; the first leader_poll() does).
 * Returns 0, -EINVAL (bad config), -ENOMEM. */
int leader_init(leader_t *ld, const leader_config_t *cfg, const leader_store_t *st,
                const leader_hooks_t *hooks);

/* Frees what ld owns.  Accepts a zeroed ld. */
void leader_clear(leader_t *ld);

/* If a poll is due at `now` (monotonic seconds, taken just before the
 * call): writes the leader's heartbeat first (stepping down if the key is
 * no longer its own), renews (or grants) the lease when a quarter TTL has
 * passed since the last renewal (or the heartbeat failed), steps down if
 * it is lost or about to end, reads the leader and table keys, campaigns if
 * there is no leader or deposes a leader whose heartbeat is stale, applies
 * a new table.  Also steps down without a poll when the
 * lease is about to end.  With shards (cfg.shards K > 0) the first poll
 * that reaches etcd agrees K first: it creates /bqos/C/shards = {"k": K}
 * if the key is missing (a transaction: only if absent), else reads it;
 * until it agrees there is no read and no campaign.  Returns 0, LEADER_EK
 * (the key holds another K or garbage: logged at error, ld->k_cluster;
 * this controller must not lead: every later poll returns LEADER_EK at
 * once), or the store's error (logged; the next poll tries again). */
int leader_poll(leader_t *ld, double now);

/* Begins a change of the cluster's K to k_new (bqos-ctl shards set): reads
 * /bqos/C/shards, makes its "next" with shardgen_begin() (the first
 * period boundary at least `ahead` periods of period_ms after now_ms, the
 * wall clock) and writes it in a transaction that holds only if the key
 * has not changed since the read and our leader key is still ours (so a
 * deposed leader or two operators at once cannot both begin one).  *out
 * (may be NULL) gets the configuration written (or, for -EALREADY and
 * -EBUSY, the one in etcd).  Only a shard's leader may call it.  Returns
 * 0, -EPERM (not leading, or without shards), -EINVAL (bad k_new or ahead;
 * a key that does not parse), -EALREADY, -EBUSY (shardgen_begin()),
 * -EAGAIN (the key or leadership changed meanwhile: try again), or the
 * store's error.  Blocks for two round trips to etcd (the admin thread's
 * caller, as a table change does). */
int leader_shards_begin(leader_t *ld, int k_new, int64_t now_ms, int64_t period_ms, int ahead,
                        shardgen_t *out);

/* Folds a change of K whose period has passed by `after_ms` into the key
 * (etcd: {"k": K', "gen": G + 1}, no "next"), so that nodes stop reporting
 * to the shard a bucket left: shard 0's leader calls it (the root; once a
 * period is plenty).  The same transaction as leader_shards_begin().
 * Returns 1 (written), 0 (nothing to fold: no change, or its period not
 * passed yet by after_ms), -EPERM (not leading), -EAGAIN, or the store's
 * error.  Two round trips to etcd. */
int leader_shards_settle(leader_t *ld, int64_t now_ms, int64_t after_ms);

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

/* The leader writes table `text` (`len` bytes, a bucket file's JSON) whole
 * (claim, buckets in transactions, complete head: above).  Blocks for the
 * transactions it takes (a table of n buckets: n / 127 of them).  Returns
 * 0 (written; its revision counts as applied), -EPERM (not
 * leader_leads()), -EAGAIN (the table or the leadership changed meanwhile:
 * the table in etcd is incomplete or as it was, and the next poll reads
 * it), -EINVAL (not a JSON object with an array "buckets" of objects with
 * a "name"), -E2BIG (a bucket's object over LEADER_TABLE_MAX: nothing
 * sent), or the store's error. */
int leader_write_buckets(leader_t *ld, const char *text, size_t len, double now);

/* The leader writes one change: bucket `name` is now the JSON object `json`
 * (`len` bytes, borrowed: the bucket file's element), and the table's
 * version `version`: one transaction (above).  Returns 0 (written; counts
 * as applied), -EPERM (not leader_leads()), -EAGAIN (the table or the
 * leadership changed meanwhile: nothing written), -E2BIG (`json` over
 * LEADER_TABLE_MAX), -EINVAL (empty name), or the store's error. */
int leader_put_bucket(leader_t *ld, const char *name, const char *json, size_t len,
                      uint64_t version, double now);

/* The leader removes bucket `name` and sets the table's version to
 * `version`, in one transaction; as leader_put_bucket(). */
int leader_remove_bucket(leader_t *ld, const char *name, uint64_t version, double now);

/* Notes that an authenticated node obeys `epoch` (its hello or report
 * said so): the next poll leads above it if we lead, or a later
 * win does.  Values above LEADER_EPOCH_MAX are ignored. */
void leader_note_follows(leader_t *ld, uint64_t epoch);

/* Gives up leadership and the lease (clean shutdown): the key goes at
 * once, so a standby takes over at its next poll. */
void leader_resign(leader_t *ld);

#endif
