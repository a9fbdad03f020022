"""openloop.py - open-loop memcached requests through a bqos-node, for the tests' load clients
(ops_load.py, shadow_load.py): RATE requests per second over CONNS pipelined connections,
never waiting for replies (what the node holds stays queued), replies drained on the side."""
import socket
import threading
import time


def run(port, nconn, rate, secs, make_req, end_mark, tick=None, at_end=None):
    """Sends make_req(i) for i = 0, 1, ... at RATE per second for SECS seconds, round robin over
    NCONN connections to 127.0.0.1:PORT; counts the replies ending in END_MARK.  TICK, if given,
    is called every 0.5 s while sending, AT_END when the sending ends, before the connections
    are closed (the node then drops what it still holds).  Returns (sent, replies)."""
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
    next_tick = start + 0.5
    while True:
        now = time.monotonic()
        if now - start >= secs:
            break
        due = int((now - start) * rate)
        while sent < due:
            socks[sent % nconn].sendall(make_req(sent))
            sent += 1
        if tick and now >= next_tick:
            tick()
            next_tick += 0.5
        time.sleep(0.002)
    if at_end:
        at_end()
    stop.set()
    for s in socks:
        s.close()
    return sent, sum(replies)
