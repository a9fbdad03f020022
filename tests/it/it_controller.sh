#!/bin/sh
# it_controller.sh - bqos-controller on free loopback ports with simulated nodes (bqos-ctrl-bench): tokens flow, admission, node down/back, controller restart mid-period.
. "$(dirname "$0")/../../scripts/lib.sh"
it_begin it_controller

NODES=8; NB=200
"$BIN/bqos-ctrl-bench" --nodes $NODES --buckets $NB --reserved 0.5 --write-buckets "$T/b.json" ||
  { echo "cannot write the bucket file"; exit 1; }
next_port; CP=$PORT; next_port; AP=$PORT
CTRL_EP="tcp://127.0.0.1:$CP"; ADMIN_EP="tcp://127.0.0.1:$AP"
ctl_start() {
  spawn "$T/controller$1.log" "$BIN/bqos-controller" --buckets "$T/b.json" --listen "$CTRL_EP" \
    --admin "$ADMIN_EP" --period 1s --intervals 5 --capacity 20000 --down-after 2 \
    --admission enforce --log-level debug
  CTRL_PID=$SPAWNED
  wait_port "$CP" 10
}
bench() { "$BIN/bqos-ctrl-bench" --endpoint "$CTRL_EP" --admin "$ADMIN_EP" --nodes $NODES \
  --buckets $NB --active 3 --quiet "$@"; }
ctl() { "$BIN/bqos-ctl" --endpoint "$ADMIN_EP" --timeout 3000 "$@"; }

ctl_start 1 || { echo "controller did not start"; cat "$T/controller1.log"; exit 1; }

# 1. Tokens flow to every node; nothing is rejected either way.
bench --seconds 2 --warmup 0.5 >"$T/run1.json"; rc=$?
check "all $NODES simulated nodes welcomed (rc $rc)" '[ $rc -eq 0 ]'
check "tokens pushed to the nodes" '[ "$(jget "$T/run1.json" "d[\"tokens_msgs\"]")" -ge $NODES ]'
check "token records carried" '[ "$(jget "$T/run1.json" "d[\"token_records\"]")" -gt 0 ]'
check "no bad messages at the nodes" '[ "$(jget "$T/run1.json" "d[\"bad_messages\"]")" = 0 ]'
check "no message rejected by the controller" \
  '[ "$(jget "$T/run1.json" "d[\"stats\"][\"messages_rejected\"]")" = 0 ]'
check "the controller computed rounds" \
  '[ "$(jget "$T/run1.json" "d[\"stats\"][\"computed\"]")" -ge 5 ]'
check "time split reported" \
  '[ -n "$(jget "$T/run1.json" "d[\"timing\"][\"mean_ms\"][\"pshift\"]")" ]'
check "rounds logged with their time split" 'grep -q "ms receive .* pshift .* send" "$T/controller1.log"'
check "the welcome allows sparse reports and the nodes send them" \
  '[ "$(jget "$T/run1.json" "d[\"per_round\"][\"sparse_reports\"]")" -gt 0 ]'

# 2. Silent nodes are marked down (down-after 2 intervals = 0.4 s).
# nodes_in STATE: how many nodes the controller lists in STATE (in $T/st.json).
nodes_in() {
  ctl --json status >"$T/st.json" &&
    jget "$T/st.json" "sum(1 for n in d[\"nodes\"] if n[\"state\"] == \"$1\")"
}
wait_for '[ "$(nodes_in down)" = $NODES ]' 5
check "silent nodes are down" '[ "$(nodes_in down)" = $NODES ]'
check "down logged" 'grep -q "silent for 2 intervals: down" "$T/controller1.log"'

