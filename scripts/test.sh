#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs what is missing, builds (Release) if needed, and runs the whole test suite.
# Extra arguments go to ctest, e.g.  scripts/test.sh -L unit   or   scripts/test.sh -R exact_sum
# Fails when ctest fails, when no test ran, and under CI=true when any test skipped for a reason
# other than a missing GPU (scripts/check-test-report.py reads ctest's JUnit report; docs/testing.md).
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cppl_prepare
cd "$BUILD_DIR"
report="$BUILD_DIR/ctest-junit.xml"
rm -f "$report"
status=0
# Tests with wall-clock bounds are RUN_SERIAL (clusterppl_add_test), so -j stays.
ctest --output-on-failure --timeout 900 -j "$(nproc)" --no-tests=error --output-junit "$report" "$@" || status=$?
python3 "$ROOT/scripts/check-test-report.py" "$report" || status=1
exit "$status"
