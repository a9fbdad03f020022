#!/bin/sh
# it_etcd_slow.sh - issue 26 case 3: a slow etcd (a gray failure: paused 450 ms of every 700 ms) gives one leader that keeps its node's tokens steady, a clean hand-over, or the node's static fallback, never swinging tokens; a limited bucket holds 1.05 x its limit in every period.
#
# A real etcd (data in /dev/shm when it can), two bqos-controllers (--etcd,
# --lease-ttl 2s, --etcd-timeout 100ms, period 1 s in K=5 intervals), one
# bqos-node in front of memcached taking both controllers, and bqos-load on
# bucket red (reservation 100, limit 200) through the node, asking far
# more than the limit.  After 4 s of load etcd is paused with SIGSTOP for
# 450 ms of every 700 ms (SIGCONT for 250 ms) for PAUSE_S s (15).
# Required (docs/controller.md "Faults", "A slow etcd"):
#   - red <= 1.05 x 200 in every node period (1 s) from the load's start;
#   - no swinging tokens: from the second period of the pauses to the end,
#     every period the node followed a leader in serves within
#     [0.9, 1.05] x L, except at most SWING_ALLOW (2) periods, the hand-over
#     to fallback or to a leader; periods in static fallback are counted,
#     not judged by their level (the node keeps its last grant);
#   - the node changes state (following, fallback) at most twice while
#     etcd is slow, and at most one election happens (a clean hand-over);
#   - once etcd is healthy again the node follows a leader.
# On the code before the fix the leader stops pushing at its heartbeat's
# fence in every pause and resumes after each late heartbeat: rounds go
# out or not, and the node serves 0-100 IOs in some periods, L in others.
. "$(dirname "$0")/../../scripts/lib.sh"
it_begin it_etcd_slow etcd memcached bqos-controller bqos-node bqos-ctl bqos-load
K=${K:-5}
LIM=200
PAUSE_S=${PAUSE_S:-15}
SWING_ALLOW=${SWING_ALLOW:-2}
it_etcd
it_etcd_start

it_ha_pair '{"buckets":[{"name":"red","reservation":100,"limit":200}]}' --intervals "$K" --lease-ttl 2 \
  --etcd-timeout "${TMO:-100ms}"
ctl_start 1
ctl_start 2
wait_for '[ -n "$(leader_now)" ]' 10
check "a leader before etcd slows down" '[ -n "$(leader_now)" ]'

next_port; MP=$PORT
start_memcached "$MP" "$T/memcached.log"
it_ha_node s1 "$T/node.log"
NP=$NODE_PORT
nstat() { mc_ask "$NP" 'stats\r\n' 2 | tr '|' '\n' | awk -v k="$1" '$2 == k { print $3 }'; }
wait_for '[ "$(nstat bqos_ctl_state)" = following ]' 10
check "the node follows the leader" '[ "$(nstat bqos_ctl_state)" = following ]'

DUR=$((PAUSE_S + 7))
cat >"$T/scen.json" <<EOF
{"duration": $DUR, "period": 1, "intervals": $K, "warmup_periods": 0, "seed": 1, "capacity": 20000,
 "workload": {"outstanding": 8, "timeout_ms": 10000, "preload": 200},
 "servers": [{"name": "s1", "address": "127.0.0.1:1"}],
 "buckets": [{"name": "red", "reservation": 100, "limit": $LIM, "servers": ["s1"]}]}
EOF
"$BIN/bqos-load" -q -s "s1=127.0.0.1:$NP,127.0.0.1:$MP" -o "$T/load" -d "$DUR" "$T/scen.json" \
  >"$T/load.table" 2>"$T/load.log" &
LOAD_PID=$!
python3 "$HERE/node_periods.py" "$NP" $((DUR + 1)) red >"$T/red.periods" 2>/dev/null &
POLL_PID=$!
sleep 4

