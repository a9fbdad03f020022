/* test_admission.c - Check suite for controller/admission: aggregate and per-bucket capacity constraints. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "controller/admission.h"
#include "tests/testlib.h"

static bucketfile_t *load(const char *t)
{
    bucketfile_t *bf = NULL;
    ck_assert_int_eq(bucketfile_parse(t, strlen(t), NULL, &bf, NULL), 0);
    return bf;
}

/* red sits on one 20,000 IOPS server; blue's placement is unknown. */
static double placement(const char *name, void *arg)
{
    (void)arg;
    return strcmp(name, "red") == 0 ? 20000 : -1;
}

START_TEST(test_admission_mode)
{
    TESTLIB_CHECK_ENUM_PARSER(admission_parse_mode, admission_mode_t, "maybe",
                              {"warn", ADMISSION_WARN}, {"enforce", ADMISSION_ENFORCE});
}
END_TEST

START_TEST(test_admission_aggregate)
{
    bucketfile_t *bf = load("{\"buckets\":[{\"name\":\"red\",\"reservation\":15000},"
                            "{\"name\":\"blue\",\"reservation\":30000}]}");
    char msg[512];
    admission_view_t v = {.total_capacity = 60000};
    ck_assert_int_eq(admission_check(bf, &v, msg, sizeof msg), 0);
    ck_assert_str_eq(msg, "");
    v.total_capacity = 44999;
    ck_assert_int_eq(admission_check(bf, &v, msg, sizeof msg), -EDQUOT);
    ck_assert_msg(strstr(msg, "total reservation 45000"), "%s", msg);
    /* Nothing known: passes, says so. */
    v.total_capacity = 0;
    ck_assert_int_eq(admission_check(bf, &v, msg, sizeof msg), 0);
    ck_assert_msg(strstr(msg, "unknown"), "%s", msg);
    ck_assert_int_eq(admission_check(bf, NULL, NULL, 0), 0);
    bucketfile_destroy(&bf);
}
END_TEST

START_TEST(test_admission_local)
{
    bucketfile_t *bf = load("{\"buckets\":[{\"name\":\"red\",\"reservation\":25000},"
                            "{\"name\":\"blue\",\"reservation\":30000}]}");
    char msg[512];
    admission_view_t v = {.total_capacity = 100000, .bucket_capacity = placement};
    ck_assert_int_eq(admission_check(bf, &v, msg, sizeof msg), -EDQUOT);
    ck_assert_msg(strstr(msg, "bucket red") && !strstr(msg, "blue"), "%s", msg);
    ck_assert_int_eq(admission_check(bf, &v, NULL, 0), -EDQUOT);
    bucketfile_destroy(&bf);
    bf = load("{\"buckets\":[{\"name\":\"red\",\"reservation\":20000}]}");
    ck_assert_int_eq(admission_check(bf, &v, msg, sizeof msg), 0);
    bucketfile_destroy(&bf);
}
END_TEST

/* red's servers do 100 MB/s; blue's placement is unknown. */
static double byte_placement(const char *name, void *arg)
{
    (void)arg;
    return strcmp(name, "red") == 0 ? 100e6 : -1;
}

/* Byte reservations are held to the byte capacities as reservations are
 * to the IO ones, each message naming its unit; while the byte capacity is
 * unknown they pass with a note; IOs and bytes add up to one list. */
START_TEST(test_admission_bytes)
{
    bucketfile_t *bf = load("{\"buckets\":[{\"name\":\"red\",\"reservation\":100,"
                            "\"reservation_bytes\":150000000},"
                            "{\"name\":\"blue\",\"reservation\":100,"
                            "\"reservation_bytes\":50000000}]}");
    char msg[512];
    admission_view_t v = {.total_capacity = 1000};
    ck_assert_int_eq(admission_check(bf, &v, msg, sizeof msg), 0);
    ck_assert_msg(strstr(msg, "byte capacity unknown"), "%s", msg);
    v.total_byte_capacity = 300e6;
    ck_assert_int_eq(admission_check(bf, &v, msg, sizeof msg), 0);
    ck_assert_str_eq(msg, "");
    v.bucket_byte_capacity = byte_placement;
    ck_assert_int_eq(admission_check(bf, &v, msg, sizeof msg), -EDQUOT);
    ck_assert_str_eq(msg, "bucket red: byte reservation 150000000 bytes/s exceeds the 100000000 "
                          "bytes/s of the servers it is placed on");
    v.total_byte_capacity = 199e6;
    v.total_capacity = 150;
    ck_assert_int_eq(admission_check(bf, &v, msg, sizeof msg), -EDQUOT);
    ck_assert_str_eq(msg, "total reservation 200 IOs/s exceeds the cluster's estimated capacity "
                          "150 IOs/s; total byte reservation 200000000 bytes/s exceeds the "
                          "cluster's estimated byte capacity 199000000 bytes/s; bucket red: byte "
                          "reservation 150000000 bytes/s exceeds the 100000000 bytes/s of the "
                          "servers it is placed on");
    bucketfile_destroy(&bf);
}
END_TEST

/* Nested buckets: children's reservations over the parent's limit are a
 * violation whatever the capacity (IOs and bytes); a parent's reservation
 * below its children's is noted, not refused; the aggregate counts a tree
 * once (max of the parent's floor and its children's needs). */
