/* sim_measured.c - bqos-load's periods.csv and servers.csv read into a sim_result_t for the property test's checker (see sim_measured.h). */
#include "workloads/sim/sim_measured.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MEAS_FIELDS 8

/* Splits line (modified in place, its newline dropped) at commas into
 * f[0..max-1]; returns the number of fields, or max + 1 if there are more. */
static int split(char *line, char **f, int max)
{
    line[strcspn(line, "\r\n")] = 0;
    int n = 0;
    for (char *p = line;; p++) {
        if (n == max)
            return max + 1;
        f[n++] = p;
        p += strcspn(p, ",");
        if (!*p)
            return n;
        *p = 0;
    }
}

/* A whole non-negative integer in text t, or -1. */
static long long whole(const char *t)
{
    char *end;
    errno = 0;
    if (*t < '0' || *t > '9')
        return -1;
    long long v = strtoll(t, &end, 10);
    return errno || *end ? -1 : v;
}

static int find_name(const char *name, size_t n, const char *(*get)(const scenario_t *, size_t),
                     const scenario_t *sc)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(get(sc, i), name) == 0)
            return (int)i;
    return -1;
}

static const char *bucket_name(const scenario_t *sc, size_t i) { return sc->buckets[i].name; }
static const char *server_name(const scenario_t *sc, size_t i) { return sc->servers[i].name; }

/* Reads DIR/NAME: header `head`, then rows of `nf` fields whose first is the
 * period (1..maxp), the second a name (of n, looked up with get), and field
 * `col` a count, into cnt[(period - 1) * n + index] (seen[] marks them).
 * Sets *last to the largest period.  Returns 0 or -errno with err set. */
static int read_counts(const char *dir, const char *name, const char *head, int nf, int col,
                       const scenario_t *sc, size_t n,
                       const char *(*get)(const scenario_t *, size_t),
                       int maxp, uint64_t *cnt, uint8_t *seen, int *last, char *err, size_t errlen)
{
    char path[PATH_MAX], *line = NULL, *f[MEAS_FIELDS];
    size_t cap = 0;
    int rc = 0, ln = 0;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *fp = fopen(path, "r");
    if (!fp) {
        rc = -errno;
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return rc;
    }
    *last = 0;
    while (getline(&line, &cap, fp) >= 0) {
        ln++;
        if (ln == 1) {
            line[strcspn(line, "\r\n")] = 0;
            if (strcmp(line, head) != 0) {
                snprintf(err, errlen, "%s:1: header is not \"%s\"", path, head);
                rc = -EINVAL;
                break;
            }
            continue;
        }
        if (split(line, f, MEAS_FIELDS) != nf) {
            snprintf(err, errlen, "%s:%d: %d fields expected", path, ln, nf);
            rc = -EINVAL;
            break;
        }
        long long p = whole(f[0]), c = whole(f[col]);
        int i = find_name(f[1], n, get, sc);
        if (p < 1 || p > maxp) {
            snprintf(err, errlen, "%s:%d: period \"%s\" is not 1..%d", path, ln, f[0], maxp);
            rc = -EINVAL;
        } else if (i < 0) {
            snprintf(err, errlen, "%s:%d: \"%s\" is not in the scenario", path, ln, f[1]);
            rc = -EINVAL;
        } else if (c < 0) {
            snprintf(err, errlen, "%s:%d: count \"%s\" is not a whole number", path, ln, f[col]);
            rc = -EINVAL;
        } else if (seen[(size_t)(p - 1) * n + (size_t)i]) {
            snprintf(err, errlen, "%s:%d: period %lld of \"%s\" again", path, ln, p, f[1]);
            rc = -EINVAL;
        }
        if (rc)
            break;
        cnt[(size_t)(p - 1) * n + (size_t)i] = (uint64_t)c;
        seen[(size_t)(p - 1) * n + (size_t)i] = 1;
        if (p > *last)
            *last = (int)p;
    }
    if (!rc && ln == 0) {
        snprintf(err, errlen, "%s: empty", path);
        rc = -EINVAL;
    }
    for (int p = 0; !rc && p < *last; p++)
        for (size_t i = 0; i < n; i++)
            if (!seen[(size_t)p * n + i]) {
                snprintf(err, errlen, "%s: no row for period %d of \"%s\"", path, p + 1,
                         get(sc, i));
                rc = -EINVAL;
                break;
            }
    free(line);
    fclose(fp);
    return rc;
}

