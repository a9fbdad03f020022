# lib.sh - shell helpers shared by the examples and integration tests: free ports, waiting for listeners, starting and stopping processes.
#
# Source it from POSIX sh.  Every process started with `spawn` is recorded in
# $LIB_PIDS and killed by `cleanup` (call it from a trap on EXIT INT TERM).

LIB_PIDS=""
LIB_PORTS=""
# The directory of this file (callers set HERE before sourcing it).
LIB_DIR=${HERE:-examples}

# next_port: sets PORT to a TCP port on 127.0.0.1 that no socket uses (listening
# or connected) and that this script has not handed out before.  Ports come
# from 20000-32767, below Linux's default ephemeral range, so that client
# connections do not take them between the choice and the bind.
next_port() {
  while :; do
    PORT=$(( $(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % 12768 + 20000 ))
    case " $LIB_PORTS " in *" $PORT "*) continue ;; esac
    if ! ss -Hant "sport = :$PORT" 2>/dev/null | grep -q .; then
      LIB_PORTS="$LIB_PORTS $PORT"
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

# stop_pid PID...: stops processes we started: TERM to all of them at once,
# then KILL to any still running after 3 s.
stop_pid() {
  sp_live=""
  for sp in "$@"; do kill "$sp" 2>/dev/null && sp_live="$sp_live $sp"; done
  n=60
  while [ $n -gt 0 ]; do
    sp_left=""
    for sp in $sp_live; do kill -0 "$sp" 2>/dev/null && sp_left="$sp_left $sp"; done
    [ -z "$sp_left" ] && break
    sleep 0.05; n=$((n - 1))
  done
  for sp in $sp_live; do kill -9 "$sp" 2>/dev/null; wait "$sp" 2>/dev/null; done
  return 0
}

# cleanup: stops every process started with spawn (clients first: TERM
# goes out newest first).
cleanup() {
  pids=""
  for p in $LIB_PIDS; do pids="$p $pids"; done
  # shellcheck disable=SC2086
  [ -n "$pids" ] && stop_pid $pids
  LIB_PIDS=""
}

# example_init [ARGS]: how every example that sources this file reads its
# arguments: -h or --help prints the script's header comment (line 2 up to
# `set -u`, without the leading "# ") and exits 0; BIN defaults to bin.
example_init() {
  case "${1:-}" in -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;; esac
  BIN=${BIN:-bin}
}

# example_begin NAME PROG...: how every example script starts its runs:
# die MSG then says "NAME: MSG" on stderr and exits 1, cleanup runs on exit,
# an interrupt says "NAME: interrupted" and exits 130, and every PROG must
# be built in $BIN.
example_begin() {
  EXAMPLE=$1
  shift
  trap 'cleanup' EXIT
  trap 'echo "$EXAMPLE: interrupted" >&2; exit 130' INT TERM
  for b in "$@"; do
    [ -x "$BIN/$b" ] || die "missing $BIN/$b (run make)"
  done
}

# die MSG: after example_begin, says "NAME: MSG" on stderr and exits 1.
die() { echo "$EXAMPLE: $*" >&2; exit 1; }

# jget FILE EXPR: a value from a JSON file (python3 expression on `d`).
jget() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1" 2>/dev/null; }

# wait_for CMD [SECONDS]: evaluates CMD (a shell string) every 0.1 s until it
# succeeds (returns 0) or SECONDS (default 10) have passed (returns 1).  For
# waiting on a condition instead of sleeping a guessed time.
wait_for() {
  wf_n=$(( ${2:-10} * 10 ))
  while [ "$wf_n" -gt 0 ]; do
    eval "$1" && return 0
    sleep 0.1
    wf_n=$((wf_n - 1))
  done
  eval "$1"
}

# mc_ask PORT REQUEST [SECONDS]: the answer of the memcached-protocol server
# on 127.0.0.1:PORT to REQUEST (\r\n written literally), read up to its
# final END (or until the server closes), with CRLF turned into "|".  Gives
# up after SECONDS (default 5) without an answer.
mc_ask() {
  python3 - "$1" "$2" "${3:-5}" <<"PY"
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=float(sys.argv[3]))
s.sendall(sys.argv[2].encode().replace(b"\\r\\n", b"\r\n"))
buf = b""
while not buf.endswith(b"END\r\n"):
    d = s.recv(65536)
    if not d:
        break
    buf += d
print(buf.decode(errors="replace").replace("\r\n", "|"))
PY
}

