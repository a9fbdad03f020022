#!/bin/sh
# it_node_faults.sh - bqos-node under faults: half command and stall, over-long line, binary protocol, clients vanishing with queued requests, 1,000 concurrent connections, backend memcached going away and coming back; the node keeps serving and exits 0.
set -u
NAME=it_node_faults
. "$(dirname "$0")/node_lib.sh"

start_mc
mc_port=$MC_PORT
start_node "$tmp/node.log" --policy rr
run() { # run WHAT ARGS...: one node_client.py step, indented output
  if python3 "$HERE/node_client.py" "$@" >"$tmp/step.out" 2>&1; then ok "$1 ${3:-}"; else bad "$1 ${3:-}"; fi
  sed 's/^/     /' "$tmp/step.out"
}
run faults "$NODE_PORT"
run conns "$NODE_PORT" 1000
grep -q "closing client 127.0.0.1: it speaks memcached's binary protocol" "$tmp/node.log" &&
  ok "binary-protocol client logged" || bad "binary-protocol client not logged"

kill -TERM "$MC_PID"; wait "$MC_PID" 2>/dev/null
run backend "$NODE_PORT" down
start_mc "$mc_port"
run backend "$NODE_PORT" up

kill -0 "$NODE_PID" 2>/dev/null && ok "node alive" || bad "node died"
stop_node
[ "$NODE_RC" = 0 ] && ok "exit 0 after SIGTERM" || { bad "exit $NODE_RC after SIGTERM"; tail -20 "$tmp/node.log"; }

# Defect 6: flush_all behind a request waiting for tokens, then 1.1 MB pipelined.
start_tokens_node "$tmp/node-flush.log"
run flushpipe "$NODE_PORT" "$NODE_PID" "$TOKENS"
stop_node

# Defect 8: a client that never reads is bounded and closed (logged); RSS bound in MB.
start_node "$tmp/node-hog.log" --policy rr --conn-reply-limit 32m --reply-memory 64m
run hog "$NODE_PORT" "$NODE_PID" 250
grep -q "closing a client that holds" "$tmp/node-hog.log" && ok "hog close logged" || bad "hog close not logged"
stop_node

# Buckets from --config; unknown buckets rejected.
printf '{"buckets":[{"name":"red","weight":2,"reservation":10},{"name":"blue","reservation":0}]}\n' >"$tmp/b.json"
start_node "$tmp/node-rej.log" --config "$tmp/b.json" --default-bucket reject
got=$(exchange "$NODE_PORT" 'set red:a 0 0 1\r\nx\r\nset green:a 0 0 1\r\nx\r\nget nosep\r\nget blue:a red:a\r\n')
want="b'STORED\\r\\nSERVER_ERROR unknown bucket\\r\\nSERVER_ERROR unknown bucket\\r\\nVALUE red:a 0 1\\r\\nx\\r\\nEND\\r\\n'"
[ "$got" = "$want" ] && ok "--config buckets served, others rejected" || bad "--default-bucket reject: got $got"
stop_node

# Clients on a Unix socket (--memcached-listen unix:PATH); its file goes with the node.
"$NODE" --name it --memcached-listen "unix:$tmp/node.sock" --backend "memcached://127.0.0.1:$MC_PORT" \
  --policy rr </dev/null >/dev/null 2>"$tmp/node-unix.log" &
NODE_PID=$!; NODE_LOG=$tmp/node-unix.log; LIB_PIDS="$LIB_PIDS $NODE_PID"
wait_for '[ -S "$tmp/node.sock" ]' 5
got=$(exchange "$tmp/node.sock" 'set red:u 0 0 2\r\nhi\r\nget red:u\r\n')
want="b'STORED\\r\\nVALUE red:u 0 2\\r\\nhi\\r\\nEND\\r\\n'"
[ "$got" = "$want" ] && ok "clients on a Unix socket" || { bad "Unix socket: got $got"; cat "$tmp/node-unix.log"; }
stop_node
[ "$NODE_RC" = 0 ] && [ ! -e "$tmp/node.sock" ] && ok "Unix socket file removed at exit" ||
  bad "Unix socket: exit $NODE_RC, file $(ls "$tmp/node.sock" 2>&1)"

printf '{"buckets":[{"name":"red",}]}\n' >"$tmp/bad.json"
"$NODE" --memcached-listen 127.0.0.1:0 --backend "memcached://127.0.0.1:$MC_PORT" --config "$tmp/bad.json" 2>"$tmp/bad.log"
rc=$?
[ $rc = 1 ] && grep -q 'bad.json:1:' "$tmp/bad.log" && ok "bad --config: exit 1 with line:column" || { bad "bad --config: exit $rc"; cat "$tmp/bad.log"; }
"$NODE" --policy nonsense 2>/dev/null; rc=$?
[ $rc = 2 ] && ok "bad option value: exit 2" || bad "bad option value: exit $rc"
"$NODE" --capacity lots 2>"$tmp/opt.log"; rc=$?
[ $rc = 2 ] && grep -q "bad value 'lots' for --capacity" "$tmp/opt.log" && ok "bad --capacity: exit 2, names the option" ||
  { bad "bad --capacity: exit $rc"; cat "$tmp/opt.log"; }
finish
