#!/bin/sh
# bench-nbd.sh - 4 KiB random reads from one 1 GiB file: fio directly on the file vs fio's nbd engine through bqos-node --backend file: (policy rr) vs through nbdkit's file plugin; same queue depth, interleaved rounds, medians.
#
# Environment (all optional):
#   BIN=bin            where bqos-node is
#   DIR=/var/tmp/bqos-nbd-bench   where the 1 GiB backing file lives (kept)
#   QD=8               IOs in flight: fio iodepth (nbd, libaio) or numjobs
#                      (psync), bqos-node --outstanding/--workers
#   T=5                seconds per measurement
#   ROUNDS=3           interleaved rounds; the median is reported
#   MODES="direct cached"  direct: O_DIRECT (fio --direct=1, bqos --direct,
#                      nbdkit cache=none), page cache dropped before each run;
#                      cached: the file is in the page cache (buffered IO)
#   TRANSPORT=tcp      tcp: both NBD servers on loopback TCP; unix: both on
#                      Unix-domain sockets (nbd+unix URIs)
#   CSV=               also append "mode,server,round,iops,cpu_us_per_io" rows
# Besides IOPS it prints each NBD server's CPU time (user + system) per IO,
# which other jobs on a shared machine disturb much less than IOPS.
set -u
BIN=${BIN:-bin}
DIR=${DIR:-/var/tmp/bqos-nbd-bench}
QD=${QD:-8}
T=${T:-5}
ROUNDS=${ROUNDS:-3}
MODES=${MODES:-direct cached}
CSV=${CSV:-}
TRANSPORT=${TRANSPORT:-tcp}
case $TRANSPORT in tcp|unix) ;; *) echo "bench-nbd: TRANSPORT must be tcp or unix" >&2; exit 2 ;; esac
for t in fio nbdkit python3; do
  command -v $t >/dev/null 2>&1 || { echo "bench-nbd: $t not installed (scripts/deps.sh)"; exit 1; }
done
[ -x "$BIN/bqos-node" ] || { echo "bench-nbd: $BIN/bqos-node not built"; exit 1; }
mkdir -p "$DIR" || exit 1
F=$DIR/vol.img
if [ "$(stat -c %s "$F" 2>/dev/null)" != 1073741824 ]; then
  echo "bench-nbd: writing $F (1 GiB)"
  fio --name=mk --filename="$F" --size=1g --rw=write --bs=1m --direct=1 --output=/dev/null || exit 1
