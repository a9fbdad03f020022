#!/bin/sh
# busy_host.sh - a measurement, not in `make check` (docs/performance.md, "A busy host"): how many elections and node fallbacks a healthy etcd, two controllers and one node under load see on a busy host, over SECS seconds (default 180) with BUSY busy loops (default 6) beside them.
#
# A real etcd, two bqos-controllers (--etcd, the defaults: --lease-ttl 2s,
# --etcd-timeout 100ms, period 1 s in 5 intervals), one bqos-node in front
# of memcached taking both, bqos-load on bucket red (limit 200) through it,
# and BUSY `while :; do :; done` shells at nice 0 (killed by pid at the
# end).  Prints the elections after the first, the node's fallbacks, the
# controllers' late rounds and red's highest period (1.05 x L = 210).
# CTL_ARGS adds controller options (e.g. "--takeover-after 2.5").
#   BIN=bin SECS=180 BUSY=6 sh tests/it/busy_host.sh
. "$(dirname "$0")/../../scripts/lib.sh"
it_begin busy_host
HERE=$(cd "$(dirname "$0")" && pwd)
SECS=${SECS:-180}
BUSY=${BUSY:-6}
it_etcd
it_etcd_start
echo '{"buckets":[{"name":"red","reservation":100,"limit":200}]}' >"$T/b1.json"
cp "$T/b1.json" "$T/b2.json"
for i in 1 2; do
  next_port; ls="tcp://127.0.0.1:$PORT"; eval "LS$i=\$ls"
  next_port
  spawn "$T/c$i.log" "$BIN/bqos-controller" --buckets "$T/b$i.json" --listen "$ls" \
    --admin "tcp://127.0.0.1:$PORT" --etcd "$ETCD" --id "c$i" --cluster busy ${CTL_ARGS:-}
done
next_port; MP=$PORT
start_memcached "$MP" "$T/memcached.log"
it_ha_node s1 "$T/node.log"
NP=$NODE_PORT
sleep 3
cat >"$T/scen.json" <<EOF
{"duration": $SECS, "period": 1, "intervals": 5, "warmup_periods": 0, "seed": 1, "capacity": 20000,
 "workload": {"outstanding": 8, "timeout_ms": 10000, "preload": 200},
 "servers": [{"name": "s1", "address": "127.0.0.1:1"}],
 "buckets": [{"name": "red", "reservation": 100, "limit": 200, "servers": ["s1"]}]}
EOF
E0=$(grep -h "leading with epoch" "$T"/c*.log | wc -l)
BUSY_PIDS=""
i=0
while [ $i -lt "$BUSY" ]; do
  sh -c 'while :; do :; done' &
  BUSY_PIDS="$BUSY_PIDS $!"
  i=$((i + 1))
done
"$BIN/bqos-load" -q -s "s1=127.0.0.1:$NP,127.0.0.1:$MP" -o "$T/load" -d "$SECS" "$T/scen.json" \
  >"$T/load.table" 2>"$T/load.log" &
LOAD_PID=$!
python3 "$HERE/node_periods.py" "$NP" "$SECS" red >"$T/red.periods" 2>/dev/null &
POLL_PID=$!
wait "$POLL_PID"
LOADAVG=$(cut -d' ' -f1 /proc/loadavg)
# shellcheck disable=SC2086
kill $BUSY_PIDS
wait "$LOAD_PID"
E1=$(grep -h "leading with epoch" "$T"/c*.log | wc -l)
echo "busy_host: $SECS s, $BUSY busy loops, load $LOADAVG: $((E1 - E0)) elections," \
  "$(grep -c "no controller heard" "$T/node.log") node fallbacks," \
  "$(grep -h "late rounds so far" "$T"/c*.log | wc -l) periods with late rounds," \
  "$(grep -h "not leading again before etcd" "$T"/c*.log | wc -l) gray step-downs;" \
  "red's highest period $(awk 'NR > 1 { if ($2 > m) m = $2 } END { print m + 0 }' "$T/red.periods")" \
  "(limit 200), $(awk 'NR > 2 && $2 < 100' "$T/red.periods" | wc -l) periods below its reservation"
grep -h "leading with epoch\|no longer leading\|gave up our leader key" "$T"/c*.log | sort | tail -20
