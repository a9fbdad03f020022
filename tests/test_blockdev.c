/* test_blockdev.c - Check suite for storage-node/blockdev: per-export files, reads/writes/flush/trim through the worker pool and kernel AIO, hole/data extents, full disk, inline page-cache reads, shutdown. */
#include <check.h>
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "storage-node/nbd/blockdev.h"
#include "tests/testlib.h"

static char dir[64];

static void setup(void)
{
    strcpy(dir, "/tmp/test_blockdev.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", dir);
}

typedef struct {
    struct event_base *base;
    int done;
    int want;
} ctx_t;

static void on_done(blockdev_op_t *op, void *arg)
{
    ctx_t *c = arg;
    (void)op;
    if (++c->done >= c->want)
        event_base_loopbreak(c->base);
}

/* Runs the loop until `n` more completions arrived (5 s at most). */
static void wait_done(ctx_t *c, int n)
{
    c->want = c->done + n;
    struct timeval tv = {5, 0};
    event_base_loopexit(c->base, &tv);
    if (c->done < c->want)
        event_base_dispatch(c->base);
    ck_assert_int_ge(c->done, c->want);
}

static blockdev_t *make(ctx_t *c, const char *path, int direct, uint64_t size, int *err)
{
    blockdev_config_t cfg = {.path = path, .export_size = size, .direct = direct,
                             .workers = 4, .max_exports = 16};
    c->base = event_base_new();
    ck_assert_ptr_nonnull(c->base);
    c->done = 0;
    return blockdev_new(c->base, &cfg, on_done, c, err);
}

/* make() on dir/sub, asserting that it succeeds (a sub ending in '/' is a
 * directory of exports, created); path[128] receives the full path. */
static blockdev_t *make_in(ctx_t *c, const char *sub, int direct, uint64_t size, char *path)
{
    int err = 0;
    snprintf(path, 128, "%s/%s", dir, sub);
    blockdev_t *bd = make(c, path, direct, size, &err);
    ck_assert_ptr_nonnull(bd);
    return bd;
}

static void op_init(blockdev_op_t *op, blockdev_kind_t kind, int id, uint64_t off, uint32_t len,
                    void *buf)
{
    memset(op, 0, sizeof *op);
    op->kind = kind;
    op->export_id = id;
    op->offset = off;
    op->length = len;
    op->buf = buf;
    op->result = 12345;
}

