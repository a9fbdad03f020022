/* test_metricsd.c - Check suite for common/metricsd: the process_* series and build info, and a live endpoint on a loopback port whose owner is a thread of the test: /metrics with them appended, /healthz while the owner answers and 503 when it does not, /readyz through the readiness test, 404 and 405. */
#include <check.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/hostport.h"
#include "common/log.h"
#include "common/metricsd.h"
#include "common/version.h"
#include "tests/testlib.h"

/* The value of the unlabelled sample `name` in text, or -1 if absent. */
static double sample(const char *text, const char *name)
{
    char want[128];
    snprintf(want, sizeof want, "\n%s ", name);
    const char *p = strstr(text, want);
    return p ? strtod(p + strlen(want), NULL) : -1;
}

START_TEST(test_metricsd_process_series)
{
    promtext_t *p = promtext_new();
    ck_assert_ptr_nonnull(p);
    metricsd_render_process(p, "bqos-test");
    ck_assert_int_eq(promtext_error(p), 0);
    const char *t = promtext_data(p, NULL);
    time_t now = time(NULL);
    double start = sample(t, "process_start_time_seconds");
    ck_assert_msg(start > (double)now - 600 && start <= (double)now + 1, "start %f, now %lld",
                  start, (long long)now);
    ck_assert_double_ge(sample(t, "process_cpu_seconds_total"), 0);
    ck_assert_double_gt(sample(t, "process_resident_memory_bytes"), 1 << 20);
    ck_assert_double_ge(sample(t, "process_virtual_memory_bytes"),
                        sample(t, "process_resident_memory_bytes"));
    /* stdin, stdout, stderr at least; the directory read is not counted */
    double fds = sample(t, "process_open_fds");
    ck_assert_double_ge(fds, 3);
    int extra = dup(0);
    promtext_reset(p);
    metricsd_render_process(p, "bqos-test");
    ck_assert_double_eq(sample(promtext_data(p, NULL), "process_open_fds"), fds + 1);
    close(extra);
    ck_assert_double_gt(sample(t = promtext_data(p, NULL), "process_max_fds"), fds);
    ck_assert_ptr_nonnull(strstr(t, "# TYPE process_cpu_seconds_total counter\n"));
    ck_assert_ptr_nonnull(strstr(t, "# TYPE process_open_fds gauge\n"));
    ck_assert_ptr_nonnull(
        strstr(t, "\nbqos_build_info{program=\"bqos-test\",version=\"" BQOS_VERSION "\"} 1\n"));
    promtext_destroy(&p);
}
END_TEST

/* ---- a live endpoint ------------------------------------------------------ */

static metricsd_t *md;
static atomic_int owner_stop, owner_paused, owner_parked, is_ready, renders;
static pthread_t owner;

static void render(void *arg, promtext_t *out)
{
    (void)arg;
    atomic_fetch_add(&renders, 1);
    promtext_family(out, "bqos_test_total", PROMTEXT_COUNTER, "A test counter.");
    promtext_u64(out, NULL, 0, 7);
}

static int ready(void *arg, char *why, size_t cap)
{
    if (arg == &is_ready && atomic_load(&is_ready))
        return 1;
    snprintf(why, cap, "no bucket table yet");
    return 0;
}

/* The owner's loop: serves the endpoint unless paused. */
static void *owner_main(void *arg)
{
    (void)arg;
    while (!atomic_load(&owner_stop)) {
        struct pollfd p = {.fd = metricsd_fd(md), .events = POLLIN};
        int paused = atomic_load(&owner_paused);
        atomic_store(&owner_parked, paused); /* seen: no poll runs from here on */
        if (paused)
            usleep(20000);
        else if (poll(&p, 1, 20) > 0)
            metricsd_serve(md);
    }
    return NULL;
}

/* "METHOD PATH" over HTTP/1.0 to the endpoint; returns the status code and
 * the body in body[0..cap). */
