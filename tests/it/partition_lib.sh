# partition_lib.sh - the set-up and the run the partition suite's controller cases share (issue 26): a real etcd, two controllers, one bqos-node over memcached, a raw protocol node on each controller, an independent counting client (bqos-load aligned with the controller's 1 s periods) whose per-window counts of bucket red are judged, a `set` acknowledged before the fault that must survive it.
#
# Source it after scripts/lib.sh and it_begin (it_leader_paused.sh,
# it_ctrl_starved.sh, it_leader_etcd_cut.sh, it_etcd_paused.sh).
#   pt_cluster                  etcd, it_ha_pair(red R 50 L 200, --intervals 5
#                               --lease-ttl 2 --etcd-timeout 250ms), c1 leading and
#                               c2 its standby naming it, memcached, node s1
#                               (NP) following the leader, raw nodes obs1 on
#                               c1 and obs2 on c2 (ha_observer.py: every
#                               message with its epoch in $T/obsI.log).
#                               PT_BEFORE_CTL: a command evaluated once etcd
#                               runs (EP its port), before the controllers
#                               start; PT_ETCD1: c1's etcd URL (default
#                               $ETCD); PT_ON_EXIT: a command for the exit
#                               trap
#   pt_run FAULT_S START END    the case: the load (FAULT_S + 7 s); 2.2 s in,
#                               `set red --limit 150` (S0); 1.5 s later the
#                               fault: L (the leader then), E1 (its epoch),
#                               START evaluated at P0, END FAULT_S s after
#                               P0 (C0); then until the node follows
#                               a leader (BACK, at most PT_FOLLOW_S s, 6),
#                               the load's end, and the common checks:
#                               red <= 1.05 x 200 per client window before
#                               the set, <= 1.05 x 150 from the second window
#                               after it to the end; at most PT_MAX_ELECT (1)
#                               elections and PT_MAX_FB (1) node fallbacks
#                               from the fault on; the node follows a
#                               leader after it; red served (a window >=
#                               0.8 x 150 in the last three); red's limit 150
#                               in both controllers' tables
#   pt_load SECONDS             bqos-load on red through s1 for SECONDS,
#                               aligned with the leader's periods: the client's
#                               window W (1-based, $T/load/periods.csv) covers
#                               [LOAD_START + W - 1, LOAD_START + W); LOAD_PID
#   pt_windows FROM TO          red's IOs per client window for the windows
#                               that begin at FROM or later and end by TO (wall
#                               clock), "W:IOs" words
#   pt_sliding FROM TO          the most IOs in any 1 s span of 200 ms intervals
#   pt_over LIMIT WORDS         how many of pt_windows' words exceed 1.05 x LIMIT
#   pt_msgs_after OBS T E       raw node OBS's messages after time T with an
#                               epoch of at most E (0: any epoch)
#   pt_limit_ctl I              red's limit in cI's table (bqos-ctl buckets)
#   pt_logs                     the lines of the logs worth showing on failure;
#                               keeps the scratch directory in /tmp/NAME.last
#   nstat NAME                  s1's `stats` value NAME
#   now                         the wall clock, Unix seconds with fractions

now() { date +%s.%N; }

