/* metrics.h - bqos-controller's /metrics (--metrics-listen): nodes, capacity estimates, round time by phase and its histograms, skipped and late rounds, rejected messages by reason, CURVE refusals, implausible reports and reloads, and every bucket's period outcomes, rendered on the loop thread (common/metricsd).
 *
 * A cmetrics_t belongs to the loop thread, as do the ctrl_t, node endpoint,
 * timing and clock it borrows; nothing locks.  The HTTP side is
 * common/metricsd's thread, which never touches any of this. */
#ifndef BQOS_CMETRICS_H
#define BQOS_CMETRICS_H

#include <stdint.h>

#include "common/promtext.h"
#include "common/strmap.h"
#include "controller/ctrl.h"
#include "controller/daemon/auth.h"
#include "controller/daemon/clock.h"
#include "controller/daemon/history.h"
#include "controller/daemon/leader.h"
#include "controller/daemon/nodes.h"
#include "controller/daemon/rootx.h"
#include "controller/daemon/timing.h"

/* One bucket's period outcomes, cumulative since the start (counted while
 * leading), and the last HISTORY_PERIODS of them (judged, leading or not).
 *
 * A bucket with nothing served, queued nor asked for in a period (no
 * active pair on any node, ctrl_touched_buckets()) is judged the same way
 * every such period: `quiet` (HISTORY_IDLE if it has a reservation, else
 * nothing).  Those periods are not visited: they are added when the
 * record is next read or visited (cmetrics_outcome(), cmetrics_outcome_at(),
 * the rendering, a period in which it has traffic or its row changes), so
 * a table of idle buckets costs nothing per period.  Read the record
 * through those functions, never m->out[] directly. */
typedef struct {
    const char *name;          /* the index's copy (strmap_key()) */
    uint64_t met, missed, held;
    uint64_t idle;             /* periods judged idle, counted as met is */
    uint64_t idle_run;         /* periods judged idle in a row, up to the
                                  last judged (leading or not) */
    history_t *hist;           /* owned */
    /* what is not added yet (cmetrics_t.judged and .counted at the
     * record's last settle) */
    uint64_t mark, cmark;
    uint64_t visit;            /* judged + 1 while queued for a visit */
    int b;                     /* its index in ctrl's table, -1: not in it
                                  (removed: its periods stop) */
    uint8_t quiet;             /* the flags of a period without traffic */
} cmetrics_outcome_t;

/* Reloads of the configuration (SIGHUP, admin "reload"), counted by their
 * callers: ok, or a file that did not load or was not admitted (the old
 * configuration stays).  A standby's refused "reload" (not_leader) is
 * neither. */
typedef struct {
    uint64_t ok, error;
} cmetrics_reloads_t;

typedef struct {
    const ctrl_t *ctrl;        /* borrowed, as the rest */
    const nodes_t *nodes;
    const timing_t *tm;
    const pclock_t *clk;
    const leader_t *ld;        /* NULL: alone (always leads) */
    const auth_t *auth;        /* its refusal counters; NULL (set after
                                  cmetrics_init): no CURVE, zeros */
    const rootx_t *rx;         /* controller shards' root exchange (set
                                  after cmetrics_init); NULL: none, and no
                                  root families */
    cmetrics_reloads_t reloads; /* counted by main.c and admin.c */
    strmap_t *index;           /* bucket name -> index in out[] */
    cmetrics_outcome_t *out;
    int nout, capout;
    /* ctrl's table as the outcomes know it: oix[b] the outcome of table
     * bucket b (-1: none, -2: to look up by name), following ctrl's
     * change log (ctrl_changes()) from number `seq`; synced 0: read the
     * whole table at the next period's end. */
    int *oix;                  /* >= 0: a record; CMETRICS_OIX_*: none */
    size_t noix, capoix;
    /* Buckets without a record (issue 26: records only for buckets that
     * had traffic or a row change): every period of theirs since the
     * last whole-table read (judged period number qmark, qcmark of them
     * counted) was quiet: idle if they have a reservation
     * (CMETRICS_OIX_QR), else nothing (CMETRICS_OIX_Q0).  qvis: those to
     * read at this period's end (table indexes: traffic makes a record);
     * qall: judged + 1 once all of them are queued this period. */
    uint64_t qmark, qcmark, qall;
    int *qvis;
    size_t nqvis, capqvis;
    int dead;                  /* a record left the table: freed at the
                                  period's end */
    cmetrics_outcome_t scratch; /* cmetrics_outcome() of a bucket without
                                  a record */
    uint64_t seq;
    int synced;
    int *pend;                 /* table indexes that may hold -2 */
    size_t npend, cappend;
    int *visits;               /* outcomes to visit at this period's end */
    size_t nvisits, capvisits;
    /* A period's visits read ctrl in chunks of CMETRICS_CHUNK buckets,
     * each one pass over the nodes' active pairs
     * (ctrl_bucket_info_many()): the chunk's table indexes and figures
     * (room for capvinfo, grown to the visits up to a chunk), and ctrl's
     * scratch; made at the first visit (out of memory: one
     * ctrl_bucket_info() per bucket, as before). */
    ctrl_binfo_t *bscratch;
    int *vb;
    ctrl_bucket_info_t *vinfo;
    size_t capvinfo;
    int full;                  /* visit every bucket every period, as before
                                  quiet periods were added lazily (the
                                  reference the tests compare with) */
    uint64_t visited;          /* buckets visited (ctrl_bucket_info) at the
                                  last period's end */
    uint64_t counted;          /* periods judged and counted (leading) */
    uint64_t judged_period[HISTORY_PERIODS]; /* period of judged period
                                  number k (0-based) at [k % HISTORY_PERIODS] */
    uint64_t periods_judged;   /* periods judged (history pushes) */
    uint64_t last_period;      /* the period judged last (judged once) */
    uint64_t split_rounds;     /* tm->nsplits when the current period began */
    int started;               /* a period began while we watched */
    uint64_t unused_periods;   /* idle_run from which a reservation counts
                                  as unused (CMETRICS_UNUSED_PERIODS) */
} cmetrics_t;

