# node_lib.sh - shared by tests/it/it_node_*.sh: memcached and bqos-node on free loopback ports, on top of scripts/lib.sh.
# Source it after setting NAME.  It calls it_begin NAME (BIN, T, ok, not_ok,
# check, it_end; everything started is stopped on exit) and provides tmp (the
# scratch directory T), HERE (this directory), NODE, start_mc, start_ref_mc,
# start_node, start_tokens_node, stop_node, stop_node_clean, check_log,
# run_step, py_step, diff_step, diff_nodes, diff_pair_add, stop_diff_nodes,
# exchange, bad (not_ok) and finish (it_end).
. "$(dirname "$0")/../../scripts/lib.sh"
it_begin "$NAME"
NODE="$BIN/bqos-node"
HERE=$(cd "$(dirname "$0")" && pwd)
for t in memcached python3; do
  command -v $t >/dev/null 2>&1 || { echo "$NAME: $t not installed (scripts/deps.sh); skipped"; exit 0; }
done
[ -x "$NODE" ] || { echo "$NAME: $NODE not built"; exit 1; }
tmp=$T
DIFF_REFS="" DIFF_NODES="" DIFF_PIDS="" DIFF_LOGS=""
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

# start_ref_mc: a second memcached on a free port that no node fronts: the
# reference diff_step compares the node with.  Sets REF_PORT; MC_PORT and
# MC_PID stay the first memcached's.
start_ref_mc() {
  rm_port=$MC_PORT rm_pid=$MC_PID
  start_mc
  REF_PORT=$MC_PORT
  MC_PORT=$rm_port MC_PID=$rm_pid
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

# start_tokens_node LOG ARGS...: start_node --policy tokens with an empty
# --tokens-file $tmp/tokens.json (TOKENS), for the test to fill and SIGUSR1.
start_tokens_node() {
  TOKENS=$tmp/tokens.json
  echo '{}' >"$TOKENS"
  stn_log=$1; shift
  start_node "$stn_log" --policy tokens --tokens-file "$TOKENS" "$@"
}

# stop_node: SIGTERM, wait; sets NODE_RC; a sanitizer report in the log fails the test.
stop_node() {
  kill -TERM "$NODE_PID" 2>/dev/null
  wait "$NODE_PID"; NODE_RC=$?
  check_log
}
# stop_node_clean [WHAT]: stop_node, then ok "clean exit after SIGTERM (WHAT)"
# or bad with the exit status (no parenthesis without WHAT).
stop_node_clean() {
  stop_node
  snc_what=${1:+ ($1)}
  [ "$NODE_RC" = 0 ] && ok "clean exit after SIGTERM$snc_what" ||
    bad "exit status $NODE_RC after SIGTERM$snc_what"
}
check_log() {
  if grep -q -E "Sanitizer|runtime error:" "$NODE_LOG"; then
    bad "sanitizer report in $NODE_LOG"; cat "$NODE_LOG"
  fi
}

# run_step WHAT CMD...: runs CMD: ok WHAT or bad WHAT as it exits, then its
# output, indented.
run_step() {
  rs_what=$1; shift
  if "$@" >"$tmp/step.out" 2>&1; then ok "$rs_what"; else bad "$rs_what"; fi
  sed 's/^/     /' "$tmp/step.out"
}

# py_step SCRIPT WHAT ARGS...: runs step WHAT of the python client SCRIPT:
# ok or bad as it exits, then its output, indented.
py_step() {
  ps_script=$1; shift
  run_step "$1" python3 "$ps_script" "$@"
}

# diff_step WHAT CASES OUT: the scripts of CASES (node_client.py diff) sent to
# the reference memcached (start_ref_mc) and to the node: ok "replies
# identical to memcached (WHAT)", or bad and the differences (kept in OUT).
# After diff_nodes, the cases are dealt over its pairs (DIFF_REFS, DIFF_NODES).
diff_step() {
  if python3 "$HERE/node_client.py" diff "${DIFF_REFS:-$REF_PORT}" "${DIFF_NODES:-$NODE_PORT}" \
    "$2" >"$3" 2>&1; then
    ok "replies identical to memcached ($1)"
  else
    bad "replies differ from memcached ($1)"; cat "$3"
  fi
}

# diff_nodes N LOG ARGS...: N pairs of a bqos-node (start_node LOG.I ARGS) in
# front of its own memcached (start_mc) and a reference memcached
# (start_ref_mc), for diff_step to deal its cases over: every case waits
# 0.15 s for quiet, N pairs at once take 1/N of the time.  Sets DIFF_REFS,
# DIFF_NODES (comma lists), DIFF_PIDS and DIFF_LOGS; NODE_*, MC_* and
# REF_PORT are the last pair's.  Every ARGS holds for every node.  Pairs
# are added to those already there (until stop_diff_nodes).
diff_nodes() {
  dn_n=$1; dn_log=$2; shift 2
  dn_i=1
  while [ "$dn_i" -le "$dn_n" ]; do
    start_mc
    start_ref_mc
    start_node "$dn_log.$dn_i" "$@"
    diff_pair_add
    dn_i=$((dn_i + 1))
  done
}

# diff_pair_add: adds REF_PORT and the node of start_node (NODE_PORT,
# NODE_PID, NODE_LOG) to diff_nodes' pairs (for a pair diff_nodes cannot
# start, such as a node in front of a unix: backend).
diff_pair_add() {
  DIFF_REFS=$DIFF_REFS${DIFF_REFS:+,}$REF_PORT
  DIFF_NODES=$DIFF_NODES${DIFF_NODES:+,}$NODE_PORT
  DIFF_PIDS="$DIFF_PIDS $NODE_PID" DIFF_LOGS="$DIFF_LOGS $NODE_LOG"
}

# stop_diff_nodes [WHAT]: stop_node_clean WHAT for every node of diff_nodes;
# diff_step uses REF_PORT and NODE_PORT again.
stop_diff_nodes() {
  # shellcheck disable=SC2086 # the logs, one a word
  set -- "${1:-}" $DIFF_LOGS
  sdn_what=$1; shift
  for sdn_pid in $DIFF_PIDS; do
    NODE_PID=$sdn_pid NODE_LOG=$1; shift
    stop_node_clean "$sdn_what"
  done
  DIFF_REFS="" DIFF_NODES="" DIFF_PIDS="" DIFF_LOGS=""
}

# exchange TARGET REQUEST: sends REQUEST (\r\n written as such) and "version" to
# TARGET (a loopback port, or a Unix socket path); prints the reply before
# VERSION as a Python bytes literal.
exchange() {
  python3 - "$1" "$2" <<'PY'
import socket, sys
t, req = sys.argv[1], sys.argv[2].replace("\\r\\n", "\r\n").encode()
if t.isdigit():
    s = socket.create_connection(("127.0.0.1", int(t)), 5)
else:
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(5)
    s.connect(t)
s.sendall(req + b"version\r\n")
buf = b""
while b"VERSION" not in buf:
    b = s.recv(4096)
    if not b:
        break
    buf += b
print(repr(buf.split(b"VERSION")[0]))
PY
}
