#!/bin/sh
# bench-etcdkeys.sh - the bucket table in etcd as a key per bucket: a leader's bootstrap of N buckets, a standby's whole read, one `set` at the leader and the standby's time to follow it, and the bytes one change writes (docs/performance.md, "The bucket table in etcd, a key per bucket").
# Usage: controller/bench/bench-etcdkeys.sh [N...]   (default: 100000; BIN defaults to bin; TIMEOUT=S caps each wait, default 600; REPS=K changes timed, default 6: median/max printed)
#
# A real etcd (data in /dev/shm when writable) and two bqos-controllers
# (--etcd, no nodes, --capacity 10^9, lease 10 s, takeover after 8
# intervals of 500 ms, --etcd-timeout 5s: today's O(n) `set` and the
# whole read at a million buckets take the loop for seconds, and that is
# not what is measured).  Figures come from the controllers' debug lines:
#   bootstrap   c1's "N buckets written ... in T transactions, X ms"
#   whole read  c2's "read whole: ... read X ms, applied Y ms"
#   set         bqos-ctl's round trip at c1 (the change checked from sums,
#               one transaction, then made in place: O(1) in the table)
#   follow      from c1's "one transaction" line (the change is in etcd)
#               to c2's "set from etcd" line (log timestamps, ms): the
#               watch, then the apply at the standby
#   apply       the standby's loop time for the change, as it logs it
#               ("set from etcd (..., X ms)"): the stall of its loop; before
#               the change in place, admin.c copied the table, read the
#               file and rebuilt ctrl (14 s at a million buckets)
#   bytes       c1's "one transaction, B bytes of keys and values"; the
#               layout before wrote the whole table (the file's size) per
#               change, and refused it over 1.5 MiB
set -u
HERE=$(cd "$(dirname "$0")/../../scripts" && pwd)
. "$HERE/lib.sh"
BIN=${BIN:-bin}
CAP=${TIMEOUT:-600}
REPS=${REPS:-6} # changes timed at each size (a set and a remove in turn)
T=$(mktemp -d /tmp/bench_etcdkeys.XXXXXX)
ED="$T/etcd"
[ -d /dev/shm ] && [ -w /dev/shm ] && ED=$(mktemp -d /dev/shm/bench_etcdkeys.XXXXXX)
trap 'cleanup; rm -rf "$T" "$ED"' EXIT
trap 'exit 130' INT TERM

# ts LINE: the ISO timestamp at the start of a log line in ms since the epoch
ts() { python3 -c "import sys,datetime; print(int(datetime.datetime.strptime(sys.argv[1][:23], '%Y-%m-%dT%H:%M:%S.%f').timestamp()*1000))" "$1"; }

start_etcd bench "$T/etcd.log" || { echo "etcd did not start"; tail "$T/etcd.log"; exit 1; }
echo "| buckets | file | bootstrap | transactions | standby whole read (read + apply) | change at the leader (median/max) | standby follows (median/max) | standby's apply, its loop stall (median/max) | bytes per change (before: the file) |"
echo "|---|---|---|---|---|---|---|---|---|"
for n in ${@:-100000}; do
  bucket_table "$n" "$T/b1.json"
  cp "$T/b1.json" "$T/b2.json"
  size=$(wc -c <"$T/b1.json")
  for i in 1 2; do
    next_port; eval "LS$i=\$PORT"; next_port; eval "AD$i=\$PORT"
  done
  go() {
    eval "ls=\$LS$1 ad=\$AD$1"
    spawn "$T/c$1.$n.log" "$BIN/bqos-controller" --buckets "$T/b$1.json" --listen "tcp://127.0.0.1:$ls" \
      --admin "tcp://127.0.0.1:$ad" --period 1s --intervals 2 --capacity 1000000000 \
      --etcd "$ETCD" --id "c$1" --cluster "n$n" --lease-ttl 10 --takeover-after 8 \
      --etcd-timeout 5s --log-level debug
    eval "PID$1=\$SPAWNED"
  }
  go 1
  wait_for 'grep -q "buckets written" "$T/c1.$n.log"' "$CAP"
  boot=$(grep -m1 "buckets written" "$T/c1.$n.log" | sed 's/.* in \([0-9]*\) transactions, \([0-9]*\) ms.*/\2 ms|\1/')
  go 2
  wait_for 'grep -q "read whole:" "$T/c2.$n.log"' "$CAP"
  whole=$(grep -m1 "read whole:" "$T/c2.$n.log" | sed 's/.*read \([0-9]*\) ms, applied \([0-9]*\) ms.*/\1 + \2 ms/')
  sleep 2
  # REPS sets (tenant-0000001.., a set and a remove in turn): each one's
  # round trip at the leader, follow time and the standby's apply
  : >"$T/reps.$n"
  k=1
  while [ $k -le "$REPS" ]; do
    nm=$(printf "tenant-%07d" "$k")
    if [ $((k % 2)) = 1 ]; then op="set $nm --reservation 11 --limit 2222"; what="set"; kind=put
    else op="remove $nm"; what="removed"; kind=deleted; fi
    t0=$(date +%s%N)
    # shellcheck disable=SC2086
    "$BIN/bqos-ctl" --endpoint "tcp://127.0.0.1:$AD1" --timeout $((CAP * 1000)) $op >/dev/null
    set_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
    wait_for 'grep -q "bucket $nm $what from etcd" "$T/c2.$n.log"' 60
    a=$(ts "$(grep -m1 "bucket $nm $kind: one transaction," "$T/c1.$n.log")")
    b=$(ts "$(grep -m1 "bucket $nm $what from etcd" "$T/c2.$n.log")")
    ap=$(grep -m1 "bucket $nm $what from etcd" "$T/c2.$n.log" | sed -n 's/.*; \([0-9.]*\) ms).*/\1/p')
    echo "$set_ms $((b - a)) ${ap:-0}" >>"$T/reps.$n"
    k=$((k + 1))
  done
  # col K: median/max of column K of the reps
  col() { awk -v k="$1" '{print $k}' "$T/reps.$n" | sort -n |
    awk '{a[NR] = $1} END {if (NR) printf "%s/%s", a[int((NR + 1) / 2)], a[NR]; else printf "n/a"}'; }
  bytes=$(grep -m1 "put: one transaction," "$T/c1.$n.log" | sed 's/.*, \([0-9]*\) bytes of keys.*/\1/')
  echo "| $n | $((size / 1024)) KiB | $(echo "$boot" | cut -d'|' -f1) | $(echo "$boot" | cut -d'|' -f2) | $whole | $(col 1) ms | $(col 2) ms | $(col 3) ms | $bytes B ($size B) |"
  stop_pid "$PID1" "$PID2"
done
