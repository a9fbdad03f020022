/* test_gate.c - Check suite for storage-node/io/gate: the outstanding window (fixed and adaptive), busy time, dispatch at once or at the end of the pass, the one way to find or make a bucket and its cap, tokens, stats, the graceful stop.  Connections: test_conns.c. */
#include <check.h>
#include <errno.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "storage-node/io/gate.h"
#include "tests/testlib.h"

/* A fake front: counts the hook calls. */
typedef struct {
    gate_t *g;
    int dispatches, drained, stops, idle, accepted, refused;
} fake_t;

static void f_dispatch(void *arg)
{
    ((fake_t *)arg)->dispatches++;
}

static void f_drain(sched_item_t *it, void *arg)
{
    (void)it;
    ((fake_t *)arg)->drained++;
}

static void f_stop(void *arg)
{
    ((fake_t *)arg)->stops++;
}

static int f_idle(void *arg)
{
    return ((fake_t *)arg)->idle;
}

static void f_accept(void *arg, evutil_socket_t fd, const struct sockaddr *sa, int salen)
{
    (void)sa;
    (void)salen;
    ((fake_t *)arg)->accepted++;
    evutil_closesocket(fd);
}

static void f_refuse(void *arg, evutil_socket_t fd)
{
    (void)fd;
    ((fake_t *)arg)->refused++;
}

static const gate_hooks_t hooks = {f_dispatch, f_drain, f_stop, f_idle, f_accept, f_refuse, NULL};

static struct event_base *base;
static fake_t fk;

/* A gate whose scheduler (rr) has the bucket "default" (0). */
static gate_t *make(int outstanding, int defer, int max_buckets, int max_conns)
{
    gate_config_t gc = {"test: ", outstanding, max_conns, max_buckets, defer, SCHED_POLICY_RR, 0};
    int err = 0;
    gate_t *g = gate_new(base, &gc, &hooks, &fk, &err);
    ck_assert_msg(g != NULL, "gate_new: %s", strerror(-err));
    ck_assert_int_eq(gate_bucket(g, "default", 7, 1), 0);
    fk.g = g;
    return g;
}

/* Zeroes it[0..n-1] and queues them all on bucket 0. */
static void enqueue_all(sched_item_t *it, int n)
{
    memset(it, 0, (size_t)n * sizeof *it);
    for (int i = 0; i < n; i++)
        ck_assert_int_eq(gate_enqueue(fk.g, 0, &it[i]), 0);
}

static void setup(void)
{
    bqos_log_init("test_gate", BQOS_LOG_ERROR);
    memset(&fk, 0, sizeof fk);
    base = event_base_new();
    ck_assert_ptr_nonnull(base);
}

static void teardown(void)
{
    gate_destroy(&fk.g); /* what is still queued goes to f_drain() */
    event_base_free(base);
}

START_TEST(test_gate_bad_settings)
{
    gate_config_t gc = {"", 0, 1, 0, 0, SCHED_POLICY_TOKENS, 0};
    int err = 0;
    ck_assert_ptr_null(gate_new(base, &gc, &hooks, &fk, &err));
    ck_assert_int_eq(err, -EINVAL);
    gc.outstanding = 1;
    gate_hooks_t h = hooks;
    h.dispatch = NULL;
    ck_assert_ptr_null(gate_new(base, &gc, &h, &fk, &err));
    ck_assert_int_eq(err, -EINVAL);
}
END_TEST

/* gate_take() stops at `outstanding`; each way out of the window frees
 * one place; completions are counted, untaken IOs are not. */
START_TEST(test_gate_window)
{
    gate_t *g = make(2, 0, 0, 10);
    sched_item_t it[5];
    enqueue_all(it, 5);
    ck_assert_ptr_eq(gate_take(g), &it[0]);
    ck_assert_ptr_eq(gate_take(g), &it[1]);
    ck_assert_ptr_null(gate_take(g));
    ck_assert_int_eq(gate_inflight(g), 2);
    gate_done(g);
    ck_assert_ptr_eq(gate_take(g), &it[2]);
    ck_assert_ptr_null(gate_take(g));
    gate_untake(g);
    ck_assert_ptr_eq(gate_take(g), &it[3]);
    gate_done_inline(g);
    ck_assert_ptr_eq(gate_take(g), &it[4]);
    ck_assert_ptr_null(gate_take(g)); /* window full: nothing taken */
    gate_done(g);
    gate_done(g);
    ck_assert_int_eq(gate_inflight(g), 0);
    ck_assert_ptr_null(gate_take(g)); /* queue empty */
    gate_stats_t gs;
    gate_stats(g, &gs);
    ck_assert_uint_eq(gs.node.completions, 4); /* 3 done + 1 inline; not the untaken one */
    ck_assert_uint_eq(gs.node.dispatched, 5);
    ck_assert_int_eq(gs.inflight, 0);
    ck_assert_uint_eq(gs.queued, 0);
}
END_TEST

