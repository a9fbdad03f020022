#!/usr/bin/env python3
"""impostor.py - connects to a controller's node endpoint under another process's exact routing id (name, NUL, 4-byte instance tag), which ZMQ_ROUTER_HANDOVER hands it, says nothing more and reads nothing (issue 18, defect 4).

Usage:
  impostor.py ENDPOINT NAME INSTANCE_HEX SECONDS

Sends one heartbeat so that the controller maps the id to its pipe, holds
the connection SECONDS, then leaves.
"""
import json
import struct
import sys
import time

import zmq


def main():
    ep, name, inst, secs = sys.argv[1], sys.argv[2], int(sys.argv[3], 16), float(sys.argv[4])
    ctx = zmq.Context()
    s = ctx.socket(zmq.DEALER)
    s.setsockopt(zmq.IDENTITY, name.encode() + b"\0" + struct.pack("<I", inst & 0xFFFFFFFF))
    s.setsockopt(zmq.LINGER, 0)
    s.connect(ep)
    time.sleep(0.2)
    s.send_multipart([json.dumps({"v": 3, "type": "heartbeat", "node": name, "seq": 1}).encode()])
    time.sleep(secs)
    s.close()
    ctx.term()


if __name__ == "__main__":
    main()
