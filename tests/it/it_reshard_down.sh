#!/bin/sh
# it_reshard_down.sh - K shrinking at run time on real daemons (issue 30): a cluster of two controller shards goes to one under load through a real etcd, a limited bucket moving from the removed shard 1 to shard 0; every 1 s client window keeps it within 1.05 x its limit, its reservation is met in all but at most one, the removed shard's leader steps down after the change's period and grants nothing more, and the nodes stop using its slot.
#
# Buckets red (shard 0 of 2 and of 1) and blue (shard 1 of 2, shard 0 of
# 1: tests/test_shardmap.c pins the rule), each R 50 L 200, 1 s periods in
# 5 intervals, CURVE on every endpoint.  s0 and s1 (--shards 2) start; the
# first creates etcd's /bqos/it/shards = {"k":2,"gen":1}.  Nodes n1, n2
# (--shards 2 --controller "S0;S1") in front of one memcached.  bqos-load
# keeps 8 requests per bucket and node in flight for 12 s, its windows
# aligned with the periods; 1 s in, `bqos-ctl shards set 1 4` begins the
# change.  At its period P s1 stops granting blue and s0 computes it; s1's
# leader then reads the key again (within a second), finds its shard left
# out, revokes its lease and steps down; the root (s0) folds the change
# into the key ({"k":1,"gen":2}).  Then K grows back: `bqos-ctl shards
# set 2 4` again (generation 3), s1 kept running through the shrink; its
# controller campaigns again before that change's period P2, the nodes'
# idle sessions to slot 1 resume, and from P2 s1 runs blue again.
# run-tests: alone
. "$(dirname "$0")/../../scripts/lib.sh"
it_begin it_reshard_down bqos-controller bqos-node bqos-ctl bqos-load etcd memcached

it_etcd
it_etcd_start
. "$(dirname "$0")/shards_lib.sh"
sh_reshard_setup

cstart s0 0 2
cstart s1 1 2
wait_for '[ "$(status s0 leader)" = True ] && [ "$(status s1 leader)" = True ]' 10
check "s0 and s1 lead the cluster's two shards" \
  '[ "$(status s0 leader)" = True ] && [ "$(status s1 leader)" = True ]'
check "the cluster's K in etcd: {\"k\":2,\"gen\":1}" \
  '[ "$(etcd_get /bqos/it/shards)" = "{\"k\":2,\"gen\":1}" ]'

CTLS="$LS_s0;$LS_s1"
sh_nodes 2 "$CTLS"
fol() { echo "$(nst n1 bqos_ctl_shard$1_state) $(nst n2 bqos_ctl_shard$1_state)"; }
wait_for '[ "$(fol 0)" = "following following" ] && [ "$(fol 1)" = "following following" ]' 10
check "both nodes follow both shards" \
  '[ "$(fol 0)" = "following following" ] && [ "$(fol 1)" = "following following" ]'

