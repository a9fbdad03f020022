# prop_real.sh - the QoS property test on real nodes (issue 25): a bqos-sim-prop seed's scenario run by bqos-load against memcached + bqos-node pairs on loopback with a controller (or two on etcd, the leader killed mid-run), judged by bqos-sim-prop --measured.
#
# Source after scripts/lib.sh, with BIN, HERE (tests/it) and T (scratch) set.
# pr_run SEED DIR [MODE] runs one seed into DIR and leaves the checker's
# output in DIR/check.txt and its exit status in PR_RC (0 met, 1 a bound
# failed, 2 an error).  MODE: one (one controller, default), ha (two
# controllers on an etcd, the leader killed with SIGKILL in period
# PR_KILL), rr (the nodes with --policy rr, no controller: a broken case).
# Settings (environment): PR_DUR (seconds of load, default the seed's 10),
# PR_KMAX (requests in flight per bucket and server at most, 16),
# PR_KSCALE (1: requests in flight scaled by the real unloaded round trip,
# prop_real.py --scaled-k; default: as drawn),
# PR_FIT (the share of each server's profiled rate the reservations fit
# into, max-flow: 0.8, the generator's), PR_KILL (4), PR_REAL (a REAL.json of an earlier run: run it as it is,
# no profile, for an A/B of node options through NODE_OPTS), PR_REQUIRE (the checker's bounds, default
# "--require-met99 0.99 --require-worst 0.9 --require-limits").
# PR_INFO is one line about the run (capacity, RTT0, takeover).

# pr_periodstart ADMIN: the wall-clock start of the controller's current
# period (Unix seconds), from its status's elapsed_ms.
pr_periodstart() {
  st=$("$BIN/bqos-ctl" --timeout 1000 --endpoint "$1" --json status 2>/dev/null)
  now=$(date +%s.%N)
  el=$(echo "$st" | sed -n 's/.*"elapsed_ms": *\([0-9]*\).*/\1/p' | head -1)
  [ -n "$el" ] && echo "$now $el" | awk '{ printf "%.3f", $1 - $2 / 1000 }'
}

# pr_sleep_until T: sleeps until wall-clock time T (Unix seconds).
pr_sleep_until() {
  psu_d=$(echo "$1 $(date +%s.%N)" | awk '{ d = $1 - $2; printf "%.3f", (d > 0 ? d : 0) }')
  sleep "$psu_d"
}

