/* main.c - bqos-node (and bqos-nbd-node, the same program): the command line (nodeargs), then the memcached front or the NBD front; bucket and token files, the controller client and signals are noderun's. */
#include <errno.h>
#include <event2/event.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "common/bucketfile.h"
#include "common/curvekey.h"
#include "common/log.h"
#include "storage-node/mc/backend.h"
#include "storage-node/mc/front.h"
#include "storage-node/mc/mcauth.h"
#include "storage-node/nbd/nbdfront.h"
#include "storage-node/daemon/nodeconf.h"
#include "storage-node/daemon/nodeargs.h"
#include "storage-node/daemon/noderun.h"

/* With --outstanding auto, makes g's window adaptive within
 * [--window-min, --window-max].  Returns 0 or -errno (logged). */
static int window_setup(const args_t *a, gate_t *g)
{
    if (a->outstanding != 0)
        return 0;
    window_config_t wc;
    window_config_defaults(&wc);
    wc.floor = a->window_min;
    wc.ceiling = a->window_max;
    wc.target = a->window_latency;
    wc.target_open = a->window_latency_open;
    wc.headroom = a->window_headroom;
    int rc = gate_set_window(g, &wc);
    if (rc < 0)
        log_error("--outstanding auto: %s", strerror(-rc));
    return rc;
}

/* "K", or "auto MIN..MAX" (the start-up log line). */
static const char *window_text(const args_t *a, int k, char *buf, size_t cap)
{
    if (a->outstanding == 0)
        snprintf(buf, cap, "auto %d..%d", a->window_min, a->window_max);
    else
        snprintf(buf, cap, "%d", k);
    return buf;
}

/* What noderun takes from the command line (policy and name as given). */
static noderun_config_t run_config(const args_t *a)
{
    return (noderun_config_t){a->name, a->config, a->tokens_file, a->controller, a->capacity,
                              (sched_policy_t)a->policy, (agent_fallback_t)a->fallback, a->silence,
                              a->pacing, a->burst_s, (sched_order_t)a->r_order, a->curve_key,
                              a->controller_key, a->metrics, a->block ? "block" : "memcached",
                              a->user, NULL, NULL, (uint32_t)a->cost_unit, NULL, NULL, a->shards};
}

/* --cost-*: what a request costs in byte tokens. */
static cost_config_t cost_config(const args_t *a)
{
    return (cost_config_t){.unit = (uint32_t)a->cost_unit, .read_weight = a->cost_read,
                           .write_weight = a->cost_write, .flush = a->cost_flush,
                           .trim = a->cost_trim};
}

/* Descriptors kept apart from client connections: backend connections
 * (`workers`), controller and metrics sockets, log and bucket files,
 * libevent's own. */
#define FD_RESERVE 64

/* Lowers a->max_conns to what RLIMIT_NOFILE allows beside FD_RESERVE +
 * `workers` descriptors, after raising the soft limit towards the hard one
 * if that is short.  Warns when it lowers. */
static void fit_conns_to_fds(args_t *a, int workers)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
        return;
    rlim_t reserve = FD_RESERVE + (rlim_t)(workers > 0 ? workers : 0);
    rlim_t need = (rlim_t)a->max_conns + reserve;
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need) {
        struct rlimit up = rl;
        up.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > need ? need : rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &up) == 0)
            rl = up;
    }
    if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= need)
        return;
    int fit = rl.rlim_cur > reserve ? (int)(rl.rlim_cur - reserve) : 1;
    log_warn("--max-conns %d lowered to %d: the file descriptor limit is %llu (hard %llu) and "
             "%llu are kept for backend connections, controller sockets and files",
             a->max_conns, fit, (unsigned long long)rl.rlim_cur,
             (unsigned long long)rl.rlim_max, (unsigned long long)reserve);
    a->max_conns = fit;
}

/* --max-conns-per-ip and --idle-timeout on the node's connections. */
static int conn_limits(const args_t *a, gate_t *g)
{
    int per_ip = a->per_ip >= 0 ? a->per_ip : (a->max_conns + 1) / 2;
    int rc = conns_set_limits(gate_conns(g), a->block ? 0 : a->idle_timeout, per_ip);
    if (rc < 0)
        log_error("connection limits: %s", strerror(-rc));
    return rc;
}

