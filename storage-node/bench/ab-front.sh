#!/bin/sh
# ab-front.sh - A/B of two builds of bqos-node's memcached front (policy rr, 20 bqos-mcload connections, 4 s a run): the node's CPU microseconds per request (user + system from /proc) and ops/s, interleaved rounds.
# Usage: ab-front.sh BIN_A BIN_B ROUNDS [NODE_ARGS]
A=$1; B=$2; ROUNDS=${3:-3}; NODE_ARGS=${4:-}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { i=0; while [ $i -lt 50 ]; do python3 -c "import socket; socket.create_connection(('127.0.0.1',$1),0.2)" 2>/dev/null && return 0; sleep 0.1; i=$((i+1)); done; return 1; }
mc=$(free_port)
memcached -u nobody -l 127.0.0.1 -p "$mc" -U 0 -t 2 -m 256 </dev/null >/dev/null 2>&1 & MCP=$!
wait_port $mc
tck=$(getconf CLK_TCK)
r=1
while [ $r -le $ROUNDS ]; do
  for which in A B; do
    eval bin=\$$which
    nd=$(free_port)
    $bin/bqos-node --name ab --memcached-listen "127.0.0.1:$nd" --backend "memcached://127.0.0.1:$mc" --policy rr --log-level warn $NODE_ARGS 2>/dev/null & np=$!
    wait_port $nd
    t0=$(awk '{print $14+$15}' /proc/$np/stat)
    res=$(${MCLOAD:-bin/bqos-mcload} --server "127.0.0.1:$nd" --conns 20 --seconds 4)
    t1=$(awk '{print $14+$15}' /proc/$np/stat)
    kill -TERM $np; wait $np 2>/dev/null
    ops=$(echo "$res" | tr ' ' '\n' | sed -n 's/^ops=//p')
    echo "$which round=$r $res node_us_per_op=$(echo "$t0 $t1 $ops $tck" | awk '{printf "%.2f", ($2-$1)/$4*1e6/$3}')"
  done
  r=$((r+1))
done
kill $MCP
