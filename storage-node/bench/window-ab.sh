#!/bin/sh
# window-ab.sh - throughput of bqos-node's memcached front under --policy rr and --policy tokens (auto window, or any other node options) with memcaslap, a client we did not write: interleaved rounds on one memcached, then the median TPS of each variant and the load average.
# Usage: window-ab.sh [ROUNDS] [SECONDS]
#   CLIENT    memcaslap (default) or bqos-load (its --profile: closed loop,
#             50 requests in flight over 4 buckets, 50% sets of 4 KB values)
#   VARIANTS  '|'-separated node options, one variant each (default
#             "--policy rr|--policy tokens|--policy tokens --outstanding 5")
#   MEMCASLAP memcaslap options besides -s and -t (default "-T 2 -c 50 -X 100")
#   BIN       where bqos-node is (default bin)
# Prints one line per run ("variant=N round=R tps=... node_us_per_op=...
# window=...": memcaslap's TPS, the node's CPU time (user + system) per
# transaction, the window after the run) and one "median" line per variant
# (x_variant1: the median over rounds of its TPS / variant 1's TPS in the
# same round).
set -u
. "$(dirname "$0")/../../scripts/lib.sh"
ROUNDS=${1:-5}; SECS=${2:-5}; BIN=${BIN:-bin}
VARIANTS=${VARIANTS:-"--policy rr|--policy tokens|--policy tokens --outstanding 5"}
MEMCASLAP=${MEMCASLAP:-"-T 2 -c 50 -X 100"}
CLIENT=${CLIENT:-memcaslap}
case "$CLIENT" in
  memcaslap) command -v memcaslap >/dev/null || { echo "window-ab: memcaslap missing (scripts/deps.sh)" >&2; exit 1; } ;;
  bqos-load) [ -x "$BIN/bqos-load" ] || { echo "window-ab: $BIN/bqos-load missing (make)" >&2; exit 1; } ;;
  *) echo "window-ab: CLIENT is memcaslap or bqos-load" >&2; exit 2 ;;
esac
T=$(mktemp -d /tmp/window-ab.XXXXXX)
trap 'cleanup; rm -rf "$T"' EXIT
next_port; mc=$PORT
start_memcached "$mc" "$T/mc.log" || exit 1
cat >"$T/one.json" <<JSON
{"duration": $SECS, "workload": {"preload": 1000, "outstanding": 13},
 "servers": [{"name": "s1", "address": "127.0.0.1:1"}],
 "buckets": [{"name": "a", "servers": ["s1"]}, {"name": "b", "servers": ["s1"]},
             {"name": "c", "servers": ["s1"]}, {"name": "d", "servers": ["s1"]}]}
JSON
tck=$(getconf CLK_TCK)
# median: the median of the numbers on stdin, one a line, and their range.
median() {
  sort -n | awk '{ a[NR] = $1 } END { m = NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2
    printf "%.6g (%g..%g, %d runs)", m, a[1], a[NR], NR }'
}
nv=$(echo "$VARIANTS" | awk -F'|' '{ print NF }')
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
r=1
while [ "$r" -le "$ROUNDS" ]; do
  v=1
  while [ "$v" -le "$nv" ]; do
    opts=$(echo "$VARIANTS" | awk -F'|' -v i="$v" '{ print $i }')
    next_port; nd=$PORT
    # shellcheck disable=SC2086
    spawn "$T/node.log" "$BIN/bqos-node" --name ab --memcached-listen "127.0.0.1:$nd" \
      --backend "memcached://127.0.0.1:$mc" --log-level warn $opts
    np=$SPAWNED
    wait_port "$nd" 10 || exit 1
    t0=$(awk '{print $14 + $15}' "/proc/$np/stat")
    if [ "$CLIENT" = bqos-load ]; then
      tps=$("$BIN/bqos-load" -q --profile "$SECS" --profile-outstanding 50 \
        -s "s1=127.0.0.1:$nd,127.0.0.1:$mc" "$T/one.json" 2>/dev/null | awk '$1 == "capacity" { print $2 + 0 }')
    else
      # shellcheck disable=SC2086
      tps=$(memcaslap -s "127.0.0.1:$nd" -t "${SECS}s" $MEMCASLAP 2>&1 |
        awk '/^Run time/ { for (i = 1; i < NF; i++) if ($i == "TPS:") t = $(i + 1) } END { print t + 0 }')
    fi
    t1=$(awk '{print $14 + $15}' "/proc/$np/stat")
    us=$(echo "$t0 $t1 $tps $SECS $tck" | awk '{ printf "%.1f", $3 ? ($2 - $1) / $5 * 1e6 / ($3 * $4) : 0 }')
    win=$(mc_ask "$nd" 'stats\r\n' | tr '|' '\n' | awk '$2 == "bqos_window" { print $3 }')
    stop_pid "$np"
    echo "variant=$v round=$r tps=$tps node_us_per_op=$us window=$win opts=\"$opts\""
    echo "$v $tps $us" >>"$T/all"
    v=$((v + 1))
  done
  r=$((r + 1))
done
v=1
while [ "$v" -le "$nv" ]; do
  opts=$(echo "$VARIANTS" | awk -F'|' -v i="$v" '{ print $i }')
  tps=$(awk -v v="$v" '$1 == v { print $2 }' "$T/all" | median)
  us=$(awk -v v="$v" '$1 == v { print $3 }' "$T/all" | median)
  # each run's TPS over variant 1's in the same round: pairs the rounds, so
  # that the machine's load (which moves all variants of a round alike)
  # cancels out of the ratio
  x=$(awk -v v="$v" '{ t[$1, ++n[$1]] = $2 } END { for (i = 1; i <= n[v]; i++) if (t[1, i] > 0) print t[v, i] / t[1, i] }' "$T/all" | median)
  echo "median tps=$tps node_us_per_op=$us x_variant1=$x opts=\"$opts\""
  v=$((v + 1))
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
