/* test_agent.c - Check suite for storage-node/core/agent: reports from the scheduler's counters, tokens by index, net of served, fallback after silence (static and rr), resume, late controllers, epochs, stale and newer periods, in a clock the test drives. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/proto.h"
#include "storage-node/core/agent.h"
#include "storage-node/core/sched.h"
#include "tests/testlib.h"

/* Period 10 s cut in 5 intervals of 2 s; the test's clock starts at 100. */
#define T0 100.0
#define PERIOD 10.0
#define K 5

/* What the hooks saw. */
typedef struct {
    sched_t *s;
    int set_calls, last_b, applied, period_starts, policy_calls;
    int64_t last_r, last_l;
    double last_until, last_now;
    int rules_calls;            /* the rules hook (issue 27) */
    uint64_t rules_version;
    char rules_text[256];
} seen_t;

static int h_set_tokens(void *arg, int b, int64_t r, int64_t l, double until, double now)
{
    seen_t *sn = arg;
    sn->set_calls++;
    sn->last_b = b;
    sn->last_r = r;
    sn->last_l = l;
    sn->last_until = until;
    sn->last_now = now;
    return sched_set_tokens(sn->s, b, r, l, until, now);
}

static int h_rules(void *arg, uint64_t version, const char *text, size_t len)
{
    seen_t *sn = arg;
    sn->rules_calls++;
    sn->rules_version = version;
    snprintf(sn->rules_text, sizeof sn->rules_text, "%.*s", (int)len, text);
    return 0;
}

static void h_applied(void *arg)
{
    ((seen_t *)arg)->applied++;
}

static void h_period_start(void *arg)
{
    seen_t *sn = arg;
    sn->period_starts++;
    sched_period_start(sn->s);
}

static void h_set_policy(void *arg, sched_policy_t p)
{
    seen_t *sn = arg;
    sn->policy_calls++;
    sched_set_policy(sn->s, p);
}

typedef struct {
    sched_t *s;
    agent_t *a;
    seen_t sn;
    uint32_t node_table;
    sched_item_t items[64];
    int nitems;
} fx_t;

/* A scheduler with buckets red (0), blue (1), green (2) and an agent on it,
 * with every hook recorded, falling back as configured (rr, 1.5 intervals,
 * no grace: the behaviour before fail static, for the older cases). */
static void fx_start_mode(fx_t *f, int manage_policy, agent_fallback_t mode, double silence,
                          double grace)
{
    memset(f, 0, sizeof *f);
    f->s = sched_new(SCHED_POLICY_TOKENS, 0);
    ck_assert_ptr_nonnull(f->s);
    ck_assert_int_eq(sched_add_bucket(f->s, "red", 1), 0);
    ck_assert_int_eq(sched_add_bucket(f->s, "blue", 3), 1);
    ck_assert_int_eq(sched_add_bucket(f->s, "green", 1), 2);
    f->sn.s = f->s;
    agent_config_t cfg;
    agent_config_defaults(&cfg);
    cfg.name = "n1";
    cfg.capacity = 777;
    cfg.manage_policy = manage_policy;
    cfg.mode = mode;
    cfg.silence_intervals = silence;
    cfg.grace_s = grace;
    agent_ops_t ops = {.set_tokens = h_set_tokens, .applied = h_applied,
                       .period_start = h_period_start, .set_policy = h_set_policy,
                       .rules = h_rules, .arg = &f->sn};
    int err = 0;
    f->a = agent_new(&cfg, f->s, &ops, T0, &err);
    ck_assert_msg(f->a != NULL, "agent_new: %d", err);
    proto_msg_t m;
    ck_assert_int_eq(agent_hello(f->a, T0, &m), 0);
    f->node_table = m.table;
}

static void fx_start(fx_t *f, int manage_policy)
{
    fx_start_mode(f, manage_policy, AGENT_FALLBACK_RR, 1.5, 0);
}

/* The static fallback as a daemon runs it: fail static after 2 silent
 * intervals, with 0.1 s grace. */
static void fx_start_static(fx_t *f)
{
    fx_start_mode(f, 1, AGENT_FALLBACK_STATIC, 2.0, 0.1);
}

static void fx_stop(fx_t *f)
{
    agent_destroy(&f->a);
    ck_assert_ptr_null(f->a);
    sched_destroy(&f->s);
}

static agent_timing_t tm_at(uint64_t period, double now)
{
    double start = T0 + (double)period * PERIOD;
    double k = floor((now - start) / (PERIOD / K) + 1e-9);
    k = k < 0 ? 0 : k > K - 1 ? K - 1 : k;
    return (agent_timing_t){.period = period, .interval = (uint32_t)k, .intervals = K,
                            .period_s = PERIOD, .end = start + PERIOD};
}

/* The controller's table: its index 0 is green, 1 red, 2 "new". */
static const char *ctl_names[] = {"green", "red", "new"};
static const uint32_t ctl_weights[] = {1, 1, 1};

/* An empty message of `type` addressed to node n1. */
static void msg_to_n1(proto_msg_t *m, proto_type_t type)
{
    proto_msg_init(m);
    m->type = type;
    strcpy(m->node, "n1");
}

/* The controller's welcome to f: its table 7 and names. */
static void welcome_msg(fx_t *f, proto_msg_t *m)
{
    msg_to_n1(m, PROTO_WELCOME);
    m->table = 7;
    m->peer_table = f->node_table;
    m->has_names = 1;
    m->nnames = 3;
    m->names = ctl_names;
}

static void welcome(fx_t *f, uint64_t period, double now)
{
    proto_msg_t m;
    welcome_msg(f, &m);
    agent_timing_t tm = tm_at(period, now);
    ck_assert_int_eq(agent_handle(f->a, &m, &tm, now), 0);
}

/* fx_start(), welcomed to period 0 at T0. */
static void fx_welcomed(fx_t *f, int manage_policy)
{
    fx_start(f, manage_policy);
    welcome(f, 0, T0);
}

/* welcome() to period 0 from controller `src` at leadership `epoch`. */
static void welcome_from(fx_t *f, double now, uint64_t epoch, int src)
{
    proto_msg_t m;
    welcome_msg(f, &m);
    m.epoch = epoch;
    agent_timing_t tm = tm_at(0, now);
    ck_assert_int_eq(agent_handle_from(f->a, &m, &tm, now, src), 0);
}

/* Makes m the controller's tokens message (table 7) for the n records
 * given, which it points to. */
static void tokens_msg(fx_t *f, proto_msg_t *m, const proto_tokens_rec_t *recs, size_t n)
{
    msg_to_n1(m, PROTO_TOKENS);
    m->table = 7;
    m->peer_table = f->node_table;
    m->count = n;
    m->tokens = (proto_tokens_rec_t *)recs;
}

/* A tokens message (controller table 7) for the n records given. */
static void tokens(fx_t *f, uint64_t period, double now, const proto_tokens_rec_t *recs, size_t n)
{
    proto_msg_t m;
    tokens_msg(f, &m, recs, n);
    agent_timing_t tm = tm_at(period, now);
    ck_assert_int_eq(agent_handle(f->a, &m, &tm, now), 0);
}

/* The grant the static fallback cases start from, by controller index:
 * 0 = green (2) R 4 and no limit, 1 = red (0) R 10 L 20, 2 = new (3) L 7. */
static void static_grant(proto_tokens_rec_t recs[3])
{
    recs[0] = (proto_tokens_rec_t){.bucket = 1, .r_tokens = 10, .l_tokens = 20};
    recs[1] = (proto_tokens_rec_t){.bucket = 0, .r_tokens = 4, .flags = PROTO_TOK_UNLIMITED,
                                   .l_tokens = PROTO_UNLIMITED};
    recs[2] = (proto_tokens_rec_t){.bucket = 2, .r_tokens = 0, .l_tokens = 7};
}

static void arrive(fx_t *f, int b, int n)
{
    for (int i = 0; i < n; i++)
        ck_assert_int_eq(sched_enqueue(f->s, b, &f->items[f->nitems++]), 0);
}

static void serve(fx_t *f, int n)
{
    for (int i = 0; i < n; i++)
        ck_assert_ptr_nonnull(sched_dispatch(f->s, 0, NULL));
}

static sched_bucket_stats_t bstats(fx_t *f, int b)
{
    sched_bucket_stats_t bs;
    ck_assert_int_eq(sched_bucket_stats(f->s, b, &bs), 0);
    return bs;
}

/* Checks bucket b's reservation r and limit l, naming the caller's line. */
static void expect_tokens(fx_t *f, int line, int b, int64_t r, int64_t l)
{
    sched_bucket_stats_t bs = bstats(f, b);
    ck_assert_msg(bs.r_tokens == r, "line %d: bucket %d r_tokens is %lld, want %lld", line, b,
                  (long long)bs.r_tokens, (long long)r);
    ck_assert_msg(bs.l_tokens == l, "line %d: bucket %d l_tokens is %lld, want %lld", line, b,
                  (long long)bs.l_tokens, (long long)l);
}

/* The agent's counters now. */
static agent_stats_t st_of(fx_t *f)
{
    agent_stats_t st;
    agent_stats(f->a, &st);
    return st;
}

/* One expected counter: checked only when `on` (a leader of -1 is a real
 * value, so "not checked" is its own flag rather than a number). */
typedef struct {
    int on;
    long long v;
} want_t;
#define W(x) ((want_t){1, (long long)(x)})

/* The counters tests check; a field left out is not checked. */
typedef struct {
    want_t fallback, fallbacks, resumes, static_periods, period, interval;
    want_t tokens_stale, tokens_applied, epoch, leader, stale_epoch, warn_unreachable;
    want_t refused, duplicate_name;
    want_t rejected_table, rejected_unknown_node; /* proto.rejected[PROTO_E_...] */
} stats_want_t;

static void want_eq(int line, const char *name, long long got, want_t w)
{
    if (w.on)
        ck_assert_msg(got == w.v, "line %d: stats.%s is %lld, want %lld", line, name, got, w.v);
}

/* Checks f's counters against w, naming the first field that differs and
 * the caller's line; returns the counters for further checks. */
static agent_stats_t expect_stats(fx_t *f, int line, stats_want_t w)
{
    agent_stats_t st = st_of(f);
#define WANT_FIELD(x) want_eq(line, #x, (long long)st.x, w.x)
    WANT_FIELD(fallback);
    WANT_FIELD(fallbacks);
    WANT_FIELD(resumes);
    WANT_FIELD(static_periods);
    WANT_FIELD(period);
    WANT_FIELD(interval);
    WANT_FIELD(tokens_stale);
    WANT_FIELD(tokens_applied);
    WANT_FIELD(epoch);
    WANT_FIELD(leader);
    WANT_FIELD(stale_epoch);
    WANT_FIELD(warn_unreachable);
    WANT_FIELD(refused);
    WANT_FIELD(duplicate_name);
#undef WANT_FIELD
    want_eq(line, "proto.rejected[PROTO_E_TABLE]", (long long)st.proto.rejected[PROTO_E_TABLE],
            w.rejected_table);
    want_eq(line, "proto.rejected[PROTO_E_UNKNOWN_NODE]",
            (long long)st.proto.rejected[PROTO_E_UNKNOWN_NODE], w.rejected_unknown_node);
    return st;
}

/* Starts f falling back by `mode` after `silence` intervals (0.1 s grace),
 * welcomed to period 0 at T0 and granted (r, l) for blue at `at`. */
static void fx_granted_at(fx_t *f, agent_fallback_t mode, double silence, double at, int64_t r,
                          int64_t l)
{
    fx_start_mode(f, 1, mode, silence, 0.1);
    welcome(f, 0, T0);
    proto_tokens_rec_t recs[] = {{.bucket = 1, .r_tokens = r, .l_tokens = l}};
    tokens(f, 0, at, recs, 1);
}

/* The older rr fallback (fx_start()): welcomed to period 0 at T0 and
 * granted blue R 10 without a limit at `at`. */
static void fx_rr_granted_at(fx_t *f, double at)
{
    fx_welcomed(f, 1);
    proto_tokens_rec_t r[] = {{.bucket = 1, .r_tokens = 10, .l_tokens = PROTO_UNLIMITED}};
    tokens(f, 0, at, r, 1);
}

/* fx_granted_at() with the grant at T0 + 0.1, early in interval 0. */
static void fx_following(fx_t *f, agent_fallback_t mode, double silence, int64_t r, int64_t l)
{
    fx_granted_at(f, mode, silence, T0 + 0.1, r, l);
}

static const proto_report_rec_t *rec_of(const proto_msg_t *m, uint32_t b)
{
    for (size_t i = 0; i < m->count; i++)
        if (m->report[i].bucket == b)
            return &m->report[i];
    return NULL;
}

/* Checks the arrivals report m gives for bucket b (interval, period). */
static void expect_arrivals(const proto_msg_t *m, int line, uint32_t b, uint64_t interval,
                            uint64_t period)
{
    const proto_report_rec_t *r = rec_of(m, b);
    ck_assert_msg(r != NULL, "line %d: no record for bucket %u", line, b);
    ck_assert_msg(r->arrivals_interval == interval,
                  "line %d: bucket %u arrivals_interval is %llu, want %llu", line, b,
                  (unsigned long long)r->arrivals_interval, (unsigned long long)interval);
    ck_assert_msg(r->arrivals_period == period,
                  "line %d: bucket %u arrivals_period is %llu, want %llu", line, b,
                  (unsigned long long)r->arrivals_period, (unsigned long long)period);
}

START_TEST(test_agent_hello_lists_the_table)
{
    fx_t f;
    fx_start(&f, 1);
    ck_assert_int_eq(sched_policy(f.s), SCHED_POLICY_RR); /* fallback until told */
    proto_msg_t m;
    ck_assert_int_eq(agent_hello(f.a, T0, &m), 0);
    ck_assert_int_eq(m.type, PROTO_HELLO);
    ck_assert_str_eq(m.node, "n1");
    ck_assert_uint_eq(m.capacity, 777);
    ck_assert_uint_eq(m.nnames, 3);
    ck_assert_str_eq(m.names[1], "blue");
    ck_assert(!m.has_timing);
    ck_assert_uint_eq(m.table, f.node_table);
    ck_assert_int_eq(agent_report(f.a, T0, &m), -EAGAIN); /* no timing yet */
    ck_assert(isinf(agent_next_tick(f.a)));
    ck_assert_int_eq(agent_tick(f.a, T0 + 1000), 0);
    fx_stop(&f);
}
END_TEST

