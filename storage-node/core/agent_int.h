/* agent_int.h - what storage-node/core/agent.c, agent_bytes.c and agent_fallback.c share: the agent's state and its hooks on the node (private to the agent; prefix agent__). */
#ifndef BQOS_AGENT_INT_H
#define BQOS_AGENT_INT_H

#include <math.h>
#include <stdint.h>

#include "common/proto.h"
#include "storage-node/core/agent.h"
#include "storage-node/core/grant.h"
#include "storage-node/core/sched.h"

/* What the agent keeps per bucket for the bytes/s dimension, in the
 * scheduler's units (agent_bytes.c). */
typedef struct {
    uint64_t prev;       /* unit arrivals this period at the last report */
    uint64_t carry;      /* unit arrivals of the past interval moved out of
                            the counters by a period start */
    uint64_t served_rep; /* units served this period at the last report */
    int64_t grant;       /* fail static: units served + left in the last
                            covered period (SCHED_UNLIMITED: no limit) */
    int on;              /* the bucket had a byte rate then */
} agent_ub_t;

/* What the controller holds of a bucket on this node after our last
 * report (sparse reports, proto_report_predict()): the values of the
 * last record sent for it (zeros if a full report left it out as idle). */
typedef struct {
    uint64_t queued, arrivals, served;
    uint64_t period;
    uint32_t interval;
    uint8_t throttled;
    uint32_t inflight;   /* the last in-flight figure said (0: none this
                            session; issue 25, "inflight") */
} agent_base_t;

/* How many of its last reports (this period) the agent remembers the
 * served counts at: tokens computed from one of them (the tokens' basis)
 * are netted against what was served since (net_of_served()). */
#define AGENT_BASES 4

/* Owned by the thread that owns the scheduler; no locks. */
/* A share held by a scheduler bucket (agent_shares.c). */
typedef struct {
    int b;
    int64_t n;
} agent_share_t;
/* A bucket's grant base (agent_grants.c): the record (controller index)
 * of the renewing message gseq g; g 0: none. */
typedef struct {
    int64_t r, l;        /* l: PROTO_UNLIMITED for no limit */
    uint64_t g;
    uint64_t seen;       /* gseq of the last message with a record for it */
} agent_gbase_t;

struct agent {
    agent_config_t cfg;
    char name[PROTO_NAME_MAX + 1];
    char *peer;          /* log label, NULL: quiet */
    sched_t *s;
    agent_ops_t ops;
    agent_stats_t st;
    double now;          /* the `now` of the call being handled (grants made
                            in it start then: agent__op_set_tokens()) */

    /* our table: the scheduler's buckets, indices 0..my_n-1 */
    uint32_t my_table;   /* generation, bumped when the bucket count changes */
    int my_n;
    uint32_t peer_ack;   /* our generation the controller says it holds */
    const char **namev;  /* names for the names frame (point into sched) */
    size_t namev_cap;
    uint64_t *prev;      /* per bucket: arrivals_period at the last report */
    uint64_t *carry;     /* per bucket: arrivals of the past interval that
                            a period start moved out of the counters */
    uint64_t *served_rep;/* per bucket: IOs served this period when the last
                            report was taken (see net_of_served()) */
    uint32_t *local_w;   /* per bucket: its weight before the controller's
                            weight replaced it (0: the controller's weight
                            does not apply; see take_weight()) */
    uint64_t *served_at; /* [bucket * AGENT_BASES + slot]: served_rep at the
                            report in rep_basis[slot] */
    uint64_t rep_basis[AGENT_BASES]; /* proto_basis() of the last reports
                            this period, 0: none (cleared at a period start) */
    uint32_t rep_slot;   /* the slot the next report takes */
    size_t arr_cap;   /* buckets prev, carry, served_rep, served_at and local_w all hold (zeroed when new) */
    int cap_prev, cap_carry, cap_served, cap_w, cap_at; /* their growarr() capacities */
    agent_base_t *base;  /* per bucket: what the controller holds (sparse) */
    int cap_base;
    int ctl_sparse;      /* the controller's welcome takes sparse reports */
    int want_full;       /* the next report is full (asked, or a new session) */
    uint32_t since_full; /* reports since the last full one */
    agent_ub_t *ub;      /* per bucket: its bytes/s dimension (agent_bytes.c) */
    int ub_cap;
    uint64_t unit;       /* bytes per scheduler unit, >= 1 */

