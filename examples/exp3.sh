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
#   SCALE=100        the scenarios' rates in percent of the paper's (SCALE=70:
#                    reservations 42% of a server's capacity, limits 84%)
#
# Expectations (paper Section IV-E): rr gives b1..b4 throughputs 3:7:13:25
# (within 10%) when the servers are equally fast (rates within 10%); on one
# shared machine their speeds can differ, and then the check is that each
# bucket gets an even split of every server it is on (within 10%); both
# deviations and the servers' rates are printed;
# res: every bucket gets >= 99% of its reservation; lim: additionally none
# gets more than 101% of its limit.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../scripts/lib.sh"
example_init "$@"
OUT=${OUT:-out/exp3}
DUR=${DUR:-6}
PROFILE=${PROFILE:-2}
PRELOAD=${PRELOAD:-10000}
RUNS=${RUNS:-rr res lim}
CHECK=${CHECK:-0}
CPU_OF=${CPU_OF:-0 1 1 0}
SCEN_RES=$HERE/exp3.json
SCEN_LIM=$HERE/exp3-limits.json

example_begin exp3 bqos-load bqos-node
mkdir -p "$OUT" || die "cannot create $OUT"
specs=""
for run in $RUNS; do
  case $run in
    rr)  specs="$specs rr:rr:rr:$SCEN_RES" ;;
    res) specs="$specs res:pShift-R:tokens:$SCEN_RES" ;;
    lim) specs="$specs lim:pShift-R+L:tokens:$SCEN_LIM" ;;
    *) die "unknown run $run (rr, res, lim)" ;;
  esac
done
# shellcheck disable=SC2086
experiment 4 "$OUT" $specs || die "failed"
echo "reservation 60% = $((RCAP * 60 / 100)) IOs/s per bucket; limit 400% = $((RCAP * 4)) IOs/s (res) or 120% = $((RCAP * 120 / 100)) IOs/s (lim)"
[ -n "$EXP_SUMS" ] || die "nothing ran"
plot "$OUT/exp3.png" "Experiment 3: 4 servers, buckets b1..b4 on servers s1, s1-s2, s1-s3, s1-s4 (capacity $CAP IOs/s per server)" $((RCAP * 60 / 100))
echo
# shellcheck disable=SC2086
"$BIN/bqos-load" --table $EXP_SUMS | tee "$OUT/table.txt"
echo

# Expectations.
fails=0
verdict() { if [ "$1" = 0 ]; then echo "PASS: $2"; else echo "FAIL: $2"; fails=$((fails + 1)); fi; }
if [ -f "$OUT/rr/summary.json" ]; then
  # Round robin at server j splits its throughput X_j evenly over its 5-j
  # buckets, so bucket i gets sum_{j<=i} X_j / (5-j); with equal X_j that is
  # the paper's 3:7:13:25, the check.  The even-split deviations tell a
  # scheduling error apart from servers of unequal speed.
  # When the servers' rates differ by more than 10% (one shared machine),
  # 3:7:13:25 cannot hold; the check is then the even split per server.
  line=$(awk '/"name"/ { gsub(/[",]/, "", $2); n = $2 } /"completed"/ { gsub(/,/, "", $2); c[n] = $2 }
    END { t = c["b1"] + c["b2"] + c["b3"] + c["b4"]; split("3 7 13 25", e, " "); bad = 0; bads = 0; s = ""; r = ""
      x = 0; lo = c["s1"]; hi = c["s1"]
      for (i = 1; i <= 4; i++) {
        if (c["s" i] < lo) lo = c["s" i]; if (c["s" i] > hi) hi = c["s" i]
        x += c["s" i] / (5 - i); ds = (c["b" i] - x) / x * 100
        s = s sprintf("b%d %+.1f%% ", i, ds); if (ds > 10 || ds < -10) bads = 1
        y = t * e[i] / 48; d = (c["b" i] - y) / y * 100
        r = r sprintf("b%d %+.1f%% ", i, d); if (d > 10 || d < -10) bad = 1 }
      equal = hi <= lo * 1.1
      printf "%d %s ", equal ? bad : bads, equal ? "throughputs follow 3:7:13:25 within 10%" : \
        "servers differ by more than 10%, so each bucket gets its even split of every server it is on, within 10%"
      printf "(vs 3:7:13:25: %s| servers", r
      for (j = 1; j <= 4; j++) printf " s%d %.0f/s", j, c["s" j] / '"$DUR"'
      printf " | vs even split per server: %s)\n", s }' "$OUT/rr/summary.json")
  verdict "${line%% *}" "rr: ${line#* }"
fi
[ -f "$OUT/res/summary.json" ] && { "$BIN/bqos-load" --table --check met "$OUT/res/summary.json" >/dev/null 2>&1; verdict $? "pShift-R: every bucket meets its reservation"; }
[ -f "$OUT/lim/summary.json" ] && { "$BIN/bqos-load" --table --check all "$OUT/lim/summary.json" >/dev/null 2>&1; verdict $? "pShift-R+L: every reservation met, no limit exceeded by more than 1%"; }
echo "exp3: outputs in $OUT"
[ "$CHECK" = 1 ] && [ $fails -gt 0 ] && exit 1
exit 0
