/* nodemetrics.c - a node's /metrics: cumulative per-bucket counters folded in at period ends, queues, tokens, controller state (see nodemetrics.h). */
#include "storage-node/daemon/nodemetrics.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/growarr.h"
#include "common/mono.h"
#include "common/version.h"
#include "storage-node/core/cost.h"
#include "storage-node/io/iolat.h"

/* Totals of the periods that ended, per scheduler bucket index. */
typedef struct {
    uint64_t arrivals, served[3]; /* served by sched_class_t */
} totals_t;

struct nodemetrics {
    gate_t *g;
    const ctlclient_t *ctl;
    char *name;
    const char *kind;
    iolat_t *lat;           /* latency and wait, fed by the fronts */
    totals_t *tot;          /* [cap], zeroed beyond the buckets seen */
    int cap;
    uint64_t periods;       /* period ends folded */
    uint64_t completions;   /* node totals of those periods */
    double busy_s;
    uint32_t unit;          /* bytes per unit of the byte tokens */
    nodemetrics_backend_fn backend; /* NULL: no backend health */
    void *backend_arg;
    uint64_t reloads_ok, reloads_error; /* SIGHUP reloads */
};

nodemetrics_t *nodemetrics_new(gate_t *g, const char *name, const char *kind)
{
    nodemetrics_t *m = calloc(1, sizeof *m);
    if (!m || !(m->name = strdup(name)) || !(m->lat = iolat_new())) {
        if (m)
            free(m->name);
        free(m);
        return NULL;
    }
    m->g = g;
    m->kind = kind;
    m->unit = COST_UNIT_DEFAULT;
    return m;
}

void nodemetrics_destroy(nodemetrics_t **mp)
{
    if (!mp || !*mp)
        return;
    iolat_destroy(&(*mp)->lat);
    free((*mp)->tot);
    free((*mp)->name);
    free(*mp);
    *mp = NULL;
}

struct iolat *nodemetrics_iolat(nodemetrics_t *m)
{
    return m->lat;
}

void nodemetrics_set_ctl(nodemetrics_t *m, const ctlclient_t *ctl)
{
    m->ctl = ctl;
}

void nodemetrics_set_cost_unit(nodemetrics_t *m, uint32_t unit)
{
    m->unit = unit ? unit : COST_UNIT_DEFAULT;
}

int nodemetrics_period_end(nodemetrics_t *m)
{
    gate_stats_t gs;
    gate_stats(m->g, &gs);
    void *arr = m->tot;
    int n = gs.buckets, rc = growarr(&arr, &m->cap, n, sizeof *m->tot);
    m->tot = arr;
    if (rc < 0)
        n = m->cap;
    for (int b = 0; b < n; b++) {
        sched_bucket_stats_t bs;
        if (!gate_bucket_stats(m->g, b, &bs))
            continue;
        m->tot[b].arrivals += bs.arrivals;
        m->tot[b].served[SCHED_CLASS_R] += bs.served_r;
        m->tot[b].served[SCHED_CLASS_L] += bs.served_l;
        m->tot[b].served[SCHED_CLASS_O] += bs.served_o;
    }
    m->completions += gs.node.completions;
    m->busy_s += gs.node.busy_seconds;
    m->periods++;
    return rc;
}

void nodemetrics_set_backend(nodemetrics_t *m, nodemetrics_backend_fn fn, void *arg)
{
    m->backend = fn;
    m->backend_arg = arg;
}

void nodemetrics_reloaded(nodemetrics_t *m, int ok)
{
    if (ok)
        m->reloads_ok++;
    else
        m->reloads_error++;
}

/* ---- rendering ----------------------------------------------------------- */


static void node_sample(const nodemetrics_t *m, promtext_t *p, const char *name,
                        promtext_type_t type, const char *help, double v)
{
    promtext_family(p, name, type, help);
    promtext_value(p, &(promtext_label_t){"node", m->name}, 1, v);
}

/* One family of a single sample labelled with the node's name. */
typedef struct {
    const char *name;
    promtext_type_t type;
    const char *help;
    double v;
} node_row_t;

/* node_sample() for each of the n rows, in order. */
static void node_samples(const nodemetrics_t *m, promtext_t *p, const node_row_t *rows, size_t n)
{
    for (size_t i = 0; i < n; i++)
        node_sample(m, p, rows[i].name, rows[i].type, rows[i].help, rows[i].v);
}

