#!/bin/sh
# bench-ha.sh - what failover through etcd costs and takes: the controller's CPU per round alone and with --etcd (leader and standby, simulated nodes), and the time from kill -9 of the leader to the new epoch's first message and first tokens at a node, over several kills.
#
# Usage: controller/bench/bench-ha.sh [SECONDS] [KILLS]   (BIN=bin; NODES=16,
# BUCKETS=2000 for the CPU rows; TTL=1 lease seconds, TAKEOVER (the
# controllers' --takeover-after, default theirs) and PERIOD (--period,
# default 1s; 5 intervals) for the kills; SECONDS=0 skips the CPU rows).
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
if [ "$SECS" != 0 ]; then
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
fi

echo "== takeover after kill -9 of the leader, lease $TTL s, $KILLS kills, ${TAKEOVER:-default} --takeover-after"
# A raw protocol node (tests/it/ha_observer.py) on each controller logs
# every message with its epoch: the takeover time is from the kill to the
# first message of a higher epoch at the survivor's node (and to its first
# tokens).
PY=python3
$PY -c "import zmq" 2>/dev/null || PY=/usr/bin/python3
OBS="$HERE/../../tests/it/ha_observer.py"
next_port; L1=$PORT; next_port; A1=$PORT; next_port; L2=$PORT; next_port; A2=$PORT
start() { # start I LISTEN ADMIN
  spawn "$T/k$1.$(date +%s%N).log" "$BIN/bqos-controller" --buckets "$T/b.json" \
    --listen "tcp://127.0.0.1:$2" --admin "tcp://127.0.0.1:$3" --etcd "$ETCD" --id "k$1" \
    --cluster kill --lease-ttl "$TTL" ${TAKEOVER:+--takeover-after "$TAKEOVER"} \
    ${PERIOD:+--period "$PERIOD"}
  eval "KP$1=\$SPAWNED"
}
st() { "$BIN/bqos-ctl" --timeout 500 --endpoint "tcp://127.0.0.1:$1" --json status 2>/dev/null; }
leads() { st "$1" | grep -q '"leader": true'; }
epoch() { st "$1" | sed -n 's/^ *"epoch": *\([0-9]*\).*/\1/p' | head -1; }
start 1 "$L1" "$A1"; wait_for "leads $A1" 10
start 2 "$L2" "$A2"; sleep 1
spawn "$T/o1.err" "$PY" "$OBS" "tcp://127.0.0.1:$L1" o1 "$T/o1.log" 100000
spawn "$T/o2.err" "$PY" "$OBS" "tcp://127.0.0.1:$L2" o2 "$T/o2.log" 100000
sleep 1
i=0
while [ $i -lt "$KILLS" ]; do
  if leads "$A1"; then dead=1; live=2; LA=$A2; else dead=2; live=1; LA=$A1; fi
  e0=$(epoch "$LA")
  eval "kp=\$KP$dead"
  sleep 0.$(( $(od -An -N1 -tu1 /dev/urandom | tr -d ' ') % 9 + 1 )) # anywhere in an interval
  t0=$(date +%s.%N)
  kill -9 "$kp"
  wait_for "awk -v e=$e0 -v t=$t0 '\$1 > t && \$3 > e && \$2 == \"tokens\" { f = 1 } END { exit !f }' \"$T/o$live.log\"" 5
  awk -v e="$e0" -v t="$t0" -v la="$(cut -d' ' -f1 /proc/loadavg)" '$1 > t && $3 > e {
      if (!m) { m = $1 - t; mt = $2 }
      if ($2 == "tokens") { k = $1 - t; exit } }
    END { printf "kill -9 -> first message of the new epoch at a node: %.3f s (%s), first tokens %.3f s (load %s)\n", m, mt, k, la }' "$T/o$live.log"
  if [ $dead = 1 ]; then start 1 "$L1" "$A1"; else start 2 "$L2" "$A2"; fi
  sleep 1.5
  i=$((i + 1))
done
