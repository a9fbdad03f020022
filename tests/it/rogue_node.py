#!/usr/bin/env python3
"""rogue_node.py - a raw protocol-v3 node (a pyzmq DEALER) that says hello with the clock it is told to claim, for the hostile-peer tests (issue 18).

Usage:
  rogue_node.py ENDPOINT NAME PERIOD ORIGIN OUTFILE [SECONDS]

It claims a clock of 1 s periods in which period PERIOD began at ORIGIN
(wall-clock seconds), so that nodes given the same PERIOD and ORIGIN
agree.  It says hello with that clock's timing {period, interval, intervals
5, period_ms 1000, remaining_ms} (again every 0.3 s until a
welcome arrives, and after an unknown_node error), then keeps itself up
with heartbeats every 50 ms.  Every message the controller sends is
appended to OUTFILE as "TYPE PERIOD" (period 0 when absent).  Runs SECONDS
(default 30) or until SIGTERM.
"""
import json
import signal
import sys
import time

import zmq


def main():
    ep, name, period, rem, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
    secs = float(sys.argv[6]) if len(sys.argv) > 6 else 30.0
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    ctx = zmq.Context()
    s = ctx.socket(zmq.DEALER)
    s.setsockopt(zmq.IDENTITY, name.encode())
    s.setsockopt(zmq.LINGER, 0)
    s.connect(ep)
    seq = [0]

    def send(msg, frames=()):
        seq[0] += 1
        msg.update({"v": 3, "node": name, "seq": seq[0]})
        try:
            s.send_multipart([json.dumps(msg).encode()] + list(frames), zmq.NOBLOCK)
        except zmq.Again:
            pass

    f = open(out, "a", buffering=1)
    welcomed, next_hello, next_hb = False, 0.0, 0.0
    end = time.time() + secs
    while not stop and time.time() < end:
        now = time.time()
        if not welcomed and now >= next_hello:
            el = max(0.0, now - rem)
            left = max(1, min(1000, int(1000 - (el % 1.0) * 1000)))
            send({"type": "hello", "capacity": 1000, "table": 1, "names": 0,
                  "period": period + int(el), "interval": int((el % 1.0) * 5), "intervals": 5,
                  "period_ms": 1000, "remaining_ms": left}, [b""])
            next_hello = now + 0.3
        if welcomed and now >= next_hb:
            send({"type": "heartbeat"})
            next_hb = now + 0.05
        if s.poll(20):
            while True:
                try:
                    frames = s.recv_multipart(zmq.NOBLOCK)
                except zmq.Again:
                    break
                try:
                    h = json.loads(frames[0])
                except ValueError:
                    continue
                t = h.get("type", "?")
                f.write("%s %d\n" % (t, int(h.get("period", 0))))
                if t == "welcome":
                    welcomed = True
                elif t == "error" and h.get("code") == "unknown_node":
                    welcomed, next_hello = False, 0.0
    f.close()
    s.close()
    ctx.term()


if __name__ == "__main__":
    main()
