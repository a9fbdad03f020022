#!/bin/sh
# report_delay.sh - a node whose reports reach the controller DELAY ms late (a slow link, or a busy host) serves a limited bucket within 1.05 x its limit in its own periods, and near its limit (issue 26).
# run-tests: alone
#
# One bqos-controller (1 s periods in 5 intervals: 200 ms), one bqos-node
# over memcached reaching it through delay_proxy.py (its reports held DELAY
# ms, default 150; the controller's messages go straight), bqos-load on red
# (reservation 50, limit 200) far above the limit for 12 s, red counted in
# the node's own periods (node_periods.py).  Checks every period <= 1.05 x
# 200 after the first, and the median of the periods after the second >=
# 0.8 x 200 (with the basis alone, no rate for the report's age: 146).  A
# round that closes before the node's latest report came computes from the
# one before: its tokens name that report (the basis) and
# the node nets them against what it served since it; the rate cap counts
# the interval since as time left (docs/decisions.md, "Late reports").
# Measured (7 Dec 2026, DELAY 150): before, 206-223, 8 of 13 periods over
# 210; with the basis alone 130-165 (the node paid for an interval twice);
# with both, 185-198, a few lower under the host's load.
#   BIN=bin DELAY=150 sh tests/it/report_delay.sh
. "$(dirname "$0")/../../scripts/lib.sh"
it_begin report_delay memcached python3 bqos-controller bqos-node bqos-load
DELAY=${DELAY:-150}
echo '{"buckets":[{"name":"red","reservation":50,"limit":200}]}' >"$T/b.json"
next_port; CP=$PORT; next_port; AP=$PORT
spawn "$T/c.log" "$BIN/bqos-controller" --buckets "$T/b.json" --listen "tcp://127.0.0.1:$CP" \
  --admin "tcp://127.0.0.1:$AP" --period 1s --intervals 5 --capacity 20000
wait_port "$CP" 10
next_port; XP=$PORT
spawn "$T/proxy.log" python3 "$HERE/delay_proxy.py" "$XP" "$CP" "$DELAY"
wait_port "$XP" 10
next_port; MP=$PORT
start_memcached "$MP" "$T/mc.log"
next_port; NP=$PORT
spawn "$T/node.log" "$BIN/bqos-node" --name s1 --memcached-listen "127.0.0.1:$NP" \
  --backend "memcached://127.0.0.1:$MP" --policy tokens --controller "tcp://127.0.0.1:$XP"
wait_port "$NP" 10
wait_for '[ "$(node_stat "$NP" bqos_ctl_state)" = following ]' 10
cat >"$T/scen.json" <<JSON
{"duration": 12, "period": 1, "intervals": 5, "warmup_periods": 0, "seed": 1, "capacity": 20000,
 "workload": {"outstanding": 8, "timeout_ms": 10000, "preload": 0},
 "servers": [{"name": "s1", "address": "127.0.0.1:1"}],
 "buckets": [{"name": "red", "reservation": 50, "limit": 200, "servers": ["s1"]}]}
JSON
"$BIN/bqos-load" -q -s "s1=127.0.0.1:$NP,127.0.0.1:$MP" -o "$T/load" -d 12 "$T/scen.json" \
  >"$T/load.table" 2>"$T/load.log" &
LIB_PIDS="$LIB_PIDS $!"
python3 "$HERE/node_periods.py" "$NP" 12 red >"$T/red.periods" 2>/dev/null
P=$(awk 'NR > 1 { printf "%s%s ", $2, ($3 == "following" ? "" : "/" $3) }' "$T/red.periods")
echo "# reports $DELAY ms late: red per node period (limit 200): $P"
check "red <= 1.05 x 200 in every node period after the first ($P)" \
  '[ "$(echo $P | wc -w)" -ge 9 ] && [ "$(echo $P | tr " " "\n" | awk -F/ "\$1 > 210" | wc -l)" = 0 ]'
MED=$(echo $P | tr " " "\n" | awk -F/ 'NR > 2 { print $1 }' | sort -n | awk '{ v[NR] = $1 } END { print NR ? v[int((NR + 1) / 2)] : 0 }')
check "red's median period after the second >= 0.8 x 200 ($MED): late reports cost no interval" \
  '[ "$MED" -ge 160 ]'
it_end
