/* sendbatch.c - many sockets' nonblocking sends and receives in one system call (see sendbatch.h). */
#include "storage-node/io/sendbatch.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>

#ifdef HAVE_LIBURING
#include <liburing.h>
#endif

#define SEND_FLAGS (MSG_DONTWAIT | MSG_NOSIGNAL)
#define RECV_FLAGS MSG_DONTWAIT
#define FIXED_MAX 65536u /* the registered-file table's size at most (fd numbers below it) */

struct sendbatch {
    unsigned depth;
    int uring;                 /* the ring is up */
    unsigned long long calls;  /* sendbatch_syscalls() */
    struct msghdr *msg;        /* depth of them: a chunk's headers */
    unsigned nfixed;           /* the ring's file table: slot fd holds socket fd */
    unsigned char *fixed;      /* nfixed flags: fd registered (sendbatch_register()) */
#ifdef HAVE_LIBURING
    struct io_uring ring;
#endif
};

#ifdef HAVE_LIBURING
/* A sparse file table as large as the fd numbers allowed (at most
 * FIXED_MAX), so that a registered socket's slot is its fd number.  None
 * (the kernel or memory refused) is no error: ops then name plain fds. */
static void fixed_init(sendbatch_t *sb)
{
    struct rlimit rl;
    unsigned n = FIXED_MAX;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < n)
        n = (unsigned)rl.rlim_cur;
    if (n == 0 || !(sb->fixed = calloc(n, 1)))
        return;
    if (io_uring_register_files_sparse(&sb->ring, n) < 0) {
        free(sb->fixed);
        sb->fixed = NULL;
        return;
    }
    sb->nfixed = n;
}

/* The ring is gone (queue_exit released its files): no table either. */
static void ring_drop(sendbatch_t *sb)
{
    io_uring_queue_exit(&sb->ring);
    sb->uring = 0;
    free(sb->fixed);
    sb->fixed = NULL;
    sb->nfixed = 0;
}

/* Sets up the ring: the cheapest completion mode this kernel knows, else
 * plainer ones.  Returns 0 or -errno (then there is no ring). */
static int ring_init(sendbatch_t *sb)
{
    static const unsigned tries[] = {
        IORING_SETUP_SUBMIT_ALL | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN,
        IORING_SETUP_SUBMIT_ALL | IORING_SETUP_COOP_TASKRUN,
        0,
    };
    int rc = -ENOSYS;
    for (size_t i = 0; i < sizeof tries / sizeof tries[0]; i++) {
        struct io_uring_params p;
        memset(&p, 0, sizeof p);
        p.flags = tries[i];
        rc = io_uring_queue_init_params(sb->depth, &sb->ring, &p);
        if (rc == 0) {
            fixed_init(sb);
            return 0;
        }
        if (rc != -EINVAL) /* ENOSYS, EPERM (sysctl, seccomp), ENOMEM: no ring at all */
            break;
    }
    return rc;
}

/* Takes every completion the ring holds into its job; returns how many. */
static unsigned reap(sendbatch_t *sb, sendbatch_job_t *jobs, size_t n, unsigned char *done)
{
    struct io_uring_cqe *cqe;
    unsigned head, seen = 0;
    io_uring_for_each_cqe(&sb->ring, head, cqe) {
        uint64_t i = io_uring_cqe_get_data64(cqe);
        if (i < n && !done[i]) { /* else a cancel's own completion */
            jobs[i].res = cqe->res == -ECANCELED ? -EAGAIN : cqe->res;
            done[i] = 1;
        }
        seen++;
    }
    io_uring_cq_advance(&sb->ring, seen);
    return seen;
}

/* One chunk (n <= depth) through the ring.  Sends and receives with
 * MSG_DONTWAIT end at submission; should one not have (an older kernel punting it to wait
 * for room), it is cancelled and counted as a full socket, so nothing
 * outlives the call and the loop never waits for a client.  Returns 0, or
 * -errno if the ring failed (the caller then sends the chunk plainly). */