/* bqos_node_rules_refused_by_identity_total: gate_refused_identities()'s
 * set, at most GATE_IDENTITIES_MAX identities and "other" (issue 27). */
struct ident_arg {
    const nodemetrics_t *m;
    promtext_t *p;
};

static void identity_sample(void *arg, const char *id, uint64_t n)
{
    const struct ident_arg *a = arg;
    promtext_label_t l[] = {{"node", a->m->name}, {"identity", id}};
    promtext_value(a->p, l, 2, (double)n);
}

static void refused_by_identity(const nodemetrics_t *m, promtext_t *p)
{
    promtext_family(p, "bqos_node_rules_refused_by_identity_total", PROMTEXT_COUNTER,
                    "Requests refused by the rules, by identity (user:, cert:, psk:, or addr: "
                    "without one): the first 32 identities refused, the rest as \"other\".");
    struct ident_arg a = {m, p};
    gate_refused_identities(m->g, identity_sample, &a);
}

static void render_node(const nodemetrics_t *m, promtext_t *p)
{
    gate_stats_t gs;
    gate_stats(m->g, &gs);
    promtext_family(p, "bqos_node_info", PROMTEXT_GAUGE,
                    "Always 1; the node kind (memcached, block) and version as labels.");
    promtext_label_t info[] = {{"node", m->name}, {"kind", m->kind}, {"version", BQOS_VERSION}};
    promtext_value(p, info, 3, 1);
    const node_row_t rows[] = {
        {"bqos_node_periods_total", PROMTEXT_COUNTER, "QoS periods ended.", (double)m->periods},
        {"bqos_node_completions_total", PROMTEXT_COUNTER, "IOs the backend completed.",
         (double)(m->completions + gs.node.completions)},
        {"bqos_node_busy_seconds_total", PROMTEXT_COUNTER,
         "Time with at least one IO at the backend.", m->busy_s + gs.node.busy_seconds},
        {"bqos_node_inflight", PROMTEXT_GAUGE, "IOs at the backend now.", gs.inflight},
        {"bqos_node_connections", PROMTEXT_GAUGE, "Client connections open.", gs.conns.open},
        {"bqos_node_connections_total", PROMTEXT_COUNTER, "Client connections accepted.",
         (double)gs.conns.total},
        {"bqos_node_connections_evicted_total", PROMTEXT_COUNTER,
         "Idle client connections closed at --max-conns to admit a new client.",
         (double)gs.conns.evicted},
        {"bqos_node_connections_idle_closed_total", PROMTEXT_COUNTER,
         "Client connections closed after --idle-timeout with nothing to answer.",
         (double)gs.conns.idle_closed},
        {"bqos_node_tls_handshake_failures_total", PROMTEXT_COUNTER,
         "TLS handshakes that failed: plaintext clients on a TLS port, certificates or PSKs "
         "refused.", (double)gs.conns.tls_failed},
        {"bqos_node_requests_refused_unknown_bucket_total", PROMTEXT_COUNTER,
         "Requests refused because their key names no bucket (--default reject).",
         (double)iolat_refused_unknown(gate_iolat(m->g))},
    };
    node_samples(m, p, rows, sizeof rows / sizeof rows[0]);
    promtext_family(p, "bqos_node_requests_refused_total", PROMTEXT_COUNTER,
                    "Requests refused for want of a bucket, by reason: unknown_bucket (no bucket, "
                    "--default-bucket reject), unconfigured (the bucket table lists none and has "
                    "no default).");
    promtext_label_t rl[] = {{"node", m->name}, {"reason", "unknown_bucket"}};
    promtext_value(p, rl, 2, (double)iolat_refused_unknown(gate_iolat(m->g)));
    rl[1].value = "unconfigured";
    promtext_value(p, rl, 2, (double)iolat_refused_unconfigured(gate_iolat(m->g)));
    if (gs.auth) {
        promtext_family(p, "bqos_node_auth_failures_total", PROMTEXT_COUNTER,
                        "Clients refused for want of a login (--auth-file), by reason.");
        promtext_label_t al[] = {{"node", m->name}, {"reason", NULL}};
        for (int i = 0; i < GATE_AUTH_NREASONS; i++) {
            al[1].value = gate_auth_reason_names[i];
            promtext_value(p, al, 2, (double)gs.auth_failures[i]);
        }
        node_sample(m, p, "bqos_node_auth_logins_total", PROMTEXT_COUNTER,
                    "Client logins that succeeded (--auth-file).", (double)gs.auth_ok);
    }
    if (gs.rules) { /* issue 27: the rules' refusals and matches, bounded label sets */
        node_sample(m, p, "bqos_node_rules", PROMTEXT_GAUGE,
                    "Rules in the node's list (--config or the controller's push).",
                    (double)gs.rules);
        node_sample(m, p, "bqos_node_rules_version", PROMTEXT_GAUGE,
                    "Version of the node's rule list (the controller's; 0: --config).",
                    (double)gs.rules_version);
        node_sample(m, p, "bqos_node_template_buckets", PROMTEXT_GAUGE,
                    "Buckets made by template rules (at most 1024 per node).",
                    (double)gs.template_buckets);
        promtext_family(p, "bqos_node_rules_refused_total", PROMTEXT_COUNTER,
                        "Requests refused by the rules, by reason.");
        promtext_label_t ql[] = {{"node", m->name}, {"reason", NULL}};
        for (int i = 0; i < GATE_RULE_NREASONS; i++) {
            ql[1].value = gate_rule_reason_names[i];
            promtext_value(p, ql, 2, (double)gs.rules_refused[i]);
        }
        refused_by_identity(m, p);
        if (gs.rule_matches) {
            promtext_family(p, "bqos_node_rule_matches_total", PROMTEXT_COUNTER,
                            "Requests each rule matched (first match), by rule index.");
            char idx[16];
            promtext_label_t ml[] = {{"node", m->name}, {"rule", idx}};
            for (int i = 0; i < gs.rules; i++) {
                snprintf(idx, sizeof idx, "%d", i);
                promtext_value(p, ml, 2, (double)gs.rule_matches[i]);
            }
        }
    }
    promtext_family(p, "bqos_node_reloads_total", PROMTEXT_COUNTER,
                    "SIGHUP reloads by result: ok, or error (a file did not load; it changed "
                    "nothing).");
    promtext_label_t ol[] = {{"node", m->name}, {"result", "ok"}};
    promtext_value(p, ol, 2, (double)m->reloads_ok);
    ol[1].value = "error";
    promtext_value(p, ol, 2, (double)m->reloads_error);
    if (m->backend) {
        nodemetrics_backend_t bh;
        m->backend(m->backend_arg, &bh);
        node_sample(m, p, "bqos_node_backend_up", PROMTEXT_GAUGE,
                    "0 from a failed connect to the backend until one succeeds.", bh.up);
        promtext_family(p, "bqos_node_backend_errors_total", PROMTEXT_COUNTER,
                        "Backend connection errors by kind: connect (a connect failed), io (a "
                        "connection failed in a batch: error, closed, silent 2 s).");
        promtext_label_t bl[] = {{"node", m->name}, {"kind", "connect"}};
        promtext_value(p, bl, 2, (double)bh.connect_errors);
        bl[1].value = "io";
        promtext_value(p, bl, 2, (double)bh.io_errors);
    }
    node_sample(m, p, "bqos_node_policy_rr", PROMTEXT_GAUGE,
                "1 while the scheduler runs plain round robin (no reservations, no limits).",
                gs.policy == SCHED_POLICY_RR);
}