START_TEST(test_blockdev_dir_exports)
{
    ctx_t c;
    char path[128];
    blockdev_t *bd = make_in(&c, "store/", 0, 1 << 20, path); /* trailing '/': created */
    uint64_t size = 0;
    ck_assert_int_eq(blockdev_export(bd, 0, "red", &size), 0);
    ck_assert_uint_eq(size, 1 << 20);
    ck_assert_int_eq(blockdev_export(bd, 1, "blue", &size), 0);
    /* bad names and ids */
    ck_assert_int_eq(blockdev_export(bd, 2, "../etc", &size), -EINVAL);
    ck_assert_int_eq(blockdev_export(bd, 2, "..", &size), -EINVAL);
    ck_assert_int_eq(blockdev_export(bd, 2, "", &size), -EINVAL);
    ck_assert_int_eq(blockdev_export(bd, 16, "x", &size), -EINVAL);
    ck_assert_int_eq(blockdev_export(bd, -1, "x", &size), -EINVAL);
    snprintf(path, sizeof path, "%s/store/red.img", dir);
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_int_eq(st.st_size, 1 << 20);
    ck_assert_int_lt(st.st_blocks * 512, 1 << 20); /* sparse */

    /* write red, flush, read back; blue is untouched (zeroes) */
    char *w = blockdev_alloc(8192), *r = blockdev_alloc(8192);
    memset(w, 'R', 8192);
    blockdev_op_t ops[4];
    op_init(&ops[0], BLOCKDEV_WRITE, 0, 4096, 8192, w);
    ck_assert_int_eq(blockdev_submit(bd, &ops[0]), 0);
    wait_done(&c, 1);
    ck_assert_int_eq(ops[0].result, 0);
    op_init(&ops[1], BLOCKDEV_FLUSH, 0, 0, 0, NULL);
    op_init(&ops[2], BLOCKDEV_READ, 0, 4096, 8192, r);
    ck_assert_int_eq(blockdev_submit(bd, &ops[1]), 0);
    ck_assert_int_eq(blockdev_submit(bd, &ops[2]), 0);
    wait_done(&c, 2);
    ck_assert_int_eq(ops[1].result, 0);
    ck_assert_int_eq(ops[2].result, 0);
    ck_assert(memcmp(r, w, 8192) == 0);
    memset(r, 'x', 8192);
    op_init(&ops[3], BLOCKDEV_READ, 1, 4096, 8192, r);
    ck_assert_int_eq(blockdev_submit(bd, &ops[3]), 0);
    wait_done(&c, 1);
    ck_assert_int_eq(ops[3].result, 0);
    for (int i = 0; i < 8192; i++)
        ck_assert_int_eq(r[i], 0);
    /* trim punches a hole: the range reads back as zeroes */
    op_init(&ops[0], BLOCKDEV_TRIM, 0, 4096, 4096, NULL);
    ck_assert_int_eq(blockdev_submit(bd, &ops[0]), 0);
    wait_done(&c, 1);
    ck_assert_int_eq(ops[0].result, 0);
    op_init(&ops[1], BLOCKDEV_READ, 0, 4096, 8192, r);
    ck_assert_int_eq(blockdev_submit(bd, &ops[1]), 0);
    wait_done(&c, 1);
    for (int i = 0; i < 4096; i++)
        ck_assert_int_eq(r[i], 0);
    ck_assert_int_eq(r[4096], 'R');
    /* an unopened export is refused */
    op_init(&ops[2], BLOCKDEV_READ, 5, 0, 512, r);
    ck_assert_int_eq(blockdev_submit(bd, &ops[2]), -EINVAL);
    free(w);
    free(r);
    blockdev_destroy(&bd);
    ck_assert_ptr_null(bd);
    blockdev_destroy(&bd); /* NULL is fine */
    event_base_free(c.base);
}
END_TEST

/* Writes `len` bytes of 'D' at `off` of export `id` and waits. */
static void put_data(blockdev_t *bd, ctx_t *c, int id, uint64_t off, uint32_t len)
{
    char *w = blockdev_alloc(len);
    memset(w, 'D', len);
    blockdev_op_t op;
    op_init(&op, BLOCKDEV_WRITE, id, off, len, w);
    ck_assert_int_eq(blockdev_submit(bd, &op), 0);
    wait_done(c, 1);
    ck_assert_int_eq(op.result, 0);
    free(w);
}

/* Extents of a sparse export follow what was written and trimmed: data
 * where written, holes elsewhere; capped by `max`, never past the range;
 * the same through a BLOCKDEV_EXTENTS op on a worker. */
