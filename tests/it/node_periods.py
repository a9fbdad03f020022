#!/usr/bin/env python3
"""node_periods.py - polls a bqos-node's memcached `stats buckets` and `stats` every 30 ms and prints, for every node period it saw end, "PERIOD SERVED STATE TIME": the IOs of one bucket served in that period (all classes), the node's controller state and the wall-clock time the period was seen ending.

Usage:
  node_periods.py PORT SECONDS [BUCKET]   (BUCKET default "lim")

The periods are the node's own (its per-period counters), which follow the
controller's: a token-limited node serves a period's allowance at once, so
windows not aligned with its periods could see two allowances in one second.
"""
import socket
import sys
import time


def main():
    port, secs = int(sys.argv[1]), float(sys.argv[2])
    bucket = sys.argv[3] if len(sys.argv) > 3 else "lim"
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    end = time.time() + secs
    last, top, state = None, 0, ""
    while time.time() < end:
        s.sendall(b"stats buckets\r\nstats\r\n")
        buf = b""
        while buf.count(b"END\r\n") < 2:
            d = s.recv(65536)
            if not d:
                return
            buf += d
        st = dict(l.split(" ", 2)[1:] for l in buf.decode().split("\r\n") if l.count(" ") >= 2)
        p = st.get("bqos_ctl_period")
        n = sum(int(st.get(bucket + ":served_" + c, 0)) for c in "rlo")
        if p != last:
            if last is not None:
                print(last, top, state, "%.3f" % time.time(), flush=True)
            last, top = p, 0
        top = max(top, n)
        state = st.get("bqos_ctl_state", "")
        time.sleep(0.03)


if __name__ == "__main__":
    main()
