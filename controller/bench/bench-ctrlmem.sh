#!/bin/sh
# bench-ctrlmem.sh - the controller core's resident memory per configured bucket with no demand (issue 26: under 1 KB with 4 nodes that hold the whole table): bqos-ctrl-mem at N buckets, the controller alone, each node's hello (named in parts), the full push and the rounds after it (docs/performance.md, "Controller memory per configured bucket").
# Usage: controller/bench/bench-ctrlmem.sh [N...]   (default: 1000000; BIN defaults to bin; NODES=K, default 4; MAX_BYTES=B per bucket, default 1024: exits 1 above it)
set -u
BIN=${BIN:-bin}
K=${NODES:-4}
MAX=${MAX_BYTES:-1024}
[ $# -gt 0 ] || set -- 1000000
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg); transparent huge pages: $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null || echo unknown)"
rc=0
for N in "$@"; do
  echo "N $N, $K full-table nodes:"
  out=$("$BIN/bqos-ctrl-mem" "$N" "$K" 16384 "$MAX" 2>/dev/null) || rc=1
  printf '%s\n' "$out" | sed 's/^/  /'
done
exit $rc
