/* nbd.h - the NBD wire protocol (fixed newstyle handshake, option haggling,
 * simple and structured replies): pure encoding and parsing, no sockets, no
 * state.
 *
 * Every number on the wire is big-endian.  Parsers take a byte buffer and its
 * length, return 0 when a whole message was decoded, -EAGAIN when more bytes
 * are needed (and say how many in *need), or -EPROTO for bytes that can never
 * be valid; they fill an optional nbd_error_t with the byte offset and a
 * sentence.  Encoders write into a caller buffer whose size is stated by each
 * function.  All functions are thread-safe (no state).
 *
 * Reference: NetworkBlockDevice doc/proto.md, sections "Newstyle
 * negotiation", "Fixed newstyle negotiation", "Option types", "Request
 * message", "Simple reply message", "Structured reply chunk message",
 * "Structured reply flags", "Structured reply types", "Metadata querying",
 * "The base: metadata namespace", "Error values" (see docs/nbd.md). */
#ifndef BQOS_NBD_H
#define BQOS_NBD_H

#include <stddef.h>
#include <stdint.h>

/* Magic numbers. */
#define NBD_MAGIC_INIT      0x4e42444d41474943ull  /* "NBDMAGIC" */
#define NBD_MAGIC_OPT       0x49484156454F5054ull  /* "IHAVEOPT" */
#define NBD_MAGIC_REP       0x0003e889045565a9ull  /* option replies */
#define NBD_MAGIC_REQUEST   0x25609513u
#define NBD_MAGIC_SIMPLE    0x67446698u
#define NBD_MAGIC_STRUCTURED 0x668e33efu

/* Handshake flags (server) and client flags. */
#define NBD_FLAG_FIXED_NEWSTYLE   (1u << 0)
#define NBD_FLAG_NO_ZEROES        (1u << 1)
#define NBD_FLAG_C_FIXED_NEWSTYLE (1u << 0)
#define NBD_FLAG_C_NO_ZEROES      (1u << 1)

/* Transmission flags. */
#define NBD_FLAG_HAS_FLAGS      (1u << 0)
#define NBD_FLAG_READ_ONLY      (1u << 1)
#define NBD_FLAG_SEND_FLUSH     (1u << 2)
#define NBD_FLAG_SEND_FUA       (1u << 3)
#define NBD_FLAG_ROTATIONAL     (1u << 4)
#define NBD_FLAG_SEND_TRIM      (1u << 5)
#define NBD_FLAG_SEND_DF        (1u << 7)  /* only with structured replies */
#define NBD_FLAG_CAN_MULTI_CONN (1u << 8)

/* Options. */
#define NBD_OPT_EXPORT_NAME      1u
#define NBD_OPT_ABORT            2u
#define NBD_OPT_LIST             3u
#define NBD_OPT_STARTTLS         5u
#define NBD_OPT_INFO             6u
#define NBD_OPT_GO               7u
#define NBD_OPT_STRUCTURED_REPLY 8u
#define NBD_OPT_LIST_META_CONTEXT 9u
#define NBD_OPT_SET_META_CONTEXT 10u

/* Option reply types. */
#define NBD_REP_ACK          1u
#define NBD_REP_SERVER       2u
#define NBD_REP_INFO         3u
#define NBD_REP_META_CONTEXT 4u
#define NBD_REP_FLAG_ERROR   (1u << 31)
#define NBD_REP_ERR_UNSUP    (NBD_REP_FLAG_ERROR | 1u)
#define NBD_REP_ERR_POLICY   (NBD_REP_FLAG_ERROR | 2u)
#define NBD_REP_ERR_INVALID  (NBD_REP_FLAG_ERROR | 3u)
#define NBD_REP_ERR_PLATFORM (NBD_REP_FLAG_ERROR | 4u)
#define NBD_REP_ERR_TLS_REQD (NBD_REP_FLAG_ERROR | 5u)
#define NBD_REP_ERR_UNKNOWN  (NBD_REP_FLAG_ERROR | 6u)
#define NBD_REP_ERR_SHUTDOWN (NBD_REP_FLAG_ERROR | 7u)
#define NBD_REP_ERR_TOO_BIG  (NBD_REP_FLAG_ERROR | 9u)

