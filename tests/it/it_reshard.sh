#!/bin/sh
# it_reshard.sh - K changing at run time on real daemons (issue 30): a cluster of one controller shard goes to two under load through a real etcd, a limited bucket moving from shard 0 to the new shard 1; every 1 s client window keeps it within 1.05 x its limit and its reservation is met in all but at most one.
#
# Buckets red (shard 0 of 1 and of 2) and blue (shard 0 of 1, shard 1 of 2:
# tests/test_shardmap.c pins the rule), each R 50 L 200, 1 s periods in 5
# intervals, CURVE on every endpoint.  s0 (--shards 1 --shard 0) starts
# alone and creates etcd's /bqos/it/shards = {"k":1,"gen":1}.  Nodes n1, n2
# (--shards 1 --controller "S0;S1": two shard slots, the second not running
# yet) in front of one memcached.  bqos-load keeps 8 requests per bucket and
# node in flight for 12 s, its windows aligned with the periods; 1 s in,
# `bqos-ctl shards set 2 4` begins the change (the key gets "next", from the
# first period boundary at least 4 periods away) and s1 (--shards 2 --shard
# 1, which the steady key would refuse) starts, is admitted and leads.  At
# the change's period s0 stops granting blue and s1 computes it; the nodes
# learnt the change from s0's messages and obey it from that period.  Then
# the root (s0) folds the change into the key ({"k":2,"gen":2}).
# run-tests: alone
. "$(dirname "$0")/../../scripts/lib.sh"
it_begin it_reshard bqos-controller bqos-node bqos-ctl bqos-load etcd memcached

it_etcd
it_etcd_start
. "$(dirname "$0")/shards_lib.sh"
sh_reshard_setup

cstart s0 0 1
wait_for '[ "$(status s0 leader)" = True ]' 10
check "s0 leads the cluster's one shard" '[ "$(status s0 leader)" = True ]'
check "the cluster's K in etcd: {\"k\":1,\"gen\":1}" \
  '[ "$(etcd_get /bqos/it/shards)" = "{\"k\":1,\"gen\":1}" ]'

CTLS="$LS_s0;$LS_s1" # two shard slots; the second's controller starts later
sh_nodes 1 "$CTLS"
wait_for '[ "$(nst n1 bqos_ctl_shard0_state)" = following ] && [ "$(nst n2 bqos_ctl_shard0_state)" = following ]' 10
check "both nodes follow shard 0" \
  '[ "$(nst n1 bqos_ctl_shard0_state)" = following ] && [ "$(nst n2 bqos_ctl_shard0_state)" = following ]'

sh_load_set 2
cstart s1 1 2
wait_for '[ "$(status s1 leader)" = True ]' 5
S1LEAD=$(status s1 leader)
KEYMID=$(etcd_get /bqos/it/shards)
# before the change's period: s1 runs nothing, s0 both (read before it)
PRE1=$(run s1 buckets); PRE0=$(run s0 buckets)
PREAT=$(now | awk '{ printf "%d", $1 * 1000 }')
wait_for '[ "$(nst n1 bqos_ctl_shards_next_k)" = 2 ] && [ "$(nst n2 bqos_ctl_shards_next_k)" = 2 ]' 3
NODENEXT="$(nst n1 bqos_ctl_shards_next_k)$(nst n2 bqos_ctl_shards_next_k)"
sh_sleep_to_end 0.4
POST0=$(run s0 buckets); POST1=$(run s1 buckets); K0=$(run s0 k); K1=$(run s1 k)
KEYEND=$(etcd_get /bqos/it/shards)
NK=$(sh_nodes_k)
REF=$(sh_tokens_refused)
TREF=$(sh_tables_refused n1 n2)
FOL="$(nst n1 bqos_ctl_shard1_state) $(nst n2 bqos_ctl_shard1_state)"
wait "$LOAD_PID"

check "bqos-ctl shards set 2 4 began the change (rc $SETRC, from wall-clock ms $FROM)" \
  '[ "$SETRC" = 0 ] && [ -n "$FROM" ] && [ "$FROM" -gt 0 ]'
check "etcd's key said the change: $KEYMID" \
  'echo "$KEYMID" | grep -q "\"next\":{\"k\":2,\"gen\":2,\"from\":$FROM}"'
check "s1 (--shards 2, which the steady key refuses) was admitted and leads shard 1" \
  '[ "$S1LEAD" = True ]'