pt_cluster() {
  [ $# -eq 0 ] || { echo "pt_cluster takes no arguments (the cluster is fixed: see above)"; exit 1; }
  PT_PY=python3
  $PT_PY -c "import zmq" 2>/dev/null || PT_PY=/usr/bin/python3
  $PT_PY -c "import zmq" 2>/dev/null || { echo "no pyzmq (scripts/deps.sh test installs python3-zmq)"; exit 1; }
  it_etcd "${PT_ON_EXIT:-}"
  it_etcd_start
  it_ha_pair '{"buckets":[{"name":"red","reservation":50,"limit":200}]}' --intervals 5 \
    --lease-ttl 2 --etcd-timeout 250ms
  eval "${PT_BEFORE_CTL:-}"
  pt_etcd=$ETCD
  ETCD=${PT_ETCD1:-$ETCD}
  ctl_start 1
  ETCD=$pt_etcd
  wait_for '[ "$(status 1 leader)" = True ]' 10
  ctl_start 2
  wait_for '[ "$(status 2 leader_id)" = c1 ]' 10
  check "c1 leads, c2 is its standby" '[ "$(status 1 leader)" = True ] && [ "$(status 2 leader_id)" = c1 ]'
  it_ha_s1 "$PT_PY" 120
  wait_for '[ "$(nstat bqos_ctl_state)" = following ]' 10
  check "the node follows the leader" '[ "$(nstat bqos_ctl_state)" = following ]'
}

nstat() { node_stat "$NP" "$1"; }

pt_run() {
  DUR=$(echo "$1" | awk '{ d = int($1 + 7); if (d < $1 + 7) d++; print d }')
  pt_load "$DUR"
  sleep "$(echo "$LOAD_START $(now)" | awk '{ w = $1 + 2.2 - $2; if (w < 0) w = 0; printf "%.2f", w }')"
  ctl --endpoint "$AD1,$AD2" set red --limit 150 >"$T/set.out" 2>&1; rc=$?
  S0=$(now)
  check "set red --limit 150 at the leader is acknowledged (rc $rc)" '[ $rc = 0 ]'
  sleep 1.5
  L=$(leader_now); L=${L:-1}
  E1=$(status "$L" epoch)
  EL0=$(grep -h "leading with epoch" "$T"/c*.log | wc -l)
  F0=$(nstat bqos_ctl_fallbacks)
  P0=$(now)
  eval "$2"
  sleep "$(echo "$P0 $(now) $1" | awk '{ w = $3 - ($2 - $1); if (w < 0) w = 0; printf "%.2f", w }')"
  eval "$3"
  C0=$(now)
  wait_for '[ "$(nstat bqos_ctl_state)" = following ]' "${PT_FOLLOW_S:-6}"
  BACK=$(echo "$C0 $(now)" | awk '{ printf "%.1f", $2 - $1 }')
  [ "$(nstat bqos_ctl_state)" = following ] || BACK=never
  wait "$LOAD_PID"
  END=$(now)
  EL1=$(grep -h "leading with epoch" "$T"/c*.log | wc -l)
  F1=$(nstat bqos_ctl_fallbacks)
  ELECT=$((EL1 - EL0)); FALLB=$((F1 - F0))
  LN=$(leader_now)
  echo "# the fault on c$L (epoch $E1) from $P0 to $C0 ($1 s), load $(cut -d' ' -f1 /proc/loadavg):" \
    "$ELECT elections, $FALLB node fallbacks; the node follows $BACK s after;" \
    "leader now c${LN:-?} at epoch $(status "${LN:-1}" epoch)"
  S1=$(echo "$S0" | awk '{ printf "%.3f", $1 + 1 }')
  BEFORE=$(pt_windows 0 "$S1")
  AFTER=$(pt_windows "$S1" "$END")
  TAIL=$(echo $AFTER | awk '{ for (i = NF - 2; i <= NF; i++) printf "%s ", $i }')
  echo "# red per client 1 s window (W:IOs), limit 200 until the set: $BEFORE"
  echo "# limit 150 from the window after the set: $AFTER; most in any 1 s span of 200 ms" \
    "intervals (not aligned with the periods, not judged): $(pt_sliding "$S1" "$END")"
  check "red <= 1.05 x 200 in every window before the set ($BEFORE)" \
    '[ "$(echo $BEFORE | wc -w)" -ge 1 ] && [ "$(pt_over 200 "$BEFORE")" = 0 ]'
  check "red <= 1.05 x 150 in every window from the one after the set, through the fault ($AFTER)" \
    '[ "$(echo $AFTER | wc -w)" -ge $((DUR - 5)) ] && [ "$(pt_over 150 "$AFTER")" = 0 ]'
  check "at most ${PT_MAX_ELECT:-1} elections from the fault on ($ELECT)" '[ "$ELECT" -le "${PT_MAX_ELECT:-1}" ]'
  check "at most ${PT_MAX_FB:-1} node fallbacks ($FALLB)" '[ "$FALLB" -le "${PT_MAX_FB:-1}" ]'
  check "after the fault the node follows a leader ($BACK s)" '[ "$BACK" != never ]'
  check "and red is served (a window >= 120 in the last three: $TAIL)" \
    '[ "$(echo "$TAIL" | tr " " "\n" | awk -F: "NF == 2 && \$2 >= 120" | wc -l)" -ge 1 ]'
  check "the acknowledged set survives: red's limit is 150 at c1 and c2 ($(pt_limit_ctl 1), $(pt_limit_ctl 2))" \
    '[ "$(pt_limit_ctl 1)" = 150 ] && [ "$(pt_limit_ctl 2)" = 150 ]'
}

pt_logs() {
  for f in "$T"/c*.log "$T"/node.log; do
    echo "== $f"; grep -E "leading|etcd|fall|late|follow|set" "$f" | tail -15
  done
  for f in "$T"/obs*.log; do echo "== $f"; tail -n 3 "$f"; done
  rm -rf "/tmp/$IT_NAME.last"; cp -r "$T" "/tmp/$IT_NAME.last" 2>/dev/null
  echo "# the scratch directory is kept in /tmp/$IT_NAME.last"
}

pt_load() {
  cat >"$T/scen.json" <<JSON
{"duration": $1, "period": 1, "intervals": 5, "warmup_periods": 0, "seed": 1, "capacity": 20000,
 "workload": {"outstanding": 8, "timeout_ms": 10000, "preload": 0},
 "servers": [{"name": "s1", "address": "127.0.0.1:1"}],
 "buckets": [{"name": "red", "reservation": 50, "limit": 200, "servers": ["s1"]}]}
JSON
  l=$(leader_now)
  # the period's start by the leader's clock: its elapsed time in the
  # period, at the middle of the request's round trip (not after parsing
  # the reply: python's start-up on a busy host takes 100s of ms)
  eval "ad=\$AD${l:-1}"
  t0=$(now)
  ctl --endpoint "$ad" --json status >"$T/st.json" 2>/dev/null
  t1=$(now)
  el=$(jget "$T/st.json" 'd["elapsed_ms"]')
  PSTART=$(echo "$t0 $t1 ${el:-0}" | awk '{ printf "%.3f", ($1 + $2) / 2 - $3 / 1000 }')
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

# pt_sliding FROM TO: red's most IOs in any 1 s span of whole 200 ms client
# intervals within FROM..TO (wall clock), "IOs@T" (T: the span's end, s into
# the load): windows not aligned with the periods, for information
pt_sliding() {
  awk -F, -v s="$LOAD_START" -v a="$1" -v b="$2" 'NR > 1 && $4 == "red" {
      t = s + $1; if (t - 0.2 >= a && t <= b) { n++; c[n] = $5; e[n] = $1 } }
    END { for (i = 5; i <= n; i++) { w = c[i] + c[i-1] + c[i-2] + c[i-3] + c[i-4]
            if (w > m) { m = w; at = e[i] } }
          printf "%d@%s", m, at }' "$T/load/intervals.csv" 2>/dev/null
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
