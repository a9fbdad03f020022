#!/bin/sh
# bench-names.sh - names in parts (docs/performance.md, "Names in parts"): K fake nodes (bqos-ctrl-bench --parts --full-tables: each node's table is every bucket, as a real node's once it made the controller's) join a controller with N buckets; prints, per N, how long until every node holds the controller's table and the controller every node's, the bytes of hellos, welcomes and names messages, the longest a welcomed node heard nothing, and the controller's own lines (the loop's longest part taken and longest round of parts sent).
# Usage: controller/bench/bench-names.sh [N...]   (default: 100000 1000000; BIN defaults to bin; NODES=K, default 4; SECONDS_RUN=S per run, default 20; BUSY=B buckets with demand, each on 2 nodes, default 10000)
# MEM=1: the daemon's memory per configured bucket instead (docs/performance.md, "Daemon memory with full-table nodes"): no demand (BUSY=1: one bucket), no status asked (its answer stays in malloc's heap); RSS after start-up and once every node holds the controller's table and the controller every node's, plus 3 periods, over a 1-bucket daemon's; exits 1 if a size is over the rule docs/controller.md states: BASEB bytes per configured bucket after start-up (default 560) and BASEB + PAIRB x K with K full-table nodes (PAIRB default 90: 920 B at 4 nodes); says whether it is under the 1 KB target. WAIT=S caps the naming (default 300).
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
# The daemon's own RSS with a 1-bucket table: the base of the per-bucket figures.
rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
if [ "${MEM:-0}" = 1 ]; then
  "$BIN/bqos-ctrl-bench" --nodes 1 --buckets 1 --write-buckets "$T/one.json" || exit 1
  next_port; cp=$PORT; next_port; ap=$PORT
  spawn "$T/one.log" "$BIN/bqos-controller" --buckets "$T/one.json" \
    --listen "tcp://127.0.0.1:$cp" --admin "tcp://127.0.0.1:$ap" --period 1s --capacity 1000000000
  pid=$SPAWNED
  wait_port "$ap" 60 || { echo "controller did not start"; exit 1; }
  rss0=$(rss_kb "$pid")
  stop_pid "$pid"
  echo "| buckets | nodes | RSS after start-up (per bucket) | named after | RSS named + 3 periods (per bucket) | per node-bucket pair |"
  echo "|---|---|---|---|---|---|"
  over=0
fi
for NB in "$@"; do
  "$BIN/bqos-ctrl-bench" --nodes "$K" --buckets "$NB" --write-buckets "$T/b.json" || exit 1
  next_port; cp=$PORT; next_port; ap=$PORT
  spawn "$T/controller-$NB.log" "$BIN/bqos-controller" --buckets "$T/b.json" \
    --listen "tcp://127.0.0.1:$cp" --admin "tcp://127.0.0.1:$ap" --period 1s --intervals 5 \
    --capacity 1000000000
  pid=$SPAWNED
  wait_port "$ap" 120 || { echo "controller did not start"; tail -5 "$T/controller-$NB.log"; exit 1; }
  if [ "${MEM:-0}" = 1 ]; then
    sleep 2
    r1=$(rss_kb "$pid")
    t0=$(date +%s)
    spawn "$T/nodes-$NB.log" "$BIN/bqos-ctrl-bench" --endpoint "tcp://127.0.0.1:$cp" --admin "tcp://127.0.0.1:$ap" \
      --nodes "$K" --buckets "$NB" --active 2 --busy ${BUSY:-1} --full-tables --parts --seconds 100000 --quiet
    bpid=$SPAWNED
    n=$((${WAIT:-300} * 2))
    while [ $n -gt 0 ]; do
      a=$(grep -c "its table is whole" "$T/controller-$NB.log"); b=$(grep -c "holds our table" "$T/controller-$NB.log")
      [ "$a" -ge "$K" ] && [ "$b" -ge "$K" ] && break
      sleep 0.5; n=$((n - 1))
    done
    named=$(($(date +%s) - t0))
    [ $n -gt 0 ] || named="not within ${WAIT:-300}"
    sleep 3 # a few periods: each node's full push, then steady rounds
    r2=$(rss_kb "$pid")
    if [ -n "${DIAG:-}" ]; then # diagnosis: what malloc holds free (gdb attached)
      gdb -p "$pid" -batch -ex 'call (void)malloc_stats()' -ex 'call (int)malloc_trim(0)' >/dev/null 2>&1
      echo "  RSS after malloc_trim(0): $(rss_kb "$pid") kB (was $r2)"
      grep -A3 "^Total" "$T/controller-$NB.log"
    fi
    grep -c "its table is whole\|holds our table" "$T/controller-$NB.log" | sed 's/^/  tables made whole: /'
    stop_pid "$bpid" "$pid"
    p1=$(awk -v a="$r1" -v b="$rss0" -v n="$NB" 'BEGIN { printf "%.0f", (a - b) * 1024 / n }')
    p2=$(awk -v a="$r2" -v b="$rss0" -v n="$NB" 'BEGIN { printf "%.0f", (a - b) * 1024 / n }')
    pp=$(awk -v a="$p2" -v b="$p1" -v k="$K" 'BEGIN { printf "%.0f", (a - b) / k }')
    echo "| $NB | $K | $((r1 / 1024)) MiB ($p1 B) | ${named} s | $((r2 / 1024)) MiB (**$p2 B**) | $pp B |"
    bb=${BASEB:-560}; bk=$((bb + ${PAIRB:-90} * K))
    [ "$p1" -le "$bb" ] || { echo "over $bb B per configured bucket after start-up"; over=1; }
    [ "$p2" -le "$bk" ] || { echo "over $bk B per configured bucket with $K full-table nodes"; over=1; }
    [ "$p2" -le 1024 ] || echo "  (issue 26's target, 1,024 B per configured bucket with $K full-table nodes: not met)"
    continue
  fi
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
[ "${MEM:-0}" = 1 ] && exit $over
exit 0
