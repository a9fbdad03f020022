#!/usr/bin/env python3
"""rogue_flood.py - a raw protocol-v3 peer that tries to grow the controller (it_hostile_ctrl.sh, issue 18 defect 10).

Usage:
  rogue_flood.py ENDPOINT MODE ARG OUTFILE

MODE names  ARG = number of bucket names in one hello (name "rogue-names");
            the controller's answer (TYPE CODE TEXT) is written to OUTFILE.
MODE big    ARG = bytes of a names frame sent in each of 3 hellos (name
            "rogue-big", fresh connections); OUTFILE gets "sent".
MODE nodes  ARG = hellos under distinct names n0..n(ARG-1), 10 names each,
            one connection per name; OUTFILE gets how many were welcomed
            and how many refused (by error code).
MODE bad    ARG = undecodable messages sent; OUTFILE gets "sent".
MODE liar   ARG = seconds: registers as "liar" with bucket red (capacity
            1000) and reports served 10^12 and queued 10^12 for it at every
            interval (issue 18 defect 5); OUTFILE gets the reports sent.
"""
import struct
import json
import sys
import time

import zmq

V = 3


def hello(s, name, names):
    frame = b"".join(n.encode() + b"\0" for n in names)
    s.send_multipart([json.dumps({"v": V, "type": "hello", "node": name, "seq": 1,
                                  "capacity": 1000, "table": 1,
                                  "names": len(names)}).encode(), frame])


def answer(s, timeout):
    if not s.poll(timeout * 1000):
        return None
    parts = s.recv_multipart()
    return json.loads(parts[0])


def dealer(ctx, ep, ident):
    s = ctx.socket(zmq.DEALER)
    s.setsockopt(zmq.IDENTITY, ident.encode())
    s.setsockopt(zmq.LINGER, 0)
    s.connect(ep)
    return s


def main():
    ep, mode, arg, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    ctx = zmq.Context()
    with open(out, "w") as f:
        if mode == "names":
            s = dealer(ctx, ep, "rogue-names")
            hello(s, "rogue-names", ["b%d" % i for i in range(arg)])
            m = answer(s, 10)
            f.write("none\n" if m is None else "%s %s %s\n" % (m.get("type"), m.get("code"),
                                                                 m.get("text")))
        elif mode == "big":
            for k in range(3):
                s = dealer(ctx, ep, "rogue-big%d" % k)
                s.send_multipart([json.dumps({"v": V, "type": "hello", "node": "rogue-big",
                                              "seq": 1, "capacity": 1000, "table": 1,
                                              "names": 1}).encode(), b"x" * arg])
                time.sleep(0.5)
                s.close()
            f.write("sent\n")
        elif mode == "nodes":
            counts = {}
            socks = []
            for i in range(arg):
                s = dealer(ctx, ep, "n%d" % i)
                socks.append(s)
                hello(s, "n%d" % i, ["b%d" % j for j in range(10)])
            for s in socks:
                m = answer(s, 10)
                k = "none" if m is None else (m.get("type") if m.get("type") != "error"
                                              else m.get("code"))
                counts[k] = counts.get(k, 0) + 1
            f.write(" ".join("%s=%d" % kv for kv in sorted(counts.items())) + "\n")
        elif mode == "bad":
            s = dealer(ctx, ep, "rogue-bad")
            for _ in range(arg):
                s.send_multipart([b"{not json"])
            time.sleep(1)
            f.write("sent\n")
        elif mode == "liar":
            f.write("%d\n" % liar(ctx, ep, arg))
    ctx.destroy(linger=0)


def liar(ctx, ep, secs):
    s = dealer(ctx, ep, "liar")
    hello(s, "liar", ["red"])
    period, gen, sent, seq = None, 0, 0, 1
    end = time.time() + secs
    while time.time() < end:
        m = answer(s, 0.2)
        if m and "period" in m:
            period = m["period"]
        if m and m.get("type") == "welcome":
            gen = m["table"]
        if period is None or not gen:
            continue
        seq += 1
        big = 10 ** 12
        rec = struct.pack("<II9Q", 0, 0, big, big, big, big, 0, 0, 0, 0, 0)
        s.send_multipart([json.dumps({"v": V, "type": "report", "node": "liar", "seq": seq,
                                      "period": period, "interval": 0, "table": 1,
                                      "peer_table": gen, "count": 1, "completions": 0,
                                      "dispatched": 0, "busy": 0, "wide": 1}).encode(), rec])
        sent += 1
    return sent


if __name__ == "__main__":
    main()
