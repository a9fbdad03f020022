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
import sys
import urllib.request

import openloop


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
    before = scrape(url, bucket)
    qmax, end = [0.0], {}

    def tick():
        qmax[0] = max(qmax[0], scrape(url, bucket)["queued"])

    sent, replies = openloop.run(port, nconn, rate, secs, lambda i: b"get %s:k%d\r\n" % (bucket.encode(), i),
                                 b"END\r\n", tick, lambda: end.update(scrape(url, bucket)))
    after = end
    qmax = max(qmax[0], after["queued"])
    d = {k: after[k] - before[k] for k in ("arrivals", "served", "shadow_held", "waited")}
    d.update(sent=sent, replies=replies, queued_max=qmax, shadow=after["shadow"],
             seconds=secs, rate=rate)
    print(json.dumps(d))


if __name__ == "__main__":
    main()