/* Information types of NBD_REP_INFO. */
#define NBD_INFO_EXPORT     0u
#define NBD_INFO_NAME       1u
#define NBD_INFO_DESCRIPTION 2u
#define NBD_INFO_BLOCK_SIZE 3u

/* Commands and command flags. */
#define NBD_CMD_READ  0u
#define NBD_CMD_WRITE 1u
#define NBD_CMD_DISC  2u
#define NBD_CMD_FLUSH 3u
#define NBD_CMD_TRIM  4u
#define NBD_CMD_BLOCK_STATUS 7u
#define NBD_CMD_FLAG_FUA (1u << 0)
#define NBD_CMD_FLAG_DF  (1u << 2)  /* READ: at most one content chunk */
#define NBD_CMD_FLAG_REQ_ONE (1u << 3) /* BLOCK_STATUS: one descriptor */

/* Structured reply chunks: flags and types. */
#define NBD_REPLY_FLAG_DONE          (1u << 0)
#define NBD_REPLY_TYPE_NONE          0u
#define NBD_REPLY_TYPE_OFFSET_DATA   1u
#define NBD_REPLY_TYPE_OFFSET_HOLE   2u
#define NBD_REPLY_TYPE_BLOCK_STATUS  5u
#define NBD_REPLY_TYPE_ERROR         ((1u << 15) + 1)
#define NBD_REPLY_TYPE_ERROR_OFFSET  ((1u << 15) + 2)

/* The one metadata context we know ("base:allocation") and its flags. */
#define NBD_META_BASE_ALLOCATION "base:allocation"
#define NBD_STATE_HOLE (1u << 0)
#define NBD_STATE_ZERO (1u << 1)

/* Error values of replies (not the host's errno numbers). */
#define NBD_EPERM     1u
#define NBD_EIO       5u
#define NBD_ENOMEM    12u
#define NBD_EINVAL    22u
#define NBD_ENOSPC    28u
#define NBD_EOVERFLOW 75u
#define NBD_ENOTSUP   95u
#define NBD_ESHUTDOWN 108u

/* Sizes. */
#define NBD_GREETING_LEN   18u   /* NBDMAGIC, IHAVEOPT, 16-bit flags */
#define NBD_OPT_HDR_LEN    16u
#define NBD_REP_HDR_LEN    20u
#define NBD_REQUEST_LEN    28u
#define NBD_SIMPLE_LEN     16u
#define NBD_CHUNK_HDR_LEN  20u   /* structured reply chunk header */
#define NBD_OFFSET_DATA_HDR_LEN 28u /* chunk header + 64-bit offset */
#define NBD_MAX_ERR_MSG    128u  /* longest message we put in an error chunk */
#define NBD_ERROR_CHUNK_MAX (NBD_CHUNK_HDR_LEN + 6 + NBD_MAX_ERR_MSG)
#define NBD_EXPORT_REPLY_LEN 134u /* size, flags, 124 zeroes */
#define NBD_MAX_OPT_DATA   8192u  /* longer option data is refused */
#define NBD_MAX_NAME       4096u  /* longest string (proto.md Conventions) */
#define NBD_MAX_PAYLOAD    (32u * 1024 * 1024) /* largest READ/WRITE */
#define NBD_BLOCK_STATUS_HDR_LEN (NBD_CHUNK_HDR_LEN + 4) /* + context id */
#define NBD_EXTENT_LEN     8u    /* one block status descriptor */

/* Where and why a parse failed. */
typedef struct {
    size_t offset;       /* byte offset of the offending field */
    char text[96];       /* one sentence, no newline */
} nbd_error_t;

/* One option header as sent by the client. */
typedef struct {
    uint32_t option;
    uint32_t length;     /* bytes of option data that follow the header */
} nbd_option_t;

/* The data of NBD_OPT_INFO / NBD_OPT_GO. */
typedef struct {
    const char *name;    /* points into the parsed buffer, not NUL-terminated */
    uint32_t namelen;
    uint16_t nreqs;      /* information requests */
    int want_block_size; /* NBD_INFO_BLOCK_SIZE was among them */
} nbd_info_req_t;

/* The data of NBD_OPT_LIST_META_CONTEXT / NBD_OPT_SET_META_CONTEXT, checked
 * as a whole by nbd_parse_meta_request(); walk the queries with
 * nbd_meta_next_query(). */
