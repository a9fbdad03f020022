/* test_conf.c - Check suite for controller/daemon/conf: a set parked until its journal line is durable and answered through the callback, a failed write undone newest first, busy past PARKED_MAX, refusals leaving the table, the stop's answers, replace and reload through the file, the dry run, etcd's stale tables, and a shard's part of ctrl. */
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "common/bucketfile.h"
#include "common/log.h"
#include "common/shardmap.h"
#include "controller/daemon/conf.h"
#include "tests/testlib.h"

static const char table[] =
    "{\"buckets\":[{\"name\":\"red\",\"reservation\":100,\"limit\":1000,\"weight\":2},"
    "{\"name\":\"blue\",\"reservation\":50}]}\n";

/* What the reply callback was given, in order. */
#define SEEN_MAX 64
typedef struct {
    int n;
    char text[SEEN_MAX][64]; /* the held reply, or "code:" and the code */
    int nenv[SEEN_MAX];
} seen_t;

static void on_reply(void *arg, const parked_env_t *to, char *held, const char *code,
                     const char *msg)
{
    seen_t *s = arg;
    ck_assert_int_lt(s->n, SEEN_MAX);
    ck_assert(code ? held == NULL && msg != NULL : 1);
    if (code)
        snprintf(s->text[s->n], sizeof s->text[0], "code:%s", code);
    else
        snprintf(s->text[s->n], sizeof s->text[0], "%s", held ? held : "(null)");
    s->nenv[s->n++] = to->nenv;
    free(held);
}

/* One controller's state: a ctrl with two nodes (capacity to admit the
 * table), the bucket file in /tmp, a conf_t over them. */
typedef struct {
    char path[64];
    ctrl_t *ctrl;
    conf_t *c;
    seen_t seen;
} world_t;

static void world_open(world_t *w, admission_mode_t mode, int shards, int shard)
{
    memset(w, 0, sizeof *w);
    snprintf(w->path, sizeof w->path, "%s", testlib_temp_file(table));
    ctrl_config_t cc = ctrl_config_default();
    ck_assert_ptr_nonnull(w->ctrl = ctrl_new(&cc));
    const char *names[] = {"red", "blue"};
    ck_assert_int_ge(ctrl_node_hello(w->ctrl, "n1", 1, 1000, 1, names, 2), 0);
    ck_assert_int_ge(ctrl_node_hello(w->ctrl, "n2", 2, 1000, 1, names, 2), 0);
    bucketfile_t *bf = NULL;
    jsonloc_err_t err;
    ck_assert_int_eq(bucketfile_load(w->path, &bf, &err), 0);
    w->c = conf_new(&(conf_config_t){.path = w->path, .mode = mode, .ctrl = w->ctrl,
                                     .shards = shards, .shard = shard, .reply = on_reply,
                                     .arg = &w->seen},
                    bf);
    ck_assert_ptr_nonnull(w->c);
    ck_assert_int_eq(conf_set_ctrl_buckets(w->c, conf_table(w->c)), 0);
}

static void world_close(world_t *w)
{
    conf_destroy(&w->c);
    ck_assert_ptr_null(w->c);
    ctrl_destroy(&w->ctrl);
    char jp[sizeof w->path + 16];
    snprintf(jp, sizeof jp, "%s.journal", w->path);
    unlink(jp);
    unlink(w->path);
}

/* A bucket `name` with reservation r (no limit). */
static bucketfile_bucket_t bucket(const char *name, int64_t r)
{
    return (bucketfile_bucket_t){.name = name, .reservation = r,
                                 .limit = BUCKETFILE_NO_LIMIT, .weight = 1};
}

/* Sets bucket name/r; expects it parked, its reply `reply` held behind an
 * envelope of one frame. */
static void set_parked(world_t *w, const char *name, int64_t r, const char *reply)
{
    char msg[768];
    int parked = -1;
    bucketfile_bucket_t b = bucket(name, r);
    ck_assert_ptr_null(conf_set(w->c, &b, &parked, msg, sizeof msg));
    ck_assert_int_eq(parked, 1);
    parked_env_t env = {.nenv = 1, .envl = {1}, .fd = -1};
    conf_hold_reply(w->c, strdup(reply), &env);
}

