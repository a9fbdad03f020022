#!/bin/sh
# it_curve.sh - the CURVE control plane with a real bqos-controller, bqos-nbd-nodes and bqos-ctl on free loopback ports: keygen and key file modes, an authorized node registers, an unknown key and a stolen node name are refused, a reader cannot set and an admin can (audited), SIGHUP re-reads the authorized keys (and a node's own key: rotation without a restart), and a controller on a reachable address without keys refuses to start; --check fails on each thing the start refuses (a reachable endpoint without keys, a secret key of mode 0644 or unreadable, a malformed authorized keys file), naming it and where, for the controller and the node, and finds bare key names in $CREDENTIALS_DIRECTORY.
. "$(dirname "$0")/../../scripts/lib.sh"
it_begin it_curve
for b in bqos-controller bqos-ctl bqos-nbd-node; do
  [ -x "$BIN/$b" ] || { echo "it_curve: $BIN/$b not built"; exit 1; }
done
CTL=$BIN/bqos-ctl
K=$T/keys
mkdir -p "$K"
truncate -s 16M "$T/vol.img"
echo '{"buckets":[{"name":"red","reservation":100}]}' >"$T/b.json"

# ---- keygen ----------------------------------------------------------------
for k in ctrl n1 n2 n3 alice mon; do
  "$CTL" keygen "$K/$k" >"$T/out" 2>&1 || { echo "keygen $k failed:"; cat "$T/out"; exit 1; }
done
check "keygen: NAME.key is mode 600" '[ "$(stat -c %a "$K/n1.key")" = 600 ]'
check "keygen: NAME.pub is readable by all" '[ "$(stat -c %a "$K/n1.pub")" = 644 ]'
check "keygen: the .pub holds the .key's public line" \
  '[ "$(grep ^public "$K/n1.key")" = "$(grep ^public "$K/n1.pub")" ]'
check "keygen: the .pub holds no secret" '! grep -q secret "$K/n1.pub"'
cp "$K/n1.key" "$T/n1.key.before"
"$CTL" keygen "$K/n1" >"$T/out" 2>&1; rc=$?
check "keygen never overwrites a key (rc $rc)" \
  '[ $rc -ne 0 ] && cmp -s "$K/n1.key" "$T/n1.key.before" && grep -q "exists" "$T/out"'

pub() { awk '/^public/ {print $2}' "$K/$1.pub"; }
write_keys() { # write_keys LINE...: the authorized keys file, one line per argument
  : >"$T/ak.new"
  for l in "$@"; do echo "$l" >>"$T/ak.new"; done
  mv "$T/ak.new" "$T/ak"
}
write_keys "# the test cluster" "node n1 $(pub n1)" "node n2 $(pub n2)" \
  "admin alice $(pub alice)" "reader mon $(pub mon)"

# ---- a secret key readable by others is refused ----------------------------
cp "$K/ctrl.key" "$T/open.key"; chmod 644 "$T/open.key"
next_port; p1=$PORT; next_port; p2=$PORT
"$BIN/bqos-controller" --buckets "$T/b.json" --listen "tcp://127.0.0.1:$p1" \
  --admin "tcp://127.0.0.1:$p2" --curve-key "$T/open.key" --authorized-keys "$T/ak" \
  >"$T/open.log" 2>&1 </dev/null & OPEN_PID=$!
LIB_PIDS="$LIB_PIDS $OPEN_PID"
wait "$OPEN_PID"; rc=$?
check "controller refuses a secret key of mode 644 (rc $rc)" \
  '[ $rc -eq 1 ] && grep -q "open.key.*mode 0644" "$T/open.log"'

# ---- the controller with keys ----------------------------------------------
start_controller "$T/b.json" 10000 "$T" --curve-key "$K/ctrl.key" --authorized-keys "$T/ak" \
  --metrics-listen 127.0.0.1:0 ||
  { echo "controller did not start"; cat "$T/controller.log"; exit 1; }
