/* mcproto.h - memcached text protocol: request parser and reply formatting
 * over plain byte buffers (no sockets, no allocation), so it is unit-testable.
 *
 * The grammar and every error string follow memcached 1.6 (proto_text.c):
 * client mistakes are answered with "ERROR" or "CLIENT_ERROR ...", values
 * over the item size limit with "SERVER_ERROR object too large for cache"
 * (the data block is then swallowed).  The binary protocol is not supported:
 * a request starting with its magic byte 0x80 is MCP_CLOSE with res.binary
 * set, and mcp_format_binary_refusal() gives the reply that says so.
 * All functions are pure and thread-safe. */
#ifndef BQOS_MCPROTO_H
#define BQOS_MCPROTO_H

#include <stddef.h>
#include <stdint.h>

#define MCP_KEY_MAX 250          /* longest key memcached accepts */
#define MCP_MAX_KEYS 1024        /* most keys in one get/gets line */
#define MCP_LINE_MAX 65536       /* longest command line (a long multi-get) */
#define MCP_ITEM_MAX_DEFAULT (1024 * 1024)

typedef enum {
    MCP_CMD_GET = 0, MCP_CMD_GETS, MCP_CMD_SET, MCP_CMD_ADD, MCP_CMD_REPLACE,
    MCP_CMD_APPEND, MCP_CMD_PREPEND, MCP_CMD_CAS, MCP_CMD_DELETE,
    MCP_CMD_INCR, MCP_CMD_DECR, MCP_CMD_TOUCH, MCP_CMD_FLUSH_ALL,
    MCP_CMD_VERSION, MCP_CMD_VERBOSITY, MCP_CMD_STATS, MCP_CMD_QUIT,
    MCP_CMD_GAT, MCP_CMD_GATS,   /* get and touch: exptime in req.exptime */
    /* The meta protocol (memcached 1.6): mg, ms, md, ma, mn, me.  A meta
     * request is forwarded as the client wrote it (req.line, and ms's data
     * block), so memcached itself checks its flags and the reply is its
     * own; the parser finds only what the node needs: the key (decoded when
     * the b flag says base64), the q flag and ms's data length. */
    MCP_CMD_MG, MCP_CMD_MS, MCP_CMD_MD, MCP_CMD_MA, MCP_CMD_MN, MCP_CMD_ME,
    MCP_CMD__COUNT
} mcp_cmd_t;

/* A byte range inside the parsed buffer (not NUL-terminated). */
typedef struct {
    const char *ptr;
    size_t len;
} mcp_str_t;

/* One parsed request.  Every pointer points into the buffer given to
 * mcp_parse() and is valid only as long as that buffer is. */
typedef struct {
    mcp_cmd_t cmd;
    mcp_str_t keys[MCP_MAX_KEYS]; /* get/gets/gat/gats: all keys (gat: maybe
                                     none); others: keys[0] */
    size_t nkeys;
    uint32_t flags;               /* storage commands */
    int64_t exptime;              /* storage commands, touch, gat/gats;
                                     flush_all delay */
    uint64_t cas;                 /* cas */
    uint64_t delta;               /* incr/decr; verbosity level */
    const char *data;             /* storage commands: the value ... */
    size_t nbytes;                /* ... and its length (no trailing CRLF) */
    int noreply;                  /* last token was "noreply" */
    mcp_str_t arg;                /* stats: the argument ("" for plain stats) */
    /* meta commands: */
    mcp_str_t line;               /* the command line as sent, without its
                                     line end */
    int quiet;                    /* the q flag: memcached's quiet mode */
    char bkey[MCP_KEY_MAX];       /* a base64 key (b flag) decoded; then
                                     keys[0] points here */
} mcp_req_t;

typedef enum {
    MCP_OK = 0,        /* a complete request is in *req */
    MCP_NEED_MORE = 1, /* buffer holds an incomplete request: read more */
    MCP_ERROR = 2,     /* client mistake: send res.error, drop res.consumed
                          bytes, then discard res.swallow more bytes */
    MCP_CLOSE = 3      /* unrecoverable (line too long, binary protocol):
                          send res.error if not NULL (res.binary: the
                          binary refusal), then close */
} mcp_status_t;

