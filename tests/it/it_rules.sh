#!/bin/sh
# it_rules.sh - rules that map a request to a bucket (issue 27), end to end: a real memcached behind a bqos-node with --auth-file users alice, bob and carol, the rules in the controller's bucket file pushed to the node; bob writing alice:key is refused by a deny rule (counted by reason in /metrics), bob's writes land in their own bucket (a per-op rule) and his reads in his; carol gets a template bucket; a node restarted without a controller classifies by the rules it kept; a rules change at the controller (SIGHUP) reaches the node: bob's alice:key then lands in bob's write bucket.
set -u
T0=$(date +%s)
stamp() { echo "     [$(( $(date +%s) - T0 )) s] $1"; }
NAME=it_rules
. "$(dirname "$0")/node_lib.sh"

start_mc
printf 'alice:pa\nbob:pb\ncarol:pc\n' >"$tmp/auth"
chmod 600 "$tmp/auth"
BUCKETS='{"name":"alice","reservation":100,"limit":5000},{"name":"bob","reservation":10,"limit":5000},{"name":"bob-w","reservation":0,"limit":5000}'
cat >"$tmp/b.json" <<JSON
{"buckets":[$BUCKETS],
 "rules":[
  {"name":"bob-not-alice","user":"bob","key":"alice","deny":true},
  {"name":"bob-writes","user":"bob","op":"write","bucket":"bob-w"},
  {"name":"alice","user":"alice","bucket":"alice"},
  {"name":"bob","user":"bob","bucket":"bob"},
  {"name":"others","user":"*","template":"u-{user}","reservation":0,"limit":100}
 ]}
JSON
printf '{"buckets":[%s]}\n' "$BUCKETS" >"$tmp/node.json"
start_controller "$tmp/b.json" 100000 "$tmp" || { bad "controller did not start"; cat "$tmp/controller.log"; finish; }
next_port; MPORT=$PORT
start_node "$tmp/node.log" --controller "$CTRL_EP" --auth-file "$tmp/auth" --config "$tmp/node.json" \
  --metrics-listen "127.0.0.1:$MPORT"
wait_for 'grep -q "rules version 1 from the controller: 5 rules" "$tmp/node.log"' 10 &&
  ok "the controller pushed its 5 rules to the node" || { bad "no rules at the node"; tail -5 "$tmp/node.log"; }

# login USER PASS REQUEST: one connection, logged in, the replies to REQUEST.
login() {
  exchange "$NODE_PORT" "set x 0 0 $(( ${#1} + ${#2} + 1 ))\\r\\n$1 $2\\r\\n$3"
}
DENY="CLIENT_ERROR access denied by rule"
got=$(login bob pb 'set alice:k 0 0 1\r\nb\r\nget alice:k\r\n')
[ "$got" = "b'STORED\\r\\n$DENY\\r\\n$DENY\\r\\n'" ] && ok "bob writing and reading alice:k: refused by the deny rule" ||
  bad "bob alice:k: $got"
got=$(login bob pb 'set bob:k 0 0 1\r\nb\r\nget bob:k\r\n')
[ "$got" = "b'STORED\\r\\nSTORED\\r\\nVALUE bob:k 0 1\\r\\nb\\r\\nEND\\r\\n'" ] && ok "bob's own keys served" ||
  bad "bob bob:k: $got"
got=$(login alice pa 'set alice:k 0 0 1\r\na\r\nget alice:k\r\n')
[ "$got" = "b'STORED\\r\\nSTORED\\r\\nVALUE alice:k 0 1\\r\\na\\r\\nEND\\r\\n'" ] && ok "alice's keys served" ||
  bad "alice: $got"
got=$(login carol pc 'set any:k 0 0 1\r\nc\r\n')
[ "$got" = "b'STORED\\r\\nSTORED\\r\\n'" ] && ok "carol served by the template rule" || bad "carol: $got"
# the template's limit (100/s) holds at the node: L tokens per 1 s period, not unlimited
sleep 1.2
lt=$(login carol pc 'stats buckets\r\n' | grep -o 'u-carol:l_tokens [0-9a-z]*' | head -1)
case "$lt" in
  "u-carol:l_tokens "[0-9]*) n=${lt##* }; [ "$n" -le 100 ] && ok "template bucket held to its rule's limit at the node ($lt)" ||
    bad "template L tokens $lt";;
  *) bad "template bucket not limited ($lt)";;