# 3. Admission: with nodes up, a reservation beyond the cluster is refused
#    and the file is untouched; a modest one is accepted and persisted.
bench --seconds 3 >"$T/run2.json" &
BP=$!
wait_for '[ "$(nodes_in up)" = $NODES ]' 5
cp "$T/b.json" "$T/b.before"
ctl set huge --reservation 100000000 >"$T/out" 2>"$T/err"; rc=$?
check "admission refuses a huge reservation (rc $rc)" '[ $rc -ne 0 ] && grep -q "admission" "$T/err"'
check "refused change not persisted" 'cmp -s "$T/b.json" "$T/b.before" && ! grep -qs "\"huge\"" "$T/b.json.journal"'
ctl set small --reservation 10 --limit 20 >"$T/out" 2>&1; rc=$?
check "a small bucket is admitted (rc $rc)" '[ $rc -eq 0 ] && cat "$T/b.json" "$T/b.json.journal" | grep -q "\"small\""'
ctl --json status >"$T/st2.json"
check "nodes are back up" \
  '[ "$(jget "$T/st2.json" "sum(1 for n in d[\"nodes\"] if n[\"state\"] == \"up\")")" = $NODES ]'
# (a period's first interval shows 0 served: the nodes' counters restart)
served_now() { ctl --json status >"$T/st3.json" && jget "$T/st3.json" 'sum(b["served"] for b in d["buckets"])'; }
wait_for '[ "$(served_now)" -gt 0 ]' 2
check "buckets have served counts" \
  '[ "$(jget "$T/st3.json" "sum(b[\"served\"] for b in d[\"buckets\"])")" -gt 0 ]'
wait $BP
check "back-up logged" 'grep -q "is back" "$T/controller1.log"'

# 4. Controller restart mid-period: the nodes re-register, the new controller
#    adopts their period numbering and tokens flow again.
bench --seconds 4 >"$T/run3.json" &
BP=$!
wait_for '[ "$(nodes_in up)" = $NODES ]' 5 # registered: they hold the period numbering
stop_pid "$CTRL_PID"
wait_for '! ss -Hltn "sport = :$CP" | grep -q .' 5 # the port is free again
ctl_start 2 || not_ok "controller restarted"
wait $BP
check "new controller adopted the nodes' clock" 'grep -q "adopted the nodes. clock" "$T/controller2.log"'
check "nodes were told to say hello again" '[ "$(jget "$T/run3.json" "d[\"errors\"]")" -gt 0 ]'
check "all nodes welcomed again" '[ "$(jget "$T/run3.json" "d[\"welcomed\"]")" = $NODES ]'
check "the new controller computed and pushed tokens" \
  '[ "$(jget "$T/run3.json" "d[\"stats\"][\"push_tokens\"]")" -gt 0 ]'
check "the persisted bucket survived the restart" \
  'grep -q "buckets from" "$T/controller2.log" && ctl buckets | grep -q "^small "'

# 5. SIGHUP reloads the file.
cat >"$T/b.json" <<'JSON'
{"buckets":[{"name":"only","reservation":5}]}
JSON
kill -HUP "$CTRL_PID"
wait_for 'ctl buckets 2>/dev/null | grep -q "^only "' 5
ctl buckets >"$T/out"
check "SIGHUP reload" 'grep -q "^only " "$T/out" && [ "$(grep -c "^b0" "$T/out")" = 0 ]'

# 6. A paused controller (SIGSTOP for 3 intervals) says so when it wakes: its
#    late rounds are logged at warn and counted in the status.
ctl --json status >"$T/st3.json"
late0=$(jget "$T/st3.json" "d[\"timing\"][\"late_rounds\"]")
kill -STOP "$CTRL_PID"; sleep 0.6; kill -CONT "$CTRL_PID"
late_now() { ctl --json status >"$T/st3.json" && jget "$T/st3.json" "d[\"timing\"][\"late_rounds\"]"; }
wait_for '[ "$(late_now)" -gt "${late0:-0}" ]' 5
check "late round logged at warn" 'grep -q "warn.*after its boundary (host busy or paused?)" "$T/controller2.log"'
check "late rounds counted in the status" '[ "$(late_now)" -gt "${late0:-0}" ]'

it_end 'tail -30 "$T/controller1.log"'
