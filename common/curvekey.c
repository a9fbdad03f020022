/* curvekey.c - bqos's CURVE key files (NAME.key, NAME.pub): generate, load with a permission check, and set a key pair on a ZeroMQ socket. */
#include "common/curvekey.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#define FILE_MAX 4096 /* a key file is ~150 bytes; anything larger is not one */

int curvekey_z85_check(const char *s, size_t len)
{
    if (!s || len != CURVEKEY_Z85_LEN)
        return -EINVAL;
    char z[CURVEKEY_Z85_LEN + 1];
    uint8_t bin[32];
    memcpy(z, s, len);
    z[len] = '\0';
    return zmq_z85_decode(bin, z) ? 0 : -EINVAL;
}

/* Writes `text` to a new file `path` with `mode` (O_EXCL).  Returns 0 or
 * -errno (err filled). */
static int write_new(const char *path, mode_t mode, const char *text, jsonloc_err_t *err)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd < 0) {
        int rc = -errno;
        return jsonloc_fail(err, rc, path, 0, 0, "cannot create: %s%s", strerror(-rc),
                            rc == -EEXIST ? " (keygen never overwrites a key; remove it first)"
                                          : "");
    }
    size_t len = strlen(text);
    ssize_t n = write(fd, text, len);
    int rc = n == (ssize_t)len ? 0 : -(n < 0 ? errno : EIO);
    if (rc == 0 && fsync(fd) < 0)
        rc = -errno;
    if (close(fd) < 0 && rc == 0)
        rc = -errno;
    if (rc < 0) {
        unlink(path);
        return jsonloc_fail(err, rc, path, 0, 0, "cannot write: %s", strerror(-rc));
    }
    return 0;
}

int curvekey_generate(const char *base, jsonloc_err_t *err)
{
    char pub[CURVEKEY_Z85_LEN + 1], sec[CURVEKEY_Z85_LEN + 1];
    char keypath[4096], pubpath[4096], text[512];
    const char *name = strrchr(base, '/') ? strrchr(base, '/') + 1 : base;
    if (!*name)
        return jsonloc_fail(err, -EINVAL, base, 0, 0, "no key name after the directory");
    if ((size_t)snprintf(keypath, sizeof keypath, "%s.key", base) >= sizeof keypath ||
        (size_t)snprintf(pubpath, sizeof pubpath, "%s.pub", base) >= sizeof pubpath)
        return jsonloc_fail(err, -ENAMETOOLONG, base, 0, 0, "path too long");
    if (zmq_curve_keypair(pub, sec) != 0)
        return jsonloc_fail(err, -ENOTSUP, base, 0, 0, "this libzmq has no CURVE support");
    snprintf(text, sizeof text,
             "# bqos CURVE key pair of %.200s: keep secret (mode 0600)\n"
             "public %s\nsecret %s\n",
             name, pub, sec);
    int rc = write_new(keypath, 0600, text, err);
    explicit_bzero(sec, sizeof sec);
    if (rc < 0) {
        explicit_bzero(text, sizeof text);
        return rc;
    }
    snprintf(text, sizeof text, "# bqos CURVE public key of %.200s\npublic %s\n", name, pub);
    rc = write_new(pubpath, 0644, text, err);
    if (rc < 0)
        unlink(keypath);
    return rc;
}

static int blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r';
}

int curvekey_split(const char *line, size_t len, curvekey_word_t *w, int max, int *extra_col)
{
    int n = 0;
    for (size_t p = 0;;) {
        while (p < len && blank(line[p]))
            p++;
        if (p == len)
            return n;
        if (n == 0 && line[p] == '#')
            return 0;
        if (n == max) {
            if (extra_col)
                *extra_col = (int)p + 1;
            return max + 1;
        }
        size_t e = p;
        while (e < len && !blank(line[e]))
            e++;
        w[n++] = (curvekey_word_t){.s = line + p, .len = e - p, .col = (int)p + 1};
        p = e;
    }
}

/* Parses `n` bytes of key file text `buf` (from `path`) into *k. */
static int parse(const char *path, const char *buf, size_t n, curvekey_t *k, jsonloc_err_t *err)
{
    int line = 1;
    for (size_t i = 0; i < n; line++) {
        const char *eol = memchr(buf + i, '\n', n - i);
        size_t len = eol ? (size_t)(eol - (buf + i)) : n - i;
        curvekey_word_t w[2];
        int extra = 0, nw = curvekey_split(buf + i, len, w, 2, &extra);
        i += len + 1;
        if (nw == 0)
            continue;
        char *dst = NULL;
        if (w[0].len == 6 && memcmp(w[0].s, "public", 6) == 0)
            dst = k->public_z85;
        else if (w[0].len == 6 && memcmp(w[0].s, "secret", 6) == 0)
            dst = k->secret_z85;
        else
            return jsonloc_fail(err, -EINVAL, path, line, w[0].col,
                                "expected 'public KEY' or 'secret KEY'");
        if (nw < 2 || curvekey_z85_check(w[1].s, w[1].len) < 0)
            return jsonloc_fail(err, -EINVAL, path, line, nw < 2 ? (int)len + 1 : w[1].col,
                                "not a CURVE key (40 Z85 characters)");
        if (nw > 2)
            return jsonloc_fail(err, -EINVAL, path, line, extra, "unexpected text after the key");
        if (dst[0])
            return jsonloc_fail(err, -EINVAL, path, line, w[0].col, "'%.6s' given twice",
                                w[0].s);
        memcpy(dst, w[1].s, CURVEKEY_Z85_LEN);
        dst[CURVEKEY_Z85_LEN] = '\0';
    }
    return 0;
}

