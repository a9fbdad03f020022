#!/bin/sh
# it_etcd_failover.sh - controller failover through a real etcd on free loopback ports: one leader, epochs, standby silence, bucket table through etcd, kill -9 and SIGSTOP of the leader, restart as standby.
#
# Two bqos-controllers (--etcd, --lease-ttl 2s, period 1 s in K=2
# intervals of 500 ms; K=5 gives the default 200 ms) and raw protocol nodes
# (tests/it/ha_observer.py, a pyzmq DEALER per controller) that log every
# message with its epoch.  When bqos-node takes a list of controllers
# (--controller A,B in its --help), a real node and memcached join and must
# follow the new leader, under load (bqos-load) through the kill.
#
# The takeover must reach a node within 2 intervals (the issue's bound).
# It takes 1-1.75 intervals plus etcd's and the hosts' delays (up to 180 ms
# measured at load 16-27 on the 2-core VM, docs/performance.md): with 200 ms
# intervals 2 intervals leave 50-200 ms for those delays, too little on a
# loaded machine; with 500 ms they leave 125-500 ms.
. "$(dirname "$0")/../../scripts/lib.sh"
it_begin it_etcd_failover
HERE=$(cd "$(dirname "$0")" && pwd)

command -v etcd >/dev/null 2>&1 || { echo "no etcd (scripts/deps.sh installs etcd-server)"; exit 1; }
PY=python3
$PY -c "import zmq" 2>/dev/null || PY=/usr/bin/python3
$PY -c "import zmq" 2>/dev/null || { echo "no pyzmq (scripts/deps.sh installs python3-zmq)"; exit 1; }

# etcd with a short election timeout, so that it grants short leases.  The
# lease is 2 s (1 s works on a quiet machine, docs/performance.md, but a
# busy one delays etcd's answers past its margin).
TTL=${TTL:-2}
K=${K:-2}
IV=$(echo "$K" | awk '{ printf "%.3f", 1 / $1 }')
# Its data in memory when /dev/shm exists: fsyncs on a busy disk would
# otherwise make its answers late (the controllers allow 100 ms).
it_etcd
it_etcd_start

it_ha_pair '{"buckets":[{"name":"red","reservation":100,"limit":200}]}' --intervals "$K" --lease-ttl "$TTL" \
  --etcd-timeout 250ms
observe() { # observe I NAME: a raw node on cI's node endpoint, log in $T/NAME.log
  eval "ls=\$LS$1"
  spawn "$T/$2.err" "$PY" "$HERE/ha_observer.py" "$ls" "$2" "$T/$2.log" 60
}
# last_epoch NAME: the epoch of NAME's last message; msgs_after NAME T: its
# messages after wall-clock time T; first_epoch_after NAME E: wall time of
# its first message with an epoch above E.
last_epoch() { tail -1 "$T/$1.log" 2>/dev/null | awk '{ print $3 }'; }
msgs_after() { awk -v t="$2" '$1 > t { n++ } END { print n + 0 }' "$T/$1.log" 2>/dev/null; }
first_epoch_after() { awk -v e="$2" '$3 > e { print $1; exit }' "$T/$1.log" 2>/dev/null; }
now() { date +%s.%N; }
logs() { for f in "$T"/c*.log "$T"/obs*.log; do echo "== $f"; tail -25 "$f"; done; }

# 1. One leader: c1 starts first and leads; c2 is a standby that knows it.
ctl_start 1
wait_for '[ "$(status 1 leader)" = True ]' 10
check "c1 leads" '[ "$(status 1 leader)" = True ]'
ctl_start 2
wait_for '[ "$(status 2 leader_id)" = c1 ]' 10
E1=$(status 1 epoch)
check "c2 is a standby that names c1 (epoch $E1)" \
  '[ "$(status 2 leader)" = False ] && [ "$(status 2 epoch)" = "$E1" ] && [ "$E1" -gt 0 ]'
check "bqos-ctl status over both endpoints shows the leader" \
  'ctl --endpoint "$AD2,$AD1" status | grep -q "controller c1: leader, epoch $E1"'

# 2. The leader stamps its epoch; the standby says nothing to nodes.
observe 1 obs1; observe 2 obs2
wait_for '[ -s "$T/obs1.log" ] && [ "$(wc -l <"$T/obs1.log")" -ge 5 ]' 5
check "the leader welcomes and pushes with epoch $E1" \
  'grep -q " welcome $E1 " "$T/obs1.log" && [ "$(last_epoch obs1)" = "$E1" ]'
