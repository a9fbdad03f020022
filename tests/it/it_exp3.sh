#!/bin/sh
# it_exp3.sh - a short Experiment 3 on loopback (real memcached, bqos-nodes, bqos-controller): with pShift every reservation is met (>= 99%) and, with limits, none is exceeded by more than 1%; without QoS (the profile run) the same checks fail.
# run-tests: alone
#
# One attempt takes about 20 s.  Rates are scaled to 70% of the paper's
# (SCALE=70: reservations 42% of a server's profiled capacity, limits 84%):
# on this 2-core machine bucket b1's 15 client threads share a CPU with 60
# others, and at 60% it could not always draw its reservation from s1 even
# with every token (client-side starvation, not a QoS failure).  Without QoS
# b1 gets about a quarter of s1 and b4 about twice a server, so both checks
# still tell QoS from none; the profile run (round robin nodes) is checked to
# fail them.  Limits are held to 1% as in the issue (nodes charge the IOs
# served between a report and the next push against the new counts, which
# closed the 0-2% overshoot docs/workloads.md describes).  On a busy machine
# one server can lose a period to other processes, so a failed attempt is
# retried once (both are printed); two failures in a row fail the test.
. "$(dirname "$0")/../../scripts/lib.sh"
it_begin it_exp3
EX=$(cd "$(dirname "$0")/../../examples" && pwd)
SCALE=70

# verify OUT: the checks on the summaries in OUT; prints one line per check
# and returns the number that failed.
verify() {
  cap=$(awk '$1 == "capacity" { print $2 }' "$1/profile.txt" 2>/dev/null)
  [ -n "$cap" ] || { echo "not ok - no profiled capacity"; return 1; }
  awk -v cap="$cap" -v scale=$SCALE '
    FNR == 1 { b = ""; run = FILENAME; sub(/\/summary\.json$/, "", run); sub(/.*\//, "", run) }
    /"name": "b[0-9]"/ { gsub(/[",]/, "", $2); b = $2 }
    b && /"reservation"/ { gsub(/,/, "", $2); r[run, b] = $2 + 0 }
    b && /"limit"/ { gsub(/,/, "", $2); l[run, b] = $2 + 0 }
    b && /"achieved"/ { gsub(/,/, "", $2); a[run, b] = $2 + 0 }
    function check(ok, what) { printf "%s - %s\n", ok ? "ok" : "not ok", what; if (!ok) bad++ }
    END {
      for (i = 1; i <= 4; i++) {
        b = "b" i
        check(a["res", b] >= 0.99 * r["res", b],
          sprintf("pShift-R: %s meets its reservation (%s >= 99%% of %s)", b, a["res", b], r["res", b]))
        check(a["lim", b] >= 0.99 * r["lim", b] && a["lim", b] <= 1.01 * l["lim", b],
          sprintf("pShift-R+L: %s meets its reservation and holds its limit (%s in [99%% of %s, 101%% of %s])",
            b, a["lim", b], r["lim", b], l["lim", b]))
      }
      # The profile run: round robin nodes, no controller.
      res = 0.6 * cap * scale / 100; lim = 1.2 * cap * scale / 100
      check(a["profile", "b1"] > 0 && a["profile", "b1"] < 0.99 * res,
        sprintf("without QoS b1 misses the reservation (%s < 99%% of %.0f)", a["profile", "b1"], res))
      check(a["profile", "b4"] > 1.03 * lim,
        sprintf("without QoS b4 exceeds the limit (%s > 103%% of %.0f)", a["profile", "b4"], lim))
      exit bad
    }' "$1/res/summary.json" "$1/lim/summary.json" "$1/profile/summary.json"
}

attempt() {
  rm -rf "$T/out"
  BIN=${BIN:-bin} OUT=$T/out RUNS="res lim" DUR=${DUR:-5} PROFILE=2 PRELOAD=1000 SCALE=$SCALE \
    CHECK=0 sh "$EX/exp3.sh"
  rc=$?
  for run in profile res lim; do
    if [ ! -s "$T/out/$run/summary.json" ]; then
      echo "it_exp3: run $run produced no summary (is bqos-controller built?)"
      rc=1
    fi
  done
  [ $rc -eq 0 ] && { verify "$T/out" || rc=1; }
  if [ $rc -ne 0 ]; then
    for f in "$T"/out/logs/load-*.log "$T"/out/logs/controller-*.log; do
      [ -f "$f" ] && { echo "== $f"; grep -v " info: " "$f" | tail -5; }
    done
  fi
  return $rc
}

attempt && exit 0
echo "it_exp3: first attempt failed; retrying once"
attempt
