#!/bin/sh
# it_node_meta.sh - memcached clients of today through bqos-node: gat/gats and the meta protocol (tests/data/node_proto/meta.txt) answer byte for byte as a real memcached does (CAS values masked), also through a unix: backend; meta requests are classified by their (decoded) key, wait for their bucket's tokens and keep request order.
set -u
NAME=it_node_meta
. "$(dirname "$0")/node_lib.sh"

meta=$HERE/../data/node_proto/meta.txt
# Each differential step deals its scripts over 4 node/memcached pairs
# (diff_nodes): every script waits for quiet, the pairs wait at once.
diff_nodes 4 "$tmp/node.log" --policy rr
diff_step "$(grep -c -v '^#' "$meta") scripts" "$meta" "$tmp/diff.out"
stop_diff_nodes
# The same with worker threads and small batches: meta requests and gats
# pipelined beside the batch's one multi-key gets.
diff_nodes 4 "$tmp/node-pool.log" --policy rr --workers 2 --outstanding 8 --batch 4
diff_step "worker pool" "$meta" "$tmp/diff-pool.out"
stop_diff_nodes pool

# A unix: backend: memcached on a Unix socket only (no TCP port to go
# around the node), the same differential script through it (4 such
# pairs; the last one's backend then goes away).
for i in 1 2 3 4; do
  sock=$tmp/mc$i.sock
  spawn "$tmp/memcached-unix$i.log" memcached -u "$(id -un)" -s "$sock" -a 0700 -U 0 -m 64 -t 2
  MCU_PID=$SPAWNED
  wait_for '[ -S "$sock" ]' 10
  start_ref_mc
  start_node "$tmp/node-unix.log.$i" --policy rr --backend "unix:$sock"
  grep -q "backend unix:$sock," "$NODE_LOG" && ok "node logs its unix: backend ($i)" || bad "no unix: backend in the log ($i)"
  diff_pair_add
done
diff_step "unix: backend" "$meta" "$tmp/diff-unix.out"
kill -TERM "$MCU_PID"; wait "$MCU_PID" 2>/dev/null
# (the first request finds the old connection closed, the next one's
# connect fails: the backend is down)
got=$(python3 -c "
import socket
for i in range(2):
    s = socket.create_connection(('127.0.0.1', $NODE_PORT)); s.sendall(b'mg u:k v\r\n'); s.settimeout(3)
    print(s.recv(200))")
case $got in *"SERVER_ERROR backend"*) ok "unix: backend gone: SERVER_ERROR backend";; *) bad "unix: backend gone: $got";; esac
grep -q "backend unix:$sock down" "$NODE_LOG" && ok "unix: backend down logged" || { bad "unix: backend down not logged"; cat "$NODE_LOG"; }
stop_diff_nodes unix

# stats settings|conns|items|slabs|sizes|cachedump answered by the node,
# no key listed; memcdump runs and lists no key of any bucket.
start_node "$tmp/node-stats.log" --policy rr --max-conns 77
if python3 "$HERE/node_client.py" statsargs "$NODE_PORT" 77 >"$tmp/stats.out" 2>&1; then
  ok "stats settings|conns|items|slabs|cachedump: the node's, no keys"
else
  bad "stats settings|conns|items|slabs|cachedump"
fi
sed 's/^/     /' "$tmp/stats.out"
# pymemcache (Debian's python3-pymemcache, for Debian's python3): a
# client of today sees a memcached, and stats items/slabs are empty.
if /usr/bin/python3 -c "import pymemcache" 2>/dev/null; then
  if /usr/bin/python3 - "$NODE_PORT" >"$tmp/pymc.out" 2>&1 <<'PY'
import sys
from pymemcache.client.base import Client
c = Client(("127.0.0.1", int(sys.argv[1])), connect_timeout=5, timeout=5)
assert c.set("py:k", b"v1", noreply=False)
assert c.get("py:k") == b"v1"
v, cas = c.gets("py:k")
assert v == b"v1" and c.cas("py:k", b"v2", cas) and c.get("py:k") == b"v2"
assert c.get_many(["py:k", "py:none"]) == {"py:k": b"v2"}
assert c.touch("py:k", 100, noreply=False)
assert c.incr("py:n", 1) is None and c.add("py:n", b"5", noreply=False) and c.incr("py:n", 2) == 7
assert c.delete("py:k", noreply=False) and c.get("py:k") is None
s = c.stats("settings")
assert s[b"maxconns"] == 77 and s[b"item_size_max"] == 1048576, s
assert c.stats("items") == {} and c.stats("slabs") == {}
PY
  then ok "pymemcache: set/get/gets/cas/get_many/touch/incr/delete, stats settings|items|slabs"
  else bad "pymemcache"; cat "$tmp/pymc.out"
  fi
fi
if command -v memcdump >/dev/null 2>&1; then
  # (memcached's own dump leaves out items stored in the last second or so:
  # statsargs stored red:secret just before; the node is asked once memcached
  # lists it)
  wait_for 'memcdump --servers="127.0.0.1:$MC_PORT" | grep -q "red:secret"' 5 &&
    ok "(memcached itself lists red:secret to anyone)" || bad "memcached did not list red:secret"
  memcdump --servers="127.0.0.1:$NODE_PORT" >"$tmp/dump.out" 2>&1; rc=$?
  [ $rc = 0 ] && [ ! -s "$tmp/dump.out" ] && ok "memcdump exits 0 listing no key" ||
    { bad "memcdump: exit $rc"; cat "$tmp/dump.out"; }
fi
stop_node_clean stats

# Meta requests in their buckets: classification (base64 keys decoded),
# token waits, request order, counters.
start_tokens_node "$tmp/node-tok.log"
run_step "meta requests classified, scheduled and ordered like classic ones" \
  python3 "$HERE/node_client.py" metabuckets "$NODE_PORT" "$NODE_PID" "$TOKENS"
stop_node_clean tokens
finish
