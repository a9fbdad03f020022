/* estimate.c - demand and capacity estimators for the control loop. */
#include "controller/estimate.h"

#include <math.h>

int64_t estimate_demand(estimate_demand_t *st, uint64_t queued, uint64_t arrivals,
                        int throttled, double intervals_left)
{
    double rate = (double)arrivals;
    /* Backlogged and throttled: arrivals were held back by us, not by the
     * client; keep the previous rate so the estimate cannot collapse. */
    if (throttled && queued > 0 && st->rate > rate)
        rate = st->rate;
    st->rate = rate;
    if (!(intervals_left > 0))
        intervals_left = 0;
    double d = (double)queued + rate * intervals_left;
    if (!(d < (double)ESTIMATE_DEMAND_MAX))
        return ESTIMATE_DEMAND_MAX;
    /* llround(d) for 0 <= d < 2^50, without the libm call (once per pair
     * and round in the controller): d - t is exact there. */
    int64_t t = (int64_t)d;
    return t + (d - (double)t >= 0.5);
}

estimate_cap_cfg_t estimate_cap_defaults(double profile)
{
    return (estimate_cap_cfg_t){
        .profile = profile,
        .step = 0.05 * profile,
        .floor = 0.25 * profile,
        .saturated = 0.95,
        .min_busy = 0.5,
        .full_busy = 0.98,
        .window = 8,
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
    c->cfg.full_busy = clamp01(c->cfg.full_busy);
    if (c->cfg.window < 1)
        c->cfg.window = 1;
    if (c->cfg.window > ESTIMATE_WINDOW_MAX)
        c->cfg.window = ESTIMATE_WINDOW_MAX;
    c->estimate = c->cfg.profile;
}

double estimate_cap_update(estimate_cap_t *c, uint64_t completions, double busy_s,
                           double interval_s)
{
    if (!(interval_s > 0))
        return c->estimate;
    double u = (double)completions;
    int full = busy_s > 0 && busy_s >= c->cfg.full_busy * interval_s;
    if (!full && u >= c->cfg.saturated * c->estimate * interval_s && u > 0) {
        /* Haechi adds one step; a server that did much more than that has
         * shown its rate directly. */
        c->estimate += c->cfg.step;
        if (u / interval_s > c->estimate)
            c->estimate = u / interval_s;
        c->steps++;
        return c->estimate;
    }
    if (!(busy_s >= c->cfg.min_busy * interval_s) || busy_s <= 0) {
        c->ignored++;
        return c->estimate;
    }
    if (busy_s > interval_s)
        busy_s = interval_s;
    double rate = u / busy_s;
    if (rate < c->cfg.floor) {
        c->ignored++;
        return c->estimate;
    }
    c->hist[c->pos] = rate;
    c->pos = (c->pos + 1) % c->cfg.window;
    if (c->nhist < c->cfg.window)
        c->nhist++;
    double sum = 0;
    for (int i = 0; i < c->nhist; i++)
        sum += c->hist[i];
    c->estimate = sum / c->nhist;
    if (c->estimate < 1)
        c->estimate = 1;
    c->samples++;
    return c->estimate;
}

int estimate_changed(double before, double now, double rel, double abs_floor)
{
    double diff = fabs(now - before);
    double mag = fmax(fabs(before), fabs(now));
    return diff > abs_floor && diff > rel * mag;
}
