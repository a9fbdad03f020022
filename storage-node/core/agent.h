/* agent.h - the node's side of the control protocol without sockets or clocks: reports from the scheduler's counters, tokens applied by bucket index, fallback and resume (docs/protocol.md).
 *
 * The agent turns a scheduler (core/sched.h) into protocol messages and back:
 * it keeps the node's bucket table, the map from the controller's table to
 * scheduler indices, the period and interval the node is in, the per-bucket
 * counters a report needs (arrivals since the last report, IOs served when
 * it was taken), decides when the controller has gone silent, what the node
 * then enforces (fail static: last period's grant, core/grant.h; or round
 * robin), and which controller it obeys (the highest leadership epoch).  It never
 * sends, receives or reads a clock: time is the `now` argument (seconds on
 * any monotonic clock, the same one for every call), and the caller moves
 * the messages.  storage-node/daemon/ctlclient.c wraps it in a ZeroMQ DEALER;
 * workloads/sim drives it in simulated time.
 *
 *   agent_t *a = agent_new(&cfg, sched, &ops, now, &err);
 *   agent_hello(a, now, &m)              -> send m
 *   on a controller message m:  agent_handle(a, &m, NULL, now)
 *                               (AGENT_SEND_HELLO: send a hello now)
 *   at agent_next_tick(a):      if (agent_tick(a, now))
 *                                   agent_report(a, now, &m) -> send m
 *   agent_destroy(&a);
 *
 * An agent_t and its scheduler belong to one thread (the node's loop
 * thread, or the simulator thread that runs that server); nothing here
 * locks or blocks. */
#ifndef BQOS_AGENT_H
#define BQOS_AGENT_H

#include <stdint.h>

#include "common/proto.h"
#include "storage-node/core/sched.h"

/* What a node does while its controller is silent. */
typedef enum {
    AGENT_FALLBACK_STATIC = 0, /* keep enforcing: every period each bucket
                                  gets this node's grant of the last period
                                  the controller covered (core/grant.h); the
                                  scheduler stays in `normal` */
    AGENT_FALLBACK_RR = 1      /* switch the scheduler to `fallback` (rr):
                                  no reservations, no limits */
} agent_fallback_t;

typedef struct {
    const char *name;         /* node name (copied): our messages' `node`;
                                 a message for another node is dropped */
    const char *peer;         /* the controller, for log lines (copied);
                                 NULL: the agent logs nothing */
    uint64_t capacity;        /* capacity profile for hello, IOs/s (0 = unknown) */
    uint64_t instance;        /* this process's random id for hello
                                 (1..PROTO_MAX_COUNT; 0 = not said): the
                                 controller refuses a second process under
                                 a name that is up (`duplicate_name`) */
    int manage_policy;        /* switch policy: `normal` while the controller
                                 is alive, `fallback` otherwise (default 1) */
    sched_policy_t normal;    /* policy while alive (default tokens) */
    agent_fallback_t mode;    /* what silence means (default static) */
    sched_policy_t fallback;  /* policy when silent in mode rr (default rr) */
    double silence_intervals; /* fallback at an interval start when the
                                 controller has been silent for more than
                                 this many intervals plus the grace, its
                                 own clock (the period and interval its last
                                 message carried) is at least that many
                                 intervals behind ours, and it has not spoken
                                 in the current period (3) */
    double grace_s;           /* allowance for scheduling delay on either
                                 host, added to the silence: the larger of
                                 this and a quarter interval (0.1 s) */
    uint32_t unit;            /* cost-aware tokens: bytes per unit of the
                                 scheduler's unit accounts (the node's
                                 --cost-unit); the wire speaks bytes.
                                 0: 4096 */
    int sparse;               /* offer sparse reports in hello (default 1);
                                 sent only once a welcome takes them */
    double sparse_demand;     /* a bucket is re-sent when its queue or
                                 arrivals moved by more than this fraction
                                 from what the controller holds (0.10) */
    double sparse_served;     /* ... or its served count by more than this
                                 fraction from the prediction (0.02) */
    uint32_t full_every;      /* a full report at least every this many
                                 reports (25) */
    int renew;                /* offer changed grants only in hello
                                 (default 1; docs/protocol.md "Changed
                                 grants"); used once a welcome says it */
    int parts;                /* offer names in parts in hello (default 1;
                                 docs/protocol.md "Names in parts"): a table
                                 bigger than a part goes and comes part by
                                 part once a welcome says it */
} agent_config_t;

