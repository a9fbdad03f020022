#!/usr/bin/env python3
"""ha_observer.py - a raw protocol-v3 node (a pyzmq DEALER) for the controller failover and hostile-peer tests: it says hello to one controller (optionally claiming a clock), keeps itself alive with heartbeats and logs every message the controller sends it.

Usage:
  ha_observer.py ENDPOINT NAME OUTFILE [SECONDS [PERIOD ORIGIN]]

Each message from the controller is appended to OUTFILE as one line
"WALLCLOCK TYPE EPOCH PERIOD" (0 when absent), flushed at once.  With
PERIOD and ORIGIN its hellos claim a clock of 1 s periods (5 intervals) in
which period PERIOD began at ORIGIN (wall-clock seconds), so that nodes
given the same PERIOD and ORIGIN agree (it_hostile_ctrl.sh).  Until a
welcome arrives the observer says hello every 0.3 s (a standby registers
it but answers nothing); it says hello again after an unknown_node error.
A heartbeat goes out every 50 ms so that the controller keeps it up.
Runs SECONDS (default 60) or until SIGTERM.
"""
import json
import signal
import sys
import time

import zmq

V = 3


def main():
    ep, name, out = sys.argv[1], sys.argv[2], sys.argv[3]
    secs = float(sys.argv[4]) if len(sys.argv) > 4 else 60.0
    clock = (int(sys.argv[5]), float(sys.argv[6])) if len(sys.argv) > 6 else None
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    ctx = zmq.Context()
    s = ctx.socket(zmq.DEALER)
    s.setsockopt(zmq.IDENTITY, name.encode())
    s.setsockopt(zmq.LINGER, 0)
    s.setsockopt(zmq.RECONNECT_IVL, 100)
    s.connect(ep)
    seq = [0]

    def send(msg, frames=()):
        seq[0] += 1
        msg.update({"v": V, "node": name, "seq": seq[0]})
        try:
            s.send_multipart([json.dumps(msg).encode()] + list(frames), zmq.NOBLOCK)
        except zmq.Again:
            pass

    def hello():
        msg = {"type": "hello", "capacity": 1000, "table": 1, "names": 0}
        if clock:
            el = max(0.0, time.time() - clock[1])
            msg.update({"period": clock[0] + int(el), "interval": int((el % 1.0) * 5),
                        "intervals": 5, "period_ms": 1000,
                        "remaining_ms": max(1, min(1000, int(1000 - (el % 1.0) * 1000)))})
        send(msg, [b""])

    f = open(out, "a", buffering=1)
    welcomed = False
    end = time.time() + secs
    next_hello = 0.0
    next_hb = 0.0
    while not stop and time.time() < end:
        now = time.time()
        if not welcomed and now >= next_hello:
            hello()
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
                f.write("%.6f %s %d %d\n" % (time.time(), t, int(h.get("epoch", 0)),
                                             int(h.get("period", 0))))
                if t in ("welcome", "tokens", "heartbeat"):
                    welcomed = True
                elif t == "error" and h.get("code") == "unknown_node":
                    welcomed = False
                    next_hello = 0.0
    f.close()
    s.close()
    ctx.term()


if __name__ == "__main__":
    main()