START_TEST(test_agent_report_from_counters)
{
    fx_t f;
    fx_start(&f, 1);
    welcome(&f, 0, T0 + 0.5);
    ck_assert(agent_welcomed(f.a));
    /* welcome created "new" (index 3): the node's table grew */
    ck_assert_int_eq(sched_find_bucket(f.s, "new", 3), 3);
    arrive(&f, 0, 5);
    arrive(&f, 2, 2);
    sched_set_policy(f.s, SCHED_POLICY_RR);
    serve(&f, 3);
    sched_note_completion(f.s, 3, 0.25);

    ck_assert_double_eq(agent_next_tick(f.a), T0 + 2);
    ck_assert_int_eq(agent_tick(f.a, T0 + 1.0), 0); /* not yet */
    ck_assert_int_eq(agent_tick(f.a, T0 + 2.0), 1);
    proto_msg_t m;
    proto_msg_init(&m);
    ck_assert_int_eq(agent_report(f.a, T0 + 2.0, &m), 0);
    ck_assert_int_eq(m.type, PROTO_REPORT);
    ck_assert_uint_eq(m.period, 0);
    ck_assert_uint_eq(m.interval, 1);
    ck_assert_uint_eq(m.remaining_ms, 8000);
    ck_assert_uint_eq(m.peer_table, 7);
    ck_assert(m.has_names); /* the welcome acknowledged the old table */
    ck_assert_uint_eq(m.nnames, 4);
    ck_assert_uint_eq(m.completions, 3);
    ck_assert_double_eq(m.busy_seconds, 0.25);
    ck_assert_uint_eq(m.count, 2); /* blue and new are idle: left out */
    const proto_report_rec_t *r = rec_of(&m, 0), *g = rec_of(&m, 2);
    ck_assert_ptr_nonnull(r);
    ck_assert_ptr_nonnull(g);
    ck_assert_uint_eq(r->arrivals_interval, 5);
    ck_assert_uint_eq(r->arrivals_period, 5);
    ck_assert_uint_eq(r->served_o + g->served_o, 3);
    ck_assert_uint_eq(r->queued + g->queued, 4);
    ck_assert_int_eq(g->l_left, PROTO_UNLIMITED);
    /* the same interval is not reported twice */
    ck_assert_int_eq(agent_tick(f.a, T0 + 2.0), 0);

    /* next interval: arrivals since the last report only */
    arrive(&f, 0, 1);
    ck_assert_int_eq(agent_tick(f.a, T0 + 4.0), 1);
    ck_assert_int_eq(agent_report(f.a, T0 + 4.0, &m), 0);
    expect_arrivals(&m, __LINE__, 0, 1, 6);
    ck_assert_uint_eq(rec_of(&m, 2)->arrivals_interval, 0);
    proto_msg_clear(&m);
    fx_stop(&f);
}
END_TEST

/* The report's in-flight figures (issue 25): the most requests of each
 * bucket queued or at the backend over the interval, said when it moved
 * by more than 1 and 25% from the last one said, every one again after a
 * welcome; 0 never; no base_us without the hook. */
START_TEST(test_agent_report_inflight)
{
    fx_t f;
    fx_start(&f, 1);
    welcome(&f, 0, T0 + 0.5);
    arrive(&f, 0, 8);
    arrive(&f, 2, 1);
    proto_msg_t m;
    proto_msg_init(&m);
    ck_assert_int_eq(agent_report(f.a, T0 + 2.0, &m), 0);
    ck_assert_int_eq(m.has_inflight, 1);
    ck_assert_uint_eq(m.ninflight, 2);
    ck_assert_uint_eq(m.inflight[0].bucket, 0);
    ck_assert_int_eq(m.inflight[0].tokens, 8);
    ck_assert_uint_eq(m.inflight[1].bucket, 2);
    ck_assert_int_eq(m.inflight[1].tokens, 1);
    ck_assert_uint_eq(m.base_us, 0);
    /* Dispatched and not done: still in flight; one more is within 1. */
    sched_set_policy(f.s, SCHED_POLICY_RR);
    serve(&f, 9);
    arrive(&f, 0, 1);
    ck_assert_int_eq(agent_report(f.a, T0 + 4.0, &m), 0);
    ck_assert_int_eq(m.has_inflight, 0);
    /* Done at the backend: red falls to 1 (from 9 at its most, 8 said). */
    for (int i = 0; i < 8; i++)
        sched_note_done(f.s, 0);
    ck_assert_int_eq(agent_report(f.a, T0 + 6.0, &m), 0);
    ck_assert_int_eq(m.has_inflight, 0); /* the most over the interval: 9 */
    ck_assert_int_eq(agent_report(f.a, T0 + 8.0, &m), 0);
    ck_assert_int_eq(m.has_inflight, 1);
    ck_assert_uint_eq(m.ninflight, 1);
    ck_assert_uint_eq(m.inflight[0].bucket, 0);
    ck_assert_int_eq(m.inflight[0].tokens, 1);
    /* A new session says every figure again. */
    welcome(&f, 0, T0 + 9.0);
    ck_assert_int_eq(agent_report(f.a, T0 + 10.0, &m), 0);
    ck_assert_uint_eq(m.ninflight, 2);
    ck_assert_uint_eq(st_of(&f).inflight_said, 5);
    proto_msg_clear(&m);
    fx_stop(&f);
}
END_TEST

START_TEST(test_agent_tokens_applied_by_index)
{
    fx_t f;
    fx_welcomed(&f, 1);
    ck_assert_int_eq(f.sn.applied, 0);
    /* controller index 0 = green (2), 1 = red (0), 2 = new (3) */
    proto_tokens_rec_t recs[] = {
        {.bucket = 1, .r_tokens = 10, .l_tokens = 20},
        {.bucket = 0, .r_tokens = 4, .flags = PROTO_TOK_UNLIMITED, .l_tokens = PROTO_UNLIMITED},
        {.bucket = 2, .r_tokens = 6, .l_tokens = 0}};
    tokens(&f, 0, T0 + 0.1, recs, 3);
    ck_assert_int_eq(f.sn.set_calls, 3);
    ck_assert_int_eq(f.sn.applied, 1); /* once per message */
    ck_assert_int_eq(f.sn.last_b, 3);
    expect_tokens(&f, __LINE__, 0, 10, 20);
    expect_tokens(&f, __LINE__, 2, 4, SCHED_UNLIMITED);
    ck_assert_int_eq(bstats(&f, 3).r_tokens, 6);
    ck_assert_int_eq(bstats(&f, 1).r_tokens, 0); /* blue: not the controller's */
    ck_assert_int_eq(sched_policy(f.s), SCHED_POLICY_TOKENS); /* resumed */
    expect_stats(&f, __LINE__,
                 (stats_want_t){.tokens_applied = W(3), .resumes = W(1), .fallback = W(0)});

    /* an index beyond the controller's table: the whole message dropped */
    proto_tokens_rec_t bad[] = {{.bucket = 0, .r_tokens = 99}, {.bucket = 3, .r_tokens = 1}};
    tokens(&f, 0, T0 + 0.2, bad, 2);
    ck_assert_int_eq(bstats(&f, 2).r_tokens, 4);
    expect_stats(&f, __LINE__, (stats_want_t){.rejected_table = W(1)});

    /* a table generation the node lacks, without names: dropped */
    proto_msg_t m;
    msg_to_n1(&m, PROTO_TOKENS);
    m.table = 8;
    m.count = 1;
    m.tokens = recs;
    agent_timing_t tm = tm_at(0, T0 + 0.3);
    ck_assert_int_eq(agent_handle(f.a, &m, &tm, T0 + 0.3), 0);
    expect_stats(&f, __LINE__, (stats_want_t){.rejected_table = W(2), .tokens_applied = W(3)});

    /* another node's message */
    strcpy(m.node, "n2");
    m.table = 7;
    ck_assert_int_eq(agent_handle(f.a, &m, &tm, T0 + 0.3), 0);
    expect_stats(&f, __LINE__,
                 (stats_want_t){.rejected_unknown_node = W(1), .tokens_applied = W(3)});
    fx_stop(&f);
}
END_TEST

START_TEST(test_agent_net_of_served)
{
    fx_t f;
    fx_welcomed(&f, 0);
    arrive(&f, 0, 30);
    proto_msg_t m;
    proto_msg_init(&m);
    ck_assert_int_eq(agent_report(f.a, T0, &m), 0); /* the controller's view */
    serve(&f, 5); /* served on the old tokens (opportunistic) meanwhile */
    proto_tokens_rec_t r1[] = {{.bucket = 1, .r_tokens = 10, .l_tokens = 20}};
    tokens(&f, 0, T0 + 0.01, r1, 1);
    expect_tokens(&f, __LINE__, 0, 5, 20); /* 10 - 5 */

    /* more served since the report than R: the rest comes off L */
    ck_assert_int_eq(agent_report(f.a, T0 + 2, &m), 0);
    serve(&f, 12); /* 5 R, then 7 L */
    proto_tokens_rec_t r2[] = {{.bucket = 1, .r_tokens = 10, .l_tokens = 20}};
    tokens(&f, 0, T0 + 2.01, r2, 1);
    expect_tokens(&f, __LINE__, 0, 0, 18);

    /* no limit stays no limit; a limit never goes below 0 */
    proto_tokens_rec_t r3[] = {
        {.bucket = 1, .r_tokens = 1, .flags = PROTO_TOK_UNLIMITED, .l_tokens = PROTO_UNLIMITED}};
    tokens(&f, 0, T0 + 2.02, r3, 1);
    expect_tokens(&f, __LINE__, 0, 0, SCHED_UNLIMITED);
    proto_tokens_rec_t r4[] = {{.bucket = 1, .r_tokens = 3, .l_tokens = 4}};
    tokens(&f, 0, T0 + 2.03, r4, 1);
    expect_tokens(&f, __LINE__, 0, 0, 0);

    /* a new report: nothing served since, counts as sent */
    ck_assert_int_eq(agent_report(f.a, T0 + 4, &m), 0);
    tokens(&f, 0, T0 + 4.01, r1, 1);
    expect_tokens(&f, __LINE__, 0, 10, 20);
    proto_msg_clear(&m);
    fx_stop(&f);
}
END_TEST

/* A tokens message computed from report `basis` (0: not said). */
static void tokens_basis(fx_t *f, double now, uint64_t basis, const proto_tokens_rec_t *recs,
                         size_t n)
{
    proto_msg_t m;
    tokens_msg(f, &m, recs, n);
    m.basis = basis;
    agent_timing_t tm = tm_at(0, now);
    ck_assert_int_eq(agent_handle(f->a, &m, &tm, now), 0);
}

/* Issue 26, reports late at the controller: a round that closed before
 * our latest report reached it computes from the one before.  Its tokens
 * name that report, and the node nets them against what it served since
 * that one: what it served between the two is not granted twice (today's
 * netting against the latest report gave red 25 + 85 = 110 of its 100). */
START_TEST(test_agent_net_of_served_at_basis)
{
    fx_t f;
    fx_welcomed(&f, 0);
    arrive(&f, 0, 60);
    proto_msg_t m;
    proto_msg_init(&m);
    serve(&f, 10);
    ck_assert_int_eq(agent_report(f.a, T0 + 2, &m), 0); /* interval 1: 10 served */
    uint64_t b1 = proto_basis(m.period, m.interval, K);
    ck_assert_uint_eq(b1, 0 * K + 1 + 1);
    serve(&f, 10);
    ck_assert_int_eq(agent_report(f.a, T0 + 4, &m), 0); /* interval 2: 20, late */
    uint64_t b2 = proto_basis(m.period, m.interval, K);
    serve(&f, 5);
    /* the controller saw report 1 only: 10 served, 90 of L 100 left */
    proto_tokens_rec_t r[] = {{.bucket = 1, .r_tokens = 0, .l_tokens = 90}};
    tokens_basis(&f, T0 + 4.1, b1, r, 1);
    expect_tokens(&f, __LINE__, 0, 0, 75); /* 90 - (25 - 10): 100 in the period */
    /* computed from report 2 (20 served): 80 left, net of the 5 since */
    r[0].l_tokens = 80;
    tokens_basis(&f, T0 + 4.2, b2, r, 1);
    expect_tokens(&f, __LINE__, 0, 0, 75);
    /* an older controller says no basis: our latest report, as before */
    tokens_basis(&f, T0 + 4.3, 0, r, 1);
    expect_tokens(&f, __LINE__, 0, 0, 75);
    /* a report we no longer hold (older than our last AGENT_BASES, or of
     * another period): everything served this period comes off (fail
     * closed) */
    r[0].l_tokens = 90;
    tokens_basis(&f, T0 + 4.4, proto_basis(0, 0, K), r, 1);
    expect_tokens(&f, __LINE__, 0, 0, 65);
    ck_assert_uint_eq(st_of(&f).basis_old, 1);
    for (int i = 0; i < 4; i++) /* report 1 leaves the ring */
        ck_assert_int_eq(agent_report(f.a, T0 + 6 + i * 0.5, &m), 0);
    tokens_basis(&f, T0 + 8.1, b1, r, 1);
    expect_tokens(&f, __LINE__, 0, 0, 65);
    ck_assert_uint_eq(st_of(&f).basis_old, 2);
    proto_msg_clear(&m);
    fx_stop(&f);
}
END_TEST

START_TEST(test_agent_fallback_after_silence)
{
    fx_t f;
    fx_rr_granted_at(&f, T0 + 0.1); /* the controller's last word, interval 0 */
    ck_assert_int_eq(sched_policy(f.s), SCHED_POLICY_TOKENS);
    /* silent for the rest of the period: the tokens stay valid */
    for (int k = 1; k < K; k++) {
        agent_tick(f.a, T0 + 2.0 * k);
        ck_assert_int_eq(sched_policy(f.s), SCHED_POLICY_TOKENS);
    }
    ck_assert_int_eq(bstats(&f, 0).r_tokens, 10);
    /* the period ends without a word in it: fallback */
    ck_assert_int_eq(agent_tick(f.a, T0 + PERIOD), 1);
    ck_assert_int_eq(sched_policy(f.s), SCHED_POLICY_RR);
    ck_assert_int_eq(f.sn.period_starts, 1);
    expect_stats(
        &f, __LINE__,
        (stats_want_t){.fallback = W(1), .fallbacks = W(1), .period = W(1), .interval = W(0)});
    fx_stop(&f);
}
END_TEST

