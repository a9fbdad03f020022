#!/bin/sh
# it_nbd_classes.sh - NBD requests classified per operation (issue 27): a controller's rules send export red's writes to bucket red-w (limit 20/s), deny its trims and leave its reads and flushes in red (no limit); on one connection to a real bqos-nbd-node the reads are fast, the writes are held to red-w's limit, the trim gets EPERM and is counted as a refusal, the export is still offered; bqos-ctl who lists the client in red-w (on a binary that classifies a connection once as nbd-read, the writes are not held and the trim succeeds).
set -u
NAME=it_nbd_classes
. "$(dirname "$0")/node_lib.sh"
command -v nbdinfo >/dev/null 2>&1 || { echo "$NAME: nbdinfo not installed; skipped"; finish; }

N=60 L=20
cat >"$tmp/b.json" <<JSON
{"buckets":[{"name":"red","reservation":0},{"name":"red-w","reservation":0,"limit":$L},
            {"name":"blue","reservation":0}],
 "rules":[{"name":"red-writes","key":"red","op":"nbd-write","bucket":"red-w"},
          {"name":"no-trim","key":"red","op":"nbd-trim","deny":true},
          {"name":"red","key":"red","bucket":"red"},
          {"deny":true}]}
JSON
start_controller "$tmp/b.json" 100000 "$tmp" || { bad "controller did not start"; cat "$tmp/controller.log"; finish; }
mkdir -p "$tmp/store"
next_port; MPORT=$PORT
start_nbd_node "$tmp/nbd.log" "$BIN/bqos-nbd-node" --name it --backend "file:$tmp/store/" \
  --export-size 1m --controller "$CTRL_EP" --metrics-listen "127.0.0.1:$MPORT"
NPORT=$PORT
wait_for 'grep -q "from the controller: 4 rules" "$tmp/nbd.log"' 10 &&
  ok "the controller pushed its 4 rules to the block node" || { bad "no rules at the node"; tail -5 "$tmp/nbd.log"; finish; }
sleep 1.2 # the first grant of red-w (a period)

out=$(nbdinfo --list "nbd://127.0.0.1:$NPORT" 2>&1)
echo "$out" | grep -q 'export="red"' && ! echo "$out" | grep -q 'export="blue"' &&
  ok "red offered (some of its classes are allowed), blue not (denied)" || bad "nbd list: $out"

python3 "$HERE/nbd_classes.py" "$NPORT" red "$N" >"$tmp/c.json" 2>"$tmp/c.err" ||
  { bad "client failed: $(cat "$tmp/c.err")"; finish; }
python3 - "$tmp/c.json" "$N" "$L" <<'PY' && ok "reads fast, writes held to red-w's $L/s, trim EPERM: $(cat "$tmp/c.json")" || bad "classes: $(cat "$tmp/c.json")"
import json, sys
d = json.load(open(sys.argv[1])); n = int(sys.argv[2]); L = int(sys.argv[3])
assert d["read_errors"] == 0 and d["write_errors"] == 0, "errors"
# n writes at L/s with at most a period's L of depth: at least (n - 2L) / L s
assert d["write_s"] >= (n - 2 * L) / L * 0.9, "writes not held to red-w's limit"
assert d["read_s"] < d["write_s"] / 2, "reads as slow as writes"
assert d["trim"] == 1, "trim not refused with EPERM"
assert d["flush"] == 0 and d["read"] == 0, "flush or read after the trim failed"
PY
curl -s "http://127.0.0.1:$MPORT/metrics" >"$tmp/m.out"
grep -q "^bqos_bucket_arrivals_total{node=\"it\",bucket=\"red-w\"} $N\$" "$tmp/m.out" &&
  ok "the $N writes arrived in red-w" || { bad "red-w arrivals"; grep '^bqos_bucket_arrivals_total' "$tmp/m.out"; }
grep -q '^bqos_node_rules_refused_total{node="it",reason="denied"} 1$' "$tmp/m.out" &&
  ok "the trim counted as a refusal (reason denied)" ||
  { bad "trim refusal not counted"; grep 'refused' "$tmp/m.out"; }
grep -q '^bqos_node_rules_refused_by_identity_total{node="it",identity="addr:127.0.0.1"} 1$' "$tmp/m.out" &&
  ok "... and by identity (the client's address)" || bad "trim refusal by identity"
# bqos-ctl who: the NBD client (no certificate: identity "-") in red-w, with its 60 writes
# (a node sends a new identity at its next second and the counts every 5 s)
WHO="$BIN/bqos-ctl --endpoint $ADMIN_EP who red-w"
wait_for '$WHO 2>/dev/null | grep -q "^it  *-  *127\.0\.0\.1  *$N "' 8
$WHO >"$tmp/who.out" 2>&1
grep -q "^it  *-  *127\.0\.0\.1  *$N " "$tmp/who.out" && ok "who red-w: the NBD client's address, $N requests" ||
  bad "who red-w: $(cat "$tmp/who.out")"
finish
