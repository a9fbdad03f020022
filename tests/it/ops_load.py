#!/usr/bin/env python3
"""ops_load.py - open-loop gets or sets of one key prefix through a bqos-node (tests/it/it_nested_ops.sh).

Usage: ops_load.py PORT PREFIX get|set RATE SECONDS [CONNS]

Sends RATE requests per second (gets of missing keys, or sets of a 1-byte
value) of keys PREFIX:kN over CONNS pipelined connections for SECONDS,
never waiting for replies (open loop: what the node holds stays queued),
draining the replies on the side.  Prints one JSON object: sent, replies.
"""
import json
import sys

import openloop


def main():
    port, prefix, op = int(sys.argv[1]), sys.argv[2].encode(), sys.argv[3]
    rate, secs = float(sys.argv[4]), float(sys.argv[5])
    nconn = int(sys.argv[6]) if len(sys.argv) > 6 else 2
    if op not in ("get", "set"):
        sys.exit("ops_load.py: op must be get or set")
    if op == "get":
        sent, replies = openloop.run(port, nconn, rate, secs, lambda i: b"get %s:k%d\r\n" % (prefix, i), b"END\r\n")
    else:
        sent, replies = openloop.run(port, nconn, rate, secs, lambda i: b"set %s:k%d 0 0 1\r\nx\r\n" % (prefix, i),
                                     b"STORED\r\n")
    print(json.dumps({"sent": sent, "replies": replies}))


if __name__ == "__main__":
    main()
