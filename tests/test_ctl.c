/* test_ctl.c - Check suite for bqos-ctl (controller/ctl/ctl.c): argument errors,
 * an unreachable controller, and every command against a fake admin
 * endpoint (a REP socket on a free loopback port in a thread). */
#include <check.h>

#include "tests/testlib.h"
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

static char ctl_path[4096];
static char out[65536], err[65536];

/* Reads a whole file into buf (NUL-terminated). */
static void slurp(int fd, char *buf, size_t cap)
{
    lseek(fd, 0, SEEK_SET);
    ssize_t n, t = 0;
    while ((n = read(fd, buf + t, cap - 1 - (size_t)t)) > 0)
        t += n;
    buf[t < 0 ? 0 : t] = '\0';
}

/* Runs bqos-ctl with args (NULL-terminated); returns its exit status and
 * fills out/err. */
static int run(const char *const *args)
{
    char *argv[32];
    int n = 0;
    argv[n++] = ctl_path;
    for (; args[n - 1] && n < 31; n++)
        argv[n] = (char *)args[n - 1];
    argv[n] = NULL;
    char fo[] = "/tmp/test_ctl_outXXXXXX", fe[] = "/tmp/test_ctl_errXXXXXX";
    int ofd = mkstemp(fo), efd = mkstemp(fe);
    ck_assert(ofd >= 0 && efd >= 0);
    unlink(fo);
    unlink(fe);
    pid_t pid = fork();
    ck_assert(pid >= 0);
    if (pid == 0) {
        dup2(ofd, 1);
        dup2(efd, 2);
        unsetenv("BQOS_CTL_ENDPOINT");
        execv(ctl_path, argv);
        _exit(127);
    }
    int st;
    waitpid(pid, &st, 0);
    slurp(ofd, out, sizeof out);
    slurp(efd, err, sizeof err);
    close(ofd);
    close(efd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}
#define RUN(...) run((const char *const[]){__VA_ARGS__, NULL})

START_TEST(test_ctl_help_version)
{
    ck_assert_int_eq(RUN("--help"), 0);
    ck_assert_ptr_nonnull(strstr(out, "Usage: bqos-ctl"));
    ck_assert_ptr_nonnull(strstr(out, "Exit status"));
    ck_assert_int_eq(RUN("--version"), 0);
    ck_assert_ptr_nonnull(strstr(out, "bqos-ctl "));
}
END_TEST

START_TEST(test_ctl_usage_errors)
{
    static const struct {
        const char *a[6];
        const char *msg;
    } cases[] = {
        {{NULL}, "no command"},
        {{"frobnicate"}, "unknown command"},
        {{"--bogus", "status"}, "unknown option"},
        {{"status", "--timeout"}, "needs an argument"},
        {{"--timeout", "0", "status"}, "--timeout"},
        {{"--timeout", "abc", "status"}, "--timeout"},
        {{"status", "extra"}, "takes no arguments"},
        {{"set"}, "needs a bucket NAME"},
        {{"set", "red"}, "needs --reservation"},
        {{"set", "red", "blue", "--reservation", "1"}, "takes one NAME"},
        {{"set", "red", "--reservation", "-5"}, "--reservation"},
        {{"set", "red", "--reservation", "12abc"}, "--reservation"},
        {{"set", "red", "--reservation", "99999999999999999999"}, "--reservation"},
        {{"set", "red", "--reservation", "10", "--limit", "5"}, "below"},
        {{"set", "red", "--reservation", "10", "--limit", "lots"}, "--limit"},
        {{"set", "red", "--reservation", "10", "--weight", "0"}, "--weight"},
        {{"set", "bad name", "--reservation", "10"}, "bad bucket name"},
        {{"status", "--reservation", "10"}, "'set' only"},
        {{"remove"}, "needs a bucket NAME"},
        {{"reload", "now"}, "takes no arguments"},
        {{"import"}, "import needs a bucket FILE"},
        {{"import", "a.json", "b.json"}, "import takes one FILE"},
        {{"status", "--dry-run"}, "'import' only"},
        {{"set", "red", "--node", "n1"}, "'status' only"},
        {{"status", "--nodes"}, "--nodes needs --bucket"},
        {{"status", "--node", "n1", "--bucket", "red"}, "not both"},
        {{"status", "--bucket", "bad:name"}, "bad bucket name"},
        {{"keygen"}, "keygen takes one DIR/NAME"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *args[8] = {0};
        for (int k = 0; k < 6 && cases[i].a[k]; k++)
            args[k] = cases[i].a[k];
        int rc = run(args);
        ck_assert_msg(rc == 2, "case %zu: exit %d, stderr: %s", i, rc, err);
        ck_assert_msg(strstr(err, cases[i].msg) != NULL, "case %zu: stderr '%s' lacks '%s'", i, err,
                      cases[i].msg);
        ck_assert_msg(strstr(err, "--help") != NULL, "case %zu: no hint", i);
    }
}
END_TEST

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A loopback port with nothing listening (bound, then released). */
static int dead_port(void)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    ck_assert_int_eq(bind(s, (struct sockaddr *)&a, sizeof a), 0);
    socklen_t l = sizeof a;
    getsockname(s, (struct sockaddr *)&a, &l);
    close(s);
    return ntohs(a.sin_port);
}

START_TEST(test_ctl_unreachable)
{
    char ep[64];
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", dead_port());
    double t0 = now_s();
    ck_assert_int_eq(RUN("--endpoint", ep, "--timeout", "300", "status"), 3);
    ck_assert_double_lt(now_s() - t0, 10.0); /* a hang would be forever; the machine may be loaded */
    ck_assert_ptr_nonnull(strstr(err, "unreachable"));
    ck_assert_ptr_nonnull(strstr(err, ep));
    ck_assert_int_eq(RUN("--endpoint", "nonsense://x", "status"), 2);
}
END_TEST

/* ---- fake admin endpoint ---- */

typedef struct {
    void *ctx, *rep;
    char endpoint[128];
    pthread_t th;
    volatile int stop;
    int garbage;         /* reply with non-JSON */
    int silent;          /* never reply */
    int refuse;          /* import/diff: a diff with a refusal */
    const char *status;  /* status's reply (NULL: status_reply) */
    const char *history; /* history's reply (NULL: bad_request) */
    const char *node;    /* status_node n1's reply (NULL: node_reply), "": not_found */
    char last_req[16384]; /* last request seen */
} fake_t;

static const char *status_reply =
    "{\"v\":1,\"ok\":true,\"period\":12,\"interval\":2,\"intervals\":5,\"period_ms\":1000,"
    "\"elapsed_ms\":450,\"nodes\":[{\"name\":\"n1\",\"state\":\"up\",\"last_report_ms\":120,"
    "\"capacity\":50000,\"buckets\":2},{\"name\":\"n2\",\"state\":\"down\","
    "\"last_report_ms\":null,\"capacity\":40000,\"buckets\":0}],"
    "\"buckets\":[{\"name\":\"red\",\"reservation\":30000,\"limit\":60000,\"weight\":1,"
    "\"served\":14000,\"served_r\":13000,\"served_l\":1000,\"served_o\":0,\"queued\":5,"
    "\"on_track\":true,\"demand\":7000,\"r_tokens\":16000,\"l_tokens\":30000,"
    "\"reason\":\"held_at_limit\"},{\"name\":\"blue\",\"reservation\":100,\"limit\":null,\"weight\":2,"
    "\"served\":0,\"served_r\":0,\"served_l\":0,\"served_o\":0,\"queued\":9,"
    "\"on_track\":false}],\"stats\":{\"rounds\":50,\"computed\":40,\"skipped\":10,"
    "\"messages_ok\":400,\"messages_rejected\":2,\"rejected\":{\"count\":2}},"
    "\"timing\":{\"mean_ms\":{\"receive\":1.5,\"decode\":0.25,\"pshift\":2,\"encode\":0.125,"
    "\"send\":0.5}},\"future\":[1,2]}";

/* What the controller answers import (and diff) with: red changed, green
 * added, blue removed. */
#define DIFF_BODY                                                                               \
    "\"buckets\":2,\"added\":[{\"name\":\"green\",\"reservation\":50,\"limit\":80,"             \
    "\"weight\":2}],\"removed\":[{\"name\":\"blue\",\"reservation\":100,\"limit\":null,"        \
    "\"weight\":1}],\"changed\":[{\"name\":\"red\",\"old\":{\"name\":\"red\","                  \
    "\"reservation\":300,\"limit\":600,\"weight\":1},\"new\":{\"name\":\"red\","                \
    "\"reservation\":400,\"limit\":null,\"weight\":1}}],\"unchanged\":0"
static const char *diff_reply = "{\"v\":1,\"ok\":true," DIFF_BODY "}";
static const char *diff_refused =
    "{\"v\":1,\"ok\":true," DIFF_BODY ",\"refusal\":{\"error\":\"admission\",\"message\":"
    "\"total reservation too high\"}}";

#define NODE_REPLY_BODY \
    "{\"v\":1,\"ok\":true,\"period\":12,\"interval\":2,\"intervals\":5,\"period_ms\":1000," \
    "\"elapsed_ms\":450,\"node\":{\"name\":\"n1\",\"state\":\"up\",\"last_report_ms\":120," \
    "\"capacity\":50000,\"buckets\":2,\"fallback\":false},\"buckets\":[{\"name\":\"red\"," \
    "\"reported\":true,\"served\":700,\"served_r\":600,\"served_l\":100,\"served_o\":0," \
    "\"queued\":3,\"demand\":900,\"r_tokens\":8000,\"l_tokens\":15000},{\"name\":\"blue\"," \
    "\"reported\":false,\"served\":0,\"served_r\":0,\"served_l\":0,\"served_o\":0,\"queued\":0," \
    "\"demand\":0,\"r_tokens\":null,\"l_tokens\":null}]"
static const char *node_reply = NODE_REPLY_BODY "}";
/* the same, with the summary a paging controller adds */
static const char *node_reply_paged = NODE_REPLY_BODY ",\"summary\":{\"buckets\":2,"
    "\"matched\":2,\"shown\":2,\"offset\":0,\"sort\":\"table\"}}";

static const char *bucket_reply =
    "{\"v\":1,\"ok\":true,\"period\":12,\"interval\":2,\"intervals\":5,\"period_ms\":1000,"
    "\"elapsed_ms\":450,\"bucket\":{\"name\":\"red\",\"reservation\":30000,\"limit\":60000,"
    "\"weight\":1,\"served\":14000,\"served_r\":13000,\"served_l\":1000,\"served_o\":0,"
    "\"queued\":5,\"demand\":7000,\"r_tokens\":16000,\"l_tokens\":30000,"
    "\"reason\":\"held_at_limit\"},\"nodes\":[{\"node\":\"n1\",\"state\":\"up\","
    "\"reported\":true,\"served\":9000,\"served_r\":8000,\"served_l\":1000,\"served_o\":0,"
    "\"queued\":5,\"demand\":4000,\"r_tokens\":9000,\"l_tokens\":17000},{\"node\":\"n2\","
    "\"state\":\"down\",\"reported\":false,\"served\":0,\"served_r\":0,\"served_l\":0,"
    "\"served_o\":0,\"queued\":0,\"demand\":0,\"r_tokens\":7000,\"l_tokens\":13000}],"
    "\"nodes_without\":1}";

static void *fake_main(void *arg)
{
    fake_t *f = arg;
    while (!f->stop) {
        zmq_pollitem_t pi = {f->rep, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&pi, 1, 20) <= 0)
            continue;
        int n = zmq_recv(f->rep, f->last_req, sizeof f->last_req - 1, 0);
        if (n < 0)
            continue;
        f->last_req[n] = '\0';
        if (f->silent)
            continue; /* REP is now stuck; the test ends soon */
        const char *reply = "{\"v\":1,\"ok\":false,\"error\":\"bad_request\",\"message\":\"?\"}";
        json_t *req = json_loads(f->last_req, 0, NULL);
        const char *cmd = json_string_value(json_object_get(req, "cmd"));
        const char *name = json_string_value(json_object_get(req, "name"));
        if (f->garbage)
            reply = "this is not json";
        else if (!cmd)
            ;
        else if (!strcmp(cmd, "status"))
            reply = f->status ? f->status : status_reply;
        else if (!strcmp(cmd, "history") && f->history)
            reply = f->history;
        else if (!strcmp(cmd, "buckets"))
            reply = "{\"v\":1,\"ok\":true,\"buckets\":[{\"name\":\"red\",\"reservation\":30000,"
                    "\"limit\":60000,\"weight\":1}]}";
        else if (!strcmp(cmd, "set"))
            reply = "{\"v\":1,\"ok\":true,\"created\":true}";
        else if (!strcmp(cmd, "remove") && name && !strcmp(name, "ghost"))
            reply = "{\"v\":1,\"ok\":false,\"error\":\"not_found\",\"message\":\"no bucket ghost\"}";
        else if (!strcmp(cmd, "remove"))
            reply = "{\"v\":1,\"ok\":true}";
        else if (!strcmp(cmd, "reload"))
            reply = "{\"v\":1,\"ok\":true,\"buckets\":3}";
        else if (!strcmp(cmd, "import") || !strcmp(cmd, "diff"))
            reply = f->refuse ? diff_refused : diff_reply;
        else if (!strcmp(cmd, "status_node") && name && !strcmp(name, "n1") &&
                 !(f->node && !*f->node))
            reply = f->node ? f->node : node_reply;
        else if (!strcmp(cmd, "status_bucket") && name && !strcmp(name, "red"))
            reply = bucket_reply;
        else if (!strcmp(cmd, "status_node") || !strcmp(cmd, "status_bucket"))
            reply = "{\"v\":1,\"ok\":false,\"error\":\"not_found\",\"message\":\"no such thing\"}";
        json_decref(req);
        zmq_send(f->rep, reply, strlen(reply), 0);
    }
    return NULL;
}

