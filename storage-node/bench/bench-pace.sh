#!/bin/sh
# bench-pace.sh - paced tokens on a real node (docs/performance.md, "Paced tokens (issue 14)"): one memcached, one bqos-node, a controller; a bucket limited to LIMIT IOs/s kept backlogged by a closed-loop client; prints the most IOs in any 200 ms and 1 s window, the rate and the latency percentiles.
#
# Usage: storage-node/bench/bench-pace.sh [NODE_OPTION...]
#   e.g. bench-pace.sh --pacing off --r-order rr     (the paper's scheduler)
#        bench-pace.sh                               (defaults: paced, urgency)
# Environment: BIN=bin, PERIOD=5s (controller --period), INTERVALS=5,
# LIMIT=100 (IOs/s), RES=20 (reservation, IOs/s), OUTSTANDING=8 (requests in
# flight), PERIODS=3 (measured periods, after one period of warm-up),
# OUT=out/bench-pace (logs).  Every process it starts is stopped on exit.
set -u
HERE=$(cd "$(dirname "$0")/../../scripts" && pwd)
. "$HERE/lib.sh"
example_init "$@"
example_begin bench-pace bqos-node bqos-controller
PERIOD=${PERIOD:-5s}; INTERVALS=${INTERVALS:-5}; LIMIT=${LIMIT:-100}; RES=${RES:-20}
OUTSTANDING=${OUTSTANDING:-8}; PERIODS=${PERIODS:-3}; OUT=${OUT:-out/bench-pace}
mkdir -p "$OUT" || die "cannot create $OUT"
printf '{"buckets": [{"name": "lim", "reservation": %s, "limit": %s}]}\n' "$RES" "$LIMIT" \
  >"$OUT/buckets.json"
next_port; MC=$PORT
start_memcached "$MC" "$OUT/memcached.log" || die "memcached did not start"
next_port; CP=$PORT; next_port; AP=$PORT
spawn "$OUT/controller.log" "$BIN/bqos-controller" --buckets "$OUT/buckets.json" \
  --listen "tcp://127.0.0.1:$CP" --admin "tcp://127.0.0.1:$AP" --period "$PERIOD" \
  --intervals "$INTERVALS" --capacity 20000
wait_port "$CP" 10 || die "controller did not start"
next_port; NP=$PORT
spawn "$OUT/node.log" "$BIN/bqos-node" --name s1 --memcached-listen "127.0.0.1:$NP" \
  --backend "memcached://127.0.0.1:$MC" --controller "tcp://127.0.0.1:$CP" \
  --config "$OUT/buckets.json" "$@"
wait_port "$NP" 10 || die "bqos-node did not start"
# The controller's period in seconds (DURATION as bqos-controller takes it).
P=$(python3 -c 'import sys,re; m=re.fullmatch(r"([0-9.]+)(ms|s)?", sys.argv[1]); print(float(m[1])/(1000 if m[2]=="ms" else 1))' "$PERIOD")
echo "node options: ${*:-(defaults)}; period $PERIOD, $INTERVALS intervals; bucket lim R $RES L $LIMIT IOs/s; $OUTSTANDING outstanding"
python3 - "$NP" "$P" "$PERIODS" "$OUTSTANDING" "$LIMIT" <<'PY'
import socket, sys, time, select
port, period, periods, outst, limit = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
s = socket.create_connection(("127.0.0.1", port))
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
sent, done, buf, n = [], [], b"", 0
t0 = time.monotonic()
warm, end = t0 + period, t0 + period * (periods + 1)
def send():
    global n
    s.sendall(b"get lim:k%d\r\n" % (n % 1000)); n += 1
    sent.append(time.monotonic())
for _ in range(outst):
    send()
while True:
    now = time.monotonic()
    if now >= end:
        break
    r, _, _ = select.select([s], [], [], end - now)
    if not r:
        continue
    data = s.recv(65536)
    if not data:
        sys.exit("node closed the connection")
    buf += data
    while True:
        i = buf.find(b"END\r\n")
        if i < 0:
            break
        buf = buf[i + 5:]
        t = time.monotonic()
        done.append((t, t - sent.pop(0)))
        send()
ts = [t for t, _ in done if t >= warm]
lat = sorted(l for t, l in done if t >= warm)
def most(w):
    best, j = 0, 0
    for i in range(len(ts)):
        while j < len(ts) and ts[j] < ts[i] + w:
            j += 1
        best = max(best, j - i)
    return best
span = end - warm
pct = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] * 1000
print("rate %.1f IOs/s over %.0f s; most in any 200 ms: %d (%.2f x L pro rata), in any 1 s: %d (%.2f x L)"
      % (len(ts) / span, span, most(0.2), most(0.2) / (limit * 0.2), most(1.0), most(1.0) / limit))
print("latency p50 %.0f ms, p99 %.0f ms, max %.0f ms" % (pct(0.5), pct(0.99), lat[-1] * 1000))
PY
