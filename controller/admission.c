/* admission.c - Haechi admission control for bucket configurations, in IOs and in bytes per second. */
#include "controller/admission.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
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

/* ---- nested buckets (issue 28) -------------------------------------------- */

/* Nonzero if some bucket of bf has a parent (the checks below allocate
 * only then). */
static int any_parent(const bucketfile_t *bf)
{
    for (size_t i = 0; i < bucketfile_count(bf); i++)
        if (bucketfile_has_parent(bucketfile_get(bf, i)))
            return 1;
    return 0;
}

/* The nesting of bf: each bucket's parent index (-1 none) and depth (1: a
 * root or a bucket outside any tree), into par[] and dep[] (n each).
 * Returns the greatest depth (0 if no bucket has a parent). */
static int nest_of(const bucketfile_t *bf, int *par, int *dep)
{
    size_t n = bucketfile_count(bf);
    int most = 0;
    for (size_t i = 0; i < n; i++) {
        const bucketfile_bucket_t *b = bucketfile_get(bf, i);
        par[i] = bucketfile_has_parent(b) ? bucketfile_find(bf, bucketfile_parent(b)) : -1;
        if (par[i] >= 0)
            most = 1;
    }
    if (!most)
        return 0;
    for (size_t i = 0; i < n; i++) {
        int d = 1;
        for (int p = par[i]; p >= 0 && d <= BUCKETFILE_MAX_DEPTH; p = par[p])
            d++;
        dep[i] = d;
        if (d > most)
            most = d;
    }
    return most;
}

/* What the reservations of bf in unit u count twice: a parent's
 * reservation is a floor for the sum of its children's service, so the
 * capacity a tree needs is max(R, the sum of its children's needs) at each
 * parent, not R plus that sum.  Returns the sum of all reservations less
 * what the trees need (0 without parents, or if out of memory: everything
 * then counts, which never admits more). */
static double nested_overlap(const bucketfile_t *bf, const unit_t *u)
{
    if (!any_parent(bf))
        return 0;
    size_t n = bucketfile_count(bf);
    int *par = malloc((n ? n : 1) * sizeof *par), *dep = malloc((n ? n : 1) * sizeof *dep);
    double *kids = calloc(n ? n : 1, sizeof *kids), over = 0;
    int most = par && dep && kids ? nest_of(bf, par, dep) : 0;
    for (int d = most; d >= 1; d--)
        for (size_t i = 0; i < n; i++) {
            if (dep[i] != d)
                continue;
            double r = (double)reservation(bucketfile_get(bf, i), u);
            double need = r > kids[i] ? r : kids[i];
            over += r - need + kids[i]; /* r + kids - max(r, kids) */
            if (par[i] >= 0)
                kids[par[i]] += need;
        }
    free(par);
    free(dep);
    free(kids);
    return over;
}

/* The checks of nesting in unit u, whatever the capacity: the
 * reservations of a parent's children must fit the parent's limit (the
 * rounds could not give them both); a parent's reservation below the sum of
 * its children's is allowed (it adds no floor beyond theirs) and only noted
 * in *note. */
static void nested_check(const bucketfile_t *bf, const unit_t *u, out_t *o, char *note,
                         size_t notesize)
{
    if (!any_parent(bf))
        return;
    size_t n = bucketfile_count(bf);
    int *par = malloc((n ? n : 1) * sizeof *par), *dep = malloc((n ? n : 1) * sizeof *dep);
    double *kids = calloc(n ? n : 1, sizeof *kids);
    char t[400];
    if (!par || !dep || !kids) {
        violation(o, "nested buckets: out of memory, not checked");
        goto out;
    }
    if (!nest_of(bf, par, dep))
        goto out;
    for (size_t i = 0; i < n; i++)
        if (par[i] >= 0)
            kids[par[i]] += (double)reservation(bucketfile_get(bf, i), u);
    for (size_t i = 0; i < n; i++) {
        const bucketfile_bucket_t *b = bucketfile_get(bf, i);
        if (kids[i] <= 0)
            continue;
        int64_t lim = u->bytes ? (b->limit_bytes > 0 ? b->limit_bytes : -1)
                               : (b->limit == BUCKETFILE_NO_LIMIT ? -1 : b->limit);
        if (lim >= 0 && kids[i] > (double)lim) {
            snprintf(t, sizeof t, "bucket %.100s: its children's %ss add up to %.0f %s, over its "
                     "limit %lld %s", b->name, u->res, kids[i], u->unit, (long long)lim, u->unit);
            violation(o, t);
        } else if ((double)reservation(b, u) < kids[i] && reservation(b, u) > 0 && !note[0]) {
            snprintf(note, notesize, "note: bucket %.100s: %s %lld %s is below its children's "
                     "%.0f (it adds no floor beyond theirs)", b->name, u->res,
                     (long long)reservation(b, u), u->unit, kids[i]);
        }
    }
out:
    free(par);
    free(dep);
    free(kids);
}

