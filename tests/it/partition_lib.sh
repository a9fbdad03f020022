# partition_lib.sh - the set-up the partition suite's controller cases share (issue 26): a real etcd, two controllers, one bqos-node over memcached, a raw protocol node on each controller, and an independent counting client (bqos-load aligned with the controller's 1 s periods) whose per-window counts of bucket red are judged.
#
# Source it after scripts/lib.sh and it_begin (it_leader_paused.sh,
# it_ctrl_starved.sh).  Functions:
#   pt_cluster JSON OPTION...   etcd, it_ha_pair(JSON, OPTIONs), c1 leading and
#                               c2 its standby naming it, memcached, node s1
#                               (NP) following the leader, raw nodes obs1 on
#                               c1 and obs2 on c2 (ha_observer.py: every
#                               message with its epoch in $T/obsI.log)
#   pt_load SECONDS             bqos-load on red through s1 for SECONDS,
#                               aligned with the leader's periods: the client's
#                               window W (1-based, $T/load/periods.csv) covers
#                               [LOAD_START + W - 1, LOAD_START + W); LOAD_PID
#   pt_windows FROM TO          red's IOs per client window for the windows
#                               that begin at FROM or later and end by TO (wall
#                               clock), "W:IOs" words
#   pt_over LIMIT WORDS         how many of pt_windows' words exceed 1.05 x LIMIT
#   pt_msgs_after OBS T E       raw node OBS's messages after time T with an
#                               epoch of at most E (0: any epoch)
#   pt_limit_ctl I              red's limit in cI's table (bqos-ctl buckets)
#   nstat NAME                  s1's `stats` value NAME
#   now                         the wall clock, Unix seconds with fractions

now() { date +%s.%N; }

pt_cluster() {
  PT_PY=python3
  $PT_PY -c "import zmq" 2>/dev/null || PT_PY=/usr/bin/python3
  $PT_PY -c "import zmq" 2>/dev/null || { echo "no pyzmq (scripts/deps.sh test installs python3-zmq)"; exit 1; }
  it_etcd "${PT_ON_EXIT:-}"
  it_etcd_start
  it_ha_pair "$@"
  ctl_start 1
  wait_for '[ "$(status 1 leader)" = True ]' 10
  ctl_start 2
  wait_for '[ "$(status 2 leader_id)" = c1 ]' 10
  check "c1 leads, c2 is its standby" '[ "$(status 1 leader)" = True ] && [ "$(status 2 leader_id)" = c1 ]'
  next_port; MP=$PORT
  start_memcached "$MP" "$T/memcached.log"
  it_ha_node s1 "$T/node.log"
  NP=$NODE_PORT
  for i in 1 2; do
    eval "ls=\$LS$i"
    spawn "$T/obs$i.err" "$PT_PY" "$HERE/ha_observer.py" "$ls" "obs$i" "$T/obs$i.log" 120
  done
  wait_for '[ "$(nstat bqos_ctl_state)" = following ]' 10
  check "the node follows the leader" '[ "$(nstat bqos_ctl_state)" = following ]'
}

nstat() { node_stat "$NP" "$1"; }

pt_load() {
  cat >"$T/scen.json" <<JSON
{"duration": $1, "period": 1, "intervals": 5, "warmup_periods": 0, "seed": 1, "capacity": 20000,
 "workload": {"outstanding": 8, "timeout_ms": 10000, "preload": 0},
 "servers": [{"name": "s1", "address": "127.0.0.1:1"}],
 "buckets": [{"name": "red", "reservation": 50, "limit": 200, "servers": ["s1"]}]}
JSON
  l=$(leader_now)
  status "${l:-1}" elapsed_ms >/dev/null
  el=$(jget "$T/st${l:-1}.json" 'd["elapsed_ms"]')
  PSTART=$(echo "$(now) ${el:-0}" | awk '{ printf "%.3f", $1 - $2 / 1000 }')
  # 0.3 s into a period, so that the run's first window is the next period
  sleep "$(echo "$(now) $PSTART" | awk '{ f = ($1 - $2) - int($1 - $2); w = 0.3 - f; if (w < 0) w += 1; printf "%.3f", w }')"
  LOAD_START=$(echo "$(now) $PSTART" | awk '{ printf "%.3f", $2 + int($1 + 0.2 - $2) + 1 }')
  "$BIN/bqos-load" -q -s "s1=127.0.0.1:$NP,127.0.0.1:$MP" -o "$T/load" -d "$1" \
    --period-start "$PSTART" "$T/scen.json" >"$T/load.table" 2>"$T/load.log" &
  LOAD_PID=$!
  LIB_PIDS="$LIB_PIDS $LOAD_PID"
}

