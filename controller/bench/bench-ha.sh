#!/bin/sh
# bench-ha.sh - what failover through etcd costs and takes: the controller's CPU per round alone and with --etcd (leader and standby, simulated nodes), and the time from kill -9 of the leader to the standby leading, over several kills.
#
# Usage: controller/bench/bench-ha.sh [SECONDS] [KILLS]   (BIN=bin; NODES=16,
# BUCKETS=2000 for the CPU rows; TTL=1 lease seconds for the kills).
# Prints one line per row; the figures are in docs/performance.md.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../../scripts/lib.sh"
BIN=${BIN:-bin}
SECS=${1:-10}
KILLS=${2:-5}
NODES=${NODES:-16}
BUCKETS=${BUCKETS:-2000}
TTL=${TTL:-1}
etcd_scratch bench-ha
jget() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1" 2>/dev/null; }

start_etcd b "$T/etcd.log" || { echo "etcd did not start"; exit 1; }
"$BIN/bqos-ctrl-bench" --nodes "$NODES" --buckets "$BUCKETS" --write-buckets "$T/b.json" || exit 1

# ctl_run NAME EXTRA...: a controller with simulated nodes for SECS; prints
# its CPU per round and, with etcd, the mean poll time.
ctl_run() {
  name=$1; shift
  next_port; L=$PORT; next_port; A=$PORT
  cp "$T/b.json" "$T/b-$name.json"
  spawn "$T/$name.log" "$BIN/bqos-controller" --buckets "$T/b-$name.json" \
    --listen "tcp://127.0.0.1:$L" --admin "tcp://127.0.0.1:$A" --capacity 20000 "$@"
  pid=$SPAWNED
  wait_port "$L" 10
  sleep 1
  "$BIN/bqos-ctrl-bench" --endpoint "tcp://127.0.0.1:$L" --admin "tcp://127.0.0.1:$A" \
    --nodes "$NODES" --buckets "$BUCKETS" --seconds "$SECS" --quiet >"$T/$name.json"
  "$BIN/bqos-ctl" --endpoint "tcp://127.0.0.1:$A" --json status >"$T/$name.st.json"
  printf "%-28s cpu ms/round %s  rounds %s  leader %s  etcd poll ms %s (polls %s)\n" "$name" \
    "$(jget "$T/$name.st.json" "round(d['timing']['cpu_ms_per_round'], 3)")" \
    "$(jget "$T/$name.st.json" "d['timing']['rounds']")" \
    "$(jget "$T/$name.st.json" "d['leader']")" \
    "$(jget "$T/$name.st.json" "round(d.get('ha', {}).get('poll_ms_mean', 0), 3)")" \
    "$(jget "$T/$name.st.json" "d.get('ha', {}).get('polls', '-')")"
  stop_pid "$pid"
}
echo "== CPU per round, $NODES simulated nodes x $BUCKETS buckets, ${SECS} s each"
[ -n "${ONLY_LEADER:-}" ] || ctl_run alone
ctl_run etcd-leader --etcd "$ETCD" --id lead --cluster cpu1
# a standby: another controller leads the cluster (no nodes on it)
next_port; L0=$PORT; next_port; A0=$PORT
spawn "$T/holder.log" "$BIN/bqos-controller" --buckets "$T/b.json" --listen "tcp://127.0.0.1:$L0" \
  --admin "tcp://127.0.0.1:$A0" --etcd "$ETCD" --id holder --cluster cpu2
HOLDER=$SPAWNED
sleep 1
ctl_run etcd-standby --etcd "$ETCD" --id stby --cluster cpu2
stop_pid "$HOLDER"

echo "== takeover after kill -9 of the leader, lease $TTL s, $KILLS kills"
next_port; L1=$PORT; next_port; A1=$PORT; next_port; L2=$PORT; next_port; A2=$PORT
start() { # start I LISTEN ADMIN
  spawn "$T/k$1.log" "$BIN/bqos-controller" --buckets "$T/b.json" --listen "tcp://127.0.0.1:$2" \
    --admin "tcp://127.0.0.1:$3" --etcd "$ETCD" --id "k$1" --cluster kill --lease-ttl "$TTL"
  eval "KP$1=\$SPAWNED"
}
leads() { "$BIN/bqos-ctl" --timeout 500 --endpoint "tcp://127.0.0.1:$1" --json status 2>/dev/null |
  grep -q '"leader": true'; }
start 1 "$L1" "$A1"; wait_for "leads $A1" 10
start 2 "$L2" "$A2"; sleep 1
i=0
while [ $i -lt "$KILLS" ]; do
  if leads "$A1"; then dead=1; live=2; LA=$A2; else dead=2; live=1; LA=$A1; fi
  eval "kp=\$KP$dead"
  sleep 0.$(( $(od -An -N1 -tu1 /dev/urandom | tr -d ' ') % 9 + 1 )) # anywhere in an interval
  t0=$(date +%s.%N)
  kill -9 "$kp"
  n=0
  while ! leads "$LA" && [ $n -lt 200 ]; do sleep 0.02; n=$((n + 1)); done
  t1=$(date +%s.%N)
  echo "$t0 $t1" | awk '{ printf "kill -9 -> standby leads: %.3f s\n", $2 - $1 }'
  if [ $dead = 1 ]; then start 1 "$L1" "$A1"; else start 2 "$L2" "$A2"; fi
  sleep 1.5
  i=$((i + 1))
done