START_TEST(test_agent_quiet_last_interval_falls_back_in_next_period)
{
    fx_t f;
    fx_rr_granted_at(&f, T0 + 8.1); /* heard in the last interval */
    ck_assert_int_eq(agent_tick(f.a, T0 + PERIOD), 1);
    ck_assert_int_eq(sched_policy(f.s), SCHED_POLICY_TOKENS); /* 1.9 s < 1.5 intervals */
    ck_assert_int_eq(agent_tick(f.a, T0 + PERIOD + 2), 1);
    ck_assert_int_eq(sched_policy(f.s), SCHED_POLICY_RR);
    fx_stop(&f);
}
END_TEST

START_TEST(test_agent_resume)
{
    fx_t f;
    fx_welcomed(&f, 1);
    ck_assert_int_eq(sched_policy(f.s), SCHED_POLICY_RR); /* welcome alone: not yet */
    /* waiting for the first tokens is not a fallback: the report says so */
    proto_msg_t rep;
    proto_msg_init(&rep);
    ck_assert_int_eq(agent_report(f.a, T0 + 0.5, &rep), 0);
    ck_assert_int_eq(rep.fallback, 0);
    ck_assert_uint_eq(rep.fallbacks, 0);
    /* a heartbeat with timing, holding the controller's table: resume */
    proto_msg_t hb;
    agent_heartbeat(f.a, &hb);
    ck_assert_int_eq(hb.type, PROTO_HEARTBEAT);
    ck_assert_uint_eq(hb.peer_table, 7);
    strcpy(hb.node, "n1");
    agent_timing_t tm = tm_at(0, T0 + 1);
    ck_assert_int_eq(agent_handle(f.a, &hb, &tm, T0 + 1), 0);
    ck_assert_int_eq(sched_policy(f.s), SCHED_POLICY_TOKENS);
    /* silence over a period end, then tokens: resume again */
    agent_tick(f.a, T0 + PERIOD);
    agent_tick(f.a, T0 + PERIOD + 2);
    ck_assert_int_eq(sched_policy(f.s), SCHED_POLICY_RR);
    /* the reports tell the controller: in fallback, once so far */
    ck_assert_int_eq(agent_report(f.a, T0 + PERIOD + 2.1, &rep), 0);
    ck_assert_int_eq(rep.fallback, 1);
    ck_assert_uint_eq(rep.fallbacks, 1);
    proto_tokens_rec_t r[] = {{.bucket = 1, .r_tokens = 10, .l_tokens = PROTO_UNLIMITED}};
    tokens(&f, 1, T0 + PERIOD + 2.5, r, 1);
    ck_assert_int_eq(sched_policy(f.s), SCHED_POLICY_TOKENS);
    ck_assert_int_eq(agent_report(f.a, T0 + PERIOD + 4, &rep), 0);
    ck_assert_int_eq(rep.fallback, 0); /* resumed; the count stays */
    ck_assert_uint_eq(rep.fallbacks, 1);
    proto_msg_clear(&rep);
    expect_stats(&f, __LINE__, (stats_want_t){.resumes = W(2), .fallbacks = W(1)});
    ck_assert_int_eq(f.sn.policy_calls, 4); /* rr at start, tokens, rr, tokens */

    /* the controller forgot the node: hello again */
    proto_msg_t e;
    msg_to_n1(&e, PROTO_ERROR);
    strcpy(e.code, "unknown_node");
    ck_assert_int_eq(agent_handle(f.a, &e, NULL, T0 + PERIOD + 3), AGENT_SEND_HELLO);
    ck_assert(!agent_welcomed(f.a));
    fx_stop(&f);
}
END_TEST

START_TEST(test_agent_stale_period)
{
    fx_t f;
    fx_start(&f, 0);
    welcome(&f, 3, T0 + 3 * PERIOD);
    proto_tokens_rec_t r[] = {{.bucket = 1, .r_tokens = 10, .l_tokens = PROTO_UNLIMITED}};
    tokens(&f, 2, T0 + 3 * PERIOD + 1, r, 1); /* an older period's tokens */
    ck_assert_int_eq(bstats(&f, 0).r_tokens, 0);
    expect_stats(&f, __LINE__, (stats_want_t){.tokens_stale = W(1), .tokens_applied = W(0)});
    ck_assert_int_eq(f.sn.period_starts, 0);

    /* a newer period's tokens start it at once */
    arrive(&f, 0, 4);
    proto_msg_t m;
    proto_msg_init(&m);
    ck_assert_int_eq(agent_report(f.a, T0 + 3 * PERIOD + 9, &m), 0);
    arrive(&f, 0, 2); /* after the report, before the period ends */
    tokens(&f, 4, T0 + 4 * PERIOD - 0.01, r, 1);
    ck_assert_int_eq(f.sn.period_starts, 1);
    ck_assert_uint_eq(bstats(&f, 0).arrivals, 0); /* counters restarted */
    ck_assert_int_eq(bstats(&f, 0).r_tokens, 10);  /* nothing served since */
    expect_stats(&f, __LINE__, (stats_want_t){.period = W(4)});
    /* the clock then reaches the boundary the tokens anticipated: no
     * second period start; the first report of period 4 carries the
     * arrivals of period 3's last interval */
    ck_assert_int_eq(agent_tick(f.a, T0 + 4 * PERIOD), 1);
    ck_assert_int_eq(f.sn.period_starts, 1);
    ck_assert_int_eq(agent_report(f.a, T0 + 4 * PERIOD, &m), 0);
    ck_assert_uint_eq(m.period, 4);
    expect_arrivals(&m, __LINE__, 0, 2, 0);
    proto_msg_clear(&m);
    fx_stop(&f);
}
END_TEST

/* Welcomes f's agent at T0 in period 9's last interval (of K, 10 s
 * periods), 1 s left: period 9 ends at T0 + 1. */
static void welcome_period9(fx_t *f)
{
    proto_msg_t w;
    msg_to_n1(&w, PROTO_WELCOME);
    w.period = 9;
    w.interval = 4;
    w.intervals = K;
    w.period_ms = 10000;
    w.remaining_ms = 1000;
    ck_assert_int_eq(agent_handle(f->a, &w, NULL, T0), 0);
}

START_TEST(test_agent_period_roll_by_clock)
{
    fx_t f;
    fx_start(&f, 0);
    /* timing from the message's ms fields, counted from `now` */
    welcome_period9(&f);
    ck_assert_double_eq_tol(agent_next_tick(f.a), T0 + 1, 1e-9);
    arrive(&f, 1, 3);
    /* a clock that skipped a whole period */
    ck_assert_int_eq(agent_tick(f.a, T0 + 1 + PERIOD + 0.5), 1);
    expect_stats(&f, __LINE__, (stats_want_t){.period = W(11), .interval = W(0)});
    ck_assert_int_eq(f.sn.period_starts, 1);
    proto_msg_t m;
    proto_msg_init(&m);
    ck_assert_int_eq(agent_report(f.a, T0 + 1 + PERIOD + 0.5, &m), 0);
    ck_assert_uint_eq(m.count, 1);
    ck_assert_uint_eq(m.report[0].bucket, 1);
    ck_assert_uint_eq(m.report[0].arrivals_interval, 3);
    ck_assert_uint_eq(m.remaining_ms, 9500);
    proto_msg_clear(&m);
    fx_stop(&f);
}
END_TEST

/* A clock not ticked for periods (a shard session that idled while its
 * shard was out of the map) gives, in a hello, the period that holds the
 * hello's instant and what is left of it, as agent_tick() would roll it:
 * not the period that ended (with nothing left), which a standby
 * controller adopted as a period ending then, off the shards' phase
 * (it_reshard_down's grow-back). */
START_TEST(test_agent_hello_timing_rolled_when_not_ticked)
{
    fx_t f;
    fx_start(&f, 0);
    welcome_period9(&f);
    proto_msg_t m;
    ck_assert_int_eq(agent_hello(f.a, T0 + 0.5, &m), 0); /* ticked or not: period 9 */
    ck_assert_int_eq(m.has_timing, 1);
    ck_assert_uint_eq(m.period, 9);
    ck_assert_uint_eq(m.interval, 4);
    ck_assert_uint_eq(m.remaining_ms, 500);
    /* never ticked: 3.25 periods after 9 ended, period 13's interval 1, 7.5 s left */
    ck_assert_int_eq(agent_hello(f.a, T0 + 1 + 3 * PERIOD + 2.5, &m), 0);
    ck_assert_uint_eq(m.period, 13);
    ck_assert_uint_eq(m.interval, 1);
    ck_assert_uint_eq(m.remaining_ms, 7500);
    /* at the boundary itself: the next period whole */
    ck_assert_int_eq(agent_hello(f.a, T0 + 1 + 4 * PERIOD, &m), 0);
    ck_assert_uint_eq(m.period, 14);
    ck_assert_uint_eq(m.interval, 0);
    ck_assert_uint_eq(m.remaining_ms, 10000);
    /* and the tick then agrees */
    ck_assert_int_eq(agent_tick(f.a, T0 + 1 + 3 * PERIOD + 2.5), 1);
    expect_stats(&f, __LINE__, (stats_want_t){.period = W(13), .interval = W(1)});
    fx_stop(&f);
}
END_TEST

/* A session back from idling (agent_watch_from()) catches its clock up
 * mid-period without starting the node's period (the sessions that did
 * not idle started it at its boundary: a start mid-period restarted every
 * bucket's counters, it_reshard_down's dip at the grow-back), and its
 * silence counts from its return; the next boundary starts a period as
 * always. */
START_TEST(test_agent_watch_from_catches_up_quietly)
{
    fx_t f;
    fx_start_static(&f);
    welcome_period9(&f);
    int starts = f.sn.period_starts;
    /* idle (not ticked) through periods 10 to 12; back 3 s into period 13 */
    double back = T0 + 1 + 3 * PERIOD + 3;
    agent_watch_from(f.a, back);
    ck_assert_int_eq(f.sn.period_starts, starts);
    agent_tick(f.a, back);
    ck_assert_int_eq(f.sn.period_starts, starts); /* not mid-period */
    expect_stats(&f, __LINE__, (stats_want_t){.period = W(13), .interval = W(1)});
    /* the next boundary starts period 14 */
    agent_tick(f.a, T0 + 1 + 4 * PERIOD + 0.01);
    ck_assert_int_eq(f.sn.period_starts, starts + 1);
    expect_stats(&f, __LINE__, (stats_want_t){.period = W(14), .interval = W(0)});
    fx_stop(&f);
}
END_TEST

START_TEST(test_agent_dropped_bucket_keeps_serving_with_own_weight)
{
    fx_t f;
    fx_start(&f, 0);
    proto_msg_t w;
    welcome_msg(&f, &w); /* with the controller's weights */
    w.has_weights = 1;
    w.weights = ctl_weights;
    const char *blue_too[] = {"blue", "green"};
    const uint32_t w5[] = {5, 5};
    agent_timing_t tm = tm_at(0, T0);
    ck_assert_int_eq(agent_handle(f.a, &w, &tm, T0), 0);
    w.names = blue_too;
    w.nnames = 2;
    w.weights = w5;
    w.table = 8;
    ck_assert_int_eq(agent_handle(f.a, &w, &tm, T0), 0);
    ck_assert_uint_eq(bstats(&f, 1).weight, 5);
    proto_tokens_rec_t r[] = {{.bucket = 0, .r_tokens = 9, .l_tokens = 9}};
    proto_msg_t m;
    msg_to_n1(&m, PROTO_TOKENS);
    m.table = 8;
    m.count = 1;
    m.tokens = r;
    ck_assert_int_eq(agent_handle(f.a, &m, &tm, T0), 0);
    ck_assert_int_eq(bstats(&f, 1).l_tokens, 9);
    /* blue leaves the controller's table: R 0, no limit, weight 3 again */
    int applied = f.sn.applied;
    w.names = ctl_names;
    w.nnames = 3;
    w.weights = ctl_weights;
    w.table = 9;
    ck_assert_int_eq(agent_handle(f.a, &w, &tm, T0), 0);
    expect_tokens(&f, __LINE__, 1, 0, SCHED_UNLIMITED);
    ck_assert_uint_eq(bstats(&f, 1).weight, 3);
    ck_assert_int_eq(f.sn.applied, applied + 1); /* the front dispatches */
    fx_stop(&f);
}
END_TEST

/* Controller tables for the default-bucket tests: generation g, names. */
static void ctl_table_msg(fx_t *f, uint64_t period, double now, uint32_t g, const char **names,
                          size_t n, const proto_tokens_rec_t *recs, size_t nrec)
{
    proto_msg_t m;
    msg_to_n1(&m, PROTO_TOKENS);
    m.table = g;
    m.peer_table = f->node_table;
    m.has_names = 1;
    m.nnames = n;
    m.names = names;
    m.count = nrec;
    m.tokens = (proto_tokens_rec_t *)recs;
    agent_timing_t tm = tm_at(period, now);
    ck_assert_int_eq(agent_handle(f->a, &m, &tm, now), 0);
}

/* With `default` in the controller's table, a bucket the table lacks (blue:
 * only the node knows it; "evil": a prefix seen later; red once the
 * controller removes it) queues in `default` and pays its tokens; the
 * report still shows who sent what.  Without `default` every bucket is its
 * own queue again. */
