#!/bin/sh
# bench-percpu.sh - the node's CPU per memcached request against another build (issue 30): nodes of OLD_BIN and of this build (--threads 1 and 2) on one memcached, two clients we did not write (memcaslap, libmemcached's memcslap), interleaved rounds; TPS, node CPU per request (user + system from /proc over the node's own request count from `stats`), involuntary context switches per request, load average.
# Usage: bench-percpu.sh OLD_BIN [ROUNDS] [SECS]   (BIN=bin: this build; NODE_ARGS: options for every node, default --policy rr; CLIENTS: "memcaslap memcslap"; T2=0: no --threads 2 node; MID=DIR: a third build's node, --threads 1, named mid)
set -u
. "$(dirname "$0")/../../scripts/lib.sh"
. "$(dirname "$0")/front_lib.sh"
OLD=$1; ROUNDS=${2:-3}; SECS=${3:-4}; BIN=${BIN:-bin}; NODE_ARGS=${NODE_ARGS:---policy rr}
CLIENTS=${CLIENTS:-memcaslap memcslap}
T=$(mktemp -d /tmp/bench-percpu.XXXXXX)
trap 'cleanup; rm -rf "$T"' EXIT
for c in $CLIENTS; do
  command -v "$c" >/dev/null || { echo "bench-percpu: $c not installed (libmemcached-tools)" >&2; exit 1; }
done
tck=$(getconf CLK_TCK)
next_port; mc=$PORT
start_memcached "$mc" "$T/mc.log" || exit 1
next_port; po=$PORT; node old "$OLD" "$po"; no=$SPAWNED
next_port; p1=$PORT; node t1 "$BIN" "$p1" --threads 1; n1=$SPAWNED
setups="old:$po:$no t1:$p1:$n1"
if [ -n "${MID:-}" ]; then
  next_port; pm=$PORT; node mid "$MID" "$pm" --threads 1; nm=$SPAWNED
  setups="old:$po:$no mid:$pm:$nm t1:$p1:$n1"
fi
if [ "${T2:-1}" != 0 ]; then
  next_port; p2=$PORT; node t2 "$BIN" "$p2" --threads 2; n2=$SPAWNED
  setups="$setups t2:$p2:$n2"
fi
invol() { awk '/^nonvoluntary_ctxt_switches/ {s += $2} END {print s + 0}' /proc/"$1"/task/*/status; }
client() { # client NAME PORT: one run; prints the client's own operation count
  case $1 in
  memcaslap)
    memcaslap -s "127.0.0.1:$2" -T 2 -c 50 -t "${SECS}s" -X 100 -S "$((SECS + 60))s" >"$T/o" 2>&1
    sed -n 's/.*Ops: \([0-9]*\).*/\1/p' "$T/o" | tail -1 ;;
  memcslap) # 20 threads, each sets then gets its keys: about SECS seconds at 100,000 gets/s
    memcslap -s "127.0.0.1:$2" -c 20 -e "$((SECS * 5000))" -t get >"$T/o" 2>&1
    echo $((SECS * 5000 * 20 * 2)) ;;
  esac
}
echo "# $(nproc) cores, load average before: $(cut -d' ' -f1-3 /proc/loadavg); node options: $NODE_ARGS; memcaslap -T 2 -c 50 -X 100 for ${SECS} s, memcslap -c 20 -e $((SECS * 5000)) -t get"
printf '%-9s %-6s %-5s %9s %10s %10s %6s\n' client setup round tps node_us/op invol/op load
for cl in $CLIENTS; do
  r=1
  while [ "$r" -le "$ROUNDS" ]; do
    for s in $setups; do
      name=${s%%:*}; rest=${s#*:}; port=${rest%%:*}; pid=${rest#*:}
      q0=$(served "$port"); a0=$(ticks "$pid"); v0=$(invol "$pid"); w0=$(date +%s.%N)
      client "$cl" "$port" >/dev/null
      w1=$(date +%s.%N); a1=$(ticks "$pid"); v1=$(invol "$pid"); q1=$(served "$port")
      echo "$cl $name $r $((q1 - q0)) $((a1 - a0)) $((v1 - v0)) $w0 $w1 $(cut -d' ' -f1 /proc/loadavg)" |
        awk -v tck="$tck" '{ n = $4 > 0 ? $4 : 1
          printf "%-9s %-6s %-5s %9d %10.2f %10.3f %6s\n", $1, $2, $3, $4 / ($8 - $7), $5 * 1e6 / tck / n, $6 / n, $9 }' |
        tee -a "$T/all"
    done
    r=$((r + 1))
  done
done
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
awk '{ k = $1 " " $2; n[k]++; t[k] += $4; c[k] += $5; v[k] += $6 }
  END { for (k in n) printf "# mean %s: %d tps, node %.2f us/op, %.3f involuntary switches/op\n", k, t[k] / n[k], c[k] / n[k], v[k] / n[k] }' "$T/all" | sort