fi
tmp=$(mktemp -d /tmp/bench-nbd.XXXXXX)
srv=""
cleanup() { [ -n "$srv" ] && kill -TERM "$srv" 2>/dev/null && wait "$srv" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
trap 'exit 1' INT TERM

freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
dropcache() { python3 -c 'import os,sys; fd=os.open(sys.argv[1],os.O_RDONLY); os.posix_fadvise(fd,0,0,os.POSIX_FADV_DONTNEED)' "$F"; }
warmcache() { cat "$F" >/dev/null; }
iops() { python3 -c 'import json,sys; print(int(json.load(open(sys.argv[1]))["jobs"][0]["read"]["iops"]))' "$1" 2>/dev/null || echo 0; }
# listen_spec NAME: sets LISTEN (the server's address) and URI_BASE; waits
# with waitsrv.
listen_spec() {
  if [ "$TRANSPORT" = unix ]; then
    SOCK="$tmp/$1.sock"; rm -f "$SOCK"; URI_BASE="nbd+unix://"; URI_TAIL="?socket=$SOCK"
  else
    PORT=$(freeport); URI_BASE="nbd://127.0.0.1:$PORT"; URI_TAIL=""
  fi
}
waitsrv() {
  if [ "$TRANSPORT" = unix ]; then
    i=0; while [ $i -lt 50 ]; do [ -S "$SOCK" ] && return 0; sleep 0.1; i=$((i+1)); done; return 1
  fi
  waitport "$PORT"
}
waitport() { i=0; while [ $i -lt 50 ]; do python3 -c 'import socket,sys; socket.create_connection(("127.0.0.1",int(sys.argv[1])),0.2)' "$1" 2>/dev/null && return 0; sleep 0.1; i=$((i+1)); done; return 1; }

COMMON="--rw=randread --bs=4k --size=1g --time_based --runtime=$T --norandommap --randrepeat=0 --output-format=json --group_reporting"

run_direct_fio() { # mode
  if [ "$1" = direct ]; then
    fio --name=file --filename="$F" --ioengine=libaio --direct=1 --iodepth="$QD" $COMMON --output="$tmp/o.json" >/dev/null 2>&1
  else
    fio --name=file --filename="$F" --ioengine=psync --numjobs="$QD" $COMMON --output="$tmp/o.json" >/dev/null 2>&1
  fi
  iops "$tmp/o.json"
}

# run_nbd URI: prints "IOPS CPU_US_PER_IO", the second being the
# server's ($srv) user+system CPU time per completed IO: a figure that
# other jobs on the machine disturb far less than IOPS.
run_nbd() {
  t0=$(awk '{ print $14 + $15 }' "/proc/$srv/stat")
  fio --name=nbd --ioengine=nbd --uri="$1" --iodepth="$QD" $COMMON --output="$tmp/o.json" >/dev/null 2>&1
  t1=$(awk '{ print $14 + $15 }' "/proc/$srv/stat")
  i=$(iops "$tmp/o.json")
  echo "$i $(echo "$t0 $t1 $i $T $(getconf CLK_TCK)" | awk '{ printf "%.1f", ($3 > 0 ? ($2 - $1) / $5 * 1e6 / ($3 * $4) : 0) }')"
}

run_bqos() { # mode
  listen_spec bqos
  d=""; [ "$1" = direct ] && d=--direct
  if [ "$TRANSPORT" = unix ]; then l="unix:$SOCK"; else l="127.0.0.1:$PORT"; fi
  "$BIN/bqos-node" --nbd-listen "$l" --backend "file:$F" --buckets vol --policy rr \
    --outstanding "$QD" $d --log-level warn 2>"$tmp/bqos.log" &
  srv=$!
  waitsrv || { echo "0 0"; return; }
  run_nbd "$URI_BASE/vol$URI_TAIL"
  kill -TERM "$srv"; wait "$srv" 2>/dev/null; srv=""
}

run_nbdkit() { # mode
  listen_spec nbdkit
  c=""; [ "$1" = direct ] && c=cache=none
  if [ "$TRANSPORT" = unix ]; then l="-U $SOCK"; else l="-p $PORT -i 127.0.0.1"; fi
  nbdkit -f $l -t "$QD" file "$F" $c 2>"$tmp/nbdkit.log" &
  srv=$!
  waitsrv || { echo "0 0"; return; }
  run_nbd "$URI_BASE/$URI_TAIL"
  kill -TERM "$srv"; wait "$srv" 2>/dev/null; srv=""
}

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

echo "bench-nbd: 4 KiB random reads of $F, queue depth $QD, ${T}s x $ROUNDS rounds, NBD over $TRANSPORT, $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
printf "%-8s %12s %12s %12s %9s %9s %11s %11s\n" mode "fio-file" "bqos-nbd" "nbdkit" "bqos/file" "bqos/kit" \
  "bqos us/IO" "kit us/IO"
for mode in $MODES; do
  a=""; b=""; k=""; cb=""; ck=""
  r=1
  while [ $r -le "$ROUNDS" ]; do
    for s in file bqos nbdkit; do
      if [ "$mode" = direct ]; then dropcache; else warmcache; fi
      c=""
      case $s in
        file) v=$(run_direct_fio "$mode"); a="$a $v" ;;
        bqos) set -- $(run_bqos "$mode"); v=$1; c=$2; b="$b $v"; cb="$cb $c" ;;
        nbdkit) set -- $(run_nbdkit "$mode"); v=$1; c=$2; k="$k $v"; ck="$ck $c" ;;
      esac
      [ -n "$CSV" ] && echo "$mode,$s,$r,$v,$c" >>"$CSV"
    done
    r=$((r + 1))
  done
  ma=$(echo "$a" | median); mb=$(echo "$b" | median); mk=$(echo "$k" | median)
  printf "%-8s %12s %12s %12s %8.0f%% %8.0f%% %11s %11s\n" "$mode" "$ma" "$mb" "$mk" \
    "$(echo "$mb $ma" | awk '{ print $2 ? 100 * $1 / $2 : 0 }')" \
    "$(echo "$mb $mk" | awk '{ print $2 ? 100 * $1 / $2 : 0 }')" \
    "$(echo "$cb" | median)" "$(echo "$ck" | median)"
  echo "         rounds: file$a | bqos$b | nbdkit$k"
done
