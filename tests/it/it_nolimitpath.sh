#!/bin/sh
# it_nolimitpath.sh - no path around a limit (issue 13), with a real memcached, bqos-controller, bqos-nodes and bqos-load: a key prefix nobody configured is held to the `default` bucket's limit and listed under it by `bqos-ctl status`; a removed bucket's traffic is default traffic, not unlimited; a second node under a name that is up is refused on both sides and holds its requests while the first keeps serving with tokens, and is accepted once the first is gone.
#
# Limits are checked per QoS period: bqos-load aligns its periods with the
# controller's (--period-start from the status's elapsed_ms) and periods.csv
# has each bucket's completed IOs per full period; a period may hold at most
# 5% more than the limit (alignment error, IOs in flight at a push).
. "$(dirname "$0")/../../scripts/lib.sh"
it_begin it_nolimitpath
[ -n "${KEEP:-}" ] && trap 'cleanup' EXIT
CTL=$BIN/bqos-ctl
DLIM=100  # the default bucket's limit, IOs/s

cat >"$T/b.json" <<JSON
{"buckets":[{"name":"red","reservation":0},{"name":"noisy","reservation":0,"limit":50},
 {"name":"default","reservation":0,"limit":$DLIM}]}
JSON
next_port; MC=$PORT
start_memcached "$MC" "$T/memcached.log" || { echo "memcached did not start"; exit 1; }
start_controller "$T/b.json" 20000 "$T" || { echo "controller did not start"; cat "$T/controller.log"; exit 1; }
ctl() { "$CTL" --endpoint "$ADMIN_EP" --timeout 3000 "$@"; }
next_port; N1=$PORT
spawn "$T/node1.log" "$BIN/bqos-node" --name s1 --memcached-listen "127.0.0.1:$N1" \
  --backend "memcached://127.0.0.1:$MC" --controller "$CTRL_EP"
NODE1=$SPAWNED
wait_port "$N1" 10 || { echo "node did not start"; cat "$T/node1.log"; exit 1; }
check "node s1 is welcomed" 'wait_for "grep -q welcomed \"$T/node1.log\"" 10'
check "node s1 holds the table with default" \
  'wait_for "grep -q \"has a .default. bucket\" \"$T/node1.log\"" 10'

# scenario NAME BUCKETS...: a 4 s closed-loop run of BUCKETS on s1, 8 in flight each.
scenario() {
  f=$T/$1.json; shift
  bl=""
  for b in "$@"; do
    bl="$bl${bl:+,}{\"name\":\"$b\",\"servers\":[\"s1\"],\"outstanding\":8}"
  done
  cat >"$f" <<JSON
{"duration":4,"period":1,"intervals":5,"warmup_periods":1,
 "workload":{"get_ratio":0.5,"value_size":100,"preload":40},
 "servers":[{"name":"s1","address":"127.0.0.1:$N1","backend":"127.0.0.1:$MC"}],
 "buckets":[$bl]}
JSON
}

# period_start: the wall-clock start of the controller's current period,
# from its status's elapsed_ms, taken at the midpoint of the fastest of five
# admin round trips (libzmq through ctypes: bqos-ctl's own start-up would
# add tens of ms, and the default bucket spends its L-tokens in a burst at
# each period start, so a misaligned window would count two bursts).
period_start() {
  python3 - "$ADMIN_EP" <<'PY'
import ctypes, json, sys, time
z = ctypes.CDLL("libzmq.so.5")
z.zmq_ctx_new.restype = ctypes.c_void_p
z.zmq_socket.restype = ctypes.c_void_p
z.zmq_socket.argtypes = [ctypes.c_void_p, ctypes.c_int]
z.zmq_setsockopt.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t]
z.zmq_connect.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
z.zmq_send.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int]
z.zmq_recv.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int]
ctx = z.zmq_ctx_new()
best = None
for _ in range(5):
    s = z.zmq_socket(ctx, 3)  # ZMQ_REQ
    ms = ctypes.c_int(2000)
    z.zmq_setsockopt(s, 27, ctypes.byref(ms), 4)  # ZMQ_RCVTIMEO
    z.zmq_setsockopt(s, 17, ctypes.byref(ctypes.c_int(0)), 4)  # ZMQ_LINGER
    z.zmq_connect(s, sys.argv[1].encode())
    req = b'{"v":1,"cmd":"status"}'
    buf = ctypes.create_string_buffer(1 << 20)
    t0 = time.time()
    z.zmq_send(s, req, len(req), 0)
    n = z.zmq_recv(s, buf, len(buf), 0)
    t1 = time.time()
    if n <= 0:
        continue
    el = json.loads(buf.raw[:n])["elapsed_ms"] / 1000.0
    if best is None or t1 - t0 < best[0]:
        best = (t1 - t0, (t0 + t1) / 2 - el)
