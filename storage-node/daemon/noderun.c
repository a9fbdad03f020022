/* noderun.c - what both node kinds (memcached and block) do around their front: bucket and token files, the controller client, signals, the event loop. */
#include "storage-node/daemon/noderun.h"

#include <errno.h>
#include <math.h>
#include <event2/event.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
#include <unistd.h>

#include "common/bucketfile.h"
#include "common/log.h"
#include "common/metricsd.h"
#include "common/mono.h"
#include "common/notify.h"
#include "common/privdrop.h"
#include "common/shardgen.h"
#include "common/shardmap.h"
#include "storage-node/daemon/ctlclient.h"
#include "storage-node/daemon/nodeconf.h"
#include "storage-node/daemon/nodemetrics.h"

struct run;

/* Controller shards (--controller with ';' between the shards' endpoint
 * lists): one controller client per shard, each with these agent ops
 * around the node's (docs/controller.md "Shards", "Nodes"). */
typedef struct {
    struct run *r;
    int shard;
    unsigned char *listed; /* the shard's last table: its buckets (nlisted) */
    int nlisted;
} session_t;

typedef struct run {
    gate_t *g;
    const noderun_config_t *cfg;
    int has_default;       /* the bucket file being loaded names `default` */
    unsigned char *listed; /* ... and the buckets it names (nlisted) */
    int nlisted;
    int ctl_table;         /* a controller's table was applied: it decides */
    ctlclient_t *ctl;      /* the controller client (with shards: shard 0's,
                              for the metrics and the single stats lines) */
    nodemetrics_t *nm;     /* with --metrics-listen, else NULL */
    int shards;            /* 0: none; else ctls[shards], sess[shards] */
    ctlclient_t **ctls;
    session_t *sess;
    int16_t *bshard;       /* [nbshard]: scheduler bucket b's shard under
                              sg.k (and bnext under sg.next_k: both maps
                              cached while K changes; anew when sg moves) */
    int16_t *bnext;
    int nbshard, capbshard;
    shardgen_t sg;         /* the cluster's shards as the node follows them
                              (K changing at run time): --shards until a
                              controller says, then only forward
                              (shardgen_newer()); `shards` is the slots */
    int sg_known;          /* sg came from a controller */
    uint64_t sg_changes;   /* times sg moved */
    double sg_warn;        /* next "more shards than slots" warning */
    uint64_t tokens_refused; /* a shard's tokens for another shard's bucket */
    double period_at;      /* shards: when a session last started the
                              scheduler's period (mono_now()); 0: never */
    uint64_t periods_offgrid; /* shards: sessions' period starts more than
                                 an eighth of the period off the wall
                                 clock's multiples of it, where every
                                 shard's periods start (sess_period_start()) */
} run_t;

/* The identities active in the node's buckets changed (io/who.h): to the
 * controllers, which answer bqos-ctl who. */
static void send_who(void *arg, const char *text, size_t len)
{
    const run_t *r = arg;
    for (int i = 0; i < (r->shards ? r->shards : 1); i++)
        ctlclient_send_who(r->shards ? r->ctls[i] : r->ctl, text, len);
}

void noderun_prepare(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    signal(SIGPIPE, SIG_IGN);
}

/* nodeconf callbacks */
static int add_bucket(void *arg, const char *name, uint32_t weight)
{
    run_t *r = arg;
    r->has_default |= strcmp(name, "default") == 0;
    int b = gate_bucket(r->g, name, strlen(name), 1), rc;
    if (b >= 0 && (rc = gate_set_weight(r->g, b, weight)) < 0)
        return rc;
    if (b >= r->nlisted) {
        unsigned char *p = realloc(r->listed, (size_t)b + 1);
        if (!p)
            return -ENOMEM;
        memset(p + r->nlisted, 0, (size_t)(b + 1 - r->nlisted));
        r->listed = p;
        r->nlisted = b + 1;
    }
    if (b >= 0)
        r->listed[b] = 1;
    return b;
}

static int set_tokens(void *arg, const char *name, int64_t rt, int64_t lt)
{
    const run_t *r = arg;
    return gate_set_tokens(r->g, name, rt, lt);
}

/* The agent's hooks (agent_ops_t, given to the controller client): they
 * act through the gate so that what new tokens or a policy switch allow is
 * dispatched at once.  Tokens go to the scheduler by index, as grants that
 * end with the period (paced; the agent sets them itself); the `applied`
 * hook then kicks the front once per message. */
static int ctl_bucket(void *arg, const char *name)
{
    const run_t *r = arg;
    return gate_bucket(r->g, name, strlen(name), 1); /* found: keeps --config weights */
}

static void ctl_set_policy(void *arg, sched_policy_t policy)
{
    const run_t *r = arg;
    gate_set_policy(r->g, policy);
}