as() { # as KEY ARGS...: bqos-ctl with KEY's key pair
  k=$1; shift
  "$CTL" --endpoint "$ADMIN_EP" --timeout 2000 --curve-key "$K/$k.key" \
    --controller-key "$K/ctrl.pub" "$@"
}
# field PATH: a value of the status JSON (alice's view), e.g. auth.refused.unknown_key
field() {
  as alice --json status 2>/dev/null | python3 -c '
import json, sys
v = json.load(sys.stdin)
for p in sys.argv[1].split("."):
    v = v[p] if isinstance(v, dict) else None
print(v)' "$1"
}
node_state() { # node_state NAME: up, down or none
  as alice --json status 2>/dev/null | python3 -c '
import json, sys
s = [n["state"] for n in json.load(sys.stdin)["nodes"] if n["name"] == sys.argv[1]]
print(s[0] if s else "none")' "$1"
}
# start_node LOGNAME NAME KEY: a block node under --name NAME with KEY's key pair
start_node() {
  next_port
  spawn "$T/$1.log" "$BIN/bqos-nbd-node" --name "$2" --nbd-listen "127.0.0.1:$PORT" \
    --backend "file:$T/vol.img" --controller "$CTRL_EP" \
    --curve-key "$K/$3.key" --controller-key "$K/ctrl.pub"
}

start_node n1 n1 n1; N1_PID=$SPAWNED
wait_for '[ "$(node_state n1)" = up ]' 10
check "an authorized node registers" '[ "$(node_state n1)" = up ]'

start_node n3 n3 n3; N3_PID=$SPAWNED
wait_for '[ "$(field auth.refused.unknown_key)" -ge 1 ]' 10
check "an unknown key is refused and counted" '[ "$(field auth.refused.unknown_key)" -ge 1 ]'
check "the unknown node is not registered" '[ "$(node_state n3)" = none ]'
check "the refusal is logged with its reason" 'grep -q "refused (unknown_key)" "$T/controller.log"'
# /metrics has the same counter (bqos_controller_auth_refusals_total).
murl=$(sed -n 's/.*metrics on \(http:[^ ]*\).*/\1/p' "$T/controller.log" | head -1)
mref=$(curl -sf "$murl" | sed -n 's/^bqos_controller_auth_refusals_total{reason="unknown_key"} //p')
check "the refusal is in /metrics (auth_refusals_total unknown_key $mref)" '[ "${mref:-0}" -ge 1 ]'

# A valid key of another node (n2) claiming n1's name.
start_node thief n1 n2; THIEF_PID=$SPAWNED
wait_for '[ "$(field auth.refused.name_mismatch)" -ge 1 ]' 10
check "a stolen node name is refused (name_mismatch)" '[ "$(field auth.refused.name_mismatch)" -ge 1 ]'
check "the refusal names both nodes" \
  'grep -q "refused (name_mismatch): the key of node .n2. spoke for node .n1." "$T/controller.log"'
stop_pid "$N1_PID"
wait_for '[ "$(node_state n1)" = down ]' 5
sleep 1.5
check "with n1 gone the thief still cannot register as n1" '[ "$(node_state n1)" = down ]'
stop_pid "$THIEF_PID"

# ---- roles on the admin endpoint -------------------------------------------
as mon status >"$T/out" 2>&1; rc=$?
check "a reader may read status (rc $rc)" '[ $rc -eq 0 ] && grep -q "^red " "$T/out"'
check "status says CURVE and its refusals" \
  'grep -Eq "^CURVE: 4 keys, [0-9]+ connections accepted; refused:.* name_mismatch [1-9]" "$T/out"'
as mon buckets >"$T/out" 2>&1; rc=$?
check "a reader may read buckets (rc $rc)" '[ $rc -eq 0 ]'
as mon history --periods 2 >"$T/out" 2>&1; rc=$?
check "a reader may read the history (rc $rc)" '[ $rc -eq 0 ] && ! grep -q forbidden "$T/out"'
as mon set green --reservation 5 >"$T/out" 2>&1; rc=$?
check "a reader cannot set (rc $rc)" '[ $rc -eq 1 ] && grep -q forbidden "$T/out"'
as mon reload >"$T/out" 2>&1; rc=$?
check "a reader cannot reload (rc $rc)" '[ $rc -eq 1 ]'
check "a reader's refusals are counted as wrong_role" '[ "$(field auth.refused.wrong_role)" -ge 2 ]'
check "green does not exist" '! grep -q green "$T/b.json"'
as alice set green --reservation 5 >"$T/out" 2>&1; rc=$?
check "an admin can set (rc $rc)" '[ $rc -eq 0 ] && cat "$T/b.json" "$T/b.json.journal" | grep -q green'
check "the change is audited with the admin's key name" \
  'grep -q "audit: set by admin alice: .*\"green\"" "$T/controller.log"'
