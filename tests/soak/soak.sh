#!/bin/sh
# soak.sh - `make soak`: a controller, two memcached nodes and a block node under checked load and hostile peers for SOAK_MINUTES (default 10) while a seeded chaos loop SIGKILLs and restarts the controller, one node and one memcached; fails on any wrong or lost reply, memory over its bound or a limit broken outside the failure windows.
#
# Usage: tests/soak/soak.sh   (BIN=bin; SOAK_MINUTES=10; SOAK_SEED=N to
# replay a chaos schedule; KEEP=1 keeps the scratch directory, which is
# always kept on failure).  Bounds (MB of VmRSS, sampled every 15 s):
# SOAK_RSS_NODE=320, SOAK_RSS_CONTROLLER=128, SOAK_RSS_NBD=256,
# SOAK_RSS_MEMCACHED=320.  docs/fuzzing.md, "Soak", says what it checks.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../../scripts/lib.sh"
BIN=${BIN:-bin}
MIN=${SOAK_MINUTES:-10}
SEED=${SOAK_SEED:-$(date +%s)}
DUR=$((MIN * 60))
PY=python3
$PY -c "import zmq" 2>/dev/null || PY=/usr/bin/python3
for b in bqos-controller bqos-node bqos-nbd-node bqos-load bqos-ctl; do
  [ -x "$BIN/$b" ] || { echo "soak: missing $BIN/$b (run make)"; exit 1; }
done
command -v memcached >/dev/null || { echo "soak: memcached not installed (scripts/deps.sh test)"; exit 1; }
$PY -c "import zmq" 2>/dev/null || { echo "soak: no pyzmq (scripts/deps.sh test)"; exit 1; }
T=$(mktemp -d /tmp/soak.XXXXXX)
RC=1
trap 'cleanup; if [ "$RC" = 0 ] && [ -z "${KEEP:-}" ]; then rm -rf "$T"; else echo "soak: logs kept in $T"; fi' EXIT
trap 'exit 130' INT TERM
now() { date +%s.%N | cut -c1-14; }
say() { echo "soak: $(date -u +%H:%M:%S) $*"; }
# drop_pid PID: forgets a killed process, so that cleanup never signals its
# number again (it may belong to another process by then).
drop_pid() {
  l=""; for p in $LIB_PIDS; do [ "$p" = "$1" ] || l="$l $p"; done; LIB_PIDS=$l
}

cat >"$T/settings.env" <<EOF
SEED=$SEED
MINUTES=$MIN
PERIOD=1
RSS_NODE=${SOAK_RSS_NODE:-320}
RSS_CONTROLLER=${SOAK_RSS_CONTROLLER:-128}
RSS_NBD=${SOAK_RSS_NBD:-256}
RSS_MEMCACHED=${SOAK_RSS_MEMCACHED:-320}
NODE_KILLED=s1
MC_KILLED_NODE=s2
EOF
say "seed $SEED, $MIN min, scratch $T"

# ---- the cluster ------------------------------------------------------------
cat >"$T/buckets.json" <<'EOF'
{"buckets":[{"name":"lim","reservation":0,"limit":300},{"name":"res","reservation":200,"limit":100000},
 {"name":"chk","reservation":100,"limit":100000},{"name":"vol","reservation":50,"limit":100000}]}
EOF
next_port; CP=$PORT; next_port; AP=$PORT
CTRL_EP="tcp://127.0.0.1:$CP"; ADMIN_EP="tcp://127.0.0.1:$AP"
NCTRL=0
start_ctrl() {
  NCTRL=$((NCTRL + 1))
  spawn "$T/controller.$NCTRL.log" "$BIN/bqos-controller" --buckets "$T/buckets.json" \
    --listen "$CTRL_EP" --admin "$ADMIN_EP" --period 1s --intervals 5 --capacity 2000
  CTRL_PID=$SPAWNED
  wait_port "$CP" 10
}
next_port; MC1=$PORT; next_port; MC2=$PORT
NMC=0
start_mc() {   # start_mc PORT: sets MCPID
  NMC=$((NMC + 1))
  start_memcached "$1" "$T/memcached.$NMC.log"; r=$?
  MCPID=$SPAWNED
  return $r
}
next_port; NP1=$PORT; next_port; NP2=$PORT; next_port; NBP=$PORT
NNODE=0
start_node() {   # start_node NAME PORT MCPORT: sets NODEPID
  NNODE=$((NNODE + 1))
  spawn "$T/node-$1.$NNODE.log" "$BIN/bqos-node" --name "$1" --memcached-listen "127.0.0.1:$2" \
    --backend "memcached://127.0.0.1:$3" --policy tokens --controller "$CTRL_EP" \
    --config "$T/buckets.json" --capacity 2000
  NODEPID=$SPAWNED
  wait_port "$2" 10
}
start_ctrl || { echo "soak: controller did not start"; exit 1; }
start_mc "$MC1" || exit 1; MC1PID=$MCPID
start_mc "$MC2" || exit 1; MC2PID=$MCPID
start_node s1 "$NP1" "$MC1" || { echo "soak: s1 did not start"; exit 1; }; N1PID=$NODEPID
start_node s2 "$NP2" "$MC2" || { echo "soak: s2 did not start"; exit 1; }; N2PID=$NODEPID
spawn "$T/nbd-s3.log" "$BIN/bqos-nbd-node" --name s3 --nbd-listen "127.0.0.1:$NBP" \
  --backend "file:$T/store/" --export-size 64m --buckets vol --controller "$CTRL_EP" --capacity 2000
