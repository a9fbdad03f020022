#!/bin/sh
# it_nested_six.sh - nested buckets (issue 28) on six real nodes: one memcached, six bqos-nodes in front of it and a bqos-controller (1 s periods); a tenant capped at 400 IOs/s over 4 buckets on 2-4 of the six nodes each (a on s1-s3, b on s2-s5, c on s4-s6, d on s1 and s6; own limits 160/220/130/180, reservations 70/50/40/20, weights 1/4/1/1: by weight alone a would get 60, below its R), open-loop gets wanting 740/s (six_load.py), judged on the nodes' own per-period counters summed over the six (node_periods.py): the tenant's service within 1.01 x its cap in every period and the cap binding, each bucket within 1.01 x its own limit and at 95% of its reservation in every period, the tenant's worst 1 s window (sliding, from the same polls) within 1.05 x its cap (not judged when a node's polls were more than 100 ms apart); then with the parents taken away (set --parent none) the same load goes over the cap: the check fails without nesting.
# run-tests: alone
#
# About 20-25 s: two 4 s runs.  Keep the rates low: 6 nodes, 6 pollers and
# the load share 2 cores.
. "$(dirname "$0")/../../scripts/lib.sh"
it_begin it_nested_six
it_want memcached python3
it_need bqos-node bqos-controller bqos-ctl
CAP=400; SECS=4
# name R L nodes offered-per-node weight: what each bucket is and wants
# (the nodes' numbers, 1-6).  Offered 180/260/150/150 = 740/s; without the
# cap min(offered, L) adds up to 660 (1.65 x the cap).  b's weight 4 would
# leave a 60/s of the cap by weight alone, below its R of 70: its R must
# come first.
BUCKETS='a 70 160 1,2,3 60 1
b 50 220 2,3,4,5 65 4
c 40 130 4,5,6 50 1
d 20 180 1,6 75 1'

next_port; MP=$PORT; next_port; CP=$PORT; next_port; AP=$PORT
start_memcached "$MP" "$T/memcached.log" || { echo "memcached did not start"; exit 1; }
echo "$BUCKETS" | python3 -c 'import json,sys
b=[{"name":n,"reservation":int(r),"limit":int(l),"weight":int(w),"parent":"tenant"}
   for n,r,l,_,_,w in (x.split() for x in sys.stdin if x.strip())]
b.append({"name":"tenant","reservation":0,"limit":int(sys.argv[1])})
print(json.dumps({"buckets":b}))' $CAP >"$T/b.json"
ADMIN_EP="tcp://127.0.0.1:$AP"
spawn "$T/ctrl.log" "$BIN/bqos-controller" --buckets "$T/b.json" --listen "tcp://127.0.0.1:$CP" \
  --admin "$ADMIN_EP" --period 1s --intervals 5 --capacity 20000
wait_port "$CP" 10 || { echo "controller did not start"; cat "$T/ctrl.log"; exit 1; }
NP=""
for n in 1 2 3 4 5 6; do
  next_port; eval "N$n=$PORT"; NP="$NP $PORT"
  spawn "$T/node$n.log" "$BIN/bqos-node" --name s$n --memcached-listen "127.0.0.1:$PORT" \
    --backend "memcached://127.0.0.1:$MP" --controller "tcp://127.0.0.1:$CP"
done
for n in 1 2 3 4 5 6; do
  eval np=\$N$n
  wait_port "$np" 10 || { echo "node s$n did not start"; cat "$T/node$n.log"; exit 1; }
