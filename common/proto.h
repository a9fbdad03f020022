/* proto.h - the bqos control protocol (controller <-> nodes over ZeroMQ):
 * versioned messages as a small JSON header frame plus packed little-endian
 * binary frames, pure encode/decode over buffers, and thin zmq send/recv.
 *
 * Wire format (docs/protocol.md has the full description and rationale):
 *   frame 0  JSON header  {"v":3,"type":"report","node":"n1","seq":7,...}
 *   frame 1  names        only if the header has "names":N: N bucket names,
 *                         each followed by one NUL byte (the sender's table)
 *   frame 2  weights      only if the header has "weights":N (welcome and
 *                         tokens with names): N u32 bucket weights
 *   frame 3  records      only for report/tokens: "count" fixed-size records,
 *                         compact (PROTO_REPORT_COMPACT_SIZE /
 *                         PROTO_TOKENS_COMPACT_SIZE bytes, 32-bit fields) or,
 *                         if the header has "wide":1, wide
 *                         (PROTO_REPORT_REC_SIZE / PROTO_TOKENS_REC_SIZE)
 *   frame 4  byte records only if the header has "bytes":N (report,
 *                         tokens): N records of the bytes/s dimension
 *                         (cost-aware tokens), PROTO_REPORT_BYTES_SIZE /
 *                         PROTO_TOKENS_BYTES_SIZE bytes each.  A peer that
 *                         predates them counts one frame too many and
 *                         refuses the message (PROTO_E_FRAMES): never
 *                         misread.
 * Records name their bucket by index into the SENDER's bucket table (its
 * generation is "table"); the names frame is included until the receiver
 * acknowledges that generation ("peer_table" in its own messages), so at
 * steady state a message is one small JSON frame plus one memcpy-able array.
 *
 * Threads: every function here is reentrant; a proto_msg_t / proto_enc_t /
 * proto_stats_t belongs to one thread at a time (the caller's).  There is no
 * global state: reject counters live in the caller's proto_stats_t. */
#ifndef BQOS_PROTO_H
#define BQOS_PROTO_H

#include <stddef.h>
#include <stdint.h>

#define PROTO_VERSION 3              /* 3: compact records; 2: weights frame
                                        (older peers are refused) */
#define PROTO_ADMIN_VERSION 1        /* the admin protocol's "v" (bqos-ctl) */
#define PROTO_WEIGHT_MAX 1000000u    /* bucket weights are 1..this */
#define PROTO_MAX_FRAMES 5           /* header, names, weights, records,
                                        byte records */
#define PROTO_NAME_MAX 250          /* bucket and node names: 1..250 bytes */
#define PROTO_UNLIMITED INT64_MAX   /* l_tokens / l_left meaning "no limit" */
#define PROTO_MAX_RECORDS 4000000u  /* more records than this is "absurd" */
#define PROTO_MAX_COUNT (UINT64_C(1) << 53) /* counters/tokens above are absurd
                                       (except PROTO_UNLIMITED where allowed) */
#define PROTO_LEASE_MAX 1000000u   /* largest static fallback lease, periods */
#define PROTO_SHARDS_MAX 256u      /* controller shards at most (SHARDMAP_MAX) */
#define PROTO_HEADER_MAX 4096       /* bytes of JSON header we accept */
#define PROTO_COMPACT_MAX 0xfffffffeu /* largest limit (l_left, l_tokens)
                                       a compact record holds; its counters
                                       and r_* take any 32-bit value.  A
                                       message with a larger value is sent
                                       wide (never saturated) */
#define PROTO_COMPACT_UNLIMITED 0xffffffffu /* compact l_left / l_tokens:
                                       "no limit" (PROTO_UNLIMITED) */