NBPID=$SPAWNED
wait_port "$NBP" 10 || { echo "soak: block node did not start"; exit 1; }
wait_for 'grep -q "resuming policy tokens" "$T/nbd-s3.log"' 10 || say "warning: s3 did not report tokens yet"
say "controller $CTRL_EP, nodes s1 :$NP1 (memcached :$MC1), s2 :$NP2 (memcached :$MC2), block node s3 :$NBP"

# ---- load -------------------------------------------------------------------
# lim: closed loop far above its limit of 300 IOs/s; res: closed loop with
# a reservation.  The run is aligned with the controller's periods, started
# 0.3 s into one so that its first period is the next one (no ambiguity).
cat >"$T/scenario.json" <<EOF
{"duration": $DUR, "period": 1, "intervals": 5, "capacity": 2000,
 "workload": {"preload": 0, "outstanding": 2, "value_size": 1000},
 "servers": [{"name": "s1", "address": "127.0.0.1:$NP1"}, {"name": "s2", "address": "127.0.0.1:$NP2"}],
 "buckets": [{"name": "lim", "limit": 300, "servers": ["s1", "s2"]},
             {"name": "res", "reservation": 200, "servers": ["s1", "s2"]}]}
EOF
"$BIN/bqos-ctl" --endpoint "$ADMIN_EP" --json status >"$T/st.json" 2>/dev/null
el=$(sed -n 's/.*"elapsed_ms": *\([0-9]*\).*/\1/p' "$T/st.json" | head -1)
[ -n "$el" ] || { echo "soak: no controller status"; exit 1; }
P0=$(echo "$(now) $el" | awk '{ printf "%.3f", $1 - $2 / 1000 }')
# Wait until 0.3 s into a period.
sleep "$(echo "$(now) $P0" | awk '{ f = ($1 - $2) - int($1 - $2); w = 0.3 - f; if (w < 0) w += 1; printf "%.3f", w }')"
L=$(now)
spawn "$T/load.log" "$BIN/bqos-load" -q -o "$T/load" -l soak -d "$DUR" --period-start "$P0" "$T/scenario.json"
LOADPID=$SPAWNED
echo "LOAD_START=$(echo "$L $P0" | awk '{ printf "%.3f", $2 + int($1 + 0.2 - $2) + 1 }')" >>"$T/settings.env"

# ---- checking and hostile clients ---------------------------------------------
spawn "$T/client.log" "$PY" -u "$HERE/soak_client.py" run "$T/client.json" "$DUR" "$SEED" \
  --mc "s1=$NP1" --mc "s2=$NP2" --nbd "$NBP/vol"
CLIENTPID=$SPAWNED
# A raw protocol peer claiming period 2^53 (issue 18, defect 3).
spawn "$T/liar.err" "$PY" "$HERE/../it/ha_observer.py" "$CTRL_EP" liar "$T/liar.log" "$DUR" \
  9007199254740992 "$(now)"

# ---- chaos --------------------------------------------------------------------
# The schedule: per target, kills every 25-70 s (seeded), down 0.5-3 s,
# none in the last 20 s of the run; events run one after another.
awk -v seed="$SEED" -v dur="$DUR" 'BEGIN {
  srand(seed); split("controller node memcached", tg, " ")
  for (i = 1; i <= 3; i++) { t = 10 + rand() * 40
    while (t < dur - 20) { printf "%d %s %.1f\n", t, tg[i], 0.5 + rand() * 2.5; t += 25 + rand() * 45 } } }' |
  sort -n >"$T/schedule.txt"
