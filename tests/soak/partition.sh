#!/bin/sh
# partition.sh - `make soak`'s partition pass (issue 26): the partition suite's cases run long (the busy-host bound is tests/soak/busy-host.sh).
#
# Usage: tests/soak/partition.sh   (BIN=bin; PART_CASES="paused cut
# etcdpause starved slow lease" by default (busy too when named: `make soak`
# runs tests/soak/busy-host.sh after this, the bound at a target load
# average), a subset to run fewer; BUSY_SECS
# 600, BUSY 6).  Each case is a tests/it script with longer faults:
#   busy       tests/it/busy_host.sh for BUSY_SECS s with BUSY busy loops:
#              0 elections after the first, 0 node fallbacks, red <= 1.05 x L
#              in every node period (MAX_ELECTIONS=0 MAX_FALLBACKS=0)
#   paused     it_leader_paused.sh, the leader stopped 30 s
#   cut        it_leader_etcd_cut.sh, the leader cut from etcd 60 s
#   etcdpause  it_etcd_paused.sh, etcd stopped 30 s (past the node's 10
#              period fallback lease: red held at 0, then served again)
#   starved    it_ctrl_starved.sh, the leader starved 60 s at 1%, 5% and 20%
#              of a CPU (cgroup; skipped without one)
#   slow       it_etcd_slow.sh, etcd paused 450 ms of every 700 ms for 60 s
#   lease      it_partition_lease.sh (a node cut from the controller past
#              --forget-after), three times
# Prints one line per case and exits 1 if any failed (their output is kept
# in a scratch directory, said at the end).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
IT=$HERE/../it
BIN=${BIN:-bin}
export BIN
CASES=${PART_CASES:-paused cut etcdpause starved slow lease} # busy: tests/soak/busy-host.sh has it
OUT=$(mktemp -d /tmp/soak-partition.XXXXXX)
FAILED=""
say() { echo "soak-partition: $(date -u +%H:%M:%S) $*"; }
# run NAME [VAR=VALUE...] SCRIPT: one case, its output in $OUT/NAME.log
run() {
  name=$1; shift
  t0=$(date +%s)
  env "$@" >"$OUT/$name.log" 2>&1; rc=$?
  line=$(grep -E "^(busy_host:|# the fault|# limit 150 from|# red per 1 s|# worst)" "$OUT/$name.log" | head -2 |
    tr '\n' ' ' | cut -c1-300)
  if [ $rc = 0 ]; then
    say "ok $name ($(($(date +%s) - t0)) s): $line"
  else
    say "FAILED $name ($(($(date +%s) - t0)) s): $(grep '^not ok' "$OUT/$name.log" | head -3 | tr '\n' ' ')"
    FAILED="$FAILED $name"
  fi
}
for c in $CASES; do
  case $c in
    busy) run busy SECS="${BUSY_SECS:-600}" BUSY="${BUSY:-6}" MAX_ELECTIONS=0 MAX_FALLBACKS=0 \
      sh "$IT/busy_host.sh" ;;
    paused) run paused PAUSE_S=30 sh "$IT/it_leader_paused.sh" ;;
    cut) run cut CUT_S=60 sh "$IT/it_leader_etcd_cut.sh" ;;
    etcdpause) run etcdpause PAUSE_S=30 PT_FOLLOW_S=10 sh "$IT/it_etcd_paused.sh" ;;
    starved)
      for q in 1000 5000 20000; do
        run "starved-$q" STARVE_S=60 QUOTA_US=$q PERIOD_US=100000 sh "$IT/it_ctrl_starved.sh"
      done ;;
    slow) run slow PAUSE_S=60 sh "$IT/it_etcd_slow.sh" ;;
    lease) for i in 1 2 3; do run "lease-$i" sh "$IT/it_partition_lease.sh"; done ;;
    *) say "unknown case $c"; FAILED="$FAILED $c" ;;
  esac
done
if [ -n "$FAILED" ]; then
  say "failed:$FAILED (output in $OUT)"
  exit 1
fi
say "all passed (output in $OUT)"