/* gate_set_window() makes the window adaptive from the current one
 * (clamped), keeps the IOs already out counted, refuses bad settings; the
 * stats carry the window's figures and gate_set_status()'s writer. */
static void extra_status(void *arg, FILE *fp)
{
    (void)arg;
    fputs("STAT extra 1\r\n", fp);
}

START_TEST(test_gate_adaptive_window)
{
    gate_t *g = make(5, 0, 0, 10);
    sched_item_t it[40];
    enqueue_all(it, 40);
    ck_assert_ptr_nonnull(gate_take(g));
    window_config_t wc;
    window_config_defaults(&wc);
    wc.floor = 2;
    wc.ceiling = 3;
    wc.gain = 0; /* refused */
    ck_assert_int_eq(gate_set_window(g, &wc), -EINVAL);
    wc.gain = 0.5;
    wc.epoch = 1e-9;
    wc.min_samples = 1;
    ck_assert_int_eq(gate_set_window(g, &wc), 0);
    gate_stats_t gs;
    gate_stats(g, &gs);
    window_stats_t ws = gs.window;
    ck_assert_int_eq(ws.window, 3); /* 5 clamped to the ceiling */
    ck_assert_uint_eq(gs.queued, 39);
    ck_assert_int_eq(gate_inflight(g), 1);
    int n = 1, most = 0;
    while (gate_take(g))
        n++;
    ck_assert_int_eq(n, 3);
    for (int i = 0; i < 37; i++) { /* complete one, take one: every epoch ends */
        gate_done(g);
        ck_assert_ptr_nonnull(gate_take(g));
        gate_stats(g, &gs);
        ws = gs.window;
        most = ws.window > most ? ws.window : most;
        ck_assert_int_ge(ws.window, 2);
    }
    ck_assert_int_le(most, 3);
    ck_assert_uint_gt(ws.epochs, 10);
    gate_stats(g, &gs);
    ck_assert_ptr_null(gs.status);
    int tag;
    gate_set_status(g, extra_status, &tag);
    gate_stats(g, &gs);
    ck_assert(gs.status == extra_status);
    ck_assert_ptr_eq(gs.status_arg, &tag);
    ck_assert_int_eq(gs.inflight, 3);
    ck_assert_int_eq(gs.window.window, ws.window);
    char *buf = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&buf, &len);
    gs.status(gs.status_arg, fp);
    fclose(fp);
    ck_assert_str_eq(buf, "STAT extra 1\r\n");
    free(buf);
    while (gate_inflight(g) > 0)
        gate_done(g);
}
END_TEST

/* Busy time is the time with at least one IO outstanding, reported with
 * the completion that ends it; an inline completion adds none. */
START_TEST(test_gate_busy_time)
{
    gate_t *g = make(4, 0, 0, 10);
    sched_item_t a = {0}, b = {0};
    gate_enqueue(g, 0, &a);
    gate_enqueue(g, 0, &b);
    ck_assert_ptr_nonnull(gate_take(g));
    struct timespec ts = {0, 30 * 1000 * 1000};
    nanosleep(&ts, NULL);
    gate_done(g);
    gate_stats_t gs;
    gate_stats(g, &gs);
    ck_assert_msg(gs.node.busy_seconds >= 0.025 && gs.node.busy_seconds < 1.0, "busy %f",
                  gs.node.busy_seconds);
    double before = gs.node.busy_seconds;
    nanosleep(&ts, NULL); /* idle: not busy */
    ck_assert_ptr_nonnull(gate_take(g));
    gate_done_inline(g);
    gate_stats(g, &gs);
    ck_assert(gs.node.busy_seconds == before);
}
END_TEST

/* Without defer, gate_kick() dispatches at once; with defer, once at the
 * end of the pass however often it is asked, and not at all while
 * stopping. */
