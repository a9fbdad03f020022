#!/bin/sh
# demo-ha.sh - `make demo-ha`: controller failover on loopback: etcd, two bqos-controllers that elect a leader, simulated nodes on the standby; kill -9 the leader and watch the standby take over, push, and keep the bucket table.
#
# Usage: examples/demo-ha.sh   (BIN=bin by default; TTL=2 lease seconds;
# DUR=8 seconds the simulated nodes run).  Prints PASS/FAIL lines and exits 1
# if any check failed.  Every process it starts is stopped on exit.
#
# The nodes are bqos-ctrl-bench's simulated nodes (the real protocol),
# pointed at the standby: a standby says nothing to nodes, so they are
# welcomed and get tokens only once it leads.  With nodes that take every
# controller (bqos-node --controller A,B) the same failover needs no
# re-pointing (part 2, when this bqos-node takes a list: real nodes, bqos-load,
# limits per 1 s period); docs/controller.md, "High availability", shows three
# controllers on three hosts.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../scripts/lib.sh"
example_init "$@"
TTL=${TTL:-2}
DUR=${DUR:-8}
etcd_scratch bqos-demo-ha
fails=0
pass() { echo "PASS: $1"; }
fail() { echo "FAIL: $1"; fails=$((fails + 1)); }
check() { if eval "$2"; then pass "$1"; else fail "$1"; fi; }
for b in bqos-controller bqos-ctl bqos-ctrl-bench; do
  [ -x "$BIN/$b" ] || { echo "demo-ha: missing $BIN/$b (run make)"; exit 1; }
done
command -v etcd >/dev/null 2>&1 || { echo "demo-ha: no etcd (scripts/deps.sh installs etcd-server)"; exit 1; }

cat <<TXT
bqos demo-ha: one etcd, two controllers (c1, c2) sharing it, lease ${TTL} s,
period 1 s in 5 intervals; 4 simulated nodes x 50 buckets on c2's node
endpoint.  c1 starts first and leads; c2 is a standby.  Then kill -9 c1.

TXT
start_etcd demo "$T/etcd.log" || { echo "demo-ha: etcd did not start"; cat "$T/etcd.log"; exit 1; }
echo "etcd on $ETCD"

"$BIN/bqos-ctrl-bench" --nodes 4 --buckets 50 --reserved 0.5 --write-buckets "$T/b1.json" || exit 1
next_port; L1=$PORT; next_port; A1=$PORT; next_port; L2=$PORT; next_port; A2=$PORT
AD="tcp://127.0.0.1:$A1,tcp://127.0.0.1:$A2"
start_ctl() { # start_ctl I LISTEN ADMIN
  spawn "$T/c$1.log" "$BIN/bqos-controller" --buckets "$T/b$1.json" --listen "tcp://127.0.0.1:$2" \
    --admin "tcp://127.0.0.1:$3" --period 1s --intervals 5 --capacity 20000 --etcd "$ETCD" \
    --id "c$1" --cluster demo --lease-ttl "$TTL" --etcd-timeout 250ms
  eval "PID$1=\$SPAWNED"
}
ctl() { "$BIN/bqos-ctl" --timeout 1000 "$@"; }
leader_of() { # leader_of ADMIN_PORT: "True"/"False" and the epoch
  ctl --endpoint "tcp://127.0.0.1:$1" --json status >"$T/st.json" 2>/dev/null &&
    jget "$T/st.json" "d['leader'], d['epoch']"
}

start_ctl 1 "$L1" "$A1"
wait_for '[ "$(leader_of "$A1" | cut -d" " -f1)" = True ]' 10
start_ctl 2 "$L2" "$A2"
wait_for 'ctl --endpoint "tcp://127.0.0.1:$A2" status 2>/dev/null | grep -q "(leader c1)"' 10
echo; ctl --endpoint "$AD" status | grep '^controller c'
ctl --endpoint "tcp://127.0.0.1:$A2" status | grep '^controller c'
check "one leader (c1), c2 a standby that names it" \
  'ctl --endpoint "tcp://127.0.0.1:$A2" status | grep -q "controller c2: standby, epoch [1-9][0-9]* (leader c1)"'
E1=$(leader_of "$A1" | cut -d" " -f2)

