#!/bin/sh
# bench-bigtable.sh - the controller with a big bucket table: start-up, the first `set` and `remove` and the next ones (admin round trip = the main loop's stall), `status` size and time, memory per bucket after start-up and after the changes and a few periods, full rebuilds of ctrl's state, SIGTERM latency during a change (docs/performance.md, "Big bucket tables").
# Usage: controller/bench/bench-bigtable.sh [N...]   (default: 30000; BIN defaults to bin; TIMEOUT=S caps each step, default 120; REPS=K next changes timed, default 10)
set -u
HERE=$(cd "$(dirname "$0")/../../scripts" && pwd)
. "$HERE/lib.sh"
BIN=${BIN:-bin}
CAP=${TIMEOUT:-120}
REPS=${REPS:-10} # the next changes of each kind timed after the first
T=$(mktemp -d /tmp/bench_bigtable.XXXXXX)
trap 'cleanup; rm -rf "$T"' EXIT
trap 'exit 130' INT TERM

# now: seconds since the epoch with ms.
now() { date +%s.%N; }
ms() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.0f", (b - a) * 1000 }'; }
rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }

# ctl ARGS...: bqos-ctl against the admin port, capped at $CAP s.
ctl() { "$BIN/bqos-ctl" --endpoint "tcp://127.0.0.1:$ap" --timeout $((CAP * 1000)) "$@"; }

# start FILE: the controller on FILE; sets pid, ap, and t_start (ms until
# the admin endpoint answers).
start() {
  next_port; cp=$PORT; next_port; ap=$PORT
  spawn "$T/controller.log" "$BIN/bqos-controller" --buckets "$1" \
    --listen "tcp://127.0.0.1:$cp" --admin "tcp://127.0.0.1:$ap" --period 1s --capacity 1000000000
  pid=$SPAWNED
  t0=$(now)
  # It binds its endpoints once the table is loaded (a probe with a
  # command would queue work behind the load).
  wait_port "$ap" "$CAP" || { echo "controller did not start:"; tail -5 "$T/controller.log"; exit 1; }
  t_start=$(ms "$t0" "$(now)")
}

# timed VAR CMD...: runs CMD, its ms into VAR ("timeout" if it failed).
timed() {
  v=$1; shift
  t0=$(now)
  if "$@" >"$T/out" 2>&1; then eval "$v=$(ms "$t0" "$(now)")"; else eval "$v=fail"; fi
}

# SIGTERM while a change is in the main loop: ms from the signal to exit.
term_latency() {
  ctl set tenant-new2 --reservation 2 >/dev/null 2>&1 &
  cpid=$!
  sleep 0.05
  t0=$(now)
  kill "$pid"
  n=$((CAP * 20))
  while kill -0 "$pid" 2>/dev/null && [ $n -gt 0 ]; do sleep 0.05; n=$((n - 1)); done
  if kill -0 "$pid" 2>/dev/null; then t_term=">${CAP}000"; kill -9 "$pid"; else t_term=$(ms "$t0" "$(now)"); fi
  kill "$cpid" 2>/dev/null # its controller is gone: no answer will come
  wait "$cpid" 2>/dev/null
}

echo "load average: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs, step cap ${CAP}s"
bucket_table 1 "$T/one.json"
start "$T/one.json"
rss0=$(rss_kb "$pid")
stop_pid "$pid"
echo "| buckets | file | start-up | RSS | RSS/bucket | first set | first remove | next changes (median/max ms) | loop time per change (ms; median/max) | ctrl rebuilds | status (default) | status --json (default) | summary (--limit 0) | top 10 (--sort reservation) | RSS after (per bucket) | SIGTERM in a set |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
for N in ${@:-30000}; do
  rm -f "$T/b.json.journal" "$T/b.json.journal.ignored" # the last size's
  bucket_table "$N" "$T/b.json"
  size=$(wc -c <"$T/b.json")
  start "$T/b.json"
  rss=$(rss_kb "$pid")
  per=$(awk -v a="$rss" -v b="$rss0" -v n="$N" 'BEGIN { printf "%.0f B", (a - b) * 1024 / n }')
  timed t_set ctl set tenant-new --reservation 1 --limit 10
  timed t_rm ctl remove tenant-0000001
  # The next REPS changes of each kind (a change of an existing bucket,
  # a new one, a removal): the first change makes the admin's and ctrl's
  # tables their own (copy on write), the next ones are the steady cost.
  : >"$T/times"
  i=0
  while [ $i -lt "$REPS" ]; do
    timed t ctl set "tenant-000$((2000 + i))" --limit $((5000 + i)); echo "set $t" >>"$T/times"
    timed t ctl set "tenant-x$i" --reservation 1; echo "add $t" >>"$T/times"
    timed t ctl remove "tenant-000$((3000 + i))"; echo "rm $t" >>"$T/times"
    i=$((i + 1))
  done
  med() { awk -v k="$1" '$1 == k {print $2}' "$T/times" | sort -n |
    awk '{a[NR] = $1} END {if (NR) printf "%s/%s", a[int((NR + 1) / 2)], a[NR]; else printf "n/a"}'; }
  t_next="set $(med set), add $(med add), remove $(med rm)"
  # The loop's own time per change, as the controller logs it (without
  # bqos-ctl's start and the round trip): first, then median/max of the rest.
  grep -oE "bucket tenant-[^ ]* (created|changed|removed).*\(([0-9.]+) ms\)" "$T/controller.log" |
    sed -E 's/^bucket [^ ]* ([a-z]*).*\(([0-9.]+) ms\)$/\1 \2/' >"$T/loop"
  # loopmed KIND: median/max of the loop's times of KIND after the first two changes
  loopmed() { tail -n +3 "$T/loop" | awk -v k="$1" '$1 == k {print $2}' | sort -n |
    awk '{a[NR] = $1} END {if (NR) printf "%s/%s", a[int((NR + 1) / 2)], a[NR]; else printf "n/a"}'; }
  t_loop="first set $(awk 'NR == 1 {print $2}' "$T/loop"), first remove $(awk 'NR == 2 {print $2}' "$T/loop"); next: set $(loopmed changed), add $(loopmed created), remove $(loopmed removed)"
  ctl --json status --limit 0 >"$T/st.json" 2>/dev/null
  rebuilds=$(python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["stats"]; print("%s full, %s in place" % (s.get("full_rebuilds", "?"), s.get("bucket_changes", "?")))' "$T/st.json" 2>/dev/null || echo "?")
  timed t_st ctl status
  st_lines=$(wc -l <"$T/out")
  timed t_sj ctl --json status
  sj_bytes=$(wc -c <"$T/out")
  if "$BIN/bqos-ctl" --help 2>&1 | grep -q -- '--sort'; then
    timed t_sum ctl status --limit 0
    timed t_top ctl status --limit 10 --sort reservation
  else t_sum="n/a"; t_top="n/a"; fi
  sleep 3 # a few periods: each judges every bucket (history rings)
  rss2=$(rss_kb "$pid")
  per2=$(awk -v a="$rss2" -v b="$rss0" -v n="$N" 'BEGIN { printf "%.0f B", (a - b) * 1024 / n }')
  term_latency
  echo "| $N | $((size / 1024)) KiB | ${t_start} ms | $((rss / 1024)) MiB | $per | ${t_set} ms | ${t_rm} ms | $t_next | $t_loop | $rebuilds | ${t_st} ms, $st_lines lines | ${t_sj} ms, $((sj_bytes / 1024)) KiB | ${t_sum} ms | ${t_top} ms | $((rss2 / 1024)) MiB, $per2 | ${t_term} ms |"
done