static void fake_start(fake_t *f)
{
    memset(f, 0, sizeof *f);
    f->ctx = zmq_ctx_new();
    f->rep = zmq_socket(f->ctx, ZMQ_REP);
    int zero = 0;
    zmq_setsockopt(f->rep, ZMQ_LINGER, &zero, sizeof zero);
    ck_assert_int_eq(zmq_bind(f->rep, "tcp://127.0.0.1:*"), 0);
    size_t len = sizeof f->endpoint;
    zmq_getsockopt(f->rep, ZMQ_LAST_ENDPOINT, f->endpoint, &len);
    pthread_create(&f->th, NULL, fake_main, f);
}

static void fake_stop(fake_t *f)
{
    f->stop = 1;
    pthread_join(f->th, NULL);
    zmq_close(f->rep);
    zmq_ctx_term(f->ctx);
}

START_TEST(test_ctl_commands)
{
    fake_t f;
    fake_start(&f);
    const char *ep = f.endpoint;

    ck_assert_int_eq(RUN("--endpoint", ep, "status"), 0);
    ck_assert_ptr_nonnull(strstr(out, "period 12  interval 2/5"));
    ck_assert_ptr_nonnull(strstr(out, "NODE"));
    ck_assert_ptr_nonnull(strstr(out, "120 ms"));
    ck_assert_ptr_nonnull(strstr(out, "never"));
    ck_assert_ptr_nonnull(strstr(out, "REASON"));
    ck_assert_msg(strstr(out, "   7000     16000     30000  held at limit\n"), "%s", out); /* red */
    ck_assert_ptr_nonnull(strstr(out, "none")); /* blue has no limit */
    ck_assert_ptr_nonnull(strstr(out, "rounds 50 (computed 40, skipped 10)"));
    ck_assert_ptr_nonnull(strstr(out, "rejected 2 (count 2)"));
    ck_assert_ptr_nonnull(strstr(out, "pshift 2.000"));
    ck_assert_ptr_nonnull(strstr(f.last_req, "\"cmd\":\"status\""));

    ck_assert_int_eq(RUN("--endpoint", ep, "--json", "status"), 0);
    json_t *j = json_loads(out, 0, NULL);
    ck_assert_ptr_nonnull(j);
    ck_assert_int_eq(json_array_size(json_object_get(j, "buckets")), 2);
    json_decref(j);

    ck_assert_int_eq(RUN("--endpoint", ep, "buckets"), 0);
    ck_assert_ptr_nonnull(strstr(out, "RESERVATION"));
    ck_assert_ptr_nonnull(strstr(out, "30000"));

    ck_assert_int_eq(RUN("set", "red", "--endpoint", ep, "--reservation", "30000", "--limit",
                         "none", "--weight", "3"),
                     0);
    ck_assert_ptr_nonnull(strstr(out, "bucket red created"));
    j = json_loads(f.last_req, 0, NULL);
    ck_assert_ptr_nonnull(j);
    ck_assert_int_eq(json_integer_value(json_object_get(j, "v")), 1);
    ck_assert_str_eq(json_string_value(json_object_get(j, "name")), "red");
    ck_assert_int_eq(json_integer_value(json_object_get(j, "reservation")), 30000);
    ck_assert(json_is_null(json_object_get(j, "limit")));
    ck_assert_int_eq(json_integer_value(json_object_get(j, "weight")), 3);
    json_decref(j);
    ck_assert_int_eq(RUN("--endpoint", ep, "set", "red", "--reservation", "1"), 0);
    j = json_loads(f.last_req, 0, NULL);
    ck_assert_ptr_null(json_object_get(j, "limit"));  /* omitted, not null */
    ck_assert_ptr_null(json_object_get(j, "weight"));
    json_decref(j);

    ck_assert_int_eq(RUN("--endpoint", ep, "remove", "red"), 0);
    ck_assert_ptr_nonnull(strstr(out, "removed"));
    ck_assert_int_eq(RUN("--endpoint", ep, "remove", "ghost"), 1);
    ck_assert_ptr_nonnull(strstr(err, "not_found"));
    ck_assert_ptr_nonnull(strstr(err, "no bucket ghost"));
    ck_assert_int_eq(RUN("--endpoint", ep, "reload"), 0);
    ck_assert_ptr_nonnull(strstr(out, "3 buckets"));

    f.garbage = 1;
    ck_assert_int_eq(RUN("--endpoint", ep, "status"), 3);
    ck_assert_ptr_nonnull(strstr(err, "not a JSON object"));
    f.garbage = 0;
    f.silent = 1;
    double t0 = now_s();
    ck_assert_int_eq(RUN("--endpoint", ep, "--timeout", "300", "status"), 3);
    ck_assert_double_lt(now_s() - t0, 10.0); /* a hang would be forever; the machine may be loaded */
    ck_assert_ptr_nonnull(strstr(err, "did not answer"));
    fake_stop(&f);
}
END_TEST

