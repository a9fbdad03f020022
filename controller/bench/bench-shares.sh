#!/bin/sh
# bench-shares.sh - what fair shares (bqos-controller --shares on, issue 28) cost a node's request path: memcaslap against two bqos-nodes (--policy tokens, one memcached), one following a controller with --shares on and one a controller with --shares off, interleaved rounds; TPS and the node's CPU per request.
# Usage: bench-shares.sh [ROUNDS] [SECS]   (BIN=bin; NODE_ARGS: extra options for both nodes)
# memcaslap's keys have no bucket prefix: they land in the configured
# bucket "default", hungry and unlimited, so the shares node holds share
# tokens for it every round (the controller's debug log counts the rounds
# that gave some) and every step-2 turn goes through the share class.
set -u
. "$(dirname "$0")/../../scripts/lib.sh"
ROUNDS=${1:-5}; SECS=${2:-4}; BIN=${BIN:-bin}; NODE_ARGS=${NODE_ARGS:-}
T=$(mktemp -d /tmp/bench-shares.XXXXXX)
trap 'cleanup; rm -rf "$T"' EXIT
command -v memcaslap >/dev/null || { echo "bench-shares: memcaslap not installed (libmemcached-tools): skipped"; exit 0; }
tck=$(getconf CLK_TCK)
next_port; mc=$PORT
start_memcached "$mc" "$T/mc.log" || exit 1
echo '{"buckets":[{"name":"default","reservation":0},{"name":"other","reservation":0}]}' >"$T/b.json"
# setup NAME on|off: a controller with --shares on|off and a node following
# it; the node's port in $PORT_NAME, its pid in $PID_NAME.
setup() {
  nm=$1; sh=$2
  next_port; cp=$PORT
  spawn "$T/ctrl-$nm.log" "$BIN/bqos-controller" --buckets "$T/b.json" --listen "tcp://127.0.0.1:$cp" \
    --admin "ipc://$T/admin-$nm" --shares "$sh" --log-level debug
  wait_port "$cp" 10 || exit 1
  next_port; np=$PORT
  # shellcheck disable=SC2086
  spawn "$T/node-$nm.log" "$BIN/bqos-node" --name "$nm" --memcached-listen "127.0.0.1:$np" \
    --backend "memcached://127.0.0.1:$mc" --policy tokens --controller "tcp://127.0.0.1:$cp" \
    --log-level warn $NODE_ARGS
  wait_port "$np" 10 || exit 1
  eval "PORT_$nm=$np; PID_$nm=$SPAWNED"
}
setup on on
setup off off
sleep 1 # both nodes registered and holding their first tokens
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
echo "# $(nproc) cores, load average before: $(cut -d' ' -f1-3 /proc/loadavg); memcaslap -T 2 -c 50 -X 100 (90% get), ${SECS} s a run; node options: --policy tokens $NODE_ARGS"
printf '%-6s %-5s %9s %12s\n' shares round tps node_us/op
r=1
while [ "$r" -le "$ROUNDS" ]; do
  order="on off"; [ $((r % 2)) -eq 0 ] && order="off on" # neither always first
  for nm in $order; do
    eval "port=\$PORT_$nm; pid=\$PID_$nm"
    a0=$(ticks "$pid")
    memcaslap -s "127.0.0.1:$port" -T 2 -c 50 -t "${SECS}s" -X 100 -S "$((SECS + 60))s" >"$T/o" 2>&1
    a1=$(ticks "$pid")
    ops=$(sed -n 's/.*Ops: \([0-9]*\).*/\1/p' "$T/o" | tail -1)
    echo "$nm $r ${ops:-0} $((a1 - a0))" | awk -v s="$SECS" -v tck="$tck" '
      { us = $3 > 0 ? 1e6 / tck / $3 : 0
        printf "%-6s %-5s %9d %12.2f\n", $1, $2, $3 / s, $4 * us }' | tee -a "$T/all"
  done
  r=$((r + 1))
done
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
given=$(grep -c 'fair shares: [1-9][0-9]* hungry pairs.*[1-9][0-9]* given' "$T/ctrl-on.log")
echo "# rounds of the shares controller that gave share tokens: $given"
awk '{ n[$1]++; t[$1] += $3; c[$1] += $4 } END { for (k in n) printf "# mean %s: %d tps, node %.2f us/op\n", k, t[k] / n[k], c[k] / n[k] }' "$T/all" | sort
awk -v R="$ROUNDS" '{ v[$1 "." $2] = $3 }
  END { printf "# on/off TPS per round:"
        for (i = 1; i <= R; i++) {
          a = v["on." i]; b = v["off." i]
          printf " %.3f", (b > 0 ? a / b : 0)
        }
        print "" }' "$T/all"