START_TEST(test_gate_dispatch_points)
{
    gate_t *g = make(1, 0, 0, 10);
    gate_kick(g);
    ck_assert_int_eq(fk.dispatches, 1);
    gate_destroy(&fk.g);
    g = make(1, 1, 0, 10);
    fk.dispatches = 0;
    gate_kick(g);
    gate_kick(g);
    gate_request_dispatch(g, 0);
    ck_assert_int_eq(fk.dispatches, 0);
    event_base_loop(base, EVLOOP_NONBLOCK);
    ck_assert_int_eq(fk.dispatches, 1);
    gate_request_dispatch(g, 1); /* next pass, but nothing is queued: no pass at all */
    event_base_loop(base, EVLOOP_NONBLOCK);
    ck_assert_int_eq(fk.dispatches, 1);
    sched_item_t it[2];
    enqueue_all(it, 2);
    ck_assert_uint_eq(gate_queued(g), 2);
    gate_request_dispatch(g, 1); /* next pass: a zero timer */
    event_base_loop(base, EVLOOP_ONCE);
    ck_assert_int_eq(fk.dispatches, 2);
    ck_assert_ptr_eq(gate_take(g), &it[0]); /* taken, removed: nothing queued */
    ck_assert_int_eq(gate_remove(g, &it[1]), 0);
    ck_assert_uint_eq(gate_queued(g), 0);
    gate_done(g);
    gate_request_dispatch(g, 1);
    event_base_loop(base, EVLOOP_NONBLOCK);
    ck_assert_int_eq(fk.dispatches, 2);
    enqueue_all(it, 2);
    fk.idle = 0;
    gate_shutdown(g);
    ck_assert_int_eq(fk.drained, 2);
    ck_assert_uint_eq(gate_queued(g), 0);
    gate_kick(g);
    gate_request_dispatch(g, 0);
    event_base_loop(base, EVLOOP_NONBLOCK);
    ck_assert_int_eq(fk.dispatches, 2);
}
END_TEST

/* gate_bucket() finds a bucket by name (no NUL needed) or makes it (weight
 * 1) under the one cap, max_buckets in all; tokens make theirs too. */
START_TEST(test_gate_buckets_and_tokens)
{
    gate_t *g = make(1, 0, 3, 10);
    ck_assert_int_eq(gate_bucket(g, "red", 3, 0), -ENOENT); /* find only */
    ck_assert_int_eq(gate_bucket(g, "red", 3, 1), 1);
    ck_assert_int_eq(gate_set_weight(g, 1, 2), 0);
    ck_assert_int_eq(gate_bucket(g, "red:key", 3, 1), 1); /* found: weight kept */
    sched_bucket_stats_t bs;
    ck_assert_str_eq(gate_bucket_stats(g, 1, &bs), "red");
    ck_assert_uint_eq(bs.weight, 2);
    ck_assert_int_eq(gate_set_weight(g, 1, 5), 0);
    ck_assert_int_eq(gate_set_weight(g, 1, 0), -EINVAL);
    gate_bucket_stats(g, 1, &bs);
    ck_assert_uint_eq(bs.weight, 5);
    ck_assert_int_eq(gate_bucket(g, "bad name", 8, 1), -EINVAL);
    ck_assert_int_eq(gate_bucket(g, "blue", 4, 1), 2);
    ck_assert_int_eq(gate_bucket(g, "green", 5, 1), -ENOMEM); /* max_buckets 3 */
    ck_assert_int_eq(gate_bucket(g, "blue", 4, 1), 2);        /* found: no cap */
    ck_assert_ptr_null(gate_bucket_stats(g, 3, &bs));
    ck_assert_int_eq(gate_set_tokens(g, "red", 7, 9), 0);
    ck_assert_int_eq(fk.dispatches, 1); /* the new tokens are dispatched */
    gate_bucket_stats(g, 1, &bs);
    ck_assert_int_eq(bs.r_tokens, 7);
    ck_assert_int_eq(bs.l_tokens, 9);
    ck_assert_int_eq(gate_set_tokens(g, "green", 1, 1), -ENOMEM);
    ck_assert_int_eq(gate_set_tokens(g, "red", -1, 1), -EINVAL);
    ck_assert_int_eq(fk.dispatches, 1);
    gate_stats_t gs;
    gate_stats(g, &gs);
    ck_assert_int_eq(gs.buckets, 3);
    ck_assert_int_eq(gs.policy, SCHED_POLICY_RR);
    gate_set_policy(g, SCHED_POLICY_TOKENS); /* and dispatches what it allows */
    ck_assert_int_eq(fk.dispatches, 2);
    gate_stats(g, &gs);
    ck_assert_int_eq(gs.policy, SCHED_POLICY_TOKENS);
    ck_assert_int_eq(gate_set_pacing(g, 1, -1, SCHED_ORDER_RR), -EINVAL);
    ck_assert_int_eq(gate_set_pacing(g, 1, 0.05, SCHED_ORDER_URGENCY), 0);
    gate_destroy(&fk.g);
    g = make(1, 0, 0, 10); /* no cap: an unknown bucket is added, weight 1 */
    ck_assert_int_eq(gate_set_tokens(g, "green", 1, SCHED_UNLIMITED), 0);
    ck_assert_int_eq(gate_bucket(g, "green", 5, 0), 1);
    gate_bucket_stats(g, 1, &bs);
    ck_assert_uint_eq(bs.weight, 1);
}
END_TEST

