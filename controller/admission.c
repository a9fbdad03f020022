/* admission.c - Haechi admission control for bucket configurations, in IOs and in bytes per second. */
#include "controller/admission.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

int admission_parse_mode(const char *s, admission_mode_t *out)
{
    if (s && strcmp(s, "warn") == 0)
        *out = ADMISSION_WARN;
    else if (s && strcmp(s, "enforce") == 0)
        *out = ADMISSION_ENFORCE;
    else
        return -EINVAL;
    return 0;
}

/* One unit's side of the check: where its reservations and capacities
 * are, and how the messages name them. */
typedef struct {
    int bytes;                 /* reservation_bytes, not reservation */
    const char *res, *cap;     /* "reservation" / "byte reservation", ... */
    const char *unit;          /* "IOs/s" or "bytes/s" */
    double total;              /* capacity of the live servers, <= 0 unknown */
    double (*bucket)(const char *name, void *arg);
} unit_t;

/* A message being written: its length so far and the violations found. */
typedef struct {
    char *msg;
    size_t size, len;
    int bad;
} out_t;

static int64_t reservation(const bucketfile_bucket_t *b, const unit_t *u)
{
    return u->bytes ? b->reservation_bytes : b->reservation;
}

/* Adds one violation to o (the first four are written). */
static void violation(out_t *o, const char *text)
{
    if (o->bad++ < 4 && o->len < o->size)
        o->len += (size_t)snprintf(o->msg + o->len, o->size - o->len, "%s%s", o->len ? "; " : "",
                                   text);
}

/* Checks the aggregate and the per-bucket constraint in unit u. */
static void check_unit(const bucketfile_t *bf, const unit_t *u, void *arg, out_t *o)
{
    char t[400];
    double total = 0;
    for (size_t i = 0; i < bucketfile_count(bf); i++)
        total += (double)reservation(bucketfile_get(bf, i), u);
    if (total > u->total) {
        snprintf(t, sizeof t, "total %s %.0f %s exceeds the cluster's estimated %s %.0f %s",
                 u->res, total, u->unit, u->cap, u->total, u->unit);
        violation(o, t);
    }
    for (size_t i = 0; u->bucket && i < bucketfile_count(bf); i++) {
        const bucketfile_bucket_t *b = bucketfile_get(bf, i);
        int64_t r = reservation(b, u);
        if (r == 0)
            continue;
        double cap = u->bucket(b->name, arg);
        if (cap < 0 || (double)r <= cap)
            continue;
        snprintf(t, sizeof t, "bucket %s: %s %lld %s exceeds the %.0f %s of the servers it is "
                 "placed on", b->name, u->res, (long long)r, u->unit, cap, u->unit);
        violation(o, t);
    }
}

int admission_check(const bucketfile_t *bf, const admission_view_t *view, char *msg,
                    size_t msgsize)
{
    char dummy[1];
    if (!msg || msgsize == 0) {
        msg = dummy;
        msgsize = sizeof dummy;
    }
    msg[0] = '\0';
    if (!view || !(view->total_capacity > 0)) {
        snprintf(msg, msgsize, "cluster capacity unknown (no live node): not checked");
        return 0;
    }
    out_t o = {.msg = msg, .size = msgsize};
    const unit_t ios = {0, "reservation", "capacity", "IOs/s", view->total_capacity,
                        view->bucket_capacity};
    check_unit(bf, &ios, view->arg, &o);
    int any_bytes = 0;
    for (size_t i = 0; i < bucketfile_count(bf); i++)
        any_bytes |= bucketfile_get(bf, i)->reservation_bytes > 0;
    if (any_bytes && view->total_byte_capacity > 0) {
        const unit_t bytes = {1, "byte reservation", "byte capacity", "bytes/s",
                              view->total_byte_capacity, view->bucket_byte_capacity};
        check_unit(bf, &bytes, view->arg, &o);
    }
    if (o.bad > 4 && o.len < msgsize)
        snprintf(msg + o.len, msgsize - o.len, "; and %d more", o.bad - 4);
    if (!o.bad && any_bytes && !(view->total_byte_capacity > 0))
        snprintf(msg, msgsize, "byte capacity unknown (no node has served bytes yet): byte "
                 "reservations not checked");
    return o.bad ? -EDQUOT : 0;
}

void admission_sums_init(admission_sums_t *s, const bucketfile_t *bf)
{
    *s = (admission_sums_t){0};
    for (size_t i = 0; i < bucketfile_count(bf); i++)
        admission_sums_add(s, bucketfile_get(bf, i), 1);
}

void admission_sums_add(admission_sums_t *s, const bucketfile_bucket_t *b, int sign)
{
    s->reservation += (__int128)sign * b->reservation;
    s->reservation_bytes += (__int128)sign * b->reservation_bytes;
    if (b->reservation_bytes > 0)
        s->with_bytes += sign > 0 ? 1 : (size_t)-1;
}

/* One unit's side of a change: the aggregate from the sum, the local
 * constraint of the changed bucket. */
static void check_change_unit(__int128 sum, const bucketfile_bucket_t *b, const unit_t *u,
                              void *arg, out_t *o)
{
    char t[400];
    double total = (double)sum;
    if (total > u->total) {
        snprintf(t, sizeof t, "total %s %.0f %s exceeds the cluster's estimated %s %.0f %s",
                 u->res, total, u->unit, u->cap, u->total, u->unit);
        violation(o, t);
    }
    int64_t r = b ? reservation(b, u) : 0;
    if (!r || !u->bucket)
        return;
    double cap = u->bucket(b->name, arg);
    if (cap < 0 || (double)r <= cap)
        return;
    snprintf(t, sizeof t, "bucket %s: %s %lld %s exceeds the %.0f %s of the servers it is "
             "placed on", b->name, u->res, (long long)r, u->unit, cap, u->unit);
    violation(o, t);
}

int admission_check_change(const admission_sums_t *after, const bucketfile_bucket_t *changed,
                           const admission_view_t *view, char *msg, size_t msgsize)
{
    char dummy[1];
    if (!msg || msgsize == 0) {
        msg = dummy;
        msgsize = sizeof dummy;
    }
    msg[0] = '\0';
    if (!view || !(view->total_capacity > 0)) {
        snprintf(msg, msgsize, "cluster capacity unknown (no live node): not checked");
        return 0;
    }
    out_t o = {.msg = msg, .size = msgsize};
    const unit_t ios = {0, "reservation", "capacity", "IOs/s", view->total_capacity,
                        view->bucket_capacity};
    check_change_unit(after->reservation, changed, &ios, view->arg, &o);
    int any_bytes = after->with_bytes > 0;
    if (any_bytes && view->total_byte_capacity > 0) {
        const unit_t bytes = {1, "byte reservation", "byte capacity", "bytes/s",
                              view->total_byte_capacity, view->bucket_byte_capacity};
        check_change_unit(after->reservation_bytes, changed, &bytes, view->arg, &o);
    }
    if (!o.bad && any_bytes && !(view->total_byte_capacity > 0))
        snprintf(msg, msgsize, "byte capacity unknown (no node has served bytes yet): byte "
                 "reservations not checked");
    return o.bad ? -EDQUOT : 0;
}
