#!/bin/sh
# it_controller_nodes.sh - bqos-controller with real storage nodes (two bqos-nbd-nodes, emulated 2,500 IOs/s devices) and closed-loop clients: a bucket whose demand sits on one server gets its reservation there (it does not under rr); then a node is killed and the controller is killed and restarted while clients run, with no client request lost.
. "$(dirname "$0")/../../scripts/lib.sh"
it_begin it_controller_nodes
for b in bqos-nbd-node bqos-nbd-load bqos-load bqos-controller bqos-ctl; do
  [ -x "$BIN/$b" ] || { echo "missing $BIN/$b"; exit 1; }
done
# Each server: 5 workers, 2 ms per IO => 2,500 IOs/s.
CAP=2500
truncate -s 64M "$T/vol.img"

# b1 reserves 60% of one server and is only on s1; b2 (60%) is on s1 and s2;
# each client keeps 16 requests outstanding per server (backlogged).
# Round robin on s1 gives b1 half of s1 (<= 1,250/s < 1,500); pShift gives it
# its reservation on s1 and moves b2's to s2.
cat >"$T/scen.json" <<EOF
{"duration": 4, "period": 1, "intervals": 5, "warmup_periods": 1, "seed": 1,
 "capacity": $CAP,
 "workload": {"outstanding": 16, "timeout_ms": 10000},
 "servers": [{"name": "s1", "address": "127.0.0.1:1"}, {"name": "s2", "address": "127.0.0.1:2"}],
 "buckets": [
   {"name": "b1", "reservation": "60%", "limit": "400%", "servers": ["s1"]},
   {"name": "b2", "reservation": "60%", "limit": "400%", "servers": ["s1", "s2"]}]}
EOF
"$BIN/bqos-load" --print-buckets "$T/scen.json" >"$T/b.json" || { echo "bad scenario"; exit 1; }

# start_nodes POLICY CONTROLLER_EP: s1 and s2.
start_nodes() {
  pol=$1; cep=$2
  NODE_PIDS=""; SERVER_ARGS=""; NODE_PORTS=""
  for i in 1 2; do
    next_port; np=$PORT
    set -- "$BIN/bqos-nbd-node" --name "s$i" --nbd-listen "127.0.0.1:$np" \
      --backend "file:$T/vol.img" --policy "$pol" --outstanding 5 --io-time-us 2000 \
      --config "$T/b.json"
    [ "$cep" = - ] || set -- "$@" --controller "$cep" --capacity $CAP
    spawn "$T/node-s$i-$pol.log" "$@"
    NODE_PIDS="$NODE_PIDS $SPAWNED"; NODE_PORTS="$NODE_PORTS $np"
    SERVER_ARGS="$SERVER_ARGS -s s$i=127.0.0.1:$np"
    eval "PID_s$i=$SPAWNED"
  done
  for np in $NODE_PORTS; do wait_port "$np" 10 || return 1; done
}
stop_nodes() { for p in $NODE_PIDS; do stop_pid "$p"; done; NODE_PIDS=""; }
# b1_rate DIR: b1's mean IOs/s over the measured periods.
b1_rate() { awk -F, 'NR > 1 && $2 == "b1" { s += $5; n++ } END { if (n) printf "%d", s / n; else print 0 }' "$1/periods.csv"; }
# jerr SUMMARY BUCKET|all [FIELD]: a bucket's error count (or FIELD) from a
# bqos-nbd-load summary.json; "all": the run's total errors.
jerr() { python3 -c "import json,sys
d=json.load(open(sys.argv[1])); f=sys.argv[3] if len(sys.argv) > 3 else 'errors'
print(d['errors'] if sys.argv[2] == 'all' else next(b[f] for b in d['buckets'] if b['name'] == sys.argv[2]))" "$@" 2>/dev/null; }
# load DIR [EXTRA...]: the scenario against the nodes.
load() { d=$1; shift; "$BIN/bqos-nbd-load" $SERVER_ARGS -c $CAP -q -o "$d" "$@" "$T/scen.json" \
  >"$d.table" 2>"$d.log"; }

# 1. Without QoS: b1 misses its reservation (so the check below can fail).
start_nodes rr - || { echo "nodes did not start"; exit 1; }
load "$T/rr" -d 3; rc=$?
stop_nodes
check "rr run completed (rc $rc)" '[ $rc -eq 0 ]'
RR=$(b1_rate "$T/rr")
check "rr: b1 gets less than its reservation of 1500/s ($RR/s)" '[ "$RR" -lt 1350 ]'

# 2. With the controller: b1 gets its reservation on s1.
next_port; CP=$PORT; next_port; AP=$PORT
CTRL_EP="tcp://127.0.0.1:$CP"; ADMIN_EP="tcp://127.0.0.1:$AP"
ctl_start() {
  spawn "$T/controller$1.log" "$BIN/bqos-controller" --buckets "$T/b.json" --listen "$CTRL_EP" \
    --admin "$ADMIN_EP" --period 1s --intervals 5 --capacity $CAP --down-after 2 \
    --log-level debug
  CTRL_PID=$SPAWNED
  wait_port "$CP" 10
}
ctl_start 1 || { echo "controller did not start"; exit 1; }
start_nodes tokens "$CTRL_EP" || { echo "nodes did not start"; exit 1; }
# status FILE: the controller's status into FILE.  node_is FILE NAME STATE:
# whether FILE lists node NAME in STATE.  up_count FILE: nodes up in FILE.
status() { "$BIN/bqos-ctl" --endpoint "$ADMIN_EP" --json status >"$1" 2>&1; }
node_is() {
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if any(n['name']==sys.argv[2] and n['state']==sys.argv[3] for n in d['nodes']) else 1)" "$@" 2>/dev/null
}
up_count() { python3 -c "import json,sys; print(sum(n['state']=='up' for n in json.load(open(sys.argv[1]))['nodes']))" "$1" 2>/dev/null; }
wait_for 'status "$T/st1.json" && [ "$(up_count "$T/st1.json")" = 2 ]' 10
check "both nodes registered and up" '[ "$(up_count "$T/st1.json")" = 2 ]'
EL=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['elapsed_ms'])" "$T/st1.json")
ALIGN=$(echo "$(date +%s.%N) $EL" | awk '{ printf "%.3f", $1 - $2 / 1000 }')
# Timing-sensitive: a machine loaded by other jobs can stall every process
# for seconds, so a run that misses is tried once more.
for attempt in 1 2; do
  load "$T/qos" --period-start "$ALIGN"; rc=$?
  QOS=$(b1_rate "$T/qos")
  [ $rc -eq 0 ] && [ "$QOS" -ge 1350 ] && break
  echo "# attempt $attempt: b1 $QOS/s (load average $(cut -d' ' -f1 /proc/loadavg)), again"
  rm -rf "$T/qos"