done
fcmp() { python3 -c "import sys; sys.exit(0 if ($1) else 1)"; }
ctl() { "$BIN/bqos-ctl" --endpoint "$ADMIN_EP" --timeout 3000 "$@"; }
# The streams of the load (BUCKET:PORT:RATE).
STREAMS=$(echo "$BUCKETS" | while read -r b _ _ ns rate _; do
  for n in $(echo "$ns" | tr , ' '); do eval echo "$b:\$N$n:$rate"; done
done)
# Until every node has the controller's table (all four buckets; a bucket
# new to a node is held at R 0 and L 0 until the controller's tokens reach
# it), then a first get of each bucket on each of its nodes: one python3,
# not one per request (each costs 0.2 s on this host).
# shellcheck disable=SC2086
python3 - $STREAMS <<'PY' || { echo "the nodes got no tokens"; tail -5 "$T"/*.log; exit 1; }
import socket, sys, time
def ask(port, req):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(req)
    buf = b""
    while not buf.endswith(b"END\r\n"):
        d = s.recv(65536)
        if not d:
            break
        buf += d
    s.close()
    return buf
ports = set(int(st.split(":")[1]) for st in sys.argv[1:])
end = time.time() + 10
while not all(b"STAT d:l_tokens" in ask(p, b"stats buckets\r\n") for p in ports):
    if time.time() > end:
        sys.exit(1)
    time.sleep(0.1)
for st in sys.argv[1:]:
    b, p, _ = st.split(":")
    ask(int(p), b"get %s:warm\r\n" % b.encode())
PY
sleep 1

# load TAG: the streams for SECS, every node polled (all four buckets) for
# SECS + 1 into $T/TAG.I.per and $T/TAG.I.trace.
load() {
  lp=""
  i=0
  for np in $NP; do
    i=$((i + 1))
    python3 "$HERE/node_periods.py" "$np" $((SECS + 1)) a,b,c,d "$T/$1.$i.trace" \
      >"$T/$1.$i.per" & lp="$lp $!"
  done
  # shellcheck disable=SC2086
  python3 "$HERE/six_load.py" $SECS $STREAMS >"$T/$1.load.json"; lrc=$?
  for p in $lp; do wait "$p"; done
  return $lrc
}

# judge TAG: "N WORST MEAN WIN OWN STATES GAP": the periods every poller
# saw whole under load (the first may be partial, the last outlasts the
# load), the tenant's worst and mean period (four buckets over six nodes)
# and its worst 1 s window as a share of the cap; each bucket's worst
# period as a share of its own limit and its least as a share of its
# reservation ("a:0.61:1.52,..."); the node states seen; the longest gap
# between two polls of a node (ms).
judge() {
  echo "$BUCKETS" >"$T/buckets.txt"
  python3 - "$T" "$1" $CAP <<'PY'
import sys
T, tag, cap = sys.argv[1], sys.argv[2], float(sys.argv[3])
bk = [l.split() for l in open(T + "/buckets.txt") if l.strip()]
names = [b[0] for b in bk]
per, states, first_end, last_end = [], set(), {}, {}
for i in range(1, 7):
    rows = [l.split() for l in open("%s/%s.%d.per" % (T, tag, i)) if l.strip()]
    # PERIOD SERVED STATE TIME a b c d (STATE may be empty)
    per.append({int(r[0]): [int(x) for x in r[-4:]] for r in rows[1:]})
    for r in rows:
        first_end.setdefault(i, {})[int(r[0])] = float(r[-5])
        states.add(r[2] if len(r) == 8 else "none")
common = sorted(set.intersection(*(set(v) for v in per)))[:-1]
if len(common) < 2:
    print("%d 0 0 0 - %s 0" % (len(common), ",".join(sorted(states))))
    sys.exit(0)
tot = [sum(sum(v[p]) for v in per) for p in common]
own = []
for j, b in enumerate(bk):
    s = [sum(v[p][j] for v in per) for p in common]
    own.append("%s:%.3f:%.2f" % (b[0], max(s) / float(b[2]), min(s) / float(b[1])))
# The 1 s windows: each node's served count so far (finished periods' tops
# plus the current one), interpolated between polls, summed over the nodes,
# over the span of the judged periods (from the latest node's start of the
# first to the earliest node's end of the last).
def cum(path):
    out, base, cur, top = [], 0, None, 0
    for l in open(path):
        t, p, *n = l.split()
        if p != cur:
            base, cur, top = base + top, p, 0
        top = max(top, sum(int(x) for x in n))
        out.append((float(t), base + top))
    return out
series = [cum("%s/%s.%d.trace" % (T, tag, i)) for i in range(1, 7)]
def at(s, t):
    lo, hi = 0, len(s) - 1
    if t <= s[0][0]:
        return s[0][1]
    if t >= s[hi][0]:
        return s[hi][1]
    while hi - lo > 1:
        m = (lo + hi) // 2
        if s[m][0] <= t:
            lo = m
        else:
            hi = m
    (t0, c0), (t1, c1) = s[lo], s[hi]
    return c0 + (c1 - c0) * (t - t0) / (t1 - t0)
pre = common[0] - 1
t0 = max([first_end[i][pre] for i in range(1, 7) if pre in first_end[i]] or
         [min(first_end[i][common[0]] for i in range(1, 7)) - 1.0])
t1 = min(first_end[i][common[-1]] for i in range(1, 7))
# The longest gap between two polls of one node in that span: a window's
# ends are interpolated, so its error is at most what the nodes served in
# one gap at each end (30-40 ms of polls: a few percent of the cap).
gap = max(b[0] - a[0] for s in series for a, b in zip(s, s[1:]) if b[0] >= t0 and a[0] <= t1)
win, t = 0.0, t0
while t + 1.0 <= t1:
    win = max(win, sum(at(s, t + 1.0) - at(s, t) for s in series))
    t += 0.02
print("%d %.4f %.4f %.4f %s %s %d" % (len(common), max(tot) / cap, sum(tot) / len(tot) / cap,
                                      win / cap, ",".join(own), ",".join(sorted(states)),
                                      gap * 1000))
PY
}
# verdict TAG RESULT: sets np worst mean win own states gap from judge's
# line.
verdict() {
  set -f
  # shellcheck disable=SC2086
  set -- $2
  set +f
  np=$1; worst=$2; mean=$3; win=$4; own=$5; states=$6; gap=$7
}
# own_ok OWN: every bucket's worst within 1.01 x its limit and its least at
# 0.95 x its reservation.
own_ok() {
  echo "$1" | tr , '\n' | awk -F: '$2 > 1.01 || $3 < 0.95 { bad = 1 } END { exit bad }'
}

load nested; rc=$?
verdict nested "$(judge nested)"
echo "# nested: $np periods, the tenant's worst $worst x its cap, mean $mean x, worst 1 s window $win x (polls at most $gap ms apart); bucket:worst/L:least/R $own; node states $states; load average $(cut -d' ' -f1-3 /proc/loadavg)"
check "the load ran (rc $rc) and $np >= 2 periods were seen whole on all six nodes" \
  '[ $rc -eq 0 ] && [ "$np" -ge 2 ]'
check "the tenant's cap holds over the six nodes: every period within 1.01 x, and it binds (worst above 0.9 x)" \
  'fcmp "$worst <= 1.01 and $worst >= 0.9"'
check "each bucket within 1.01 x its own limit and at 95% of its reservation in every period" \
  'own_ok "$own"'
# The window is judged only when the polls were close enough to place its
# ends (a starved poller would smear them).
check "the tenant's worst 1 s window within 1.05 x its cap (judged when a node's polls were at most 100 ms apart: $gap ms)" \
  'fcmp "$gap > 100 or $win <= 1.05"'

# The parents taken away: the same load goes over the cap.
for b in a b c d; do ctl set $b --parent none >/dev/null 2>&1 || not_ok "set $b --parent none"; done
sleep 1
load flat; rc=$?
verdict flat "$(judge flat)"
echo "# without the parent: $np periods, the tenant's worst $worst x its cap, mean $mean x, worst 1 s window $win x (polls at most $gap ms apart); bucket:worst/L:least/R $own"
check "without nesting the cap check fails (worst period above 1.01 x), each bucket still within its own limit" \
  '[ $rc -eq 0 ] && [ "$np" -ge 2 ] && fcmp "$worst > 1.01" && own_ok "$own"'

it_end 'tail -20 "$T/ctrl.log"; tail -10 "$T/node1.log"; cat "$T"/*.load.json'
