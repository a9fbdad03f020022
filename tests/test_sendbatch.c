/* test_sendbatch.c - Check suite for storage-node/io/sendbatch: each job's bytes reach its own socket in order, one system call per batch through io_uring (one per job plainly), a full socket answers at once (-EAGAIN or what it took) and never blocks, a closed peer gives -EPIPE without SIGPIPE, more jobs than the depth go in chunks, receives (bytes, -EAGAIN, the peer's end) and one-buffer sends in the same batch, registered sockets (through the file table; unregistered, the close ends the stream), bad arguments. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "storage-node/io/sendbatch.h"
#include "tests/testlib.h"

#define NSOCK 40

static int sv[NSOCK][2]; /* [0]: the sender's end, [1]: the peer's */

static void setup(void)
{
    signal(SIGPIPE, SIG_DFL); /* a send that raised it would kill the test */
    for (int i = 0; i < NSOCK; i++) {
        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv[i]), 0);
        fcntl(sv[i][0], F_SETFL, O_NONBLOCK);
        fcntl(sv[i][1], F_SETFL, O_NONBLOCK);
    }
}

static void teardown(void)
{
    for (int i = 0; i < NSOCK; i++) {
        close(sv[i][0]);
        if (sv[i][1] >= 0)
            close(sv[i][1]);
    }
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Job i sends "job <i>:" then "<i * 3> bytes" as two iovecs. */
static char txt[NSOCK][2][32];
static struct iovec iov[NSOCK][2];

static void make_jobs(sendbatch_job_t *jobs, int n)
{
    for (int i = 0; i < n; i++) {
        snprintf(txt[i][0], sizeof txt[i][0], "job %d:", i);
        snprintf(txt[i][1], sizeof txt[i][1], "%d bytes", i * 3);
        iov[i][0] = (struct iovec){txt[i][0], strlen(txt[i][0])};
        iov[i][1] = (struct iovec){txt[i][1], strlen(txt[i][1])};
        jobs[i] = (sendbatch_job_t){.fd = sv[i][0], .iov = iov[i], .iovcnt = 2, .res = 12345};
    }
}

/* Every job's bytes arrived on its own peer, whole and in order. */
static void check_arrived(const sendbatch_job_t *jobs, int n)
{
    for (int i = 0; i < n; i++) {
        char want[64], got[64];
        int wn = snprintf(want, sizeof want, "%s%s", txt[i][0], txt[i][1]);
        ck_assert_int_eq(jobs[i].res, wn);
        ssize_t r = recv(sv[i][1], got, sizeof got, 0);
        ck_assert_int_eq(r, wn);
        ck_assert_int_eq(memcmp(got, want, (size_t)wn), 0);
    }
}

static void run_mode(sendbatch_mode_t mode, unsigned depth)
{
    int err = 0;
    sendbatch_t *sb = sendbatch_new(depth, mode, &err);
    ck_assert_ptr_nonnull(sb);
    if (mode == SENDBATCH_PLAIN)
        ck_assert_int_eq(sendbatch_uring(sb), 0);
    sendbatch_job_t jobs[NSOCK];
    make_jobs(jobs, NSOCK);
    sendbatch_run(sb, jobs, NSOCK);
    check_arrived(jobs, NSOCK);
    unsigned long long calls = sendbatch_syscalls(sb);
    if (sendbatch_uring(sb)) /* one io_uring_enter per chunk of `depth` */
        ck_assert_uint_eq(calls, (NSOCK + depth - 1) / depth);
    else
        ck_assert_uint_eq(calls, NSOCK);
    sendbatch_run(sb, jobs, 0); /* nothing: no call */
    ck_assert_uint_eq(sendbatch_syscalls(sb), calls);
    sendbatch_destroy(&sb);
    ck_assert_ptr_null(sb);
    sendbatch_destroy(&sb); /* NULL is fine */
}

START_TEST(test_sendbatch_one_call_per_batch)
{
    run_mode(SENDBATCH_AUTO, 256);
    /* The build and this kernel have io_uring (scripts/deps.sh installs
     * liburing-dev; the hosts run kernels that have it): say so if not,
     * rather than pass quietly on the plain path. */
    int err = 0;
    sendbatch_t *sb = sendbatch_new(8, SENDBATCH_AUTO, &err);
    ck_assert_ptr_nonnull(sb);
    if (!sendbatch_uring(sb))
        fprintf(stderr, "test_sendbatch: io_uring not available here: the plain path ran\n");
    sendbatch_destroy(&sb);
}
END_TEST

START_TEST(test_sendbatch_plain_same_bytes)
{
    run_mode(SENDBATCH_PLAIN, 256);
}
END_TEST

START_TEST(test_sendbatch_chunks_beyond_depth)
{
    run_mode(SENDBATCH_AUTO, 7); /* 40 jobs: 6 chunks */
}
END_TEST

/* A full socket takes what it has room for (or nothing: -EAGAIN) at once;
 * the other jobs of the batch are not held up by it. */
static void full_socket(sendbatch_mode_t mode)
{
    int err = 0;
    sendbatch_t *sb = sendbatch_new(64, mode, &err);
    ck_assert_ptr_nonnull(sb);
    static char big[1 << 16];
    memset(big, 'x', sizeof big);
    while (send(sv[0][0], big, sizeof big, MSG_DONTWAIT) > 0) /* fill it */
        ;
    sendbatch_job_t jobs[3];
    make_jobs(jobs, 3);
    struct iovec bigv = {big, sizeof big};
    jobs[0].iov = &bigv;
    jobs[0].iovcnt = 1;
    double t0 = now_s();
    sendbatch_run(sb, jobs, 3);
    ck_assert(now_s() - t0 < 0.5);
    ck_assert(jobs[0].res == -EAGAIN || (jobs[0].res > 0 && jobs[0].res < (ssize_t)sizeof big));
    for (int i = 1; i < 3; i++) {
        char got[64];
        ck_assert_int_eq(recv(sv[i][1], got, sizeof got, 0), jobs[i].res);
        ck_assert_int_gt(jobs[i].res, 0);
    }
    sendbatch_destroy(&sb);
}

START_TEST(test_sendbatch_full_socket_does_not_wait)
{
    full_socket(SENDBATCH_AUTO);
}
END_TEST

START_TEST(test_sendbatch_full_socket_plain)
{
    full_socket(SENDBATCH_PLAIN);
}
END_TEST

/* A peer gone: -EPIPE for its job (no SIGPIPE: the default action would
 * end this test), the others delivered. */
START_TEST(test_sendbatch_closed_peer)
{
    int err = 0;
    sendbatch_t *sb = sendbatch_new(64, SENDBATCH_AUTO, &err);
    ck_assert_ptr_nonnull(sb);
    close(sv[1][1]);
    sv[1][1] = -1;
    sendbatch_job_t jobs[3];
    make_jobs(jobs, 3);
    sendbatch_run(sb, jobs, 3);
    ck_assert_int_eq(jobs[1].res, -EPIPE);
    char got[64];
    ck_assert_int_eq(recv(sv[0][1], got, sizeof got, 0), jobs[0].res);
    ck_assert_int_eq(recv(sv[2][1], got, sizeof got, 0), jobs[2].res);
    sendbatch_destroy(&sb);
}
END_TEST

/* Receives and single-buffer sends in one batch with sends: a socket with
 * bytes gives them (into one buffer, or across two iovecs in order), an
 * empty one -EAGAIN at once, one whose peer ended 0; a one-iovec send
 * arrives whole; all in one system call through io_uring. */
static void run_receives(sendbatch_mode_t mode)
{
    int err = 0;
    sendbatch_t *sb = sendbatch_new(256, mode, &err);
    ck_assert_ptr_nonnull(sb);
    static char buf[NSOCK][64];
    static struct iovec riov[NSOCK][2];
    sendbatch_job_t jobs[NSOCK];
    for (int i = 0; i < NSOCK; i++) {
        snprintf(txt[i][0], sizeof txt[i][0], "data %d", i);
        memset(buf[i], 0, sizeof buf[i]);
        int two = i % 8 == 4;
        riov[i][0] = (struct iovec){buf[i], two ? 3 : sizeof buf[i]};
        riov[i][1] = (struct iovec){buf[i] + 3, sizeof buf[i] - 3};
        jobs[i] = (sendbatch_job_t){.fd = sv[i][0], .iov = riov[i], .iovcnt = two ? 2 : 1,
                                    .recv = 1, .res = 12345};
        switch (i % 4) {
        case 0: /* bytes to read */
            ck_assert_int_eq(send(sv[i][1], txt[i][0], strlen(txt[i][0]), 0),
                             (ssize_t)strlen(txt[i][0]));
            break;
        case 2: /* the peer's end */
            ck_assert_int_eq(shutdown(sv[i][1], SHUT_WR), 0);
            break;
        case 3: /* a one-iovec send instead */
            riov[i][0] = (struct iovec){txt[i][0], strlen(txt[i][0])};
            jobs[i].recv = 0;
            break;
        }
    }
    unsigned long long calls = sendbatch_syscalls(sb);
    sendbatch_run(sb, jobs, NSOCK);
    for (int i = 0; i < NSOCK; i++) {
        ssize_t n = (ssize_t)strlen(txt[i][0]);
        char got[64];
        switch (i % 4) {
        case 0:
            ck_assert_int_eq(jobs[i].res, n);
            ck_assert_int_eq(memcmp(buf[i], txt[i][0], (size_t)n), 0);
            break;
        case 1:
            ck_assert_int_eq(jobs[i].res, -EAGAIN);
            break;
        case 2:
            ck_assert_int_eq(jobs[i].res, 0);
            break;
        case 3:
            ck_assert_int_eq(jobs[i].res, n);
            ck_assert_int_eq(recv(sv[i][1], got, sizeof got, 0), n);
            ck_assert_int_eq(memcmp(got, txt[i][0], (size_t)n), 0);
            break;
        }
    }
    ck_assert_uint_eq(sendbatch_syscalls(sb) - calls, sendbatch_uring(sb) ? 1 : NSOCK);
    sendbatch_destroy(&sb);
}

START_TEST(test_sendbatch_receives)
{
    run_receives(SENDBATCH_AUTO);
}
END_TEST

START_TEST(test_sendbatch_receives_plain)
{
    run_receives(SENDBATCH_PLAIN);
}
END_TEST

/* Registered sockets: their jobs go through the ring's file table (seen
 * here by a job that still reaches its socket after the fd number was
 * closed: the table's reference keeps it), every byte as with plain fds;
 * unregistered, the table lets go: closing the fd then ends the stream
 * (the peer reads 0).  Without a ring nothing registers (-ENOSPC). */
START_TEST(test_sendbatch_registered_sockets)
{
    int err = 0;
    sendbatch_t *sb = sendbatch_new(64, SENDBATCH_AUTO, &err);
    ck_assert_ptr_nonnull(sb);
    ck_assert_int_eq(sendbatch_register(sb, -1), -EINVAL);
    if (!sendbatch_uring(sb)) {
        fprintf(stderr, "test_sendbatch: io_uring not available here: no file table to test\n");
        ck_assert_int_eq(sendbatch_register(sb, sv[0][0]), -ENOSPC);
        sendbatch_destroy(&sb);
        return;
    }
    for (int i = 0; i < NSOCK; i++)
        ck_assert_int_eq(sendbatch_register(sb, sv[i][0]), 0);
    sendbatch_job_t jobs[NSOCK];
    make_jobs(jobs, NSOCK);
    sendbatch_run(sb, jobs, NSOCK);
    check_arrived(jobs, NSOCK);
    ck_assert_uint_eq(sendbatch_syscalls(sb), 1);
    /* Socket 0's fd closed while registered: a job on its number still
     * reaches it through the table (a plain send would be -EBADF). */
    int fd0 = sv[0][0];
    ck_assert_int_eq(close(fd0), 0);
    make_jobs(jobs, 2);
    sendbatch_run(sb, jobs, 2);
    check_arrived(jobs, 2);
    char c;
    ck_assert_int_eq(recv(sv[0][1], &c, 1, MSG_DONTWAIT), -1); /* still open */
    ck_assert_int_eq(errno, EAGAIN);
    sendbatch_unregister(sb, fd0); /* the table's reference was the last */
    ck_assert_int_eq(recv(sv[0][1], &c, 1, MSG_DONTWAIT), 0);
    sv[0][0] = socket(AF_UNIX, SOCK_STREAM, 0); /* for teardown's close */
    /* Unregistered before the close, as conns_close() does: the peer sees the end at once. */
    sendbatch_unregister(sb, sv[1][0]);
    sendbatch_unregister(sb, sv[1][0]); /* twice: nothing */
    ck_assert_int_eq(close(sv[1][0]), 0);
    ck_assert_int_eq(recv(sv[1][1], &c, 1, MSG_DONTWAIT), 0);
    sv[1][0] = socket(AF_UNIX, SOCK_STREAM, 0);
    sendbatch_destroy(&sb); /* the rest go with the ring (its teardown is the kernel's, soon after) */
    ck_assert_int_eq(close(sv[2][0]), 0);
    ssize_t r = -1;
    for (double t0 = now_s(); r != 0 && now_s() - t0 < 5; usleep(1000))
        r = recv(sv[2][1], &c, 1, MSG_DONTWAIT);
    ck_assert_int_eq(r, 0);
    sv[2][0] = socket(AF_UNIX, SOCK_STREAM, 0);
    sb = sendbatch_new(8, SENDBATCH_PLAIN, &err);
    ck_assert_ptr_nonnull(sb);
    ck_assert_int_eq(sendbatch_register(sb, sv[3][0]), -ENOSPC);
    sendbatch_unregister(sb, sv[3][0]);
    sendbatch_destroy(&sb);
}
END_TEST

START_TEST(test_sendbatch_bad_arguments)
{
    int err = 0;
    ck_assert_ptr_null(sendbatch_new(0, SENDBATCH_AUTO, &err));
    ck_assert_int_eq(err, -EINVAL);
    err = 0;
    ck_assert_ptr_null(sendbatch_new(4097, SENDBATCH_AUTO, &err));
    ck_assert_int_eq(err, -EINVAL);
    err = 0;
    ck_assert_ptr_null(sendbatch_new(8, (sendbatch_mode_t)7, &err));
    ck_assert_int_eq(err, -EINVAL);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {test_sendbatch_one_call_per_batch, test_sendbatch_plain_same_bytes,
                                  test_sendbatch_chunks_beyond_depth,
                                  test_sendbatch_full_socket_does_not_wait,
                                  test_sendbatch_full_socket_plain, test_sendbatch_closed_peer,
                                  test_sendbatch_bad_arguments, test_sendbatch_receives,
                                  test_sendbatch_receives_plain, test_sendbatch_registered_sockets};
    const testlib_case_t c = {.name = "sendbatch", .setup = setup, .teardown = teardown,
                              .timeout = 30};
    return testlib_run_case(&c, tests, sizeof tests / sizeof tests[0]);
}