/* What a SIGHUP reload that returned rc (e filled when rc < 0) logs when it
 * failed: "SIGHUP: <what> not reloaded, the old <kept> stay: <error>".
 * Returns whether it failed (the caller logs a success itself). */
static int reload_failed(int rc, const jsonloc_err_t *e, const char *what, const char *kept)
{
    char buf[512];
    if (rc >= 0)
        return 0;
    log_error("SIGHUP: %s not reloaded, the old %s stay: %s", what, kept,
              bucketfile_strerror(e, buf, sizeof buf));
    return 1;
}

static int tls_setup(const args_t *a, tls_t **tls, nbdtls_mode_t *mode);
static int reload_tls(void *arg);

/* What SIGHUP reads again on a memcached node: --auth-file's users and the
 * TLS files (either may be NULL). */
typedef struct {
    mcauth_t *auth;
    tls_t *tls;
} mc_reload_t;

/* noderun_config_t.reload of a memcached node with --auth-file or TLS: its
 * users again (logged-in connections stay so) and its TLS files (open
 * sessions keep theirs); a file that does not load is logged and changes
 * nothing of its own. */
static int reload_mc(void *arg)
{
    mc_reload_t *r = arg;
    int rc = 0;
    jsonloc_err_t e;
    if (r->auth && reload_failed(mcauth_reload(r->auth, &e), &e, "--auth-file", "users"))
        rc = -EINVAL;
    else if (r->auth)
        log_info("SIGHUP: %s re-read: %d users", mcauth_path(r->auth), mcauth_users(r->auth));
    if (r->tls && reload_tls(r->tls) < 0)
        rc = -EINVAL;
    return rc;
}

/* noderun_config_t.backend of the memcached node: its backend pool's
 * health. */
static void backend_state(void *arg, nodemetrics_backend_t *out)
{
    backend_health_t h;
    backend_health(front_backend(arg), &h);
    *out = (nodemetrics_backend_t){h.connect_errors, h.io_errors, !h.down};
}

/* --auth-file's users (start-up and --check alike): the loaded file, or
 * NULL with the problem on stderr (where and what). */
static mcauth_t *load_auth(const args_t *a)
{
    jsonloc_err_t e;
    char ebuf[512];
    mcauth_t *auth = mcauth_load(a->auth_file, &e, NULL);
    if (!auth)
        fprintf(stderr, "%s: --auth-file: %s\n", a->prog, bucketfile_strerror(&e, ebuf, sizeof ebuf));
    return auth;
}

