/* test_promtext.c - Check suite for common/promtext (the exposition writer: HELP/TYPE, escaping, values, cumulative histograms with +Inf, sticky errors) and common/metricsd (a real GET /metrics rendered on this thread). */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/hostport.h"
#include "common/metricsd.h"
#include "common/promtext.h"
#include "tests/testlib.h"

static const char *text(const promtext_t *p)
{
    return promtext_data(p, NULL);
}

START_TEST(test_promtext_counter_and_gauge)
{
    promtext_t *p = promtext_new();
    ck_assert_ptr_nonnull(p);
    ck_assert_int_eq(promtext_family(p, "bqos_x_total", PROMTEXT_COUNTER, "IOs served."), 0);
    promtext_label_t l[] = {{"bucket", "red"}, {"class", "R"}};
    ck_assert_int_eq(promtext_u64(p, l, 2, UINT64_C(18446744073709551615)), 0);
    ck_assert_int_eq(promtext_family(p, "bqos_g", PROMTEXT_GAUGE, NULL), 0);
    ck_assert_int_eq(promtext_value(p, NULL, 0, 0.25), 0);
    ck_assert_int_eq(promtext_value(p, NULL, 0, 3.0), 0);
    ck_assert_int_eq(promtext_value(p, NULL, 0, 0.1), 0);
    ck_assert_int_eq(promtext_value(p, NULL, 0, INFINITY), 0);
    ck_assert_int_eq(promtext_value(p, NULL, 0, -INFINITY), 0);
    ck_assert_int_eq(promtext_value(p, NULL, 0, NAN), 0);
    ck_assert_str_eq(text(p), "# HELP bqos_x_total IOs served.\n"
                              "# TYPE bqos_x_total counter\n"
                              "bqos_x_total{bucket=\"red\",class=\"R\"} 18446744073709551615\n"
                              "# HELP bqos_g \n"
                              "# TYPE bqos_g gauge\n"
                              "bqos_g 0.25\nbqos_g 3\nbqos_g 0.1\nbqos_g +Inf\nbqos_g -Inf\nbqos_g NaN\n");
    size_t len;
    promtext_data(p, &len);
    ck_assert_uint_eq(len, strlen(text(p)));
    promtext_reset(p);
    ck_assert_str_eq(text(p), "");
    promtext_destroy(&p);
    ck_assert_ptr_null(p);
    promtext_destroy(&p); /* NULL-safe */
}
END_TEST

START_TEST(test_promtext_escaping)
{
    promtext_t *p = promtext_new();
    promtext_family(p, "a:b_c", PROMTEXT_GAUGE, "back\\slash\nnew \"line\"");
    promtext_label_t l[] = {{"bucket", "q\"uo\\te\nnl"}, {"node", ""}};
    promtext_value(p, l, 2, 1);
    ck_assert_int_eq(promtext_error(p), 0);
    ck_assert_str_eq(text(p), "# HELP a:b_c back\\\\slash\\nnew \"line\"\n"
                              "# TYPE a:b_c gauge\n"
                              "a:b_c{bucket=\"q\\\"uo\\\\te\\nnl\",node=\"\"} 1\n");
    promtext_destroy(&p);
}
END_TEST

