#!/bin/sh
# it_shards_view.sh - controller shards seen whole (issue 30): bqos-ctl's merged status, history and status --node (one view of a real node that talks to both shards) over two shard leaders, the root's figures in the status and /metrics (promtool), and the cluster's K in etcd (/bqos/C/shards): created by the first shard controller, a third controller with another --shards exits non-zero without campaigning.
#
# Two shard controllers on one real etcd (s0a: shard 0, the root; s1a:
# shard 1), no nodes and no load: the root step runs at every round of
# shard 0's leader all the same.  Buckets red (shard 0 of 2) and blue
# (shard 1 of 2; tests/test_shardmap.c pins the rule).
. "$(dirname "$0")/../../scripts/lib.sh"
it_begin it_shards_view bqos-controller bqos-ctl bqos-node memcached etcd curl python3

it_etcd
it_etcd_start
echo '{"buckets":[{"name":"red","reservation":50,"limit":200},{"name":"blue","reservation":50,"limit":200}]}' \
  >"$T/b.json"
for c in s0a s1a s1x; do
  next_port; eval "LS_$c=tcp://127.0.0.1:$PORT"
  next_port; eval "AD_$c=tcp://127.0.0.1:$PORT"
done
next_port; ROOT=tcp://127.0.0.1:$PORT
# cstart NAME SHARD K [ARGS]: controller NAME of shard SHARD of K (PID_NAME; log $T/NAME.log)
cstart() {
  n=$1 s=$2 k=$3
  shift 3
  eval "ls=\$LS_$n ad=\$AD_$n"
  cp "$T/b.json" "$T/$n.json"
  spawn "$T/$n.log" "$BIN/bqos-controller" --buckets "$T/$n.json" --listen "$ls" --admin "$ad" \
    --period 1s --intervals 5 --etcd "$ETCD" --id "$n" --cluster it --lease-ttl 2 \
    --shards "$k" --shard "$s" --root "$ROOT" --metrics-listen 127.0.0.1:0 "$@"
  eval "PID_$n=\$SPAWNED"
}
ctl() { "$BIN/bqos-ctl" --timeout 1000 "$@"; }
status() { # status NAME FIELD: a field of controller NAME's own JSON status
  eval "ad=\$AD_$1"
  ctl --endpoint "$ad" --json status >"$T/st_$1.json" 2>/dev/null && jget "$T/st_$1.json" "$2"
}
metrics_url() { sed -n 's/.*metrics on \(http:[^ ]*\).*/\1/p' "$1" | head -1; }

cstart s0a 0 2 --root-listen "$ROOT"
cstart s1a 1 2
wait_for '[ "$(status s0a "d[\"leader\"]")" = True ] && [ "$(status s1a "d[\"leader\"]")" = True ]' 10
check "s0a leads shard 0 and s1a shard 1" \
  '[ "$(status s0a "d[\"leader\"]")" = True ] && [ "$(status s1a "d[\"leader\"]")" = True ]'
check "the cluster's K in etcd: /bqos/it/shards = {\"k\":2,\"gen\":1} (the first shard controller wrote it)" \
  '[ "$(etcd_get /bqos/it/shards)" = "{\"k\":2,\"gen\":1}" ]'

# bqos-ctl over both shards: one view
ALL="$AD_s0a;$AD_s1a"
sleep 1.2 # a root step or two
ctl --endpoint "$ALL" status >"$T/st.out" 2>&1; rc=$?
check "status over the shards: one line per shard, one bucket table with a SHARD column (rc $rc)" \
  '[ $rc = 0 ] && grep -q "^shard 0 of 2: controller s0a: leader" "$T/st.out" &&
   grep -q "^shard 1 of 2: controller s1a: leader" "$T/st.out" &&
   [ "$(grep -c "^BUCKET  *SHARD" "$T/st.out")" = 1 ] && grep -Eq "^red +0 " "$T/st.out" &&
   grep -Eq "^blue +1 " "$T/st.out" && ! grep -q "== shard" "$T/st.out"'
