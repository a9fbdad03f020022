#!/bin/sh
# it_node_limits.sh - bqos-node connection limits (issue 18 defects 7, 9): --max-conns-per-ip refuses one address's surplus and not another's; --idle-timeout closes idle connections but never one with a request at a stalled backend (answered once it resumes); --max-conns is lowered to the descriptor limit, and a flood beyond it neither kills nor floods the log.
set -u
NAME=it_node_limits
. "$(dirname "$0")/node_lib.sh"

start_mc
run() { py_step "$HERE/limits_client.py" "$@"; }

start_node "$tmp/ip.log" --policy rr --max-conns-per-ip 3
run per-ip "$NODE_PORT"
grep -q "max-conns-per-ip 3 open" "$tmp/ip.log" && ok "per-address refusal logged" || bad "no per-address warning"
stop_node

start_node "$tmp/idle.log" --policy rr --workers 2 --idle-timeout 800ms
run idle "$NODE_PORT" "$MC_PID"
kill -0 "$NODE_PID" 2>/dev/null && ok "node alive" || bad "node died"
stop_node
[ "$NODE_RC" = 0 ] && ok "exit 0 after SIGTERM" || { bad "exit $NODE_RC"; tail -20 "$tmp/idle.log"; }

# A descriptor limit of 200: --max-conns 4096 is lowered at start; 400
# connections neither kill the node nor flood its log.
REAL_NODE=$NODE
printf '#!/bin/sh\nulimit -n 200\nexec "%s" "$@"\n' "$REAL_NODE" >"$tmp/lim.sh"
chmod +x "$tmp/lim.sh"
NODE=$tmp/lim.sh
start_node "$tmp/fd.log" --policy rr --max-conns 4096
NODE=$REAL_NODE
grep -q -- "--max-conns 4096 lowered to 136" "$tmp/fd.log" && ok "--max-conns lowered to the descriptor limit" ||
  { bad "no --max-conns warning"; cat "$tmp/fd.log"; }
run flood "$NODE_PORT" 400
lines=$(wc -l <"$tmp/fd.log")
[ "$lines" -lt 50 ] && ok "log stays short ($lines lines)" || { bad "log flooded: $lines lines"; tail -5 "$tmp/fd.log"; }
stop_node
[ "$NODE_RC" = 0 ] && ok "exit 0 after SIGTERM" || bad "exit $NODE_RC"
finish
