#!/usr/bin/env python3
"""soak_client.py - the checking and hostile clients of `make soak` (tests/soak/soak.sh) and its final verdict: memcached and NBD clients that verify every reply, idle, never-reading and garbage-sending peers.

Usage:
  soak_client.py run OUT.json SECONDS SEED --mc NAME=PORT... --nbd PORT/EXPORT
  soak_client.py verdict DIR    (reads DIR/client.json, events.csv, rss.csv,
                                 load/periods.csv, settings.env; prints the
                                 summary table; exit 1 on any violation)

Checking memcached clients: CONNS connections per node, each with its own
100 keys "chk:NODEcCONN:kI" whose values (version, then a digest of key and
version repeated to a length set by both) it can verify.  A get must return
a value of a version that may be stored (the last one set, or one whose set
got no definite answer) or a miss (a restarted memcached lost its data).
Requests go out pipelined 1-4 at a time; every reply is matched to its
request in order.  A request unanswered for UNANSWERED_S seconds on an open
connection is a violation; a connection the server closes or resets is
recorded with the time and the requests it left unanswered, and the verdict
excuses it only inside a failure window of that server (its node or its
memcached killed).  NBD: two connections write 4 KiB blocks of a verifiable
pattern and read them back (the block node is not killed: every block must
read back as last written).
"""
import hashlib
import json
import os
import random
import socket
import struct
import sys
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "it"))
import nbd_faults  # noqa: E402  (reuse its handshake: go())

UNANSWERED_S = 20.0
CONNS = 4
KEYS = 100
HOSTILE_SRC = "127.0.0.2"  # hostile peers come from another loopback address
IDLE_PER_PORT = 150
BLOCK = 4096
NBD_BLOCKS = 256
NEVER_READ_GETS = 2048  # values (512 MB of replies) asked per never-reading connection

lock = threading.Lock()
stats = {}
closes = []     # {"server", "time", "lost", "why"}
violations = []  # {"kind", "time", "server", "what"}


def bump(server, key, n=1):
    with lock:
        d = stats.setdefault(server, {})
        d[key] = d.get(key, 0) + n


def violate(kind, server, what):
    with lock:
        violations.append({"kind": kind, "time": time.time(), "server": server, "what": what[:300]})
        if len(violations) > 20:
            return
    print("soak-client: VIOLATION %s on %s: %s" % (kind, server, what[:300]), flush=True)


