# shards_lib.sh - the set-up the controller-shard scripts share (it_shards.sh, it_reshard.sh, it_reshard_down.sh): CURVE keys, shard controllers on a real etcd, two bqos-nodes over memcached, bqos-load aligned with the periods, its per-window counts.
#
# Source it after scripts/lib.sh, it_begin, it_etcd and it_etcd_start.
# Buckets red and blue, each R 50 L 200; 1 s periods in 5 intervals.
# The checks are the scripts', but for sh_move_checks (a bucket moved by
# a change of K, shared by it_reshard.sh and it_reshard_down.sh).

# sh_keys: CURVE keys ctrl, n1, n2, op in K ($T/keys); $T/ak lists n1, n2
# as nodes and op and the controllers' shared key as admins (so that shard
# leaders may talk to the root)
sh_keys() {
  K=$T/keys; mkdir -p "$K"
  for k in ctrl n1 n2 op; do "$BIN/bqos-ctl" keygen "$K/$k" >/dev/null 2>&1 || { echo "keygen $k failed"; exit 1; }; done
  printf 'node n1 %s\nnode n2 %s\nadmin op %s\nadmin controllers %s\n' "$(pub n1)" "$(pub n2)" \
    "$(pub op)" "$(pub ctrl)" >"$T/ak"
}
# pub NAME: the public half of key NAME
pub() { awk '/^public/ {print $2}' "$K/$1.pub"; }

# sh_controllers NAME...: for each controller NAME its buckets file
# $T/NAME.json (red and blue) and free endpoints LS_NAME (nodes) and
# AD_NAME (admin); RL_NAME (its --root-listen) is the script's to set
sh_controllers() {
  echo '{"buckets":[{"name":"red","reservation":50,"limit":200},{"name":"blue","reservation":50,"limit":200}]}' \
    >"$T/b.json"
  for c in "$@"; do
    cp "$T/b.json" "$T/$c.json"
    next_port; eval "LS_$c=tcp://127.0.0.1:$PORT"
    next_port; eval "AD_$c=tcp://127.0.0.1:$PORT"
  done
}

# sh_reshard_setup: it_reshard.sh's and it_reshard_down.sh's cluster: keys,
# controllers s0 and s1, the root on RL_s0 (ROOT; shard 0's leader is s0),
# their logs' lines for it_end
sh_reshard_setup() {
  sh_keys
  sh_controllers s0 s1
  next_port; RL_s0=tcp://127.0.0.1:$PORT; ROOT=$RL_s0
  SH_LOG_RE="leading|shard|K =|K changes|fall|refused|error"
}

# cstart NAME SHARD K: controller NAME of shard SHARD started with --shards
# K, the root at ROOT, listening as the root on RL_NAME when SHARD is 0
# (PID_NAME; log $T/NAME.log)
cstart() {
  eval "ls=\$LS_$1 ad=\$AD_$1 rl=\${RL_$1:-}"
  rootl=""
  [ "$2" = 0 ] && rootl="--root-listen $rl"
  # shellcheck disable=SC2086
  spawn "$T/$1.log" "$BIN/bqos-controller" --buckets "$T/$1.json" --listen "$ls" --admin "$ad" \
    --period 1s --intervals 5 --etcd "$ETCD" --id "$1" --cluster it --lease-ttl 2 \
    --etcd-timeout 250ms --shards "$3" --shard "$2" --root "$ROOT" $rootl --log-level debug \
    --curve-key "$K/ctrl.key" --authorized-keys "$T/ak"
  eval "PID_$1=\$SPAWNED"
}
# ctl ARGS...: bqos-ctl as the admin op
ctl() { "$BIN/bqos-ctl" --timeout 1000 --curve-key "$K/op.key" --controller-key "$K/ctrl.pub" "$@"; }
# status NAME FIELD: a field of controller NAME's JSON status
status() {
  eval "ad=\$AD_$1"
  ctl --endpoint "$ad" --json status >"$T/st_$1.json" 2>/dev/null && jget "$T/st_$1.json" "d[\"$2\"]"
}
# run NAME FIELD: a field of what shard controller NAME runs (bqos-ctl shards)
run() {
  eval "ad=\$AD_$1"
  ctl --endpoint "$ad" --json shards >"$T/sh_$1.json" 2>/dev/null && jget "$T/sh_$1.json" "d[\"run\"][\"$2\"]"
}
# now: the wall clock in seconds, with nanoseconds
now() { date +%s.%N; }
# logs: for it_end, the last SH_LOG_N (14) lines of each controller's and
# node's log that match SH_LOG_RE
logs() {
  for f in "$T"/s*.log "$T"/n*.log; do
    echo "== $f"; grep -E "$SH_LOG_RE" "$f" | tail -"${SH_LOG_N:-14}"
  done
}

