#!/bin/sh
# busy-host.sh - `make soak`'s busy-host bound (issue 26, "Gray failures are failures"): two controllers on a real etcd and two nodes under load, the host held at a target load average by niced busy loops for DURATION seconds; fails if any election happens while the leader is alive (both controllers run throughout, so every election after the first is spurious).
#
# Usage: tests/soak/busy-host.sh   (BIN=bin; DURATION=600 s; TARGET_LOAD=6,
# the 1-minute load average aimed at; BUSY_NICE=10, the busy loops' nice
# level, as `nice` runs a build; MAX_BUSY=16 loops at most; MAX_ELECTIONS=0;
# MAX_FALLBACKS unset: node fallbacks counted, not judged; CTL_ARGS extra
# controller options, e.g. "--takeover-after 2.5")
#
# A real etcd, two bqos-controllers c1 and c2 (--etcd with the defaults:
# --lease-ttl 2s, --etcd-timeout 100ms, period 1 s in 5 intervals), memcached
# behind two bqos-nodes s1 and s2 that take both controllers, and bqos-load
# closing its loop on bucket red (R 100, L 200) through both nodes.  Every
# 10 s the 1-minute load average is read: below TARGET_LOAD - 0.5 one more
# busy loop (`nice -n BUSY_NICE sh -c 'while :; do :; done'`) starts, above
# TARGET_LOAD + 1 one stops (other sessions' work counts: on a host already
# at the target none run).  Counted from the controllers' logs: elections
# ("leading with epoch" after the first), depositions ("deposed, taking
# over"), step-downs ("no longer leading"), gray step-downs ("not leading
# again before etcd"), late heartbeats found the host's stall ("waiting for a
# CPU: a host"); from the nodes' counters: fallbacks (bqos_ctl_fallbacks).
# Prints the load average seen (min / median / max of the samples) and
# the busy loops run.  Exits 1 if elections > MAX_ELECTIONS, a controller
# died, or fallbacks > MAX_FALLBACKS when set.
. "$(dirname "$0")/../../scripts/lib.sh"
it_begin busy_host_soak etcd memcached bqos-controller bqos-node bqos-load
DURATION=${DURATION:-600}
TARGET_LOAD=${TARGET_LOAD:-6}
BUSY_NICE=${BUSY_NICE:-10}
MAX_BUSY=${MAX_BUSY:-16}
MAX_ELECTIONS=${MAX_ELECTIONS:-0}
IT=$HERE/../it
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
  eval "CPID$i=\$SPAWNED"
done
next_port; MP=$PORT
start_memcached "$MP" "$T/memcached.log"
it_ha_node s1 "$T/node1.log"; NP1=$NODE_PORT
it_ha_node s2 "$T/node2.log"; NP2=$NODE_PORT
wait_for 'grep -q "leading with epoch" "$T"/c*.log' 15
sleep 3
cat >"$T/scen.json" <<JSON
{"duration": $DURATION, "period": 1, "intervals": 5, "warmup_periods": 0, "seed": 1, "capacity": 20000,
 "workload": {"outstanding": 8, "timeout_ms": 10000, "preload": 200},
 "servers": [{"name": "s1", "address": "127.0.0.1:1"}, {"name": "s2", "address": "127.0.0.1:2"}],
 "buckets": [{"name": "red", "reservation": 100, "limit": 200, "servers": ["s1", "s2"]}]}
JSON
count() { grep -h "$1" "$T"/c1.log "$T"/c2.log | wc -l; }
fallbacks() {
  a=$(node_stat "$NP1" bqos_ctl_fallbacks); b=$(node_stat "$NP2" bqos_ctl_fallbacks)
  case "$a$b" in *none*|"") echo none ;; *) echo $((a + b)) ;; esac
}
E0=$(count "leading with epoch"); D0=$(count "deposed, taking over"); S0=$(count "no longer leading")
G0=$(count "not leading again before etcd"); F0=$(fallbacks)
"$BIN/bqos-load" -q -s "s1=127.0.0.1:$NP1,127.0.0.1:$MP" -s "s2=127.0.0.1:$NP2,127.0.0.1:$MP" \
  -o "$T/load" -d "$DURATION" "$T/scen.json" >"$T/load.table" 2>"$T/load.log" &
