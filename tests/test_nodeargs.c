/* test_nodeargs.c - Check suite for storage-node/daemon/nodeargs: the node kind (program name, --backend file:, --nbd-listen, a --settings file), each kind's defaults, values, every usage error with its message and exit status, options of the other kind (ignored or refused), --help and --version. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/version.h"
#include "storage-node/daemon/nodeargs.h"
#include "storage-node/io/tls.h"
#include "tests/testlib.h"

static char out[32768], err[4096];
static args_t a; /* the last parse() */

/* Reads what was written to f into buf (cap bytes, NUL-terminated). */
static void slurp(FILE *f, char *buf, size_t cap)
{
    rewind(f);
    size_t n = fread(buf, 1, cap - 1, f);
    buf[n] = '\0';
    fclose(f);
}

/* Does what main does before it acts on the options: the kind from
 * nodeargs_block_wanted(), the -1 defaults, then nodeargs_parse() into a,
 * with stdout and stderr caught in out[] and err[].  args: the arguments after
 * the program name, NULL-terminated.  Returns nodeargs_parse()'s value. */
static int parse(const char *prog, const char *const *args)
{
    char *argv[128];
    int argc = 0;
    argv[argc++] = (char *)prog;
    for (; args[argc - 1]; argc++) {
        ck_assert_int_lt(argc, 127);
        argv[argc] = (char *)args[argc - 1];
    }
    argv[argc] = NULL;
    a = (args_t){.prog = prog, .workers = -1, .outstanding = -1, .max_auto = -1,
                  .per_ip = -1, .tls = -1};
    a.block = nodeargs_block_wanted(argc, argv, prog);
    FILE *fo = tmpfile(), *fe = tmpfile();
    ck_assert(fo && fe);
    fflush(stdout);
    int so = dup(STDOUT_FILENO), se = dup(STDERR_FILENO);
    ck_assert(so >= 0 && se >= 0);
    dup2(fileno(fo), STDOUT_FILENO);
    dup2(fileno(fe), STDERR_FILENO);
    int rc = nodeargs_parse(argc, argv, &a);
    fflush(stdout);
    dup2(so, STDOUT_FILENO);
    dup2(se, STDERR_FILENO);
    close(so);
    close(se);
    slurp(fo, out, sizeof out);
    slurp(fe, err, sizeof err);
    return rc;
}
#define PARSE(prog, ...) parse(prog, (const char *const[]){__VA_ARGS__, NULL})

static int block_wanted(const char *prog, const char *const *args)
{
    char *argv[16];
    int argc = 0;
    argv[argc++] = (char *)prog;
    for (; args[argc - 1]; argc++) {
        ck_assert_int_lt(argc, 15);
        argv[argc] = (char *)args[argc - 1];
    }
    argv[argc] = NULL;
    return nodeargs_block_wanted(argc, argv, prog);
}
#define BLOCK(prog, ...) block_wanted(prog, (const char *const[]){__VA_ARGS__, NULL})

START_TEST(test_nodeargs_kind)
{
    ck_assert_int_eq(BLOCK("bqos-nbd-node", NULL), 1);
    ck_assert_int_eq(BLOCK("bqos-node", NULL), 0);
    ck_assert_int_eq(BLOCK("bqos-node", "--backend", "memcached://127.0.0.1:11211"), 0);
    ck_assert_int_eq(BLOCK("bqos-node", "--backend", "file:/tmp/x"), 1);
    ck_assert_int_eq(BLOCK("bqos-node", "--backend=file:/tmp/x"), 1);
    ck_assert_int_eq(BLOCK("bqos-node", "--nbd-listen", "127.0.0.1:0"), 1);
    ck_assert_int_eq(BLOCK("bqos-node", "--nbd-listen=127.0.0.1:0"), 1);
    ck_assert_int_eq(BLOCK("bqos-node", "--nbd-listener", "x"), 0);
    ck_assert_int_eq(BLOCK("bqos-node", "--", "--backend", "file:/tmp/x"), 0);
    /* so may a settings file */
    char *path = testlib_temp_file("name = n1\nbackend = file:/tmp/x\n");
    ck_assert_int_eq(BLOCK("bqos-node", "--settings", path), 1);
    unlink(path);
    path = testlib_temp_file("nbd-listen = 127.0.0.1:0\n");
    {
        char arg[96];
        snprintf(arg, sizeof arg, "--settings=%s", path);
        ck_assert_int_eq(BLOCK("bqos-node", arg), 1);
    }
    unlink(path);
    path = testlib_temp_file("backend = memcached://127.0.0.1:1\n");
    ck_assert_int_eq(BLOCK("bqos-node", "--settings", path), 0);
    unlink(path);
}
END_TEST

