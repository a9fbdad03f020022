/* metrics.c - bqos-controller's /metrics: what the loop exports, rendered on the loop thread (see metrics.h). */
#include "controller/daemon/metrics.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/mono.h"
#include "common/version.h"

int cmetrics_init(cmetrics_t *m, const ctrl_t *ctrl, const nodes_t *nodes, const timing_t *tm,
                  const pclock_t *clk, const leader_t *ld)
{
    *m = (cmetrics_t){.ctrl = ctrl, .nodes = nodes, .tm = tm, .clk = clk, .ld = ld,
                      .unused_periods = CMETRICS_UNUSED_PERIODS};
    return (m->index = strmap_new()) ? 0 : -ENOMEM;
}

static void chunk_scratch_free(cmetrics_t *m);

void cmetrics_clear(cmetrics_t *m)
{
    for (int i = 0; i < m->nout; i++) {
        history_destroy(&m->out[i].hist);
    }
    free(m->out);
    free(m->oix);
    free(m->visits);
    free(m->pend);
    free(m->qvis);
    m->qvis = NULL;
    m->nqvis = m->capqvis = 0;
    chunk_scratch_free(m);
    strmap_destroy(&m->index);
    m->out = NULL;
    m->oix = NULL;
    m->visits = NULL;
    m->pend = NULL;
    m->npend = m->cappend = 0;
    m->nout = m->capout = 0;
    m->noix = m->capoix = m->nvisits = m->capvisits = 0;
    m->synced = 0;
}

/* The outcome record of bucket `name`, made on first sight (out of the
 * table, nothing to add yet); its index in m->out, or -1 when out of
 * memory.  m->out may move. */
static int outcome_of(cmetrics_t *m, const char *name, int seed, int b)
{
    int i;
    if (strmap_find(m->index, name, strlen(name), &i) == 0)
        return i;
    if (m->nout == m->capout) {
        int cap = m->capout ? 2 * m->capout : 64;
        cmetrics_outcome_t *o = realloc(m->out, (size_t)cap * sizeof *o);
        if (!o)
            return -1;
        m->out = o;
        m->capout = cap;
    }
    cmetrics_outcome_t *o = &m->out[m->nout];
    /* The ring comes with the bucket's first period with traffic
     * (cmetrics_period_end()): a table of a million idle buckets costs no
     * 1.5 KB rings (issue 26 case 5). */
    *o = (cmetrics_outcome_t){.mark = m->periods_judged, .cmark = m->counted, .b = -1};
    if (seed == CMETRICS_OIX_Q0 || seed == CMETRICS_OIX_QR) {
        /* A bucket without a record so far: quiet since the mark, in the
         * table (its quiet periods are added at its settle). */
        o->mark = m->qmark;
        o->cmark = m->qcmark;
        o->quiet = seed == CMETRICS_OIX_QR ? HISTORY_IDLE : 0;
        o->b = b;
    }
    /* The name is the index's copy, not one of its own (32 B per bucket). */
    if (strmap_insert(m->index, name, strlen(name), m->nout) < 0)
        return -1;
    o->name = strmap_key(m->index, name, strlen(name));
    return m->nout++;
}

/* Adds to o the periods judged since its last settle, up to judged
 * period number `upto` (exclusive; `cupto` of them counted): periods
 * without traffic (its visits take the others), judged o->quiet, while it
 * was in the table.  O(1), or O(HISTORY_PERIODS) with a ring. */
static void settle_to(const cmetrics_t *m, cmetrics_outcome_t *o, uint64_t upto, uint64_t cupto)
{
    if (upto <= o->mark)
        return;
    uint64_t n = upto - o->mark;
    if (o->b >= 0) {
        if (o->quiet & HISTORY_IDLE) {
            o->idle_run += n;
            o->idle += cupto - o->cmark;
        } else {
            o->idle_run = 0;
        }
        if (o->hist) {
            uint64_t k = n < HISTORY_PERIODS ? n : HISTORY_PERIODS;
            for (uint64_t i = upto - k; i < upto; i++)
                history_push(o->hist, &(history_rec_t){
                                          .period = m->judged_period[i % HISTORY_PERIODS],
                                          .flags = o->quiet,
                                      });
        }
    }
    o->mark = upto;
    o->cmark = cupto;
}

/* o settled up to now. */
static const cmetrics_outcome_t *settled(const cmetrics_t *m, cmetrics_outcome_t *o)
{
    settle_to(m, o, m->periods_judged, m->counted);
    return o;
}

static int may_push(const cmetrics_t *m, double now)
{
    return !m->ld || leader_may_push(m->ld, now);
}

static void sync_table(cmetrics_t *m);

/* Brings m to ctrl's table before a read (what the period's end would do
 * first; the visits it queues stay for it). */
static void follow(cmetrics_t *m)
{
    if (!m->synced || m->seq != ctrl_change_seq(m->ctrl) ||
        m->noix != (size_t)ctrl_nbuckets(m->ctrl))
        sync_table(m);
}

/* The figures of table bucket b without a record, named `name`. */
static const cmetrics_outcome_t *quiet_of(const cmetrics_t *mc, size_t b, const char *name)
{
    cmetrics_t *m = (cmetrics_t *)mc;
    int r = m->oix[b] == CMETRICS_OIX_QR || m->oix[b] == CMETRICS_OIX_PR;
    m->scratch = (cmetrics_outcome_t){.name = name, .b = (int)b,
                                      .mark = m->periods_judged, .cmark = m->counted};
    if (r) {
        m->scratch.quiet = HISTORY_IDLE;
        m->scratch.idle = m->counted - m->qcmark;
        m->scratch.idle_run = m->periods_judged - m->qmark;
    }
    return &m->scratch;
}

