#!/bin/sh
# bench-cpu-ab.sh - the node's CPU per memcached request, build B against build A, in many short interleaved pairs (issue 30): per pair B's us/request over A's, the median with its 95% interval, the spread, how many pairs beat a target ratio; then what does not depend on the host's load: system calls and context switches per request (perf stat tracepoints), each build alone in its own rounds.
# Usage: bench-cpu-ab.sh [A_BIN] [B_BIN] [PAIRS] [SECS]   (A_BIN and B_BIN default $BIN, i.e. bin: the calibration;
#   PAIRS default 12, SECS per run default 3; NODE_ARGS: options for both nodes, default --policy rr;
#   TARGET: the ratio counted, default 0.75; COUNT=0: no counting rounds; COUNT_ROUNDS: per build, default 2)
# CPU is the node's scheduler run time (the sum over its threads of /proc/PID/task/*/schedstat, in ns, not
# 10 ms ticks); requests are the node's own `stats` (gets + sets + touches + flushes). A pair runs A then B
# on odd pairs and B then A on even ones, so that a load that rises or falls through a pair does not favour
# one side. The 95% interval of the median is distribution-free (order statistics of the binomial), and
# "below TARGET k of n, p" is the one-sided sign test that the median ratio is below TARGET.
set -u
. "$(dirname "$0")/../../scripts/lib.sh"
. "$(dirname "$0")/front_lib.sh"
BIN=${BIN:-bin}; A=${1:-$BIN}; B=${2:-$BIN}; PAIRS=${3:-12}; SECS=${4:-3}
NODE_ARGS=${NODE_ARGS:---policy rr}; TARGET=${TARGET:-0.75}; COUNT=${COUNT:-1}; COUNT_ROUNDS=${COUNT_ROUNDS:-2}
command -v memcaslap >/dev/null || { echo "bench-cpu-ab: memcaslap not installed (libmemcached-tools)" >&2; exit 1; }
T=$(mktemp -d /tmp/bench-cpu-ab.XXXXXX)
trap 'cleanup; rm -rf "$T"' EXIT
next_port; mc=$PORT
start_memcached "$mc" "$T/mc.log" || exit 1
next_port; pa=$PORT; node a "$A" "$pa"; na=$SPAWNED
next_port; pb=$PORT; node b "$B" "$pb"; nb=$SPAWNED
# runns PID: the process's CPU so far in ns, every thread's (schedstat's first field)
runns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{ s += $1 } END { printf "%.0f\n", s }'; }
load() { cut -d' ' -f1 /proc/loadavg; }
run() { # run PORT PID: one memcaslap run; prints requests and CPU ns
  q0=$(served "$1"); c0=$(runns "$2")
  memcaslap -s "127.0.0.1:$1" -T 2 -c 50 -t "${SECS}s" -X 100 -S "$((SECS + 60))s" >"$T/c" 2>&1
  c1=$(runns "$2"); q1=$(served "$1")
  echo "$((q1 - q0)) $((c1 - c0))"
}
echo "# $(nproc) cores, load average before: $(cut -d' ' -f1-3 /proc/loadavg); A=$A B=$B; node options: $NODE_ARGS; memcaslap -T 2 -c 50 -X 100, ${SECS} s per run, $PAIRS pairs"
printf '%-4s %-3s %9s %8s %9s %8s %7s %6s\n' pair ord a_reqs a_us/op b_reqs b_us/op b/a load
i=1
while [ "$i" -le "$PAIRS" ]; do
  if [ $((i % 2)) = 1 ]; then ord=AB; ra=$(run "$pa" "$na"); rb=$(run "$pb" "$nb")
  else ord=BA; rb=$(run "$pb" "$nb"); ra=$(run "$pa" "$na"); fi
  echo "$i $ord $ra $rb $(load)" | awk '{ a = $4 / 1000 / ($3 > 0 ? $3 : 1); b = $6 / 1000 / ($5 > 0 ? $5 : 1)
    printf "%-4s %-3s %9d %8.3f %9d %8.3f %7.3f %6s\n", $1, $2, $3, a, $5, b, (a > 0 ? b / a : 0), $7 }' | tee -a "$T/all"
  i=$((i + 1))
