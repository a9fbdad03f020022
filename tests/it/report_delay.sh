#!/bin/sh
# report_delay.sh - a reproducer, not in `make check` (it fails on today's code): a node whose reports reach the controller DELAY ms late (a slow link, or a busy host) serves a limited bucket above 1.05 x its limit in its own periods.
#
# One bqos-controller (1 s periods in 5 intervals: 200 ms), one bqos-node
# over memcached reaching it through delay_proxy.py (its reports held DELAY
# ms, default 150; the controller's messages go straight), bqos-load on red
# (reservation 50, limit 200) far above the limit for 15 s, red counted in
# the node's own periods (node_periods.py).  Checks every period <= 1.05 x
# 200 after the first.  Measured (7 Dec 2026): DELAY 0: 195-200; 80: up to
# 221; 150: 206-221, 8 of 13 periods over 210; 300: up to 220.  The probable
# cause (docs/decisions.md, "The partition suite"): a round that closes
# when its wait runs out computes from the node's previous report, and the
# node takes the tokens net of what it served since its latest one.
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
{"duration": 15, "period": 1, "intervals": 5, "warmup_periods": 0, "seed": 1, "capacity": 20000,
 "workload": {"outstanding": 8, "timeout_ms": 10000, "preload": 0},
 "servers": [{"name": "s1", "address": "127.0.0.1:1"}],
 "buckets": [{"name": "red", "reservation": 50, "limit": 200, "servers": ["s1"]}]}
JSON
"$BIN/bqos-load" -q -s "s1=127.0.0.1:$NP,127.0.0.1:$MP" -o "$T/load" -d 15 "$T/scen.json" \
  >"$T/load.table" 2>"$T/load.log" &
LIB_PIDS="$LIB_PIDS $!"
python3 "$HERE/node_periods.py" "$NP" 15 red >"$T/red.periods" 2>/dev/null
P=$(awk 'NR > 1 { printf "%s%s ", $2, ($3 == "following" ? "" : "/" $3) }' "$T/red.periods")
echo "# reports $DELAY ms late: red per node period (limit 200): $P"
check "red <= 1.05 x 200 in every node period after the first ($P)" \
  '[ "$(echo $P | wc -w)" -ge 10 ] && [ "$(echo $P | tr " " "\n" | awk -F/ "\$1 > 210" | wc -l)" = 0 ]'
it_end
