#!/bin/sh
# it_ctlclient.sh - the node side of the control protocol in real daemons: two bqos-nbd-nodes and a bqos-node (memcached) with --controller register with a real bqos-controller (seen through bqos-ctl), fall back when the controller dies (n1 to rr, asked for; the others to static, the default), resume when it returns, and say goodbye on exit.
. "$(dirname "$0")/../../scripts/lib.sh"
it_begin it_ctlclient
# node_state NAME: the node's state in `bqos-ctl --json status` (or "absent").
node_state() {
  "$BIN/bqos-ctl" --endpoint "$ADMIN_EP" --timeout 2000 --json status 2>/dev/null |
    python3 -c "import json,sys
d=json.load(sys.stdin)
print(next((n['state'] for n in d['nodes'] if n['name']=='$1'), 'absent'))" 2>/dev/null
}

cat >"$T/b.json" <<'JSON'
{"buckets":[{"name":"red","reservation":100,"limit":200},{"name":"blue","reservation":50},
 {"name":"green","reservation":30,"limit":60}]}
JSON
start_controller "$T/b.json" 10000 "$T" || { echo "controller did not start"; exit 1; }
ctl_ep=$CTRL_EP; admin_ep=$ADMIN_EP
mkdir -p "$T/store"
# and a memcached node (bqos-node) in front of a real memcached
next_port; MP=$PORT; next_port; NP=$PORT
start_memcached "$MP" "$T/memcached.log" || { echo "memcached did not start"; exit 1; }
spawn "$T/m1.log" "$BIN/bqos-node" --name m1 --memcached-listen "127.0.0.1:$NP" \
  --backend "memcached://127.0.0.1:$MP" --config "$T/b.json" --controller "$CTRL_EP"
wait_port "$NP" 10 || { echo "bqos-node did not start"; cat "$T/m1.log"; exit 1; }
for n in n1 n2; do
  fb=static; [ $n = n1 ] && fb=rr
  spawn "$T/$n.log" "$BIN/bqos-nbd-node" --name "$n" --nbd-listen 127.0.0.1:0 \
    --backend "file:$T/store/$n/" --export-size 1m --buckets red --controller "$CTRL_EP" \
    --capacity 5000 --fallback $fb
  eval "PID_$n=\$SPAWNED"
done

check "n1 is up at the controller" 'wait_for "[ \"\$(node_state n1)\" = up ]" 10'
check "m1 (bqos-node) is up at the controller" 'wait_for "[ \"\$(node_state m1)\" = up ]" 10'
check "m1 runs on tokens" 'wait_for "grep -q \"resuming policy tokens\" \"$T/m1.log\"" 10'
# mc_reply REQUEST: m1's answer to REQUEST (\r\n written literally), read up to
# its final END, with CRLF turned into "|".
mc_reply() { mc_ask "$NP" "$1"; }
check "m1 still serves memcached" \
  '[ "$(mc_reply "set red:k 0 0 2\r\nhi\r\nget red:k\r\n")" = "STORED|VALUE red:k 0 2|hi|END|" ]'