pr_run() {
  PIN=0
  seed=$1; dir=$2; mode=${3:-one}
  mkdir -p "$dir"
  PR_RC=2; PR_INFO=""
  "$BIN/bqos-sim-prop" --dump "$seed" >"$dir/sim.json" || return 1
  nsrv=$(python3 -c "import json,sys; print(len(json.load(open(sys.argv[1]))['servers']))" "$dir/sim.json")
  dur=${PR_DUR:-$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['duration'])" "$dir/sim.json")}
  start_backends "$nsrv" "$dir" || { echo "memcached did not start"; return 1; }
  if [ -n "${PR_REAL:-}" ]; then
    # A scenario scaled before (an A/B of node options on the same one).
    cp "$PR_REAL" "$dir/real.json"
    cap=$(python3 -c "import json,sys; print('%.0f' % json.load(open(sys.argv[1]))['capacity'])" "$dir/real.json")
    rates="as $PR_REAL"; rtt0="(as before)"
  else
    # The servers under this seed's clients (rr nodes, the scenario's own
    # concurrency): their mean throughput is the capacity the scenario is
    # scaled to; one request in flight per server gives the unloaded round
    # trip.
    start_nodes rr - - "$dir" || { echo "bqos-node did not start"; return 1; }
    # (the seed as drawn, servers renamed: its requests in flight)
    python3 "$HERE/prop_real.py" scale "$dir/sim.json" 10000 0 "$dur" "${PR_KMAX:-16}" \
      >"$dir/drawn.json" || return 1
    # shellcheck disable=SC2086
    "$BIN/bqos-load" $SERVER_ARGS -q -c 10000 --preload 0 -d 3 -o "$dir/profile" -l profile \
      "$dir/drawn.json" >/dev/null 2>"$dir/profile.log" || { echo "profile failed"; cat "$dir/profile.log"; return 1; }
    # shellcheck disable=SC2086
    "$BIN/bqos-load" $SERVER_ARGS -q -c 10000 --preload 0 --profile 1 --profile-outstanding 1 \
      "$dir/drawn.json" >"$dir/rtt0.txt" 2>>"$dir/profile.log" || { echo "profile failed"; return 1; }
    # (the mean of periods 2 and 3: the first has the clients' start)
    rates=$(awk -F, 'NR > 1 && $1 >= 2 { r[$2] += $3 / 2; if (!($2 in o)) o[$2] = ++n; k[o[$2]] = $2 }
      END { for (i = 1; i <= n; i++) printf "%s%.0f", (i > 1 ? "," : ""), r[k[i]] }' "$dir/profile/servers.csv")
    cap=$(echo "$rates" | tr , '\n' | awk '{ t += $1; n++ } END { printf "%.0f", t / n }')
    rtt0=$(awk '$1 == "capacity" { printf "%.4f", 1000 / $2 }' "$dir/rtt0.txt")
    stop_nodes
    python3 "$HERE/prop_real.py" scale "$dir/sim.json" "$cap" "$rtt0" "$dur" "${PR_KMAX:-16}" ${PR_KSCALE:+--scaled-k} "--rates=$rates" \
      "--fit=${PR_FIT:-0.8}" \
      >"$dir/real.json" || return 1
  fi
  # The controller's bucket file (rewritten and fsynced by bqos-ctl set) in
  # memory when it can be: on this host's busy disk an fsync held the
  # controller's loop for 3 s and every node fell back (docs/decisions.md).
  bdir=$dir
  [ -d /dev/shm ] && [ -w /dev/shm ] && bdir=$(mktemp -d /dev/shm/pr_buckets.XXXXXX)
  "$BIN/bqos-load" --print-buckets "$dir/real.json" >"$bdir/buckets.json" || return 1
  [ "$bdir" = "$dir" ] || cp "$bdir/buckets.json" "$dir/buckets.json"
  PR_INFO="seed $seed: $nsrv servers, $(echo "$rates" | tr , /) IOs/s, RTT0 $rtt0 ms"
  case $mode in
    rr)
      start_nodes rr - - "$dir" || return 1
      ps=$(date +%s.%N) ;;
    one)
      start_controller "$bdir/buckets.json" "$cap" "$dir" || return 1
      start_nodes tokens "$CTRL_EP" "$bdir/buckets.json" "$dir" || return 1
      ADM=$ADMIN_EP ;;
    ha)
      etcd_ports
      ED=$(mktemp -d /dev/shm/pr_etcd.XXXXXX 2>/dev/null) || ED=$(mktemp -d "$dir/etcd.XXXXXX")
      etcd_run default "$dir/etcd.log" || { echo "etcd did not start"; return 1; }
      # (the pair's bucket files and logs in memory too: T is theirs)
      pr_T=$T; T=$bdir
      it_ha_pair "$(cat "$dir/buckets.json")" --intervals 5 --capacity "$cap" --lease-ttl 2 \
        --etcd-timeout 250ms --log-level info
      ctl_start 1
      wait_for '[ "$(status 1 leader)" = True ]' 10
      ctl_start 2
      start_nodes tokens "$LS1,$LS2" "$dir/buckets.json" "$dir" || return 1
      ADM="$AD1,$AD2" ;;
  esac
  # The nodes register and get their first tokens; bqos-load starts on a
  # period boundary of the controller's (W0), launched 0.3 s into a period.
  [ "$mode" = rr ] || { sleep 1.5; ps=$(pr_periodstart "$ADM"); }
  [ -n "$ps" ] || { echo "no period start from the controller"; return 1; }
  # W0: the first boundary at least 0.7 s away; launched 0.7 s before it
  # (bqos-load starts its clients about 0.2 s after its launch).
  w0=$(echo "$ps $(date +%s.%N)" | awk '{ d = $2 - $1 + 0.7; k = int(d); if (k < d) k++; printf "%.3f", $1 + k }')
  pr_sleep_until "$(echo "$w0" | awk '{ printf "%.3f", $1 - 0.7 }')"
  # shellcheck disable=SC2086
  "$BIN/bqos-load" $SERVER_ARGS -q -c 10000 --preload 0 --period-start "$ps" -o "$dir/out" \
    -l "seed$seed-$mode" "$dir/real.json" >"$dir/table.txt" 2>"$dir/load.log" &
  lpid=$!
  # Runtime sets 0.25 s before their period starts (the controller applies
  # them at its next round after the answer; bqos-ctl took up to 1.1 s
  # here under this load: each set's answer is logged against its
  # period's start); the leader's kill.
  python3 "$HERE/prop_real.py" sets "$dir/real.json" | sort -n >"$dir/sets.txt"
  ev=""
  while read -r per name r l; do
    ev="$ev$(echo "$w0 $per" | awk '{ printf "%.3f", $1 + $2 - 0.25 }') set $name $r $l