/* Writes `text` to a new file under /tmp; its path into path (64 bytes). */
static void write_tmp(char *path, const char *text)
{
    snprintf(path, 64, "/tmp/test_ctl_bfXXXXXX");
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    size_t n = strlen(text);
    ck_assert_int_eq(write(fd, text, n), (ssize_t)n);
    close(fd);
}

START_TEST(test_ctl_import)
{
    fake_t f;
    fake_start(&f);
    const char *ep = f.endpoint;
    static const char *file = "{\"buckets\":[\n  {\"name\":\"red\",\"reservation\":400},\n"
                              "  {\"name\":\"green\",\"reservation\":50,\"limit\":80,\"weight\":2}\n]}\n";
    char path[64];
    write_tmp(path, file);

    /* The file goes whole, as text, with its name. */
    ck_assert_int_eq(RUN("--endpoint", ep, "import", path), 0);
    json_t *j = json_loads(f.last_req, 0, NULL);
    ck_assert_ptr_nonnull(j);
    ck_assert_str_eq(json_string_value(json_object_get(j, "cmd")), "import");
    ck_assert_str_eq(json_string_value(json_object_get(j, "text")), file);
    ck_assert_str_eq(json_string_value(json_object_get(j, "source")), strrchr(path, '/') + 1);
    json_decref(j);
    ck_assert_msg(strstr(out, "2 buckets; 1 added, 1 removed, 1 changed, 0 unchanged"), "%s", out);
    ck_assert_msg(strstr(out, "changed  red     300 -> 400   600 -> none  1\n"), "%s", out);
    ck_assert_msg(strstr(out, "added    green   50           80           2\n"), "%s", out);
    ck_assert_msg(strstr(out, "removed  blue    100          none         1\n"), "%s", out);

    /* --dry-run asks for the diff; --json passes the reply through. */
    ck_assert_int_eq(RUN("--endpoint", ep, "import", "--dry-run", path), 0);
    ck_assert_ptr_nonnull(strstr(f.last_req, "\"cmd\":\"diff\""));
    ck_assert_ptr_nonnull(strstr(out, "(dry run)"));
    ck_assert_int_eq(RUN("--endpoint", ep, "--json", "import", "--dry-run", path), 0);
    j = json_loads(out, 0, NULL);
    ck_assert_ptr_nonnull(j);
    ck_assert_int_eq(json_array_size(json_object_get(j, "changed")), 1);
    json_decref(j);

    /* A dry run the controller would refuse: the diff, why, and exit 1. */
    f.refuse = 1;
    ck_assert_int_eq(RUN("--endpoint", ep, "import", "--dry-run", path), 1);
    ck_assert_ptr_nonnull(strstr(out, "300 -> 400"));
    ck_assert_msg(strstr(err, "would refuse this import: admission: total reservation too high"),
                  "%s", err);
    f.refuse = 0;

    /* Garbage is refused here, with its position, and nothing is sent. */
    static const char *const bad[][2] = {
        {"{\"buckets\":[{\"name\":\"red\",\"reservation\":400},\n {\"name\":\"x\",\"reservation\":5,"
         "\"limt\":3}]}", ":2:"},
        {"{\"buckets\":[{\"name\":\"red\",\"reservation\":400,}]}", ":1:"},
        {"not json at all", ":1:"},
        {"{\"buckets\":[{\"name\":\"red\",\"reservation\":10,\"limit\":5}]}", "buckets[0]"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char bp[64];
        write_tmp(bp, bad[i][0]);
        f.last_req[0] = '\0';
        ck_assert_int_eq(RUN("--endpoint", ep, "import", bp), 2);
        ck_assert_msg(strstr(err, bp) && strstr(err, bad[i][1]) && strstr(err, "nothing sent"),
                      "case %zu: %s", i, err);
        ck_assert_str_eq(f.last_req, "");
        unlink(bp);
    }
    f.last_req[0] = '\0';
    ck_assert_int_eq(RUN("--endpoint", ep, "import", "/nonexistent/buckets.json"), 2);
    ck_assert_ptr_nonnull(strstr(err, "/nonexistent/buckets.json"));
    ck_assert_str_eq(f.last_req, "");

    /* Past the admin endpoint's 64 KiB request bound: refused here. */
    size_t cap = 200000, len = 0;
    char *big = malloc(cap);
    ck_assert_ptr_nonnull(big);
    len += (size_t)snprintf(big + len, cap - len, "{\"buckets\":[");
    for (int i = 0; i < 1500; i++)
        len += (size_t)snprintf(big + len, cap - len, "%s{\"name\":\"bucket-number-%04d\","
                                "\"reservation\":%d}", i ? ",\n" : "", i, i);
    snprintf(big + len, cap - len, "]}\n");
    char bigp[64];
    write_tmp(bigp, big);
    free(big);
    ck_assert_int_eq(RUN("--endpoint", ep, "import", bigp), 2);
    ck_assert_msg(strstr(err, "too large") && strstr(err, "65536") && strstr(err, "nothing sent"),
                  "%s", err);
    ck_assert_str_eq(f.last_req, "");
    unlink(bigp);
    unlink(path);
    fake_stop(&f);
}
END_TEST

START_TEST(test_ctl_status_node_bucket)
{
    fake_t f;
    fake_start(&f);
    const char *ep = f.endpoint;
    ck_assert_int_eq(RUN("--endpoint", ep, "status", "--node", "n1"), 0);
    json_t *j = json_loads(f.last_req, 0, NULL);
    ck_assert_str_eq(json_string_value(json_object_get(j, "cmd")), "status_node");
    ck_assert_str_eq(json_string_value(json_object_get(j, "name")), "n1");
    json_decref(j);
    ck_assert_ptr_nonnull(strstr(out, "period 12  interval 2/5"));
    ck_assert_msg(strstr(out, "node n1: up, last report 120 ms ago, capacity 50000 IOPS"), "%s", out);
    ck_assert_msg(strstr(out, "red        700  600  100  0       3     900      8000     15000\n"),
                  "%s", out);
    ck_assert_msg(strstr(out, "blue         -    -    -  -       0       0         -         -\n"),
                  "%s", out); /* not reported, nothing pushed yet */
    ck_assert_int_eq(RUN("--endpoint", ep, "status", "--node", "ghost"), 1);
    ck_assert_ptr_nonnull(strstr(err, "not_found"));

    ck_assert_int_eq(RUN("--endpoint", ep, "status", "--bucket", "red", "--nodes"), 0);
    j = json_loads(f.last_req, 0, NULL);
    ck_assert_str_eq(json_string_value(json_object_get(j, "cmd")), "status_bucket");
    ck_assert_str_eq(json_string_value(json_object_get(j, "name")), "red");
    json_decref(j);
    ck_assert_msg(strstr(out, "held at limit"), "%s", out);
    ck_assert_msg(strstr(out, "NODE  STATE  SERVED"), "%s", out);
    ck_assert_msg(strstr(out, "n1    up       9000  8000  1000  0       5    4000      9000     17000\n"),
                  "%s", out);
    ck_assert_msg(strstr(out, "n2    down        -     -     -  -       0       0      7000     13000\n"),
                  "%s", out);
    ck_assert_ptr_nonnull(strstr(out, "1 node without it in its table"));
    /* Without --nodes: the bucket's row only. */
    ck_assert_int_eq(RUN("--endpoint", ep, "status", "--bucket", "red"), 0);
    ck_assert_ptr_null(strstr(out, "NODE"));
    ck_assert_ptr_nonnull(strstr(out, "held at limit"));
    ck_assert_int_eq(RUN("--endpoint", ep, "status", "--bucket", "ghost", "--nodes"), 1);
    ck_assert_ptr_nonnull(strstr(err, "not_found"));
    ck_assert_int_eq(RUN("--endpoint", ep, "--json", "status", "--bucket", "red", "--nodes"), 0);
    j = json_loads(out, 0, NULL);
    ck_assert_int_eq(json_array_size(json_object_get(j, "nodes")), 2);
    json_decref(j);
    fake_stop(&f);
}
END_TEST

/* keygen makes the directories it needs, 0700, and never overwrites. */
/* Shard 1's status: n1 up there too, n2 up here (down in shard 0's). */
static const char *status_shard1 =
    "{\"v\":1,\"ok\":true,\"id\":\"s1a\",\"leader\":true,\"epoch\":7,\"leader_id\":\"s1a\","
    "\"period\":12,\"interval\":2,\"intervals\":5,\"period_ms\":1000,"
    "\"elapsed_ms\":450,\"nodes\":[{\"name\":\"n2\",\"state\":\"up\",\"last_report_ms\":300,"
    "\"capacity\":30000,\"buckets\":1,\"fallbacks\":1},{\"name\":\"n1\",\"state\":\"up\","
    "\"last_report_ms\":100,\"capacity\":60000,\"buckets\":1}],"
    "\"buckets\":[{\"name\":\"green\",\"reservation\":500,\"limit\":null,\"weight\":1,"
    "\"served\":20000,\"served_r\":500,\"served_l\":0,\"served_o\":19500,\"queued\":1,"
    "\"demand\":9000}],\"summary\":{\"buckets\":1,\"matched\":1,\"shown\":1,\"offset\":0,"
    "\"sort\":\"served\",\"reservation\":500,\"limited\":0,\"demand\":9000,\"served\":20000,"
    "\"queued\":1,\"queued_buckets\":1}}";

/* A request's integer member `key` (-1: none). */
static long long req_int(const char *req, const char *key)
{
    json_t *j = json_loads(req, 0, NULL);
    json_t *v = json_object_get(j, key);
    long long x = json_is_integer(v) ? (long long)json_integer_value(v) : -1;
    json_decref(j);
    return x;
}

/* bqos-ctl over two shards: status and history merged into one view,
 * sorted and paged on the merge (issue 30). */
START_TEST(test_ctl_shards_merged)
{
    fake_t f0, f1;
    fake_start(&f0);
    fake_start(&f1);
    f1.status = status_shard1;
    f0.history = "{\"v\":1,\"ok\":true,\"period\":12,\"period_ms\":1000,\"judged\":4,"
                 "\"buckets\":[{\"name\":\"red\",\"periods\":[{\"period\":11,"
                 "\"reservation\":\"met\",\"served\":70}]}]}";
    f1.history = "{\"v\":1,\"ok\":true,\"period\":12,\"period_ms\":1000,\"judged\":3,"
                 "\"buckets\":[{\"name\":\"green\",\"periods\":[{\"period\":11,"
                 "\"held_at_limit\":true,\"served\":90}]}]}";
    char ep[300];
    snprintf(ep, sizeof ep, "%s;%s", f0.endpoint, f1.endpoint);

    /* the busiest two of three buckets, across the shards */
    ck_assert_int_eq(RUN("--endpoint", ep, "status", "--sort", "served", "--limit", "2"), 0);
    ck_assert_ptr_nonnull(strstr(out, "SHARD"));
    ck_assert_ptr_nonnull(strstr(out, "shard 1 of 2: controller s1a: leader, epoch 7"));
    const char *g = strstr(out, "green"), *r = strstr(out, "red");
    ck_assert_ptr_nonnull(g);
    ck_assert_ptr_nonnull(r);
    ck_assert(g < r);
    ck_assert_ptr_null(strstr(out, "blue"));
    ck_assert_ptr_nonnull(strstr(out, "up/up"));   /* n1 */
    ck_assert_ptr_nonnull(strstr(out, "down/up")); /* n2 */
    ck_assert_ptr_eq(strstr(strstr(out, "NODE") + 1, "NODE"), NULL); /* one node table */
    /* each shard asked for the first offset + limit rows */
    ck_assert_int_eq(req_int(f1.last_req, "limit"), 2);

    /* --offset on the merge: the second busiest alone */
    ck_assert_int_eq(RUN("--endpoint", ep, "--json", "status", "--sort", "served", "--limit",
                         "1", "--offset", "1"), 0);
    json_t *j = json_loads(out, 0, NULL);
    ck_assert_ptr_nonnull(j);
    ck_assert_int_eq(req_int(f0.last_req, "limit"), 2);
    ck_assert_int_eq(req_int(f0.last_req, "offset"), -1);
    json_t *bs = json_object_get(j, "buckets");
    ck_assert_int_eq(json_array_size(bs), 1);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(bs, 0), "name")), "red");
    ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(bs, 0), "shard")), 0);
    ck_assert_int_eq(json_array_size(json_object_get(j, "shards")), 2);
    json_t *nodes = json_object_get(j, "nodes");
    ck_assert_int_eq(json_array_size(nodes), 2);
    json_t *n2 = json_array_get(nodes, 1);
    ck_assert_str_eq(json_string_value(json_object_get(n2, "name")), "n2");
    ck_assert_int_eq(json_integer_value(json_object_get(n2, "capacity")), 30000);
    ck_assert_str_eq(json_string_value(json_object_get(
                         json_array_get(json_object_get(n2, "shards"), 0), "state")), "down");
    json_t *sm = json_object_get(j, "summary");
    /* shard 0 (status_reply) has no summary: only shard 1 sums */
    ck_assert_int_eq(json_integer_value(json_object_get(sm, "served")), 20000);
    ck_assert_int_eq(json_integer_value(json_object_get(sm, "shown")), 1);
    ck_assert_int_eq(json_integer_value(json_object_get(sm, "offset")), 1);
    json_decref(j);

    /* history: one table, a SHARD column */
    ck_assert_int_eq(RUN("--endpoint", ep, "history"), 0);
    ck_assert_ptr_nonnull(strstr(out, "SHARD"));
    ck_assert_ptr_nonnull(strstr(out, "reservation met"));
    ck_assert_ptr_nonnull(strstr(out, "held at limit"));
    ck_assert_ptr_nonnull(strstr(out, "3 periods judged"));
    ck_assert_ptr_null(strstr(out, "== shard"));

    /* a shard that does not answer: the rest shown, its exit status */
    fake_stop(&f1);
    ck_assert_int_ne(RUN("--endpoint", ep, "--timeout", "300", "status"), 0);
    ck_assert_ptr_nonnull(strstr(out, "shard 1 of 2: no answer"));
    ck_assert_ptr_nonnull(strstr(out, "red"));
    fake_stop(&f0);
}
END_TEST