def value_of(key, ver):
    d = hashlib.sha256(("%s:%d" % (key, ver)).encode()).hexdigest().encode()
    n = 16 + int(d[:4], 16) % 3000
    v = b"%d:" % ver + d * (n // len(d) + 1)
    return v[:n]


class Closed(Exception):
    pass


class Reader:
    """Buffered replies from a socket with a per-call deadline."""

    def __init__(self, s):
        self.s, self.buf = s, b""

    def fill(self, deadline):
        while True:
            left = deadline - time.time()
            if left <= 0:
                raise socket.timeout()
            self.s.settimeout(min(left, 1.0))
            try:
                d = self.s.recv(262144)
            except socket.timeout:
                continue
            if not d:
                raise Closed("EOF")
            self.buf += d
            return

    def line(self, deadline):
        while b"\r\n" not in self.buf:
            self.fill(deadline)
        ln, self.buf = self.buf.split(b"\r\n", 1)
        return ln

    def exact(self, n, deadline):
        while len(self.buf) < n:
            self.fill(deadline)
        d, self.buf = self.buf[:n], self.buf[n:]
        return d


def mc_checker(name, port, cid, seed, end):
    rng = random.Random(seed)
    keys = ["chk:%sc%dk%d" % (name, cid, i) for i in range(KEYS)]
    ok = {k: set() for k in keys}   # versions a get may return (a miss is always fine)
    ver = 0
    while time.time() < end:
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=2)
        except OSError:
            bump(name, "connect_failures")
            time.sleep(0.2)
            continue
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        bump(name, "connections")
        r = Reader(s)
        pending = []
        try:
            while time.time() < end:
                batch = []
                for _ in range(rng.randint(1, 4)):
                    k = rng.choice(keys)
                    op = rng.random()
                    if op < 0.45:
                        ver += 1
                        v = value_of(k, ver)
                        batch.append(("set", k, ver, b"set %s 0 0 %d\r\n%s\r\n" % (k.encode(), len(v), v)))
                    elif op < 0.9:
                        batch.append(("get", k, 0, b"get %s\r\n" % k.encode()))
                    else:
                        batch.append(("delete", k, 0, b"delete %s\r\n" % k.encode()))
                for op, k, v, _ in batch:
                    if op == "set":
                        ok[k].add(v)   # may be stored from now on
                s.sendall(b"".join(b[3] for b in batch))
                sent = time.time()
                pending = list(batch)
                bump(name, "requests", len(batch))
                deadline = sent + UNANSWERED_S
                while pending:
                    op, k, v, _ = pending[0]
                    ln = r.line(deadline)
                    if ln.startswith(b"SERVER_ERROR"):
                        bump(name, "server_errors")
                        bump(name, "server_error " + ln[13:60].decode(errors="replace"))
                    elif op == "set":
                        if ln == b"STORED":
                            ok[k] = {v}
                        elif ln != b"NOT_STORED":
                            violate("wrong", name, "set %s v%d: %r" % (k, v, ln))
                    elif op == "delete":
                        if ln in (b"DELETED", b"NOT_FOUND"):
                            ok[k] = set()
                        else:
                            violate("wrong", name, "delete %s: %r" % (k, ln))
                    elif ln == b"END":
                        bump(name, "misses")
                    elif ln.startswith(b"VALUE "):
                        f = ln.split()
                        data = r.exact(int(f[3]) + 2, deadline)[:-2]
                        end_ln = r.line(deadline)
                        try:
                            got = int(data.split(b":", 1)[0])
                        except ValueError:
                            got = -1
                        if f[1].decode(errors="replace") != k or end_ln != b"END":
                            violate("wrong", name, "get %s: %r ... %r" % (k, ln, end_ln))
                        elif got < 0 or data != value_of(k, got):
                            violate("wrong", name, "get %s: corrupt value %r" % (k, data[:40]))
                        elif got not in ok[k]:
                            violate("wrong", name, "get %s: version %d, may hold %s" %
                                    (k, got, sorted(ok[k])[-3:]))
                        else:
                            bump(name, "hits")
                    else:
                        violate("wrong", name, "get %s: %r" % (k, ln))
                    pending.pop(0)
                    bump(name, "replies")
                time.sleep(rng.random() * 0.004)
        except socket.timeout:
            violate("unanswered", name, "%d requests unanswered for %.0f s on an open connection (first: %s %s)"
                    % (len(pending), UNANSWERED_S, pending[0][0], pending[0][1]))
        except (Closed, OSError) as e:
            with lock:
                closes.append({"server": name, "time": time.time(), "lost": len(pending),
                               "why": str(e) or type(e).__name__})
        for op, k, v, _ in pending:
            if op == "set":
                ok[k].add(v)   # its outcome is unknown
        bump(name, "lost_on_close", len(pending))
        s.close()


