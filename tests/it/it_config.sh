#!/bin/sh
# it_config.sh - config vs state against a real bqos-controller: a hand edit not reloaded is never overwritten by bqos-ctl set (refused, edit kept; works after reload), saves keep the operator's formatting, set --limit alone keeps the other fields, --json buckets loads back; --check on good and bad files (exit codes, positions) for the controller and the node; a daemon started from a settings file, the command line overriding it; a nested table with --shards refused at start.
. "$(dirname "$0")/../../scripts/lib.sh"
it_begin it_config
CTL=$BIN/bqos-ctl

# The operator's own layout: member order, spacing, one bucket per line.
cat >"$T/b.json" <<'JSON'
{
  "buckets": [
    {"name":"red",  "reservation":300, "limit":600},
    {"name":"blue", "reservation":100, "weight":2}
  ]
}
JSON
next_port; cp=$PORT; next_port; ap=$PORT
ADMIN_EP="tcp://127.0.0.1:$ap"
# A settings file; --intervals on the command line overrides the file's.
cat >"$T/controller.conf" <<EOF
# bqos-controller settings
buckets = $T/b.json
listen = tcp://127.0.0.1:$cp
admin  = $ADMIN_EP     # bqos-ctl talks here
period = 500ms
intervals = 5
capacity = 100000
EOF
spawn "$T/controller.log" "$BIN/bqos-controller" --settings "$T/controller.conf" --intervals 4
CTRL_PID=$SPAWNED
wait_port "$ap" 10 || { echo "controller did not start"; cat "$T/controller.log"; exit 1; }
ctl() { "$CTL" --endpoint "$ADMIN_EP" --timeout 3000 "$@"; }

ctl --json status >"$T/out" 2>&1
check "the settings file is used (period 500 ms)" 'tr -d " \n" <"$T/out" | grep -q "\"period_ms\":500"'
check "the command line overrides it (--intervals 4)" 'tr -d " \n" <"$T/out" | grep -q "\"intervals\":4"'

# set --limit alone keeps the reservation and the weight.
ctl set blue --limit 500 >"$T/out" 2>&1; rc=$?
check "set blue --limit 500 (rc $rc)" '[ $rc -eq 0 ] && grep -q "bucket blue changed" "$T/out"'
ctl --json buckets >"$T/out"
check "set --limit alone keeps reservation and weight" \
  'tr -d " \n" <"$T/out" | grep -q "\"name\":\"blue\",\"reservation\":100,\"limit\":500,\"weight\":2"'
ctl set blue --weight 3 >/dev/null 2>&1
ctl --json buckets >"$T/out"
check "set --weight alone keeps reservation and limit" \
  'tr -d " \n" <"$T/out" | grep -q "\"name\":\"blue\",\"reservation\":100,\"limit\":500,\"weight\":3"'
ctl set newone --limit 5 >"$T/out" 2>&1; rc=$?
check "a new bucket without --reservation is refused (rc $rc)" '[ $rc -eq 1 ] && grep -q "reservation" "$T/out"'
check "the save kept the operator's formatting around the changed bucket" \
  'grep -qF "    {\"name\":\"red\",  \"reservation\":300, \"limit\":600}," "$T/b.json" &&
   [ "$(head -2 "$T/b.json" | tr -d "\n")" = "{  \"buckets\": [" ]'

# --json buckets output is a bucket file (limit null included).
ctl set red --limit none >/dev/null 2>&1
ctl --json buckets >"$T/export.json"
check "--json buckets has a null limit" 'tr -d " \n" <"$T/export.json" | grep -q "\"limit\":null"'
"$BIN/bqos-controller" --check --buckets "$T/export.json" >"$T/out" 2>&1; rc=$?
check "--json buckets output loads back (--check exit 0, rc $rc)" '[ $rc -eq 0 ] && grep -q "configuration OK" "$T/out"'

# A hand edit not reloaded: set is refused, the edit stays.
cat >"$T/b.json" <<'JSON'
{"buckets": [
  {"name": "red", "reservation": 300},
  {"name": "hand", "reservation": 7}
]}
JSON
cp "$T/b.json" "$T/edit.json"
ctl set blue --reservation 150 >"$T/out" 2>"$T/err"; rc=$?
check "set after an unreloaded hand edit is refused (rc $rc)" '[ $rc -eq 1 ]'
check "the refusal names the file and says to reload" \
  'grep -q "file_changed" "$T/err" && grep -qF "$T/b.json" "$T/err" && grep -q "reload" "$T/err"'
