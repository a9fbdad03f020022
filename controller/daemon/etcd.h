/* etcd.h - a small etcd v3 client for bqos-controller: leases, transactions, paged range reads and a bounded watch through etcd's JSON gateway (HTTP POST /v3/..., libcurl + jansson).
 *
 * Every call is synchronous and bounded: one HTTP request per URL tried,
 * each limited to the client's timeout (connect and transfer), and the
 * whole call stops trying further URLs once the timeout has passed, so a
 * call blocks at most about twice the timeout.  A URL that fails
 * (connection, timeout, HTTP status other than 200, unreadable answer) is
 * left for the next one in the list, and the client keeps using the URL
 * that answered last.  Responses are capped at ETCD_MAX_RESPONSE bytes.
 * Keys and values are byte strings; the gateway's base64 is done here.
 *
 * An etcd_t belongs to one thread (the controller's loop); nothing locks.
 * Returns are 0 or a negative errno: -EINVAL (bad argument), -ENOMEM,
 * -EIO (no URL answered, or an answer that is not what etcd sends),
 * -E2BIG (an answer over the cap). */
#ifndef BQOS_ETCD_H
#define BQOS_ETCD_H

#include <stddef.h>
#include <stdint.h>

#define ETCD_MAX_RESPONSE (16u << 20) /* bytes of one HTTP answer */
#define ETCD_MAX_URLS 16

typedef struct etcd etcd_t;

/* Returns a client for the comma-separated URL list `urls` ("http://h:p",
 * 1..ETCD_MAX_URLS of them, no trailing slash needed), each request limited
 * to `timeout_s` seconds (>= 0.001), or NULL (bad list, out of memory,
 * libcurl failed).  Caller owns it (etcd_destroy()).  Must be created on
 * the thread that uses it; call curl_global_init() first (main does). */
etcd_t *etcd_new(const char *urls, double timeout_s);

/* Frees the client and sets *ep to NULL.  Accepts NULL. */
void etcd_destroy(etcd_t **ep);

/* The URL that answered last (or the first), for logs.  Belongs to e. */
const char *etcd_url(const etcd_t *e);

/* Wall seconds, requests and request body bytes spent in HTTP so far (for
 * the status and the benches). */
double etcd_seconds(const etcd_t *e);
uint64_t etcd_requests(const etcd_t *e);
uint64_t etcd_bytes_sent(const etcd_t *e);

/* Grants a lease of `ttl` seconds.  On 0, *id is the lease and *granted
 * its TTL as etcd granted it (etcd raises TTLs below its minimum). */
int etcd_lease_grant(etcd_t *e, int64_t ttl, int64_t *id, int64_t *granted);

/* Renews lease `id` once.  On 0, *ttl is its TTL from now; -ENOENT if the
 * lease no longer exists (expired or revoked). */
int etcd_lease_keepalive(etcd_t *e, int64_t id, int64_t *ttl);

/* Revokes lease `id` (its keys go with it).  Returns 0 or an error. */
int etcd_lease_revoke(etcd_t *e, int64_t id);

/* Compacts the key-value history up to revision `rev` (the leader's
 * heartbeats write a revision every poll).  Returns 0 or an error (also
 * when `rev` is compacted already). */
int etcd_compact(etcd_t *e, int64_t rev);

/* One key as read. */
typedef struct {
    int found;             /* 0: the key does not exist (the rest is 0) */
    char *key;             /* NUL-terminated copy (caller frees): set by
                              etcd_range() and etcd_watch() only */
    char *value;           /* NUL-terminated copy (caller frees); may hold NULs */
    size_t len;
    int64_t create_rev, mod_rev, lease;
} etcd_kv_t;

/* Frees kv->key and kv->value and zeroes *kv.  Accepts a zeroed kv. */
void etcd_kv_clear(etcd_kv_t *kv);

/* Clears and frees an array of `n` kvs (etcd_range()'s).  Accepts NULL. */
void etcd_kvs_free(etcd_kv_t *kvs, size_t n);

/* Reads keys `k1` and `k2` in one transaction (one consistent revision).
 * Fills *v1 and *v2 (caller clears them, also on error: they are zeroed
 * first).  `keys_only2`: k2's revisions without its value (v2->value stays
 * NULL), so that a large value is fetched only when it changed.  *hdr (if
 * not NULL): etcd's revision when it answered.  Returns 0 or an error. */
