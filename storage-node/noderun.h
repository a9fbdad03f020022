/* noderun.h - what both node kinds (memcached and block) do around their front: bucket and token files, the controller client, signals, the event loop. */
#ifndef BQOS_NODERUN_H
#define BQOS_NODERUN_H

#include <stdint.h>

#include "storage-node/core/sched.h"

struct event_base;

/* The front as noderun drives it: the memcached front (front.h) or the NBD
 * front (nbdfront.h).  Every call is made on the loop thread. */
typedef struct {
    void *front;
    sched_t *sched;  /* the scheduler the front dispatches from */
    /* Adds bucket `name` or finds it (then sets its weight); returns its
     * index or -errno. */
    int (*add_bucket)(void *front, const char *name, uint32_t weight);
    /* Sets a bucket's tokens (adding it with weight 1 if new) and
     * dispatches what they allow; 0 or -errno. */
    int (*set_tokens)(void *front, const char *name, int64_t r, int64_t l);
    /* Dispatches what the scheduler allows now (after a policy switch or a
     * tokens message). */
    void (*kick)(void *front);
    /* Begins a graceful stop; the front breaks the loop when done. */
    void (*shutdown)(void *front);
} noderun_front_t;

/* The options around the front; strings are borrowed for the call. */
typedef struct {
    const char *name;        /* node name, registered with the controller */
    const char *config;      /* bucket file (--config) or NULL */
    const char *tokens_file; /* token test hook (--tokens-file) or NULL */
    const char *controller;  /* controller endpoint (--controller) or NULL */
    uint64_t capacity;       /* capacity profile, IOs/s; 0 = not given */
    sched_policy_t policy;   /* the local policy (also the fallback when the
                                controller goes away) */
} noderun_config_t;

/* Raises the open-files limit to its hard limit (1,000+ client connections
 * need more than the usual 1,024) and ignores SIGPIPE.  Call once, before
 * the sockets. */
void noderun_prepare(void);

/* Loads cfg->config's buckets and cfg->tokens_file, attaches the controller
 * client (cfg->controller), handles SIGTERM and SIGINT (fr->shutdown) and
 * SIGUSR1 (a new period: per-period counters zeroed, the tokens file read
 * again), then runs the loop until the front breaks it.  Returns 0 after a
 * clean stop, -1 after an error (logged).  The controller client has said
 * goodbye and the signal events are gone when it returns; the front and the
 * loop are the caller's.  Main thread only. */
int noderun_run(struct event_base *base, const noderun_front_t *fr,
                const noderun_config_t *cfg);

#endif
