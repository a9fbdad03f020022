#!/usr/bin/env python3
"""ops_load.py - open-loop gets or sets of one key prefix through a bqos-node (tests/it/it_nested_ops.sh).

Usage: ops_load.py PORT PREFIX get|set RATE SECONDS [CONNS]

Sends RATE requests per second (gets of missing keys, or sets of a 1-byte
value) of keys PREFIX:kN over CONNS pipelined connections for SECONDS,
never waiting for replies (open loop: what the node holds stays queued),
draining the replies on the side.  Prints one JSON object: sent, replies.
"""
import json
import socket
import sys
import threading
import time


def main():
    port, prefix, op = int(sys.argv[1]), sys.argv[2].encode(), sys.argv[3]
    rate, secs = float(sys.argv[4]), float(sys.argv[5])
    nconn = int(sys.argv[6]) if len(sys.argv) > 6 else 2
    if op not in ("get", "set"):
        sys.exit("ops_load.py: op must be get or set")
    end_mark = b"END\r\n" if op == "get" else b"STORED\r\n"
    socks = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(nconn)]
    replies = [0] * nconn
    stop = threading.Event()

    def reader(i):
        buf = b""
        s = socks[i]
        s.settimeout(0.2)
        while not stop.is_set():
            try:
                b = s.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                return
            if not b:
                return
            buf += b
            n = buf.count(end_mark)
            if n:
                replies[i] += n
                buf = buf[buf.rfind(end_mark) + len(end_mark):]

    threads = [threading.Thread(target=reader, args=(i,), daemon=True) for i in range(nconn)]
    for t in threads:
        t.start()
    start = time.monotonic()
    sent = 0
    while True:
        now = time.monotonic()
        if now - start >= secs:
            break
        due = int((now - start) * rate)
        while sent < due:
            if op == "get":
                req = b"get %s:k%d\r\n" % (prefix, sent)
            else:
                req = b"set %s:k%d 0 0 1\r\nx\r\n" % (prefix, sent)
            socks[sent % nconn].sendall(req)
            sent += 1
        time.sleep(0.002)
    stop.set()
    for s in socks:
        s.close()
    print(json.dumps({"sent": sent, "replies": sum(replies)}))


if __name__ == "__main__":
    main()