static void render_ctl(const nodemetrics_t *m, promtext_t *p)
{
    ctlclient_stats_t st = {.state = "none"};
    if (m->ctl)
        ctlclient_stats(m->ctl, &st);
    static const char *const states[] = {"none", "waiting", "following", "static", "rr"};
    promtext_family(p, "bqos_node_controller_state", PROMTEXT_GAUGE,
                    "1 for the controller client's state: none (no --controller), waiting "
                    "(never welcomed), following, static or rr (fallback).");
    for (size_t i = 0; i < sizeof states / sizeof states[0]; i++) {
        promtext_label_t l[] = {{"node", m->name}, {"state", states[i]}};
        promtext_value(p, l, 2, strcmp(st.state, states[i]) == 0);
    }
    const node_row_t rows[] = {
        {"bqos_node_fallbacks_total", PROMTEXT_COUNTER,
         "Times the node fell back (controller silent).", (double)st.agent.fallbacks},
        {"bqos_node_resumes_total", PROMTEXT_COUNTER,
         "Times the node followed the controller again.", (double)st.agent.resumes},
        {"bqos_node_static_periods_total", PROMTEXT_COUNTER,
         "Periods started on the remembered grant (fallback static).",
         (double)st.agent.static_periods},
        {"bqos_node_controller_silent_seconds", PROMTEXT_GAUGE,
         "Seconds since the leading controller last spoke.", st.agent.silent_s},
        {"bqos_node_controller_epoch", PROMTEXT_GAUGE, "Highest leadership epoch seen (0: none).",
         (double)st.agent.epoch},
    };
    node_samples(m, p, rows, sizeof rows / sizeof rows[0]);
}

