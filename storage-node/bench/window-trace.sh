#!/bin/sh
# window-trace.sh - the adaptive window over time: one bqos-node (--policy tokens, auto window unless NODE_OPTS says otherwise) under memcaslap load that changes (50 connections, then 10, then 50), its stats polled every 50 ms into a CSV (time, window, latency, base latency, throughput, requests waiting at the node) and, with gnuplot, a PNG.
# Usage: window-trace.sh OUT.csv [OUT.png]
#   NODE_OPTS  bqos-node options (default "--policy tokens")
#   PHASES     "SECONDS:CONNECTIONS ..." (default "4:50 3:10 4:50")
#   BIN        where bqos-node is (default bin)
set -u
. "$(dirname "$0")/../../scripts/lib.sh"
CSV=$1; PNG=${2:-}; BIN=${BIN:-bin}
NODE_OPTS=${NODE_OPTS:---policy tokens}
PHASES=${PHASES:-"4:50 3:10 4:50"}
T=$(mktemp -d /tmp/window-trace.XXXXXX)
trap 'cleanup; rm -rf "$T"' EXIT
next_port; mc=$PORT
start_memcached "$mc" "$T/mc.log" || exit 1
next_port; nd=$PORT
# shellcheck disable=SC2086
spawn "$T/node.log" "$BIN/bqos-node" --name trace --memcached-listen "127.0.0.1:$nd" \
  --backend "memcached://127.0.0.1:$mc" --log-level warn $NODE_OPTS
wait_port "$nd" 10 || exit 1
# The poller: one connection, `stats` every 50 ms; throughput from the
# completions counter (the node's, not the window's last epoch).
python3 - "$nd" "$CSV" <<"PY" &
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
out = open(sys.argv[2], "w")
out.write("t_s,window,latency_us,base_us,throughput_ops,queued\n")
t0 = time.monotonic(); prev = None
while True:
    try:
        s.sendall(b"stats\r\n")
        buf = b""
        while not buf.endswith(b"END\r\n"):
            d = s.recv(65536)
            if not d:
                sys.exit(0)
            buf += d
    except OSError:
        sys.exit(0)
    now = time.monotonic() - t0
    st = dict(l.split(" ")[1:3] for l in buf.decode().split("\r\n") if l.startswith("STAT "))
    c = int(st["bqos_completions"])
    if prev is not None:
        ops = (c - prev[1]) / (now - prev[0])
        out.write("%.3f,%s,%s,%s,%.0f,%s\n" % (now, st["bqos_window"], st["bqos_window_latency_us"],
                                             st["bqos_window_base_us"], ops, st["bqos_queued"]))
        out.flush()
    prev = (now, c)
    time.sleep(0.05)
PY
poller=$!
LIB_PIDS="$LIB_PIDS $poller"
for ph in $PHASES; do
  memcaslap -s "127.0.0.1:$nd" -t "${ph%%:*}s" -T 2 -c "${ph##*:}" -X 100 2>&1 |
    awk -v c="${ph##*:}" '/^Run time/ { for (i = 1; i < NF; i++) if ($i == "TPS:") print c " connections: TPS " $(i + 1) }'
done
sleep 0.3
stop_pid "$poller"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
[ -n "$PNG" ] || exit 0
command -v gnuplot >/dev/null || { echo "window-trace: gnuplot missing, no plot" >&2; exit 0; }
gnuplot <<GP
set terminal png size 900,560 small
set output "$PNG"
set datafile separator ","
set multiplot layout 2,1 title "bqos-node adaptive window under memcaslap ($PHASES s:connections)"
set key top left
set ylabel "IOs"
set y2label "latency (us, log)"
set logscale y2
set y2tics
set ytics nomirror
plot "$CSV" using 1:2 with steps title "window" axes x1y1, \
     "" using 1:6 with steps title "waiting at the node" axes x1y1, \
     "" using 1:3 with lines title "latency at the backend" axes x1y2, \
     "" using 1:4 with lines title "base latency" axes x1y2
set xlabel "time (s)"
set ylabel "ops/s"
unset y2label
unset y2tics
unset logscale y2
plot "$CSV" using 1:5 with lines title "throughput"
unset multiplot
GP
echo "window-trace: $CSV, $PNG"
