/* authkeys.h - the controller's authorized keys file (--authorized-keys): who may connect, under which name and role; parse and look up by public key or name.
 *
 * One line per peer, '#' comments and blank lines allowed:
 *
 *   node   n1    <40 Z85 characters: n1.pub's public key>
 *   admin  alice <...>
 *   reader mon   <...>
 *
 * A node key speaks only for the node of its name; an admin key may use
 * every admin command, a reader key only the read-only ones (status,
 * buckets).  Names follow the node name rule (common/names).  A key given
 * twice is refused; a name may have several keys (a rotation: the old and
 * the new key side by side).  An authkeys_t is immutable once
 * loaded; its owner (the controller's loop thread) replaces it whole on
 * SIGHUP.  docs/security.md. */
#ifndef BQOS_AUTHKEYS_H
#define BQOS_AUTHKEYS_H

#include <stddef.h>

#include "common/curvekey.h"
#include "common/jsonloc.h"

typedef enum { AUTHKEYS_NODE = 0, AUTHKEYS_ADMIN, AUTHKEYS_READER, AUTHKEYS__COUNT } authkeys_role_t;

/* One authorized peer.  name is NUL-terminated. */
typedef struct {
    authkeys_role_t role;
    char name[256];
    char key[CURVEKEY_Z85_LEN + 1];
} authkeys_entry_t;

typedef struct authkeys authkeys_t;

/* Parses `len` bytes of `text` (from `source`, for messages).  Returns 0 with
 * *out (caller owns; authkeys_destroy()), -EINVAL with err->line:err->col at
 * the fault, or -ENOMEM.  An empty file is valid (nobody may connect). */
int authkeys_parse(const char *text, size_t len, const char *source, authkeys_t **out,
                   jsonloc_err_t *err);

/* authkeys_parse() of file `path` (a bare name: the credential of that name,
 * curvekey_path()); -errno of open/read with err filled. */
int authkeys_load(const char *path, authkeys_t **out, jsonloc_err_t *err);

/* Frees *ap and sets it to NULL.  Accepts NULL and *ap == NULL. */
void authkeys_destroy(authkeys_t **ap);

/* The entry of public key `z85` (40 Z85 characters, NUL-terminated) or NULL.
 * Borrowed from `a`: valid until it is destroyed. */
const authkeys_entry_t *authkeys_find_key(const authkeys_t *a, const char *z85);

/* The number of entries. */
size_t authkeys_count(const authkeys_t *a);

/* "node", "admin", "reader"; NULL for anything else. */
const char *authkeys_role_str(authkeys_role_t r);

#endif