static void render_buckets(const nodemetrics_t *m, promtext_t *p)
{
    gate_stats_t gs;
    gate_stats(m->g, &gs);
    int n = gs.buckets;
    static const char *const cls[] = {"R", "L", "O"};
    enum { ARRIVALS, SERVED, BYTES, REFUSED, QUEUED, TOKENS, BYTE_TOKENS, CREDIT, HELD, WAIT,
           LATENCY, NFAM };
    static const struct {
        const char *name, *help;
        promtext_type_t type;
    } fam[NFAM] = {
        {"bqos_bucket_arrivals_total", "Requests (IOs) that arrived.", PROMTEXT_COUNTER},
        {"bqos_bucket_served_total",
         "IOs sent to the backend by how they were paid: R (reservation token), L (limit "
         "token), O (opportunistic: no limit, or round robin).", PROMTEXT_COUNTER},
        {"bqos_bucket_served_bytes_total",
         "Data the completed IOs moved (memcached values read or written, NBD READ and WRITE "
         "lengths), by class as bqos_bucket_served_total.", PROMTEXT_COUNTER},
        {"bqos_bucket_requests_refused_total",
         "Requests answered with an error without reaching the backend (out of memory, "
         "refused by the protocol's checks, shutting down).", PROMTEXT_COUNTER},
        {"bqos_bucket_queued", "IOs waiting in the bucket's queue now.", PROMTEXT_GAUGE},
        {"bqos_bucket_tokens", "Tokens left this period by class (L absent: no limit).",
         PROMTEXT_GAUGE},
        {"bqos_bucket_byte_tokens",
         "Byte tokens left this period by class, for buckets with a rate in bytes/s "
         "(negative: a debt of larger requests; L absent: no byte limit).", PROMTEXT_GAUGE},
        {"bqos_bucket_credit_wait_seconds",
         "Pacing: seconds until the class's credit returns, by dimension (io, bytes) and class "
         "(0: there now; +Inf: not under this grant; absent: not paced).", PROMTEXT_GAUGE},
        {"bqos_bucket_held",
         "1 while the bucket has queued requests it may not serve for want of this reason: "
         "io_tokens, io_credit, byte_tokens, byte_credit (pacing).", PROMTEXT_GAUGE},
        {"bqos_bucket_wait_seconds_total",
         "Time the completed IOs waited at the node before the backend (queue, throttling, "
         "same-key order).", PROMTEXT_COUNTER},
        {"bqos_bucket_latency_seconds",
         "IOs from arrival at the node to the backend's completion.", PROMTEXT_HISTOGRAM},
    };
    const iolat_t *lat = gate_iolat(m->g);
    static const iolat_bucket_t none;
    double now = mono_now(); /* the scheduler's clock (gate_take()) */
    for (int f = 0; f < NFAM; f++) {
        promtext_family(p, fam[f].name, fam[f].type, fam[f].help);
        for (int b = 0; b < n; b++) {
            sched_bucket_stats_t bs;
            const char *name = gate_bucket_stats(m->g, b, &bs);
            if (!name)
                continue;
            const totals_t *t = b < m->cap ? &m->tot[b] : &(totals_t){0};
            promtext_label_t l[] = {{"node", m->name}, {"bucket", name},
                                    {"class", NULL}};
            const uint64_t served[3] = {bs.served_r, bs.served_l, bs.served_o};
            switch (f) {
            case ARRIVALS:
                promtext_u64(p, l, 2, t->arrivals + bs.arrivals);
                break;
            case SERVED:
                for (int c = 0; c < 3; c++) {
                    l[2].value = cls[c];
                    promtext_u64(p, l, 3, t->served[c] + served[c]);
                }
                break;
            case QUEUED:
                promtext_u64(p, l, 2, bs.queued);
                break;
            case BYTES:
            case REFUSED:
            case WAIT:
            case LATENCY: {
                const iolat_bucket_t *lb = iolat_bucket(lat, b);
                lb = lb ? lb : &none;
                if (f == BYTES)
                    for (int c = 0; c < 3; c++) {
                        l[2].value = cls[c];
                        promtext_u64(p, l, 3, lb->bytes[c]);
                    }
                else if (f == REFUSED)
                    promtext_u64(p, l, 2, lb->refused);
                else if (f == WAIT)
                    promtext_value(p, l, 2, lb->wait);
                else
                    promtext_histogram(p, l, 2, iolat_bounds, IOLAT_NBOUNDS, lb->counts, lb->sum);
                break;
            }
            case TOKENS:
                l[2].value = "R";
                promtext_value(p, l, 3, (double)bs.r_tokens);
                if (bs.l_tokens != SCHED_UNLIMITED) {
                    l[2].value = "L";
                    promtext_value(p, l, 3, (double)bs.l_tokens);
                }
                break;
            case BYTE_TOKENS:
                if (!bs.units_on)
                    break;
                l[2].value = "R";
                promtext_value(p, l, 3, (double)bs.ru_tokens * m->unit);
                if (bs.lu_tokens != SCHED_UNLIMITED) {
                    l[2].value = "L";
                    promtext_value(p, l, 3, (double)bs.lu_tokens * m->unit);
                }
                break;
            case CREDIT: {
                const double wake[4] = {bs.r_wake, bs.l_wake, bs.ru_wake, bs.lu_wake};
                for (int i = 0; i < 4; i++) {
                    if (isnan(wake[i]))
                        continue;
                    promtext_label_t cl[] = {l[0], l[1], {"dimension", i < 2 ? "io" : "bytes"},
                                             {"class", cls[i % 2]}};
                    promtext_value(p, cl, 4, wake[i] > now ? wake[i] - now : 0);
                }
                break;
            }
            case HELD:
                for (int i = 0; i < SCHED_HELD_NREASONS; i++) {
                    promtext_label_t hl[] = {l[0], l[1], {"reason", sched_held_reason(i)}};
                    promtext_value(p, hl, 3, (bs.held >> i) & 1);
                }
            }
        }
    }
}

