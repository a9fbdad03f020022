/* report.c - per-interval completion counters and the CSV, JSON and table outputs of bqos-load; per-window accuracy (report_win_*), shared with bqos-sim. */
#include "workloads/report.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* ---- per-window accuracy ------------------------------------------------ */

/* One bucket's figures for one window length. */
typedef struct {
    uint64_t windows, r_windows, r_met;
    double l_worst, r_worst;
} win_acc_t;

/* One bucket: its rates, the long window being summed, its figures. */
typedef struct {
    double res, lim;
    uint64_t served;                    /* running long window */
    double idle;                        /* ... its idle time so far */
    size_t nfed;                        /* short windows in it so far */
    win_acc_t acc[2];
} win_bucket_t;

struct report_win {
    size_t nb, per_long;
    double len[2];
    win_bucket_t *b;
};

/* Rounds x to the nearest count, at least 1. */
static size_t count_of(double x)
{
    double n = floor(x + 0.5);
    return n < 1 ? 1 : (size_t)n;
}

void report_win_layout(double period, size_t *nshort, size_t *per_long)
{
    size_t nlong = count_of(period / REPORT_WIN_LONG_S);
    *per_long = count_of(period / (double)nlong / REPORT_WIN_SHORT_S);
    *nshort = nlong * *per_long;
}

report_win_t *report_win_new(size_t nbuckets, double period, const double *res, const double *lim)
{
    report_win_t *w = calloc(1, sizeof *w);
    if (!w || !(w->b = calloc(nbuckets ? nbuckets : 1, sizeof *w->b))) {
        free(w);
        return NULL;
    }
    size_t nshort;
    report_win_layout(period, &nshort, &w->per_long);
    w->nb = nbuckets;
    w->len[REPORT_WIN_SHORT] = period / (double)nshort;
    w->len[REPORT_WIN_LONG] = w->len[REPORT_WIN_SHORT] * (double)w->per_long;
    for (size_t b = 0; b < nbuckets; b++) {
        w->b[b].res = res[b];
        w->b[b].lim = lim[b];
        for (int k = 0; k < 2; k++)
            w->b[b].acc[k].r_worst = INFINITY;
    }
    return w;
}

void report_win_set_rates(report_win_t *w, size_t b, double res, double lim)
{
    w->b[b].res = res;
    w->b[b].lim = lim;
}

void report_win_destroy(report_win_t **wp)
{
    if (!wp || !*wp)
        return;
    free((*wp)->b);
    free(*wp);
    *wp = NULL;
}

double report_win_short_len(const report_win_t *w)
{
    return w->len[REPORT_WIN_SHORT];
}

int report_win_demanding(double idle, double len)
{
    return idle < REPORT_WIN_IDLE_SHARE * len;
}

/* Counts one closed window of length len for bucket x in a: `served` IOs
 * in it, `idle` seconds of it with nothing outstanding. */
static void win_close(const win_bucket_t *x, win_acc_t *a, double len, uint64_t served,
                      double idle)
{
    a->windows++;
    if (x->lim >= 0) {
        double ratio = x->lim > 0 ? (double)served / (x->lim * len) : served ? INFINITY : 0;
        if (ratio > a->l_worst)
            a->l_worst = ratio;
    }
    double want = x->res * len;
    if (want > 0 && report_win_demanding(idle, len)) {
        double ratio = (double)served / want;
        a->r_windows++;
        a->r_met += ratio >= REPORT_WIN_R_SHARE;
        if (ratio < a->r_worst)
            a->r_worst = ratio;
    }
}

void report_win_feed(report_win_t *w, size_t b, uint64_t served, double idle)
{
    if (b >= w->nb)
        return;
    win_bucket_t *x = &w->b[b];
    double len = w->len[REPORT_WIN_SHORT];
    idle = !(idle > 0) ? 0 : idle > len ? len : idle;
    win_close(x, &x->acc[REPORT_WIN_SHORT], len, served, idle);
    if (x->nfed == 0) {
        x->served = 0;
        x->idle = 0;
    }
    x->served += served;
    x->idle += idle;
    if (++x->nfed == w->per_long) {
        win_close(x, &x->acc[REPORT_WIN_LONG], w->len[REPORT_WIN_LONG], x->served, x->idle);
        x->nfed = 0;
    }
}