h0=$(field auth.refused.handshake)
as n2 --timeout 500 status >"$T/out" 2>&1; rc=$?
check "a node key is refused on the admin endpoint (rc $rc)" '[ $rc -eq 3 ]'
check "... as wrong_role, not as a failed handshake" \
  '[ "$(field auth.refused.wrong_role)" -ge 3 ] && [ "$(field auth.refused.handshake)" = "$h0" ]'
"$CTL" --endpoint "$ADMIN_EP" --timeout 500 status >"$T/out" 2>&1; rc=$?
check "a client without keys gets nothing (rc $rc)" '[ $rc -eq 3 ]'
wait_for '[ "$(field auth.refused.handshake)" -ge 1 ]' 5
check "its failed handshake is counted" '[ "$(field auth.refused.handshake)" -ge 1 ]'
chmod 640 "$K/alice.key"
as alice status >"$T/out" 2>&1; rc=$?
check "bqos-ctl refuses its own key file of mode 640 (rc $rc)" \
  '[ $rc -eq 2 ] && grep -q "alice.key.*mode 0640" "$T/out"'
chmod 600 "$K/alice.key"

# ---- SIGHUP re-reads the authorized keys ------------------------------------
write_keys "node n1 $(pub n1)" "node n3 $(pub n3)" "admin alice $(pub alice)"
kill -HUP "$CTRL_PID"
wait_for 'grep -q "3 authorized keys re-read" "$T/controller.log"' 5
check "SIGHUP re-reads the authorized keys" 'grep -q "3 authorized keys re-read" "$T/controller.log"'
as mon --timeout 500 status >"$T/out" 2>&1; rc=$?
check "a removed reader key loses access (rc $rc)" '[ $rc -eq 3 ]'
# libzmq may not retry a handshake its server refused (libzmq#3519): the
# operator restarts the node whose key was added.
stop_pid "$N3_PID"
start_node n3b n3 n3; N3_PID=$SPAWNED
wait_for '[ "$(node_state n3)" = up ]' 10
check "a key added by SIGHUP lets its node register" '[ "$(node_state n3)" = up ]'
# A node's own key rotates without a restart: the controller authorizes the
# new key beside the old (SIGHUP), the node takes it (SIGHUP: it connects
# anew), the old line goes (SIGHUP), and the node stays up.
"$CTL" keygen "$K/n3new" >/dev/null 2>&1
write_keys "node n1 $(pub n1)" "node n3 $(pub n3)" "node n3 $(pub n3new)" "admin alice $(pub alice)"
kill -HUP "$CTRL_PID"
wait_for 'grep -q "4 authorized keys re-read" "$T/controller.log"' 5
cp "$K/n3new.key" "$K/n3.key"
kill -HUP "$N3_PID"
wait_for 'grep -q "CURVE keys changed" "$T/n3b.log"' 5
check "SIGHUP: the node takes its new key and connects anew" 'grep -q "CURVE keys changed" "$T/n3b.log"'
write_keys "node n1 $(pub n1)" "node n3 $(pub n3new)" "admin alice $(pub alice)"
kill -HUP "$CTRL_PID"
wait_for '[ "$(grep -c "3 authorized keys re-read" "$T/controller.log")" -ge 2 ]' 5
sleep 2 # the old key's connection would be refused and the node down after --down-after
check "with only its new key authorized the node stays up" '[ "$(node_state n3)" = up ]'
echo "node n1 not-a-key" >"$T/ak"
kill -HUP "$CTRL_PID"
wait_for 'grep -q "authorized keys in force are kept" "$T/controller.log"' 5
check "a bad file on SIGHUP keeps the keys in force, error at line:column" \
  'grep -q "ak:1:9: not a CURVE public key" "$T/controller.log" && as alice status >/dev/null 2>&1'