const cmetrics_outcome_t *cmetrics_outcome(const cmetrics_t *mc, const char *name)
{
    cmetrics_t *m = (cmetrics_t *)mc;
    int i;
    if (strmap_find(m->index, name, strlen(name), &i) == 0 && m->out[i].b >= 0)
        return settled(m, &m->out[i]);
    follow(m);
    if (strmap_find(m->index, name, strlen(name), &i) == 0)
        return settled(m, &m->out[i]);
    int b = ctrl_bucket_find(m->ctrl, name);
    if (b < 0 || (size_t)b >= m->noix || m->oix[b] >= 0)
        return NULL;
    const char *const *names;
    size_t n;
    ctrl_table(m->ctrl, &names, &n);
    return quiet_of(m, (size_t)b, names[b]);
}

const cmetrics_outcome_t *cmetrics_outcome_at(const cmetrics_t *m, int i)
{
    return i >= 0 && i < m->nout ? settled(m, &m->out[i]) : NULL;
}

int cmetrics_unused(const cmetrics_t *m, const cmetrics_outcome_t *o)
{
    return m->unused_periods > 0 && o->idle_run >= m->unused_periods;
}

unsigned cmetrics_judge(const ctrl_bucket_info_t *bi, double T, double seen)
{
    unsigned flags = 0;
    double served = (double)(bi->served_r + bi->served_l + bi->served_o);
    double r = (double)bi->r_tokens, want = (double)bi->demand;
    if (bi->reservation > 0) {
        /* One token (or 1%) of slack: rates times T round.  Missed, only
         * while backlogged at the last report (a bucket that asks for less
         * has its reservation converted, docs/controller.md, and is not
         * short of it): behind the reservation's pace, or short of it even
         * with the R-tokens placed for the rest while asking for more. */
        double res = (double)bi->reservation * T * 0.99 - 1;
        if (bi->queued > 0 && (served < res * seen || (served + r < res && want > r)))
            flags |= HISTORY_RES_MISSED;
        else if (served == 0 && bi->queued == 0)
            flags |= HISTORY_IDLE; /* no demand: not "met" */
        else
            flags |= HISTORY_RES_MET;
    }
    if (bi->limit != BUCKETFILE_NO_LIMIT && bi->l_tokens != CTRL_UNLIMITED) {
        double cap = served + r + (double)bi->l_tokens;
        if (cap >= (double)bi->limit * T * 0.99 - 1 && want > r + (double)bi->l_tokens)
            flags |= HISTORY_HELD;
    }
    return flags;
}

const char *cmetrics_reason(const ctrl_bucket_info_t *bi, const pclock_t *clk)
{
    /* The reports of this round were taken at the current interval's start. */
    double seen = clk->intervals > 1 ? (double)clk->interval / clk->intervals : 0;
    unsigned f = cmetrics_judge(bi, clk->period_s, seen);
    if (f & HISTORY_HELD)
        return "held_at_limit";
    if (f & HISTORY_RES_MISSED)
        return "below_reservation";
    if (bi->queued == 0 && bi->demand <= 0)
        return "no_demand";
    return f & HISTORY_RES_MET ? "reservation_met" : "best_effort";
}

/* ---- following ctrl's table ------------------------------------------------ */

/* Queues outcome i for a visit at this period's end (once). */
static void queue_visit(cmetrics_t *m, int i)
{
    cmetrics_outcome_t *o = &m->out[i];
    if (o->visit == m->periods_judged + 1)
        return;
    if (m->nvisits == m->capvisits) {
        size_t cap = m->capvisits ? 2 * m->capvisits : 256;
        int *v = realloc(m->visits, cap * sizeof *v);
        if (!v)
            return; /* out of memory: its periods are added as quiet ones */
        m->visits = v;
        m->capvisits = cap;
    }
    o->visit = m->periods_judged + 1;
    m->visits[m->nvisits++] = i;
}

static int oix_room(cmetrics_t *m, size_t n)
{
    if (n <= m->capoix)
        return 0;
    size_t cap = m->capoix ? m->capoix : 64;
    while (cap < n)
        cap *= 2;
    int *v = realloc(m->oix, cap * sizeof *v);
    if (!v)
        return -ENOMEM;
    m->oix = v;
    m->capoix = cap;
    return 0;
}

/* Outcome of table bucket b (names: ctrl's), found or made, placed at b
 * and queued for a visit. */
static void place(cmetrics_t *m, const char *const *names, size_t b, int code)
{
    int seed = code == CMETRICS_OIX_P0 ? CMETRICS_OIX_Q0 : code == CMETRICS_OIX_PR ? CMETRICS_OIX_QR : 0;
    int i = outcome_of(m, names[b], seed, (int)b);
    m->oix[b] = i < 0 ? CMETRICS_OIX_Q0 : i; /* out of memory: reads zeros */
    if (i < 0)
        return;
    cmetrics_outcome_t *o = &m->out[i];
    settle_to(m, o, m->periods_judged, m->counted); /* out of the table: marks only */
    o->b = (int)b;
    queue_visit(m, i);
}

static int is_quiet(int code)
{
    return code == CMETRICS_OIX_Q0 || code == CMETRICS_OIX_QR;
}

static int is_pend(int code)
{
    return code == CMETRICS_OIX_NEW || code == CMETRICS_OIX_P0 || code == CMETRICS_OIX_PR;
}

/* Queues table bucket b (without a record) to be read at this period's
 * end. */
static void queue_quiet(cmetrics_t *m, int b)
{
    if (m->nqvis == m->capqvis) {
        size_t cap = m->capqvis ? 2 * m->capqvis : 256;
        int *v = realloc(m->qvis, cap * sizeof *v);
        if (!v)
            return; /* out of memory: its period is taken as quiet */
        m->qvis = v;
        m->capqvis = cap;
    }
    m->qvis[m->nqvis++] = b;
}