#define S(p) ((p) ? (p) : "-")

/* The whole of a, one "field=value" a word (strings "-" when NULL): a test
 * compares it with the line it wants, and a failure shows which field
 * differs.  A static buffer. */
static const char *show(void)
{
    static char buf[2048];
    snprintf(buf, sizeof buf,
             "block=%d name=%s listen=%s nbd_listen=%s backend=%s buckets=%s config=%s "
             "controller=%s tokens=%s metrics=%s curve=%s/%s user=%s tls=%d cert=%s key=%s "
             "psk=%s | policy=%d fallback=%d silence=%g pacing=%d burst=%g r_order=%d "
             "weighted=%d direct=%d workers=%d outstanding=%d window=%d..%d latency=%g/%g "
             "batch=%d max_auto=%d max_conns=%d per_ip=%d idle=%g sep=%d default=%d | "
             "max_item=%llu export=%llu capacity=%llu conn_reply=%llu reply_mem=%llu "
             "nbd_mem=%llu io_time=%u level=%d format=%d check=%d no_flush=%d | cost=%llu "
             "%g/%g flush=%u trim=%u ignored=%d",
             a.block, S(a.name), S(a.listen), S(a.nbd_listen), S(a.backend), S(a.buckets),
             S(a.config), S(a.controller), S(a.tokens_file), S(a.metrics), S(a.curve_key),
             S(a.controller_key), S(a.user), a.tls, S(a.tls_cert), S(a.tls_key), S(a.tls_psk),
             a.policy, a.fallback, a.silence, a.pacing, a.burst_s, a.r_order, a.weighted,
             a.direct, a.workers, a.outstanding, a.window_min, a.window_max, a.window_latency,
             a.window_latency_open, a.batch, a.max_auto, a.max_conns, a.per_ip, a.idle_timeout,
             a.separator, a.default_mode, (unsigned long long)a.max_item,
             (unsigned long long)a.export_size, (unsigned long long)a.capacity,
             (unsigned long long)a.conn_reply, (unsigned long long)a.reply_mem,
             (unsigned long long)a.nbd_mem, a.io_time_us, a.level, a.log_format, a.check,
             a.no_flush, (unsigned long long)a.cost_unit, a.cost_read, a.cost_write,
             a.cost_flush, a.cost_trim, a.ignored);
    return buf;
}

