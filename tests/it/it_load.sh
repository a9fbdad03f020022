#!/bin/sh
# it_load.sh - bqos-load against two real memcached servers: closed and open loops, a demand change, CSV and summary contents, profile, checks and scenario errors.
# run-tests: alone
. "$(dirname "$0")/../../scripts/lib.sh"
it_begin it_load
LOAD=$BIN/bqos-load

next_port; p1=$PORT; next_port; p2=$PORT
start_memcached "$p1" "$T/mc1.log" || { echo "memcached 1 did not start"; exit 1; }
start_memcached "$p2" "$T/mc2.log" || { echo "memcached 2 did not start"; exit 1; }

cat >"$T/s.json" <<JSON
{"duration": 3, "period": 1, "intervals": 5, "capacity": 1000,
 "workload": {"preload": 300, "outstanding": 2, "value_size": 1000},
 "servers": [{"name": "s1", "address": "127.0.0.1:$p1"},
             {"name": "s2", "address": "127.0.0.1:$p2"}],
 "buckets": [
   {"name": "closed", "reservation": 10, "limit": "10%", "servers": ["s1"]},
   {"name": "open", "reservation": 250, "limit": 400, "rate": 300, "servers": ["s1", "s2"]},
   {"name": "mover", "servers": ["s1"], "outstanding": 1,
    "changes": [{"at": 1.5, "servers": ["s2"]}]}]}
JSON

"$LOAD" --help | grep -q "^SYNOPSIS" && ok "--help" || not_ok "--help"
"$LOAD" --version | grep -q "^bqos-load " && ok "--version" || not_ok "--version"

"$LOAD" -q -o "$T/out" -l run "$T/s.json" >"$T/table.txt" 2>"$T/load.log"
rc=$?
check "run exits 0 (rc $rc)" '[ $rc -eq 0 ]'
for f in intervals.csv cumulative.csv periods.csv summary.json; do
  check "writes $f" '[ -s "$T/out/$f" ]'
done
# 3 buckets x 15 intervals + header
check "intervals.csv has a row per bucket per interval" \
  '[ "$(wc -l <"$T/out/intervals.csv")" -eq 46 ]'
check "periods.csv has a row per bucket per period" \
  '[ "$(wc -l <"$T/out/periods.csv")" -eq 10 ]'
check "cumulative.csv ends at 3.000 s" '[ "$(tail -1 "$T/out/cumulative.csv" | cut -d, -f1)" = 3.000 ]'
# Cumulative column of the last row equals the sum of the intervals.
sum=$(awk -F, '$4 == "closed" { s += $5 } END { print s }' "$T/out/intervals.csv")
last=$(tail -1 "$T/out/cumulative.csv" | cut -d, -f2)
check "cumulative matches intervals ($sum = $last)" '[ "$sum" = "$last" ] && [ "$sum" -gt 100 ]'

open_rate=$(table_field "$T/table.txt" open 3)
check "open loop runs at its rate (300 +- 5%: $open_rate)" \
  'awk -v r="$open_rate" "BEGIN { exit !(r >= 285 && r <= 315) }"'
check "open bucket met and not over" \
  '[ "$(table_field "$T/table.txt" open 5)" = yes ] && [ "$(table_field "$T/table.txt" open 6)" = no ]'
check "closed loop exceeds its 100 IOs/s limit without QoS" \
  '[ "$(table_field "$T/table.txt" closed 6)" = yes ]'
