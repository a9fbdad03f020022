/* metricsd.h - the /metrics, /healthz and /readyz HTTP endpoint of the daemons (--metrics-listen): libevent's evhttp on a thread of its own, serving the Prometheus text that the owner's thread renders on request, and the probes the owner's thread answers.
 *
 * The owner (the controller's loop, a node's loop) keeps every figure on
 * its own thread and never locks them.  A scrape crosses threads once:
 *
 *   HTTP thread                       owner's thread
 *   GET /metrics
 *     asks (eventfd +1) ---------->   metricsd_fd() readable:
 *     waits (condition, 5 s)          metricsd_serve(m): render(arg, text)
 *     <-------------------------      into the endpoint's one promtext_t
 *   200 with the text                 (under the endpoint's mutex)
 *
 * so rendering runs only per scrape, on the thread that owns the data; a
 * scrape the owner does not answer within 5 s gets 503.  After the
 * owner's text the HTTP thread adds, for every daemon alike, the process_*
 * series and bqos_build_info (metricsd_render_process()).
 *
 * GET /healthz crosses the same way without rendering: 200 "ok" when the
 * owner's thread answers (its loop turns), else 503 after 5 s.  GET
 * /readyz also runs the owner's readiness test (metricsd_set_ready(),
 * on its thread): 200 "ready", or 503 "not ready: REASON"; without a test
 * ready means healthy.  Other paths get 404, other methods 405.  The text
 * buffer is reused from scrape to scrape.  The HTTP thread blocks every
 * signal. */
#ifndef BQOS_METRICSD_H
#define BQOS_METRICSD_H

#include "common/promtext.h"

/* Renders every metric into `out` (empty, error-free): runs on the owner's
 * thread, inside metricsd_serve(). */
typedef void (*metricsd_render_fn)(void *arg, promtext_t *out);

/* Whether the daemon is ready for work (/readyz): runs on the owner's
 * thread, inside metricsd_serve().  Returns nonzero when ready, else 0
 * with a short reason written into why[0..cap). */
typedef int (*metricsd_ready_fn)(void *arg, char *why, size_t cap);

typedef struct metricsd metricsd_t;

/* Listens on `hostport` ("HOST:PORT", "[IPv6]:PORT"; numeric addresses or
 * names; PORT 0 picks a free one) and starts the HTTP thread.  render(arg,
 * ...) is called from metricsd_serve().  Returns the endpoint (caller owns
 * it; metricsd_destroy()), or NULL and *err: -EINVAL (bad address),
 * -EADDRINUSE (cannot bind), -ENOMEM, another -errno. */
metricsd_t *metricsd_new(const char *hostport, metricsd_render_fn render, void *arg, int *err);

/* The descriptor the owner watches for reading (an eventfd): readable
 * when a scrape waits.  Valid until metricsd_destroy(). */
int metricsd_fd(const metricsd_t *m);

/* Sets /readyz's test to fn(arg) (NULL: ready whenever the owner's thread
 * answers, like /healthz).  Owner's thread; arg must stay valid until the
 * next call or metricsd_destroy(). */
void metricsd_set_ready(metricsd_t *m, metricsd_ready_fn fn, void *arg);

/* Writes the calling process's process_* series as the Prometheus client
 * libraries define them, read from /proc/self (process_cpu_seconds_total,
 * process_resident_memory_bytes, process_virtual_memory_bytes,
 * process_start_time_seconds, process_open_fds, process_max_fds; a series
 * whose source cannot be read is left out), then
 * bqos_build_info{program="PROGRAM",version="BQOS_VERSION"} 1.  Any
 * thread; every scrape of /metrics ends with it (program: bqos_log_prog()). */
void metricsd_render_process(promtext_t *out, const char *program);

/* Owner's thread, when metricsd_fd() is readable (a spurious call is
 * harmless): renders for the waiting scrape, or runs the readiness test
 * for a waiting /readyz, and wakes the HTTP thread.
 * Never blocks beyond the render and the mutex. */
void metricsd_serve(metricsd_t *m);

/* "ADDR:PORT" actually bound ("[ADDR]:PORT" for IPv6), for log lines and
 * tests.  Owned by m. */
const char *metricsd_address(const metricsd_t *m);

/* Stops the HTTP thread (a scrape in progress gets 503), closes the
 * sockets, frees; sets *mp to NULL.  Accepts NULL.  Owner's thread. */
void metricsd_destroy(metricsd_t **mp);

#endif
