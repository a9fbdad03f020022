/* nbd.c - NBD wire protocol encoders and parsers (see nbd.h). */
#include "storage-node/nbd/nbd.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/be.h"

static int fail(nbd_error_t *err, size_t offset, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(nbd_error_t *err, size_t offset, int rc, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        err->offset = offset;
        vsnprintf(err->text, sizeof err->text, fmt, ap);
        va_end(ap);
    }
    return rc;
}

size_t nbd_encode_greeting(uint8_t *buf, uint16_t hflags)
{
    be_put64(buf, NBD_MAGIC_INIT);
    be_put64(buf + 8, NBD_MAGIC_OPT);
    be_put16(buf + 16, hflags);
    return NBD_GREETING_LEN;
}

int nbd_parse_client_flags(const uint8_t *buf, size_t len, uint32_t *flags,
                           nbd_error_t *err)
{
    if (len < 4)
        return fail(err, len, -EAGAIN, "need 4 bytes of client flags");
    uint32_t f = be_get32(buf);
    if (f & ~(uint32_t)(NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES))
        return fail(err, 0, -EPROTO, "unknown client flags 0x%08x", f);
    *flags = f;
    return 0;
}

int nbd_parse_option(const uint8_t *buf, size_t len, nbd_option_t *opt,
                     nbd_error_t *err)
{
    if (len < NBD_OPT_HDR_LEN)
        return fail(err, len, -EAGAIN, "need %u bytes of option header", NBD_OPT_HDR_LEN);
    if (be_get64(buf) != NBD_MAGIC_OPT)
        return fail(err, 0, -EPROTO, "option magic is not IHAVEOPT");
    opt->option = be_get32(buf + 8);
    opt->length = be_get32(buf + 12);
    return 0;
}

/* Checks the length-prefixed string at data + off (32-bit length, then
 * that many bytes, no NUL, at most NBD_MAX_NAME) with `need` more bytes
 * after it within len; `what` names it in the error.  Returns 0 and sets
 * *slen, or -EINVAL.  The caller has checked that the length field fits. */
static int check_string(const uint8_t *data, size_t len, size_t off, size_t need,
                        const char *what, uint32_t *slen, nbd_error_t *err)
{
    uint32_t n = be_get32(data + off);
    if (n > NBD_MAX_NAME)
        return fail(err, off, -EINVAL, "%s of %u bytes is too long", what, n);
    if ((size_t)n + need > len - off - 4)
        return fail(err, off, -EINVAL, "%s length %u overruns the option data", what, n);
    if (memchr(data + off + 4, '\0', n))
        return fail(err, off + 4, -EINVAL, "%s contains NUL", what);
    *slen = n;
    return 0;
}

int nbd_parse_info_request(const uint8_t *data, size_t len, nbd_info_req_t *req,
                           nbd_error_t *err)
{
    if (len < 6)
        return fail(err, len, -EINVAL, "info request shorter than 6 bytes");
    uint32_t nl;
    if (check_string(data, len, 0, 2, "export name", &nl, err) < 0)
        return -EINVAL;
    uint16_t n = be_get16(data + 4 + nl);
    if ((size_t)nl + 6 + 2 * (size_t)n != len)
        return fail(err, 4 + nl, -EINVAL, "%u information requests do not fill %zu bytes",
                    n, len);
    req->name = (const char *)data + 4;
    req->namelen = nl;
    req->nreqs = n;
    req->want_block_size = 0;
    for (uint16_t i = 0; i < n; i++)
        if (be_get16(data + 6 + nl + 2 * (size_t)i) == NBD_INFO_BLOCK_SIZE)
            req->want_block_size = 1;
    return 0;
}