START_TEST(test_blockdev_extents)
{
    ctx_t c;
    int err = 0;
    blockdev_t *bd = make(&c, dir, 0, 1 << 20, &err);
    ck_assert_ptr_nonnull(bd);
    uint64_t size;
    ck_assert_int_eq(blockdev_export(bd, 0, "v", &size), 0);
    blockdev_extent_t x[8];
    /* fresh file: one hole */
    ck_assert_int_eq(blockdev_extents(bd, 0, 0, 1 << 20, x, 8), 1);
    ck_assert(x[0].length == 1u << 20 && x[0].flags == BLOCKDEV_EXT_HOLE);
    put_data(bd, &c, 0, 128 << 10, 64 << 10);
    put_data(bd, &c, 0, 512 << 10, 4096);
    ck_assert_int_eq(blockdev_extents(bd, 0, 0, 1 << 20, x, 8), 5);
    static const uint32_t len[5] = {128 << 10, 64 << 10, 320 << 10, 4096, (508 << 10)};
    for (int i = 0; i < 5; i++) {
        ck_assert_uint_eq(x[i].length, len[i]);
        ck_assert_uint_eq(x[i].flags, (i % 2) ? 0 : BLOCKDEV_EXT_HOLE);
    }
    /* capped: two extents, stopping short of the range */
    ck_assert_int_eq(blockdev_extents(bd, 0, 0, 1 << 20, x, 2), 2);
    ck_assert_uint_eq(x[0].length + x[1].length, 192 << 10);
    /* an unaligned range inside the data, and one across its end */
    ck_assert_int_eq(blockdev_extents(bd, 0, (128 << 10) + 1000, 3000, x, 8), 1);
    ck_assert(x[0].length == 3000 && x[0].flags == 0);
    ck_assert_int_eq(blockdev_extents(bd, 0, (192 << 10) - 10, 30, x, 8), 2);
    ck_assert(x[0].length == 10 && x[0].flags == 0);
    ck_assert(x[1].length == 20 && x[1].flags == BLOCKDEV_EXT_HOLE);
    /* the last byte */
    ck_assert_int_eq(blockdev_extents(bd, 0, (1 << 20) - 1, 1, x, 8), 1);
    ck_assert(x[0].length == 1 && x[0].flags == BLOCKDEV_EXT_HOLE);
    /* bad arguments */
    ck_assert_int_eq(blockdev_extents(bd, 0, (1 << 20) - 1, 2, x, 8), -EINVAL);
    ck_assert_int_eq(blockdev_extents(bd, 0, UINT64_MAX - 5, 100, x, 8), -EINVAL);
    ck_assert_int_eq(blockdev_extents(bd, 0, 0, 0, x, 8), -EINVAL);
    ck_assert_int_eq(blockdev_extents(bd, 0, 0, 4096, x, 0), -EINVAL);
    ck_assert_int_eq(blockdev_extents(bd, 3, 0, 4096, x, 8), -EINVAL); /* not opened */
    /* a trim makes a hole again; the op runs on a worker */
    blockdev_op_t op;
    op_init(&op, BLOCKDEV_TRIM, 0, 128 << 10, 64 << 10, NULL);
    ck_assert_int_eq(blockdev_submit(bd, &op), 0);
    wait_done(&c, 1);
    ck_assert_int_eq(op.result, 0);
    op_init(&op, BLOCKDEV_EXTENTS, 0, 0, 1 << 20, x);
    op.max_extents = 8;
    ck_assert_int_eq(blockdev_submit(bd, &op), 0);
    wait_done(&c, 1);
    ck_assert_int_eq(op.result, 0);
    ck_assert_uint_eq(op.nextents, 3);
    ck_assert(x[0].length == 512u << 10 && x[0].flags == BLOCKDEV_EXT_HOLE);
    ck_assert(x[1].length == 4096 && x[1].flags == 0);
    blockdev_destroy(&bd);
    event_base_free(c.base);
}
END_TEST

