#!/bin/sh
# it_node_order.sh - bqos-node keeps per-connection reply order across buckets: 600 pipelined set/get/multi-get over three buckets (rr and tokens), and a bucket held back by tokens (--tokens-file + SIGUSR1) delays later replies on its connection only; queued IOs of a vanished client leave the queue; SIGTERM answers queued requests.
set -u
NAME=it_node_order
. "$(dirname "$0")/node_lib.sh"

start_mc
for pol in rr tokens batched; do
  case $pol in
    batched) start_node "$tmp/node-$pol.log" --policy rr --outstanding 48 --workers 2 --batch 16 ;;
    *) start_node "$tmp/node-$pol.log" --policy $pol ;;
  esac
  if python3 "$HERE/node_client.py" order "$NODE_PORT" >"$tmp/order-$pol.out" 2>&1; then
    ok "pipelined order across buckets ($pol)"
  else
    bad "pipelined order across buckets ($pol)"; cat "$tmp/order-$pol.out"
  fi
  stop_node
done

start_tokens_node "$tmp/node-tok.log"
run_step "token hold, order, client gone, SIGTERM with queued request" \
  python3 "$HERE/node_client.py" tokens "$NODE_PORT" "$NODE_PID" "$TOKENS"
wait "$NODE_PID"; rc=$?
check_log
[ "$rc" = 0 ] && ok "exit 0 after SIGTERM with a queued request" || { bad "exit $rc after SIGTERM"; cat "$tmp/node-tok.log"; }
finish