esac
curl -s "http://127.0.0.1:$MPORT/metrics" >"$tmp/m.out"
for want in 'bob-w"} 1' 'bob"} 1' 'alice"} 2' 'u-carol"} 1'; do
  grep -q "^bqos_bucket_arrivals_total{node=\"it\",bucket=\"$want\$" "$tmp/m.out" &&
    ok "arrivals in bucket $want (per-op rule, named, template)" ||
    { bad "no arrivals $want"; grep '^bqos_bucket_arrivals_total' "$tmp/m.out"; }
done
grep -q '^bqos_node_rules_refused_total{node="it",reason="denied"} 2' "$tmp/m.out" &&
  ok "/metrics: refusals counted by reason denied" || { bad "/metrics denied"; grep rules "$tmp/m.out"; }
grep -q '^bqos_node_rules_refused_by_identity_total{node="it",identity="user:bob"} 2$' "$tmp/m.out" &&
  ! grep -q 'identity="user:alice"' "$tmp/m.out" &&
  ok "/metrics: refusals counted per identity (bob 2, alice none)" ||
  { bad "/metrics per identity"; grep by_identity "$tmp/m.out"; }
grep -q '^bqos_node_rule_matches_total{node="it",rule="4"} 1' "$tmp/m.out" &&
  ok "/metrics: matches per rule" || bad "/metrics rule matches"
grep -q '^bqos_node_template_buckets{node="it"} 1' "$tmp/m.out" && ok "/metrics: 1 template bucket" ||
  bad "/metrics template buckets"
[ -s "$tmp/node.json.rules" ] && ok "the node kept the rules beside --config" || bad "no node.json.rules"
stop_node

stamp "restart part"
# A node restarted without a controller classifies by the rules it kept.
start_node "$tmp/node2.log" --auth-file "$tmp/auth" --config "$tmp/node.json"
grep -q "5 rules (version 1) the controller last pushed" "$tmp/node2.log" &&
  ok "restarted without a controller: the kept rules loaded" || { bad "kept rules not loaded"; cat "$tmp/node2.log"; }
got=$(login bob pb 'set alice:k 0 0 1\r\nb\r\nset bob:k 0 0 1\r\nb\r\n')
[ "$got" = "b'STORED\\r\\n$DENY\\r\\nSTORED\\r\\n'" ] && ok "... and bob is still refused alice:k" ||
  bad "restart: $got"
stop_node

stamp "change part"
# A change at the controller reaches the node: without the deny rule, bob's
# write of alice:k lands in his own write bucket.
next_port; MPORT=$PORT
start_node "$tmp/node3.log" --controller "$CTRL_EP" --auth-file "$tmp/auth" --config "$tmp/node.json" \
  --metrics-listen "127.0.0.1:$MPORT"
wait_for 'grep -q "from the controller: 5 rules" "$tmp/node3.log"' 10
sed -i '/bob-not-alice/d' "$tmp/b.json"
kill -HUP "$CTRL_PID"
wait_for 'grep -q "from the controller: 4 rules" "$tmp/node3.log"' 10 &&
  ok "a rules change at the controller is pushed (4 rules)" || { bad "change not pushed"; tail -3 "$tmp/node3.log"; }
got=$(login bob pb 'set alice:k 0 0 1\r\nb\r\n')
curl -s "http://127.0.0.1:$MPORT/metrics" >"$tmp/m3.out"
[ "$got" = "b'STORED\\r\\nSTORED\\r\\n'" ] &&
  grep -q '^bqos_bucket_arrivals_total{node="it",bucket="bob-w"} 1$' "$tmp/m3.out" &&
  ok "bob's alice:k now lands in bob-w ($got)" || { bad "after the change: $got"; grep arrivals_total "$tmp/m3.out"; }
grep -q '^bqos_bucket_arrivals_total{node="it",bucket="alice"} 0$' "$tmp/m3.out" && ok "alice's bucket untouched" ||
  bad "alice's bucket took bob's write"

stamp "ctl part"
# bqos-ctl rule: add (with the analysis's warning), list as JSON, move, remove; the
# node gets each change.
CTL="$BIN/bqos-ctl --endpoint $ADMIN_EP"
$CTL rule add '{"name":"late","user":"bob","bucket":"bob"}' >"$tmp/add.out" 2>"$tmp/add.err"; rc=$?
[ $rc -eq 0 ] && grep -q "rule added at 4 (5 rules)" "$tmp/add.out" &&
  grep -q "warning: rule 4 (late) is shadowed by rule 2 (bob)" "$tmp/add.err" &&
  ok "rule add: a shadowed rule is added with a warning ($(cat "$tmp/add.err"))" ||
  { bad "rule add (rc $rc)"; cat "$tmp/add.out" "$tmp/add.err"; }
