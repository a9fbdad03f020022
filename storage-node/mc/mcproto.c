/* mcproto.c - memcached text protocol parser and reply formatting (see mcproto.h). */
#include "storage-node/mc/mcproto.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TOKENS (MCP_MAX_KEYS + 2)

static const char *const cmd_names[MCP_CMD__COUNT] = {
    "get", "gets", "set", "add", "replace", "append", "prepend", "cas",
    "delete", "incr", "decr", "touch", "flush_all", "version", "verbosity",
    "stats", "quit", "gat", "gats", "mg", "ms", "md", "ma", "mn", "me"};

/* Command table: name, smallest and largest token count (command included). */
static const struct {
    const char *name;
    mcp_cmd_t cmd;
    size_t min_tokens, max_tokens;
} cmd_table[] = {
    {"get", MCP_CMD_GET, 2, MCP_MAX_KEYS + 1},
    {"gets", MCP_CMD_GETS, 2, MCP_MAX_KEYS + 1},
    {"set", MCP_CMD_SET, 5, 6},
    {"add", MCP_CMD_ADD, 5, 6},
    {"replace", MCP_CMD_REPLACE, 5, 6},
    {"append", MCP_CMD_APPEND, 5, 6},
    {"prepend", MCP_CMD_PREPEND, 5, 6},
    {"cas", MCP_CMD_CAS, 6, 7},
    {"delete", MCP_CMD_DELETE, 2, 4},
    {"incr", MCP_CMD_INCR, 3, 4},
    {"decr", MCP_CMD_DECR, 3, 4},
    {"touch", MCP_CMD_TOUCH, 3, 4},
    {"flush_all", MCP_CMD_FLUSH_ALL, 1, 3},
    {"version", MCP_CMD_VERSION, 1, MAX_TOKENS},
    {"verbosity", MCP_CMD_VERBOSITY, 2, 3},
    {"stats", MCP_CMD_STATS, 1, 4}, /* "stats cachedump 1 0" */
    {"quit", MCP_CMD_QUIT, 1, MAX_TOKENS},
    {"gat", MCP_CMD_GAT, 2, MCP_MAX_KEYS + 2},
    {"gats", MCP_CMD_GATS, 2, MCP_MAX_KEYS + 2},
    {"mg", MCP_CMD_MG, 2, MAX_TOKENS},
    {"ms", MCP_CMD_MS, 2, MAX_TOKENS},
    {"md", MCP_CMD_MD, 2, MAX_TOKENS},
    {"ma", MCP_CMD_MA, 2, MAX_TOKENS},
    {"mn", MCP_CMD_MN, 1, MAX_TOKENS},
    {"me", MCP_CMD_ME, 1, MAX_TOKENS},
};

static const char E_ERROR[] = "ERROR";
static const char E_FORMAT[] = "CLIENT_ERROR bad command line format";
static const char E_CHUNK[] = "CLIENT_ERROR bad data chunk";
static const char E_TOO_LARGE[] = "SERVER_ERROR object too large for cache";
static const char E_DELTA[] = "CLIENT_ERROR invalid numeric delta argument";
static const char E_EXPTIME[] = "CLIENT_ERROR invalid exptime argument";
static const char E_DELETE[] =
    "CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]";
static const char E_LINE[] = "CLIENT_ERROR line too long";
static const char E_NO_FLUSH[] = "CLIENT_ERROR flush_all not allowed";
static const char E_KEY_DECODE[] = "CLIENT_ERROR error decoding key";
static const char E_FLAGS_LONG[] = "CLIENT_ERROR options flags too long";
static const char E_FLAGS_ARE_LONG[] = "CLIENT_ERROR options flags are too long";

const char *mcp_cmd_name(mcp_cmd_t cmd)
{
    return (unsigned)cmd < MCP_CMD__COUNT ? cmd_names[cmd] : "?";
}

int mcp_cmd_is_storage(mcp_cmd_t cmd)
{
    return cmd >= MCP_CMD_SET && cmd <= MCP_CMD_CAS;
}

