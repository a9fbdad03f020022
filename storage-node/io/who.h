/* who.h - the identities active in each bucket of a node (bqos-ctl who, issue 27): bounded, counted through a per-connection cache, sent to the controller when they change.
 *
 * An identity is what a connection says of itself (its login user, TLS
 * certificate name or PSK identity: "user:alice", "cert:web1", "psk:vm7", or
 * "" for none) with the client's address ("10.0.0.5"; the port is left
 * out).  Per bucket the first WHO_PER_BUCKET identities seen keep an entry
 * (requests, first and last seen); the requests of any further identity
 * count in the bucket's "other".  WHO_MAX entries in all; past them a new
 * (bucket, identity) counts in `dropped` only.  An entry not seen for
 * WHO_IDLE_S is dropped (its place is free again).
 *
 * Cost: who_seen() per request is two compares and an increment while the
 * connection stays in the bucket it was last counted in, within the same
 * tick (WHO_TICK_S); otherwise (a new tick, another bucket, a new
 * identity) one hash probe and a walk of at most WHO_PER_BUCKET + 1
 * entries comparing 64-bit keys.  No allocation after the first request
 * (the entries, WHO_MAX of them, are allocated then).  Once a tick: the
 * generation moves (every connection's cache is stale) and, when the set
 * changed (or every WHO_REFRESH_S while it is not empty), the sink gets
 * the whole set as JSON (who_format()).
 *
 * Threads: a who_t belongs to the loop thread of its event_base. */
#ifndef BQOS_WHO_H
#define BQOS_WHO_H

#include <stddef.h>
#include <stdint.h>

#include "storage-node/io/conns.h"

struct event_base;

#define WHO_PER_BUCKET 16   /* identities with their own entry, per bucket */
#define WHO_MAX 1024        /* entries in all, over every bucket */
#define WHO_IDLE_S 60.0     /* an identity not seen this long is dropped */
#define WHO_TICK_S 1.0      /* the last-seen time's resolution */
#define WHO_REFRESH_S 5.0   /* the set is sent at least this often while not empty */
#define WHO_ID_LEN 96       /* bytes of an identity kept (longer: cut, still apart) */
#define WHO_TEXT_MAX (1u << 20) /* bytes of who_format()'s text, at most */

typedef struct who who_t;

/* Bucket b's name (NULL: no such bucket), for who_format(). */
typedef const char *(*who_name_fn)(void *arg, int b);

/* Where the set goes when it changed: `len` bytes of JSON (who_format()),
 * borrowed for the call. */
typedef void (*who_sink_fn)(void *arg, const char *text, size_t len);

/* A new, empty registry on `base` (its tick timer armed at the first
 * request).  name(arg, b) names buckets.  Returns it (caller owns it:
 * who_destroy()), or NULL and *err = -EINVAL / -ENOMEM. */
who_t *who_new(struct event_base *base, who_name_fn name, void *arg, int *err);

/* Frees w and sets *wp NULL.  Accepts NULL. */
void who_destroy(who_t **wp);

/* Sets the sink (NULL: none, the default); arg borrowed until replaced. */
void who_set_sink(who_t *w, who_sink_fn fn, void *arg);

/* One request of connection c landed in bucket b (b >= 0).  Hot path: see
 * above.  w may be NULL (nothing counted). */
void who_seen(who_t *w, conns_conn_t *c, int b);

/* The set now as JSON, into *buf (grown as needed, caller owns it; at most
 * WHO_TEXT_MAX bytes: entries past it are left out and counted in
 * "dropped"):
 *   {"who":[{"bucket":B,"id":ID,"addr":A,"requests":N,"first":S,"last":S},...],
 *    "other":[{"bucket":B,"requests":N},...],"dropped":N}
 * first/last: seconds since first and last seen (tick resolution).
 * Returns the length, or -ENOMEM. */
long who_format(who_t *w, char **buf, size_t *cap);

/* Counts for stats and tests: entries kept, requests counted nowhere
 * (dropped), and the sends made. */
typedef struct {
    int entries;
    uint64_t dropped;
    uint64_t sent;
} who_stats_t;
void who_stats(const who_t *w, who_stats_t *out);

/* Runs one tick now (the timer's work): for tests.  `now` mono seconds. */
void who_tick(who_t *w, double now);

#endif
