/* blockdev.c - file/device block backend: per-export files, worker pool (workpool.h), kernel AIO with O_DIRECT (see blockdev.h). */
#include "storage-node/nbd/blockdev.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <linux/aio_abi.h>
#include <limits.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "storage-node/io/workpool.h"

#define container_of(p, T, m) ((T *)(void *)((char *)(p) - offsetof(T, m)))

#define ALIGN 4096u
#define AIO_BATCH 64       /* kernel AIO ops per io_submit / io_getevents */

/* One opened export: a buffered descriptor, and with --direct an O_DIRECT
 * one for aligned IOs.  Written on the loop thread before any op of the
 * export is submitted, read-only afterwards. */
typedef struct {
    int fd, dfd;
    uint64_t size;
    int opened;
    int err;               /* cached failure, or 0 */
} bexport_t;

struct blockdev {
    struct event_base *base;
    blockdev_done_fn done;
    void *arg;
    char *path;
    int single;            /* path is one file or device */
    uint64_t export_size;
    int direct;
    int nworkers;
    int max_exports;
    bexport_t *ex;         /* max_exports entries */
    workpool_t *wp;        /* the workers, one op at a time; its eventfd
                              also signals kernel AIO completions */
    int stopping;          /* loop thread: blockdev_destroy() has begun */
    int no_nowait;         /* RWF_NOWAIT unsupported here: stop trying */
    aio_context_t aio;     /* --direct: kernel AIO for aligned IOs (0: none) */
    int aio_inflight;      /* loop thread */
    /* AIO ops submitted since the last io_submit (loop thread): they go
     * to the kernel together once the loop's current callbacks are done
     * (commit_ev), so a burst of requests costs one system call and one
     * device notification instead of one each. */
    struct iocb pend[AIO_BATCH];
    int npend;
    struct event *commit_ev;
    uint32_t io_time_us;
    /* single mode: the shared descriptors */
    int sfd, sdfd;
    int dirfd;             /* the export directory (not single), else -1 */
    uint64_t ssize;
};

static int aligned(const blockdev_op_t *op)
{
    return (op->offset % ALIGN) == 0 && (op->length % ALIGN) == 0 &&
           ((uintptr_t)op->buf % ALIGN) == 0;
}

/* Runs one op on the calling worker thread.  Returns 0 or -errno. */
static int run_op(blockdev_t *bd, blockdev_op_t *op)
{
    bexport_t *e = &bd->ex[op->export_id];
    int fd = (e->dfd >= 0 && aligned(op)) ? e->dfd : e->fd;
    size_t done = 0;
    switch (op->kind) {
    case BLOCKDEV_READ:
        while (done < op->length) {
            ssize_t n = pread(fd, (char *)op->buf + done, op->length - done,
                              (off_t)(op->offset + done));
            if (n < 0) {
                if (errno == EINTR)
                    continue;
                return -errno;
            }
            if (n == 0) { /* past the end of a file that shrank: zeroes */
                memset((char *)op->buf + done, 0, op->length - done);
                break;
            }
            done += (size_t)n;
        }
        return 0;
    case BLOCKDEV_WRITE:
        while (done < op->length) {
            struct iovec iov = {(char *)op->buf + done, op->length - done};
            ssize_t n = pwritev2(fd, &iov, 1, (off_t)(op->offset + done),
                                 op->fua ? RWF_DSYNC : 0);
            if (n < 0) {
                if (errno == EINTR)
                    continue;
                if (errno == EOPNOTSUPP && op->fua) {
                    /* Old kernel: no RWF_DSYNC; write, then sync below. */
                    n = pwrite(fd, iov.iov_base, iov.iov_len,
                               (off_t)(op->offset + done));
                    if (n < 0)
                        return -errno;
                    done += (size_t)n;
                    if (done == op->length && fdatasync(fd) < 0)
                        return -errno;
                    continue;
                }
                return -errno;
            }
            if (n == 0)
                return -ENOSPC;
            done += (size_t)n;
        }
        return 0;
    case BLOCKDEV_FLUSH:
        return fdatasync(e->fd) < 0 ? -errno : 0;
    case BLOCKDEV_EXTENTS: {
        int n = blockdev_extents(bd, op->export_id, op->offset, op->length, op->buf,
                                 op->max_extents);
        if (n < 0)
            return n;
        op->nextents = (uint32_t)n;
        return 0;
    }
    case BLOCKDEV_TRIM:
        if (op->length == 0)
            return 0;
        if (fallocate(e->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                      (off_t)op->offset, (off_t)op->length) < 0) {
            /* A trim is a hint: where holes are not supported, do nothing. */
            if (errno == EOPNOTSUPP || errno == ENOSYS || errno == ENODEV)
                return 0;
            return -errno;
        }
        if (op->fua && fdatasync(e->fd) < 0)
            return -errno;
        return 0;
    }
    return -EINVAL;
}

