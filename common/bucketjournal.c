/* bucketjournal.c - the writer of a bucket file's journal: fsync'ed lines, compaction in a worker thread. */
#include "common/bucketjournal.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"

/* Two locks, taken in this order when both are: `mu` is the file's (held
 * for an append and its fdatasync, and by the compaction around its marker
 * and its cut), `qmu` the state's (the queue, the counters, the identity:
 * held for a few instructions only, so that the owner's thread never waits
 * for a disk).  Fields marked "both" are written holding both, read under
 * either. */
struct bucketjournal {
    char *path;            /* the bucket file */
    char *jpath;           /* its journal */
    size_t bound;          /* compact_bytes as given (0: default) */
    pthread_mutex_t mu;
    /* Under mu: */
    int fd;                /* the journal, O_APPEND */
    uint64_t size;         /* its bytes */
    int crash_at;          /* tests: the worker stops there (0: never) */
    int test_delay_ms;     /* tests: each append waits this long first */
    int test_fail;         /* tests: the next appends fail with this */
    /* Both: */
    bucketfile_ident_t ident; /* what the bucket file holds: the table the
                                 journal extends */
    bucketjournal_stats_t st;
    uint64_t retry_at;     /* after a failed compaction, none is started
                              again before the journal reaches this size
                              (a quarter of the bound more): a failure
                              that lasts costs a parse per so many changes,
                              not per change */
    int done;              /* the compaction worker has finished */
    /* The compaction worker (only the owner's thread starts and joins it): */
    pthread_t th;
    int joinable;
    /* The appends (bucketjournal_queue()): a ring of lines in the order
     * queued, written by the writer thread, under qmu. */
    pthread_mutex_t qmu;
    pthread_cond_t qcv;    /* the writer waits for lines or the stop */
    pthread_cond_t dcv;    /* bucketjournal_flush() waits for the writer */
    char *ring[BUCKETJOURNAL_PENDING_MAX];
    size_t head, count;    /* the oldest pending line; lines pending (the
                              ones being written included) */
    uint64_t queued;       /* tickets given (the last one) */
    uint64_t durable;      /* every ticket up to this one is durable */
    int fail_rc;           /* a write failed: every pending line fails
                              with it, none is written until the owner
                              collected it (bucketjournal_done()) */
    uint64_t fail_from;    /* the first ticket that failed */
    char fail_msg[256];
    int stop;              /* the writer drains the ring and ends */
    int efd;               /* eventfd: readable when something finished */
    pthread_t wth;         /* the writer */
    int writer;            /* it runs */
};

static char *read_range(const char *jpath, uint64_t from, uint64_t to);
static int open_journal(const char *jpath, mode_t mode);
static void *writer(void *arg);
static uint64_t bound_of(const bucketjournal_t *j, int64_t file_size);

/* A journal that extends another version of the file (edited by hand,
 * then loaded without it: bucketfile_load() said so) is set aside as
 * PATH.journal.ignored, and the journal starts empty.  Returns 0 or
 * -errno. */
static int set_aside_stale(bucketjournal_t *j)
{
    if (j->size == 0)
        return 0;
    char *text = read_range(j->jpath, 0, j->size), *aside = NULL;
    if (!text)
        return -EIO;
    int rc = 0;
    if (!bucketfile_journal_extends(text, j->size, &j->ident)) {
        if (asprintf(&aside, "%s.ignored", j->jpath) < 0) {
            aside = NULL;
            rc = -ENOMEM;
        } else if (rename(j->jpath, aside) < 0) {
            rc = -errno;
        } else {
            int fd = open_journal(j->jpath, 0644);
            if (fd < 0) {
                rc = fd;
            } else {
                close(j->fd);
                j->fd = fd;
                j->size = 0;
                pthread_mutex_lock(&j->qmu);
                j->st.bytes = 0;
                pthread_mutex_unlock(&j->qmu);
                log_warn("%s extends another version of %s: set aside as %s", j->jpath, j->path,
                         aside);
            }
        }
    }
    free(aside);
    free(text);
    return rc;
}