typedef struct {
    const char *name;    /* export name: points into the parsed buffer, not
                            NUL-terminated */
    uint32_t namelen;
    uint32_t nqueries;
    const uint8_t *queries; /* nqueries x (32-bit length, string) */
    size_t querieslen;
} nbd_meta_req_t;

/* One block status descriptor. */
typedef struct {
    uint32_t length;     /* nonzero */
    uint32_t flags;      /* NBD_STATE_* for base:allocation */
} nbd_extent_t;

/* One transmission request header. */
typedef struct {
    uint16_t flags;
    uint16_t type;
    uint64_t handle;
    uint64_t offset;
    uint32_t length;
} nbd_request_t;

/* Writes the 18-byte server greeting with handshake flags `hflags` into buf
 * (at least NBD_GREETING_LEN bytes).  Returns NBD_GREETING_LEN. */
size_t nbd_encode_greeting(uint8_t *buf, uint16_t hflags);

/* Parses the 4-byte client flags.  Returns 0 and sets *flags, -EAGAIN if
 * len < 4, or -EPROTO if a flag other than FIXED_NEWSTYLE and NO_ZEROES is
 * set (the server must then close the connection). */
int nbd_parse_client_flags(const uint8_t *buf, size_t len, uint32_t *flags,
                           nbd_error_t *err);

/* Parses a 16-byte option header.  Returns 0 and fills *opt, -EAGAIN if
 * len < NBD_OPT_HDR_LEN, or -EPROTO if the magic is not IHAVEOPT.  The data
 * length is not bounded here (see NBD_MAX_OPT_DATA). */
int nbd_parse_option(const uint8_t *buf, size_t len, nbd_option_t *opt,
                     nbd_error_t *err);

/* Parses the data of NBD_OPT_INFO / NBD_OPT_GO (`len` bytes): 32-bit name
 * length, name, 16-bit count, count 16-bit info types.  Returns 0 (req->name
 * points into data), or -EINVAL when the lengths do not add up to len or the
 * name is longer than NBD_MAX_NAME (answer NBD_REP_ERR_INVALID). */
int nbd_parse_info_request(const uint8_t *data, size_t len, nbd_info_req_t *req,
                           nbd_error_t *err);

/* Parses the data of NBD_OPT_LIST_META_CONTEXT / SET_META_CONTEXT (`len`
 * bytes): 32-bit export name length, name, 32-bit query count, then per
 * query a 32-bit length and the query.  Every length is checked against
 * `len` (the data must be used exactly), names and queries against
 * NBD_MAX_NAME and for NUL bytes.  Returns 0 (req points into data), or
 * -EINVAL with *err saying which field is wrong (answer
 * NBD_REP_ERR_INVALID). */
int nbd_parse_meta_request(const uint8_t *data, size_t len, nbd_meta_req_t *req,
                           nbd_error_t *err);

/* Steps through the queries of a request nbd_parse_meta_request()
 * accepted: *cursor starts at 0.  Returns 1 and points *q at the next
 * query (not NUL-terminated, *qlen bytes), or 0 when there are no more. */
int nbd_meta_next_query(const nbd_meta_req_t *req, size_t *cursor, const char **q,
                        uint32_t *qlen);

/* Says whether query `q` (qlen bytes) selects "base:allocation": for LIST
 * (`list` nonzero) "base:" is a wildcard for every base: context and the
 * exact name matches; for SET only the exact name does ("base:" is ignored
 * there, proto.md "The base: metadata namespace").  Other namespaces and
 * unknown base: leaves never match (they are ignored, not errors).
 * Returns 1 or 0. */
int nbd_meta_query_matches(const char *q, uint32_t qlen, int list);

/* Writes an option reply header (magic, option, type, length) into buf (at
 * least NBD_REP_HDR_LEN bytes).  Returns NBD_REP_HDR_LEN. */
size_t nbd_encode_rep_header(uint8_t *buf, uint32_t option, uint32_t type,
                             uint32_t length);

/* Writes a complete NBD_REP_SERVER reply for export `name` (namelen bytes)
 * into buf (at least NBD_REP_HDR_LEN + 4 + namelen bytes).  Returns the
 * number of bytes written. */