int nbd_parse_meta_request(const uint8_t *data, size_t len, nbd_meta_req_t *req,
                           nbd_error_t *err)
{
    if (len < 8)
        return fail(err, len, -EINVAL, "meta context request shorter than 8 bytes");
    uint32_t nl;
    if (check_string(data, len, 0, 4, "export name", &nl, err) < 0)
        return -EINVAL;
    size_t pos = 4 + (size_t)nl;
    uint32_t nq = be_get32(data + pos);
    pos += 4;
    size_t qstart = pos;
    for (uint32_t i = 0; i < nq; i++) {
        if (len - pos < 4)
            return fail(err, pos, -EINVAL, "query %u of %u: length missing", i + 1, nq);
        char what[24];
        snprintf(what, sizeof what, "query %u", i + 1);
        uint32_t ql;
        if (check_string(data, len, pos, 0, what, &ql, err) < 0)
            return -EINVAL;
        pos += 4 + (size_t)ql;
    }
    if (pos != len)
        return fail(err, pos, -EINVAL, "%zu bytes after %u queries", len - pos, nq);
    req->name = (const char *)data + 4;
    req->namelen = nl;
    req->nqueries = nq;
    req->queries = data + qstart;
    req->querieslen = len - qstart;
    return 0;
}

int nbd_meta_next_query(const nbd_meta_req_t *req, size_t *cursor, const char **q,
                        uint32_t *qlen)
{
    if (*cursor + 4 > req->querieslen)
        return 0;
    uint32_t ql = be_get32(req->queries + *cursor);
    *q = (const char *)req->queries + *cursor + 4;
    *qlen = ql;
    *cursor += 4 + (size_t)ql;
    return 1;
}

int nbd_meta_query_matches(const char *q, uint32_t qlen, int list)
{
    static const char full[] = NBD_META_BASE_ALLOCATION;
    if (qlen == sizeof full - 1 && memcmp(q, full, qlen) == 0)
        return 1;
    return list && qlen == 5 && memcmp(q, "base:", 5) == 0;
}

size_t nbd_encode_rep_header(uint8_t *buf, uint32_t option, uint32_t type,
                             uint32_t length)
{
    be_put64(buf, NBD_MAGIC_REP);
    be_put32(buf + 8, option);
    be_put32(buf + 12, type);
    be_put32(buf + 16, length);
    return NBD_REP_HDR_LEN;
}

size_t nbd_encode_rep_server(uint8_t *buf, uint32_t option, const char *name,
                             uint32_t namelen)
{
    size_t n = nbd_encode_rep_header(buf, option, NBD_REP_SERVER, 4 + namelen);
    be_put32(buf + n, namelen);
    memcpy(buf + n + 4, name, namelen);
    return n + 4 + namelen;
}

size_t nbd_encode_rep_meta_context(uint8_t *buf, uint32_t option, uint32_t id,
                                   const char *name)
{
    size_t nl = strlen(name);
    size_t n = nbd_encode_rep_header(buf, option, NBD_REP_META_CONTEXT, (uint32_t)(4 + nl));
    be_put32(buf + n, id);
    memcpy(buf + n + 4, name, nl);
    return n + 4 + nl;
}

int nbd_parse_rep_meta_context(const uint8_t *buf, size_t len, uint32_t *id,
                               const char **name, uint32_t *namelen, nbd_error_t *err)
{
    if (len < 4)
        return fail(err, len, -EPROTO, "meta context reply shorter than 4 bytes");
    if (len - 4 > NBD_MAX_NAME)
        return fail(err, 4, -EPROTO, "meta context name of %zu bytes is too long", len - 4);
    *id = be_get32(buf);
    *name = (const char *)buf + 4;
    *namelen = (uint32_t)(len - 4);
    return 0;
}

size_t nbd_encode_info_export(uint8_t *buf, uint32_t option, uint64_t size,
                              uint16_t tflags)
{
    size_t n = nbd_encode_rep_header(buf, option, NBD_REP_INFO, 12);
    be_put16(buf + n, NBD_INFO_EXPORT);
    be_put64(buf + n + 2, size);
    be_put16(buf + n + 10, tflags);
    return n + 12;
}

size_t nbd_encode_info_block_size(uint8_t *buf, uint32_t option, uint32_t min,
                                  uint32_t preferred, uint32_t max)
{
    size_t n = nbd_encode_rep_header(buf, option, NBD_REP_INFO, 14);
    be_put16(buf + n, NBD_INFO_BLOCK_SIZE);
    be_put32(buf + n + 2, min);
    be_put32(buf + n + 6, preferred);
    be_put32(buf + n + 10, max);
    return n + 14;
}

