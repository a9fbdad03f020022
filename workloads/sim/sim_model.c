/* sim_model.c - bqos-sim's model: reservations, demand phases and per-server request generators. */
#include "workloads/sim/sim_model.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/rng.h"

/* Seed stream of bucket b's demand timeline (generators use their keys). */
#define STREAM_BUCKET(b) ((UINT64_C(1) << 40) + (uint64_t)(b))

sim_config_t sim_config_default(void)
{
    return (sim_config_t){
        .servers = 64, .buckets = 10000, .capacity = 20000, .svc_spread = 0.1,
        .period = 5, .intervals = 5, .periods = 2, .warmup = 1, .delay = 0.01,
        .reserved = 1.0, .res_zipf = 0.5, .demand = 1.5, .active = 8,
        .split_zipf = 0.5, .changes = 2, .changes_upto = 1, .poisson = 0, .seed = 1,
    };
}

int sim_config_check(const sim_config_t *c, char *err, size_t errlen)
{
    const char *bad = NULL;
    if (c->servers < 1 || c->servers > 65536)
        bad = "servers must be 1..65536";
    else if (c->buckets < 1 || c->buckets > 10000000)
        bad = "buckets must be 1..10000000";
    else if (!(c->capacity > 0) || !isfinite(c->capacity))
        bad = "capacity must be > 0";
    else if (!(c->svc_spread >= 0 && c->svc_spread <= 1))
        bad = "spread must be 0..1";
    else if (!(c->period > 0) || !isfinite(c->period))
        bad = "period must be > 0";
    else if (c->intervals < 1 || c->intervals > 10000)
        bad = "intervals must be 1..10000";
    else if (c->periods < 1 || c->periods > 100000)
        bad = "periods must be 1..100000";
    else if (c->warmup < 0 || c->warmup >= c->periods)
        bad = "warmup must be 0..periods-1";
    else if (!(c->delay >= 0 && c->delay < c->period / c->intervals))
        bad = "delay must be >= 0 and shorter than an interval";
    else if (!(c->reserved >= 0 && c->reserved <= 1))
        bad = "reserved must be 0..1";
    else if (!(c->res_zipf >= 0 && c->res_zipf <= 10))
        bad = "reservation zipf must be 0..10";
    else if (!(c->demand >= 0 && c->demand <= 1000))
        bad = "demand must be 0..1000";
    else if (c->active < 1 || c->active > c->servers)
        bad = "active must be 1..servers";
    else if (!(c->split_zipf >= 0 && c->split_zipf <= 10))
        bad = "split zipf must be 0..10";
    else if (c->changes < 0 || c->changes > 10000)
        bad = "changes must be 0..10000";
    else if (c->outstanding < 0 || c->outstanding > 100000)
        bad = "outstanding must be 0..100000";
    else if (!(c->limit == 0 || (c->limit >= 1 && c->limit <= 1000)))
        bad = "limit must be 0 (none) or 1..1000 x the reservation";
    if (bad) {
        snprintf(err, errlen, "%s", bad);
        return -EINVAL;
    }
    return 0;
}

void sim_model_destroy(sim_model_t **mp)
{
    if (!mp || !*mp)
        return;
    sim_model_t *m = *mp;
    if (m->buckets) {
        for (int b = 0; b < m->cfg.buckets; b++) {
            for (size_t i = 0; i < m->buckets[b].nphases; i++) {
                free(m->buckets[b].phases[i].servers);
                free(m->buckets[b].phases[i].rates);
            }
            free(m->buckets[b].phases);
            free(m->buckets[b].sets);
        }
    }
    if (m->segs)
        for (int s = 0; s < m->cfg.servers; s++)
            free(m->segs[s]);
    free(m->segs);
    free(m->nsegs);
    free(m->buckets);
    free(m->capacity);
    free(m->speed);
    free(m);
    *mp = NULL;
}

