#!/bin/sh
# it_conn_flood.sh - issue 26 case 6: idle connections from a few addresses fill --max-conns; new clients from another address are still served (the longest-idle connection of the address holding the most is closed for each), a connection with a request at the backend is never closed for one, and idle connections time out by default.
set -u
NAME=it_conn_flood
. "$(dirname "$0")/node_lib.sh"

start_mc
CL=$tmp/flood.py
cat >"$CL" <<'PY'
import os, signal, socket, sys, time
what, port = sys.argv[1], int(sys.argv[2])

def conn(src):
    s = socket.socket()
    s.settimeout(5)
    s.bind((src, 0))
    s.connect(("127.0.0.1", port))
    return s

def ask(s, req=b"version\r\n", until=b"\r\n"):
    """The reply to req, or what came before EOF followed by "<EOF>"."""
    try:
        s.sendall(req)
        buf = b""
        while not buf.endswith(until):
            b = s.recv(4096)
            if not b:
                return buf + b"<EOF>"
            buf += b
        return buf
    except OSError as e:
        return b"<%s>" % type(e).__name__.encode()

def closed(s):
    """True if the node closed s (EOF or reset now), without waiting."""
    s.setblocking(False)
    try:
        return s.recv(1) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True
    finally:
        s.settimeout(5)

def stat(s, name):
    for line in ask(s, b"stats\r\n", b"END\r\n").decode().split("\r\n"):
        if line.startswith("STAT %s " % name):
            return int(line.split()[2])
    return None

if what == "flood":  # --max-conns argv[3], flooders' shares argv[4] (e.g. 68,66,66)
    limit, shares = int(sys.argv[3]), [int(x) for x in sys.argv[4].split(",")]
    flood = []
    for i, n in enumerate(shares):
        flood += [conn("127.0.0.%d" % (2 + i)) for _ in range(n)]
    assert len(flood) == limit
    got = [ask(s) for s in flood]
    assert all(g.startswith(b"VERSION") for g in got), "flood admitted: %r" % got[:3]
    time.sleep(0.2)
    new, served = [], 0
    for _ in range(20):
        s = conn("127.0.0.5")
        r = ask(s)
        served += r.startswith(b"VERSION")
        new.append(s)
    print("new clients served: %d of 20" % served)
    gone = sum(closed(s) for s in flood)
    left = [s for s in flood if not closed(s)]
    print("flood connections closed: %d" % gone)
    assert served == 20, "20 new clients from 127.0.0.5 served"
    assert gone == 20, "one flood connection closed per new client"
    again = [ask(s) for s in left]
    assert all(g.startswith(b"VERSION") for g in again), "the other flood connections still served"
    ev = stat(new[0], "bqos_conns_evicted")
    assert ev == 20, "stats: bqos_conns_evicted %r" % ev
    r = ask(conn("127.0.0.2"))
    assert b"Too many" in r or r.endswith(b"<EOF>"), \
        "a flooding address takes no slot back: %r" % r
elif what == "busy":  # --max-conns 20 --workers 2; argv[3]: memcached's pid
    mc = int(sys.argv[3])
    busy = [conn("127.0.0.2") for _ in range(10)]  # the most: --max-conns-per-ip 10
    idle = [conn("127.0.0.3") for _ in range(8)] + [conn("127.0.0.4") for _ in range(2)]
    for s in busy + idle:
        assert ask(s).startswith(b"VERSION")
    ask(busy[0], b"set k 0 0 2\r\nhi\r\n")
    os.kill(mc, signal.SIGSTOP)  # every get of 127.0.0.2 stays at the backend
    try:
        for s in busy:
            s.sendall(b"get k\r\n")
        time.sleep(0.2)
        r = ask(conn("127.0.0.5"))
        print("new client while 127.0.0.2's are busy: %r" % r)
        assert b"Too many" in r or r.endswith(b"<EOF>"), "refused, got %r" % r
        assert not any(closed(s) for s in busy), "no busy connection closed"
    finally:
        os.kill(mc, signal.SIGCONT)
    for s in busy:
        buf = b""
        while not buf.endswith(b"END\r\n"):
            b = s.recv(4096)
            assert b, "a busy connection lost its reply: %r" % buf
            buf += b
        assert buf == b"VALUE k 0 2\r\nhi\r\nEND\r\n", buf
    s = conn("127.0.0.5")  # now idle: one of them makes room
    assert ask(s).startswith(b"VERSION"), "served once they are idle"
    assert sum(closed(b) for b in busy) == 1 and not any(closed(i) for i in idle)
print("ok")
PY
run() { # run WHAT ARGS...: one step, indented output
  if python3 "$CL" "$@" >"$tmp/step.out" 2>&1; then ok "$1"; else bad "$1"; fi
  sed 's/^/     /' "$tmp/step.out"
}

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
