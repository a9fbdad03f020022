#!/bin/sh
# it_shadow.sh - shadow mode (issue 28) with a real memcached, bqos-controller and bqos-node: the same limited bucket under the same open-loop load above its limit, once enforced and once in shadow (bqos-ctl set --shadow): in shadow it is never held (served > limit, nothing waits) and its bqos_bucket_shadow_held_total is within 10% of what the enforced run held (arrivals - served); status shows SHADOW; --enforce holds it again; the node's near-limit and waited-for-limit counters move in the enforced run; a reservation with no demand is judged idle, not met, and after --reservation-unused-periods its status reason says so.
# run-tests: alone
#
# About 25 s: two 6 s runs of 400 gets/s against a limit of 200/s.
. "$(dirname "$0")/../../scripts/lib.sh"
it_begin it_shadow
it_want memcached python3 curl
it_need bqos-node bqos-controller bqos-ctl
RES=50; LIMIT=200; RATE=400; SECS=6

next_port; MP=$PORT; next_port; NP=$PORT; next_port; CP=$PORT; next_port; AP=$PORT
start_memcached "$MP" "$T/memcached.log" || { echo "memcached did not start"; exit 1; }
cat >"$T/b.json" <<EOF
{"buckets":[{"name":"lim","reservation":$RES,"limit":$LIMIT},{"name":"other","reservation":0},
 {"name":"paid","reservation":10}]}
EOF
ADMIN_EP="tcp://127.0.0.1:$AP"
spawn "$T/ctrl.log" "$BIN/bqos-controller" --buckets "$T/b.json" --listen "tcp://127.0.0.1:$CP" \
  --admin "$ADMIN_EP" --period 1s --intervals 5 --capacity 20000 --reservation-unused-periods 3
wait_port "$CP" 10 || { echo "controller did not start"; cat "$T/ctrl.log"; exit 1; }
spawn "$T/node.log" "$BIN/bqos-node" --name s1 --memcached-listen "127.0.0.1:$NP" \
  --backend "memcached://127.0.0.1:$MP" --controller "tcp://127.0.0.1:$CP" \
  --metrics-listen 127.0.0.1:0
wait_port "$NP" 10 || { echo "node did not start"; cat "$T/node.log"; exit 1; }
metrics_url() { sed -n 's/.*metrics on \(http:[^ ]*\).*/\1/p' "$1" | head -1; }
wait_for '[ -n "$(metrics_url "$T/node.log")" ]' 5
MURL=$(metrics_url "$T/node.log")
ctl() { "$BIN/bqos-ctl" --endpoint "$ADMIN_EP" --timeout 3000 "$@"; }
mc_ask "$NP" 'get lim:warm\r\n' >/dev/null
scrape() { curl -sf "$MURL" >"$T/node.prom"; }
# shadow_is V: the node's bqos_bucket_shadow for lim is V.
shadow_is() { scrape && grep -q "^bqos_bucket_shadow{node=\"s1\",bucket=\"lim\"} $1\$" "$T/node.prom"; }
wait_for 'scrape && grep -q "^bqos_bucket_tokens{node=\"s1\",bucket=\"lim\",class=\"L\"}" "$T/node.prom"' 10
check "the node follows the controller and knows lim's limit" \
  'grep -q "^bqos_bucket_tokens{node=\"s1\",bucket=\"lim\",class=\"L\"}" "$T/node.prom" && shadow_is 0'