/* The bound for a file of `file_size` bytes. */
static uint64_t bound_of(const bucketjournal_t *j, int64_t file_size)
{
    if (j->bound)
        return j->bound;
    uint64_t q = file_size > 0 ? (uint64_t)file_size / 4 : 0;
    return q > BUCKETJOURNAL_COMPACT_MIN ? q : BUCKETJOURNAL_COMPACT_MIN;
}

/* Cuts a torn last line (no '\n') off the journal at fd of `size` bytes.
 * Returns the size kept, or -errno. */
static int64_t cut_torn(int fd, int64_t size)
{
    char buf[4096];
    int64_t end = size;
    while (end > 0) {
        size_t n = end > (int64_t)sizeof buf ? sizeof buf : (size_t)end;
        ssize_t got = pread(fd, buf, n, end - (int64_t)n);
        if (got != (ssize_t)n)
            return got < 0 ? -errno : -EIO;
        for (size_t i = n; i > 0; i--)
            if (buf[i - 1] == '\n') {
                int64_t keep = end - (int64_t)n + (int64_t)i;
                if (keep != size && (ftruncate(fd, keep) < 0 || fdatasync(fd) < 0))
                    return -errno;
                return keep;
            }
        end -= (int64_t)n;
    }
    if (size && (ftruncate(fd, 0) < 0 || fdatasync(fd) < 0))
        return -errno;
    return 0;
}

/* Opens the journal for appending.  Returns the fd or -errno. */
static int open_journal(const char *jpath, mode_t mode)
{
    int fd = open(jpath, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, mode);
    return fd < 0 ? -errno : fd;
}

