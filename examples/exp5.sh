#!/bin/sh
# exp5.sh - the pShift paper's Experiment 5 on loopback: block IO through NBD, 8 bqos-node block nodes (--backend file:), 200 buckets with Zipf reservations (80% of capacity) and demands, limits 1.5 x reservation, 2 demand changes per period, two 5 s periods; without QoS (rr) and with pShift; CSV, plot like Fig. 10, shares beside the paper's.
#
# Usage: examples/exp5.sh [--help]
# Environment (all optional):
#   BIN=bin          where bqos-node, bqos-nbd-load, bqos-load, bqos-controller,
#                    bqos-ctl are
#   OUT=out/exp5     output directory: exp5.csv, exp5.png, table.txt, per run
#                    rr/ and qos/ (intervals.csv, periods.csv, summary.json, ...)
#   DATA=/var/tmp/bqos-exp5   where the 1 GiB backing file is kept (vol.img)
#   IO_TIME_US=5000  emulated device time per IO (bqos-node --io-time-us):
#                    with 5 workers a server does ~1,000 IOs/s, the paper's rate;
#                    0 = the real file (then the 8 servers share this machine's
#                    disk and CPUs, and are neither independent nor equal)
#   OUTSTANDING=5    IOs at the device at once per server (the paper used 5)
#   PROFILE=3        seconds of the capacity profile run
#   RUNS="rr qos"    rr = nodes with --policy rr, no controller; qos = pShift
#                    (bqos-controller, nodes with the token scheduler)
#   WEIGHTED=0       1: bucket weight = reservation / smallest reservation and
#                    nodes with --weighted, so that round robin within the R
#                    and L classes serves buckets in proportion to their
#                    reservations (the paper: plain round robin)
#   NODE_OPTS=       extra bqos-node options for every node (split on spaces;
#                    e.g. "--pacing off --r-order rr": the paper's scheduler)
#   CTRL_OPTS=       extra bqos-controller options (e.g. "--limit-depth -1")
#   ROWS=20          bucket rows in the printed table (0: all)
#   CHECK=0          1: exit 1 unless at most 2% of the buckets miss their
#                    reservation by more than 1% and none exceeds its limit by
#                    more than 1% with pShift
#   SCEN=examples/exp5.json   another scenario of the same kind (block nodes,
#                    one per server; period, intervals, duration and servers
#                    are read from it), e.g. examples/single-server.json
#                    (issue 14's 75%-reserved single-server case); the
#                    Fig. 10 CSV and plot are made for exp5.json only
#
# The paper (Section IV-E, Fig. 10): with pShift only 1 bucket (0.5%) missed its
# reservation by more than 1%, and no bucket exceeded its limit.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../scripts/lib.sh"
example_init "$@"
OUT=${OUT:-out/exp5}
DATA=${DATA:-/var/tmp/bqos-exp5}
IO_TIME_US=${IO_TIME_US:-5000}
OUTSTANDING=${OUTSTANDING:-5}
PROFILE=${PROFILE:-3}
RUNS=${RUNS:-rr qos}
ROWS=${ROWS:-20}
WEIGHTED=${WEIGHTED:-0}
CHECK=${CHECK:-0}
SCEN=${SCEN:-$HERE/exp5.json}
# scen KEY: a top-level number of the scenario; NSRV: its servers.
scen() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(len(d["servers"]) if sys.argv[2] == "servers" else d[sys.argv[2]])' "$SCEN" "$1"; }
NSRV=$(scen servers) && PERIOD_S=$(scen period) && INTERVALS=$(scen intervals) && DURATION=$(scen duration) ||
  { echo "exp5: cannot read $SCEN" >&2; exit 1; }
FIG10=0; [ "$(basename "$SCEN")" = exp5.json ] && FIG10=1
LOGS=$OUT/logs

example_begin exp5 bqos-node bqos-nbd-load bqos-load
mkdir -p "$LOGS" "$DATA" || die "cannot create $OUT or $DATA"
VOL=$DATA/vol.img
if [ "$(stat -c %s "$VOL" 2>/dev/null)" != 1073741824 ]; then
  echo "exp5: creating the 1 GiB backing file $VOL"
  rm -f "$VOL"
  fallocate -l 1G "$VOL" 2>/dev/null || dd if=/dev/zero of="$VOL" bs=1M count=1024 status=none ||
    die "cannot create $VOL"
fi

