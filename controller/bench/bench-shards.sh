#!/bin/sh
# bench-shards.sh - controller shards in one process (issue 30): the root step's CPU and each shard's round CPU per round at 1,024 nodes x 1,000,000 buckets (8 active), 8 shards, 1 s intervals (docs/performance.md, "Controller shards").
# Usage: controller/bench/bench-shards.sh   (BIN defaults to bin; NODES, BUCKETS, SHARDS, ROUNDS override the sizes)
set -eu
BIN=${BIN:-bin}
exec nice "$BIN/bqos-shards-bench" --nodes "${NODES:-1024}" --buckets "${BUCKETS:-1000000}" \
  --active 8 --shards "${SHARDS:-8}" --rounds "${ROUNDS:-10}" --warmup 3