if best:
    print("%.4f" % best[1])
PY
}

# run NAME: bqos-load on scenario NAME, periods aligned with the controller's
# but starting 50 ms early: the default bucket is saturated, so the last
# 50 ms of each controller period are idle (its tokens ran out), and the
# jitter of a few ms in period_start cannot move a burst's first IOs into
# the previous window.  IOs served beyond the limit late in a period still
# land in the next window, on top of its burst.
run() {
  ps=$(period_start)
  al=""
  [ -n "$ps" ] && al="--period-start $(echo "$ps" | awk '{ printf "%.4f", $1 - 0.05 }')"
  # shellcheck disable=SC2086
  "$BIN/bqos-load" -q $al -o "$T/$1" -l "$1" "$T/$1.json" >"$T/$1.table" 2>"$T/$1.log"
}

# run_busy NAME BUCKETS...: run NAME; run it once more if the BUCKETS got
# nothing in every measured period, or if node s1 fell back to its local
# policy meanwhile: the 2-core machine shared with other test suites can
# stall every process for seconds, and a node that hears nothing from its
# controller for 1.5 intervals falls back (round robin, no limits): that
# is the fallback's business (--fallback), not the default bucket's.
fallbacks() { grep -c "falling back" "$T/node1.log"; }
run_busy() {
  n=$1; shift
  f0=$(fallbacks)
  run "$n"; rb=$?
  if [ "$(fallbacks)" != "$f0" ]; then
    echo "# $n: node s1 fell back to its local policy during the run (stalled machine); running it again"
  elif [ $rb -eq 0 ] && [ "$(period_max "$T/$n" "$@" 2>/dev/null)" != 0 ]; then
    return 0
  else
    echo "# $n: nothing measured (machine stalled?); running it again"
  fi
  run "$n"
}

# period_max DIR BUCKETS...: the most IOs the BUCKETS completed together in
# one period after the first (the warm-up: its window opens 50 ms before the
# controller's period, when that period's unused tokens are still there).
period_max() {
  d=$1; shift
  awk -F, -v list=" $* " 'NR > 1 && $1 > 1 && index(list, " " $2 " ") { s[$1] += $5 }
    END { m = 0; for (p in s) if (s[p] > m) m = s[p]; print m }' "$d/periods.csv"
}
# status_has RE: the controller's JSON status, without blanks, matches RE.
status_has() {
  ctl --json status 2>/dev/null | tr -d ' \n' | grep -q "$1"
}
default_limited() { status_has '"default":{"configured":true'; }
default_lists() { status_has "\"unconfigured\":\[[^]]*\"name\":\"$1\""; }
noisy_configured() { status_has '"name":"noisy","reservation"'; }
dups_counted() { status_has '"duplicate_names":[1-9]'; }

# 1. A prefix nobody configured: held to default's limit, listed under default.
# The status shows this period's traffic: it is read while the load runs.
text_lists_evil() {
  ctl status >"$T/status.txt" 2>&1 && grep -Eq "^  evil +[0-9]+ +[0-9]+ +1$" "$T/status.txt"
}
scenario evil evil
run_busy evil evil >"$T/evil.out" 2>&1 &
LOAD=$!
check "status says default is limited" 'default_limited'
check "status lists evil under default" 'wait_for "default_lists evil" 8'
check "bqos-ctl status prints evil under it" 'wait_for text_lists_evil 8'
check "bqos-ctl status prints default's limit" 'grep -q "^default: reservation 0, limit $DLIM" "$T/status.txt"'
wait $LOAD; rc=$?
cat "$T/evil.out"
check "load on prefix evil ran (rc $rc)" '[ $rc -eq 0 ] && [ -s "$T/evil/periods.csv" ]'
m=$(period_max "$T/evil" evil)
check "evil: at most 1.05 x default's limit per period ($m <= $DLIM x 1.05)" \
  '[ "$m" -gt 0 ] && [ "$m" -le $((DLIM * 105 / 100)) ]'