/* A period ends (the controller client's, or SIGUSR1): the exporter keeps
 * the counters the scheduler is about to zero. */
static void period_start(void *arg)
{
    const run_t *r = arg;
    if (r->nm)
        nodemetrics_period_end(r->nm);
    gate_period_start(r->g);
    if (r->ctl) { /* template buckets: their rule's R and L for this period (issue 27) */
        ctlclient_stats_t st;
        ctlclient_stats(r->ctl, &st);
        gate_template_period(r->g, st.agent.period_s);
    }
}

/* A controller's table was applied: from now on it is the node's table
 * (fail closed without a `default`, gate.h). */
static void ctl_table(void *arg, int has_default, const unsigned char *listed, int n)
{
    run_t *r = arg;
    gate_table_t t = has_default ? GATE_TABLE_DEFAULT : GATE_TABLE_CLOSED;
    if (gate_set_listed(r->g, listed, n) < 0) {
        log_error("out of memory taking the controller's bucket table: keys of any bucket "
                  "are refused");
        gate_set_listed(r->g, NULL, 0);
    }
    if (t == GATE_TABLE_CLOSED && (gate_table(r->g) != t || !r->ctl_table))
        log_warn("the controller's bucket table has no `default` bucket: keys of buckets it "
                 "does not list are refused (CLIENT_ERROR unknown bucket)");
    r->ctl_table = 1;
    gate_set_table(r->g, t);
    gate_template_cluster(r->g, 1); /* the controller holds template buckets (issue 27) */
}

/* Where the controller's last rule list is kept for a restart without a
 * controller: beside --config, "CONFIG.rules" (NULL without --config: not
 * kept).  Caller frees. */
static char *rules_state_path(const run_t *r)
{
    char *p = NULL;
    if (r->cfg->config && asprintf(&p, "%s.rules", r->cfg->config) < 0)
        p = NULL;
    return p;
}

/* Writes the rule list of `version` (JSON array text) to the state file
 * atomically (temporary file, fsync, rename).  Returns 0 or -errno. */
static int save_rules(const run_t *r, uint64_t version, const char *text)
{
    char *path = rules_state_path(r), *tmp = NULL;
    int rc = 0;
    if (!path)
        return 0;
    if (asprintf(&tmp, "%s.tmp", path) < 0) {
        free(path);
        return -ENOMEM;
    }
    FILE *f = fopen(tmp, "w");
    if (!f) {
        rc = -errno;
        goto out;
    }
    fprintf(f, "{\"rules_version\": %llu,\n \"rules\": %s}\n", (unsigned long long)version,
            *text ? text : "[]");
    if (fflush(f) != 0 || fsync(fileno(f)) != 0)
        rc = -errno;
    if (fclose(f) != 0 && !rc)
        rc = -errno;
    if (!rc && rename(tmp, path) != 0)
        rc = -errno;
out:
    if (rc)
        unlink(tmp);
    free(tmp);
    free(path);
    return rc;
}

/* Loads the rules the controller last pushed (the state file), if any:
 * they classify until a controller speaks.  A file that does not parse
 * stops the start (fail closed: its rules may have refused what --config
 * would serve).  Returns 0 or -errno (logged). */
static int load_saved_rules(run_t *r)
{
    char *path = rules_state_path(r);
    if (!path)
        return 0;
    FILE *f = fopen(path, "r");
    if (!f) {
        int rc = errno == ENOENT ? 0 : -errno;
        if (rc)
            log_error("%s: %s", path, strerror(-rc));
        free(path);
        return rc;
    }
    char *text = NULL;
    size_t cap = 0, len = 0;
    int rc = 0;
    for (;;) {
        if (len + 4096 + 1 > cap) {
            char *t = realloc(text, cap = cap * 2 + 8192);
            if (!t) {
                rc = -ENOMEM;
                break;
            }
            text = t;
        }
        size_t n = fread(text + len, 1, cap - len - 1, f);
        len += n;
        if (n == 0)
            break;
    }
    fclose(f);
    rules_t *rl = NULL;
    jsonloc_err_t e;
    char buf[700];
    unsigned long long version = 0;
    if (!rc) {
        text[len] = 0;
        rc = rules_parse(text, len, path, &rl, &e);
        if (rc < 0)
            log_error("the saved rules do not load (remove the file to start without them): %s",
                      bucketfile_strerror(&e, buf, sizeof buf));
        const char *v = strstr(text, "\"rules_version\":");
        if (v)
            version = strtoull(v + 16, NULL, 10);
    }
    free(text);
    if (rc == 0) {
        log_info("%s: %zu rules (version %llu) the controller last pushed: requests are "
                 "classified by them until a controller speaks", path, rules_count(rl), version);
        gate_set_rules(r->g, rl, version ? version : 1);
    }
    free(path);
    return rc;
}

