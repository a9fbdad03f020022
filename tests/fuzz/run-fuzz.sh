#!/bin/sh
# run-fuzz.sh - runs each libFuzzer harness FUZZ_SECONDS on a scratch corpus seeded from tests/fuzz/corpus/NAME/, prints runs, coverage and features per harness, and fails on any crash (the input is kept under $FUZZ_O/crashes/).
#
# Usage: FUZZ_O=build-fuzz FUZZ_SECONDS=30 tests/fuzz/run-fuzz.sh NAME...
set -u
O=${FUZZ_O:-build-fuzz}
S=${FUZZ_SECONDS:-30}
mkdir -p "$O/crashes"
fails=0
printf '%-18s %10s %8s %8s %s\n' harness runs cov ft result
for f in "$@"; do
  work=$(mktemp -d)
  seeds=tests/fuzz/corpus/$f
  [ -d "$seeds" ] && cp "$seeds"/* "$work"/ 2>/dev/null
  log=$O/$f.log
  "$O/$f" -max_total_time="$S" -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
    -artifact_prefix="$O/crashes/$f-" "$work" >"$log" 2>&1
  rc=$?
  last=$(grep -E '^#[0-9]+' "$log" | tail -n 1)
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  cov=$(echo "$last" | sed -n 's/.*cov: \([0-9]*\).*/\1/p')
  ft=$(echo "$last" | sed -n 's/.*ft: \([0-9]*\).*/\1/p')
  if [ $rc -eq 0 ]; then res=ok; else res="CRASH (see $log)"; fails=$((fails + 1)); fi
  printf '%-18s %10s %8s %8s %s\n' "$f" "${runs:-?}" "${cov:-?}" "${ft:-?}" "$res"
  rm -rf "$work"
done
[ $fails -eq 0 ] || { echo "fuzz: $fails harness(es) crashed"; exit 1; }
