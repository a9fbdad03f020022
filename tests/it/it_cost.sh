#!/bin/sh
# it_cost.sh - cost-aware tokens end to end: a controller, a block node and a memcached node; a bucket with an IO limit far above what it uses and a bytes/s limit: fio (a client the project did not write) reading 64 KiB blocks gets the byte limit, not the device's rate (an unlimited bucket shows it); bqos-ctl set --limit-bytes changes it live and status shows it; bqos-nbd-load and bqos-load (16 KiB values on the memcached node, gets charged what they returned) report bytes/s per bucket at the limit; a byte reservation wins most of a saturated node; byte tokens are paced: fio's per-IO completion times put at most 1.05 x the byte limit (plus one request) in any 1 s window; /metrics shows byte tokens, credit waits and why a bucket waits; one byte reservation beyond the nodes' byte capacity draws an admission warning.
# Needs BIN (default bin); skips (exit 0 with a note) if fio or python3 is missing.
. "$(dirname "$0")/../../scripts/lib.sh"
it_begin it_cost
for t in fio python3; do
  command -v $t >/dev/null 2>&1 || { echo "it_cost: $t not installed (scripts/deps.sh); skipped"; exit 0; }
done
for b in bqos-nbd-node bqos-nbd-load bqos-controller bqos-ctl; do
  [ -x "$BIN/$b" ] || { echo "it_cost: missing $BIN/$b"; exit 1; }
done
MIB=1048576
# green (memcached, below): 100,000 IOs/s and 2 MiB/s; gold and bronze
# (a slow node, below): 100 MiB/s reserved for gold, nothing for bronze.
# red: at most 100,000 IOs/s (64 KiB reads at 4 MiB/s are 64 IOs/s: the IO
# limit alone would not bind) and 4 MiB/s; blue: no limit at all.
cat >"$T/b.json" <<EOF
{"buckets": [
  {"name": "red", "reservation": 0, "limit": 100000, "limit_bytes": $((4 * MIB))},
  {"name": "blue", "reservation": 0},
  {"name": "green", "reservation": 0, "limit": 100000, "limit_bytes": $((2 * MIB))},
  {"name": "gold", "reservation": 0, "reservation_bytes": $((100 * MIB))},
  {"name": "bronze", "reservation": 0}]}
EOF
# Periods of 1 s in 5 intervals (start_controller); the node paces byte
# tokens, so a measurement window need not be aligned with periods.
start_controller "$T/b.json" 20000 "$T"
next_port; np=$PORT
mkdir -p "$T/store"
spawn "$T/node.log" "$BIN/bqos-nbd-node" --name n1 --nbd-listen "127.0.0.1:$np" \
  --backend "file:$T/store/" --export-size 64m --buckets red,blue --outstanding 8 \
  --controller "$CTRL_EP" --capacity 20000 --metrics-listen 127.0.0.1:0
wait_port "$np" 10
# red's byte tokens, credit waits and why it waits, twice a second (shown
# if a check fails: a flake on a loaded host and a stall look different).
murl=$(sed -n 's/.*metrics on \(http:[^ ]*\).*/\1/p' "$T/node.log" | head -1)
while :; do
  printf '%s ' "$(date +%T.%N | cut -c1-12)"
  curl -sf "$murl" | grep 'bucket="red"' | grep -E '_held.* 1$|byte_tokens|credit_wait|_queued' |
    sed 's/bqos_bucket_//; s/node="n1",bucket="red",\{0,1\}//' | tr '\n' ' '
  echo
  sleep 0.5
done >"$T/red-mon.txt" 2>&1 &
MON=$!
sleep 1.5 # welcomed, first tokens

# fio_bw BUCKET SECONDS: bytes/s and IOs/s fio got reading 64 KiB blocks.
fio_bw() {
  fio --output-format=json --output="$T/fio-$1.json" --name="$1" --ioengine=nbd \
    --uri="nbd://127.0.0.1:$np/$1" --rw=randread --bs=64k --iodepth=4 --size=32m \
    --time_based --ramp_time=1 --runtime="$2" >/dev/null 2>&1 || return 1
  python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))["jobs"][0]["read"]
print("%d %.1f" % (r["bw_bytes"], r["iops"]))' "$T/fio-$1.json"
}

# held GOT LIMIT: GOT is at most 20% above LIMIT (a measurement window may
# hold part of one period more, see above) and not far below it (at least
# 40%: a machine loaded by other work may deliver less, never more).
held() { python3 -c 'import sys; g, l = map(float, sys.argv[1:]); sys.exit(0 if 0.4 * l <= g <= 1.2 * l else 1)' "$@"; }