START_TEST(test_agent_default_bucket_holds_unconfigured)
{
    fx_t f;
    fx_start(&f, 0); /* tokens policy throughout */
    welcome(&f, 0, T0 + 0.5);
    const char *t1[] = {"green", "red", "default"};
    proto_tokens_rec_t lim = {.bucket = 2, .r_tokens = 0, .l_tokens = 2};
    ctl_table_msg(&f, 0, T0 + 0.6, 8, t1, 3, &lim, 1);
    int d = sched_find_bucket(f.s, "default", 7);
    ck_assert_int_ge(d, 0);
    ck_assert_int_eq(sched_route(f.s, d), d);
    ck_assert_int_eq(sched_route(f.s, 0), 0);       /* red: configured */
    ck_assert_int_eq(sched_route(f.s, 1), d);       /* blue: not */
    ck_assert_int_eq(sched_route(f.s, 2), 2);
    int evil = sched_add_bucket(f.s, "evil", 1);    /* the front meets a new prefix */
    ck_assert_int_eq(sched_route(f.s, evil), d);
    arrive(&f, 1, 3);
    arrive(&f, evil, 2);
    serve(&f, 2);
    ck_assert_ptr_null(sched_dispatch(f.s, 0, NULL)); /* default's limit holds all of it */
    ck_assert_uint_eq(bstats(&f, d).queued, 3);
    proto_msg_t m;
    proto_msg_init(&m);
    ck_assert_int_eq(agent_report(f.a, T0 + 2.0, &m), 0);
    const proto_report_rec_t *rd = rec_of(&m, (uint32_t)d), *rb = rec_of(&m, 1),
                             *re = rec_of(&m, (uint32_t)evil);
    ck_assert_ptr_nonnull(rd);
    ck_assert_ptr_nonnull(rb);
    ck_assert_ptr_nonnull(re);
    ck_assert_uint_eq(rd->arrivals_period, 5);
    ck_assert_uint_eq(rd->served_l, 2);
    ck_assert_uint_eq(rd->queued, 3);
    ck_assert_uint_eq(rb->arrivals_period + re->arrivals_period, 5);
    ck_assert_uint_eq(rb->served_l + re->served_l, 2);
    proto_msg_clear(&m);
    /* red removed: its traffic is default traffic from now on */
    const char *t2[] = {"green", "default"};
    ctl_table_msg(&f, 0, T0 + 2.5, 9, t2, 2, NULL, 0);
    ck_assert_int_eq(sched_route(f.s, 0), d);
    arrive(&f, 0, 1);
    ck_assert_uint_eq(bstats(&f, d).queued, 4);
    ck_assert_ptr_null(sched_dispatch(f.s, 0, NULL));
    /* no `default` in the table: every bucket is its own queue again */
    const char *t3[] = {"green", "red"};
    ctl_table_msg(&f, 0, T0 + 3.0, 10, t3, 2, NULL, 0);
    for (int b = 0; b < sched_nbuckets(f.s); b++)
        ck_assert_int_eq(sched_route(f.s, b), b);
    ck_assert_int_eq(sched_route(f.s, sched_add_bucket(f.s, "later", 1)),
                     sched_find_bucket(f.s, "later", 5));
    fx_stop(&f);
}
END_TEST

/* A controller that refuses our name (another node runs under it): the
 * hello carries our instance, the agent says AGENT_REFUSED and holds every
 * request - the fallback's round robin must not serve them unthrottled -
 * until a welcome releases it. */
START_TEST(test_agent_duplicate_name_holds_everything)
{
    fx_t f;
    fx_start(&f, 1);
    agent_destroy(&f.a);
    agent_config_t cfg;
    agent_config_defaults(&cfg);
    cfg.name = "n1";
    cfg.instance = 0xabcdef;
    cfg.mode = AGENT_FALLBACK_RR; /* whose round robin must not serve them */
    agent_ops_t ops = {.set_tokens = h_set_tokens, .applied = h_applied,
                       .period_start = h_period_start, .set_policy = h_set_policy,
                       .arg = &f.sn};
    f.a = agent_new(&cfg, f.s, &ops, T0, NULL);
    ck_assert_ptr_nonnull(f.a);
    proto_msg_t m;
    ck_assert_int_eq(agent_hello(f.a, T0, &m), 0);
    ck_assert_uint_eq(m.instance, 0xabcdef);
    ck_assert_int_eq(sched_policy(f.s), SCHED_POLICY_RR);
    proto_msg_t e;
    msg_to_n1(&e, PROTO_ERROR);
    strcpy(e.code, "duplicate_name");
    ck_assert_int_eq(agent_handle(f.a, &e, NULL, T0 + 0.1), AGENT_REFUSED);
    ck_assert_int_eq(agent_handle(f.a, &e, NULL, T0 + 1.1), AGENT_REFUSED);
    expect_stats(&f, __LINE__, (stats_want_t){.refused = W(1), .duplicate_name = W(2)});
    ck_assert(!agent_welcomed(f.a));
    ck_assert_int_eq(sched_policy(f.s), SCHED_POLICY_TOKENS);
    arrive(&f, 1, 2);
    arrive(&f, 2, 1);
    int later = sched_add_bucket(f.s, "later", 1);
    arrive(&f, later, 1);
    ck_assert_ptr_null(sched_dispatch(f.s, 0, NULL)); /* nothing is served */
    ck_assert_uint_eq(bstats(&f, 0).queued, 4);
    /* the other node went away: a welcome releases the hold */
    welcome(&f, 0, T0 + 3.0);
    expect_stats(&f, __LINE__, (stats_want_t){.refused = W(0)});
    ck_assert_int_eq(sched_policy(f.s), SCHED_POLICY_RR); /* fallback until tokens */
    serve(&f, 4);
    fx_stop(&f);
}
END_TEST

START_TEST(test_agent_new_rejects_bad_config)
{
    sched_t *s = sched_new(SCHED_POLICY_TOKENS, 0);
    agent_config_t cfg;
    agent_config_defaults(&cfg);
    int err = 0;
    ck_assert_ptr_null(agent_new(&cfg, s, NULL, 0, &err)); /* no name */
    ck_assert_int_eq(err, -EINVAL);
    cfg.name = "has space";
    ck_assert_ptr_null(agent_new(&cfg, s, NULL, 0, &err));
    cfg.name = "n1";
    cfg.silence_intervals = 0;
    ck_assert_ptr_null(agent_new(&cfg, s, NULL, 0, &err));
    cfg.silence_intervals = 1.5;
    agent_t *a = agent_new(&cfg, s, NULL, 0, &err);
    ck_assert_ptr_nonnull(a);
    agent_destroy(&a);
    agent_destroy(&a); /* NULL is fine */
    agent_destroy(NULL);
    sched_destroy(&s);
}
END_TEST

/* ---- fail static, silence, epochs (issue 13) ---- */

/* A tokens message from controller `src` at leadership epoch `epoch`;
 * with_names sends the controller's table (generation `table`) along. */
static int tokens_from(fx_t *f, uint64_t period, double now, const proto_tokens_rec_t *recs,
                       size_t n, uint64_t epoch, int src, uint32_t table, int with_names)
{
    proto_msg_t m;
    msg_to_n1(&m, PROTO_TOKENS);
    m.table = table;
    m.peer_table = f->node_table;
    m.epoch = epoch;
    m.count = n;
    m.tokens = (proto_tokens_rec_t *)recs;
    if (with_names) {
        m.has_names = 1;
        m.nnames = 3;
        m.names = ctl_names;
    }
    agent_timing_t tm = tm_at(period, now);
    return agent_handle_from(f->a, &m, &tm, now, src);
}

/* Serves everything the tokens allow; returns how many of bucket b. */
static int serve_all(fx_t *f, int b)
{
    int n = 0;
    sched_item_t *it;
    while ((it = sched_dispatch(f->s, 0, NULL)))
        n += it->bucket == b;
    return n;
}

/* The controller says nothing in [from, to): ticks every interval start. */
static void fx_silent(fx_t *f, double from, double to)
{
    for (double t = from; t < to - 1e-9; t += PERIOD / K)
        agent_tick(f->a, t);
}

/* The controller gave red R 10 + L 20 in period 0 and went away: in
 * periods 1, 2, 3 red is served exactly 30 a period on this node, the
 * scheduler stays in tokens mode, a bucket without a limit stays
 * unlimited, and a bucket never seen gets the tightest limited share. */
START_TEST(test_agent_static_keeps_limits)
{
    fx_t f;
    fx_start_static(&f);
    ck_assert_int_eq(sched_policy(f.s), SCHED_POLICY_TOKENS); /* static: tokens mode */
    welcome(&f, 0, T0);
    proto_tokens_rec_t recs[3];
    static_grant(recs);
    tokens(&f, 0, T0 + 0.1, recs, 3);
    arrive(&f, 0, 12);
    ck_assert_int_eq(serve_all(&f, 0), 12); /* 10 R + 2 L this period */
    fx_silent(&f, T0 + 2, T0 + PERIOD);
    ck_assert_int_eq(sched_policy(f.s), SCHED_POLICY_TOKENS);
    for (int p = 1; p <= 3; p++) {
        double start = T0 + p * PERIOD;
        agent_tick(f.a, start);
        expect_stats(&f, __LINE__, (stats_want_t){.fallback = W(1), .fallbacks = W(1)});
        ck_assert_int_eq(sched_policy(f.s), SCHED_POLICY_TOKENS);
        expect_tokens(&f, __LINE__, 0, 10, 20);
        ck_assert_int_eq(bstats(&f, 2).l_tokens, SCHED_UNLIMITED); /* green: no limit */
        ck_assert_int_eq(bstats(&f, 3).l_tokens, 7);
        f.nitems = 0;
        arrive(&f, 0, 50);
        ck_assert_int_eq(serve_all(&f, 0), 30); /* never more than the grant */
        sched_drain(f.s, NULL, NULL);
        fx_silent(&f, start + 2, start + PERIOD);
        ck_assert_str_eq(agent_state_str(f.a), "static");
    }
    /* period 1 was entered, 2 and 3 renewed */
    expect_stats(&f, __LINE__, (stats_want_t){.static_periods = W(2)});
    /* a bucket never seen: no reservation, the tightest limited share (7) */
    ck_assert_int_eq(sched_add_bucket(f.s, "late", 1), 4);
    agent_tick(f.a, T0 + 4 * PERIOD);
    expect_tokens(&f, __LINE__, 4, 0, 7);
    ck_assert_int_eq(bstats(&f, 0).l_tokens, 20);
    fx_stop(&f);
}
END_TEST

/* The fallback lease (issue 26 case 2): the controller's tokens say 2
 * periods, so after its last period (0) red's grant (R 10 + L 20) is
 * renewed in periods 1 and 2 only; from period 3 on red (limited) and a
 * bucket never seen (the tightest limited share) hold R 0 and L 0, while
 * green (no limit) keeps its R 4 and no limit; the controller's tokens
 * lift it at once.  The hello says the node keeps to the lease. */
START_TEST(test_agent_static_lease_then_limited_at_zero)
{
    fx_t f;
    fx_start_static(&f);
    proto_msg_t h;
    ck_assert_int_eq(agent_hello(f.a, T0, &h), 0);
    ck_assert_int_eq(h.leases, 1);
    welcome(&f, 0, T0);
    proto_tokens_rec_t recs[3];
    static_grant(recs);
    proto_msg_t m;
    tokens_msg(&f, &m, recs, 3);
    proto_tokens_bytes_t by = {.bucket = 1, .l_bytes = 10 * 4096}; /* red: 10 units */
    m.nbytes = 1;
    m.tbytes = &by;
    m.lease = 2;
    agent_timing_t tm = tm_at(0, T0 + 0.1);
    ck_assert_int_eq(agent_handle(f.a, &m, &tm, T0 + 0.1), 0);
    agent_stats_t st = expect_stats(&f, __LINE__, (stats_want_t){0});
    ck_assert_uint_eq(st.lease, 2);
    fx_silent(&f, T0 + 2, T0 + PERIOD);
    for (int p = 1; p <= 4; p++) {
        double start = T0 + p * PERIOD;
        agent_tick(f.a, start);
        expect_stats(&f, __LINE__, (stats_want_t){.fallback = W(1), .period = W(p)});
        int in_lease = p <= 2;
        expect_tokens(&f, __LINE__, 0, in_lease ? 10 : 0, in_lease ? 20 : 0);
        if (p == 1) /* never seen: the tightest share, 7, from the next period */
            ck_assert_int_eq(sched_add_bucket(f.s, "late", 1), 4);
        else
            expect_tokens(&f, __LINE__, 4, 0, in_lease ? 7 : 0);
        expect_tokens(&f, __LINE__, 2, 4, SCHED_UNLIMITED); /* green: R kept, no limit */
        sched_bucket_stats_t rb = bstats(&f, 0); /* red's byte limit: renewed, then 0 */
        ck_assert_int_eq(rb.units_on, 1);
        ck_assert_msg(in_lease ? rb.lu_tokens > 0 : rb.lu_tokens == 0, "period %d: lu %lld", p,
                      (long long)rb.lu_tokens);
        f.nitems = 0;
        arrive(&f, 0, 50);
        ck_assert_int_eq(serve_all(&f, 0), in_lease ? 30 : 0);
        sched_drain(f.s, NULL, NULL);
        fx_silent(&f, start + 2, start + PERIOD);
    }
    st = expect_stats(&f, __LINE__, (stats_want_t){.static_periods = W(3)});
    ck_assert_uint_eq(st.lease_periods, 2); /* periods 3 and 4 */
    /* The controller is back: its tokens count again. */
    recs[0].l_tokens = 5;
    m.nbytes = 0;
    tm = tm_at(5, T0 + 5 * PERIOD + 0.1);
    ck_assert_int_eq(agent_handle(f.a, &m, &tm, T0 + 5 * PERIOD + 0.1), 0);
    expect_stats(&f, __LINE__, (stats_want_t){.fallback = W(0)});
    expect_tokens(&f, __LINE__, 0, 10, 5);
    fx_stop(&f);
}
END_TEST

/* Share tokens (issue 28): a tokens message's list sets the scheduler's
 * shares (by the controller's index), a message without the field keeps
 * them, an empty list clears them, a list naming a bucket beyond the
 * table is ignored whole; failing static, the list of the last covered
 * period is renewed within the lease, then none (plain round robin). */
START_TEST(test_agent_shares_and_fail_static)
{
    fx_t f;
    fx_start_static(&f);
    welcome(&f, 0, T0);
    proto_tokens_rec_t recs[3];
    static_grant(recs);
    proto_msg_t m;
    tokens_msg(&f, &m, recs, 3);
    const proto_share_rec_t sl[2] = {{0, 6}, {1, 5}}; /* green 6, red 5 */
    m.has_shares = 1;
    m.nshares = 2;
    m.shares = sl;
    m.lease = 2;
    agent_timing_t tm = tm_at(0, T0 + 0.1);
    ck_assert_int_eq(agent_handle(f.a, &m, &tm, T0 + 0.1), 0);
    ck_assert_int_eq(sched_share(f.s, 2), 6);
    ck_assert_int_eq(sched_share(f.s, 0), 5);
    /* without the field: kept */
    m.has_shares = 0;
    tm = tm_at(0, T0 + 0.2);
    ck_assert_int_eq(agent_handle(f.a, &m, &tm, T0 + 0.2), 0);
    ck_assert_int_eq(sched_share(f.s, 2), 6);
    /* beyond the table: ignored whole */
    const proto_share_rec_t bad[2] = {{0, 1}, {9, 1}};
    m.has_shares = 1;
    m.shares = bad;
    tm = tm_at(0, T0 + 0.3);
    ck_assert_int_eq(agent_handle(f.a, &m, &tm, T0 + 0.3), 0);
    ck_assert_int_eq(sched_share(f.s, 2), 6);
    /* an empty list clears them */
    m.nshares = 0;
    tm = tm_at(0, T0 + 0.4);
    ck_assert_int_eq(agent_handle(f.a, &m, &tm, T0 + 0.4), 0);
    ck_assert_int_eq(sched_share(f.s, 2), 0);
    ck_assert_int_eq(sched_share(f.s, 0), 0);
    /* The controller goes: periods 1 and 2 renew the period's first list
     * (green 6, red 5), period 3 is past the lease: none. */
    fx_silent(&f, T0 + 2, T0 + PERIOD);
    for (int p = 1; p <= 3; p++) {
        agent_tick(f.a, T0 + p * PERIOD);
        expect_stats(&f, __LINE__, (stats_want_t){.fallback = W(1), .period = W(p)});
        ck_assert_int_eq(sched_share(f.s, 2), p <= 2 ? 6 : 0);
        ck_assert_int_eq(sched_share(f.s, 0), p <= 2 ? 5 : 0);
        fx_silent(&f, T0 + p * PERIOD + 2, T0 + (p + 1) * PERIOD);
    }
    fx_stop(&f);
}
END_TEST

