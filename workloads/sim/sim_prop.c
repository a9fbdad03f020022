/* sim_prop.c - random scenarios for the QoS property test and the checker that judges a run of one (see sim_prop.h). */
#include "workloads/sim/sim_prop.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/rng.h"

#define PROP_CAPACITY 10000.0   /* IOs/s of one server */
#define PROP_PERIODS 10
#define PROP_WARMUP 2
#define PROP_RTT_MS 0.2
#define PROP_FIT 0.8            /* reservations fit in this share of a server */
/* A bucket is judged when its requests in flight allow this many times its
 * R at the unloaded round trip (issue 25's guarantee: K >= 2 x share x
 * RTT0).  At 1 x it needs every request answered in the unloaded round
 * trip, no wait for a backend slot at a server that is never idle: only a
 * backend kept partly idle could give it (docs/simulator.md). */
#define PROP_GUARANTEE 2.0

/* Picks n distinct servers of S, server s with weight (s + 1)^-0.8 (a few
 * hot servers that many buckets share), into out[], ascending. */
static void pick_servers(rng_t *g, int S, int n, int *out)
{
    double w[16], sum = 0;
    for (int s = 0; s < S; s++)
        sum += w[s] = pow(s + 1, -0.8);
    for (int k = 0; k < n; k++) {
        double u = rng_uniform(g) * sum, acc = 0;
        int s = -1;
        for (int i = 0; i < S; i++) {
            if (w[i] == 0)
                continue;
            s = i; /* the last one left, if rounding overshoots */
            if (u < (acc += w[i]))
                break;
        }
        out[k] = s;
        sum -= w[s];
        w[s] = 0;
    }
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && out[j - 1] > out[j]; j--) {
            int t = out[j];
            out[j] = out[j - 1];
            out[j - 1] = t;
        }
}

/* Max-flow (Edmonds-Karp) of a bipartite network: source -> bucket b
 * (need[b]), bucket -> each of its servers (unbounded: on[b * S + s]),
 * server -> sink (cap[s]).  Returns the flow, or -1 if out of memory. */
static double bip_maxflow(int B, int S, const double *need, const uint8_t *on, const double *cap)
{
    int n = B + S + 2, src = B + S, snk = B + S + 1;
    double *c = calloc((size_t)n * n, sizeof(double));
    int *prev = malloc((size_t)n * sizeof(int)), *q = malloc((size_t)n * sizeof(int));
    double flow = -1;
    if (!c || !prev || !q)
        goto out;
    for (int b = 0; b < B; b++) {
        c[(size_t)src * n + b] = need[b];
        for (int s = 0; s < S; s++)
            if (on[(size_t)b * S + s])
                c[(size_t)b * n + B + s] = INFINITY;
    }
    for (int s = 0; s < S; s++)
        c[(size_t)(B + s) * n + snk] = cap[s];
    flow = 0;
    for (;;) {
        for (int i = 0; i < n; i++)
            prev[i] = -1;
        prev[src] = src;
        int h = 0, t = 0;
        q[t++] = src;
        while (h < t && prev[snk] < 0) {
            int u = q[h++];
            for (int v = 0; v < n; v++)
                if (prev[v] < 0 && c[(size_t)u * n + v] > 1e-9) {
                    prev[v] = u;
                    q[t++] = v;
                }
        }
        if (prev[snk] < 0)
            break;
        double aug = INFINITY;
        for (int v = snk; v != src; v = prev[v])
            if (c[(size_t)prev[v] * n + v] < aug)
                aug = c[(size_t)prev[v] * n + v];
        for (int v = snk; v != src; v = prev[v]) {
            c[(size_t)prev[v] * n + v] -= aug;
            c[(size_t)v * n + prev[v]] += aug;
        }
        flow += aug;
    }
out:
    free(c);
    free(prev);
    free(q);
    return flow;
}

/* Largest scale x <= want such that x * w[] fits into cap[] over the
 * placement on[] (bisection on the max-flow). */
static double fit_scale(int B, int S, const double *w, const uint8_t *on, const double *cap,
                        double want)
{
    double *need = malloc((size_t)B * sizeof(double));
    if (!need)
        return 0;
    double lo = 0, hi = want, tot = 0;
    for (int b = 0; b < B; b++)
        tot += w[b];
    for (int it = 0; it < 40; it++) {
        double x = it == 0 ? hi : (lo + hi) / 2;
        for (int b = 0; b < B; b++)
            need[b] = x * w[b];
        int fits = bip_maxflow(B, S, need, on, cap) >= x * tot * (1 - 1e-9);
        if (it == 0 && fits) {
            lo = hi;
            break;
        }
        if (fits)
            lo = x;
        else
            hi = x;
    }
    free(need);
    return lo;
}

