#!/bin/sh
# exp45-ab.sh - Experiments 4 and 5 on loopback with the paper's node scheduler and with the node's defaults (paced tokens, R by urgency), alternating in one run, and a table of both side by side.
#
# Usage: examples/exp45-ab.sh [--help]
# Environment (all optional):
#   BIN=bin          where the programs are (see examples/exp4.sh, exp5.sh)
#   OUT=out/exp45-ab output directory: ROUND-MODE-exp4/ and ROUND-MODE-exp5/
#                    (each as examples/exp4.sh / exp5.sh write it), table.txt
#   ROUNDS=2         rounds; each runs both modes, in alternating order
#   EXPS="4 5"       which experiments
#   SIZES="10 200"   Experiment 4's sizes (examples/exp4.sh)
#   DUR=5            Experiment 4's seconds of load per run
#
# Modes: "paper" = bqos-node --pacing off --r-order rr (Algorithm 1 as
# published), "new" = the node's defaults.  The controller is the same.
# Only the pShift runs (RUNS=qos); each experiment profiles the capacity
# anew, so a round's two modes see the machine as it is at the time.
set -u
case "${1:-}" in -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;; esac
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-out/exp45-ab}
ROUNDS=${ROUNDS:-2}
EXPS=${EXPS:-4 5}
mkdir -p "$OUT" || exit 1
export BIN="${BIN:-bin}" SIZES="${SIZES:-10 200}" DUR="${DUR:-5}"

opts() { [ "$1" = paper ] && echo "--pacing off --r-order rr" || echo ""; }

r=1
while [ "$r" -le "$ROUNDS" ]; do
  order="paper new"
  [ $((r % 2)) = 0 ] && order="new paper"
  for mode in $order; do
    for e in $EXPS; do
      echo "== round $r, $mode scheduler, Experiment $e ($(date -u +%H:%M:%S), load $(cut -d' ' -f1 /proc/loadavg))"
      NODE_OPTS=$(opts "$mode") RUNS=qos OUT="$OUT/$r-$mode-exp$e" "$HERE/exp$e.sh" >"$OUT/$r-$mode-exp$e.log" 2>&1 ||
        echo "exp$e ($mode, round $r) failed: see $OUT/$r-$mode-exp$e.log"
    done
  done
  r=$((r + 1))
done

# One row per summary: experiment, round, mode, buckets, bucket-periods meeting
# R and within L, and the worst L ratio over 1 s and 200 ms windows.
python3 - "$OUT" <<'PY' | tee "$OUT/table.txt"
import glob, json, os, sys
out = sys.argv[1]
print("%-5s %-5s %-6s %7s %10s %10s %8s %8s" % ("exp", "round", "mode", "buckets", "R met", "within L", "L 1s", "L 200ms"))
for f in sorted(glob.glob(os.path.join(out, "*-*-exp*", "**", "summary.json"), recursive=True)):
    rel = os.path.relpath(f, out).split(os.sep)
    if "profile" in rel:
        continue
    rnd, mode, exp = rel[0].split("-")
    d = json.load(open(f))
    w = d.get("windows") or {}
    lw = lambda k: (w.get(k) or {}).get("l_worst")
    fmt = lambda x: "-" if x is None else "%.3f" % x
    print("%-5s %-5s %-6s %7d %9.2f%% %9.2f%% %8s %8s" % (exp, rnd, mode, d["nbuckets"],
          100 * d["period_met_share"], 100 * (1 - d["period_over_share"]), fmt(lw("long")), fmt(lw("short"))))
PY