int curvekey_check_mode(const char *path, unsigned mode, jsonloc_err_t *err)
{
    if (!(mode & 077))
        return 0;
    return jsonloc_fail(err, -EACCES, path, 0, 0,
                        "holds a secret key but has mode %04o: readable or writable by group "
                        "or others; run chmod 600 %.100s",
                        mode & 07777, path);
}

const char *curvekey_path(const char *path, char *buf, size_t cap)
{
    const char *dir = getenv("CREDENTIALS_DIRECTORY");
    if (!path || !dir || !dir[0] || strchr(path, '/') || !path[0])
        return path;
    int n = snprintf(buf, cap, "%s/%s", dir, path);
    return n > 0 && (size_t)n < cap ? buf : path;
}

int curvekey_load(const char *path, int need_secret, curvekey_t *k, jsonloc_err_t *err)
{
    char buf[FILE_MAX + 1], where[4096];
    memset(k, 0, sizeof *k);
    path = curvekey_path(path, where, sizeof where);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return jsonloc_fail(err, -errno, path, 0, 0, "cannot open: %s", strerror(errno));
    struct stat st;
    ssize_t n = fstat(fd, &st) < 0 ? -1 : read(fd, buf, sizeof buf);
    int rc = n < 0 ? -errno : 0;
    close(fd);
    if (rc < 0)
        return jsonloc_fail(err, rc, path, 0, 0, "cannot read: %s", strerror(-rc));
    if (n > FILE_MAX)
        return jsonloc_fail(err, -EINVAL, path, 0, 0, "larger than %d bytes: not a key file",
                            FILE_MAX);
    rc = parse(path, buf, (size_t)n, k, err);
    explicit_bzero(buf, sizeof buf);
    if (rc < 0)
        goto out;
    if (k->secret_z85[0] && (rc = curvekey_check_mode(path, st.st_mode, err)) < 0)
        goto out;
    if (need_secret && !k->secret_z85[0]) {
        rc = jsonloc_fail(err, -EINVAL, path, 0, 0,
                          "no 'secret' line (a .pub file? give the .key)");
        goto out;
    }
    if (!k->secret_z85[0] && !k->public_z85[0]) {
        rc = jsonloc_fail(err, -EINVAL, path, 0, 0, "no 'public' line: not a key file");
        goto out;
    }
    if (k->secret_z85[0]) {
        char derived[CURVEKEY_Z85_LEN + 1];
        if (zmq_curve_public(derived, k->secret_z85) != 0) {
            rc = jsonloc_fail(err, -ENOTSUP, path, 0, 0, "this libzmq has no CURVE support");
            goto out;
        }
        if (k->public_z85[0] && strcmp(derived, k->public_z85) != 0) {
            rc = jsonloc_fail(err, -EINVAL, path, 0, 0,
                              "the public key does not match the secret key");
            goto out;
        }
        memcpy(k->public_z85, derived, sizeof derived);
    }
out:
    if (rc < 0)
        explicit_bzero(k, sizeof *k);
    return rc;
}

int curvekey_load_client(const char *key, const char *server_pub, curvekey_t *own,
                         curvekey_t *server, int *on, jsonloc_err_t *err)
{
    *on = 0;
    if (!key && !server_pub)
        return 0;
    if (!key || !server_pub)
        return jsonloc_fail(err, -EINVAL, "", 0, 0, "--curve-key and --controller-key go together");
    int rc = curvekey_load(key, 1, own, err);
    if (rc == 0)
        rc = curvekey_load(server_pub, 0, server, err);
    if (rc == 0)
        *on = 1;
    return rc;
}

static int setz(void *sock, int opt, const char *z85)
{
    return zmq_setsockopt(sock, opt, z85, CURVEKEY_Z85_LEN) < 0 ? -zmq_errno() : 0;
}

int curvekey_set_server(void *sock, const curvekey_t *own, const char *domain)
{
    int one = 1;
    if (zmq_setsockopt(sock, ZMQ_CURVE_SERVER, &one, sizeof one) < 0 ||
        zmq_setsockopt(sock, ZMQ_ZAP_DOMAIN, domain, strlen(domain)) < 0)
        return -zmq_errno();
    return setz(sock, ZMQ_CURVE_SECRETKEY, own->secret_z85);
}

int curvekey_set_client(void *sock, const curvekey_t *own, const curvekey_t *server)
{
    int rc = setz(sock, ZMQ_CURVE_SERVERKEY, server->public_z85);
    if (rc == 0)
        rc = setz(sock, ZMQ_CURVE_PUBLICKEY, own->public_z85);
    if (rc == 0)
        rc = setz(sock, ZMQ_CURVE_SECRETKEY, own->secret_z85);
    return rc;
}
