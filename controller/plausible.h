/* plausible.h - what the controller believes of a node's report: served counts held to what its tokens allow and to its plausible rate, queues and arrivals held to a multiple of it, implausible values counted and logged (issue 18).
 *
 * Part of the controller core: works on ctrl_int.h's structs, on the
 * thread that owns the ctrl_t. */
#ifndef BQOS_PLAUSIBLE_H
#define BQOS_PLAUSIBLE_H

#include "controller/ctrl_int.h"

/* Counts a value of node nd's that the controller does not believe
 * (`said`, taken as `kept`; about bucket `bucket`, NULL if none) and logs
 * it, at most once per CTRL_IMPL_LOG_ROUNDS rounds per reason. */
void plausible_note(ctrl_t *c, const node_t *nd, ctrl_impl_t why, const char *bucket,
                    double said, double kept);

/* The most IOs per second node nd is believed to do: CTRL_PLAUSIBLE_FACTOR
 * x the larger of its profile and its estimate. */
double plausible_rate(const node_t *nd);

/* Checks record r of node nd (pair p, configured: the slot of pair
 * r->bucket, ctrl__pair_slot()) of a report of `period`
 * against what the controller granted and what the node can do (`ub`:
 * counts per period), and keeps in p and its served counts what it believes. */
void plausible_report_rec(ctrl_t *c, node_t *nd, pair_t *p, const proto_report_rec_t *r,
                          uint64_t period, uint64_t ub);

#endif