/* The aggregate constraint in unit u: `total`, the reservations summed
 * (nesting counted once), within the cluster's estimate. */
static void check_total(const unit_t *u, double total, out_t *o)
{
    if (total <= u->total)
        return;
    char t[400];
    snprintf(t, sizeof t, "total %s %.0f %s exceeds the cluster's estimated %s %.0f %s",
             u->res, total, u->unit, u->cap, u->total, u->unit);
    violation(o, t);
}

/* The local constraint in unit u (u->bucket set): bucket b's reservation
 * within what the servers it is placed on give. */
static void check_bucket(const bucketfile_bucket_t *b, const unit_t *u, void *arg, out_t *o)
{
    int64_t r = reservation(b, u);
    if (r == 0)
        return;
    double cap = u->bucket(b->name, arg);
    if (cap < 0 || (double)r <= cap)
        return;
    char t[400];
    snprintf(t, sizeof t, "bucket %s: %s %lld %s exceeds the %.0f %s of the servers it is "
             "placed on", b->name, u->res, (long long)r, u->unit, cap, u->unit);
    violation(o, t);
}

/* Checks the aggregate and the per-bucket constraint in unit u. */
static void check_unit(const bucketfile_t *bf, const unit_t *u, void *arg, out_t *o)
{
    double total = 0;
    for (size_t i = 0; i < bucketfile_count(bf); i++)
        total += (double)reservation(bucketfile_get(bf, i), u);
    total -= nested_overlap(bf, u);
    check_total(u, total, o);
    for (size_t i = 0; u->bucket && i < bucketfile_count(bf); i++)
        check_bucket(bucketfile_get(bf, i), u, arg, o);
}

/* The nesting checks of both units (nested_check()); the first note in
 * note[].  Returns -EDQUOT (o filled) if any was violated, else 0. */
static int nested_admission(const bucketfile_t *bf, out_t *o, char *note, size_t notesize)
{
    const unit_t ios = {0, "reservation", "capacity", "IOs/s", 0, NULL};
    const unit_t bytes = {1, "byte reservation", "byte capacity", "bytes/s", 0, NULL};
    nested_check(bf, &ios, o, note, notesize);
    nested_check(bf, &bytes, o, note, notesize);
    if (o->bad > 4 && o->len < o->size)
        snprintf(o->msg + o->len, o->size - o->len, "; and %d more", o->bad - 4);
    return o->bad ? -EDQUOT : 0;
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
    out_t o = {.msg = msg, .size = msgsize};
    char note[300] = "";
    if (nested_admission(bf, &o, note, sizeof note) < 0)
        return -EDQUOT;
    if (!view || !(view->total_capacity > 0)) {
        snprintf(msg, msgsize, "cluster capacity unknown (no live node): not checked%s%s",
                 note[0] ? "; " : "", note);
        return 0;
    }
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
    if (!o.bad && note[0])
        snprintf(msg + strlen(msg), msgsize - strlen(msg), "%s%s", msg[0] ? "; " : "", note);
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
    check_total(u, (double)sum, o);
    if (b && u->bucket)
        check_bucket(b, u, arg, o);
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