/* Static fallback after a silence, and the grant it enforces:
 * - a controller that dies before its first push of a period: the node held
 *   period 0's leftover tokens; the fallback charges what it served in
 *   period 1 so far against the grant;
 * - a silence longer than a period: the period the controller never reached
 *   (its tokens: leftovers, all used) is no grant; the last one it covered
 *   stays the one enforced. */
typedef struct {
    int line;
    double silence, at;          /* fallback after; when the grant came */
    int64_t r, l;                /* the grant */
    double quiet_from, quiet_to; /* silent before serving */
    int arrive, served;
    double still_to;        /* silent, no fallback yet, up to here */
    double fall_to;         /* silent up to here: fallback */
    int64_t want_r, want_l; /* what the fallback enforces */
} static_grant_case_t;

/* A tokens message of controller table 7 that says it holds none of our
 * names yet (names in parts: it always says how many). */
static void tokens_held0(fx_t *f, double now, const proto_tokens_rec_t *recs, size_t n)
{
    proto_msg_t m;
    tokens_msg(f, &m, recs, n);
    m.has_peer_names = 1;
    m.peer_names = 0;
    agent_timing_t tm = tm_at(0, now);
    ck_assert_int_eq(agent_handle(f->a, &m, &tm, now), 0);
}

/* Names in parts (issues 26, 30): the controller's table arrives part by
 * part; until a name has come its index takes no tokens, and a node that
 * never had tokens holds every bucket (blue, which the table lacks, is
 * released once the table is whole); a part out of order, or from another
 * source than the leader, is ignored.  Our own table goes as a names
 * message, and a report carries records only for the buckets whose names
 * the controller acknowledged. */
START_TEST(test_agent_names_in_parts)
{
    fx_t f;
    fx_start_static(&f);
    proto_msg_t m;
    welcome_msg(&f, &m);
    static const char *first[] = {"green"}, *rest[] = {"red", "new"};
    static const uint32_t w1[] = {1}, w2[] = {1, 1};
    m.nnames = 1;
    m.names = first;
    m.has_weights = 1;
    m.weights = w1;
    m.names_of = 3;
    m.parts = 1;
    m.has_peer_names = 1;
    m.peer_names = 0; /* it holds none of ours yet */
    agent_timing_t tm = tm_at(0, T0);
    ck_assert_int_eq(agent_handle(f.a, &m, &tm, T0), 0);
    agent_stats_t st;
    agent_stats(f.a, &st);
    ck_assert_int_eq(st.ctl_partial, 1);
    ck_assert_uint_eq(st.ctl_names, 1);
    for (int b = 0; b < 3; b++) /* every bucket held: any may be limited */
        expect_tokens(&f, __LINE__, b, 0, 0);
    /* red (controller index 1) has not come: its tokens are not applied */
    proto_tokens_rec_t recs[] = {{.bucket = 1, .r_tokens = 5, .l_tokens = 9},
                                 {.bucket = 0, .r_tokens = 3, .l_tokens = 4}};
    tokens_held0(&f, T0 + 0.05, recs, 2);
    expect_tokens(&f, __LINE__, 0, 0, 0);  /* red: held */
    expect_tokens(&f, __LINE__, 2, 3, 4);  /* green: named, applied */
    /* a part out of order, and one from a standby: ignored */
    proto_msg_t nm;
    msg_to_n1(&nm, PROTO_NAMES);
    nm.table = 7;
    nm.has_names = 1;
    nm.names = rest;
    nm.nnames = 2;
    nm.has_weights = 1;
    nm.weights = w2;
    nm.names_at = 2;
    nm.names_of = 4;
    ck_assert_int_eq(agent_handle(f.a, &nm, &tm, T0 + 0.06), 0);
    nm.names_at = 1;
    nm.names_of = 3;
    ck_assert_int_eq(agent_handle_from(f.a, &nm, &tm, T0 + 0.06, 1), 0);
    agent_stats(f.a, &st);
    ck_assert_uint_eq(st.ctl_names, 1);
    /* the rest, in order: the table is whole; blue is not in it */
    ck_assert_int_eq(agent_handle(f.a, &nm, &tm, T0 + 0.07), 0);
    agent_stats(f.a, &st);
    ck_assert_int_eq(st.ctl_partial, 0);
    ck_assert_uint_eq(st.ctl_names, 3);
    expect_tokens(&f, __LINE__, 1, 0, SCHED_UNLIMITED); /* blue released */
    expect_tokens(&f, __LINE__, 0, 0, 0);
    expect_tokens(&f, __LINE__, 3, 0, 0); /* "new", made by the part: held */
    tokens_held0(&f, T0 + 0.08, recs, 2);
    expect_tokens(&f, __LINE__, 0, 5, 9); /* red now */

    /* a report before the controller acknowledged: no records */
    arrive(&f, 0, 2);
    proto_msg_t rep;
    proto_msg_init(&rep);
    ck_assert_int_eq(agent_report(f.a, T0 + PERIOD / K + 0.001, &rep), 0);
    ck_assert_uint_eq(rep.count, 0);
    ck_assert_int_eq(rep.has_names, 0);
    ck_assert_int_eq(rep.has_peer_names, 0); /* we hold its whole table */
    /* our table after the report (red, blue, green, new: one part, the
     * generation kept as it grew) */
    proto_msg_t part;
    ck_assert_int_eq(agent_names_part(f.a, &part), 1);
    ck_assert_int_eq(part.type, PROTO_NAMES);
    ck_assert_uint_eq(part.table, rep.table);
    ck_assert_uint_eq(rep.table, f.node_table);
    ck_assert_uint_eq(part.names_at, 0);
    ck_assert_uint_eq(part.nnames, 4);
    ck_assert_uint_eq(part.names_of, 4);
    ck_assert_str_eq(part.names[3], "new");
    ck_assert_int_eq(agent_names_part(f.a, &part), 0); /* all out */
    /* acknowledged (tokens say it holds our 4 names): records again */
    proto_msg_t t;
    tokens_msg(&f, &t, recs, 0);
    t.has_peer_names = 1;
    t.peer_names = 4;
    agent_timing_t tm2 = tm_at(0, T0 + PERIOD / K + 0.01);
    ck_assert_int_eq(agent_handle(f.a, &t, &tm2, T0 + PERIOD / K + 0.01), 0);
    arrive(&f, 0, 1);
    ck_assert_int_eq(agent_report(f.a, T0 + 2 * PERIOD / K + 0.001, &rep), 0);
    ck_assert_uint_ge(rep.count, 1);
    ck_assert_uint_eq(rep.report[0].bucket, 0);
    proto_msg_clear(&rep);
    fx_stop(&f);
}
END_TEST

/* Failing static, a node's first welcome holds every bucket of the
 * controller's table at R 0 and L 0 until its first tokens: it does not
 * know yet which are limited (it_stalled_node's first period saw 2-5 x a
 * limit served on the tokens the node started with). */
START_TEST(test_agent_static_holds_until_first_tokens)
{
    fx_t f;
    fx_start_static(&f);
    welcome(&f, 0, T0);
    /* controller index 0 = green (2), 1 = red (0), 2 = new (3) */
    expect_tokens(&f, __LINE__, 0, 0, 0);
    expect_tokens(&f, __LINE__, 2, 0, 0);
    expect_tokens(&f, __LINE__, 3, 0, 0);
    arrive(&f, 0, 3);
    ck_assert_int_eq(serve_all(&f, 0), 0);
    proto_tokens_rec_t recs[] = {
        {.bucket = 1, .r_tokens = 0, .l_tokens = 2},
        {.bucket = 0, .r_tokens = 0, .flags = PROTO_TOK_UNLIMITED, .l_tokens = PROTO_UNLIMITED},
        {.bucket = 2, .r_tokens = 0, .l_tokens = 0}};
    tokens(&f, 0, T0 + 0.1, recs, 3);
    expect_tokens(&f, __LINE__, 2, 0, SCHED_UNLIMITED);
    ck_assert_int_eq(serve_all(&f, 0), 2); /* red: its limit's 2 */
    fx_stop(&f);
}
END_TEST

/* Issue 26, etcd paused: a node whose controller went silent before a
 * period began falls back 3 intervals (0.6 of the period) into it.  The
 * grant is a rate: it holds 4/10 of it for the 4/10 of the period left, so
 * a period-long window across the entry sees at most the grant (before:
 * the whole grant, served in the 0.4 left; 1.6 x the grant in a window). */
START_TEST(test_agent_static_paced_from_entry)
{
    fx_t f;
    fx_start_mode(&f, 1, AGENT_FALLBACK_STATIC, 3.0, 0.1);
    welcome(&f, 0, T0);
    proto_tokens_rec_t recs[] = {{.bucket = 1, .r_tokens = 20, .l_tokens = 80},
                                 {.bucket = 0, .r_tokens = 4, .flags = PROTO_TOK_UNLIMITED,
                                  .l_tokens = PROTO_UNLIMITED}};
    tokens(&f, 0, T0 + 8.1, recs, 2); /* the last word: period 0's last interval */
    fx_silent(&f, T0 + PERIOD, T0 + PERIOD + 6);
    expect_stats(&f, __LINE__, (stats_want_t){.fallback = W(0)});
    fx_silent(&f, T0 + PERIOD + 6, T0 + PERIOD + 6.5); /* 7.9 s > 3 x 2 s + 0.1 s */
    expect_stats(&f, __LINE__, (stats_want_t){.fallback = W(1)});
    /* red: its grant of 100 a period, 40 for the 4 s left, R first */
    expect_tokens(&f, __LINE__, 0, 20, 20);
    ck_assert_int_le(bstats(&f, 0).r_tokens + bstats(&f, 0).l_tokens, 42); /* 1.05 x pro rata */
    expect_tokens(&f, __LINE__, 2, 4, SCHED_UNLIMITED); /* no limit: as it was */
    /* the window [entry, entry + 1 period): 40 now + 60 of the next
     * period's 100 (paced over it) */
    fx_silent(&f, T0 + 2 * PERIOD, T0 + 2 * PERIOD + 0.5);
    expect_tokens(&f, __LINE__, 0, 20, 80);
    fx_stop(&f);
}
END_TEST

START_TEST(test_agent_static_grant_after_silence)
{
    static const static_grant_case_t cases[] = {
        /* heard in the last interval; period 1 not silent long enough;
         * 8 served on period 0's leftover tokens; 5.9 s > 2 x 2 s + 0.5 s;
         * 15 - 8 */
        {__LINE__, 2.0, T0 + 8.1, 5, 10, T0 + PERIOD, T0 + PERIOD + 2, 8, 8, T0 + PERIOD + 2,
         T0 + PERIOD + 6, 0, 7},
        /* period 1: silent, no fallback yet; 21.9 s > 10 x 2 s + 0.5 s,
         * 2 s into period 2: 8/10 of the grant's 30 (a rate, issue 26) */
        {__LINE__, 10.0, T0 + 0.1, 10, 20, T0 + 2, T0 + 2, 40, 30, T0 + 2 * PERIOD,
         T0 + 2 * PERIOD + 4, 10, 14},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const static_grant_case_t *c = &cases[i];
        fx_t f;
        fx_granted_at(&f, AGENT_FALLBACK_STATIC, c->silence, c->at, c->r, c->l);
        fx_silent(&f, c->quiet_from, c->quiet_to);
        ck_assert_int_eq(sched_policy(f.s), SCHED_POLICY_TOKENS);
        arrive(&f, 0, c->arrive);
        int served = serve_all(&f, 0);
        ck_assert_msg(served == c->served, "line %d: served %d, want %d", c->line, served,
                      c->served);
        fx_silent(&f, c->quiet_to, c->still_to);
        expect_stats(&f, c->line, (stats_want_t){.fallback = W(0)});
        fx_silent(&f, c->still_to, c->fall_to);
        expect_stats(&f, c->line, (stats_want_t){.fallback = W(1)});
        expect_tokens(&f, c->line, 0, c->want_r, c->want_l);
        fx_stop(&f);
    }
}
END_TEST

/* Grants end with the period: the controller's tokens are paced from the
 * time they arrive to the end of the period they are for, and the static
 * fallback's grant at a period start to the end of the new period. */
START_TEST(test_agent_grants_end_with_the_period)
{
    fx_t f;
    fx_start_static(&f);
    ck_assert_int_eq(sched_set_pacing(f.s, 1, 0), 0);
    welcome(&f, 0, T0);
    /* red (controller index 1): R 10 + L 20 for the 9.9 s left */
    proto_tokens_rec_t recs[] = {{.bucket = 1, .r_tokens = 10, .l_tokens = 20}};
    tokens(&f, 0, T0 + 0.1, recs, 1);
    ck_assert_int_eq(f.sn.last_b, 0);
    ck_assert(fabs(f.sn.last_until - (T0 + PERIOD)) < 1e-9);
    ck_assert(fabs(f.sn.last_now - (T0 + 0.1)) < 1e-9);
    arrive(&f, 0, 10);
    /* one unit of each class at once, then one L every 9.9 / 20 s */
    ck_assert_ptr_nonnull(sched_dispatch(f.s, T0 + 0.1, NULL));
    ck_assert_ptr_nonnull(sched_dispatch(f.s, T0 + 0.1, NULL));
    ck_assert_ptr_null(sched_dispatch(f.s, T0 + 0.1, NULL));
    ck_assert(fabs(sched_next_ready(f.s) - (T0 + 0.1 + 9.9 / 20)) < 1e-9);
    sched_drain(f.s, NULL, NULL);
    /* silent: static fallback; each period start grants to its end */
    fx_silent(&f, T0 + 2, T0 + PERIOD);
    for (int p = 1; p <= 2; p++) {
        double start = T0 + p * PERIOD;
        agent_tick(f.a, start);
        expect_stats(&f, __LINE__, (stats_want_t){.fallback = W(1)});
        ck_assert(fabs(f.sn.last_now - start) < 1e-9);
        ck_assert_msg(fabs(f.sn.last_until - (start + PERIOD)) < 1e-9, "period %d: until %.3f",
                      p, f.sn.last_until);
        fx_silent(&f, start + 2, start + PERIOD);
    }
    fx_stop(&f);
}
END_TEST

