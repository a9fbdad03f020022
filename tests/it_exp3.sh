#!/bin/sh
# it_exp3.sh - a short Experiment 3 on loopback (real memcached, bqos-nodes, bqos-controller): with pShift every reservation is met (>= 99%) and, with limits, none is exceeded by more than 1%.
set -u
EX=$(cd "$(dirname "$0")/../examples" && pwd)
T=$(mktemp -d /tmp/it_exp3.XXXXXX)
trap 'rm -rf "$T"' EXIT
BIN=${BIN:-bin} OUT=$T RUNS="res lim" DUR=${DUR:-4} PROFILE=2 PRELOAD=1000 CHECK=1 \
  sh "$EX/exp3.sh"
rc=$?
for run in res lim; do
  if [ ! -s "$T/$run/summary.json" ]; then
    echo "it_exp3: run $run produced no summary (is bqos-controller built?)"
    rc=1
  fi
done
[ $rc -ne 0 ] && for f in "$T"/logs/*.log; do echo "== $f"; tail -5 "$f"; done
exit $rc
