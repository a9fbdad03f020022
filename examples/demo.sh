#!/bin/sh
# demo.sh - `make demo`: the pShift paper's Experiment 3, briefly, on loopback: memcached servers, bqos-nodes and a controller; without QoS, with reservations, with reservations and limits; side-by-side table and plot.
#
# Usage: examples/demo.sh   (BIN=bin by default; OUT=out/demo; DUR=4 seconds
# per run; the other knobs of examples/exp3.sh apply).  Every process it
# starts is stopped on exit, on Ctrl-C and on failure.
set -u
case "${1:-}" in -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;; esac
HERE=$(cd "$(dirname "$0")" && pwd)
cat <<'TXT'
bqos demo: 4 storage servers (memcached, each behind a bqos-node) and 4
buckets, continuously backlogged with 15 outstanding requests per server on
servers {s1}, {s1,s2}, {s1,s2,s3}, {s1,s2,s3,s4} (pShift paper, Experiment 3).
Each bucket reserves 60% of one server's profiled capacity.
  rr          no QoS: round robin at every node (expected 3:7:13:25)
  pShift-R    controller + token scheduler, reservations (limits 400%)
  pShift-R+L  reservations and limits of 120%
Met = at least 99% of the reservation; over = more than 101% of the limit.

TXT
export BIN="${BIN:-bin}" OUT="${OUT:-out/demo}" DUR="${DUR:-4}" PROFILE="${PROFILE:-2}" \
  PRELOAD="${PRELOAD:-2000}" RUNS="${RUNS:-rr res lim}"
exec sh "$HERE/exp3.sh"
