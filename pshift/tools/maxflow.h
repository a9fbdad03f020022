/* maxflow.h - the optimum Phi of a pShift problem by max-flow (igraph push-relabel); for tests and benchmarks only. */
#ifndef BQOS_MAXFLOW_H
#define BQOS_MAXFLOW_H

#include <stdint.h>

#include "pshift/pshift.h"

/* Timings and result of one max-flow run. */
typedef struct {
    int64_t value;      /* the max-flow value: the optimum Phi */
    double t_build;     /* seconds to build the igraph graph */
    double t_flow;      /* seconds in igraph_maxflow_value() */
    double cpu_flow;    /* process CPU seconds in igraph_maxflow_value() */
    int64_t vertices;
    int64_t edges;
} maxflow_result_t;

/* Builds the flow network source -> bucket (capacity min(target, D_i)) ->
 * server (capacity d_i^j) -> sink (capacity C^j) of `p` and computes its
 * maximum flow with igraph's push-relabel.  Demands are read through
 * pshift_bucket_entry(), so `p` must have been solved.  Capacities are
 * igraph_real_t (double): exact while every sum stays below 2^53.
 * Returns 0 and fills *r; -ENOMEM, -EIO if igraph fails, or -ENOTSUP when
 * built without igraph (mk/build.mk's HAVE_IGRAPH). */
int maxflow_solve(const pshift_problem_t *p, maxflow_result_t *r);

/* Returns the max-flow value of `p` as maxflow_solve(), or -1 on error. */
int64_t maxflow_optimum(const pshift_problem_t *p);

#endif