check "n2 is up at the controller" 'wait_for "[ \"\$(node_state n2)\" = up ]" 10'
# bucket_stat BUCKET FIELD: that counter in m1's scheduler (`stats buckets`).
bucket_stat() {
  mc_reply "stats buckets\r\n" | tr '|' '\n' |
    awk -v k="STAT $1:$2 " 'index($0, k) == 1 { print substr($0, length(k) + 1); f = 1 }
                             END { if (!f) print "none" }'
}
bucket_weight() { bucket_stat "$1" weight; }
# green (limited, no traffic anywhere) gets a provisional share of its
# headroom on every node (3 nodes: 10 R and 10 L each), never more in all.
green_share() {
  r=$(bucket_stat green r_tokens); l=$(bucket_stat green l_tokens)
  [ "$r" -ge 10 ] 2>/dev/null && [ "$l" -ge 10 ] && [ $((r + l)) -le 60 ]
}
check "an unreported limited bucket holds a provisional share on m1" 'wait_for green_share 10'
check "m1 starts with red's weight 1" '[ "$(bucket_weight red)" = 1 ]'
"$BIN/bqos-ctl" --endpoint "$ADMIN_EP" set red --reservation 100 --limit 200 --weight 7 >/dev/null 2>&1
check "a weight set with bqos-ctl reaches m1's scheduler" 'wait_for "[ \"\$(bucket_weight red)\" = 7 ]" 10'
check "n1 was welcomed" 'grep -q "welcomed" "$T/n1.log"'
check "n1 runs on tokens" 'wait_for "grep -q \"resuming policy tokens\" \"$T/n1.log\"" 10'
both_reported() {
  "$BIN/bqos-ctl" --endpoint "$ADMIN_EP" status >"$T/status.txt" 2>&1
  [ "$(grep -Ec "^n[12] +up +[0-9]+ ms +5000 " "$T/status.txt")" -eq 2 ]
}
check "status lists both nodes with a recent report" 'wait_for both_reported 10'

# The controller dies: the nodes keep their tokens until the period ends,
# then fall back: n1 to rr (it asked), n2 and m1 to static.  Lines are
# counted from here: on a loaded host a node may have fallen back and
# resumed already (a late round), and that line must not pass for this one.
# more PATTERN FILE BEFORE: FILE has more lines matching PATTERN than BEFORE.
more() { [ "$(grep -c "$1" "$2")" -gt "$3" ]; }
fb_n1=$(grep -c "warn: .*falling back to rr" "$T/n1.log")
fb_n2=$(grep -c "warn: .*falling back to static" "$T/n2.log")
fb_m1=$(grep -c "warn: .*falling back to static" "$T/m1.log")
stop_controller
check "n1 falls back to rr" 'wait_for "more \"warn: .*falling back to rr\" \"$T/n1.log\" $fb_n1" 10'
check "n2 falls back to static" 'wait_for "more \"warn: .*falling back to static\" \"$T/n2.log\" $fb_n2" 10'
check "m1 falls back to static" 'wait_for "more \"warn: .*falling back to static\" \"$T/m1.log\" $fb_m1" 10'
check "m1 shows it in stats" \
  '[ "$(mc_reply "stats\r\n" | tr "|" "\n" | grep "^STAT bqos_ctl_state ")" = "STAT bqos_ctl_state static" ]'

# It comes back on the same endpoints: the nodes are told they are unknown,
# say hello again and resume tokens.
cp_port=${ctl_ep##*:}; ap_port=${admin_ep##*:}
rs_n1=$(grep -c "resuming policy tokens" "$T/n1.log")
rs_m1=$(grep -c "resuming policy tokens" "$T/m1.log")
spawn "$T/controller2.log" "$BIN/bqos-controller" --buckets "$T/b.json" --listen "$ctl_ep" \
  --admin "$admin_ep" --period 1s --intervals 5 --capacity 10000 --down-after 50
CTRL_PID=$SPAWNED
wait_port "$cp_port" 10
check "n1 resumes tokens" 'wait_for "more \"resuming policy tokens\" \"$T/n1.log\" $rs_n1" 15'
check "n2 is up at the new controller" 'wait_for "[ \"\$(node_state n2)\" = up ]" 10'

# n2 leaves cleanly: its goodbye marks it down at once (silence would take
# --down-after 50 intervals = 10 s).
stop_pid "$PID_n2"
check "n2 is down right after its goodbye" 'wait_for "[ \"\$(node_state n2)\" = down ]" 3'
check "n1 stays up" '[ "$(node_state n1)" = up ]'
check "m1 resumes tokens" 'wait_for "more \"resuming policy tokens\" \"$T/m1.log\" $rs_m1" 15'
check "no decoder rejections at the nodes" '! grep -q "bad message" "$T/n1.log" "$T/n2.log" "$T/m1.log"'

it_end 'tail -n 20 "$T"/*.log'
