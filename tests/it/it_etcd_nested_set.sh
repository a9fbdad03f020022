#!/bin/sh
# it_etcd_nested_set.sh - a child bucket set at the leader with etcd (one key per bucket) is acknowledged and followed by the standby (review of 8 Dec: both refused it, a table of the bucket alone lacking its parent).
#
# A real etcd; two controllers (cluster "it") with a table of a parent "top"
# and its child "kid".  `bqos-ctl set kid` and `set kid2 --parent top` at the
# leader are acknowledged (before: "internal: out of memory"), etcd holds
# each in its key with its parent, and the standby follows both by their
# keys (its log: "set from etcd") with the parent kept.
. "$(dirname "$0")/../../scripts/lib.sh"
it_begin it_etcd_nested_set etcd bqos-controller bqos-ctl
it_etcd
it_etcd_start
# etcdkv KEY: KEY's value in etcd ("none" if absent)
etcdkv() { etcd_get "$1" none; }
jv() { python3 -c "import json,sys; d=json.loads(sys.argv[1]); print($2)" "$1" 2>/dev/null; }
logs() { for f in "$T"/c*.log; do echo "== $f"; grep -v "debug: round" "$f" | tail -15; done; }

it_ha_pair '{"buckets":[{"name":"top","reservation":100,"limit":1000},
  {"name":"kid","reservation":10,"limit":500,"parent":"top"}]}' --lease-ttl 2
ctl_start 1
wait_for '[ "$(status 1 leader)" = True ]' 15
ctl_start 2
wait_for 'grep -q "bucket table from etcd (revision" "$T"/c2.*.log 2>/dev/null' 15
# parentof I NAME: NAME's parent in cI's status
parentof() {
  eval "ad=\$AD$1"
  "$BIN/bqos-ctl" --timeout 3000 --endpoint "$ad" --json status --bucket "$2" >"$T/p$1.json" 2>/dev/null &&
    jget "$T/p$1.json" 'd["bucket"].get("parent")'
}
check "set kid (a child) at the leader is acknowledged" \
  '"$BIN/bqos-ctl" --timeout 5000 --endpoint "$AD1" set kid --reservation 20 --limit 400 >"$T/set1.out" 2>&1'
check "set kid2 --parent top at the leader is acknowledged" \
  '"$BIN/bqos-ctl" --timeout 5000 --endpoint "$AD1" set kid2 --reservation 5 --parent top >"$T/set2.out" 2>&1'
check "etcd holds kid and kid2 in their keys with their parent" \
  '[ "$(jv "$(etcdkv /bqos/it/b/kid)" "d[\"reservation\"]")" = 20 ] &&
   [ "$(jv "$(etcdkv /bqos/it/b/kid)" "d[\"parent\"]")" = top ] &&
   [ "$(jv "$(etcdkv /bqos/it/b/kid2)" "d[\"parent\"]")" = top ]'
wait_for 'grep -q "bucket kid2 set from etcd" "$T"/c2.*.log 2>/dev/null' 5
check "the standby followed both by their keys, the parent kept" \
  'grep -q "bucket kid set from etcd" "$T"/c2.*.log && grep -q "bucket kid2 set from etcd" "$T"/c2.*.log &&
   [ "$(parentof 2 kid2)" = top ] && [ "$(parentof 2 kid)" = top ]'
it_end logs