typedef enum {
    PROTO_HELLO = 1,     /* node -> ctl: registration, always with names */
    PROTO_WELCOME = 2,   /* ctl -> node: reply to hello: timing, ctl table */
    PROTO_REPORT = 3,    /* node -> ctl: per-interval counters */
    PROTO_TOKENS = 4,    /* ctl -> node: absolute token counts + timing */
    PROTO_HEARTBEAT = 5, /* either way: alive; ctl->node carries timing and
                            means "keep your tokens" (push skipped) */
    PROTO_GOODBYE = 6,   /* node -> ctl: leaving cleanly */
    PROTO_ERROR = 7,     /* ctl -> node: "code" says why a message was
                            refused, e.g. "unknown_node": send hello again */
    PROTO_RULES = 8,     /* ctl -> node: the rule list (issue 27): header
                            "rules" (its version, >= 1), one frame of its
                            JSON text (common/rules.h; 0..PROTO_RULES_MAX
                            bytes, "" = no rules).  A node that predates it
                            refuses it as an unknown type (PROTO_E_TYPE). */
    PROTO_WHO = 9,       /* node -> ctl: the identities active in its buckets
                            (issue 27, bqos-ctl who; common/proto/who.c): no
                            header field of its own, one frame of JSON text
                            (0..PROTO_WHO_MAX bytes, storage-node/io/who.h
                            says what).  A controller that predates it
                            refuses it as an unknown type. */
    PROTO_NAMES = 10     /* either way, after a hello and welcome that said
                            "parts": one part of the sender's table (header
                            table, names_at, names_of; names frame, and
                            ctl->node weights/shadow).  docs/protocol.md
                            "Names in parts".  A peer that predates it
                            refuses it (PROTO_E_TYPE); it is never sent
                            to one. */
} proto_type_t;

#define PROTO_RULES_MAX (1u << 20) /* bytes of a rules message's text */
#define PROTO_WHO_MAX (256u << 10) /* bytes of a who message's text */
#define PROTO_PART_BYTES 65536u    /* a part's names frame (names message,
                                      or a hello/welcome with names_of) is
                                      at most this many bytes */
#define PROTO_PART_NAMES 4096u     /* ... and holds at most this many names
                                      (what taking one costs the receiver's
                                      loop: a few ms) */

/* Why a message was rejected.  Index into proto_stats_t.rejected. */
typedef enum {
    PROTO_OK = 0,
    PROTO_E_TRUNCATED,    /* missing frame or frame shorter than declared */
    PROTO_E_VERSION,      /* "v" is not PROTO_VERSION */
    PROTO_E_TYPE,         /* unknown "type" */
    PROTO_E_COUNT,        /* record/name count disagrees with frame size */
    PROTO_E_RANGE,        /* negative, absurd or out-of-range number */
    PROTO_E_JSON,         /* header is not a JSON object / too long */
    PROTO_E_FIELD,        /* required header field missing or wrong type */
    PROTO_E_NAMES,        /* bad names frame (empty/long/duplicate... name) */
    PROTO_E_FRAMES,       /* too many frames */
    PROTO_E_UNKNOWN_NODE, /* node unknown to the controller (hook) or header
                             node differs from the ROUTER identity */
    PROTO_E_TABLE,        /* records refer to a table the receiver lacks
                             (noted by the caller via proto_stats_note) */
    PROTO_E__COUNT
} proto_reason_t;

/* Per-reason counters.  Zero-initialise; owned by the caller's thread. */
typedef struct {
    uint64_t ok;                        /* messages decoded successfully */
    uint64_t bytes;                     /* their bytes on the wire, every frame
                                           (proto_recv(); ZeroMQ's own framing
                                           not counted) */
    uint64_t rejected[PROTO_E__COUNT];  /* [0] unused */
    uint64_t rejected_total;
} proto_stats_t;

/* Returns a short constant name for a reason ("truncated", ...). */
const char *proto_reason_str(proto_reason_t r);

/* Counts a rejection found by the caller (unknown node, unknown table). */
void proto_stats_note(proto_stats_t *st, proto_reason_t r);

/* One report record: a bucket's counters on the reporting node.  Compact
 * wire layout (PROTO_REPORT_COMPACT_SIZE bytes): nine u32, little-endian:
 * bucket, queued, arrivals_interval, arrivals_period, served_r, served_l,
 * served_o, r_left, l_left (PROTO_COMPACT_UNLIMITED = PROTO_UNLIMITED).
 * Wide layout (PROTO_REPORT_REC_SIZE, header "wide":1): exactly this
 * struct, u32 bucket, u32 flags, then nine 64-bit fields in this order, all
 * little-endian.  The decoder fills the struct from either. */
typedef struct {
    uint32_t bucket;            /* index into the node's table */
    uint32_t flags;             /* reserved, 0 */
    uint64_t queued;            /* waiting now */
    uint64_t arrivals_interval; /* arrivals in the past interval */
    uint64_t arrivals_period;   /* arrivals this period */
    uint64_t served_r, served_l, served_o; /* served this period, by class */
    int64_t r_left;             /* R-tokens left */
    int64_t l_left;             /* L-tokens left, PROTO_UNLIMITED if none */
    uint64_t reserved;          /* must be 0 */
} proto_report_rec_t;
#define PROTO_REPORT_REC_SIZE 80
#define PROTO_REPORT_COMPACT_SIZE 36

