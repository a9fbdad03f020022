#!/bin/sh
# it_nested_sim.sh - nested buckets (issue 28) in bqos-sim: examples/nested-tenant.json, a tenant cap over 4 buckets on 6 servers, holds within 1.01 x per period and 1.05 x per 1 s window while every bucket's own R and L hold, also under a root over the cluster (three levels); the same run without "parent" breaks the cap (the check can fail); a scenario naming an unknown parent or a cycle is refused.
. "$(dirname "$0")/../../scripts/lib.sh"
it_begin it_nested_sim bqos-sim
SIM=$BIN/bqos-sim
EX=$(cd "$(dirname "$0")/../../examples" && pwd)
CHK=$(dirname "$0")/nested_check.py

for p in pshift pshift-paced; do
    $SIM --scenario "$EX/nested-tenant.json" -p $p -q -j "$T/$p.json" --csv "$T/$p.csv" \
         --intervals-csv "$T/$p.iv.csv" --sample 1 2>"$T/err"; rc=$?
    check "$p: nested scenario runs" "[ $rc -eq 0 ]"
    python3 "$CHK" "$EX/nested-tenant.json" "$T/$p.csv" "$T/$p.iv.csv" $p >"$T/$p.out"; rc=$?
    sed 's/^/# /' "$T/$p.out"
    check "$p: tenant cap within 1.01 x per period and 1.05 x per 1 s window, every R and L" \
        "[ $rc -eq 0 ]"
done

# Three levels: a root over the cluster (40,000/s) above the tenant and
# other; both caps hold, and every bucket's own R and L.
python3 -c 'import json,sys
s=json.load(open(sys.argv[1]))
s["buckets"].insert(0, {"name": "root", "reservation": 0, "limit": 40000, "servers": [],
                        "changes": []})
for b in s["buckets"]:
    if b["name"] in ("tenant", "other"): b["parent"] = "root"
json.dump(s, open(sys.argv[2], "w"))' "$EX/nested-tenant.json" "$T/three.json"
$SIM --scenario "$T/three.json" -p pshift -q -j "$T/three.out.json" --csv "$T/three.csv" \
     --intervals-csv "$T/three.iv.csv" --sample 1 2>"$T/err"; rc=$?
python3 "$CHK" "$T/three.json" "$T/three.csv" "$T/three.iv.csv" pshift >"$T/three.out"; rc2=$?
sed 's/^/# three levels: /' "$T/three.out" | grep parent
check "three levels: root and tenant caps, every R and L" \
    "[ $rc -eq 0 ] && [ $rc2 -eq 0 ] && grep -q 'parent root.*ok' '$T/three.out'"

# The parent ignored (no "parent" members): the same demands go over the cap.
python3 -c 'import json,sys
s=json.load(open(sys.argv[1]))
for b in s["buckets"]: b.pop("parent", None)
json.dump(s, open(sys.argv[2], "w"))' "$EX/nested-tenant.json" "$T/flat.json"
$SIM --scenario "$T/flat.json" -p pshift -q -j "$T/flat.out.json" --csv "$T/flat.csv" \
     --intervals-csv "$T/flat.iv.csv" --sample 1 2>"$T/err"
python3 "$CHK" "$EX/nested-tenant.json" "$T/flat.csv" "$T/flat.iv.csv" pshift >"$T/flat.out"; rc=$?
sed 's/^/# without parents: /' "$T/flat.out"
check "without parents the cap check fails" "[ $rc -eq 1 ] && grep -q 'tenant.*OVER' '$T/flat.out'"

# Refused: an unknown parent (scenario), a cycle (the controller's table).
sed 's/"parent": "tenant", "reservation": 2000/"parent": "nobody", "reservation": 2000/' \
    "$EX/nested-tenant.json" >"$T/unknown.json"
$SIM --scenario "$T/unknown.json" -p pshift -q >/dev/null 2>"$T/err"; rc=$?
check "unknown parent refused with where" "[ $rc -ne 0 ] && grep -q 'parent.*nobody' '$T/err'"
python3 -c 'import json,sys
s=json.load(open(sys.argv[1]))
s["buckets"][0]["parent"] = "a"
json.dump(s, open(sys.argv[2], "w"))' "$EX/nested-tenant.json" "$T/cycle.json"
$SIM --scenario "$T/cycle.json" -p pshift -q >/dev/null 2>"$T/err"; rc=$?
check "cycle refused" "[ $rc -ne 0 ]"
sed 's/^/# /' "$T/err" | head -3

it_end
