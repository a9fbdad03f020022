/* driver.c - the pieces of a scenario run that bqos-load and bqos-nbd-load share (see driver.h). */
#include "workloads/driver.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "common/log.h"

double driver_since(const struct timespec *start)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - start->tv_sec) + (double)(now.tv_nsec - start->tv_nsec) * 1e-9;
}

void driver_nap_until(const struct timespec *start, double t, double cap)
{
    double d = t - driver_since(start);
    if (d > cap)
        d = cap;
    if (d <= 0)
        return;
    struct timespec ts = {(time_t)d, (long)((d - floor(d)) * 1e9)};
    nanosleep(&ts, NULL);
}

void driver_set_start(struct timespec *start, double lead, double align, double period)
{
    struct timespec real;
    clock_gettime(CLOCK_REALTIME, &real);
    clock_gettime(CLOCK_MONOTONIC, start);
    if (align > 0) {
        double now = (double)real.tv_sec + (double)real.tv_nsec * 1e-9, T = period;
        double t0 = align + ceil((now + lead - align) / T) * T;
        lead = t0 - now;
    }
    start->tv_nsec += (long)(lead * 1e9);
    start->tv_sec += start->tv_nsec / 1000000000L;
    start->tv_nsec %= 1000000000L;
}

double driver_position_rate(const scenario_bucket_t *bk, const scenario_phase_t *ph, int pos)
{
    double wsum = 0;
    for (int i = 0; i < ph->n; i++)
        wsum += 1.0 / pow(i + 1, bk->split_zipf);
    return bk->rate * (1.0 / pow(pos + 1, bk->split_zipf)) / wsum;
}

int driver_start(driver_run_t *r, size_t n, void *(*fn)(void *), void *args, size_t size,
                 double lead, double align, double period)
{
    if (!(r->tids = calloc(n ? n : 1, sizeof *r->tids)))
        return -ENOMEM;
    driver_set_start(&r->start, lead, align, period);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    int e = 0;
    for (r->started = 0; r->started < n; r->started++)
        if ((e = pthread_create(&r->tids[r->started], &attr, fn,
                                (char *)args + r->started * size)) != 0)
            break;
    pthread_attr_destroy(&attr);
    if (e == 0)
        return 0;
    log_error("cannot start client thread %zu of %zu: %s", r->started + 1, n, strerror(e));
    return -EAGAIN;
}

int driver_running(driver_run_t *r, double *t)
{
    if (atomic_load_explicit(&r->stop, memory_order_relaxed))
        return 0;
    *t = driver_since(&r->start);
    return *t < r->end;
}

void driver_stop(driver_run_t *r)
{
    atomic_store(&r->stop, 1);
    for (size_t i = 0; i < r->started; i++)
        pthread_join(r->tids[i], NULL);
    free(r->tids);
    r->tids = NULL;
}

void driver_pace_phase(driver_pace_t *p, const scenario_bucket_t *bk, const scenario_phase_t *ph,
                       int pos, double per, double t, rng_t *rng)
{
    if (ph == p->phase)
        return;
    double r = driver_position_rate(bk, ph, pos) / per;
    p->gap = r > 0 ? 1.0 / r : INFINITY;
    p->due = t + rng_uniform(rng) * p->gap;
    p->phase = ph;
}

void driver_pace_sent(driver_pace_t *p, double t)
{
    p->due += p->gap;
    if (p->due < t - 1.0)
        p->due = t;
}

void driver_print_capacity(const scenario_t *s, const uint64_t *done, double secs)
{
    double sum = 0, min = INFINITY;
    for (size_t j = 0; j < s->nservers; j++) {
        double r = (double)done[j] / secs;
        printf("server %s %.0f\n", s->servers[j].name, r);
        sum += r;
        if (r < min)
            min = r;
    }
    printf("capacity %.0f\nmin %.0f\n", sum / (double)s->nservers, min);
}

/* Writes one file of the run into dir: fn(rep), or the summary when fn is
 * NULL.  Returns 0 or -errno after logging. */
static int write_file(const char *dir, const char *name, int (*fn)(const report_t *, FILE *),
                      const report_t *rep, const char *label)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f) {
        log_error("cannot write %s: %s", path, strerror(errno));
        return -errno;
    }
    int rc = fn ? fn(rep, f) : report_write_summary(rep, label, f);
    if (fclose(f) != 0 && rc == 0)
        rc = -EIO;
    if (rc < 0)
        log_error("cannot write %s: %s", path, strerror(-rc));
    return rc;
}

int driver_write_outputs(const char *dir, int mode, const report_t *rep, const char *label)
{
    if (mkdir(dir, (mode_t)mode) < 0 && errno != EEXIST) {
        log_error("cannot create %s: %s", dir, strerror(errno));
        return -errno;
    }
    int rc = 0;
    if ((rc = write_file(dir, "intervals.csv", report_write_intervals, rep, NULL)) < 0 ||
        (rc = write_file(dir, "cumulative.csv", report_write_cumulative, rep, NULL)) < 0 ||
        (rc = write_file(dir, "periods.csv", report_write_periods, rep, NULL)) < 0 ||
        (rc = write_file(dir, "servers.csv", report_write_servers, rep, NULL)) < 0 ||
        (rc = write_file(dir, "summary.json", NULL, rep, label)) < 0)
        return rc;
    return 0;
}

int driver_opt_server(const char *arg, void *target)
{
    driver_servers_t *d = target;
    if (d->so->nservers == DRIVER_SERVERS_MAX)
        return -EINVAL;
    d->list[d->so->nservers++] = arg;
    d->so->servers = d->list;
    return 0;
}

void driver_raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}