size_t nbd_encode_export_reply(uint8_t *buf, uint64_t size, uint16_t tflags,
                               int no_zeroes)
{
    be_put64(buf, size);
    be_put16(buf + 8, tflags);
    if (no_zeroes)
        return 10;
    memset(buf + 10, 0, 124);
    return NBD_EXPORT_REPLY_LEN;
}

int nbd_parse_request(const uint8_t *buf, size_t len, nbd_request_t *req,
                      nbd_error_t *err)
{
    if (len < NBD_REQUEST_LEN)
        return fail(err, len, -EAGAIN, "need %u bytes of request header", NBD_REQUEST_LEN);
    uint32_t magic = be_get32(buf);
    if (magic != NBD_MAGIC_REQUEST)
        return fail(err, 0, -EPROTO, "request magic 0x%08x is not 0x%08x", magic,
                    NBD_MAGIC_REQUEST);
    req->flags = be_get16(buf + 4);
    req->type = be_get16(buf + 6);
    req->handle = be_get64(buf + 8);
    req->offset = be_get64(buf + 16);
    req->length = be_get32(buf + 24);
    return 0;
}

/* Nonzero if [off, off+len) does not fit in an export of `size` bytes
 * (written so that it cannot overflow). */
static int beyond(uint64_t off, uint64_t len, uint64_t size)
{
    return len > size || off > size - len;
}

uint32_t nbd_check_request(const nbd_request_t *req, uint64_t size, int structured)
{
    uint16_t read_flags = NBD_CMD_FLAG_FUA | (structured ? NBD_CMD_FLAG_DF : 0);
    switch (req->type) {
    case NBD_CMD_READ:
        if (req->flags & ~read_flags)
            return NBD_EINVAL;
        if (req->length > NBD_MAX_PAYLOAD)
            return NBD_EOVERFLOW;
        return beyond(req->offset, req->length, size) ? NBD_EINVAL : 0;
    case NBD_CMD_WRITE:
        if (req->flags & ~(uint16_t)NBD_CMD_FLAG_FUA)
            return NBD_EINVAL;
        if (req->length > NBD_MAX_PAYLOAD)
            return NBD_EOVERFLOW;
        return beyond(req->offset, req->length, size) ? NBD_ENOSPC : 0;
    case NBD_CMD_TRIM:
        if (req->flags & ~(uint16_t)NBD_CMD_FLAG_FUA)
            return NBD_EINVAL;
        return beyond(req->offset, req->length, size) ? NBD_EINVAL : 0;
    case NBD_CMD_BLOCK_STATUS:
        if (!structured || (req->flags & ~(uint16_t)(NBD_CMD_FLAG_FUA | NBD_CMD_FLAG_REQ_ONE)))
            return NBD_EINVAL;
        if (req->length == 0)
            return NBD_EINVAL;
        return beyond(req->offset, req->length, size) ? NBD_EINVAL : 0;
    case NBD_CMD_FLUSH:
    case NBD_CMD_DISC:
        if (req->flags || req->offset || req->length)
            return NBD_EINVAL;
        return 0;
    default:
        return NBD_EINVAL;
    }
}

size_t nbd_encode_simple_reply(uint8_t *buf, uint32_t error, uint64_t handle)
{
    be_put32(buf, NBD_MAGIC_SIMPLE);
    be_put32(buf + 4, error);
    be_put64(buf + 8, handle);
    return NBD_SIMPLE_LEN;
}

size_t nbd_encode_chunk_header(uint8_t *buf, uint16_t flags, uint16_t type,
                               uint64_t handle, uint32_t length)
{
    be_put32(buf, NBD_MAGIC_STRUCTURED);
    be_put16(buf + 4, flags);
    be_put16(buf + 6, type);
    be_put64(buf + 8, handle);
    be_put32(buf + 16, length);
    return NBD_CHUNK_HDR_LEN;
}