# start_nbd_nodes POLICY CONTROLLER_EP BUCKETS CAP: 8 block nodes sharing $VOL.
start_nbd_nodes() {
  pol=$1; ctl=$2; cfg=$3; cap=$4
  NODE_PIDS=""; NODE_PORTS=""; SERVER_ARGS=""
  i=1
  while [ $i -le $NSRV ]; do
    next_port; np=$PORT
    set -- "$BIN/bqos-node" --name "s$i" --nbd-listen "127.0.0.1:$np" --backend "file:$VOL" \
      --policy "$pol" --outstanding "$OUTSTANDING" --io-time-us "$IO_TIME_US" --config "$cfg"
    [ "$ctl" = - ] || set -- "$@" --controller "$ctl" --capacity "$cap"
    [ "$WEIGHTED" = 1 ] && set -- "$@" --weighted
    # shellcheck disable=SC2086
    set -- "$@" ${NODE_OPTS:-}
    spawn "$LOGS/node-s$i-$pol.log" "$@"
    NODE_PIDS="$NODE_PIDS $SPAWNED"; NODE_PORTS="$NODE_PORTS $np"
    SERVER_ARGS="$SERVER_ARGS -s s$i=127.0.0.1:$np"
    i=$((i + 1))
  done
  for np in $NODE_PORTS; do wait_port "$np" 10 || return 1; done
}

stop_nbd_nodes() { for p in $NODE_PIDS; do stop_pid "$p"; done; NODE_PIDS=""; }

# Buckets exist on every node from the start (exports = buckets).
"$BIN/bqos-load" --print-buckets "$SCEN" >"$OUT/buckets-nominal.json" || die "bad scenario $SCEN"
start_nbd_nodes rr - "$OUT/buckets-nominal.json" 0 || die "bqos-node did not start (see $LOGS)"
# shellcheck disable=SC2086
"$BIN/bqos-nbd-load" $SERVER_ARGS --profile "$PROFILE" --profile-outstanding 10 "$SCEN" \
  >"$OUT/profile.txt" 2>"$LOGS/profile.log" || die "profile run failed (see $LOGS/profile.log)"
CAP=$(awk '$1 == "capacity" { print $2 }' "$OUT/profile.txt")
[ -n "$CAP" ] && [ "$CAP" -gt 0 ] || die "the profile gave no capacity"
echo "exp5: profiled capacity $CAP IOs/s per server ($(awk '$1 == "server" { printf "%s%s %s", sep, $2, $3; sep = ", " }' "$OUT/profile.txt"))"
"$BIN/bqos-load" -c "$CAP" --print-buckets "$SCEN" >"$OUT/buckets.json" || die "bad scenario"
if [ "$WEIGHTED" = 1 ]; then
  python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
lo = min(max(b["reservation"], 1) for b in d["buckets"])
for b in d["buckets"]:
    b["weight"] = max(1, round(b["reservation"] / lo))
json.dump(d, open(sys.argv[1], "w"), indent=1)
' "$OUT/buckets.json" || die "cannot add weights"
fi
echo "exp5: $(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["buckets"]))' "$OUT/buckets.json") buckets reserve $(python3 -c 'import json,sys; print(sum(b["reservation"] for b in json.load(open(sys.argv[1]))["buckets"]))' "$OUT/buckets.json") of $((CAP * NSRV)) IOs/s"

sums=""
for run in $RUNS; do
  rm -rf "${OUT:?}/$run"; mkdir -p "$OUT/$run"
  align=""
  case $run in
    rr)
      label=rr
      [ -n "$NODE_PIDS" ] || start_nbd_nodes rr - "$OUT/buckets.json" 0 || die "nodes did not start"
      ;;
    qos)
      label=pShift
      [ -x "$BIN/bqos-controller" ] || { echo "exp5: no $BIN/bqos-controller, skipping pShift"; continue; }
      stop_nbd_nodes
      next_port; cp=$PORT; next_port; ap=$PORT
      CTRL_EP="tcp://127.0.0.1:$cp"; ADMIN_EP="tcp://127.0.0.1:$ap"
      spawn "$LOGS/controller.log" "$BIN/bqos-controller" --buckets "$OUT/buckets.json" \
        --listen "$CTRL_EP" --admin "$ADMIN_EP" --period "${PERIOD_S}s" --intervals "$INTERVALS" --capacity "$CAP" ${CTRL_OPTS:-}
      CTRL_PID=$SPAWNED
      wait_port "$cp" 10 || die "bqos-controller did not start (see $LOGS)"
      start_nbd_nodes tokens "$CTRL_EP" "$OUT/buckets.json" "$CAP" || die "nodes did not start"
      sleep 1.5   # the nodes register and receive their first tokens
      if [ -x "$BIN/bqos-ctl" ]; then
        st=$("$BIN/bqos-ctl" --endpoint "$ADMIN_EP" --json status 2>/dev/null)
        now=$(date +%s.%N)
        el=$(echo "$st" | sed -n 's/.*"elapsed_ms": *\([0-9]*\).*/\1/p' | head -1)
        [ -n "$el" ] && align="--period-start $(echo "$now $el" | awk '{ printf "%.3f", $1 - $2 / 1000 }')"
      fi
      ;;
    *) die "unknown run $run (rr, qos)" ;;
  esac
  echo "exp5: run $label, $DURATION s"
  # shellcheck disable=SC2086
  "$BIN/bqos-nbd-load" $SERVER_ARGS -c "$CAP" -q -o "$OUT/$run" -l "$label" $align "$SCEN" \
    >"$OUT/$run/table.txt" 2>"$LOGS/load-$run.log" || die "run $label failed (see $LOGS/load-$run.log)"
  stop_nbd_nodes
  [ "$run" = qos ] && stop_pid "$CTRL_PID"
  sums="$sums $OUT/$run/summary.json"
