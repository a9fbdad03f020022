#!/bin/sh
# bench-simprop-real.sh - `make bench`: the QoS property test on real nodes (issue 25): bqos-sim-prop seeds of 4-6 servers run by bqos-load against memcached + bqos-node pairs on loopback, one controller, then two on etcd with the leader killed mid-run; judged by the simulator's checker (bqos-sim-prop --measured).
# Environment: BIN=bin; SEEDS (default "11 47 55 67 99 127 178 192 214 231": ten of the seeds of 1-300 with 4-6
# servers and at most 12 buckets); MODES ("one ha"; "rr": nodes without tokens, a broken case the checker must fail); PR_DUR (10);
# OUT (a directory to keep every run in; default a scratch directory removed at the end); STRICT=1: exit 1 also
# when a seed of mode "one" fails the checker's bounds (>= 99% of judged bucket-periods at >= 99% of R, worst >= 0.9,
# limits) or a seed of mode "ha" misses R (< 99%) in more than one judged period or a limit (issue 25's real-node
# targets, not met on the 2-core VM: docs/performance.md); otherwise exit 1 only when a run did not run, so that
# `make bench` goes on to the next bench.
set -u
BIN=${BIN:-bin}
HERE=$(cd "$(dirname "$0")/../../tests/it" && pwd)
. "$HERE/../../scripts/lib.sh"
T=$(mktemp -d /tmp/bench-simprop-real.XXXXXX)
trap 'cleanup; [ -n "${OUT:-}" ] || rm -rf "$T"; [ -n "${ED:-}" ] && rm -rf "$ED"' EXIT
trap 'exit 130' INT TERM
. "$HERE/prop_real.sh"
for b in bqos-load bqos-node bqos-controller bqos-ctl bqos-sim-prop; do
  [ -x "$BIN/$b" ] || { echo "missing $BIN/$b"; exit 1; }
done
command -v memcached >/dev/null || { echo "no memcached"; exit 1; }
[ -n "${OUT:-}" ] && T=$OUT && mkdir -p "$T"
MODES=${MODES:-one ha}
case " $MODES " in *" ha "*)
  command -v etcd >/dev/null || { echo "no etcd (scripts/deps.sh): the failover runs are left out"; MODES=$(echo " $MODES " | sed 's/ ha / /'); } ;;
esac
bad=0
missed=0
start=$(date +%s)
printf '%-5s %-4s %-44s %7s %9s %8s %6s %6s %8s\n' seed mode run judged '>=99%R' '<90%R' worst 'L/per' 'dipped'
for mode in $MODES; do
  for seed in ${SEEDS:-11 47 55 67 99 127 178 192 214 231}; do
    d=$T/$mode-$seed
    PR_REQUIRE="--require-met99 0.99 --require-worst 0.9 --require-limits"
    [ "$mode" = ha ] && PR_REQUIRE="--require-limits"
    if ! pr_run "$seed" "$d" "$mode" >"$d.err" 2>&1; then
      echo "seed $seed $mode: did not run"; cat "$d.err"; bad=1; cleanup; continue
    fi
    cleanup
    # Per run: judged bucket-periods, share >= 99% of R, below 90%, worst,
    # worst period / L; periods with a judged bucket below 99% of R.
    line=$(awk '$1 == 0 && NF == 11 { j = $5; r = $6; w = $7; lp = $10 }
      /^  R: / { match($0, /[0-9]+ below 90%/); n = substr($0, RSTART, RLENGTH); sub(/ .*/, "", n) }
      END { printf "%s %s %s %s %s", j, r, n, w, lp }' "$d/check.txt")
    dipped=$(awk -F, 'NR > 1 && $4 < 0.99 { p[$2] = 1 } END { n = 0; for (k in p) n++; print n }' "$d/judged.csv")
    set -- $line
    printf '%-5s %-4s %-44s %7s %9s %8s %6s %6s %8s\n' "$seed" "$mode" "$(echo "$PR_INFO" | sed 's/^seed [0-9]*: //; s/ IOs\/s each//; s/, new leader.*//' | cut -c1-44)" \
      "${1:-?}" "${2:-?}" "${3:-?}" "${4:-?}" "${5:-?}" "$dipped"
    case $mode in
      one) [ "$PR_RC" = 0 ] || { missed=$((missed + 1)); sed -n '/^FAIL/p' "$d/check.txt"; } ;;
      ha) { [ "$PR_RC" = 0 ] && [ "$dipped" -le 1 ]; } ||
        { missed=$((missed + 1)); sed -n '/^FAIL/p' "$d/check.txt"; [ "$dipped" -le 1 ] || echo "FAIL: R dipped in $dipped periods"; } ;;
      rr) [ "$PR_RC" = 1 ] && echo "  (rr fails the checker, as it must)" ;;
    esac
  done
done
echo "bench-simprop-real: $(( $(date +%s) - start )) s in all, $missed runs missed issue 25's targets${OUT:+, runs in $OUT}"
[ "${STRICT:-0}" = 1 ] && [ "$missed" -gt 0 ] && bad=1
exit $bad
