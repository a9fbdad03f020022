#!/usr/bin/env python3
"""cut_proxy.py - a TCP relay on 127.0.0.1 that a test can cut: one node's control connection (or one controller's etcd) goes through it, so that it is cut off while everything else stays up.

Usage:
  cut_proxy.py LISTEN_PORT TARGET_PORT CUTFILE [close|hold]

Relays every connection to 127.0.0.1:TARGET_PORT.  While CUTFILE exists:
  close (the default): every relayed connection is closed (both sides) and
    new ones are closed as soon as they are accepted: to the node the
    controller is gone, to the controller the node is;
  hold: nothing is relayed and nothing closed, as a partition that drops
    packets: connections stay open and silent (requests time out), new
    ones are accepted and wait.
Remove CUTFILE and the next connection is relayed again (ZeroMQ and
libcurl reconnect by themselves; a held one resumes).  Prints "ready" once
it listens.
"""
import os
import select
import socket
import sys
import time

from relay_lib import dial, serve

MODE = "close"


def held(cutfile):
    """While CUTFILE exists in hold mode: wait (True once it is gone)."""
    while os.path.exists(cutfile):
        time.sleep(0.02)
    return True


def relay(a, cutfile):
    if MODE == "hold":
        held(cutfile)
    b = dial(a, TARGET)
    if b is None:
        return
    a.settimeout(None)
    peers = {a: b, b: a}
    try:
        while MODE == "hold" or not os.path.exists(cutfile):
            if MODE == "hold" and os.path.exists(cutfile):
                held(cutfile)
            r, _, _ = select.select([a, b], [], [], 0.02)
            for s in r:
                d = s.recv(65536)
                if not d:
                    return
                peers[s].sendall(d)
    except OSError:
        pass
    finally:
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()


def main():
    global TARGET, MODE
    port, TARGET, cutfile = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    MODE = sys.argv[4] if len(sys.argv) > 4 else "close"
    serve(port, relay, (cutfile,), lambda: MODE == "close" and os.path.exists(cutfile))


if __name__ == "__main__":
    main()
