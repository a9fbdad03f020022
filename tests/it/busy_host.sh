#!/bin/sh
# busy_host.sh - a measurement, not in `make check` (docs/performance.md, "A busy host"; `make soak` runs it for 10 minutes with its bound): how many elections and node fallbacks a healthy etcd, two controllers and one node under load see on a busy host, over SECS seconds (default 180) with BUSY busy loops (default 6) beside them.
#
# A real etcd, two bqos-controllers (--etcd, the defaults: --lease-ttl 2s,
# --etcd-timeout 100ms, period 1 s in 5 intervals), one bqos-node in front
# of memcached taking both, bqos-load on bucket red (limit 200) through it,
# a raw protocol node (ha_observer.py) on each controller logging every
# message with its epoch, and BUSY `while :; do :; done` shells at nice 0
# (killed by pid at the end).  Prints the elections after the first (from
# the controllers' logs, and the epochs the raw nodes heard), the node's
# fallbacks (its bqos_ctl_fallbacks counter), the controllers' late rounds
# and red's highest node period (1.05 x L = 210).  CTL_ARGS adds
# controller options (e.g. "--takeover-after 2.5").
# With MAX_ELECTIONS set (the soak's bound: 0, and MAX_FALLBACKS 0) it
# checks the bound and exits 1 when more happened, or when red went over
# 1.05 x L in a period.
#   BIN=bin SECS=180 BUSY=6 sh tests/it/busy_host.sh
. "$(dirname "$0")/../../scripts/lib.sh"
it_begin busy_host etcd memcached bqos-controller bqos-node bqos-load
SECS=${SECS:-180}
BUSY=${BUSY:-6}
PY=python3
$PY -c "import zmq" 2>/dev/null || PY=/usr/bin/python3
it_etcd
it_etcd_start
echo '{"buckets":[{"name":"red","reservation":100,"limit":200}]}' >"$T/b1.json"
cp "$T/b1.json" "$T/b2.json"
for i in 1 2; do
  next_port; ls="tcp://127.0.0.1:$PORT"; eval "LS$i=\$ls"
  next_port
  # shellcheck disable=SC2086
  spawn "$T/c$i.log" "$BIN/bqos-controller" --buckets "$T/b$i.json" --listen "$ls" \
    --admin "tcp://127.0.0.1:$PORT" --etcd "$ETCD" --id "c$i" --cluster busy ${CTL_ARGS:-}
done
it_ha_s1 "$PY" $((SECS + 10))
sleep 3
cat >"$T/scen.json" <<JSON
{"duration": $SECS, "period": 1, "intervals": 5, "warmup_periods": 0, "seed": 1, "capacity": 20000,
 "workload": {"outstanding": 8, "timeout_ms": 10000, "preload": 200},
 "servers": [{"name": "s1", "address": "127.0.0.1:1"}],
 "buckets": [{"name": "red", "reservation": 100, "limit": 200, "servers": ["s1"]}]}
JSON
E0=$(grep -h "leading with epoch" "$T"/c*.log | wc -l)
F0=$(node_stat "$NP" bqos_ctl_fallbacks)
B0=$(date +%s.%N)
BUSY_PIDS=""
i=0
while [ $i -lt "$BUSY" ]; do
  sh -c 'while :; do :; done' &
  BUSY_PIDS="$BUSY_PIDS $!"
  i=$((i + 1))
done
LIB_PIDS="$LIB_PIDS $BUSY_PIDS"
"$BIN/bqos-load" -q -s "s1=127.0.0.1:$NP,127.0.0.1:$MP" -o "$T/load" -d "$SECS" "$T/scen.json" \
  >"$T/load.table" 2>"$T/load.log" &
LOAD_PID=$!
python3 "$HERE/node_periods.py" "$NP" "$SECS" red >"$T/red.periods" 2>/dev/null &
POLL_PID=$!
wait "$POLL_PID"
LOADAVG=$(cut -d' ' -f1-3 /proc/loadavg)
# shellcheck disable=SC2086
kill $BUSY_PIDS
wait "$LOAD_PID"
F1=$(node_stat "$NP" bqos_ctl_fallbacks)
E1=$(grep -h "leading with epoch" "$T"/c*.log | wc -l)
ELECT=$((E1 - E0))
FALLB=$(( ${F1:-0} - ${F0:-0} ))
# the epochs the raw nodes heard while the host was busy (one: no election)
EPOCHS=$(awk -v b="$B0" '$1 >= b && $3 > 0 { print $3 }' "$T"/obs1.log "$T"/obs2.log 2>/dev/null |
  sort -un | tr '\n' ' ')
TOP=$(awk 'NR > 1 { if ($2 > m) m = $2 } END { print m + 0 }' "$T/red.periods")
echo "busy_host: $SECS s, $BUSY busy loops, load $LOADAVG: $ELECT elections," \
  "$FALLB node fallbacks ($(grep -c "no controller heard" "$T/node.log") logged)," \
  "epochs heard by the raw nodes: $EPOCHS;" \
  "$(grep -h "late rounds so far" "$T"/c*.log | wc -l) periods with late rounds," \
  "$(grep -h "not leading again before etcd" "$T"/c*.log | wc -l) gray step-downs;" \
  "red's highest period $TOP (limit 200), $(awk 'NR > 2 && $2 < 100' "$T/red.periods" | wc -l) periods below its reservation"
grep -h "leading with epoch\|no longer leading\|gave up our leader key" "$T"/c*.log | sort | tail -20
[ -n "${MAX_ELECTIONS:-}" ] || exit 0
check "at most $MAX_ELECTIONS elections in $SECS s at load $LOADAVG ($ELECT)" '[ "$ELECT" -le "$MAX_ELECTIONS" ]'
check "the raw nodes heard at most $((MAX_ELECTIONS + 1)) epochs ($EPOCHS)" \
  '[ "$(echo $EPOCHS | wc -w)" -le $((MAX_ELECTIONS + 1)) ]'
check "at most ${MAX_FALLBACKS:-0} node fallbacks ($FALLB)" '[ "$FALLB" -le "${MAX_FALLBACKS:-0}" ]'
OVER=$(awk 'NR > 1 && $2 > 210 { printf "%s:%s ", $1, $2 }' "$T/red.periods")
check "red <= 1.05 x 200 in every node period (highest $TOP; over: $OVER)" '[ "$TOP" -le 210 ]'
it_end 'rm -rf /tmp/busy_host.last; cp -r "$T" /tmp/busy_host.last; echo "# kept in /tmp/busy_host.last"; for f in "$T"/c*.log "$T"/node.log; do echo "== $f"; grep -E "leading|etcd|fall|late|follow" "$f" | tail -20; done'
