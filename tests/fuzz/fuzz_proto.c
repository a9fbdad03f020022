/* fuzz_proto.c - libFuzzer harness for the control protocol decoder (common/proto, both record layouts): the input is cut into up to PROTO_MAX_FRAMES frames; a message the decoder accepts must encode again and decode to the same encoding. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* Frame lengths: the first byte holds the number of frames (1..4), each
     * next pair of bytes a frame length (little endian); the rest is cut in
     * that order, the last frame taking what is left. */
    if (size < 1)
        return 0;
    size_t nf = (size_t)(data[0] % PROTO_MAX_FRAMES) + 1, pos = 1 + 2 * (nf - 1);
    if (pos > size)
        return 0;
    proto_frame_t fr[PROTO_MAX_FRAMES];
    for (size_t i = 0; i < nf; i++) {
        size_t len = i + 1 < nf ? (size_t)(data[1 + 2 * i] | data[2 + 2 * i] << 8) : size - pos;
        if (len > size - pos)
            len = size - pos;
        fr[i] = (proto_frame_t){data + pos, len};
        pos += len;
    }
    proto_msg_t m, m2;
    proto_msg_init(&m);
    proto_msg_init(&m2);
    proto_enc_t e, e2;
    proto_enc_init(&e);
    proto_enc_init(&e2);
    proto_reason_t why;
    if (proto_decode(&m, fr, nf, NULL, &why) == 0) {
        if (proto_encode(&m, &e) != 0)
            abort(); /* what we accept we can say */
        proto_frame_t f2[PROTO_MAX_FRAMES];
        for (size_t i = 0; i < e.nframes; i++)
            f2[i] = (proto_frame_t){e.data[i], e.len[i]};
        if (proto_decode(&m2, f2, e.nframes, NULL, &why) != 0 || proto_encode(&m2, &e2) != 0 ||
            e2.nframes != e.nframes)
            abort();
        for (size_t i = 0; i < e.nframes; i++)
            if (e.len[i] != e2.len[i] || memcmp(e.data[i], e2.data[i], e.len[i]) != 0)
                abort();
    }
    proto_enc_clear(&e);
    proto_enc_clear(&e2);
    proto_msg_clear(&m);
    proto_msg_clear(&m2);
    return 0;
}
