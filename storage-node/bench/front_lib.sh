# front_lib.sh - the node's CPU-per-request benches' nodes (sourced after scripts/lib.sh): one started in front of the bench's memcached, its CPU ticks and the requests it served.

# node NAME BIN PORT EXTRA...: starts BIN's bqos-node NAME on 127.0.0.1:PORT in
# front of the bench's memcached on port $mc, with $NODE_ARGS and EXTRA, its
# log in $T; its pid in $SPAWNED; exits if it does not listen in 10 s
node() {
  n=$1; b=$2; p=$3; shift 3
  # shellcheck disable=SC2086
  spawn "$T/node-$n.log" "$b/bqos-node" --name "$n" --memcached-listen "127.0.0.1:$p" \
    --backend "memcached://127.0.0.1:$mc" --log-level warn $NODE_ARGS "$@"
  wait_port "$p" 10 || exit 1
}

# ticks PID: the process's user + system CPU so far, in clock ticks (/proc/PID/stat)
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# served PORT: the requests a node on 127.0.0.1:PORT served so far: its
# memcached `stats` get keys + sets + touches + flushes (through mc_ask)
served() {
  mc_ask "$1" 'stats\r\n' 5 | tr '|' '\n' |
    awk '$1 == "STAT" && ($2 == "cmd_get" || $2 == "cmd_set" || $2 == "cmd_touch" || $2 == "cmd_flush") { s += $3 }
         END { print s + 0 }'
}