/* One tokens record: absolute counts for the rest of the period.  Compact
 * wire layout (PROTO_TOKENS_COMPACT_SIZE bytes): u32 bucket, u32 r_tokens,
 * u32 l_tokens (PROTO_COMPACT_UNLIMITED: no limit).  Wide layout
 * (PROTO_TOKENS_REC_SIZE, header "wide":1): u32 bucket, u32 flags,
 * i64 r_tokens, i64 l_tokens. */
typedef struct {
    uint32_t bucket;     /* index into the controller's table */
    uint32_t flags;      /* PROTO_TOK_UNLIMITED: no limit (l_tokens ignored
                            on the wire, decoded as PROTO_UNLIMITED) */
    int64_t r_tokens;    /* >= 0 */
    int64_t l_tokens;    /* >= 0, or PROTO_UNLIMITED */
} proto_tokens_rec_t;
#define PROTO_TOKENS_REC_SIZE 24
#define PROTO_TOKENS_COMPACT_SIZE 12
#define PROTO_TOK_UNLIMITED 1u

/* One share record (issue 28, weighted fair shares of spare capacity):
 * bucket `bucket` of the controller's table may take `tokens` of the
 * node's opportunistic turns before the others for the rest of the period
 * (sched_set_share()).  On the wire: the tokens header's "shares", a
 * string "bucket:tokens,bucket:tokens" in ascending bucket order, at most
 * PROTO_SHARES_MAX of them (the header's size bounds it). */
typedef struct {
    uint32_t bucket;
    int64_t tokens;      /* 1..PROTO_MAX_COUNT */
} proto_share_rec_t;
#define PROTO_SHARES_MAX 128
#define PROTO_BASE_US_MAX 1000000000u /* a report's base_us: at most 1,000 s */

/* The bytes/s dimension of a bucket on a node (cost-aware tokens, issue
 * 15), for buckets with a rate in bytes/s only; in bytes (a node charges
 * in units of its --cost-unit and converts).  Report: u32 bucket (index
 * into the node's table), u32 flags (0), then five 64-bit fields in this
 * order, little-endian: bytes that arrived in the past interval and this
 * period, bytes served this period, byte R- and L-tokens left (either may
 * be negative, a debt, down to -PROTO_MAX_COUNT; l_left PROTO_UNLIMITED:
 * no limit).  A get's bytes are counted once it is answered. */
typedef struct {
    uint32_t bucket;
    uint32_t flags;
    uint64_t arrivals_interval, arrivals_period;
    uint64_t served;
    int64_t r_left, l_left;
} proto_report_bytes_t;
#define PROTO_REPORT_BYTES_SIZE 48

/* Tokens: u32 bucket (index into the controller's table), u32 flags, i64
 * r_bytes, i64 l_bytes: absolute byte tokens for the rest of the period.
 * PROTO_TOK_UNLIMITED: no byte limit (l_bytes ignored on the wire);
 * PROTO_TOK_OFF: the bucket has no bytes/s rate (any more): the node
 * stops charging its bytes (r and l ignored). */
typedef struct {
    uint32_t bucket;
    uint32_t flags;
    int64_t r_bytes, l_bytes;
} proto_tokens_bytes_t;
#define PROTO_TOKENS_BYTES_SIZE 24
#define PROTO_TOK_OFF 2u