static int run_ring(sendbatch_t *sb, sendbatch_job_t *jobs, size_t n)
{
    unsigned char done[4096];
    memset(done, 0, n);
    for (size_t i = 0; i < n; i++) {
        struct io_uring_sqe *sqe = io_uring_get_sqe(&sb->ring);
        if (!sqe)
            return -EBUSY; /* cannot happen: n <= depth and the ring was empty */
        memset(&sb->msg[i], 0, sizeof sb->msg[i]);
        sb->msg[i].msg_iov = (struct iovec *)jobs[i].iov;
        sb->msg[i].msg_iovlen = (size_t)jobs[i].iovcnt;
        if (jobs[i].recv && jobs[i].iovcnt == 1) /* no msghdr to import */
            io_uring_prep_recv(sqe, jobs[i].fd, jobs[i].iov[0].iov_base, jobs[i].iov[0].iov_len,
                               RECV_FLAGS);
        else if (jobs[i].recv)
            io_uring_prep_recvmsg(sqe, jobs[i].fd, &sb->msg[i], RECV_FLAGS);
        else if (jobs[i].iovcnt == 1)
            io_uring_prep_send(sqe, jobs[i].fd, jobs[i].iov[0].iov_base, jobs[i].iov[0].iov_len,
                               SEND_FLAGS);
        else
            io_uring_prep_sendmsg(sqe, jobs[i].fd, &sb->msg[i], SEND_FLAGS);
        if ((unsigned)jobs[i].fd < sb->nfixed && sb->fixed[jobs[i].fd])
            sqe->flags |= IOSQE_FIXED_FILE; /* its slot is its fd: no file lookup per op */
        io_uring_sqe_set_data64(sqe, i);
    }
    int rc;
    do {
        rc = io_uring_submit_and_get_events(&sb->ring);
    } while (rc == -EINTR);
    sb->calls++;
    if (rc < 0) {
        /* Nothing was taken: the ring is dropped for good (its queued
         * entries are never submitted) and the caller sends plainly. */
        ring_drop(sb);
        return rc;
    }
    size_t got = reap(sb, jobs, n, done);
    if (got >= n)
        return 0;
    /* Some did not end at submission: cancel them and wait for both
     * completions of each (the op's, then the cancel's). */
    size_t want = 0;
    for (size_t i = 0; i < n; i++) {
        if (done[i])
            continue;
        struct io_uring_sqe *sqe = io_uring_get_sqe(&sb->ring);
        if (!sqe) {
            io_uring_submit(&sb->ring);
            sqe = io_uring_get_sqe(&sb->ring);
        }
        io_uring_prep_cancel64(sqe, i, 0);
        io_uring_sqe_set_data64(sqe, UINT64_MAX);
        want += 2;
    }
    while (want > 0) {
        struct io_uring_cqe *cqe;
        do {
            rc = io_uring_submit_and_wait(&sb->ring, 1);
        } while (rc == -EINTR);
        sb->calls++;
        if (rc < 0 || io_uring_peek_cqe(&sb->ring, &cqe) < 0)
            continue;
        unsigned k = reap(sb, jobs, n, done);
        want = k >= want ? 0 : want - k;
    }
    return 0;
}
#endif

/* One job with sendmsg(2) or recvmsg(2). */
static void run_plain(sendbatch_t *sb, sendbatch_job_t *j)
{
    struct msghdr m;
    memset(&m, 0, sizeof m);
    m.msg_iov = (struct iovec *)j->iov;
    m.msg_iovlen = (size_t)j->iovcnt;
    ssize_t r;
    do {
        r = j->recv ? recvmsg(j->fd, &m, RECV_FLAGS) : sendmsg(j->fd, &m, SEND_FLAGS);
        sb->calls++;
    } while (r < 0 && errno == EINTR);
    j->res = r < 0 ? -errno : r;
    if (j->res == -EWOULDBLOCK)
        j->res = -EAGAIN;
}

sendbatch_t *sendbatch_new(unsigned depth, sendbatch_mode_t mode, int *err)
{
    int rc = 0;
    sendbatch_t *sb = NULL;
    if (depth < 1 || depth > 4096 || (mode != SENDBATCH_AUTO && mode != SENDBATCH_PLAIN)) {
        rc = -EINVAL;
        goto out;
    }
    if (!(sb = calloc(1, sizeof *sb)) || !(sb->msg = calloc(depth, sizeof *sb->msg))) {
        rc = -ENOMEM;
        goto out;
    }
    sb->depth = depth;
#ifdef HAVE_LIBURING
    if (mode == SENDBATCH_AUTO && ring_init(sb) == 0)
        sb->uring = 1;
#endif
out:
    if (rc < 0) {
        if (sb)
            free(sb->msg);
        free(sb);
        sb = NULL;
        if (err)
            *err = rc;
    }
    return sb;
}

int sendbatch_uring(const sendbatch_t *sb)
{
    return sb->uring;
}

int sendbatch_register(sendbatch_t *sb, int fd)
{
    if (fd < 0)
        return -EINVAL;
    if ((unsigned)fd >= sb->nfixed)
        return -ENOSPC; /* no ring, no table, or past it: the plain fd serves */
#ifdef HAVE_LIBURING
    int rc = io_uring_register_files_update(&sb->ring, (unsigned)fd, &fd, 1);
    if (rc == 1) {
        sb->fixed[fd] = 1;
        return 0;
    }
    return rc < 0 ? rc : -EIO;
#else
    return -ENOSPC;
#endif
}

void sendbatch_unregister(sendbatch_t *sb, int fd)
{
    if (fd < 0 || (unsigned)fd >= sb->nfixed || !sb->fixed[fd])
        return;
#ifdef HAVE_LIBURING
    int none = -1;
    sb->fixed[fd] = 0;
    if (io_uring_register_files_update(&sb->ring, (unsigned)fd, &none, 1) != 1)
        ring_drop(sb); /* the table would keep the socket open: drop the ring, plain from now */
#endif
}

void sendbatch_run(sendbatch_t *sb, sendbatch_job_t *jobs, size_t n)
{
    while (n > 0) {
        size_t k = n < sb->depth ? n : sb->depth;
        int rc = -ENOSYS;
#ifdef HAVE_LIBURING
        /* One job gains nothing from the ring: a plain call is as cheap. */
        if (sb->uring && k > 1)
            rc = run_ring(sb, jobs, k);
#endif
        if (rc < 0)
            for (size_t i = 0; i < k; i++)
                run_plain(sb, &jobs[i]);
        jobs += k;
        n -= k;
    }
}

unsigned long long sendbatch_syscalls(const sendbatch_t *sb)
{
    return sb->calls;
}

void sendbatch_destroy(sendbatch_t **sbp)
{
    if (!sbp || !*sbp)
        return;
    sendbatch_t *sb = *sbp;
#ifdef HAVE_LIBURING
    if (sb->uring)
        io_uring_queue_exit(&sb->ring);
#endif
    free(sb->fixed);
    free(sb->msg);
    free(sb);
    *sbp = NULL;
}
