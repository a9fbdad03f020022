#!/bin/sh
# run-tests.sh - run every test program and integration script given, report each, fail if any failed.
# Usage: run-tests.sh TEST...   (BIN and O in the environment point at the build)
set -u
pass=0; fail=0; failed=""
for t in "$@"; do
  start=$(date +%s)
  if [ -x "$t" ] && [ "${t%.sh}" = "$t" ]; then
    CK_DEFAULT_TIMEOUT=${CK_DEFAULT_TIMEOUT:-60} "$t"; rc=$?
  else
    sh "$t"; rc=$?
  fi
  secs=$(( $(date +%s) - start ))
  if [ $rc -eq 0 ]; then
    pass=$((pass + 1)); echo "PASS: $t (${secs}s)"
  else
    fail=$((fail + 1)); failed="$failed $t"; echo "FAIL: $t (exit $rc, ${secs}s)"
  fi
done
echo "== $pass passed, $fail failed"
[ $fail -eq 0 ] || { echo "failed:$failed"; exit 1; }