/* oix codes of a table bucket without a record: quiet (no reservation,
 * or one), to look up by name (added), or changed (and quiet before). */
#define CMETRICS_OIX_Q0 (-1)
#define CMETRICS_OIX_NEW (-2)
#define CMETRICS_OIX_QR (-3)
#define CMETRICS_OIX_P0 (-4)
#define CMETRICS_OIX_PR (-5)

/* Buckets whose figures one pass over the active pairs reads: bounds the
 * scratch (about 170 bytes each, 11 MB) where a million buckets have
 * traffic. */
#define CMETRICS_CHUNK 65536

/* Default of cmetrics_t.unused_periods (--reservation-unused-periods). */
#define CMETRICS_UNUSED_PERIODS 10

/* Nonzero if outcome o's reservation is unused: its last
 * m->unused_periods judged periods (or more) in a row were idle.  Loop
 * thread. */
int cmetrics_unused(const cmetrics_t *m, const cmetrics_outcome_t *o);

/* Sets m up around what it borrows (ld NULL alone).  Returns 0 or -ENOMEM. */
int cmetrics_init(cmetrics_t *m, const ctrl_t *ctrl, const nodes_t *nodes, const timing_t *tm,
                  const pclock_t *clk, const leader_t *ld);

/* Frees what m owns.  Accepts a zeroed m. */
void cmetrics_clear(cmetrics_t *m);

/* Judges bucket `bi` on its period so far (the rules of
 * cmetrics_period_end), its served counters covering the share `seen` (0..1)
 * of the period of `period_s` seconds.  Returns HISTORY_RES_MET,
 * HISTORY_RES_MISSED or HISTORY_IDLE (reservation > 0 only; idle: nothing
 * served nor queued, no demand), or'd with HISTORY_HELD.  Any
 * thread (pure). */
unsigned cmetrics_judge(const ctrl_bucket_info_t *bi, double period_s, double seen);

/* Why bucket `bi` waits (or does not) now, judged as cmetrics_judge() with
 * the served counters of the current interval's reports: "held_at_limit",
 * "below_reservation" (missed: behind its reservation's pace while
 * requests queue), "no_demand" (nothing queued nor expected),
 * "reservation_met", or "best_effort" (no reservation, not held: it gets
 * spare capacity only).  A static string.  Loop thread. */
const char *cmetrics_reason(const ctrl_bucket_info_t *bi, const pclock_t *clk);

/* Bucket `name`'s outcomes, or NULL if it is neither in the table nor
 * has a record, with its quiet periods added (the record changes: m's
 * outcomes are its own, not the caller's to keep constant).  Valid until
 * the next cmetrics_period_end(); a table bucket that never had traffic
 * nor a row change has no record (issue 26): its figures (idle periods
 * since the last whole-table read if it has a reservation, else zeros;
 * no history) are in a scratch record valid until the next call or table
 * change.  Brings m to ctrl's table first.  Loop thread. */
const cmetrics_outcome_t *cmetrics_outcome(const cmetrics_t *m, const char *name);

/* The i-th outcome record (0 <= i < m->nout, in the order they were
 * made: buckets with traffic or a row change; a removed bucket's is freed
 * at the period's end), as cmetrics_outcome().  Loop thread. */
const cmetrics_outcome_t *cmetrics_outcome_at(const cmetrics_t *m, int i);

/* The loop is about to start period clk->period in ctrl (ctrl_round_begin
 * of a new period): judges every bucket on the period that ends, from the
 * served counters of its last reports (taken at the last interval's start:
 * (K - 1) / K of the period) and the tokens pushed for its rest, and counts
 * each outcome (docs/operations.md "Metrics"), and pushes it to the
 * bucket's history:
 *   reservation_missed  reservation > 0 and either behind its pace at the
 *                       last report while requests queued, or short of it
 *                       even with the R-tokens placed for the rest while
 *                       the demand estimate exceeded them
 *   reservation_met     reservation > 0, not missed and not idle
 *   idle                reservation > 0, nothing served and nothing queued
 *                       at the last reports (no demand: the reservation
 *                       was paid for and not used); idle_run counts them
 *                       in a row
 *   held_at_limit       limited, served + R + L tokens for the rest reach
 *                       the limit, and the demand estimate exceeded them
 * Every controller judges, once each, the periods that began while it ran
 * and had a round computed (a standby too: it gets the same reports, so its history
 * survives a takeover); only one that may push (alone or the leader) adds
 * them to the counters (met, missed, held).  Visits only the buckets that
 * may have traffic (ctrl_touched_buckets()), those whose rows changed
 * (ctrl_changes()), and, with nested buckets, every bucket: O(active
 * pairs + their buckets x nodes + changes); a whole new table (or the
 * first period) is read once, O(buckets).  m->visited counts the visits. */
void cmetrics_period_end(cmetrics_t *m, double now);

/* metricsd_render_fn: every metric into out.  Loop thread. */
void cmetrics_render(void *arg, promtext_t *out);

#endif