sh_load_set 1 18
KEYMID=$(etcd_get /bqos/it/shards)
PRE0=$(run s0 buckets); PRE1=$(run s1 buckets)
PREAT=$(now | awk '{ printf "%d", $1 * 1000 }')
wait_for '[ "$(nst n1 bqos_ctl_shards_next_k)" = 1 ] && [ "$(nst n2 bqos_ctl_shards_next_k)" = 1 ]' 3
NODENEXT="$(nst n1 bqos_ctl_shards_next_k)$(nst n2 bqos_ctl_shards_next_k)"
# 2.5 s after P (s1 has read the key again and stepped out): from here
# its slot's tokens must not move (TA1; TA2 just before the grow-back);
# what the grow-back changes at once (s1 campaigns, the slots resume)
sleep "$(echo "$(now) ${FROM:-0}" | awk '{ w = $2 / 1000 + 2.5 - $1; if (w < 0) w = 0; if (w > 9) w = 9; printf "%.2f", w }')"
S1LEAD=$(status s1 leader)
sh_snap n1 n2
sfol() { echo "$(snst n1 bqos_ctl_shard$1_state) $(snst n2 bqos_ctl_shard$1_state)"; }
FOL0=$(sfol 0); FOL1=$(sfol 1)
TA1="$(snst n1 bqos_ctl_shard1_tokens_applied) $(snst n2 bqos_ctl_shard1_tokens_applied)"
LEADKEY=$(etcd_get /bqos/it/shard/1/leader)
# the shrink's end: the key settled (two periods after P)
AT_READ=$(now)
wait_for '[ "$(etcd_get /bqos/it/shards)" = "{\"k\":1,\"gen\":2}" ]' 3
AT_SETTLED=$(now)
KEYEND=$(etcd_get /bqos/it/shards)
S1LEADEND=$(status s1 leader)
# what s0 and s1 run (one shards request each)
run s0 k >/dev/null; run s1 k >/dev/null
POST0=$(jget "$T/sh_s0.json" 'd["run"]["buckets"]'); K0=$(jget "$T/sh_s0.json" 'd["run"]["k"]')
POST1=$(jget "$T/sh_s1.json" 'd["run"]["buckets"]'); K1=$(jget "$T/sh_s1.json" 'd["run"]["k"]')
sh_snap n1 n2
TA2="$(snst n1 bqos_ctl_shard1_tokens_applied) $(snst n2 bqos_ctl_shard1_tokens_applied)"
OFFG1="$(snst n1 bqos_ctl_shards_periods_offgrid) $(snst n2 bqos_ctl_shards_periods_offgrid)"
snk() { echo "$(snst n1 bqos_ctl_shards_k)/$(snst n1 bqos_ctl_shards_gen) $(snst n2 bqos_ctl_shards_k)/$(snst n2 bqos_ctl_shards_gen)"; }
stref() { for n in n1 n2; do printf '%s%s' "$(snst $n bqos_ctl_shard0_tables_refused)" "$(snst $n bqos_ctl_shard1_tables_refused)"; done; }
NK=$(snk); TREF=$(stref)

# growing back: K 1 -> 2 (generation 3), s1 kept running; its change's
# period P2 at least 3 periods away (s1 reads the key every second)
AT_SET2=$(now)
SET2_AT=$(date -u +%Y-%m-%dT%H:%M:%S.%3N)
ctl --endpoint "$AD_s0;$AD_s1" --json shards set 2 3 >"$T/set2.json" 2>"$T/set2.err"; SET2RC=$?
FROM2=$(jget "$T/set2.json" 'd["cluster"]["next"]["from_ms"]' 2>/dev/null)
KEYMID2=$(etcd_get /bqos/it/shards)
# s1 campaigns again before P2 (read 1 s before it)
sleep "$(echo "$(now) ${FROM2:-0}" | awk '{ w = $2 / 1000 - 1 - $1; if (w < 0) w = 0; if (w > 9) w = 9; printf "%.2f", w }')"
PRE2AT=$(now | awk '{ printf "%d", $1 * 1000 }')
S1LEADPRE=$(status s1 leader)
# the end state: at the load's end, or 1.5 s after P2 if a starved host
# made that later (the state needs no load; the windows after P2 do)
sh_sleep_to_end 0.4
sleep "$(echo "$(now) ${FROM2:-0}" | awk '{ w = $2 / 1000 + 1.5 - $1; if (w < 0) w = 0; if (w > 9) w = 9; printf "%.2f", w }')"
GEND_AT=$(date -u +%Y-%m-%dT%H:%M:%S.%3N)
run s0 k >/dev/null; run s1 k >/dev/null
GPOST0=$(jget "$T/sh_s0.json" 'd["run"]["buckets"]'); GK0=$(jget "$T/sh_s0.json" 'd["run"]["k"]')
GPOST1=$(jget "$T/sh_s1.json" 'd["run"]["buckets"]'); GK1=$(jget "$T/sh_s1.json" 'd["run"]["k"]')
S1LEADBACK=$(status s1 leader)
sh_snap n1 n2
NK2=$(snk)
GFOL0=$(sfol 0); GFOL1=$(sfol 1)
OFFG2="$(snst n1 bqos_ctl_shards_periods_offgrid) $(snst n2 bqos_ctl_shards_periods_offgrid)"
TREF2=$(stref)
wait "$LOAD_PID"
wait_for '[ "$(etcd_get /bqos/it/shards)" = "{\"k\":2,\"gen\":3}" ]' 3
KEYEND2=$(etcd_get /bqos/it/shards)

