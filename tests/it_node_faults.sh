#!/bin/sh
# it_node_faults.sh - bqos-node under faults: half command and stall, over-long line, binary protocol, clients vanishing with queued requests, 1,000 concurrent connections, backend memcached going away and coming back; the node keeps serving and exits 0.
set -u
NAME=it_node_faults
. "$(dirname "$0")/node_lib.sh"

start_memcached
mc_port=$MC_PORT
start_node "$tmp/node.log" --policy rr
run() { # run WHAT ARGS...: one node_client.py step, indented output
  if python3 "$HERE/node_client.py" "$@" >"$tmp/step.out" 2>&1; then ok "$1 ${3:-}"; else bad "$1 ${3:-}"; fi
  sed 's/^/     /' "$tmp/step.out"
}
run faults "$NODE_PORT"
run conns "$NODE_PORT" 1000

kill -TERM "$MC_PID"; wait "$MC_PID" 2>/dev/null
run backend "$NODE_PORT" down
start_memcached "$mc_port"
run backend "$NODE_PORT" up

kill -0 "$NODE_PID" 2>/dev/null && ok "node alive" || bad "node died"
stop_node
[ "$NODE_RC" = 0 ] && ok "exit 0 after SIGTERM" || { bad "exit $NODE_RC after SIGTERM"; tail -20 "$tmp/node.log"; }
finish