echo; echo "\$ bqos-ctl --endpoint c2,c1 set demo --reservation 100 --limit 500"
ctl --endpoint "tcp://127.0.0.1:$A2,tcp://127.0.0.1:$A1" set demo --reservation 100 --limit 500
wait_for 'ctl --endpoint "tcp://127.0.0.1:$A2" buckets | grep -q "^demo"' 3
check "the change went through the leader to etcd and to the standby" \
  'ctl --endpoint "tcp://127.0.0.1:$A2" buckets | grep -q "^demo" && grep -q demo "$T/b2.json"'

echo; echo "simulated nodes on c2 (the standby) for ${DUR} s; kill -9 c1 after 2 s"
spawn "$T/bench.json" "$BIN/bqos-ctrl-bench" --endpoint "tcp://127.0.0.1:$L2" \
  --admin "tcp://127.0.0.1:$A2" --nodes 4 --buckets 50 --seconds "$DUR" --quiet
BENCH=$SPAWNED
sleep 2
pt=$(ctl --endpoint "tcp://127.0.0.1:$A2" --json status | python3 -c \
  "import json,sys; print(json.load(sys.stdin)['stats']['push_tokens'])" 2>/dev/null)
check "the standby sent the nodes nothing (tokens pushed: ${pt:-?})" '[ "${pt:-1}" = 0 ]'
K0=$(date +%s.%N)
kill -9 "$PID1"
wait_for '[ "$(leader_of "$A2" | cut -d" " -f1)" = True ]' 10
K1=$(date +%s.%N)
E2=$(leader_of "$A2" | cut -d" " -f2)
TAKE=$(echo "$K0 $K1" | awk '{ printf "%.2f", $2 - $1 }')
echo "c2 leads ${TAKE} s after kill -9 (epoch $E1 -> $E2)"
check "c2 leads within the lease + 1 s, with a higher epoch" \
  'awk -v t="$TAKE" -v l="$TTL" "BEGIN { exit !(t <= l + 1) }" && [ "$E2" -gt "$E1" ]'
wait "$BENCH" 2>/dev/null
echo
python3 -c "
import json; d = json.load(open('$T/bench.json'))
print('nodes welcomed %s, tokens messages %s, token records %s, bad messages %s' %
      (d['welcomed'], d['tokens_msgs'], d['token_records'], d['bad_messages']))" 2>/dev/null
check "the new leader welcomed every node and pushed tokens" \
  '[ "$(jget "$T/bench.json" "d[\"welcomed\"]")" = 4 ] && [ "$(jget "$T/bench.json" "d[\"tokens_msgs\"]")" -gt 0 ]'
check "no bad message either way" \
  '[ "$(jget "$T/bench.json" "d[\"bad_messages\"]")" = 0 ] && [ "$(jget "$T/bench.json" "d[\"stats\"][\"messages_rejected\"]")" = 0 ]'
check "the bucket table survived (from etcd)" 'ctl --endpoint "tcp://127.0.0.1:$A2" buckets | grep -q "^demo"'

start_ctl 1 "$L1" "$A1"
wait_for 'ctl --endpoint "tcp://127.0.0.1:$A1" status 2>/dev/null | grep -q "(leader c2)"' 10
echo; ctl --endpoint "tcp://127.0.0.1:$A1" status | grep '^controller c'
check "c1 restarted and follows c2 as a standby" \
  'ctl --endpoint "tcp://127.0.0.1:$A1" status | grep -q "controller c1: standby.*(leader c2)"'

# Part 2, end to end: real nodes that report to both controllers, bqos-load
# with a limited, a reserved and a greedy bucket, kill -9 of the leader.
if "$BIN/bqos-node" --help 2>&1 | grep -q -- "--controller ENDPOINT\[,"; then
  echo; echo "== part 2: memcached + 2 bqos-nodes (--controller A,B) + bqos-load; kill -9 the leader"
  BIN=$BIN sh "$HERE/../controller/bench/bench-ha-e2e.sh" | tee "$T/e2e.txt"
  wl=$(sed -n 's/^worst limit ratio \([0-9.]*\),.*/\1/p' "$T/e2e.txt")
  check "no bucket above 1.05 x its limit in any 1 s period (worst ${wl:-?})" \
    'awk -v w="${wl:-9}" "BEGIN { exit !(w <= 1.05) }"'
  check "the nodes followed the new leader" 'grep -q "following source 1" "$T/e2e.txt"'
else
  echo; echo "(part 2 skipped: this bqos-node takes one controller)"
fi
echo
if [ "$fails" = 0 ]; then echo "demo-ha: all passed"; else
  echo "demo-ha: $fails failed"; for f in "$T"/c*.log; do echo "== $f"; tail -15 "$f"; done; fi
[ "$fails" = 0 ]