check "bqos-ctl shards set 1 4 began the change (rc $SETRC, from wall-clock ms $FROM)" \
  '[ "$SETRC" = 0 ] && [ -n "$FROM" ] && [ "$FROM" -gt 0 ]'
check "etcd's key said the change: $KEYMID" \
  'echo "$KEYMID" | grep -q "\"next\":{\"k\":1,\"gen\":2,\"from\":$FROM}"'
sh_check_before "before the change's period s0 ran red, s1 blue ($PRE0, $PRE1)" \
  '[ "$PRE0" = 1 ] && [ "$PRE1" = 1 ]'
check "both nodes learnt the change before its period (next K: $NODENEXT)" '[ "$NODENEXT" = 11 ]'
check "after it s0 runs both buckets, s1 none, both on K = 1 ($POST0 K $K0, $POST1 K $K1)" \
  '[ "$POST0" = 2 ] && [ "$POST1" = 0 ] && [ "$K0" = 1 ] && [ "$K1" = 1 ]'
check "s1 stepped down after the period ($S1LEAD at P + 2.5 s, $S1LEADEND when the key settled) for the key" \
  '[ "$S1LEAD" = False ] && [ "$S1LEADEND" = False ] && grep -q "leaves this shard out" "$T/s1.log"'
check "shard 1's leader key is gone (\"$LEADKEY\")" '[ -z "$LEADKEY" ]'
check "s1 granted nothing more: the nodes' shard-1 tokens applied unchanged from P + 2.5 s until the grow-back ($TA1 -> $TA2)" \
  '[ "$TA1" = "$TA2" ]'
check "the root folded the change into the key: $KEYEND" '[ "$KEYEND" = "{\"k\":1,\"gen\":2}" ]'
check "the nodes follow K 1 of generation 2 ($NK), shard 0 ($FOL0); shard 1's slot idles ($FOL1)" \
  '[ "$NK" = "1/2 1/2" ] && [ "$FOL0" = "following following" ] && [ "$FOL1" = "idle idle" ]'
# the removed shard's endpoint only (a starved host can make shard 0 silent too: not this
# check's matter), from the change's period P until the grow-back (a session not yet
# welcomed when the node's first period turns says so once at start-up, and a host stall
# before P makes s1, still a leader then, silent as any: not the removal's matter either)
warns() { cat "$T/n1.log" "$T/n2.log" | grep -E "falling back|no controller heard|no controller reachable" |
  grep -F "$LS_s1" | awk -v t="$1" -v u="${2:-}" '$1 >= t && (u == "" || $1 < u)' | wc -l; }
FALL=$(warns "$(logtime "$FROM")" "$SET2_AT")
check "no node fell back or warned of a silence for the removed shard ($FALL lines)" \
  '[ "$FALL" = 0 ] && [ "$(grep -c "shard 1 is out of the cluster" "$T/n1.log")" = 1 ]'
check "no node refused a shard's table ($TREF)" '[ "$TREF" = 0000 ]'

# the grow-back
check "bqos-ctl shards set 2 3 began growing back (rc $SET2RC, from wall-clock ms $FROM2)" \
  '[ "$SET2RC" = 0 ] && [ -n "$FROM2" ] && [ "$FROM2" -gt "$FROM" ]'
check "etcd's key said it: $KEYMID2" \
  'echo "$KEYMID2" | grep -q "\"k\":1,\"gen\":2,\"next\":{\"k\":2,\"gen\":3,\"from\":$FROM2}"'
if [ "$PRE2AT" -lt "${FROM2:-0}" ]; then
  check "s1 campaigned again and led before the grow-back's period ($S1LEADPRE 1 s before it)" \
    '[ "$S1LEADPRE" = True ] && grep -q "names shard 1 again" "$T/s1.log"'
else
  echo "# (the host was too slow to read s1 before the grow-back's period: not judged)"