/* Each kind's defaults; the rows without one keep main's -1. */
START_TEST(test_nodeargs_defaults)
{
    ck_assert_int_eq(PARSE("bqos-node", NULL), -1);
    ck_assert_str_eq(err, "");
    ck_assert_str_eq(out, "");
    ck_assert_str_eq(show(),
                     "block=0 name=node listen=127.0.0.1:11311 nbd_listen=- "
                     "backend=memcached://127.0.0.1:11211 buckets=- config=- controller=- tokens=- "
                     "metrics=- curve=-/- user=- tls=-1 cert=- key=- psk=- | policy=0 fallback=0 "
                     "silence=3 pacing=1 burst=0.02 r_order=1 weighted=0 direct=0 workers=-1 "
                     "outstanding=-1 window=2..64 latency=1/4 batch=64 max_auto=-1 max_conns=4096 "
                     "per_ip=-1 idle=300 sep=58 default=0 | max_item=1048576 export=0 capacity=0 "
                     "conn_reply=268435456 reply_mem=1073741824 nbd_mem=0 io_time=0 level=2 "
                     "format=0 check=0 no_flush=0 | cost=4096 1/1 flush=0 trim=0 ignored=0");
    ck_assert_int_eq(PARSE("bqos-nbd-node", NULL), -1);
    ck_assert_str_eq(err, "");
    ck_assert_str_eq(show(),
                     "block=1 name=node listen=- nbd_listen=127.0.0.1:10809 backend=- "
                     "buckets=default config=- controller=- tokens=- metrics=- curve=-/- user=- "
                     "tls=-1 cert=- key=- psk=- | policy=0 fallback=0 silence=3 pacing=1 "
                     "burst=0.02 r_order=1 weighted=0 direct=0 workers=-1 outstanding=-1 "
                     "window=2..64 latency=1/1 batch=0 max_auto=-1 max_conns=4096 per_ip=-1 "
                     "idle=0 sep=0 default=0 | max_item=0 export=1073741824 capacity=0 conn_reply=0 "
                     "reply_mem=0 nbd_mem=268435456 io_time=0 level=2 format=0 check=0 "
                     "no_flush=0 | cost=4096 1/1 flush=1 trim=1 ignored=0");
    /* bqos-node becomes a block node by its --backend */
    ck_assert_int_eq(PARSE("bqos-node", "--backend", "file:/tmp/store/"), -1);
    ck_assert_int_eq(a.block, 1);
    ck_assert_str_eq(a.backend, "file:/tmp/store/");
    ck_assert_str_eq(a.nbd_listen, "127.0.0.1:10809");
}
END_TEST