report_win_fig_t report_win_figures(const report_win_t *w, long b, int which)
{
    report_win_fig_t f = {.len = w->len[which], .r_worst = INFINITY};
    for (size_t i = b < 0 ? 0 : (size_t)b; i < w->nb && (b < 0 || i == (size_t)b); i++) {
        const win_acc_t *a = &w->b[i].acc[which];
        f.windows += a->windows;
        if (w->b[i].lim >= 0) {
            f.l_windows += a->windows;
            if (a->l_worst > f.l_worst)
                f.l_worst = a->l_worst;
        }
        f.r_windows += a->r_windows;
        f.r_met += a->r_met;
        if (a->r_worst < f.r_worst)
            f.r_worst = a->r_worst;
    }
    f.r_share = f.r_windows ? (double)f.r_met / (double)f.r_windows : 1;
    if (!f.r_windows)
        f.r_worst = 1;
    return f;
}

static json_t *fig_json(const report_win_fig_t *f)
{
    json_t *lw = f->l_windows ? json_real(f->l_worst) : json_null();
    return json_pack("{s:f,s:I,s:I,s:o,s:I,s:I,s:f,s:f}", "len_s", f->len, "windows",
                     (json_int_t)f->windows, "l_windows", (json_int_t)f->l_windows, "l_worst", lw,
                     "r_windows", (json_int_t)f->r_windows, "r_met", (json_int_t)f->r_met,
                     "r_share", f->r_share, "r_worst", f->r_worst);
}

json_t *report_win_json(const report_win_fig_t *f)
{
    return json_pack("{s:o,s:o}", "long", fig_json(&f[REPORT_WIN_LONG]), "short",
                     fig_json(&f[REPORT_WIN_SHORT]));
}

/* The figures of bucket b (< 0: all) of w as JSON. */
static json_t *win_json(const report_win_t *w, long b)
{
    report_win_fig_t f[2] = {report_win_figures(w, b, REPORT_WIN_LONG),
                             report_win_figures(w, b, REPORT_WIN_SHORT)};
    return report_win_json(f);
}

/* ---- bqos-load's counters ------------------------------------------------ */

/* One bucket at one server, for the idle time of its windows; every field
 * is under `lock` (the load threads that send and answer the bucket's
 * requests there, and report_fold()). */
typedef struct {
    pthread_mutex_t lock;
    int64_t outst;              /* requests outstanding */
    double since;               /* when they last fell to none */
    uint64_t next;              /* next window report_fold() takes */
    double idle[REPORT_RING];   /* idle seconds of window j in [j % RING] */
} report_pair_t;

struct report {
    const scenario_t *s;
    double slot_len;       /* seconds per redistribution interval */
    double end;            /* seconds of load that ran (duration unless interrupted) */
    size_t nslots;
    _Atomic uint64_t *counts;   /* [bucket * nslots + slot] */
    _Atomic uint64_t *errors;   /* [bucket] */
    _Atomic uint64_t *bytes;    /* [bucket]: bytes moved (report_add_bytes()) */
    _Atomic uint64_t *servers;  /* [server] */
    _Atomic uint64_t *srv_slots; /* [server * nslots + slot]: what each server
                                    delivered per interval (servers.csv) */
    /* per-window accuracy: completions in rings [bucket * REPORT_RING +
     * window % REPORT_RING]; idle time per bucket and server in pairs[b *
     * nservers + srv] */
    report_win_t *win;
    size_t wn;                  /* short windows per period */
    double wlen;                /* their length */
    uint64_t wfirst;            /* first measured window */
    _Atomic uint32_t *ring_done;
    _Atomic uint64_t wfold;     /* next window to fold (main thread writes) */
    report_pair_t *pairs;
    size_t npairs;              /* of them with an initialised lock */
};

