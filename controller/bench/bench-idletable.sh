#!/bin/sh
# bench-idletable.sh - a controller on a big table with no node: its CPU over 20 s, its rounds' compute times (debug log), `status --limit 0` latency and SIGTERM latency, against another build if given (docs/performance.md, "Controller cost per round follows the work").
# Usage: controller/bench/bench-idletable.sh [N] [OLD_BIN]   (default 1000000 buckets; BIN defaults to bin; STATUS=K status calls, default 6)
set -u
HERE=$(cd "$(dirname "$0")/../../scripts" && pwd)
. "$HERE/lib.sh"
BIN=${BIN:-bin}
N=${1:-1000000}
OLD=${2:-}
K=${STATUS:-6}
T=$(mktemp -d /tmp/bench_idletable.XXXXXX)
trap 'cleanup; rm -rf "$T"' EXIT
trap 'exit 130' INT TERM

ms() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.0f", (b - a) * 1000 }'; }
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# run LABEL BIN: one controller of BIN on the table; prints its figures.
run() {
  label=$1; cbin=$2
  next_port; cp=$PORT; next_port; ap=$PORT
  spawn "$T/$label.log" "$cbin/bqos-controller" --buckets "$T/b.json" \
    --listen "tcp://127.0.0.1:$cp" --admin "tcp://127.0.0.1:$ap" --period 1s \
    --capacity 1000000000 --log-level debug
  pid=$SPAWNED
  wait_port "$ap" 600 || { echo "$label: did not start"; return; }
  sleep 5
  c0=$(ticks "$pid"); sleep 20; c1=$(ticks "$pid")
  echo "$label: CPU $(( (c1 - c0) / 20 ))% of a core over 20 s, load $(cut -d' ' -f1 /proc/loadavg)"
  i=0; st=""
  while [ $i -lt "$K" ]; do
    t0=$(date +%s.%N)
    "$BIN/bqos-ctl" --endpoint "tcp://127.0.0.1:$ap" --timeout 60000 status --limit 0 >/dev/null 2>&1
    st="$st $(ms "$t0" "$(date +%s.%N)")"
    sleep 0.7; i=$((i + 1))
  done
  echo "$label: status --limit 0 (ms):$st"
  t0=$(date +%s.%N); kill -TERM "$pid"
  while kill -0 "$pid" 2>/dev/null; do sleep 0.02; done
  echo "$label: SIGTERM $(ms "$t0" "$(date +%s.%N)") ms"
  grep -E "round [0-9]+\.[0-9]+: (computed|skipped)" "$T/$label.log" |
    sed -E 's/.*: (computed|skipped),.*pshift ([0-9.]+).*/\1 \2/' |
    awk -v L="$label" '{n[$1]++; s[$1] += $2; if ($2 > m[$1]) m[$1] = $2}
      END {for (k in n) printf "%s: %d rounds %s, compute %.1f ms mean, %.1f max\n", L, n[k], k, s[k] / n[k], m[k]}'
}

bucket_table "$N" "$T/b.json"
echo "$N buckets, no node, $(nproc) CPUs"
[ -n "$OLD" ] && run old "$OLD"
run new "$BIN"
