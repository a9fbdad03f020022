#!/bin/sh
# it_metrics.sh - /metrics (--metrics-listen) parses as Prometheus text (prometheus_client's parser) and passes `promtool check metrics` on the controller, a memcached node and a block node after a short load, and counters only grow between two scrapes; each has the process_* series, bqos_build_info, /healthz and /readyz; a node whose stderr is the journal ($JOURNAL_STREAM) writes syslog priorities and no stamps; SIGHUP on a node reloads its bucket file and keeps it running; the round-time histogram agrees with rounds_total, reloads (SIGHUP, bqos-ctl reload) count ok and error on both daemons, a stopped memcached gives bqos_node_backend_up 0 and connect errors, and 1 again once it is back; controller, node and bqos-ctl on IPv6 loopback; memcstat against a node.
set -u
NAME=it_metrics
. "$(dirname "$0")/node_lib.sh"
PY=/usr/bin/python3
"$PY" -c 'import prometheus_client' 2>/dev/null ||
  { echo "$NAME: python3-prometheus-client not installed (scripts/deps.sh test); skipped"; exit 0; }
MC="$PY $HERE/metrics_check.py"

# metrics_url LOG: the /metrics URL a daemon logged.
metrics_url() { sed -n 's/.*metrics on \(http:[^ ]*\).*/\1/p' "$1" | head -1; }
# scrape LOG FILE: GET its /metrics into FILE (fails unless it parses).
scrape() { rm -f "$2.vals"; $MC get "$(metrics_url "$1")" "$2" >/dev/null 2>"$2.err"; }
# val FILE NAME [L=V...]: one sample's value (empty if none), as
# `metrics_check.py value` gives it, looked up in FILE.vals (`values`: the
# file parsed once, not once a value).
val() {
  [ -f "$1.vals" ] || $MC values "$1" >"$1.vals" 2>/dev/null || { rm -f "$1.vals"; return 1; }
  vf=$1.vals vn=$2; shift 2
  awk -F '\t' -v n="$vn" -v want="$*" 'BEGIN { k = split(want, w, " ") }
    $1 == n { l = "\037" $2 "\037"
      for (i = 1; i <= k; i++) if (index(l, "\037" w[i] "\037") == 0) next
      if ($3 != "-") print $3; f = 1; exit }
    END { exit !f }' "$vf"
}

cat >"$T/b.json" <<EOF
{"buckets":[{"name":"red","reservation":200,"limit":400},{"name":"blue","reservation":0}]}
EOF
truncate -s 16M "$T/vol.img"
start_mc
next_port; CP=$PORT; next_port; AP=$PORT
spawn "$T/ctrl.log" "$BIN/bqos-controller" --buckets "$T/b.json" --listen "tcp://127.0.0.1:$CP" \
  --admin "tcp://127.0.0.1:$AP" --period 500ms --intervals 2 --metrics-listen 127.0.0.1:0
CTRL_PID=$SPAWNED
wait_for '[ -n "$(metrics_url "$T/ctrl.log")" ]' 5
start_node "$T/node.log" --config "$T/b.json" --controller "tcp://127.0.0.1:$CP" \
  --metrics-listen 127.0.0.1:0
next_port; BP=$PORT
spawn "$T/blk.log" "$BIN/bqos-nbd-node" --name blk --nbd-listen "127.0.0.1:$BP" \
  --backend "file:$T/vol.img" --buckets red,blue --controller "tcp://127.0.0.1:$CP" \
  --metrics-listen 127.0.0.1:0
BLK_PID=$SPAWNED
wait_port "$BP" 5
wait_for '[ -n "$(metrics_url "$T/node.log")" ] && [ -n "$(metrics_url "$T/blk.log")" ]' 5

# 1. A short load on both nodes, a scrape, more load over a period end, a
# second scrape: everything parses, counters only grow.
$MC mcload "$NODE_PORT" 200; rc=$?
check "memcached load (rc $rc)" '[ $rc -eq 0 ]'
nbdcopy "$T/vol.img" "nbd://127.0.0.1:$BP/red" 2>"$T/nbdcopy.err" ||
  echo "(nbdcopy failed: $(cat "$T/nbdcopy.err"))"
