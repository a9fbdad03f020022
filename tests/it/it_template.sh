#!/bin/sh
# it_template.sh - a template rule's limit held over the cluster (issue 27): two real bqos-nodes in front of one memcached, a controller whose rules give every user a bucket u-{user} with a limit of 200/s; alice hammering both nodes is held to 1.05 x 200 over any 1 s window summed over both nodes (each node enforcing the limit on its own gave 2 x L); bqos-ctl status shows the bucket with the rule that made it.
# run-tests: alone
set -u
NAME=it_template
. "$(dirname "$0")/node_lib.sh"

L=200
start_mc
printf 'alice:pa\nbob:pb\n' >"$tmp/auth"
chmod 600 "$tmp/auth"
cat >"$tmp/b.json" <<JSON
{"buckets":[{"name":"other","reservation":0,"limit":10}],
 "rules":[{"name":"per-user","user":"*","template":"u-{user}","limit":$L}]}
JSON
next_port; CMPORT=$PORT
start_controller "$tmp/b.json" 100000 "$tmp" --metrics-listen "127.0.0.1:$CMPORT" || { bad "controller did not start"; cat "$tmp/controller.log"; finish; }
# two nodes, each with its own name
PORTS=""
for i in 1 2; do
  "$NODE" --name "it$i" --memcached-listen 127.0.0.1:0 --backend "memcached://127.0.0.1:$MC_PORT" \
    --controller "$CTRL_EP" --auth-file "$tmp/auth" </dev/null >/dev/null 2>"$tmp/node$i.log" &
  pid=$!
  LIB_PIDS="$LIB_PIDS $pid"
  wait_for '[ -n "$(node_port "$tmp/node$i.log")" ]' 5
  PORTS="$PORTS $(node_port "$tmp/node$i.log")"
  wait_for 'grep -q "from the controller: 1 rules" "$tmp/node$i.log"' 10 ||
    { bad "node $i got no rules"; tail -5 "$tmp/node$i.log"; finish; }
done
ok "two nodes with the controller's template rule"

# 7 s of alice on both nodes, every 1 s window from her first request on (her
# bucket is made at the nodes, reported, placed: the nodes serve none of it
# before the controller's first grant, about one interval later)
python3 "$HERE/tenant_load.py" 7 0 "$(echo $PORTS | tr ' ' ,)" alice/pa/get/k:x/16 >"$tmp/load.json" 2>"$tmp/load.err" ||
  { bad "load client failed"; cat "$tmp/load.err"; }
python3 - "$tmp/load.json" "$L" <<'PY' && ok "alice held to $L/s over both nodes: $(cat "$tmp/load.json")" || bad "alice over both nodes: $(cat "$tmp/load.json")"
import json, sys
d = json.load(open(sys.argv[1]))["alice-get"]; L = int(sys.argv[2])
per = list(d["by_port"].values())
assert d["refused"] == 0, "%d requests refused" % d["refused"]
# 1.05 x L plus one unit of R and of L per node over a short window (2 N, N = 2 nodes:
# docs/decisions.md, "Small limited buckets keep the 2 N term over short windows"), as it_tenants
assert d["worst"] <= 1.05 * L + 4, "worst 1 s window %d > 1.05 x %d + 2 N" % (d["worst"], L)
assert d["worst"] >= 0.5 * L, "worst window %d: the bucket barely served" % d["worst"]
assert sum(per) <= 1.05 * L * 7, "%d served in 7 s" % sum(per)
assert all(v > 0 for v in per), "a node served none: %s" % per
PY

CTL="$BIN/bqos-ctl --endpoint $ADMIN_EP"
$CTL --json status >"$tmp/status.json" 2>"$tmp/status.err"
python3 - "$tmp/status.json" <<'PY' && ok "status: u-alice made by rule 0 (per-user)" || { bad "status"; cat "$tmp/status.json" "$tmp/status.err"; }
import json, sys
d = json.load(open(sys.argv[1]))
b = [x for x in d["buckets"] if x["name"] == "u-alice"]
assert b, d
assert b[0].get("template_rule") == 0 and b[0].get("template_rule_name") == "per-user", b[0]
assert b[0]["limit"] == 200, b[0]
PY
curl -s "http://127.0.0.1:$CMPORT/metrics" >"$tmp/cm.out"
grep -q '^bqos_controller_template_buckets 1$' "$tmp/cm.out" &&
  grep -q '^bqos_controller_template_buckets_total{event="made"} 1$' "$tmp/cm.out" &&
  ok "controller /metrics: 1 template-made bucket placed" || { bad "controller metrics"; grep template "$tmp/cm.out"; }
finish
