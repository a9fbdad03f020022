/* stopguard.c - a thread that ends the process when SIGTERM or SIGINT stays pending longer than a bound (the main loop is busy). */
#include "controller/daemon/stopguard.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/mono.h"

/* Owned by the thread that started it; `quit` is written by that thread
 * and read by the guard's. */
struct stopguard {
    pthread_t thr;
    atomic_int quit;
    _Atomic double stopping; /* when the loop ended (stopguard_stopping()); 0: running */
    double bound_s;
};

static void *guard_main(void *arg)
{
    stopguard_t *g = arg;
    double since = 0; /* when a stop signal was first seen pending; 0: none */
    const struct timespec tick = {0, 50 * 1000 * 1000};
    while (!atomic_load(&g->quit)) {
        nanosleep(&tick, NULL);
        double st = atomic_load(&g->stopping);
        if (st > 0 && mono_now() - st >= g->bound_s && !atomic_load(&g->quit)) {
            /* the clean stop is slow (freeing a big table, waiting for a
             * compaction, etcd): nothing left needs it */
            log_warn("stopping took %.1f s: exiting now", mono_now() - st);
            _exit(0);
        }
        sigset_t p;
        if (sigpending(&p) < 0 || !(sigismember(&p, SIGTERM) || sigismember(&p, SIGINT))) {
            since = 0;
            continue;
        }
        double now = mono_now();
        if (since == 0)
            since = now;
        else if (now - since >= g->bound_s && !atomic_load(&g->quit)) {
            log_warn("stop signal pending %.1f s: the main loop is busy (a long change?); "
                     "exiting now, the change in progress is not applied",
                     now - since);
            _exit(0);
        }
    }
    return NULL;
}

stopguard_t *stopguard_start(double bound_s)
{
    stopguard_t *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->bound_s = bound_s;
    atomic_init(&g->quit, 0);
    atomic_init(&g->stopping, 0.0);
    if (pthread_create(&g->thr, NULL, guard_main, g) != 0) {
        free(g);
        return NULL;
    }
    return g;
}

void stopguard_stopping(stopguard_t *g)
{
    if (g)
        atomic_store(&g->stopping, mono_now());
}

void stopguard_stop(stopguard_t **gp)
{
    if (!gp || !*gp)
        return;
    atomic_store(&(*gp)->quit, 1);
    pthread_join((*gp)->thr, NULL);
    free(*gp);
    *gp = NULL;
}