/* Shard 1's status_node n1: green there, n1 in fallback. */
static const char *node_shard1 =
    "{\"v\":1,\"ok\":true,\"period\":12,\"interval\":2,\"intervals\":5,\"period_ms\":1000,"
    "\"elapsed_ms\":450,\"node\":{\"name\":\"n1\",\"state\":\"up\",\"last_report_ms\":300,"
    "\"capacity\":40000,\"buckets\":1,\"fallback\":true},\"buckets\":[{\"name\":\"green\","
    "\"reported\":true,\"served\":900,\"served_r\":500,\"served_l\":0,\"served_o\":400,"
    "\"queued\":1,\"demand\":1000,\"r_tokens\":600,\"l_tokens\":null}],"
    "\"summary\":{\"buckets\":1,\"matched\":1,\"shown\":1,\"offset\":0,\"sort\":\"table\"}}";

/* bqos-ctl status --node over two shards: one view of the node, its state
 * in each shard, its buckets of both with a SHARD column, paged on the
 * merge; a shard that does not know it is shown, not an error (issue 30). */
START_TEST(test_ctl_shards_node)
{
    fake_t f0, f1;
    fake_start(&f0);
    fake_start(&f1);
    f0.node = node_reply_paged;
    f1.node = node_shard1;
    char ep[300];
    snprintf(ep, sizeof ep, "%s;%s", f0.endpoint, f1.endpoint);

    ck_assert_int_eq(RUN("--endpoint", ep, "status", "--node", "n1"), 0);
    ck_assert_ptr_null(strstr(out, "== shard"));
    ck_assert_msg(strstr(out, "node n1 over 2 shards: capacity 40000 IOPS"), "%s", out);
    ck_assert_msg(strstr(out, "3 bucket names (fallback)"), "%s", out);
    ck_assert_msg(strstr(out, "SHARD  STATE         LAST REPORT  CAPACITY  BUCKETS\n"
                              "    0  up                 120 ms     50000        2\n"
                              "    1  up, fallback       300 ms     40000        1\n"), "%s", out);
    ck_assert_msg(strstr(out, "BUCKET  SHARD  SERVED"), "%s", out);
    ck_assert_msg(strstr(out, "red         0     700  600  100    0       3     900      8000     15000\n"),
                  "%s", out);
    ck_assert_msg(strstr(out, "green       1     900  500    0  400       1    1000       600      none\n"),
                  "%s", out);

    /* paged on the merge: rows 2..3 of red, blue (shard 0), green (shard 1) */
    ck_assert_int_eq(RUN("--endpoint", ep, "--json", "status", "--node", "n1", "--limit", "2",
                         "--offset", "1"), 0);
    ck_assert_int_eq(req_int(f1.last_req, "limit"), 3);
    ck_assert_int_eq(req_int(f1.last_req, "offset"), -1);
    json_t *j = json_loads(out, 0, NULL);
    ck_assert_ptr_nonnull(j);
    json_t *bs = json_object_get(j, "buckets");
    ck_assert_int_eq(json_array_size(bs), 2);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(bs, 0), "name")), "blue");
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(bs, 1), "name")), "green");
    ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(bs, 1), "shard")), 1);
    json_t *per = json_object_get(json_object_get(j, "node"), "shards");
    ck_assert_int_eq(json_array_size(per), 2);
    ck_assert_int_eq(json_array_size(json_object_get(j, "shards")), 2);
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(j, "summary"), "matched")), 3);
    json_decref(j);
    ck_assert_int_eq(RUN("--endpoint", ep, "status", "--node", "n1", "--limit", "1", "--offset",
                         "2"), 0);
    ck_assert_msg(strstr(out, "3 configured buckets in its table, rows 3-3 shown (shard, then "
                              "table order"), "%s", out);

    /* shard 1 does not know it: shown, exit 0; no shard knows: exit 1 */
    f1.node = "";
    ck_assert_int_eq(RUN("--endpoint", ep, "status", "--node", "n1"), 0);
    ck_assert_msg(strstr(out, "    1  not known (no hello)"), "%s", out);
    ck_assert_int_eq(RUN("--endpoint", ep, "status", "--node", "ghost"), 1);
    ck_assert_ptr_nonnull(strstr(err, "not_found"));
    fake_stop(&f1);
    fake_stop(&f0);
}
END_TEST

