#!/bin/sh
# it_alerts.sh - the example alert rules (examples/prometheus/bqos-alerts.yml) pass `promtool check rules` and their unit tests (`promtool test rules bqos-alerts.test.yml`: each alert fires and stays silent where it should, a dead controller fires BqosNoLeader, a routine restart does not fire BqosRejectedMessages), and those tests fail on the rules as they were before issue 29; every rule has a runbook_url naming a section of docs/operations.md; the Grafana dashboard (examples/grafana/bqos-dashboard.json) is well-formed JSON whose queries parse as PromQL; every metric the rules and the dashboard name is in the live /metrics of a controller and a node; a real Prometheus scraping them with the rules loaded runs the dashboard's queries (key panels have data), raises no alert while all is well, and has BqosNoLeader and BqosTargetDown pending once the controller stops.
# run-tests: alone
set -u
. "$(dirname "$0")/../../scripts/lib.sh"
it_begin it_alerts
HERE=$(cd "$(dirname "$0")" && pwd)
PY=/usr/bin/python3
command -v promtool >/dev/null 2>&1 ||
  { echo "it_alerts: promtool not installed (prometheus: scripts/deps.sh test); skipped"; exit 0; }
"$PY" -c 'import yaml' 2>/dev/null ||
  { echo "it_alerts: python3-yaml not installed (scripts/deps.sh test); skipped"; exit 0; }
TOP=$(cd "$HERE/../.." && pwd)
EX=$TOP/examples/prometheus
RULES=$EX/bqos-alerts.yml
TESTS=$EX/bqos-alerts.test.yml
DASH=$TOP/examples/grafana/bqos-dashboard.json
AC="$PY $HERE/alerts_check.py"

# 1. The rules and their unit tests.
promtool check rules "$RULES" >"$T/check.out" 2>&1; rc=$?
check "promtool check rules bqos-alerts.yml ($(grep -o '[0-9]* rules found' "$T/check.out"), rc $rc)" \
  '[ $rc -eq 0 ] || { cat "$T/check.out"; false; }'
(cd "$EX" && promtool test rules bqos-alerts.test.yml) >"$T/test.out" 2>&1; rc=$?
check "promtool test rules bqos-alerts.test.yml (rc $rc)" \
  '[ $rc -eq 0 ] && grep -q SUCCESS "$T/test.out" || { cat "$T/test.out"; false; }'
out=$($AC cover "$RULES" "$TESTS"); rc=$?
check "every alert is tested firing and silent${out:+: $out}" '[ $rc -eq 0 ]'

# The tests have teeth: on a copy of the rules with BqosNoLeader and
# BqosRejectedMessages put back as they were before issue 29
# (max(bqos_controller_leader) < 1; increase(...[5m]) > 0 without for:),
# they fail, and name those two cases.
$AC break "$RULES" "$T/bqos-alerts.yml" && cp "$TESTS" "$T/"
(cd "$T" && promtool test rules bqos-alerts.test.yml) >"$T/old.out" 2>&1; rc=$?
check "the tests fail on the old BqosNoLeader and BqosRejectedMessages (rc $rc)" \
  '[ $rc -ne 0 ] && grep -q "name: NoLeader fires when the controller is dead" "$T/old.out" &&
   grep -q "name: RejectedMessages stays silent over a controller restart" "$T/old.out" ||
   { cat "$T/old.out"; false; }'

# 2. Runbooks: docs/operations.md#ANCHOR, a heading of that file.
out=$($AC runbooks "$RULES" "$TOP/docs/operations.md"); rc=$?
check "every rule has a severity and a runbook_url into docs/operations.md ($out)" '[ $rc -eq 0 ]'

# 3. The dashboard: its shape, and its queries (Grafana's variables
# replaced) parse as PromQL: promtool check rules on them as recording rules.
out=$($AC dashboard "$DASH" "$T/dash-rules.yml"); rc=$?
check "bqos-dashboard.json: JSON, schemaVersion, \${DS_PROMETHEUS}, panels ($out queries)" '[ $rc -eq 0 ]'
promtool check rules "$T/dash-rules.yml" >"$T/dash.out" 2>&1; rc=$?
check "the dashboard's queries parse as PromQL (rc $rc)" '[ $rc -eq 0 ] || { cat "$T/dash.out"; false; }'

# 4. Every metric the rules and the dashboard name, in the live output of a
# controller and a memcached node (a limited and an unlimited bucket, a
# period judged, the node following).
# period judged, the node following).
metrics_url() { sed -n 's/.*metrics on \(http:[^ ]*\).*/\1/p' "$1" | head -1; }
if ! command -v memcached >/dev/null 2>&1; then
  echo "ok - # SKIP live /metrics: memcached is not installed (scripts/deps.sh test)"
  it_end
fi
cat >"$T/b.json" <<EOF
{"buckets":[{"name":"red","reservation":200,"limit":400},{"name":"blue","reservation":0}]}
EOF
next_port; MC_PORT=$PORT
start_memcached "$MC_PORT" "$T/memcached.log" || { not_ok "memcached did not start"; it_end; }
next_port; CP=$PORT; next_port; AP=$PORT
# red's reservation sees one request: over this test's minute its periods
# are idle, which BqosReservationUnused would (rightly) report; the healthy
# cluster of section 5 is one whose reservations are not yet overdue.
spawn "$T/ctrl.log" "$BIN/bqos-controller" --buckets "$T/b.json" --listen "tcp://127.0.0.1:$CP" \
  --admin "tcp://127.0.0.1:$AP" --period 500ms --intervals 2 --metrics-listen 127.0.0.1:0 \
  --reservation-unused-periods 10000
