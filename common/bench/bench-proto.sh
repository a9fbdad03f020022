#!/bin/sh
# bench-proto.sh - control protocol encode/decode cost at 200 and 10,000 buckets (docs/performance.md "Control protocol").
set -eu
BIN=${BIN:-bin}
"$BIN/bqos-proto-bench" --zmq --buckets 200,1250,10000
"$BIN/bqos-proto-bench" --buckets 200,10000 --names