static json_t *server_names(const int *sv, int n)
{
    json_t *a = json_array();
    for (int k = 0; a && k < n; k++) {
        char name[16];
        snprintf(name, sizeof(name), "s%d", sv[k]);
        json_array_append_new(a, json_string(name));
    }
    return a;
}

char *sim_prop_scenario(uint64_t seed)
{
    rng_t g;
    rng_seed(&g, seed, UINT64_C(0x70726f70)); /* "prop" */
    int S = 3 + (int)rng_below(&g, 14), B = 4 + (int)rng_below(&g, 61);
    int parallel = rng_below(&g, 2) ? 16 : 8;
    double svc = parallel / PROP_CAPACITY, rtt = PROP_RTT_MS / 1000;
    int *place = malloc((size_t)B * 4 * sizeof(int)), *np = malloc((size_t)B * sizeof(int));
    int *kind = malloc((size_t)B * sizeof(int));
    double *w = malloc((size_t)B * sizeof(double)), cap[16];
    uint8_t *on = calloc((size_t)B * S, 1);
    json_t *root = json_object(), *servers = json_array(), *buckets = json_array();
    char *text = NULL;
    if (!place || !np || !kind || !w || !on || !root || !servers || !buckets)
        goto out;
    /* Kinds: 0 reserved, unlimited; 1 limited below its demand; 2 hungry:
     * unlimited with a small reservation. */
    for (int b = 0; b < B; b++) {
        np[b] = 1 + (int)rng_below(&g, 4);
        if (np[b] > S)
            np[b] = S;
        pick_servers(&g, S, np[b], place + b * 4);
        for (int k = 0; k < np[b]; k++)
            on[(size_t)b * S + place[b * 4 + k]] = 1;
        double u = rng_uniform(&g);
        kind[b] = u < 0.35 ? 0 : u < 0.8 ? 1 : 2;
        /* skewed: lognormal-ish weights by a Zipf rank */
        w[b] = pow(1 + rng_below(&g, (uint64_t)B), -1.0) * (kind[b] == 2 ? 0.1 : 1);
    }
    for (int s = 0; s < S; s++)
        cap[s] = PROP_FIT * PROP_CAPACITY;
    double tot = 0;
    for (int b = 0; b < B; b++)
        tot += w[b];
    double share = 0.75 + 0.05 * rng_uniform(&g);
    double x = fit_scale(B, S, w, on, cap, share * S * PROP_CAPACITY / tot);
    for (int s = 0; s < S; s++) {
        char name[16], addr[32];
        snprintf(name, sizeof(name), "s%d", s);
        snprintf(addr, sizeof(addr), "127.0.0.1:%d", 7101 + s);
        json_array_append_new(servers, json_pack("{s:s,s:s}", "name", name, "address", addr));
    }
    /* One server slows down for 2-3 periods. */
    int slow = (int)rng_below(&g, (uint64_t)S), from = 3 + (int)rng_below(&g, 4);
    double factor = 0.5 + 0.2 * rng_uniform(&g);
    json_object_set_new(json_array_get(servers, (size_t)slow), "speed",
                        json_pack("[{s:i,s:f},{s:i,s:f}]", "from_period", from, "factor", factor,
                                  "from_period", from + 2 + (int)rng_below(&g, 2), "factor", 1.0));
    for (int b = 0; b < B; b++) {
        char name[16];
        snprintf(name, sizeof(name), "b%d", b);
        double r = floor(x * w[b]);
        if (r < 1)
            r = 1;
        /* Requests in flight per server: enough for R on its servers at
         * the unloaded round trip, times 1-4; one bucket in eight gets
         * half of what it needs (not judged). */
        double need = r * (rtt + svc) / np[b];
        int k = (int)ceil(need * (1 + 3 * rng_uniform(&g)));
        if (rng_below(&g, 8) == 0)
            k = (int)floor(need / 2);
        k = k < 1 ? 1 : k > 64 ? 64 : k;
        json_t *o = json_pack("{s:s,s:f,s:o,s:i}", "name", name, "reservation", r, "servers",
                              server_names(place + b * 4, np[b]), "outstanding", k);
        if (kind[b] == 1)
            json_object_set_new(o, "limit", json_real(ceil(r * (1.1 + 0.9 * rng_uniform(&g)))));
        if (rng_below(&g, 8) == 0) {
            /* A runtime `set` at a period start: R times 0.5-1.2, the
             * limit (if any) keeping its ratio. */
            double f = 0.5 + 0.7 * rng_uniform(&g), r2 = floor(r * f);
            json_t *lim = json_object_get(o, "limit");
            json_t *st = json_pack("{s:i,s:f}", "period", 3 + (int)rng_below(&g, PROP_PERIODS - 4),
                                   "reservation", r2 < 1 ? 1 : r2);
            if (lim)
                json_object_set_new(st, "limit", json_real(ceil(json_real_value(lim) * f) + 1));
            json_object_set_new(o, "set", json_pack("[o]", st));
        }
        if (rng_below(&g, 5) == 0) {
            /* Its demand moves to other servers in mid-period. */
            int to[4];
            pick_servers(&g, S, np[b], to);
            double at = 2 + (int)rng_below(&g, PROP_PERIODS - 3) + 0.3 + 0.4 * rng_uniform(&g);
            json_object_set_new(o, "changes", json_pack("[{s:f,s:o}]", "at", at, "servers",
                                                        server_names(to, np[b])));
        }
        json_array_append_new(buckets, o);
    }
    char desc[128];
    snprintf(desc, sizeof(desc), "bqos-sim-prop seed %llu", (unsigned long long)seed);
    json_object_set_new(root, "description", json_string(desc));
    json_object_set_new(root, "duration", json_integer(PROP_PERIODS));
    json_object_set_new(root, "period", json_integer(1));
    json_object_set_new(root, "intervals", json_integer(5));
    json_object_set_new(root, "warmup_periods", json_integer(PROP_WARMUP));
    json_object_set_new(root, "seed", json_integer((json_int_t)(seed & ((1ULL << 53) - 1))));
    json_object_set_new(root, "capacity", json_real(PROP_CAPACITY));
    json_object_set_new(root, "workload", json_pack("{s:f}", "rtt_ms", PROP_RTT_MS));
    json_object_set_new(root, "backend", json_pack("{s:s,s:i,s:f}", "window", "auto", "parallel",
                                                   parallel, "service_cv", 0.3));
    json_object_set(root, "servers", servers);
    json_object_set(root, "buckets", buckets);
    text = json_dumps(root, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
out:
    json_decref(root);
    json_decref(servers);
    json_decref(buckets);
    free(place);
    free(np);
    free(kind);
    free(w);
    free(on);
    return text;
}

/* Marks on[s] the servers bucket bk is on during [t0, t1); returns the
 * number of phases in force then. */
static int servers_in(const sim_bucket_t *bk, double t0, double t1, int S, uint8_t *on)
{
    int n = 0;
    memset(on, 0, (size_t)S);
    for (size_t i = 0; i < bk->nphases; i++) {
        double end = i + 1 < bk->nphases ? bk->phases[i + 1].t : INFINITY;
        if (bk->phases[i].t >= t1 || end <= t0)
            continue;
        n++;
        for (int k = 0; k < bk->phases[i].n; k++)
            on[bk->phases[i].servers[k]] = 1;
    }
    return n;
}

/* Whether the reservations of absolute period ap, [t0, t1), fit into
 * cap[] (what each server delivered in it): max-flow with one source node
 * per (bucket, phase in force in the period), its R times the time that
 * phase was in force, to that phase's servers.  A bucket that moved in
 * mid-period could be served at its old servers only while it was there.
 * Returns 1, 0, or -ENOMEM. */
static int period_fits(const sim_model_t *m, int ap, double t0, double t1, const double *cap)
{
    int S = m->cfg.servers, B = m->cfg.buckets, n = 0, rc = -ENOMEM;
    size_t items = 0;
    for (int b = 0; b < B; b++)
        items += m->buckets[b].nphases;
    double *need = malloc(items * sizeof(double)), rsum = 0;
    uint8_t *on = calloc(items * (size_t)S, 1);
    if (!need || !on)
        goto out;
    for (int b = 0; b < B; b++) {
        const sim_bucket_t *bk = &m->buckets[b];
        double r = sim_bucket_rates(bk, ap, NULL);
        for (size_t i = 0; i < bk->nphases; i++) {
            double a = bk->phases[i].t, e = i + 1 < bk->nphases ? bk->phases[i + 1].t : INFINITY;
            a = a > t0 ? a : t0;
            e = e < t1 ? e : t1;
            if (e <= a)
                continue;
            need[n] = r * (e - a);
            rsum += need[n];
            for (int k = 0; k < bk->phases[i].n; k++)
                on[(size_t)n * S + bk->phases[i].servers[k]] = 1;
            n++;
        }
    }
    double flow = bip_maxflow(n, S, need, on, cap);
    rc = flow < 0 ? -ENOMEM : flow >= rsum * (1 - 1e-9);
out:
    free(need);
    free(on);
    return rc;
}

int sim_prop_check(const sim_model_t *m, const sim_result_t *r, sim_prop_verdict_t *v)
{
    return sim_prop_check_log(m, r, v, NULL, 0);
}

/* Whether server s's speed differs between absolute periods p - 1 and p. */
static int speed_step(const sim_model_t *m, int s, int p)
{
    return m->speed && p > 0 && m->speed[(size_t)p * m->cfg.servers + s] !=
                                    m->speed[(size_t)(p - 1) * m->cfg.servers + s];
}

int sim_prop_check_log(const sim_model_t *m, const sim_result_t *r, sim_prop_verdict_t *v,
                       FILE *log, long long seed)
{
    int S = m->cfg.servers, B = m->cfg.buckets;
    double T = m->cfg.period;
    uint8_t *on = malloc((size_t)B * S);
    double *need = malloc((size_t)B * sizeof(double)), *cap = malloc((size_t)S * sizeof(double));
    int *phases = malloc((size_t)B * sizeof(int));
    if (!on || !need || !cap || !phases) {
        free(on);
        free(need);
        free(cap);
        free(phases);
        return -ENOMEM;
    }
    memset(v, 0, sizeof(*v));
    v->worst = 1;
    v->worst_bucket = v->worst_period = -1;
    v->periods = (size_t)r->periods;
    v->l_win_worst = r->win[REPORT_WIN_LONG].l_worst;
    int par = m->window ? m->parallel : 1;
    for (int p = 0; p < r->periods; p++) {
        int ap = p + m->cfg.warmup; /* absolute period */
        double t0 = ap * T, t1 = t0 + T;
        for (int b = 0; b < B; b++) {
            phases[b] = servers_in(&m->buckets[b], t0, t1, S, on + (size_t)b * S);
            need[b] = sim_bucket_rates(&m->buckets[b], ap, NULL) * T;
        }
        for (int s = 0; s < S; s++)
            cap[s] = (double)r->delivered[(size_t)p * S + s];
        int fits = period_fits(m, ap, t0, t1, cap);
        if (fits < 0) {
            free(on);
            free(need);
            free(cap);
            free(phases);
            return fits;
        }
        v->fit += fits;
        for (int b = 0; b < B; b++) {
            const sim_bucket_t *bk = &m->buckets[b];
            double got = (double)r->served[(size_t)p * B + b], lim;
            sim_bucket_rates(bk, ap, &lim);
            if (lim >= 0) {
                double lr = got / (lim * T);
                v->l_periods++;
                v->l_over += lr > 1.01;
                if (lr > v->l_worst)
                    v->l_worst = lr;
            }
            if (!fits || phases[b] != 1 || !(need[b] >= 1))
                continue;
            /* Concurrency: K / unloaded round trip summed over its servers,
             * at least PROP_GUARANTEE x R (the guarantee's 2 x share x RTT0
             * at each server, with its R spread to match). */
            double most = 0;
            for (int s = 0; s < S; s++)
                if (on[(size_t)b * S + s]) {
                    double f = m->speed ? m->speed[(size_t)ap * S + s] : 1;
                    most += bk->outstanding > 0
                                ? bk->outstanding / (m->rtt + par / (m->capacity[s] * f))
                                : INFINITY;
                }
            if (most * T < need[b])
                continue;
            if (most * T < PROP_GUARANTEE * need[b]) {
                v->short_judged++;
                v->short_met99 += got >= 0.99 * need[b];
                continue;
            }
            double x = got / need[b];
            v->judged++;
            v->met99 += x >= 0.99;
            v->below90 += x < 0.9;
            if (log) {
                int nsv = 0, slow = 0, step = 0, lastsv = -1;
                double util = 0;
                for (int s = 0; s < S; s++)
                    if (on[(size_t)b * S + s]) {
                        double f = m->speed ? m->speed[(size_t)ap * S + s] : 1;
                        nsv++;
                        lastsv = s;
                        slow |= f < 1;
                        step |= speed_step(m, s, ap) || speed_step(m, s, ap - 1);
                        util += cap[s] / (m->capacity[s] * f * T);
                    }
                double rprev = ap > 0 ? sim_bucket_rates(bk, ap - 1, NULL) : need[b] / T;
                int moved = bk->nphases > 1 && bk->phases[1].t >= t0 - T && bk->phases[1].t < t0;
                fprintf(log, "%lld,%d,%d,%.4f,%.2f,%d,%d,%d,%d,%d,%d,%.0f,%d,%.3f\n", seed, ap, b, x,
                        most * T / need[b], nsv, nsv == 1 ? lastsv : -1, slow, step,
                        rprev * T != need[b], moved, need[b] / T, lim >= 0, util / nsv);
            }
            if (x < v->worst) {
                v->worst = x;
                v->worst_bucket = b;
                v->worst_period = ap;
            }
        }
    }
    free(on);
    free(need);
    free(cap);
    free(phases);
    return 0;
}
