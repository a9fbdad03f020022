/* fuzz_nbd.c - libFuzzer harness for the NBD parsers (storage-node/nbd/nbd): the first byte picks the parser (handshake flags, option header, INFO/GO data, meta-context data and its queries, request header and its check, and the client side's reply parsers); what a parser accepts is checked to lie inside the input. */
#include <stdint.h>
#include <stdlib.h>

#include "storage-node/nbd/nbd.h"

/* Aborts unless [p, p+n) lies inside [base, base+len). */
static void inside(const void *p, size_t n, const uint8_t *base, size_t len)
{
    const uint8_t *q = p;
    if (n && (q < base || q + n > base + len))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const uint8_t *b = data + 1;
    size_t n = size - 1;
    nbd_error_t err;
    switch (data[0] % 10) {
    case 0: {
        uint32_t flags;
        nbd_parse_client_flags(b, n, &flags, &err);
        break;
    }
    case 1: {
        nbd_option_t opt;
        nbd_parse_option(b, n, &opt, &err);
        break;
    }
    case 2: {
        nbd_info_req_t r;
        if (nbd_parse_info_request(b, n, &r, &err) == 0)
            inside(r.name, r.namelen, b, n);
        break;
    }
    case 3: {
        nbd_meta_req_t r;
        if (nbd_parse_meta_request(b, n, &r, &err) == 0) {
            inside(r.name, r.namelen, b, n);
            size_t cur = 0;
            const char *q;
            uint32_t qlen, k = 0;
            while (nbd_meta_next_query(&r, &cur, &q, &qlen)) {
                inside(q, qlen, b, n);
                nbd_meta_query_matches(q, qlen, 1);
                if (++k > r.nqueries)
                    abort();
            }
            if (k != r.nqueries)
                abort();
        }
        break;
    }
    case 4: {
        nbd_request_t req;
        if (nbd_parse_request(b, n, &req, &err) == 0) {
            nbd_check_request(&req, UINT64_C(1) << 30, 0);
            nbd_check_request(&req, UINT64_C(1) << 30, 1);
        }
        break;
    }
    case 5: {
        uint32_t opt, type, len;
        nbd_parse_rep_header(b, n, &opt, &type, &len, &err);
        break;
    }
    case 6: {
        uint32_t e;
        uint64_t h;
        nbd_parse_simple_reply(b, n, &e, &h, &err);
        break;
    }
    case 7: {
        uint16_t f, t;
        uint64_t h;
        uint32_t len;
        nbd_parse_chunk_header(b, n, &f, &t, &h, &len, &err);
        break;
    }
    case 8: {
        uint32_t e;
        const char *msg;
        uint16_t mlen;
        if (nbd_parse_error_payload(b, n, &e, &msg, &mlen, &err) == 0)
            inside(msg, mlen, b, n);
        break;
    }
    default: {
        uint32_t id, cnt;
        nbd_extent_t ext[4];
        nbd_parse_block_status(b, n, &id, ext, 4, &cnt, &err);
        break;
    }
    }
    return 0;
}