report_t *report_new(const scenario_t *s)
{
    report_t *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->s = s;
    r->slot_len = s->period / s->intervals;
    r->end = s->duration;
    r->nslots = (size_t)ceil(s->duration / r->slot_len - 1e-9);
    if (r->nslots == 0)
        r->nslots = 1;
    r->counts = calloc(s->nbuckets * r->nslots, sizeof *r->counts);
    r->errors = calloc(s->nbuckets, sizeof *r->errors);
    r->bytes = calloc(s->nbuckets, sizeof *r->bytes);
    r->servers = calloc(s->nservers, sizeof *r->servers);
    r->srv_slots = calloc((s->nservers ? s->nservers : 1) * r->nslots, sizeof *r->srv_slots);
    size_t nb = s->nbuckets ? s->nbuckets : 1, per_long;
    double *rl = calloc(2 * nb, sizeof *rl);
    if (rl) {
        for (size_t b = 0; b < s->nbuckets; b++) {
            rl[b] = s->buckets[b].reservation;
            rl[nb + b] = s->buckets[b].limit == SCENARIO_NO_LIMIT ? -1 : s->buckets[b].limit;
        }
        r->win = report_win_new(s->nbuckets, s->period, rl, rl + nb);
        free(rl);
    }
    report_win_layout(s->period, &r->wn, &per_long);
    r->wlen = s->period / (double)r->wn;
    /* As the summary's periods: warm-up only if a full period follows it. */
    if (floor(s->duration / s->period + 1e-9) > s->warmup_periods)
        r->wfirst = (uint64_t)s->warmup_periods * r->wn;
    size_t np = s->nbuckets * s->nservers;
    r->ring_done = calloc(nb * REPORT_RING, sizeof *r->ring_done);
    r->pairs = calloc(np ? np : 1, sizeof *r->pairs);
    for (; r->pairs && r->npairs < np; r->npairs++)
        if (pthread_mutex_init(&r->pairs[r->npairs].lock, NULL) != 0)
            break;
    if (!r->counts || !r->errors || !r->bytes || !r->servers || !r->srv_slots || !r->win ||
        !r->ring_done || !r->pairs || r->npairs < np)
        report_destroy(&r);
    return r;
}

void report_destroy(report_t **rp)
{
    if (!rp || !*rp)
        return;
    free((*rp)->counts);
    free((*rp)->errors);
    free((*rp)->bytes);
    free((*rp)->servers);
    free((*rp)->srv_slots);
    report_win_destroy(&(*rp)->win);
    free((*rp)->ring_done);
    for (size_t i = 0; i < (*rp)->npairs; i++)
        pthread_mutex_destroy(&(*rp)->pairs[i].lock);
    free((*rp)->pairs);
    free(*rp);
    *rp = NULL;
}

/* Index of the short window (counted from the start) that time t falls in. */
static uint64_t window_of(const report_t *r, double t)
{
    uint64_t p = (uint64_t)(t / r->s->period);
    uint64_t k = (uint64_t)((t - (double)p * r->s->period) / r->wlen);
    return p * r->wn + (k < r->wn ? k : r->wn - 1);
}

/* End of short window j (counted from the start), seconds. */
static double window_end(const report_t *r, uint64_t j)
{
    uint64_t n = j + 1;
    return (double)(n / r->wn) * r->s->period + (double)(n % r->wn) * r->wlen;
}

/* Counts one completion of bucket b at t in its ring, if its window is
 * neither folded already nor too far ahead. */
static void ring_count(report_t *r, _Atomic uint32_t *ring, size_t b, double t)
{
    uint64_t j = window_of(r, t);
    uint64_t f = atomic_load_explicit(&r->wfold, memory_order_relaxed);
    if (j >= f && j < f + REPORT_RING)
        atomic_fetch_add_explicit(&ring[b * REPORT_RING + j % REPORT_RING], 1,
                                  memory_order_relaxed);
}