/* Outcome of mcp_parse() besides the request itself. */
typedef struct {
    size_t consumed;    /* bytes of the buffer used (line + data block) */
    size_t swallow;     /* bytes to discard after `consumed`; may be more
                           than the buffer holds (a too-large value) */
    const char *error;  /* reply line for MCP_ERROR/MCP_CLOSE, no CRLF */
    size_t column;      /* 0-based byte offset in the line of the error */
    int noreply;        /* the failed command asked for no reply */
    mcp_cmd_t cmd;      /* the command, when it was recognised ... */
    mcp_str_t key;      /* ... and its key: a too-large "set" must also
                           delete the old value, as memcached does */
    int binary;         /* MCP_CLOSE: the client speaks the binary protocol */
} mcp_result_t;

/* What a server accepts beyond the grammar. */
typedef struct {
    size_t max_item;   /* largest value accepted */
    int no_flush;      /* flush_all is answered "CLIENT_ERROR flush_all not
                          allowed" (memcached's -F), before its arguments
                          are looked at; noreply silences it */
} mcp_conf_t;

/* Parses one request at the start of buf[0..len) under *conf.  Returns an
 * mcp_status_t and fills *res (always) and *req (for MCP_OK).  Never reads
 * beyond len.  Pure. */
mcp_status_t mcp_parse(const char *buf, size_t len, const mcp_conf_t *conf,
                       mcp_req_t *req, mcp_result_t *res);

/* Returns the command's name ("get", "set", ...) or "?". */
const char *mcp_cmd_name(mcp_cmd_t cmd);

/* Returns nonzero for commands that carry a data block (set..cas). */
int mcp_cmd_is_storage(mcp_cmd_t cmd);

/* Returns nonzero for the keyed meta commands forwarded to memcached
 * (mg, ms, md, ma, me; not mn, answered by the node).  Inline: the front
 * asks for every request. */
static inline int mcp_cmd_is_meta(mcp_cmd_t cmd)
{
    return cmd == MCP_CMD_MG || cmd == MCP_CMD_MS || cmd == MCP_CMD_MD ||
           cmd == MCP_CMD_MA || cmd == MCP_CMD_ME;
}

/* Decodes standard base64 (with its '=' padding, length a multiple of 4,
 * as memcached's b flag wants) from in[0..len) into out (at most cap
 * bytes).  Returns the decoded length, or -EINVAL (not base64) or
 * -ENOSPC. */
int mcp_base64_decode(const char *in, size_t len, char *out, size_t cap);

/* Outcome of a backend operation, mapped to a reply line. */
typedef enum {
    MCP_R_STORED = 0, MCP_R_NOT_STORED, MCP_R_EXISTS, MCP_R_NOT_FOUND,
    MCP_R_DELETED, MCP_R_TOUCHED, MCP_R_OK,
    MCP_R_VALUE,       /* get hit: the reply is a VALUE block */
    MCP_R_MISS,        /* get miss: nothing for this key */
    MCP_R_NUMBER,      /* incr/decr: the new value */
    MCP_R_NON_NUMERIC, /* incr/decr on a non-numeric value */
    MCP_R_SERVER_ERROR /* backend fault; message given separately */
} mcp_reply_t;

/* Returns the fixed reply line (with CRLF) for a status that has one:
 * "STORED\r\n" ... "OK\r\n", the CLIENT_ERROR line for MCP_R_NON_NUMERIC;
 * "" for VALUE/MISS/NUMBER/SERVER_ERROR, which callers format themselves. */
const char *mcp_reply_line(mcp_reply_t r);

/* Writes "VALUE <key> <flags> <bytes>[ <cas>]\r\n" into out (at most cap
 * bytes, NUL-terminated).  Returns its length without the NUL, or -ENOSPC.
 * Room for MCP_KEY_MAX + 80 bytes is always enough. */
int mcp_format_value_header(char *out, size_t cap, const char *key,
                            size_t keylen, uint32_t flags, size_t nbytes,
                            int with_cas, uint64_t cas);

/* The binary protocol's refusal: a response packet (magic 0x81) with status
 * 0x0083 "not supported", the request's opcode and opaque echoed (taken from
 * the first len bytes of the request, zero where missing) and MCP_BINARY_MSG
 * as its body, so a binary client reports a readable error before the close.
 * Writes at most cap bytes into out; returns the packet's length, or
 * -ENOSPC (MCP_BINARY_REFUSAL_LEN bytes are always enough). */
#define MCP_BINARY_MSG "binary protocol not supported: use memcached's text or meta protocol"
#define MCP_BINARY_REFUSAL_LEN (24 + sizeof MCP_BINARY_MSG - 1)
int mcp_format_binary_refusal(char *out, size_t cap, const char *req, size_t len);

#endif