check "every message of the leader carries its epoch" \
  '[ "$(awk -v e="$E1" "\$3 != e" "$T/obs1.log" | wc -l)" = 0 ]'
check "the standby sends nodes nothing" '[ ! -s "$T/obs2.log" ]'

# 3. The bucket table lives in etcd: set through the standby's endpoint
#    (bqos-ctl goes on to the leader), both controllers agree, both files
#    are the exported backup.
ctl --endpoint "$AD2" set blue --reservation 10 >/dev/null 2>"$T/nl.err"; rc=$?
check "a standby refuses set with not_leader naming c1 (rc $rc)" \
  '[ $rc = 1 ] && grep -q "not_leader.*leader is c1" "$T/nl.err"'
ctl --endpoint "$AD2,$AD1" set blue --reservation 10 --limit 50 >"$T/set.out" 2>&1; rc=$?
check "set through the standby's endpoint reaches the leader (rc $rc)" \
  '[ $rc = 0 ] && grep -q "blue created" "$T/set.out"'
wait_for 'ctl --endpoint "$AD2" buckets | grep -q "^blue"' 3
ctl --endpoint "$AD1" --json buckets >"$T/bk1.json"; ctl --endpoint "$AD2" --json buckets >"$T/bk2.json"
check "both controllers hold the same table" \
  'cmp -s "$T/bk1.json" "$T/bk2.json" && grep -q blue "$T/bk1.json"'
check "both bucket files (with their journals: a change in place is a line) hold it" \
  '[ "$(python3 "$(dirname "$0")/filed_table.py" "$T/b1.json" blue limit)" = 50 ] &&
   [ "$(python3 "$(dirname "$0")/filed_table.py" "$T/b2.json" blue limit)" = 50 ]'

# From here on the roles are read, not assumed: on a busy machine etcd may
# answer late enough for a leadership to move between two steps.
# leader_now: 1 or 2, the controller that leads (waits up to 5 s for one).
leader_now() {
  wait_for '[ "$(status 1 leader)" = True ] || [ "$(status 2 leader)" = True ]' 5
  if [ "$(status 1 leader)" = True ]; then echo 1; else echo 2; fi
}
other() { if [ "$1" = 1 ]; then echo 2; else echo 1; fi; }

# SIGHUP at the leader imports its file into etcd; the standby follows.
L=$(leader_now); S=$(other "$L")
# (the edit is of the table the file holds with its journal: blue is a
# line of the journal, and a hand-edited file loads without it)
python3 "$HERE/filed_table.py" "$T/b$L.json" >"$T/edit.json"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); d['buckets'].append({'name':'green','reservation':5}); json.dump(d, open(sys.argv[2],'w'))" "$T/edit.json" "$T/b$L.json"
eval "kill -HUP \$PID$L"
eval "ads=\$AD$S"
wait_for 'ctl --endpoint "$ads" buckets | grep -q "^green"' 3
check "SIGHUP at the leader (c$L) reaches the standby through etcd" \
  'ctl --endpoint "$ads" buckets | grep -q "^green" &&
   [ "$(python3 "$(dirname "$0")/filed_table.py" "$T/b$S.json" green reservation)" = 5 ]'

# 3b. With nodes that take every controller: a real bqos-node (memcached
#     behind it) reports to both and follows the leader.
NODE_HA=0
"$BIN/bqos-node" --help 2>&1 | grep -q -- "--controller ENDPOINT\[," && NODE_HA=1
if [ $NODE_HA = 1 ]; then
  next_port; MP=$PORT
  start_memcached "$MP" "$T/memcached.log"
  it_ha_node s1 "$T/node.log"
  NP=$NODE_PORT
  # node_up I: cI lists s1 as up.
  node_up() { status "$1" nodes >/dev/null; jget "$T/st$1.json" \
    "[n['state'] for n in d['nodes'] if n['name'] == 's1'][0]" | grep -q up; }
  wait_for 'node_up 1 && node_up 2' 5
  check "a real node reports to the leader and to the standby" 'node_up 1 && node_up 2'
  check "it follows the leader's epoch" \
    'wait_for "grep -q \"following .*epoch $(status "$(leader_now)" epoch)\" \"$T/node.log\"" 3'
else
  echo "# bqos-node takes one controller: the real node's part is skipped"
fi

