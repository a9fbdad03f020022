#!/bin/sh
# it_node_meta.sh - memcached clients of today through bqos-node: gat/gats and the meta protocol (tests/data/node_proto/meta.txt) answer byte for byte as a real memcached does (CAS values masked); meta requests are classified by their (decoded) key, wait for their bucket's tokens and keep request order.
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
# The same with worker threads and small batches: meta requests and gats
# pipelined beside the batch's one multi-key gets.
start_node "$tmp/node-pool.log" --policy rr --workers 2 --outstanding 8 --batch 4
if python3 "$HERE/node_client.py" diff "$ref_port" "$NODE_PORT" "$HERE/../data/node_proto/meta.txt" >"$tmp/diff-pool.out" 2>&1; then
  ok "replies identical to memcached (worker pool)"
else
  bad "replies differ from memcached (worker pool)"; cat "$tmp/diff-pool.out"
fi
stop_node
[ "$NODE_RC" = 0 ] && ok "clean exit after SIGTERM (pool)" || bad "exit status $NODE_RC after SIGTERM (pool)"

# stats settings|conns|items|slabs|sizes|cachedump answered by the node,
# no key listed; memcdump runs and lists no key of any bucket.
start_node "$tmp/node-stats.log" --policy rr --max-conns 77
if python3 "$HERE/node_client.py" statsargs "$NODE_PORT" 77 >"$tmp/stats.out" 2>&1; then
  ok "stats settings|conns|items|slabs|cachedump: the node's, no keys"
else
  bad "stats settings|conns|items|slabs|cachedump"
fi
sed 's/^/     /' "$tmp/stats.out"
if command -v memcdump >/dev/null 2>&1; then
  memcdump --servers="127.0.0.1:$NODE_PORT" >"$tmp/dump.out" 2>&1; rc=$?
  [ $rc = 0 ] && [ ! -s "$tmp/dump.out" ] && ok "memcdump exits 0 listing no key" ||
    { bad "memcdump: exit $rc"; cat "$tmp/dump.out"; }
  memcdump --servers="127.0.0.1:$MC_PORT" | grep -q "red:secret" &&
    ok "(memcached itself lists red:secret to anyone)" || bad "memcached did not list red:secret"
fi
stop_node
[ "$NODE_RC" = 0 ] && ok "clean exit after SIGTERM (stats)" || bad "exit status $NODE_RC after SIGTERM (stats)"

# Meta requests in their buckets: classification (base64 keys decoded),
# token waits, request order, counters.
echo '{}' >"$tmp/tokens.json"
start_node "$tmp/node-tok.log" --policy tokens --tokens-file "$tmp/tokens.json"
if python3 "$HERE/node_client.py" metabuckets "$NODE_PORT" "$NODE_PID" "$tmp/tokens.json" >"$tmp/tok.out" 2>&1; then
  ok "meta requests classified, scheduled and ordered like classic ones"
else
  bad "meta requests classified, scheduled and ordered like classic ones"
fi
sed 's/^/     /' "$tmp/tok.out"
stop_node
[ "$NODE_RC" = 0 ] && ok "clean exit after SIGTERM (tokens)" || bad "exit status $NODE_RC after SIGTERM (tokens)"
finish
