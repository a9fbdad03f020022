/* clock.c - bqos-controller's period clock: periods, intervals, round deadlines and adoption of the nodes' clock; no sockets. */
#include "controller/daemon/clock.h"

#include <math.h>

#include "common/log.h"

void pclock_init(pclock_t *pc, double period_s, int intervals, double wait, double now)
{
    *pc = (pclock_t){
        .period_s = period_s,
        .intervals = intervals,
        .wait = wait,
        .started = now,
        .origin = now,
        .period_start = now,
        .period = 1,
    };
}

double pclock_interval_s(const pclock_t *pc)
{
    return pc->period_s / pc->intervals;
}

double pclock_since_boundary(const pclock_t *pc, double now)
{
    return now - (pc->period_start + pc->interval * pclock_interval_s(pc));
}

/* Period (number and start) and interval that hold `now`. */
static void locate(const pclock_t *pc, double now, uint64_t *period, double *start,
                   uint32_t *interval)
{
    double T = pc->period_s;
    uint64_t p = pc->period;
    double ps = pc->period_start;
    if (now >= ps + T) {
        double n = floor((now - ps) / T);
        p += (uint64_t)n;
        ps += n * T;
    }
    int k = (int)floor((now - ps) / pclock_interval_s(pc));
    if (k < 0)
        k = 0;
    if (k >= pc->intervals)
        k = pc->intervals - 1;
    *period = p;
    *start = ps;
    *interval = (uint32_t)k;
}

int pclock_due(const pclock_t *pc, double now)
{
    uint64_t p;
    double ps;
    uint32_t k;
    locate(pc, now, &p, &ps, &k);
    return p != pc->period || k != pc->interval || !pc->round_start;
}

double pclock_begin(pclock_t *pc, double now)
{
    double T = pc->period_s;
    locate(pc, now, &pc->period, &pc->period_start, &pc->interval);
    double left = (pc->period_start + T - now) / T;
    pc->round_open = 1;
    pc->round_start = now;
    pc->last_report = 0;
    double w = pc->wait * pclock_interval_s(pc);
    pc->round_deadline = now + (w < 0.001 ? 0.001 : w);
    return left > 0 ? left : 1e-3;
}

int pclock_expired(const pclock_t *pc, double now)
{
    return now >= pc->round_deadline;
}

void pclock_report(pclock_t *pc, double now)
{
    pc->last_report = now;
}

double pclock_close(pclock_t *pc, double now)
{
    pc->round_open = 0;
    return (pc->last_report > pc->round_start ? pc->last_report : now) - pc->round_start;
}

double pclock_next(const pclock_t *pc)
{
    return pc->round_open ? pc->round_deadline
                          : pc->period_start + (pc->interval + 1) * pclock_interval_s(pc);
}

void pclock_fill_timing(const pclock_t *pc, proto_msg_t *m, double now)
{
    uint32_t pms = (uint32_t)lround(pc->period_s * 1000);
    double rem = (pc->period_start + pc->period_s - now) * 1000;
    m->has_timing = 1;
    m->period = pc->period;
    m->interval = pc->interval;
    m->intervals = (uint32_t)pc->intervals;
    m->period_ms = pms ? pms : 1;
    m->remaining_ms = rem <= 0 ? 0 : rem >= pms ? pms : (uint32_t)lround(rem);
}

pclock_reading_t pclock_reading(const pclock_t *pc, uint64_t period, uint32_t interval,
                                uint32_t remaining_ms, double now)
{
    if (period == 0 || period > PCLOCK_PERIOD_MAX)
        return (pclock_reading_t){0, 0};
    double rem = remaining_ms > 0 ? remaining_ms / 1000.0
                                  : pc->period_s - (interval + 0.5) * pclock_interval_s(pc);
    if (rem > pc->period_s)
        rem = pc->period_s;
    return (pclock_reading_t){period, now + rem};
}

int pclock_same(const pclock_t *pc, const pclock_reading_t *a, const pclock_reading_t *b)
{
    return a->period && a->period == b->period &&
           fabs(a->end - b->end) < 0.25 * pclock_interval_s(pc);
}

void pclock_set_grid(pclock_t *pc)
{
    pc->grid = 1;
}

int pclock_adopt(pclock_t *pc, const pclock_reading_t *r, double now)
{
    if (r->period == 0 || r->period > PCLOCK_PERIOD_MAX || now - pc->started > 2 * pc->period_s)
        return 0;
    /* Nodes that already follow our clock (they took it from a welcome)
     * need no adoption. */
    if (r->period == pc->period &&
        fabs(r->end - (pc->period_start + pc->period_s)) < 0.1 * pclock_interval_s(pc))
        return 0;
    double end = r->end;
    if (pc->grid) {
        /* the reading's end against the nearest boundary of our grid */
        double off = fmod(r->end - pc->origin, pc->period_s);
        if (off < 0)
            off += pc->period_s;
        if (off > pc->period_s / 2)
            off -= pc->period_s;
        if (fabs(off) >= 0.25 * pclock_interval_s(pc)) {
            if (pc->off_grid++ == 0)
                log_info("not adopting the nodes' clock (period %llu): its periods end %.0f ms "
                         "off this shard's, which start on multiples of the period of the wall clock",
                         (unsigned long long)r->period, off * 1e3);
            return 0;
        }
        end -= off;
        if (r->period == pc->period && fabs(end - (pc->period_start + pc->period_s)) < 1e-9)
            return 0;
    }
    pc->adopted++;
    pc->period = r->period;
    pc->period_start = end - pc->period_s;
    pc->round_start = 0; /* restart the round on the adopted clock */
    pc->round_open = 0;
    log_info("adopted the nodes' clock: period %llu, %.0f ms left",
             (unsigned long long)r->period, (end - now) * 1e3);
    return 1;
}
