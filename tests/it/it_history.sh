#!/bin/sh
# it_history.sh - bqos-ctl history, watch and the status's reasons against a bqos-controller with simulated nodes (bqos-ctrl-bench), and the controller's --log-format json.
. "$(dirname "$0")/../../scripts/lib.sh"
it_begin it_history

NODES=3; NB=6
"$BIN/bqos-ctrl-bench" --nodes $NODES --buckets $NB --reserved 0.5 --write-buckets "$T/b.json" ||
  { echo "cannot write the bucket file"; exit 1; }
# b00001 gets a limit at its reservation: it wants 1.5x, so it is held there.
python3 - "$T/b.json" <<'PY' || { echo "cannot edit the bucket file"; exit 1; }
import json, sys
d = json.load(open(sys.argv[1]))
b = [x for x in d["buckets"] if x["name"] == "b00001"][0]
b["limit"] = b["reservation"]
json.dump(d, open(sys.argv[1], "w"))
PY
next_port; CP=$PORT; next_port; AP=$PORT
CTRL_EP="tcp://127.0.0.1:$CP"; ADMIN_EP="tcp://127.0.0.1:$AP"
spawn "$T/controller.log" "$BIN/bqos-controller" --buckets "$T/b.json" --listen "$CTRL_EP" \
  --admin "$ADMIN_EP" --period 400ms --intervals 4 --capacity 20000 --log-format json
CTRL_PID=$SPAWNED
wait_port "$CP" 10 || { echo "controller did not start"; cat "$T/controller.log"; exit 1; }
ctl() { "$BIN/bqos-ctl" --endpoint "$ADMIN_EP" --timeout 3000 "$@"; }

check "the controller logs JSON lines" \
  'python3 -c "import json,sys; [json.loads(l) for l in open(sys.argv[1]) if l.strip()]" "$T/controller.log" &&
   grep -q "\"prog\":\"bqos-controller\"" "$T/controller.log"'

ctl history >"$T/h0" 2>&1; rc=$?
check "history before the nodes come (rc $rc)" \
  '[ $rc -eq 0 ] && grep -Eq "no period judged yet|^BUCKET *PERIOD" "$T/h0"'

"$BIN/bqos-ctrl-bench" --endpoint "$CTRL_EP" --admin "$ADMIN_EP" --nodes $NODES --buckets $NB \
  --active 2 --seconds 4 --quiet >"$T/run.json" &
BP=$!
# A few periods (0.4 s each) judged.
judged() { ctl --json history >"$T/h.json" && jget "$T/h.json" "d[\"judged\"]"; }
wait_for '[ "$(judged)" -ge 4 ]' 8
check "periods judged while the nodes report" '[ "$(judged)" -ge 4 ]'

ctl --json history --periods 3 >"$T/h3.json"; rc=$?
check "history --json parses (rc $rc)" '[ $rc -eq 0 ] && jget "$T/h3.json" "len(d[\"buckets\"])" >/dev/null'
check "every bucket has at most and, here, exactly 3 periods" \
  '[ "$(jget "$T/h3.json" "sorted(set(len(b[\"periods\"]) for b in d[\"buckets\"]))")" = "[3]" ]'
check "all $NB buckets listed" '[ "$(jget "$T/h3.json" "len(d[\"buckets\"])")" = $NB ]'
check "newest first" \
  '[ "$(jget "$T/h3.json" "all(b[\"periods\"][0][\"period\"] > b[\"periods\"][1][\"period\"] > b[\"periods\"][2][\"period\"] for b in d[\"buckets\"])")" = True ]'
check "reserved buckets have an outcome each period" \
  '[ "$(jget "$T/h3.json" "all(p[\"reservation\"] in (\"met\", \"missed\") for b in d[\"buckets\"] for p in b[\"periods\"])")" = True ]'
ctl --json history --periods 64 b00001 >"$T/h1.json"
check "the bucket limited at its reservation is held at its limit" \
  '[ "$(jget "$T/h1.json" "sum(p[\"held_at_limit\"] for p in d[\"buckets\"][0][\"periods\"])")" -ge 1 ]'

