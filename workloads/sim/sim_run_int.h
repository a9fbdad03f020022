/* sim_run_int.h - private to sim_run.c and sim_tokens.c: a simulated server, the state of one run, and the token policies' helpers. */
#ifndef BQOS_SIM_RUN_INT_H
#define BQOS_SIM_RUN_INT_H

#include <stddef.h>
#include <stdint.h>

#include "common/proto.h"
#include "common/rng.h"
#include "controller/ctrl.h"
#include "storage-node/core/agent.h"
#include "storage-node/core/sched.h"
#include "storage-node/core/window.h"
#include "workloads/report.h"
#include "workloads/sim/sim_engine.h"
#include "workloads/sim/sim_run.h"

#define POOL_CHUNK 4096

/* Generation of the table the non-pshift policies "send" (names b0..). */
#define SIM_TABLE 1

/* A request at a server: its link and the generator that sent it (a
 * closed-loop generator sends the next one when it completes). */
typedef struct {
    sched_item_t it;    /* first: a sched_item_t * is a req_t * */
    uint32_t seg;
} req_t;

typedef struct chunk {
    struct chunk *next;
    req_t reqs[POOL_CHUNK];
} chunk_t;

/* One simulated server; owned by whichever thread runs it between rounds. */
typedef struct {
    int index;
    char name[16];                  /* "s<index>", the node's name */
    sched_t *sch;
    agent_t *agent;                 /* the node's side of the protocol */
    uint32_t table;                 /* the node's table generation (hello) */
    double now;                     /* time of the message being handled */
    /* what the controller pushes this round: tokens (push_n records at
     * push_recs, borrowed) or a heartbeat */
    proto_type_t push_type;
    const proto_tokens_rec_t *push_recs;
    size_t push_n;
    const proto_share_rec_t *push_shares; /* fair shares, push_nshares < 0: none */
    long push_nshares;
    int push_names;
    sim_heap_t *heap;               /* generators by next arrival */
    const sim_segment_t *segs;
    rng_t *grng;               /* [nsegs] one stream per generator */
    rng_t svc;
    double lo, span;                /* service time = lo + span * u */
    int busy;
    double busy_until;
    uint32_t cur_seg;               /* generator of the request in service */
    req_t *free;                    /* request pool, linked by it.next */
    req_t *requeue;                 /* closed-loop requests kept over a
                                       period change */
    chunk_t *chunks;
    uint64_t arrivals, completions, dropped;
    /* per-window accuracy: this server's arrivals, completions and drops
     * per bucket since the start, modulo 2^32 ([3][B]: b_arr, b_done,
     * b_drop), copied into snap[w % nsnap] when its clock passes the end of
     * window w (the next one: wnext, ending at wnext_t) */
    uint32_t *b_arr, *b_done, *b_drop;
    uint32_t *snap;                 /* [nsnap][3][B] */
    /* ... and per bucket the seconds with none of its requests outstanding
     * here (arrived and neither completed nor dropped) since the start, up
     * to b_since, when it last fell to none ([B] each), and that idle time
     * at the end of window w in isnap[w % nsnap] ([nsnap][B]).  b_held[b]:
     * a period start dropped open-loop requests of a generator that goes
     * on; their client would still be waiting for them, so the bucket
     * counts as busy (none outstanding adds no idle time) until its next
     * arrival here ([B]). */
    double *b_idle, *b_since, *isnap;
    uint8_t *b_held;
    double hook_t;                  /* time of the agent call running (drops) */
    size_t nsnap, wn, n3;           /* ring slots; short windows per period; 3B */
    uint64_t wnext;
    double wnext_t, period;
    int poisson;
    int paced;                      /* the scheduler paces tokens */
    double woke;                    /* last pacing wake handled */
    double clock;                   /* time of the last event handled */
    int err;
    /* The backend model (sim_model_t.window > 0 or auto): IOs dispatched by
     * the scheduler wait in a FIFO (ring bq[bq_cap], bq_n from bq_head) for
     * one of the backend's m->parallel slots (slot_t: when the IO in slot i
     * completes, slot_g its generator; nbusy in use); win limits the IOs at
     * the backend, waiting or in service (fixed or adaptive).  busy,
     * busy_until and cur_seg then name the slot that completes first
     * (cur_slot). */
    const sim_model_t *m;
    window_t *win;
    uint32_t *bq;
    size_t bq_cap, bq_head, bq_n;
    double *slot_t;
    uint32_t *slot_g;
    int nbusy, cur_slot;
    /* Closed-loop clients with a round trip: requests to send again at
     * rt_t[i] by generator rt_g[i] (ring of rt_cap, in time order). */
    double *rt_t;
    uint32_t *rt_g;
    size_t rt_cap, rt_head, rt_n;
    uint64_t comp_mark;             /* completions at the last period end */
} server_t;