say "chaos schedule (seed $SEED): $(awk '{ printf "%s%s@%ds", s, $2, $1; s = ", " }' "$T/schedule.txt")"
echo "target,killed,restarted" >"$T/events.csv"
echo "time,role,pid,kb" >"$T/rss.csv"
EXTRA=""
fail() { say "FAIL: $*"; EXTRA="$EXTRA|$*"; }
rss() {
  rt=$(now)
  for rp in "controller:$CTRL_PID" "node-s1:$N1PID" "node-s2:$N2PID" "nbd-s3:$NBPID" \
    "memcached-s1:$MC1PID" "memcached-s2:$MC2PID"; do
    kb=$(awk '/^VmRSS:/ { print $2 }' "/proc/${rp#*:}/status" 2>/dev/null)
    [ -n "$kb" ] && echo "$rt,${rp%%:*},${rp#*:},$kb" >>"$T/rss.csv"
  done
}
chaos() {   # chaos TARGET DOWN_SECONDS
  case $1 in
    controller) pid=$CTRL_PID ;;
    node) pid=$N1PID ;;
    memcached) pid=$MC2PID ;;
  esac
  k=$(now)
  kill -9 "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; drop_pid "$pid"
  sleep "$2"
  case $1 in
    controller) start_ctrl || fail "controller did not restart" ;;
    node) start_node s1 "$NP1" "$MC1" || fail "s1 did not restart"; N1PID=$NODEPID ;;
    memcached) start_mc "$MC2" || fail "memcached s2 did not restart"; MC2PID=$MCPID ;;
  esac
  echo "$1,$k,$(now)" >>"$T/events.csv"
  say "killed $1 (pid $pid), restarted after $2 s"
}
T0=$(date +%s)
END=$((T0 + DUR))
next_rss=0; next_prog=$((T0 + 30))
exec 3<"$T/schedule.txt"
read -r ev_t ev_what ev_down <&3 || ev_t=""
while [ "$(date +%s)" -lt "$END" ]; do
  t=$(date +%s)
  if [ -n "$ev_t" ] && [ $((t - T0)) -ge "$ev_t" ]; then
    chaos "$ev_what" "$ev_down"
    read -r ev_t ev_what ev_down <&3 || ev_t=""
  fi
  [ "$t" -ge "$next_rss" ] && { rss; next_rss=$((t + 15)); }
  if [ "$t" -ge "$next_prog" ]; then
    next_prog=$((t + 30))
    say "$((t - T0))/$DUR s, $(($(wc -l <"$T/events.csv") - 1)) kills; $(tail -n 1 "$T/client.log" | sed 's/^soak-client: //')"
  fi
  for rp in "bqos-node s2:$N2PID" "block node:$NBPID" "memcached s1:$MC1PID"; do
    kill -0 "${rp#*:}" 2>/dev/null || { fail "${rp%%:*} died (not killed by the chaos loop)"; exit 1; }
  done
  sleep 0.5
done
exec 3<&-
rss

# ---- the end: every daemon is still up and the controller's clock sane ----------
wait_for '! kill -0 $CLIENTPID 2>/dev/null' 60 || fail "the checking client did not finish"
wait_for '! kill -0 $LOADPID 2>/dev/null' 30 || fail "bqos-load did not finish"
for rp in "controller:$CTRL_PID" "bqos-node s1:$N1PID" "bqos-node s2:$N2PID" "block node:$NBPID" \
  "memcached s1:$MC1PID" "memcached s2:$MC2PID"; do
  kill -0 "${rp#*:}" 2>/dev/null || fail "${rp%%:*} is not running at the end"
done
"$BIN/bqos-ctl" --endpoint "$ADMIN_EP" --json status >"$T/st-end.json" 2>/dev/null
pe=$(sed -n 's/.*"period": *\([0-9]*\).*/\1/p' "$T/st-end.json" | head -1)
[ -n "$pe" ] && [ "$pe" -lt 100000 ] || fail "the controller's period is implausible at the end (${pe:-no status}; the liar claims 2^53)"
grep -q '"errors": 0,' "$T/load/summary.json" 2>/dev/null || say "bqos-load counted failed requests (expected around kills): $(sed -n 's/^ *"errors": \([0-9]*\),/\1/p' "$T/load/summary.json" | tail -1)"
echo "EXTRA_FAIL=$EXTRA" >>"$T/settings.env"
cleanup
$PY "$HERE/soak_client.py" verdict "$T"
RC=$?
exit $RC
