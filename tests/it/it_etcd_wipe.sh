#!/bin/sh
# it_etcd_wipe.sh - issue 26 case 1: etcd restarted with an empty data directory must not strand the nodes: they follow the new leader again, a `set` after the wipe is applied, and a limited bucket holds 1.05 x its limit in every 1 s period throughout.
#
# A real etcd (data in /dev/shm when it can), two bqos-controllers (--etcd,
# period 1 s in K=2 intervals), two bqos-nodes in front of one memcached,
# each taking both controllers, and bqos-load on bucket red (limit 200)
# through both nodes.  etcd's revision is first moved past 60, so that the
# leader's epoch is well above what an empty etcd starts from.  Then etcd
# is stopped, its data directory wiped and it is started again (revisions
# from 1 again).  Then everything is restarted: both controllers killed,
# etcd wiped again and one controller started afresh, knowing no epoch.
# Required (docs/controller.md "Epochs"):
#   - within WIPE_BOUND s of etcd's restart both nodes follow a leader
#     (state "following", its epoch above every epoch before the wipe);
#   - `bqos-ctl set red --limit 100` after the wipe is acknowledged and
#     applied at the nodes: red's IOs per node period, summed over both
#     nodes, <= 1.05 x 100 from the second period after the set;
#   - in every period before, <= 1.05 x 200.
#   - after the restart of everything, within WIPE_BOUND s of the fresh
#     controller's start both nodes follow it, above their epoch before.
# On the code before the fix the nodes ignore the new leader (its epoch,
# the new etcd's create_revision, is below theirs): they stay in static
# fallback at the old grant, and the set is acknowledged but never applied.
. "$(dirname "$0")/../../scripts/lib.sh"
it_begin it_etcd_wipe etcd memcached bqos-controller bqos-node bqos-ctl bqos-load
WIPE_BOUND=${WIPE_BOUND:-8}
K=2
it_etcd
it_etcd_start
# 60 writes: the first leader's epoch (its key's create_revision) is > 60
python3 - "$ETCD" <<'PY'
import base64, json, sys, urllib.request
for i in range(60):
    b = json.dumps({"key": base64.b64encode(b"/it/bump").decode(),
                    "value": base64.b64encode(str(i).encode()).decode()}).encode()
    urllib.request.urlopen(urllib.request.Request(sys.argv[1] + "/v3/kv/put", b), timeout=5).read()
PY

it_ha_pair '{"buckets":[{"name":"red","reservation":50,"limit":200}]}' --intervals "$K" --lease-ttl 2 \
  --etcd-timeout 250ms
ctl_start 1
ctl_start 2
wait_for '[ -n "$(leader_now)" ]' 10
E0=$(status "$(leader_now)" epoch)
check "a leader before the wipe, epoch $E0 > 60" '[ "${E0:-0}" -gt 60 ]'

next_port; MP=$PORT
start_memcached "$MP" "$T/memcached.log"
for i in 1 2; do
  it_ha_node "s$i" "$T/node$i.log"
  eval "NP$i=\$NODE_PORT"
done
# nstat I NAME: node sI's `stats` value NAME
nstat() { eval "np=\$NP$1"; mc_ask "$np" 'stats\r\n' 2 | tr '|' '\n' | awk -v k="$2" '$2 == k { print $3 }'; }
# follows I E: node sI follows a leader at epoch >= E
follows() {
  [ "$(nstat "$1" bqos_ctl_state)" = following ] && fe=$(nstat "$1" bqos_ctl_epoch) &&
    [ "${fe:-0}" -ge "$2" ]
}
wait_for 'follows 1 "$E0" && follows 2 "$E0"' 10
check "both nodes follow the leader (epoch $E0)" 'follows 1 "$E0" && follows 2 "$E0"'

cat >"$T/scen.json" <<EOF
{"duration": 24, "period": 1, "intervals": $K, "warmup_periods": 0, "seed": 1, "capacity": 20000,
 "workload": {"outstanding": 8, "timeout_ms": 10000, "preload": 200},
 "servers": [{"name": "s1", "address": "127.0.0.1:1"}, {"name": "s2", "address": "127.0.0.1:1"}],
 "buckets": [{"name": "red", "reservation": 50, "limit": 200, "servers": ["s1", "s2"]}]}
EOF
"$BIN/bqos-load" -q -s "s1=127.0.0.1:$NP1,127.0.0.1:$MP" -s "s2=127.0.0.1:$NP2,127.0.0.1:$MP" \
  -o "$T/load" -d 24 "$T/scen.json" >"$T/load.table" 2>"$T/load.log" &
LOAD_PID=$!
for i in 1 2; do
  eval "np=\$NP$i"
  python3 "$HERE/node_periods.py" "$np" 26 red >"$T/p$i.periods" 2>/dev/null &
  eval "POLL$i=\$!"
done
sleep 4

