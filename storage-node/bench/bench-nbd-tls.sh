#!/bin/sh
# bench-nbd-tls.sh - the cost of NBD over TLS on 4 KiB reads: nbdcopy reads a whole export in 4 KiB requests (16 in flight, one connection) from one bqos-nbd-node (--tls allow, policy rr) as nbd://, nbds:// with an X.509 certificate and nbds:// with a PSK; interleaved rounds, the node's CPU time per read (load-robust) and reads/s.
#
# Environment (all optional): BIN=bin, MB=256 (the export, MiB), ROUNDS=5.
# Needs nbdcopy and certtool or openssl.
set -u
BIN=${BIN:-bin}
MB=${MB:-256}
ROUNDS=${ROUNDS:-5}
HERE=$(cd "$(dirname "$0")/../../scripts" && pwd)
. "$HERE/lib.sh"
command -v nbdcopy >/dev/null 2>&1 || { echo "bench-nbd-tls: nbdcopy not installed; skipped"; exit 0; }
T=$(mktemp -d /tmp/bench-nbd-tls.XXXXXX)
trap 'cleanup; rm -rf "$T"' EXIT
trap 'exit 130' INT TERM
nbd_tls_pki "$T/pki" || { echo "bench-nbd-tls: neither certtool nor openssl; skipped"; exit 0; }
spawn "$T/node.log" "$BIN/bqos-nbd-node" --nbd-listen 127.0.0.1:0 --backend "file:$T/store/" \
  --export-size "${MB}m" --policy rr --tls allow --tls-cert "$T/pki/server-cert.pem" \
  --tls-key "$T/pki/server-key.pem" --tls-psk "$T/pki/keys.psk"
PID=$SPAWNED
wait_for '[ -n "$(sed -n "s/.* on [0-9.]*:\([0-9][0-9]*\), backend.*/\1/p" "$T/node.log")" ]' 5
PORT=$(sed -n 's/.* on [0-9.]*:\([0-9][0-9]*\), backend.*/\1/p' "$T/node.log")
[ -n "$PORT" ] || { echo "bench-nbd-tls: node did not start"; cat "$T/node.log"; exit 1; }
head -c $((MB * 1048576)) /dev/urandom | nbdcopy - "nbd://127.0.0.1:$PORT/default" # data, not holes
reads=$((MB * 256))
hz=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' "/proc/$PID/stat"; }
echo "mode round reads_per_s node_cpu_us_per_read"
for r in $(seq "$ROUNDS"); do
  for m in plain x509 psk; do
    case $m in
      plain) u="nbd://127.0.0.1:$PORT/default" ;;
      x509) u="nbds://127.0.0.1:$PORT/default?tls-certificates=$T/pki" ;;
      psk) u="nbds://alice@127.0.0.1:$PORT/default?tls-psk-file=$T/pki/keys.psk" ;;
    esac
    c0=$(cpu); t0=$(date +%s.%N)
    nbdcopy --request-size=4096 --requests=16 --connections=1 "$u" null:
    t1=$(date +%s.%N); c1=$(cpu)
    echo "$m $r $t0 $t1 $c0 $c1" | awk -v n="$reads" -v hz="$hz" \
      '{printf "%s %s %.0f %.1f\n", $1, $2, n / ($4 - $3), ($6 - $5) / hz * 1e6 / n}'
  done
done | tee "$T/rows"
for m in plain x509 psk; do
  awk -v m=$m '$1 == m {print $4}' "$T/rows" | sort -n |
    awk -v m=$m '{v[NR] = $1} END {printf "median %s: %.1f us node CPU per 4 KiB read\n", m, v[int((NR + 1) / 2)]}'
done
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
