# lib.sh - shell helpers shared by the examples and integration tests: free ports, waiting for listeners, starting and stopping processes.
#
# Source it from POSIX sh.  Every process started with `spawn` is recorded in
# $LIB_PIDS and killed by `cleanup` (call it from a trap on EXIT INT TERM).

LIB_PIDS=""
LIB_PORTS=""

# free_port: prints a TCP port on 127.0.0.1 that nothing listens on and that
# this script has not handed out before.
free_port() {
  while :; do
    p=$(( $(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % 25000 + 30000 ))
    case " $LIB_PORTS " in *" $p "*) continue ;; esac
    if ! ss -Hltn "sport = :$p" 2>/dev/null | grep -q .; then
      LIB_PORTS="$LIB_PORTS $p"
      echo "$p"
      return 0
    fi
  done
}

# wait_port PORT [SECONDS]: waits until something listens on TCP PORT.
wait_port() {
  n=$(( ${2:-10} * 20 ))
  while [ "$n" -gt 0 ]; do
    ss -Hltn "sport = :$1" 2>/dev/null | grep -q . && return 0
    sleep 0.05
    n=$((n - 1))
  done
  echo "timed out waiting for port $1" >&2
  return 1
}

# spawn LOGFILE CMD...: starts CMD in the background with stdout and stderr
# to LOGFILE and records its pid; the pid is left in $SPAWNED.
spawn() {
  log=$1; shift
  "$@" >"$log" 2>&1 &
  SPAWNED=$!
  LIB_PIDS="$LIB_PIDS $SPAWNED"
}

# stop_pid PID: stops one process we started (TERM, then KILL after 3 s).
stop_pid() {
  kill "$1" 2>/dev/null || return 0
  n=60
  while [ $n -gt 0 ] && kill -0 "$1" 2>/dev/null; do sleep 0.05; n=$((n - 1)); done
  kill -9 "$1" 2>/dev/null
  wait "$1" 2>/dev/null
  return 0
}

# cleanup: stops every process started with spawn, newest first.
cleanup() {
  pids=""
  for p in $LIB_PIDS; do pids="$p $pids"; done
  for p in $pids; do stop_pid "$p"; done
  LIB_PIDS=""
}

# start_memcached PORT LOGFILE: a memcached on 127.0.0.1:PORT (64 MB, 2
# threads); waits until it listens.
start_memcached() {
  spawn "$2" memcached -u "$(id -un)" -l 127.0.0.1 -p "$1" -U 0 -m 256 -t 2
  wait_port "$1" 10
}

# table_field TABLE BUCKET COLUMN: from a bqos-load table, prints field
# COLUMN (1-based, '|' separators dropped) of BUCKET's row.
table_field() {
  awk -v b="$2" -v c="$3" '{ gsub(/\|/, " "); if ($1 == b) { print $c; exit } }' "$1"
}
