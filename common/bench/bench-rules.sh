#!/bin/sh
# bench-rules.sh - CPU cost of classifying one request with 100 and 1,000 rules (docs/performance.md "Rules").
set -eu
BIN=${BIN:-bin}
"$BIN/bqos-rules-bench" --rules 100
"$BIN/bqos-rules-bench" --rules 1000 --iterations 500000
