#!/bin/sh
# bench-front-tls.sh - the cost of the memcached front's TLS port per request: two bqos-node (policy rr) before one real memcached, one plain and one a TLS port (--tls-cert/--tls-key, TLS 1.3 as python's ssl negotiates it); a python3 client (memcaslap has no TLS) sends pipelined gets of a 100-byte value, 50 per batch, over one connection; interleaved rounds, the node's CPU time per request (load-robust) and requests/s.
#
# Environment (all optional): BIN=bin, N=40000 (requests a round and mode), ROUNDS=5.
# Needs memcached, python3 and certtool or openssl.
set -u
BIN=${BIN:-bin}
N=${N:-40000}
ROUNDS=${ROUNDS:-5}
HERE=$(cd "$(dirname "$0")/../../scripts" && pwd)
. "$HERE/lib.sh"
T=$(mktemp -d /tmp/bench-front-tls.XXXXXX)
trap 'cleanup; rm -rf "$T"' EXIT
trap 'exit 130' INT TERM
nbd_tls_pki "$T/pki" || { echo "bench-front-tls: neither certtool nor openssl; skipped"; exit 0; }
next_port; MC=$PORT
start_memcached "$MC" "$T/mc.log" || { echo "bench-front-tls: memcached did not start"; exit 1; }
node_port() { sed -n 's/.* on [0-9.]*:\([0-9][0-9]*\), backend.*/\1/p' "$1" 2>/dev/null; }
start() { # LOG ARGS...: a node; sets PID and PORT
  log=$1; shift
  spawn "$log" "$BIN/bqos-node" --memcached-listen 127.0.0.1:0 --backend "memcached://127.0.0.1:$MC" \
    --policy rr "$@"
  PID=$SPAWNED
  wait_for '[ -n "$(node_port "$log")" ]' 5
  PORT=$(node_port "$log")
  [ -n "$PORT" ] || { echo "bench-front-tls: node did not start"; cat "$log"; exit 1; }
}
start "$T/plain.log"; PPID_=$PID; PPORT=$PORT
start "$T/tls.log" --tls-cert "$T/pki/server-cert.pem" --tls-key "$T/pki/server-key.pem"
TPID=$PID; TPORT=$PORT
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
client() { # PORT TLS(0/1): N pipelined gets; prints the seconds taken
  python3 - "$1" "$2" "$N" "$T/pki/ca-cert.pem" <<'PY'
import socket, ssl, sys, time
port, tls, n, ca = int(sys.argv[1]), sys.argv[2] == "1", int(sys.argv[3]), sys.argv[4]
s = socket.create_connection(("127.0.0.1", port), 10)
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
if tls:
    s = ssl.create_default_context(cafile=ca).wrap_socket(s, server_hostname="localhost")
def drain(want):
    buf = b""
    while buf.count(b"END\r\n") < want:
        b = s.recv(1 << 20)
        if not b:
            sys.exit("closed")
        buf += b
s.sendall(b"set bench:k 0 0 100\r\n" + b"v" * 100 + b"\r\n")
while not s.recv(100).endswith(b"STORED\r\n"):
    pass
batch = b"get bench:k\r\n" * 50
t0 = time.time()
for _ in range(n // 50):
    s.sendall(batch)
    drain(50)
print("%.3f" % (time.time() - t0))
PY
}
echo "mode round req_per_s node_cpu_us_per_req"
for r in $(seq "$ROUNDS"); do
  for m in plain tls; do
    if [ $m = plain ]; then pid=$PPID_; port=$PPORT; t=0; else pid=$TPID; port=$TPORT; t=1; fi
    c0=$(cpu $pid)
    secs=$(client $port $t) || { echo "bench-front-tls: client failed"; exit 1; }
    c1=$(cpu $pid)
    awk -v m=$m -v r=$r -v n=$N -v s="$secs" -v c=$((c1 - c0)) -v hz="$hz" \
      'BEGIN { printf "%s %d %.0f %.2f\n", m, r, n / s, c / hz * 1e6 / n }'
  done
done
