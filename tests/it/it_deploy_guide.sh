#!/bin/sh
# it_deploy_guide.sh - docs/operations.md's by-hand deployment recipe, run as written: the shell block(s) after an "<!-- it_deploy_guide -->" line are extracted and run (sh -e) with the directories and ports the recipe's first lines take from the environment pointed at this test's, in front of a real memcached; then the three nodes are up in the controller's status (CURVE keys, a controller on 0.0.0.0), the limited bucket red stays within its limit while the unlimited blue goes beyond it, and everything the recipe started stops by the PIDs it recorded.
. "$(dirname "$0")/../../scripts/lib.sh"
it_begin it_deploy_guide
cd "$(dirname "$0")/../.." || exit 1
BIN_ABS=$(cd "$BIN" && pwd) || exit 1
DOC=docs/operations.md

# Every block marked for this test, in order, without its fences.
awk '/^<!-- it_deploy_guide -->$/ { want = 1; next }
     want && /^```sh$/ { inblk = 1; want = 0; next }
     inblk && /^```$/ { inblk = 0; next }
     inblk { print }
     { want = 0 }' "$DOC" >"$T/recipe.sh"
check "$DOC has a marked recipe that starts a controller and nodes" \
  'grep -q "^bqos-controller " "$T/recipe.sh" && grep -q "^  bqos-node " "$T/recipe.sh"'
for v in BQOS_DIR BQOS_STATE BQOS_PORT BQOS_ADMIN_PORT BQOS_NODE_PORT BQOS_MC; do
  check "the recipe takes $v from the environment" 'grep -q "^$v=\${$v:-" "$T/recipe.sh"'
done

# Free ports: memcached, the controller's two, and three in a row for the nodes.
next_port; MC=$PORT; next_port; CP=$PORT; next_port; AP=$PORT
while :; do
  next_port; NP=$PORT
  ss -Hant "sport = :$((NP + 1))" | grep -q . || ss -Hant "sport = :$((NP + 2))" | grep -q . || break
done
start_memcached "$MC" "$T/memcached.log" || { echo "memcached did not start"; exit 1; }

S=$T/state
env PATH="$BIN_ABS:$PATH" BQOS_DIR="$T/etc" BQOS_STATE="$S" BQOS_PORT="$CP" \
  BQOS_ADMIN_PORT="$AP" BQOS_NODE_PORT="$NP" BQOS_MC="127.0.0.1:$MC" \
  sh -e "$T/recipe.sh" >"$T/recipe.log" 2>&1 </dev/null; rc=$?
PIDS=$(cat "$S"/*.pid 2>/dev/null | tr '\n' ' ')
LIB_PIDS="$LIB_PIDS $PIDS" # stopped on any exit
check "the recipe runs to its end (rc $rc)" '[ $rc -eq 0 ]'
check "its --check lines pass: the controller's and three nodes'" \
  '[ "$(grep -c "configuration OK" "$T/recipe.log")" -eq 4 ]'
check "it records four PIDs, all running" \
  '[ "$(echo $PIDS | wc -w)" -eq 4 ] && for p in $PIDS; do kill -0 "$p" || exit 1; done'
check "the controller listens on every address, with keys" \
  'ss -Hltn "sport = :$CP" | grep -q "0.0.0.0:$CP" && grep -q "CURVE on both endpoints" "$S/controller.log"'

ctl() {
  "$BIN/bqos-ctl" --endpoint "tcp://127.0.0.1:$AP" --curve-key "$T/etc/keys/ops.key" \
    --controller-key "$T/etc/keys/controller.pub" "$@"
}
ups() {
  ctl --json status 2>/dev/null | python3 -c '
import json, sys
print(sum(1 for n in json.load(sys.stdin)["nodes"] if n["state"] == "up"))'
}
check "the three nodes are up in the controller's status" 'wait_for "[ \"\$(ups)\" = 3 ]" 10'
check "the recipe's own status line shows each node up, through the admin key" \
  '[ "$(grep -cE "^n[123] +up " "$T/recipe.log")" -eq 3 ]'

# A closed loop of gets on red (limit 400/s) and blue (no limit) through the three nodes, four
# connections each per node: completions per second over 4 s after a 1.5 s warm-up.
cat >"$T/load.py" <<'PY'
import socket, sys, threading, time
ports = [int(p) for p in sys.argv[1:4]]
warm, span = 1.5, 4.0
count = {"red": 0, "blue": 0}
lock = threading.Lock()
t0 = time.monotonic()
stop = t0 + warm + span

def loop(bucket, port, k):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    req = ("get %s:k%d\r\n" % (bucket, k)).encode()
    while time.monotonic() < stop:
        s.sendall(req)
        buf = b""
        while not buf.endswith(b"END\r\n"):
            d = s.recv(4096)
            if not d:
                raise SystemExit("closed")
            buf += d
        now = time.monotonic()
        if t0 + warm <= now < stop:
            with lock:
                count[bucket] += 1

th = [threading.Thread(target=loop, args=(b, p, i), daemon=True)
      for b in count for p in ports for i in range(4)]
for t in th:
    t.start()
for t in th:
    t.join(stop - time.monotonic() + 12)
print("red %.0f blue %.0f" % (count["red"] / span, count["blue"] / span))
PY
python3 "$T/load.py" "$NP" "$((NP + 1))" "$((NP + 2))" >"$T/load.out" 2>"$T/load.err"
red=$(awk '{print $2}' "$T/load.out"); blue=$(awk '{print $4}' "$T/load.out")
echo "# red ${red:-?}/s (limit 400), blue ${blue:-?}/s (no limit)"
check "red, limited to 400/s across the three nodes, stays within it (${red:-?}/s)" \
  '[ -n "$red" ] && [ "$red" -le 440 ]'
check "red gets at least its reservation, 200/s (${red:-?}/s)" '[ -n "$red" ] && [ "$red" -ge 200 ]'
check "blue, unlimited, goes beyond red's limit: the limit is what holds red (${blue:-?}/s)" \
  '[ -n "$blue" ] && [ "$blue" -gt 600 ]'

# Stopped by the PIDs the recipe wrote, as the doc says.
# shellcheck disable=SC2086
stop_pid $PIDS
check "every daemon the recipe started is gone" 'for p in $PIDS; do ! kill -0 "$p" 2>/dev/null || exit 1; done'

it_end 'cat "$T/recipe.log"; tail -5 "$S"/*.log; cat "$T/load.err"'
