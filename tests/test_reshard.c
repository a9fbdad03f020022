/* test_reshard.c - Check suite for controller/reshard: a change from 1 to 2 shards on two real ctrl_t's: until the change's period the old shard grants the bucket that moves and the new shard grants nothing; from that period's first round the old shard grants it nothing and the new one computes it within its limit; a bucket that stays is granted by its shard throughout; configurations learnt only forward. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/shardgen.h"
#include "common/shardmap.h"
#include "controller/ctrl.h"
#include "controller/reshard.h"
#include "tests/testlib.h"

#define PERIOD_MS 1000
#define BASE_MS INT64_C(1765000000000) /* period 1's wall start */
#define CAP 10000
#define LIMIT 300

static char moving[16], staying[16];

/* A name that goes from shard 0 (K = 1) to shard 1 (K = 2), and one that
 * stays in shard 0. */
static void pick_names(void)
{
    moving[0] = staying[0] = '\0';
    for (int i = 0; !moving[0] || !staying[0]; i++) {
        char n[16];
        snprintf(n, sizeof n, "b%d", i);
        if (shardmap_of(n, 2) == 1 && !moving[0])
            snprintf(moving, sizeof moving, "%s", n);
        if (shardmap_of(n, 2) == 0 && !staying[0])
            snprintf(staying, sizeof staying, "%s", n);
    }
}

static bucketfile_t *whole_table(void)
{
    bucketfile_t *bf = bucketfile_new();
    ck_assert_ptr_nonnull(bf);
    bucketfile_bucket_t x = {.reservation = 100, .limit = LIMIT, .weight = 1};
    x.name = moving;
    ck_assert_int_eq(bucketfile_set(bf, &x, NULL), 0);
    x.name = staying;
    x.limit = BUCKETFILE_NO_LIMIT;
    ck_assert_int_eq(bucketfile_set(bf, &x, NULL), 0);
    return bf;
}

/* Gives shard `c` its part of `whole` under rs's map. */
static void give_part(const reshard_t *rs, ctrl_t *c, const bucketfile_t *whole)
{
    bucketfile_t *part = NULL;
    ck_assert_int_eq(reshard_part(rs, whole, &part), 0);
    ck_assert_int_eq(ctrl_set_buckets(c, part), 0);
    bucketfile_destroy(&part);
}

/* Follows what shard c's round sent node 0 for bucket `name` into *held
 * (R + L of its last record; -1: none since the shard's last table).
 * Tokens messages carry only the grants that changed (the node renews the
 * others), so the grant a node holds is the last record's. */
static void follow(const ctrl_t *c, const char *name, int64_t *held)
{
    const char *const *names;
    size_t nt;
    ctrl_table(c, &names, &nt);
    const proto_tokens_rec_t *t;
    size_t m = ctrl_node_tokens(c, 0, &t);
    for (size_t i = 0; i < m; i++)
        if (t[i].bucket < nt && strcmp(names[t[i].bucket], name) == 0)
            *held = t[i].l_tokens == CTRL_UNLIMITED ? CTRL_UNLIMITED
                                                    : t[i].r_tokens + t[i].l_tokens;
}

/* 1 -> 2 shards under load: every round of periods 1..6, the change's
 * period P = 4 (begun in period 1, two whole periods ahead). */