sleep 1.2
for d in ctrl node blk; do
  scrape "$T/$d.log" "$T/$d.1"; rc=$?
  check "$d: /metrics parses as Prometheus text (rc $rc)" '[ $rc -eq 0 ]'
done
$MC mcload "$NODE_PORT" 200
nbdcopy "$T/vol.img" "nbd://127.0.0.1:$BP/blue" 2>/dev/null
sleep 1.2
for d in ctrl node blk; do
  scrape "$T/$d.log" "$T/$d.2"
  grew=$($MC grow "$T/$d.1" "$T/$d.2"); rc=$?
  check "$d: no counter shrank between two scrapes ($grew grew)" '[ $rc -eq 0 ] && [ "${grew:-0}" -gt 0 ]'
done
served=$(val "$T/node.2" bqos_bucket_served_total node=it bucket=red class=R)
arr=$(val "$T/node.2" bqos_bucket_arrivals_total node=it bucket=red)
check "node: red's arrivals count both loads across period ends ($arr >= 400)" '[ "${arr:-0}" -ge 400 ]'
check "node: red served with R tokens ($served)" '[ "${served:-0}" -gt 0 ]'
lc=$(val "$T/node.2" bqos_bucket_latency_seconds_count node=it bucket=red)
linf=$(val "$T/node.2" bqos_bucket_latency_seconds_bucket node=it bucket=red le=+Inf)
check "node: red's latency histogram counts its IOs ($lc = +Inf bucket $linf, <= arrivals)" \
  '[ "${lc:-0}" -gt 0 ] && [ "$lc" = "$linf" ] && [ "$lc" -le "$arr" ]'
blc=$(val "$T/blk.2" bqos_bucket_latency_seconds_count node=blk bucket=red)
check "block node: red's latency histogram ($blc)" '[ "${blc:-0}" -gt 0 ]'
check "node: following the controller" \
  '[ "$(val "$T/node.2" bqos_node_controller_state node=it state=following)" = 1 ]'
check "block node: kind block" '[ "$(val "$T/blk.2" bqos_node_info node=blk kind=block)" = 1 ]'
barr=$(val "$T/blk.2" bqos_bucket_arrivals_total node=blk bucket=red)
check "block node: red's IOs counted ($barr)" '[ "${barr:-0}" -gt 0 ]'
check "controller: both nodes up" \
  '[ "$(val "$T/ctrl.2" bqos_node_up node=it)" = 1 ] && [ "$(val "$T/ctrl.2" bqos_node_up node=blk)" = 1 ]'
check "controller: each node's fallback state and count, capacity" \
  'echo "$(val "$T/ctrl.2" bqos_node_fallback node=it)" | grep -qx "[01]" &&
   [ -n "$(val "$T/ctrl.2" bqos_node_fallbacks_reported_total node=blk)" ] &&
   [ -n "$(val "$T/ctrl.2" bqos_node_capacity_ios_per_second node=blk)" ]'
check "controller: rounds counted" '[ "$(val "$T/ctrl.2" bqos_controller_rounds_total)" -gt 2 ]'
met=$(val "$T/ctrl.2" bqos_bucket_periods_total bucket=red outcome=reservation_met)
check "controller: red's period outcomes counted (met $met)" '[ -n "$met" ]'
rc2=$(val "$T/ctrl.2" bqos_controller_rounds_total)
hc=$(val "$T/ctrl.2" bqos_controller_round_duration_seconds_count)
hinf=$(val "$T/ctrl.2" bqos_controller_round_duration_seconds_bucket le=+Inf)
h1=$(val "$T/ctrl.2" bqos_controller_round_duration_seconds_bucket le=1)
hs=$(val "$T/ctrl.2" bqos_controller_round_duration_seconds_sum)
cc=$(val "$T/ctrl.2" bqos_controller_round_compute_seconds_count)
check "controller: round time histogram (count $hc = +Inf $hinf = rounds $rc2 = compute's $cc, le=1 $h1, sum $hs)" \
  '[ "${hc:-0}" -gt 2 ] && [ "$hc" = "$hinf" ] && [ "$hc" = "$rc2" ] && [ "$hc" = "$cc" ] &&
   [ "${h1:-x}" -le "$hc" ] && awk -v s="$hs" -v n="$hc" "BEGIN { exit !(s > 0 && s < n) }"'
