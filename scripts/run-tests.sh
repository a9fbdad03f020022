#!/bin/sh
# run-tests.sh - run every test program and integration script given, report each, fail if any failed.
# Usage: run-tests.sh TEST...   (BIN and O in the environment point at the build)
# Test programs (Check suites: executables not named *.sh) run first,
# UNIT_JOBS at a time (default 1: several suites assert on timing - a 0.2 s
# idle timeout, the backend's fail-fast second - and pShift's OpenMP threads
# spin when they share the cores; UNIT_JOBS=2 halves their wall time on an
# idle host), each one's output shown whole, in the order given; integration
# scripts then run one at a time, in the order given.
set -u
pass=0; fail=0; failed=""
jobs=${UNIT_JOBS:-1}

# report T RC SECS: counts and prints the result of T.
report() {
  if [ "$2" -eq 0 ]; then
    pass=$((pass + 1)); echo "PASS: $1 (${3}s)"
  else
    fail=$((fail + 1)); failed="$failed $1"; echo "FAIL: $1 (exit $2, ${3}s)"
  fi
}

units=""; scripts=""
for t in "$@"; do
  if [ -x "$t" ] && [ "${t%.sh}" = "$t" ]; then units="$units $t"; else scripts="$scripts $t"; fi
done

if [ -n "$units" ]; then
  d=$(mktemp -d /tmp/run-tests.XXXXXX) || exit 1
  trap 'rm -rf "$d"' EXIT
  # one: runs suite $2 (number $1) with its output in $0/$1.out, then "RC SECS"
  # in $0/$1.rc (renamed into place); $0 is the scratch directory.
  # shellcheck disable=SC2016 # expanded by the sh -c that runs it
  one='start=$(date +%s); "$2" >"$0/$1.out" 2>&1; rc=$?
    echo "$rc $(( $(date +%s) - start ))" >"$0/$1.tmp"; mv "$0/$1.tmp" "$0/$1.rc"'
  i=0
  for t in $units; do i=$((i + 1)); echo "$i $t"; done |
    CK_DEFAULT_TIMEOUT=${CK_DEFAULT_TIMEOUT:-60} xargs -P "$jobs" -L 1 sh -c "$one" "$d" &
  xargs_pid=$!
  i=0
  for t in $units; do
    i=$((i + 1))
    while [ ! -f "$d/$i.rc" ]; do
      if ! kill -0 "$xargs_pid" 2>/dev/null && [ ! -f "$d/$i.rc" ]; then
        echo "127 0" >"$d/$i.rc" # xargs is gone without running it
      fi
      sleep 0.1
    done
    cat "$d/$i.out" 2>/dev/null
    read -r rc secs <"$d/$i.rc"
    report "$t" "$rc" "$secs"
  done
  wait "$xargs_pid"
fi

for t in $scripts; do
  start=$(date +%s)
  sh "$t"; rc=$?
  report "$t" "$rc" "$(( $(date +%s) - start ))"
done
echo "== $pass passed, $fail failed"
[ $fail -eq 0 ] || { echo "failed:$failed"; exit 1; }
