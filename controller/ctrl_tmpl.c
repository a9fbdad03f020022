/* ctrl_tmpl.c - the controller's table as composed: the operator's buckets then the template-made ones the nodes' reports revealed (ctrl.h, "template-made buckets"; the registry is dyn.c), and which path a change of one bucket takes (in place, or the whole table). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "controller/ctrl.h"
#include "controller/ctrl_int.h"

static int not_configured(void *arg, const char *name)
{
    return bucketfile_find(arg, name) < 0;
}

/* Makes the table c->conf plus the registry's buckets (a configured name
 * wins; an entry whose R does not fit the up nodes' capacity with the R
 * before it gets R 0).  On -ERANGE (the sums would not hold) the table is
 * c->conf alone.  Returns 0 or -ENOMEM (table unchanged). */
static int compose(ctrl_t *c)
{
    if (c->conf_stale) { /* changed in place, with no template-made bucket in it */
        bucketfile_t *conf = bucketfile_dup(c->bf);
        if (!conf)
            return -ENOMEM;
        bucketfile_destroy(&c->conf);
        c->conf = conf;
        c->conf_stale = 0;
    }
    size_t nd = dyn_count(c->dyn), k = 0;
    bucketfile_t *eff = nd ? bucketfile_dup(c->conf) : NULL;
    int32_t *ix = nd ? malloc(nd * sizeof *ix) : NULL;
    int rc;
    if (nd && (!eff || !ix)) {
        rc = -ENOMEM;
        goto out;
    }
    if (nd) {
        double cap = ctrl_total_capacity(c), rsum = 0;
        for (size_t b = 0; b < bucketfile_count(c->conf); b++)
            rsum += (double)bucketfile_get(c->conf, b)->reservation;
        for (size_t i = 0; i < nd; i++) {
            const dyn_entry_t *e = dyn_get(c->dyn, i);
            if (bucketfile_find(eff, e->name) >= 0)
                continue;
            bucketfile_bucket_t b = {.weight = 1, .reservation = e->reservation,
                                     .limit = e->limit == RULES_NO_LIMIT ? BUCKETFILE_NO_LIMIT
                                                                         : e->limit};
            b.name = e->name; /* eff keeps its own copy */
            if (rsum + (double)b.reservation > cap) {
                b.reservation = 0; /* admission: its limit holds, its R does not fit */
                c->dyn_r_zeroed++;
            }
            rsum += (double)b.reservation;
            if (bucketfile_set(eff, &b, NULL) < 0)
                continue; /* not a bucket name: stays out (the nodes hold it at 0) */
            ix[k++] = (int32_t)i;
        }
    }
    rc = ctrl__table_set(c, eff ? eff : c->conf);
    if (rc == -ERANGE && eff) {
        log_warn("template-made buckets would take the table past its bounds: left out");
        k = 0;
        rc = ctrl__table_set(c, c->conf);
    }
    if (rc < 0)
        goto out;
    free(c->dyn_ix);
    c->dyn_ix = ix;
    ix = NULL;
    c->nconf = c->nb - k;
out:
    free(ix);
    bucketfile_destroy(&eff);
    return rc;
}

int ctrl_set_buckets(ctrl_t *c, const bucketfile_t *bf)
{
    if (ctrl_check_buckets(c, bf, NULL, 0) < 0)
        return -ERANGE;
    bucketfile_t *conf = bucketfile_dup(bf);
    if (!conf)
        return -ENOMEM;
    /* The registry keeps what the new rules still make and the new table
     * does not configure, at the new rules' figures. */
    if (dyn_retain(c->dyn, bucketfile_rules(bf), not_configured, conf) > 0)
        log_info("rules change: template-made buckets no rule makes now dropped");
    bucketfile_t *old = c->conf;
    int old_stale = c->conf_stale;
    c->conf = conf;
    c->conf_stale = 0;
    int rc = compose(c);
    if (rc < 0) {
        c->conf = old;
        c->conf_stale = old_stale;
        bucketfile_destroy(&conf);
        c->dyn_dirty = 1;
        return rc;
    }
    bucketfile_destroy(&old);
    c->dyn_dirty = 0;
    if (!dyn_count(c->dyn)) {
        /* c->bf is conf's rows (ctrl's own copy): conf, a dup sharing the
         * caller's arrays, would make the caller's first change in place
         * copy its whole table (copy on write: 2.7 s and 470 MB at a
         * million buckets) and then hold the old arrays alone.  compose()
         * makes it again from c->bf when template-made buckets come. */
        bucketfile_destroy(&c->conf);
        c->conf_stale = 1;
    }
    return 0;
}