/* Adds the idle time [a, z) to pair p's windows that are not folded yet
 * and not too far ahead.  Caller holds p->lock. */
static void pair_idle(const report_t *r, report_pair_t *p, double a, double z)
{
    if (a < 0)
        a = 0;
    if (!(z > a) || !(a < r->s->duration))
        return;
    uint64_t j = window_of(r, a);
    if (j < p->next)
        j = p->next;
    for (; j < p->next + REPORT_RING; j++) {
        double ws = j ? window_end(r, j - 1) : 0, we = window_end(r, j);
        if (ws >= z)
            break;
        double x = (z < we ? z : we) - (a > ws ? a : ws);
        if (x > 0)
            p->idle[j % REPORT_RING] += x;
    }
}

void report_sent(report_t *r, size_t b, size_t srv, double t)
{
    if (b >= r->s->nbuckets || srv >= r->s->nservers)
        return;
    report_pair_t *p = &r->pairs[b * r->s->nservers + srv];
    pthread_mutex_lock(&p->lock);
    if (p->outst++ == 0) /* idle since p->since (a thread's t may be a bit older) */
        pair_idle(r, p, p->since, t);
    pthread_mutex_unlock(&p->lock);
}

void report_ended(report_t *r, size_t b, size_t srv, double t, uint64_t n)
{
    if (b >= r->s->nbuckets || srv >= r->s->nservers || n == 0)
        return;
    report_pair_t *p = &r->pairs[b * r->s->nservers + srv];
    pthread_mutex_lock(&p->lock);
    if (p->outst > 0) {
        p->outst = p->outst > (int64_t)n ? p->outst - (int64_t)n : 0;
        if (p->outst == 0)
            p->since = t;
    }
    pthread_mutex_unlock(&p->lock);
}

void report_add(report_t *r, size_t b, size_t srv, double t)
{
    if (b >= r->s->nbuckets || srv >= r->s->nservers)
        return;
    report_ended(r, b, srv, t, 1);
    if (!(t >= 0) || t >= r->s->duration)
        return;
    atomic_fetch_add_explicit(&r->servers[srv], 1, memory_order_relaxed);
    size_t k = (size_t)(t / r->slot_len);
    if (k >= r->nslots)
        k = r->nslots - 1;
    atomic_fetch_add_explicit(&r->counts[b * r->nslots + k], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&r->srv_slots[srv * r->nslots + k], 1, memory_order_relaxed);
    ring_count(r, r->ring_done, b, t);
}

void report_add_bytes(report_t *r, size_t b, double t, uint64_t bytes)
{
    if (t >= 0 && t < r->s->duration && b < r->s->nbuckets)
        atomic_fetch_add_explicit(&r->bytes[b], bytes, memory_order_relaxed);
}

uint64_t report_bytes(const report_t *r, size_t b)
{
    return b < r->s->nbuckets ? atomic_load_explicit(&r->bytes[b], memory_order_relaxed) : 0;
}

void report_fold(report_t *r, double upto)
{
    size_t ns = r->s->nservers;
    uint64_t j = atomic_load_explicit(&r->wfold, memory_order_relaxed);
    for (double te; (te = window_end(r, j)) <= upto && te <= r->end + 1e-9; j++) {
        for (size_t b = 0; b < r->s->nbuckets; b++) {
            uint64_t done = atomic_exchange_explicit(&r->ring_done[b * REPORT_RING + j % REPORT_RING],
                                                     0, memory_order_relaxed);
            /* The idle time at the server where it was smallest. */
            double idle = r->wlen;
            for (size_t srv = 0; srv < ns; srv++) {
                report_pair_t *p = &r->pairs[b * ns + srv];
                pthread_mutex_lock(&p->lock);
                if (p->outst == 0 && p->since < te) { /* idle now: up to the window's end */
                    pair_idle(r, p, p->since, te);
                    p->since = te;
                }
                double x = p->idle[j % REPORT_RING];
                p->idle[j % REPORT_RING] = 0;
                p->next = j + 1;
                pthread_mutex_unlock(&p->lock);
                if (x < idle)
                    idle = x;
            }
            if (j >= r->wfirst)
                report_win_feed(r->win, b, done, idle);
        }
        atomic_store_explicit(&r->wfold, j + 1, memory_order_relaxed);
    }
}

