#!/bin/sh
# exp1.sh - the pShift paper's Experiment 1 in bqos-sim: 64 servers, 10,000 buckets, the whole capacity reserved, demand changes; rr, static, pshift and clairvoyant on the same arrivals; summary, CSVs, Fig. 3 style plots.
#
# Usage: examples/exp1.sh [--help] [extra bqos-sim options...]
# Environment (all optional):
#   BIN=bin          where bqos-sim is
#   OUT=out/exp1     output directory
#   SEED=1           random seed
#   SAMPLE=50        plot every SAMPLE-th bucket (the paper: 50)
# Extra arguments go to bqos-sim, e.g. `examples/exp1.sh -S 16 -B 1000` for
# a smaller cluster.  Full scale takes about a minute on 2 cores.
# Outputs in OUT: summary.json (per policy: meet95, meet99, mean_error,
# worst, events_per_s...), buckets.csv (served/reserved per bucket),
# intervals.csv (IOs per interval of every SAMPLE-th bucket), table.txt,
# exp1.png (Fig. 3(c): stacked IOs per interval per bucket, one panel per
# policy, with each bucket's reservation) and exp1-reservations.png
# (Fig. 3(a)).
set -u
case "${1:-}" in -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;; esac
HERE=$(cd "$(dirname "$0")" && pwd)
BIN=${BIN:-bin}
OUT=${OUT:-out/exp1}
SEED=${SEED:-1}
SAMPLE=${SAMPLE:-50}
mkdir -p "$OUT" || exit 2
echo "exp1: bqos-sim seed $SEED $* -> $OUT"
"$BIN/bqos-sim" -s "$SEED" -j "$OUT/summary.json" --csv "$OUT/buckets.csv" \
    --intervals-csv "$OUT/intervals.csv" --sample "$SAMPLE" "$@" || exit 2
python3 - "$OUT/summary.json" >"$OUT/table.txt" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
c = d["config"]
print("servers %d  buckets %d  capacity %g IOPS  period %g s  intervals %d  reserved %g  "
      "demand %g  active %d  changes %s%d  seed %d" % (c["servers"], c["buckets"], c["capacity"],
      c["period"], c["intervals"], c["reserved"], c["demand"], c["active"],
      "<=" if c["changes_upto"] else "", c["changes"], c["seed"]))
print("%-12s %8s %8s %10s %8s %12s %8s" % ("policy", ">=95%", ">=99%", "mean err", "worst",
                                          "events/s", "wall s"))
for p in d["policies"]:
    print("%-12s %7.2f%% %7.2f%% %9.4f%% %8.3f %12.0f %8.1f" % (p["policy"], 100 * p["meet95"],
          100 * p["meet99"], 100 * p["mean_error"], p["worst"], p["events_per_s"], p["wall_s"]))
PY
cat "$OUT/table.txt"
# One intervals file per policy for gnuplot.
for p in rr static pshift clairvoyant; do
  grep "^$p," "$OUT/intervals.csv" >"$OUT/intervals-$p.csv"
done
if command -v gnuplot >/dev/null 2>&1; then
  gnuplot -e "dir='$OUT'; sample=$SAMPLE" "$HERE/exp1.gp" || echo "exp1: gnuplot failed" >&2
  [ -s "$OUT/exp1.png" ] && echo "exp1: plots $OUT/exp1.png $OUT/exp1-reservations.png"
else
  echo "exp1: gnuplot not found, no plots" >&2
fi
