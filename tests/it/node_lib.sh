# node_lib.sh - shared by tests/it_node_*.sh: start memcached and bqos-node on free loopback ports, stop them on exit.
# Source it after setting NAME; provides start_memcached, start_node, stop_node, ok, bad, finish.
BIN=${BIN:-bin}
NODE="$BIN/bqos-node"
HERE=$(cd "$(dirname "$0")" && pwd)
for t in memcached python3; do
  command -v $t >/dev/null 2>&1 || { echo "$NAME: $t not installed (scripts/deps.sh); skipped"; exit 0; }
done
[ -x "$NODE" ] || { echo "$NAME: $NODE not built"; exit 1; }
tmp=$(mktemp -d /tmp/$NAME.XXXXXX)
pids=""
fails=0
cleanup() {
  for p in $pids; do kill -TERM "$p" 2>/dev/null; done
  for p in $pids; do wait "$p" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fails=$((fails + 1)); }
finish() { [ $fails -eq 0 ] && { echo "$NAME: all passed"; exit 0; }; echo "$NAME: $fails failed"; exit 1; }

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# start_memcached [PORT]: sets MC_PORT and MC_PID.
start_memcached() {
  MC_PORT=${1:-$(free_port)}
  u=""; [ "$(id -u)" = 0 ] && u="-u nobody"
  memcached $u -l 127.0.0.1 -p "$MC_PORT" -U 0 -t 2 </dev/null >/dev/null 2>&1 &
  MC_PID=$!
  pids="$pids $MC_PID"
  i=0
  while [ $i -lt 50 ]; do
    python3 -c "import socket; socket.create_connection(('127.0.0.1',$MC_PORT),0.2)" 2>/dev/null && return 0
    sleep 0.1; i=$((i + 1))
  done
  echo "$NAME: memcached did not start on $MC_PORT"; exit 1
}

# start_node LOG ARGS...: bqos-node on a free port (port 0) in front of MC_PORT; sets NODE_PID, NODE_PORT.
start_node() {
  log=$1; shift
  NODE_LOG=$log
  "$NODE" --name it --memcached-listen 127.0.0.1:0 --backend "memcached://127.0.0.1:$MC_PORT" "$@" </dev/null >/dev/null 2>"$log" &
  NODE_PID=$!
  pids="$pids $NODE_PID"
  NODE_PORT=""
  i=0
  while [ $i -lt 50 ]; do
    NODE_PORT=$(sed -n 's/.* on [0-9.]*:\([0-9][0-9]*\), backend.*/\1/p' "$log" 2>/dev/null | head -1)
    [ -n "$NODE_PORT" ] && return 0
    kill -0 "$NODE_PID" 2>/dev/null || break
    sleep 0.1; i=$((i + 1))
  done
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
