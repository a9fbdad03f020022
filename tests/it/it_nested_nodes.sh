#!/bin/sh
# it_nested_nodes.sh - nested buckets (issue 28) with a real memcached, bqos-controller and two bqos-nodes: a tenant capped at 300 IOs/s over buckets a and b (each L 250/s, each loaded at 300/s split over both nodes): what the two nodes serve of a and b together stays within 1.01 x the tenant's cap in every period (node_periods.py), each within its own limit; bqos-ctl status shows the tree and --json the parent; the controller exports each level's service (the tenant's = a's + b's); --parent to an unknown bucket, a cycle and removing a parent are refused; then with the parents taken away (set --parent none) the same load goes over the cap: the check fails without nesting.
# run-tests: alone
#
# About 20 s: two 3 s runs.
. "$(dirname "$0")/../../scripts/lib.sh"
it_begin it_nested_nodes
it_want memcached python3 curl
it_need bqos-node bqos-controller bqos-ctl
CAP=300; LIM=250; RATE=150; SECS=3  # RATE: per bucket and node

next_port; MP=$PORT; next_port; N1=$PORT; next_port; N2=$PORT; next_port; CP=$PORT
next_port; AP=$PORT
start_memcached "$MP" "$T/memcached.log" || { echo "memcached did not start"; exit 1; }
printf '%s\n' "{\"buckets\":[{\"name\":\"tenant\",\"reservation\":0,\"limit\":$CAP}," \
  " {\"name\":\"a\",\"reservation\":20,\"limit\":$LIM,\"parent\":\"tenant\"}," \
  " {\"name\":\"b\",\"reservation\":20,\"limit\":$LIM,\"parent\":\"tenant\"}," \
  " {\"name\":\"other\",\"reservation\":0}]}" >"$T/b.json"
ADMIN_EP="tcp://127.0.0.1:$AP"
spawn "$T/ctrl.log" "$BIN/bqos-controller" --buckets "$T/b.json" --listen "tcp://127.0.0.1:$CP" \
  --admin "$ADMIN_EP" --period 1s --intervals 5 --capacity 20000 --metrics-listen 127.0.0.1:0
wait_port "$CP" 10 || { echo "controller did not start"; cat "$T/ctrl.log"; exit 1; }
for n in 1 2; do
  eval np=\$N$n
  spawn "$T/node$n.log" "$BIN/bqos-node" --name s$n --memcached-listen "127.0.0.1:$np" \
    --backend "memcached://127.0.0.1:$MP" --controller "tcp://127.0.0.1:$CP" \
    --metrics-listen 127.0.0.1:0
  wait_port "$np" 10 || { echo "node s$n did not start"; cat "$T/node$n.log"; exit 1; }
done
metrics_url() { sed -n 's/.*metrics on \(http:[^ ]*\).*/\1/p' "$1" | head -1; }
wait_for '[ -n "$(metrics_url "$T/node1.log")" ] && [ -n "$(metrics_url "$T/node2.log")" ] &&
  [ -n "$(metrics_url "$T/ctrl.log")" ]' 5
U1=$(metrics_url "$T/node1.log"); U2=$(metrics_url "$T/node2.log"); UC=$(metrics_url "$T/ctrl.log")
fcmp() { python3 -c "import sys; sys.exit(0 if ($1) else 1)"; }
ctl() { "$BIN/bqos-ctl" --endpoint "$ADMIN_EP" --timeout 3000 "$@"; }
for b in a b; do
  mc_ask "$N1" "get $b:warm\\r\\n" >/dev/null
  mc_ask "$N2" "get $b:warm\\r\\n" >/dev/null
done
wait_for 'curl -sf "$U2" | grep -q "^bqos_bucket_tokens{node=\"s2\",bucket=\"b\",class=\"L\"}"' 10

# load TAG: a and b at RATE/s on each node for SECS, all at once.
load() {
  lp=""
  for b in a b; do
    python3 "$(dirname "$0")/shadow_load.py" "$N1" "$U1" $b $RATE $SECS 2 >"$T/$1.$b.1.json" &
    lp="$lp $!"
    python3 "$(dirname "$0")/shadow_load.py" "$N2" "$U2" $b $RATE $SECS 2 >"$T/$1.$b.2.json" &
    lp="$lp $!"
    python3 "$(dirname "$0")/node_periods.py" "$N1" $((SECS + 1)) $b >"$T/$1.$b.1.per" &
    lp="$lp $!"
    python3 "$(dirname "$0")/node_periods.py" "$N2" $((SECS + 1)) $b >"$T/$1.$b.2.per" &
    lp="$lp $!"
  done
  # The controller's metrics during the run, once b has been served this
  # period.
  tag=$1
  wait_for 'curl -sf "$UC" >"$T/$tag.prom" && grep -q "^bqos_bucket_served_ios{bucket=\"b\"} [1-9]" "$T/$tag.prom"' $SECS
  for p in $lp; do wait "$p"; done
}
# served TAG B: what both nodes served of bucket B in run TAG.
served() {
  python3 -c 'import json,sys; print(int(sum(json.load(open(f))["served"] for f in sys.argv[1:])))' \
    "$T/$1.$2.1.json" "$T/$1.$2.2.json"
}