# 4. kill -9 the leader mid-period: the standby deposes it (its heartbeat
#    in etcd is stale for 1.25 intervals), leads with a higher epoch and
#    pushes at once: a node hears the new epoch within 2 intervals.  With
#    the real node under load: bucket red (limit 200/s) stays within 1.05 x
#    its limit in every 1 s period (the periods below its reservation are
#    counted, not checked: on a machine at load 15, with etcd answering
#    late, there were two).
if [ $NODE_HA = 1 ]; then
  cat >"$T/scen.json" <<EOF
{"duration": 7, "period": 1, "intervals": $K, "warmup_periods": 0, "seed": 1, "capacity": 20000,
 "workload": {"outstanding": 8, "timeout_ms": 10000, "preload": 200},
 "servers": [{"name": "s1", "address": "127.0.0.1:1"}],
 "buckets": [{"name": "red", "reservation": 100, "limit": 200, "servers": ["s1"]}]}
EOF
  "$BIN/bqos-load" -q -s "s1=127.0.0.1:$NP,127.0.0.1:$MP" -o "$T/load" -d 7 "$T/scen.json" \
    >"$T/load.table" 2>"$T/load.log" &
  LOAD_PID=$!
  python3 "$HERE/node_periods.py" "$NP" 9 red >"$T/load.periods" 2>/dev/null &
  POLL_PID=$!
  sleep 2
fi
sleep 0.$(( $(od -An -N1 -tu1 /dev/urandom | tr -d ' ') % 9 + 1 )) # anywhere in a period
L=$(leader_now); S=$(other "$L")
E1=$(status "$L" epoch)
# the periods the leader judged for red until now: its history (periods)
hist() { eval "ad=\$AD$1"; ctl --endpoint "$ad" --json history --periods 64 red >"$T/$2.json" 2>/dev/null &&
  jget "$T/$2.json" "' '.join(str(p['period']) for p in d['buckets'][0]['periods'])"; }
[ $NODE_HA = 1 ] && HB=$(hist "$L" hist_before)
K0=$(now)
eval "kill -9 \$PID$L"
wait_for '[ -n "$(first_epoch_after obs$S "$E1")" ]' 6
K1=$(first_epoch_after "obs$S" "$E1")
KT=$(awk -v e="$E1" '$3 > e && $2 == "tokens" { print $1; exit }' "$T/obs$S.log")
E2=$(status "$S" epoch)
TAKE=$(echo "$K0 ${K1:-0}" | awk '{ printf "%.3f", $2 - $1 }')
echo "takeover after kill -9 of c$L: ${TAKE} s to the first message of epoch $E2 at a node," \
  "$(echo "$K0 ${KT:-0}" | awk '{ printf "%.3f", $2 - $1 }') s to its first tokens" \
  "(intervals ${IV} s, load $(cut -d' ' -f1 /proc/loadavg))"
check "c$S leads with a higher epoch ($E1 -> $E2)" \
  '[ "$(status "$S" leader)" = True ] && [ "$E2" -gt "$E1" ]'
check "c$S reached its node within 2 intervals (${TAKE} s <= 2 x $IV s)" \
  'awk -v t="$TAKE" -v i="$IV" "BEGIN { exit !(t > 0 && t <= 2 * i) }"'
check "it deposed c$L for a stale heartbeat, not at lease expiry" \
  'grep -q "wrote no heartbeat for" "$T"/c$S.*.log'
check "nothing from the dead leader after the kill" '[ "$(msgs_after "obs$L" "$K0")" = 0 ]'
if [ $NODE_HA = 1 ]; then
  check "the real node follows c$S's epoch $E2" \
    'wait_for "grep -q \"following .*epoch $E2\" \"$T/node.log\"" 3'
  HA=$(hist "$S" hist_after)
  echo "# red's history at c$L before the kill: $HB; at c$S after: $HA;" \
    "$(python3 -c 'import json, sys
