/* test_who.c - Check suite for storage-node/io/who: the identities active in each bucket (bqos-ctl who): counts through the per-connection cache, the per-bucket and total bounds, ticks, idle expiry and the text the controller gets. */
#include <check.h>
#include <errno.h>
#include <event2/event.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "common/mono.h"
#include "storage-node/io/who.h"
#include "tests/testlib.h"

static const char *bucket_name(void *arg, int b)
{
    static char names[200][8];
    (void)arg;
    if (b < 0 || b >= 200)
        return NULL;
    snprintf(names[b], sizeof names[b], "b%d", b);
    return names[b];
}

/* A connection from 10.0.h.l with login `user` (NULL: none). */
static void conn_at(conns_conn_t *c, int h, int l, const char *user)
{
    memset(c, 0, sizeof *c);
    c->family = AF_INET;
    c->peer[0] = 10;
    c->peer[2] = (uint8_t)h;
    c->peer[3] = (uint8_t)l;
    if (user)
        ck_assert_int_eq(conns_set_identity(c, CONN_ID_USER, user), 0);
}

static void conn_done(conns_conn_t *c)
{
    conns_set_identity(c, CONN_ID_USER, NULL);
}

/* The registry's text, parsed. */
static json_t *text_of(who_t *w)
{
    char *buf = NULL;
    size_t cap = 0;
    long n = who_format(w, &buf, &cap);
    ck_assert_int_gt(n, 0);
    json_error_t e;
    json_t *d = json_loadb(buf, (size_t)n, 0, &e);
    ck_assert_msg(d != NULL, "%s: %s", buf, e.text);
    free(buf);
    return d;
}

/* Requests of (bucket, id, addr) in the text, or -1 if absent. */
static long long requests(json_t *d, const char *bucket, const char *id, const char *addr)
{
    json_t *e;
    size_t i;
    json_array_foreach(json_object_get(d, "who"), i, e) {
        if (strcmp(json_string_value(json_object_get(e, "bucket")), bucket) == 0 &&
            strcmp(json_string_value(json_object_get(e, "id")), id) == 0 &&
            strcmp(json_string_value(json_object_get(e, "addr")), addr) == 0)
            return json_integer_value(json_object_get(e, "requests"));
    }
    return -1;
}

static long long other_of(json_t *d, const char *bucket)
{
    json_t *e;
    size_t i;
    json_array_foreach(json_object_get(d, "other"), i, e) {
        if (strcmp(json_string_value(json_object_get(e, "bucket")), bucket) == 0)
            return json_integer_value(json_object_get(e, "requests"));
    }
    return 0;
}

static int sink_calls;
static char sink_text[4096];

static void sink(void *arg, const char *text, size_t len)
{
    (void)arg;
    sink_calls++;
    snprintf(sink_text, sizeof sink_text, "%.*s", (int)len, text);
}

START_TEST(test_who_counts_per_identity_and_bucket)
{
    struct event_base *base = event_base_new();
    who_t *w = who_new(base, bucket_name, NULL, NULL);
    ck_assert_ptr_nonnull(w);
    conns_conn_t a, a2, b, anon;
    conn_at(&a, 0, 1, "alice");
    conn_at(&a2, 0, 1, "alice"); /* a second connection of alice's, same address */
    conn_at(&b, 0, 2, "bob");
    conn_at(&anon, 0, 3, NULL);
    for (int i = 0; i < 3; i++)
        who_seen(w, &a, 0);
    who_seen(w, &a2, 0);
    for (int i = 0; i < 5; i++) { /* bob alternates between two buckets */
        who_seen(w, &b, 0);
        who_seen(w, &b, 1);
    }
    who_seen(w, &anon, 1);
    json_t *d = text_of(w);
    ck_assert_int_eq(requests(d, "b0", "user:alice", "10.0.0.1"), 4);
    ck_assert_int_eq(requests(d, "b0", "user:bob", "10.0.0.2"), 5);
    ck_assert_int_eq(requests(d, "b1", "user:bob", "10.0.0.2"), 5);
    ck_assert_int_eq(requests(d, "b1", "", "10.0.0.3"), 1);
    ck_assert_int_eq(requests(d, "b1", "user:alice", "10.0.0.1"), -1);
    ck_assert_uint_eq(json_array_size(json_object_get(d, "who")), 4);
    json_decref(d);
    /* a login later: another identity, its own entry */
    ck_assert_int_eq(conns_set_identity(&anon, CONN_ID_USER, "carol"), 0);
    who_seen(w, &anon, 1);
    d = text_of(w);
    ck_assert_int_eq(requests(d, "b1", "user:carol", "10.0.0.3"), 1);
    ck_assert_int_eq(requests(d, "b1", "", "10.0.0.3"), 1);
    json_decref(d);
    who_seen(NULL, &a, 0); /* no registry: nothing */
    conn_done(&a);
    conn_done(&a2);
    conn_done(&b);
    conn_done(&anon);
    who_destroy(&w);
    ck_assert_ptr_null(w);
    event_base_free(base);
}
END_TEST