int mcp_base64_decode(const char *in, size_t len, char *out, size_t cap)
{
    size_t n = 0;
    if (len == 0 || len % 4)
        return -EINVAL;
    for (size_t i = 0; i < len; i += 4) {
        uint32_t v = 0;
        int pad = 0;
        for (size_t j = 0; j < 4; j++) {
            unsigned char ch = (unsigned char)in[i + j];
            int d;
            if (ch >= 'A' && ch <= 'Z')
                d = ch - 'A';
            else if (ch >= 'a' && ch <= 'z')
                d = ch - 'a' + 26;
            else if (ch >= '0' && ch <= '9')
                d = ch - '0' + 52;
            else if (ch == '+')
                d = 62;
            else if (ch == '/')
                d = 63;
            else if (ch == '=' && i + 4 == len && j >= 2)
                d = -1;
            else
                return -EINVAL;
            if (d < 0)
                pad++;
            else if (pad) /* a digit after '=' */
                return -EINVAL;
            v = v << 6 | (uint32_t)(d < 0 ? 0 : d);
        }
        size_t k = 3 - (size_t)pad;
        if (n + k > cap)
            return -ENOSPC;
        for (size_t j = 0; j < k; j++)
            out[n++] = (char)(v >> (16 - 8 * j));
    }
    return (int)n;
}

static int tok_eq(mcp_str_t t, const char *s)
{
    size_t n = strlen(s);
    return t.len == n && memcmp(t.ptr, s, n) == 0;
}

/* Copies a token into a NUL-terminated buffer for strto*(); a token too long
 * to be a number fails. */
static int tok_cstr(mcp_str_t t, char *buf, size_t cap)
{
    if (t.len == 0 || t.len >= cap)
        return -1;
    memcpy(buf, t.ptr, t.len);
    buf[t.len] = '\0';
    return 0;
}

/* memcached's safe_strtoull: the whole token, no minus sign. */
static int parse_u64(mcp_str_t t, uint64_t *out)
{
    char buf[32], *end;
    if (tok_cstr(t, buf, sizeof buf) < 0 || memchr(buf, '-', t.len))
        return -1;
    errno = 0;
    unsigned long long v = strtoull(buf, &end, 10);
    if (errno || *end || end == buf)
        return -1;
    *out = v;
    return 0;
}

static int parse_u32(mcp_str_t t, uint32_t *out)
{
    uint64_t v;
    if (parse_u64(t, &v) < 0 || v > UINT32_MAX)
        return -1;
    *out = (uint32_t)v;
    return 0;
}

/* memcached's safe_strtol: a signed 32-bit number. */
static int parse_i32(mcp_str_t t, int64_t *out)
{
    char buf[32], *end;
    if (tok_cstr(t, buf, sizeof buf) < 0)
        return -1;
    errno = 0;
    long long v = strtoll(buf, &end, 10);
    if (errno || *end || end == buf || v < INT_MIN || v > INT_MAX)
        return -1;
    *out = v;
    return 0;
}

static mcp_status_t fail(mcp_result_t *res, const char *line, mcp_str_t at,
                         const char *msg)
{
    res->error = msg;
    res->column = at.ptr ? (size_t)(at.ptr - line) : 0;
    return MCP_ERROR;
}

/* The data block of a storage command (set and its kin, ms): vlen bytes and
 * "\r\n" after the command line, whose length without its "\r\n" is
 * linelen.  A block larger than max_item fails with vtok (the length token)
 * as the column and is swallowed; the reply names req->keys[0].  Returns
 * MCP_NEED_MORE while the block has not all come in. */
static mcp_status_t take_block(const char *buf, size_t len, size_t linelen,
                               size_t max_item, int64_t vlen, mcp_str_t vtok,
                               mcp_req_t *req, mcp_result_t *res)
{
    if ((size_t)vlen > max_item) {
        res->swallow = (size_t)vlen + 2;
        res->key = req->keys[0];
        return fail(res, buf, vtok, E_TOO_LARGE);
    }
    size_t need = res->consumed + (size_t)vlen + 2;
    if (len < need)
        return MCP_NEED_MORE;
    const char *data = buf + res->consumed;
    res->consumed = need;
    if (data[vlen] != '\r' || data[vlen + 1] != '\n') {
        res->column = linelen;
        res->error = E_CHUNK;
        return MCP_ERROR;
    }
    req->data = data;
    req->nbytes = (size_t)vlen;
    return MCP_OK;
}

/* A meta command (tok[0] is mg, ms, md, ma, mn or me): the key, the b and
 * q flags, ms's data block.  Flags are memcached's to check: their tokens
 * go to it as the client wrote them. */
