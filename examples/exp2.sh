#!/bin/sh
# exp2.sh - the pShift paper's Experiment 2 in bqos-sim: the share of buckets missing 5% or more of their reservation for N_A active servers x N_D demand changes, averaged over seeds, per policy (Fig. 4).
#
# Usage: examples/exp2.sh [--help] [extra bqos-sim options...]
# Environment (all optional):
#   BIN=bin            where bqos-sim is
#   OUT=out/exp2       output directory
#   ACTIVE="2 4 8"     N_A values
#   CHANGES="0 1 2 5 10"  N_D values (exactly N_D changes per bucket and period)
#   SEEDS="1 2 3 4 5"  seeds averaged per point
#   POLICIES=rr,static,pshift,clairvoyant
#   RESUME=0           1: keep runs whose runs/NA-ND-SEED.json already exists
#                      (add seeds to an earlier OUT, or finish a stopped one)
# Extra arguments go to every bqos-sim run: the defaults are the paper's full
# scale (64 servers, 10,000 buckets, 20,000 IOPS: about 45 s per run of the
# four policies on 2 cores, so about an hour for the 75 runs); for example
# `examples/exp2.sh -S 16 -B 1000 -C 5000` runs a 16-server cluster in a few
# minutes.  Outputs in OUT: runs/NA-ND-SEED.json (each run's summary),
# exp2.csv (policy,active,changes,runs,miss_mean,miss_min,miss_max: the
# share of buckets served < 95% of their reservation), table.txt, exp2.png.
set -u
case "${1:-}" in -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;; esac
HERE=$(cd "$(dirname "$0")" && pwd)
BIN=${BIN:-bin}
OUT=${OUT:-out/exp2}
ACTIVE=${ACTIVE:-2 4 8}
CHANGES=${CHANGES:-0 1 2 5 10}
SEEDS=${SEEDS:-1 2 3 4 5}
POLICIES=${POLICIES:-rr,static,pshift,clairvoyant}
RESUME=${RESUME:-0}
mkdir -p "$OUT/runs" || exit 2
start=$(date +%s)
for a in $ACTIVE; do
  for n in $CHANGES; do
    for s in $SEEDS; do
      f="$OUT/runs/$a-$n-$s.json"
      printf 'exp2: N_A=%s N_D=%s seed %s ... ' "$a" "$n" "$s"
      if [ "$RESUME" != 1 ] || [ ! -s "$f" ]; then
        "$BIN/bqos-sim" -q -A "$a" -N "$n" --changes-exact -s "$s" -p "$POLICIES" -j "$f.tmp" "$@" &&
          mv "$f.tmp" "$f" || exit 2
      fi
      python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(" ".join("%s %.4f" % (p["policy"], 1 - p["meet95"]) for p in d["policies"]))' "$f"
    done
  done
done
echo "exp2: $(( $(date +%s) - start )) s"
python3 - "$OUT" "$ACTIVE" "$CHANGES" "$SEEDS" <<'PY'
import json, sys, os
out, active, changes, seeds = sys.argv[1], sys.argv[2].split(), sys.argv[3].split(), sys.argv[4].split()
rows = {}
for a in active:
    for n in changes:
        for s in seeds:
            d = json.load(open(os.path.join(out, "runs", "%s-%s-%s.json" % (a, n, s))))
            for p in d["policies"]:
                rows.setdefault((p["policy"], int(a), int(n)), []).append(1 - p["meet95"])
pols = []
for k in rows:
    if k[0] not in pols:
        pols.append(k[0])
with open(os.path.join(out, "exp2.csv"), "w") as f:
    f.write("policy,active,changes,runs,miss_mean,miss_min,miss_max\n")
    for k in sorted(rows, key=lambda k: (pols.index(k[0]), k[1], k[2])):
        v = rows[k]
        f.write("%s,%d,%d,%d,%.5f,%.5f,%.5f\n" % (k[0], k[1], k[2], len(v), sum(v) / len(v), min(v), max(v)))
with open(os.path.join(out, "table.txt"), "w") as f:
    f.write("share of buckets missing >= 5%% of their reservation (mean of %d seeds)\n" % len(seeds))
    f.write("%-12s %4s " % ("policy", "N_A") + " ".join("%8s" % ("N_D=" + n) for n in changes) + "\n")
    for p in pols:
        for a in active:
            vals = rows[(p, int(a), int(changes[0]))] and [sum(rows[(p, int(a), int(n))]) / len(rows[(p, int(a), int(n))]) for n in changes]
            f.write("%-12s %4s " % (p, a) + " ".join("%7.2f%%" % (100 * x) for x in vals) + "\n")
PY
cat "$OUT/table.txt"
if command -v gnuplot >/dev/null 2>&1; then
  for p in rr static pshift clairvoyant; do
    # One row per N_D, one column per N_A (mean miss), for a clustered histogram.
    python3 - "$OUT/exp2.csv" "$p" "$ACTIVE" "$CHANGES" >"$OUT/exp2-$p.dat" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
pol, act, chg = sys.argv[2], sys.argv[3].split(), sys.argv[4].split()
m = {(r["active"], r["changes"]): float(r["miss_mean"]) * 100 for r in rows if r["policy"] == pol}
print("N_D " + " ".join("N_A=" + a for a in act))
for n in chg:
    print(n + " " + " ".join("%.4f" % m.get((a, n), float("nan")) for a in act))
PY
  done
  gnuplot -e "dir='$OUT'; na=$(echo $ACTIVE | wc -w)" "$HERE/exp2.gp" || echo "exp2: gnuplot failed" >&2
  [ -s "$OUT/exp2.png" ] && echo "exp2: plot $OUT/exp2.png"
fi