START_TEST(test_who_bounds)
{
    struct event_base *base = event_base_new();
    who_t *w = who_new(base, bucket_name, NULL, NULL);
    conns_conn_t c[WHO_PER_BUCKET + 4];
    for (int i = 0; i < WHO_PER_BUCKET + 4; i++) {
        conn_at(&c[i], 1, i, "u");
        who_seen(w, &c[i], 7);
        who_seen(w, &c[i], 7);
    }
    json_t *d = text_of(w);
    ck_assert_uint_eq(json_array_size(json_object_get(d, "who")), WHO_PER_BUCKET);
    ck_assert_int_eq(requests(d, "b7", "user:u", "10.0.1.0"), 2);
    ck_assert_int_eq(other_of(d, "b7"), 2 * 4); /* the 4 past the bound, 2 requests each */
    json_decref(d);
    for (int i = 0; i < WHO_PER_BUCKET + 4; i++)
        conn_done(&c[i]);
    /* the total: WHO_MAX entries, then dropped */
    conns_conn_t x;
    int buckets = WHO_MAX / WHO_PER_BUCKET + 2;
    for (int b = 0; b < buckets; b++)
        for (int i = 0; i < WHO_PER_BUCKET; i++) {
            conn_at(&x, 2 + b, i, NULL);
            who_seen(w, &x, 10 + b);
        }
    who_stats_t st;
    who_stats(w, &st);
    ck_assert_int_eq(st.entries, WHO_MAX);
    ck_assert_uint_gt(st.dropped, 0);
    who_destroy(&w);
    event_base_free(base);
}
END_TEST

START_TEST(test_who_ticks_send_and_expire)
{
    struct event_base *base = event_base_new();
    who_t *w = who_new(base, bucket_name, NULL, NULL);
    who_set_sink(w, sink, NULL);
    sink_calls = 0;
    conns_conn_t a;
    conn_at(&a, 0, 1, "alice");
    double t = mono_now();
    who_tick(w, t + 1); /* nothing yet: no tick, no send */
    ck_assert_int_eq(sink_calls, 0);
    who_seen(w, &a, 3);
    who_tick(w, t + 1); /* a new identity: sent at the tick */
    ck_assert_int_eq(sink_calls, 1);
    ck_assert_ptr_nonnull(strstr(sink_text, "\"bucket\":\"b3\",\"id\":\"user:alice\""));
    who_seen(w, &a, 3); /* a new tick: the cache is stale, the entry counts on */
    who_tick(w, t + 2);
    ck_assert_int_eq(sink_calls, 1); /* no change of the set: not sent ... */
    who_tick(w, t + 1 + WHO_REFRESH_S);
    ck_assert_int_eq(sink_calls, 2); /* ... until the refresh */
    ck_assert_ptr_nonnull(strstr(sink_text, "\"requests\":2"));
    /* idle for WHO_IDLE_S: dropped at the next sweep, and the empty set sent */
    who_tick(w, t + 2 + WHO_IDLE_S + 11);
    ck_assert_int_eq(sink_calls, 3);
    ck_assert_str_eq(sink_text, "{\"who\":[],\"other\":[],\"dropped\":0}");
    who_stats_t st;
    who_stats(w, &st);
    ck_assert_int_eq(st.entries, 0);
    ck_assert_uint_eq(st.sent, 3);
    /* the same connection again: a new entry */
    who_seen(w, &a, 3);
    json_t *d = text_of(w);
    ck_assert_int_eq(requests(d, "b3", "user:alice", "10.0.0.1"), 1);
    json_decref(d);
    conn_done(&a);
    who_destroy(&w);
    event_base_free(base);
}
END_TEST

START_TEST(test_who_text_escapes)
{
    struct event_base *base = event_base_new();
    who_t *w = who_new(base, bucket_name, NULL, NULL);
    conns_conn_t a;
    conn_at(&a, 0, 9, "q\"u\\o\xc3\xa9");
    who_seen(w, &a, 0);
    json_t *d = text_of(w); /* parses: quotes, backslashes and bytes >= 0x7f escaped */
    ck_assert_int_eq(requests(d, "b0", "user:q\"u\\o\xc3\x83\xc2\xa9", "10.0.0.9"), 1);
    json_decref(d);
    conn_done(&a);
    who_destroy(&w);
    int err = 0;
    ck_assert_ptr_null(who_new(NULL, bucket_name, NULL, &err));
    ck_assert_int_eq(err, -EINVAL);
    event_base_free(base);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {test_who_counts_per_identity_and_bucket, test_who_bounds,
                                  test_who_ticks_send_and_expire, test_who_text_escapes};
    return testlib_run_tests("who", tests, sizeof tests / sizeof tests[0]);
}
