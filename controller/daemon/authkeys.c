/* authkeys.c - the controller's authorized keys file: one "ROLE NAME PUBKEY" line per peer, parsed with positions, looked up by public key. */
#include "controller/daemon/authkeys.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/names.h"
#include "common/strmap.h"

#define FILE_MAX (4 << 20) /* 4 MiB: ~50,000 peers */

struct authkeys {
    authkeys_entry_t *v; /* [n] */
    size_t n;
    strmap_t *by_key; /* Z85 key -> index in v */
};

static const char *const role_names[AUTHKEYS__COUNT] = {"node", "admin", "reader"};

const char *authkeys_role_str(authkeys_role_t r)
{
    return (unsigned)r < AUTHKEYS__COUNT ? role_names[r] : NULL;
}

void authkeys_destroy(authkeys_t **ap)
{
    if (!ap || !*ap)
        return;
    authkeys_t *a = *ap;
    strmap_destroy(&a->by_key);
    free(a->v);
    free(a);
    *ap = NULL;
}

static int fail(jsonloc_err_t *err, int rc, const char *source, int line, int col,
                const char *text)
{
    if (err) {
        jsonloc_err_clear(err);
        snprintf(err->source, sizeof err->source, "%s", source);
        err->line = line;
        err->col = col;
        snprintf(err->text, sizeof err->text, "%s", text);
    }
    return rc;
}

/* Adds line `line`'s words (role, name, key) to a; returns 0 or the error. */
static int add_line(authkeys_t *a, const curvekey_word_t *w, const char *source, int line,
                    size_t *cap, jsonloc_err_t *err)
{
    int role = -1;
    for (int r = 0; r < AUTHKEYS__COUNT; r++)
        if (w[0].len == strlen(role_names[r]) && memcmp(w[0].s, role_names[r], w[0].len) == 0)
            role = r;
    if (role < 0)
        return fail(err, -EINVAL, source, line, w[0].col,
                    "expected a role: node, admin or reader");
    if (names_check(w[1].s, w[1].len) < 0)
        return fail(err, -EINVAL, source, line, w[1].col,
                    "bad name: 1..250 bytes without whitespace or control characters");
    if (curvekey_z85_check(w[2].s, w[2].len) < 0)
        return fail(err, -EINVAL, source, line, w[2].col,
                    "not a CURVE public key (40 Z85 characters, as in NAME.pub)");
    if (a->n == *cap) {
        size_t c = *cap ? 2 * *cap : 16;
        authkeys_entry_t *v = realloc(a->v, c * sizeof *v);
        if (!v)
            return -ENOMEM;
        a->v = v;
        *cap = c;
    }
    authkeys_entry_t *e = &a->v[a->n];
    e->role = (authkeys_role_t)role;
    memcpy(e->name, w[1].s, w[1].len);
    e->name[w[1].len] = '\0';
    memcpy(e->key, w[2].s, CURVEKEY_Z85_LEN);
    e->key[CURVEKEY_Z85_LEN] = '\0';
    int rc = strmap_insert(a->by_key, e->key, CURVEKEY_Z85_LEN, (int)a->n);
    if (rc == -EEXIST)
        return fail(err, -EINVAL, source, line, w[2].col,
                    "this key is already authorized on an earlier line (one peer per key)");
    if (rc < 0)
        return rc;
    a->n++;
    return 0;
}

int authkeys_parse(const char *text, size_t len, const char *source, authkeys_t **out,
                   jsonloc_err_t *err)
{
    *out = NULL;
    authkeys_t *a = calloc(1, sizeof *a);
    int rc = -ENOMEM;
    size_t cap = 0;
    if (!a || !(a->by_key = strmap_new()))
        goto out;
    rc = 0;
    int line = 1;
    for (size_t i = 0; i < len && rc == 0; line++) {
        const char *eol = memchr(text + i, '\n', len - i);
        size_t ll = eol ? (size_t)(eol - (text + i)) : len - i;
        curvekey_word_t w[3];
        int extra = 0, nw = curvekey_split(text + i, ll, w, 3, &extra);
        if (memchr(text + i, '\0', ll))
            rc = fail(err, -EINVAL, source, line, (int)((const char *)memchr(text + i, '\0', ll) -
                                                        (text + i)) + 1, "NUL byte");
        else if (nw > 3)
            rc = fail(err, -EINVAL, source, line, extra, "unexpected text after the key");
        else if (nw > 0 && nw < 3)
            rc = fail(err, -EINVAL, source, line, nw == 1 ? w[0].col : w[1].col,
                      "expected ROLE NAME PUBKEY (e.g. node n1 <n1.pub's key>)");
        else if (nw == 3)
            rc = add_line(a, w, source, line, &cap, err);
        i += ll + 1;
    }
out:
    if (rc == -ENOMEM)
        fail(err, rc, source, 0, 0, "out of memory");
    if (rc < 0)
        authkeys_destroy(&a);
    *out = a;
    return rc;
}

int authkeys_load(const char *path, authkeys_t **out, jsonloc_err_t *err)
{
    char where[4096];
    *out = NULL;
    path = curvekey_path(path, where, sizeof where);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int rc = -errno;
        return fail(err, rc, path, 0, 0, strerror(-rc));
    }
    char *buf = malloc(FILE_MAX + 1);
    size_t n = 0;
    int rc = buf ? 0 : -ENOMEM;
    while (rc == 0 && n <= FILE_MAX) {
        ssize_t r = read(fd, buf + n, FILE_MAX + 1 - n);
        if (r < 0)
            rc = -errno;
        else if (r == 0)
            break;
        else
            n += (size_t)r;
    }
    close(fd);
    if (rc == 0 && n > FILE_MAX)
        rc = fail(err, -EFBIG, path, 0, 0, "larger than 4 MiB");
    else if (rc < 0)
        fail(err, rc, path, 0, 0, strerror(-rc));
    else
        rc = authkeys_parse(buf, n, path, out, err);
    free(buf);
    return rc;
}

const authkeys_entry_t *authkeys_find_key(const authkeys_t *a, const char *z85)
{
    int i;
    if (!a || strmap_find(a->by_key, z85, strlen(z85), &i) < 0)
        return NULL;
    return &a->v[i];
}

size_t authkeys_count(const authkeys_t *a)
{
    return a ? a->n : 0;
}
