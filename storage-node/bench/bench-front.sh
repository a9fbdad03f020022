#!/bin/sh
# bench-front.sh - throughput and p50/p99 latency of memcached directly, through twemproxy (nutcracker) and through bqos-node (rr), same client (bqos-mcload), same concurrency, interleaved rounds in one run.
# Env: BIN (bin), CONNS (50), SECONDS_PER_RUN (5), ROUNDS (3), NODE_ARGS (extra bqos-node options).
set -u
BIN=${BIN:-bin}
CONNS=${CONNS:-50}
SECS=${SECONDS_PER_RUN:-5}
ROUNDS=${ROUNDS:-3}
NODE_ARGS=${NODE_ARGS:-}
for t in memcached nutcracker ss; do
  command -v $t >/dev/null 2>&1 || { echo "bench-front: $t not installed (scripts/deps.sh)"; exit 1; }
done
. "$(dirname "$0")/../../scripts/lib.sh"
tmp=$(mktemp -d /tmp/bench-front.XXXXXX)
trap 'cleanup; rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM

next_port; mc=$PORT; next_port; tw=$PORT; next_port; tws=$PORT; next_port; nd=$PORT
start_memcached "$mc" "$tmp/mc.log" || exit 1
start_twemproxy "$tw" "$tws" "$mc" "$tmp" || exit 1
# shellcheck disable=SC2086
spawn "$tmp/node.log" "$BIN/bqos-node" --name bench --memcached-listen "127.0.0.1:$nd" \
  --backend "memcached://127.0.0.1:$mc" --policy rr --log-level warn $NODE_ARGS
wait_port "$nd" 10 || exit 1

echo "# $(nproc) cores, load average: $(cut -d' ' -f1-3 /proc/loadavg); $CONNS connections, ${SECS}s per run, 90% get / 10% set, 100-byte values, 10000 keys in 4 buckets"
echo "# bqos-node options: --policy rr $NODE_ARGS"
printf '%-10s %-6s %s\n' target round result
r=1
while [ $r -le "$ROUNDS" ]; do
  for target in direct:$mc twemproxy:$tw bqos-node:$nd; do
    name=${target%%:*}; port=${target##*:}
    res=$("$BIN/bqos-mcload" --server "127.0.0.1:$port" --conns "$CONNS" --seconds "$SECS")
    printf '%-10s %-6s %s\n' "$name" "$r" "$res"
    echo "$name $res round=$r" >>"$tmp/all"
  done
  r=$((r + 1))
done
echo "# medians over rounds (ops/s, p50 us, p99 us); ratio = median over rounds of (ops/s / direct ops/s in the same round)"
awk '{ for (i = 2; i <= NF; i++) { split($i, kv, "="); v[$1, kv[1], ++n[$1, kv[1]]] = kv[2] } names[$1] = 1 }
  function med(name, key,   k, m, a, i, j, t) { m = n[name, key]; for (i = 1; i <= m; i++) a[i] = v[name, key, i] + 0;
    for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return a[int((m + 1) / 2)] }
  END { split("direct twemproxy bqos-node", order, " ");
    for (k = 1; k <= 3; k++) { nm = order[k]; o = med(nm, "ops_per_sec");
      m = n[nm, "ops_per_sec"];
      for (i = 1; i <= m; i++) { d = v["direct", "ops_per_sec", i]; v[nm, "ratio", i] = d > 0 ? v[nm, "ops_per_sec", i] / d : 0 }
      n[nm, "ratio"] = m;
      printf "%-10s ops/s=%d p50_us=%d p99_us=%d ratio=%.2f\n", nm, o, med(nm, "p50_us"), med(nm, "p99_us"), med(nm, "ratio") } }' "$tmp/all"
