#!/bin/sh
# exp3.sh - the pShift paper's Experiment 3 on loopback: 4 memcached servers behind bqos-nodes, 4 backlogged buckets, without QoS (rr), with reservations, with reservations and limits; CSV, plot, table, checks.
#
# Usage: examples/exp3.sh [--help]
# Environment (all optional):
#   BIN=bin          where bqos-load, bqos-node, bqos-controller, bqos-ctl are
#   OUT=out/exp3     output directory (per run: CSVs, summary.json, table.txt)
#   DUR=6            seconds of load per run (the first period is warm-up)
#   PROFILE=2        seconds of the capacity profile run
#   PRELOAD=10000    objects per server
#   RUNS="rr res lim"  which runs: rr = no QoS (bqos-node --policy rr),
#                    res = pShift with reservations (limits 400%: unbounded),
#                    lim = pShift with reservations and limits (120%)
#   PIN=1            pin each server to a CPU (CPU_OF="0 1 1 0" balances the
#                    4 servers' client counts 20/15/10/5 over 2 CPUs)
#   CHECK=0          1: exit 1 unless every expectation below holds
#
# Expectations (paper Section IV-E): rr gives b1..b4 throughputs 3:7:13:25
# (within 10%) when the servers are equally fast; the servers' own rates and
# each bucket's deviation from an even split at every server are printed
# beside it, since on one shared machine the servers' speeds can differ;
# res: every bucket gets >= 99% of its reservation; lim: additionally none
# gets more than 101% of its limit.
set -u
case "${1:-}" in -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;; esac
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
BIN=${BIN:-bin}
OUT=${OUT:-out/exp3}
DUR=${DUR:-6}
PROFILE=${PROFILE:-2}
PRELOAD=${PRELOAD:-10000}
RUNS=${RUNS:-rr res lim}
CHECK=${CHECK:-0}
CPU_OF=${CPU_OF:-0 1 1 0}
LOGS=$OUT/logs
SCEN_RES=$HERE/exp3.json
SCEN_LIM=$HERE/exp3-limits.json

die() { echo "exp3: $*" >&2; exit 1; }
trap 'cleanup' EXIT
trap 'echo "exp3: interrupted" >&2; exit 130' INT TERM
for b in bqos-load bqos-node; do
  [ -x "$BIN/$b" ] || die "missing $BIN/$b (run make)"
done
mkdir -p "$LOGS" || die "cannot create $OUT"
rm -rf "$OUT/rr" "$OUT/res" "$OUT/lim"

start_backends 4 "$LOGS" || die "memcached did not start (see $LOGS)"
start_nodes rr - - "$LOGS" || die "bqos-node did not start (see $LOGS)"
# shellcheck disable=SC2086
"$BIN/bqos-load" $SERVER_ARGS $(cpu_args 4) --preload "$PRELOAD" --profile "$PROFILE" "$SCEN_RES" \
  >"$OUT/profile.txt" 2>"$LOGS/profile.log" || die "profile run failed (see $LOGS/profile.log)"
CAP=$(awk '$1 == "capacity" { print $2 }' "$OUT/profile.txt")
[ -n "$CAP" ] && [ "$CAP" -gt 0 ] || die "profile gave no capacity"
echo "exp3: profiled capacity $CAP IOs/s per server ($(grep '^server' "$OUT/profile.txt" | awk '{ printf "%s %s  ", $2, $3 }'))"
echo "exp3: reservation 60% = $((CAP * 60 / 100)) IOs/s, limit 120% = $((CAP * 120 / 100)) IOs/s per bucket"