/* Fills *cfg with the defaults above (name and peer NULL). */
void agent_config_defaults(agent_config_t *cfg);

/* Names in parts: at most this many parts of our table go after each
 * report (agent_names_part()); the controller is sent at most
 * AGENT_PART_WINDOW names beyond what it acknowledged, and the parts go
 * again from there after AGENT_PART_STALL reports without progress (a
 * safety net: a part that could not be sent is taken back at once,
 * agent_names_unsent(), and the transport loses nothing else within a
 * session). */
#define AGENT_PARTS_REPORT 32
#define AGENT_PART_WINDOW 262144
#define AGENT_PART_STALL 50

/* How the agent acts on the node.  Every member may be NULL, meaning "do it
 * directly on the scheduler": sched_add_bucket() with weight 1 (which finds
 * an existing bucket and keeps its weight), sched_set_tokens(),
 * sched_set_policy(), sched_period_start().  All are called on the
 * caller's thread from inside agent_new(), agent_handle() and agent_tick().
 * The static fallback sets tokens through set_tokens at each period start
 * while the controller is silent, then calls applied.
 *
 * Weights: the controller's bucket weights (sent with its table) are set
 * directly on the scheduler (sched_set_weight()).  For a bucket in the
 * controller's table the controller's weight wins over the node's own;
 * the node's weight comes back when the controller drops the bucket. */
typedef struct {
    /* Finds or creates bucket `name`; returns its scheduler index or -errno. */
    int (*bucket)(void *arg, const char *name);
    /* Sets scheduler bucket b to absolute token counts (l may be
     * SCHED_UNLIMITED) for the rest of the period: a grant made at `now`
     * that ends at `until` (the period's end on the caller's clock;
     * INFINITY before the agent knows the timing), as sched_set_tokens()
     * takes them.  Returns 0 or -errno. */
    int (*set_tokens)(void *arg, int b, int64_t r, int64_t l, double until, double now);
    void (*set_policy)(void *arg, sched_policy_t policy);
    /* Starts a new QoS period on the scheduler (and whatever the node
     * keeps per period); must call sched_period_start() or do its work. */
    void (*period_start)(void *arg);
    /* Called once after a message changed tokens: a tokens message was
     * applied, or a new controller table dropped buckets (may be NULL).
     * The node dispatches what the new tokens allow. */
    void (*applied)(void *arg);
    /* Called after each controller table is applied (a welcome or a new
     * table): whether it has a `default` bucket, and listed[b] nonzero for
     * each of the scheduler's n buckets that it lists (borrowed for the
     * call).  The node refuses keys of unlisted buckets when the table has
     * no `default` (fail closed).  May be NULL. */
    void (*table)(void *arg, int has_default, const unsigned char *listed, int n);
    /* Called with the leader's rule list (a rules message, issue 27): its
     * version and JSON text (len bytes, NUL-terminated; "" = no rules),
     * borrowed for the call; version 0 with "" after a welcome that says
     * the controller has no rules.  The node parses, applies and persists it;
     * returns 0 or -errno (counted as rules_rejected).  May be NULL. */
    int (*rules)(void *arg, uint64_t version, const char *text, size_t len);
    /* The backend's unloaded latency in seconds (the adaptive window's
     * base, window_stats_t.base), read once per report for its "base_us";
     * 0: not known.  May be NULL (not said). */
    double (*base_latency)(void *arg);
    void *arg;
} agent_ops_t;

/* Timing of a controller message in the caller's clock: period number,
 * interval (0..intervals-1), intervals K >= 1, period length (> 0 s) and
 * the time `end` at which the period ends. */
typedef struct {
    uint64_t period;
    uint32_t interval, intervals;
    double period_s;
    double end;
} agent_timing_t;