stop_pid "$N3_PID"
stop_controller
check "no sanitizer report" '! grep -qE "Sanitizer|runtime error:" "$T"/*.log'

# ---- secure by default -----------------------------------------------------
next_port; p1=$PORT; next_port; p2=$PORT
"$BIN/bqos-controller" --buckets "$T/b.json" --listen "tcp://0.0.0.0:$p1" \
  --admin "tcp://127.0.0.1:$p2" >"$T/open.log" 2>&1 </dev/null; rc=$?
check "a reachable endpoint without keys refuses to start (rc $rc)" \
  '[ $rc -eq 1 ] && grep -q "can be reached from other hosts" "$T/open.log"'
"$BIN/bqos-controller" --buckets "$T/b.json" --curve-key "$K/ctrl.key" >"$T/open.log" 2>&1 </dev/null
rc=$?
check "--curve-key without --authorized-keys is bad usage (rc $rc)" '[ $rc -eq 2 ]'
addr=$(hostname -I 2>/dev/null | tr ' ' '\n' | grep -E '^[0-9.]+$' | grep -v '^127\.' | head -1)
if [ -n "$addr" ]; then
  spawn "$T/insecure.log" "$BIN/bqos-controller" --buckets "$T/b.json" \
    --listen "tcp://$addr:$p1" --admin "tcp://127.0.0.1:$p2" --insecure
  INS_PID=$SPAWNED
  wait_for 'grep -q "running --insecure" "$T/insecure.log"' 5
  check "--insecure on $addr starts and warns" \
    'kill -0 "$INS_PID" && grep -q "warn: running --insecure" "$T/insecure.log"'
  stop_pid "$INS_PID"
else
  echo "it_curve: no non-loopback IPv4 address (hostname -I): --insecure start skipped"
fi

# ---- --check refuses what the start refuses (the same validation runs) -----
# ccheck NAME ARGS...: bqos-controller --check ARGS on $T/b.json, output in $T/NAME.out; rc in $rc
ccheck() {
  n=$1; shift
  "$BIN/bqos-controller" --check --buckets "$T/b.json" "$@" >"$T/$n.out" 2>&1 </dev/null; rc=$?
}
write_keys "node n1 $(pub n1)" "admin alice $(pub alice)"
ccheck open --listen tcp://0.0.0.0:7070
check "--check: a reachable --listen without keys fails, naming the endpoints (rc $rc)" \
  '[ $rc -eq 1 ] && grep -q "^bqos-controller: --listen tcp://0.0.0.0:7070 / --admin .* can be reached from other hosts" "$T/open.out" && ! grep -q "configuration OK" "$T/open.out"'
cp "$K/ctrl.key" "$T/open.key"; chmod 644 "$T/open.key"
ccheck mode --listen tcp://0.0.0.0:7070 --curve-key "$T/open.key" --authorized-keys "$T/ak"
check "--check: a secret key of mode 0644 fails, naming the file, its mode and the chmod (rc $rc)" \
  '[ $rc -eq 1 ] && grep -q "^bqos-controller: --curve-key $T/open.key: holds a secret key but has mode 0644.*chmod 600 $T/open.key" "$T/mode.out"'
cp "$K/ctrl.key" "$T/locked.key"; chmod 600 "$T/locked.key"
if [ "$(id -u)" = 0 ]; then # root reads any file: check as nobody a key that only root may read
  chmod 711 "$T"; chmod 644 "$T/b.json" "$T/ak"
  NOBODY="setpriv --reuid=65534 --regid=65534 --clear-groups"
else
  chmod 000 "$T/locked.key"; NOBODY=""
fi
$NOBODY "$BIN/bqos-controller" --check --buckets "$T/b.json" --listen tcp://0.0.0.0:7070 \
  --curve-key "$T/locked.key" --authorized-keys "$T/ak" >"$T/locked.out" 2>&1 </dev/null; rc=$?