    /* Names in parts (docs/protocol.md "Names in parts").  Ours: the
     * controller holds my_acked names of my_table (its peer_names); the
     * next part starts at my_next; my_idle counts reports without progress
     * while parts are out (go back at AGENT_PART_STALL); my_capped: it
     * holds no more this session (too_many_names).  Its: ctl_partial while
     * its table ctl_table (ctl_n names) arrives, of which ctl_have are
     * mapped in ctl_map (the rest -1: no tokens apply, fail closed);
     * ctl_seen / ctl_was per scheduler bucket: in the table so far / in
     * the previous table or held meanwhile (dropped at the end if not
     * seen); ctl_default: `default`'s scheduler index if seen, -1. */
    int ctl_parts;
    int hello_part;
    size_t my_acked, my_next;
    int my_idle, my_capped;
    int ctl_partial;
    size_t ctl_have;
    uint8_t *ctl_seen, *ctl_was;
    int seen_cap, was_cap;
    int ctl_default;

    /* the controller's table: its index -> our scheduler index (or -1) */
    uint32_t ctl_table;
    int default_route;   /* scheduler index of the controller's `default`
                            bucket that unconfigured buckets route to, -1 */
    sched_policy_t policy_before_hold; /* restored after a refusal when the
                            caller manages the policy (manage_policy 0) */
    int *ctl_map;
    size_t ctl_n, ctl_cap;

    /* changed grants (agent_grants.c; docs/protocol.md "Changed grants") */
    int ctl_renew;       /* the welcome said the controller sends changed grants only */
    uint64_t gseq;       /* gseq of the last tokens message (0: none this session) */
    uint64_t renew_g;    /* gseq of the last renewing message whose chain
                            holds: bases of it are renewed by the next (0: none) */
    int regrant;         /* the next report says regrant (a gap was seen) */
    agent_gbase_t *gb;   /* per controller index: its base, or g 0 */
    int gb_cap;          /* entries (growarr()) */
    uint32_t *gl, *gl2;  /* controller indices whose base is of renew_g
                            (gl), scratch for the next list (gl2) */
    size_t gl_n;
    int gl_cap, gl2_cap;

    /* timing, in the caller's clock */
    int has_timing;
    uint64_t period;
    uint32_t intervals;
    double period_s, interval_s;
    double period_end;
    double next_report;
    uint64_t last_rep_period; /* (period, interval) of the last report, */
    int64_t last_rep_interval;/* to avoid reporting one interval twice */
    double last_ctl;          /* when the controller last spoke */
    uint64_t ctl_pos;         /* the controller's own clock in its last
                                 message with timing: period * K + interval */
    int ctl_pos_known;
    uint64_t heard_period;    /* our period in which the leader last spoke */
    double asked_names;       /* when we last said hello for a table */
    int heard;

    /* fail static */
    grant_t grant;            /* the last covered period's grant */
    uint64_t grant_period;    /* the period it was taken in: renewed up to
                                 grant_period + st.lease, then limited
                                 buckets are held at 0 */
    int lease_over;           /* the static tokens being set are past it */
    double fallback_since;    /* when the current fallback began */
    uint64_t warned_period;   /* period of the last "no controller" warning */
    int warned;

    /* Share tokens (issue 28, agent_shares.c), scheduler indexes: those
     * set now (cleared when a new list comes), the first list of this
     * period, and the last covered period's (fail static renews it). */
    proto_share_rec_t flight[PROTO_SHARES_MAX]; /* a report's "inflight" list */
    agent_share_t sh_cur[PROTO_SHARES_MAX], sh_first[PROTO_SHARES_MAX],
        sh_snap[PROTO_SHARES_MAX];
    size_t sh_ncur, sh_nfirst, sh_nsnap;
    int sh_first_set;
};

/* Acting on the node, shared by agent.c, agent_bytes.c and agent_fallback.c
 * (inline here so that those files depend on agent.c only one way): through
 * the caller's hooks (agent_ops_t) or directly on the scheduler. */

/* Where a grant made now ends: the end of the period that contains a->now
 * on our timing (at a period start, the tick runs before period_end moves
 * on: the new period's end), or INFINITY (unpaced) before any timing. */
static inline double agent__grant_until(const agent_t *a)
{
    if (!a->has_timing)
        return INFINITY;
    double end = a->period_end;
    if (a->now >= end)
        end += (floor((a->now - end) / a->period_s) + 1) * a->period_s;
    return end;
}

/* Tokens are a grant from a->now to the end of the current period
 * (unpaced before the agent has timing).  Returns the scheduler's or the
 * hook's result. */
static inline int agent__op_set_tokens(agent_t *a, int b, int64_t r, int64_t l)
{
    double until = agent__grant_until(a);
    if (a->ops.set_tokens)
        return a->ops.set_tokens(a->ops.arg, b, r, l, until, a->now);
    return sched_set_tokens(a->s, b, r, l, until, a->now);
}

