#!/bin/sh
# it_shares_nodes.sh - fair shares of spare capacity (issue 28) on real nodes: bqos-controller --shares on and four bqos-nbd-nodes (emulated devices of 400 IOs/s: a capacity the controller can know), buckets on 1, 2 and 4 of them with weights 1, 2, 1 and a reserved bucket (R = L) on all four, closed-loop clients (bqos-nbd-load) keeping every bucket hungry: each bucket's service beyond R is within 10% of the weighted max-min ideal computed from what the nodes delivered (shares_nodes_check.py), the reservation met (not judged when the host starves the nodes below half their capacity); the same run with --shares off divides by footprint and the check fails.
# run-tests: alone
#
# About 21 s: two runs of 8 s (5 s measured each); up to 32 s on a host at load 38.
. "$(dirname "$0")/../../scripts/lib.sh"
it_begin it_shares_nodes bqos-nbd-node bqos-nbd-load bqos-controller
it_want python3 curl
HERE=$(cd "$(dirname "$0")" && pwd)
# Each node: 2 workers, 5 ms per IO => 400 IOs/s, whatever the host's load
# (the IO time is slept, not spent).
CAP=400; SECS=5; WARM=2; TOL=${SHARES_TOL:-0.10}
truncate -s 16M "$T/vol.img"
cat >"$T/scen.json" <<EOF
{"duration": $((SECS + WARM + 1)), "period": 1, "intervals": 5, "warmup_periods": 1, "seed": 1,
 "capacity": $CAP,
 "workload": {"outstanding": 8, "timeout_ms": 10000},
 "servers": [{"name": "s1", "address": "127.0.0.1:1"}, {"name": "s2", "address": "127.0.0.1:2"},
             {"name": "s3", "address": "127.0.0.1:3"}, {"name": "s4", "address": "127.0.0.1:4"}],
 "buckets": [
   {"name": "one", "weight": 1, "reservation": 0, "servers": ["s1"]},
   {"name": "two", "weight": 2, "reservation": 0, "servers": ["s1", "s2"]},
   {"name": "four", "weight": 1, "reservation": 0, "servers": ["s1", "s2", "s3", "s4"]},
   {"name": "res", "reservation": 200, "limit": 200, "servers": ["s1", "s2", "s3", "s4"]}]}
EOF
python3 -c 'import json,sys
s=json.load(open(sys.argv[1]))
print(json.dumps({"buckets":[{k:v for k,v in b.items() if k in ("name","reservation","limit","weight")}
                             for b in s["buckets"]]}))' "$T/scen.json" >"$T/b.json"

metrics_url() { sed -n 's/.*metrics on \(http:[^ ]*\).*/\1/p' "$1" | head -1; }

# scrape K: every node's /metrics into $T/$tag.N.K.prom, all at once.
scrape() {
  sp=""
  for n in 1 2 3 4; do
    eval "curl -sf \"\$U$n\" >\"\$T/\$tag.\$n.\$1.prom\" &"
    sp="$sp $!"
  done
  for p in $sp; do wait "$p"; done
}
# run TAG on|off: the controller with --shares TAG's setting, four nodes,
# the load; scrapes every node after WARM s and SECS s later into
# $T/TAG.N.{0,1}.prom, then stops them all.
run() {
  tag=$1; sh=$2
  next_port; CP=$PORT
  spawn "$T/$tag.ctrl.log" "$BIN/bqos-controller" --buckets "$T/b.json" \
    --listen "tcp://127.0.0.1:$CP" --admin "ipc://$T/$tag.admin" --period 1s --intervals 5 \
    --capacity $CAP --shares "$sh" --log-level debug
  cpid=$SPAWNED
  wait_port "$CP" 10 || { echo "controller did not start"; cat "$T/$tag.ctrl.log"; exit 1; }
  pids="$cpid"; sargs=""
  for n in 1 2 3 4; do
    start_nbd_node "$T/$tag.node$n.log" "$BIN/bqos-nbd-node" --name s$n \
      --backend "file:$T/vol.img" --outstanding 2 --io-time-us 5000 --config "$T/b.json" \
      --controller "tcp://127.0.0.1:$CP" --capacity $CAP --metrics-listen 127.0.0.1:0
    pids="$pids $PID"; sargs="$sargs -s s$n=127.0.0.1:$PORT"
  done
  for n in 1 2 3 4; do
    wait_for '[ -n "$(metrics_url "$T/$tag.node$n.log")" ]' 5
    eval "U$n=\$(metrics_url \"\$T/\$tag.node\$n.log\")"
  done
  wait_for 'grep -q "computed, 4 nodes up" "$T/$tag.ctrl.log"' 5
  # shellcheck disable=SC2086
  "$BIN/bqos-nbd-load" $sargs -q -o "$T/$tag" "$T/scen.json" >"$T/$tag.table" 2>"$T/$tag.load.log" &
  lp=$!
  sleep $WARM
  scrape 0
  sleep $SECS
  scrape 1
  wait $lp; lrc=$?
  # shellcheck disable=SC2086
  stop_pid $pids
  check "$tag: the load ran (rc $lrc)" '[ $lrc -eq 0 ]'
}
# judge TAG: shares_nodes_check.py on TAG's scrapes; its rc in JRC.
judge() {
  python3 "$HERE/shares_nodes_check.py" "$T/scen.json" $SECS "$TOL" \
    "$T/$1.1.0.prom" "$T/$1.1.1.prom" "$T/$1.2.0.prom" "$T/$1.2.1.prom" \
    "$T/$1.3.0.prom" "$T/$1.3.1.prom" "$T/$1.4.0.prom" "$T/$1.4.1.prom" >"$T/$1.out" 2>&1
  JRC=$?
  sed "s/^/# $1: /" "$T/$1.out"
}

run on on
judge on
check "--shares on: every bucket's spare within 10% of the weighted max-min ideal, R met" \
  '[ $JRC -eq 0 ]'

run off off
judge off
check "--shares off: per-node round robin divides by footprint (the check fails)" \
  '[ $JRC -eq 1 ] && grep -q "^one.*OFF" "$T/off.out"'

it_end 'tail -5 "$T/on.ctrl.log"; tail -5 "$T/on.node1.log"; cat "$T/on.load.log" | tail -5'