START_TEST(test_blockdev_single_file_not_truncated)
{
    ctx_t c;
    int err = 0;
    char path[128];
    snprintf(path, sizeof path, "%s/vol.img", dir);
    int fd = open(path, O_CREAT | O_WRONLY, 0644);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(pwrite(fd, "hello", 5, 100000), 5);
    close(fd);
    /* export_size smaller than the file: the file keeps its size and data */
    blockdev_t *bd = make(&c, path, 0, 4096, &err);
    ck_assert_ptr_nonnull(bd);
    uint64_t s1 = 0, s2 = 0;
    ck_assert_int_eq(blockdev_export(bd, 0, "a", &s1), 0);
    ck_assert_int_eq(blockdev_export(bd, 3, "b", &s2), 0);
    ck_assert_uint_eq(s1, 100005);
    ck_assert_uint_eq(s2, 100005);
    char buf[5];
    blockdev_op_t op;
    op_init(&op, BLOCKDEV_READ, 3, 100000, 5, buf);
    ck_assert_int_eq(blockdev_submit(bd, &op), 0);
    wait_done(&c, 1);
    ck_assert_int_eq(op.result, 0);
    ck_assert(memcmp(buf, "hello", 5) == 0);
    blockdev_destroy(&bd);
    event_base_free(c.base);
    /* a directory that does not exist and has no trailing '/' is a new file */
    snprintf(path, sizeof path, "%s/new.img", dir);
    bd = make(&c, path, 0, 65536, &err);
    ck_assert_ptr_nonnull(bd);
    ck_assert_int_eq(blockdev_export(bd, 0, "a", &s1), 0);
    ck_assert_uint_eq(s1, 65536);
    blockdev_destroy(&bd);
    event_base_free(c.base);
}
END_TEST

/* Issue 18, defect 11: a symbolic link (or a hard link) in the export
 * directory must not expose or grow the file it points to. */