# node_stat PORT NAME: the value of a bqos-node's memcached `stats` line
# NAME (on 127.0.0.1:PORT), or "none" if it has none or does not answer.
node_stat() {
  mc_ask "$1" 'stats\r\n' 3 2>/dev/null | tr '|' '\n' |
    awk -v k="STAT $2 " 'index($0, k) == 1 { print substr($0, length(k) + 1); f = 1; exit }
                         END { if (!f) print "none" }'
}

# etcd_scratch NAME: a scratch directory T (/tmp/NAME.XXXXXX) and an etcd
# data directory ED (in /dev/shm when it is writable, for fast fsyncs;
# otherwise $T/etcd).  On exit stops every process started with spawn and
# removes both (KEEP=1 keeps T and says where); INT and TERM exit 130.
etcd_scratch() {
  T=$(mktemp -d "/tmp/$1.XXXXXX")
  ED=$T/etcd
  [ -d /dev/shm ] && [ -w /dev/shm ] && ED=$(mktemp -d "/dev/shm/$1.XXXXXX")
  trap 'cleanup; [ -n "${KEEP:-}" ] && echo "kept $T" || rm -rf "$T"; rm -rf "$ED"' EXIT
  trap 'exit 130' INT TERM
}

# etcd_ports: two free loopback ports for a one-member etcd: sets EP (its
# client port), PP (its peer port) and ETCD (its client URL).
etcd_ports() {
  next_port; EP=$PORT; next_port; PP=$PORT
  ETCD="http://127.0.0.1:$EP"
}

# etcd_run NAME LOG: a one-member etcd cluster NAME on EP and PP (set by
# etcd_ports; the same ports again when it is started again), its data in
# $ED and its output in LOG; ETCD_PID is its pid.  Waits up to 15 s for
# the client port: returns 1 if it did not open.
etcd_run() {
  spawn "$2" etcd --name "$1" --data-dir "$ED" --listen-client-urls "$ETCD" \
    --advertise-client-urls "$ETCD" --listen-peer-urls "http://127.0.0.1:$PP" \
    --initial-advertise-peer-urls "http://127.0.0.1:$PP" \
    --initial-cluster "$1=http://127.0.0.1:$PP" --heartbeat-interval 20 --election-timeout 200
  ETCD_PID=$SPAWNED
  wait_port "$EP" 15
}

# etcd_get KEY [ABSENT]: the value the etcd at $ETCD holds for KEY (read
# through its v3 JSON gateway), or ABSENT (default: nothing) if it holds none
# or cannot be read in 5 s.
etcd_get() {
  python3 - "$ETCD" "$1" "${2:-}" <<'PY' 2>/dev/null || printf '%s\n' "${2:-}"
import base64, json, sys, urllib.request
b = json.dumps({"key": base64.b64encode(sys.argv[2].encode()).decode()}).encode()
r = json.loads(urllib.request.urlopen(urllib.request.Request(sys.argv[1] + "/v3/kv/range", b),
                                      timeout=5).read())
kvs = r.get("kvs") or []
print(base64.b64decode(kvs[0]["value"]).decode() if kvs else sys.argv[3])
PY
}

# start_etcd NAME LOG: a one-member etcd cluster NAME on two free loopback
# ports (etcd_ports), its data in $ED and its output in LOG (etcd_run).
# Returns 1 if its client port did not open within 15 s.
start_etcd() {
  etcd_ports
  etcd_run "$1" "$2"
}