START_TEST(test_promtext_histogram)
{
    promtext_t *p = promtext_new();
    static const double bounds[] = {0.001, 0.01, 0.5};
    const uint64_t counts[] = {2, 0, 3, 1}; /* per bucket; the last above 0.5 */
    promtext_family(p, "lat_seconds", PROMTEXT_HISTOGRAM, "Latency.");
    promtext_label_t l[] = {{"bucket", "b"}};
    ck_assert_int_eq(promtext_histogram(p, l, 1, bounds, 3, counts, 2.5), 0);
    ck_assert_int_eq(promtext_histogram(p, NULL, 0, bounds, 3, counts, 0.75), 0);
    ck_assert_str_eq(text(p), "# HELP lat_seconds Latency.\n"
                              "# TYPE lat_seconds histogram\n"
                              "lat_seconds_bucket{bucket=\"b\",le=\"0.001\"} 2\n"
                              "lat_seconds_bucket{bucket=\"b\",le=\"0.01\"} 2\n"
                              "lat_seconds_bucket{bucket=\"b\",le=\"0.5\"} 5\n"
                              "lat_seconds_bucket{bucket=\"b\",le=\"+Inf\"} 6\n"
                              "lat_seconds_sum{bucket=\"b\"} 2.5\n"
                              "lat_seconds_count{bucket=\"b\"} 6\n"
                              "lat_seconds_bucket{le=\"0.001\"} 2\n"
                              "lat_seconds_bucket{le=\"0.01\"} 2\n"
                              "lat_seconds_bucket{le=\"0.5\"} 5\n"
                              "lat_seconds_bucket{le=\"+Inf\"} 6\n"
                              "lat_seconds_sum 0.75\n"
                              "lat_seconds_count 6\n");
    /* Where observations fall: v <= bound, the first such bound. */
    ck_assert_uint_eq(promtext_bucket(bounds, 3, 0), 0);
    ck_assert_uint_eq(promtext_bucket(bounds, 3, 0.001), 0);
    ck_assert_uint_eq(promtext_bucket(bounds, 3, 0.0011), 1);
    ck_assert_uint_eq(promtext_bucket(bounds, 3, 0.5), 2);
    ck_assert_uint_eq(promtext_bucket(bounds, 3, 7), 3);
    ck_assert_uint_eq(promtext_bucket(bounds, 0, 7), 0);
    promtext_destroy(&p);
}
END_TEST

START_TEST(test_promtext_errors_are_sticky)
{
    promtext_t *p = promtext_new();
    ck_assert_int_eq(promtext_value(p, NULL, 0, 1), -EINVAL); /* no family yet */
    ck_assert_int_eq(promtext_family(p, "ok", PROMTEXT_GAUGE, ""), -EINVAL);
    promtext_reset(p);
    ck_assert_int_eq(promtext_family(p, "9starts_with_digit", PROMTEXT_GAUGE, ""), -EINVAL);
    promtext_reset(p);
    ck_assert_int_eq(promtext_family(p, "bad-dash", PROMTEXT_GAUGE, ""), -EINVAL);
    promtext_reset(p);
    promtext_family(p, "g", PROMTEXT_GAUGE, "");
    promtext_label_t le[] = {{"le", "1"}};
    ck_assert_int_eq(promtext_value(p, le, 1, 1), -EINVAL);
    promtext_reset(p);
    promtext_family(p, "g", PROMTEXT_GAUGE, "");
    promtext_label_t colon[] = {{"a:b", "1"}};
    ck_assert_int_eq(promtext_value(p, colon, 1, 1), -EINVAL);
    promtext_reset(p);
    static const double down[] = {1, 0.5};
    const uint64_t c[] = {0, 0, 0};
    promtext_family(p, "h", PROMTEXT_HISTOGRAM, "");
    ck_assert_int_eq(promtext_value(p, NULL, 0, 1), -EINVAL); /* a scalar in a histogram */
    promtext_reset(p);
    promtext_family(p, "h", PROMTEXT_HISTOGRAM, "");
    ck_assert_int_eq(promtext_histogram(p, NULL, 0, down, 2, c, 0), -EINVAL);
    promtext_reset(p);
    ck_assert_int_eq(promtext_family(p, "ok", PROMTEXT_GAUGE, ""), 0);
    promtext_destroy(&p);
}
END_TEST

START_TEST(test_promtext_grows)
{
    promtext_t *p = promtext_new();
    promtext_family(p, "big_total", PROMTEXT_COUNTER, "");
    char name[32];
    for (int i = 0; i < 20000; i++) {
        snprintf(name, sizeof name, "b%d", i);
        promtext_label_t l[] = {{"bucket", name}};
        promtext_u64(p, l, 1, (uint64_t)i);
    }
    ck_assert_int_eq(promtext_error(p), 0);
    ck_assert_ptr_nonnull(strstr(text(p), "big_total{bucket=\"b19999\"} 19999\n"));
    promtext_destroy(&p);
}
END_TEST