done
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
# the summary: median and its 95% interval by order statistics, quartiles, extremes, the sign test
sort -n -k7 "$T/all" | awk -v target="$TARGET" '{ v[NR] = $7; a += $4; b += $6; if ($7 < target) k++ }
  function q(p,  x, i) { x = 1 + (NR - 1) * p; i = int(x); return i >= NR ? v[NR] : v[i] + (x - i) * (v[i + 1] - v[i]) }
  function lchoose(n, r,  s, i) { s = 0; for (i = 1; i <= r; i++) s += log(n - r + i) - log(i); return s }
  END {
    n = NR; lo = 1; hi = n
    # the largest j with P(X < j) <= 2.5% for X ~ Bin(n, 1/2): [v[j], v[n + 1 - j]] holds the median with >= 95%
    c = 0; for (j = 0; j < n; j++) { c += exp(lchoose(n, j) - n * log(2)); if (c > 0.025) break; lo = j + 1 }
    if (lo < 1) lo = 1; hi = n + 1 - lo
    p = 0; for (j = k; j <= n; j++) p += exp(lchoose(n, j) - n * log(2))
    printf "# B/A per pair: median %.3f (95%% interval %.3f-%.3f), quartiles %.3f-%.3f, range %.3f-%.3f; ratio of the means %.3f (A %.3f, B %.3f us/op)\n",
      q(0.5), v[lo], v[hi], q(0.25), q(0.75), v[1], v[n], b / a, a / n, b / n
    printf "# pairs below %.2f: %d of %d (sign test, one-sided p = %.4f)\n", target, k, n, p
  }'
[ "$COUNT" = 0 ] && exit 0
# Counting rounds: each build alone, perf stat on its process for the middle of a run. System calls and
# context switches per request do not depend on how fast the host is today (only on how many requests a
# pass finds, which the clients' concurrency sets); CPU time does.
command -v perf >/dev/null || { echo "# no perf: no counting rounds"; exit 0; }
EV=raw_syscalls:sys_enter,context-switches
for s in io_uring_enter recvfrom sendto sendmsg recvmsg writev readv read write epoll_wait epoll_ctl poll; do
  EV="$EV,syscalls:sys_enter_$s"
done
echo "# counting rounds (perf stat -e raw_syscalls:sys_enter,context-switches,syscalls:sys_enter_* for $((SECS - 1)) s within a run), per request:"
printf '%-3s %-5s %9s %8s %8s  %s\n' bld round reqs sys/op cs/op by-call
count() { # count NAME PORT PID ROUND
  memcaslap -s "127.0.0.1:$2" -T 2 -c 50 -t "$((SECS + 1))s" -X 100 -S "$((SECS + 60))s" >"$T/c" 2>&1 &
  cl=$!
  sleep 1
  q0=$(served "$2")
  perf stat -x, -e "$EV" -p "$3" -o "$T/perf" -- sleep "$((SECS - 1))" 2>/dev/null
  q1=$(served "$2")
  wait "$cl"
  awk -F, -v n="$((q1 - q0))" -v b="$1" -v r="$4" '
    $3 ~ /^(raw_syscalls:sys_enter|context-switches)$/ { t[$3] = $1 }
    $3 ~ /^syscalls:sys_enter_/ && $1 + 0 > 0 { s = $3; sub(/^syscalls:sys_enter_/, "", s); by = by sprintf(" %s %.3f", s, $1 / n) }
    END { printf "%-3s %-5s %9d %8.3f %8.3f %s\n", b, r, n, t["raw_syscalls:sys_enter"] / n, t["context-switches"] / n, by }' "$T/perf"
}
r=1
while [ "$r" -le "$COUNT_ROUNDS" ]; do
  count A "$pa" "$na" "$r"; count B "$pb" "$nb" "$r"
  r=$((r + 1))
done
