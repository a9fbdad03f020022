/* privdrop.h - dropping root: a daemon started as root switches to an unprivileged user once its sockets are bound and its files open, and checks that root cannot come back. */
#ifndef BQOS_PRIVDROP_H
#define BQOS_PRIVDROP_H

/* Switches the whole process (every thread: glibc applies set*id to all)
 * to `user`, a name from the password database or a numeric uid: the
 * user's supplementary groups (initgroups; none for a bare uid), its
 * primary group (real, effective and saved), then the user (the same
 * three).  Then checks that every id is the target's and that setuid(0)
 * and setgid(0) fail.  Call after every socket is bound and every file
 * the daemon keeps is open, before serving; the caller must not go on
 * when it fails.
 *
 * user NULL: nothing is switched; a process running as root is warned
 * about (it needs root for nothing but ports below 1024).  A process that
 * is not root and already runs as `user` has nothing to drop: 0.
 *
 * Returns 0 (logged at info with the ids), or -errno, logged at error:
 * -ENOENT (no such user), -EINVAL (user root, uid 0), -EPERM (not root and
 * not that user, or a switch refused), -EIO (root could be regained). */
int privdrop_apply(const char *user);

#endif