void report_set_end(report_t *r, double t)
{
    if (t >= 0 && t < r->end)
        r->end = t;
}

void report_add_error(report_t *r, size_t b)
{
    if (b < r->s->nbuckets)
        atomic_fetch_add_explicit(&r->errors[b], 1, memory_order_relaxed);
}

uint64_t report_server_total(const report_t *r, size_t srv)
{
    return atomic_load_explicit(&r->servers[srv], memory_order_relaxed);
}

size_t report_nslots(const report_t *r)
{
    return r->nslots;
}

uint64_t report_count(const report_t *r, size_t b, size_t k)
{
    return atomic_load_explicit(&r->counts[b * r->nslots + k], memory_order_relaxed);
}

uint64_t report_total(const report_t *r, size_t b)
{
    uint64_t sum = 0;
    for (size_t k = 0; k < r->nslots; k++)
        sum += report_count(r, b, k);
    return sum;
}

uint64_t report_errors(const report_t *r, size_t b)
{
    return atomic_load_explicit(&r->errors[b], memory_order_relaxed);
}

static double slot_end(const report_t *r, size_t k)
{
    double t = (double)(k + 1) * r->slot_len;
    return t < r->s->duration ? t : r->s->duration;
}

int report_write_intervals(const report_t *r, FILE *f)
{
    const scenario_t *s = r->s;
    fprintf(f, "time,period,interval,bucket,completed,cumulative,rate\n");
    for (size_t b = 0; b < s->nbuckets; b++) {
        uint64_t cum = 0;
        for (size_t k = 0; k < r->nslots; k++) {
            uint64_t n = report_count(r, b, k);
            cum += n;
            double len = slot_end(r, k) - (double)k * r->slot_len;
            fprintf(f, "%.3f,%zu,%zu,%s,%llu,%llu,%.1f\n", slot_end(r, k),
                    k / (size_t)s->intervals + 1, k % (size_t)s->intervals + 1,
                    s->buckets[b].name, (unsigned long long)n, (unsigned long long)cum,
                    len > 0 ? (double)n / len : 0.0);
        }
    }
    return ferror(f) ? -EIO : 0;
}

int report_write_cumulative(const report_t *r, FILE *f)
{
    const scenario_t *s = r->s;
    uint64_t *cum = calloc(s->nbuckets, sizeof *cum);
    if (!cum)
        return -ENOMEM;
    fprintf(f, "time");
    for (size_t b = 0; b < s->nbuckets; b++)
        fprintf(f, ",%s", s->buckets[b].name);
    fprintf(f, "\n0.000");
    for (size_t b = 0; b < s->nbuckets; b++)
        fprintf(f, ",0");
    fprintf(f, "\n");
    for (size_t k = 0; k < r->nslots; k++) {
        fprintf(f, "%.3f", slot_end(r, k));
        for (size_t b = 0; b < s->nbuckets; b++) {
            cum[b] += report_count(r, b, k);
            fprintf(f, ",%llu", (unsigned long long)cum[b]);
        }
        fprintf(f, "\n");
    }
    free(cum);
    return ferror(f) ? -EIO : 0;
}

/* Number of full QoS periods in the run. */
static size_t full_periods(const report_t *r)
{
    return (size_t)floor(r->end / r->s->period + 1e-9);
}

static uint64_t period_count(const report_t *r, size_t b, size_t p)
{
    uint64_t sum = 0;
    size_t k0 = p * (size_t)r->s->intervals;
    for (size_t k = k0; k < k0 + (size_t)r->s->intervals && k < r->nslots; k++)
        sum += report_count(r, b, k);
    return sum;
}

static int is_met(double achieved, double reservation)
{
    return achieved >= REPORT_MET_SHARE * reservation;
}

