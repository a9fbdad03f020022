#!/bin/sh
# bench-two-nodes.sh - the ceiling of `bqos-node --threads 2` on this host: memcaslap against one bqos-node, and the same load split over two independent bqos-nodes (no shared buckets) on one memcached, interleaved rounds; TPS and the CPU every process used (node(s), memcached, memcaslap) per request.
# Usage: bench-two-nodes.sh [ROUNDS] [SECS]   (BIN=bin by default; NODE_ARGS: extra bqos-node options)
# Two processes bound what two loop threads sharing one node could reach: the
# threads would add the hand-off and the shared scheduler on top.
set -u
. "$(dirname "$0")/../../scripts/lib.sh"
ROUNDS=${1:-3}; SECS=${2:-4}; BIN=${BIN:-bin}; NODE_ARGS=${NODE_ARGS:-}
T=$(mktemp -d /tmp/bench-two.XXXXXX)
trap 'cleanup; rm -rf "$T"' EXIT
command -v memcaslap >/dev/null || { echo "bench-two-nodes: memcaslap not installed" >&2; exit 1; }
tck=$(getconf CLK_TCK)
next_port; mc=$PORT
start_memcached "$mc" "$T/mc.log" || exit 1
mcpid=$(ss -Hltnp "sport = :$mc" | sed -n 's/.*pid=\([0-9]*\).*/\1/p' | head -1)
node() { # node PORT: starts a node, its pid in $SPAWNED
  # shellcheck disable=SC2086
  spawn "$T/node-$1.log" "$BIN/bqos-node" --name "n$1" --memcached-listen "127.0.0.1:$1" \
    --backend "memcached://127.0.0.1:$mc" --log-level warn $NODE_ARGS
  wait_port "$1" 10 || exit 1
}
next_port; p1=$PORT; node "$p1"; n1=$SPAWNED
next_port; p2=$PORT; node "$p2"; n2=$SPAWNED
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
ops_of() { sed -n 's/.*Ops: \([0-9]*\).*/\1/p' "$1" | tail -1; }
echo "# $(nproc) cores, load average before: $(cut -d' ' -f1-3 /proc/loadavg); memcaslap -X 100 (90% get), ${SECS} s a run"
printf '%-6s %-5s %9s %12s %12s %12s %12s\n' setup round tps node_us/op mc_us/op client_us/op total_us/op
r=1
while [ "$r" -le "$ROUNDS" ]; do
  for setup in one two; do
    a0=$(ticks "$n1"); b0=$(ticks "$n2"); m0=$(ticks "$mcpid")
    c0=$(awk "{print \$16 + \$17}" /proc/$$/stat)
    if [ "$setup" = one ]; then
      memcaslap -s "127.0.0.1:$p1" -T 2 -c 50 -t "${SECS}s" -X 100 -S "$((SECS + 60))s" >"$T/o1" 2>&1
      ops=$(ops_of "$T/o1")
    else
      memcaslap -s "127.0.0.1:$p1" -T 1 -c 25 -t "${SECS}s" -X 100 -S "$((SECS + 60))s" >"$T/o1" 2>&1 &
      w1=$!
      memcaslap -s "127.0.0.1:$p2" -T 1 -c 25 -t "${SECS}s" -X 100 -S "$((SECS + 60))s" >"$T/o2" 2>&1 &
      w2=$!
      wait "$w1" "$w2"
      ops=$(( $(ops_of "$T/o1") + $(ops_of "$T/o2") ))
    fi
    # the waited-for children's CPU: this shell's cutime + cstime
    c1=$(awk "{print \$16 + \$17}" /proc/$$/stat)
    a1=$(ticks "$n1"); b1=$(ticks "$n2"); m1=$(ticks "$mcpid")
    echo "$setup $r $ops $((a1 - a0 + b1 - b0)) $((m1 - m0)) $((c1 - c0))" | awk -v s="$SECS" -v tck="$tck" '
      { us = 1e6 / tck / $3
        printf "%-6s %-5s %9d %12.2f %12.2f %12.2f %12.2f\n", $1, $2, $3 / s, $4 * us, $5 * us, $6 * us, ($4 + $5 + $6) * us }' |
      tee -a "$T/all"
  done
  r=$((r + 1))
done
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
awk '{ n[$1]++; t[$1] += $3; c[$1] += $4 } END { printf "# means: one %d tps (node %.2f us/op), two %d tps (nodes %.2f us/op): two/one = %.3f\n", t["one"] / n["one"], c["one"] / n["one"], t["two"] / n["two"], c["two"] / n["two"], (t["two"] / n["two"]) / (t["one"] / n["one"]) }' "$T/all"