/* A message, decoded or to be encoded.  The arrays are owned by the message
 * (proto_msg_reserve / decode grow them; proto_msg_clear frees them); reuse
 * one proto_msg_t for many decodes to avoid allocation.  Fields not used by
 * a type are ignored by the encoder and zeroed by the decoder.
 *
 * Header fields by type ("*" = required on the wire):
 *   all       v*, type*, node* (node name; ctl->node: the node addressed),
 *             seq (sender's message counter)
 *   hello     capacity* (IOs/s profile), table*, names* (= nnames, >= 0),
 *             timing (optional: the node's current view, for a restarted
 *             controller to adopt)
 *   welcome   timing*, peer_table*, table*, names (optional), weights
 *             (optional, only with names)
 *   report    period*, interval*, remaining_ms, table*, peer_table*,
 *             count*, names (optional), completions*, dispatched*, busy*,
 *             wide (optional, 0 or 1), fallback (optional, 0 or 1),
 *             fallbacks (optional, 0..2^53), bytes (optional, 1..: byte
 *             records follow), served_bytes (optional, 0..2^53: bytes
 *             the node served this period, every bucket)
 *   tokens    timing*, table*, peer_table*, count*, names (optional),
 *             weights (optional, only with names), wide (optional),
 *             bytes (optional, 1..: byte records follow)
 *   heartbeat timing (optional, ctl->node), peer_table (optional)
 *   goodbye   -
 *   error     code*, text
 *   rules     rules* (the list's version, 1..2^53), epoch (optional)
 *   welcome: rules (optional, 1..2^53: a rules message of that version
 *             follows; absent: the controller has no rules)
 *   hello: instance (optional, 1..2^53: the node process's random id)
 *   welcome, tokens, heartbeat, error: epoch (optional, > 0: the sending
 *             controller's leadership epoch)
 *   hello, report: follows (optional, 1..2^53: the leadership epoch the
 *             node obeys; a controller leads above the highest it hears,
 *             docs/controller.md "Epochs")
 *   welcome, tokens, heartbeat: lease (optional, 1..PROTO_LEASE_MAX: the
 *             static fallback's lease in periods, docs/protocol.md
 *             "Controller silence")
 *   hello: leases (optional, 0 or 1: the node keeps to the lease)
 *   hello, welcome, report: sparse (optional, 0 or 1; docs/protocol.md
 *             "Sparse reports"): hello: the node can send sparse reports;
 *             welcome: the controller takes them; report: this one is
 *             sparse (a bucket it leaves out is as proto_report_predict()
 *             says, not idle).  Sent only after a welcome said it.
 *   welcome, tokens, heartbeat: full (optional, 0 or 1): the controller
 *             asks for a full report next (it missed one)
 *   tokens: basis (optional, 1..2^53): the node's report the counts were
 *             computed from, period * intervals + interval + 1 of that
 *             report (docs/protocol.md "Tokens net of served")
 *   hello, welcome, tokens: renew (optional, 0 or 1; docs/protocol.md
 *             "Changed grants"): hello: the node can renew grant bases;
 *             welcome: the controller sends changed grants only; tokens:
 *             every bucket whose base the node holds from the previous
 *             renewing message (gseq chain unbroken) and that has no
 *             record here is applied again as if its base were re-sent
 *   tokens: gseq (optional, 1..2^53): the controller's count of tokens
 *             messages to this node in this session (each one more than
 *             the last); based (optional, only with renew and gseq,
 *             0..count, absent = count): the first `based` records become
 *             bases, the others do not (and clear theirs)
 *   report: regrant (optional, 0 or 1): the node saw a gap in gseq and
 *             renewed nothing: send every grant again
 *   names     table*, names_at*, names_of*, names* (>= 1), weights and
 *             shadow (optional, ctl->node): names [names_at, names_at +
 *             names) of the sender's table `table`, which has names_of
 *             names; the names frame at most PROTO_PART_BYTES and
 *             PROTO_PART_NAMES names
 *   hello, welcome: parts (optional, 0 or 1): hello: the node takes and
 *             sends tables in parts; welcome: the controller does.
 *             names_of (optional, with names): the names frame is the
 *             first part (names_at 0, at most PROTO_PART_BYTES) of a table
 *             of names_of names; the rest follows in names messages
 *   report, heartbeat (node->ctl), welcome, tokens, heartbeat (ctl->node):
 *             peer_names (optional, 0..2^53): the sender holds only the
 *             first peer_names names of the receiver's table peer_table
 *             (absent: all of them)
 * timing = period, interval, intervals, period_ms, remaining_ms. */