"
  done <"$dir/sets.txt"
  [ "$mode" = ha ] && ev="$ev$(echo "$w0 ${PR_KILL:-4}" | awk '{ printf "%.3f", $1 + $2 + 0.5 }') kill
"
  printf '%s' "$ev" | sort -n >"$dir/events.txt"
  # (the leader found now: asked at the kill, bqos-ctl took 0.7 s here)
  [ "$mode" = ha ] && ld=$(leader_now)
  while read -r at what name r l; do
    pr_sleep_until "$at"
    case $what in
      set)
        set -- --reservation "$r"
        [ "$l" = - ] || set -- "$@" --limit "$l"
        [ "$mode" = rr ] || "$BIN/bqos-ctl" --timeout 5000 --endpoint "$ADM" set "$name" "$@" \
          >>"$dir/sets.log" 2>&1 || echo "set $name failed" >>"$dir/sets.log"
        echo "$w0 $(date +%s.%N)" | awk -v n="$name" '{ printf "set %s answered at W0 + %.3f s\n", n, $2 - $1 }' \
          >>"$dir/sets.log" ;;
      kill)
        eval "kp=\$PID$ld"
        kill -9 "$kp"
        # sets go to the survivor first (bqos-ctl waits out its timeout on
        # a dead endpoint before it tries the next)
        [ "$ld" = 1 ] && ADM="$AD2,$AD1"
        echo "killed c$ld at $(date +%s.%N) (W0 $w0)" >>"$dir/sets.log" ;;
    esac
  done <"$dir/events.txt"
  wait "$lpid" || { echo "bqos-load failed"; tail "$dir/load.log"; return 1; }
  if [ "$mode" = ha ]; then
    wait_for '[ -n "$(leader_now)" ]' 5
    PR_INFO="$PR_INFO; killed at W0 + ${PR_KILL:-4}.5 s, new leader c$(leader_now)"
    cp "$T"/c*.log "$dir/" 2>/dev/null
    T=$pr_T
  fi
  # With PR_METRICS=1 (and NODE_OPTS="--metrics-listen 127.0.0.1:0") each
  # node's Prometheus metrics at the end: DIR/metrics-sI.txt.
  if [ "${PR_METRICS:-0}" = 1 ]; then
    i=1
    for np in $NODE_PORTS; do
      mp=$(sed -n 's/.*metrics on http:\/\/[0-9.]*:\([0-9]*\).*/\1/p' "$dir/node-s$i-tokens.log" | head -1)
      [ -n "$mp" ] && python3 -c "import urllib.request,sys; sys.stdout.write(urllib.request.urlopen('http://127.0.0.1:%s/metrics' % sys.argv[1]).read().decode())" "$mp" >"$dir/metrics-s$i.txt" 2>/dev/null
      i=$((i + 1))
    done
  fi
  stop_nodes; stop_controller; stop_backends
  [ "$bdir" = "$dir" ] || rm -rf "$bdir"
  [ "$mode" = ha ] && { stop_pid "$PID1" "$PID2" "$ETCD_PID"; rm -rf "$ED"; }
  # Judged against the sets as they reached the controller (a late answer
  # moves its set to the next period: judged.json; rr sends none).
  if [ "$mode" = rr ]; then
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); [b.pop('set', None) for b in d['buckets']]; json.dump(d, sys.stdout)" \
      "$dir/real.json" >"$dir/judged.json"
  else
    touch "$dir/sets.log"
    python3 "$HERE/prop_real.py" late "$dir/real.json" "$dir/sets.log" >"$dir/judged.json" 2>"$dir/late.txt"
  fi
  # shellcheck disable=SC2086
  "$BIN/bqos-sim-prop" --scenario "$dir/judged.json" --measured "$dir/out" \
    --judged-csv "$dir/judged.csv" ${PR_REQUIRE:---require-met99 0.99 --require-worst 0.9 --require-limits} \
    >"$dir/check.txt" 2>&1
  PR_RC=$?
  cat "$dir/late.txt" >>"$dir/check.txt" 2>/dev/null
  return 0
}
