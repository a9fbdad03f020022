#!/usr/bin/env python3
"""template_load.py - it_template.sh's client: logs in as USER on each node given and keeps
DEPTH gets in flight per connection for SECONDS; prints the most replies any 1 s window
(from SKIP s on, stepped by 0.1 s) saw summed over the nodes, and per node, as JSON."""
import json
import selectors
import socket
import sys
import time


def main():
    user, password, seconds, skip, depth = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
    ports = [int(p) for p in sys.argv[6:]]
    sel = selectors.DefaultSelector()
    login = ("set x 0 0 %d\r\n%s %s\r\n" % (len(user) + len(password) + 1, user, password)).encode()
    req = b"get k:x\r\n"
    times = {p: [] for p in ports}
    conns = []
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
            st = {"port": p, "buf": b""}
            sel.register(s, selectors.EVENT_READ, st)
            conns.append(s)
    t0 = time.monotonic()
    end = t0 + seconds
    while True:
        now = time.monotonic()
        if now >= end:
            break
        for key, _ in sel.select(timeout=end - now):
            st = key.data
            d = key.fileobj.recv(65536)
            if not d:
                print("connection closed by %d" % st["port"], file=sys.stderr)
                return 1
            st["buf"] += d
            n = st["buf"].count(b"END\r\n")
            if n:
                if b"ERROR" in st["buf"]:
                    print("error from %d: %r" % (st["port"], st["buf"][:200]), file=sys.stderr)
                    return 1
                st["buf"] = st["buf"][st["buf"].rfind(b"END\r\n") + 5:]
                at = time.monotonic() - t0
                times[st["port"]].extend([at] * n)
                key.fileobj.sendall(req * n)
    for s in conns:
        s.close()
    worst, per, at = 0, {}, 0.0
    t = skip
    while t + 1.0 <= seconds + 1e-9:
        counts = {p: sum(1 for x in times[p] if t <= x < t + 1.0) for p in ports}
        total = sum(counts.values())
        if total > worst:
            worst, per, at = total, counts, t
        t += 0.1
    tenths = [sum(1 for p in ports for x in times[p] if i / 10 <= x < (i + 1) / 10)
              for i in range(int(seconds * 10))]
    print(json.dumps({"worst": worst, "worst_at": round(at, 1), "tenths": tenths, "per_node": {str(k): v for k, v in per.items()},
                      "served": {str(p): len(times[p]) for p in ports}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