typedef struct {
    proto_type_t type;
    char node[PROTO_NAME_MAX + 1];
    uint64_t seq;

    /* timing: which period/interval the sender is in, how the period is cut,
     * and how long (ms) until the period ends, measured at send time; the
     * receiver adds it to its own clock (no clock sync needed). */
    int has_timing;        /* heartbeat/hello: timing present (always set
                              by the decoder for welcome/tokens) */
    uint64_t period;
    uint32_t interval;     /* 0 .. intervals-1 */
    uint32_t intervals;    /* K >= 1 */
    uint32_t period_ms;    /* T in ms, >= 1 */
    uint32_t remaining_ms; /* <= period_ms */

    /* welcome, tokens, heartbeat, error (controller -> node): the sending
     * controller's leadership epoch, a number that only grows when another
     * controller takes over (etcd election); 0 = none (a lone controller).
     * A node obeys only the highest epoch it has seen. */
    uint64_t epoch;
    /* hello, report (node -> controller), optional: the highest epoch the
     * node has obeyed (0 = none, or not said), so that a controller whose
     * etcd lost its data leads above it (wire key "follows"). */
    uint64_t follows;
    /* welcome, tokens, heartbeat (controller -> node), optional: the
     * static fallback's lease, in periods: a node that stops hearing the
     * controller renews its last grant for at most this many periods, then
     * holds its limited buckets at 0; the controller keeps that grant
     * counted until the lease has surely ended (0 = not said: an older
     * controller, no bound).  hello, optional: `leases` 1 says the node
     * keeps to it (an older node renews for ever). */
    uint32_t lease;
    int leases;
    /* welcome, tokens, heartbeat (controller -> node), optional: the
     * cluster's controller shards as the controller last read them
     * (common/shardgen.h; docs/controller.md "Changing K at run time"):
     * K (1..PROTO_SHARDS_MAX, 0 = not said: no shards, or an older
     * controller) of generation gen (>= 1), and a change under way to
     * shards_next (0: none) from wall-clock millisecond shards_from (> 0).
     * Wire keys "shards_k", "shards_gen", "shards_next", "shards_from". */
    uint32_t shards_k, shards_next;
    uint64_t shards_gen, shards_from;
    /* Sparse reports (docs/protocol.md "Sparse reports"): hello: the node
     * can send them; welcome: the controller takes them; report: this
     * report is sparse.  full (welcome, tokens, heartbeat): the controller
     * asks for a full report next. */
    int sparse;
    int full;
    /* tokens, optional: which of the node's reports the counts were
     * computed from, as proto_basis() says (0 = not said: an older
     * controller; the node nets them against its latest report). */
    uint64_t basis;
    /* Changed grants (docs/protocol.md "Changed grants"): renew (hello:
     * can; welcome: will; tokens: renew the bases left out), gseq and
     * based (tokens; the decoder sets based = count when absent), regrant
     * (report: the node's chain broke, send every grant). */
    int renew;
    uint64_t gseq;
    size_t based;
    int regrant;
    /* Names in parts (docs/protocol.md "Names in parts"): parts (hello:
     * can; welcome: will); names_at / names_of (names message; hello and
     * welcome with names_of > 0: a first part, names_at 0): where the names
     * frame sits in the sender's table and its size; has_peer_names /
     * peer_names: the sender holds only the first peer_names names of the
     * receiver's table (has_peer_names 0: all). */
    int parts;
    uint64_t names_at, names_of;
    int has_peer_names;
    uint64_t peer_names;
    /* decode: when a message is refused for its names frame, the byte
     * offset in that frame of the name at fault (the frame's length when
     * the frame as a whole is wrong); else 0.  Kept after the refusal. */
    size_t bad_at;

    uint32_t table;        /* sender's table generation (>= 1; 0 = none) */
    uint32_t peer_table;   /* receiver's generation the sender holds, 0 none */

    /* hello */
    uint64_t capacity;     /* node's capacity profile, IOs per second */
    uint64_t instance;     /* optional: the node process's random id
                              (1..PROTO_MAX_COUNT), so that the controller
                              can tell a second node under the same name
                              from the first; 0 = not said */

    /* report: node-wide counters this period */
    uint64_t completions;
    uint64_t dispatched;
    double busy_seconds;   /* >= 0 */
    /* report, optional (absent = 0; a node that does not say is taken as
     * following): the node is in fallback now (1: it hears no controller
     * and enforces its --fallback policy), and how many times it has
     * fallen back since it started (0..PROTO_MAX_COUNT). */
    int fallback;
    uint64_t fallbacks;
    uint64_t served_bytes; /* report, optional: bytes served, every bucket */

    /* error */
    char code[32];
    char text[128];

    /* rules: the list's version (>= 1) and JSON text; welcome: the version
     * of the rules message that follows (0: none, the controller has no
     * rules) (rules_len bytes, not
     * NUL-terminated on the wire; decoded into the message's own buffer,
     * NUL-terminated; for encoding, caller-owned). */
    uint64_t rules_version;
    const char *rules_text;
    size_t rules_len;
    /* who: the JSON text (who_len bytes; decoded into the message's own
     * buffer, NUL-terminated; for encoding, caller-owned). */
    const char *who_text;
    size_t who_len;

    /* names frame: present iff has_names; names[i] is NUL-terminated and
     * points into the message's own buffer (valid until the next decode or
     * clear).  For encoding, point names/nnames at caller-owned strings
 * (never freed by the message) or at the array proto_msg_reserve() gives. */
    int has_names;
    size_t nnames;
    const char **names;

    /* weights frame (welcome/tokens, only with names): present iff
     * has_weights; weights[i] (1..PROTO_WEIGHT_MAX) is the weight of
     * bucket names[i].  Decoded into the message's own array; for encoding,
     * point at nnames caller-owned values. */
    int has_weights;
    const uint32_t *weights;

    /* header "shadow" (welcome/tokens, only with names; optional, issue
     * 28): the buckets of the names frame whose limit is in shadow, as
     * their indexes in ascending order, comma-separated decimal ("3,17");
     * NULL or "" (not sent): none.  A node that does not know the field
     * ignores it.  Decoded into the message's own buffer; for encoding,
     * caller-owned.  proto_shadow_check() says whether a list is good. */
    const char *shadow;

    /* header "shares" (tokens only; optional, issue 28): has_shares says
     * the message carries the node's whole list of share records (buckets
     * not in it hold none; an empty list clears them); absent, the node
     * keeps what it holds.  A node that does not know the field ignores it
     * (plain round robin: nothing lifted, nothing held).  Decoded into the
     * message's own array; for encoding, nshares caller-owned records. */
    int has_shares;
    size_t nshares;
    const proto_share_rec_t *shares;

    /* header "inflight" and "base_us" (report only; optional, issue 25):
     * per bucket the most requests the node held in flight from it (queued
     * plus at the backend) over the interval, for the buckets whose figure
     * moved beyond the node's threshold since it last said one, as a share
     * list ("bucket:count,...", proto_shares_format(): the bucket is an
     * index into the node's table, `tokens` the count, 1..PROTO_MAX_COUNT,
     * at most PROTO_SHARES_MAX per report); a bucket left out keeps its
     * last figure.  base_us: the node's unloaded backend latency in
     * microseconds (1..PROTO_BASE_US_MAX; 0 = not said).  A controller that
     * does not know the fields ignores them.  Decoded into the message's
     * own array; for encoding, ninflight caller-owned records. */
    int has_inflight;
    size_t ninflight;
    const proto_share_rec_t *inflight;
    uint64_t base_us;

    /* records (report or tokens), count of them.  wide: the records were
     * (decode) or must be (encode) in the wide layout; the encoder also
     * sends wide by itself when a value exceeds PROTO_COMPACT_MAX. */
    size_t count;
    int wide;
    proto_report_rec_t *report;
    proto_tokens_rec_t *tokens;

    /* byte records (report or tokens), nbytes of them, sent iff nbytes >
     * 0: arrays as above (proto_msg_reserve_bytes()). */
    size_t nbytes;
    proto_report_bytes_t *rbytes;
    proto_tokens_bytes_t *tbytes;

    /* private: capacities of the owned buffers */
    size_t cap_names, cap_namebuf, cap_report, cap_tokens, cap_weights, cap_bytes;
    char *namebuf;
    const char **names_own;
    uint32_t *weights_own;
    char *shadow_own;
    size_t cap_shadow;
    char *rules_own;
    size_t cap_rules;
    char *who_own;
    size_t cap_who;
    proto_share_rec_t *shares_own;
    size_t cap_shares;
    proto_share_rec_t *inflight_own;
    size_t cap_inflight;
} proto_msg_t;

