/* proto_sample.c - the sample messages of bqos-proto-bench and test_proto (see proto_sample.h). */
#include "common/bench/proto_sample.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int proto_sample(proto_msg_t *m, proto_type_t type, size_t n, int names, char **namebuf)
{
    m->type = type;
    strcpy(m->node, "node-01");
    m->table = 1;
    m->count = n;
    m->period = 1000;
    m->intervals = 5;
    m->interval = 2;
    m->period_ms = 1000;
    m->remaining_ms = 600;
    m->completions = 12345;
    m->busy_seconds = 0.5;
    if (proto_msg_reserve(m, n, names ? n : 0))
        return -ENOMEM;
    if (names) {
        if (!(*namebuf = malloc(n * 32)))
            return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
            snprintf(*namebuf + i * 32, 32, "bucket%zu", i);
            m->names[i] = *namebuf + i * 32;
        }
        m->nnames = n;
        m->has_names = 1;
    }
    for (size_t i = 0; i < n; i++) {
        if (type == PROTO_REPORT)
            m->report[i] = (proto_report_rec_t){
                .bucket = (uint32_t)i, .queued = i % 7, .arrivals_interval = 100 + i,
                .arrivals_period = 300 + i, .served_r = 200 + i, .served_l = i, .r_left = 50,
                .l_left = i % 3 ? PROTO_UNLIMITED : 10};
        else
            m->tokens[i] = (proto_tokens_rec_t){.bucket = (uint32_t)i, .r_tokens = 1000 + (int64_t)i,
                                                .l_tokens = i % 3 ? PROTO_UNLIMITED : 5000};
    }
    return 0;
}