/* The leader's rule list (agent_ops_t.rules): parsed, made the node's and
 * kept in the state file.  A list that does not parse changes nothing
 * (logged; the controller validated it, so this is a bug or a newer
 * syntax). */
static int ctl_rules(void *arg, uint64_t version, const char *text, size_t len)
{
    run_t *r = arg;
    rules_t *rl = NULL;
    jsonloc_err_t e;
    char buf[700];
    int rc = len ? rules_parse(text, len, "controller", &rl, &e) : 0;
    if (rc < 0) {
        log_error("rules version %llu from the controller refused, the old ones stay: %s",
                  (unsigned long long)version, bucketfile_strerror(&e, buf, sizeof buf));
        return rc;
    }
    if (version || gate_has_rules(r->g)) /* a list, or the end of one (not every welcome) */
        log_info("rules version %llu from the controller: %zu rules", (unsigned long long)version,
                 rules_count(rl));
    gate_set_rules(r->g, rl, version);
    if ((rc = save_rules(r, version, len ? text : "")) < 0)
        log_warn("cannot keep the controller's rules for a restart: %s", strerror(-rc));
    return 0;
}

static void ctl_applied(void *arg)
{
    const run_t *r = arg;
    gate_kick(r->g);
}

/* The controller client's state as `stats` lines (gate_set_status()). */
static void ctl_status(void *arg, FILE *fp)
{
    const run_t *r = arg;
    ctlclient_stats_t st;
    ctlclient_stats(r->ctl, &st);
    fprintf(fp, "STAT bqos_ctl_state %s\r\n", st.state);
    fprintf(fp, "STAT bqos_ctl_fallback_mode %s\r\n", agent_mode_str(st.agent.mode));
    fprintf(fp, "STAT bqos_ctl_welcomed %d\r\n", st.agent.welcomed);
    fprintf(fp, "STAT bqos_ctl_endpoints %d\r\n", st.endpoints);
    fprintf(fp, "STAT bqos_ctl_leader %s\r\n", st.leader_endpoint ? st.leader_endpoint : "none");
    fprintf(fp, "STAT bqos_ctl_epoch %llu\r\n", (unsigned long long)st.agent.epoch);
    fprintf(fp, "STAT bqos_ctl_silent_seconds %.3f\r\n", st.agent.silent_s);
    fprintf(fp, "STAT bqos_ctl_fallbacks %llu\r\n", (unsigned long long)st.agent.fallbacks);
    fprintf(fp, "STAT bqos_ctl_resumes %llu\r\n", (unsigned long long)st.agent.resumes);
    fprintf(fp, "STAT bqos_ctl_static_periods %llu\r\n", (unsigned long long)st.agent.static_periods);
    fprintf(fp, "STAT bqos_ctl_fallback_lease %u\r\n", st.agent.lease);
    fprintf(fp, "STAT bqos_ctl_lease_periods %llu\r\n", (unsigned long long)st.agent.lease_periods);
    fprintf(fp, "STAT bqos_ctl_unreachable_warnings %llu\r\n",
            (unsigned long long)st.agent.warn_unreachable);
    fprintf(fp, "STAT bqos_ctl_stale_epoch %llu\r\n", (unsigned long long)st.agent.stale_epoch);
    fprintf(fp, "STAT bqos_ctl_period %llu\r\n", (unsigned long long)st.agent.period);
    fprintf(fp, "STAT bqos_ctl_tokens_applied %llu\r\n", (unsigned long long)st.agent.tokens_applied);
    fprintf(fp, "STAT bqos_ctl_messages %llu\r\n",
            (unsigned long long)(st.agent.recv_welcome + st.agent.recv_tokens + st.agent.recv_heartbeat +
                                 st.agent.recv_error));
    if (!r->shards)
        return;
    /* with shards the lines above are shard 0's; each shard's own: */
    fprintf(fp, "STAT bqos_ctl_shards %d\r\n", r->shards);
    fprintf(fp, "STAT bqos_ctl_shards_k %d\r\n", r->sg.k);
    fprintf(fp, "STAT bqos_ctl_shards_gen %llu\r\n", (unsigned long long)r->sg.gen);
    fprintf(fp, "STAT bqos_ctl_shards_next_k %d\r\n", r->sg.next_k);
    fprintf(fp, "STAT bqos_ctl_shards_from_ms %lld\r\n", (long long)r->sg.from_ms);
    fprintf(fp, "STAT bqos_ctl_shards_changes %llu\r\n", (unsigned long long)r->sg_changes);
    fprintf(fp, "STAT bqos_ctl_shard_tokens_refused %llu\r\n",
            (unsigned long long)r->tokens_refused);
    fprintf(fp, "STAT bqos_ctl_shards_periods_offgrid %llu\r\n",
            (unsigned long long)r->periods_offgrid);
    for (int i = 0; i < r->shards; i++) {
        ctlclient_stats(r->ctls[i], &st);
        fprintf(fp, "STAT bqos_ctl_shard%d_state %s\r\n", i, st.state);
        fprintf(fp, "STAT bqos_ctl_shard%d_epoch %llu\r\n", i, (unsigned long long)st.agent.epoch);
        fprintf(fp, "STAT bqos_ctl_shard%d_leader %s\r\n", i,
                st.leader_endpoint ? st.leader_endpoint : "none");
        fprintf(fp, "STAT bqos_ctl_shard%d_fallbacks %llu\r\n", i,
                (unsigned long long)st.agent.fallbacks);
        fprintf(fp, "STAT bqos_ctl_shard%d_tokens_applied %llu\r\n", i,
                (unsigned long long)st.agent.tokens_applied);
        fprintf(fp, "STAT bqos_ctl_shard%d_tables_refused %llu\r\n", i,
                (unsigned long long)st.shard_refused);
    }
}