# sh_nodes SHARDS CTLS: memcached on MP, nodes n1 and n2 (NP_n1, NP_n2;
# logs $T/n1.log, $T/n2.log) in front of it, --shards SHARDS --controller CTLS
sh_nodes() {
  next_port; MP=$PORT
  start_memcached "$MP" "$T/memcached.log"
  for n in n1 n2; do
    next_port; eval "NP_$n=$PORT"
    spawn "$T/$n.log" "$BIN/bqos-node" --name "$n" --memcached-listen "127.0.0.1:$PORT" \
      --backend "memcached://127.0.0.1:$MP" --policy tokens --shards "$1" --controller "$2" \
      --curve-key "$K/$n.key" --controller-key "$K/ctrl.pub"
    wait_port "$PORT" 10
  done
}
# nst NODE STAT: node NODE's stats value
nst() { eval "np=\$NP_$1"; node_stat "$np" "$2"; }
# sh_snap NODE...: each node's whole stats at once ($T/NODE.stats), for snst
sh_snap() {
  for n in "$@"; do eval "np=\$NP_$n"; mc_ask "$np" 'stats\r\n' 3 2>/dev/null | tr '|' '\n' >"$T/$n.stats"; done
}
# snst NODE STAT: a value of node NODE's stats as sh_snap last took them, or "none"
snst() {
  awk -v k="STAT $2 " 'index($0, k) == 1 { print substr($0, length(k) + 1); f = 1; exit }
                       END { if (!f) print "none" }' "$T/$1.stats" 2>/dev/null
}
# sh_tables_refused NODE...: each node's shard 0 and shard 1 tables refused, concatenated
sh_tables_refused() {
  for n in "$@"; do printf '%s%s' "$(nst "$n" bqos_ctl_shard0_tables_refused)" "$(nst "$n" bqos_ctl_shard1_tables_refused)"; done
}
# sh_tokens_refused: tokens of another shard's bucket refused at n1, n2
sh_tokens_refused() { echo "$(nst n1 bqos_ctl_shard_tokens_refused) $(nst n2 bqos_ctl_shard_tokens_refused)"; }
# sh_nodes_k: each node's K / generation in force, "K/GEN K/GEN"
sh_nodes_k() {
  echo "$(nst n1 bqos_ctl_shards_k)/$(nst n1 bqos_ctl_shards_gen) $(nst n2 bqos_ctl_shards_k)/$(nst n2 bqos_ctl_shards_gen)"
}

# sh_load DUR: bqos-load on red and blue through n1 and n2 for DUR s, 8
# requests per bucket and node in flight, its 1 s windows aligned with the
# shards' periods (whole seconds of the wall clock): client window W covers
# [LOAD_START + W - 1, LOAD_START + W); sets DUR, PSTART, LOAD_START, LOAD_PID
sh_load() {
  DUR=$1
  cat >"$T/scen.json" <<JSON
{"duration": $DUR, "period": 1, "intervals": 5, "warmup_periods": 0, "seed": 1, "capacity": 20000,
 "workload": {"outstanding": 8, "timeout_ms": 2000, "preload": 0},
 "servers": [{"name": "n1", "address": "127.0.0.1:1"}, {"name": "n2", "address": "127.0.0.1:1"}],
 "buckets": [{"name": "red", "reservation": 50, "limit": 200, "servers": ["n1", "n2"]},
             {"name": "blue", "reservation": 50, "limit": 200, "servers": ["n1", "n2"]}]}
JSON
  sleep "$(now | awk '{ w = 1.3 - ($1 - int($1)); if (w > 1) w -= 1; printf "%.3f", w }')"
  PSTART=$(now | awk '{ printf "%d", int($1) }')
  LOAD_START=$((PSTART + 1))
  "$BIN/bqos-load" -q -s "n1=127.0.0.1:$NP_n1,127.0.0.1:$MP" -s "n2=127.0.0.1:$NP_n2,127.0.0.1:$MP" \
    -o "$T/load" -d "$DUR" --period-start "$PSTART" "$T/scen.json" >"$T/load.table" 2>"$T/load.log" &
  LOAD_PID=$!
  LIB_PIDS="$LIB_PIDS $LOAD_PID"
}
# sh_load_set K [DUR]: sh_load DUR (12), then 1.2 s in `bqos-ctl shards set K 4` through
# both slots' endpoints (s0, s1; the second may not run yet), 4 periods
# ahead (time for a new shard's election on a busy host): SETRC its exit
# status, FROM the change's period (wall-clock ms), SET_AT when it was sent (UTC, as the logs)
sh_load_set() {
  sh_load "${2:-12}"
  sleep 1.2
  SET_AT=$(date -u +%Y-%m-%dT%H:%M:%S.%3N) # the logs' clock: what follows the change
  ctl --endpoint "$AD_s0;$AD_s1" --json shards set "$1" 4 >"$T/set.json" 2>"$T/set.err"; SETRC=$?
  FROM=$(jget "$T/set.json" 'd["cluster"]["next"]["from_ms"]' 2>/dev/null)
}
# logtime MS: wall-clock ms as the logs stamp their lines (UTC), to compare with awk's $1 >= t
logtime() { date -u -d "@$(echo "$1" | awk '{ printf "%.3f", $1 / 1000 }')" +%Y-%m-%dT%H:%M:%S.%3N; }
# sh_check_before MSG COND: check MSG COND, a state read at PREAT (wall-clock
# ms) before the change's period FROM; not judged (said) when the host was
# too slow to read it before FROM
sh_check_before() {
  if [ -n "$FROM" ] && [ "$PREAT" -lt "$FROM" ]; then
    check "$1" "$2"
  else
    echo "# (the host was too slow to read the shards before the change's period: not judged)"
  fi
}
# sh_sleep_to_end MARGIN: sleeps until MARGIN s before the load's last window ends
sh_sleep_to_end() {
  sleep "$(echo "$(now) $LOAD_START $DUR $1" | awk '{ w = $2 + $3 - $4 - $1; if (w < 0) w = 0; printf "%.2f", w }')"
}

