#!/bin/sh
# it_pshift_cli.sh - bqos-pshift end to end: solve fixtures, every bad input with its exact error line, gen, bench.
# Usage: sh tests/it/it_pshift_cli.sh   (from the repository root; BIN defaults to bin)
. "$(dirname "$0")/../../scripts/lib.sh"
it_begin it_pshift_cli
P="$BIN/bqos-pshift"
D=tests/data/pshift
fail() { not_ok "$*"; }

[ -x "$P" ] || { echo "FAIL: $P not built"; exit 1; }

# expect_rc WANT CMD... : runs CMD, stdout to $T/out, stderr to $T/err.
expect_rc() {
  want=$1; shift
  "$@" >"$T/out" 2>"$T/err"; rc=$?
  [ "$rc" -eq "$want" ] || fail "'$*' exited $rc, want $want: $(head -c 300 "$T/err")"
}

# pycheck FILE EXPR... : each python expression over the JSON `j` must hold.
pycheck() {
  f=$1; shift
  python3 - "$f" "$@" <<'PY' || fail "JSON check on $f"
import json, sys
j = json.load(open(sys.argv[1]))
for e in sys.argv[2:]:
    if not eval(e):
        print("  check failed:", e, file=sys.stderr)
        sys.exit(1)
PY
}

# --- help, version, usage errors
expect_rc 0 "$P" --help;            grep -q SYNOPSIS "$T/out" || fail "--help has no SYNOPSIS"
expect_rc 0 "$P" --version;         grep -q '^bqos-pshift [0-9]' "$T/out" || fail "--version"
for c in solve gen bench; do
  expect_rc 0 "$P" $c --help;       grep -q "bqos-pshift $c" "$T/out" || fail "$c --help"
done
expect_rc 2 "$P"
expect_rc 2 "$P" frobnicate;        grep -q "unknown command" "$T/err" || fail "unknown command message"
expect_rc 2 "$P" solve --threads x $D/table1.json; grep -q -- "--threads" "$T/err" || fail "bad --threads message"
expect_rc 2 "$P" solve --bogus $D/table1.json
expect_rc 2 "$P" solve
expect_rc 2 "$P" solve $D/no-such-file.json; grep -q "no-such-file.json: cannot open" "$T/err" || fail "missing file message"

# --- the paper's examples
expect_rc 0 "$P" solve $D/table1.json
pycheck "$T/out" 'j["phi"] == 200' 'j["stats"]["phi_initial"] == 175' \
  'j["allocation"] == {"red": {"s1": 50, "s2": 50}, "blue": {"s1": 50, "s2": 50}}' \
  'isinstance(j["solve_seconds"], float) and 0 <= j["solve_seconds"] < 1' \
  '"limit_allocation" not in j'
cat $D/table2.json | "$P" solve --threads 2 - >"$T/out" 2>"$T/err" || fail "solve from stdin"
pycheck "$T/out" 'j["phi"] == 300' 'j["stats"]["phi_initial"] == 275' 'j["stats"]["longest_path"] == 2'
expect_rc 0 "$P" solve --pretty $D/limits.json
pycheck "$T/out" 'j["phi"] == 110' 'j["limit_phi"] == 90' \
  'sum(j["limit_allocation"]["red"].values()) == 80 - sum(j["allocation"]["red"].values())' \
  'j["limit_allocation"]["idle"] == {}' \
  'all(j["limit_allocation"][b][s] + j["allocation"][b][s] <= d for b, dd in [("red", {"s1": 150, "s2": 50}), ("blue", {"s1": 50, "s2": 100})] for s, d in dd.items())'
[ "$(wc -l <"$T/out")" -gt 10 ] || fail "--pretty output is not indented"
# compact (streamed) and pretty (jansson tree) output say the same
"$P" solve $D/limits.json >"$T/compact.json"
python3 - "$T/out" "$T/compact.json" <<'PY' || fail "compact and pretty solutions differ"
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:])
for x in (a, b):
    x.pop("solve_seconds")
    for s in ("stats", "limit_stats"):
        for k in [k for k in x[s] if k.startswith("t_")]:
            del x[s][k]
assert a == b
PY

