#!/bin/sh
# it_node_auth.sh - bqos-node --auth-file against a real memcached -Y: the same login sequences (commands before the login, wrong password, unknown user, bad formats, a good login, a second user, noreply, a junk line) sent to both and the replies compared byte for byte; auth file errors (file:line, mode) refuse to start; SIGHUP re-reads the users; failures counted by reason in stats and /metrics; pymemcache logs in when installed.  Then the fail-closed default: a --config without `default` refuses unknown prefixes (CLIENT_ERROR, counted by reason), one with `default` serves them there, no table under --policy rr serves every prefix.
set -u
NAME=it_node_auth
. "$(dirname "$0")/node_lib.sh"

start_mc
printf 'alice:secret\nbob:pw2\n' >"$tmp/auth"
chmod 600 "$tmp/auth"
next_port; YPORT=$PORT
spawn "$tmp/mcY.log" memcached -u "$(id -un)" -l 127.0.0.1 -p "$YPORT" -U 0 -m 64 -Y "$tmp/auth"
wait_port "$YPORT" 10 || { echo "$NAME: memcached -Y did not start"; cat "$tmp/mcY.log"; exit 1; }
next_port; MPORT=$PORT
start_node "$tmp/node.log" --policy rr --auth-file "$tmp/auth" --metrics-listen "127.0.0.1:$MPORT" --log-level debug

# steps PORT STEP...: one connection; each STEP (\r \n escapes) is sent alone
# and what came back is printed as a bytes literal, one a line: all that
# came within 0.3 s, or, once something came, until 50 ms pass quiet
# (memcached 1.6 answers only the last of pipelined commands before a login,
# so every step is its own round trip).
steps() {
  python3 - "$@" <<'PY'
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), 5)
for step in sys.argv[2:]:
    s.sendall(step.encode().decode("unicode_escape").encode("latin1"))
    out, end = b"", time.time() + 0.3
    while time.time() < end:
        s.settimeout(max(0.01, end - time.time()))
        try:
            b = s.recv(65536)
        except socket.timeout:
            break
        except ConnectionResetError:
            out += b"<RESET>"
            break
        if not b:
            out += b"<EOF>"
            break
        out += b
        end = min(end, time.time() + 0.05)
    print(repr(out))
PY
}

# same LABEL STEP...: the replies of memcached -Y and of the node, byte for byte.
same() {
  label=$1; shift
  steps "$YPORT" "$@" >"$tmp/y.out" 2>&1
  steps "$NODE_PORT" "$@" >"$tmp/n.out" 2>&1
  if cmp -s "$tmp/y.out" "$tmp/n.out"; then
    ok "same as memcached -Y: $label ($(wc -l <"$tmp/n.out") replies)"
  else
    bad "differs from memcached -Y: $label"; diff "$tmp/y.out" "$tmp/n.out" | sed 's/^/     /'
  fi
}

same "commands before the login" 'get k:a\r\n' 'version\r\n' 'stats\r\n' 'delete k:a\r\n' '\r\n' 'quit\r\n'
same "not a login" 'SET x 0 0 3\r\n' 'set x 0 0\r\n' 'set x 0 0 -1\r\n' 'set x 0 0 1a\r\n' 'get k:a\r\n'
same "wrong password, unknown user, then ok" 'set x 0 0 11\r\nalice wrong\r\n' 'get k:a\r\n' \
  'set x 0 0 10\r\ncarol pass\r\n' 'set x 0 0 12\r\nalice secret\r\n' 'set k:a 0 0 2\r\nhi\r\n' \
  'get k:a\r\n' 'delete k:a\r\n' 'get k:a\r\n'
same "bad token format, bad termination" 'set x 0 0 5\r\nalice\r\n' 'set x 0 0 12\r\nalice secretXX' \
  'get k:a\r\n'
same "login split across packets" 'set x 0 0 12\r\n' 'alice ' 'secret\r\n' 'get k:b\r\n'
same "second user, noreply, extra words" 'set x 0 0 7 noreply\r\nbob pw2\r\n' 'get k:b\r\n'
same "extra words and spaces" 'set  y  1 2 17\r\nalice  secret xyz\r\n' 'get k:b\r\n'
same "pipelined after the login" 'set x 0 0 12\r\nalice secret\r\nset k:c 0 0 1\r\nz\r\nget k:c\r\n' \
  'set x 0 0 11\r\nalice wrong\r\nget x\r\ndelete x\r\n'
