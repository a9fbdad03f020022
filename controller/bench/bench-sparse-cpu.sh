#!/bin/sh
# bench-sparse-cpu.sh - the controller daemon's CPU per round at 64 x 10,000 (8 active) with sparse reports and changed grants, steady and 10% changing, interleaved against another build's binaries (docs/performance.md, "Controller CPU per round follows the work").
# Usage: controller/bench/bench-sparse-cpu.sh [OLD_BIN] [ROUNDS] [SECONDS]   (BIN defaults to bin; NODES, BUCKETS default 64, 10000)
set -u
HERE=$(cd "$(dirname "$0")/../../scripts" && pwd)
. "$HERE/lib.sh"
BIN=${BIN:-bin}
OLD=${1:-$BIN} # the build to compare with (default: this one)
ROUNDS=${2:-2}
SECS=${3:-16}
NODES=${NODES:-64}
BUCKETS=${BUCKETS:-10000}
T=$(mktemp -d /tmp/bench_sparse_cpu.XXXXXX)
trap 'cleanup; rm -rf "$T"' EXIT
trap 'exit 130' INT TERM

"$BIN/bqos-ctrl-bench" --nodes "$NODES" --buckets "$BUCKETS" --write-buckets "$T/b.json" || exit 1

# run LABEL CTRL_BIN [BENCH OPTION...]: one controller of CTRL_BIN driven
# by this build's bench; prints a row.
run() {
  label=$1; cbin=$2; shift 2
  next_port; cp=$PORT; next_port; ap=$PORT
  spawn "$T/controller.log" "$cbin/bqos-controller" --buckets "$T/b.json" \
    --listen "tcp://127.0.0.1:$cp" --admin "tcp://127.0.0.1:$ap" --period 1s --intervals 5 \
    --capacity 20000 --threads 1 --down-after 5 --max-names 2000000 --max-nodes 4096 \
    --log-level warn
  pid=$SPAWNED
  wait_port "$cp" 60 || exit 1
  "$BIN/bqos-ctrl-bench" --endpoint "tcp://127.0.0.1:$cp" --admin "tcp://127.0.0.1:$ap" \
    --nodes "$NODES" --buckets "$BUCKETS" --active 8 --seconds "$SECS" --warmup 4 --quiet \
    --ctrl-pid "$pid" --noise 0 "$@" >"$T/out.json"
  stop_pid "$pid"
  python3 - "$T/out.json" "$label" "$*" "$(cut -d' ' -f1 /proc/loadavg)" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
pr = d.get("per_round", {})
print("| %s | %s | %s | %s | %s | %s |" % (sys.argv[2], sys.argv[3] or "steady", sys.argv[4],
      pr.get("rounds", d.get("rounds", "-")), "%.2f" % pr["cpu_ms"] if "cpu_ms" in pr else "-",
      "%.2f" % pr["bytes_per_pair"] if "bytes_per_pair" in pr else "-"))
PY
}

echo "| build | load | load average | rounds | controller CPU ms / round | bytes per pair per interval |"
echo "|---|---|---|---|---|---|"
i=0
while [ $i -lt "$ROUNDS" ]; do
  run old "$OLD"
  run new "$BIN"
  run old "$OLD" --changing 0.1
  run new "$BIN" --changing 0.1
  i=$((i + 1))
done