START_TEST(test_blockdev_symlink_in_export_dir_refused)
{
    ctx_t c;
    int err = 0;
    char edir[160], outside[160], lp[200];
    snprintf(edir, sizeof edir, "%s/exports/", dir);
    snprintf(outside, sizeof outside, "%s/outside.dat", dir);
    int fd = open(outside, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(pwrite(fd, "secret", 6, 0), 6);
    close(fd);
    blockdev_t *bd = make(&c, edir, 0, 65536, &err);
    ck_assert_ptr_nonnull(bd);
    snprintf(lp, sizeof lp, "%sevil.img", edir);
    ck_assert_int_eq(symlink(outside, lp), 0);
    uint64_t s = 0;
    ck_assert_int_eq(blockdev_export(bd, 0, "evil", &s), -ELOOP);
    snprintf(lp, sizeof lp, "%shard.img", edir);
    ck_assert_int_eq(link(outside, lp), 0);
    ck_assert_int_eq(blockdev_export(bd, 1, "hard", &s), -EPERM);
    struct stat st;
    ck_assert_int_eq(stat(outside, &st), 0);
    ck_assert_int_eq(st.st_size, 6); /* not grown */
    /* an existing non-empty export file keeps its size; a new one is sized */
    snprintf(lp, sizeof lp, "%sold.img", edir);
    fd = open(lp, O_CREAT | O_WRONLY, 0600);
    ck_assert_int_eq(pwrite(fd, "x", 1, 4095), 1);
    close(fd);
    ck_assert_int_eq(blockdev_export(bd, 2, "old", &s), 0);
    ck_assert_uint_eq(s, 4096);
    ck_assert_int_eq(blockdev_export(bd, 3, "new", &s), 0);
    ck_assert_uint_eq(s, 65536);
    snprintf(lp, sizeof lp, "%snew.img", edir);
    ck_assert_int_eq(stat(lp, &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0600);
    blockdev_destroy(&bd);
    event_base_free(c.base);
}
END_TEST

START_TEST(test_blockdev_bad_config)
{
    ctx_t c;
    int err = 0;
    ck_assert_ptr_null(make(&c, "", 0, 4096, &err));
    ck_assert_int_eq(err, -EINVAL);
    event_base_free(c.base);
    ck_assert_ptr_null(make(&c, dir, 0, 0, &err)); /* size 0 */
    ck_assert_int_eq(err, -EINVAL);
    event_base_free(c.base);
    ck_assert_ptr_null(make(&c, "/dev/null", 0, 4096, &err)); /* char device */
    ck_assert_int_eq(err, -EINVAL);
    event_base_free(c.base);
    ck_assert_ptr_null(make(&c, "/nonexistent-dir-h8/x/y.img", 0, 4096, &err));
    ck_assert_int_eq(err, -ENOENT);
    event_base_free(c.base);
}
END_TEST

/* Full disk: a write past RLIMIT_FSIZE fails with EFBIG and is never
 * reported as success (Check runs each test in its own process). */
START_TEST(test_blockdev_full_disk)
{
    signal(SIGXFSZ, SIG_IGN);
    ctx_t c;
    int err = 0;
    char path[128];
    snprintf(path, sizeof path, "%s/vol.img", dir);
    int fd = open(path, O_CREAT | O_WRONLY, 0644);
    ck_assert_int_eq(ftruncate(fd, 1 << 20), 0);
    close(fd);
    struct rlimit rl = {256 * 1024, 256 * 1024};
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
    blockdev_t *bd = make(&c, path, 0, 1 << 20, &err);
    ck_assert_ptr_nonnull(bd);
    uint64_t size;
    ck_assert_int_eq(blockdev_export(bd, 0, "v", &size), 0);
    char *w = blockdev_alloc(8192);
    memset(w, 'F', 8192);
    blockdev_op_t a, b;
    op_init(&a, BLOCKDEV_WRITE, 0, 0, 4096, w);
    op_init(&b, BLOCKDEV_WRITE, 0, 256 * 1024 - 4096, 8192, w); /* crosses the limit */
    ck_assert_int_eq(blockdev_submit(bd, &a), 0);
    ck_assert_int_eq(blockdev_submit(bd, &b), 0);
    wait_done(&c, 2);
    ck_assert_int_eq(a.result, 0);
    ck_assert_int_eq(b.result, -EFBIG);
    free(w);
    blockdev_destroy(&bd);
    event_base_free(c.base);
}
END_TEST

/* O_DIRECT: aligned IOs go through kernel AIO, unaligned ones through the
 * pool; both read back what was written. */
START_TEST(test_blockdev_direct_aio)
{
    ctx_t c;
    char path[128];
    blockdev_t *bd = make_in(&c, "d/", 1, 1 << 22, path);
    ck_assert_int_eq(blockdev_direct(bd), 1);
    uint64_t size;
    if (blockdev_export(bd, 0, "v", &size) == -EINVAL) {
        /* the file system (tmpfs) has no O_DIRECT: nothing to test */
        blockdev_destroy(&bd);
        event_base_free(c.base);
        return;
    }
    enum { N = 32 };
    char *bufs[N];
    blockdev_op_t ops[N];
    for (int i = 0; i < N; i++) {
        bufs[i] = blockdev_alloc(4096);
        memset(bufs[i], 'a' + i % 26, 4096);
        op_init(&ops[i], BLOCKDEV_WRITE, 0, (uint64_t)i * 4096, 4096, bufs[i]);
        ck_assert_int_eq(blockdev_submit(bd, &ops[i]), 0);
    }
    wait_done(&c, N);
    for (int i = 0; i < N; i++) {
        ck_assert_int_eq(ops[i].result, 0);
        memset(bufs[i], 0, 4096);
        op_init(&ops[i], BLOCKDEV_READ, 0, (uint64_t)i * 4096, 4096, bufs[i]);
        ck_assert_int_eq(blockdev_submit(bd, &ops[i]), 0);
    }
    wait_done(&c, N);
    for (int i = 0; i < N; i++) {
        ck_assert_int_eq(ops[i].result, 0);
        ck_assert_int_eq(bufs[i][0], 'a' + i % 26);
        ck_assert_int_eq(bufs[i][4095], 'a' + i % 26);
    }
    /* unaligned: 100 bytes at offset 4097 */
    char small[100];
    op_init(&ops[0], BLOCKDEV_READ, 0, 4097, 100, small);
    ck_assert_int_eq(blockdev_submit(bd, &ops[0]), 0);
    wait_done(&c, 1);
    ck_assert_int_eq(ops[0].result, 0);
    ck_assert_int_eq(small[0], 'b');
    /* a read past the end of the file gives zeroes, not an error */
    op_init(&ops[1], BLOCKDEV_READ, 0, (1 << 22), 4096, bufs[1]);
    ck_assert_int_eq(blockdev_submit(bd, &ops[1]), 0);
    wait_done(&c, 1);
    ck_assert_int_eq(ops[1].result, 0);
    ck_assert_int_eq(bufs[1][0], 0);
    /* ops in flight at destroy are delivered, not lost */
    for (int i = 0; i < 8; i++) {
        op_init(&ops[i], BLOCKDEV_READ, 0, (uint64_t)i * 4096, 4096, bufs[i]);
        ck_assert_int_eq(blockdev_submit(bd, &ops[i]), 0);
    }
    int before = c.done;
    blockdev_destroy(&bd);
    ck_assert_int_eq(c.done, before + 8);
    for (int i = 0; i < N; i++)
        free(bufs[i]);
    event_base_free(c.base);
}
END_TEST

START_TEST(test_blockdev_inline_and_io_time)
{
    ctx_t c;
    char path[128];
    blockdev_t *bd = make_in(&c, "v/", 0, 1 << 20, path);
    uint64_t size;
    ck_assert_int_eq(blockdev_export(bd, 0, "v", &size), 0);
    char *b = blockdev_alloc(4096);
    memset(b, 'Z', 4096);
    blockdev_op_t op;
    op_init(&op, BLOCKDEV_WRITE, 0, 8192, 4096, b);
    ck_assert_int_eq(blockdev_try_inline(bd, &op), 0); /* never writes */
    ck_assert_int_eq(blockdev_submit(bd, &op), 0);
    wait_done(&c, 1);
    memset(b, 0, 4096);
    op_init(&op, BLOCKDEV_READ, 0, 8192, 4096, b); /* just written: cached */
    int n = blockdev_try_inline(bd, &op);
    if (n == 1) {
        ck_assert_int_eq(op.result, 0);
        ck_assert_int_eq(b[0], 'Z');
    }
    blockdev_destroy(&bd);
    event_base_free(c.base);

    /* --io-time-us: 4 workers, 20 ms per IO => 8 IOs take >= 40 ms */
    blockdev_config_t cfg = {.path = path, .export_size = 1 << 20, .workers = 4,
                             .max_exports = 4, .io_time_us = 20000};
    c.base = event_base_new();
    c.done = 0;
    int err = 0;
    bd = blockdev_new(c.base, &cfg, on_done, &c, &err);
    ck_assert_ptr_nonnull(bd);
    ck_assert_int_eq(blockdev_export(bd, 0, "v", &size), 0);
    op_init(&op, BLOCKDEV_READ, 0, 0, 4096, b);
    ck_assert_int_eq(blockdev_try_inline(bd, &op), 0); /* off with io_time */
    blockdev_op_t ops[8];
    char *bufs[8];
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < 8; i++) {
        bufs[i] = blockdev_alloc(4096);
        op_init(&ops[i], BLOCKDEV_READ, 0, 0, 4096, bufs[i]);
        ck_assert_int_eq(blockdev_submit(bd, &ops[i]), 0);
    }
    wait_done(&c, 8);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    ck_assert_msg(ms >= 39.0, "8 IOs on 4 workers at 20 ms took %.1f ms", ms);
    for (int i = 0; i < 8; i++)
        free(bufs[i]);
    free(b);
    blockdev_destroy(&bd);
    event_base_free(c.base);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {test_blockdev_dir_exports, test_blockdev_extents,
                                  test_blockdev_single_file_not_truncated, test_blockdev_bad_config,
                                  test_blockdev_symlink_in_export_dir_refused,
                                  test_blockdev_full_disk, test_blockdev_direct_aio,
                                  test_blockdev_inline_and_io_time};
    const testlib_case_t c = {.name = "blockdev", .timeout = 30,
                              .setup = setup, .teardown = teardown};
    return testlib_run_case(&c, tests, sizeof tests / sizeof tests[0]);
}