/* `rr` only when asked: round robin, no limits, then tokens on resume. */
START_TEST(test_agent_rr_fallback_and_resume)
{
    fx_t f;
    fx_start_mode(&f, 1, AGENT_FALLBACK_RR, 2.0, 0.1);
    ck_assert_int_eq(sched_policy(f.s), SCHED_POLICY_RR);
    welcome(&f, 0, T0);
    proto_tokens_rec_t recs[] = {{.bucket = 1, .r_tokens = 1, .l_tokens = 2}};
    tokens(&f, 0, T0 + 0.1, recs, 1);
    ck_assert_int_eq(sched_policy(f.s), SCHED_POLICY_TOKENS);
    fx_silent(&f, T0 + 2, T0 + 2 * PERIOD);
    ck_assert_int_eq(sched_policy(f.s), SCHED_POLICY_RR);
    ck_assert_str_eq(agent_state_str(f.a), "rr");
    arrive(&f, 0, 40);
    ck_assert_int_eq(serve_all(&f, 0), 40); /* the limit is gone */
    tokens(&f, 2, T0 + 2 * PERIOD + 0.1, recs, 1);
    ck_assert_int_eq(sched_policy(f.s), SCHED_POLICY_TOKENS);
    ck_assert_str_eq(agent_state_str(f.a), "following");
    /* the first tokens, then this */
    expect_stats(&f, __LINE__,
                 (stats_want_t){.fallbacks = W(1), .resumes = W(2), .static_periods = W(0)});
    fx_stop(&f);
}
END_TEST

/* f follows a static-fallback controller (2 intervals of silence) that
 * granted R 10 + L 20 early in period 0 and then says nothing until `to`. */
static void fx_static_gone(fx_t *f, double to)
{
    fx_following(f, AGENT_FALLBACK_STATIC, 2.0, 10, 20);
    fx_silent(f, T0 + 2, to);
}

/* Static fallback, then the controller is back: its tokens replace the
 * grant at once and the node follows it again. */
START_TEST(test_agent_static_resume)
{
    fx_t f;
    fx_static_gone(&f, T0 + 2 * PERIOD);
    expect_stats(&f, __LINE__, (stats_want_t){.fallback = W(1)});
    proto_tokens_rec_t more[] = {{.bucket = 1, .r_tokens = 1, .l_tokens = 2}};
    tokens(&f, 2, T0 + 2 * PERIOD + 0.5, more, 1);
    expect_stats(&f, __LINE__, (stats_want_t){.fallback = W(0), .resumes = W(2)});
    expect_tokens(&f, __LINE__, 0, 1, 2);
    /* the next period start renews nothing: the controller rules */
    agent_tick(f.a, T0 + 3 * PERIOD);
    ck_assert_int_eq(bstats(&f, 0).r_tokens, 1);
    fx_stop(&f);
}
END_TEST

/* A late but alive controller: every push arrives 1.75 intervals late
 * around a period start (a starved host).  The old rule (1.5 intervals,
 * no grace) fell back and resumed; the default does not. */
static uint64_t late_controller_fallbacks(double silence, double grace)
{
    fx_t f;
    fx_start_mode(&f, 1, AGENT_FALLBACK_STATIC, silence, grace);
    welcome(&f, 0, T0);
    proto_tokens_rec_t recs[] = {{.bucket = 1, .r_tokens = 10, .l_tokens = 20}};
    for (int p = 0; p < 4; p++)
        for (int k = 0; k < K; k++) {
            double t = T0 + p * PERIOD + k * (PERIOD / K);
            agent_tick(f.a, t);
            /* the push of interval k: late by 1.75 intervals at k = 0 */
            double late = k == 0 && p > 0 ? 1.75 * (PERIOD / K) : 0.05;
            agent_tick(f.a, t + (PERIOD / K) * 0.99); /* nothing due */
            proto_msg_t m;
            msg_to_n1(&m, PROTO_TOKENS);
            m.table = 7;
            m.peer_table = f.node_table;
            m.count = 1;
            m.tokens = recs;
            if (late > PERIOD / K) {
                /* the next interval start comes first */
                agent_tick(f.a, t + PERIOD / K);
                k++;
            }
            agent_timing_t tm = tm_at((uint64_t)p, t + late);
            tm.interval = 0 + (uint32_t)(late > PERIOD / K ? 0 : k);
            agent_handle(f.a, &m, &tm, t + late);
        }
    agent_stats_t st = st_of(&f);
    fx_stop(&f);
    return st.fallbacks;
}

START_TEST(test_agent_late_controller_no_fallback)
{
    ck_assert_uint_eq(late_controller_fallbacks(2.0, 0.1), 0);
    ck_assert_uint_ge(late_controller_fallbacks(1.5, 0), 1); /* the old rule */
}
END_TEST

/* Epochs: a lower epoch is ignored, the leader's epoch from another
 * controller too, a higher one is adopted (and its table must come with
 * it); a deposed leader stays ignored. */
START_TEST(test_agent_epoch_fencing)
{
    fx_t f;
    fx_start_static(&f);
    welcome_from(&f, T0, 5, 0);
    proto_tokens_rec_t r10[] = {{.bucket = 1, .r_tokens = 10, .l_tokens = 20}};
    proto_tokens_rec_t r99[] = {{.bucket = 1, .r_tokens = 99, .l_tokens = PROTO_UNLIMITED,
                                 .flags = PROTO_TOK_UNLIMITED}};
    tokens_from(&f, 0, T0 + 0.1, r10, 1, 5, 0, 7, 0);
    ck_assert_int_eq(bstats(&f, 0).r_tokens, 10);
    expect_stats(&f, __LINE__, (stats_want_t){.epoch = W(5), .leader = W(0)});
    /* a deposed leader (epoch 3): ignored, even its unknown_node error */
    tokens_from(&f, 0, T0 + 0.2, r99, 1, 3, 1, 7, 1);
    expect_tokens(&f, __LINE__, 0, 10, 20);
    proto_msg_t e;
    msg_to_n1(&e, PROTO_ERROR);
    strcpy(e.code, "unknown_node");
    e.epoch = 3;
    ck_assert_int_eq(agent_handle_from(f.a, &e, NULL, T0 + 0.2, 1), 0);
    ck_assert(agent_welcomed(f.a));
    /* another controller at the leader's epoch: ignored while it leads */
    tokens_from(&f, 0, T0 + 0.3, r99, 1, 5, 1, 7, 1);
    ck_assert_int_eq(bstats(&f, 0).l_tokens, 20);
    expect_stats(&f, __LINE__, (stats_want_t){.stale_epoch = W(3)});
    /* a new leader (epoch 6): adopted; the old table is forgotten, so its
     * tokens without names are dropped, with names applied */
    ck_assert_int_eq(tokens_from(&f, 0, T0 + 0.4, r99, 1, 6, 1, 7, 0), AGENT_SEND_HELLO);
    ck_assert_int_eq(bstats(&f, 0).l_tokens, 20);
    expect_stats(&f, __LINE__,
                 (stats_want_t){.epoch = W(6), .leader = W(1), .rejected_table = W(1)});
    tokens_from(&f, 0, T0 + 0.5, r99, 1, 6, 1, 9, 1);
    expect_tokens(&f, __LINE__, 0, 99, SCHED_UNLIMITED);
    /* the old leader wakes up (SIGCONT) and pushes epoch 5: ignored */
    tokens_from(&f, 0, T0 + 0.6, r10, 1, 5, 0, 7, 1);
    ck_assert_int_eq(bstats(&f, 0).r_tokens, 99);
    expect_stats(&f, __LINE__, (stats_want_t){.stale_epoch = W(4), .fallback = W(0)});
    fx_stop(&f);
}
END_TEST

/* The epoch the node obeys rides on its hello and reports ("follows", for
 * a controller whose etcd lost its data to lead above).  When the leader
 * raises its own epoch (it learned a higher one from a node), the node
 * adopts it like a new leader's: it asks for the table again (hello) and
 * keeps the tokens it holds meanwhile, neither reset nor applied twice; the
 * next tokens are net of what it served since its report, so the IOs
 * served on the old epoch's grant are not granted again; the old epoch is
 * stale from then on, from the same controller too. */
START_TEST(test_agent_follows_raised_epoch)
{
    fx_t f;
    fx_start_static(&f);
    proto_msg_t m;
    ck_assert_int_eq(agent_hello(f.a, T0, &m), 0);
    ck_assert_uint_eq(m.follows, 0); /* obeys nobody yet */
    welcome_from(&f, T0, 5, 0);
    proto_tokens_rec_t r10[] = {{.bucket = 1, .r_tokens = 10, .l_tokens = 20}};
    tokens_from(&f, 0, T0 + 0.05, r10, 1, 5, 0, 7, 0);
    arrive(&f, 0, 6);
    serve(&f, 4);
    expect_tokens(&f, __LINE__, 0, 6, 20);
    proto_msg_t rep;
    proto_msg_init(&rep);
    ck_assert_int_eq(agent_report(f.a, T0 + 0.1, &rep), 0);
    ck_assert_uint_eq(rep.follows, 5);
    /* the leader raises its epoch to 9: its tokens without names cannot be
     * mapped yet; the node says hello and keeps its 6 + 20 */
    proto_tokens_rec_t r6[] = {{.bucket = 1, .r_tokens = 6, .l_tokens = 20}};
    ck_assert_int_eq(tokens_from(&f, 0, T0 + 0.15, r6, 1, 9, 0, 7, 0), AGENT_SEND_HELLO);
    expect_tokens(&f, __LINE__, 0, 6, 20);
    expect_stats(&f, __LINE__, (stats_want_t){.epoch = W(9), .leader = W(0)});
    ck_assert_int_eq(agent_hello(f.a, T0 + 0.15, &m), 0);
    ck_assert_uint_eq(m.follows, 9);
    serve(&f, 2); /* on the old grant, after the report */
    welcome_from(&f, T0 + 0.2, 9, 0);
    tokens_from(&f, 0, T0 + 0.25, r6, 1, 9, 0, 7, 0); /* counted from the report */
    expect_tokens(&f, __LINE__, 0, 4, 20);            /* 6 less the 2 served since */
    /* the old epoch, even from the same controller: stale */
    tokens_from(&f, 0, T0 + 0.3, r10, 1, 5, 0, 7, 1);
    expect_tokens(&f, __LINE__, 0, 4, 20);
    ck_assert_int_eq(agent_report(f.a, T0 + 0.35, &rep), 0);
    ck_assert_uint_eq(rep.follows, 9);
    proto_msg_clear(&rep);
    fx_stop(&f);
}
END_TEST

/* Two lone controllers (epoch 0) welcome a starting node: it follows the
 * first and ignores the second; when the first is gone (fallback, and
 * quiet), the second takes over. */
START_TEST(test_agent_two_lone_controllers)
{
    fx_t f;
    fx_start_mode(&f, 1, AGENT_FALLBACK_STATIC, 3.0, 0.1);
    welcome_from(&f, T0, 0, 0);
    welcome_from(&f, T0 + 0.01, 0, 1); /* ignored */
    proto_tokens_rec_t r10[] = {{.bucket = 1, .r_tokens = 10, .l_tokens = 20}};
    proto_tokens_rec_t r5[] = {{.bucket = 1, .r_tokens = 5, .l_tokens = 5}};
    tokens_from(&f, 0, T0 + 0.1, r10, 1, 0, 0, 7, 0);
    tokens_from(&f, 0, T0 + 0.2, r5, 1, 0, 1, 7, 1); /* ignored */
    expect_stats(&f, __LINE__, (stats_want_t){.leader = W(0), .stale_epoch = W(2)});
    ck_assert_int_eq(bstats(&f, 0).r_tokens, 10);
    /* controller 0 dies: fallback in period 1, then 1's tokens are obeyed */
    fx_silent(&f, T0 + 2, T0 + 2 * PERIOD);
    expect_stats(&f, __LINE__, (stats_want_t){.fallback = W(1)});
    tokens_from(&f, 2, T0 + 2 * PERIOD + 0.1, r5, 1, 0, 1, 8, 1);
    expect_stats(&f, __LINE__, (stats_want_t){.leader = W(1), .fallback = W(0)});
    ck_assert_int_eq(bstats(&f, 0).r_tokens, 5);
    fx_stop(&f);
}
END_TEST

/* Silent for three periods: one warning a period, not one an interval. */
START_TEST(test_agent_warns_once_a_period)
{
    fx_t f;
    fx_static_gone(&f, T0 + 4 * PERIOD);
    /* periods 1, 2, 3 */
    agent_stats_t st =
        expect_stats(&f, __LINE__, (stats_want_t){.fallbacks = W(1), .warn_unreachable = W(3)});
    ck_assert_double_gt(st.silent_s, 3 * PERIOD);
    fx_stop(&f);
}
END_TEST

/* Byte tokens (cost-aware tokens): bytes on the wire, units of 4096 in the
 * scheduler; applied net of what was served since the report (a debt
 * stays a debt); reports carry the bucket's bytes; "off" turns it off. */
static void byte_tokens(fx_t *f, double now, uint32_t ctl_b, uint32_t flags, int64_t r, int64_t l)
{
    proto_tokens_rec_t io = {.bucket = ctl_b, .flags = PROTO_TOK_UNLIMITED,
                             .l_tokens = PROTO_UNLIMITED};
    proto_tokens_bytes_t by = {.bucket = ctl_b, .flags = flags, .r_bytes = r, .l_bytes = l};
    proto_msg_t m;
    msg_to_n1(&m, PROTO_TOKENS);
    m.table = 7;
    m.peer_table = f->node_table;
    m.count = 1;
    m.tokens = &io;
    m.nbytes = 1;
    m.tbytes = &by;
    agent_timing_t tm = tm_at(0, now);
    ck_assert_int_eq(agent_handle(f->a, &m, &tm, now), 0);
}

