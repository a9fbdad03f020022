/* gate.h - the node's scheduler and its one door: both fronts (memcached, NBD) and the daemon reach the sched_t only through here (buckets, enqueue, take, done, tokens, policy, period, stats), plus the outstanding window, dispatch at once or at the end of the loop pass, and the graceful stop.
 *
 * A front owns one gate and gives it its hooks; the gate creates the node's
 * scheduler and owns it, and makes the front's connection registry
 * (storage-node/io/conns.h: listener, connections, their limits and write
 * buffers), which the front reaches through gate_conns().  The protocol
 * (parsing, replies, what a connection is) stays in the front.  The hot
 * path is the front's own dispatch loop around gate_take(), its
 * gate_enqueue() and its completion callback around gate_done(): direct
 * calls, no allocation, no indirect call per IO.  noderun (bucket and token
 * files, controller client, signals) drives a node through its gate only.
 *
 * Outside storage-node/core/, no file but gate.c calls a writer of the
 * scheduler (sched_enqueue, sched_add_bucket, sched_set_tokens, ...);
 * gate_sched() hands the scheduler to the core modules that drive it
 * themselves (the agent, core/agent.h).
 *
 * Threads: a gate_t, its scheduler, its connections and its events belong
 * to the loop thread of its event_base; every function here must be called
 * there. */
#ifndef BQOS_GATE_H
#define BQOS_GATE_H

#include <event2/event.h>
#include <event2/util.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/rules.h"
#include "storage-node/core/sched.h"
#include "storage-node/core/window.h"
#include "storage-node/io/conns.h"
#include "storage-node/io/who.h"

struct event_base;
struct iolat;
struct sockaddr;

/* The front's side, called on the loop thread with `front` as given to
 * gate_new(). */
typedef struct {
    /* Hands the backend what gate_take() allows, now.  Called by gate_kick()
     * and gate_set_tokens() (with `defer`, from the end-of-pass event),
     * never while stopping. */
    void (*dispatch)(void *front);
    /* gate_shutdown() and gate_destroy(): answers one IO taken from the
     * queue with "shutting down" (sched_drain()'s callback: no gate calls
     * from in here). */
    void (*drain)(sched_item_t *item, void *front);
    /* gate_shutdown(), after the drain: stop reading, answer and write what
     * can be; may free connections. */
    void (*stop)(void *front);
    /* Returns nonzero once every reply is written (the gate itself checks
     * that nothing is at the backend): then the stop is complete. */
    int (*idle)(void *front);
    /* The connection registry's hooks (conns_hooks_t): a connection
     * admitted, whose fd is the front's; a connection refused (may be
     * NULL); an idle connection to close at the limit for a new client
     * (returns 1 if closed; may be NULL: no eviction). */
    void (*accept)(void *front, evutil_socket_t fd, const struct sockaddr *sa, int salen);
    void (*refuse)(void *front, evutil_socket_t fd);
    int (*evict)(void *front, conns_conn_t *c);
} gate_hooks_t;

typedef struct {
    const char *tag;     /* prefix of the gate's log lines ("" or "NBD: "), borrowed
                            for the gate's life */
    int outstanding;     /* most IOs at the backend at once, >= 1 (the window
                            while fixed; see gate_set_window()) */
    int max_conns;       /* connections beyond are refused, >= 1 */
    int max_buckets;     /* the one cap on buckets: gate_bucket() makes none
                            beyond this many in all (-ENOMEM); 0: no cap */
    int defer;           /* 1: gate_kick() dispatches at the end of this pass of the
                            loop (every read of the pass queued first); 0: at once */
    sched_policy_t policy; /* the scheduler's policy at start (gate_set_policy()) */
    int weighted;        /* weighted round robin (bucket weights, sched_new()) */
} gate_config_t;

typedef struct gate gate_t;

/* Makes a gate: the node's scheduler (empty, with cfg's policy), the
 * window, and the connection registry (not listening yet: conns_listen()
 * on gate_conns()).  Returns the gate (the front owns it), or NULL and
 * *err = -EINVAL (bad settings) or -ENOMEM. */
gate_t *gate_new(struct event_base *base, const gate_config_t *cfg, const gate_hooks_t *hooks,
                 void *front, int *err);

/* The gate's connection registry (owned by the gate). */
conns_t *gate_conns(gate_t *g);

