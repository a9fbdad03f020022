#!/usr/bin/env python3
"""cut_proxy.py - a TCP relay on 127.0.0.1 that a test can cut: one node's control connection goes through it, so that the node is cut off from the controller while its data path stays up.

Usage:
  cut_proxy.py LISTEN_PORT TARGET_PORT CUTFILE

Relays every connection to 127.0.0.1:TARGET_PORT.  While CUTFILE exists
every relayed connection is closed (both sides) and new ones are closed
as soon as they are accepted: to the node the controller is gone, to the
controller the node is.  Remove CUTFILE and the next connection is
relayed again (ZeroMQ reconnects by itself).  Prints "ready" once it
listens.
"""
import os
import select
import socket
import sys
import threading


def relay(a, cutfile):
    try:
        b = socket.create_connection(("127.0.0.1", TARGET), timeout=2)
    except OSError:
        a.close()
        return
    b.settimeout(None)
    a.settimeout(None)
    peers = {a: b, b: a}
    try:
        while not os.path.exists(cutfile):
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
    global TARGET
    port, TARGET, cutfile = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", port))
    ls.listen(16)
    print("ready", flush=True)
    while True:
        c, _ = ls.accept()
        if os.path.exists(cutfile):
            c.close()
            continue
        threading.Thread(target=relay, args=(c, cutfile), daemon=True).start()


if __name__ == "__main__":
    main()