/* The pool's run, on a worker: one op (batch 1). */
static void run_item(void *ctx, workpool_item_t **items, size_t n, void *arg)
{
    (void)ctx;
    (void)n;
    blockdev_t *bd = arg;
    blockdev_op_t *op = container_of(items[0], blockdev_op_t, link);
    struct timespec t0;
    if (bd->io_time_us)
        clock_gettime(CLOCK_MONOTONIC, &t0);
    op->result = run_op(bd, op);
    if (bd->io_time_us) {
        /* Emulated device time: sleep out the rest of io_time_us. */
        t0.tv_nsec += (long)bd->io_time_us * 1000;
        t0.tv_sec += t0.tv_nsec / 1000000000L;
        t0.tv_nsec %= 1000000000L;
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t0, NULL) == EINTR)
            ;
    }
}

/* Runs the callbacks of every op the workers finished.  Loop thread. */
static void deliver(blockdev_t *bd)
{
    workpool_item_t *it = workpool_collect(bd->wp);
    while (it) {
        workpool_item_t *next = it->next;
        it->next = NULL;
        bd->done(container_of(it, blockdev_op_t, link), bd->arg);
        it = next;
    }
}

static void queue_for_worker(blockdev_t *bd, blockdev_op_t *op);

/* Collects finished kernel AIO ops and runs their callbacks (loop thread).
 * With `wait`, blocks until every op in flight has finished. */
static void aio_reap(blockdev_t *bd, int wait)
{
    struct io_event ev[AIO_BATCH];
    while (bd->aio_inflight > 0) {
        struct timespec zero = {0, 0};
        long n = syscall(SYS_io_getevents, bd->aio, wait ? 1 : 0, (long)AIO_BATCH, ev,
                         wait ? NULL : &zero);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return;
        for (long i = 0; i < n; i++) {
            blockdev_op_t *op = (blockdev_op_t *)(uintptr_t)ev[i].data;
            long long res = (long long)ev[i].res;
            bd->aio_inflight--;
            if (res >= 0 && (uint64_t)res < op->length) {
                if (op->kind == BLOCKDEV_READ) {
                    /* Past the end of the file: zeroes. */
                    memset((char *)op->buf + res, 0, op->length - (size_t)res);
                    res = 0;
                } else if (bd->stopping) {
                    res = -EIO;
                } else {
                    /* A short write is redone whole by a worker (pwrite
                     * loops), never reported as success. */
                    queue_for_worker(bd, op);
                    continue;
                }
            }
            op->result = res < 0 ? (int)res : 0;
            bd->done(op, bd->arg);
        }
        if (!wait && n < AIO_BATCH)
            return; /* the ring is empty: no second system call to learn it */
    }
}

/* The pool's ready: a worker finished an op, or the kernel an AIO one (both
 * write the pool's eventfd). */
static void on_ready(void *arg)
{
    blockdev_t *bd = arg;
    if (bd->aio)
        aio_reap(bd, 0);
    deliver(bd);
}

/* Hands the gathered AIO ops to the kernel in one io_submit; any the kernel
 * refuses go to the worker pool instead.  Loop thread. */
