/* internal.h - private to common/proto/: limits, the wire's little-endian
 * helpers, what each message type carries, the record range checks (inline:
 * they run once per record) and the functions the codec's files share.
 * Nothing here is part of common/proto.h; names shared across files carry
 * the proto__ prefix. */
#ifndef BQOS_PROTO_INTERNAL_H
#define BQOS_PROTO_INTERNAL_H

#include "common/proto.h"

#include <endian.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#define MAX_FRAMES PROTO_MAX_FRAMES /* header, names, weights, records, bytes */
#define MAX_INTERVALS 100000u
#define MAX_PERIOD_MS 86400000u
#define MAX_BUSY 1e12
#define NTYPES ((int)PROTO_NAMES + 1) /* proto__type_names[0] is unused */

/* Wire names of the message types, indexed by proto_type_t (msg.c). */
extern const char *const proto__type_names[NTYPES];

/* ---- little-endian records ---- */

static inline void put32(unsigned char *p, uint32_t v)
{
    v = htole32(v);
    memcpy(p, &v, 4);
}
static inline void put64(unsigned char *p, uint64_t v)
{
    v = htole64(v);
    memcpy(p, &v, 8);
}
static inline uint32_t get32(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return le32toh(v);
}
static inline uint64_t get64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return le64toh(v);
}

/* On a little-endian host the in-memory records have exactly the wire
 * layout, so whole arrays move with one memcpy and are validated after. */
#if __BYTE_ORDER == __LITTLE_ENDIAN
#define WIRE_LAYOUT 1
_Static_assert(sizeof(proto_report_rec_t) == PROTO_REPORT_REC_SIZE, "report record layout");
_Static_assert(sizeof(proto_tokens_rec_t) == PROTO_TOKENS_REC_SIZE, "tokens record layout");
_Static_assert(sizeof(proto_report_bytes_t) == PROTO_REPORT_BYTES_SIZE, "byte report layout");
_Static_assert(sizeof(proto_tokens_bytes_t) == PROTO_TOKENS_BYTES_SIZE, "byte tokens layout");
#else
#define WIRE_LAYOUT 0
#endif
_Static_assert(PROTO_TOK_UNLIMITED == 1, "compact tokens decode stores the flag as 0 or 1");

/* What each type carries. */
static inline int type_has_records(proto_type_t t)
{
    return t == PROTO_REPORT || t == PROTO_TOKENS;
}
static inline int type_may_have_names(proto_type_t t)
{
    return t == PROTO_HELLO || t == PROTO_WELCOME || t == PROTO_REPORT || t == PROTO_TOKENS ||
           t == PROTO_NAMES;
}
static inline int type_may_have_weights(proto_type_t t)
{
    return t == PROTO_WELCOME || t == PROTO_TOKENS || t == PROTO_NAMES;
}
/* Names in parts: who may carry a part (names_at / names_of), the offer
 * ("parts") and how much of the receiver's table is held ("peer_names"). */
static inline int type_may_have_part(proto_type_t t)
{
    return t == PROTO_HELLO || t == PROTO_WELCOME || t == PROTO_NAMES;
}
static inline int type_has_peer_names(proto_type_t t)
{
    return t == PROTO_REPORT || t == PROTO_HEARTBEAT || t == PROTO_WELCOME || t == PROTO_TOKENS;
}
static inline int type_has_timing(proto_type_t t)
{
    return t == PROTO_WELCOME || t == PROTO_TOKENS;
}
static inline int type_may_have_timing(proto_type_t t)
{
    return t == PROTO_HEARTBEAT || t == PROTO_HELLO;
}
/* Only a hello carries the node process's instance id. */
static inline int type_has_instance(proto_type_t t)
{
    return t == PROTO_HELLO;
}
/* What a controller sends a node may carry its leadership epoch. */
static inline int type_has_epoch(proto_type_t t)
{
    return t == PROTO_WELCOME || t == PROTO_TOKENS || t == PROTO_HEARTBEAT || t == PROTO_ERROR ||
           t == PROTO_RULES || t == PROTO_NAMES;
}
/* What a node sends a controller (hello, report) may carry the epoch the
 * node follows, under its own key "follows": a controller that predates it
 * ignores an unknown key, where "epoch" on these types it refuses. */
static inline int type_has_follows(proto_type_t t)
{
    return t == PROTO_HELLO || t == PROTO_REPORT;
}
/* The static fallback's lease: what a controller sends with timing
 * (welcome, tokens, heartbeat) may say it ("lease"); a hello may say the
 * node keeps to it ("leases"). */
static inline int type_has_lease(proto_type_t t)
{
    return t == PROTO_WELCOME || t == PROTO_TOKENS || t == PROTO_HEARTBEAT;
}