static mcp_status_t parse_meta(const char *buf, size_t len, size_t linelen,
                               const mcp_conf_t *conf, const mcp_str_t *tok,
                               size_t nt, mcp_req_t *req, mcp_result_t *res)
{
    mcp_cmd_t cmd = req->cmd;
    req->noreply = res->noreply = 0; /* the q flag is meta's noreply */
    req->quiet = 0;
    req->line = (mcp_str_t){buf, linelen};
    if (cmd == MCP_CMD_MN)
        return MCP_OK; /* memcached ignores what follows mn */
    if (nt < 2) /* only "me": the others fell to the arity check */
        return fail(res, buf, tok[0], E_FORMAT);
    if (tok[1].len > MCP_KEY_MAX)
        return fail(res, buf, tok[1], E_FORMAT);
    size_t first = cmd == MCP_CMD_MS ? 3 : 2; /* the first flag token */
    /* memcached 1.6.18 takes 19 tokens in all (key and flags), and says
     * so in two ways */
    if (cmd != MCP_CMD_ME && nt > 19)
        return fail(res, buf, tok[19],
                    cmd == MCP_CMD_MG ? E_FLAGS_ARE_LONG : E_FLAGS_LONG);
    int64_t vlen = 0;
    if (cmd == MCP_CMD_MS) {
        if (nt < 3)
            return fail(res, buf, tok[nt - 1], E_FORMAT);
        if (parse_i32(tok[2], &vlen) < 0 || vlen < 0 || vlen > INT_MAX - 2)
            return fail(res, buf, tok[2], E_FORMAT);
    }
    int base64 = 0;
    for (size_t i = first; i < nt; i++) {
        if (cmd == MCP_CMD_ME) /* "me <key> b": the one flag of me */
            base64 |= tok_eq(tok[i], "b");
        else if (tok[i].ptr[0] == 'b')
            base64 = 1;
        else if (tok[i].ptr[0] == 'q')
            req->quiet = 1;
    }
    req->keys[0] = tok[1];
    req->nkeys = 1;
    if (base64) {
        int n = mcp_base64_decode(tok[1].ptr, tok[1].len, req->bkey, sizeof req->bkey);
        if (n <= 0) {
            if (cmd == MCP_CMD_MS) /* memcached drops ms's data block */
                res->swallow = (size_t)vlen + 2;
            return fail(res, buf, tok[1], cmd == MCP_CMD_ME ? E_FORMAT : E_KEY_DECODE);
        }
        req->keys[0] = (mcp_str_t){req->bkey, (size_t)n};
    }
    if (cmd != MCP_CMD_MS)
        return MCP_OK;
    return take_block(buf, len, linelen, conf->max_item, vlen, tok[2], req, res);
}