static sim_model_t *model_alloc(const sim_config_t *cfg)
{
    sim_model_t *m = calloc(1, sizeof(*m));
    if (!m)
        return NULL;
    m->cfg = *cfg;
    m->horizon = cfg->periods * cfg->period;
    m->buckets = calloc((size_t)cfg->buckets, sizeof(*m->buckets));
    m->nsegs = calloc((size_t)cfg->servers, sizeof(*m->nsegs));
    m->segs = calloc((size_t)cfg->servers, sizeof(*m->segs));
    m->capacity = calloc((size_t)cfg->servers, sizeof(*m->capacity));
    if (!m->buckets || !m->nsegs || !m->segs || !m->capacity) {
        sim_model_destroy(&m);
        return NULL;
    }
    for (int s = 0; s < cfg->servers; s++)
        m->capacity[s] = cfg->capacity;
    for (int b = 0; b < cfg->buckets; b++)
        m->buckets[b].parent = -1;
    m->service_cv = -1;
    m->parallel = 1;
    m->headroom = -1;
    return m;
}

/* Appends an empty phase of n servers at time t to bucket bk. */
static sim_phase_t *phase_add(sim_bucket_t *bk, size_t *cap, double t, int n)
{
    if (bk->nphases == *cap) {
        size_t nc = *cap ? 2 * *cap : 4;
        sim_phase_t *p = realloc(bk->phases, nc * sizeof(*p));
        if (!p)
            return NULL;
        bk->phases = p;
        *cap = nc;
    }
    sim_phase_t *ph = &bk->phases[bk->nphases];
    ph->t = t;
    ph->n = n;
    ph->servers = malloc((size_t)(n ? n : 1) * sizeof(int));
    ph->rates = malloc((size_t)(n ? n : 1) * sizeof(double));
    if (!ph->servers || !ph->rates) {
        free(ph->servers);
        free(ph->rates);
        return NULL;
    }
    bk->nphases++;
    return ph;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int cmp_seg(const void *a, const void *b)
{
    const sim_segment_t *x = a, *y = b;
    if (x->start != y->start)
        return (x->start > y->start) - (x->start < y->start);
    return (x->key > y->key) - (x->key < y->key);
}

/* Cuts every bucket's phases into per-server segments. */
static int build_segments(sim_model_t *m)
{
    int S = m->cfg.servers;
    size_t *cap = calloc((size_t)S, sizeof(size_t));
    if (!cap)
        return -ENOMEM;
    uint32_t key = 0;
    int rc = 0;
    for (int b = 0; b < m->cfg.buckets && !rc; b++) {
        const sim_bucket_t *bk = &m->buckets[b];
        for (size_t i = 0; i < bk->nphases && !rc; i++) {
            const sim_phase_t *ph = &bk->phases[i];
            double end = i + 1 < bk->nphases ? bk->phases[i + 1].t : m->horizon;
            if (end > m->horizon)
                end = m->horizon;
            if (!(end > ph->t))
                continue;
            for (int k = 0; k < ph->n; k++) {
                int s = ph->servers[k];
                if (!bk->outstanding && !(ph->rates[k] > 0))
                    continue;
                if (m->nsegs[s] == cap[s]) {
                    size_t nc = cap[s] ? 2 * cap[s] : 64;
                    sim_segment_t *p = realloc(m->segs[s], nc * sizeof(*p));
                    if (!p) {
                        rc = -ENOMEM;
                        break;
                    }
                    m->segs[s] = p;
                    cap[s] = nc;
                }
                m->segs[s][m->nsegs[s]++] = (sim_segment_t){
                    .bucket = b, .key = key++, .start = ph->t, .end = end, .rate = ph->rates[k],
                    .outstanding = bk->outstanding};
            }
        }
    }
    free(cap);
    if (rc)
        return rc;
    for (int s = 0; s < S; s++)
        if (m->nsegs[s])
            qsort(m->segs[s], m->nsegs[s], sizeof(sim_segment_t), cmp_seg);
    return 0;
}

/* Fills phase ph with a fresh random set of servers and a Zipf split of
 * `total` IOs/s over them (largest share on a random one of them). */
static void random_phase(const sim_config_t *c, rng_t *r, const double *w, double total,
                         sim_phase_t *ph)
{
    rng_pick(r, ph->servers, ph->n, c->servers);
    for (int i = ph->n - 1; i > 0; i--) {
        int j = (int)rng_below(r, (uint64_t)i + 1);
        int t = ph->servers[i];
        ph->servers[i] = ph->servers[j];
        ph->servers[j] = t;
    }
    for (int i = 0; i < ph->n; i++)
        ph->rates[i] = total * w[i];
}

int sim_model_generate(const sim_config_t *cfg, sim_model_t **out, char *err, size_t errlen)
{
    int rc = sim_config_check(cfg, err, errlen);
    if (rc)
        return rc;
    rc = -ENOMEM;
    sim_model_t *m = model_alloc(cfg);
    double *wres = malloc((size_t)cfg->buckets * sizeof(double));
    double *wsplit = malloc((size_t)cfg->active * sizeof(double));
    double *times = malloc(((size_t)cfg->changes + 1) * sizeof(double));
    if (!m || !wres || !wsplit || !times)
        goto out;
    rng_zipf_weights(wres, (size_t)cfg->buckets, cfg->res_zipf);
    rng_zipf_weights(wsplit, (size_t)cfg->active, cfg->split_zipf);
    double total = cfg->reserved * cfg->servers * cfg->capacity;
    for (int b = 0; b < cfg->buckets; b++) {
        sim_bucket_t *bk = &m->buckets[b];
        /* Whole IOs per second, as in the controller's bucket files. */
        bk->reservation = round(total * wres[b]);
        if (bk->reservation < 1 && total * wres[b] > 0)
            bk->reservation = 1;
        bk->limit = cfg->limit > 0 ? ceil(cfg->limit * bk->reservation) : -1;
        double want = cfg->demand * bk->reservation;
        bk->outstanding = cfg->outstanding;
        rng_t r;
        rng_seed(&r, cfg->seed, STREAM_BUCKET(b));
        size_t cap = 0;
        sim_phase_t *ph = phase_add(bk, &cap, 0, cfg->active);
        if (!ph)
            goto out;
        random_phase(cfg, &r, wsplit, want, ph);
        for (int p = 0; p < cfg->periods; p++) {
            int n = cfg->changes_upto ? (int)rng_below(&r, (uint64_t)cfg->changes + 1)
                                      : cfg->changes;
            for (int i = 0; i < n; i++)
                times[i] = (p + rng_uniform(&r)) * cfg->period;
            qsort(times, (size_t)n, sizeof(double), cmp_double);
            for (int i = 0; i < n; i++) {
                double t = times[i];
                double last = bk->phases[bk->nphases - 1].t;
                if (!(t > last))
                    t = nextafter(last, INFINITY);
                if (!(ph = phase_add(bk, &cap, t, cfg->active)))
                    goto out;
                random_phase(cfg, &r, wsplit, want, ph);
            }
        }
    }
    if ((rc = build_segments(m)) < 0)
        goto out;
    *out = m;
    m = NULL;
    rc = 0;
out:
    if (rc == -ENOMEM)
        snprintf(err, errlen, "out of memory");
    sim_model_destroy(&m);
    free(wres);
    free(wsplit);
    free(times);
    return rc;
}

int sim_model_from_scenario(const scenario_t *sc, const sim_config_t *run, sim_model_t **out,
                            char *err, size_t errlen)
{
    if (!(sc->capacity > 0)) {
        snprintf(err, errlen, "the scenario needs \"capacity\" (or --capacity) for the simulator");
        return -EINVAL;
    }
    sim_config_t c = *run;
    c.servers = (int)sc->nservers;
    c.buckets = (int)sc->nbuckets;
    c.capacity = sc->capacity;
    c.period = sc->period;
    c.intervals = sc->intervals;
    c.periods = (int)ceil(sc->duration / sc->period - 1e-9);
    if (c.periods < 1)
        c.periods = 1;
    if (c.warmup >= c.periods)
        c.warmup = c.periods - 1;
    if (sc->warmup_periods > 0 && sc->warmup_periods < c.periods)
        c.warmup = sc->warmup_periods;
    c.seed = sc->seed;
    c.active = 1;
    double sum = 0;
    for (size_t b = 0; b < sc->nbuckets; b++)
        sum += sc->buckets[b].reservation;
    c.reserved = sum / (c.servers * c.capacity);
    if (c.reserved > 1)
        c.reserved = 1;
    int rc = sim_config_check(&c, err, errlen);
    if (rc)
        return rc;
    sim_model_t *m = model_alloc(&c);
    if (!m)
        goto nomem;
    for (size_t b = 0; b < sc->nbuckets; b++) {
        const scenario_bucket_t *sb = &sc->buckets[b];
        sim_bucket_t *bk = &m->buckets[b];
        bk->reservation = sb->reservation;
        bk->limit = sb->limit == SCENARIO_NO_LIMIT ? -1 : sb->limit;
        bk->parent = sb->parent;
        bk->weight = sb->weight;
        bk->outstanding = sb->rate > 0 ? 0 : (sb->outstanding > 0 ? sb->outstanding : 1);
        if (sb->nsets) {
            if (!(bk->sets = malloc(sb->nsets * sizeof(*bk->sets))))
                goto nomem;
            memcpy(bk->sets, sb->sets, sb->nsets * sizeof(*bk->sets));
            bk->nsets = sb->nsets;
        }
        size_t cap = 0;
        for (size_t i = 0; i < sb->nphases; i++) {
            const scenario_phase_t *sp = &sb->phases[i];
            sim_phase_t *ph = phase_add(bk, &cap, sp->at, sp->n);
            if (!ph)
                goto nomem;
            double wsum = 0;
            for (int k = 0; k < sp->n; k++)
                wsum += 1.0 / pow(k + 1, sb->split_zipf);
            for (int k = 0; k < sp->n; k++) {
                ph->servers[k] = sp->servers[k];
                ph->rates[k] = sb->rate * (1.0 / pow(k + 1, sb->split_zipf)) / wsum;
            }
        }
    }
    if (build_segments(m) < 0)
        goto nomem;
    m->window = sc->backend_window == SCENARIO_WINDOW_AUTO ? SIM_WINDOW_AUTO : sc->backend_window;
    m->service_cv = sc->service_cv;
    m->parallel = sc->backend_parallel > 0 ? sc->backend_parallel : 1;
    m->headroom = sc->backend_headroom;
    m->rtt = sc->rtt_ms / 1000.0;
    for (size_t s = 0; s < sc->nservers; s++) {
        const scenario_server_t *ss = &sc->servers[s];
        if (!ss->nspeed)
            continue;
        if (!m->speed && !(m->speed = malloc((size_t)c.periods * c.servers * sizeof(double))))
            goto nomem;
        for (size_t i = 0; i < (size_t)c.periods * c.servers; i++)
            m->speed[i] = 1;
        break;
    }
    for (size_t s = 0; m->speed && s < sc->nservers; s++) {
        const scenario_server_t *ss = &sc->servers[s];
        double f = 1;
        size_t i = 0;
        for (int p = 0; p < c.periods; p++) {
            while (i < ss->nspeed && ss->speed[i].from_period <= p)
                f = ss->speed[i++].factor;
            m->speed[(size_t)p * c.servers + s] = f;
        }
    }
    *out = m;
    return 0;
nomem:
    sim_model_destroy(&m);
    snprintf(err, errlen, "out of memory");
    return -ENOMEM;
}

void sim_model_demand(const sim_model_t *m, int b, double t0, double t1, double *acc)
{
    const sim_bucket_t *bk = &m->buckets[b];
    for (size_t i = 0; i < bk->nphases; i++) {
        const sim_phase_t *ph = &bk->phases[i];
        double s = ph->t > t0 ? ph->t : t0;
        double e = i + 1 < bk->nphases ? bk->phases[i + 1].t : m->horizon;
        if (e > t1)
            e = t1;
        if (!(e > s))
            continue;
        for (int k = 0; k < ph->n; k++)
            acc[ph->servers[k]] += (bk->outstanding ? m->capacity[ph->servers[k]] : ph->rates[k]) *
                                   (e - s);
    }
}

double sim_model_speed(const sim_model_t *m, int s, double t)
{
    if (!m->speed)
        return 1;
    int p = (int)floor(t / m->cfg.period);
    if (p < 0)
        p = 0;
    if (p >= m->cfg.periods)
        p = m->cfg.periods - 1;
    return m->speed[(size_t)p * m->cfg.servers + s];
}

double sim_bucket_rates(const sim_bucket_t *bk, int p, double *lim)
{
    double r = bk->reservation, l = bk->limit;
    for (size_t i = 0; i < bk->nsets && bk->sets[i].period <= p; i++) {
        r = bk->sets[i].reservation;
        l = bk->sets[i].limit == SCENARIO_NO_LIMIT ? -1 : bk->sets[i].limit;
    }
    if (lim)
        *lim = l;
    return r;
}