def nbd_checker(name, port, export, cid, seed, end):
    rng = random.Random(seed)
    base = cid * NBD_BLOCKS
    ok = {i: {None} for i in range(NBD_BLOCKS)}  # None: never written (zeros)
    ver = 0
    handle = 0

    def pattern(i, v):
        if v is None:
            return bytes(BLOCK)
        d = hashlib.sha256(b"%d:%d:%d" % (cid, i, v)).digest()
        return d * (BLOCK // len(d))

    while time.time() < end:
        try:
            s, _ = nbd_faults.go(port, export)
        except (OSError, EOFError, nbd_faults.Fail) as e:
            bump(name, "connect_failures")
            print("soak-client: nbd connect: %s" % e, flush=True)
            time.sleep(0.5)
            continue
        bump(name, "connections")
        r = Reader(s)
        pend = None
        try:
            while time.time() < end:
                i = rng.randrange(NBD_BLOCKS)
                off = (base + i) * BLOCK
                handle += 1
                if rng.random() < 0.5:
                    ver += 1
                    ok[i].add(ver)
                    pend = ("write", i)
                    s.sendall(struct.pack(">IHHQQI", nbd_faults.REQ_MAGIC, 0, nbd_faults.CMD_WRITE,
                                          handle, off, BLOCK) + pattern(i, ver))
                else:
                    pend = ("read", i)
                    s.sendall(struct.pack(">IHHQQI", nbd_faults.REQ_MAGIC, 0, nbd_faults.CMD_READ,
                                          handle, off, BLOCK))
                bump(name, "requests")
                deadline = time.time() + UNANSWERED_S
                magic, err, h = struct.unpack(">IIQ", r.exact(16, deadline))
                if magic != nbd_faults.SIMPLE_MAGIC or h != handle:
                    violate("wrong", name, "reply magic %x handle %d (want %d)" % (magic, h, handle))
                    raise Closed("protocol")
                if err:
                    bump(name, "error_replies")
                elif pend[0] == "write":
                    ok[i] = {ver}
                else:
                    data = r.exact(BLOCK, deadline)
                    if not any(data == pattern(i, v) for v in ok[i]):
                        violate("wrong", name, "block %d reads neither of versions %s" %
                                (base + i, sorted(ok[i], key=str)[-3:]))
                    else:
                        bump(name, "hits")
                bump(name, "replies")
                pend = None
        except socket.timeout:
            violate("unanswered", name, "NBD %s of block %d unanswered for %.0f s" % (pend[0], pend[1], UNANSWERED_S))
        except (Closed, OSError, EOFError) as e:
            with lock:
                closes.append({"server": name, "time": time.time(), "lost": 1 if pend else 0,
                               "why": str(e) or type(e).__name__})
        s.close()


def hostile_conn(port):
    s = socket.socket()
    s.settimeout(2)
    s.bind((HOSTILE_SRC, 0))
    s.connect(("127.0.0.1", port))
    return s


def idle_clients(ports, end):
    """IDLE_PER_PORT connections per port that never send a byte; reopened when closed."""
    conns = {p: [] for p in ports}
    while time.time() < end:
        for p in ports:
            live = []
            for s in conns[p]:
                try:
                    s.setblocking(False)
                    d = s.recv(4096)
                    if d == b"":
                        s.close()
                        bump("hostile", "idle_closed_by_server")
                        continue
                except BlockingIOError:
                    pass
                except OSError:
                    s.close()
                    bump("hostile", "idle_closed_by_server")
                    continue
                live.append(s)
            while len(live) < IDLE_PER_PORT:
                try:
                    live.append(hostile_conn(p))
                    bump("hostile", "idle_opened")
                except OSError:
                    bump("hostile", "idle_refused")
                    break
            conns[p] = live
        time.sleep(5)
    for p in ports:
        for s in conns[p]:
            s.close()


def never_reader(port, end):
    """Sets a 256 KiB value, then pipelines multi-gets of 64 x it (issue 18,
    defect 8) until NEVER_READ_GETS values are asked, without ever reading
    a reply; a new connection once the server closes it."""
    big = b"x" * 262144
    while time.time() < end:
        try:
            s = hostile_conn(port)
            s.sendall(b"set chk:big 0 0 %d\r\n%s\r\n" % (len(big), big))
            bump("hostile", "never_reader_connections")
            s.setblocking(False)
            asked = 0
            req = b"get" + b" chk:big" * 64 + b"\r\n"   # 16 MB of replies each
            while time.time() < end and asked < NEVER_READ_GETS:
                try:
                    if s.send(req) != len(req):
                        break
                    asked += 64
                except BlockingIOError:
                    time.sleep(0.5)
            # Then sits 90 s, asking once in a while: a send fails once the
            # server has closed it.
            quiet = time.time() + 90
            while time.time() < min(end, quiet):
                time.sleep(10)
                try:
                    s.send(b"get chk:big\r\n")
                except BlockingIOError:
                    pass
            bump("hostile", "never_reader_gave_up")
        except (OSError, ValueError):
            bump("hostile", "never_reader_closed_by_server")
            time.sleep(5)
        finally:
            try:
                s.close()
            except (OSError, UnboundLocalError):
                pass


def garbage(ports, seed, end):
    rng = random.Random(seed)
    while time.time() < end:
        p = rng.choice(ports)
        try:
            s = hostile_conn(p)
            s.sendall(bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 8192))))
            s.settimeout(1)
            try:
                while s.recv(65536):
                    pass
            except OSError:
                pass
            s.close()
            bump("hostile", "garbage_sent")
        except OSError:
            bump("hostile", "garbage_refused")
        time.sleep(rng.random() * 2)