LOAD_PID=$!
BUSY_PIDS=""
nbusy=0
most=0
: >"$T/loadavg"
t_end=$(($(date +%s) + DURATION))
while [ "$(date +%s)" -lt "$t_end" ]; do
  la=$(cut -d' ' -f1 /proc/loadavg)
  echo "$la $nbusy" >>"$T/loadavg"
  if awk -v l="$la" -v t="$TARGET_LOAD" 'BEGIN { exit !(l < t - 0.5) }' && [ "$nbusy" -lt "$MAX_BUSY" ]; then
    nice -n "$BUSY_NICE" sh -c 'while :; do :; done' &
    BUSY_PIDS="$! $BUSY_PIDS"
    LIB_PIDS="$LIB_PIDS $!"
    nbusy=$((nbusy + 1))
  elif awk -v l="$la" -v t="$TARGET_LOAD" 'BEGIN { exit !(l > t + 1) }' && [ "$nbusy" -gt 0 ]; then
    set -- $BUSY_PIDS
    kill "$1"; wait "$1" 2>/dev/null
    shift; BUSY_PIDS=$*
    nbusy=$((nbusy - 1))
  fi
  [ "$nbusy" -gt "$most" ] && most=$nbusy
  sleep 10
done
# shellcheck disable=SC2086
[ -n "$BUSY_PIDS" ] && kill $BUSY_PIDS 2>/dev/null
wait "$LOAD_PID" 2>/dev/null
ELECT=$(($(count "leading with epoch") - E0)); DEPOSED=$(($(count "deposed, taking over") - D0))
STEPDOWN=$(($(count "no longer leading") - S0)); GRAY=$(($(count "not leading again before etcd") - G0))
F1=$(fallbacks)
case "$F0$F1" in *none*) FALLB=none ;; *) FALLB=$((F1 - F0)) ;; esac
NOTCOUNTED=$(count "waiting for a CPU: a host")
LA=$(sort -n "$T/loadavg" | awk '{ a[NR] = $1 } END { printf "%s / %s / %s", a[1], a[int((NR + 1) / 2)], a[NR] }')
echo "busy-host: $DURATION s at target load $TARGET_LOAD (1-min load min / median / max $LA;" \
  "up to $most busy loops at nice $BUSY_NICE): $ELECT elections, $DEPOSED depositions," \
  "$STEPDOWN step-downs ($GRAY gray), $FALLB node fallbacks, $NOTCOUNTED late heartbeats" \
  "found the host's; $(count "late rounds so far") periods with late rounds"
grep -h "leading with epoch\|no longer leading\|deposed\|gave up our leader key" "$T"/c*.log | sort | tail -20
alive=1
for p in "$CPID1" "$CPID2"; do kill -0 "$p" 2>/dev/null || alive=0; done
check "both controllers ran throughout" '[ "$alive" = 1 ]'
check "at most $MAX_ELECTIONS elections with the leader alive in $DURATION s ($ELECT)" \
  '[ "$ELECT" -le "$MAX_ELECTIONS" ]'
check "the nodes' fallback counters were read ($FALLB)" '[ "$FALLB" != none ]'
[ -n "${MAX_FALLBACKS:-}" ] &&
  check "at most $MAX_FALLBACKS node fallbacks ($FALLB)" '[ "$FALLB" != none ] && [ "$FALLB" -le "$MAX_FALLBACKS" ]'
it_end 'rm -rf /tmp/busy-host.last; cp -r "$T" /tmp/busy-host.last; echo "# kept in /tmp/busy-host.last"'
