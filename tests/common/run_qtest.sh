#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# ctest runs every Qt Test executable through this script (clusterppl_add_test), because Qt Test
# exits 0 when a function calls QSKIP: without it a skipped test reads as "Passed".
#   run_qtest.sh EXECUTABLE [ARGS...]
# Exit status, read by ctest (SKIP_RETURN_CODE 77):
#   the executable's own status when it failed (77 from a failing executable becomes 1);
#   1 when it printed no "Totals:" line (it crashed before its end or is not a Qt Test);
#   77 ("Skipped") when any function skipped; the reasons are printed last;
#   1 instead of 77 under CI=true when a skip's reason does not start with the GPU marker
#     "no GPU:" (tests/common/test_skip.h): CI has the data, sshd, root and every package.
#   0 otherwise.
set -uo pipefail
readonly kSkipCode=77
readonly kGpuMarker='no GPU:'

if (($# == 0)); then
  echo "run_qtest.sh: usage: run_qtest.sh EXECUTABLE [ARGS...]" >&2
  exit 2
fi
log=$(mktemp "${TMPDIR:-/tmp}/cppl-qtest.XXXXXX") || exit 2
trap 'rm -f "$log"' EXIT

"$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}

if ((rc != 0)); then
  if ((rc > 128)); then
    echo "run_qtest.sh: $1 was killed by signal $((rc - 128))"
  fi
  ((rc == kSkipCode)) && exit 1 # 77 failed functions must not read as a skip
  exit "$rc"
fi

totals=$(grep -E '^Totals: [0-9]+ passed, [0-9]+ failed, [0-9]+ skipped' "$log" | tail -n 1)
if [[ -z "$totals" ]]; then
  echo "run_qtest.sh: $1 exited 0 without Qt Test's \"Totals:\" line: it did not run to its end"
  exit 1
fi
skipped=$(sed -E 's/^Totals: [0-9]+ passed, [0-9]+ failed, ([0-9]+) skipped.*/\1/' <<<"$totals")
passed=$(sed -E 's/^Totals: ([0-9]+) passed.*/\1/' <<<"$totals")
if ((skipped == 0)); then
  if ((passed == 0)); then
    echo "run_qtest.sh: $1 ran no test function"
    exit 1
  fi
  exit 0
fi

# "SKIP   : TestClass::function(row) reason" — one line per skipped function or data row.
mapfile -t skips < <(grep -E '^SKIP   : ' "$log")
others=0
echo "run_qtest.sh: $skipped skipped in $(basename "$1"):"
for line in "${skips[@]}"; do
  echo "  ${line#SKIP   : }"
  [[ "$line" == *" $kGpuMarker"* ]] || others=$((others + 1))
done
if [[ "${CI:-}" == true ]] && ((others > 0)); then
  echo "run_qtest.sh: FAILED under CI=true: $others skip(s) above are not \"$kGpuMarker\" skips; CI has ../shared/data, sshd, root and"
  echo "  every package, so only a missing GPU may skip there (tests/common/test_skip.h, docs/testing.md)"
  exit 1
fi
exit "$kSkipCode"