chmod 700 "$T"
check "--check: an unreadable secret key fails, naming the file and why (rc $rc)" \
  '[ $rc -eq 1 ] && grep -q "^bqos-controller: --curve-key $T/locked.key: cannot open: Permission denied" "$T/locked.out"'
printf 'node n1 %s\nnode n2 not-a-key\n' "$(pub n1)" >"$T/bad.ak"
ccheck ak --listen tcp://0.0.0.0:7070 --curve-key "$K/ctrl.key" --authorized-keys "$T/bad.ak"
check "--check: a malformed authorized keys file fails at FILE:LINE:COL (rc $rc)" \
  '[ $rc -eq 1 ] && grep -q "^bqos-controller: --authorized-keys $T/bad.ak:2:9: not a CURVE public key" "$T/ak.out"'
ccheck good --listen tcp://0.0.0.0:7070 --curve-key "$K/ctrl.key" --authorized-keys "$T/ak"
check "--check: keys in order pass (rc $rc)" '[ $rc -eq 0 ] && grep -q "configuration OK" "$T/good.out"'
mkdir -p "$T/cred"; cp "$K/ctrl.key" "$T/cred/controller.key"
CREDENTIALS_DIRECTORY=$T/cred "$BIN/bqos-controller" --check --buckets "$T/b.json" \
  --listen tcp://0.0.0.0:7070 --curve-key controller.key --authorized-keys "$T/ak" >"$T/cred.out" 2>&1; rc=$?
check "--check: a bare key name is read from \$CREDENTIALS_DIRECTORY (rc $rc)" \
  '[ $rc -eq 0 ] && grep -q "configuration OK" "$T/cred.out"'
chmod 644 "$T/cred/controller.key"
CREDENTIALS_DIRECTORY=$T/cred "$BIN/bqos-controller" --check --buckets "$T/b.json" \
  --listen tcp://0.0.0.0:7070 --curve-key controller.key --authorized-keys "$T/ak" >"$T/cred.out" 2>&1; rc=$?
check "--check: and its problems name the credential's path (rc $rc)" \
  '[ $rc -eq 1 ] && grep -q "^bqos-controller: --curve-key $T/cred/controller.key: holds a secret key but has mode 0644" "$T/cred.out"'
# The start refuses the same, with the same words (one validation for both).
"$BIN/bqos-controller" --buckets "$T/b.json" --listen tcp://127.0.0.1:0 --admin tcp://127.0.0.1:0 \
  --curve-key "$K/ctrl.key" --authorized-keys "$T/bad.ak" >"$T/start.out" 2>&1 </dev/null; rc=$?
check "the start refuses the malformed authorized keys file with --check's message (rc $rc)" \
  '[ $rc -eq 1 ] && grep -q "error: --authorized-keys $T/bad.ak:2:9: not a CURVE public key" "$T/start.out"'
# bqos-node: its key pair, by the same loader as at start.
"$BIN/bqos-nbd-node" --check --name n1 --nbd-listen 127.0.0.1:0 --backend "file:$T/vol.img" \
  --controller tcp://127.0.0.1:7070 --curve-key "$T/open.key" --controller-key "$K/ctrl.pub" \
  >"$T/node.out" 2>&1; rc=$?
check "bqos-node --check: a secret key of mode 0644 fails, naming the file (rc $rc)" \
  '[ $rc -eq 1 ] && grep -q "^bqos-nbd-node: $T/open.key: holds a secret key but has mode 0644" "$T/node.out"'
"$BIN/bqos-nbd-node" --check --name n1 --nbd-listen 127.0.0.1:0 --backend "file:$T/vol.img" \
  --controller tcp://127.0.0.1:7070 --curve-key "$K/n1.key" --controller-key "$K/ctrl.pub" \
  >"$T/node.out" 2>&1; rc=$?
check "bqos-node --check: its keys in order pass (rc $rc)" '[ $rc -eq 0 ]'

it_end 'tail -n 40 "$T/controller.log"'