static void run(int switch_old, int switch_new)
{
    pick_names();
    bucketfile_t *whole = whole_table();
    shardgen_t g = shardgen_steady(1);
    ck_assert_int_eq(shardgen_begin(&g, 2, BASE_MS + 300, PERIOD_MS, 2), 0);
    const uint64_t P = (uint64_t)((g.from_ms - BASE_MS) / PERIOD_MS) + 1;
    ck_assert_uint_eq(P, 4);
    ctrl_config_t cc = ctrl_config_default();
    cc.skip_rel = 0;
    cc.no_queue_lift = 1;
    ctrl_t *sh[2];
    reshard_t rs[2];
    /* the node reports to each shard the buckets of either map (it knows
     * the change): the new shard sees the moving bucket's demand early */
    const char *names[2][2];
    size_t nn[2] = {0, 0};
    for (int s = 0; s < 2; s++) {
        ck_assert_ptr_nonnull(sh[s] = ctrl_new(&cc));
        shardgen_t start = shardgen_steady(1);
        ck_assert_int_eq(reshard_init(&rs[s], s, &start), 0);
        ck_assert_int_eq(reshard_learn(&rs[s], &g), 1);
        give_part(&rs[s], sh[s], whole);
        if (shardgen_either(&g, moving, s))
            names[s][nn[s]++] = moving;
        if (shardgen_either(&g, staying, s))
            names[s][nn[s]++] = staying;
        ck_assert_int_eq(ctrl_node_hello(sh[s], "n0", 0, CAP, 1, names[s], nn[s]), 0);
    }
    ck_assert(reshard_idle(&rs[1]));
    ck_assert_int_eq(nn[0], 2);
    ck_assert_int_eq(nn[1], 1);
    int64_t held[2][2] = {{-1, -1}, {-1, -1}}; /* [shard][moving, staying] */
    for (uint64_t p = 1; p <= 6; p++) {
        const int64_t mid = BASE_MS + (int64_t)(p - 1) * PERIOD_MS + PERIOD_MS / 2;
        for (int s = 0; s < 2; s++) {
            int may = s == 0 ? switch_old : switch_new;
            if (may && reshard_due(&rs[s], mid)) {
                ck_assert_uint_eq(p, P); /* due at P's first round only */
                ck_assert_int_eq(reshard_switch(&rs[s], mid), 1);
                give_part(&rs[s], sh[s], whole);
                held[s][0] = held[s][1] = -1; /* a new table: the node forgets every base */
            }
        }
        for (uint32_t k = 0; k < 5; k++) {
            for (int s = 0; s < 2; s++) {
                ck_assert_int_eq(ctrl_round_begin(sh[s], p, k, 0), 0);
                proto_report_rec_t recs[2];
                for (size_t j = 0; j < nn[s]; j++)
                    recs[j] = (proto_report_rec_t){
                        .bucket = (uint32_t)j, .queued = 40, .arrivals_interval = 400,
                        .arrivals_period = 400 * (k + 1),
                        .served_r = k * 60, .l_left = PROTO_UNLIMITED};
                ck_assert_int_eq(ctrl_node_report(sh[s], 0, p, k, 1, 0,
                                                  (uint64_t)(CAP * 0.2 * (k + 1) * 0.5),
                                                  0.2 * (k + 1) * 0.5, recs, nn[s]),
                                 0);
                ctrl_result_t res;
                ck_assert_int_eq(ctrl_compute(sh[s], &res), 0);
                follow(sh[s], moving, &held[s][0]);
                follow(sh[s], staying, &held[s][1]);
            }
            int64_t old_m = held[0][0], new_m = held[1][0], old_s = held[0][1];
            ck_assert_msg(old_s > 0, "period %llu interval %u: the staying bucket not granted",
                          (unsigned long long)p, k);
            ck_assert_int_eq(held[1][1], -1);
            ck_assert_int_eq(ctrl_bucket_find(sh[1], staying), -ENOENT);
            if (p < P) {
                ck_assert_msg(old_m > 0 && old_m <= LIMIT,
                              "period %llu interval %u: old shard granted %lld",
                              (unsigned long long)p, k, (long long)old_m);
                ck_assert_msg(new_m == -1, "period %llu: the new shard granted %lld before P",
                              (unsigned long long)p, (long long)new_m);
            } else {
                ck_assert_msg(old_m <= 0, "period %llu interval %u: the old shard still grants "
                              "the moved bucket %lld at or after P",
                              (unsigned long long)p, k, (long long)old_m);
                ck_assert_int_eq(ctrl_bucket_find(sh[0], moving), -ENOENT);
                ck_assert_msg(new_m > 0 && new_m <= LIMIT,
                              "period %llu interval %u: the new shard granted %lld",
                              (unsigned long long)p, k, (long long)new_m);
            }
        }
    }
    ck_assert_uint_eq(rs[0].switches, 1);
    ck_assert_uint_eq(rs[1].switches, 1);
    ck_assert(!reshard_idle(&rs[1]));
    for (int s = 0; s < 2; s++)
        ctrl_destroy(&sh[s]);
    bucketfile_destroy(&whole);
}

START_TEST(test_reshard_switch_at_period)
{
    run(1, 1);
}
END_TEST

START_TEST(test_reshard_learn_forward)
{
    reshard_t rs;
    shardgen_t g = shardgen_steady(2);
    ck_assert_int_eq(reshard_init(&rs, 2, &g), 0);
    ck_assert(reshard_idle(&rs));
    ck_assert(!reshard_mine(&rs, "x"));
    ck_assert_int_eq(reshard_learn(&rs, &g), 1); /* the first: known now */
    ck_assert_int_eq(reshard_learn(&rs, &g), 0);
    shardgen_t n = g;
    ck_assert_int_eq(shardgen_begin(&n, 3, 10000, 1000, 2), 0);
    ck_assert_int_eq(reshard_learn(&rs, &n), 1);
    ck_assert_int_eq(reshard_learn(&rs, &g), -ESTALE); /* a lagging read: kept */
    ck_assert_uint_eq(rs.stale, 1);
    ck_assert_int_eq(rs.g.next_k, 3);
    ck_assert(!reshard_due(&rs, 12500));
    ck_assert(reshard_due(&rs, 13500));
    shardgen_t settled = n;
    ck_assert_int_eq(shardgen_settle(&settled, 13000), 1);
    ck_assert_int_eq(reshard_learn(&rs, &settled), 1); /* gen 2 in force */
    ck_assert_int_eq(reshard_learn(&rs, &n), -ESTALE);
    ck_assert(reshard_due(&rs, 0)); /* gen 2 whatever the time */
    ck_assert_int_eq(reshard_switch(&rs, 13500), 1);
    ck_assert(!reshard_idle(&rs));
    ck_assert(!reshard_due(&rs, 13500));
    /* a new shard's controller assumed K = 3 (its --shards); the key says
     * 2 with a change to 3 under way: taken, it idles until the change */
    reshard_t nr;
    shardgen_t three = shardgen_steady(3);
    ck_assert_int_eq(reshard_init(&nr, 2, &three), 0);
    ck_assert(!reshard_idle(&nr));
    ck_assert_int_eq(reshard_learn(&nr, &n), 1);
    ck_assert(reshard_due(&nr, 12500));
    ck_assert_int_eq(reshard_switch(&nr, 12500), 1);
    ck_assert(reshard_idle(&nr));
    ck_assert(reshard_due(&nr, 13500));
    shardgen_t bad = g;
    bad.k = 0;
    ck_assert_int_eq(reshard_learn(&rs, &bad), -EINVAL);
    ck_assert_int_eq(reshard_init(&rs, -1, &g), -EINVAL);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {test_reshard_switch_at_period, test_reshard_learn_forward};
    return testlib_run_tests("reshard", tests, sizeof tests / sizeof tests[0]);
}
