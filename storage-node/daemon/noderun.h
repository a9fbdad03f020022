/* noderun.h - what both node kinds (memcached and block) do around their front: bucket and token files, the controller client, signals, the event loop. */
#ifndef BQOS_NODERUN_H
#define BQOS_NODERUN_H

#include "storage-node/daemon/nodemetrics.h"
#include <stdint.h>

#include "storage-node/core/agent.h"
#include "storage-node/core/sched.h"
#include "storage-node/io/gate.h"

struct event_base;

/* The options around the front; strings are borrowed for the call. */
typedef struct {
    const char *name;        /* node name, registered with the controller */
    const char *config;      /* bucket file (--config) or NULL */
    const char *tokens_file; /* token test hook (--tokens-file) or NULL */
    const char *controller;  /* controller endpoint(s), comma-separated
                                (--controller) or NULL */
    uint64_t capacity;       /* capacity profile, IOs/s; 0 = not given */
    sched_policy_t policy;   /* the local policy (the policy while the
                                controller leads, and under fallback static) */
    agent_fallback_t fallback; /* --fallback: static or rr */
    double silence;          /* --silence, intervals (0: the default) */
    int pacing;              /* --pacing: paced tokens (sched_set_pacing()) */
    double burst_s;          /* --burst: depth, seconds of the paced rate */
    sched_order_t r_order;   /* --r-order: step 1 by round robin or urgency */
    const char *curve_key, *controller_key; /* --curve-key, --controller-key */
    const char *metrics;     /* --metrics-listen HOST:PORT, or NULL */
    const char *kind;        /* "memcached" or "block" (metrics) */
    const char *user;        /* --user: switched to before serving; NULL: none */
    int (*reload)(void *arg); /* SIGHUP: also this (the block node's TLS
                                  files), on the loop thread; 0 or -errno
                                  (logged); NULL: none */
    void *reload_arg;
    uint32_t cost_unit;      /* --cost-unit: bytes per unit of byte tokens
                                (the controller speaks bytes, the
                                scheduler units) */
    nodemetrics_backend_fn backend; /* the backend's health for the
                                  metrics (nodemetrics_set_backend()); NULL:
                                  none */
    void *backend_arg;
    int shards;              /* --shards K: the controller shards in the map
                                until a controller says (the ';' lists
                                are the slots, possibly more); 0: none */
} noderun_config_t;

/* Raises the open-files limit to its hard limit (1,000+ client connections
 * need more than the usual 1,024) and ignores SIGPIPE.  Call once, before
 * the sockets. */
void noderun_prepare(void);

/* Drives a front through its gate (the memcached front's or the NBD
 * front's, gate.h): sets the scheduler's pacing and R order, loads cfg->config's buckets (gate_bucket(), gate_set_weight()) and
 * cfg->tokens_file (gate_set_tokens()), attaches the controller client
 * (cfg->controller) to the gate's scheduler (its state shows in the
 * front's stats through gate_set_status(), and is logged at exit), handles
 * SIGTERM and SIGINT
 * (gate_shutdown()) and
 * SIGUSR1 (a new period: per-period counters zeroed, the tokens file read
 * again) and SIGHUP (cfg->config and cfg->tokens_file read again: new
 * buckets added, weights and tokens set; a file that does not load is
 * logged and changes nothing; then the controller client's CURVE keys
 * and cfg->reload), serves cfg->metrics (storage-node/daemon/nodemetrics.h),
 * switches to cfg->user (privdrop_apply(): the front's socket is bound and
 * its files are open by then), then runs the loop until the front breaks
 * it.  Returns 0 after a
 * clean stop, -1 after an error (logged).  The controller client has said
 * goodbye and the signal events are gone when it returns; the front and the
 * loop are the caller's.  Main thread only. */
int noderun_run(struct event_base *base, gate_t *g, const noderun_config_t *cfg);

#endif
