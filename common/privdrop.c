/* privdrop.c - dropping root: switch to an unprivileged user after binding, and check that root cannot come back. */
#include "common/privdrop.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/num.h"

/* The target of `user`: its uid, primary gid and, for a name, the name
 * (initgroups); *name NULL for a bare uid that has no entry.  Returns 0
 * or -ENOENT. */
static int lookup(const char *user, uid_t *uid, gid_t *gid, char *name, size_t cap)
{
    struct passwd pw, *res = NULL;
    char buf[4096];
    int64_t n;
    if (getpwnam_r(user, &pw, buf, sizeof buf, &res) == 0 && res) {
        *uid = res->pw_uid;
        *gid = res->pw_gid;
        snprintf(name, cap, "%s", res->pw_name);
        return 0;
    }
    if (num_i64_in(user, 0, 0x7ffffffe, &n) < 0)
        return -ENOENT;
    *uid = (uid_t)n;
    if (getpwuid_r(*uid, &pw, buf, sizeof buf, &res) == 0 && res) {
        *gid = res->pw_gid;
        snprintf(name, cap, "%s", res->pw_name);
    } else {
        *gid = (gid_t)n; /* a bare uid: its group of the same number */
        name[0] = '\0';
    }
    return 0;
}

/* Nonzero when every id of the process is uid/gid and root cannot be
 * taken back. */
static int dropped(uid_t uid, gid_t gid)
{
    uid_t r, e, s;
    gid_t rg, eg, sg;
    if (getresuid(&r, &e, &s) < 0 || getresgid(&rg, &eg, &sg) < 0)
        return 0;
    if (r != uid || e != uid || s != uid || rg != gid || eg != gid || sg != gid)
        return 0;
    return setuid(0) < 0 && seteuid(0) < 0 && setgid(0) < 0;
}

int privdrop_apply(const char *user)
{
    if (!user) {
        if (geteuid() == 0)
            log_warn("running as root, which nothing here needs (only ports below 1024): "
                     "give --user NAME, or start as an unprivileged user");
        return 0;
    }
    uid_t uid;
    gid_t gid;
    char name[256];
    if (lookup(user, &uid, &gid, name, sizeof name) < 0) {
        log_error("--user %s: no such user", user);
        return -ENOENT;
    }
    if (uid == 0) {
        log_error("--user %s is root: name an unprivileged user", user);
        return -EINVAL;
    }
    if (geteuid() != 0) {
        if (getuid() == uid && geteuid() == uid && dropped(uid, getgid()))
            return 0; /* already that user: nothing to drop */
        log_error("--user %s: only root may switch users (running as uid %u)", user,
                  (unsigned)geteuid());
        return -EPERM;
    }
    int rc = name[0] ? initgroups(name, gid) : setgroups(0, NULL);
    if (rc < 0 || setresgid(gid, gid, gid) < 0 || setresuid(uid, uid, uid) < 0) {
        rc = -errno;
        log_error("--user %s: cannot switch to uid %u gid %u: %s", user, (unsigned)uid,
                  (unsigned)gid, strerror(-rc));
        return rc;
    }
    if (!dropped(uid, gid)) {
        log_error("--user %s: root could be regained after the switch: refusing to run", user);
        return -EIO;
    }
    log_info("running as user %s (uid %u, gid %u)", user, (unsigned)uid, (unsigned)gid);
    return 0;
}