size_t nbd_encode_offset_data(uint8_t *buf, uint16_t flags, uint64_t handle,
                              uint64_t offset, uint32_t datalen)
{
    nbd_encode_chunk_header(buf, flags, NBD_REPLY_TYPE_OFFSET_DATA, handle, 8 + datalen);
    be_put64(buf + NBD_CHUNK_HDR_LEN, offset);
    return NBD_OFFSET_DATA_HDR_LEN;
}

size_t nbd_encode_block_status(uint8_t *buf, uint16_t flags, uint64_t handle, uint32_t id,
                               const nbd_extent_t *ext, uint32_t n)
{
    nbd_encode_chunk_header(buf, flags, NBD_REPLY_TYPE_BLOCK_STATUS, handle,
                            4 + n * NBD_EXTENT_LEN);
    be_put32(buf + NBD_CHUNK_HDR_LEN, id);
    uint8_t *p = buf + NBD_BLOCK_STATUS_HDR_LEN;
    for (uint32_t i = 0; i < n; i++, p += NBD_EXTENT_LEN) {
        be_put32(p, ext[i].length);
        be_put32(p + 4, ext[i].flags);
    }
    return (size_t)(p - buf);
}

int nbd_parse_block_status(const uint8_t *buf, size_t len, uint32_t *id, nbd_extent_t *ext,
                           uint32_t max, uint32_t *n, nbd_error_t *err)
{
    if (len < 4 + NBD_EXTENT_LEN || (len - 4) % NBD_EXTENT_LEN != 0)
        return fail(err, 0, -EPROTO, "block status payload of %zu bytes is not 4 + 8 * n",
                    len);
    uint32_t cnt = (uint32_t)((len - 4) / NBD_EXTENT_LEN);
    for (uint32_t i = 0; i < cnt; i++) {
        const uint8_t *p = buf + 4 + (size_t)i * NBD_EXTENT_LEN;
        if (be_get32(p) == 0)
            return fail(err, (size_t)(p - buf), -EPROTO, "descriptor %u has length 0", i + 1);
        if (i < max) {
            ext[i].length = be_get32(p);
            ext[i].flags = be_get32(p + 4);
        }
    }
    *id = be_get32(buf);
    *n = cnt;
    return 0;
}

size_t nbd_encode_error_chunk(uint8_t *buf, uint64_t handle, uint32_t error,
                              const char *msg)
{
    size_t ml = msg ? strlen(msg) : 0;
    if (ml > NBD_MAX_ERR_MSG)
        ml = NBD_MAX_ERR_MSG;
    nbd_encode_chunk_header(buf, NBD_REPLY_FLAG_DONE, NBD_REPLY_TYPE_ERROR, handle,
                            (uint32_t)(6 + ml));
    be_put32(buf + NBD_CHUNK_HDR_LEN, error);
    be_put16(buf + NBD_CHUNK_HDR_LEN + 4, (uint16_t)ml);
    if (ml)
        memcpy(buf + NBD_CHUNK_HDR_LEN + 6, msg, ml);
    return NBD_CHUNK_HDR_LEN + 6 + ml;
}

size_t nbd_encode_option(uint8_t *buf, uint32_t option, uint32_t length)
{
    be_put64(buf, NBD_MAGIC_OPT);
    be_put32(buf + 8, option);
    be_put32(buf + 12, length);
    return NBD_OPT_HDR_LEN;
}

int nbd_parse_rep_header(const uint8_t *buf, size_t len, uint32_t *option,
                         uint32_t *type, uint32_t *length, nbd_error_t *err)
{
    if (len < NBD_REP_HDR_LEN)
        return fail(err, len, -EAGAIN, "need %u bytes of option reply", NBD_REP_HDR_LEN);
    if (be_get64(buf) != NBD_MAGIC_REP)
        return fail(err, 0, -EPROTO, "option reply magic is wrong");
    *option = be_get32(buf + 8);
    *type = be_get32(buf + 12);
    *length = be_get32(buf + 16);
    return 0;
}

size_t nbd_encode_request(uint8_t *buf, uint16_t flags, uint16_t type,
                          uint64_t handle, uint64_t offset, uint32_t length)
{
    be_put32(buf, NBD_MAGIC_REQUEST);
    be_put16(buf + 4, flags);
    be_put16(buf + 6, type);
    be_put64(buf + 8, handle);
    be_put64(buf + 16, offset);
    be_put32(buf + 24, length);
    return NBD_REQUEST_LEN;
}

