#!/bin/sh
# it_node_threads.sh - bqos-node --threads 2 (the loop thread and a reply-writer thread, io/writers.h) under a controller with 1 s periods: 28 memcached connections pipelining set/get pairs; replies in request order and same-key order on every connection; by the node's own per-period counters, a limited bucket within 1.05 x L in every 1 s period and a reserved bucket served at least R in every one; bulk served; --threads with TLS refused; a clean stop.
# run-tests: alone
# NODE_ARGS overrides the node's extra options (default "--threads 2"), to show a check failing.
. "$(dirname "$0")/../../scripts/lib.sh"
it_begin it_node_threads bqos-node bqos-controller memcached python3
NODE_ARGS=${NODE_ARGS:---threads 2}
L=400; R=300; SECS=8; WARM=2
printf '{"buckets": [{"name": "lim", "reservation": 0, "limit": %s}, {"name": "res", "reservation": %s}, {"name": "bulk", "reservation": 0}]}\n' \
  "$L" "$R" >"$T/buckets.json"
next_port; MC=$PORT
start_memcached "$MC" "$T/memcached.log" || { echo "memcached did not start"; exit 1; }
next_port; CP=$PORT; next_port; AP=$PORT
spawn "$T/controller.log" "$BIN/bqos-controller" --buckets "$T/buckets.json" \
  --listen "tcp://127.0.0.1:$CP" --admin "tcp://127.0.0.1:$AP" --period 1s --intervals 5 \
  --capacity 20000
wait_port "$CP" 10 || { echo "controller did not start"; cat "$T/controller.log"; exit 1; }
next_port; NP=$PORT
# shellcheck disable=SC2086
spawn "$T/node.log" "$BIN/bqos-node" --name s1 --memcached-listen "127.0.0.1:$NP" \
  --backend "memcached://127.0.0.1:$MC" --controller "tcp://127.0.0.1:$CP" \
  --config "$T/buckets.json" --policy tokens $NODE_ARGS
node=$SPAWNED
wait_port "$NP" 10 || { echo "node did not start"; cat "$T/node.log"; exit 1; }
sleep 1 # the first tokens
python3 "$HERE/node_periods.py" "$NP" "$SECS" lim >"$T/lim.txt" 2>&1 &
p1=$!
python3 "$HERE/node_periods.py" "$NP" "$SECS" res >"$T/res.txt" 2>&1 &
p2=$!
python3 "$HERE/threads_client.py" "$NP" "$SECS" "$WARM" >"$T/client.txt" 2>&1
wait "$p1" "$p2"
cat "$T/client.txt"
check "the client's checks passed" '[ "$(grep -c "^ok" "$T/client.txt")" -eq 2 ]'
# Node periods that ended under load after the warm-up, the first and the
# last (partial: load starting, stopping) left out.
periods() { awk -v w="$WARM" 'NR > w + 1 { print $2 }' "$1" | sed '$d'; }
lim=$(periods "$T/lim.txt" | sort -n | tail -1)
res=$(periods "$T/res.txt" | sort -n | head -1)
echo "# node periods, served: lim $(periods "$T/lim.txt" | tr '\n' ' '); res $(periods "$T/res.txt" | tr '\n' ' ')"
check "lim: at most 1.05 x L in every 1 s period under load (most $lim, L $L)" \
  '[ -n "$lim" ] && awk -v m="$lim" -v l="$L" "BEGIN { exit !(m > 0 && m <= 1.05 * l) }"'
check "res: at least R in every 1 s period under load (fewest $res, R $R)" \
  '[ -n "$res" ] && [ "$res" -ge "$R" ]'
kill -0 "$node" 2>/dev/null && ok "node alive" || not_ok "node died"
kill "$node"
n=0; while kill -0 "$node" 2>/dev/null && [ $n -lt 100 ]; do sleep 0.1; n=$((n + 1)); done
check "node stops on SIGTERM within 10 s" '! kill -0 "$node" 2>/dev/null'
check "stopped cleanly" 'grep -q "stopped" "$T/node.log"'

"$BIN/bqos-node" --threads 2 --tls-cert /nonexistent --tls-key /nonexistent >/dev/null 2>"$T/tls.txt"
rc=$?
check "--threads 2 with TLS is refused (rc $rc)" '[ $rc -ne 0 ]'
"$BIN/bqos-node" --threads 0 >/dev/null 2>"$T/bad.txt"
rc=$?
check "--threads 0 is a usage error (rc $rc)" '[ $rc -eq 2 ] && grep -q -- "--threads" "$T/bad.txt"'
"$BIN/bqos-node" --help | grep -q -- "--threads N" && ok "--help lists --threads" ||
  not_ok "--help lists --threads"

it_end 'tail -20 "$T/node.log"; tail -5 "$T/controller.log"'