/* Writes the share list of recs[n] ("3:120,17:40") into buf[cap] with a
 * NUL.  Returns its length, or -EINVAL (n > PROTO_SHARES_MAX, a bucket not
 * ascending, tokens out of 1..PROTO_MAX_COUNT, or no room). */
int proto_shares_format(const proto_share_rec_t *recs, size_t n, char *buf, size_t cap);

/* Parses a share list of len bytes into out[PROTO_SHARES_MAX]: decimal
 * bucket:tokens pairs separated by single commas, buckets strictly
 * ascending, tokens 1..PROTO_MAX_COUNT; "" is the empty list.  Returns the
 * count, or -EINVAL (with the byte offset of the fault in *where if not
 * NULL). */
int proto_shares_parse(const char *s, size_t len, proto_share_rec_t *out, size_t *where);

/* Checks a shadow list (proto_msg_t.shadow) of len bytes against a names
 * frame of nnames: decimal indexes < nnames, strictly ascending,
 * separated by single commas.  Returns 0 or -EINVAL. */
int proto_shadow_check(const char *s, size_t len, size_t nnames);

/* Initialises an empty message (all zero); no allocation. */
void proto_msg_init(proto_msg_t *m);

/* Frees the owned arrays and re-initialises.  Accepts NULL. */
void proto_msg_clear(proto_msg_t *m);

/* Makes room for `n` records of m->type's kind (report or tokens) and for
 * `nnames` name pointers, setting m->report / m->tokens / m->names to owned
 * arrays.  Returns 0, -EINVAL (type without records and n > 0), -ENOMEM. */
int proto_msg_reserve(proto_msg_t *m, size_t n, size_t nnames);