/* Sparse reports: who may say "sparse" (hello: can, welcome: takes,
 * report: is) and who may ask for a "full" report (what a controller
 * sends with timing). */
static inline int type_has_sparse(proto_type_t t)
{
    return t == PROTO_HELLO || t == PROTO_WELCOME || t == PROTO_REPORT;
}
static inline int type_has_full(proto_type_t t)
{
    return t == PROTO_WELCOME || t == PROTO_TOKENS || t == PROTO_HEARTBEAT;
}
/* The report a tokens message was computed from ("basis"). */
static inline int type_has_basis(proto_type_t t)
{
    return t == PROTO_TOKENS;
}

/* Changed grants only (docs/protocol.md "Changed grants"): who may say
 * "renew" (hello: can, welcome: will, tokens: this one renews the bases
 * it leaves out), who carries a grant sequence ("gseq", "based": tokens)
 * and who may say its chain broke ("regrant": report). */
static inline int type_has_renew(proto_type_t t)
{
    return t == PROTO_HELLO || t == PROTO_WELCOME || t == PROTO_TOKENS;
}

/* Range checks shared by the encoder's validation and the decoder. */
static inline int timing_ok(const proto_msg_t *m)
{
    return m->intervals >= 1 && m->intervals <= MAX_INTERVALS && m->interval < m->intervals &&
           m->period_ms >= 1 && m->period_ms <= MAX_PERIOD_MS && m->remaining_ms <= m->period_ms &&
           m->period <= PROTO_MAX_COUNT;
}

static inline int count_ok(uint64_t v)
{
    return v <= PROTO_MAX_COUNT;
}

static inline int tok_ok(int64_t v, int unlimited_ok)
{
    return (v >= 0 && (uint64_t)v <= PROTO_MAX_COUNT) || (unlimited_ok && v == PROTO_UNLIMITED);
}

/* The records' range checks.  *_fits() is the common case, true if the
 * record is valid and every value fits its compact field; it uses & and |
 * rather than && and || so that there is no branch to mispredict.
 * *_valid() is the full check, for records that do not fit. */
static inline int rep_fits(const proto_report_rec_t *r, uint64_t nb)
{
    uint64_t all = r->queued | r->arrivals_interval | r->arrivals_period | r->served_r |
                   r->served_l | r->served_o | (uint64_t)r->r_left;
    return ((all >> 32) == 0) & (r->bucket < nb) & ((r->flags | r->reserved) == 0) &
           (((uint64_t)r->l_left <= PROTO_COMPACT_MAX) | (r->l_left == PROTO_UNLIMITED));
}
/* Out of line (check.c): inlined into the compact encoder's loop it costs
 * that loop registers for a path it rarely takes. */
int proto__rep_valid(const proto_report_rec_t *r, uint64_t nb);
static inline int tok_unlimited(const proto_tokens_rec_t *t)
{
    return ((t->flags & PROTO_TOK_UNLIMITED) != 0) | (t->l_tokens == PROTO_UNLIMITED);
}
static inline int tok_fits(const proto_tokens_rec_t *t, uint64_t nb)
{
    return ((uint64_t)t->r_tokens <= UINT32_MAX) & (t->bucket < nb) &
           ((t->flags & ~PROTO_TOK_UNLIMITED) == 0) &
           (tok_unlimited(t) | ((uint64_t)t->l_tokens <= PROTO_COMPACT_MAX));
}
static inline int tok_rec_valid(const proto_tokens_rec_t *t, uint64_t nb)
{
    return (t->flags & ~PROTO_TOK_UNLIMITED) == 0 && tok_ok(t->r_tokens, 0) &&
           (tok_unlimited(t) || tok_ok(t->l_tokens, 0)) && t->bucket < nb;
}


/* ---- shared between the codec's files ---- */

/* Grows *pp (a pointer to an array) to hold n elements of size sz; *cap
 * tracks the capacity.  Returns 0 or -ENOMEM (*pp unchanged).  msg.c. */
int proto__grow(void *pp, size_t *cap, size_t n, size_t sz);

/* The buffers a message owns (freed by proto_msg_clear()) and the fields
 * that say how large they are: proto__msg_reset() keeps both, so decodes
 * reuse the memory.  A new owned buffer is added here, once. */
#define PROTO__MSG_BUFFERS(X)                                                                      \
    X(report) X(tokens) X(names_own) X(namebuf) X(weights_own) X(shadow_own) X(rbytes) X(tbytes) \
        X(rules_own) X(shares_own) X(who_own) X(inflight_own)
#define PROTO__MSG_CAPS(X)                                                                         \
    X(cap_report) X(cap_tokens) X(cap_names) X(cap_namebuf) X(cap_weights) X(cap_shadow)         \
        X(cap_bytes) X(cap_rules) X(cap_shares) X(cap_who) X(cap_inflight)