wait_for 'grep -q "from the controller: 5 rules" "$tmp/node3.log"' 10 && ok "... and pushed to the node" ||
  bad "rule add not pushed"
$CTL --json rule list >"$tmp/list.json" &&
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert [r.get("name") for r in d["rules"]] == ["bob-writes","alice","bob","others","late"], d; assert len(d["warnings"]) == 1' "$tmp/list.json" &&
  ok "rule list --json: the rules in order, one warning" || { bad "rule list"; cat "$tmp/list.json"; }
$CTL rule move late 0 >/dev/null 2>&1 && $CTL rule list 2>"$tmp/w.err" | head -1 | grep -q '"name":"late"' &&
  grep -q "rule 1 (bob-writes) is shadowed by rule 0 (late)" "$tmp/w.err" &&
  ok "rule move: late first, and now it shadows bob-writes" || { bad "rule move"; cat "$tmp/w.err"; }
$CTL rule add '{"user":"x","buckt":"y"}' 2>"$tmp/bad.err"; rc=$?
[ $rc -eq 1 ] && grep -q 'buckt: unknown member' "$tmp/bad.err" && ok "a bad rule is refused with its member ($rc)" ||
  { bad "bad rule rc $rc"; cat "$tmp/bad.err"; }
$CTL rule add '{"user":"dave","bucket":"dav"}' >/dev/null 2>"$tmp/typo.err" &&
  grep -q "names bucket 'dav', which the table does not have" "$tmp/typo.err" &&
  ok "rule add: a bucket the table lacks is warned about" || { bad "typo warning"; cat "$tmp/typo.err"; }
$CTL rule remove 5 >/dev/null 2>&1
$CTL rule remove late >/dev/null && $CTL rule remove 9 2>/dev/null; rc=$?
[ $rc -eq 1 ] && ok "rule remove; an unknown rule is refused" || bad "rule remove rc $rc"
# import: a file whose only change is its rules is applied (not "nothing to change")
python3 - "$tmp/b.json" "$tmp/imp.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["rules"] = [r for r in d["rules"] if r.get("name") != "others"]
d.pop("table_version", None)
json.dump(d, open(sys.argv[2], "w"))
PY
$CTL import "$tmp/imp.json" >"$tmp/imp.out" 2>&1; rc=$?
$CTL --json rule list >"$tmp/after.json"
if [ $rc -eq 0 ] && grep -q "the rules change, no bucket does" "$tmp/imp.out" && ! grep -q '"others"' "$tmp/after.json"; then
  ok "import of a rules-only change is applied ($(cat "$tmp/imp.out"))"
else
  bad "import of rules (rc $rc): $(cat "$tmp/imp.out")"
fi
grep -q '"rules"' "$tmp/b.json" && grep -q '"late"' "$tmp/b.json" && bad "bucket file still has late" ||
  ok "the bucket file holds the rules as edited"
stop_node
stop_controller

stamp "nbd part"
# NBD: an export is offered only to a client the rules give it (issue 27).
if command -v nbdinfo >/dev/null 2>&1; then
  cat >"$tmp/nbd.json" <<'JSON'
{"buckets":[{"name":"red","reservation":0},{"name":"blue","reservation":0}],
 "rules":[{"addr":"127.0.0.0/8","key":"red","bucket":"red"},{"deny":true}]}
JSON
  start_nbd_node "$tmp/nbd.log" "$BIN/bqos-nbd-node" --backend "file:$tmp/store/" --export-size 1m \
    --config "$tmp/nbd.json"
  out=$(nbdinfo --list "nbd://127.0.0.1:$PORT" 2>&1)
  echo "$out" | grep -q 'export="red"' && ! echo "$out" | grep -q 'export="blue"' &&
    ok "nbd: the list offers only the export the rules give" || bad "nbd list: $out"
  nbdinfo "nbd://127.0.0.1:$PORT/red" >/dev/null 2>&1 && ok "nbd: export red served" || bad "nbd red"
  nbdinfo "nbd://127.0.0.1:$PORT/blue" >/dev/null 2>&1 && bad "nbd: blue served despite the deny rule" ||
    ok "nbd: export blue not offered (deny rule)"
else
  echo "     nbdinfo not installed: NBD part skipped"
fi
finish
