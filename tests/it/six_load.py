#!/usr/bin/env python3
"""six_load.py - open-loop gets of several buckets on several bqos-nodes from one process (tests/it/it_nested_six.sh).

Usage: six_load.py SECONDS STREAM...   (STREAM: BUCKET:PORT:RATE)

Each stream has its own connection and sends RATE gets per second of
missing keys of BUCKET to the node on 127.0.0.1:PORT for SECONDS, never
waiting for replies (open loop: what the node holds stays queued); one
thread reads every connection's replies.  Prints one JSON object: per
stream ("BUCKET:PORT") the gets sent and the replies read.  Then closes
the connections (the node drops what was still queued).  One process for
a dozen streams: a Python process per stream would cost the 2-core hosts
the tests run on more than the nodes measured.
"""
import json
import selectors
import socket
import sys
import threading
import time


def main():
    secs = float(sys.argv[1])
    streams = []
    for a in sys.argv[2:]:
        b, p, r = a.split(":")
        s = socket.create_connection(("127.0.0.1", int(p)), timeout=10)
        s.setblocking(False)
        streams.append({"name": "%s:%s" % (b, p), "bucket": b.encode(), "sock": s,
                        "rate": float(r), "sent": 0, "replies": 0, "buf": b""})
    sel = selectors.DefaultSelector()
    for st in streams:
        sel.register(st["sock"], selectors.EVENT_READ, st)
    stop = threading.Event()

    def reader():
        while not stop.is_set():
            for key, _ in sel.select(0.1):
                st = key.data
                try:
                    d = st["sock"].recv(65536)
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError:
                    sel.unregister(st["sock"])
                    continue
                if not d:
                    sel.unregister(st["sock"])
                    continue
                buf = st["buf"] + d
                n = buf.count(b"END\r\n")
                if n:
                    st["replies"] += n
                    buf = buf[buf.rfind(b"END\r\n") + 5:]
                st["buf"] = buf

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    start = time.monotonic()
    while True:
        el = time.monotonic() - start
        if el >= secs:
            break
        for st in streams:
            due = int(el * st["rate"])
            out = b""
            while st["sent"] < due:
                out += b"get %s:k%d\r\n" % (st["bucket"], st["sent"])
                st["sent"] += 1
            while out:  # a few short lines: the socket buffer takes them
                try:
                    out = out[st["sock"].send(out):]
                except BlockingIOError:
                    time.sleep(0.001)
        time.sleep(0.005)
    stop.set()
    t.join()
    for st in streams:
        st["sock"].close()
    print(json.dumps({st["name"]: {"sent": st["sent"], "replies": st["replies"]}
                      for st in streams}))


if __name__ == "__main__":
    main()
