#!/usr/bin/env python3
"""threads_client.py - the load of it_node_threads.sh: many memcached connections to one bqos-node, each pipelining "set B:cK 0 0 n / SEQ" then "get B:cK" pairs, for SECONDS.

Usage: threads_client.py PORT SECONDS WARMUP

Buckets: "lim" (LIMIT/s), "res" (reserved RES/s), "bulk" (no limit), 8, 4
and 16 connections, 4 pairs in flight on each.  Checks on every connection
that the replies come in request order (STORED, then VALUE SEQ / END for
the get that followed it, the value being the SEQ just set: same-key order)
and that bulk was served, one line per check ("ok - ..." or "not ok -
..."), and the requests per second of each bucket after WARMUP as the
client saw them (for the log: the limits are checked on the node's own
counters, node_periods.py).  A request is a set or a get (one IO of its
bucket).
"""
import selectors
import socket
import sys
import time

port, secs, warm = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
DEPTH = 4
plan = [("lim", 8), ("res", 4), ("bulk", 16)]
sel = selectors.DefaultSelector()
conns = []
for bucket, n in plan:
    for i in range(n):
        s = socket.create_connection(("127.0.0.1", port))
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.setblocking(False)
        c = {"s": s, "b": bucket, "key": b"%s:c%d" % (bucket.encode(), len(conns)), "seq": 0,
             "want": [], "buf": b"", "bad": None, "done": []}
        conns.append(c)
        sel.register(s, selectors.EVENT_READ, c)


def send_pair(c):
    c["seq"] += 1
    v = b"%d" % c["seq"]
    msg = b"set %s 0 0 %d\r\n%s\r\nget %s\r\n" % (c["key"], len(v), v, c["key"])
    c["s"].sendall(msg)  # small: fits the socket buffer
    c["want"].append(("set", c["seq"]))
    c["want"].append(("get", c["seq"]))


for c in conns:
    for _ in range(DEPTH):
        send_pair(c)

t0 = time.monotonic()
end = t0 + secs
while time.monotonic() < end:
    for key, _ in sel.select(timeout=0.1):
        c = key.data
        try:
            d = c["s"].recv(65536)
        except BlockingIOError:
            continue
        if not d:
            c["bad"] = c["bad"] or "closed by the node"
            sel.unregister(c["s"])
            continue
        c["buf"] += d
        while c["want"] and not c["bad"]:
            kind, seq = c["want"][0]
            b = c["buf"]
            if kind == "set":
                i = b.find(b"\r\n")
                if i < 0:
                    break
                line, c["buf"] = b[:i], b[i + 2:]
                if line != b"STORED":
                    c["bad"] = "set %d: %r" % (seq, line)
                c["want"].pop(0)
                c["done"].append(time.monotonic())
            else:
                i = b.find(b"END\r\n")
                if i < 0:
                    break
                blk, c["buf"] = b[:i], b[i + 5:]
                parts = blk.split(b"\r\n")
                if len(parts) < 2 or parts[1] != b"%d" % seq:
                    c["bad"] = "get after set %d: %r" % (seq, blk[:80])
                c["want"].pop(0)
                now = time.monotonic()
                c["done"].append(now)
                if now < end:
                    send_pair(c)

bad = [c for c in conns if c["bad"]]
print(("ok" if not bad else "not ok") +
      " - replies in request order and same-key order on all %d connections%s" %
      (len(conns), "" if not bad else ": " + "; ".join("%s %s" % (c["key"].decode(), c["bad"]) for c in bad[:3])))


def times(bucket):
    return sorted(t for c in conns if c["b"] == bucket for t in c["done"] if t >= t0 + warm)


lim, rs, bulk = times("lim"), times("res"), times("bulk")


def per_second(ts):
    out = {}
    for t in ts:
        k = int(t - t0)
        out[k] = out.get(k, 0) + 1
    return " ".join("%d" % out.get(k, 0) for k in range(int(warm), int(secs)))


# the client's view (its replies' arrival, which a busy host bunches): for
# the log only; the limits are checked on the node's own period counters
print("# client-side, per second after the warm-up: lim %s; res %s; bulk %s" %
      (per_second(lim), per_second(rs), per_second(bulk)))
print(("ok" if len(bulk) > 0 else "not ok") +
      " - bulk served: %d requests after the warm-up (%.0f/s)" % (len(bulk), len(bulk) / (secs - warm)))
