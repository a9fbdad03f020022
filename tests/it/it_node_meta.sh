#!/bin/sh
# it_node_meta.sh - memcached clients of today through bqos-node: gat/gats and the meta protocol (tests/data/node_proto/meta.txt) answer byte for byte as a real memcached does (CAS values masked).
set -u
NAME=it_node_meta
. "$(dirname "$0")/node_lib.sh"

start_mc
ref=$MC_PORT
start_mc; ref_port=$MC_PORT
MC_PORT=$ref
start_node "$tmp/node.log" --policy rr
if python3 "$HERE/node_client.py" diff "$ref_port" "$NODE_PORT" "$HERE/../data/node_proto/meta.txt" >"$tmp/diff.out" 2>&1; then
  ok "replies identical to memcached ($(grep -c -v '^#' "$HERE/../data/node_proto/meta.txt") scripts)"
else
  bad "replies differ from memcached"; cat "$tmp/diff.out"
fi
stop_node
[ "$NODE_RC" = 0 ] && ok "clean exit after SIGTERM" || bad "exit status $NODE_RC after SIGTERM"
finish