mcp_status_t mcp_parse(const char *buf, size_t len, const mcp_conf_t *conf,
                       mcp_req_t *req, mcp_result_t *res)
{
    memset(res, 0, sizeof *res);
    if (len == 0)
        return MCP_NEED_MORE;
    if ((unsigned char)buf[0] == 0x80) {
        res->error = NULL; /* binary protocol: refused (mcp_format_binary_refusal()) */
        res->binary = 1;
        return MCP_CLOSE;
    }
    size_t scan = len < MCP_LINE_MAX ? len : MCP_LINE_MAX;
    const char *nl = memchr(buf, '\n', scan);
    if (!nl) {
        if (len >= MCP_LINE_MAX) {
            res->error = E_LINE;
            res->column = MCP_LINE_MAX;
            return MCP_CLOSE;
        }
        return MCP_NEED_MORE;
    }
    size_t linelen = (size_t)(nl - buf);
    res->consumed = linelen + 1;
    if (linelen > 0 && buf[linelen - 1] == '\r')
        linelen--;

    /* Split on spaces; runs of spaces separate like one (as memcached). */
    mcp_str_t tok[MAX_TOKENS + 1];
    size_t nt = 0;
    for (size_t i = 0; i < linelen;) {
        while (i < linelen && buf[i] == ' ')
            i++;
        if (i >= linelen)
            break;
        size_t s = i;
        while (i < linelen && buf[i] != ' ')
            i++;
        if (nt == MAX_TOKENS + 1)
            return fail(res, buf, tok[nt - 1], E_FORMAT);
        tok[nt].ptr = buf + s;
        tok[nt].len = i - s;
        nt++;
    }
    if (nt == 0)
        return fail(res, buf, (mcp_str_t){buf, 0}, E_ERROR);

    size_t ci;
    for (ci = 0; ci < sizeof cmd_table / sizeof cmd_table[0]; ci++)
        if (tok_eq(tok[0], cmd_table[ci].name))
            break;
    if (ci == sizeof cmd_table / sizeof cmd_table[0])
        return fail(res, buf, tok[0], E_ERROR);
    mcp_cmd_t cmd = cmd_table[ci].cmd;
    res->cmd = cmd;
    if (nt < cmd_table[ci].min_tokens || nt > cmd_table[ci].max_tokens) {
        if ((cmd == MCP_CMD_GET || cmd == MCP_CMD_GETS || cmd == MCP_CMD_GAT ||
             cmd == MCP_CMD_GATS) && nt > 1)
            return fail(res, buf, tok[nt - 1], E_FORMAT);
        return fail(res, buf, tok[0], E_ERROR);
    }

    req->nkeys = 0;
    req->flags = 0;
    req->exptime = 0;
    req->cas = 0;
    req->delta = 0;
    req->data = NULL;
    req->nbytes = 0;
    req->arg = (mcp_str_t){buf + linelen, 0};
    req->cmd = cmd;
    req->noreply = nt > 1 && tok_eq(tok[nt - 1], "noreply");
    res->noreply = req->noreply;
    if (cmd >= MCP_CMD_MG)
        return parse_meta(buf, len, linelen, conf, tok, nt, req, res);

    if (mcp_cmd_is_storage(cmd) || cmd == MCP_CMD_DELETE || cmd == MCP_CMD_INCR ||
        cmd == MCP_CMD_DECR || cmd == MCP_CMD_TOUCH) {
        if (tok[1].len > MCP_KEY_MAX)
            return fail(res, buf, tok[1], E_FORMAT);
        req->keys[0] = tok[1];
        req->nkeys = 1;
    }

    switch (cmd) {
    case MCP_CMD_GET:
    case MCP_CMD_GETS:
    case MCP_CMD_GAT:
    case MCP_CMD_GATS: {
        size_t first = 1; /* the first key token */
        if (cmd == MCP_CMD_GAT || cmd == MCP_CMD_GATS) {
            /* "gat <exptime> <key>*": no key at all is a plain END, as in
             * memcached */
            if (parse_i32(tok[1], &req->exptime) < 0)
                return fail(res, buf, tok[1], E_EXPTIME);
            first = 2;
        }
        for (size_t i = first; i < nt; i++) {
            if (tok[i].len > MCP_KEY_MAX)
                return fail(res, buf, tok[i], E_FORMAT);
            req->keys[req->nkeys++] = tok[i];
        }
        req->noreply = 0;
        res->noreply = 0;
        return MCP_OK;
    }
    case MCP_CMD_SET:
    case MCP_CMD_ADD:
    case MCP_CMD_REPLACE:
    case MCP_CMD_APPEND:
    case MCP_CMD_PREPEND:
    case MCP_CMD_CAS: {
        int64_t vlen;
        if (parse_u32(tok[2], &req->flags) < 0)
            return fail(res, buf, tok[2], E_FORMAT);
        if (parse_i32(tok[3], &req->exptime) < 0)
            return fail(res, buf, tok[3], E_FORMAT);
        if (parse_i32(tok[4], &vlen) < 0 || vlen < 0 || vlen > INT_MAX - 2)
            return fail(res, buf, tok[4], E_FORMAT);
        if (cmd == MCP_CMD_CAS && parse_u64(tok[5], &req->cas) < 0)
            return fail(res, buf, tok[5], E_FORMAT);
        return take_block(buf, len, linelen, conf->max_item, vlen, tok[4], req,
                          res);
    }
    case MCP_CMD_DELETE:
        if (nt > 2) {
            int zero = tok_eq(tok[2], "0");
            int valid = (nt == 3 && (zero || req->noreply)) ||
                        (nt == 4 && zero && req->noreply);
            if (!valid)
                return fail(res, buf, tok[2], E_DELETE);
        }
        return MCP_OK;
    case MCP_CMD_INCR:
    case MCP_CMD_DECR:
        if (parse_u64(tok[2], &req->delta) < 0)
            return fail(res, buf, tok[2], E_DELTA);
        return MCP_OK;
    case MCP_CMD_TOUCH:
        if (parse_i32(tok[2], &req->exptime) < 0)
            return fail(res, buf, tok[2], E_EXPTIME);
        return MCP_OK;
    case MCP_CMD_FLUSH_ALL:
        if (conf->no_flush)
            return fail(res, buf, tok[0], E_NO_FLUSH);
        if (nt != (req->noreply ? 2u : 1u)) {
            if (parse_i32(tok[1], &req->exptime) < 0)
                return fail(res, buf, tok[1], E_EXPTIME);
        }
        return MCP_OK;
    case MCP_CMD_VERBOSITY:
        if (req->noreply && nt == 2)
            return MCP_OK; /* "verbosity noreply": memcached stays silent */
        req->delta = strtoul(tok[1].ptr, NULL, 10); /* as memcached: lax */
        return MCP_OK;
    case MCP_CMD_STATS:
        if (nt >= 2) /* the whole rest of the line: "detail on" */
            req->arg = (mcp_str_t){tok[1].ptr,
                                   (size_t)(tok[nt - 1].ptr + tok[nt - 1].len - tok[1].ptr)};
        req->noreply = 0;
        res->noreply = 0;
        return MCP_OK;
    case MCP_CMD_VERSION:
    case MCP_CMD_QUIT:
    case MCP_CMD_MG: /* parse_meta()'s */
    case MCP_CMD_MS:
    case MCP_CMD_MD:
    case MCP_CMD_MA:
    case MCP_CMD_MN:
    case MCP_CMD_ME:
    case MCP_CMD__COUNT:
        break;
    }
    return MCP_OK;
}

