#!/bin/sh
# bench-controller.sh - the controller's time per interval (receive, decode, pshift, encode, send) with simulated nodes, at 8 x 200 and 64 x 10,000 (docs/performance.md, "Controller").
# Usage: controller/bench/bench-controller.sh [SECONDS]   (BIN defaults to bin; ROWS=prof: only the in-process rows; ROWS=curve: plain and CURVE at 64 x 10,000)
set -u
HERE=$(cd "$(dirname "$0")/../../scripts" && pwd)
. "$HERE/lib.sh"
BIN=${BIN:-bin}
SECS=${1:-10}
T=$(mktemp -d /tmp/bench_controller.XXXXXX)
trap 'cleanup; rm -rf "$T"' EXIT
trap 'exit 130' INT TERM

# run NODES BUCKETS ACTIVE SKIP THREADS [NOISE] [EXTRA CONTROLLER OPTION...]
run() {
  "$BIN/bqos-ctrl-bench" --nodes "$1" --buckets "$2" --write-buckets "$T/b.json" || exit 1
  next_port; cp=$PORT; next_port; ap=$PORT
  spawn "$T/controller.log" "$BIN/bqos-controller" --buckets "$T/b.json" \
    --listen "tcp://127.0.0.1:$cp" --admin "tcp://127.0.0.1:$ap" --period 1s --intervals 5 \
    --capacity 20000 --skip-threshold "$4" --threads "$5" --down-after 5 ${7:-} ${CURVE_CTRL:-}
  pid=$SPAWNED
  wait_port "$cp" 10 || exit 1
  "$BIN/bqos-ctrl-bench" --endpoint "tcp://127.0.0.1:$cp" --admin "tcp://127.0.0.1:$ap" \
    --nodes "$1" --buckets "$2" --active "$3" --seconds "$SECS" --noise "${6:-0.2}" \
    --quiet ${CURVE_BENCH:-} >"$T/out.json"
  stop_pid "$pid"
  python3 - "$T/out.json" "$1" "$2" "$3" "$4" "$5" "${6:-0.2}" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
if "timing" not in d:
    print("| %5s x %6s | %s | %s | %s | %s | controller status unavailable (admin timeout) |" % (
        sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[7], sys.argv[5], sys.argv[6]))
    sys.exit(0)
m = d["timing"]["mean_ms"]; s = d["stats"]
iv = d["period_ms"] / d["intervals"]
cpu = m["decode"] + m["pshift"] + m["encode"] + m["send"]
pc = d["timing"].get("cpu_ms_per_round", 0)
print("| %5s x %6s | %d | %4s | %s | %s | %6.2f | %6.2f | %7.2f | %6.2f | %6.2f | %7.2f | %5.2f%% | %7.2f | %5.2f%% | %d/%d |" % (
    sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[7], sys.argv[5], sys.argv[6], m["receive"], m["decode"],
    m["pshift"], m["encode"], m["send"], cpu, 100 * cpu / iv, pc, 100 * pc / iv,
    s["computed"], s["rounds"]))
PY
}
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs, ${SECS}s per row"
# ROWS=curve: 64 x 10,000 plain, then with CURVE on both endpoints (a key
# per fake node; docs/performance.md "CURVE").
if [ "${ROWS:-}" = curve ]; then
  K=$T/keys; mkdir -p "$K"
  for k in ctrl admin; do "$BIN/bqos-ctl" keygen "$K/$k" >/dev/null || exit 1; done
  echo "admin admin $(awk '/^public/ {print $2}' "$K/admin.pub")" >"$K/ak"
  i=0
  while [ $i -lt 64 ]; do
    n=$(printf fake%03d $i)
    "$BIN/bqos-ctl" keygen "$K/$n" >/dev/null || exit 1
    echo "node $n $(awk '/^public/ {print $2}' "$K/$n.pub")" >>"$K/ak"
    i=$((i + 1))
  done
  echo "| nodes x buckets | active | noise | skip | thr | receive | decode | pshift | encode | send | sum w/o receive | of interval | CPU/round | of interval | computed/rounds |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
  for pass in plain curve plain curve; do
    CURVE_CTRL=""; CURVE_BENCH=""
    [ $pass = curve ] && CURVE_CTRL="--curve-key $K/ctrl.key --authorized-keys $K/ak" &&
      CURVE_BENCH="--curve-dir $K"
    printf '%s ' "$pass"; run 64 10000 8 0 1
  done
  exit 0
fi
if [ "${ROWS:-}" != prof ]; then
echo "| nodes x buckets | active | noise | skip | thr | receive | decode | pshift | encode | send | sum w/o receive | of interval | CPU/round | of interval | computed/rounds |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
run 8 200 3 0 1
run 8 200 3 0.1 1
run 64 10000 8 0 1
run 64 10000 8 0 2
run 64 10000 8 0.1 1
run 8 200 3 0.1 1 0.02
run 64 10000 8 0.1 1 0.02
run 64 10000 8 0 1 0.2 "--approx-top 500"
fi

# The same per-round work in one process (no sockets): CPU ms per round by
# phase, stable under load (bqos-ctrl-prof; callgrind-able).
# prof NODES BUCKETS ACTIVE [EXTRA OPTION...]
prof() {
  n=$1 b=$2 a=$3; shift 3
  "$BIN/bqos-ctrl-prof" --nodes "$n" --buckets "$b" --active "$a" --rounds 50 "$@" | python3 -c '
import json, sys
d = json.load(sys.stdin); m = d["cpu_ms_per_round"]
print("| %5d x %6d | %d | %s | %6.3f | %7.3f | %6.3f | %7.3f | %5.2f%% | %7.3f |" % (d["nodes"], d["buckets"],
      d["active"], "yes" if d["full_tables"] else "no", m["decode"], m["pshift"], m["encode"], m["sum"],
      100 * d["share_of_interval"], d["max_pshift_cpu_ms"]))'
}
echo
echo "In-process (bqos-ctrl-prof, 50 rounds, noise 0.2, CPU ms per round):"
echo "| nodes x buckets | active | full tables | decode | pshift | encode | sum | of interval | max pshift |"
echo "|---|---|---|---|---|---|---|---|---|"
prof 8 200 3
prof 64 10000 8
prof 64 10000 8 --full-tables
