#!/bin/sh
# it_leader_etcd_cut.sh - the partition suite's "leader cut from etcd" case (issue 26): the leader's etcd traffic goes through a relay (cut_proxy.py) that the test cuts for CUT_S s, dropping everything (a partition, not a refusal: requests time out): the leader stops pushing by its own clock and the standby takes over; a limited bucket holds 1.05 x its limit in every 1 s window of an independent counting client, and a `set` acknowledged before survives.
#
# A real etcd, two bqos-controllers (--etcd, --lease-ttl 2s, 1 s periods in
# 5 intervals): c1 reaches etcd only through the relay (hold mode: while
# cut, connections stay open and silent), c2 directly; one bqos-node over
# memcached taking both, a raw protocol node on each controller and
# bqos-load on red (reservation 50, limit 200), its windows aligned with
# the controller's periods (partition_lib.sh).  `set red --limit 150`
# (acknowledged), then c1, leading, is cut off etcd for CUT_S s (4: past its
# 2 s lease), then the relay heals.
# Required (docs/controller.md "Faults"; partition_lib.sh pt_run's common
# checks): red <= 1.05 x 200 per window before the set, <= 1.05 x 150 from
# the second window after it to the end; c2 leads within 2 s of the cut
# with a higher epoch; from then on c1 sends nothing at its epoch; at most
# one election and one node fallback; the node follows c2; red served
# again; red's limit 150 in both tables.  About 22 s.
. "$(dirname "$0")/../../scripts/lib.sh"
it_begin it_leader_etcd_cut etcd memcached python3 bqos-controller bqos-node bqos-ctl bqos-load
. "$HERE/partition_lib.sh"
CUT_S=${CUT_S:-4}
# c1's etcd: a relay the test cuts by creating $T/cut
relay() {
  next_port; XP=$PORT
  spawn "$T/proxy.log" python3 "$HERE/cut_proxy.py" "$XP" "$EP" "$T/cut" hold
  wait_port "$XP" 10
  PT_ETCD1="http://127.0.0.1:$XP"
}
PT_BEFORE_CTL=relay
pt_cluster
cut() {
  [ "$L" = 1 ] || not_ok "c1 (behind the relay) leads when the cut begins (c$L does)"
  touch "$T/cut"
  wait_for '[ "$(status 2 leader)" = True ]' 3
  TAKE=$(awk -v e="$E1" '$3 > e { print $1; exit }' "$T/obs2.log")
  E2=$(status 2 epoch)
}
pt_run "$CUT_S" cut 'rm -f "$T/cut"'
echo "# c2 took over at epoch ${E2:-?}: its first message to a node" \
  "$(echo "$P0 ${TAKE:-0}" | awk '{ printf "%.2f", $2 - $1 }') s after the cut"
check "c2 led within 2 s of the cut, epoch $E1 -> ${E2:-none}" \
  '[ -n "$TAKE" ] && [ "${E2:-0}" -gt "$E1" ] &&
   awk -v a="$P0" -v b="$TAKE" "BEGIN { exit !(b - a <= 2) }"'
check "c1 sent nothing at its epoch $E1 after c2's first message" \
  '[ "$(pt_msgs_after obs1 "${TAKE:-0}" "$E1")" = 0 ]'
check "c1 knows it was deposed" 'grep -q "no longer leading" "$T"/c1.*.log'
check "the node follows c2's epoch" '[ "$(nstat bqos_ctl_epoch)" = "$E2" ]'
it_end pt_logs