const char *mcp_reply_line(mcp_reply_t r)
{
    switch (r) {
    case MCP_R_STORED: return "STORED\r\n";
    case MCP_R_NOT_STORED: return "NOT_STORED\r\n";
    case MCP_R_EXISTS: return "EXISTS\r\n";
    case MCP_R_NOT_FOUND: return "NOT_FOUND\r\n";
    case MCP_R_DELETED: return "DELETED\r\n";
    case MCP_R_TOUCHED: return "TOUCHED\r\n";
    case MCP_R_OK: return "OK\r\n";
    case MCP_R_NON_NUMERIC:
        return "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n";
    case MCP_R_VALUE:
    case MCP_R_MISS:
    case MCP_R_NUMBER:
    case MCP_R_SERVER_ERROR:
        break;
    }
    return "";
}

/* Decimal digits of v at p (room for 20); returns the end. */
static char *put_u64(char *p, uint64_t v)
{
    char tmp[20];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n)
        *p++ = tmp[--n];
    return p;
}

/* Formatted by hand: this runs once per value served (snprintf's parsing
 * of the format was a visible share of the node's CPU per request). */
int mcp_format_value_header(char *out, size_t cap, const char *key,
                            size_t keylen, uint32_t flags, size_t nbytes,
                            int with_cas, uint64_t cas)
{
    /* "VALUE " key, then up to three numbers of at most 20 digits, each
     * after a space, then CRLF and the NUL. */
    if (keylen > INT_MAX || cap < 6 + keylen + 3 * 21 + 3)
        return -ENOSPC;
    char *p = out;
    memcpy(p, "VALUE ", 6);
    p += 6;
    memcpy(p, key, keylen);
    p += keylen;
    *p++ = ' ';
    p = put_u64(p, flags);
    *p++ = ' ';
    p = put_u64(p, nbytes);
    if (with_cas) {
        *p++ = ' ';
        p = put_u64(p, cas);
    }
    *p++ = '\r';
    *p++ = '\n';
    *p = '\0';
    return (int)(p - out);
}

int mcp_format_binary_refusal(char *out, size_t cap, const char *req, size_t len)
{
    static const char msg[] = MCP_BINARY_MSG;
    size_t body = sizeof msg - 1;
    if (cap < 24 + body)
        return -ENOSPC;
    memset(out, 0, 24);
    out[0] = (char)0x81;                  /* response magic */
    out[1] = len > 1 ? req[1] : 0;        /* the request's opcode */
    out[6] = 0x00;
    out[7] = (char)0x83;                  /* status: not supported */
    out[8] = (char)((body >> 24) & 0xff); /* total body length, big-endian */
    out[9] = (char)((body >> 16) & 0xff);
    out[10] = (char)((body >> 8) & 0xff);
    out[11] = (char)(body & 0xff);
    for (size_t i = 12; i < 16; i++)      /* the request's opaque */
        out[i] = i < len ? req[i] : 0;
    memcpy(out + 24, msg, body);
    return (int)(24 + body);
}
