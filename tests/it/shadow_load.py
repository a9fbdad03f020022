#!/usr/bin/env python3
"""shadow_load.py - open-loop gets of one bucket through a bqos-node (tests/it/it_shadow.sh).

Usage: shadow_load.py PORT METRICS_URL BUCKET RATE SECONDS [CONNS]

Sends RATE gets per second of missing keys of BUCKET over CONNS pipelined
connections for SECONDS, never waiting for replies (open loop: what the node
holds stays queued), and scrapes the node's /metrics just before and just
at the end of the sending.  Prints one JSON object: the bucket's deltas of
arrivals, served (every class), shadow_held, waited_for_limit, replies
read, and the largest queue seen.  Then closes the connections (the node
drops what was still queued).
"""
import json
import re
import socket
import sys
import threading
import time
import urllib.request


def scrape(url, bucket):
    text = urllib.request.urlopen(url, timeout=5).read().decode()
    want = {
        "arrivals": "bqos_bucket_arrivals_total",
        "served": "bqos_bucket_served_total",
        "shadow_held": "bqos_bucket_shadow_held_total",
        "waited": "bqos_bucket_waited_for_limit_total",
        "queued": "bqos_bucket_queued",
        "shadow": "bqos_bucket_shadow",
    }
    out = {k: 0.0 for k in want}
    for line in text.splitlines():
        m = re.match(r'^(\w+)\{([^}]*)\} (\S+)$', line)
        if not m or 'bucket="%s"' % bucket not in m.group(2):
            continue
        for k, name in want.items():
            if m.group(1) == name:
                out[k] += float(m.group(3))
    return out


def main():
    port, url, bucket = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    rate, secs = float(sys.argv[4]), float(sys.argv[5])
    nconn = int(sys.argv[6]) if len(sys.argv) > 6 else 4
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
            n = buf.count(b"END\r\n")
            if n:
                replies[i] += n
                buf = buf[buf.rfind(b"END\r\n") + 5:]

    threads = [threading.Thread(target=reader, args=(i,), daemon=True) for i in range(nconn)]
    for t in threads:
        t.start()
    before = scrape(url, bucket)
    qmax = 0.0
    start = time.monotonic()
    sent = 0
    next_scrape = start + 0.5
    while True:
        now = time.monotonic()
        if now - start >= secs:
            break
        due = int((now - start) * rate)
        while sent < due:
            socks[sent % nconn].sendall(b"get %s:k%d\r\n" % (bucket.encode(), sent))
            sent += 1
        if now >= next_scrape:
            qmax = max(qmax, scrape(url, bucket)["queued"])
            next_scrape += 0.5
        time.sleep(0.002)
    after = scrape(url, bucket)
    qmax = max(qmax, after["queued"])
    stop.set()
    for s in socks:
        s.close()
    d = {k: after[k] - before[k] for k in ("arrivals", "served", "shadow_held", "waited")}
    d.update(sent=sent, replies=sum(replies), queued_max=qmax, shadow=after["shadow"],
             seconds=secs, rate=rate)
    print(json.dumps(d))


if __name__ == "__main__":
    main()
