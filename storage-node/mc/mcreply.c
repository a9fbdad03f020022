/* mcreply.c - the memcached reply text of a finished backend command, and
 * the command counters of `stats` (see mcreply.h). */
#include "storage-node/mc/mcreply.h"

#include <string.h>

#define OP(i) ((const backend_op_t *)(const void *)((const char *)first + (size_t)(i) * stride))

void mcreply_ops(struct evbuffer *out, mcp_cmd_t cmd, const backend_op_t *first,
                 size_t stride, int n, mcstats_t *st)
{
    for (int i = 0; i < n; i++) {
        const backend_op_t *op = OP(i);
        if (op->reply == MCP_R_SERVER_ERROR) {
            /* One failed key fails the whole (multi-)get, as a proxy must:
             * a partial VALUE list would read as misses. */
            evbuffer_add_printf(out, "%s\r\n", op->errmsg);
            return;
        }
    }
    if (mcp_cmd_is_meta(cmd)) { /* memcached's reply as it wrote it */
        if (cmd == MCP_CMD_MG && first->reply == MCP_R_VALUE)
            st->get_hits++;
        else if (cmd == MCP_CMD_MG && first->rvalue && first->rvlen >= 2 &&
                 memcmp(first->rvalue, "EN", 2) == 0)
            st->get_misses++;
        if (first->rvalue)
            evbuffer_add(out, first->rvalue, first->rvlen);
        return;
    }
    if (cmd == MCP_CMD_GET || cmd == MCP_CMD_GETS || cmd == MCP_CMD_GAT ||
        cmd == MCP_CMD_GATS) {
        int ended = 0;
        for (int i = 0; i < n; i++) {
            const backend_op_t *op = OP(i);
            if (op->reply != MCP_R_VALUE) {
                st->get_misses++;
                continue;
            }
            st->get_hits++;
            /* One stretch of the buffer for header, value, CRLF (and the
             * END after the last key): one reservation instead of four
             * evbuffer_add()s, the header formatted in place. */
            size_t room = op->keylen + 80 + op->rvlen + 7;
            struct evbuffer_iovec v;
            if (evbuffer_reserve_space(out, (ev_ssize_t)room, &v, 1) == 1 && v.iov_len >= room) {
                char *w = v.iov_base;
                int hn = mcp_format_value_header(w, op->keylen + 80, op->key, op->keylen,
                                                op->rflags, op->rvlen,
                                                cmd == MCP_CMD_GETS || cmd == MCP_CMD_GATS,
                                                op->rcas);
                if (hn < 0)
                    continue; /* nothing committed */
                size_t len = (size_t)hn;
                memcpy(w + len, op->rvalue, op->rvlen);
                len += op->rvlen;
                memcpy(w + len, "\r\n", 2);
                len += 2;
                if (i == n - 1) {
                    memcpy(w + len, "END\r\n", 5);
                    len += 5;
                }
                v.iov_len = len;
                if (evbuffer_commit_space(out, &v, 1) == 0) {
                    ended = i == n - 1;
                    continue;
                }
            }
            char hdr[MCP_KEY_MAX + 96];
            int hn = mcp_format_value_header(hdr, sizeof hdr, op->key,
                                            op->keylen, op->rflags, op->rvlen,
                                            cmd == MCP_CMD_GETS || cmd == MCP_CMD_GATS,
                                            op->rcas);
            if (hn < 0)
                continue;
            evbuffer_add(out, hdr, (size_t)hn);
            evbuffer_add(out, op->rvalue, op->rvlen);
            evbuffer_add(out, "\r\n", 2);
        }
        if (!ended)
            evbuffer_add(out, "END\r\n", 5);
        return;
    }
    const backend_op_t *op = first;
    if (op->reply == MCP_R_NUMBER)
        evbuffer_add_printf(out, "%llu\r\n", (unsigned long long)op->number);
    else
        evbuffer_add(out, mcp_reply_line(op->reply),
                     strlen(mcp_reply_line(op->reply)));
}

long mcreply_flat(char *buf, size_t cap, mcp_cmd_t cmd, const backend_op_t *first,
                  size_t stride, int n, mcstats_t *st)
{
    for (int i = 0; i < n; i++)
        if (OP(i)->reply == MCP_R_SERVER_ERROR)
            return -1;
    if (mcp_cmd_is_meta(cmd))
        return -1;
    if (cmd == MCP_CMD_GET || cmd == MCP_CMD_GETS || cmd == MCP_CMD_GAT ||
        cmd == MCP_CMD_GATS) {
        size_t need = 5; /* END */
        for (int i = 0; i < n; i++)
            if (OP(i)->reply == MCP_R_VALUE)
                need += OP(i)->keylen + 80 + OP(i)->rvlen + 2;
        if (need > cap)
            return -1;
        char *p = buf;
        for (int i = 0; i < n; i++) {
            const backend_op_t *op = OP(i);
            if (op->reply != MCP_R_VALUE) {
                st->get_misses++;
                continue;
            }
            st->get_hits++;
            int hn = mcp_format_value_header(p, op->keylen + 80, op->key, op->keylen,
                                            op->rflags, op->rvlen,
                                            cmd == MCP_CMD_GETS || cmd == MCP_CMD_GATS,
                                            op->rcas);
            if (hn < 0)
                continue;
            p += hn;
            memcpy(p, op->rvalue, op->rvlen);
            p += op->rvlen;
            memcpy(p, "\r\n", 2);
            p += 2;
        }
        memcpy(p, "END\r\n", 5);
        return (long)(p + 5 - buf);
    }
    if (first->reply == MCP_R_NUMBER)
        return -1;
    const char *line = mcp_reply_line(first->reply);
    size_t len = strlen(line);
    if (len > cap)
        return -1;
    memcpy(buf, line, len);
    return (long)len;
}

void mcreply_count(mcstats_t *st, const mcp_req_t *r, uint64_t *other)
{
    switch (r->cmd) {
    case MCP_CMD_GET:
    case MCP_CMD_GETS:
        st->cmd_get += r->nkeys;
        break;
    case MCP_CMD_SET:
    case MCP_CMD_ADD:
    case MCP_CMD_REPLACE:
    case MCP_CMD_APPEND:
    case MCP_CMD_PREPEND:
    case MCP_CMD_CAS:
        st->cmd_set++;
        break;
    case MCP_CMD_TOUCH:
        st->cmd_touch++;
        break;
    case MCP_CMD_MG:
        st->cmd_get++;
        break;
    case MCP_CMD_MS:
        st->cmd_set++;
        break;
    case MCP_CMD_GAT: /* memcached counts a gat as a get and a touch */
    case MCP_CMD_GATS:
        st->cmd_get += r->nkeys;
        st->cmd_touch += r->nkeys;
        break;
    default:
        (*other)++;
        break;
    }
}
