#!/usr/bin/env python3
"""nbd_faults.py - raw-socket NBD client that feeds bqos-nbd-node bad input and faults; used by tests/it/it_nbd.sh.

Usage: nbd_faults.py PORT EXPORT SCENARIO...   (exit 0 if every scenario passed)
Scenarios: garbage badflags options export_name bounds badmagic midwrite
           durable abort structured enospc (enospc expects writes past 8 MiB
           to fail).
"""
import socket
import struct
import sys
import time

OPT_MAGIC = 0x49484156454F5054
REP_MAGIC = 0x3e889045565a9
REQ_MAGIC = 0x25609513
SIMPLE_MAGIC = 0x67446698
CHUNK_MAGIC = 0x668e33ef
REPLY_DONE = 1
RT_NONE, RT_OFFSET_DATA, RT_ERROR = 0, 1, (1 << 15) + 1
SEND_DF, CMD_FLAG_DF = 1 << 7, 1 << 2
REP_ACK, REP_SERVER, REP_INFO = 1, 2, 3
ERR = 1 << 31
ERR_UNSUP, ERR_INVALID, ERR_UNKNOWN, ERR_TOO_BIG = ERR | 1, ERR | 3, ERR | 6, ERR | 9
OPT_EXPORT_NAME, OPT_ABORT, OPT_LIST, OPT_INFO, OPT_GO, OPT_SR = 1, 2, 3, 6, 7, 8
OPT_LIST_META, OPT_SET_META, OPT_EXTENDED_HEADERS = 9, 10, 11
REP_META_CONTEXT, RT_BLOCK_STATUS, REQ_ONE = 4, 5, 1 << 3
CMD_READ, CMD_WRITE, CMD_DISC, CMD_FLUSH, CMD_TRIM, CMD_BLOCK_STATUS = 0, 1, 2, 3, 4, 7
HOLE_ZERO = 3  # NBD_STATE_HOLE | NBD_STATE_ZERO
FUA = 1
EINVAL, ENOSPC = 22, 28