o = lambda f: {p["period"]: (p["reservation"], p["held_at_limit"]) for p in json.load(open(f))["buckets"][0]["periods"]}
a, b = o(sys.argv[1]), o(sys.argv[2]); c = [k for k in a if k in b]
print("%d of %d common periods judged alike" % (sum(a[k] == b[k] for k in c), len(c)))' "$T/hist_before.json" "$T/hist_after.json" 2>/dev/null)"
  check "c$S's history holds the periods c$L judged before the kill" \
    'H1=$(echo $HB | cut -d" " -f1); H2=$(echo $HB | cut -d" " -f2); [ -n "$H2" ] && [ "$H1" != "$H2" ] &&
     echo " $HA " | grep -q " $H1 " && echo " $HA " | grep -q " $H2 "'
  check "c$S pushes it tokens" \
    '[ "$(status "$S" stats >/dev/null; jget "$T/st$S.json" "d[\"stats\"][\"push_tokens\"]")" -gt 0 ]'
  wait "$LOAD_PID"
  LEND=$(now)
  wait "$POLL_PID"
  # the node's periods that ran entirely under load: not the first (the
  # load starts in it), nor those after its traffic stopped (it exits after
  # writing its results: trailing periods with under 100 IOs; the kill is
  # 2-3 s into a 7 s load, so they are not the failover's)
  R=$(awk -v e="$LEND" 'NR > 1 && $4 <= e { v[++n] = $2 }
    END { while (n > 0 && v[n] < 100) n--; for (i = 1; i <= n; i++) printf "%s ", v[i] }' \
    "$T/load.periods")
  echo "# red per 1 s period through the kill (limit 200, reservation 100): $R" \
    "($(echo $R | tr " " "\n" | awk "NF && \$1 < 100" | wc -l) below the reservation)"
  check "red within 1.05 x its limit in every 1 s period through the failover ($R)" \
    '[ $(echo $R | wc -w) -ge 3 ] && [ "$(echo $R | tr " " "\n" | awk "\$1 > 210" | wc -l)" = 0 ]'
  check "and served: the load reached the limit" \
    '[ "$(echo $R | tr " " "\n" | awk "\$1 >= 190" | wc -l)" -ge 1 ]'
fi

# 5. The old leader restarts and joins as a standby.
ctl_start "$L"
wait_for '[ "$(status "$L" leader_id)" = "c$S" ]' 5
check "restarted c$L is a standby naming c$S" \
  '[ "$(status "$L" leader)" = False ] && [ "$(status "$L" epoch)" -ge "$E2" ]'
observe "$L" obsR
sleep 1
# (only a leadership of its own, with a higher epoch, would let it speak;
# on a busy machine the lease may move to it in this second)
check "the new standby sends nodes nothing" \
  '[ "$(awk -v e="$E2" "\$3 <= e" "$T/obsR.log" 2>/dev/null | wc -l)" = 0 ]'

# 6. Pause the leader for 5 s: the standby takes over; after SIGCONT the old
#    leader notices it lost the lease by its own clock and sends nothing more.
L=$(leader_now); S=$(other "$L")
E2=$(status "$L" epoch)
wait_for '[ "$(wc -l <"$T/obs$L.log")" -ge 3 ]' 3
eval "kill -STOP \$PID$L"
P0=$(now)
wait_for '[ "$(status "$S" leader)" = True ]' 6
E3=$(status "$S" epoch)
check "c$S leads while c$L is paused ($E2 -> $E3)" '[ "$E3" -gt "$E2" ]'
elapsed=$(echo "$P0 $(now)" | awk '{ printf "%d", 5 - ($2 - $1) + 0.5 }')
[ "$elapsed" -gt 0 ] && sleep "$elapsed"
C0=$(now)
eval "kill -CONT \$PID$L"
sleep 1.5
check "the paused leader sent nothing after SIGCONT" '[ "$(msgs_after "obs$L" "$C0")" = 0 ]'
check "it knows it lost the lease" 'grep -q "no longer leading" "$T"/c$L.*.log'
check "and now names c$S as the leader" \
  '[ "$(status "$L" leader)" = False ] && [ "$(status "$L" leader_id)" = "c$S" ] && [ "$(status "$L" epoch)" -ge "$E3" ]'
check "no message of an old epoch after SIGCONT" \
  '[ "$(awk -v e="$E3" "\$3 != 0 && \$3 < e && \$1 > $C0" "$T"/obs*.log | wc -l)" = 0 ]'
check "the new leader's node hears its epoch" \
  '[ "$(cat "$T"/obs*.log | awk -v e="$E3" "\$3 >= e" | wc -l)" -gt 0 ]'

# 7. A clean stop hands over at once (the lease is revoked).
L=$(leader_now); S=$(other "$L")
S0=$(now)
eval "stop_pid \$PID$L"
wait_for '[ "$(status "$S" leader)" = True ]' 3
S1=$(now)
HAND=$(echo "$S0 $S1" | awk '{ printf "%.3f", $2 - $1 }')
echo "hand-over after SIGTERM: $HAND s"
check "after SIGTERM of the leader the standby leads before the lease could expire" \
  'awk -v t="$HAND" -v l="$TTL" "BEGIN { exit !(t < l) }"'

it_end logs