int nbd_parse_simple_reply(const uint8_t *buf, size_t len, uint32_t *error,
                           uint64_t *handle, nbd_error_t *err)
{
    if (len < NBD_SIMPLE_LEN)
        return fail(err, len, -EAGAIN, "need %u bytes of reply", NBD_SIMPLE_LEN);
    uint32_t magic = be_get32(buf);
    if (magic != NBD_MAGIC_SIMPLE)
        return fail(err, 0, -EPROTO, "reply magic 0x%08x is not a simple reply", magic);
    *error = be_get32(buf + 4);
    *handle = be_get64(buf + 8);
    return 0;
}

int nbd_parse_chunk_header(const uint8_t *buf, size_t len, uint16_t *flags,
                           uint16_t *type, uint64_t *handle, uint32_t *length,
                           nbd_error_t *err)
{
    if (len < NBD_CHUNK_HDR_LEN)
        return fail(err, len, -EAGAIN, "need %u bytes of reply chunk", NBD_CHUNK_HDR_LEN);
    uint32_t magic = be_get32(buf);
    if (magic != NBD_MAGIC_STRUCTURED)
        return fail(err, 0, -EPROTO, "reply magic 0x%08x is not a structured reply", magic);
    *flags = be_get16(buf + 4);
    *type = be_get16(buf + 6);
    *handle = be_get64(buf + 8);
    *length = be_get32(buf + 16);
    return 0;
}

int nbd_parse_error_payload(const uint8_t *buf, size_t len, uint32_t *error,
                            const char **msg, uint16_t *msglen, nbd_error_t *err)
{
    if (len < 6)
        return fail(err, len, -EPROTO, "error chunk payload shorter than 6 bytes");
    uint32_t e = be_get32(buf);
    if (e == 0)
        return fail(err, 0, -EPROTO, "error chunk with error value 0");
    uint16_t ml = be_get16(buf + 4);
    if ((size_t)ml + 6 > len)
        return fail(err, 4, -EPROTO, "error message of %u bytes overruns the payload", ml);
    *error = e;
    *msg = (const char *)buf + 6;
    *msglen = ml;
    return 0;
}

uint32_t nbd_errno_to_wire(int err)
{
    switch (err) {
    case 0: return 0;
    case EPERM: case EROFS: return NBD_EPERM;
    case ENOMEM: return NBD_ENOMEM;
    case EINVAL: return NBD_EINVAL;
    case ENOSPC: case EDQUOT: case EFBIG: return NBD_ENOSPC;
    case EOVERFLOW: return NBD_EOVERFLOW;
    case ENOTSUP: return NBD_ENOTSUP;
    case ESHUTDOWN: return NBD_ESHUTDOWN;
    default: return NBD_EIO;
    }
}

const char *nbd_opt_name(uint32_t option)
{
    switch (option) {
    case NBD_OPT_EXPORT_NAME: return "EXPORT_NAME";
    case NBD_OPT_ABORT: return "ABORT";
    case NBD_OPT_LIST: return "LIST";
    case NBD_OPT_STARTTLS: return "STARTTLS";
    case NBD_OPT_INFO: return "INFO";
    case NBD_OPT_GO: return "GO";
    case NBD_OPT_STRUCTURED_REPLY: return "STRUCTURED_REPLY";
    case NBD_OPT_LIST_META_CONTEXT: return "LIST_META_CONTEXT";
    case NBD_OPT_SET_META_CONTEXT: return "SET_META_CONTEXT";
    default: return "unknown";
    }
}

const char *nbd_cmd_name(uint16_t type)
{
    switch (type) {
    case NBD_CMD_READ: return "READ";
    case NBD_CMD_WRITE: return "WRITE";
    case NBD_CMD_DISC: return "DISC";
    case NBD_CMD_FLUSH: return "FLUSH";
    case NBD_CMD_TRIM: return "TRIM";
    case NBD_CMD_BLOCK_STATUS: return "BLOCK_STATUS";
    default: return "unknown";
    }
}
