#!/bin/sh
# bench-twemproxy.sh - a standard client (memcaslap) against memcached directly, twemproxy (nutcracker), bqos-node --policy rr and bqos-node --policy tokens, interleaved rounds in one run: TPS, p99 latency and the serving process's CPU microseconds per request (issue 15).
# Env: BIN (bin), ROUNDS (5), SECS (5), THREADS (2), CONNS (50), VALUE (100 bytes),
# NODE_ARGS (extra options for both bqos-node runs).  memcaslap mixes 90% get,
# 10% set.  p99 comes from memcaslap's log2 latency histogram (Total
# Statistics), interpolated geometrically inside its bucket.  CPU per request is
# user + system time of the serving process (memcached for `direct`, the proxy
# otherwise) from /proc/PID/stat over the run, divided by the requests.
set -u
. "$(dirname "$0")/../../scripts/lib.sh"
BIN=${BIN:-bin}
ROUNDS=${ROUNDS:-5}
SECS=${SECS:-5}
THREADS=${THREADS:-2}
CONNS=${CONNS:-50}
VALUE=${VALUE:-100}
NODE_ARGS=${NODE_ARGS:-}
for t in memcached nutcracker memcaslap ss; do
  command -v $t >/dev/null 2>&1 || { echo "bench-twemproxy: $t not installed (scripts/deps.sh)"; exit 1; }
done
T=$(mktemp -d /tmp/bench-twemproxy.XXXXXX)
trap 'cleanup; rm -rf "$T"' EXIT
trap 'exit 1' INT TERM

next_port; mc=$PORT; next_port; tw=$PORT; next_port; tws=$PORT; next_port; rr=$PORT; next_port; tk=$PORT
start_memcached "$mc" "$T/mc.log" || exit 1
mcpid=$SPAWNED
start_twemproxy "$tw" "$tws" "$mc" "$T" || exit 1
twpid=$SPAWNED
# shellcheck disable=SC2086
spawn "$T/rr.log" "$BIN/bqos-node" --name rr --memcached-listen "127.0.0.1:$rr" \
  --backend "memcached://127.0.0.1:$mc" --policy rr --log-level warn $NODE_ARGS
rrpid=$SPAWNED
# shellcheck disable=SC2086
spawn "$T/tk.log" "$BIN/bqos-node" --name tokens --memcached-listen "127.0.0.1:$tk" \
  --backend "memcached://127.0.0.1:$mc" --policy tokens --log-level warn $NODE_ARGS
tkpid=$SPAWNED
for p in "$rr" "$tk"; do wait_port "$p" 10 || exit 1; done

tck=$(getconf CLK_TCK)
echo "# $(nproc) cores, load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# memcaslap -T $THREADS -c $CONNS -t ${SECS}s -X $VALUE (90% get); bqos-node options: $NODE_ARGS"
printf '%-10s %-5s %9s %9s %9s\n' target round tps p99_us cpu_us/op
r=1
while [ "$r" -le "$ROUNDS" ]; do
  for target in direct:$mc:$mcpid twemproxy:$tw:$twpid rr:$rr:$rrpid tokens:$tk:$tkpid; do
    name=${target%%:*}; rest=${target#*:}; port=${rest%%:*}; pid=${rest#*:}
    t0=$(awk '{print $14 + $15}' "/proc/$pid/stat")
    memcaslap -s "127.0.0.1:$port" -T "$THREADS" -c "$CONNS" -t "${SECS}s" -X "$VALUE" \
      -S "$((SECS + 60))s" >"$T/out" 2>&1
    t1=$(awk '{print $14 + $15}' "/proc/$pid/stat")
    line=$(awk -v t0="$t0" -v t1="$t1" -v tck="$tck" '
      /^Total Statistics \(/ { tot = 1; next }
      tot && /^ *[0-9]+:/ { k = $1 + 0; for (j = 2; j <= NF; j++) { c[k + j - 2] = $j; n += $j } }
      tot && /^$/ { tot = 0 }
      /^Run time:/ { for (i = 1; i <= NF; i++) { if ($i == "TPS:") tps = $(i + 1); if ($i == "Ops:") ops = $(i + 1) } }
      END {
        p99 = -1; want = 0.99 * n; cum = 0
        for (i = 0; i < 40 && n > 0; i++) {
          if (cum + c[i] >= want && c[i] > 0) { p99 = 2 ^ (i + (want - cum) / c[i]); break }
          cum += c[i]
        }
        cpu = ops > 0 ? (t1 - t0) / tck * 1e6 / ops : -1
        printf "%9d %9.0f %9.2f", tps, p99, cpu
      }' "$T/out")
    printf '%-10s %-5s %s\n' "$name" "$r" "$line"
    echo "$name $line" >>"$T/all"
  done
  r=$((r + 1))
done
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# medians over rounds; ratio = median of (tps / twemproxy's tps in the same round)"
awk '
  { n[$1]++; tps[$1, n[$1]] = $2; p99[$1, n[$1]] = $3; cpu[$1, n[$1]] = $4; order[$1] = NR }
  function med(arr, name, m,   a, i, j, t) {
    for (i = 1; i <= m; i++) a[i] = arr[name, i] + 0
    for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
  }
  END {
    for (name in n) { m = n[name]; for (i = 1; i <= m; i++) ratio[name, i] = tps["twemproxy", i] > 0 ? tps[name, i] / tps["twemproxy", i] : 0 }
    split("direct twemproxy rr tokens", names, " ")
    for (k = 1; k <= 4; k++) { name = names[k]; m = n[name]
      printf "%-10s tps=%d p99_us=%.0f cpu_us_per_op=%.2f vs_twemproxy=%.2f\n", name, med(tps, name, m), med(p99, name, m), med(cpu, name, m), med(ratio, name, m) }
  }' "$T/all"