/* The registry of identities active per bucket (owned by the gate; io/who.h):
 * the fronts call who_seen() with each request's bucket, noderun gives it
 * a sink (the controller client).  Never NULL. */
who_t *gate_who(gate_t *g);

/* The scheduler (owned by the gate), for the core modules that drive it
 * themselves (the agent: ctlclient_new()).  Everything else goes through
 * the gate's functions. */
sched_t *gate_sched(gate_t *g);

/* ---- buckets and tokens --------------------------------------------------- */

/* The one way to find or make a bucket: the bucket named by the len bytes
 * at `name` (no NUL needed), or, if there is none and `make` is nonzero, a
 * new one (weight 1, no R-tokens, no limit) unless max_buckets are there.
 * Returns its index, or -ENOENT (unknown and !make), -ENOMEM (beyond
 * max_buckets, or out of memory), -EINVAL (a bad name). */
int gate_bucket(gate_t *g, const char *name, size_t len, int make);

/* Sets bucket b's weight (weighted round robin).  Returns 0 or -EINVAL. */
int gate_set_weight(gate_t *g, int b, uint32_t weight);

/* Sets bucket `name`'s tokens to absolute counts for the rest of the period,
 * unpaced (the token test hook; gate_bucket() makes the bucket if unknown)
 * and dispatches what they allow (gate_kick()).  l may be SCHED_UNLIMITED.
 * Returns 0 or -EINVAL/-ENOMEM. */
int gate_set_tokens(gate_t *g, const char *name, int64_t r, int64_t l);

/* Switches the scheduler's policy, then dispatches what it allows
 * (gate_kick()). */
void gate_set_policy(gate_t *g, sched_policy_t policy);

/* Paced tokens (on, with a burst depth of burst_s seconds) and the order of
 * reservations (sched_set_pacing(), sched_set_r_order()).  Returns 0, or
 * -EINVAL: a bad burst (nothing changed) or a bad order (pacing set). */
int gate_set_pacing(gate_t *g, int on, double burst_s, sched_order_t r_order);

/* Starts a new QoS period: the scheduler's per-period counters are zeroed
 * (sched_period_start()). */
void gate_period_start(gate_t *g);

/* ---- the queues (hot path) ------------------------------------------------ */

/* Queues item (zeroed, its cost set) in bucket b.  Returns 0 or -EINVAL
 * (no such bucket) as sched_enqueue(); the item is the front's until
 * gate_take() returns it or gate_remove() takes it back. */
int gate_enqueue(gate_t *g, int b, sched_item_t *item);

/* Takes a queued item back (its client went away).  Returns 0 or -EINVAL
 * (not queued) as sched_remove(). */
int gate_remove(gate_t *g, sched_item_t *item);

/* Charges an IO from gate_take() `units` more byte tokens, known only once
 * it completed (a get's value).  Returns 0 or -EINVAL as sched_charge(). */
int gate_charge(gate_t *g, const sched_item_t *item, uint64_t units);

/* ---- the window (hot path) ------------------------------------------------ */

/* Returns the next IO the scheduler allows while fewer than the window
 * are at the backend, or NULL.  The IO counts as outstanding from now on;
 * it ends with gate_done(), gate_done_inline() or gate_untake().  The
 * window is `outstanding` unless gate_set_window() made it adaptive (an IO
 * served on an R-token tells it so: window_note_reserved()).  When
 * the scheduler allows nothing because paced buckets wait for credit, one
 * timer calls hooks->dispatch when the first credit returns.  Inside the
 * dispatch hook called by the gate (the pass's dispatch, the pacing timer)
 * the scheduler's clock is read once when the hook starts, not per IO. */
sched_item_t *gate_take(gate_t *g);

/* A backend completion of an IO from gate_take(): adds the busy time
 * (time with at least one IO outstanding) and reports one completion with
 * it (sched_note_completion()); the window counts it (window_done(): the
 * time at the backend, by Little's law over its epoch).  Call before
 * answering the IO. */
void gate_done(gate_t *g);

/* gate_done() for an IO whose backend call ended at `at` (mono_now()
 * seconds, at most now), earlier than its completion callback runs: the
 * window takes `at` as the end of the IO's time at the backend, so that
 * the loop's own work between the backend's reply and the callback (other
 * callbacks writing their replies, reads of new requests) does not count
 * as backend latency.  Busy time still runs to now. */
