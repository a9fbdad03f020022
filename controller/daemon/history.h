/* history.h - bqos-controller's guarantee history: one bucket's outcomes in its last HISTORY_PERIODS judged periods (reservation met or missed, held at its limit), a fixed ring for bqos-ctl history.
 *
 * cmetrics_period_end() judges every bucket once a period and pushes the
 * outcome into that bucket's ring; the admin command `history` reads it.
 * A history_t belongs to the controller's loop thread; nothing locks.
 * Memory: HISTORY_PERIODS records of 24 bytes per bucket, allocated at its
 * first period with traffic (served, queued or demand): a bucket that
 * never had any has no ring and no history lines. */
#ifndef BQOS_HISTORY_H
#define BQOS_HISTORY_H

#include <stddef.h>
#include <stdint.h>

/* Periods kept per bucket; older outcomes are overwritten. */
#define HISTORY_PERIODS 64

/* Outcome flags of one period (cmetrics_judge()). */
enum {
    HISTORY_RES_MET = 1,    /* reservation > 0 and met */
    HISTORY_RES_MISSED = 2, /* reservation > 0 and missed */
    HISTORY_HELD = 4,       /* held at its limit with demand beyond it */
    HISTORY_IDLE = 8,       /* reservation > 0 and no demand: nothing served
                               or queued (instead of RES_MET) */
};

/* One judged period of one bucket. */
typedef struct {
    uint64_t period;  /* the controller's period number */
    uint64_t served;  /* IOs served by the period's last reports ((K - 1) / K of it) */
    uint32_t queued;  /* requests queued at the last reports (saturated at 2^32 - 1) */
    uint32_t flags;   /* HISTORY_* */
} history_rec_t;

typedef struct history history_t;

/* An empty ring.  Returns NULL when out of memory; the caller owns it and
 * frees it with history_destroy(). */
history_t *history_new(void);

/* Frees *h (NULL accepted) and sets *h to NULL. */
void history_destroy(history_t **h);

/* Appends `rec` (copied), dropping the oldest record once the ring holds
 * HISTORY_PERIODS. */
void history_push(history_t *h, const history_rec_t *rec);

/* Records held: 0..HISTORY_PERIODS (0 for NULL: a bucket without a ring,
 * one that never had traffic). */
size_t history_count(const history_t *h);

/* The i-th newest record (0: the last pushed), or NULL if i >=
 * history_count(h) (h may be NULL).  Valid until the next history_push(). */
const history_rec_t *history_get(const history_t *h, size_t i);

#endif
