/* agent_bytes.c - the agent's side of the bytes/s dimension (cost-aware tokens): byte records in reports, byte tokens applied net of what was served, the fail-static byte grant; bytes on the wire, units in the scheduler. */
#include <math.h>

#include "common/growarr.h"
#include "storage-node/core/agent_int.h"

/* Makes a->ub cover n buckets (new entries zero).  Returns 0 or -ENOMEM. */
static int ub_fit(agent_t *a, int n)
{
    return growarr((void **)&a->ub, &a->ub_cap, n, sizeof *a->ub);
}

/* Units to bytes for the wire, clamped to what it carries. */
static uint64_t to_bytes(const agent_t *a, uint64_t u)
{
    return u > PROTO_MAX_COUNT / a->unit ? PROTO_MAX_COUNT : u * a->unit;
}

static int64_t left_bytes(const agent_t *a, int64_t u)
{
    if (u == SCHED_UNLIMITED)
        return PROTO_UNLIMITED;
    int64_t lim = (int64_t)(PROTO_MAX_COUNT / a->unit);
    return (u > lim ? lim : u < -lim ? -lim : u) * (int64_t)a->unit;
}

int agent__bytes_report(agent_t *a, proto_msg_t *m)
{
    m->nbytes = 0;
    m->served_bytes = 0;
    int n = a->my_n;
    size_t k = 0;
    int rc;
    if ((rc = ub_fit(a, n)))
        return rc;
    for (int b = 0; b < n; b++) {
        sched_bucket_stats_t bs;
        if (sched_bucket_stats(a->s, b, &bs) || !bs.units_on)
            continue;
        agent_ub_t *u = &a->ub[b];
        uint64_t ai = u->carry + (bs.arrivals_u >= u->prev ? bs.arrivals_u - u->prev : 0);
        u->prev = bs.arrivals_u;
        u->carry = 0;
        u->served_rep = bs.served_u;
        if ((rc = proto_msg_reserve_bytes(m, k + 1)))
            return rc;
        m->rbytes[k++] = (proto_report_bytes_t){
            .bucket = (uint32_t)b,
            .arrivals_interval = to_bytes(a, ai),
            .arrivals_period = to_bytes(a, bs.arrivals_u),
            .served = to_bytes(a, bs.served_u),
            .r_left = left_bytes(a, bs.ru_tokens),
            .l_left = left_bytes(a, bs.lu_tokens),
        };
    }
    m->nbytes = k;
    if (k) { /* the node's capacity in bytes: only said where it matters */
        sched_node_stats_t ns;
        sched_node_stats(a->s, &ns);
        m->served_bytes = to_bytes(a, ns.units);
    }
    return 0;
}

void agent__bytes_apply(agent_t *a, const proto_msg_t *m)
{
    for (size_t i = 0; i < m->nbytes; i++) {
        const proto_tokens_bytes_t *t = &m->tbytes[i];
        int b = t->bucket < a->ctl_n ? a->ctl_map[t->bucket] : -1;
        if (b < 0)
            continue;
        if (t->flags & PROTO_TOK_OFF) {
            sched_set_units(a->s, b, 0, 0, 0, INFINITY, 0);
            continue;
        }
        if (ub_fit(a, b + 1))
            continue;
        sched_bucket_stats_t bs;
        if (sched_bucket_stats(a->s, b, &bs))
            continue;
        /* Rounded down: the node never holds a byte more than granted. */
        int64_t r = t->r_bytes / (int64_t)a->unit;
        int64_t l = t->l_bytes == PROTO_UNLIMITED ? SCHED_UNLIMITED : t->l_bytes / (int64_t)a->unit;
        /* Net of what this node served since the report the grant
         * answers (R first, then L, which may go negative: a debt). */
        uint64_t since = bs.served_u > a->ub[b].served_rep ? bs.served_u - a->ub[b].served_rep : 0;
        if (since > (uint64_t)INT64_MAX / 8)
            since = (uint64_t)INT64_MAX / 8;
        int64_t from_r = (int64_t)since < r ? (int64_t)since : r;
        r -= from_r;
        if (l != SCHED_UNLIMITED)
            l -= (int64_t)since - from_r;
        sched_set_units(a->s, b, 1, r, l, agent__grant_until(a), a->now);
    }
}

void agent__bytes_period(agent_t *a, int covered, int node_period)
{
    int n = sched_nbuckets(a->s);
    if (ub_fit(a, n))
        return;
    for (int b = 0; b < n; b++) {
        sched_bucket_stats_t bs;
        if (sched_bucket_stats(a->s, b, &bs))
            continue;
        agent_ub_t *u = &a->ub[b];
        if (!node_period)
            u->carry = 0; /* the node's counters restarted at its boundary */
        else if (bs.arrivals_u >= u->prev)
            u->carry += bs.arrivals_u - u->prev;
        u->prev = 0;
        u->served_rep = 0;
        if (!covered)
            continue;
        u->on = bs.units_on;
        if (!bs.units_on)
            continue;
        int64_t left = (bs.ru_tokens > 0 ? bs.ru_tokens : 0);
        u->grant = bs.lu_tokens == SCHED_UNLIMITED
                       ? SCHED_UNLIMITED
                       : (int64_t)bs.served_u + left + (bs.lu_tokens > 0 ? bs.lu_tokens : 0);
    }
}

void agent__bytes_static(agent_t *a, double share)
{
    int n = sched_nbuckets(a->s);
    for (int b = 0; b < n && b < a->ub_cap; b++) {
        const agent_ub_t *u = &a->ub[b];
        sched_bucket_stats_t bs;
        if (!u->on || sched_bucket_stats(a->s, b, &bs))
            continue;
        int64_t l = u->grant == SCHED_UNLIMITED ? SCHED_UNLIMITED
                    : a->lease_over                 ? 0
                                                    : u->grant - (int64_t)bs.served_u;
        if (l != SCHED_UNLIMITED && share < 1.0) { /* a rate, as grant_pace() */
            int64_t most = (int64_t)ceil((double)u->grant * (share > 0 ? share : 0));
            if (l > most)
                l = most;
        }
        sched_set_units(a->s, b, 1, 0, l, agent__grant_until(a), a->now);
    }
}