START_TEST(test_nodeargs_values)
{
    ck_assert_int_eq(PARSE("bqos-node", "--name", "n1", "--memcached-listen=unix:/tmp/s",
                           "--policy", "rr", "--workers", "4", "--outstanding", "auto",
                           "--separator", "/", "--default-bucket", "reject",
                           "--max-auto-buckets", "0", "--max-item-size", "2m",
                           "--idle-timeout", "500ms", "--pacing", "off", "--burst", "0",
                           "--r-order", "rr", "--fallback", "rr", "--weighted",
                           "--disable-flush-all", "--log-level", "debug", "--log-format",
                           "json", "--max-conns-per-ip", "0", "--cost-unit", "64k",
                           "--cost-write-weight", "2.5", "--controller",
                           "tcp://127.0.0.1:7070,tcp://127.0.0.1:7071", "--check", "--config",
                           "b.json", "--tokens-file", "t.json", "--metrics-listen", "127.0.0.1:0",
                           "--curve-key", "n.key", "--controller-key", "c.pub", "--user", "nobody",
                           "--silence", "0.5", "--window-min", "4", "--window-max", "4",
                           "--window-latency", "2", "--window-latency-open", "100", "--batch", "1",
                           "--max-conns", "1", "--conn-reply-limit", "64k", "--reply-memory", "1",
                           "--capacity", "1000000000", "--cost-read-weight", "0"),
                     -1);
    ck_assert_str_eq(err, "");
    ck_assert_str_eq(show(),
                     "block=0 name=n1 listen=unix:/tmp/s nbd_listen=- "
                     "backend=memcached://127.0.0.1:11211 buckets=- config=b.json "
                     "controller=tcp://127.0.0.1:7070,tcp://127.0.0.1:7071 tokens=t.json "
                     "metrics=127.0.0.1:0 curve=n.key/c.pub user=nobody tls=-1 cert=- key=- psk=- | "
                     "policy=1 fallback=1 silence=0.5 pacing=0 burst=0 r_order=0 weighted=1 direct=0 "
                     "workers=4 outstanding=0 window=4..4 latency=2/100 batch=1 max_auto=0 "
                     "max_conns=1 per_ip=0 idle=0.5 sep=47 default=1 | max_item=2097152 export=0 "
                     "capacity=1000000000 conn_reply=65536 reply_mem=1 nbd_mem=0 io_time=0 level=3 "
                     "format=1 check=1 no_flush=1 | cost=65536 0/2.5 flush=0 trim=0 ignored=0");
    ck_assert_int_eq(PARSE("bqos-node", "--outstanding", "1024"), -1);
    ck_assert_int_eq(a.outstanding, 1024);

    ck_assert_int_eq(PARSE("bqos-nbd-node", "--backend", "file:/tmp/img", "--tls", "require",
                           "--tls-cert", "c.pem", "--tls-key", "k.pem", "--tls-psk", "p.psk",
                           "--export-size", "4g", "--direct", "--buckets", "red,blue",
                           "--workers", "1024", "--cost-flush", "7", "--cost-trim", "0",
                           "--io-time-us", "250", "--nbd-listen", "unix:/tmp/n",
                           "--nbd-request-memory", "1m"),
                     -1);
    ck_assert_str_eq(err, "");
    ck_assert_str_eq(show(),
                     "block=1 name=node listen=- nbd_listen=unix:/tmp/n backend=file:/tmp/img "
                     "buckets=red,blue config=- controller=- tokens=- metrics=- curve=-/- user=- "
                     "tls=2 cert=c.pem key=k.pem psk=p.psk | policy=0 fallback=0 silence=3 pacing=1 "
                     "burst=0.02 r_order=1 weighted=0 direct=1 workers=1024 outstanding=-1 "
                     "window=2..64 latency=1/1 batch=0 max_auto=-1 max_conns=4096 per_ip=-1 idle=0 "
                     "sep=0 default=0 | max_item=0 export=4294967296 capacity=0 conn_reply=0 "
                     "reply_mem=0 nbd_mem=1048576 io_time=250 level=2 format=0 check=0 no_flush=0 | "
                     "cost=4096 1/1 flush=7 trim=0 ignored=0");
    ck_assert_str_eq(nodeargs_tls_names[a.tls], "require");

    /* the memcached node's TLS port (memcached's -Z and ssl_* options) */
    ck_assert_int_eq(PARSE("bqos-node", "--tls-cert", "c.pem", "--tls-key", "k.pem", "--tls-ca",
                           "ca.pem", "--tls-verify", "require"),
                     -1);
    ck_assert_str_eq(err, "");
    ck_assert_str_eq(a.tls_cert, "c.pem");
    ck_assert_str_eq(a.tls_key, "k.pem");
    ck_assert_str_eq(a.tls_ca, "ca.pem");
    ck_assert_int_eq(a.tls_verify, TLS_VERIFY_REQUIRE);
    ck_assert_int_eq(a.tls, -1);
    ck_assert_int_eq(PARSE("bqos-node", "--tls-verify", "request"), -1);
    ck_assert_int_eq(a.tls_verify, TLS_VERIFY_REQUEST);
    ck_assert_int_eq(PARSE("bqos-node", "--name", "n"), -1);
    ck_assert_int_eq(a.tls_verify, TLS_VERIFY_NONE);
}
END_TEST
/* A --settings file is read after argv: the command line overrides it. */
START_TEST(test_nodeargs_settings_file)
{
    char *path = testlib_temp_file("# a node\nname = from-file\nbatch = 8\nweighted = yes\n");
    char keep[64];
    snprintf(keep, sizeof keep, "%s", path);
    ck_assert_int_eq(PARSE("bqos-node", "--settings", keep, "--batch", "16"), -1);
    ck_assert_str_eq(err, "");
    ck_assert_str_eq(a.name, "from-file");
    ck_assert_int_eq(a.batch, 16);
    ck_assert_int_eq(a.weighted, 1);
    unlink(keep);
    /* a problem in it: its position, exit status 1 */
    path = testlib_temp_file("name = n\nbatch = 100\n");
    snprintf(keep, sizeof keep, "%s", path);
    ck_assert_int_eq(PARSE("bqos-node", "--settings", keep), 1);
    char want[256];
    snprintf(want, sizeof want, "bqos-node: %s:2:9: bad value '100' for batch (an integer 1..64)\n",
             keep);
    ck_assert_str_eq(err, want);
    unlink(keep);
    ck_assert_int_eq(PARSE("bqos-node", "--settings", "/nonexistent/bqos.conf"), 1);
    ck_assert_str_eq(err, "bqos-node: cannot read settings file /nonexistent/bqos.conf: "
                          "No such file or directory\n");
}
END_TEST