run() { python3 "$(dirname "$0")/shadow_load.py" "$NP" "$MURL" lim "$RATE" "$SECS" 4 >"$T/$1.json"; }
# Enforced.
run enforced
# What was still queued goes with the closed connections; a period to settle.
sleep 1.5
ctl set lim --shadow >"$T/set.out" 2>&1; rc=$?
check "bqos-ctl set --shadow (rc $rc)" '[ $rc -eq 0 ]'
wait_for 'shadow_is 1' 5
check "the shadow flag reached the node" 'shadow_is 1'
ctl --json buckets >"$T/buckets.json"
check "the bucket file says shadow" '[ "$(jget "$T/buckets.json" "[b.get(\"shadow\", False) for b in d[\"buckets\"] if b[\"name\"] == \"lim\"][0]")" = True ]'
ctl status >"$T/status.txt"
check "status shows SHADOW" 'grep -Eq "^lim +[0-9]+ +$LIMIT SHADOW" "$T/status.txt"'
sleep 1
run shadow

E="$T/enforced.json"; S="$T/shadow.json"
jv() { jget "$1" "int(d[\"$2\"])"; }
eheld=$(( $(jv "$E" arrivals) - $(jv "$E" served) ))
sheld=$(jv "$S" shadow_held)
echo "# enforced: $(cat "$E")"
echo "# shadow:   $(cat "$S")"
echo "# held: enforced $eheld (arrivals - served), shadow $sheld (shadow_held_total); limit $LIMIT/s x ${SECS}s = $((LIMIT * SECS))"
check "the enforced run is held: served <= limit x 1.1, the rest queued" \
  '[ $(jv "$E" served) -le $((LIMIT * SECS * 11 / 10)) ] && [ $eheld -ge $(( (RATE - LIMIT) * SECS / 2 )) ]'
check "the enforced run counts waits for its limit" '[ $(jv "$E" waited) -gt 0 ]'
check "in shadow it is never held: all served, beyond the limit, no waits, no queue" \
  '[ $(jv "$S" served) -ge $(( $(jv "$S" arrivals) - 20 )) ] &&
   [ $(jv "$S" served) -gt $((LIMIT * SECS * 3 / 2)) ] && [ $(jv "$S" waited) -eq 0 ] &&
   [ $(jv "$S" queued_max) -le 20 ]'
check "shadow-held ($sheld) within 10% of what enforced held ($eheld)" \
  '[ $eheld -gt 0 ] && [ $((sheld * 100)) -ge $((eheld * 90)) ] && [ $((sheld * 100)) -le $((eheld * 110)) ]'
mc_ask "$NP" 'stats buckets\r\n' | tr '|' '\n' >"$T/stats.txt"
check "stats buckets says shadow and what it would have held" \
  'grep -q "^STAT lim:shadow 1" "$T/stats.txt" && grep -q "^STAT lim:shadow_held [1-9]" "$T/stats.txt" &&
   grep -q "^STAT lim:waited_for_limit [1-9]" "$T/stats.txt"'
scrape
check "near-limit periods counted" \
  'awk "/^bqos_bucket_near_limit_total\{node=\"s1\",bucket=\"lim\"\}/ { exit !(\$2 >= 3) }" "$T/node.prom"'

# paid reserved 10/s and sent nothing: idle periods, not met, and after 3
# of them its status says so.
ctl --json history --periods 5 paid >"$T/hist.json"
check "an unused reservation's periods are idle, not met" \
  '[ "$(jget "$T/hist.json" "all(p[\"reservation\"] == \"idle\" for p in d[\"buckets\"][0][\"periods\"])")" = True ]'
ctl status >"$T/status2.txt"
check "status: reservation unused for N periods" \
  'grep -Eq "^paid .*reservation unused for [0-9]+ periods" "$T/status2.txt"'

ctl set lim --enforce >/dev/null 2>&1; rc=$?
wait_for 'shadow_is 0' 5
check "bqos-ctl set --enforce (rc $rc): enforced again at the node" '[ $rc -eq 0 ] && shadow_is 0'
ctl set other --shadow >"$T/noshadow.out" 2>&1; rc=$?
check "shadow without a limit is refused (rc $rc)" '[ $rc -ne 0 ] && grep -q "needs a limit" "$T/noshadow.out"'

it_end 'tail -20 "$T/ctrl.log"; tail -20 "$T/node.log"'