pt_windows() {
  awk -F, -v s="$LOAD_START" -v a="$1" -v b="$2" 'NR > 1 && $2 == "red" {
      t0 = s + $1 - 1; if (t0 >= a && t0 + 1 <= b) printf "%s:%s ", $1, $5 }' "$T/load/periods.csv" 2>/dev/null
}

pt_over() {
  echo "$2" | tr ' ' '\n' | awk -F: -v l="$1" 'NF == 2 && $2 > 1.05 * l { n++ } END { print n + 0 }'
}

pt_msgs_after() {
  awk -v t="$2" -v e="$3" '$1 > t && (e == 0 || $3 <= e) { n++ } END { print n + 0 }' "$T/$1.log" 2>/dev/null
}

pt_limit_ctl() {
  eval "ad=\$AD$1"
  ctl --endpoint "$ad" --json buckets >"$T/bk$1.json" 2>/dev/null &&
    jget "$T/bk$1.json" '[b["limit"] for b in d["buckets"] if b["name"] == "red"][0]'
}

# pt_cgroup_new NAME: a cgroup of the CPU controller to starve a process
# in: v2 (cpu.max) where the unified hierarchy has the cpu controller,
# else v1 (cpu.cfs_quota_us); sets PT_CG (its directory) and PT_CGV (1 or
# 2), returns 1 when neither can be made (not root, no cgroup fs).
pt_cgroup_new() {
  PT_CG=""
  for root in /sys/fs/cgroup /sys/fs/cgroup/unified; do
    if grep -qw cpu "$root/cgroup.controllers" 2>/dev/null; then
      grep -qw cpu "$root/cgroup.subtree_control" 2>/dev/null ||
        echo +cpu >"$root/cgroup.subtree_control" 2>/dev/null
      mkdir "$root/$1" 2>/dev/null && [ -w "$root/$1/cpu.max" ] && { PT_CG=$root/$1; PT_CGV=2; return 0; }
      rmdir "$root/$1" 2>/dev/null
    fi
  done
  root=/sys/fs/cgroup/cpu
  [ -w "$root/cgroup.procs" ] && mkdir "$root/$1" 2>/dev/null && [ -w "$root/$1/cpu.cfs_quota_us" ] &&
    { PT_CG=$root/$1; PT_CGV=1; return 0; }
  return 1
}

# pt_starve PID QUOTA_US PERIOD_US: PID (and its threads) in PT_CG, allowed
# QUOTA_US of CPU per PERIOD_US.  pt_unstarve PID: back to its parent
# cgroup, unlimited.  pt_cgroup_rm: removes PT_CG (its processes moved out
# first).
pt_starve() {
  if [ "$PT_CGV" = 2 ]; then
    echo "$2 $3" >"$PT_CG/cpu.max"
  else
    echo "$3" >"$PT_CG/cpu.cfs_period_us" && echo "$2" >"$PT_CG/cpu.cfs_quota_us"
  fi && echo "$1" >"$PT_CG/cgroup.procs"
}
pt_unstarve() { echo "$1" >"$(dirname "$PT_CG")/cgroup.procs"; }
pt_cgroup_rm() {
  [ -n "${PT_CG:-}" ] || return 0
  for p in $(cat "$PT_CG/cgroup.procs" 2>/dev/null); do pt_unstarve "$p" 2>/dev/null; done
  rmdir "$PT_CG" 2>/dev/null
}