/* Counters, for logs and tests. */
typedef struct {
    uint64_t recv_welcome, recv_tokens, recv_heartbeat, recv_error;
    uint64_t recv_rules, rules_rejected; /* rules messages, and those the
                                    ops.rules hook refused */
    uint64_t tokens_applied;     /* token records applied */
    uint64_t basis_old;          /* tokens messages computed from a report not among
                                    our last AGENT_BASES of this period (netted
                                    against everything served this period) */
    uint64_t weights_applied;    /* scheduler weight changes from the
                                    controller's weights frame */
    uint64_t tokens_stale;       /* tokens messages for an older period */
    uint64_t fallbacks, resumes; /* entering / leaving fallback */
    int fallback;                /* 1 while in fallback (or never welcomed) */
    int welcomed;
    agent_fallback_t mode;       /* the configured fallback */
    uint64_t static_periods;     /* periods started on the remembered grant */
    uint32_t lease;              /* the leader's fallback lease, periods (its
                                    last message; 0: none said, no bound) */
    uint64_t lease_periods;      /* static periods past the lease: limited
                                    buckets held at 0 */
    uint64_t warn_unreachable;   /* "no controller" warnings (one a period) */
    uint64_t epoch;              /* highest leadership epoch seen (0: none) */
    int leader;                  /* source of the messages obeyed (-1: none) */
    uint64_t stale_epoch;        /* messages ignored: lower epoch, or another
                                    source at the leader's epoch */
    double silent_s;             /* seconds since the leader last spoke (at
                                    the last tick or message) */
    double period_s;             /* period length once known (else 0) */
    int refused;                 /* 1 while the controller refuses our name
                                    (duplicate_name): every request is held */
    uint64_t duplicate_name;     /* duplicate_name errors received */
    uint64_t period;             /* current period number (local view) */
    uint32_t interval;
    uint64_t reports_full, reports_sparse; /* reports sent, by kind */
    uint64_t records_left_out;   /* buckets sparse reports left out */
    uint64_t inflight_said;      /* in-flight figures reports carried */
    uint64_t full_asked;         /* full reports the controller asked for */
    uint64_t grants_renewed;     /* buckets renewing tokens messages applied
                                    again without a record (changed grants) */
    uint64_t grant_gaps;         /* tokens messages after a gap in gseq (a
                                    lost one): nothing renewed, regrant */
    uint64_t parts_sent, parts_taken; /* names in parts: of our table sent,
                                    of the controller's taken */
    int ctl_partial;             /* the controller's table is still arriving */
    uint64_t ctl_names;          /* names of the controller's table held */
    proto_stats_t proto;         /* messages the agent dropped: addressed to
                                    another node (unknown_node), or for a
                                    controller table it lacks (table) */
} agent_stats_t;

typedef struct agent agent_t;

/* Names in parts: fills m (initialised here, borrowing the agent's names)
 * with the next part of our table for the controller, a names message.
 * Returns 1 if it did (send it), 0 if nothing is due: the controller did
 * not take parts, holds our whole table, holds no more (too_many_names),
 * or AGENT_PART_WINDOW names are out unacknowledged.  Call after
 * agent_report(), up to AGENT_PARTS_REPORT times. */
int agent_names_part(agent_t *a, proto_msg_t *m);

/* The part m (from agent_names_part()) could not be sent: it and the ones
 * after it go again next time. */
void agent_names_unsent(agent_t *a, const proto_msg_t *m);

/* agent_handle() result bit: send agent_hello() now.  Either the controller
 * does not know this node (an `unknown_node` error; the agent is no longer
 * welcomed), or a new leader's messages cannot be mapped without its table
 * (its welcome to the hello brings it; the agent stays welcomed). */
#define AGENT_SEND_HELLO 1

/* agent_handle() result bit: the controller refused our hello because
 * another running node is registered under our name (`duplicate_name`).
 * The agent logs an error saying to choose a unique --name and holds every
 * request (tokens policy, every bucket routed to bucket 0 holding no
 * tokens): a node the controller does not know must not serve unthrottled.
 * Keep sending hellos at the normal pace; the first welcome (the other
 * node went down) releases the hold. */
#define AGENT_REFUSED 2

/* Creates an agent for `sched` (borrowed; must outlive the agent).  `ops`
 * is copied (may be NULL).  Until a welcome and tokens arrive the node runs
 * the fallback policy (set at once when manage_policy); `now` counts as the
 * controller's last word for the silence check.  Returns the agent (caller
 * owns it; agent_destroy()), or NULL with *err = -EINVAL (bad name,
 * silence_intervals <= 0) or -ENOMEM. */
agent_t *agent_new(const agent_config_t *cfg, sched_t *sched, const agent_ops_t *ops,
                   double now, int *err);

/* Frees the agent and sets *ap to NULL.  Accepts NULL.  The scheduler is
 * left as it is. */
void agent_destroy(agent_t **ap);

/* Fills *m with a hello (all of *m is overwritten and owns nothing
 * afterwards: pass a message that owns no buffers, e.g. one on the stack): the node's whole table (the scheduler's
 * buckets, table generation bumped when their number changed), capacity,
 * and the node's timing once it has one.  m->names points into the agent
 * and the scheduler: valid until the next call into the agent.  Returns 0
 * or -ENOMEM. */
