/* fuzz_mcproto.c - libFuzzer harness for the memcached text protocol parser (storage-node/mc/mcproto): requests parsed one after another as a connection would, every result checked against the buffer (meta requests: one key, their line; the binary refusal formatted). */
#include <stdint.h>
#include <stdlib.h>

#include "storage-node/mc/mcproto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *p = (const char *)data;
    size_t left = size;
    const mcp_conf_t conf = {.max_item = 1024 * 1024, .no_flush = size % 2}; /* both ways */
    while (left > 0) {
        mcp_req_t req;
        mcp_result_t res;
        mcp_status_t st = mcp_parse(p, left, &conf, &req, &res);
        if (st == MCP_CLOSE && res.binary) {
            char out[MCP_BINARY_REFUSAL_LEN];
            if (mcp_format_binary_refusal(out, sizeof out, p, left) != (int)sizeof out)
                abort();
        }
        if (st == MCP_NEED_MORE || st == MCP_CLOSE)
            break;
        if (st == MCP_OK && mcp_cmd_is_meta(req.cmd) &&
            (req.nkeys != 1 || req.keys[0].len == 0 || req.keys[0].len > MCP_KEY_MAX ||
             req.line.ptr != p || req.line.len >= res.consumed))
            abort(); /* a meta request names one key and its line */
        if (res.consumed == 0 || res.consumed > left)
            abort(); /* a parser that consumes nothing would spin a connection */
        p += res.consumed;
        left -= res.consumed;
        if (res.swallow >= left)
            break;
        p += res.swallow;
        left -= res.swallow;
    }
    return 0;
}