# ---- integration tests ----------------------------------------------------
# it_begin NAME [NEED...]: the start every tests/it script shares.  Sets -u,
# BIN (default bin), HERE (the script's folder), T (a new scratch directory
# /tmp/NAME.XXXXXX) and fails=0; exits the test when a NEED is missing
# (it_need);
# on exit stops every process started with spawn and removes T; INT and TERM
# exit 130.  Defines the result helpers:
#   ok MSG          prints "ok - MSG"
#   not_ok MSG      prints "not ok - MSG" and counts a failure
#   check MSG EXPR  ok or not_ok as EXPR (evaluated) succeeds or not
it_begin() {
  set -u
  IT_NAME=$1
  shift
  BIN=${BIN:-bin}
  HERE=$(cd "$(dirname "$0")" && pwd)
  T=$(mktemp -d "/tmp/$IT_NAME.XXXXXX") || { echo "$IT_NAME: no scratch directory"; exit 1; }
  trap 'cleanup; rm -rf "$T"' EXIT
  trap 'exit 130' INT TERM
  fails=0
  ok() { echo "ok - $1"; }
  not_ok() { echo "not ok - $1"; fails=$((fails + 1)); }
  check() { if eval "$2"; then ok "$1"; else not_ok "$1"; fi; }
  it_need "$@"
}

# it_end [CMD]: the end: prints "NAME: all passed" and exits 0, or prints
# "NAME: N failed", evaluates CMD (for instance showing logs) and exits 1.
it_end() {
  if [ "$fails" -eq 0 ]; then
    echo "$IT_NAME: all passed"
    exit 0
  fi
  echo "$IT_NAME: $fails failed"
  [ -n "${1:-}" ] && eval "$1"
  exit 1
}

# it_etcd [CMD]: after it_begin, the etcd of a test that may stop it and
# start it again: its ports (etcd_ports) and its data directory ED (in
# /dev/shm when it is writable, for fast fsyncs; otherwise $T/etcd).  On
# exit CMD is evaluated, then cleanup, and T and ED are removed.  Nothing
# runs yet: it_etcd_start starts it.
it_etcd() {
  etcd_ports
  ED="$T/etcd"
  [ -d /dev/shm ] && [ -w /dev/shm ] && ED=$(mktemp -d /dev/shm/it_etcd.XXXXXX)
  trap "${1:-}${1:+; }"'cleanup; rm -rf "$T" "$ED"' EXIT
}

# it_etcd_start: starts it_etcd's etcd (cluster "default", etcd_run), its
# output in a new $T/etcd.TIME.log at each start; exits the test showing
# every etcd log if it does not start.
it_etcd_start() {
  etcd_run default "$T/etcd.$(date +%s%N).log" ||
    { echo "etcd did not start"; cat "$T"/etcd.*.log; exit 1; }
}

