#!/usr/bin/env python3
"""limits_client.py - the raw-socket clients of it_node_limits.sh (issue 18 defects 7, 9).

Usage:
  limits_client.py per-ip NODE_PORT              --max-conns-per-ip 3
  limits_client.py idle NODE_PORT MEMCACHED_PID  --idle-timeout 800ms and a stalled backend
  limits_client.py flood NODE_PORT N             N connections against a low descriptor limit
Prints "ok" and exits 0 when every assertion holds.
"""
import os, signal, sys, time
import node_client
from node_client import ask, conn_from, held_reply
what, port = sys.argv[1], int(sys.argv[2])

def conn(src="127.0.0.1"):
    return conn_from(port, src)

def closed(s):
    return node_client.closed(s, 0.2)

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
    buf = held_reply(busy, "busy connection")
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
