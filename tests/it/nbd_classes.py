#!/usr/bin/env python3
"""nbd_classes.py - per-request operation classes on the block node (issue 27), seen from a raw NBD client; used by tests/it/it_nbd_classes.sh.

Usage: nbd_classes.py PORT EXPORT N
On one connection to EXPORT: N 4 KiB reads, then N 4 KiB writes, one at a
time (each waits for its reply), then a TRIM, a FLUSH and a READ.  Prints
one JSON object: the seconds the reads and the writes took, the NBD error
of each write (0 = ok), of the TRIM, the FLUSH and the last READ.
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nbd_faults import CMD_FLUSH, CMD_READ, CMD_TRIM, CMD_WRITE, go, reply, request  # noqa: E402


def main():
    port, export, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    s, _ = go(port, export)
    h = 1
    t0 = time.monotonic()
    read_errs = 0
    for i in range(n):
        request(s, CMD_READ, (i % 64) * 4096, 4096, h)
        err, _ = reply(s, h, 4096)
        read_errs += err != 0
        h += 1
    t1 = time.monotonic()
    write_errs = 0
    for i in range(n):
        request(s, CMD_WRITE, (i % 64) * 4096, 4096, h, payload=b"w" * 4096)
        err, _ = reply(s, h)
        write_errs += err != 0
        h += 1
    t2 = time.monotonic()
    request(s, CMD_TRIM, 0, 4096, h)
    trim, _ = reply(s, h)
    h += 1
    request(s, CMD_FLUSH, 0, 0, h)
    flush, _ = reply(s, h)
    h += 1
    request(s, CMD_READ, 0, 4096, h)
    read, _ = reply(s, h, 4096)
    print(json.dumps({"read_s": round(t1 - t0, 3), "write_s": round(t2 - t1, 3),
                      "read_errors": read_errs, "write_errors": write_errs,
                      "trim": trim, "flush": flush, "read": read}))


if __name__ == "__main__":
    main()