# --- every bad input: exit 2 and exactly the expected one-line error
n=0
for f in $D/bad/*.json; do
  n=$((n + 1))
  expect_rc 2 "$P" solve "$f"
  want="bqos-pshift: $f:$(cat "${f%.json}.err")"
  got=$(cat "$T/err")
  [ "$got" = "$want" ] || fail "$f: got '$got', want '$want'"
  [ "$(wc -l <"$T/err")" -eq 1 ] || fail "$f: error is not one line"
  [ -s "$T/out" ] && fail "$f: printed output despite the error"
done
[ $n -ge 30 ] || fail "only $n bad-input fixtures"
# the same through stdin names <stdin>
"$P" solve - <$D/bad/unknown_server.json >/dev/null 2>"$T/err"
grep -q '^bqos-pshift: <stdin>:4:65: buckets\[1\]\.demand\.s9: ' "$T/err" || fail "stdin error line: $(cat "$T/err")"

# --- gen: deterministic, valid, solvable; threads and approximation
expect_rc 0 "$P" gen --servers 16 --buckets 400 --demand-ratio 1.1 --seed 5
cp "$T/out" "$T/g1.json"
"$P" gen --servers 16 --buckets 400 --demand-ratio 1.1 --seed 5 >"$T/g2.json"
cmp -s "$T/g1.json" "$T/g2.json" || fail "gen is not deterministic"
"$P" gen --servers 16 --buckets 400 --demand-ratio 1.1 --seed 6 >"$T/g3.json"
cmp -s "$T/g1.json" "$T/g3.json" && fail "gen ignores --seed"
pycheck "$T/g1.json" 'len(j["servers"]) == 16 and len(j["buckets"]) == 400' \
  'sum(b["reservation"] for b in j["buckets"]) == 16 * 100000' \
  'all(len(b["demand"]) <= 8 for b in j["buckets"])' \
  'j["meta"]["seed"] == 5'
"$P" solve --threads 1 "$T/g1.json" >"$T/s1.json" || fail "solve gen output"
"$P" solve --threads 2 "$T/g1.json" >"$T/s2.json" || fail "solve gen output, 2 threads"
"$P" solve --approx-top 20 "$T/g1.json" >"$T/sa.json" || fail "solve --approx-top"
python3 - "$T/s1.json" "$T/s2.json" "$T/sa.json" "$T/g1.json" <<'PY' || fail "gen/solve consistency"
import json, sys
s1, s2, sa, g = (json.load(open(f)) for f in sys.argv[1:])
assert s1["allocation"] == s2["allocation"], "threads change the allocation"
assert sa["phi"] <= s1["phi"], "approximation beat exact"
cap = {s["name"]: s["capacity"] for s in g["servers"]}
load = dict.fromkeys(cap, 0)
for b in g["buckets"]:
    a = s1["allocation"][b["name"]]
    assert sum(a.values()) == min(b["reservation"], sum(b["demand"].values()))
    for s, n in a.items():
        assert 0 <= n <= b["demand"][s]
        load[s] += n
assert s1["phi"] == sum(min(cap[s], load[s]) for s in cap)
PY
expect_rc 0 "$P" gen --servers 4 --buckets 10 --limit-ratio 2
pycheck "$T/out" 'all(b["limit"] >= b["reservation"] for b in j["buckets"])' \
  'all(len(b["demand"]) <= 4 for b in j["buckets"])'
"$P" gen --servers 4 --buckets 10 --limit-ratio 2 --pretty >"$T/pretty.json"
python3 -c 'import json, sys; sys.exit(json.load(open(sys.argv[1])) != json.load(open(sys.argv[2])))' \
  "$T/out" "$T/pretty.json" || fail "gen --pretty differs from compact"
expect_rc 2 "$P" gen --servers 10 --active 11;      grep -q "active" "$T/err" || fail "gen --active message"
expect_rc 2 "$P" gen --reserved-fraction 1.5;      grep -q "reserved-fraction" "$T/err" || fail "gen --reserved-fraction message"

# --- bench: a quick subset; exact Phi must equal igraph's max-flow
expect_rc 0 "$P" bench --fig 7 --quick --json --quiet
pycheck "$T/out" 'len(j) == 3' 'all(r["phi"] == r["maxflow_phi"] and not r["mismatch"] for r in j)'
expect_rc 2 "$P" bench --fig 8
# --file: one instance from a solve document, first (cold) and fastest solves
expect_rc 0 "$P" bench --file $D/table2.json --repeat 2 --threads-max 2 --json --quiet
pycheck "$T/out" 'len(j) == 2' 'all(r["fig"] == "file" and r["phi"] == 300 == r["maxflow_phi"] for r in j)' \
  'all(r["first_solve_seconds"] > 0 and r["maxflow_first_seconds"] >= 0 for r in j)'
expect_rc 2 "$P" bench --file $D/bad/unknown_server.json
grep -q 'unknown_server.json:4:65: buckets\[1\].demand.s9' "$T/err" || fail "bench --file bad input message"
expect_rc 2 "$P" bench --file $D/no-such-file.json

it_end