/* Before an expiry: an entry that would go is checked against the table's
 * sums (a sparse node leaves out the records of a pair that serves at a
 * steady rate, so the records alone may miss it): served this period, a
 * queue or demand keep it.  O(entries), plus O(nodes) per entry about to
 * go. */
static void recheck_idle(ctrl_t *c)
{
    uint64_t idle = c->cfg.dyn_idle_periods > 0 ? (uint64_t)c->cfg.dyn_idle_periods
                                                : DYN_IDLE_PERIODS;
    for (size_t i = 0; i < dyn_count(c->dyn); i++) {
        const dyn_entry_t *e = dyn_get(c->dyn, i);
        if (e->active + idle > c->period)
            continue;
        ctrl_bucket_info_t bi;
        int b = ctrl_bucket_find(c, e->name);
        if (b >= 0 && ctrl_bucket_info(c, b, &bi) == 0 &&
            (bi.served_r + bi.served_l + bi.served_o > 0 || bi.queued > 0 || bi.demand > 0))
            dyn_touch(c->dyn, i, c->period);
    }
}

void ctrl__dyn_settle(ctrl_t *c)
{
    if (!c->conf && !c->conf_stale)
        return;
    uint64_t refused = dyn_stats(c->dyn)->refused;
    if (refused > c->dyn_refused_logged && c->period != c->dyn_period) { /* once a period at most */
        log_warn("%llu template-made bucket name(s) refused: the bound on template-made buckets "
                 "is reached (the nodes hold them at no tokens)",
                 (unsigned long long)(refused - c->dyn_refused_logged));
        c->dyn_refused_logged = refused;
    }
    if (c->started && c->period != c->dyn_period) {
        c->dyn_period = c->period;
        recheck_idle(c);
        size_t n = dyn_expire(c->dyn, c->period);
        if (n > 0) {
            log_info("%zu template-made bucket(s) idle: dropped", n);
            c->dyn_dirty = 1;
        }
    }
    if (c->dyn_dirty && compose(c) == 0)
        c->dyn_dirty = 0;
}

int ctrl_bucket_template(const ctrl_t *c, int b)
{
    if (b < 0 || (size_t)b < c->nconf || (size_t)b >= c->nb || !c->dyn_ix)
        return -1;
    const dyn_entry_t *e = dyn_get(c->dyn, (size_t)c->dyn_ix[(size_t)b - c->nconf]);
    return e ? e->rule : -1;
}

void ctrl_dyn_stats(const ctrl_t *c, ctrl_dyn_stats_t *out)
{
    const dyn_stats_t *s = dyn_stats(c->dyn);
    *out = (ctrl_dyn_stats_t){.buckets = c->nb - c->nconf, .made = s->made,
                              .expired = s->expired, .refused = s->refused,
                              .dropped = s->dropped, .r_zeroed = c->dyn_r_zeroed};
}

/* The full path for a change the in-place one does not cover (byte
 * rates, parents, template-made buckets in the table): a copy of the table with the change, ctrl_set_buckets(). */
static int change_by_rebuild(ctrl_t *c, const bucketfile_bucket_t *x, const char *remove)
{
    /* the configured table: without template-made buckets, the table */
    bucketfile_t *copy = bucketfile_dup(c->conf && !c->conf_stale ? c->conf : c->bf);
    int rc = copy ? 0 : -ENOMEM;
    if (rc == 0)
        rc = x ? bucketfile_set(copy, x, NULL) : bucketfile_remove_swap(copy, remove);
    if (rc == 0)
        rc = ctrl_set_buckets(c, copy);
    bucketfile_destroy(&copy);
    return rc;
}

/* A change in place unless the table has byte rates, parents or
 * template-made buckets: those are kept by the whole-table path. */
static int in_place(const ctrl_t *c, const bucketfile_bucket_t *x)
{
    return !c->by && !c->tree && c->nb == c->nconf && !(x && (bucketfile_has_parent(x) || bucketfile_has_bytes(x)));
}

int ctrl_set_bucket(ctrl_t *c, const bucketfile_bucket_t *x)
{
    if (bucketfile_check_bucket(x, NULL) < 0)
        return -EINVAL;
    if (ctrl_check_bucket(c, x, NULL, 0) < 0)
        return -ERANGE;
    return in_place(c, x) ? ctrl__set_bucket_here(c, x) : change_by_rebuild(c, x, NULL);
}

int ctrl_remove_bucket(ctrl_t *c, const char *name)
{
    if (bucketfile_find(c->bf, name) < 0)
        return -ENOENT;
    return in_place(c, NULL) ? ctrl__remove_bucket_here(c, name) : change_by_rebuild(c, NULL, name);
}
