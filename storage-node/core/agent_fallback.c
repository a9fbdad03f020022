/* agent_fallback.c - the agent's side of a controller that fails: when it counts as silent (its own clock, a grace for late ones), fail static (the last grant renewed each period) or rr, resume, and which of several controllers to obey (leadership epochs). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "storage-node/core/agent_int.h"

static const char *policy_str(sched_policy_t p)
{
    return p == SCHED_POLICY_RR ? "rr" : "tokens";
}

const char *agent_mode_str(agent_fallback_t mode)
{
    return mode == AGENT_FALLBACK_RR ? "rr" : "static";
}

/* The static fallback's tokens for every bucket: its remembered grant less
 * what it served in this period (at a period start: the whole grant).
 * Nothing before the first covered period (there is no grant to keep).
 * The lease: the leader counts our grant against its buckets' limits only
 * for st.lease periods after the last one we heard it in (and one more
 * for our clocks), then gives our share to the other nodes; past it a
 * limited bucket is held at 0 here (a limit is a promise: fail closed),
 * a bucket without one keeps its R (a floor, no limit to break). */
void agent__static_tokens(agent_t *a, uint64_t period)
{
    /* A refused node holds everything (hold()): no grant lifts that. */
    if (a->cfg.mode != AGENT_FALLBACK_STATIC || !a->grant.snapshots || a->st.refused)
        return;
    int over = a->st.lease && period > a->grant_period + a->st.lease;
    if (over && !a->lease_over && a->peer)
        log_warn("controller %s: the fallback lease of %u periods after period %llu has "
                 "ended: limited buckets held at 0 until a controller is heard",
                 a->peer, a->st.lease, (unsigned long long)a->grant_period);
    a->lease_over = over;
    a->st.lease_periods += over;
    /* The grant is a rate (grant_pace()): what is left of it for the time
     * left, with the scheduler's burst depth, never the whole period's. */
    double share = NAN, until = agent__grant_until(a), burst = 0;
    int pacing = 0;
    sched_get_pacing(a->s, &pacing, &burst, NULL);
    if (isfinite(until) && a->period_s > 0)
        share = (until - a->now + (pacing ? burst : 0)) / a->period_s;
    int n = sched_nbuckets(a->s);
    for (int b = 0; b < n; b++) {
        int64_t r, l;
        if (grant_tokens(&a->grant, a->s, b, &r, &l) != 0)
            continue;
        grant_pace(&a->grant, b, share, &r, &l);
        if (over && l != SCHED_UNLIMITED)
            r = l = 0;
        agent__op_set_tokens(a, b, r, l);
    }
    agent__bytes_static(a, share);
    agent__op_applied(a);
}

/* `fresh`: the tokens the node holds were set by the controller for the
 * current period (it spoke in it), so they stay; otherwise they are an
 * older period's and the remembered grant replaces them. */
void agent__enter_fallback(agent_t *a, const char *why, double now, int fresh)
{
    if (a->st.fallback)
        return;
    a->st.fallback = 1;
    a->st.fallbacks++;
    a->fallback_since = now;
    a->warned = 1; /* this warning is the period's */
    a->warned_period = a->period;
    a->st.warn_unreachable++;
    if (a->cfg.mode == AGENT_FALLBACK_RR) {
        if (a->cfg.manage_policy && !a->st.refused)
            agent__op_set_policy(a, a->cfg.fallback);
    } else if (!fresh) {
        agent__static_tokens(a, a->period);
        agent__shares_static(a);
    }
    if (a->peer)
        log_warn("controller %s silent for %.2f s (%s): falling back to %s (%s)", a->peer,
                 now - a->last_ctl, why, agent_mode_str(a->cfg.mode),
                 a->cfg.mode == AGENT_FALLBACK_RR ? "round robin, no limits"
                 : a->grant.snapshots ? "last period's grant"
                                      : "no grant yet: tokens kept");
}

void agent__resume(agent_t *a, double now)
{
    if (!a->st.fallback)
        return;
    a->st.fallback = 0;
    a->lease_over = 0;
    a->st.resumes++;
    a->warned = 0;
    if (a->cfg.manage_policy)
        agent__op_set_policy(a, a->cfg.normal);
    if (a->peer) {
        if (a->st.welcomed && a->st.fallbacks)
            log_warn("controller %s is back after %.2f s in fallback %s: resuming policy %s",
                     a->peer, now - a->fallback_since, agent_mode_str(a->cfg.mode),
                     policy_str(a->cfg.normal));
        else
            log_info("controller %s: first tokens: resuming policy %s", a->peer,
                     policy_str(a->cfg.normal));
    }
}