/* The controller client's state at exit, for the log (both node kinds). */
static void ctl_log(const ctlclient_t *ctl)
{
    ctlclient_stats_t st;
    ctlclient_stats(ctl, &st);
    log_info("controller client: state %s (fallback %s), epoch %llu, leader %s, fallbacks %llu, "
             "resumes %llu, static periods %llu, stale epoch %llu, tokens applied %llu",
             st.state, agent_mode_str(st.agent.mode), (unsigned long long)st.agent.epoch,
             st.leader_endpoint ? st.leader_endpoint : "none", (unsigned long long)st.agent.fallbacks,
             (unsigned long long)st.agent.resumes, (unsigned long long)st.agent.static_periods,
             (unsigned long long)st.agent.stale_epoch, (unsigned long long)st.agent.tokens_applied);
}

/* --config's "rules" (common/rules.h) become the node's rules, unless a
 * controller's rules are in force; a file without the member clears them.
 * Returns 0 or -errno (logged). */
static int load_config_rules(run_t *r)
{
    if (gate_rules_version(r->g))
        return 0; /* a controller's (version > 0) */
    bucketfile_t *bf = NULL;
    jsonloc_err_t e;
    char buf[600];
    int rc = bucketfile_load(r->cfg->config, &bf, &e);
    if (rc < 0) {
        log_error("%s", bucketfile_strerror(&e, buf, sizeof buf));
        return rc;
    }
    rules_t *rl = bucketfile_rules(bf) ? rules_dup(bucketfile_rules(bf)) : NULL;
    if (bucketfile_rules(bf) && !rl) {
        bucketfile_destroy(&bf);
        return -ENOMEM;
    }
    bucketfile_destroy(&bf);
    if (rl || gate_has_rules(r->g))
        log_info("%s: %zu rules: requests are classified by them", r->cfg->config,
                 rules_count(rl));
    gate_set_rules(r->g, rl, 0);
    return 0;
}

/* Loads --config and, if it loads, makes it the node's bucket table: a
 * request of a bucket it lacks goes to its `default` or, without one, is
 * refused (gate_set_table(), fail closed).  Returns 0 or -errno (logged). */
static int load_config(run_t *r)
{
    r->has_default = 0;
    if (r->listed)
        memset(r->listed, 0, (size_t)r->nlisted);
    int rc = nodeconf_load_buckets(r->cfg->config, add_bucket, r);
    if (rc < 0)
        return rc;
    if (r->ctl_table)
        return 0; /* the controller's table decides, not --config */
    if ((rc = load_config_rules(r)) < 0)
        return rc;
    gate_table_t t = r->has_default ? GATE_TABLE_DEFAULT : GATE_TABLE_CLOSED;
    if ((rc = gate_set_listed(r->g, r->listed, r->nlisted)) < 0)
        return rc;
    if (t == GATE_TABLE_CLOSED && gate_table(r->g) != GATE_TABLE_CLOSED)
        log_warn("%s has no `default` bucket: keys of buckets it does not list are refused "
                 "(CLIENT_ERROR unknown bucket); add a `default` with a limit to serve them",
                 r->cfg->config);
    gate_set_table(r->g, t);
    return 0;
}