static int is_over(double achieved, double limit)
{
    return limit != SCENARIO_NO_LIMIT && achieved > REPORT_OVER_SHARE * limit;
}

int report_write_periods(const report_t *r, FILE *f)
{
    const scenario_t *s = r->s;
    fprintf(f, "period,bucket,reservation,limit,completed,met,over\n");
    for (size_t p = 0; p < full_periods(r); p++) {
        for (size_t b = 0; b < s->nbuckets; b++) {
            const scenario_bucket_t *bk = &s->buckets[b];
            double n = (double)period_count(r, b, p);
            double res = bk->reservation * s->period;
            double lim = bk->limit == SCENARIO_NO_LIMIT ? SCENARIO_NO_LIMIT : bk->limit * s->period;
            fprintf(f, "%zu,%s,%.0f,", p + 1, bk->name, res);
            if (lim != SCENARIO_NO_LIMIT)
                fprintf(f, "%.0f", lim);
            fprintf(f, ",%.0f,%d,%d\n", n, is_met(n, res), is_over(n, lim));
        }
    }
    return ferror(f) ? -EIO : 0;
}

int report_write_servers(const report_t *r, FILE *f)
{
    const scenario_t *s = r->s;
    fprintf(f, "period,server,completed\n");
    for (size_t p = 0; p < full_periods(r); p++)
        for (size_t i = 0; i < s->nservers; i++) {
            uint64_t sum = 0;
            size_t k0 = p * (size_t)s->intervals;
            for (size_t k = k0; k < k0 + (size_t)s->intervals && k < r->nslots; k++)
                sum += atomic_load_explicit(&r->srv_slots[i * r->nslots + k], memory_order_relaxed);
            fprintf(f, "%zu,%s,%llu\n", p + 1, s->servers[i].name, (unsigned long long)sum);
        }
    return ferror(f) ? -EIO : 0;
}

