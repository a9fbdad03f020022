/* curvekey.h - the one owner of bqos's ZeroMQ CURVE key files (NAME.key, NAME.pub): generate, load, check, and put a key pair on a socket.
 *
 * A key file is text, one "WORD VALUE" per line, '#' comments and blank
 * lines allowed:
 *
 *   # bqos CURVE key pair of NAME: keep secret (mode 0600)
 *   public <40 Z85 characters>
 *   secret <40 Z85 characters>
 *
 * NAME.pub holds the `public` line only.  A file with a `secret` line must not
 * be readable or writable by group or others (curvekey_load() refuses it).
 * Everything here is reentrant: no state, any thread.  Links libzmq
 * (zmq_curve_keypair, zmq_z85_decode, zmq_setsockopt); docs/security.md. */
#ifndef BQOS_CURVEKEY_H
#define BQOS_CURVEKEY_H

#include <stddef.h>

#include "common/jsonloc.h" /* errors: print with bucketfile_strerror() */

#define CURVEKEY_Z85_LEN 40 /* a 32-byte key in Z85 */

/* A loaded key: both halves (a .key file) or the public one (a .pub file,
 * secret[0] == '\0').  NUL-terminated Z85; plain values, no pointers. */
typedef struct {
    char public_z85[CURVEKEY_Z85_LEN + 1];
    char secret_z85[CURVEKEY_Z85_LEN + 1];
} curvekey_t;

/* Returns 0 if s[0..len) is a 32-byte key in Z85 (40 characters of the Z85
 * alphabet), else -EINVAL.  Pure. */
int curvekey_z85_check(const char *s, size_t len);

/* One word of a key line (below): its bytes and 1-based column. */
typedef struct {
    const char *s;
    size_t len;
    int col;
} curvekey_word_t;

/* The line syntax of key files and of the controller's authorized keys
 * file: splits line[0..len) (no '\n') into words separated by blanks (space,
 * tab; a trailing '\r' is a blank).  A line whose first word starts with
 * '#' is a comment.  Returns the number of words stored in w[0..max), 0
 * for a blank or comment line, or max + 1 if there are more (w holds the
 * first max; *extra_col, if not NULL, is the column of the next).  Pure. */
int curvekey_split(const char *line, size_t len, curvekey_word_t *w, int max, int *extra_col);

/* Writes a new key pair to BASE.key (created with O_EXCL, mode 0600: public
 * and secret) and BASE.pub (mode 0644: public).  Refuses to overwrite either
 * file.  Returns 0; -EEXIST, -ENOTSUP (libzmq without CURVE) or another
 * -errno with err->source (the file) and err->text filled (err may be NULL).
 * If the .pub cannot be written, the .key just made is removed. */
int curvekey_generate(const char *base, jsonloc_err_t *err);

/* The rule for every file holding a secret (CURVE keys, the NBD TLS key and
 * PSK files): `mode` (its st_mode) must give group and others nothing.
 * Returns 0, or -EACCES with *err naming the file, its mode and the chmod
 * to run (err may be NULL).  Pure. */
int curvekey_check_mode(const char *path, unsigned mode, jsonloc_err_t *err);

/* Where a key file named on a daemon's command line is: a bare file name
 * (no '/') while $CREDENTIALS_DIRECTORY is set (systemd's LoadCredential=)
 * is that credential, $CREDENTIALS_DIRECTORY/NAME, written into buf[cap]
 * (returns buf); anything else is `path` itself (returned as is).  Used by
 * curvekey_load() and the controller's authorized keys file. */
const char *curvekey_path(const char *path, char *buf, size_t cap);

/* Reads key file `path` (by curvekey_path()) into *k.  With need_secret, the file must hold a
 * secret key.  A file holding a secret must be mode 0600 or stricter (no
 * group/other bits): else -EACCES, the message naming the file and its mode.
 * A secret with a public line that does not match it is refused.  Returns
 * 0; -EINVAL (a syntax error at err->line:err->col), -EACCES, or -errno of
 * open/read, with *err filled (err may be NULL). */
int curvekey_load(const char *path, int need_secret, curvekey_t *k, jsonloc_err_t *err);

/* Makes `sock` (not yet bound) a CURVE server with key pair `own` (a secret
 * key) and ZAP domain `domain`.  Returns 0 or -errno from zmq_setsockopt. */
int curvekey_set_server(void *sock, const curvekey_t *own, const char *domain);

/* Makes `sock` (not yet connected) a CURVE client with key pair `own` that
 * accepts only a server holding the secret of `server`'s public key.
 * Returns 0 or -errno from zmq_setsockopt. */
int curvekey_set_client(void *sock, const curvekey_t *own, const curvekey_t *server);

/* Loads a client's pair: secret key file `key` and the server's public key
 * file `server_pub` (both or neither given; neither: *on = 0 and nothing
 * loaded).  Returns 0 with *on = 1, or -errno with err filled (a message
 * for one of the two files, or "--curve-key and --controller-key go
 * together"). */
int curvekey_load_client(const char *key, const char *server_pub, curvekey_t *own,
                         curvekey_t *server, int *on, jsonloc_err_t *err);

#endif
