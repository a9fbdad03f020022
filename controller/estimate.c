/* estimate.c - demand and capacity estimators for the control loop. */
#include "controller/estimate.h"

#include <math.h>

estimate_cap_cfg_t estimate_cap_defaults(double profile)
{
    return (estimate_cap_cfg_t){
        .profile = profile,
        .step = 0.05 * profile,
        .floor = 0.25 * profile,
        .saturated = 0.95,
        .min_busy = 0.5,
        .window = 8,
        .max_change = 0.1,
        .k_sd = 0,
        .cold_margin = 0.2,
        .max_margin = 0.5,
        .max_factor = 4,
        .recent = 3,
    };
}

static double clamp01(double x)
{
    return x > 0 ? (x < 1 ? x : 1) : 0;
}

void estimate_cap_init(estimate_cap_t *c, const estimate_cap_cfg_t *cfg)
{
    *c = (estimate_cap_t){.cfg = *cfg};
    if (!(c->cfg.profile >= 1))
        c->cfg.profile = 1;
    if (!(c->cfg.step >= 0))
        c->cfg.step = 0;
    if (!(c->cfg.floor >= 0))
        c->cfg.floor = 0;
    c->cfg.saturated = clamp01(c->cfg.saturated);
    c->cfg.min_busy = clamp01(c->cfg.min_busy);
    c->cfg.max_change = clamp01(c->cfg.max_change);
    c->cfg.cold_margin = clamp01(c->cfg.cold_margin);
    c->cfg.max_margin = clamp01(c->cfg.max_margin);
    if (!(c->cfg.k_sd >= 0))
        c->cfg.k_sd = 0;
    if (c->cfg.window < 1)
        c->cfg.window = 1;
    if (c->cfg.window > ESTIMATE_WINDOW_MAX)
        c->cfg.window = ESTIMATE_WINDOW_MAX;
    if (c->cfg.recent < 0)
        c->cfg.recent = 0;
    if (c->cfg.recent > ESTIMATE_WINDOW_MAX)
        c->cfg.recent = ESTIMATE_WINDOW_MAX;
    c->estimate = c->cfg.profile;
    c->conservative = c->estimate * (1 - c->cfg.cold_margin);
    c->confined = c->conservative;
}

/* Moves the estimate to `want`, by at most max_change of its value. */
static void cap_move(estimate_cap_t *c, double want)
{
    double e = c->estimate, m = c->cfg.max_change;
    if (m > 0) {
        if (want > e * (1 + m))
            want = e * (1 + m);
        else if (want < e * (1 - m))
            want = e * (1 - m);
    }
    if (c->cfg.max_factor > 0 && want > c->cfg.max_factor * c->cfg.profile)
        want = c->cfg.max_factor * c->cfg.profile;
    c->estimate = want < 1 ? 1 : want;
}

/* Recomputes c->conservative from the window and the estimate. */
static void cap_conservative(estimate_cap_t *c)
{
    double e = c->estimate, lo = e * (1 - c->cfg.max_margin);
    double cons = e * (1 - c->cfg.cold_margin);
    if (c->nhist >= 2) {
        double sum = 0, sq = 0;
        for (int i = 0; i < c->nhist; i++)
            sum += c->hist[i];
        double mean = sum / c->nhist;
        for (int i = 0; i < c->nhist; i++)
            sq += (c->hist[i] - mean) * (c->hist[i] - mean);
        cons = mean - c->cfg.k_sd * sqrt(sq / (c->nhist - 1));
    }
    if (cons > e)
        cons = e;
    if (cons < lo)
        cons = lo;
    /* Never more than it delivered lately (issue 25): the window's mean
     * lags a step down by up to `window` samples, the estimate by the
     * clamp too, and R placed beyond the server's rate is not served.
     * Only a drop counts: recent samples a little under the mean are
     * noise (ESTIMATE_RECENT_DROP). */
    double most = 0;
    for (int i = 0; i < c->nrec; i++)
        if (c->rec[i] > most)
            most = c->rec[i];
    if (c->nrec > 0 && most < (1 - ESTIMATE_RECENT_DROP) * cons)
        cons = most;
    c->conservative = cons < 1 ? 1 : cons;
    /* The confined capacity: one busy interval's drop is followed at once
     * (estimate.h). */
    c->confined = c->conservative;
    if (c->cfg.recent > 0 && c->fast > 0 && c->fast < (1 - ESTIMATE_FAST_DROP) * c->confined)
        c->confined = c->fast < 1 ? 1 : c->fast;
}

/* Remembers a delivered rate (IOs per second) for the delivered cap. */
static void cap_delivered(estimate_cap_t *c, double rate)
{
    if (c->cfg.recent <= 0)
        return;
    c->rec[c->rpos] = rate;
    c->rpos = (c->rpos + 1) % c->cfg.recent;
    if (c->nrec < c->cfg.recent)
        c->nrec++;
}

double estimate_cap_update(estimate_cap_t *c, uint64_t completions, double busy_s,
                           double interval_s)
{
    if (!(interval_s > 0))
        return c->estimate;
    double u = (double)completions;
    /* Only an interval the server was busy through says what it delivers
     * now (the confined capacity); any other clears the last figure. */
    c->fast = 0;
    if (busy_s >= ESTIMATE_FAST_BUSY * interval_s && busy_s > 0)
        c->fast = u / (busy_s < interval_s ? busy_s : interval_s);
    if (!(busy_s >= c->cfg.min_busy * interval_s) || busy_s <= 0) {
        if (u > 0 && u >= c->cfg.saturated * c->estimate * interval_s) {
            /* Its estimate's worth in less than min_busy of the interval:
             * the estimate is low.  Haechi adds one step; a server that
             * did much more than that has shown its rate directly. */
            double want = c->estimate + c->cfg.step;
            if (u / interval_s > want)
                want = u / interval_s;
            cap_move(c, want);
            cap_delivered(c, u / interval_s);
            cap_conservative(c);
            c->steps++;
        } else {
            c->ignored++;
            cap_conservative(c); /* the confined capacity forgets its drop */
        }
        return c->estimate;
    }
    /* Busy a good part of the interval: its rate while busy is what it
     * delivers.  (Stepping it instead, as when it merely completed its
     * estimate's worth, pushed the estimate 20-48% past that rate: issue
     * 14.) */
    if (busy_s > interval_s)
        busy_s = interval_s;
    double rate = u / busy_s;
    if (rate < c->cfg.floor) {
        c->ignored++;
        c->fast = 0; /* a light-load artefact, not a step */
        cap_conservative(c);
        return c->estimate;
    }
    c->hist[c->pos] = rate;
    c->pos = (c->pos + 1) % c->cfg.window;
    if (c->nhist < c->cfg.window)
        c->nhist++;
    cap_delivered(c, rate);
    double sum = 0;
    for (int i = 0; i < c->nhist; i++)
        sum += c->hist[i];
    cap_move(c, sum / c->nhist);
    cap_conservative(c);
    c->samples++;
    return c->estimate;
}