int report_write_summary(const report_t *r, const char *label, FILE *f)
{
    const scenario_t *s = r->s;
    size_t nfull = full_periods(r);
    size_t first = (size_t)s->warmup_periods < nfull ? (size_t)s->warmup_periods : 0;
    size_t measured = nfull - first;
    int rc = -ENOMEM;
    json_t *root = json_object(), *arr = json_array();
    if (!root || !arr)
        goto out;
    size_t met = 0, over = 0, pmet = 0, pover = 0, pall = 0;
    double total_rate = 0;
    uint64_t total_errors = 0;
    for (size_t b = 0; b < s->nbuckets; b++) {
        const scenario_bucket_t *bk = &s->buckets[b];
        double achieved, minp = 0, maxp = 0;
        size_t bmet = 0, bover = 0;
        if (measured == 0) {
            achieved = r->end > 0 ? (double)report_total(r, b) / r->end : 0;
            minp = maxp = achieved;
        } else {
            double sum = 0;
            for (size_t p = first; p < nfull; p++) {
                double x = (double)period_count(r, b, p) / s->period;
                sum += x;
                if (p == first || x < minp)
                    minp = x;
                if (p == first || x > maxp)
                    maxp = x;
                bmet += (size_t)is_met(x, bk->reservation);
                bover += (size_t)is_over(x, bk->limit);
            }
            achieved = sum / (double)measured;
        }
        int m = is_met(achieved, bk->reservation), o = is_over(achieved, bk->limit);
        met += (size_t)m;
        over += (size_t)o;
        pmet += bmet;
        pover += bover;
        pall += measured;
        total_rate += achieved;
        total_errors += report_errors(r, b);
        /* bytes moved, and per second over the run (cost-aware tokens) */
        uint64_t by = report_bytes(r, b);
        json_t *jb = json_pack("{s:s, s:f, s:o, s:f, s:f, s:f, s:b, s:b, s:I, s:I, s:I, s:I, s:f, "
                               "s:o*, s:I}",
                               "name", bk->name, "reservation", bk->reservation, "limit",
                               bk->limit == SCENARIO_NO_LIMIT ? json_null() : json_real(bk->limit),
                               "achieved", achieved, "min_period", minp, "max_period", maxp,
                               "met", m, "over", o, "periods_met", (json_int_t)bmet,
                               "periods_over", (json_int_t)bover, "completed",
                               (json_int_t)report_total(r, b), "bytes", (json_int_t)by,
                               "bytes_rate", r->end > 0 ? (double)by / r->end : 0.0, "windows",
                               win_json(r->win, (long)b), "errors",
                               (json_int_t)report_errors(r, b));
        if (!jb || json_array_append_new(arr, jb) < 0)
            goto out;
    }
    double nb = (double)s->nbuckets;
    json_t *top = json_pack(
        "{s:s?, s:f, s:f, s:i, s:i, s:I, s:I, s:f, s:f, s:f, s:f, s:f, s:I, s:o*}", "label", label,
        "duration", r->end, "period", s->period, "intervals", s->intervals,
        "warmup_periods", (int)first, "measured_periods", (json_int_t)measured, "nbuckets",
        (json_int_t)s->nbuckets, "met_share", (double)met / nb, "over_share",
        (double)over / nb, "period_met_share", pall ? (double)pmet / (double)pall : (double)met / nb,
        "period_over_share", pall ? (double)pover / (double)pall : (double)over / nb,
        "total_rate", total_rate, "errors", (json_int_t)total_errors, "windows",
        win_json(r->win, -1));
    if (!top || json_object_update(root, top) < 0) {
        json_decref(top);
        goto out;
    }
    json_decref(top);
    json_t *sv = json_array();
    for (size_t i = 0; sv && i < s->nservers; i++) {
        uint64_t n = report_server_total(r, i);
        if (json_array_append_new(sv, json_pack("{s:s, s:I, s:f}", "name", s->servers[i].name,
                                                "completed", (json_int_t)n, "rate",
                                                r->end > 0 ? (double)n / r->end : 0.0)) < 0) {
            json_decref(sv);
            sv = NULL;
        }
    }
    if (!sv || json_object_set_new(root, "servers", sv) < 0)
        goto out;
    if (json_object_set_new(root, "buckets", arr) < 0) {
        arr = NULL;
        goto out;
    }
    arr = NULL;
    rc = json_dumpf(root, f, JSON_INDENT(1) | JSON_REAL_PRECISION(10)) < 0 ? -EIO : 0;
    fputc('\n', f);
    if (ferror(f))
        rc = -EIO;
out:
    json_decref(arr);
    json_decref(root);
    return rc;
}

static json_t *load_summary(const char *path)
{
    json_error_t je;
    json_t *j = json_load_file(path, 0, &je);
    if (!j) {
        fprintf(stderr, "%s:%d:%d: %s\n", path, je.line, je.column, je.text);
        return NULL;
    }
    if (!json_is_array(json_object_get(j, "buckets"))) {
        fprintf(stderr, "%s: not a bqos-load summary (no \"buckets\" array)\n", path);
        json_decref(j);
        return NULL;
    }
    return j;
}

static const char *yesno(json_t *v)
{
    return json_is_true(v) ? "yes" : "no";
}

static void fmt_rate(char *buf, size_t n, json_t *v)
{
    if (json_is_number(v))
        snprintf(buf, n, "%.0f", json_number_value(v));
    else
        snprintf(buf, n, "-");
}