def run(argv):
    out, secs, seed = argv[0], float(argv[1]), int(argv[2])
    mcs, nbd = [], None
    i = 3
    while i < len(argv):
        if argv[i] == "--mc":
            n, p = argv[i + 1].split("=")
            mcs.append((n, int(p)))
        elif argv[i] == "--nbd":
            p, e = argv[i + 1].split("/")
            nbd = (int(p), e)
        i += 2
    end = time.time() + secs
    ts = []
    for k, (n, p) in enumerate(mcs):
        for c in range(CONNS):
            ts.append(threading.Thread(target=mc_checker, args=(n, p, c, seed * 100 + k * 10 + c, end)))
        ts.append(threading.Thread(target=never_reader, args=(p, end)))
    if nbd:
        for c in range(2):
            ts.append(threading.Thread(target=nbd_checker, args=("nbd", nbd[0], nbd[1], c, seed + c, end)))
    hostile_ports = [p for _, p in mcs] + ([nbd[0]] if nbd else [])
    ts.append(threading.Thread(target=idle_clients, args=(hostile_ports, end)))
    ts.append(threading.Thread(target=garbage, args=(hostile_ports, seed, end)))
    for t in ts:
        t.daemon = True
        t.start()
    while time.time() < end:
        time.sleep(min(10, max(0.1, end - time.time())))
        with lock:
            line = "  ".join("%s %d/%d" % (n, d.get("replies", 0), d.get("requests", 0))
                             for n, d in sorted(stats.items()) if n != "hostile")
            print("soak-client: %.0f s left  replies/requests: %s  closes %d  violations %d"
                  % (max(0, end - time.time()), line, len(closes), len(violations)), flush=True)
    for t in ts:
        t.join(UNANSWERED_S + 5)
    with lock:
        json.dump({"stats": stats, "closes": closes, "violations": violations}, open(out, "w"), indent=1)