check "the hand edit is kept" 'cmp -s "$T/b.json" "$T/edit.json"'
ctl remove red >/dev/null 2>"$T/err"; rc=$?
check "remove is refused too (rc $rc)" '[ $rc -eq 1 ] && cmp -s "$T/b.json" "$T/edit.json"'
ctl reload >"$T/out" 2>&1; rc=$?
check "reload loads the edit (rc $rc)" '[ $rc -eq 0 ] && grep -q "reloaded: 2 buckets" "$T/out"'
ctl set hand --reservation 8 >"$T/out" 2>&1; rc=$?
check "after reload, set works (rc $rc)" '[ $rc -eq 0 ]'
check "and keeps the edit's layout" \
  'grep -qF "  {\"name\": \"red\", \"reservation\": 300}," "$T/b.json" && cat "$T/b.json" "$T/b.json.journal" | grep -q "\"hand\", \"reservation\": 8"'

# --check: a good and a bad bucket file, and a bad settings file.
"$BIN/bqos-controller" --check --buckets "$T/b.json" >"$T/out" 2>&1; rc=$?
check "--check on the good file: exit 0 (rc $rc)" '[ $rc -eq 0 ]'
cat >"$T/bad.json" <<'JSON'
{"buckets": [
  {"name": "a", "reservation": 50, "limit": 10},
  {"name": "b", "reservation": 1, "limt": 5}
]}
JSON
"$BIN/bqos-controller" --check --buckets "$T/bad.json" >"$T/out" 2>&1; rc=$?
check "--check on a bad file: exit 1 (rc $rc)" '[ $rc -eq 1 ]'
check "--check prints every problem with its position" \
  'grep -qF "$T/bad.json:2:45: buckets[0].limit: limit 10 is below the reservation 50" "$T/out" &&
   grep -qF "$T/bad.json:3:43: buckets[1].limt: unknown member" "$T/out"'
printf 'buckets = %s\nperiod = 5 minutes\n' "$T/b.json" >"$T/bad.conf"
"$BIN/bqos-controller" --check --settings "$T/bad.conf" >"$T/out" 2>&1; rc=$?
check "--check on a bad settings file: exit 1 with its position (rc $rc)" \
  '[ $rc -eq 1 ] && grep -qF "$T/bad.conf:2:10: bad value" "$T/out"'
"$BIN/bqos-node" --check --config "$T/bad.json" >"$T/out" 2>&1; rc=$?
check "bqos-node --check refuses what the controller refuses (rc $rc)" \
  '[ $rc -eq 1 ] && grep -qF "$T/bad.json:2:45:" "$T/out" && grep -qF "$T/bad.json:3:43:" "$T/out"'
printf 'config = %s\nmemcached-listen = 127.0.0.1:0\n' "$T/b.json" >"$T/node.conf"
"$BIN/bqos-node" --check --settings "$T/node.conf" >"$T/out" 2>&1; rc=$?
check "bqos-node --check on good settings: exit 0 (rc $rc)" '[ $rc -eq 0 ]'

# A nested table with --shards is refused at start: exit 1 with the reason (it freed the table
# twice on this path and died of it, signal 11, until conf.c owned the table).
printf '{"buckets":[{"name":"t","reservation":10,"limit":100},{"name":"a","reservation":5,"parent":"t"}]}\n' \
  >"$T/nested.json"
next_port; np=$PORT; next_port; nap=$PORT
timeout 10 "$BIN/bqos-controller" --buckets "$T/nested.json" --shards 2 --shard 0 \
  --listen "tcp://127.0.0.1:$np" --admin "tcp://127.0.0.1:$nap" >"$T/out" 2>&1; rc=$?
check "a nested table with --shards: refused, exit 1, no crash (rc $rc)" \
  '[ $rc -eq 1 ] && grep -qF "not supported with --shards" "$T/out"'

stop_controller
it_end 'cat "$T/controller.log"'
