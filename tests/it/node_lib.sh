# node_lib.sh - shared by tests/it/it_node_*.sh: memcached and bqos-node on free loopback ports, on top of scripts/lib.sh.
# Source it after setting NAME.  It calls it_begin NAME (BIN, T, ok, not_ok,
# check, it_end; everything started is stopped on exit) and provides tmp (the
# scratch directory T), HERE (this directory), NODE, start_mc, start_node,
# stop_node, check_log, py_step, bad (not_ok) and finish (it_end).
. "$(dirname "$0")/../../scripts/lib.sh"
it_begin "$NAME"
NODE="$BIN/bqos-node"
HERE=$(cd "$(dirname "$0")" && pwd)
for t in memcached python3; do
  command -v $t >/dev/null 2>&1 || { echo "$NAME: $t not installed (scripts/deps.sh); skipped"; exit 0; }
done
[ -x "$NODE" ] || { echo "$NAME: $NODE not built"; exit 1; }
tmp=$T
bad() { not_ok "$1"; }
finish() { it_end; }

# start_mc [PORT]: a memcached on a free port (or on PORT) with lib.sh's
# start_memcached; sets MC_PORT and MC_PID.
start_mc() {
  if [ -n "${1:-}" ]; then MC_PORT=$1; else next_port; MC_PORT=$PORT; fi
  start_memcached "$MC_PORT" "$T/memcached-$MC_PORT.log" ||
    { echo "$NAME: memcached did not start on $MC_PORT"; exit 1; }
  MC_PID=$SPAWNED
}

# node_port LOG: the port a bqos-node logged it listens on (empty if none yet).
node_port() { sed -n 's/.* on [0-9.]*:\([0-9][0-9]*\), backend.*/\1/p' "$1" 2>/dev/null | head -1; }

# start_node LOG ARGS...: bqos-node on a free port (port 0) in front of MC_PORT; sets NODE_PID, NODE_PORT.
start_node() {
  log=$1; shift
  NODE_LOG=$log
  "$NODE" --name it --memcached-listen 127.0.0.1:0 --backend "memcached://127.0.0.1:$MC_PORT" "$@" </dev/null >/dev/null 2>"$log" &
  NODE_PID=$!
  LIB_PIDS="$LIB_PIDS $NODE_PID"
  wait_for '[ -n "$(node_port "$log")" ] || ! kill -0 "$NODE_PID" 2>/dev/null' 5
  NODE_PORT=$(node_port "$log")
  [ -n "$NODE_PORT" ] && return 0
  echo "$NAME: node did not start:"; cat "$log"; exit 1
}

# stop_node: SIGTERM, wait; sets NODE_RC; a sanitizer report in the log fails the test.
stop_node() {
  kill -TERM "$NODE_PID" 2>/dev/null
  wait "$NODE_PID"; NODE_RC=$?
  check_log
}
check_log() {
  if grep -q -E "Sanitizer|runtime error:" "$NODE_LOG"; then
    bad "sanitizer report in $NODE_LOG"; cat "$NODE_LOG"
  fi
}

# py_step SCRIPT WHAT ARGS...: runs step WHAT of the python client SCRIPT:
# ok or bad as it exits, then its output, indented.
py_step() {
  ps_script=$1; shift
  if python3 "$ps_script" "$@" >"$tmp/step.out" 2>&1; then ok "$1"; else bad "$1"; fi
  sed 's/^/     /' "$tmp/step.out"
}