/* SIGHUP: the node's CURVE keys again (ctlclient_reload_keys()), logged. */
static int reload_keys(ctlclient_t *ctl)
{
    jsonloc_err_t e;
    char buf[600];
    int rc = ctl ? ctlclient_reload_keys(ctl, &e) : 0;
    if (rc < 0)
        log_error("SIGHUP: CURVE keys not reloaded, the old ones stay: %s",
                  bucketfile_strerror(&e, buf, sizeof buf));
    else if (rc > 0)
        log_info("SIGHUP: CURVE keys changed: connecting to the controllers anew");
    return rc < 0 ? rc : 0;
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
    (void)what;
    run_t *r = arg;
    if (sig == SIGHUP) { /* files that do not load are logged and change nothing */
        log_info("SIGHUP: reloading%s%s%s%s", r->cfg->config ? " " : "",
                 r->cfg->config ? r->cfg->config : "", r->cfg->tokens_file ? " " : "",
                 r->cfg->tokens_file ? r->cfg->tokens_file : "");
        int ok = 1;
        if (r->cfg->config && load_config(arg) < 0)
            ok = 0;
        if (r->cfg->tokens_file && nodeconf_load_tokens(r->cfg->tokens_file, set_tokens, arg) < 0)
            ok = 0;
        if (r->cfg->reload && r->cfg->reload(r->cfg->reload_arg) < 0)
            ok = 0;
        for (int i = 0; i < (r->shards ? r->shards : 1); i++)
            if (reload_keys(r->shards ? r->ctls[i] : r->ctl) < 0)
                ok = 0;
        if (r->nm)
            nodemetrics_reloaded(r->nm, ok);
        return;
    }
    if (sig == SIGUSR1) {
        period_start(arg);
        if (r->cfg->tokens_file)
            nodeconf_load_tokens(r->cfg->tokens_file, set_tokens, arg);
        else
            log_warn("SIGUSR1 without --tokens-file: counters zeroed, tokens kept");
        return;
    }
    log_info("signal %d: shutting down", (int)sig);
    notify_stopping();
    gate_shutdown(r->g);
}

static void on_metrics(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    metricsd_serve(arg);
}

/* metricsd_ready_fn (/readyz): a bucket table (--config; the fronts'
 * own "default" or --buckets do not count), a controller's welcome (which
 * brings its table), or no controller to wait for.  Loop thread. */
static int node_ready(void *arg, char *why, size_t cap)
{
    const run_t *r = arg;
    ctlclient_stats_t cs;
    if (!r->ctl || r->cfg->config)
        return 1;
    int k = r->shards ? (r->sg.k < r->shards ? r->sg.k : r->shards) : 1;
    for (int i = 0; i < k; i++) { /* every shard's table (of the map: slots beyond wait) */
        ctlclient_stats(r->shards ? r->ctls[i] : r->ctl, &cs);
        if (!cs.agent.welcomed) {
            snprintf(why, cap, "no bucket table and no controller's welcome yet%s",
                     r->shards ? " (from every shard)" : "");
            return 0;
        }
    }
    return 1;
}

/* The exporter (r->nm), its HTTP endpoint (*md) and the loop's watch on it
 * (*ev).  Returns 0 or -errno (what was made is the caller's to free). */
static int start_metrics(struct event_base *base, run_t *r, metricsd_t **md, struct event **ev)
{
    int err = 0;
    if (!(r->nm = nodemetrics_new(r->g, r->cfg->name, r->cfg->kind)))
        return -ENOMEM;
    gate_set_iolat(r->g, nodemetrics_iolat(r->nm)); /* the fronts time every IO */
    nodemetrics_set_ctl(r->nm, r->ctl);
    nodemetrics_set_cost_unit(r->nm, r->cfg->cost_unit);
    nodemetrics_set_backend(r->nm, r->cfg->backend, r->cfg->backend_arg);
    if (!(*md = metricsd_new(r->cfg->metrics, nodemetrics_render, r->nm, &err)))
        return err;
    metricsd_set_ready(*md, node_ready, r);
    if (!(*ev = event_new(base, metricsd_fd(*md), EV_READ | EV_PERSIST, on_metrics, *md)) ||
        event_add(*ev, NULL) < 0)
        return -ENOMEM;
    log_info("metrics on http://%s/metrics", metricsd_address(*md));
    return 0;
}

/* The agent's base_latency hook: the backend's unloaded latency for the
 * report's "base_us" (issue 25). */
static double ctl_base_latency(void *arg)
{
    const run_t *r = arg;
    return gate_base_latency(r->g);
}


/* ---- controller shards: one session per shard ---------------------------- */

/* The shard of scheduler bucket b in the period at hand (its name's under
 * the map in force now, sg's; cached per map: names never change), or -1
 * for a bad index or out of memory. */