void gate_done_at(gate_t *g, double at);

/* An IO from gate_take() finished at once, without the backend (a read
 * from the page cache): one completion, no busy time. */
void gate_done_inline(gate_t *g);

/* An IO from gate_take() that the backend refused: it leaves the window
 * uncounted. */
void gate_untake(gate_t *g);

/* An IO from gate_take() left the backend (answered, inline or refused):
 * its bucket's requests in flight drop by one (sched_note_done(), the
 * report's "inflight", issue 25).  Call once per IO beside gate_done*()
 * or gate_untake(); an IO never passed here counts as in flight. */
void gate_item_done(gate_t *g, const sched_item_t *item);

/* The backend's unloaded latency, seconds: the window's base
 * (window_stats_t.base; 0 until measured). */
double gate_base_latency(const gate_t *g);

/* IOs at the backend now. */
int gate_inflight(const gate_t *g);

/* Makes the window adaptive (storage-node/core/window.h) with *cfg's
 * settings, starting from the current window clamped to [floor, ceiling]
 * (cfg->start is ignored); IOs already at the backend stay counted.
 * Returns 0, or -EINVAL / -ENOMEM as window_new() (the window unchanged). */
int gate_set_window(gate_t *g, const window_config_t *cfg);

/* Asks for hooks->dispatch once the callbacks of this pass of the loop
 * are done (next_pass 0), or in the next pass, after its reads (next_pass
 * 1: after completions, so that the requests that arrived meanwhile are
 * queued first; not asked for while nothing is queued: a request that
 * arrives then asks with next_pass 0 once read).  One request per pass;
 * none while stopping. */
void gate_request_dispatch(gate_t *g, int next_pass);

/* Items in the scheduler's queues (enqueued through the gate and not yet
 * taken, removed or drained).  Loop thread. */
size_t gate_queued(const gate_t *g);

/* Dispatches what the scheduler allows now (after its tokens or policy
 * changed): hooks->dispatch at once, or at the end of this pass with
 * `defer`.  Nothing while stopping. */
void gate_kick(gate_t *g);

/* ---- stats ----------------------------------------------------------------- */

/* More statistics lines from the node around the front (noderun: the
 * controller client's state), each "STAT name value\r\n" written to fp. */
typedef void (*gate_status_fn)(void *arg, FILE *fp);

/* Sets the status lines' writer (gate_stats_t.status); NULL removes it.
 * arg is borrowed until then. */
void gate_set_status(gate_t *g, gate_status_fn fn, void *arg);

/* The IO timing recorder the fronts feed (storage-node/io/iolat.h; borrowed,
 * NULL: none, the default) and the one set. */
void gate_set_iolat(gate_t *g, struct iolat *l);
struct iolat *gate_iolat(const gate_t *g);

/* Why a client was refused for want of a login (gate_auth_failed()): a
 * command before the login, a login naming no user of the auth file, a
 * wrong password, a login that is not one (bad format, an oversized line). */
typedef enum {
    GATE_AUTH_UNAUTHENTICATED = 0,
    GATE_AUTH_UNKNOWN_USER,
    GATE_AUTH_BAD_PASSWORD,
    GATE_AUTH_BAD_FORMAT,
    GATE_AUTH_NREASONS
} gate_auth_reason_t;

/* The reasons' names for stats and /metrics ("unauthenticated", ...). */
extern const char *const gate_auth_reason_names[GATE_AUTH_NREASONS];

/* Says whether the front requires a login (shown in stats).  Counts a
 * login that succeeded, or one refused for `why`.  g may be NULL (nothing
 * counted). */
void gate_set_auth(gate_t *g, int on);
void gate_auth_ok(gate_t *g);
void gate_auth_failed(gate_t *g, gate_auth_reason_t why);

/* What the node's bucket table says about a request of a bucket it does
 * not list (set by noderun from --config or the controller's table; the
 * fronts ask gate_table() per request):
 *   GATE_TABLE_NONE: no table: the front's own rules (buckets made on
 *     first sight, --default-bucket);
 *   GATE_TABLE_DEFAULT: the table has a `default` bucket: served in it;
 *   GATE_TABLE_CLOSED: no `default`: refused (fail closed). */
