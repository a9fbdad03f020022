#!/bin/sh
# it_privileges.sh - issue 18 defect 13: started as root with --user nobody, the controller, a memcached node and a block node run as nobody (ids and capabilities in /proc/PID/status) and still serve on the ports they bound; another user's start with --user, an unknown user and --user root are refused; flush_all is refused with --disable-flush-all and works by default.
set -u
NAME=it_privileges
. "$(dirname "$0")/node_lib.sh"
CTRL="$BIN/bqos-controller"
NBD="$BIN/bqos-nbd-node"

# ids PID: "Uid Gid Groups CapEff" of a process, e.g. "65534x4 65534x4 65534 0".
ids() {
  awk '/^Uid:/ { u = ($2 == $3 && $3 == $4 && $4 == $5) ? $2 "x4" : $2 "," $3 "," $4 "," $5 }
       /^Gid:/ { g = ($2 == $3 && $3 == $4 && $4 == $5) ? $2 "x4" : $2 "," $3 "," $4 "," $5 }
       /^Groups:/ { s = ""; for (i = 2; i <= NF; i++) s = s (i > 2 ? "," : "") $i; if (s == "") s = "-" }
       /^CapEff:/ { c = ($2 ~ /^0+$/) ? 0 : $2 }
       END { print u, g, s, c }' "/proc/$1/status"
}
NOBODY_UID=$(id -u nobody) NOBODY_GID=$(id -g nobody)
NOBODY_GROUPS=$(id -G nobody | tr ' ' ',')
WANT="${NOBODY_UID}x4 ${NOBODY_GID}x4 $NOBODY_GROUPS 0"

if [ "$(id -u)" != 0 ]; then
  # Not root: --user naming someone else is refused; naming ourselves is fine.
  start_mc
  if "$NODE" --memcached-listen 127.0.0.1:0 --backend "memcached://127.0.0.1:$MC_PORT" \
       --user nobody 2>"$tmp/other.log"; then
    bad "a non-root node switched to nobody"
  else
    check "a non-root start with another --user is refused" "grep -q 'only root may switch' '$tmp/other.log'"
  fi
  echo "$NAME: not root: the switch itself is not tested"
  finish
fi

# ---- refusals --------------------------------------------------------------
start_mc
"$NODE" --memcached-listen 127.0.0.1:0 --backend "memcached://127.0.0.1:$MC_PORT" \
  --user no-such-user-bqos 2>"$tmp/unknown.log"
check "an unknown --user is refused (exit 1)" "[ $? = 1 ] && grep -q 'no such user' '$tmp/unknown.log'"
"$NODE" --memcached-listen 127.0.0.1:0 --backend "memcached://127.0.0.1:$MC_PORT" \
  --user root 2>"$tmp/root.log"
check "--user root is refused" "[ $? = 1 ] && grep -q 'is root' '$tmp/root.log'"
setpriv --reuid="$NOBODY_UID" --regid="$NOBODY_GID" --clear-groups "$NODE" \
  --memcached-listen 127.0.0.1:0 --backend "memcached://127.0.0.1:$MC_PORT" --user daemon \
  2>"$tmp/other.log"
check "a non-root start with another --user is refused" \
  "[ $? = 1 ] && grep -q 'only root may switch' '$tmp/other.log'"

# ---- the controller ----------------------------------------------------------
echo '{"buckets":[{"name":"red","reservation":10,"limit":1000}]}' >"$tmp/buckets.json"
start_controller "$tmp/buckets.json" 1000 "$tmp" --user nobody ||
  { bad "controller did not start"; cat "$tmp/controller.log"; finish; }
wait_for 'grep -q "running as user nobody" "$tmp/controller.log"' 5
check "controller runs as nobody ($WANT)" '[ "$(ids "$CTRL_PID")" = "$WANT" ]'

# ---- a memcached node: drops, serves, registers with the controller -----------
start_node "$tmp/node.log" --user nobody --controller "$CTRL_EP" --disable-flush-all
check "memcached node runs as nobody" '[ "$(ids "$NODE_PID")" = "$WANT" ]'
r=$(mc_ask "$NODE_PORT" 'set red:k 0 0 1\r\nx\r\nflush_all\r\nflush_all 0\r\nflush_all noreply\r\nget red:k\r\n')
check "flush_all refused with --disable-flush-all, the data kept ($r)" \
  '[ "$r" = "STORED|CLIENT_ERROR flush_all not allowed|CLIENT_ERROR flush_all not allowed|VALUE red:k 0 1|x|END|" ]'
"$BIN/bqos-ctl" --endpoint "$ADMIN_EP" --json status >"$tmp/status.json" 2>/dev/null
wait_for '"$BIN/bqos-ctl" --endpoint "$ADMIN_EP" --json status >"$tmp/status.json" 2>/dev/null &&
          grep -q "\"it\"" "$tmp/status.json"' 10
check "controller (as nobody) answers bqos-ctl and has the node (as nobody) registered" \
  "grep -q '\"it\"' '$tmp/status.json'"
DROPPED_PID=$NODE_PID DROPPED_LOG=$NODE_LOG

# A node started as root without --user warns, and flush_all works by default.
start_node "$tmp/node2.log"
check "root without --user is warned about" "grep -q 'running as root' '$tmp/node2.log'"
r=$(mc_ask "$NODE_PORT" 'set red:k 0 0 1\r\nx\r\nflush_all\r\nget red:k\r\n')
check "flush_all works by default ($r)" '[ "$r" = "STORED|OK|END|" ]'
stop_node
NODE_PID=$DROPPED_PID NODE_LOG=$DROPPED_LOG
stop_node
check "node as nobody stops cleanly" "[ $NODE_RC = 0 ]"
stop_controller

# ---- a block node: the store directory belongs to nobody ---------------------
if command -v nbdcopy >/dev/null 2>&1; then
  mkdir "$tmp/store" && chown nobody "$tmp/store"
  start_nbd_node "$tmp/nbd.log" "$NBD" --backend "file:$tmp/store/" --export-size 16m \
    --buckets vol --user nobody
  check "block node runs as nobody" '[ "$(ids "$PID")" = "$WANT" ]'
  head -c 3000000 /dev/urandom >"$tmp/in.bin"
  check "block node serves on its port (nbdcopy round trip)" "nbd_roundtrip nbd://127.0.0.1:$PORT/vol"
  check "the export file was created by nobody" \
    '[ "$(stat -c %U "$tmp/store/vol.img")" = nobody ]'
  stop_pid "$PID"
else
  echo "$NAME: nbdcopy not installed: block node skipped"
fi
finish
