#!/bin/sh
# bench.sh - run the recorded pShift benchmarks (docs/performance.md, "pShift"): Fig. 5, 6, 7 and the 1,024 x 1,000,000 case.
# Usage: sh pshift/bench/bench-pshift.sh [--quick]   (BIN defaults to bin)
set -eu
BIN=${BIN:-bin}
if [ "${1:-}" = "--quick" ]; then
  "$BIN/bqos-pshift" bench --quick
  exit 0
fi
echo "-- Fig. 5, 6, 7 (64 servers; pShift vs igraph push-relabel max-flow)"
"$BIN/bqos-pshift" bench --fig 5,6,7 --repeat 10
echo "-- 1,024 servers x 1,000,000 buckets x 8 active"
"$BIN/bqos-pshift" bench --large --repeat 3
