"""count_client.py - gets of one key on a bqos-node from CONNS connections for SECS seconds; prints the replies per whole second (wall clock) on one line, then the count of errors (CLIENT_ERROR, SERVER_ERROR, timeouts).

Usage: count_client.py PORT KEY SECS [CONNS]
"""
import socket
import sys
import threading
import time

port, key, secs = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])
conns = int(sys.argv[4]) if len(sys.argv) > 4 else 8
counts, errors = {}, [0]
lock = threading.Lock()
stop = time.time() + secs


def run():
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(10)
    req = ("get %s\r\n" % key).encode()
    while time.time() < stop:
        s.sendall(req)
        buf = b""
        try:
            while not buf.endswith(b"END\r\n") and b"ERROR" not in buf:
                d = s.recv(4096)
                if not d:
                    return
                buf += d
        except socket.timeout:
            with lock:
                errors[0] += 1
            return
        with lock:
            if buf.endswith(b"END\r\n"):
                sec = int(time.time())
                counts[sec] = counts.get(sec, 0) + 1
            else:
                errors[0] += 1
        if b"ERROR" in buf:
            time.sleep(0.05)


ts = [threading.Thread(target=run) for _ in range(conns)]
for t in ts:
    t.start()
for t in ts:
    t.join()
print(" ".join(str(counts[k]) for k in sorted(counts)))
print(errors[0])