# etcd slow: paused 450 ms of every 700 ms for PAUSE_S s.  The cycle runs
# in this shell (its pid is etcd's, which cleanup stops anyway).
E0=$(grep -h "leading with epoch" "$T"/c*.log | wc -l)
P0=$(date +%s.%N)
n=$((PAUSE_S * 10 / 7))
while [ "$n" -gt 0 ]; do
  kill -STOP "$ETCD_PID"; sleep 0.45
  kill -CONT "$ETCD_PID"; sleep 0.25
  n=$((n - 1))
done
P1=$(date +%s.%N)
E1=$(grep -h "leading with epoch" "$T"/c*.log | wc -l)
# etcd healthy again: how long until the node follows a leader
wait_for '[ "$(nstat bqos_ctl_state)" = following ]' 6
BACK=$(echo "$P1 $(date +%s.%N)" | awk '{ printf "%.1f", $2 - $1 }')
[ "$(nstat bqos_ctl_state)" = following ] || BACK=never
wait "$LOAD_PID"
wait "$POLL_PID"

# red per node period "PERIOD SERVED STATE END" (END: wall time seen
# ending); the periods under load: not the first, nor the trailing ones
# with under 20 IOs (the load stopped).  Judged: those that ended from 1 s after the pauses
# began (the first whole period of them) to 2 s after they stopped.
ALL=$(awk 'NR > 1 { v[++n] = $2 } END { while (n > 0 && v[n] < 20) n--; for (i = 1; i <= n; i++) printf "%s ", v[i] }' \
  "$T/red.periods")
awk -v a="$P0" -v b="$P1" '$4 >= a + 1 && $4 <= b + 2' "$T/red.periods" >"$T/judged"
J=$(awk '{ printf "%s%s ", $2, ($3 == "following" ? "" : "/" $3) }' "$T/judged")
SWING=$(awk -v l="$LIM" '$3 == "following" && ($2 < 0.9 * l || $2 > 1.05 * l)' "$T/judged" | wc -l)
FALLB=$(awk '$3 != "following"' "$T/judged" | wc -l)
FLIPS=$(awk 'NR > 1 && $3 != s { n++ } { s = $3 } END { print n + 0 }' "$T/judged")
echo "# red per 1 s node period (limit $LIM, reservation 100; /STATE: not following):" \
  "all periods: $ALL; while etcd was slow: $J"
# a host that stalls for seconds (both controllers' rounds late at once)
# fails this test whatever etcd does: say so
STALL=$(sed -n 's/.* begins \([0-9]*\) ms after its boundary.*/\1/p' "$T"/c*.log | sort -n | tail -1)
echo "# the controllers' latest round began ${STALL:-0} ms after its boundary" \
  "(over 1000: the host stalled, not only etcd)"
echo "# $SWING periods following outside [0.9, 1.05] x L, $FALLB in fallback, $FLIPS changes of state;" \
  "$((E1 - E0)) elections while etcd was slow; load $(cut -d' ' -f1 /proc/loadavg)"
check "red <= 1.05 x $LIM in every period ($ALL)" \
  '[ $(echo $ALL | wc -w) -ge $((DUR - 4)) ] && [ "$(echo $ALL | tr " " "\n" | awk "\$1 > 1.05 * $LIM" | wc -l)" = 0 ]'
check "no swinging tokens: at most $SWING_ALLOW periods following a leader outside [0.9, 1.05] x L ($SWING)" \
  '[ "$(wc -l <"$T/judged")" -ge $((PAUSE_S - 2)) ] && [ "$SWING" -le "$SWING_ALLOW" ]'
check "no flapping between following and fallback: at most 2 changes of state ($FLIPS)" \
  '[ "$FLIPS" -le 2 ]'
check "at most one election while etcd was slow ($((E1 - E0)))" '[ $((E1 - E0)) -le 1 ]'
check "etcd healthy again: the node follows a leader within 6 s ($BACK s)" '[ "$BACK" != never ]'

it_end 'for f in "$T"/c*.log "$T"/node.log; do echo "== $f"; grep -E "leading|etcd|fall|late|follow" "$f" | tail -20; done'