static int bucket_shard(run_t *r, int b)
{
    sched_t *sc = gate_sched(r->g);
    if (b < 0 || b >= sched_nbuckets(sc))
        return -1;
    if (b >= r->capbshard) {
        int cap = b + 1 > 2 * r->capbshard ? b + 1 : 2 * r->capbshard;
        int16_t *p = realloc(r->bshard, (size_t)cap * sizeof *p);
        if (!p)
            return -1;
        r->bshard = p;
        if (!(p = realloc(r->bnext, (size_t)cap * sizeof *p)))
            return -1;
        r->bnext = p;
        r->capbshard = cap;
    }
    for (; r->nbshard <= b; r->nbshard++) {
        uint64_t h = shardmap_name_hash(sched_bucket_name(sc, r->nbshard));
        r->bshard[r->nbshard] = (int16_t)shardmap_of_hash(h, r->sg.k);
        r->bnext[r->nbshard] = (int16_t)(r->sg.next_k ? shardmap_of_hash(h, r->sg.next_k) : -1);
    }
    if (!r->sg.next_k)
        return r->bshard[b];
    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    int64_t now_ms = (int64_t)rt.tv_sec * 1000 + rt.tv_nsec / 1000000;
    return shardgen_k_at(&r->sg, now_ms) == r->sg.next_k ? r->bnext[b] : r->bshard[b];
}

/* ctlclient's on_shards: a controller's message says the cluster's shards
 * configuration.  A newer one than the node's (or the first) is followed:
 * the bucket cache anew and every session remapped (its hello again).
 * An invalid one is ignored (proto checked it already). */
static void sess_on_shards(void *arg, const proto_msg_t *m, double now)
{
    run_t *r = arg;
    shardgen_t g = {.k = (int)m->shards_k, .gen = m->shards_gen, .next_k = (int)m->shards_next,
                    .next_gen = m->shards_next ? m->shards_gen + 1 : 0,
                    .from_ms = (int64_t)m->shards_from};
    if (!shardgen_valid(&g) || (r->sg_known && !shardgen_newer(&g, &r->sg)))
        return;
    r->sg = g;
    r->sg_known = 1;
    r->sg_changes++;
    r->nbshard = 0;
    if (shardgen_kmax(&g) > r->shards && now >= r->sg_warn) {
        r->sg_warn = now + 60;
        log_warn("the cluster runs up to %d controller shards but --controller lists %d: the "
                 "buckets of the others get no tokens here (fail closed); give every slot's "
                 "endpoints", shardgen_kmax(&g), r->shards);
    }
    if (g.next_k)
        log_info("controller shards: K = %d (generation %llu), changing to K = %d from "
                 "wall-clock ms %lld", g.k, (unsigned long long)g.gen, g.next_k,
                 (long long)g.from_ms);
    else
        log_info("controller shards: K = %d (generation %llu)", g.k, (unsigned long long)g.gen);
    for (int i = 0; i < r->shards; i++)
        if (ctlclient_remap(r->ctls[i], now) == -ENOMEM)
            log_error("controller shard %d: cannot map the buckets anew (out of memory)", i);
}

static int sess_bucket(void *arg, const char *name)
{
    return ctl_bucket(((session_t *)arg)->r, name);
}

/* A shard's agent sets only its shard's buckets: its tokens, and the
 * static fallback's renewal of its last grant (which covers every bucket
 * of the scheduler).  Another shard's bucket is refused (-EPERM, counted):
 * fail closed, each shard is the only one to grant its buckets. */
static int sess_set_tokens(void *arg, int b, int64_t rt, int64_t lt, double until, double now)
{
    session_t *ss = arg;
    if (bucket_shard(ss->r, b) != ss->shard) {
        ss->r->tokens_refused++;
        return -EPERM;
    }
    return sched_set_tokens(gate_sched(ss->r->g), b, rt, lt, until, now);
}

static void sess_set_policy(void *arg, sched_policy_t policy)
{
    ctl_set_policy(((session_t *)arg)->r, policy);
}

/* The scheduler has one period, the shards' sessions one each: their
 * controllers start periods on whole multiples of the period of the wall
 * clock, so the sessions' period starts come within milliseconds of each
 * other, in any order.  The first of them starts the scheduler's period;
 * the others, within half a period of it, only start their agents'
 * counters.  (Served in a shard's last milliseconds of a period then
 * counts in its next one: conservative.  The other order, a session's
 * report of its new period taken before the scheduler's counters restart,
 * would count a whole period's service twice: 0 tokens for a period.)
 * A start more than an eighth of the period off the wall clock's
 * multiples of it (a session whose clock left the shards' phase: a new
 * leader's numbering met mid-period, a clock that idled) is counted, and
 * starts the scheduler's period only when the boundary's start is overdue
 * (7/8 of a period since the last): else it would restart every bucket's
 * counters mid-period and make the next boundary's start too early to
 * take.  (A node whose wall clock is off the controllers' by more than
 * that has every start off: each then comes a period after the last and
 * is taken, as before.) */
