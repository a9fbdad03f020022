#!/bin/sh
# it_ctrl_starved.sh - the partition suite's "controller starved" case (issue 26): the leader's CPU starved by a cgroup (QUOTA_US of CPU per PERIOD_US: 1 ms per 100 ms by default) for STARVE_S s; its rounds and etcd polls go late: a limited bucket holds 1.05 x its limit in every 1 s window of an independent counting client, the node does not flap, at most one election (a clean hand-over), and a `set` acknowledged before survives.
#
# A real etcd, two bqos-controllers (--etcd, --lease-ttl 2s, 1 s periods
# in 5 intervals), one bqos-node over memcached taking both, a raw protocol
# node on each and bqos-load on red (reservation 50, limit 200) far above
# its limit, its windows aligned with the controller's periods
# (partition_lib.sh).  1.5 s into the load `bqos-ctl set red --limit 150`
# (acknowledged); 1.5 s later the leader goes into a cgroup of the CPU
# controller (v2 cpu.max, else v1 cpu.cfs_quota_us) with QUOTA_US per
# PERIOD_US (1000 per 100000: 1% of a CPU, throttled up to 99 ms at a time)
# for STARVE_S s (5), then back.  Needs root and a cgroup fs (else skipped).
# Required (docs/controller.md "Faults"):
#   - red <= 1.05 x 200 in every client window before the set and <= 1.05 x
#     150 from the second window after it to the end: late rounds and a
#     deposed leader lift no limit;
#   - at most one election from the starving on (the standby's takeover, or
#     none: the leader keeps up), and at most one node fallback;
#   - after the starving the node follows a leader, red is served (a window
#     >= 0.8 x 150 in the last three), and red's limit is 150 in both
#     controllers' tables.
# About 22 s.  The soak's partition pass (tests/soak/partition.sh) runs it
# with other quotas and for longer.
. "$(dirname "$0")/../../scripts/lib.sh"
it_begin it_ctrl_starved etcd memcached python3 bqos-controller bqos-node bqos-ctl bqos-load
. "$HERE/partition_lib.sh"
QUOTA_US=${QUOTA_US:-1000}
PERIOD_US=${PERIOD_US:-100000}
STARVE_S=${STARVE_S:-5}
DUR=$((STARVE_S + 7))
pt_cgroup_new "it_ctrl_starved.$$" ||
  { echo "it_ctrl_starved: no cgroup of the CPU controller to make (root, cgroup fs); skipped"; exit 0; }
PT_ON_EXIT=pt_cgroup_rm
pt_cluster '{"buckets":[{"name":"red","reservation":50,"limit":200}]}' --intervals 5 --lease-ttl 2 \
  --etcd-timeout 250ms

pt_load "$DUR"
sleep 1.5
ctl --endpoint "$AD1,$AD2" set red --limit 150 >"$T/set.out" 2>&1; rc=$?
S0=$(now)
check "set red --limit 150 at the leader is acknowledged (rc $rc)" '[ $rc = 0 ]'
sleep 1.5

L=$(leader_now); L=${L:-1}
E1=$(status "$L" epoch)
EL0=$(grep -h "leading with epoch" "$T"/c*.log | wc -l)
F0=$(nstat bqos_ctl_fallbacks)
eval "pid=\$PID$L"
CPU0=$(awk '{ print $14 + $15 }' "/proc/$pid/stat")
pt_starve "$pid" "$QUOTA_US" "$PERIOD_US" || not_ok "c$L put in the cgroup $PT_CG"
P0=$(now)
sleep "$STARVE_S"
pt_unstarve "$pid"
C0=$(now)
CPU1=$(awk '{ print $14 + $15 }' "/proc/$pid/stat")
wait_for '[ "$(nstat bqos_ctl_state)" = following ]' 4
BACK=$(echo "$C0 $(now)" | awk '{ printf "%.1f", $2 - $1 }')
[ "$(nstat bqos_ctl_state)" = following ] || BACK=never
wait "$LOAD_PID"
END=$(now)
EL1=$(grep -h "leading with epoch" "$T"/c*.log | wc -l)
F1=$(nstat bqos_ctl_fallbacks)
LATE=$(sed -n 's/.* begins \([0-9]*\) ms after its boundary.*/\1/p' "$T"/c$L.*.log | sort -n | tail -1)
echo "# c$L (epoch $E1) starved $STARVE_S s at $QUOTA_US us per $PERIOD_US us, load $(cut -d' ' -f1 /proc/loadavg):" \
  "it used $((CPU1 - CPU0)) ticks; its latest round began ${LATE:-0} ms after its boundary;" \
  "$((EL1 - EL0)) elections, $((F1 - F0)) node fallbacks; the node follows $BACK s after the end;" \
  "leader now c$(leader_now) at epoch $(status "$(leader_now)" epoch)"
S1=$(echo "$S0" | awk '{ printf "%.3f", $1 + 1 }')
BEFORE=$(pt_windows 0 "$S1")
AFTER=$(pt_windows "$S1" "$END")
TAIL=$(echo $AFTER | awk '{ for (i = NF - 2; i <= NF; i++) printf "%s ", $i }')
echo "# red per client 1 s window (W:IOs), limit 200 until the set: $BEFORE"
echo "# limit 150 from the window after the set (starved $P0 to $C0): $AFTER"
check "red <= 1.05 x 200 in every window before the set ($BEFORE)" \
  '[ "$(echo $BEFORE | wc -w)" -ge 1 ] && [ "$(pt_over 200 "$BEFORE")" = 0 ]'
check "red <= 1.05 x 150 in every window from the one after the set, through the starving ($AFTER)" \
  '[ "$(echo $AFTER | wc -w)" -ge $((DUR - 3)) ] && [ "$(pt_over 150 "$AFTER")" = 0 ]'
check "at most one election from the starving on ($((EL1 - EL0)))" '[ $((EL1 - EL0)) -le 1 ]'
check "at most one node fallback ($((F1 - F0)))" '[ $((F1 - F0)) -le 1 ]'
check "after the starving the node follows a leader ($BACK s)" '[ "$BACK" != never ]'
check "and red is served (a window >= 120 in the last three: $TAIL)" \
  '[ "$(echo "$TAIL" | tr " " "\n" | awk -F: "NF == 2 && \$2 >= 120" | wc -l)" -ge 1 ]'
check "the acknowledged set survives: red's limit is 150 at c1 and c2 ($(pt_limit_ctl 1), $(pt_limit_ctl 2))" \
  '[ "$(pt_limit_ctl 1)" = 150 ] && [ "$(pt_limit_ctl 2)" = 150 ]'

it_end 'for f in "$T"/c*.log "$T"/node.log; do echo "== $f"; grep -E "leading|etcd|fall|late|follow|set" "$f" | tail -15; done'