/* Every usage error: exit status 2 and its message, then the hint. */
START_TEST(test_nodeargs_usage_errors)
{
    static const struct {
        const char *prog;
        const char *args[6];
        const char *msg; /* after "PROG: " */
    } cases[] = {
        {"bqos-node", {"--bogus"}, "unknown option '--bogus'"},
        {"bqos-node", {"--name"}, "option '--name' needs an argument"},
        {"bqos-node", {"extra"}, "unexpected argument 'extra'"},
        {"bqos-node", {"--workers", "257"}, "bad value '257' for --workers (an integer 0..256)"},
        {"bqos-node", {"--workers", "-1"}, "bad value '-1' for --workers (an integer 0..256)"},
        {"bqos-nbd-node", {"--workers", "0"},
         "bad value '0' for --workers (an integer 1..1024)"},
        {"bqos-node", {"--outstanding", "0"},
         "bad value '0' for --outstanding (1..1024 or auto)"},
        {"bqos-node", {"--outstanding", "1025"},
         "bad value '1025' for --outstanding (1..1024 or auto)"},
        {"bqos-node", {"--separator", "ab"},
         "bad value 'ab' for --separator (one character, not a space)"},
        {"bqos-node", {"--separator", " "},
         "bad value ' ' for --separator (one character, not a space)"},
        {"bqos-node", {"--policy", "fifo"}, "bad value 'fifo' for --policy (tokens or rr)"},
        {"bqos-node", {"--pacing", "yes"}, "bad value 'yes' for --pacing (off or on)"},
        {"bqos-node", {"--r-order", "x"}, "bad value 'x' for --r-order (rr or urgency)"},
        {"bqos-node", {"--fallback", "x"}, "bad value 'x' for --fallback (static or rr)"},
        {"bqos-node", {"--default-bucket", "x"},
         "bad value 'x' for --default-bucket (serve or reject)"},
        {"bqos-node", {"--log-level", "loud"},
         "bad value 'loud' for --log-level (error, warn, info or debug)"},
        {"bqos-node", {"--log-format", "xml"}, "bad value 'xml' for --log-format (text or json)"},
        {"bqos-node", {"--window-min", "0"}, "bad value '0' for --window-min (an integer 1..1024)"},
        {"bqos-node", {"--window-max", "2000"},
         "bad value '2000' for --window-max (an integer 1..1024)"},
        {"bqos-node", {"--window-min", "10", "--window-max", "5"},
         "--window-min 10 is above --window-max 5"},
        {"bqos-node", {"--shards", "2", "--controller", "tcp://a:1,tcp://b:1"},
         "--shards 2 needs --controller with at least 2 endpoint lists separated by ';' (it has 1)"},
        {"bqos-node", {"--shards", "3"},
         "--shards 3 needs --controller with at least 3 endpoint lists separated by ';' (it has 0)"},
        {"bqos-node", {"--controller", "tcp://a:1;tcp://b:1"},
         "--controller with 2 endpoint lists separated by ';' (controller shards) needs --shards 2"},
        {"bqos-node", {"--window-latency", "0.5"},
         "bad value '0.5' for --window-latency (a number 1..100)"},
        {"bqos-node", {"--window-latency-open", "101"},
         "bad value '101' for --window-latency-open (a number 1..100)"},
        {"bqos-node", {"--batch", "65"}, "bad value '65' for --batch (an integer 1..64)"},
        {"bqos-node", {"--silence", "0.4"}, "bad value '0.4' for --silence (a number 0.5..1000)"},
        {"bqos-node", {"--max-conns", "0"},
         "bad value '0' for --max-conns (an integer 1..1000000)"},
        {"bqos-node", {"--max-conns-per-ip", "-1"},
         "bad value '-1' for --max-conns-per-ip (an integer 0..1000000)"},
        {"bqos-node", {"--max-auto-buckets", "-1"},
         "bad value '-1' for --max-auto-buckets (an integer 0..1000000)"},
        {"bqos-node", {"--max-item-size", "2g"},
         "bad value '2g' for --max-item-size (a byte count 1..1g; suffix k, m, g or t)"},
        {"bqos-node", {"--conn-reply-limit", "1k"},
         "bad value '1k' for --conn-reply-limit (a byte count 64k..1t; suffix k, m, g or t)"},
        {"bqos-node", {"--reply-memory", "0"},
         "bad value '0' for --reply-memory (a byte count 1..1t; suffix k, m, g or t)"},
        {"bqos-node", {"--idle-timeout", "-1"},
         "bad value '-1' for --idle-timeout (a duration 0..10000000 s; unit s or ms)"},
        {"bqos-node", {"--cost-read-weight", "x"},
         "bad value 'x' for --cost-read-weight (a number 0..1000)"},
        {"bqos-node", {"--capacity", "-5"},
         "bad value '-5' for --capacity (an integer 0..1000000000)"},
        /* block-only options refuse a memcached node */
        {"bqos-node", {"--export-size", "1g"}, "--export-size is for a block node (--backend file:PATH)"},
        {"bqos-node", {"--direct"}, "--direct is for a block node (--backend file:PATH)"},
        {"bqos-node", {"--tls", "on"}, "bad value 'on' for --tls (off, allow or require)"},
        {"bqos-node", {"--tls-verify", "2"},
         "bad value '2' for --tls-verify (none, request or require)"},
        {"bqos-nbd-node", {"--backend", "memcached://127.0.0.1:11211"},
         "bad value 'memcached://127.0.0.1:11211' for --backend (a block node needs file:PATH)"},
        {"bqos-nbd-node", {"--backend", "file:"},
         "bad value 'file:' for --backend (a block node needs file:PATH)"},
        {"bqos-nbd-node", {"--tls", "maybe"}, "bad value 'maybe' for --tls (off, allow or require)"},
        {"bqos-nbd-node", {"--export-size", "0"},
         "bad value '0' for --export-size (a byte count 1..1024t; suffix k, m, g or t)"},
        {"bqos-nbd-node", {"--nbd-request-memory", "1k"},
         "bad value '1k' for --nbd-request-memory (a byte count 1m..1t; suffix k, m, g or t)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            ck_assert_msg(parse(cases[i].prog, cases[i].args) == 2, "%s: not a usage error",
                      cases[i].args[0]);
        char want[512];
        snprintf(want, sizeof want, "%s: %s\nTry '%s --help'.\n", cases[i].prog, cases[i].msg,
                 cases[i].prog);
        ck_assert_str_eq(err, want);
        ck_assert_str_eq(out, "");
    }
}
END_TEST