/* Reads ctrl's whole table: every outcome settled and out of it, then
 * every bucket's record found (and queued for a visit), or none: quiet
 * from this period on, and read at its end.  A bucket without a record
 * before loses its quiet periods (the old indexes are gone): its idle
 * counts start again here.  O(buckets). */
static void sync_all(cmetrics_t *m)
{
    for (int i = 0; i < m->nout; i++) {
        settle_to(m, &m->out[i], m->periods_judged, m->counted);
        m->out[i].b = -1;
    }
    m->dead = m->nout > 0;
    const char *const *names;
    size_t n;
    ctrl_table(m->ctrl, &names, &n);
    m->noix = 0;
    m->synced = 0;
    if (oix_room(m, n) < 0)
        return; /* nothing judged this period; tried again at the next */
    m->qmark = m->periods_judged;
    m->qcmark = m->counted;
    m->nqvis = 0;
    for (size_t b = 0; b < n; b++) {
        int i;
        if (strmap_find(m->index, names[b], strlen(names[b]), &i) == 0) {
            place(m, names, b, 0);
        } else {
            m->oix[b] = CMETRICS_OIX_Q0; /* its code at its reading */
            queue_quiet(m, (int)b);
        }
    }
    m->qall = m->periods_judged + 1;
    m->noix = n;
    m->seq = ctrl_change_seq(m->ctrl);
    m->synced = 1;
}

