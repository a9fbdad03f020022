/* nodemetrics.h - a node's /metrics (--metrics-listen, both node kinds): per-bucket cumulative counters (the scheduler's per-period counters folded in at every period end), queues and tokens, the controller client's state, rendered on the loop thread (common/metricsd).
 *
 * A nodemetrics_t belongs to the node's loop thread, as do the gate,
 * scheduler and controller client it borrows; nothing locks.  The HTTP side
 * is common/metricsd's thread, which never touches any of this. */
#ifndef BQOS_NODEMETRICS_H
#define BQOS_NODEMETRICS_H

#include "common/promtext.h"
#include "storage-node/daemon/ctlclient.h"
#include "storage-node/io/gate.h"

typedef struct nodemetrics nodemetrics_t;

/* Makes the exporter of node `name` (copied) of kind `kind` ("memcached" or
 * "block", a constant) around gate g (borrowed; must outlive it).  Returns
 * it (caller owns it) or NULL when out of memory. */
nodemetrics_t *nodemetrics_new(gate_t *g, const char *name, const char *kind);

/* Frees *mp and sets it to NULL.  Accepts NULL. */
void nodemetrics_destroy(nodemetrics_t **mp);

/* The IO timing recorder the gate's fronts feed (gate_set_iolat()); owned
 * by m. */
struct iolat *nodemetrics_iolat(nodemetrics_t *m);

/* The controller client whose state to export (borrowed; NULL: none). */
void nodemetrics_set_ctl(nodemetrics_t *m, const ctlclient_t *ctl);

/* A backend's health as the metrics show it: connection errors by kind
 * (cumulative) and whether it is up. */
typedef struct {
    uint64_t connect_errors, io_errors;
    int up;
} nodemetrics_backend_t;

/* Fills out with the backend's health now; called on the loop thread at
 * each scrape. */
typedef void (*nodemetrics_backend_fn)(void *arg, nodemetrics_backend_t *out);

/* Exports the backend's health from fn(arg) (NULL: none, the series are
 * absent: a block node's device has none). */
void nodemetrics_set_backend(nodemetrics_t *m, nodemetrics_backend_fn fn, void *arg);

/* Counts a SIGHUP reload: ok nonzero if every file it re-read loaded. */
void nodemetrics_reloaded(nodemetrics_t *m, int ok);

/* Bytes per unit of the scheduler's byte tokens (the node's --cost-unit;
 * 0 or never set: COST_UNIT_DEFAULT), to export them in bytes. */
void nodemetrics_set_cost_unit(nodemetrics_t *m, uint32_t unit);

/* A period ends: adds the scheduler's per-period counters (every bucket's
 * arrivals and IOs served by class, the node's completions and busy time)
 * to the cumulative totals.  Call right before gate_period_start().
 * O(buckets), once a period.  Returns 0 or -ENOMEM (this period's counts
 * are then lost for the buckets beyond the old arrays). */
int nodemetrics_period_end(nodemetrics_t *m);

/* metricsd_render_fn: every metric into out.  Loop thread. */
void nodemetrics_render(void *arg, promtext_t *out);

#endif