/* gate_remove() takes a queued item back (its client went away);
 * gate_charge() charges a taken one what it cost once done. */
START_TEST(test_gate_remove_and_charge)
{
    gate_t *g = make(4, 0, 0, 10);
    sched_item_t a = {0}, b = {0}, c = {0};
    ck_assert_int_eq(gate_enqueue(g, 0, &a), 0);
    ck_assert_int_eq(gate_enqueue(g, 0, &b), 0);
    ck_assert_int_eq(gate_enqueue(g, 7, &c), -EINVAL); /* no such bucket */
    ck_assert_int_eq(gate_remove(g, &a), 0);
    gate_stats_t gs;
    gate_stats(g, &gs);
    ck_assert_uint_eq(gs.queued, 1);
    ck_assert_ptr_eq(gate_take(g), &b);
    ck_assert_ptr_null(gate_take(g));
    ck_assert_int_eq(gate_charge(g, &b, 3), 0);
    gate_done(g);
    gate_stats(g, &gs);
    ck_assert_uint_eq(gs.node.completions, 1);
    ck_assert_uint_eq(gs.node.dispatched, 1);
}
END_TEST

static void on_loop_timeout(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    *(int *)arg = 1;
    event_base_loopbreak(base);
}

/* The stop drains the queue through the front, calls its stop hook, and
 * ends the loop only once nothing is at the backend and the front is idle. */
START_TEST(test_gate_graceful_stop)
{
    gate_t *g = make(1, 1, 0, 10);
    sched_item_t a = {0}, b = {0}, c = {0};
    gate_enqueue(g, 0, &a);
    gate_enqueue(g, 0, &b);
    gate_enqueue(g, 0, &c);
    ck_assert_ptr_nonnull(gate_take(g));
    gate_shutdown(g);
    gate_shutdown(g); /* idempotent */
    ck_assert(gate_stopping(g));
    ck_assert_int_eq(fk.drained, 2);
    ck_assert_int_eq(fk.stops, 1);
    ck_assert(!event_base_got_exit(base));
    gate_done(g); /* the last IO: but the front is not idle yet */
    gate_check_stopped(g);
    ck_assert(!event_base_got_exit(base));
    fk.idle = 1;
    gate_check_stopped(g);
    int timed_out = 0;
    struct timeval tv = {2, 0};
    event_base_once(base, -1, EV_TIMEOUT, on_loop_timeout, &timed_out, &tv);
    event_base_loop(base, 0);
    ck_assert(event_base_got_exit(base));
    ck_assert_int_eq(timed_out, 0);
}
END_TEST

static rules_t *rules_of(const char *text)
{
    rules_t *r = NULL;
    ck_assert_int_eq(rules_parse(text, strlen(text), NULL, &r, NULL), 0);
    return r;
}

static rules_subject_t user_subject(const char *user)
{
    rules_subject_t s = {.user = user, .family = 4, .addr = {10, 0, 0, 1},
                         .op = RULES_OP_READ, .name = "k", .name_len = 1};
    return s;
}

/* Template buckets under a controller (issue 27): one the controller's
 * table does not list gets no tokens (limited) until it does; one it lists
 * keeps the controller's tokens at a period start; without a controller
 * the rule's figures hold per node. */
