#!/usr/bin/env python3
"""node_periods.py - polls a bqos-node's memcached `stats buckets` and `stats` every 30 ms and prints, for every node period it saw end, "PERIOD SERVED STATE TIME": the IOs of one bucket (or of several, summed) served in that period (all classes), the node's controller state and the wall-clock time the period was seen ending.

Usage:
  node_periods.py PORT SECONDS [BUCKET[,BUCKET...]] [TRACE]   (BUCKET default "lim")

With several buckets (comma-separated) SERVED is their sum and each
bucket's own count follows TIME, in the order given.  With TRACE, every
poll also appends "TIME PERIOD N..." to that file (the wall-clock time of
the answer, the node's period and each bucket's served count so far in it):
what a sliding window over several nodes is computed from
(it_nested_six.sh).

The periods are the node's own (its per-period counters), which follow the
controller's: a token-limited node serves a period's allowance at once, so
windows not aligned with its periods could see two allowances in one second.
"""
import socket
import sys
import time


def main():
    port, secs = int(sys.argv[1]), float(sys.argv[2])
    buckets = (sys.argv[3] if len(sys.argv) > 3 else "lim").split(",")
    trace = open(sys.argv[4], "w") if len(sys.argv) > 4 else None
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    end = time.time() + secs
    last, top, state = None, [0] * len(buckets), ""
    while time.time() < end:
        s.sendall(b"stats buckets\r\nstats\r\n")
        buf = b""
        while buf.count(b"END\r\n") < 2:
            d = s.recv(65536)
            if not d:
                return
            buf += d
        now = time.time()
        st = dict(l.split(" ", 2)[1:] for l in buf.decode().split("\r\n") if l.count(" ") >= 2)
        p = st.get("bqos_ctl_period")
        n = [sum(int(st.get(b + ":served_" + c, 0)) for c in "rlo") for b in buckets]
        if p != last:
            if last is not None:
                extra = "" if len(buckets) == 1 else " " + " ".join(map(str, top))
                print(last, sum(top), state, "%.3f%s" % (now, extra), flush=True)
            last, top = p, [0] * len(buckets)
        top = [max(a, b) for a, b in zip(top, n)]
        state = st.get("bqos_ctl_state", "")
        if trace:
            trace.write("%.4f %s %s\n" % (now, p, " ".join(map(str, n))))
        time.sleep(0.03)
    if trace:
        trace.close()


if __name__ == "__main__":
    main()
