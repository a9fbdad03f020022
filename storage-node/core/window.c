/* window.c - the adaptive backend window: a delay-based controller over epochs of completions (see window.h). */
#include "storage-node/core/window.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

struct window {
    window_config_t cfg;
    double w;            /* the window, continuous; limit is it rounded */
    int limit;
    int inflight;
    double mark;         /* time up to which `area` is counted */
    double area;         /* IO-seconds at the backend this epoch */
    uint64_t done;       /* completions this epoch */
    double epoch_start;
    int filled;          /* the IOs in flight reached the limit this epoch */
    int reserved;        /* window_note_reserved() this epoch */
    int bounded;         /* window_note_bounded() this epoch */
    double latency, base, throughput;
    double open_tp;      /* throughput of the last epoch the bound did not hold */
    uint64_t epochs;
};

void window_config_defaults(window_config_t *cfg)
{
    *cfg = (window_config_t){.adaptive = 1, .start = 2, .floor = 2, .ceiling = 64,
                             .gain = 0.5, .alpha = 8, .target = 1, .target_open = 1, .epoch = 0.01,
                             .min_samples = 32, .headroom = WINDOW_HEADROOM};
}

static double clamp(const window_config_t *c, double w)
{
    return w < c->floor ? c->floor : w > c->ceiling ? c->ceiling : w;
}

window_t *window_new(const window_config_t *cfg, double now, int *err)
{
    int rc = -EINVAL;
    window_t *w = NULL;
    if (!cfg || cfg->floor < 1 || cfg->headroom < 0 || cfg->ceiling < cfg->floor || !(cfg->gain > 0) ||
        cfg->gain > 1 || !(cfg->alpha > 0) || !(cfg->target >= 1) || !(cfg->target_open >= 1) ||
        !(cfg->epoch > 0) || cfg->min_samples < 1)
        goto out;
    rc = -ENOMEM;
    if (!(w = calloc(1, sizeof *w)))
        goto out;
    w->cfg = *cfg;
    w->w = clamp(cfg, cfg->start);
    w->limit = (int)lround(w->w);
    w->mark = w->epoch_start = now;
    rc = 0;
out:
    if (rc < 0 && err)
        *err = rc;
    return w;
}

void window_destroy(window_t **wp)
{
    if (!wp || !*wp)
        return;
    free(*wp);
    *wp = NULL;
}

int window_limit(const window_t *w)
{
    return w->limit;
}

int window_open_limit(const window_t *w, int behind)
{
    if (behind <= 0 || w->cfg.headroom <= 0)
        return w->limit;
    long h = (long)behind * w->cfg.headroom;
    return h >= w->limit ? 1 : w->limit - (int)h;
}

int window_need_limit(const window_t *w, int behind, double slack)
{
    int cap = window_open_limit(w, behind);
    if (behind <= 0 || w->cfg.headroom <= 0 || !(slack < INFINITY) || !(w->base > 0))
        return cap;
    /* X: while the bound holds, the throughput is what it lets through;
     * the last open epoch's keeps the bound from chasing itself down */
    double x = w->throughput > w->open_tp ? w->throughput : w->open_tp;
    if (!(x > 0))
        return cap;
    /* the pipe (base x X, IOs in service: they delay nobody beyond the
     * base) plus the queue (slack - base) x X.  Tried first: the queue
     * alone, which starves a backend serving many at once (docs) */
    double q = slack * x;
    int need = q < WINDOW_NEED_FLOOR ? WINDOW_NEED_FLOOR : q >= cap ? cap : (int)lround(q);
    return need < cap ? need : cap;
}

int window_pipe_limit(const window_t *w)
{
    double x = w->throughput > w->open_tp ? w->throughput : w->open_tp;
    if (w->cfg.headroom <= 0 || !(w->base > 0) || !(x > 0))
        return w->limit; /* headroom off (a fixed window), or nothing measured */
    double p = ceil(w->base * x) + WINDOW_PIPE_SLACK;
    int lim = p < WINDOW_NEED_FLOOR ? WINDOW_NEED_FLOOR : p >= w->limit ? w->limit : (int)p;
    return lim;
}

int window_inflight(const window_t *w)
{
    return w->inflight;
}

/* Adds the IO-seconds since the last mark. */
static void account(window_t *w, double now)
{
    if (now > w->mark) {
        w->area += w->inflight * (now - w->mark);
        w->mark = now;
    }
}

/* Ends the epoch if it lasted long enough and saw enough completions:
 * measures, then moves the window (adaptive) toward target * base / L * w
 * + alpha. */
static void epoch_end(window_t *w, double now)
{
    double dt = now - w->epoch_start;
    if (dt < w->cfg.epoch || w->done < (uint64_t)w->cfg.min_samples)
        return;
    w->latency = w->area / (double)w->done;
    w->throughput = (double)w->done / dt;
    /* The base is the lowest latency seen, except at the floor: there the
     * node keeps as little at the backend as it may, so whatever latency it
     * sees is the backend's own (a backend that became slower for good
     * moves the base up instead of pinning the window at the floor).  Not
     * in an epoch the headroom bound held (window_note_bounded()): the
     * IOs at the backend fell as it began, and IOs that began in the epoch
     * before end in this one, so area / completions runs below any real
     * latency. */
    if (!w->bounded)
        w->open_tp = w->throughput;
    if (w->epochs == 0 || (!w->bounded && (w->latency < w->base || w->limit <= w->cfg.floor)))
        w->base = w->latency;
    w->epochs++;
    if (w->cfg.adaptive && w->latency > 0) {
        double f = w->reserved || w->cfg.target_open < w->cfg.target ? w->cfg.target
                                                                     : w->cfg.target_open;
        double target = f * w->base / w->latency * w->w + w->cfg.alpha;
        if (!w->filled && target > w->w)
            target = w->w; /* not window-limited: no reason to grow */
        w->w = clamp(&w->cfg, (1 - w->cfg.gain) * w->w + w->cfg.gain * target);
        w->limit = (int)lround(w->w);
    }
    w->area = 0;
    w->done = 0;
    w->epoch_start = now;
    w->filled = w->inflight >= w->limit;
    w->reserved = 0;
    w->bounded = 0;
}

void window_take(window_t *w, double now)
{
    account(w, now);
    if (++w->inflight >= w->limit)
        w->filled = 1;
}

void window_done(window_t *w, double now)
{
    account(w, now);
    w->inflight--;
    w->done++;
    epoch_end(w, now);
}

void window_untake(window_t *w, double now)
{
    account(w, now);
    w->inflight--;
}

void window_note_bounded(window_t *w)
{
    w->bounded = 1;
    w->filled = 1;
}

void window_note_reserved(window_t *w)
{
    w->reserved = 1;
}

void window_stats(const window_t *w, window_stats_t *out)
{
    *out = (window_stats_t){.window = w->limit, .inflight = w->inflight,
                            .latency = w->latency, .base = w->base,
                            .throughput = w->throughput, .epochs = w->epochs};
}