/* The reservation of bucket `name` in the table in force; -1: absent. */
static int64_t reservation(const world_t *w, const char *name)
{
    const bucketfile_t *bf = conf_table(w->c);
    int i = bucketfile_find(bf, name);
    return i < 0 ? -1 : bucketfile_get(bf, (size_t)i)->reservation;
}

START_TEST(test_conf_set_parked_until_durable)
{
    world_t w;
    world_open(&w, ADMISSION_ENFORCE, 0, 0);
    ck_assert_int_eq(conf_journal_fd(w.c), -1); /* opened at the first change */
    set_parked(&w, "green", 30, "R-green");
    ck_assert_uint_eq(conf_waiting(w.c), 1);
    ck_assert_int_ge(conf_journal_fd(w.c), 0);
    /* made at once, to the table and to ctrl; answered only once durable */
    ck_assert_int_eq(reservation(&w, "green"), 30);
    ck_assert_int_ge(ctrl_bucket_find(w.ctrl, "green"), 0);
    ck_assert_int_eq(w.seen.n, 0);
    ck_assert_uint_eq(conf_settle(w.c, -1), 0);
    ck_assert_int_eq(w.seen.n, 1);
    ck_assert_str_eq(w.seen.text[0], "R-green");
    ck_assert_int_eq(w.seen.nenv[0], 1);
    bucketjournal_stats_t st;
    ck_assert_int_eq(conf_journal_stats(w.c, &st), 0);
    ck_assert_uint_eq(st.appends, 1);
    /* the file and its journal hold it */
    bucketfile_t *back = NULL;
    jsonloc_err_t err;
    ck_assert_int_eq(bucketfile_load(w.path, &back, &err), 0);
    ck_assert_int_ge(bucketfile_find(back, "green"), 0);
    bucketfile_destroy(&back);
    /* a removal the same way */
    char msg[768];
    int parked = 0;
    ck_assert_ptr_null(conf_remove(w.c, "red", &parked, msg, sizeof msg));
    ck_assert_int_eq(parked, 1);
    conf_hold_reply(w.c, strdup("R-red"), &(parked_env_t){.fd = -1});
    ck_assert_int_eq(reservation(&w, "red"), -1);
    ck_assert_int_lt(ctrl_bucket_find(w.ctrl, "red"), 0);
    conf_settle(w.c, -1);
    ck_assert_int_eq(w.seen.n, 2);
    ck_assert_str_eq(w.seen.text[1], "R-red");
    ck_assert_int_eq(w.seen.nenv[1], 0);
    ck_assert_str_eq(conf_remove(w.c, "red", &parked, msg, sizeof msg), "not_found");
    ck_assert_int_eq(parked, 0);
    ck_assert_uint_eq(conf_waiting(w.c), 0);
    world_close(&w);
}
END_TEST

/* A write the disk refuses (the file size limit: EFBIG) fails its line and
 * every one queued after it: each change is undone, newest first, in the
 * table and in ctrl, and answered "io". */