size_t nbd_encode_rep_server(uint8_t *buf, uint32_t option, const char *name,
                             uint32_t namelen);

/* Writes a complete NBD_REP_INFO / NBD_INFO_EXPORT reply (32 bytes) into
 * buf.  Returns 32. */
size_t nbd_encode_info_export(uint8_t *buf, uint32_t option, uint64_t size,
                              uint16_t tflags);

/* Writes a complete NBD_REP_INFO / NBD_INFO_BLOCK_SIZE reply (34 bytes) into
 * buf.  Returns 34. */
size_t nbd_encode_info_block_size(uint8_t *buf, uint32_t option, uint32_t min,
                                  uint32_t preferred, uint32_t max);

/* Writes the reply to a successful NBD_OPT_EXPORT_NAME into buf (at least
 * NBD_EXPORT_REPLY_LEN bytes): size, transmission flags and, unless
 * `no_zeroes`, 124 zero bytes.  Returns 10 or 134. */
size_t nbd_encode_export_reply(uint8_t *buf, uint64_t size, uint16_t tflags,
                               int no_zeroes);

/* Writes a complete NBD_REP_META_CONTEXT reply (context `id`, then the
 * NUL-terminated `name`) into buf (at least NBD_REP_HDR_LEN + 4 +
 * strlen(name) bytes).  Returns the number of bytes written. */
size_t nbd_encode_rep_meta_context(uint8_t *buf, uint32_t option, uint32_t id,
                                   const char *name);

/* Parses the data of an NBD_REP_META_CONTEXT reply (`len` bytes).  Returns
 * 0, sets *id and points *name into buf (*namelen bytes), or -EPROTO if
 * len < 4 or the name is longer than NBD_MAX_NAME. */
int nbd_parse_rep_meta_context(const uint8_t *buf, size_t len, uint32_t *id,
                               const char **name, uint32_t *namelen, nbd_error_t *err);

/* Parses a 28-byte request header.  Returns 0 and fills *req, -EAGAIN if
 * len < NBD_REQUEST_LEN, or -EPROTO for a bad magic (the stream cannot be
 * resynchronised: close the connection). */
int nbd_parse_request(const uint8_t *buf, size_t len, nbd_request_t *req,
                      nbd_error_t *err);

/* Checks a parsed request against an export of `size` bytes on a
 * connection that negotiated structured replies (`structured` nonzero) or
 * not.  Returns 0 if it may be executed, else the NBD error value to answer:
 * NBD_EINVAL for an unknown command or flag (NBD_CMD_FLAG_DF is a READ flag
 * only with structured replies), a READ/TRIM beyond the end or a FLUSH/DISC
 * with a nonzero offset or length; NBD_ENOSPC for a WRITE beyond the end;
 * NBD_EOVERFLOW for a READ/WRITE longer than NBD_MAX_PAYLOAD.  A
 * zero-length READ/WRITE/TRIM inside the export is valid.
 * NBD_CMD_BLOCK_STATUS is valid only with structured replies, flags FUA
 * and REQ_ONE, a nonzero length and inside the export (else NBD_EINVAL);
 * whether a metadata context was selected is the caller's check. */
uint32_t nbd_check_request(const nbd_request_t *req, uint64_t size, int structured);

/* Writes a simple reply header (16 bytes) into buf.  Returns NBD_SIMPLE_LEN. */
size_t nbd_encode_simple_reply(uint8_t *buf, uint32_t error, uint64_t handle);

/* Writes a structured reply chunk header (20 bytes: magic, flags, type,
 * handle, payload length) into buf.  Returns NBD_CHUNK_HDR_LEN. */
size_t nbd_encode_chunk_header(uint8_t *buf, uint16_t flags, uint16_t type,
                               uint64_t handle, uint32_t length);

/* Writes the head of an NBD_REPLY_TYPE_OFFSET_DATA chunk carrying `datalen`
 * bytes read at `offset` (chunk header with length 8 + datalen, then the
 * offset) into buf (at least NBD_OFFSET_DATA_HDR_LEN bytes); the caller
 * sends the data right after it.  datalen must be 1 .. UINT32_MAX - 8.
 * Returns NBD_OFFSET_DATA_HDR_LEN. */
size_t nbd_encode_offset_data(uint8_t *buf, uint16_t flags, uint64_t handle,
                              uint64_t offset, uint32_t datalen);

