#!/bin/sh
# bench-pair.sh - the node's CPU per memcached request, two builds served at the same time (issue 30): a node of each on one memcached, each driven by its own memcaslap (-T 2 -c 50 -X 100) in the same seconds, so that the other sessions' load on a shared host falls on both alike; per round each node's CPU (user + system from /proc) over its own request count from `stats`, and the ratio B/A.  With no builds given both are this build's: the ratio then shows what the position alone gives (the calibration).
# Usage: bench-pair.sh [A_BIN] [B_BIN] [ROUNDS] [SECS]   (A_BIN, B_BIN default $BIN, i.e. bin; NODE_ARGS: options for both nodes, default --policy rr)
set -u
. "$(dirname "$0")/../../scripts/lib.sh"
. "$(dirname "$0")/front_lib.sh"
BIN=${BIN:-bin}; A=${1:-$BIN}; B=${2:-$BIN}; ROUNDS=${3:-6}; SECS=${4:-4}
NODE_ARGS=${NODE_ARGS:---policy rr}
command -v memcaslap >/dev/null || { echo "bench-pair: memcaslap not installed (libmemcached-tools)" >&2; exit 1; }
T=$(mktemp -d /tmp/bench-pair.XXXXXX)
trap 'cleanup; rm -rf "$T"' EXIT
tck=$(getconf CLK_TCK)
next_port; mc=$PORT
start_memcached "$mc" "$T/mc.log" || exit 1
next_port; pa=$PORT; node a "$A" "$pa"; na=$SPAWNED
next_port; pb=$PORT; node b "$B" "$pb"; nb=$SPAWNED
echo "# $(nproc) cores, load average before: $(cut -d' ' -f1-3 /proc/loadavg); A=$A B=$B; node options: $NODE_ARGS; memcaslap -T 2 -c 50 -X 100 for ${SECS} s against each at once"
printf '%-5s %9s %8s %9s %8s %7s %6s\n' round a_reqs a_us/op b_reqs b_us/op b/a load
r=1
while [ "$r" -le "$ROUNDS" ]; do
  qa0=$(served "$pa"); qb0=$(served "$pb"); ta0=$(ticks "$na"); tb0=$(ticks "$nb")
  memcaslap -s "127.0.0.1:$pa" -T 2 -c 50 -t "${SECS}s" -X 100 >"$T/ca" 2>&1 &
  ca=$!
  memcaslap -s "127.0.0.1:$pb" -T 2 -c 50 -t "${SECS}s" -X 100 >"$T/cb" 2>&1 &
  cb=$!
  wait "$ca" "$cb"
  qa1=$(served "$pa"); qb1=$(served "$pb"); ta1=$(ticks "$na"); tb1=$(ticks "$nb")
  echo "$r $((qa1 - qa0)) $((ta1 - ta0)) $((qb1 - qb0)) $((tb1 - tb0)) $(cut -d' ' -f1 /proc/loadavg)" |
    awk -v tck="$tck" '{ a = $3 * 1e6 / tck / ($2 > 0 ? $2 : 1); b = $5 * 1e6 / tck / ($4 > 0 ? $4 : 1)
      printf "%-5s %9d %8.2f %9d %8.2f %7.3f %6s\n", $1, $2, a, $4, b, (a > 0 ? b / a : 0), $6 }' |
    tee -a "$T/all"
  r=$((r + 1))
done
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
sort -n -k6 "$T/all" | awk '{ v[NR] = $6; a += $3; b += $5 }
  END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
        printf "# means: A %.2f, B %.2f us/op; B/A median of the rounds %.3f, ratio of the means %.3f\n", a / NR, b / NR, m, b / a }'
