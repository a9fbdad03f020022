#!/bin/sh
# it_journal.sh - the bucket file's journal against a real bqos-controller without etcd: set/remove are acknowledged once in FILE.journal (the file untouched), survive kill -9 and come back at the restart; a torn last line (a crash mid-append) is dropped with a warning and the next change stands on its own line; garbage inside the journal stops the start with its line and column, and --check says the same; a hand edit of the file wins over an older journal, which is set aside.
. "$(dirname "$0")/../../scripts/lib.sh"
it_begin it_journal
CTL=$BIN/bqos-ctl

cat >"$T/b.json" <<'JSON'
{"buckets": [
  {"name": "red", "reservation": 300, "limit": 600},
  {"name": "blue", "reservation": 100}
]}
JSON
cp "$T/b.json" "$T/orig.json"
next_port; cp=$PORT; next_port; ap=$PORT
ctl() { "$CTL" --endpoint "tcp://127.0.0.1:$ap" --timeout 3000 "$@"; }
# start: the controller on b.json; exits the test (its log shown) if it
# did not start.
start() {
  spawn "$T/controller.log" "$BIN/bqos-controller" --buckets "$T/b.json" \
    --listen "tcp://127.0.0.1:$cp" --admin "tcp://127.0.0.1:$ap" --period 500ms --capacity 100000
  CTRL_PID=$SPAWNED
  wait_port "$ap" 10 || { cat "$T/controller.log"; exit 1; }
}
# names: the bucket names in force, sorted, one line.
names() { ctl --json buckets | python3 -c 'import json,sys; print(" ".join(sorted(b["name"] for b in json.load(sys.stdin)["buckets"])))'; }

start
ctl set green --reservation 50 --limit 80 >/dev/null 2>&1; r1=$?
ctl remove red >/dev/null 2>&1; r2=$?
ctl set blue --limit 900 >/dev/null 2>&1; r3=$?
check "set, remove, set acknowledged (rc $r1 $r2 $r3)" '[ $r1 -eq 0 ] && [ $r2 -eq 0 ] && [ $r3 -eq 0 ]'
check "the bucket file is untouched" 'cmp -s "$T/b.json" "$T/orig.json"'
check "the journal holds the three changes after its base line" \
  '[ "$(grep -c "^{\"set\"\|^{\"remove\"" "$T/b.json.journal")" -eq 3 ] && head -1 "$T/b.json.journal" | grep -q "^{\"base\""'
ctl --json status >"$T/st.json"
check "status counts the changes in place, no full rebuild but the load's" \
  'python3 -c "import json,sys; s=json.load(open(sys.argv[1]))[\"stats\"]; sys.exit(not (s[\"full_rebuilds\"] == 1 and s[\"bucket_changes\"] == 3 and s[\"journal\"][\"appends\"] == 3))" "$T/st.json"'
kill -9 "$CTRL_PID"; wait "$CTRL_PID" 2>/dev/null
start
check "after kill -9 and a restart the changes are in force" '[ "$(names)" = "blue green" ]'
check "blue's new limit too" 'ctl --json buckets | tr -d " \n" | grep -q "\"name\":\"blue\",\"reservation\":100,\"limit\":900"'
stop_pid "$CTRL_PID"

# A torn last line: dropped with a warning; the next change is whole.
printf '{"set": {"name": "torn", "reserv' >>"$T/b.json.journal"
start
check "a torn last line: the controller starts, without it" '[ "$(names)" = "blue green" ]'
check "and says so" 'grep -q "last line is incomplete" "$T/controller.log"'
ctl set after --reservation 1 >/dev/null 2>&1; rc=$?
check "the next change is acknowledged (rc $rc)" '[ $rc -eq 0 ]'
stop_pid "$CTRL_PID"
start
check "and loads on its own line" '[ "$(names)" = "after blue green" ]'
stop_pid "$CTRL_PID"

# Garbage inside the journal: no start, the line and column said.
cp "$T/b.json.journal" "$T/journal.good"
{ head -2 "$T/journal.good"; echo '{"set": {"name": "x", "reservation": 1, "limt": 2}}'; tail -n +3 "$T/journal.good"; } >"$T/b.json.journal"
"$BIN/bqos-controller" --buckets "$T/b.json" --listen "tcp://127.0.0.1:$cp" \
  --admin "tcp://127.0.0.1:$ap" >"$T/bad.log" 2>&1 & bad=$!
n=50; while kill -0 $bad 2>/dev/null && [ $n -gt 0 ]; do sleep 0.1; n=$((n - 1)); done
kill -0 $bad 2>/dev/null && { kill $bad; not_ok "garbage in the journal stops the start"; } || ok "garbage in the journal stops the start"
check "the error names the journal, line 3, the member" 'grep -q "b.json.journal:3:1: set.limt: unknown member" "$T/bad.log"'
"$BIN/bqos-controller" --check --buckets "$T/b.json" >"$T/out" 2>&1; rc=$?
check "--check says the same (exit $rc)" '[ $rc -eq 1 ] && grep -q "b.json.journal:3:1: set.limt" "$T/out"'
cp "$T/journal.good" "$T/b.json.journal"

# A hand edit of the file with the controller stopped: the file wins, the
# journal (of the old file) is set aside at the next change.
cat >"$T/b.json" <<'JSON'
{"buckets": [{"name": "hand", "reservation": 7}]}
JSON
start
check "a hand-edited file loads without the older journal" '[ "$(names)" = "hand" ]'
check "and says so" 'grep -q "extend another version" "$T/controller.log"'
ctl set more --reservation 2 >/dev/null 2>&1; rc=$?
check "a change after it (rc $rc) sets the old journal aside" '[ $rc -eq 0 ] && [ -s "$T/b.json.journal.ignored" ]'
stop_pid "$CTRL_PID"
start
check "and the new journal loads over the edited file" '[ "$(names)" = "hand more" ]'
stop_pid "$CTRL_PID"
it_end 'cat "$T/controller.log"'
