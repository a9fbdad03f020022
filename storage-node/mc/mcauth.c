/* mcauth.c - memcached's text-protocol authentication (-Y): the auth file and a connection's login (see mcauth.h). */
#include "storage-node/mc/mcauth.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/curvekey.h"

typedef struct {
    const char *user, *pass; /* into mcauth_t.text */
    size_t ulen, plen;
} entry_t;

struct mcauth {
    char *path;
    char *text;      /* the file, its lines cut at ':' and '\n' */
    size_t textlen;
    entry_t *users;
    int n;
};

/* An error about line `line` of source (0: about the whole file), pointing
 * at the line's start: printed FILE:LINE:1. */
#define fail(err, rc, source, line, ...) \
    jsonloc_fail(err, rc, source, line, (line) > 0, __VA_ARGS__)

/* Nonzero if s[0..n) is a usable user or password: not empty, no space
 * or control character (memcached splits the login at spaces). */
static int word_ok(const char *s, size_t n)
{
    if (n == 0)
        return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] <= ' ' || s[i] == 0x7f)
            return 0;
    return 1;
}

static void wipe_free(char *p, size_t n)
{
    if (p) {
        explicit_bzero(p, n);
        free(p);
    }
}

/* Splits text[0..len) (owned by the caller, NUL at text[len]) into users.
 * Returns 0 with *out (malloc'd) and *n, or -errno with err filled. */
static int parse(const char *path, char *text, size_t len, entry_t **out, int *n,
                 jsonloc_err_t *err)
{
    entry_t *e = NULL;
    int cnt = 0, cap = 0, line = 0, rc = 0;
    for (size_t off = 0; off < len;) {
        char *s = text + off;
        char *nl = memchr(s, '\n', len - off);
        size_t ll = nl ? (size_t)(nl - s) : len - off;
        off += ll + (nl ? 1 : 0);
        line++;
        size_t body = ll > 0 && s[ll - 1] == '\r' ? ll - 1 : ll;
        if (ll > MCAUTH_ENTRY_MAX) {
            rc = fail(err, -EINVAL, path, line, "line longer than %d bytes", MCAUTH_ENTRY_MAX);
            goto out;
        }
        char *colon = memchr(s, ':', body);
        if (!colon) {
            rc = fail(err, -EINVAL, path, line, body ? "expected user:password"
                                                     : "empty line: expected user:password");
            goto out;
        }
        size_t ulen = (size_t)(colon - s), plen = body - ulen - 1;
        if (!word_ok(s, ulen) || !word_ok(colon + 1, plen)) {
            rc = fail(err, -EINVAL, path, line,
                      "%s is empty or holds a space or control character: it could never log in",
                      word_ok(s, ulen) ? "the password" : "the user");
            goto out;
        }
        for (int i = 0; i < cnt; i++)
            if (e[i].ulen == ulen && memcmp(e[i].user, s, ulen) == 0) {
                rc = fail(err, -EINVAL, path, line, "user '%.*s' given twice", (int)ulen, s);
                goto out;
            }
        if (cnt == MCAUTH_USERS_MAX) {
            rc = fail(err, -EINVAL, path, line, "more than %d users", MCAUTH_USERS_MAX);
            goto out;
        }
        if (cnt == cap) {
            int ncap = cap ? cap * 2 : 8;
            entry_t *ne = realloc(e, (size_t)ncap * sizeof *ne);
            if (!ne) {
                rc = fail(err, -ENOMEM, path, 0, "out of memory");
                goto out;
            }
            e = ne;
            cap = ncap;
        }
        e[cnt++] = (entry_t){s, colon + 1, ulen, plen};
    }
    if (cnt == 0)
        rc = fail(err, -EINVAL, path, 0, "no user:password line");
out:
    if (rc < 0) {
        free(e);
        return rc;
    }
    *out = e;
    *n = cnt;
    return 0;
}