def verdict(d):
    env = dict(l.strip().split("=", 1) for l in open(os.path.join(d, "settings.env")) if "=" in l)
    res = json.load(open(os.path.join(d, "client.json")))
    events = []   # (target, killed, restarted)
    for l in open(os.path.join(d, "events.csv")):
        f = l.strip().split(",")
        if len(f) == 3 and f[0] != "target":
            events.append((f[0], float(f[1]), float(f[2])))
    period = float(env.get("PERIOD", "1"))
    grace = 2 * period
    bad = []
    print("\n== soak summary (seed %s, %s min) ==" % (env.get("SEED"), env.get("MINUTES")))
    print("chaos events: %d (%s)" % (len(events), ", ".join(
        "%s %d" % (t, sum(1 for e in events if e[0] == t)) for t in ("controller", "node", "memcached"))))
    # Which server each kill touches: the node kill cuts its clients off,
    # the memcached kill its node's backend; a controller kill no connection.
    touches = {"node": env.get("NODE_KILLED"), "memcached": env.get("MC_KILLED_NODE")}

    def excused(server, t):
        return any(touches.get(tg) == server and k - 0.5 <= t <= r + grace for tg, k, r in events)

    print("\n%-10s %10s %10s %8s %8s %8s %10s %8s" % ("server", "requests", "replies", "hits", "misses",
                                                  "srv_err", "closes", "lost"))
    for n, st in sorted(res["stats"].items()):
        if n == "hostile":
            continue
        cl = [c for c in res["closes"] if c["server"] == n]
        print("%-10s %10d %10d %8d %8d %8d %10d %8d" % (
            n, st.get("requests", 0), st.get("replies", 0), st.get("hits", 0), st.get("misses", 0),
            st.get("server_errors", 0) + st.get("error_replies", 0), len(cl), st.get("lost_on_close", 0)))
        for k, v in sorted(st.items()):
            if k.startswith("server_error "):
                print("    %s: %d" % (k, v))
        if st.get("replies", 0) < 100:
            bad.append("%s: only %d checked replies" % (n, st.get("replies", 0)))
    for c in res["closes"]:
        if not excused(c["server"], c["time"]):
            bad.append("%s closed a checking connection outside a failure window at %.3f (%s), %d requests lost"
                       % (c["server"], c["time"], c["why"], c["lost"]))
    for v in res["violations"]:
        bad.append("%s reply on %s at %.3f: %s" % (v["kind"], v["server"], v["time"], v["what"]))
    print("hostile: %s" % ", ".join("%s %d" % kv for kv in sorted(res["stats"].get("hostile", {}).items())))

    # Memory: the largest VmRSS sampled per daemon role.
    rss = {}
    for l in open(os.path.join(d, "rss.csv")):
        f = l.strip().split(",")
        if len(f) == 4 and f[0] != "time":
            rss[f[1]] = max(rss.get(f[1], 0), int(f[3]))
    print("\n%-12s %12s %12s" % ("daemon", "max RSS MB", "bound MB"))
    for role, kb in sorted(rss.items()):
        bound = int(env.get("RSS_" + role.split("-")[0].upper(), "0"))
        print("%-12s %12.1f %12d" % (role, kb / 1024, bound))
        if bound and kb / 1024 > bound:
            bad.append("%s: RSS %.1f MB over its bound %d MB" % (role, kb / 1024, bound))

    # Limits: each limited bucket within 1.05 x per period, outside the
    # failure windows (a kill until GRACE after its restart).
    start = float(env["LOAD_START"])
    lim_ok = lim_skip = 0
    worst = 0.0
    pf = os.path.join(d, "load", "periods.csv")
    if not os.path.exists(pf):
        bad.append("bqos-load wrote no periods.csv")
    else:
        for l in list(open(pf))[1:]:
            p, b, res_, lim, done = l.strip().split(",")[:5]
            if not lim:
                continue
            t0 = start + (int(p) - 1) * period
            if any(t0 < r + grace and t0 + period > k for _, k, r in events):
                lim_skip += 1
                continue
            ratio = float(done) / float(lim)
            worst = max(worst, ratio)
            lim_ok += 1
            if ratio > 1.05:
                bad.append("bucket %s period %s: %s IOs, limit %s (%.2f x)" % (b, p, done, lim, ratio))
    print("\nlimits: %d bucket-periods checked (worst %.3f x L, bound 1.05), %d in failure windows skipped"
          % (lim_ok, worst, lim_skip))
    if lim_ok == 0:
        bad.append("no limited bucket-period outside the failure windows")
    for w in env.get("EXTRA_FAIL", "").split("|"):
        if w:
            bad.append(w)
    print()
    if bad:
        for b in bad[:50]:
            print("VIOLATION: " + b)
        print("soak: %d violations" % len(bad))
        return 1
    print("soak: passed")
    return 0


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "verdict":
        sys.exit(verdict(sys.argv[2]))
    if len(sys.argv) >= 5 and sys.argv[1] == "run":
        run(sys.argv[2:])
        sys.exit(0)
    print(__doc__)
    sys.exit(2)