/* Writes a complete NBD_REPLY_TYPE_BLOCK_STATUS chunk for metadata context
 * `id` with reply flags `flags` (NBD_REPLY_FLAG_DONE for the last chunk)
 * and the `n` descriptors `ext` (n >= 1, every length nonzero) into buf (at
 * least NBD_BLOCK_STATUS_HDR_LEN + n * NBD_EXTENT_LEN bytes).  Returns the
 * number of bytes written. */
size_t nbd_encode_block_status(uint8_t *buf, uint16_t flags, uint64_t handle, uint32_t id,
                               const nbd_extent_t *ext, uint32_t n);

/* Parses the payload of a block status chunk (`len` bytes, the header's
 * length): context id, then descriptors.  Returns 0, sets *id and *n (the
 * number of descriptors) and copies the first min(*n, max) of them into
 * ext (which may be NULL if max is 0), or -EPROTO if len is not 4 + a
 * positive multiple of 8 or a descriptor has length 0. */
int nbd_parse_block_status(const uint8_t *buf, size_t len, uint32_t *id, nbd_extent_t *ext,
                           uint32_t max, uint32_t *n, nbd_error_t *err);

/* Writes a complete NBD_REPLY_TYPE_ERROR chunk with NBD_REPLY_FLAG_DONE:
 * error value `error` (nonzero) and message `msg` (NUL-terminated; NULL or
 * "" for none; cut to NBD_MAX_ERR_MSG bytes) into buf (at least
 * NBD_ERROR_CHUNK_MAX bytes).  Returns the number of bytes written. */
size_t nbd_encode_error_chunk(uint8_t *buf, uint64_t handle, uint32_t error,
                              const char *msg);

/* ---- the client side (load generators, tests) ---- */

/* Writes a 16-byte option header (IHAVEOPT, option, data length) into buf.
 * Returns NBD_OPT_HDR_LEN. */
size_t nbd_encode_option(uint8_t *buf, uint32_t option, uint32_t length);

/* Parses a 20-byte option reply header.  Returns 0, -EAGAIN if len < 20, or
 * -EPROTO for a bad magic. */
int nbd_parse_rep_header(const uint8_t *buf, size_t len, uint32_t *option,
                         uint32_t *type, uint32_t *length, nbd_error_t *err);

/* Writes a 28-byte request header into buf.  Returns NBD_REQUEST_LEN. */
size_t nbd_encode_request(uint8_t *buf, uint16_t flags, uint16_t type,
                          uint64_t handle, uint64_t offset, uint32_t length);

/* Parses a 16-byte simple reply header.  Returns 0, -EAGAIN if len < 16, or
 * -EPROTO for a bad magic (a structured reply included). */
int nbd_parse_simple_reply(const uint8_t *buf, size_t len, uint32_t *error,
                           uint64_t *handle, nbd_error_t *err);

/* Parses a 20-byte structured reply chunk header.  Returns 0 and fills the
 * fields, -EAGAIN if len < NBD_CHUNK_HDR_LEN, or -EPROTO for a magic other
 * than NBD_MAGIC_STRUCTURED (a simple reply included). */
int nbd_parse_chunk_header(const uint8_t *buf, size_t len, uint16_t *flags,
                           uint16_t *type, uint64_t *handle, uint32_t *length,
                           nbd_error_t *err);

/* Parses the payload of an error chunk (`len` bytes, the header's length):
 * 32-bit error, 16-bit message length, message.  Returns 0, sets *error and
 * points *msg into buf (not NUL-terminated, *msglen bytes), or -EPROTO if
 * len < 6, the error is zero or the message overruns the payload. */
int nbd_parse_error_payload(const uint8_t *buf, size_t len, uint32_t *error,
                            const char **msg, uint16_t *msglen, nbd_error_t *err);

/* Maps a positive host errno to the protocol's error value (EDQUOT and EFBIG
 * become NBD_ENOSPC, unknown ones NBD_EIO).  0 maps to 0. */
uint32_t nbd_errno_to_wire(int err);

/* Returns a constant name for an option or command number ("GO", "READ",
 * ...; "unknown" otherwise). */
const char *nbd_opt_name(uint32_t option);
const char *nbd_cmd_name(uint16_t type);

#endif