static void aio_commit(blockdev_t *bd)
{
    struct iocb *cbs[AIO_BATCH];
    int n = bd->npend, done = 0;
    bd->npend = 0;
    for (int i = 0; i < n; i++)
        cbs[i] = &bd->pend[i];
    while (done < n) {
        long k = syscall(SYS_io_submit, bd->aio, (long)(n - done), cbs + done);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        bd->aio_inflight += (int)k;
        done += (int)k;
    }
    for (int i = done; i < n; i++)
        queue_for_worker(bd, (blockdev_op_t *)(uintptr_t)cbs[i]->aio_data);
}

static void on_commit(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    aio_commit(arg);
}

/* Gathers an aligned READ or non-FUA WRITE on the O_DIRECT descriptor for
 * kernel AIO (completion signalled on the eventfd); the batch is submitted
 * when the loop's current callbacks are done, or at once when full. */
static void aio_add(blockdev_t *bd, blockdev_op_t *op)
{
    bexport_t *e = &bd->ex[op->export_id];
    struct iocb *cb = &bd->pend[bd->npend++];
    memset(cb, 0, sizeof *cb);
    cb->aio_data = (uint64_t)(uintptr_t)op;
    cb->aio_lio_opcode = op->kind == BLOCKDEV_READ ? IOCB_CMD_PREAD : IOCB_CMD_PWRITE;
    cb->aio_fildes = (uint32_t)e->dfd;
    cb->aio_buf = (uint64_t)(uintptr_t)op->buf;
    cb->aio_nbytes = op->length;
    cb->aio_offset = (int64_t)op->offset;
    cb->aio_flags = IOCB_FLAG_RESFD;
    cb->aio_resfd = (uint32_t)workpool_eventfd(bd->wp);
    if (bd->npend == AIO_BATCH)
        aio_commit(bd);
    else if (bd->npend == 1)
        event_active(bd->commit_ev, EV_TIMEOUT, 1);
}

/* Size of an open file or block device.  Returns 0 or -errno. */
static int fd_size(int fd, uint64_t *size)
{
    struct stat st;
    if (fstat(fd, &st) < 0)
        return -errno;
    if (S_ISBLK(st.st_mode)) {
        uint64_t s;
        if (ioctl(fd, BLKGETSIZE64, &s) < 0)
            return -errno;
        *size = s;
        return 0;
    }
    *size = (uint64_t)st.st_size;
    return 0;
}

/* Opens the store: the operator's own file or device (dirfd < 0: `path`
 * as given, created if missing), or an export's file `path` inside the
 * export directory dirfd.  In the directory nothing outside it is ever
 * opened or grown: no symbolic link is followed (O_NOFOLLOW: -ELOOP), only a
 * regular file with one link is used (-EPERM otherwise: a hard link would
 * expose another file), and only a file created here or found empty is
 * sized to `want`; an existing non-empty file keeps its size.  The single
 * file is grown to `want` only when empty; neither is ever shrunk (that
 * would destroy data).  Also opens with O_DIRECT if asked, checked to be
 * the same file.  Returns 0 or -errno. */
