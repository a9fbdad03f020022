/* proto_sample.h - a sample report or tokens message of n buckets: what bqos-proto-bench times and test_proto round-trips. */
#ifndef BQOS_PROTO_SAMPLE_H
#define BQOS_PROTO_SAMPLE_H

#include <stddef.h>

#include "common/proto.h"

/* Makes m (proto_msg_init()ed, empty) a `type` message (PROTO_REPORT or
 * PROTO_TOKENS) from node "node-01" at table 1: period 1000, interval 2 of
 * 5, 600 of 1000 ms left, 12345 completions, 0.5 busy seconds, and n
 * records of bucket i (report: queued i % 7, arrivals 100 + i this interval
 * and 300 + i this period, served 200 + i by reservation and i by limit,
 * 50 reservation tokens left, every third bucket 10 limit tokens left and
 * the others unlimited; tokens: 1000 + i reservation tokens, every third
 * bucket 5000 limit tokens and the others unlimited).  With `names`, the
 * names frame too: bucket0 .. bucket{n-1}, whose text goes into *namebuf
 * (the caller frees it after m).  Returns 0 or -ENOMEM. */
int proto_sample(proto_msg_t *m, proto_type_t type, size_t n, int names, char **namebuf);

#endif