static void sess_period_start(void *arg)
{
    session_t *ss = arg;
    run_t *r = ss->r;
    ctlclient_stats_t st;
    ctlclient_stats(r->ctls[ss->shard], &st);
    double now = mono_now(), p = st.agent.period_s, since = now - r->period_at;
    if (r->period_at > 0 && since < p / 2)
        return;
    if (p > 0) {
        struct timespec rt;
        clock_gettime(CLOCK_REALTIME, &rt);
        double off = fmod((double)rt.tv_sec + rt.tv_nsec / 1e9, p);
        if (off > p / 2)
            off -= p;
        if (fabs(off) > p / 8) { /* a busy loop's lateness is far less */
            r->periods_offgrid++;
            if (r->period_at > 0 && since < p * 7 / 8)
                return;
        }
    }
    r->period_at = now;
    period_start(r);
}

static void sess_applied(void *arg)
{
    ctl_applied(((session_t *)arg)->r);
}

/* A shard's table: the node's table is the union of the shards' last
 * tables (a bucket of a shard not heard yet is refused, fail closed). */
static void sess_table(void *arg, int has_default, const unsigned char *listed, int n)
{
    session_t *ss = arg;
    run_t *r = ss->r;
    unsigned char *mine = realloc(ss->listed, (size_t)(n > 0 ? n : 1));
    if (!mine) {
        ctl_table(r, 0, NULL, 0); /* refuses every key (logged) */
        return;
    }
    memcpy(mine, listed, (size_t)n);
    ss->listed = mine;
    ss->nlisted = n;
    int most = 0;
    for (int i = 0; i < r->shards; i++)
        if (r->sess[i].nlisted > most)
            most = r->sess[i].nlisted;
    unsigned char *all = calloc((size_t)(most > 0 ? most : 1), 1);
    if (!all) {
        ctl_table(r, 0, NULL, 0);
        return;
    }
    for (int i = 0; i < r->shards; i++)
        for (int b = 0; b < r->sess[i].nlisted; b++)
            all[b] |= r->sess[i].listed[b];
    ctl_table(r, has_default, all, most);
    free(all);
}

static int sess_rules(void *arg, uint64_t version, const char *text, size_t len)
{
    return ctl_rules(((session_t *)arg)->r, version, text, len);
}

static double sess_base_latency(void *arg)
{
    return ctl_base_latency(((session_t *)arg)->r);
}

/* Cuts `list` ("A,B;C,D": shards separated by ';') into its shards' lists,
 * in place.  Returns the number of shards (1: no ';'), or -EINVAL (an
 * empty list, more than SHARDMAP_MAX). */
static int split_shards(char *list, char **out, int max)
{
    int k = 0;
    for (char *p = list;;) {
        char *semi = strchr(p, ';');
        if (semi)
            *semi = '\0';
        if (!*p || k == max)
            return -EINVAL;
        out[k++] = p;
        if (!semi)
            return k;
        p = semi + 1;
    }
}

/* With shards, starts one controller client per shard (cc: the settings
 * but the endpoints and the shard), each with the session ops.  Returns 0
 * or -errno (logged; what was made is freed by the caller's cleanup). */
static int start_sessions(struct event_base *base, run_t *r, const ctlclient_config_t *cc,
                          char *list)
{
    char *lists[SHARDMAP_MAX];
    int k = split_shards(list, lists, SHARDMAP_MAX), err = 0;
    if (k < 0) {
        log_error("--controller %s: shards separated by ';', none empty, at most %d",
                  r->cfg->controller, SHARDMAP_MAX);
        return k;
    }
    r->shards = k; /* slots: --shards K of them in the map until a controller says */
    r->sg = shardgen_steady(r->cfg->shards > 0 && r->cfg->shards <= k ? r->cfg->shards : k);
    r->ctls = calloc((size_t)k, sizeof *r->ctls);
    r->sess = calloc((size_t)k, sizeof *r->sess);
    if (!r->ctls || !r->sess)
        return -ENOMEM;
    for (int i = 0; i < k; i++) {
        r->sess[i] = (session_t){.r = r, .shard = i};
        ctlclient_config_t c = *cc;
        c.endpoint = lists[i];
        c.shards = k;
        c.shard = i;
        c.sg = &r->sg;
        c.on_shards = sess_on_shards;
        c.shards_arg = r;
        agent_ops_t ops = {.bucket = sess_bucket, .set_tokens = sess_set_tokens,
                           .set_policy = sess_set_policy, .period_start = sess_period_start,
                           .applied = sess_applied, .table = sess_table, .rules = sess_rules,
                           .base_latency = sess_base_latency, .arg = &r->sess[i]};
        r->ctls[i] = ctlclient_new(&c, gate_sched(r->g), &ops, &err);
        if (!r->ctls[i] || (err = ctlclient_attach(r->ctls[i], base)) < 0) {
            log_error("--controller %s (shard %d): %s", lists[i], i, strerror(-err));
            return err;
        }
    }
    r->ctl = r->ctls[0];
    log_info("controller shards: %d, one session each; a shard's tokens set only its buckets", k);
    return 0;
}