done
check "pShift run completed (rc $rc)" '[ $rc -eq 0 ]'
check "pShift: b1 gets its reservation of 1500/s (>= 90%) on s1 alone ($QOS/s, rr $RR/s)" '[ "$QOS" -ge 1350 ]'
check "tokens pushed" 'grep -q "round .*: computed, 2 nodes up" "$T/controller1.log"'
check "no client request failed" '[ "$(jerr "$T/qos/summary.json" all)" = 0 ]'

# 3. Faults while clients run: s2 is killed (down, re-planned), then the
#    controller is killed and restarted (nodes re-register); no request lost.
load "$T/faults" -d 5 &
LP=$!
sleep 1.2 # the clients are running when the faults come
eval "kill -9 \$PID_s2"
wait_for 'status "$T/st2.json" && node_is "$T/st2.json" s2 down' 5
check "killed node marked down" 'node_is "$T/st2.json" s2 down'
stop_pid "$CTRL_PID"
wait_for '! ss -Hltn "sport = :$CP" | grep -q .' 5 # the port is free again
ctl_start 2 || not_ok "controller restarted"
wait_for 'status "$T/st3.json" && node_is "$T/st3.json" s1 up' 10
check "s1 registered with the restarted controller" 'node_is "$T/st3.json" s1 up'
wait_for 'grep -q "computed, 1 nodes up" "$T/controller2.log"' 5
check "restarted controller pushes tokens" 'grep -q "computed, 1 nodes up" "$T/controller2.log"'
wait $LP
check "b1's requests (s1 only) all answered across the controller restart" \
  '[ "$(jerr "$T/faults/summary.json" b1)" = 0 ] && [ "$(jerr "$T/faults/summary.json" b1 completed)" -gt 1000 ]'
stop_nodes

it_end 'for f in "$T"/controller*.log; do echo "== $f"; tail -15 "$f"; done; cat "$T/qos.table" "$T/rr.table" 2>/dev/null'