/* The messages that carry one frame of text after the header (rules, who):
 * proto__text() gives m's (its text and length; 0 if m's type has none),
 * proto__dec_text() copies frame f into m's own buffer (PROTO_E_RANGE past
 * the type's bound, PROTO_E_TRUNCATED, or PROTO_E__COUNT out of memory).
 * who.c. */
int proto__text(const proto_msg_t *m, const char **text, size_t *len);
proto_reason_t proto__dec_text(proto_msg_t *m, const proto_frame_t *f);

/* Zeroes every field of m except its owned buffers.  msg.c. */
void proto__msg_reset(proto_msg_t *m);

/* Validates a message for encoding (everything but the records' values,
 * which the layouts check as they write).  Returns 0 or -EINVAL.  check.c. */
int proto__check(const proto_msg_t *m);

/* Writes m's JSON header (frame 0) into buf[cap]: the flat fast path, or
 * jansson for strings that are not plain ASCII.  `wide` adds "wide":1.
 * Returns its length, -EINVAL (longer than cap, or a name jansson refuses)
 * or -ENOMEM.  header.c. */
ssize_t proto__header_write(const proto_msg_t *m, int wide, char *buf, size_t cap);

/* The header fields the decoder knows, as read from the JSON object. */
enum {
    K_V, K_TYPE, K_NODE, K_SEQ, K_PERIOD, K_INTERVAL, K_INTERVALS, K_PERIOD_MS,
    K_REMAINING_MS, K_NAMES, K_CAPACITY, K_TABLE, K_PEER_TABLE, K_COUNT, K_COMPLETIONS,
    K_DISPATCHED, K_BUSY, K_CODE, K_TEXT, K_WEIGHTS, K_WIDE, K_EPOCH, K_INSTANCE, K_FALLBACK,
    K_FALLBACKS, K_BYTES, K_SERVED_BYTES, K_FOLLOWS, K_SHADOW, K_LEASE, K_LEASES, K_RULES,
    K_SPARSE, K_FULL, K_SHARES, K_BASIS, K_RENEW, K_GSEQ, K_BASED, K_REGRANT, K_INFLIGHT, K_BASE_US, K_PARTS,
    K_NAMES_AT, K_NAMES_OF, K_PEER_NAMES, K_SHARDS_K, K_SHARDS_GEN, K_SHARDS_NEXT,
    K_SHARDS_FROM, K__N
};

typedef enum { V_NONE = 0, V_INT, V_REAL, V_STR, V_OTHER } vkind_t;

typedef struct {
    vkind_t kind;
    int64_t i;
    double r;
    const char *s; /* V_STR: not NUL-terminated, `len` bytes */
    size_t len;
} hval_t;

typedef struct {
    hval_t v[K__N];
} hview_t;

/* Reads header frame `data` (`len` bytes) into *hv: the flat parser for the
 * common case, else jansson (JSON_REJECT_DUPLICATES), whose verdict is
 * authoritative.  Strings in *hv point into `data` or into the object left
 * in *keep, which the caller releases with proto__header_release() once it
 * is done with *hv.  Returns 0, or -1 if the frame is not a JSON object.
 * header.c. */
int proto__header_read(const void *data, size_t len, hview_t *hv, void **keep);
void proto__header_release(void *keep); /* accepts NULL */

/* Record layouts.  The encoders write m->count records of m->type (report
 * or tokens) into p, which has room for them; `nb` is the number of
 * buckets a record may name (UINT64_MAX without a names frame).
 * proto__enc_compact returns 0, 1 if a valid record does not fit (the
 * message must go wide) or -EINVAL; proto__enc_wide returns 0 or -EINVAL.
 * The decoders fill m->report / m->tokens (m->count of them, reserved by the
 * caller) from p, which holds m->count records, and return PROTO_OK or
 * PROTO_E_RANGE.  compact.c, wide.c. */
int proto__enc_compact(const proto_msg_t *m, uint64_t nb, unsigned char *p);
int proto__enc_wide(const proto_msg_t *m, uint64_t nb, unsigned char *p);
proto_reason_t proto__dec_compact(proto_msg_t *m, const unsigned char *p);
proto_reason_t proto__dec_wide(proto_msg_t *m, const unsigned char *p);

/* The byte records (frame 4): proto__enc_bytes writes m->nbytes of them
 * into p (room for them) and returns 0 or -EINVAL (a value out of range);
 * proto__dec_bytes fills m->rbytes / m->tbytes (reserved by the caller)
 * and returns PROTO_OK or PROTO_E_RANGE.  `nb` as above.  bytes.c. */
int proto__enc_bytes(const proto_msg_t *m, uint64_t nb, unsigned char *p);
proto_reason_t proto__dec_bytes(proto_msg_t *m, const unsigned char *p);

#endif
