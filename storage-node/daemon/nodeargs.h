/* nodeargs.h - the command line of bqos-node and bqos-nbd-node: one option table for both node kinds (rows, --help texts, --settings files, errors), parsed into args_t. */
#ifndef BQOS_NODEARGS_H
#define BQOS_NODEARGS_H

#include <stdint.h>

/* Everything the command line says, for either node kind.  Filled by
 * nodeargs_parse() on main's thread; read-only after. */
typedef struct {
    const char *prog;
    int block;                      /* a block node */
    const char *name, *listen, *nbd_listen, *backend, *buckets;
    const char *config, *controller, *tokens_file, *metrics;
    const char *curve_key, *controller_key; /* CURVE to the controller */
    const char *user;               /* --user: switch to it after binding */
    const char *auth_file;          /* --auth-file: memcached -Y logins */
    int no_flush;                   /* --disable-flush-all */
    const char *tls_cert, *tls_key, *tls_psk, *tls_ca; /* TLS (io/tls.h), both fronts */
    int tls;                        /* nbdtls_mode_t: index in tls_names; -1: by the files */
    int tls_verify;                 /* tls_verify_t: --tls-verify */
    int policy;                     /* sched_policy_t: index in policy_names */
    int fallback;                   /* agent_fallback_t: index in fallback_names */
    double silence;                 /* --silence, intervals */
    int shards;                     /* --shards K: --controller has K ';' lists (0: none) */
    int pacing;                     /* --pacing: index in onoff_names (1: on) */
    double burst_s;                 /* --burst, seconds */
    int r_order;                    /* sched_order_t: index in order_names */
    int weighted, direct;
    int workers, outstanding;       /* -1: the node kind's default; outstanding 0: auto */
    int threads;                    /* --threads: loop thread + reply writers (memcached) */
    int window_min, window_max;     /* --outstanding auto's bounds */
    double window_latency;          /* and its latency target, x base */
    double window_latency_open;     /* the same while no reservation is served */
    int window_headroom;            /* slots kept for R per bucket behind its R pace */
    int batch, max_auto, max_conns; /* max_auto -1: by --config */
    int per_ip;                     /* --max-conns-per-ip; -1: max_conns / 2 */
    double idle_timeout;            /* --idle-timeout, seconds; 0: off */
    char separator;
    int default_mode;               /* front_default_t: index in default_names */
    uint64_t max_item, export_size, capacity;
    uint64_t conn_reply, reply_mem, nbd_mem; /* memory bounds */
    unsigned io_time_us;
    int level;                      /* bqos_log_level_t: index in level_names */
    int log_format;                 /* bqos_log_format_t: index in bqos_log_format_names */
    int check;                      /* --check: validate and exit */
    int help, version;
    uint64_t cost_unit;             /* --cost-unit, bytes */
    double cost_read, cost_write;   /* --cost-read-weight, --cost-write-weight */
    unsigned cost_flush, cost_trim; /* --cost-flush, --cost-trim, units */
    int ignored;                    /* memcached-only options given to a block node */
} args_t;

/* The names of --tls, in nbdtls_mode_t order. */
extern const char *const nodeargs_tls_names[];

/* Returns 1 if the command line asks for a block node: the program is
 * called bqos-nbd-node, or --backend names a file: store, or --nbd-listen
 * is given (on argv or in the --settings file).  Main thread. */
int nodeargs_block_wanted(int argc, char **argv, const char *prog);

/* Parses argv into *a (a->prog and a->block set by the caller; the -1
 * defaults in place): every option row's default, then the --settings
 * file, then argv.  Prints --help/--version and usage errors itself.
 * Returns -1 to go on, or the exit status (0 after --help or --version, 2
 * on a usage error).  Main thread. */
int nodeargs_parse(int argc, char **argv, args_t *a);

#endif
