#!/bin/sh
# exp4.sh - the pShift paper's Experiment 4 on loopback: 8 servers, buckets moving between random sets of 2-6 servers at 5 demand changes; 10 buckets, then 200; without QoS and with pShift; CSV, plots, tables, shares beside the paper's.
#
# Usage: examples/exp4.sh [--help]
# Environment (all optional):
#   BIN=bin          where bqos-load, bqos-node, bqos-controller, bqos-ctl are
#   OUT=out/exp4     output directory (per run: CSVs, summary.json, table.txt)
#   DUR=5            seconds of load per run (the first period is warm-up)
#   PROFILE=2        seconds of the capacity profile run
#   PRELOAD=10000    objects per server
#   SIZES="10 200"   which experiments: 10 buckets (examples/exp4.json) and/or
#                    200 buckets (examples/exp4-200.json)
#   RUNS="rr qos"    rr = no QoS (bqos-node --policy rr); qos = pShift
#                    (controller + token scheduler)
#   PIN=0            1: pin server i to CPU (i-1) mod ncpu, clients with it
#   ROWS=20          bucket rows shown in the 200-bucket table
#   NODE_OPTS=, CTRL_OPTS=  extra bqos-node / bqos-controller options (split on
#                    spaces), e.g. CTRL_OPTS="--limit-depth -1" (per-period quotas)
#
# The paper (Section IV-E) reports, for 200 buckets, 99.6% of buckets meeting
# their reservations and none exceeding limits with pShift, against 68.5%
# meeting and 83.5% staying within limits without QoS.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
PIN=${PIN:-0}
. "$HERE/../scripts/lib.sh"
example_init "$@"
OUT=${OUT:-out/exp4}
DUR=${DUR:-5}
PROFILE=${PROFILE:-2}
PRELOAD=${PRELOAD:-10000}
SIZES=${SIZES:-10 200}
RUNS=${RUNS:-rr qos}
ROWS=${ROWS:-20}

example_begin exp4 bqos-load bqos-node
mkdir -p "$OUT" || die "cannot create $OUT"

for size in $SIZES; do
  case $size in
    10) scen=$HERE/exp4.json; rows=0 ;;
    200) scen=$HERE/exp4-200.json; rows=$ROWS ;;
    *) die "unknown size $size (10 or 200)" ;;
  esac
  specs=""
  for run in $RUNS; do
    case $run in
      rr) specs="$specs rr$size:rr:rr:$scen" ;;
      qos) specs="$specs qos$size:pShift:tokens:$scen" ;;
      *) die "unknown run $run (rr, qos)" ;;
    esac
  done
  echo "== Experiment 4, $size buckets on 8 servers"
  # shellcheck disable=SC2086
  experiment 8 "$OUT/$size" $specs || die "failed"
  plot "$OUT/exp4-$size.png" "Experiment 4: 8 servers, $size buckets, 5 demand changes (capacity $CAP IOs/s per server)"
  echo
  # shellcheck disable=SC2086
  "$BIN/bqos-load" --table --rows "$rows" $EXP_SUMS | tee "$OUT/table-$size.txt"
  echo
done

echo "== Shares of buckets meeting reservations and staying within limits, beside the paper's"
echo "   (buckets: mean over the measured periods; bucket-periods: each period on its own)"
printf '%-10s %-8s %12s %12s %16s %16s\n' run buckets "meeting R" "within L" "periods met R" "periods in L"
for size in $SIZES; do
  for run in $RUNS; do
    f=$OUT/$size/$run$size/summary.json
    [ -f "$f" ] || continue
    awk -v r="$run" -v n="$size" '/^ "met_share"/ { gsub(/,/, "", $2); m = $2 }
      /^ "over_share"/ { gsub(/,/, "", $2); o = $2 }
      /^ "period_met_share"/ { gsub(/,/, "", $2); pm = $2 }
      /^ "period_over_share"/ { gsub(/,/, "", $2); po = $2 }
      END { printf "%-10s %-8s %11.1f%% %11.1f%% %15.1f%% %15.1f%%\n", (r == "rr" ? "rr" : "pShift"), n,
            100 * m, 100 * (1 - o), 100 * pm, 100 * (1 - po) }' "$f"
  done
done
printf '%-10s %-8s %11.1f%% %11.1f%% %16s %16s\n' "paper rr" 200 68.5 83.5 - -
printf '%-10s %-8s %11.1f%% %11.1f%% %16s %16s\n' "paper pS" 200 99.6 100 - -
echo "exp4: outputs in $OUT"