ctl history --periods 3 >"$T/h3.txt"; rc=$?
check "history table (rc $rc): 3 rows per bucket" \
  '[ $rc -eq 0 ] && grep -q "^BUCKET *PERIOD *OUTCOME" "$T/h3.txt" && [ "$(grep -c "^b0000" "$T/h3.txt")" = $((3 * NB)) ]'
ctl history --periods 64 b00001 >"$T/h1.txt"
check "history table says held at limit" 'grep -q "^b00001 .*held at limit" "$T/h1.txt"'

ctl history --periods 2 b00002 >"$T/hb.txt"; rc=$?
check "bucket filter (rc $rc)" \
  '[ $rc -eq 0 ] && [ "$(grep -c "^b00002 " "$T/hb.txt")" = 2 ] && ! grep -q "^b00001 " "$T/hb.txt"'
ctl history nosuch >"$T/hn.txt" 2>&1; rc=$?
check "an unknown bucket is refused (rc $rc)" '[ $rc -eq 1 ] && grep -q not_found "$T/hn.txt"'
ctl history a b >/dev/null 2>&1; rc=$?
check "two buckets are bad usage (rc $rc)" '[ $rc -eq 2 ]'

ctl --json status >"$T/st.json"
check "status gives every bucket a reason" \
  '[ "$(jget "$T/st.json" "all(b[\"reason\"] in (\"held_at_limit\", \"below_reservation\", \"no_demand\", \"reservation_met\", \"best_effort\") for b in d[\"buckets\"])")" = True ]'
ctl status >"$T/st.txt"
check "status table shows DEMAND, tokens and REASON" \
  'grep -q "DEMAND *R TOKENS *L TOKENS *REASON" "$T/st.txt" &&
   grep -Eq "^b0000[0-9] .*(held at limit|below reservation|no demand|reservation met|best effort)$" "$T/st.txt"'

# watch, not on a terminal: plain tables one after the other, stopped by SIGINT.
# Two tables take 0.5 s on an idle host; a loaded one (make check beside
# other builds) gets up to 10 s.
"$BIN/bqos-ctl" --endpoint "$ADMIN_EP" --timeout 3000 watch --interval 500ms >"$T/watch.txt" 2>&1 &
WP=$!
sleep 2
wait_for '[ "$(grep -c "^BUCKET " "$T/watch.txt")" -ge 2 ]' 8
kill -INT $WP
wait $WP; rc=$?
check "watch stops on SIGINT with status 0 (rc $rc)" '[ $rc -eq 0 ]'
check "watch printed at least two tables" '[ "$(grep -c "^BUCKET " "$T/watch.txt")" -ge 2 ]'
check "no terminal: no ANSI clear" '! grep -q "$(printf "\033")" "$T/watch.txt"'
wait $BP

# Admission warnings (--admission warn) reach bqos-ctl: set, status (text
# and JSON) while the configuration in force is over capacity; none after.
"$BIN/bqos-ctrl-bench" --endpoint "$CTRL_EP" --admin "$ADMIN_EP" --nodes $NODES --buckets $NB \
  --active 2 --seconds 4 --quiet >/dev/null &
BP=$!
ups() { ctl --json status >"$T/su.json" && jget "$T/su.json" "sum(n[\"state\"] == \"up\" for n in d[\"nodes\"])"; }
wait_for '[ "$(ups)" = $NODES ]' 5
ctl set huge --reservation 100000000 >"$T/w.out" 2>"$T/w.err"; rc=$?
check "set over capacity is accepted with a warning on stderr (rc $rc)" \
  '[ $rc -eq 0 ] && grep -q "created" "$T/w.out" && grep -q "^bqos-ctl: warning: .*exceeds" "$T/w.err"'
ctl status >"$T/ws.txt"
check "status shows the admission warning" 'grep -q "^WARNING (admission): .*exceeds" "$T/ws.txt"'
ctl --json status >"$T/ws.json"
check "status --json carries it" '[ -n "$(jget "$T/ws.json" "d[\"warning\"]")" ]'
ctl remove huge >/dev/null 2>"$T/wr.err"; rc=$?
ctl --json status >"$T/ws2.json"
check "within capacity again: no warning (rc $rc)" \
  '[ $rc -eq 0 ] && [ ! -s "$T/wr.err" ] && [ "$(jget "$T/ws2.json" "\"warning\" in d")" = False ]'
wait $BP

it_end 'tail -20 "$T/controller.log"'