same "a login line without newline past 2048 bytes closes" "$(python3 -c 'print("a"*3000, end="")')"
same "a shorter one waits for its newline" "$(python3 -c 'print("a"*1000, end="")')" 'get k:a\r\n'

# Counted by reason in stats and /metrics; the identity in the debug log.
steps "$NODE_PORT" 'set x 0 0 12\r\nalice secret\r\nstats\r\n' >"$tmp/stats.out"
for want in 'auth_cmds' 'auth_errors' 'bqos_auth_failures_unauthenticated' 'bqos_auth_failures_bad_password' \
  'bqos_auth_failures_unknown_user' 'bqos_auth_failures_bad_format'; do
  grep -q "STAT $want [1-9]" "$tmp/stats.out" && ok "stats: $want counted" || bad "stats: no $want > 0"
done
curl -s "http://127.0.0.1:$MPORT/metrics" >"$tmp/metrics.out"
for r in unauthenticated unknown_user bad_password bad_format; do
  grep -q "^bqos_node_auth_failures_total{node=\"it\",reason=\"$r\"} [1-9]" "$tmp/metrics.out" &&
    ok "/metrics: auth failures by reason $r" || bad "/metrics: no bqos_node_auth_failures_total $r"
done
grep -q "logged in as 'alice'" "$tmp/node.log" && ok "the identity is logged (debug)" || bad "no login log line"

# pymemcache (Debian python3-pymemcache) logs in as memcached expects.
PYMC=
for p in python3 /usr/bin/python3; do
  if "$p" -c 'import pymemcache' 2>/dev/null; then PYMC=$p; break; fi
done
if [ -n "$PYMC" ]; then
  "$PYMC" - "$NODE_PORT" "$YPORT" >"$tmp/pymc.out" 2>&1 <<'PY'
import sys
from pymemcache.client.base import Client
from pymemcache.exceptions import MemcacheClientError
out = []
for port in sys.argv[1:]:
    c = Client(("127.0.0.1", int(port)))
    try:
        c.get("k:p")
        out.append("no error before login")
    except MemcacheClientError as e:
        out.append("refused: %s" % e)
    c.close()
    c = Client(("127.0.0.1", int(port)))
    out.append(str(c.set("x", b"alice secret", noreply=False)))  # the login
    c.set("k:p", b"v1", noreply=False)
    out.append(repr(c.get("k:p")))
    c.close()
print(out)
assert out[:3] == out[3:], out
assert out[1:3] == ["True", "b'v1'"], out
PY
  [ $? -eq 0 ] && ok "pymemcache: refused before the login, works after, as with memcached ($(cat "$tmp/pymc.out"))" ||
    { bad "pymemcache"; cat "$tmp/pymc.out"; }
else
  echo "     pymemcache not installed (python3-pymemcache, scripts/deps.sh): skipped"
fi

# SIGHUP re-reads the users; a logged-in connection stays so.
printf 'alice:secret\ncarol:pass3\n' >"$tmp/auth"
kill -HUP "$NODE_PID"
wait_for 'grep -q "re-read: 2 users" "$tmp/node.log"' 5
got=$(steps "$NODE_PORT" 'set x 0 0 11\r\ncarol pass3\r\n' 'set x 0 0 7\r\nbob pw2\r\n' | tr '\n' ' ')
[ "$got" = "b'STORED\\r\\n' b'STORED\\r\\n' " ] && ok "SIGHUP: carol added (bob's is a plain set once logged in)" ||
  bad "SIGHUP: got $got"
got=$(steps "$NODE_PORT" 'set x 0 0 7\r\nbob pw2\r\n' | tr '\n' ' ')
[ "$got" = "b'CLIENT_ERROR authentication failure\\r\\n' " ] && ok "SIGHUP: bob removed" || bad "SIGHUP bob: $got"
printf 'alice:secret\nbroken\n' >"$tmp/auth"
kill -HUP "$NODE_PID"
wait_for 'grep -q "not reloaded" "$tmp/node.log"' 5
grep -q "auth:2:1: expected user:password" "$tmp/node.log" && ok "SIGHUP: a bad file is logged with its line, the old users stay" ||
  bad "SIGHUP: no file:line error"
got=$(steps "$NODE_PORT" 'set x 0 0 11\r\ncarol pass3\r\n' | tr '\n' ' ')
[ "$got" = "b'STORED\\r\\n' " ] && ok "SIGHUP: old users kept" || bad "SIGHUP kept: $got"
stop_node
[ "$NODE_RC" = 0 ] && ok "exit 0" || bad "exit $NODE_RC"