done
[ -n "$sums" ] || die "nothing ran"

# exp5.csv: one row per bucket, IOs per period (the data of Fig. 10).
[ "$FIG10" = 1 ] && awk -F, -v T=5 '
  FNR == 1 { f++; next }
  { k = $2; if (!(k in idx)) { idx[k] = ++n; name[n] = k; res[k] = $3; lim[k] = $4 }
    v[f, k, $1] = $5 }
  END { print "index,bucket,reservation,limit,qos_p1,qos_p2,rr_p1,rr_p2"
    for (i = 1; i <= n; i++) { k = name[i]
      printf "%d,%s,%s,%s,%s,%s,%s,%s\n", i, k, res[k], lim[k], v[Q, k, 1], v[Q, k, 2], v[R, k, 1], v[R, k, 2] } }
' Q="$( [ -f "$OUT/qos/periods.csv" ] && echo 1 || echo 9)" R="$( [ -f "$OUT/qos/periods.csv" ] && [ -f "$OUT/rr/periods.csv" ] && echo 2 || { [ -f "$OUT/rr/periods.csv" ] && echo 1 || echo 9; })" \
  $( [ -f "$OUT/qos/periods.csv" ] && echo "$OUT/qos/periods.csv") $( [ -f "$OUT/rr/periods.csv" ] && echo "$OUT/rr/periods.csv") >"$OUT/exp5.csv"
[ "$FIG10" = 1 ] && echo "exp5: per-bucket IOs per period in $OUT/exp5.csv"
if [ "$FIG10" = 1 ] && command -v gnuplot >/dev/null 2>&1; then
  gnuplot -e "csv='$OUT/exp5.csv'; out='$OUT/exp5.png'; heading='Experiment 5: 8 NBD servers (file backend, $CAP IOs/s each), 200 buckets, 80% reserved, limits 1.5 x R'" \
    "$HERE/exp5.gp" 2>"$LOGS/gnuplot.log" && echo "exp5: plot $OUT/exp5.png"
fi
echo
# shellcheck disable=SC2086
"$BIN/bqos-load" --table --rows "$ROWS" $sums | tee "$OUT/table.txt"
echo

# Beside the paper: buckets missing the reservation by more than 1% (per
# period and over the run), and over the limit by more than 1%.
fails=0
for run in $RUNS; do
  f=$OUT/$run/periods.csv
  [ -f "$f" ] || continue
  line=$(awk -F, 'NR > 1 { b[$2] = 1; if ($6 == 0) miss[$2] = 1; if ($7 == 1) over[$2] = 1 }
    END { n = 0; m = 0; o = 0; for (k in b) { n++; if (k in miss) m++; if (k in over) o++ }
      printf "%d %d %d", n, m, o }' "$f")
  set -- $line
  label=$run; [ "$run" = qos ] && label=pShift
  printf "exp5: %-6s buckets missing R by >1%% in a period: %d of %d (%.1f%%); over L by >1%%: %d (%.1f%%)\n" \
    "$label" "$2" "$1" "$(echo "$2 $1" | awk '{ print 100 * $1 / $2 }')" "$3" "$(echo "$3 $1" | awk '{ print 100 * $1 / $2 }')"
  if [ "$run" = qos ] && [ "$CHECK" = 1 ]; then
    [ "$2" -le $(( $1 / 50 )) ] && [ "$3" = 0 ] || fails=1
  fi
done
[ "$FIG10" = 1 ] && echo "exp5: paper  buckets missing R by >1%: 1 of 200 (0.5%); over L: 0 (0%)"
echo "exp5: outputs in $OUT"
[ "$CHECK" = 1 ] && [ $fails -gt 0 ] && exit 1
exit 0
