#!/bin/sh
# demo-keys.sh - a controller, two block nodes and bqos-ctl with CURVE keys on loopback: keygen, the authorized keys file, a reader that may only read, an admin whose change is audited, a node refused for claiming another's name, and a key revoked by SIGHUP (docs/security.md).
#
# Usage: examples/demo-keys.sh   (BIN=bin by default; keys and logs in a
# scratch directory, removed at the end unless KEEP=1).  Every process it
# starts is stopped on exit, on Ctrl-C and on failure.
set -u
case "${1:-}" in -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;; esac
HERE=$(cd "$(dirname "$0")/../scripts" && pwd)
. "$HERE/lib.sh"
BIN=${BIN:-bin}
D=$(mktemp -d /tmp/bqos-demo-keys.XXXXXX)
trap 'cleanup; [ "${KEEP:-0}" = 1 ] && echo "kept $D" || rm -rf "$D"' EXIT
trap 'exit 130' INT TERM
say() { printf '\n== %s\n' "$*"; }
run() { echo "\$ $*" | sed "s|$D/||g"; "$@"; }
pub() { awk '/^public/ {print $2}' "$D/$1.pub"; }

say "1. One key pair per controller cluster, node and operator (bqos-ctl keygen)"
for k in ctrl n1 n2 alice mon; do "$BIN/bqos-ctl" keygen "$D/$k" >/dev/null || exit 1; done
ls -l "$D"/*.key "$D"/*.pub | awk '{print $1, $NF}' | sed "s|$D/||"

say "2. The controller's authorized keys: who may connect, as what"
cat >"$D/authorized_keys" <<EOF
# ROLE   NAME   PUBLIC KEY (the peer's .pub)
node     n1     $(pub n1)
node     n2     $(pub n2)
admin    alice  $(pub alice)
reader   mon    $(pub mon)
EOF
sed "s|$D/||" "$D/authorized_keys"

say "3. Controller and nodes with keys"
echo '{"buckets":[{"name":"red","reservation":100,"limit":200}]}' >"$D/b.json"
truncate -s 16M "$D/vol.img"
next_port; CP=$PORT; next_port; AP=$PORT
spawn "$D/controller.log" "$BIN/bqos-controller" --buckets "$D/b.json" \
  --listen "tcp://127.0.0.1:$CP" --admin "tcp://127.0.0.1:$AP" \
  --curve-key "$D/ctrl.key" --authorized-keys "$D/authorized_keys"
CTRL_PID=$SPAWNED
wait_port "$CP" 10 || { cat "$D/controller.log"; exit 1; }
for n in n1 n2; do
  next_port
  spawn "$D/$n.log" "$BIN/bqos-nbd-node" --name "$n" --nbd-listen "127.0.0.1:$PORT" \
    --backend "file:$D/vol.img" --controller "tcp://127.0.0.1:$CP" \
    --curve-key "$D/$n.key" --controller-key "$D/ctrl.pub"
done
ctl() { k=$1; shift; run "$BIN/bqos-ctl" --endpoint "tcp://127.0.0.1:$AP" --curve-key "$D/$k.key" \
  --controller-key "$D/ctrl.pub" "$@"; }
wait_for '"$BIN/bqos-ctl" --endpoint "tcp://127.0.0.1:$AP" --curve-key "$D/alice.key" \
  --controller-key "$D/ctrl.pub" status 2>/dev/null | grep -q "^n2 *up"' 10
ctl mon status | sed -n '/^NODE/,/^$/p'

say "4. A reader may read, not change"
ctl mon set red --reservation 150; echo "(exit $?)"
say "5. An admin may change; the controller logs who did what"
ctl alice set red --reservation 150 --limit 300
grep "audit:" "$D/controller.log" | sed 's/^[^ ]* //'

say "6. Node n2's key claiming n1's name is refused"
next_port
spawn "$D/thief.log" "$BIN/bqos-nbd-node" --name n1 --nbd-listen "127.0.0.1:$PORT" \
  --backend "file:$D/vol.img" --controller "tcp://127.0.0.1:$CP" \
  --curve-key "$D/n2.key" --controller-key "$D/ctrl.pub"
wait_for 'grep -q "refused (name_mismatch)" "$D/controller.log"' 10
grep "refused (name_mismatch)" "$D/controller.log" | head -1 | sed 's/^[^ ]* //'

say "7. Revoke mon: remove its line, SIGHUP; its next connection is refused"
grep -v "^reader" "$D/authorized_keys" >"$D/ak.new" && mv "$D/ak.new" "$D/authorized_keys"
kill -HUP "$CTRL_PID"
wait_for 'grep -q "authorized keys re-read" "$D/controller.log"' 5
ctl mon --timeout 1000 status >"$D/out" 2>&1; rc=$?
sed 's/; is bqos-controller.*//' "$D/out"; echo "(exit $rc)"
say "8. What the controller counted"
"$BIN/bqos-ctl" --endpoint "tcp://127.0.0.1:$AP" --curve-key "$D/alice.key" \
  --controller-key "$D/ctrl.pub" --json status |
  python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)["auth"]))'