int report_print_table(FILE *out, const char *const *paths, size_t n, size_t max_rows)
{
    json_t **docs = calloc(n ? n : 1, sizeof *docs);
    int rc = -EINVAL;
    if (!docs)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++)
        if (!(docs[i] = load_summary(paths[i])))
            goto out;
    if (n == 0)
        goto out;
    fprintf(out, "%-12s %11s", "bucket", "reservation");
    for (size_t i = 0; i < n; i++) {
        const char *label = json_string_value(json_object_get(docs[i], "label"));
        char head[40];
        snprintf(head, sizeof head, "%s", label ? label : paths[i]);
        fprintf(out, " | %-12.12s %8s %4s %4s", head, "limit", "met", "over");
    }
    fprintf(out, "\n");
    json_t *first = json_object_get(docs[0], "buckets");
    size_t rows = json_array_size(first);
    for (size_t row = 0; row < rows && (max_rows == 0 || row < max_rows); row++) {
        json_t *b0 = json_array_get(first, row);
        const char *name = json_string_value(json_object_get(b0, "name"));
        char res[32];
        fmt_rate(res, sizeof res, json_object_get(b0, "reservation"));
        fprintf(out, "%-12s %11s", name ? name : "?", res);
        for (size_t i = 0; i < n; i++) {
            json_t *arr = json_object_get(docs[i], "buckets"), *hit = NULL;
            for (size_t k = 0; k < json_array_size(arr) && !hit; k++) {
                const char *nm = json_string_value(json_object_get(json_array_get(arr, k), "name"));
                if (nm && name && strcmp(nm, name) == 0)
                    hit = json_array_get(arr, k);
            }
            char ach[32], lim[32];
            fmt_rate(ach, sizeof ach, json_object_get(hit, "achieved"));
            fmt_rate(lim, sizeof lim, json_object_get(hit, "limit"));
            fprintf(out, " | %12s %8s %4s %4s", ach, lim,
                    hit ? yesno(json_object_get(hit, "met")) : "-",
                    hit ? yesno(json_object_get(hit, "over")) : "-");
        }
        fprintf(out, "\n");
    }
    if (max_rows && rows > max_rows)
        fprintf(out, "... %zu more buckets\n", rows - max_rows);
    /* key: a top-level key or "windows.LEN.KEY"; fmt 0 percent, 1 count,
     * 2 ratio */
    static const struct {
        const char *key, *text;
        int fmt;
    } shares[] = {{"met_share", "buckets meeting R", 0},
                  {"over_share", "buckets over L", 0},
                  {"period_met_share", "bucket-periods meeting R", 0},
                  {"period_over_share", "bucket-periods over L", 0},
                  {"windows.long.r_share", "1s windows >=95% of R", 0},
                  {"windows.short.r_share", "200ms windows >=95% R", 0},
                  {"windows.long.l_worst", "worst 1s window / L", 2},
                  {"windows.short.l_worst", "worst 200ms window / L", 2},
                  {"total_rate", "total IOs/s", 1}};
    for (size_t k = 0; k < sizeof shares / sizeof shares[0]; k++) {
        fprintf(out, "%-24s", shares[k].text);
        for (size_t i = 0; i < n; i++) {
            json_t *v = docs[i];
            char key[64];
            snprintf(key, sizeof key, "%s", shares[k].key);
            char *save = NULL;
            for (char *tok = strtok_r(key, ".", &save); tok && v;
                 tok = strtok_r(NULL, ".", &save))
                v = json_object_get(v, tok);
            double x = json_number_value(v);
            if (!json_is_number(v))
                fprintf(out, " | %12s %18s", "-", "");
            else if (shares[k].fmt == 0)
                fprintf(out, " | %11.1f%% %18s", 100.0 * x, "");
            else if (shares[k].fmt == 1)
                fprintf(out, " | %12.0f %18s", x, "");
            else
                fprintf(out, " | %12.3f %18s", x, "");
        }
        fprintf(out, "\n");
    }
    rc = 0;
out:
    for (size_t i = 0; i < n; i++)
        json_decref(docs[i]);
    free(docs);
    return rc;
}

int report_check(const char *path, int need)
{
    json_t *j = load_summary(path);
    if (!j)
        return 0;
    int ok = 1;
    json_t *arr = json_object_get(j, "buckets");
    for (size_t k = 0; k < json_array_size(arr); k++) {
        json_t *b = json_array_get(arr, k);
        if (((need & 1) && !json_is_true(json_object_get(b, "met"))) ||
            ((need & 2) && json_is_true(json_object_get(b, "over"))))
            ok = 0;
    }
    json_decref(j);
    return ok;
}