ctl --endpoint "$ALL" --json status --sort name --limit 1 --offset 1 >"$T/stj.json" 2>&1
check "status --json merged: red (shard 0) is the second by name, both shards' answers kept" \
  '[ "$(jget "$T/stj.json" "[(b[\"name\"], b[\"shard\"]) for b in d[\"buckets\"]]")" = "[('"'"'red'"'"', 0)]" ] &&
   [ "$(jget "$T/stj.json" "len(d[\"shards\"])")" = 2 ] &&
   [ "$(jget "$T/stj.json" "d[\"summary\"][\"buckets\"]")" = 2 ]'
ctl --endpoint "$ALL" history >"$T/hist.out" 2>&1; rc=$?
check "history over the shards: one table (rc $rc)" \
  '[ $rc = 0 ] && ! grep -q "== shard" "$T/hist.out" && grep -q "periods judged" "$T/hist.out"'

# status --node over the shards: node n1 (a real bqos-node) talks to both
next_port; MP=$PORT
start_memcached "$MP" "$T/memcached.log"
next_port; NP=$PORT
spawn "$T/n1.log" "$BIN/bqos-node" --name n1 --memcached-listen "127.0.0.1:$NP" \
  --backend "memcached://127.0.0.1:$MP" --policy tokens --shards 2 --controller "$LS_s0a;$LS_s1a"
wait_port "$NP" 10
nodej() { ctl --endpoint "$ALL" --json status --node n1 "$@" >"$T/n1.json" 2>/dev/null; }
wait_for 'nodej && [ "$(jget "$T/n1.json" "len(d[\"buckets\"])")" = 2 ]' 10
ctl --endpoint "$ALL" status --node n1 >"$T/n1.out" 2>&1; rc=$?
check "status --node over the shards: one view, n1 up in both, red (shard 0) and blue (shard 1) (rc $rc)" \
  '[ $rc = 0 ] && ! grep -q "== shard" "$T/n1.out" && grep -q "^node n1 over 2 shards" "$T/n1.out" &&
   grep -Eq "^ +0  up " "$T/n1.out" && grep -Eq "^ +1  up " "$T/n1.out" &&
   [ "$(grep -c "^BUCKET  *SHARD" "$T/n1.out")" = 1 ] && grep -Eq "^red +0 " "$T/n1.out" &&
   grep -Eq "^blue +1 " "$T/n1.out"'
nodej --limit 1 --offset 1
check "status --node --json merged: row 2 of 2 is blue (shard 1), the node in both shards, both answers kept" \
  '[ "$(jget "$T/n1.json" "[(b[\"name\"], b[\"shard\"]) for b in d[\"buckets\"]]")" = "[('"'"'blue'"'"', 1)]" ] &&
   [ "$(jget "$T/n1.json" "[s[\"state\"] for s in d[\"node\"][\"shards\"]]")" = "['"'"'up'"'"', '"'"'up'"'"']" ] &&
   [ "$(jget "$T/n1.json" "len(d[\"shards\"])")" = 2 ] &&
   [ "$(jget "$T/n1.json" "d[\"summary\"][\"matched\"]")" = 2 ]'
ctl --endpoint "$ALL" status --node ghost >"$T/ghost.out" 2>&1; rc=$?
check "status --node ghost over the shards: no shard knows it, exit 1 ($rc)" '[ $rc = 1 ]'

# the root's figures: status and /metrics
check "s0a's status: the root (steps run), s1a's: a shard (not a root)" \
  '[ "$(status s0a "d[\"root\"][\"root\"] and d[\"root\"][\"steps\"] > 0")" = True ] &&
   [ "$(status s1a "d[\"root\"][\"root\"]")" = False ]'
for c in s0a s1a; do
  curl -s "$(metrics_url "$T/$c.log")" >"$T/$c.prom"
done
check "s0a's /metrics: root steps, the root epoch, each shard's needs live or not" \
  'grep -Eq "^bqos_controller_root_steps_total [1-9]" "$T/s0a.prom" &&
   grep -q "^bqos_controller_root_epoch " "$T/s0a.prom" &&
   grep -q "^bqos_controller_root_shard_live{shard=\"1\"} " "$T/s0a.prom"'
check "s1a's /metrics: needs sent to the root counted, its slices by state, no root families" \
  'grep -q "^bqos_controller_root_needs_sent_total " "$T/s1a.prom" &&
   grep -q "^bqos_controller_shard_slice_nodes{state=\"live\"} " "$T/s1a.prom" &&
   ! grep -q "bqos_controller_root_shard_live" "$T/s1a.prom"'
if command -v promtool >/dev/null 2>&1; then
  for c in s0a s1a; do
    promtool check metrics <"$T/$c.prom" >"$T/$c.lint" 2>&1; prc=$?
    check "$c: promtool check metrics (rc $prc: $(head -c 300 "$T/$c.lint" | tr '\n' ' '))" '[ $prc = 0 ]'
  done
else
  echo "ok - # SKIP promtool not installed (scripts/deps.sh test)"
fi

# another K: refused at the controller
t0=$(date +%s)
cstart s1x 1 3
wait_for '! kill -0 "$PID_s1x" 2>/dev/null' 8
rc=running
kill -0 "$PID_s1x" 2>/dev/null || { wait "$PID_s1x" 2>/dev/null; rc=$?; }
check "a controller with --shards 3 exits non-zero ($rc) within 8 s, saying why" \
  '[ $rc != running ] && [ $rc != 0 ] && [ $rc != 127 ] && grep -q "the cluster runs 2 shards" "$T/s1x.log"'
check "it never campaigned: s1a still leads shard 1, the key still says 2" \
  '[ "$(status s1a "d[\"leader\"]")" = True ] && ! grep -q "leading" "$T/s1x.log" &&
   [ "$(etcd_get /bqos/it/shards)" = "{\"k\":2,\"gen\":1}" ]'
echo "# K refusal took $(( $(date +%s) - t0 )) s"

[ -n "${KEEP:-}" ] && { rm -rf "/tmp/$IT_NAME.last"; cp -r "$T" "/tmp/$IT_NAME.last"; }
it_end 'for f in "$T"/s*.log; do echo "== $f"; tail -15 "$f"; done'