typedef enum { GATE_TABLE_NONE = 0, GATE_TABLE_DEFAULT, GATE_TABLE_CLOSED } gate_table_t;
void gate_set_table(gate_t *g, gate_table_t t);
gate_table_t gate_table(const gate_t *g);

/* Which buckets the table lists: listed[b] for b < n (copied; buckets made
 * later are unlisted).  Returns 0 or -ENOMEM (the old list kept).
 * gate_listed(): nonzero if bucket b is listed.  O(1). */
int gate_set_listed(gate_t *g, const unsigned char *listed, int n);
int gate_listed(const gate_t *g, int b);

/* ---- rules (issue 27) ------------------------------------------------------
 * The node's rule list (common/rules.h: from --config's "rules" member or
 * the controller's push) and the classification of a request through it.
 * With no rules (or an empty list) the fronts classify by key prefix or
 * export name as before, and never call gate_classify(). */

/* Why gate_classify() refused a request: a deny rule, no rule matched, a
 * template that made no bucket name, the bound on template-made buckets
 * reached, a named bucket the node's table does not list. */
typedef enum {
    GATE_RULE_DENIED = 0,
    GATE_RULE_NO_MATCH,
    GATE_RULE_BAD_NAME,
    GATE_RULE_TEMPLATE_BOUND,
    GATE_RULE_UNKNOWN_BUCKET,
    GATE_RULE_NREASONS
} gate_rule_reason_t;

/* The reasons' names for /metrics ("denied", "no_match", ...). */
extern const char *const gate_rule_reason_names[GATE_RULE_NREASONS];

/* Refusals by identity (issue 27): the first GATE_IDENTITIES_MAX distinct
 * identities refused by the rules each keep a count (identity "user:NAME",
 * "cert:NAME", "psk:ID", or "addr:ADDRESS" when the connection has none,
 * at most GATE_IDENTITY_LEN - 1 bytes); every later identity counts as
 * "other".  A fixed set, not a top-K: a counter never moves to another
 * label, so /metrics' series stay monotonic; the first identities refused
 * are usually the ones to look at, and "other" says when there were more.
 * gate_refused_identities() calls fn for each (then "other" once the set
 * is full).  Loop thread. */
#define GATE_IDENTITIES_MAX 32
#define GATE_IDENTITY_LEN 80
void gate_refused_identities(const gate_t *g, void (*fn)(void *arg, const char *id, uint64_t n),
                             void *arg);

/* Buckets template rules may make on a node, in all (a template-made
 * bucket lives as long as the node; past the bound a request that would
 * make another is refused, reason template_bound). */
#define GATE_TEMPLATE_BUCKETS_MAX 1024

/* Makes r (owned by the gate from now; NULL or empty: no rules) the node's
 * rule list, of version `version` (the controller's; 0: --config).  The
 * per-rule match counts start again.  Loop thread. */
void gate_set_rules(gate_t *g, rules_t *r, uint64_t version);

/* The rule list (NULL: none) and its version.  Loop thread. */
const rules_t *gate_rules(const gate_t *g);
uint64_t gate_rules_version(const gate_t *g);

/* Nonzero if the node classifies by rules (a non-empty list).  O(1): the
 * fronts ask per request. */
int gate_has_rules(const gate_t *g);

/* Classifies subject *s by the rules: returns the bucket (a named bucket,
 * found or, without a closed table, made; a template's, made under
 * GATE_TEMPLATE_BUCKETS_MAX) or -1 with *why set and the refusal counted.
 * No allocation unless a bucket is made.  Loop thread. */
int gate_classify(gate_t *g, const rules_subject_t *s, gate_rule_reason_t *why);

/* gate_classify() that counts no refusal (the rule's match is counted):
 * for a front that resolves a connection's classes once, ahead of its
 * requests, and counts a refusal per refused request (gate_refusal()). */
int gate_resolve(gate_t *g, const rules_subject_t *s, gate_rule_reason_t *why);

/* Counts one request refused for `why` (per reason and per identity), as
 * gate_classify() does for the requests it refuses.  Loop thread. */
void gate_refusal(gate_t *g, const rules_subject_t *s, gate_rule_reason_t why);

