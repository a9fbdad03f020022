/* rounds.c - bqos-controller's round cadence: opens a round at each interval boundary, closes it (compute, push) when the reports are in or the wait ran out, and accounts for its time and lateness. */
#include "controller/daemon/rounds.h"

#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/mono.h"
#include "common/promtext.h"

void rounds_init(rounds_t *r, ctrl_t *ctrl, pclock_t *clk, nodes_t *nodes, cmetrics_t *met)
{
    *r = (rounds_t){.ctrl = ctrl, .clk = clk, .nodes = nodes, .met = met};
}

/* CPU seconds used by the whole process (loop, ZeroMQ I/O thread, OpenMP):
 * unlike the wall-clock split it does not grow when the machine is busy. */
static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Adds an observation of v seconds to histogram h (no allocation). */
static void observe(timing_hist_t *h, double v)
{
    static const double bounds[TIMING_NBOUNDS] = TIMING_ROUND_BOUNDS;
    h->counts[promtext_bucket(bounds, TIMING_NBOUNDS, v)]++;
    h->sum += v;
}

/* Computes the round, pushes its tokens and accounts for its time. */
static void close_round(rounds_t *r, double now)
{
    timing_t *t = &r->tm;
    t->cur.receive = pclock_close(r->clk, now);
    ctrl_round_late(r->ctrl, pclock_since_boundary(r->clk, now));
    ctrl_result_t res;
    double t0 = mono_now();
    int rc = ctrl_compute(r->ctrl, &res);
    t->cur.pshift = mono_now() - t0;
    if (rc < 0) {
        log_error("token computation failed: %s; nodes keep their tokens", strerror(-rc));
        res = (ctrl_result_t){.skipped = 1};
    }
    nodes_push(r->nodes, &res, mono_now());
    observe(&t->round, mono_now() - t0);
    observe(&t->compute, t->cur.pshift);
    t->last = t->cur;
    t->last_res = res;
    t->total.receive += t->cur.receive;
    t->total.decode += t->cur.decode;
    t->total.pshift += t->cur.pshift;
    t->total.encode += t->cur.encode;
    t->total.send += t->cur.send;
    t->nsplits++;
    double cpu = cpu_now();
    if (t->nsplits > 1)
        t->cpu_total += cpu - t->cpu_mark;
    t->cpu_mark = cpu;
    log_debug("round %llu.%u: %s, %d nodes up, %zu buckets, %zu pairs, R %lld L %lld; "
              "ms receive %.3f decode %.3f pshift %.3f (R %.3f, L %.3f) encode %.3f send %.3f",
              (unsigned long long)r->clk->period, r->clk->interval,
              res.skipped ? "skipped" : "computed", res.nodes_up, res.buckets, res.pairs,
              (long long)res.r_tokens, (long long)res.l_tokens, t->cur.receive * 1e3,
              t->cur.decode * 1e3, t->cur.pshift * 1e3, res.t_rpass * 1e3, res.t_lpass * 1e3,
              t->cur.encode * 1e3,
              t->cur.send * 1e3);
    memset(&t->cur, 0, sizeof t->cur);
}

static int all_reported(const rounds_t *r)
{
    for (int i = 0; i < ctrl_nnodes(r->ctrl); i++)
        if (ctrl_node_up(r->ctrl, i) && !ctrl_node_reported(r->ctrl, i))
            return 0;
    return 1;
}

/* A round that begins more than half an interval after its boundary means
 * this host is starved or was paused: the nodes see a late controller and,
 * after --silence intervals, fall back.  Counted, and said at warn at most
 * once a period, so that the controller's log shows what the nodes saw. */
static void note_late(rounds_t *r, double now)
{
    const pclock_t *pc = r->clk;
    if (!pc->round_start)
        return;
    double iv = pclock_interval_s(pc);
    double late = pclock_since_boundary(pc, now) - iv; /* past the next boundary */
    if (late <= 0.5 * iv)
        return;
    r->tm.late_rounds++;
    if (late > r->tm.late_max)
        r->tm.late_max = late;
    if (r->tm.late_logged_period != pc->period) {
        r->tm.late_logged_period = pc->period;
        log_warn("the round after period %llu interval %u begins %.0f ms after its boundary "
                 "(host busy or paused?): nodes hear no tokens and fall back after "
                 "their --silence; %llu late rounds so far",
                 (unsigned long long)pc->period, pc->interval, late * 1e3,
                 (unsigned long long)r->tm.late_rounds);
    }
}

void rounds_tick(rounds_t *r, double now)
{
    if (pclock_due(r->clk, now)) {
        note_late(r, now);
        if (r->clk->round_open)
            close_round(r, now);
        double left = pclock_begin(r->clk, now);
        if (r->clk->period != ctrl_period(r->ctrl)) {
            cmetrics_period_end(r->met, now);
            if (r->period_hook)
                r->period_hook(r->hook_arg, now);
        }
        ctrl_round_begin(r->ctrl, r->clk->period, r->clk->interval, left);
    }
    /* Reports that came a little before our boundary (the nodes' clocks
     * are ours +- half a millisecond) already count for this round. */
    if (r->clk->round_open && (pclock_expired(r->clk, now) || all_reported(r)))
        close_round(r, now);
}

/* The round is computed from the nodes' reports like any other (this
 * controller received them as a standby); forced by ctrl_forget_pushed(),
 * it sends every pair's count.  A push in the middle of an interval loses
 * nothing: nodes take tokens net of what they served since the report the
 * counts were computed from. */
void rounds_push_now(rounds_t *r, double now)
{
    if (!r->clk->round_start || pclock_due(r->clk, now))
        return; /* no round yet, or one begins now: rounds_tick() pushes it */
    if (r->clk->round_open) {
        close_round(r, now);
        return;
    }
    ctrl_result_t res;
    if (ctrl_compute(r->ctrl, &res) < 0)
        res = (ctrl_result_t){.skipped = 1};
    nodes_push(r->nodes, &res, now);
    log_info("took over in period %llu interval %u: pushed %s at once",
             (unsigned long long)r->clk->period, r->clk->interval,
             res.skipped ? "heartbeats" : "every node's tokens");
}