START_TEST(test_gate_template_cluster)
{
    gate_t *g = make(4, 0, 0, 8);
    gate_set_rules(g, rules_of("[{\"user\":\"*\",\"template\":\"u-{user}\",\"limit\":100}]"), 1);
    gate_rule_reason_t why;
    rules_subject_t s = user_subject("alice");
    /* no controller: the rule's L per node for a 1 s period */
    gate_template_period(g, 1.0);
    int b = gate_classify(g, &s, &why);
    ck_assert_int_ge(b, 1);
    sched_bucket_stats_t bs;
    ck_assert_ptr_nonnull(gate_bucket_stats(g, b, &bs));
    ck_assert_int_eq(bs.l_tokens, 100);
    /* a controller's table without it: held at 0 from now on */
    gate_set_table(g, GATE_TABLE_CLOSED);
    gate_template_cluster(g, 1);
    gate_template_period(g, 1.0);
    ck_assert_ptr_nonnull(gate_bucket_stats(g, b, &bs));
    ck_assert_int_eq(bs.l_tokens, 0);
    ck_assert_int_eq(bs.r_tokens, 0);
    rules_subject_t s2 = user_subject("bob"); /* made under the controller: 0 at once */
    int b2 = gate_classify(g, &s2, &why);
    ck_assert_int_gt(b2, b);
    ck_assert_ptr_nonnull(gate_bucket_stats(g, b2, &bs));
    ck_assert_int_eq(bs.l_tokens, 0);
    /* listed: the controller's grant stays through a period start */
    unsigned char listed[8] = {0};
    listed[b] = 1;
    ck_assert_int_eq(gate_set_listed(g, listed, b + 1), 0);
    ck_assert_int_eq(gate_set_tokens(g, "u-alice", 3, 42), 0);
    gate_template_period(g, 1.0);
    ck_assert_ptr_nonnull(gate_bucket_stats(g, b, &bs));
    ck_assert_int_eq(bs.l_tokens, 42);
    ck_assert_ptr_nonnull(gate_bucket_stats(g, b2, &bs));
    ck_assert_int_eq(bs.l_tokens, 0);
}
END_TEST

struct idents {
    int n, other;
    uint64_t bob, other_n;
};

static void count_ident(void *arg, const char *id, uint64_t n)
{
    struct idents *x = arg;
    x->n++;
    if (strcmp(id, "user:bob") == 0)
        x->bob = n;
    if (strcmp(id, "other") == 0) {
        x->other++;
        x->other_n = n;
    }
}

/* Refusals by identity: a fixed set of GATE_IDENTITIES_MAX, then "other";
 * a connection without a user is named by its address. */
START_TEST(test_gate_refused_identities)
{
    gate_t *g = make(4, 0, 0, 8);
    gate_set_rules(g, rules_of("[{\"user\":\"alice\",\"bucket\":\"default\"}]"), 1);
    gate_rule_reason_t why;
    rules_subject_t s = user_subject("bob");
    ck_assert_int_eq(gate_classify(g, &s, &why), -1);
    ck_assert_int_eq(gate_classify(g, &s, &why), -1);
    ck_assert_int_eq(why, GATE_RULE_NO_MATCH);
    s = user_subject("alice");
    ck_assert_int_eq(gate_classify(g, &s, &why), 0); /* not counted */
    struct idents x = {0};
    gate_refused_identities(g, count_ident, &x);
    ck_assert_int_eq(x.n, 1);
    ck_assert_uint_eq(x.bob, 2);
    char names[GATE_IDENTITIES_MAX + 5][16];
    for (int i = 0; i < GATE_IDENTITIES_MAX + 5; i++) {
        snprintf(names[i], sizeof names[i], "u%d", i);
        s = user_subject(names[i]);
        ck_assert_int_eq(gate_classify(g, &s, &why), -1);
    }
    s = user_subject(NULL);
    ck_assert_int_eq(gate_classify(g, &s, &why), -1);
    memset(&x, 0, sizeof x);
    gate_refused_identities(g, count_ident, &x);
    ck_assert_int_eq(x.n, GATE_IDENTITIES_MAX + 1); /* the set and "other" */
    ck_assert_int_eq(x.other, 1);
    ck_assert_uint_eq(x.other_n, 7); /* bob and 31 users fill it: 6 users and the address past it */
    ck_assert_uint_eq(x.bob, 2);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {test_gate_bad_settings,    test_gate_window,
                                  test_gate_busy_time,       test_gate_dispatch_points,
                                  test_gate_buckets_and_tokens, test_gate_graceful_stop,
                                  test_gate_adaptive_window, test_gate_remove_and_charge,
                                  test_gate_template_cluster, test_gate_refused_identities};
    const testlib_case_t c = {.name = "gate", .setup = setup, .teardown = teardown};
    return testlib_run_case(&c, tests, sizeof tests / sizeof tests[0]);
}
