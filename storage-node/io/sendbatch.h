/* sendbatch.h - many sockets' nonblocking sends (and receives) in one system call (io_uring where the kernel allows it, else one sendmsg(2) or recvmsg(2) each).
 *
 * Why: the memcached front writes one reply per request, and on a loaded
 * host each write(2) that wakes a client is also where the node is
 * preempted (the woken client runs at that syscall's exit): about one
 * involuntary context switch per five replies, a fifth of the node's CPU
 * (docs/performance.md, "Per-request CPU").  Sent together, a pass's
 * replies cost one syscall entry and at most one preemption.
 *
 * Every send is MSG_DONTWAIT | MSG_NOSIGNAL: each job ends within
 * sendbatch_run() with what the socket took, exactly as a nonblocking
 * sendmsg(2) of the same iovecs would (io_uring ops with MSG_DONTWAIT
 * complete at submission, never wait for room); so the memory named by the
 * jobs is needed only during the call.  With io_uring the ring is made with
 * IORING_SETUP_SINGLE_ISSUER (and DEFER_TASKRUN where known), so only the
 * thread that made it may run batches.
 *
 * Receives (a job's .recv set) run the same way, MSG_DONTWAIT: each ends
 * within the call with what the socket held, 0 at the peer's end of
 * stream, or -EAGAIN; the memcached front reads a pass's readable
 * connections with one call (conns.h, conns_read_batched()).
 *
 * Threads: a sendbatch_t belongs to the thread that made it. */
#ifndef BQOS_SENDBATCH_H
#define BQOS_SENDBATCH_H

#include <stddef.h>
#include <sys/types.h>
#include <sys/uio.h>

/* One socket's send: fd and the bytes (iovcnt >= 1 iovecs, in order); res
 * is set by sendbatch_run(): bytes taken (possibly fewer than offered:
 * the socket is full), or -errno (-EAGAIN: full, nothing taken).  With
 * recv set, a receive into the iovecs instead: res is the bytes read, 0
 * at the peer's end of stream, or -errno (-EAGAIN: nothing to read). */
typedef struct {
    int fd;
    const struct iovec *iov;
    int iovcnt;
    int recv;
    ssize_t res;
} sendbatch_job_t;

typedef struct sendbatch sendbatch_t;

/* How sendbatch_new() may send. */
typedef enum {
    SENDBATCH_AUTO = 0,  /* io_uring if the kernel (and seccomp, sysctl) allows, else plain */
    SENDBATCH_PLAIN,     /* one sendmsg(2) per job */
} sendbatch_mode_t;

/* Makes a batcher taking up to `depth` (1..4096) jobs per system call
 * (sendbatch_run() takes any number, in chunks).  Returns it (the caller
 * owns it: sendbatch_destroy()), or NULL and *err = -EINVAL or -ENOMEM.
 * io_uring refused (ENOSYS, EPERM, a kernel without it, a build without
 * liburing) is no error: the batcher then sends plainly. */
sendbatch_t *sendbatch_new(unsigned depth, sendbatch_mode_t mode, int *err);

/* Nonzero if batches go through io_uring. */
int sendbatch_uring(const sendbatch_t *sb);

/* Registers socket fd in the ring's file table (its slot is its fd
 * number), so that its jobs skip the kernel's file lookup and reference
 * count per op.  The table holds a reference to the socket: the caller
 * must call sendbatch_unregister() before it closes fd (else the socket,
 * and the connection, live on until the slot is reused).  Returns 0, or
 * -ENOSPC (no ring, no table, or fd past the table's size: its jobs name
 * the plain fd, as without registering), -EINVAL, another -errno.  The
 * thread that made sb. */
int sendbatch_register(sendbatch_t *sb, int fd);

/* Takes fd out of the table (nothing if it is not there).  Should the
 * kernel refuse, the ring is dropped (its files with it) and sb sends
 * plainly from then on.  The thread that made sb. */
void sendbatch_unregister(sendbatch_t *sb, int fd);

/* Runs the n jobs (n may be 0), each socket once; fills every res.  Jobs
 * naming one fd twice are run in job order only in plain mode: give each
 * fd once.  The thread that made sb. */
void sendbatch_run(sendbatch_t *sb, sendbatch_job_t *jobs, size_t n);

/* System calls made by sendbatch_run() so far (io_uring_enter or sendmsg):
 * for tests and stats. */
unsigned long long sendbatch_syscalls(const sendbatch_t *sb);

/* Frees sb (its ring); sets *sbp to NULL.  Accepts NULL. */
void sendbatch_destroy(sendbatch_t **sbp);

#endif
