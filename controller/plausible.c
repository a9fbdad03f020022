/* plausible.c - what the controller believes of a node's report (issue 18): each value checked against what was granted and what the node can do, clamped, counted and logged at a bounded rate. */
#include <stdio.h>

#include "common/log.h"
#include "controller/plausible.h"

const char *ctrl_impl_str(ctrl_impl_t r)
{
    static const char *const s[CTRL_IMPL__COUNT] = {"served_beyond_grant", "served_beyond_rate",
                                                     "demand", "capacity"};
    return r >= 0 && r < CTRL_IMPL__COUNT ? s[r] : "?";
}

/* Counts a value of node nd's that the controller does not believe (`said`,
 * taken as `kept`; about bucket `bucket`, NULL if none) and logs it, at
 * most once per CTRL_IMPL_LOG_ROUNDS rounds per reason. */
void plausible_note(ctrl_t *c, const node_t *nd, ctrl_impl_t why, const char *bucket,
                    double said, double kept)
{
    c->st.implausible[why]++;
    if (c->round_no - c->impl_logged[why] < CTRL_IMPL_LOG_ROUNDS) {
        c->impl_quiet[why]++;
        return;
    }
    log_warn("node %s: implausible report (%s%s%s): %.0f taken as %.0f (%llu more since the last "
             "such warning)",
             nd->name, ctrl_impl_str(why), bucket ? ", bucket " : "", bucket ? bucket : "", said,
             kept, (unsigned long long)c->impl_quiet[why]);
    c->impl_logged[why] = c->round_no;
    c->impl_quiet[why] = 0;
}

/* The most IOs per second node nd is believed to do. */
double plausible_rate(const node_t *nd)
{
    double p = nd->cap.cfg.profile, e = nd->cap.estimate;
    return CTRL_PLAUSIBLE_FACTOR * (p > e ? p : e);
}

/* Lowers the served counts *s (in the order r, l, o) to `total` in all. */
static void served_clamp(pair_served_t *s, uint64_t total)
{
    s->r = s->r < total ? s->r : total;
    total -= s->r;
    s->l = s->l < total ? s->l : total;
    total -= s->l;
    s->o = s->o < total ? s->o : total;
}

/* Checks record r of node nd (pair p, configured, its slot) against what the
 * controller granted and what the node can do (`ub`: counts per period),
 * and keeps what it believes of it. */
void plausible_report_rec(ctrl_t *c, node_t *nd, pair_t *p, const proto_report_rec_t *r,
                          uint64_t period, uint64_t ub)
{
    /* A queue may hold many periods' worth of a slow node's service. */
    uint64_t dq = ub < (uint64_t)CTRL_COUNT_MAX / CTRL_DEMAND_FACTOR ? ub * CTRL_DEMAND_FACTOR
                                                                      : (uint64_t)CTRL_COUNT_MAX;
    uint64_t q = r->queued, a = r->arrivals_interval;
    if (q > dq || a > dq) {
        /* the pair's name (ctrl__tname(), loads more) only for a note */
        plausible_note(c, nd, CTRL_IMPL_DEMAND, ctrl__tname(c, nd, r->bucket),
                       (double)(q > a ? q : a), (double)dq);
        q = q < dq ? q : dq;
        a = a < dq ? a : dq;
    }
    pair_served_t sv = {r->served_r, r->served_l, r->served_o, 0};
    uint64_t said = count_uadd(count_uadd(sv.r, sv.l), sv.o), keep = said;
    if (keep > ub) {
        plausible_note(c, nd, CTRL_IMPL_SERVED_RATE, ctrl__tname(c, nd, r->bucket),
                       (double)said, (double)ub);
        keep = ub;
    }
    const pair_push_t *ps = &nd->push[r->bucket];
    if (c->b[p->bk].l != CTRL_UNLIMITED && ps->tok_r >= 0 && ps->gperiod == period) {
        uint64_t allow = (uint64_t)ps->grant + (uint64_t)ps->grant / 32 + 64;
        if (keep > allow) {
            plausible_note(c, nd, CTRL_IMPL_SERVED_GRANT, ctrl__tname(c, nd, r->bucket),
                           (double)said, (double)allow);
            keep = allow;
        }
    }
    if (keep < said)
        served_clamp(&sv, keep);
    p->queued = q;
    p->arrivals = a;
    p->served = (int64_t)keep;
    nd->psv[nd->pref[r->bucket]] = sv; /* p is the pair's slot */
}