START_TEST(test_conf_failed_write_undone)
{
    world_t w;
    world_open(&w, ADMISSION_ENFORCE, 0, 0);
    set_parked(&w, "green", 30, "R1");
    conf_settle(w.c, -1);
    ck_assert_str_eq(w.seen.text[0], "R1");
    char jp[sizeof w.path + 16];
    snprintf(jp, sizeof jp, "%s.journal", w.path);
    FILE *f = fopen(jp, "r");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fclose(f);
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit rl = {.rlim_cur = (rlim_t)size, .rlim_max = RLIM_INFINITY};
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &rl), 0); /* (this forked test only) */
    set_parked(&w, "green", 40, "R2"); /* a change of green */
    ck_assert_int_eq(reservation(&w, "green"), 40);
    /* a new bucket on top of it: parked, or refused at once if the writer
     * failed green's line already (the journal takes no line after a
     * failure until it is collected) */
    char msg[768];
    int parked = -1;
    bucketfile_bucket_t b = bucket("white", 5);
    const char *code = conf_set(w.c, &b, &parked, msg, sizeof msg);
    if (code) {
        ck_assert_str_eq(code, "io");
        ck_assert_int_eq(parked, 0);
    } else {
        ck_assert_int_eq(reservation(&w, "white"), 5);
        conf_hold_reply(w.c, strdup("R3"), &(parked_env_t){.nenv = 1, .envl = {1}, .fd = -1});
    }
    ck_assert_uint_eq(conf_settle(w.c, -1), 0);
    rl.rlim_cur = RLIM_INFINITY; /* Check's own report is a file too */
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
    ck_assert_int_eq(w.seen.n, code ? 2 : 3);
    ck_assert_str_eq(w.seen.text[1], "code:io");
    if (!code)
        ck_assert_str_eq(w.seen.text[2], "code:io");
    ck_assert_int_eq(reservation(&w, "green"), 30); /* as it was */
    ck_assert_int_eq(reservation(&w, "white"), -1);
    ck_assert_int_lt(ctrl_bucket_find(w.ctrl, "white"), 0);
    ck_assert_int_ge(ctrl_bucket_find(w.ctrl, "green"), 0);
    world_close(&w);
}
END_TEST

START_TEST(test_conf_busy_past_max)
{
    world_t w;
    world_open(&w, ADMISSION_ENFORCE, 0, 0);
    char name[32], msg[768];
    for (int i = 0; i < PARKED_MAX; i++) { /* not collected: they stay parked */
        snprintf(name, sizeof name, "b%d", i);
        set_parked(&w, name, 1, name);
    }
    ck_assert_uint_eq(conf_waiting(w.c), PARKED_MAX);
    int parked = -1;
    bucketfile_bucket_t b = bucket("one-more", 1);
    ck_assert_str_eq(conf_set(w.c, &b, &parked, msg, sizeof msg), "busy");
    ck_assert_int_eq(parked, 0);
    ck_assert_ptr_nonnull(strstr(msg, "busy"));
    ck_assert_int_eq(reservation(&w, "one-more"), -1);
    conf_settle(w.c, -1);
    ck_assert_int_eq(w.seen.n, PARKED_MAX);
    ck_assert_str_eq(w.seen.text[0], "b0"); /* oldest first */
    ck_assert_str_eq(w.seen.text[PARKED_MAX - 1], "b31");
    world_close(&w);
}
END_TEST

/* Refused changes leave the table, ctrl and the file as they were:
 * admission (enforce), the arithmetic, a file edited by hand. */