/* Frees the sessions (goodbye to each). */
static void stop_sessions(run_t *r)
{
    for (int i = 0; r->ctls && i < r->shards; i++) {
        if (r->ctls[i])
            ctl_log(r->ctls[i]);
        ctlclient_destroy(&r->ctls[i]);
    }
    for (int i = 0; r->sess && i < r->shards; i++)
        free(r->sess[i].listed);
    free(r->ctls);
    free(r->sess);
    free(r->bshard);
    free(r->bnext);
    r->ctls = NULL;
    r->sess = NULL;
    r->ctl = NULL;
}

int noderun_run(struct event_base *base, gate_t *g, const noderun_config_t *cfg)
{
    int rc = -1, err = 0;
    run_t r = {.g = g, .cfg = cfg};
    ctlclient_t *ctl = NULL;
    char *shard_list = NULL; /* --controller cut at its ';' (shards) */
    static const int signos[] = {SIGTERM, SIGINT, SIGUSR1, SIGHUP};
    struct event *sigs[4] = {0}, *mev = NULL;
    metricsd_t *md = NULL;

    if (gate_set_pacing(g, cfg->pacing, cfg->burst_s, cfg->r_order) < 0) {
        log_error("bad pacing settings (burst %g s, R order %d)", cfg->burst_s, (int)cfg->r_order);
        goto out;
    }
    log_info("pacing %s (burst %g ms), reservations by %s", cfg->pacing ? "on" : "off",
             cfg->burst_s * 1000, cfg->r_order == SCHED_ORDER_URGENCY ? "urgency" : "round robin");
    if (cfg->config && (load_config(&r) < 0 || load_saved_rules(&r) < 0))
        goto out;
    if (cfg->tokens_file && nodeconf_load_tokens(cfg->tokens_file, set_tokens, &r) < 0)
        goto out;
    if (cfg->controller) {
        ctlclient_config_t cc;
        ctlclient_config_defaults(&cc);
        cc.endpoint = cfg->controller;
        cc.agent.name = cfg->name;
        cc.agent.capacity = cfg->capacity;
        cc.agent.unit = cfg->cost_unit;
        cc.agent.normal = cfg->policy;
        cc.agent.mode = cfg->fallback;
        cc.curve_key = cfg->curve_key;
        cc.controller_key = cfg->controller_key;
        if (cfg->silence > 0)
            cc.agent.silence_intervals = cfg->silence;
        agent_ops_t ops = {.bucket = ctl_bucket, .set_policy = ctl_set_policy,
                           .period_start = period_start, .applied = ctl_applied,
                           .table = ctl_table, .rules = ctl_rules,
                           .base_latency = ctl_base_latency, .arg = &r};
        if (strchr(cfg->controller, ';')) { /* shards: a session each */
            if (cfg->fallback == AGENT_FALLBACK_RR) {
                log_error("--fallback rr with controller shards: one shard's fallback would "
                          "lift every shard's limits (use static)");
                goto out;
            }
            if (!(shard_list = strdup(cfg->controller)) ||
                start_sessions(base, &r, &cc, shard_list) < 0)
                goto out;
        } else {
            ctl = ctlclient_new(&cc, gate_sched(g), &ops, &err);
            if (!ctl || (err = ctlclient_attach(ctl, base)) < 0) {
                log_error("--controller %s: %s", cfg->controller, strerror(-err));
                goto out;
            }
            r.ctl = ctl;
        }
        gate_set_status(g, ctl_status, &r);
        who_set_sink(gate_who(g), send_who, &r); /* bqos-ctl who (issue 27) */
    }
    if (cfg->metrics && (err = start_metrics(base, &r, &md, &mev)) < 0) {
        log_error("--metrics-listen %s: %s", cfg->metrics, strerror(-err));
        goto out;
    }
    if (privdrop_apply(cfg->user) < 0) /* every socket bound, every file open */
        goto out;
    for (int i = 0; i < 4; i++) {
        sigs[i] = evsignal_new(base, signos[i], on_signal, &r);
        if (!sigs[i] || event_add(sigs[i], NULL) < 0) {
            log_error("cannot install signal handlers");
            goto out;
        }
    }
    notify_ready();
    if (event_base_dispatch(base) < 0) {
        log_error("event loop failed");
        goto out;
    }
    rc = 0;
out:
    for (int i = 0; i < 4; i++)
        if (sigs[i])
            event_free(sigs[i]);
    if (mev)
        event_free(mev);
    metricsd_destroy(&md);
    gate_set_iolat(g, NULL);
    nodemetrics_destroy(&r.nm);
    gate_set_status(g, NULL, NULL); /* r goes with this frame */
    free(r.listed);
    if (ctl)
        ctl_log(ctl);
    ctlclient_destroy(&ctl); /* goodbye; before the loop and the scheduler go */
    stop_sessions(&r);
    free(shard_list);
    return rc;
}