int etcd_get2(etcd_t *e, const char *k1, etcd_kv_t *v1, const char *k2, etcd_kv_t *v2,
              int keys_only2, int64_t *hdr);

/* One page of a range read: the keys in [key, end) (end NULL: `key` alone)
 * in key order, at most `limit` (> 0) of them, at revision `rev` (0: the
 * newest; later pages of one read pass the first page's *hdr so that they
 * all show one revision).  On 0, *kvs is a new array of *n kvs (caller
 * frees with etcd_kvs_free(); key set in each), *more nonzero if keys
 * remain after the last one, *hdr the revision read.  `keys_only`: no
 * values.  Returns 0, -ESTALE (`rev` compacted), or an error. */
int etcd_range(etcd_t *e, const char *key, const char *end, int64_t rev, size_t limit,
               int keys_only, etcd_kv_t **kvs, size_t *n, int *more, int64_t *hdr);

/* A watch event: `kv` (borrowed; key and value set, mod_rev the event's
 * revision) was put, or deleted (`deleted`: no value).  Returns 0 to go on,
 * nonzero to stop the watch after this event's answer. */
typedef int (*etcd_event_fn)(void *arg, const etcd_kv_t *kv, int deleted);

/* The history of the keys in [key, end) from revision `start` on, replayed
 * through `fn` in revision order, until the answer that holds an event at
 * revision `until` or later (the caller knows that one exists), or `fn`
 * asks to stop: a watch opened and closed within one call (the gateway's
 * stream is read until then), so it is bounded by the client's timeout as
 * every call is.  Returns 0, -ESTALE (`start` is compacted: read the keys
 * whole), -ETIMEDOUT (the event at `until` did not come in time), or an
 * error. */
int etcd_watch(etcd_t *e, const char *key, const char *end, int64_t start, int64_t until,
               etcd_event_fn fn, void *arg);

/* One compare of a transaction: key `key`'s CREATE (create_revision) or
 * MOD (mod_revision) revision equals `rev` (0: the key does not exist). */
typedef struct {
    const char *key;
    int mod;               /* 0: create_revision, 1: mod_revision */
    int64_t rev;
} etcd_cmp_t;

/* Puts `key` = `value` (`len` bytes; with lease `lease`, 0 for none) if
 * every compare of `cmp[0..ncmp)` holds.  Returns 1 if it was written (*rev
 * then is the revision of the write: the key's create_revision if it was
 * created), 0 if a compare failed (nothing written), or an error. */
int etcd_put_if(etcd_t *e, const etcd_cmp_t *cmp, size_t ncmp, const char *key,
                const char *value, size_t len, int64_t lease, int64_t *rev);

/* One operation of etcd_txn(): put `key` = `value` (`len` bytes, lease
 * `lease` or 0) or, with `del`, delete `key`. */
typedef struct {
    const char *key;
    const char *value;
    size_t len;
    int64_t lease;
    int del;
} etcd_op_t;

/* Runs `ops[0..nops)` (nops >= 1; etcd takes at most --max-txn-ops, 128 by
 * default, and a request of at most --max-request-bytes, 1.5 MiB) if every
 * compare of `cmp[0..ncmp)` holds.  Returns 1 if they ran (*rev: the
 * revision they wrote), 0 if a compare failed (nothing written), or an
 * error. */
int etcd_txn(etcd_t *e, const etcd_cmp_t *cmp, size_t ncmp, const etcd_op_t *ops, size_t nops,
             int64_t *rev);

/* Deletes `key` if every compare of `cmp[0..ncmp)` holds.  Returns 1 if
 * the transaction ran (the key is gone), 0 if a compare failed (nothing
 * deleted), or an error. */
int etcd_delete_if(etcd_t *e, const etcd_cmp_t *cmp, size_t ncmp, const char *key);

/* Base64 (standard alphabet, padded) of `len` bytes into a new string
 * (caller frees); NULL if out of memory. */
char *etcd_b64_encode(const void *data, size_t len);

/* Decodes base64 text `s` into a new NUL-terminated buffer (caller frees),
 * *len its length.  Returns 0, -EINVAL (not base64), -ENOMEM. */
int etcd_b64_decode(const char *s, char **out, size_t *len);

#endif