/* Reads and parses `path` into a (its old contents untouched on error). */
static int load_into(mcauth_t *a, const char *path, jsonloc_err_t *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return fail(err, -errno, path, 0, "cannot open: %s", strerror(errno));
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int rc = -errno;
        close(fd);
        return fail(err, rc, path, 0, "cannot stat: %s", strerror(-rc));
    }
    int rc = curvekey_check_mode(path, st.st_mode, err);
    if (rc < 0) {
        close(fd);
        return rc;
    }
    char *text = malloc(MCAUTH_FILE_MAX + 2);
    if (!text) {
        close(fd);
        return fail(err, -ENOMEM, path, 0, "out of memory");
    }
    size_t len = 0;
    for (;;) {
        ssize_t r = read(fd, text + len, MCAUTH_FILE_MAX + 1 - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            rc = -errno;
            close(fd);
            wipe_free(text, MCAUTH_FILE_MAX + 2);
            return fail(err, rc, path, 0, "cannot read: %s", strerror(-rc));
        }
        if (r == 0 || (len += (size_t)r) > MCAUTH_FILE_MAX)
            break;
    }
    close(fd);
    if (len > MCAUTH_FILE_MAX) {
        wipe_free(text, MCAUTH_FILE_MAX + 2);
        return fail(err, -EINVAL, path, 0, "larger than %d bytes", MCAUTH_FILE_MAX);
    }
    text[len] = '\0';
    entry_t *users = NULL;
    int n = 0;
    if ((rc = parse(path, text, len, &users, &n, err)) < 0) {
        wipe_free(text, MCAUTH_FILE_MAX + 2);
        return rc;
    }
    char *p = path == a->path ? a->path : strdup(path);
    if (!p) {
        free(users);
        wipe_free(text, MCAUTH_FILE_MAX + 2);
        return fail(err, -ENOMEM, path, 0, "out of memory");
    }
    wipe_free(a->text, MCAUTH_FILE_MAX + 2);
    free(a->users);
    a->path = p;
    a->text = text;
    a->users = users;
    a->n = n;
    return 0;
}

mcauth_t *mcauth_load(const char *path, jsonloc_err_t *err, int *rc)
{
    mcauth_t *a = calloc(1, sizeof *a);
    int r = a ? load_into(a, path, err) : fail(err, -ENOMEM, path, 0, "out of memory");
    if (rc)
        *rc = r;
    if (r < 0) {
        mcauth_destroy(&a);
        return NULL;
    }
    return a;
}

int mcauth_reload(mcauth_t *a, jsonloc_err_t *err)
{
    return load_into(a, a->path, err);
}

const char *mcauth_path(const mcauth_t *a)
{
    return a->path;
}

int mcauth_users(const mcauth_t *a)
{
    return a->n;
}

void mcauth_destroy(mcauth_t **ap)
{
    if (!ap || !*ap)
        return;
    wipe_free((*ap)->text, MCAUTH_FILE_MAX + 2);
    free((*ap)->users);
    free((*ap)->path);
    free(*ap);
    *ap = NULL;
}

int mcauth_ct_equal(const char *a, size_t alen, const char *b, size_t blen)
{
    /* Walks the longer length: time depends on the lengths, never on
     * where the first difference is. */
    size_t n = alen > blen ? alen : blen;
    unsigned char d = alen != blen;
    for (size_t i = 0; i < n; i++) {
        unsigned char x = i < alen ? (unsigned char)a[i] : 0;
        unsigned char y = i < blen ? (unsigned char)b[i] : 0;
        d |= x ^ y;
    }
    return d == 0;
}

/* 1: user and password match; 0: the user matched, not the password; -1:
 * no such user.  Every entry is compared either way. */
static int check(const mcauth_t *a, const char *user, size_t ulen, const char *pass,
                 size_t plen)
{
    int user_seen = 0, ok = 0;
    for (int i = 0; i < a->n; i++) {
        int u = mcauth_ct_equal(a->users[i].user, a->users[i].ulen, user, ulen);
        int p = mcauth_ct_equal(a->users[i].pass, a->users[i].plen, pass, plen);
        user_seen |= u;
        ok |= u & p;
    }
    return ok ? 1 : user_seen ? 0 : -1;
}

int mcauth_check(const mcauth_t *a, const char *user, size_t ulen, const char *pass,
                 size_t plen)
{
    return check(a, user, ulen, pass, plen) == 1;
}

