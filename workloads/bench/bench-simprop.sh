#!/bin/sh
# bench-simprop.sh - `make bench`: the QoS property test over hundreds of random scenarios in bqos-sim (bqos-sim-prop), totals against issue 25's targets.
# Environment: BIN=bin; SEEDS=500; POLICY=pshift-paced; extra arguments go to bqos-sim-prop.
set -u
BIN=${BIN:-bin}
start=$(date +%s)
"$BIN/bqos-sim-prop" -q --seeds "${SEEDS:-500}" --policy "${POLICY:-pshift-paced}" "$@" || exit 1
echo "bqos-sim-prop: $(( $(date +%s) - start )) s in all"