/* Fencing: whether a message from `src` with m->epoch is obeyed.  A higher
 * epoch makes `src` the leader; *adopt then says that the old leader's
 * session (table, period numbering) must be forgotten. */
int agent__epoch_ok(agent_t *a, const proto_msg_t *m, int src, double now, int *adopt)
{
    *adopt = 0;
    if (m->type != PROTO_WELCOME && m->type != PROTO_TOKENS && m->type != PROTO_HEARTBEAT &&
        m->type != PROTO_ERROR && m->type != PROTO_RULES)
        return 1; /* rules too: only the leader's list classifies (issue 27) */
    /* Another controller at the leader's epoch takes over only a node in
     * fallback whose leader has also been quiet for an interval (0.5 s
     * before any timing): not while two of them welcome a starting node. */
    double quiet = a->has_timing ? a->interval_s : 0.5;
    int gone = a->st.fallback && now - a->last_ctl > quiet;
    if (m->epoch < a->st.epoch ||
        (m->epoch == a->st.epoch && a->st.leader >= 0 && a->st.leader != src && !gone)) {
        a->st.stale_epoch++;
        if (a->peer)
            log_debug("controller message (%s, epoch %llu, source %d) from a deposed or "
                      "standby controller ignored (leader epoch %llu, source %d)",
                      proto_type_str(m->type), (unsigned long long)m->epoch, src,
                      (unsigned long long)a->st.epoch, a->st.leader);
        return 0;
    }
    if (m->epoch > a->st.epoch || (a->st.leader >= 0 && a->st.leader != src)) {
        if (a->peer)
            log_warn("controller %s: following source %d, epoch %llu (was source %d, epoch %llu)",
                     a->peer, src, (unsigned long long)m->epoch, a->st.leader,
                     (unsigned long long)a->st.epoch);
        *adopt = a->st.leader >= 0 || a->st.epoch > 0;
    }
    a->st.epoch = m->epoch;
    a->st.leader = src;
    return 1;
}

void agent__watch(agent_t *a, double now, uint32_t k)
{
    a->st.silent_s = now - a->last_ctl;
    /* Silent for a while and not heard at all in this period: the tokens
     * we hold are for a period that has ended.  (A controller that goes
     * quiet mid-period leaves its tokens valid until the period ends.)  A
     * late controller is not a dead one: the silence must exceed the
     * threshold plus a grace for scheduling delay on either host, and the
     * controller's own clock, as its last message stamped it, must be that
     * many intervals behind ours. */
    double grace = a->cfg.grace_s > 0.25 * a->interval_s ? a->cfg.grace_s : 0.25 * a->interval_s;
    uint64_t pos = a->period * a->intervals + k;
    double behind = a->ctl_pos_known && pos > a->ctl_pos ? (double)(pos - a->ctl_pos) : 0;
    if (!a->ctl_pos_known)
        behind = INFINITY; /* no word from this leader yet */
    if (!a->st.fallback && a->st.silent_s > a->cfg.silence_intervals * a->interval_s + grace &&
        behind >= a->cfg.silence_intervals && a->last_ctl < a->period_end - a->period_s) {
        char why[96];
        snprintf(why, sizeof why, "no tokens or heartbeat since period %llu interval %llu",
                 (unsigned long long)(a->ctl_pos / a->intervals),
                 (unsigned long long)(a->ctl_pos % a->intervals));
        agent__enter_fallback(a, why, now, 0);
    }
    /* Say once a period that no controller is heard. */
    if (a->st.fallback && (!a->warned || a->warned_period != a->period) &&
        a->st.silent_s > a->interval_s) {
        a->warned = 1;
        a->warned_period = a->period;
        a->st.warn_unreachable++;
        if (a->peer)
            log_warn("no controller heard for %.1f s at %s (period %llu): fallback %s, %s",
                     a->st.silent_s, a->peer, (unsigned long long)a->period,
                     agent_mode_str(a->cfg.mode),
                     a->cfg.mode == AGENT_FALLBACK_RR ? "round robin, no limits"
                     : a->grant.snapshots ? "enforcing the last period's grant"
                                          : "no grant to enforce yet");
    }
}

const char *agent_state_str(const agent_t *a)
{
    if (!a->st.fallback)
        return "following";
    if (!a->st.welcomed && !a->st.fallbacks)
        return "waiting";
    return agent_mode_str(a->cfg.mode);
}

