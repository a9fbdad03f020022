#!/bin/sh
# it_node_limits.sh - bqos-node connection limits (issue 18 defects 7, 9): --max-conns-per-ip refuses one address's surplus and not another's; --idle-timeout closes idle connections but never one with a request at a stalled backend (answered once it resumes); --max-conns is lowered to the descriptor limit, and a flood beyond it neither kills nor floods the log.
set -u
NAME=it_node_limits
. "$(dirname "$0")/node_lib.sh"

start_mc
CL=$tmp/limits.py
cat >"$CL" <<'PY'
import os, signal, socket, sys, time
what, port = sys.argv[1], int(sys.argv[2])

def conn(src="127.0.0.1"):
    s = socket.socket()
    s.settimeout(5)
    s.bind((src, 0))
    s.connect(("127.0.0.1", port))
    return s

def ask(s, req=b"version\r\n", until=b"\r\n"):
    s.sendall(req)
    buf = b""
    while not buf.endswith(until):
        b = s.recv(4096)
        if not b:
            return buf + b"<EOF>"
        buf += b
    return buf

def closed(s):
    s.settimeout(0.2)
    try:
        return s.recv(1) == b""
    except socket.timeout:
        return False
    except OSError:
        return True

if what == "per-ip":  # --max-conns-per-ip 3
    a = [conn() for _ in range(3)]
    assert all(ask(s).startswith(b"VERSION") for s in a), "three from one address"
    r = ask(conn())
    assert b"Too many" in r or r.endswith(b"<EOF>"), "fourth refused, got %r" % r
    assert ask(conn("127.0.0.2")).startswith(b"VERSION"), "another address served"
    a.pop().close()
    time.sleep(0.2)
    assert ask(conn()).startswith(b"VERSION"), "served again after one closed"
elif what == "idle":  # --idle-timeout 800ms; argv[3]: memcached's pid
    mc = int(sys.argv[3])
    idle, chatty, busy = conn(), conn(), conn()
    for s in (idle, chatty, busy):
        assert ask(s).startswith(b"VERSION")
    ask(busy, b"set k 0 0 2\r\nhi\r\n")
    os.kill(mc, signal.SIGSTOP)  # the backend stalls: busy's get stays in flight
    try:
        busy.sendall(b"get k\r\n")
        for _ in range(7):  # 1.75 s, below the node's 2 s backend timeout
            time.sleep(0.25)
            chatty.sendall(b"\r\n")  # bytes read: not idle (whatever the reply)
        assert closed(idle), "idle connection closed"
        assert not closed(busy), "connection with a request in flight kept"
    finally:
        os.kill(mc, signal.SIGCONT)
    busy.settimeout(5)
    buf = b""
    while not buf.endswith(b"END\r\n"):
        b = busy.recv(4096)
        assert b, "busy connection lost its reply: %r" % buf
        buf += b
    assert buf == b"VALUE k 0 2\r\nhi\r\nEND\r\n", buf
    assert not closed(chatty), "a connection that sends is not idle"
elif what == "flood":  # N connections against a node with a low descriptor limit
    n, held = int(sys.argv[3]), []
    for _ in range(n):
        try:
            held.append(conn())
        except OSError:
            break
    time.sleep(1)
    ok = conn()
    for s in held:
        s.close()
    time.sleep(0.5)
    assert ask(conn()).startswith(b"VERSION"), "served after the flood"
print("ok")
PY
run() { # run WHAT ARGS...: one step, indented output
  if python3 "$CL" "$@" >"$tmp/step.out" 2>&1; then ok "$1"; else bad "$1"; fi
  sed 's/^/     /' "$tmp/step.out"
}

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
