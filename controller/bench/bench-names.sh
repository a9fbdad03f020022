#!/bin/sh
# bench-names.sh - names in parts (docs/performance.md, "Names in parts"): K fake nodes (bqos-ctrl-bench --parts --full-tables: each node's table is every bucket, as a real node's once it made the controller's) join a controller with N buckets; prints, per N, how long until every node holds the controller's table and the controller every node's, the bytes of hellos, welcomes and names messages, the longest a welcomed node heard nothing, and the controller's own lines (the loop's longest part taken and longest round of parts sent).
# Usage: controller/bench/bench-names.sh [N...]   (default: 100000 1000000; BIN defaults to bin; NODES=K, default 4; SECONDS_RUN=S per run, default 20; BUSY=B buckets with demand, each on 2 nodes, default 10000)
set -u
HERE=$(cd "$(dirname "$0")/../../scripts" && pwd)
. "$HERE/lib.sh"
BIN=${BIN:-bin}
K=${NODES:-4}
S=${SECONDS_RUN:-20}
T=$(mktemp -d /tmp/bench_names.XXXXXX)
trap 'cleanup; rm -rf "$T"' EXIT
trap 'exit 130' INT TERM
[ $# -gt 0 ] || set -- 100000 1000000
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs, $K nodes"
for NB in "$@"; do
  "$BIN/bqos-ctrl-bench" --nodes "$K" --buckets "$NB" --write-buckets "$T/b.json" || exit 1
  next_port; cp=$PORT; next_port; ap=$PORT
  spawn "$T/controller-$NB.log" "$BIN/bqos-controller" --buckets "$T/b.json" \
    --listen "tcp://127.0.0.1:$cp" --admin "tcp://127.0.0.1:$ap" --period 1s --intervals 5 \
    --capacity 1000000000
  pid=$SPAWNED
  wait_port "$ap" 120 || { echo "controller did not start"; tail -5 "$T/controller-$NB.log"; exit 1; }
  "$BIN/bqos-ctrl-bench" --endpoint "tcp://127.0.0.1:$cp" --admin "tcp://127.0.0.1:$ap" \
    --nodes "$K" --buckets "$NB" --active 2 --busy ${BUSY:-10000} --full-tables ${NOPARTS:---parts} --seconds "$S" --warmup "$S" \
    --ctrl-pid "$pid" --quiet >"$T/out-$NB.json"
  python3 - "$T/out-$NB.json" "$NB" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
nm = d["names"]
print("N %s: %d of %d nodes named, %.2f-%.2f s after their hello; names bytes out %.1f MB, in %.1f MB (%.1f B per name each way per node); longest silence to a welcomed node %.0f ms"
      % (sys.argv[2], nm["named"], d["nodes"], nm["named_min_s"], nm["named_max_s"],
         nm["bytes_out"] / 1e6, nm["bytes_in"] / 1e6,
         (nm["bytes_out"] + nm["bytes_in"]) / 2 / d["nodes"] / int(sys.argv[2]), nm["max_ctl_gap_ms"]))
PY
  grep -h "its table is whole\|holds our table\|late\|begins" "$T/controller-$NB.log" | sed 's/^[^ ]* bqos-controller /  /' | head -12
  echo "  controller RSS: $(awk '/^VmRSS/ {print $2}' "/proc/$pid/status") kB"
  stop_pid "$pid"
done
