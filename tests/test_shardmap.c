/* test_shardmap.c - Check suite for controller/shardmap: a bucket's shard is stable and balanced, and changing K moves only the buckets whose shard changes (about 1/K of them, to or from the shard added or removed). */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "controller/shardmap.h"
#include "tests/testlib.h"

/* Computed by an independent Python rendering of the rule (shardmap.h). */
#define PINNED                                                                                 \
    {{"red", 2, 0},      {"red", 4, 0},      {"red", 8, 0},      {"red", 64, 62},              \
     {"blue", 2, 1},     {"blue", 4, 3},     {"blue", 8, 7},     {"blue", 64, 7},              \
     {"tenant-a/vol1", 2, 0}, {"tenant-a/vol1", 4, 0}, {"tenant-a/vol1", 8, 4},                \
     {"tenant-a/vol1", 64, 15}, {"b000000", 2, 0}, {"b000000", 4, 2}, {"b000000", 8, 5},       \
     {"b000000", 64, 46}, {"b999999", 2, 1}, {"b999999", 4, 3}, {"b999999", 8, 3},             \
     {"b999999", 64, 53}, {"default", 2, 0}, {"default", 4, 0}, {"default", 8, 4},             \
     {"default", 64, 48}}

#define NB 100000

static char **names_make(int n)
{
    char **v = calloc((size_t)n, sizeof *v);
    ck_assert_ptr_nonnull(v);
    for (int i = 0; i < n; i++) {
        v[i] = malloc(24);
        ck_assert_ptr_nonnull(v[i]);
        snprintf(v[i], 24, "b%06d", i);
    }
    return v;
}

static void names_free(char **v, int n)
{
    for (int i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

/* The rule is fixed for good: these values must never change (bqos-ctl,
 * the nodes and every controller compute them on their own). */
START_TEST(test_shardmap_pinned)
{
    ck_assert_uint_eq(shardmap_name_hash(""), UINT64_C(14695981039346656037));
    ck_assert_uint_eq(shardmap_name_hash("a"), UINT64_C(0xaf63dc4c8601ec8c));
    ck_assert_int_eq(shardmap_of("anything", 1), 0);
    static const struct {
        const char *name;
        int k, shard;
    } pin[] = PINNED;
    for (size_t i = 0; i < sizeof pin / sizeof pin[0]; i++)
        ck_assert_msg(shardmap_of(pin[i].name, pin[i].k) == pin[i].shard, "%s/%d: %d not %d",
                      pin[i].name, pin[i].k, shardmap_of(pin[i].name, pin[i].k), pin[i].shard);
}
END_TEST

/* 100,000 names over 8 shards: each within 3% of 1/8. */
START_TEST(test_shardmap_balanced)
{
    char **v = names_make(NB);
    for (int k = 2; k <= 16; k *= 2) {
        int cnt[16] = {0};
        for (int i = 0; i < NB; i++) {
            int s = shardmap_of(v[i], k);
            ck_assert_int_ge(s, 0);
            ck_assert_int_lt(s, k);
            cnt[s]++;
        }
        for (int s = 0; s < k; s++)
            ck_assert_msg(cnt[s] > NB / k * 0.97 && cnt[s] < NB / k * 1.03, "k %d shard %d: %d",
                          k, s, cnt[s]);
    }
    names_free(v, NB);
}
END_TEST

/* K -> K + 1 moves only buckets to the new shard, about 1 / (K + 1) of
 * them; K + 1 -> K only the removed shard's, back where they were. */
START_TEST(test_shardmap_moves_few)
{
    char **v = names_make(NB);
    int *from = calloc(NB, sizeof *from), *to = calloc(NB, sizeof *to);
    ck_assert_ptr_nonnull(from);
    ck_assert_ptr_nonnull(to);
    for (int k = 1; k < 12; k++) {
        long moved = shardmap_moves((const char *const *)v, NB, k, k + 1, from, to);
        ck_assert_int_ge(moved, 0);
        for (int i = 0; i < NB; i++)
            if (from[i] != to[i])
                ck_assert_int_eq(to[i], k);
        double share = (double)moved / NB, want = 1.0 / (k + 1);
        ck_assert_msg(share > want * 0.95 && share < want * 1.05, "k %d: %.4f moved", k, share);
        long back = shardmap_moves((const char *const *)v, NB, k + 1, k, from, to);
        ck_assert_int_eq(back, moved);
        for (int i = 0; i < NB; i++)
            if (from[i] != to[i])
                ck_assert_int_eq(from[i], k);
    }
    /* 8 -> 4 moves only the buckets of shards 4..7. */
    long m = shardmap_moves((const char *const *)v, NB, 8, 4, from, to);
    for (int i = 0; i < NB; i++)
        ck_assert(from[i] == to[i] || from[i] >= 4);
    ck_assert_int_gt(m, NB * 0.45);
    ck_assert_int_lt(m, NB * 0.55);
    free(from);
    free(to);
    names_free(v, NB);
}
END_TEST

START_TEST(test_shardmap_bad_arguments)
{
    ck_assert_int_eq(shardmap_of(NULL, 4), -EINVAL);
    ck_assert_int_eq(shardmap_of("x", 0), -EINVAL);
    ck_assert_int_eq(shardmap_of("x", SHARDMAP_MAX + 1), -EINVAL);
    ck_assert_int_ge(shardmap_of("x", SHARDMAP_MAX), 0);
    const char *v[] = {"a", NULL};
    ck_assert_int_eq(shardmap_moves(v, 2, 1, 2, NULL, NULL), -EINVAL);
    ck_assert_int_eq(shardmap_moves(v, 1, 0, 2, NULL, NULL), -EINVAL);
    ck_assert_int_eq(shardmap_moves(v, 1, 3, 3, NULL, NULL), 0);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {test_shardmap_pinned, test_shardmap_balanced,
                                  test_shardmap_moves_few, test_shardmap_bad_arguments};
    return testlib_run_tests("shardmap", tests, sizeof tests / sizeof tests[0]);
}