/* Makes room for `n` byte records of m->type's kind, setting m->rbytes or
 * m->tbytes to an owned array.  Returns 0, -EINVAL (type without records),
 * -ENOMEM. */
int proto_msg_reserve_bytes(proto_msg_t *m, size_t n);

/* Encoder output: up to PROTO_MAX_FRAMES frames, buffers owned by the encoder and
 * reused across calls.  Frame i is data[i] / len[i]. */
typedef struct {
    size_t nframes;
    unsigned char *data[PROTO_MAX_FRAMES];
    size_t len[PROTO_MAX_FRAMES];
    size_t cap[PROTO_MAX_FRAMES];
} proto_enc_t;

void proto_enc_init(proto_enc_t *e);
void proto_enc_clear(proto_enc_t *e);   /* frees buffers; accepts NULL */

/* Encodes `m` into e's frames (replacing what was there).  Returns 0,
 * -EINVAL if `m` violates the protocol (bad type, name, number out of
 * range, count > PROTO_MAX_RECORDS), -ENOMEM. */
int proto_encode(const proto_msg_t *m, proto_enc_t *e);

/* A received frame (borrowed; not modified). */
typedef struct {
    const void *data;
    size_t len;
} proto_frame_t;

/* Decodes a message from `nframes` frames into `m` (reusing its arrays).
 * Returns 0 and counts st->ok; on a bad message returns -EPROTO (-ENOMEM if
 * out of memory), counts the reason in `st` (may be NULL) and stores it in
 * *why (may be NULL); `m` then holds no valid message.  Never reads outside
 * the frames; any byte sequence is safe. */
int proto_decode(proto_msg_t *m, const proto_frame_t *frames, size_t nframes,
                 proto_stats_t *st, proto_reason_t *why);

/* ---- tokens net of served ---- */

/* The tokens message's basis for a report of (period, interval) with
 * `intervals` per period: period * intervals + interval + 1, or 0 (not
 * said) when that does not fit PROTO_MAX_COUNT.  Pure. */
uint64_t proto_basis(uint64_t period, uint32_t interval, uint32_t intervals);

/* ---- sparse reports ---- */

/* What a sparse report says about a bucket by leaving it out: the values
 * of its last record (sent in period `bperiod`, interval `binterval`), with
 * the served count (served_r + served_l + served_o) carried on at the rate
 * of that record, served / binterval per interval (0 if binterval is 0):
 * in the same period base + rate x (interval - binterval), in a later one
 * rate x interval (the counters restart at a period start; a report at
 * interval k's start covers k intervals).  The node and the controller
 * both compute it with this function, so they agree to the unit. */
typedef struct {
    uint64_t queued, arrivals; /* queued, arrivals_interval: held */
    uint64_t served;           /* served this period, every class */
    int throttled;             /* r_left <= 0 and l_left <= 0: held */
} proto_pred_t;

/* The served count predicted at (period, interval) from a record of
 * (bperiod, binterval) that said `served`.  Pure; never above
 * PROTO_MAX_COUNT. */
uint64_t proto_predict_served(uint64_t served, uint64_t bperiod, uint32_t binterval,
                              uint64_t period, uint32_t interval);

/* Nonzero if `now` (what the node would report) is near enough to `pred`
 * (what the controller assumes) to leave the bucket out of a sparse report:
 * queued and arrivals within `rel_demand` (relative, or `abs` units),
 * served within `rel_served` (or `abs`), and the same throttled state.
 * Pure. */
int proto_pred_near(const proto_pred_t *pred, const proto_pred_t *now, double rel_demand,
                    double rel_served, uint64_t abs);

/* ---- thin ZeroMQ helpers (multipart zmq_msg) ---- */

/* Hook for the controller: returns nonzero if `node` is known.  A message
 * from an unknown node is counted as PROTO_E_UNKNOWN_NODE; proto_recv() then
 * still returns it, with return value PROTO_RECV_UNKNOWN, so the caller can
 * answer (a hello from an unknown node is never refused by the hook). */
typedef int (*proto_known_fn)(const char *node, void *arg);
#define PROTO_RECV_UNKNOWN 1

/* Sends `m` on `sock` as one multipart message.  With `identity` (ROUTER
 * side) the first frame is the peer's identity (`idlen` bytes).  `e` is
 * scratch space reused across calls.  `zflags` may hold ZMQ_DONTWAIT.
 * Returns 0, -EAGAIN (would block: high-water mark, or a DEALER with
 * ZMQ_IMMEDIATE and no connection), -EHOSTUNREACH (ROUTER with
 * ZMQ_ROUTER_MANDATORY and no such peer), -EINVAL (see proto_encode), or
 * another -errno from zmq.  Nothing is sent when the first part fails. */