set -- $(fio_bw red 4) 0 0; red_bw=$1; red_iops=$2
echo "# red: $red_bw bytes/s, $red_iops IOs/s (limits: $((4 * MIB)) bytes/s, 100000 IOs/s)"
check "red held at its 4 MiB/s byte limit ($red_bw bytes/s at $red_iops IOs/s, far below its IO limit)" \
  "held $red_bw $((4 * MIB))"
# Paced byte tokens, from the client's side: fio's completion time of
# every IO (a per-IO latency log); the most bytes any 1 s window holds once
# red is backlogged for a whole period (from 1 s: a bucket that starts
# mid-period gets that period's share over the time left, as for IOs,
# docs/decisions.md "Limits stay per-period quotas").
fio --name=redlog --ioengine=nbd --uri="nbd://127.0.0.1:$np/red" --rw=randread --bs=64k \
  --iodepth=4 --size=32m --time_based --runtime=6 --write_lat_log="$T/redlog" \
  --log_avg_msec=0 >/dev/null 2>&1
win=$(python3 -c '
import glob, sys
ev = []
for f in glob.glob(sys.argv[1] + "_clat*.log"):
    for line in open(f):
        x = line.split(",")
        if int(x[0]) >= 1000:
            ev.append((int(x[0]), int(x[3])))
ev.sort()
best, j, s = 0, 0, 0
for i in range(len(ev)):
    while j < len(ev) and ev[j][0] < ev[i][0] + 1000:
        s += ev[j][1]; j += 1
    best = max(best, s)
    s -= ev[i][1]
print(best if len(ev) > 100 else 0)' "$T/redlog" 2>/dev/null)
echo "# red, paced: at most ${win:-?} bytes in any 1 s window of fio completions (limit $((4 * MIB)))"
check "red's byte tokens are paced: at most 1.05 x 4 MiB + one 64 KiB request in any 1 s (${win:-none})" \
  "[ ${win:-0} -gt $((2 * MIB)) ] && [ ${win:-0} -le $((4 * MIB * 105 / 100 + 65536)) ]"
curl -sf "$murl" >"$T/metrics.txt" 2>/dev/null
for m in 'bqos_bucket_byte_tokens{node="n1",bucket="red",class="L"}' \
  'bqos_bucket_credit_wait_seconds{node="n1",bucket="red",dimension="bytes",class="L"}' \
  'bqos_bucket_held{node="n1",bucket="red",reason="byte_credit"}'; do
  check "/metrics has $m" "grep -qF '$m' '$T/metrics.txt'"
done

set -- $(fio_bw blue 2) 0 0; blue_bw=$1
echo "# blue (no limit): $blue_bw bytes/s"
check "an unlimited bucket gets more than twice that ($blue_bw bytes/s): the device did not bind" \
  "[ $blue_bw -gt $((2 * red_bw)) ]"

check "bqos-ctl set red --limit-bytes 8m" \
  "'$BIN/bqos-ctl' --endpoint '$ADMIN_EP' set red --limit-bytes 8m >'$T/set.txt' 2>&1"
sleep 1.5
set -- $(fio_bw red 3) 0 0; red2=$1
echo "# red after set: $red2 bytes/s (limit $((8 * MIB)) bytes/s)"
check "the new byte limit holds ($red2 bytes/s, want 8 MiB/s)" "held $red2 $((8 * MIB))"

"$BIN/bqos-ctl" --endpoint "$ADMIN_EP" status >"$T/status.txt" 2>&1
check "bqos-ctl status lists red's byte limit" \
  "grep -q 'LIMIT BYTES/S' '$T/status.txt' && grep -q '8388608' '$T/status.txt'"
"$BIN/bqos-ctl" --endpoint "$ADMIN_EP" --json buckets >"$T/buckets.json" 2>&1
check "bqos-ctl --json buckets keeps limit_bytes" \
  "[ \"\$(jget '$T/buckets.json' 'd[\"buckets\"][0][\"limit_bytes\"]')\" = 8388608 ]"
# The project's own load tool reports bytes/s per bucket: red at 8 MiB/s.
cat >"$T/scen.json" <<EOF
{"duration": 4, "period": 1, "intervals": 5, "warmup_periods": 1, "seed": 1, "capacity": 20000,
 "workload": {"outstanding": 4, "timeout_ms": 10000},
 "servers": [{"name": "n1", "address": "127.0.0.1:$np"}],
 "buckets": [{"name": "red", "reservation": 0, "servers": ["n1"]}]}
EOF
"$BIN/bqos-nbd-load" -q --block-size 65536 -o "$T/load" "$T/scen.json" >/dev/null 2>"$T/load.err"
lbw=$(jget "$T/load/summary.json" 'int(d["buckets"][0]["bytes_rate"])')
echo "# bqos-nbd-load: red $lbw bytes/s"
check "bqos-nbd-load reports red's bytes/s (${lbw:-none}, limit 8 MiB/s)" "held ${lbw:-0} $((8 * MIB))"
# A memcached node under the same controller: green's 16 KiB sets and gets
# (a get charged what it returned) held to 2 MiB/s; bqos-load reports it.
if command -v memcached >/dev/null 2>&1 && [ -x "$BIN/bqos-node" ] && [ -x "$BIN/bqos-load" ]; then
  next_port; mc=$PORT
  start_memcached "$mc" "$T/memcached.log"
  next_port; mp=$PORT
  spawn "$T/mcnode.log" "$BIN/bqos-node" --name m1 --memcached-listen "127.0.0.1:$mp" \
    --backend "memcached://127.0.0.1:$mc" --controller "$CTRL_EP" --capacity 20000
  wait_port "$mp" 10
  sleep 1
  cat >"$T/mcscen.json" <<EOF
{"duration": 4, "period": 1, "intervals": 5, "seed": 1, "capacity": 20000,
 "workload": {"get_ratio": 0.5, "value_size": 16384, "preload": 200, "outstanding": 4},
 "servers": [{"name": "m1", "address": "127.0.0.1:$mp", "backend": "127.0.0.1:$mc"}],
 "buckets": [{"name": "green", "reservation": 0, "servers": ["m1"]}]}
EOF
  "$BIN/bqos-load" -q -o "$T/mcload" "$T/mcscen.json" >/dev/null 2>"$T/mcload.err"
  mbw=$(jget "$T/mcload/summary.json" 'int(d["buckets"][0]["bytes_rate"])')
  mio=$(jget "$T/mcload/summary.json" 'int(d["buckets"][0]["completed"] / 4)')
  echo "# bqos-load on the memcached node: green $mbw bytes/s, $mio IOs/s"
  check "memcached node: green held at 2 MiB/s (${mbw:-none} bytes/s at ${mio:-?} IOs/s)" \
    "held ${mbw:-0} $((2 * MIB))"
else
  echo "# memcached, bqos-node or bqos-load missing: memcached part skipped"
fi
# A byte reservation: a node of 2,500 IOs/s (5 workers, 2 ms an IO), i.e.
# 160 MB/s of 64 KiB reads, saturated by gold and bronze alike; gold has
# 100 MiB/s reserved (and no IO reservation: its unit R-tokens put it in
# step 1) and gets most of it, where round robin would split it evenly.
next_port; sp=$PORT
spawn "$T/slow.log" "$BIN/bqos-nbd-node" --name n2 --nbd-listen "127.0.0.1:$sp" \
  --backend "file:$T/store/" --export-size 64m --buckets gold,bronze --outstanding 5 \
  --workers 5 --io-time-us 2000 --controller "$CTRL_EP" --capacity 2500
wait_port "$sp" 10
sleep 1.5
fio --output-format=json --output="$T/fio-res.json" --ioengine=nbd --rw=randread --bs=64k \
  --iodepth=8 --size=32m --time_based --ramp_time=1 --runtime=3 \
  --name=gold --uri="nbd://127.0.0.1:$sp/gold" \
  --name=bronze --uri="nbd://127.0.0.1:$sp/bronze" >/dev/null 2>&1
set -- $(python3 -c '
import json, sys
b = {x["jobname"]: x["read"]["bw_bytes"] for x in json.load(open(sys.argv[1]))["jobs"]}
print(b["gold"], b["bronze"])' "$T/fio-res.json" 2>/dev/null) 0 0
echo "# saturated node: gold $1 bytes/s, bronze $2 bytes/s (gold reserves $((100 * MIB)))"
check "a byte reservation gives gold most of a saturated node (gold $1, bronze $2 bytes/s)" \
  "[ $1 -gt $((2 * $2)) ] && [ $2 -gt 0 ]"

# Admission in bytes (--admission warn): a byte reservation beyond what the
# nodes serve per busy second is accepted with a warning that names bytes/s.
"$BIN/bqos-ctl" --endpoint "$ADMIN_EP" set bronze --reservation-bytes 1000g \
  >"$T/adm.out" 2>"$T/adm.err"
rc=$?
check "a byte reservation beyond the nodes' byte capacity: accepted with a warning in bytes/s (rc $rc)" \
  '[ $rc -eq 0 ] && grep -q "^bqos-ctl: warning: .*byte reservation .*bytes/s" "$T/adm.err"'

kill "$MON" 2>/dev/null
cleanup # every process stopped: their logs end with any sanitizer report
check "no sanitizer report" '! grep -qE "Sanitizer|runtime error:" "$T"/*.log'
it_end "cat '$T/red-mon.txt' '$T/node.log' '$T/controller.log' '$T/mcnode.log' '$T/slow.log' '$T/status.txt' '$T/set.txt' '$T/adm.err'"