static inline void agent__op_set_policy(agent_t *a, sched_policy_t p)
{
    if (a->ops.set_policy)
        a->ops.set_policy(a->ops.arg, p);
    else
        sched_set_policy(a->s, p);
}

static inline void agent__op_applied(agent_t *a)
{
    if (a->ops.applied)
        a->ops.applied(a->ops.arg);
}

/* agent_fallback.c: fail static or rr, resume, fencing, silence. */

/* Sets every bucket to its remembered grant less what it served in this
 * period (static mode only; nothing before the first grant or while
 * refused), for period `period`: past the leader's lease (st.lease periods
 * after the grant's), limited buckets get R 0 and L 0 instead (the
 * controller gives their share to other nodes); buckets without a limit
 * keep their R and no limit. */
void agent__static_tokens(agent_t *a, uint64_t period);

/* Enters the fallback (logged at warn with `why`); `fresh`: the tokens held
 * are the current period's and stay. */
void agent__enter_fallback(agent_t *a, const char *why, double now, int fresh);

/* Leaves the fallback (logged at warn with its duration, or at info for
 * the first tokens). */
void agent__resume(agent_t *a, double now);

/* Whether a message from `src` is obeyed (epochs, one leader); *adopt: a
 * new leader whose session replaces the old one's. */
int agent__epoch_ok(agent_t *a, const proto_msg_t *m, int src, double now, int *adopt);

/* The interval-start silence check (k: the current interval): falls back
 * when the leader is silent (agent_config_t.silence_intervals), and warns
 * once a period while no controller is heard. */
void agent__watch(agent_t *a, double now, uint32_t k);

/* agent_grants.c: changed grants only.  The bookkeeping of bases; the
 * tokens themselves are set by agent.c (apply_tokens()). */

/* Forgets every base (a new session, a new controller table, a new
 * leader): nothing is renewed until a renewing message sets bases again.
 * `session`: the gseq count restarts too.  O(bases). */
void agent__grants_reset(agent_t *a, int session);

/* Takes tokens message m (its records already checked against ctl_n):
 * notes a gap in gseq (then renews nothing and sets a->regrant), and for
 * a renewing message whose chain holds lists in *renew (owned by a, valid
 * until the next call) the controller indices whose bases to apply again,
 * which are the bases of the last renewing message that m has no record
 * for.  Then m's first `based` records become the bases (of m->gseq) and
 * its other records clear theirs.  Returns how many to renew, or -ENOMEM
 * (every base forgotten, nothing renewed: fail closed). */
long agent__grants_take(agent_t *a, const proto_msg_t *m, const uint32_t **renew);

/* agent_bytes.c: the bytes/s dimension of cost-aware tokens.  Each
 * returns 0 or -ENOMEM where it allocates; all O(buckets) at most, once a
 * report, tokens message or period. */
/* Adds m's byte records (buckets with a byte account on) and served_bytes
 * to a report being built (after its IO records). */
int agent__bytes_report(agent_t *a, proto_msg_t *m);
/* Applies a tokens message's byte records (m->tbytes), net of the units
 * served since the last report. */
void agent__bytes_apply(agent_t *a, const proto_msg_t *m);
/* At a period start, before sched_period_start(): arrivals carried, the
 * fail-static grant taken when `covered`, served counters restart.  With
 * node_period 0 (agent_watch_from(): the node started its period at the
 * boundary, its counters count from there) no arrivals are carried. */
void agent__bytes_period(agent_t *a, int covered, int node_period);
/* Fail static: every bucket that had a byte rate gets its remembered
 * grant less what it served in this period (a byte limit 0 past the
 * lease, a->lease_over), at most `share` of the grant when share < 1 (the
 * share of the period left plus the burst depth: grant_pace()). */
void agent__bytes_static(agent_t *a, double share);

/* agent_shares.c: share tokens (issue 28). */
/* Applies a tokens message's share list (m->has_shares): the buckets it
 * names get their share tokens, the others that held some get 0.  A list
 * naming a bucket beyond the controller's table is ignored whole. */
void agent__shares_apply(agent_t *a, const proto_msg_t *m);
/* At a period start: the period that ended was covered (`covered`): its
 * first list is the one fail static renews. */
void agent__shares_period(agent_t *a, int covered);
/* Fail static, at a period start while the controller is silent: the
 * remembered list again within the lease (a->lease_over 0), else none
 * (plain round robin). */
void agent__shares_static(agent_t *a);

#endif