int agent_hello(agent_t *a, double now, proto_msg_t *m);

/* Takes the report of the current interval into *m: cumulative counters of
 * the period per bucket (buckets whose counters are all zero are left out),
 * arrivals since the previous report, node completions and busy time, and
 * the names while the controller has not acknowledged the node's table
 * (m->names as for agent_hello()).  Records go into m's own arrays
 * (proto_msg_reserve(); the caller owns m and clears it).  The report is
 * taken whether or not the caller manages to send it: the next report's
 * arrivals start here, and tokens that arrive later are net of what was
 * served since.  Returns 0; -EAGAIN before the controller's timing is known
 * (nothing taken); -ENOMEM. */
int agent_report(agent_t *a, double now, proto_msg_t *m);

/* Fills *m with a heartbeat (peer_table = the controller table held); as
 * for agent_hello(), *m is overwritten and owns nothing. */
void agent_heartbeat(const agent_t *a, proto_msg_t *m);

/* Handles one decoded controller message from source `src` (an index the
 * caller gives each controller it talks to, >= 0; 0 with one controller).
 * Epochs: a message with an epoch below the highest seen is ignored (counted
 * as stale_epoch); a higher epoch is adopted at once (a new leader: the old
 * leader's table and period numbering are forgotten, as with a welcome) and
 * its source becomes the leader; at the leader's epoch only the leader's
 * source is obeyed, unless the agent is in fallback and the leader has been
 * quiet for an interval (it is gone: another controller at the same epoch,
 * e.g. a lone one at 0, takes over).  Otherwise as
 * agent_handle().  Returns 0 or AGENT_SEND_HELLO. */
int agent_handle_from(agent_t *a, const proto_msg_t *m, const agent_timing_t *tm, double now,
                      int src);

/* Handles one decoded controller message (welcome, tokens, heartbeat,
 * error; others are ignored): timing, the controller's table and weights,
 * tokens (by index, net of what this node served since its last report),
 * resume from fallback.  `tm` gives the message's timing in the caller's
 * clock; NULL takes it from m (period_ms, and remaining_ms counted from
 * `now`).  A caller that shares the controller's clock (the simulator)
 * passes it exactly; a heartbeat with `tm` counts as one with timing.
 * Returns 0 or AGENT_SEND_HELLO.  Bad or stale messages are counted in the
 * stats, never an error.  Same as agent_handle_from() with source 0. */
int agent_handle(agent_t *a, const proto_msg_t *m, const agent_timing_t *tm, double now);

/* The interval-start work, to call at agent_next_tick(): starts the new
 * period if one began (ops.period_start; in the static fallback, each
 * bucket's tokens are then set to its remembered grant, and a warning says
 * once a period that no controller is heard), falls back when the
 * controller has been silent (see agent_config_t; logged at warn with the
 * reason and how long it was silent), and returns 1
 * if the current interval has not been reported yet (the caller then takes
 * agent_report() and sends it), else 0 (also while the controller refuses
 * our name: AGENT_REFUSED).  Before agent_next_tick() (less a
 * millionth of an interval of clock jitter), or without timing, it does
 * nothing and returns 0. */
int agent_tick(agent_t *a, double now);

/* The caller did not tick the agent for a while, until `now`, on purpose
 * (a shard session idles while the cluster's configuration leaves its
 * shard out, ctlclient.h): the controller's silence counts from `now`, as
 * at agent_new(), so that the session's return neither falls back nor
 * warns at once of a silence that was the configuration's; and the period
 * clock is caught up to the period holding `now` without ops.period_start
 * (the node's period began at its boundary; starting it again mid-period
 * would restart every bucket's counters), keeping no grant of the periods
 * skipped and renewing none. */
void agent_watch_from(agent_t *a, double now);

/* When agent_tick() next has work: the next interval start (or period end)
 * after the last tick or timing update; INFINITY before any timing. */
double agent_next_tick(const agent_t *a);

/* The controller state in a word, for stats: "waiting" (never welcomed),
 * "following" (obeying the controller), "static" or "rr" (in fallback). */
const char *agent_state_str(const agent_t *a);

/* "static" or "rr". */
const char *agent_mode_str(agent_fallback_t mode);

/* Nonzero once a welcome arrived (until an unknown_node error). */
int agent_welcomed(const agent_t *a);

/* Copies the counters. */
void agent_stats(const agent_t *a, agent_stats_t *out);

#endif
