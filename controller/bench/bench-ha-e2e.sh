#!/bin/sh
# bench-ha-e2e.sh - failover end to end: two memcached servers behind bqos-nodes that report to two controllers sharing etcd, bqos-load with a limited bucket, a reserved bucket and a greedy one; kill -9 the leader mid-period and read every 1 s period (aligned to the controllers' periods): worst limit ratio and reservation dip.
#
# Usage: controller/bench/bench-ha-e2e.sh   (BIN=bin; NODE_BIN=$BIN, the
# bqos-node to use: it must take --controller A,B; TTL=1 lease seconds;
# DUR=14 seconds of load, the kill at KILL_AT=7.5 s).  Needs etcd, memcached.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../../scripts/lib.sh"
BIN=${BIN:-bin}
NODE_BIN=${NODE_BIN:-$BIN}
TTL=${TTL:-1}
DUR=${DUR:-14}
KILL_AT=${KILL_AT:-7.5}
"$NODE_BIN/bqos-node" --help 2>&1 | grep -q -- "--controller ENDPOINT\[," ||
  { echo "bench-ha-e2e: $NODE_BIN/bqos-node takes one controller; nothing to measure"; exit 0; }
etcd_scratch bench-ha-e2e

start_etcd e "$T/etcd.log" || { echo "etcd did not start"; exit 1; }

start_backends 2 "$T" || exit 1
set -- $MC_PORTS; MC1=$1; MC2=$2
next_port; N1=$PORT; next_port; N2=$PORT
scenario() { # scenario CAPACITY
  cat <<EOF
{"duration": $DUR, "period": 1, "intervals": 5, "warmup_periods": 1, "capacity": $1,
 "workload": {"get_ratio": 0.5, "value_size": 4096, "preload": 2000, "outstanding": 15},
 "servers": [{"name": "s1", "address": "127.0.0.1:$N1", "backend": "127.0.0.1:$MC1"},
             {"name": "s2", "address": "127.0.0.1:$N2", "backend": "127.0.0.1:$MC2"}],
 "buckets": [{"name": "lim", "reservation": "20%", "limit": "30%", "servers": ["s1", "s2"]},
             {"name": "res", "reservation": "90%", "servers": ["s1", "s2"]},
             {"name": "greedy", "reservation": 0, "servers": ["s1", "s2"]}]}
EOF
}
nodes() { # nodes EXTRA...: s1 and s2
  NODE_PIDS=""
  for i in 1 2; do
    eval "np=\$N$i mp=\$MC$i"
    spawn "$T/node-s$i.log" "$NODE_BIN/bqos-node" --name "s$i" --memcached-listen "127.0.0.1:$np" \
      --backend "memcached://127.0.0.1:$mp" "$@"
    NODE_PIDS="$NODE_PIDS $SPAWNED"
  done
  wait_port "$N1" 10 && wait_port "$N2" 10
}

# Capacity: a 2 s profile through round-robin nodes.
nodes --policy rr || exit 1
scenario 10000 >"$T/s0.json"
"$BIN/bqos-load" --profile 2 "$T/s0.json" >"$T/profile.txt" 2>"$T/profile.err" || { cat "$T/profile.err"; exit 1; }
CAP=$(awk '$1 == "capacity" { printf "%d", $2 }' "$T/profile.txt")
echo "profiled capacity: $CAP IOs/s per server"
stop_nodes
scenario "$CAP" >"$T/s.json"
"$BIN/bqos-load" --print-buckets "$T/s.json" >"$T/b1.json" || exit 1
cp "$T/b1.json" "$T/b2.json"

next_port; L1=$PORT; next_port; A1=$PORT; next_port; L2=$PORT; next_port; A2=$PORT
for i in 1 2; do
  eval "l=\$L$i a=\$A$i"
  spawn "$T/c$i.log" "$BIN/bqos-controller" --buckets "$T/b$i.json" --listen "tcp://127.0.0.1:$l" \
    --admin "tcp://127.0.0.1:$a" --period 1s --intervals 5 --capacity "$CAP" --etcd "$ETCD" \
    --id "c$i" --cluster e2e --lease-ttl "$TTL" --etcd-timeout 250ms --log-level debug
  eval "CP$i=\$SPAWNED"
  [ $i = 1 ] && sleep 1
done
nodes --policy tokens --controller "tcp://127.0.0.1:$L1,tcp://127.0.0.1:$L2" || exit 1
sleep 2
st=$("$BIN/bqos-ctl" --endpoint "tcp://127.0.0.1:$A1" --json status)
el=$(echo "$st" | sed -n 's/.*"elapsed_ms": *\([0-9]*\).*/\1/p' | head -1)
start=$(echo "$(date +%s.%N) $el" | awk '{ printf "%.3f", $1 - $2 / 1000 }')
"$BIN/bqos-load" -c "$CAP" --preload 2000 -d "$DUR" -o "$T/run" -l failover --period-start "$start" \
  "$T/s.json" >"$T/table.txt" 2>"$T/load.err" &
LOAD=$!
# the kill: KILL_AT seconds into the run, which starts after the preload
wait_for '[ -s "$T/load.err" ] && grep -q "running\|period" "$T/load.err"' 30
sleep "$KILL_AT"
K0=$(date +%s.%N)
kill -9 "$CP1"
wait $LOAD
echo "kill -9 c1 at $(date -d "@$K0" +%T.%N | cut -c1-12), $(echo "$K0 $start" | awk '{ printf "%.3f", $1 - $2 }') s on the periods' clock"
grep "leading with epoch" "$T/c2.log" | tail -1
grep -h "following source 1\|falling back\|is back after" "$T"/node-s*.log
python3 - "$T/run/periods.csv" "$K0" "$start" <<'EOF'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
kill_p = int((float(sys.argv[2]) - float(sys.argv[3])) // 1) + 1  # periods are 1-based
print("period  lim/limit  res/reservation  greedy")
worst_l, worst_r = 0.0, 9.9
per = {}
for r in rows:
    per.setdefault(int(r["period"]), {})[r["bucket"]] = r
for p in sorted(per):
    d = per[p]
    l = float(d["lim"]["completed"]) / float(d["lim"]["limit"])
    rr = float(d["res"]["completed"]) / float(d["res"]["reservation"])
    worst_l, worst_r = max(worst_l, l), min(worst_r, rr)
    mark = "  <- kill" if p == kill_p else ""
    print("%6d  %9.3f  %15.3f  %6s%s" % (p, l, rr, d["greedy"]["completed"], mark))
print("worst limit ratio %.3f, lowest reservation ratio %.3f" % (worst_l, worst_r))
EOF
