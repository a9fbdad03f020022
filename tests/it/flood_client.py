#!/usr/bin/env python3
"""flood_client.py - the raw-socket clients of it_conn_flood.sh (issue 26 case 6).

Usage:
  flood_client.py flood NODE_PORT MAX_CONNS SHARES   idle flooders fill --max-conns; newcomers evict
  flood_client.py busy NODE_PORT MEMCACHED_PID       connections with a request at the backend stay
Prints "ok" and exits 0 when every assertion holds.
"""
import os, signal, sys, time
from node_client import ask, closed, conn_from, held_reply
what, port = sys.argv[1], int(sys.argv[2])

def conn(src):
    return conn_from(port, src)

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
        buf = held_reply(s, "a busy connection")
        assert buf == b"VALUE k 0 2\r\nhi\r\nEND\r\n", buf
    s = conn("127.0.0.5")  # now idle: one of them makes room
    assert ask(s).startswith(b"VERSION"), "served once they are idle"
    assert sum(closed(b) for b in busy) == 1 and not any(closed(i) for i in idle)
print("ok")