/* fsyncs the directory of `path` (a rename or a creation in it). */
static void sync_dir(const char *path)
{
    char *d = strdup(path);
    int dfd = d ? open(dirname(d), O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    free(d);
}

int bucketjournal_new(const char *path, const bucketfile_t *bf, size_t compact_bytes,
                      bucketjournal_t **out, char *msg, size_t size)
{
    int rc = 0;
    bucketjournal_t *j = calloc(1, sizeof *j);
    if (!j || !(j->path = strdup(path)) || !(j->jpath = bucketfile_journal_path(path))) {
        rc = -ENOMEM;
        snprintf(msg, size, "out of memory");
        goto fail;
    }
    j->fd = -1;
    j->efd = -1;
    j->bound = compact_bytes;
    pthread_mutex_init(&j->mu, NULL);
    pthread_mutex_init(&j->qmu, NULL);
    pthread_cond_init(&j->qcv, NULL);
    pthread_cond_init(&j->dcv, NULL);
    if (bucketfile_origin(bf, &j->ident) < 0)
        j->ident = (bucketfile_ident_t){0};
    struct stat st;
    mode_t mode = stat(path, &st) == 0 ? (st.st_mode & 0666) : 0644;
    if ((rc = open_journal(j->jpath, mode)) < 0) {
        snprintf(msg, size, "cannot open %s: %s", j->jpath, strerror(-rc));
        goto fail;
    }
    j->fd = rc;
    int64_t keep;
    if (fstat(j->fd, &st) < 0 || (keep = cut_torn(j->fd, st.st_size)) < 0) {
        rc = -errno;
        snprintf(msg, size, "cannot read %s: %s", j->jpath, strerror(errno));
        goto fail;
    }
    j->size = (uint64_t)keep;
    j->st.bytes = j->size;
    if ((rc = set_aside_stale(j)) < 0) {
        snprintf(msg, size, "cannot set %s aside: %s", j->jpath, strerror(-rc));
        goto fail;
    }
    sync_dir(j->jpath);
    if ((j->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0 ||
        (rc = -pthread_create(&j->wth, NULL, writer, j)) < 0) {
        rc = rc < 0 ? rc : -errno;
        snprintf(msg, size, "cannot start the journal's writer: %s", strerror(-rc));
        goto fail;
    }
    j->writer = 1;
    *out = j;
    return 0;
fail:
    bucketjournal_destroy(&j);
    return rc < 0 ? rc : -ENOMEM;
}

void bucketjournal_wait(bucketjournal_t *j)
{
    if (j && j->joinable) {
        pthread_join(j->th, NULL);
        j->joinable = 0;
    }
}

void bucketjournal_destroy(bucketjournal_t **jp)
{
    if (!jp || !*jp)
        return;
    bucketjournal_t *j = *jp;
    bucketjournal_wait(j);
    if (j->writer) { /* it writes what is pending first */
        pthread_mutex_lock(&j->qmu);
        j->stop = 1;
        pthread_cond_signal(&j->qcv);
        pthread_mutex_unlock(&j->qmu);
        pthread_join(j->wth, NULL);
    }
    if (j->jpath) {
        if (j->fd >= 0)
            close(j->fd);
        if (j->efd >= 0)
            close(j->efd);
        for (size_t k = 0; k < j->count; k++)
            free(j->ring[(j->head + k) % BUCKETJOURNAL_PENDING_MAX]);
        pthread_mutex_destroy(&j->mu);
        pthread_mutex_destroy(&j->qmu);
        pthread_cond_destroy(&j->qcv);
        pthread_cond_destroy(&j->dcv);
    }
    free(j->path);
    free(j->jpath);
    free(j);
    *jp = NULL;
}

int bucketjournal_check(bucketjournal_t *j, char *msg, size_t size)
{
    pthread_mutex_lock(&j->qmu);
    bucketfile_ident_t id = j->ident;
    pthread_mutex_unlock(&j->qmu);
    if (!id.exists && !id.size && !id.hash)
        return 0; /* no file known (none at start): nothing to lose */
    return bucketfile_check_ident(&id, j->path, msg, size);
}

void bucketjournal_stats(bucketjournal_t *j, bucketjournal_stats_t *st)
{
    pthread_mutex_lock(&j->qmu);
    *st = j->st;
    st->running = j->joinable && !j->done;
    st->pending = j->count;
    pthread_mutex_unlock(&j->qmu);
}

/* ---- compaction (the worker) ---------------------------------------------- */

typedef struct {
    bucketjournal_t *j;
    uint64_t upto;         /* journal bytes folded into the new file */
    bucketfile_ident_t was; /* the file it started from */
} compaction_t;

/* The worker's stops for the crash tests (bucketjournal_test_crash()). */
enum { CRASH_NONE, CRASH_BEFORE_MARK, CRASH_BEFORE_RENAME, CRASH_BEFORE_CUT };

/* Before the rename: the file is still the one the journal extends, and
 * the marker goes in (every line before `upto` is in the new file). */
static int mark(void *arg, const char *path, int64_t size, uint64_t hash)
{
    compaction_t *c = arg;
    bucketjournal_t *j = c->j;
    char msg[512];
    if (j->crash_at == CRASH_BEFORE_MARK)
        return -ECANCELED;
    if (bucketfile_check_ident(&c->was, path, msg, sizeof msg) < 0) {
        log_warn("not compacting the journal: %s", msg);
        return -ESTALE;
    }
    char *m = bucketfile_journal_marker(size, hash, c->upto);
    if (!m)
        return -ENOMEM;
    pthread_mutex_lock(&j->mu);
    int rc = bucketfile_journal_write(j->fd, m, strlen(m));
    if (rc == 0) {
        j->size += strlen(m);
        pthread_mutex_lock(&j->qmu);
        j->st.bytes = j->size;
        pthread_mutex_unlock(&j->qmu);
    }
    pthread_mutex_unlock(&j->mu);
    free(m);
    if (rc == 0 && j->crash_at == CRASH_BEFORE_RENAME)
        return -ECANCELED;
    return rc;
}

/* Reads journal bytes [from, to) of jpath into a new buffer. */
static char *read_range(const char *jpath, uint64_t from, uint64_t to)
{
    int fd = open(jpath, O_RDONLY | O_CLOEXEC);
    char *b = fd >= 0 ? malloc(to - from + 1) : NULL;
    size_t n = 0;
    while (b && from + n < to) {
        ssize_t got = pread(fd, b + n, to - from - n, (off_t)(from + n));
        if (got <= 0) {
            free(b);
            b = NULL;
            break;
        }
        n += (size_t)got;
    }
    if (b)
        b[n] = '\0';
    if (fd >= 0)
        close(fd);
    return b;
}

/* After the rename: the journal becomes what came after `upto`, markers
 * left out (a temporary journal renamed over it), under the lock so that
 * no line is appended meanwhile. */
static void cut(void *arg, const char *path, const bucketfile_ident_t *id)
{
    compaction_t *c = arg;
    bucketjournal_t *j = c->j;
    (void)path;
    if (j->crash_at == CRASH_BEFORE_CUT)
        return;
    pthread_mutex_lock(&j->mu);
    pthread_mutex_lock(&j->qmu);
    j->ident = *id;
    pthread_mutex_unlock(&j->qmu);
    char *tail = read_range(j->jpath, c->upto, j->size), *tmp = NULL;
    int fd = -1, rc = -ENOMEM;
    size_t kept = 0;
    if (!tail || asprintf(&tmp, "%s.tmp", j->jpath) < 0) {
        tmp = NULL;
        goto out;
    }
    if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0) {
        rc = -errno;
        goto out;
    }
    char *base = bucketfile_journal_base(id->size, id->hash);
    if (!base) {
        rc = -ENOMEM;
        goto out;
    }
    size_t bl = strlen(base);
    int any = 0; /* a line to keep: the base line goes first */
    for (char *l = tail; *l && !any;) {
        char *nl = strchr(l, '\n');
        any = strncmp(l, "{\"compacted\":", 13) != 0 && strncmp(l, "{\"base\":", 8) != 0;
        l = nl ? nl + 1 : l + strlen(l);
    }
    rc = !any || write(fd, base, bl) == (ssize_t)bl ? 0 : -EIO;
    free(base);
    if (rc < 0)
        goto out;
    kept = any ? bl : 0;
    for (char *l = tail; *l;) {
        char *nl = strchr(l, '\n');
        size_t len = nl ? (size_t)(nl - l) + 1 : strlen(l);
        if (strncmp(l, "{\"compacted\":", 13) != 0 && strncmp(l, "{\"base\":", 8) != 0) {
            if ((rc = (write(fd, l, len) == (ssize_t)len) ? 0 : -EIO) < 0)
                goto out;
            kept += len;
        }
        l += len;
    }
    if (fsync(fd) < 0 || rename(tmp, j->jpath) < 0) {
        rc = -errno;
        goto out;
    }
    sync_dir(j->jpath);
    int nfd = open_journal(j->jpath, 0644);
    if (nfd < 0) { /* the old descriptor names the old, unlinked journal */
        rc = nfd;
        log_error("%s: cannot open it again (%s): changes are refused until a restart",
                  j->jpath, strerror(-rc));
        close(j->fd);
        j->fd = -1;
        free(tmp);
        tmp = NULL;
        goto out;
    }
    close(j->fd);
    j->fd = nfd;
    j->size = kept;
    pthread_mutex_lock(&j->qmu);
    j->st.bytes = kept;
    pthread_mutex_unlock(&j->qmu);
    rc = 0;
out:
    if (rc < 0) {
        /* The old journal stays, marker and all: it loads right; the next
         * compaction cuts it. */
        log_warn("compaction of %s: the journal was not cut (%s): it loads right as it is",
                 j->jpath, strerror(-rc));
        if (tmp)
            unlink(tmp);
    }
    if (fd >= 0)
        close(fd);
    pthread_mutex_unlock(&j->mu);
    free(tail);
    free(tmp);
}

static void *worker(void *arg)
{
    compaction_t *c = arg;
    bucketjournal_t *j = c->j;
    bucketfile_t *bf = NULL;
    jsonloc_err_t err;
    char msg[768], *text = NULL;
    int rc = bucketfile_load_file(j->path, &bf, &err);
    if (rc < 0) {
        bucketfile_strerror(&err, msg, sizeof msg);
        goto out;
    }
    bucketfile_ident_t now;
    bucketfile_origin(bf, &now);
    if (now.size != c->was.size || now.hash != c->was.hash) {
        rc = -ESTALE;
        snprintf(msg, sizeof msg, "%s changed by hand since it was loaded; reload it", j->path);
        goto out;
    }
    c->was = now; /* its inode and mtime as read now */
    if (!(text = read_range(j->jpath, 0, c->upto))) {
        rc = -EIO;
        snprintf(msg, sizeof msg, "cannot read %s", j->jpath);
        goto out;
    }
    if ((rc = bucketfile_journal_apply(bf, text, c->upto, j->jpath, NULL, &err)) < 0) {
        bucketfile_strerror(&err, msg, sizeof msg);
        goto out;
    }
    bucketfile_save_opts_t o = {.no_check = 1, .before_rename = mark, .after_rename = cut,
                                .arg = c};
    rc = bucketfile_save_ex(bf, j->path, &o, msg, sizeof msg);
out:
    pthread_mutex_lock(&j->mu);
    pthread_mutex_lock(&j->qmu);
    if (rc == 0)
        j->st.compactions++;
    else if (rc != -ECANCELED)
        j->st.failures++;
    j->retry_at = rc < 0 ? j->size + bound_of(j, j->ident.size) / 4 : 0;
    j->done = 1;
    pthread_mutex_unlock(&j->qmu);
    pthread_mutex_unlock(&j->mu);
    if (rc < 0 && rc != -ECANCELED)
        log_warn("compaction of %s abandoned (the journal keeps every change): %s", j->jpath,
                 msg);
    else if (rc == 0)
        log_info("%s folded into %s", j->jpath, j->path);
    bucketfile_destroy(&bf);
    free(text);
    free(c);
    return NULL;
}

int bucketjournal_compact(bucketjournal_t *j)
{
    if (j->joinable) {
        pthread_mutex_lock(&j->qmu);
        int done = j->done;
        pthread_mutex_unlock(&j->qmu);
        if (!done)
            return -EBUSY;
        bucketjournal_wait(j);
    }
    compaction_t *c = calloc(1, sizeof *c);
    if (!c)
        return -ENOMEM;
    c->j = j;
    pthread_mutex_lock(&j->qmu); /* st.bytes: what is written (durable) */
    c->upto = j->st.bytes;
    c->was = j->ident;
    j->done = 0;
    pthread_mutex_unlock(&j->qmu);
    int rc = pthread_create(&j->th, NULL, worker, c);
    if (rc != 0) {
        free(c);
        return -rc;
    }
    j->joinable = 1;
    return 0;
}

/* ---- appends: the writer thread ------------------------------------------------ */

/* Writes the `n` pending lines from ring slot `head` as one write and one
 * fdatasync (the base line first when the journal is empty).  On the
 * writer's thread, under mu.  Returns 0, or -errno with msg filled (the
 * journal then cut back to its last whole line). */
static int write_lines(bucketjournal_t *j, size_t head, size_t n, char *msg, size_t size)
{
    if (j->test_delay_ms > 0) {
        struct timespec ts = {j->test_delay_ms / 1000, (long)(j->test_delay_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    char *base = NULL;
    if (j->size == 0 && j->ident.exists && /* the file these lines extend, first */
        !(base = bucketfile_journal_base(j->ident.size, j->ident.hash))) {
        snprintf(msg, size, "out of memory");
        return -ENOMEM;
    }
    size_t len = base ? strlen(base) : 0;
    for (size_t k = 0; k < n; k++)
        len += strlen(j->ring[(head + k) % BUCKETJOURNAL_PENDING_MAX]);
    char *buf = malloc(len + 1);
    if (!buf) {
        free(base);
        snprintf(msg, size, "out of memory");
        return -ENOMEM;
    }
    size_t off = 0;
    if (base) {
        memcpy(buf, base, strlen(base));
        off = strlen(base);
    }
    for (size_t k = 0; k < n; k++) {
        const char *l = j->ring[(head + k) % BUCKETJOURNAL_PENDING_MAX];
        memcpy(buf + off, l, strlen(l));
        off += strlen(l);
    }
    int rc = j->test_fail ? j->test_fail
                          : j->fd >= 0 ? bucketfile_journal_write(j->fd, buf, len) : -EBADF;
    if (rc == 0) {
        j->size += len;
        pthread_mutex_lock(&j->qmu);
        j->st.bytes = j->size;
        j->st.appends += n;
        pthread_mutex_unlock(&j->qmu);
    } else {
        /* What a failed write left (part of a line) must not join the
         * next one: cut back to the last whole line. */
        if (j->fd >= 0 && ftruncate(j->fd, (off_t)j->size) < 0)
            log_warn("%s: cannot cut a failed write: %s", j->jpath, strerror(errno));
        snprintf(msg, size, "cannot write %s: %s", j->jpath, strerror(-rc));
    }
    free(buf);
    free(base);
    return rc;
}

/* The writer: takes every pending line at once (a group commit), writes
 * and syncs them under mu, then says so (the eventfd, dcv).  After a
 * failure it writes nothing until the owner has collected it: the lines
 * queued after a failed one were made on top of it and fail with it. */
static void *writer(void *arg)
{
    bucketjournal_t *j = arg;
    char msg[256];
    pthread_mutex_lock(&j->qmu);
    for (;;) {
        while (!j->stop && (j->count == 0 || j->fail_rc))
            pthread_cond_wait(&j->qcv, &j->qmu);
        if (j->count == 0 || j->fail_rc)
            break; /* stopped, with nothing it may write */
        size_t n = j->count, head = j->head;
        uint64_t first = j->queued - n + 1;
        pthread_mutex_unlock(&j->qmu);
        /* The owner adds lines after these, never touches these. */
        pthread_mutex_lock(&j->mu);
        int rc = write_lines(j, head, n, msg, sizeof msg);
        pthread_mutex_unlock(&j->mu);
        pthread_mutex_lock(&j->qmu);
        for (size_t k = 0; k < n; k++) {
            free(j->ring[(head + k) % BUCKETJOURNAL_PENDING_MAX]);
            j->ring[(head + k) % BUCKETJOURNAL_PENDING_MAX] = NULL;
        }
        j->head = (head + n) % BUCKETJOURNAL_PENDING_MAX;
        j->count -= n;
        if (rc == 0) {
            j->durable = first + n - 1;
        } else {
            j->fail_rc = rc;
            j->fail_from = first;
            snprintf(j->fail_msg, sizeof j->fail_msg, "%s", msg);
        }
        uint64_t one = 1;
        if (write(j->efd, &one, sizeof one) < 0 && errno != EAGAIN)
            log_warn("%s: cannot wake the loop: %s", j->jpath, strerror(errno));
        pthread_cond_broadcast(&j->dcv);
    }
    pthread_mutex_unlock(&j->qmu);
    return NULL;
}

/* Queues `line` (owned, freed).  Returns 0 with its ticket in *ticket, or
 * -errno with msg filled. */
static int queue(bucketjournal_t *j, char *line, uint64_t *ticket, char *msg, size_t size)
{
    if (!line) {
        snprintf(msg, size, "out of memory");
        return -ENOMEM;
    }
    int rc = 0;
    pthread_mutex_lock(&j->qmu);
    if (j->fail_rc) {
        rc = j->fail_rc;
        snprintf(msg, size, "%s (the changes waiting for it are being undone)", j->fail_msg);
    } else if (j->count >= BUCKETJOURNAL_PENDING_MAX) {
        rc = -EBUSY;
        snprintf(msg, size, "busy: %d changes are waiting for the disk to take %s; try again",
                 BUCKETJOURNAL_PENDING_MAX, j->jpath);
    } else if (!j->writer) {
        rc = -EBADF;
        snprintf(msg, size, "%s has no writer", j->jpath);
    } else {
        j->ring[(j->head + j->count) % BUCKETJOURNAL_PENDING_MAX] = line;
        j->count++;
        j->queued++;
        if (ticket)
            *ticket = j->queued;
        line = NULL;
        pthread_cond_signal(&j->qcv);
    }
    pthread_mutex_unlock(&j->qmu);
    free(line);
    return rc;
}

int bucketjournal_queue_set(bucketjournal_t *j, const bucketfile_bucket_t *b, uint64_t version,
                            uint64_t *ticket, char *msg, size_t size)
{
    return queue(j, bucketfile_journal_set_line(b, version), ticket, msg, size);
}

int bucketjournal_queue_remove(bucketjournal_t *j, const char *name, uint64_t version,
                               uint64_t *ticket, char *msg, size_t size)
{
    return queue(j, bucketfile_journal_remove_line(name, version), ticket, msg, size);
}

int bucketjournal_fd(const bucketjournal_t *j)
{
    return j->efd;
}

size_t bucketjournal_done(bucketjournal_t *j, bucketjournal_done_t *d)
{
    uint64_t v;
    if (read(j->efd, &v, sizeof v) < 0 && errno != EAGAIN)
        log_warn("%s: eventfd: %s", j->jpath, strerror(errno));
    memset(d, 0, sizeof *d);
    pthread_mutex_lock(&j->qmu);
    d->durable = j->durable;
    if (j->fail_rc) {
        /* The writer holds none of the lines left: they fail too. */
        d->rc = j->fail_rc;
        d->failed_from = j->fail_from;
        d->failed_to = j->queued;
        snprintf(d->msg, sizeof d->msg, "%s", j->fail_msg);
        for (size_t k = 0; k < j->count; k++) {
            free(j->ring[(j->head + k) % BUCKETJOURNAL_PENDING_MAX]);
            j->ring[(j->head + k) % BUCKETJOURNAL_PENDING_MAX] = NULL;
        }
        j->head = (j->head + j->count) % BUCKETJOURNAL_PENDING_MAX;
        j->count = 0;
        j->fail_rc = 0;
    }
    size_t pending = j->count;
    uint64_t bound = bound_of(j, j->ident.size);
    int due = j->st.bytes > bound && j->st.bytes >= j->retry_at && !(j->joinable && !j->done);
    pthread_mutex_unlock(&j->qmu);
    if (due && bucketjournal_compact(j) == -EAGAIN)
        log_warn("%s: cannot start a compaction thread", j->jpath);
    return pending;
}

size_t bucketjournal_flush(bucketjournal_t *j, double timeout_s)
{
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    if (timeout_s > 0) {
        double ns = (double)dl.tv_nsec + timeout_s * 1e9;
        dl.tv_sec += (time_t)(ns / 1e9);
        dl.tv_nsec = (long)(ns - (double)(time_t)(ns / 1e9) * 1e9);
    }
    pthread_mutex_lock(&j->qmu);
    while (j->count > 0 && !j->fail_rc && j->writer)
        if (timeout_s < 0)
            pthread_cond_wait(&j->dcv, &j->qmu);
        else if (pthread_cond_timedwait(&j->dcv, &j->qmu, &dl) == ETIMEDOUT)
            break;
    size_t left = j->fail_rc ? 0 : j->count;
    pthread_mutex_unlock(&j->qmu);
    return left;
}

/* The synchronous append: queued, waited for, collected. */
static int append(bucketjournal_t *j, char *line, char *msg, size_t size)
{
    uint64_t t;
    int rc = queue(j, line, &t, msg, size);
    if (rc < 0)
        return rc;
    bucketjournal_flush(j, -1);
    bucketjournal_done_t d;
    bucketjournal_done(j, &d);
    if (d.rc < 0 && t >= d.failed_from) {
        snprintf(msg, size, "%s", d.msg);
        return d.rc;
    }
    return 0;
}

int bucketjournal_set(bucketjournal_t *j, const bucketfile_bucket_t *b, uint64_t version,
                      char *msg, size_t size)
{
    return append(j, bucketfile_journal_set_line(b, version), msg, size);
}

int bucketjournal_remove(bucketjournal_t *j, const char *name, uint64_t version, char *msg,
                         size_t size)
{
    return append(j, bucketfile_journal_remove_line(name, version), msg, size);
}

/* ---- whole saves -------------------------------------------------------------- */

static int save_mark(void *arg, const char *path, int64_t size, uint64_t hash)
{
    bucketjournal_t *j = arg;
    (void)path;
    if (j->size == 0)
        return 0;
    char *m = bucketfile_journal_marker(size, hash, j->size);
    if (!m)
        return -ENOMEM;
    int rc = bucketfile_journal_write(j->fd, m, strlen(m));
    if (rc == 0)
        j->size += strlen(m);
    free(m);
    return rc;
}

static void save_cut(void *arg, const char *path, const bucketfile_ident_t *id)
{
    bucketjournal_t *j = arg;
    (void)path;
    pthread_mutex_lock(&j->qmu);
    j->ident = *id;
    pthread_mutex_unlock(&j->qmu);
    if (ftruncate(j->fd, 0) < 0 || fdatasync(j->fd) < 0) {
        /* the marker keeps its lines out of the next load */
        log_warn("%s: cannot empty it: %s", j->jpath, strerror(errno));
        return;
    }
    j->size = 0;
    pthread_mutex_lock(&j->qmu);
    j->st.bytes = 0;
    j->retry_at = 0;
    pthread_mutex_unlock(&j->qmu);
}

int bucketjournal_save(bucketjournal_t *j, bucketfile_t *bf, char *msg, size_t size)
{
    bucketjournal_wait(j); /* the worker is gone */
    bucketjournal_flush(j, -1); /* and the writer idle */
    int rc = bucketjournal_check(j, msg, size);
    if (rc < 0)
        return rc;
    bucketfile_save_opts_t o = {.no_check = 1, .before_rename = save_mark,
                                .after_rename = save_cut, .arg = j};
    pthread_mutex_lock(&j->mu);
    rc = bucketfile_save_ex(bf, j->path, &o, msg, size);
    pthread_mutex_unlock(&j->mu);
    return rc;
}

int bucketjournal_rebase(bucketjournal_t *j, const bucketfile_t *bf)
{
    bucketfile_ident_t id;
    if (bucketfile_origin(bf, &id) < 0)
        return -ENOENT;
    bucketjournal_wait(j);
    bucketjournal_flush(j, -1);
    pthread_mutex_lock(&j->mu);
    pthread_mutex_lock(&j->qmu);
    j->ident = id;
    pthread_mutex_unlock(&j->qmu);
    int rc = set_aside_stale(j);
    pthread_mutex_unlock(&j->mu);
    return rc;
}

/* Tests: the worker stops at `point` (1: before the marker, 2: after the
 * marker before the rename, 3: after the rename before the journal is
 * cut), as if the process died there.  Declared in the test only. */
void bucketjournal_test_crash(bucketjournal_t *j, int point);
void bucketjournal_test_crash(bucketjournal_t *j, int point)
{
    j->crash_at = point;
}

/* Tests: every append waits `delay_ms` first (a slow disk), and fails
 * with `fail` (< 0; 0: writes as usual).  Declared in the test only. */
void bucketjournal_test_io(bucketjournal_t *j, int delay_ms, int fail);
void bucketjournal_test_io(bucketjournal_t *j, int delay_ms, int fail)
{
    pthread_mutex_lock(&j->mu);
    j->test_delay_ms = delay_ms;
    j->test_fail = fail;
    pthread_mutex_unlock(&j->mu);
}