static int open_store(blockdev_t *bd, int dirfd, const char *path, uint64_t want,
                      int *fd_out, int *dfd_out, uint64_t *size_out)
{
    int rc = 0;
    int base = O_RDWR | O_CLOEXEC | O_NOCTTY | (dirfd >= 0 ? O_NOFOLLOW : 0);
    int at = dirfd >= 0 ? dirfd : AT_FDCWD;
    int fd = openat(at, path, base);
    if (fd < 0 && errno == ENOENT)
        fd = openat(at, path, base | O_CREAT | O_EXCL, dirfd >= 0 ? 0600 : 0644);
    int dfd = -1;
    if (fd < 0)
        return -errno;
    uint64_t size = 0;
    struct stat st;
    if ((rc = fd_size(fd, &size)) < 0)
        goto out;
    if (fstat(fd, &st) < 0) {
        rc = -errno;
        goto out;
    }
    if (dirfd >= 0 && (!S_ISREG(st.st_mode) || st.st_nlink != 1)) {
        log_warn("NBD export file %s is not a plain file of its own (%s): refused", path,
                 S_ISREG(st.st_mode) ? "more than one hard link" : "not a regular file");
        rc = -EPERM;
        goto out;
    }
    if (S_ISREG(st.st_mode) && size == 0) {
        if (ftruncate(fd, (off_t)want) < 0) {
            rc = -errno;
            goto out;
        }
        size = want;
    }
    if (bd->direct) {
        struct stat dst;
        dfd = openat(at, path, base | O_DIRECT);
        if (dfd < 0) {
            rc = -errno;
            goto out;
        }
        if (fstat(dfd, &dst) < 0 || dst.st_dev != st.st_dev || dst.st_ino != st.st_ino) {
            rc = -EAGAIN; /* the name was replaced between the two opens */
            goto out;
        }
    }
    *fd_out = fd;
    *dfd_out = dfd;
    *size_out = size;
out:
    if (rc < 0) {
        close(fd);
        if (dfd >= 0)
            close(dfd);
    }
    return rc;
}

blockdev_t *blockdev_new(struct event_base *base, const blockdev_config_t *cfg,
                         blockdev_done_fn done, void *arg, int *err)
{
    int rc = 0;
    blockdev_t *bd = NULL;
    if (!base || !cfg || !cfg->path || !*cfg->path || !done || cfg->export_size == 0 ||
        cfg->workers < 1 || cfg->workers > 1024 || cfg->max_exports < 1) {
        rc = -EINVAL;
        goto out;
    }
    struct stat st;
    int is_dir;
    if (stat(cfg->path, &st) == 0) {
        is_dir = S_ISDIR(st.st_mode);
        if (!is_dir && !S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode)) {
            rc = -EINVAL;
            goto out;
        }
    } else if (errno == ENOENT && cfg->path[strlen(cfg->path) - 1] == '/') {
        if (mkdir(cfg->path, 0755) < 0) {
            rc = -errno;
            goto out;
        }
        is_dir = 1;
    } else if (errno == ENOENT) {
        is_dir = 0; /* a new single file */
    } else {
        rc = -errno;
        goto out;
    }
    bd = calloc(1, sizeof *bd);
    if (!bd) {
        rc = -ENOMEM;
        goto out;
    }
    bd->sfd = bd->sdfd = bd->dirfd = -1;
    bd->base = base;
    bd->done = done;
    bd->arg = arg;
    bd->single = !is_dir;
    bd->export_size = cfg->export_size;
    bd->direct = cfg->direct;
    bd->nworkers = cfg->workers;
    bd->max_exports = cfg->max_exports;
    bd->io_time_us = cfg->io_time_us;
    bd->no_nowait = cfg->io_time_us > 0;
    bd->path = strdup(cfg->path);
    bd->ex = calloc((size_t)cfg->max_exports, sizeof *bd->ex);
    if (!bd->path || !bd->ex) {
        rc = -ENOMEM;
        goto out;
    }
    for (int i = 0; i < cfg->max_exports; i++)
        bd->ex[i].fd = bd->ex[i].dfd = -1;
    if (!bd->single && (bd->dirfd = open(bd->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
        rc = -errno;
        goto out;
    }
    if (bd->single) {
        rc = open_store(bd, -1, bd->path, cfg->export_size, &bd->sfd, &bd->sdfd, &bd->ssize);
        if (rc == 0 && bd->ssize == 0)
            rc = -EINVAL;
        if (rc < 0)
            goto out;
    }
    workpool_config_t pc = {.workers = bd->nworkers, .batch = 1, .finish_queued = 0,
                            .run = run_item, .ready = on_ready, .arg = bd};
    if (!(bd->wp = workpool_new(base, &pc, &rc)))
        goto out;
    if (bd->direct && !bd->io_time_us &&
        syscall(SYS_io_setup, (unsigned)(bd->nworkers < 64 ? 256 : 4 * bd->nworkers),
                &bd->aio) < 0) {
        log_warn("io_setup: %s; O_DIRECT IOs go through the worker pool", strerror(errno));
        bd->aio = 0;
    }
    bd->commit_ev = event_new(base, -1, 0, on_commit, bd);
    if (!bd->commit_ev) {
        rc = -ENOMEM;
        goto out;
    }
out:
    if (rc < 0) {
        blockdev_destroy(&bd);
        if (err)
            *err = rc;
        return NULL;
    }
    return bd;
}

static int name_ok(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > 250 || strchr(name, '/') || strcmp(name, ".") == 0 ||
        strcmp(name, "..") == 0)
        return 0;
    return 1;
}

