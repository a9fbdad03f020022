#!/bin/sh
# it_who.sh - bqos-ctl who BUCKET (issue 27): a real memcached behind a bqos-node with --auth-file users alice, bob and carol and a controller whose rules put alice and bob in bucket shared and carol in bucket solo; alice (from 127.0.0.2) and bob (from 127.0.0.3) write to shared, carol (127.0.0.4) to solo; `bqos-ctl who shared` lists alice and bob with their addresses and request counts, not carol; `who solo` lists carol; --json says the same; a bucket nobody used lists nobody.
set -u
NAME=it_who
. "$(dirname "$0")/node_lib.sh"

start_mc
printf 'alice:pa\nbob:pb\ncarol:pc\n' >"$tmp/auth"
chmod 600 "$tmp/auth"
cat >"$tmp/b.json" <<'JSON'
{"buckets":[{"name":"shared","reservation":10,"limit":5000},{"name":"solo","reservation":10},
            {"name":"idle","reservation":0}],
 "rules":[{"user":"alice","bucket":"shared"},{"user":"bob","bucket":"shared"},
          {"user":"carol","bucket":"solo"}]}
JSON
start_controller "$tmp/b.json" 100000 "$tmp" || { bad "controller did not start"; cat "$tmp/controller.log"; finish; }
start_node "$tmp/node.log" --controller "$CTRL_EP" --auth-file "$tmp/auth"
wait_for 'grep -q "from the controller: 3 rules" "$tmp/node.log"' 10 ||
  { bad "no rules at the node"; tail -5 "$tmp/node.log"; finish; }

# as USER PASS FROM N: N sets of USER's keys from address FROM, logged in
as() {
  python3 - "$NODE_PORT" "$@" <<'PY'
import socket, sys
port, user, pw, src, n = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
s = socket.socket()
s.bind((src, 0))
s.settimeout(5)
s.connect(("127.0.0.1", port))
cred = ("%s %s" % (user, pw)).encode()
req = b"set x 0 0 %d\r\n%s\r\n" % (len(cred), cred)
req += b"".join(b"set %s:k%d 0 0 1\r\nv\r\n" % (user.encode(), i) for i in range(n))
s.sendall(req)
buf = b""
while buf.count(b"STORED\r\n") < n + 1:
    b = s.recv(4096)
    if not b:
        break
    buf += b
assert buf == b"STORED\r\n" * (n + 1), buf
PY
}
as alice pa 127.0.0.2 5 && as bob pb 127.0.0.3 7 && as carol pc 127.0.0.4 3 &&
  ok "alice, bob and carol served" || bad "clients"

CTL="$BIN/bqos-ctl --endpoint $ADMIN_EP"
# the node sends a new identity at its next second, counts every 5 s
wait_for '$CTL who shared 2>/dev/null | grep -q "user:bob  *127\.0\.0\.3  *7 " &&
  $CTL who shared 2>/dev/null | grep -q "user:alice  *127\.0\.0\.2  *5 " &&
  $CTL who solo 2>/dev/null | grep -q "user:carol  *127\.0\.0\.4  *3 "' 8
$CTL who shared >"$tmp/who.out" 2>&1; rc=$?
cat "$tmp/who.out" | sed 's/^/     /'
[ $rc -eq 0 ] && grep -q '^it  *user:alice  *127\.0\.0\.2  *5 ' "$tmp/who.out" &&
  grep -q '^it  *user:bob  *127\.0\.0\.3  *7 ' "$tmp/who.out" &&
  ok "who shared: alice from 127.0.0.2 (5 requests) and bob from 127.0.0.3 (7)" || bad "who shared (rc $rc)"
grep -q carol "$tmp/who.out" && bad "carol listed in shared" || ok "carol (bucket solo) not listed in shared"
$CTL who solo 2>&1 | grep -q '^it  *user:carol  *127\.0\.0\.4  *3 ' && ok "who solo: carol" || bad "who solo: $($CTL who solo 2>&1)"
$CTL --json who shared >"$tmp/who.json" 2>&1
python3 - "$tmp/who.json" <<'PY' && ok "who --json: the same, with first and last seen" || bad "who --json: $(cat "$tmp/who.json")"
import json, sys
d = json.load(open(sys.argv[1]))
got = sorted((e["identity"], e["addr"], e["requests"]) for e in d["identities"])
assert got == [("user:alice", "127.0.0.2", 5), ("user:bob", "127.0.0.3", 7)], got
assert all(0 <= e["last_seen_s"] <= e["first_seen_s"] + 0.01 < 30 for e in d["identities"])
assert d["bucket"] == "shared" and d["other"] == []
PY
$CTL who idle 2>&1 | grep -q "no identity active in bucket idle" && ok "who idle: nobody" || bad "who idle: $($CTL who idle 2>&1)"
finish