/* One command line serves both kinds: a block node accepts the
 * memcached-only options unchecked, counts them (for its warning) and
 * ignores them; a flag among them is accepted too. */
START_TEST(test_nodeargs_block_ignores_memcached_options)
{
    ck_assert_int_eq(PARSE("bqos-nbd-node", "--backend", "file:/tmp/x", "--batch", "999",
                           "--memcached-listen", "bogus", "--separator", "ab", "--policy", "rr"),
                     -1);
    ck_assert_str_eq(err, "");
    ck_assert_int_eq(a.ignored, 3);
    ck_assert_int_eq(a.separator, 0);
    ck_assert_ptr_null(a.listen);
    ck_assert_int_eq(a.batch, 0);
    ck_assert_int_eq(a.policy, 1); /* both kinds' */
    ck_assert_int_eq(PARSE("bqos-nbd-node", "--disable-flush-all"), -1);
    ck_assert_str_eq(err, "");
    ck_assert_int_eq(a.no_flush, 0);
    ck_assert_int_eq(a.ignored, 1);
    /* a flag adds to the count like any other ignored option */
    ck_assert_int_eq(PARSE("bqos-nbd-node", "--batch", "9", "--disable-flush-all", "--separator", "x"),
                     -1);
    ck_assert_int_eq(a.ignored, 3);
}
END_TEST