/* summary.json's windows.long.l_worst (0 when null) into *out. */
static int summary_l_worst(const char *dir, double *out, char *err, size_t errlen)
{
    char path[PATH_MAX];
    json_error_t je;
    snprintf(path, sizeof path, "%s/summary.json", dir);
    json_t *root = json_load_file(path, 0, &je);
    if (!root) {
        snprintf(err, errlen, "%s:%d: %s", path, je.line, je.text);
        return -EINVAL;
    }
    json_t *w = json_object_get(json_object_get(root, "windows"), "long");
    json_t *v = json_object_get(w, "l_worst");
    int rc = 0;
    if (json_is_number(v))
        *out = json_number_value(v);
    else if (!v || json_is_null(v))
        *out = 0;
    else {
        snprintf(err, errlen, "%s: windows.long.l_worst is not a number", path);
        rc = -EINVAL;
    }
    json_decref(root);
    return rc;
}

int sim_measured_load(const scenario_t *sc, const sim_model_t *m, const char *dir,
                      sim_result_t **out, char *err, size_t errlen)
{
    size_t B = sc->nbuckets, S = sc->nservers;
    int P = m->cfg.periods, W = m->cfg.warmup, lastb = 0, lasts = 0, rc = -ENOMEM;
    uint64_t *bc = calloc((size_t)P * (B ? B : 1), sizeof *bc);
    uint64_t *svc = calloc((size_t)P * (S ? S : 1), sizeof *svc);
    uint8_t *seen = calloc((size_t)P * (B > S ? B : S) + 1, 1);
    sim_result_t *r = calloc(1, sizeof *r);
    *out = NULL;
    if (errlen)
        err[0] = 0;
    if (!bc || !svc || !seen || !r)
        goto fail;
    if ((size_t)m->cfg.buckets != B || (size_t)m->cfg.servers != S) {
        snprintf(err, errlen, "the model is not the scenario's");
        rc = -EINVAL;
        goto fail;
    }
    if ((rc = read_counts(dir, "periods.csv", "period,bucket,reservation,limit,completed,met,over",
                          7, 4, sc, B, bucket_name, P, bc, seen, &lastb, err, errlen)) < 0)
        goto fail;
    memset(seen, 0, (size_t)P * (B > S ? B : S) + 1);
    if ((rc = read_counts(dir, "servers.csv", "period,server,completed", 3, 2, sc, S, server_name,
                          P, svc, seen, &lasts, err, errlen)) < 0)
        goto fail;
    int last = lastb < lasts ? lastb : lasts;
    if (last <= W) {
        snprintf(err, errlen, "%s: %d full periods, none after the %d of warm-up", dir, last, W);
        rc = -EINVAL;
        goto fail;
    }
    r->policy = SIM_POLICY_PSHIFT_PACED;
    r->buckets = (int)B;
    r->servers = (int)S;
    r->intervals = m->cfg.intervals;
    r->periods = last - W;
    rc = -ENOMEM;
    if (!(r->served = malloc((size_t)r->periods * (B ? B : 1) * sizeof *r->served)) ||
        !(r->delivered = malloc((size_t)r->periods * (S ? S : 1) * sizeof *r->delivered)))
        goto fail;
    memcpy(r->served, bc + (size_t)W * B, (size_t)r->periods * B * sizeof *bc);
    memcpy(r->delivered, svc + (size_t)W * S, (size_t)r->periods * S * sizeof *svc);
    r->win[REPORT_WIN_LONG].len = REPORT_WIN_LONG_S;
    if (fabs(m->cfg.period - REPORT_WIN_LONG_S) < 1e-9) {
        /* A 1 s window is a period: against the model's limits per period. */
        for (int p = 0; p < r->periods; p++)
            for (size_t b = 0; b < B; b++) {
                double lim;
                sim_bucket_rates(&m->buckets[b], p + W, &lim);
                double got = (double)r->served[(size_t)p * B + b];
                double x = lim > 0 ? got / (lim * m->cfg.period) : 0;
                if (x > r->win[REPORT_WIN_LONG].l_worst)
                    r->win[REPORT_WIN_LONG].l_worst = x;
            }
    } else if ((rc = summary_l_worst(dir, &r->win[REPORT_WIN_LONG].l_worst, err, errlen)) < 0)
        goto fail;
    free(bc);
    free(svc);
    free(seen);
    *out = r;
    return 0;
fail:
    if (rc == -ENOMEM && errlen && err[0] == 0)
        snprintf(err, errlen, "out of memory");
    free(bc);
    free(svc);
    free(seen);
    sim_result_destroy(&r);
    return rc;
}