/* A number that changes whenever what gate_classify() answers may change:
 * the rules (gate_set_rules()), the table's kind (gate_set_table()) or its
 * listing (gate_set_listed()).  A front caching a connection's classes
 * compares it per request (O(1)) and resolves them again when it moved. */
uint32_t gate_rules_gen(const gate_t *g);

/* A period of `period_s` seconds starts (the controller's; 0: unknown):
 * every template-made bucket gets its rule's R and L for it, R x period
 * and L x period tokens paced over the period (no limit: unlimited).  So
 * a template's figures hold per node, unless gate_template_cluster() (the
 * controller places them across nodes).  Also used for a bucket made
 * mid-period (a whole period from then).  Loop thread. */
void gate_template_period(gate_t *g, double period_s);

/* on: a controller holds template-made buckets cluster-wide (it lists them
 * in its table once a report showed them, and grants their tokens): a
 * template bucket its table does not list (yet, or past its bounds) gets
 * no R-tokens and, if its rule has a limit, no L-tokens (fail closed: its
 * requests wait for the first grant, about one report interval), and one
 * it lists is the agent's alone.  off (no controller): the rule's figures
 * per node (gate_template_period()).  Loop thread. */
void gate_template_cluster(gate_t *g, int on);

/* The node's figures, as the memcached `stats` text (mc/mcstats.c) and
 * /metrics (daemon/nodemetrics.c) both show them. */
typedef struct {
    sched_policy_t policy;
    int buckets;             /* the scheduler's */
    sched_node_stats_t node; /* completions and busy time of this period */
    uint64_t queued;         /* IOs waiting in the buckets' queues */
    int inflight;            /* IOs at the backend now */
    window_stats_t window;   /* the window and its last epoch */
    conns_stats_t conns;     /* connections */
    gate_status_fn status;   /* gate_set_status()'s, or NULL */
    void *status_arg;
    int auth;                /* gate_set_auth(): clients must log in */
    uint64_t auth_ok;        /* logins that succeeded */
    uint64_t auth_failures[GATE_AUTH_NREASONS]; /* gate_auth_failed() */
    int table;               /* gate_table_t: gate_set_table() */
    int rules;               /* rules in the node's list (gate_set_rules()) */
    uint64_t rules_version;
    int template_buckets;    /* made by template rules */
    uint64_t rules_refused[GATE_RULE_NREASONS]; /* gate_classify() */
    const uint64_t *rule_matches; /* per rule (rules of them), or NULL */
} gate_stats_t;

/* Fills *out.  O(buckets) (the queued sum). */
void gate_stats(const gate_t *g, gate_stats_t *out);

/* Bucket b's name (owned by the scheduler, valid while the bucket lives),
 * or NULL for no bucket b: buckets are 0 .. n-1, so a walk stops at the
 * first NULL.  O(1).  Loop thread. */
const char *gate_bucket_name(const gate_t *g, int b);

/* One bucket's row: fills *out (sched_bucket_stats()) and returns the
 * bucket's name (owned by the scheduler, valid while the bucket lives), or
 * NULL for no bucket b (0 <= b < gate_stats_t.buckets exist). */
const char *gate_bucket_stats(const gate_t *g, int b, sched_bucket_stats_t *out);

/* ---- stopping ------------------------------------------------------------- */

/* Begins a graceful stop: stops accepting (conns_stop()), drains the queue
 * through hooks->drain, calls hooks->stop, arms a 10 s grace timer, and
 * breaks the loop (event_base_loopexit) once nothing is at the backend and
 * hooks->idle says every reply is out (gate_check_stopped()), or when the
 * timer fires.  Idempotent. */
void gate_shutdown(gate_t *g);

/* Nonzero once gate_shutdown() or gate_close() was called. */
int gate_stopping(const gate_t *g);

/* While stopping: breaks the loop if nothing is at the backend and
 * hooks->idle() agrees.  Fronts call it when a completion or a closed
 * connection may have been the last thing waited for. */
void gate_check_stopped(gate_t *g);

/* Teardown begins (the front's destroy): closes the listener and stops
 * dispatching, without a grace timer.  Accepts NULL. */
void gate_close(gate_t *g);

/* Frees the gate: IOs still queued go to hooks->drain, then the scheduler,
 * the connection registry (its connections must be closed already) and
 * the events are freed; sets *gp to NULL.  Accepts NULL. */
void gate_destroy(gate_t **gp);

#endif