/* memcached's tokenize_command(): up to max words of s[0..n) split at
 * runs of spaces.  Returns the number found (at most max). */
static int words(const char *s, size_t n, const char **w, size_t *wl, int max)
{
    int k = 0;
    size_t i = 0;
    while (i < n && k < max) {
        while (i < n && s[i] == ' ')
            i++;
        if (i == n)
            break;
        size_t st = i;
        while (i < n && s[i] != ' ')
            i++;
        w[k] = s + st;
        wl[k++] = i - st;
    }
    return k;
}

/* memcached's safe_strtoul() on a word that may end in '\r': digits, then
 * nothing or whitespace.  Returns 0 with *v, or -1. */
static int size_word(const char *s, size_t n, unsigned long *v)
{
    unsigned long x = 0;
    size_t i = 0;
    if (i < n && s[i] == '+')
        i++;
    size_t d0 = i;
    while (i < n && s[i] >= '0' && s[i] <= '9') {
        if (x > (UINT32_MAX - 9) / 10)
            return -1;
        x = x * 10 + (unsigned long)(s[i++] - '0');
    }
    if (i == d0 || (i < n && s[i] != '\r'))
        return -1;
    *v = x;
    return 0;
}

mcauth_status_t mcauth_step(const mcauth_t *a, gate_t *g, mcauth_conn_t *c, const char *buf,
                            size_t len, mcauth_result_t *res)
{
    res->consumed = 0;
    res->reply = NULL;
    const char *nl = memchr(buf, '\n', len);
    if (!nl) {
        if (len > MCAUTH_LINE_MAX) {
            gate_auth_failed(g, GATE_AUTH_BAD_FORMAT);
            return MCAUTH_CLOSE; /* memcached: junk, no reply */
        }
        return MCAUTH_NEED_MORE;
    }
    size_t ll = (size_t)(nl - buf);
    const char *w[6];
    size_t wl[6];
    unsigned long size = 0;
    int k = words(buf, ll, w, wl, 6);
    if (k < 5 || wl[0] != 3 || memcmp(w[0], "set", 3) != 0 || size_word(w[4], wl[4], &size) < 0) {
        res->consumed = ll + 1;
        res->reply = "CLIENT_ERROR unauthenticated";
        gate_auth_failed(g, GATE_AUTH_UNAUTHENTICATED);
        return MCAUTH_REPLY;
    }
    if (size > MCAUTH_DATA_MAX) {
        res->consumed = ll + 1;
        res->reply = "CLIENT_ERROR bad data chunk";
        gate_auth_failed(g, GATE_AUTH_BAD_FORMAT);
        return MCAUTH_CLOSE;
    }
    size_t need = ll + 1 + size + 2;
    if (len < need)
        return MCAUTH_NEED_MORE;
    res->consumed = need;
    const char *data = nl + 1;
    if (data[size] != '\r' || data[size + 1] != '\n') {
        res->reply = "CLIENT_ERROR bad command line termination";
        gate_auth_failed(g, GATE_AUTH_BAD_FORMAT);
        return MCAUTH_REPLY;
    }
    const char *t[2];
    size_t tl[2];
    if (words(data, size, t, tl, 2) < 2) {
        res->reply = "CLIENT_ERROR bad authentication token format";
        gate_auth_failed(g, GATE_AUTH_BAD_FORMAT);
        return MCAUTH_REPLY;
    }
    int r = check(a, t[0], tl[0], t[1], tl[1]);
    if (r != 1) {
        res->reply = "CLIENT_ERROR authentication failure";
        gate_auth_failed(g, r == 0 ? GATE_AUTH_BAD_PASSWORD : GATE_AUTH_UNKNOWN_USER);
        return MCAUTH_REPLY;
    }
    memcpy(c->user, t[0], tl[0]); /* tl[0] <= MCAUTH_ENTRY_MAX: it matched a line */
    c->user[tl[0]] = '\0';
    c->ok = 1;
    res->reply = "STORED";
    gate_auth_ok(g);
    return MCAUTH_REPLY;
}