# periods TAG: the tenant's worst and mean service per node period (a + b
# over both nodes, node_periods.py; the periods every poller saw whole) as
# a share of the cap, and a's and b's worst as a share of their own limit.
periods() {
  python3 - "$T" "$1" $CAP $LIM <<'PY'
import sys
T, tag, cap, lim = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
per = {}
for b in "ab":
    for n in "12":
        rows = [l.split() for l in open("%s/%s.%s.%s.per" % (T, tag, b, n)) if l.strip()]
        per[b + n] = {int(r[0]): int(r[1]) for r in rows[1:]}  # the first one may be partial
common = sorted(set.intersection(*(set(v) for v in per.values())))
tot = [sum(v[p] for v in per.values()) for p in common]
own = [max((per[b + "1"][p] + per[b + "2"][p]) / lim for p in common) for b in "ab"]
print("%d %.4f %.4f %.4f %.4f" % (len(common), max(tot) / cap, sum(tot) / len(tot) / cap,
                                  own[0], own[1]))
PY
}

load nested
sa=$(served nested a); sb=$(served nested b)
res=$(periods nested); set -f; read np worst mean oa ob <<X
$res
X
set +f
echo "# nested: $np periods, the tenant's worst $worst x its cap, mean $mean x; a's worst $oa x its limit, b's $ob x (a served $sa, b $sb over ${SECS} s)"
check "the tenant's cap holds over both nodes: every period within 1.01 x, and it binds (worst above 0.9 x)" \
  '[ "$np" -ge 2 ] && fcmp "$worst <= 1.01 and $worst >= 0.9"'
check "each bucket within its own limit and served" \
  'fcmp "$oa <= 1.01 and $ob <= 1.01" && [ $sa -ge $((20 * SECS)) ] && [ $sb -ge $((20 * SECS)) ]'

mv_() { sed -n "s/^$1 \([0-9.e+]*\)\$/\1/p" "$T/nested.prom"; }
mt=$(mv_ 'bqos_bucket_served_ios{bucket="tenant"}'); ma=$(mv_ 'bqos_bucket_served_ios{bucket="a"}')
mb=$(mv_ 'bqos_bucket_served_ios{bucket="b"}')
echo "# controller metrics: served this period tenant $mt, a $ma, b $mb"
check "metrics per level: the tenant's served is a's + b's; bqos_bucket_parent; no series for other" \
  '[ -n "$mt" ] && fcmp "$mt > 0 and $mt == $ma + $mb" &&
   grep -q "^bqos_bucket_parent{bucket=\"a\",parent=\"tenant\"} 1" "$T/nested.prom" &&
   ! grep -q "^bqos_bucket_served_ios{bucket=\"other\"}" "$T/nested.prom"'
ctl status >"$T/status.txt"
sed 's/^/# /' "$T/status.txt" | head -8
check "status shows the tree (children indented under the tenant)" \
  'grep -Eq "^tenant " "$T/status.txt" && grep -Eq "^  a " "$T/status.txt" &&
   grep -Eq "^  b " "$T/status.txt" && grep -Eq "^other " "$T/status.txt"'
ctl --json status >"$T/status.json"
pc=$(jget "$T/status.json" '",".join("%s:%s:%s" % (b["name"], b.get("parent", "-"), b.get("children", 0)) for b in d["buckets"])')
echo "# status --json name:parent:children $pc"
check "status --json: a's parent, the tenant's children" \
  'echo "$pc" | grep -q "tenant:-:2" && echo "$pc" | grep -q "a:tenant:0"'
ctl set a --parent nobody >"$T/e1" 2>&1; r1=$?
ctl set tenant --parent a >"$T/e2" 2>&1; r2=$?
ctl remove tenant >"$T/e3" 2>&1; r3=$?
cat "$T/e1" "$T/e2" "$T/e3" | sed 's/^/# /'
check "refused: unknown parent, cycle, removing a parent" \
  '[ $r1 -ne 0 ] && grep -q "not a bucket" "$T/e1" && [ $r2 -ne 0 ] && grep -q cycle "$T/e2" &&
   [ $r3 -ne 0 ] && grep -q "is a parent" "$T/e3"'

# The parents taken away: the same load goes over the cap.
ctl set a --parent none >/dev/null 2>&1 && ctl set b --parent none >/dev/null 2>&1; rc=$?
check "set --parent none (rc $rc)" '[ $rc -eq 0 ]'
sleep 1
load flat
res=$(periods flat); set -f; read np worst mean oa ob <<X
$res
X
set +f
echo "# without the parent: $np periods, the tenant's worst $worst x its cap, mean $mean x"
check "without nesting the cap check fails (worst period above 1.01 x)" \
  '[ "$np" -ge 2 ] && fcmp "$worst > 1.01"'

it_end 'tail -20 "$T/ctrl.log"; tail -20 "$T/node1.log"'
