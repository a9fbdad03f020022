#!/bin/sh
# it_etcd_paused.sh - the partition suite's "etcd paused" case (issue 26): etcd stopped (SIGSTOP) for PAUSE_S s, longer than the controllers' lease, then continued: the leader stops pushing by its own clock, the node falls back static on its grant and lease, and one election follows; a limited bucket holds 1.05 x its limit in every 1 s window of an independent counting client, and a `set` acknowledged before survives.
#
# A real etcd, two bqos-controllers (--etcd, --lease-ttl 2s, 1 s periods in
# 5 intervals), one bqos-node over memcached taking both, a raw protocol
# node on each and bqos-load on red (reservation 50, limit 200), its
# windows aligned with the controller's periods (partition_lib.sh).
# `set red --limit 150` (acknowledged), then etcd stopped for PAUSE_S s (4).
# Required (docs/controller.md "Faults"; partition_lib.sh pt_run's common
# checks): red <= 1.05 x 200 per window before the set, <= 1.05 x 150 from
# the second window after it to the end (static fallback included); the
# leader stops sending within its lease: no message of any controller
# reaches a node from 2 s after the pause began until it ends; at most one
# election and one node fallback; a leader again and the node follows it
# within 6 s of etcd's return; red served again; red's limit 150 in both
# tables.  About 22 s.
. "$(dirname "$0")/../../scripts/lib.sh"
it_begin it_etcd_paused etcd memcached python3 bqos-controller bqos-node bqos-ctl bqos-load
. "$HERE/partition_lib.sh"
PAUSE_S=${PAUSE_S:-4}
pt_cluster
pt_run "$PAUSE_S" 'kill -STOP "$ETCD_PID"' 'kill -CONT "$ETCD_PID"'
SILENT=$(awk -v a="$P0" -v b="$C0" '$1 > a + 2 && $1 < b { n++ } END { print n + 0 }' "$T"/obs1.log "$T"/obs2.log)
STATIC=$(grep -c "no controller heard" "$T/node.log")
echo "# while etcd was stopped: $SILENT messages to the raw nodes from 2 s in; the node fell back $STATIC times"
check "no controller sent a node anything from 2 s into the pause to its end ($SILENT)" '[ "$SILENT" = 0 ]'
it_end pt_logs