int blockdev_export(blockdev_t *bd, int id, const char *name, uint64_t *size)
{
    if (!bd || id < 0 || id >= bd->max_exports || !name)
        return -EINVAL;
    bexport_t *e = &bd->ex[id];
    if (!e->opened) {
        if (bd->single) {
            e->fd = bd->sfd;
            e->dfd = bd->sdfd;
            e->size = bd->ssize;
        } else if (!name_ok(name)) {
            return -EINVAL;
        } else {
            char path[NAME_MAX + 1];
            snprintf(path, sizeof path, "%s.img", name);
            int rc = open_store(bd, bd->dirfd, path, bd->export_size, &e->fd, &e->dfd, &e->size);
            if (rc < 0)
                return rc;
            log_debug("export %s: %s/%s, %llu bytes%s", name, bd->path, path,
                      (unsigned long long)e->size, bd->direct ? ", O_DIRECT" : "");
        }
        e->opened = 1;
    }
    *size = e->size;
    return 0;
}

int blockdev_submit(blockdev_t *bd, blockdev_op_t *op)
{
    if (op->export_id < 0 || op->export_id >= bd->max_exports ||
        !bd->ex[op->export_id].opened)
        return -EINVAL;
    if (bd->stopping)
        return -ESHUTDOWN;
    if (bd->aio && op->length > 0 && aligned(op) &&
        (op->kind == BLOCKDEV_READ || (op->kind == BLOCKDEV_WRITE && !op->fua)) &&
        bd->ex[op->export_id].dfd >= 0) {
        aio_add(bd, op);
        return 0;
    }
    queue_for_worker(bd, op);
    return 0;
}

/* Appends op to the workers' queue (never refused before
 * blockdev_destroy(), which completes what is still queued -ESHUTDOWN). */
static void queue_for_worker(blockdev_t *bd, blockdev_op_t *op)
{
    workpool_submit_chain(bd->wp, &op->link, &op->link, 1);
}

int blockdev_try_inline(blockdev_t *bd, blockdev_op_t *op)
{
    if (bd->no_nowait || op->kind != BLOCKDEV_READ || op->export_id < 0 ||
        op->export_id >= bd->max_exports || !bd->ex[op->export_id].opened)
        return 0;
    bexport_t *e = &bd->ex[op->export_id];
    if (e->dfd >= 0 && aligned(op))
        return 0; /* O_DIRECT reads always go to the device */
    size_t done = 0;
    while (done < op->length) {
        struct iovec iov = {(char *)op->buf + done, op->length - done};
        ssize_t n = preadv2(e->fd, &iov, 1, (off_t)(op->offset + done), RWF_NOWAIT);
        if (n < 0) {
            if (errno == EOPNOTSUPP || errno == ENOSYS || errno == EINVAL)
                bd->no_nowait = 1;
            return 0; /* EAGAIN: not all cached; a worker reads it all */
        }
        if (n == 0) {
            memset((char *)op->buf + done, 0, op->length - done);
            break;
        }
        done += (size_t)n;
    }
    op->result = 0;
    return 1;
}

