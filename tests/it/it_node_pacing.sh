#!/bin/sh
# it_node_pacing.sh - paced tokens on a real node (issue 14): with a controller period of 5 s, a backlogged bucket limited to 100/s is served at about its limit in every 200 ms (its pacing timer dispatches when credit returns) with the node's defaults, and in one burst of 500 with --pacing off --r-order rr (so the check can fail); the options are checked and logged.
# run-tests: alone
. "$(dirname "$0")/../../scripts/lib.sh"
it_begin it_node_pacing
HERE=$(cd "$(dirname "$0")/../.." && pwd)

# run NAME NODE_OPTION...: bench-pace.sh over one measured 5 s period (after
# one of warm-up), in the background; its own memcached, controller and
# node on their own ports, so both runs go at once (each mostly waits out
# its periods).
run() {
  name=$1; shift
  PERIOD=5s PERIODS=1 OUT="$T/$name" BIN=$BIN sh "$HERE/storage-node/bench/bench-pace.sh" "$@" \
    >"$T/$name.txt" 2>&1 &
  LIB_PIDS="$LIB_PIDS $!"
}
# result NAME: sets RATE and MOST (most IOs in any 200 ms) of run NAME.
result() {
  RATE=$(sed -n 's/^rate \([0-9.]*\) IOs.*/\1/p' "$T/$1.txt")
  MOST=$(sed -n 's/.*most in any 200 ms: \([0-9]*\) .*/\1/p' "$T/$1.txt")
  RATE=${RATE:-0}; MOST=${MOST:-0}
}

run paced
# (the second picks its ports once the first has bound all of its own)
wait_for 'grep -q "^node options" "$T/paced.txt"' 10
run paper --pacing off --r-order rr
wait

result paced
check "paced: the bucket is served (rate $RATE IOs/s >= 60: the pacing timer dispatches)" \
  'awk -v r="$RATE" "BEGIN { exit !(r >= 60) }"'
check "paced: at most 100 IOs in any 200 ms ($MOST; limit 100/s, period 5 s)" \
  '[ "$MOST" -gt 0 ] && [ "$MOST" -le 100 ]'
check "paced: the node logs its settings" \
  'grep -q "pacing on (burst 20 ms), reservations by urgency" "$T/paced/node.log"'

result paper
check "paper's scheduler: the period's 500 IOs in one 200 ms burst ($MOST)" '[ "$MOST" -ge 400 ]'
check "paper's scheduler: logged" \
  'grep -q "pacing off (burst 20 ms), reservations by round robin" "$T/paper/node.log"'

"$BIN/bqos-node" --burst -1 >/dev/null 2>"$T/bad.txt"
rc=$?
check "--burst -1 is a usage error (rc $rc)" '[ $rc -eq 2 ] && grep -q -- "--burst" "$T/bad.txt"'
"$BIN/bqos-node" --r-order fifo >/dev/null 2>"$T/bad.txt"
rc=$?
check "--r-order fifo is a usage error (rc $rc)" '[ $rc -eq 2 ]'
"$BIN/bqos-node" --help | grep -q -- "--pacing on|off" && ok "--help lists --pacing" ||
  not_ok "--help lists --pacing"

it_end 'cat "$T"/*.txt; tail -20 "$T"/paced/node.log'
