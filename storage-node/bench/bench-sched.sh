#!/bin/sh
# bench-sched.sh - scheduler cost per dispatch at 10 / 1,000 / 100,000 buckets (docs/performance.md, "Scheduler").
set -eu
BIN=${BIN:-bin}
"$BIN/bqos-sched-bench" --buckets 10,1000,100000 --ops 5000000
"$BIN/bqos-sched-bench" --buckets 10,1000,100000 --ops 5000000 --weighted
