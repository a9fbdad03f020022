/* nodes.h - bqos-controller's node endpoint: the ROUTER socket's side of the control protocol (hellos and welcomes, reports, heartbeats, goodbyes in; tokens, heartbeats and errors out).
 *
 * A nodes_t belongs to the controller's loop thread, as do the socket, the
 * ctrl_t, the clock and the timing it borrows; nothing locks. */
#ifndef BQOS_NODES_H
#define BQOS_NODES_H

#include <stdint.h>

#include "common/proto.h"
#include "common/shardgen.h"
#include "controller/ctrl.h"
#include "controller/daemon/auth.h"
#include "controller/daemon/clock.h"
#include "controller/daemon/timing.h"
#include "controller/push.h"

/* What the node endpoint asks of the loop while it drains messages. */
typedef struct {
    /* A registered node's message (hello with timing, report) carried a
     * clock that differs from ours and that a strict majority of the
     * registered nodes with a clock agree on: the loop may adopt it
     * (pclock_adopt) and then tick. */
    void (*adopt)(void *arg, const pclock_reading_t *r, double now);
    /* After each message of a registered node: the loop moves its clock
     * (a round may close once every node has reported). */
    void (*tick)(void *arg, double now);
    /* NULL, or whether the controller may send to nodes at `now` (a
     * standby or a deposed leader may not: every send is then dropped and
     * counted in `fenced`; docs/controller.md "High availability"). */
    int (*may_send)(void *arg, double now);
    void *arg;
} nodes_hooks_t;

/* What the node endpoint keeps per registered node (by ctrl node index). */
typedef struct {
    double last_msg;       /* monotonic seconds of its last message, 0 = never */
    int fallback;          /* its last report said it is in fallback */
    uint64_t fallbacks;    /* its own count of fallbacks, as last reported */
    pclock_reading_t clock; /* its clock as last given (period 0: none) */
    uint64_t seq;          /* "seq" of its last message (0: none) */
    int sparse;            /* its hello offered sparse reports */
    int want_full;         /* sparse node: a message of it went missing (a
                              gap in its seq) or came late, so what we
                              hold may differ from what it assumes; the
                              next message to it asks for a full report */
    push_grants_t grants;  /* changed grants only: its bases (push.h) */
    char *who;             /* its last who message's text (issue 27; at most
                              PROTO_WHO_MAX bytes, NUL-terminated), or NULL */
    size_t who_len;
    double who_at;         /* monotonic seconds it came */
    /* Names in parts (docs/protocol.md "Names in parts"): its hello
     * offered them.  Our table goes to it part by part: tx_gen is the
     * generation being sent, tx_next the next index to send, tx_acked how
     * many of its names the node says it holds, tx_idle the rounds that
     * acknowledgement has not moved while parts were out (go back at
     * NODES_PART_STALL).  rx_capped: its table passed what we hold (told
     * once a session). */
    int parts;
    uint32_t tx_gen;
    size_t tx_next, tx_acked;
    int tx_idle;
    int rx_capped;
    uint32_t tx_told;      /* generation whose whole arrival was logged */
    uint64_t rx_parts, tx_parts; /* parts taken / sent this session */
    double rx_max, tx_max; /* the longest of the loop's time on one part
                              taken / on one round's parts sent, seconds */
    double rx_cpu, tx_cpu; /* the same in the loop thread's CPU time */
    double t_hello;        /* monotonic seconds of its hello */
} nodes_peer_t;

/* Names in parts: at most this many parts (PROTO_PART_BYTES each) go to
 * one node per round and to every node together per round; a node is sent
 * at most NODES_PART_WINDOW names beyond what it acknowledged, and the
 * parts go again from there when the acknowledgement has not moved for
 * NODES_PART_STALL rounds (a safety net: a part that could not be sent is
 * not counted as sent, the transport loses nothing else within a session,
 * and a busy host delays acknowledgements: going back early floods the
 * node with parts it has). */
#define NODES_PARTS_NODE 64
#define NODES_PARTS_ROUND 128
#define NODES_PART_WINDOW 262144
#define NODES_PART_STALL 50
/* ... and the drain takes parts of the nodes' tables for at most this
 * long per pass (then returns: the rest wait in the socket while the loop
 * runs what is due). */
#define NODES_PARTS_PASS_S 0.050
/* A node's acknowledgement that moved sends at most this many parts at
 * once (within the window), besides those of each round. */
#define NODES_PARTS_ACK 16

/* An unregistered process that wrote to a fenced controller: its routing id
 * (name and instance tag, proto_node_id()) and its name. */
typedef struct {
    unsigned char id[PROTO_ID_MAX];
    size_t idlen;
    char name[PROTO_NAME_MAX + 1];
} nodes_unknown_t;

/* Warnings a peer can trigger, each limited by a token bucket (10 at
 * once, then 1 per second; the suppressed are counted and said with the
 * next one). */
enum { NODES_WARN_HELLO, NODES_WARN_BAD, NODES_WARN_TABLE, NODES_WARN_ENCODE,
       NODES_WARN_FALLBACK, NODES_WARN__COUNT };
typedef struct {
    double tokens, last;
    uint64_t quiet;
} nodes_warn_t;

