#!/bin/sh
# it_hostile_ctrl.sh - the controller against lying peers (issue 18): one report or hello carrying an absurd period cannot brick it (defect 3), and a registered liar cannot hold the clock against the nodes that agree; a node whose routing id another process took is heard again (defect 4); caps on names, nodes, message sizes (node and admin endpoints) and warnings keep its memory and log bounded (defect 10); a node reporting absurd counts is not believed (defect 5).
#
# Raw protocol nodes (tests/it/ha_observer.py, a pyzmq DEALER each) claim
# the clock they are told to and log "TIME TYPE EPOCH PERIOD" for every
# message they get; the controller's status shows its period.
# tests/it/rogue_flood.py tries to grow the controller (defect 10) and
# reports implausible counts (defect 5).
. "$(dirname "$0")/../../scripts/lib.sh"
it_begin it_hostile_ctrl
HERE=$(cd "$(dirname "$0")" && pwd)
PY=python3
$PY -c "import zmq" 2>/dev/null || PY=/usr/bin/python3
$PY -c "import zmq" 2>/dev/null || { echo "no pyzmq (scripts/deps.sh installs python3-zmq)"; exit 1; }
echo '{"buckets":[{"name":"red","reservation":10}]}' >"$T/b.json"
ORIGIN=$(date +%s.%N)
ctl() { "$BIN/bqos-ctl" --endpoint "$ADMIN_EP" --timeout 3000 "$@"; }
rogue() { spawn "$T/$1.err" "$PY" "$HERE/ha_observer.py" "$CTRL_EP" "$1" "$T/$1.log" 30 "$2" "$ORIGIN"; }
period() { ctl --json status >"$T/st.json" 2>/dev/null && jget "$T/st.json" 'd["period"]'; }

# 1. Defect 3: a lone node claiming period 2^53 right after the start.
# (4 s periods: the controller adopts a clock only within 2 periods of its
# start, and a loaded host may take seconds to start the Python peers)
start_controller "$T/b.json" 1000 "$T" --period 4s || { echo "controller did not start"; cat "$T/controller.log"; exit 1; }
rogue liar 9007199254740992
R1=$SPAWNED
check "the liar is welcomed (the controller can still encode)" \
  'wait_for "grep -qs \" welcome \" \"$T/liar.log\"" 30'
p=$(period)
check "the controller kept a plausible period ($p)" '[ -n "$p" ] && [ "$p" -lt 1000 ]'
check "the liar gets tokens or heartbeats after its welcome" \
  'wait_for "grep -Eqs \" (tokens|heartbeat) \" \"$T/liar.log\"" 20'
stop_pid "$R1"
stop_controller

# 2. A registered liar claims period 10^9 first; two nodes that agree on
#    period 500 register after it: the majority's clock wins.
start_controller "$T/b.json" 1000 "$T" --period 4s || { echo "controller did not start"; exit 1; }
rogue n3 1000000000
P3=$SPAWNED
wait_for 'grep -qs " welcome " "$T/n3.log"' 30
rogue n1 500
P1=$SPAWNED
wait_for 'grep -qs " welcome " "$T/n1.log"' 30
rogue n2 500
P2=$SPAWNED
check "the honest nodes are welcomed" 'wait_for "grep -qs \" welcome \" \"$T/n2.log\"" 30'
sleep 0.5
p=$(period)
check "the clock is the majority's (period $p, not 10^9)" '[ -n "$p" ] && [ "$p" -ge 500 ] && [ "$p" -lt 600 ]'
check "the liar hears the majority's clock" 'wait_for "grep -Eqs \" (tokens|heartbeat) [0-9]+ 5[0-9][0-9]$\" \"$T/n3.log\"" 20'
stop_pid "$P1" "$P2" "$P3"
stop_controller

# 3. Defect 4: another process connects under a live node's exact routing
#    id (ZMQ_ROUTER_HANDOVER gives it the pipe) and then says nothing.  The
#    node, no longer heard, falls back, connects anew and is heard again,
#    while the impostor is still connected.
start_controller "$T/b.json" 1000 "$T" || { echo "controller did not start"; exit 1; }
spawn "$T/s1.log" "$BIN/bqos-nbd-node" --name s1 --nbd-listen 127.0.0.1:0 \
  --backend "file:$T/store/" --export-size 1m --buckets red --controller "$CTRL_EP" --capacity 1000
S1=$SPAWNED
check "s1 follows the controller" 'wait_for "grep -q \"resuming policy tokens\" \"$T/s1.log\"" 10'
inst=$(sed -n 's/.*(process \([0-9a-f]*\)).*/\1/p' "$T/s1.log" | head -n 1)
spawn "$T/imp.log" "$PY" "$HERE/impostor.py" "$CTRL_EP" s1 "$inst" 12
IMP=$SPAWNED
check "s1 notices it is not heard and connects anew" \
  'wait_for "grep -q \"connecting anew\" \"$T/s1.log\"" 10'