/* State shared by the rounds of one run (main thread, except where noted). */
typedef struct {
    const sim_model_t *m;
    sim_policy_t policy;
    const sim_run_opts_t *o;
    int S, B, K;
    server_t *sv;                 /* [S] */
    uint64_t *cum;                /* [B] served this period, all servers */
    uint64_t *cum_prev;           /* [B] ... at the previous round */
    int64_t *dem;                 /* [S][B] clairvoyant: demand for the rest */
    proto_tokens_rec_t *tok;      /* [S][B] static, clairvoyant: the tokens to push */
    int64_t *lal;                 /* [S][B] static, clairvoyant: L-tokens (scratch) */
    int any_limit;                /* some bucket has a limit */
    int64_t *res_tokens;          /* [B] reservation in tokens per period */
    double *cur_res, *cur_lim;    /* [B] each the reservation and limit (IOs/s,
                                     limit < 0: none) in force: the model's,
                                     then its runtime sets' */
    uint32_t *weights;            /* [B] bucket weights (--weighted), or NULL */
    char **names;                 /* [B] "b<index>": the buckets' names */
    ctrl_t *ctl;                  /* pshift: the controller's loop state */
    struct sim_shards *shards;    /* pshift with --shards: the shards in
                                     its place (ctl NULL; sim_shards.h) */
    proto_msg_t rep;              /* one node's report */
    sim_result_t *r;
    /* per-window accuracy: the servers' counters and snapshots, the
     * snapshots' increase summed over the servers for one window, and the
     * per-bucket totals at the start of the open window */
    uint32_t *cnt;                /* [S][3][B] */
    uint32_t *snaps;              /* [S][nsnap][3][B] */
    double *idle;                 /* [S][2][B] the servers' b_idle, b_since */
    double *isnaps;               /* [S][nsnap][B] */
    uint8_t *held;                /* [S][B] the servers' b_held */
    double *wmin;                 /* [B] scratch: a window's idle time */
    uint64_t *sum;                /* [3][B] */
    report_win_t *win;
    size_t wn;                    /* short windows per period */
    uint64_t wcur;                /* index of the open window since the start */
} run_t;

/* End of short window w (counted from the run's start) of a run with
 * periods of `period` seconds cut into `wn` windows: windows are aligned
 * to the periods. */
static inline double sim_run__window_end(double period, size_t wn, uint64_t w)
{
    uint64_t n = w + 1;
    return (double)(n / wn) * period + (double)(n % wn) * period / (double)wn;
}

/* Queues the token records [S][B] in R->tok as every node's push. */
void sim_run__push_tok(run_t *R);

/* clairvoyant: pShift over each (bucket, server)'s queue plus its true
 * demand for the rest of the period [t, t_end) and the true capacities,
 * then the L pass; queues the records as every node's push.  Returns 0,
 * -ENOMEM or a pShift error. */
int sim_run__clairvoyant_round(run_t *R, double t, double t_end);

/* static: the reservation and the limit's headroom split by the initial
 * demand, into R->tok (push them with sim_run__push_tok()). */
void sim_run__static_tokens(run_t *R);

#endif
