#!/bin/sh
# it_conn_flood.sh - issue 26 case 6: idle connections from a few addresses fill --max-conns; new clients from another address are still served (the longest-idle connection of the address holding the most is closed for each), a connection with a request at the backend is never closed for one, and idle connections time out by default.
set -u
NAME=it_conn_flood
. "$(dirname "$0")/node_lib.sh"

start_mc
run() { py_step "$HERE/flood_client.py" "$@"; }

# The issue's case with a smaller limit: defaults but --max-conns 200 (so
# --max-conns-per-ip 100), 200 idle connections from 127.0.0.2-4.
start_node "$tmp/flood.log" --max-conns 200
run flood "$NODE_PORT" 200 68,66,66
grep -q "closed the longest-idle connection of 127.0.0.[234]" "$tmp/flood.log" &&
  ok "eviction logged" || bad "no eviction warning in the log"
lines=$(wc -l <"$tmp/flood.log")
[ "$lines" -lt 20 ] && ok "log stays short ($lines lines)" || bad "log flooded: $lines lines"
stop_node
[ "$NODE_RC" = 0 ] && ok "exit 0 after SIGTERM" || { bad "exit $NODE_RC"; tail -20 "$tmp/flood.log"; }

# Connections with a request at a stalled backend are never closed for a
# newcomer: it is refused, every reply arrives, then it is served.
start_node "$tmp/busy.log" --policy rr --max-conns 20 --workers 2
run busy "$NODE_PORT" "$MC_PID"
stop_node
[ "$NODE_RC" = 0 ] && ok "exit 0 after SIGTERM" || { bad "exit $NODE_RC"; tail -20 "$tmp/busy.log"; }

# Idle connections time out by default (300 s: too long to wait for here;
# test_conns checks the timeout itself).
"$NODE" --help 2>&1 | grep -A4 -e '--idle-timeout' | grep -q 'Default: 300' &&
  ok "--idle-timeout defaults to 300 s" || bad "--idle-timeout default is not 300 s"
finish