class Fail(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Fail(what)


def recvn(s, n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            raise EOFError("connection closed after %d of %d bytes" % (len(b), n))
        b += c
    return b


def closed(s, timeout=3.0):
    """True if the server closes the connection (EOF or reset) within timeout."""
    s.settimeout(timeout)
    try:
        while True:
            c = s.recv(4096)
            if not c:
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False


def connect(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    g = recvn(s, 18)
    check(g[:16] == b"NBDMAGICIHAVEOPT", "bad greeting %r" % g)
    check(struct.unpack(">H", g[16:])[0] & 1, "no FIXED_NEWSTYLE")
    return s


def hello(port):
    s = connect(port)
    s.sendall(struct.pack(">I", 3))  # FIXED_NEWSTYLE | NO_ZEROES
    return s


def send_opt(s, opt, data=b""):
    s.sendall(struct.pack(">QII", OPT_MAGIC, opt, len(data)) + data)


def recv_rep(s):
    magic, opt, typ, ln = struct.unpack(">QIII", recvn(s, 20))
    check(magic == REP_MAGIC, "bad reply magic %x" % magic)
    return opt, typ, recvn(s, ln) if ln else b""


def info_data(name, reqs=()):
    n = name.encode()
    return struct.pack(">I", len(n)) + n + struct.pack(">H", len(reqs)) + b"".join(
        struct.pack(">H", r) for r in reqs)


def go(port, name, structured=False, flags=None):
    """Connects, optionally negotiates structured replies, enters transmission
    on export `name`; returns (socket, size) and appends the transmission
    flags to the list `flags` if given."""
    s = hello(port)
    if structured:
        send_opt(s, OPT_SR)
        o, t, _ = recv_rep(s)
        check(o == OPT_SR and t == REP_ACK, "STRUCTURED_REPLY: reply %x, want ACK" % t)
    send_opt(s, OPT_GO, info_data(name))
    size = None
    while True:
        opt, typ, data = recv_rep(s)
        check(opt == OPT_GO, "reply to option %d" % opt)
        if typ == REP_INFO and struct.unpack(">H", data[:2])[0] == 0:
            size, tflags = struct.unpack(">QH", data[2:12])
            if flags is not None:
                flags.append(tflags)
        elif typ == REP_ACK:
            break
        else:
            raise Fail("GO %s: reply type %x" % (name, typ))
    return s, size


def request(s, typ, off, length, handle, flags=0, payload=b""):
    s.sendall(struct.pack(">IHHQQI", REQ_MAGIC, flags, typ, handle, off, length) + payload)


def reply(s, handle, length=0):
    magic, err, h = struct.unpack(">IIQ", recvn(s, 16))
    check(magic == SIMPLE_MAGIC, "bad simple reply magic %x" % magic)
    check(h == handle, "reply for handle %d, expected %d" % (h, handle))
    data = recvn(s, length) if err == 0 and length else b""
    return err, data


def chunk(s, handle):
    """Reads one structured reply chunk for `handle`: (flags, type, payload)."""
    magic, flags, typ, h, ln = struct.unpack(">IHHQI", recvn(s, 20))
    check(magic == CHUNK_MAGIC, "bad structured reply magic %x" % magic)
    check(h == handle, "chunk for handle %d, expected %d" % (h, handle))
    return flags, typ, recvn(s, ln) if ln else b""


def sreply(s, handle, offset=None, length=0):
    """Reads a whole structured reply; returns (error, data).  Checks the
    data chunk's offset and that the last chunk carries DONE."""
    data, err = b"", 0
    while True:
        flags, typ, p = chunk(s, handle)
        if typ == RT_OFFSET_DATA:
            off = struct.unpack(">Q", p[:8])[0]
            check(off == offset and len(p) - 8 == length,
                  "OFFSET_DATA at %d+%d, want %r+%d" % (off, len(p) - 8, offset, length))
            data = p[8:]
        elif typ == RT_ERROR:
            err, ml = struct.unpack(">IH", p[:6])
            check(err != 0 and ml == len(p) - 6 and ml > 0, "bad ERROR chunk %r" % p)
        else:
            check(typ == RT_NONE and not p, "unexpected chunk type %d" % typ)
        if flags & REPLY_DONE:
            return err, data


def disc(s):
    request(s, CMD_DISC, 0, 0, 0)
    check(closed(s), "no close after DISC")


# ---- scenarios -------------------------------------------------------------

def sc_garbage(port, export):
    s = connect(port)
    s.sendall(b"GET / HTTP/1.0\r\n\r\n")  # flags have unknown bits: must close
    check(closed(s), "server kept an HTTP client")
    s = hello(port)
    s.sendall(b"\xde\xad\xbe\xef" * 8)  # option with a garbage magic
    check(closed(s), "server kept a client with a garbage option magic")


def sc_badflags(port, export):
    s = connect(port)
    s.sendall(struct.pack(">I", 1 | 8))
    check(closed(s), "server accepted unknown client flags")


def sc_options(port, export):
    s = hello(port)
    for opt in (OPT_EXTENDED_HEADERS, 99, 5):  # extended headers, unknown, STARTTLS
        send_opt(s, opt, b"xyz" if opt == 99 else b"")
        o, t, _ = recv_rep(s)
        check(o == opt and t == ERR_UNSUP, "option %d: reply %x, want ERR_UNSUP" % (opt, t))
    send_opt(s, OPT_LIST, b"junk")
    check(recv_rep(s)[1] == ERR_INVALID, "LIST with data not refused")
    send_opt(s, OPT_GO, b"\x00\x00\x10\x00abc")  # name length overruns
    check(recv_rep(s)[1] == ERR_INVALID, "GO with bad lengths not refused")
    send_opt(s, OPT_INFO, b"\x00" * 20000)  # beyond the option size limit
    check(recv_rep(s)[1] == ERR_TOO_BIG, "huge option not refused")
    send_opt(s, OPT_GO, info_data("no-such-bucket"))
    check(recv_rep(s)[1] == ERR_UNKNOWN, "unknown export not ERR_UNKNOWN")
    send_opt(s, OPT_INFO, info_data(export, [3]))
    types = []
    while True:
        o, t, d = recv_rep(s)
        types.append(t)
        if t != REP_INFO:
            break
    check(types[-1] == REP_ACK and types.count(REP_INFO) == 2, "INFO replies %r" % types)
    send_opt(s, OPT_LIST)
    names = []
    while True:
        o, t, d = recv_rep(s)
        if t != REP_SERVER:
            break
        names.append(d[4:4 + struct.unpack(">I", d[:4])[0]].decode())
    check(export in names, "LIST %r lacks %s" % (names, export))
    # still usable after all that
    send_opt(s, OPT_GO, info_data(export))
    while recv_rep(s)[1] != REP_ACK:
        pass
    request(s, CMD_READ, 0, 512, 7)
    check(reply(s, 7, 512)[0] == 0, "read after haggling failed")
    disc(s)


def sc_export_name(port, export):
    s = hello(port)
    send_opt(s, OPT_EXPORT_NAME, b"no-such-bucket")
    check(closed(s), "EXPORT_NAME of an unknown export did not end the session")
    s = hello(port)
    send_opt(s, OPT_EXPORT_NAME, export.encode())
    hdr = recvn(s, 10)  # NO_ZEROES negotiated
    check(struct.unpack(">Q", hdr[:8])[0] > 0, "EXPORT_NAME: size 0")
    request(s, CMD_READ, 0, 4096, 1)
    check(reply(s, 1, 4096)[0] == 0, "read after EXPORT_NAME failed")
    disc(s)


def sc_bounds(port, export):
    s, size = go(port, export)
    request(s, CMD_READ, size - 512, 1024, 1)
    check(reply(s, 1)[0] == EINVAL, "read beyond the end: not EINVAL")
    request(s, CMD_WRITE, size - 512, 1024, 2, payload=b"x" * 1024)
    check(reply(s, 2)[0] == ENOSPC, "write beyond the end: not ENOSPC")
    request(s, CMD_READ, 2**64 - 512, 1024, 3)
    check(reply(s, 3)[0] == EINVAL, "read with wrapping offset: not EINVAL")
    request(s, 77, 0, 0, 4)
    check(reply(s, 4)[0] == EINVAL, "unknown command: not EINVAL")
    request(s, CMD_READ, 0, 512, 5, flags=1 << 4)
    check(reply(s, 5)[0] == EINVAL, "unknown flag: not EINVAL")
    request(s, CMD_FLUSH, 1, 0, 6)
    check(reply(s, 6)[0] == EINVAL, "flush with offset: not EINVAL")
    request(s, CMD_READ, 0, 64 * 1024 * 1024, 8)
    check(reply(s, 8)[0] == 75, "64 MiB read: not EOVERFLOW")
    # the connection is still in sync: the refused write's payload was skipped
    request(s, CMD_WRITE, size - 1024, 1024, 9, payload=b"E" * 1024)
    check(reply(s, 9)[0] == 0, "write at the very end failed")
    request(s, CMD_READ, size - 1024, 1024, 10)
    e, d = reply(s, 10, 1024)
    check(e == 0 and d == b"E" * 1024, "read at the very end wrong")
    disc(s)


def sc_badmagic(port, export):
    s, _ = go(port, export)
    s.sendall(b"\x00" * 28)
    check(closed(s), "request with a bad magic did not end the session")


def sc_midwrite(port, export):
    s, _ = go(port, export)
    off = 3 * 1024 * 1024
    request(s, CMD_WRITE, off, 4096, 1, payload=b"A" * 4096)
    check(reply(s, 1)[0] == 0, "write failed")
    request(s, CMD_FLUSH, 0, 0, 2)
    check(reply(s, 2)[0] == 0, "flush failed")
    # half a write, then the client vanishes
    request(s, CMD_WRITE, off, 4096, 3, payload=b"B" * 2000)
    time.sleep(0.1)
    s.close()
    time.sleep(0.2)
    s, _ = go(port, export)
    request(s, CMD_READ, off, 4096, 1)
    e, d = reply(s, 1, 4096)
    check(e == 0 and d == b"A" * 4096, "a half-received write changed the data")
    disc(s)


def sc_durable(port, export):
    s, _ = go(port, export)
    off = 5 * 1024 * 1024
    pat = bytes(range(256)) * 64
    request(s, CMD_WRITE, off, len(pat), 1, flags=FUA, payload=pat)
    check(reply(s, 1)[0] == 0, "FUA write failed")
    request(s, CMD_TRIM, off + 8192, 8192, 2)
    check(reply(s, 2)[0] == 0, "trim failed")
    request(s, CMD_FLUSH, 0, 0, 3)
    check(reply(s, 3)[0] == 0, "flush failed")
    request(s, CMD_READ, off, 8192, 4)
    e, d = reply(s, 4, 8192)
    check(e == 0 and d == pat[:8192], "FUA write not read back")
    # many requests in flight, replies matched by handle
    for h in range(100, 164):
        request(s, CMD_READ, (h % 16) * 4096, 4096, h)
    seen = set()
    for _ in range(64):
        magic, err, h = struct.unpack(">IIQ", recvn(s, 16))
        check(magic == SIMPLE_MAGIC and err == 0, "pipelined read failed")
        recvn(s, 4096)
        seen.add(h)
    check(seen == set(range(100, 164)), "pipelined handles lost")
    disc(s)


def sc_abort(port, export):
    s = hello(port)
    send_opt(s, OPT_ABORT)
    o, t, _ = recv_rep(s)
    check(o == OPT_ABORT and t == REP_ACK, "ABORT not acknowledged")
    check(closed(s), "no close after ABORT")


def sc_structured(port, export):
    # the option carries no data, and is acknowledged once
    s = hello(port)
    send_opt(s, OPT_SR, b"x")
    check(recv_rep(s)[1] == ERR_INVALID, "STRUCTURED_REPLY with data not refused")
    send_opt(s, OPT_SR)
    check(recv_rep(s)[1] == REP_ACK, "STRUCTURED_REPLY not acknowledged")
    send_opt(s, OPT_SR)
    check(recv_rep(s)[1] == ERR_INVALID, "second STRUCTURED_REPLY not refused")
    send_opt(s, OPT_ABORT)
    recv_rep(s)
    tf = []
    s, size = go(port, export, structured=False, flags=tf)
    check(not tf[0] & SEND_DF, "SEND_DF offered without structured replies")
    disc(s)
    s, size = go(port, export, structured=True, flags=tf)
    check(tf[1] & SEND_DF, "SEND_DF not offered with structured replies")
    off = 6 * 1024 * 1024
    pat = bytes((i * 13) & 255 for i in range(8192))
    request(s, CMD_WRITE, off, len(pat), 1, payload=pat)
    check(reply(s, 1)[0] == 0, "write failed")
    request(s, CMD_READ, off, 8192, 2, flags=CMD_FLAG_DF)
    flags, typ, p = chunk(s, 2)  # one data chunk that is also the last
    check(typ == RT_OFFSET_DATA and flags & REPLY_DONE, "READ: chunk %d flags %d" % (typ, flags))
    check(p == struct.pack(">Q", off) + pat, "READ data wrong")
    request(s, CMD_READ, size - 512, 1024, 3)
    check(sreply(s, 3)[0] == EINVAL, "read beyond the end: not an EINVAL chunk")
    request(s, CMD_READ, 0, 64 * 1024 * 1024, 4)
    check(sreply(s, 4)[0] == 75, "64 MiB read: not an EOVERFLOW chunk")
    request(s, CMD_READ, 0, 512, 5, flags=1 << 4)
    check(sreply(s, 5)[0] == EINVAL, "unknown read flag: not an EINVAL chunk")
    request(s, CMD_WRITE, size - 512, 1024, 6, payload=b"x" * 1024)
    err = sreply(s, 6)[0]
    check(err == ENOSPC, "write beyond the end: not an ENOSPC chunk")
    request(s, CMD_READ, 0, 0, 7)
    check(sreply(s, 7) == (0, b""), "zero-length read")
    # pipelined reads, replies matched by handle
    for h in range(100, 132):
        request(s, CMD_READ, off + (h % 2) * 4096, 4096, h)
    seen = set()
    for _ in range(32):
        magic, flags, typ, h, ln = struct.unpack(">IHHQI", recvn(s, 20))
        check(magic == CHUNK_MAGIC and typ == RT_OFFSET_DATA and flags & REPLY_DONE
              and ln == 8 + 4096, "pipelined read reply")
        p = recvn(s, ln)
        check(p[8:] == pat[(h % 2) * 4096:(h % 2) * 4096 + 4096], "pipelined data for %d" % h)
        seen.add(h)
    check(seen == set(range(100, 132)), "pipelined handles lost")
    request(s, CMD_FLUSH, 0, 0, 8)
    check(reply(s, 8)[0] == 0, "flush failed")
    disc(s)


def meta_data(name, queries):
    n = name.encode()
    d = struct.pack(">I", len(n)) + n + struct.pack(">I", len(queries))
    for q in queries:
        d += struct.pack(">I", len(q)) + q.encode()
    return d


def meta_opt(s, opt, data):
    """Sends LIST_/SET_META_CONTEXT; returns (final reply type, [(id, name)])."""
    send_opt(s, opt, data)
    ctx = []
    while True:
        o, t, d = recv_rep(s)
        check(o == opt, "reply to option %d, want %d" % (o, opt))
        if t != REP_META_CONTEXT:
            return t, ctx
        ctx.append((struct.unpack(">I", d[:4])[0], d[4:].decode()))


def block_status(s, handle, ctx_id):
    """Reads a BLOCK_STATUS reply: one DONE chunk; returns [(length, flags)]."""
    flags, typ, p = chunk(s, handle)
    check(typ == RT_BLOCK_STATUS and flags & REPLY_DONE, "BLOCK_STATUS: chunk %d" % typ)
    check(len(p) >= 12 and (len(p) - 4) % 8 == 0, "BLOCK_STATUS payload of %d bytes" % len(p))
    check(struct.unpack(">I", p[:4])[0] == ctx_id, "BLOCK_STATUS for another context")
    ext = [struct.unpack(">II", p[i:i + 8]) for i in range(4, len(p), 8)]
    check(all(ln > 0 for ln, _ in ext), "zero-length descriptor")
    return ext


def sc_meta(port, export):
    """Meta contexts and BLOCK_STATUS on a fresh export: bad option data,
    SET before structured replies, then 64 KiB written at 5 MiB show up as
    data between holes; BLOCK_STATUS without a context is EINVAL."""
    s = hello(port)
    t, _ = meta_opt(s, OPT_SET_META, meta_data(export, ["base:allocation"]))
    check(t == ERR_INVALID, "SET_META_CONTEXT before STRUCTURED_REPLY: %x" % t)
    send_opt(s, OPT_SR)
    check(recv_rep(s)[1] == REP_ACK, "STRUCTURED_REPLY not acknowledged")
    good = meta_data(export, ["base:allocation"])
    for bad in (b"", b"\x00\x00", good[:-1], good + b"x", b"\x00\x00\x10\x00" + good[4:],
                meta_data(export, [])[:-4] + struct.pack(">I", 5),
                meta_data(export, ["base:allo\x00ation"])):
        for opt in (OPT_LIST_META, OPT_SET_META):
            t, ctx = meta_opt(s, opt, bad)
            check(t == ERR_INVALID and not ctx, "option %d with %r: %x" % (opt, bad, t))
    t, ctx = meta_opt(s, OPT_LIST_META, meta_data("no-such-bucket", []))
    check(t == ERR_UNKNOWN, "LIST_META_CONTEXT of an unknown export: %x" % t)
    t, ctx = meta_opt(s, OPT_LIST_META, meta_data(export, []))
    check(t == REP_ACK and ctx == [(0, "base:allocation")], "LIST all: %x %r" % (t, ctx))
    t, ctx = meta_opt(s, OPT_LIST_META, meta_data(export, ["x-a:b", "base:"]))
    check(t == REP_ACK and ctx == [(0, "base:allocation")], "LIST base: %x %r" % (t, ctx))
    t, ctx = meta_opt(s, OPT_LIST_META, meta_data(export, ["qemu:dirty-bitmap:x"]))
    check(t == REP_ACK and ctx == [], "LIST of an unknown namespace: %x %r" % (t, ctx))
    t, ctx = meta_opt(s, OPT_SET_META, meta_data(export, ["x-a:b", "base:allocation"]))
    check(t == REP_ACK and len(ctx) == 1 and ctx[0][1] == "base:allocation",
          "SET base:allocation: %x %r" % (t, ctx))
    cid = ctx[0][0]
    send_opt(s, OPT_GO, info_data(export))
    size = None
    while True:
        o, t, d = recv_rep(s)
        if t == REP_INFO and struct.unpack(">H", d[:2])[0] == 0:
            size = struct.unpack(">Q", d[2:10])[0]
        if t != REP_INFO:
            check(t == REP_ACK, "GO: %x" % t)
            break
    mib = 1024 * 1024
    request(s, CMD_WRITE, 5 * mib, 65536, 1, payload=b"m" * 65536)
    check(reply(s, 1)[0] == 0, "write failed")
    request(s, CMD_BLOCK_STATUS, 0, size, 2)
    ext = block_status(s, 2, cid)
    want = [(5 * mib, HOLE_ZERO), (65536, 0), (size - 5 * mib - 65536, HOLE_ZERO)]
    check(ext == want, "extents %r, want %r" % (ext, want))
    request(s, CMD_BLOCK_STATUS, 5 * mib + 4096, size - 5 * mib - 4096, 3, flags=REQ_ONE)
    ext = block_status(s, 3, cid)
    check(ext == [(65536 - 4096, 0)], "REQ_ONE extents %r" % ext)
    request(s, CMD_BLOCK_STATUS, size - 4096, 8192, 4)
    check(sreply(s, 4)[0] == EINVAL, "BLOCK_STATUS beyond the end: not EINVAL")
    disc(s)
    s, size = go(port, export, structured=True)
    request(s, CMD_BLOCK_STATUS, 0, 4096, 5)
    check(sreply(s, 5)[0] == EINVAL, "BLOCK_STATUS without a context: not EINVAL")
    request(s, CMD_READ, 5 * mib, 512, 6)
    check(sreply(s, 6, 5 * mib, 512) == (0, b"m" * 512), "read after BLOCK_STATUS refused")
    disc(s)


def sc_enospc(port, export):
    s, size = go(port, export)
    request(s, CMD_WRITE, 0, 4096, 1, payload=b"k" * 4096)
    check(reply(s, 1)[0] == 0, "write below the limit failed")
    request(s, CMD_WRITE, 8 * 1024 * 1024 - 2048, 4096, 2, payload=b"f" * 4096)
    check(reply(s, 2)[0] == ENOSPC, "write across the limit: not ENOSPC")
    request(s, CMD_WRITE, 9 * 1024 * 1024, 4096, 3, payload=b"f" * 4096)
    check(reply(s, 3)[0] == ENOSPC, "write past the limit: not ENOSPC")
    request(s, CMD_FLUSH, 0, 0, 4)
    check(reply(s, 4)[0] == 0, "flush after ENOSPC failed")
    request(s, CMD_READ, 0, 4096, 5)
    e, d = reply(s, 5, 4096)
    check(e == 0 and d == b"k" * 4096, "data lost after ENOSPC")
    disc(s)


def sc_memory(port, export):
    """Defect 12: 16 connections each pipeline 8 writes of 4 MiB (512 MiB in
    all) without reading replies: the node's RSS stays under MAX_RSS_MB (env,
    with NODE_PID) as its request buffers stay within --nbd-request-memory,
    and every write is then answered without error."""
    import os
    import threading
    from node_client import rss_mb  # same directory
    pid, max_mb = int(os.environ["NODE_PID"]), float(os.environ["MAX_RSS_MB"])
    n, per, ln = 16, 8, 4 << 20
    conns = [go(port, export) for _ in range(n)]
    for s, _ in conns:
        s.settimeout(60)  # senders block while the node holds back
    payload = b"m" * ln
    def send(i, s):
        for k in range(per):
            request(s, CMD_WRITE, ((i * per + k) * ln) % (conns[0][1] - ln + 1) // 4096 * 4096,
                    ln, k + 1, payload=payload)
    senders = [threading.Thread(target=send, args=(i, s)) for i, (s, _) in enumerate(conns)]
    for t in senders:
        t.start()
    peak, deadline = 0.0, time.time() + 4
    while time.time() < deadline:
        peak = max(peak, rss_mb(pid))
        time.sleep(0.05)
    for i, (s, _) in enumerate(conns):
        got = set()
        for _ in range(per):  # replies may come in any order
            magic, err, h = struct.unpack(">IIQ", recvn(s, 16))
            check(magic == SIMPLE_MAGIC and err == 0, "conn %d write %d: magic %x error %d" % (i, h, magic, err))
            got.add(h)
        check(got == set(range(1, per + 1)), "conn %d: every write answered (%s)" % (i, sorted(got)))
    for t in senders:
        t.join(30)
    print("     node RSS peak %.0f MB (bound %.0f MB)" % (peak, max_mb))
    check(peak < max_mb, "node RSS peak %.0f MB >= %.0f MB" % (peak, max_mb))
    for s, _ in conns:
        s.close()


def main():
    port, export = int(sys.argv[1]), sys.argv[2]
    bad = 0
    for name in sys.argv[3:]:
        try:
            globals()["sc_" + name](port, export)
            print("ok   %s" % name)
        except (Fail, EOFError, OSError) as e:
            print("FAIL %s: %s" % (name, e))
            bad += 1
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