/* ---- metricsd: one real scrape ---- */

static void render(void *arg, promtext_t *out)
{
    ++*(int *)arg;
    promtext_family(out, "scrapes_total", PROMTEXT_COUNTER, "Scrapes.");
    promtext_u64(out, NULL, 0, (uint64_t)*(int *)arg);
}

typedef struct {
    unsigned port;
    const char *request;
    char reply[4096];
} client_t;

/* GETs on a thread of its own while the test thread plays the owner. */
static void *client_main(void *arg)
{
    client_t *c = arg;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)c->port)};
    sa.sin_addr.s_addr = htonl(0x7f000001);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
        write(fd, c->request, strlen(c->request)) == (ssize_t)strlen(c->request)) {
        size_t got = 0;
        ssize_t n;
        while (got < sizeof c->reply - 1 &&
               (n = read(fd, c->reply + got, sizeof c->reply - 1 - got)) > 0)
            got += (size_t)n;
        c->reply[got] = '\0';
    }
    close(fd);
    return NULL;
}

static void get(metricsd_t *m, const char *request, client_t *c, int serve)
{
    char host[64];
    ck_assert_int_eq(hostport_split(metricsd_address(m), host, sizeof host, &c->port), 0);
    c->request = request;
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, client_main, c), 0);
    struct pollfd pf = {.fd = metricsd_fd(m), .events = POLLIN};
    if (serve && poll(&pf, 1, 5000) == 1)
        metricsd_serve(m);
    pthread_join(t, NULL);
}

START_TEST(test_metricsd_scrape)
{
    int n = 0, err = 0;
    ck_assert_ptr_null(metricsd_new("nonsense", render, &n, &err));
    ck_assert_int_eq(err, -EINVAL);
    metricsd_t *m = metricsd_new("127.0.0.1:0", render, &n, &err);
    ck_assert_ptr_nonnull(m);
    ck_assert_ptr_nonnull(strstr(metricsd_address(m), "127.0.0.1:"));
    client_t c;
    for (int i = 1; i <= 2; i++) {
        get(m, "GET /metrics HTTP/1.0\r\n\r\n", &c, 1);
        ck_assert_msg(strncmp(c.reply, "HTTP/1.0 200", 12) == 0 ||
                      strncmp(c.reply, "HTTP/1.1 200", 12) == 0, "reply: %s", c.reply);
        ck_assert_ptr_nonnull(strstr(c.reply, "Content-Type: text/plain; version=0.0.4"));
        char want[64];
        snprintf(want, sizeof want, "\r\n\r\n# HELP scrapes_total Scrapes.\n");
        ck_assert_ptr_nonnull(strstr(c.reply, want));
        snprintf(want, sizeof want, "scrapes_total %d\n", i);
        ck_assert_ptr_nonnull(strstr(c.reply, want));
    }
    get(m, "GET /other HTTP/1.0\r\n\r\n", &c, 0);
    ck_assert_ptr_nonnull(strstr(c.reply, " 404 "));
    get(m, "POST /metrics HTTP/1.0\r\nContent-Length: 0\r\n\r\n", &c, 0);
    ck_assert_ptr_nonnull(strstr(c.reply, " 405 "));
    ck_assert_int_eq(n, 2);
    metricsd_destroy(&m);
    ck_assert_ptr_null(m);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {test_promtext_counter_and_gauge, test_promtext_escaping,
                                  test_promtext_histogram, test_promtext_errors_are_sticky,
                                  test_promtext_grows, test_metricsd_scrape};
    return testlib_run_tests("promtext", tests, sizeof tests / sizeof tests[0]);
}
