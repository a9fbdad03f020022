#!/usr/bin/env python3
"""tenant_load.py - it_tenants.sh's client: several tenants at once, each logged in as its user
on every node given (two connections per node), keeping DEPTH requests in flight per connection
for SECONDS.  A stream is USER/PASS/OP/KEY/DEPTH (OP get or set).  Prints, per stream, the most
replies any 1 s window (from SKIP s on, stepped by 0.1 s) saw summed over the nodes, the replies
in all and per node (by port), and the refusals, as JSON.

Usage: tenant_load.py SECONDS SKIP PORTS(comma-separated) STREAM...
"""
import bisect
import json
import selectors
import socket
import sys
import time


def main():
    seconds, skip = float(sys.argv[1]), float(sys.argv[2])
    ports = [int(p) for p in sys.argv[3].split(",")]
    sel = selectors.DefaultSelector()
    streams = []
    for spec in sys.argv[4:]:
        user, pw, op, key, depth = spec.split("/")
        depth = int(depth)
        if op == "get":
            req, end = ("get %s\r\n" % key).encode(), b"END\r\n"
        else:
            req, end = ("set %s 0 0 1\r\nv\r\n" % key).encode(), b"STORED\r\n"
        st = {"name": "%s-%s" % (user, op), "times": [], "refused": 0, "by_port": dict.fromkeys(ports, 0)}
        streams.append(st)
        login = ("set x 0 0 %d\r\n%s %s\r\n" % (len(user) + len(pw) + 1, user, pw)).encode()
        for p in ports:
            for _ in range(2):
                s = socket.create_connection(("127.0.0.1", p), 5)
                s.sendall(login)
                buf = b""
                while b"\r\n" not in buf:
                    buf += s.recv(100)
                if not buf.startswith(b"STORED"):
                    print("login refused on %d: %r" % (p, buf), file=sys.stderr)
                    return 1
                s.setblocking(False)
                s.sendall(req * depth)
                sel.register(s, selectors.EVENT_READ, {"st": st, "buf": b"", "req": req, "end": end, "port": p})
    t0 = time.monotonic()
    stop = t0 + seconds
    while True:
        now = time.monotonic()
        if now >= stop:
            break
        for key, _ in sel.select(timeout=stop - now):
            c = key.data
            d = key.fileobj.recv(65536)
            if not d:
                print("connection closed (%s)" % c["st"]["name"], file=sys.stderr)
                return 1
            c["buf"] += d
            n = c["buf"].count(c["end"])
            e = c["buf"].count(b"ERROR")
            if n or e:
                c["st"]["refused"] += e
                cut = max(c["buf"].rfind(c["end"]) + len(c["end"]), c["buf"].rfind(b"\r\n") + 2)
                c["buf"] = c["buf"][cut:]
                at = time.monotonic() - t0
                c["st"]["times"].extend([at] * n)
                c["st"]["by_port"][c["port"]] += n
                key.fileobj.sendall(c["req"] * (n + e))
    out = {}
    for st in streams:
        worst, t = 0, skip
        while t + 1.0 <= seconds + 1e-9:
            ts = st["times"]  # in order of arrival: sorted
            worst = max(worst, bisect.bisect_left(ts, t + 1.0) - bisect.bisect_left(ts, t))
            t += 0.1
        out[st["name"]] = {"worst": worst, "served": len(st["times"]), "refused": st["refused"],
                           "by_port": {str(p): v for p, v in st["by_port"].items()}}
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
