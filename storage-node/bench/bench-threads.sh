#!/bin/sh
# bench-threads.sh - bqos-node --threads (reply-writer threads): memcaslap against today's binary, this build with --threads 1 and with --threads 2 (one memcached), interleaved rounds; TPS and the CPU every process used per request (the node's threads together, memcached, memcaslap).
# Usage: bench-threads.sh OLD_BIN [ROUNDS] [SECS]   (BIN=bin: this build; NODE_ARGS: extra options for every node)
set -u
. "$(dirname "$0")/../../scripts/lib.sh"
. "$(dirname "$0")/front_lib.sh"
OLD=$1; ROUNDS=${2:-3}; SECS=${3:-4}; BIN=${BIN:-bin}; NODE_ARGS=${NODE_ARGS:---policy rr}
T=$(mktemp -d /tmp/bench-threads.XXXXXX)
trap 'cleanup; rm -rf "$T"' EXIT
command -v memcaslap >/dev/null || { echo "bench-threads: memcaslap not installed" >&2; exit 1; }
tck=$(getconf CLK_TCK)
next_port; mc=$PORT
start_memcached "$mc" "$T/mc.log" || exit 1
mcpid=$(ss -Hltnp "sport = :$mc" | sed -n 's/.*pid=\([0-9]*\).*/\1/p' | head -1)
next_port; po=$PORT; node old "$OLD" "$po"; no=$SPAWNED
next_port; p1=$PORT; node t1 "$BIN" "$p1" --threads 1; n1=$SPAWNED
next_port; p2=$PORT; node t2 "$BIN" "$p2" --threads 2; n2=$SPAWNED
echo "# $(nproc) cores, load average before: $(cut -d' ' -f1-3 /proc/loadavg); memcaslap -T 2 -c 50 -X 100 (90% get), ${SECS} s a run; node options: $NODE_ARGS"
printf '%-6s %-5s %9s %12s %12s %12s\n' setup round tps node_us/op mc_us/op client_us/op
r=1
while [ "$r" -le "$ROUNDS" ]; do
  for s in old:$po:$no t1:$p1:$n1 t2:$p2:$n2; do
    name=${s%%:*}; rest=${s#*:}; port=${rest%%:*}; pid=${rest#*:}
    a0=$(ticks "$pid"); m0=$(ticks "$mcpid"); c0=$(awk '{print $16 + $17}' /proc/$$/stat)
    memcaslap -s "127.0.0.1:$port" -T 2 -c 50 -t "${SECS}s" -X 100 -S "$((SECS + 60))s" >"$T/o" 2>&1
    c1=$(awk '{print $16 + $17}' /proc/$$/stat); a1=$(ticks "$pid"); m1=$(ticks "$mcpid")
    ops=$(sed -n 's/.*Ops: \([0-9]*\).*/\1/p' "$T/o" | tail -1)
    echo "$name $r ${ops:-0} $((a1 - a0)) $((m1 - m0)) $((c1 - c0))" | awk -v s="$SECS" -v tck="$tck" '
      { us = $3 > 0 ? 1e6 / tck / $3 : 0
        printf "%-6s %-5s %9d %12.2f %12.2f %12.2f\n", $1, $2, $3 / s, $4 * us, $5 * us, $6 * us }' |
      tee -a "$T/all"
  done
  r=$((r + 1))
done
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
awk '{ n[$1]++; t[$1] += $3; c[$1] += $4 } END { for (k in n) printf "# mean %s: %d tps, node %.2f us/op\n", k, t[k] / n[k], c[k] / n[k] }' "$T/all" | sort