/* The memcached node: front_t in front of memcached. */
static int run_memcached(const args_t *a)
{
    front_config_t cfg;
    front_config_defaults(&cfg);
    cfg.name = a->name;
    cfg.policy = (sched_policy_t)a->policy;
    cfg.weighted = a->weighted;
    cfg.workers = a->workers >= 0 ? a->workers : 0;
    cfg.outstanding = a->outstanding > 0 ? a->outstanding
                      : a->outstanding == 0 ? a->window_min : 64;
    cfg.batch = a->batch;
    cfg.separator = a->separator;
    cfg.default_mode = (front_default_t)a->default_mode;
    cfg.max_auto_buckets = a->max_auto >= 0 ? a->max_auto : (a->config ? 0 : 1024);
    cfg.proto.max_item = (size_t)a->max_item;
    cfg.proto.no_flush = a->no_flush;
    cfg.max_conns = a->max_conns;
    cfg.conn_reply_limit = (size_t)a->conn_reply;
    cfg.reply_memory = (size_t)a->reply_mem;
    cfg.cost = cost_config(a);
    cfg.threads = a->threads;
    char bhost[256], wtext[32];
    if (listener_parse(a->listen, &cfg.listen) < 0) {
        fprintf(stderr, "%s: bad --memcached-listen '%s': expected " LISTENER_SYNTAX "\n",
                a->prog, a->listen);
        return 2;
    }
    if (backend_parse_url(a->backend, bhost, sizeof bhost, &cfg.backend_port) < 0) {
        fprintf(stderr, "%s: bad --backend '%s'\n", a->prog, a->backend);
        return 2;
    }
    cfg.backend_host = bhost;
    mcauth_t *auth = NULL;
    if (a->auth_file) {
        if (!(auth = load_auth(a)))
            return 2;
        cfg.auth = auth;
        log_info("--auth-file %s: %d users; clients log in first", a->auth_file,
                 mcauth_users(auth));
    }
    tls_t *tls = NULL;
    nbdtls_mode_t tls_mode;
    if (tls_setup(a, &tls, &tls_mode) < 0) {
        mcauth_destroy(&auth);
        return 2;
    }
    cfg.tls = tls;
    if (tls && cfg.threads > 1) {
        fprintf(stderr, "%s: --threads %d does not go with TLS (--tls-cert): replies are "
                "written through the TLS session on the loop thread\n", a->prog, cfg.threads);
        tls_destroy(&tls);
        mcauth_destroy(&auth);
        return 2;
    }
    mc_reload_t reload = {auth, tls};

    noderun_prepare();
    int rc = 1, err = 0;
    struct event_base *base = event_base_new();
    front_t *f = NULL;
    if (!base) {
        log_error("cannot create the event loop");
        goto out;
    }
    f = front_new(base, &cfg, &err);
    if (!f) {
        log_error("cannot start on %s (backend %s): %s", a->listen, a->backend, strerror(-err));
        goto out;
    }
    if (window_setup(a, front_gate(f)) < 0 || conn_limits(a, front_gate(f)) < 0)
        goto out;
    log_info("node %s: memcached clients on %s, backend %s%s%s%.0u, policy %s, %d workers, "
             "%s outstanding, batch %d%s",
             cfg.name, conns_address(gate_conns(front_gate(f))),
             cfg.backend_port ? "" : "unix:", bhost, cfg.backend_port ? ":" : "", cfg.backend_port,
             cfg.policy == SCHED_POLICY_RR ? "rr" : "tokens", cfg.workers,
             window_text(a, cfg.outstanding, wtext, sizeof wtext), cfg.batch,
             !tls ? "" : tls_verify_mode(tls) == TLS_VERIFY_REQUIRE ? ", TLS port (client certificates required)"
                   : tls_verify_mode(tls) == TLS_VERIFY_REQUEST ? ", TLS port (client certificates requested)"
                                                                : ", TLS port");
    noderun_config_t nc = run_config(a);
    nc.reload = auth || tls ? reload_mc : NULL;
    nc.reload_arg = &reload;
    nc.backend = backend_state;
    nc.backend_arg = f;
    if (noderun_run(base, front_gate(f), &nc) < 0)
        goto out;
    log_info("stopped");
    rc = 0;
out:
    front_destroy(&f);
    mcauth_destroy(&auth);
    tls_destroy(&tls);
    if (base)
        event_base_free(base);
    return rc;
}

/* --tls, --tls-cert, --tls-key, --tls-psk, --tls-ca, --tls-verify: the
 * TLS mode (nbdtls_mode_t; a memcached node knows off and require only:
 * its port is a TLS port or not, memcached has no STARTTLS) into *mode,
 * and the credentials into *tls (the caller's to free; NULL with mode
 * off).  Returns 0, or -1 with a message (a bad file is named). */
static int tls_setup(const args_t *a, tls_t **tls, nbdtls_mode_t *mode)
{
    int have = a->tls_cert || a->tls_key || a->tls_psk;
    *mode = a->tls >= 0 ? (nbdtls_mode_t)a->tls : have ? NBDTLS_REQUIRE : NBDTLS_OFF;
    if (!a->block && *mode == NBDTLS_ALLOW) {
        fprintf(stderr, "%s: --tls allow is for NBD (STARTTLS); a memcached port is TLS or "
                "plain: say require (memcached's -Z) or off\n", a->prog);
        return -1;
    }
    if ((a->tls_ca || a->tls_verify > 0) && *mode == NBDTLS_OFF) {
        fprintf(stderr, "%s: --tls-ca and --tls-verify need TLS (--tls-cert and --tls-key)\n",
                a->prog);
        return -1;
    }
    if (!have) {
        if (*mode == NBDTLS_OFF)
            return 0;
        fprintf(stderr, "%s: --tls %s needs --tls-cert and --tls-key, or --tls-psk\n", a->prog,
                nodeargs_tls_names[*mode]);
        return -1;
    }
    if (*mode == NBDTLS_OFF) {
        fprintf(stderr, "%s: --tls off with TLS credentials: drop them or say %s\n",
                a->prog, a->block ? "allow/require" : "require");
        return -1;
    }
    tls_files_t files = {.cert = a->tls_cert, .key = a->tls_key, .psk = a->tls_psk,
                         .ca = a->tls_ca, .verify = (tls_verify_t)a->tls_verify};
    jsonloc_err_t e;
    char buf[512];
    int rc = 0;
    if (!(*tls = tls_new(&files, &rc, &e))) {
        fprintf(stderr, "%s: TLS: %s\n", a->prog, bucketfile_strerror(&e, buf, sizeof buf));
        return -1;
    }
    return 0;
}