/* Limits and roll-out (issue 28): the scheduler's cumulative counters
 * per bucket, and which buckets are in shadow. */
static void render_limits(const nodemetrics_t *m, promtext_t *p)
{
    gate_stats_t gs;
    gate_stats(m->g, &gs);
    static const struct {
        const char *name, *help;
        promtext_type_t type;
    } fam[] = {
        {"bqos_bucket_shadow", "1 while the bucket's limit is in shadow: counted, not enforced.",
         PROMTEXT_GAUGE},
        {"bqos_bucket_shadow_held_total",
         "IOs of a bucket in shadow served that its limit would have held.", PROMTEXT_COUNTER},
        {"bqos_bucket_waited_for_limit_total",
         "IOs that waited in the queue while their bucket was held by its limit (no "
         "L-token or L credit to pay, and no usable R), counted once each as the hold "
         "ends.", PROMTEXT_COUNTER},
        {"bqos_bucket_near_limit_total",
         "Periods that ended with the bucket served above 80% of what its limit let it do "
         "at this node (its service plus the tokens it had left).", PROMTEXT_COUNTER},
    };
    for (size_t f = 0; f < sizeof fam / sizeof fam[0]; f++) {
        promtext_family(p, fam[f].name, fam[f].type, fam[f].help);
        for (int b = 0; b < gs.buckets; b++) {
            sched_bucket_stats_t bs;
            const char *name = gate_bucket_stats(m->g, b, &bs);
            if (!name)
                continue;
            promtext_label_t l[] = {{"node", m->name}, {"bucket", name}};
            uint64_t v = f == 0 ? (uint64_t)bs.shadow : f == 1 ? bs.shadow_held_total
                       : f == 2 ? bs.waited_limit_total : bs.near_limit_total;
            promtext_u64(p, l, 2, v);
        }
    }
}

void nodemetrics_render(void *arg, promtext_t *out)
{
    const nodemetrics_t *m = arg;
    render_node(m, out);
    render_ctl(m, out);
    render_buckets(m, out);
    render_limits(m, out);
}