START_TEST(test_admission_nested)
{
    char msg[600];
    bucketfile_t *bf = load("{\"buckets\":[{\"name\":\"t\",\"reservation\":5000,\"limit\":8000},"
                            "{\"name\":\"a\",\"reservation\":3000,\"parent\":\"t\"},"
                            "{\"name\":\"b\",\"reservation\":4000,\"parent\":\"t\"},"
                            "{\"name\":\"x\",\"reservation\":1000}]}");
    admission_view_t v = {.total_capacity = 8000};
    /* Needs max(5000, 7000) + 1000 = 8000, not 13,000. */
    ck_assert_int_eq(admission_check(bf, &v, msg, sizeof msg), 0);
    ck_assert_msg(strstr(msg, "note: bucket t: reservation 5000 IOs/s is below its children's "
                             "7000"), "%s", msg);
    v.total_capacity = 7999;
    ck_assert_int_eq(admission_check(bf, &v, msg, sizeof msg), -EDQUOT);
    ck_assert_msg(strstr(msg, "total reservation 8000"), "%s", msg);
    bucketfile_destroy(&bf);
    bf = load("{\"buckets\":[{\"name\":\"t\",\"reservation\":0,\"limit\":6000,"
              "\"limit_bytes\":1000},"
              "{\"name\":\"a\",\"reservation\":3000,\"parent\":\"t\",\"reservation_bytes\":600},"
              "{\"name\":\"b\",\"reservation\":4000,\"parent\":\"t\",\"reservation_bytes\":600}]}");
    ck_assert_int_eq(admission_check(bf, NULL, msg, sizeof msg), -EDQUOT);
    ck_assert_msg(strstr(msg, "bucket t: its children's reservations add up to 7000 IOs/s, over "
                             "its limit 6000 IOs/s") &&
                      strstr(msg, "byte reservations add up to 1200 bytes/s"), "%s", msg);
    bucketfile_destroy(&bf);
}
END_TEST

/* A change judged from running sums: the same verdict on the aggregate
 * as a full check of the changed table, in both units, after any number
 * of changes; the local constraint of the changed bucket only. */
START_TEST(test_admission_change_by_sums)
{
    bucketfile_t *bf = load("{\"buckets\":[{\"name\":\"red\",\"reservation\":15000},"
                            "{\"name\":\"blue\",\"reservation\":30000,"
                            "\"reservation_bytes\":1000000}]}");
    admission_sums_t s;
    admission_sums_init(&s, bf);
    char msg[512], full[512];
    admission_view_t v = {.total_capacity = 60000, .total_byte_capacity = 5e6,
                          .bucket_capacity = placement};
    for (int i = 0; i < 200; i++) {
        /* green grows, blue's bytes move, red goes and comes back */
        bucketfile_bucket_t g = {.reservation = 100 * i, .limit = BUCKETFILE_NO_LIMIT,
                                 .weight = 1, .reservation_bytes = 1000 * i};
        g.name = "green";
        int k = bucketfile_find(bf, "green");
        if (k >= 0)
            admission_sums_add(&s, bucketfile_get(bf, (size_t)k), -1);
        admission_sums_add(&s, &g, 1);
        ck_assert_int_eq(bucketfile_set(bf, &g, NULL), 0);
        int rc = admission_check_change(&s, &g, &v, msg, sizeof msg);
        ck_assert_int_eq(rc, admission_check(bf, &v, full, sizeof full));
        ck_assert_str_eq(msg, full);
        if (i % 50 == 25) {
            k = bucketfile_find(bf, "red");
            bucketfile_bucket_t red = *bucketfile_get(bf, (size_t)k);
            admission_sums_add(&s, &red, -1);
            bucketfile_remove(bf, "red");
            ck_assert_int_eq(admission_check_change(&s, NULL, &v, msg, sizeof msg),
                             admission_check(bf, &v, full, sizeof full));
            admission_sums_add(&s, &red, 1);
            bucketfile_set(bf, &red, NULL);
        }
    }
    /* The local constraint: red past its one server. */
    bucketfile_bucket_t red = {.reservation = 25000, .limit = BUCKETFILE_NO_LIMIT, .weight = 1};
    red.name = "red";
    v.total_capacity = 1e9;
    v.total_byte_capacity = 1e12;
    ck_assert_int_eq(admission_check_change(&s, &red, &v, msg, sizeof msg), -EDQUOT);
    ck_assert_msg(strstr(msg, "bucket red"), "%s", msg);
    /* Exact at the largest rates a million buckets can hold. */
    admission_sums_t big = {0};
    bucketfile_bucket_t m = {.reservation = BUCKETFILE_MAX_RATE,
                             .reservation_bytes = BUCKETFILE_MAX_BYTES};
    for (int i = 0; i < 1000000; i++)
        admission_sums_add(&big, &m, 1);
    for (int i = 0; i < 1000000; i++)
        admission_sums_add(&big, &m, -1);
    ck_assert(big.reservation == 0 && big.reservation_bytes == 0 && big.with_bytes == 0);
    bucketfile_destroy(&bf);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {test_admission_mode, test_admission_aggregate,
                                  test_admission_local, test_admission_bytes,
                                  test_admission_nested, test_admission_change_by_sums};
    return testlib_run_tests("admission", tests, sizeof tests / sizeof tests[0]);
}
