#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Checks the test harness itself (ctest: tst_test_harness):
#  1. run_qtest.sh turns each kind of Qt Test ending into the right exit status, with CI=true and without;
#  2. scripts/check-test-report.py reads ctest's JUnit the same way (skips, CI=true, zero tests);
#  3. no test under tests/ calls QSKIP directly: only CPPL_SKIP_NO_GPU / CPPL_SKIP_MISSING (test_skip.h).
#   check_test_harness.sh SOURCE_DIR
set -uo pipefail
src=${1:?usage: check_test_harness.sh SOURCE_DIR}
run="$src/tests/common/run_qtest.sh"
report="$src/scripts/check-test-report.py"
work=$(mktemp -d "${TMPDIR:-/tmp}/cppl-harness.XXXXXX") || exit 2
trap 'rm -rf "$work"' EXIT
failures=0

# A fake Qt Test executable: prints BODY, then exits with CODE.
fake() { # NAME CODE BODY
  printf '#!/usr/bin/env bash\nprintf %%s %q\nexit %s\n' "$3" "$2" >"$work/$1"
  chmod +x "$work/$1"
}
expect() { # WHAT EXPECTED_STATUS CI_VALUE NAME
  local got
  CI="$3" bash "$run" "$work/$4" >"$work/out" 2>&1
  got=$?
  if [[ "$got" != "$2" ]]; then
    echo "FAIL: $1 (CI=$3): exit $got, expected $2; output:"
    sed 's/^/    /' "$work/out"
    failures=$((failures + 1))
  else
    echo "ok:   $1 (CI=$3) -> $got"
  fi
}

pass=$'PASS   : T::initTestCase()\nPASS   : T::a()\nTotals: 2 passed, 0 failed, 0 skipped, 0 blacklisted, 3ms\n'
gpu=$'PASS   : T::initTestCase()\nSKIP   : T::cuda() no GPU: none visible\n   Loc: [t.cpp(1)]\nTotals: 1 passed, 0 failed, 1 skipped, 0 blacklisted, 3ms\n'
data=$'PASS   : T::initTestCase()\nSKIP   : T::f(a row) ../shared/data is not present\nPASS   : T::g()\nTotals: 2 passed, 0 failed, 1 skipped, 0 blacklisted, 3ms\n'
mixed=$'SKIP   : T::cuda() no GPU: none visible\nSKIP   : T::ssh() no /usr/sbin/sshd\nTotals: 0 passed, 0 failed, 2 skipped, 0 blacklisted, 3ms\n'
failed=$'FAIL!  : T::a() nope\nSKIP   : T::b() no GPU: none\nTotals: 1 passed, 1 failed, 1 skipped, 0 blacklisted, 3ms\n'
fake pass 0 "$pass"
fake gpu 0 "$gpu"
fake data 0 "$data"
fake mixed 0 "$mixed"
fake failed 1 "$failed"
fake failed77 77 "$failed"
fake noTotals 0 $'PASS   : T::a()\n'
fake nothingRan 0 $'Totals: 0 passed, 0 failed, 0 skipped, 0 blacklisted, 0ms\n'
fake crashed 139 $'PASS   : T::a()\n'
for ci in false true; do
  expect "every function passed" 0 "$ci" pass
  expect "a GPU skip" 77 "$ci" gpu
  expect "a failure next to a skip" 1 "$ci" failed
  expect "77 failures are not a skip" 1 "$ci" failed77
  expect "no Totals line" 1 "$ci" noTotals
  expect "no test function ran" 1 "$ci" nothingRan
  expect "a crash" 139 "$ci" crashed
done
expect "a data skip" 77 false data
expect "a data skip" 1 true data
expect "a GPU skip next to an sshd skip" 1 true mixed
CI=false bash "$run" "$work/data" >"$work/out" 2>&1
grep -qx '  T::f(a row) ../shared/data is not present' "$work/out" ||
  { echo "FAIL: the skip's reason is not printed"; failures=$((failures + 1)); }

# ctest's JUnit as scripts/test.sh reads it.
junit() { # FILE CASES...   each case: name:status[:output]
  local file=$1
  shift
  {
    echo '<?xml version="1.0" encoding="UTF-8"?>'
    echo "<testsuite name=\"x\" tests=\"$#\">"
    for c in "$@"; do
      IFS=: read -r name status output <<<"$c"
      echo "<testcase name=\"$name\" classname=\"$name\" time=\"0.1\" status=\"$status\">"
      [[ "$status" == notrun ]] && echo '<skipped message="SKIP_RETURN_CODE=77"/>'
      [[ "$status" == fail ]] && echo '<failure message=""/>'
      echo "<system-out>$output</system-out></testcase>"
    done
    echo '</testsuite>'
  } >"$work/$file"
}
expectReport() { # WHAT EXPECTED_STATUS CI_VALUE FILE
  local got
  CI="$3" python3 "$report" "$work/$4" >"$work/out" 2>&1
  got=$?
  if [[ "$got" != "$2" ]]; then
    echo "FAIL: report: $1 (CI=$3): exit $got, expected $2; output:"
    sed 's/^/    /' "$work/out"
    failures=$((failures + 1))
  else
    echo "ok:   report: $1 (CI=$3) -> $got"
  fi
}
junit ok.xml "a:run:fine" "b:run:fine"
junit gpu.xml "a:run:fine" "g:notrun:SKIP   : T::c() no GPU: none"
junit data.xml "a:run:fine" "d:notrun:SKIP   : T::f() ../shared/data is not present"
junit none.xml
junit allskipped.xml "g:notrun:SKIP   : T::c() no GPU: none"
for ci in false true; do
  expectReport "all passed" 0 "$ci" ok.xml
  expectReport "a GPU skip" 0 "$ci" gpu.xml
  expectReport "zero tests" 1 "$ci" none.xml
  expectReport "nothing ran, all skipped" 1 "$ci" allskipped.xml
done
expectReport "a data skip" 0 false data.xml
expectReport "a data skip" 1 true data.xml
expectReport "a missing report" 1 false missing.xml

# Every skip goes through test_skip.h, so that its reason says whether CI may skip it.
raw=$(grep -rnE '\bQSKIP[[:space:]]*\(' "$src/tests" --include='*.cpp' --include='*.h' | grep -v '/tests/common/test_skip.h:')
if [[ -n "$raw" ]]; then
  echo "FAIL: raw QSKIP (use CPPL_SKIP_NO_GPU or CPPL_SKIP_MISSING from tests/common/test_skip.h):"
  echo "$raw" | sed 's/^/    /'
  failures=$((failures + 1))
fi

if ((failures > 0)); then
  echo "$failures harness check(s) failed"
  exit 1
fi
echo "harness: all checks passed"