int proto_send(void *sock, const void *identity, size_t idlen,
               const proto_msg_t *m, proto_enc_t *e, int zflags);

/* Receives one multipart message from `sock` and decodes it into `m`.
 * With `identity` non-NULL (ROUTER side) the first frame is taken as the
 * peer identity, copied into identity[idcap] with its length in *idlen;
 * the header's "node" must equal it (else PROTO_E_UNKNOWN_NODE).  `known`
 * (may be NULL) is the unknown-node hook above.  `zflags` may hold
 * ZMQ_DONTWAIT.  Returns 0, PROTO_RECV_UNKNOWN, -EAGAIN (nothing to read),
 * -EPROTO (bad message, consumed and counted in st / *why), or another
 * -errno from zmq. */
int proto_recv(void *sock, void *identity, size_t idcap, size_t *idlen,
               proto_msg_t *m, proto_stats_t *st, proto_reason_t *why,
               proto_known_fn known, void *known_arg, int zflags);

/* Who sent a message, as the controller's ZAP handler named its CURVE key
 * (docs/security.md): the message's "User-Id" property ("ROLE NAME") and
 * its "X-Bqos-Key" property (the key, Z85).  Both "" on a socket without
 * authentication. */
typedef struct {
    char user[PROTO_NAME_MAX + 16];
    char key[41];
} proto_peer_t;

/* Fills *p from zmq_msg_t *zmsg (a received message part). */
void proto_peer_get(void *zmsg, proto_peer_t *p);

/* proto_recv() that also fills *peer (may be NULL) with the sender of a
 * message it returns (0 or PROTO_RECV_UNKNOWN). */
int proto_recv_peer(void *sock, void *identity, size_t idcap, size_t *idlen,
                    proto_msg_t *m, proto_stats_t *st, proto_reason_t *why,
                    proto_known_fn known, void *known_arg, int zflags, proto_peer_t *peer);

/* ---- helpers ---- */

/* Returns the type's wire name ("hello", ...) or NULL. */
const char *proto_type_str(proto_type_t t);

/* Names in parts: how many of names[n] from `from` on fit one part
 * (PROTO_PART_BYTES with their NULs, PROTO_PART_NAMES names; 0 when
 * from >= n).  Pure. */
size_t proto_part_len(const char *const *names, size_t n, size_t from);


/* Nonzero if m's shards fields are absent (shards_k 0 and the others 0)
 * or say a valid configuration: shards_k 1..PROTO_SHARDS_MAX, shards_gen
 * >= 1, and either no change (shards_next and shards_from 0) or
 * shards_next 1..PROTO_SHARDS_MAX other than shards_k with shards_from
 * 1..PROTO_MAX_COUNT.  Any thread. */
int proto_shards_ok(const proto_msg_t *m);

/* Returns 0 if `name` (`len` bytes) is a valid node/bucket name: 1..250
 * bytes, no NUL, no whitespace or control characters; else -EINVAL. */
int proto_name_check(const char *name, size_t len);

/* A node's DEALER routing id: its name and, for an instance != 0, a NUL
 * byte and the instance's low 32 bits (little-endian; proto_instance_tag()),
 * so that a second process under the same name is another peer of the
 * controller's ROUTER instead of taking over the first one's connection.
 * At most PROTO_ID_MAX (255, ZeroMQ's limit) bytes. */
#define PROTO_ID_MAX (PROTO_NAME_MAX + 5)

/* The 32 bits of `instance` its routing id carries.  Pure. */
uint32_t proto_instance_tag(uint64_t instance);

/* Writes node `name`'s routing id for `instance` into id (PROTO_ID_MAX
 * bytes, caller's) and returns its length.  `name` must be a valid name.
 * Pure; any thread. */
size_t proto_node_id(const char *name, uint64_t instance, unsigned char *id);

/* Reads a routing id (`len` bytes) of a message whose header names node
 * `name`: 0 if the id is the bare name (*tag = 0), 1 if it carries an
 * instance tag (in *tag), or -EINVAL if the id is not `name`'s (another name, or a malformed
 * suffix).  Pure; any thread. */
int proto_node_id_split(const void *id, size_t len, const char *name, uint32_t *tag);

/* Internal, for tests: returns 2 if the fast flat-object header parser
 * accepts `data` and reads the same fields as jansson, 1 if it declines
 * (jansson then decides), 0 if they disagree (a bug). */
int proto__flat_agrees(const void *data, size_t len);

#endif