# windows B: the client's 1 s windows of bucket B, "W:IOs" (all windows the
# run covered: periods.csv of bqos-load, the window W from LOAD_START + W - 1)
windows() { awk -F, -v b="$1" 'NR > 1 && $2 == b { printf "%s:%s ", $1, $5 }' "$T/load/periods.csv" 2>/dev/null; }
# over LIMIT WORDS: how many of windows' words exceed 1.05 x LIMIT
over() { echo "$2" | tr ' ' '\n' | awk -F: -v l="$1" 'NF == 2 && $2 > 1.05 * l { n++ } END { print n + 0 }'; }
# sh_within WORDS: true when WORDS covers at least DUR - 2 windows, none over 1.05 x 200
sh_within() { [ "$(echo $1 | wc -w)" -ge $((DUR - 2)) ] && [ "$(over 200 "$1")" = 0 ]; }
# sh_below WORDS MIN: how many windows from 2 on (before DUR) served fewer than MIN
sh_below() { echo $1 | tr " " "\n" | awk -F: -v m="$2" -v d="$DUR" 'NF == 2 && $1 >= 2 && $1 < d && $2 < m' | wc -l; }
# sh_late WORDS MIN: how many of the last three windows served MIN or more
sh_late() { echo $1 | tr " " "\n" | awk -F: -v m="$2" -v d="$DUR" 'NF == 2 && $1 > d - 3 && $2 >= m' | wc -l; }

# sh_move_checks FROM TO: the per-window checks of a change of K that moves
# blue from shard FROM to shard TO (red stays in shard 0), the change's
# period from wall-clock ms FROM (the script's); prints RED and BLUE's windows
sh_move_checks() {
  RED=$(windows red); BLUE=$(windows blue)
  PW=$(echo "$FROM $LOAD_START" | awk '{ printf "%d", $1 / 1000 - $2 + 1 }')
  echo "# the change's period is client window $PW (load $(cut -d' ' -f1 /proc/loadavg)); per window (W:IOs), R 50 L 200:"
  echo "#   red  (stays in shard 0):        $RED"
  echo "#   blue (moves from shard $1 to $2): $BLUE"
  check "the change's period fell inside the load (window $PW)" '[ "$PW" -ge 4 ] && [ "$PW" -le $((DUR - 3)) ]'
  check "blue <= 1.05 x 200 in every client window through the move" 'sh_within "$BLUE"'
  check "red <= 1.05 x 200 in every client window" 'sh_within "$RED"'
  check "blue's reservation met (>= 50) in every window from 2 on but at most one" \
    '[ "$(sh_below "$BLUE" 50)" -le 1 ]'
  check "blue served at its limit after the move (a window >= 180 in the last three)" \
    '[ "$(sh_late "$BLUE" 180)" -ge 1 ]'
}
