#!/bin/sh
# it_node_memccapable.sh - bqos-node speaks memcached's text protocol: memccapable -a passes (rr and tokens with the defaults, and with a worker pool), and replies to tests/data/node_proto/cases.txt are byte-identical to a real memcached's.
set -u
NAME=it_node_memccapable
. "$(dirname "$0")/node_lib.sh"
command -v memccapable >/dev/null 2>&1 || { echo "$NAME: memccapable not installed (scripts/deps.sh); skipped"; exit 0; }

# rr and tokens with the defaults (backend calls on the loop thread), and
# "pool": worker threads with a small batch (--workers 2).  The three at
# once, each node in front of its own memcached.
caps=""
for pol in rr tokens pool; do
  start_mc
  case $pol in
    pool) start_node "$tmp/node-$pol.log" --policy rr --workers 2 --outstanding 5 --batch 4 ;;
    *) start_node "$tmp/node-$pol.log" --policy $pol ;;
  esac
  memccapable -a -t 5 -h 127.0.0.1 -p "$NODE_PORT" >"$tmp/cap-$pol.out" 2>&1 &
  caps="$caps $pol:$NODE_PID:$!"
done
for c in $caps; do
  pol=${c%%:*} NODE_PID=${c#*:} cap_pid=${c##*:}
  NODE_PID=${NODE_PID%%:*} NODE_LOG=$tmp/node-$pol.log
  if wait "$cap_pid" && grep -q "All tests passed" "$tmp/cap-$pol.out"; then
    ok "memccapable -a ($pol)"
  else
    bad "memccapable -a ($pol)"; cat "$tmp/cap-$pol.out"
  fi
  stop_node_clean "$pol"
done

# Differential: same scripts to a second, untouched memcached and to the
# node, dealt over 4 such pairs (diff_nodes: each script waits for quiet).
cases=$HERE/../data/node_proto/cases.txt
diff_nodes 4 "$tmp/node-diff.log" --policy rr
diff_step "$(grep -c . "$cases") cases" "$cases" "$tmp/diff.out"
stop_diff_nodes diff
finish