START_TEST(test_agent_byte_tokens)
{
    fx_t f;
    fx_welcomed(&f, 0);
    byte_tokens(&f, T0 + 0.01, 1, 0, 0, 10 * 4096 + 100); /* rounded down */
    sched_bucket_stats_t bs = bstats(&f, 0);
    ck_assert_int_eq(bs.units_on, 1);
    ck_assert_int_eq(bs.lu_tokens, 10);
    for (int i = 0; i < 5; i++)
        f.items[f.nitems + i].cost = 3;
    arrive(&f, 0, 5);
    serve(&f, 4); /* 10 -> 1 -> -2: the fourth starts on one unit */
    ck_assert_ptr_null(sched_dispatch(f.s, 0, NULL));
    proto_msg_t m;
    proto_msg_init(&m);
    ck_assert_int_eq(agent_report(f.a, T0 + 0.5, &m), 0);
    ck_assert_uint_eq(m.nbytes, 1);
    ck_assert_uint_eq(m.rbytes[0].bucket, 0);
    ck_assert_uint_eq(m.rbytes[0].served, 12 * 4096);
    ck_assert_uint_eq(m.rbytes[0].arrivals_period, 15 * 4096);
    ck_assert_uint_eq(m.rbytes[0].arrivals_interval, 15 * 4096);
    ck_assert_int_eq(m.rbytes[0].l_left, -2 * 4096);
    ck_assert_uint_eq(m.served_bytes, 12 * 4096);
    /* The controller answers that report: nothing served since, so its
     * count stands; then it serves 3 units before the next grant. */
    byte_tokens(&f, T0 + 0.6, 1, 0, 0, 3 * 4096);
    ck_assert_int_eq(bstats(&f, 0).lu_tokens, 3);
    serve(&f, 1);
    byte_tokens(&f, T0 + 0.7, 1, 0, 4096, 2 * 4096);
    bs = bstats(&f, 0);
    ck_assert_int_eq(bs.ru_tokens, 0); /* 1 - 3 served: R pays 1 */
    ck_assert_int_eq(bs.lu_tokens, 0); /* L pays 2 */
    byte_tokens(&f, T0 + 0.8, 1, PROTO_TOK_OFF, 0, 0);
    ck_assert_int_eq(bstats(&f, 0).units_on, 0);
    ck_assert_int_eq(agent_report(f.a, T0 + 1.0, &m), 0);
    ck_assert_uint_eq(m.nbytes, 0);
    ck_assert_uint_eq(m.served_bytes, 0);
    proto_msg_clear(&m);
    fx_stop(&f);
}
END_TEST

/* A session back from idling (agent_watch_from()) reports, in its first
 * interval, what arrived since the node's boundary (the sessions that did
 * not idle started the node's period, restarting its counters): byte
 * arrivals as request arrivals, none of the period it idled through
 * counted again (a byte carry kept then added the arrivals since the
 * boundary less those reported before the idling to the next report). */
START_TEST(test_agent_watch_from_byte_arrivals_once)
{
    fx_t f;
    fx_welcomed(&f, 0);
    byte_tokens(&f, T0 + 0.01, 1, 0, 0, 100 * 4096);
    for (int i = 0; i < 12; i++)
        f.items[f.nitems + i].cost = 3;
    arrive(&f, 0, 5);
    proto_msg_t m;
    proto_msg_init(&m);
    ck_assert_int_eq(agent_report(f.a, T0 + 0.5, &m), 0);
    ck_assert_uint_eq(m.nbytes, 1);
    ck_assert_uint_eq(m.rbytes[0].arrivals_interval, 15 * 4096);
    /* idle; another session starts the node's period 1 at its boundary */
    sched_period_start(f.s);
    arrive(&f, 0, 7);
    agent_watch_from(f.a, T0 + PERIOD + 3);
    ck_assert_int_eq(agent_report(f.a, T0 + PERIOD + 3, &m), 0);
    ck_assert_uint_eq(m.count, 1);
    ck_assert_uint_eq(m.report[0].arrivals_interval, 7);
    ck_assert_uint_eq(m.nbytes, 1);
    ck_assert_uint_eq(m.rbytes[0].arrivals_period, 21 * 4096);
    ck_assert_uint_eq(m.rbytes[0].arrivals_interval, 21 * 4096);
    proto_msg_clear(&m);
    fx_stop(&f);
}
END_TEST

/* Shadow (issue 28): the controller's table names red (its index 1, the
 * node's bucket 0) in shadow: red is served beyond its limit and counts
 * what the limit would have held; the report tells the controller the
 * limit's service (R + the L it would have allowed); failing static the
 * flag and the renewed grant stay (counted, not enforced); a table
 * without the list takes red out of shadow. */
START_TEST(test_agent_shadow_from_table)
{
    fx_t f;
    fx_start_static(&f);
    proto_msg_t w;
    welcome_msg(&f, &w);
    w.has_weights = 1;
    w.weights = ctl_weights;
    w.shadow = "1";
    agent_timing_t tm = tm_at(0, T0);
    ck_assert_int_eq(agent_handle(f.a, &w, &tm, T0), 0);
    ck_assert_int_eq(sched_shadow(f.s, 0), 1); /* red */
    ck_assert_int_eq(sched_shadow(f.s, 2), 0); /* green */
    proto_tokens_rec_t recs[] = {{.bucket = 1, .r_tokens = 2, .l_tokens = 3}};
    tokens(&f, 0, T0 + 0.1, recs, 1);
    arrive(&f, 0, 10);
    ck_assert_int_eq(serve_all(&f, 0), 10); /* never held */
    ck_assert_uint_eq(bstats(&f, 0).shadow_held, 5);
    ck_assert_int_eq(bstats(&f, 0).l_tokens, 0); /* the limit's account */
    proto_msg_t m;
    proto_msg_init(&m);
    ck_assert_int_eq(agent_tick(f.a, T0 + 2.0), 1);
    ck_assert_int_eq(agent_report(f.a, T0 + 2.0, &m), 0);
    const proto_report_rec_t *r = rec_of(&m, 0);
    ck_assert_ptr_nonnull(r);
    ck_assert_uint_eq(r->served_r + r->served_l + r->served_o, 5); /* 2 R + 3 L allowed */
    ck_assert_uint_eq(r->served_r, 2);
    proto_msg_clear(&m);
    /* Silent: static renews the grant into the shadow account. */
    fx_silent(&f, T0 + 4, T0 + PERIOD);
    agent_tick(f.a, T0 + PERIOD);
    ck_assert_str_eq(agent_state_str(f.a), "static");
    ck_assert_int_eq(sched_shadow(f.s, 0), 1);
    ck_assert_int_eq(bstats(&f, 0).l_tokens, 3);
    f.nitems = 0;
    arrive(&f, 0, 10);
    ck_assert_int_eq(serve_all(&f, 0), 10);
    ck_assert_uint_eq(bstats(&f, 0).shadow_held, 5);
    /* A table without the list: enforced again. */
    w.shadow = NULL;
    w.table = 8;
    tm = tm_at(1, T0 + PERIOD + 1);
    ck_assert_int_eq(agent_handle(f.a, &w, &tm, T0 + PERIOD + 1), 0);
    ck_assert_int_eq(sched_shadow(f.s, 0), 0);
    fx_stop(&f);
}
END_TEST

/* Issue 27: the leader's rules message reaches the rules hook with its
 * version and text; a welcome without "rules" says the controller has
 * none (the hook gets version 0, ""); one with "rules" waits for the
 * message; a lower epoch's rules are ignored. */
START_TEST(test_agent_rules_from_the_leader)
{
    fx_t f;
    fx_start(&f, 1);
    welcome_from(&f, T0, 2, 0);
    ck_assert_int_eq(f.sn.rules_calls, 1);
    ck_assert_uint_eq(f.sn.rules_version, 0);
    ck_assert_str_eq(f.sn.rules_text, "");
    proto_msg_t m;
    msg_to_n1(&m, PROTO_RULES);
    m.epoch = 2;
    m.rules_version = 5;
    m.rules_text = "[{\"deny\":true}]";
    m.rules_len = strlen(m.rules_text);
    agent_handle_from(f.a, &m, NULL, T0 + 0.1, 0);
    ck_assert_int_eq(f.sn.rules_calls, 2);
    ck_assert_uint_eq(f.sn.rules_version, 5);
    ck_assert_str_eq(f.sn.rules_text, "[{\"deny\":true}]");
    ck_assert_uint_eq(st_of(&f).recv_rules, 1);
    /* an older leader's list changes nothing */
    m.epoch = 1;
    m.rules_version = 9;
    agent_handle_from(f.a, &m, NULL, T0 + 0.2, 1);
    ck_assert_int_eq(f.sn.rules_calls, 2);
    ck_assert_uint_eq(f.sn.rules_version, 5);
    /* a welcome announcing rules does not clear them */
    welcome_msg(&f, &m);
    m.epoch = 2;
    m.rules_version = 6;
    agent_timing_t tm = tm_at(0, T0 + 0.3);
    agent_handle_from(f.a, &m, &tm, T0 + 0.3, 0);
    ck_assert_int_eq(f.sn.rules_calls, 2);
    fx_stop(&f);
}
END_TEST

/* One interval of steady work for the sparse case: `n` arrive at red and
 * are served, then the interval's report at `now`. */
static void steady_report(fx_t *f, double now, int n, proto_msg_t *m)
{
    arrive(f, 0, n);
    serve(f, n);
    f->nitems = 0; /* every item served: reuse them */
    ck_assert_int_eq(agent_tick(f->a, now), 1);
    ck_assert_int_eq(agent_report(f->a, now, m), 0);
}

/* Sparse reports (issue 30): offered in the hello, sent only after a
 * welcome that takes them; the first report of a session is full; a
 * bucket whose queue, arrivals and served count are where the controller
 * predicts is left out; one that moved is sent; a full report when the
 * controller asks and every full_every reports; none without the
 * welcome's word. */
START_TEST(test_agent_sparse_reports)
{
    for (int takes = 0; takes < 2; takes++) {
        fx_t f;
        fx_start(&f, 0);
        sched_set_policy(f.s, SCHED_POLICY_RR);
        proto_msg_t m;
        ck_assert_int_eq(agent_hello(f.a, T0, &m), 0);
        ck_assert_int_eq(m.sparse, 1);
        welcome_msg(&f, &m);
        m.sparse = takes;
        agent_timing_t tm = tm_at(0, T0 + 0.5);
        ck_assert_int_eq(agent_handle(f.a, &m, &tm, T0 + 0.5), 0);
        proto_msg_init(&m);
        steady_report(&f, T0 + 2, 5, &m); /* period 0 interval 1: full (names go) */
        ck_assert_int_eq(m.sparse, 0);
        ck_assert_uint_eq(m.count, 1);
        /* the controller acknowledges our table */
        proto_msg_t hb;
        msg_to_n1(&hb, PROTO_HEARTBEAT);
        hb.peer_table = m.table;
        ck_assert_int_eq(agent_handle(f.a, &hb, NULL, T0 + 2.1), 0);
        /* steady: red where predicted (5 per interval), left out */
        steady_report(&f, T0 + 4, 5, &m);
        ck_assert_int_eq(m.sparse, takes);
        ck_assert_uint_eq(m.count, takes ? 0 : 1);
        /* red's arrivals quadruple: sent */
        steady_report(&f, T0 + 6, 20, &m);
        ck_assert_int_eq(m.sparse, takes);
        ck_assert_uint_eq(m.count, 1);
        ck_assert_uint_eq(m.report[0].arrivals_interval, 20);
        /* steady again at 20 from the new base: left out; served carried on
         * at the new record's rate (30 by interval 3 = 10 an interval) is
         * off by 10, so red goes once more, then stays out */
        steady_report(&f, T0 + 8, 20, &m);
        ck_assert_uint_eq(m.count, 1);
        /* the controller asks for a full report */
        msg_to_n1(&hb, PROTO_HEARTBEAT);
        hb.full = 1;
        ck_assert_int_eq(agent_handle(f.a, &hb, NULL, T0 + 8.1), 0);
        steady_report(&f, T0 + 10, 20, &m); /* period 1 interval 0 */
        ck_assert_int_eq(m.sparse, 0);
        ck_assert_uint_eq(st_of(&f).full_asked, (uint64_t)takes);
        /* 24 steady reports sparse, then a full one (full_every 25) */
        int sparse = 0, full = 0, recs = 0;
        for (int i = 1; i <= 25; i++) {
            steady_report(&f, T0 + 10 + 2 * i, 20, &m);
            sparse += m.sparse;
            full += !m.sparse;
            if (m.sparse)
                recs += (int)m.count;
        }
        ck_assert_int_eq(sparse, takes ? 24 : 0);
        ck_assert_int_eq(m.sparse, 0); /* the 25th */
        ck_assert_int_le(recs, takes ? 2 : 0); /* a period start may re-base red once */
        (void)full;
        proto_msg_clear(&m);
        fx_stop(&f);
    }
}
END_TEST

/* A bucket a sparse report leaves out is, for the controller, at its
 * predicted served count, and the tokens it sends are net of that: the
 * node nets them of what it served since the prediction, not since its
 * own count (else a count above the prediction, within the 2%, would be
 * granted twice). */
START_TEST(test_agent_sparse_tokens_net_of_prediction)
{
    fx_t f;
    fx_start(&f, 0);
    sched_set_policy(f.s, SCHED_POLICY_RR);
    proto_msg_t m;
    welcome_msg(&f, &m);
    m.sparse = 1;
    agent_timing_t tm = tm_at(0, T0 + 0.5);
    ck_assert_int_eq(agent_handle(f.a, &m, &tm, T0 + 0.5), 0);
    proto_msg_init(&m);
    steady_report(&f, T0 + 2, 5, &m); /* full: red served 5 at interval 1 */
    proto_msg_t hb;
    msg_to_n1(&hb, PROTO_HEARTBEAT);
    hb.peer_table = m.table;
    ck_assert_int_eq(agent_handle(f.a, &hb, NULL, T0 + 2.1), 0);
    steady_report(&f, T0 + 4, 6, &m); /* served 11, predicted 10: near */
    ck_assert_int_eq(m.sparse, 1);
    ck_assert_uint_eq(m.count, 0);
    /* the controller grants red (its index 1) 100 R as of 10 served */
    proto_tokens_rec_t t = {.bucket = 1, .r_tokens = 100, .flags = PROTO_TOK_UNLIMITED,
                            .l_tokens = PROTO_UNLIMITED};
    sched_set_policy(f.s, SCHED_POLICY_TOKENS);
    tokens(&f, 0, T0 + 4.1, &t, 1);
    expect_tokens(&f, __LINE__, 0, 99, SCHED_UNLIMITED);
    proto_msg_clear(&m);
    fx_stop(&f);
}
END_TEST