sh_check_before "before the change's period s0 ran both buckets, s1 none ($PRE0, $PRE1)" \
  '[ "$PRE0" = 2 ] && [ "$PRE1" = 0 ]'
check "both nodes learnt the change before its period (next K: $NODENEXT)" '[ "$NODENEXT" = 22 ]'
check "after it s0 runs red only, s1 blue, both on K = 2 ($POST0 K $K0, $POST1 K $K1)" \
  '[ "$POST0" = 1 ] && [ "$POST1" = 1 ] && [ "$K0" = 2 ] && [ "$K1" = 2 ]'
check "the root folded the change into the key: $KEYEND" '[ "$KEYEND" = "{\"k\":2,\"gen\":2}" ]'
check "the nodes follow K 2 of generation 2 ($NK) and shard 1 ($FOL)" \
  '[ "$NK" = "2/2 2/2" ] && [ "$FOL" = "following following" ]'
check "no node refused a shard's table ($TREF)" '[ "$TREF" = 0000 ]'
check "the root step across the change: s1 computes within the root's slices" \
  'grep -q "shard 1: slices from the root of epoch" "$T/s1.log"'
echo "# tokens of another shard's bucket refused at n1, n2: $REF"

sh_move_checks 0 1
check "bqos-ctl routes blue to shard 1 by the generation in force" \
  'ctl --endpoint "$AD_s0;$AD_s1" status --bucket blue >/dev/null 2>&1 &&
   ! ctl --endpoint "$AD_s0" status --bucket blue >/dev/null 2>&1'

# shard 0's controller gone: a command for a bucket of shard 1 is routed by
# what shard 1 says, at once (the configuration is asked of every shard at
# once, a dead one costs the grace, not the timeout) and without a word
kill "$PID_s0" 2>/dev/null; wait "$PID_s0" 2>/dev/null
T0=$(now)
"$BIN/bqos-ctl" --timeout 2000 --curve-key "$K/op.key" --controller-key "$K/ctrl.pub" \
  --endpoint "$AD_s0;$AD_s1" status --bucket blue >"$T/dead0.out" 2>"$T/dead0.err"; D0RC=$?
D0MS=$(echo "$T0 $(now)" | awk '{ printf "%d", ($2 - $1) * 1000 }')
check "shard 0 stopped: status --bucket blue answered by shard 1 in $D0MS ms (rc $D0RC, timeout 2000), nothing on stderr" \
  '[ "$D0RC" = 0 ] && [ "$D0MS" -lt 1000 ] && [ ! -s "$T/dead0.err" ]'

# ... and the whole table (one in etcd for all shards) is imported and
# reloaded through shard 1's leader (they went to shard 0's only)
echo '{"buckets":[{"name":"red","reservation":50,"limit":200},{"name":"blue","reservation":50,"limit":200},{"name":"green","reservation":10,"limit":100}]}' \
  >"$T/b3.json"
T0=$(now)
"$BIN/bqos-ctl" --timeout 2000 --curve-key "$K/op.key" --controller-key "$K/ctrl.pub" \
  --endpoint "$AD_s0;$AD_s1" import "$T/b3.json" >"$T/imp.out" 2>"$T/imp.err"; IMPRC=$?
IMPMS=$(echo "$T0 $(now)" | awk '{ printf "%d", ($2 - $1) * 1000 }')
"$BIN/bqos-ctl" --timeout 2000 --curve-key "$K/op.key" --controller-key "$K/ctrl.pub" \
  --endpoint "$AD_s0;$AD_s1" reload >"$T/rel.out" 2>"$T/rel.err"; RELRC=$?
GREEN=$(ctl --endpoint "$AD_s1" --json buckets 2>/dev/null | grep -c '"green"')
check "shard 0 stopped: import through shard 1 in $IMPMS ms (rc $IMPRC: $(head -c 80 "$T/imp.out")), green in its table ($GREEN), reload too (rc $RELRC)" \
  '[ "$IMPRC" = 0 ] && [ "$IMPMS" -lt 1000 ] && [ "$GREEN" = 1 ] && [ "$RELRC" = 0 ]'

[ -n "${KEEP:-}" ] && { rm -rf "/tmp/$IT_NAME.last"; cp -r "$T" "/tmp/$IT_NAME.last"; }
it_end logs
