/* test_bucketjournal.c - Check suite for common/bucketjournal and the journal's replay (common/bucketfile): append, replay, a torn line, garbage, compaction and its crash points. */
#include <check.h>
#include <errno.h>
#include <poll.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/bucketfile.h"
#include "common/bucketjournal.h"
#include "tests/testlib.h"

void bucketjournal_test_crash(bucketjournal_t *j, int point);
void bucketjournal_test_io(bucketjournal_t *j, int delay_ms, int fail);

typedef struct {
    char dir[64];
    char path[128];  /* the bucket file */
    char jpath[160]; /* its journal */
} fx_t;

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    char *b = calloc(1, 1 << 20);
    size_t n = fread(b, 1, (1 << 20) - 1, f);
    b[n] = 0;
    fclose(f);
    return b;
}

static void fx_init(fx_t *x, const char *text)
{
    snprintf(x->dir, sizeof x->dir, "/tmp/test_bj.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(x->dir));
    snprintf(x->path, sizeof x->path, "%s/b.json", x->dir);
    snprintf(x->jpath, sizeof x->jpath, "%s/b.json.journal", x->dir);
    put(x->path, text);
}

static void fx_done(fx_t *x)
{
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf %s", x->dir);
    ck_assert_int_eq(system(cmd), 0);
}

static bucketfile_t *load(const fx_t *x)
{
    bucketfile_t *bf = NULL;
    jsonloc_err_t err;
    int rc = bucketfile_load(x->path, &bf, &err);
    char buf[600];
    ck_assert_msg(rc == 0, "load: %s", bucketfile_strerror(&err, buf, sizeof buf));
    return bf;
}

/* The table as canonical text, for comparing two. */
static char *canon(const bucketfile_t *bf)
{
    return bucketfile_dumps(bf);
}

static bucketfile_bucket_t bucket(const char *name, int64_t r, int64_t l)
{
    bucketfile_bucket_t b = {.reservation = r, .limit = l, .weight = 1};
    b.name = name; /* the caller's (literals) */
    return b;
}

static const char *base = "{\"buckets\": [\n"
                          "  {\"name\": \"a\", \"reservation\": 1, \"limit\": 10},\n"
                          "  {\"name\": \"b\", \"reservation\": 2}\n"
                          "]}\n";

/* fx_init(x, base), the file loaded (*bf, owned) and a journal on it
 * (bucketjournal_new(), compacting past `compact_bytes`; owned). */
static bucketjournal_t *fx_open(fx_t *x, bucketfile_t **bf, size_t compact_bytes)
{
    fx_init(x, base);
    *bf = load(x);
    bucketjournal_t *j = NULL;
    char msg[512];
    ck_assert_int_eq(bucketjournal_new(x->path, *bf, compact_bytes, &j, msg, sizeof msg), 0);
    return j;
}

START_TEST(test_bucketjournal_append_replay)
{
    fx_t x;
    bucketfile_t *bf;
    bucketjournal_t *j = fx_open(&x, &bf, 0);
    char msg[512];
    bucketfile_bucket_t c = bucket("c", 3, 30), a = bucket("a", 5, 50);
    ck_assert_int_eq(bucketjournal_set(j, &c, 0, msg, sizeof msg), 0);
    ck_assert_int_eq(bucketjournal_set(j, &a, 7, msg, sizeof msg), 0);
    ck_assert_int_eq(bucketjournal_remove(j, "b", 8, msg, sizeof msg), 0);
    ck_assert_int_eq(bucketjournal_check(j, msg, sizeof msg), 0);
    bucketjournal_destroy(&j);
    /* The file is untouched; the journal holds three lines. */
    char *f = slurp(x.path);
    ck_assert_str_eq(f, base);
    free(f);
    bucketfile_t *got = load(&x);
    ck_assert_uint_eq(bucketfile_count(got), 2);
    ck_assert_int_eq(bucketfile_get(got, bucketfile_find(got, "a"))->reservation, 5);
    ck_assert_int_eq(bucketfile_get(got, bucketfile_find(got, "c"))->limit, 30);
    ck_assert_int_lt(bucketfile_find(got, "b"), 0);
    ck_assert_uint_eq(bucketfile_version(got), 8);
    bucketfile_destroy(&got);
    bucketfile_destroy(&bf);
    fx_done(&x);
}
END_TEST

START_TEST(test_bucketjournal_torn_last_line)
{
    fx_t x;
    fx_init(&x, base);
    put(x.jpath, "{\"set\": {\"name\": \"c\", \"reservation\": 3}}\n{\"set\": {\"name\": \"d\", \"rese");
    bucketfile_t *bf = load(&x); /* dropped with a warning */
    ck_assert_int_ge(bucketfile_find(bf, "c"), 0);
    ck_assert_int_lt(bucketfile_find(bf, "d"), 0);
    /* Opening the journal cuts the torn line, so the next line stands alone. */
    bucketjournal_t *j = NULL;
    char msg[512];
    ck_assert_int_eq(bucketjournal_new(x.path, bf, 0, &j, msg, sizeof msg), 0);
    bucketfile_bucket_t e = bucket("e", 4, 40);
    ck_assert_int_eq(bucketjournal_set(j, &e, 0, msg, sizeof msg), 0);
    bucketjournal_destroy(&j);
    char *t = slurp(x.jpath);
    ck_assert_str_eq(t, "{\"set\": {\"name\": \"c\", \"reservation\": 3}}\n"
                        "{\"set\": {\"name\": \"e\", \"reservation\": 4, \"limit\": 40, \"weight\": 1}}\n");
    free(t);
    bucketfile_t *got = load(&x);
    ck_assert_uint_eq(bucketfile_count(got), 4);
    bucketfile_destroy(&got);
    bucketfile_destroy(&bf);
    fx_done(&x);
}
END_TEST

static int problems;

static void count_problem(void *arg, const jsonloc_err_t *err)
{
    (void)err;
    (*(int *)arg)++;
}

/* Garbage anywhere but a torn last line is an error with line and column;
 * so is a line that does not validate. */
START_TEST(test_bucketjournal_garbage)
{
    static const struct {
        const char *journal, *path, *needle;
        int line, col;
    } cases[] = {
        {"{\"set\": {\"name\": \"c\", \"reservation\": 3}}\n{\"set\": {\"na\n"
         "{\"remove\": \"a\"}\n", "", "", 2, 12},
        {"{\"remove\": \"a\"}\n{\"set\": {\"name\": \"c\", \"reservation\": 3, \"limt\": 4}}\n",
         "set.limt", "unknown member", 2, 1},
        {"{\"set\": {\"name\": \"c\", \"reservation\": 30, \"limit\": 4}}\n", "set.limit",
         "below the reservation", 1, 1},
        {"\n\n{\"frob\": 1}\n", "frob", "unknown member", 3, 1},
        {"{\"remove\": 3}\n", "remove", "bucket name", 1, 1},
        {"{\"set\": {\"name\": \"c\", \"reservation\": 3}, \"remove\": \"a\"}\n", "", "a line is",
         1, 1},
        {"garbage\n", "", "", 1, 7},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fx_t x;
        fx_init(&x, base);
        put(x.jpath, cases[i].journal);
        bucketfile_t *bf = NULL;
        jsonloc_err_t err;
        ck_assert_int_eq(bucketfile_load(x.path, &bf, &err), -EINVAL);
        ck_assert_ptr_null(bf);
        ck_assert_msg(strstr(err.source, "b.json.journal"), "case %zu: source %s", i, err.source);
        ck_assert_msg(err.line == cases[i].line && err.col == cases[i].col,
                      "case %zu: at %d:%d (%s), expected %d:%d", i, err.line, err.col, err.text,
                      cases[i].line, cases[i].col);
        ck_assert_msg(strcmp(err.path, cases[i].path) == 0, "case %zu: path %s", i, err.path);
        ck_assert_msg(strstr(err.text, cases[i].needle), "case %zu: %s", i, err.text);
        ck_assert_int_eq(bucketfile_validate(x.path, count_problem, &problems), 1); /* --check */
        fx_done(&x);
    }
}
END_TEST

/* n changes of a table: sets and removes that leave a known table. */
static void changes(bucketjournal_t *j, bucketfile_t *mirror, int from, int n)
{
    char msg[512];
    for (int i = from; i < from + n; i++) {
        char name[32];
        snprintf(name, sizeof name, "t%d", i % 37);
        if (i % 5 == 4 && bucketfile_find(mirror, name) >= 0) {
            ck_assert_int_eq(bucketjournal_remove(j, name, 0, msg, sizeof msg), 0);
            bucketfile_remove(mirror, name);
        } else {
            bucketfile_bucket_t b = bucket(name, i, 10 * i + 10);
            ck_assert_int_eq(bucketjournal_set(j, &b, 0, msg, sizeof msg), 0);
            ck_assert_int_eq(bucketfile_set(mirror, &b, NULL), 0);
        }
    }
}

START_TEST(test_bucketjournal_compaction)
{
    fx_t x;
    bucketfile_t *bf;
    bucketjournal_t *j = fx_open(&x, &bf, 1500);
    bucketfile_t *mirror = bucketfile_dup(bf);
    char msg[512];
    changes(j, mirror, 0, 120); /* passes the bound several times over */
    bucketjournal_wait(j);
    bucketjournal_stats_t st;
    bucketjournal_stats(j, &st);
    ck_assert_uint_ge(st.compactions, 1);
    ck_assert_uint_eq(st.failures, 0);
    ck_assert_uint_eq(st.appends, 120);
    /* The file took the folded lines; the journal is short; the check
     * knows the new file; the operator's formatting stayed. */
    ck_assert_int_eq(bucketjournal_check(j, msg, sizeof msg), 0);
    char *f = slurp(x.path);
    ck_assert_msg(strncmp(f, "{\"buckets\": [\n  {\"name\": \"a\", \"reservation\": 1, \"limit\": 10},\n", 62) == 0, "%s", f);
    free(f);
    ck_assert_uint_lt(st.bytes, 120 * 60); /* cut at least once */
    ck_assert_int_eq(bucketjournal_compact(j), 0); /* and to the end, now it is quiet */
    bucketjournal_wait(j);
    bucketjournal_stats(j, &st);
    ck_assert_uint_eq(st.bytes, 0);
    bucketfile_t *got = load(&x);
    char *a = canon(got), *b = canon(mirror);
    ck_assert_str_eq(a, b);
    free(a);
    free(b);
    bucketfile_destroy(&got);
    bucketjournal_destroy(&j);
    bucketfile_destroy(&mirror);
    bucketfile_destroy(&bf);
    fx_done(&x);
}
END_TEST

/* The worker stopped at each point as if the process died there: the file
 * and the journal load to the same table as without a crash, and a new
 * journal over them goes on right. */
START_TEST(test_bucketjournal_compaction_crash_points)
{
    for (int point = 1; point <= 3; point++) {
        fx_t x;
        bucketfile_t *bf;
        bucketjournal_t *j = fx_open(&x, &bf, 1u << 30);
        bucketfile_t *mirror = bucketfile_dup(bf);
        char msg[512];
        changes(j, mirror, 0, 25);
        bucketjournal_test_crash(j, point);
        ck_assert_int_eq(bucketjournal_compact(j), 0);
        bucketjournal_wait(j);
        bucketjournal_destroy(&j);
        char *jt = slurp(x.jpath);
        ck_assert_msg((point >= 2) == (strstr(jt, "compacted") != NULL), "point %d: %s", point,
                      jt);
        free(jt);
        bucketfile_t *got = load(&x);
        char *a = canon(got), *b = canon(mirror);
        ck_assert_msg(strcmp(a, b) == 0, "point %d:\n%s\nvs\n%s", point, a, b);
        free(a);
        free(b);
        /* Restarted: more changes, a compaction to the end, and again. */
        ck_assert_int_eq(bucketjournal_new(x.path, got, 1u << 30, &j, msg, sizeof msg), 0);
        changes(j, mirror, 25, 15);
        ck_assert_int_eq(bucketjournal_compact(j), 0);
        bucketjournal_wait(j);
        bucketjournal_destroy(&j);
        bucketfile_t *got2 = load(&x);
        a = canon(got2);
        b = canon(mirror);
        ck_assert_msg(strcmp(a, b) == 0, "point %d, after:\n%s\nvs\n%s", point, a, b);
        free(a);
        free(b);
        jt = slurp(x.jpath);
        ck_assert_str_eq(jt, "");
        free(jt);
        bucketfile_destroy(&got2);
        bucketfile_destroy(&got);
        bucketfile_destroy(&mirror);
        bucketfile_destroy(&bf);
        fx_done(&x);
    }
}
END_TEST

/* A whole save (an import) with lines in the journal: the lines do not
 * come back over the new file, at any crash point of the save (the
 * marker before the rename). */
START_TEST(test_bucketjournal_save_drops_folded_lines)
{
    fx_t x;
    bucketfile_t *bf;
    bucketjournal_t *j = fx_open(&x, &bf, 1u << 30);
    char msg[512];
    bucketfile_bucket_t c = bucket("c", 3, 30);
    ck_assert_int_eq(bucketjournal_set(j, &c, 0, msg, sizeof msg), 0);
    /* The imported table has no c and no b. */
    bucketfile_t *imp = NULL;
    const char *t = "{\"buckets\": [{\"name\": \"z\", \"reservation\": 9}]}\n";
    ck_assert_int_eq(bucketfile_parse(t, strlen(t), "imp", &imp, NULL), 0);
    ck_assert_int_eq(bucketjournal_save(j, imp, msg, sizeof msg), 0);
    char *jt = slurp(x.jpath);
    ck_assert_str_eq(jt, "");
    free(jt);
    bucketfile_t *got = load(&x);
    ck_assert_uint_eq(bucketfile_count(got), 1);
    bucketfile_destroy(&got);
    /* The crash between the rename and the cut: the marker keeps c out. */
    char *m = bucketfile_journal_marker(0, 0, 0);
    free(m);
    bucketfile_t *cur = load(&x);
    bucketfile_ident_t id;
    ck_assert_int_eq(bucketfile_origin(cur, &id), 0);
    char line[400];
    snprintf(line, sizeof line, "{\"set\": {\"name\": \"c\", \"reservation\": 3}}\n");
    char *mk = bucketfile_journal_marker(id.size, id.hash, strlen(line));
    char both[800];
    snprintf(both, sizeof both, "%s%s{\"set\": {\"name\": \"d\", \"reservation\": 4}}\n", line, mk);
    free(mk);
    put(x.jpath, both);
    got = load(&x);
    ck_assert_int_lt(bucketfile_find(got, "c"), 0);  /* before upto: in the file */
    ck_assert_int_ge(bucketfile_find(got, "d"), 0);  /* after it: applied */
    bucketfile_destroy(&got);
    /* A marker of another file (the rename never happened): every line. */
    put(x.jpath, "{\"set\": {\"name\": \"c\", \"reservation\": 3}}\n"
                 "{\"compacted\": {\"size\": 5, \"hash\": \"00000000000000ff\", \"upto\": 40}}\n");
    got = load(&x);
    ck_assert_int_ge(bucketfile_find(got, "c"), 0);
    bucketfile_destroy(&got);
    bucketfile_destroy(&cur);
    bucketjournal_destroy(&j);
    bucketfile_destroy(&imp);
    bucketfile_destroy(&bf);
    fx_done(&x);
}
END_TEST

/* The hand-edit check: a touch passes (content decides), an edit fails,
 * and no compaction folds the journal into a file edited by hand. */
START_TEST(test_bucketjournal_hand_edit)
{
    fx_t x;
    bucketfile_t *bf;
    bucketjournal_t *j = fx_open(&x, &bf, 1u << 30);
    char msg[512];
    sleep(0); /* mtime granularity is the filesystem's: rewrite the same text */
    put(x.path, base);
    ck_assert_int_eq(bucketjournal_check(j, msg, sizeof msg), 0);
    put(x.path, "{\"buckets\": [{\"name\": \"q\", \"reservation\": 1}]}\n");
    ck_assert_int_eq(bucketjournal_check(j, msg, sizeof msg), -ESTALE);
    ck_assert_ptr_nonnull(strstr(msg, "changed on disk"));
    bucketfile_bucket_t c = bucket("c", 3, 30);
    ck_assert_int_eq(bucketjournal_set(j, &c, 0, msg, sizeof msg), 0);
    ck_assert_int_eq(bucketjournal_compact(j), 0);
    bucketjournal_wait(j);
    bucketjournal_stats_t st;
    bucketjournal_stats(j, &st);
    ck_assert_uint_eq(st.compactions, 0);
    ck_assert_uint_eq(st.failures, 1);
    char *f = slurp(x.path);
    ck_assert_str_eq(f, "{\"buckets\": [{\"name\": \"q\", \"reservation\": 1}]}\n");
    free(f);
    /* The reload of the edited file: the journal extends the old file, so
     * it is not applied (the operator's edit stands), and it is set aside
     * for the next lines. */
    bucketfile_t *got = load(&x);
    ck_assert_uint_eq(bucketfile_count(got), 1);
    ck_assert_int_lt(bucketfile_find(got, "c"), 0);
    ck_assert_int_eq(bucketjournal_rebase(j, got), 0);
    ck_assert_int_eq(bucketjournal_check(j, msg, sizeof msg), 0);
    char aside[200];
    snprintf(aside, sizeof aside, "%s.ignored", x.jpath);
    ck_assert_int_eq(access(aside, F_OK), 0);
    bucketfile_bucket_t d = bucket("d", 4, 40);
    ck_assert_int_eq(bucketjournal_set(j, &d, 0, msg, sizeof msg), 0);
    bucketfile_destroy(&got);
    got = load(&x);
    ck_assert_uint_eq(bucketfile_count(got), 2);
    ck_assert_int_ge(bucketfile_find(got, "d"), 0);
    bucketfile_destroy(&got);
    bucketjournal_destroy(&j);
    bucketfile_destroy(&bf);
    fx_done(&x);
}
END_TEST

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Queued appends (issue 26): the caller never waits for the disk; lines
 * land in the order queued; at most BUCKETJOURNAL_PENDING_MAX wait, the
 * next is refused with -EBUSY; the eventfd says when they are durable. */
START_TEST(test_bucketjournal_queue_order_bound)
{
    fx_t x;
    bucketfile_t *bf;
    bucketjournal_t *j = fx_open(&x, &bf, 0);
    char msg[512];
    bucketjournal_test_io(j, 300, 0); /* a disk that takes 300 ms per sync */
    uint64_t t = 0, last = 0;
    double t0 = now_s();
    for (int i = 0; i < BUCKETJOURNAL_PENDING_MAX; i++) {
        bucketfile_bucket_t c = bucket("c", i + 1, 100);
        ck_assert_int_eq(bucketjournal_queue_set(j, &c, 0, &t, msg, sizeof msg), 0);
        ck_assert_uint_eq(t, last + 1);
        last = t;
    }
    bucketfile_bucket_t d = bucket("d", 1, 2);
    ck_assert_int_eq(bucketjournal_queue_set(j, &d, 0, &t, msg, sizeof msg), -EBUSY);
    ck_assert_ptr_nonnull(strstr(msg, "busy"));
    ck_assert_int_eq(bucketjournal_queue_remove(j, "a", 0, &t, msg, sizeof msg), -EBUSY);
    ck_assert_double_lt(now_s() - t0, 0.1); /* nothing above waited for the disk */
    bucketjournal_stats_t st;
    bucketjournal_stats(j, &st);
    ck_assert_uint_eq(st.pending, BUCKETJOURNAL_PENDING_MAX);
    bucketjournal_done_t dn;
    ck_assert_uint_gt(bucketjournal_done(j, &dn), 0);
    ck_assert_uint_lt(dn.durable, last);
    /* The eventfd wakes a poll once lines are durable. */
    struct pollfd p = {.fd = bucketjournal_fd(j), .events = POLLIN};
    ck_assert_int_eq(poll(&p, 1, 5000), 1);
    ck_assert_uint_eq(bucketjournal_flush(j, 10), 0);
    ck_assert_uint_eq(bucketjournal_done(j, &dn), 0);
    ck_assert_int_eq(dn.rc, 0);
    ck_assert_uint_eq(dn.durable, last);
    /* Two syncs at most: the first line alone, the other 31 as one. */
    ck_assert_double_lt(now_s() - t0, 1.5);
    bucketjournal_test_io(j, 0, 0);
    ck_assert_int_eq(bucketjournal_queue_remove(j, "b", 0, &t, msg, sizeof msg), 0);
    bucketjournal_destroy(&j); /* writes what is pending */
    bucketfile_t *got = load(&x);
    ck_assert_int_eq(bucketfile_get(got, bucketfile_find(got, "c"))->reservation,
                     BUCKETJOURNAL_PENDING_MAX); /* the last set won: order kept */
    ck_assert_int_lt(bucketfile_find(got, "b"), 0);
    ck_assert_int_lt(bucketfile_find(got, "d"), 0);
    bucketfile_destroy(&got);
    bucketfile_destroy(&bf);
    fx_done(&x);
}
END_TEST

/* A failed write fails its lines and every line queued after it, writes
 * none of them, refuses new lines until collected, then carries on. */
START_TEST(test_bucketjournal_queue_failing_write)
{
    fx_t x;
    bucketfile_t *bf;
    bucketjournal_t *j = fx_open(&x, &bf, 0);
    char msg[512];
    uint64_t t1, t2, t3, t4;
    bucketfile_bucket_t c = bucket("c", 3, 30), e = bucket("e", 4, 40);
    ck_assert_int_eq(bucketjournal_queue_set(j, &c, 0, &t1, msg, sizeof msg), 0);
    ck_assert_uint_eq(bucketjournal_flush(j, 10), 0);
    bucketjournal_test_io(j, 200, -EIO);
    ck_assert_int_eq(bucketjournal_queue_remove(j, "a", 0, &t2, msg, sizeof msg), 0);
    ck_assert_int_eq(bucketjournal_queue_set(j, &e, 0, &t3, msg, sizeof msg), 0);
    ck_assert_uint_eq(bucketjournal_flush(j, 10), 0);
    /* Not collected yet: a new line is refused with the error. */
    ck_assert_int_eq(bucketjournal_queue_set(j, &e, 0, &t4, msg, sizeof msg), -EIO);
    bucketjournal_done_t dn;
    ck_assert_uint_eq(bucketjournal_done(j, &dn), 0);
    ck_assert_int_eq(dn.rc, -EIO);
    ck_assert_uint_eq(dn.durable, t1);
    ck_assert_uint_eq(dn.failed_from, t2);
    ck_assert_uint_eq(dn.failed_to, t3);
    ck_assert_ptr_nonnull(strstr(dn.msg, "cannot write"));
    /* Collected: the journal takes lines again. */
    bucketjournal_test_io(j, 0, 0);
    bucketfile_bucket_t f = bucket("f", 5, 50);
    ck_assert_int_eq(bucketjournal_queue_set(j, &f, 0, &t4, msg, sizeof msg), 0);
    ck_assert_uint_eq(t4, t3 + 1);
    ck_assert_uint_eq(bucketjournal_flush(j, 10), 0);
    ck_assert_uint_eq(bucketjournal_done(j, &dn), 0);
    ck_assert_int_eq(dn.rc, 0);
    ck_assert_uint_eq(dn.durable, t4);
    bucketjournal_destroy(&j);
    bucketfile_t *got = load(&x);
    ck_assert_int_ge(bucketfile_find(got, "a"), 0); /* the failed remove is not there */
    ck_assert_int_lt(bucketfile_find(got, "e"), 0);
    ck_assert_int_ge(bucketfile_find(got, "c"), 0);
    ck_assert_int_ge(bucketfile_find(got, "f"), 0);
    bucketfile_destroy(&got);
    bucketfile_destroy(&bf);
    fx_done(&x);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {test_bucketjournal_append_replay,
                                  test_bucketjournal_torn_last_line, test_bucketjournal_garbage,
                                  test_bucketjournal_compaction,
                                  test_bucketjournal_compaction_crash_points,
                                  test_bucketjournal_save_drops_folded_lines,
                                  test_bucketjournal_hand_edit,
                                  test_bucketjournal_queue_order_bound,
                                  test_bucketjournal_queue_failing_write};
    return testlib_run_timed("bucketjournal", 60, tests, sizeof tests / sizeof tests[0]);
}
