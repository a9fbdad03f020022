/* maxflow.c - the optimum Phi of a pShift problem by max-flow (igraph push-relabel); for tests and benchmarks only. */
#include "pshift/tools/maxflow.h"

#include <errno.h>
#include <math.h>
#include <time.h>

#ifdef HAVE_IGRAPH /* mk/build.mk: igraph is installed (it is a test and bench dependency only) */
#include <igraph.h>

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double now(void)
{
    return clock_s(CLOCK_MONOTONIC);
}

int maxflow_solve(const pshift_problem_t *p, maxflow_result_t *r)
{
    int nb = pshift_nbuckets(p), ns = pshift_nservers(p);
    igraph_integer_t src = 0, sink = 1, bucket0 = 2, server0 = 2 + (igraph_integer_t)nb;
    igraph_vector_int_t edges;
    igraph_vector_t cap;
    igraph_t graph;
    int have_edges = 0, have_cap = 0, have_graph = 0, rc = -ENOMEM;
    double t0 = now();

    r->value = 0;
    r->t_build = r->t_flow = r->cpu_flow = 0;
    if (igraph_vector_int_init(&edges, 0) != IGRAPH_SUCCESS) goto out;
    have_edges = 1;
    if (igraph_vector_init(&cap, 0) != IGRAPH_SUCCESS) goto out;
    have_cap = 1;
#define EDGE(a, b, c)                                                          \
    do {                                                                       \
        if (igraph_vector_int_push_back(&edges, (a)) != IGRAPH_SUCCESS ||      \
            igraph_vector_int_push_back(&edges, (b)) != IGRAPH_SUCCESS ||      \
            igraph_vector_push_back(&cap, (igraph_real_t)(c)) != IGRAPH_SUCCESS) \
            goto out;                                                          \
    } while (0)
    for (int b = 0; b < nb; b++) {
        size_t n = pshift_bucket_nentries(p, b);
        int64_t total = 0;
        for (size_t k = 0; k < n; k++) {
            int s;
            int64_t d;
            pshift_bucket_entry(p, b, k, &s, &d, NULL);
            if (d <= 0) continue;
            total += d;
            EDGE(bucket0 + b, server0 + s, d);
        }
        int64_t t = pshift_bucket_target(p, b);
        if (t > total) t = total;
        if (t > 0) EDGE(src, bucket0 + b, t);
    }
    for (int s = 0; s < ns; s++) {
        int64_t c = pshift_server_capacity(p, s);
        if (c > 0) EDGE(server0 + s, sink, c);
    }
#undef EDGE
    rc = -EIO;
    if (igraph_create(&graph, &edges, server0 + ns, IGRAPH_DIRECTED) != IGRAPH_SUCCESS)
        goto out;
    have_graph = 1;
    r->vertices = (int64_t)(server0 + ns);
    r->edges = (int64_t)igraph_vector_size(&cap);
    double t1 = now();
    r->t_build = t1 - t0;
    double c1 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
    igraph_real_t value = 0;
    if (igraph_maxflow_value(&graph, &value, src, sink, &cap, NULL) != IGRAPH_SUCCESS)
        goto out;
    r->t_flow = now() - t1;
    r->cpu_flow = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c1;
    r->value = (int64_t)llround(value);
    rc = 0;
out:
    if (have_graph) igraph_destroy(&graph);
    if (have_cap) igraph_vector_destroy(&cap);
    if (have_edges) igraph_vector_int_destroy(&edges);
    return rc;
}

#else
int maxflow_solve(const pshift_problem_t *p, maxflow_result_t *r)
{
    (void)p, (void)r;
    return -ENOTSUP;
}
#endif

int64_t maxflow_optimum(const pshift_problem_t *p)
{
    maxflow_result_t r;
    return maxflow_solve(p, &r) == 0 ? r.value : -1;
}