/* A tokens message of one record at `now` in period 0 that acknowledges
 * our table `ours` (tokens() acknowledges the hello's). */
static void held_tokens(fx_t *f, double now, const proto_tokens_rec_t *rec, uint32_t ours)
{
    proto_msg_t m;
    tokens_msg(f, &m, rec, 1);
    m.peer_table = ours;
    agent_timing_t tm = tm_at(0, now);
    ck_assert_int_eq(agent_handle(f->a, &m, &tm, now), 0);
}

/* A sparse report leaves out an idle bucket held at R 0 and L 0 and the
 * release of that hold: with nothing queued there is nothing throttled
 * (it_ctlclient: a node whose fresh bucket was held until the controller's
 * tokens sent a record of zeros, the controller took the idle bucket for
 * reported and withheld its provisional split on every node).  A queue with
 * no tokens is still sent. */
START_TEST(test_agent_sparse_idle_hold_not_a_change)
{
    fx_t f;
    fx_start(&f, 0);
    proto_msg_t m;
    welcome_msg(&f, &m);
    m.sparse = 1;
    agent_timing_t tm = tm_at(0, T0 + 0.5);
    ck_assert_int_eq(agent_handle(f.a, &m, &tm, T0 + 0.5), 0);
    proto_msg_init(&m);
    ck_assert_int_eq(agent_tick(f.a, T0 + 2), 1);
    ck_assert_int_eq(agent_report(f.a, T0 + 2, &m), 0); /* full: every bucket idle */
    ck_assert_int_eq(m.sparse, 0);
    ck_assert_uint_eq(m.count, 0);
    proto_msg_t hb;
    msg_to_n1(&hb, PROTO_HEARTBEAT);
    hb.peer_table = m.table;
    ck_assert_int_eq(agent_handle(f.a, &hb, NULL, T0 + 2.1), 0);
    /* green (controller index 0, ours 2) held at R 0 and L 0, idle */
    proto_tokens_rec_t held = {.bucket = 0, .r_tokens = 0, .l_tokens = 0};
    held_tokens(&f, T0 + 2.2, &held, hb.peer_table);
    expect_tokens(&f, __LINE__, 2, 0, 0);
    ck_assert_int_eq(agent_tick(f.a, T0 + 4), 1);
    ck_assert_int_eq(agent_report(f.a, T0 + 4, &m), 0);
    ck_assert_int_eq(m.sparse, 1);
    ck_assert_uint_eq(m.count, 0);
    /* released to a provisional 10 / 10: still nothing to say */
    proto_tokens_rec_t prov = {.bucket = 0, .r_tokens = 10, .l_tokens = 10};
    held_tokens(&f, T0 + 4.2, &prov, hb.peer_table);
    ck_assert_int_eq(agent_tick(f.a, T0 + 6), 1);
    ck_assert_int_eq(agent_report(f.a, T0 + 6, &m), 0);
    ck_assert_int_eq(m.sparse, 1);
    ck_assert_uint_eq(m.count, 0);
    /* held again, and one request waits: throttled with a queue, sent
     * (its queue and arrivals alone are within the threshold of 2) */
    held_tokens(&f, T0 + 6.2, &held, hb.peer_table);
    arrive(&f, 2, 1);
    ck_assert_int_eq(agent_tick(f.a, T0 + 8), 1);
    ck_assert_int_eq(agent_report(f.a, T0 + 8, &m), 0);
    ck_assert_int_eq(m.sparse, 1);
    ck_assert_uint_eq(m.count, 1);
    ck_assert_uint_eq(m.report[0].bucket, 2);
    ck_assert_uint_eq(m.report[0].queued, 1);
    proto_msg_clear(&m);
    fx_stop(&f);
}
END_TEST

/* A renewing tokens message numbered gseq (changed grants only), with
 * `based` of its n records bases; delivered at `now` in `period`. */
static void grants_msg(fx_t *f, uint64_t period, double now, uint64_t gseq,
                       const proto_tokens_rec_t *recs, size_t n, size_t based)
{
    proto_msg_t m;
    tokens_msg(f, &m, recs, n);
    m.gseq = gseq;
    m.renew = 1;
    m.based = based;
    agent_timing_t tm = tm_at(period, now);
    ck_assert_int_eq(agent_handle(f->a, &m, &tm, now), 0);
}

/* What a report says of "regrant" now. */
static int report_regrant(fx_t *f, double now)
{
    proto_msg_t m;
    proto_msg_init(&m);
    ck_assert_int_eq(agent_report(f->a, now, &m), 0);
    int r = m.regrant;
    proto_msg_clear(&m);
    return r;
}

START_TEST(test_agent_changed_grants)
{
    fx_t f;
    fx_start(&f, 1);
    proto_msg_t w;
    welcome_msg(&f, &w);
    w.renew = 1;
    agent_timing_t tm = tm_at(0, T0);
    ck_assert_int_eq(agent_handle(f.a, &w, &tm, T0), 0);
    /* controller index 1 = red (0), 0 = green (2) */
    proto_tokens_rec_t g1[] = {
        {.bucket = 1, .r_tokens = 10, .l_tokens = 20},
        {.bucket = 0, .r_tokens = 4, .flags = PROTO_TOK_UNLIMITED, .l_tokens = PROTO_UNLIMITED}};
    grants_msg(&f, 0, T0 + 0.1, 1, g1, 2, 2);
    expect_tokens(&f, __LINE__, 0, 10, 20);
    /* spent; the next period's renewing message leaves both out: renewed
     * as if re-sent, for that period only */
    ck_assert_int_eq(sched_set_tokens(f.s, 0, 1, 1, T0 + PERIOD, T0 + 1), 0);
    grants_msg(&f, 1, T0 + PERIOD + 0.1, 2, NULL, 0, 0);
    expect_tokens(&f, __LINE__, 0, 10, 20);
    expect_tokens(&f, __LINE__, 2, 4, SCHED_UNLIMITED);
    ck_assert(f.sn.last_until == T0 + 2 * PERIOD); /* holds to its period's end */
    ck_assert_uint_eq(st_of(&f).grants_renewed, 2);
    ck_assert_int_eq(report_regrant(&f, T0 + PERIOD + 0.2), 0);

    /* gseq 3 (red lowered to 3/4) is lost: the next renewing message sees
     * the gap and renews nothing (red keeps what it holds, which ends with
     * the period), and the next report asks for every grant again */
    ck_assert_int_eq(sched_set_tokens(f.s, 0, 1, 1, T0 + 2 * PERIOD, T0 + PERIOD + 1), 0);
    grants_msg(&f, 2, T0 + 2 * PERIOD + 0.1, 4, NULL, 0, 0);
    expect_tokens(&f, __LINE__, 0, 1, 1);
    ck_assert_uint_eq(st_of(&f).grant_gaps, 1);
    ck_assert_uint_eq(st_of(&f).grants_renewed, 2);
    ck_assert_int_eq(report_regrant(&f, T0 + 2 * PERIOD + 0.2), 1);
    ck_assert_int_eq(report_regrant(&f, T0 + 2 * PERIOD + 2.2), 0); /* once */

    /* the chain starts again: every grant sent is a base, renewed next */
    proto_tokens_rec_t g5[] = {{.bucket = 1, .r_tokens = 3, .l_tokens = 4}};
    grants_msg(&f, 2, T0 + 2 * PERIOD + 2.3, 5, g5, 1, 1);
    expect_tokens(&f, __LINE__, 0, 3, 4);
    ck_assert_int_eq(sched_set_tokens(f.s, 0, 0, 0, T0 + 3 * PERIOD, T0 + 2 * PERIOD + 3), 0);
    ck_assert_int_eq(sched_set_tokens(f.s, 2, 0, 0, T0 + 3 * PERIOD, T0 + 2 * PERIOD + 3), 0);
    grants_msg(&f, 3, T0 + 3 * PERIOD + 0.1, 6, NULL, 0, 0);
    expect_tokens(&f, __LINE__, 0, 3, 4);
    expect_tokens(&f, __LINE__, 2, 0, 0); /* green's base was of gseq 2: gone at the gap */

    /* a record after "based" (a provisional split) is no base: not renewed */
    proto_tokens_rec_t g7[] = {{.bucket = 1, .r_tokens = 5, .l_tokens = 6}};
    grants_msg(&f, 3, T0 + 3 * PERIOD + 0.2, 7, g7, 1, 0);
    expect_tokens(&f, __LINE__, 0, 5, 6);
    ck_assert_int_eq(sched_set_tokens(f.s, 0, 1, 1, T0 + 4 * PERIOD, T0 + 3 * PERIOD + 1), 0);
    grants_msg(&f, 4, T0 + 4 * PERIOD + 0.1, 8, NULL, 0, 0);
    expect_tokens(&f, __LINE__, 0, 1, 1);

    /* a record in a message that does not renew clears its base too */
    grants_msg(&f, 4, T0 + 4 * PERIOD + 0.2, 9, g5, 1, 1);
    proto_msg_t m;
    tokens_msg(&f, &m, g7, 1);
    m.gseq = 10; /* numbered, not renewing: a skipped round's bytes */
    tm = tm_at(4, T0 + 4 * PERIOD + 0.3);
    ck_assert_int_eq(agent_handle(f.a, &m, &tm, T0 + 4 * PERIOD + 0.3), 0);
    ck_assert_int_eq(sched_set_tokens(f.s, 0, 1, 1, T0 + 5 * PERIOD, T0 + 4 * PERIOD + 1), 0);
    grants_msg(&f, 5, T0 + 5 * PERIOD + 0.1, 11, NULL, 0, 0);
    expect_tokens(&f, __LINE__, 0, 1, 1);
    ck_assert_uint_eq(st_of(&f).grant_gaps, 1);
    fx_stop(&f);
}
END_TEST

/* A late (stale) renewing message is not applied, but its bases count:
 * the next renews them (no gap, no regrant). */
START_TEST(test_agent_changed_grants_stale_keeps_chain)
{
    fx_t f;
    fx_start(&f, 1);
    proto_msg_t w;
    welcome_msg(&f, &w);
    w.renew = 1;
    agent_timing_t tm = tm_at(3, T0 + 3 * PERIOD);
    ck_assert_int_eq(agent_handle(f.a, &w, &tm, T0 + 3 * PERIOD), 0);
    proto_tokens_rec_t g1[] = {{.bucket = 1, .r_tokens = 10, .l_tokens = 20}};
    grants_msg(&f, 3, T0 + 3 * PERIOD + 0.1, 1, g1, 1, 1);
    expect_tokens(&f, __LINE__, 0, 10, 20);
    proto_tokens_rec_t g2[] = {{.bucket = 1, .r_tokens = 7, .l_tokens = 8}};
    grants_msg(&f, 2, T0 + 3 * PERIOD + 1, 2, g2, 1, 1); /* an older period's: stale */
    expect_tokens(&f, __LINE__, 0, 10, 20);
    ck_assert_uint_eq(st_of(&f).tokens_stale, 1);
    grants_msg(&f, 4, T0 + 4 * PERIOD + 0.1, 3, NULL, 0, 0);
    expect_tokens(&f, __LINE__, 0, 7, 8); /* the stale message's base, renewed */
    ck_assert_uint_eq(st_of(&f).grant_gaps, 0);
    ck_assert_int_eq(report_regrant(&f, T0 + 4 * PERIOD + 0.2), 0);
    fx_stop(&f);
}
END_TEST

/* A controller whose welcome did not say renew: nothing is renewed. */
START_TEST(test_agent_changed_grants_not_welcomed)
{
    fx_t f;
    fx_welcomed(&f, 1);
    proto_tokens_rec_t g1[] = {{.bucket = 1, .r_tokens = 10, .l_tokens = 20}};
    grants_msg(&f, 0, T0 + 0.1, 1, g1, 1, 1);
    expect_tokens(&f, __LINE__, 0, 10, 20);
    ck_assert_int_eq(sched_set_tokens(f.s, 0, 1, 1, T0 + PERIOD, T0 + 1), 0);
    grants_msg(&f, 1, T0 + PERIOD + 0.1, 2, NULL, 0, 0);
    expect_tokens(&f, __LINE__, 0, 1, 1);
    ck_assert_uint_eq(st_of(&f).grants_renewed, 0);
    /* and the hello offers it by default */
    proto_msg_t h;
    ck_assert_int_eq(agent_hello(f.a, T0 + PERIOD + 0.2, &h), 0);
    ck_assert_int_eq(h.renew, 1);
    fx_stop(&f);
}
END_TEST


int main(void)
{
    const TTest *const tests[] = {
        test_agent_changed_grants, test_agent_changed_grants_stale_keeps_chain, test_agent_changed_grants_not_welcomed,test_agent_rules_from_the_leader,
                                  test_agent_sparse_reports,
                                  test_agent_sparse_tokens_net_of_prediction,
                                  test_agent_sparse_idle_hold_not_a_change,
                                  test_agent_hello_lists_the_table,
                                  test_agent_names_in_parts,
                                  test_agent_report_from_counters, test_agent_report_inflight,
                                  test_agent_tokens_applied_by_index,
                                  test_agent_net_of_served,
                                  test_agent_net_of_served_at_basis,
                                  test_agent_fallback_after_silence,
                                  test_agent_quiet_last_interval_falls_back_in_next_period,
                                  test_agent_resume,
                                  test_agent_stale_period,
                                  test_agent_period_roll_by_clock,
                                  test_agent_hello_timing_rolled_when_not_ticked,
                                  test_agent_watch_from_catches_up_quietly,
                                  test_agent_dropped_bucket_keeps_serving_with_own_weight,
                                  test_agent_new_rejects_bad_config,
                                  test_agent_static_keeps_limits,
                                  test_agent_shadow_from_table,
                                  test_agent_static_lease_then_limited_at_zero, test_agent_shares_and_fail_static,
        test_agent_static_holds_until_first_tokens,
                                  test_agent_static_grant_after_silence,
                                  test_agent_static_paced_from_entry,
                                  test_agent_grants_end_with_the_period,
                                  test_agent_rr_fallback_and_resume,
                                  test_agent_static_resume,
                                  test_agent_late_controller_no_fallback,
                                  test_agent_epoch_fencing, test_agent_follows_raised_epoch,
                                  test_agent_two_lone_controllers,
                                  test_agent_warns_once_a_period,
                                  test_agent_default_bucket_holds_unconfigured,
                                  test_agent_duplicate_name_holds_everything,
                                  test_agent_byte_tokens,
                                  test_agent_watch_from_byte_arrivals_once};
    return testlib_run_tests("agent", tests, sizeof tests / sizeof tests[0]);
}