# 2. A removed bucket: its traffic is default traffic, with evil's, not unlimited.
ctl remove noisy >/dev/null 2>&1
check "noisy removed" 'wait_for "! noisy_configured" 5'
scenario removed noisy evil
run_busy removed noisy evil >"$T/removed.out" 2>&1 &
LOAD=$!
check "status lists noisy under default" 'wait_for "default_lists noisy" 8'
wait $LOAD; rc=$?
cat "$T/removed.out"
check "load on noisy and evil ran (rc $rc)" '[ $rc -eq 0 ] && [ -s "$T/removed/periods.csv" ]'
m=$(period_max "$T/removed" noisy evil)
mn=$(period_max "$T/removed" noisy)
check "noisy + evil: at most 1.05 x default's limit per period ($m <= $DLIM x 1.05)" \
  '[ "$m" -gt 0 ] && [ "$m" -le $((DLIM * 105 / 100)) ]'
check "noisy is served, as default traffic ($mn IOs in its best period)" '[ "$mn" -gt 0 ]'

# 3. A second node under the name s1: refused on both sides; it holds its
# requests; the first keeps its tokens and serves.
next_port; N2=$PORT
spawn "$T/node2.log" "$BIN/bqos-node" --name s1 --memcached-listen "127.0.0.1:$N2" \
  --backend "memcached://127.0.0.1:$MC" --controller "$CTRL_EP"
NODE2=$SPAWNED
wait_port "$N2" 10
check "controller refuses the second s1" 'wait_for "grep -q \"refused a hello from another process\" \"$T/controller.log\"" 10'
check "second s1 says to choose a unique --name" 'wait_for "grep -q \"unique --name\" \"$T/node2.log\"" 10'
check "status counts the refusal" 'wait_for dups_counted 5'
# memcached text: a get on node 2 is held (no answer), version is local.
held=$(python3 - "$N2" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
s.sendall(b"version\r\n")
v = s.recv(100)
s.sendall(b"get evil:obj1\r\n")
s.settimeout(1.5)
try:
    print("answered" if s.recv(100) else "closed")
except socket.timeout:
    print("held" if v.startswith(b"VERSION") else "no-version")
PY
)
check "second s1 holds a request instead of serving it ($held)" '[ "$held" = held ]'
scenario after evil
run_busy after evil; rc=$?
m=$(period_max "$T/after" evil)
check "first s1 still serves, with tokens ($m IOs per period, <= $DLIM x 1.05)" \
  '[ $rc -eq 0 ] && [ "$m" -gt 0 ] && [ "$m" -le $((DLIM * 105 / 100)) ]'
# Orphaned, it would stay in its fallback (round robin, no limit) and the
# run above would have exceeded the limit; a process stall may still cause
# a fallback, but it must end at the next tokens.
in_tokens() {
  [ "$(grep -c "falling back" "$T/node1.log")" -lt "$(grep -c "resuming policy tokens" "$T/node1.log")" ]
}
check "first s1 runs on tokens" 'wait_for in_tokens 3'
check "status: s1 up" 'status_has "{\"name\":\"s1\",\"state\":\"up\""'

# 4. The first s1 goes away (goodbye): the second is accepted.
stop_pid "$NODE1"
check "second s1 accepted once the first is gone" \
  'wait_for "grep -q \"accepted this node.s name again\" \"$T/node2.log\"" 10'
check "second s1 welcomed" 'wait_for "grep -q welcomed \"$T/node2.log\"" 5'

it_end 'for f in controller node1 node2 evil removed after; do echo "== $f"; tail -n 15 "$T/$f.log"; done'