CTRL_PID=$SPAWNED
wait_for '[ -n "$(metrics_url "$T/ctrl.log")" ]' 5
next_port; NP=$PORT
spawn "$T/node.log" "$BIN/bqos-node" --name it --memcached-listen "127.0.0.1:$NP" \
  --backend "memcached://127.0.0.1:$MC_PORT" --config "$T/b.json" \
  --controller "tcp://127.0.0.1:$CP" --metrics-listen 127.0.0.1:0
wait_port "$NP" 5
wait_for '[ -n "$(metrics_url "$T/node.log")" ]' 5
mc_ask "$NP" 'set red:a 0 0 1\r\nx\r\nget red:a\r\nget blue:b\r\n' >/dev/null
wait_for 'curl -sf "$(metrics_url "$T/ctrl.log")" >"$T/ctrl.prom" &&
  grep -q "^bqos_bucket_periods_total{bucket=\"red\"" "$T/ctrl.prom" &&
  curl -sf "$(metrics_url "$T/node.log")" >"$T/node.prom" &&
  grep -q "^bqos_node_controller_state{node=\"it\",state=\"following\"} 1" "$T/node.prom"' 10
check "controller and node scraped ($(wc -l <"$T/ctrl.prom") and $(wc -l <"$T/node.prom") lines), a period judged, the node following" \
  'grep -q "^bqos_bucket_periods_total" "$T/ctrl.prom" && grep -q "state=\"following\"} 1" "$T/node.prom"'
out=$($AC names "$T/ctrl.prom" "$T/node.prom" -- "$RULES"); rc=$?
check "the rules name only live metrics ($out)" '[ $rc -eq 0 ]'
out=$($AC names "$T/ctrl.prom" "$T/node.prom" -- "$DASH"); rc=$?
check "the dashboard names only live metrics ($out)" '[ $rc -eq 0 ]'
# ... and the check itself catches a name no daemon exports.
sed 's/bqos_controller_rounds_late_total/bqos_controller_rounds_lat_total/' "$RULES" >"$T/typo.yml"
out=$($AC names "$T/ctrl.prom" "$T/node.prom" -- "$T/typo.yml"); rc=$?
check "a misspelt metric is caught ($out)" '[ $rc -ne 0 ]'

# 5. A real Prometheus (Debian's prometheus package has the server too)
# scraping both every second with the rules loaded: the dashboard's panels
# have data, a healthy cluster raises no alert, and with the controller
# stopped BqosNoLeader and BqosTargetDown are pending within seconds (for:
# keeps them from firing in a test this short).
if ! command -v prometheus >/dev/null 2>&1; then
  echo "ok - # SKIP a live Prometheus: prometheus is not installed"
  it_end
fi
hostport() { metrics_url "$1" | sed 's,^http://,,; s,/metrics$,,'; }
next_port; PP=$PORT
cat >"$T/prom.yml" <<EOF
global: {scrape_interval: 1s, evaluation_interval: 1s}
rule_files: ['$RULES']
scrape_configs:
  - job_name: bqos
    static_configs: [{targets: ['$(hostport "$T/ctrl.log")', '$(hostport "$T/node.log")']}]
EOF
spawn "$T/prom.log" prometheus --config.file="$T/prom.yml" --storage.tsdb.path="$T/tsdb" \
  --web.listen-address="127.0.0.1:$PP" --log.level=warn
PROM=http://127.0.0.1:$PP
# 7 scrapes of each target: enough for rate() over 5 s.
wait_for 'curl -sf "$PROM/api/v1/query" --data-urlencode "query=min(count_over_time(up[1m])) >= 7 and min(up) == 1" |
  grep -q "\"value\""' 30
check "Prometheus scrapes controller and node" \
  '[ "$(curl -sf "$PROM/api/v1/query" --data-urlencode "query=sum(up)" | sed -n "s/.*\"\([0-9]*\)\"\]}.*/\1/p")" = 2 ] ||
   { tail -n 5 "$T/prom.log"; false; }'
mc_ask "$NP" 'get red:a\r\nget red:b\r\nget blue:b\r\n' >/dev/null
out=$($AC query "$PROM" "$DASH" "Leader" "Rounds per second" "Round duration by phase (mean)" \
  "Node controller state" "Requests per node" "Latency per node (arrival to completion)" \
  "Served against reservation" "Served against limit" "Requests waiting for the limit" "CPU" "Daemons"); rc=$?
check "the dashboard's queries run on a live Prometheus, key panels with data ($out)" '[ $rc -eq 0 ]'
out=$($AC alerts "$PROM" | tr '\n' ' '); rc=$?
check "a healthy cluster raises no alert (${out:-none})" '[ $rc -eq 0 ] && [ -z "$out" ]'
stop_pid "$CTRL_PID"
wait_for '$AC alerts "$PROM" >"$T/alerts.now" && grep -q "^BqosNoLeader:pending" "$T/alerts.now" &&
  grep -q "^BqosTargetDown:pending" "$T/alerts.now"' 15
out=$($AC alerts "$PROM" | sort | tr '\n' ' ')
check "the controller stopped: BqosNoLeader and BqosTargetDown pending ($out)" \
  'echo "$out" | grep -q "BqosNoLeader:pending" && echo "$out" | grep -q "BqosTargetDown:pending"'
it_end 'tail -n 5 "$T/ctrl.log" "$T/node.log" "$T/prom.log"'