static int http(const char *method, const char *path, char *body, size_t cap)
{
    char host[256];
    unsigned port;
    ck_assert_int_eq(hostport_split(metricsd_address(md), host, sizeof host, &port), 0);
    char ports[16];
    snprintf(ports, sizeof ports, "%u", port);
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai;
    ck_assert_int_eq(getaddrinfo(host, ports, &hints, &ai), 0);
    int fd = socket(ai->ai_family, SOCK_STREAM, 0);
    ck_assert_int_eq(connect(fd, ai->ai_addr, ai->ai_addrlen), 0);
    freeaddrinfo(ai);
    char req[256];
    int n = snprintf(req, sizeof req, "%s %s HTTP/1.0\r\n\r\n", method, path);
    ck_assert_int_eq(write(fd, req, (size_t)n), n);
    static char resp[65536];
    size_t len = 0;
    ssize_t r;
    while (len < sizeof resp - 1 && (r = read(fd, resp + len, sizeof resp - 1 - len)) > 0)
        len += (size_t)r;
    resp[len] = '\0';
    close(fd);
    int code = 0;
    ck_assert_int_eq(sscanf(resp, "HTTP/1.%*d %d", &code), 1);
    const char *b = strstr(resp, "\r\n\r\n");
    snprintf(body, cap, "%s", b ? b + 4 : "");
    return code;
}

static void endpoint_start(void)
{
    bqos_log_init("bqos-test", BQOS_LOG_WARN);
    int err = 0;
    md = metricsd_new("127.0.0.1:0", render, NULL, &err);
    ck_assert_msg(md != NULL, "metricsd_new: %d", err);
    ck_assert_int_eq(pthread_create(&owner, NULL, owner_main, NULL), 0);
}

static void endpoint_stop(void)
{
    atomic_store(&owner_stop, 1);
    pthread_join(owner, NULL);
    metricsd_destroy(&md);
    ck_assert_ptr_null(md);
}

START_TEST(test_metricsd_endpoint_paths)
{
    endpoint_start();
    char body[65536];
    ck_assert_int_eq(http("GET", "/metrics", body, sizeof body), 200);
    ck_assert_ptr_nonnull(strstr(body, "\nbqos_test_total 7\n"));
    ck_assert_ptr_nonnull(strstr(body, "\nprocess_open_fds "));
    ck_assert_ptr_nonnull(strstr(body, "\nbqos_build_info{program=\"bqos-test\","));
    ck_assert_int_eq(atomic_load(&renders), 1);
    /* Probes cross to the owner without rendering. */
    ck_assert_int_eq(http("GET", "/healthz", body, sizeof body), 200);
    ck_assert_str_eq(body, "ok\n");
    ck_assert_int_eq(http("GET", "/readyz", body, sizeof body), 200); /* no test: ready */
    ck_assert_str_eq(body, "ready\n");
    ck_assert_int_eq(atomic_load(&renders), 1);
    ck_assert_int_eq(http("GET", "/other", body, sizeof body), 404);
    ck_assert_int_eq(http("POST", "/healthz", body, sizeof body), 405);
    endpoint_stop();
}
END_TEST

START_TEST(test_metricsd_readyz_test)
{
    endpoint_start();
    metricsd_set_ready(md, ready, &is_ready);
    char body[256];
    ck_assert_int_eq(http("GET", "/readyz", body, sizeof body), 503);
    ck_assert_str_eq(body, "not ready: no bucket table yet\n");
    ck_assert_int_eq(http("GET", "/healthz", body, sizeof body), 200); /* alive all the same */
    atomic_store(&is_ready, 1);
    ck_assert_int_eq(http("GET", "/readyz", body, sizeof body), 200);
    ck_assert_str_eq(body, "ready\n");
    metricsd_set_ready(md, NULL, NULL);
    atomic_store(&is_ready, 0);
    ck_assert_int_eq(http("GET", "/readyz", body, sizeof body), 200);
    endpoint_stop();
}
END_TEST

START_TEST(test_metricsd_healthz_owner_stuck)
{
    /* An owner that does not answer: 503 after the 5 s wait, then 200 once
     * it answers again. */
    endpoint_start();
    atomic_store(&owner_paused, 1);
    while (!atomic_load(&owner_parked)) /* the owner may be inside a poll that would serve */
        usleep(1000);
    char body[256];
    time_t t0 = time(NULL);
    ck_assert_int_eq(http("GET", "/healthz", body, sizeof body), 503);
    ck_assert_int_ge(time(NULL) - t0, 4);
    ck_assert_str_eq(body, "the daemon did not answer in time\n");
    atomic_store(&owner_paused, 0);
    ck_assert_int_eq(http("GET", "/healthz", body, sizeof body), 200);
    ck_assert_str_eq(body, "ok\n");
    endpoint_stop();
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {test_metricsd_process_series, test_metricsd_endpoint_paths,
                                  test_metricsd_readyz_test, test_metricsd_healthz_owner_stuck};
    return testlib_run_timed("metricsd", 30, tests, sizeof tests / sizeof tests[0]);
}