START_TEST(test_ctl_keygen_dir)
{
    char top[] = "/tmp/test_ctl_keysXXXXXX", base[256], p[300];
    ck_assert_ptr_nonnull(mkdtemp(top));
    snprintf(base, sizeof base, "%s/a/b/admin", top);
    ck_assert_int_eq(RUN("keygen", base), 0);
    ck_assert_msg(strstr(out, "created directory") && strstr(out, "(mode 0700)"), "%s", out);
    struct stat st;
    snprintf(p, sizeof p, "%s/a/b", top);
    ck_assert_int_eq(stat(p, &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0700);
    snprintf(p, sizeof p, "%s/a", top);
    ck_assert_int_eq(stat(p, &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0700);
    snprintf(p, sizeof p, "%s.key", base);
    ck_assert_int_eq(stat(p, &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0600);
    /* A second run refuses: the key exists. */
    ck_assert_int_eq(RUN("keygen", base), 1);
    ck_assert_msg(strstr(err, "never overwrites"), "%s", err);
    ck_assert_ptr_null(strstr(out, "created directory"));
    /* A file where the directory should be. */
    snprintf(p, sizeof p, "%s/a/b/admin.key/x", top);
    ck_assert_int_eq(RUN("keygen", p), 1);
    ck_assert_ptr_nonnull(strstr(err, "not a directory"));
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", top);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

int main(void)
{
    const char *bin = getenv("BIN");
    snprintf(ctl_path, sizeof ctl_path, "%s/bqos-ctl", bin && *bin ? bin : "bin");
    if (access(ctl_path, X_OK) != 0) {
        fprintf(stderr, "test_ctl: %s not built\n", ctl_path);
        return EXIT_FAILURE;
    }
    const TTest *const tests[] = {test_ctl_help_version, test_ctl_usage_errors,
                                  test_ctl_unreachable, test_ctl_commands, test_ctl_import,
                                  test_ctl_status_node_bucket, test_ctl_keygen_dir,
                                  test_ctl_shards_merged, test_ctl_shards_node};
    const testlib_case_t c = {.name = "ctl", .timeout = 30};
    return testlib_run_case(&c, tests, sizeof tests / sizeof tests[0]);
}