START_TEST(test_nodeargs_help_version)
{
    ck_assert_int_eq(PARSE("bqos-node", "--help"), 0);
    ck_assert_str_eq(err, "");
    ck_assert_ptr_nonnull(strstr(out, "NAME\n    bqos-node - bucket-QoS storage-node agent in front of memcached\n"));
    ck_assert_ptr_nonnull(strstr(out, "SYNOPSIS\n    bqos-node --name NAME"));
    const char *opts = strstr(out, "\nOPTIONS\n"), *blk = strstr(out, "\nBLOCK NODE\n");
    ck_assert(opts && blk && opts < blk);
    ck_assert_ptr_nonnull(strstr(opts, "    --memcached-listen HOST:PORT|unix:PATH\n"));
    ck_assert_ptr_nonnull(strstr(opts, "        Default: 127.0.0.1:11311.\n"));
    ck_assert_ptr_nonnull(strstr(opts, "    --settings FILE\n"));
    /* the block-only rows come after BLOCK NODE only */
    char *x = strstr(out, "    --export-size BYTES\n");
    ck_assert(x && x > blk);
    ck_assert_ptr_nonnull(strstr(out, "EXIT STATUS\n    0 after a clean stop, 1 on a start-up error, 2 on bad usage.\n"));
    /* help wins over a later usage error (parsing stops at --help) */
    ck_assert_int_eq(PARSE("bqos-node", "--help", "--bogus"), 0);

    ck_assert_int_eq(PARSE("bqos-nbd-node", "--help"), 0);
    ck_assert_ptr_nonnull(strstr(out, "NAME\n    bqos-nbd-node - bucket-QoS block storage node"));
    ck_assert_ptr_nonnull(strstr(out, "SYNOPSIS\n    bqos-nbd-node --backend file:PATH"));
    ck_assert_ptr_nonnull(strstr(out, "    --nbd-listen HOST:PORT|unix:PATH\n"));
    ck_assert_ptr_nonnull(strstr(out, "    --workers N\n"));
    ck_assert_ptr_null(strstr(out, "--memcached-listen HOST"));
    ck_assert_ptr_null(strstr(out, "    --batch N\n"));
    /* bqos-node as a block node names itself */
    ck_assert_int_eq(PARSE("bqos-node", "--backend", "file:/tmp/x", "--help"), 0);
    ck_assert_ptr_nonnull(strstr(out, "NAME\n    bqos-node - bucket-QoS block storage node"));

    ck_assert_int_eq(PARSE("bqos-node", "--version"), 0);
    ck_assert_str_eq(out, "bqos-node " BQOS_VERSION "\n");
    ck_assert_int_eq(PARSE("bqos-nbd-node", "--version"), 0);
    ck_assert_str_eq(out, "bqos-nbd-node " BQOS_VERSION "\n");
    ck_assert_str_eq(err, "");
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {test_nodeargs_kind, test_nodeargs_defaults, test_nodeargs_values,
                                  test_nodeargs_settings_file, test_nodeargs_usage_errors,
                                  test_nodeargs_block_ignores_memcached_options,
                                  test_nodeargs_help_version};
    return testlib_run_tests("nodeargs", tests, sizeof tests / sizeof tests[0]);
}