START_TEST(test_conf_refusals_leave_table)
{
    world_t w;
    world_open(&w, ADMISSION_ENFORCE, 0, 0);
    char msg[768];
    int parked = -1;
    bucketfile_bucket_t b = bucket("huge", 1000000000);
    ck_assert_str_eq(conf_set(w.c, &b, &parked, msg, sizeof msg), "admission");
    ck_assert_int_eq(parked, 0);
    ck_assert_int_eq(reservation(&w, "huge"), -1);
    ck_assert_int_lt(ctrl_bucket_find(w.ctrl, "huge"), 0);
    ck_assert_uint_eq(conf_waiting(w.c), 0);
    /* the dry run says the same of a table holding it, in enforce mode */
    bucketfile_t *bf = bucketfile_dup(conf_table(w.c));
    ck_assert_int_eq(bucketfile_set(bf, &b, NULL), 0);
    int warned = -1;
    ck_assert_str_eq(conf_check(w.c, bf, msg, sizeof msg, &warned), "admission");
    ck_assert_int_eq(warned, 0);
    ck_assert_str_eq(conf_replace(w.c, bf, msg, sizeof msg), "admission"); /* consumed */
    ck_assert_int_eq(reservation(&w, "huge"), -1);
    /* the file edited by hand: refused until a reload */
    sleep(1); /* (a new mtime, whatever the file system's granularity) */
    FILE *f = fopen(w.path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("{\"buckets\":[{\"name\":\"red\",\"reservation\":7}]}\n", f);
    fclose(f);
    b = bucket("green", 1);
    ck_assert_str_eq(conf_set(w.c, &b, &parked, msg, sizeof msg), "file_changed");
    ck_assert_int_eq(reservation(&w, "green"), -1);
    ck_assert_ptr_null(conf_reload(w.c, msg, sizeof msg));
    ck_assert_int_eq(reservation(&w, "red"), 7);
    ck_assert_int_eq(reservation(&w, "blue"), -1);
    world_close(&w);
}
END_TEST

/* Warn mode: a violating table passes, said as a warning, and the table in
 * force is then said to violate admission. */
START_TEST(test_conf_warn_mode)
{
    world_t w;
    world_open(&w, ADMISSION_WARN, 0, 0);
    char msg[768];
    ck_assert_int_eq(conf_warning(w.c, 0, msg, sizeof msg), 0);
    bucketfile_t *bf = bucketfile_dup(conf_table(w.c));
    bucketfile_bucket_t b = bucket("huge", 1000000000);
    ck_assert_int_eq(bucketfile_set(bf, &b, NULL), 0);
    int warned = -1;
    ck_assert_ptr_null(conf_check(w.c, bf, msg, sizeof msg, &warned));
    ck_assert_int_eq(warned, 1);
    ck_assert_ptr_null(conf_replace(w.c, bf, msg, sizeof msg)); /* written whole */
    ck_assert_int_eq(reservation(&w, "huge"), 1000000000);
    ck_assert_int_eq(conf_warning(w.c, 0, msg, sizeof msg), 1);
    ck_assert_int_eq(conf_warning(w.c, 1, msg, sizeof msg), 1);
    bucketfile_t *back = NULL;
    jsonloc_err_t err;
    ck_assert_int_eq(bucketfile_load(w.path, &back, &err), 0);
    ck_assert_int_ge(bucketfile_find(back, "huge"), 0);
    bucketfile_destroy(&back);
    world_close(&w);
}
END_TEST

/* The stop: what waits is answered "stopping", nothing stays parked. */
START_TEST(test_conf_stopping)
{
    world_t w;
    world_open(&w, ADMISSION_ENFORCE, 0, 0);
    set_parked(&w, "green", 1, "R1");
    set_parked(&w, "white", 1, "R2");
    conf_answer_stopping(w.c);
    ck_assert_uint_eq(conf_waiting(w.c), 0);
    ck_assert_int_eq(w.seen.n, 2);
    ck_assert_str_eq(w.seen.text[0], "code:stopping");
    ck_assert_str_eq(w.seen.text[1], "code:stopping");
    conf_answer_stopping(NULL);
    conf_settle(w.c, -1);
    ck_assert_int_eq(w.seen.n, 2); /* answered once */
    world_close(&w);
}
END_TEST

/* etcd's tables: an older version is not applied; a newer one is, and the
 * file follows; one bucket's change by version. */
START_TEST(test_conf_apply_etcd)
{
    world_t w;
    world_open(&w, ADMISSION_ENFORCE, 0, 0);
    const char *v5 = "{\"table_version\":5,\"buckets\":[{\"name\":\"red\",\"reservation\":9}]}";
    ck_assert_int_eq(conf_apply_text(w.c, v5, strlen(v5), 11), 0);
    ck_assert_int_eq(reservation(&w, "red"), 9);
    ck_assert_int_eq(reservation(&w, "blue"), -1);
    ck_assert_uint_eq(bucketfile_version(conf_table(w.c)), 5);
    bucketfile_t *back = NULL;
    jsonloc_err_t err;
    ck_assert_int_eq(bucketfile_load(w.path, &back, &err), 0);
    ck_assert_uint_eq(bucketfile_count(back), 1);
    bucketfile_destroy(&back);
    const char *v4 = "{\"table_version\":4,\"buckets\":[{\"name\":\"red\",\"reservation\":1}]}";
    ck_assert_int_eq(conf_apply_text(w.c, v4, strlen(v4), 12), -ESTALE);
    ck_assert_int_eq(reservation(&w, "red"), 9);
    const char *el = "{\"name\":\"green\",\"reservation\":3}";
    ck_assert_int_eq(conf_apply_bucket(w.c, "green", el, strlen(el), 4, 13), -ESTALE);
    ck_assert_int_eq(conf_apply_bucket(w.c, "other", el, strlen(el), 6, 13), -EINVAL);
    ck_assert_int_eq(conf_apply_bucket(w.c, "green", el, strlen(el), 6, 13), 0);
    ck_assert_int_eq(reservation(&w, "green"), 3);
    ck_assert_int_ge(ctrl_bucket_find(w.ctrl, "green"), 0);
    ck_assert_int_eq(conf_apply_bucket(w.c, "red", NULL, 0, 7, 14), 0);
    ck_assert_int_eq(reservation(&w, "red"), -1);
    ck_assert_uint_eq(bucketfile_version(conf_table(w.c)), 7);
    world_close(&w);
}
END_TEST

/* Regression (review, 8 Dec): a nested bucket's change from etcd, one key
 * (the leader's set of a child in a tree), was parsed as a table of that
 * bucket alone, where its parent is not: every such change was refused,
 * and the follower kept the table without it. */
START_TEST(test_conf_apply_etcd_child)
{
    world_t w;
    world_open(&w, ADMISSION_ENFORCE, 0, 0);
    const char *v5 = "{\"table_version\":5,\"buckets\":[{\"name\":\"red\",\"reservation\":9},"
                     "{\"name\":\"kid\",\"reservation\":2,\"parent\":\"red\"}]}";
    ck_assert_int_eq(conf_apply_text(w.c, v5, strlen(v5), 11), 0);
    ck_assert(ctrl_nested(w.ctrl));
    const char *el = "{\"name\":\"kid\",\"reservation\":3,\"parent\":\"red\"}";
    ck_assert_int_eq(conf_apply_bucket(w.c, "kid", el, strlen(el), 6, 12), 0);
    ck_assert_int_eq(reservation(&w, "kid"), 3);
    const char *el2 = "{\"name\":\"kid2\",\"reservation\":1,\"parent\":\"red\"}";
    ck_assert_int_eq(conf_apply_bucket(w.c, "kid2", el2, strlen(el2), 7, 13), 0);
    ck_assert_int_eq(reservation(&w, "kid2"), 1);
    const bucketfile_bucket_t *k2 =
        bucketfile_get(conf_table(w.c), (size_t)bucketfile_find(conf_table(w.c), "kid2"));
    ck_assert_str_eq(bucketfile_parent(k2), "red");
    /* a parent that is not a bucket is still refused, the table unchanged */
    const char *bad = "{\"name\":\"kid3\",\"reservation\":1,\"parent\":\"none\"}";
    ck_assert_int_lt(conf_apply_bucket(w.c, "kid3", bad, strlen(bad), 8, 14), 0);
    ck_assert_int_eq(reservation(&w, "kid3"), -1);
    ck_assert_uint_eq(bucketfile_version(conf_table(w.c)), 7);
    world_close(&w);
}
END_TEST

/* With shards the table is the cluster's, ctrl holds this shard's part: a
 * set of another shard's bucket goes to the table only. */
START_TEST(test_conf_shard_part)
{
    const char *mine = NULL, *theirs = NULL;
    static const char *const cand[] = {"c0", "c1", "c2", "c3", "c4", "c5", "c6", "c7"};
    for (size_t i = 0; i < sizeof cand / sizeof cand[0]; i++) {
        if (shardmap_of(cand[i], 2) == 0 && !mine)
            mine = cand[i];
        if (shardmap_of(cand[i], 2) == 1 && !theirs)
            theirs = cand[i];
    }
    ck_assert(mine && theirs);
    world_t w;
    world_open(&w, ADMISSION_ENFORCE, 2, 0);
    for (int k = 0; k < 2; k++) {
        const char *red_blue[] = {"red", "blue"};
        ck_assert_int_eq(ctrl_bucket_find(w.ctrl, red_blue[k]) >= 0,
                         shardmap_of(red_blue[k], 2) == 0);
    }
    char msg[768];
    int parked;
    bucketfile_bucket_t a = bucket(mine, 1), b = bucket(theirs, 1);
    ck_assert_ptr_null(conf_set(w.c, &a, &parked, msg, sizeof msg));
    conf_hold_reply(w.c, strdup("A"), &(parked_env_t){.fd = -1});
    ck_assert_ptr_null(conf_set(w.c, &b, &parked, msg, sizeof msg));
    conf_hold_reply(w.c, strdup("B"), &(parked_env_t){.fd = -1});
    ck_assert_int_eq(reservation(&w, mine), 1);
    ck_assert_int_eq(reservation(&w, theirs), 1);
    ck_assert_int_ge(ctrl_bucket_find(w.ctrl, mine), 0);
    ck_assert_int_lt(ctrl_bucket_find(w.ctrl, theirs), 0);
    conf_settle(w.c, -1);
    ck_assert_int_eq(w.seen.n, 2);
    world_close(&w);
}
END_TEST

/* Regression (review, 8 Dec): with shards a change that gives a bucket a
 * parent was written (the file here; etcd with --etcd) and only then
 * refused by ctrl (-ENOTSUP, answered "internal: out of memory"): the next
 * start refuses the file.  Refused before anything is written. */
START_TEST(test_conf_shard_parent_refused_unwritten)
{
    world_t w;
    world_open(&w, ADMISSION_ENFORCE, 2, 0);
    bucketfile_t *before = NULL;
    jsonloc_err_t err;
    ck_assert_int_eq(bucketfile_load(w.path, &before, &err), 0);
    char *was = bucketfile_dumps(before);
    bucketfile_destroy(&before);
    char msg[768];
    int parked = -1;
    bucketfile_bucket_t b = bucket("kid", 1);
    bucketfile_bucket_set_parent(&b, "red");
    const char *code = conf_set(w.c, &b, &parked, msg, sizeof msg);
    ck_assert_ptr_nonnull(code);
    ck_assert_str_eq(code, "invalid");
    ck_assert_ptr_nonnull(strstr(msg, "shards"));
    ck_assert_int_eq(parked, 0);
    ck_assert_int_eq(reservation(&w, "kid"), -1);
    bucketfile_t *after = NULL;
    ck_assert_int_eq(bucketfile_load(w.path, &after, &err), 0); /* with its journal */
    char *now = bucketfile_dumps(after);
    ck_assert_str_eq(now, was);
    free(now);
    free(was);
    bucketfile_destroy(&after);
    world_close(&w);
}
END_TEST

START_TEST(test_conf_null)
{
    conf_destroy(NULL);
    conf_t *c = NULL;
    conf_destroy(&c);
    ck_assert_ptr_null(conf_table(NULL));
    ck_assert_uint_eq(conf_waiting(NULL), 0);
    ck_assert_int_eq(conf_journal_fd(NULL), -1);
    ck_assert_uint_eq(conf_settle(NULL, 0), 0);
}
END_TEST

int main(void)
{
    bqos_log_init("test_conf", BQOS_LOG_ERROR);
    const TTest *const tests[] = {test_conf_set_parked_until_durable, test_conf_failed_write_undone,
                                  test_conf_busy_past_max, test_conf_refusals_leave_table,
                                  test_conf_warn_mode, test_conf_stopping, test_conf_apply_etcd, test_conf_apply_etcd_child,
                                  test_conf_shard_parent_refused_unwritten,
                                  test_conf_shard_part, test_conf_null};
    return testlib_run_timed("conf", 30, tests, sizeof tests / sizeof tests[0]);
}