/* noderun_config_t.reload of a node with TLS: its key, certificate, CA
 * and PSK files again (new connections use them, open ones keep theirs);
 * files that do not load are logged and change nothing. */
static int reload_tls(void *arg)
{
    jsonloc_err_t e;
    if (reload_failed(tls_reload(arg, &e), &e, "TLS files", "ones"))
        return -EINVAL;
    log_info("SIGHUP: TLS files re-read; new connections use them");
    return 0;
}

/* The block node: nbdfront_t (its gate owns the scheduler) and its file backend. */
static int run_block(const args_t *a)
{
    if (!a->backend) {
        fprintf(stderr, "%s: a block node needs --backend file:PATH\nTry '%s --help'.\n",
                a->prog, a->prog);
        return 2;
    }
    nbdfront_config_t cfg;
    char wtext[32];
    nbdfront_config_defaults(&cfg);
    if (listener_parse(a->nbd_listen, &cfg.listen) < 0) {
        fprintf(stderr, "%s: bad --nbd-listen '%s': expected " LISTENER_SYNTAX "\n", a->prog,
                a->nbd_listen);
        return 2;
    }
    if (a->ignored)
        log_warn("%d memcached-only option(s) ignored: this is a block node", a->ignored);
    const char *path = a->backend + 5; /* after "file:" */
    cfg.outstanding = a->outstanding > 0 ? a->outstanding : a->outstanding == 0 ? a->window_min : 5;
    cfg.max_conns = a->max_conns;
    cfg.request_memory = (size_t)a->nbd_mem;
    cfg.store.path = path;
    cfg.store.export_size = a->export_size;
    cfg.store.direct = a->direct;
    cfg.store.io_time_us = a->io_time_us;
    cfg.cost = cost_config(a);
    cfg.policy = (sched_policy_t)a->policy;
    cfg.weighted = a->weighted;
    cfg.store.workers = a->workers >= 1        ? a->workers
                        : a->outstanding == 0 ? a->window_max
                                              : cfg.outstanding;

    tls_t *tls = NULL;
    int rc = 1, err = 0;
    if (tls_setup(a, &tls, &cfg.tls_mode) < 0)
        return 2;
    cfg.tls = tls;
    noderun_prepare();
    struct event_base *base = event_base_new();
    nbdfront_t *f = NULL;
    char *list = strdup(a->buckets);
    if (!base || !list) {
        log_error("out of memory");
        goto out;
    }
    f = nbdfront_new(base, &cfg, &err);
    if (!f) {
        log_error("cannot start NBD on %s (backend file:%s): %s", a->nbd_listen, path,
                  strerror(-err));
        goto out;
    }
    char *save = NULL;
    for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int b = gate_bucket(nbdfront_gate(f), t, strlen(t), 1);
        if (b < 0) {
            log_error("--buckets: '%s': %s", t, strerror(-b));
            goto out;
        }
    }
    if (window_setup(a, nbdfront_gate(f)) < 0 || conn_limits(a, nbdfront_gate(f)) < 0)
        goto out;
    log_info("node %s: NBD on %s, backend file:%s%s, policy %s, "
             "%s outstanding, %d workers, TLS %s%s%s",
             a->name, conns_address(gate_conns(nbdfront_gate(f))), path, cfg.store.direct ? " (O_DIRECT)" : "",
             a->policy == SCHED_POLICY_RR ? "rr" : "tokens",
             window_text(a, cfg.outstanding, wtext, sizeof wtext),
             cfg.store.workers, nodeargs_tls_names[cfg.tls_mode], a->controller ? ", controller " : "",
             a->controller ? a->controller : "");
    noderun_config_t nc = run_config(a);
    nc.reload = tls ? reload_tls : NULL;
    nc.reload_arg = tls;
    if (noderun_run(base, nbdfront_gate(f), &nc) < 0)
        goto out;
    nbdfront_stats_t st;
    nbdfront_stats(f, &st);
    log_info("stopped: %llu connections, %llu requests (%llu reads, %llu writes, %llu "
             "flushes, %llu trims, %llu block status; %llu reads from the page cache "
             "inline), %llu errors",
             (unsigned long long)st.conns, (unsigned long long)st.requests,
             (unsigned long long)st.reads, (unsigned long long)st.writes,
             (unsigned long long)st.flushes, (unsigned long long)st.trims,
             (unsigned long long)st.block_status, (unsigned long long)st.inline_reads,
             (unsigned long long)st.errors);
    rc = 0;