check "summary has shares" 'grep -q "\"met_share\": 1" "$T/out/summary.json" && grep -q "\"over_share\": 0.33" "$T/out/summary.json"'
# Per-window accuracy: 3 buckets x 3 periods of one 1 s and five 200 ms
# windows; "open" (300/s, limit 400) stays near 0.75 of L per 1 s window
# (0.5-1.0: a loaded machine delays and bunches its requests), "closed" (no
# QoS) runs over its limit of 100.
win() { python3 -c 'import json,sys
d=json.load(open(sys.argv[1])); b=sys.argv[2]
w=d["windows"] if b=="-" else [x for x in d["buckets"] if x["name"]==b][0]["windows"]
print(w[sys.argv[3]][sys.argv[4]])' "$T/out/summary.json" "$@"; }
check "summary counts 9 one-second and 45 200 ms bucket-windows" \
  '[ "$(win - long windows)" = 9 ] && [ "$(win - short windows)" = 45 ]'
check "open bucket: worst 1 s window 0.5-1.0 of L ($(win open long l_worst))" \
  'python3 -c "import sys; sys.exit(not 0.5 <= $(win open long l_worst) <= 1.0)"'
# Demanding windows (issue 25): "closed" keeps 2 requests in flight, so
# its 200 ms windows count for R (and meet it, far over L): all 15 on an
# idle host; a host so busy that the client thread stalls 2 ms (1% of a
# window) with both answered and neither re-sent may drop one or two, which
# is the rule working (the client did not demand then).  "open" is answered
# at once and idle between requests: none of its windows count although it
# sends more than R.
check "closed bucket: its 200 ms windows count for R and meet it ($(win closed short r_windows) of 15, $(win closed short r_share))" \
  '[ "$(win closed short r_windows)" -ge 13 ] && [ "$(win closed long r_windows)" -ge 2 ] && python3 -c "import sys; sys.exit(not $(win closed short r_share) == 1)"'
check "open bucket: answered at once, not demanding ($(win open short r_windows) of 15)" \
  '[ "$(win open short r_windows)" -le 3 ]'
check "closed bucket: over L in its worst window ($(win closed long l_worst))" \
  'python3 -c "import sys; sys.exit(not $(win closed long l_worst) > 1)"'
check "the table shows the window figures" 'grep -q "^worst 200ms window / L" "$T/table.txt"'
check "no request failed" 'grep -q "\"errors\": 0," "$T/out/summary.json"'
# The mover ran on s2 only after its demand change: s2 saw mover keys.
m2=$(printf 'get mover:obj0\r\nquit\r\n' | timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$p2; cat >&3; cat <&3" 2>/dev/null | grep -c VALUE)
check "preload reached s2" '[ "$m2" = 1 ]'
first=$(awk -F, '$4 == "mover" && $1 <= 1.4 { s += $5 } END { print s + 0 }' "$T/out/intervals.csv")
after=$(awk -F, '$4 == "mover" && $1 > 1.6 { s += $5 } END { print s + 0 }' "$T/out/intervals.csv")
check "mover keeps running across its demand change ($first, $after)" '[ "$first" -gt 50 ] && [ "$after" -gt 50 ]'
items2=$(memcstat --servers="127.0.0.1:$p2" 2>/dev/null | awk '$1 == "cmd_get:" || $1 == "cmd_set:" { s += $2 } END { print s + 0 }')
check "s2 served requests ($items2)" '[ "$items2" -gt 300 ]'

"$LOAD" --table --check all "$T/out/summary.json" >/dev/null 2>&1
check "--check all fails when a limit is exceeded" '[ $? -eq 3 ]'
"$LOAD" --table --check met "$T/out/summary.json" >"$T/t2.txt" 2>&1
check "--check met passes" '[ $? -eq 0 ] && grep -q "buckets meeting R" "$T/t2.txt"'

"$LOAD" --profile 0.5 --preload 0 "$T/s.json" >"$T/prof.txt" 2>/dev/null
cap=$(awk '$1 == "capacity" { print $2 }' "$T/prof.txt")
check "profile prints a capacity ($cap)" '[ -n "$cap" ] && [ "$cap" -gt 100 ]'
check "profile prints each server" '[ "$(grep -c "^server " "$T/prof.txt")" -eq 2 ]'

"$LOAD" --print-buckets "$T/s.json" >"$T/b.json"
check "print-buckets writes the controller's file" \
  'grep -q "\"name\": \"closed\", \"reservation\": 10, \"limit\": 100" "$T/b.json"'

printf '{"duration": 1,\n "servers": [{"name": "s1", "address": "127.0.0.1:%s"}],\n "buckets": [{"name": "x", "limit": 5, "reservation": 9}]}\n' "$p1" >"$T/bad.json"
"$LOAD" "$T/bad.json" >/dev/null 2>"$T/bad.err"
rc=$?
check "bad scenario exits 1 with FILE:LINE:COL ($(cat "$T/bad.err"))" \
  '[ $rc -eq 1 ] && grep -q "bad.json:3:37: buckets\[0\]\.limit: limit (5 IOs/s) is below the reservation" "$T/bad.err"'

# A server that is down: requests fail and are counted, the run still ends.
next_port; dead=$PORT
sed "s/127.0.0.1:$p2/127.0.0.1:$dead/" "$T/s.json" >"$T/dead.json"
"$LOAD" -q -d 1 --preload 0 -o "$T/dead" "$T/dead.json" >/dev/null 2>&1
check "a dead server is survived and its failures counted" \
  '[ $? -eq 0 ] && ! grep -q "\"errors\": 0," "$T/dead/summary.json"'

# Ctrl-C: exit 130, outputs cover only the periods that ran.
"$LOAD" -q -d 20 --preload 0 -o "$T/intr" "$T/s.json" >/dev/null 2>&1 &
lp=$!
sleep 2.7 # interrupted in its third period: not a wait for a condition
kill -INT "$lp"
wait "$lp"
rc=$?
check "SIGINT stops the run with exit 130 (rc $rc)" '[ $rc -eq 130 ]'
ran=$(awk '/^ "duration"/ { gsub(/,/, "", $2); d = $2 } /^ "measured_periods"/ { gsub(/,/, "", $2); m = $2 }
  END { d += 0; m += 0; if (d > 1 && d < 10 && m == int(d)) print m }' "$T/intr/summary.json")
check "an interrupted run's summary covers the periods that ran (${ran:-?})" \
  '[ -n "$ran" ] && [ "$(wc -l <"$T/intr/periods.csv")" -eq $((ran * 3 + 1)) ]'
open_rate=$(awk '/"name": "open"/ { f = 1 } f && /"achieved"/ { gsub(/,/, "", $2); print $2; exit }' "$T/intr/summary.json")
check "an interrupted run's rates are not diluted ($open_rate)" \
  'awk -v r="$open_rate" "BEGIN { exit !(r >= 270 && r <= 330) }"'

it_end