/* Notes that table index b holds -2 (resolved by sync_table()). */
static void pend(cmetrics_t *m, size_t b)
{
    if (m->npend == m->cappend) {
        size_t cap = m->cappend ? 2 * m->cappend : 64;
        int *v = realloc(m->pend, cap * sizeof *v);
        if (!v) {
            m->synced = 0; /* the whole table at once instead */
            return;
        }
        m->pend = v;
        m->cappend = cap;
    }
    m->pend[m->npend++] = (int)b;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* ctrl_changes() callback: one change applied to oix.  A bucket added, or
 * one without a record, is marked -2 and looked up by name afterwards
 * (resolve()); an inconsistency clears m->synced. */
static void on_change(void *arg, const ctrl_change_t *ch)
{
    cmetrics_t *m = arg;
    if (!m->synced)
        return;
    size_t b = (size_t)ch->b;
    switch (ch->kind) {
    case CTRL_CHANGE_SET:
        if (b >= m->noix)
            break;
        if (m->oix[b] >= 0) {
            queue_visit(m, m->oix[b]);
        } else {
            if (is_quiet(m->oix[b]))
                m->oix[b] = m->oix[b] == CMETRICS_OIX_QR ? CMETRICS_OIX_PR : CMETRICS_OIX_P0;
            pend(m, b);
        }
        return;
    case CTRL_CHANGE_ADD:
        if (b != m->noix || oix_room(m, b + 1) < 0)
            break;
        m->oix[m->noix++] = CMETRICS_OIX_NEW;
        pend(m, b);
        return;
    case CTRL_CHANGE_REMOVE: {
        size_t last = (size_t)ch->moved;
        if (b >= m->noix || last != m->noix - 1)
            break;
        int i = m->oix[b];
        if (i >= 0) {
            settle_to(m, &m->out[i], m->periods_judged, m->counted);
            m->out[i].b = -1; /* its periods stop; freed at the period's end */
            m->dead = 1;
        }
        if (b != last) {
            m->oix[b] = m->oix[last];
            if (m->oix[b] >= 0)
                m->out[m->oix[b]].b = (int)b;
            else if (is_pend(m->oix[b]))
                pend(m, b);
        }
        m->noix--;
        return;
    }
    }
    m->synced = 0;
}

/* Brings oix to ctrl's table: its change log if it holds every change
 * since the last time, else the whole table.  Buckets added or changed
 * are queued for a visit; outcomes are made in table order, as a pass
 * over the table would make them. */
static void sync_table(cmetrics_t *m)
{
    m->npend = 0;
    if (!m->synced || ctrl_changes(m->ctrl, m->seq, on_change, m) < 0 || !m->synced ||
        m->noix != (size_t)ctrl_nbuckets(m->ctrl)) {
        sync_all(m);
        return;
    }
    m->seq = ctrl_change_seq(m->ctrl);
    if (!m->npend)
        return;
    const char *const *names;
    size_t n;
    ctrl_table(m->ctrl, &names, &n);
    /* In table order, as a pass over the table would meet them. */
    if (m->npend > 1)
        qsort(m->pend, m->npend, sizeof *m->pend, cmp_int);
    for (size_t k = 0; k < m->npend; k++)
        if ((size_t)m->pend[k] < m->noix && is_pend(m->oix[m->pend[k]]))
            place(m, names, (size_t)m->pend[k], m->oix[m->pend[k]]);
    m->npend = 0;
}

static void touch(void *arg, int b)
{
    cmetrics_t *m = arg;
    if ((size_t)b >= m->noix)
        return;
    if (m->oix[b] >= 0)
        queue_visit(m, m->oix[b]);
    else if (is_quiet(m->oix[b]))
        queue_quiet(m, b);
}

/* Frees the chunk scratch (chunk_scratch() makes it again). */
static void chunk_scratch_free(cmetrics_t *m)
{
    free(m->vb);
    free(m->vinfo);
    ctrl_binfo_destroy(&m->bscratch);
    m->vb = NULL;
    m->vinfo = NULL;
    m->capvinfo = 0;
}

/* Makes the chunk scratch hold n (<= CMETRICS_CHUNK) buckets.  Returns
 * 0, or -ENOMEM: the visits then read one bucket at a time. */
static int chunk_scratch(cmetrics_t *m, size_t n)
{
    if (!m->bscratch && !(m->bscratch = ctrl_binfo_new()))
        return -ENOMEM;
    if (m->capvinfo >= n)
        return 0;
    size_t cap = n + n / 4 + 16 < CMETRICS_CHUNK ? n + n / 4 + 16 : CMETRICS_CHUNK;
    int *vb = realloc(m->vb, cap * sizeof *vb);
    if (!vb)
        return -ENOMEM;
    m->vb = vb;
    ctrl_bucket_info_t *vi = realloc(m->vinfo, cap * sizeof *vi);
    if (!vi)
        return -ENOMEM;
    m->vinfo = vi;
    m->capvinfo = cap;
    return 0;
}

static void judge_rest(cmetrics_t *m, cmetrics_outcome_t *o, const ctrl_bucket_info_t *bip,
                       int count, uint64_t period, double seen);

/* Judges the period (judged period number J, C of them counted; `count`:
 * this one counts) of the n outcomes vis[] (n <= CMETRICS_CHUNK): their
 * figures read in one call (ctrl_bucket_info_many()), or one at a time
 * without the scratch or when that call fails. */
static void visit_chunk(cmetrics_t *m, const int *vis, size_t n, uint64_t J, uint64_t C,
                        int count, uint64_t period, double seen)
{
    int batch = chunk_scratch(m, n) == 0;
    for (size_t v = 0; v < n; v++) {
        cmetrics_outcome_t *o = &m->out[vis[v]];
        o->visit = 0;
        if (batch)
            m->vb[v] = o->b;
        if (o->b < 0)
            continue; /* removed since it was queued */
        settle_to(m, o, J, C);
        /* This period is taken here, judged or not. */
        o->mark = J + 1;
        o->cmark = C + (count != 0);
    }
    if (batch && ctrl_bucket_info_many(m->ctrl, m->bscratch, m->vb, n, m->vinfo) < 0)
        batch = 0;
    for (size_t v = 0; v < n; v++) {
        cmetrics_outcome_t *o = &m->out[vis[v]];
        ctrl_bucket_info_t one;
        if (o->b < 0)
            continue;
        if (batch ? !m->vinfo[v].name : ctrl_bucket_info(m->ctrl, o->b, &one) < 0)
            continue;
        judge_rest(m, o, batch ? &m->vinfo[v] : &one, count, period, seen);
    }
}

/* Judges outcome o's period (its marks already moved past it) on bi. */
static void judge_rest(cmetrics_t *m, cmetrics_outcome_t *o, const ctrl_bucket_info_t *bip,
                       int count, uint64_t period, double seen)
{
    const ctrl_bucket_info_t bi = *bip;
    m->visited++;
    unsigned f = cmetrics_judge(&bi, m->clk->period_s, seen);
    if (count) {
        o->met += (f & HISTORY_RES_MET) != 0;
        o->missed += (f & HISTORY_RES_MISSED) != 0;
        o->held += (f & HISTORY_HELD) != 0;
        o->idle += (f & HISTORY_IDLE) != 0;
    }
    /* The judgement of its periods without traffic, until the next
     * visit: this one's with nothing served, queued nor asked for. */
    ctrl_bucket_info_t q = bi;
    q.served_r = q.served_l = q.served_o = 0;
    q.queued = 0;
    q.demand = 0;
    o->quiet = (uint8_t)cmetrics_judge(&q, m->clk->period_s, seen);
    /* The idle run counts before the no-ring skip below: a bucket
     * that never had traffic is exactly the unused reservation. */
    o->idle_run = f & HISTORY_IDLE ? o->idle_run + 1 : 0;
    uint64_t served = bi.served_r + bi.served_l + bi.served_o;
    if (!o->hist && (served == 0 && bi.queued == 0 && bi.demand <= 0))
        return; /* never had traffic: no ring yet */
    if (!o->hist && !(o->hist = history_new()))
        return;
    history_push(o->hist, &(history_rec_t){
                              .period = period,
                              .served = served,
                              .queued = bi.queued > UINT32_MAX ? UINT32_MAX : (uint32_t)bi.queued,
                              .flags = f,
                          });
}

/* Reads the n buckets without a record vis[] (table indexes, sorted, n
 * <= CMETRICS_CHUNK): one with served, queued or demand gets its record
 * (its quiet periods up to J added) and is judged as visit_chunk() does;
 * one without keeps none, its code set by its reservation. */
static void quiet_chunk(cmetrics_t *m, const int *vis, size_t n, uint64_t J, uint64_t C,
                        int count, uint64_t period, double seen)
{
    int batch = chunk_scratch(m, n) == 0;
    if (batch) {
        memcpy(m->vb, vis, n * sizeof *vis);
        if (ctrl_bucket_info_many(m->ctrl, m->bscratch, m->vb, n, m->vinfo) < 0)
            batch = 0;
    }
    for (size_t v = 0; v < n; v++) {
        int b = vis[v];
        ctrl_bucket_info_t one;
        if ((v > 0 && vis[v - 1] == b) || (size_t)b >= m->noix || !is_quiet(m->oix[b]))
            continue;
        if (batch ? !m->vinfo[v].name : ctrl_bucket_info(m->ctrl, b, &one) < 0)
            continue;
        const ctrl_bucket_info_t *bi = batch ? &m->vinfo[v] : &one;
        if (bi->served_r + bi->served_l + bi->served_o == 0 && bi->queued == 0 &&
            bi->demand <= 0) {
            m->visited++;
            m->oix[b] = bi->reservation > 0 ? CMETRICS_OIX_QR : CMETRICS_OIX_Q0;
            continue;
        }
        int i = outcome_of(m, bi->name, m->oix[b], b);
        if (i < 0)
            continue;
        m->oix[b] = i;
        cmetrics_outcome_t *o = &m->out[i];
        o->b = b;
        settle_to(m, o, J, C);
        o->mark = J + 1;
        o->cmark = C + (count != 0);
        judge_rest(m, o, bi, count, period, seen);
    }
}

/* Frees the records of buckets that left the table, the others moved
 * down (their index entries and oix follow).  O(records), in periods
 * with a removal only. */
static void compact(cmetrics_t *m)
{
    int j = 0;
    for (int i = 0; i < m->nout; i++) {
        cmetrics_outcome_t *o = &m->out[i];
        if (o->b < 0 || (size_t)o->b >= m->noix || m->oix[o->b] != i) {
            history_destroy(&o->hist);
            strmap_remove(m->index, o->name, strlen(o->name), NULL);
            continue;
        }
        if (j != i) {
            m->out[j] = *o;
            strmap_set(m->index, m->out[j].name, strlen(m->out[j].name), j);
            m->oix[m->out[j].b] = j;
        }
        j++;
    }
    m->nout = j;
    m->dead = 0;
}

/* Gives back the room a big period took (the whole-table read's), when
 * this one used under a quarter of it. */
static void shrink(cmetrics_t *m, size_t visits, size_t quiet, size_t chunk)
{
    if (m->capvisits > 4096 && visits < m->capvisits / 4) {
        free(m->visits);
        m->visits = NULL;
        m->capvisits = 0;
    }
    if (m->capqvis > 4096 && quiet < m->capqvis / 4) {
        free(m->qvis);
        m->qvis = NULL;
        m->capqvis = 0;
    }
    if (m->capvinfo > 4096 && chunk < m->capvinfo / 4)
        chunk_scratch_free(m);
}

void cmetrics_period_end(cmetrics_t *m, double now)
{
    /* A standby judges too (it gets the same reports and computes the same
     * rounds), so that its history holds the periods before a takeover;
     * only the leader counts, so that an alert fires once per cluster. */
    uint64_t period = ctrl_period(m->ctrl);
    int judge = m->started && m->tm->nsplits > m->split_rounds &&
                !(m->periods_judged && period == m->last_period); /* a clock re-adopted */
    int count = judge && may_push(m, now);
    m->started = 1;
    m->split_rounds = m->tm->nsplits;
    if (!judge)
        return;
    uint64_t J = m->periods_judged, C = m->counted;
    sync_table(m); /* visits queued since (a read's sync) stay */
    /* Every bucket with traffic; with nested buckets (a parent's figures
     * are its children's) every bucket, as without ctrl's list. */
    if (m->full || ctrl_nested(m->ctrl) || ctrl_touched_buckets(m->ctrl, touch, m) < 0)
        for (size_t b = 0; b < m->noix; b++) {
            if (m->oix[b] >= 0)
                queue_visit(m, m->oix[b]);
            else if (is_quiet(m->oix[b]) && m->qall != J + 1)
                queue_quiet(m, (int)b);
        }
    /* The last reports of a period are taken at its last interval's start:
     * the served counters cover (K - 1) / K of it. */
    double seen = m->clk->intervals > 1 ? (double)(m->clk->intervals - 1) / m->clk->intervals : 0;
    m->visited = 0;
    for (size_t v0 = 0; v0 < m->nvisits; v0 += CMETRICS_CHUNK) {
        size_t n = m->nvisits - v0 < CMETRICS_CHUNK ? m->nvisits - v0 : CMETRICS_CHUNK;
        visit_chunk(m, m->visits + v0, n, J, C, count, period, seen);
    }
    /* In table order, as a pass over the table makes records. */
    if (m->nqvis > 1) /* none: qvis may be NULL */
        qsort(m->qvis, m->nqvis, sizeof *m->qvis, cmp_int);
    for (size_t v0 = 0; v0 < m->nqvis; v0 += CMETRICS_CHUNK) {
        size_t n = m->nqvis - v0 < CMETRICS_CHUNK ? m->nqvis - v0 : CMETRICS_CHUNK;
        /* a bucket touched twice: its repeat is skipped (in a chunk) or
         * finds a record or its code set (across chunks) */
        quiet_chunk(m, m->qvis + v0, n, J, C, count, period, seen);
    }
    size_t nv = m->nvisits, nq = m->nqvis;
    size_t most = (nv > nq ? nv : nq) < CMETRICS_CHUNK ? (nv > nq ? nv : nq) : CMETRICS_CHUNK;
    m->nvisits = 0;
    m->nqvis = 0;
    if (m->dead)
        compact(m);
    shrink(m, nv, nq, most);
    m->judged_period[J % HISTORY_PERIODS] = period;
    m->periods_judged = J + 1;
    m->counted = C + (count != 0);
    m->last_period = period;
}

/* ---- rendering ----------------------------------------------------------- */

static void counter(promtext_t *p, const char *name, const char *help, uint64_t v)
{
    promtext_family(p, name, PROMTEXT_COUNTER, help);
    promtext_u64(p, NULL, 0, v);
}

static void gauge(promtext_t *p, const char *name, const char *help, double v)
{
    promtext_family(p, name, PROMTEXT_GAUGE, help);
    promtext_value(p, NULL, 0, v);
}

/* One family with a sample per round phase. */
static void phases(promtext_t *p, const char *name, promtext_type_t type, const char *help,
                   const split_t *s)
{
    const struct {
        const char *phase;
        double v;
    } ph[] = {{"receive", s->receive}, {"decode", s->decode}, {"pshift", s->pshift},
              {"encode", s->encode}, {"send", s->send}};
    promtext_family(p, name, type, help);
    for (size_t i = 0; i < sizeof ph / sizeof ph[0]; i++)
        promtext_value(p, &(promtext_label_t){"phase", ph[i].phase}, 1, ph[i].v);
}

/* One histogram family without labels, of TIMING_ROUND_BOUNDS. */
static void histogram(promtext_t *p, const char *name, const char *help, const timing_hist_t *h)
{
    static const double bounds[TIMING_NBOUNDS] = TIMING_ROUND_BOUNDS;
    promtext_family(p, name, PROMTEXT_HISTOGRAM, help);
    promtext_histogram(p, NULL, 0, bounds, TIMING_NBOUNDS, h->counts, h->sum);
}

/* Refusals (auth.c), implausible values (plausible.c) and reloads: what
 * else only `bqos-ctl status` shows. */
static void render_security(const cmetrics_t *m, promtext_t *p)
{
    const ctrl_stats_t *cs = ctrl_stats(m->ctrl);
    promtext_family(p, "bqos_controller_auth_refusals_total", PROMTEXT_COUNTER,
                    "CURVE connections and messages refused, by reason (0 without CURVE).");
    for (int r = 0; r < AUTH__NREASONS; r++)
        promtext_u64(p, &(promtext_label_t){"reason", auth_reason_str((auth_reason_t)r)}, 1,
                     m->auth ? m->auth->refused[r] : 0);
    promtext_family(p, "bqos_controller_implausible_reports_total", PROMTEXT_COUNTER,
                    "Values in node messages the controller did not believe (clamped), by reason.");
    for (int r = 0; r < CTRL_IMPL__COUNT; r++)
        promtext_u64(p, &(promtext_label_t){"reason", ctrl_impl_str((ctrl_impl_t)r)}, 1,
                     cs->implausible[r]);
    promtext_family(p, "bqos_controller_reloads_total", PROMTEXT_COUNTER,
                    "Configuration reloads (SIGHUP, admin reload) by result: ok, or error "
                    "(the old configuration stays).");
    promtext_u64(p, &(promtext_label_t){"result", "ok"}, 1, m->reloads.ok);
    promtext_u64(p, &(promtext_label_t){"result", "error"}, 1, m->reloads.error);
}

/* Controller shards (issue 30): the root exchange's counters, this
 * shard's slices live or lapsed, and at a root each shard's needs fresh or
 * not.  Nothing without an exchange (--root, --root-listen). */
static void render_root(const cmetrics_t *m, promtext_t *p, double now)
{
    if (!m->rx)
        return;
    rootx_stats_t rs;
    rootx_view_t v;
    rootx_stats(m->rx, &rs);
    rootx_view(m->rx, now, &v);
    const struct {
        const char *name, *help;
        uint64_t v;
    } c[] = {
        {"bqos_controller_root_needs_sent_total",
         "Needs messages this shard sent to the root (a leader's, after each computed round).",
         rs.needs_sent},
        {"bqos_controller_root_needs_taken_total",
         "Needs messages the root took from the shards (at a root candidate).", rs.needs_taken},
        {"bqos_controller_root_slices_sent_total",
         "Slices messages the root sent to shard leaders and standbys.", rs.slices_sent},
        {"bqos_controller_root_slices_taken_total",
         "Slices messages this shard took from the root.", rs.slices_taken},
        {"bqos_controller_root_messages_dropped_total",
         "Root exchange messages refused: garbage, out of bounds, an old epoch, a key that is "
         "not an admin's.", rs.dropped},
        {"bqos_controller_root_steps_total", "Root steps run (shard 0's leader).", rs.steps},
        {"bqos_controller_root_steps_failed_total",
         "Root steps that failed (no slices sent: the shards keep theirs for their lease).",
         rs.step_failed},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        promtext_family(p, c[i].name, PROMTEXT_COUNTER, c[i].help);
        promtext_u64(p, NULL, 0, c[i].v);
    }
    gauge(p, "bqos_controller_root_epoch",
          "The highest root epoch (shard 0's leader epoch) whose slices this shard took; 0: none.",
          (double)rs.root_epoch);
    promtext_family(p, "bqos_controller_shard_slice_nodes", PROMTEXT_GAUGE,
                    "Nodes whose slice from the root this shard holds, by state: live (within "
                    "its lease), lapsed (the smaller of 1/K and the lapsed slice is used).");
    promtext_u64(p, &(promtext_label_t){"state", "live"}, 1, (uint64_t)v.live);
    promtext_u64(p, &(promtext_label_t){"state", "lapsed"}, 1, (uint64_t)v.lapsed);
    if (!v.root)
        return;
    promtext_family(p, "bqos_controller_root_shard_live", PROMTEXT_GAUGE,
                    "At a root candidate: 1 if the shard's needs arrived within the last two "
                    "intervals (the root step sends it slices), else 0 (lapsed or never).");
    for (int s = 0; s < v.shards && s < 256; s++) {
        char sh[8];
        snprintf(sh, sizeof sh, "%d", s);
        promtext_u64(p, &(promtext_label_t){"shard", sh}, 1, v.fresh[s] > 0);
    }
}

/* Template-made buckets held cluster-wide (ctrl_dyn_stats(), issue 27). */
static void render_templates(const cmetrics_t *m, promtext_t *p)
{
    ctrl_dyn_stats_t ds;
    ctrl_dyn_stats(m->ctrl, &ds);
    gauge(p, "bqos_controller_template_buckets",
          "Buckets made by template rules that the controller places (in its table now).",
          (double)ds.buckets);
    promtext_family(p, "bqos_controller_template_buckets_total", PROMTEXT_COUNTER,
                    "Template-made buckets by event: made, expired (idle), dropped (rules "
                    "change), refused (past the bounds: the nodes hold them at no tokens), "
                    "r_zeroed (their R did not fit the capacity: held at R 0).");
    const struct {
        const char *ev;
        uint64_t v;
    } ev[] = {{"made", ds.made}, {"expired", ds.expired}, {"dropped", ds.dropped},
              {"refused", ds.refused}, {"r_zeroed", ds.r_zeroed}};
    for (size_t i = 0; i < sizeof ev / sizeof ev[0]; i++)
        promtext_u64(p, &(promtext_label_t){"event", ev[i].ev}, 1, ev[i].v);
}

static void render_controller(const cmetrics_t *m, promtext_t *p, double now)
{
    const ctrl_stats_t *cs = ctrl_stats(m->ctrl);
    const nodes_t *ns = m->nodes;
    promtext_family(p, "bqos_controller_info", PROMTEXT_GAUGE, "Always 1; the version as a label.");
    promtext_value(p, &(promtext_label_t){"version", BQOS_VERSION}, 1, 1);
    gauge(p, "bqos_controller_leader", "1 while this controller may send to the nodes (alone, or the leader).",
          may_push(m, now));
    gauge(p, "bqos_controller_period", "The current QoS period number.", (double)m->clk->period);
    gauge(p, "bqos_controller_period_seconds", "The QoS period length.", m->clk->period_s);
    counter(p, "bqos_controller_rounds_total", "Rounds closed (one per redistribution interval).",
            m->tm->nsplits);
    counter(p, "bqos_controller_rounds_computed_total", "Rounds whose tokens were recomputed.",
            cs->computed);
    counter(p, "bqos_controller_rounds_skipped_total",
            "Rounds skipped (no estimate moved beyond --skip-threshold): heartbeats only.",
            cs->skipped);
    counter(p, "bqos_controller_rounds_late_total",
            "Rounds begun more than half an interval after their boundary (host busy or paused).",
            m->tm->late_rounds);
    phases(p, "bqos_controller_round_seconds_total", PROMTEXT_COUNTER,
           "Wall time of the closed rounds by phase.", &m->tm->total);
    phases(p, "bqos_controller_last_round_seconds", PROMTEXT_GAUGE,
           "Wall time of the last closed round by phase.", &m->tm->last);
    histogram(p, "bqos_controller_round_duration_seconds",
              "Closed rounds' time from the close to the push sent: compute, encode, send.",
              &m->tm->round);
    histogram(p, "bqos_controller_round_compute_seconds",
              "Closed rounds' token computation alone.", &m->tm->compute);
    counter(p, "bqos_controller_messages_total", "Node messages accepted.", ns->pst.ok);
    promtext_family(p, "bqos_controller_messages_rejected_total", PROMTEXT_COUNTER,
                    "Node messages rejected, by reason.");
    for (int r = 1; r < PROTO_E__COUNT; r++)
        promtext_u64(p, &(promtext_label_t){"reason", proto_reason_str((proto_reason_t)r)}, 1,
                     ns->pst.rejected[r]);
    counter(p, "bqos_controller_reports_stale_total", "Reports of another period than the current.",
            cs->stale_reports);
    counter(p, "bqos_controller_sends_failed_total", "Messages to nodes dropped (queue full, node gone).",
            ns->send_failed);
    counter(p, "bqos_controller_sends_fenced_total", "Messages not sent: not the leader.", ns->fenced);
    counter(p, "bqos_controller_nodes_marked_down_total", "Times a node was marked down.",
            cs->nodes_marked_down);
    counter(p, "bqos_controller_duplicate_names_total",
            "Hellos refused: a node of that name is up elsewhere.", cs->duplicate_names);
    counter(p, "bqos_controller_periods_judged_total",
            "Periods judged (kept in the history; a standby judges too).", m->periods_judged);
}

static void render_nodes(const cmetrics_t *m, promtext_t *p, double now)
{
    int n = ctrl_nnodes(m->ctrl);
    static const struct {
        const char *name, *help;
    } fam[] = {
        {"bqos_node_up", "1 while the controller counts the node up."},
        {"bqos_node_capacity_ios_per_second", "The controller's capacity estimate of the node."},
        {"bqos_node_profile_ios_per_second", "The node's capacity profile (its hello, or --capacity)."},
        {"bqos_node_last_message_age_seconds", "Seconds since the node's last message (NaN: never)."},
        {"bqos_node_fallback", "1 while the node's last report says it runs in fallback."},
        {"bqos_node_fallbacks_reported_total",
         "The node's fallbacks since its start, as its last report said."},
    };
    for (size_t f = 0; f < sizeof fam / sizeof fam[0]; f++) {
        promtext_family(p, fam[f].name, f == 5 ? PROMTEXT_COUNTER : PROMTEXT_GAUGE, fam[f].help);
        for (int i = 0; i < n; i++) {
            ctrl_node_info_t ni;
            if (ctrl_node_info(m->ctrl, i, &ni) < 0)
                continue;
            double last = nodes_last_msg(m->nodes, i);
            uint64_t falls = 0;
            int fb = nodes_fallback(m->nodes, i, &falls);
            double v = f == 0 ? ni.up : f == 1 ? ni.capacity : f == 2 ? ni.profile
                     : f == 3 ? (last > 0 ? now - last : 0.0 / 0.0)
                     : f == 4 ? fb != 0 : (double)falls;
            promtext_value(p, &(promtext_label_t){"node", ni.name}, 1, v);
        }
    }
}

/* Nested buckets (issue 28), for the buckets in a tree only (nothing,
 * and no pass over the nodes, without parents): each level's service this
 * period (a parent's: its children's sum, as the status shows it), and 1
 * per bucket that has a parent, labelled with both names. */
static void render_parents(const cmetrics_t *m, promtext_t *p, int n)
{
    for (int f = 0; f < 2; f++) {
        int any = 0;
        for (int b = 0; b < n; b++) {
            const char *parent;
            ctrl_bucket_info_t bi;
            if (!ctrl_bucket_nesting(m->ctrl, b, &parent, NULL) || (f == 1 && !parent) ||
                ctrl_bucket_info(m->ctrl, b, &bi) < 0)
                continue;
            if (!any++)
                promtext_family(p, f ? "bqos_bucket_parent" : "bqos_bucket_served_ios",
                                PROMTEXT_GAUGE,
                                f ? "1: the bucket is nested under the parent (its service "
                                    "counts against the parent's limit)."
                                  : "Nested buckets: IOs served this period over every node "
                                    "(a parent's: the sum of its children's).");
            if (f) {
                promtext_label_t l[] = {{"bucket", bi.name}, {"parent", parent}};
                promtext_u64(p, l, 2, 1);
            } else {
                promtext_value(p, &(promtext_label_t){"bucket", bi.name}, 1,
                               (double)(bi.served_r + bi.served_l + bi.served_o));
            }
        }
    }
}

/* Row i of the per-bucket outcome families: the records in the table
 * (i < m->nout), then the table's buckets without one (zeros, or idle
 * periods since the mark); NULL: none (a removed bucket's record). */
static const cmetrics_outcome_t *outcome_row(const cmetrics_t *m, const char *const *names,
                                             size_t nt, int i)
{
    if (i < m->nout)
        return m->out[i].b >= 0 ? &m->out[i] : NULL;
    size_t b = (size_t)(i - m->nout);
    if (b >= nt || m->oix[b] >= 0)
        return NULL;
    return quiet_of(m, b, names[b]);
}

static void render_buckets(const cmetrics_t *m, promtext_t *p)
{
    int n = ctrl_nbuckets(m->ctrl);
    static const struct {
        const char *name, *help;
    } fam[] = {
        {"bqos_bucket_reservation_ios_per_second", "The bucket's reservation."},
        {"bqos_bucket_limit_ios_per_second", "The bucket's limit (absent: no limit)."},
        {"bqos_bucket_demand_ios", "The controller's demand estimate for the rest of the period."},
        {"bqos_bucket_queued", "Requests queued at the up nodes, as last reported."},
    };
    for (size_t f = 0; f < sizeof fam / sizeof fam[0]; f++) {
        promtext_family(p, fam[f].name, PROMTEXT_GAUGE, fam[f].help);
        for (int b = 0; b < n; b++) {
            ctrl_bucket_info_t bi;
            if (ctrl_bucket_info(m->ctrl, b, &bi) < 0 ||
                (f == 1 && bi.limit == BUCKETFILE_NO_LIMIT))
                continue;
            double v = f == 0 ? (double)bi.reservation : f == 1 ? (double)bi.limit
                     : f == 2 ? (double)bi.demand : (double)bi.queued;
            promtext_value(p, &(promtext_label_t){"bucket", bi.name}, 1, v);
        }
    }
    render_parents(m, p, n);
    promtext_family(p, "bqos_bucket_periods_total", PROMTEXT_COUNTER,
                    "Periods by outcome: reservation_met, reservation_missed, held_at_limit, "
                    "idle (a reservation and no demand); counted only while this controller "
                    "leads.");
    const char *const *names;
    size_t nt;
    ctrl_table(m->ctrl, &names, &nt);
    for (int i = 0; i < m->nout + (int)m->noix; i++) {
        const cmetrics_outcome_t *o = outcome_row(m, names, nt, i);
        if (!o)
            continue;
        const char *what[] = {"reservation_met", "reservation_missed", "held_at_limit", "idle"};
        const uint64_t v[] = {o->met, o->missed, o->held, o->idle};
        for (int k = 0; k < 4; k++) {
            promtext_label_t l[] = {{"bucket", o->name}, {"outcome", what[k]}};
            promtext_u64(p, l, 2, v[k]);
        }
    }
}

/* Unused reservations (issue 28): each judged bucket's idle periods in a
 * row, and 1 once they reach --reservation-unused-periods. */
static void render_unused(const cmetrics_t *m, promtext_t *p)
{
    const char *const *names;
    size_t nt;
    ctrl_table(m->ctrl, &names, &nt);
    promtext_family(p, "bqos_bucket_reservation_idle_periods", PROMTEXT_GAUGE,
                    "Periods in a row judged idle: a reservation and no demand.");
    for (int i = 0; i < m->nout + (int)m->noix; i++) {
        const cmetrics_outcome_t *o = outcome_row(m, names, nt, i);
        if (o)
            promtext_u64(p, &(promtext_label_t){"bucket", o->name}, 1, o->idle_run);
    }
    promtext_family(p, "bqos_bucket_reservation_unused", PROMTEXT_GAUGE,
                    "1 once the bucket's reservation went unused (idle) for "
                    "--reservation-unused-periods periods in a row.");
    for (int i = 0; i < m->nout + (int)m->noix; i++) {
        const cmetrics_outcome_t *o = outcome_row(m, names, nt, i);
        if (o)
            promtext_u64(p, &(promtext_label_t){"bucket", o->name}, 1,
                         (uint64_t)cmetrics_unused(m, o));
    }
}

void cmetrics_render(void *arg, promtext_t *out)
{
    cmetrics_t *m = arg;
    follow(m);
    for (int i = 0; i < m->nout; i++)
        settled(m, &m->out[i]);
    double now = mono_now();
    render_controller(m, out, now);
    render_security(m, out);
    render_root(m, out, now);
    render_templates(m, out);
    render_nodes(m, out, now);
    render_buckets(m, out);
    render_unused(m, out);
}
