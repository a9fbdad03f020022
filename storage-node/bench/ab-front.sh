#!/bin/sh
# ab-front.sh - A/B of two builds of bqos-node's memcached front (policy rr, 20 bqos-mcload connections, 4 s a run): the node's CPU microseconds per request (user + system from /proc) and ops/s, interleaved rounds.
# Usage: ab-front.sh BIN_A BIN_B [ROUNDS] [NODE_ARGS]   (the client is $MCLOAD, default bin/bqos-mcload)
set -u
. "$(dirname "$0")/../../scripts/lib.sh"
A=$1; B=$2; ROUNDS=${3:-3}; NODE_ARGS=${4:-}
T=$(mktemp -d /tmp/ab-front.XXXXXX)
trap 'cleanup; rm -rf "$T"' EXIT
next_port; mc=$PORT
start_memcached "$mc" "$T/mc.log" || exit 1
tck=$(getconf CLK_TCK)
r=1
while [ "$r" -le "$ROUNDS" ]; do
  for which in A B; do
    eval bin=\$$which
    next_port; nd=$PORT
    # shellcheck disable=SC2086
    spawn "$T/node.log" "$bin/bqos-node" --name ab --memcached-listen "127.0.0.1:$nd" \
      --backend "memcached://127.0.0.1:$mc" --policy rr --log-level warn $NODE_ARGS
    np=$SPAWNED
    wait_port "$nd" 10 || exit 1
    t0=$(awk '{print $14 + $15}' "/proc/$np/stat")
    res=$("${MCLOAD:-bin/bqos-mcload}" --server "127.0.0.1:$nd" --conns 20 --seconds 4)
    t1=$(awk '{print $14 + $15}' "/proc/$np/stat")
    stop_pid "$np"
    ops=$(echo "$res" | tr ' ' '\n' | sed -n 's/^ops=//p')
    echo "$which round=$r $res node_us_per_op=$(echo "$t0 $t1 $ops $tck" | awk '{ printf "%.2f", ($2 - $1) / $4 * 1e6 / $3 }')"
  done
  r=$((r + 1))
done
