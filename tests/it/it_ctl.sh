#!/bin/sh
# it_ctl.sh - bqos-ctl against a real bqos-controller on free loopback ports: status, buckets, set/remove with persistence, reload, refusals, --json, and a stopped controller.
. "$(dirname "$0")/../../scripts/lib.sh"
it_begin it_ctl
CTL=$BIN/bqos-ctl

cat >"$T/b.json" <<'JSON'
{"buckets":[{"name":"red","reservation":300,"limit":600},{"name":"blue","reservation":100}]}
JSON
start_controller "$T/b.json" 100000 "$T" || { echo "controller did not start"; cat "$T/controller.log"; exit 1; }
ctl() { "$CTL" --endpoint "$ADMIN_EP" --timeout 3000 "$@"; }

ctl status >"$T/out" 2>"$T/err"; rc=$?
check "status exits 0 (rc $rc)" '[ $rc -eq 0 ]'
check "status shows the period line" 'grep -q "^period [0-9]*  interval [0-4]/5" "$T/out"'
check "status lists red with its limit" 'grep -Eq "^red +300 +600 " "$T/out"'
check "status lists blue without limit" 'grep -Eq "^blue +100 +none " "$T/out"'
check "status says default is unlimited (no default bucket)" \
  'grep -q "^default: unlimited (no .default. bucket in the file)" "$T/out"'

ctl buckets >"$T/out"
check "buckets lists two buckets" '[ "$(grep -Ec "^(red|blue) " "$T/out")" -eq 2 ]'

ctl set green --reservation 50 --limit 80 --weight 2 >"$T/out" 2>&1; rc=$?
check "set creates green (rc $rc)" '[ $rc -eq 0 ] && grep -q "bucket green created" "$T/out"'
check "green persisted to the bucket file" 'grep -q "\"green\"" "$T/b.json"'
ctl set green --reservation 60 --limit 90 >"$T/out" 2>&1
check "set changes green" 'grep -q "bucket green changed" "$T/out"'
ctl --json buckets >"$T/out"
check "--json buckets shows the change" 'tr -d " \n" <"$T/out" | grep -q "\"name\":\"green\",\"reservation\":60,\"limit\":90,\"weight\":2"'
ctl set green --reservation 70 >"$T/out" 2>&1
ctl --json buckets >"$T/out"
check "set without --limit keeps the limit" 'tr -d " \n" <"$T/out" | grep -q "\"name\":\"green\",\"reservation\":70,\"limit\":90,"'
ctl set green --reservation 70 --limit none >"$T/out" 2>&1
ctl --json buckets >"$T/out"
check "--limit none removes it" 'tr -d " \n" <"$T/out" | grep -q "\"name\":\"green\",\"reservation\":70,\"limit\":null"'

ctl remove ghost >"$T/out" 2>"$T/err"; rc=$?
check "remove of an unknown bucket is refused with exit 1 (rc $rc)" '[ $rc -eq 1 ] && grep -q "not_found" "$T/err"'
ctl remove green >"$T/out" 2>&1; rc=$?
check "remove green (rc $rc)" '[ $rc -eq 0 ] && ! grep -q "\"green\"" "$T/b.json"'

# The file changes behind the controller's back; reload picks it up.
cat >"$T/b.json" <<'JSON'
{"buckets":[{"name":"red","reservation":300},{"name":"blue","reservation":100},{"name":"pink","reservation":1}]}
JSON
ctl reload >"$T/out" 2>&1; rc=$?
check "reload (rc $rc)" '[ $rc -eq 0 ] && grep -q "reloaded: 3 buckets" "$T/out"'
ctl buckets >"$T/out"
check "reloaded bucket pink is listed" 'grep -Eq "^pink +1 " "$T/out"'

# A bad file is refused and the old configuration stays.
echo '{"buckets":[{"name":"red","reservation":-1}]}' >"$T/b.json"
ctl reload >"$T/out" 2>"$T/err"; rc=$?
check "reload of a bad file is refused (rc $rc)" '[ $rc -eq 1 ]'
ctl buckets >"$T/out"
check "old buckets stay after a refused reload" 'grep -Eq "^pink " "$T/out"'

stop_controller
start=$(date +%s)
ctl --timeout 500 status >"$T/out" 2>"$T/err"; rc=$?
secs=$(( $(date +%s) - start ))
check "stopped controller: exit 3 (rc $rc)" '[ $rc -eq 3 ]'
check "stopped controller: no hang (${secs}s)" '[ $secs -le 10 ]'
check "stopped controller: says unreachable" 'grep -q "unreachable" "$T/err"'

it_end 'cat "$T/controller.log"'
