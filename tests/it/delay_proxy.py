#!/usr/bin/env python3
"""delay_proxy.py - a TCP relay on 127.0.0.1 that holds what the client sends for a fixed time: one node's control connection through it makes its reports reach the controller late (a slow link, or a busy host), while the controller's messages reach the node at once.

Usage:
  delay_proxy.py LISTEN_PORT TARGET_PORT DELAY_MS

Relays every connection to 127.0.0.1:TARGET_PORT; the bytes from the
client (the node) go on DELAY_MS after they arrived, in order; the bytes
back go on at once.  Prints "ready" once it listens.
"""
import collections
import select
import sys
import threading
import time

from relay_lib import dial, serve


def relay(a, target, delay):
    b = dial(a, target)
    if b is None:
        return
    held = collections.deque()  # (due, bytes), in arrival order
    cv = threading.Condition()
    done = []

    def send_late():
        while True:
            with cv:
                while not held and not done:
                    cv.wait()
                if not held:
                    return
                due, data = held[0]
                wait = due - time.time()
                if wait > 0:
                    cv.wait(wait)
                    continue
                held.popleft()
            try:
                b.sendall(data)
            except OSError:
                return

    threading.Thread(target=send_late, daemon=True).start()
    try:
        while True:
            r, _, _ = select.select([a, b], [], [], 0.5)
            for s in r:
                data = s.recv(65536)
                if not data:
                    return
                if s is a:
                    with cv:
                        held.append((time.time() + delay, data))
                        cv.notify()
                else:
                    a.sendall(data)
    except OSError:
        pass
    finally:
        with cv:
            done.append(1)
            cv.notify()
        for s in (a, b):
            s.close()


def main():
    port, target, delay = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]) / 1000
    serve(port, relay, (target, delay))


if __name__ == "__main__":
    main()