titles=""; files=""; sums=""
for run in $RUNS; do
  case $run in
    rr)  scen=$SCEN_RES; label=rr ;;
    res) scen=$SCEN_RES; label=pShift-R ;;
    lim) scen=$SCEN_LIM; label=pShift-R+L ;;
    *) die "unknown run $run" ;;
  esac
  align=""
  if [ "$run" != rr ]; then
    [ -x "$BIN/bqos-controller" ] || { echo "exp3: no $BIN/bqos-controller, skipping $run"; continue; }
    stop_nodes
    "$BIN/bqos-load" -c "$CAP" --print-buckets "$scen" >"$OUT/buckets-$run.json" || die "bad scenario"
    start_controller "$OUT/buckets-$run.json" "$CAP" "$LOGS" || die "controller did not start"
    mv "$LOGS/controller.log" "$LOGS/controller-$run.log" 2>/dev/null
    start_nodes tokens "$CTRL_EP" "$OUT/buckets-$run.json" "$LOGS" || die "nodes did not start"
    sleep 1.5   # nodes register; the first tokens arrive
    if [ -x "$BIN/bqos-ctl" ]; then
      st=$("$BIN/bqos-ctl" --endpoint "$ADMIN_EP" --json status 2>/dev/null)
      now=$(date +%s.%N)
      el=$(echo "$st" | sed -n 's/.*"elapsed_ms": *\([0-9]*\).*/\1/p' | head -1)
      [ -n "$el" ] && align="--period-start $(echo "$now $el" | awk '{ printf "%.3f", $1 - $2 / 1000 }')"
    fi
  fi
  echo "exp3: run $label, ${DUR}s"
  mkdir -p "$OUT/$run"
  # shellcheck disable=SC2086
  "$BIN/bqos-load" $SERVER_ARGS $(cpu_args 4) -c "$CAP" --preload 0 -d "$DUR" -o "$OUT/$run" -l "$label" \
    $align "$scen" >"$OUT/$run/table.txt" 2>"$LOGS/load-$run.log" ||
    die "load run $run failed (see $LOGS/load-$run.log)"
  if [ "$run" != rr ]; then stop_nodes; stop_controller; fi
  titles="$titles $label"; files="$files $OUT/$run/cumulative.csv"; sums="$sums $OUT/$run/summary.json"
done
stop_nodes
[ -n "$sums" ] || die "nothing ran"

if command -v gnuplot >/dev/null 2>&1; then
  gnuplot -e "files='${files# }'; titles='${titles# }'; out='$OUT/exp3.png'; heading='Experiment 3: 4 servers, 4 buckets (capacity $CAP IOs/s per server)'; res=$((CAP * 60 / 100))" \
    "$HERE/cumulative.gp" 2>"$LOGS/gnuplot.log" && echo "exp3: plot $OUT/exp3.png"
fi
echo
# shellcheck disable=SC2086
"$BIN/bqos-load" --table $sums | tee "$OUT/table.txt"
echo

# Expectations.
fails=0
verdict() { if [ "$1" = 0 ]; then echo "PASS: $2"; else echo "FAIL: $2"; fails=$((fails + 1)); fi; }
if [ -f "$OUT/rr/summary.json" ]; then
  # Round robin at server j splits its throughput X_j evenly over its 5-j
  # buckets, so bucket i gets sum_{j<=i} X_j / (5-j); with equal X_j that is
  # the paper's 3:7:13:25, the check.  The even-split deviations tell a
  # scheduling error apart from servers of unequal speed.
  line=$(awk '/"name"/ { gsub(/[",]/, "", $2); n = $2 } /"completed"/ { gsub(/,/, "", $2); c[n] = $2 }
    END { t = c["b1"] + c["b2"] + c["b3"] + c["b4"]; split("3 7 13 25", e, " "); bad = 0; s = ""; r = ""
      x = 0
      for (i = 1; i <= 4; i++) {
        x += c["s" i] / (5 - i); s = s sprintf("b%d %+.1f%% ", i, (c["b" i] - x) / x * 100)
        y = t * e[i] / 48; d = (c["b" i] - y) / y * 100
        r = r sprintf("b%d %+.1f%% ", i, d); if (d > 10 || d < -10) bad = 1 }
      printf "%d %s| servers", bad, r
      for (j = 1; j <= 4; j++) printf " s%d %.0f/s", j, c["s" j] / '"$DUR"'
      printf " | vs even split per server: %s\n", s }' "$OUT/rr/summary.json")
  verdict "${line%% *}" "rr: throughputs follow 3:7:13:25 within 10% (${line#* })"
fi
[ -f "$OUT/res/summary.json" ] && { "$BIN/bqos-load" --table --check met "$OUT/res/summary.json" >/dev/null 2>&1; verdict $? "pShift-R: every bucket meets its reservation"; }
[ -f "$OUT/lim/summary.json" ] && { "$BIN/bqos-load" --table --check all "$OUT/lim/summary.json" >/dev/null 2>&1; verdict $? "pShift-R+L: every reservation met, no limit exceeded by more than 1%"; }
echo "exp3: outputs in $OUT"
[ "$CHECK" = 1 ] && [ $fails -gt 0 ] && exit 1
exit 0
