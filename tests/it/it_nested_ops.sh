#!/bin/sh
# it_nested_ops.sh - three levels of nested buckets (issue 28: tenant -> bucket -> operation class) with a real memcached, bqos-controller and two bqos-nodes: rules send a bucket's writes to the leaf rw-w (limit 60/s) and its reads to rw-r, both under rw (limit 400/s) under the tenant t (limit 500/s); reads 80/s and writes 100/s on each node, open loop: the writes of both nodes stay within 1.01 x 60 in every node period and the limit binds, the reads are served in full beside them; with the write rule taken away (bqos-ctl reload) the same writes land with the reads and are not held: more than 1.5 x 60 stored a second (the check fails without the operation class).
# run-tests: alone
#
# About 20 s: a 5 s run and a 3 s one.
. "$(dirname "$0")/../../scripts/lib.sh"
it_begin it_nested_ops
it_want memcached python3
it_need bqos-node bqos-controller bqos-ctl
WL=60; RR=80; WR=100; SECS=5  # RR, WR: reads and writes per second and node

next_port; MP=$PORT; next_port; N1=$PORT; next_port; N2=$PORT; next_port; CP=$PORT
next_port; AP=$PORT
start_memcached "$MP" "$T/memcached.log" || { echo "memcached did not start"; exit 1; }
# table RULES: the bucket file with RULES (a JSON array).
table() {
  printf '%s\n' '{"buckets":[{"name":"t","reservation":0,"limit":500},' \
    ' {"name":"rw","reservation":0,"limit":400,"parent":"t"},' \
    ' {"name":"rw-r","reservation":20,"parent":"rw"},' \
    " {\"name\":\"rw-w\",\"reservation\":0,\"limit\":$WL,\"parent\":\"rw\"}]," \
    " \"rules\": $1}" >"$T/b.json"
}
table '[{"name":"w","key":"rw","op":"write","bucket":"rw-w"},{"name":"r","key":"rw","bucket":"rw-r"}]'
ADMIN_EP="tcp://127.0.0.1:$AP"
spawn "$T/ctrl.log" "$BIN/bqos-controller" --buckets "$T/b.json" --listen "tcp://127.0.0.1:$CP" \
  --admin "$ADMIN_EP" --period 1s --intervals 5 --capacity 20000
wait_port "$CP" 10 || { echo "controller did not start"; cat "$T/ctrl.log"; exit 1; }
for n in 1 2; do
  eval np=\$N$n
  spawn "$T/node$n.log" "$BIN/bqos-node" --name s$n --memcached-listen "127.0.0.1:$np" \
    --backend "memcached://127.0.0.1:$MP" --controller "tcp://127.0.0.1:$CP"
  wait_port "$np" 10 || { echo "node s$n did not start"; cat "$T/node$n.log"; exit 1; }
done
fcmp() { python3 -c "import sys; sys.exit(0 if ($1) else 1)"; }
ctl() { "$BIN/bqos-ctl" --endpoint "$ADMIN_EP" --timeout 3000 "$@"; }
warm() {
  for np in $N1 $N2; do
    mc_ask "$np" "get rw:warm\\r\\n" >/dev/null
    mc_ask "$np" "set rw:warm 0 0 1\\r\\nx\\r\\n" >/dev/null
  done
}
warm
wait_for 'ctl status 2>/dev/null | grep -Eq "^    rw-w +[0-9]+ +$WL"' 10
ctl status >"$T/status.txt" 2>&1
sed 's/^/# /' "$T/status.txt" | head -6
check "status shows three levels (t, rw under it, rw-r and rw-w under rw)" \
  'grep -Eq "^t " "$T/status.txt" && grep -Eq "^  rw " "$T/status.txt" &&
   grep -Eq "^    rw-r " "$T/status.txt" && grep -Eq "^    rw-w " "$T/status.txt"'

# load TAG SECS: reads and writes of rw on both nodes for SECS; each node's
# periods of rw-r and rw-w (node_periods.py).
load() {
  lp=""
  for np in $N1 $N2; do
    python3 "$HERE/ops_load.py" "$np" rw get $RR "$2" >"$T/$1.r.$np.json" & lp="$lp $!"
    python3 "$HERE/ops_load.py" "$np" rw set $WR "$2" >"$T/$1.w.$np.json" & lp="$lp $!"
    for b in rw-r rw-w; do
      python3 "$HERE/node_periods.py" "$np" $(($2 + 1)) $b >"$T/$1.$b.$np.per" & lp="$lp $!"
    done
  done
  for p in $lp; do wait "$p"; done
}
# stored TAG: the writes' STORED replies of both nodes in run TAG.
stored() {
  python3 -c 'import json,sys; print(sum(json.load(open(f))["replies"] for f in sys.argv[1:]))' \
    "$T/$1.w.$N1.json" "$T/$1.w.$N2.json"
}
# periods TAG: "N W_WORST W_MEAN R_MEAN": the periods every poller saw whole
# under load (the first one of each may be partial, the last outlasts the load), rw-w's worst and mean and rw-r's
# mean over both nodes.
periods() {
  python3 - "$T" "$1" $N1 $N2 <<'PY'
import sys
T, tag, ports = sys.argv[1], sys.argv[2], sys.argv[3:]
per = {}
for b in ("rw-r", "rw-w"):
    for p in ports:
        rows = [l.split() for l in open("%s/%s.%s.%s.per" % (T, tag, b, p)) if l.strip()]
        per[(b, p)] = {int(r[0]): int(r[1]) for r in rows[1:]}
# The last period seen may have had load for part of it only.
common = sorted(set.intersection(*(set(v) for v in per.values())))[:-1]
w = [sum(per[("rw-w", p)][k] for p in ports) for k in common]
r = [sum(per[("rw-r", p)][k] for p in ports) for k in common]
print("%d %d %.1f %.1f" % (len(common), max(w) if w else 0, sum(w) / max(len(w), 1),
                           sum(r) / max(len(r), 1)))
PY
}

load ops $SECS
res=$(periods ops); set -f; read np ww wm rm <<X
$res
X
set +f
echo "# with the write rule: $np periods, writes (rw-w) worst $ww mean $wm per period (limit $WL, offered $((2 * WR))), reads (rw-r) mean $rm (offered $((2 * RR)))"
check "the write limit holds over both nodes: every period within 1.01 x $WL, and it binds (mean above 0.9 x)" \
  '[ "$np" -ge 2 ] && fcmp "$ww <= 1.01 * $WL and $wm >= 0.9 * $WL"'
check "the reads beside it are served in full (mean within 10% of $((2 * RR)))" \
  'fcmp "$rm >= 0.9 * 2 * $RR"'

# Without the operation class: every request of rw to rw-r.
table '[{"name":"r","key":"rw","bucket":"rw-r"}]'
ctl reload >"$T/reload.out" 2>&1; rc=$?
check "bqos-ctl reload without the write rule (rc $rc)" '[ $rc -eq 0 ]'
sleep 1
load flat 3
sw=$(stored ops); sf=$(stored flat)
echo "# writes stored a second: $(echo "$sw $SECS" | awk '{ printf "%.1f", $1 / $2 }') with the write rule (offered $((2 * WR))), $(echo "$sf" | awk '{ printf "%.1f", $1 / 3 }') without"
check "without the write rule the writes are not held: more than 1.5 x $WL stored a second" \
  'fcmp "$sf / 3.0 > 1.5 * $WL"'

it_end 'tail -20 "$T/ctrl.log"; tail -20 "$T/node1.log"'