fi
check "after it s0 runs red, s1 blue again, both on K = 2 ($GPOST0 K $GK0, $GPOST1 K $GK1), s1 leads ($S1LEADBACK)" \
  '[ "$GPOST0" = 1 ] && [ "$GPOST1" = 1 ] && [ "$GK0" = 2 ] && [ "$GK1" = 2 ] && [ "$S1LEADBACK" = True ]'
check "the nodes follow K 2 of generation 3 ($NK2), shard 0 ($GFOL0) and slot 1 again ($GFOL1)" \
  '[ "$NK2" = "2/3 2/3" ] && [ "$GFOL0" = "following following" ] && [ "$GFOL1" = "following following" ]'
check "the root folded the grow-back into the key: $KEYEND2" '[ "$KEYEND2" = "{\"k\":2,\"gen\":3}" ]'
# s1's periods stayed on the wall clock's whole seconds through its time
# out (a node's idle session once said hello with the period it idled in,
# ended: s1, a standby, adopted that clock and switched 0.1-0.3 s early, the
# nodes' scheduler periods followed it and red lost a tenth of its limit)
S1SW=$(grep "shard 1: period .* runs on K = 2" "$T/s1.log" | head -1 | cut -c21-23)
check "s1's grow-back switch on the wall clock's whole second (.${S1SW:-none} s), its periods not moved" \
  '[ -n "$S1SW" ] && echo "$S1SW" | awk "{ exit !(\$1 + 0 < 250) }"'
# the nodes' scheduler periods stayed on them too (a session back from idling
# met its new leader's first message with the clock it idled in, or rolled
# it in the middle of a period, and restarted the node's period there: both
# buckets, red too, lost up to half a window after the grow-back's set)
check "the nodes' periods started on the wall clock's whole seconds through the grow-back (off: $OFFG1 -> $OFFG2)" \
  '[ "$OFFG1" = "$OFFG2" ] && [ "$OFFG2" != "none none" ]'
FALL2=$(warns "$(logtime "$FROM2")" "$GEND_AT") # (a host stall later is not the grow-back's)
FALLPRE2=$(warns "$SET2_AT" "$(logtime "$FROM2")")
echo "# fallback or silence lines for slot 1 from the grow-back's set to its period: $FALLPRE2"
check "no node fell back or warned of a silence for slot 1 from the grow-back's period to the end state ($FALL2 lines)" \
  '[ "$FALL2" = 0 ]'
check "no node refused a shard's table through the grow-back ($TREF2)" '[ "$TREF2" = 0000 ]'

sh_move_checks 1 0
PW2=$(echo "$FROM2 $LOAD_START" | awk '{ printf "%d", $1 / 1000 - $2 + 1 }')
echo "# the grow-back's period is client window $PW2 (after P: reads done $AT_READ, key settled $AT_SETTLED, set $AT_SET2 s)" |
  awk -v p="$FROM" '{ for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+\.[0-9]+,?$/) { c = ($i ~ /,$/); $i = sprintf("%.1f%s", $i - p / 1000, c ? "," : "") } print }'
check "the grow-back's period came after the shrink's (window $PW2)" '[ "$PW2" -gt "$PW" ]'
if [ "$PW2" -le $((DUR - 2)) ]; then
  check "blue served at its limit again after the grow-back (a window >= 180 after it)" \
    '[ "$(echo $BLUE | tr " " "\n" | awk -F: -v p="$PW2" "\$1 > p && \$2 >= 180" | wc -l)" -ge 1 ]'
else
  echo "# (the host was too slow: the grow-back's period came less than two windows before the load's end; its windows not judged)"
fi
check "bqos-ctl routes blue to shard 1 again by the generation in force" \
  'ctl --endpoint "$AD_s0;$AD_s1" status --bucket blue >/dev/null 2>&1 &&
   ! ctl --endpoint "$AD_s0" status --bucket blue >/dev/null 2>&1'

[ -n "${KEEP:-}" ] && { rm -rf "/tmp/$IT_NAME.last"; cp -r "$T" "/tmp/$IT_NAME.last"; }
it_end logs