out:
    nbdfront_destroy(&f);
    tls_destroy(&tls);
    if (base)
        event_base_free(base);
    free(list);
    return rc;
}

/* The key files start-up reads before it serves: the CURVE pair
 * (--curve-key, --controller-key: readable, the secret mode 0600 or
 * stricter, well-formed) and a block node's TLS credentials.  main() runs
 * it before starting and --check with the rest, so that a key --check
 * passes does not stop the start.  Problems go to stderr (logged at
 * start-up, printed under --check); returns how many there were. */
static int node_validate_keys(const args_t *a, int check)
{
    int problems = 0;
    curvekey_t own, server;
    int on = 0;
    jsonloc_err_t err;
    char buf[700];
    if (curvekey_load_client(a->curve_key, a->controller_key, &own, &server, &on, &err) < 0) {
        bucketfile_strerror(&err, buf, sizeof buf);
        if (check)
            fprintf(stderr, "%s: %s\n", a->prog, buf);
        else
            log_error("%s", buf);
        problems++;
    }
    explicit_bzero(&own, sizeof own);
    {
        tls_t *tls = NULL;
        nbdtls_mode_t mode;
        if (tls_setup(a, &tls, &mode) < 0)
            problems++;
        tls_destroy(&tls);
    }
    return problems;
}

/* --check: what run_memcached() and run_block() would refuse, the key
 * files, the auth file, and the bucket and token files.  Returns the exit
 * status. */
static int check_config(const args_t *a)
{
    listener_addr_t la;
    char bhost[256];
    unsigned bport;
    int problems = 0;
    const char *listen = a->block ? a->nbd_listen : a->listen;
    if (listener_parse(listen, &la) < 0) {
        fprintf(stderr, "%s: bad --%s '%s': expected " LISTENER_SYNTAX "\n", a->prog,
                a->block ? "nbd-listen" : "memcached-listen", listen);
        problems++;
    }
    if (a->block ? !a->backend : backend_parse_url(a->backend, bhost, sizeof bhost, &bport) < 0) {
        fprintf(stderr, "%s: bad --backend '%s'\n", a->prog, a->backend ? a->backend : "");
        problems++;
    }
    problems += node_validate_keys(a, 1);

    if (a->auth_file && !a->block) {
        mcauth_t *auth = load_auth(a);
        problems += !auth;
        mcauth_destroy(&auth);
    }
    int rc = nodeconf_check(a->prog, a->config, a->tokens_file);
    if (rc != 0 || problems)
        return 1;
    printf("%s: configuration OK\n", a->prog);
    return 0;
}

int main(int argc, char **argv)
{
    const char *base = argc > 0 ? strrchr(argv[0], '/') : NULL;
    base = base ? base + 1 : (argc > 0 ? argv[0] : "");
    args_t a = {
        .prog = strcmp(base, "bqos-nbd-node") == 0 ? "bqos-nbd-node" : "bqos-node",
        .workers = -1, .outstanding = -1, .max_auto = -1, .per_ip = -1, .tls = -1,
        /* the rest: the rows' defaults */
    };
    a.block = nodeargs_block_wanted(argc, argv, a.prog);
    int rc = nodeargs_parse(argc, argv, &a);
    if (rc >= 0)
        return rc;
    if (a.check)
        return check_config(&a);
    if (!a.block && a.outstanding < 0 && a.policy != SCHED_POLICY_RR)
        a.outstanding = 0; /* tokens: an auto window by default */
    bqos_log_init(a.prog, (bqos_log_level_t)a.level);
    bqos_log_set_format((bqos_log_format_t)a.log_format);
    if (node_validate_keys(&a, 0) > 0)
        return 1;
    fit_conns_to_fds(&a, a.workers);
    return a.block ? run_block(&a) : run_memcached(&a);
}