# it_etcd_wipe: etcd loses its data: stopped, its data directory emptied,
# started again (it_etcd_start) on the same ports.
it_etcd_wipe() {
  stop_pid "$ETCD_PID"
  rm -rf "${ED:?}"/*
  it_etcd_start
}

# it_need NAME...: exits the test (1) at the first NAME missing: a bqos-*
# program not built in $BIN (make), or a command not on PATH
# (scripts/deps.sh test installs them).
it_need() {
  for n in "$@"; do
    case $n in
      bqos-*) [ -x "$BIN/$n" ] || { echo "missing $BIN/$n"; exit 1; } ;;
      *) command -v "$n" >/dev/null 2>&1 || { echo "no $n (scripts/deps.sh test installs it)"; exit 1; } ;;
    esac
  done
}

# it_want CMD...: after it_begin, passes the test as skipped ("ok - # SKIP",
# it_end) at the first CMD not on PATH (scripts/deps.sh test installs them).
it_want() {
  for n in "$@"; do
    command -v "$n" >/dev/null 2>&1 || { echo "ok - # SKIP $n not installed (scripts/deps.sh test)"; it_end; }
  done
}

# it_ha_node NAME LOG: a bqos-node NAME (--policy tokens, log LOG) on a new
# loopback port, NODE_PORT, in front of the memcached on port $MP,
# following both controllers of it_ha_pair (LS1 and LS2); waits for its port.
it_ha_node() {
  next_port; NODE_PORT=$PORT
  spawn "$2" "$BIN/bqos-node" --name "$1" --memcached-listen "127.0.0.1:$NODE_PORT" \
    --backend "memcached://127.0.0.1:$MP" --policy tokens --controller "$LS1,$LS2"
  wait_port "$NODE_PORT" 10
}

# it_ha_s1 PY SECS: after the controllers' endpoints LS1 and LS2 are set:
# memcached on a new port (MP, log $T/memcached.log), node s1 in front of it
# following both (it_ha_node, log $T/node.log; NP its port), and a raw
# protocol node obsI on each controller (PY $HERE/ha_observer.py for SECS s:
# every message with its epoch in $T/obsI.log).
it_ha_s1() {
  next_port; MP=$PORT
  start_memcached "$MP" "$T/memcached.log"
  it_ha_node s1 "$T/node.log"
  NP=$NODE_PORT
  for i in 1 2; do
    eval "ls=\$LS$i"
    spawn "$T/obs$i.err" "$1" "$HERE/ha_observer.py" "$ls" "obs$i" "$T/obs$i.log" "$2"
  done
}

# it_ha_pair JSON [OPTION...]: two controllers c1 and c2 on it_etcd's etcd
# (cluster "it", 1 s periods, --log-level debug, and the OPTIONs, which hold
# no spaces), each with its bucket file $T/bI.json holding JSON; endpoints
# LSI (nodes) and ADI (admin); starts neither.  Defines ctl_start I (starts
# cI, again after a kill: PIDI; its log a new $T/cI.TIME.log), ctl (bqos-ctl with a 1 s
# timeout), status I FIELD (a field of cI's JSON status) and leader_now (1
# or 2, the controller that leads; "" when neither does).
it_ha_pair() {
  echo "$1" >"$T/b1.json"
  shift
  cp "$T/b1.json" "$T/b2.json"
  HA_OPTS=$*
  next_port; LS1="tcp://127.0.0.1:$PORT"; next_port; AD1="tcp://127.0.0.1:$PORT"
  next_port; LS2="tcp://127.0.0.1:$PORT"; next_port; AD2="tcp://127.0.0.1:$PORT"
  ctl_start() {
    eval "ls=\$LS$1 ad=\$AD$1"
    # shellcheck disable=SC2086
    spawn "$T/c$1.$(date +%s%N).log" "$BIN/bqos-controller" --buckets "$T/b$1.json" \
      --listen "$ls" --admin "$ad" --period 1s --etcd "$ETCD" --id "c$1" --cluster it \
      --log-level debug $HA_OPTS
    eval "PID$1=\$SPAWNED"
  }
  ctl() { "$BIN/bqos-ctl" --timeout 1000 "$@"; }
  status() {
    eval "ad=\$AD$1"
    ctl --endpoint "$ad" --json status >"$T/st$1.json" 2>/dev/null && jget "$T/st$1.json" "d[\"$2\"]"
  }
  leader_now() {
    if [ "$(status 1 leader)" = True ]; then echo 1; elif [ "$(status 2 leader)" = True ]; then echo 2; fi
  }
}

# start_memcached PORT LOGFILE: a memcached on 127.0.0.1:PORT (64 MB, 2
# threads); waits until it listens.
start_memcached() {
  spawn "$2" memcached -u "$(id -un)" -l 127.0.0.1 -p "$1" -U 0 -m 256 -t 2
  wait_port "$1" 10
}

# start_twemproxy PORT STATS_PORT MC_PORT DIR: a twemproxy (nutcracker) on
# 127.0.0.1:PORT, one pool whose only server is the memcached on MC_PORT
# (config tw.yml and log tw.log in DIR); waits until it listens.
start_twemproxy() {
  cat >"$4/tw.yml" <<EOT
bench:
  listen: 127.0.0.1:$1
  hash: fnv1a_64
  distribution: ketama
  timeout: 2000
  preconnect: true
  auto_eject_hosts: false
  servers:
   - 127.0.0.1:$3:1
EOT
  spawn "$4/tw.log" nutcracker -c "$4/tw.yml" -s "$2" -a 127.0.0.1
  wait_port "$1" 10
}

# bucket_table N FILE: a bucket file of N buckets ("tenant-0000000"...), one
# object a line (the big-table benches).
bucket_table() {
  python3 - "$1" "$2" <<'PY'
import sys
n, path = int(sys.argv[1]), sys.argv[2]
with open(path, "w") as f:
    f.write('{"buckets": [\n')
    for i in range(n):
        f.write('  {"name": "tenant-%07d", "reservation": %d, "limit": %d, "weight": 1}%s\n'
                % (i, 10 + i % 90, 1000 + i % 9000, "," if i + 1 < n else ""))
    f.write(']}\n')
PY
}

# table_field TABLE BUCKET COLUMN: from a bqos-load table, prints field
# COLUMN (1-based, '|' separators dropped) of BUCKET's row.
table_field() {
  awk -v b="$2" -v c="$3" '{ gsub(/\|/, " "); if ($1 == b) { print $c; exit } }' "$1"
}

# ---- clusters on loopback -------------------------------------------------
# Variables set by the functions below:
#   MC_PORTS     memcached ports, one per server (s1, s2, ...)
#   NODE_PORTS   bqos-node ports, NODE_PIDS their pids
#   SERVER_ARGS  bqos-load options "-s s1=127.0.0.1:NODE,127.0.0.1:MC ..."
#   CTRL_EP, ADMIN_EP, CTRL_PID   the controller's endpoints and pid
# PIN=1 (default when taskset exists and there are >= 2 CPUs) pins each
# server's memcached and bqos-node to one CPU, so that servers behave like
# separate machines of equal speed instead of one pool of cores; CPU_OF is a
# list giving the CPU of s1, s2, ... (default: round robin).

: "${PIN:=1}"
command -v taskset >/dev/null 2>&1 || PIN=0
[ "$(nproc 2>/dev/null || echo 1)" -ge 2 ] || PIN=0

# cpu_of I: the CPU for server I (1-based).
cpu_of() {
  if [ -n "${CPU_OF:-}" ]; then
    echo "$CPU_OF" | awk -v i="$1" '{ print $i }'
  else
    echo $(( ($1 - 1) % $(nproc) ))
  fi
}

pin() {
  [ "$PIN" = 1 ] && taskset -a -p -c "$2" "$1" >/dev/null 2>&1
  return 0
}

# cpu_args N: bqos-load options pinning the clients of servers 1..N to
# their servers' CPUs (nothing when PIN=0).
cpu_args() {
  [ "$PIN" = 1 ] || return 0
  i=1; l=""
  while [ "$i" -le "$1" ]; do l="$l${l:+,}$(cpu_of "$i")"; i=$((i + 1)); done
  echo "--server-cpus $l"
}

# start_backends N DIR: N memcached servers, logs in DIR.
start_backends() {
  MC_PORTS=""; MC_PIDS=""
  i=1
  while [ "$i" -le "$1" ]; do
    next_port; p=$PORT
    start_memcached "$p" "$2/memcached-s$i.log" || return 1
    MC_PIDS="$MC_PIDS $SPAWNED"
    pin "$SPAWNED" "$(cpu_of "$i")"
    MC_PORTS="$MC_PORTS $p"
    i=$((i + 1))
  done
}

# start_nodes POLICY CONTROLLER_EP CONFIG DIR: one bqos-node per memcached
# in MC_PORTS.  CONTROLLER_EP and CONFIG may be "-" for none; $NODE_OPTS
# (split on spaces) is added to every node's command line.
start_nodes() {
  policy=$1; ctl=$2; cfg=$3; dir=$4
  NODE_PORTS=""; NODE_PIDS=""; SERVER_ARGS=""
  i=1
  for mp in $MC_PORTS; do
    next_port; np=$PORT
    set -- "$BIN/bqos-node" --name "s$i" --memcached-listen "127.0.0.1:$np" \
      --backend "memcached://127.0.0.1:$mp" --policy "$policy"
    [ "$ctl" = - ] || set -- "$@" --controller "$ctl"
    [ "$cfg" = - ] || set -- "$@" --config "$cfg"
    # shellcheck disable=SC2086
    set -- "$@" ${NODE_OPTS:-}
    spawn "$dir/node-s$i-$policy.log" "$@"
    NODE_PIDS="$NODE_PIDS $SPAWNED"
    pin "$SPAWNED" "$(cpu_of "$i")"
    NODE_PORTS="$NODE_PORTS $np"
    SERVER_ARGS="$SERVER_ARGS -s s$i=127.0.0.1:$np,127.0.0.1:$mp"
    i=$((i + 1))
  done
  for np in $NODE_PORTS; do wait_port "$np" 10 || return 1; done
}

stop_backends() {
  # shellcheck disable=SC2086
  [ -n "$MC_PIDS" ] && stop_pid $MC_PIDS
  MC_PIDS=""
}

stop_nodes() {
  # shellcheck disable=SC2086
  [ -n "$NODE_PIDS" ] && stop_pid $NODE_PIDS
  NODE_PIDS=""
}

# start_controller BUCKETS CAPACITY DIR [EXTRA...]: bqos-controller (plus
# $CTRL_OPTS, split on spaces) on free
# loopback ports, period 1 s, 5 intervals.
start_controller() {
  bf=$1; cap=$2; dir=$3; shift 3
  next_port; cp=$PORT; next_port; ap=$PORT
  CTRL_EP="tcp://127.0.0.1:$cp"; ADMIN_EP="tcp://127.0.0.1:$ap"
  spawn "$dir/controller.log" "$BIN/bqos-controller" --buckets "$bf" --listen "$CTRL_EP" \
    --admin "$ADMIN_EP" --period 1s --intervals 5 --capacity "$cap" "$@" ${CTRL_OPTS:-}
  CTRL_PID=$SPAWNED
  wait_port "$cp" 10
}

stop_controller() {
  [ -n "${CTRL_PID:-}" ] && stop_pid "$CTRL_PID"
  CTRL_PID=""
}

# ---- experiments ----------------------------------------------------------
# experiment N OUT RUN...: starts N memcached servers and N bqos-nodes, profiles
# the servers' capacity with a short run of the first run's scenario through
# rr nodes (each server's throughput under the workload), then runs
# every RUN, given as NAME:LABEL:POLICY:SCENARIO (POLICY rr = nodes with
# --policy rr and no controller; tokens = controller + nodes with tokens).
# Each run writes OUT/NAME/ (CSVs, summary.json, table.txt).  Uses BIN, DUR,
# PROFILE, PRELOAD, SCALE (percent: the scenarios' "N%" rates are N% of
# SCALE% of the profiled capacity; default 100) and LOGS=OUT/logs.  Sets CAP
# (IOs/s per server), RCAP (CAP x SCALE%, what "100%" means) and
# EXP_SUMS, EXP_FILES, EXP_TITLES (the runs' summaries, cumulative CSVs and
# labels).  Returns nonzero on failure with a message on stderr.
experiment() {
  nsrv=$1; out=$2; shift 2
  LOGS=$out/logs
  mkdir -p "$LOGS" || return 1
  EXP_SUMS=""; EXP_FILES=""; EXP_TITLES=""
  start_backends "$nsrv" "$LOGS" || { echo "memcached did not start (see $LOGS)" >&2; return 1; }
  start_nodes rr - - "$LOGS" || { echo "bqos-node did not start (see $LOGS)" >&2; return 1; }
  first=${1##*:}
  # The profile run: the first scenario itself for PROFILE seconds on the rr
  # nodes; each server's throughput under this workload is its capacity
  # (like the paper's profile run), the mean over servers sets the rates.
  rm -rf "$out/profile"
  # shellcheck disable=SC2086
  "$BIN/bqos-load" $SERVER_ARGS $(cpu_args "$nsrv") -q -c 1 --preload "$PRELOAD" -d "$PROFILE" \
    -o "$out/profile" -l profile "$first" >/dev/null 2>"$LOGS/profile.log" ||
    { echo "profile run failed (see $LOGS/profile.log)" >&2; return 1; }
  # Capacity: the measured periods' total rate (after the warm-up period)
  # over the servers; the per-server rates (whole run) are for the record.
  awk '/^ "total_rate"/ { gsub(/,/, "", $2); t = $2 } /"servers"/ { f = 1 }
    f && /"name"/ { gsub(/[",]/, "", $2); n = $2 }
    f && /"rate"/ { gsub(/,/, "", $2); printf "server %s %.0f\n", n, $2; k++ }
    END { if (k) printf "capacity %.0f\n", t / k }' "$out/profile/summary.json" >"$out/profile.txt"
  loaded=$first
  CAP=$(awk '$1 == "capacity" { print $2 }' "$out/profile.txt")
  [ -n "$CAP" ] && [ "$CAP" -gt 0 ] || { echo "the profile gave no capacity" >&2; return 1; }
  echo "profiled capacity: $CAP IOs/s per server ($(awk '$1 == "server" { printf "%s%s %s", sep, $2, $3; sep = ", " }' "$out/profile.txt"))"
  RCAP=$((CAP * ${SCALE:-100} / 100))
  [ "$RCAP" -gt 0 ] || { echo "SCALE=${SCALE:-} leaves no capacity" >&2; return 1; }
  [ "${SCALE:-100}" = 100 ] || echo "rates scaled to ${SCALE}%: \"100%\" = $RCAP IOs/s"
  cur=rr
  for spec in "$@"; do
    name=${spec%%:*}; rest=${spec#*:}
    label=${rest%%:*}; rest=${rest#*:}
    pol=${rest%%:*}; scen=${rest#*:}
    rm -rf "${out:?}/$name"; mkdir -p "$out/$name"
    pre=0
    [ "$scen" = "$loaded" ] || { pre=$PRELOAD; loaded=$scen; }
    align=""
    if [ "$pol" = tokens ]; then
      [ -x "$BIN/bqos-controller" ] || { echo "no $BIN/bqos-controller: skipping $label" >&2; continue; }
      stop_nodes
      "$BIN/bqos-load" -c "$RCAP" --print-buckets "$scen" >"$out/$name/buckets.json" || return 1
      start_controller "$out/$name/buckets.json" "$CAP" "$LOGS" ||
        { echo "bqos-controller did not start (see $LOGS)" >&2; return 1; }
      mv "$LOGS/controller.log" "$LOGS/controller-$name.log" 2>/dev/null
      start_nodes tokens "$CTRL_EP" "$out/$name/buckets.json" "$LOGS" ||
        { echo "bqos-node did not start (see $LOGS)" >&2; return 1; }
      sleep 1.5   # the nodes register and receive their first tokens
      if grep -l "no control client" "$LOGS"/node-s*-tokens.log >/dev/null 2>&1; then
        echo "warning: this bqos-node has no controller client; the $label run gets no tokens" >&2
      fi
      if [ -x "$BIN/bqos-ctl" ]; then
        st=$("$BIN/bqos-ctl" --endpoint "$ADMIN_EP" --json status 2>/dev/null)
        now=$(date +%s.%N)
        el=$(echo "$st" | sed -n 's/.*"elapsed_ms": *\([0-9]*\).*/\1/p' | head -1)
        [ -n "$el" ] && align="--period-start $(echo "$now $el" | awk '{ printf "%.3f", $1 - $2 / 1000 }')"
      fi
    elif [ "$cur" != rr ]; then
      stop_nodes; stop_controller
      start_nodes rr - - "$LOGS" || { echo "bqos-node did not start (see $LOGS)" >&2; return 1; }
    fi
    cur=$pol
    echo "run $label: ${DUR}s"
    # shellcheck disable=SC2086
    "$BIN/bqos-load" $SERVER_ARGS $(cpu_args "$nsrv") -c "$RCAP" --preload "$pre" -d "$DUR" \
      -o "$out/$name" -l "$label" $align "$scen" >"$out/$name/table.txt" 2>"$LOGS/load-$name.log" ||
      { echo "run $label failed (see $LOGS/load-$name.log)" >&2; return 1; }
    if [ "$pol" = tokens ]; then
      # Control traffic: the controller's mean time per round (receive,
      # decode, pShift, encode, send) times the rounds in a period.
      if [ -x "$BIN/bqos-ctl" ] &&
        "$BIN/bqos-ctl" --endpoint "$ADMIN_EP" --json status >"$out/$name/controller-status.json" 2>/dev/null; then
        share=$(awk '/"mean_ms"/ { f = 1; next } f && /}/ { f = 0 } f { gsub(/,/, "", $2); s += $2 }
          /"intervals"/ && !k { gsub(/,/, "", $2); k = $2 } /"period_ms"/ { gsub(/,/, "", $2); p = $2 }
          END { if (p) printf "%.3f%% of the period (%.3f ms per round)", s * k / p * 100, s }' \
          "$out/$name/controller-status.json")
        [ -n "$share" ] && echo "control time $label: $share" | tee "$out/$name/control.txt"
        pushes=$(sed -n 's/.*"push_tokens": *\([0-9]*\).*/\1/p' "$out/$name/controller-status.json" | head -1)
        [ "${pushes:-0}" -gt 0 ] || echo "warning: the controller pushed no tokens in the $label run" >&2
      fi
      stop_nodes; stop_controller
      cur=none
    fi
    EXP_SUMS="$EXP_SUMS $out/$name/summary.json"
    EXP_FILES="$EXP_FILES $out/$name/cumulative.csv"
    EXP_TITLES="$EXP_TITLES $label"
  done
  stop_nodes; stop_controller; stop_backends
  return 0
}

# plot OUT.png HEADING [RES]: the cumulative plot of the runs in EXP_FILES.
plot() {
  command -v gnuplot >/dev/null 2>&1 || { echo "no gnuplot: no plot" >&2; return 0; }
  extra=""
  [ -n "${3:-}" ] && extra="; res=$3"
  gnuplot -e "files='${EXP_FILES# }'; titles='${EXP_TITLES# }'; out='$1'; heading='$2'$extra" \
    "$LIB_DIR/cumulative.gp" 2>"$LOGS/gnuplot.log" && echo "plot: $1"
}

# nbd_tls_pki DIR: NBD TLS credentials for tests and benches: a self-signed
# certificate for 127.0.0.1/localhost (DIR/server-cert.pem, its key
# DIR/server-key.pem mode 0600, DIR/ca-cert.pem for libnbd's
# tls-certificates=DIR) with certtool or else openssl, and DIR/keys.psk
# (psktool's USERNAME:HEXKEY, user alice, mode 0600).  Returns 1 if neither
# tool is installed.
nbd_tls_pki() {
  mkdir -p "$1"
  if command -v certtool >/dev/null 2>&1; then
    certtool --generate-privkey --key-type ecdsa --outfile "$1/server-key.pem" 2>/dev/null
    cat >"$1/cert.tmpl" <<'TMPL'
cn = localhost
ip_address = 127.0.0.1
dns_name = localhost
expiration_days = 30
tls_www_server
signing_key
encryption_key
ca
TMPL
    certtool --generate-self-signed --load-privkey "$1/server-key.pem" \
      --template "$1/cert.tmpl" --outfile "$1/server-cert.pem" 2>/dev/null
  elif command -v openssl >/dev/null 2>&1; then
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 30 \
      -keyout "$1/server-key.pem" -out "$1/server-cert.pem" -subj /CN=localhost \
      -addext "subjectAltName=IP:127.0.0.1,DNS:localhost" 2>/dev/null
  else
    return 1
  fi
  chmod 600 "$1/server-key.pem"
  cp "$1/server-cert.pem" "$1/ca-cert.pem"
  echo "alice:$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')" >"$1/keys.psk"
  chmod 600 "$1/keys.psk"
  [ -s "$1/server-cert.pem" ]
}

# ---- block nodes (NBD tests) ------------------------------------------------
# logged_port LOG: the port a block node logged it listens on (empty if none yet).
logged_port() { sed -n 's/.* on [0-9.]*:\([0-9][0-9]*\), backend.*/\1/p' "$1" 2>/dev/null | head -1; }

# start_nbd_node LOG PROGRAM ARGS...: starts a block node on a free port (port
# 0, read back from its log); sets PID and PORT, or exits the test (named by
# IT_NAME) with the log if it does not start.
start_nbd_node() {
  log=$1; prog=$2; shift 2
  "$prog" --nbd-listen 127.0.0.1:0 "$@" 2>"$log" &
  PID=$!
  LIB_PIDS="$LIB_PIDS $PID"
  wait_for '[ -n "$(logged_port "$log")" ] || ! kill -0 "$PID" 2>/dev/null' 5
  PORT=$(logged_port "$log")
  [ -n "$PORT" ] && return 0
  echo "${IT_NAME:-node}: node did not start:"; cat "$log"
  exit 1
}

# nbd_roundtrip URI: writes $T/in.bin to the export with nbdcopy, reads it back
# into $T/rt.bin, compares.
nbd_roundtrip() {
  nbdcopy "$T/in.bin" "$1" && nbdcopy "$1" "$T/rt.bin" &&
    cmp -n "$(stat -c %s "$T/in.bin")" "$T/in.bin" "$T/rt.bin" >/dev/null
}