# 1. The wipe: etcd stopped, its data gone, started again empty.
EB=$(status "$(leader_now)" epoch)
[ "${EB:-0}" -gt "$E0" ] || EB=$E0
it_etcd_wipe
W0=$(date +%s.%N)
# wait_follow E: until both nodes follow an epoch above E, at most
# WIPE_BOUND s from W0 (by the clock: each try asks both nodes, which
# takes a while)
wait_follow() {
  until follows 1 $(($1 + 1)) && follows 2 $(($1 + 1)); do
    [ "$(echo "$W0 $(date +%s.%N)" | awk -v b="$WIPE_BOUND" '{ print ($2 - $1 > b) }')" = 1 ] && break
    sleep 0.1
  done
}
wait_follow "$EB"
W1=$(date +%s.%N)
L=$(leader_now)
E1=$(status "${L:-1}" epoch)
echo "# after the wipe: leader c${L:-?} at epoch ${E1:-?} (before: $EB); nodes at epochs" \
  "$(nstat 1 bqos_ctl_epoch) and $(nstat 2 bqos_ctl_epoch), states $(nstat 1 bqos_ctl_state)" \
  "and $(nstat 2 bqos_ctl_state), $(echo "$W0 $W1" | awk '{ printf "%.1f", $2 - $1 }') s after etcd's restart"
check "within $WIPE_BOUND s of the wipe both nodes follow a leader above epoch $EB" \
  'follows 1 $((EB + 1)) && follows 2 $((EB + 1))'
# agree: a leader, and both nodes follow its epoch (E1).  Right after the
# wipe the leader may still raise its epoch once over what a late report
# says the nodes follow: a few seconds to settle.
agree() {
  L=$(leader_now)
  [ -n "$L" ] && E1=$(status "$L" epoch) &&
    [ "$(nstat 1 bqos_ctl_epoch)" = "$E1" ] && [ "$(nstat 2 bqos_ctl_epoch)" = "$E1" ]
}
wait_for agree 3
check "the leader's epoch is what the nodes follow (${E1:-none})" agree

# A change after the wipe reaches the nodes.
ctl --endpoint "$AD1,$AD2" set red --limit 100 >"$T/set.out" 2>&1; rc=$?
S0=$(date +%s.%N)
check "set red --limit 100 after the wipe is acknowledged (rc $rc)" '[ $rc = 0 ]'
wait "$LOAD_PID"
wait "$POLL1" "$POLL2"
# red per node period, both nodes summed: "PERIOD SUM END" (END: the latest
# wall time one of them saw the period end); periods with under 20 IOs
# (the load's start and end) are left out
awk '{ s[$1] += $2; if ($4 > e[$1]) e[$1] = $4 } END { for (p in s) if (s[p] >= 20) print p, s[p], e[p] }' \
  "$T/p1.periods" "$T/p2.periods" | sort -n >"$T/red.periods"
BEFORE=$(awk -v s="$S0" '$3 < s + 1 { printf "%s ", $2 }' "$T/red.periods")
AFTER=$(awk -v s="$S0" '$3 >= s + 2 { printf "%s ", $2 }' "$T/red.periods")
echo "# red per 1 s period, both nodes: until the set (limit 200): $BEFORE; from the second" \
  "period after it (limit 100): $AFTER"
check "red <= 1.05 x 200 in every period until the set ($BEFORE)" \
  '[ $(echo $BEFORE | wc -w) -ge 5 ] && [ "$(echo $BEFORE | tr " " "\n" | awk "\$1 > 210" | wc -l)" = 0 ]'
check "the set is applied at the nodes: red <= 1.05 x 100 in every period after it ($AFTER)" \
  '[ $(echo $AFTER | wc -w) -ge 3 ] && [ "$(echo $AFTER | tr " " "\n" | awk "\$1 > 105" | wc -l)" = 0 ]'
check "and red is served after the set (a period >= 80)" \
  '[ "$(echo $AFTER | tr " " "\n" | awk "\$1 >= 80" | wc -l)" -ge 1 ]'

# 2. Everything restarted: both controllers killed, etcd wiped, one
#    controller started afresh.  It knows no epoch and no node, wins the
#    empty etcd near revision 2, and the nodes ignore its unknown_node
#    answers (their epoch is above its own): it must learn their epoch from
#    their reports and lead above it.
EB=$(nstat 1 bqos_ctl_epoch)
kill -9 "$PID1" "$PID2" 2>/dev/null
it_etcd_wipe
ctl_start 1
W0=$(date +%s.%N)
wait_follow "${EB:-0}"
W1=$(date +%s.%N)
echo "# all restarted: c1 afresh at epoch $(status 1 epoch) (floor raises" \
  "$(jget "$T/st1.json" "d['ha']['floor_raises']")); nodes at epochs $(nstat 1 bqos_ctl_epoch) and" \
  "$(nstat 2 bqos_ctl_epoch) (before: $EB), $(echo "$W0 $W1" | awk '{ printf "%.1f", $2 - $1 }') s after its start"
check "a fresh controller on a wiped etcd: within $WIPE_BOUND s both nodes follow it above epoch $EB" \
  'follows 1 $((EB + 1)) && follows 2 $((EB + 1)) && [ "$(nstat 1 bqos_ctl_epoch)" = "$(status 1 epoch)" ]'

it_end 'for f in "$T"/c*.log "$T"/node*.log; do echo "== $f"; grep -E "epoch|leading|floor|fall" "$f" | tail -15; done'