typedef struct {
    void *sock;            /* bound ROUTER (borrowed: the caller closes it) */
    ctrl_t *ctrl;          /* borrowed */
    pclock_t *clk;         /* borrowed: timing of what is sent; reports noted */
    split_t *cur;          /* borrowed: decode, encode and send times of the
                              round are added here */
    nodes_hooks_t hooks;
    proto_msg_t in;        /* the message being handled */
    proto_enc_t enc;       /* encoder buffers, reused */
    proto_stats_t pst;     /* messages accepted and rejected, by reason */
    uint64_t push_tokens, push_heartbeats, send_failed, records_sent;
    uint64_t parts_sent, parts_taken, parts_stale; /* names in parts: sent,
                              taken from nodes, out of order (ignored) */
    int part_rr;           /* the node the next round's parts start at */
    uint64_t reports_sparse, reports_full, full_asked; /* reports by kind;
                              messages that asked a node for a full one */
    uint64_t epoch;        /* stamped on everything sent (0: alone, none) */
    uint64_t follows;      /* highest epoch a node said it obeys (hello,
                              report "follows"; any sender that passed
                              auth_node(), registered or not): the election
                              leads above it (leader_note_follows()) */
    uint64_t fenced;       /* messages not sent: hooks.may_send said no */
    nodes_peer_t *peers;   /* [npeers], by node index */
    int npeers;
    uint64_t node_fallbacks, node_resumes; /* nodes seen entering / leaving
                              fallback in their reports */
    unsigned char id[PROTO_ID_MAX]; /* routing id of the message in hand */
    size_t idlen;
    nodes_warn_t warn[NODES_WARN__COUNT];
    double dup_log_next;   /* duplicate-name warnings: next one not before */
    uint64_t dup_suppressed;
    nodes_unknown_t *unknown; /* [nunknown]: unregistered processes that
                              wrote while sends were fenced (a standby's),
                              to be told to say hello at once on takeover */
    int nunknown, capunknown;
    rules_t *rules;        /* the rule list last pushed (a copy of
                              ctrl_rules()), NULL: none pushed yet or none */
    char *rules_text;      /* its text as sent; NULL: nothing pushed yet */
    uint64_t rules_version; /* counts the changes pushed (1: the first) */
    uint64_t rules_sent;   /* rules messages sent */
    const shardgen_t *sg;  /* borrowed; NULL without shards: the cluster's
                              shards configuration every message with
                              timing carries to the nodes (issue 30, K
                              changing at run time) */
    auth_t *auth;          /* borrowed; NULL without CURVE.  With it, a
                              message whose key is not (or no longer) an
                              authorized node key bound to the name it
                              carries is dropped unanswered (auth_node()) */
} nodes_t;

/* Sets up ns around the bound ROUTER socket `sock` with what it borrows.
 * Cannot fail. */
void nodes_init(nodes_t *ns, void *sock, ctrl_t *ctrl, pclock_t *clk, split_t *cur,
                const nodes_hooks_t *hooks);

/* Frees what ns owns (not the socket).  Accepts a zeroed ns. */
void nodes_clear(nodes_t *ns);

/* Handles every message waiting on the socket (at most 100,000 at a time,
 * and parts of nodes' tables for at most NODES_PARTS_PASS_S a pass),
 * without blocking: registers nodes and welcomes them (refusing a second
 * process under a name that is up with `duplicate_name`), applies reports
 * (answering unknown_table or bad_message errors; a node that reports
 * entering or leaving fallback is logged at warn and counted), notes heartbeats and
 * goodbyes, and tells the unknown to say hello.  Bad messages are counted
 * and logged, never fatal. */
void nodes_drain(nodes_t *ns);

/* Sends every up node its token records of the round just computed, or a
 * heartbeat if the round was skipped (`res`) or there is nothing to say;
 * before them, to nodes that take names in parts and lack our table, its
 * next parts (NODES_PARTS_NODE / NODES_PARTS_ROUND at most).
 * A send that fails (full queue, node gone) is counted and dropped. */
void nodes_push(nodes_t *ns, const ctrl_result_t *res, double now);

/* Issue 27: if the table's rule list (ctrl_rules()) differs from the one
 * last pushed, sends it to every up node (a rules message, its version one
 * more); nodes_push() calls it each round and a welcome is followed by the
 * list in force.  Returns 0 or -ENOMEM (nothing sent; tried again next
 * round). */
int nodes_push_rules(nodes_t *ns);

/* This controller just became the leader: tells every unregistered node
 * that wrote to it while it was a standby to say hello (error unknown_node,
 * with the new epoch), instead of waiting for its next report.  Forgets
 * the list. */
void nodes_hail_unknown(nodes_t *ns);

/* Monotonic seconds of node `node`'s last message; 0 if never or unknown. */
double nodes_last_msg(const nodes_t *ns, int node);

/* Node `node`'s last who message (the identities active in its buckets,
 * JSON text, storage-node/io/who.h; owned by ns, valid until the next
 * nodes_drain()) and when it came (*at, monotonic seconds); NULL if none. */
const char *nodes_who(const nodes_t *ns, int node, double *at);

/* Node `node`'s fallback as its last report said: nonzero if in fallback,
 * and its count in *fallbacks (0 for an unknown node). */
int nodes_fallback(const nodes_t *ns, int node, uint64_t *fallbacks);

#endif