int blockdev_extents(blockdev_t *bd, int id, uint64_t offset, uint32_t length,
                     blockdev_extent_t *ext, uint32_t max)
{
    if (!bd || id < 0 || id >= bd->max_exports || !bd->ex[id].opened || length == 0 ||
        max < 1 || !ext)
        return -EINVAL;
    const bexport_t *e = &bd->ex[id];
    uint64_t end = offset + length;
    if (end < offset || end > e->size)
        return -EINVAL;
    struct stat st;
    if (fstat(e->fd, &st) < 0)
        return -errno;
    /* A file grown past its size would report the tail as data; an
     * export never extends past e->size anyway. */
    uint32_t n = 0;
    uint64_t pos = offset;
    while (pos < end && n < max) {
        uint64_t next = end;
        uint32_t flags = 0;
        if (S_ISREG(st.st_mode)) {
            off_t d = lseek(e->fd, (off_t)pos, SEEK_DATA);
            if (d < 0 && errno == ENXIO) {
                flags = BLOCKDEV_EXT_HOLE; /* no data from pos to the end of file */
            } else if (d < 0) {
                if (errno != EINVAL && errno != EOPNOTSUPP)
                    return -errno;
                /* no SEEK_DATA here: everything is data */
            } else if ((uint64_t)d > pos) {
                flags = BLOCKDEV_EXT_HOLE;
                next = (uint64_t)d;
            } else {
                off_t h = lseek(e->fd, (off_t)pos, SEEK_HOLE);
                if (h < 0 && errno != ENXIO)
                    return -errno;
                if (h >= 0 && (uint64_t)h > pos)
                    next = (uint64_t)h;
            }
        }
        if (next > end)
            next = end;
        if (n > 0 && ext[n - 1].flags == flags) {
            ext[n - 1].length += (uint32_t)(next - pos); /* the file changed meanwhile */
        } else {
            ext[n].length = (uint32_t)(next - pos);
            ext[n].flags = flags;
            n++;
        }
        pos = next;
    }
    return (int)n;
}

int blockdev_direct(const blockdev_t *bd)
{
    return bd->direct;
}

void *blockdev_alloc(size_t len)
{
    void *p = NULL;
    if (posix_memalign(&p, ALIGN, len ? len : ALIGN) != 0)
        return NULL;
    return p;
}

void blockdev_destroy(blockdev_t **bdp)
{
    if (!bdp || !*bdp)
        return;
    blockdev_t *bd = *bdp;
    if (bd->npend > 0)
        aio_commit(bd); /* gathered but not yet submitted: run them too */
    bd->stopping = 1;
    /* The workers stop after their current op; what they never started
     * completes -ESHUTDOWN. */
    workpool_item_t *never = bd->wp ? workpool_stop(bd->wp) : NULL;
    if (bd->aio) {
        /* Kernel AIO cannot be abandoned: wait for it, then deliver. */
        if (bd->done)
            aio_reap(bd, 1);
        syscall(SYS_io_destroy, bd->aio);
        bd->aio = 0;
    }
    if (bd->done && bd->wp) {
        deliver(bd);
        while (never) {
            workpool_item_t *next = never->next;
            never->next = NULL;
            blockdev_op_t *op = container_of(never, blockdev_op_t, link);
            op->result = -ESHUTDOWN;
            bd->done(op, bd->arg);
            never = next;
        }
    }
    workpool_destroy(&bd->wp);
    if (bd->commit_ev)
        event_free(bd->commit_ev);
    if (bd->ex) {
        for (int i = 0; i < bd->max_exports; i++) {
            if (bd->single || !bd->ex[i].opened)
                continue;
            close(bd->ex[i].fd);
            if (bd->ex[i].dfd >= 0)
                close(bd->ex[i].dfd);
        }
    }
    if (bd->sfd >= 0)
        close(bd->sfd);
    if (bd->sdfd >= 0)
        close(bd->sdfd);
    if (bd->dirfd >= 0)
        close(bd->dirfd);
    free(bd->ex);
    free(bd->path);
    free(bd);
    *bdp = NULL;
}

uint64_t blockdev_op_bytes(const blockdev_op_t *op)
{
    int data = op->kind == BLOCKDEV_READ || op->kind == BLOCKDEV_WRITE;
    return data && op->result == 0 ? op->length : 0;
}