check "controller: refusals, implausible reports and reloads exported (zero)" \
  '[ "$(val "$T/ctrl.2" bqos_controller_auth_refusals_total reason=unknown_key)" = 0 ] &&
   [ "$(val "$T/ctrl.2" bqos_controller_implausible_reports_total reason=served_beyond_rate)" = 0 ] &&
   [ "$(val "$T/ctrl.2" bqos_controller_reloads_total result=ok)" = 0 ] &&
   [ "$(val "$T/ctrl.2" bqos_controller_reloads_total result=error)" = 0 ]'
check "node: backend up, no backend errors, no reloads; a block node has no backend series" \
  '[ "$(val "$T/node.2" bqos_node_backend_up node=it)" = 1 ] &&
   [ "$(val "$T/node.2" bqos_node_backend_errors_total node=it kind=connect)" = 0 ] &&
   [ "$(val "$T/node.2" bqos_node_backend_errors_total node=it kind=io)" = 0 ] &&
   [ "$(val "$T/node.2" bqos_node_reloads_total node=it result=ok)" = 0 ] &&
   [ -z "$(val "$T/blk.2" bqos_node_backend_up node=blk)" ] &&
   [ "$(val "$T/blk.2" bqos_node_reloads_total node=blk result=error)" = 0 ]'
check "controller: rejected messages by reason" \
  '[ -n "$(val "$T/ctrl.2" bqos_controller_messages_rejected_total reason=version)" ]'
# bytes served by class (live, not folded at period ends): red's 200 sets
# and 200 hits of 2 bytes; a block node's refusals and bytes around the
# bounds scenario (7 requests refused by the checks, a 1 KiB write and read).
rb() { for c in R L O; do val "$1" bqos_bucket_served_bytes_total node="$2" bucket=red class=$c; done |
  awk '{ s += $1 } END { print s + 0 }'; }
check "node: red's bytes served by class are its values' ($(rb "$T/node.2" it) = 800)" \
  '[ "$(rb "$T/node.2" it)" = 800 ]'
check "node: requests refused per bucket exported" \
  '[ "$(val "$T/node.2" bqos_bucket_requests_refused_total node=it bucket=red)" = 0 ] &&
   [ "$(val "$T/node.2" bqos_node_requests_refused_unknown_bucket_total node=it)" = 0 ]'
"$PY" "$HERE/nbd_faults.py" "$BP" red bounds >"$T/bounds.out" 2>&1; rc=$?
scrape "$T/blk.log" "$T/blk.b"
ref() { val "$1" bqos_bucket_requests_refused_total node=blk bucket=red; }
check "block node: the bounds scenario passes (rc $rc)" '[ $rc -eq 0 ]'
check "block node: red's refused requests ($(ref "$T/blk.2") -> $(ref "$T/blk.b"), +7)" \
  '[ $(( $(ref "$T/blk.b") - $(ref "$T/blk.2") )) = 7 ]'
check "block node: red's bytes served ($(rb "$T/blk.2" blk) -> $(rb "$T/blk.b" blk), +2048)" \
  '[ $(( $(rb "$T/blk.b" blk) - $(rb "$T/blk.2" blk) )) = 2048 ]'
code=$(curl -s -o /dev/null -w '%{http_code}' "$(metrics_url "$T/node.log" | sed 's,/metrics$,/other,')")
check "other paths: 404 ($code)" '[ "$code" = 404 ]'