# Auth files that do not load refuse to start: a bad line (file:line), a mode.
printf 'alice:secret\n\n' >"$tmp/auth2"; chmod 600 "$tmp/auth2"
"$NODE" --memcached-listen 127.0.0.1:0 --auth-file "$tmp/auth2" >/dev/null 2>"$tmp/e1"; rc=$?
check "a bad auth file: exit 2, file:line (rc $rc: $(cat "$tmp/e1"))" \
  '[ $rc -eq 2 ] && grep -q "auth2:2:1: empty line" "$tmp/e1"'
"$NODE" --check --auth-file "$tmp/auth2" >/dev/null 2>"$tmp/e3"; rc=$?
check "--check: the auth file too (rc $rc)" '[ $rc -eq 1 ] && grep -q "auth2:2:1: empty line" "$tmp/e3"'
printf 'alice:secret\n' >"$tmp/auth3"; chmod 644 "$tmp/auth3"
"$NODE" --memcached-listen 127.0.0.1:0 --auth-file "$tmp/auth3" >/dev/null 2>"$tmp/e2"; rc=$?
check "an auth file readable by others: exit 2 ($(cat "$tmp/e2"))" '[ $rc -eq 2 ] && grep -q "chmod 600" "$tmp/e2"'

# ---- fail closed: unconfigured traffic --------------------------------------------------------
printf '{"buckets":[{"name":"red","reservation":10,"limit":1000}]}\n' >"$tmp/nodef.json"
printf '{"buckets":[{"name":"red","reservation":10,"limit":1000},{"name":"default","reservation":0,"limit":100}]}\n' >"$tmp/def.json"
REQ='set red:a 0 0 1\r\nx\r\nset evil:a 0 0 1\r\nx\r\nget nosep\r\nget red:a evil:a\r\n'
start_node "$tmp/closed.log" --config "$tmp/nodef.json" --metrics-listen "127.0.0.1:0"
got=$(exchange "$NODE_PORT" "$REQ")
E="CLIENT_ERROR unknown bucket: no default bucket configured"
want="b'STORED\\r\\n$E\\r\\n$E\\r\\n$E\\r\\n'"
[ "$got" = "$want" ] && ok "--config without default: unknown prefixes refused ($got)" || bad "closed: got $got"
grep -q 'has no `default` bucket' "$tmp/closed.log" && ok "the refusal is announced at start" || bad "no start warning"
murl=$(sed -n 's|.*metrics on \(http://[^ ]*\).*|\1|p' "$tmp/closed.log" | head -1)
curl -s "$murl" >"$tmp/m2.out"
grep -q '^bqos_node_requests_refused_total{node="it",reason="unconfigured"} 3' "$tmp/m2.out" &&
  ok "/metrics: refusals counted by reason unconfigured" || { bad "/metrics refusals"; grep refused "$tmp/m2.out"; }
steps "$NODE_PORT" 'stats\r\n' | grep -q 'bqos_bucket_table closed' && ok "stats: bucket table closed" || bad "stats table"
stop_node

start_node "$tmp/def.log" --config "$tmp/def.json"
got=$(exchange "$NODE_PORT" "$REQ")
want="b'STORED\\r\\nSTORED\\r\\nEND\\r\\nVALUE red:a 0 1\\r\\nx\\r\\nVALUE evil:a 0 1\\r\\nx\\r\\nEND\\r\\n'"
[ "$got" = "$want" ] && ok "--config with default: unknown prefixes served" || bad "default: got $got"
steps "$NODE_PORT" 'stats buckets\r\n' | grep -q 'STAT default:arrivals 3' &&
  ok "... in bucket default" || bad "default arrivals"
stop_node

# A controller's table without `default` closes the node too (only --controller).
start_controller "$tmp/nodef.json" 10000 "$tmp"
start_node "$tmp/ctl.log" --controller "$CTRL_EP"
wait_for 'grep -q "no .default. bucket: keys of buckets it does not list are refused" "$tmp/ctl.log"' 10
got=$(exchange "$NODE_PORT" "$REQ")
want_closed="b'STORED\\r\\n$E\\r\\n$E\\r\\n$E\\r\\n'"
[ "$got" = "$want_closed" ] && ok "controller's table without default: unknown prefixes refused" ||
  { bad "controller closed: got $got"; tail -5 "$tmp/ctl.log"; }
stop_node
stop_controller

start_node "$tmp/rr.log" --policy rr
got=$(exchange "$NODE_PORT" "$REQ")
[ "$got" = "$want" ] && ok "no table, --policy rr: every prefix served, as memcached would" || bad "rr: got $got"
stop_node
finish
