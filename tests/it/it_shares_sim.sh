#!/bin/sh
# it_shares_sim.sh - fair shares of spare capacity (issue 28) in bqos-sim: examples/fair-shares.json, buckets on 1, 2, 4 and 8 of 8 servers with weights, all hungry, divide the spare capacity within 5% of the weighted max-min ideal (shares_check.py computes it) with --shares, for pshift and pshift-paced, reservations met; with a limit on one of them (its cap) too; without --shares the division is by footprint and the check fails.
. "$(dirname "$0")/../../scripts/lib.sh"
it_begin it_shares_sim bqos-sim
SIM=$BIN/bqos-sim
EX=$(cd "$(dirname "$0")/../../examples" && pwd)
CHK=$(dirname "$0")/shares_check.py

$SIM --scenario "$EX/fair-shares.json" -p pshift,pshift-paced --shares -q -j "$T/on.json" \
     --csv "$T/on.csv" 2>"$T/err"; rc=$?
check "--shares: scenario runs" "[ $rc -eq 0 ]"
for p in pshift pshift-paced; do
    python3 "$CHK" "$EX/fair-shares.json" "$T/on.csv" $p >"$T/$p.out"; rc=$?
    sed "s/^/# $p: /" "$T/$p.out"
    check "$p --shares: spare within 5% of the weighted max-min ideal, R met" "[ $rc -eq 0 ]"
done

# A limit caps a bucket's share: "two" limited to 4,000/s; the others
# take what it leaves, its limit holds.
python3 -c 'import json,sys
s=json.load(open(sys.argv[1]))
s["buckets"][1]["limit"] = 4000
json.dump(s, open(sys.argv[2], "w"))' "$EX/fair-shares.json" "$T/lim.json"
$SIM --scenario "$T/lim.json" -p pshift --shares -q -j "$T/lim.out.json" --csv "$T/lim.csv" \
     2>"$T/err"; rc=$?
python3 "$CHK" "$T/lim.json" "$T/lim.csv" pshift >"$T/lim.out"; rc2=$?
sed 's/^/# limited: /' "$T/lim.out"
check "a limited bucket: its limit holds, the rest within 5% of the ideal" \
    "[ $rc -eq 0 ] && [ $rc2 -eq 0 ]"

# Without --shares: per-node round robin divides by footprint.
$SIM --scenario "$EX/fair-shares.json" -p pshift -q -j "$T/off.json" --csv "$T/off.csv" \
     2>"$T/err"
python3 "$CHK" "$EX/fair-shares.json" "$T/off.csv" pshift >"$T/off.out"; rc=$?
sed 's/^/# without --shares: /' "$T/off.out"
check "without --shares the check fails (division by footprint)" \
    "[ $rc -eq 1 ] && grep -q 'one.*OFF' '$T/off.out'"

it_end
