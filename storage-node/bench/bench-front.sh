#!/bin/sh
# bench-front.sh - throughput and p50/p99 latency of memcached directly, through twemproxy (nutcracker) and through bqos-node (rr), same client (bqos-mcload), same concurrency, interleaved rounds in one run.
# Env: BIN (bin), CONNS (50), SECONDS_PER_RUN (5), ROUNDS (3), NODE_ARGS (extra bqos-node options).
set -u
BIN=${BIN:-bin}
CONNS=${CONNS:-50}
SECS=${SECONDS_PER_RUN:-5}
ROUNDS=${ROUNDS:-3}
NODE_ARGS=${NODE_ARGS:-}
for t in memcached nutcracker python3; do
  command -v $t >/dev/null 2>&1 || { echo "bench-front: $t not installed (scripts/deps.sh)"; exit 1; }
done
tmp=$(mktemp -d /tmp/bench-front.XXXXXX)
pids=""
cleanup() {
  for p in $pids; do kill -TERM "$p" 2>/dev/null; done
  for p in $pids; do wait "$p" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { i=0; while [ $i -lt 50 ]; do python3 -c "import socket; socket.create_connection(('127.0.0.1',$1),0.2)" 2>/dev/null && return 0; sleep 0.1; i=$((i+1)); done; echo "bench-front: nothing on port $1"; exit 1; }

mc=$(free_port); tw=$(free_port); tws=$(free_port); nd=$(free_port)
u=""; [ "$(id -u)" = 0 ] && u="-u nobody"
memcached $u -l 127.0.0.1 -p "$mc" -U 0 -t 2 -m 256 </dev/null >/dev/null 2>&1 & pids="$pids $!"
cat >"$tmp/tw.yml" <<EOT
bench:
  listen: 127.0.0.1:$tw
  hash: fnv1a_64
  distribution: ketama
  timeout: 2000
  preconnect: true
  auto_eject_hosts: false
  servers:
   - 127.0.0.1:$mc:1
EOT
nutcracker -c "$tmp/tw.yml" -s "$tws" -a 127.0.0.1 -o "$tmp/tw.log" & pids="$pids $!"
# shellcheck disable=SC2086
"$BIN/bqos-node" --name bench --memcached-listen "127.0.0.1:$nd" --backend "memcached://127.0.0.1:$mc" \
  --policy rr --log-level warn $NODE_ARGS 2>"$tmp/node.log" & pids="$pids $!"
wait_port "$mc"; wait_port "$tw"; wait_port "$nd"

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