# 1b. Every daemon alike (common/metricsd.c): the linter Prometheus ships
# passes on the live output; the process_* series, the build info;
# /healthz and /readyz answer while the loop turns.
VERSION=$(sed -n 's/^#define BQOS_VERSION "\(.*\)"$/\1/p' "$HERE/../../common/version.h")
if command -v promtool >/dev/null 2>&1; then
  for d in ctrl node blk; do
    curl -sf "$(metrics_url "$T/$d.log")" >"$T/$d.live"; rc=$?
    promtool check metrics <"$T/$d.live" >"$T/$d.lint" 2>&1; prc=$?
    check "$d: promtool check metrics on the live output (curl $rc, $(wc -l <"$T/$d.live") lines, promtool $prc$(head -c 300 "$T/$d.lint" | tr '\n' ' '))" \
      '[ $rc -eq 0 ] && [ -s "$T/$d.live" ] && [ $prc -eq 0 ]'
  done
else
  echo "promtool not installed (prometheus: scripts/deps.sh test): promtool check metrics skipped"
fi
now=$(date +%s)
for d in ctrl:bqos-controller node:bqos-node blk:bqos-nbd-node; do
  f="$T/${d%%:*}.2"; prog=${d#*:}
  start=$(val "$f" process_start_time_seconds); rss=$(val "$f" process_resident_memory_bytes)
  vm=$(val "$f" process_virtual_memory_bytes); fds=$(val "$f" process_open_fds)
  maxfds=$(val "$f" process_max_fds); cpu=$(val "$f" process_cpu_seconds_total)
  check "${d%%:*}: process_* (start $start, now $now, rss $rss, vm $vm, fds $fds of $maxfds, cpu $cpu s)" \
    'awk -v s="$start" -v n="$now" -v r="$rss" -v v="$vm" -v f="$fds" -v m="$maxfds" -v c="$cpu" \
       "BEGIN { exit !(s > n - 300 && s <= n && r > 1000000 && v >= r && f >= 3 && m > f && c != \"\" && c >= 0) }"'
  check "${d%%:*}: bqos_build_info{program=$prog,version=$VERSION} 1" \
    '[ "$(val "$f" bqos_build_info program="$prog" version="$VERSION")" = 1 ]'
  base=$(metrics_url "$T/${d%%:*}.log" | sed 's,/metrics$,,')
  h=$(curl -s -o "$T/h.body" -w '%{http_code}' "$base/healthz"); hb=$(cat "$T/h.body")
  r=$(curl -s -o "$T/r.body" -w '%{http_code}' "$base/readyz"); rb=$(cat "$T/r.body")
  check "${d%%:*}: /healthz $h $hb, /readyz $r $rb" \
    '[ "$h" = 200 ] && [ "$hb" = ok ] && [ "$r" = 200 ] && [ "$rb" = ready ]'
done
pad=$(head -c 20000 /dev/zero | tr '\0' x)
code=$(curl -s -o /dev/null -w '%{http_code}' -H "X-Pad: $pad" "$(metrics_url "$T/node.log")")
check "headers beyond 16 KiB refused ($code), metrics still served" \
  '[ "$code" != 200 ] && curl -sf "$(metrics_url "$T/node.log")" >/dev/null'

# The example alerting rules: YAML naming only metrics the daemons export.
if "$PY" -c 'import yaml' 2>/dev/null; then
  n=$("$PY" "$HERE/rules_check.py" "$HERE/../../examples/prometheus/bqos-alerts.yml" \
    "$T/ctrl.2" "$T/node.2"); rc=$?
  check "examples/prometheus/bqos-alerts.yml: $n rules (rc $rc)" '[ $rc -eq 0 ]'
fi

# 2. SIGHUP reloads the bucket file (a new bucket appears) and the node runs on;
# a broken file changes nothing.
cat >"$T/b.json" <<EOF
{"buckets":[{"name":"red","reservation":200,"limit":400},{"name":"blue","reservation":0},
 {"name":"green","reservation":0,"weight":3}]}
EOF
kill -HUP "$NODE_PID" "$CTRL_PID"
sleep 0.3
scrape "$T/node.log" "$T/node.h1"; scrape "$T/ctrl.log" "$T/ctrl.h1"
echo garbage >"$T/b.json"
kill -HUP "$NODE_PID" "$CTRL_PID"
sleep 0.3
check "node alive after two SIGHUPs" 'kill -0 "$NODE_PID" 2>/dev/null'
scrape "$T/node.log" "$T/node.3"; scrape "$T/ctrl.log" "$T/ctrl.h2"
"$BIN/bqos-ctl" --endpoint "tcp://127.0.0.1:$AP" reload >"$T/reload.out" 2>&1
scrape "$T/ctrl.log" "$T/ctrl.h3"
rl() { echo "$(val "$1" "$2" ${3:+node=$3} result=ok)/$(val "$1" "$2" ${3:+node=$3} result=error)"; }
check "node: SIGHUP reloads counted, ok then error ($(rl "$T/node.h1" bqos_node_reloads_total it), $(rl "$T/node.3" bqos_node_reloads_total it))" \
  '[ "$(rl "$T/node.h1" bqos_node_reloads_total it)" = 1/0 ] && [ "$(rl "$T/node.3" bqos_node_reloads_total it)" = 1/1 ]'
check "controller: SIGHUP and admin reloads counted ($(rl "$T/ctrl.h1" bqos_controller_reloads_total), $(rl "$T/ctrl.h2" bqos_controller_reloads_total), $(rl "$T/ctrl.h3" bqos_controller_reloads_total))" \
  '[ "$(rl "$T/ctrl.h1" bqos_controller_reloads_total)" = 1/0 ] &&
   [ "$(rl "$T/ctrl.h2" bqos_controller_reloads_total)" = 1/1 ] &&
   [ "$(rl "$T/ctrl.h3" bqos_controller_reloads_total)" = 1/2 ]'
check "SIGHUP: bucket green added" '[ -n "$(val "$T/node.3" bqos_bucket_queued node=it bucket=green)" ]'
check "SIGHUP: the broken file was logged" 'grep -q "garbage" "$T/node.log"'
$MC mcload "$NODE_PORT" 10; rc=$?
check "node serves after SIGHUP (rc $rc)" '[ $rc -eq 0 ]'

# 3. memcstat (libmemcached) reads the node's version and stats.
if command -v memcstat >/dev/null 2>&1; then
  memcstat --servers="127.0.0.1:$NODE_PORT" >"$T/memcstat.out" 2>&1; rc=$?
  check "memcstat against the node (rc $rc)" '[ $rc -eq 0 ] && grep -q "version: 1.6.18-bqos-" "$T/memcstat.out"'
else
  echo "memcstat not installed (libmemcached-tools): skipped"
fi

# 3a. memcached stops: the node's backend goes down (bqos_node_backend_up 0,
# errors counted), and up again once memcached is back.
mcget() {
  "$PY" -c 'import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
s.sendall(b"".join(b"get red:k%d\r\n" % i for i in range(int(sys.argv[2]))) + b"quit\r\n")
while s.recv(65536): pass' "$NODE_PORT" "$1" 2>/dev/null
}
stop_pid "$MC_PID"
mcget 20; sleep 1.2; mcget 20
scrape "$T/node.log" "$T/node.down"
bce=$(val "$T/node.down" bqos_node_backend_errors_total node=it kind=connect)
bie=$(val "$T/node.down" bqos_node_backend_errors_total node=it kind=io)
check "memcached stopped: backend_up 0, errors counted (connect $bce, io $bie)" \
  '[ "$(val "$T/node.down" bqos_node_backend_up node=it)" = 0 ] && [ "${bce:-0}" -gt 0 ]'
start_mc "$MC_PORT"
sleep 1.2
mcget 5
scrape "$T/node.log" "$T/node.up"
check "memcached back: backend_up 1" '[ "$(val "$T/node.up" bqos_node_backend_up node=it)" = 1 ]'
stop_node
check "node: clean exit ($NODE_RC)" '[ "$NODE_RC" = 0 ]'
stop_pid "$BLK_PID" "$CTRL_PID"

# 3b. --default reject: keys of no bucket are refused, counted on the node.
printf '{"buckets":[{"name":"red","reservation":0}]}\n' >"$T/b3.json"
# Its stderr is "the journal": $JOURNAL_STREAM names the log file's device and inode.
: >"$T/rej.log"
JOURNAL_STREAM=$(stat -c '%d:%i' "$T/rej.log"); export JOURNAL_STREAM
start_node "$T/rej.log" --config "$T/b3.json" --default reject --metrics-listen 127.0.0.1:0
unset JOURNAL_STREAM
check "journal: lines start with a syslog priority and carry no stamp ($(head -1 "$T/rej.log"))" \
  'grep -q "^<6>info: node it: memcached clients on " "$T/rej.log" &&
   ! grep -v -E "^<[3467]>(error|warn|info|debug): " "$T/rej.log" | grep -q . &&
   ! grep -q -E "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z" "$T/rej.log"'
wait_for '[ -n "$(metrics_url "$T/rej.log")" ]' 5
"$PY" -c 'import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
s.sendall(b"get nope:a\r\nget nope:b red:c\r\nget red:d\r\nquit\r\n")
while s.recv(65536): pass' "$NODE_PORT"
scrape "$T/rej.log" "$T/rej.1"
check "node: keys of no bucket refused and counted ($(val "$T/rej.1" bqos_node_requests_refused_unknown_bucket_total node=it) = 2)" \
  '[ "$(val "$T/rej.1" bqos_node_requests_refused_unknown_bucket_total node=it)" = 2 ] &&
   [ "$(val "$T/rej.1" bqos_bucket_requests_refused_total node=it bucket=red)" = 0 ]'
stop_node

# 4. IPv6 loopback: controller, node (memcached, metrics) and bqos-ctl.
if ! ip -6 addr show lo 2>/dev/null | grep -q '::1'; then
  echo "no IPv6 loopback on this machine: IPv6 part skipped"
  finish
fi
next_port; CP=$PORT; next_port; AP=$PORT
printf '{"buckets":[{"name":"red","reservation":10}]}\n' >"$T/b2.json"
spawn "$T/ctrl6.log" "$BIN/bqos-controller" --buckets "$T/b2.json" --listen "tcp://[::1]:$CP" \
  --admin "tcp://[::1]:$AP" --period 500ms --intervals 2 --metrics-listen "[::1]:0"
wait_for '[ -n "$(metrics_url "$T/ctrl6.log")" ]' 5
NODE_LOG="$T/node6.log"
spawn "$NODE_LOG" "$NODE" --name v6 --memcached-listen "[::1]:0" \
  --backend "memcached://127.0.0.1:$MC_PORT" --controller "tcp://[::1]:$CP" --metrics-listen "[::1]:0"
wait_for '[ -n "$(metrics_url "$NODE_LOG")" ]' 5
check "node: memcached clients on [::1]" 'grep -q "memcached clients on \[::1\]:" "$NODE_LOG"'
check "node: metrics on [::1]" 'metrics_url "$NODE_LOG" | grep -q "http://\[::1\]:"'
wait_for '"$BIN/bqos-ctl" --endpoint "tcp://[::1]:$AP" status 2>/dev/null | grep -q "v6.*up"' 5
"$BIN/bqos-ctl" --endpoint "tcp://[::1]:$AP" status >"$T/ctl6.out" 2>&1; rc=$?
check "bqos-ctl over [::1] sees node v6 up (rc $rc)" '[ $rc -eq 0 ] && grep -q "v6.*up" "$T/ctl6.out"'
scrape "$T/ctrl6.log" "$T/ctrl6.1"; rc=$?
check "controller /metrics over [::1] (rc $rc)" '[ $rc -eq 0 ] && [ "$(val "$T/ctrl6.1" bqos_node_up node=v6)" = 1 ]'
finish