check "s1 is heard again while the impostor is connected" \
  'wait_for "grep -q \"is back after\" \"$T/s1.log\"" 10'
check "the impostor is still connected" 'kill -0 $IMP'
stop_pid "$IMP" "$S1"
stop_controller

# 4. Defect 10: the controller's memory stays bounded.  With --max-names
#    1000 and one bucket, an (older node's) whole table of 1002 names is
#    refused with a clear error (a table in parts is held up to the bound,
#    test_ctrl_node_table_parts); frames beyond the largest legal message
#    ((2 x 1 + 1000) x 251 bytes) drop the
#    connection unread; beyond --max-nodes hellos are refused; a flood of
#    bad messages logs a few lines, not one each.
start_controller "$T/b.json" 1000 "$T" --max-names 1000 --max-nodes 50 || { echo "controller did not start"; exit 1; }
rss() { awk '/^VmHWM/ {print $2}' "/proc/$CTRL_PID/status"; } # peak RSS
flood() { "$PY" "$HERE/rogue_flood.py" "$CTRL_EP" "$1" "$2" "$T/flood-$1.out" 2>>"$T/flood.err"; }
RSS0=$(rss)
flood names 1002
check "a whole table of 1002 names is refused: $(cat "$T/flood-names.out")" \
  'grep -q "^error too_many_names .*at most the 1 buckets plus 1000" "$T/flood-names.out"'
flood names 1001
check "a hello with 1001 names (the 1 bucket plus 1000) is welcomed" 'grep -q "^welcome " "$T/flood-names.out"'
flood big 50000000
RSS1=$(rss)
check "three 50 MB frames leave the controller's peak RSS within 20 MB (${RSS0} -> ${RSS1} kB)" \
  '[ $((RSS1 - RSS0)) -lt 20000 ]'
check "the controller still answers" 'ctl --json status >/dev/null'
flood nodes 60
check "beyond --max-nodes hellos are refused: $(cat "$T/flood-nodes.out")" \
  'grep -q "too_many_nodes=11 welcome=49" "$T/flood-nodes.out"'
n0=$(grep -c "bad message from" "$T/controller.log")
flood bad 5000
n1=$(grep -c "bad message from" "$T/controller.log")
check "5000 bad messages log $((n1 - n0)) lines (at most 20)" '[ $((n1 - n0)) -le 20 ]'
# An admin request beyond ADMIN_REQUEST_MAX (64 KiB) drops its connection
# unread; the endpoint keeps answering.
big=$("$PY" - "$ADMIN_EP" <<'PYEOF'
import sys, zmq
s = zmq.Context().socket(zmq.REQ)
s.setsockopt(zmq.LINGER, 0)
s.connect(sys.argv[1])
s.send(b'{"v":1,"cmd":"status","pad":"' + b"x" * 20000000 + b'"}')
print("answered" if s.poll(2000) else "dropped")
PYEOF
)
check "a 20 MB admin request is dropped unread ($big), the endpoint still answers" \
  '[ "$big" = dropped ] && ctl --json status >/dev/null'
stop_controller

# 5. Defect 5: a raw node that reports red served 10^12 and queued 10^12
#    (capacity 1000) is not believed: clamped to 4 x 1000 x 1 s served,
#    counted in the status.
start_controller "$T/b.json" 1000 "$T" || { echo "controller did not start"; exit 1; }
flood liar 3
ctl --json status >"$T/st.json"
check "the liar sent reports ($(cat "$T/flood-liar.out"))" '[ "$(cat "$T/flood-liar.out")" -gt 0 ]'
check "its served and demand are counted implausible: $(jget "$T/st.json" 'd["stats"]["implausible"]')" \
  '[ "$(jget "$T/st.json" "d[\"stats\"][\"implausible\"][\"served_beyond_rate\"]")" -gt 0 ] &&
   [ "$(jget "$T/st.json" "d[\"stats\"][\"implausible\"][\"demand\"]")" -gt 0 ]'
check "red's served is believed only up to 4000" \
  '[ "$(jget "$T/st.json" "[b for b in d[\"buckets\"] if b[\"name\"]==\"red\"][0][\"served\"]")" -le 4000 ]'
check "the implausible report is logged" 'grep -q "implausible report" "$T/controller.log"'
stop_controller

it_end 'for f in controller liar n1 n2 n3 s1 imp flood; do echo "== $f"; tail -n 15 "$T/$f.log" 2>/dev/null; done'
